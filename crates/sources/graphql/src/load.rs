//! Turns schema text into an [`apollo_compiler::Schema`].
//!
//! Syntax errors are fatal and name the line and column. Problems found while assembling the
//! schema (a field defined twice, an extension of an unknown type, ...) do not stop the import:
//! the partial schema is used and each problem becomes a warning.

use apollo_compiler::parser::Parser;
use apollo_compiler::Schema;
use serde::Deserialize;
use serde_json::Value;

use crate::error::GraphqlError;

/// A schema and the problems that were tolerated while building it.
pub(crate) struct ParsedSchema {
    pub schema: Schema,
    pub warnings: Vec<String>,
}

/// Parses SDL leniently.
pub(crate) fn from_sdl(sdl: &str, source_name: &str) -> Result<ParsedSchema, GraphqlError> {
    let document = match Parser::new().parse_ast(sdl, source_name) {
        Ok(doc) => doc,
        Err(with_errors) => {
            let first = with_errors.errors.iter().next();
            let (line, column, message) = match first {
                Some(d) => {
                    let (line, column) = d
                        .line_column_range()
                        .map(|r| (r.start.line, r.start.column))
                        .unwrap_or((0, 0));
                    (line, column, d.error.to_string())
                }
                None => (0, 0, "unknown syntax error".to_string()),
            };
            return Err(GraphqlError::Syntax {
                line,
                column,
                message,
            });
        }
    };
    let built = Schema::builder()
        .adopt_orphan_extensions()
        .ignore_builtin_redefinitions()
        .add_ast(&document)
        .build();
    match built {
        Ok(schema) => Ok(ParsedSchema {
            schema,
            warnings: Vec::new(),
        }),
        Err(with_errors) => {
            let warnings = with_errors
                .errors
                .iter()
                .map(|d| match d.line_column_range() {
                    Some(r) => format!(
                        "{source_name}:{}:{}: {}",
                        r.start.line, r.start.column, d.error
                    ),
                    None => format!("{source_name}: {}", d.error),
                })
                .collect();
            Ok(ParsedSchema {
                schema: with_errors.partial,
                warnings,
            })
        }
    }
}

/// Converts an introspection result (`{"__schema": ...}` or `{"data": {"__schema": ...}}`) to SDL.
pub(crate) fn introspection_to_sdl(json: &Value) -> Result<String, GraphqlError> {
    let root = match json.get("data") {
        Some(data) if data.get("__schema").is_some() => data,
        _ => json,
    };
    if root.get("__schema").is_none() {
        let found: Vec<&str> = root
            .as_object()
            .map(|o| o.keys().map(String::as_str).take(5).collect())
            .unwrap_or_default();
        return Err(GraphqlError::Introspection(format!(
            "expected an object with `__schema` (or `data.__schema`), found keys {found:?}"
        )));
    }
    let query = cynic_introspection::IntrospectionQuery::deserialize(root)
        .map_err(|e| GraphqlError::Introspection(e.to_string()))?;
    let schema = query
        .into_schema()
        .map_err(|e| GraphqlError::Introspection(e.to_string()))?;
    Ok(schema.to_sdl())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn syntax_errors_name_the_location() {
        let e = from_sdl("type Query {\n  a: Int\n  b(: Int\n}", "x.graphql")
            .err()
            .expect("syntax error");
        match e {
            GraphqlError::Syntax { line, .. } => assert_eq!(line, 3),
            other => panic!("unexpected {other}"),
        }
    }

    #[test]
    fn duplicate_fields_are_warnings() {
        let loaded = from_sdl("type Query { a: Int a: Int b: String }", "d.graphql").unwrap();
        assert_eq!(loaded.warnings.len(), 1, "{:?}", loaded.warnings);
        assert!(loaded.warnings[0].contains('a'), "{:?}", loaded.warnings);
        let q = loaded.schema.get_object("Query").unwrap();
        assert!(q.fields.contains_key("b"));
    }

    #[test]
    fn wrong_introspection_shape_is_explained() {
        let e = introspection_to_sdl(&json!({"types": []})).unwrap_err();
        assert!(e.to_string().contains("__schema"), "{e}");
        let e = introspection_to_sdl(&json!({"__schema": {"types": 3}})).unwrap_err();
        assert!(matches!(e, GraphqlError::Introspection(_)));
    }
}
