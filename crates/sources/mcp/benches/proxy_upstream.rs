//! Upstream client leg benchmark: calls the `echo` tool of the bundled test upstream through an
//! [`Upstream`] tool handler, over streamable HTTP on 127.0.0.1 (and over stdio for
//! comparison). Prints calls/s with 1 and 8 concurrent callers and the p50/p99 latency, and how
//! many calls took the fast path of streamable HTTP (the caller's task posting the call).
//!
//! `cargo bench -p toolshed-mcp-source --bench proxy_upstream` (set `BENCH_CALLS` to change the
//! number of calls per scenario, default 4000).

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::AsyncBufReadExt;
use toolshed_core::{Tool, ToolContext};
use toolshed_mcp_source::{Upstream, UpstreamConfig};

const TEST_UPSTREAM: &str = env!("CARGO_BIN_EXE_toolshed-test-upstream");

async fn start_http_server() -> (tokio::process::Child, String) {
    let mut child = tokio::process::Command::new(TEST_UPSTREAM)
        .args(["--http", "127.0.0.1:0"])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn the test upstream");
    let stdout = child.stdout.take().expect("stdout");
    let line = tokio::io::BufReader::new(stdout)
        .lines()
        .next_line()
        .await
        .expect("read stdout")
        .expect("the test upstream exited");
    let url = line
        .strip_prefix("LISTENING ")
        .expect("LISTENING line")
        .to_string();
    (child, url)
}

async fn one_call(tool: &Tool, i: usize) -> Duration {
    let ctx = ToolContext::new(Arc::from("bench"), tool.def.path.clone());
    let started = Instant::now();
    let out = tool
        .handler
        .call(ctx, json!({"text": format!("ping {i}")}))
        .await
        .expect("echo call");
    let took = started.elapsed();
    assert!(out.as_str().is_some_and(|s| s.starts_with("ping")));
    took
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx]
}

async fn scenario(label: &str, tool: &Tool, callers: usize, total: usize) {
    let per = total / callers;
    let started = Instant::now();
    let tasks: Vec<_> = (0..callers)
        .map(|c| {
            let tool = tool.clone();
            tokio::spawn(async move {
                let mut lat = Vec::with_capacity(per);
                for i in 0..per {
                    lat.push(one_call(&tool, c * per + i).await);
                }
                lat
            })
        })
        .collect();
    let mut lat = Vec::with_capacity(total);
    for t in tasks {
        lat.extend(t.await.expect("caller task"));
    }
    let elapsed = started.elapsed();
    lat.sort();
    let rate = lat.len() as f64 / elapsed.as_secs_f64();
    println!(
        "{label:<6} callers={callers:<2} calls={:<6} {rate:>9.0} calls/s  p50={:>8.1?}  p99={:>8.1?}",
        lat.len(),
        percentile(&lat, 0.50),
        percentile(&lat, 0.99),
    );
}

async fn run(label: &str, up: &Upstream, total: usize) {
    let tools = up.tools().await.expect("list tools");
    let echo = tools
        .into_iter()
        .find(|t| t.def.path.as_str().ends_with(".echo"))
        .expect("echo tool");
    // Warm up the session and the connection pool.
    for i in 0..200 {
        one_call(&echo, i).await;
    }
    scenario(label, &echo, 1, total).await;
    scenario(label, &echo, 8, total).await;
    // Over HTTP, plain calls are posted by the caller's task (`src/direct.rs`).
    println!(
        "{label:<6} calls through the direct path: {}",
        up.direct_calls()
    );
}

fn main() {
    let total: usize = std::env::var("BENCH_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let (_server, url) = start_http_server().await;
        let http = Upstream::connect(UpstreamConfig::http("bench", url).with_allow_private(true))
            .await
            .expect("connect over HTTP");
        run("http", &http, total).await;
        http.shutdown().await;

        let stdio = Upstream::connect(UpstreamConfig::stdio(
            "bench",
            TEST_UPSTREAM,
            Vec::<String>::new(),
        ))
        .await
        .expect("connect over stdio");
        run("stdio", &stdio, total).await;
        stdio.shutdown().await;
    });
}
