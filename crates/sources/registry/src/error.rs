//! [`SourcesError`]: why a source could not be declared, stored, loaded or assembled.

/// Why a source could not be declared, stored, loaded or assembled. Every variant names the
/// source (or both sides of a conflict) so a one-line report is enough to act on.
#[derive(Debug, thiserror::Error)]
pub enum SourcesError {
    /// The spec cannot work as written (bad name, missing or conflicting fields, bad pattern).
    #[error("source '{name}': {reason}")]
    Invalid { name: String, reason: String },

    /// A secret given as `env:NAME` names a variable that is not set.
    #[error("source '{name}': {reason}")]
    Secret { name: String, reason: String },

    /// Two declarations use one name.
    #[error(
        "source name '{name}' is declared twice: in {first} and in {second}; remove or rename one"
    )]
    DuplicateName {
        name: String,
        first: String,
        second: String,
    },

    /// Importing the source failed (unreadable document, unreachable endpoint, ...).
    #[error("source '{name}': import failed: {reason}")]
    Import { name: String, reason: String },

    /// Two tools share one path; both origins are named.
    #[error(transparent)]
    Catalog(#[from] toolshed_core::CatalogError),

    /// The store failed.
    #[error("source store: {0}")]
    Store(#[from] toolshed_store::StoreError),

    /// Sealing or opening a stored secret failed (e.g. the key changed).
    #[error("sealed secrets: {0}")]
    SecretBox(String),

    /// A stored record is not a valid source spec.
    #[error("stored source '{name}' is malformed: {reason}")]
    Malformed { name: String, reason: String },

    /// No source has that name.
    #[error("no source named '{0}'")]
    NotFound(String),
}

impl SourcesError {
    /// [`SourcesError::Invalid`] for the source `name`.
    pub fn invalid(name: &str, reason: impl Into<String>) -> Self {
        Self::Invalid {
            name: name.to_string(),
            reason: reason.into(),
        }
    }

    /// [`SourcesError::Import`] for the source `name`.
    pub fn import(name: &str, reason: impl std::fmt::Display) -> Self {
        Self::Import {
            name: name.to_string(),
            reason: reason.to_string(),
        }
    }
}
