//! HTTP to n8n: the public API (`{base}/api/v1`, authenticated with `X-N8N-API-KEY`) and, when a
//! login is configured, the two editor endpoints the node catalog needs (`POST /rest/login`, then
//! `GET /types/nodes.json` with the `n8n-auth` session cookie).
//!
//! The client never follows redirects (a redirect would carry the key or the cookie to another
//! host), reads reply bodies only up to the configured cap, maps HTTP failures to
//! [`N8nError`]s that say what to do, and scrubs the key and the password out of anything it
//! reports.

use std::io::Read;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::catalog::NodeCatalog;
use crate::error::N8nError;
use crate::{N8nConfig, N8nLogin};

/// How long a fetched node catalog is reused before it is read again.
pub const CATALOG_TTL: Duration = Duration::from_secs(600);

/// The session cookie n8n's editor API authenticates with.
pub const SESSION_COOKIE: &str = "n8n-auth";

/// A configured connection to one n8n instance. Cheap to clone (clones share the session and
/// the cached node catalog).
#[derive(Clone)]
pub struct N8nClient {
    http: reqwest::Client,
    /// `…/api/v1`, no trailing slash.
    api_base: String,
    /// The instance root (no `/api/v1`), for the editor endpoints.
    site_root: String,
    /// What the user configured, for messages.
    base_url: String,
    api_key: String,
    timeout: Duration,
    max_body: u64,
    login: Option<N8nLogin>,
    /// `n8n-auth=<token>` once signed in.
    session: Arc<Mutex<Option<String>>>,
    catalog: Cache<NodeCatalog>,
    credential_types: Cache<Vec<Value>>,
}

impl std::fmt::Debug for N8nClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("N8nClient")
            .field("api_base", &self.api_base)
            .field("api_key", &toolshed_outbound::secret::REDACTED)
            .field("login", &self.login)
            .finish()
    }
}

/// The `/api/v1` root for a configured base URL (with or without `/api/v1` already).
pub fn api_base(base_url: &str) -> String {
    format!("{}/api/v1", site_root(base_url))
}

/// The instance root for a configured base URL: no trailing slash, no `/api/v1`.
pub fn site_root(base_url: &str) -> String {
    let trimmed = base_url.trim().trim_end_matches('/');
    trimmed
        .strip_suffix("/api/v1")
        .unwrap_or(trimmed)
        .to_string()
}

/// An editor document kept for [`CATALOG_TTL`], shared by the client's clones.
type Cache<T> = Arc<Mutex<Option<(Instant, Arc<T>)>>>;

/// The cached document, while it is fresh.
fn fresh<T>(cache: &Cache<T>) -> Option<Arc<T>> {
    let kept = cache.lock().expect("cache lock").clone();
    kept.filter(|(at, _)| at.elapsed() < CATALOG_TTL)
        .map(|(_, v)| v)
}

/// Keeps `value` as the cached document.
fn keep<T>(cache: &Cache<T>, value: T) -> Arc<T> {
    let value = Arc::new(value);
    *cache.lock().expect("cache lock") = Some((Instant::now(), value.clone()));
    value
}

impl N8nClient {
    /// A client for `base_url` (e.g. `http://127.0.0.1:5678`) with the default body cap and no
    /// login.
    pub fn new(
        base_url: &str,
        api_key: &str,
        timeout: Duration,
        allow_private: bool,
    ) -> Result<Self, N8nError> {
        Self::from_config(&N8nConfig {
            timeout,
            allow_private,
            ..N8nConfig::new(base_url, api_key)
        })
    }

    /// A client for a whole configuration.
    ///
    /// The HTTP client is the shared outbound one: its resolver refuses private, loopback and
    /// metadata addresses unless `allow_private`, so a name that resolves there is refused too.
    pub fn from_config(config: &N8nConfig) -> Result<Self, N8nError> {
        let outbound = toolshed_outbound::Outbound::new(toolshed_outbound::OutboundConfig {
            timeout: config.timeout,
            allow_private: config.allow_private,
            max_redirects: 0,
            max_response_bytes: config.max_response_bytes,
            user_agent: concat!("toolshed-n8n/", env!("CARGO_PKG_VERSION")).to_string(),
            ..Default::default()
        })
        .map_err(|e| N8nError::InvalidConfig(format!("cannot build the HTTP client: {e}")))?;
        let http = outbound.client().clone();
        Ok(Self {
            http,
            api_base: api_base(&config.base_url),
            site_root: site_root(&config.base_url),
            base_url: config.base_url.trim().trim_end_matches('/').to_string(),
            api_key: config.api_key.clone(),
            timeout: config.timeout,
            max_body: config.max_response_bytes,
            login: config.login.clone(),
            session: Arc::default(),
            catalog: Arc::default(),
            credential_types: Arc::default(),
        })
    }

    /// The API root this client calls.
    pub fn api_root(&self) -> &str {
        &self.api_base
    }

    /// `true` when a login is configured, so the full node catalog can be read.
    pub fn has_login(&self) -> bool {
        self.login.is_some()
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
        let resp = self.send(req, &method, path, timeout).await?;
        let status = resp.status();
        let bytes = self.read_capped(resp, &method, path, timeout).await?;
        let text = String::from_utf8_lossy(&bytes);
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

    /// The instance's node catalog (`GET /types/nodes.json`, as the editor reads it), signing in
    /// first when needed; cached for [`CATALOG_TTL`]. `Ok(None)` when no login is configured.
    pub async fn node_catalog(
        &self,
        timeout: Option<Duration>,
    ) -> Result<Option<Arc<NodeCatalog>>, N8nError> {
        if self.login.is_none() {
            return Ok(None);
        }
        if let Some(c) = fresh(&self.catalog) {
            return Ok(Some(c));
        }
        let value = self.editor_json("/types/nodes.json", timeout).await?;
        let catalog = NodeCatalog::from_json(&value).map_err(|message| N8nError::Upstream {
            method: "GET".into(),
            path: "/types/nodes.json".into(),
            status: 200,
            message,
        })?;
        Ok(Some(keep(&self.catalog, catalog)))
    }

    /// One request to n8n's editor API (`{site}/rest{path}`), signed in with the configured
    /// login (signing in again once when the session was refused). The reply's `data` member is
    /// returned, as the editor API wraps every answer in one. Refused with
    /// [`N8nError::NeedsLogin`] when no login is configured: these endpoints do not take the API
    /// key.
    pub async fn rest(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, String)],
        body: Option<&Value>,
        timeout: Option<Duration>,
    ) -> Result<Value, N8nError> {
        if self.login.is_none() {
            return Err(N8nError::NeedsLogin {
                what: format!("{method} /rest{path}"),
            });
        }
        let timeout = timeout.map_or(self.timeout, |t| t.min(self.timeout));
        let session = self.session.lock().expect("session lock").clone();
        let cookie = match session {
            Some(c) => c,
            None => self.sign_in(timeout).await?,
        };
        let first = self
            .rest_once(&cookie, &method, path, query, body, timeout)
            .await;
        let value = match first {
            Err(N8nError::Unauthorized { .. }) => {
                let cookie = self.sign_in(timeout).await?;
                self.rest_once(&cookie, &method, path, query, body, timeout)
                    .await?
            }
            other => other?,
        };
        Ok(match value {
            Value::Object(mut m) if m.contains_key("data") => m.remove("data").unwrap_or_default(),
            v => v,
        })
    }

    async fn rest_once(
        &self,
        cookie: &str,
        method: &Method,
        path: &str,
        query: &[(&str, String)],
        body: Option<&Value>,
        timeout: Duration,
    ) -> Result<Value, N8nError> {
        let shown = format!("/rest{path}");
        let mut req = self
            .http
            .request(method.clone(), format!("{}/rest{path}", self.site_root))
            .header("Cookie", cookie)
            .header("Accept", "application/json")
            // n8n's editor API refuses cross-site requests without the browser-id header.
            .header("browser-id", "toolshed")
            .timeout(timeout);
        if !query.is_empty() {
            req = req.query(query);
        }
        if let Some(b) = body {
            req = req.json(b);
        }
        tracing::debug!(method = %method, path = %shown, "n8n editor request");
        let resp = self.send(req, method, &shown, timeout).await?;
        let status = resp.status();
        let bytes = self.read_capped(resp, method, &shown, timeout).await?;
        let text = String::from_utf8_lossy(&bytes);
        if !status.is_success() {
            return Err(self.status_error(method, &shown, status, &text));
        }
        if text.trim().is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_str(&text).map_err(|e| N8nError::Upstream {
            method: method.to_string(),
            path: shown,
            status: status.as_u16(),
            message: format!("the reply is not JSON ({e})"),
        })
    }

    /// A request to the instance outside both APIs (a production webhook URL): no key, no
    /// cookie. Answers the status and the body (JSON when it parses, else the text).
    pub async fn site_request(
        &self,
        method: Method,
        path: &str,
        query: &[(String, String)],
        headers: &[(String, String)],
        body: Option<&Value>,
        timeout: Duration,
    ) -> Result<(u16, Value), N8nError> {
        let mut req = self
            .http
            .request(method.clone(), format!("{}{path}", self.site_root))
            .timeout(timeout);
        for (k, v) in headers {
            req = req.header(k.as_str(), v.as_str());
        }
        if !query.is_empty() {
            req = req.query(query);
        }
        if let Some(b) = body {
            req = req.json(b);
        }
        let resp = self.send(req, &method, path, timeout).await?;
        let status = resp.status().as_u16();
        let bytes = self.read_capped(resp, &method, path, timeout).await?;
        let text = String::from_utf8_lossy(&bytes);
        let value = serde_json::from_str(&text)
            .unwrap_or_else(|_| Value::String(crate::sanitize::truncate_str(&text, 2000)));
        Ok((status, value))
    }

    /// The instance root, for links a person opens (credential pages, workflows).
    pub fn site(&self) -> &str {
        &self.site_root
    }

    /// `POST /rest/login`; stores and returns the `n8n-auth` cookie.
    async fn sign_in(&self, timeout: Duration) -> Result<String, N8nError> {
        let login = self.login.as_ref().expect("sign_in needs a login");
        let method = Method::POST;
        let path = "/rest/login";
        let req = self
            .http
            .post(format!("{}{path}", self.site_root))
            .header("Accept", "application/json")
            .json(&json!({"emailOrLdapLoginId": login.email, "password": login.password}))
            .timeout(timeout);
        let resp = self.send(req, &method, path, timeout).await?;
        let status = resp.status();
        let cookie = resp
            .headers()
            .get_all(reqwest::header::SET_COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .filter_map(|v| v.split(';').next())
            .map(str::trim)
            .find(|c| {
                c.strip_prefix(SESSION_COOKIE)
                    .and_then(|r| r.strip_prefix('='))
                    .is_some_and(|v| !v.is_empty())
            })
            .map(str::to_string);
        let body = self.read_capped(resp, &method, path, timeout).await?;
        let failed = |message: String| N8nError::LoginFailed {
            base_url: self.base_url.clone(),
            email: login.email.clone(),
            status: status.as_u16(),
            message: self.scrub(&message),
        };
        if !status.is_success() {
            return Err(failed(n8n_message(&String::from_utf8_lossy(&body))));
        }
        let cookie =
            cookie.ok_or_else(|| failed(format!("the reply set no {SESSION_COOKIE} cookie")))?;
        tracing::debug!(email = %login.email, "signed in to n8n for the node catalog");
        *self.session.lock().expect("session lock") = Some(cookie.clone());
        Ok(cookie)
    }

    /// The instance's credential types (`GET /types/credentials.json`, as the editor reads them),
    /// cached for [`CATALOG_TTL`]. `Ok(None)` when no login is configured.
    pub async fn credential_types(
        &self,
        timeout: Option<Duration>,
    ) -> Result<Option<Arc<Vec<Value>>>, N8nError> {
        if self.login.is_none() {
            return Ok(None);
        }
        if let Some(t) = fresh(&self.credential_types) {
            return Ok(Some(t));
        }
        let value = self.editor_json("/types/credentials.json", timeout).await?;
        let Value::Array(types) = value else {
            return Err(N8nError::Upstream {
                method: "GET".into(),
                path: "/types/credentials.json".into(),
                status: 200,
                message: "the credential types are not a JSON array".into(),
            });
        };
        Ok(Some(keep(&self.credential_types, types)))
    }

    /// One of the editor's static JSON documents (`/types/...`), signed in (again, once, when
    /// the session was refused).
    async fn editor_json(&self, path: &str, timeout: Option<Duration>) -> Result<Value, N8nError> {
        let timeout = timeout.map_or(self.timeout, |t| t.min(self.timeout));
        let session = self.session.lock().expect("session lock").clone();
        let cookie = match session {
            Some(c) => c,
            None => self.sign_in(timeout).await?,
        };
        let bytes = match self.fetch_editor(&cookie, path, timeout).await {
            // The session expired or was revoked: sign in again, once.
            Err(N8nError::Unauthorized { .. }) => {
                let cookie = self.sign_in(timeout).await?;
                self.fetch_editor(&cookie, path, timeout).await?
            }
            other => other?,
        };
        serde_json::from_slice(&bytes).map_err(|e| N8nError::Upstream {
            method: "GET".into(),
            path: path.into(),
            status: 200,
            message: format!("the reply is not JSON ({e})"),
        })
    }

    /// `GET path` on the editor with the session cookie, gzip accepted; the decoded bytes.
    async fn fetch_editor(
        &self,
        cookie: &str,
        path: &str,
        timeout: Duration,
    ) -> Result<Vec<u8>, N8nError> {
        let method = Method::GET;
        let req = self
            .http
            .get(format!("{}{path}", self.site_root))
            .header("Cookie", cookie)
            .header("Accept", "application/json")
            .header("Accept-Encoding", "gzip")
            .timeout(timeout);
        let resp = self.send(req, &method, path, timeout).await?;
        let status = resp.status();
        let gzip = resp
            .headers()
            .get(reqwest::header::CONTENT_ENCODING)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.eq_ignore_ascii_case("gzip"));
        let body = self.read_capped(resp, &method, path, timeout).await?;
        if !status.is_success() {
            return Err(self.status_error(&method, path, status, &String::from_utf8_lossy(&body)));
        }
        if !gzip {
            return Ok(body);
        }
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&body[..])
            .take(self.max_body + 1)
            .read_to_end(&mut out)
            .map_err(|e| N8nError::Upstream {
                method: method.to_string(),
                path: path.into(),
                status: status.as_u16(),
                message: format!("the gzip body cannot be decoded ({e})"),
            })?;
        if out.len() as u64 > self.max_body {
            return Err(N8nError::TooLarge {
                method: method.to_string(),
                path: path.into(),
                limit: self.max_body,
            });
        }
        Ok(out)
    }

    async fn send(
        &self,
        req: reqwest::RequestBuilder,
        method: &Method,
        path: &str,
        timeout: Duration,
    ) -> Result<reqwest::Response, N8nError> {
        req.send()
            .await
            .map_err(|e| self.transport_error(&e, method, path, timeout))
    }

    /// The body, read chunk by chunk and refused past the cap.
    async fn read_capped(
        &self,
        mut resp: reqwest::Response,
        method: &Method,
        path: &str,
        timeout: Duration,
    ) -> Result<Vec<u8>, N8nError> {
        let too_large = || N8nError::TooLarge {
            method: method.to_string(),
            path: path.split('?').next().unwrap_or(path).to_string(),
            limit: self.max_body,
        };
        if resp.content_length().is_some_and(|n| n > self.max_body) {
            return Err(too_large());
        }
        let mut body = Vec::new();
        while let Some(chunk) = resp
            .chunk()
            .await
            .map_err(|e| self.transport_error(&e, method, path, timeout))?
        {
            if body.len() as u64 + chunk.len() as u64 > self.max_body {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    fn transport_error(
        &self,
        e: &reqwest::Error,
        method: &Method,
        path: &str,
        timeout: Duration,
    ) -> N8nError {
        if e.is_timeout() {
            N8nError::Timeout {
                method: method.to_string(),
                path: path.to_string(),
                seconds: timeout.as_secs().max(1),
            }
        } else {
            N8nError::Unreachable {
                url: self.base_url.clone(),
                reason: self.scrub(&error_chain(e)),
            }
        }
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
            // A redirect is never followed (it would carry the key elsewhere).
            s @ 300..=399 => N8nError::Upstream {
                method,
                path,
                status: s,
                message: format!(
                    "n8n answered with a redirect, which is not followed (the API key would go with it); configure the final URL as base_url. {message}"
                ),
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

    /// `s` with the API key and the password (in every form a request carries them) replaced.
    fn scrub(&self, s: &str) -> String {
        let password = self.login.as_ref().map(|l| l.password.as_str());
        let secrets: Vec<&str> = [Some(self.api_key.as_str()), password]
            .into_iter()
            .flatten()
            .collect();
        toolshed_outbound::secret::redact(s, &secrets)
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
        assert_eq!(site_root("https://h/n8n/api/v1/"), "https://h/n8n");
        assert_eq!(site_root("http://h:5678/"), "http://h:5678");
    }

    #[test]
    fn debug_hides_the_key() {
        let c =
            N8nClient::new("http://h", "secret-key-123", Duration::from_secs(1), false).unwrap();
        assert!(!format!("{c:?}").contains("secret-key-123"));
        assert_eq!(c.scrub("x secret-key-123 y"), "x [REDACTED] y");
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
