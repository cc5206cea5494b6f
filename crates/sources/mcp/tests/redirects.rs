//! Credentials never follow a redirect to another origin: an upstream MCP server over
//! streamable HTTP that answers with a redirect (every status) to a second listener on another
//! loopback port never hands that listener a credential, whatever carries it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::IntoResponse;
use axum::routing::any;
use axum::{Json, Router};
use serde_json::json;
use toolshed_mcp_source::{McpSourceError, Transport, Upstream, UpstreamConfig};
use toolshed_outbound::secret::basic_credential;

const CODES: [u16; 5] = [301, 302, 303, 307, 308];

type Seen = Arc<Mutex<Vec<String>>>;

async fn listen(app: Router) -> u16 {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
    port
}

/// The other origin: records every request it receives.
async fn other_origin() -> (u16, Seen) {
    let seen: Seen = Arc::default();
    let app = Router::new()
        .fallback(
            |State(seen): State<Seen>, uri: Uri, h: HeaderMap| async move {
                seen.lock().unwrap().push(format!("{uri} {h:?}"));
                Json(json!({"jsonrpc": "2.0", "id": 0, "result": {}}))
            },
        )
        .with_state(seen.clone());
    (listen(app).await, seen)
}

/// `/r/{code}` redirects to the other origin, repeating the query.
async fn redirector(other: u16) -> u16 {
    let app = Router::new().route(
        "/r/{code}",
        any(
            move |Path(code): Path<u16>, RawQuery(q): RawQuery| async move {
                let q = q.map(|q| format!("?{q}")).unwrap_or_default();
                let to = format!("http://127.0.0.1:{other}/mcp{q}");
                (StatusCode::from_u16(code).unwrap(), [("location", to)]).into_response()
            },
        ),
    );
    listen(app).await
}

/// One way an HTTP upstream carries a credential: (kind, headers, query, secrets).
type Carrier = (
    &'static str,
    Vec<(String, String)>,
    &'static str,
    Vec<String>,
);

/// Every way an HTTP upstream carries a credential.
fn auths() -> Vec<Carrier> {
    let h = |k: &str, v: &str| vec![(k.to_string(), v.to_string())];
    let b64 = basic_credential("user", "basic-pw-1");
    vec![
        (
            "api_key header",
            h("X-Api-Key", "hdr-key-1"),
            "",
            vec!["hdr-key-1".into()],
        ),
        (
            "api_key query",
            vec![],
            "?api_key=query-key-1",
            vec!["query-key-1".into()],
        ),
        (
            "api_key cookie",
            h("Cookie", "sid=cookie-key-1"),
            "",
            vec!["cookie-key-1".into()],
        ),
        (
            "basic",
            h("Authorization", &format!("Basic {b64}")),
            "",
            vec![b64],
        ),
        (
            "bearer",
            h("Authorization", "Bearer bearer-tok-1"),
            "",
            vec!["bearer-tok-1".into()],
        ),
        (
            "oauth2 access token",
            h("Authorization", "Bearer oauth-access-tok-1"),
            "",
            vec!["oauth-access-tok-1".into()],
        ),
        (
            "custom header",
            h("X-Shop-Secret", "custom-1"),
            "",
            vec!["custom-1".into()],
        ),
    ]
}

#[tokio::test]
async fn credentials_never_follow_a_redirect_to_another_origin() {
    let (other, seen) = other_origin().await;
    let port = redirector(other).await;
    for (kind, headers, query, secrets) in auths() {
        for code in CODES {
            seen.lock().unwrap().clear();
            let url = format!("http://127.0.0.1:{port}/r/{code}{query}");
            let cfg = UpstreamConfig::new(
                "web",
                Transport::Http {
                    url,
                    headers: headers.clone(),
                },
            )
            .with_allow_private(true)
            .with_connect_timeout(Duration::from_secs(5));
            let e = Upstream::connect(cfg).await.unwrap_err();
            assert!(
                matches!(
                    e,
                    McpSourceError::Handshake { .. } | McpSourceError::ConnectTimeout { .. }
                ),
                "{kind} {code}: {e}"
            );
            let seen = seen.lock().unwrap().join("\n");
            assert!(
                seen.is_empty(),
                "{kind} {code}: the redirect was followed: {seen}"
            );
            for s in &secrets {
                assert!(!e.to_string().contains(s.as_str()), "{kind} {code}: {e}");
            }
        }
    }
}
