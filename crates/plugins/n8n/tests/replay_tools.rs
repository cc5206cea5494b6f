//! The replay server's routes for list filters and paging, execution and workflow actions,
//! credentials, tags, projects, data tables and the editor's login and node catalog, and the
//! tests that drive every one of those tools through their handlers.
//!
//! The server applies the filters it receives (workflowId, status, cursor, limit, data table
//! filters) and answers like n8n 2.41.1 does (shapes recorded from a live instance), so a tool
//! that did not send a filter gets a visibly different answer.

use crate::common;
use crate::server::{authorized, call, config, n8n, not_found, ok, start, Reply, Seen, KEY};

use std::collections::HashMap;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Json;
use common::{fixture, fixture_text};
use serde_json::{json, Value};
use toolshed_core::ToolErrorKind;
use toolshed_n8n::{plugin, N8nLogin};

const TABLE: &str = "mM8czM49kpdINzXr";

/// `expr?` for handlers that answer a [`Reply`] either way.
macro_rules! guard {
    ($e:expr) => {
        if let Err(reply) = $e {
            return reply;
        }
    };
}
const EMAIL: &str = "owner@example.com";
const PASSWORD: &str = "Passw0rdTest-replay";
const SESSION: &str = "n8n-auth=replay-session-token";

fn log(seen: &Seen, what: String) {
    seen.requests.lock().unwrap().push(what);
}

fn seen_has(seen: &Seen, needle: &str) -> bool {
    seen.requests
        .lock()
        .unwrap()
        .iter()
        .any(|r| r.contains(needle))
}

/// Four executions over two workflows, newest first.
fn all_executions() -> Vec<Value> {
    let err = fixture("execution-error-id2.metadata-only.json");
    let ok1 = fixture("execution-success-id1.metadata-only.json");
    let mut e4 = err.clone();
    e4["id"] = json!("4");
    e4["workflowId"] = json!("otherWorkflow01");
    let mut e3 = ok1.clone();
    e3["id"] = json!("3");
    e3["workflowId"] = json!("otherWorkflow01");
    vec![e4, e3, err, ok1]
}

pub(crate) async fn executions(
    State(seen): State<Seen>,
    headers: HeaderMap,
    uri: Uri,
    Query(q): Query<HashMap<String, String>>,
) -> Reply {
    log(&seen, uri.to_string());
    guard!(authorized(&headers));
    assert_eq!(q.get("includeData").map(String::as_str), Some("false"));
    let mut list: Vec<Value> = all_executions()
        .into_iter()
        .filter(|e| {
            q.get("workflowId")
                .is_none_or(|w| e["workflowId"] == w.as_str())
        })
        .filter(|e| q.get("status").is_none_or(|s| e["status"] == s.as_str()))
        .collect();
    let offset: usize = q
        .get("cursor")
        .map(|c| c.strip_prefix("offset-").unwrap().parse().unwrap())
        .unwrap_or(0);
    let limit: usize = q.get("limit").map_or(100, |l| l.parse().unwrap());
    list = list.into_iter().skip(offset).collect();
    let next = (list.len() > limit).then(|| format!("offset-{}", offset + limit));
    list.truncate(limit);
    ok(json!({"data": list, "nextCursor": next}))
}

pub(crate) async fn execution_action(
    State(seen): State<Seen>,
    headers: HeaderMap,
    Path((id, action)): Path<(String, String)>,
    body: Option<Json<Value>>,
) -> Reply {
    log(&seen, format!("POST /executions/{id}/{action}"));
    guard!(authorized(&headers));
    let Some(mut e) = all_executions()
        .into_iter()
        .find(|e| e["id"] == id.as_str())
    else {
        return not_found();
    };
    match action.as_str() {
        "retry" => {
            let b = body.map(|Json(b)| b).unwrap_or_default();
            seen.bodies.lock().unwrap().push(b);
            e["retryOf"] = json!(id);
            e["id"] = json!("9");
            e["status"] = json!("running");
            e["stoppedAt"] = Value::Null;
            ok(e)
        }
        "stop" => {
            e["status"] = json!("canceled");
            ok(e)
        }
        _ => (StatusCode::NOT_FOUND, Json(json!({"message": "not found"}))),
    }
}

pub(crate) async fn execution_delete(
    State(seen): State<Seen>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Reply {
    log(&seen, format!("DELETE /executions/{id}"));
    guard!(authorized(&headers));
    match all_executions()
        .into_iter()
        .find(|e| e["id"] == id.as_str())
    {
        Some(e) => ok(e),
        None => not_found(),
    }
}

pub(crate) async fn workflow_action(
    State(seen): State<Seen>,
    headers: HeaderMap,
    Path((id, verb)): Path<(String, String)>,
) -> Reply {
    log(&seen, format!("POST /workflows/{id}/{verb}"));
    guard!(authorized(&headers));
    if id != "HUxyBqXXCHeIHixX" {
        return (
            StatusCode::NOT_FOUND,
            Json(json!({"message": "Workflow not found"})),
        );
    }
    let mut w = fixture("GET-workflow-response-wf1.json");
    match verb.as_str() {
        "activate" => w["active"] = json!(true),
        "deactivate" => w["active"] = json!(false),
        "archive" => {
            w["isArchived"] = json!(true);
            w["active"] = json!(false);
        }
        "unarchive" => {
            w["isArchived"] = json!(false);
            w["active"] = json!(false);
        }
        _ => return (StatusCode::NOT_FOUND, Json(json!({"message": "not found"}))),
    }
    ok(w)
}

fn credential_with_secret() -> Value {
    let mut c = fixture("credential-create-response.json");
    c["data"] = json!({"name": "X-Token", "value": "very-secret-value"});
    c["shared"] = json!([{"id": "Zr4lmvaJ7ef2xyF7", "name": "Test Owner <owner@example.com>", "role": "credential:owner"}]);
    c
}

pub(crate) async fn credential(
    State(seen): State<Seen>,
    headers: HeaderMap,
    method: axum::http::Method,
    Path(id): Path<String>,
) -> Reply {
    log(&seen, format!("{method} /credentials/{id}"));
    guard!(authorized(&headers));
    if id != "7gY9uT4NxDm32LIZ" {
        return (
            StatusCode::NOT_FOUND,
            Json(json!({"message": "Credential not found"})),
        );
    }
    ok(credential_with_secret())
}

pub(crate) async fn credential_schema(
    State(seen): State<Seen>,
    headers: HeaderMap,
    Path(ty): Path<String>,
) -> Reply {
    log(&seen, format!("GET /credentials/schema/{ty}"));
    guard!(authorized(&headers));
    if ty != "httpHeaderAuth" {
        return (
            StatusCode::NOT_FOUND,
            Json(json!({"message": "Credential type not found"})),
        );
    }
    ok(json!({"additionalProperties": false, "type": "object",
        "properties": {"name": {"type": "string"}, "value": {"type": "string"}},
        "required": ["name", "value"]}))
}

fn paged(seen: &Seen, uri: &Uri, items: Vec<Value>, q: &HashMap<String, String>) -> Reply {
    log(seen, uri.to_string());
    let limit: usize = q.get("limit").map_or(100, |l| l.parse().unwrap());
    let offset: usize = q
        .get("cursor")
        .map(|c| c.strip_prefix("offset-").unwrap().parse().unwrap())
        .unwrap_or(0);
    let rest: Vec<Value> = items.into_iter().skip(offset).collect();
    let next = (rest.len() > limit).then(|| format!("offset-{}", offset + limit));
    ok(json!({"data": rest.into_iter().take(limit).collect::<Vec<_>>(), "nextCursor": next}))
}

pub(crate) async fn tags(
    State(seen): State<Seen>,
    headers: HeaderMap,
    uri: Uri,
    Query(q): Query<HashMap<String, String>>,
) -> Reply {
    guard!(authorized(&headers));
    let items = ["mcp-demo", "billing", "ops"]
        .iter()
        .enumerate()
        .map(|(i, n)| json!({"id": format!("tag{i}"), "name": n, "createdAt": "2026-11-21T10:00:00.000Z", "updatedAt": "2026-11-21T10:00:00.000Z"}))
        .collect();
    paged(&seen, &uri, items, &q)
}

pub(crate) async fn projects(
    State(seen): State<Seen>,
    headers: HeaderMap,
    uri: Uri,
    Query(q): Query<HashMap<String, String>>,
) -> Reply {
    guard!(authorized(&headers));
    let items = vec![
        json!({"id": "Zr4lmvaJ7ef2xyF7", "name": "Test Owner <owner@example.com>", "type": "personal", "icon": null, "createdAt": "2026-11-21T10:00:00.000Z"}),
        json!({"id": "teamProject00001", "name": "Ops", "type": "team", "description": "the ops team"}),
    ];
    paged(&seen, &uri, items, &q)
}

fn columns_json() -> Value {
    json!([
        {"id": "RHyyEWOzx6AF39L8", "dataTableId": TABLE, "name": "sku", "type": "string", "index": 0},
        {"id": "6TCbIoNRfzLKToQl", "dataTableId": TABLE, "name": "qty", "type": "number", "index": 1},
    ])
}

fn table_guard(id: &str) -> Result<(), Reply> {
    if id == TABLE {
        Ok(())
    } else {
        Err((
            StatusCode::NOT_FOUND,
            Json(json!({"message": format!("Data table with ID '{id}' not found")})),
        ))
    }
}

/// n8n's data table filter: `{type: and|or, filters: [{columnName, condition, value}]}`.
fn matches(row: &Value, filter: &Value) -> bool {
    let conds = filter["filters"].as_array().expect("filter.filters");
    let test = |c: &Value| {
        let v = &row[c["columnName"].as_str().unwrap()];
        let want = &c["value"];
        match c["condition"].as_str().unwrap() {
            "eq" => v == want,
            "neq" => v != want,
            "gt" => v.as_f64() > want.as_f64(),
            "lt" => v.as_f64() < want.as_f64(),
            other => panic!("condition {other} not replayed"),
        }
    };
    if filter["type"] == "or" {
        conds.iter().any(test)
    } else {
        conds.iter().all(test)
    }
}

pub(crate) async fn data_tables(
    State(seen): State<Seen>,
    headers: HeaderMap,
    uri: Uri,
    Query(q): Query<HashMap<String, String>>,
) -> Reply {
    guard!(authorized(&headers));
    let table = json!({"id": TABLE, "name": "probe_orders", "projectId": "Zr4lmvaJ7ef2xyF7", "columns": columns_json(), "sizeBytes": 4096});
    let other = json!({"id": "otherTable000001", "name": "customers", "projectId": "Zr4lmvaJ7ef2xyF7", "columns": [], "sizeBytes": 0});
    let mut items = vec![table, other];
    if let Some(f) = q.get("filter") {
        let f: Value = serde_json::from_str(f).expect("the filter is sent as JSON");
        items.retain(|t| f["name"].as_str().is_none_or(|n| t["name"] == n));
    }
    paged(&seen, &uri, items, &q)
}

pub(crate) async fn columns(
    State(seen): State<Seen>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Reply {
    log(&seen, format!("GET /data-tables/{id}/columns"));
    guard!(authorized(&headers));
    guard!(table_guard(&id));
    ok(columns_json())
}

pub(crate) async fn rows_query(
    State(seen): State<Seen>,
    headers: HeaderMap,
    uri: Uri,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Reply {
    guard!(authorized(&headers));
    guard!(table_guard(&id));
    let mut rows = seen.rows.lock().unwrap().clone();
    if let Some(f) = q.get("filter") {
        let f: Value = serde_json::from_str(f).expect("the filter is sent as JSON");
        rows.retain(|r| matches(r, &f));
    }
    if let Some(s) = q.get("search") {
        rows.retain(|r| r["sku"].as_str().unwrap_or_default().contains(s.as_str()));
    }
    if q.get("sortBy").map(String::as_str) == Some("qty:desc") {
        rows.sort_by(|a, b| b["qty"].as_f64().partial_cmp(&a["qty"].as_f64()).unwrap());
    }
    paged(&seen, &uri, rows, &q)
}

fn insert(seen: &Seen, data: &Value) -> Value {
    let mut rows = seen.rows.lock().unwrap();
    let id = rows.len() as u64 + 1;
    let mut row = data.clone();
    row["id"] = json!(id);
    row["createdAt"] = json!("2026-11-22T12:59:17.749Z");
    row["updatedAt"] = json!("2026-11-22T12:59:17.749Z");
    rows.push(row.clone());
    row
}

pub(crate) async fn rows_insert(
    State(seen): State<Seen>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Json(body): Json<Value>,
) -> Reply {
    log(&seen, format!("POST /data-tables/{id}/rows"));
    guard!(authorized(&headers));
    guard!(table_guard(&id));
    seen.bodies.lock().unwrap().push(body.clone());
    let inserted: Vec<Value> = body["data"]
        .as_array()
        .expect("data is the rows")
        .iter()
        .map(|r| insert(&seen, r))
        .collect();
    match body["returnType"].as_str() {
        Some("all") => ok(json!(inserted)),
        Some("id") => ok(json!(inserted
            .iter()
            .map(|r| json!({"id": r["id"]}))
            .collect::<Vec<_>>())),
        _ => ok(json!({"success": true, "insertedRows": inserted.len()})),
    }
}

fn write_rows(seen: &Seen, body: &Value, upsert: bool) -> Reply {
    seen.bodies.lock().unwrap().push(body.clone());
    let dry = body["dryRun"] == true;
    let mut rows = seen.rows.lock().unwrap();
    let mut changed = Vec::new();
    for r in rows.iter_mut() {
        if matches(r, &body["filter"]) {
            let mut new = r.clone();
            for (k, v) in body["data"].as_object().unwrap() {
                new[k] = v.clone();
            }
            if !dry {
                *r = new.clone();
            }
            changed.push(new);
        }
    }
    drop(rows);
    if changed.is_empty() && upsert && !dry {
        changed.push(insert(seen, &body["data"]));
    }
    if body["returnData"] == true {
        ok(json!(changed))
    } else {
        ok(json!(true))
    }
}

pub(crate) async fn rows_update(
    State(seen): State<Seen>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Json(body): Json<Value>,
) -> Reply {
    log(&seen, format!("PATCH /data-tables/{id}/rows/update"));
    guard!(authorized(&headers));
    guard!(table_guard(&id));
    write_rows(&seen, &body, false)
}

pub(crate) async fn rows_upsert(
    State(seen): State<Seen>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Json(body): Json<Value>,
) -> Reply {
    log(&seen, format!("POST /data-tables/{id}/rows/upsert"));
    guard!(authorized(&headers));
    guard!(table_guard(&id));
    write_rows(&seen, &body, true)
}

pub(crate) async fn rows_delete(
    State(seen): State<Seen>,
    headers: HeaderMap,
    uri: Uri,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Reply {
    log(&seen, format!("DELETE {uri}"));
    guard!(authorized(&headers));
    guard!(table_guard(&id));
    let filter: Value = serde_json::from_str(q.get("filter").expect("a filter is required"))
        .expect("the filter is sent as JSON");
    let dry = q.get("dryRun").map(String::as_str) == Some("true");
    let mut rows = seen.rows.lock().unwrap();
    let gone: Vec<Value> = rows
        .iter()
        .filter(|r| matches(r, &filter))
        .cloned()
        .collect();
    if !dry {
        rows.retain(|r| !matches(r, &filter));
    }
    if q.get("returnData").map(String::as_str) == Some("true") {
        ok(json!(gone))
    } else {
        ok(json!(true))
    }
}

/// `POST /rest/login`: the editor's sign-in, answering with the `n8n-auth` cookie.
pub(crate) async fn login(State(seen): State<Seen>, Json(body): Json<Value>) -> Response {
    *seen.logins.lock().unwrap() += 1;
    if body["emailOrLdapLoginId"] == EMAIL && body["password"] == PASSWORD {
        (
            [(
                header::SET_COOKIE,
                format!("{SESSION}; Max-Age=604800; Path=/; HttpOnly; SameSite=Lax"),
            )],
            Json(json!({"data": {"id": "a5c96c2b", "email": EMAIL, "role": "global:owner"}})),
        )
            .into_response()
    } else {
        (
            StatusCode::UNAUTHORIZED,
            Json(json!({"code": 401, "message": "Wrong username or password. Do you have caps lock on?"})),
        )
            .into_response()
    }
}

/// `GET /types/nodes.json`: the recorded catalog subset, gzipped when asked, only with the
/// session cookie.
pub(crate) async fn node_types(State(seen): State<Seen>, headers: HeaderMap) -> Response {
    let cookie = headers
        .get(header::COOKIE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if !cookie.split(';').any(|c| c.trim() == SESSION) {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({"status": "error", "message": "Unauthorized"})),
        )
            .into_response();
    }
    assert!(
        headers.get("x-n8n-api-key").is_none(),
        "the API key is not sent to the editor API"
    );
    *seen.catalog_reads.lock().unwrap() += 1;
    let gzip = headers
        .get(header::ACCEPT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("gzip"));
    let path = format!(
        "{}/tests/fixtures/node-types-2.41.1-subset.json.gz",
        env!("CARGO_MANIFEST_DIR")
    );
    if gzip {
        let bytes = std::fs::read(path).unwrap();
        Response::builder()
            .header(header::CONTENT_TYPE, "application/json; charset=utf-8")
            .header(header::CONTENT_ENCODING, "gzip")
            .body(Body::from(bytes))
            .unwrap()
    } else {
        let text = fixture_text("node-types-2.41.1-subset.json.gz");
        Response::builder()
            .header(header::CONTENT_TYPE, "application/json; charset=utf-8")
            .body(Body::from(text))
            .unwrap()
    }
}

// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn execution_list_filters_and_cursor_are_sent_and_applied() {
    let (base, seen) = start().await;
    let p = n8n(&base, KEY);
    let l = call(
        &p,
        "n8n.executions.list",
        json!({"workflowId": "otherWorkflow01"}),
    )
    .await
    .unwrap();
    let ids: Vec<&str> = l["executions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["4", "3"]);
    assert!(seen_has(&seen, "workflowId=otherWorkflow01"));

    let l = call(
        &p,
        "n8n.executions.list",
        json!({"status": "success", "workflowId": "HUxyBqXXCHeIHixX"}),
    )
    .await
    .unwrap();
    assert_eq!(l["executions"].as_array().unwrap().len(), 1);
    assert_eq!(l["executions"][0]["id"], "1");
    assert_eq!(l["executions"][0]["status"], "success");
    assert!(seen_has(&seen, "status=success"));
    // Each entry names its workflow (read once per workflow); one that cannot be read, none.
    assert_eq!(
        l["executions"][0]["workflowName"],
        "MCP demo: webhook -> set -> code"
    );
    let other = call(
        &p,
        "n8n.executions.list",
        json!({"workflowId": "otherWorkflow01"}),
    )
    .await
    .unwrap();
    assert_eq!(other["executions"][0]["workflowName"], Value::Null);
    // The specification's argument name `id` stands for `executionId`.
    let by_alias = call(&p, "n8n.executions.get", json!({"id": "1"}))
        .await
        .unwrap();
    let by_name = call(&p, "n8n.executions.get", json!({"executionId": "1"}))
        .await
        .unwrap();
    assert_eq!(by_alias, by_name);
    let e = call(&p, "n8n.executions.get", json!({"id": "x/1"}))
        .await
        .unwrap_err();
    assert!(e.message.contains("'id' must be an execution id"), "{e}");

    let page1 = call(&p, "n8n.executions.list", json!({"limit": 3}))
        .await
        .unwrap();
    assert_eq!(page1["executions"].as_array().unwrap().len(), 3);
    assert_eq!(page1["nextCursor"], "offset-3");
    assert!(seen_has(&seen, "limit=3"));
    let page2 = call(
        &p,
        "n8n.executions.list",
        json!({"limit": 3, "cursor": page1["nextCursor"]}),
    )
    .await
    .unwrap();
    assert_eq!(page2["executions"][0]["id"], "1");
    assert_eq!(page2["nextCursor"], Value::Null);
    assert!(seen_has(&seen, "cursor=offset-3"));
}

#[tokio::test]
async fn execution_retry_stop_and_delete() {
    let (base, seen) = start().await;
    let p = n8n(&base, KEY);
    let r = call(
        &p,
        "n8n.executions.retry",
        json!({"executionId": "2", "loadWorkflow": true}),
    )
    .await
    .unwrap();
    assert_eq!(r["retriedExecutionId"], "2");
    assert_eq!(r["newExecution"]["id"], "9");
    assert_eq!(r["newExecution"]["retryOf"], "2");
    assert_eq!(
        r["_guidance"]["example"],
        "await tools.n8n.executions.get({executionId: \"9\"})"
    );
    assert_eq!(
        seen.bodies.lock().unwrap().last().unwrap(),
        &json!({"loadWorkflow": true})
    );
    let s = call(&p, "n8n.executions.stop", json!({"executionId": 1}))
        .await
        .unwrap();
    assert_eq!(s["status"], "canceled");
    assert_eq!(s["id"], "1");
    let d = call(&p, "n8n.executions.delete", json!({"executionId": "2"}))
        .await
        .unwrap();
    assert_eq!(d["deleted"], true);
    assert_eq!(d["execution"]["status"], "error");
    assert!(seen_has(&seen, "DELETE /executions/2"));
    let e = call(&p, "n8n.executions.stop", json!({"executionId": "77"}))
        .await
        .unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::NotFound);
}

#[tokio::test]
async fn workflow_activate_deactivate_unarchive() {
    let (base, seen) = start().await;
    let p = n8n(&base, KEY);
    let id = json!({"workflowId": "HUxyBqXXCHeIHixX"});
    let a = call(&p, "n8n.workflows.activate", id.clone())
        .await
        .unwrap();
    assert_eq!(a["active"], true);
    let d = call(&p, "n8n.workflows.deactivate", id.clone())
        .await
        .unwrap();
    assert_eq!(d["active"], false);
    let u = call(&p, "n8n.workflows.unarchive", id).await.unwrap();
    assert_eq!(u["isArchived"], false);
    assert_eq!(u["name"], "MCP demo: webhook -> set -> code");
    for verb in ["activate", "deactivate", "unarchive"] {
        assert!(seen_has(
            &seen,
            &format!("POST /workflows/HUxyBqXXCHeIHixX/{verb}")
        ));
    }
}

#[tokio::test]
async fn credentials_tags_and_projects() {
    let (base, seen) = start().await;
    let p = n8n(&base, KEY);
    let c = call(
        &p,
        "n8n.credentials.get",
        json!({"credentialId": "7gY9uT4NxDm32LIZ"}),
    )
    .await
    .unwrap();
    assert_eq!(c["name"], "Demo header auth");
    assert_eq!(c["projects"][0]["role"], "credential:owner");
    assert!(!c.to_string().contains("very-secret-value"));
    let e = call(&p, "n8n.credentials.get", json!({"credentialId": "nope"}))
        .await
        .unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::NotFound);
    assert!(e.message.contains("Credential not found"));

    let s = call(
        &p,
        "n8n.credentials.schema",
        json!({"credentialType": "httpHeaderAuth"}),
    )
    .await
    .unwrap();
    assert_eq!(s["required"], json!(["name", "value"]));
    let e = call(
        &p,
        "n8n.credentials.schema",
        json!({"credentialType": "../workflows"}),
    )
    .await
    .unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::InvalidInput);

    let d = call(
        &p,
        "n8n.credentials.delete",
        json!({"credentialId": "7gY9uT4NxDm32LIZ"}),
    )
    .await
    .unwrap();
    assert_eq!(d["deleted"], true);
    assert_eq!(d["credential"]["type"], "httpHeaderAuth");
    assert!(!d.to_string().contains("very-secret-value"));
    assert!(seen_has(&seen, "DELETE /credentials/7gY9uT4NxDm32LIZ"));

    let t = call(&p, "n8n.tags.list", json!({"limit": 2}))
        .await
        .unwrap();
    assert_eq!(
        t["tags"],
        json!([{"id": "tag0", "name": "mcp-demo"}, {"id": "tag1", "name": "billing"}])
    );
    assert_eq!(t["nextCursor"], "offset-2");
    let t = call(&p, "n8n.tags.list", json!({"cursor": "offset-2"}))
        .await
        .unwrap();
    assert_eq!(t["tags"], json!([{"id": "tag2", "name": "ops"}]));
    assert!(seen_has(&seen, "/api/v1/tags?limit=2"));

    let pr = call(&p, "n8n.projects.list", json!({})).await.unwrap();
    assert_eq!(
        pr["projects"][1],
        json!({"id": "teamProject00001", "name": "Ops", "type": "team", "description": "the ops team"})
    );
    assert!(pr["projects"][0].get("icon").is_none());
}

#[tokio::test]
async fn data_tables_rows_round_trip() {
    let (base, seen) = start().await;
    let p = n8n(&base, KEY);
    let l = call(
        &p,
        "n8n.data_tables.list",
        json!({"filter": {"name": "probe_orders"}, "limit": 5}),
    )
    .await
    .unwrap();
    assert_eq!(l["dataTables"].as_array().unwrap().len(), 1);
    assert_eq!(l["dataTables"][0]["id"], TABLE);
    let all = call(&p, "n8n.data_tables.list", json!({})).await.unwrap();
    assert_eq!(all["dataTables"].as_array().unwrap().len(), 2);

    let cols = call(&p, "n8n.data_tables.columns", json!({"dataTableId": TABLE}))
        .await
        .unwrap();
    assert_eq!(cols["columns"][0]["name"], "sku");
    assert_eq!(cols["columns"][1]["type"], "number");
    let e = call(
        &p,
        "n8n.data_tables.columns",
        json!({"dataTableId": "missing"}),
    )
    .await
    .unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::NotFound);

    let ins = call(
        &p,
        "n8n.data_tables.rows.insert",
        json!({"dataTableId": TABLE, "rows": [{"sku": "A", "qty": 1}, {"sku": "B", "qty": 2}]}),
    )
    .await
    .unwrap();
    assert_eq!(ins["result"], json!({"success": true, "insertedRows": 2}));
    assert_eq!(
        seen.bodies.lock().unwrap().last().unwrap()["returnType"],
        "count"
    );
    let ins = call(
        &p,
        "n8n.data_tables.rows.insert",
        json!({"dataTableId": TABLE, "rows": [{"sku": "C", "qty": 3}], "returnType": "all"}),
    )
    .await
    .unwrap();
    assert_eq!(ins["result"][0]["id"], 3);

    let eq_a =
        json!({"type": "and", "filters": [{"columnName": "sku", "condition": "eq", "value": "A"}]});
    let q = call(
        &p,
        "n8n.data_tables.rows.query",
        json!({"dataTableId": TABLE, "filter": eq_a}),
    )
    .await
    .unwrap();
    assert_eq!(q["_untrusted"], true);
    assert_eq!(q["rows"].as_array().unwrap().len(), 1);
    assert_eq!(q["rows"][0]["sku"], "A");
    let q = call(
        &p,
        "n8n.data_tables.rows.query",
        json!({"dataTableId": TABLE, "sortBy": "qty:desc", "limit": 2}),
    )
    .await
    .unwrap();
    assert_eq!(q["rows"][0]["sku"], "C");
    assert_eq!(q["nextCursor"], "offset-2");

    let u = call(
        &p,
        "n8n.data_tables.rows.update",
        json!({"dataTableId": TABLE, "filter": eq_a, "data": {"qty": 5}, "returnData": true}),
    )
    .await
    .unwrap();
    assert_eq!(u["rows"][0]["qty"], 5);
    assert_eq!(u["_untrusted"], true);

    let eq_d = json!({"filters": [{"columnName": "sku", "condition": "eq", "value": "D"}]});
    let up = call(
        &p,
        "n8n.data_tables.rows.upsert",
        json!({"dataTableId": TABLE, "filter": eq_d, "data": {"sku": "D", "qty": 4}, "returnData": true}),
    )
    .await
    .unwrap();
    assert_eq!(up["rows"][0]["id"], 4);

    let gt2 = json!({"filters": [{"columnName": "qty", "condition": "gt", "value": 2}]});
    let dry = call(
        &p,
        "n8n.data_tables.rows.delete",
        json!({"dataTableId": TABLE, "filter": gt2, "dryRun": true, "returnData": true}),
    )
    .await
    .unwrap();
    assert_eq!(dry["rows"].as_array().unwrap().len(), 3, "A(5), C(3), D(4)");
    assert_eq!(
        seen.rows.lock().unwrap().len(),
        4,
        "a dry run deletes nothing"
    );
    let del = call(
        &p,
        "n8n.data_tables.rows.delete",
        json!({"dataTableId": TABLE, "filter": gt2}),
    )
    .await
    .unwrap();
    assert_eq!(del["rows"], true);
    let left: Vec<Value> = seen
        .rows
        .lock()
        .unwrap()
        .iter()
        .map(|r| r["sku"].clone())
        .collect();
    assert_eq!(left, [json!("B")]);
    assert!(seen_has(&seen, "dryRun=true"));

    let e = call(
        &p,
        "n8n.data_tables.rows.delete",
        json!({"dataTableId": TABLE, "filter": {"filters": []}}),
    )
    .await
    .unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::InvalidInput);
    assert!(e.message.contains("at least one condition"));
}

#[tokio::test]
async fn sticky_notes_and_input_override_through_the_tools() {
    let (base, _) = start().await;
    let p = n8n(&base, KEY);
    let e = call(
        &p,
        "n8n.executions.get_node",
        json!({"executionId": "7", "nodeName": "Sticky Note"}),
    )
    .await
    .unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::NotFound);
    assert_eq!(
        e.data.unwrap()["availableNodes"],
        json!(["Webhook", "Prepare Fields", "Validate Order"])
    );
    let s = call(&p, "n8n.executions.get", json!({"executionId": "7"}))
        .await
        .unwrap();
    assert!(!s.to_string().contains("Sticky Note"));
    let d = call(
        &p,
        "n8n.executions.get_node",
        json!({"executionId": "8", "nodeName": "Validate Order"}),
    )
    .await
    .unwrap();
    assert_eq!(
        d["input"]["items"][0]["json"]["greeting"],
        "hello from inputOverride"
    );
    assert_eq!(d["input"]["sources"][0]["from"], "inputOverride");
}

fn with_login(base: &str, password: &str) -> toolshed_core::Plugin {
    plugin(toolshed_n8n::N8nConfig {
        login: Some(N8nLogin {
            email: EMAIL.into(),
            password: password.into(),
        }),
        ..config(base, KEY)
    })
    .unwrap()
}

#[tokio::test]
async fn node_catalog_after_login() {
    let (base, seen) = start().await;
    let p = with_login(&base, PASSWORD);
    let tool = p
        .tools
        .iter()
        .find(|t| t.def.path.as_str() == "n8n.nodes.search")
        .unwrap();
    assert!(tool.def.description.contains("full node catalog"));

    let s = call(&p, "n8n.nodes.search", json!({"query": "slack"}))
        .await
        .unwrap();
    assert_eq!(s["source"], "catalog");
    assert_eq!(s["catalogSize"], 12);
    assert_eq!(s["nodeTypes"][0]["nodeType"], "n8n-nodes-base.slack");
    assert_eq!(s["nodeTypes"][1]["nodeType"], "n8n-nodes-base.slackTrigger");
    assert_eq!(s["nodeTypes"][1]["trigger"], true);
    // Gmail is installed but no workflow uses it: only the catalog finds it.
    let s = call(&p, "n8n.nodes.search", json!({"query": "gmail"}))
        .await
        .unwrap();
    assert_eq!(s["nodeTypes"][0]["nodeType"], "n8n-nodes-base.gmail");

    let t = call(
        &p,
        "n8n.nodes.get_type",
        json!({"nodeType": "n8n-nodes-base.httpRequest"}),
    )
    .await
    .unwrap();
    assert_eq!(t["source"], "catalog");
    assert_eq!(t["displayName"], "HTTP Request");
    assert_eq!(t["version"], json!(4.5));
    assert!(t["versions"].as_array().unwrap().contains(&json!(1)));
    let names: Vec<&str> = t["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert!(
        names.contains(&"url") && names.contains(&"method"),
        "{names:?}"
    );
    assert!(common::o200k(&t) <= toolshed_n8n::NODE_BUDGET);

    let all = call(
        &p,
        "n8n.nodes.get_type",
        json!({"nodeType": "n8n-nodes-base.slack"}),
    )
    .await
    .unwrap();
    let narrow = call(
        &p,
        "n8n.nodes.get_type",
        json!({"nodeType": "n8n-nodes-base.slack", "resource": "message", "operation": "post"}),
    )
    .await
    .unwrap();
    println!(
        "slack: {} parameters, {} for message/post ({} / {} tokens)",
        all["parameterCount"],
        narrow["parameterCount"],
        common::o200k(&all),
        common::o200k(&narrow)
    );
    assert!(narrow["parameterCount"].as_u64() < all["parameterCount"].as_u64());
    assert!(common::o200k(&all) <= toolshed_n8n::NODE_BUDGET);
    assert_eq!(narrow["credentials"][0]["name"], "slackApi");

    let e = call(
        &p,
        "n8n.nodes.get_type",
        json!({"nodeType": "n8n-nodes-base.slackV9"}),
    )
    .await
    .unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::NotFound);
    assert!(
        e.message
            .contains("not installed on this instance (12 types"),
        "{}",
        e.message
    );
    assert!(e.message.contains("n8n-nodes-base.slack"));

    // One sign-in and one catalog read: the catalog is cached.
    assert_eq!(*seen.logins.lock().unwrap(), 1);
    assert_eq!(*seen.catalog_reads.lock().unwrap(), 1);
}

#[tokio::test]
async fn a_failed_login_falls_back_and_says_why() {
    let (base, _) = start().await;
    let wrong = "wrong-password-never-shown";
    let p = with_login(&base, wrong);
    let s = call(&p, "n8n.nodes.search", json!({"query": "code"}))
        .await
        .unwrap();
    assert_eq!(s["source"], "workflows");
    assert_eq!(s["nodeTypes"][0]["nodeType"], "n8n-nodes-base.code");
    assert!(s["note"]
        .as_str()
        .unwrap()
        .contains("public API cannot list node types"));
    let err = s["catalogError"].as_str().unwrap();
    assert!(
        err.contains("n8n login as 'owner@example.com'") && err.contains("401"),
        "{err}"
    );
    assert!(err.contains("Wrong username or password"));
    assert!(!s.to_string().contains(wrong));
    let e = call(
        &p,
        "n8n.nodes.get_type",
        json!({"nodeType": "n8n-nodes-base.gmail"}),
    )
    .await
    .unwrap_err();
    assert!(
        e.message.contains("node catalog could not be read"),
        "{}",
        e.message
    );
    assert!(!e.message.contains(wrong));

    // Without a login the tools say what they cannot see.
    let p = n8n(&base, KEY);
    let s = call(&p, "n8n.nodes.search", json!({})).await.unwrap();
    assert_eq!(s["source"], "workflows");
    assert!(s.get("catalogError").is_none());
    assert!(s["note"]
        .as_str()
        .unwrap()
        .contains("Configure [n8n] email and password"));
}

#[tokio::test]
async fn replies_over_the_cap_are_refused_with_a_clear_error() {
    let (base, _) = start().await;
    let small = plugin(toolshed_n8n::N8nConfig {
        max_response_bytes: 4096,
        ..config(&base, KEY)
    })
    .unwrap();
    // The error execution's reply is ~6.5 kB.
    let e = call(&small, "n8n.executions.get", json!({"executionId": "2"}))
        .await
        .unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::Upstream);
    assert!(
        e.message
            .contains("GET /executions/2 is larger than the 4096-byte cap"),
        "{}",
        e.message
    );
    assert!(
        call(&small, "n8n.executions.get", json!({"executionId": "1"}))
            .await
            .is_ok()
    );
    // The gzipped catalog is 61 kB on the wire but 430 kB decoded: the cap holds on the
    // decoded size.
    let capped = plugin(toolshed_n8n::N8nConfig {
        max_response_bytes: 100_000,
        login: Some(N8nLogin {
            email: EMAIL.into(),
            password: PASSWORD.into(),
        }),
        ..config(&base, KEY)
    })
    .unwrap();
    let s = call(&capped, "n8n.nodes.search", json!({"query": "code"}))
        .await
        .unwrap();
    assert_eq!(s["source"], "workflows");
    assert!(
        s["catalogError"]
            .as_str()
            .unwrap()
            .contains("/types/nodes.json is larger than the 100000-byte cap"),
        "{s}"
    );
}

#[tokio::test]
async fn a_redirect_is_never_followed() {
    use std::sync::{Arc, Mutex};
    let stolen: Arc<Mutex<Vec<String>>> = Arc::default();
    let log = stolen.clone();
    let thief = axum::Router::new().fallback(move |headers: HeaderMap| {
        let log = log.clone();
        async move {
            log.lock().unwrap().push(format!("{headers:?}"));
            Json(json!({"data": []}))
        }
    });
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let thief_addr = l.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(l, thief).await.unwrap() });
    let redirect = axum::Router::new().fallback(move || async move {
        (
            StatusCode::FOUND,
            [(header::LOCATION, format!("http://{thief_addr}/api/v1/tags"))],
        )
    });
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(l, redirect).await.unwrap() });
    let p = n8n(&format!("http://{addr}"), KEY);
    let e = call(&p, "n8n.tags.list", json!({})).await.unwrap_err();
    assert!(e.message.contains("redirect"), "{}", e.message);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        stolen.lock().unwrap().is_empty(),
        "the key followed a redirect"
    );
}
