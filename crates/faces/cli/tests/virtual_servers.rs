//! Virtual servers (`[[servers]]`) served by `toolshed serve`: an MCP client pointed at
//! `/mcp/servers/{name}` sees the upstream as it is (original names, titles, schemas, `_meta`,
//! every content kind of a result, `isError`) while the caller's role still hides tools and
//! calls still take the engine's path (validation, call rules, approvals).

use std::path::{Path, PathBuf};

use std::sync::{Arc, Mutex};

use rmcp::model::{CallToolRequestParams, CallToolResult, ProgressNotificationParam, Tool};
use rmcp::service::NotificationContext;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::ServiceExt;
use rmcp::{ClientHandler, RoleClient};
use serde_json::{json, Value};

use crate::support::{cli, test_upstream, Client, Server, BIN};

fn config(dir: &Path) -> PathBuf {
    let f = dir.join("toolshed.toml");
    std::fs::write(
        &f,
        format!(
            r#"
# The CLI and stdio act as admin unless TOOLSHED_PRINCIPAL says otherwise.
principal = "admin"

[[sources]]
kind = "mcp"
name = "up"
command = "{}"

# Reads and writes of the test upstream run without confirmation; tables' writes keep the
# default (confirm).
[[roles]]
id = "viewer"
patterns = ["up.echo", "up.add", "up.media", "up.fail", "up.get_status_v2", "tables.**"]
allow = ["up.**"]
[[roles]]
id = "admin"
patterns = ["*"]
allow = ["up.**"]
[[principals]]
id = "alice"
roles = ["viewer"]
api_keys = ["k-alice"]
[[principals]]
id = "admin"
roles = ["admin"]
api_keys = ["k-admin"]

[[servers]]
name = "up"
description = "The test upstream, unchanged."
tools = ["up.**"]
names = "original"

[[servers]]
name = "work"
tools = ["up.echo", "tables.**"]
"#,
            test_upstream().display()
        ),
    )
    .unwrap();
    f
}

async fn connect(server: &Server, name: &str, key: &str) -> Client {
    let config =
        StreamableHttpClientTransportConfig::with_uri(server.url(&format!("/mcp/servers/{name}")))
            .auth_header(key.to_string());
    let transport = StreamableHttpClientTransport::from_config(config);
    ().serve(transport)
        .await
        .expect("initialize a virtual server")
}

async fn names(client: &Client) -> Vec<String> {
    let mut names: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    names.sort();
    names
}

async fn call(
    client: &rmcp::Peer<RoleClient>,
    name: &str,
    args: Value,
) -> Result<CallToolResult, String> {
    let params = CallToolRequestParams::new(name.to_string())
        .with_arguments(args.as_object().cloned().unwrap_or_default());
    client.call_tool(params).await.map_err(|e| e.to_string())
}

fn by_name(mut tools: Vec<Tool>) -> Vec<Value> {
    tools.sort_by(|a, b| a.name.cmp(&b.name));
    tools
        .iter()
        .map(|t| serde_json::to_value(t).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_virtual_server_looks_like_its_upstream_under_policy() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let server = Server::start(dir.path(), Some(&cfg), &[]);

    // The upstream itself, for comparison.
    let direct =
        ().serve(TokioChildProcess::new(tokio::process::Command::new(test_upstream())).unwrap())
            .await
            .unwrap();

    // With every tool visible, the list is the upstream's own, field for field.
    let admin = connect(&server, "up", "k-admin").await;
    let info = admin.peer_info().unwrap();
    assert_eq!(info.server_info.as_ref().unwrap().name, "up");
    assert_eq!(
        info.instructions.as_deref(),
        Some("The test upstream, unchanged.")
    );
    let through = by_name(admin.list_all_tools().await.unwrap());
    let upstream = by_name(direct.list_all_tools().await.unwrap());
    assert_eq!(through, upstream);
    assert!(through.iter().all(|t| t["name"] != "run_script"));

    // Results pass through unchanged: every content kind, structured content, _meta.
    for (name, args) in [
        ("media", json!({})),
        ("getStatus.v2", json!({})),
        ("add", json!({"a": 2, "b": 3})),
    ] {
        let a = serde_json::to_value(call(&admin, name, args.clone()).await.unwrap()).unwrap();
        let b = serde_json::to_value(call(&direct, name, args).await.unwrap()).unwrap();
        assert_eq!(a, b, "{name}");
    }
    let media = serde_json::to_value(call(&admin, "media", json!({})).await.unwrap()).unwrap();
    let kinds: Vec<&str> = media["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["text", "image", "audio", "resource", "resource_link"]
    );
    assert_eq!(media["_meta"]["example.com/trace"], "t-42");

    // An upstream error stays a tool error with the upstream's words.
    let failed = call(&admin, "fail", json!({})).await.unwrap();
    assert_eq!(failed.is_error, Some(true));
    assert_eq!(
        serde_json::to_value(&failed).unwrap()["content"][0]["text"],
        "the widget is broken"
    );

    // The role narrows the list, and a hidden tool answers like a missing one.
    let alice = connect(&server, "up", "k-alice").await;
    assert_eq!(
        names(&alice).await,
        ["add", "echo", "fail", "getStatus.v2", "media"]
    );
    let hidden = call(&alice, "delete_everything", json!({}))
        .await
        .unwrap_err();
    assert!(
        hidden.contains("unknown tool 'delete_everything'"),
        "{hidden}"
    );
    let missing = call(&alice, "no_such_tool", json!({})).await.unwrap_err();
    assert!(missing.contains("unknown tool 'no_such_tool'"), "{missing}");

    // Arguments are validated by the engine before the upstream sees them.
    let bad = call(&alice, "echo", json!({})).await.unwrap();
    assert_eq!(bad.is_error, Some(true));
    let text = serde_json::to_string(&bad).unwrap();
    assert!(
        text.contains("invalid_arguments") && text.contains("text"),
        "{text}"
    );

    // A catalog-named server mixes sources; a write the policy wants confirmed pauses.
    let work = connect(&server, "work", "k-alice").await;
    let listed = names(&work).await;
    assert!(listed.contains(&"up.echo".to_string()), "{listed:?}");
    assert!(listed.contains(&"tables.create".to_string()), "{listed:?}");
    assert!(!listed.iter().any(|n| n == "up.add"), "{listed:?}");
    let echoed = call(&work, "up.echo", json!({"text": "hi"})).await.unwrap();
    assert_eq!(
        serde_json::to_value(&echoed).unwrap()["content"][0]["text"],
        "hi"
    );
    let created = call(
        &work,
        "tables.create",
        json!({"name": "pets", "columns": [{"name": "name", "type": "string"}]}),
    )
    .await
    .unwrap();
    let text = serde_json::to_string(&created).unwrap();
    assert!(
        text.contains("paused") && text.contains("executionId"),
        "{text}"
    );
    let (_, listed) = cli(dir.path(), Some(&cfg), &["call", "tables.list", "{}"]);
    assert!(
        !listed.to_string().contains("pets"),
        "the paused create must not have run: {listed}"
    );

    // No such server: nothing is served there.
    let status = reqwest::Client::new()
        .post(server.url("/mcp/servers/nope"))
        .header("authorization", "Bearer k-alice")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#)
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 404);
    let _ = direct.cancel().await;
}

/// A client that keeps the progress notifications it receives.
#[derive(Clone, Default)]
struct Progressive {
    seen: Arc<Mutex<Vec<ProgressNotificationParam>>>,
}

impl ClientHandler for Progressive {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.seen.lock().unwrap().push(params);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstreams_progress_reaches_the_client_under_its_own_token() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let server = Server::start(dir.path(), Some(&cfg), &[]);
    let handler = Progressive::default();
    let config = StreamableHttpClientTransportConfig::with_uri(server.url("/mcp/servers/up"))
        .auth_header("k-admin".to_string());
    let client = handler
        .clone()
        .serve(StreamableHttpClientTransport::from_config(config))
        .await
        .unwrap();
    // rmcp's client gives every request a progress token of its own.
    let r = client
        .call_tool(CallToolRequestParams::new("steps"))
        .await
        .unwrap();
    assert_eq!(
        serde_json::to_value(&r).unwrap()["content"][0]["text"],
        "3 steps"
    );
    // Notifications may trail the answer by a moment.
    for _ in 0..50 {
        if handler.seen.lock().unwrap().len() >= 3 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let seen = handler.seen.lock().unwrap().clone();
    let mut steps: Vec<(f64, Option<f64>, Option<String>)> = seen
        .iter()
        .map(|p| (p.progress, p.total, p.message.clone()))
        .collect();
    // Each report as the upstream sent it, none twice. A report the upstream's client delivers
    // after a later one, under load, is not relayed (MCP makes progress increase), and the
    // last one always is. (This test's own client, rmcp, also handles each notification in a
    // task of its own, so the order it sees them in is not the wire's: they are sorted here.)
    steps.sort_by(|a, b| a.0.total_cmp(&b.0));
    assert!(steps.len() >= 2, "{seen:?}");
    assert!(steps.windows(2).all(|w| w[0].0 < w[1].0), "{seen:?}");
    assert_eq!(steps.last().unwrap().0, 3.0, "{seen:?}");
    for (i, total, message) in &steps {
        assert_eq!(
            (*total, message.clone()),
            (Some(3.0), Some(format!("step {i} of 3"))),
            "{seen:?}"
        );
    }
    // Each under the token of the client's own request (rmcp's client numbers its requests'
    // tokens itself).
    assert!(seen
        .iter()
        .all(|p| p.progress_token == seen[0].progress_token));
    let _ = client.cancel().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_virtual_server_over_stdio_and_clear_config_errors() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let mut cmd = tokio::process::Command::new(BIN);
    cmd.arg("--data-dir")
        .arg(dir.path())
        .arg("--config")
        .arg(&cfg)
        .args(["serve", "--stdio", "--server", "up"])
        .env("TOOLSHED_PRINCIPAL", "alice")
        .stderr(std::process::Stdio::null());
    let client = ().serve(TokioChildProcess::new(cmd).unwrap()).await.unwrap();
    assert_eq!(
        names(&client).await,
        ["add", "echo", "fail", "getStatus.v2", "media"]
    );
    let r = call(&client, "echo", json!({"text": "over stdio"}))
        .await
        .unwrap();
    assert_eq!(
        serde_json::to_value(&r).unwrap()["content"][0]["text"],
        "over stdio"
    );
    let _ = client.cancel().await;

    // An unknown server name is refused with the configured ones listed.
    let out = std::process::Command::new(BIN)
        .arg("--data-dir")
        .arg(dir.path())
        .arg("--config")
        .arg(&cfg)
        .args(["serve", "--stdio", "--server", "nope"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("no virtual server 'nope'") && err.contains("\"work\""),
        "{err}"
    );

    // Bad definitions stop the configuration from loading, naming the entry and the reason.
    for (servers, expected) in [
        (
            "[[servers]]\nname = \"Up\"\ntools = [\"up.**\"]\n",
            "[[servers]] entry #1: server name 'Up' is not usable",
        ),
        (
            "[[servers]]\nname = \"mix\"\nnames = \"original\"\ntools = [\"up.**\", \"tables.**\"]\n",
            "'up' and 'tables' are two",
        ),
        (
            "[[servers]]\nname = \"a\"\ntools = [\"up.**\"]\n[[servers]]\nname = \"a\"\ntools = [\"up.*\"]\n",
            "[[servers]] entry #2: server 'a' is defined twice",
        ),
        (
            "[[servers]]\nname = \"a\"\ntools = [\"up.**\"]\nnames = \"upstream\"\n",
            "unknown variant: found `upstream`",
        ),
    ] {
        let f = dir.path().join("bad.toml");
        std::fs::write(&f, servers).unwrap();
        let (code, v) = cli(dir.path(), Some(&f), &["search", "echo"]);
        assert_ne!(code, 0, "{servers}");
        assert!(v.to_string().contains(expected), "{servers}: {v}");
    }
}

/// A client's `notifications/cancelled` for a call on a virtual server reaches the upstream:
/// the test upstream's `sleep` sees its own request cancelled and leaves a marker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clients_cancellation_reaches_the_upstream() {
    use rmcp::model::{CallToolRequest, ClientRequest};
    use rmcp::service::PeerRequestOptions;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let server = Server::start(dir.path(), Some(&cfg), &[]);
    let config = StreamableHttpClientTransportConfig::with_uri(server.url("/mcp/servers/up"))
        .auth_header("k-admin".to_string());
    let client = ().serve(StreamableHttpClientTransport::from_config(config)).await.unwrap();
    let marker = dir.path().join("cancelled");
    let args = json!({"ms": 30_000, "cancelled_marker": marker});
    let params =
        CallToolRequestParams::new("sleep").with_arguments(args.as_object().cloned().unwrap());
    let started = std::time::Instant::now();
    let handle = client
        .peer()
        .send_request_with_option(
            ClientRequest::CallToolRequest(CallToolRequest::new(params)),
            PeerRequestOptions::no_options(),
        )
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    handle.cancel(Some("changed my mind".into())).await.unwrap();
    for _ in 0..100 {
        if marker.exists() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(
        std::fs::read_to_string(&marker).ok().as_deref(),
        Some("cancelled"),
        "the upstream never heard of the cancellation"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    let _ = client.cancel().await;
}

/// The names a session of `/mcp/servers/{name}` lists, for the local principal (no key). A
/// session that opens while the definition is being replaced is closed with the old one: it
/// is opened again, as a client would.
async fn listed_at(server: &Server, name: &str) -> Vec<String> {
    let mut last = String::new();
    for _ in 0..3 {
        let config = StreamableHttpClientTransportConfig::with_uri(
            server.url(&format!("/mcp/servers/{name}")),
        );
        let client = match ().serve(StreamableHttpClientTransport::from_config(config)).await {
            Ok(c) => c,
            Err(e) => {
                last = format!("{e:?}");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let tools = client.list_all_tools().await;
        let _ = client.cancel().await;
        match tools {
            Ok(tools) => return tools.into_iter().map(|t| t.name.to_string()).collect(),
            Err(e) => last = format!("{e:?}"),
        }
    }
    panic!("no session of /mcp/servers/{name} listed its tools: {last}")
}

async fn post(url: String, body: Value) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(url)
        .json(&body)
        .send()
        .await
        .unwrap();
    let s = r.status().as_u16();
    (s, r.json().await.unwrap_or(Value::Null))
}

/// Waits (up to 10 s) until `/mcp/servers/{name}` answers with `status` to a plain POST.
async fn until_status(server: &Server, name: &str, status: u16) {
    for _ in 0..100 {
        let r = reqwest::Client::new()
            .post(server.url(&format!("/mcp/servers/{name}")))
            .header("accept", "application/json, text/event-stream")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
            .send()
            .await
            .unwrap();
        if (r.status().as_u16() == 404) == (status == 404) {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("/mcp/servers/{name} did not become {status}");
}

#[tokio::test]
async fn a_server_defined_at_runtime_is_served_changed_kept_and_removed() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = crate::support::allow_writes_config(dir.path());
    let server = Server::start(dir.path(), Some(&cfg), &[]);
    // A bad definition is refused with its reason; nothing is served.
    let (s, v) = post(
        server.url("/v1/tools/servers.put/call"),
        json!({"name": "rows", "tools": ["tables.rows.*", "n8n.**"], "names": "original"}),
    )
    .await;
    assert_eq!(s, 400, "{v}");
    assert!(v.to_string().contains("one source"), "{v}");
    let (s, v) = post(
        server.url("/v1/tools/servers.put/call"),
        json!({"name": "rows", "description": "Rows only.", "tools": ["tables.rows.*"]}),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    until_status(&server, "rows", 200).await;
    let mut names = listed_at(&server, "rows").await;
    names.sort();
    assert!(
        !names.is_empty() && names.iter().all(|n| n.starts_with("tables.rows.")),
        "{names:?}"
    );
    assert!(
        names.contains(&"tables.rows.query".to_string()),
        "{names:?}"
    );
    let (_, listed) = post(server.url("/v1/tools/servers.list/call"), json!({})).await;
    assert_eq!(
        listed["result"]["servers"][0]["source"], "store",
        "{listed}"
    );

    // Replaced: new sessions see the new definition.
    let (s, v) = post(
        server.url("/v1/tools/servers.put/call"),
        json!({"name": "rows", "tools": ["tables.list"]}),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    let mut seen = vec![];
    for _ in 0..50 {
        seen = listed_at(&server, "rows").await;
        if seen == ["tables.list"] {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert_eq!(seen, ["tables.list"]);

    // Kept across a restart.
    server.kill();
    let server = Server::start(dir.path(), Some(&cfg), &[]);
    assert_eq!(listed_at(&server, "rows").await, ["tables.list"]);

    // Deleting is destructive: it pauses for approval, then the endpoint is gone.
    let (s, v) = post(
        server.url("/v1/tools/servers.delete/call"),
        json!({"name": "rows"}),
    )
    .await;
    assert_eq!(s, 202, "{v}");
    let id = v["executionId"].as_str().unwrap();
    let (s, v) = post(
        server.url(&format!("/v1/executions/{id}/resume")),
        json!({"decision": "approve"}),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    until_status(&server, "rows", 404).await;
    let (s, v) = post(
        server.url("/v1/tools/servers.delete/call"),
        json!({"name": "rows"}),
    )
    .await;
    assert!(s == 202 || s == 404, "{s} {v}");
}

/// (level, logger, data) of a log message received.
type LogSeen = (String, Option<String>, Value);

#[derive(Clone, Default)]
struct Listener {
    seen: Arc<Mutex<Vec<LogSeen>>>,
}

impl ClientHandler for Listener {
    #[allow(deprecated)]
    async fn on_logging_message(
        &self,
        params: rmcp::model::LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let level = serde_json::to_value(params.level)
            .unwrap()
            .as_str()
            .unwrap()
            .to_string();
        self.seen
            .lock()
            .unwrap()
            .push((level, params.logger, params.data));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(deprecated)]
async fn an_upstreams_log_messages_reach_the_session_at_its_own_level() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let server = Server::start(dir.path(), Some(&cfg), &[]);
    let connect = |handler: Listener| {
        let config = StreamableHttpClientTransportConfig::with_uri(server.url("/mcp/servers/up"))
            .auth_header("k-admin".to_string());
        handler.serve(StreamableHttpClientTransport::from_config(config))
    };
    let (one, two) = (Listener::default(), Listener::default());
    let a = connect(one.clone()).await.unwrap();
    let b = connect(two.clone()).await.unwrap();
    // Session b only wants errors and worse.
    b.set_level(rmcp::model::SetLevelRequestParams::new(
        rmcp::model::LoggingLevel::Error,
    ))
    .await
    .unwrap();
    let log = |levels: Value| {
        CallToolRequestParams::new("log")
            .with_arguments(json!({ "levels": levels }).as_object().unwrap().clone())
    };
    // Messages outside a request travel on each session's own event stream, which the client
    // opens after the handshake: wait until both sessions hear an `alert`.
    for _ in 0..100 {
        a.call_tool(log(json!(["alert"]))).await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        if !one.seen.lock().unwrap().is_empty() && !two.seen.lock().unwrap().is_empty() {
            break;
        }
    }
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    one.seen.lock().unwrap().clear();
    two.seen.lock().unwrap().clear();
    let r = a
        .call_tool(log(json!(["debug", "info", "error", "critical"])))
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(false), "{r:?}");
    let wait_for = |l: &Listener, n: usize| {
        let seen = l.seen.clone();
        async move {
            for _ in 0..100 {
                if seen.lock().unwrap().len() >= n {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            seen.lock().unwrap().clone()
        }
    };
    // (The upstream client handles each notification in a task of its own, so their order may
    // change on the way.)
    let got = wait_for(&one, 4).await;
    let mut levels: Vec<&str> = got.iter().map(|(l, _, _)| l.as_str()).collect();
    levels.sort();
    assert_eq!(levels, ["critical", "debug", "error", "info"], "{got:?}");
    let error = got.iter().find(|(l, _, _)| l == "error").unwrap();
    assert_eq!(error.1.as_deref(), Some("test"));
    assert_eq!(error.2, json!("a error message"));
    let got = wait_for(&two, 2).await;
    let mut levels: Vec<&str> = got.iter().map(|(l, _, _)| l.as_str()).collect();
    levels.sort();
    assert_eq!(
        levels,
        ["critical", "error"],
        "the other session's level: {got:?}"
    );
    let _ = a.cancel().await;
    let _ = b.cancel().await;
}

/// A client that takes elicitation and sampling: it answers "Ada" and "forty-two".
#[derive(Clone, Default)]
struct Answering;

impl ClientHandler for Answering {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        let capabilities =
            serde_json::from_value(json!({"elicitation": {"form": {}}, "sampling": {}})).unwrap();
        rmcp::model::ClientConfig::new(
            capabilities,
            rmcp::model::Implementation::new("answering", "1"),
        )
    }

    async fn create_elicitation(
        &self,
        request: rmcp::model::ElicitRequestParams,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        let asked = serde_json::to_value(&request).unwrap();
        assert_eq!(asked["message"], "What is your name?", "{asked}");
        Ok(
            serde_json::from_value(json!({"action": "accept", "content": {"name": "Ada"}}))
                .unwrap(),
        )
    }

    #[allow(deprecated)]
    async fn create_message(
        &self,
        params: rmcp::model::CreateMessageRequestParams,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::CreateMessageResult, rmcp::ErrorData> {
        let asked = serde_json::to_value(&params).unwrap();
        assert_eq!(
            asked["messages"][0]["content"]["text"],
            "what is six times seven?"
        );
        Ok(serde_json::from_value(json!({
            "role": "assistant",
            "content": {"type": "text", "text": "forty-two"},
            "model": "scripted"
        }))
        .unwrap())
    }
}

fn text_of(r: &CallToolResult) -> String {
    serde_json::to_value(r).unwrap()["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstreams_elicitation_and_sampling_reach_the_client_of_the_call() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let server = Server::start(dir.path(), Some(&cfg), &[]);
    let config = StreamableHttpClientTransportConfig::with_uri(server.url("/mcp/servers/up"))
        .auth_header("k-admin".to_string());
    let answering = Answering
        .serve(StreamableHttpClientTransport::from_config(config))
        .await
        .unwrap();
    let r = call(&answering, "ask", json!({})).await.unwrap();
    let answer: Value = serde_json::from_str(&text_of(&r)).unwrap();
    assert_eq!(answer["action"], "accept", "{r:?}");
    assert_eq!(answer["content"]["name"], "Ada", "{r:?}");
    let r = call(
        &answering,
        "sample",
        json!({"prompt": "what is six times seven?"}),
    )
    .await
    .unwrap();
    assert_eq!(text_of(&r), "the model said: forty-two", "{r:?}");

    // A client that declared neither is not asked: the question waits as an `input` wait that
    // another face answers (here the HTTP API); sampling, which no person can answer, is
    // refused and the upstream hears why.
    let plain = connect(&server, "up", "k-admin").await;
    let asking = tokio::spawn({
        let plain = plain.peer().clone();
        async move { call(&plain, "ask", json!({})).await }
    });
    let question = answer_waiting_question(&server, json!({"name": "Grace"})).await;
    assert_eq!(question["message"], "What is your name?", "{question}");
    let r = asking.await.unwrap().unwrap();
    let answer: Value = serde_json::from_str(&text_of(&r)).unwrap_or_else(|_| panic!("{r:?}"));
    assert_eq!(answer["content"]["name"], "Grace", "{r:?}");
    let r = call(&plain, "sample", json!({"prompt": "x"}))
        .await
        .unwrap();
    assert!(text_of(&r).contains("'sampling' capability"), "{r:?}");

    // While a call of another client is in flight on the same upstream, the question could be
    // either client's: it goes to neither.
    let slow = tokio::spawn({
        let plain = plain.peer().clone();
        async move { call(&plain, "sleep", json!({"ms": 1500})).await }
    });
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    let r = call(&answering, "ask", json!({})).await.unwrap();
    assert!(text_of(&r).contains("calls of different clients"), "{r:?}");
    slow.await.unwrap().unwrap();
    // Alone again, the client is asked.
    let r = call(&answering, "ask", json!({})).await.unwrap();
    assert!(text_of(&r).contains("Ada"), "{r:?}");
    let _ = answering.cancel().await;
    let _ = plain.cancel().await;
}

/// A client that records the resource updates it hears of.
#[derive(Clone, Default)]
struct Watching {
    updated: Arc<Mutex<Vec<String>>>,
}

impl ClientHandler for Watching {
    async fn on_resource_updated(
        &self,
        params: rmcp::model::ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.updated.lock().unwrap().push(params.uri);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(deprecated)] // resources/subscribe: deprecated by 2026-07-28, still the older revisions'
async fn subscriptions_and_completions_pass_through_under_policy() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("toolshed.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"
[[sources]]
kind = "mcp"
name = "fx"
command = "{}"

[[servers]]
name = "fx"
names = "original"
tools = ["fx.**"]
resources = ["fx.**"]
prompts = ["fx.**"]

[[roles]]
id = "all"
patterns = ["*"]
[[roles]]
id = "some"
patterns = ["fx.static_text", "fx.watched_resource", "fx.template", "fx.test_*"]
deny = ["fx.template"]
[[principals]]
id = "admin"
roles = ["all"]
api_keys = ["k-admin"]
[[principals]]
id = "bob"
roles = ["some"]
api_keys = ["k-bob"]
"#,
            crate::support::conformance_upstream().display()
        ),
    )
    .unwrap();
    let server = Server::start(dir.path(), Some(&cfg), &[]);
    let connect_as = |key: &str, handler: Watching| {
        let config = StreamableHttpClientTransportConfig::with_uri(server.url("/mcp/servers/fx"))
            .auth_header(key.to_string());
        handler.serve(StreamableHttpClientTransport::from_config(config))
    };
    let watching = Watching::default();
    let admin = connect_as("k-admin", watching.clone()).await.unwrap();
    let bob = connect_as("k-bob", Watching::default()).await.unwrap();

    // A subscription hears of its resource's updates, until it ends.
    let watched = "test://watched-resource";
    admin
        .subscribe(rmcp::model::SubscribeRequestParams::new(watched))
        .await
        .unwrap();
    for _ in 0..100 {
        if !watching.updated.lock().unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(
        watching.updated.lock().unwrap().first().map(String::as_str),
        Some(watched)
    );
    admin
        .unsubscribe(rmcp::model::UnsubscribeRequestParams::new(watched))
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let heard = watching.updated.lock().unwrap().len();
    tokio::time::sleep(std::time::Duration::from_millis(3500)).await;
    assert_eq!(
        watching.updated.lock().unwrap().len(),
        heard,
        "updates after unsubscribing"
    );

    // Completion of a prompt's argument and of a template's variable, asked of the upstream.
    let complete =
        |r: Value| serde_json::from_value::<rmcp::model::CompleteRequestParams>(r).unwrap();
    let got = admin
        .complete(complete(json!({
            "ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
            "argument": {"name": "arg1", "value": ""}
        })))
        .await
        .unwrap();
    assert!(!got.completion.values.is_empty(), "{got:?}");
    let e = admin
        .complete(complete(json!({
            "ref": {"type": "ref/prompt", "name": "no_such_prompt"},
            "argument": {"name": "a", "value": ""}
        })))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("no_such_prompt"), "{e}");

    // A role without one resource neither lists, reads nor subscribes to it.
    let uris = |r: rmcp::model::ListResourcesResult| -> Vec<String> {
        r.resources.into_iter().map(|r| r.uri.clone()).collect()
    };
    let all = uris(admin.list_resources(None).await.unwrap());
    let some = uris(bob.list_resources(None).await.unwrap());
    assert!(all.contains(&"test://static-binary".to_string()), "{all:?}");
    assert!(
        !some.contains(&"test://static-binary".to_string()),
        "{some:?}"
    );
    assert!(some.contains(&"test://static-text".to_string()), "{some:?}");
    let hidden = rmcp::model::ReadResourceRequestParams::new("test://static-binary");
    assert!(bob.read_resource(hidden).await.is_err());
    assert!(bob
        .subscribe(rmcp::model::SubscribeRequestParams::new(
            "test://static-binary"
        ))
        .await
        .is_err());
    // A denied template: seen, but neither completed nor subscribed to.
    let e = bob
        .complete(complete(json!({
            "ref": {"type": "ref/resource", "uri": "test://template/{id}/data"},
            "argument": {"name": "id", "value": "1"}
        })))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("denied"), "{e}");
    let e = bob
        .subscribe(rmcp::model::SubscribeRequestParams::new(
            "test://template/1/data",
        ))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("denied"), "{e}");
    let _ = admin.cancel().await;
    let _ = bob.cancel().await;
}

/// A configuration with the test upstream behind the virtual server `up`, started with `args`.
fn config_with_upstream_args(dir: &Path, args: &[&str]) -> PathBuf {
    let f = dir.join("toolshed.toml");
    std::fs::write(
        &f,
        format!(
            r#"
[[sources]]
kind = "mcp"
name = "up"
command = "{}"
args = {}

[[roles]]
id = "admin"
patterns = ["*"]
allow = ["up.**"]
[[principals]]
id = "admin"
roles = ["admin"]
api_keys = ["k-admin"]

[[servers]]
name = "up"
tools = ["up.**"]
names = "original"
"#,
            test_upstream().display(),
            serde_json::to_string(args).unwrap()
        ),
    )
    .unwrap();
    f
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2026_client_answers_an_older_upstreams_question_by_input_required() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_with_upstream_args(dir.path(), &[]);
    let server = Server::start(dir.path(), Some(&cfg), &[]);
    let config = StreamableHttpClientTransportConfig::with_uri(server.url("/mcp/servers/up"))
        .auth_header("k-admin".to_string());
    let modern = rmcp::service::ClientLifecycleMode::Discover {
        preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
    };
    let client = rmcp::service::serve_client_with_lifecycle(
        Answering,
        StreamableHttpClientTransport::from_config(config),
        modern,
    )
    .await
    .unwrap();
    // The upstream (2025-11-25) sends elicitation/create mid-call; the client, which takes no
    // requests from servers, gets `input_required` and answers in a retry (rmcp's call_tool
    // drives the rounds through its handler).
    let once = client
        .peer()
        .call_tool_once(CallToolRequestParams::new("ask"))
        .await
        .unwrap();
    let rmcp::model::CallToolResponse::InputRequired(asked) = once else {
        panic!("expected input_required, got {once:?}");
    };
    let asked = serde_json::to_value(&asked).unwrap();
    let (_, request) = asked["inputRequests"]
        .as_object()
        .unwrap()
        .iter()
        .next()
        .unwrap();
    assert_eq!(request["method"], "elicitation/create", "{asked}");
    assert_eq!(
        request["params"]["message"], "What is your name?",
        "{asked}"
    );
    // A forged state is refused with a clear error.
    let mut forged = CallToolRequestParams::new("ask");
    forged.request_state = Some("not-a-state".into());
    let e = client.peer().call_tool_once(forged).await.unwrap_err();
    assert!(e.to_string().contains("requestState is unknown"), "{e}");
    // Answered, the call completes with what the upstream made of the answer.
    let r = client
        .call_tool(CallToolRequestParams::new("ask"))
        .await
        .unwrap();
    let answer: Value = serde_json::from_str(&text_of(&r)).unwrap_or_else(|_| panic!("{r:?}"));
    assert_eq!(answer["content"]["name"], "Ada", "{r:?}");
    let _ = client.cancel().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_client_answers_a_2026_upstreams_input_required_by_elicitation() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_with_upstream_args(dir.path(), &["--modern-only"]);
    let server = Server::start(dir.path(), Some(&cfg), &[]);
    let config = StreamableHttpClientTransportConfig::with_uri(server.url("/mcp/servers/up"))
        .auth_header("k-admin".to_string());
    let client = Answering
        .serve(StreamableHttpClientTransport::from_config(config))
        .await
        .unwrap();
    // The upstream answers `input_required`; Toolshed puts the question to this 2025-11-25
    // client as elicitation/create and retries the upstream with its answer and state.
    let r = call(&client, "ask", json!({})).await.unwrap();
    let answer: Value = serde_json::from_str(&text_of(&r)).unwrap_or_else(|_| panic!("{r:?}"));
    assert_eq!(answer["action"], "accept", "{r:?}");
    assert_eq!(answer["content"]["name"], "Ada", "{r:?}");
    // A client that cannot be asked: the question waits for an answer from another face.
    let plain = connect(&server, "up", "k-admin").await;
    let asking = tokio::spawn({
        let plain = plain.peer().clone();
        async move { call(&plain, "ask", json!({})).await }
    });
    answer_waiting_question(&server, json!({"name": "Grace"})).await;
    let r = asking.await.unwrap().unwrap();
    assert!(text_of(&r).contains("Grace"), "{r:?}");
    let _ = client.cancel().await;
    let _ = plain.cancel().await;
}

/// Answers, as the admin over the HTTP API, the first question that waits (an `input` wait of
/// a call whose client could not be asked) with `content`; the question's wait.
async fn answer_waiting_question(server: &Server, content: Value) -> Value {
    let http = reqwest::Client::new();
    for _ in 0..100 {
        let list: Value = http
            .get(server.url("/v1/executions?wait=input"))
            .bearer_auth("k-admin")
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let waiting = list["executions"]
            .as_array()
            .and_then(|e| e.iter().find(|x| x["kind"] == "question"))
            .cloned();
        if let Some(x) = waiting {
            let wait = x["waits"][0].clone();
            let id = x["executionId"].as_str().unwrap().to_string();
            let r = http
                .post(server.url(&format!("/v1/executions/{id}/answer")))
                .bearer_auth("k-admin")
                .json(&json!({"waitId": wait["waitId"], "action": "accept", "content": content}))
                .send()
                .await
                .unwrap();
            assert!(r.status().is_success(), "{:?}", r.text().await);
            return wait;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("no question waited")
}

/// The first question waiting (an `input` wait of kind `question`), once one does: its id.
async fn waiting_question_id(server: &Server) -> String {
    for _ in 0..100 {
        if let Some(id) = waiting_questions(server).await.first() {
            return id.clone();
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("no question waited")
}

/// The ids of the questions waiting now.
async fn waiting_questions(server: &Server) -> Vec<String> {
    let list: Value = reqwest::Client::new()
        .get(server.url("/v1/executions?wait=input"))
        .bearer_auth("k-admin")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    list["executions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|x| x["kind"] == "question")
        .filter_map(|x| x["executionId"].as_str().map(str::to_string))
        .collect()
}

/// Waits until execution `id` is cancelled; the execution.
async fn until_cancelled(server: &Server, id: &str) -> Value {
    for _ in 0..100 {
        let x: Value = reqwest::Client::new()
            .get(server.url(&format!("/v1/executions/{id}")))
            .bearer_auth("k-admin")
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if x["status"] == "cancelled" {
            return x;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("execution {id} was never cancelled")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_question_lives_as_long_as_its_call() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_with_upstream_args(dir.path(), &[]);
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text.push_str("\n[limits]\ncall_timeout_ms = 4000\n");
    std::fs::write(&cfg, text).unwrap();
    let server = Server::start(dir.path(), Some(&cfg), &[]);
    let plain = connect(&server, "up", "k-admin").await;

    // Nobody answers: the question ends shortly before the call, and the caller hears that the
    // question went unanswered (naming it), not that the tool timed out.
    let r = call(&plain, "ask", json!({})).await.unwrap();
    let said = text_of(&r);
    assert!(
        said.contains("the question 'ex_") && said.contains("went unanswered within"),
        "{r:?}"
    );
    assert!(!said.contains("did not finish within"), "{r:?}");
    assert!(waiting_questions(&server).await.is_empty());

    // The call ends first (its client cancels it): its question is cancelled with it.
    let request = rmcp::model::ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(
        CallToolRequestParams::new("ask"),
    ));
    let handle = plain
        .peer()
        .send_cancellable_request(request, rmcp::service::PeerRequestOptions::no_options())
        .await
        .unwrap();
    let id = waiting_question_id(&server).await;
    handle.cancel(Some("changed my mind".into())).await.unwrap();
    let x = until_cancelled(&server, &id).await;
    assert_eq!(x["error"]["message"], "the call that asked ended", "{x}");
    assert!(waiting_questions(&server).await.is_empty());
    let _ = plain.cancel().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2026_upstreams_unanswered_question_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_with_upstream_args(dir.path(), &["--modern-only"]);
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text.push_str("\n[limits]\ncall_timeout_ms = 4000\n");
    std::fs::write(&cfg, text).unwrap();
    let server = Server::start(dir.path(), Some(&cfg), &[]);
    let plain = connect(&server, "up", "k-admin").await;
    let r = call(&plain, "ask", json!({})).await.unwrap();
    let said = text_of(&r);
    assert!(
        said.contains("the question 'ex_") && said.contains("went unanswered within"),
        "{r:?}"
    );
    assert!(waiting_questions(&server).await.is_empty());
    let _ = plain.cancel().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(deprecated)] // resources/subscribe: deprecated by 2026-07-28, still the older revisions'
async fn an_older_client_subscribes_to_a_2026_upstreams_resource() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_with_upstream_args(dir.path(), &["--modern-only", "--resources"]);
    // The virtual server (the last table) serves the upstream's resources too.
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text.push_str("resources = [\"up.**\"]\n");
    std::fs::write(&cfg, text).unwrap();
    let server = Server::start(dir.path(), Some(&cfg), &[]);
    let config = StreamableHttpClientTransportConfig::with_uri(server.url("/mcp/servers/up"))
        .auth_header("k-admin".to_string());
    let watching = Watching::default();
    let client = watching
        .clone()
        .serve(StreamableHttpClientTransport::from_config(config))
        .await
        .unwrap();
    let counter = "test://counter";
    let heard = || {
        watching
            .updated
            .lock()
            .unwrap()
            .iter()
            .filter(|u| *u == counter)
            .count()
    };
    client
        .subscribe(rmcp::model::SubscribeRequestParams::new(counter))
        .await
        .unwrap();
    // The upstream changes the resource: the update reaches the client.
    let r = call(&client, "touch", json!({})).await.unwrap();
    assert!(text_of(&r).contains("1 subscribers"), "{r:?}");
    for _ in 0..100 {
        if heard() > 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(heard(), 1, "the update did not arrive");
    // Unsubscribed, the upstream stops listening and the client hears of nothing more.
    client
        .unsubscribe(rmcp::model::UnsubscribeRequestParams::new(counter))
        .await
        .unwrap();
    let mut said = String::new();
    for _ in 0..50 {
        said = text_of(&call(&client, "touch", json!({})).await.unwrap());
        if said.contains("0 subscribers") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(said.contains("0 subscribers"), "still listening: {said}");
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(heard(), 1, "updates after unsubscribing");
    let _ = client.cancel().await;
}
