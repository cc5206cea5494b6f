//! Per-operation security: schemes from `components.securitySchemes` (3.x) and
//! `securityDefinitions` (2.0), requirements per document and per operation, and credentials
//! configured per scheme name, against a local server that reports (and checks) the
//! credentials each request carried.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};
use toolshed_core::ToolErrorKind;
use toolshed_openapi::{import, ImportOptions, Imported, OpenApiError, SchemeCredentials};
use toolshed_outbound::{AuthConfig, Secret};

use crate::common::{base64_free::basic, call, local_outbound, tool};

const KEY: &str = "sec-header-key-1";
const QUERY_KEY: &str = "sec-query-key-2";
const BEARER: &str = "sec-bearer-3";
const PASSWORD: &str = "sec-basic-pw-4";
const CLIENT_SECRET: &str = "sec-client-5";

#[derive(Clone, Default)]
struct Srv {
    token_hits: Arc<AtomicUsize>,
    token_scopes: Arc<Mutex<Vec<String>>>,
}

fn header(h: &HeaderMap, name: &str) -> Option<String> {
    h.get(name).and_then(|v| v.to_str().ok()).map(String::from)
}

/// Answers `{"credentials": [...]}`: what the request carried, each checked. A wrong value is
/// a 401, and so is `/partner` without an OAuth2 token.
async fn echo(uri: Uri, h: HeaderMap, RawQuery(q): RawQuery) -> Response {
    let mut seen = Vec::new();
    let mut wrong = Vec::new();
    if let Some(k) = header(&h, "x-api-key") {
        if k == KEY {
            seen.push("key");
        } else {
            wrong.push("x-api-key");
        }
    }
    for pair in q.unwrap_or_default().split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("api_key", v)) if v == QUERY_KEY => seen.push("query_key"),
            Some(("api_key", _)) => wrong.push("api_key"),
            _ => {}
        }
    }
    if let Some(a) = header(&h, "authorization") {
        if a == format!("Bearer {BEARER}") {
            seen.push("bearer");
        } else if a.starts_with("Bearer oauth-token-") {
            seen.push("oauth");
        } else if a == basic("ann", PASSWORD) {
            seen.push("basic");
        } else {
            wrong.push("authorization");
        }
    }
    if h.get_all("authorization").iter().count() > 1 {
        wrong.push("several authorization headers");
    }
    if !wrong.is_empty() {
        return (
            StatusCode::UNAUTHORIZED,
            format!("wrong credentials: {wrong:?}"),
        )
            .into_response();
    }
    if uri.path() == "/partner" && !seen.contains(&"oauth") {
        return (StatusCode::UNAUTHORIZED, "partner token required").into_response();
    }
    Json(json!({"credentials": seen})).into_response()
}

async fn token(State(s): State<Srv>, h: HeaderMap, body: String) -> Response {
    if header(&h, "authorization") != Some(basic("client-1", CLIENT_SECRET))
        || !body.contains("grant_type=client_credentials")
    {
        return (StatusCode::UNAUTHORIZED, "invalid_client").into_response();
    }
    let scope = body
        .split('&')
        .find_map(|kv| kv.strip_prefix("scope="))
        .unwrap_or("")
        .replace('+', " ");
    let scope = percent_encoding::percent_decode_str(&scope)
        .decode_utf8_lossy()
        .into_owned();
    s.token_scopes.lock().unwrap().push(scope);
    let n = s.token_hits.fetch_add(1, Ordering::SeqCst) + 1;
    Json(json!({"access_token": format!("oauth-token-{n}"), "expires_in": 3600})).into_response()
}

async fn start() -> (String, Srv) {
    let srv = Srv::default();
    let app = Router::new()
        .route("/oauth/token", post(token))
        .fallback(echo)
        .with_state(srv.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://127.0.0.1:{}", addr.port()), srv)
}

fn get(op_id: &str, security: Option<Value>) -> Value {
    let mut op = json!({"operationId": op_id, "tags": ["s"],
        "responses": {"200": {"description": "ok"}}});
    if let Some(s) = security {
        op["security"] = s;
    }
    json!({"get": op})
}

/// A 3.0 document with an API key header, an API key in the query, a bearer, an OAuth2
/// client credentials scheme with a relative token URL, and an openIdConnect scheme.
fn doc30(base: &str) -> Value {
    json!({
        "openapi": "3.0.3",
        "info": {"title": "secured", "version": "1"},
        "servers": [{"url": base}],
        "components": {"securitySchemes": {
            "api_key_header": {"type": "apiKey", "in": "header", "name": "X-Api-Key"},
            "api_key_query": {"type": "apiKey", "in": "query", "name": "api_key"},
            "bearer_auth": {"type": "http", "scheme": "bearer"},
            "partner_oauth": {"type": "oauth2", "flows": {"clientCredentials": {
                "tokenUrl": "/oauth/token", "scopes": {"partner:read": "read"}}}},
            "oidc": {"type": "openIdConnect",
                "openIdConnectUrl": "https://id.example.com/.well-known/openid-configuration"}
        }},
        "security": [{"api_key_header": []}],
        "paths": {
            "/key": get("key_only", None),
            "/bearer": get("bearer_only", Some(json!([{"bearer_auth": []}]))),
            "/both": get("both", Some(json!([{"api_key_header": [], "bearer_auth": []}]))),
            "/either": get("either", Some(json!([{"bearer_auth": []}, {"api_key_header": []}]))),
            "/public": get("public", Some(json!([]))),
            "/two-keys": get("two_keys", Some(json!([{"api_key_header": [], "api_key_query": []}]))),
            "/partner": get("partner", Some(json!([{"partner_oauth": ["partner:read"]}]))),
            "/sso": get("sso", Some(json!([{"oidc": []}]))),
            "/ghost": get("ghost", Some(json!([{"ghost_scheme": []}])))
        }
    })
}

fn creds(list: Vec<(&str, SchemeCredentials)>) -> BTreeMap<String, SchemeCredentials> {
    list.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

fn key() -> SchemeCredentials {
    SchemeCredentials::ApiKey {
        value: Secret::new(KEY),
    }
}

fn bearer() -> SchemeCredentials {
    SchemeCredentials::Bearer {
        token: Secret::new(BEARER),
    }
}

fn import_with(doc: &Value, schemes: BTreeMap<String, SchemeCredentials>) -> Imported {
    try_import(doc, schemes).unwrap()
}

fn try_import(
    doc: &Value,
    schemes: BTreeMap<String, SchemeCredentials>,
) -> Result<Imported, OpenApiError> {
    import(
        doc,
        &ImportOptions {
            namespace: "sec".into(),
            scheme_credentials: schemes,
            outbound: Some(local_outbound()),
            ..Default::default()
        },
    )
}

/// The credentials the server saw for one call.
async fn sent(imp: &Imported, op: &str) -> Vec<String> {
    let out = call(tool(imp, &format!("sec.s.{op}")), json!({}))
        .await
        .unwrap_or_else(|e| panic!("{op}: {e:?}"));
    serde_json::from_value(out["credentials"].clone()).unwrap()
}

#[tokio::test]
async fn each_operation_sends_what_its_security_asks_for() {
    let (base, _) = start().await;
    let imp = import_with(
        &doc30(&base),
        creds(vec![
            ("api_key_header", key()),
            (
                "api_key_query",
                SchemeCredentials::ApiKey {
                    value: Secret::new(QUERY_KEY),
                },
            ),
            ("bearer_auth", bearer()),
        ]),
    );
    assert_eq!(imp.tools.len(), 9, "every operation imports");
    assert_eq!(sent(&imp, "key_only").await, ["key"], "document default");
    assert_eq!(sent(&imp, "bearer_only").await, ["bearer"]);
    assert_eq!(sent(&imp, "both").await, ["key", "bearer"], "AND");
    assert_eq!(sent(&imp, "either").await, ["bearer"], "OR: the first met");
    assert!(sent(&imp, "public").await.is_empty(), "security: []");
    assert_eq!(
        sent(&imp, "two_keys").await,
        ["key", "query_key"],
        "two API keys of one source"
    );
}

#[tokio::test]
async fn alternatives_fall_back_to_the_configured_one() {
    let (base, _) = start().await;
    // Only the API key: `either` falls back to its second alternative; `both` and
    // `bearer_only` cannot be met and send nothing.
    let imp = import_with(&doc30(&base), creds(vec![("api_key_header", key())]));
    assert_eq!(sent(&imp, "either").await, ["key"]);
    assert_eq!(sent(&imp, "key_only").await, ["key"]);
    assert!(sent(&imp, "bearer_only").await.is_empty());
    assert!(sent(&imp, "both").await.is_empty());
    let w = imp.warnings.join("\n");
    assert!(
        w.contains("GET /bearer: cannot meet the security requirement (\"bearer_auth\")"),
        "{w}"
    );
    assert!(
        w.contains("GET /both: cannot meet the security requirement (\"api_key_header\" and \"bearer_auth\")")
            && w.contains("no credentials are configured for \"bearer_auth\" (http bearer)"),
        "{w}"
    );
    assert!(!w.contains("GET /either"), "{w}");
}

#[tokio::test]
async fn unmet_requirements_warn_at_import_and_401_is_a_clear_tool_error() {
    let (base, _) = start().await;
    let imp = import_with(
        &doc30(&base),
        creds(vec![("api_key_header", key()), ("bearer_auth", bearer())]),
    );
    let w = imp.warnings.join("\n");
    assert!(
        w.contains("GET /partner: cannot meet the security requirement (\"partner_oauth\")")
            && w.contains("no credentials are configured for \"partner_oauth\" (oauth2)")
            && w.contains("calls send no credentials"),
        "{w}"
    );
    assert!(
        w.contains("security scheme \"ghost_scheme\" referenced by GET /ghost is not defined"),
        "{w}"
    );
    assert!(
        w.contains("security scheme \"oidc\" (openIdConnect) is not supported"),
        "{w}"
    );
    let e = call(tool(&imp, "sec.s.partner"), json!({}))
        .await
        .unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::Unauthorized, "{e:?}");
    assert!(
        e.message.contains("401")
            && e.message.contains("partner token required")
            && e.message.contains("\"partner_oauth\""),
        "{}",
        e.message
    );
    assert_eq!(e.data.unwrap()["status"], 401);
    // Nothing was sent for the undefined scheme either.
    assert!(sent(&imp, "ghost").await.is_empty());
}

#[tokio::test]
async fn oauth2_client_credentials_use_the_scheme_token_url_and_scopes() {
    let (base, srv) = start().await;
    let imp = import_with(
        &doc30(&base),
        creds(vec![(
            "partner_oauth",
            SchemeCredentials::OAuth2ClientCredentials {
                client_id: "client-1".into(),
                client_secret: Secret::new(CLIENT_SECRET),
                token_url: None,
                scopes: None,
                audience: None,
            },
        )]),
    );
    for _ in 0..3 {
        assert_eq!(sent(&imp, "partner").await, ["oauth"]);
    }
    assert_eq!(
        srv.token_hits.load(Ordering::SeqCst),
        1,
        "the token is cached"
    );
    assert_eq!(*srv.token_scopes.lock().unwrap(), ["partner:read"]);
    // A static token for the OpenID Connect scheme is sent as a bearer.
    let imp = import_with(&doc30(&base), creds(vec![("oidc", bearer())]));
    assert_eq!(sent(&imp, "sso").await, ["bearer"]);
    assert!(!imp.warnings.join("\n").contains("openIdConnect"));
}

/// A document whose tokenUrl points at another host than the pinned base URL (or than the URL
/// the document came from) gets no client secret: the operation imports with a warning and
/// sends no credentials, until the credentials name the token URL themselves.
#[tokio::test]
async fn a_foreign_token_url_gets_no_client_secret() {
    let (base, srv) = start().await;
    let port = base.rsplit(':').next().unwrap();
    let mut doc = doc30(&base);
    // Same server, another host name: what matters is the host the operator trusts.
    doc["components"]["securitySchemes"]["partner_oauth"]["flows"]["clientCredentials"]
        ["tokenUrl"] = json!(format!("http://localhost:{port}/oauth/token"));
    let client = |token_url: Option<String>| SchemeCredentials::OAuth2ClientCredentials {
        client_id: "client-1".into(),
        client_secret: Secret::new(CLIENT_SECRET),
        token_url,
        scopes: None,
        audience: None,
    };
    let opts = |token_url: Option<String>, base_url: Option<String>, spec_url: Option<String>| {
        ImportOptions {
            namespace: "sec".into(),
            base_url,
            spec_url,
            scheme_credentials: creds(vec![("partner_oauth", client(token_url))]),
            outbound: Some(local_outbound()),
            ..Default::default()
        }
    };
    for (base_url, spec_url, trusted) in [
        (Some(base.clone()), None, "the pinned base_url"),
        (
            None,
            Some(format!("{base}/openapi.json")),
            "the URL the document was fetched from",
        ),
    ] {
        let imp = import(&doc, &opts(None, base_url, spec_url)).unwrap();
        assert_eq!(imp.tools.len(), 9, "every operation imports");
        let w = imp.warnings.join("\n");
        assert!(
            w.contains("GET /partner: cannot meet the security requirement (\"partner_oauth\")")
                && w.contains(&format!("not on the host of {trusted} (127.0.0.1)"))
                && w.contains("set token_url in its credentials"),
            "{w}"
        );
        let e = call(tool(&imp, "sec.s.partner"), json!({}))
            .await
            .unwrap_err();
        assert_eq!(e.kind, ToolErrorKind::Unauthorized, "{e:?}");
        assert_eq!(srv.token_hits.load(Ordering::SeqCst), 0, "no token request");
    }
    // The operator names the token URL: it is used.
    let imp = import(
        &doc,
        &opts(
            Some(format!("{base}/oauth/token")),
            Some(base.clone()),
            None,
        ),
    )
    .unwrap();
    assert_eq!(sent(&imp, "partner").await, ["oauth"]);
    assert_eq!(srv.token_hits.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn swagger2_security_definitions() {
    let (base, srv) = start().await;
    let doc = json!({
        "swagger": "2.0",
        "info": {"title": "secured", "version": "1"},
        "host": base.trim_start_matches("http://"),
        "schemes": ["http"],
        "securityDefinitions": {
            "api_key_header": {"type": "apiKey", "in": "header", "name": "X-Api-Key"},
            "api_key_query": {"type": "apiKey", "in": "query", "name": "api_key"},
            "basic_auth": {"type": "basic"},
            "app_oauth": {"type": "oauth2", "flow": "application",
                "tokenUrl": format!("{base}/oauth/token"), "scopes": {"pets": "all"}},
            "user_oauth": {"type": "oauth2", "flow": "implicit",
                "authorizationUrl": "https://id.example.com/authorize", "scopes": {}}
        },
        "security": [{"basic_auth": []}],
        "paths": {
            "/basic": get("basic_default", None),
            "/key": get("key_only", Some(json!([{"api_key_header": []}]))),
            "/either": get("either", Some(json!([{"api_key_query": []}, {"basic_auth": []}]))),
            "/both": get("both", Some(json!([{"api_key_header": [], "basic_auth": []}]))),
            "/public": get("public", Some(json!([]))),
            "/app": get("app", Some(json!([{"app_oauth": ["pets"]}]))),
            "/user": get("user", Some(json!([{"user_oauth": []}])))
        }
    });
    let imp = import_with(
        &doc,
        creds(vec![
            ("api_key_header", key()),
            (
                "basic_auth",
                SchemeCredentials::Basic {
                    username: "ann".into(),
                    password: Secret::new(PASSWORD),
                },
            ),
            (
                "app_oauth",
                SchemeCredentials::OAuth2ClientCredentials {
                    client_id: "client-1".into(),
                    client_secret: Secret::new(CLIENT_SECRET),
                    token_url: None,
                    scopes: None,
                    audience: None,
                },
            ),
        ]),
    );
    assert_eq!(sent(&imp, "basic_default").await, ["basic"]);
    assert_eq!(sent(&imp, "key_only").await, ["key"]);
    assert_eq!(
        sent(&imp, "either").await,
        ["basic"],
        "the query key is not configured"
    );
    assert_eq!(sent(&imp, "both").await, ["key", "basic"]);
    assert!(sent(&imp, "public").await.is_empty());
    assert_eq!(sent(&imp, "app").await, ["oauth"]);
    assert_eq!(*srv.token_scopes.lock().unwrap(), ["pets"]);
    let w = imp.warnings.join("\n");
    assert!(
        w.contains("GET /user: cannot meet the security requirement (\"user_oauth\")"),
        "{w}"
    );
    assert!(!w.contains("GET /either"), "{w}");
    // An implicit-flow scheme has no token URL to use: configuring a client is an error
    // unless the credentials name one.
    let e = try_import(
        &doc,
        creds(vec![(
            "user_oauth",
            SchemeCredentials::OAuth2ClientCredentials {
                client_id: "client-1".into(),
                client_secret: Secret::new(CLIENT_SECRET),
                token_url: None,
                scopes: None,
                audience: None,
            },
        )]),
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("\"user_oauth\"") && e.to_string().contains("implicit"),
        "{e}"
    );
}

#[tokio::test]
async fn the_single_auth_form_still_applies_to_every_operation() {
    let (base, _) = start().await;
    let imp = import(
        &doc30(&base),
        &ImportOptions {
            namespace: "sec".into(),
            auth: AuthConfig::Bearer {
                token: Secret::new(BEARER),
            },
            outbound: Some(local_outbound()),
            ..Default::default()
        },
    )
    .unwrap();
    for op in ["key_only", "both", "public", "two_keys"] {
        assert_eq!(sent(&imp, op).await, ["bearer"], "{op}");
    }
    assert!(
        !imp.warnings.iter().any(|w| w.contains("security")),
        "{:?}",
        imp.warnings
    );
}

#[test]
fn configuration_mistakes_are_typed_errors() {
    let doc = doc30("http://127.0.0.1:9");
    let e = try_import(&doc, creds(vec![("api_key", key())])).unwrap_err();
    assert!(matches!(e, OpenApiError::UnknownScheme { .. }), "{e:?}");
    assert!(
        e.to_string().contains("\"api_key\"") && e.to_string().contains("\"api_key_header\""),
        "{e}"
    );
    let e = try_import(&doc, creds(vec![("bearer_auth", key())])).unwrap_err();
    assert!(matches!(e, OpenApiError::SchemeCredentials { .. }), "{e:?}");
    assert!(e.to_string().contains("http bearer"), "{e}");
    let e = import(
        &doc,
        &ImportOptions {
            namespace: "sec".into(),
            auth: AuthConfig::Bearer {
                token: Secret::new(BEARER),
            },
            scheme_credentials: creds(vec![("bearer_auth", bearer())]),
            ..Default::default()
        },
    )
    .unwrap_err();
    assert!(matches!(e, OpenApiError::AuthConflict), "{e:?}");
}

#[tokio::test]
async fn scheme_secrets_never_show() {
    let (base, _) = start().await;
    let schemes = creds(vec![("api_key_header", key()), ("bearer_auth", bearer())]);
    let opts = ImportOptions {
        namespace: "sec".into(),
        scheme_credentials: schemes.clone(),
        outbound: Some(local_outbound()),
        ..Default::default()
    };
    let imp = import(&doc30(&base), &opts).unwrap();
    let text = format!("{opts:?} {:?} {:?} {:?}", imp.tools, imp.warnings, schemes);
    for s in [KEY, BEARER] {
        assert!(!text.contains(s), "{text}");
    }
    // An upstream echoing the key back in an error is redacted.
    let echo = Router::new().fallback(|h: HeaderMap| async move {
        (
            StatusCode::BAD_REQUEST,
            format!("bad key {}", header(&h, "x-api-key").unwrap_or_default()),
        )
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, echo).await.unwrap() });
    let imp = import_with(&doc30(&format!("http://{addr}")), schemes);
    let e = call(tool(&imp, "sec.s.key_only"), json!({}))
        .await
        .unwrap_err();
    let text = format!("{e:?}");
    assert!(text.contains("[REDACTED]") && !text.contains(KEY), "{text}");
}
