//! Read-only operations as MCP resources (`resources = [dot-globs]` on an OpenAPI source): each
//! GET operation whose tool path matches a pattern also becomes a resource entry
//! ([`EntryKind::Resource`]) at `<tool path>_resource`, so resource-aware clients of a virtual
//! server can list and read it.
//!
//! | operation | resource |
//! |---|---|
//! | no path parameter | `openapi://<source><path>`, e.g. `openapi://petstore/pets` |
//! | path parameters | the template `openapi://<source>/pets/{petId}` |
//!
//! Reading calls the operation with the URI's path parameters (optional query parameters are
//! left out) and answers `{contents: [{uri, mimeType: "application/json", text}]}`. An
//! operation that is not a GET, or that requires a query or body parameter, is not made a
//! resource; the import says why in a warning.

use std::sync::Arc;

use serde_json::{json, Map, Value};
use toolshed_core::{
    Annotations, EntryKind, Pattern, Tool, ToolContext, ToolDef, ToolError, ToolHandler, ToolPath,
};

use crate::handler::{Location, OpenApiHandler, OperationPlan, Shared};

/// The resource entry of a matched operation, or why it cannot be one.
pub(crate) fn resource_entry(
    ns: &str,
    def: &ToolDef,
    plan: &OperationPlan,
    shared: &Arc<Shared>,
) -> Result<Tool, String> {
    let path = def.path.as_str();
    if plan.method != reqwest::Method::GET {
        return Err(format!("{path}: only GET operations can be resources"));
    }
    let path_props: Vec<&str> = plan
        .params
        .iter()
        .filter(|b| b.location == Location::Path)
        .map(|b| b.prop.as_str())
        .collect();
    let required = def.input_schema["required"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if let Some(r) = required
        .iter()
        .filter_map(Value::as_str)
        .find(|r| !path_props.contains(r))
    {
        return Err(format!(
            "{path}: it requires '{r}', which a resource URI cannot carry"
        ));
    }
    let entry = ToolPath::parse(&format!("{path}_resource")).map_err(|e| format!("{path}: {e}"))?;
    let uri = format!("openapi://{ns}{}", plan.path);
    let templated = !path_props.is_empty();
    let mut native = Map::new();
    native.insert(
        if templated { "uriTemplate" } else { "uri" }.into(),
        json!(uri),
    );
    native.insert("name".into(), json!(entry.as_str()));
    native.insert("title".into(), json!(def.name));
    native.insert("description".into(), json!(def.description));
    native.insert("mimeType".into(), json!("application/json"));
    let mut d = ToolDef::new(entry, def.name.clone(), def.description.clone())
        .with_annotations(Annotations::READ_ONLY);
    d.kind = EntryKind::Resource;
    d.origin = def.origin.clone();
    d.native = Some(Value::Object(native));
    if templated {
        d = d.with_input(json!({
            "type": "object",
            "properties": {"uri": {"type": "string", "description": format!("A URI of the form {uri}")}},
            "required": ["uri"],
            "additionalProperties": false
        }));
    } else {
        d = d
            .with_input(json!({"type": "object", "properties": {}, "additionalProperties": false}));
    }
    let handler = ResourceHandler {
        template: uri,
        operation: OpenApiHandler {
            plan: plan.clone(),
            shared: shared.clone(),
        },
    };
    Ok(Tool::new(d, Arc::new(handler)))
}

/// Whether the tool at `path` is to be a resource too.
pub(crate) fn wanted(patterns: &[Pattern], path: &str) -> bool {
    patterns.iter().any(|p| p.matches(path))
}

/// Reads a resource by performing its operation.
struct ResourceHandler {
    /// The URI, or URI template, of the resource.
    template: String,
    operation: OpenApiHandler,
}

/// The path parameters of `uri` by the template's `{name}` segments; `None` when the URI does
/// not have the template's form.
fn path_values(template: &str, uri: &str) -> Option<Vec<(String, String)>> {
    let t: Vec<&str> = template.split('/').collect();
    let u: Vec<&str> = uri.split('/').collect();
    if t.len() != u.len() {
        return None;
    }
    let mut out = Vec::new();
    for (ts, us) in t.iter().zip(&u) {
        match ts.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
            Some(name) if !us.is_empty() => {
                let value = percent_decode(us)?;
                out.push((name.to_string(), value));
            }
            Some(_) => return None,
            None if ts == us => {}
            None => return None,
        }
    }
    Some(out)
}

fn percent_decode(s: &str) -> Option<String> {
    percent_encoding::percent_decode_str(s)
        .decode_utf8()
        .ok()
        .map(|c| c.into_owned())
}

#[async_trait::async_trait]
impl ToolHandler for ResourceHandler {
    async fn call(&self, ctx: ToolContext, args: Value) -> Result<Value, ToolError> {
        let uri = match args.get("uri").and_then(Value::as_str) {
            Some(u) => u.to_string(),
            None => self.template.clone(),
        };
        let values = path_values(&self.template, &uri).ok_or_else(|| {
            ToolError::invalid(format!(
                "'{}' is not a URI of the form {}",
                &uri[..uri.floor_char_boundary(300)],
                self.template
            ))
        })?;
        let mut call = Map::new();
        for (name, value) in values {
            let prop = self
                .operation
                .plan
                .params
                .iter()
                .find(|b| b.location == Location::Path && b.name == name)
                .map_or(name.clone(), |b| b.prop.clone());
            call.insert(prop, Value::String(value));
        }
        let value = self.operation.call(ctx, Value::Object(call)).await?;
        let text = match &value {
            Value::String(s) => s.clone(),
            other => serde_json::to_string(other).unwrap_or_default(),
        };
        Ok(json!({"contents": [{"uri": uri, "mimeType": "application/json", "text": text}]}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_are_read_against_their_template() {
        let t = "openapi://pets/pets/{petId}/toys/{toy}";
        assert_eq!(
            path_values(t, "openapi://pets/pets/7/toys/a%20ball"),
            Some(vec![
                ("petId".into(), "7".into()),
                ("toy".into(), "a ball".into())
            ])
        );
        assert_eq!(path_values(t, "openapi://pets/pets/7/toys"), None);
        assert_eq!(path_values(t, "openapi://pets/cats/7/toys/x"), None);
        assert_eq!(path_values(t, "openapi://pets/pets//toys/x"), None);
        assert_eq!(
            path_values("openapi://pets/pets", "openapi://pets/pets"),
            Some(vec![])
        );
    }
}
