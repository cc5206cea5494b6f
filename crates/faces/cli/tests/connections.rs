//! Per-user connections: an upstream API protected by the same real OpenID provider as
//! Toolshed (`oidc-provider`, see `oauth.rs`) is imported as an OpenAPI source with
//! `auth = { type = "oauth2_user", ... }`. A user's first call pauses with a link; following
//! it (through the provider's own login and consent pages, driven over HTTP) stores that
//! user's grant and the paused call completes with the user's token. Another user needs their
//! own grant; an expired token is refreshed; a revoked grant makes the next call pause again;
//! replayed or forged states and used links are refused and store nothing.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::Json;
use serde_json::{json, Value};
use toolshed_identity::{Authenticator, IssuerConfig, KeyRing, OAuthConfig, Who};

use crate::oauth::Provider;
use crate::support::{free_port, Server};

/// The upstream API: `GET /me` answers who the bearer's token names, checking the token
/// against the provider like any resource server would.
async fn start_api(issuer: &str) -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    let base = format!("http://{addr}");
    let auth = Authenticator::new(
        KeyRing::new([], None),
        Some(OAuthConfig {
            resource: base.clone(),
            issuers: vec![IssuerConfig {
                issuer: issuer.to_string(),
                allow_private: true,
                ..IssuerConfig::default()
            }],
            leeway_secs: 1,
            ..OAuthConfig::default()
        }),
    )
    .unwrap();
    let doc = json!({
        "openapi": "3.0.3",
        "info": {"title": "People", "version": "1"},
        "servers": [{"url": base}],
        "components": {"securitySchemes": {"people": {"type": "oauth2", "flows": {
            "authorizationCode": {
                "authorizationUrl": format!("{issuer}/auth"),
                "tokenUrl": format!("{issuer}/token"),
                "scopes": {"api": "read who you are"}}}}}},
        "paths": {"/me": {"get": {
            "operationId": "whoami",
            "summary": "Who the caller is",
            "responses": {"200": {"description": "the caller", "content": {"application/json": {
                "schema": {"type": "object"}}}}}
        }}}
    });
    async fn me(State(auth): State<Authenticator>, headers: HeaderMap) -> axum::response::Response {
        match auth.authenticate(&headers).await {
            Ok(Who::SignedIn(s)) => Json(json!({"user": s.principal})).into_response(),
            Ok(_) => StatusCode::UNAUTHORIZED.into_response(),
            Err(e) => (StatusCode::UNAUTHORIZED, e.to_string()).into_response(),
        }
    }
    let app = axum::Router::new()
        .route(
            "/openapi.json",
            axum::routing::get(move || async move { Json(doc) }),
        )
        .route("/me", axum::routing::get(me))
        .with_state(auth);
    let task = tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (base, task)
}

/// A browser: follows redirects by hand, keeps the provider's cookies, fills the provider's
/// development login (any password) and consent forms, and stops at Toolshed's callback.
pub(crate) struct Browser {
    http: reqwest::Client,
    cookies: BTreeMap<String, String>,
}

impl Browser {
    pub(crate) fn new() -> Self {
        Self {
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            cookies: BTreeMap::new(),
        }
    }

    async fn send(&mut self, req: reqwest::RequestBuilder) -> reqwest::Response {
        let cookie = self
            .cookies
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ");
        let r = req.header("cookie", cookie).send().await.unwrap();
        for c in r.headers().get_all("set-cookie") {
            let pair = c.to_str().unwrap().split(';').next().unwrap();
            if let Some((k, v)) = pair.split_once('=') {
                self.cookies.insert(k.to_string(), v.to_string());
            }
        }
        r
    }

    /// Opens `link` as `login` and follows the flow until it reaches Toolshed's callback,
    /// whose URL is returned (not opened).
    pub(crate) async fn grant(&mut self, link: &str, login: &str, callback: &str) -> String {
        let mut r = self.send(self.http.get(link)).await;
        for _ in 0..20 {
            if r.status().is_redirection() {
                let to = r.headers()["location"].to_str().unwrap().to_string();
                let to = r.url().join(&to).unwrap().to_string();
                if to.starts_with(callback) {
                    return to;
                }
                r = self.send(self.http.get(&to)).await;
                continue;
            }
            let page_url = r.url().clone();
            let html = r.text().await.unwrap();
            let action = between(&html, "action=\"", "\"").unwrap_or_else(|| panic!("{html}"));
            let prompt = between(&html, "name=\"prompt\" value=\"", "\"").unwrap();
            let mut form = vec![("prompt", prompt.clone())];
            if prompt == "login" {
                form.push(("login", login.to_string()));
                form.push(("password", "any".to_string()));
            }
            let to = page_url.join(&action).unwrap();
            r = self.send(self.http.post(to).form(&form)).await;
        }
        panic!("the flow did not reach the callback");
    }
}

fn between(text: &str, start: &str, end: &str) -> Option<String> {
    let from = text.find(start)? + start.len();
    let len = text[from..].find(end)?;
    Some(text[from..from + len].replace("&amp;", "&"))
}

struct Setup {
    dir: tempfile::TempDir,
    config: std::path::PathBuf,
    provider: Provider,
    server: Server,
    resource: String,
    callback: String,
    _api: tokio::task::JoinHandle<()>,
}

/// Toolshed in front of the API (source `api`, `oauth2_user`), with `extra` configuration.
async fn setup(extra: &str) -> Option<Setup> {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let resource = format!("http://127.0.0.1:{port}");
    let callback = format!("{resource}/connect/callback");
    let provider = Provider::start_with(&resource, Some(&callback))?;
    let (api, task) = start_api(&provider.issuer).await;
    let issuer = &provider.issuer;
    let config = dir.path().join("toolshed.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[http]
public_url = "{resource}"
[[roles]]
id = "user"
patterns = ["api.**", "exchanged.**", "fromdoc.**", "later.**", "leaky.**"]
[oauth]
resource = "{resource}"
default_roles = ["user"]
[[oauth.issuers]]
issuer = "{issuer}"
allow_private = true

[[sources]]
kind = "openapi"
name = "api"
spec = "{api}/openapi.json"
allow_private = true
auth = {{ type = "oauth2_user", authorization_url = "{issuer}/auth", token_url = "{issuer}/token", client_id = "toolshed-connect", client_secret = "toolshed-connect-secret", scopes = ["api"], resource = "{api}" }}
{extra}
"#,
            extra = extra.replace("{api}", &api).replace("{issuer}", issuer)
        ),
    )
    .unwrap();
    let server = Server::start_on(dir.path(), Some(&config), &["--direct"], port);
    let config = config.to_path_buf();
    Some(Setup {
        dir,
        config,
        provider,
        server,
        resource,
        callback,
        _api: task,
    })
}

async fn request(s: &Setup, method: reqwest::Method, path: &str, token: &str) -> (u16, Value) {
    let mut req = reqwest::Client::new()
        .request(method.clone(), s.server.url(path))
        .bearer_auth(token);
    if method == reqwest::Method::POST {
        req = req.json(&json!({}));
    }
    let r = req.send().await.unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

async fn whoami(s: &Setup, token: &str) -> (u16, Value) {
    request(
        s,
        reqwest::Method::POST,
        "/v1/tools/api.me.whoami/call",
        token,
    )
    .await
}

/// The link of a call paused for a grant.
fn link_of(paused: &Value) -> String {
    let wait = &paused["waits"][0];
    assert_eq!(wait["kind"], "input", "{paused}");
    assert_eq!(wait["mode"], "url", "{paused}");
    wait["url"].as_str().unwrap().to_string()
}

async fn open(url: &str) -> (u16, Value, Option<String>) {
    let r = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(url)
        .send()
        .await
        .unwrap();
    let location = r
        .headers()
        .get("location")
        .map(|l| l.to_str().unwrap().to_string());
    (
        r.status().as_u16(),
        r.json().await.unwrap_or(Value::Null),
        location,
    )
}

/// (A multi-threaded runtime: the API runs on it while the server starts.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_user_grants_access_once_and_calls_carry_their_own_token() {
    let Some(s) = setup("").await else { return };
    let alice = s.provider.token("alice-client", &s.resource).await;
    let bob = s.provider.token("bob-client", &s.resource).await;
    let issuer = s.provider.issuer.clone();

    // Alice's first call pauses with a link into Toolshed.
    let (status, paused) = whoami(&s, &alice).await;
    assert_eq!(status, 202, "{paused}");
    let link = link_of(&paused);
    assert!(
        link.starts_with(&format!("{}/connect/api?nonce=", s.resource)),
        "{link}"
    );

    // Following it signs alice in at the provider; the callback stores her grant and the
    // paused call completes with her own token.
    let mut browser = Browser::new();
    let back = browser.grant(&link, "alice", &s.callback).await;
    let (status, done, _) = open(&back).await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["outcome"]["status"], "completed", "{done}");
    assert_eq!(done["outcome"]["result"]["user"], format!("{issuer}#alice"));

    // The same answer again, a forged state, the used link: refused, nothing stored.
    let (status, replayed, _) = open(&back).await;
    assert_eq!(status, 400, "a replayed state: {replayed}");
    assert!(replayed["error"]["message"]
        .as_str()
        .unwrap()
        .contains("state"));
    let forged = format!("{}?state=forged&code=stolen", s.callback);
    assert_eq!(open(&forged).await.0, 400);
    assert_eq!(open(&link).await.0, 410, "a used link");
    let made_up = format!("{}/connect/api?nonce=made-up", s.resource);
    assert_eq!(open(&made_up).await.0, 400);

    // Bob's call to the same tool pauses for his own grant.
    let (status, paused) = whoami(&s, &bob).await;
    assert_eq!(status, 202, "{paused}");
    let bob_link = link_of(&paused);
    // The link's redirect goes to the provider with Toolshed's own redirect URI, whatever
    // the request adds.
    let (status, _, location) =
        open(&format!("{bob_link}&redirect_uri=http://evil.example/")).await;
    assert_eq!(status, 302);
    let location = location.unwrap();
    assert!(
        location.starts_with(&format!("{issuer}/auth?")),
        "{location}"
    );
    assert!(!location.contains("evil.example"), "{location}");
    // That opening used bob's link up: he calls again for a fresh one.
    let (_, paused) = whoami(&s, &bob).await;
    let bob_link = link_of(&paused);
    let back = Browser::new().grant(&bob_link, "bob", &s.callback).await;
    let (_, done, _) = open(&back).await;
    assert_eq!(
        done["outcome"]["result"]["user"],
        format!("{issuer}#bob"),
        "{done}"
    );

    // Each sees only their own grant, never a token.
    let (status, list) = request(&s, reqwest::Method::GET, "/v1/connections", &alice).await;
    assert_eq!(status, 200);
    let connections = list["connections"].as_array().unwrap();
    assert_eq!(connections.len(), 1, "{list}");
    assert_eq!(connections[0]["connection"], "api");
    assert!(!list.to_string().contains("token"), "{list}");
    let first_expiry = connections[0]["expiresAt"].as_i64().unwrap();

    // Alice's token lives 3 seconds: the next call refreshes it and completes.
    tokio::time::sleep(std::time::Duration::from_secs(4)).await;
    let (status, done) = whoami(&s, &alice).await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["result"]["user"], format!("{issuer}#alice"));
    let (_, list) = request(&s, reqwest::Method::GET, "/v1/connections", &alice).await;
    assert!(
        list["connections"][0]["expiresAt"].as_i64().unwrap() > first_expiry,
        "refreshed: {list}"
    );

    // Revoking makes alice's next call pause again; bob keeps his grant.
    let (status, _) = request(&s, reqwest::Method::DELETE, "/v1/connections/api", &alice).await;
    assert_eq!(status, 200);
    let (status, again) = request(&s, reqwest::Method::DELETE, "/v1/connections/api", &alice).await;
    assert_eq!(status, 404, "{again}");
    let (status, paused) = whoami(&s, &alice).await;
    assert_eq!(status, 202, "{paused}");
    let (status, done) = whoami(&s, &bob).await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["result"]["user"], format!("{issuer}#bob"));

    // The CLI shows the local principal its own grants: it has none.
    let (code, out) = crate::support::cli(s.dir.path(), Some(&s.config), &["connections", "list"]);
    assert_eq!((code, out), (0, json!({"connections": []})));
    let (code, _) = crate::support::cli(
        s.dir.path(),
        Some(&s.config),
        &["connections", "revoke", "api"],
    );
    assert_ne!(code, 0, "nothing to revoke");
}

/// `token_exchange`: each call carries the caller's own sign-in token exchanged (RFC 8693, a
/// grant the test provider registers with `registerGrantType`) for a token of the API, with
/// the same subject; a caller without a sign-in token (an API key) gets a clear error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_exchange_calls_the_api_as_the_signed_in_caller() {
    let extra = r#"
[[sources]]
kind = "openapi"
name = "exchanged"
spec = "{api}/openapi.json"
allow_private = true
auth = { type = "token_exchange", token_url = "{issuer}/token", client_id = "toolshed-exchange", client_secret = "toolshed-exchange-secret", resource = "{api}", scopes = ["api"] }
[[sources]]
kind = "openapi"
name = "leaky"
spec = "{api}/openapi.json"
allow_private = true
auth = { type = "token_exchange", token_url = "{api}/token", client_id = "x", resource = "{api}" }
[[principals]]
id = "bot"
roles = ["user"]
api_keys = ["k-bot"]
"#;
    let Some(s) = setup(extra).await else { return };
    let issuer = s.provider.issuer.clone();
    let call = "/v1/tools/exchanged.me.whoami/call";
    for user in ["alice", "bob"] {
        let token = s
            .provider
            .token(&format!("{user}-client"), &s.resource)
            .await;
        let (status, done) = request(&s, reqwest::Method::POST, call, &token).await;
        assert_eq!(status, 200, "{done}");
        assert_eq!(done["result"]["user"], format!("{issuer}#{user}-client"));
        // Again: from the cache, the same answer.
        let (status, again) = request(&s, reqwest::Method::POST, call, &token).await;
        assert_eq!((status, &again["result"]), (200, &done["result"]));
    }
    // A token endpoint that is not the sign-in token's issuer never receives it.
    let alice = s.provider.token("alice-client", &s.resource).await;
    let leaky = "/v1/tools/leaky.me.whoami/call";
    let (status, refused) = request(&s, reqwest::Method::POST, leaky, &alice).await;
    assert_ne!(status, 200, "{refused}");
    assert!(refused.to_string().contains("not its issuer"), "{refused}");
    let (status, refused) = request(&s, reqwest::Method::POST, call, "k-bot").await;
    assert_ne!(status, 200, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("sign-in token"), "{refused}");
}

/// Over MCP, a client that supports URL-mode elicitation (the Python `mcp` SDK,
/// `scripts/url_elicitation_client.py`) is asked to open the grant link; once the person went
/// through it, the same `tools/call` answers with the API's result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_client_is_asked_to_open_the_link_by_url_elicitation() {
    let Some(python) = crate::support::peers_python() else {
        eprintln!("skip: no Python with the mcp SDK under $MCP_TOOLS/venv (run scripts/peers.sh)");
        return;
    };
    let Some(s) = setup("").await else { return };
    let carol = s.provider.token("alice-client", &s.resource).await;
    let script = crate::support::repo_script("url_elicitation_client.py");
    let out = tokio::process::Command::new(&python)
        .arg(script)
        .arg(s.server.url("/mcp"))
        .arg(&carol)
        .arg("api__me__whoami")
        .arg("carol")
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{text}\n{}",
        &err[err.len().saturating_sub(2000)..]
    );
    let v: Value = serde_json::from_str(text.trim()).unwrap_or_else(|_| panic!("{text}"));
    assert_eq!(v["elicited"][0]["mode"], "url", "{v}");
    assert!(
        v["elicited"][0]["url"]
            .as_str()
            .unwrap()
            .contains("/connect/api?nonce="),
        "{v}"
    );
    // The grant is the signed-in caller's (alice-client), made by the person who signed in
    // at the provider (carol): the API sees carol's token.
    assert_eq!(v["result"]["status"], "completed", "{v}");
    assert_eq!(
        v["result"]["result"]["user"],
        format!("{}#carol", s.provider.issuer),
        "{v}"
    );
}

/// An `oauth2_user` source without endpoints takes them (and its scopes) from the document's
/// `authorizationCode` flow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documents_authorization_code_flow_supplies_the_endpoints() {
    let extra = r#"
[[sources]]
kind = "openapi"
name = "fromdoc"
spec = "{api}/openapi.json"
allow_private = true
auth = { type = "oauth2_user", client_id = "toolshed-connect", client_secret = "toolshed-connect-secret", resource = "{api}" }
"#;
    let Some(s) = setup(extra).await else { return };
    let alice = s.provider.token("alice-client", &s.resource).await;
    let call = "/v1/tools/fromdoc.me.whoami/call";
    let (status, paused) = request(&s, reqwest::Method::POST, call, &alice).await;
    assert_eq!(status, 202, "{paused}");
    let link = link_of(&paused);
    let (status, _, location) = open(&link).await;
    assert_eq!(status, 302);
    let location = location.unwrap();
    assert!(
        location.starts_with(&format!("{}/auth?", s.provider.issuer))
            && location.contains("scope=api"),
        "{location}"
    );
    // An answer naming another issuer (RFC 9207 mix-up) is refused, and uses the state up.
    let state = url::Url::parse(&location)
        .unwrap()
        .query_pairs()
        .find(|(k, _)| k == "state")
        .unwrap()
        .1
        .to_string();
    let mixed = format!(
        "{}?state={state}&code=x&iss=http%3A%2F%2Fevil.example",
        s.callback
    );
    let (status, refused, _) = open(&mixed).await;
    assert_eq!(status, 403, "{refused}");
    assert!(
        refused
            .to_string()
            .contains("not this connection's provider"),
        "{refused}"
    );
    assert_eq!(open(&mixed).await.0, 400, "the state was used up");
    let (_, paused) = request(&s, reqwest::Method::POST, call, &alice).await;
    let back = Browser::new()
        .grant(&link_of(&paused), "dora", &s.callback)
        .await;
    let (status, done, _) = open(&back).await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(
        done["outcome"]["result"]["user"],
        format!("{}#dora", s.provider.issuer)
    );
}

/// A script's call that needs a grant pauses the script; the grant continues it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_pauses_for_the_grant_and_goes_on() {
    let Some(s) = setup("").await else { return };
    let alice = s.provider.token("alice-client", &s.resource).await;
    let r = reqwest::Client::new()
        .post(s.server.url("/v1/scripts"))
        .bearer_auth(&alice)
        .json(&json!({"script": "const me = await tools.api.me.whoami({}); return {me};"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    let paused: Value = r.json().await.unwrap();
    let back = Browser::new()
        .grant(&link_of(&paused), "erin", &s.callback)
        .await;
    let (status, done, _) = open(&back).await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["outcome"]["status"], "completed", "{done}");
    assert_eq!(
        done["outcome"]["result"]["me"]["user"],
        format!("{}#erin", s.provider.issuer)
    );
}

/// A source added at runtime (`toolshed sources add ... --oauth2-user`, endpoints from its
/// document) gets its connection while the server runs: its first call pauses with a link
/// that completes the call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_added_at_runtime_gets_its_connection() {
    let Some(s) = setup("").await else { return };
    let api = {
        // The API's base URL: where `api`'s document lives.
        let config = std::fs::read_to_string(&s.config).unwrap();
        let line = config.lines().find(|l| l.starts_with("spec = ")).unwrap();
        line.trim_start_matches("spec = \"")
            .trim_end_matches("/openapi.json\"")
            .to_string()
    };
    let spec = format!("{api}/openapi.json");
    let (code, out) = crate::support::cli(
        s.dir.path(),
        Some(&s.config),
        &[
            "sources",
            "add",
            "openapi",
            "later",
            "--spec",
            &spec,
            "--allow-private",
            "--oauth2-user",
            "--oauth2-client-id",
            "toolshed-connect",
            "--oauth2-client-secret",
            "toolshed-connect-secret",
            "--oauth2-resource",
            &api,
        ],
    );
    assert_eq!(code, 0, "{out}");
    let alice = s.provider.token("alice-client", &s.resource).await;
    // The server's store poll picks the source (and its connection) up.
    let mut paused = Value::Null;
    for _ in 0..50 {
        let (status, v) = request(
            &s,
            reqwest::Method::POST,
            "/v1/tools/later.me.whoami/call",
            &alice,
        )
        .await;
        if status == 202 {
            paused = v;
            break;
        }
        paused = json!({"last": status, "answer": v});
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let back = Browser::new()
        .grant(&link_of(&paused), "fred", &s.callback)
        .await;
    let (status, done, _) = open(&back).await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(
        done["outcome"]["result"]["user"],
        format!("{}#fred", s.provider.issuer)
    );
}
