//! The HTTP side: POSTing GraphQL requests with headers and credentials through the shared
//! `toolshed-outbound` client.
//!
//! Guards come from [`Outbound`]: endpoints on loopback, private, link-local or otherwise
//! non-public addresses are refused unless `allow_private` (literal IPs at once, names at every
//! DNS resolution, so a name that rebinds is caught too), every request has a timeout, and
//! responses are capped at [`MAX_RESPONSE_BYTES`] while streaming. Redirects are not followed,
//! so a request and its credentials are never replayed elsewhere.
//!
//! Credentials are a [`toolshed_outbound::AuthConfig`] (API key in a header, the query string
//! or a cookie; bearer; basic; OAuth2 client credentials with cached, shared tokens), the same
//! code the OpenAPI source uses, plus an optional per-call token from the caller's
//! `ToolContext`.

use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue, AUTHORIZATION, CONTENT_TYPE};
use reqwest::{Method, RequestBuilder};
use serde_json::Value;
use toolshed_outbound::secret::{is_credential_name, scheme_credential};
use toolshed_outbound::{AuthConfig, Outbound, OutboundConfig, OutboundError};

use crate::error::GraphqlError;
use crate::GraphqlOptions;

/// Responses larger than this are refused.
pub const MAX_RESPONSE_BYTES: usize = 32 * 1024 * 1024;
/// How much of a failing response body is quoted in errors.
const EXCERPT_CHARS: usize = 512;

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
    /// The credentials could not be obtained (OAuth2 token request, missing secret).
    Auth(String),
}

impl std::fmt::Display for HttpFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HttpFailure::Status { status, excerpt } => write!(f, "HTTP {status}: {excerpt}"),
            HttpFailure::Timeout => f.write_str("the request timed out"),
            HttpFailure::Transport(m) => write!(f, "request failed: {m}"),
            HttpFailure::Blocked(m) => f.write_str(m),
            HttpFailure::Body(m) => f.write_str(m),
            HttpFailure::Auth(m) => write!(f, "credentials: {m}"),
        }
    }
}

impl From<OutboundError> for HttpFailure {
    fn from(e: OutboundError) -> Self {
        match e {
            OutboundError::PrivateAddress { .. } => HttpFailure::Blocked(e.to_string()),
            OutboundError::Timeout(_) => HttpFailure::Timeout,
            OutboundError::TooLarge { .. } => HttpFailure::Body(e.to_string()),
            OutboundError::Token { .. } | OutboundError::MissingSecret { .. } => {
                HttpFailure::Auth(e.to_string())
            }
            other => HttpFailure::Transport(other.to_string()),
        }
    }
}

/// The guarded client for `opts`: its timeout and `allow_private`, the response cap, no
/// redirects. Share one between introspection and calls so OAuth2 tokens are fetched once.
pub(crate) fn outbound_for(opts: &GraphqlOptions) -> Result<Outbound, GraphqlError> {
    Outbound::new(OutboundConfig {
        timeout: opts.timeout,
        max_response_bytes: MAX_RESPONSE_BYTES as u64,
        allow_private: opts.allow_private,
        max_redirects: 0,
        ..OutboundConfig::default()
    })
    .map_err(|e| GraphqlError::Config(format!("cannot build the HTTP client: {e}")))
}

/// A client bound to one endpoint.
pub(crate) struct HttpClient {
    outbound: Outbound,
    url: String,
    headers: HeaderMap,
    auth: AuthConfig,
    token_provider: Option<String>,
    timeout: Duration,
    /// Configured secret values (auth, credential headers, listed secrets), blanked out of
    /// results and errors together with the OAuth2 tokens fetched so far.
    secrets: Vec<String>,
}

impl std::fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpClient")
            .field("url", &self.url)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("auth", &self.auth)
            .field("token_provider", &self.token_provider)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl HttpClient {
    pub(crate) fn new(
        url: &str,
        opts: &GraphqlOptions,
        outbound: Outbound,
    ) -> Result<Self, GraphqlError> {
        let parsed = reqwest::Url::parse(url)
            .map_err(|e| GraphqlError::Config(format!("endpoint '{url}' is not a URL: {e}")))?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
            return Err(GraphqlError::Config(format!(
                "endpoint '{url}' must be an http(s) URL with a host"
            )));
        }
        let mut map = HeaderMap::new();
        for (name, value) in &opts.headers {
            let (n, v) = header_pair(name, value)?;
            map.append(n, v);
        }
        if let AuthConfig::ApiKey {
            location: toolshed_outbound::ApiKeyLocation::Header,
            name,
            ..
        } = &opts.auth
        {
            HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
                GraphqlError::Config(format!(
                    "API key header '{name}' is not a valid header name"
                ))
            })?;
        }
        // Header values are secrets when the header carries a credential by its name
        // (`Authorization`, `X-Api-Key`, `Cookie`, ...) or the caller listed them; ordinary
        // values (`Accept-Language: en`) are not blanked out of results.
        let mut secrets: Vec<String> = opts.auth.secrets();
        secrets.extend(
            opts.headers
                .iter()
                .filter(|(k, _)| is_credential_name(k))
                .map(|(_, v)| v.clone()),
        );
        secrets.extend(opts.secrets.iter().cloned());
        // `Authorization: Bearer x` also leaks as `x` alone; other values with spaces are not
        // split into words (they would blank ordinary words out of results).
        let tails: Vec<String> = secrets
            .iter()
            .filter_map(|v| scheme_credential(v).map(str::to_string))
            .collect();
        secrets.extend(tails);
        secrets.retain(|v| v.len() >= 3);
        Ok(Self {
            outbound,
            url: url.to_string(),
            headers: map,
            auth: opts.auth.clone(),
            token_provider: opts.token_provider.clone(),
            timeout: opts.timeout,
            secrets,
        })
    }

    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// The auth provider whose token each call asks of its `ToolContext`, if any.
    pub(crate) fn token_provider(&self) -> Option<&str> {
        self.token_provider.as_deref()
    }

    /// The configured secret values and the OAuth2 access tokens fetched so far (an API may
    /// echo its caller's token), for redaction.
    pub(crate) fn secrets(&self) -> Vec<String> {
        let mut out = self.secrets.clone();
        out.extend(
            self.outbound
                .issued_tokens()
                .iter()
                .map(|t| t.expose().to_string()),
        );
        out
    }

    /// POSTs `body` as JSON and returns the parsed JSON answer of a 2xx response. `bearer`, when
    /// given, replaces any `Authorization` header.
    pub(crate) async fn post(
        &self,
        body: &Value,
        bearer: Option<&str>,
        timeout: Duration,
    ) -> Result<Value, HttpFailure> {
        let timeout = timeout.min(self.timeout);
        let req = self
            .outbound
            .request(Method::POST, &self.url)?
            .headers(self.headers.clone())
            .header(CONTENT_TYPE, "application/json")
            .timeout(timeout)
            .json(body);
        let mut req = self.outbound.authorize(req, &self.auth).await?;
        if let Some(token) = bearer {
            req = with_bearer(req, token)?;
        }
        let resp = self.outbound.send(req).await?;
        if !resp.is_success() {
            return Err(HttpFailure::Status {
                status: resp.status.as_u16(),
                excerpt: excerpt(&resp.body),
            });
        }
        serde_json::from_slice(&resp.body).map_err(|e| {
            HttpFailure::Body(format!(
                "the response is not JSON ({e}): {}",
                excerpt(&resp.body)
            ))
        })
    }
}

/// Sets `Authorization: Bearer <token>`, replacing any earlier one.
fn with_bearer(req: RequestBuilder, token: &str) -> Result<RequestBuilder, HttpFailure> {
    let value = HeaderValue::from_str(&format!("Bearer {token}"))
        .map_err(|_| HttpFailure::Auth("the token is not a valid header value".into()))?;
    let (client, built) = req.build_split();
    let mut built = built.map_err(|e| HttpFailure::Transport(e.to_string()))?;
    built.headers_mut().insert(AUTHORIZATION, value);
    Ok(RequestBuilder::from_parts(client, built))
}

fn header_pair(name: &str, value: &str) -> Result<(HeaderName, HeaderValue), GraphqlError> {
    let n = HeaderName::from_bytes(name.as_bytes())
        .map_err(|_| GraphqlError::Config(format!("'{name}' is not a valid header name")))?;
    let v = HeaderValue::from_str(value)
        .map_err(|_| GraphqlError::Config(format!("the value of header '{name}' is not valid")))?;
    Ok((n, v))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(allow_private: bool) -> GraphqlOptions {
        let mut o = GraphqlOptions::new("t", "");
        o.allow_private = allow_private;
        o.timeout = Duration::from_secs(1);
        o
    }

    fn client(url: &str, o: &GraphqlOptions) -> Result<HttpClient, GraphqlError> {
        HttpClient::new(url, o, outbound_for(o)?)
    }

    #[tokio::test]
    async fn loopback_endpoints_are_refused_unless_allowed() {
        let c = client("http://127.0.0.1:9/graphql", &opts(false)).unwrap();
        let e = c
            .post(&serde_json::json!({}), None, Duration::from_secs(1))
            .await
            .unwrap_err();
        assert!(matches!(e, HttpFailure::Blocked(_)), "{e}");
        assert!(e.to_string().contains("allow_private"), "{e}");
        let c = client("http://127.0.0.1:9/graphql", &opts(true)).unwrap();
        let e = c
            .post(&serde_json::json!({}), None, Duration::from_secs(1))
            .await
            .unwrap_err();
        assert!(matches!(e, HttpFailure::Transport(_)), "{e}");
    }

    #[test]
    fn bad_configuration_is_reported() {
        assert!(client("not a url", &opts(true)).is_err());
        assert!(client("ftp://x/y", &opts(true)).is_err());
        let mut bad = opts(true);
        bad.headers = vec![("bad header".to_string(), "v".to_string())];
        assert!(client("http://x/y", &bad).is_err());
        let mut bad = opts(true);
        bad.auth = AuthConfig::ApiKey {
            location: toolshed_outbound::ApiKeyLocation::Header,
            name: "bad header".into(),
            value: toolshed_outbound::Secret::new("k"),
        };
        let e = client("http://x/y", &bad).unwrap_err();
        assert!(e.to_string().contains("API key header"), "{e}");
    }

    /// Only `<scheme> <credential>` header values add their credential alone; an ordinary
    /// value with a space must not blank its last word out of every result.
    #[test]
    fn only_auth_scheme_values_are_split() {
        let mut o = opts(true);
        o.headers = vec![
            ("X-Session-Mode".to_string(), "device code".to_string()),
            ("Authorization".to_string(), "Token tok-999".to_string()),
        ];
        let c = client("http://x/y", &o).unwrap();
        let mut secrets = c.secrets();
        secrets.sort();
        assert_eq!(secrets, ["Token tok-999", "device code", "tok-999"]);
    }

    #[test]
    fn excerpts_are_bounded() {
        let long = "x".repeat(2000);
        let e = excerpt(long.as_bytes());
        assert_eq!(e.chars().count(), EXCERPT_CHARS + 1);
    }

    #[test]
    fn outbound_failures_map_to_http_failures() {
        let f: HttpFailure = OutboundError::Timeout("slow".into()).into();
        assert_eq!(f, HttpFailure::Timeout);
        let f: HttpFailure = OutboundError::Token {
            url: "http://t".into(),
            reason: "status 401".into(),
        }
        .into();
        assert!(matches!(f, HttpFailure::Auth(_)), "{f}");
    }
}
