//! `toolshed audit` shows what the engine recorded for calls from any face, and a server stopped
//! with SIGTERM writes every queued entry before it exits.

use crate::support;

use support::*;

#[test]
fn audit_lists_calls_with_outcomes() {
    let dir = tempfile::tempdir().unwrap();
    let (code, _) = cli(dir.path(), None, &["call", "tables.list", "{}"]);
    assert_eq!(code, 0);
    let (code, _) = cli(dir.path(), None, &["call", "tables.nope", "{}"]);
    assert_eq!(code, 1);
    let (code, v) = cli(dir.path(), None, &["audit", "--limit", "10"]);
    assert_eq!(code, 0, "{v}");
    let entries = v["entries"].as_array().unwrap();
    assert!(
        entries
            .iter()
            .any(|e| e["path"] == "tables.list" && e["outcome"] == "ok" && e["face"] == "cli"),
        "{v}"
    );
    assert!(
        entries
            .iter()
            .any(|e| e["path"] == "tables.nope" && e["outcome"] == "not_found"),
        "{v}"
    );
    assert!(entries.iter().all(|e| e["principal"] == "local"), "{v}");
}

#[tokio::test]
async fn sigterm_flushes_queued_audit_entries() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path(), None, &[]);
    let http = reqwest::Client::new();
    let n = 40;
    for i in 0..n {
        let r = http
            .post(server.url("/v1/tools/tables.list/call"))
            .header("x-request", i.to_string())
            .json(&serde_json::json!({}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    drop(http);
    let pid = server.child.id().to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = server.child.wait().unwrap();
    assert!(status.success(), "graceful exit on SIGTERM: {status:?}");
    let (code, v) = cli(dir.path(), None, &["audit", "--limit", "1000"]);
    assert_eq!(code, 0, "{v}");
    let http_calls = v["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["face"] == "http" && e["path"] == "tables.list")
        .count();
    assert_eq!(http_calls, n, "{v}");
}
