//! The plugin's tools, one module per area, and the helpers they share.
//!
//! Each tool is a [`Tool`] whose handler holds an `Arc<N8nClient>`; the engine runs validation,
//! policy, approval and audit before a handler is called, so handlers only do the n8n work.

pub mod build;
pub mod data_tables;
pub mod executions;
pub mod explore;
pub mod nodes;
pub mod resources;
pub mod run;
pub mod setup;
pub mod suggested;
pub mod versions;
pub mod work_items;
pub mod workflows;
pub mod workspace;

use std::future::Future;
use std::sync::Arc;

use reqwest::Method;
use serde_json::{json, Value};
use toolshed_core::{Annotations, Tool, ToolContext, ToolDef, ToolError, ToolPath};

use crate::client::N8nClient;

/// All tools of the plugin.
pub fn all(client: &Arc<N8nClient>) -> Vec<Tool> {
    let mut tools = Vec::new();
    tools.extend(executions::tools(client));
    tools.extend(workflows::tools(client));
    tools.extend(run::tools(client));
    tools.extend(resources::tools(client));
    tools.extend(data_tables::tools(client));
    tools.extend(nodes::tools(client));
    tools.extend(suggested::tools());
    tools.extend(explore::tools(client));
    tools.extend(versions::tools(client));
    tools.extend(workspace::tools(client));
    tools
}

/// A tool definition under `n8n.`.
pub(crate) fn def(
    path: &str,
    name: &str,
    description: &str,
    input: Value,
    annotations: Annotations,
) -> ToolDef {
    let mut d = ToolDef::new(
        ToolPath::join(crate::PLUGIN_ID, path).expect("tool paths are static and valid"),
        name,
        description,
    )
    .with_input(input)
    .with_annotations(annotations);
    d.origin = format!("plugin:{}", crate::PLUGIN_ID);
    d
}

/// A tool whose handler is `f(client, ctx, args)`.
pub(crate) fn make<F, Fut>(client: &Arc<N8nClient>, def: ToolDef, f: F) -> Tool
where
    F: Fn(Arc<N8nClient>, ToolContext, Value) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Value, ToolError>> + Send + 'static,
{
    let c = client.clone();
    Tool::from_fn(def, move |ctx, args| f(c.clone(), ctx, args))
}

/// Sends a request with the call's timeout.
pub(crate) async fn call(
    c: &N8nClient,
    ctx: &ToolContext,
    method: Method,
    path: &str,
    query: &[(&str, String)],
    body: Option<&Value>,
) -> Result<Value, ToolError> {
    c.request(method, path, query, body, Some(ctx.timeout))
        .await
        .map_err(ToolError::from)
}

/// An object schema with `properties` and `required`.
pub(crate) fn object(properties: Value, required: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

/// The usual paging properties.
pub(crate) fn paging(max: u64) -> Value {
    json!({
        "limit": {"type": "integer", "minimum": 1, "maximum": max, "description": format!("Page size (1-{max}).")},
        "cursor": {"type": "string", "description": "The nextCursor of the previous page."},
    })
}

/// Merges the key/values of `extra` into the object `base`.
pub(crate) fn merge(mut base: Value, extra: Value) -> Value {
    if let (Some(b), Value::Object(e)) = (base.as_object_mut(), extra) {
        b.extend(e);
    }
    base
}

/// A required string argument.
pub(crate) fn req_str(args: &Value, key: &str) -> Result<String, ToolError> {
    match &args[key] {
        Value::String(s) if !s.trim().is_empty() => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        _ => Err(ToolError::invalid(format!("'{key}' is required"))),
    }
}

/// An optional string argument.
pub(crate) fn opt_str(args: &Value, key: &str) -> Option<String> {
    match &args[key] {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// An optional non-negative integer argument.
pub(crate) fn opt_u64(args: &Value, key: &str) -> Option<u64> {
    args[key].as_u64()
}

/// An id that goes into a URL path: letters, digits, `-` and `_` only.
pub(crate) fn path_id(args: &Value, key: &str) -> Result<String, ToolError> {
    let id = req_str(args, key)?;
    if id.len() > 128
        || !id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(ToolError::invalid(format!(
            "'{key}' must be an n8n id (letters, digits, '-' and '_'), got {id:?}"
        )));
    }
    Ok(id)
}

/// An execution id (digits only): `executionId`, or `id` (the specification's name for it)
/// when that is what was given.
pub(crate) fn execution_id(args: &Value) -> Result<String, ToolError> {
    let key = if args.get("executionId").is_none() && args.get("id").is_some() {
        "id"
    } else {
        "executionId"
    };
    let id = req_str(args, key)?;
    if id.is_empty() || !id.chars().all(|c| c.is_ascii_digit()) {
        return Err(ToolError::invalid(format!(
            "'{key}' must be an execution id (a number), got {id:?}"
        )));
    }
    Ok(id)
}

/// Pages of credentials read at most (250 each).
const CREDENTIAL_PAGES: usize = 20;

/// Every credential's metadata (public API, paged), and whether the list is complete (at
/// most [`CREDENTIAL_PAGES`] pages are read).
pub(crate) async fn all_credentials(
    c: &N8nClient,
    ctx: &ToolContext,
) -> Result<(Vec<Value>, bool), ToolError> {
    let mut all = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..CREDENTIAL_PAGES {
        let mut q = vec![("limit", "250".to_string())];
        if let Some(cur) = &cursor {
            q.push(("cursor", cur.clone()));
        }
        let r = call(c, ctx, Method::GET, "/credentials", &q, None).await?;
        all.extend(r["data"].as_array().cloned().unwrap_or_default());
        cursor = r["nextCursor"].as_str().map(str::to_string);
        if cursor.is_none() {
            return Ok((all, true));
        }
    }
    Ok((all, false))
}

/// Adds `limit`/`cursor` from the arguments to a query.
pub(crate) fn paging_query(args: &Value, query: &mut Vec<(&'static str, String)>, default: u64) {
    query.push((
        "limit",
        opt_u64(args, "limit").unwrap_or(default).to_string(),
    ));
    if let Some(c) = opt_str(args, "cursor") {
        query.push(("cursor", c));
    }
}

/// Keeps only `keys` of an object.
pub(crate) fn pick(v: &Value, keys: &[&str]) -> Value {
    let mut out = serde_json::Map::new();
    for k in keys {
        if let Some(x) = v.get(*k) {
            out.insert((*k).to_string(), x.clone());
        }
    }
    Value::Object(out)
}
