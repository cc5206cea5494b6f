//! The one redirect rule of outbound requests: credentials never follow a redirect to another
//! origin.
//!
//! [`crate::Outbound::send`] follows redirects itself (the underlying client follows none), one
//! hop at a time, and builds each next request here:
//!
//! - **Same origin** (scheme, host and port unchanged): the request goes on as it was.
//! - **Another origin**: only the content-negotiation headers in [`CROSS_ORIGIN_HEADERS`] go
//!   on. Every other header stays behind, whatever its name: `Authorization` (bearer, basic and
//!   OAuth2 tokens), `Cookie` (API keys sent as cookies), API-key headers and custom credential
//!   headers.
//! - **Another origin whose URL repeats a query parameter of the request** (name and value): the
//!   redirect is refused. An API key sent in the query lives in the URL, and a target that
//!   echoes it would receive it; changing the target URL would send the request somewhere the
//!   server did not name, so it is not followed at all.
//! - `303`, and `301`/`302` after a `POST`, continue as a `GET` without a body; `307` and `308`
//!   repeat the method and the body.
//!
//! Transports that drive their own requests (streamable HTTP MCP, the n8n client) use
//! [`crate::client::unfollowing_client`] or [`crate::Outbound::client`], which follow no
//! redirect at all.

use reqwest::header::{
    HeaderMap, HeaderName, ACCEPT, ACCEPT_ENCODING, ACCEPT_LANGUAGE, CONTENT_TYPE, LOCATION,
    USER_AGENT,
};
use reqwest::{Method, Request, StatusCode};

/// The headers a cross-origin hop keeps (all of them describe the content, none a caller).
pub const CROSS_ORIGIN_HEADERS: [HeaderName; 5] = [
    ACCEPT,
    ACCEPT_ENCODING,
    ACCEPT_LANGUAGE,
    USER_AGENT,
    CONTENT_TYPE,
];

/// The redirect target of `resp`: `None` when it is no redirect, `Err` when a redirect status
/// has no usable `Location`.
pub(crate) fn target(resp: &reqwest::Response) -> Option<Result<url::Url, String>> {
    let status = resp.status();
    if !matches!(status.as_u16(), 301 | 302 | 303 | 307 | 308) {
        return None;
    }
    let Some(location) = resp.headers().get(LOCATION) else {
        return Some(Err(format!("status {status} without a Location header")));
    };
    let text = match location.to_str() {
        Ok(t) => t,
        Err(_) => return Some(Err("the Location header is not text".into())),
    };
    Some(
        resp.url()
            .join(text)
            .map_err(|e| format!("the Location '{text}' is not a URL: {e}")),
    )
}

/// Whether `a` and `b` share scheme, host and port.
pub fn same_origin(a: &url::Url, b: &url::Url) -> bool {
    a.scheme() == b.scheme()
        && a.host_str() == b.host_str()
        && a.port_or_known_default() == b.port_or_known_default()
}

/// The request for the hop from `prev` (answered with `status`) to `to`, under the rule of this
/// module; `Err` says why the hop is refused.
pub(crate) fn next_request(
    mut prev: Request,
    status: StatusCode,
    to: url::Url,
) -> Result<Request, String> {
    let cross = !same_origin(prev.url(), &to);
    if cross {
        if let Some(name) = repeated_query(prev.url(), &to) {
            return Err(format!(
                "the target {} is another origin and repeats the query parameter '{name}' of the request",
                origin_text(&to)
            ));
        }
    }
    let keep_body = matches!(status.as_u16(), 307 | 308)
        || (matches!(status.as_u16(), 301 | 302) && *prev.method() != Method::POST);
    let method = if keep_body || *prev.method() == Method::HEAD {
        prev.method().clone()
    } else {
        Method::GET
    };
    let mut next = Request::new(method, to);
    *next.timeout_mut() = prev.timeout().copied();
    *next.version_mut() = prev.version();
    *next.headers_mut() = carried_headers(prev.headers(), cross, keep_body);
    if keep_body {
        *next.body_mut() = prev.body_mut().take();
    }
    Ok(next)
}

/// The headers the next hop carries.
fn carried_headers(headers: &HeaderMap, cross: bool, keep_body: bool) -> HeaderMap {
    let mut out = HeaderMap::new();
    for (name, value) in headers {
        let content = name == CONTENT_TYPE || name.as_str().starts_with("content-");
        if content && !keep_body {
            continue;
        }
        if cross && !CROSS_ORIGIN_HEADERS.contains(name) {
            continue;
        }
        out.append(name.clone(), value.clone());
    }
    out
}

/// The first query parameter (name, value) of `from` that `to` repeats.
fn repeated_query(from: &url::Url, to: &url::Url) -> Option<String> {
    let sent: Vec<_> = from.query_pairs().collect();
    to.query_pairs()
        .find(|pair| sent.contains(pair))
        .map(|(name, _)| name.into_owned())
}

/// `scheme://host:port` of a URL (never its path or query).
fn origin_text(u: &url::Url) -> String {
    u.origin().ascii_serialization()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> url::Url {
        url::Url::parse(s).unwrap()
    }

    fn request(method: Method, u: &str) -> Request {
        let mut r = Request::new(method, url(u));
        let h = r.headers_mut();
        h.insert("authorization", "Bearer t".parse().unwrap());
        h.insert("x-custom-auth", "c".parse().unwrap());
        h.insert("cookie", "k=v".parse().unwrap());
        h.insert("accept", "application/json".parse().unwrap());
        h.insert("content-type", "application/json".parse().unwrap());
        *r.body_mut() = Some("{}".into());
        r
    }

    #[test]
    fn origins_are_scheme_host_and_port() {
        assert!(same_origin(&url("http://a/x"), &url("http://a:80/y?q")));
        assert!(!same_origin(&url("http://a/"), &url("https://a/")));
        assert!(!same_origin(&url("http://a:1/"), &url("http://a:2/")));
        assert!(!same_origin(&url("http://a/"), &url("http://b/")));
    }

    #[test]
    fn a_cross_origin_hop_keeps_only_content_headers() {
        let next = next_request(
            request(Method::POST, "http://a:1/p"),
            StatusCode::TEMPORARY_REDIRECT,
            url("http://a:2/q"),
        )
        .unwrap();
        let names: Vec<&str> = next.headers().keys().map(HeaderName::as_str).collect();
        assert_eq!(names, ["accept", "content-type"]);
        assert_eq!(next.method(), Method::POST);
        assert!(next.body().is_some());
    }

    #[test]
    fn a_same_origin_hop_keeps_everything() {
        let next = next_request(
            request(Method::GET, "http://a:1/p"),
            StatusCode::FOUND,
            url("http://a:1/q"),
        )
        .unwrap();
        assert_eq!(next.headers().len(), 5);
    }

    #[test]
    fn see_other_and_post_redirects_become_get_without_body() {
        for status in [
            StatusCode::SEE_OTHER,
            StatusCode::FOUND,
            StatusCode::MOVED_PERMANENTLY,
        ] {
            let next = next_request(
                request(Method::POST, "http://a:1/p"),
                status,
                url("http://a:1/q"),
            )
            .unwrap();
            assert_eq!(next.method(), Method::GET, "{status}");
            assert!(next.body().is_none() && next.headers().get(CONTENT_TYPE).is_none());
        }
    }

    #[test]
    fn a_cross_origin_target_repeating_the_query_is_refused() {
        let prev = Request::new(Method::GET, url("http://a:1/p?api_key=k1&page=2"));
        let e = next_request(prev, StatusCode::FOUND, url("http://b:1/p?api_key=k1")).unwrap_err();
        assert!(e.contains("'api_key'") && !e.contains("k1"), "{e}");
        let prev = Request::new(Method::GET, url("http://a:1/p?api_key=k1"));
        assert!(next_request(prev, StatusCode::FOUND, url("http://a:1/q?api_key=k1")).is_ok());
    }
}
