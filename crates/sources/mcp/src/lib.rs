//! Upstream MCP servers as a Toolshed tool source.
//!
//! An [`Upstream`] is one supervised client session (rmcp, the official Rust SDK) to an MCP
//! server reached over stdio (a child process) or streamable HTTP. Its tools are imported under
//! the configured namespace (`memory.create_entities`) with Title Case names, descriptions,
//! schemas and annotations; their handlers forward `tools/call` over the shared session. Like
//! every tool, they are only ever called through the engine (validation, policy, approval,
//! audit).
//!
//! - [`config`]: [`Transport`] and [`UpstreamConfig`].
//! - [`upstream`]: [`Upstream`], the handle: connect, list tools, change notifications, shutdown.
//! - [`connect`]: transports (child process, streamable HTTP) and the handshake, with the
//!   accepted protocol revisions and the `server/discover` fallback.
//! - [`supervisor`]: the session's lifetime: reconnect with backoff, re-list after
//!   `tools/list_changed`, close on shutdown.
//! - `lean` and `h1`: that post without rmcp's generic HTTP code, over the session's own
//!   HTTP/1.1 connections driven by the calling task when the upstream is plain `http`.
//! - `handler`: the tool handler that relays one call as `tools/call`.
//! - `direct`: the fast path of a plain `tools/call` over streamable HTTP (the caller's task
//!   posts the request and reads its answer, rmcp's client worker is not involved), and when
//!   it falls back to rmcp's session.
//! - [`entries`]: resources, resource templates and prompts as catalog entries, read through
//!   the engine like tools.
//! - `relay`: the upstream's requests during a call (elicitation, sampling) relayed to the
//!   client of the face that made the call.
//! - `stderr`: a child's stderr, logged with secrets blanked out, its tail kept for errors.
//! - [`oauth`]: OAuth for streamable HTTP upstreams that ask for a token (discovery, client
//!   credentials, authorization code with PKCE, scope step-up); [`issuer`]: the pinned
//!   authorization server (`oauth.issuer`); [`person`]: the authorization code completed by a
//!   person whose browser comes back to Toolshed's callback.
//! - [`mapping`]: how upstream tools and results map to Toolshed (paths, annotation defaults).
//! - [`error`]: [`McpSourceError`], what connecting or listing can fail with.
//!
//! ```no_run
//! # async fn demo() -> Result<(), toolshed_mcp_source::McpSourceError> {
//! use toolshed_mcp_source::{Upstream, UpstreamConfig};
//! let memory = Upstream::connect(UpstreamConfig::stdio(
//!     "memory",
//!     "npx",
//!     ["-y", "@modelcontextprotocol/server-memory"],
//! ))
//! .await?;
//! let tools = memory.tools().await?; // memory.create_entities, memory.read_graph, ...
//! let mut changes = memory.subscribe_changes();
//! # let _ = (tools, changes.changed());
//! memory.shutdown().await;
//! # Ok(()) }
//! ```

pub mod config;
pub mod connect;
mod direct;
pub mod entries;
pub mod error;
mod h1;
mod handler;
pub mod issuer;
mod lean;
pub mod mapping;
pub mod oauth;
pub mod person;
mod relay;
mod stderr;
pub mod supervisor;
pub mod upstream;

pub use config::{Transport, UpstreamConfig, DEFAULT_CALL_TIMEOUT, DEFAULT_CONNECT_TIMEOUT};
pub use error::McpSourceError;
pub use oauth::{OAuthConfig, OAuthGrant, OAuthSpec};
pub use upstream::{Upstream, MAX_PROTOCOL_VERSION, MIN_PROTOCOL_VERSION};
