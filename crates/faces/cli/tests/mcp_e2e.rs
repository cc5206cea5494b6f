//! MCP end to end against the real binary, with the official Rust SDK as the client: over stdio
//! and over streamable HTTP, the whole agent flow (list, search, read, script with tables whose
//! writes wait for confirmation, a destructive script paused then approved, and the deny path).

use crate::support;

use serde_json::{json, Value};
use support::*;

/// Approves, through the `resume` meta-tool, every wait of a paused answer until the execution
/// settles (the local user's agent relays the user's yes; the default policy lets it). Returns
/// the final answer and how many approvals it took.
async fn approve_all(client: &Client, mut v: Value) -> (Value, usize) {
    let mut approvals = 0;
    while v["status"] == "paused" {
        let wait = v["waits"][0]["waitId"].clone();
        let id = v["executionId"].clone();
        let (err, next) = call(
            client,
            "resume",
            json!({"executionId": id, "waitId": wait, "decision": "approve"}),
        )
        .await;
        assert!(!err, "{next}");
        v = next;
        approvals += 1;
        assert!(approvals < 10, "{v}");
    }
    (v, approvals)
}

async fn agent_flow(client: &Client) {
    // list: the four meta-tools, descriptions generated from the view.
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    for m in ["search_tools", "read_tool", "run_script", "resume"] {
        assert!(names.contains(&m), "{names:?}");
    }
    let search_desc = tools
        .iter()
        .find(|t| t.name == "search_tools")
        .unwrap()
        .description
        .clone()
        .unwrap();
    assert!(search_desc.contains("tables ("), "{search_desc}");

    // search_tools → read_tool
    let (err, v) = call(
        client,
        "search_tools",
        json!({"query": "create a table", "limit": 5}),
    )
    .await;
    assert!(!err, "{v}");
    let text = v.as_str().unwrap_or_default();
    assert!(
        text.contains("matching tools") && text.lines().any(|l| l.starts_with("tables.create — ")),
        "{v}"
    );
    let (err, text) = call(client, "read_tool", json!({"path": "tables.rows.insert"})).await;
    assert!(!err);
    let text = text.as_str().unwrap().to_string();
    assert!(text.contains("await tools.tables.rows.insert("), "{text}");

    // run_script: create, insert, query. The two writes wait for confirmation, one at a time.
    let (err, v) = run_script(
        client,
        r#"
        await tools.tables.create({name: "pets", columns: [{name: "name", type: "string"}, {name: "age", type: "number"}]});
        await tools.tables.rows.insert({table: "pets", rows: [{name: "rex", age: 3}, {name: "tom", age: 5}]});
        const r = await tools.tables.rows.query({table: "pets", filter: {column: "age", op: "gt", value: 4}});
        console.log("found", r.total);
        return r.rows.map(x => x.name);
        "#,
    )
    .await;
    assert!(!err, "{v}");
    assert_eq!(v["waits"][0]["path"], "tables.create", "{v}");
    let (v, approvals) = approve_all(client, v).await;
    assert_eq!(approvals, 2, "create, then insert: {v}");
    assert_eq!(v["status"], "completed", "{v}");
    assert_eq!(v["result"], json!(["tom"]));
    assert_eq!(v["logs"][0]["message"], "found 1");

    // A destructive script pauses; approve completes it.
    let (_, v) = run_script(
        client,
        r#"await tools.tables.delete({name: "pets"}); return "deleted""#,
    )
    .await;
    assert_eq!(v["status"], "paused", "{v}");
    assert_eq!(v["pending"]["path"], "tables.delete");
    let id = v["executionId"].as_str().unwrap().to_string();
    let (err, v) = call(
        client,
        "resume",
        json!({"executionId": id, "decision": "approve"}),
    )
    .await;
    assert!(!err, "{v}");
    assert_eq!(v["status"], "completed");
    assert_eq!(v["result"], "deleted");
    let (_, v) = run_script(client, "return (await tools.tables.list({})).tables.length").await;
    assert_eq!(v["result"], 0);

    // Deny: the script catches the rejection.
    let (_, v) = run_script(
        client,
        r#"await tools.tables.create({name: "keep", columns: []}); return 1"#,
    )
    .await;
    let (v, _) = approve_all(client, v).await;
    assert_eq!(v["result"], 1, "{v}");
    let (_, v) = run_script(
        client,
        r#"try { await tools.tables.delete({name: "keep"}); return "gone" } catch (e) { return "kept: " + e.code }"#,
    )
    .await;
    let id = v["executionId"].as_str().unwrap().to_string();
    let (_, v) = call(
        client,
        "resume",
        json!({"executionId": id, "decision": "deny"}),
    )
    .await;
    assert_eq!(v["result"], "kept: denied", "{v}");
    let (_, v) = run_script(
        client,
        "return (await tools.tables.list({})).tables.map(t => t.name)",
    )
    .await;
    assert_eq!(v["result"], json!(["keep"]));

    // Resuming again is a clear error.
    let (err, v) = call(
        client,
        "resume",
        json!({"executionId": id, "decision": "approve"}),
    )
    .await;
    assert!(err);
    assert_eq!(v["error"]["code"], "already_settled", "{v}");

    // Script errors are readable.
    let (err, v) = run_script(client, "return (1 +").await;
    assert!(err);
    assert_eq!(v["error"]["kind"], "syntax", "{v}");
    assert!(v["error"]["line"].as_u64().is_some(), "{v}");
}

#[tokio::test]
async fn stdio_agent_flow() {
    let dir = tempfile::tempdir().unwrap();
    let client = stdio_client(dir.path(), &[]).await;
    let info = client.peer_info().unwrap();
    assert_eq!(info.server_info.as_ref().unwrap().name, "toolshed");
    agent_flow(&client).await;
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn http_agent_flow() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), None, &[]);
    let client = http_client(server.port, None).await;
    agent_flow(&client).await;
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn direct_mode_lists_and_calls_tools_through_the_engine() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), None, &["--direct"]);
    let client = http_client(server.port, None).await;
    let tools = client.list_all_tools().await.unwrap();
    let create = tools
        .iter()
        .find(|t| t.name == "tables__create")
        .expect("direct tool listed");
    assert!(create.input_schema.contains_key("properties"));
    let delete = tools.iter().find(|t| t.name == "tables__delete").unwrap();
    assert_eq!(
        delete.annotations.as_ref().unwrap().destructive_hint,
        Some(true)
    );
    let (err, v) = call(
        &client,
        "tables__create",
        json!({"name": "t1", "columns": []}),
    )
    .await;
    assert!(!err, "{v}");
    let (v, approvals) = approve_all(&client, v).await;
    assert_eq!((approvals, &v["status"]), (1, &json!("completed")), "{v}");
    // Validation applies to direct calls too.
    let (err, v) = call(&client, "tables__create", json!({"name": 5})).await;
    assert!(err);
    assert_eq!(v["error"]["code"], "invalid_arguments", "{v}");
    // Destructive direct calls pause too.
    let (_, v) = call(&client, "tables__delete", json!({"name": "t1"})).await;
    assert_eq!(v["status"], "paused", "{v}");
    let id = v["executionId"].as_str().unwrap();
    let (_, v) = call(
        &client,
        "resume",
        json!({"executionId": id, "decision": "approve"}),
    )
    .await;
    assert_eq!(v["status"], "completed", "{v}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn hundred_scripts_at_once_with_hostile_ones_and_the_server_stays_healthy() {
    let dir = tempfile::tempdir().unwrap();
    // Room in the queue for all of them (beyond it, scripts are refused as overloaded).
    let cfg = dir.path().join("toolshed.toml");
    std::fs::write(
        &cfg,
        "[limits]\ncpu_ms = 2000\nmax_concurrent_scripts = 8\nmax_queued_scripts = 100\n",
    )
    .unwrap();
    let server = Server::start(dir.path(), Some(&cfg), &[]);
    let client = std::sync::Arc::new(http_client(server.port, None).await);
    let hostile = [
        "while (true) {}",
        "let a = []; while (true) { a.push('x'.repeat(1 << 20)); }",
        "function f() { return f() + 1 } return f()",
        "return require('fs')",
        "return process.env",
        "return await import('x')",
        "throw new Error('boom')",
    ];
    let mut tasks = Vec::new();
    for i in 0..100 {
        let client = client.clone();
        let script = if i % 10 == 0 {
            hostile[(i / 10) % hostile.len()].to_string()
        } else {
            format!("const r = await tools.search({{query: 'rows'}}); return {i} + r.total * 0")
        };
        tasks.push(tokio::spawn(async move {
            (i, run_script(&client, &script).await)
        }));
    }
    for t in tasks {
        let (i, (err, v)) = t.await.unwrap();
        if i % 10 == 0 {
            assert!(err, "hostile script {i} must fail: {v}");
            assert_eq!(v["status"], "failed");
        } else {
            assert_eq!(v["result"], json!(i), "{v}");
        }
    }
    let (_, v) = run_script(&client, "return 40 + 2").await;
    assert_eq!(v["result"], 42);
    let health: Value = reqwest::get(server.url("/healthz"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health["status"], "ok");
}
