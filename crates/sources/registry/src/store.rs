//! [`SourceStore`]: sources declared at runtime, persisted in Toolshed's store with sealed
//! secrets; it also keeps, sealed, the tokens persons approved for upstreams
//! ([`SourceStore::token_vault`]).

use std::sync::Arc;

use toolshed_mcp_source::person::TokenVault;
use toolshed_store::Store;

use crate::error::SourcesError;
use crate::secrets::Sealer;
use crate::spec::SourceSpec;

/// One stored source, opened.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredSource {
    pub spec: SourceSpec,
    pub created_at: i64,
    pub updated_at: i64,
}

/// What changes when a stored source is added, replaced or removed: names, update times and
/// the stored (sealed) text.
pub type Fingerprint = Vec<(String, i64, String)>;

/// The store's sources, sealed at rest.
#[derive(Clone, Debug)]
pub struct SourceStore {
    store: Store,
    sealer: Sealer,
}

impl SourceStore {
    pub fn new(store: Store, sealer: Sealer) -> Self {
        Self { store, sealer }
    }

    /// Validates, seals and writes (inserting or replacing) a source.
    pub async fn put(&self, spec: &SourceSpec) -> Result<(), SourcesError> {
        spec.validate()?;
        let sealed = self.sealer.seal(spec);
        let config = serde_json::to_value(&sealed).map_err(|e| SourcesError::Malformed {
            name: spec.name().to_string(),
            reason: e.to_string(),
        })?;
        self.store
            .put_source(spec.name(), spec.kind(), &config)
            .await?;
        Ok(())
    }

    /// Removes a source; returns whether it existed.
    pub async fn remove(&self, name: &str) -> Result<bool, SourcesError> {
        Ok(self.store.delete_source(name).await?)
    }

    /// Every stored source, opened, by name. A record that cannot be read or opened is
    /// returned as `Err((name, error))` so it can be reported without hiding the others.
    pub async fn list(
        &self,
    ) -> Result<Vec<Result<StoredSource, (String, SourcesError)>>, SourcesError> {
        let records = self.store.list_sources().await?;
        Ok(records
            .into_iter()
            .map(|r| {
                let name = r.name.clone();
                let spec: SourceSpec = serde_json::from_value(r.config).map_err(|e| {
                    (
                        name.clone(),
                        SourcesError::Malformed {
                            name: name.clone(),
                            reason: e.to_string(),
                        },
                    )
                })?;
                let spec = self.sealer.open(&spec).map_err(|e| (name.clone(), e))?;
                Ok(StoredSource {
                    spec,
                    created_at: r.created_at,
                    updated_at: r.updated_at,
                })
            })
            .collect())
    }

    /// One stored source by name.
    pub async fn get(&self, name: &str) -> Result<StoredSource, SourcesError> {
        for r in self.list().await? {
            match r {
                Ok(s) if s.spec.name() == name => return Ok(s),
                Err((n, e)) if n == name => return Err(e),
                _ => {}
            }
        }
        Err(SourcesError::NotFound(name.to_string()))
    }

    /// Names, update times and stored text, cheap to compare for change detection.
    pub async fn fingerprint(&self) -> Result<Fingerprint, SourcesError> {
        Ok(self
            .store
            .list_sources()
            .await?
            .into_iter()
            .map(|r| (r.name, r.updated_at, r.config.to_string()))
            .collect())
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Where upstreams keep the tokens persons approved: this store, sealed with its key.
    pub fn token_vault(&self) -> Arc<dyn TokenVault> {
        Arc::new(self.clone())
    }
}

/// Largest token document kept (an authorization server's answer with its refresh token).
const MAX_TOKEN_DOCUMENT: usize = 64 * 1024;

#[async_trait::async_trait]
impl TokenVault for SourceStore {
    async fn load(&self, upstream: &str) -> Result<Option<String>, String> {
        let Some(sealed) = self
            .store
            .upstream_token(upstream)
            .await
            .map_err(|e| e.to_string())?
        else {
            return Ok(None);
        };
        self.sealer
            .open_text(&sealed)
            .map(Some)
            .map_err(|e| e.to_string())
    }

    async fn save(&self, upstream: &str, document: &str, create: bool) -> Result<(), String> {
        if document.len() > MAX_TOKEN_DOCUMENT {
            return Err(format!(
                "the token document is {} bytes, more than the {MAX_TOKEN_DOCUMENT} kept",
                document.len()
            ));
        }
        let sealed = self.sealer.seal_text(document);
        if create {
            self.store.put_upstream_token(upstream, &sealed).await
        } else {
            self.store
                .update_upstream_token(upstream, &sealed)
                .await
                .map(|_| ())
        }
        .map_err(|e| e.to_string())
    }

    async fn clear(&self, upstream: &str) -> Result<(), String> {
        self.store
            .delete_upstream_token(upstream)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    async fn lock(&self, upstream: &str) -> Result<Option<Box<dyn Send>>, String> {
        let lock = self
            .store
            .lock_upstream_token(upstream)
            .await
            .map_err(|e| e.to_string())?;
        Ok(lock.map(|l| Box::new(l) as Box<dyn Send>))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolshed_sealed::SecretBox;

    #[tokio::test]
    async fn kept_tokens_are_sealed_at_rest_and_bounded() {
        let store = Store::open("sqlite::memory:").await.unwrap();
        let sources = SourceStore::new(store.clone(), Sealer::new(SecretBox::from_key(&[7; 32])));
        let vault = sources.token_vault();
        let document = r#"{"url":"https://x/mcp","credentials":{"access_token":"at-4711"}}"#;
        // A renewal brings back nothing that was forgotten.
        vault.save("b", document, false).await.unwrap();
        assert_eq!(vault.load("b").await.unwrap(), None);
        vault.save("b", document, true).await.unwrap();
        let at_rest = store.upstream_token("b").await.unwrap().unwrap();
        assert!(!at_rest.contains("at-4711"), "sealed at rest");
        assert_eq!(vault.load("b").await.unwrap().as_deref(), Some(document));
        // Another key cannot open it, and says so without the document.
        let other = SourceStore::new(store.clone(), Sealer::new(SecretBox::from_key(&[8; 32])));
        let e = other.token_vault().load("b").await.unwrap_err();
        assert!(!e.contains("at-4711") && e.contains("changed"), "{e}");
        // Too large a document is refused, and what was kept stays.
        let huge = "x".repeat(MAX_TOKEN_DOCUMENT + 1);
        assert!(vault
            .save("b", &huge, false)
            .await
            .unwrap_err()
            .contains("bytes"));
        assert_eq!(vault.load("b").await.unwrap().as_deref(), Some(document));
        vault.clear("b").await.unwrap();
        assert_eq!(vault.load("b").await.unwrap(), None);
    }
}
