//! The tasks of approved agent plans, run as background sub-agents (see the engine's
//! `executions::agent::background`). Status moves `pending` → `running` → `succeeded` |
//! `failed` | `cancelled`, each move a conditional update, so two replicas never start one task
//! twice.

use sqlx::Row;

use crate::{now_ms, Result, Store};

/// Most corrections queued for one task, and the longest kept.
pub const MAX_CORRECTIONS: usize = 20;
pub const MAX_CORRECTION_BYTES: usize = 4_096;
/// Longest result kept, in bytes.
pub const MAX_RESULT_BYTES: usize = 16_384;

/// One task of a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackgroundTask {
    pub run_id: String,
    pub task_id: String,
    pub title: String,
    pub principal: String,
    /// The sub-agent's run spec, JSON.
    pub spec: String,
    pub deps: Vec<String>,
    pub status: String,
    pub execution_id: Option<String>,
    pub result: Option<String>,
    pub corrections: Vec<String>,
}

impl BackgroundTask {
    /// Whether the task will not change any more.
    pub fn is_terminal(&self) -> bool {
        matches!(self.status.as_str(), "succeeded" | "failed" | "cancelled")
    }
}

fn task(row: &sqlx::any::AnyRow) -> Result<BackgroundTask> {
    let deps: String = row.try_get("deps")?;
    let corrections: String = row.try_get("corrections")?;
    Ok(BackgroundTask {
        run_id: row.try_get("run_id")?,
        task_id: row.try_get("task_id")?,
        title: row.try_get("title")?,
        principal: row.try_get("principal")?,
        spec: row.try_get("spec")?,
        deps: serde_json::from_str(&deps).unwrap_or_default(),
        status: row.try_get("status")?,
        execution_id: row.try_get("execution_id")?,
        result: row.try_get("result")?,
        corrections: serde_json::from_str(&corrections).unwrap_or_default(),
    })
}

const COLUMNS: &str =
    "run_id, task_id, title, principal, spec, deps, status, execution_id, result, corrections";

impl Store {
    /// Stores a plan's tasks as `pending` (tasks stored before are kept: a replay adds nothing).
    pub async fn add_background_tasks(&self, tasks: &[BackgroundTask]) -> Result<()> {
        let now = now_ms();
        for t in tasks {
            sqlx::query(
                "INSERT INTO background_tasks \
                 (run_id, task_id, title, principal, spec, deps, status, corrections, created_at, updated_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, 'pending', '[]', $7, $7) \
                 ON CONFLICT (run_id, task_id) DO NOTHING",
            )
            .bind(&t.run_id)
            .bind(&t.task_id)
            .bind(&t.title)
            .bind(&t.principal)
            .bind(&t.spec)
            .bind(serde_json::to_string(&t.deps).unwrap_or_else(|_| "[]".into()))
            .bind(now)
            .execute(&self.pool)
            .await
            .map_err(|e| self.classify(e))?;
        }
        Ok(())
    }

    /// The tasks of a run's plans, in the order they were stored.
    pub async fn background_tasks(&self, run_id: &str) -> Result<Vec<BackgroundTask>> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM background_tasks WHERE run_id = $1 ORDER BY created_at, task_id"
        )))
        .bind(run_id)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| self.classify(e))?;
        rows.iter().map(task).collect()
    }

    /// Moves a task from `from` to `to` (with its execution, result); whether this call moved
    /// it (another writer may have first).
    pub async fn move_background_task(
        &self,
        run_id: &str,
        task_id: &str,
        from: &[&str],
        to: &str,
        execution_id: Option<&str>,
        result: Option<&str>,
    ) -> Result<bool> {
        let sql = format!(
            "UPDATE background_tasks SET status = $1, \
             execution_id = COALESCE($2, execution_id), result = COALESCE($3, result), updated_at = $4 \
             WHERE run_id = $5 AND task_id = $6 AND status IN ({})",
            (0..from.len())
                .map(|i| format!("${}", i + 7))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let result = result.map(|r| r[..r.floor_char_boundary(MAX_RESULT_BYTES)].to_string());
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(to)
            .bind(execution_id)
            .bind(result)
            .bind(now_ms())
            .bind(run_id)
            .bind(task_id);
        for f in from {
            q = q.bind(*f);
        }
        let r = q.execute(&self.pool).await.map_err(|e| self.classify(e))?;
        Ok(r.rows_affected() > 0)
    }

    /// Queues a correction for a running task; `false` when it is not running (or has
    /// [`MAX_CORRECTIONS`] queued).
    pub async fn queue_correction(&self, run_id: &str, task_id: &str, text: &str) -> Result<bool> {
        for _ in 0..5 {
            let Some(t) = self
                .background_tasks(run_id)
                .await?
                .into_iter()
                .find(|t| t.task_id == task_id)
            else {
                return Ok(false);
            };
            if t.is_terminal() || t.corrections.len() >= MAX_CORRECTIONS {
                return Ok(false);
            }
            let before = serde_json::to_string(&t.corrections).unwrap_or_default();
            let mut after = t.corrections.clone();
            after.push(text[..text.floor_char_boundary(MAX_CORRECTION_BYTES)].to_string());
            let after = serde_json::to_string(&after).unwrap_or_default();
            let r = sqlx::query(
                "UPDATE background_tasks SET corrections = $1, updated_at = $2 \
                 WHERE run_id = $3 AND task_id = $4 AND corrections = $5",
            )
            .bind(&after)
            .bind(now_ms())
            .bind(run_id)
            .bind(task_id)
            .bind(&before)
            .execute(&self.pool)
            .await
            .map_err(|e| self.classify(e))?;
            if r.rows_affected() > 0 {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(id: &str, deps: &[&str]) -> BackgroundTask {
        BackgroundTask {
            run_id: "ex_1".into(),
            task_id: id.into(),
            title: format!("task {id}"),
            principal: "alice".into(),
            spec: "{}".into(),
            deps: deps.iter().map(|d| d.to_string()).collect(),
            status: "pending".into(),
            execution_id: None,
            result: None,
            corrections: vec![],
        }
    }

    #[tokio::test]
    async fn tasks_move_once_and_take_corrections_while_running() {
        let store = Store::open("sqlite::memory:").await.unwrap();
        store
            .add_background_tasks(&[t("a", &[]), t("b", &["a"])])
            .await
            .unwrap();
        store.add_background_tasks(&[t("a", &[])]).await.unwrap();
        let all = store.background_tasks("ex_1").await.unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(all[1].deps, ["a"]);
        assert!(store
            .move_background_task("ex_1", "a", &["pending"], "running", Some("ex_a"), None)
            .await
            .unwrap());
        assert!(!store
            .move_background_task("ex_1", "a", &["pending"], "running", Some("ex_x"), None)
            .await
            .unwrap());
        assert!(store
            .queue_correction("ex_1", "a", "use table t2")
            .await
            .unwrap());
        assert!(store
            .move_background_task("ex_1", "a", &["running"], "succeeded", None, Some("done"))
            .await
            .unwrap());
        assert!(!store
            .queue_correction("ex_1", "a", "too late")
            .await
            .unwrap());
        assert!(!store
            .queue_correction("ex_1", "zz", "nobody")
            .await
            .unwrap());
        let a = &store.background_tasks("ex_1").await.unwrap()[0];
        assert_eq!(
            (
                a.status.as_str(),
                a.execution_id.as_deref(),
                a.result.as_deref()
            ),
            ("succeeded", Some("ex_a"), Some("done"))
        );
        assert_eq!(a.corrections, ["use table t2"]);
        assert!(a.is_terminal());
    }
}
