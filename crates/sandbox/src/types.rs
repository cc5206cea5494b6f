//! The sandbox's public data types: limits, determinism inputs, the host interface, and the
//! outcome of a run. Everything serializes with serde in camelCase so the engine can journal it
//! and return it to callers; durations serialize as fractional milliseconds.

use std::fmt;
use std::time::Duration;

use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Resource limits for one script run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Limits {
    /// QuickJS heap limit in bytes (default 64 MiB).
    pub memory_bytes: usize,
    /// Maximum JavaScript stack depth in bytes (default 1 MiB).
    pub stack_bytes: usize,
    /// Wall-clock budget for the whole run, host calls included (default 30 s), unless a call
    /// to one of [`Self::long_calls_ms`] moves it.
    #[serde(with = "duration_ms")]
    pub wall_clock: Duration,
    /// CPU-time budget for executing JavaScript (default 10 s). Only time the script's own code
    /// runs counts: waiting for tool calls, and the host's work on them, does not.
    #[serde(with = "duration_ms")]
    pub cpu_time: Duration,
    /// Maximum number of host calls (tools, search, describe) a script may issue (default 1000).
    pub max_tool_calls: u32,
    /// Total bytes of console output kept; the rest is cut with a marker (default 64 KiB).
    pub max_log_bytes: usize,
    /// Maximum size of the JSON-encoded result (default 4 MiB).
    pub max_result_bytes: usize,
    /// Tools that may take longer than the wall clock (their own declared timeouts, in ms): a
    /// call to one moves the run's deadline to at least the call's start plus that time (never
    /// earlier), so that a script can wait for a long workflow or sub-agent; never past the wall
    /// clock plus the longest of them ([`Self::longest_call`]). The CPU-time limit and the
    /// tool-call limit still hold; at most [`MAX_LONG_CALLS`] entries are read.
    pub long_calls_ms: std::collections::BTreeMap<String, u64>,
}

/// Most [`Limits::long_calls_ms`] entries a run reads.
pub const MAX_LONG_CALLS: usize = 256;

impl Limits {
    /// The longest of [`Self::long_calls_ms`]: how far past the wall clock a run may go, however
    /// many long calls it makes.
    pub fn longest_call(&self) -> Duration {
        Duration::from_millis(self.long_calls_ms.values().copied().max().unwrap_or(0))
    }

    /// The time a call to `target` may move the deadline to, counted from the call's start.
    pub fn long_call(&self, target: &CallTarget) -> Option<Duration> {
        match target {
            CallTarget::Tool(path) => self
                .long_calls_ms
                .get(path)
                .filter(|_| self.long_calls_ms.len() <= MAX_LONG_CALLS)
                .map(|ms| Duration::from_millis(*ms)),
            _ => None,
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            memory_bytes: 64 * 1024 * 1024,
            stack_bytes: 1024 * 1024,
            wall_clock: Duration::from_secs(30),
            cpu_time: Duration::from_secs(10),
            max_tool_calls: 1000,
            max_log_bytes: 64 * 1024,
            max_result_bytes: 4 * 1024 * 1024,
            long_calls_ms: Default::default(),
        }
    }
}

/// Inputs that pin the script's otherwise non-deterministic built-ins, so that a replay of the
/// same script with the same host answers behaves identically.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Determinism {
    /// Seed of the PRNG behind `Math.random()`.
    pub seed: u64,
    /// What `Date.now()` and `new Date()` (no arguments) return, in milliseconds since the epoch.
    pub now_ms: f64,
}

/// What a host call is addressed to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum CallTarget {
    /// A tool by dot path, e.g. `github.issues.create`.
    Tool(String),
    /// `tools.search({query, limit})`.
    Search,
    /// `tools.describe.tool({path})`.
    Describe,
    /// `tools.ask_user({message, schema?})`: a question to a human (the host pauses the run
    /// until it is answered).
    Ask,
}

impl fmt::Display for CallTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallTarget::Tool(path) => write!(f, "tools.{path}"),
            CallTarget::Search => f.write_str("tools.search"),
            CallTarget::Describe => f.write_str("tools.describe.tool"),
            CallTarget::Ask => f.write_str("tools.ask_user"),
        }
    }
}

/// One call issued by the script to the host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HostCall {
    /// 0-based position of this call in the order the script issued its calls.
    pub seq: u32,
    /// What the call is addressed to.
    pub target: CallTarget,
    /// The JSON arguments (`{}` when the script passed none).
    pub args: Value,
}

/// The host's answer to a [`HostCall`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum HostReply {
    /// The call succeeded; the promise resolves with this value.
    Ok(Value),
    /// The call failed; the promise rejects with an `Error` carrying `code`, `message`, `data`.
    Err(HostError),
    /// The call cannot be answered in this run (e.g. it awaits approval); the run stops with
    /// [`Status::Suspended`] once every earlier call has been delivered.
    Suspend,
}

/// A failed host call, as seen by the script.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[serde(rename_all = "camelCase")]
#[error("{code}: {message}")]
pub struct HostError {
    /// Machine-readable code, exposed as `e.code`.
    pub code: String,
    /// Human-readable message, exposed as `e.message`.
    pub message: String,
    /// Optional structured details, exposed as `e.data` (`null` when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl HostError {
    /// A host error without data.
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            code: code.into(),
            message: message.into(),
            data: None,
        }
    }
}

/// The side that answers a script's calls (in Toolshed: the engine, which validates, applies
/// policy and approval, runs the handler and audits).
pub trait Host: Send + Sync + 'static {
    /// Answers one call. The future is polled concurrently with the script's other in-flight
    /// calls: in the run's own task for worker processes, or on the sandbox thread inside the
    /// caller's tokio runtime context for in-process runs.
    fn call(&self, call: HostCall) -> BoxFuture<'static, HostReply>;
}

/// One captured `console.*` line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LogEntry {
    /// `log`, `info`, `warn`, `error` or `debug`.
    pub level: String,
    /// The formatted arguments, space separated (objects as JSON).
    pub message: String,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Status {
    /// The script returned this value (`undefined` becomes `null`).
    Completed(Value),
    /// The script failed.
    Failed(ScriptError),
    /// The host suspended call `seq`; every earlier call was delivered.
    #[serde(rename_all = "camelCase")]
    Suspended {
        /// The lowest suspended call.
        seq: u32,
    },
}

/// Why a script failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(rename_all = "camelCase")]
#[error("{kind}: {message}{}", location(*line, *column))]
pub struct ScriptError {
    /// The class of failure.
    pub kind: ScriptErrorKind,
    /// Human-readable description.
    pub message: String,
    /// 1-based line in the user's source, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// 1-based column in the user's source, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub column: Option<u32>,
    /// The JavaScript stack, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack: Option<String>,
}

fn location(line: Option<u32>, column: Option<u32>) -> String {
    match (line, column) {
        (Some(l), Some(c)) => format!(" (line {l}, column {c})"),
        (Some(l), None) => format!(" (line {l})"),
        _ => String::new(),
    }
}

impl ScriptError {
    /// An error of `kind` with a message and no location.
    pub fn new(kind: ScriptErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            line: None,
            column: None,
            stack: None,
        }
    }
}

/// The class of a [`ScriptError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ScriptErrorKind {
    /// The source does not parse.
    Syntax,
    /// The script threw (or a host error went uncaught).
    Thrown,
    /// The wall-clock limit was reached.
    Timeout,
    /// The CPU-time budget for executing JavaScript was used up.
    CpuLimit,
    /// The memory limit was reached.
    MemoryLimit,
    /// The stack limit was reached.
    StackOverflow,
    /// The script went over `max_tool_calls` and did not catch the rejection.
    CallLimit,
    /// The script awaits a promise that can never settle.
    Deadlock,
    /// The result cannot be turned into JSON or is too large.
    InvalidResult,
    /// A fault in the sandbox itself (or the run was cancelled).
    Internal,
}

impl fmt::Display for ScriptErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ScriptErrorKind::Syntax => "syntax error",
            ScriptErrorKind::Thrown => "uncaught exception",
            ScriptErrorKind::Timeout => "timeout",
            ScriptErrorKind::CpuLimit => "cpu limit",
            ScriptErrorKind::MemoryLimit => "memory limit",
            ScriptErrorKind::StackOverflow => "stack overflow",
            ScriptErrorKind::CallLimit => "tool call limit",
            ScriptErrorKind::Deadlock => "deadlock",
            ScriptErrorKind::InvalidResult => "invalid result",
            ScriptErrorKind::Internal => "internal error",
        })
    }
}

/// Everything a run produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunOutcome {
    /// How the run ended.
    pub status: Status,
    /// Captured console output.
    pub logs: Vec<LogEntry>,
    /// Number of host calls the script issued (rejected over-limit calls excluded).
    pub calls: u32,
    /// Wall-clock time of the run.
    #[serde(with = "duration_ms")]
    pub elapsed: Duration,
}

/// Serializes a [`Duration`] as fractional milliseconds.
mod duration_ms {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64() * 1000.0)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let ms = f64::deserialize(d)?;
        if !ms.is_finite() || ms < 0.0 {
            return Err(serde::de::Error::custom(
                "duration must be a non-negative number",
            ));
        }
        Ok(Duration::from_secs_f64(ms / 1000.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn limits_defaults_match_the_contract() {
        let l = Limits::default();
        assert_eq!(l.memory_bytes, 64 << 20);
        assert_eq!(l.stack_bytes, 1 << 20);
        assert_eq!(l.wall_clock, Duration::from_secs(30));
        assert_eq!(l.cpu_time, Duration::from_secs(10));
        assert_eq!(l.max_tool_calls, 1000);
        assert_eq!(l.max_log_bytes, 64 << 10);
        assert_eq!(l.max_result_bytes, 4 << 20);
    }

    #[test]
    fn limits_round_trip_in_camel_case() {
        let l = Limits::default();
        let v = serde_json::to_value(&l).unwrap();
        assert_eq!(v["wallClock"], json!(30000.0));
        assert_eq!(v["cpuTime"], json!(10000.0));
        assert_eq!(v["maxToolCalls"], json!(1000));
        let back: Limits = serde_json::from_value(v).unwrap();
        assert_eq!(back, l);
        let partial: Limits = serde_json::from_value(json!({"maxToolCalls": 3})).unwrap();
        assert_eq!(partial.max_tool_calls, 3);
        assert_eq!(partial.memory_bytes, l.memory_bytes);
    }

    #[test]
    fn outcome_serializes_and_round_trips() {
        let o = RunOutcome {
            status: Status::Failed(ScriptError {
                kind: ScriptErrorKind::MemoryLimit,
                message: "out of memory".into(),
                line: Some(2),
                column: None,
                stack: None,
            }),
            logs: vec![LogEntry {
                level: "info".into(),
                message: "hi".into(),
            }],
            calls: 2,
            elapsed: Duration::from_millis(5),
        };
        let v = serde_json::to_value(&o).unwrap();
        assert_eq!(v["status"]["failed"]["kind"], json!("memoryLimit"));
        assert_eq!(v["elapsed"], json!(5.0));
        let back: RunOutcome = serde_json::from_value(v).unwrap();
        assert_eq!(back, o);
        let s = serde_json::to_value(Status::Suspended { seq: 4 }).unwrap();
        assert_eq!(s, json!({"suspended": {"seq": 4}}));
    }

    #[test]
    fn errors_display_with_location() {
        let mut e = ScriptError::new(ScriptErrorKind::Syntax, "unexpected token");
        e.line = Some(3);
        e.column = Some(7);
        assert_eq!(
            e.to_string(),
            "syntax error: unexpected token (line 3, column 7)"
        );
        let h = HostError::new("not_found", "no such tool");
        assert_eq!(h.to_string(), "not_found: no such tool");
        assert_eq!(CallTarget::Tool("a.b".into()).to_string(), "tools.a.b");
    }
}
