//! [`Outbound`]: the guarded HTTP client every outbound call goes through.

use std::error::Error as StdError;
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::HeaderMap;
use reqwest::{Method, RequestBuilder, StatusCode};
use serde_json::Value;

use crate::auth::{AuthConfig, TokenCache};
use crate::error::OutboundError;
use crate::net::{
    check_url_under, classify, find_refused, AddressRule, GuardedResolver, Network, Refused,
};
use crate::redirect;
use crate::secret::Secret;

/// How many characters of an error body are kept in errors.
pub const BODY_EXCERPT_CHARS: usize = 500;

/// Settings of one [`Outbound`] client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboundConfig {
    /// Whole-request timeout (a per-request timeout may shorten it).
    pub timeout: Duration,
    /// Responses larger than this are aborted while streaming.
    pub max_response_bytes: u64,
    /// Allows loopback, private, link-local, unspecified and CGNAT addresses.
    pub allow_private: bool,
    pub user_agent: String,
    /// Redirects followed before giving up.
    pub max_redirects: usize,
    /// Address blocks never contacted, even with `allow_private` (e.g. a cloud metadata
    /// address on a network whose private addresses are otherwise allowed).
    pub denied_networks: Vec<Network>,
}

impl OutboundConfig {
    /// The address rule of this configuration.
    pub fn address_rule(&self) -> AddressRule {
        AddressRule {
            allow_private: self.allow_private,
            denied: self.denied_networks.clone(),
        }
    }
}

impl Default for OutboundConfig {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(30),
            max_response_bytes: 10 * 1024 * 1024,
            allow_private: false,
            user_agent: concat!("toolshed/", env!("CARGO_PKG_VERSION")).to_string(),
            max_redirects: 5,
            denied_networks: Vec::new(),
        }
    }
}

/// A fully read response.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub url: url::Url,
    pub body: Vec<u8>,
}

impl Response {
    pub fn is_success(&self) -> bool {
        self.status.is_success()
    }

    /// The body as text (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body parsed as JSON.
    pub fn json<T: serde::de::DeserializeOwned>(&self) -> Result<T, OutboundError> {
        serde_json::from_slice(&self.body).map_err(|e| {
            OutboundError::Http(format!("response from {} is not valid JSON: {e}", self.url))
        })
    }

    /// JSON when the body parses as JSON, a string otherwise, `null` when empty.
    pub fn value(&self) -> Value {
        if self.body.iter().all(|b| b.is_ascii_whitespace()) {
            return Value::Null;
        }
        serde_json::from_slice(&self.body).unwrap_or_else(|_| Value::String(self.text()))
    }

    /// The first [`BODY_EXCERPT_CHARS`] characters of the body.
    pub fn body_excerpt(&self) -> String {
        excerpt(&self.text())
    }

    /// Turns a non-2xx response into [`OutboundError::Status`].
    pub fn error_for_status(self) -> Result<Self, OutboundError> {
        if self.is_success() {
            Ok(self)
        } else {
            Err(OutboundError::Status {
                status: self.status.as_u16(),
                body_excerpt: self.body_excerpt(),
            })
        }
    }
}

/// Trims `s` to at most [`BODY_EXCERPT_CHARS`] characters.
pub fn excerpt(s: &str) -> String {
    let s = s.trim();
    match s.char_indices().nth(BODY_EXCERPT_CHARS) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

struct ClientState {
    client: reqwest::Client,
    config: OutboundConfig,
    tokens: TokenCache,
}

/// The guarded HTTP client. Cheap to clone; clones share connections and OAuth2 tokens.
#[derive(Clone)]
pub struct Outbound {
    inner: Arc<ClientState>,
}

impl std::fmt::Debug for Outbound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outbound")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

impl Outbound {
    /// Builds the client for `config`.
    pub fn new(config: OutboundConfig) -> Result<Self, OutboundError> {
        let client = reqwest::Client::builder()
            .timeout(config.timeout)
            .connect_timeout(config.timeout.min(Duration::from_secs(10)))
            .user_agent(config.user_agent.clone())
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .dns_resolver(GuardedResolver::new(config.address_rule()))
            .build()
            .map_err(|e| OutboundError::Http(describe(&e)))?;
        Ok(Self {
            inner: Arc::new(ClientState {
                client,
                config,
                tokens: TokenCache::default(),
            }),
        })
    }

    /// A client with [`OutboundConfig::default`].
    pub fn with_defaults() -> Result<Self, OutboundError> {
        Self::new(OutboundConfig::default())
    }

    pub fn config(&self) -> &OutboundConfig {
        &self.inner.config
    }

    /// The underlying reqwest client, for building requests to pass to [`Outbound::send`].
    pub fn client(&self) -> &reqwest::Client {
        &self.inner.client
    }

    /// Starts a request to `url`, refusing bad schemes and literal non-public IPs at once.
    pub fn request(&self, method: Method, url: &str) -> Result<RequestBuilder, OutboundError> {
        let parsed = url::Url::parse(url).map_err(|e| OutboundError::InvalidUrl {
            url: url.to_string(),
            reason: e.to_string(),
        })?;
        check_url_under(&parsed, &self.inner.config.address_rule())?;
        Ok(self.inner.client.request(method, parsed))
    }

    /// Adds the credentials of `auth` to a request (fetching an OAuth2 token when needed).
    pub async fn authorize(
        &self,
        req: RequestBuilder,
        auth: &AuthConfig,
    ) -> Result<RequestBuilder, OutboundError> {
        auth.apply(req, self).await
    }

    pub(crate) fn tokens(&self) -> &TokenCache {
        &self.inner.tokens
    }

    /// The OAuth2 access tokens this client (and its clones) fetched, newest last (a bounded
    /// number). They are secrets like the configured ones: blank them out of whatever an API
    /// answers, since an API may echo its caller's token.
    pub fn issued_tokens(&self) -> Vec<Secret> {
        self.inner.tokens.issued()
    }

    /// Sends a request and reads the whole body within the size cap, whatever the status.
    ///
    /// Redirects are followed here, hop by hop, under the rule of [`crate::redirect`]: every
    /// hop is checked against the address guard, and a hop to another origin carries no
    /// credentials (or is refused when the query it would repeat carried them).
    pub async fn send(&self, req: RequestBuilder) -> Result<Response, OutboundError> {
        let (client, req) = req.build_split();
        let mut req = req.map_err(|e| OutboundError::Http(describe(&e)))?;
        let max = self.inner.config.max_redirects;
        let mut hops = 0;
        loop {
            check_url_under(req.url(), &self.inner.config.address_rule())?;
            let host = req.url().host_str().unwrap_or_default().to_string();
            let again = req.try_clone();
            let resp = client
                .execute(req)
                .await
                .map_err(|e| map_reqwest(e, &host))?;
            let Some(target) = redirect::target(&resp) else {
                return self.read(resp, &host).await;
            };
            let target = target.map_err(|reason| refused(&host, reason))?;
            if hops == max {
                return Err(refused(&host, format!("more than {max} redirects")));
            }
            hops += 1;
            let prev = again
                .ok_or_else(|| refused(&host, "the request body cannot be sent again".into()))?;
            req = redirect::next_request(prev, resp.status(), target)
                .map_err(|reason| refused(&host, reason))?;
        }
    }

    /// Reads a response within the size cap.
    async fn read(
        &self,
        mut resp: reqwest::Response,
        host: &str,
    ) -> Result<Response, OutboundError> {
        let limit = self.inner.config.max_response_bytes;
        let url = resp.url().clone();
        if resp.content_length().is_some_and(|n| n > limit) {
            return Err(OutboundError::TooLarge {
                url: strip_query(&url),
                limit,
            });
        }
        let status = resp.status();
        let headers = resp.headers().clone();
        let mut body = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(|e| map_reqwest(e, host))? {
            if body.len() as u64 + chunk.len() as u64 > limit {
                return Err(OutboundError::TooLarge {
                    url: strip_query(&url),
                    limit,
                });
            }
            body.extend_from_slice(&chunk);
        }
        Ok(Response {
            status,
            headers,
            url,
            body,
        })
    }

    /// Like [`Outbound::send`], but a non-2xx status is an [`OutboundError::Status`].
    pub async fn send_checked(&self, req: RequestBuilder) -> Result<Response, OutboundError> {
        self.send(req).await?.error_for_status()
    }

    /// GETs `url` and parses the 2xx body as JSON.
    pub async fn get_json(&self, url: &str) -> Result<Value, OutboundError> {
        let req = self.request(Method::GET, url)?;
        self.send_checked(req).await?.json()
    }

    /// GETs `url` and returns the 2xx body as text.
    pub async fn get_text(&self, url: &str) -> Result<String, OutboundError> {
        let req = self.request(Method::GET, url)?;
        Ok(self.send_checked(req).await?.text())
    }
}

/// A redirect that is not followed.
fn refused(host: &str, reason: String) -> OutboundError {
    OutboundError::Http(format!("redirect from {host} refused: {reason}"))
}

/// A bare HTTP client under the same guard as [`Outbound`], for transports that drive their
/// own requests (streamable HTTP MCP): no proxies from the environment, the address-guarding
/// resolver, no overall timeout, and redirects never followed, so a `3xx` can take no
/// credential anywhere.
pub fn unfollowing_client(allow_private: bool) -> Result<reqwest::Client, OutboundError> {
    reqwest::Client::builder()
        .no_proxy()
        .tcp_nodelay(true)
        .redirect(reqwest::redirect::Policy::none())
        .dns_resolver(GuardedResolver::new(AddressRule::new(allow_private)))
        .build()
        .map_err(|e| OutboundError::Http(describe(&e)))
}

fn strip_query(url: &url::Url) -> String {
    let mut u = url.clone();
    u.set_query(None);
    u.to_string()
}

/// An error and its sources on one line, without the URL (which may carry a query secret).
fn describe(e: &reqwest::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        let s_text = s.to_string();
        if !out.contains(&s_text) {
            out.push_str(": ");
            out.push_str(&s_text);
        }
        cur = s.source();
    }
    out
}

fn map_reqwest(e: reqwest::Error, host: &str) -> OutboundError {
    if let Some(Refused {
        host: h,
        addr,
        class,
    }) = find_refused(&e)
    {
        return OutboundError::refused_address(h, addr.to_string(), class);
    }
    let e = e.without_url();
    if e.is_timeout() {
        return OutboundError::Timeout(format!("{host}: {}", describe(&e)));
    }
    OutboundError::Http(format!("{host}: {}", describe(&e)))
}

/// True when `ip` may be contacted under `allow_private`.
pub fn is_allowed(ip: std::net::IpAddr, allow_private: bool) -> bool {
    allow_private || classify(ip).is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excerpts_are_bounded() {
        let long = "é".repeat(2000);
        let e = excerpt(&long);
        assert_eq!(e.chars().count(), BODY_EXCERPT_CHARS + 1);
        assert_eq!(excerpt("  short  "), "short");
    }

    #[test]
    fn response_values() {
        let r = Response {
            status: StatusCode::OK,
            headers: HeaderMap::new(),
            url: url::Url::parse("http://example.com").unwrap(),
            body: br#"{"a":1}"#.to_vec(),
        };
        assert_eq!(r.value()["a"], 1);
        let r = Response {
            body: b"plain".to_vec(),
            ..r
        };
        assert_eq!(r.value(), Value::String("plain".into()));
        let r = Response {
            status: StatusCode::NOT_FOUND,
            ..r
        };
        let e = r.error_for_status().unwrap_err();
        assert!(matches!(e, OutboundError::Status { status: 404, .. }));
    }

    #[test]
    fn defaults() {
        let c = OutboundConfig::default();
        assert_eq!(c.max_response_bytes, 10 * 1024 * 1024);
        assert!(!c.allow_private);
        assert!(is_allowed("8.8.8.8".parse().unwrap(), false));
        assert!(!is_allowed("127.0.0.1".parse().unwrap(), false));
    }
}
