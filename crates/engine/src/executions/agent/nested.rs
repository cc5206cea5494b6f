//! Sub-agents: an agent run by a call inside an execution (`agents.run` from a script, an
//! `agent` tool of a run, or a saved script), run *inside* that execution.
//!
//! The sub-agent's loop is the run loop ([`super::step`]) on the calling execution's host, its
//! keys nested under the key of the call that started it (as a saved script's calls are). So:
//!
//! - its spec (definition, tools, memory) is fixed at its start and journaled at its local key
//!   0; a replay runs the same sub-agent whatever the definition became since;
//! - its model answers and tool calls are journaled in the calling execution: a replay never
//!   asks the model again for a journaled step nor runs a completed call again;
//! - a wait inside it (an approval, `ask_user`, a `requireApproval` tool) pauses the calling
//!   execution; answering it continues both.
//!
//! Its tools are the definition's, in the principal's view, as for a run; `client` tools and
//! the orchestration tools are not offered to sub-agents (the client talks to the calling
//! execution, not to them).

use std::sync::Arc;

use serde_json::{json, Value};
use toolshed_core::ToolError;
use toolshed_sandbox::HostReply;

use super::step::Frame;
use super::{memory, prepare, RunRequest, RunSpec, AGENTS_GET};
use crate::caller::Nest;
use crate::executions::host::nested_key;
use crate::executions::run::End;
use crate::invoke::{Approval, CallResult};
use crate::{Caller, Engine, EngineError};

/// The journal's name for a sub-agent's spec.
const SPEC_TARGET: &str = "agent";

impl Engine {
    /// Runs agent `name` for `caller` inside the execution of `nest` and answers its result. A
    /// sub-agent that waits answers an error, with its waits registered in the execution (the
    /// calling call then suspends it).
    pub(crate) async fn run_sub_agent(
        &self,
        nest: &Nest,
        caller: &Caller,
        name: &str,
        input: String,
        thread_id: Option<String>,
    ) -> Result<Value, ToolError> {
        let key = nested_key(nest.parent, 0).ok_or_else(|| {
            ToolError::invalid("agents and saved scripts nest too deep in this execution")
        })?;
        let spec = match nest.host.replayed(key, SPEC_TARGET) {
            Some(HostReply::Ok(v)) => serde_json::from_value::<RunSpec>(v).map_err(|e| {
                ToolError::internal(format!("the journaled sub-agent cannot be read: {e}"))
            })?,
            Some(HostReply::Err(e)) => return Err(ToolError::invalid(e.message)),
            Some(HostReply::Suspend) => {
                return Err(ToolError::internal("the sub-agent is suspended"))
            }
            None => {
                let spec = self
                    .sub_agent_spec(caller, name, input, thread_id)
                    .await
                    .map_err(crate::access::tool_error)?;
                let value = serde_json::to_value(&spec).unwrap_or(Value::Null);
                nest.host.record(key, SPEC_TARGET, Ok(value));
                spec
            }
        };
        // A journaled sub-agent's runtime endpoint may be new to this process.
        self.ensure_model(&spec.credential)
            .await
            .map_err(crate::access::tool_error)?;
        let spec = Arc::new(spec);
        let frame = Frame {
            ctx: nest.host.clone(),
            caller: caller.clone(),
            parent: Some(nest.parent),
        };
        match super::step::run_loop(&frame, &spec).await {
            End::Completed(result) => {
                let output = result["output"].as_str().unwrap_or_default();
                // The call's own key within the execution names the writer: a replay of this
                // call after a crash adds nothing to the thread, another call adds its own.
                let writer = format!("{}#{key}", nest.host.execution_id);
                self.memorize(&spec, &caller.principal, &writer, output)
                    .await;
                Ok(result)
            }
            End::Failed(error) => {
                let message = error["message"].as_str().unwrap_or("the sub-agent failed");
                Err(
                    ToolError::upstream(format!("agent '{}' failed: {message}", spec.agent))
                        .with_data(error),
                )
            }
            End::Suspended => Err(ToolError::conflict(format!(
                "agent '{}' waits for an answer",
                spec.agent
            ))),
        }
    }

    /// The spec of a sub-agent: the live definition read through the engine as the caller,
    /// its tools in the caller's view (no client tools), its thread's memory.
    async fn sub_agent_spec(
        &self,
        caller: &Caller,
        name: &str,
        input: String,
        thread_id: Option<String>,
    ) -> Result<RunSpec, EngineError> {
        let mut reader = caller.clone();
        reader.nest = None;
        let got = match self
            .invoke(
                &reader,
                AGENTS_GET,
                json!({ "name": name }),
                Approval::Required,
                None,
            )
            .await
        {
            CallResult::Done(v) => v,
            CallResult::Failed(EngineError::Tool { error, .. })
                if error.kind == toolshed_core::ToolErrorKind::NotFound =>
            {
                return Err(EngineError::UnknownAgent {
                    name: crate::audit::truncated(name, 128),
                })
            }
            CallResult::Failed(e) => return Err(e),
            _ => {
                return Err(EngineError::InvalidRun(format!(
                    "reading agent '{name}' did not complete"
                )))
            }
        };
        let (definition, version) = super::live_definition(name, &got)?;
        let req = RunRequest {
            definition: definition.clone(),
            version,
            input,
            thread_id,
            ..RunRequest::default()
        };
        let (mut spec, _) = prepare::spec(self, caller, &req)?;
        spec.tools.retain(|t| {
            !t.path.starts_with("client.")
                && !super::orchestration::is_orchestration(&t.path)
                && !super::background::is_background_tool(&t.path)
        });
        if let Some(thread) = &req.thread_id {
            memory::check_thread_id(thread)?;
            self.apply_memory(caller, &req.definition, thread, &mut spec)
                .await?;
        }
        Ok(spec)
    }
}
