//! Custom tools in Toolshed's store (`custom_tools`): one row per tool with its specification.
//! A build of an existing id replaces it.

use sqlx::Row;
use toolshed_store::{now_ms, Store};

use crate::spec::CustomSpec;

/// Store failures of custom tools.
#[derive(Debug, thiserror::Error)]
pub enum CustomError {
    #[error("no custom tool '{0}' exists")]
    Unknown(String),
    #[error("stored custom tool '{id}' is malformed: {reason}")]
    Malformed { id: String, reason: String },
    #[error("storage failed: {0}")]
    Db(#[from] sqlx::Error),
}

pub type Result<T, E = CustomError> = std::result::Result<T, E>;

/// The custom tools of one store.
#[derive(Clone, Debug)]
pub struct Repo {
    store: Store,
}

/// What changes when any custom tool changes (for replicas polling the store).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fingerprint {
    pub count: i64,
    pub newest: i64,
}

impl Repo {
    pub fn new(store: Store) -> Self {
        Self { store }
    }

    /// Every saved tool, by id.
    pub async fn all(&self) -> Result<Vec<(CustomSpec, String, i64)>> {
        let rows = sqlx::query("SELECT id, spec, author, updated_at FROM custom_tools ORDER BY id")
            .fetch_all(self.store.pool())
            .await?;
        rows.iter()
            .map(|r| {
                let id: String = r.try_get("id")?;
                let spec: CustomSpec = serde_json::from_str(&r.try_get::<String, _>("spec")?)
                    .map_err(|e| CustomError::Malformed {
                        id: id.clone(),
                        reason: e.to_string(),
                    })?;
                Ok((spec, r.try_get("author")?, r.try_get("updated_at")?))
            })
            .collect()
    }

    /// One saved tool.
    pub async fn get(&self, id: &str) -> Result<CustomSpec> {
        let row = sqlx::query("SELECT spec FROM custom_tools WHERE id = $1")
            .bind(id)
            .fetch_optional(self.store.pool())
            .await?
            .ok_or_else(|| CustomError::Unknown(id.to_string()))?;
        serde_json::from_str(&row.try_get::<String, _>("spec")?).map_err(|e| {
            CustomError::Malformed {
                id: id.to_string(),
                reason: e.to_string(),
            }
        })
    }

    /// Saves (or replaces) a tool.
    pub async fn put(&self, spec: &CustomSpec, author: &str) -> Result<()> {
        let now = now_ms();
        let text = serde_json::to_string(spec).unwrap_or_default();
        sqlx::query(
            "INSERT INTO custom_tools (id, spec, author, created_at, updated_at) VALUES ($1, $2, $3, $4, $4) \
             ON CONFLICT (id) DO UPDATE SET spec = $2, author = $3, updated_at = $4",
        )
        .bind(&spec.id)
        .bind(text)
        .bind(author)
        .bind(now)
        .execute(self.store.pool())
        .await?;
        Ok(())
    }

    /// Removes a tool; false when it did not exist.
    pub async fn delete(&self, id: &str) -> Result<bool> {
        let done = sqlx::query("DELETE FROM custom_tools WHERE id = $1")
            .bind(id)
            .execute(self.store.pool())
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// How many tools there are and when the newest changed.
    pub async fn fingerprint(&self) -> Result<Fingerprint> {
        let row = sqlx::query(
            "SELECT COUNT(*) AS n, COALESCE(MAX(updated_at), 0) AS newest FROM custom_tools",
        )
        .fetch_one(self.store.pool())
        .await?;
        Ok(Fingerprint {
            count: row.try_get("n")?,
            newest: row.try_get("newest")?,
        })
    }
}
