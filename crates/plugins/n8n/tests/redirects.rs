//! Credentials never follow a redirect to another origin: an n8n instance that answers with a
//! redirect (every status) to a second listener on another loopback port never hands that
//! listener the API key, the login password or the session cookie.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::IntoResponse;
use axum::{Json, Router};
use serde_json::json;
use toolshed_n8n::{N8nClient, N8nConfig, N8nLogin};

const CODES: [u16; 5] = [301, 302, 303, 307, 308];
const API_KEY: &str = "n8n-api-key-redirect-1";
const PASSWORD: &str = "n8n-password-redirect-1";

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
                Json(json!({"data": []}))
            },
        )
        .with_state(seen.clone());
    (listen(app).await, seen)
}

/// Every request under `/r/{code}/...` is redirected with `code` to the other origin.
async fn redirector(other: u16) -> u16 {
    let app = Router::new().fallback(move |uri: Uri| async move {
        let code: u16 = uri.path().split('/').nth(2).unwrap().parse().unwrap();
        let to = format!("http://127.0.0.1:{other}{uri}");
        (StatusCode::from_u16(code).unwrap(), [("location", to)]).into_response()
    });
    listen(app).await
}

#[tokio::test]
async fn the_key_and_the_login_never_follow_a_redirect_to_another_origin() {
    let (other, seen) = other_origin().await;
    let port = redirector(other).await;
    for code in CODES {
        seen.lock().unwrap().clear();
        let mut config = N8nConfig::new(format!("http://127.0.0.1:{port}/r/{code}"), API_KEY);
        config.allow_private = true;
        config.timeout = Duration::from_secs(5);
        config.login = Some(N8nLogin {
            email: "agent@example.com".into(),
            password: PASSWORD.into(),
        });
        let client = N8nClient::from_config(&config).unwrap();
        // The API key (a header).
        let e = client.get("/workflows", &[]).await.unwrap_err().to_string();
        assert!(e.contains("redirect"), "{code}: {e}");
        // The login (a password in the body, then a session cookie).
        let e = client.node_catalog(None).await.unwrap_err().to_string();
        assert!(!e.contains(PASSWORD) && !e.contains(API_KEY), "{code}: {e}");
        let seen = seen.lock().unwrap().join("\n");
        assert!(seen.is_empty(), "{code}: the redirect was followed: {seen}");
    }
}
