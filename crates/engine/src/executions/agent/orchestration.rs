//! The orchestration tools of a run whose definition sets `config.orchestration` (never
//! offered to sub-agents):
//!
//! - `delegate {role, instructions, tools, briefing, artifacts?, conversationContext?}`: a fresh
//!   sub-agent with a subset of the run's own tools (never the orchestration tools), the run's
//!   model, at most [`DELEGATE_MAX_STEPS`] steps and no memory. It runs inside the run like any
//!   sub-agent ([`super::nested`]): its spec, steps and calls are journaled under the
//!   `delegate` call's key, and a wait inside it (an approval, `ask_user`) pauses the run.
//! - `update_tasks {tasks: [{id, description, status}]}`: a visible checklist, sent as a
//!   `tasks_update` event and kept in the journal.

use std::sync::Arc;

use serde_json::{json, Value};
use toolshed_sandbox::{HostError, HostReply};

use super::step::{run_loop, Frame};
use super::{Offered, RunLimits, RunSpec, ASK_USER};
use crate::events::Event;
use crate::executions::host::{nested_key, CallKey};
use crate::executions::run::End;

/// The offered path of `delegate`.
pub const DELEGATE: &str = "delegate";
/// The offered path of `update_tasks`.
pub const UPDATE_TASKS: &str = "update_tasks";
/// Steps a delegated sub-agent may take.
pub const DELEGATE_MAX_STEPS: u32 = 10;

/// Longest role, briefing part or instructions accepted, in bytes.
const MAX_TEXT: usize = 20_000;
/// Most tools one delegation may hand over, and most checklist items.
const MAX_ITEMS: usize = 64;
/// The journal's name for a delegation's spec.
const SPEC_TARGET: &str = "delegate_spec";

/// Whether `path` is one of the orchestration tools.
pub fn is_orchestration(path: &str) -> bool {
    path == DELEGATE || path == UPDATE_TASKS
}

/// The two tools as offered to the model.
pub(crate) fn offered() -> [Offered; 2] {
    [
        Offered {
            name: String::new(),
            path: DELEGATE.into(),
            description: "Hands a focused task to a fresh sub-agent with a subset of your tools and answers its result. Give it everything it needs in the briefing: it has no memory of this conversation.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "role": {"type": "string", "description": "Who the sub-agent is, e.g. 'data analyst'"},
                    "instructions": {"type": "string", "description": "Its system prompt for this task"},
                    "tools": {"type": "array", "items": {"type": "string"}, "description": "Names of your own tools it may use"},
                    "briefing": {"type": "string", "description": "The task, with all the context it needs"},
                    "artifacts": {"type": "object", "description": "Ids, data or other context it needs"},
                    "conversationContext": {"type": "string", "description": "What was discussed so far, so it does not repeat it"}
                },
                "required": ["role", "instructions", "tools", "briefing"]
            }),
            approval: false,
            workflow: None,
        },
        Offered {
            name: String::new(),
            path: UPDATE_TASKS.into(),
            description: "Shows the user a checklist of what you are doing; call it again as items change.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "tasks": {"type": "array", "items": {"type": "object", "properties": {
                        "id": {"type": "string"}, "description": {"type": "string"},
                        "status": {"type": "string", "enum": ["pending", "in_progress", "completed", "failed"]}
                    }, "required": ["id", "description", "status"]}}
                },
                "required": ["tasks"]
            }),
            approval: false,
            workflow: None,
        },
    ]
}

fn invalid(message: String) -> HostReply {
    HostReply::Err(HostError::new("invalid_arguments", message))
}

/// `update_tasks`: checks the list, sends it as a `tasks_update` event, journals it.
pub(crate) fn update_tasks(frame: &Frame, seq: CallKey, args: &Value) -> HostReply {
    let ctx = &frame.ctx;
    if let Some(reply) = ctx.replayed(seq, UPDATE_TASKS) {
        return reply;
    }
    let Some(tasks) = args.get("tasks").and_then(Value::as_array) else {
        return invalid("update_tasks needs {tasks: [{id, description, status}]}".into());
    };
    if tasks.len() > MAX_ITEMS {
        return invalid(format!("update_tasks takes at most {MAX_ITEMS} tasks"));
    }
    let mut items = Vec::new();
    for (i, t) in tasks.iter().enumerate() {
        let field = |k: &str| {
            t.get(k)
                .and_then(Value::as_str)
                .filter(|s| !s.trim().is_empty())
        };
        let (Some(id), Some(description), Some(status)) =
            (field("id"), field("description"), field("status"))
        else {
            return invalid(format!(
                "tasks[{i}] needs id, description and status (strings)"
            ));
        };
        if !matches!(status, "pending" | "in_progress" | "completed" | "failed") {
            return invalid(format!(
                "tasks[{i}].status is '{}': use pending, in_progress, completed or failed",
                crate::audit::truncated(status, 40)
            ));
        }
        items.push(json!({
            "id": crate::audit::truncated(id, 128),
            "description": crate::audit::truncated(description, 1_000),
            "status": status,
        }));
    }
    let tasks = Value::Array(items);
    ctx.engine.inner.events.emit(
        &ctx.execution_id,
        Event::TasksUpdate {
            tasks: tasks.clone(),
        },
    );
    let reply = json!({"result": "the checklist is updated", "tasks": tasks});
    ctx.record(seq, UPDATE_TASKS, Ok(reply.clone()));
    HostReply::Ok(reply)
}

/// `delegate`: builds (or, on a replay, reads back) the sub-agent's spec, then runs it inside
/// the run under this call's key; its answer is `{result}`.
pub(crate) async fn delegate(
    frame: &Frame,
    seq: CallKey,
    spec: &RunSpec,
    args: &Value,
) -> HostReply {
    let ctx = &frame.ctx;
    if let Some(reply) = ctx.replayed(seq, DELEGATE) {
        return reply;
    }
    let Some(key) = nested_key(seq, 0) else {
        return HostReply::Err(HostError::new(
            "too_deep",
            "agents and saved scripts nest too deep in this execution",
        ));
    };
    let sub = match ctx.replayed(key, SPEC_TARGET) {
        Some(HostReply::Ok(v)) => match serde_json::from_value::<RunSpec>(v) {
            Ok(s) => s,
            Err(e) => return invalid(format!("the journaled delegation cannot be read: {e}")),
        },
        Some(other) => return other,
        None => match delegated_spec(spec, args) {
            Ok(s) => {
                ctx.record(
                    key,
                    SPEC_TARGET,
                    Ok(serde_json::to_value(&s).unwrap_or_default()),
                );
                s
            }
            Err(message) => return invalid(message),
        },
    };
    let sub_frame = Frame {
        ctx: ctx.clone(),
        caller: frame.caller.clone(),
        parent: Some(seq),
    };
    let reply = match Box::pin(run_loop(&sub_frame, &Arc::new(sub))).await {
        End::Completed(result) => Ok(json!({"result": result["output"], "steps": result["steps"]})),
        End::Failed(error) => Err(HostError {
            code: "delegate_failed".into(),
            message: format!(
                "the sub-agent failed: {}",
                error["message"].as_str().unwrap_or("error")
            ),
            data: Some(error),
        }),
        End::Suspended => return HostReply::Suspend,
    };
    ctx.record(seq, DELEGATE, reply.clone());
    match reply {
        Ok(v) => HostReply::Ok(v),
        Err(e) => HostReply::Err(e),
    }
}

/// The delegated sub-agent: the run's model, the requested subset of its tools (plus
/// `ask_user`), the role and instructions as its system prompt, the briefing (with artifacts
/// and conversation context) as its input.
fn delegated_spec(parent: &RunSpec, args: &Value) -> Result<RunSpec, String> {
    let text = |k: &str, required: bool| -> Result<Option<String>, String> {
        match args.get(k) {
            None | Some(Value::Null) if !required => Ok(None),
            Some(Value::String(s)) if !s.trim().is_empty() && s.len() <= MAX_TEXT => {
                Ok(Some(s.clone()))
            }
            Some(Value::String(s)) if s.len() > MAX_TEXT => {
                Err(format!("delegate: {k} is longer than {MAX_TEXT} bytes"))
            }
            _ => Err(format!("delegate: {k} must be a non-empty string")),
        }
    };
    let role = text("role", true)?.unwrap_or_default();
    let instructions = text("instructions", true)?.unwrap_or_default();
    let mut input = text("briefing", true)?.unwrap_or_default();
    if let Some(a) = args.get("artifacts").filter(|a| !a.is_null()) {
        let a = a.to_string();
        if a.len() > MAX_TEXT {
            return Err(format!(
                "delegate: artifacts are larger than {MAX_TEXT} bytes"
            ));
        }
        input.push_str(&format!("\n\nArtifacts: {a}"));
    }
    if let Some(c) = text("conversationContext", false)? {
        input.push_str(&format!("\n\nWhat was discussed so far: {c}"));
    }
    let names = args
        .get("tools")
        .and_then(Value::as_array)
        .ok_or("delegate: tools must be an array of your tools' names")?;
    if names.len() > MAX_ITEMS {
        return Err(format!("delegate: at most {MAX_ITEMS} tools"));
    }
    let mut tools: Vec<Offered> = Vec::new();
    for n in names {
        let n = n.as_str().unwrap_or_default();
        let found = parent
            .tools
            .iter()
            .find(|t| t.name == n || t.path == n)
            .filter(|t| {
                !is_orchestration(&t.path)
                    && !super::background::is_background_tool(&t.path)
                    && t.path != ASK_USER
            });
        let Some(t) = found else {
            let own: Vec<&str> = parent
                .tools
                .iter()
                .filter(|t| {
                    !is_orchestration(&t.path)
                        && !super::background::is_background_tool(&t.path)
                        && t.path != ASK_USER
                })
                .map(|t| t.name.as_str())
                .collect();
            return Err(format!(
                "delegate: '{}' is not one of the tools you can hand over ({})",
                crate::audit::truncated(n, 128),
                own.join(", ")
            ));
        };
        if !tools.iter().any(|x| x.path == t.path) {
            tools.push(t.clone());
        }
    }
    tools.extend(parent.tools.iter().filter(|t| t.path == ASK_USER).cloned());
    Ok(RunSpec {
        agent: format!("{}.delegate", parent.agent),
        version: parent.version,
        model: parent.model.clone(),
        credential: parent.credential.clone(),
        instructions: format!("You are acting as: {role}.\n\n{instructions}"),
        tools,
        limits: RunLimits {
            max_steps: DELEGATE_MAX_STEPS,
            ..parent.limits.clone()
        },
        input,
        history: Vec::new(),
        thread: None,
        memory: None,
        task: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parent() -> RunSpec {
        let tool = |path: &str| Offered {
            name: path.replace('.', "__"),
            path: path.into(),
            description: String::new(),
            parameters: json!({"type": "object"}),
            approval: false,
            workflow: None,
        };
        RunSpec {
            agent: "boss".into(),
            version: 1,
            model: "openai/m".into(),
            credential: "main".into(),
            instructions: "Lead.".into(),
            tools: vec![
                tool("rows.query"),
                tool("rows.drop"),
                tool(ASK_USER),
                tool(DELEGATE),
            ],
            limits: RunLimits::default(),
            input: "go".into(),
            history: vec![],
            thread: None,
            memory: None,
            task: None,
        }
    }

    #[test]
    fn a_delegation_takes_a_subset_of_the_runs_own_tools() {
        let s = delegated_spec(
            &parent(),
            &json!({"role": "analyst", "instructions": "Count.", "tools": ["rows__query", "rows.query"],
                    "briefing": "Count the rows.", "artifacts": {"table": "t"}, "conversationContext": "none yet"}),
        )
        .unwrap();
        let paths: Vec<&str> = s.tools.iter().map(|t| t.path.as_str()).collect();
        assert_eq!(paths, ["rows.query", ASK_USER]);
        assert_eq!(s.limits.max_steps, DELEGATE_MAX_STEPS);
        assert!(s.instructions.starts_with("You are acting as: analyst."));
        assert!(s.input.contains("Artifacts: {\"table\":\"t\"}") && s.input.contains("none yet"));
        for (args, says) in [
            (
                json!({"role": "a", "instructions": "b", "tools": ["delegate"], "briefing": "c"}),
                "'delegate' is not one of",
            ),
            (
                json!({"role": "a", "instructions": "b", "tools": ["web.fetch"], "briefing": "c"}),
                "rows__query, rows__drop",
            ),
            (
                json!({"role": "", "instructions": "b", "tools": [], "briefing": "c"}),
                "role must be",
            ),
            (
                json!({"role": "a", "instructions": "b", "briefing": "c"}),
                "tools must be an array",
            ),
        ] {
            let e = delegated_spec(&parent(), &args).unwrap_err();
            assert!(e.contains(says), "{e}");
        }
    }
}
