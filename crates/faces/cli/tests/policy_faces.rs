//! A principal allowed only `tables.rows.*` cannot create a table through any face: CLI (`call`
//! and `run`), MCP over stdio (meta-tools and scripts), MCP over HTTP with an API key (direct
//! tools and `run_script`), and the HTTP API (calls and `POST /v1/scripts`). A tool outside the
//! role answers exactly like a tool that does not exist.

use crate::support;

use serde_json::{json, Value};
use support::*;

/// A script that tries `path` and returns the error's code and message.
fn probe(path: &str) -> String {
    format!(
        r#"try {{ await tools.{path}({{name: "t", columns: []}}); return "created" }} catch (e) {{ return {{code: e.code, message: e.message}} }}"#
    )
}

/// The probe's result for `tables.create` answers exactly like the one for a missing tool.
fn assert_like_missing(forbidden: &Value, missing: &Value, face: &str) {
    assert_eq!(forbidden["code"], "not_found", "{face}: {forbidden}");
    assert_eq!(missing["code"], "not_found", "{face}: {missing}");
    assert_eq!(
        forbidden["message"]
            .as_str()
            .unwrap()
            .replace("tables.create", "X"),
        missing["message"]
            .as_str()
            .unwrap()
            .replace("tables.nonexistent", "X"),
        "{face}: forbidden and missing answer alike"
    );
}

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
    // CLI scripts (`toolshed run`).
    let script = |path: &str| {
        let f = dir.path().join(format!("probe-{path}.js"));
        std::fs::write(&f, probe(path)).unwrap();
        let (code, v) = cli(
            dir.path(),
            Some(&limited_cfg),
            &["run", f.to_str().unwrap()],
        );
        assert_eq!(code, 0, "{v}");
        v["result"].clone()
    };
    assert_like_missing(
        &script("tables.create"),
        &script("tables.nonexistent"),
        "toolshed run",
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
    // run_script over MCP-HTTP with the API key.
    let (_, forbidden) = run_script(&mcp, &probe("tables.create")).await;
    let (_, missing) = run_script(&mcp, &probe("tables.nonexistent")).await;
    assert_like_missing(
        &forbidden["result"],
        &missing["result"],
        "MCP-HTTP run_script",
    );
    mcp.cancel().await.unwrap();

    // POST /v1/scripts with the API key.
    let post_script = |path: &'static str| {
        let http = http.clone();
        let url = server.url("/v1/scripts");
        async move {
            let r = http
                .post(url)
                .bearer_auth("k-limited")
                .json(&json!({"script": probe(path)}))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 200);
            r.json::<Value>().await.unwrap()["result"].clone()
        }
    };
    assert_like_missing(
        &post_script("tables.create").await,
        &post_script("tables.nonexistent").await,
        "POST /v1/scripts",
    );
    // No face created the table.
    let tables: Value = http
        .post(server.url("/v1/tools/tables.list/call"))
        .bearer_auth("k-admin")
        .json(&json!({}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(tables["result"]["tables"], json!([]), "{tables}");

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

/// Call rules through the binary: the default pauses a write, `allow` lets rows be written
/// unconfirmed, `deny` refuses destructive calls on the CLI, in scripts and over HTTP (403).
#[tokio::test]
async fn call_rules_pause_allow_and_deny_on_every_face() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("rules.toml");
    std::fs::write(
        &cfg,
        r#"
[[roles]]
id = "editor"
patterns = ["*"]
decide = ["**"]
allow = ["tables.rows.*"]
deny = ["destructive"]
[[principals]]
id = "local"
roles = ["editor"]
"#,
    )
    .unwrap();
    let (_, v) = cli(
        dir.path(),
        Some(&cfg),
        &[
            "call",
            "tables.create",
            r#"{"name":"t","columns":[{"name":"x","type":"number"}]}"#,
        ],
    );
    assert_eq!(v["status"], "paused", "a write waits by default: {v}");
    let id = v["executionId"].as_str().unwrap().to_string();
    let (_, v) = cli(dir.path(), Some(&cfg), &["approvals", "approve", &id]);
    assert_eq!(v["status"], "completed", "{v}");
    let (code, v) = cli(
        dir.path(),
        Some(&cfg),
        &[
            "call",
            "tables.rows.insert",
            r#"{"table":"t","rows":[{"x":1}]}"#,
        ],
    );
    assert_eq!(
        (code, &v["status"]),
        (0, &json!("completed")),
        "allowed: {v}"
    );
    let (code, v) = cli(
        dir.path(),
        Some(&cfg),
        &["call", "tables.delete", r#"{"name":"t"}"#],
    );
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["error"]["code"], "denied_by_policy", "{v}");

    let server = Server::start(dir.path(), Some(&cfg), &[]);
    let http = reqwest::Client::new();
    let r = http
        .post(server.url("/v1/tools/tables.delete/call"))
        .json(&json!({"name": "t"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "denied_by_policy", "{body}");
    let r = http
        .post(server.url("/v1/scripts"))
        .json(&json!({"script": "try { await tools.tables.delete({name: 't'}) } catch (e) { return e.code }"}))
        .send()
        .await
        .unwrap();
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["result"], "denied_by_policy", "{body}");
    // Nothing was deleted.
    let (_, v) = cli(dir.path(), Some(&cfg), &["call", "tables.list", "{}"]);
    assert_eq!(v["result"]["tables"][0]["name"], "t", "{v}");
}
