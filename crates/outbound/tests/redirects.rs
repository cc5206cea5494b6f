//! Credentials never follow a redirect to another origin: every auth type × every redirect
//! status, against a second listener on another loopback port (another origin) that records
//! everything it receives.

use std::sync::{Arc, Mutex};

use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::IntoResponse;
use axum::routing::{any, post};
use axum::{Json, Router};
use serde_json::json;
use toolshed_outbound::secret::basic_credential;
use toolshed_outbound::{ApiKeyLocation, AuthConfig, Method, Outbound, OutboundConfig, Secret};

const CODES: [u16; 5] = [301, 302, 303, 307, 308];
const ACCESS_TOKEN: &str = "oauth-access-tok-1";
const CUSTOM_SECRET: &str = "custom-header-secret-1";

/// Everything the other origin received, one line per request.
type Seen = Arc<Mutex<Vec<String>>>;

async fn listen(app: Router) -> u16 {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
    port
}

/// The other origin: records method, URI and every header of each request.
async fn other_origin() -> (u16, Seen) {
    let seen: Seen = Arc::default();
    let app = Router::new()
        .fallback(
            |State(seen): State<Seen>, uri: Uri, h: HeaderMap| async move {
                seen.lock().unwrap().push(format!("{uri} {h:?}"));
                Json(json!({"landed": true}))
            },
        )
        .with_state(seen.clone());
    (listen(app).await, seen)
}

/// The API: `/r/{code}` redirects with `code` to the other origin, repeating its query (an
/// echo of the request); `/token` is an OAuth2 token endpoint; `/same/{code}` redirects to
/// `/landed` on the same origin.
async fn api(other: u16) -> u16 {
    let app = Router::new()
        .route(
            "/r/{code}",
            any(
                move |Path(code): Path<u16>, RawQuery(q): RawQuery| async move {
                    let q = q.map(|q| format!("?{q}")).unwrap_or_default();
                    let to = format!("http://127.0.0.1:{other}/landing{q}");
                    (StatusCode::from_u16(code).unwrap(), [("location", to)]).into_response()
                },
            ),
        )
        .route(
            "/same/{code}",
            any(|Path(code): Path<u16>| async move {
                (
                    StatusCode::from_u16(code).unwrap(),
                    [("location", "/landed")],
                )
                    .into_response()
            }),
        )
        .route(
            "/landed",
            any(|h: HeaderMap| async move {
                Json(json!({"authorization": h.get("authorization").is_some(),
                            "custom": h.get("x-shop-secret").is_some()}))
            }),
        )
        .route(
            "/token",
            post(|| async { Json(json!({"access_token": ACCESS_TOKEN, "expires_in": 300})) }),
        );
    listen(app).await
}

/// Every auth type, with the secrets it must never show to the other origin.
fn auth_matrix(api_port: u16) -> Vec<(&'static str, AuthConfig, Vec<String>)> {
    let key = |location, name: &str, value: &str| AuthConfig::ApiKey {
        location,
        name: name.into(),
        value: Secret::new(value),
    };
    vec![
        (
            "api_key header",
            key(ApiKeyLocation::Header, "X-Api-Key", "hdr-key-1"),
            vec!["hdr-key-1".into()],
        ),
        (
            "api_key query",
            key(ApiKeyLocation::Query, "api_key", "query-key-1"),
            vec!["query-key-1".into()],
        ),
        (
            "api_key cookie",
            key(ApiKeyLocation::Cookie, "sid", "cookie-key-1"),
            vec!["cookie-key-1".into()],
        ),
        (
            "basic",
            AuthConfig::Basic {
                username: "user".into(),
                password: Secret::new("basic-pw-1"),
            },
            vec!["basic-pw-1".into(), basic_credential("user", "basic-pw-1")],
        ),
        (
            "bearer",
            AuthConfig::Bearer {
                token: Secret::new("bearer-tok-1"),
            },
            vec!["bearer-tok-1".into()],
        ),
        (
            "oauth2_client_credentials",
            AuthConfig::OAuth2ClientCredentials {
                token_url: format!("http://127.0.0.1:{api_port}/token"),
                client_id: "cid".into(),
                client_secret: Secret::new("client-secret-1"),
                scopes: vec![],
                audience: None,
            },
            vec!["client-secret-1".into(), ACCESS_TOKEN.into()],
        ),
        // A custom credential header beside no configured auth.
        (
            "custom header",
            AuthConfig::None,
            vec![CUSTOM_SECRET.into()],
        ),
    ]
}

fn client() -> Outbound {
    Outbound::new(OutboundConfig {
        allow_private: true,
        ..OutboundConfig::default()
    })
    .unwrap()
}

#[tokio::test]
async fn credentials_never_reach_another_origin() {
    let (other, seen) = other_origin().await;
    let api_port = api(other).await;
    let ob = client();
    for (kind, auth, secrets) in auth_matrix(api_port) {
        for code in CODES {
            for method in [Method::GET, Method::POST] {
                seen.lock().unwrap().clear();
                let url = format!("http://127.0.0.1:{api_port}/r/{code}");
                let req = ob.request(method.clone(), &url).unwrap();
                let req = req
                    .header("x-shop-secret", CUSTOM_SECRET)
                    .json(&json!({"a": 1}));
                let req = ob.authorize(req, &auth).await.unwrap();
                let outcome = ob.send(req).await;
                let seen = seen.lock().unwrap().join("\n");
                for s in &secrets {
                    assert!(!seen.contains(s.as_str()), "{kind} {code} {method}: {seen}");
                }
                let where_ = format!("{kind} {code} {method}");
                if kind == "api_key query" {
                    // The target repeats the query that carries the key: refused, not sent.
                    let e = outcome.unwrap_err().to_string();
                    assert!(
                        e.contains("refused") && e.contains("'api_key'"),
                        "{where_}: {e}"
                    );
                    assert!(!e.contains("query-key-1"), "{where_}: {e}");
                    assert!(seen.is_empty(), "{where_}: {seen}");
                } else {
                    // Followed, without the credentials.
                    let r = outcome.unwrap_or_else(|e| panic!("{where_}: {e}"));
                    assert_eq!(r.value()["landed"], true, "{where_}");
                    assert!(!seen.is_empty(), "{where_}");
                    assert!(seen.starts_with("/landing"), "{where_}: {seen}");
                }
            }
        }
    }
}

#[tokio::test]
async fn same_origin_redirects_keep_credentials() {
    let api_port = api(1).await;
    let ob = client();
    let bearer = AuthConfig::Bearer {
        token: Secret::new("bearer-tok-1"),
    };
    for code in CODES {
        let url = format!("http://127.0.0.1:{api_port}/same/{code}");
        let req = ob.request(Method::GET, &url).unwrap();
        let req = ob
            .authorize(req.header("x-shop-secret", "v"), &bearer)
            .await
            .unwrap();
        let v = ob.send(req).await.unwrap().value();
        assert_eq!(v, json!({"authorization": true, "custom": true}), "{code}");
    }
}

#[tokio::test]
async fn redirect_hops_are_bounded() {
    let api_port = api(1).await;
    let ob = Outbound::new(OutboundConfig {
        allow_private: true,
        max_redirects: 0,
        ..OutboundConfig::default()
    })
    .unwrap();
    let url = format!("http://127.0.0.1:{api_port}/same/302");
    let e = ob
        .send(ob.request(Method::GET, &url).unwrap())
        .await
        .unwrap_err();
    assert!(e.to_string().contains("more than 0 redirects"), "{e}");
}
