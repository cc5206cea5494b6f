//! The listener guard: one middleware layer in front of every route of the HTTP listener (the
//! `/v1` API, `/mcp`, `/healthz` and any route added later), so a web page the user happens to
//! visit cannot drive the local server.
//!
//! Checked in this order, each answering a JSON error before any route runs:
//!
//! 1. **Host** (DNS rebinding): the `Host` header must name an allowed host
//!    ([`GuardConfig::allowed_hosts`]; loopback names with any port by default) → 403
//!    `forbidden_host`.
//! 2. **Origin** (cross-site requests): a request carrying `Origin` must come from the server's
//!    own origin (same host and port as `Host`) or from an allowed origin → 403
//!    `forbidden_origin`. Requests without `Origin` (CLI tools, SDKs) pass.
//! 3. **Content type**: a POST, PUT or PATCH with a body must send `application/json` (parameters
//!    such as `; charset=utf-8` allowed) or a `+json` type such as `application/json-patch+json`
//!    → 415 `unsupported_media_type`. The types a browser may send cross-site without asking
//!    (`text/plain`, forms) are never JSON.
//!
//! Pages of an allowed origin also get CORS answers (preflight, `Access-Control-Allow-Origin`),
//! so a browser lets them call the API and MCP with keys and JSON bodies.

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use serde_json::json;
use tower_http::cors::{AllowOrigin, CorsLayer};

/// The loopback names accepted when no host is configured (any port).
pub const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

/// What the guard accepts.
#[derive(Clone, Debug, Default)]
pub struct GuardConfig {
    /// Accepted `Host` values: `name` (any port), `name:port`, `[v6]`, `[v6]:port`, or `*` for
    /// any host. Empty means [`LOOPBACK_HOSTS`].
    pub allowed_hosts: Vec<String>,
    /// Origins besides the server's own whose requests are accepted, e.g.
    /// `https://app.example.com` (scheme, host, and port when not the scheme's default).
    pub allowed_origins: Vec<String>,
}

/// `router` with the guard in front of all of its routes.
pub fn guard(router: Router, config: GuardConfig) -> Router {
    let router = match cors(&config.allowed_origins) {
        Some(layer) => router.layer(layer),
        None => router,
    };
    let rules = Rules::new(config);
    router.layer(axum::middleware::from_fn_with_state(rules, check))
}

/// CORS for the allowed origins (inside the guard: other origins never reach it).
fn cors(origins: &[String]) -> Option<CorsLayer> {
    let origins: Vec<HeaderValue> = origins
        .iter()
        .filter_map(|o| HeaderValue::from_str(o.trim().trim_end_matches('/')).ok())
        .collect();
    if origins.is_empty() {
        return None;
    }
    let mcp = |n: &'static str| HeaderName::from_static(n);
    Some(
        CorsLayer::new()
            .allow_origin(AllowOrigin::list(origins))
            .allow_methods([Method::GET, Method::POST, Method::DELETE])
            .allow_headers([
                header::AUTHORIZATION,
                header::CONTENT_TYPE,
                mcp("x-api-key"),
                mcp("mcp-session-id"),
                mcp("mcp-protocol-version"),
                mcp("last-event-id"),
            ])
            .expose_headers([mcp("mcp-session-id")]),
    )
}

#[derive(Clone, Debug)]
struct Rules {
    /// `None` accepts any host.
    hosts: Option<Vec<HostRule>>,
    origins: Vec<Origin>,
    origin_text: Vec<String>,
}

impl Rules {
    fn new(config: GuardConfig) -> Self {
        let hosts = if config.allowed_hosts.iter().any(|h| h.trim() == "*") {
            None
        } else if config.allowed_hosts.is_empty() {
            Some(
                LOOPBACK_HOSTS
                    .iter()
                    .filter_map(|h| HostRule::parse(h))
                    .collect(),
            )
        } else {
            Some(
                config
                    .allowed_hosts
                    .iter()
                    .filter_map(|h| HostRule::parse(h))
                    .collect(),
            )
        };
        let origins = config
            .allowed_origins
            .iter()
            .filter_map(|o| Origin::parse(o))
            .collect();
        Self {
            hosts,
            origins,
            origin_text: config.allowed_origins,
        }
    }
}

/// One entry of the allowed hosts: a host name, optionally with a port.
#[derive(Clone, Debug, PartialEq, Eq)]
struct HostRule {
    host: String,
    port: Option<u16>,
}

impl HostRule {
    fn parse(text: &str) -> Option<Self> {
        let text = text.trim();
        if text.is_empty() {
            return None;
        }
        // A bare IPv6 address (`::1`) is not an authority; bracket it.
        let text = if text.contains("::") && !text.starts_with('[') {
            format!("[{text}]")
        } else {
            text.to_string()
        };
        let authority: axum::http::uri::Authority = text.parse().ok()?;
        Some(Self {
            host: normalize_host(authority.host()),
            port: authority.port_u16(),
        })
    }

    fn accepts(&self, host: &Authority) -> bool {
        self.host == host.host && self.port.is_none_or(|p| host.port == Some(p))
    }
}

/// The request's own authority, from `Host` (or the URI of an HTTP/2 request).
#[derive(Debug, PartialEq, Eq)]
struct Authority {
    host: String,
    port: Option<u16>,
}

fn normalize_host(host: &str) -> String {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase()
}

fn request_authority(req: &Request) -> Result<Authority, String> {
    let text = match req.headers().get(header::HOST) {
        Some(v) => v
            .to_str()
            .map_err(|_| "the Host header is not ASCII".to_string())?
            .to_string(),
        None => req
            .uri()
            .authority()
            .map(|a| a.as_str().to_string())
            .ok_or_else(|| "the request has no Host header".to_string())?,
    };
    let authority: axum::http::uri::Authority = text
        .parse()
        .map_err(|_| format!("the Host header '{}' is not a host", bounded(&text)))?;
    Ok(Authority {
        host: normalize_host(authority.host()),
        port: authority.port_u16(),
    })
}

/// A browser origin: scheme, host and effective port (`null` origins never parse).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Origin {
    scheme: String,
    host: String,
    port: Option<u16>,
    explicit_port: bool,
}

impl Origin {
    fn parse(text: &str) -> Option<Self> {
        let uri: axum::http::Uri = text.trim().trim_end_matches('/').parse().ok()?;
        let scheme = uri.scheme_str()?.to_ascii_lowercase();
        let authority = uri.authority()?;
        let default = match scheme.as_str() {
            "http" => Some(80),
            "https" => Some(443),
            _ => None,
        };
        Some(Self {
            host: normalize_host(authority.host()),
            port: authority.port_u16().or(default),
            explicit_port: authority.port_u16().is_some(),
            scheme,
        })
    }

    /// The server's own origin: the same host and port the request was sent to (over http, or
    /// https behind a proxy that terminates TLS).
    fn is_same_as(&self, own: &Authority) -> bool {
        self.host == own.host
            && match own.port {
                Some(p) => self.port == Some(p),
                None => !self.explicit_port,
            }
    }

    fn matches(&self, allowed: &Origin) -> bool {
        self.scheme == allowed.scheme && self.host == allowed.host && self.port == allowed.port
    }
}

/// User-supplied text in an error message, bounded.
fn bounded(text: &str) -> String {
    const MAX: usize = 200;
    if text.len() <= MAX {
        return text.to_string();
    }
    let mut end = MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// Why the guard refused a request: the JSON error it answers.
struct Refusal {
    status: StatusCode,
    code: &'static str,
    message: String,
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let body = json!({"error": {"code": self.code, "message": self.message}});
        (self.status, Json(body)).into_response()
    }
}

fn refuse(status: StatusCode, code: &'static str, message: String) -> Refusal {
    Refusal {
        status,
        code,
        message,
    }
}

async fn check(State(rules): State<Rules>, req: Request, next: Next) -> Response {
    match admit(&rules, &req) {
        Ok(()) => next.run(req).await,
        Err(refusal) => refusal.into_response(),
    }
}

fn admit(rules: &Rules, req: &Request) -> Result<(), Refusal> {
    let own =
        request_authority(req).map_err(|m| refuse(StatusCode::BAD_REQUEST, "bad_request", m))?;
    if let Some(hosts) = &rules.hosts {
        if !hosts.iter().any(|h| h.accepts(&own)) {
            tracing::warn!(host = %bounded(&own.host), "refused a request for a host that is not allowed (DNS rebinding?)");
            return Err(refuse(
                StatusCode::FORBIDDEN,
                "forbidden_host",
                format!(
                    "host '{}' is not allowed: add it to [http] allowed_hosts",
                    bounded(&own.host)
                ),
            ));
        }
    }
    check_origin(rules, req.headers(), &own)?;
    check_content_type(req.method(), req.headers())
}

fn check_origin(rules: &Rules, headers: &HeaderMap, own: &Authority) -> Result<(), Refusal> {
    let Some(value) = headers.get(header::ORIGIN) else {
        return Ok(());
    };
    let text = value.to_str().unwrap_or("(not ASCII)");
    let accepted = Origin::parse(text)
        .is_some_and(|o| o.is_same_as(own) || rules.origins.iter().any(|a| o.matches(a)))
        || rules.origin_text.iter().any(|a| a.trim() == text.trim());
    if accepted {
        return Ok(());
    }
    tracing::warn!(origin = %bounded(text), "refused a cross-origin request");
    Err(refuse(
        StatusCode::FORBIDDEN,
        "forbidden_origin",
        format!(
            "cross-origin request from '{}' refused: only the server's own origin and [http] allowed_origins may call it",
            bounded(text)
        ),
    ))
}

/// Whether the request carries a body (a length above zero, a chunked body, or a content type).
fn has_body(headers: &HeaderMap) -> bool {
    let length = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    length.is_some_and(|n| n > 0)
        || headers.contains_key(header::TRANSFER_ENCODING)
        || headers.contains_key(header::CONTENT_TYPE)
}

/// `application/json` or `application/<anything>+json`, with any parameters.
pub fn is_json_type(value: &str) -> bool {
    let essence = value.split(';').next().unwrap_or_default().trim();
    let Some((kind, subtype)) = essence.split_once('/') else {
        return false;
    };
    kind.eq_ignore_ascii_case("application")
        && (subtype.eq_ignore_ascii_case("json")
            || (subtype.len() > 5 && subtype.to_ascii_lowercase().ends_with("+json")))
}

fn check_content_type(method: &Method, headers: &HeaderMap) -> Result<(), Refusal> {
    if !matches!(*method, Method::POST | Method::PUT | Method::PATCH) || !has_body(headers) {
        return Ok(());
    }
    let value = headers.get(header::CONTENT_TYPE).map(|v| v.to_str());
    match value {
        Some(Ok(t)) if is_json_type(t) => Ok(()),
        other => {
            let sent = match other {
                Some(Ok(t)) => format!("'{}'", bounded(t)),
                Some(Err(_)) => "a non-ASCII type".to_string(),
                None => "no Content-Type".to_string(),
            };
            Err(refuse(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                format!("the request body must be JSON: send 'Content-Type: application/json' (got {sent})"),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn own(host: &str, port: Option<u16>) -> Authority {
        Authority {
            host: host.into(),
            port,
        }
    }

    #[test]
    fn host_rules_match_names_with_any_or_one_port() {
        let any = HostRule::parse("LocalHost").unwrap();
        assert!(any.accepts(&own("localhost", Some(7777))));
        assert!(any.accepts(&own("localhost", None)));
        assert!(!any.accepts(&own("localhost.evil.example", None)));
        let one = HostRule::parse("example.com:8080").unwrap();
        assert!(one.accepts(&own("example.com", Some(8080))));
        assert!(!one.accepts(&own("example.com", Some(80))));
        for v6 in ["::1", "[::1]", "[::1]:7777"] {
            let r = HostRule::parse(v6).unwrap();
            assert!(r.accepts(&own("::1", Some(7777))), "{v6}");
        }
    }

    #[test]
    fn origins_compare_scheme_host_and_effective_port() {
        let o = Origin::parse("http://127.0.0.1:7777").unwrap();
        assert!(o.is_same_as(&own("127.0.0.1", Some(7777))));
        assert!(!o.is_same_as(&own("127.0.0.1", Some(7778))));
        assert!(!o.is_same_as(&own("localhost", Some(7777))));
        let plain = Origin::parse("https://tools.example.com").unwrap();
        assert!(plain.is_same_as(&own("tools.example.com", None)));
        let allowed = Origin::parse("https://app.example.com:443/").unwrap();
        assert!(Origin::parse("https://APP.example.com")
            .unwrap()
            .matches(&allowed));
        assert!(!Origin::parse("http://app.example.com")
            .unwrap()
            .matches(&allowed));
        assert_eq!(Origin::parse("null"), None);
    }

    #[test]
    fn json_types_with_parameters_and_suffixes() {
        for ok in [
            "application/json",
            "Application/JSON; charset=utf-8",
            "application/json-patch+json",
            "application/merge-patch+json;charset=utf-8",
        ] {
            assert!(is_json_type(ok), "{ok}");
        }
        for bad in [
            "text/plain",
            "text/json",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "application/+json",
            "",
        ] {
            assert!(!is_json_type(bad), "{bad}");
        }
    }

    #[test]
    fn error_text_is_bounded() {
        let long = "é".repeat(500);
        assert!(bounded(&long).len() <= 204);
    }
}
