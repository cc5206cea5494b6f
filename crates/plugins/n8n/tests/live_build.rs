//! Building against a real n8n: only when `N8N_URL`, `N8N_API_KEY`, `N8N_EMAIL` and
//! `N8N_PASSWORD` are set (the checks read the editor's node catalog); otherwise a skip line.
//!
//! Every seeded workflow goes through `get_as_code` → `build` unchanged and comes back equal
//! (the text's o200k tokens against the raw workflow JSON are printed for docs/benchmarks.md);
//! a new workflow with mistakes is refused with each problem named, fixed with one patch and
//! saved; its versions are listed, read and restored; parameter values are looked up with a
//! credential; credential setup waits for a credential a person makes; test executions are
//! cleaned up; the curated suggestions name installed node types.

use serde_json::{json, Value};
use toolshed_core::{Plugin, ToolErrorKind};
use toolshed_n8n::code::{comparable, to_code};
use toolshed_n8n::{plugin, N8nConfig};
use toolshed_store::Store;

use crate::common::{call, call_in, o200k};

struct Live {
    p: Plugin,
    url: String,
    key: String,
}

async fn live() -> Option<Live> {
    let config = crate::common::live_config("build test")?;
    let (url, key) = (config.base_url.clone(), config.api_key.clone());
    let p = plugin(N8nConfig {
        state: Some(Store::open("sqlite::memory:").await.unwrap()),
        ..config
    })
    .unwrap();
    Some(Live { p, url, key })
}

/// The public API directly (what a person or the test itself does in n8n).
async fn api(l: &Live, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
    let mut r = reqwest::Client::new()
        .request(
            method,
            format!("{}/api/v1{path}", l.url.trim_end_matches('/')),
        )
        .header("X-N8N-API-KEY", &l.key);
    if let Some(b) = body {
        r = r.json(&b);
    }
    let r = r.send().await.unwrap();
    let status = r.status();
    let v: Value = r.json().await.unwrap_or(Value::Null);
    assert!(status.is_success(), "{path}: {status} {v}");
    v
}

#[tokio::test]
async fn live_workflows_round_trip_through_their_text_within_half_the_tokens() {
    let Some(l) = live().await else {
        return;
    };
    let list = api(&l, reqwest::Method::GET, "/workflows?limit=100", None).await;
    let seeded: Vec<Value> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["name"].as_str().unwrap().starts_with("MCP demo:"))
        .cloned()
        .collect();
    assert!(seeded.len() >= 5, "seed the instance first");
    let (mut code_tokens, mut raw_tokens, mut core_tokens) = (0, 0, 0);
    for w in &seeded {
        let id = w["id"].as_str().unwrap();
        let raw = api(&l, reqwest::Method::GET, &format!("/workflows/{id}"), None).await;
        let got = call(&l.p, "n8n.workflows.get_as_code", json!({"workflowId": id}))
            .await
            .unwrap();
        let text = got["code"].as_str().unwrap();
        assert_eq!(text, to_code(&raw));
        let core = json!({"name": raw["name"], "nodes": raw["nodes"], "connections": raw["connections"], "settings": raw["settings"]});
        let (c, r, k) = (o200k(&json!(text)), o200k(&raw), o200k(&core));
        println!(
            "workflow text: {:<70} {c:>5} tokens; raw JSON {r:>5} ({:.0} %); name+nodes+connections+settings {k:>5} ({:.0} %)",
            raw["name"].as_str().unwrap(),
            100.0 * c as f64 / r as f64,
            100.0 * c as f64 / k as f64
        );
        code_tokens += c;
        raw_tokens += r;
        core_tokens += k;
        // Saved back unchanged: n8n holds an equal workflow, with the same node ids.
        let built = call(
            &l.p,
            "n8n.workflows.build",
            json!({"workflowId": id, "code": text}),
        )
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", raw["name"]));
        assert_eq!(built["saved"], true);
        let after = api(&l, reqwest::Method::GET, &format!("/workflows/{id}"), None).await;
        assert_eq!(comparable(&after), comparable(&raw), "{}", raw["name"]);
        let ids = |w: &Value| -> Vec<Value> {
            w["nodes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|n| n["id"].clone())
                .collect()
        };
        assert_eq!(ids(&after), ids(&raw));
    }
    let ratio = code_tokens as f64 / raw_tokens as f64;
    println!(
        "workflow text over {} seeded workflows: {code_tokens} tokens vs raw JSON {raw_tokens} ({:.0} %) vs name+nodes+connections+settings {core_tokens} ({:.0} %)",
        seeded.len(),
        100.0 * ratio,
        100.0 * code_tokens as f64 / core_tokens as f64
    );
    assert!(
        ratio <= 0.5,
        "the text costs {:.0} % of the raw JSON",
        100.0 * ratio
    );
}

#[tokio::test]
async fn live_build_refuses_mistakes_then_saves_and_keeps_versions() {
    let Some(l) = live().await else {
        return;
    };
    let text = r#"workflow "Toolshed live build"
node "Hook" webhook@2 [0,0]
  parameters {"path":"toolshed-live-build","httpMethod":"PUT","colour":"red"}
node "Shape" set@3.4 [220,0]
  parameters {"includeOtherFields":"yes"}
node "Later" noOp@7 [440,0]
"Hook" -> "Shape"
"Shape"[1] -> "Later"
"#;
    let e = call(&l.p, "n8n.workflows.build", json!({"code": text}))
        .await
        .unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::InvalidInput, "{e}");
    let problems = e.data.as_ref().unwrap()["problems"]
        .as_array()
        .unwrap()
        .clone();
    let has = |node: &str, param: Option<&str>| {
        problems
            .iter()
            .any(|p| p["node"] == node && p.get("parameter").and_then(Value::as_str) == param)
    };
    assert!(has("Hook", Some("colour")), "{problems:#?}");
    assert!(has("Shape", Some("includeOtherFields")), "{problems:#?}");
    assert!(has("Later", None), "typeVersion 7: {problems:#?}");
    assert!(has("Shape", None), "output 1 of Set: {problems:#?}");
    // One patch call fixes them all, against the text just sent.
    let fixed = call(
        &l.p,
        "n8n.workflows.build",
        json!({"patches": [
            {"old": ",\"colour\":\"red\"", "new": ""},
            {"old": "\"includeOtherFields\":\"yes\"", "new": "\"includeOtherFields\":true"},
            {"old": "noOp@7", "new": "noOp@1"},
            {"old": "\"Shape\"[1] -> \"Later\"", "new": "\"Shape\" -> \"Later\""},
        ]}),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}: {:?}", e.data));
    let id = fixed["workflowId"].as_str().unwrap().to_string();
    let first_version = fixed["versionId"].as_str().unwrap().to_string();
    // A further patch of the saved workflow's text adds a node: a second version.
    let second = call(
        &l.p,
        "n8n.workflows.build",
        json!({"workflowId": id, "patches": [{"old": "\"Shape\" -> \"Later\"", "new": "\"Shape\" -> \"Later\"\nnode \"Extra\" noOp@1 [660,0]\n\"Later\" -> \"Extra\""}]}),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}: {:?}", e.data));
    assert_ne!(second["versionId"], json!(first_version));
    let versions = call(
        &l.p,
        "n8n.workflows.versions.list",
        json!({"workflowId": id}),
    )
    .await
    .unwrap();
    let listed: Vec<&str> = versions["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["versionId"].as_str().unwrap())
        .collect();
    assert!(listed.contains(&first_version.as_str()), "{versions}");
    let old = call(
        &l.p,
        "n8n.workflows.versions.get",
        json!({"workflowId": id, "versionId": first_version}),
    )
    .await
    .unwrap();
    assert!(!old["code"].as_str().unwrap().contains("Extra"), "{old}");
    let restored = call(
        &l.p,
        "n8n.workflows.versions.restore",
        json!({"workflowId": id, "versionId": first_version}),
    )
    .await
    .unwrap();
    assert_eq!(restored["nodeCount"], 3, "{restored}");
    // What was built runs.
    let ran = call(
        &l.p,
        "n8n.workflows.run",
        json!({"workflowId": id, "inputData": {"order": 7}, "timeout": 60000}),
    )
    .await
    .unwrap();
    assert_eq!(ran["status"], "success", "{ran}");
    assert_eq!(ran["data"]["node"], "Later", "{ran}");
    let missing = call(
        &l.p,
        "n8n.workflows.versions.get",
        json!({"workflowId": id, "versionId": "no-such-version"}),
    )
    .await
    .unwrap_err();
    assert_eq!(missing.kind, ToolErrorKind::NotFound, "{missing}");
    // Naming versions is licensed: a community instance refuses it, and the error says so.
    let renamed = call(
        &l.p,
        "n8n.workflows.versions.rename",
        json!({"workflowId": id, "versionId": first_version, "name": "first"}),
    )
    .await;
    match renamed {
        Ok(v) => assert_eq!(v["name"], "first"),
        Err(e) => assert!(e.message.contains("licensed"), "{e}"),
    }
    // Folders likewise.
    match call(&l.p, "n8n.folders.list", json!({})).await {
        Ok(v) => assert!(v["folders"].is_array()),
        Err(e) => assert!(e.message.contains("feat:folders"), "{e}"),
    }
    api(
        &l,
        reqwest::Method::DELETE,
        &format!("/workflows/{id}"),
        None,
    )
    .await;
}

#[tokio::test]
async fn live_lookups_credentials_and_cleanup() {
    let Some(l) = live().await else {
        return;
    };
    // A credential the lookup runs with (n8n's own API, so nothing external is needed).
    let cred = api(
        &l,
        reqwest::Method::POST,
        "/credentials",
        Some(json!({"name": "toolshed live n8n api", "type": "n8nApi",
                    "data": {"apiKey": l.key, "baseUrl": format!("{}/api/v1", l.url.trim_end_matches('/'))}})),
    )
    .await;
    let cred_id = cred["id"].as_str().unwrap().to_string();
    let found = call(
        &l.p,
        "n8n.nodes.explore_resources",
        json!({"nodeType": "n8n-nodes-base.n8n", "resource": "workflowId", "credentialId": cred_id,
               "parameters": {"resource": "workflow", "operation": "get"}}),
    )
    .await
    .unwrap();
    assert_eq!(found["source"], "list search");
    let names: Vec<&str> = found["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert!(names.iter().any(|n| n.starts_with("MCP demo:")), "{found}");
    let columns = call(
        &l.p,
        "n8n.nodes.explore_resources",
        json!({"nodeType": "n8n-nodes-base.dataTable", "resource": "orderByColumn"}),
    )
    .await
    .unwrap();
    assert!(
        columns["values"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v["value"] == "createdAt"),
        "{columns}"
    );
    let wrong = call(
        &l.p,
        "n8n.nodes.explore_resources",
        json!({"nodeType": "n8n-nodes-base.n8n", "resource": "nope"}),
    )
    .await
    .unwrap_err();
    assert!(wrong.message.contains("has no parameter 'nope'"), "{wrong}");

    // Credential types by words.
    let types = call(
        &l.p,
        "n8n.credentials.search_types",
        json!({"query": "slack"}),
    )
    .await
    .unwrap();
    assert!(
        types["types"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "slackApi"),
        "{types}"
    );
    // Setup: asks with n8n's page; a person makes the credential there; asked again, the call
    // answers it.
    let ask = call_in(
        &l.p,
        "n8n.credentials.setup",
        json!({"credentialType": "httpHeaderAuth"}),
        Some("ex_live_setup"),
    )
    .await
    .unwrap_err();
    assert_eq!(ask.kind, ToolErrorKind::ActionRequired, "{ask}");
    let url = ask.data.as_ref().unwrap()["url"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(url.ends_with("/home/credentials/create"), "{url}");
    let made = api(
        &l,
        reqwest::Method::POST,
        "/credentials",
        Some(json!({"name": "made by a person", "type": "httpHeaderAuth", "data": {"name": "X-Key", "value": "s3cret-value"}})),
    )
    .await;
    let done = call_in(
        &l.p,
        "n8n.credentials.setup",
        json!({"credentialType": "httpHeaderAuth"}),
        Some("ex_live_setup"),
    )
    .await
    .unwrap();
    assert_eq!(done["credentialId"], made["id"], "{done}");
    assert!(!done.to_string().contains("s3cret-value"));

    // A workflow whose node lacks its credential: setup asks for it in the editor, and once
    // assigned, answers ready.
    let built = call(
        &l.p,
        "n8n.workflows.build",
        json!({"code": "workflow \"Toolshed live setup\"\nnode \"Start\" manualTrigger@1 [0,0]\nnode \"Get\" n8n@1 [220,0]\n  parameters {\"resource\":\"workflow\",\"operation\":\"get\",\"workflowId\":{\"__rl\":true,\"mode\":\"id\",\"value\":\"x\"}}\n\"Start\" -> \"Get\"\n"}),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}: {:?}", e.data));
    let wid = built["workflowId"].as_str().unwrap().to_string();
    let ask = call(&l.p, "n8n.workflows.setup", json!({"workflowId": wid}))
        .await
        .unwrap_err();
    assert_eq!(ask.kind, ToolErrorKind::ActionRequired, "{ask}");
    assert_eq!(
        ask.data.as_ref().unwrap()["missing"][0]["credentialType"],
        "n8nApi"
    );
    let text = call(
        &l.p,
        "n8n.workflows.get_as_code",
        json!({"workflowId": wid}),
    )
    .await
    .unwrap()["code"]
        .as_str()
        .unwrap()
        .to_string();
    let with_cred = text.replace(
        "  parameters {\"resource\"",
        &format!("  credentials {{\"n8nApi\":\"{cred_id}\"}}\n  parameters {{\"resource\""),
    );
    call(
        &l.p,
        "n8n.workflows.build",
        json!({"workflowId": wid, "code": with_cred}),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}: {:?}", e.data));
    let ready = call(&l.p, "n8n.workflows.setup", json!({"workflowId": wid}))
        .await
        .unwrap();
    assert_eq!(ready["ready"], true, "{ready}");

    // Test executions: a verify run leaves a manual execution; cleanup deletes it.
    let v = call(&l.p, "n8n.workflows.verify", json!({"workflowId": wid}))
        .await
        .unwrap();
    let clean = call(&l.p, "n8n.executions.cleanup", json!({"workflowId": wid}))
        .await
        .unwrap();
    assert!(
        clean["deletedIds"]
            .as_array()
            .unwrap()
            .contains(&v["executionId"]),
        "{v} {clean}"
    );

    // Every curated suggestion is an installed node type.
    let all = call(&l.p, "n8n.nodes.suggested", json!({})).await.unwrap();
    for case in all["useCases"].as_array().unwrap() {
        let s = call(
            &l.p,
            "n8n.nodes.suggested",
            json!({"useCase": case["useCase"]}),
        )
        .await
        .unwrap();
        for n in s["useCases"][0]["nodes"].as_array().unwrap() {
            call(&l.p, "n8n.nodes.get_type", json!({"nodeType": n["type"]}))
                .await
                .unwrap_or_else(|e| panic!("{}: {e}", n["type"]));
        }
    }

    api(
        &l,
        reqwest::Method::DELETE,
        &format!("/workflows/{wid}"),
        None,
    )
    .await;
    for id in [cred_id, made["id"].as_str().unwrap().to_string()] {
        api(
            &l,
            reqwest::Method::DELETE,
            &format!("/credentials/{id}"),
            None,
        )
        .await;
    }
}
