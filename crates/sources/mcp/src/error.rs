//! Errors raised while connecting to, listing or supervising an upstream MCP server.
//!
//! Tool calls fail with [`toolshed_core::ToolError`] instead; this type covers the source as a
//! whole. Every variant names the upstream so a gateway log line is self-explanatory.

use std::time::Duration;

/// Why an upstream could not be connected, listed or used.
#[derive(Debug, thiserror::Error)]
pub enum McpSourceError {
    /// The configuration cannot work (bad namespace, bad URL, bad header...).
    #[error("upstream '{name}': invalid configuration: {reason}")]
    InvalidConfig { name: String, reason: String },

    /// The child process could not be started at all.
    #[error("upstream '{name}': could not start '{command}': {source}")]
    Spawn {
        name: String,
        command: String,
        #[source]
        source: std::io::Error,
    },

    /// The server did not complete the MCP handshake in time (it hangs at start).
    #[error("upstream '{name}' did not complete the MCP handshake within {timeout:?}{detail}")]
    ConnectTimeout {
        name: String,
        timeout: Duration,
        /// Extra context such as the tail of the child's stderr, prefixed with ": ".
        detail: String,
    },

    /// The server closed the connection or answered the handshake with an error
    /// (for example a child that crashes at start).
    #[error("upstream '{name}': MCP handshake failed: {message}")]
    Handshake { name: String, message: String },

    /// The server negotiated a protocol revision outside the supported range.
    #[error(
        "upstream '{name}' negotiated MCP protocol version {version}; supported are {min} through {max}"
    )]
    UnsupportedProtocol {
        name: String,
        version: String,
        min: &'static str,
        max: &'static str,
    },

    /// A streamable HTTP upstream points at a loopback, private or link-local address.
    #[error(
        "upstream '{name}': refusing to connect to '{host}' ({reason}); set allow_private to permit it"
    )]
    PrivateAddress {
        name: String,
        host: String,
        reason: String,
    },

    /// A request to a connected upstream failed (for example `tools/list`).
    #[error("upstream '{name}': {operation} failed: {message}")]
    Request {
        name: String,
        operation: &'static str,
        message: String,
    },

    /// The upstream is reconnecting and did not come back in time.
    #[error(
        "upstream '{name}' is unavailable (reconnecting: {last_error}); gave up after {waited:?}"
    )]
    Unavailable {
        name: String,
        waited: Duration,
        last_error: String,
    },

    /// [`crate::Upstream::shutdown`] was called.
    #[error("upstream '{name}' has been shut down")]
    Closed { name: String },
}

impl McpSourceError {
    /// The namespace of the upstream this error is about.
    pub fn upstream(&self) -> &str {
        match self {
            Self::InvalidConfig { name, .. }
            | Self::Spawn { name, .. }
            | Self::ConnectTimeout { name, .. }
            | Self::Handshake { name, .. }
            | Self::UnsupportedProtocol { name, .. }
            | Self::PrivateAddress { name, .. }
            | Self::Request { name, .. }
            | Self::Unavailable { name, .. }
            | Self::Closed { name } => name,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_upstream() {
        let e = McpSourceError::ConnectTimeout {
            name: "memory".into(),
            timeout: Duration::from_secs(2),
            detail: ": stderr: booting".into(),
        };
        assert_eq!(e.upstream(), "memory");
        let text = e.to_string();
        assert!(text.contains("memory") && text.contains("2s") && text.contains("booting"));

        let e = McpSourceError::PrivateAddress {
            name: "web".into(),
            host: "127.0.0.1".into(),
            reason: "loopback address".into(),
        };
        assert!(e.to_string().contains("allow_private"));
    }
}
