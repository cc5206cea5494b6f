//! What a GraphQL call sends and hands back: credentials never reach another origin through a
//! redirect (every auth type × every redirect status), and every form of a secret the endpoint
//! echoes is blanked out.

use std::sync::{Arc, Mutex};

use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::IntoResponse;
use axum::routing::{any, post};
use axum::{Json, Router};
use serde_json::json;
use toolshed_core::{ToolContext, ToolError};
use toolshed_graphql::{
    import_schema, ApiKeyLocation, AuthConfig, GraphqlOptions, SchemaInput, Secret,
};
use toolshed_outbound::secret::{basic_credential, carried_forms};

const CODES: [u16; 5] = [301, 302, 303, 307, 308];
const ACCESS_TOKEN: &str = "oauth-access-tok-1";
const CUSTOM: &str = "custom-header-secret-1";

type Seen = Arc<Mutex<Vec<String>>>;

async fn listen(app: Router) -> u16 {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
    port
}

/// Another origin that records every request it receives, answering like a GraphQL endpoint.
async fn other_origin() -> (u16, Seen) {
    let seen: Seen = Arc::default();
    let app = Router::new()
        .fallback(
            |State(seen): State<Seen>, uri: Uri, h: HeaderMap| async move {
                seen.lock().unwrap().push(format!("{uri} {h:?}"));
                Json(json!({"data": {"ping": "landed"}}))
            },
        )
        .with_state(seen.clone());
    (listen(app).await, seen)
}

/// `/r/{code}` redirects to `other` repeating the query; `/echo` answers with every header and
/// the query it received; `/token` issues OAuth2 tokens.
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
            "/echo",
            post(|h: HeaderMap, RawQuery(q): RawQuery| async move {
                let mut text = format!("query={} ", q.unwrap_or_default());
                for (k, v) in &h {
                    text.push_str(&format!("{k}: {} | ", v.to_str().unwrap_or("")));
                }
                Json(json!({"data": {"ping": text}}))
            }),
        )
        .route(
            "/token",
            post(|| async { Json(json!({"access_token": ACCESS_TOKEN, "expires_in": 300})) }),
        );
    listen(app).await
}

/// Every auth type (`headers` carry the custom credential header), with its secrets.
fn auths(api: u16) -> Vec<(&'static str, AuthConfig, Vec<String>)> {
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
            key(ApiKeyLocation::Query, "api_key", "query key/1"),
            carried_forms("query key/1"),
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
                token_url: format!("http://127.0.0.1:{api}/token"),
                client_id: "cid".into(),
                client_secret: Secret::new("client-secret-1"),
                scopes: vec![],
                audience: None,
            },
            vec!["client-secret-1".into(), ACCESS_TOKEN.into()],
        ),
        ("custom header", AuthConfig::None, vec![CUSTOM.into()]),
    ]
}

async fn ping(endpoint: String, auth: AuthConfig) -> Result<serde_json::Value, ToolError> {
    let mut o = GraphqlOptions::new("lib", endpoint);
    o.allow_private = true;
    o.auth = auth;
    o.headers = vec![("X-Shop-Secret".into(), CUSTOM.into())];
    let imp = import_schema(&SchemaInput::Sdl("type Query { ping: String }".into()), &o).unwrap();
    let tool = imp
        .tools
        .iter()
        .find(|t| t.def.path.as_str() == "lib.query.ping")
        .unwrap();
    let ctx = ToolContext::new("tester".into(), tool.def.path.clone());
    tool.handler.call(ctx, json!({})).await
}

#[tokio::test]
async fn credentials_never_follow_a_redirect_to_another_origin() {
    let (other, seen) = other_origin().await;
    let api = api(other).await;
    for (kind, auth, secrets) in auths(api) {
        for code in CODES {
            seen.lock().unwrap().clear();
            let out = ping(format!("http://127.0.0.1:{api}/r/{code}"), auth.clone()).await;
            let seen = seen.lock().unwrap().join("\n");
            for s in secrets.iter().chain([&CUSTOM.to_string()]) {
                assert!(!seen.contains(s.as_str()), "{kind} {code}: {seen}");
            }
            // GraphQL endpoints are called without following redirects: the call fails and
            // says why.
            let e = out.unwrap_err();
            assert!(
                e.message.contains("redirect"),
                "{kind} {code}: {}",
                e.message
            );
        }
    }
}

#[tokio::test]
async fn every_form_of_an_echoed_secret_is_blanked_out() {
    let api = api(1).await;
    for (kind, auth, secrets) in auths(api) {
        let out = ping(format!("http://127.0.0.1:{api}/echo"), auth)
            .await
            .unwrap();
        let text = out.to_string();
        assert!(text.contains("[REDACTED]"), "{kind}: {text}");
        for s in secrets.iter().flat_map(|s| carried_forms(s)) {
            assert!(!text.contains(&s), "{kind}: {s} in {text}");
        }
    }
}
