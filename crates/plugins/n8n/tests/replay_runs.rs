//! `n8n.workflows.run` and `n8n.workflows.verify` against a server replaying replies recorded
//! from a real n8n 2.41.1 (`run-*.json`): the seeded webhook workflow, a manual run with pinned
//! input that passed and one that failed, and a production webhook run. The server checks what
//! a real n8n needs (the session cookie on the editor API, the `triggerToStartFrom` shape) and
//! answers `running` before the recorded end, so the tools really wait.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use toolshed_core::{Plugin, ToolErrorKind};
use toolshed_n8n::{plugin, N8nConfig, N8nLogin};

use crate::common::{assert_clean, call, fixture};

const KEY: &str = "replay-key-0123456789";
const WF: &str = "WYIG518IAdEpP55f";
const COOKIE: &str = "n8n-auth=replay-session";

/// One webhook call: method, query, body.
type Hook = (String, HashMap<String, String>, Value);

#[derive(Clone, Default)]
struct World {
    /// Bodies posted to the manual run endpoint.
    runs: Arc<Mutex<Vec<Value>>>,
    /// Reads of each execution, to answer `running` first.
    reads: Arc<Mutex<HashMap<String, usize>>>,
    /// Webhook calls: (method, query, body).
    hooks: Arc<Mutex<Vec<Hook>>>,
    stopped: Arc<Mutex<Vec<String>>>,
    /// Whether the workflow is active (production webhook runs).
    active: Arc<Mutex<bool>>,
}

fn keyed(h: &HeaderMap) -> bool {
    h.get("x-n8n-api-key").and_then(|v| v.to_str().ok()) == Some(KEY)
}

async fn workflow(State(w): State<World>, h: HeaderMap, Path(id): Path<String>) -> Response {
    if !keyed(&h) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    if id != WF {
        return (StatusCode::NOT_FOUND, Json(json!({"message": "Not Found"}))).into_response();
    }
    let mut wf = fixture("run-workflow-wf1.raw.json");
    wf["active"] = json!(*w.active.lock().unwrap());
    Json(wf).into_response()
}

async fn login(Json(body): Json<Value>) -> Response {
    if body["password"] != "pw" {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({"message": "Wrong username or password"})),
        )
            .into_response();
    }
    (
        [(header::SET_COOKIE, format!("{COOKIE}; Path=/; HttpOnly"))],
        Json(json!({"data": {"id": "u1"}})),
    )
        .into_response()
}

/// `POST /rest/workflows/:id/run`: the session cookie is required; the execution answered is
/// the recorded failing one when the pinned input asks to fail, `30` (never ends) when the
/// input says `hang`.
async fn run(
    State(w): State<World>,
    h: HeaderMap,
    Path(id): Path<String>,
    Json(body): Json<Value>,
) -> Response {
    let cookie = h.get(header::COOKIE).and_then(|v| v.to_str().ok());
    if cookie != Some(COOKIE) {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({"message": "Unauthorized"})),
        )
            .into_response();
    }
    assert_eq!(id, WF);
    w.runs.lock().unwrap().push(body.clone());
    let item = &body["triggerToStartFrom"]["data"]["data"]["main"][0][0]["json"];
    let exec = if item["body"]["hang"] == true {
        "30"
    } else if item["body"]["fail"] == true {
        "22"
    } else {
        "21"
    };
    Json(json!({"data": {"executionId": exec}})).into_response()
}

fn recorded(id: &str) -> Option<Value> {
    Some(fixture(match id {
        "20" => "run-webhook-success-id20.includeData.raw.json",
        "21" => "run-verify-success-id21.includeData.raw.json",
        "22" => "run-verify-error-id22.includeData.raw.json",
        _ => return None,
    }))
}

async fn execution(
    State(w): State<World>,
    h: HeaderMap,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    if !keyed(&h) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let reads = {
        let mut r = w.reads.lock().unwrap();
        let n = r.entry(id.clone()).or_default();
        *n += 1;
        *n
    };
    if id == "30" {
        let stopped = w.stopped.lock().unwrap().contains(&id);
        let status = if stopped { "canceled" } else { "running" };
        return Json(
            json!({"id": "30", "workflowId": WF, "status": status, "mode": "manual",
            "startedAt": "2026-11-25T11:00:00.000Z", "stoppedAt": null}),
        )
        .into_response();
    }
    let Some(mut e) = recorded(&id) else {
        return (StatusCode::NOT_FOUND, Json(json!({"message": "Not Found"}))).into_response();
    };
    if reads == 1 {
        e["status"] = json!("running");
        e["stoppedAt"] = Value::Null;
    }
    if q.get("includeData").map(String::as_str) != Some("true") {
        if let Some(m) = e.as_object_mut() {
            m.remove("data");
            m.remove("workflowData");
        }
    }
    Json(e).into_response()
}

async fn executions(State(w): State<World>, h: HeaderMap) -> Response {
    if !keyed(&h) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    // Before the webhook call the newest is 17; after it, 20 too.
    let ids: &[&str] = if w.hooks.lock().unwrap().is_empty() {
        &["17"]
    } else {
        &["20", "17"]
    };
    let data: Vec<Value> = ids
        .iter()
        .map(|id| json!({"id": id, "workflowId": WF, "status": "success", "mode": "webhook"}))
        .collect();
    Json(json!({"data": data, "nextCursor": null})).into_response()
}

async fn stop(State(w): State<World>, h: HeaderMap, Path(id): Path<String>) -> Response {
    if !keyed(&h) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    w.stopped.lock().unwrap().push(id.clone());
    Json(json!({"id": id, "status": "canceled"})).into_response()
}

async fn webhook(
    State(w): State<World>,
    h: HeaderMap,
    method: axum::http::Method,
    Path(path): Path<String>,
    Query(q): Query<HashMap<String, String>>,
    body: String,
) -> Response {
    // A production webhook takes no API key: none may be sent.
    assert!(h.get("x-n8n-api-key").is_none() && h.get(header::COOKIE).is_none());
    assert_eq!(path, "mcp-demo");
    let body: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    w.hooks.lock().unwrap().push((method.to_string(), q, body));
    Json(json!({"message": "Workflow was started"})).into_response()
}

async fn start(active: bool) -> (String, World) {
    let w = World::default();
    *w.active.lock().unwrap() = active;
    let app = Router::new()
        .route("/api/v1/workflows/{id}", get(workflow))
        .route("/api/v1/executions", get(executions))
        .route("/api/v1/executions/{id}", get(execution))
        .route("/api/v1/executions/{id}/stop", post(stop))
        .route("/rest/login", post(login))
        .route("/rest/workflows/{id}/run", post(run))
        .route("/webhook/{path}", axum::routing::any(webhook))
        .with_state(w.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), w)
}

fn n8n(base: &str, login: bool) -> Plugin {
    plugin(N8nConfig {
        timeout: Duration::from_secs(10),
        allow_private: true,
        login: login.then(|| N8nLogin {
            email: "owner@example.com".into(),
            password: "pw".into(),
        }),
        ..N8nConfig::new(base, KEY)
    })
    .unwrap()
}

#[tokio::test]
async fn verify_pins_the_input_on_the_trigger_and_reports_evidence() {
    let (base, w) = start(true).await;
    let p = n8n(&base, true);
    let v = call(
        &p,
        "n8n.workflows.verify",
        json!({"workflowId": WF, "inputData": {"name": "Bo", "qty": 1}}),
    )
    .await
    .unwrap();
    assert_clean(&v, "verify");
    assert_eq!(v["success"], true, "{v}");
    assert_eq!(v["executionId"], "21");
    assert_eq!(v["evidence"]["trigger"]["name"], "Webhook");
    assert_eq!(v["evidence"]["nodes"].as_array().unwrap().len(), 3, "{v}");
    // The input reached n8n as the webhook trigger's own output; nothing else was sent.
    let body = w.runs.lock().unwrap()[0].clone();
    assert_eq!(
        body,
        json!({"triggerToStartFrom": {"name": "Webhook", "data": {
            "startTime": 0, "executionTime": 0, "executionIndex": 0, "source": [],
            "data": {"main": [[{"json": {"headers": {}, "params": {}, "query": {}, "body": {"name": "Bo", "qty": 1}}}]]}}}})
    );
    // It waited through a `running` read.
    assert!(w.reads.lock().unwrap()["21"] >= 2);

    let bad = call(
        &p,
        "n8n.workflows.verify",
        json!({"workflowId": WF, "inputData": {"name": "Mal", "fail": true}}),
    )
    .await
    .unwrap();
    assert_eq!(bad["success"], false);
    assert_eq!(bad["status"], "error");
    assert_eq!(bad["failedNode"]["name"], "Validate Order", "{bad}");
    assert_eq!(bad["failedNode"]["type"], "n8n-nodes-base.code");
    assert!(bad["failedNode"]["error"]["message"].is_string(), "{bad}");
}

#[tokio::test]
async fn run_of_an_active_webhook_workflow_goes_through_its_url() {
    let (base, w) = start(true).await;
    // No login: the production webhook needs none.
    let p = n8n(&base, false);
    let r = call(
        &p,
        "n8n.workflows.run",
        json!({"workflowId": WF, "inputData": {"query": {"src": "t"}, "body": {"name": "Ann"}}}),
    )
    .await
    .unwrap();
    assert_eq!(r["via"], "webhook", "{r}");
    assert_eq!(r["executionId"], "20");
    assert_eq!(r["status"], "success");
    assert!(r["startedAt"].is_string() && r["finishedAt"].is_string());
    assert_eq!(r["data"]["node"], "Validate Order");
    assert!(r["data"]["sample"][0]["greeting"].is_string(), "{r}");
    let hooks = w.hooks.lock().unwrap().clone();
    assert_eq!(hooks.len(), 1);
    assert_eq!(hooks[0].0, "POST");
    assert_eq!(hooks[0].1["src"], "t");
    assert_eq!(hooks[0].2, json!({"name": "Ann"}));
    assert!(w.runs.lock().unwrap().is_empty());
}

#[tokio::test]
async fn manual_runs_need_the_login_and_say_so() {
    let (base, _w) = start(false).await;
    let p = n8n(&base, false);
    let e = call(
        &p,
        "n8n.workflows.run",
        json!({"workflowId": WF, "inputData": {}}),
    )
    .await
    .unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::Unauthorized);
    assert!(e.message.contains("email and password"), "{}", e.message);
    let e = call(
        &p,
        "n8n.workflows.verify",
        json!({"workflowId": WF, "triggerNode": "Nope"}),
    )
    .await
    .unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::InvalidInput);
    assert!(e.message.contains("'Nope'"), "{}", e.message);
}

#[tokio::test]
async fn a_run_past_its_timeout_is_stopped() {
    let (base, w) = start(false).await;
    let p = n8n(&base, true);
    let t = Instant::now();
    let r = call(
        &p,
        "n8n.workflows.run",
        json!({"workflowId": WF, "inputData": {"hang": true}, "timeout": 1500}),
    )
    .await
    .unwrap();
    assert!(t.elapsed() >= Duration::from_millis(1500), "{r}");
    assert_eq!(w.stopped.lock().unwrap().as_slice(), ["30".to_string()]);
    assert_eq!(r["status"], "canceled", "{r}");
    assert!(r["error"]["timeout"].is_string(), "{r}");
}
