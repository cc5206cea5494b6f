//! Durable approvals: the server runs as a child process; a script inserts a row and then pauses
//! on a destructive call; the server is killed with SIGKILL and restarted; `resume` (from a new
//! session, over another face) completes the script, and the row inserted before the pause exists
//! exactly once.

use crate::support;

use serde_json::{json, Value};
use support::*;

#[tokio::test]
async fn paused_script_survives_sigkill_and_completes_once() {
    let dir = tempfile::tempdir().unwrap();
    let http = reqwest::Client::new();

    let server = Server::start(dir.path(), None, &[]);
    let client = http_client(server.port, None).await;
    let (_, v) = run_script(
        &client,
        r#"await tools.tables.create({name: "audit", columns: [{name: "event", type: "string"}]});
           await tools.tables.create({name: "scratch", columns: []});
           return "ready""#,
    )
    .await;
    assert_eq!(v["result"], "ready", "{v}");
    let (_, v) = run_script(
        &client,
        r#"const a = await tools.tables.rows.insert({table: "audit", rows: [{event: "before-pause"}]});
           await tools.tables.delete({name: "scratch"});
           const b = await tools.tables.rows.insert({table: "audit", rows: [{event: "after-approval"}]});
           return {first: a.rows[0].id, second: b.rows[0].id, r: Math.random()}"#,
    )
    .await;
    assert_eq!(v["status"], "paused", "{v}");
    let id = v["executionId"].as_str().unwrap().to_string();
    drop(client);
    server.kill(); // SIGKILL: no shutdown hooks run.

    let server = Server::start(dir.path(), None, &[]);
    // Listed after the restart.
    let list: Value = http
        .get(server.url("/v1/executions"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        list["executions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["executionId"] == id.as_str()),
        "{list}"
    );
    // Resume over the HTTP API, a different face and session than the one that started it.
    let r = http
        .post(server.url(&format!("/v1/executions/{id}/resume")))
        .json(&json!({"decision": "approve"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let done: Value = r.json().await.unwrap();
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["first"], 1);
    assert_eq!(done["result"]["second"], 2);

    let rows: Value = http
        .post(server.url("/v1/tools/tables.rows.query/call"))
        .json(&json!({"table": "audit"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let events: Vec<&str> = rows["result"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["event"].as_str().unwrap())
        .collect();
    assert_eq!(
        events,
        vec!["before-pause", "after-approval"],
        "each insert ran exactly once"
    );
    let tables: Value = http
        .post(server.url("/v1/tools/tables.list/call"))
        .json(&json!({}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(tables["result"]["tables"]
        .as_array()
        .unwrap()
        .iter()
        .all(|t| t["name"] != "scratch"));

    // Settled: a second resume is refused; an unknown id too.
    let r = http
        .post(server.url(&format!("/v1/executions/{id}/resume")))
        .json(&json!({"decision": "approve"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 409);
    let r = http
        .post(server.url("/v1/executions/ex_nope/resume"))
        .json(&json!({"decision": "approve"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let r = http
        .post(server.url(&format!("/v1/executions/{id}/resume")))
        .json(&json!({"decision": "maybe"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
}

#[tokio::test]
async fn expired_pause_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("t.toml");
    std::fs::write(&cfg, "[approvals]\nttl_secs = 0\n").unwrap();
    let (_, v) = cli(
        dir.path(),
        Some(&cfg),
        &["call", "tables.create", r#"{"name":"x","columns":[]}"#],
    );
    assert_eq!(v["status"], "completed", "{v}");
    let (_, v) = cli(
        dir.path(),
        Some(&cfg),
        &["call", "tables.delete", r#"{"name":"x"}"#],
    );
    assert_eq!(v["status"], "paused", "{v}");
    let id = v["executionId"].as_str().unwrap().to_string();
    std::thread::sleep(std::time::Duration::from_millis(20));
    let (code, v) = cli(dir.path(), Some(&cfg), &["approvals", "approve", &id]);
    assert_eq!(code, 1);
    assert_eq!(v["error"]["code"], "expired", "{v}");
}
