//! Against a real n8n, only when `N8N_URL` and `N8N_API_KEY` are set (otherwise it prints a skip
//! note and passes). `shared/scripts/n8n-live.sh install|start|seed|env` prepares one.
//!
//! Lists workflows, summarizes a failed execution, drills into its failed node, debugs it,
//! creates, updates, archives and deletes a workflow, and checks a bad key and budgets for real.

use crate::common;

use std::time::Duration;

use common::{assert_clean, fixture, o200k};
use serde_json::{json, Value};
use toolshed_core::{Plugin, ToolContext, ToolError, ToolErrorKind, ToolPath};
use toolshed_n8n::{plugin, N8nConfig, NODE_BUDGET, SUMMARY_BUDGET};

fn live() -> Option<(String, String)> {
    match (std::env::var("N8N_URL"), std::env::var("N8N_API_KEY")) {
        (Ok(u), Ok(k)) if !u.is_empty() && !k.is_empty() => Some((u, k)),
        _ => {
            eprintln!("skipping live n8n test: set N8N_URL and N8N_API_KEY to run it");
            None
        }
    }
}

fn n8n(url: &str, key: &str) -> Plugin {
    plugin(N8nConfig {
        base_url: url.into(),
        api_key: key.into(),
        timeout: Duration::from_secs(60),
        allow_private: true,
    })
    .unwrap()
}

async fn call(p: &Plugin, path: &str, args: Value) -> Result<Value, ToolError> {
    let tool = p
        .tools
        .iter()
        .find(|t| t.def.path.as_str() == path)
        .unwrap_or_else(|| panic!("no tool {path}"));
    let ctx = ToolContext::new("live-test".into(), ToolPath::parse(path).unwrap())
        .with_timeout(Duration::from_secs(60));
    tool.handler.call(ctx, args).await
}

#[tokio::test]
async fn live_n8n_round_trip() {
    let Some((url, key)) = live() else {
        return;
    };
    let p = n8n(&url, &key);

    let wfs = call(&p, "n8n.workflows.list", json!({"limit": 50}))
        .await
        .unwrap();
    let list = wfs["workflows"].as_array().unwrap();
    println!("workflows: {}", list.len());
    assert!(!list.is_empty(), "seed the instance first");

    let failed = call(
        &p,
        "n8n.executions.list",
        json!({"status": "error", "limit": 50}),
    )
    .await
    .unwrap();
    let failed = failed["executions"].as_array().unwrap().clone();
    println!("failed executions: {}", failed.len());
    assert!(!failed.is_empty(), "the seed triggers failing runs");
    for e in &failed {
        let id = e["id"].as_str().unwrap().to_string();
        let s = call(&p, "n8n.executions.get", json!({"executionId": id}))
            .await
            .unwrap();
        let tokens = o200k(&s);
        println!(
            "execution {id} ({}): failed node {}, summary {tokens} tokens",
            s["workflowName"], s["error"]["node"]
        );
        assert!(tokens <= SUMMARY_BUDGET);
        assert_clean(&s, "live summary");
        let node = s["error"]["node"]
            .as_str()
            .expect("a failed node")
            .to_string();
        assert!(s["_guidance"]["example"].as_str().unwrap().contains(&node));
        let d = call(
            &p,
            "n8n.executions.get_node",
            json!({"executionId": id, "nodeName": node}),
        )
        .await
        .unwrap();
        let tokens = o200k(&d);
        println!(
            "  node {node}: type {}, status {}, error {:?}, input items {}, {tokens} tokens",
            d["nodeType"], d["status"], d["error"]["message"], d["input"]["totalItems"]
        );
        assert_eq!(d["status"], "error");
        assert!(d["error"]["message"].is_string() || d["error"]["name"].is_string());
        assert!(tokens <= NODE_BUDGET);
        assert_clean(&d, "live node");
        let dbg = call(&p, "n8n.executions.debug", json!({"executionId": id}))
            .await
            .unwrap();
        assert_eq!(dbg["failedNode"]["nodeName"], node.as_str());
        assert_clean(&dbg, "live debug");
    }

    // Every node of every execution fits the budget, the 2,000-item one included.
    let all = call(&p, "n8n.executions.list", json!({"limit": 100}))
        .await
        .unwrap();
    for e in all["executions"].as_array().unwrap() {
        let id = e["id"].as_str().unwrap();
        let s = call(&p, "n8n.executions.get", json!({"executionId": id}))
            .await
            .unwrap();
        assert!(o200k(&s) <= SUMMARY_BUDGET);
        for n in s["availableNodes"].as_array().into_iter().flatten() {
            let d = call(
                &p,
                "n8n.executions.get_node",
                json!({"executionId": id, "nodeName": n["nodeName"], "limit": 50}),
            )
            .await
            .unwrap();
            assert!(o200k(&d) <= NODE_BUDGET, "{id} {}", n["nodeName"]);
        }
    }

    // Create, read, update, archive and delete a workflow.
    let wf = fixture("wf2-loop.json");
    let name = format!("toolshed live test {}", std::process::id());
    let created = call(
        &p,
        "n8n.workflows.create",
        json!({"name": name, "nodes": wf["nodes"], "connections": wf["connections"], "settings": wf["settings"]}),
    )
    .await
    .unwrap();
    let id = created["id"].as_str().unwrap().to_string();
    println!("created workflow {id}");
    let got = call(&p, "n8n.workflows.get", json!({"workflowId": id}))
        .await
        .unwrap();
    assert_eq!(got["name"], name.as_str());
    assert_eq!(got["nodes"].as_array().unwrap().len(), 5);
    let renamed = call(
        &p,
        "n8n.workflows.update",
        json!({"workflowId": id, "name": format!("{name} (renamed)")}),
    )
    .await
    .unwrap();
    assert!(renamed["name"].as_str().unwrap().ends_with("(renamed)"));
    assert_eq!(renamed["nodes"].as_array().unwrap().len(), 5);
    let archived = call(&p, "n8n.workflows.archive", json!({"workflowId": id}))
        .await
        .unwrap();
    assert_eq!(archived["isArchived"], true);
    let deleted = call(&p, "n8n.workflows.delete", json!({"workflowId": id}))
        .await
        .unwrap();
    assert_eq!(deleted["deleted"], true);
    let gone = call(&p, "n8n.workflows.get", json!({"workflowId": id}))
        .await
        .unwrap_err();
    assert_eq!(gone.kind, ToolErrorKind::NotFound);

    let types = call(&p, "n8n.nodes.search", json!({"query": "webhook"}))
        .await
        .unwrap();
    assert_eq!(types["nodeTypes"][0]["nodeType"], "n8n-nodes-base.webhook");

    // A wrong key, for real.
    let bad = n8n(&url, "not-a-real-key");
    let e = call(&bad, "n8n.workflows.list", json!({}))
        .await
        .unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::Unauthorized);
    assert!(e.message.starts_with("n8n rejected the API key (401)"));
    assert!(!e.message.contains(&key));
}
