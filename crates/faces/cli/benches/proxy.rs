//! Gateway proxy speed: MCP clients → Toolshed (streamable HTTP, direct mode) → a trivial upstream
//! MCP server over streamable HTTP, each client with its own MCP session.
//!
//! `cargo bench -p toolshed --bench proxy` starts `toolshed-test-upstream --http` (built on
//! demand) and `toolshed serve --http --direct` with the upstream declared as a source, then
//! measures:
//! - direct-mode `tools/call` of `up__echo`: calls/s and p50/p99 with 1 and 8 clients;
//! - Toolshed's own CPU time per call (from /proc, user + system);
//! - code mode: `run_script` calling the upstream tool once, scripts/s with 8 clients.
//!
//! `PROXY_SECONDS` sets the length of each measurement (default 5).

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::ServiceExt;
use serde_json::json;

struct Kill(Child);
impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../..")
}

fn upstream_bin() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"));
    let bin = target.join("release/toolshed-test-upstream");
    let status = Command::new(env!("CARGO"))
        .args([
            "build",
            "--release",
            "-q",
            "-p",
            "toolshed-mcp-source",
            "--bins",
        ])
        .current_dir(workspace_root())
        .status()
        .expect("cargo build of the upstream test server");
    assert!(status.success());
    bin
}

fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit(')').next().unwrap_or_default();
    let f: Vec<&str> = after.split_whitespace().collect();
    // Fields after the command: state is [0]; utime is field 14 overall → [11], stime → [12].
    f.get(11).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
        + f.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
}

fn ticks_per_second() -> f64 {
    let out = Command::new("getconf").arg("CLK_TCK").output().ok();
    out.and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

fn pct(sorted: &[Duration], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p) as usize].as_secs_f64() * 1e6
}

type Client = rmcp::service::RunningService<rmcp::RoleClient, ()>;

async fn connect(url: &str) -> Client {
    ().serve(StreamableHttpClientTransport::from_uri(url.to_string()))
        .await
        .expect("connect")
}

/// Runs `clients` sessions, each calling in a loop for `secs`; returns (calls, latencies, elapsed).
async fn load(
    url: &str,
    clients: usize,
    secs: f64,
    tool: &'static str,
    args: serde_json::Value,
) -> (usize, Vec<Duration>, f64) {
    let mut sessions = Vec::new();
    for _ in 0..clients {
        sessions.push(Arc::new(connect(url).await));
    }
    let params = CallToolRequestParams::new(tool).with_arguments(args.as_object().unwrap().clone());
    // Warm up each session.
    for s in &sessions {
        for _ in 0..20 {
            s.call_tool(params.clone()).await.unwrap();
        }
    }
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for s in &sessions {
        let s = s.clone();
        let params = params.clone();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            while Instant::now() < deadline {
                let t = Instant::now();
                let r = s.call_tool(params.clone()).await.unwrap();
                assert!(!r.is_error.unwrap_or(false), "{r:?}");
                lat.push(t.elapsed());
            }
            lat
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    let elapsed = start.elapsed().as_secs_f64();
    for s in sessions {
        if let Ok(s) = Arc::try_unwrap(s) {
            let _ = s.cancel().await;
        }
    }
    all.sort();
    (all.len(), all, elapsed)
}

fn main() {
    let secs: f64 = std::env::var("PROXY_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5.0);
    let upstream = upstream_bin();
    let mut up = Command::new(&upstream)
        .args(["--http", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start upstream");
    let mut line = String::new();
    BufReader::new(up.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let up_url = line
        .trim()
        .strip_prefix("LISTENING ")
        .expect("upstream address")
        .to_string();
    let up = Kill(up);

    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("toolshed.toml");
    std::fs::write(&cfg, format!("[[sources]]\nkind = \"mcp\"\nname = \"up\"\nurl = \"{up_url}\"\nallow_private = true\n")).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let ts = Command::new(env!("CARGO_BIN_EXE_toolshed"))
        .arg("--config")
        .arg(&cfg)
        .arg("--data-dir")
        .arg(dir.path())
        .args(["serve", "--direct", "--http", &format!("127.0.0.1:{port}")])
        .env("TOOLSHED_LOG", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start toolshed");
    let pid = ts.id();
    let ts = Kill(ts);
    for _ in 0..200 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let url = format!("http://127.0.0.1:{port}/mcp");
    let hz = ticks_per_second();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        // The upstream tool must be listed (direct mode) before measuring.
        let probe = connect(&url).await;
        let names: Vec<String> = probe.list_all_tools().await.unwrap().iter().map(|t| t.name.to_string()).collect();
        assert!(names.contains(&"up__echo".to_string()), "upstream tools not in the catalog: {names:?}");
        let _ = probe.cancel().await;

        for clients in [1usize, 8] {
            let c0 = cpu_ticks(pid);
            let (n, lat, el) = load(&url, clients, secs, "up__echo", json!({"text": "hi"})).await;
            let cpu = (cpu_ticks(pid) - c0) as f64 / hz;
            println!(
                "direct tools/call via toolshed, {clients} client(s): {n} calls in {el:.2}s = {:.0} calls/s, p50 {:.0}µs, p99 {:.0}µs, toolshed CPU {:.3} ms/call",
                n as f64 / el,
                pct(&lat, 0.5),
                pct(&lat, 0.99),
                cpu * 1e3 / n as f64
            );
        }
        let c0 = cpu_ticks(pid);
        let (n, lat, el) = load(&url, 8, secs, "run_script", json!({"script": "return await tools.up.echo({text: 'hi'})"})).await;
        let cpu = (cpu_ticks(pid) - c0) as f64 / hz;
        println!(
            "code mode run_script (one upstream call), 8 clients: {n} scripts in {el:.2}s = {:.0} scripts/s, p50 {:.0}µs, toolshed CPU {:.3} ms/script",
            n as f64 / el,
            pct(&lat, 0.5),
            cpu * 1e3 / n as f64
        );
    });
    drop(ts);
    drop(up);
}
