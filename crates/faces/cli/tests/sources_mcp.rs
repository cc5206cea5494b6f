//! An upstream MCP server declared in the config file (the test upstream of
//! `toolshed-mcp-source`): its tools appear under the namespace and are called through the
//! engine; `sources add mcp --dry-run` lists them without storing anything.

use crate::support;

use std::path::PathBuf;

use serde_json::Value;
use support::cli;

/// `target/<profile>/toolshed-test-upstream`, built on demand when a narrower `cargo test`
/// did not build it.
fn test_upstream() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .unwrap()
        .to_path_buf();
    let bin = profile_dir.join("toolshed-test-upstream");
    if !bin.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = std::process::Command::new(cargo)
            .args(["build", "-p", "toolshed-mcp-source", "--bins"])
            .status()
            .expect("run cargo build for the test upstream");
        assert!(status.success(), "building toolshed-test-upstream failed");
    }
    assert!(bin.exists(), "{} is missing", bin.display());
    bin
}

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
