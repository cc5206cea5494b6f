//! The meta-tools: their schemas, their view-dependent descriptions, and their dispatch into the
//! engine.

use rmcp::model::{CallToolResult, Tool as McpTool, ToolAnnotations};
use rmcp::{Peer, RoleServer};
use serde_json::{json, Value};
use toolshed_engine::{Caller, Decision, DecisionChannel, Engine};

use crate::{error_result, json_text, object_schema, outcome_result, text_result};

/// Names of the meta-tools (`resume` is left out with `[mcp] resume_tool = false`).
pub const META_TOOLS: [&str; 4] = ["search_tools", "read_tool", "run_script", "resume"];

pub(crate) fn meta_tools(engine: &Engine, caller: &Caller, resume_tool: bool) -> Vec<McpTool> {
    let mut tools = all_meta_tools(engine, caller);
    if !resume_tool {
        tools.retain(|t| t.name != "resume");
    }
    tools
}

fn all_meta_tools(engine: &Engine, caller: &Caller) -> Vec<McpTool> {
    let view = engine.view_summary(caller);
    vec![
        McpTool::new(
            "search_tools",
            format!(
                "Search the tool catalog by what you want to do; returns ranked {{path, name, summary}} hits and how many matched. {view}"
            ),
            object_schema(json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What you want to do, in words"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 10},
                    "namespace": {"type": "string", "description": "Only tools under this first path segment"},
                    "format": {"type": "string", "enum": ["text", "json"], "default": "text"}
                },
                "required": ["query"],
                "additionalProperties": false
            })),
        )
        .with_title("Search Tools")
        .with_annotations(ToolAnnotations::new().read_only(true).destructive(false).idempotent(true)),
        McpTool::new(
            "read_tool",
            "Read one tool: its inputs and outputs as compact text with types, constraints and an example call. \
             Set schemas=true to also get the raw JSON Schemas.",
            object_schema(json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Tool path from search_tools, e.g. github.issues.create"},
                    "schemas": {"type": "boolean", "default": false}
                },
                "required": ["path"],
                "additionalProperties": false
            })),
        )
        .with_title("Read Tool")
        .with_annotations(ToolAnnotations::new().read_only(true).destructive(false).idempotent(true)),
        McpTool::new(
            "run_script",
            format!(
                "Run JavaScript (an async function body) that calls tools: `const r = await tools.<path>({{...}}); return r;`. \
                 Also `await tools.search({{query}})` and `await tools.describe.tool({{path}})`. Promise.all works; console.log is \
                 captured; the returned value comes back as JSON. No network, files or timers. Destructive calls pause the \
                 script and return status \"paused\" with an executionId for resume. {view}"
            ),
            object_schema(json!({
                "type": "object",
                "properties": {"script": {"type": "string", "description": "JavaScript body; use return to give a result"}},
                "required": ["script"],
                "additionalProperties": false
            })),
        )
        .with_title("Run Script")
        .with_annotations(ToolAnnotations::new().read_only(false).destructive(true).idempotent(false)),
        McpTool::new(
            "resume",
            "Continue a paused execution after the user decided on its pending destructive call: decision \"approve\" runs \
             it, \"deny\" makes it fail with an error the script can catch. Works from any session of the same principal, \
             when its policy lets it decide its own calls (otherwise a person decides through the HTTP API or the CLI).",
            object_schema(json!({
                "type": "object",
                "properties": {
                    "executionId": {"type": "string"},
                    "decision": {"type": "string", "enum": ["approve", "deny"]}
                },
                "required": ["executionId", "decision"],
                "additionalProperties": false
            })),
        )
        .with_title("Resume Execution")
        .with_annotations(ToolAnnotations::new().read_only(false).destructive(true).idempotent(false)),
    ]
}

/// The compact answer agents read: a count line, then one line per hit,
/// `path — Name: summary` with `[destructive]` where it applies. The name is left out when it
/// only restates the last path segment (`tables.create` — "Create").
pub fn search_text(answer: &toolshed_engine::SearchAnswer) -> String {
    let mut out = format!("{} matching tools", answer.total);
    if answer.total > answer.hits.len() {
        out.push_str(&format!(", top {}", answer.hits.len()));
    }
    out.push('\n');
    for h in &answer.hits {
        out.push_str(&h.path);
        let last = h.path.rsplit('.').next().unwrap_or_default();
        let name_adds = toolshed_core::path::to_segment(&h.name) != last;
        if name_adds {
            out.push_str(" — ");
            out.push_str(&h.name);
        }
        if !h.summary.is_empty() {
            out.push_str(if name_adds { ": " } else { " — " });
            out.push_str(&h.summary);
        }
        if h.destructive {
            out.push_str(" [destructive]");
        }
        out.push('\n');
    }
    out
}

fn bad_args(tool: &str, what: &str) -> CallToolResult {
    text_result(
        json_text(
            &json!({"error": {"code": "invalid_arguments", "message": format!("{tool}: {what}")}}),
        ),
        true,
    )
}

/// Dispatches a meta-tool call; `None` when `name` is not a meta-tool (`resume` is not one
/// when `resume_tool` is off).
pub(crate) async fn call_meta(
    engine: &Engine,
    caller: &Caller,
    name: &str,
    args: &Value,
    peer: Option<&Peer<RoleServer>>,
    resume_tool: bool,
) -> Option<CallToolResult> {
    let s = |k: &str| args.get(k).and_then(Value::as_str);
    Some(match name {
        "search_tools" => {
            let Some(query) = s("query") else {
                return Some(bad_args(name, "'query' (string) is required"));
            };
            let limit = args
                .get("limit")
                .and_then(Value::as_u64)
                .unwrap_or(10)
                .clamp(1, 50) as usize;
            let answer = engine.search(caller, query, limit, s("namespace"));
            if s("format") == Some("json") {
                text_result(
                    json_text(&serde_json::to_value(answer).unwrap_or_default()),
                    false,
                )
            } else {
                text_result(search_text(&answer), false)
            }
        }
        "read_tool" => {
            let Some(path) = s("path") else {
                return Some(bad_args(name, "'path' (string) is required"));
            };
            let schemas = args
                .get("schemas")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            match engine.describe(caller, path, schemas) {
                Ok(d) if !schemas => text_result(d.text, false),
                Ok(d) => text_result(
                    json_text(&serde_json::to_value(d).unwrap_or_default()),
                    false,
                ),
                Err(e) => error_result(&e),
            }
        }
        "run_script" => {
            let Some(script) = s("script") else {
                return Some(bad_args(name, "'script' (string) is required"));
            };
            match engine.run_script(caller, script).await {
                Ok(o) => outcome_result(&crate::elicit::settle(engine, caller, o, peer).await),
                Err(e) => error_result(&e),
            }
        }
        "resume" if resume_tool => {
            let (Some(id), Some(decision)) = (s("executionId"), s("decision")) else {
                return Some(bad_args(
                    name,
                    "'executionId' and 'decision' (\"approve\" or \"deny\") are required",
                ));
            };
            let decision: Decision = match decision.parse() {
                Ok(d) => d,
                Err(e) => return Some(error_result(&e)),
            };
            // The agent decides through its own tool: the engine's rule says whether it may.
            match engine
                .resume(caller, id, decision, DecisionChannel::AgentTool)
                .await
            {
                Ok(o) => outcome_result(&crate::elicit::settle(engine, caller, o, peer).await),
                Err(e) => error_result(&e),
            }
        }
        _ => return None,
    })
}
