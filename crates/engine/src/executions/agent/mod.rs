//! Agent runs: a JSON-defined agent thinks with a model and acts through the catalog, as an
//! execution of kind `run` that pauses, resumes, streams and is cancelled like a script.
//!
//! A run is driven by a loop in Rust ([`step`]) rather than by a script, but it answers its
//! calls with the same host as scripts ([`super::host`]), numbered in issue order, so every
//! mechanism of executions applies unchanged:
//!
//! - **One call path.** Each tool call the model makes goes through the engine as the run's
//!   principal: validation, call rules, approval gate, audit. Only the tools offered to the
//!   model ([`prepare`]: the agent's `tools` that the principal's roles can see) may run; a
//!   call of any other tool is answered to the model as an error, audited, and never runs.
//! - **Pauses.** A call that needs approval (a `confirm` rule, a destructive tool, or the
//!   definition's `requireApproval`), a client tool (`tool_result`) and `ask_user` (`input`)
//!   become waits; the run stops once its other calls of that step have finished.
//! - **Checkpoints.** A run is stored from its first step, and every completed tool call is
//!   written to its journal (with the model answer that asked for it) before its result goes
//!   on, so a step costs one write. Resuming (after an answer, or after a crash once the run
//!   counts as interrupted) replays the journal: journaled model answers are not asked again,
//!   completed tool calls never run again, and the loop continues where it stopped. A model
//!   request that was in flight when the process died, or whose answer had not reached the
//!   store yet (no tool call of its step had completed), is sent again.
//! - **Events.** `started`, `text_delta` (as the model streams), `tool_call`, `tool_result`,
//!   `usage` (per step), `paused`, `resumed`, `completed`, `failed`, `cancelled`.
//!
//! The run keeps the definition version it started with (the spec is stored with it).

pub mod background;
pub mod memory;
mod nested;
pub mod orchestration;
pub mod prepare;
pub mod step;

use std::collections::HashSet;
use std::sync::Arc;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use toolshed_core::formats::ClientTool;
use toolshed_models::Message;
use toolshed_store::{now_ms, ExecutionRecord};

use super::host::{ClientTools, Durable, HostCtx};
use super::Outcome;
use crate::events::Event;
use crate::rate::RateKind;
use crate::{Caller, Engine, EngineError};

/// What starts a run.
#[derive(Debug, Clone, Default)]
pub struct RunRequest {
    /// The agent definition (its live version), as the `agents` plugin stores it.
    pub definition: Value,
    /// The definition's version.
    pub version: i64,
    /// The user's message.
    pub input: String,
    /// Tools the client executes itself, besides the definition's `client` tools.
    pub client_tools: Vec<ClientTool>,
    /// The execution id, chosen ahead so a client can follow the events from the first one.
    pub execution_id: Option<String>,
    /// The thread whose memory the run reads and extends (needs `memory.enabled`).
    pub thread_id: Option<String>,
}

/// Limits of one run, from the definition's `config` (defaults when absent).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RunLimits {
    pub max_steps: u32,
    pub max_tool_calls: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    pub tool_call_concurrency: usize,
}

impl Default for RunLimits {
    fn default() -> Self {
        Self {
            max_steps: 20,
            max_tool_calls: 100,
            max_tokens: None,
            tool_call_concurrency: 4,
        }
    }
}

/// A tool offered to the model: its name in the provider's format and what it stands for.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Offered {
    pub name: String,
    /// A catalog path, `client.<name>`, or [`ASK_USER`].
    pub path: String,
    pub description: String,
    pub parameters: Value,
    /// Every call waits for a human's approval (`requireApproval`).
    #[serde(default)]
    pub approval: bool,
    /// For a definition's `workflow` tool: the n8n workflow it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<String>,
}

/// The tool that reads agent definitions.
pub const AGENTS_GET: &str = "agents.get";

/// The offered name and path of the question tool.
pub const ASK_USER: &str = "ask_user";

/// The catalog tool that runs an agent; `agent` tools of a definition call it.
pub const AGENTS_RUN: &str = "agents.run";

/// The offered path of a definition's `agent` tool: `agent.<name>` (a call of [`AGENTS_RUN`]).
pub const AGENT_PREFIX: &str = "agent.";

/// The catalog tool that runs an n8n workflow; `workflow` tools of a definition call it.
pub const WORKFLOWS_RUN: &str = "n8n.workflows.run";

/// The offered path of a definition's `workflow` tool: `workflow.<name>` (a call of
/// [`WORKFLOWS_RUN`]).
pub const WORKFLOW_PREFIX: &str = "workflow.";

impl Offered {
    /// The path the call reaches: the catalog tool, [`AGENTS_RUN`] for an `agent` tool,
    /// [`WORKFLOWS_RUN`] for a `workflow` tool.
    pub fn call_path(&self) -> &str {
        if self.path.starts_with(AGENT_PREFIX) {
            AGENTS_RUN
        } else if self.workflow.is_some() {
            WORKFLOWS_RUN
        } else {
            &self.path
        }
    }
}

/// Everything a run needs, fixed when it starts and stored as the execution's source.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunSpec {
    pub agent: String,
    pub version: i64,
    /// `provider/model` as the definition names it.
    pub model: String,
    pub credential: String,
    pub instructions: String,
    pub tools: Vec<Offered>,
    pub limits: RunLimits,
    pub input: String,
    /// Earlier messages of the thread, before `input`.
    #[serde(default)]
    pub history: Vec<Message>,
    /// The thread the run's input and answer are added to when it completes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread: Option<String>,
    /// What the run remembered (thread, messages, recall), reported in its result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Value>,
    /// The plan task this run carries out, for a background task's sub-agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<background::TaskRef>,
}

impl RunSpec {
    /// The model's name without the provider prefix (`ollama/qwen3:8b` → `qwen3:8b`).
    pub fn model_name(&self) -> &str {
        self.model
            .split_once('/')
            .map_or(self.model.as_str(), |(_, m)| m)
    }
}

impl Engine {
    /// Runs the live (published) version of agent `name` for the caller. The definition is
    /// read with the `agents.get` tool through the engine's call path, so a caller that may
    /// not read agent definitions may not run them either.
    pub async fn run_agent(
        &self,
        caller: &Caller,
        name: &str,
        input: String,
        client_tools: &[Value],
        thread_id: Option<String>,
        execution_id: Option<String>,
    ) -> Result<Outcome, EngineError> {
        if let Some(t) = &thread_id {
            memory::check_thread_id(t)?;
        }
        let client_tools = toolshed_core::formats::parse_client_tools(client_tools)?;
        let got = match self.call(caller, AGENTS_GET, json!({ "name": name })).await {
            Ok(Outcome::Completed { result, .. }) => result,
            Ok(_) => {
                return Err(EngineError::InvalidRun(format!(
                    "reading agent '{name}' did not complete"
                )))
            }
            Err(EngineError::Tool { error, .. })
                if error.kind == toolshed_core::ToolErrorKind::NotFound =>
            {
                return Err(EngineError::UnknownAgent {
                    name: crate::audit::truncated(name, 128),
                })
            }
            Err(e) => return Err(e),
        };
        let (definition, version) = live_definition(name, &got)?;
        self.start_run(
            caller,
            RunRequest {
                definition: definition.clone(),
                version,
                input,
                client_tools,
                execution_id,
                thread_id,
            },
        )
        .await
    }

    /// Starts a run of an agent for the caller and drives it until it completes, fails or
    /// pauses. The definition's tools are resolved in the caller's view now; the run keeps
    /// them (and the definition's version) to its end.
    pub async fn start_run(
        &self,
        caller: &Caller,
        req: RunRequest,
    ) -> Result<Outcome, EngineError> {
        self.inner
            .rates
            .check(&caller.principal, RateKind::Scripts)?;
        let (mut spec, client_tools) = prepare::spec(self, caller, &req)?;
        if let Some(thread) = &req.thread_id {
            memory::check_thread_id(thread)?;
            self.apply_memory(caller, &req.definition, thread, &mut spec)
                .await?;
        }
        self.ensure_model(&spec.credential).await?;
        let now = now_ms();
        let mut meta = json!({"agent": spec.agent, "version": spec.version});
        if !client_tools.is_empty() {
            meta["clientTools"] = serde_json::to_value(&client_tools).unwrap_or(json!([]));
        }
        let mut rec = ExecutionRecord::new_running(
            req.execution_id.unwrap_or_else(super::new_execution_id),
            &caller.principal,
            "run",
            serde_json::to_string(&spec).unwrap_or_default(),
            meta,
            now,
        );
        // Stored from the start: every step is a checkpoint.
        rec.version = 1;
        self.inner.store.insert_execution(&rec).await?;
        self.drive_run(caller, rec, false).await
    }

    /// Gives a new run the memory of `thread`: its newest messages, recalled ones in the
    /// instructions, and the thread to extend when it completes.
    pub(crate) async fn apply_memory(
        &self,
        caller: &Caller,
        definition: &Value,
        thread: &str,
        spec: &mut RunSpec,
    ) -> Result<(), EngineError> {
        let Some(config) = memory::memory_config(definition) else {
            return Err(EngineError::InvalidRun(format!(
                "threadId: agent '{}' does not enable memory (set memory.enabled in its definition), so it keeps no threads",
                spec.agent
            )));
        };
        let remembered = self
            .remember(&caller.principal, &spec.agent, thread, &config, &spec.input)
            .await?;
        spec.history = remembered.history;
        if let Some(text) = remembered.recalled {
            spec.instructions = match spec.instructions.trim() {
                "" => text,
                i => format!("{i}\n\n{text}"),
            };
        }
        spec.memory = Some(remembered.report);
        spec.thread = Some(thread.to_string());
        Ok(())
    }

    /// Runs (or, `resumed`, continues) a stored run until it settles.
    pub(super) async fn drive_run(
        &self,
        caller: &Caller,
        rec: ExecutionRecord,
        resumed: bool,
    ) -> Result<Outcome, EngineError> {
        let spec: Arc<RunSpec> =
            Arc::new(serde_json::from_str(&rec.source).map_err(|e| {
                EngineError::InvalidRun(format!("the stored run cannot be read: {e}"))
            })?);
        // A runtime endpoint may be new to this process (a restart, another replica); one that
        // is gone fails the run (stored), rather than leaving it claimed and not driven.
        let unavailable = match resumed {
            true => self.ensure_model(&spec.credential).await.err(),
            false => None,
        };
        let state = Arc::new(Mutex::new(super::run::initial_state(&rec)));
        let durable = Arc::new(Durable {
            rec: Arc::new(tokio::sync::Mutex::new(rec.clone())),
            failed: Mutex::new(None),
        });
        let offered: HashSet<String> = spec
            .tools
            .iter()
            .filter(|t| {
                t.path != ASK_USER
                    && !orchestration::is_orchestration(&t.path)
                    && !background::is_background_tool(&t.path)
            })
            .map(|t| t.call_path().to_string())
            .collect();
        let approval: HashSet<String> = spec
            .tools
            .iter()
            .filter(|t| t.approval)
            .map(|t| t.call_path().to_string())
            .collect();
        let ctx = Arc::new(HostCtx {
            engine: self.clone(),
            caller: caller.clone(),
            execution_id: Arc::from(rec.id.as_str()),
            state: state.clone(),
            durable: Some(durable.clone()),
            clients: Arc::new(ClientTools::new(super::run::client_tools_of(&rec))),
            det: toolshed_sandbox::Determinism {
                seed: 0,
                now_ms: rec.now_ms as f64,
            },
            offered: Some(Arc::new(offered)),
            approval: Arc::new(approval),
        });
        self.inner.events.open(&rec.id, true).await?;
        self.inner.events.emit(
            &rec.id,
            match resumed {
                false => Event::Started { kind: "run".into() },
                true => Event::Resumed {},
            },
        );
        if let Some(e) = unavailable {
            let end = super::run::End::Failed(
                json!({"code": "model_unavailable", "message": e.to_string()}),
            );
            return self
                .settle_end(rec, true, end, Vec::new(), &state, Some(durable))
                .await;
        }
        let recall_note = spec.memory.as_ref().and_then(|m| m["recall"].as_str());
        if let (false, Some(note)) = (resumed, recall_note) {
            self.inner.events.emit(
                &rec.id,
                Event::Log {
                    level: "warn".into(),
                    message: format!("semanticRecall {note}"),
                },
            );
        }
        let cancel = self.inner.running.register(&rec.id, &rec.principal);
        let started = std::time::Instant::now();
        let frame = step::Frame {
            ctx: ctx.clone(),
            caller: caller.clone(),
            parent: None,
        };
        let ended = tokio::select! {
            e = step::run_loop(&frame, &spec) => Some(e),
            _ = cancel.notified() => None,
        };
        self.inner.running.remove(&rec.id);
        let Some(ended) = ended else {
            let id = rec.id.clone();
            let outcome = self
                .settle_cancelled(rec, true, &state, Some(durable))
                .await;
            self.cancel_plan(&id, &spec).await;
            if let (Some(task), Ok(o)) = (&spec.task, &outcome) {
                self.task_settled(task, o).await;
            }
            return outcome;
        };
        tracing::debug!(execution = %rec.id, elapsed_ms = started.elapsed().as_millis() as u64, "run segment ended");
        let (id, principal) = (rec.id.clone(), rec.principal.clone());
        let outcome = self
            .settle_end(rec, true, ended, Vec::new(), &state, Some(durable))
            .await?;
        if let Outcome::Completed { result, .. } = &outcome {
            let output = result["output"].as_str().unwrap_or_default();
            self.memorize(&spec, &principal, &id, output).await;
        }
        if let Some(task) = &spec.task {
            self.task_settled(task, &outcome).await;
        }
        if matches!(outcome, Outcome::Failed { .. } | Outcome::Cancelled { .. }) {
            self.cancel_plan(&id, &spec).await;
        }
        Ok(outcome)
    }
}

/// The live (published) definition and its version in an `agents.get` answer.
pub(crate) fn live_definition<'a>(
    name: &str,
    got: &'a Value,
) -> Result<(&'a Value, i64), EngineError> {
    let live = &got["live"];
    match (
        live.get("config").filter(|c| c.is_object()),
        live.get("version").and_then(Value::as_i64),
    ) {
        (Some(definition), Some(version)) => Ok((definition, version)),
        _ => Err(EngineError::InvalidRun(format!(
            "agent '{name}' has no published version: publish its draft first (agents.publish)"
        ))),
    }
}
