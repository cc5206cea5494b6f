//! Virtual MCP servers defined at runtime: each definition kept as JSON under its name. The
//! definition's checks belong to its owner (`toolshed_core::servers`); this keeps the text.

use sqlx::Row;

use crate::{now_ms, Result, Store};

/// Most virtual servers kept, and the longest definition kept in bytes.
pub const MAX_SERVERS: i64 = 1_000;
pub const MAX_SERVER_DEFINITION: usize = 64 * 1024;

/// A stored virtual server definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredServer {
    pub name: String,
    /// The definition, JSON text.
    pub definition: String,
    pub updated_at: i64,
}

impl Store {
    /// Adds or replaces a virtual server definition.
    pub async fn put_server(&self, name: &str, definition: &str) -> Result<()> {
        let now = now_ms();
        sqlx::query(
            "INSERT INTO virtual_servers (name, definition, created_at, updated_at) VALUES ($1, $2, $3, $3) \
             ON CONFLICT (name) DO UPDATE SET definition = excluded.definition, \
             updated_at = CASE WHEN virtual_servers.updated_at >= excluded.updated_at \
                          THEN virtual_servers.updated_at + 1 ELSE excluded.updated_at END",
        )
        .bind(name)
        .bind(definition)
        .bind(now)
        .execute(&self.pool)
        .await
        .map_err(|e| self.classify(e))?;
        Ok(())
    }

    /// Every stored virtual server, by name.
    pub async fn list_servers(&self) -> Result<Vec<StoredServer>> {
        let rows = sqlx::query(
            "SELECT name, definition, updated_at FROM virtual_servers ORDER BY name LIMIT $1",
        )
        .bind(MAX_SERVERS)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| self.classify(e))?;
        rows.iter()
            .map(|r| {
                Ok(StoredServer {
                    name: r.try_get("name")?,
                    definition: r.try_get("definition")?,
                    updated_at: r.try_get("updated_at")?,
                })
            })
            .collect()
    }

    /// Removes a stored virtual server; whether it existed.
    pub async fn delete_server(&self, name: &str) -> Result<bool> {
        let r = sqlx::query("DELETE FROM virtual_servers WHERE name = $1")
            .bind(name)
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
    async fn servers_are_put_replaced_listed_and_deleted() {
        let store = Store::open("sqlite::memory:").await.unwrap();
        store.put_server("b", r#"{"name":"b"}"#).await.unwrap();
        store.put_server("a", r#"{"name":"a"}"#).await.unwrap();
        let before = store.list_servers().await.unwrap()[0].updated_at;
        store
            .put_server("a", r#"{"name":"a","tools":["x.*"]}"#)
            .await
            .unwrap();
        let all = store.list_servers().await.unwrap();
        assert_eq!(
            all.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        assert!(all[0].definition.contains("x.*"));
        assert!(all[0].updated_at > before);
        assert!(store.delete_server("a").await.unwrap());
        assert!(!store.delete_server("a").await.unwrap());
        assert_eq!(store.list_servers().await.unwrap().len(), 1);
    }
}
