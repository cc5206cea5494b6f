//! What a paused execution waits on, and the answers it has received.
//!
//! An execution pauses on one or more **waits**, each `{waitId, kind, ...}`:
//! - `approval`: a human decision on a call (`path`, `name`, `arguments`);
//! - `tool_result`: a call of a client-executed tool (`callId`, `path`, `name`, `arguments`);
//! - `input`: a question to a human (`mode: "form"` with a JSON Schema for the answer, or
//!   `mode: "url"` with a link the human opens).
//!
//! A wait is named after the script call that raised it (`seq`), so a replay raises the same
//! wait with the same id. Answers are kept in the stored execution by `seq` (the `decisions`
//! column, which also holds answers of earlier versions: `{decision, path}`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolshed_store::ExecutionRecord;

use super::{Decision, PendingCall};

/// The kind of a wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WaitKind {
    /// A human approves or denies a call.
    Approval,
    /// The client runs one of its own tools and posts the result.
    ToolResult,
    /// A human answers a question.
    Input,
}

impl WaitKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Approval => "approval",
            Self::ToolResult => "tool_result",
            Self::Input => "input",
        }
    }
}

impl std::str::FromStr for WaitKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "approval" => Ok(Self::Approval),
            "tool_result" => Ok(Self::ToolResult),
            "input" => Ok(Self::Input),
            other => Err(format!(
                "unknown wait kind '{other}': use approval, tool_result or input"
            )),
        }
    }
}

/// How an `input` wait asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum InputMode {
    /// Answered with content valid against `schema`.
    Form,
    /// The human opens `url`; the answer carries no content.
    Url,
}

/// One thing a paused execution waits on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Wait {
    pub wait_id: String,
    pub kind: WaitKind,
    /// The script call that raised it (0 for a direct call).
    pub seq: u64,
    /// `tool_result` waits: the id the result is posted with (equal to `waitId`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// The tool called (`approval`, `tool_result`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The tool's name (`approval`), or the client tool's declared name (`tool_result`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The call's arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
    /// `input` waits: how the question is answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<InputMode>,
    /// `input` waits: the question.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// `input` waits in form mode: the JSON Schema of the answer's content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<Value>,
    /// `input` waits in url mode: the link to open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// The pseudo-path the decision rule uses for questions a script asks (`tools.ask_user`).
pub const ASK_USER_PATH: &str = "ask_user";

impl Wait {
    fn blank(wait_id: String, kind: WaitKind, seq: u64) -> Self {
        Self {
            wait_id,
            kind,
            seq,
            call_id: None,
            path: None,
            name: None,
            arguments: None,
            mode: None,
            message: None,
            schema: None,
            url: None,
        }
    }

    /// A call that needs a human's approval.
    pub fn approval(seq: u64, path: String, name: String, arguments: Value) -> Self {
        Self {
            path: Some(path),
            name: Some(name),
            arguments: Some(arguments),
            ..Self::blank(format!("approval_{seq}"), WaitKind::Approval, seq)
        }
    }

    /// A call of a client-executed tool.
    pub fn tool_result(seq: u64, path: String, name: String, arguments: Value) -> Self {
        let id = format!("call_{seq}");
        Self {
            call_id: Some(id.clone()),
            path: Some(path),
            name: Some(name),
            arguments: Some(arguments),
            ..Self::blank(id, WaitKind::ToolResult, seq)
        }
    }

    /// A question to a human.
    pub fn input(
        seq: u64,
        mode: InputMode,
        message: String,
        schema: Option<Value>,
        url: Option<String>,
    ) -> Self {
        Self {
            mode: Some(mode),
            message: Some(message),
            schema,
            url,
            ..Self::blank(format!("input_{seq}"), WaitKind::Input, seq)
        }
    }

    /// The path the decision rule matches for this wait (the tool's, or [`ASK_USER_PATH`]).
    pub fn decision_path(&self) -> &str {
        self.path.as_deref().unwrap_or(ASK_USER_PATH)
    }

    /// The pre-waits shape of an approval, kept in answers as `pending`.
    pub fn as_pending_call(&self) -> Option<PendingCall> {
        (self.kind == WaitKind::Approval).then(|| PendingCall {
            seq: self.seq,
            path: self.path.clone().unwrap_or_default(),
            name: self.name.clone().unwrap_or_default(),
            args: self.arguments.clone().unwrap_or(Value::Null),
        })
    }
}

/// A client tool call as agent platforms expect it in a `tool_call_required` answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    pub call_id: String,
    pub path: String,
    pub name: String,
    pub arguments: Value,
}

impl ToolCall {
    pub(crate) fn of(w: &Wait) -> Option<Self> {
        (w.kind == WaitKind::ToolResult).then(|| Self {
            call_id: w.call_id.clone().unwrap_or_else(|| w.wait_id.clone()),
            path: w.path.clone().unwrap_or_default(),
            name: w.name.clone().unwrap_or_default(),
            arguments: w.arguments.clone().unwrap_or(Value::Null),
        })
    }
}

/// How a human answered a question.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum AnswerAction {
    Accept,
    Decline,
    Cancel,
}

/// One client tool result, as posted to `tool-results`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolResultAnswer {
    /// The `callId` of the `tool_result` wait.
    pub call_id: String,
    /// The tool's result (when it succeeded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// The tool's failure (when it failed): `{message}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ClientError>,
}

/// A client tool's failure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ClientError {
    pub message: String,
}

/// An answer recorded for a wait, stored by `seq`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum Answer {
    Approval {
        decision: Decision,
        path: String,
    },
    ToolResult {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    Input {
        action: AnswerAction,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content: Option<Value>,
    },
}

impl Answer {
    /// Reads a stored answer; entries of earlier versions (`{decision, path}`) are approvals.
    pub(crate) fn from_stored(v: &Value) -> Option<Self> {
        if v.get("kind").is_none() {
            return Some(Self::Approval {
                decision: v["decision"].as_str()?.parse().ok()?,
                path: v["path"].as_str()?.to_string(),
            });
        }
        serde_json::from_value(v.clone()).ok()
    }
}

/// The stored answers of an execution, by `seq`.
pub(crate) fn answers_of(rec: &ExecutionRecord) -> std::collections::HashMap<u64, Answer> {
    rec.decisions
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.parse().ok()?, Answer::from_stored(v)?)))
        .collect()
}

/// The waits of a stored execution. `pending` holds the waits array; a record of an earlier
/// version holds one pending call object, read as its approval wait.
pub(crate) fn waits_of(rec: &ExecutionRecord) -> Vec<Wait> {
    match &rec.pending {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|w| serde_json::from_value(w.clone()).ok())
            .collect(),
        Some(v @ Value::Object(_)) => serde_json::from_value::<PendingCall>(v.clone())
            .map(|p| vec![Wait::approval(p.seq, p.path, p.name, p.args)])
            .unwrap_or_default(),
        _ => vec![],
    }
}

/// The waits not answered yet.
pub(crate) fn open_waits(rec: &ExecutionRecord) -> Vec<Wait> {
    let answered = answers_of(rec);
    waits_of(rec)
        .into_iter()
        .filter(|w| !answered.contains_key(&w.seq))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn wait_ids_follow_the_call_and_the_shapes_are_camel_case() {
        let w = Wait::tool_result(3, "client.calc".into(), "calc".into(), json!({"a": 1}));
        let v = serde_json::to_value(&w).unwrap();
        assert_eq!(v["waitId"], "call_3");
        assert_eq!(v["callId"], "call_3");
        assert_eq!(v["kind"], "tool_result");
        assert!(v.get("schema").is_none());
        let a = Wait::approval(0, "t.drop".into(), "Drop".into(), json!({}));
        assert_eq!(a.wait_id, "approval_0");
        assert_eq!(a.as_pending_call().unwrap().path, "t.drop");
        let q = Wait::input(1, InputMode::Form, "Name?".into(), Some(json!({})), None);
        assert_eq!(q.decision_path(), ASK_USER_PATH);
        assert_eq!(serde_json::to_value(&q).unwrap()["mode"], "form");
    }

    #[test]
    fn stored_answers_of_earlier_versions_are_approvals() {
        let old = json!({"decision": "approve", "path": "t.drop"});
        assert_eq!(
            Answer::from_stored(&old),
            Some(Answer::Approval {
                decision: Decision::Approve,
                path: "t.drop".into()
            })
        );
        let new = serde_json::to_value(Answer::ToolResult {
            result: Some(json!(4)),
            error: None,
        })
        .unwrap();
        assert_eq!(new["kind"], "tool_result");
        assert!(matches!(
            Answer::from_stored(&new),
            Some(Answer::ToolResult { .. })
        ));
    }
}
