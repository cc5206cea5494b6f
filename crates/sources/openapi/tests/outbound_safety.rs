//! What an imported operation sends and hands back: credentials never follow a redirect to
//! another origin (every auth type × every redirect status), every form of a secret an
//! upstream echoes is blanked out, and a path parameter never changes the path.

use std::sync::{Arc, Mutex};

use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::IntoResponse;
use axum::routing::{any, get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use toolshed_core::Tool;
use toolshed_openapi::{import, ImportOptions, Imported};
use toolshed_outbound::secret::{basic_credential, carried_forms};
use toolshed_outbound::{ApiKeyLocation, AuthConfig, Secret};

use crate::common::{call, local_outbound};

const CODES: [u16; 5] = [301, 302, 303, 307, 308];
const ACCESS_TOKEN: &str = "oauth-access-tok-1";

type Seen = Arc<Mutex<Vec<String>>>;

fn doc() -> Value {
    let ok = json!({"200": {"description": "ok"}});
    let path_param = |name: &str, ty: &str| json!({"name": name, "in": "path", "required": true, "schema": {"type": ty}});
    json!({
        "openapi": "3.0.3",
        "info": {"title": "t", "version": "1"},
        "paths": {
            "/r/{code}": {
                "get": {"operationId": "hop", "parameters": [path_param("code", "integer")],
                        "responses": ok},
                "post": {"operationId": "send", "parameters": [path_param("code", "integer")],
                         "requestBody": {"content": {"application/json": {"schema": {
                             "type": "object", "properties": {"note": {"type": "string"}}}}}},
                         "responses": ok}
            },
            "/echo": {"get": {"operationId": "echo", "responses": ok}},
            "/echo-fail": {"get": {"operationId": "echo_fail", "responses": ok}},
            "/files/{name}": {"get": {"operationId": "file",
                                      "parameters": [path_param("name", "string")],
                                      "responses": ok}}
        }
    })
}

async fn listen(app: Router) -> u16 {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
    port
}

/// Another origin that records every request it receives (URI and headers).
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

/// The API: redirects to `other` repeating the query, echoes headers and query, records paths.
async fn api(other: u16, paths: Seen) -> u16 {
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
            get(|h: HeaderMap, RawQuery(q): RawQuery| async move {
                let headers: serde_json::Map<String, Value> = h
                    .iter()
                    .map(|(k, v)| (k.to_string(), json!(v.to_str().unwrap_or(""))))
                    .collect();
                Json(json!({"headers": headers, "query": q}))
            }),
        )
        .route(
            "/echo-fail",
            get(|h: HeaderMap, RawQuery(q): RawQuery| async move {
                let text = format!("{h:?} {q:?}");
                (StatusCode::FORBIDDEN, text).into_response()
            }),
        )
        .route(
            "/token",
            post(|| async { Json(json!({"access_token": ACCESS_TOKEN, "expires_in": 300})) }),
        )
        .fallback(move |uri: Uri| {
            let paths = paths.clone();
            async move {
                paths.lock().unwrap().push(uri.path().to_string());
                Json(json!({"path": uri.path()}))
            }
        });
    listen(app).await
}

/// Every auth type, with the secrets it must never show to the other origin.
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
            "custom credential header",
            key(ApiKeyLocation::Header, "X-Shop-Signature", "sig-1"),
            vec!["sig-1".into()],
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
    ]
}

fn import_with(api: u16, auth: AuthConfig) -> Imported {
    import(
        &doc(),
        &ImportOptions {
            namespace: "t".into(),
            base_url: Some(format!("http://127.0.0.1:{api}")),
            auth,
            outbound: Some(local_outbound()),
            ..Default::default()
        },
    )
    .unwrap()
}

fn op<'a>(imp: &'a Imported, name: &str) -> &'a Tool {
    imp.tools
        .iter()
        .find(|t| t.def.path.as_str().ends_with(&format!(".{name}")))
        .unwrap_or_else(|| panic!("no tool {name}"))
}

#[tokio::test]
async fn credentials_never_follow_a_redirect_to_another_origin() {
    let (other, seen) = other_origin().await;
    let api = api(other, Seen::default()).await;
    for (kind, auth, secrets) in auths(api) {
        let imp = import_with(api, auth);
        for code in CODES {
            for (name, args) in [
                ("hop", json!({"code": code})),
                ("send", json!({"code": code, "note": "n"})),
            ] {
                seen.lock().unwrap().clear();
                let out = call(op(&imp, name), args).await;
                let seen = seen.lock().unwrap().join("\n");
                let at = format!("{kind} {code} {name}");
                for s in &secrets {
                    assert!(!seen.contains(s.as_str()), "{at}: {seen}");
                }
                if kind == "api_key query" {
                    let e = out.unwrap_err();
                    assert!(e.message.contains("refused"), "{at}: {}", e.message);
                    assert!(seen.is_empty(), "{at}: {seen}");
                } else {
                    assert_eq!(out.unwrap()["landed"], true, "{at}");
                }
            }
        }
    }
}

#[tokio::test]
async fn every_form_of_an_echoed_secret_is_blanked_out() {
    let api = api(1, Seen::default()).await;
    for (kind, auth, mut secrets) in auths(api) {
        if let AuthConfig::Basic { username, password } = &auth {
            secrets.push(format!(
                "Basic {}",
                basic_credential(username, password.expose())
            ));
        }
        let imp = import_with(api, auth);
        let out = call(op(&imp, "echo"), json!({})).await.unwrap();
        // An error (what the audit log and the logs record) is blanked out the same way.
        let e = call(op(&imp, "echo_fail"), json!({})).await.unwrap_err();
        let text = format!("{out} {} {:?}", e.message, e.data);
        assert!(text.contains("[REDACTED]"), "{kind}: {text}");
        for s in secrets.iter().flat_map(|s| carried_forms(s)) {
            assert!(!text.contains(&s), "{kind}: {s} in {text}");
        }
    }
}

#[tokio::test]
async fn path_parameters_never_change_the_path() {
    let paths = Seen::default();
    let api = api(1, paths.clone()).await;
    let imp = import_with(api, AuthConfig::None);
    let file = op(&imp, "file");
    for value in ["..", "."] {
        paths.lock().unwrap().clear();
        let e = call(file, json!({"name": value})).await.unwrap_err();
        assert!(e.message.contains("'name'"), "{value}: {}", e.message);
        assert!(paths.lock().unwrap().is_empty(), "{value} was sent");
    }
    for value in ["../admin", "%2e%2e", "..%2Fadmin", "a.b"] {
        paths.lock().unwrap().clear();
        let out = call(file, json!({"name": value})).await.unwrap();
        let seen = paths.lock().unwrap().clone();
        assert_eq!(seen.len(), 1, "{value}: {seen:?}");
        let path = &seen[0];
        let rest = path
            .strip_prefix("/files/")
            .unwrap_or_else(|| panic!("{value}: {path}"));
        assert!(!rest.contains('/') && !rest.is_empty(), "{value}: {path}");
        assert_eq!(out["path"], json!(path));
    }
}
