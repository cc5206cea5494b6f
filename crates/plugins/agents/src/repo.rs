//! Agent definitions in Toolshed's store: `agents` (which version is the draft, which is live)
//! and `agent_versions` (every version's JSON).
//!
//! A new draft version is written in one transaction that first moves the agent's
//! `draft_version` on from the value the writer read (`expected`): two writers that read the
//! same draft cannot both succeed; the second gets [`AgentsError::Conflict`] and may re-read and
//! re-apply its change. No update is ever lost.

use serde::Serialize;
use serde_json::Value;
use sqlx::Row;
use toolshed_store::{now_ms, Store};

/// Store failures of agent definitions.
#[derive(Debug, thiserror::Error)]
pub enum AgentsError {
    #[error("no agent '{0}' exists")]
    Unknown(String),
    #[error("agent '{name}' has no version {version}")]
    UnknownVersion { name: String, version: i64 },
    #[error("agent '{0}' was changed by someone else meanwhile; read it again and retry")]
    Conflict(String),
    #[error("agent '{0}' has no draft to publish")]
    NothingToPublish(String),
    #[error("stored definition of agent '{name}' version {version} is not JSON: {reason}")]
    Malformed {
        name: String,
        version: i64,
        reason: String,
    },
    #[error("storage failed: {0}")]
    Db(#[from] sqlx::Error),
    #[error("storage failed: {0}")]
    Store(String),
}

pub type Result<T, E = AgentsError> = std::result::Result<T, E>;

/// One agent as listed.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentSummary {
    pub name: String,
    pub description: String,
    pub model: String,
    pub draft_version: i64,
    pub live_version: Option<i64>,
    pub updated_at: i64,
}

/// One stored version.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Version {
    pub version: i64,
    pub config: Value,
    pub author: String,
    pub note: String,
    pub created_at: i64,
}

/// Where an agent's draft and live versions are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heads {
    pub draft: i64,
    pub live: Option<i64>,
}

/// The agent definitions of one store.
#[derive(Clone, Debug)]
pub struct Repo {
    store: Store,
}

impl Repo {
    /// The model endpoints added at runtime (`toolshed models add`), as credentials (never
    /// their secrets).
    pub async fn runtime_credentials(&self) -> Result<Vec<crate::ModelCredential>, AgentsError> {
        Ok(self
            .store
            .list_models()
            .await
            .map_err(|e| AgentsError::Store(e.to_string()))?
            .into_iter()
            .map(|m| crate::ModelCredential {
                id: m.id,
                kind: m.kind,
                base_url: m.base_url,
                runtime: true,
            })
            .collect())
    }

    pub fn new(store: Store) -> Self {
        Self { store }
    }

    fn pool(&self) -> &sqlx::AnyPool {
        self.store.pool()
    }

    /// The draft and live versions of `name`, if it exists.
    pub async fn heads(&self, name: &str) -> Result<Option<Heads>> {
        let row = sqlx::query("SELECT draft_version, live_version FROM agents WHERE name = $1")
            .bind(name)
            .fetch_optional(self.pool())
            .await?;
        Ok(match row {
            Some(r) => Some(Heads {
                draft: r.try_get("draft_version")?,
                live: r.try_get("live_version")?,
            }),
            None => None,
        })
    }

    /// One version of `name`.
    pub async fn version(&self, name: &str, version: i64) -> Result<Version> {
        let row = sqlx::query(
            "SELECT version, config, author, note, created_at FROM agent_versions WHERE name = $1 AND version = $2",
        )
        .bind(name)
        .bind(version)
        .fetch_optional(self.pool())
        .await?
        .ok_or_else(|| AgentsError::UnknownVersion {
            name: name.to_string(),
            version,
        })?;
        version_of(name, &row)
    }

    /// Every version of `name`, newest first.
    pub async fn versions(&self, name: &str) -> Result<Vec<Version>> {
        let rows = sqlx::query(
            "SELECT version, config, author, note, created_at FROM agent_versions WHERE name = $1 ORDER BY version DESC",
        )
        .bind(name)
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(|r| version_of(name, r)).collect()
    }

    /// Every agent, by name.
    pub async fn list(&self) -> Result<Vec<AgentSummary>> {
        let rows = sqlx::query(
            "SELECT a.name, a.draft_version, a.live_version, a.updated_at, v.config \
             FROM agents a JOIN agent_versions v ON v.name = a.name AND v.version = a.draft_version \
             ORDER BY a.name",
        )
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|r| {
                let name: String = r.try_get("name")?;
                let draft: i64 = r.try_get("draft_version")?;
                let config: Value = parse(&name, draft, &r.try_get::<String, _>("config")?)?;
                Ok(AgentSummary {
                    description: config["description"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    model: config["model"].as_str().unwrap_or_default().to_string(),
                    draft_version: draft,
                    live_version: r.try_get("live_version")?,
                    updated_at: r.try_get("updated_at")?,
                    name,
                })
            })
            .collect()
    }

    /// The drafts of every agent: name → definition.
    pub async fn drafts(&self) -> Result<Vec<(String, Value)>> {
        let rows = sqlx::query(
            "SELECT a.name, a.draft_version, v.config FROM agents a \
             JOIN agent_versions v ON v.name = a.name AND v.version = a.draft_version",
        )
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|r| {
                let name: String = r.try_get("name")?;
                let v: i64 = r.try_get("draft_version")?;
                let config = parse(&name, v, &r.try_get::<String, _>("config")?)?;
                Ok((name, config))
            })
            .collect()
    }

    /// Stores `config` as the next draft version of `name`, if the draft is still `expected`
    /// (`None`: the agent must not exist yet). Returns the new version.
    pub async fn put_draft(
        &self,
        name: &str,
        expected: Option<i64>,
        config: &Value,
        author: &str,
        note: &str,
    ) -> Result<i64> {
        let now = now_ms();
        let next = expected.unwrap_or(0) + 1;
        let mut tx = self.pool().begin().await?;
        let moved = match expected {
            Some(v) => sqlx::query(
                "UPDATE agents SET draft_version = $1, updated_at = $2 WHERE name = $3 AND draft_version = $4",
            )
            .bind(next)
            .bind(now)
            .bind(name)
            .bind(v)
            .execute(&mut *tx)
            .await?
            .rows_affected(),
            None => sqlx::query(
                "INSERT INTO agents (name, draft_version, live_version, created_at, updated_at) \
                 VALUES ($1, 1, NULL, $2, $2) ON CONFLICT (name) DO NOTHING",
            )
            .bind(name)
            .bind(now)
            .execute(&mut *tx)
            .await?
            .rows_affected(),
        };
        if moved != 1 {
            tx.rollback().await?;
            return Err(AgentsError::Conflict(name.to_string()));
        }
        let inserted = sqlx::query(
            "INSERT INTO agent_versions (name, version, config, author, note, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (name, version) DO NOTHING",
        )
        .bind(name)
        .bind(next)
        .bind(config.to_string())
        .bind(author)
        .bind(note)
        .bind(now)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if inserted != 1 {
            tx.rollback().await?;
            return Err(AgentsError::Conflict(name.to_string()));
        }
        tx.commit().await?;
        Ok(next)
    }

    /// Makes the draft the live version; returns it.
    pub async fn publish(&self, name: &str) -> Result<i64> {
        let heads = self
            .heads(name)
            .await?
            .ok_or_else(|| AgentsError::Unknown(name.to_string()))?;
        let done = sqlx::query(
            "UPDATE agents SET live_version = draft_version, updated_at = $1 WHERE name = $2 AND draft_version = $3",
        )
        .bind(now_ms())
        .bind(name)
        .bind(heads.draft)
        .execute(self.pool())
        .await?;
        if done.rows_affected() != 1 {
            return Err(AgentsError::Conflict(name.to_string()));
        }
        Ok(heads.draft)
    }

    /// Removes the agent and every version; false when it did not exist.
    pub async fn delete(&self, name: &str) -> Result<bool> {
        let mut tx = self.pool().begin().await?;
        let gone = sqlx::query("DELETE FROM agents WHERE name = $1")
            .bind(name)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        sqlx::query("DELETE FROM agent_versions WHERE name = $1")
            .bind(name)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(gone == 1)
    }
}

fn parse(name: &str, version: i64, text: &str) -> Result<Value> {
    serde_json::from_str(text).map_err(|e| AgentsError::Malformed {
        name: name.to_string(),
        version,
        reason: e.to_string(),
    })
}

fn version_of(name: &str, r: &sqlx::any::AnyRow) -> Result<Version> {
    let version: i64 = r.try_get("version")?;
    Ok(Version {
        config: parse(name, version, &r.try_get::<String, _>("config")?)?,
        author: r.try_get("author")?,
        note: r.try_get("note")?,
        created_at: r.try_get("created_at")?,
        version,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn drafts_versions_publish_and_conflicts() {
        let store = Store::open("sqlite::memory:").await.unwrap();
        let repo = Repo::new(store);
        assert!(repo.heads("a").await.unwrap().is_none());
        let v1 = repo
            .put_draft("a", None, &json!({"n": 1}), "alice", "write")
            .await
            .unwrap();
        assert_eq!(v1, 1);
        assert!(matches!(
            repo.put_draft("a", None, &json!({}), "bob", "write").await,
            Err(AgentsError::Conflict(_))
        ));
        let v2 = repo
            .put_draft("a", Some(1), &json!({"n": 2}), "alice", "patch")
            .await
            .unwrap();
        assert_eq!(v2, 2);
        // A writer that read version 1 loses; nothing is overwritten.
        assert!(matches!(
            repo.put_draft("a", Some(1), &json!({"n": 9}), "bob", "patch")
                .await,
            Err(AgentsError::Conflict(_))
        ));
        assert_eq!(repo.version("a", 2).await.unwrap().config, json!({"n": 2}));
        assert_eq!(repo.publish("a").await.unwrap(), 2);
        assert_eq!(
            repo.heads("a").await.unwrap(),
            Some(Heads {
                draft: 2,
                live: Some(2)
            })
        );
        assert_eq!(repo.versions("a").await.unwrap().len(), 2);
        assert!(repo.delete("a").await.unwrap());
        assert!(repo.versions("a").await.unwrap().is_empty());
    }
}
