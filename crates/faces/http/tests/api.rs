//! The HTTP API in process: every `/v1` route on a bound listener, driven with reqwest. Two
//! principals with API keys (`alice`, `bob`) may use `demo.*`; `secret.*` exists but is outside
//! their role and must answer exactly like a missing tool. Alice decides her pending `demo.*`
//! calls; `carol` may use `demo.*` but decide nothing; `root` decides everyone's; `dave` may make
//! two calls a minute. The router sits behind the listener guard as in the binary (loopback
//! hosts, `https://app.example.com` as an allowed origin).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use reqwest::StatusCode;
use serde_json::{json, Value};
use toolshed_core::{
    Annotations, CatalogBuilder, Policy, Principal, Role, SharedCatalog, Tool, ToolDef, ToolPath,
};
use toolshed_engine::{Engine, EngineConfig, RateLimits, SandboxConfig};
use toolshed_identity::KeyRing;
use toolshed_store::Store;

struct Api {
    base: String,
    http: reqwest::Client,
    deletes: Arc<AtomicUsize>,
}

fn def(path: &str, name: &str, ann: Annotations, input: Value) -> ToolDef {
    ToolDef::new(
        ToolPath::parse(path).unwrap(),
        name,
        format!("{name}: the {path} tool."),
    )
    .with_input(input)
    .with_annotations(ann)
}

async fn start() -> Api {
    start_with(EngineConfig::default(), false).await
}

/// `with_wait` adds `demo.wait`, which answers after 400 ms.
async fn start_with(config: EngineConfig, with_wait: bool) -> Api {
    let deletes = Arc::new(AtomicUsize::new(0));
    let mut b = CatalogBuilder::new();
    b.add_tool(Tool::from_fn(
        def(
            "demo.echo",
            "Echo Message",
            Annotations::READ_ONLY,
            json!({"type": "object", "properties": {"msg": {"type": "string", "minLength": 1}}, "required": ["msg"]}),
        ),
        |_ctx, args| async move { Ok(json!({"echo": args["msg"]})) },
    ));
    let d = deletes.clone();
    b.add_tool(Tool::from_fn(
        def(
            "demo.delete",
            "Delete Everything",
            Annotations::DESTRUCTIVE,
            json!({"type": "object", "properties": {"what": {"type": "string"}}}),
        ),
        move |_ctx, args| {
            let d = d.clone();
            async move {
                d.fetch_add(1, Ordering::SeqCst);
                Ok(json!({"deleted": args["what"]}))
            }
        },
    ));
    if with_wait {
        b.add_tool(Tool::from_fn(
            def(
                "demo.wait",
                "Wait A Moment",
                Annotations::READ_ONLY,
                json!({"type": "object"}),
            ),
            |_ctx, _args| async {
                tokio::time::sleep(std::time::Duration::from_millis(400)).await;
                Ok(json!("waited"))
            },
        ));
    }
    b.add_tool(Tool::from_fn(
        def(
            "secret.read",
            "Read Secret",
            Annotations::READ_ONLY,
            json!({"type": "object"}),
        ),
        |_ctx, _args| async { Ok(json!("hidden")) },
    ));
    let role = |id: &str, patterns: &[&str], decide: &[&str]| Role {
        id: id.into(),
        patterns: patterns.iter().map(|p| p.to_string()).collect(),
        decide: decide.iter().map(|p| p.to_string()).collect(),
        ..Default::default()
    };
    let principal = |id: &str, roles: &[&str]| Principal {
        id: id.into(),
        roles: roles.iter().map(|r| r.to_string()).collect(),
    };
    let policy = Policy::new(
        vec![
            role("demo", &["demo.*", "client.*"], &[]),
            role("demo_decider", &[], &["demo.*"]),
            role("admin", &["*"], &["**"]),
        ],
        vec![
            principal("alice", &["demo", "demo_decider"]),
            principal("bob", &["demo"]),
            principal("carol", &["demo"]),
            principal("root", &["admin"]),
            principal("dave", &["demo"]),
        ],
    )
    .unwrap();
    let config = EngineConfig {
        principal_rate_limits: [(
            "dave".to_string(),
            RateLimits {
                calls_per_minute: 2,
                scripts_per_minute: 0,
            },
        )]
        .into(),
        ..config
    };
    let engine = Engine::new(
        Arc::new(SharedCatalog::new(b.build().unwrap())),
        policy,
        Store::open("sqlite::memory:").await.unwrap(),
        config,
    );
    let keys = KeyRing::new(
        ["alice", "bob", "carol", "root", "dave"].map(|p| (format!("k-{p}"), p.to_string())),
        None,
    );
    let app = toolshed_http::guard(
        toolshed_http::router(engine, keys),
        toolshed_http::GuardConfig {
            allowed_hosts: vec![],
            allowed_origins: vec!["https://app.example.com".into()],
        },
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Api {
        base,
        http: reqwest::Client::new(),
        deletes,
    }
}

impl Api {
    async fn get(&self, path: &str, key: &str) -> (StatusCode, Value) {
        let r = self
            .http
            .get(format!("{}{path}", self.base))
            .bearer_auth(key)
            .send()
            .await
            .unwrap();
        let status = r.status();
        (status, r.json().await.unwrap())
    }

    async fn post(&self, path: &str, key: &str, body: &str) -> (StatusCode, Value) {
        let r = self
            .http
            .post(format!("{}{path}", self.base))
            .bearer_auth(key)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        let status = r.status();
        let text = r.text().await.unwrap();
        let v = serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
        (status, v)
    }
}

fn code(v: &Value) -> &str {
    v["error"]["code"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn every_route_needs_a_known_key() {
    let api = start().await;
    let routes = [
        ("GET", "/v1/tools"),
        ("GET", "/v1/tools?query=echo"),
        ("GET", "/v1/tools/demo.echo"),
        ("POST", "/v1/tools/demo.echo/call"),
        ("POST", "/v1/scripts"),
        ("GET", "/v1/executions"),
        ("GET", "/v1/executions/ex_1"),
        ("POST", "/v1/executions/ex_1/resume"),
        ("GET", "/v1/audit"),
    ];
    for (method, path) in routes {
        for key in [None, Some("wrong-key")] {
            let mut req = api
                .http
                .request(method.parse().unwrap(), format!("{}{path}", api.base));
            if let Some(k) = key {
                req = req.bearer_auth(k);
            }
            let r = req
                .header("content-type", "application/json")
                .body("{}")
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 401, "{method} {path} with {key:?}");
            let v: Value = r.json().await.unwrap();
            assert_eq!(code(&v), "unauthorized", "{v}");
            assert!(
                v["error"]["message"].as_str().unwrap().contains("API key"),
                "{v}"
            );
        }
    }
    // The key may also come in X-API-Key.
    let r = api
        .http
        .get(format!("{}/v1/tools", api.base))
        .header("x-api-key", "k-alice")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = api
        .http
        .get(format!("{}/healthz", api.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // No model here: searches rank by words, and say nothing of embeddings.
    let health: Value = r.json().await.unwrap();
    assert_eq!(health, json!({"status": "ok", "search": "lexical"}));
}

#[tokio::test]
async fn listing_and_search_stay_in_the_callers_view() {
    let api = start().await;
    // Without a query: the view summary and namespace counts.
    let (s, v) = api.get("/v1/tools", "k-alice").await;
    assert_eq!(s, 200);
    assert_eq!(v["namespaces"], json!({"demo": 2}), "{v}");
    let summary = v["summary"].as_str().unwrap();
    assert!(
        summary.contains("demo") && !summary.contains("secret"),
        "{summary}"
    );
    // An empty query is the same as none.
    let (_, v2) = api.get("/v1/tools?query=%20", "k-alice").await;
    assert_eq!(v2, v);

    let (s, v) = api.get("/v1/tools?query=echo%20message", "k-alice").await;
    assert_eq!(s, 200);
    assert_eq!(v["hits"][0]["path"], "demo.echo", "{v}");
    let (_, v) = api.get("/v1/tools?query=delete&limit=1", "k-alice").await;
    assert_eq!(v["hits"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v["hits"][0]["path"], "demo.delete");
    assert_eq!(v["hits"][0]["destructive"], true);
    let (_, v) = api.get("/v1/tools?query=read%20secret", "k-alice").await;
    assert!(
        v["hits"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h["path"] != "secret.read"),
        "{v}"
    );
    let (_, v) = api
        .get("/v1/tools?query=echo&namespace=secret", "k-alice")
        .await;
    assert_eq!(v["hits"], json!([]), "{v}");
    let (_, v) = api
        .get("/v1/tools?query=echo&namespace=demo", "k-alice")
        .await;
    assert_eq!(v["hits"][0]["path"], "demo.echo", "{v}");
    // A query string that does not parse is a JSON 400 naming the problem.
    let (s, v) = api.get("/v1/tools?query=echo&limit=ten", "k-alice").await;
    assert_eq!(s, 400);
    assert_eq!(code(&v), "bad_request");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("limit"),
        "{v}"
    );
}

#[tokio::test]
async fn describe_finds_allowed_tools_only() {
    let api = start().await;
    let (s, v) = api.get("/v1/tools/demo.echo", "k-alice").await;
    assert_eq!(s, 200);
    assert_eq!(v["path"], "demo.echo");
    assert_eq!(v["name"], "Echo Message");
    assert!(v["text"].as_str().unwrap().contains("msg"), "{v}");
    assert!(v.get("inputSchema").is_none());
    let (_, v) = api.get("/v1/tools/demo.echo?schemas=true", "k-alice").await;
    assert_eq!(v["inputSchema"]["required"], json!(["msg"]), "{v}");

    let (s, forbidden) = api.get("/v1/tools/secret.read", "k-alice").await;
    assert_eq!(s, 404);
    let (s2, missing) = api.get("/v1/tools/secret.nope", "k-alice").await;
    assert_eq!(s2, 404);
    assert_eq!(code(&forbidden), "not_found");
    assert_eq!(
        forbidden["error"]["message"]
            .as_str()
            .unwrap()
            .replace("secret.read", "X"),
        missing["error"]["message"]
            .as_str()
            .unwrap()
            .replace("secret.nope", "X"),
        "forbidden and missing answer alike"
    );
}

#[tokio::test]
async fn calls_validate_and_report_clearly() {
    let api = start().await;
    let (s, v) = api
        .post("/v1/tools/demo.echo/call", "k-alice", r#"{"msg": "hi"}"#)
        .await;
    assert_eq!(s, 200);
    assert_eq!(v["status"], "completed");
    assert_eq!(v["result"], json!({"echo": "hi"}));

    // Schema-invalid: the pointer and the rule.
    let (s, v) = api
        .post("/v1/tools/demo.echo/call", "k-alice", r#"{"msg": ""}"#)
        .await;
    assert_eq!(s, 400);
    assert_eq!(code(&v), "invalid_arguments");
    let violation = &v["error"]["data"]["violations"][0];
    assert_eq!(violation["pointer"], "/msg", "{v}");
    assert_eq!(violation["rule"], "minLength", "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("/msg"),
        "{v}"
    );
    let (s, v) = api.post("/v1/tools/demo.echo/call", "k-alice", "[1]").await;
    assert_eq!(s, 400);
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("must be a JSON object"),
        "{v}"
    );

    // Malformed JSON: a 400 saying where.
    let (s, v) = api
        .post("/v1/tools/demo.echo/call", "k-alice", r#"{"msg": "#)
        .await;
    assert_eq!(s, 400);
    assert_eq!(code(&v), "malformed_arguments");
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("not valid JSON") && msg.contains("line 1 column"),
        "{msg}"
    );
    // An empty body means no arguments.
    let (s, v) = api.post("/v1/tools/demo.echo/call", "k-alice", "").await;
    assert_eq!(s, 400);
    assert!(
        v["error"]["message"].as_str().unwrap().contains("msg"),
        "{v}"
    );

    // Forbidden = not found, before any validation.
    let (s, v) = api
        .post("/v1/tools/secret.read/call", "k-alice", "{}")
        .await;
    assert_eq!(s, 404);
    assert_eq!(code(&v), "not_found");

    // Destructive: paused, nothing ran.
    let (s, v) = api
        .post("/v1/tools/demo.delete/call", "k-alice", r#"{"what": "db"}"#)
        .await;
    assert_eq!(s, 202);
    assert_eq!(v["status"], "paused");
    assert_eq!(v["pending"]["path"], "demo.delete");
    assert!(v["executionId"].as_str().unwrap().starts_with("ex_"));
    assert_eq!(api.deletes.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn scripts_complete_pause_and_report_syntax_errors() {
    let api = start().await;
    let (s, v) = api
        .post(
            "/v1/scripts",
            "k-alice",
            &json!({"script": "const r = await tools.demo.echo({msg: 'x'}); console.log('ok'); return r.echo + '!'"}).to_string(),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["status"], "completed");
    assert_eq!(v["result"], "x!");
    assert_eq!(v["logs"][0]["message"], "ok");

    let (s, v) = api
        .post(
            "/v1/scripts",
            "k-alice",
            &json!({"script": "await tools.demo.delete({what: 't'}); return 'done'"}).to_string(),
        )
        .await;
    assert_eq!(s, 202, "{v}");
    assert_eq!(v["status"], "paused");
    assert_eq!(v["pending"]["path"], "demo.delete");
    assert!(v["message"].as_str().unwrap().contains("approve"), "{v}");

    let (s, v) = api
        .post(
            "/v1/scripts",
            "k-alice",
            &json!({"script": "const a = 1;\nconst b = ;\nreturn a"}).to_string(),
        )
        .await;
    assert_eq!(s, 422, "{v}");
    assert_eq!(v["status"], "failed");
    assert_eq!(v["error"]["kind"], "syntax", "{v}");
    assert_eq!(v["error"]["line"], 2, "{v}");
    assert!(v["error"]["column"].as_u64().unwrap() >= 1, "{v}");

    // Forbidden tools inside scripts are not found either.
    let (_, v) = api
        .post(
            "/v1/scripts",
            "k-alice",
            &json!({"script": "try { await tools.secret.read({}) } catch (e) { return e.code }"})
                .to_string(),
        )
        .await;
    assert_eq!(v["result"], "not_found", "{v}");

    let (s, v) = api.post("/v1/scripts", "k-alice", "not json").await;
    assert_eq!(s, 400);
    assert!(
        v["error"]["message"].as_str().unwrap().contains("not JSON"),
        "{v}"
    );
    let (s, v) = api
        .post("/v1/scripts", "k-alice", r#"{"code": "return 1"}"#)
        .await;
    assert_eq!(s, 400);
    assert!(
        v["error"]["message"].as_str().unwrap().contains("script"),
        "{v}"
    );
}

#[tokio::test]
async fn executions_list_get_and_resume() {
    let api = start().await;
    let pause = |what: &'static str| {
        let api = &api;
        async move {
            let (s, v) = api
                .post(
                    "/v1/tools/demo.delete/call",
                    "k-alice",
                    &json!({"what": what}).to_string(),
                )
                .await;
            assert_eq!(s, 202);
            v["executionId"].as_str().unwrap().to_string()
        }
    };
    let a = pause("a").await;
    let b = pause("b").await;

    let (s, v) = api.get("/v1/executions", "k-alice").await;
    assert_eq!(s, 200);
    let ids: Vec<&str> = v["executions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["executionId"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&a.as_str()) && ids.contains(&b.as_str()),
        "{v}"
    );
    assert!(v["executions"]
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e["status"] == "paused"));
    let (_, v) = api.get("/v1/executions", "k-bob").await;
    assert_eq!(
        v["executions"],
        json!([]),
        "not listed for another principal"
    );

    let (s, v) = api.get(&format!("/v1/executions/{a}"), "k-alice").await;
    assert_eq!(s, 200);
    assert_eq!(v["status"], "paused");
    assert_eq!(v["kind"], "call");
    assert_eq!(v["pending"]["args"], json!({"what": "a"}));
    // Another principal's execution answers like an unknown one, on every route.
    let (s, foreign) = api.get(&format!("/v1/executions/{a}"), "k-bob").await;
    assert_eq!(s, 404);
    assert_eq!(code(&foreign), "unknown_execution");
    let (s, v) = api.get("/v1/executions/ex_unknown", "k-alice").await;
    assert_eq!(s, 404);
    assert_eq!(code(&v), "unknown_execution");
    let (s, v) = api
        .post(
            &format!("/v1/executions/{a}/resume"),
            "k-bob",
            r#"{"decision": "approve"}"#,
        )
        .await;
    assert_eq!(s, 404);
    assert_eq!(code(&v), "unknown_execution");
    assert_eq!(api.deletes.load(Ordering::SeqCst), 0);

    // Approve.
    let (s, v) = api
        .post(
            &format!("/v1/executions/{a}/resume"),
            "k-alice",
            r#"{"decision": "approve"}"#,
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["status"], "completed");
    assert_eq!(v["result"], json!({"deleted": "a"}));
    assert_eq!(api.deletes.load(Ordering::SeqCst), 1);
    let (_, v) = api.get(&format!("/v1/executions/{a}"), "k-alice").await;
    assert_eq!(v["status"], "completed");
    assert_eq!(v["result"], json!({"deleted": "a"}));
    // Settled: a second resume conflicts.
    let (s, v) = api
        .post(
            &format!("/v1/executions/{a}/resume"),
            "k-alice",
            r#"{"decision": "approve"}"#,
        )
        .await;
    assert_eq!(s, 409);
    assert_eq!(code(&v), "already_settled");

    // Bad decisions and bodies.
    let (s, v) = api
        .post(
            &format!("/v1/executions/{b}/resume"),
            "k-alice",
            r#"{"decision": "maybe"}"#,
        )
        .await;
    assert_eq!(s, 400);
    assert_eq!(code(&v), "invalid_decision");
    let (s, _) = api
        .post(&format!("/v1/executions/{b}/resume"), "k-alice", "{")
        .await;
    assert_eq!(s, 400);
    let (s, _) = api
        .post(&format!("/v1/executions/{b}/resume"), "k-alice", "{}")
        .await;
    assert_eq!(s, 400);
    let (s, v) = api
        .post(
            "/v1/executions/ex_unknown/resume",
            "k-alice",
            r#"{"decision": "deny"}"#,
        )
        .await;
    assert_eq!(s, 404);
    assert_eq!(code(&v), "unknown_execution");

    // Deny: the call fails with `denied` and never runs.
    let (s, v) = api
        .post(
            &format!("/v1/executions/{b}/resume"),
            "k-alice",
            r#"{"decision": "deny"}"#,
        )
        .await;
    assert_eq!(s, 422, "{v}");
    assert_eq!(v["status"], "failed");
    assert_eq!(v["error"]["code"], "denied");
    assert_eq!(api.deletes.load(Ordering::SeqCst), 1);
    let (_, v) = api.get(&format!("/v1/executions/{b}"), "k-alice").await;
    assert_eq!(v["status"], "failed");
    let (_, v) = api.get("/v1/executions", "k-alice").await;
    assert_eq!(v["executions"], json!([]), "nothing waits any more");
}

#[tokio::test]
async fn audit_shows_the_callers_own_entries() {
    let api = start().await;
    api.post("/v1/tools/demo.echo/call", "k-alice", r#"{"msg": "a"}"#)
        .await;
    api.post("/v1/tools/secret.read/call", "k-alice", "{}")
        .await;
    api.post("/v1/tools/demo.echo/call", "k-bob", r#"{"msg": "b"}"#)
        .await;
    // The writer is asynchronous: wait until the entries land.
    let mut v = Value::Null;
    for _ in 0..100 {
        let (s, got) = api.get("/v1/audit", "k-alice").await;
        assert_eq!(s, 200);
        v = got;
        if v["entries"].as_array().unwrap().len() >= 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let entries = v["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 2, "{v}");
    assert!(entries.iter().all(|e| e["principal"] == "alice"), "{v}");
    assert!(entries.iter().all(|e| e["face"] == "http"), "{v}");
    assert!(entries
        .iter()
        .any(|e| e["path"] == "secret.read" && e["outcome"] == "not_found"));
    assert!(entries
        .iter()
        .any(|e| e["path"] == "demo.echo" && e["outcome"] == "ok"));
    let (_, v) = api.get("/v1/audit?limit=1", "k-alice").await;
    assert_eq!(v["entries"].as_array().unwrap().len(), 1);
    let (s, v) = api.get("/v1/audit?limit=-1", "k-alice").await;
    assert_eq!(s, 400, "{v}");
}

/// A principal without `decide` cannot approve its own paused call over HTTP (403, and it stays
/// paused); an administrator whose `decide` matches sees it in its list and approves it.
#[tokio::test]
async fn who_decides_over_http() {
    let api = start().await;
    let (s, v) = api
        .post("/v1/tools/demo.delete/call", "k-carol", r#"{"what": "c"}"#)
        .await;
    assert_eq!(s, 202, "{v}");
    let id = v["executionId"].as_str().unwrap().to_string();
    let resume = format!("/v1/executions/{id}/resume");
    let (s, v) = api
        .post(&resume, "k-carol", r#"{"decision": "approve"}"#)
        .await;
    assert_eq!(s, 403, "{v}");
    assert_eq!(code(&v), "forbidden");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("decide"),
        "{v}"
    );
    let (_, v) = api.get(&format!("/v1/executions/{id}"), "k-carol").await;
    assert_eq!(v["status"], "paused");
    // Bob neither sees nor decides it; root does both.
    let (s, _) = api
        .post(&resume, "k-bob", r#"{"decision": "approve"}"#)
        .await;
    assert_eq!(s, 404);
    let (_, v) = api.get("/v1/executions", "k-root").await;
    let listed = v["executions"].as_array().unwrap();
    assert!(
        listed
            .iter()
            .any(|e| e["executionId"] == id.as_str() && e["principal"] == "carol"),
        "{v}"
    );
    let (s, v) = api
        .post(&resume, "k-root", r#"{"decision": "approve"}"#)
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["result"], json!({"deleted": "c"}));
    assert_eq!(api.deletes.load(Ordering::SeqCst), 1);
}

/// Over its rate limit a principal gets 429 with `Retry-After`; others are unaffected.
#[tokio::test]
async fn rate_limited_calls_answer_429_with_retry_after() {
    let api = start().await;
    let body = r#"{"msg": "hi"}"#;
    for _ in 0..2 {
        let (s, v) = api.post("/v1/tools/demo.echo/call", "k-dave", body).await;
        assert_eq!(s, 200, "{v}");
    }
    let r = api
        .http
        .post(format!("{}/v1/tools/demo.echo/call", api.base))
        .bearer_auth("k-dave")
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 429);
    let after: u64 = r.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&after), "{after}");
    let v: Value = r.json().await.unwrap();
    assert_eq!(code(&v), "rate_limited");
    let (s, _) = api.post("/v1/tools/demo.echo/call", "k-bob", body).await;
    assert_eq!(s, 200);
}

/// A paused destructive call, for tests that try to approve it by other means.
async fn paused_delete(api: &Api) -> String {
    let (s, v) = api
        .post(
            "/v1/tools/demo.delete/call",
            "k-alice",
            r#"{"what": "all"}"#,
        )
        .await;
    assert_eq!(s, 202, "{v}");
    v["executionId"].as_str().unwrap().to_string()
}

/// A request with the given extra headers and body; returns (status, JSON body).
async fn send(
    api: &Api,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> (StatusCode, Value) {
    let mut req = api
        .http
        .request(method.parse().unwrap(), format!("{}{path}", api.base))
        .bearer_auth("k-alice");
    for (n, v) in headers {
        req = req.header(*n, *v);
    }
    if let Some(b) = body {
        req = req.body(b.to_string());
    }
    let r = req.send().await.unwrap();
    let status = r.status();
    let text = r.text().await.unwrap();
    let v = serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
    (status, v)
}

/// A page in a browser may POST `text/plain` or a form without asking the server first: such
/// bodies are refused with 415 before any route runs, and nothing is called.
#[tokio::test]
async fn bodies_that_are_not_json_are_refused() {
    let api = start().await;
    let script = json!({"script": "return await tools.demo.delete({what: 'x'})"}).to_string();
    for ct in [
        "text/plain",
        "text/plain;charset=UTF-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
    ] {
        for path in ["/v1/scripts", "/v1/tools/demo.echo/call"] {
            let (s, v) = send(&api, "POST", path, &[("content-type", ct)], Some(&script)).await;
            assert_eq!(s, 415, "{ct} {path}: {v}");
            assert_eq!(code(&v), "unsupported_media_type", "{v}");
            let m = v["error"]["message"].as_str().unwrap();
            assert!(m.contains("application/json") && m.contains(ct), "{m}");
        }
    }
    let (s, v) = send(&api, "POST", "/v1/scripts", &[], Some(&script)).await;
    assert_eq!(s, 415, "a body without a type: {v}");
    assert_eq!(api.deletes.load(Ordering::SeqCst), 0);
    let (s, v) = api.get("/v1/executions", "k-alice").await;
    assert_eq!((s, v["executions"].clone()), (StatusCode::OK, json!([])));
    // JSON with parameters, and +json types, pass.
    let echo = r#"{"script": "return 1"}"#;
    for ct in [
        "application/json; charset=utf-8",
        "application/json-patch+json",
    ] {
        let (s, v) = send(
            &api,
            "POST",
            "/v1/scripts",
            &[("content-type", ct)],
            Some(echo),
        )
        .await;
        assert_eq!(s, 200, "{ct}: {v}");
    }
}

/// DNS rebinding: a page on another name that resolves to 127.0.0.1 sends its own Host. Every
/// route refuses it, including the one that approves destructive calls.
#[tokio::test]
async fn foreign_hosts_are_refused_on_every_route() {
    let api = start().await;
    let id = paused_delete(&api).await;
    let approve = format!("/v1/executions/{id}/resume");
    let routes = [
        ("GET", "/healthz", None),
        ("GET", "/v1/tools", None),
        ("GET", "/v1/executions", None),
        ("GET", "/v1/audit", None),
        ("POST", "/v1/scripts", Some(r#"{"script": "return 1"}"#)),
        ("POST", approve.as_str(), Some(r#"{"decision": "approve"}"#)),
    ];
    for host in [
        "evil.example",
        "evil.example:7777",
        "localhost.evil.example",
    ] {
        for (method, path, body) in &routes {
            let headers = [("host", host), ("content-type", "application/json")];
            let (s, v) = send(&api, method, path, &headers, *body).await;
            assert_eq!(s, 403, "{method} {path} Host {host}: {v}");
            assert_eq!(code(&v), "forbidden_host", "{v}");
            assert!(
                v["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("allowed_hosts"),
                "{v}"
            );
        }
    }
    assert_eq!(api.deletes.load(Ordering::SeqCst), 0);
    // Loopback names with any port are the server's own.
    for host in ["localhost:1", "127.0.0.1", "[::1]:7777"] {
        let (s, v) = send(&api, "GET", "/v1/tools", &[("host", host)], None).await;
        assert_eq!(s, 200, "{host}: {v}");
    }
    let (s, v) = send(
        &api,
        "POST",
        &approve,
        &[("host", "localhost"), ("content-type", "application/json")],
        Some(r#"{"decision": "approve"}"#),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(api.deletes.load(Ordering::SeqCst), 1);
}

/// A cross-origin request from a browser is refused unless its origin is the server's own or
/// listed in `allowed_origins`; requests without Origin (CLIs, SDKs) pass.
#[tokio::test]
async fn cross_origin_requests_are_refused_unless_allowed() {
    let api = start().await;
    let body = Some(r#"{"script": "return 7"}"#);
    let json_type = ("content-type", "application/json");
    for origin in [
        "https://evil.example",
        "http://localhost:1234",
        "null",
        "https://app.example.com:8443",
    ] {
        for (method, path, body) in [("GET", "/v1/tools", None), ("POST", "/v1/scripts", body)] {
            let (s, v) = send(&api, method, path, &[("origin", origin), json_type], body).await;
            assert_eq!(s, 403, "{origin} {method} {path}: {v}");
            assert_eq!(code(&v), "forbidden_origin", "{v}");
            assert!(
                v["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("allowed_origins"),
                "{v}"
            );
        }
    }
    let own = api.base.clone();
    for origin in [own.as_str(), "https://app.example.com"] {
        let (s, v) = send(
            &api,
            "POST",
            "/v1/scripts",
            &[("origin", origin), json_type],
            body,
        )
        .await;
        assert_eq!(s, 200, "{origin}: {v}");
        assert_eq!(v["result"], 7);
    }
    let (s, _) = send(&api, "POST", "/v1/scripts", &[json_type], body).await;
    assert_eq!(s, 200, "no Origin");
}

/// Pages of an allowed origin get CORS answers, so a browser lets them send keys and JSON.
#[tokio::test]
async fn allowed_origins_get_cors_answers() {
    let api = start().await;
    let preflight = |origin: &'static str| {
        api.http
            .request(reqwest::Method::OPTIONS, format!("{}/v1/scripts", api.base))
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header(
                "access-control-request-headers",
                "authorization,content-type",
            )
            .send()
    };
    let r = preflight("https://app.example.com").await.unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    let allow = |r: &reqwest::Response, name: &str| {
        r.headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_ascii_lowercase())
            .unwrap_or_default()
    };
    assert_eq!(
        allow(&r, "access-control-allow-origin"),
        "https://app.example.com"
    );
    assert!(allow(&r, "access-control-allow-headers").contains("content-type"));
    let r = preflight("https://evil.example").await.unwrap();
    assert_eq!(r.status(), 403);
    let r = api
        .http
        .post(format!("{}/v1/scripts", api.base))
        .bearer_auth("k-alice")
        .header("origin", "https://app.example.com")
        .header("content-type", "application/json")
        .body(r#"{"script": "return 1"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        allow(&r, "access-control-allow-origin"),
        "https://app.example.com"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_beyond_the_slots_and_the_queue_get_429_with_retry_after() {
    let api = Arc::new(
        start_with(
            EngineConfig {
                sandbox: SandboxConfig {
                    workers: None,
                    max_concurrent: 1,
                    max_queued: 1,
                },
                ..EngineConfig::default()
            },
            true,
        )
        .await,
    );
    let mut tasks = Vec::new();
    for _ in 0..5 {
        let api = api.clone();
        tasks.push(tokio::spawn(async move {
            let r = api
                .http
                .post(format!("{}/v1/scripts", api.base))
                .bearer_auth("k-alice")
                .json(&json!({"script": "return await tools.demo.wait({});"}))
                .send()
                .await
                .unwrap();
            let retry = r
                .headers()
                .get("retry-after")
                .map(|v| v.to_str().unwrap().to_owned());
            (r.status(), retry, r.json::<Value>().await.unwrap())
        }));
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let (mut ok, mut refused) = (0, 0);
    for t in tasks {
        let (status, retry, body) = t.await.unwrap();
        match status {
            StatusCode::OK => {
                assert_eq!(body["result"], json!("waited"));
                ok += 1;
            }
            StatusCode::TOO_MANY_REQUESTS => {
                assert_eq!(code(&body), "overloaded", "{body}");
                assert_eq!(retry.as_deref(), Some("1"));
                refused += 1;
            }
            other => panic!("unexpected {other}: {body}"),
        }
    }
    assert_eq!((ok, refused), (2, 3));
}

/// The pause protocol over HTTP: a client tool call and a catalog call in one pause, the
/// result posted by its owner only, answers of the wrong shape refused, a question answered,
/// the waiting list by kind, cancel.
#[tokio::test]
async fn client_tools_questions_and_cancel_over_http() {
    let api = start().await;
    let calc = json!({"name": "calculator", "inputSchema": {"type": "object", "properties": {"a": {"type": "number"}}}});
    let body = json!({
        "script": "const [c, e] = await Promise.all([tools.client.calculator({a: 2}), tools.demo.echo({msg: 'hi'})]); return [c, e.echo];",
        "clientTools": [calc],
    });
    let (s, v) = api.post("/v1/scripts", "k-alice", &body.to_string()).await;
    assert_eq!(s, 202, "{v}");
    assert_eq!(v["status"], "tool_call_required");
    assert_eq!(v["toolCalls"][0]["name"], "calculator");
    assert_eq!(v["toolCalls"][0]["arguments"], json!({"a": 2}));
    let id = v["executionId"].as_str().unwrap().to_string();
    let call_id = v["toolCalls"][0]["callId"].as_str().unwrap().to_string();

    let (s, v) = api.get("/v1/executions?wait=tool_result", "k-alice").await;
    assert_eq!(s, 200);
    assert_eq!(v["executions"][0]["executionId"], id.as_str());
    let (s, v) = api.get("/v1/executions?wait=nonsense", "k-alice").await;
    assert_eq!(s, 400, "{v}");
    let (_, v) = api.get(&format!("/v1/executions/{id}"), "k-alice").await;
    assert_eq!(v["clientTools"][0]["readAs"], "mcp");

    let path = format!("/v1/executions/{id}/tool-results");
    // A body of another route's shape, or an unknown field, is refused before anything runs.
    let (s, v) = api
        .post(&path, "k-alice", r#"{"decision": "approve"}"#)
        .await;
    assert_eq!(s, 400, "{v}");
    let (s, v) = api
        .post(&path, "k-alice", r#"{"results": [], "extra": 1}"#)
        .await;
    assert_eq!(s, 400, "{v}");
    // Another principal does not see it; an unknown callId is 404.
    let result = json!({"results": [{"callId": call_id, "result": 4}]}).to_string();
    let (s, v) = api.post(&path, "k-bob", &result).await;
    assert_eq!((s.as_u16(), code(&v)), (404, "unknown_execution"));
    let (s, v) = api
        .post(
            &path,
            "k-alice",
            r#"{"results": [{"callId": "call_7", "result": 1}]}"#,
        )
        .await;
    assert_eq!((s.as_u16(), code(&v)), (404, "unknown_wait"));
    let (s, v) = api.post(&path, "k-alice", &result).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["result"], json!([4, "hi"]));
    let (s, v) = api.post(&path, "k-alice", &result).await;
    assert_eq!((s.as_u16(), code(&v)), (409, "already_settled"));

    // Bad declarations name the declaration by index.
    let body = json!({"script": "return 1", "clientTools": [calc, {"description": "nameless"}]});
    let (s, v) = api.post("/v1/scripts", "k-alice", &body.to_string()).await;
    assert_eq!((s.as_u16(), code(&v)), (400, "invalid_client_tools"));
    assert!(
        v["error"]["message"].as_str().unwrap().contains("[1]"),
        "{v}"
    );

    // A question, answered with invalid then valid content.
    let body = json!({"script": "return await tools.ask_user({message: 'Size?', schema: {type: 'object', properties: {n: {type: 'integer'}}, required: ['n']}})"});
    let (s, v) = api.post("/v1/scripts", "k-alice", &body.to_string()).await;
    assert_eq!(s, 202, "{v}");
    assert_eq!(v["status"], "paused");
    assert_eq!(v["waits"][0]["kind"], "input");
    let id = v["executionId"].as_str().unwrap().to_string();
    let path = format!("/v1/executions/{id}/answer");
    let (s, v) = api
        .post(
            &path,
            "k-alice",
            r#"{"waitId": "input_0", "action": "accept", "content": {"n": "x"}}"#,
        )
        .await;
    assert_eq!((s.as_u16(), code(&v)), (400, "invalid_answer"), "{v}");
    let (s, v) = api
        .post(
            &path,
            "k-alice",
            r#"{"waitId": "input_0", "action": "accept", "content": {"n": 3}}"#,
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["result"]["content"], json!({"n": 3}));

    // Cancel a paused execution; answering it afterwards is a conflict.
    let (_, v) = api.post("/v1/scripts", "k-alice", &body.to_string()).await;
    let id = v["executionId"].as_str().unwrap().to_string();
    let (s, v) = api
        .post(&format!("/v1/executions/{id}/cancel"), "k-bob", "{}")
        .await;
    assert_eq!((s.as_u16(), code(&v)), (404, "unknown_execution"));
    let (s, v) = api
        .post(&format!("/v1/executions/{id}/cancel"), "k-alice", "{}")
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["status"], "cancelled");
    let (s, v) = api
        .post(
            &format!("/v1/executions/{id}/answer"),
            "k-alice",
            r#"{"waitId": "input_0", "action": "decline"}"#,
        )
        .await;
    assert_eq!((s.as_u16(), code(&v)), (409, "already_settled"));
}

/// Reads a whole Server-Sent Events body: (id, event, data) of each message.
fn sse_messages(text: &str) -> Vec<(Option<i64>, String, Value)> {
    text.split("\n\n")
        .filter_map(|block| {
            let (mut id, mut event, mut data) = (None, String::new(), String::new());
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("id:") {
                    id = v.trim().parse().ok();
                } else if let Some(v) = line.strip_prefix("event:") {
                    event = v.trim().to_string();
                } else if let Some(v) = line.strip_prefix("data:") {
                    data.push_str(v.trim_start());
                }
            }
            (!data.is_empty()).then(|| (id, event, serde_json::from_str(&data).unwrap()))
        })
        .collect()
}

#[tokio::test]
async fn events_stream_inline_and_replay_from_last_event_id() {
    let api = start().await;
    let calc = json!({"name": "calculator", "inputSchema": {"type": "object"}});
    let body = json!({
        "script": "console.log('first'); const e = await tools.demo.echo({msg: 'x', api_key: 'sk-live-1'}); const c = await tools.client.calculator({a: 1}); console.log('after', c); return [e.echo, c];",
        "clientTools": [calc],
    });
    let r = api
        .http
        .post(format!("{}/v1/scripts", api.base))
        .bearer_auth("k-alice")
        .header("accept", "text/event-stream")
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    let inline = sse_messages(&r.text().await.unwrap());
    let kinds: Vec<&str> = inline.iter().map(|m| m.1.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "started",
            "tool_call",
            "tool_result",
            "tool_call",
            "log",
            "paused",
            "outcome"
        ],
        "{inline:?}"
    );
    let ids: Vec<i64> = inline.iter().filter_map(|m| m.0).collect();
    assert_eq!(ids, [1, 2, 3, 4, 5, 6]);
    // Redacted like the audit log.
    assert_eq!(inline[1].2["arguments"]["api_key"], "[REDACTED]");
    assert_eq!(inline[5].2["status"], "tool_call_required");
    let outcome = &inline[6].2;
    assert_eq!(outcome["status"], "tool_call_required");
    let id = outcome["executionId"].as_str().unwrap().to_string();
    let call_id = outcome["toolCalls"][0]["callId"]
        .as_str()
        .unwrap()
        .to_string();

    // Another principal cannot follow it; a bad Last-Event-ID is refused.
    let (s, v) = api
        .get(&format!("/v1/executions/{id}/events"), "k-bob")
        .await;
    assert_eq!((s.as_u16(), code(&v)), (404, "unknown_execution"));
    let r = api
        .http
        .get(format!("{}/v1/executions/{id}/events", api.base))
        .bearer_auth("k-alice")
        .header("last-event-id", "x")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);

    // A follower reconnecting after event 4 waits through the pause and sees the rest.
    let follower = {
        let (http, url) = (
            api.http.clone(),
            format!("{}/v1/executions/{id}/events", api.base),
        );
        tokio::spawn(async move {
            let r = http
                .get(url)
                .bearer_auth("k-alice")
                .header("last-event-id", "4")
                .send()
                .await
                .unwrap();
            sse_messages(&r.text().await.unwrap())
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let result = json!({"results": [{"callId": call_id, "result": 5}]}).to_string();
    let (s, v) = api
        .post(
            &format!("/v1/executions/{id}/tool-results"),
            "k-alice",
            &result,
        )
        .await;
    assert_eq!(s, 200, "{v}");
    let rest = follower.await.unwrap();
    let got: Vec<(i64, &str)> = rest.iter().map(|m| (m.0.unwrap(), m.1.as_str())).collect();
    assert_eq!(
        got,
        [
            (5, "log"),
            (6, "paused"),
            (7, "resumed"),
            (8, "tool_result"),
            (9, "log"),
            (10, "completed")
        ],
        "{rest:?}"
    );
    assert_eq!(rest[3].2["path"], "client.calculator");
    assert_eq!(rest[4].2["message"], "after 5");
    assert_eq!(rest[5].2["result"], json!(["x", 5]));
    // Replay of a settled execution: everything after the id, then the stream ends.
    let r = api
        .http
        .get(format!("{}/v1/executions/{id}/events?after=8", api.base))
        .bearer_auth("k-alice")
        .send()
        .await
        .unwrap();
    let tail = sse_messages(&r.text().await.unwrap());
    assert_eq!(
        tail.iter().map(|m| m.0.unwrap()).collect::<Vec<_>>(),
        [9, 10]
    );
}

#[tokio::test]
async fn the_view_exports_in_each_format_and_declares_back_as_client_tools() {
    let api = start().await;
    let (s, v) = api.get("/v1/tools?format=openai", "k-bob").await;
    assert_eq!(s, 200, "{v}");
    let tools = v["tools"].as_array().unwrap();
    let names: Vec<&str> = tools
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    // Bob's view only, names in OpenAI's grammar.
    assert_eq!(names, ["demo__delete", "demo__echo"]);
    assert!(tools[0]["function"]["description"]
        .as_str()
        .unwrap()
        .ends_with("[destructive]"));
    let (_, v) = api
        .get("/v1/tools?format=mcp&pattern=demo.echo", "k-bob")
        .await;
    assert_eq!(v["tools"].as_array().unwrap().len(), 1);
    assert_eq!(v["tools"][0]["annotations"]["readOnlyHint"], true);
    let (s, v) = api.get("/v1/tools?format=gemini", "k-bob").await;
    assert_eq!(s, 400);
    assert!(
        v["error"]["message"].as_str().unwrap().contains("gemini"),
        "{v}"
    );
    let (s, _) = api.get("/v1/tools?format=mcp&pattern=Bad..", "k-bob").await;
    assert_eq!(s, 400);

    // Round trip: the exported definitions, declared as client tools, keep their schemas.
    for format in ["openai", "anthropic", "mcp"] {
        let (_, v) = api
            .get(&format!("/v1/tools?format={format}"), "k-bob")
            .await;
        let script = "return await tools.describe.tool({path: 'client.demo_echo', schemas: true})";
        let body = json!({"script": script, "clientTools": v["tools"]});
        let (s, out) = api.post("/v1/scripts", "k-bob", &body.to_string()).await;
        assert_eq!(s, 200, "{format}: {out}");
        let (_, echo) = api.get("/v1/tools/demo.echo?schemas=true", "k-bob").await;
        assert!(echo["inputSchema"].is_object(), "{echo}");
        assert_eq!(
            out["result"]["inputSchema"], echo["inputSchema"],
            "{format}"
        );
        assert_eq!(out["result"]["name"], "demo__echo");
    }

    // An exported name calls the tool it stands for.
    let (s, v) = api
        .post(
            "/v1/tools/demo__echo/call",
            "k-bob",
            r#"{"msg": "via name"}"#,
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["result"]["echo"], "via name");
}
