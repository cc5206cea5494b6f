//! The engine as handlers see it ([`toolshed_core::EngineAccess`] on the tool context): the
//! caller's view of the catalog, calls through the one call path as the same caller, tied to
//! the same execution, and saved code run in the sandbox as that caller ([`NestedHost`]). Tools
//! that compose other tools use it instead of importing the engine.
//!
//! Saved code (a custom tool) runs nested at most [`MAX_DEPTH`] deep. A nested run takes no
//! sandbox slot of its own (its caller holds one; waiting for another could deadlock) and
//! cannot pause: a call that would need approval fails with a clear error.

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::Value;
use toolshed_core::{EngineAccess, NestedRun, ToolError, ToolErrorKind};
use toolshed_sandbox::{CallTarget, Determinism, Host, HostCall, HostError, HostReply, Status};

use crate::caller::Nest;
use crate::executions::host::nested_key;
use crate::invoke::{Approval, CallResult};
use crate::{Caller, Engine, EngineError, Face};

/// How many saved scripts deep calls may nest.
pub const MAX_DEPTH: u8 = 3;

/// The engine, bound to one caller and execution.
pub(crate) struct BoundEngine {
    pub engine: Engine,
    pub caller: Caller,
    pub execution_id: Option<Arc<str>>,
    /// The tool whose handler holds this (a stored question names it).
    pub path: String,
}

/// An engine error as the tool error a composing handler sees.
pub(crate) fn tool_error(e: EngineError) -> ToolError {
    let kind = match &e {
        EngineError::Tool { error, .. } => error.kind,
        EngineError::NotFound { .. } => ToolErrorKind::NotFound,
        EngineError::Timeout { .. } | EngineError::QuestionUnanswered { .. } => {
            ToolErrorKind::Timeout
        }
        e if e.is_client_error() => ToolErrorKind::InvalidInput,
        _ => ToolErrorKind::Internal,
    };
    let mut t = ToolError::new(kind, e.to_string());
    t.data = e.data();
    t
}

#[async_trait::async_trait]
impl EngineAccess for BoundEngine {
    fn visible_paths(&self) -> Vec<String> {
        self.engine
            .list_tools(&self.caller)
            .into_iter()
            .map(|d| d.path.to_string())
            .collect()
    }

    fn entry(&self, path: &str) -> Option<toolshed_core::ToolDef> {
        self.engine
            .resolve(&self.caller, path)
            .ok()
            .map(|e| e.tool.def.clone())
    }

    async fn ask(
        &self,
        message: &str,
        schema: Option<Value>,
        timeout: std::time::Duration,
    ) -> Result<Value, ToolError> {
        let answer = self
            .engine
            .ask_question(&self.caller, &self.path, message, schema, timeout)
            .await
            .map_err(tool_error)?;
        let mut v = serde_json::json!({"action": answer.action});
        if let Some(c) = answer.content {
            v["content"] = c;
        }
        Ok(v)
    }

    async fn call(&self, path: &str, args: Value) -> Result<Value, ToolError> {
        // A call a handler makes is not journaled in the execution.
        let mut caller = self.caller.clone();
        caller.nest = None;
        match self
            .engine
            .invoke(
                &caller,
                path,
                args,
                Approval::Required,
                self.execution_id.clone(),
            )
            .await
        {
            CallResult::Done(v) => Ok(v),
            CallResult::Failed(e) => Err(tool_error(e)),
            CallResult::NeedsApproval { path, .. } => Err(ToolError::conflict(format!(
                "'{path}' needs approval, which a call made by another tool cannot wait for"
            ))),
            CallResult::NeedsAction { action, path, .. } => {
                let execution = self.execution_id.as_deref().unwrap_or("");
                Err(tool_error(
                    self.engine
                        .action_error(&caller.principal, &action, &path, execution)
                        .await,
                ))
            }
        }
    }

    async fn run_script(
        &self,
        code: &str,
        input: Value,
        how: NestedRun,
    ) -> Result<Value, ToolError> {
        if self.caller.depth >= MAX_DEPTH {
            return Err(ToolError::invalid(format!(
                "saved scripts may call each other at most {MAX_DEPTH} deep"
            )));
        }
        // `input` is declared on the code's first line, so line numbers stay the user's.
        let prefix = if how.compile_only {
            "const input = null; return; ".to_string()
        } else {
            format!("const input = {input}; ")
        };
        let source = format!("{prefix}{code}");
        let mut caller = self.caller.clone();
        caller.depth += 1;
        caller.face = Face::Script;
        // Inside a script execution (and not a trial), the saved script's calls are journaled
        // in it: a wait they raise pauses the execution, and a replay answers them again.
        let nest = caller
            .nest
            .take()
            .filter(|_| !how.trial && !how.compile_only);
        let det = match &nest {
            Some(n) => Determinism {
                seed: n.host.det.seed ^ n.parent.wrapping_mul(0x9e37_79b9_7f4a_7c15),
                now_ms: n.host.det.now_ms,
            },
            None => Determinism {
                seed: rand::random::<u64>(),
                now_ms: toolshed_store::now_ms() as f64,
            },
        };
        let host = NestedHost {
            engine: self.engine.clone(),
            caller,
            execution_id: self.execution_id.clone(),
            how,
            nest,
        };
        let sandbox = &self.engine.inner.sandbox;
        let outcome = sandbox
            .run(
                sandbox.admit_nested(),
                &source,
                Arc::new(host),
                &self.engine.script_limits(),
                det,
            )
            .await;
        match outcome.status {
            Status::Completed(v) => Ok(v),
            Status::Failed(mut e) => {
                if e.line == Some(1) {
                    e.column = e
                        .column
                        .map(|c| c.saturating_sub(prefix.chars().count() as u32));
                }
                let data = serde_json::to_value(&e).unwrap_or(Value::Null);
                Err(ToolError::new(ToolErrorKind::InvalidInput, e.to_string()).with_data(data))
            }
            Status::Suspended { .. } => Err(ToolError::internal(
                "a saved script cannot pause: a call inside it needed an answer",
            )),
        }
    }

    async fn run_agent(
        &self,
        agent: &str,
        input: String,
        thread_id: Option<String>,
    ) -> Result<Value, ToolError> {
        if self.caller.depth >= MAX_DEPTH {
            return Err(ToolError::invalid(format!(
                "agents and saved scripts may run each other at most {MAX_DEPTH} deep"
            )));
        }
        let mut caller = self.caller.clone();
        caller.depth += 1;
        // Inside an execution the agent runs in it (its waits pause it); else as a run of its
        // own, whose pause is reported.
        if let Some(nest) = caller.nest.take() {
            return self
                .engine
                .run_sub_agent(&nest, &caller, agent, input, thread_id)
                .await;
        }
        match self
            .engine
            .run_agent(&caller, agent, input, &[], thread_id, None)
            .await
        {
            Ok(crate::Outcome::Completed { result, .. }) => Ok(result),
            Ok(crate::Outcome::Failed { error, .. }) => Err(ToolError::upstream(format!(
                "agent '{agent}' failed: {}",
                error["message"].as_str().unwrap_or("error")
            ))
            .with_data(error)),
            Ok(other) => Err(ToolError::conflict(format!(
                "agent '{agent}' waits in execution {}: answer it there",
                other.execution_id()
            ))
            .with_data(other.to_json())),
            Err(e) => Err(tool_error(e)),
        }
    }
}

/// The host of a nested run: each tool call through the engine as the bound caller, with the
/// run's restrictions; journaled in the calling execution when there is one (`nest`).
struct NestedHost {
    engine: Engine,
    caller: Caller,
    execution_id: Option<Arc<str>>,
    how: NestedRun,
    nest: Option<Nest>,
}

impl NestedHost {
    /// The restrictions of the run, checked before a call is answered.
    fn refusal(&self, call: &HostCall) -> Option<EngineError> {
        let CallTarget::Tool(path) = &call.target else {
            return None;
        };
        if !self.how.read_only {
            return None;
        }
        match self.engine.resolve(&self.caller, path) {
            Err(e) => Some(e),
            Ok(entry) if !entry.tool.def.annotations.read_only => Some(EngineError::InvalidArguments {
                path: path.clone(),
                violations: vec![toolshed_core::Violation {
                    pointer: String::new(),
                    rule: "readOnly".into(),
                    message: format!("'{path}' is not read-only, and this tool is declared readOnly: it may call read-only tools only"),
                }],
            }),
            Ok(_) => None,
        }
    }

    async fn answer(&self, call: HostCall) -> Result<Value, EngineError> {
        match &call.target {
            CallTarget::Search => {
                let a = crate::ops::SearchArgs {
                    query: call.args["query"].as_str().unwrap_or_default().to_string(),
                    limit: call.args["limit"].as_u64(),
                    namespace: call.args["namespace"].as_str().map(str::to_string),
                    format: None,
                    kind: call.args["kind"].as_str().map(str::to_string),
                };
                let kind = a.kind()?;
                let found = self.engine.search_kind(
                    &self.caller,
                    &a.query,
                    a.limit(),
                    a.namespace.as_deref(),
                    kind,
                );
                Ok(serde_json::to_value(found).unwrap_or_default())
            }
            CallTarget::Describe => {
                let path = call.args["path"].as_str().unwrap_or_default();
                let schemas = call.args["schemas"].as_bool().unwrap_or(false);
                let d = self.engine.describe(&self.caller, path, schemas)?;
                Ok(serde_json::to_value(d).unwrap_or_default())
            }
            CallTarget::Ask => Err(EngineError::InvalidArguments {
                path: "ask_user".into(),
                violations: vec![toolshed_core::Violation {
                    pointer: String::new(),
                    rule: "context".into(),
                    message: "tools.ask_user is not available inside a saved script".into(),
                }],
            }),
            CallTarget::Tool(path) => {
                match self
                    .engine
                    .invoke(&self.caller, path, call.args.clone(), Approval::Required, self.execution_id.clone())
                    .await
                {
                    CallResult::Done(v) => Ok(v),
                    CallResult::Failed(e) => Err(e),
                    CallResult::NeedsApproval { path, .. } if self.how.trial => {
                        Err(EngineError::Denied { path })
                    }
                    CallResult::NeedsApproval { path, .. } => Err(EngineError::Tool {
                        error: Box::new(ToolError::conflict(format!(
                            "'{path}' needs approval, which a call inside a saved script cannot wait for"
                        ))),
                        path,
                    }),
                    CallResult::NeedsAction { action, path, .. } => {
                        let execution = self.execution_id.as_deref().unwrap_or("");
                        Err(self
                            .engine
                            .action_error(&self.caller.principal, &action, &path, execution)
                            .await)
                    }
                }
            }
        }
    }
}

impl Host for NestedHost {
    fn call(&self, call: HostCall) -> BoxFuture<'static, HostReply> {
        let this = NestedHost {
            engine: self.engine.clone(),
            caller: self.caller.clone(),
            execution_id: self.execution_id.clone(),
            how: self.how,
            nest: self.nest.clone(),
        };
        Box::pin(async move {
            if let Some(e) = this.refusal(&call) {
                return HostReply::Err(HostError {
                    code: e.code().to_string(),
                    message: e.to_string(),
                    data: e.data(),
                });
            }
            if let Some(n) = &this.nest {
                let Some(key) = nested_key(n.parent, call.seq) else {
                    return HostReply::Err(HostError::new(
                        "too_deep",
                        "calls nest too deep in this execution to be journaled",
                    ));
                };
                return n.host.answer_at(key, &this.caller, call).await;
            }
            match this.answer(call).await {
                Ok(v) => HostReply::Ok(v),
                Err(e) => HostReply::Err(HostError {
                    code: e.code().to_string(),
                    message: e.to_string(),
                    data: e.data(),
                }),
            }
        })
    }
}
