//! Gateway proxy speed: MCP clients → Toolshed (streamable HTTP, direct mode) → a trivial upstream
//! MCP server over streamable HTTP, each client with its own MCP session.
//!
//! `cargo bench -p toolshed --bench proxy` starts `toolshed-test-upstream --http` (built on
//! demand) and `toolshed serve --http --direct` with the upstream declared as a source, then
//! measures:
//! - the upstream alone (the same load generator straight to `toolshed-test-upstream`), as the
//!   baseline the gateway's cost is read against;
//! - direct-mode `tools/call` of `up__echo`: calls/s and p50/p99 with 1 and 8 clients;
//! - the same through the virtual server `/mcp/servers/up` (`names = "original"`, `echo`);
//! - Toolshed's own CPU time per call (from /proc, user + system);
//! - code mode: `run_script` calling the upstream tool once, scripts/s with 8 clients.
//!
//! The load generator ([`load::Client`]) is a minimal MCP client (HTTP/1.1 keep-alive, protocol
//! 2025-11-25 with a session per client) so that the clients' own CPU cost stays small: the
//! clients, the gateway and the upstream share the machine's cores.
//!
//! `PROXY_SECONDS` sets the length of each measurement (default 5). `PROXY_UPSTREAM` chooses the
//! upstream: `canned` (the default; a minimal streamable-HTTP MCP server in this bench's own
//! binary, [`canned`], that answers every call with the same JSON at once, so that the
//! upstream's own cost stays small beside the gateway's) or `rmcp` (`toolshed-test-upstream
//! --http`, a server built on the official Rust SDK). `PROXY_TOOLSHED=path` measures another
//! build of the `toolshed` binary, to compare two builds on one machine.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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
            "--features",
            "test-upstream",
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

/// Runs `clients` sessions, each calling in a loop for `secs`; returns (calls, latencies,
/// elapsed seconds, Toolshed's CPU seconds over the measured window).
async fn run_load(
    pid: u32,
    hz: f64,
    url: &str,
    clients: usize,
    secs: f64,
    params: String,
) -> (usize, Vec<Duration>, f64, f64) {
    let mut sessions = Vec::new();
    for _ in 0..clients {
        sessions.push(load::Client::connect(url).await);
    }
    // Warm up each session.
    for s in &mut sessions {
        for _ in 0..20 {
            s.call_tool(&params).await;
        }
    }
    let c0 = cpu_ticks(pid);
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for mut s in sessions {
        let params = params.clone();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            while Instant::now() < deadline {
                let t = Instant::now();
                s.call_tool(&params).await;
                lat.push(t.elapsed());
            }
            (lat, s)
        }));
    }
    let mut all = Vec::new();
    let mut done = Vec::new();
    for t in tasks {
        let (lat, s) = t.await.unwrap();
        all.extend(lat);
        done.push(s);
    }
    let elapsed = start.elapsed().as_secs_f64();
    let cpu = (cpu_ticks(pid) - c0) as f64 / hz;
    for s in done {
        s.close().await;
    }
    all.sort();
    (all.len(), all, elapsed, cpu)
}

fn main() {
    let secs: f64 = std::env::var("PROXY_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5.0);
    if std::env::var_os(canned::ENV).is_some() {
        canned::serve();
        return;
    }
    let kind = std::env::var("PROXY_UPSTREAM").unwrap_or_else(|_| "canned".into());
    let mut up = match kind.as_str() {
        "rmcp" => Command::new(upstream_bin())
            .args(["--http", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start upstream"),
        "canned" => Command::new(std::env::current_exe().expect("this bench's binary"))
            .env(canned::ENV, "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the canned upstream"),
        other => panic!("PROXY_UPSTREAM must be canned or rmcp, not {other}"),
    };
    println!("upstream: {kind}");
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
    std::fs::write(
        &cfg,
        format!(
            "[[sources]]\nkind = \"mcp\"\nname = \"up\"\nurl = \"{up_url}\"\nallow_private = true\n\n\
             [[servers]]\nname = \"up\"\ntools = [\"up.**\"]\nnames = \"original\"\n"
        ),
    )
    .unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // Another build of the binary (`PROXY_TOOLSHED=path`), to compare two builds on one machine.
    let bin = std::env::var_os("PROXY_TOOLSHED")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_toolshed")));
    let ts = Command::new(bin)
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
        let mut probe = load::Client::connect(&url).await;
        let list = probe.request("tools/list", "{}").await;
        let list = String::from_utf8_lossy(&list);
        assert!(list.contains("\"up__echo\""), "upstream tools not in the catalog: {list}");
        probe.close().await;

        let plain = r#"{"name":"echo","arguments":{"text":"hi"}}"#.to_string();
        let up_pid = up.0.id();
        for clients in [1usize, 8] {
            let (n, lat, el, _) = run_load(up_pid, hz, &up_url, clients, secs, plain.clone()).await;
            println!(
                "upstream alone, {clients} client(s): {n} calls in {el:.2}s = {:.0} calls/s, p50 {:.0}µs, p99 {:.0}µs",
                n as f64 / el,
                pct(&lat, 0.5),
                pct(&lat, 0.99),
            );
        }
        let virtual_url = format!("http://127.0.0.1:{port}/mcp/servers/up");
        for clients in [1usize, 8] {
            let (n, lat, el, cpu) =
                run_load(pid, hz, &virtual_url, clients, secs, plain.clone()).await;
            println!(
                "virtual server tools/call via toolshed, {clients} client(s): {n} calls in {el:.2}s = {:.0} calls/s, p50 {:.0}µs, p99 {:.0}µs, toolshed CPU {:.3} ms/call",
                n as f64 / el,
                pct(&lat, 0.5),
                pct(&lat, 0.99),
                cpu * 1e3 / n as f64
            );
        }
        let echo = r#"{"name":"up__echo","arguments":{"text":"hi"}}"#.to_string();
        for clients in [1usize, 8] {
            let (n, lat, el, cpu) = run_load(pid, hz, &url, clients, secs, echo.clone()).await;
            println!(
                "direct tools/call via toolshed, {clients} client(s): {n} calls in {el:.2}s = {:.0} calls/s, p50 {:.0}µs, p99 {:.0}µs, toolshed CPU {:.3} ms/call",
                n as f64 / el,
                pct(&lat, 0.5),
                pct(&lat, 0.99),
                cpu * 1e3 / n as f64
            );
        }
        let script = r#"{"name":"run_script","arguments":{"script":"return await tools.up.echo({text: 'hi'})"}}"#.to_string();
        let (n, lat, el, cpu) = run_load(pid, hz, &url, 8, secs, script).await;
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

/// A minimal MCP client over streamable HTTP for load generation: one HTTP/1.1 keep-alive
/// connection and one MCP session per client, requests pre-serialised, answers read whole
/// (JSON or a short SSE stream) and checked for a result. It keeps the load generator's own CPU
/// cost small so the gateway, not the clients, is what the measurement sees.
mod load {
    use bytes::Bytes;
    use http_body_util::{BodyExt, Full};
    use hyper::client::conn::http1::{self, SendRequest};
    use hyper::{Request, StatusCode};
    use hyper_util::rt::TokioIo;

    pub const PROTOCOL: &str = "2025-11-25";

    pub struct Client {
        sender: SendRequest<Full<Bytes>>,
        authority: String,
        path: String,
        session: Option<String>,
        next_id: u64,
    }

    impl Client {
        /// Connects and runs the MCP handshake (initialize + notifications/initialized).
        pub async fn connect(url: &str) -> Client {
            let rest = url.strip_prefix("http://").expect("http:// URL");
            let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
            let tcp = tokio::net::TcpStream::connect(authority)
                .await
                .expect("connect");
            tcp.set_nodelay(true).unwrap();
            let (sender, conn) = http1::handshake(TokioIo::new(tcp))
                .await
                .expect("handshake");
            tokio::spawn(conn);
            let mut c = Client {
                sender,
                authority: authority.to_string(),
                path: path.to_string(),
                session: None,
                next_id: 1,
            };
            let init = format!(
                r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"{PROTOCOL}","capabilities":{{}},"clientInfo":{{"name":"toolshed-load","version":"0"}}}}}}"#
            );
            let (status, session, body) = c.post(Bytes::from(init)).await;
            assert_eq!(
                status,
                StatusCode::OK,
                "initialize: {}",
                String::from_utf8_lossy(&body)
            );
            c.session = session;
            let (status, _, _) = c
                .post(Bytes::from_static(
                    br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
                ))
                .await;
            assert_eq!(status, StatusCode::ACCEPTED);
            c
        }

        async fn post(&mut self, body: Bytes) -> (StatusCode, Option<String>, Bytes) {
            let mut req = Request::post(&self.path)
                .header("host", &self.authority)
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .header("mcp-protocol-version", PROTOCOL);
            if let Some(s) = &self.session {
                req = req.header("mcp-session-id", s);
            }
            let req = req.body(Full::new(body)).unwrap();
            self.sender.ready().await.expect("connection ready");
            let resp = self.sender.send_request(req).await.expect("request");
            let status = resp.status();
            let session = resp
                .headers()
                .get("mcp-session-id")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            let body = resp.into_body().collect().await.expect("body").to_bytes();
            (status, session, body)
        }

        /// One JSON-RPC request; returns the raw answer (a JSON body or an SSE stream's text).
        pub async fn request(&mut self, method: &str, params: &str) -> Bytes {
            let id = self.next_id;
            self.next_id += 1;
            let body =
                format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{params}}}"#);
            let (status, _, body) = self.post(Bytes::from(body)).await;
            assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
            body
        }

        /// Calls a tool; panics unless the answer is a successful result.
        pub async fn call_tool(&mut self, params: &str) {
            let body = self.request("tools/call", params).await;
            let text = std::str::from_utf8(&body).expect("utf-8");
            assert!(
                text.contains(r#""result""#) && !text.contains(r#""isError":true"#),
                "tool call failed: {text}"
            );
        }

        /// Ends the session (DELETE), as a well-behaved client does.
        pub async fn close(mut self) {
            if let Some(s) = self.session.take() {
                let req = Request::delete(&self.path)
                    .header("host", &self.authority)
                    .header("mcp-session-id", s)
                    .header("mcp-protocol-version", PROTOCOL)
                    .body(Full::new(Bytes::new()))
                    .unwrap();
                if self.sender.ready().await.is_ok() {
                    let _ = self.sender.send_request(req).await;
                }
            }
        }
    }
}

/// A canned upstream MCP server (streamable HTTP, one session, protocol 2025-11-25): it answers
/// `initialize`, `tools/list` (one read-only tool, `echo`) and every `tools/call` with the same
/// result as plain JSON, notifications with 202, anything else with an empty result. It runs
/// as a separate process (this binary with [`ENV`] set) on one thread, so that it takes little
/// of the cores the gateway and the clients share.
mod canned {
    use std::convert::Infallible;

    use bytes::Bytes;
    use http_body_util::{BodyExt, Full};
    use hyper::body::Incoming;
    use hyper::{Request, Response, StatusCode};
    use hyper_util::rt::TokioIo;
    use serde_json::{json, Value};

    pub const ENV: &str = "TOOLSHED_BENCH_CANNED_UPSTREAM";

    pub fn serve() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            println!("LISTENING http://{}/mcp", listener.local_addr().unwrap());
            loop {
                let (tcp, _) = listener.accept().await.unwrap();
                tcp.set_nodelay(true).unwrap();
                tokio::spawn(async move {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tcp), hyper::service::service_fn(answer))
                        .await;
                });
            }
        });
    }

    async fn answer(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
        let reply = |status: StatusCode, body: Bytes| {
            Response::builder()
                .status(status)
                .header("content-type", "application/json")
                .header("mcp-session-id", "canned")
                .body(Full::new(body))
                .unwrap()
        };
        match *req.method() {
            hyper::Method::POST => {}
            hyper::Method::DELETE => return Ok(reply(StatusCode::OK, Bytes::new())),
            _ => return Ok(reply(StatusCode::METHOD_NOT_ALLOWED, Bytes::new())),
        }
        let body = req.into_body().collect().await.map(|b| b.to_bytes());
        let Ok(message) = body.map(|b| serde_json::from_slice::<Value>(&b).unwrap_or_default())
        else {
            return Ok(reply(StatusCode::BAD_REQUEST, Bytes::new()));
        };
        let Some(id) = message.get("id") else {
            return Ok(reply(StatusCode::ACCEPTED, Bytes::new()));
        };
        let result = match message["method"].as_str().unwrap_or_default() {
            "initialize" => json!({
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "canned", "version": "1"}
            }),
            "tools/list" => json!({"tools": [{
                "name": "echo",
                "description": "Echoes the text back.",
                "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
                "annotations": {"readOnlyHint": true}
            }]}),
            "tools/call" => json!({"content": [{"type": "text", "text": "hi"}]}),
            _ => json!({}),
        };
        let body =
            serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "result": result})).unwrap();
        Ok(reply(StatusCode::OK, Bytes::from(body)))
    }
}
