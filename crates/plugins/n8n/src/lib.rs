//! The n8n plugin: tools under `n8n.` over an n8n instance's public API (`/api/v1`).
//!
//! ```no_run
//! # use std::time::Duration;
//! let plugin = toolshed_n8n::plugin(toolshed_n8n::N8nConfig {
//!     timeout: Duration::from_secs(30),
//!     ..toolshed_n8n::N8nConfig::new("https://n8n.example.com", std::env::var("N8N_API_KEY").unwrap())
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
//! - Credentials a person enters in n8n's own pages (`credentials.search_types`,
//!   `credentials.setup`, `workflows.setup`; see [`tools::setup`]).
//! - Node discovery. With a login ([`N8nLogin`]: email and password of an n8n user) the plugin
//!   signs in like the editor (`POST /rest/login`, cookie `n8n-auth`) and reads the instance's
//!   full node catalog (`GET /types/nodes.json`, every installed node type with its versions and
//!   parameters; see [`catalog`]). Without one, the public API has no node-type listing, so the
//!   tools fall back to the node types the instance's workflows use and say so in every answer.
//!
//! # Limits
//! - Reply bodies are read up to [`N8nConfig::max_response_bytes`] (default
//!   [`DEFAULT_MAX_RESPONSE_BYTES`]); a larger reply is an error naming the cap, not an
//!   unbounded read.
//! - No request follows a redirect: the key or the session cookie would go with it.
//! - Plain `http://` to a host other than loopback sends the key (and password) in clear text;
//!   [`cleartext_warning`] says so and [`plugin`] logs it at startup.
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
//! operation of n8n's public API comes from the n8n integration crate
//! (`crates/integrations/n8n`), which imports n8n's OpenAPI document (2.41.1) under the `n8n`
//! namespace, the plugin's base URL (`{base}/api/v1`) and the same `X-N8N-API-KEY` auth; where an
//! imported operation is one of [`hand_written_paths`], the hand-written tool wins and the
//! imported one is dropped. This crate knows nothing of OpenAPI.

pub mod catalog;
pub mod client;
pub mod code;
pub mod debug;
pub mod error;
pub mod execution;
pub mod node;
pub mod sanitize;
pub mod summary;
pub mod tools;
pub mod trigger;
pub mod validate;
pub mod verdict;

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

/// The n8n version whose public API the plugin (and the OpenAPI document the n8n integration
/// bundles) follows.
pub const N8N_API_VERSION: &str = "2.41.1";

/// Default cap on one reply body: 64 MiB (the editor's node catalog of 2.41.1 is ~18 MB, a
/// 2,000-item execution well under 1 MB).
pub const DEFAULT_MAX_RESPONSE_BYTES: u64 = 64 * 1024 * 1024;

/// An n8n user's login, for what only the editor's API offers (the full node catalog).
#[derive(Clone, PartialEq, Eq)]
pub struct N8nLogin {
    /// The user's email (or LDAP login id).
    pub email: String,
    /// The password. Never logged or shown: `Debug` redacts it and errors scrub it.
    pub password: String,
}

impl fmt::Debug for N8nLogin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("N8nLogin")
            .field("email", &self.email)
            .field("password", &toolshed_outbound::secret::REDACTED)
            .finish()
    }
}

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
    /// A user login for the full node catalog; `None` limits node discovery to the types the
    /// workflows use.
    pub login: Option<N8nLogin>,
    /// Largest reply body read, in bytes.
    pub max_response_bytes: u64,
    /// Where the verification loop keeps its work items (`n8n.workflows.report_verdict`);
    /// without a store that tool is not offered.
    pub state: Option<toolshed_store::Store>,
}

impl fmt::Debug for N8nConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("N8nConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &toolshed_outbound::secret::REDACTED)
            .field("timeout", &self.timeout)
            .field("allow_private", &self.allow_private)
            .field("login", &self.login)
            .field("max_response_bytes", &self.max_response_bytes)
            .finish()
    }
}

impl N8nConfig {
    /// A configuration with defaults: 30 s timeout, public addresses only, no login, 64 MiB cap.
    pub fn new(base_url: impl Into<String>, api_key: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            api_key: api_key.into(),
            timeout: Duration::from_secs(30),
            allow_private: false,
            login: None,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            state: None,
        }
    }

    /// Checks the URL, the key, the login and the private-address rule.
    pub fn validate(&self) -> Result<(), N8nError> {
        if self.api_key.trim().is_empty() {
            return Err(N8nError::InvalidConfig("the API key is empty".into()));
        }
        if let Some(l) = &self.login {
            if l.email.trim().is_empty() || l.password.is_empty() {
                return Err(N8nError::InvalidConfig(
                    "the login needs both email and password (or neither)".into(),
                ));
            }
        }
        if self.max_response_bytes == 0 {
            return Err(N8nError::InvalidConfig("max_response_bytes is zero".into()));
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

/// A warning when `base_url` is plain `http://` to a host that is not loopback: the API key
/// (and the login password, when configured) would travel in clear text.
pub fn cleartext_warning(base_url: &str) -> Option<String> {
    let url = reqwest::Url::parse(base_url.trim()).ok()?;
    if url.scheme() != "http" {
        return None;
    }
    let host = url.host_str().unwrap_or_default();
    let h = host.trim_start_matches('[').trim_end_matches(']');
    let loopback = h.eq_ignore_ascii_case("localhost")
        || h.to_ascii_lowercase().ends_with(".localhost")
        || h.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback());
    if loopback {
        return None;
    }
    Some(format!(
        "n8n base_url '{}' is plain http to a non-loopback host: the API key (and the login password, if set) travel in clear text; use https",
        base_url.trim()
    ))
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
    if let Some(w) = cleartext_warning(&config.base_url) {
        tracing::warn!("{w}");
    }
    let client = Arc::new(N8nClient::from_config(&config)?);
    let mut p = toolshed_core::Plugin::new(
        PLUGIN_ID,
        "n8n",
        format!(
            "Workflows, executions, credentials, data tables and more of the n8n instance at {}",
            config.base_url.trim_end_matches('/')
        ),
    );
    p.tools = tools::all(&client);
    p.tools
        .extend(tools::setup::tools(&client, config.state.as_ref()));
    p.tools
        .extend(tools::build::tools(&client, config.state.as_ref()));
    if let Some(store) = &config.state {
        p.tools.extend(tools::work_items::tools(store));
    }
    Ok(p)
}

/// The public API operations (`METHOD /path`, as in the spec) the hand-written tools cover, with
/// the tool that covers each.
pub const HAND_WRITTEN: &[(&str, &str)] = &[
    ("GET /executions", "n8n.executions.list"),
    ("GET /executions/{executionId}", "n8n.executions.get"),
    (
        "POST /executions/{executionId}/retry",
        "n8n.executions.retry",
    ),
    ("POST /executions/{executionId}/stop", "n8n.executions.stop"),
    ("DELETE /executions/{executionId}", "n8n.executions.delete"),
    ("GET /workflows", "n8n.workflows.list"),
    ("POST /workflows", "n8n.workflows.create"),
    ("GET /workflows/{workflowId}", "n8n.workflows.get"),
    ("PUT /workflows/{workflowId}", "n8n.workflows.update"),
    ("DELETE /workflows/{workflowId}", "n8n.workflows.delete"),
    (
        "POST /workflows/{workflowId}/activate",
        "n8n.workflows.activate",
    ),
    (
        "POST /workflows/{workflowId}/deactivate",
        "n8n.workflows.deactivate",
    ),
    (
        "POST /workflows/{workflowId}/archive",
        "n8n.workflows.archive",
    ),
    (
        "POST /workflows/{workflowId}/unarchive",
        "n8n.workflows.unarchive",
    ),
    (
        "GET /workflows/{workflowId}/history",
        "n8n.workflows.versions.list",
    ),
    (
        "GET /workflows/{workflowId}/versions/{workflowVersionId}",
        "n8n.workflows.versions.get",
    ),
    ("GET /projects/{projectId}/folders", "n8n.folders.list"),
    ("POST /projects/{projectId}/folders", "n8n.folders.create"),
    ("GET /credentials", "n8n.credentials.list"),
    ("GET /credentials/{credentialId}", "n8n.credentials.get"),
    (
        "DELETE /credentials/{credentialId}",
        "n8n.credentials.delete",
    ),
    (
        "GET /credentials/schema/{credentialTypeName}",
        "n8n.credentials.schema",
    ),
    ("GET /tags", "n8n.tags.list"),
    ("GET /projects", "n8n.projects.list"),
    ("GET /variables", "n8n.variables.list"),
    ("GET /data-tables", "n8n.data_tables.list"),
    (
        "GET /data-tables/{dataTableId}/columns",
        "n8n.data_tables.columns",
    ),
    (
        "GET /data-tables/{dataTableId}/rows",
        "n8n.data_tables.rows.query",
    ),
    (
        "POST /data-tables/{dataTableId}/rows",
        "n8n.data_tables.rows.insert",
    ),
    (
        "PATCH /data-tables/{dataTableId}/rows/update",
        "n8n.data_tables.rows.update",
    ),
    (
        "POST /data-tables/{dataTableId}/rows/upsert",
        "n8n.data_tables.rows.upsert",
    ),
    (
        "DELETE /data-tables/{dataTableId}/rows/delete",
        "n8n.data_tables.rows.delete",
    ),
];

/// The public API operations (`METHOD /path`, as in the spec) the hand-written tools cover.
/// An OpenAPI import of n8n's public API document should skip these.
pub fn hand_written_paths() -> Vec<&'static str> {
    HAND_WRITTEN.iter().map(|(op, _)| *op).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(url: &str, allow_private: bool) -> N8nConfig {
        N8nConfig {
            timeout: Duration::from_secs(5),
            allow_private,
            ..N8nConfig::new(url, "n8n_api_SECRET")
        }
    }

    #[test]
    fn debug_redacts_the_key_and_the_password() {
        let mut c = config("https://n8n.example.com", false);
        c.login = Some(N8nLogin {
            email: "owner@example.com".into(),
            password: "PASSWORD-XYZ".into(),
        });
        let s = format!("{c:?}");
        assert!(!s.contains("SECRET") && !s.contains("PASSWORD-XYZ"), "{s}");
        assert!(s.contains("[REDACTED]") && s.contains("owner@example.com"));
        c.login.as_mut().unwrap().password.clear();
        let e = plugin(c).unwrap_err().to_string();
        assert!(e.contains("email and password"), "{e}");
    }

    #[test]
    fn plain_http_to_a_remote_host_is_warned_about() {
        let w = cleartext_warning("http://n8n.example.com:5678").unwrap();
        assert!(w.contains("clear text") && w.contains("http://n8n.example.com:5678"));
        assert!(cleartext_warning("http://10.0.0.5").is_some());
        for quiet in [
            "https://n8n.example.com",
            "http://127.0.0.1:5678",
            "http://localhost:5678",
            "http://[::1]:5678",
        ] {
            assert_eq!(cleartext_warning(quiet), None, "{quiet}");
        }
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
            let is_delete = t.def.path.as_str().ends_with(".delete")
                || t.def.path.as_str() == "n8n.executions.cleanup";
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
    fn every_hand_written_operation_has_its_tool() {
        let p = plugin(config("https://n8n.example.com", false)).unwrap();
        for (op, tool) in HAND_WRITTEN {
            assert!(
                p.tools.iter().any(|t| t.def.path.as_str() == *tool),
                "{op}: no tool {tool}"
            );
        }
    }
}
