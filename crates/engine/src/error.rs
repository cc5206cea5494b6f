//! The engine's typed errors. Every face maps these to its own shape (MCP tool error, HTTP
//! status, CLI exit code); the messages are written for agents and humans alike.

use std::time::Duration;

use serde_json::{json, Value};
use toolshed_core::{ToolError, Violation};

/// Why a call, a script or a resume did not go through.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// Unknown path, or a path outside the caller's role: both answer the same.
    /// Build it with [`EngineError::not_found`], which bounds the path it repeats.
    #[error("no tool '{path}' is available; use search_tools to find tools")]
    NotFound { path: String },
    #[error("arguments for '{path}' are not valid JSON: {reason}")]
    MalformedArguments { path: String, reason: String },
    #[error("invalid arguments for '{path}': {}", describe(.violations))]
    InvalidArguments {
        path: String,
        violations: Vec<Violation>,
    },
    #[error("tool '{path}' failed: {error}")]
    Tool { path: String, error: Box<ToolError> },
    #[error("tool '{path}' did not finish within {}s", .after.as_secs_f64())]
    Timeout { path: String, after: Duration },
    /// A question a call put to its people (a stored `input` wait) was not answered in time;
    /// it was cancelled. Not the tool's own timeout: the call waited for a person.
    #[error("the question '{id}' went unanswered within {}s and was cancelled; ask again once someone can answer it", whole_secs(.after))]
    QuestionUnanswered { id: String, after: Duration },
    #[error("tool '{path}' returned a result that does not match its output schema: {}", describe(.violations))]
    InvalidOutput {
        path: String,
        violations: Vec<Violation>,
    },
    #[error("tool '{path}' has an invalid {which} schema: {reason}")]
    BrokenSchema {
        path: String,
        which: &'static str,
        reason: String,
    },
    #[error("the call to '{path}' was denied by an approver")]
    Denied { path: String },
    /// A role's `deny` rule matches the call.
    #[error(
        "calls to '{path}' are denied by policy: a `deny` rule of the caller's roles matches it"
    )]
    DeniedByPolicy { path: String },
    #[error("no execution '{id}' exists for this principal")]
    UnknownExecution { id: String },
    /// The caller can see the execution but may not decide it (through this channel).
    #[error("execution '{id}' cannot be decided by this caller: {reason}")]
    Forbidden { id: String, reason: String },
    /// Too many calls or scripts in the last minute for this principal.
    #[error("rate limit reached: principal '{principal}' may start {per_minute} {what} per minute; retry in {}s", retry_secs(.retry_after))]
    RateLimited {
        principal: String,
        /// `tool calls` or `scripts`.
        what: &'static str,
        per_minute: u32,
        retry_after: Duration,
    },
    #[error("execution '{id}' expired: it waited for approval longer than {ttl_secs}s and can no longer be resumed")]
    Expired { id: String, ttl_secs: u64 },
    #[error("execution '{id}' is already {status}; only paused executions can be resumed")]
    AlreadySettled { id: String, status: String },
    #[error("execution '{id}' is being resumed by another request right now")]
    Busy { id: String },
    #[error("execution '{id}' was stopped: the result of call #{seq} ('{path}') could not be stored in its journal ({reason}); no further calls were made")]
    JournalWrite {
        id: String,
        seq: u64,
        path: String,
        reason: String,
    },
    /// Every script slot is busy and the queue of waiting scripts is full.
    #[error("{0}")]
    Overloaded(toolshed_sandbox::Overloaded),
    #[error("invalid decision '{0}': use \"approve\" or \"deny\"")]
    InvalidDecision(String),
    /// An answer that names no wait of the execution.
    #[error("execution '{id}' has no wait '{wait_id}'")]
    UnknownWait { id: String, wait_id: String },
    /// A wait answered before: answers are final.
    #[error("wait '{wait_id}' of execution '{id}' is already answered")]
    AlreadyAnswered { id: String, wait_id: String },
    /// An answer refused as given (wrong kind, too large, failing a schema); nothing changed.
    #[error("invalid answer to execution '{id}'{}: {reason}", wait_label(.wait_id))]
    InvalidAnswer {
        id: String,
        wait_id: String,
        reason: String,
        violations: Vec<Violation>,
    },
    /// A script journaled by another script runtime cannot be replayed identically.
    #[error("execution '{id}' was journaled by script runtime '{stored}' and this server runs '{current}': its replay cannot be guaranteed identical, so it is not continued (answer it from a server of the same version)")]
    RuntimeChanged {
        id: String,
        stored: String,
        current: String,
    },
    /// Client tool declarations refused before anything ran.
    #[error("invalid client tools: {0}")]
    InvalidClientTools(#[from] toolshed_core::formats::ClientToolsError),
    #[error("storage failed: {0}")]
    Store(Box<toolshed_store::StoreError>),
    #[error("the agent run cannot start: {0}")]
    InvalidRun(String),
    #[error("no agent '{name}' exists; agents.list lists them")]
    UnknownAgent { name: String },
}

impl From<toolshed_sandbox::Overloaded> for EngineError {
    fn from(e: toolshed_sandbox::Overloaded) -> Self {
        Self::Overloaded(e)
    }
}

impl From<toolshed_store::StoreError> for EngineError {
    fn from(e: toolshed_store::StoreError) -> Self {
        Self::Store(Box::new(e))
    }
}

fn wait_label(wait_id: &str) -> String {
    if wait_id.is_empty() {
        String::new()
    } else {
        format!(" (wait '{wait_id}')")
    }
}

/// Seconds as shown in messages: whole when exact, else with one decimal.
fn whole_secs(d: &Duration) -> String {
    if d.subsec_millis() == 0 {
        d.as_secs().to_string()
    } else {
        format!("{:.1}", d.as_secs_f64())
    }
}

/// Whole seconds to wait, at least one.
fn retry_secs(d: &Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

fn describe(v: &[Violation]) -> String {
    toolshed_core::schema::describe_violations(v)
}

/// How much of a caller-supplied path an error message repeats.
const SHOWN_PATH_BYTES: usize = toolshed_core::path::MAX_CALL_PATH_BYTES;

impl EngineError {
    /// `not_found` for `path`; a path longer than any tool path is shown cut, with a marker.
    pub fn not_found(path: &str) -> Self {
        Self::NotFound {
            path: crate::audit::truncated(path, SHOWN_PATH_BYTES),
        }
    }

    /// A short machine-readable code (`not_found`, `invalid_arguments`, ...).
    pub fn code(&self) -> &'static str {
        match self {
            Self::NotFound { .. } => "not_found",
            Self::MalformedArguments { .. } => "malformed_arguments",
            Self::InvalidArguments { .. } => "invalid_arguments",
            Self::Tool { error, .. } => match error.kind {
                toolshed_core::ToolErrorKind::InvalidInput => "invalid_input",
                toolshed_core::ToolErrorKind::NotFound => "tool_not_found",
                toolshed_core::ToolErrorKind::Conflict => "conflict",
                toolshed_core::ToolErrorKind::Upstream => "upstream",
                toolshed_core::ToolErrorKind::Timeout => "timeout",
                toolshed_core::ToolErrorKind::Unauthorized => "unauthorized",
                toolshed_core::ToolErrorKind::Internal => "internal",
                toolshed_core::ToolErrorKind::Rejected => "rejected",
                toolshed_core::ToolErrorKind::GrantRequired => "grant_required",
                toolshed_core::ToolErrorKind::ActionRequired => "action_required",
            },
            Self::Timeout { .. } => "timeout",
            Self::QuestionUnanswered { .. } => "question_unanswered",
            Self::InvalidOutput { .. } => "invalid_output",
            Self::BrokenSchema { .. } => "broken_schema",
            Self::Denied { .. } => "denied",
            Self::DeniedByPolicy { .. } => "denied_by_policy",
            Self::UnknownExecution { .. } => "unknown_execution",
            Self::Forbidden { .. } => "forbidden",
            Self::RateLimited { .. } => "rate_limited",
            Self::Expired { .. } => "expired",
            Self::AlreadySettled { .. } => "already_settled",
            Self::Busy { .. } => "busy",
            Self::JournalWrite { .. } => "journal_failed",
            Self::Overloaded(_) => "overloaded",
            Self::InvalidDecision(_) => "invalid_decision",
            Self::UnknownWait { .. } => "unknown_wait",
            Self::AlreadyAnswered { .. } => "already_answered",
            Self::InvalidAnswer { .. } => "invalid_answer",
            Self::RuntimeChanged { .. } => "runtime_changed",
            Self::InvalidClientTools(_) => "invalid_client_tools",
            Self::Store(_) => "store",
            Self::InvalidRun(_) => "invalid_run",
            Self::UnknownAgent { .. } => "unknown_agent",
        }
    }

    /// Structured detail for faces: violations, tool error data.
    pub fn data(&self) -> Option<Value> {
        match self {
            Self::InvalidArguments { violations, .. } | Self::InvalidOutput { violations, .. } => {
                Some(json!({ "violations": violations }))
            }
            Self::InvalidAnswer { violations, .. } if !violations.is_empty() => {
                Some(json!({ "violations": violations }))
            }
            Self::InvalidClientTools(e) => Some(json!({ "index": e.index })),
            Self::Tool { error, .. } => error.data.clone(),
            Self::RateLimited { retry_after, .. } => {
                Some(json!({ "retryAfterSecs": retry_secs(retry_after) }))
            }
            _ => None,
        }
    }

    /// For `rate_limited` and `overloaded`: whole seconds until the next call or script may
    /// start.
    pub fn retry_after_secs(&self) -> Option<u64> {
        match self {
            Self::RateLimited { retry_after, .. } => Some(retry_secs(retry_after)),
            // Every script slot is busy: a slot frees up as soon as a script ends.
            Self::Overloaded(_) => Some(1),
            _ => None,
        }
    }

    /// `{code, message, data?}` for JSON faces.
    pub fn to_json(&self) -> Value {
        let mut v = json!({"code": self.code(), "message": self.to_string()});
        if let Some(d) = self.data() {
            v["data"] = d;
        }
        v
    }

    /// A tool refused the input with a structured answer (its `data`): the caller's error.
    pub fn is_rejection(&self) -> bool {
        matches!(self, Self::Tool { error, .. } if error.kind == toolshed_core::ToolErrorKind::Rejected)
    }

    /// Whether the caller (not the server) is at fault.
    pub fn is_client_error(&self) -> bool {
        if self.is_rejection() {
            return true;
        }
        !matches!(
            self,
            Self::Store(_)
                | Self::Overloaded(_)
                | Self::JournalWrite { .. }
                | Self::RuntimeChanged { .. }
                | Self::BrokenSchema { .. }
                | Self::Tool { .. }
                | Self::Timeout { .. }
                | Self::QuestionUnanswered { .. }
                | Self::InvalidOutput { .. }
        )
    }
}
