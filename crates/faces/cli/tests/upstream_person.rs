//! An upstream MCP server whose OAuth needs a person (`toolshed sources add mcp --oauth
//! authorization-code`, stored without an import): the upstream is a second `toolshed serve` that takes bearer tokens of a
//! real OpenID provider (`oidc-provider`, see `oauth.rs`), whose sign-in and consent pages a
//! person must pass. Toolshed registers itself at the provider, reports the link in the
//! source's error, and once the person approved (the pages driven over HTTP), its callback gets
//! the token and the source is loaded: the upstream's tools are in the catalog and answer as
//! that person. After a restart the kept token (sealed in the store) connects the upstream
//! without asking anyone.

use serde_json::Value;

use crate::connections::Browser;
use crate::oauth::Provider;
use crate::support::{cli, free_port, Server};

/// The link in the startup line that reports the source waiting for a person.
fn link_in(lines: &[String]) -> String {
    let line = lines
        .iter()
        .find(|l| l.contains("needs a person") && l.contains("(open "))
        .unwrap_or_else(|| panic!("no source waits for a person: {lines:#?}"));
    let start = line.find("(open ").unwrap() + "(open ".len();
    let end = line[start..].find(')').unwrap() + start;
    line[start..end].to_string()
}

async fn get(url: &str, key: Option<&str>) -> (u16, Value) {
    let mut req = reqwest::Client::new().get(url);
    if let Some(k) = key {
        req = req.bearer_auth(k);
    }
    let r = req.send().await.unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

/// The path of a tool of the upstream (source `b`) in Toolshed's catalog now.
async fn upstream_tool_now(front: &Server) -> Option<String> {
    let (status, found) = get(&front.url("/v1/tools?query=list%20tables"), Some("k-ops")).await;
    assert_eq!(status, 200, "{found}");
    found["hits"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|h| h["path"].as_str())
        .find(|p| p.starts_with("b."))
        .map(str::to_string)
}

/// [`upstream_tool_now`], waiting up to 10 s for the source to load.
async fn upstream_tool(front: &Server) -> Option<String> {
    for _ in 0..100 {
        if let Some(p) = upstream_tool_now(front).await {
            return Some(p);
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_authorizes_an_upstream_through_the_callback() {
    let back_port = free_port();
    let resource = format!("http://127.0.0.1:{back_port}");
    let Some(provider) = Provider::start(&resource) else {
        return;
    };
    let issuer = &provider.issuer;
    // The upstream: Toolshed serving its tools directly, to bearer tokens of the provider.
    let back_dir = tempfile::tempdir().unwrap();
    let back_config = back_dir.path().join("toolshed.toml");
    std::fs::write(
        &back_config,
        format!(
            r#"
[[roles]]
id = "reader"
patterns = ["tables.list"]
[oauth]
resource = "{resource}"
scopes = ["toolshed"]
default_roles = ["reader"]
[[oauth.issuers]]
issuer = "{issuer}"
allow_private = true
"#
        ),
    )
    .unwrap();
    let _back = Server::start_on(
        back_dir.path(),
        Some(&back_config),
        &["--direct"],
        back_port,
    );

    // Toolshed in front, with the upstream as source `b`.
    let front_port = free_port();
    let public = format!("http://127.0.0.1:{front_port}");
    let callback = format!("{public}/connect/upstreams/callback");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("toolshed.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[http]
public_url = "{public}"
[[roles]]
id = "ops"
patterns = ["**"]
decide = ["**"]
[[roles]]
id = "viewer"
patterns = ["**"]
[[principals]]
id = "ops"
roles = ["ops"]
api_keys = ["k-ops"]
[[principals]]
id = "viewer"
roles = ["viewer"]
api_keys = ["k-viewer"]
"#
        ),
    )
    .unwrap();
    // Added at runtime: stored without an import (nobody is there to approve yet).
    let upstream = format!("{resource}/mcp");
    let (code, added) = cli(
        dir.path(),
        Some(&config),
        &[
            "sources",
            "add",
            "mcp",
            "b",
            "--url",
            &upstream,
            "--allow-private",
            "--oauth",
            "authorization-code",
        ],
    );
    assert_eq!(code, 0, "{added}");
    assert_eq!(added["stored"], true, "{added}");
    assert!(
        added["warnings"][0]
            .as_str()
            .is_some_and(|w| w.contains("a person authorizes")),
        "{added}"
    );
    // Refreshing it here imports nothing and fails nothing: the server imports it.
    let (code, refreshed) = cli(dir.path(), Some(&config), &["sources", "refresh", "b"]);
    assert_eq!(code, 0, "{refreshed}");
    assert!(
        refreshed["sources"][0]["deferred"]
            .as_str()
            .is_some_and(|d| d.contains("toolshed serve")),
        "{refreshed}"
    );
    let front = Server::start_on(dir.path(), Some(&config), &[], front_port);
    let link = link_in(&front.startup);
    assert!(link.starts_with(issuer.as_str()), "{link}");
    assert_eq!(
        upstream_tool_now(&front).await,
        None,
        "nothing of the upstream before the person approved"
    );

    // Those who decide the source's calls find the link over HTTP too; others do not.
    let pending = front.url("/v1/sources/authorizations");
    let (status, listed) = get(&pending, Some("k-ops")).await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed["pending"][0]["source"], "b", "{listed}");
    assert_eq!(listed["pending"][0]["url"], link.as_str(), "{listed}");
    assert!(
        listed["pending"][0]["expires_at_ms"].as_i64() > listed["pending"][0]["since_ms"].as_i64()
    );
    let (status, hidden) = get(&pending, Some("k-viewer")).await;
    assert_eq!((status, hidden), (200, serde_json::json!({"pending": []})));
    assert_eq!(get(&pending, None).await.0, 401);

    // The person signs in and consents; the browser comes back to Toolshed's callback.
    let back = Browser::new().grant(&link, "carol", &callback).await;
    let (status, body) = get(&back, None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["authorized"], true, "{body}");
    assert_eq!(body["source"], "b", "{body}");
    // A callback is used once.
    let (status, body) = get(&back, None).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "authorization_failed", "{body}");

    // The source is loaded with the person's token: carol's view of the upstream.
    let path = upstream_tool(&front)
        .await
        .expect("the upstream's tools in the catalog after the approval");
    call_completes(&front, &path).await;
    let (_, listed) = get(&pending, Some("k-ops")).await;
    assert_eq!(
        listed,
        serde_json::json!({"pending": []}),
        "nothing waits any more"
    );

    // A restart: the token carol approved was kept, sealed in the store, and the upstream
    // connects without asking anyone.
    drop(front);
    let front = Server::start_on(dir.path(), Some(&config), &[], front_port);
    assert!(
        !front.startup.iter().any(|l| l.contains("needs a person")),
        "{:#?}",
        front.startup
    );
    let path = upstream_tool(&front)
        .await
        .expect("the upstream's tools in the catalog after a restart");
    call_completes(&front, &path).await;
    // Sealed at rest: no token document in clear in the data directory.
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap_or_default();
        let text = String::from_utf8_lossy(&bytes);
        assert!(!text.contains("access_token"), "a token in clear at rest");
    }
}

/// Calls the upstream's tool `path` through the front and checks it completed.
async fn call_completes(front: &Server, path: &str) {
    let r = reqwest::Client::new()
        .post(front.url(&format!("/v1/tools/{path}/call")))
        .bearer_auth("k-ops")
        .json(&serde_json::json!({}))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let body: Value = r.json().await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "completed", "{body}");
}
