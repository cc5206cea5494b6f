//! Authorizations a person completes in a browser for a source as a whole (an upstream MCP
//! server's OAuth authorization-code grant), finished by the HTTP face's callback route.
//!
//! The source side parks an authorization and names its link; the person's browser comes back
//! to Toolshed's callback with the authorization server's answer, which the face hands to
//! [`SourceAuthorizations::finish`]. The trait lets the face and the engine reach the
//! implementation (in the MCP source crate) without depending on it.

/// Why a callback did not complete an authorization: an HTTP status and a message that names
/// no secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct AuthorizationError {
    pub status: u16,
    pub message: String,
}

/// An authorization that waits for a person: the source, the link to open, and when it started
/// and expires (Unix milliseconds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingAuthorization {
    pub source: String,
    pub url: String,
    pub since_ms: i64,
    pub expires_at_ms: i64,
}

/// The parked authorizations of sources, completed from the callback.
#[async_trait::async_trait]
pub trait SourceAuthorizations: Send + Sync {
    /// The authorizations waiting now, by source. Their links let whoever opens them authorize
    /// Toolshed with their own account: show them only to those trusted with the source.
    fn pending(&self) -> Vec<PendingAuthorization> {
        Vec::new()
    }

    /// Completes the authorization answered by `query`, the query string of the callback the
    /// authorization server redirected the browser to (`code` and `state`, or `error`).
    /// Answers the name of the source now authorized.
    async fn finish(&self, query: &str) -> Result<String, AuthorizationError>;
}
