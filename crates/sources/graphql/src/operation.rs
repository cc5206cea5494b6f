//! The GraphQL operation behind each imported tool and the document text it sends.
//!
//! A call declares one variable per argument it supplies, typed with the argument's GraphQL
//! type (`query Film($id: ID) { film(id: $id) { title } }`), so values travel as variables and
//! are never spliced into the document. A caller's `_selection` replaces the default selection
//! set; the resulting document is parsed and must hold exactly one operation with exactly one
//! root field, the tool's own, so an override cannot reach other root fields.

use apollo_compiler::ast::{Definition, Selection};
use apollo_compiler::parser::Parser;
use serde_json::{Map, Value};
use toolshed_core::ToolPath;

/// Query or mutation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OperationKind {
    Query,
    Mutation,
}

impl OperationKind {
    /// The GraphQL keyword (`query`, `mutation`), also the tool path's second segment.
    pub fn keyword(self) -> &'static str {
        match self {
            OperationKind::Query => "query",
            OperationKind::Mutation => "mutation",
        }
    }
}

/// One argument of the root field: its name and GraphQL type as written (`[ID!]!`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Argument {
    pub name: String,
    pub graphql_type: String,
}

/// Everything needed to call one root field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphqlOperation {
    /// The tool path, e.g. `swapi.query.all_films`.
    pub path: ToolPath,
    pub kind: OperationKind,
    /// The root field's name in the schema.
    pub field: String,
    pub arguments: Vec<Argument>,
    /// The default selection set (`{ ... }`), or `None` when the field returns a scalar or enum.
    pub default_selection: Option<String>,
}

impl GraphqlOperation {
    /// The document for a call with these arguments (no `_selection` key) and optional selection.
    ///
    /// Unknown argument names and a selection on a leaf field are errors, as is an override that
    /// does not parse to a single operation on this tool's field.
    pub fn document(
        &self,
        args: &Map<String, Value>,
        selection: Option<&str>,
    ) -> Result<String, String> {
        if let Some(unknown) = args
            .keys()
            .find(|k| !self.arguments.iter().any(|a| &a.name == *k))
        {
            return Err(format!(
                "unknown argument '{unknown}' for GraphQL field '{}'",
                self.field
            ));
        }
        let used: Vec<&Argument> = self
            .arguments
            .iter()
            .filter(|a| args.contains_key(&a.name))
            .collect();
        let mut doc =
            String::with_capacity(64 + self.default_selection.as_ref().map_or(0, String::len));
        doc.push_str(self.kind.keyword());
        doc.push(' ');
        doc.push_str(&operation_name(&self.field));
        if !used.is_empty() {
            let decls: Vec<String> = used
                .iter()
                .map(|a| format!("${}: {}", a.name, a.graphql_type))
                .collect();
            doc.push('(');
            doc.push_str(&decls.join(", "));
            doc.push(')');
        }
        doc.push_str(" { ");
        doc.push_str(&self.field);
        if !used.is_empty() {
            let pass: Vec<String> = used.iter().map(|a| format!("{0}: ${0}", a.name)).collect();
            doc.push('(');
            doc.push_str(&pass.join(", "));
            doc.push(')');
        }
        let checked = selection.is_some();
        match (selection, &self.default_selection) {
            (Some(_), None) => {
                return Err(format!(
                    "'{}' returns a scalar value: '_selection' is not allowed",
                    self.field
                ))
            }
            (Some(custom), Some(_)) => {
                let inner = strip_braces(custom.trim()).trim();
                if inner.is_empty() {
                    return Err("'_selection' is empty".into());
                }
                doc.push_str(" { ");
                doc.push_str(inner);
                doc.push_str(" }");
            }
            (None, Some(default)) => {
                doc.push(' ');
                doc.push_str(default);
            }
            (None, None) => {}
        }
        doc.push_str(" }");
        if checked {
            self.check_single_field(&doc)?;
        }
        Ok(doc)
    }

    fn check_single_field(&self, doc: &str) -> Result<(), String> {
        let parsed = Parser::new()
            .recursion_limit(200)
            .parse_ast(doc, "selection.graphql")
            .map_err(|e| {
                let first = e
                    .errors
                    .iter()
                    .next()
                    .map(|d| d.error.to_string())
                    .unwrap_or_default();
                format!("'_selection' is not a valid selection set: {first}")
            })?;
        let ok = match parsed.definitions.as_slice() {
            [Definition::OperationDefinition(op)] => match op.selection_set.as_slice() {
                [Selection::Field(f)] => f.alias.is_none() && f.name.as_str() == self.field,
                _ => false,
            },
            _ => false,
        };
        if ok {
            Ok(())
        } else {
            Err(format!(
                "'_selection' must be a selection set inside '{}' only (balanced braces, no fragments definitions)",
                self.field
            ))
        }
    }
}

fn strip_braces(s: &str) -> &str {
    match s.strip_prefix('{').and_then(|r| r.strip_suffix('}')) {
        Some(inner) => inner,
        None => s,
    }
}

/// `allFilms` → `AllFilms`: the operation name sent to the server.
fn operation_name(field: &str) -> String {
    let mut c = field.chars();
    match c.next() {
        Some(f) => f.to_ascii_uppercase().to_string() + c.as_str(),
        None => "Operation".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn op() -> GraphqlOperation {
        GraphqlOperation {
            path: ToolPath::parse("s.query.film").unwrap(),
            kind: OperationKind::Query,
            field: "film".into(),
            arguments: vec![
                Argument {
                    name: "id".into(),
                    graphql_type: "ID".into(),
                },
                Argument {
                    name: "ids".into(),
                    graphql_type: "[ID!]!".into(),
                },
            ],
            default_selection: Some("{ title }".into()),
        }
    }

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn declares_only_supplied_variables() {
        let o = op();
        assert_eq!(
            o.document(&Map::new(), None).unwrap(),
            "query Film { film { title } }"
        );
        assert_eq!(
            o.document(&obj(json!({"ids": ["1"]})), None).unwrap(),
            "query Film($ids: [ID!]!) { film(ids: $ids) { title } }"
        );
        assert!(o.document(&obj(json!({"nope": 1})), None).is_err());
    }

    #[test]
    fn selection_overrides_are_confined_to_the_field() {
        let o = op();
        assert_eq!(
            o.document(&Map::new(), Some("{ title director }")).unwrap(),
            "query Film { film { title director } }"
        );
        assert_eq!(
            o.document(&Map::new(), Some("title")).unwrap(),
            "query Film { film { title } }"
        );
        assert!(o.document(&Map::new(), Some("title } other { x")).is_err());
        assert!(o
            .document(&Map::new(), Some("title } } query X { y"))
            .is_err());
        assert!(o.document(&Map::new(), Some("{ title")).is_err());
        assert!(o.document(&Map::new(), Some("  ")).is_err());
    }
}
