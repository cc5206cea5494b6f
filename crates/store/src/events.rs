//! Stored execution events: numbered per execution (`id` 1, 2, ...), kept as JSON. Appends that
//! repeat an id are ignored, so a batch written twice (a retry) stores each event once.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sqlx::Row;

use crate::{Result, Store, StoreError};

/// One stored event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredEvent {
    pub execution_id: String,
    pub id: i64,
    pub ts: i64,
    /// The event's type (`started`, `tool_call`, ...).
    pub kind: String,
    /// The whole event as JSON (its type included).
    pub data: Value,
}

impl Store {
    /// Appends events (ids already assigned); ids already stored are skipped.
    pub async fn append_events(&self, events: &[StoredEvent]) -> Result<()> {
        if events.is_empty() {
            return Ok(());
        }
        let mut tx = self.pool.begin().await.map_err(|e| self.classify(e))?;
        for e in events {
            sqlx::query(
                "INSERT INTO execution_events (execution_id, id, ts, type, data) VALUES ($1, $2, $3, $4, $5) \
                 ON CONFLICT (execution_id, id) DO NOTHING",
            )
            .bind(&e.execution_id)
            .bind(e.id)
            .bind(e.ts)
            .bind(&e.kind)
            .bind(e.data.to_string())
            .execute(&mut *tx)
            .await
            .map_err(|e| self.classify(e))?;
        }
        tx.commit().await.map_err(|e| self.classify(e))?;
        Ok(())
    }

    /// Events of `execution_id` with an id above `after`, in order, at most `limit`.
    pub async fn events_after(
        &self,
        execution_id: &str,
        after: i64,
        limit: i64,
    ) -> Result<Vec<StoredEvent>> {
        let rows = sqlx::query(
            "SELECT id, ts, type, data FROM execution_events WHERE execution_id = $1 AND id > $2 ORDER BY id LIMIT $3",
        )
        .bind(execution_id)
        .bind(after)
        .bind(limit)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| self.classify(e))?;
        rows.iter()
            .map(|r| {
                let id: i64 = r.try_get("id")?;
                let text: String = r.try_get("data")?;
                Ok(StoredEvent {
                    execution_id: execution_id.to_string(),
                    id,
                    ts: r.try_get("ts")?,
                    kind: r.try_get("type")?,
                    data: serde_json::from_str(&text).map_err(|e| StoreError::Malformed {
                        what: format!("event {id} of execution {execution_id}"),
                        reason: e.to_string(),
                    })?,
                })
            })
            .collect()
    }

    /// The highest event id of `execution_id` (0 without events).
    pub async fn last_event_id(&self, execution_id: &str) -> Result<i64> {
        let row = sqlx::query(
            "SELECT COALESCE(MAX(id), 0) AS last FROM execution_events WHERE execution_id = $1",
        )
        .bind(execution_id)
        .fetch_one(&self.pool)
        .await
        .map_err(|e| self.classify(e))?;
        Ok(row.try_get("last")?)
    }

    /// Deletes events older than `before_ms` (except those of executions still paused or
    /// running, which a reader may replay), and settled executions (completed, failed, expired,
    /// cancelled) last changed before it, with their journals. Returns (events, executions)
    /// deleted.
    pub async fn purge_executions_before(&self, before_ms: i64) -> Result<(u64, u64)> {
        let events = sqlx::query(
            "DELETE FROM execution_events WHERE ts < $1 AND execution_id NOT IN \
             (SELECT id FROM executions WHERE status IN ('paused', 'running'))",
        )
        .bind(before_ms)
        .execute(&self.pool)
        .await
        .map_err(|e| self.classify(e))?
        .rows_affected();
        let executions = sqlx::query(
            "DELETE FROM executions WHERE updated_at < $1 AND status IN ('completed', 'failed', 'expired', 'cancelled')",
        )
        .bind(before_ms)
        .execute(&self.pool)
        .await
        .map_err(|e| self.classify(e))?
        .rows_affected();
        Ok((events, executions))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ev(id: i64, ts: i64) -> StoredEvent {
        StoredEvent {
            execution_id: "e".into(),
            id,
            ts,
            kind: "log".into(),
            data: json!({"type": "log", "n": id}),
        }
    }

    #[tokio::test]
    async fn append_read_after_and_purge() {
        let s = Store::open("sqlite::memory:").await.unwrap();
        s.append_events(&[ev(1, 10), ev(2, 20), ev(3, 30)])
            .await
            .unwrap();
        s.append_events(&[ev(3, 30), ev(4, 40)]).await.unwrap();
        let after = s.events_after("e", 1, 10).await.unwrap();
        assert_eq!(after.iter().map(|e| e.id).collect::<Vec<_>>(), [2, 3, 4]);
        assert_eq!(after[0].data["n"], 2);
        assert_eq!(s.last_event_id("e").await.unwrap(), 4);
        assert_eq!(s.last_event_id("nope").await.unwrap(), 0);
        assert_eq!(s.purge_executions_before(25).await.unwrap().0, 2);
        assert_eq!(s.events_after("e", 0, 10).await.unwrap().len(), 2);
    }
}
