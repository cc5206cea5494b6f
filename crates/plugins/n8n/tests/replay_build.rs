//! Building workflows against a small stateful n8n that answers as 2.41.1 does (shapes recorded
//! from a live instance: the seeded workflows as `GET /workflows/:id` returns them, the node and
//! credential types they use, the history, dynamic-parameter and licence answers):
//! `get_as_code` → `build` round trips within half the raw JSON's tokens, mistakes are refused
//! with each problem named, a patch fixes them, versions are listed, read and restored, lookups
//! send what the editor sends, credential setup waits for a credential a person makes, and test
//! executions are cleaned up.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use toolshed_core::{Plugin, ToolErrorKind};
use toolshed_n8n::code::{comparable, to_code};
use toolshed_n8n::{plugin, N8nConfig, N8nLogin};
use toolshed_store::Store;

use crate::common::{call, call_in, fixture, o200k};

const KEY: &str = "replay-key-build";
const COOKIE: &str = "n8n-auth=replay-build";
const LICENCE: &str = "Plan lacks license for this feature";

#[derive(Default)]
struct Inner {
    workflows: BTreeMap<String, Value>,
    history: BTreeMap<String, Vec<Value>>,
    credentials: Vec<Value>,
    executions: Vec<Value>,
    deleted: Vec<String>,
    lookups: Vec<Value>,
    saves: usize,
}

#[derive(Clone, Default)]
struct N8n(Arc<Mutex<Inner>>);

fn keyed(h: &HeaderMap) -> bool {
    h.get("x-n8n-api-key").and_then(|v| v.to_str().ok()) == Some(KEY)
}

fn signed_in(h: &HeaderMap) -> bool {
    h.get(header::COOKIE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|c| c.contains(COOKIE))
}

fn refused(status: StatusCode, message: &str) -> Response {
    (status, Json(json!({"message": message}))).into_response()
}

impl Inner {
    /// Stores a workflow as n8n does: a new versionId and a history entry on every save.
    fn save(&mut self, id: &str, mut w: Value) -> Value {
        self.saves += 1;
        let version = format!("v-{id}-{}", self.saves);
        w["id"] = json!(id);
        w["versionId"] = json!(version);
        w["updatedAt"] = json!(format!("2026-11-27T08:00:{:02}.000Z", self.saves % 60));
        for (i, n) in w["nodes"].as_array_mut().unwrap().iter_mut().enumerate() {
            if n.get("id").is_none() {
                n["id"] = json!(format!("{id}-node-{}-{i}", self.saves));
            }
        }
        self.history.entry(id.to_string()).or_default().insert(
            0,
            json!({"versionId": version, "workflowId": id, "nodes": w["nodes"], "connections": w["connections"],
                   "authors": "Test Owner", "name": null, "description": null, "autosaved": false,
                   "createdAt": w["updatedAt"], "updatedAt": w["updatedAt"]}),
        );
        self.workflows.insert(id.to_string(), w.clone());
        w
    }
}

/// The public API's body check for workflows (`nodes[i].credentials` must be an object when
/// given, only writable keys).
fn check_body(b: &Value) -> Result<(), String> {
    for (i, n) in b["nodes"].as_array().ok_or("nodes")?.iter().enumerate() {
        if let Some(c) = n.get("credentials") {
            if !c.is_object() {
                return Err(format!(
                    "request/body/nodes/{i}/credentials Expected object, received {c}"
                ));
            }
        }
    }
    for k in b.as_object().unwrap().keys() {
        if ![
            "name",
            "nodes",
            "connections",
            "settings",
            "staticData",
            "description",
            "projectId",
        ]
        .contains(&k.as_str())
        {
            return Err(format!(
                "request/body must NOT have additional properties ({k})"
            ));
        }
    }
    Ok(())
}

async fn workflow(State(s): State<N8n>, h: HeaderMap, Path(id): Path<String>) -> Response {
    if !keyed(&h) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    match s.0.lock().unwrap().workflows.get(&id) {
        Some(w) => Json(w.clone()).into_response(),
        None => refused(StatusCode::NOT_FOUND, "Not Found"),
    }
}

async fn put_workflow(
    State(s): State<N8n>,
    h: HeaderMap,
    Path(id): Path<String>,
    Json(b): Json<Value>,
) -> Response {
    if !keyed(&h) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    if let Err(e) = check_body(&b) {
        return refused(StatusCode::BAD_REQUEST, &e);
    }
    let mut inner = s.0.lock().unwrap();
    let Some(current) = inner.workflows.get(&id).cloned() else {
        return refused(StatusCode::NOT_FOUND, "Not Found");
    };
    let mut w = current;
    for k in ["name", "nodes", "connections", "settings", "staticData"] {
        if let Some(v) = b.get(k) {
            w[k] = v.clone();
        }
    }
    Json(inner.save(&id, w)).into_response()
}

async fn create_workflow(State(s): State<N8n>, h: HeaderMap, Json(b): Json<Value>) -> Response {
    if !keyed(&h) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    if let Err(e) = check_body(&b) {
        return refused(StatusCode::BAD_REQUEST, &e);
    }
    let mut inner = s.0.lock().unwrap();
    let id = format!("NEW{:013}", inner.workflows.len());
    let mut w = b.clone();
    w["active"] = json!(false);
    w["isArchived"] = json!(false);
    Json(inner.save(&id, w)).into_response()
}

/// Credentials two to a page (whatever `limit` asks), so that readers must follow the cursor.
async fn credentials(
    State(s): State<N8n>,
    h: HeaderMap,
    Query(q): Query<BTreeMap<String, String>>,
) -> Response {
    if !keyed(&h) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let all = s.0.lock().unwrap().credentials.clone();
    let from: usize = q.get("cursor").and_then(|c| c.parse().ok()).unwrap_or(0);
    let page: Vec<Value> = all.iter().skip(from).take(2).cloned().collect();
    let next = (from + 2 < all.len()).then(|| (from + 2).to_string());
    Json(json!({"data": page, "nextCursor": next})).into_response()
}

async fn executions(
    State(s): State<N8n>,
    h: HeaderMap,
    Query(q): Query<BTreeMap<String, String>>,
) -> Response {
    if !keyed(&h) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let inner = s.0.lock().unwrap();
    let data: Vec<&Value> = inner
        .executions
        .iter()
        .filter(|e| {
            q.get("workflowId")
                .is_none_or(|w| e["workflowId"] == w.as_str())
        })
        .collect();
    Json(json!({"data": data, "nextCursor": null})).into_response()
}

async fn delete_execution(State(s): State<N8n>, h: HeaderMap, Path(id): Path<String>) -> Response {
    if !keyed(&h) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let mut inner = s.0.lock().unwrap();
    inner.executions.retain(|e| e["id"] != id.as_str());
    inner.deleted.push(id.clone());
    Json(json!({"id": id})).into_response()
}

async fn login(Json(body): Json<Value>) -> Response {
    if body["password"] != "pw" {
        return refused(StatusCode::UNAUTHORIZED, "Wrong username or password");
    }
    (
        [(header::SET_COOKIE, format!("{COOKIE}; Path=/; HttpOnly"))],
        Json(json!({"data": {"id": "u1"}})),
    )
        .into_response()
}

async fn node_types(h: HeaderMap) -> Response {
    if !signed_in(&h) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    Json(fixture("node-types-build-2.41.1.json.gz")).into_response()
}

async fn credential_types(h: HeaderMap) -> Response {
    if !signed_in(&h) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    Json(fixture("credential-types-2.41.1-subset.json")).into_response()
}

async fn history(
    State(s): State<N8n>,
    h: HeaderMap,
    Path(id): Path<String>,
    Query(q): Query<BTreeMap<String, String>>,
) -> Response {
    if !keyed(&h) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let limit: usize = q.get("limit").and_then(|t| t.parse().ok()).unwrap_or(100);
    let skip: usize = q.get("cursor").and_then(|t| t.parse().ok()).unwrap_or(0);
    let all =
        s.0.lock()
            .unwrap()
            .history
            .get(&id)
            .cloned()
            .unwrap_or_default();
    let more = all.len() > skip + limit;
    let page: Vec<Value> = all
        .into_iter()
        .skip(skip)
        .take(limit)
        .map(|mut v| {
            let o = v.as_object_mut().unwrap();
            o.remove("nodes");
            o.remove("connections");
            v
        })
        .collect();
    let next = if more {
        json!((skip + limit).to_string())
    } else {
        Value::Null
    };
    Json(json!({"data": page, "nextCursor": next})).into_response()
}

async fn version(
    State(s): State<N8n>,
    h: HeaderMap,
    Path((id, version)): Path<(String, String)>,
) -> Response {
    if !keyed(&h) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let all =
        s.0.lock()
            .unwrap()
            .history
            .get(&id)
            .cloned()
            .unwrap_or_default();
    match all.into_iter().find(|v| v["versionId"] == version.as_str()) {
        Some(v) => Json(v).into_response(),
        None => refused(StatusCode::NOT_FOUND, "Version not found"),
    }
}

/// The public API's folders on a community instance.
async fn folders(h: HeaderMap) -> Response {
    if !keyed(&h) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    refused(
        StatusCode::FORBIDDEN,
        "Your license does not allow for feat:folders. To enable feat:folders, please upgrade to a license that supports this feature.",
    )
}

/// Licensed features of a community instance: refused as n8n refuses them.
async fn licensed(h: HeaderMap) -> Response {
    if !signed_in(&h) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    refused(StatusCode::FORBIDDEN, LICENCE)
}

async fn rest_workflow(State(s): State<N8n>, h: HeaderMap, Path(id): Path<String>) -> Response {
    if !signed_in(&h) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    match s.0.lock().unwrap().workflows.get(&id) {
        Some(w) => Json(json!({"data": w})).into_response(),
        None => refused(StatusCode::NOT_FOUND, "Could not find workflow"),
    }
}

async fn personal(h: HeaderMap) -> Response {
    if !signed_in(&h) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    Json(json!({"data": {"id": "BUaiYbn5OOmPKllD", "type": "personal"}})).into_response()
}

async fn lookup(State(s): State<N8n>, h: HeaderMap, Json(b): Json<Value>) -> Response {
    if !signed_in(&h) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    s.0.lock().unwrap().lookups.push(b.clone());
    if b["methodName"] == "searchWorkflows" {
        if b["credentials"]["n8nApi"]["id"].is_null() {
            return refused(
                StatusCode::BAD_REQUEST,
                "Node does not have any credentials set for \"n8nApi\"",
            );
        }
        let results: Vec<Value> = s
            .0
            .lock()
            .unwrap()
            .workflows
            .values()
            .map(|w| json!({"name": format!("{} (#{})", w["name"].as_str().unwrap(), w["id"].as_str().unwrap()), "value": w["id"]}))
            .collect();
        return Json(json!({"data": {"results": results}})).into_response();
    }
    // More columns than one answer holds, the one looked for last.
    let mut columns: Vec<Value> = (0..150)
        .map(|i| json!({"name": format!("col{i} (string)"), "value": format!("col{i}"), "type": "string"}))
        .collect();
    columns.push(json!({"name": "createdAt (date)", "value": "createdAt", "type": "date"}));
    Json(json!({"data": columns})).into_response()
}

async fn start() -> (String, N8n) {
    let s = N8n::default();
    {
        let mut inner = s.0.lock().unwrap();
        for w in fixture("seeded-workflows-2.41.1.raw.json")
            .as_array()
            .unwrap()
        {
            inner
                .workflows
                .insert(w["id"].as_str().unwrap().to_string(), w.clone());
        }
    }
    let app = Router::new()
        .route("/api/v1/workflows", post(create_workflow))
        .route("/api/v1/workflows/{id}", get(workflow).put(put_workflow))
        .route("/api/v1/credentials", get(credentials))
        .route("/api/v1/executions", get(executions))
        .route(
            "/api/v1/executions/{id}",
            axum::routing::delete(delete_execution),
        )
        .route("/rest/login", post(login))
        .route("/types/nodes.json", get(node_types))
        .route("/types/credentials.json", get(credential_types))
        .route("/api/v1/workflows/{id}/history", get(history))
        .route("/api/v1/workflows/{id}/versions/{v}", get(version))
        .route("/api/v1/projects/{p}/folders", get(folders).post(folders))
        .route(
            "/rest/workflow-history/workflow/{id}/versions/{v}",
            patch(licensed),
        )
        .route("/rest/projects/personal", get(personal))
        .route("/rest/workflows/{id}", get(rest_workflow).patch(licensed))
        .route("/rest/dynamic-node-parameters/options", post(lookup))
        .route(
            "/rest/dynamic-node-parameters/resource-locator-results",
            post(lookup),
        )
        .with_state(s.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), s)
}

async fn n8n(base: &str) -> Plugin {
    plugin(N8nConfig {
        timeout: Duration::from_secs(10),
        allow_private: true,
        login: Some(N8nLogin {
            email: "owner@example.com".into(),
            password: "pw".into(),
        }),
        state: Some(Store::open("sqlite::memory:").await.unwrap()),
        ..N8nConfig::new(base, KEY)
    })
    .unwrap()
}

#[tokio::test]
async fn seeded_workflows_round_trip_through_their_text_within_half_the_tokens() {
    let (base, s) = start().await;
    let p = n8n(&base).await;
    let seeded = fixture("seeded-workflows-2.41.1.raw.json");
    let (mut text_tokens, mut raw_tokens) = (0, 0);
    for raw in seeded.as_array().unwrap() {
        let id = raw["id"].as_str().unwrap();
        let got = call(&p, "n8n.workflows.get_as_code", json!({"workflowId": id}))
            .await
            .unwrap();
        let text = got["code"].as_str().unwrap();
        assert_eq!(text, to_code(raw));
        text_tokens += o200k(&json!(text));
        raw_tokens += o200k(raw);
        let built = call(
            &p,
            "n8n.workflows.build",
            json!({"workflowId": id, "code": text}),
        )
        .await
        .unwrap_or_else(|e| panic!("{}: {e} {:?}", raw["name"], e.data));
        assert_eq!(built["saved"], true);
        let after = s.0.lock().unwrap().workflows[id].clone();
        assert_eq!(comparable(&after), comparable(raw), "{}", raw["name"]);
        assert_ne!(after["versionId"], raw["versionId"], "saved anew");
        let ids = |w: &Value| -> Vec<Value> {
            w["nodes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|n| n["id"].clone())
                .collect()
        };
        assert_eq!(ids(&after), ids(raw), "node ids are kept");
    }
    let ratio = text_tokens as f64 / raw_tokens as f64;
    println!(
        "workflow text: {text_tokens} o200k tokens vs {raw_tokens} raw ({:.0} %)",
        ratio * 100.0
    );
    assert!(ratio <= 0.5, "{ratio}");
}

#[tokio::test]
async fn mistakes_are_named_a_patch_fixes_them_and_versions_are_kept() {
    let (base, s) = start().await;
    let p = n8n(&base).await;
    let text = "workflow \"Build test\"\nnode \"Hook\" webhook@2 [0,0]\n  parameters {\"path\":\"t\",\"httpMethod\":\"PUT\",\"colour\":\"red\"}\nnode \"Shape\" set@3.4 [220,0]\n  parameters {\"includeOtherFields\":\"yes\"}\nnode \"Later\" noOp@7 [440,0]\n\"Hook\" -> \"Shape\"\n\"Shape\"[1] -> \"Later\"\n";
    let e = call(&p, "n8n.workflows.build", json!({"code": text}))
        .await
        .unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::InvalidInput);
    for part in [
        "node \"Hook\", parameter 'colour': n8n-nodes-base.webhook@2 has no parameter 'colour'",
        "node \"Shape\", parameter 'includeOtherFields': must be true or false (type boolean), got \"yes\"",
        "node \"Later\": typeVersion 7 is not a version of n8n-nodes-base.noOp (installed: 1)",
        "node \"Shape\": \"Shape\" has 1 'main' output(s) (indexes 0-0); output 1 does not exist",
    ] {
        assert!(e.message.contains(part), "{part}\n{}", e.message);
    }
    assert_eq!(
        e.data.as_ref().unwrap()["problems"]
            .as_array()
            .unwrap()
            .len(),
        4
    );
    assert!(s.0.lock().unwrap().saves == 0, "nothing saved");
    // A line that cannot be read names its line.
    let e = call(
        &p,
        "n8n.workflows.build",
        json!({"code": "workflow \"x\"\nnode \"A\" set\n"}),
    )
    .await
    .unwrap_err();
    assert!(
        e.message
            .contains("line 2: node \"A\": expected type@version"),
        "{e}"
    );
    // Patches apply to the text last sent (the unreadable one): fix it back to the first.
    let e = call(
        &p,
        "n8n.workflows.build",
        json!({"patches": [{"old": "colour", "new": "x"}]}),
    )
    .await
    .unwrap_err();
    assert!(
        e.message
            .contains("patch 0: 'old' (\"colour\") is not in the text"),
        "{e}"
    );
    call(&p, "n8n.workflows.build", json!({"code": text}))
        .await
        .unwrap_err();
    let saved = call(
        &p,
        "n8n.workflows.build",
        json!({"patches": [
            {"old": ",\"colour\":\"red\"", "new": ""},
            {"old": "\"yes\"", "new": "true"},
            {"old": "noOp@7", "new": "noOp@1"},
            {"old": "\"Shape\"[1]", "new": "\"Shape\""},
        ]}),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let id = saved["workflowId"].as_str().unwrap().to_string();
    let first = saved["versionId"].as_str().unwrap().to_string();
    assert_eq!(saved["nodeCount"], 3);
    // Patching the saved workflow's text (its id now) adds a node.
    call(
        &p,
        "n8n.workflows.build",
        json!({"workflowId": id, "patches": [{"old": "\"Shape\" -> \"Later\"", "new": "\"Shape\" -> \"Later\"\nnode \"Extra\" noOp@1 [660,0]"}]}),
    )
    .await
    .unwrap();
    let list = call(
        &p,
        "n8n.workflows.versions.list",
        json!({"workflowId": id, "limit": 1}),
    )
    .await
    .unwrap();
    assert_eq!(list["versions"].as_array().unwrap().len(), 1);
    assert_eq!(list["nextCursor"], "1");
    let rest = call(
        &p,
        "n8n.workflows.versions.list",
        json!({"workflowId": id, "cursor": "1"}),
    )
    .await
    .unwrap();
    assert_eq!(rest["versions"][0]["versionId"], json!(first));
    assert!(list["versions"][0].get("nodes").is_none());
    let old = call(
        &p,
        "n8n.workflows.versions.get",
        json!({"workflowId": id, "versionId": first}),
    )
    .await
    .unwrap();
    assert_eq!(old["current"], false);
    assert!(
        old["code"]
            .as_str()
            .unwrap()
            .starts_with("workflow \"Build test\"\n"),
        "{old}"
    );
    assert!(!old["code"].as_str().unwrap().contains("Extra"));
    let restored = call(
        &p,
        "n8n.workflows.versions.restore",
        json!({"workflowId": id, "versionId": first}),
    )
    .await
    .unwrap();
    assert_eq!(restored["restoredFrom"], json!(first));
    assert_eq!(restored["nodeCount"], 3);
    // Changed in n8n meanwhile: patches apply to the workflow as n8n has it now, never to the
    // older text (which would undo the change).
    {
        let mut inner = s.0.lock().unwrap();
        let mut w = inner.workflows[&id].clone();
        w["name"] = json!("Renamed in n8n");
        inner.save(&id, w);
    }
    let e = call(
        &p,
        "n8n.workflows.build",
        json!({"workflowId": id, "patches": [{"old": "workflow \"Build test\"", "new": "workflow \"Mine\""}]}),
    )
    .await
    .unwrap_err();
    assert!(e.message.contains("is not in the text"), "{e}");
    assert_eq!(s.0.lock().unwrap().workflows[&id]["name"], "Renamed in n8n");
    let missing = call(
        &p,
        "n8n.workflows.versions.get",
        json!({"workflowId": id, "versionId": "nope"}),
    )
    .await
    .unwrap_err();
    assert_eq!(missing.kind, ToolErrorKind::NotFound);
    assert!(
        missing.message.contains("has no version 'nope'"),
        "{missing}"
    );
    let renamed = call(
        &p,
        "n8n.workflows.versions.rename",
        json!({"workflowId": id, "versionId": first, "name": "v1"}),
    )
    .await
    .unwrap_err();
    assert!(
        renamed.message.contains("licensed n8n feature"),
        "{renamed}"
    );
    let folders = call(&p, "n8n.folders.list", json!({})).await.unwrap_err();
    assert!(folders.message.contains("feat:folders"), "{folders}");
    let moved = call(
        &p,
        "n8n.workflows.move",
        json!({"workflowId": id, "folderId": "f1"}),
    )
    .await;
    // The fake refuses PATCH like a community n8n refuses folders.
    assert!(moved.unwrap_err().message.contains("feat:folders"));
}

#[tokio::test]
async fn lookups_send_what_the_editor_sends_and_setup_waits_for_a_person() {
    let (base, s) = start().await;
    let p = n8n(&base).await;
    s.0.lock().unwrap().credentials = vec![
        json!({"id": "c1", "name": "My n8n", "type": "n8nApi", "createdAt": "2026-11-27T07:00:00.000Z"}),
        json!({"id": "c2", "name": "Old header", "type": "httpHeaderAuth", "createdAt": "2026-11-27T07:00:00.000Z"}),
    ];
    let found = call(
        &p,
        "n8n.nodes.explore_resources",
        json!({"nodeType": "n8n-nodes-base.n8n", "resource": "workflowId", "credentialId": "c1", "filter": "loop",
               "parameters": {"resource": "workflow", "operation": "get"}}),
    )
    .await
    .unwrap();
    assert_eq!(found["source"], "list search");
    assert_eq!(found["values"].as_array().unwrap().len(), 5, "{found}");
    let sent = s.0.lock().unwrap().lookups[0].clone();
    assert_eq!(
        sent,
        json!({"path": "parameters.workflowId", "nodeTypeAndVersion": {"name": "n8n-nodes-base.n8n", "version": 1},
               "currentNodeParameters": {"resource": "workflow", "operation": "get"},
               "credentials": {"n8nApi": {"id": "c1", "name": "My n8n"}},
               "methodName": "searchWorkflows", "filter": "loop"})
    );
    let wrong = call(
        &p,
        "n8n.nodes.explore_resources",
        json!({"nodeType": "n8n-nodes-base.n8n", "resource": "workflowId", "credentialId": "c2"}),
    )
    .await
    .unwrap_err();
    assert!(
        wrong
            .message
            .contains("of type 'httpHeaderAuth', which this node does not take"),
        "{wrong}"
    );
    let options = call(
        &p,
        "n8n.nodes.explore_resources",
        json!({"nodeType": "n8n-nodes-base.dataTable", "resource": "orderByColumn", "filter": "created"}),
    )
    .await
    .unwrap();
    assert_eq!(
        options["values"],
        json!([{"name": "createdAt (date)", "value": "createdAt"}])
    );
    assert_eq!(
        s.0.lock().unwrap().lookups[1]["methodName"],
        "getDataTableColumns"
    );
    let fixed = call(
        &p,
        "n8n.nodes.explore_resources",
        json!({"nodeType": "n8n-nodes-base.webhook", "resource": "httpMethod"}),
    )
    .await
    .unwrap();
    assert_eq!(fixed["source"], "node type");
    assert!(fixed["values"]
        .as_array()
        .unwrap()
        .iter()
        .any(|v| v["value"] == "POST"));
    let free = call(
        &p,
        "n8n.nodes.explore_resources",
        json!({"nodeType": "n8n-nodes-base.webhook", "resource": "path"}),
    )
    .await
    .unwrap_err();
    assert!(free.message.contains("takes free values"), "{free}");

    // Credential types by words.
    let t = call(
        &p,
        "n8n.credentials.search_types",
        json!({"query": "slack"}),
    )
    .await
    .unwrap();
    let names: Vec<&str> = t["types"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names[0], "slackApi", "{t}");
    assert!(names.contains(&"slackOAuth2Api"));
    // Setup asks with n8n's page, remembers what existed, and answers the credential made since.
    let ask = call_in(
        &p,
        "n8n.credentials.setup",
        json!({"credentialType": "httpHeaderAuth"}),
        Some("ex_1"),
    )
    .await
    .unwrap_err();
    assert_eq!(ask.kind, ToolErrorKind::ActionRequired);
    assert_eq!(
        ask.data.as_ref().unwrap()["url"],
        format!("{base}/home/credentials/create")
    );
    assert!(ask.message.contains("'Header Auth' credential"), "{ask}");
    let again = call_in(
        &p,
        "n8n.credentials.setup",
        json!({"credentialType": "httpHeaderAuth"}),
        Some("ex_1"),
    )
    .await
    .unwrap_err();
    assert_eq!(
        again.kind,
        ToolErrorKind::ActionRequired,
        "nothing new yet: asks again"
    );
    s.0.lock().unwrap().credentials.push(
        json!({"id": "c3", "name": "New header", "type": "httpHeaderAuth", "createdAt": "2026-11-27T08:00:00.000Z"}),
    );
    let done = call_in(
        &p,
        "n8n.credentials.setup",
        json!({"credentialType": "httpHeaderAuth"}),
        Some("ex_1"),
    )
    .await
    .unwrap();
    assert_eq!(done["credentialId"], "c3");
    // A second setup of the type in the same execution asks anew (c3 counts as existing).
    let anew = call_in(
        &p,
        "n8n.credentials.setup",
        json!({"credentialType": "httpHeaderAuth"}),
        Some("ex_1"),
    )
    .await
    .unwrap_err();
    assert_eq!(anew.kind, ToolErrorKind::ActionRequired, "{anew}");
    let unknown = call_in(
        &p,
        "n8n.credentials.setup",
        json!({"credentialType": "nopeApi"}),
        Some("ex_2"),
    )
    .await
    .unwrap_err();
    assert_eq!(unknown.kind, ToolErrorKind::NotFound);

    // A workflow whose n8n node has no credential: setup links to the editor; assigned, ready.
    let built = call(
        &p,
        "n8n.workflows.build",
        json!({"code": "workflow \"Needs cred\"\nnode \"Start\" manualTrigger@1 [0,0]\nnode \"Get\" n8n@1 [220,0]\n  parameters {\"resource\":\"workflow\",\"operation\":\"get\",\"workflowId\":{\"__rl\":true,\"mode\":\"id\",\"value\":\"x\"}}\n\"Start\" -> \"Get\"\n"}),
    )
    .await
    .unwrap();
    let id = built["workflowId"].as_str().unwrap().to_string();
    let ask = call(&p, "n8n.workflows.setup", json!({"workflowId": id}))
        .await
        .unwrap_err();
    assert_eq!(ask.kind, ToolErrorKind::ActionRequired);
    let data = ask.data.unwrap();
    assert_eq!(data["url"], format!("{base}/workflow/{id}"));
    assert_eq!(
        data["missing"],
        json!([{"node": "Get", "credentialType": "n8nApi", "problem": "none assigned"}])
    );
    let bad_cred = call(
        &p,
        "n8n.workflows.build",
        json!({"workflowId": id, "patches": [{"old": "  parameters {\"resource\"", "new": "  credentials {\"n8nApi\":\"c2\"}\n  parameters {\"resource\""}]}),
    )
    .await
    .unwrap_err();
    assert!(
        bad_cred
            .message
            .contains("the credential 'c2' is of type 'httpHeaderAuth', not 'n8nApi'"),
        "{bad_cred}"
    );
    call(
        &p,
        "n8n.workflows.build",
        json!({"workflowId": id, "patches": [{"old": "\"c2\"", "new": "\"c1\""}]}),
    )
    .await
    .unwrap();
    let stored = s.0.lock().unwrap().workflows[&id].clone();
    assert_eq!(
        stored["nodes"][1]["credentials"],
        json!({"n8nApi": {"id": "c1", "name": "My n8n"}})
    );
    let ready = call(&p, "n8n.workflows.setup", json!({"workflowId": id}))
        .await
        .unwrap();
    assert_eq!(ready["ready"], true);

    // Cleanup deletes finished manual executions only.
    s.0.lock().unwrap().executions = vec![
        json!({"id": "1", "workflowId": id, "mode": "manual", "status": "success"}),
        json!({"id": "2", "workflowId": id, "mode": "webhook", "status": "success"}),
        json!({"id": "3", "workflowId": id, "mode": "manual", "status": "running"}),
        json!({"id": "4", "workflowId": id, "mode": "manual", "status": "error"}),
        json!({"id": "5", "workflowId": "other", "mode": "manual", "status": "error"}),
    ];
    let clean = call(&p, "n8n.executions.cleanup", json!({"workflowId": id}))
        .await
        .unwrap();
    assert_eq!(clean["deletedIds"], json!(["1", "4"]), "{clean}");
    assert_eq!(s.0.lock().unwrap().deleted, vec!["1", "4"]);
}
