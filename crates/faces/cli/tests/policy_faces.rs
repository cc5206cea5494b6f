//! A principal allowed only `tables.rows.*` cannot create a table through any face: CLI, MCP over
//! stdio (meta-tools and scripts), MCP over HTTP (direct tools), and the HTTP API. A tool outside
//! the role answers exactly like a tool that does not exist.

use crate::support;

use serde_json::{json, Value};
use support::*;

#[tokio::test]
async fn rows_only_principal_cannot_create_tables_anywhere() {
    let dir = tempfile::tempdir().unwrap();
    let limited_cfg = write_policy_config(dir.path(), "limited");

    // CLI.
    let (code, v) = cli(
        dir.path(),
        Some(&limited_cfg),
        &["call", "tables.create", r#"{"name":"t","columns":[]}"#],
    );
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["error"]["code"], "not_found", "{v}");
    let (_, missing) = cli(
        dir.path(),
        Some(&limited_cfg),
        &["call", "tables.nonexistent", "{}"],
    );
    assert_eq!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .replace("tables.create", "X"),
        missing["error"]["message"]
            .as_str()
            .unwrap()
            .replace("tables.nonexistent", "X"),
        "forbidden and missing answer alike"
    );
    let (code, v) = cli(
        dir.path(),
        Some(&limited_cfg),
        &["describe", "tables.create"],
    );
    assert_eq!((code, v["error"]["code"].clone()), (1, json!("not_found")));
    let (_, v) = cli(dir.path(), Some(&limited_cfg), &["search", "create table"]);
    assert!(
        v["hits"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h["path"].as_str().unwrap().starts_with("tables.rows.")),
        "{v}"
    );

    // MCP over stdio: meta-tools and scripts.
    let client = stdio_client(dir.path(), &["--config", limited_cfg.to_str().unwrap()]).await;
    let tools = client.list_all_tools().await.unwrap();
    let desc = tools
        .iter()
        .find(|t| t.name == "run_script")
        .unwrap()
        .description
        .clone()
        .unwrap();
    assert!(
        desc.contains("tables (5)"),
        "the view summary counts only allowed tools: {desc}"
    );
    let (_, v) = run_script(&client, r#"try { await tools.tables.create({name: "t", columns: []}); return "created" } catch (e) { return e.code }"#).await;
    assert_eq!(v["result"], "not_found", "{v}");
    let (err, v) = call(&client, "read_tool", json!({"path": "tables.create"})).await;
    assert!(err && v["error"]["code"] == "not_found", "{v}");
    let (_, v) = call(&client, "search_tools", json!({"query": "create table"})).await;
    let text = v.as_str().unwrap_or_default();
    assert!(
        text.contains("tables.rows.") && !text.contains("tables.create"),
        "{v}"
    );
    client.cancel().await.unwrap();

    // HTTP server: API and MCP with API keys, direct mode.
    let server = Server::start(dir.path(), Some(&limited_cfg), &["--direct"]);
    let http = reqwest::Client::new();
    let r = http
        .post(server.url("/v1/tools/tables.create/call"))
        .bearer_auth("k-limited")
        .json(&json!({"name": "t", "columns": []}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "not_found");
    // No key, or a wrong key: refused.
    let r = http
        .post(server.url("/v1/tools/tables.rows.query/call"))
        .json(&json!({"table": "t"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = http
        .get(server.url("/v1/tools?query=rows"))
        .bearer_auth("wrong")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);

    let mcp = http_client(server.port, Some("k-limited")).await;
    let names: Vec<String> = mcp
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    assert!(
        names.contains(&"tables__rows__insert".to_string()),
        "{names:?}"
    );
    assert!(!names.iter().any(|n| n == "tables__create"), "{names:?}");
    let (err, v) = call(&mcp, "tables__create", json!({"name": "t", "columns": []})).await;
    assert!(err && v["error"]["code"] == "not_found", "{v}");
    mcp.cancel().await.unwrap();

    // The admin can create it, and then the limited principal may use its rows.
    let r = http
        .post(server.url("/v1/tools/tables.create/call"))
        .bearer_auth("k-admin")
        .json(&json!({"name": "t", "columns": [{"name": "x", "type": "number"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = http
        .post(server.url("/v1/tools/tables.rows.insert/call"))
        .header("x-api-key", "k-limited")
        .json(&json!({"table": "t", "rows": [{"x": 1}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{:?}", r.text().await);
}
