//! MCP Tasks: the `io.modelcontextprotocol/tasks` extension (SEP-2663, protocol 2026-07-28)
//! over Toolshed's durable executions.
//!
//! A client that declares the extension and calls `run_script` or a direct tool gets its answer
//! as usual when the run ends; when the run pauses it gets a task instead (`resultType:
//! "task"`) whose `taskId` is the execution id. The task is read from the store on every
//! request, so `tasks/get`, `tasks/update` and `tasks/cancel` work from any session, on any
//! replica, after a restart.
//!
//! | execution | task |
//! |---|---|
//! | running, interrupted | `working` |
//! | paused | `input_required`: each approval as a form elicitation (accept approves, decline denies), each form question with its schema, each link question as a URL elicitation, keyed by `waitId` |
//! | completed, failed | `completed` with the tool result (`isError` for a failed script) |
//! | cancelled, expired | `cancelled` |
//!
//! Client tool calls (`tool_result` waits) are not MCP requests: the `statusMessage` lists them
//! and the client answers them with the `resume` tool (`executionId` = `taskId`, `results`).
//!
//! Two requests of the 2025-11-25 Tasks utility are served beside the extension, for any
//! protocol revision: `tasks/result` waits until the task ends and answers the call's own
//! result (a client without the extension is asked the task's open questions by elicitation
//! meanwhile, as for a call), and `tasks/list` lists the tasks that wait or run, in the
//! 2025-11-25 task shape. The 2025-11-25 way of *creating* a task (a `task` field in
//! `tools/call` and a `tasks` server capability) is not in the MCP SDK this face is built on, so
//! tasks are created through the extension only.
//! `tasks/update` answers elicitations as a person would ([`DecisionChannel::Human`]): the
//! caller's policy decides whether it may.

use std::collections::BTreeMap;

use chrono::{TimeZone, Utc};
use rmcp::model::{
    DetailedTask, ElicitRequest, ElicitRequestParams, ElicitationSchema, InputRequest, Task,
    TaskPayload, TaskStatus,
};
use rmcp::ErrorData as McpError;
use serde_json::{Map, Value};
use toolshed_engine::{
    AnswerAction, Caller, Decision, DecisionChannel, Engine, EngineError, ExecutionInfo, Face,
    InputMode, Outcome, Wait, WaitKind,
};

const CHANNEL: DecisionChannel = DecisionChannel::Human(Face::Mcp);
/// How often a client should poll `tasks/get`.
const POLL_INTERVAL_MS: u64 = 500;

/// The task a paused run becomes.
pub(crate) fn of_paused(outcome: &Outcome) -> Task {
    let now = iso(Utc::now().timestamp_millis());
    let waits = outcome.waits();
    Task::new(
        outcome.execution_id(),
        TaskStatus::InputRequired,
        now.clone(),
        now,
    )
    .with_status_message(status_message(waits))
    .with_poll_interval_ms(POLL_INTERVAL_MS)
}

/// `tasks/get`: the execution as a task.
pub(crate) async fn get(
    engine: &Engine,
    caller: &Caller,
    task_id: &str,
) -> Result<DetailedTask, McpError> {
    let info = engine
        .execution(caller, task_id)
        .await
        .map_err(|e| error(task_id, &e))?;
    Ok(detailed(info))
}

/// `tasks/update`: answers the elicitations named in `responses` (by `waitId`), in order; the
/// execution runs on once nothing is open.
pub(crate) async fn update(
    engine: &Engine,
    caller: &Caller,
    task_id: &str,
    responses: BTreeMap<String, Value>,
) -> Result<(), McpError> {
    if responses.is_empty() {
        return Err(McpError::invalid_params(
            "inputResponses is empty: answer at least one of the task's inputRequests",
            None,
        ));
    }
    let info = engine
        .execution(caller, task_id)
        .await
        .map_err(|e| error(task_id, &e))?;
    for (wait_id, response) in responses {
        let Some(wait) = info.waits.iter().find(|w| w.wait_id == wait_id) else {
            return Err(McpError::invalid_params(
                format!("task '{task_id}' has no open input request '{wait_id}'"),
                None,
            ));
        };
        let action = response.get("action").and_then(Value::as_str).unwrap_or("");
        let answered = match (wait.kind, action) {
            (WaitKind::Approval, "accept" | "decline") => {
                let d = match action {
                    "accept" => Decision::Approve,
                    _ => Decision::Deny,
                };
                engine
                    .decide(caller, task_id, Some(&wait_id), d, CHANNEL)
                    .await
            }
            (WaitKind::Input, "accept" | "decline" | "cancel") => {
                let action = match action {
                    "accept" => AnswerAction::Accept,
                    "decline" => AnswerAction::Decline,
                    _ => AnswerAction::Cancel,
                };
                let content = response.get("content").cloned();
                engine
                    .answer(caller, task_id, &wait_id, action, content, CHANNEL)
                    .await
            }
            // Cancelling an approval's elicitation leaves it waiting.
            (WaitKind::Approval, "cancel") => continue,
            _ => {
                return Err(McpError::invalid_params(
                    format!(
                        "input response '{wait_id}' needs an elicitation result: {{\"action\": \"accept\" | \"decline\" | \"cancel\", \"content\"?}}"
                    ),
                    None,
                ))
            }
        };
        answered.map_err(|e| error(task_id, &e))?;
    }
    Ok(())
}

/// `tasks/cancel`: stops the execution.
pub(crate) async fn cancel(
    engine: &Engine,
    caller: &Caller,
    task_id: &str,
) -> Result<(), McpError> {
    engine
        .cancel(caller, task_id)
        .await
        .map(|_| ())
        .map_err(|e| error(task_id, &e))
}

/// How often `tasks/result` looks at a task that has not ended.
const RESULT_POLL: std::time::Duration = std::time::Duration::from_millis(200);

/// `tasks/result`: waits until the task ends, then answers the result of the call it stands
/// for, marked with the task (`_meta["io.modelcontextprotocol/related-task"]`). While the task
/// waits, open questions are put to `peer` by elicitation (once each) when one is given; an
/// unanswered task is waited for until it is answered elsewhere, cancelled or expires. A task
/// that was cancelled or expired has no result and answers an error saying so.
pub(crate) async fn result(
    engine: &Engine,
    caller: &Caller,
    task_id: &str,
    peer: Option<&rmcp::Peer<rmcp::RoleServer>>,
) -> Result<Value, McpError> {
    let mut asked = std::collections::HashSet::new();
    loop {
        let info = engine
            .execution(caller, task_id)
            .await
            .map_err(|e| error(task_id, &e))?;
        match info.status.as_str() {
            "completed" | "failed" => {
                let mut result =
                    serde_json::to_value(crate::outcome_result(&Outcome::from_info(info)))
                        .unwrap_or_default();
                result["_meta"] = serde_json::json!({RELATED_TASK: {"taskId": task_id}});
                return Ok(result);
            }
            "cancelled" | "expired" => {
                return Err(McpError::invalid_request(
                    format!("task '{task_id}' was {}: it has no result", info.status),
                    Some(serde_json::json!({"taskId": task_id, "status": info.status})),
                ))
            }
            "paused"
                if peer.is_some() && info.waits.iter().any(|w| !asked.contains(&w.wait_id)) =>
            {
                asked.extend(info.waits.iter().map(|w| w.wait_id.clone()));
                // The answers continue the run: in a task of its own, so that a client that
                // gives up on this request does not stop the run midway.
                let (e, c, p) = (engine.clone(), caller.clone(), peer.cloned());
                let outcome = Outcome::from_info(info);
                let _ = tokio::spawn(async move {
                    crate::elicit::settle(&e, &c, outcome, p.as_ref()).await;
                })
                .await;
            }
            _ => tokio::time::sleep(RESULT_POLL).await,
        }
    }
}

/// The `_meta` key that ties a message to its task.
const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

/// `tasks/list`: the tasks the caller may act on (waiting, running or interrupted executions
/// it owns or may answer), newest first, in the 2025-11-25 task shape.
pub(crate) async fn list(engine: &Engine, caller: &Caller) -> Result<Value, McpError> {
    let pending = engine
        .pending(caller)
        .await
        .map_err(|e| McpError::internal_error(e.to_string(), None))?;
    let tasks: Vec<Value> = pending
        .into_iter()
        .map(|p| {
            let (status, message) = match p.status.as_str() {
                "paused" => ("input_required", status_message(&p.waits)),
                other => ("working", other.to_string()),
            };
            serde_json::json!({
                "taskId": p.execution_id,
                "status": status,
                "statusMessage": message,
                "createdAt": iso(p.created_at),
                "lastUpdatedAt": iso(p.updated_at),
                "ttl": p.expires_at.map(|e| (e - p.created_at).max(0)),
                "pollInterval": POLL_INTERVAL_MS,
            })
        })
        .collect();
    Ok(serde_json::json!({"tasks": tasks}))
}

fn error(task_id: &str, e: &EngineError) -> McpError {
    let data = Some(e.to_json());
    match e {
        EngineError::UnknownExecution { .. } => {
            McpError::invalid_params(format!("unknown task '{task_id}'"), data)
        }
        _ => McpError::invalid_params(e.to_string(), data),
    }
}

fn iso(ms: i64) -> String {
    Utc.timestamp_millis_opt(ms)
        .single()
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// The execution's state as a task with its payload.
fn detailed(info: ExecutionInfo) -> DetailedTask {
    let mut task = Task::new(
        info.execution_id.clone(),
        TaskStatus::Working,
        iso(info.created_at),
        iso(info.updated_at),
    )
    .with_poll_interval_ms(POLL_INTERVAL_MS);
    if let Some(expires) = info.expires_at {
        task = task.with_ttl_ms((expires - info.created_at).max(0) as u64);
    }
    let payload = match info.status.as_str() {
        "paused" => {
            task = task.with_status_message(status_message(&info.waits));
            TaskPayload::InputRequired {
                input_requests: input_requests(&info.waits),
            }
        }
        "completed" | "failed" => {
            let outcome = match (info.status.as_str(), info.error) {
                ("failed", Some(error)) => Outcome::Failed {
                    execution_id: info.execution_id,
                    error,
                    logs: vec![],
                },
                _ => Outcome::Completed {
                    execution_id: info.execution_id,
                    result: info.result.unwrap_or(Value::Null),
                    logs: vec![],
                },
            };
            let result = serde_json::to_value(crate::outcome_result(&outcome))
                .ok()
                .and_then(|v| v.as_object().cloned())
                .unwrap_or_default();
            TaskPayload::Completed { result }
        }
        "cancelled" | "expired" => {
            task = task.with_status_message(info.status.clone());
            TaskPayload::Cancelled
        }
        other => {
            task = task.with_status_message(other.to_string());
            TaskPayload::Working
        }
    };
    DetailedTask::new(task, payload)
}

/// What the task waits for, in a line a person or model can act on.
fn status_message(waits: &[Wait]) -> String {
    let mut parts = vec![];
    for w in waits {
        parts.push(match w.kind {
            WaitKind::Approval => format!("approve or deny {} ({})", w.decision_path(), w.wait_id),
            WaitKind::Input => format!(
                "answer: {} ({})",
                w.message.as_deref().unwrap_or_default(),
                w.wait_id
            ),
            WaitKind::ToolResult => format!(
                "client tool call {} ({}): post its result with the resume tool",
                w.path.as_deref().unwrap_or_default(),
                w.call_id.as_deref().unwrap_or(&w.wait_id)
            ),
        });
    }
    format!("waiting: {}", parts.join("; "))
}

/// The elicitations of a paused execution, keyed by `waitId`.
fn input_requests(waits: &[Wait]) -> BTreeMap<String, InputRequest> {
    waits
        .iter()
        .filter_map(|w| {
            Some((
                w.wait_id.clone(),
                InputRequest::Elicitation(elicitation(w)?),
            ))
        })
        .collect()
}

fn elicitation(w: &Wait) -> Option<ElicitRequest> {
    let params = match (w.kind, w.mode) {
        (WaitKind::Approval, _) => ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: format!(
                "Approve the call {} ({})?\nArguments: {}\nAccept to run it, decline to refuse it.",
                w.decision_path(),
                w.name.as_deref().unwrap_or_default(),
                serde_json::to_string(w.arguments.as_ref().unwrap_or(&Value::Null))
                    .unwrap_or_default()
            ),
            requested_schema: ElicitationSchema::builder().build().ok()?,
        },
        (WaitKind::Input, Some(InputMode::Url)) => ElicitRequestParams::UrlElicitationParams {
            meta: None,
            message: w.message.clone().unwrap_or_default(),
            url: w.url.clone().unwrap_or_default(),
            elicitation_id: w.wait_id.clone(),
        },
        (WaitKind::Input, _) => ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: w.message.clone().unwrap_or_default(),
            requested_schema: w
                .schema
                .clone()
                .and_then(|s| serde_json::from_value(s).ok())
                .or_else(|| {
                    serde_json::from_value(Value::Object(Map::from_iter([(
                        "type".to_string(),
                        Value::String("object".into()),
                    )])))
                    .ok()
                })?,
        },
        (WaitKind::ToolResult, _) => return None,
    };
    Some(ElicitRequest::new(params))
}
