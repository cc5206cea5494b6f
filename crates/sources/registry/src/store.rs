//! [`SourceStore`]: sources declared at runtime, persisted in Toolshed's store with sealed
//! secrets.

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
}
