//! The binary's listener under hostile conditions: exposed addresses without keys, the guard in
//! front of `/v1` and `/mcp`, MCP sessions only for authenticated callers, a private data
//! directory, and a reader that closes the output pipe early.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{write_policy_config, Server, BIN};

/// `serve --http ADDR`; returns the child and its stderr lines as they come.
fn spawn_serve(
    data: &Path,
    config: Option<&Path>,
    addr: &str,
    env: &[(&str, &str)],
) -> (Child, mpsc::Receiver<String>) {
    let mut cmd = Command::new(BIN);
    cmd.arg("--data-dir").arg(data);
    if let Some(c) = config {
        cmd.arg("--config").arg(c);
    }
    cmd.args(["serve", "--http", addr])
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn toolshed serve");
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (child, rx)
}

/// The port of `toolshed listening on http://HOST:PORT`, or every stderr line when it ended
/// without listening.
fn listening_port(rx: &mpsc::Receiver<String>) -> Result<u16, String> {
    let mut seen = Vec::new();
    while let Ok(line) = rx.recv_timeout(Duration::from_secs(60)) {
        if let Some(rest) = line.split("listening on http://").nth(1) {
            let port = rest
                .split_whitespace()
                .next()
                .unwrap()
                .rsplit(':')
                .next()
                .unwrap();
            return Ok(port.parse().unwrap());
        }
        seen.push(line);
    }
    Err(seen.join("\n"))
}

fn stop(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

#[tokio::test]
async fn an_exposed_address_needs_keys_or_the_explicit_setting() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, rx) = spawn_serve(dir.path(), None, "0.0.0.0:0", &[]);
    let err = listening_port(&rx).expect_err("must not listen");
    let status = child.wait().unwrap();
    assert!(!status.success(), "{status}");
    assert!(
        err.contains("0.0.0.0:0") && err.contains("[http] insecure_listen = true"),
        "{err}"
    );

    let env = [("TOOLSHED_HTTP__INSECURE_LISTEN", "true")];
    let (child, rx) = spawn_serve(dir.path(), None, "0.0.0.0:0", &env);
    let port = listening_port(&rx).expect("insecure_listen starts");
    let r = reqwest::get(format!("http://127.0.0.1:{port}/healthz"))
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    stop(child);

    let keyed = tempfile::tempdir().unwrap();
    let config = write_policy_config(keyed.path(), "admin");
    let (child, rx) = spawn_serve(keyed.path(), Some(&config), "0.0.0.0:0", &[]);
    let port = listening_port(&rx).expect("with keys it starts");
    let r = reqwest::get(format!("http://127.0.0.1:{port}/v1/tools"))
        .await
        .unwrap();
    assert_eq!(r.status(), 401, "keys are required");
    stop(child);
}

/// The guard sits in front of `/v1`, `/mcp` and `/healthz` of the serving binary.
#[tokio::test]
async fn every_route_of_the_binary_is_guarded() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), None, &[]);
    let http = reqwest::Client::new();
    let script = json!({"script": "return await tools.tables.create({name: 'pwned', columns: [{name: 'a', type: 'string'}]})"});
    let r = http
        .post(server.url("/v1/scripts"))
        .header("content-type", "text/plain")
        .body(script.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 415);
    for path in ["/v1/tools", "/mcp", "/healthz"] {
        let r = http
            .get(server.url(path))
            .header("host", "rebound.evil.example")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 403, "{path}");
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["error"]["code"], "forbidden_host", "{path}: {v}");
        let r = http
            .get(server.url(path))
            .header("origin", "https://evil.example")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 403, "{path}");
    }
    let r = http
        .post(server.url("/v1/tools/tables.list/call"))
        .header("content-type", "application/json")
        .header("origin", server.url(""))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "same origin");
    let v: Value = r.json().await.unwrap();
    assert!(
        !v.to_string().contains("pwned"),
        "the refused script did not run: {v}"
    );
}

/// The serving binary answers its API's OpenAPI document to key holders only.
#[tokio::test]
async fn the_openapi_document_needs_a_key() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_policy_config(dir.path(), "admin");
    let server = Server::start(dir.path(), Some(&config), &[]);
    let http = reqwest::Client::new();
    let r = http
        .get(server.url("/v1/openapi.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = http
        .get(server.url("/v1/openapi.json"))
        .bearer_auth("k-admin")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let doc: Value = r.json().await.unwrap();
    assert_eq!(doc["openapi"], "3.1.0");
    assert!(doc["paths"]["/v1/scripts"]["post"].is_object(), "{doc}");
}

#[tokio::test]
async fn mcp_initialize_without_a_key_gets_401() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_policy_config(dir.path(), "admin");
    let server = Server::start(dir.path(), Some(&config), &[]);
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}});
    let send = |key: Option<&'static str>| {
        let mut req = reqwest::Client::new()
            .post(server.url("/mcp"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(init.to_string());
        if let Some(k) = key {
            req = req.bearer_auth(k);
        }
        req.send()
    };
    for key in [None, Some("nope")] {
        let r = send(key).await.unwrap();
        assert_eq!(r.status(), 401, "{key:?}");
        assert!(r.headers().get("mcp-session-id").is_none());
        let v: Value = r.json().await.unwrap();
        assert!(
            v["error"]["message"].as_str().unwrap().contains("API key"),
            "{v}"
        );
    }
    let r = send(Some("k-admin")).await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers().get("mcp-session-id").is_some());
}

#[cfg(unix)]
fn mode(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

/// An install whose files are readable by everyone is made private when `serve` starts, and
/// the files SQLite creates while serving (`-wal`, `-shm`) are private too.
#[cfg(unix)]
#[tokio::test]
async fn the_data_directory_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let root = tempfile::tempdir().unwrap();
    let data = root.path().join("data");
    let (code, _) = crate::support::cli(&data, None, &["search", "rows"]);
    assert_eq!(code, 0);
    assert_eq!(mode(&data), 0o700, "a new data directory");
    // As older versions left it.
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();
    for entry in std::fs::read_dir(&data).unwrap() {
        let p = entry.unwrap().path();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let server = Server::start(&data, None, &[]);
    let r = reqwest::Client::new()
        .post(server.url("/v1/tools/tables.create/call"))
        .header("content-type", "application/json")
        .body(r#"{"name": "t1", "columns": [{"name": "a", "type": "string"}]}"#)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    assert_eq!(mode(&data), 0o700);
    let mut names = Vec::new();
    for entry in std::fs::read_dir(&data).unwrap() {
        let p = entry.unwrap().path();
        assert_eq!(mode(&p), 0o600, "{}", p.display());
        names.push(p.file_name().unwrap().to_string_lossy().to_string());
    }
    for f in ["toolshed.db", "secret.key"] {
        assert!(names.contains(&f.to_string()), "{names:?}");
    }
}

/// `toolshed search rows | head -1` style: the reader is gone before the first line.
#[tokio::test]
async fn a_closed_output_pipe_is_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    for args in [&["search", "rows"][..], &["--json", "search", "rows"][..]] {
        let mut child = Command::new(BIN)
            .arg("--data-dir")
            .arg(dir.path())
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
    }
}
