//! Answering a paused execution, and cancelling one.
//!
//! Each answer is checked against the wait it names before anything is stored: an unknown
//! execution or wait, a wait already answered, an answer of the wrong kind, an oversized result,
//! a result failing the client tool's declared output schema or content failing a question's
//! schema is refused with its own error and leaves the execution unchanged. A valid answer is
//! recorded; when it was the last open wait the execution is claimed and continues from its
//! journal (completed calls never run again), otherwise it stays paused on the others.
//!
//! Who may answer: approvals and questions by the decision rule of [`crate::decisions`];
//! a client tool's result only by the execution's owner (it is the client's own tool).

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::{json, Value};
use toolshed_core::CompiledSchema;
use toolshed_store::{now_ms, ExecutionRecord, ExecutionStatus};

use super::host::needs_content;
use super::run::client_tools_of;
use super::waits::{open_waits, waits_of, Answer, AnswerAction, ToolResultAnswer, Wait, WaitKind};
use super::{Decision, Outcome, PendingCall};
use crate::decisions::{can_see_waits, refusal, DecisionChannel};
use crate::events::Event;
use crate::invoke::{Approval, CallResult};
use crate::{Caller, Engine, EngineError};

/// Largest client tool result accepted, in bytes of JSON.
pub const MAX_TOOL_RESULT_BYTES: usize = 1024 * 1024;
/// Largest answer content accepted, in bytes of JSON.
pub const MAX_ANSWER_BYTES: usize = 256 * 1024;
/// How often an answer is re-applied when another answer to the same execution was stored
/// between reading and writing it.
const ANSWER_ATTEMPTS: usize = 5;

/// Runs of this process that a `cancel` can stop, by execution id (with their owner).
#[derive(Default)]
pub(crate) struct Running(Mutex<HashMap<String, (String, Arc<tokio::sync::Notify>)>>);

impl Running {
    pub fn register(&self, id: &str, owner: &str) -> Arc<tokio::sync::Notify> {
        let n = Arc::new(tokio::sync::Notify::new());
        self.0
            .lock()
            .insert(id.to_string(), (owner.to_string(), n.clone()));
        n
    }
    pub(crate) fn owned_by(&self, id: &str, principal: &str) -> bool {
        !principal.is_empty() && self.0.lock().get(id).is_some_and(|(o, _)| o == principal)
    }
    pub fn remove(&self, id: &str) {
        self.0.lock().remove(id);
    }
    /// Signals the run of `id` in this process; false when none runs here.
    fn cancel(&self, id: &str) -> bool {
        match self.0.lock().get(id) {
            Some((_, n)) => {
                n.notify_one();
                true
            }
            None => false,
        }
    }
}

/// One answer to one wait.
#[derive(Debug, Clone)]
enum Reply {
    Decision(Decision),
    ToolResult(ToolResultAnswer),
    Input {
        action: AnswerAction,
        content: Option<Value>,
    },
}

impl Engine {
    /// Settles the approval a paused execution waits on and continues it, as its owner. Who
    /// may decide, through which channel, is [`crate::decisions`]: an execution the caller may
    /// not see answers `unknown_execution`, one it sees but may not decide `forbidden`. When
    /// several approvals wait, name one with [`Engine::decide`].
    pub async fn resume(
        &self,
        caller: &Caller,
        id: &str,
        decision: Decision,
        channel: DecisionChannel,
    ) -> Result<Outcome, EngineError> {
        self.decide(caller, id, None, decision, channel).await
    }

    /// Approves or denies one approval wait (`wait_id`, or the only approval wait).
    pub async fn decide(
        &self,
        caller: &Caller,
        id: &str,
        wait_id: Option<&str>,
        decision: Decision,
        channel: DecisionChannel,
    ) -> Result<Outcome, EngineError> {
        let answers = |rec: &ExecutionRecord| -> Result<Vec<(Wait, Reply)>, EngineError> {
            let wait = pick_wait(rec, wait_id, WaitKind::Approval)?;
            Ok(vec![(wait, Reply::Decision(decision))])
        };
        self.apply_answers(caller, id, channel, answers).await
    }

    /// Posts the results of client tool calls (each `callId` once).
    pub async fn tool_results(
        &self,
        caller: &Caller,
        id: &str,
        results: Vec<ToolResultAnswer>,
        channel: DecisionChannel,
    ) -> Result<Outcome, EngineError> {
        if results.is_empty() {
            return Err(invalid(
                id,
                "",
                "results is empty: post at least one {callId, result}",
            ));
        }
        let answers = |rec: &ExecutionRecord| -> Result<Vec<(Wait, Reply)>, EngineError> {
            let mut out = Vec::new();
            for r in &results {
                if out
                    .iter()
                    .any(|(w, _): &(Wait, Reply)| w.wait_id == r.call_id)
                {
                    return Err(invalid(
                        id,
                        &r.call_id,
                        "the same callId is answered twice in one request",
                    ));
                }
                let wait = pick_wait(rec, Some(&r.call_id), WaitKind::ToolResult)?;
                out.push((wait, Reply::ToolResult(r.clone())));
            }
            Ok(out)
        };
        self.apply_answers(caller, id, channel, answers).await
    }

    /// Answers a question (`input` wait).
    pub async fn answer(
        &self,
        caller: &Caller,
        id: &str,
        wait_id: &str,
        action: AnswerAction,
        content: Option<Value>,
        channel: DecisionChannel,
    ) -> Result<Outcome, EngineError> {
        let answers = |rec: &ExecutionRecord| -> Result<Vec<(Wait, Reply)>, EngineError> {
            let wait = pick_wait(rec, Some(wait_id), WaitKind::Input)?;
            Ok(vec![(
                wait,
                Reply::Input {
                    action,
                    content: content.clone(),
                },
            )])
        };
        self.apply_answers(caller, id, channel, answers).await
    }

    /// Checks and records answers; continues the execution when no wait is left open.
    async fn apply_answers(
        &self,
        caller: &Caller,
        id: &str,
        channel: DecisionChannel,
        answers: impl Fn(&ExecutionRecord) -> Result<Vec<(Wait, Reply)>, EngineError>,
    ) -> Result<Outcome, EngineError> {
        for _ in 0..ANSWER_ATTEMPTS {
            let mut rec = self.answerable(caller, id).await?;
            if rec.status == ExecutionStatus::Running {
                // An interrupted run (its process died): it continues with the answers it was
                // started with, by anyone who may answer its waits.
                for wait in waits_of(&rec) {
                    if let Some(reason) = self.may_answer(caller, &rec, &wait, channel) {
                        return Err(EngineError::Forbidden {
                            id: id.into(),
                            reason,
                        });
                    }
                }
                tracing::info!(execution = id, "recovering an interrupted execution");
                return self.continue_execution(caller, rec).await;
            }
            let replies = answers(&rec)?;
            let mut decisions = rec.decisions.as_object().cloned().unwrap_or_default();
            for (wait, reply) in &replies {
                if let Some(reason) = self.may_answer(caller, &rec, wait, channel) {
                    return Err(EngineError::Forbidden {
                        id: id.into(),
                        reason,
                    });
                }
                let answer = self.check_answer(&rec, wait, reply.clone())?;
                tracing::info!(
                    execution = id,
                    owner = %rec.principal,
                    answered_by = %caller.principal,
                    wait = %wait.wait_id,
                    ?channel,
                    "wait answered"
                );
                decisions.insert(
                    wait.seq.to_string(),
                    serde_json::to_value(answer).unwrap_or(Value::Null),
                );
            }
            rec.decisions = Value::Object(decisions);
            let still_open = open_waits(&rec);
            if still_open.is_empty() {
                return self.continue_execution(caller, rec).await;
            }
            // Recorded; the execution keeps waiting on the others.
            let expected = rec.version;
            rec.version += 1;
            rec.updated_at = now_ms();
            if self.inner.store.update_execution(&rec, expected).await? {
                return Ok(Outcome::paused(rec.id, still_open, vec![]));
            }
        }
        Err(EngineError::Busy { id: id.into() })
    }

    /// The stored execution, if the caller may see it and it waits (or was interrupted).
    async fn answerable(&self, caller: &Caller, id: &str) -> Result<ExecutionRecord, EngineError> {
        let unknown = || EngineError::UnknownExecution { id: id.to_string() };
        let rec = self
            .inner
            .store
            .get_execution(id)
            .await?
            .ok_or_else(unknown)?;
        if !can_see_waits(caller, &rec.principal, &waits_of(&rec)) {
            return Err(unknown());
        }
        let now = now_ms();
        let ttl_secs = self.inner.config.approval_ttl.as_secs();
        match rec.status {
            ExecutionStatus::Expired => Err(EngineError::Expired {
                id: id.into(),
                ttl_secs,
            }),
            ExecutionStatus::Completed | ExecutionStatus::Failed | ExecutionStatus::Cancelled => {
                Err(EngineError::AlreadySettled {
                    id: id.into(),
                    status: rec.status.as_str().into(),
                })
            }
            ExecutionStatus::Running if !self.is_stale(&rec, now) => {
                Err(EngineError::Busy { id: id.into() })
            }
            ExecutionStatus::Paused if rec.expires_at.is_some_and(|t| t < now) => {
                self.expire_due(now).await?;
                Err(EngineError::Expired {
                    id: id.into(),
                    ttl_secs,
                })
            }
            _ => Ok(rec),
        }
    }

    /// Why `caller` may not answer `wait`; `None` when it may.
    fn may_answer(
        &self,
        caller: &Caller,
        rec: &ExecutionRecord,
        wait: &Wait,
        channel: DecisionChannel,
    ) -> Option<String> {
        let owner = &rec.principal;
        let is_owner = !owner.is_empty() && owner.as_str() == caller.principal.as_ref();
        match wait.kind {
            WaitKind::ToolResult if is_owner => None,
            WaitKind::ToolResult => Some(format!(
                "a client tool's result is posted by the execution's owner ('{owner}') only"
            )),
            // The question is the owner's human's: they answer it through any human channel.
            WaitKind::Input if is_owner && matches!(channel, DecisionChannel::Human(_)) => None,
            WaitKind::Input | WaitKind::Approval => {
                refusal(caller, owner, wait.decision_path(), channel)
            }
        }
    }

    /// Turns a reply into the answer to store, or refuses it.
    fn check_answer(
        &self,
        rec: &ExecutionRecord,
        wait: &Wait,
        reply: Reply,
    ) -> Result<Answer, EngineError> {
        let id = &rec.id;
        match reply {
            Reply::Decision(decision) => Ok(Answer::Approval {
                decision,
                path: wait.path.clone().unwrap_or_default(),
            }),
            Reply::ToolResult(r) => check_tool_result(rec, wait, r),
            Reply::Input { action, content } => {
                if !needs_content(action) || wait.schema.is_none() {
                    return Ok(Answer::Input {
                        action,
                        content: content.filter(|_| needs_content(action)),
                    });
                }
                let content = content.unwrap_or_else(|| json!({}));
                if content.to_string().len() > MAX_ANSWER_BYTES {
                    return Err(invalid(
                        id,
                        &wait.wait_id,
                        &format!("the content is larger than {MAX_ANSWER_BYTES} bytes"),
                    ));
                }
                let schema = wait.schema.clone().unwrap_or(Value::Null);
                let checked = CompiledSchema::compile(&schema)
                    .map_err(|e| {
                        invalid(
                            id,
                            &wait.wait_id,
                            &format!("the question's schema is broken: {e}"),
                        )
                    })?
                    .validate(&content);
                if let Err(violations) = checked {
                    return Err(EngineError::InvalidAnswer {
                        id: id.clone(),
                        wait_id: wait.wait_id.clone(),
                        reason: format!(
                            "the content does not match the question's schema: {}",
                            toolshed_core::schema::describe_violations(&violations)
                        ),
                        violations,
                    });
                }
                Ok(Answer::Input {
                    action,
                    content: Some(content),
                })
            }
        }
    }

    /// Claims an execution whose waits are all answered and runs it on, as its owner.
    async fn continue_execution(
        &self,
        caller: &Caller,
        mut rec: ExecutionRecord,
    ) -> Result<Outcome, EngineError> {
        let id = rec.id.clone();
        if rec.kind == "run" {
            return self.continue_run(caller, rec).await;
        }
        if rec.kind == super::question::QUESTION_KIND {
            return self.settle_question(rec).await;
        }
        let script = rec.kind != "call";
        if script {
            if let Some(stored) = rec.meta.get("runtime").and_then(Value::as_str) {
                let current = toolshed_sandbox::runtime_version();
                if stored != current {
                    return Err(EngineError::RuntimeChanged {
                        id,
                        stored: stored.to_string(),
                        current: current.to_string(),
                    });
                }
            }
        }
        // A script needs a sandbox slot: take it before the claim, so an overloaded server
        // leaves the execution paused.
        let permit = match script {
            false => None,
            true => Some(self.inner.sandbox.admit().await?),
        };
        // Claim it: whoever bumps the version first runs it.
        let pending = waits_of(&rec)
            .first()
            .and_then(|w| w.as_pending_call().or_else(|| granted_call(&rec, w)));
        rec.status = ExecutionStatus::Running;
        rec.updated_at = now_ms();
        let expected = rec.version;
        rec.version += 1;
        if !self.inner.store.update_execution(&rec, expected).await? {
            return Err(EngineError::Busy { id });
        }
        // The run is the owner's, whoever answered.
        let owner = self.owner(&rec.principal, caller.face).await;
        match permit {
            Some(permit) => self.run_record(&owner, rec, true, permit).await,
            None => {
                let decision = super::waits::answers_of(&rec)
                    .into_values()
                    .find_map(|a| match a {
                        Answer::Approval { decision, .. } => Some(decision),
                        // A grant or action wait: the call goes on once it was done.
                        Answer::Input { action, .. } => Some(match action {
                            AnswerAction::Accept => Decision::Approve,
                            _ => Decision::Deny,
                        }),
                        _ => None,
                    })
                    .unwrap_or(Decision::Deny);
                let pending = pending.ok_or_else(|| EngineError::AlreadySettled {
                    id: rec.id.clone(),
                    status: "without a pending call".into(),
                })?;
                self.resume_call(&owner, rec, pending, decision).await
            }
        }
    }

    /// Claims an agent run whose waits are all answered and drives it on, as its owner.
    async fn continue_run(
        &self,
        caller: &Caller,
        mut rec: ExecutionRecord,
    ) -> Result<Outcome, EngineError> {
        rec.status = ExecutionStatus::Running;
        rec.updated_at = now_ms();
        let expected = rec.version;
        rec.version += 1;
        if !self.inner.store.update_execution(&rec, expected).await? {
            return Err(EngineError::Busy { id: rec.id });
        }
        let owner = self.owner(&rec.principal, caller.face).await;
        self.drive_run(&owner, rec, true).await
    }

    async fn resume_call(
        &self,
        caller: &Caller,
        mut rec: ExecutionRecord,
        pending: PendingCall,
        decision: Decision,
    ) -> Result<Outcome, EngineError> {
        let id = rec.id.clone();
        let events = &self.inner.events;
        events.open(&id, true).await?;
        events.emit(&id, Event::Resumed {});
        let started = std::time::Instant::now();
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
                    CallResult::NeedsAction { action, .. } => {
                        return self.pause_for_action(caller, rec, &action).await;
                    }
                }
            }
        };
        rec.pending = None;
        events.emit(
            &id,
            Event::ToolResult {
                seq: 0,
                path: pending.path.clone(),
                ok: outcome.is_ok(),
                duration_ms: started.elapsed().as_secs_f64() * 1000.0,
                error: outcome.as_ref().err().map(EngineError::to_json),
            },
        );
        let result = match outcome {
            Ok(v) => {
                rec.status = ExecutionStatus::Completed;
                rec.result = Some(v.clone());
                Outcome::Completed {
                    execution_id: id.clone(),
                    result: v,
                    logs: vec![],
                }
            }
            Err(e) => {
                rec.status = ExecutionStatus::Failed;
                let error = e.to_json();
                rec.error = Some(error.clone());
                Outcome::Failed {
                    execution_id: id.clone(),
                    error,
                    logs: vec![],
                }
            }
        };
        events.emit(&id, result.event());
        events.close(&id, true).await;
        self.save(rec, true).await?;
        Ok(result)
    }

    /// A resumed direct call that now needs a person to act (after its approval, a grant revoked
    /// meanwhile, or an action not done yet): the execution pauses again, on a new wait.
    async fn pause_for_action(
        &self,
        owner: &Caller,
        mut rec: ExecutionRecord,
        action: &crate::actions::HumanAction,
    ) -> Result<Outcome, EngineError> {
        let id = rec.id.clone();
        let wait = self.action_wait(&owner.principal, action, &id, 0).await?;
        let now = now_ms();
        rec.status = ExecutionStatus::Paused;
        rec.pending = Some(json!([wait]));
        // The approval (if any) is spent: the call runs as approved once the grant is made.
        rec.decisions = json!({});
        rec.expires_at = Some(now + self.inner.config.approval_ttl.as_millis() as i64);
        let outcome = Outcome::paused(id.clone(), vec![wait], vec![]);
        let events = &self.inner.events;
        events.emit(&id, outcome.event());
        events.close(&id, true).await;
        self.save(rec, true).await?;
        Ok(outcome)
    }

    /// Expires the paused executions whose time ran out; an expired run's plan ends with it
    /// (its unfinished background tasks are cancelled: nobody would read their results).
    pub(crate) async fn expire_due(&self, now: i64) -> Result<(), EngineError> {
        for e in self.inner.store.expire_executions(now).await? {
            if e.kind == "run" {
                self.cancel_plan_of(&e.id).await;
            }
        }
        Ok(())
    }

    /// Stops a running or paused execution. A paused one is stored as cancelled at once; a run
    /// in this process is stopped (what it completed stays journaled); a resumed run on another
    /// replica stops at its next journal write, which finds the execution taken from it.
    pub async fn cancel(&self, caller: &Caller, id: &str) -> Result<Outcome, EngineError> {
        let unknown = || EngineError::UnknownExecution { id: id.to_string() };
        let stored = self.inner.store.get_execution(id).await?;
        let Some(mut rec) = stored else {
            // Not stored: a first run in progress, cancelled by its owner only. The run stores
            // itself as cancelled when it stops.
            if self.inner.running.owned_by(id, &caller.principal) && self.inner.running.cancel(id) {
                return Ok(Outcome::Cancelled {
                    execution_id: id.to_string(),
                    logs: vec![],
                });
            }
            return Err(unknown());
        };
        let waits = waits_of(&rec);
        if !can_see_waits(caller, &rec.principal, &waits) {
            return Err(unknown());
        }
        let is_owner = !rec.principal.is_empty() && rec.principal == caller.principal.as_ref();
        if !is_owner {
            let human = DecisionChannel::Human(caller.face);
            if let Some(reason) = waits
                .iter()
                .find_map(|w| refusal(caller, &rec.principal, w.decision_path(), human))
            {
                return Err(EngineError::Forbidden {
                    id: id.into(),
                    reason,
                });
            }
        }
        if rec.status.is_settled() {
            return Err(EngineError::AlreadySettled {
                id: id.into(),
                status: rec.status.as_str().into(),
            });
        }
        rec.status = ExecutionStatus::Cancelled;
        rec.pending = None;
        let is_run = rec.kind == "run";
        self.save(rec, true).await?;
        // A run's plan ends with it (a run driven here does this itself when it stops).
        if is_run && !self.inner.running.owned_by(id, &caller.principal) {
            self.cancel_plan_of(id).await;
        }
        // A run in this process says so itself when it stops; otherwise the event is written
        // here (a run on another replica stops at its next journal write, silently).
        if !self.inner.running.cancel(id) {
            let events = &self.inner.events;
            events.open(id, true).await?;
            events.emit(id, Event::Cancelled {});
            events.close(id, true).await;
        }
        Ok(Outcome::Cancelled {
            execution_id: id.to_string(),
            logs: vec![],
        })
    }
}

/// The open wait a reply names (`wait_id`), or the only open wait of `kind` when none is named.
fn pick_wait(
    rec: &ExecutionRecord,
    wait_id: Option<&str>,
    kind: WaitKind,
) -> Result<Wait, EngineError> {
    let id = &rec.id;
    let all = waits_of(rec);
    let open = open_waits(rec);
    let Some(wanted) = wait_id else {
        let mut of_kind = open.into_iter().filter(|w| w.kind == kind);
        return match (of_kind.next(), of_kind.next()) {
            (Some(w), None) => Ok(w),
            (None, _) => Err(invalid(
                id,
                "",
                &format!("the execution waits on no {} now", kind.as_str()),
            )),
            (Some(_), Some(_)) => Err(invalid(
                id,
                "",
                &format!(
                    "several {} waits are open: name one with waitId",
                    kind.as_str()
                ),
            )),
        };
    };
    let Some(wait) = all.iter().find(|w| w.wait_id == wanted) else {
        return Err(EngineError::UnknownWait {
            id: id.clone(),
            wait_id: crate::audit::truncated(wanted, 128),
        });
    };
    if !open.iter().any(|w| w.wait_id == wanted) {
        return Err(EngineError::AlreadyAnswered {
            id: id.clone(),
            wait_id: wanted.to_string(),
        });
    }
    if wait.kind != kind {
        return Err(invalid(
            id,
            wanted,
            &format!(
                "'{wanted}' is a {} wait, not a {}",
                wait.kind.as_str(),
                kind.as_str()
            ),
        ));
    }
    Ok(wait.clone())
}

/// Checks a client tool result: size, and the tool's declared output schema.
fn check_tool_result(
    rec: &ExecutionRecord,
    wait: &Wait,
    r: ToolResultAnswer,
) -> Result<Answer, EngineError> {
    let id = &rec.id;
    let w = &wait.wait_id;
    match (r.result, r.error) {
        (Some(_), Some(_)) => Err(invalid(id, w, "send either result or error, not both")),
        (None, Some(e)) => Ok(Answer::ToolResult {
            result: None,
            error: Some(crate::audit::truncated(&e.message, 4_096)),
        }),
        (result, None) => {
            let result = result.unwrap_or(Value::Null);
            let size = result.to_string().len();
            if size > MAX_TOOL_RESULT_BYTES {
                return Err(invalid(
                    id,
                    w,
                    &format!(
                        "the result is {size} bytes; at most {MAX_TOOL_RESULT_BYTES} are accepted"
                    ),
                ));
            }
            let path = wait.path.as_deref().unwrap_or_default();
            let declared = client_tools_of(rec).into_iter().find(|t| t.path == path);
            if let Some(schema) = declared.and_then(|t| t.output_schema) {
                let checked = CompiledSchema::compile(&schema)
                    .map_err(|e| {
                        invalid(id, w, &format!("the declared output schema is broken: {e}"))
                    })?
                    .validate(&result);
                if let Err(violations) = checked {
                    return Err(EngineError::InvalidAnswer {
                        id: id.clone(),
                        wait_id: w.clone(),
                        reason: format!(
                            "the result does not match the output schema declared for '{path}': {}",
                            toolshed_core::schema::describe_violations(&violations)
                        ),
                        violations,
                    });
                }
            }
            Ok(Answer::ToolResult {
                result: Some(result),
                error: None,
            })
        }
    }
}

fn invalid(id: &str, wait_id: &str, reason: &str) -> EngineError {
    EngineError::InvalidAnswer {
        id: id.to_string(),
        wait_id: wait_id.to_string(),
        reason: reason.to_string(),
        violations: vec![],
    }
}

/// The call a direct call's grant wait holds back: the path and arguments it was made with.
fn granted_call(rec: &ExecutionRecord, wait: &Wait) -> Option<PendingCall> {
    if wait.kind != WaitKind::Input || rec.kind != "call" {
        return None;
    }
    let input: Value = serde_json::from_str(&rec.source).ok()?;
    let path = input.get("path")?.as_str()?.to_string();
    Some(PendingCall {
        seq: 0,
        name: path.clone(),
        path,
        args: input.get("args").cloned().unwrap_or(Value::Null),
    })
}
