//! The n8n plugin end to end through the real binary, the engine and MCP: a local server replays
//! a recorded n8n 2.41.1 reply of a failed execution; an agent searches, reads the summary, drills
//! into the failed node, and deletes a workflow (destructive → paused → approved).

use crate::support;

use std::sync::{Arc, Mutex};

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::routing::{delete, get};
use axum::{Json, Router};
use serde_json::{json, Value};
use support::*;

type Seen = Arc<Mutex<Vec<String>>>;

const EXECUTION: &str = include_str!("fixtures/n8n-execution-error-id2.json");

fn authorized(h: &HeaderMap) -> Result<(), (StatusCode, Json<Value>)> {
    match h.get("x-n8n-api-key").and_then(|v| v.to_str().ok()) {
        Some("n8n-test-key") => Ok(()),
        _ => Err((
            StatusCode::UNAUTHORIZED,
            Json(json!({"message": "unauthorized"})),
        )),
    }
}

async fn start() -> (u16, Seen) {
    let seen: Seen = Arc::default();
    let app = Router::new()
        .route(
            "/api/v1/executions/{id}",
            get(|State(s): State<Seen>, h: HeaderMap, uri: Uri, Path(id): Path<String>| async move {
                authorized(&h)?;
                s.lock().unwrap().push(format!("GET {uri}"));
                if id == "2" {
                    Ok(Json(serde_json::from_str::<Value>(EXECUTION).unwrap()))
                } else {
                    Err((StatusCode::NOT_FOUND, Json(json!({"message": "Not Found"}))))
                }
            }),
        )
        .route(
            "/api/v1/workflows/{id}",
            delete(|State(s): State<Seen>, h: HeaderMap, Path(id): Path<String>| async move {
                authorized(&h)?;
                s.lock().unwrap().push(format!("DELETE /api/v1/workflows/{id}"));
                Ok::<_, (StatusCode, Json<Value>)>(Json(json!({"id": id, "name": "Old flow", "active": false, "nodes": [], "connections": {}})))
            }),
        )
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (port, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_debugs_a_failed_execution_over_mcp() {
    let (port, seen) = start().await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("toolshed.toml");
    std::fs::write(
        &cfg,
        format!("[n8n]\nbase_url = \"http://127.0.0.1:{port}\"\napi_key = \"n8n-test-key\"\nallow_private = true\n"),
    )
    .unwrap();
    let client = stdio_client(dir.path(), &["--config", cfg.to_str().unwrap()]).await;

    let (_, v) = call(
        &client,
        "search_tools",
        json!({"query": "why did the workflow execution fail", "namespace": "n8n"}),
    )
    .await;
    let text = v.as_str().unwrap_or_default();
    assert!(text.contains("n8n.executions."), "{text}");

    let (err, v) = run_script(
        &client,
        r#"const s = await tools.n8n.executions.get({executionId: "2"});
           const failed = s.availableNodes.find(n => n.status === "error");
           const node = await tools.n8n.executions.get_node({executionId: "2", nodeName: failed.nodeName});
           return {s, node};"#,
    )
    .await;
    assert!(!err, "{v}");
    let s = &v["result"]["s"];
    assert_eq!(s["workflowName"], "MCP demo: webhook -> set -> code", "{s}");
    assert_eq!(s["status"], "error");
    assert!(
        s["_guidance"]["example"]
            .as_str()
            .unwrap()
            .contains("get_node"),
        "{s}"
    );
    let node = &v["result"]["node"];
    assert_eq!(node["nodeName"], "Validate Order", "{node}");
    assert!(node["error"]["message"].as_str().is_some(), "{node}");
    assert!(
        !v.to_string().contains("n8n-test-key"),
        "the API key never reaches the agent"
    );
    assert!(
        seen.lock()
            .unwrap()
            .iter()
            .any(|r| r.contains("includeData=true")),
        "{:?}",
        seen.lock().unwrap()
    );

    // Unknown node: a clear error listing the real ones.
    let (_, v) = run_script(
        &client,
        r#"try { await tools.n8n.executions.get_node({executionId: "2", nodeName: "Nope"}) } catch (e) { return e.message }"#,
    )
    .await;
    let msg = v["result"].as_str().unwrap_or_default();
    assert!(
        msg.contains("Node 'Nope' not found in execution '2'") && msg.contains("Validate Order"),
        "{v}"
    );

    // Deleting a workflow is destructive: paused until approved.
    let (_, v) = run_script(
        &client,
        r#"return await tools.n8n.workflows.delete({workflowId: "wf9"})"#,
    )
    .await;
    assert_eq!(v["status"], "paused", "{v}");
    assert!(!seen.lock().unwrap().iter().any(|r| r.starts_with("DELETE")));
    let (_, v) = call(
        &client,
        "resume",
        json!({"executionId": v["executionId"], "decision": "approve"}),
    )
    .await;
    assert_eq!(v["status"], "completed", "{v}");
    assert!(seen
        .lock()
        .unwrap()
        .iter()
        .any(|r| r == "DELETE /api/v1/workflows/wf9"));
    client.cancel().await.unwrap();
}
