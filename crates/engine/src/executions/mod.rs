//! Executions: scripts and direct calls that may pause, stored durably, continued from any
//! session, on any replica, or after a restart.
//!
//! One pause model serves every reason to stop ([`waits`]): a call that needs approval, a call
//! of a tool the client executes itself (`client.*`), a question to a human
//! (`tools.ask_user`). A paused execution waits on every wait raised together; answers are
//! recorded one by one ([`answer`]) and the execution continues once none is open.
//!
//! Files: [`agent`] runs agents (kind `run`) on the same host, [`host`] answers a script's calls, [`run`] runs and settles a script, [`answer`]
//! checks and applies answers and cancels, [`listing`] shows executions and runs direct calls.
//!
//! A script runs in the sandbox with a host that numbers every call in issue order (`seq`). When a
//! destructive call reaches the approval gate, the host answers "suspend": the sandbox waits for
//! the other in-flight calls, then stops. The execution is stored with its journal (every
//! completed call's reply, by `seq`), the pending call and the decisions taken so far.
//!
//! On `resume`, the decision is recorded and the script runs again from the start with the same
//! `Math.random` seed and `Date`: calls whose `seq` is in the journal are answered from it (they
//! do not run again), the approved call runs for real (a denied one rejects with an error the
//! script can catch), and the script continues until it completes, fails or pauses again.
//! Because the sandbox delivers results in `seq` order, the replay follows the original run.
//!
//! Executions that never pause are never written to the store: the fast path stays in memory and
//! the audit log records their calls.
//!
//! Who may decide a pending call, and who sees an execution, is [`crate::decisions`]: `resume`
//! applies it before anything runs, and the resumed run runs as the execution's owner.
//!
//! A script first takes a sandbox slot ([`toolshed_sandbox::Sandbox::admit`]): when every slot
//! is busy and the queue is full it is refused with `overloaded` before anything is stored, and
//! a resume takes its slot before it claims the execution, so a refused resume leaves it paused.
//!
//! Crash safety of a resumed run: the claim stores the decision together with `status=running`,
//! and every call that completes during the resumed run is appended to the stored journal before
//! its result reaches the script. If the process dies mid-run, the execution stays `running`;
//! once it has been silent longer than a run can last (the wall clock or call timeout, plus
//! [`crate::EngineConfig::recovery_grace`]) it is listed as `interrupted` and can be
//! resumed again: the recorded decision is reused, journaled calls are answered from the
//! journal, and only calls that had not completed run (again).
//!
//! Each journal write runs in its own task holding the run's copy of the record, so a run that
//! ends mid-write (wall clock, suspension) does not cancel it; the final save waits for it and
//! uses the version it produced. When a journal write fails (the database refuses it, or
//! another run has claimed the execution), the run stops: no further tool call runs, and the
//! execution fails with `journal_failed` (stored as failed unless the claim was lost, in which
//! case nothing more is written).

pub mod agent;
pub mod answer;
pub mod host;
pub mod listing;
pub mod question;
pub mod run;
pub mod waits;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolshed_sandbox::LogEntry;

use crate::EngineError;
pub use agent::{RunRequest, RunSpec};
pub use answer::{MAX_ANSWER_BYTES, MAX_TOOL_RESULT_BYTES};
pub use listing::{RelayHooks, Relayed};
pub use question::QuestionAnswer;
pub use run::ScriptOptions;
pub use waits::{AnswerAction, ClientError, InputMode, ToolCall, ToolResultAnswer, Wait, WaitKind};

/// A fresh execution id (`ex_` and 32 hex digits), for a caller that must know it before the
/// execution starts (to follow its events from the first).
pub fn new_execution_id() -> String {
    format!("ex_{}", uuid::Uuid::new_v4().simple())
}

/// Script error messages (and stacks) kept, in bytes, like results and logs are bounded.
pub const MAX_SCRIPT_ERROR_BYTES: usize = 4_096;

/// A human's answer to a pending call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Approve,
    Deny,
}

impl std::str::FromStr for Decision {
    type Err = EngineError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "approve" | "approved" | "yes" | "allow" => Ok(Self::Approve),
            "deny" | "denied" | "no" | "reject" => Ok(Self::Deny),
            other => Err(EngineError::InvalidDecision(crate::audit::truncated(
                other, 64,
            ))),
        }
    }
}

/// A call waiting for approval, in the shape of earlier versions (the `pending` field).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PendingCall {
    pub seq: u64,
    pub path: String,
    pub name: String,
    pub args: Value,
}

/// How a script or call ended, or where it paused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Outcome {
    #[serde(rename_all = "camelCase")]
    Completed {
        execution_id: String,
        result: Value,
        #[serde(skip_serializing_if = "Vec::is_empty", default)]
        logs: Vec<LogEntry>,
    },
    #[serde(rename_all = "camelCase")]
    Failed {
        execution_id: String,
        error: Value,
        #[serde(skip_serializing_if = "Vec::is_empty", default)]
        logs: Vec<LogEntry>,
    },
    /// Waiting on waits of which at least one is not a client tool call.
    #[serde(rename_all = "camelCase")]
    Paused {
        execution_id: String,
        waits: Vec<Wait>,
        /// The first approval wait in the shape of earlier versions.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pending: Option<PendingCall>,
        message: String,
        #[serde(skip_serializing_if = "Vec::is_empty", default)]
        logs: Vec<LogEntry>,
    },
    /// Waiting only on client tool calls: run them and post their results.
    #[serde(rename_all = "camelCase")]
    ToolCallRequired {
        execution_id: String,
        waits: Vec<Wait>,
        tool_calls: Vec<ToolCall>,
        message: String,
        #[serde(skip_serializing_if = "Vec::is_empty", default)]
        logs: Vec<LogEntry>,
    },
    /// Stopped on request.
    #[serde(rename_all = "camelCase")]
    Cancelled {
        execution_id: String,
        #[serde(skip_serializing_if = "Vec::is_empty", default)]
        logs: Vec<LogEntry>,
    },
}

impl Outcome {
    /// The pause of `execution_id` on `waits`: `tool_call_required` when every wait is a client
    /// tool call, else `paused`.
    /// The outcome an execution stands at, from what [`crate::Engine::execution`] shows: its
    /// result, error or open waits (a running or expired one as paused on what it shows).
    pub fn from_info(info: ExecutionInfo) -> Self {
        let id = info.execution_id;
        match info.status.as_str() {
            "completed" => Self::Completed {
                execution_id: id,
                result: info.result.unwrap_or(Value::Null),
                logs: vec![],
            },
            "failed" | "expired" => Self::Failed {
                execution_id: id,
                error: info
                    .error
                    .unwrap_or_else(|| serde_json::json!({"code": info.status})),
                logs: vec![],
            },
            "cancelled" => Self::Cancelled {
                execution_id: id,
                logs: vec![],
            },
            _ => Self::paused(id, info.waits, vec![]),
        }
    }

    pub fn paused(execution_id: String, waits: Vec<Wait>, logs: Vec<LogEntry>) -> Self {
        let message = pause_message(&execution_id, &waits);
        if !waits.is_empty() && waits.iter().all(|w| w.kind == WaitKind::ToolResult) {
            return Self::ToolCallRequired {
                tool_calls: waits.iter().filter_map(ToolCall::of).collect(),
                execution_id,
                waits,
                message,
                logs,
            };
        }
        Self::Paused {
            pending: waits.iter().find_map(Wait::as_pending_call),
            execution_id,
            waits,
            message,
            logs,
        }
    }

    /// The event that tells followers how this run ended (or paused).
    pub fn event(&self) -> crate::events::Event {
        use crate::events::Event;
        match self {
            Self::Completed { result, .. } => Event::Completed {
                result: result.clone(),
            },
            Self::Failed { error, .. } => Event::Failed {
                error: error.clone(),
            },
            Self::Paused { waits, .. } => Event::Paused {
                status: "paused".into(),
                waits: serde_json::to_value(waits).unwrap_or(Value::Null),
            },
            Self::ToolCallRequired { waits, .. } => Event::Paused {
                status: "tool_call_required".into(),
                waits: serde_json::to_value(waits).unwrap_or(Value::Null),
            },
            Self::Cancelled { .. } => Event::Cancelled {},
        }
    }

    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    pub fn execution_id(&self) -> &str {
        match self {
            Self::Completed { execution_id, .. }
            | Self::Failed { execution_id, .. }
            | Self::Paused { execution_id, .. }
            | Self::ToolCallRequired { execution_id, .. }
            | Self::Cancelled { execution_id, .. } => execution_id,
        }
    }

    /// Whether the execution waits (paused or waiting for client tool results).
    pub fn is_paused(&self) -> bool {
        matches!(self, Self::Paused { .. } | Self::ToolCallRequired { .. })
    }

    /// The waits of a paused outcome (none otherwise).
    pub fn waits(&self) -> &[Wait] {
        match self {
            Self::Paused { waits, .. } | Self::ToolCallRequired { waits, .. } => waits,
            _ => &[],
        }
    }
}

/// What a pause asks of whoever reads it.
fn pause_message(id: &str, waits: &[Wait]) -> String {
    let mut parts = Vec::new();
    for w in waits {
        let what = match w.kind {
            WaitKind::Approval => format!(
                "'{}' needs approval: ask a human, then resume with executionId '{id}', waitId '{}' and decision \"approve\" or \"deny\"",
                w.decision_path(),
                w.wait_id
            ),
            WaitKind::ToolResult => format!(
                "run client tool '{}' and post its result with callId '{}'",
                w.name.as_deref().unwrap_or_default(),
                w.wait_id
            ),
            WaitKind::Input => format!(
                "a human must answer \"{}\" (waitId '{}')",
                crate::audit::truncated(w.message.as_deref().unwrap_or_default(), 200),
                w.wait_id
            ),
        };
        parts.push(what);
    }
    format!("Execution '{id}' is waiting: {}.", parts.join("; "))
}

/// A waiting (or interrupted) execution, as listed for those who may answer it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PendingSummary {
    pub execution_id: String,
    pub principal: String,
    /// `script` or `call`.
    pub kind: String,
    /// `paused` (waits for answers), `running` (being continued right now) or `interrupted`
    /// (a continued run that stopped without finishing, e.g. the process died; answer or
    /// resume it again).
    pub status: String,
    /// The open waits.
    pub waits: Vec<Wait>,
    /// The first open approval in the shape of earlier versions.
    pub pending: Option<PendingCall>,
    pub created_at: i64,
    /// When it last changed (ms).
    pub updated_at: i64,
    pub expires_at: Option<i64>,
}

/// One execution of the caller, as shown by `GET /v1/executions/{id}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExecutionInfo {
    pub execution_id: String,
    pub principal: String,
    pub kind: String,
    /// `paused`, `running`, `interrupted`, `completed`, `failed`, `expired` or `cancelled`.
    pub status: String,
    /// The open waits of a paused execution.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waits: Vec<Wait>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<PendingCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Value>,
    /// How many calls completed (journaled).
    pub completed_calls: usize,
    /// The client tools declared for the execution, each with the format it was read as.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub client_tools: Vec<Value>,
    pub created_at: i64,
    pub updated_at: i64,
    pub expires_at: Option<i64>,
}
