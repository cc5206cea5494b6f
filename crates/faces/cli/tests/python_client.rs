//! Pauses driven by real Python clients, across a SIGKILL and restart of the server:
//!
//! - the HTTP pause protocol ([`fixtures/pause_client.py`]): `httpx2` (the HTTP client the
//!   Python `mcp` SDK installs) and a Server-Sent Events reader of its own. A script pauses on a
//!   client tool beside a catalog call, the result is posted after the restart, and a follower
//!   of the event stream reconnects with `Last-Event-ID` without gaps;
//! - MCP Tasks with the Python `mcp` SDK ([`fixtures/tasks_client.py`]): `run_script` becomes a
//!   task in `input_required`; after the restart another session reads it with `tasks/get`,
//!   finds it with `tasks/list`, approves with `tasks/update`, waits for the result with
//!   `tasks/result` and reads the completed result.
//!
//! The interpreter comes from `$MCP_TOOLS/venv` (default `/tmp/mcp-tools`), installed by
//! `scripts/peers.sh`; without it the tests print a skip line.

use crate::support::{peers_python, Server, BIN};

#[test]
fn a_python_client_answers_a_client_tool_across_a_restart_and_follows_the_events() {
    let Some(python) = peers_python() else {
        println!(
            "skip: no Python with httpx2 and the mcp SDK under $MCP_TOOLS/venv (run scripts/peers.sh to install the peers)"
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/pause_client.py"
    );
    let out = std::process::Command::new(python)
        .arg(script)
        .arg(BIN)
        .arg(dir.path())
        .output()
        .expect("run the Python client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    assert!(
        out.status.success() && stdout.contains("all checks passed"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs a fixture with the peers' Python; returns its standard output (the test fails on a
/// non-zero exit).
fn python(python: &std::path::Path, fixture: &str, args: &[&str]) -> String {
    let script = format!("{}/tests/fixtures/{fixture}", env!("CARGO_MANIFEST_DIR"));
    let out = std::process::Command::new(python)
        .arg(script)
        .args(args)
        .output()
        .expect("run Python");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{fixture} {args:?}: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn the_python_mcp_sdk_answers_a_task_after_the_server_restarted() {
    let Some(py) = peers_python() else {
        println!(
            "skip: no Python with the mcp SDK under $MCP_TOOLS/venv (run scripts/peers.sh to install the peers)"
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), None, &[]);
    let url = server.url("/mcp");
    let started = python(&py, "tasks_client.py", &["start", &url]);
    assert!(started.contains("PROTOCOL 2026-07-28"), "{started}");
    let task = started
        .lines()
        .find_map(|l| l.strip_prefix("TASK "))
        .unwrap_or_else(|| panic!("{started}"));
    let (id, status) = task.split_once(' ').unwrap();
    assert_eq!(status, "input_required", "{started}");
    server.kill(); // SIGKILL
    let server = Server::start(dir.path(), None, &[]);
    let finished = python(&py, "tasks_client.py", &["finish", &server.url("/mcp"), id]);
    println!("{finished}");
    assert!(finished.contains("STATUS input_required"), "{finished}");
    assert!(
        finished.contains("INPUT_REQUESTS ['approval_0']"),
        "{finished}"
    );
    assert!(
        finished.contains("ASKS elicitation/create form"),
        "{finished}"
    );
    assert!(
        finished.contains("LISTED input_required ttl=True"),
        "{finished}"
    );
    assert!(
        finished.contains(r#"TASK_RESULT True {"status":"completed""#),
        "{finished}"
    );
    assert!(finished.contains("STATUS completed"), "{finished}");
    assert!(
        finished.contains(r#"RESULT {"status":"completed""#)
            && finished.contains(r#""result":["pets"]"#),
        "{finished}"
    );
}
