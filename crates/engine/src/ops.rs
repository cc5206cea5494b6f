//! The agent-facing operations, defined once: name, argument struct (serde, with its JSON
//! Schema from `schemars`), annotations, and dispatch into the engine. The MCP meta-tools, the
//! HTTP routes and the script host all read their arguments through these structs, so limits
//! are clamped in one place ([`SearchArgs::limit`]) and a new operation is added here.
//!
//! | operation | arguments | engine |
//! |---|---|---|
//! | `search_tools` | [`SearchArgs`] | [`Engine::search`] |
//! | `read_tool` | [`DescribeArgs`] | [`Engine::describe`] |
//! | `run_script` | [`RunScriptArgs`] | [`Engine::run_script_with`] |
//! | `resume` | [`ResumeArgs`] | [`Engine::decide`], [`Engine::tool_results`], [`Engine::answer`] |
//! | `list_waits` | [`ListWaitsArgs`] | [`Engine::waiting`] |
//! | `cancel` | [`CancelArgs`] | [`Engine::cancel`] |

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::discovery::{Description, SearchAnswer};
use crate::executions::{
    AnswerAction, Outcome, PendingSummary, ScriptOptions, ToolResultAnswer, WaitKind,
};
use crate::{Caller, DecisionChannel, Engine, EngineError};

/// Most search hits one request may ask for.
pub const MAX_SEARCH_LIMIT: usize = 50;
/// Most client tools one execution may declare.
pub const MAX_CLIENT_TOOLS: usize = 128;

/// One agent-facing operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    SearchTools,
    ReadTool,
    RunScript,
    Resume,
    ListWaits,
    Cancel,
}

/// How an operation affects the world, for MCP annotations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpHints {
    pub read_only: bool,
    pub destructive: bool,
    pub idempotent: bool,
}

impl Op {
    /// Every operation, in the order faces list them.
    pub const ALL: [Op; 6] = [
        Op::SearchTools,
        Op::ReadTool,
        Op::RunScript,
        Op::Resume,
        Op::ListWaits,
        Op::Cancel,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Op::SearchTools => "search_tools",
            Op::ReadTool => "read_tool",
            Op::RunScript => "run_script",
            Op::Resume => "resume",
            Op::ListWaits => "list_waits",
            Op::Cancel => "cancel",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|o| o.name() == name)
    }

    pub fn title(self) -> &'static str {
        match self {
            Op::SearchTools => "Search Tools",
            Op::ReadTool => "Read Tool",
            Op::RunScript => "Run Script",
            Op::Resume => "Resume Execution",
            Op::ListWaits => "List Waiting Executions",
            Op::Cancel => "Cancel Execution",
        }
    }

    /// What the operation does, for tool descriptions (the view summary is added by faces).
    pub fn description(self) -> &'static str {
        match self {
            Op::SearchTools => "Search the tool catalog by what you want to do; returns ranked {path, name, summary} hits and how many matched.",
            Op::ReadTool => "Read one tool: its inputs and outputs as compact text with types, constraints and an example call. Set schemas=true to also get the raw JSON Schemas.",
            Op::RunScript => "Run JavaScript (an async function body) that calls tools: `const r = await tools.<path>({...}); return r;`. Also `await tools.search({query})`, `await tools.describe.tool({path})` and `await tools.ask_user({message, schema?})` (a question to the user). Promise.all works; console.log is captured; the returned value comes back as JSON. No network, files or timers. Declare your own tools in clientTools (MCP, OpenAI, Anthropic or custom format) and call them as tools.client.<name>(args): the script pauses with status \"tool_call_required\" and toolCalls to run; post results with resume. Calls that need approval pause with status \"paused\" and an executionId.",
            Op::Resume => "Continue a paused execution: {executionId, decision: \"approve\"|\"deny\", waitId?} after the user decided on a call that needs approval (when your policy lets you decide your own calls); {executionId, results: [{callId, result} | {callId, error: {message}}]} with your client tools' results; {executionId, waitId, action: \"accept\"|\"decline\"|\"cancel\", content?} to relay the user's answer to a question. Works from any session.",
            Op::ListWaits => "List the executions waiting for an answer that you own or may answer, optionally only those waiting on one kind (approval, tool_result, input).",
            Op::Cancel => "Stop a running or paused execution of yours.",
        }
    }

    pub fn hints(self) -> OpHints {
        let read = OpHints {
            read_only: true,
            destructive: false,
            idempotent: true,
        };
        let write = OpHints {
            read_only: false,
            destructive: true,
            idempotent: false,
        };
        match self {
            Op::SearchTools | Op::ReadTool | Op::ListWaits => read,
            Op::RunScript | Op::Resume | Op::Cancel => write,
        }
    }

    /// The JSON Schema of the operation's arguments.
    pub fn schema(self) -> Value {
        let schema = match self {
            Op::SearchTools => schemars::schema_for!(SearchArgs),
            Op::ReadTool => schemars::schema_for!(DescribeArgs),
            Op::RunScript => schemars::schema_for!(RunScriptArgs),
            Op::Resume => schemars::schema_for!(ResumeArgs),
            Op::ListWaits => schemars::schema_for!(ListWaitsArgs),
            Op::Cancel => schemars::schema_for!(CancelArgs),
        };
        let mut v = serde_json::to_value(schema).unwrap_or_default();
        if let Some(o) = v.as_object_mut() {
            o.remove("$schema");
            o.remove("title");
        }
        v
    }
}

/// `search_tools`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchArgs {
    /// What you want to do, in words.
    pub query: String,
    /// At most this many hits (1 to 50, default 10).
    #[serde(default)]
    pub limit: Option<u64>,
    /// Only tools under this first path segment.
    #[serde(default)]
    pub namespace: Option<String>,
    /// `text` (compact lines, the default over MCP) or `json`.
    #[serde(default)]
    pub format: Option<String>,
    /// What to find: `tool` (the default), `resource` or `prompt` (upstream MCP resources and
    /// prompts, read with `tools.resources.read({path})` / `tools.prompts.get({path, args})`).
    #[serde(default)]
    pub kind: Option<String>,
}

impl SearchArgs {
    /// The kind of entry searched for; a kind that is not known is refused.
    pub fn kind(&self) -> Result<toolshed_core::EntryKind, EngineError> {
        match self.kind.as_deref() {
            None => Ok(toolshed_core::EntryKind::Tool),
            Some(k) => {
                toolshed_core::EntryKind::parse(k).ok_or_else(|| EngineError::InvalidArguments {
                    path: "search_tools".into(),
                    violations: vec![toolshed_core::Violation {
                        pointer: "/kind".into(),
                        rule: "enum".into(),
                        message: format!(
                            "kind '{}' is not known: use tool, resource or prompt",
                            k.chars().take(40).collect::<String>()
                        ),
                    }],
                })
            }
        }
    }

    /// The number of hits asked for, clamped to 1..=[`MAX_SEARCH_LIMIT`].
    pub fn limit(&self) -> usize {
        self.limit.unwrap_or(10).clamp(1, MAX_SEARCH_LIMIT as u64) as usize
    }
}

/// `read_tool`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DescribeArgs {
    /// Tool path from search_tools, e.g. github.issues.create.
    pub path: String,
    /// Also return the raw JSON Schemas.
    #[serde(default)]
    pub schemas: bool,
}

/// `run_script`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunScriptArgs {
    /// JavaScript body; use return to give a result.
    pub script: String,
    /// Tools you execute yourself, callable as tools.client.<name>(args): MCP (`name`,
    /// `description`, `inputSchema`), OpenAI (`{type: "function", function: {...}}`),
    /// Anthropic (`input_schema`) or custom (`type: "custom"`, `parameters`) declarations.
    #[serde(default)]
    pub client_tools: Vec<Value>,
}

/// `resume`: one of three answers.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResumeArgs {
    /// The paused execution.
    #[serde(default)]
    pub execution_id: String,
    /// `approve` or `deny` an approval wait.
    #[serde(default)]
    #[schemars(extend("enum" = ["approve", "deny"]))]
    pub decision: Option<String>,
    /// The wait answered (approval or input); optional when only one approval waits.
    #[serde(default)]
    pub wait_id: Option<String>,
    /// Client tool results, by callId.
    #[serde(default)]
    pub results: Option<Vec<ToolResultAnswer>>,
    /// The answer to a question: accept (with content), decline or cancel.
    #[serde(default)]
    pub action: Option<AnswerAction>,
    /// The content of an accepted answer, valid against the question's schema.
    #[serde(default)]
    pub content: Option<Value>,
}

/// `list_waits`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListWaitsArgs {
    /// Only executions waiting on this kind: approval, tool_result or input.
    #[serde(default)]
    pub wait: Option<WaitKind>,
    /// Only executions of this kind: script, call or run.
    #[serde(default)]
    pub kind: Option<ExecutionKind>,
}

/// What an execution runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ExecutionKind {
    Script,
    Call,
    Run,
}

impl ExecutionKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Script => "script",
            Self::Call => "call",
            Self::Run => "run",
        }
    }
}

/// `cancel`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CancelArgs {
    pub execution_id: String,
}

/// What an operation answered.
#[derive(Debug, Clone)]
pub enum OpAnswer {
    Search(SearchAnswer),
    Describe(Description),
    Outcome(Outcome),
    Waiting(Vec<PendingSummary>),
}

/// Reads an operation's arguments, naming the operation and what was wrong.
pub fn parse_args<T: serde::de::DeserializeOwned>(op: Op, args: Value) -> Result<T, EngineError> {
    let args = if args.is_null() {
        Value::Object(Default::default())
    } else {
        args
    };
    serde_json::from_value(args).map_err(|e| EngineError::MalformedArguments {
        path: op.name().to_string(),
        reason: e.to_string(),
    })
}

impl Engine {
    /// Runs one operation for `caller`; `channel` is how a decision in it arrives.
    pub async fn dispatch(
        &self,
        caller: &Caller,
        op: Op,
        args: Value,
        channel: DecisionChannel,
    ) -> Result<OpAnswer, EngineError> {
        self.dispatch_as(caller, op, args, channel, None).await
    }

    /// [`Self::dispatch`]; a `run_script` runs under `execution_id` when given (chosen ahead
    /// so the face can follow its events from the first).
    pub async fn dispatch_as(
        &self,
        caller: &Caller,
        op: Op,
        args: Value,
        channel: DecisionChannel,
        execution_id: Option<String>,
    ) -> Result<OpAnswer, EngineError> {
        match op {
            Op::SearchTools => {
                let a: SearchArgs = parse_args(op, args)?;
                Ok(OpAnswer::Search(self.search_kind(
                    caller,
                    &a.query,
                    a.limit(),
                    a.namespace.as_deref(),
                    a.kind()?,
                )))
            }
            Op::ReadTool => {
                let a: DescribeArgs = parse_args(op, args)?;
                Ok(OpAnswer::Describe(
                    self.describe(caller, &a.path, a.schemas)?,
                ))
            }
            Op::RunScript => {
                let a: RunScriptArgs = parse_args(op, args)?;
                Ok(OpAnswer::Outcome(
                    self.run_script_args_as(caller, a, execution_id).await?,
                ))
            }
            Op::Resume => {
                let a: ResumeArgs = parse_args(op, args)?;
                Ok(OpAnswer::Outcome(
                    self.resume_args(caller, a, channel).await?,
                ))
            }
            Op::ListWaits => {
                let a: ListWaitsArgs = parse_args(op, args)?;
                Ok(OpAnswer::Waiting(
                    self.waiting_of(caller, a.wait, a.kind.map(ExecutionKind::as_str))
                        .await?,
                ))
            }
            Op::Cancel => {
                let a: CancelArgs = parse_args(op, args)?;
                Ok(OpAnswer::Outcome(
                    self.cancel(caller, &a.execution_id).await?,
                ))
            }
        }
    }

    /// `run_script`: reads the client tool declarations (refusing bad ones by index before
    /// anything runs), then runs the script.
    pub async fn run_script_args(
        &self,
        caller: &Caller,
        a: RunScriptArgs,
    ) -> Result<Outcome, EngineError> {
        self.run_script_args_as(caller, a, None).await
    }

    /// [`Self::run_script_args`] under an execution id chosen ahead (a client following the
    /// events from the first one: [`crate::events::EventHub::open_streaming`]).
    pub async fn run_script_args_as(
        &self,
        caller: &Caller,
        a: RunScriptArgs,
        execution_id: Option<String>,
    ) -> Result<Outcome, EngineError> {
        let client_tools = read_client_tools(&a.client_tools)?;
        let options = ScriptOptions {
            client_tools,
            execution_id,
        };
        self.run_script_with(caller, &a.script, options).await
    }

    /// Checks a `run_script` request's client tool declarations without running anything.
    pub fn check_script_args(&self, a: &RunScriptArgs) -> Result<(), EngineError> {
        read_client_tools(&a.client_tools).map(|_| ())
    }

    /// `resume`: a decision, client tool results, or the answer to a question.
    pub async fn resume_args(
        &self,
        caller: &Caller,
        a: ResumeArgs,
        channel: DecisionChannel,
    ) -> Result<Outcome, EngineError> {
        let id = a.execution_id.as_str();
        if id.is_empty() {
            return Err(EngineError::MalformedArguments {
                path: Op::Resume.name().into(),
                reason: "executionId is required".into(),
            });
        }
        match (a.decision, a.results, a.action) {
            (Some(d), None, None) => {
                self.decide(caller, id, a.wait_id.as_deref(), d.parse()?, channel)
                    .await
            }
            (None, Some(results), None) => self.tool_results(caller, id, results, channel).await,
            (None, None, Some(action)) => {
                let wait_id = a.wait_id.ok_or_else(|| EngineError::MalformedArguments {
                    path: Op::Resume.name().into(),
                    reason: "answering a question needs its waitId".into(),
                })?;
                self.answer(caller, id, &wait_id, action, a.content, channel)
                    .await
            }
            _ => Err(EngineError::MalformedArguments {
                path: Op::Resume.name().into(),
                reason: "give exactly one of: decision (approve or deny), results ([{callId, result}]), or action (accept, decline, cancel) with waitId".into(),
            }),
        }
    }
}

/// Reads client tool declarations (at most [`MAX_CLIENT_TOOLS`]); errors name the declaration.
fn read_client_tools(
    declared: &[Value],
) -> Result<Vec<toolshed_core::formats::ClientTool>, EngineError> {
    if declared.len() > MAX_CLIENT_TOOLS {
        return Err(EngineError::InvalidClientTools(
            toolshed_core::formats::ClientToolsError {
                index: MAX_CLIENT_TOOLS,
                reason: format!(
                    "{} declarations; at most {MAX_CLIENT_TOOLS} client tools per execution",
                    declared.len()
                ),
            },
        ));
    }
    Ok(toolshed_core::formats::parse_client_tools(declared)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_operation_has_a_unique_name_and_an_object_schema() {
        let mut names = std::collections::HashSet::new();
        for op in Op::ALL {
            assert!(names.insert(op.name()));
            assert_eq!(Op::from_name(op.name()), Some(op));
            let s = op.schema();
            assert_eq!(s["type"], "object", "{}", op.name());
            assert!(!op.description().is_empty());
        }
        assert!(Op::schema(Op::Resume)["properties"]["results"].is_object());
    }

    #[test]
    fn limits_are_clamped_in_one_place() {
        let a: SearchArgs = parse_args(
            Op::SearchTools,
            serde_json::json!({"query": "x", "limit": 500}),
        )
        .unwrap();
        assert_eq!(a.limit(), MAX_SEARCH_LIMIT);
        let a: SearchArgs = parse_args(
            Op::SearchTools,
            serde_json::json!({"query": "x", "limit": 0}),
        )
        .unwrap();
        assert_eq!(a.limit(), 1);
        let e =
            parse_args::<SearchArgs>(Op::SearchTools, serde_json::json!({"q": "x"})).unwrap_err();
        assert!(e.to_string().contains("search_tools"), "{e}");
    }
}
