//! Per-user grants at connections (sealed by the caller before they reach the store) and the
//! sign-in requests that create them. Every lookup is by principal: one principal's rows are
//! never read for another.

use sqlx::Row;

use crate::{now_ms, Result, Store};

/// A stored grant (its tokens sealed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrantRecord {
    pub principal: String,
    pub connection: String,
    /// The sealed token document.
    pub sealed: String,
    /// Space-separated scopes granted.
    pub scopes: String,
    /// When the access token expires (ms), if known.
    pub expires_at: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// A sign-in request: the link in a paused call, then the provider round trip.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectRequest {
    pub nonce_hash: String,
    pub principal: String,
    pub connection: String,
    pub execution_id: String,
    pub wait_id: String,
    pub state_hash: Option<String>,
    /// The PKCE verifier, sealed.
    pub verifier: Option<String>,
    pub expires_at: i64,
    pub used: bool,
}

fn grant(r: sqlx::any::AnyRow) -> Result<GrantRecord> {
    Ok(GrantRecord {
        principal: r.try_get("principal")?,
        connection: r.try_get("connection")?,
        sealed: r.try_get("sealed")?,
        scopes: r.try_get("scopes")?,
        expires_at: r.try_get("expires_at")?,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
    })
}

fn request(r: sqlx::any::AnyRow) -> Result<ConnectRequest> {
    Ok(ConnectRequest {
        nonce_hash: r.try_get("nonce_hash")?,
        principal: r.try_get("principal")?,
        connection: r.try_get("connection")?,
        execution_id: r.try_get("execution_id")?,
        wait_id: r.try_get("wait_id")?,
        state_hash: r.try_get("state_hash")?,
        verifier: r.try_get("verifier")?,
        expires_at: r.try_get("expires_at")?,
        used: r.try_get::<i64, _>("used")? != 0,
    })
}

impl Store {
    /// Stores (or replaces) `principal`'s grant at `connection`.
    pub async fn put_grant(&self, g: &GrantRecord) -> Result<()> {
        sqlx::query(
            "INSERT INTO grants (principal, connection, sealed, scopes, expires_at, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (principal, connection) DO UPDATE SET \
             sealed = excluded.sealed, scopes = excluded.scopes, expires_at = excluded.expires_at, \
             updated_at = excluded.updated_at",
        )
        .bind(&g.principal)
        .bind(&g.connection)
        .bind(&g.sealed)
        .bind(&g.scopes)
        .bind(g.expires_at)
        .bind(g.created_at)
        .bind(g.updated_at)
        .execute(&self.pool)
        .await
        .map_err(|e| self.classify(e))?;
        Ok(())
    }

    /// `principal`'s grant at `connection`.
    pub async fn grant(&self, principal: &str, connection: &str) -> Result<Option<GrantRecord>> {
        let row = sqlx::query(
            "SELECT principal, connection, sealed, scopes, expires_at, created_at, updated_at FROM grants WHERE principal = $1 AND connection = $2",
        )
            .bind(principal)
            .bind(connection)
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| self.classify(e))?;
        row.map(grant).transpose()
    }

    /// `principal`'s grants, by connection.
    pub async fn grants(&self, principal: &str) -> Result<Vec<GrantRecord>> {
        let rows = sqlx::query(
            "SELECT principal, connection, sealed, scopes, expires_at, created_at, updated_at FROM grants WHERE principal = $1 ORDER BY connection",
        )
            .bind(principal)
            .fetch_all(&self.pool)
            .await
            .map_err(|e| self.classify(e))?;
        rows.into_iter().map(grant).collect()
    }

    /// Deletes `principal`'s grant at `connection`; whether there was one.
    pub async fn delete_grant(&self, principal: &str, connection: &str) -> Result<bool> {
        let done = sqlx::query("DELETE FROM grants WHERE principal = $1 AND connection = $2")
            .bind(principal)
            .bind(connection)
            .execute(&self.pool)
            .await
            .map_err(|e| self.classify(e))?;
        Ok(done.rows_affected() > 0)
    }

    /// Stores a new sign-in request (expired ones are purged on the way).
    pub async fn put_connect_request(&self, r: &ConnectRequest) -> Result<()> {
        sqlx::query("DELETE FROM connect_requests WHERE expires_at < $1")
            .bind(now_ms())
            .execute(&self.pool)
            .await
            .map_err(|e| self.classify(e))?;
        sqlx::query(
            "INSERT INTO connect_requests (nonce_hash, principal, connection, execution_id, wait_id, state_hash, verifier, expires_at, used) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
            .bind(&r.nonce_hash)
            .bind(&r.principal)
            .bind(&r.connection)
            .bind(&r.execution_id)
            .bind(&r.wait_id)
            .bind(&r.state_hash)
            .bind(&r.verifier)
            .bind(r.expires_at)
            .bind(r.used as i64)
            .execute(&self.pool)
            .await
            .map_err(|e| self.classify(e))?;
        Ok(())
    }

    /// The sign-in request of a nonce (by its hash).
    pub async fn connect_request(&self, nonce_hash: &str) -> Result<Option<ConnectRequest>> {
        let row = sqlx::query(
            "SELECT nonce_hash, principal, connection, execution_id, wait_id, state_hash, verifier, expires_at, used FROM connect_requests WHERE nonce_hash = $1",
        )
            .bind(nonce_hash)
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| self.classify(e))?;
        row.map(request).transpose()
    }

    /// The sign-in request a provider's `state` belongs to (by the state's hash).
    pub async fn connect_request_by_state(
        &self,
        state_hash: &str,
    ) -> Result<Option<ConnectRequest>> {
        let row = sqlx::query(
            "SELECT nonce_hash, principal, connection, execution_id, wait_id, state_hash, verifier, expires_at, used FROM connect_requests WHERE state_hash = $1",
        )
            .bind(state_hash)
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| self.classify(e))?;
        row.map(request).transpose()
    }

    /// Binds a state and PKCE verifier to an unused request (the link opened); false when the
    /// request was used or already bound (the link opened twice).
    pub async fn bind_connect_state(
        &self,
        nonce_hash: &str,
        state_hash: &str,
        verifier: &str,
    ) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE connect_requests SET state_hash = $1, verifier = $2 \
             WHERE nonce_hash = $3 AND used = 0 AND state_hash IS NULL",
        )
        .bind(state_hash)
        .bind(verifier)
        .bind(nonce_hash)
        .execute(&self.pool)
        .await
        .map_err(|e| self.classify(e))?;
        Ok(done.rows_affected() == 1)
    }

    /// Marks a request used; true for the one caller that did it (single use, also between
    /// replicas).
    pub async fn use_connect_request(&self, nonce_hash: &str) -> Result<bool> {
        let done =
            sqlx::query("UPDATE connect_requests SET used = 1 WHERE nonce_hash = $1 AND used = 0")
                .bind(nonce_hash)
                .execute(&self.pool)
                .await
                .map_err(|e| self.classify(e))?;
        Ok(done.rows_affected() == 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn grants_are_per_principal_and_requests_are_single_use() {
        let store = Store::open("sqlite::memory:").await.unwrap();
        let g = GrantRecord {
            principal: "a".into(),
            connection: "api".into(),
            sealed: "sealed-a".into(),
            scopes: "read".into(),
            expires_at: Some(5),
            created_at: 1,
            updated_at: 1,
        };
        store.put_grant(&g).await.unwrap();
        assert_eq!(store.grant("a", "api").await.unwrap(), Some(g.clone()));
        assert_eq!(store.grant("b", "api").await.unwrap(), None);
        assert_eq!(store.grants("b").await.unwrap(), vec![]);
        assert!(!store.delete_grant("b", "api").await.unwrap());
        assert!(store.delete_grant("a", "api").await.unwrap());
        assert_eq!(store.grants("a").await.unwrap(), vec![]);

        let r = ConnectRequest {
            nonce_hash: "n".into(),
            principal: "a".into(),
            connection: "api".into(),
            execution_id: "e".into(),
            wait_id: "w".into(),
            state_hash: None,
            verifier: None,
            expires_at: now_ms() + 60_000,
            used: false,
        };
        store.put_connect_request(&r).await.unwrap();
        assert!(store.bind_connect_state("n", "s", "v").await.unwrap());
        assert!(
            !store.bind_connect_state("n", "s2", "v2").await.unwrap(),
            "bound once"
        );
        let found = store.connect_request_by_state("s").await.unwrap().unwrap();
        assert_eq!(found.verifier.as_deref(), Some("v"));
        assert!(store.use_connect_request("n").await.unwrap());
        assert!(!store.use_connect_request("n").await.unwrap(), "single use");
        assert!(store.connect_request("n").await.unwrap().unwrap().used);
    }
}
