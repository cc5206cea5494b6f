//! Every auth form of `toolshed sources add` through the binary: a source added with API keys in
//! the query string or a cookie, basic auth, OAuth2 client credentials, or credentials per
//! security scheme (`--scheme`) calls a local server with exactly those credentials; GraphQL
//! takes the same flags and a `--timeout-ms`. Secrets are sealed in the store and never shown
//! by `sources list`.

use crate::support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{OriginalUri, State};
use axum::http::HeaderMap;
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};
use support::cli;

/// One request the server received.
#[derive(Debug, Clone, Default)]
struct Seen {
    path: String,
    query: String,
    authorization: String,
    cookie: String,
    api_key: String,
    body: String,
}

type Log = Arc<Mutex<Vec<Seen>>>;

fn header(h: &HeaderMap, name: &str) -> String {
    h.get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

fn seen(uri: &axum::http::Uri, h: &HeaderMap, body: String) -> Seen {
    Seen {
        path: uri.path().to_string(),
        query: uri.query().unwrap_or_default().to_string(),
        authorization: header(h, "authorization"),
        cookie: header(h, "cookie"),
        api_key: header(h, "x-api-key"),
        body,
    }
}

/// A server that records every request: `/oauth/token` issues tokens, `/graphql` answers
/// `{ whoami }`, `/slow/graphql` answers after 3 s, anything else answers `{"ok": true}`.
async fn start_server() -> (String, Log) {
    let log: Log = Arc::default();
    let app = Router::new()
        .route(
            "/oauth/token",
            post(
                |State(log): State<Log>,
                 OriginalUri(uri): OriginalUri,
                 h: HeaderMap,
                 body: String| async move {
                    let mut l = log.lock().unwrap();
                    l.push(seen(&uri, &h, body));
                    let n = l.iter().filter(|s| s.path == "/oauth/token").count();
                    Json(json!({"access_token": format!("issued-token-{n}"), "expires_in": 3600}))
                },
            ),
        )
        .route(
            "/graphql",
            post(
                |State(log): State<Log>,
                 OriginalUri(uri): OriginalUri,
                 h: HeaderMap,
                 body: String| async move {
                    log.lock().unwrap().push(seen(&uri, &h, body));
                    // A careless API that reflects the caller's credentials.
                    Json(json!({"data": {"whoami": header(&h, "authorization")}}))
                },
            ),
        )
        .route(
            "/slow/graphql",
            post(|| async {
                tokio::time::sleep(Duration::from_secs(3)).await;
                Json(json!({"data": {"whoami": "late"}}))
            }),
        )
        .fallback(
            |State(log): State<Log>,
             OriginalUri(uri): OriginalUri,
             h: HeaderMap,
             body: String| async move {
                log.lock().unwrap().push(seen(&uri, &h, body));
                Json(json!({"ok": true}))
            },
        )
        .with_state(log.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (base, log)
}

/// An OpenAPI document with three operations, each requiring its own security scheme.
fn write_spec(dir: &std::path::Path, base: &str) -> String {
    let ok = json!({"200": {"description": "ok", "content": {"application/json": {"schema": {"type": "object"}}}}});
    let doc = json!({
        "openapi": "3.0.3",
        "info": {"title": "Vault", "version": "1"},
        "servers": [{"url": base}],
        "components": {"securitySchemes": {
            "key_header": {"type": "apiKey", "in": "header", "name": "X-Api-Key"},
            "bearer_auth": {"type": "http", "scheme": "bearer"},
            "partner": {"type": "oauth2", "flows": {"clientCredentials": {
                "tokenUrl": format!("{base}/oauth/token"),
                "scopes": {"items:read": "read items"}}}}
        }},
        "paths": {
            "/items": {"get": {"operationId": "listItems", "tags": ["items"],
                "security": [{"key_header": []}], "responses": ok}},
            "/reports": {"get": {"operationId": "listReports", "tags": ["reports"],
                "security": [{"bearer_auth": []}], "responses": ok}},
            "/partners": {"get": {"operationId": "listPartners", "tags": ["partners"],
                "security": [{"partner": ["items:read"]}], "responses": ok}}
        }
    });
    let path = dir.join("vault.json");
    std::fs::write(&path, doc.to_string()).unwrap();
    path.display().to_string()
}

fn run(dir: &std::path::Path, args: &[&str]) -> Value {
    let (code, v) = cli(dir, None, args);
    assert_eq!(code, 0, "{args:?}: {v}");
    v
}

/// Adds an OpenAPI source `name` with `auth` flags, calls `tool`, returns the request the
/// server saw for `path`.
fn openapi_call(
    dir: &std::path::Path,
    spec: &str,
    log: &Log,
    name: &str,
    auth: &[&str],
    tool: &str,
    path: &str,
) -> Seen {
    let mut args = vec![
        "sources",
        "add",
        "openapi",
        name,
        "--spec",
        spec,
        "--allow-private",
    ];
    args.extend_from_slice(auth);
    let v = run(dir, &args);
    assert_eq!(v["stored"], true, "{v}");
    let v = run(dir, &["call", &format!("{name}.{tool}"), "{}"]);
    assert_eq!(v["status"], "completed", "{v}");
    last(log, path)
}

fn last(log: &Log, path: &str) -> Seen {
    log.lock()
        .unwrap()
        .iter()
        .rev()
        .find(|s| s.path == path)
        .cloned()
        .unwrap_or_else(|| panic!("the server saw no request to {path}"))
}

const SECRETS: [&str; 9] = [
    "query-secret-1",
    "cookie-secret-2",
    "basic-secret-3",
    "oauth-secret-4",
    "scheme-key-5",
    "scheme-bearer-6",
    "gql-oauth-secret-7",
    "gql-basic-8",
    "issued-token-",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_auth_form_reaches_the_server_and_stays_sealed() {
    let (base, log) = start_server().await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let spec = write_spec(d, &base);

    // API key in the query string.
    let s = openapi_call(
        d,
        &spec,
        &log,
        "vq",
        &["--api-key-query", "api_key=query-secret-1"],
        "items.list_items",
        "/items",
    );
    assert_eq!(s.query, "api_key=query-secret-1", "{s:?}");
    assert_eq!(s.authorization, "");

    // API key in a cookie.
    let s = openapi_call(
        d,
        &spec,
        &log,
        "vc",
        &["--api-key-cookie", "session=cookie-secret-2"],
        "items.list_items",
        "/items",
    );
    assert_eq!(s.cookie, "session=cookie-secret-2", "{s:?}");
    assert_eq!(s.query, "");

    // Basic auth (ann:basic-secret-3).
    let s = openapi_call(
        d,
        &spec,
        &log,
        "vb",
        &["--basic", "ann:basic-secret-3"],
        "reports.list_reports",
        "/reports",
    );
    assert_eq!(s.authorization, "Basic YW5uOmJhc2ljLXNlY3JldC0z", "{s:?}");

    // OAuth2 client credentials: the token request carries the client's credentials, the
    // scope and the audience; the call carries the issued token.
    let token_url = format!("{base}/oauth/token");
    let s = openapi_call(
        d,
        &spec,
        &log,
        "vo",
        &[
            "--oauth2-token-url",
            &token_url,
            "--oauth2-client-id",
            "cid-openapi",
            "--oauth2-client-secret",
            "oauth-secret-4",
            "--oauth2-scope",
            "items:read",
            "--oauth2-audience",
            "vault-api",
        ],
        "partners.list_partners",
        "/partners",
    );
    assert!(s.authorization.starts_with("Bearer issued-token-"), "{s:?}");
    let token = last(&log, "/oauth/token");
    assert_eq!(
        token.authorization, "Basic Y2lkLW9wZW5hcGk6b2F1dGgtc2VjcmV0LTQ=",
        "{token:?}"
    );
    assert!(
        token.body.contains("grant_type=client_credentials")
            && token.body.contains("scope=items%3Aread")
            && token.body.contains("audience=vault-api"),
        "{token:?}"
    );

    // Credentials per security scheme: each operation sends what its own `security` asks.
    let v = run(
        d,
        &[
            "sources",
            "add",
            "openapi",
            "vs",
            "--spec",
            &spec,
            "--allow-private",
            "--scheme",
            "key_header:value=scheme-key-5",
            "--scheme",
            "bearer_auth:token=scheme-bearer-6",
        ],
    );
    assert_eq!(v["stored"], true, "{v}");
    let v = run(d, &["call", "vs.items.list_items", "{}"]);
    assert_eq!(v["status"], "completed", "{v}");
    let s = last(&log, "/items");
    assert_eq!(
        (s.api_key.as_str(), s.authorization.as_str()),
        ("scheme-key-5", ""),
        "{s:?}"
    );
    let v = run(d, &["call", "vs.reports.list_reports", "{}"]);
    assert_eq!(v["status"], "completed", "{v}");
    let s = last(&log, "/reports");
    assert_eq!(
        (s.api_key.as_str(), s.authorization.as_str()),
        ("", "Bearer scheme-bearer-6"),
        "{s:?}"
    );

    // GraphQL: OAuth2 client credentials and basic auth with the same flags.
    let sdl = d.join("schema.graphql");
    std::fs::write(&sdl, "type Query { whoami: String }").unwrap();
    let sdl = sdl.display().to_string();
    let endpoint = format!("{base}/graphql");
    let v = run(
        d,
        &[
            "sources",
            "add",
            "graphql",
            "go",
            "--sdl",
            &sdl,
            "--endpoint",
            &endpoint,
            "--allow-private",
            "--oauth2-token-url",
            &token_url,
            "--oauth2-client-id",
            "cid-gql",
            "--oauth2-client-secret",
            "gql-oauth-secret-7",
        ],
    );
    assert_eq!(v["stored"], true, "{v}");
    let v = run(d, &["call", "go.query.whoami", "{}"]);
    assert_eq!(v["status"], "completed", "{v}");
    let token = last(&log, "/oauth/token");
    assert_eq!(
        token.authorization, "Basic Y2lkLWdxbDpncWwtb2F1dGgtc2VjcmV0LTc=",
        "{token:?}"
    );
    let s = last(&log, "/graphql");
    assert!(s.authorization.starts_with("Bearer issued-token-"), "{s:?}");
    assert!(s.body.contains("whoami"), "{s:?}");

    let v = run(
        d,
        &[
            "sources",
            "add",
            "graphql",
            "gb",
            "--sdl",
            &sdl,
            "--endpoint",
            &endpoint,
            "--allow-private",
            "--basic",
            "gq:gql-basic-8",
        ],
    );
    assert_eq!(v["stored"], true, "{v}");
    let v = run(d, &["call", "gb.query.whoami", "{}"]);
    assert_eq!(v["status"], "completed", "{v}");
    assert_eq!(
        last(&log, "/graphql").authorization,
        "Basic Z3E6Z3FsLWJhc2ljLTg="
    );

    // Nothing shows or stores a secret in clear.
    let list = run(d, &["sources", "list"]).to_string();
    assert_eq!(
        serde_json::from_str::<Value>(&list).unwrap()["sources"]
            .as_array()
            .unwrap()
            .len(),
        7,
        "{list}"
    );
    let mut stored = Vec::new();
    for f in ["toolshed.db", "toolshed.db-wal"] {
        if let Ok(b) = std::fs::read(d.join(f)) {
            stored.extend(b);
        }
    }
    assert!(!stored.is_empty());
    for secret in SECRETS {
        assert!(
            !list.contains(secret),
            "sources list shows {secret}: {list}"
        );
        assert!(
            !stored.windows(secret.len()).any(|w| w == secret.as_bytes()),
            "the database holds {secret} in clear"
        );
    }
    assert!(list.contains("[REDACTED]"), "{list}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graphql_timeout_flag_bounds_each_request() {
    let (base, _log) = start_server().await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let sdl = d.join("schema.graphql");
    std::fs::write(&sdl, "type Query { whoami: String }").unwrap();
    let v = run(
        d,
        &[
            "sources",
            "add",
            "graphql",
            "slow",
            "--sdl",
            sdl.to_str().unwrap(),
            "--endpoint",
            &format!("{base}/slow/graphql"),
            "--allow-private",
            "--timeout-ms",
            "400",
        ],
    );
    assert_eq!(v["stored"], true, "{v}");
    let (_, list) = cli(d, None, &["sources", "list"]);
    assert_eq!(list["sources"][0]["spec"]["timeout_ms"], 400, "{list}");
    let started = Instant::now();
    let (code, v) = cli(d, None, &["call", "slow.query.whoami", "{}"]);
    let took = started.elapsed();
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["error"]["code"], "timeout", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("did not answer in time"),
        "{v}"
    );
    // The server answers after 3 s; the call gave up long before.
    assert!(took < Duration::from_millis(2500), "took {took:?}");
}

/// A GraphQL source's secret (here a credential header) never reaches script output or the
/// audit log, even when the API echoes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graphql_secrets_stay_out_of_script_output_and_audit() {
    let (base, log) = start_server().await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let sdl = d.join("schema.graphql");
    std::fs::write(&sdl, "type Query { whoami: String }").unwrap();
    let secret = "gql-header-secret-4411";
    let v = run(
        d,
        &[
            "sources",
            "add",
            "graphql",
            "gh",
            "--sdl",
            sdl.to_str().unwrap(),
            "--endpoint",
            &format!("{base}/graphql"),
            "--allow-private",
            "--header",
            &format!("Authorization=Token {secret}"),
            "--header",
            "X-Tenant=acme",
        ],
    );
    assert_eq!(v["stored"], true, "{v}");
    let script = d.join("s.js");
    std::fs::write(
        &script,
        r#"
        const r = await tools.gh.query.whoami({});
        console.log("seen: " + JSON.stringify(r));
        return {r};
    "#,
    )
    .unwrap();
    let (code, out) = cli(d, None, &["run", script.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(out["status"], "completed", "{out}");
    // The API got the header...
    assert_eq!(
        last(&log, "/graphql").authorization,
        format!("Token {secret}")
    );
    // ...but the script's result and logs only show it blanked out.
    let text = out.to_string();
    assert!(
        !text.contains(secret),
        "script output leaks the header: {text}"
    );
    assert!(text.contains("[REDACTED]"), "{text}");
    let (_, audit) = cli(d, None, &["audit"]);
    assert!(
        audit.to_string().contains("gh.query.whoami"),
        "the call is audited: {audit}"
    );
    assert!(!audit.to_string().contains(secret), "{audit}");
    let mut stored = Vec::new();
    for f in ["toolshed.db", "toolshed.db-wal"] {
        if let Ok(b) = std::fs::read(d.join(f)) {
            stored.extend(b);
        }
    }
    assert!(
        !stored.windows(secret.len()).any(|w| w == secret.as_bytes()),
        "the database (audit log, sources) holds the header in clear"
    );
}
