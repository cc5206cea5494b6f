//! Small state documents a plugin keeps between calls (for example the verification loop of
//! an n8n work item), shared by every replica on the database.
//!
//! A document is JSON text under `(plugin, key)` with a version number. Writers read, change
//! and write back with [`Store::put_plugin_state`], which succeeds only when the version is
//! still the one they read: two replicas updating one document at once cannot lose an update.

use sqlx::Row;

use crate::{now_ms, Result, Store};

/// Longest plugin id or key stored.
pub const MAX_PLUGIN_STATE_KEY: usize = 256;
/// Largest document stored, in bytes.
pub const MAX_PLUGIN_STATE_VALUE: usize = 64 * 1024;

/// A stored document and the version to pass back when replacing it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginState {
    pub value: String,
    pub version: i64,
}

/// Why a write was not made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PutOutcome {
    Written {
        version: i64,
    },
    /// Another writer changed the document since it was read.
    Conflict,
}

impl Store {
    /// The document under `(plugin, key)`, if any.
    pub async fn plugin_state(&self, plugin: &str, key: &str) -> Result<Option<PluginState>> {
        let row =
            sqlx::query("SELECT value, version FROM plugin_state WHERE plugin = $1 AND key = $2")
                .bind(plugin)
                .bind(key)
                .fetch_optional(&self.pool)
                .await
                .map_err(|e| self.classify(e))?;
        row.map(|r| {
            Ok(PluginState {
                value: r.try_get("value")?,
                version: r.try_get("version")?,
            })
        })
        .transpose()
    }

    /// Writes `value` under `(plugin, key)` if the stored version is still `read` (`None`: the
    /// document must not exist yet).
    pub async fn put_plugin_state(
        &self,
        plugin: &str,
        key: &str,
        read: Option<i64>,
        value: &str,
    ) -> Result<PutOutcome> {
        check_bounds(plugin, key, value)?;
        let now = now_ms();
        let changed = match read {
            None => sqlx::query(
                "INSERT INTO plugin_state (plugin, key, value, version, updated_at) \
                 VALUES ($1, $2, $3, 1, $4) ON CONFLICT (plugin, key) DO NOTHING",
            )
            .bind(plugin)
            .bind(key)
            .bind(value)
            .bind(now)
            .execute(&self.pool)
            .await
            .map_err(|e| self.classify(e))?
            .rows_affected(),
            Some(version) => sqlx::query(
                "UPDATE plugin_state SET value = $1, version = version + 1, updated_at = $2 \
                 WHERE plugin = $3 AND key = $4 AND version = $5",
            )
            .bind(value)
            .bind(now)
            .bind(plugin)
            .bind(key)
            .bind(version)
            .execute(&self.pool)
            .await
            .map_err(|e| self.classify(e))?
            .rows_affected(),
        };
        Ok(if changed == 1 {
            PutOutcome::Written {
                version: read.map_or(1, |v| v + 1),
            }
        } else {
            PutOutcome::Conflict
        })
    }
}

fn check_bounds(plugin: &str, key: &str, value: &str) -> Result<()> {
    let malformed = |reason: String| crate::StoreError::Malformed {
        what: "plugin state".into(),
        reason,
    };
    if plugin.is_empty() || plugin.len() > MAX_PLUGIN_STATE_KEY {
        return Err(malformed(format!(
            "plugin id must be 1..={MAX_PLUGIN_STATE_KEY} bytes"
        )));
    }
    if key.is_empty() || key.len() > MAX_PLUGIN_STATE_KEY {
        return Err(malformed(format!(
            "key must be 1..={MAX_PLUGIN_STATE_KEY} bytes, got {}",
            key.len()
        )));
    }
    if value.len() > MAX_PLUGIN_STATE_VALUE {
        return Err(malformed(format!(
            "value is {} bytes, more than {MAX_PLUGIN_STATE_VALUE}",
            value.len()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn writes_are_versioned_and_a_stale_writer_conflicts() {
        let s = Store::open("sqlite::memory:").await.unwrap();
        assert_eq!(s.plugin_state("n8n", "w1").await.unwrap(), None);
        assert_eq!(
            s.put_plugin_state("n8n", "w1", None, "{\"a\":1}")
                .await
                .unwrap(),
            PutOutcome::Written { version: 1 }
        );
        // A second creator loses.
        assert_eq!(
            s.put_plugin_state("n8n", "w1", None, "{}").await.unwrap(),
            PutOutcome::Conflict
        );
        let read = s.plugin_state("n8n", "w1").await.unwrap().unwrap();
        assert_eq!(read.value, "{\"a\":1}");
        assert_eq!(
            s.put_plugin_state("n8n", "w1", Some(read.version), "{\"a\":2}")
                .await
                .unwrap(),
            PutOutcome::Written { version: 2 }
        );
        // A writer holding the old version does not overwrite the newer document.
        assert_eq!(
            s.put_plugin_state("n8n", "w1", Some(read.version), "{\"a\":3}")
                .await
                .unwrap(),
            PutOutcome::Conflict
        );
        let now = s.plugin_state("n8n", "w1").await.unwrap().unwrap();
        assert_eq!((now.value.as_str(), now.version), ("{\"a\":2}", 2));
        // Plugins do not see each other's keys.
        assert_eq!(s.plugin_state("other", "w1").await.unwrap(), None);
    }

    #[tokio::test]
    async fn oversized_keys_and_values_are_refused_and_nothing_is_stored() {
        let s = Store::open("sqlite::memory:").await.unwrap();
        let long_key = "k".repeat(MAX_PLUGIN_STATE_KEY + 1);
        let err = s
            .put_plugin_state("n8n", &long_key, None, "{}")
            .await
            .unwrap_err();
        assert!(err.to_string().contains("key must be"), "{err}");
        let big = "x".repeat(MAX_PLUGIN_STATE_VALUE + 1);
        let err = s
            .put_plugin_state("n8n", "k", None, &big)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("more than"), "{err}");
        assert_eq!(s.plugin_state("n8n", "k").await.unwrap(), None);
    }
}
