//! Helpers shared by the integration tests: the bundled test upstream, process checks and
//! call contexts.

#![allow(dead_code)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::AsyncBufReadExt;
use toolshed_core::{Tool, ToolContext, ToolError};
use toolshed_mcp_source::UpstreamConfig;

/// The `toolshed-test-upstream` binary built with this crate.
pub const TEST_UPSTREAM: &str = env!("CARGO_BIN_EXE_toolshed-test-upstream");

/// A stdio config for the test upstream with extra arguments.
pub fn stdio(name: &str, args: &[&str]) -> UpstreamConfig {
    UpstreamConfig::stdio(name, TEST_UPSTREAM, args.iter().copied())
        .with_connect_timeout(Duration::from_secs(10))
        .with_call_timeout(Duration::from_secs(10))
}

/// Whether `pid` is a live (non-zombie) process.
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            // The state follows the parenthesised command name.
            let state = stat.rsplit(')').next().unwrap_or("").trim_start();
            !state.starts_with('Z') && !state.starts_with('X')
        }
        Err(_) => false,
    }
}

/// Waits up to `limit` for `pid` to be gone.
pub async fn wait_gone(pid: u32, limit: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if !alive(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    !alive(pid)
}

/// Sends SIGKILL to `pid`.
pub fn kill9(pid: u32) {
    let status = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -9 {pid} failed");
}

/// Finds a tool by path.
pub fn tool<'a>(tools: &'a [Tool], path: &str) -> &'a Tool {
    tools
        .iter()
        .find(|t| t.def.path.as_str() == path)
        .unwrap_or_else(|| {
            let paths: Vec<&str> = tools.iter().map(|t| t.def.path.as_str()).collect();
            panic!("no tool {path}; have {paths:?}")
        })
}

/// Calls a tool the way the engine would (a context for its path).
pub async fn call(t: &Tool, args: Value) -> Result<Value, ToolError> {
    call_with_timeout(t, args, Duration::from_secs(30)).await
}

pub async fn call_with_timeout(
    t: &Tool,
    args: Value,
    timeout: Duration,
) -> Result<Value, ToolError> {
    let ctx = ToolContext::new(Arc::from("tester"), t.def.path.clone()).with_timeout(timeout);
    t.handler.call(ctx, args).await
}

/// A test upstream serving streamable HTTP on 127.0.0.1; killed on drop.
pub struct HttpServer {
    pub url: String,
    child: tokio::process::Child,
}

impl HttpServer {
    pub async fn start(extra: &[&str]) -> Self {
        Self::start_at("127.0.0.1:0", extra).await
    }

    /// Serves at `addr` (e.g. the port of a server that was stopped, to restart it).
    pub async fn start_at(addr: &str, extra: &[&str]) -> Self {
        let mut child = tokio::process::Command::new(TEST_UPSTREAM)
            .args(["--http", addr])
            .args(extra)
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn the HTTP test upstream");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .expect("the HTTP test upstream did not start in time")
            .expect("read stdout")
            .expect("the HTTP test upstream exited");
        let url = line
            .strip_prefix("LISTENING ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_string();
        Self { url, child }
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Kills the server and waits until it is gone.
    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

/// Waits for the change counter to move past `seen`.
pub async fn next_change(rx: &mut tokio::sync::watch::Receiver<u64>, seen: u64) -> u64 {
    tokio::time::timeout(Duration::from_secs(10), rx.wait_for(|v| *v > seen))
        .await
        .expect("no tools/list_changed refresh within 10 s")
        .map(|v| *v)
        .expect("change channel closed")
}
