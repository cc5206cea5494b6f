//! Errors of outbound requests, convertible into [`ToolError`]s with the right kind.

use serde_json::json;
use toolshed_core::{ToolError, ToolErrorKind};

/// Why an outbound request failed.
#[derive(Debug, thiserror::Error)]
pub enum OutboundError {
    #[error("refused to connect to {host} ({addr}): it is a {class} address; set allow_private to reach it")]
    PrivateAddress {
        host: String,
        addr: String,
        class: &'static str,
    },
    #[error("refused to connect to {host} ({addr}): the address is in a denied network (denied_networks)")]
    DeniedAddress { host: String, addr: String },
    #[error("invalid URL '{url}': {reason}")]
    InvalidUrl { url: String, reason: String },
    #[error("response from {url} is larger than the limit of {limit} bytes")]
    TooLarge { url: String, limit: u64 },
    #[error("upstream answered {status}: {body_excerpt}")]
    Status { status: u16, body_excerpt: String },
    #[error("request timed out: {0}")]
    Timeout(String),
    #[error("request failed: {0}")]
    Http(String),
    #[error("OAuth2 token request to {url} failed: {reason}")]
    Token { url: String, reason: String },
    #[error("secret '{name}' is not available: {reason}")]
    MissingSecret { name: String, reason: String },
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
}

impl OutboundError {
    /// The refusal of `addr` (of `host`) for the reason `class` (see
    /// [`crate::net::AddressRule::refusal`]).
    pub fn refused_address(host: String, addr: String, class: &'static str) -> Self {
        if class == crate::net::DENIED {
            OutboundError::DeniedAddress { host, addr }
        } else {
            OutboundError::PrivateAddress { host, addr, class }
        }
    }

    /// The [`ToolError`] a handler should return for this failure.
    pub fn into_tool_error(self) -> ToolError {
        let kind = match &self {
            OutboundError::PrivateAddress { .. }
            | OutboundError::DeniedAddress { .. }
            | OutboundError::InvalidUrl { .. } => ToolErrorKind::InvalidInput,
            OutboundError::Timeout(_) => ToolErrorKind::Timeout,
            OutboundError::Token { .. } | OutboundError::MissingSecret { .. } => {
                ToolErrorKind::Unauthorized
            }
            OutboundError::Io(_) => ToolErrorKind::Internal,
            OutboundError::TooLarge { .. }
            | OutboundError::Status { .. }
            | OutboundError::Http(_) => ToolErrorKind::Upstream,
        };
        let message = self.to_string();
        let err = ToolError::new(kind, message);
        match self {
            OutboundError::Status {
                status,
                body_excerpt,
            } => err.with_data(json!({"status": status, "body_excerpt": body_excerpt})),
            _ => err,
        }
    }
}

impl From<OutboundError> for ToolError {
    fn from(e: OutboundError) -> Self {
        e.into_tool_error()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_errors_carry_data() {
        let e: ToolError = OutboundError::Status {
            status: 404,
            body_excerpt: "nope".into(),
        }
        .into();
        assert_eq!(e.kind, ToolErrorKind::Upstream);
        assert!(e.message.contains("404") && e.message.contains("nope"));
        assert_eq!(e.data.unwrap()["status"], 404);
    }

    #[test]
    fn kinds_follow_the_cause() {
        let e: ToolError = OutboundError::Timeout("slow".into()).into();
        assert_eq!(e.kind, ToolErrorKind::Timeout);
        let e: ToolError = OutboundError::PrivateAddress {
            host: "x".into(),
            addr: "127.0.0.1".into(),
            class: "loopback",
        }
        .into();
        assert_eq!(e.kind, ToolErrorKind::InvalidInput);
    }
}
