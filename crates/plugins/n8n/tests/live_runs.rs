//! Workflow runs against a real n8n: only when `N8N_URL`, `N8N_API_KEY`, `N8N_EMAIL` and
//! `N8N_PASSWORD` are set (manual runs need the editor login); otherwise a skip line.
//!
//! Runs the seeded webhook workflow through its production URL and by hand with pinned input,
//! verifies a passing and a failing input, runs a manual-trigger workflow with input, and stops
//! a run that outlasts its timeout. Prints the time each took (for docs/benchmarks.md).

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use toolshed_core::Plugin;
use toolshed_n8n::{plugin, N8nConfig};

use crate::common::{assert_clean, call};

fn live() -> Option<N8nConfig> {
    crate::common::live_config("run test")
}

async fn timed(p: &Plugin, path: &str, args: Value, what: &str) -> Value {
    let t = Instant::now();
    let r = call(p, path, args)
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    println!("live run: {what}: {} ms", t.elapsed().as_millis());
    assert_clean(&r, what);
    r
}

/// The id of the seeded workflow named `name`.
async fn workflow_id(p: &Plugin, name: &str) -> String {
    let list = call(p, "n8n.workflows.list", json!({"limit": 100}))
        .await
        .unwrap();
    list["workflows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["name"] == name)
        .unwrap_or_else(|| panic!("no workflow '{name}': seed the instance first"))["id"]
        .as_str()
        .unwrap()
        .to_string()
}

#[tokio::test]
async fn live_workflow_runs() {
    let Some(config) = live() else {
        return;
    };
    let p = plugin(config).unwrap();
    let wf1 = workflow_id(&p, "MCP demo: webhook -> set -> code").await;

    // The active webhook workflow runs through its production URL.
    let r = timed(
        &p,
        "n8n.workflows.run",
        json!({"workflowId": wf1, "inputData": {"name": "Ann", "qty": 2}}),
        "webhook workflow through its URL",
    )
    .await;
    assert_eq!(r["via"], "webhook", "{r}");
    assert_eq!(r["status"], "success", "{r}");
    assert_eq!(r["data"]["sample"][0]["greeting"], "hello Ann", "{r}");

    // Verify: a manual run with the input pinned on the trigger.
    let v = timed(
        &p,
        "n8n.workflows.verify",
        json!({"workflowId": wf1, "inputData": {"name": "Bo", "qty": 1}}),
        "verify (passing input)",
    )
    .await;
    assert_eq!(v["success"], true, "{v}");
    assert_eq!(v["evidence"]["trigger"]["kind"], "webhook");
    assert!(v["evidence"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .all(|n| n["status"] == "success"));
    let bad = timed(
        &p,
        "n8n.workflows.verify",
        json!({"workflowId": wf1, "inputData": {"name": "Mal", "qty": 7, "fail": true}}),
        "verify (failing input)",
    )
    .await;
    assert_eq!(bad["success"], false, "{bad}");
    assert_eq!(bad["failedNode"]["name"], "Validate Order", "{bad}");
    assert!(bad["failedNode"]["error"].is_object(), "{bad}");

    // A manual-trigger workflow: its input goes to the node after the trigger.
    let created = call(
        &p,
        "n8n.workflows.create",
        json!({
            "name": format!("toolshed live run {}", std::process::id()),
            "nodes": [
                {"name": "Start", "type": "n8n-nodes-base.manualTrigger", "typeVersion": 1, "position": [0, 0], "parameters": {}},
                {"name": "Echo", "type": "n8n-nodes-base.set", "typeVersion": 3.4, "position": [200, 0], "parameters": {
                    "includeOtherFields": true,
                    "assignments": {"assignments": [{"id": "a", "name": "seen", "value": "={{ $json.x }}", "type": "string"}]}}},
                {"name": "Wait", "type": "n8n-nodes-base.wait", "typeVersion": 1.1, "position": [400, 0], "disabled": true, "parameters": {"amount": 30}},
            ],
            "connections": {"Start": {"main": [[{"node": "Echo", "type": "main", "index": 0}]]}},
            "settings": {"executionOrder": "v1"},
        }),
    )
    .await
    .unwrap();
    let id = created["id"].as_str().unwrap().to_string();
    let r = timed(
        &p,
        "n8n.workflows.run",
        json!({"workflowId": id, "inputData": {"x": "given"}}),
        "manual trigger with input",
    )
    .await;
    assert_eq!(r["via"], "manual");
    assert_eq!(r["status"], "success", "{r}");
    assert_eq!(r["data"]["sample"][0]["seen"], "given", "{r}");
    assert!(r["note"].as_str().unwrap().contains("'Start' did not run"));

    // A run that outlasts its timeout is stopped: a 30 s Wait node, 2 s allowed.
    let wf = call(&p, "n8n.workflows.get", json!({"workflowId": id}))
        .await
        .unwrap();
    let mut nodes = wf["nodes"].as_array().unwrap().clone();
    for n in &mut nodes {
        if n["name"] == "Wait" {
            n["disabled"] = json!(false);
            n["parameters"] = json!({"resume": "timeInterval", "amount": 30, "unit": "seconds"});
        }
    }
    call(
        &p,
        "n8n.workflows.update",
        json!({"workflowId": id, "nodes": nodes, "connections": {
            "Start": {"main": [[{"node": "Echo", "type": "main", "index": 0}]]},
            "Echo": {"main": [[{"node": "Wait", "type": "main", "index": 0}]]}}}),
    )
    .await
    .unwrap();
    let t = Instant::now();
    let r = timed(
        &p,
        "n8n.workflows.run",
        json!({"workflowId": id, "timeout": 2000}),
        "run stopped at its timeout",
    )
    .await;
    assert!(
        t.elapsed() >= Duration::from_secs(2) && t.elapsed() < Duration::from_secs(20),
        "{r}"
    );
    assert!(r["error"]["timeout"].is_string(), "{r}");
    assert_ne!(r["status"], "success", "{r}");
    println!("timed-out run: {r}");
    call(&p, "n8n.workflows.delete", json!({"workflowId": id}))
        .await
        .unwrap();
}
