//! Agent thread memory: the user and assistant messages of each thread, in order, with their
//! embeddings when the server had a model to make them.
//!
//! A thread belongs to one `(principal, agent)` pair: every read and write names both, so one
//! principal can never read another's thread, whatever id it passes. Each thread keeps its
//! newest [`MAX_THREAD_MESSAGES`] messages; a message is cut to [`MAX_MESSAGE_BYTES`].

use base64::Engine as _;
use sqlx::Row;

use crate::{now_ms, Result, Store};

/// Messages one thread keeps; older ones are deleted as new ones arrive.
pub const MAX_THREAD_MESSAGES: i64 = 1_000;
/// Longest message stored, in bytes (cut at a character boundary).
pub const MAX_MESSAGE_BYTES: usize = 32 * 1024;
/// Attempts at an append that raced another append to the same thread.
const APPEND_ATTEMPTS: usize = 5;

/// A stored message.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadMessage {
    pub thread_id: String,
    /// Position in its thread, from 1.
    pub seq: i64,
    /// `user` or `assistant`.
    pub role: String,
    pub content: String,
    pub vector: Option<Vec<f32>>,
}

/// A message to append.
#[derive(Debug, Clone, Copy)]
pub struct NewThreadMessage<'a> {
    pub role: &'a str,
    pub content: &'a str,
    pub vector: Option<&'a [f32]>,
}

/// Who a thread belongs to, and its id.
#[derive(Debug, Clone, Copy)]
pub struct ThreadKey<'a> {
    pub principal: &'a str,
    pub agent: &'a str,
    pub thread: &'a str,
}

fn encode(v: &[f32]) -> String {
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn decode(s: &str) -> Option<Vec<f32>> {
    let bytes = base64::engine::general_purpose::STANDARD.decode(s).ok()?;
    (bytes.len() % 4 == 0).then(|| {
        bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    })
}

fn cut(s: &str) -> &str {
    &s[..s.floor_char_boundary(MAX_MESSAGE_BYTES)]
}

fn message(row: &sqlx::any::AnyRow) -> Result<ThreadMessage> {
    let vector: Option<String> = row.try_get("vector")?;
    Ok(ThreadMessage {
        thread_id: row.try_get("thread_id")?,
        seq: row.try_get("seq")?,
        role: row.try_get("role")?,
        content: row.try_get("content")?,
        vector: vector.as_deref().and_then(decode),
    })
}

const COLUMNS: &str = "thread_id, seq, role, content, vector";

impl Store {
    /// Appends messages to a thread (created by its first message), after the newest one, and
    /// drops what falls beyond [`MAX_THREAD_MESSAGES`]. Two appends to one thread at once both
    /// land, one after the other. `writer` names what wrote them (a run's execution id, or a
    /// sub-agent call's key within its execution): a second append by the same writer (a
    /// replay after a crash) adds nothing.
    pub async fn append_thread(
        &self,
        key: ThreadKey<'_>,
        writer: &str,
        messages: &[NewThreadMessage<'_>],
    ) -> Result<()> {
        let mut last = None;
        for _ in 0..APPEND_ATTEMPTS {
            match self.try_append(key, writer, messages).await {
                Ok(()) => return Ok(()),
                Err(e) if is_conflict(&e) => last = Some(e),
                Err(e) => return Err(self.classify(e)),
            }
        }
        Err(self.classify(last.expect("at least one attempt")))
    }

    async fn try_append(
        &self,
        key: ThreadKey<'_>,
        execution_id: &str,
        messages: &[NewThreadMessage<'_>],
    ) -> std::result::Result<(), sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        let written = sqlx::query(
            "SELECT 1 FROM thread_messages \
             WHERE principal = $1 AND agent = $2 AND thread_id = $3 AND execution_id = $4 LIMIT 1",
        )
        .bind(key.principal)
        .bind(key.agent)
        .bind(key.thread)
        .bind(execution_id)
        .fetch_optional(&mut *tx)
        .await?;
        if written.is_some() {
            return Ok(());
        }
        let row = sqlx::query(
            "SELECT COALESCE(MAX(seq), 0) AS top FROM thread_messages \
             WHERE principal = $1 AND agent = $2 AND thread_id = $3",
        )
        .bind(key.principal)
        .bind(key.agent)
        .bind(key.thread)
        .fetch_one(&mut *tx)
        .await?;
        let mut seq: i64 = row.try_get("top")?;
        let now = now_ms();
        for m in messages {
            seq += 1;
            sqlx::query(
                "INSERT INTO thread_messages \
                 (principal, agent, thread_id, seq, role, content, vector, execution_id, created_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            )
            .bind(key.principal)
            .bind(key.agent)
            .bind(key.thread)
            .bind(seq)
            .bind(m.role)
            .bind(cut(m.content))
            .bind(m.vector.map(encode))
            .bind(execution_id)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        }
        sqlx::query(
            "DELETE FROM thread_messages \
             WHERE principal = $1 AND agent = $2 AND thread_id = $3 AND seq <= $4",
        )
        .bind(key.principal)
        .bind(key.agent)
        .bind(key.thread)
        .bind(seq - MAX_THREAD_MESSAGES)
        .execute(&mut *tx)
        .await?;
        tx.commit().await
    }

    /// The newest `n` messages of a thread, oldest first (none for a thread never written).
    pub async fn thread_tail(&self, key: ThreadKey<'_>, n: i64) -> Result<Vec<ThreadMessage>> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM thread_messages \
             WHERE principal = $1 AND agent = $2 AND thread_id = $3 ORDER BY seq DESC LIMIT $4"
        )))
        .bind(key.principal)
        .bind(key.agent)
        .bind(key.thread)
        .bind(n.max(0))
        .fetch_all(&self.pool)
        .await
        .map_err(|e| self.classify(e))?;
        let mut out = rows.iter().map(message).collect::<Result<Vec<_>>>()?;
        out.reverse();
        Ok(out)
    }

    /// Messages of one thread (or, `thread` `None`, of every thread of the principal with the
    /// agent) that carry a vector, newest first, at most `limit`; without their content.
    pub async fn thread_vectors(
        &self,
        principal: &str,
        agent: &str,
        thread: Option<&str>,
        limit: i64,
    ) -> Result<Vec<ThreadMessage>> {
        let only_thread = if thread.is_some() {
            "AND thread_id = $3"
        } else {
            "AND $3 = $3"
        };
        // The content is left out: recall scores vectors, then reads the few it keeps.
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT thread_id, seq, role, '' AS content, vector FROM thread_messages \
             WHERE principal = $1 AND agent = $2 {only_thread} AND vector IS NOT NULL \
             ORDER BY created_at DESC, seq DESC LIMIT $4"
        )))
        .bind(principal)
        .bind(agent)
        .bind(thread.unwrap_or_default())
        .bind(limit.max(0))
        .fetch_all(&self.pool)
        .await
        .map_err(|e| self.classify(e))?;
        rows.iter().map(message).collect()
    }

    /// Messages `from..=to` of a thread, oldest first.
    pub async fn thread_range(
        &self,
        key: ThreadKey<'_>,
        from: i64,
        to: i64,
    ) -> Result<Vec<ThreadMessage>> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM thread_messages \
             WHERE principal = $1 AND agent = $2 AND thread_id = $3 AND seq >= $4 AND seq <= $5 \
             ORDER BY seq"
        )))
        .bind(key.principal)
        .bind(key.agent)
        .bind(key.thread)
        .bind(from)
        .bind(to)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| self.classify(e))?;
        rows.iter().map(message).collect()
    }
}

/// Another append took the same position first (or held the database a moment).
fn is_conflict(e: &sqlx::Error) -> bool {
    let text = e.to_string();
    e.as_database_error()
        .is_some_and(|d| d.is_unique_violation())
        || text.contains("UNIQUE constraint failed")
        || text.contains("duplicate key")
        || text.contains("database is locked")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key<'a>(principal: &'a str, thread: &'a str) -> ThreadKey<'a> {
        ThreadKey {
            principal,
            agent: "helper",
            thread,
        }
    }

    fn msg<'a>(role: &'a str, content: &'a str, vector: Option<&'a [f32]>) -> NewThreadMessage<'a> {
        NewThreadMessage {
            role,
            content,
            vector,
        }
    }

    #[tokio::test]
    async fn threads_keep_order_owner_and_bounds() {
        let store = Store::open("sqlite::memory:").await.unwrap();
        let v = [0.6f32, 0.8];
        store
            .append_thread(
                key("alice", "t1"),
                "ex_1",
                &[msg("user", "hi", Some(&v)), msg("assistant", "hello", None)],
            )
            .await
            .unwrap();
        store
            .append_thread(key("alice", "t1"), "ex_2", &[msg("user", "again", None)])
            .await
            .unwrap();
        // The same writer again (a replay after a crash): nothing is added.
        store
            .append_thread(key("alice", "t1"), "ex_2", &[msg("user", "again", None)])
            .await
            .unwrap();
        let tail = store.thread_tail(key("alice", "t1"), 2).await.unwrap();
        let texts: Vec<(&str, i64)> = tail.iter().map(|m| (m.content.as_str(), m.seq)).collect();
        assert_eq!(texts, [("hello", 2), ("again", 3)]);
        // Another principal's thread of the same id is another thread.
        assert!(store
            .thread_tail(key("bob", "t1"), 10)
            .await
            .unwrap()
            .is_empty());
        let vectors = store
            .thread_vectors("alice", "helper", None, 10)
            .await
            .unwrap();
        assert_eq!(vectors.len(), 1);
        assert_eq!(vectors[0].vector.as_deref(), Some(&v[..]));
        assert!(store
            .thread_vectors("alice", "helper", Some("t2"), 10)
            .await
            .unwrap()
            .is_empty());
        let range = store.thread_range(key("alice", "t1"), 1, 2).await.unwrap();
        assert_eq!(range.len(), 2);
        // A long message is cut; the thread keeps its newest MAX_THREAD_MESSAGES.
        let long = "é".repeat(MAX_MESSAGE_BYTES);
        store
            .append_thread(key("alice", "t3"), "ex_3", &[msg("user", &long, None)])
            .await
            .unwrap();
        let got = store.thread_tail(key("alice", "t3"), 1).await.unwrap();
        assert!(got[0].content.len() <= MAX_MESSAGE_BYTES);
        let many: Vec<String> = (0..MAX_THREAD_MESSAGES + 5)
            .map(|i| format!("m{i}"))
            .collect();
        let batch: Vec<NewThreadMessage> = many.iter().map(|m| msg("user", m, None)).collect();
        store
            .append_thread(key("alice", "t4"), "ex_4", &batch)
            .await
            .unwrap();
        let all = store
            .thread_tail(key("alice", "t4"), MAX_THREAD_MESSAGES * 2)
            .await
            .unwrap();
        assert_eq!(all.len() as i64, MAX_THREAD_MESSAGES);
        assert_eq!(all[0].content, "m5");
    }

    #[tokio::test]
    async fn concurrent_appends_to_one_thread_both_land() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_dir(dir.path()).await.unwrap();
        let first = [msg("user", "a1", None), msg("assistant", "a2", None)];
        let second = [msg("user", "b1", None), msg("assistant", "b2", None)];
        let (a, b) = tokio::join!(
            store.append_thread(key("alice", "t"), "ex_a", &first),
            store.append_thread(key("alice", "t"), "ex_b", &second),
        );
        a.unwrap();
        b.unwrap();
        let all = store.thread_tail(key("alice", "t"), 10).await.unwrap();
        let seqs: Vec<i64> = all.iter().map(|m| m.seq).collect();
        assert_eq!(seqs, [1, 2, 3, 4]);
        // Each append's messages stay together.
        let texts: Vec<&str> = all.iter().map(|m| m.content.as_str()).collect();
        assert!(
            texts == ["a1", "a2", "b1", "b2"] || texts == ["b1", "b2", "a1", "a2"],
            "{texts:?}"
        );
    }
}

/// The same checks on PostgreSQL, when one is reachable (see [`crate::pg_test`]).
#[cfg(test)]
mod postgres_tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn threads_on_postgres() {
        crate::pg_test::with_postgres("threads", |store| async move {
            let key = |thread| ThreadKey {
                principal: "alice",
                agent: "helper",
                thread,
            };
            let v = [1.0f32, 0.0];
            let first = [
                NewThreadMessage {
                    role: "user",
                    content: "a1",
                    vector: Some(&v),
                },
                NewThreadMessage {
                    role: "assistant",
                    content: "a2",
                    vector: None,
                },
            ];
            let second = [
                NewThreadMessage {
                    role: "user",
                    content: "b1",
                    vector: None,
                },
                NewThreadMessage {
                    role: "assistant",
                    content: "b2",
                    vector: None,
                },
            ];
            let (a, b) = tokio::join!(
                store.append_thread(key("t"), "ex_a", &first),
                store.append_thread(key("t"), "ex_b", &second),
            );
            a.unwrap();
            b.unwrap();
            let all = store.thread_tail(key("t"), 10).await.unwrap();
            assert_eq!(all.iter().map(|m| m.seq).collect::<Vec<_>>(), [1, 2, 3, 4]);
            let vectors = store
                .thread_vectors("alice", "helper", Some("t"), 10)
                .await
                .unwrap();
            assert_eq!(vectors[0].vector.as_deref(), Some(&v[..]));
            assert!(store
                .thread_vectors("bob", "helper", None, 10)
                .await
                .unwrap()
                .is_empty());
        })
        .await;
    }
}
