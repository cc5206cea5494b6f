//! Imports OpenAPI 2.0 (Swagger), 3.0 and 3.1 documents, JSON or YAML, as Toolshed tools.
//!
//! - [`parse`] — [`parse_document`] and [`load_document`].
//! - [`refs`] — `$ref` resolution over the root and its relative files.
//! - [`schema`] — OpenAPI schemas to self-contained JSON Schema with `$defs`.
//! - [`import`](mod@import): operations to [`toolshed_core::Tool`]s ([`import()`]).
//! - [`security`] — security schemes and per-operation requirements, bound to the credentials
//!   configured per scheme ([`SchemeCredentials`]).
//! - [`handler`] — the handler that performs a call through `toolshed-outbound`.
//! - [`error`] — [`OpenApiError`].
//!
//! Every operation becomes one tool at `namespace.<tag>.<operationId>` whose input object holds
//! the path, query, header and cookie parameters and the (flattened) request body.

pub mod error;
pub mod handler;
pub mod import;
pub mod parse;
pub(crate) mod refs;
pub mod resources;
pub mod schema;
pub mod security;

pub use error::OpenApiError;
pub use handler::OpenApiHandler;
pub use import::{count_operations, detect_version, import, ImportOptions, Imported};
pub use parse::{load_document, parse_document};
pub use schema::Version;
pub use security::{SchemeCredentials, SecurityWarning};
