//! The roles of principals signed in with a token, as their newest token granted them.

use sqlx::Row;

use crate::{now_ms, Result, Store};

/// Most roles kept for one principal, and the longest role id kept.
const MAX_ROLES: usize = 64;
const MAX_ROLE_LEN: usize = 256;

impl Store {
    /// Records the roles `principal`'s newest token granted (bounded: at most 64 roles of at
    /// most 256 bytes each are kept).
    pub async fn put_signed_in(&self, principal: &str, roles: &[String]) -> Result<()> {
        let roles: Vec<&str> = roles
            .iter()
            .filter(|r| r.len() <= MAX_ROLE_LEN)
            .take(MAX_ROLES)
            .map(String::as_str)
            .collect();
        let roles = serde_json::to_string(&roles).unwrap_or_else(|_| "[]".into());
        sqlx::query(
            "INSERT INTO signed_in (principal, roles, updated_at) VALUES ($1, $2, $3) \
             ON CONFLICT (principal) DO UPDATE SET roles = excluded.roles, updated_at = excluded.updated_at",
        )
        .bind(principal)
        .bind(roles)
        .bind(now_ms())
        .execute(&self.pool)
        .await
        .map_err(|e| self.classify(e))?;
        Ok(())
    }

    /// The roles recorded for `principal`, if it ever signed in.
    pub async fn signed_in_roles(&self, principal: &str) -> Result<Option<Vec<String>>> {
        let row = sqlx::query("SELECT roles FROM signed_in WHERE principal = $1")
            .bind(principal)
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| self.classify(e))?;
        let Some(row) = row else {
            return Ok(None);
        };
        let text: String = row.try_get("roles")?;
        Ok(Some(serde_json::from_str(&text).unwrap_or_default()))
    }
}

#[cfg(test)]
mod tests {
    use crate::Store;

    #[tokio::test]
    async fn roles_are_recorded_and_replaced() {
        let store = Store::open("sqlite::memory:").await.unwrap();
        assert_eq!(store.signed_in_roles("iss#a").await.unwrap(), None);
        store
            .put_signed_in("iss#a", &["dev".into(), "x".repeat(300)])
            .await
            .unwrap();
        assert_eq!(
            store.signed_in_roles("iss#a").await.unwrap(),
            Some(vec!["dev".to_string()])
        );
        store
            .put_signed_in("iss#a", &["admin".into()])
            .await
            .unwrap();
        assert_eq!(
            store.signed_in_roles("iss#a").await.unwrap(),
            Some(vec!["admin".to_string()])
        );
    }
}
