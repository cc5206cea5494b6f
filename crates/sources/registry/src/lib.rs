//! Declared tool sources: how they are written down, stored, loaded and assembled.
//!
//! - [`spec`] — [`SourceSpec`] (`kind = "openapi" | "graphql" | "mcp"`), with generic
//!   [`OverrideSpec`]s (mark destructive / read-only, or hide, by dot-glob).
//! - [`secrets`] — [`Sealer`]: literal secrets sealed at rest, `env:NAME` resolved on load.
//! - [`store`] — [`SourceStore`]: sources added at runtime, persisted with sealed secrets.
//! - [`load`](mod@load) — one source to tools ([`load()`], [`dry_run`]).
//! - [`registry`] — [`Registry`]: every source loaded concurrently, failures isolated, the
//!   catalog assembled and re-assembled when upstream MCP servers or stored sources change.
//! - [`error`] — [`SourcesError`].

pub mod error;
pub mod load;
pub mod registry;
pub mod secrets;
pub mod spec;
pub mod store;

pub use error::SourcesError;
pub use load::{
    apply_overrides, auth_config, dry_run, import_openapi_blocking, load, scheme_credentials,
    ImportProgress, LoadedSource, McpContext, Report, ToolSummary,
};
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
pub use toolshed_mcp_source::person::PersonGrants;
pub use toolshed_mcp_source::{OAuthGrant, OAuthSpec};
