//! Virtual servers ([`VirtualServer`]): a session at `/mcp/servers/{name}` (or `toolshed serve
//! --stdio --server NAME`) sees the tools the server exposes and the caller may see, as plain
//! MCP tools, without the meta-tools, so that a client configured for the servers behind it
//! works unchanged.
//!
//! - Listing: with original names, an upstream MCP tool is listed exactly as its upstream
//!   declared it (name, title, description, schemas, annotations, icons, `_meta`); every other
//!   tool is listed from its catalog definition.
//! - Calls take the engine's one path ([`Engine::relay`]): validation, call rules, approval and
//!   audit apply as on every face. An upstream MCP tool's result is relayed as the upstream
//!   sent it (every content block, `structuredContent`, `_meta`, `isError`); other tools'
//!   results become a text block with their JSON, plus `structuredContent` for objects.
//! - Resources, resource templates and prompts of upstream MCP servers (catalog entries of
//!   their own kinds) are listed, read and fetched the same way, under the server's
//!   `resources` and `prompts` patterns: a read is a call of the entry through the engine, so
//!   the caller's policy and the audit log cover it, and the upstream's answer is relayed.
//! - A name the server does not expose, or the caller may not see, answers like a tool that
//!   does not exist.

use std::sync::Arc;

use rmcp::model::{
    CallToolResult, ContentBlock, GetPromptResult, Prompt, ReadResourceResult, Resource,
    ResourceTemplate, Tool as McpTool, ToolAnnotations,
};
use rmcp::ErrorData as McpError;
use serde_json::{Map, Value};
use toolshed_core::path::to_segment;
use toolshed_core::{EntryKind, ToolDef, VirtualServer};
use toolshed_engine::{Caller, Engine, EngineError, Outcome, RelayHooks, Relayed};

/// The tools of `server` the caller sees, as MCP tools.
pub(crate) fn list(engine: &Engine, caller: &Caller, server: &VirtualServer) -> Vec<McpTool> {
    engine
        .list_tools(caller)
        .into_iter()
        .filter(|d| server.exposes(d.path.as_str()))
        .map(|d| listed(server, &d))
        .collect()
}

fn listed(server: &VirtualServer, d: &ToolDef) -> McpTool {
    if server.source().is_some() {
        if let Some(native) = d
            .native
            .clone()
            .and_then(|n| serde_json::from_value::<McpTool>(n).ok())
        {
            return native;
        }
    }
    let ann = ToolAnnotations::new()
        .read_only(d.annotations.read_only)
        .destructive(d.annotations.destructive)
        .idempotent(d.annotations.idempotent);
    let mut tool = McpTool::new(
        server.name_of(d),
        d.description.clone(),
        object(d.input_schema.clone()),
    )
    .with_title(d.name.clone())
    .with_annotations(ann);
    // MCP output schemas describe `structuredContent`, which is always an object.
    if let Some(out) = d.output_schema.as_ref().filter(|s| s["type"] == "object") {
        tool.output_schema = Some(object(out.clone()));
    }
    tool
}

fn object(v: Value) -> Arc<Map<String, Value>> {
    match v {
        Value::Object(m) => Arc::new(m),
        _ => Arc::new(Map::new()),
    }
}

/// The catalog path of the tool the client calls `name`, if the server exposes it to the
/// caller.
pub(crate) fn resolve(
    engine: &Engine,
    caller: &Caller,
    server: &VirtualServer,
    name: &str,
) -> Option<String> {
    let visible = |path: &str| server.exposes(path) && caller.allows(path);
    let Some(source) = server.source() else {
        // Catalog names are paths; the `__` spelling of direct mode is accepted too.
        let path = crate::path_from_mcp_name(name);
        return visible(&path).then_some(path);
    };
    // Original names: an upstream name normally maps to `<source>.<segment>`; confirm it, or
    // search the server's tools (suffixed duplicates, non-MCP sources).
    let catalog = engine.catalog().load();
    let guess = format!("{source}.{}", to_segment(name));
    if let Some(e) = catalog.get(&guess) {
        if visible(&guess) && server.name_of(&e.tool.def) == name {
            return Some(guess);
        }
    }
    engine
        .list_tools(caller)
        .into_iter()
        .find(|d| server.exposes(d.path.as_str()) && server.name_of(d) == name)
        .map(|d| d.path.as_str().to_string())
}

/// The entries of one kind the server exposes to the caller, each with the native
/// declaration the client sees (named per the server's naming).
fn exposed_entries(
    engine: &Engine,
    caller: &Caller,
    server: &VirtualServer,
    kind: EntryKind,
) -> Vec<(ToolDef, Map<String, Value>)> {
    engine
        .list_entries(caller, kind)
        .into_iter()
        .filter(|d| match kind {
            EntryKind::Resource => server.exposes_resource(d.path.as_str()),
            EntryKind::Prompt => server.exposes_prompt(d.path.as_str()),
            EntryKind::Tool => server.exposes(d.path.as_str()),
        })
        .filter_map(|d| {
            let mut native = d.native.clone()?.as_object()?.clone();
            native.insert("name".into(), Value::String(server.name_of(&d)));
            Some((d, native))
        })
        .collect()
}

/// The server's resources and resource templates the caller may see.
pub(crate) fn resources(
    engine: &Engine,
    caller: &Caller,
    server: &VirtualServer,
) -> (Vec<Resource>, Vec<ResourceTemplate>) {
    let mut resources = Vec::new();
    let mut templates = Vec::new();
    for (_, native) in exposed_entries(engine, caller, server, EntryKind::Resource) {
        let v = Value::Object(native);
        if v.get("uriTemplate").is_some() {
            templates.extend(serde_json::from_value::<ResourceTemplate>(v).ok());
        } else {
            resources.extend(serde_json::from_value::<Resource>(v).ok());
        }
    }
    (resources, templates)
}

/// The server's prompts the caller may see.
pub(crate) fn prompts(engine: &Engine, caller: &Caller, server: &VirtualServer) -> Vec<Prompt> {
    exposed_entries(engine, caller, server, EntryKind::Prompt)
        .into_iter()
        .filter_map(|(_, native)| serde_json::from_value(Value::Object(native)).ok())
        .collect()
}

/// The path of the resource `uri` names: a listed resource with that URI, else a template the
/// URI fits; the args a read of it takes.
fn resource_target(
    engine: &Engine,
    caller: &Caller,
    server: &VirtualServer,
    uri: &str,
) -> Result<(String, Value), McpError> {
    let entries = exposed_entries(engine, caller, server, EntryKind::Resource);
    let fixed = entries
        .iter()
        .find(|(_, n)| n.get("uri").and_then(Value::as_str) == Some(uri));
    if let Some((d, _)) = fixed {
        return Ok((d.path.to_string(), serde_json::json!({})));
    }
    let template = entries.iter().find(|(_, n)| {
        n.get("uriTemplate")
            .and_then(Value::as_str)
            .is_some_and(|t| toolshed_core::servers::uri_template_matches(t, uri))
    });
    match template {
        Some((d, _)) => Ok((d.path.to_string(), serde_json::json!({"uri": uri}))),
        None => Err(McpError::resource_not_found(
            format!("resource not found: {}", crate::truncate(uri, 300)),
            None,
        )),
    }
}

/// The path of the resource `uri` names (see [`resource_target`]).
pub(crate) fn resource_path(
    engine: &Engine,
    caller: &Caller,
    server: &VirtualServer,
    uri: &str,
) -> Result<String, McpError> {
    resource_target(engine, caller, server, uri).map(|(path, _)| path)
}

/// The path of the entry of `kind` the client knows as `name`.
pub(crate) fn entry_named(
    engine: &Engine,
    caller: &Caller,
    server: &VirtualServer,
    kind: EntryKind,
    name: &str,
) -> Option<String> {
    exposed_entries(engine, caller, server, kind)
        .into_iter()
        .find(|(_, n)| n.get("name").and_then(Value::as_str) == Some(name))
        .map(|(d, _)| d.path.to_string())
}

/// The path of the resource template `template` (or the listed resource with that URI).
pub(crate) fn template_path(
    engine: &Engine,
    caller: &Caller,
    server: &VirtualServer,
    template: &str,
) -> Option<String> {
    exposed_entries(engine, caller, server, EntryKind::Resource)
        .into_iter()
        .find(|(_, n)| {
            n.get("uriTemplate").and_then(Value::as_str) == Some(template)
                || n.get("uri").and_then(Value::as_str) == Some(template)
        })
        .map(|(d, _)| d.path.to_string())
}

/// `resources/read`: a listed resource by its URI, else a template whose form the URI has.
pub(crate) async fn read(
    engine: &Engine,
    caller: &Caller,
    server: &VirtualServer,
    uri: &str,
) -> Result<ReadResourceResult, McpError> {
    let (path, args) = resource_target(engine, caller, server, uri)?;
    let relayed = engine
        .relay(caller, &path, args, RelayHooks::default())
        .await;
    relayed_entry(relayed)
}

/// `prompts/get`: the prompt the client calls `name`, filled in with `arguments`.
pub(crate) async fn get_prompt(
    engine: &Engine,
    caller: &Caller,
    server: &VirtualServer,
    name: &str,
    arguments: Option<Map<String, Value>>,
) -> Result<GetPromptResult, McpError> {
    let Some(path) = entry_named(engine, caller, server, EntryKind::Prompt, name) else {
        return Err(McpError::invalid_params(
            format!("unknown prompt '{}'", crate::truncate(name, 200)),
            None,
        ));
    };
    let args = Value::Object(arguments.unwrap_or_default());
    relayed_entry(
        engine
            .relay(caller, &path, args, RelayHooks::default())
            .await,
    )
}

/// The upstream's answer to a read of an entry, or the engine's refusal as an MCP error.
fn relayed_entry<T: serde::de::DeserializeOwned>(relayed: Relayed) -> Result<T, McpError> {
    let Relayed { outcome, wire } = relayed;
    let value = match outcome {
        Ok(Outcome::Completed { result, .. }) => wire.unwrap_or(result),
        Ok(other) => {
            return Err(McpError::invalid_request(
                format!(
                    "the read was not completed: {}",
                    serde_json::to_string(&other.to_json()).unwrap_or_default()
                ),
                None,
            ))
        }
        Err(e) => {
            let message = e.to_string();
            return Err(match e {
                EngineError::InvalidArguments { .. } | EngineError::MalformedArguments { .. } => {
                    McpError::invalid_params(message, None)
                }
                EngineError::Tool { error, .. }
                    if error.kind == toolshed_core::ToolErrorKind::InvalidInput =>
                {
                    McpError::invalid_params(message, None)
                }
                _ => McpError::internal_error(message, None),
            });
        }
    };
    serde_json::from_value(mark_complete(value)).map_err(|e| {
        McpError::internal_error(format!("the upstream's answer is malformed: {e}"), None)
    })
}

/// An upstream's result with `resultType: "complete"` when it has none: an upstream on an older
/// protocol leaves it out, a client on 2026-07-28 requires it, and rmcp strips it again for
/// clients on older protocols.
pub(crate) fn mark_complete(mut v: Value) -> Value {
    if let Value::Object(m) = &mut v {
        m.entry("resultType")
            .or_insert_with(|| Value::String("complete".into()));
    }
    v
}

/// A relayed call's answer as the client should see it. `settled` is the outcome once waits
/// the client could answer (elicitation) were put to it.
pub(crate) fn answer(relayed: Relayed, settled: Option<Outcome>) -> CallToolResult {
    let Relayed { outcome, wire } = relayed;
    let unchanged = |wire: Option<Value>| {
        wire.and_then(|w| serde_json::from_value::<CallToolResult>(mark_complete(w)).ok())
    };
    match (outcome, settled) {
        (Ok(Outcome::Completed { result, .. }), _) => {
            unchanged(wire).unwrap_or_else(|| value_result(result))
        }
        (Ok(_), Some(Outcome::Completed { result, .. })) => value_result(result),
        (Ok(_), Some(other)) | (Ok(other), None) => crate::outcome_result(&other),
        (Err(e @ EngineError::Tool { .. }), _) => match unchanged(wire) {
            Some(r) if r.is_error == Some(true) => r,
            _ => crate::error_result(&e),
        },
        (Err(e), _) => crate::error_result(&e),
    }
}

/// A tool's JSON result as MCP content: a string as text, anything else as its JSON text,
/// objects also as `structuredContent`.
pub(crate) fn value_result(v: Value) -> CallToolResult {
    let text = match &v {
        Value::String(s) => s.clone(),
        other => serde_json::to_string(other).unwrap_or_default(),
    };
    let mut r = CallToolResult::success(vec![ContentBlock::text(text)]);
    if v.is_object() {
        r.structured_content = Some(v);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn relayed(outcome: Result<Outcome, EngineError>, wire: Option<Value>) -> Relayed {
        Relayed { outcome, wire }
    }

    fn completed(result: Value) -> Outcome {
        Outcome::Completed {
            execution_id: "ex_1".into(),
            result,
            logs: vec![],
        }
    }

    #[test]
    fn the_upstream_answer_is_relayed_unchanged() {
        let wire = json!({
            "content": [
                {"type": "text", "text": "hi"},
                {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}
            ],
            "structuredContent": {"n": 1},
            "_meta": {"trace": "t1"}
        });
        let r = answer(
            relayed(Ok(completed(json!({"n": 1}))), Some(wire.clone())),
            None,
        );
        let back = serde_json::to_value(&r).unwrap();
        assert_eq!(back["content"], wire["content"]);
        assert_eq!(back["structuredContent"], wire["structuredContent"]);
        assert_eq!(back["_meta"], wire["_meta"]);
    }

    #[test]
    fn results_of_older_upstreams_are_marked_complete() {
        let wire = json!({"content": [{"type": "text", "text": "hi"}]});
        let r = answer(relayed(Ok(completed(json!("hi"))), Some(wire)), None);
        assert_eq!(serde_json::to_value(&r).unwrap()["resultType"], "complete");
        let read: ReadResourceResult = relayed_entry(relayed(
            Ok(completed(json!({}))),
            Some(json!({"contents": [{"uri": "a://b", "text": "x"}]})),
        ))
        .unwrap();
        assert_eq!(
            serde_json::to_value(&read).unwrap()["resultType"],
            "complete"
        );
    }

    #[test]
    fn plain_results_become_text_and_structured_content() {
        let r = answer(relayed(Ok(completed(json!({"rows": []}))), None), None);
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["content"][0]["text"], r#"{"rows":[]}"#);
        assert_eq!(v["structuredContent"], json!({"rows": []}));
        let r = value_result(json!("plain"));
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["content"][0]["text"], "plain");
        assert!(v.get("structuredContent").is_none());
    }

    #[test]
    fn an_upstream_error_result_stays_an_error_and_engine_refusals_are_explained() {
        let wire = json!({"content": [{"type": "text", "text": "boom"}], "isError": true});
        let e = EngineError::Tool {
            path: "up.t".into(),
            error: Box::new(toolshed_core::ToolError::upstream("boom")),
        };
        let r = answer(relayed(Err(e), Some(wire)), None);
        assert_eq!(r.is_error, Some(true));
        assert_eq!(
            serde_json::to_value(&r).unwrap()["content"][0]["text"],
            "boom"
        );
        // A completed upstream answer is not relayed when the engine refused the output.
        let e = EngineError::DeniedByPolicy {
            path: "up.t".into(),
        };
        let ok_wire = json!({"content": [{"type": "text", "text": "secret"}]});
        let r = answer(relayed(Err(e), Some(ok_wire)), None);
        let text = serde_json::to_value(&r).unwrap()["content"][0]["text"].clone();
        assert!(text.as_str().unwrap().contains("denied"), "{text}");
    }
}
