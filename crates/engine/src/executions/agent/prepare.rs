//! From an agent definition to a run's spec: the model, the limits, and the tools offered to
//! the model in the caller's view.
//!
//! | definition `tools[]` entry | offered |
//! |---|---|
//! | `catalog {pattern}` | every catalog tool the principal's roles let it see whose path matches the dot-glob |
//! | `custom {id}` | the custom tool `custom.<id>` (when the principal sees it) |
//! | `client {name, description, inputSchema}` | `client.<name>`, executed by the caller (a `tool_result` wait) |
//! | `agent {agent, description?}` | `agent.<name>`: a call of `agents.run` with that agent (a sub-agent, run inside the run: [`super::nested`]), when the principal sees `agents.run` |
//! | `workflow {workflow, name?, description?}` | `workflow.<name>`: a call of `n8n.workflows.run` with that workflow and the model's `inputData`, when the principal sees `n8n.workflows.run` |
//!
//! `ask_user` is always offered (an `input` wait); `delegate` and `update_tasks` when the
//! definition sets `config.orchestration` ([`super::orchestration`]). Names follow the OpenAI/Anthropic grammar
//! ([`toolshed_core::formats::export_names`]: dots become `__`).

use serde_json::{json, Value};
use toolshed_core::formats::{export::export_names, parse_client_tools, ClientTool, ExportFormat};
use toolshed_core::policy::Pattern;

use super::{
    Offered, RunLimits, RunRequest, RunSpec, AGENTS_RUN, AGENT_PREFIX, ASK_USER, WORKFLOWS_RUN,
    WORKFLOW_PREFIX,
};
use crate::{Caller, Engine, EngineError};

/// The spec of a new run and every client tool it may call (request's and definition's).
pub(super) fn spec(
    engine: &Engine,
    caller: &Caller,
    req: &RunRequest,
) -> Result<(RunSpec, Vec<ClientTool>), EngineError> {
    let d = &req.definition;
    let text = |key: &str| d.get(key).and_then(Value::as_str).unwrap_or_default();
    let (name, model, credential) = (text("name"), text("model"), text("credential"));
    if name.is_empty() || model.is_empty() || credential.is_empty() {
        return Err(EngineError::InvalidRun(
            "the definition lacks name, model or credential".into(),
        ));
    }
    if req.input.trim().is_empty() {
        return Err(EngineError::InvalidRun("input is empty".into()));
    }
    if req.input.len() > MAX_INPUT_BYTES {
        return Err(EngineError::InvalidRun(format!(
            "input is longer than {MAX_INPUT_BYTES} bytes"
        )));
    }
    let config = d.get("config").cloned().unwrap_or(json!({}));
    let limits = limits_of(&config);
    let all_approve = config["requireToolApproval"].as_bool().unwrap_or(false);
    let (mut entries, client_decls) = definition_tools(engine, caller, d, all_approve)?;
    let mut client_tools = parse_client_tools(&client_decls)?;
    client_tools.extend(req.client_tools.iter().cloned());
    for c in &client_tools {
        entries.push((
            c.path.clone(),
            Offered {
                name: String::new(),
                path: c.path.clone(),
                description: c.description.clone(),
                parameters: c.input_schema.clone(),
                approval: false,
                workflow: None,
            },
        ));
    }
    if config["orchestration"].as_bool() == Some(true) {
        for o in super::orchestration::offered() {
            entries.push((o.path.clone(), o));
        }
        for o in super::background::offered() {
            entries.push((o.path.clone(), o));
        }
    }
    entries.push((
        ASK_USER.into(),
        Offered {
            name: String::new(),
            path: ASK_USER.into(),
            description: "Ask the human a question and wait for the answer. Use it when you need a decision or information only they have.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "question": {"type": "string", "description": "What to ask"},
                    "schema": {"type": "object", "description": "JSON Schema of the answer (optional)"}
                },
                "required": ["question"]
            }),
            approval: false,
            workflow: None,
        },
    ));
    // One entry per path, the first wins (its approval flag too, unless a later one asks).
    let mut tools: Vec<Offered> = Vec::new();
    for (path, o) in entries {
        match tools.iter_mut().find(|t| t.path == path) {
            Some(t) => t.approval |= o.approval,
            None => tools.push(o),
        }
    }
    if tools.len() > MAX_OFFERED {
        return Err(EngineError::InvalidRun(format!(
            "the definition's tools match {} tools; a run offers at most {MAX_OFFERED}: narrow the patterns",
            tools.len()
        )));
    }
    let paths: Vec<&str> = tools.iter().map(|t| t.path.as_str()).collect();
    let names = export_names(&paths, ExportFormat::Openai);
    for (t, n) in tools.iter_mut().zip(names) {
        t.name = n;
    }
    Ok((
        RunSpec {
            agent: name.to_string(),
            version: req.version,
            model: model.to_string(),
            credential: credential.to_string(),
            instructions: text("instructions").to_string(),
            tools,
            limits,
            input: req.input.clone(),
            history: Vec::new(),
            thread: None,
            memory: None,
            task: None,
        },
        client_tools,
    ))
}

/// A definition's `workflow` entry as an offered tool: `workflow.<name>` (the entry's `name`,
/// else the workflow id, as a path segment), taking the trigger's input.
fn workflow_tool(t: &Value, approve: bool) -> (String, Offered) {
    let id = t["workflow"].as_str().unwrap_or_default();
    let label = t["name"].as_str().filter(|n| !n.trim().is_empty());
    let path = format!(
        "{WORKFLOW_PREFIX}{}",
        toolshed_core::path::to_segment(label.unwrap_or(id))
    );
    let description = t["description"]
        .as_str()
        .filter(|d| !d.trim().is_empty())
        .map_or_else(
            || {
                format!(
                    "Runs the n8n workflow '{}' and answers its result (status, the last node's output, any error).",
                    label.unwrap_or(id)
                )
            },
            str::to_string,
        );
    let offered = Offered {
        name: String::new(),
        path: path.clone(),
        description,
        parameters: json!({
            "type": "object",
            "properties": {"inputData": {"type": "object", "description": "What the workflow's trigger receives (a webhook's body, a form's fields, {chatInput} for a chat)."}},
        }),
        approval: approve,
        workflow: Some(id.to_string()),
    };
    (path, offered)
}

/// A definition's tool entries (each `(path, offered)`) and its `client` tool declarations.
type DefinitionTools = (Vec<(String, Offered)>, Vec<Value>);

/// The entries of a definition's `tools` and its `client` tool declarations, in the caller's
/// view.
fn definition_tools(
    engine: &Engine,
    caller: &Caller,
    d: &Value,
    all_approve: bool,
) -> Result<DefinitionTools, EngineError> {
    let mut entries: Vec<(String, Offered)> = Vec::new();
    let mut client_decls: Vec<Value> = Vec::new();
    let visible = engine.list_tools(caller);
    for (i, t) in d["tools"].as_array().into_iter().flatten().enumerate() {
        let approve = all_approve || t["requireApproval"].as_bool().unwrap_or(false);
        match t["type"].as_str().unwrap_or_default() {
            "catalog" => {
                let pattern = Pattern::parse(t["pattern"].as_str().unwrap_or_default())
                    .map_err(|e| EngineError::InvalidRun(format!("tools[{i}].pattern: {e}")))?;
                for def in visible.iter().filter(|d| pattern.matches(d.path.as_str())) {
                    push_catalog(&mut entries, def, approve);
                }
            }
            "custom" => {
                let path = format!("custom.{}", t["id"].as_str().unwrap_or_default());
                if let Some(def) = visible.iter().find(|d| d.path.as_str() == path) {
                    push_catalog(&mut entries, def, approve);
                }
            }
            "client" => {
                let mut decl = t.clone();
                if let Some(m) = decl.as_object_mut() {
                    m.remove("type");
                    m.remove("requireApproval");
                }
                client_decls.push(decl);
            }
            "agent" => {
                let agent = t["agent"].as_str().unwrap_or_default();
                // Offered when the principal may run agents at all; the sub-agent's own tools
                // are its definition's, in the principal's view.
                if agent.is_empty() || !visible.iter().any(|d| d.path.as_str() == AGENTS_RUN) {
                    continue;
                }
                let description = t["description"]
                    .as_str()
                    .filter(|d| !d.trim().is_empty())
                    .map_or_else(
                        || format!("Hands a task to the agent '{agent}' and answers its result."),
                        str::to_string,
                    );
                entries.push((
                    format!("{AGENT_PREFIX}{agent}"),
                    Offered {
                        name: String::new(),
                        path: format!("{AGENT_PREFIX}{agent}"),
                        description,
                        parameters: json!({
                            "type": "object",
                            "properties": {"input": {"type": "string", "description": "The task or question for the agent, with everything it needs to know."}},
                            "required": ["input"]
                        }),
                        approval: approve,
                        workflow: None,
                    },
                ));
            }
            "workflow" => {
                // Offered when the principal may run n8n workflows at all.
                if visible.iter().any(|d| d.path.as_str() == WORKFLOWS_RUN) {
                    entries.push(workflow_tool(t, approve));
                }
            }
            other => {
                return Err(EngineError::InvalidRun(format!(
                    "tools[{i}]: tools of type '{other}' cannot be used in runs; remove the entry or use a catalog pattern"
                )))
            }
        }
    }
    Ok((entries, client_decls))
}

/// Longest input accepted, in bytes.
pub const MAX_INPUT_BYTES: usize = 100_000;
/// Most tools offered to a model in one run.
pub const MAX_OFFERED: usize = 128;

fn push_catalog(entries: &mut Vec<(String, Offered)>, def: &toolshed_core::ToolDef, approve: bool) {
    let exported =
        toolshed_core::formats::export::definition(def, String::new(), ExportFormat::Openai);
    entries.push((
        def.path.to_string(),
        Offered {
            name: String::new(),
            path: def.path.to_string(),
            description: exported["function"]["description"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            parameters: def.input_schema.clone(),
            approval: approve,
            workflow: None,
        },
    ));
}

fn limits_of(config: &Value) -> RunLimits {
    let d = RunLimits::default();
    let num = |k: &str| config.get(k).and_then(Value::as_u64);
    RunLimits {
        max_steps: num("maxSteps").map_or(d.max_steps, |n| n.clamp(1, 1000) as u32),
        max_tool_calls: num("maxToolCalls").map_or(d.max_tool_calls, |n| n.clamp(1, 10_000) as u32),
        max_tokens: num("maxTokens"),
        tool_call_concurrency: num("toolCallConcurrency")
            .map_or(d.tool_call_concurrency, |n| n.clamp(1, 20) as usize),
    }
}
