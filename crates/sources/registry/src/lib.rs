//! Declared tool sources: how they are written down, stored, loaded and assembled.
//!
//! - [`spec`] — [`SourceSpec`] (`kind = "openapi" | "graphql" | "mcp"`), with generic
//!   [`OverrideSpec`]s (mark destructive / read-only, or hide, by dot-glob).
//! - [`secrets`] — [`Sealer`]: literal secrets sealed at rest, `env:NAME` resolved on load.
//! - [`store`] — [`SourceStore`]: sources added at runtime, persisted with sealed secrets.
//! - [`load`](mod@load) — one source to tools ([`load()`], [`dry_run`]).
//! - [`registry`] — [`Registry`]: every source loaded concurrently, failures isolated, the
//!   catalog assembled and re-assembled when upstream MCP servers or stored sources change.
//! - [`n8n`] — the n8n plugin plus the rest of n8n's public API imported from its OpenAPI
//!   document.
//! - [`error`] — [`SourcesError`].

pub mod error;
pub mod load;
pub mod n8n;
pub mod registry;
pub mod secrets;
pub mod spec;
pub mod store;

pub use error::SourcesError;
pub use load::{
    apply_overrides, auth_config, dry_run, load, scheme_credentials, Loaded, Progress, Report,
    ToolSummary,
};
pub use n8n::{n8n_plugin, N8nPlugin, N8nSettings};
pub use registry::{
    declare, declare_with_store, spawn_store_poll, Assembled, Declared, Origin, Registry, Rejected,
    SourceReport,
};
pub use secrets::Sealer;
pub use spec::{
    AuthSpec, GraphqlSpec, KeyLocation, McpSpec, OpenApiSpec, OverrideSpec, SchemeAuthKind,
    SchemeAuthSpec, SourceSpec,
};
pub use store::{SourceStore, StoredSource};
