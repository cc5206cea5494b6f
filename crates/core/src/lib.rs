//! Toolshed's core types, at the bottom of the layer cake.
//!
//! Everything above (store, sandbox, search, sources, plugins, the engine and the faces) speaks in
//! these types:
//!
//! - [`path`]: [`ToolPath`], the validated dot path of a tool (`github.issues.create`).
//! - [`tool`]: [`ToolDef`] (what a tool is), [`ToolHandler`] (what it does), [`Tool`] (both),
//!   [`ToolContext`] (what a handler may ask for) and [`ToolError`] (how a handler fails).
//! - [`plugin`]: [`Plugin`], a group of tools sharing auth providers.
//! - [`catalog`]: [`Catalog`], an immutable snapshot of all tools, and [`SharedCatalog`], the
//!   atomically swapped handle to the current one.
//! - [`policy`]: roles with dot-glob patterns, principals, and the per-principal [`Access`] view.
//! - [`location`]: [`locate`] / [`is_url`], the one answer to "is this a URL or a file?".
//! - [`authorizations`]: [`SourceAuthorizations`], authorizations of sources a person completes
//!   in a browser (upstream OAuth), finished by the HTTP face's callback.
//! - [`servers`]: virtual MCP servers, named views of the catalog ([`VirtualServer`]).
//! - [`schema`]: compiled JSON Schema validators whose errors name the JSON pointer and the rule.

pub mod authorizations;
pub mod catalog;
pub mod formats;
pub mod location;
pub mod notices;
pub mod path;
pub mod plugin;
pub mod policy;
pub mod rules;
pub mod schema;
pub mod servers;
pub mod tool;

pub use authorizations::{AuthorizationError, PendingAuthorization, SourceAuthorizations};
pub use catalog::{Catalog, CatalogBuilder, CatalogError, Renamed, SharedCatalog};
pub use location::{is_url, locate, Location};
pub use path::{PathError, ToolPath};
pub use plugin::{AuthProviderDef, Plugin};
pub use policy::{Access, Pattern, PatternError, Policy, PolicyError, Principal, Role};
pub use rules::{CallRule, Rules};
pub use schema::{CompiledSchema, Explained, SchemaError, Violation};
pub use servers::{ServerDef, ServerError, ServerNames, VirtualServer};
pub use tool::{
    Annotations, ClientChannel, EngineAccess, EntryKind, EntryOp, NestedRun, Progress,
    ProgressSink, TokenSource, Tool, ToolContext, ToolDef, ToolError, ToolErrorKind, ToolHandler,
    WireSlot,
};
