//! Agent definitions over HTTP, through the engine and the `agents.*` tools: each stage's exact
//! error shape (nothing stored on failure), versions and restore, publish, concurrent patches
//! without lost updates, the schema route.

use std::sync::Arc;

use reqwest::StatusCode;
use serde_json::{json, Value};
use toolshed_core::{
    Annotations, CatalogBuilder, Policy, Principal, Role, SharedCatalog, Tool, ToolDef, ToolPath,
};
use toolshed_engine::{Engine, EngineConfig};
use toolshed_identity::KeyRing;
use toolshed_store::Store;

struct Api {
    base: String,
    http: reqwest::Client,
}

async fn start() -> Api {
    let store = Store::open("sqlite::memory:").await.unwrap();
    let mut b = CatalogBuilder::new();
    b.add_tool(Tool::from_fn(
        ToolDef::new(
            ToolPath::parse("tables.rows.query").unwrap(),
            "Query",
            "Rows.",
        )
        .with_input(json!({"type": "object"}))
        .with_annotations(Annotations::READ_ONLY),
        |_ctx, _args| async { Ok(json!({"rows": []})) },
    ));
    let creds = vec![toolshed_agents::ModelCredential {
        id: "main".into(),
        kind: "openai".into(),
        base_url: None,
        runtime: false,
    }];
    b.add_plugin(&toolshed_agents::plugin(store.clone(), creds));
    let policy = Policy::new(
        vec![Role {
            id: "builder".into(),
            patterns: vec!["**".into()],
            decide: vec!["**".into()],
            ..Default::default()
        }],
        vec![Principal {
            id: "alice".into(),
            roles: vec!["builder".into()],
        }],
    )
    .unwrap();
    let engine = Engine::new(
        Arc::new(SharedCatalog::new(b.build().unwrap())),
        policy,
        store,
        EngineConfig::default(),
    );
    let keys = KeyRing::new([("k".to_string(), "alice".to_string())], None);
    let app = toolshed_http::router(engine, keys);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Api {
        base,
        http: reqwest::Client::new(),
    }
}

impl Api {
    async fn send(&self, method: &str, path: &str, ctype: &str, body: &str) -> (StatusCode, Value) {
        let r = self
            .http
            .request(method.parse().unwrap(), format!("{}{path}", self.base))
            .bearer_auth("k")
            .header("content-type", ctype)
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        let status = r.status();
        let text = r.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }
    async fn get(&self, path: &str) -> (StatusCode, Value) {
        let r = self
            .http
            .get(format!("{}{path}", self.base))
            .bearer_auth("k")
            .send()
            .await
            .unwrap();
        (r.status(), r.json().await.unwrap())
    }
    async fn put(&self, name: &str, body: &str) -> (StatusCode, Value) {
        self.send(
            "PUT",
            &format!("/v1/agents/{name}"),
            "application/json",
            body,
        )
        .await
    }
    async fn patch(&self, name: &str, body: &str) -> (StatusCode, Value) {
        self.send(
            "PATCH",
            &format!("/v1/agents/{name}"),
            "application/json-patch+json",
            body,
        )
        .await
    }
    /// Approves a paused answer (publish and delete need approval under the default policy).
    async fn settled(&self, (s, v): (StatusCode, Value)) -> (StatusCode, Value) {
        if s != StatusCode::ACCEPTED {
            return (s, v);
        }
        let id = v["executionId"].as_str().unwrap();
        let (s, v) = self
            .send(
                "POST",
                &format!("/v1/executions/{id}/resume"),
                "application/json",
                r#"{"decision": "approve"}"#,
            )
            .await;
        (s, v["result"].clone())
    }
}

fn helper() -> Value {
    json!({
        "name": "helper",
        "description": "Answers questions about rows.",
        "model": "openai/gpt-4.1-mini",
        "credential": "main",
        "instructions": "Be brief.",
        "tools": [{"type": "catalog", "pattern": "tables.rows.*"}]
    })
}

#[tokio::test]
async fn every_stage_answers_its_own_error_shape_and_stores_nothing() {
    let api = start().await;
    let (s, v) = api.put("helper", &helper().to_string()).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(
        (v["ok"].clone(), v["version"].clone()),
        (json!(true), json!(1))
    );

    // parse: line and column.
    let (s, v) = api
        .put("helper", "{\n  \"name\": \"helper\",\n  model: 1\n}")
        .await;
    assert_eq!(s, 422, "{v}");
    assert_eq!(v["stage"], "parse");
    assert_eq!(
        (
            v["errors"][0]["line"].clone(),
            v["errors"][0]["column"].clone()
        ),
        (json!(3), json!(3))
    );

    // patch: a failing test, a missing path, an op index.
    let (s, v) = api
        .patch(
            "helper",
            r#"[{"op": "test", "path": "/model", "value": "anthropic/x"}]"#,
        )
        .await;
    assert_eq!(
        (s.as_u16(), v["stage"].clone()),
        (422, json!("patch")),
        "{v}"
    );
    assert_eq!(v["errors"][0]["op"], 0);
    let (_, v) = api
        .patch(
            "helper",
            r#"[{"op": "replace", "path": "/description", "value": "x"}, {"op": "remove", "path": "/memory"}]"#,
        )
        .await;
    assert_eq!(
        (v["errors"][0]["op"].clone(), v["errors"][0]["path"].clone()),
        (json!(1), json!("/memory"))
    );

    // schema: every violation, a deep one inside a discriminated item named by its variant.
    let (s, v) = api
        .patch(
            "helper",
            r#"[{"op": "add", "path": "/tools/-", "value": {"type": "workflow", "name": "w"}},
                {"op": "add", "path": "/config", "value": {"toolCallConcurrency": 50}},
                {"op": "replace", "path": "/model", "value": "GPT 4"}]"#,
        )
        .await;
    assert_eq!(
        (s.as_u16(), v["stage"].clone()),
        (422, json!("schema")),
        "{v}"
    );
    let errors = v["errors"].as_array().unwrap();
    let at = |p: &str| {
        errors
            .iter()
            .find(|e| e["path"] == p)
            .unwrap_or_else(|| panic!("{p}: {v}"))
    };
    assert_eq!(at("/tools/1/workflow")["received"], "missing");
    assert_eq!(
        at("/config/toolCallConcurrency")["expected"],
        "integer ≤ 20"
    );
    assert_eq!(at("/config/toolCallConcurrency")["received"], "50");
    assert!(at("/model")["expected"]
        .as_str()
        .unwrap()
        .starts_with("string matching"));
    assert_eq!(errors.len(), 3, "{v}");

    // references: an unknown credential, an agent cycle.
    let mut other = helper();
    other["name"] = json!("other");
    other["tools"] = json!([{"type": "agent", "agent": "helper"}]);
    let (s, v) = api.put("other", &other.to_string()).await;
    assert_eq!(s, 200, "{v}");
    let (s, v) = api
        .patch(
            "helper",
            r#"[{"op": "replace", "path": "/credential", "value": "nope"},
                {"op": "add", "path": "/tools/-", "value": {"type": "agent", "agent": "other"}}]"#,
        )
        .await;
    assert_eq!(
        (s.as_u16(), v["stage"].clone()),
        (422, json!("references")),
        "{v}"
    );
    let messages: Vec<&str> = v["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["message"].as_str().unwrap())
        .collect();
    assert!(messages.iter().any(|m| m.contains("'nope'")), "{v}");
    assert!(
        messages
            .iter()
            .any(|m| m.contains("helper → other → helper")),
        "{v}"
    );

    // After every failure the stored draft is version 1, unchanged.
    let (_, v) = api.get("/v1/agents/helper").await;
    assert_eq!(v["draft"]["version"], 1, "{v}");
    assert_eq!(v["draft"]["config"], helper());

    // A catalog pattern that matches nothing is a warning, not an error.
    let (s, v) = api
        .patch("helper", r#"[{"op": "add", "path": "/tools/-", "value": {"type": "catalog", "pattern": "github.**"}}]"#)
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["version"], 2);
    assert_eq!(v["warnings"][0]["path"], "/tools/1/pattern");
}

#[tokio::test]
async fn versions_restore_and_publish() {
    let api = start().await;
    api.put("helper", &helper().to_string()).await;
    api.patch(
        "helper",
        r#"[{"op": "replace", "path": "/instructions", "value": "Be thorough."}]"#,
    )
    .await;
    let (s, v) = api
        .settled(
            api.send(
                "POST",
                "/v1/agents/helper/publish",
                "application/json",
                "{}",
            )
            .await,
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["liveVersion"], 2);
    let (s, v) = api
        .send(
            "POST",
            "/v1/agents/helper/restore",
            "application/json",
            r#"{"version": 1}"#,
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["version"], 3);
    let (_, v) = api.get("/v1/agents/helper").await;
    assert_eq!(v["draft"]["config"]["instructions"], "Be brief.");
    assert_eq!(v["live"]["config"]["instructions"], "Be thorough.");
    let (_, v) = api.get("/v1/agents/helper/versions").await;
    let list: Vec<(i64, bool, bool)> = v["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["version"].as_i64().unwrap(),
                x["draft"] == true,
                x["live"] == true,
            )
        })
        .collect();
    assert_eq!(
        list,
        [(3, true, false), (2, false, true), (1, false, false)]
    );
    let (_, v) = api.get("/v1/agents/helper?version=1").await;
    assert_eq!(v["config"]["instructions"], "Be brief.");
    let (s, _) = api.get("/v1/agents/helper?version=9").await;
    assert_eq!(s, 404);
    let (_, v) = api.get("/v1/agents").await;
    assert_eq!(v["agents"][0]["liveVersion"], 2);
    let (s, v) = api.get("/v1/agent-schema").await;
    assert_eq!(s, 200);
    assert_eq!(
        v["properties"]["tools"]["items"]["oneOf"]
            .as_array()
            .unwrap()
            .len(),
        5
    );
    let (s, v) = api
        .settled(
            api.send("DELETE", "/v1/agents/helper", "application/json", "")
                .await,
        )
        .await;
    assert_eq!(s, 200, "{v}");
    let (s, _) = api.get("/v1/agents/helper").await;
    assert_eq!(s, 404);
}

#[tokio::test]
async fn concurrent_patches_never_lose_an_update() {
    let api = Arc::new(start().await);
    let mut base = helper();
    base["tools"] = json!([]);
    api.put("helper", &base.to_string()).await;
    let mut tasks = Vec::new();
    for i in 0..8 {
        let api = api.clone();
        tasks.push(tokio::spawn(async move {
            let op = json!([{"op": "add", "path": "/tools/-", "value": {"type": "catalog", "pattern": format!("t{i}.*")}}]);
            api.patch("helper", &op.to_string()).await
        }));
    }
    let mut applied = 0;
    for t in tasks {
        let (s, v) = t.await.unwrap();
        match s.as_u16() {
            200 => applied += 1,
            409 => assert!(
                v["error"]["message"].as_str().unwrap().contains("changed"),
                "{v}"
            ),
            other => panic!("{other}: {v}"),
        }
    }
    let (_, v) = api.get("/v1/agents/helper").await;
    let tools = v["draft"]["config"]["tools"].as_array().unwrap().len();
    assert_eq!(tools, applied, "every applied patch is in the draft: {v}");
    assert_eq!(v["draft"]["version"], json!(1 + applied as i64));
    assert!(applied >= 1);
}
