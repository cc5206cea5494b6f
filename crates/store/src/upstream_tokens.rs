//! Tokens persons approved for upstream MCP sources, sealed by the caller before they reach the
//! store (see `toolshed_mcp_source::person`). One row per source; removing a stored source
//! removes its token ([`Store::delete_source`]). Replicas sharing a PostgreSQL database renew a
//! token one at a time ([`Store::lock_upstream_token`]).

use sqlx::Row;

use crate::{now_ms, Backend, Result, Store};

/// A lock on the token of one source, held across its renewal: on PostgreSQL a session
/// advisory lock on a connection of the pool, released when this is dropped.
pub struct TokenLock {
    conn: Option<sqlx::pool::PoolConnection<sqlx::Any>>,
    key: i64,
}

impl Drop for TokenLock {
    fn drop(&mut self) {
        let Some(mut conn) = self.conn.take() else {
            return;
        };
        let key = self.key;
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    let unlocked = sqlx::query("SELECT pg_advisory_unlock($1)")
                        .bind(key)
                        .execute(&mut *conn)
                        .await;
                    if unlocked.is_err() {
                        // Closing the session releases its locks.
                        drop(conn.detach());
                    }
                });
            }
            // No runtime to unlock on: closing the session releases its locks.
            Err(_) => drop(conn.detach()),
        }
    }
}

/// The advisory lock key of `source`'s token (FNV-1a over a fixed prefix and the name).
fn lock_key(source: &str) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in "toolshed:upstream_tokens:".bytes().chain(source.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    i64::from_ne_bytes(h.to_ne_bytes())
}

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

    /// Waits for the lock on `source`'s token, which replicas sharing the database take around
    /// a renewal; `None` on SQLite (one process keeps the file; within a process the caller
    /// orders its renewals).
    pub async fn lock_upstream_token(&self, source: &str) -> Result<Option<TokenLock>> {
        if self.backend != Backend::Postgres {
            return Ok(None);
        }
        let key = lock_key(source);
        let mut conn = self.pool.acquire().await.map_err(|e| self.classify(e))?;
        sqlx::query("SELECT pg_advisory_lock($1)")
            .bind(key)
            .execute(&mut *conn)
            .await
            .map_err(|e| self.classify(e))?;
        Ok(Some(TokenLock {
            conn: Some(conn),
            key,
        }))
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
