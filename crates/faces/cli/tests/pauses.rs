//! Pauses through the binary: `run --client-tools`, `executions tool-results` / `cancel` /
//! `list --wait`, and two servers on one PostgreSQL database answering each other's pauses,
//! where a server whose sealing key differs refuses to start.

use crate::support;

use std::time::Duration;

use serde_json::{json, Value};
use support::*;

const SCRIPT: &str = r#"
    const [sum, tables] = await Promise.all([
        tools.client.calculator({a: 2, b: 3}),
        tools.tables.list({}),
    ]);
    return {sum: sum.sum, tables: tables.tables.length};
"#;

fn calculator() -> Value {
    json!([{
        "type": "function",
        "function": {"name": "calculator", "description": "Adds.", "parameters": {"type": "object"}}
    }])
}

#[test]
fn cli_verbs_run_client_tools_answer_and_cancel() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.js");
    std::fs::write(&script, SCRIPT).unwrap();
    let tools = dir.path().join("tools.json");
    std::fs::write(&tools, calculator().to_string()).unwrap();
    let (s, t) = (script.to_str().unwrap(), tools.to_str().unwrap());

    let (code, v) = cli(dir.path(), None, &["run", s, "--client-tools", t]);
    assert_eq!(code, 0, "a pause is not a failure: {v}");
    assert_eq!(v["status"], "tool_call_required", "{v}");
    assert_eq!(v["toolCalls"][0]["name"], "calculator");
    let id = v["executionId"].as_str().unwrap().to_string();

    let (_, v) = cli(
        dir.path(),
        None,
        &["executions", "list", "--wait", "tool_result"],
    );
    assert_eq!(v["executions"][0]["executionId"], id.as_str(), "{v}");
    let (code, v) = cli(dir.path(), None, &["executions", "list", "--wait", "nope"]);
    assert_ne!(code, 0, "{v}");

    let results = r#"[{"callId": "call_0", "result": {"sum": 5}}]"#;
    let (code, v) = cli(
        dir.path(),
        None,
        &["executions", "tool-results", &id, results],
    );
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["result"], json!({"sum": 5, "tables": 0}));
    let (code, v) = cli(
        dir.path(),
        None,
        &["executions", "tool-results", &id, results],
    );
    assert_eq!(code, 1);
    assert_eq!(v["error"]["code"], "already_settled", "{v}");

    // Bad declarations: the index is named, nothing runs.
    std::fs::write(&tools, r#"[{"name": "ok"}, {"description": "nameless"}]"#).unwrap();
    let (code, v) = cli(dir.path(), None, &["run", s, "--client-tools", t]);
    assert_eq!(code, 1);
    assert_eq!(v["error"]["code"], "invalid_client_tools", "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("[1]"),
        "{v}"
    );

    // Cancel a paused execution.
    std::fs::write(&tools, calculator().to_string()).unwrap();
    let (_, v) = cli(dir.path(), None, &["run", s, "--client-tools", t]);
    let id = v["executionId"].as_str().unwrap().to_string();
    let (code, v) = cli(dir.path(), None, &["executions", "cancel", &id]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["status"], "cancelled");
    let (_, v) = cli(dir.path(), None, &["executions", "show", &id]);
    assert_eq!(v["status"], "cancelled", "{v}");
}

#[tokio::test]
async fn a_pause_on_one_replica_is_answered_on_another_and_a_foreign_key_refuses_to_start() {
    let Some((url, base, schema)) = postgres_schema("the PostgreSQL replica test").await else {
        return;
    };
    let result = tokio::spawn(replicas_on(url)).await;
    drop_schema(&base, &schema).await;
    result.unwrap();
}

async fn replicas_on(url: String) {
    let key_a = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
    let key_b = "HyAhIiMkJSYnKCkqKywtLi8wMTIzNDU2Nzg5Ojs8PT4=";
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let env_a = [
        ("TOOLSHED_DATABASE_URL", url.as_str()),
        ("TOOLSHED_SECRET_KEY", key_a),
    ];
    let a = Server::start_with_env(dir_a.path(), None, &[], &env_a);
    let b = Server::start_with_env(dir_b.path(), None, &[], &env_a);
    let http = reqwest::Client::new();
    let body = json!({"script": SCRIPT, "clientTools": calculator()});
    let r = http
        .post(a.url("/v1/scripts"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    let v: Value = r.json().await.unwrap();
    let id = v["executionId"].as_str().unwrap().to_string();
    a.kill();

    // The other replica lists it and takes the result.
    let list: Value = http
        .get(b.url("/v1/executions?wait=tool_result"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(list["executions"][0]["executionId"], id.as_str(), "{list}");
    let r = http
        .post(b.url(&format!("/v1/executions/{id}/tool-results")))
        .json(&json!({"results": [{"callId": "call_0", "result": {"sum": 5}}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let done: Value = r.json().await.unwrap();
    assert_eq!(done["result"]["sum"], 5, "{done}");

    // A replica sealing with another key refuses to start, saying why.
    let out = std::process::Command::new(BIN)
        .arg("--data-dir")
        .arg(dir_b.path())
        .args(["sources", "list"])
        .env("TOOLSHED_DATABASE_URL", &url)
        .env("TOOLSHED_SECRET_KEY", key_b)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("TOOLSHED_SECRET_KEY"), "{err}");
    assert!(
        !err.contains(key_b) && !err.contains(key_a),
        "no key in the message: {err}"
    );
    let mut c = std::process::Command::new(BIN);
    c.arg("--data-dir")
        .arg(dir_b.path())
        .args(["serve", "--http", &format!("127.0.0.1:{}", free_port())])
        .env("TOOLSHED_DATABASE_URL", &url)
        .env("TOOLSHED_SECRET_KEY", key_b);
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::task::spawn_blocking(move || c.output()),
    )
    .await
    .expect("a refused server exits")
    .unwrap()
    .unwrap();
    assert!(!out.status.success(), "the server refused to start");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not the key this database was set up with")
    );
}
