//! The HTTP side: POSTing GraphQL requests with headers and auth, with guards.
//!
//! Kept in this one module so it can be swapped for the workspace's shared outbound client.
//! Guards: no redirects, a per-request timeout, a response size cap, and (unless
//! `allow_private`) refusal of endpoints whose host resolves to a loopback, private,
//! link-local or otherwise non-public address. The address check happens before each request;
//! the connection itself resolves the name again.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue, AUTHORIZATION, CONTENT_TYPE};
use serde_json::Value;

use crate::error::GraphqlError;

/// Responses larger than this are refused.
pub const MAX_RESPONSE_BYTES: usize = 32 * 1024 * 1024;
/// How much of a failing response body is quoted in errors.
const EXCERPT_CHARS: usize = 512;

/// Credentials added to every request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum GraphqlAuth {
    /// No credentials beyond `GraphqlOptions::headers`.
    #[default]
    None,
    /// `Authorization: Bearer <token>`.
    Bearer(String),
    /// Any header, e.g. `X-Api-Key`.
    Header { name: String, value: String },
    /// A token asked of the call's `ToolContext` for this auth provider, sent as a bearer token.
    /// Live introspection has no context, so it goes without this credential.
    Provider(String),
}

/// Why a request failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HttpFailure {
    /// The server answered with a non-2xx status.
    Status { status: u16, excerpt: String },
    /// The request did not finish in time.
    Timeout,
    /// Connection or protocol failure.
    Transport(String),
    /// The endpoint resolves to an address that is not allowed.
    Blocked(String),
    /// The body was not JSON or was too large.
    Body(String),
}

impl std::fmt::Display for HttpFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HttpFailure::Status { status, excerpt } => write!(f, "HTTP {status}: {excerpt}"),
            HttpFailure::Timeout => f.write_str("the request timed out"),
            HttpFailure::Transport(m) => write!(f, "request failed: {m}"),
            HttpFailure::Blocked(m) => f.write_str(m),
            HttpFailure::Body(m) => f.write_str(m),
        }
    }
}

/// A client bound to one endpoint.
#[derive(Debug)]
pub(crate) struct HttpClient {
    client: reqwest::Client,
    url: reqwest::Url,
    headers: HeaderMap,
    auth: GraphqlAuth,
    timeout: Duration,
    allow_private: bool,
}

impl HttpClient {
    pub(crate) fn new(
        url: &str,
        headers: &[(String, String)],
        auth: GraphqlAuth,
        timeout: Duration,
        allow_private: bool,
    ) -> Result<Self, GraphqlError> {
        let parsed = reqwest::Url::parse(url)
            .map_err(|e| GraphqlError::Config(format!("endpoint '{url}' is not a URL: {e}")))?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
            return Err(GraphqlError::Config(format!(
                "endpoint '{url}' must be an http(s) URL with a host"
            )));
        }
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            let (n, v) = header_pair(name, value)?;
            map.append(n, v);
        }
        match &auth {
            GraphqlAuth::Bearer(token) => {
                let (n, v) = header_pair("authorization", &format!("Bearer {token}"))?;
                map.insert(n, v);
            }
            GraphqlAuth::Header { name, value } => {
                let (n, v) = header_pair(name, value)?;
                map.insert(n, v);
            }
            GraphqlAuth::None | GraphqlAuth::Provider(_) => {}
        }
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| GraphqlError::Config(format!("cannot build HTTP client: {e}")))?;
        Ok(Self {
            client,
            url: parsed,
            headers: map,
            auth,
            timeout,
            allow_private,
        })
    }

    pub(crate) fn url(&self) -> &str {
        self.url.as_str()
    }

    pub(crate) fn auth(&self) -> &GraphqlAuth {
        &self.auth
    }

    /// POSTs `body` as JSON and returns the parsed JSON answer of a 2xx response.
    pub(crate) async fn post(
        &self,
        body: &Value,
        bearer: Option<&str>,
        timeout: Duration,
    ) -> Result<Value, HttpFailure> {
        let timeout = timeout.min(self.timeout);
        if !self.allow_private {
            self.check_address().await?;
        }
        let mut req = self
            .client
            .post(self.url.clone())
            .headers(self.headers.clone())
            .header(CONTENT_TYPE, "application/json")
            .timeout(timeout)
            .json(body);
        if let Some(token) = bearer {
            let value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
                HttpFailure::Transport("the token is not a valid header value".into())
            })?;
            req = req.header(AUTHORIZATION, value);
        }
        let mut resp = req.send().await.map_err(transport)?;
        let status = resp.status();
        let mut buf: Vec<u8> = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(transport)? {
            if buf.len() + chunk.len() > MAX_RESPONSE_BYTES {
                return Err(HttpFailure::Body(format!(
                    "the response is larger than {MAX_RESPONSE_BYTES} bytes"
                )));
            }
            buf.extend_from_slice(&chunk);
        }
        if !status.is_success() {
            return Err(HttpFailure::Status {
                status: status.as_u16(),
                excerpt: excerpt(&buf),
            });
        }
        serde_json::from_slice(&buf).map_err(|e| {
            HttpFailure::Body(format!("the response is not JSON ({e}): {}", excerpt(&buf)))
        })
    }

    async fn check_address(&self) -> Result<(), HttpFailure> {
        let host = self.url.host_str().unwrap_or_default();
        let port = self.url.port_or_known_default().unwrap_or(443);
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let addrs: Vec<SocketAddr> = match host.parse::<IpAddr>() {
            Ok(ip) => vec![SocketAddr::new(ip, port)],
            Err(_) => tokio::net::lookup_host((host, port))
                .await
                .map_err(|e| HttpFailure::Transport(format!("cannot resolve '{host}': {e}")))?
                .collect(),
        };
        if let Some(bad) = addrs.iter().find(|a| !is_public(a.ip())) {
            return Err(HttpFailure::Blocked(format!(
                "endpoint host '{host}' resolves to non-public address {} (set allow_private to permit it)",
                bad.ip()
            )));
        }
        Ok(())
    }
}

fn header_pair(name: &str, value: &str) -> Result<(HeaderName, HeaderValue), GraphqlError> {
    let n = HeaderName::from_bytes(name.as_bytes())
        .map_err(|_| GraphqlError::Config(format!("'{name}' is not a valid header name")))?;
    let v = HeaderValue::from_str(value)
        .map_err(|_| GraphqlError::Config(format!("the value of header '{name}' is not valid")))?;
    Ok((n, v))
}

fn transport(e: reqwest::Error) -> HttpFailure {
    if e.is_timeout() {
        HttpFailure::Timeout
    } else {
        let mut msg = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(s) = source {
            msg.push_str(": ");
            msg.push_str(&s.to_string());
            source = s.source();
        }
        HttpFailure::Transport(msg)
    }
}

/// The first characters of a body, lossily decoded.
pub(crate) fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let mut out: String = text.chars().take(EXCERPT_CHARS).collect();
    if text.chars().count() > EXCERPT_CHARS {
        out.push('…');
    }
    out
}

/// Whether an address is globally routable (the shared outbound classification: not loopback,
/// private, link-local, CGNAT, reserved, ...).
pub(crate) fn is_public(ip: IpAddr) -> bool {
    toolshed_outbound::net::classify(ip).is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_addresses_are_not_public() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "192.168.0.1",
            "169.254.1.1",
            "::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "100.64.0.1",
        ] {
            assert!(!is_public(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["8.8.8.8", "2606:4700::1111"] {
            assert!(is_public(ip.parse().unwrap()), "{ip}");
        }
    }

    #[tokio::test]
    async fn loopback_endpoints_are_refused_unless_allowed() {
        let c = HttpClient::new(
            "http://127.0.0.1:9/graphql",
            &[],
            GraphqlAuth::None,
            Duration::from_secs(1),
            false,
        )
        .unwrap();
        let e = c
            .post(&serde_json::json!({}), None, Duration::from_secs(1))
            .await
            .unwrap_err();
        assert!(matches!(e, HttpFailure::Blocked(_)), "{e}");
    }

    #[test]
    fn bad_configuration_is_reported() {
        assert!(HttpClient::new(
            "not a url",
            &[],
            GraphqlAuth::None,
            Duration::from_secs(1),
            true
        )
        .is_err());
        assert!(HttpClient::new(
            "ftp://x/y",
            &[],
            GraphqlAuth::None,
            Duration::from_secs(1),
            true
        )
        .is_err());
        let bad = [("bad header".to_string(), "v".to_string())];
        assert!(HttpClient::new(
            "http://x/y",
            &bad,
            GraphqlAuth::None,
            Duration::from_secs(1),
            true
        )
        .is_err());
    }

    #[test]
    fn excerpts_are_bounded() {
        let long = "x".repeat(2000);
        let e = excerpt(long.as_bytes());
        assert_eq!(e.chars().count(), EXCERPT_CHARS + 1);
    }
}
