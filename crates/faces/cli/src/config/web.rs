//! `[web]`: the web plugin (`web.fetch`, and `web.search` when a provider is configured).

use std::time::Duration;

use serde::{Deserialize, Serialize};
use toolshed_outbound::net::Network;
use toolshed_outbound::secret::REDACTED;

use super::{resolve_secret, ConfigError};

/// `[web]` as written in `toolshed.toml`.
#[derive(Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WebConfigFile {
    /// Offer the `web` tools at all.
    pub enabled: bool,
    /// Lets `web.fetch` reach loopback and private addresses (local use and tests).
    pub allow_private: bool,
    /// Address blocks never fetched, even with `allow_private` (`"169.254.169.254"`,
    /// `"10.0.0.0/8"`).
    pub denied_networks: Vec<Network>,
    pub timeout_ms: u64,
    pub max_response_bytes: u64,
    pub cache_ttl_secs: u64,
    pub cache_entries: usize,
    /// `brave` or `searxng`; without one `web.search` is not offered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub search_provider: Option<String>,
    /// The provider's base URL (Brave: default `https://api.search.brave.com`; SearXNG:
    /// required, with the JSON format enabled).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub search_url: Option<String>,
    /// Brave's subscription token: `env:NAME` (or `${NAME}`), or a literal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub search_api_key: Option<String>,
}

impl Default for WebConfigFile {
    fn default() -> Self {
        let d = toolshed_web::WebConfig::default();
        Self {
            enabled: true,
            allow_private: d.allow_private,
            denied_networks: Vec::new(),
            timeout_ms: d.timeout.as_millis() as u64,
            max_response_bytes: d.max_response_bytes,
            cache_ttl_secs: d.cache_ttl.as_secs(),
            cache_entries: d.cache_entries,
            search_provider: None,
            search_url: None,
            search_api_key: None,
        }
    }
}

impl std::fmt::Debug for WebConfigFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebConfigFile")
            .field("enabled", &self.enabled)
            .field("allow_private", &self.allow_private)
            .field("denied_networks", &self.denied_networks)
            .field("search_provider", &self.search_provider)
            .field("search_url", &self.search_url)
            .field(
                "search_api_key",
                &self.search_api_key.as_ref().map(|_| REDACTED),
            )
            .finish_non_exhaustive()
    }
}

impl WebConfigFile {
    /// The plugin's settings with the search key resolved; `None` when `enabled = false`.
    pub fn settings(&self) -> Result<Option<toolshed_web::WebConfig>, ConfigError> {
        if !self.enabled {
            return Ok(None);
        }
        let bad = |m: String| ConfigError::Web(m);
        if self.timeout_ms == 0 || self.max_response_bytes == 0 || self.cache_entries == 0 {
            return Err(bad(
                "timeout_ms, max_response_bytes and cache_entries must be above zero".into(),
            ));
        }
        let search = match self.search_provider.as_deref() {
            None => None,
            Some("brave") => {
                let key = self.search_api_key.as_deref().ok_or_else(|| {
                    bad("search_provider = \"brave\" needs search_api_key".into())
                })?;
                let key = resolve_secret(key).map_err(|var| {
                    bad(format!(
                        "search_api_key: environment variable {var} is not set"
                    ))
                })?;
                Some(toolshed_web::SearchProvider::Brave {
                    base_url: self.search_url_or("https://api.search.brave.com")?,
                    api_key: toolshed_outbound::Secret::new(key),
                })
            }
            Some("searxng") => Some(toolshed_web::SearchProvider::Searxng {
                base_url: self
                    .search_url
                    .clone()
                    .filter(|u| toolshed_core::is_url(u))
                    .ok_or_else(|| {
                        bad("search_provider = \"searxng\" needs search_url (http or https)".into())
                    })?,
            }),
            Some(other) => {
                return Err(bad(format!(
                    "search_provider '{other}' is not known: use \"brave\" or \"searxng\""
                )))
            }
        };
        Ok(Some(toolshed_web::WebConfig {
            allow_private: self.allow_private,
            denied_networks: self.denied_networks.clone(),
            timeout: Duration::from_millis(self.timeout_ms),
            max_response_bytes: self.max_response_bytes,
            cache_ttl: Duration::from_secs(self.cache_ttl_secs),
            cache_entries: self.cache_entries,
            search,
            ..toolshed_web::WebConfig::default()
        }))
    }

    fn search_url_or(&self, default: &str) -> Result<String, ConfigError> {
        match &self.search_url {
            None => Ok(default.to_string()),
            Some(u) if toolshed_core::is_url(u) => Ok(u.clone()),
            Some(_) => Err(ConfigError::Web(
                "search_url is not an http:// or https:// URL".into(),
            )),
        }
    }
}
