//! Plain `tools/call` requests of a session whose client is never asked anything are served on
//! the direct path (answered `application/json` in the request's own task); everything else
//! goes through rmcp's session (answered as an SSE stream). Both answer the same, both take the
//! engine's one path (policy, audit), and the direct path never serves a session that ended,
//! belongs to another principal or endpoint, or asks for more than the plain case.

use std::sync::Arc;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{json, Value};
use toolshed_core::{
    Annotations, CatalogBuilder, Policy, Principal, Role, SharedCatalog, Tool, ToolDef, ToolPath,
};
use toolshed_engine::{Engine, EngineConfig};
use toolshed_identity::KeyRing;
use toolshed_mcp::{HttpOptions, Identity, McpOptions, SessionLimits, SessionTable};
use toolshed_store::Store;

const VERSION: &str = "2025-11-25";

struct Server {
    url: String,
    engine: Engine,
    table: Arc<SessionTable>,
    http: reqwest::Client,
}

fn tool(path: &str, annotations: Annotations) -> Tool {
    Tool::from_fn(
        ToolDef::new(
            ToolPath::parse(path).unwrap(),
            path,
            "Echoes its arguments.",
        )
        .with_annotations(annotations),
        |_c, a| async move { Ok(json!({"echo": a})) },
    )
}

/// Calls of `demo.slow` that ran to their end.
static SLOW_DONE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Sleeps for `ms` milliseconds, then answers.
fn slow() -> Tool {
    Tool::from_fn(
        ToolDef::new(
            ToolPath::parse("demo.slow").unwrap(),
            "demo.slow",
            "Takes its time.",
        )
        .with_annotations(Annotations::READ_ONLY),
        |_c, a| async move {
            let ms = a["ms"].as_u64().unwrap_or(0);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            SLOW_DONE.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok(json!({"slept": ms}))
        },
    )
}

async fn start(idle: Duration) -> Server {
    let mut b = CatalogBuilder::new();
    b.add_tool(slow());
    b.add_tool(tool("demo.echo", Annotations::READ_ONLY))
        .add_tool(tool("secret.echo", Annotations::READ_ONLY))
        .add_tool(tool("demo.wipe", Annotations::default()));
    let role = Role {
        id: "demo".into(),
        name: String::new(),
        patterns: vec!["demo.*".into()],
        ..Default::default()
    };
    let principals = ["a", "b"].map(|id| Principal {
        id: id.into(),
        roles: vec!["demo".into()],
    });
    let engine = Engine::new(
        Arc::new(SharedCatalog::new(b.build().unwrap())),
        Policy::new(vec![role], principals.to_vec()).unwrap(),
        Store::open("sqlite::memory:").await.unwrap(),
        EngineConfig::default(),
    );
    let keys = KeyRing::new(
        [("k-a", "a"), ("k-b", "b")].map(|(k, p)| (k.to_string(), p.to_string())),
        None,
    );
    let table = SessionTable::new(SessionLimits {
        idle,
        ..Default::default()
    });
    let router = toolshed_mcp::http_router(
        engine.clone(),
        Identity::Network(keys.into()),
        McpOptions {
            direct: true,
            ..Default::default()
        },
        HttpOptions {
            allowed_hosts: vec![],
            sessions: table.clone(),
            servers: Default::default(),
        },
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    Server {
        url,
        engine,
        table,
        http: reqwest::Client::new(),
    }
}

/// An answer: its status, content type, and the JSON-RPC message in it (from a JSON body or
/// the SSE event that carries it).
struct Answer {
    status: StatusCode,
    json: bool,
    message: Value,
}

impl Server {
    async fn post(&self, key: &str, session: Option<&str>, body: Value) -> Answer {
        self.post_to(&self.url, key, session, body).await
    }

    async fn post_to(&self, url: &str, key: &str, session: Option<&str>, body: Value) -> Answer {
        let mut req = self
            .http
            .post(url)
            .bearer_auth(key)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", VERSION)
            .body(body.to_string());
        if let Some(s) = session {
            req = req.header("mcp-session-id", s);
        }
        let r = req.send().await.unwrap();
        let status = r.status();
        let json = r
            .headers()
            .get("content-type")
            .is_some_and(|v| v.to_str().unwrap().starts_with("application/json"));
        let text = r.text().await.unwrap();
        let message = if json {
            serde_json::from_str(&text).unwrap_or(Value::Null)
        } else {
            text.lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
                .find(|m| m.get("id").is_some())
                .unwrap_or(Value::Null)
        };
        Answer {
            status,
            json,
            message,
        }
    }

    /// A session of `key`'s principal whose client declared `capabilities`.
    async fn session(&self, key: &str, capabilities: Value) -> String {
        let r = self
            .http
            .post(&self.url)
            .bearer_auth(key)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(
                json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                    "protocolVersion": VERSION, "capabilities": capabilities,
                    "clientInfo": {"name": "test", "version": "1"}}})
                .to_string(),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let id = r.headers()["mcp-session-id"].to_str().unwrap().to_string();
        let done = self
            .post(
                key,
                Some(&id),
                json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            )
            .await;
        assert_eq!(done.status, StatusCode::ACCEPTED);
        id
    }

    async fn call(&self, key: &str, session: &str, id: u64, tool: &str, args: Value) -> Answer {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": args}});
        self.post(key, Some(session), body).await
    }

    /// The session's plain calls are let onto the direct path once its `initialized`
    /// notification has been handled (a moment after it was accepted).
    async fn wait_direct(&self, key: &str, session: &str) {
        for i in 0..100 {
            if self
                .call(key, session, 900 + i, "demo__echo", json!({}))
                .await
                .json
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("the session's plain calls never took the direct path");
    }
}

#[tokio::test]
async fn plain_calls_are_answered_directly_and_the_same_as_through_the_session() {
    let s = start(Duration::from_secs(600)).await;
    let plain = s.session("k-a", json!({})).await;
    let asking = s.session("k-a", json!({"sampling": {}})).await;
    s.wait_direct("k-a", &plain).await;
    let cases = [
        ("demo__echo", json!({"x": 1})),
        // not in the principal's view: the same refusal both ways
        ("secret__echo", json!({})),
        // destructive: pauses for approval the same way
        ("demo__wipe", json!({"all": true})),
        ("no__such", json!({})),
        ("search_tools", json!({"query": "echo"})),
    ];
    for (i, (tool, args)) in cases.into_iter().enumerate() {
        let direct = s
            .call("k-a", &plain, i as u64 + 1, tool, args.clone())
            .await;
        let session = s.call("k-a", &asking, i as u64 + 1, tool, args).await;
        assert_eq!(
            (direct.status, session.status),
            (StatusCode::OK, StatusCode::OK)
        );
        assert!(direct.json, "{tool}: a plain call is answered directly");
        assert!(
            !session.json,
            "{tool}: a client that may be asked goes through rmcp"
        );
        assert_eq!(direct.message["id"], i as u64 + 1);
        let (mut a, mut b) = (
            direct.message["result"].clone(),
            session.message["result"].clone(),
        );
        // executions have ids of their own
        for v in [&mut a, &mut b] {
            if let Some(text) = v.pointer_mut("/content/0/text") {
                let t = text.as_str().unwrap_or_default();
                *text = Value::String(t.split("ex_").next().unwrap_or_default().to_string());
            }
            if let Some(o) = v.get_mut("structuredContent") {
                *o = Value::Null;
            }
        }
        assert_eq!(a, b, "{tool}: {} vs {}", direct.message, session.message);
    }
    let echoed = s
        .call("k-a", &plain, 50, "demo__echo", json!({"y": "z"}))
        .await;
    let text = echoed.message["result"]["content"][0]["text"]
        .as_str()
        .unwrap();
    assert!(text.contains(r#""y":"z""#), "{text}");
    // Both went through the engine: the direct calls are audited like the others.
    let mut audited = 0;
    for _ in 0..100 {
        let entries = s.engine.store().recent_audit(200).await.unwrap();
        audited = entries
            .iter()
            .filter(|e| e.path == "demo.echo" && e.principal == "a" && e.face == "mcp")
            .count();
        if audited >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(audited >= 3, "audited demo.echo calls: {audited}");
}

#[tokio::test]
async fn anything_but_the_plain_case_goes_through_the_session() {
    let s = start(Duration::from_secs(600)).await;
    let plain = s.session("k-a", json!({})).await;
    s.wait_direct("k-a", &plain).await;
    // a progress token is rmcp's to honour
    let progress = s
        .post(
            "k-a",
            Some(&plain),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "demo__echo", "arguments": {}, "_meta": {"progressToken": "p"}}}),
        )
        .await;
    assert_eq!(progress.status, 200);
    assert!(!progress.json);
    assert!(
        progress.message["result"].is_object(),
        "{}",
        progress.message
    );
    // other methods
    let listed = s
        .post(
            "k-a",
            Some(&plain),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        )
        .await;
    assert!(!listed.json && listed.message["result"]["tools"].is_array());
    // another principal's session is unknown to it, on either path
    let stranger = s.call("k-b", &plain, 3, "demo__echo", json!({})).await;
    assert_eq!(stranger.status, 404);
    // the session of `/mcp` is not one of a virtual server's
    let elsewhere = s
        .post_to(
            &format!("{}/servers/none", s.url),
            "k-a",
            Some(&plain),
            json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                "params": {"name": "demo__echo", "arguments": {}}}),
        )
        .await;
    assert_eq!(elsewhere.status, 404);
    // an ended session is not served, however plain the call
    let r = s
        .http
        .delete(&s.url)
        .bearer_auth("k-a")
        .header("mcp-session-id", &plain)
        .header("mcp-protocol-version", VERSION)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    let after = s.call("k-a", &plain, 5, "demo__echo", json!({})).await;
    assert_eq!(after.status, 404);
    assert_eq!(s.table.count(), 0);
}

#[tokio::test]
async fn a_session_used_only_by_direct_calls_does_not_expire_as_idle() {
    let s = start(Duration::from_secs(2)).await;
    let plain = s.session("k-a", json!({})).await;
    s.wait_direct("k-a", &plain).await;
    let mut direct = 0;
    for i in 0..30 {
        let r = s.call("k-a", &plain, i, "demo__echo", json!({})).await;
        assert_eq!(r.status, 200, "call {i} after {}ms", i * 100);
        direct += usize::from(r.json);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        direct >= 20,
        "most calls took the direct path: {direct} of 30"
    );
    assert_eq!(s.table.count(), 1);
}

#[tokio::test]
async fn a_long_call_is_answered_as_a_stream_and_ends_even_when_its_client_left() {
    let s = start(Duration::from_secs(600)).await;
    let plain = s.session("k-a", json!({})).await;
    s.wait_direct("k-a", &plain).await;
    // Longer than the wait for a JSON answer: the answer comes as an SSE stream.
    let long = s
        .call("k-a", &plain, 1, "demo__slow", json!({"ms": 2500}))
        .await;
    assert_eq!(long.status, 200);
    assert!(!long.json, "a long call's answer is a stream");
    let text = long.message["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains(r#""slept":2500"#), "{}", long.message);
    // A client that gives up does not cut the call short: it runs to its end and is audited.
    let before = SLOW_DONE.load(std::sync::atomic::Ordering::SeqCst);
    let impatient = reqwest::Client::builder()
        .timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let gave_up = impatient
        .post(&s.url)
        .bearer_auth("k-a")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", &plain)
        .body(
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "demo__slow", "arguments": {"ms": 1000}}})
            .to_string(),
        )
        .send()
        .await;
    assert!(gave_up.is_err(), "the client timed out");
    let mut audited = 0;
    for _ in 0..60 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let entries = s.engine.store().recent_audit(200).await.unwrap();
        audited = entries
            .iter()
            .filter(|e| e.path == "demo.slow" && e.outcome == "ok")
            .count();
        if audited >= 2 {
            break;
        }
    }
    assert!(SLOW_DONE.load(std::sync::atomic::Ordering::SeqCst) > before);
    assert_eq!(audited, 2, "both slow calls are audited");
}

#[tokio::test]
async fn a_cancelled_call_is_answered_with_nothing_even_when_the_cancel_came_first() {
    let s = start(Duration::from_secs(600)).await;
    let plain = s.session("k-a", json!({})).await;
    s.wait_direct("k-a", &plain).await;
    let cancel = |id: u64| {
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": id, "reason": "no longer needed"}})
    };
    // The cancellation overtook its call (another connection): the call is not run.
    let early = s.post("k-a", Some(&plain), cancel(77)).await;
    assert_eq!(early.status, StatusCode::ACCEPTED);
    let skipped = s
        .call("k-a", &plain, 77, "demo__slow", json!({"ms": 377}))
        .await;
    assert_eq!(skipped.status, 200);
    assert_eq!(
        skipped.message,
        Value::Null,
        "no answer to a cancelled call"
    );
    // Cancelled while it runs: the answer is dropped. (The main endpoint lets the call end.)
    let running = {
        let (http, url, plain) = (s.http.clone(), s.url.clone(), plain.clone());
        tokio::spawn(async move {
            let r = http
                .post(&url)
                .bearer_auth("k-a")
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .header("mcp-session-id", &plain)
                .body(
                    json!({"jsonrpc": "2.0", "id": 78, "method": "tools/call",
                        "params": {"name": "demo__slow", "arguments": {"ms": 578}}})
                    .to_string(),
                )
                .send()
                .await
                .unwrap();
            (r.status(), r.text().await.unwrap())
        })
    };
    tokio::time::sleep(Duration::from_millis(150)).await;
    let taken = s.post("k-a", Some(&plain), cancel(78)).await;
    assert_eq!(taken.status, StatusCode::ACCEPTED);
    let (status, body) = running.await.unwrap();
    assert_eq!(status, 200);
    assert!(
        !body.contains("result") && !body.contains("\"id\""),
        "{body}"
    );
    // Later calls of the session are served as before.
    let after = s.call("k-a", &plain, 79, "demo__echo", json!({})).await;
    assert!(after.json && after.message["result"].is_object());
    s.engine.flush_audit().await;
    let entries = s.engine.store().recent_audit(200).await.unwrap();
    assert!(
        !entries.iter().any(|e| e.args.contains("377")),
        "a call cancelled before it came never ran"
    );
    assert!(entries
        .iter()
        .any(|e| e.args.contains("578") && e.outcome == "ok"));
}
