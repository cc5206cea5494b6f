//! The guarded client against a local axum server: address refusal, size cap, error shape and
//! every auth scheme.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use toolshed_core::ToolErrorKind;
use toolshed_outbound::{
    ApiKeyLocation, AuthConfig, Method, Outbound, OutboundConfig, OutboundError, Secret,
};

#[derive(Clone, Default)]
struct Srv {
    token_hits: Arc<AtomicUsize>,
    /// The `expires_in` the token endpoint answers (seconds; any JSON number).
    expires_in: f64,
}

fn header(h: &HeaderMap, name: &str) -> String {
    h.get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

fn verdict(ok: bool) -> (StatusCode, Json<Value>) {
    if ok {
        (StatusCode::OK, Json(json!({"ok": true})))
    } else {
        (StatusCode::UNAUTHORIZED, Json(json!({"ok": false})))
    }
}

async fn start(expires_in: f64) -> (String, Srv) {
    let srv = Srv {
        token_hits: Arc::default(),
        expires_in,
    };
    let app = Router::new()
        .route("/ok", get(|| async { Json(json!({"ok": true})) }))
        .route("/big", get(|| async { "x".repeat(64 * 1024) }))
        .route(
            "/big-stream",
            get(|| async {
                let chunks = (0..64).map(|_| Ok::<_, std::io::Error>("y".repeat(1024)));
                axum::body::Body::from_stream(futures::stream::iter(chunks))
            }),
        )
        .route(
            "/missing",
            get(|| async {
                (
                    StatusCode::NOT_FOUND,
                    format!("no such pet {}", "z".repeat(2000)),
                )
            }),
        )
        .route(
            "/auth/header",
            get(|h: HeaderMap| async move { verdict(header(&h, "x-api-key") == "k-header") }),
        )
        .route(
            "/auth/query",
            get(
                |q: Query<std::collections::HashMap<String, String>>| async move {
                    verdict(q.get("api_key").map(String::as_str) == Some("k-query"))
                },
            ),
        )
        .route(
            "/auth/cookie",
            get(|h: HeaderMap| async move {
                let c = header(&h, "cookie");
                verdict(c.split("; ").any(|p| p == "session=k-cookie"))
            }),
        )
        .route(
            "/auth/combined",
            get(|h: HeaderMap| async move {
                let c = header(&h, "cookie");
                verdict(
                    header(&h, "x-api-key") == "k-header"
                        && header(&h, "authorization") == "Bearer k-bearer"
                        && c.split("; ").any(|p| p == "session=k-cookie")
                        && c.split("; ").any(|p| p == "theme=dark"),
                )
            }),
        )
        .route(
            "/auth/bearer",
            get(|h: HeaderMap| async move {
                verdict(header(&h, "authorization") == "Bearer k-bearer")
            }),
        )
        .route(
            "/auth/basic",
            get(|h: HeaderMap| async move {
                // base64("ann:k-basic")
                verdict(header(&h, "authorization") == "Basic YW5uOmstYmFzaWM=")
            }),
        )
        .route(
            "/auth/oauth",
            get(|h: HeaderMap| async move {
                verdict(header(&h, "authorization").starts_with("Bearer tok-"))
            }),
        )
        .route(
            "/token",
            post(
                |State(s): State<Srv>, h: HeaderMap, body: String| async move {
                    // base64("client:k-client")
                    if header(&h, "authorization") != "Basic Y2xpZW50OmstY2xpZW50"
                        || !body.contains("grant_type=client_credentials")
                        || !body.contains("scope=read+write")
                    {
                        return (StatusCode::UNAUTHORIZED, "bad client").into_response();
                    }
                    let n = s.token_hits.fetch_add(1, Ordering::SeqCst) + 1;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    Json(json!({"access_token": format!("tok-{n}"), "token_type": "bearer", "expires_in": s.expires_in}))
                        .into_response()
                },
            ),
        )
        .with_state(srv.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://127.0.0.1:{}", addr.port()), srv)
}

fn private_ok() -> Outbound {
    Outbound::new(OutboundConfig {
        allow_private: true,
        ..Default::default()
    })
    .unwrap()
}

async fn get_via(ob: &Outbound, url: &str) -> Result<toolshed_outbound::Response, OutboundError> {
    ob.send(ob.request(Method::GET, url)?).await
}

#[tokio::test]
async fn private_addresses_are_refused_by_default() {
    let (base, _) = start(60.0).await;
    let port = base.rsplit(':').next().unwrap().to_string();
    let ob = Outbound::with_defaults().unwrap();
    for (url, class) in [
        (format!("{base}/ok"), "loopback"),
        (format!("http://localhost:{port}/ok"), "loopback"),
        (
            "http://169.254.169.254/latest/meta-data".to_string(),
            "link-local",
        ),
        (format!("http://[::1]:{port}/ok"), "loopback"),
    ] {
        let e = get_via(&ob, &url).await.unwrap_err();
        assert!(
            matches!(e, OutboundError::PrivateAddress { .. }),
            "{url}: {e:?}"
        );
        let msg = e.to_string();
        assert!(
            msg.contains(class) && msg.contains("allow_private"),
            "{msg}"
        );
        let te = e.into_tool_error();
        assert_eq!(te.kind, ToolErrorKind::InvalidInput);
    }
    // A builder made directly on the client is checked too.
    let req = ob.client().get(format!("{base}/ok"));
    assert!(matches!(
        ob.send(req).await.unwrap_err(),
        OutboundError::PrivateAddress { .. }
    ));
}

#[tokio::test]
async fn private_addresses_are_allowed_when_configured() {
    let (base, _) = start(60.0).await;
    let port = base.rsplit(':').next().unwrap().to_string();
    let ob = private_ok();
    let r = get_via(&ob, &format!("{base}/ok")).await.unwrap();
    assert_eq!(r.value()["ok"], true);
    let r = get_via(&ob, &format!("http://localhost:{port}/ok"))
        .await
        .unwrap();
    assert!(r.is_success());
    assert_eq!(
        ob.get_json(&format!("{base}/ok")).await.unwrap()["ok"],
        true
    );
}

#[tokio::test]
async fn responses_over_the_cap_are_aborted() {
    let (base, _) = start(60.0).await;
    let ob = Outbound::new(OutboundConfig {
        allow_private: true,
        max_response_bytes: 1024,
        ..Default::default()
    })
    .unwrap();
    for path in ["/big", "/big-stream"] {
        let e = get_via(&ob, &format!("{base}{path}")).await.unwrap_err();
        assert!(
            matches!(e, OutboundError::TooLarge { limit: 1024, .. }),
            "{e:?}"
        );
        assert!(e.to_string().contains("1024"));
    }
    assert!(get_via(&ob, &format!("{base}/ok")).await.is_ok());
}

#[tokio::test]
async fn non_2xx_is_an_upstream_error_with_excerpt() {
    let (base, _) = start(60.0).await;
    let ob = private_ok();
    let e = ob
        .send_checked(ob.request(Method::GET, &format!("{base}/missing")).unwrap())
        .await
        .unwrap_err()
        .into_tool_error();
    assert_eq!(e.kind, ToolErrorKind::Upstream);
    assert!(e.message.contains("404") && e.message.contains("no such pet"));
    let data = e.data.unwrap();
    assert_eq!(data["status"], 404);
    let excerpt = data["body_excerpt"].as_str().unwrap();
    assert!(excerpt.starts_with("no such pet"));
    assert!(excerpt.chars().count() <= 501);
}

#[tokio::test]
async fn timeouts_are_reported() {
    let ob = Outbound::new(OutboundConfig {
        allow_private: true,
        timeout: Duration::from_millis(200),
        ..Default::default()
    })
    .unwrap();
    // A listener that accepts and never answers.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = listener.accept().await {
            held.push(s);
        }
    });
    let e = get_via(&ob, &format!("http://{addr}/")).await.unwrap_err();
    assert!(matches!(e, OutboundError::Timeout(_)), "{e:?}");
}

async fn call_with(ob: &Outbound, url: &str, auth: &AuthConfig) -> StatusCode {
    let req = ob.request(Method::GET, url).unwrap();
    let req = ob.authorize(req, auth).await.unwrap();
    ob.send(req).await.unwrap().status
}

#[tokio::test]
async fn each_auth_scheme_is_accepted_by_the_server() {
    let (base, _) = start(60.0).await;
    let ob = private_ok();
    let cases = [
        (
            "/auth/header",
            AuthConfig::ApiKey {
                location: ApiKeyLocation::Header,
                name: "X-Api-Key".into(),
                value: Secret::new("k-header"),
            },
        ),
        (
            "/auth/query",
            AuthConfig::ApiKey {
                location: ApiKeyLocation::Query,
                name: "api_key".into(),
                value: Secret::new("k-query"),
            },
        ),
        (
            "/auth/cookie",
            AuthConfig::ApiKey {
                location: ApiKeyLocation::Cookie,
                name: "session".into(),
                value: Secret::new("k-cookie"),
            },
        ),
        (
            "/auth/bearer",
            AuthConfig::Bearer {
                token: Secret::new("k-bearer"),
            },
        ),
        (
            "/auth/basic",
            AuthConfig::Basic {
                username: "ann".into(),
                password: Secret::new("k-basic"),
            },
        ),
    ];
    for (path, auth) in &cases {
        let url = format!("{base}{path}");
        assert_eq!(call_with(&ob, &url, auth).await, StatusCode::OK, "{path}");
        assert_eq!(
            call_with(&ob, &url, &AuthConfig::None).await,
            StatusCode::UNAUTHORIZED,
            "{path} without auth"
        );
    }
}

fn oauth(base: &str) -> AuthConfig {
    AuthConfig::OAuth2ClientCredentials {
        token_url: format!("{base}/token"),
        client_id: "client".into(),
        client_secret: Secret::new("k-client"),
        scopes: vec!["read".into(), "write".into()],
        audience: None,
    }
}

#[tokio::test]
async fn oauth2_tokens_are_cached_and_shared() {
    let (base, srv) = start(3600.0).await;
    let ob = private_ok();
    let auth = oauth(&base);
    let url = format!("{base}/auth/oauth");
    let mut tasks = Vec::new();
    for _ in 0..5 {
        let (ob, auth, url) = (ob.clone(), auth.clone(), url.clone());
        tasks.push(tokio::spawn(
            async move { call_with(&ob, &url, &auth).await },
        ));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap(), StatusCode::OK);
    }
    for _ in 0..3 {
        assert_eq!(call_with(&ob, &url, &auth).await, StatusCode::OK);
    }
    assert_eq!(srv.token_hits.load(Ordering::SeqCst), 1);
    // The fetched token is known to the client (and its clones), for redaction.
    let issued: Vec<String> = ob
        .clone()
        .issued_tokens()
        .iter()
        .map(|t| t.expose().to_string())
        .collect();
    assert_eq!(issued, ["tok-1"]);
}

#[tokio::test]
async fn oauth2_tokens_are_refreshed_after_expiry() {
    let (base, srv) = start(1.0).await;
    let ob = private_ok();
    let auth = oauth(&base);
    let url = format!("{base}/auth/oauth");
    assert_eq!(call_with(&ob, &url, &auth).await, StatusCode::OK);
    assert_eq!(call_with(&ob, &url, &auth).await, StatusCode::OK);
    assert_eq!(srv.token_hits.load(Ordering::SeqCst), 1);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(call_with(&ob, &url, &auth).await, StatusCode::OK);
    assert_eq!(srv.token_hits.load(Ordering::SeqCst), 2);
    // Both the expired and the fresh token stay secrets: an old echo must not leak either.
    let issued: Vec<String> = ob
        .issued_tokens()
        .iter()
        .map(|t| t.expose().to_string())
        .collect();
    assert_eq!(issued, ["tok-1", "tok-2"]);
}

/// A token endpoint answering an absurd `expires_in` neither panics nor overflows: a huge one
/// is cached (for at most a day), a negative one counts as already expired.
#[tokio::test]
async fn oauth2_absurd_lifetimes_are_clamped() {
    let (base, srv) = start(1e20).await;
    let ob = private_ok();
    let auth = oauth(&base);
    let url = format!("{base}/auth/oauth");
    assert_eq!(call_with(&ob, &url, &auth).await, StatusCode::OK);
    assert_eq!(call_with(&ob, &url, &auth).await, StatusCode::OK);
    assert_eq!(srv.token_hits.load(Ordering::SeqCst), 1, "cached");

    let (base, srv) = start(-5.0).await;
    let auth = oauth(&base);
    let url = format!("{base}/auth/oauth");
    assert_eq!(call_with(&ob, &url, &auth).await, StatusCode::OK);
    assert_eq!(call_with(&ob, &url, &auth).await, StatusCode::OK);
    assert_eq!(srv.token_hits.load(Ordering::SeqCst), 2, "fetched again");
}

#[tokio::test]
async fn oauth2_failures_do_not_leak_the_secret() {
    let (base, _) = start(60.0).await;
    let ob = private_ok();
    let auth = AuthConfig::OAuth2ClientCredentials {
        token_url: format!("{base}/token"),
        client_id: "client".into(),
        client_secret: Secret::new("wrong-secret-value"),
        scopes: vec![],
        audience: None,
    };
    let req = ob.request(Method::GET, &format!("{base}/ok")).unwrap();
    let e = ob.authorize(req, &auth).await.unwrap_err();
    let text = format!("{e} {e:?}");
    assert!(text.contains("401"), "{text}");
    assert!(!text.contains("wrong-secret-value"));
    assert_eq!(e.into_tool_error().kind, ToolErrorKind::Unauthorized);
}

#[tokio::test]
async fn several_configurations_apply_together_with_one_cookie_header() {
    let (base, _) = start(60.0).await;
    let ob = private_ok();
    let auths = [
        AuthConfig::ApiKey {
            location: ApiKeyLocation::Header,
            name: "X-Api-Key".into(),
            value: Secret::new("k-header"),
        },
        AuthConfig::ApiKey {
            location: ApiKeyLocation::Cookie,
            name: "session".into(),
            value: Secret::new("k-cookie"),
        },
        AuthConfig::Bearer {
            token: Secret::new("k-bearer"),
        },
    ];
    let url = format!("{base}/auth/combined");
    let req = ob.request(Method::GET, &url).unwrap();
    let req = AuthConfig::apply_all(&auths, req, &ob, vec![("theme".into(), "dark".into())])
        .await
        .unwrap();
    assert_eq!(ob.send(req).await.unwrap().status, StatusCode::OK);
    // Missing one of them is refused.
    let req = ob.request(Method::GET, &url).unwrap();
    let req = AuthConfig::apply_all(&auths[..2], req, &ob, vec![("theme".into(), "dark".into())])
        .await
        .unwrap();
    assert_eq!(ob.send(req).await.unwrap().status, StatusCode::UNAUTHORIZED);
}
