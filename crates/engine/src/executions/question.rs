//! Questions asked during a call that cannot pause (a relayed upstream's `elicitation/create`
//! whose client cannot take it): the question becomes a stored execution of kind `question`
//! with one `input` wait, listed and answered like any other wait, from any session or face,
//! by whoever may answer the owner's questions. The call that asked waits for the answer in
//! this process; answering settles the execution without running anything.

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
    /// any `input` wait; unanswered in time, it is cancelled and the call hears so.
    pub async fn ask_question(
        &self,
        caller: &Caller,
        path: &str,
        message: &str,
        schema: Option<Value>,
        timeout: Duration,
    ) -> Result<QuestionAnswer, EngineError> {
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
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            tokio::time::sleep(POLL).await;
            let Some(now) = self.inner.store.get_execution(&id).await? else {
                return Err(EngineError::UnknownExecution { id });
            };
            match now.status {
                ExecutionStatus::Completed => return Ok(answer_of(&now)),
                ExecutionStatus::Paused if tokio::time::Instant::now() < deadline => {}
                ExecutionStatus::Paused => {
                    self.cancel_question(now).await;
                    return Err(EngineError::Timeout {
                        path: path.to_string(),
                        after: timeout,
                    });
                }
                other => {
                    return Ok(QuestionAnswer {
                        action: "cancel".into(),
                        content: Some(json!({"status": other.as_str()})),
                    })
                }
            }
        }
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

    /// Cancels a question nobody answered in time.
    async fn cancel_question(&self, mut rec: ExecutionRecord) {
        rec.status = ExecutionStatus::Cancelled;
        rec.updated_at = now_ms();
        let expected = rec.version;
        rec.version += 1;
        if let Err(e) = self.inner.store.update_execution(&rec, expected).await {
            tracing::warn!(execution = %rec.id, "cancelling an unanswered question: {e}");
        }
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
