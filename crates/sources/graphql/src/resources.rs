//! Query fields as MCP resources (`resources = [dot-globs]` on a GraphQL source): each query
//! tool whose path matches also becomes a resource entry ([`EntryKind::Resource`]) at
//! `<tool path>_resource`.
//!
//! | query field | resource |
//! |---|---|
//! | no required argument | `graphql://<source>/<field>` |
//! | required scalar arguments | the template `graphql://<source>/<field>/{arg1}/{arg2}` (in declaration order) |
//!
//! Reading runs the query with the default selection (optional arguments left out) and answers
//! `{contents: [{uri, mimeType: "application/json", text}]}` with the `data` object. Mutations,
//! and queries that require a non-scalar argument, are not made resources; the import says why.

use std::sync::Arc;

use apollo_compiler::schema::FieldDefinition;
use serde_json::{json, Map, Value};
use toolshed_core::{
    Annotations, EntryKind, Pattern, Tool, ToolContext, ToolDef, ToolError, ToolHandler, ToolPath,
};

use crate::{GraphqlHandler, OperationKind};

/// Whether the tool at `path` is to be a resource too.
pub(crate) fn wanted(patterns: &[Pattern], path: &str) -> bool {
    patterns.iter().any(|p| p.matches(path))
}

const SCALARS: [&str; 5] = ["ID", "String", "Int", "Float", "Boolean"];

/// The resource entry of a matched query field, or why it cannot be one.
pub(crate) fn resource_entry(
    ns: &str,
    def: &ToolDef,
    field: &FieldDefinition,
    kind: OperationKind,
    handler: GraphqlHandler,
) -> Result<Tool, String> {
    let path = def.path.as_str();
    if kind != OperationKind::Query {
        return Err(format!("{path}: only queries can be resources"));
    }
    let mut args = Vec::new();
    for a in field.arguments.iter().filter(|a| a.is_required()) {
        let ty = a.ty.inner_named_type().as_str();
        if a.ty.is_list() || !SCALARS.contains(&ty) {
            return Err(format!(
                "{path}: its required argument '{}' ({}) cannot be a URI segment",
                a.name, a.ty
            ));
        }
        args.push((a.name.to_string(), ty.to_string()));
    }
    let mut uri = format!("graphql://{ns}/{}", field.name);
    for (name, _) in &args {
        uri.push_str(&format!("/{{{name}}}"));
    }
    let entry = ToolPath::parse(&format!("{path}_resource")).map_err(|e| format!("{path}: {e}"))?;
    let mut native = Map::new();
    native.insert(
        if args.is_empty() {
            "uri"
        } else {
            "uriTemplate"
        }
        .into(),
        json!(uri),
    );
    native.insert("name".into(), json!(entry.as_str()));
    native.insert("title".into(), json!(def.name));
    native.insert("description".into(), json!(def.description));
    native.insert("mimeType".into(), json!("application/json"));
    let mut d = ToolDef::new(entry, def.name.clone(), def.description.clone())
        .with_annotations(Annotations::READ_ONLY)
        .with_input(match args.is_empty() {
            true => json!({"type": "object", "properties": {}, "additionalProperties": false}),
            false => json!({
                "type": "object",
                "properties": {"uri": {"type": "string", "description": format!("A URI of the form {uri}")}},
                "required": ["uri"],
                "additionalProperties": false
            }),
        });
    d.kind = EntryKind::Resource;
    d.origin = def.origin.clone();
    d.native = Some(Value::Object(native));
    Ok(Tool::new(
        d,
        Arc::new(QueryResource {
            template: uri,
            args,
            query: handler,
        }),
    ))
}

/// Reads a resource by running its query.
struct QueryResource {
    template: String,
    /// The required arguments, in URI order, with their scalar types.
    args: Vec<(String, String)>,
    query: GraphqlHandler,
}

/// The argument values a URI carries, typed for the query; `None` when the URI does not have
/// the template's form or a value does not fit its type.
fn arguments(template: &str, args: &[(String, String)], uri: &str) -> Option<Map<String, Value>> {
    let fixed = template.split("/{").next().unwrap_or(template);
    let rest = uri.strip_prefix(fixed)?;
    let values: Vec<&str> = match rest {
        "" => vec![],
        r => r.strip_prefix('/')?.split('/').collect(),
    };
    if values.len() != args.len() {
        return None;
    }
    let mut out = Map::new();
    for ((name, ty), raw) in args.iter().zip(values) {
        let text = percent_encoding::percent_decode_str(raw)
            .decode_utf8()
            .ok()?;
        if text.is_empty() {
            return None;
        }
        let value = match ty.as_str() {
            "Int" => json!(text.parse::<i64>().ok()?),
            "Float" => json!(text.parse::<f64>().ok()?),
            "Boolean" => json!(text.parse::<bool>().ok()?),
            _ => json!(text),
        };
        out.insert(name.clone(), value);
    }
    Some(out)
}

#[async_trait::async_trait]
impl ToolHandler for QueryResource {
    async fn call(&self, ctx: ToolContext, args: Value) -> Result<Value, ToolError> {
        let uri = args
            .get("uri")
            .and_then(Value::as_str)
            .map_or_else(|| self.template.clone(), str::to_string);
        let call = arguments(&self.template, &self.args, &uri).ok_or_else(|| {
            ToolError::invalid(format!(
                "'{}' is not a URI of the form {}",
                &uri[..uri.floor_char_boundary(300)],
                self.template
            ))
        })?;
        let data = self.query.call(ctx, Value::Object(call)).await?;
        let text = serde_json::to_string(&data).unwrap_or_default();
        Ok(json!({"contents": [{"uri": uri, "mimeType": "application/json", "text": text}]}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_carry_typed_arguments() {
        let args = vec![
            ("id".to_string(), "ID".to_string()),
            ("n".to_string(), "Int".to_string()),
        ];
        let t = "graphql://shop/product/{id}/{n}";
        let got = arguments(t, &args, "graphql://shop/product/a%2Fb/3").unwrap();
        assert_eq!(Value::Object(got), json!({"id": "a/b", "n": 3}));
        assert!(arguments(t, &args, "graphql://shop/product/a/x").is_none());
        assert!(arguments(t, &args, "graphql://shop/product/a").is_none());
        assert!(arguments(t, &args, "graphql://shop/other/a/1").is_none());
        assert_eq!(
            arguments("graphql://shop/me", &[], "graphql://shop/me"),
            Some(Map::new())
        );
    }
}
