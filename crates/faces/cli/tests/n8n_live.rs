//! Against a real n8n, through the binary and the engine: runs when `N8N_URL` and `N8N_API_KEY`
//! are set (e.g. by `../shared/scripts/n8n-live.sh env`), otherwise prints a skip line and
//! passes. Once they are set the instance must have a failed execution (the seed makes some):
//! the test fails, saying so, rather than skipping that part. Lists workflows, summarises a failed
//! execution, drills into its failed node, then creates a workflow and deletes it — the delete
//! pauses for approval and completes once approved. With `N8N_EMAIL` and `N8N_PASSWORD` set too,
//! the configured login gives `n8n.nodes.search` the instance's full node catalog.

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
    let login = matches!(
        (std::env::var("N8N_EMAIL"), std::env::var("N8N_PASSWORD")),
        (Ok(e), Ok(p)) if !e.is_empty() && !p.is_empty()
    );
    let login_lines = if login {
        format!(
            "email = \"{}\"\npassword = \"env:N8N_PASSWORD\"\n",
            std::env::var("N8N_EMAIL").unwrap()
        )
    } else {
        eprintln!("skipping the node-catalog part: N8N_EMAIL and N8N_PASSWORD are not set");
        String::new()
    };
    std::fs::write(
        &cfg,
        format!(
            "[n8n]\nbase_url = \"{url}\"\napi_key = \"env:N8N_API_KEY\"\nallow_private = true\n{login_lines}"
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

    let (code, v) = c(&[
        "call",
        "n8n.executions.list",
        r#"{"status": "error", "limit": 5}"#,
    ]);
    assert_eq!(code, 0, "{v}");
    let first = &v["result"]["executions"][0];
    let id = first["id"]
        .as_str()
        .map(str::to_string)
        .or_else(|| first["id"].as_i64().map(|n| n.to_string()))
        .unwrap_or_else(|| {
            panic!(
                "N8N_URL is set but {url} has no failed execution to debug (seed it with n8n-live.sh seed): {v}"
            )
        });
    let (code, s) = c(&[
        "call",
        "n8n.executions.get",
        &json!({"executionId": id}).to_string(),
    ]);
    assert_eq!(code, 0, "{s}");
    let s = &s["result"];
    assert_eq!(s["status"], "error", "{s}");
    let failed = s["availableNodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["status"] == "error")
        .unwrap_or_else(|| panic!("no failed node in the summary of execution {id}: {s}"));
    let node_name = failed["nodeName"].as_str().unwrap();
    eprintln!(
        "execution {id} of '{}' failed at '{node_name}': {} (summary {} bytes)",
        s["workflowName"],
        s["error"]["message"],
        s.to_string().len()
    );
    let (code, n) = c(&[
        "call",
        "n8n.executions.get_node",
        &json!({"executionId": id, "nodeName": node_name}).to_string(),
    ]);
    assert_eq!(code, 0, "{n}");
    assert_eq!(n["result"]["nodeName"], node_name, "{n}");
    assert_eq!(n["result"]["status"], "error", "{n}");
    assert!(n["result"]["error"].is_object(), "{n}");
    eprintln!(
        "  node '{node_name}' ({}): {} input item(s), {} bytes",
        n["result"]["nodeType"],
        n["result"]["input"]["totalItems"],
        n["result"].to_string().len()
    );

    if login {
        let (code, v) = c(&["call", "n8n.nodes.search", r#"{"query": "gmail"}"#]);
        assert_eq!(code, 0, "{v}");
        assert_eq!(v["result"]["source"], "catalog", "{v}");
        assert_eq!(
            v["result"]["nodeTypes"][0]["nodeType"],
            "n8n-nodes-base.gmail"
        );
        eprintln!(
            "node catalog through the binary: {} types, 'gmail' -> {}",
            v["result"]["catalogSize"], v["result"]["nodeTypes"][0]["nodeType"]
        );
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
