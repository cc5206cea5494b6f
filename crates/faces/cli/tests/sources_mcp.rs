//! An upstream MCP server declared in the config file (the test upstream of
//! `toolshed-mcp-source`): its tools appear under the namespace and are called through the
//! engine; `sources add mcp --dry-run` lists them without storing anything.

use crate::support;

use std::path::PathBuf;

use serde_json::Value;
use support::{cli, test_upstream};

fn config(dir: &std::path::Path) -> PathBuf {
    let f = dir.join("toolshed.toml");
    std::fs::write(
        &f,
        format!(
            r#"
[[sources]]
kind = "mcp"
name = "up"
command = "{}"

[[sources.overrides]]
pattern = "up.sleep"
hidden = true
"#,
            test_upstream().display()
        ),
    )
    .unwrap();
    f
}

#[test]
fn config_declared_upstream_tools_are_called_through_the_engine() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());

    let (code, v) = cli(
        dir.path(),
        Some(&cfg),
        &["call", "up.echo", r#"{"text": "hello upstream"}"#],
    );
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["status"], "completed", "{v}");
    assert!(v["result"].to_string().contains("hello upstream"), "{v}");

    let (_, v) = cli(
        dir.path(),
        Some(&cfg),
        &["call", "up.delete_everything", "{}"],
    );
    assert_eq!(
        v["status"], "paused",
        "upstream destructive hints reach the approval gate: {v}"
    );

    let (code, v) = cli(dir.path(), Some(&cfg), &["describe", "up.sleep"]);
    assert_eq!(code, 1, "hidden by the override: {v}");

    let (_, v) = cli(dir.path(), Some(&cfg), &["sources", "list"]);
    assert_eq!(v["sources"][0]["name"], "up", "{v}");
    assert_eq!(v["sources"][0]["origin"], "config");

    let (code, v) = cli(dir.path(), Some(&cfg), &["sources", "refresh"]);
    assert_eq!(code, 0, "{v}");
    assert!(v["sources"][0]["tools"].as_u64().unwrap() >= 5, "{v}");

    // The config's name cannot be taken by a stored source.
    let bin = test_upstream();
    let (code, v) = cli(
        dir.path(),
        Some(&cfg),
        &[
            "sources",
            "add",
            "mcp",
            "up",
            "--command",
            bin.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 1);
    let msg = v["error"].as_str().unwrap();
    assert!(
        msg.contains("config file") && msg.contains("store"),
        "{msg}"
    );
}

#[test]
fn mcp_dry_run_lists_the_tools_and_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let bin = test_upstream();
    let (code, v) = cli(
        dir.path(),
        None,
        &[
            "sources",
            "add",
            "mcp",
            "m2",
            "--command",
            bin.to_str().unwrap(),
            "--dry-run",
        ],
    );
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["stored"], false);
    let tools = v["tools"].as_array().unwrap();
    let find = |p: &str| {
        tools
            .iter()
            .find(|t| t["path"] == p)
            .cloned()
            .unwrap_or(Value::Null)
    };
    assert_eq!(find("m2.echo")["read_only"], true, "{v}");
    assert_eq!(find("m2.delete_everything")["destructive"], true, "{v}");
    let (_, v) = cli(dir.path(), None, &["sources", "list"]);
    assert_eq!(v["sources"].as_array().unwrap().len(), 0, "{v}");
}

/// Live (non-zombie) processes whose parent is `parent` and whose command line names the test
/// upstream.
fn upstream_children(parent: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // "pid (comm) state ppid ...": the fields after the command name.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.split_whitespace().collect())
            .unwrap_or_default();
        let (Some(state), Some(ppid)) = (fields.first(), fields.get(1)) else {
            continue;
        };
        if *state == "Z" || *state == "X" || ppid.parse::<u32>().ok() != Some(parent) {
            continue;
        }
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains("toolshed-test-upstream") {
            out.push(pid);
        }
    }
    out
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            let state = s.rsplit(')').next().unwrap_or("").trim_start();
            !state.starts_with('Z') && !state.starts_with('X')
        })
        .unwrap_or(false)
}

/// Polls `f` every 50 ms for up to `secs` seconds until it returns `Some`.
fn wait_for<T>(secs: u64, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if std::time::Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Waits for the single upstream child of `parent` and returns its pid.
fn one_child(parent: u32, secs: u64) -> u32 {
    let kids = wait_for(secs, || {
        let k = upstream_children(parent);
        (!k.is_empty()).then_some(k)
    })
    .unwrap_or_else(|| panic!("no upstream child of {parent} appeared"));
    assert_eq!(kids.len(), 1, "{kids:?}");
    kids[0]
}

fn sigterm(pid: u32) {
    let ok = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -TERM {pid}");
}

/// Waits for the process to exit and returns its status.
fn wait_exit(child: &mut std::process::Child, secs: u64, mode: &str) -> std::process::ExitStatus {
    wait_for(secs, || child.try_wait().unwrap()).unwrap_or_else(|| {
        let _ = child.kill();
        panic!("{mode}: toolshed did not exit within {secs} s of SIGTERM")
    })
}

/// `serve` (HTTP and stdio) ends on SIGTERM like on Ctrl-C: the shutdown runs and the stdio
/// upstream's child process is stopped, not orphaned.
#[test]
fn sigterm_stops_serve_and_kills_its_stdio_upstream() {
    for mode in ["http", "stdio"] {
        let dir = tempfile::tempdir().unwrap();
        let cfg = config(dir.path());
        let mut cmd = std::process::Command::new(support::BIN);
        cmd.arg("--data-dir")
            .arg(dir.path())
            .arg("--config")
            .arg(&cfg)
            .arg("serve");
        if mode == "http" {
            cmd.args(["--http", &format!("127.0.0.1:{}", support::free_port())]);
        } else {
            cmd.arg("--stdio");
        }
        // stdin stays open (and silent) for the stdio session.
        cmd.stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        let mut serve = cmd.spawn().expect("spawn toolshed serve");
        let child = one_child(serve.id(), 30);
        assert!(alive(child));
        sigterm(serve.id());
        let status = wait_exit(&mut serve, 20, mode);
        assert!(status.success(), "{mode}: {status:?}");
        assert!(
            wait_for(5, || (!alive(child)).then_some(())).is_some(),
            "{mode}: the upstream child {child} outlived serve"
        );
    }
}

/// A serving process re-imports a stored upstream that was replaced or refreshed (its old child
/// is stopped, a new one started) and drops a removed one (its child is stopped).
#[test]
fn reloading_or_removing_a_stored_upstream_stops_its_child() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let bin = test_upstream();
    let (code, v) = cli(
        d,
        None,
        &[
            "sources",
            "add",
            "mcp",
            "up",
            "--command",
            bin.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{v}");
    let server = support::Server::start(d, None, &[]);
    let first = one_child(server.child.id(), 30);

    // Replacing the stored source with new settings: the server re-imports it.
    let (code, v) = cli(
        d,
        None,
        &[
            "sources",
            "add",
            "mcp",
            "up",
            "--command",
            bin.to_str().unwrap(),
            "--call-timeout-ms",
            "20000",
            "--replace",
        ],
    );
    assert_eq!(code, 0, "{v}");
    let second = wait_for(30, || {
        let kids = upstream_children(server.child.id());
        (kids.len() == 1 && kids[0] != first).then(|| kids[0])
    })
    .unwrap_or_else(|| {
        panic!(
            "no new child after the reload: {:?}",
            upstream_children(server.child.id())
        )
    });
    assert!(
        wait_for(10, || (!alive(first)).then_some(())).is_some(),
        "the replaced child {first} survived the reload"
    );
    assert!(alive(second));

    // `sources refresh` re-writes the record unchanged: the server re-imports it all the same.
    let (code, v) = cli(d, None, &["sources", "refresh", "up"]);
    assert_eq!(code, 0, "{v}");
    let third = wait_for(30, || {
        let kids = upstream_children(server.child.id());
        (kids.len() == 1 && kids[0] != second).then(|| kids[0])
    })
    .unwrap_or_else(|| {
        panic!(
            "no new child after the refresh: {:?}",
            upstream_children(server.child.id())
        )
    });
    assert!(
        wait_for(10, || (!alive(second)).then_some(())).is_some(),
        "the refreshed source's old child {second} survived"
    );

    let (code, v) = cli(d, None, &["sources", "remove", "up"]);
    assert_eq!(code, 0, "{v}");
    assert!(
        wait_for(30, || (!alive(third)).then_some(())).is_some(),
        "the child {third} of the removed source survived"
    );
    assert!(upstream_children(server.child.id()).is_empty());
}

/// An upstream MCP server's secrets (a child's credential environment variable) never reach
/// script output or the audit log, even when the upstream echoes them.
#[test]
fn upstream_secrets_stay_out_of_script_output_and_audit() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let secret = "mcp-env-secret-9931";
    let cfg = d.join("toolshed.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"
[[sources]]
kind = "mcp"
name = "up"
command = "{}"
env = {{ UP_API_TOKEN = "{secret}", UP_REGION = "eu-west-3" }}
"#,
            test_upstream().display()
        ),
    )
    .unwrap();
    let script = d.join("s.js");
    std::fs::write(
        &script,
        r#"
        const token = await tools.up.getenv({name: "UP_API_TOKEN"});
        const region = await tools.up.getenv({name: "UP_REGION"});
        console.log("token: " + JSON.stringify(token));
        return {token, region};
    "#,
    )
    .unwrap();
    let (code, out) = cli(d, Some(&cfg), &["run", script.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(out["status"], "completed", "{out}");
    // The child had the value (it echoed something in its place), and ordinary values pass.
    assert_eq!(out["result"]["token"]["value"], "[REDACTED]", "{out}");
    assert_eq!(out["result"]["region"]["value"], "eu-west-3", "{out}");
    let text = out.to_string();
    assert!(
        !text.contains(secret),
        "script output leaks the secret: {text}"
    );
    let (_, audit) = cli(d, Some(&cfg), &["audit"]);
    assert!(audit.to_string().contains("up.getenv"), "{audit}");
    assert!(!audit.to_string().contains(secret), "{audit}");
    let mut stored = Vec::new();
    for f in ["toolshed.db", "toolshed.db-wal"] {
        if let Ok(b) = std::fs::read(d.join(f)) {
            stored.extend(b);
        }
    }
    assert!(!stored.is_empty());
    assert!(
        !stored.windows(secret.len()).any(|w| w == secret.as_bytes()),
        "the database holds the secret in clear"
    );
    let (_, list) = cli(d, Some(&cfg), &["sources", "list"]);
    assert!(!list.to_string().contains(secret), "{list}");
}
