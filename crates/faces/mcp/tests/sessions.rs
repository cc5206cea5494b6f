//! MCP over streamable HTTP under load from strangers: callers are authenticated before a
//! session exists, sessions are capped per principal and in total, and idle ones expire. The
//! router is served in process and driven with raw HTTP requests.

use std::sync::Arc;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{json, Value};
use toolshed_core::{CatalogBuilder, Policy, Principal, Role, SharedCatalog};
use toolshed_engine::{Engine, EngineConfig};
use toolshed_identity::KeyRing;
use toolshed_mcp::{HttpOptions, Identity, McpOptions, SessionLimits, SessionTable};
use toolshed_store::Store;

struct Server {
    url: String,
    table: Arc<SessionTable>,
    http: reqwest::Client,
}

async fn start(limits: SessionLimits) -> Server {
    let all = Role {
        id: "all".into(),
        name: String::new(),
        patterns: vec!["*".into()],
        ..Default::default()
    };
    let principals = ["a", "b"].map(|id| Principal {
        id: id.into(),
        roles: vec!["all".into()],
    });
    let engine = Engine::new(
        Arc::new(SharedCatalog::new(CatalogBuilder::new().build().unwrap())),
        Policy::new(vec![all], principals.to_vec()).unwrap(),
        Store::open("sqlite::memory:").await.unwrap(),
        EngineConfig::default(),
    );
    let keys = KeyRing::new(
        [("k-a", "a"), ("k-b", "b")].map(|(k, p)| (k.to_string(), p.to_string())),
        None,
    );
    let table = SessionTable::new(limits);
    let router = toolshed_mcp::http_router(
        engine,
        Identity::Network(keys.into()),
        McpOptions::default(),
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
        table,
        http: reqwest::Client::new(),
    }
}

fn limits(total: usize, each: usize, idle: Duration) -> SessionLimits {
    SessionLimits {
        max_sessions: total,
        max_per_principal: each,
        idle,
    }
}

impl Server {
    async fn post(
        &self,
        key: Option<&str>,
        session: Option<&str>,
        body: Value,
    ) -> reqwest::Response {
        let mut req = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .body(body.to_string());
        if let Some(k) = key {
            req = req.bearer_auth(k);
        }
        if let Some(s) = session {
            req = req.header("mcp-session-id", s);
        }
        req.send().await.unwrap()
    }

    /// `initialize`; returns the status, the session id, and the body.
    async fn initialize(&self, key: Option<&str>) -> (StatusCode, Option<String>, String) {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"}}});
        let r = self.post(key, None, body).await;
        let status = r.status();
        let id = r
            .headers()
            .get("mcp-session-id")
            .map(|v| v.to_str().unwrap().to_string());
        (status, id, r.text().await.unwrap())
    }

    async fn list_tools(&self, key: &str, session: &str) -> StatusCode {
        let body = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
        self.post(Some(key), Some(session), body).await.status()
    }
}

fn rpc_error(body: &str) -> Value {
    let v: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
    assert_eq!(v["jsonrpc"], "2.0", "{v}");
    v["error"].clone()
}

#[tokio::test]
async fn unauthenticated_initialize_gets_401_and_no_session() {
    let s = start(SessionLimits::default()).await;
    for key in [None, Some("wrong"), Some("")] {
        for _ in 0..20 {
            let (status, id, body) = s.initialize(key).await;
            assert_eq!(status, 401, "{key:?}: {body}");
            assert_eq!(id, None);
            let e = rpc_error(&body);
            assert!(e["message"].as_str().unwrap().contains("API key"), "{e}");
        }
    }
    assert_eq!(s.table.count(), 0, "no session exists for strangers");
    let (status, id, _) = s.initialize(Some("k-a")).await;
    assert_eq!(status, 200);
    assert!(id.is_some());
    assert_eq!(s.table.count(), 1);
}

#[tokio::test]
async fn sessions_beyond_the_caps_are_refused_without_state() {
    let s = start(limits(3, 2, Duration::from_secs(600))).await;
    let (_, a1, _) = s.initialize(Some("k-a")).await;
    let (_, a2, _) = s.initialize(Some("k-a")).await;
    let (a1, a2) = (a1.unwrap(), a2.unwrap());
    let (status, id, body) = s.initialize(Some("k-a")).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(id, None);
    let e = rpc_error(&body);
    assert_eq!(e["data"]["limit"], "max_sessions_per_principal", "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("max_sessions_per_principal = 2"),
        "{e}"
    );
    assert_eq!((s.table.count(), s.table.count_of("a")), (2, 2));

    // Another principal has its own slots, up to the total.
    let (status, b1, _) = s.initialize(Some("k-b")).await;
    assert_eq!(status, 200);
    let (status, _, body) = s.initialize(Some("k-b")).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(rpc_error(&body)["data"]["limit"], "max_sessions");
    assert_eq!(s.table.count(), 3);

    // A session belongs to its principal: another key cannot use it.
    assert_eq!(s.list_tools("k-b", &a1).await, 404);
    assert_eq!(s.list_tools("k-a", b1.as_deref().unwrap()).await, 404);

    // Closing a session frees its slot.
    let r = s
        .http
        .delete(&s.url)
        .bearer_auth("k-a")
        .header("mcp-session-id", &a2)
        .header("mcp-protocol-version", "2025-06-18")
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    assert_eq!(s.table.count_of("a"), 1);
    let (status, _, body) = s.initialize(Some("k-a")).await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test]
async fn idle_sessions_expire_and_then_answer_404() {
    let s = start(limits(10, 10, Duration::from_secs(1))).await;
    let (_, id, _) = s.initialize(Some("k-a")).await;
    let id = id.unwrap();
    assert_eq!(s.table.count(), 1);
    let mut gone = false;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if s.table.count() == 0 {
            gone = true;
            break;
        }
    }
    assert!(gone, "the idle session was not closed");
    assert_eq!(s.list_tools("k-a", &id).await, 404);
    let (status, _, _) = s.initialize(Some("k-a")).await;
    assert_eq!(status, 200, "a fresh session can be opened");
}
