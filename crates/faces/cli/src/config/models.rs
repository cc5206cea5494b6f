//! `[models.<id>]`: the model endpoints agent definitions name in `credential` and agent runs
//! think with.
//!
//! ```toml
//! [models.main]
//! kind = "openai"                       # or "anthropic"
//! base_url = "http://127.0.0.1:11434/v1" # default: the provider's public API
//! api_key = "env:OPENAI_API_KEY"
//! allow_private = true                   # needed for a loopback or private base_url (Ollama, vLLM)
//! timeout_ms = 120000
//! headers = { "HTTP-Referer" = "https://toolshed.example.com" }
//! ```

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use toolshed_models::{Endpoint, Provider};
use toolshed_outbound::secret::REDACTED;
use toolshed_outbound::Secret;

use super::ConfigError;

/// Longest request timeout accepted (the whole streamed answer).
pub const MAX_TIMEOUT_MS: u64 = 600_000;

/// `[models.<id>]` as written in `toolshed.toml`.
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// The wire format: `openai` or `anthropic`.
    pub kind: String,
    /// The API's base URL (default: the provider's public API).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// `env:NAME` (or `${NAME}`), or a literal key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
    /// Extra headers sent with every request.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// The whole request, stream included (default 120 s).
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// Lets `base_url` be on a loopback or private address.
    #[serde(default)]
    pub allow_private: bool,
}

fn default_timeout_ms() -> u64 {
    120_000
}

impl std::fmt::Debug for ModelConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelConfig")
            .field("kind", &self.kind)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| REDACTED))
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("timeout_ms", &self.timeout_ms)
            .field("allow_private", &self.allow_private)
            .finish()
    }
}

impl ModelConfig {
    /// The endpoint, checked: a known kind, an http(s) base URL the address rule allows, a
    /// timeout in range, a key whose environment variable is set.
    pub fn endpoint(&self, id: &str) -> Result<Endpoint, ConfigError> {
        let err = |message: String| ConfigError::Model {
            id: id.to_string(),
            message,
        };
        let provider = Provider::parse(&self.kind).ok_or_else(|| {
            err(format!(
                "kind '{}' is not known: use \"openai\" or \"anthropic\"",
                self.kind
            ))
        })?;
        let base_url = self
            .base_url
            .clone()
            .unwrap_or_else(|| provider.default_base_url().to_string());
        let url = url::Url::parse(&base_url)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https"))
            .ok_or_else(|| err("base_url is not an http:// or https:// URL".into()))?;
        toolshed_outbound::net::check_url(&url, self.allow_private)
            .map_err(|e| err(format!("base_url: {e}")))?;
        if self.timeout_ms == 0 || self.timeout_ms > MAX_TIMEOUT_MS {
            return Err(err(format!(
                "timeout_ms must be between 1 and {MAX_TIMEOUT_MS}"
            )));
        }
        // A key whose variable is not set leaves the endpoint configured but unusable: runs
        // that name it fail with the reason, everything else starts.
        let (api_key, unavailable) = match &self.api_key {
            Some(k) => match Secret::from_config(k) {
                Ok(s) => (Some(s), None),
                Err(_) => (
                    None,
                    Some(format!(
                        "[models.{id}] api_key names environment variable {} which is not set",
                        toolshed_outbound::secret::env_ref(k).unwrap_or("?")
                    )),
                ),
            },
            None => (None, None),
        };
        Ok(Endpoint {
            id: id.to_string(),
            provider,
            base_url,
            api_key,
            headers: self
                .headers
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            timeout: Duration::from_millis(self.timeout_ms),
            allow_private: self.allow_private,
            unavailable,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(kind: &str, base_url: Option<&str>) -> ModelConfig {
        ModelConfig {
            kind: kind.into(),
            base_url: base_url.map(str::to_string),
            api_key: None,
            headers: BTreeMap::new(),
            timeout_ms: default_timeout_ms(),
            allow_private: false,
        }
    }

    #[test]
    fn endpoints_are_checked_with_errors_naming_the_entry() {
        let e = config("openai", None).endpoint("main").unwrap();
        assert_eq!(e.base_url, "https://api.openai.com/v1");
        let err = config("gemini", None)
            .endpoint("g")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("[models.g]") && err.contains("gemini"),
            "{err}"
        );
        let err = config("openai", Some("http://127.0.0.1:11434/v1"))
            .endpoint("local")
            .unwrap_err()
            .to_string();
        assert!(err.contains("allow_private"), "{err}");
        let mut ok = config("openai", Some("http://127.0.0.1:11434/v1"));
        ok.allow_private = true;
        assert!(ok.endpoint("local").is_ok());
        let mut missing = config("anthropic", None);
        missing.api_key = Some("env:TOOLSHED_TEST_SURELY_UNSET_KEY".into());
        let e = missing.endpoint("a").unwrap();
        assert!(e.api_key.is_none());
        assert!(e
            .unavailable
            .unwrap()
            .contains("TOOLSHED_TEST_SURELY_UNSET_KEY"));
    }
}
