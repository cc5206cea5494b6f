//! The audit log: who called what, with which (redacted) arguments, how it ended and how long it
//! took. Entries are appended in batches by the engine's background writer.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sqlx::Row;

use crate::{Result, Store};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditEntry {
    pub id: String,
    pub ts: i64,
    pub principal: String,
    /// Which face the call came through: `mcp`, `http`, `cli`, `script`.
    pub face: String,
    pub path: String,
    pub execution_id: Option<String>,
    /// Arguments as JSON text, with secrets redacted.
    pub args: String,
    /// `ok`, `error`, `denied`, `paused`, `invalid`, `not_found`, `timeout`.
    pub outcome: String,
    pub error: Option<String>,
    pub duration_us: i64,
}

impl Store {
    /// Appends entries in one transaction.
    pub async fn append_audit(&self, entries: &[AuditEntry]) -> Result<()> {
        if entries.is_empty() {
            return Ok(());
        }
        let mut tx = self.pool.begin().await.map_err(|e| self.classify(e))?;
        for e in entries {
            sqlx::query(
                "INSERT INTO audit (id, ts, principal, face, path, execution_id, args, outcome, error, duration_us) \
                 VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10)",
            )
            .bind(&e.id)
            .bind(e.ts)
            .bind(&e.principal)
            .bind(&e.face)
            .bind(&e.path)
            .bind(&e.execution_id)
            .bind(&e.args)
            .bind(&e.outcome)
            .bind(&e.error)
            .bind(e.duration_us)
            .execute(&mut *tx)
            .await
            .map_err(|e| self.classify(e))?;
        }
        tx.commit().await.map_err(|e| self.classify(e))?;
        Ok(())
    }

    /// Deletes the entries older than `cutoff_ms` (milliseconds since the epoch); returns how
    /// many went.
    pub async fn purge_audit_before(&self, cutoff_ms: i64) -> Result<u64> {
        let done = sqlx::query("DELETE FROM audit WHERE ts < $1")
            .bind(cutoff_ms)
            .execute(&self.pool)
            .await
            .map_err(|e| self.classify(e))?;
        Ok(done.rows_affected())
    }

    /// The newest entries first.
    pub async fn recent_audit(&self, limit: i64) -> Result<Vec<AuditEntry>> {
        self.recent_audit_of(None, limit).await
    }

    /// The newest entries first, only those of `principal` when given (an empty id matches
    /// only entries stored with an empty id, never all of them).
    pub async fn recent_audit_of(
        &self,
        principal: Option<&str>,
        limit: i64,
    ) -> Result<Vec<AuditEntry>> {
        let rows = sqlx::query(
            "SELECT id, ts, principal, face, path, execution_id, args, outcome, error, duration_us \
             FROM audit WHERE ($1 = 'any' OR principal = $2) ORDER BY ts DESC, id DESC LIMIT $3",
        )
        .bind(if principal.is_some() { "one" } else { "any" })
        .bind(principal.unwrap_or(""))
        .bind(limit)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| self.classify(e))?;
        rows.iter()
            .map(|r| {
                Ok(AuditEntry {
                    id: r.try_get("id")?,
                    ts: r.try_get("ts")?,
                    principal: r.try_get("principal")?,
                    face: r.try_get("face")?,
                    path: r.try_get("path")?,
                    execution_id: r.try_get("execution_id")?,
                    args: r.try_get("args")?,
                    outcome: r.try_get("outcome")?,
                    error: r.try_get("error")?,
                    duration_us: r.try_get("duration_us")?,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn append_and_read_back() {
        let s = Store::open("sqlite::memory:").await.unwrap();
        let e = AuditEntry {
            id: "1".into(),
            ts: 5,
            principal: "p".into(),
            face: "cli".into(),
            path: "a.b".into(),
            execution_id: None,
            args: "{}".into(),
            outcome: "ok".into(),
            error: None,
            duration_us: 12,
        };
        let mut e2 = e.clone();
        e2.id = "2".into();
        e2.ts = 6;
        s.append_audit(&[e.clone(), e2.clone()]).await.unwrap();
        assert_eq!(
            s.recent_audit(10).await.unwrap(),
            vec![e2.clone(), e.clone()]
        );
        let mut other = e.clone();
        other.id = "3".into();
        other.principal = "q".into();
        s.append_audit(&[other.clone()]).await.unwrap();
        assert_eq!(s.recent_audit_of(Some("p"), 10).await.unwrap(), vec![e2, e]);
        assert_eq!(s.recent_audit_of(Some("q"), 10).await.unwrap(), vec![other]);
        assert_eq!(s.recent_audit_of(None, 1).await.unwrap().len(), 1);
        assert!(
            s.recent_audit_of(Some(""), 10).await.unwrap().is_empty(),
            "an empty principal id is nobody, not everybody"
        );
    }

    /// Entries older than the cutoff are purged; newer ones stay.
    #[tokio::test]
    async fn old_entries_are_purged() {
        let s = Store::open("sqlite::memory:").await.unwrap();
        let day = 24 * 3600 * 1000;
        let now = crate::now_ms();
        let entry = |id: &str, ts: i64| AuditEntry {
            id: id.into(),
            ts,
            principal: "p".into(),
            face: "cli".into(),
            path: "a.b".into(),
            execution_id: None,
            args: "{}".into(),
            outcome: "ok".into(),
            error: None,
            duration_us: 1,
        };
        s.append_audit(&[
            entry("ancient", now - 400 * day),
            entry("old", now - 91 * day),
            entry("recent", now - 89 * day),
            entry("today", now),
        ])
        .await
        .unwrap();
        assert_eq!(s.purge_audit_before(now - 90 * day).await.unwrap(), 2);
        let mut kept: Vec<String> = s
            .recent_audit(10)
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.id)
            .collect();
        kept.sort();
        assert_eq!(kept, ["recent", "today"]);
        assert_eq!(s.purge_audit_before(now - 90 * day).await.unwrap(), 0);
    }
}
