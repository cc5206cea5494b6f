//! Custom tools: saved scripts offered as catalog tools. `custom.build` checks a script
//! ([`spec`]: the schemas compile, the code compiles, an optional trial run meets the output
//! schema and the expectation) and saves it ([`repo`]); from then on it is the catalog tool
//! `custom.<id>`, searchable, described and callable from every face like any tool
//! ([`tools`]). Saved tools survive restarts and, on a shared PostgreSQL database, reach every
//! replica (the serving binary polls [`repo::Repo::fingerprint`]).

pub mod repo;
pub mod spec;
pub mod tools;

use std::sync::Arc;

pub use repo::{CustomError, Fingerprint, Repo};
pub use spec::CustomSpec;
pub use tools::OnChange;

/// The plugin id, also the namespace of its tools.
pub const PLUGIN_ID: &str = "custom";

/// The custom tools of one store.
#[derive(Clone)]
pub struct CustomTools {
    inner: tools::Custom,
}

impl CustomTools {
    /// `on_change` is called after a tool was saved or deleted (rebuild the catalog then).
    pub fn new(store: toolshed_store::Store, on_change: OnChange) -> Self {
        Self {
            inner: tools::Custom {
                repo: Repo::new(store),
                on_change,
            },
        }
    }

    /// The plugin as stored now: the builder tools and every saved tool (a malformed stored
    /// tool is left out and logged).
    pub async fn plugin(&self) -> toolshed_core::Plugin {
        let saved = match self.inner.repo.all().await {
            Ok(all) => all.into_iter().map(|(s, _, _)| s).collect(),
            Err(e) => {
                tracing::error!(error = %e, "reading custom tools failed");
                vec![]
            }
        };
        tools::plugin(&self.inner, saved)
    }

    /// What changes when a tool is saved or deleted.
    pub async fn fingerprint(&self) -> Result<Fingerprint, CustomError> {
        self.inner.repo.fingerprint().await
    }
}

/// An `on_change` that does nothing (tests, one-shot commands).
pub fn no_change() -> OnChange {
    Arc::new(|| Box::pin(async {}))
}
