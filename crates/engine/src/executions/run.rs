//! Running a script execution: the first run, and every replay after answers arrived.
//!
//! [`Engine::run_record`] prepares the run's state from the stored record (journal to replay,
//! answers), runs the script in the sandbox under a cancel signal, and settles the record:
//! completed, failed, paused on the waits raised, or cancelled. A run that never pauses is never
//! written (the fast path); every other outcome is stored.

use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::{json, Value};
use toolshed_sandbox::{Determinism, Permit, RunOutcome, Status};
use toolshed_store::{now_ms, ExecutionRecord, ExecutionStatus};

use super::host::{ClientTools, Durable, HostCtx, JournalFailure, RunState, ScriptHost};
use super::waits::{answers_of, Wait};
use super::{Outcome, MAX_SCRIPT_ERROR_BYTES};
use crate::events::Event;
use crate::rate::RateKind;
use crate::{Caller, Engine, EngineError, Face};

/// What a new script execution starts with besides its text.
#[derive(Debug, Clone, Default)]
pub struct ScriptOptions {
    /// Tools the client executes itself, already read ([`toolshed_core::formats`]).
    pub client_tools: Vec<toolshed_core::formats::ClientTool>,
    /// The execution's id, chosen ahead so a client can follow its events from the first one
    /// ([`crate::events::EventHub::open_streaming`]); a fresh id when `None`.
    pub execution_id: Option<String>,
}

impl Engine {
    /// Runs a script for the caller. Calls that need approval, client tools and questions pause
    /// it. Waits for a sandbox slot first; `overloaded` when every slot is busy and the queue is
    /// full.
    pub async fn run_script(&self, caller: &Caller, source: &str) -> Result<Outcome, EngineError> {
        self.run_script_with(caller, source, ScriptOptions::default())
            .await
    }

    /// [`Engine::run_script`] with client tools.
    pub async fn run_script_with(
        &self,
        caller: &Caller,
        source: &str,
        options: ScriptOptions,
    ) -> Result<Outcome, EngineError> {
        self.inner
            .rates
            .check(&caller.principal, RateKind::Scripts)?;
        let permit = self.inner.sandbox.admit().await?;
        let now = now_ms();
        let mut meta = json!({ "runtime": toolshed_sandbox::runtime_version() });
        if !options.client_tools.is_empty() {
            meta["clientTools"] = serde_json::to_value(&options.client_tools).unwrap_or(json!([]));
        }
        let mut record = ExecutionRecord::new_running(
            options.execution_id.unwrap_or_else(super::new_execution_id),
            &caller.principal,
            "script",
            source.to_string(),
            meta,
            now,
        );
        record.seed = rand::random::<i64>();
        self.run_record(caller, record, false, permit).await
    }

    /// Runs (or re-runs) a script execution and stores the result when it must be durable.
    pub(super) async fn run_record(
        &self,
        caller: &Caller,
        rec: ExecutionRecord,
        stored: bool,
        permit: Permit,
    ) -> Result<Outcome, EngineError> {
        let state = Arc::new(Mutex::new(initial_state(&rec)));
        let durable = stored.then(|| {
            Arc::new(Durable {
                rec: Arc::new(tokio::sync::Mutex::new(rec.clone())),
                failed: Mutex::new(None),
            })
        });
        let mut script_caller = caller.clone();
        script_caller.face = Face::Script;
        let det = Determinism {
            seed: rec.seed as u64,
            now_ms: rec.now_ms as f64,
        };
        let host = ScriptHost(Arc::new(HostCtx {
            engine: self.clone(),
            caller: script_caller,
            execution_id: Arc::from(rec.id.as_str()),
            state: state.clone(),
            durable: durable.clone(),
            clients: Arc::new(ClientTools::new(client_tools_of(&rec))),
            det,
            offered: None,
            approval: Default::default(),
        }));
        self.inner.events.open(&rec.id, stored).await?;
        self.inner.events.emit(
            &rec.id,
            match stored {
                false => Event::Started {
                    kind: rec.kind.clone(),
                },
                true => Event::Resumed {},
            },
        );
        let cancel = self.inner.running.register(&rec.id, &rec.principal);
        let limits = self.script_limits();
        let run = self
            .inner
            .sandbox
            .run(permit, &rec.source, Arc::new(host), &limits, det);
        let outcome = tokio::select! {
            o = run => Some(o),
            _ = cancel.notified() => None,
        };
        self.inner.running.remove(&rec.id);
        let Some(outcome) = outcome else {
            return self.settle_cancelled(rec, stored, &state, durable).await;
        };
        self.settle(rec, stored, outcome, &state, durable).await
    }

    /// Stores the end of a script run: completed, failed or paused.
    async fn settle(
        &self,
        mut rec: ExecutionRecord,
        stored: bool,
        outcome: RunOutcome,
        state: &Mutex<RunState>,
        durable: Option<Arc<Durable>>,
    ) -> Result<Outcome, EngineError> {
        // A replay prints again what the segments before it printed: only new lines are events.
        let printed = rec.logs.as_array().map_or(0, Vec::len);
        for line in outcome.logs.iter().skip(printed) {
            self.inner.events.emit(
                &rec.id,
                Event::Log {
                    level: line.level.clone(),
                    message: line.message.clone(),
                },
            );
        }
        rec.logs = serde_json::to_value(&outcome.logs).unwrap_or(json!([]));
        let end = match outcome.status {
            Status::Completed(v) => End::Completed(v),
            Status::Failed(mut err) => {
                err.message = crate::audit::truncated(&err.message, MAX_SCRIPT_ERROR_BYTES);
                if let Some(stack) = &mut err.stack {
                    *stack = crate::audit::truncated(stack, MAX_SCRIPT_ERROR_BYTES);
                }
                End::Failed(serde_json::to_value(&err).unwrap_or(Value::Null))
            }
            Status::Suspended { .. } => End::Suspended,
        };
        self.settle_end(rec, stored, end, outcome.logs, state, durable)
            .await
    }

    /// Stores the end of a run (a script's or an agent's): completed, failed or paused on the
    /// waits raised.
    pub(super) async fn settle_end(
        &self,
        mut rec: ExecutionRecord,
        stored: bool,
        end: End,
        logs: Vec<toolshed_sandbox::LogEntry>,
        state: &Mutex<RunState>,
        durable: Option<Arc<Durable>>,
    ) -> Result<Outcome, EngineError> {
        let (journal, waits) = {
            let st = state.lock();
            (
                st.journal_json(),
                st.waits.values().cloned().collect::<Vec<Wait>>(),
            )
        };
        let mut failure = None;
        if let Some(d) = &durable {
            // Journal writes during the run moved the version on; this waits for a write still
            // in flight when the run ended.
            rec.version = d.rec.lock().await.version;
            failure = d.failed.lock().clone();
        }
        rec.journal = journal;
        let id = rec.id.clone();
        if let Some(f) = failure {
            return self.settle_journal_failure(rec, f, logs).await;
        }
        let result = match end {
            End::Completed(v) => {
                rec.status = ExecutionStatus::Completed;
                rec.pending = None;
                rec.result = Some(v.clone());
                Outcome::Completed {
                    execution_id: id,
                    result: v,
                    logs,
                }
            }
            End::Failed(error) => {
                rec.status = ExecutionStatus::Failed;
                rec.pending = None;
                rec.error = Some(error.clone());
                Outcome::Failed {
                    execution_id: id,
                    error,
                    logs,
                }
            }
            End::Suspended => {
                rec.status = ExecutionStatus::Paused;
                rec.pending = Some(serde_json::to_value(&waits).unwrap_or(json!([])));
                rec.expires_at = Some(now_ms() + self.inner.config.approval_ttl.as_millis() as i64);
                Outcome::paused(id, waits, logs)
            }
        };
        self.inner.events.emit(&rec.id, result.event());
        // Events first: a follower that sees the settled record finds the final event stored.
        self.inner
            .events
            .close(&rec.id, stored || result.is_paused())
            .await;
        if stored || result.is_paused() {
            self.save(rec.clone(), stored).await?;
        }
        if result.is_paused() {
            self.notify_paused(&rec);
        }
        Ok(result)
    }

    /// A resumed run whose journal could not be written: failed, unless another run (or a
    /// cancel) took the execution over, in which case nothing more is written.
    async fn settle_journal_failure(
        &self,
        mut rec: ExecutionRecord,
        f: JournalFailure,
        logs: Vec<toolshed_sandbox::LogEntry>,
    ) -> Result<Outcome, EngineError> {
        let id = rec.id.clone();
        let err = EngineError::JournalWrite {
            id: id.clone(),
            seq: f.seq,
            path: f.path,
            reason: f.reason,
        };
        if f.claim_lost {
            self.inner.events.close(&id, false).await;
            return Err(err);
        }
        let error = err.to_json();
        rec.status = ExecutionStatus::Failed;
        rec.pending = None;
        rec.error = Some(error.clone());
        self.inner.events.emit(
            &id,
            Event::Failed {
                error: error.clone(),
            },
        );
        self.inner.events.close(&id, true).await;
        if let Err(e) = self.save(rec, true).await {
            tracing::error!(execution = %id, error = %e, "cannot store the stopped run");
            return Err(err);
        }
        Ok(Outcome::Failed {
            execution_id: id,
            error,
            logs,
        })
    }

    /// A run stopped by `cancel`: what completed is kept in the journal, the execution is
    /// stored as cancelled.
    pub(super) async fn settle_cancelled(
        &self,
        mut rec: ExecutionRecord,
        stored: bool,
        state: &Mutex<RunState>,
        durable: Option<Arc<Durable>>,
    ) -> Result<Outcome, EngineError> {
        if let Some(d) = &durable {
            rec.version = d.rec.lock().await.version;
        }
        rec.journal = state.lock().durable_journal_json();
        rec.status = ExecutionStatus::Cancelled;
        rec.pending = None;
        let id = rec.id.clone();
        self.inner.events.emit(&id, Event::Cancelled {});
        self.inner.events.close(&id, stored).await;
        if let Err(e) = self.save(rec, stored).await {
            // The cancel request itself may have stored the cancellation first.
            tracing::debug!(execution = %id, error = %e, "cancelled run not stored again");
        }
        Ok(Outcome::Cancelled {
            execution_id: id,
            logs: vec![],
        })
    }

    /// Writes the journal so far to the stored execution (still claimed by this run). The
    /// write runs in its own task holding the record, so dropping the caller mid-write does
    /// not cancel it, and the version moves on only when the write went through. `Err` is
    /// `(reason, claim_lost)`.
    pub(super) async fn persist_journal(
        &self,
        durable: &Durable,
        state: &Mutex<RunState>,
    ) -> Result<(), (String, bool)> {
        let mut rec = durable.rec.clone().lock_owned().await;
        rec.journal = state.lock().durable_journal_json();
        rec.updated_at = now_ms();
        let store = self.inner.store.clone();
        tokio::spawn(async move {
            let expected = rec.version;
            rec.version = expected + 1;
            let written = store.update_execution(&rec, expected).await;
            if !matches!(written, Ok(true)) {
                rec.version = expected;
            }
            match written {
                Ok(true) => Ok(()),
                Ok(false) => Err((
                    "another run has claimed the execution, or it was cancelled".to_string(),
                    true,
                )),
                Err(e) => Err((e.to_string(), false)),
            }
        })
        .await
        .unwrap_or_else(|e| Err((format!("the journal write did not finish: {e}"), false)))
    }

    /// Inserts a new execution, or replaces a stored one if nobody changed it meanwhile.
    pub(super) async fn save(
        &self,
        mut rec: ExecutionRecord,
        stored: bool,
    ) -> Result<(), EngineError> {
        rec.updated_at = now_ms();
        if stored {
            let expected = rec.version;
            rec.version += 1;
            if !self.inner.store.update_execution(&rec, expected).await? {
                return Err(EngineError::Busy { id: rec.id });
            }
        } else {
            rec.version = 1;
            self.inner.store.insert_execution(&rec).await?;
        }
        Ok(())
    }
}

/// How a run ended, before it is stored.
pub(crate) enum End {
    Completed(Value),
    /// The error as stored and answered.
    Failed(Value),
    /// Paused on the waits its calls raised.
    Suspended,
}

/// The journal to replay and the answers recorded so far.
pub(super) fn initial_state(rec: &ExecutionRecord) -> RunState {
    let mut state = RunState::default();
    for e in rec.journal.as_array().into_iter().flatten() {
        if let Some(seq) = e["seq"].as_u64() {
            state.replay.insert(seq, e.clone());
        }
    }
    state.answers = answers_of(rec);
    state
}

/// The client tools declared when the execution started.
pub(super) fn client_tools_of(rec: &ExecutionRecord) -> Vec<toolshed_core::formats::ClientTool> {
    rec.meta
        .get("clientTools")
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default()
}
