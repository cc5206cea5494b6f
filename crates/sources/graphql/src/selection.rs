//! Default selection sets and the loose output schemas that describe them.
//!
//! A field returning an object selects the object's scalar and enum fields; object-valued fields
//! are expanded the same way while the nesting stays within `selection_depth` levels (the field's
//! own type is level 1). Fields with required arguments are skipped, and so are objects that end
//! up with nothing to select. Interfaces select `__typename` and their own leaf fields; unions
//! select `__typename` plus an inline fragment of leaf fields for each member (at most
//! [`MAX_UNION_FRAGMENTS`] members; the rest are identified by `__typename` only).

use std::collections::HashMap;
use std::rc::Rc;

use apollo_compiler::ast::{FieldDefinition, Type};
use apollo_compiler::schema::ExtendedType;
use apollo_compiler::{Name, Node, Schema};
use serde_json::{json, Map, Value};

type FieldMap = apollo_compiler::collections::IndexMap<Name, Node<FieldDefinition>>;

/// Members of a union given an inline fragment in a default selection.
pub const MAX_UNION_FRAGMENTS: usize = 25;

/// A selection set (`{ a b { c } }`) and the JSON Schema of the object it returns.
#[derive(Debug, Clone)]
pub(crate) struct Selection {
    pub text: String,
    pub schema: Value,
}

/// Builds default selections, memoised by type and level.
pub(crate) struct Selections<'a> {
    schema: &'a Schema,
    depth: usize,
    memo: HashMap<(Name, usize), Option<Rc<Selection>>>,
}

impl<'a> Selections<'a> {
    pub(crate) fn new(schema: &'a Schema, depth: usize) -> Self {
        Self {
            schema,
            depth: depth.max(1),
            memo: HashMap::new(),
        }
    }

    /// Whether values of this named type need a selection set.
    pub(crate) fn is_composite(&self, name: &str) -> bool {
        matches!(
            self.schema.types.get(name),
            Some(ExtendedType::Object(_) | ExtendedType::Interface(_) | ExtendedType::Union(_))
        )
    }

    /// The default selection of a root field's type; `__typename` if nothing else is selectable.
    pub(crate) fn for_root(&mut self, type_name: &Name) -> Rc<Selection> {
        self.for_type(type_name, 1).unwrap_or_else(|| {
            Rc::new(Selection {
                text: "{ __typename }".into(),
                schema: json!({"type": "object", "properties": {"__typename": {"type": "string"}}}),
            })
        })
    }

    fn for_type(&mut self, name: &Name, level: usize) -> Option<Rc<Selection>> {
        let key = (name.clone(), level);
        if let Some(hit) = self.memo.get(&key) {
            return hit.clone();
        }
        let built = self.build(name, level).map(Rc::new);
        self.memo.insert(key, built.clone());
        built
    }

    fn build(&mut self, name: &Name, level: usize) -> Option<Selection> {
        let schema = self.schema;
        match schema.types.get(name)? {
            ExtendedType::Object(o) => self.fields(&o.fields, level, false),
            ExtendedType::Interface(i) => self.fields(&i.fields, level, true),
            ExtendedType::Union(u) => {
                let mut text = String::from("{ __typename");
                let mut props = Map::new();
                props.insert("__typename".into(), json!({"type": "string"}));
                for member in u.members.iter().take(MAX_UNION_FRAGMENTS) {
                    let Some(obj) = schema.get_object(member) else {
                        continue;
                    };
                    let leaves = self.leaf_fields(&obj.fields, &mut props);
                    if !leaves.is_empty() {
                        text.push_str(&format!(" ... on {member} {{ {leaves} }}"));
                    }
                }
                text.push_str(" }");
                Some(Selection {
                    text,
                    schema: object_schema(props),
                })
            }
            _ => None,
        }
    }

    /// `a b c` for the leaf fields without required arguments; adds their schemas to `props`.
    fn leaf_fields(&self, fields: &FieldMap, props: &mut Map<String, Value>) -> String {
        let mut names = Vec::new();
        for field in fields.values() {
            if !selectable(field) || self.is_composite(field.ty.inner_named_type()) {
                continue;
            }
            names.push(field.name.as_str());
            props
                .entry(field.name.to_string())
                .or_insert_with(|| wrap(&field.ty, self.leaf_schema(field.ty.inner_named_type())));
        }
        names.join(" ")
    }

    fn fields(&mut self, fields: &FieldMap, level: usize, typename: bool) -> Option<Selection> {
        let mut parts: Vec<String> = Vec::new();
        let mut props = Map::new();
        if typename {
            parts.push("__typename".into());
            props.insert("__typename".into(), json!({"type": "string"}));
        }
        let mut any = false;
        for field in fields.values() {
            if !selectable(field) {
                continue;
            }
            let inner = field.ty.inner_named_type();
            if self.is_composite(inner) {
                if level >= self.depth {
                    continue;
                }
                if let Some(sub) = self.for_type(inner, level + 1) {
                    parts.push(format!("{} {}", field.name, sub.text));
                    props.insert(field.name.to_string(), wrap(&field.ty, sub.schema.clone()));
                    any = true;
                }
            } else {
                parts.push(field.name.to_string());
                props.insert(
                    field.name.to_string(),
                    wrap(&field.ty, self.leaf_schema(inner)),
                );
                any = true;
            }
        }
        if !any {
            return None;
        }
        Some(Selection {
            text: format!("{{ {} }}", parts.join(" ")),
            schema: object_schema(props),
        })
    }

    /// Output schema of a scalar or enum.
    pub(crate) fn leaf_schema(&self, name: &str) -> Value {
        match name {
            "Int" => json!({"type": "integer"}),
            "Float" => json!({"type": "number"}),
            "String" | "ID" => json!({"type": "string"}),
            "Boolean" => json!({"type": "boolean"}),
            _ => match self.schema.types.get(name) {
                Some(ExtendedType::Enum(e)) => {
                    let values: Vec<Value> = e.values.keys().map(|v| json!(v.as_str())).collect();
                    json!({"type": "string", "enum": values})
                }
                _ => json!({"description": format!("GraphQL scalar `{name}`")}),
            },
        }
    }
}

/// The output schema for a value of type `ty` whose named type is described by `inner`:
/// arrays for lists, `null` allowed where the type is nullable.
pub(crate) fn wrap(ty: &Type, inner: Value) -> Value {
    let base = match ty {
        Type::Named(_) | Type::NonNullNamed(_) => inner,
        Type::List(item) | Type::NonNullList(item) => {
            json!({"type": "array", "items": wrap(item, inner)})
        }
    };
    if ty.is_non_null() {
        base
    } else {
        nullable(base)
    }
}

fn nullable(mut schema: Value) -> Value {
    if let Some(map) = schema.as_object_mut() {
        match map.get("type").cloned() {
            Some(Value::String(t)) => {
                map.insert("type".into(), json!([t, "null"]));
                if let Some(Value::Array(values)) = map.get_mut("enum") {
                    values.push(Value::Null);
                }
            }
            Some(_) => {}
            None => {} // already permissive
        }
    }
    schema
}

fn object_schema(props: Map<String, Value>) -> Value {
    json!({"type": "object", "properties": props})
}

/// A field can be selected by default when it is not introspection and needs no arguments.
fn selectable(field: &Node<FieldDefinition>) -> bool {
    !field.name.starts_with("__") && !field.arguments.iter().any(|a| crate::input::is_required(a))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SDL: &str = r#"
        type Query { me: User, search(q: String!): [Hit!]! }
        type User implements Node { id: ID! name: String role: Role! friends(first: Int): [User] posts(order: String!): [Post] avatar: Image }
        type Image { url: String }
        type Post { title: String }
        interface Node { id: ID! }
        enum Role { ADMIN USER }
        union Hit = User | Post
    "#;

    fn schema() -> Schema {
        Schema::parse(SDL, "s.graphql").unwrap()
    }

    #[test]
    fn objects_nest_to_the_depth_and_skip_required_args() {
        let s = schema();
        let mut sel = Selections::new(&s, 2);
        let user = Name::new("User").unwrap();
        let got = sel.for_root(&user);
        assert_eq!(
            got.text,
            "{ id name role friends { id name role } avatar { url } }"
        );
        assert_eq!(
            got.schema["properties"]["role"]["enum"],
            json!(["ADMIN", "USER"])
        );
        assert_eq!(
            got.schema["properties"]["friends"]["type"],
            json!(["array", "null"])
        );
        let mut flat = Selections::new(&s, 1);
        assert_eq!(flat.for_root(&user).text, "{ id name role }");
    }

    #[test]
    fn unions_use_typename_and_fragments() {
        let s = schema();
        let mut sel = Selections::new(&s, 2);
        let got = sel.for_root(&Name::new("Hit").unwrap());
        assert_eq!(
            got.text,
            "{ __typename ... on User { id name role } ... on Post { title } }"
        );
        let node = sel.for_root(&Name::new("Node").unwrap());
        assert_eq!(node.text, "{ __typename id }");
    }
}
