//! End to end through the tool handlers against a local server replaying real n8n 2.41.1
//! replies (executions by id, workflows, 401 on a bad key, 403, unknown routes). The server is
//! shared with [`crate::replay_tools`], which adds list filters and paging, execution and
//! workflow actions, credentials, tags, projects, data tables and the editor's login and node
//! catalog.

use crate::common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::routing::{get, patch, post};
use axum::{Json, Router};
use common::{assert_clean, fixture, fixture_text};
use serde_json::{json, Value};
use toolshed_core::{Plugin, ToolContext, ToolError, ToolErrorKind, ToolPath};
use toolshed_n8n::{plugin, N8nConfig};

pub(crate) const KEY: &str = "test-key-0123456789";

/// What the replay server saw, and the state of its data table.
#[derive(Clone, Default)]
pub(crate) struct Seen {
    pub requests: Arc<Mutex<Vec<String>>>,
    pub bodies: Arc<Mutex<Vec<Value>>>,
    pub rows: Arc<Mutex<Vec<Value>>>,
    pub logins: Arc<Mutex<usize>>,
    pub catalog_reads: Arc<Mutex<usize>>,
}

pub(crate) type Reply = (StatusCode, Json<Value>);

pub(crate) fn authorized(headers: &HeaderMap) -> Result<(), Reply> {
    match headers.get("x-n8n-api-key").and_then(|v| v.to_str().ok()) {
        Some(KEY) => Ok(()),
        _ => Err((
            StatusCode::UNAUTHORIZED,
            Json(json!({"message": "Unauthorized"})),
        )),
    }
}

pub(crate) fn ok(v: Value) -> Reply {
    (StatusCode::OK, Json(v))
}

pub(crate) fn not_found() -> Reply {
    (StatusCode::NOT_FOUND, Json(json!({"message": "Not Found"})))
}

async fn execution(
    State(seen): State<Seen>,
    headers: HeaderMap,
    uri: Uri,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Reply {
    seen.requests.lock().unwrap().push(uri.to_string());
    if let Err(e) = authorized(&headers) {
        return e;
    }
    let with_data = q.get("includeData").map(String::as_str) == Some("true");
    let ignore_limit = q.get("ignoreDataSizeLimit").map(String::as_str) == Some("true");
    let name = match (id.as_str(), with_data) {
        ("1", false) => "execution-success-id1.metadata-only.json",
        ("2", false) => "execution-error-id2.metadata-only.json",
        ("1", true) => "execution-success-id1.includeData.raw.json",
        ("2", true) => "execution-error-id2.includeData.raw.json",
        ("3", true) => "execution-loop-success-id3.includeData.raw.json",
        ("4", true) => "execution-nodeapierror-id4.includeData.raw.json",
        ("5", true) => "execution-erroroutput-nodeoperationerror-id5.includeData.raw.json",
        ("6", true) if ignore_limit => "execution-big-id6.includeData.raw.json.gz",
        ("6", true) => "execution-big-id6.includeData.dataTooLargeToDisplay.raw.json",
        ("7", true) => "execution-error-id2.with-sticky-note.raw.json",
        ("8", true) => "execution-error-id2.input-override.raw.json",
        _ => return not_found(),
    };
    ok(fixture(name))
}

fn wf1() -> Value {
    fixture("GET-workflow-response-wf1.json")
}

async fn workflows(
    State(seen): State<Seen>,
    headers: HeaderMap,
    method: Method,
    uri: Uri,
    body: Option<Json<Value>>,
) -> Reply {
    seen.requests
        .lock()
        .unwrap()
        .push(format!("{method} {uri}"));
    if let Err(e) = authorized(&headers) {
        return e;
    }
    if method == Method::POST {
        let mut b = body.map(|Json(b)| b).unwrap_or_default();
        seen.bodies.lock().unwrap().push(b.clone());
        b["id"] = json!("newWorkflow01");
        b["active"] = json!(false);
        b["isArchived"] = json!(false);
        return ok(b);
    }
    let mut loop_wf = fixture("wf2-loop.json");
    loop_wf["id"] = json!("XTAQHIFPRFkJeRu1");
    loop_wf["isArchived"] = json!(true);
    ok(json!({"data": [wf1(), loop_wf], "nextCursor": null}))
}

async fn workflow(
    State(seen): State<Seen>,
    headers: HeaderMap,
    method: Method,
    Path(id): Path<String>,
    body: Option<Json<Value>>,
) -> Reply {
    seen.requests
        .lock()
        .unwrap()
        .push(format!("{method} /workflows/{id}"));
    if let Err(e) = authorized(&headers) {
        return e;
    }
    if id != "HUxyBqXXCHeIHixX" {
        return not_found();
    }
    match method {
        Method::PUT => {
            let b = body.map(|Json(b)| b).unwrap_or_default();
            seen.bodies.lock().unwrap().push(b.clone());
            let mut w = wf1();
            for (k, v) in b.as_object().unwrap() {
                w[k] = v.clone();
            }
            ok(w)
        }
        _ => ok(wf1()),
    }
}

async fn variables(headers: HeaderMap) -> Reply {
    if let Err(e) = authorized(&headers) {
        return e;
    }
    (
        StatusCode::FORBIDDEN,
        Json(json!({"message": "Your license does not allow for feat:variables."})),
    )
}

async fn credentials(headers: HeaderMap) -> Reply {
    if let Err(e) = authorized(&headers) {
        return e;
    }
    let mut c = fixture("credential-create-response.json");
    c["data"] = json!({"name": "X-Token", "value": "very-secret-value"});
    ok(json!({"data": [c], "nextCursor": null}))
}

/// Starts the replay server; its base URL and what it saw.
pub(crate) async fn start() -> (String, Seen) {
    use crate::replay_tools as r;
    let seen = Seen::default();
    let app = Router::new()
        .route("/api/v1/executions", get(r::executions))
        .route(
            "/api/v1/executions/{id}",
            get(execution).delete(r::execution_delete),
        )
        .route(
            "/api/v1/executions/{id}/{action}",
            post(r::execution_action),
        )
        .route("/api/v1/workflows", get(workflows).post(workflows))
        .route(
            "/api/v1/workflows/{id}",
            get(workflow).put(workflow).delete(workflow),
        )
        .route("/api/v1/workflows/{id}/{verb}", post(r::workflow_action))
        .route("/api/v1/variables", get(variables))
        .route("/api/v1/credentials", get(credentials))
        .route(
            "/api/v1/credentials/{id}",
            get(r::credential).delete(r::credential),
        )
        .route("/api/v1/credentials/schema/{ty}", get(r::credential_schema))
        .route("/api/v1/tags", get(r::tags))
        .route("/api/v1/projects", get(r::projects))
        .route("/api/v1/data-tables", get(r::data_tables))
        .route("/api/v1/data-tables/{id}/columns", get(r::columns))
        .route(
            "/api/v1/data-tables/{id}/rows",
            get(r::rows_query).post(r::rows_insert),
        )
        .route(
            "/api/v1/data-tables/{id}/rows/update",
            patch(r::rows_update),
        )
        .route("/api/v1/data-tables/{id}/rows/upsert", post(r::rows_upsert))
        .route(
            "/api/v1/data-tables/{id}/rows/delete",
            axum::routing::delete(r::rows_delete),
        )
        .route("/rest/login", post(r::login))
        .route("/types/nodes.json", get(r::node_types))
        .fallback(|| async { (StatusCode::NOT_FOUND, Json(json!({"message": "not found"}))) })
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), seen)
}

/// The plugin for a replay server (private addresses allowed).
pub(crate) fn config(base: &str, key: &str) -> N8nConfig {
    N8nConfig {
        timeout: Duration::from_secs(10),
        allow_private: true,
        ..N8nConfig::new(base, key)
    }
}

pub(crate) fn n8n(base: &str, key: &str) -> Plugin {
    plugin(config(base, key)).unwrap()
}

/// Calls one tool's handler.
pub(crate) async fn call(p: &Plugin, path: &str, args: Value) -> Result<Value, ToolError> {
    let tool = p
        .tools
        .iter()
        .find(|t| t.def.path.as_str() == path)
        .unwrap_or_else(|| panic!("no tool {path}"));
    let ctx = ToolContext::new("tester".into(), ToolPath::parse(path).unwrap());
    tool.handler.call(ctx, args).await
}

#[tokio::test]
async fn execution_summary_then_failed_node_then_debug() {
    let (base, seen) = start().await;
    let p = n8n(&base, KEY);
    let s = call(&p, "n8n.executions.get", json!({"executionId": "2"}))
        .await
        .unwrap();
    assert_eq!(s["status"], "error");
    assert_eq!(s["workflowName"], "MCP demo: webhook -> set -> code");
    assert_eq!(s["error"]["node"], "Validate Order");
    assert_eq!(
        s["_guidance"]["example"],
        "await tools.n8n.executions.get_node({executionId: \"2\", nodeName: \"Validate Order\"})"
    );
    assert!(seen.requests.lock().unwrap()[0].contains("includeData=true"));

    let d = call(
        &p,
        "n8n.executions.get_node",
        json!({"executionId": 2, "nodeName": "Validate Order"}),
    )
    .await
    .unwrap();
    assert_eq!(d["nodeType"], "n8n-nodes-base.code");
    assert_eq!(d["input"]["items"][0]["json"]["greeting"], "hello Mallory");
    assert_eq!(
        d["error"]["message"],
        "Order rejected: hello Mallory (qty=7) [line 4]"
    );
    assert_clean(&d, "get_node");

    let e = call(
        &p,
        "n8n.executions.get_node",
        json!({"executionId": "2", "nodeName": "Nope"}),
    )
    .await
    .unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::NotFound);
    assert!(e
        .message
        .starts_with("Node 'Nope' not found in execution '2'"));
    assert_eq!(e.data.unwrap()["availableNodes"][0], "Webhook");

    let dbg = call(&p, "n8n.executions.debug", json!({"executionId": "5"}))
        .await
        .unwrap();
    assert_eq!(dbg["failedNode"]["nodeName"], "Fail Loudly");
    assert_clean(&dbg, "debug");
}

#[tokio::test]
async fn too_large_execution_is_summarized_then_paged() {
    let (base, _) = start().await;
    let p = n8n(&base, KEY);
    let s = call(&p, "n8n.executions.get", json!({"executionId": "6"}))
        .await
        .unwrap();
    assert_eq!(s["dataTooLargeToDisplay"], true);
    let d = call(
        &p,
        "n8n.executions.get_node",
        json!({"executionId": "6", "nodeName": "Keep Even", "limit": 5}),
    )
    .await
    .unwrap();
    assert_eq!(d["output"]["branches"][0]["totalItems"], 1000);
    assert_eq!(d["output"]["branches"][1]["totalItems"], 1000);
    assert_eq!(d["output"]["branches"][0]["returned"], 5);
}

#[tokio::test]
async fn bad_key_is_a_clear_unauthorized_error_without_the_key() {
    let (base, _) = start().await;
    let secret = "wrong-key-should-never-show";
    let p = n8n(&base, secret);
    let e = call(&p, "n8n.workflows.list", json!({})).await.unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::Unauthorized);
    assert!(
        e.message.starts_with("n8n rejected the API key (401)"),
        "{}",
        e.message
    );
    assert!(!e.message.contains(secret));
}

#[tokio::test]
async fn errors_name_the_cause() {
    let (base, _) = start().await;
    let p = n8n(&base, KEY);
    let e = call(&p, "n8n.executions.get", json!({"executionId": "999"}))
        .await
        .unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::NotFound);
    assert!(e.message.contains("GET /executions/999"));
    // A route the server does not have (n8n's lowercase "not found").
    let client = toolshed_n8n::N8nClient::from_config(&config(&base, KEY)).unwrap();
    let e = client.get("/no-such-route", &[]).await.unwrap_err();
    let e: ToolError = e.into();
    assert_eq!(e.kind, ToolErrorKind::NotFound);
    assert!(e
        .message
        .contains("this n8n version has no endpoint GET /no-such-route"));
    // A missing resource is not a missing route.
    let e = call(&p, "n8n.workflows.unarchive", json!({"workflowId": "nope"}))
        .await
        .unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::NotFound);
    assert!(e.message.contains("Workflow not found"), "{}", e.message);
    let e = call(&p, "n8n.variables.list", json!({})).await.unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::Unauthorized);
    assert!(e.message.contains("scope") && e.message.contains("license"));
    let e = call(
        &p,
        "n8n.executions.get",
        json!({"executionId": "../workflows"}),
    )
    .await
    .unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::InvalidInput);
    let closed = n8n("http://127.0.0.1:9", KEY);
    let e = call(&closed, "n8n.executions.list", json!({}))
        .await
        .unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::Upstream);
    assert!(e.message.contains("unreachable at http://127.0.0.1:9"));
}

#[tokio::test]
async fn workflows_end_to_end() {
    let (base, seen) = start().await;
    let p = n8n(&base, KEY);
    let l = call(&p, "n8n.workflows.list", json!({"archived": false}))
        .await
        .unwrap();
    assert_eq!(l["workflows"].as_array().unwrap().len(), 1);
    assert_eq!(l["workflows"][0]["tags"], json!(["mcp-demo"]));
    let l = call(&p, "n8n.workflows.list", json!({})).await.unwrap();
    assert_eq!(l["workflows"].as_array().unwrap().len(), 2);

    let w = call(
        &p,
        "n8n.workflows.get",
        json!({"workflowId": "HUxyBqXXCHeIHixX"}),
    )
    .await
    .unwrap();
    assert_eq!(w["nodes"].as_array().unwrap().len(), 3);
    assert!(w.get("activeVersion").is_none());

    let u = call(
        &p,
        "n8n.workflows.update",
        json!({"workflowId": "HUxyBqXXCHeIHixX", "name": "Renamed"}),
    )
    .await
    .unwrap();
    assert_eq!(u["name"], "Renamed");
    let sent = seen.bodies.lock().unwrap().last().cloned().unwrap();
    let keys: Vec<&str> = sent
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["name", "nodes", "connections", "settings"]);

    let wf = fixture("wf4-error-output-stop-and-error.json");
    let c = call(
        &p,
        "n8n.workflows.create",
        json!({"name": "Created by test", "nodes": wf["nodes"], "connections": wf["connections"]}),
    )
    .await
    .unwrap();
    assert_eq!(c["id"], "newWorkflow01");
    assert_eq!(c["nodes"].as_array().unwrap().len(), 4);

    let a = call(
        &p,
        "n8n.workflows.archive",
        json!({"workflowId": "HUxyBqXXCHeIHixX"}),
    )
    .await
    .unwrap();
    assert_eq!(a["isArchived"], true);
    let d = call(
        &p,
        "n8n.workflows.delete",
        json!({"workflowId": "HUxyBqXXCHeIHixX"}),
    )
    .await
    .unwrap();
    assert_eq!(d["deleted"], true);

    let n = call(&p, "n8n.nodes.search", json!({"query": "code"}))
        .await
        .unwrap();
    assert_eq!(n["nodeTypes"][0]["nodeType"], "n8n-nodes-base.code");
    assert_eq!(n["workflowsScanned"], 2);
    let t = call(
        &p,
        "n8n.nodes.get_type",
        json!({"nodeType": "n8n-nodes-base.splitInBatches"}),
    )
    .await
    .unwrap();
    assert_eq!(t["usedIn"][0]["nodeName"], "Loop Over Items");
    let e = call(
        &p,
        "n8n.nodes.get_type",
        json!({"nodeType": "n8n-nodes-base.slack"}),
    )
    .await
    .unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::NotFound);
    assert!(e.message.contains("public API cannot list node types"));
}

#[tokio::test]
async fn lists_are_compact_and_secret_free() {
    let (base, _) = start().await;
    let p = n8n(&base, KEY);
    let l = call(&p, "n8n.executions.list", json!({"status": "error"}))
        .await
        .unwrap();
    let ids: Vec<&str> = l["executions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["4", "2"]);
    assert_eq!(l["executions"][1]["duration"], 58);
    assert_eq!(l["executions"][1]["status"], "error");
    let c = call(&p, "n8n.credentials.list", json!({})).await.unwrap();
    assert_eq!(c["credentials"][0]["type"], "httpHeaderAuth");
    assert!(!c.to_string().contains("very-secret-value"));
    // The big fixture is stored gzipped and still readable.
    assert!(fixture_text("execution-big-id6.includeData.raw.json.gz").len() > 400_000);
}
