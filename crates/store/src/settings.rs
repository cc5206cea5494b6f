//! Server-wide settings kept in the database, shared by every replica on it (for example the
//! check value of the key that seals secrets). Keys are short fixed names; values are text.

use sqlx::Row;

use crate::{now_ms, Result, Store};

impl Store {
    /// The value stored under `key`, if any.
    pub async fn setting(&self, key: &str) -> Result<Option<String>> {
        let row = sqlx::query("SELECT value FROM settings WHERE key = $1")
            .bind(key)
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| self.classify(e))?;
        Ok(row.map(|r| r.try_get::<String, _>("value")).transpose()?)
    }

    /// Stores `value` under `key` unless a value is already there, and returns the value that is
    /// stored afterwards (the first writer wins, also between replicas starting together).
    pub async fn setting_or_insert(&self, key: &str, value: &str) -> Result<String> {
        sqlx::query(
            "INSERT INTO settings (key, value, updated_at) VALUES ($1, $2, $3) ON CONFLICT (key) DO NOTHING",
        )
        .bind(key)
        .bind(value)
        .bind(now_ms())
        .execute(&self.pool)
        .await
        .map_err(|e| self.classify(e))?;
        Ok(self
            .setting(key)
            .await?
            .unwrap_or_else(|| value.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use crate::Store;

    #[tokio::test]
    async fn the_first_value_stays() {
        let s = Store::open("sqlite::memory:").await.unwrap();
        assert_eq!(s.setting("k").await.unwrap(), None);
        assert_eq!(s.setting_or_insert("k", "one").await.unwrap(), "one");
        assert_eq!(s.setting_or_insert("k", "two").await.unwrap(), "one");
        assert_eq!(s.setting("k").await.unwrap().as_deref(), Some("one"));
    }
}
