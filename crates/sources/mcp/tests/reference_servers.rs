//! The npm reference servers (`@modelcontextprotocol/server-memory`, `server-everything`), when
//! installed under `$MCP_TOOLS` (default `/tmp/mcp-tools`) by `scripts/peers.sh`, which
//! `scripts/test.sh` runs before `cargo test`. Without them (npm unreachable) each test prints a
//! `note: ... skipping` line and returns.

use crate::common;

use std::path::PathBuf;
use std::time::Duration;

use common::*;
use serde_json::json;
use toolshed_mcp_source::{Transport, Upstream, UpstreamConfig};

/// `$MCP_TOOLS/node_modules/.bin`, `$MCP_TOOLS` defaulting to `/tmp/mcp-tools`.
fn bin_dir() -> PathBuf {
    let root = std::env::var_os("MCP_TOOLS")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp/mcp-tools"));
    root.join("node_modules").join(".bin")
}

fn installed(name: &str) -> Option<String> {
    let path = bin_dir().join(name);
    if path.exists() {
        Some(path.display().to_string())
    } else {
        eprintln!(
            "note: {} is not installed (bash scripts/peers.sh); skipping this reference-server test",
            path.display()
        );
        None
    }
}

fn cfg(name: &str, command: String, args: &[&str], env: Vec<(String, String)>) -> UpstreamConfig {
    UpstreamConfig::new(
        name,
        Transport::Stdio {
            command,
            args: args.iter().map(|a| a.to_string()).collect(),
            env,
            cwd: None,
        },
    )
    .with_connect_timeout(Duration::from_secs(30))
    .with_call_timeout(Duration::from_secs(30))
}

#[tokio::test]
async fn server_memory_create_then_read() {
    let Some(bin) = installed("mcp-server-memory") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("memory.jsonl");
    let env = vec![(
        "MEMORY_FILE_PATH".to_string(),
        file.to_string_lossy().into_owned(),
    )];
    let up = Upstream::connect(cfg("memory", bin, &[], env))
        .await
        .unwrap();
    let version = up.protocol_version().unwrap();
    eprintln!("server-memory negotiated MCP {version}");
    assert!(
        toolshed_mcp_source::upstream::protocol_supported(&version),
        "{version}"
    );
    let tools = up.tools().await.unwrap();
    let create = tool(&tools, "memory.create_entities");
    assert!(create.def.annotations.destructive || !create.def.annotations.read_only);
    let read = tool(&tools, "memory.read_graph");

    let out = call(
        create,
        json!({"entities": [{"name": "Toolshed", "entityType": "project", "observations": ["written in Rust"]}]}),
    )
    .await
    .unwrap();
    assert!(out.to_string().contains("Toolshed"), "{out}");

    let graph = call(read, json!({})).await.unwrap();
    let entities = graph["entities"].as_array().expect("entities array");
    assert!(
        entities
            .iter()
            .any(|e| e["name"] == "Toolshed" && e["observations"][0] == "written in Rust"),
        "{graph}"
    );
    let pid = up.pid().unwrap();
    up.shutdown().await;
    assert!(wait_gone(pid, Duration::from_secs(8)).await);
}

#[tokio::test]
async fn server_everything_lists_despite_early_notifications_and_echoes() {
    let Some(bin) = installed("mcp-server-everything") else {
        return;
    };
    let up = Upstream::connect(cfg("everything", bin, &["stdio"], Vec::new()))
        .await
        .unwrap();
    eprintln!(
        "server-everything negotiated MCP {:?}",
        up.protocol_version()
    );
    let tools = up.tools().await.unwrap();
    assert!(tools.len() > 3, "only {} tools", tools.len());
    let echo = tool(&tools, "everything.echo");
    let out = call(echo, json!({"message": "hello from toolshed"}))
        .await
        .unwrap();
    assert!(out.to_string().contains("hello from toolshed"), "{out}");
    let pid = up.pid().unwrap();
    up.shutdown().await;
    assert!(wait_gone(pid, Duration::from_secs(8)).await);
}
