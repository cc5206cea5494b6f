//! The n8n plugin: tools under `n8n.` over an n8n instance's public API (`/api/v1`).
//!
//! ```no_run
//! # use std::time::Duration;
//! let plugin = toolshed_n8n::plugin(toolshed_n8n::N8nConfig {
//!     base_url: "https://n8n.example.com".into(),
//!     api_key: std::env::var("N8N_API_KEY").unwrap(),
//!     timeout: Duration::from_secs(30),
//!     allow_private: false,
//! })?;
//! # Ok::<(), toolshed_n8n::N8nError>(())
//! ```
//!
//! # What it offers
//! - Executions: `list`, `get` (a summary under 1,000 tokens with guidance to the next call),
//!   `get_node` (one node's input, every output branch, parameters and error, paged, under
//!   20,000 tokens), `debug`, `retry`, `stop`, `delete`.
//! - Workflows: `list`, `get` (compact), `create`, `update`, `activate`, `deactivate`,
//!   `archive`, `unarchive`, `delete`.
//! - Credentials (metadata only), credential schemas, tags, projects, variables (keys unless
//!   values are asked for), data tables (tables, columns, rows query/insert/update/upsert/delete).
//! - Node discovery over the node types the instance's workflows use (the public API has no
//!   node-type listing; the tools say so).
//!
//! The reading of executions is done by pure functions ([`summary::summarize`],
//! [`node::node_detail`], [`debug::debug_execution`]) over the JSON of
//! `GET /executions/:id?includeData=true`, built on [`execution::Execution`]: node types and
//! parameters come from `workflowData`, inputs are derived from the feeding node's output
//! branch, all runs and all outputs are read, and `resumeToken`, `contextData`, stack traces and
//! request headers are stripped everywhere. Item data is marked `_untrusted`.
//!
//! # The rest of the public API
//! The hand-written tools cover the operations listed by [`hand_written_paths`]. Every other
//! operation of n8n's public API comes from importing the bundled OpenAPI document
//! ([`public_api_spec`], n8n 2.41.1) with an OpenAPI importer under the `n8n` namespace, the
//! plugin's base URL (`{base}/api/v1`) and the same `X-N8N-API-KEY` auth; where an imported
//! operation is one of [`hand_written_paths`], the hand-written tool wins and the imported one is
//! dropped.

pub mod client;
pub mod debug;
pub mod error;
pub mod execution;
pub mod node;
pub mod sanitize;
pub mod summary;
pub mod tools;

use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

pub use client::N8nClient;
pub use error::N8nError;
pub use node::{NodeRequest, NODE_BUDGET};
pub use summary::SUMMARY_BUDGET;

/// The plugin id, also the namespace of its tools.
pub const PLUGIN_ID: &str = "n8n";

/// The n8n version whose public API the plugin and its bundled spec follow.
pub const N8N_API_VERSION: &str = "2.41.1";

/// How to reach one n8n instance.
#[derive(Clone)]
pub struct N8nConfig {
    /// The instance's URL, e.g. `https://n8n.example.com` (with or without `/api/v1`).
    pub base_url: String,
    /// The public API key. Never logged or shown: `Debug` redacts it.
    pub api_key: String,
    /// Longest time one request may take.
    pub timeout: Duration,
    /// Allow a loopback, private or link-local address as `base_url` (off by default elsewhere:
    /// it guards against pointing the plugin at internal services).
    pub allow_private: bool,
}

impl fmt::Debug for N8nConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("N8nConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &"[redacted]")
            .field("timeout", &self.timeout)
            .field("allow_private", &self.allow_private)
            .finish()
    }
}

impl N8nConfig {
    /// Checks the URL, the key and the private-address rule.
    pub fn validate(&self) -> Result<(), N8nError> {
        if self.api_key.trim().is_empty() {
            return Err(N8nError::InvalidConfig("the API key is empty".into()));
        }
        if self.timeout.is_zero() {
            return Err(N8nError::InvalidConfig("the timeout is zero".into()));
        }
        let url = reqwest::Url::parse(self.base_url.trim()).map_err(|e| {
            N8nError::InvalidConfig(format!("base_url '{}' is not a URL: {e}", self.base_url))
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(N8nError::InvalidConfig(format!(
                "base_url '{}' must be http or https",
                self.base_url
            )));
        }
        let host = url.host_str().unwrap_or_default();
        if host.is_empty() {
            return Err(N8nError::InvalidConfig(format!(
                "base_url '{}' has no host",
                self.base_url
            )));
        }
        if !self.allow_private && is_private_host(host) {
            return Err(N8nError::InvalidConfig(format!(
                "base_url '{}' points at a private or loopback address; set allow_private to use it",
                self.base_url
            )));
        }
        Ok(())
    }
}

/// `true` for `localhost` and for any address the shared outbound classification refuses
/// (loopback, private, link-local, CGNAT, unique-local, reserved, ...). Names other than
/// `localhost` are checked again at connection time by the guarded resolver of the client.
pub fn is_private_host(host: &str) -> bool {
    let h = host.trim_start_matches('[').trim_end_matches(']');
    if h.eq_ignore_ascii_case("localhost") || h.to_ascii_lowercase().ends_with(".localhost") {
        return true;
    }
    h.parse::<IpAddr>()
        .is_ok_and(|ip| toolshed_outbound::net::classify(ip).is_some())
}

/// The n8n plugin: id `n8n`, every tool under `n8n.`.
pub fn plugin(config: N8nConfig) -> Result<toolshed_core::Plugin, N8nError> {
    config.validate()?;
    let client = Arc::new(N8nClient::new(
        &config.base_url,
        &config.api_key,
        config.timeout,
        config.allow_private,
    )?);
    let mut p = toolshed_core::Plugin::new(
        PLUGIN_ID,
        "n8n",
        format!(
            "Workflows, executions, credentials, data tables and more of the n8n instance at {}",
            config.base_url.trim_end_matches('/')
        ),
    );
    p.tools = tools::all(&client);
    Ok(p)
}

/// The public API operations (`METHOD /path`, as in the spec) the hand-written tools cover.
/// An OpenAPI import of [`public_api_spec`] should skip these.
pub fn hand_written_paths() -> Vec<&'static str> {
    vec![
        "GET /executions",
        "GET /executions/{executionId}",
        "POST /executions/{executionId}/retry",
        "POST /executions/{executionId}/stop",
        "DELETE /executions/{executionId}",
        "GET /workflows",
        "POST /workflows",
        "GET /workflows/{workflowId}",
        "PUT /workflows/{workflowId}",
        "DELETE /workflows/{workflowId}",
        "POST /workflows/{workflowId}/activate",
        "POST /workflows/{workflowId}/deactivate",
        "POST /workflows/{workflowId}/archive",
        "POST /workflows/{workflowId}/unarchive",
        "GET /credentials",
        "GET /credentials/{credentialId}",
        "DELETE /credentials/{credentialId}",
        "GET /credentials/schema/{credentialTypeName}",
        "GET /tags",
        "GET /projects",
        "GET /variables",
        "GET /data-tables",
        "GET /data-tables/{dataTableId}/columns",
        "GET /data-tables/{dataTableId}/rows",
        "POST /data-tables/{dataTableId}/rows",
        "PATCH /data-tables/{dataTableId}/rows/update",
        "POST /data-tables/{dataTableId}/rows/upsert",
        "DELETE /data-tables/{dataTableId}/rows/delete",
    ]
}

/// n8n's public API OpenAPI document (2.41.1, bundled YAML), for importing the operations the
/// hand-written tools do not cover.
pub fn public_api_spec() -> &'static str {
    include_str!("../spec/openapi-n8n-2.41.1-bundled.yml")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(url: &str, allow_private: bool) -> N8nConfig {
        N8nConfig {
            base_url: url.into(),
            api_key: "n8n_api_SECRET".into(),
            timeout: Duration::from_secs(5),
            allow_private,
        }
    }

    #[test]
    fn debug_redacts_the_key() {
        let s = format!("{:?}", config("https://n8n.example.com", false));
        assert!(!s.contains("SECRET"));
        assert!(s.contains("[redacted]"));
    }

    #[test]
    fn private_addresses_need_allow_private() {
        for url in [
            "http://127.0.0.1:5678",
            "http://localhost:5678",
            "http://10.1.2.3",
            "http://[::1]:5678",
            "http://169.254.169.254",
        ] {
            assert!(plugin(config(url, false)).is_err(), "{url}");
            assert!(plugin(config(url, true)).is_ok(), "{url}");
        }
        assert!(plugin(config("https://n8n.example.com", false)).is_ok());
        assert!(plugin(config("ftp://n8n.example.com", true)).is_err());
        let mut c = config("https://n8n.example.com", false);
        c.api_key = " ".into();
        assert!(plugin(c).is_err());
    }

    #[test]
    fn plugin_tools_are_namespaced_titled_and_annotated() {
        let p = plugin(config("https://n8n.example.com", false)).unwrap();
        assert_eq!(p.id, "n8n");
        let mut seen = std::collections::HashSet::new();
        for t in &p.tools {
            assert_eq!(t.def.path.namespace(), "n8n");
            assert!(seen.insert(t.def.path.as_str().to_string()), "duplicate");
            assert!(t.def.name.chars().next().unwrap().is_uppercase());
            assert_eq!(t.def.origin, "plugin:n8n");
            assert_eq!(t.def.input_schema["type"], "object");
            let is_delete = t.def.path.as_str().ends_with(".delete");
            assert_eq!(t.def.annotations.destructive, is_delete, "{}", t.def.path);
            if t.def.annotations.read_only {
                assert!(!t.def.annotations.destructive);
            }
            // Every property has a description (or is a documented object).
            for (k, v) in t.def.input_schema["properties"].as_object().unwrap() {
                assert!(v.get("description").is_some(), "{} {k}", t.def.path);
            }
        }
        let get = |p2: &str| {
            p.tools
                .iter()
                .find(|t| t.def.path.as_str() == p2)
                .unwrap()
                .def
                .annotations
        };
        assert!(get("n8n.executions.get").read_only);
        let retry = get("n8n.executions.retry");
        assert!(!retry.read_only && !retry.destructive);
        assert!(get("n8n.workflows.delete").destructive);
        assert!(p.tools.len() >= 30);
    }

    #[test]
    fn hand_written_paths_exist_in_the_bundled_spec() {
        let spec = public_api_spec();
        assert!(spec.contains("openapi"));
        for op in hand_written_paths() {
            let (method, path) = op.split_once(' ').unwrap();
            let key = format!("\n  {path}:\n");
            let at = spec
                .find(&key)
                .unwrap_or_else(|| panic!("{path} not in spec"));
            // The method appears in the path item before the next path.
            let rest = &spec[at + key.len() - 1..];
            let end = rest.find("\n  /").unwrap_or(rest.len());
            assert!(
                rest[..end].contains(&format!("\n    {}:", method.to_ascii_lowercase())),
                "{op} not in spec"
            );
        }
    }
}
