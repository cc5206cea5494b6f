//! JSON Schemas for GraphQL arguments.
//!
//! Built-in scalars map to JSON types (`Int` → integer, `Float` → number, `String`/`ID` →
//! string, `Boolean` → boolean), custom scalars to a permissive schema whose description names
//! the scalar, enums to string enums, lists to arrays. Input objects become entries of the tool
//! schema's `$defs`, referred to with `$ref`, so recursive input types are described once.
//! Arguments (and input fields) of non-null type without a default value are required.

use std::collections::{HashMap, HashSet};

use apollo_compiler::ast::{InputValueDefinition, Type, Value as GqlValue};
use apollo_compiler::schema::ExtendedType;
use apollo_compiler::{Name, Node, Schema};
use serde_json::{json, Map, Value};

/// One input object rendered as a `$defs` entry, with the input objects it refers to.
struct Def {
    schema: Value,
    refs: Vec<Name>,
}

/// Builds argument schemas, remembering every input object it has rendered.
pub(crate) struct InputSchemas<'a> {
    schema: &'a Schema,
    defs: HashMap<Name, Def>,
}

impl<'a> InputSchemas<'a> {
    pub(crate) fn new(schema: &'a Schema) -> Self {
        Self {
            schema,
            defs: HashMap::new(),
        }
    }

    /// The object schema of a field's arguments, plus `extra` properties (such as `_selection`).
    pub(crate) fn arguments(
        &mut self,
        args: &[Node<InputValueDefinition>],
        extra: Option<(&str, Value)>,
    ) -> Value {
        let mut properties = Map::new();
        let mut required = Vec::new();
        let mut refs = Vec::new();
        for arg in args {
            properties.insert(arg.name.to_string(), self.value_schema(arg, &mut refs));
            if is_required(arg) {
                required.push(Value::String(arg.name.to_string()));
            }
        }
        if let Some((name, schema)) = extra {
            properties.insert(name.to_string(), schema);
        }
        let mut out = Map::new();
        out.insert("type".into(), json!("object"));
        out.insert("properties".into(), Value::Object(properties));
        if !required.is_empty() {
            out.insert("required".into(), Value::Array(required));
        }
        out.insert("additionalProperties".into(), json!(false));
        let defs = self.closure(refs);
        if !defs.is_empty() {
            out.insert("$defs".into(), Value::Object(defs));
        }
        Value::Object(out)
    }

    /// Every input object reachable from `start`, rendered once each.
    fn closure(&mut self, start: Vec<Name>) -> Map<String, Value> {
        let mut out = Map::new();
        let mut seen: HashSet<Name> = HashSet::new();
        let mut stack = start;
        while let Some(name) = stack.pop() {
            if !seen.insert(name.clone()) {
                continue;
            }
            self.ensure_def(&name);
            let def = &self.defs[&name];
            out.insert(name.to_string(), def.schema.clone());
            stack.extend(def.refs.iter().filter(|r| !seen.contains(*r)).cloned());
        }
        out.sort_keys();
        out
    }

    fn ensure_def(&mut self, name: &Name) {
        if self.defs.contains_key(name) {
            return;
        }
        let mut refs = Vec::new();
        let schema = match self.schema.types.get(name) {
            Some(ExtendedType::InputObject(obj)) => {
                let mut properties = Map::new();
                let mut required = Vec::new();
                for field in obj.fields.values() {
                    properties.insert(field.name.to_string(), self.value_schema(field, &mut refs));
                    if is_required(field) {
                        required.push(Value::String(field.name.to_string()));
                    }
                }
                let mut out = Map::new();
                out.insert("type".into(), json!("object"));
                if let Some(d) = &obj.description {
                    out.insert("description".into(), json!(d.trim()));
                }
                out.insert("properties".into(), Value::Object(properties));
                if !required.is_empty() {
                    out.insert("required".into(), Value::Array(required));
                }
                if obj.directives.get("oneOf").is_some() {
                    out.insert("minProperties".into(), json!(1));
                    out.insert("maxProperties".into(), json!(1));
                }
                out.insert("additionalProperties".into(), json!(false));
                Value::Object(out)
            }
            _ => json!({"description": format!("unknown input type `{name}`")}),
        };
        self.defs.insert(name.clone(), Def { schema, refs });
    }

    /// The schema of one argument or input field, with its description and default.
    fn value_schema(&self, def: &InputValueDefinition, refs: &mut Vec<Name>) -> Value {
        let mut schema = self.type_schema(&def.ty, refs);
        if let Value::Object(map) = &mut schema {
            let mut description = def
                .description
                .as_ref()
                .map(|d| d.trim().to_string())
                .unwrap_or_default();
            if let Some(reason) = deprecation(&def.directives) {
                if !description.is_empty() {
                    description.push(' ');
                }
                description.push_str(&format!("Deprecated: {reason}"));
            }
            if !description.is_empty() {
                // Keep a scalar's own description after the field's.
                let combined = match map.get("description").and_then(Value::as_str) {
                    Some(existing) => format!("{description} ({existing})"),
                    None => description,
                };
                map.insert("description".into(), Value::String(combined));
            }
            if let Some(default) = &def.default_value {
                map.insert("default".into(), gql_value_to_json(default));
            }
        }
        schema
    }

    fn type_schema(&self, ty: &Type, refs: &mut Vec<Name>) -> Value {
        match ty {
            Type::Named(n) | Type::NonNullNamed(n) => self.named_schema(n, refs),
            Type::List(inner) | Type::NonNullList(inner) => {
                json!({"type": "array", "items": self.type_schema(inner, refs)})
            }
        }
    }

    fn named_schema(&self, name: &Name, refs: &mut Vec<Name>) -> Value {
        match name.as_str() {
            "Int" => return json!({"type": "integer"}),
            "Float" => return json!({"type": "number"}),
            "String" | "ID" => return json!({"type": "string"}),
            "Boolean" => return json!({"type": "boolean"}),
            _ => {}
        }
        match self.schema.types.get(name) {
            Some(ExtendedType::Enum(e)) => {
                let values: Vec<Value> = e.values.keys().map(|v| json!(v.as_str())).collect();
                let mut out = json!({"type": "string", "enum": values});
                if let Some(d) = &e.description {
                    out["description"] = json!(format!("{name}: {}", d.trim()));
                }
                out
            }
            Some(ExtendedType::InputObject(_)) => {
                refs.push(name.clone());
                json!({"$ref": format!("#/$defs/{name}")})
            }
            Some(ExtendedType::Scalar(s)) => {
                let mut text = format!("GraphQL scalar `{name}`");
                if let Some(d) = &s.description {
                    text.push_str(": ");
                    text.push_str(d.trim());
                }
                json!({ "description": text })
            }
            _ => json!({"description": format!("GraphQL type `{name}`")}),
        }
    }
}

/// Non-null without a default value.
pub(crate) fn is_required(def: &InputValueDefinition) -> bool {
    def.ty.is_non_null() && def.default_value.is_none()
}

/// The reason of a `@deprecated` directive, if present.
pub(crate) fn deprecation(directives: &apollo_compiler::ast::DirectiveList) -> Option<String> {
    let d = directives.get("deprecated")?;
    let reason = d
        .specified_argument_by_name("reason")
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| "no longer supported".to_string());
    Some(reason)
}

/// A constant GraphQL value as JSON (enum values become strings).
pub(crate) fn gql_value_to_json(v: &GqlValue) -> Value {
    match v {
        GqlValue::Null | GqlValue::Variable(_) => Value::Null,
        GqlValue::Enum(n) => json!(n.as_str()),
        GqlValue::String(s) => json!(s),
        GqlValue::Boolean(b) => json!(b),
        GqlValue::Int(i) => i
            .as_str()
            .parse::<i64>()
            .map(Value::from)
            .unwrap_or_else(|_| json!(i.as_str())),
        GqlValue::Float(f) => f
            .try_to_f64()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map(Value::Number)
            .unwrap_or_else(|| json!(f.as_str())),
        GqlValue::List(items) => Value::Array(items.iter().map(|i| gql_value_to_json(i)).collect()),
        GqlValue::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(k, v)| (k.to_string(), gql_value_to_json(v)))
                .collect(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SDL: &str = r#"
        type Query { find(filter: Filter!, limit: Int = 10, order: Order, tags: [String!]!, at: Date): Int }
        "A date."
        scalar Date
        enum Order { ASC DESC }
        input Filter { name: String, and: [Filter!], range: Range! }
        input Range { from: Int!, to: Int }
    "#;

    fn args_schema() -> Value {
        let schema = Schema::parse(SDL, "t.graphql").unwrap();
        let field = &schema.get_object("Query").unwrap().fields["find"];
        InputSchemas::new(&schema).arguments(&field.arguments, None)
    }

    #[test]
    fn required_defaults_enums_lists_and_scalars() {
        let s = args_schema();
        assert_eq!(s["required"], json!(["filter", "tags"]));
        assert_eq!(
            s["properties"]["limit"],
            json!({"type": "integer", "default": 10})
        );
        assert_eq!(s["properties"]["order"]["enum"], json!(["ASC", "DESC"]));
        assert_eq!(s["properties"]["tags"]["items"]["type"], "string");
        let at = s["properties"]["at"]["description"].as_str().unwrap();
        assert!(at.contains("Date") && at.contains("A date."), "{at}");
        assert!(s["properties"]["at"].get("type").is_none());
    }

    #[test]
    fn recursive_input_objects_use_defs() {
        let s = args_schema();
        assert_eq!(s["properties"]["filter"]["$ref"], "#/$defs/Filter");
        let defs = s["$defs"].as_object().unwrap();
        assert_eq!(defs.len(), 2);
        assert_eq!(
            defs["Filter"]["properties"]["and"]["items"]["$ref"],
            "#/$defs/Filter"
        );
        assert_eq!(defs["Filter"]["required"], json!(["range"]));
        assert_eq!(defs["Range"]["required"], json!(["from"]));
        let compiled = toolshed_core::CompiledSchema::compile(&s).unwrap();
        assert!(compiled.is_valid(&json!({
            "filter": {"range": {"from": 1}, "and": [{"range": {"from": 2}}]},
            "tags": []
        })));
        assert!(!compiled.is_valid(&json!({"filter": {"and": [{}]}, "tags": []})));
    }
}
