//! Tokens persons approved for upstream MCP sources, sealed by the caller before they reach the
//! store (see `toolshed_mcp_source::person`). One row per source; removing a stored source
//! removes its token ([`Store::delete_source`]).

use sqlx::Row;

use crate::{now_ms, Result, Store};

impl Store {
    /// The sealed token document kept for `source`, if any.
    pub async fn upstream_token(&self, source: &str) -> Result<Option<String>> {
        let row = sqlx::query("SELECT sealed FROM upstream_tokens WHERE source = $1")
            .bind(source)
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| self.classify(e))?;
        Ok(row.map(|r| r.try_get::<String, _>("sealed")).transpose()?)
    }

    /// Keeps `sealed` for `source`, replacing what was there.
    pub async fn put_upstream_token(&self, source: &str, sealed: &str) -> Result<()> {
        sqlx::query(
            "INSERT INTO upstream_tokens (source, sealed, updated_at) VALUES ($1, $2, $3) \
             ON CONFLICT (source) DO UPDATE SET sealed = excluded.sealed, updated_at = excluded.updated_at",
        )
        .bind(source)
        .bind(sealed)
        .bind(now_ms())
        .execute(&self.pool)
        .await
        .map_err(|e| self.classify(e))?;
        Ok(())
    }

    /// Replaces the token kept for `source`, only if one is kept; whether one was.
    pub async fn update_upstream_token(&self, source: &str, sealed: &str) -> Result<bool> {
        let r = sqlx::query(
            "UPDATE upstream_tokens SET sealed = $1, updated_at = $2 WHERE source = $3",
        )
        .bind(sealed)
        .bind(now_ms())
        .bind(source)
        .execute(&self.pool)
        .await
        .map_err(|e| self.classify(e))?;
        Ok(r.rows_affected() > 0)
    }

    /// Forgets the token of `source`; whether one was kept.
    pub async fn delete_upstream_token(&self, source: &str) -> Result<bool> {
        let r = sqlx::query("DELETE FROM upstream_tokens WHERE source = $1")
            .bind(source)
            .execute(&self.pool)
            .await
            .map_err(|e| self.classify(e))?;
        Ok(r.rows_affected() > 0)
    }
}

#[cfg(test)]
mod tests {
    use crate::Store;

    #[tokio::test]
    async fn a_token_is_kept_replaced_and_removed_with_its_source() {
        let s = Store::open("sqlite::memory:").await.unwrap();
        assert_eq!(s.upstream_token("b").await.unwrap(), None);
        assert!(!s.update_upstream_token("b", "zero").await.unwrap());
        assert_eq!(s.upstream_token("b").await.unwrap(), None);
        s.put_upstream_token("b", "one").await.unwrap();
        assert!(s
            .update_upstream_token("b", "one and a half")
            .await
            .unwrap());
        s.put_upstream_token("b", "two").await.unwrap();
        s.put_upstream_token("c", "three").await.unwrap();
        assert_eq!(s.upstream_token("b").await.unwrap().as_deref(), Some("two"));
        assert!(s.delete_upstream_token("c").await.unwrap());
        assert!(!s.delete_upstream_token("c").await.unwrap());
        // A stored source's token goes with it.
        s.put_source("b", "mcp", &serde_json::json!({"url": "http://x/mcp"}))
            .await
            .unwrap();
        assert!(s.delete_source("b").await.unwrap());
        assert_eq!(s.upstream_token("b").await.unwrap(), None);
    }
}
