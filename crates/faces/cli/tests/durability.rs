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

    let cfg = allow_writes_config(dir.path());
    let server = Server::start(dir.path(), Some(&cfg), &[]);
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

    let cfg = allow_writes_config(dir.path());
    let server = Server::start(dir.path(), Some(&cfg), &[]);
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
    std::fs::write(&cfg, format!("[approvals]\nttl_secs = 0\n{ALLOW_WRITES}")).unwrap();
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

/// The process dies (SIGKILL) in the middle of a *resumed* run, after the approved delete ran:
/// the restarted server lists the execution as interrupted, its owner resumes it, and neither
/// the insert before the pause nor the approved delete runs a second time (a second delete of
/// the same table would fail the script).
#[tokio::test]
async fn sigkill_during_a_resumed_run_never_reruns_completed_calls() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("toolshed.toml");
    // A resumed run counts as interrupted 6 s after its last sign of life.
    std::fs::write(
        &cfg,
        format!("[limits]\nwall_clock_ms = 6000\ncall_timeout_ms = 2000\n[approvals]\nrecovery_grace_secs = 0\n{ALLOW_WRITES}"),
    )
    .unwrap();
    let http = reqwest::Client::new();
    let server = Server::start(dir.path(), Some(&cfg), &[]);
    let post = |server: &Server, path: &str, body: Value| {
        let req = http.post(server.url(path)).json(&body);
        async move {
            let r = req.send().await.unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        }
    };
    let (_, v) = post(
        &server,
        "/v1/scripts",
        json!({"script": r#"await tools.tables.create({name: "events", columns: [{name: "event", type: "string"}]});
                           await tools.tables.create({name: "scratch", columns: []}); return 1"#}),
    )
    .await;
    assert_eq!(v["status"], "completed", "{v}");
    // After the approved delete, a busy loop (about a second of CPU) before the last insert.
    let (status, v) = post(
        &server,
        "/v1/scripts",
        json!({"script": r#"const a = await tools.tables.rows.insert({table: "events", rows: [{event: "before-pause"}]});
           await tools.tables.delete({name: "scratch"});
           let x = 0; for (let i = 0; i < 1e7; i++) x += i;
           const b = await tools.tables.rows.insert({table: "events", rows: [{event: "after-approval"}]});
           return {first: a.rows[0].id, second: b.rows[0].id}"#}),
    )
    .await;
    assert_eq!((status, v["status"].clone()), (202, json!("paused")), "{v}");
    let id = v["executionId"].as_str().unwrap().to_string();

    // Approve; while the resumed run loops, kill the process.
    let resume = {
        let req = http
            .post(server.url(&format!("/v1/executions/{id}/resume")))
            .json(&json!({"decision": "approve"}));
        tokio::spawn(async move { req.send().await })
    };
    let mut seen = Value::Null;
    for _ in 0..500 {
        seen = http
            .get(server.url(&format!("/v1/executions/{id}")))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if seen["completedCalls"] == 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    assert_eq!(seen["status"], "running", "{seen}");
    assert_eq!(
        seen["completedCalls"], 2,
        "the approved delete is journaled as soon as it completes: {seen}"
    );
    server.kill();
    let _ = resume.await;

    let server = Server::start(dir.path(), Some(&cfg), &[]);
    let mut listed = Value::Null;
    for _ in 0..200 {
        listed = http
            .get(server.url("/v1/executions"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if listed["executions"][0]["status"] == "interrupted" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(
        listed["executions"][0]["executionId"],
        id.as_str(),
        "{listed}"
    );
    assert_eq!(listed["executions"][0]["status"], "interrupted", "{listed}");

    let (status, done) = post(
        &server,
        &format!("/v1/executions/{id}/resume"),
        json!({"decision": "approve"}),
    )
    .await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"], json!({"first": 1, "second": 2}));
    let (_, rows) = post(
        &server,
        "/v1/tools/tables.rows.query/call",
        json!({"table": "events"}),
    )
    .await;
    let events: Vec<&str> = rows["result"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["event"].as_str().unwrap())
        .collect();
    assert_eq!(events, vec!["before-pause", "after-approval"], "{rows}");
}
