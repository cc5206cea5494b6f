//! Everything that leaves the machine.
//!
//! - [`client`] — [`Outbound`], a guarded HTTP client. It refuses private, loopback, link-local,
//!   unspecified and CGNAT addresses (literal or DNS-resolved, redirects included) unless
//!   [`OutboundConfig::allow_private`] is set, caps response sizes while streaming, and turns
//!   non-2xx answers into [`toolshed_core::ToolError`]s of kind `Upstream`.
//!   Redirects are followed hop by hop under the rule of [`redirect`].
//! - [`redirect`] — credentials never follow a redirect to another origin.
//! - [`net`] — the address classification and the filtering DNS resolver.
//! - [`auth`] — [`AuthConfig`] (API key, bearer, basic, OAuth2 client credentials) applied to
//!   requests, with cached and shared OAuth2 token fetches.
//! - [`secret`] — [`Secret`], a string that never shows itself in Debug, Display or Serialize.
//! - [`error`] — [`OutboundError`].

pub mod auth;
pub mod client;
pub mod error;
pub mod net;
pub mod redirect;
pub mod secret;

pub use auth::{ApiKeyLocation, AuthConfig, TokenExchange, UserOAuth};
pub use client::{Outbound, OutboundConfig, Response};
pub use error::OutboundError;
pub use reqwest::{Method, RequestBuilder, StatusCode};
pub use secret::Secret;
