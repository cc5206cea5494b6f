//! Helpers shared by the integration tests: fixtures and a small Petstore server.

#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Form, Json, Router};
use serde_json::{json, Value};
use toolshed_core::{Tool, ToolContext, ToolError};
use toolshed_openapi::{import, parse_document, ImportOptions, Imported};
use toolshed_outbound::{AuthConfig, Outbound, OutboundConfig};

pub fn fixture(name: &str) -> Value {
    parse_document(&toolshed_testing::fixture_text!(name)).unwrap()
}

pub fn import_fixture(name: &str, ns: &str) -> Imported {
    import(
        &fixture(name),
        &ImportOptions {
            namespace: ns.into(),
            ..Default::default()
        },
    )
    .unwrap()
}

pub fn tool<'a>(imp: &'a Imported, path: &str) -> &'a Tool {
    imp.tools
        .iter()
        .find(|t| t.def.path.as_str() == path)
        .unwrap_or_else(|| {
            panic!(
                "no tool {path}; have {:?}",
                imp.tools
                    .iter()
                    .map(|t| t.def.path.as_str())
                    .collect::<Vec<_>>()
            )
        })
}

pub async fn call(t: &Tool, args: Value) -> Result<Value, ToolError> {
    let ctx = ToolContext::new("tester".into(), t.def.path.clone());
    t.handler.call(ctx, args).await
}

pub fn local_outbound() -> Outbound {
    Outbound::new(OutboundConfig {
        allow_private: true,
        ..Default::default()
    })
    .unwrap()
}

/// Imports a fixture against a local server.
pub fn import_local(name: &str, base: &str, auth: AuthConfig) -> Imported {
    import(
        &fixture(name),
        &ImportOptions {
            namespace: "petstore".into(),
            base_url: Some(base.to_string()),
            auth,
            outbound: Some(local_outbound()),
            ..Default::default()
        },
    )
    .unwrap()
}

#[derive(Clone, Default)]
pub struct Petstore {
    pets: Arc<Mutex<HashMap<i64, Value>>>,
    next: Arc<AtomicI64>,
    pub token_hits: Arc<AtomicUsize>,
}

fn header(h: &HeaderMap, name: &str) -> String {
    h.get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

fn query_pairs(q: &Option<String>) -> Vec<(String, String)> {
    q.as_deref()
        .unwrap_or("")
        .split('&')
        .filter(|s| !s.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            let dec = |s: &str| {
                percent_encoding::percent_decode_str(&s.replace('+', " "))
                    .decode_utf8_lossy()
                    .into_owned()
            };
            (dec(k), dec(v))
        })
        .collect()
}

/// Credentials the server accepts on `/store/inventory`.
pub const HEADER_KEY: &str = "sekret-header-123";
pub const QUERY_KEY: &str = "sekret-query-456";
pub const COOKIE_KEY: &str = "sekret-cookie-789";
pub const BEARER: &str = "sekret-bearer-abc";
pub const BASIC_PASSWORD: &str = "sekret-basic-def";
pub const CLIENT_SECRET: &str = "sekret-client-ghi";

fn authorized(h: &HeaderMap, q: &[(String, String)]) -> bool {
    use base64_free::basic;
    let auth = header(h, "authorization");
    header(h, "api_key") == HEADER_KEY
        || q.iter().any(|(k, v)| k == "api_key" && v == QUERY_KEY)
        || header(h, "cookie")
            .split("; ")
            .any(|c| c == format!("session={COOKIE_KEY}"))
        || auth == format!("Bearer {BEARER}")
        || auth == basic("ann", BASIC_PASSWORD)
        || auth.starts_with("Bearer oauth-token-")
}

/// Tiny base64 for the Basic header check, so the tests need no extra crate.
pub mod base64_free {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    pub fn encode(input: &[u8]) -> String {
        let mut out = String::new();
        for chunk in input.chunks(3) {
            let b = [
                chunk[0],
                *chunk.get(1).unwrap_or(&0),
                *chunk.get(2).unwrap_or(&0),
            ];
            let n = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
            for i in 0..4 {
                if i <= chunk.len() {
                    out.push(T[(n >> (18 - 6 * i) & 63) as usize] as char);
                } else {
                    out.push('=');
                }
            }
        }
        out
    }
    pub fn basic(user: &str, pass: &str) -> String {
        format!("Basic {}", encode(format!("{user}:{pass}").as_bytes()))
    }
}

fn not_found(what: &str) -> Response {
    (StatusCode::NOT_FOUND, format!("{what} not found")).into_response()
}

pub async fn start_petstore() -> (String, Petstore) {
    let state = Petstore {
        next: Arc::new(AtomicI64::new(100)),
        ..Default::default()
    };
    let app = Router::new()
        .route(
            "/pet",
            post(
                |State(s): State<Petstore>, Json(mut pet): Json<Value>| async move {
                    let id = pet["id"]
                        .as_i64()
                        .unwrap_or_else(|| s.next.fetch_add(1, Ordering::SeqCst));
                    pet["id"] = json!(id);
                    s.pets.lock().unwrap().insert(id, pet.clone());
                    Json(pet)
                },
            ),
        )
        .route(
            "/pet/findByStatus",
            get(
                |State(s): State<Petstore>, RawQuery(q): RawQuery| async move {
                    let wanted: Vec<String> = query_pairs(&q)
                        .into_iter()
                        .filter(|(k, _)| k == "status")
                        .flat_map(|(_, v)| v.split(',').map(String::from).collect::<Vec<_>>())
                        .collect();
                    let mut found: Vec<Value> = s
                        .pets
                        .lock()
                        .unwrap()
                        .values()
                        .filter(|p| wanted.iter().any(|w| p["status"] == json!(w)))
                        .cloned()
                        .collect();
                    found.sort_by_key(|p| p["id"].as_i64());
                    Json(Value::Array(found))
                },
            ),
        )
        .route(
            "/pet/{petId}",
            get(
                |State(s): State<Petstore>, Path(id): Path<i64>| async move {
                    match s.pets.lock().unwrap().get(&id) {
                        Some(p) => Json(p.clone()).into_response(),
                        None => not_found("Pet"),
                    }
                },
            )
            .delete(
                |State(s): State<Petstore>, Path(id): Path<i64>| async move {
                    match s.pets.lock().unwrap().remove(&id) {
                        Some(_) => StatusCode::OK.into_response(),
                        None => not_found("Pet"),
                    }
                },
            )
            .post(
                |State(s): State<Petstore>,
                 Path(id): Path<i64>,
                 Form(f): Form<HashMap<String, String>>| async move {
                    let mut pets = s.pets.lock().unwrap();
                    let Some(p) = pets.get_mut(&id) else {
                        return not_found("Pet");
                    };
                    for k in ["name", "status"] {
                        if let Some(v) = f.get(k) {
                            p[k] = json!(v);
                        }
                    }
                    Json(p.clone()).into_response()
                },
            ),
        )
        .route(
            "/store/inventory",
            get(
                |State(s): State<Petstore>, h: HeaderMap, RawQuery(q): RawQuery| async move {
                    if !authorized(&h, &query_pairs(&q)) {
                        return (StatusCode::UNAUTHORIZED, "unauthorized").into_response();
                    }
                    let mut counts: HashMap<String, i64> = HashMap::new();
                    for p in s.pets.lock().unwrap().values() {
                        *counts
                            .entry(p["status"].as_str().unwrap_or("unknown").to_string())
                            .or_default() += 1;
                    }
                    Json(json!(counts)).into_response()
                },
            ),
        )
        .route(
            "/oauth/token",
            post(
                |State(s): State<Petstore>, h: HeaderMap, body: String| async move {
                    if header(&h, "authorization") != base64_free::basic("client-1", CLIENT_SECRET)
                        || !body.contains("grant_type=client_credentials")
                    {
                        return (StatusCode::UNAUTHORIZED, "bad client").into_response();
                    }
                    let n = s.token_hits.fetch_add(1, Ordering::SeqCst) + 1;
                    Json(json!({"access_token": format!("oauth-token-{n}"), "expires_in": 3600}))
                        .into_response()
                },
            ),
        )
        .with_state(state.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://127.0.0.1:{}", addr.port()), state)
}
