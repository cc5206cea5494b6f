//! Thread memory of agent runs: a run started with a `threadId` sees the thread's newest
//! messages (`memory.lastMessages`) before its input, and, with `memory.semanticRecall`, the
//! earlier messages most like its input (with `messageRange` neighbours) in its instructions.
//! When it completes, its input and final answer are appended to the thread.
//!
//! A thread belongs to one (principal, agent) pair ([`toolshed_store::threads`]): recall with
//! `scope: "thread"` searches the run's thread, `scope: "resource"` every thread of the
//! principal with that agent. Recall ranks by the search embedder's vectors, made as messages
//! are stored; a server without an embedding model says so in the run's `memory` report and a
//! `log` event, and uses the newest messages only.
//!
//! The memory is read once, when the run starts, and kept in the stored run: a resumed run sees
//! what it saw at its start. The thread is written after the run is stored as completed; a crash
//! between the two loses that exchange from the thread rather than storing it twice.

use serde_json::{json, Value};
use toolshed_models::Message;
use toolshed_store::{NewThreadMessage, ThreadKey, ThreadMessage};

use super::RunSpec;
use crate::{Engine, EngineError};

/// Longest thread id, and its characters (it is chosen by clients).
pub const MAX_THREAD_ID: usize = 128;
/// Messages scanned for semantic recall, newest first.
const RECALL_SCAN: i64 = 5_000;
/// Longest recalled message put in the instructions, in bytes.
const MAX_RECALLED_BYTES: usize = 2_000;

/// The definition's `memory`, when enabled.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryConfig {
    pub last_messages: i64,
    pub recall: Option<Recall>,
}

/// `memory.semanticRecall`.
#[derive(Debug, Clone, PartialEq)]
pub struct Recall {
    pub top_k: usize,
    /// `scope: "resource"`: every thread of the principal with the agent.
    pub every_thread: bool,
    pub before: i64,
    pub after: i64,
}

/// The definition's memory settings; `None` when memory is not enabled.
pub fn memory_config(definition: &Value) -> Option<MemoryConfig> {
    let m = definition.get("memory")?;
    if m.get("enabled").and_then(Value::as_bool) != Some(true) {
        return None;
    }
    let num = |v: &Value, k: &str, d: i64| v.get(k).and_then(Value::as_i64).unwrap_or(d);
    let recall = m.get("semanticRecall").filter(|r| r.is_object()).map(|r| {
        let range = r.get("messageRange").cloned().unwrap_or(json!({}));
        Recall {
            top_k: num(r, "topK", 3).clamp(1, 100) as usize,
            every_thread: r.get("scope").and_then(Value::as_str) == Some("resource"),
            before: num(&range, "before", 1).clamp(0, 20),
            after: num(&range, "after", 1).clamp(0, 20),
        }
    });
    Some(MemoryConfig {
        last_messages: num(m, "lastMessages", 10).clamp(1, 200),
        recall,
    })
}

/// A thread id is 1–128 characters of letters, digits, `-`, `_`, `.` and `:`.
pub fn check_thread_id(id: &str) -> Result<(), EngineError> {
    let ok = !id.is_empty()
        && id.len() <= MAX_THREAD_ID
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'));
    match ok {
        true => Ok(()),
        false => Err(EngineError::InvalidRun(format!(
            "threadId must be 1-{MAX_THREAD_ID} characters of letters, digits, '-', '_', '.' and ':'"
        ))),
    }
}

/// What a run remembers at its start.
#[derive(Debug, Default)]
pub(crate) struct Remembered {
    pub history: Vec<Message>,
    /// The recalled messages, as text for the instructions.
    pub recalled: Option<String>,
    /// What was used, for the run's result (`memory`).
    pub report: Value,
}

impl Engine {
    /// Reads the thread's memory for a run of `agent` by `principal` with `input`.
    pub(crate) async fn remember(
        &self,
        principal: &str,
        agent: &str,
        thread: &str,
        config: &MemoryConfig,
        input: &str,
    ) -> Result<Remembered, EngineError> {
        let key = ThreadKey {
            principal,
            agent,
            thread,
        };
        let tail = self
            .inner
            .store
            .thread_tail(key, config.last_messages)
            .await?;
        let history: Vec<Message> = tail.iter().filter_map(as_message).collect();
        let mut report = json!({"threadId": thread, "messages": history.len()});
        let Some(recall) = &config.recall else {
            return Ok(Remembered {
                history,
                recalled: None,
                report,
            });
        };
        let Some(embedder) = self.inner.search.embedder() else {
            report["recall"] = json!(
                "unavailable: this server has no embedding model (semanticRecall needs the search model, see the README); only the newest messages are used"
            );
            return Ok(Remembered {
                history,
                recalled: None,
                report,
            });
        };
        let query = embed(embedder, input).await?;
        let first_shown = tail.first().map_or(i64::MAX, |m| m.seq);
        let found = self
            .recall_messages(key, recall, &query, |m| {
                m.thread_id == thread && m.seq >= first_shown
            })
            .await?;
        report["recalled"] = json!(found.len());
        let recalled = (!found.is_empty()).then(|| recalled_text(&found));
        Ok(Remembered {
            history,
            recalled,
            report,
        })
    }

    /// The `topK` stored messages most like `query` and their neighbours, in thread order,
    /// leaving out those `shown` already (the newest messages in the window).
    async fn recall_messages(
        &self,
        key: ThreadKey<'_>,
        recall: &Recall,
        query: &[f32],
        shown: impl Fn(&ThreadMessage) -> bool,
    ) -> Result<Vec<ThreadMessage>, EngineError> {
        let scope = (!recall.every_thread).then_some(key.thread);
        let mut scored: Vec<(f32, ThreadMessage)> = self
            .inner
            .store
            .thread_vectors(key.principal, key.agent, scope, RECALL_SCAN)
            .await?
            .into_iter()
            .filter(|m| !shown(m))
            .filter_map(|m| {
                let v = m.vector.as_deref()?;
                let score =
                    (v.len() == query.len()).then(|| toolshed_search::hybrid::dot(v, query))?;
                Some((score, m))
            })
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0));
        scored.truncate(recall.top_k);
        let mut found: Vec<ThreadMessage> = Vec::new();
        for (_, hit) in scored {
            let around = ThreadKey {
                thread: &hit.thread_id,
                ..key
            };
            let range = self
                .inner
                .store
                .thread_range(around, hit.seq - recall.before, hit.seq + recall.after)
                .await?;
            for m in range {
                if !shown(&m)
                    && !found
                        .iter()
                        .any(|f| f.thread_id == m.thread_id && f.seq == m.seq)
                {
                    found.push(m);
                }
            }
        }
        found.sort_by(|a, b| (&a.thread_id, a.seq).cmp(&(&b.thread_id, b.seq)));
        Ok(found)
    }

    /// Appends a completed run's input and answer to its thread (with their vectors when the
    /// server has an embedding model), once per `execution_id` (the writer: see
    /// [`toolshed_store::Store::append_thread`]). A failure is logged: the run's result stands.
    pub(crate) async fn memorize(
        &self,
        spec: &RunSpec,
        principal: &str,
        execution_id: &str,
        output: &str,
    ) {
        let Some(thread) = spec.thread.as_deref() else {
            return;
        };
        let vectors = match self.inner.search.embedder() {
            Some(embedder) => {
                let (a, b) = (
                    embed(embedder.clone(), &spec.input).await,
                    embed(embedder, output).await,
                );
                a.ok().zip(b.ok())
            }
            None => None,
        };
        let messages = [
            NewThreadMessage {
                role: "user",
                content: &spec.input,
                vector: vectors.as_ref().map(|v| v.0.as_slice()),
            },
            NewThreadMessage {
                role: "assistant",
                content: output,
                vector: vectors.as_ref().map(|v| v.1.as_slice()),
            },
        ];
        let key = ThreadKey {
            principal,
            agent: &spec.agent,
            thread,
        };
        if let Err(e) = self
            .inner
            .store
            .append_thread(key, execution_id, &messages)
            .await
        {
            tracing::warn!(execution = %execution_id, error = %e, "the run's messages could not be added to its thread");
        }
    }
}

/// Embeds a text on a blocking thread (the model is CPU-bound).
async fn embed(
    embedder: std::sync::Arc<dyn toolshed_search::TextEmbedder>,
    text: &str,
) -> Result<Vec<f32>, EngineError> {
    let text = text.to_string();
    tokio::task::spawn_blocking(move || embedder.embed_text(&text))
        .await
        .map_err(|e| EngineError::InvalidRun(format!("embedding stopped: {e}")))?
        .map_err(|e| EngineError::InvalidRun(format!("semantic recall: {e}")))
}

fn as_message(m: &ThreadMessage) -> Option<Message> {
    match m.role.as_str() {
        "user" => Some(Message::User {
            content: m.content.clone(),
        }),
        "assistant" => Some(Message::Assistant {
            content: m.content.clone(),
            tool_calls: vec![],
        }),
        _ => None,
    }
}

/// The recalled messages as a block of the instructions.
fn recalled_text(found: &[ThreadMessage]) -> String {
    let mut out = String::from(
        "Messages recalled from earlier conversations with this user (most relevant to the new message, with their neighbours):",
    );
    for m in found {
        let content = &m.content[..m.content.floor_char_boundary(MAX_RECALLED_BYTES)];
        out.push_str(&format!(
            "\n[thread {} #{}, {}] {}",
            m.thread_id, m.seq, m.role, content
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_read_with_defaults_and_bounds() {
        assert_eq!(memory_config(&json!({})), None);
        assert_eq!(memory_config(&json!({"memory": {"enabled": false}})), None);
        let c = memory_config(&json!({"memory": {"enabled": true}})).unwrap();
        assert_eq!((c.last_messages, c.recall), (10, None));
        let c = memory_config(&json!({"memory": {"enabled": true, "lastMessages": 500,
            "semanticRecall": {"topK": 2, "scope": "resource", "messageRange": {"before": 0, "after": 2}}}}))
        .unwrap();
        assert_eq!(c.last_messages, 200);
        assert_eq!(
            c.recall,
            Some(Recall {
                top_k: 2,
                every_thread: true,
                before: 0,
                after: 2
            })
        );
    }

    #[test]
    fn thread_ids_are_checked() {
        assert!(check_thread_id("chat-42:a.b_c").is_ok());
        for bad in ["", "a b", "x/y", &"t".repeat(129)] {
            let e = check_thread_id(bad).unwrap_err();
            assert!(e.to_string().contains("threadId"), "{e}");
        }
    }
}
