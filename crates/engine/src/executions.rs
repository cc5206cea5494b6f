//! Executions: scripts and direct calls that may pause for approval, stored durably, resumed from
//! any session or after a restart.
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

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use futures::future::BoxFuture;
use parking_lot::Mutex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use toolshed_sandbox::{
    Determinism, Host, HostCall, HostError, HostReply, LogEntry, Permit, Status, Target,
};
use toolshed_store::{now_ms, ExecutionRecord, ExecutionStatus};

use crate::decisions::{can_see, refusal, DecisionChannel};
use crate::invoke::{Approval, CallResult};
use crate::rate::RateKind;
use crate::{Caller, Engine, EngineError, Face};

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
            other => Err(EngineError::InvalidDecision(other.to_string())),
        }
    }
}

/// The call an execution waits on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PendingCall {
    pub seq: u32,
    pub path: String,
    pub name: String,
    pub args: Value,
}

/// How a script or call ended (or paused).
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
    #[serde(rename_all = "camelCase")]
    Paused {
        execution_id: String,
        pending: PendingCall,
        message: String,
        #[serde(skip_serializing_if = "Vec::is_empty", default)]
        logs: Vec<LogEntry>,
    },
}

impl Outcome {
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
    pub fn execution_id(&self) -> &str {
        match self {
            Self::Completed { execution_id, .. }
            | Self::Failed { execution_id, .. }
            | Self::Paused { execution_id, .. } => execution_id,
        }
    }
}

/// A paused (or interrupted) execution, as listed for approvers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PendingSummary {
    pub execution_id: String,
    pub principal: String,
    pub kind: String,
    /// `paused` (waits for a decision), `running` (being resumed right now) or `interrupted`
    /// (a resumed run that stopped without finishing, e.g. the process died; resume it again).
    pub status: String,
    pub pending: Option<PendingCall>,
    pub created_at: i64,
    pub expires_at: Option<i64>,
}

/// One execution of the caller, as shown by `GET /v1/executions/{id}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExecutionInfo {
    pub execution_id: String,
    pub principal: String,
    pub kind: String,
    /// `paused`, `running`, `interrupted`, `completed`, `failed` or `expired`.
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<PendingCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Value>,
    /// How many calls completed (journaled).
    pub completed_calls: usize,
    pub created_at: i64,
    pub updated_at: i64,
    pub expires_at: Option<i64>,
}

fn paused_message(id: &str, p: &PendingCall) -> String {
    format!(
        "'{}' is destructive and needs approval. Ask a human, then call resume with executionId '{id}' and decision \"approve\" or \"deny\".",
        p.path
    )
}

/// The path of the call an execution waits on, if any.
fn pending_path(rec: &ExecutionRecord) -> Option<&str> {
    rec.pending.as_ref()?.get("path")?.as_str()
}

/// The journal's name for a call target. A tool path is kept at most
/// [`crate::audit::MAX_PATH_BYTES`] long: longer paths never name a tool (they all answer
/// `not_found`), so the journal of a script calling them stays small and replays the same.
fn target_key(t: &Target) -> String {
    match t {
        Target::Tool(p) => format!(
            "tool:{}",
            crate::audit::truncated(p, crate::audit::MAX_PATH_BYTES)
        ),
        Target::Search => "search".into(),
        Target::Describe => "describe".into(),
    }
}

fn host_error(e: &EngineError) -> HostError {
    HostError {
        code: e.code().to_string(),
        message: e.to_string(),
        data: e.data(),
    }
}

fn reply_to_json(seq: u32, target: &str, r: &Result<Value, HostError>) -> Value {
    match r {
        Ok(v) => json!({"seq": seq, "target": target, "ok": v}),
        Err(e) => {
            json!({"seq": seq, "target": target, "err": {"code": e.code, "message": e.message, "data": e.data}})
        }
    }
}

fn reply_from_json(v: &Value) -> HostReply {
    if let Some(ok) = v.get("ok") {
        return HostReply::Ok(ok.clone());
    }
    let e = &v["err"];
    HostReply::Err(HostError {
        code: e["code"].as_str().unwrap_or("error").to_string(),
        message: e["message"].as_str().unwrap_or("error").to_string(),
        data: e.get("data").filter(|d| !d.is_null()).cloned(),
    })
}

#[derive(Default)]
struct RunState {
    replay: HashMap<u32, Value>,
    journal: BTreeMap<u32, Value>,
    decisions: HashMap<u32, (Decision, String)>,
    pending: BTreeMap<u32, PendingCall>,
}

fn journal_json(st: &RunState) -> Value {
    Value::Array(st.journal.values().cloned().collect())
}

/// Everything completed so far, for the stored journal of a run in progress: this run's calls
/// and the journaled calls it has not reached yet.
fn durable_journal_json(st: &RunState) -> Value {
    let mut all: BTreeMap<u32, &Value> = st.replay.iter().map(|(k, v)| (*k, v)).collect();
    all.extend(st.journal.iter().map(|(k, v)| (*k, v)));
    Value::Array(all.into_values().cloned().collect())
}

/// The stored record of a resumed run, kept current as calls complete.
struct Durable {
    rec: Arc<tokio::sync::Mutex<ExecutionRecord>>,
    /// The first journal write that failed; once set, the run makes no further tool calls.
    failed: Mutex<Option<JournalFailure>>,
}

/// Why a resumed run was stopped.
#[derive(Clone)]
struct JournalFailure {
    seq: u32,
    path: String,
    reason: String,
    /// Another run claimed the execution: this run must not write it again.
    claim_lost: bool,
}

struct ScriptHost {
    engine: Engine,
    caller: Caller,
    execution_id: Arc<str>,
    state: Arc<Mutex<RunState>>,
    /// Set for resumed runs: completed calls are journaled in the store as they complete.
    durable: Option<Arc<Durable>>,
}

impl Engine {
    /// Writes the journal so far to the stored execution (still claimed by this run). The
    /// write runs in its own task holding the record, so dropping the caller mid-write does
    /// not cancel it, and the version moves on only when the write went through. `Err` is
    /// `(reason, claim_lost)`.
    async fn persist_journal(
        &self,
        durable: &Durable,
        state: &Mutex<RunState>,
    ) -> Result<(), (String, bool)> {
        let mut rec = durable.rec.clone().lock_owned().await;
        rec.journal = durable_journal_json(&state.lock());
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
                Ok(false) => Err(("another run has claimed the execution".to_string(), true)),
                Err(e) => Err((e.to_string(), false)),
            }
        })
        .await
        .unwrap_or_else(|e| Err((format!("the journal write did not finish: {e}"), false)))
    }
}

impl Host for ScriptHost {
    fn call(&self, call: HostCall) -> BoxFuture<'static, HostReply> {
        let engine = self.engine.clone();
        let caller = self.caller.clone();
        let exec = self.execution_id.clone();
        let state = self.state.clone();
        let durable = self.durable.clone();
        Box::pin(async move {
            let key = target_key(&call.target);
            let seq = call.seq;
            // A run whose journal could not be written makes no further tool calls; it stops
            // (the suspension ends the script, and the run is reported as failed).
            let stopped = || durable.as_ref().is_some_and(|d| d.failed.lock().is_some());
            let decision = {
                let st = state.lock();
                if let Some(entry) = st.replay.get(&seq) {
                    let recorded = entry["target"].as_str().unwrap_or_default();
                    if recorded != key {
                        return HostReply::Err(HostError {
                            code: "replay_mismatch".into(),
                            message: format!(
                                "the script took a different path when resumed: call #{seq} was '{recorded}' and is now '{key}'; scripts must be deterministic"
                            ),
                            data: None,
                        });
                    }
                    let entry = entry.clone();
                    drop(st);
                    state.lock().journal.insert(seq, entry.clone());
                    return reply_from_json(&entry);
                }
                st.decisions.get(&seq).cloned()
            };
            if matches!(call.target, Target::Tool(_)) && stopped() {
                return HostReply::Suspend;
            }
            let result: Result<Value, HostError> = match &call.target {
                Target::Search => {
                    let q = call.args.get("query").and_then(Value::as_str).unwrap_or("");
                    let limit =
                        call.args.get("limit").and_then(Value::as_u64).unwrap_or(10) as usize;
                    let ns = call.args.get("namespace").and_then(Value::as_str);
                    Ok(serde_json::to_value(engine.search(&caller, q, limit, ns))
                        .unwrap_or(Value::Null))
                }
                Target::Describe => {
                    let path = call.args.get("path").and_then(Value::as_str).unwrap_or("");
                    engine
                        .describe(
                            &caller,
                            path,
                            call.args
                                .get("schemas")
                                .and_then(Value::as_bool)
                                .unwrap_or(false),
                        )
                        .map(|d| serde_json::to_value(d).unwrap_or(Value::Null))
                        .map_err(|e| host_error(&e))
                }
                Target::Tool(path) => match &decision {
                    Some((Decision::Deny, p)) if p == path => {
                        Err(host_error(&EngineError::Denied { path: path.clone() }))
                    }
                    _ => {
                        let approval = match &decision {
                            Some((Decision::Approve, p)) if p == path => Approval::Granted,
                            _ => Approval::Required,
                        };
                        match engine
                            .invoke(
                                &caller,
                                path,
                                call.args.clone(),
                                approval,
                                Some(exec.clone()),
                            )
                            .await
                        {
                            CallResult::Done(v) => Ok(v),
                            CallResult::Failed(e) => Err(host_error(&e)),
                            CallResult::NeedsApproval { path, name, args } => {
                                state.lock().pending.insert(
                                    seq,
                                    PendingCall {
                                        seq,
                                        path,
                                        name,
                                        args,
                                    },
                                );
                                return HostReply::Suspend;
                            }
                        }
                    }
                },
            };
            state
                .lock()
                .journal
                .insert(seq, reply_to_json(seq, &key, &result));
            // A resumed run journals each completed tool call durably before the script sees it,
            // so a crash from here on never runs it again.
            if let (Some(d), Target::Tool(path)) = (&durable, &call.target) {
                if stopped() {
                    return HostReply::Suspend;
                }
                if let Err((reason, claim_lost)) = engine.persist_journal(d, &state).await {
                    tracing::error!(
                        execution = %exec,
                        seq,
                        path = %path,
                        %reason,
                        "journal write failed; stopping the run"
                    );
                    d.failed.lock().get_or_insert(JournalFailure {
                        seq,
                        path: path.clone(),
                        reason,
                        claim_lost,
                    });
                    return HostReply::Suspend;
                }
            }
            match result {
                Ok(v) => HostReply::Ok(v),
                Err(e) => HostReply::Err(e),
            }
        })
    }
}

impl Engine {
    /// Runs a script for the caller. Destructive calls pause it.
    /// Waits for a sandbox slot first; `overloaded` when every slot is busy and the queue is
    /// full.
    pub async fn run_script(&self, caller: &Caller, source: &str) -> Result<Outcome, EngineError> {
        self.inner
            .rates
            .check(&caller.principal, RateKind::Scripts)?;
        let permit = self.inner.sandbox.admit().await?;
        let now = now_ms();
        let record = ExecutionRecord {
            id: format!("ex_{}", uuid::Uuid::new_v4().simple()),
            principal: caller.principal.to_string(),
            kind: "script".into(),
            source: source.to_string(),
            seed: rand::random::<i64>(),
            now_ms: now,
            status: ExecutionStatus::Running,
            pending: None,
            journal: json!([]),
            decisions: json!({}),
            result: None,
            error: None,
            logs: json!([]),
            created_at: now,
            updated_at: now,
            expires_at: None,
            version: 0,
        };
        self.run_record(caller, record, false, permit).await
    }

    /// Runs (or re-runs) a script execution and stores the result when it must be durable.
    async fn run_record(
        &self,
        caller: &Caller,
        mut rec: ExecutionRecord,
        stored: bool,
        permit: Permit,
    ) -> Result<Outcome, EngineError> {
        let mut state = RunState::default();
        if let Some(entries) = rec.journal.as_array() {
            for e in entries {
                if let Some(seq) = e["seq"].as_u64() {
                    state.replay.insert(seq as u32, e.clone());
                }
            }
        }
        if let Some(map) = rec.decisions.as_object() {
            for (k, v) in map {
                if let (Ok(seq), Some(d), Some(p)) =
                    (k.parse::<u32>(), v["decision"].as_str(), v["path"].as_str())
                {
                    if let Ok(d) = d.parse::<Decision>() {
                        state.decisions.insert(seq, (d, p.to_string()));
                    }
                }
            }
        }
        let state = Arc::new(Mutex::new(state));
        let mut script_caller = caller.clone();
        script_caller.face = Face::Script;
        let durable = stored.then(|| {
            Arc::new(Durable {
                rec: Arc::new(tokio::sync::Mutex::new(rec.clone())),
                failed: Mutex::new(None),
            })
        });
        let host = Arc::new(ScriptHost {
            engine: self.clone(),
            caller: script_caller,
            execution_id: Arc::from(rec.id.as_str()),
            state: state.clone(),
            durable: durable.clone(),
        });
        let det = Determinism {
            seed: rec.seed as u64,
            now_ms: rec.now_ms as f64,
        };
        let outcome = self
            .inner
            .sandbox
            .run(permit, &rec.source, host, &self.inner.config.limits, det)
            .await;
        let (journal, pending_calls) = {
            let st = state.lock();
            (journal_json(&st), st.pending.clone())
        };
        let mut failure = None;
        if let Some(d) = &durable {
            // Journal writes during the run moved the version on; this waits for a write still
            // in flight when the run ended.
            rec.version = d.rec.lock().await.version;
            failure = d.failed.lock().clone();
        }
        rec.journal = journal;
        rec.logs = serde_json::to_value(&outcome.logs).unwrap_or(json!([]));
        let logs = outcome.logs;
        let id = rec.id.clone();
        if let Some(f) = failure {
            let err = EngineError::JournalWrite {
                id: id.clone(),
                seq: f.seq,
                path: f.path,
                reason: f.reason,
            };
            if f.claim_lost {
                return Err(err);
            }
            let error = err.to_json();
            rec.status = ExecutionStatus::Failed;
            rec.pending = None;
            rec.error = Some(error.clone());
            if let Err(e) = self.save(rec, true).await {
                tracing::error!(execution = %id, error = %e, "cannot store the stopped run");
                return Err(err);
            }
            return Ok(Outcome::Failed {
                execution_id: id,
                error,
                logs,
            });
        }
        let result = match outcome.status {
            Status::Completed(v) => {
                rec.status = ExecutionStatus::Completed;
                rec.pending = None;
                rec.result = Some(v.clone());
                Outcome::Completed {
                    execution_id: id,
                    result: v,
                    logs,
                }
            }
            Status::Failed(mut err) => {
                err.message = crate::audit::truncated(&err.message, MAX_SCRIPT_ERROR_BYTES);
                if let Some(stack) = &mut err.stack {
                    *stack = crate::audit::truncated(stack, MAX_SCRIPT_ERROR_BYTES);
                }
                rec.status = ExecutionStatus::Failed;
                rec.pending = None;
                let error = serde_json::to_value(&err).unwrap_or(Value::Null);
                rec.error = Some(error.clone());
                Outcome::Failed {
                    execution_id: id,
                    error,
                    logs,
                }
            }
            Status::Suspended { seq } => {
                let pending = pending_calls.get(&seq).cloned().unwrap_or(PendingCall {
                    seq,
                    path: String::new(),
                    name: String::new(),
                    args: Value::Null,
                });
                rec.status = ExecutionStatus::Paused;
                rec.pending = Some(serde_json::to_value(&pending).unwrap_or(Value::Null));
                rec.expires_at = Some(now_ms() + self.inner.config.approval_ttl.as_millis() as i64);
                Outcome::Paused {
                    message: paused_message(&id, &pending),
                    execution_id: id,
                    pending,
                    logs,
                }
            }
        };
        if stored || matches!(result, Outcome::Paused { .. }) {
            self.save(rec, stored).await?;
        }
        Ok(result)
    }

    async fn save(&self, mut rec: ExecutionRecord, stored: bool) -> Result<(), EngineError> {
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

    /// Calls one tool directly (MCP direct mode, HTTP, CLI). A destructive call pauses and
    /// returns `Paused` with an execution to resume.
    pub async fn call(
        &self,
        caller: &Caller,
        path: &str,
        args: Value,
    ) -> Result<Outcome, EngineError> {
        let id = format!("ex_{}", uuid::Uuid::new_v4().simple());
        match self
            .invoke(
                caller,
                path,
                args,
                Approval::Required,
                Some(Arc::from(id.as_str())),
            )
            .await
        {
            CallResult::Done(result) => Ok(Outcome::Completed {
                execution_id: id,
                result,
                logs: vec![],
            }),
            CallResult::Failed(e) => Err(e),
            CallResult::NeedsApproval { path, name, args } => {
                let now = now_ms();
                let pending = PendingCall {
                    seq: 0,
                    path: path.clone(),
                    name,
                    args: args.clone(),
                };
                let rec = ExecutionRecord {
                    id: id.clone(),
                    principal: caller.principal.to_string(),
                    kind: "call".into(),
                    source: json!({"path": path, "args": args}).to_string(),
                    seed: 0,
                    now_ms: now,
                    status: ExecutionStatus::Paused,
                    pending: Some(serde_json::to_value(&pending).unwrap_or(Value::Null)),
                    journal: json!([]),
                    decisions: json!({}),
                    result: None,
                    error: None,
                    logs: json!([]),
                    created_at: now,
                    updated_at: now,
                    expires_at: Some(now + self.inner.config.approval_ttl.as_millis() as i64),
                    version: 0,
                };
                self.save(rec, false).await?;
                Ok(Outcome::Paused {
                    message: paused_message(&id, &pending),
                    execution_id: id,
                    pending,
                    logs: vec![],
                })
            }
        }
    }

    /// Settles the pending call of a paused execution and continues it, as its owner. Who may
    /// decide, through which channel, is [`crate::decisions`]: an execution the caller may not
    /// see answers `unknown_execution`, one it sees but may not decide `forbidden`.
    pub async fn resume(
        &self,
        caller: &Caller,
        id: &str,
        decision: Decision,
        channel: DecisionChannel,
    ) -> Result<Outcome, EngineError> {
        let unknown = || EngineError::UnknownExecution { id: id.to_string() };
        let mut rec = self
            .inner
            .store
            .get_execution(id)
            .await?
            .ok_or_else(unknown)?;
        if !can_see(caller, &rec.principal, pending_path(&rec)) {
            return Err(unknown());
        }
        let now = now_ms();
        let ttl_secs = self.inner.config.approval_ttl.as_secs();
        match rec.status {
            ExecutionStatus::Expired => {
                return Err(EngineError::Expired {
                    id: id.into(),
                    ttl_secs,
                })
            }
            ExecutionStatus::Completed | ExecutionStatus::Failed => {
                return Err(EngineError::AlreadySettled {
                    id: id.into(),
                    status: rec.status.as_str().into(),
                })
            }
            ExecutionStatus::Running => {
                if !self.is_stale(&rec, now) {
                    return Err(EngineError::Busy { id: id.into() });
                }
                tracing::info!(execution = id, "recovering an interrupted execution");
            }
            ExecutionStatus::Paused => {
                if rec.expires_at.is_some_and(|t| t < now) {
                    self.inner.store.expire_executions(now).await?;
                    return Err(EngineError::Expired {
                        id: id.into(),
                        ttl_secs,
                    });
                }
            }
        }
        let pending: PendingCall = rec
            .pending
            .clone()
            .and_then(|p| serde_json::from_value(p).ok())
            .ok_or_else(|| EngineError::AlreadySettled {
                id: id.into(),
                status: "without a pending call".into(),
            })?;
        if let Some(reason) = refusal(caller, &rec.principal, &pending.path, channel) {
            return Err(EngineError::Forbidden {
                id: id.into(),
                reason,
            });
        }
        tracing::info!(
            execution = id,
            owner = %rec.principal,
            decided_by = %caller.principal,
            ?channel,
            ?decision,
            "pending call decided"
        );
        // The decision is stored with the claim, so an interrupted run is recovered with the
        // decision it was started with (a recovery's own decision applies only when none was
        // recorded for the pending call).
        let mut decisions = rec.decisions.as_object().cloned().unwrap_or_default();
        let key = pending.seq.to_string();
        let recorded = decisions
            .get(&key)
            .and_then(|v| v["decision"].as_str())
            .and_then(|d| d.parse::<Decision>().ok());
        let decision = match recorded {
            Some(d) => d,
            None => {
                decisions.insert(key, json!({"decision": decision, "path": pending.path}));
                decision
            }
        };
        rec.decisions = Value::Object(decisions);
        // A script needs a sandbox slot: take it before the claim, so an overloaded server
        // leaves the execution paused.
        let permit = match rec.kind.as_str() {
            "call" => None,
            _ => Some(self.inner.sandbox.admit().await?),
        };
        // Claim it: whoever bumps the version first runs it.
        rec.status = ExecutionStatus::Running;
        rec.updated_at = now;
        let expected = rec.version;
        rec.version += 1;
        if !self.inner.store.update_execution(&rec, expected).await? {
            return Err(EngineError::Busy { id: id.into() });
        }

        // The run is the owner's, whoever decided.
        let owner = self.caller(&rec.principal, caller.face);
        match permit {
            Some(permit) => self.run_record(&owner, rec, true, permit).await,
            None => self.resume_call(&owner, rec, pending, decision).await,
        }
    }

    async fn resume_call(
        &self,
        caller: &Caller,
        mut rec: ExecutionRecord,
        pending: PendingCall,
        decision: Decision,
    ) -> Result<Outcome, EngineError> {
        let id = rec.id.clone();
        let outcome = match decision {
            Decision::Deny => Err(EngineError::Denied {
                path: pending.path.clone(),
            }),
            Decision::Approve => {
                match self
                    .invoke(
                        caller,
                        &pending.path,
                        pending.args.clone(),
                        Approval::Granted,
                        Some(Arc::from(id.as_str())),
                    )
                    .await
                {
                    CallResult::Done(v) => Ok(v),
                    CallResult::Failed(e) => Err(e),
                    CallResult::NeedsApproval { .. } => {
                        unreachable!("granted calls never ask again")
                    }
                }
            }
        };
        rec.pending = None;
        let result = match outcome {
            Ok(v) => {
                rec.status = ExecutionStatus::Completed;
                rec.result = Some(v.clone());
                Outcome::Completed {
                    execution_id: id,
                    result: v,
                    logs: vec![],
                }
            }
            Err(e) => {
                rec.status = ExecutionStatus::Failed;
                let error = e.to_json();
                rec.error = Some(error.clone());
                Outcome::Failed {
                    execution_id: id,
                    error,
                    logs: vec![],
                }
            }
        };
        self.save(rec, true).await?;
        Ok(result)
    }

    /// One execution the caller may see (its own, or one whose pending call it may decide),
    /// whatever its state. Any other execution answers like a missing one.
    pub async fn execution(&self, caller: &Caller, id: &str) -> Result<ExecutionInfo, EngineError> {
        let now = now_ms();
        self.inner.store.expire_executions(now).await?;
        let unknown = || EngineError::UnknownExecution { id: id.to_string() };
        let r = self
            .inner
            .store
            .get_execution(id)
            .await?
            .filter(|r| can_see(caller, &r.principal, pending_path(r)))
            .ok_or_else(unknown)?;
        let status = match r.status {
            ExecutionStatus::Running if self.is_stale(&r, now) => "interrupted",
            other => other.as_str(),
        };
        Ok(ExecutionInfo {
            status: status.to_string(),
            completed_calls: r.journal.as_array().map_or(0, Vec::len),
            pending: r.pending.and_then(|p| serde_json::from_value(p).ok()),
            execution_id: r.id,
            principal: r.principal,
            kind: r.kind,
            result: r.result,
            error: r.error,
            created_at: r.created_at,
            updated_at: r.updated_at,
            expires_at: r.expires_at,
        })
    }

    /// The newest audit entries of the caller's principal (none for an empty principal id).
    pub async fn audit_of(
        &self,
        caller: &Caller,
        limit: usize,
    ) -> Result<Vec<toolshed_store::AuditEntry>, EngineError> {
        if caller.principal.is_empty() {
            return Ok(vec![]);
        }
        let limit = limit.clamp(1, 10_000) as i64;
        Ok(self
            .inner
            .store
            .recent_audit_of(Some(&caller.principal), limit)
            .await?)
    }

    /// Whether a `running` execution has been silent for longer than any run can last, i.e. the
    /// run that claimed it is gone.
    fn is_stale(&self, rec: &ExecutionRecord, now: i64) -> bool {
        let c = &self.inner.config;
        let longest = c.limits.wall_clock.max(c.call_timeout) + c.recovery_grace;
        now - rec.updated_at > longest.as_millis() as i64
    }

    /// The executions that wait for someone and the caller may see: its own, and those whose
    /// pending call it may decide. Paused ones, and resumed runs that are running or were
    /// interrupted (expired ones are marked first). Newest first.
    pub async fn pending(&self, caller: &Caller) -> Result<Vec<PendingSummary>, EngineError> {
        let now = now_ms();
        self.inner.store.expire_executions(now).await?;
        if caller.principal.is_empty() {
            return Ok(vec![]);
        }
        // A principal that decides for others sees every principal's waiting executions its
        // `decide` patterns match.
        let whose = (!caller.access.decides_any()).then_some(caller.principal.as_ref());
        let mut recs = Vec::new();
        for status in [ExecutionStatus::Paused, ExecutionStatus::Running] {
            recs.extend(
                self.inner
                    .store
                    .list_executions(whose, Some(status), 200)
                    .await?
                    .into_iter()
                    .filter(|r| can_see(caller, &r.principal, pending_path(r))),
            );
        }
        recs.sort_by(|a, b| (b.created_at, &b.id).cmp(&(a.created_at, &a.id)));
        recs.truncate(200);
        Ok(recs
            .into_iter()
            .map(|r| {
                let status = match r.status {
                    ExecutionStatus::Running if self.is_stale(&r, now) => "interrupted",
                    other => other.as_str(),
                };
                PendingSummary {
                    status: status.to_string(),
                    execution_id: r.id,
                    principal: r.principal,
                    kind: r.kind,
                    pending: r.pending.and_then(|p| serde_json::from_value(p).ok()),
                    created_at: r.created_at,
                    expires_at: r.expires_at,
                }
            })
            .collect())
    }
}
