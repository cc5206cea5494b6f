//! Model endpoints added at runtime (`toolshed models add`), beside the `[models.<id>]` of the
//! configuration. The key and headers are kept sealed (`sealed`, written and opened by the
//! caller with the server's secret key); nothing else here is secret.

use sqlx::Row;

use crate::{now_ms, Result, Store};

/// Longest base URL kept, and most model endpoints kept.
pub const MAX_MODEL_URL: usize = 2_048;
pub const MAX_MODELS: i64 = 1_000;

/// A stored model endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredModel {
    pub id: String,
    /// `openai` or `anthropic`.
    pub kind: String,
    pub base_url: Option<String>,
    /// The sealed JSON of `{apiKey?, headers}`.
    pub sealed: String,
    pub timeout_ms: i64,
    pub allow_private: bool,
    pub updated_at: i64,
}

fn model(row: &sqlx::any::AnyRow) -> Result<StoredModel> {
    let allow: i64 = row.try_get("allow_private")?;
    Ok(StoredModel {
        id: row.try_get("id")?,
        kind: row.try_get("kind")?,
        base_url: row.try_get("base_url")?,
        sealed: row.try_get("sealed")?,
        timeout_ms: row.try_get("timeout_ms")?,
        allow_private: allow != 0,
        updated_at: row.try_get("updated_at")?,
    })
}

const COLUMNS: &str = "id, kind, base_url, sealed, timeout_ms, allow_private, updated_at";

impl Store {
    /// Adds or replaces a model endpoint. Every replacement moves `updated_at` on, so servers
    /// that built the endpoint before see the change.
    pub async fn put_model(&self, m: &StoredModel) -> Result<()> {
        let now = now_ms();
        sqlx::query(
            "INSERT INTO models (id, kind, base_url, sealed, timeout_ms, allow_private, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $7) \
             ON CONFLICT (id) DO UPDATE SET kind = excluded.kind, base_url = excluded.base_url, \
             sealed = excluded.sealed, timeout_ms = excluded.timeout_ms, \
             allow_private = excluded.allow_private, \
             updated_at = CASE WHEN models.updated_at >= excluded.updated_at \
                          THEN models.updated_at + 1 ELSE excluded.updated_at END",
        )
        .bind(&m.id)
        .bind(&m.kind)
        .bind(&m.base_url)
        .bind(&m.sealed)
        .bind(m.timeout_ms)
        .bind(i64::from(m.allow_private))
        .bind(now)
        .execute(&self.pool)
        .await
        .map_err(|e| self.classify(e))?;
        Ok(())
    }

    /// One model endpoint.
    pub async fn get_model(&self, id: &str) -> Result<Option<StoredModel>> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM models WHERE id = $1"
        )))
        .bind(id)
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| self.classify(e))?;
        row.as_ref().map(model).transpose()
    }

    /// Every model endpoint, by id.
    pub async fn list_models(&self) -> Result<Vec<StoredModel>> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM models ORDER BY id LIMIT $1"
        )))
        .bind(MAX_MODELS)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| self.classify(e))?;
        rows.iter().map(model).collect()
    }

    /// Removes a model endpoint; whether it existed.
    pub async fn delete_model(&self, id: &str) -> Result<bool> {
        let r = sqlx::query("DELETE FROM models WHERE id = $1")
            .bind(id)
            .execute(&self.pool)
            .await
            .map_err(|e| self.classify(e))?;
        Ok(r.rows_affected() > 0)
    }

    /// How many model endpoints are stored.
    pub async fn count_models(&self) -> Result<i64> {
        let row = sqlx::query("SELECT COUNT(*) AS n FROM models")
            .fetch_one(&self.pool)
            .await
            .map_err(|e| self.classify(e))?;
        Ok(row.try_get("n")?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn models_are_put_replaced_listed_and_deleted() {
        let store = Store::open("sqlite::memory:").await.unwrap();
        let mut m = StoredModel {
            id: "rt".into(),
            kind: "openai".into(),
            base_url: Some("http://127.0.0.1:9/v1".into()),
            sealed: "sealed-1".into(),
            timeout_ms: 1_000,
            allow_private: true,
            updated_at: 0,
        };
        store.put_model(&m).await.unwrap();
        let first = store.get_model("rt").await.unwrap().unwrap().updated_at;
        m.kind = "anthropic".into();
        m.sealed = "sealed-2".into();
        store.put_model(&m).await.unwrap();
        let got = store.get_model("rt").await.unwrap().unwrap();
        assert_eq!(
            (got.kind.as_str(), got.sealed.as_str(), got.allow_private),
            ("anthropic", "sealed-2", true)
        );
        assert!(got.updated_at > first, "a replacement is seen as a change");
        assert_eq!(store.list_models().await.unwrap().len(), 1);
        assert_eq!(store.count_models().await.unwrap(), 1);
        assert!(store.delete_model("rt").await.unwrap());
        assert!(!store.delete_model("rt").await.unwrap());
        assert!(store.get_model("rt").await.unwrap().is_none());
    }
}
