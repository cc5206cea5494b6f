//! Against a real n8n, through the binary and the engine: runs when `N8N_URL` and `N8N_API_KEY`
//! are set (e.g. by `../shared/scripts/n8n-live.sh env`), otherwise prints a note and passes.
//! Lists workflows, summarises a failed execution, drills into its failed node, then creates a
//! workflow and deletes it — the delete pauses for approval and completes once approved.

use crate::support;

use serde_json::{json, Value};
use support::*;

#[test]
fn live_n8n_through_the_engine() {
    let (Ok(url), Ok(_)) = (std::env::var("N8N_URL"), std::env::var("N8N_API_KEY")) else {
        eprintln!("skipping the live n8n test: N8N_URL and N8N_API_KEY are not set");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("toolshed.toml");
    std::fs::write(
        &cfg,
        format!(
            "[n8n]\nbase_url = \"{url}\"\napi_key = \"env:N8N_API_KEY\"\nallow_private = true\n"
        ),
    )
    .unwrap();
    let c = |args: &[&str]| cli(dir.path(), Some(&cfg), args);

    let (code, v) = c(&["call", "n8n.workflows.list", "{}"]);
    assert_eq!(code, 0, "{v}");
    eprintln!(
        "workflows listed: {}",
        v["result"]["workflows"].as_array().map_or(0, |a| a.len())
    );

    let (_, v) = c(&[
        "call",
        "n8n.executions.list",
        r#"{"status": "error", "limit": 5}"#,
    ]);
    let first = &v["result"]["executions"][0];
    if let Some(id) = first["id"]
        .as_str()
        .map(str::to_string)
        .or_else(|| first["id"].as_i64().map(|n| n.to_string()))
    {
        let (_, s) = c(&[
            "call",
            "n8n.executions.get",
            &json!({"executionId": id}).to_string(),
        ]);
        let s = &s["result"];
        let failed = s["availableNodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["status"] == "error")
            .unwrap();
        let node_name = failed["nodeName"].as_str().unwrap();
        eprintln!(
            "execution {id} of '{}' failed at '{node_name}': {}",
            s["workflowName"], s["error"]["message"]
        );
        let (_, n) = c(&[
            "call",
            "n8n.executions.get_node",
            &json!({"executionId": id, "nodeName": node_name}).to_string(),
        ]);
        assert_eq!(n["result"]["nodeName"], node_name, "{n}");
        assert!(n["result"]["error"].is_object(), "{n}");
    } else {
        eprintln!("no failed execution on this instance: {v}");
    }

    let wf = json!({"name": "toolshed live test", "nodes": [{"name": "Start", "type": "n8n-nodes-base.manualTrigger", "typeVersion": 1, "position": [0, 0], "parameters": {}}], "connections": {}});
    let (code, v) = c(&["call", "n8n.workflows.create", &wf.to_string()]);
    assert_eq!(code, 0, "{v}");
    let wf_id = v["result"]["id"].as_str().unwrap().to_string();
    let (_, v) = c(&[
        "call",
        "n8n.workflows.delete",
        &json!({"workflowId": wf_id}).to_string(),
    ]);
    assert_eq!(v["status"], "paused", "deleting is destructive: {v}");
    let exec = v["executionId"].as_str().unwrap().to_string();
    let (code, v) = c(&["approvals", "approve", &exec]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["status"], "completed", "{v}");
    let (code, v): (i32, Value) = c(&[
        "call",
        "n8n.workflows.get",
        &json!({"workflowId": wf_id}).to_string(),
    ]);
    assert_eq!(code, 1, "the workflow is gone: {v}");
    eprintln!(
        "created workflow {wf_id}, delete paused as {exec}, approved, then get → {}",
        v["error"]["code"]
    );
}
