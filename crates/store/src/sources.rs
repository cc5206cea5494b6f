//! Tool sources declared at runtime (`toolshed sources add ...`), persisted so a restart keeps
//! them. The config is JSON whose secrets the caller has already sealed.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sqlx::Row;

use crate::{now_ms, Result, Store, StoreError};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourceRecord {
    pub name: String,
    /// `openapi`, `graphql` or `mcp`.
    pub kind: String,
    pub config: Value,
    pub created_at: i64,
    pub updated_at: i64,
}

impl Store {
    /// Inserts or replaces a source.
    pub async fn put_source(&self, name: &str, kind: &str, config: &Value) -> Result<()> {
        let now = now_ms();
        let text = serde_json::to_string(config).unwrap_or_default();
        let mut tx = self.pool.begin().await.map_err(|e| self.classify(e))?;
        sqlx::query("DELETE FROM sources WHERE name = $1")
            .bind(name)
            .execute(&mut *tx)
            .await
            .map_err(|e| self.classify(e))?;
        sqlx::query("INSERT INTO sources (name, kind, config, created_at, updated_at) VALUES ($1,$2,$3,$4,$4)")
            .bind(name)
            .bind(kind)
            .bind(text)
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(|e| self.classify(e))?;
        tx.commit().await.map_err(|e| self.classify(e))?;
        Ok(())
    }

    /// Removes a source and the token a person approved for it; whether the source existed.
    pub async fn delete_source(&self, name: &str) -> Result<bool> {
        let mut tx = self.pool.begin().await.map_err(|e| self.classify(e))?;
        let r = sqlx::query("DELETE FROM sources WHERE name = $1")
            .bind(name)
            .execute(&mut *tx)
            .await
            .map_err(|e| self.classify(e))?;
        sqlx::query("DELETE FROM upstream_tokens WHERE source = $1")
            .bind(name)
            .execute(&mut *tx)
            .await
            .map_err(|e| self.classify(e))?;
        tx.commit().await.map_err(|e| self.classify(e))?;
        Ok(r.rows_affected() > 0)
    }

    pub async fn list_sources(&self) -> Result<Vec<SourceRecord>> {
        let rows = sqlx::query(
            "SELECT name, kind, config, created_at, updated_at FROM sources ORDER BY name",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(|e| self.classify(e))?;
        rows.iter()
            .map(|r| {
                let name: String = r.try_get("name")?;
                let config: String = r.try_get("config")?;
                Ok(SourceRecord {
                    config: serde_json::from_str(&config).map_err(|e| StoreError::Malformed {
                        what: format!("source {name} config"),
                        reason: e.to_string(),
                    })?,
                    kind: r.try_get("kind")?,
                    created_at: r.try_get("created_at")?,
                    updated_at: r.try_get("updated_at")?,
                    name,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn put_list_delete() {
        let s = Store::open("sqlite::memory:").await.unwrap();
        s.put_source("pets", "openapi", &json!({"spec": "a.json"}))
            .await
            .unwrap();
        s.put_source("pets", "openapi", &json!({"spec": "b.json"}))
            .await
            .unwrap();
        let all = s.list_sources().await.unwrap();
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].config["spec"], "b.json");
        assert!(s.delete_source("pets").await.unwrap());
        assert!(!s.delete_source("pets").await.unwrap());
    }
}
