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

/// Rows of one audit `INSERT` (10 parameters each: well within the parameter limits of SQLite
/// and PostgreSQL). One statement per entry made each entry a round trip to the database.
const ROWS_PER_INSERT: usize = 64;

/// `INSERT INTO audit ... VALUES` with `rows` rows of parameters: numbered (`$1`) for
/// PostgreSQL, anonymous (`?`) for SQLite, which looks a numbered parameter up by a scan of
/// all of them (binding a statement of many would take time quadratic in their number).
fn insert_rows(rows: usize, numbered: bool) -> String {
    let mut sql = String::from(
        "INSERT INTO audit (id, ts, principal, face, path, execution_id, args, outcome, error, duration_us) VALUES ",
    );
    for row in 0..rows {
        if row > 0 {
            sql.push(',');
        }
        sql.push('(');
        for col in 0..10 {
            if col > 0 {
                sql.push(',');
            }
            if numbered {
                sql.push_str(&format!("${}", row * 10 + col + 1));
            } else {
                sql.push('?');
            }
        }
        sql.push(')');
    }
    sql
}

impl Store {
    /// Appends entries in one transaction, [`ROWS_PER_INSERT`] rows per statement.
    pub async fn append_audit(&self, entries: &[AuditEntry]) -> Result<()> {
        if entries.is_empty() {
            return Ok(());
        }
        let mut tx = self.pool.begin().await.map_err(|e| self.classify(e))?;
        for chunk in entries.chunks(ROWS_PER_INSERT) {
            let sql = insert_rows(chunk.len(), self.backend() == crate::Backend::Postgres);
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
            for e in chunk {
                query = query
                    .bind(&e.id)
                    .bind(e.ts)
                    .bind(&e.principal)
                    .bind(&e.face)
                    .bind(&e.path)
                    .bind(&e.execution_id)
                    .bind(&e.args)
                    .bind(&e.outcome)
                    .bind(&e.error)
                    .bind(e.duration_us);
            }
            query
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

    /// Batches of several statements (the last one partial) land whole and in order, with
    /// every field, on SQLite and, where one runs, PostgreSQL.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn large_batches_are_written_whole() {
        let batch: Vec<AuditEntry> = (0..(2 * ROWS_PER_INSERT + 7))
            .map(|i| AuditEntry {
                id: format!("e{i:04}"),
                ts: i as i64,
                principal: format!("p{}", i % 3),
                face: "mcp".into(),
                path: format!("a.t{i}"),
                execution_id: (i % 2 == 0).then(|| format!("ex_{i}")),
                args: format!("{{\"i\":{i}}}"),
                outcome: "ok".into(),
                error: (i % 5 == 0).then(|| format!("error {i}")),
                duration_us: 10 * i as i64,
            })
            .collect();
        let check = |store: Store, batch: Vec<AuditEntry>| async move {
            store.append_audit(&batch).await.unwrap();
            let mut back = store.recent_audit(1_000).await.unwrap();
            back.reverse();
            assert_eq!(back, batch);
        };
        check(Store::open("sqlite::memory:").await.unwrap(), batch.clone()).await;
        let on_pg = batch.clone();
        crate::pg_test::with_postgres("audit batches", move |store| check(store, on_pg)).await;
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
