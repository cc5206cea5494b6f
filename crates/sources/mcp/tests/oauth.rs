//! OAuth for a streamable HTTP upstream, against an in-process MCP server that wants a bearer
//! token (`401` with a `resource_metadata` challenge; `tools/call` needs the `write` scope, a
//! `403 insufficient_scope` otherwise) and its authorization server: client credentials and the
//! authorization-code flow with PKCE, each stepping up to the wider scope once; a refused
//! client secret that the authorization server echoes stays out of the error; a pinned issuer
//! (`oauth.issuer`) that the resource does not list, or that the authorization server's
//! metadata does not name, is refused, and picked among several listed servers.

use crate::common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Form, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use toolshed_core::SourceAuthorizations;
use toolshed_mcp_source::oauth::{FollowRedirects, OAuthConfig};
use toolshed_mcp_source::{Upstream, UpstreamConfig};
use toolshed_outbound::secret::Secret;

const CLIENT_ID: &str = "toolshed";
const CLIENT_SECRET: &str = "s3cret-client-value";

#[derive(Default)]
struct Seen {
    /// Token requests: grant type, requested scope, resource, Basic authentication used.
    token_requests: Vec<(String, String, String, bool)>,
    /// Issued tokens and their scopes.
    tokens: HashMap<String, Vec<String>>,
    /// The PKCE challenge of the last authorization request.
    challenge: Option<String>,
    pkce_verified: usize,
    /// The base URL of the server that answered each token request.
    token_servers: Vec<String>,
    /// Refresh tokens and their scopes.
    refresh: HashMap<String, Vec<String>>,
}

#[derive(Clone)]
struct Server {
    base: String,
    seen: Arc<Mutex<Seen>>,
    /// The resource metadata's `authorization_servers` when set (else this server alone).
    listed: Arc<Mutex<Option<Vec<String>>>>,
    /// Publish no resource metadata (and name none in challenges).
    no_resource_metadata: Arc<std::sync::atomic::AtomicBool>,
    /// Issue access tokens that expire at once, with refresh tokens.
    short_lived: Arc<std::sync::atomic::AtomicBool>,
}

impl Server {
    fn prm(&self) -> String {
        format!("{}/.well-known/oauth-protected-resource/mcp", self.base)
    }
}

async fn prm(State(s): State<Server>) -> Response {
    if s.no_resource_metadata
        .load(std::sync::atomic::Ordering::SeqCst)
    {
        return StatusCode::NOT_FOUND.into_response();
    }
    let listed = s
        .listed
        .lock()
        .unwrap()
        .clone()
        .unwrap_or_else(|| vec![s.base.clone()]);
    Json(json!({"resource": format!("{}/mcp", s.base), "authorization_servers": listed}))
        .into_response()
}

async fn as_metadata(State(s): State<Server>) -> Json<Value> {
    let b = &s.base;
    Json(json!({
        "issuer": b,
        "authorization_endpoint": format!("{b}/authorize"),
        "token_endpoint": format!("{b}/token"),
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "client_credentials", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["client_secret_basic"],
    }))
}

async fn authorize(State(s): State<Server>, Query(q): Query<HashMap<String, String>>) -> Response {
    assert_eq!(
        q.get("code_challenge_method").map(String::as_str),
        Some("S256")
    );
    s.seen.lock().unwrap().challenge = q.get("code_challenge").cloned();
    let scope = q.get("scope").cloned().unwrap_or_default();
    let back = format!(
        "{}?code={}&state={}",
        q["redirect_uri"],
        scope.replace(' ', "."),
        q["state"]
    );
    Redirect::to(&back).into_response()
}

fn s256(verifier: &str) -> String {
    use base64::Engine;
    use sha2::Digest;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier))
}

async fn token(
    State(s): State<Server>,
    headers: HeaderMap,
    Form(f): Form<HashMap<String, String>>,
) -> Response {
    use base64::Engine;
    let basic = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Basic "))
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
        .map(|b| String::from_utf8_lossy(&b).to_string());
    let mut seen = s.seen.lock().unwrap();
    seen.token_servers.push(s.base.clone());
    let grant = f.get("grant_type").cloned().unwrap_or_default();
    let refreshed = f
        .get("refresh_token")
        .and_then(|t| seen.refresh.get(t))
        .cloned();
    let scope = match grant.as_str() {
        "authorization_code" => f.get("code").cloned().unwrap_or_default().replace('.', " "),
        "refresh_token" => refreshed.clone().unwrap_or_default().join(" "),
        _ => f.get("scope").cloned().unwrap_or_default(),
    };
    seen.token_requests.push((
        grant.clone(),
        scope.clone(),
        f.get("resource").cloned().unwrap_or_default(),
        basic.is_some(),
    ));
    let expected = format!("{CLIENT_ID}:{CLIENT_SECRET}");
    if basic.as_deref() != Some(expected.as_str()) {
        // Echoes what the client sent, as careless servers do.
        let sent = basic.unwrap_or_default();
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({"error": "invalid_client", "error_description": format!("bad client credentials {sent}")})),
        )
            .into_response();
    }
    if grant == "authorization_code" {
        let verifier = f.get("code_verifier").cloned().unwrap_or_default();
        assert_eq!(seen.challenge.as_deref(), Some(s256(&verifier).as_str()));
        seen.pkce_verified += 1;
    }
    if grant == "refresh_token" && refreshed.is_none() {
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"error": "invalid_grant"})),
        )
            .into_response();
    }
    let token = format!("tok-{}", seen.tokens.len() + 1);
    let scopes: Vec<String> = scope.split_whitespace().map(str::to_string).collect();
    seen.tokens.insert(token.clone(), scopes.clone());
    if s.short_lived.load(std::sync::atomic::Ordering::SeqCst) {
        let refresh = format!("rt-{}", seen.refresh.len() + 1);
        seen.refresh.insert(refresh.clone(), scopes);
        return Json(
            json!({"access_token": token, "token_type": "Bearer", "expires_in": 1,
            "refresh_token": refresh, "scope": scope}),
        )
        .into_response();
    }
    Json(json!({"access_token": token, "token_type": "Bearer", "expires_in": 3600, "scope": scope}))
        .into_response()
}

/// A minimal stateless MCP server: JSON answers, no SSE.
async fn mcp(State(s): State<Server>, headers: HeaderMap, Json(msg): Json<Value>) -> Response {
    let challenge = |status: StatusCode, value: String| {
        (status, [("www-authenticate", value)], "").into_response()
    };
    let method = msg["method"].as_str().unwrap_or_default().to_string();
    let token = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_string);
    let scopes = token
        .clone()
        .and_then(|t| s.seen.lock().unwrap().tokens.get(&t).cloned());
    let Some(scopes) = scopes else {
        let value = if s
            .no_resource_metadata
            .load(std::sync::atomic::Ordering::SeqCst)
        {
            r#"Bearer scope="read""#.to_string()
        } else {
            format!(r#"Bearer resource_metadata="{}", scope="read""#, s.prm())
        };
        return challenge(StatusCode::UNAUTHORIZED, value);
    };
    if method == "tools/call" && !scopes.iter().any(|s| s == "write") {
        return challenge(
            StatusCode::FORBIDDEN,
            format!(
                r#"Bearer error="insufficient_scope", scope="read write", resource_metadata="{}""#,
                s.prm()
            ),
        );
    }
    let Some(id) = msg.get("id").cloned() else {
        return StatusCode::ACCEPTED.into_response();
    };
    let result = match method.as_str() {
        "initialize" => json!({
            "protocolVersion": msg["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "oauth-test", "version": "1"},
        }),
        "tools/list" => json!({"tools": [
            {"name": "whoami", "inputSchema": {"type": "object"}},
            {"name": "echo_token", "inputSchema": {"type": "object"}}
        ]}),
        // A careless upstream that echoes the token it got.
        "tools/call" if msg["params"]["name"] == "echo_token" => json!({"content": [
            {"type": "text", "text": format!("you sent {}", token.unwrap_or_default())}
        ]}),
        "tools/call" => json!({"content": [{"type": "text", "text": scopes.join(" ")}]}),
        _ => json!({}),
    };
    Json(json!({"jsonrpc": "2.0", "id": id, "result": result})).into_response()
}

async fn start() -> Server {
    start_sharing(Default::default()).await
}

/// A server whose issued tokens are kept in `seen` (shared: a token one server issues is good
/// at the other).
async fn start_sharing(seen: Arc<Mutex<Seen>>) -> Server {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = Server {
        base: format!("http://{}", listener.local_addr().unwrap()),
        seen,
        listed: Default::default(),
        no_resource_metadata: Default::default(),
        short_lived: Default::default(),
    };
    let app = Router::new()
        .route("/.well-known/oauth-protected-resource/mcp", get(prm))
        .route("/.well-known/oauth-authorization-server", get(as_metadata))
        .route("/authorize", get(authorize))
        .route("/token", post(token))
        .route(
            "/mcp",
            post(mcp).get(|| async { StatusCode::METHOD_NOT_ALLOWED }),
        )
        .with_state(server.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });
    server
}

fn config(server: &Server, oauth: OAuthConfig) -> UpstreamConfig {
    UpstreamConfig::http("guarded", format!("{}/mcp", server.base))
        .with_allow_private(true)
        .with_connect_timeout(Duration::from_secs(10))
        .with_call_timeout(Duration::from_secs(10))
        .with_oauth(oauth)
}

/// Lists and calls `whoami`, which answers the scopes of the token it got.
async fn list_and_call(up: &Upstream) -> Value {
    let tools = up.tools().await.unwrap();
    common::call(common::tool(&tools, "guarded.whoami"), json!({}))
        .await
        .unwrap()
}

#[tokio::test]
async fn client_credentials_then_a_step_up_to_the_wider_scope() {
    let server = start().await;
    let oauth = OAuthConfig::client_credentials(CLIENT_ID, Secret::new(CLIENT_SECRET));
    let up = Upstream::connect(config(&server, oauth)).await.unwrap();
    assert_eq!(list_and_call(&up).await, json!("read write"));
    // A second call reuses the wider token.
    assert_eq!(list_and_call(&up).await, json!("read write"));
    up.shutdown().await;

    let seen = server.seen.lock().unwrap();
    let resource = format!("{}/mcp", server.base);
    assert_eq!(
        seen.token_requests,
        vec![
            // The challenge's scope first, then the union the 403 asked for.
            (
                "client_credentials".into(),
                "read".into(),
                resource.clone(),
                true
            ),
            (
                "client_credentials".into(),
                "read write".into(),
                resource,
                true
            ),
        ]
    );
}

#[tokio::test]
async fn a_token_the_upstream_echoes_is_blanked_out() {
    let server = start().await;
    let oauth = OAuthConfig::client_credentials(CLIENT_ID, Secret::new(CLIENT_SECRET));
    let up = Upstream::connect(config(&server, oauth)).await.unwrap();
    let tools = up.tools().await.unwrap();
    let echoed = common::call(common::tool(&tools, "guarded.echo_token"), json!({}))
        .await
        .unwrap();
    up.shutdown().await;
    let text = echoed.to_string();
    assert!(text.contains("you sent"), "{text}");
    let issued: Vec<String> = server.seen.lock().unwrap().tokens.keys().cloned().collect();
    assert!(!issued.is_empty());
    for t in issued {
        assert!(
            !text.contains(&t),
            "the token {t} reached the result: {text}"
        );
    }
}

#[tokio::test]
async fn authorization_code_with_pkce_and_a_step_up() {
    let server = start().await;
    let oauth = OAuthConfig::authorization_code()
        .with_client(CLIENT_ID, Some(Secret::new(CLIENT_SECRET)))
        .with_agent(Arc::new(FollowRedirects::new(true)));
    let up = Upstream::connect(config(&server, oauth)).await.unwrap();
    assert_eq!(list_and_call(&up).await, json!("read write"));
    up.shutdown().await;

    let seen = server.seen.lock().unwrap();
    assert_eq!(seen.pkce_verified, 2);
    let asked: Vec<&str> = seen
        .token_requests
        .iter()
        .map(|(grant, scope, _, basic)| {
            assert_eq!(grant, "authorization_code");
            assert!(basic);
            scope.as_str()
        })
        .collect();
    assert_eq!(asked, ["read", "read write"]);
}

#[tokio::test]
async fn a_refused_secret_stays_out_of_the_error() {
    let server = start().await;
    let wrong = "wrong-secret-value-77";
    let oauth = OAuthConfig::client_credentials(CLIENT_ID, Secret::new(wrong));
    let e = Upstream::connect(config(&server, oauth))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("client_credentials") && e.contains("guarded") && e.contains("invalid_client"),
        "{e}"
    );
    assert!(!e.contains(wrong), "{e}");
}

#[tokio::test]
async fn authorization_code_without_an_agent_says_what_is_missing() {
    let server = start().await;
    let oauth = OAuthConfig::authorization_code().with_client(CLIENT_ID, None);
    let e = Upstream::connect(config(&server, oauth))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("no authorization agent is configured"), "{e}");
}

/// The link `grants` hold for the upstream `guarded`, checking that `error` (what a connection
/// or a call failed with) says a person is needed and names no link.
fn link_of(grants: &toolshed_mcp_source::person::PersonGrants, error: &str) -> String {
    assert!(
        error.contains("upstream 'guarded' needs a person"),
        "{error}"
    );
    assert!(!error.contains("/authorize"), "a link in an error: {error}");
    grants.waiting_at("guarded").expect("a link waits")
}

/// What a person's browser does: opens the link, approves (this authorization server approves
/// at once) and is sent back to the callback, whose URL is answered (not opened).
async fn approve(link: &str) -> String {
    let browser = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let r = browser.get(link).send().await.unwrap();
    assert!(r.status().is_redirection(), "{}", r.status());
    r.headers()["location"].to_str().unwrap().to_string()
}

#[tokio::test]
async fn a_person_authorizes_through_the_callback_and_again_for_a_wider_scope() {
    use toolshed_mcp_source::person::{PersonGrantError, PersonGrants};
    let server = start().await;
    let callback = "http://127.0.0.1:9/connect/upstreams/callback";
    let listing = "http://127.0.0.1:9/v1/sources/authorizations";
    let grants = PersonGrants::with_listing(callback, Some(listing.into()));
    let (granted_tx, mut granted) = tokio::sync::mpsc::unbounded_channel();
    grants.on_change(move |name| granted_tx.send(name.to_string()).unwrap());
    let oauth = OAuthConfig::authorization_code()
        .with_client(CLIENT_ID, Some(Secret::new(CLIENT_SECRET)))
        .with_person(grants.clone(), false);
    assert_eq!(oauth.redirect_uri, callback);

    // The first attempt waits for a person, and says where.
    let e = Upstream::connect(config(&server, oauth.clone()))
        .await
        .unwrap_err()
        .to_string();
    let link = link_of(&grants, &e);
    assert!(
        link.starts_with(&format!("{}/authorize?", server.base)),
        "{link}"
    );
    assert!(link.contains("code_challenge_method=S256"), "{link}");
    assert!(!e.contains(CLIENT_SECRET), "{e}");
    // Another attempt meanwhile answers the same link: nothing new is started.
    let again = Upstream::connect(config(&server, oauth.clone()))
        .await
        .unwrap_err()
        .to_string();
    assert_eq!(link_of(&grants, &again), link);
    let pending = grants.pending();
    assert_eq!(pending.len(), 1);
    assert_eq!(
        (pending[0].source.as_str(), &pending[0].url),
        ("guarded", &link)
    );
    assert!(server.seen.lock().unwrap().token_requests.is_empty());

    // The person approves; the browser comes back to the callback.
    let back = approve(&link).await;
    assert!(back.starts_with(&format!("{callback}?code=")), "{back}");
    let forged = format!("{callback}?code=read&state=forged");
    assert!(matches!(
        grants.complete(&forged).await,
        Err(PersonGrantError::UnknownState)
    ));
    assert_eq!(grants.complete(&back).await.unwrap(), "guarded");
    assert_eq!(granted.recv().await.as_deref(), Some("guarded"));
    assert!(
        matches!(
            grants.complete(&back).await,
            Err(PersonGrantError::UnknownState)
        ),
        "a callback is used once"
    );
    assert!(grants.pending().is_empty());

    // The next attempt connects with the person's token.
    let up = Upstream::connect(config(&server, oauth)).await.unwrap();
    let tools = up.tools().await.unwrap();
    assert_eq!(tools.len(), 2);
    // Calling needs the wider scope: that waits for a person too. The call asks its caller
    // for that action (the engine pauses it where it may), pointing at Toolshed's listing,
    // never at the authorization link.
    let e = common::call(common::tool(&tools, "guarded.whoami"), json!({}))
        .await
        .unwrap_err();
    assert_eq!(e.kind, toolshed_core::ToolErrorKind::ActionRequired, "{e}");
    assert_eq!(e.data, Some(json!({"url": listing})), "{e}");
    let e = e.to_string();
    let wider = link_of(&grants, &e);
    assert_ne!(wider, link);
    assert!(
        wider.contains("scope=read+write") || wider.contains("scope=read%20write"),
        "{wider}"
    );
    let back = approve(&wider).await;
    assert_eq!(grants.complete(&back).await.unwrap(), "guarded");
    assert_eq!(list_and_call(&up).await, json!("read write"));
    up.shutdown().await;

    let seen = server.seen.lock().unwrap();
    assert_eq!(seen.pkce_verified, 2);
    let asked: Vec<&str> = seen.token_requests.iter().map(|t| t.1.as_str()).collect();
    assert_eq!(asked, ["read", "read write"]);
}

#[tokio::test]
async fn a_refusal_at_the_authorization_server_is_reported_and_ends_the_wait() {
    use toolshed_mcp_source::person::{PersonGrantError, PersonGrants};
    let server = start().await;
    let callback = "http://127.0.0.1:9/connect/upstreams/callback";
    let grants = PersonGrants::new(callback);
    let oauth = OAuthConfig::authorization_code()
        .with_client(CLIENT_ID, Some(Secret::new(CLIENT_SECRET)))
        .with_person(grants.clone(), false);
    let e = Upstream::connect(config(&server, oauth))
        .await
        .unwrap_err()
        .to_string();
    let link = link_of(&grants, &e);
    let state = reqwest::Url::parse(&link)
        .unwrap()
        .query_pairs()
        .find(|(k, _)| k == "state")
        .unwrap()
        .1
        .into_owned();
    let refused =
        format!("{callback}?error=access_denied&error_description=the+user+said+no&state={state}");
    let e = grants.complete(&refused).await.unwrap_err();
    assert!(matches!(e, PersonGrantError::Refused { .. }));
    assert_eq!(e.status(), 403);
    let text = e.to_string();
    assert!(
        text.contains("'guarded'") && text.contains("access_denied: the user said no"),
        "{text}"
    );
    assert!(grants.pending().is_empty(), "a refusal ends the wait");
}

/// A vault in memory (a server's store seals what it keeps; that is the store's part).
#[derive(Default)]
struct MemoryVault(Mutex<HashMap<String, String>>);

impl MemoryVault {
    fn get(&self, upstream: &str) -> Option<String> {
        self.0.lock().unwrap().get(upstream).cloned()
    }
}

#[async_trait::async_trait]
impl toolshed_mcp_source::person::TokenVault for MemoryVault {
    async fn load(&self, upstream: &str) -> Result<Option<String>, String> {
        Ok(self.get(upstream))
    }
    async fn save(&self, upstream: &str, document: &str, create: bool) -> Result<(), String> {
        let mut kept = self.0.lock().unwrap();
        if create || kept.contains_key(upstream) {
            kept.insert(upstream.to_string(), document.to_string());
        }
        Ok(())
    }
    async fn clear(&self, upstream: &str) -> Result<(), String> {
        self.0.lock().unwrap().remove(upstream);
        Ok(())
    }
}

/// Person's grants keeping their tokens in `vault`, and a config using them.
fn person_config(
    server: &Server,
    vault: &Arc<MemoryVault>,
) -> (
    Arc<toolshed_mcp_source::person::PersonGrants>,
    UpstreamConfig,
) {
    let grants = toolshed_mcp_source::person::PersonGrants::new(
        "http://127.0.0.1:9/connect/upstreams/callback",
    );
    grants.keep_tokens_in(vault.clone());
    let oauth = OAuthConfig::authorization_code()
        .with_client(CLIENT_ID, Some(Secret::new(CLIENT_SECRET)))
        .with_person(grants.clone(), false);
    (grants, config(server, oauth))
}

#[tokio::test]
async fn a_token_a_person_approved_outlives_a_restart_and_is_refreshed() {
    let server = start().await;
    // Access tokens expire at once: every use refreshes them.
    server
        .short_lived
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let vault = Arc::new(MemoryVault::default());
    let (grants, cfg) = person_config(&server, &vault);
    let e = Upstream::connect(cfg.clone())
        .await
        .unwrap_err()
        .to_string();
    let back = approve(&link_of(&grants, &e)).await;
    assert_eq!(grants.complete(&back).await.unwrap(), "guarded");
    let up = Upstream::connect(cfg).await.unwrap();
    assert_eq!(up.tools().await.unwrap().len(), 2);
    up.shutdown().await;
    let kept = vault.get("guarded").expect("the person's token is kept");
    assert!(
        kept.contains(&format!("{}/mcp", server.base)),
        "bound to the upstream's URL: {kept}"
    );
    let before = server.seen.lock().unwrap().token_requests.len();

    // A restart: new grants over the same vault. The upstream connects without a person, with
    // the kept token refreshed (the confidential client authenticates its refresh).
    let (restarted, cfg) = person_config(&server, &vault);
    let up = Upstream::connect(cfg).await.unwrap();
    assert_eq!(up.tools().await.unwrap().len(), 2);
    up.shutdown().await;
    assert!(restarted.pending().is_empty(), "no person asked");
    {
        let seen = server.seen.lock().unwrap();
        assert_eq!(seen.pkce_verified, 1, "one authorization by a person");
        let kinds: Vec<&str> = seen.token_requests.iter().map(|t| t.0.as_str()).collect();
        assert_eq!(kinds[0], "authorization_code", "{kinds:?}");
        assert!(
            kinds.len() > before && kinds[1..].iter().all(|k| *k == "refresh_token"),
            "renewed after the restart: {kinds:?}"
        );
        assert!(
            seen.token_requests.iter().all(|t| t.3),
            "client authenticated"
        );
    }
    assert_ne!(
        vault.get("guarded").unwrap(),
        kept,
        "refreshed tokens are kept"
    );

    // What was kept for another URL is not sent here: a person is asked again.
    let moved = vault
        .get("guarded")
        .unwrap()
        .replace(&format!("{}/mcp", server.base), "http://127.0.0.1:1/mcp");
    vault.0.lock().unwrap().insert("guarded".into(), moved);
    let sent = server.seen.lock().unwrap().token_requests.len();
    let (again, cfg) = person_config(&server, &vault);
    let e = Upstream::connect(cfg).await.unwrap_err().to_string();
    link_of(&again, &e);
    assert_eq!(
        server.seen.lock().unwrap().token_requests.len(),
        sent,
        "nothing kept was sent"
    );
    // Kept under other OAuth settings (another scope configured): not used either.
    let (again, cfg) = person_config(&server, &vault);
    let mut narrower = cfg.clone();
    narrower.oauth = narrower.oauth.map(|o| o.with_scopes(["read"]));
    let e = Upstream::connect(narrower).await.unwrap_err().to_string();
    link_of(&again, &e);
    assert_eq!(server.seen.lock().unwrap().token_requests.len(), sent);

    // Kept for this URL, but the authorization server no longer takes its refresh token (and
    // the access token expired): a person is asked again.
    let back_here = vault
        .get("guarded")
        .unwrap()
        .replace("http://127.0.0.1:1/mcp", &format!("{}/mcp", server.base));
    vault.0.lock().unwrap().insert("guarded".into(), back_here);
    server.seen.lock().unwrap().refresh.clear();
    let (again, cfg) = person_config(&server, &vault);
    let e = Upstream::connect(cfg).await.unwrap_err().to_string();
    link_of(&again, &e);
}

fn pinned(issuer: &str) -> OAuthConfig {
    OAuthConfig::client_credentials(CLIENT_ID, Secret::new(CLIENT_SECRET)).with_issuer(issuer)
}

#[tokio::test]
async fn a_pinned_issuer_the_resource_lists_is_used() {
    let server = start().await;
    // The pin may carry the root slash the metadata leaves out.
    let oauth = pinned(&format!("{}/", server.base));
    let up = Upstream::connect(config(&server, oauth)).await.unwrap();
    assert_eq!(list_and_call(&up).await, json!("read write"));
    up.shutdown().await;
}

#[tokio::test]
async fn a_pinned_issuer_the_resource_does_not_list_is_refused() {
    let server = start().await;
    let e = Upstream::connect(config(&server, pinned("https://login.example.com")))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("https://login.example.com")
            && e.contains(&server.base)
            && e.contains("oauth.issuer"),
        "{e}"
    );
    assert!(
        server.seen.lock().unwrap().token_requests.is_empty(),
        "no token was asked of an authorization server the pin does not name"
    );
}

#[tokio::test]
async fn an_authorization_server_with_another_issuer_is_refused() {
    // No resource metadata: the authorization server is found at the upstream's own origin,
    // and its issuer is not the pinned one.
    let server = start().await;
    server
        .no_resource_metadata
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let e = Upstream::connect(config(&server, pinned("https://login.example.com")))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&format!("names the issuer {}", server.base))
            && e.contains("not the pinned issuer https://login.example.com"),
        "{e}"
    );
    assert!(server.seen.lock().unwrap().token_requests.is_empty());
}

#[tokio::test]
async fn the_pinned_server_is_used_when_the_resource_lists_several() {
    let server = start().await;
    let other = start_sharing(server.seen.clone()).await;
    *server.listed.lock().unwrap() = Some(vec![server.base.clone(), other.base.clone()]);
    let up = Upstream::connect(config(&server, pinned(&other.base)))
        .await
        .unwrap();
    assert_eq!(list_and_call(&up).await, json!("read write"));
    up.shutdown().await;
    let seen = server.seen.lock().unwrap();
    assert!(!seen.token_servers.is_empty());
    assert!(
        seen.token_servers.iter().all(|b| *b == other.base),
        "tokens came from {:?}, not only the pinned {}",
        seen.token_servers,
        other.base
    );
}
