//! Durable executions: a paused script or call with its journal of completed calls, the pending
//! call awaiting approval, and the decisions taken so far.
//!
//! Updates use optimistic concurrency (`version`): whoever resumes an execution first claims it,
//! which keeps two sessions or two replicas from settling it twice.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sqlx::{AssertSqlSafe, Row};

use crate::{Result, Store, StoreError};

/// Where an execution stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecutionStatus {
    /// Being run right now (claimed by a resume).
    Running,
    /// Waiting for a human decision.
    Paused,
    Completed,
    Failed,
    /// Paused for longer than allowed.
    Expired,
    /// Stopped on request while running or paused.
    Cancelled,
}

impl ExecutionStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Paused => "paused",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Expired => "expired",
            Self::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "running" => Self::Running,
            "paused" => Self::Paused,
            "completed" => Self::Completed,
            "failed" => Self::Failed,
            "expired" => Self::Expired,
            "cancelled" => Self::Cancelled,
            _ => return None,
        })
    }

    /// Completed, failed, expired and cancelled executions never change again.
    pub fn is_settled(self) -> bool {
        matches!(
            self,
            Self::Completed | Self::Failed | Self::Expired | Self::Cancelled
        )
    }
}

/// One stored execution. JSON fields are opaque to the store; the engine owns their shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecutionRecord {
    pub id: String,
    pub principal: String,
    /// `script`, `call` or `run`.
    pub kind: String,
    /// The script text, or the JSON of a single call.
    pub source: String,
    pub seed: i64,
    pub now_ms: i64,
    pub status: ExecutionStatus,
    pub pending: Option<Value>,
    pub journal: Value,
    pub decisions: Value,
    pub result: Option<Value>,
    pub error: Option<Value>,
    pub logs: Value,
    /// Engine-owned facts about the execution that do not change while it runs (declared client
    /// tools, the runtime that journaled it); `{}` when there are none.
    #[serde(default)]
    pub meta: Value,
    pub created_at: i64,
    pub updated_at: i64,
    pub expires_at: Option<i64>,
    pub version: i64,
}

impl ExecutionRecord {
    /// A new execution of `kind`, running since `now` (ms), not yet stored (`version` 0) and
    /// with nothing journaled, answered or settled.
    pub fn new_running(
        id: String,
        principal: &str,
        kind: &str,
        source: String,
        meta: Value,
        now: i64,
    ) -> Self {
        Self {
            id,
            principal: principal.to_string(),
            kind: kind.to_string(),
            source,
            seed: 0,
            now_ms: now,
            status: ExecutionStatus::Running,
            pending: None,
            journal: Value::Array(vec![]),
            decisions: Value::Object(Default::default()),
            result: None,
            error: None,
            logs: Value::Array(vec![]),
            meta,
            created_at: now,
            updated_at: now,
            expires_at: None,
            version: 0,
        }
    }
}

fn json_text(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}

fn opt_json_text(v: &Option<Value>) -> Option<String> {
    v.as_ref().map(json_text)
}

fn parse_json(what: &str, s: &str) -> Result<Value> {
    serde_json::from_str(s).map_err(|e| StoreError::Malformed {
        what: what.to_string(),
        reason: e.to_string(),
    })
}

const COLUMNS: &str = "id, principal, kind, source, seed, now_ms, status, pending, journal, decisions, result, error, logs, meta, created_at, updated_at, expires_at, version";

fn from_row(row: &sqlx::any::AnyRow) -> Result<ExecutionRecord> {
    let id: String = row.try_get("id")?;
    let what = |f: &str| format!("execution {id} field {f}");
    let status: String = row.try_get("status")?;
    let opt = |f: &str| -> Result<Option<Value>> {
        let s: Option<String> = row.try_get(f)?;
        s.map(|s| parse_json(&what(f), &s)).transpose()
    };
    Ok(ExecutionRecord {
        principal: row.try_get("principal")?,
        kind: row.try_get("kind")?,
        source: row.try_get("source")?,
        seed: row.try_get("seed")?,
        now_ms: row.try_get("now_ms")?,
        status: ExecutionStatus::parse(&status).ok_or_else(|| StoreError::Malformed {
            what: what("status"),
            reason: format!("unknown status '{status}'"),
        })?,
        pending: opt("pending")?,
        journal: parse_json(&what("journal"), &row.try_get::<String, _>("journal")?)?,
        decisions: parse_json(&what("decisions"), &row.try_get::<String, _>("decisions")?)?,
        result: opt("result")?,
        error: opt("error")?,
        logs: parse_json(&what("logs"), &row.try_get::<String, _>("logs")?)?,
        meta: opt("meta")?.unwrap_or_else(|| Value::Object(Default::default())),
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
        expires_at: row.try_get("expires_at")?,
        version: row.try_get("version")?,
        id,
    })
}

/// An execution [`Store::expire_executions`] just expired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expired {
    pub id: String,
    /// `script`, `call` or `run`.
    pub kind: String,
}

impl Store {
    /// Stores a new execution.
    pub async fn insert_execution(&self, r: &ExecutionRecord) -> Result<()> {
        sqlx::query(AssertSqlSafe(format!(
            "INSERT INTO executions ({COLUMNS}) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17,$18)"
        )))
        .bind(&r.id)
        .bind(&r.principal)
        .bind(&r.kind)
        .bind(&r.source)
        .bind(r.seed)
        .bind(r.now_ms)
        .bind(r.status.as_str())
        .bind(opt_json_text(&r.pending))
        .bind(json_text(&r.journal))
        .bind(json_text(&r.decisions))
        .bind(opt_json_text(&r.result))
        .bind(opt_json_text(&r.error))
        .bind(json_text(&r.logs))
        .bind(json_text(&r.meta))
        .bind(r.created_at)
        .bind(r.updated_at)
        .bind(r.expires_at)
        .bind(r.version)
        .execute(&self.pool)
        .await
        .map_err(|e| self.classify(e))?;
        Ok(())
    }

    /// Replaces an execution if its stored version is still `expected_version`; the record's
    /// own `version` is written. Returns false when someone else changed it first.
    pub async fn update_execution(
        &self,
        r: &ExecutionRecord,
        expected_version: i64,
    ) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE executions SET status=$1, pending=$2, journal=$3, decisions=$4, result=$5, error=$6, logs=$7, \
             updated_at=$8, expires_at=$9, version=$10 WHERE id=$11 AND version=$12",
        )
        .bind(r.status.as_str())
        .bind(opt_json_text(&r.pending))
        .bind(json_text(&r.journal))
        .bind(json_text(&r.decisions))
        .bind(opt_json_text(&r.result))
        .bind(opt_json_text(&r.error))
        .bind(json_text(&r.logs))
        .bind(r.updated_at)
        .bind(r.expires_at)
        .bind(r.version)
        .bind(&r.id)
        .bind(expected_version)
        .execute(&self.pool)
        .await
        .map_err(|e| self.classify(e))?;
        Ok(done.rows_affected() == 1)
    }

    /// Marks a running execution as alive (its `updated_at` now), without a new version: a
    /// run that waits without writing (for its background tasks) is not taken for interrupted.
    /// Whether the execution was still running (and so was marked).
    pub async fn touch_execution(&self, id: &str) -> Result<bool> {
        let r = sqlx::query(
            "UPDATE executions SET updated_at = $1 WHERE id = $2 AND status = 'running'",
        )
        .bind(crate::now_ms())
        .bind(id)
        .execute(&self.pool)
        .await
        .map_err(|e| self.classify(e))?;
        Ok(r.rows_affected() > 0)
    }

    pub async fn get_execution(&self, id: &str) -> Result<Option<ExecutionRecord>> {
        let row = sqlx::query(AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM executions WHERE id = $1"
        )))
        .bind(id)
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| self.classify(e))?;
        row.as_ref().map(from_row).transpose()
    }

    /// Executions, newest first, optionally of one principal and/or one status. An empty
    /// principal id matches only executions stored with an empty id, never all of them.
    pub async fn list_executions(
        &self,
        principal: Option<&str>,
        status: Option<ExecutionStatus>,
        limit: i64,
    ) -> Result<Vec<ExecutionRecord>> {
        let rows = sqlx::query(AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM executions WHERE ($1 = 'any' OR principal = $2) AND ($3 = '' OR status = $3) \
             ORDER BY created_at DESC, id DESC LIMIT $4"
        )))
        .bind(if principal.is_some() { "one" } else { "any" })
        .bind(principal.unwrap_or(""))
        .bind(status.map(|s| s.as_str()).unwrap_or(""))
        .bind(limit)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| self.classify(e))?;
        rows.iter().map(from_row).collect()
    }

    /// Marks paused executions whose time ran out as expired; returns them.
    pub async fn expire_executions(&self, now_ms: i64) -> Result<Vec<Expired>> {
        let rows = sqlx::query(
            "UPDATE executions SET status='expired', pending=NULL, updated_at=$1, version=version+1 \
             WHERE status='paused' AND expires_at IS NOT NULL AND expires_at < $1 \
             RETURNING id, kind",
        )
        .bind(now_ms)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| self.classify(e))?;
        Ok(rows
            .iter()
            .map(|r| Expired {
                id: r.get("id"),
                kind: r.get("kind"),
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rec(id: &str) -> ExecutionRecord {
        ExecutionRecord {
            id: id.into(),
            principal: "alice".into(),
            kind: "script".into(),
            source: "return 1".into(),
            seed: 42,
            now_ms: 1000,
            status: ExecutionStatus::Paused,
            pending: Some(json!({"seq": 1, "path": "tables.delete"})),
            journal: json!([{"seq": 0, "ok": {"rows": 1}}]),
            decisions: json!({}),
            result: None,
            error: None,
            logs: json!([]),
            meta: json!({}),
            created_at: 1,
            updated_at: 1,
            expires_at: Some(10),
            version: 1,
        }
    }

    #[tokio::test]
    async fn round_trip_and_optimistic_update() {
        let s = Store::open("sqlite::memory:").await.unwrap();
        let r = rec("e1");
        s.insert_execution(&r).await.unwrap();
        assert_eq!(s.get_execution("e1").await.unwrap().unwrap(), r);
        assert!(s.get_execution("nope").await.unwrap().is_none());

        let mut claimed = r.clone();
        claimed.status = ExecutionStatus::Running;
        claimed.version = 2;
        assert!(s.update_execution(&claimed, 1).await.unwrap());
        // A second claimer with the old version loses.
        assert!(!s.update_execution(&claimed, 1).await.unwrap());
        assert_eq!(
            s.get_execution("e1").await.unwrap().unwrap().status,
            ExecutionStatus::Running
        );
    }

    #[tokio::test]
    async fn list_and_expire() {
        let s = Store::open("sqlite::memory:").await.unwrap();
        s.insert_execution(&rec("a")).await.unwrap();
        let mut b = rec("b");
        b.principal = "bob".into();
        b.expires_at = Some(1_000_000);
        s.insert_execution(&b).await.unwrap();
        assert_eq!(
            s.list_executions(Some("alice"), None, 10)
                .await
                .unwrap()
                .len(),
            1
        );
        assert!(
            s.list_executions(Some(""), None, 10)
                .await
                .unwrap()
                .is_empty(),
            "an empty principal id is nobody, not everybody"
        );
        assert_eq!(
            s.list_executions(None, Some(ExecutionStatus::Paused), 10)
                .await
                .unwrap()
                .len(),
            2
        );
        let expired = s.expire_executions(100).await.unwrap();
        assert_eq!(expired.len(), 1);
        assert_eq!(expired[0].kind, "script");
        assert_eq!(
            s.get_execution("a").await.unwrap().unwrap().status,
            ExecutionStatus::Expired
        );
        assert_eq!(
            s.get_execution("b").await.unwrap().unwrap().status,
            ExecutionStatus::Paused
        );
    }
}
