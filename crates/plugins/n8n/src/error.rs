//! The plugin's errors and how they become [`ToolError`]s.
//!
//! Every message names what went wrong and what to do about it; none ever contains the API key
//! (the client scrubs it from anything n8n or the network stack echoes back).

use toolshed_core::{ToolError, ToolErrorKind};

/// What can go wrong configuring the plugin or talking to n8n.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum N8nError {
    /// The configuration cannot work (bad URL, empty key, private address not allowed).
    #[error("invalid n8n configuration: {0}")]
    InvalidConfig(String),
    /// n8n answered 401.
    #[error("n8n rejected the API key (401) at {base_url}: check that the key exists, has not expired and belongs to this instance")]
    Unauthorized { base_url: String },
    /// n8n answered 403: the key lacks a scope (or the license lacks the feature).
    #[error("n8n refused {method} {path} (403: {message}): the API key is missing the scope this call needs (create a key with that scope in n8n's settings), or the instance's license lacks the feature")]
    Forbidden {
        method: String,
        path: String,
        message: String,
    },
    /// The connection could not be made (refused, DNS, TLS).
    #[error("n8n is unreachable at {url}: {reason}")]
    Unreachable { url: String, reason: String },
    /// The request took longer than allowed.
    #[error("n8n did not answer {method} {path} within {seconds}s")]
    Timeout {
        method: String,
        path: String,
        seconds: u64,
    },
    /// The route itself does not exist on this n8n.
    #[error("this n8n version has no endpoint {method} {path} (404); the plugin targets the public API of n8n 2.41")]
    NoEndpoint { method: String, path: String },
    /// The route exists but the resource does not.
    #[error("{0}")]
    NotFound(String),
    /// n8n refused the arguments (400, 409, 422...).
    #[error("n8n refused {method} {path} ({status}): {message}")]
    Rejected {
        method: String,
        path: String,
        status: u16,
        message: String,
    },
    /// The reply was larger than the configured cap; reading stopped there.
    #[error("n8n's reply to {method} {path} is larger than the {limit}-byte cap (max_response_bytes); ask for less (a smaller page, or without item data) or raise the cap")]
    TooLarge {
        method: String,
        path: String,
        limit: u64,
    },
    /// Signing in with the configured email and password failed.
    #[error("n8n login as '{email}' at {base_url} failed ({status}: {message}); check [n8n] email and password (a user with MFA cannot sign in this way)")]
    LoginFailed {
        base_url: String,
        email: String,
        status: u16,
        message: String,
    },
    /// The call needs n8n's editor API, which only a signed-in user may use.
    #[error("{what} is part of n8n's editor API, which the API key cannot use: configure [n8n] email and password (an owner or admin login) to enable it")]
    NeedsLogin { what: String },
    /// n8n failed (5xx) or answered something unreadable.
    #[error("n8n failed on {method} {path} ({status}): {message}")]
    Upstream {
        method: String,
        path: String,
        status: u16,
        message: String,
    },
}

impl N8nError {
    /// The [`ToolErrorKind`] this error maps to.
    pub fn kind(&self) -> ToolErrorKind {
        match self {
            N8nError::InvalidConfig(_) => ToolErrorKind::Internal,
            N8nError::Unauthorized { .. } | N8nError::Forbidden { .. } => {
                ToolErrorKind::Unauthorized
            }
            N8nError::Unreachable { .. }
            | N8nError::Upstream { .. }
            | N8nError::TooLarge { .. } => ToolErrorKind::Upstream,
            N8nError::LoginFailed { .. } => ToolErrorKind::Unauthorized,
            N8nError::NeedsLogin { .. } => ToolErrorKind::Unauthorized,
            N8nError::Timeout { .. } => ToolErrorKind::Timeout,
            N8nError::NoEndpoint { .. } | N8nError::NotFound(_) => ToolErrorKind::NotFound,
            N8nError::Rejected { status, .. } if *status == 409 => ToolErrorKind::Conflict,
            N8nError::Rejected { .. } => ToolErrorKind::InvalidInput,
        }
    }
}

impl From<N8nError> for ToolError {
    fn from(e: N8nError) -> Self {
        ToolError::new(e.kind(), e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_follow_the_failure() {
        let e = N8nError::Unauthorized {
            base_url: "http://x".into(),
        };
        assert_eq!(e.kind(), ToolErrorKind::Unauthorized);
        assert!(e.to_string().starts_with("n8n rejected the API key (401)"));
        let e = N8nError::NoEndpoint {
            method: "POST".into(),
            path: "/workflows/1/archive".into(),
        };
        assert_eq!(e.kind(), ToolErrorKind::NotFound);
        assert!(e
            .to_string()
            .contains("this n8n version has no endpoint POST /workflows/1/archive"));
        let t: ToolError = N8nError::Rejected {
            method: "PUT".into(),
            path: "/workflows/1".into(),
            status: 409,
            message: "x".into(),
        }
        .into();
        assert_eq!(t.kind, ToolErrorKind::Conflict);
        let t: ToolError = N8nError::Forbidden {
            method: "GET".into(),
            path: "/variables".into(),
            message: "Forbidden".into(),
        }
        .into();
        assert_eq!(t.kind, ToolErrorKind::Unauthorized);
        assert!(t.message.contains("scope"));
    }
}
