//! Agent definitions as data: a JSON document validated against one JSON Schema
//! ([`schema`]), written and patched through staged checks whose structured errors let a
//! builder (often an LLM) correct itself ([`stages`]), kept with every version in Toolshed's
//! store ([`repo`]), edited through the `agents.*` tools ([`tools`]).
//!
//! Edits land in a draft; `agents.publish` makes the draft the live version runs use.

pub mod repo;
pub mod schema;
pub mod stages;
pub mod tools;

use serde::Serialize;

pub use repo::{AgentsError, Repo};

/// The plugin id, also the namespace of its tools.
pub const PLUGIN_ID: &str = "agents";

/// A model credential configured as `[models.<id>]` (never its secret).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModelCredential {
    pub id: String,
    /// `openai` or `anthropic` (the wire format).
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// Added at runtime (`toolshed models add`) rather than configured in `toolshed.toml`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub runtime: bool,
}

/// The `agents` plugin over a store, with the configured model credentials.
pub fn plugin(
    store: toolshed_store::Store,
    credentials: Vec<ModelCredential>,
) -> toolshed_core::Plugin {
    tools::plugin(tools::Agents {
        repo: Repo::new(store),
        credentials: std::sync::Arc::new(credentials),
    })
}
