//! CLI verbs with `--json`: `approvals list`, `approvals deny`, `run -` (stdin), `search
//! --limit`, and the `[limits]` of the configuration reaching the script sandbox.

use crate::support;

use std::io::Write;
use std::path::Path;
use std::process::Stdio;

use serde_json::{json, Value};
use support::*;

/// Runs the CLI with `stdin` piped in; returns (exit code, stdout as JSON or text).
fn cli_stdin(data_dir: &Path, config: Option<&Path>, args: &[&str], stdin: &str) -> (i32, Value) {
    let mut cmd = std::process::Command::new(BIN);
    cmd.arg("--data-dir").arg(data_dir).arg("--json");
    if let Some(c) = config {
        cmd.arg("--config").arg(c);
    }
    let mut child = cmd
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run toolshed");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let v = serde_json::from_str(&text)
        .unwrap_or(Value::String(text + &String::from_utf8_lossy(&out.stderr)));
    (out.status.code().unwrap_or(-1), v)
}

#[test]
fn approvals_list_and_deny() {
    let dir = tempfile::tempdir().unwrap();
    let (code, v) = cli(dir.path(), None, &["approvals", "list"]);
    assert_eq!((code, v.clone()), (0, json!({"executions": []})), "{v}");

    // Under the default call rules a write waits for confirmation too.
    let (_, v) = cli(
        dir.path(),
        None,
        &["call", "tables.create", r#"{"name":"keep","columns":[]}"#],
    );
    assert_eq!(v["status"], "paused", "{v}");
    assert_eq!(v["waits"][0]["path"], "tables.create", "{v}");
    let create = v["executionId"].as_str().unwrap().to_string();
    let (code, v) = cli(dir.path(), None, &["approvals", "approve", &create]);
    assert_eq!((code, &v["status"]), (0, &json!("completed")), "{v}");
    let (code, v) = cli(
        dir.path(),
        None,
        &["call", "tables.delete", r#"{"name":"keep"}"#],
    );
    assert_eq!(code, 0, "a pause is not a failure: {v}");
    assert_eq!(v["status"], "paused", "{v}");
    let id = v["executionId"].as_str().unwrap().to_string();

    let (code, v) = cli(dir.path(), None, &["approvals", "list"]);
    assert_eq!(code, 0);
    let list = v["executions"].as_array().unwrap();
    assert_eq!(list.len(), 1, "{v}");
    assert_eq!(list[0]["executionId"], id.as_str());
    assert_eq!(list[0]["status"], "paused");
    assert_eq!(list[0]["kind"], "call");
    assert_eq!(list[0]["principal"], "local");
    assert_eq!(list[0]["pending"]["path"], "tables.delete");
    assert_eq!(list[0]["pending"]["args"], json!({"name": "keep"}));

    let (code, v) = cli(dir.path(), None, &["approvals", "deny", &id]);
    assert_eq!(code, 1, "a denied call fails: {v}");
    assert_eq!(v["status"], "failed", "{v}");
    assert_eq!(v["error"]["code"], "denied", "{v}");
    // Nothing was deleted, nothing waits any more, and it cannot be decided twice.
    let (_, v) = cli(dir.path(), None, &["call", "tables.list", "{}"]);
    assert_eq!(v["result"]["tables"][0]["name"], "keep", "{v}");
    let (_, v) = cli(dir.path(), None, &["approvals", "list"]);
    assert_eq!(v, json!({"executions": []}));
    let (code, v) = cli(dir.path(), None, &["approvals", "deny", &id]);
    assert_eq!(code, 1);
    assert_eq!(v["error"]["code"], "already_settled", "{v}");
    let (code, v) = cli(dir.path(), None, &["approvals", "deny", "ex_nope"]);
    assert_eq!(code, 1);
    assert_eq!(v["error"]["code"], "unknown_execution", "{v}");
}

#[test]
fn run_reads_the_script_from_stdin() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = allow_writes_config(dir.path());
    let (code, v) = cli_stdin(
        dir.path(),
        Some(&cfg),
        &["run", "-"],
        r#"await tools.tables.create({name: "notes", columns: [{name: "text", type: "string"}]});
           await tools.tables.rows.insert({table: "notes", rows: [{text: "from stdin"}]});
           console.log("inserted");
           const q = await tools.tables.rows.query({table: "notes"});
           return q.rows.map(r => r.text);"#,
    );
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["status"], "completed", "{v}");
    assert_eq!(v["result"], json!(["from stdin"]));
    assert_eq!(v["logs"][0]["message"], "inserted");
    // A script that pauses says so, with an execution to approve.
    let (code, v) = cli_stdin(
        dir.path(),
        Some(&cfg),
        &["run", "-"],
        r#"await tools.tables.delete({name: "notes"}); return "gone""#,
    );
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["status"], "paused", "{v}");
    // Errors carry line and column.
    let (code, v) = cli_stdin(
        dir.path(),
        None,
        &["run", "-"],
        "const x = 1;\nreturn x +;\n",
    );
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["error"]["kind"], "syntax", "{v}");
    assert_eq!(v["error"]["line"], 2, "{v}");
}

#[test]
fn search_limit_caps_the_hits() {
    let dir = tempfile::tempdir().unwrap();
    let (code, all) = cli(dir.path(), None, &["search", "table rows"]);
    assert_eq!(code, 0, "{all}");
    let total = all["hits"].as_array().unwrap().len();
    assert!(total > 2, "{all}");
    let (code, v) = cli(dir.path(), None, &["search", "table rows", "--limit", "2"]);
    assert_eq!(code, 0);
    let hits = v["hits"].as_array().unwrap();
    assert_eq!(hits.len(), 2, "{v}");
    assert_eq!(hits[0], all["hits"][0], "the same ranking, cut");
    assert_eq!(hits[1], all["hits"][1]);
    assert!(v["total"].as_u64().unwrap() >= 2);
    let (code, v) = cli(dir.path(), None, &["search", "table", "--limit", "1"]);
    assert_eq!(code, 0);
    assert_eq!(v["hits"].as_array().unwrap().len(), 1, "{v}");
    assert!(v["hits"][0]["path"]
        .as_str()
        .unwrap()
        .starts_with("tables."));
    let (code, _) = cli(dir.path(), None, &["search", "table", "--limit", "many"]);
    assert_ne!(code, 0, "a bad limit is refused");
}

#[test]
fn configured_limits_reach_the_sandbox() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("limits.toml");
    std::fs::write(
        &cfg,
        "[limits]\nmemory_mb = 8\nmax_tool_calls = 2\ncpu_ms = 300\nwall_clock_ms = 20000\n",
    )
    .unwrap();
    let run = |script: &str| cli_stdin(dir.path(), Some(&cfg), &["run", "-"], script);

    let (code, v) = run("const a = []; while (true) a.push('x'.repeat(1024) + a.length);");
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["error"]["kind"], "memoryLimit", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains(&(8 * 1024 * 1024).to_string()),
        "{v}"
    );

    let (code, v) = run("for (let i = 0; i < 3; i++) await tools.tables.list({}); return 'all'");
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["error"]["kind"], "callLimit", "{v}");
    let (code, v) = run("await tools.tables.list({}); await tools.tables.list({}); return 'two'");
    assert_eq!((code, v["result"].clone()), (0, json!("two")), "{v}");

    let started = std::time::Instant::now();
    let (code, v) = run("while (true) {}");
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["error"]["kind"], "cpuLimit", "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("300 ms"),
        "{v}"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(15),
        "stopped by the CPU budget, not the 20 s wall clock"
    );
}

#[test]
fn without_an_embedding_model_search_says_once_that_it_ranks_lexically() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(BIN)
        .arg("--data-dir")
        .arg(dir.path())
        .args(["--json", "search", "table rows"])
        .env_remove("TOOLSHED_SEARCH__MODEL")
        .env_remove("TOOLSHED_LOG")
        .output()
        .unwrap();
    assert!(out.status.success());
    let log = String::from_utf8_lossy(&out.stderr);
    assert_eq!(log.matches("ranking lexically").count(), 1, "{log}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(!v["hits"].as_array().unwrap().is_empty(), "{v}");
}
