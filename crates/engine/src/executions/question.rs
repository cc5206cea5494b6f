//! Questions asked during a call that cannot pause (a relayed upstream's `elicitation/create`
//! whose client cannot take it): the question becomes a stored execution of kind `question`
//! with one `input` wait, listed and answered like any other wait, from any session or face,
//! by whoever may answer the owner's questions. The call that asked waits for the answer in
//! this process; answering settles the execution without running anything.
//!
//! A question lives exactly as long as its call waits for it: unanswered within its time it is
//! cancelled and the call fails with [`EngineError::QuestionUnanswered`] (naming the question,
//! not the tool); when the call ends first (timed out, cancelled, its client gone) the question
//! is cancelled with the reason [`CALL_ENDED`]. A cancelled question is no longer listed as
//! waiting and cannot be answered; its `error` records why.

use std::time::Duration;

use serde_json::{json, Value};
use toolshed_store::{now_ms, ExecutionRecord, ExecutionStatus};

use super::waits::{waits_of, Answer, InputMode, Wait};
use super::Outcome;
use crate::{Caller, Engine, EngineError};

/// The kind of a stored question's execution.
pub(crate) const QUESTION_KIND: &str = "question";

/// Largest form schema kept with a question; a larger one is dropped (the question stays).
const MAX_SCHEMA_BYTES: usize = 16 * 1024;

/// How often a waiting call looks for the answer.
const POLL: Duration = Duration::from_millis(200);

/// A person's answer to a question: `accept` (with `content`), `decline` or `cancel`.
#[derive(Debug, Clone, PartialEq)]
pub struct QuestionAnswer {
    pub action: String,
    pub content: Option<Value>,
}

impl Engine {
    /// Asks the caller's people `message` (a form with `schema`) while `path` runs, and waits
    /// up to `timeout` for the answer. The question is an execution of its own, answered like
    /// any `input` wait. Unanswered in time, it is cancelled and the call hears so
    /// ([`EngineError::QuestionUnanswered`]); when the call stops waiting first (this future is
    /// dropped: the call timed out, was cancelled or its client went away), the question is
    /// cancelled too ([`CALL_ENDED`]), so nobody answers a question nobody waits for.
    pub async fn ask_question(
        &self,
        caller: &Caller,
        path: &str,
        message: &str,
        schema: Option<Value>,
        timeout: Duration,
    ) -> Result<QuestionAnswer, EngineError> {
        let id = self
            .store_question(caller, path, message, schema, timeout)
            .await?;
        let mut waiting = Waiting {
            engine: self.clone(),
            id: Some(id.clone()),
        };
        let outcome = self.await_answer(&id, timeout).await;
        // Settled (answered, settled elsewhere, or cancelled as unanswered): nothing for the
        // guard to do. After any other error it cancels the question on the way out.
        if matches!(
            &outcome,
            Ok(_) | Err(EngineError::QuestionUnanswered { .. })
        ) {
            waiting.id = None;
        }
        outcome
    }

    /// Stores the question as a paused execution with one `input` wait; its id.
    async fn store_question(
        &self,
        caller: &Caller,
        path: &str,
        message: &str,
        schema: Option<Value>,
        timeout: Duration,
    ) -> Result<String, EngineError> {
        let id = super::new_execution_id();
        let message: String = message.chars().take(2000).collect();
        let schema = schema.filter(|v| v.to_string().len() <= MAX_SCHEMA_BYTES);
        let mut wait = Wait::input(0, InputMode::Form, message.clone(), schema, None);
        // The tool that asks, so that whoever answers knows which call the question is for.
        wait.path = Some(path.to_string());
        let now = now_ms();
        let mut rec = ExecutionRecord::new_running(
            id.clone(),
            &caller.principal,
            QUESTION_KIND,
            json!({"path": path, "question": message}).to_string(),
            json!({}),
            now,
        );
        rec.status = ExecutionStatus::Paused;
        rec.pending = Some(json!([wait]));
        rec.expires_at = Some(now + timeout.as_millis() as i64);
        self.save(rec.clone(), false).await?;
        self.notify_paused(&rec);
        tracing::info!(execution = %id, path, "a call asks a question no client could take");
        Ok(id)
    }

    /// Polls question `id` until it is answered, settled elsewhere, or `timeout` passes (then
    /// it is cancelled as unanswered).
    async fn await_answer(
        &self,
        id: &str,
        timeout: Duration,
    ) -> Result<QuestionAnswer, EngineError> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let now = tokio::time::Instant::now();
            if now >= deadline {
                let reason = format!("unanswered within {}s", timeout.as_secs_f64());
                self.cancel_question(id, &reason).await;
                // Answered at the last moment: the answer stands.
                return match self.question_status(id).await? {
                    Some(rec) if rec.status == ExecutionStatus::Completed => Ok(answer_of(&rec)),
                    _ => Err(EngineError::QuestionUnanswered {
                        id: id.to_string(),
                        after: timeout,
                    }),
                };
            }
            tokio::time::sleep(POLL.min(deadline - now)).await;
            let Some(rec) = self.question_status(id).await? else {
                return Err(EngineError::UnknownExecution { id: id.to_string() });
            };
            match rec.status {
                ExecutionStatus::Completed => return Ok(answer_of(&rec)),
                ExecutionStatus::Paused => {}
                other => {
                    return Ok(QuestionAnswer {
                        action: "cancel".into(),
                        content: Some(json!({"status": other.as_str()})),
                    })
                }
            }
        }
    }

    async fn question_status(&self, id: &str) -> Result<Option<ExecutionRecord>, EngineError> {
        Ok(self.inner.store.get_execution(id).await?)
    }

    /// Settles an answered question: nothing runs, the answer is its result.
    pub(crate) async fn settle_question(
        &self,
        mut rec: ExecutionRecord,
    ) -> Result<Outcome, EngineError> {
        let answer = answer_of(&rec);
        let result = json!({"action": answer.action, "content": answer.content});
        rec.status = ExecutionStatus::Completed;
        rec.result = Some(result.clone());
        rec.pending = None;
        rec.updated_at = now_ms();
        let expected = rec.version;
        rec.version += 1;
        if !self.inner.store.update_execution(&rec, expected).await? {
            return Err(EngineError::Busy { id: rec.id });
        }
        Ok(Outcome::Completed {
            execution_id: rec.id,
            result,
            logs: vec![],
        })
    }

    /// Cancels question `id` while it still waits, recording `reason`: it is no longer listed
    /// as waiting and cannot be answered. One answered or settled meanwhile is left as it is.
    pub(crate) async fn cancel_question(&self, id: &str, reason: &str) {
        for _ in 0..CANCEL_ATTEMPTS {
            let rec = match self.inner.store.get_execution(id).await {
                Ok(Some(rec)) if rec.status == ExecutionStatus::Paused => rec,
                Ok(_) => return,
                Err(e) => {
                    tracing::warn!(execution = %id, "cancelling a question: {e}");
                    return;
                }
            };
            match self.store_cancelled(rec, reason).await {
                Ok(true) => {
                    tracing::info!(execution = %id, reason, "question cancelled");
                    return;
                }
                // Changed meanwhile (an answer is being stored): look again.
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(execution = %id, "cancelling a question: {e}");
                    return;
                }
            }
        }
        tracing::warn!(execution = %id, reason, "a question could not be cancelled: it kept changing");
    }

    /// Stores `rec` cancelled with `reason`; false when another writer changed it first.
    async fn store_cancelled(
        &self,
        mut rec: ExecutionRecord,
        reason: &str,
    ) -> Result<bool, EngineError> {
        rec.status = ExecutionStatus::Cancelled;
        rec.pending = None;
        rec.error = Some(json!({"code": "cancelled", "message": reason}));
        rec.updated_at = now_ms();
        let expected = rec.version;
        rec.version += 1;
        Ok(self.inner.store.update_execution(&rec, expected).await?)
    }
}

/// Why a question is cancelled when the call that asked stops waiting for it.
pub const CALL_ENDED: &str = "the call that asked ended";

/// How often a cancel is tried again when the question changed under it.
const CANCEL_ATTEMPTS: usize = 3;

/// A stored question its call waits for. Dropped while `id` is still set (the call stopped
/// waiting: it timed out, was cancelled, or its client went away), it cancels the question in
/// the background, as a destructor cannot wait.
struct Waiting {
    engine: Engine,
    id: Option<String>,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else {
            return;
        };
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(execution = %id, "a question outlives its call: no runtime to cancel it on");
            return;
        };
        let engine = self.engine.clone();
        rt.spawn(async move { engine.cancel_question(&id, CALL_ENDED).await });
    }
}

/// The stored answer of a question's one wait.
fn answer_of(rec: &ExecutionRecord) -> QuestionAnswer {
    let stored = waits_of(rec)
        .first()
        .and_then(|w| rec.decisions.get(w.seq.to_string()).cloned())
        .or_else(|| rec.decisions.get("0").cloned())
        .and_then(|v| serde_json::from_value::<Answer>(v).ok());
    match stored {
        Some(Answer::Input { action, content }) => QuestionAnswer {
            action: serde_json::to_value(action)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_else(|| "cancel".into()),
            content,
        },
        _ => QuestionAnswer {
            action: "cancel".into(),
            content: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use toolshed_core::{
        Annotations, CatalogBuilder, Policy, Principal, Role, SharedCatalog, Tool, ToolDef,
        ToolPath,
    };
    use toolshed_store::Store;

    use super::*;
    use crate::{AnswerAction, DecisionChannel, EngineConfig, Face};

    /// An engine whose tool `up.ask` asks a question (waiting up to a minute) and answers it;
    /// calls time out after `call_timeout`.
    async fn engine(call_timeout: Duration) -> Engine {
        let mut b = CatalogBuilder::new();
        let def = ToolDef::new(ToolPath::parse("up.ask").unwrap(), "Ask", "Asks a person.")
            .with_input(json!({"type": "object"}))
            .with_annotations(Annotations::READ_ONLY);
        b.add_tool(Tool::from_fn(def, |ctx, _| async move {
            let engine = ctx.engine().expect("the engine").clone();
            engine
                .ask("Which name?", None, Duration::from_secs(60))
                .await
        }));
        let role = Role {
            id: "user".into(),
            patterns: vec!["up.**".into()],
            decide: vec!["up.**".into()],
            ..Role::default()
        };
        let alice = Principal {
            id: "alice".into(),
            roles: vec!["user".into()],
        };
        let config = EngineConfig {
            call_timeout,
            ..EngineConfig::default()
        };
        Engine::new(
            Arc::new(SharedCatalog::new(b.build().unwrap())),
            Policy::new(vec![role], vec![alice]).unwrap(),
            Store::open("sqlite::memory:").await.unwrap(),
            config,
        )
    }

    /// The id of the first question waiting, once one does.
    async fn waiting_question(e: &Engine, caller: &Caller) -> String {
        for _ in 0..100 {
            let waiting = e
                .waiting_of(caller, None, Some(QUESTION_KIND))
                .await
                .unwrap();
            if let Some(q) = waiting.first() {
                return q.execution_id.clone();
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("no question waited")
    }

    /// Waits until execution `id` has `status`; its info.
    async fn until_status(e: &Engine, caller: &Caller, id: &str, status: &str) -> Value {
        for _ in 0..100 {
            let info = e.execution(caller, id).await.unwrap();
            if info.status == status {
                return serde_json::to_value(info).unwrap();
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("execution {id} never became {status}")
    }

    #[tokio::test]
    async fn a_question_whose_call_timed_out_is_cancelled_and_cannot_be_answered() {
        let e = engine(Duration::from_millis(600)).await;
        let alice = e.caller("alice", Face::Http);
        let call = tokio::spawn({
            let (e, alice) = (e.clone(), alice.clone());
            async move { e.call(&alice, "up.ask", json!({})).await }
        });
        let id = waiting_question(&e, &alice).await;
        let err = call.await.unwrap().unwrap_err();
        assert_eq!(err.code(), "timeout", "{err}");
        // The question went with its call, long before its own minute was up.
        let info = until_status(&e, &alice, &id, "cancelled").await;
        assert_eq!(info["error"]["message"], CALL_ENDED, "{info}");
        let waiting = e.waiting_of(&alice, None, None).await.unwrap();
        assert!(waiting.is_empty(), "still listed: {waiting:?}");
        let late = e
            .answer(
                &alice,
                &id,
                "input_0",
                AnswerAction::Accept,
                Some(json!({})),
                DecisionChannel::Human(Face::Http),
            )
            .await
            .unwrap_err();
        assert_eq!(late.code(), "already_settled", "{late}");
    }

    #[tokio::test]
    async fn a_question_dropped_by_its_caller_is_cancelled() {
        let e = engine(Duration::from_secs(30)).await;
        let alice = e.caller("alice", Face::Http);
        let asking = tokio::spawn({
            let (e, alice) = (e.clone(), alice.clone());
            async move {
                e.ask_question(&alice, "up.ask", "Which?", None, Duration::from_secs(60))
                    .await
            }
        });
        let id = waiting_question(&e, &alice).await;
        // The call is cancelled (its future dropped) while the question waits.
        asking.abort();
        let info = until_status(&e, &alice, &id, "cancelled").await;
        assert_eq!(info["error"]["message"], CALL_ENDED, "{info}");
    }

    #[tokio::test]
    async fn an_unanswered_question_says_so_with_its_id_not_as_a_tool_timeout() {
        let e = engine(Duration::from_secs(30)).await;
        let alice = e.caller("alice", Face::Http);
        let err = e
            .ask_question(&alice, "up.ask", "Which?", None, Duration::from_millis(500))
            .await
            .unwrap_err();
        let EngineError::QuestionUnanswered { id, .. } = &err else {
            panic!("expected question_unanswered, got {err:?}");
        };
        let text = err.to_string();
        assert!(
            text.contains(id.as_str()) && text.contains("went unanswered within 0.5s"),
            "{text}"
        );
        assert!(
            !text.contains("tool 'up.ask'"),
            "reads as the tool's: {text}"
        );
        let info = e.execution(&alice, id).await.unwrap();
        assert_eq!(info.status, "cancelled");
        assert!(e.waiting_of(&alice, None, None).await.unwrap().is_empty());
    }
}
