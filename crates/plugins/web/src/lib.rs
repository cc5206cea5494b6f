//! Web research for agents, the plugin `web`:
//!
//! - `web.fetch {url, maxContentLength?}`: a page's main content as Markdown (a readability
//!   pass, then HTML → Markdown with GitHub-flavoured tables), a PDF's text, plain text or
//!   Markdown as it is; `{url, finalUrl, title, content, truncated, contentLength,
//!   contentType, safetyFlags?}` ([`fetch`]).
//! - `web.search {query, maxResults?, includeDomains?}` over a configured provider (Brave
//!   Search API or a SearXNG instance); not offered when none is configured ([`search`]).
//!
//! Every request goes through [`toolshed_outbound::Outbound`]: each redirect hop is checked,
//! and names are resolved through the guarding resolver, so an address refused by the rule
//! (non-public unless `allow_private`, and any `denied_networks` block) is refused at connect
//! time too, against DNS rebinding. Bodies are size-capped while streaming and time-capped.
//! Answers are cached for [`WebConfig::cache_ttl`] in bounded caches ([`cache`]).
//!
//! Fetched content is data from the web, not instructions: the result says so
//! (`_untrusted`), and `safetyFlags` names what looked like an attempt to instruct the agent.

pub mod cache;
pub mod convert;
pub mod fetch;
pub mod search;

use std::sync::Arc;
use std::time::Duration;

use toolshed_core::Plugin;
use toolshed_outbound::net::Network;
use toolshed_outbound::{Outbound, OutboundConfig, Secret};

/// The plugin's id and tool namespace.
pub const PLUGIN_ID: &str = "web";
/// Characters of content returned when the call does not say.
pub const DEFAULT_CONTENT_CHARS: usize = 30_000;
/// Most characters of content one call may ask for.
pub const MAX_CONTENT_CHARS: usize = 100_000;

/// Failures building the plugin.
#[derive(Debug, thiserror::Error)]
pub enum WebError {
    #[error("[web] {0}")]
    InvalidConfig(String),
}

/// The search service behind `web.search`.
#[derive(Debug, Clone)]
pub enum SearchProvider {
    /// The Brave Search API (`GET {base_url}/res/v1/web/search`, header
    /// `X-Subscription-Token`); `base_url` defaults to `https://api.search.brave.com`.
    Brave { base_url: String, api_key: Secret },
    /// A SearXNG instance with the JSON format enabled (`GET {base_url}/search?format=json`).
    Searxng { base_url: String },
}

/// Settings of the plugin (`[web]` in `toolshed.toml`).
#[derive(Debug, Clone)]
pub struct WebConfig {
    /// Lets `web.fetch` reach loopback and private addresses (local use and tests).
    pub allow_private: bool,
    /// Address blocks never fetched, even with `allow_private`.
    pub denied_networks: Vec<Network>,
    /// Longest one fetch or search request may take.
    pub timeout: Duration,
    /// Largest response body read, in bytes.
    pub max_response_bytes: u64,
    /// Redirects followed per fetch.
    pub max_redirects: usize,
    /// How long answers are kept.
    pub cache_ttl: Duration,
    /// Answers kept per tool.
    pub cache_entries: usize,
    pub search: Option<SearchProvider>,
}

impl Default for WebConfig {
    fn default() -> Self {
        Self {
            allow_private: false,
            denied_networks: Vec::new(),
            timeout: Duration::from_secs(20),
            max_response_bytes: 10 * 1024 * 1024,
            max_redirects: 5,
            cache_ttl: Duration::from_secs(15 * 60),
            cache_entries: 256,
            search: None,
        }
    }
}

impl WebConfig {
    fn outbound(&self) -> Result<Outbound, WebError> {
        Outbound::new(OutboundConfig {
            timeout: self.timeout,
            max_response_bytes: self.max_response_bytes,
            allow_private: self.allow_private,
            max_redirects: self.max_redirects,
            denied_networks: self.denied_networks.clone(),
            user_agent: concat!(
                "Mozilla/5.0 (compatible; toolshed-web/",
                env!("CARGO_PKG_VERSION"),
                ")"
            )
            .to_string(),
        })
        .map_err(|e| WebError::InvalidConfig(format!("cannot build the HTTP client: {e}")))
    }
}

/// The `web` plugin: `web.fetch`, and `web.search` when a provider is configured.
pub fn plugin(config: WebConfig) -> Result<Plugin, WebError> {
    if config.timeout.is_zero() || config.max_response_bytes == 0 || config.cache_entries == 0 {
        return Err(WebError::InvalidConfig(
            "timeout, max_response_bytes and cache_entries must be above zero".into(),
        ));
    }
    let outbound = config.outbound()?;
    let mut p = Plugin::new(
        PLUGIN_ID,
        "Web",
        "Fetch web pages as Markdown and PDFs as text; search the web when a provider is configured",
    );
    p.tools.push(fetch::tool(Arc::new(fetch::Fetcher::new(
        outbound.clone(),
        &config,
    ))));
    if let Some(provider) = &config.search {
        p.tools.push(search::tool(Arc::new(search::Searcher::new(
            outbound,
            provider.clone(),
            &config,
        )?)));
    }
    Ok(p)
}
