//! Against a real n8n, only when `N8N_URL` and `N8N_API_KEY` are set (otherwise it prints a skip
//! line and passes). `shared/scripts/n8n-live.sh install|start|seed|env` prepares one. With
//! `N8N_EMAIL` and `N8N_PASSWORD` also set, the node catalog is read through a real login.
//!
//! Lists workflows and filtered, paged executions, summarizes every failed execution (there
//! must be one), drills into its failed node, debugs it, creates, updates (checking no node field
//! is lost), archives and deletes a workflow, round-trips data table rows, searches the full node
//! catalog, and checks a bad key and the budgets for real.

use crate::common;
use crate::common::call;

use std::time::Duration;

use common::{assert_clean, fixture, o200k};
use serde_json::json;
use toolshed_core::{Plugin, ToolErrorKind};
use toolshed_n8n::{plugin, N8nClient, N8nConfig, N8nLogin, NODE_BUDGET, SUMMARY_BUDGET};

fn live() -> Option<(String, String)> {
    match (std::env::var("N8N_URL"), std::env::var("N8N_API_KEY")) {
        (Ok(u), Ok(k)) if !u.is_empty() && !k.is_empty() => Some((u, k)),
        _ => {
            eprintln!("skipping live n8n test: set N8N_URL and N8N_API_KEY to run it");
            None
        }
    }
}

fn live_config(url: &str, key: &str) -> N8nConfig {
    N8nConfig {
        timeout: Duration::from_secs(60),
        allow_private: true,
        ..N8nConfig::new(url, key)
    }
}

fn n8n(url: &str, key: &str) -> Plugin {
    plugin(live_config(url, key)).unwrap()
}

fn login() -> Option<N8nLogin> {
    match (std::env::var("N8N_EMAIL"), std::env::var("N8N_PASSWORD")) {
        (Ok(email), Ok(password)) if !email.is_empty() && !password.is_empty() => {
            Some(N8nLogin { email, password })
        }
        _ => None,
    }
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
    assert!(
        !failed.is_empty(),
        "N8N_URL is set but {url} has no failed execution to summarize (seed it with n8n-live.sh seed)"
    );
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

    // Filters and paging are applied by n8n itself.
    let wf_id = failed[0]["workflowId"].as_str().unwrap().to_string();
    let by_wf = call(
        &p,
        "n8n.executions.list",
        json!({"workflowId": wf_id, "limit": 100}),
    )
    .await
    .unwrap();
    let by_wf = by_wf["executions"].as_array().unwrap().clone();
    assert!(by_wf.iter().all(|e| e["workflowId"] == wf_id.as_str()));
    let page1 = call(&p, "n8n.executions.list", json!({"limit": 1}))
        .await
        .unwrap();
    let cursor = page1["nextCursor"]
        .as_str()
        .expect("more than one execution");
    let page2 = call(
        &p,
        "n8n.executions.list",
        json!({"limit": 1, "cursor": cursor}),
    )
    .await
    .unwrap();
    assert_ne!(page1["executions"][0]["id"], page2["executions"][0]["id"]);
    println!(
        "executions of workflow {wf_id}: {}; paging: {} then {}",
        by_wf.len(),
        page1["executions"][0]["id"],
        page2["executions"][0]["id"]
    );

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
    // Node fields the compact view does not show must survive an update.
    let client = N8nClient::from_config(&live_config(&url, &key)).unwrap();
    let raw = client.get(&format!("/workflows/{id}"), &[]).await.unwrap();
    let mut nodes = raw["nodes"].as_array().unwrap().clone();
    let extra = json!({"continueOnFail": true, "alwaysOutputData": true, "notes": "kept", "notesInFlow": true, "retryOnFail": true, "maxTries": 2, "waitBetweenTries": 100, "executeOnce": true});
    for (k, v) in extra.as_object().unwrap() {
        nodes[1][k] = v.clone();
    }
    let node_name = nodes[1]["name"].as_str().unwrap().to_string();
    call(
        &p,
        "n8n.workflows.update",
        json!({"workflowId": id, "nodes": nodes, "description": "set by the live test", "settings": {"executionOrder": "v1", "saveManualExecutions": true, "binaryMode": "separate"}}),
    )
    .await
    .unwrap();
    let renamed = call(
        &p,
        "n8n.workflows.update",
        json!({"workflowId": id, "name": format!("{name} (renamed)")}),
    )
    .await
    .unwrap();
    assert!(renamed["name"].as_str().unwrap().ends_with("(renamed)"));
    assert_eq!(renamed["nodes"].as_array().unwrap().len(), 5);
    let raw = client.get(&format!("/workflows/{id}"), &[]).await.unwrap();
    let node = raw["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == node_name.as_str())
        .unwrap();
    for (k, v) in extra.as_object().unwrap() {
        assert_eq!(&node[k], v, "{k} lost by an update");
    }
    assert_eq!(raw["description"], "set by the live test");
    assert_eq!(raw["settings"]["saveManualExecutions"], true);
    println!(
        "update kept {} node fields, description and settings",
        extra.as_object().unwrap().len()
    );
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
    assert_eq!(types["source"], "workflows");

    data_tables(&p, &client).await;

    match login() {
        Some(l) => catalog(&url, &key, l).await,
        None => eprintln!(
            "skipping the live node-catalog part: set N8N_EMAIL and N8N_PASSWORD to run it"
        ),
    }

    // A wrong key, for real.
    let bad = n8n(&url, "not-a-real-key");
    let e = call(&bad, "n8n.workflows.list", json!({}))
        .await
        .unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::Unauthorized);
    assert!(e.message.starts_with("n8n rejected the API key (401)"));
    assert!(!e.message.contains(&key));
}

/// Rows of a real data table through the tools (the table is made and removed with the client).
async fn data_tables(p: &Plugin, client: &N8nClient) {
    let name = format!("toolshed_live_{}", std::process::id());
    let t = client
        .request(
            reqwest::Method::POST,
            "/data-tables",
            &[],
            Some(&json!({"name": name, "columns": [{"name": "sku", "type": "string"}, {"name": "qty", "type": "number"}]})),
            None,
        )
        .await
        .unwrap();
    let table = t["id"].as_str().unwrap().to_string();
    let listed = call(p, "n8n.data_tables.list", json!({"filter": {"name": name}}))
        .await
        .unwrap();
    assert_eq!(listed["dataTables"][0]["id"], table.as_str());
    let cols = call(p, "n8n.data_tables.columns", json!({"dataTableId": table}))
        .await
        .unwrap();
    assert_eq!(cols["columns"].as_array().unwrap().len(), 2);
    let ins = call(
        p,
        "n8n.data_tables.rows.insert",
        json!({"dataTableId": table, "rows": [{"sku": "A", "qty": 1}, {"sku": "B", "qty": 2}]}),
    )
    .await
    .unwrap();
    assert_eq!(ins["result"]["insertedRows"], 2);
    let eq_a =
        json!({"type": "and", "filters": [{"columnName": "sku", "condition": "eq", "value": "A"}]});
    let q = call(
        p,
        "n8n.data_tables.rows.query",
        json!({"dataTableId": table, "filter": eq_a}),
    )
    .await
    .unwrap();
    assert_eq!(q["rows"].as_array().unwrap().len(), 1);
    let u = call(
        p,
        "n8n.data_tables.rows.update",
        json!({"dataTableId": table, "filter": eq_a, "data": {"qty": 5}, "returnData": true}),
    )
    .await
    .unwrap();
    assert_eq!(u["rows"][0]["qty"], 5);
    let eq_c =
        json!({"type": "and", "filters": [{"columnName": "sku", "condition": "eq", "value": "C"}]});
    let up = call(
        p,
        "n8n.data_tables.rows.upsert",
        json!({"dataTableId": table, "filter": eq_c, "data": {"sku": "C", "qty": 3}, "returnData": true}),
    )
    .await
    .unwrap();
    assert_eq!(up["rows"][0]["sku"], "C");
    let gt2 =
        json!({"type": "and", "filters": [{"columnName": "qty", "condition": "gt", "value": 2}]});
    let dry = call(
        p,
        "n8n.data_tables.rows.delete",
        json!({"dataTableId": table, "filter": gt2, "dryRun": true, "returnData": true}),
    )
    .await
    .unwrap();
    let del = call(
        p,
        "n8n.data_tables.rows.delete",
        json!({"dataTableId": table, "filter": gt2, "returnData": true}),
    )
    .await
    .unwrap();
    let left = call(
        p,
        "n8n.data_tables.rows.query",
        json!({"dataTableId": table}),
    )
    .await
    .unwrap();
    println!(
        "data table {table}: dry run would delete {}, deleted {}, {} row(s) left",
        dry["rows"].as_array().map_or(0, Vec::len),
        del["rows"].as_array().map_or(0, Vec::len),
        left["rows"].as_array().map_or(0, Vec::len)
    );
    assert_eq!(del["rows"].as_array().unwrap().len(), 2);
    assert_eq!(left["rows"][0]["sku"], "B");
    client
        .request(
            reqwest::Method::DELETE,
            &format!("/data-tables/{table}"),
            &[],
            None,
            None,
        )
        .await
        .unwrap();
}

/// The full node catalog through a real login.
async fn catalog(url: &str, key: &str, login: N8nLogin) {
    let password = login.password.clone();
    let p = plugin(N8nConfig {
        login: Some(login),
        ..live_config(url, key)
    })
    .unwrap();
    let started = std::time::Instant::now();
    let s = call(&p, "n8n.nodes.search", json!({"query": "slack"}))
        .await
        .unwrap();
    println!(
        "node catalog: {} types, first search {:?}; 'slack' -> {:?}",
        s["catalogSize"],
        started.elapsed(),
        s["nodeTypes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["nodeType"].as_str().unwrap())
            .collect::<Vec<_>>()
    );
    assert_eq!(s["source"], "catalog", "{s}");
    assert!(s["catalogSize"].as_u64().unwrap() > 400);
    assert_eq!(s["nodeTypes"][0]["nodeType"], "n8n-nodes-base.slack");
    // A type no seeded workflow uses.
    let g = call(&p, "n8n.nodes.search", json!({"query": "gmail"}))
        .await
        .unwrap();
    assert_eq!(g["nodeTypes"][0]["nodeType"], "n8n-nodes-base.gmail");
    for (ty, extra) in [
        ("n8n-nodes-base.httpRequest", json!({})),
        ("n8n-nodes-base.slack", json!({})),
        (
            "n8n-nodes-base.slack",
            json!({"resource": "message", "operation": "post"}),
        ),
        ("n8n-nodes-base.googleSheets", json!({})),
    ] {
        let mut args = json!({"nodeType": ty});
        for (k, v) in extra.as_object().unwrap() {
            args[k] = v.clone();
        }
        let t = call(&p, "n8n.nodes.get_type", args).await.unwrap();
        let tokens = o200k(&t);
        println!(
            "  {ty} {extra}: version {}, {} parameters shown of {}, {tokens} tokens{}",
            t["version"],
            t["parameters"].as_array().unwrap().len(),
            t["parameterCount"],
            if t["parametersTruncated"].is_string() {
                " (truncated)"
            } else {
                ""
            }
        );
        assert!(tokens <= NODE_BUDGET);
        assert!(!t.to_string().contains(&password));
    }
    let bad = plugin(N8nConfig {
        login: Some(N8nLogin {
            email: "owner@example.com".into(),
            password: "definitely-wrong-pw".into(),
        }),
        ..live_config(url, key)
    })
    .unwrap();
    let s = call(&bad, "n8n.nodes.search", json!({"query": "webhook"}))
        .await
        .unwrap();
    assert_eq!(s["source"], "workflows");
    println!("wrong password: {}", s["catalogError"]);
    assert!(s["catalogError"].as_str().unwrap().contains("login"));
    assert!(!s.to_string().contains("definitely-wrong-pw"));
}
