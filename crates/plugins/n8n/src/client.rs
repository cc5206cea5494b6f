//! HTTP to n8n's public API (`{base}/api/v1`), authenticated with `X-N8N-API-KEY`.
//!
//! The client never follows redirects (a redirect would carry the key to another host), maps
//! HTTP failures to [`N8nError`]s that say what to do, and scrubs the key out of anything it
//! reports.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::Value;

use crate::error::N8nError;

/// A configured connection to one n8n instance. Cheap to clone.
#[derive(Clone)]
pub struct N8nClient {
    http: reqwest::Client,
    /// `…/api/v1`, no trailing slash.
    api_base: String,
    /// What the user configured, for messages.
    base_url: String,
    api_key: String,
    timeout: Duration,
}

impl std::fmt::Debug for N8nClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("N8nClient")
            .field("api_base", &self.api_base)
            .field("api_key", &"[redacted]")
            .finish()
    }
}

/// The `/api/v1` root for a configured base URL (with or without `/api/v1` already).
pub fn api_base(base_url: &str) -> String {
    let trimmed = base_url.trim().trim_end_matches('/');
    if trimmed.ends_with("/api/v1") {
        trimmed.to_string()
    } else {
        format!("{trimmed}/api/v1")
    }
}

impl N8nClient {
    /// A client for `base_url` (e.g. `http://127.0.0.1:5678`).
    ///
    /// The HTTP client is the shared outbound one: its resolver refuses private, loopback and
    /// metadata addresses unless `allow_private`, so a name that resolves there is refused too.
    pub fn new(
        base_url: &str,
        api_key: &str,
        timeout: Duration,
        allow_private: bool,
    ) -> Result<Self, N8nError> {
        let outbound = toolshed_outbound::Outbound::new(toolshed_outbound::OutboundConfig {
            timeout,
            allow_private,
            max_redirects: 0,
            user_agent: concat!("toolshed-n8n/", env!("CARGO_PKG_VERSION")).to_string(),
            ..Default::default()
        })
        .map_err(|e| N8nError::InvalidConfig(format!("cannot build the HTTP client: {e}")))?;
        let http = outbound.client().clone();
        Ok(Self {
            http,
            api_base: api_base(base_url),
            base_url: base_url.trim_end_matches('/').to_string(),
            api_key: api_key.to_string(),
            timeout,
        })
    }

    /// The API root this client calls.
    pub fn api_root(&self) -> &str {
        &self.api_base
    }

    /// `GET path?query`.
    pub async fn get(&self, path: &str, query: &[(&str, String)]) -> Result<Value, N8nError> {
        self.request(Method::GET, path, query, None, None).await
    }

    /// Sends one request; `path` starts with `/` and is relative to `/api/v1`.
    pub async fn request(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, String)],
        body: Option<&Value>,
        timeout: Option<Duration>,
    ) -> Result<Value, N8nError> {
        let url = format!("{}{}", self.api_base, path);
        let timeout = timeout.map_or(self.timeout, |t| t.min(self.timeout));
        let mut req = self
            .http
            .request(method.clone(), &url)
            .header("X-N8N-API-KEY", &self.api_key)
            .header("Accept", "application/json")
            .timeout(timeout);
        if !query.is_empty() {
            req = req.query(query);
        }
        if let Some(b) = body {
            req = req.json(b);
        }
        tracing::debug!(method = %method, path, "n8n request");
        let resp = match req.send().await {
            Ok(r) => r,
            Err(e) if e.is_timeout() => {
                return Err(N8nError::Timeout {
                    method: method.to_string(),
                    path: path.to_string(),
                    seconds: timeout.as_secs().max(1),
                })
            }
            Err(e) => {
                return Err(N8nError::Unreachable {
                    url: self.base_url.clone(),
                    reason: self.scrub(&error_chain(&e)),
                })
            }
        };
        let status = resp.status();
        let text = match resp.text().await {
            Ok(t) => t,
            Err(e) if e.is_timeout() => {
                return Err(N8nError::Timeout {
                    method: method.to_string(),
                    path: path.to_string(),
                    seconds: timeout.as_secs().max(1),
                })
            }
            Err(e) => {
                return Err(N8nError::Unreachable {
                    url: self.base_url.clone(),
                    reason: self.scrub(&error_chain(&e)),
                })
            }
        };
        if status.is_success() {
            if text.trim().is_empty() {
                return Ok(Value::Null);
            }
            return serde_json::from_str(&text).map_err(|e| N8nError::Upstream {
                method: method.to_string(),
                path: path.to_string(),
                status: status.as_u16(),
                message: format!("the reply is not JSON ({e})"),
            });
        }
        Err(self.status_error(&method, path, status, &text))
    }

    fn status_error(
        &self,
        method: &Method,
        path: &str,
        status: StatusCode,
        body: &str,
    ) -> N8nError {
        let message = self.scrub(&n8n_message(body));
        let method = method.to_string();
        let path = path.split('?').next().unwrap_or(path).to_string();
        match status.as_u16() {
            401 => N8nError::Unauthorized {
                base_url: self.base_url.clone(),
            },
            403 => N8nError::Forbidden {
                method,
                path,
                message,
            },
            404 if is_route_miss(&message) => N8nError::NoEndpoint { method, path },
            404 => N8nError::NotFound(format!(
                "n8n found nothing at {method} {path} (404: {message}); check the id"
            )),
            405 => N8nError::NoEndpoint { method, path },
            s if (400..500).contains(&s) => N8nError::Rejected {
                method,
                path,
                status: s,
                message,
            },
            s => N8nError::Upstream {
                method,
                path,
                status: s,
                message,
            },
        }
    }

    /// `s` with the API key replaced.
    fn scrub(&self, s: &str) -> String {
        if self.api_key.len() >= 4 {
            s.replace(&self.api_key, "[redacted]")
        } else {
            s.to_string()
        }
    }
}

/// The `message` of an n8n error body, or the body itself, shortened.
fn n8n_message(body: &str) -> String {
    let msg = serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| v["message"].as_str().map(str::to_string))
        .unwrap_or_else(|| body.trim().to_string());
    crate::sanitize::truncate_str(&msg, 500)
}

/// n8n 2.41 answers an unknown route of the public API with a lowercase `not found` (from its
/// OpenAPI validator), and a missing resource with `Not Found` or a sentence naming it
/// (`Credential not found`); both observed on a live 2.41.1.
fn is_route_miss(message: &str) -> bool {
    let m = message.trim();
    m.is_empty() || m == "not found" || m.starts_with("Cannot ")
}

fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut cur = e.source();
    while let Some(s) = cur {
        let t = s.to_string();
        if !parts.iter().any(|p| p.contains(&t)) {
            parts.push(t);
        }
        cur = s.source();
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_base_is_normalized() {
        assert_eq!(api_base("http://h:5678"), "http://h:5678/api/v1");
        assert_eq!(api_base("http://h:5678/"), "http://h:5678/api/v1");
        assert_eq!(api_base("https://h/n8n/api/v1/"), "https://h/n8n/api/v1");
    }

    #[test]
    fn debug_hides_the_key() {
        let c =
            N8nClient::new("http://h", "secret-key-123", Duration::from_secs(1), false).unwrap();
        assert!(!format!("{c:?}").contains("secret-key-123"));
        assert_eq!(c.scrub("x secret-key-123 y"), "x [redacted] y");
    }

    #[test]
    fn route_misses_are_told_apart() {
        assert!(is_route_miss("not found"));
        assert!(is_route_miss(""));
        assert!(!is_route_miss("Not Found"));
        assert!(!is_route_miss("Credential not found"));
        assert_eq!(n8n_message(r#"{"message":"boom"}"#), "boom");
    }

    #[tokio::test]
    async fn refused_connection_names_the_url() {
        // Port 9 on loopback: nothing listens there.
        let c = N8nClient::new(
            "http://127.0.0.1:9",
            "k3y-abcdef",
            Duration::from_secs(2),
            true,
        )
        .unwrap();
        let e = c.get("/workflows", &[]).await.unwrap_err();
        assert!(
            matches!(e, N8nError::Unreachable { .. }),
            "unexpected error {e:?}"
        );
        assert!(e.to_string().contains("http://127.0.0.1:9"));
        assert!(!e.to_string().contains("k3y-abcdef"));
    }
}
