//! Shared helpers for the binary's end-to-end tests: start `toolshed` as a child process, talk to
//! it over MCP (rmcp client) and HTTP.

#![allow(dead_code)]

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::{json, Value};

pub const BIN: &str = env!("CARGO_BIN_EXE_toolshed");

pub type Client = RunningService<RoleClient, ()>;

/// Configuration that lets the local principal's writes (`tables.create`, `tables.rows.insert`,
/// ...) run without confirmation, as every tool call did before call rules: for tests about
/// something else than which calls pause. Otherwise it is the built-in local policy (everything
/// visible, every pending call decided by the local user).
pub const ALLOW_WRITES: &str = r#"
[[roles]]
id = "admin"
patterns = ["*"]
decide = ["**"]
self_decide = true
allow = ["write"]
[[principals]]
id = "local"
roles = ["admin"]
"#;

/// A config file of [`ALLOW_WRITES`] alone.
pub fn allow_writes_config(dir: &Path) -> std::path::PathBuf {
    let f = dir.join("allow-writes.toml");
    std::fs::write(&f, ALLOW_WRITES).unwrap();
    f
}

/// A config file giving `limited` only `tables.rows.*` (its writes allowed unconfirmed) and
/// `admin` everything (writes unconfirmed, destructive calls paused).
pub fn write_policy_config(dir: &Path, principal: &str) -> std::path::PathBuf {
    let f = dir.join("toolshed.toml");
    std::fs::write(
        &f,
        format!(
            r#"
principal = "{principal}"
[[roles]]
id = "rows"
name = "Row editor"
patterns = ["tables.rows.*"]
allow = ["tables.rows.*"]
[[roles]]
id = "admin"
patterns = ["*"]
allow = ["write"]
[[principals]]
id = "limited"
roles = ["rows"]
api_keys = ["k-limited"]
[[principals]]
id = "admin"
roles = ["admin"]
api_keys = ["k-admin"]
"#
        ),
    )
    .unwrap();
    f
}

pub async fn stdio_client(data_dir: &Path, extra: &[&str]) -> Client {
    let mut cmd = tokio::process::Command::new(BIN);
    cmd.arg("--data-dir")
        .arg(data_dir)
        .args(extra)
        .args(["serve", "--stdio"]);
    cmd.stderr(Stdio::null());
    let transport = TokioChildProcess::new(cmd).expect("spawn toolshed");
    ().serve(transport).await.expect("initialize over stdio")
}

pub async fn http_client(port: u16, key: Option<&str>) -> Client {
    let mut config =
        StreamableHttpClientTransportConfig::with_uri(format!("http://127.0.0.1:{port}/mcp"));
    if let Some(k) = key {
        config = config.auth_header(k.to_string());
    }
    let transport = StreamableHttpClientTransport::from_config(config);
    ().serve(transport).await.expect("initialize over HTTP")
}

/// Calls a tool and returns (is_error, parsed JSON or the raw text as a string).
pub async fn call(client: &Client, name: &str, args: Value) -> (bool, Value) {
    let params = CallToolRequestParams::new(name.to_string())
        .with_arguments(args.as_object().cloned().unwrap_or_default());
    let r: CallToolResult = client.call_tool(params).await.expect("tools/call");
    let text = r
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("");
    let v = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (r.is_error.unwrap_or(false), v)
}

pub async fn run_script(client: &Client, script: &str) -> (bool, Value) {
    call(client, "run_script", json!({ "script": script })).await
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits (up to 20 s) for the server's "toolshed listening on http://127.0.0.1:PORT" line on
/// `stderr`, then keeps draining it in the background; `false` when it ends or times out first.
/// The lines the server printed before it listened; `None` when it never did.
fn listening(stderr: std::process::ChildStderr, port: u16) -> Option<Vec<String>> {
    use std::io::BufRead;
    let (tx, rx) = std::sync::mpsc::channel();
    let want = format!("toolshed listening on http://127.0.0.1:{port} ");
    std::thread::spawn(move || {
        let mut lines = std::io::BufReader::new(stderr).lines();
        let mut before = Vec::new();
        for line in lines.by_ref() {
            match line {
                Ok(l) if l.starts_with(&want) => {
                    let _ = tx.send(std::mem::take(&mut before));
                    break;
                }
                Ok(l) => before.push(l),
                Err(_) => break,
            }
        }
        drop(tx);
        // Keep reading so that the server never blocks on a full pipe.
        for _ in lines {}
    });
    rx.recv_timeout(Duration::from_secs(20)).ok()
}

/// A `toolshed serve --http` child process.
pub struct Server {
    pub child: std::process::Child,
    pub port: u16,
    /// What it printed to stderr before it listened (the sources' reports among it).
    pub startup: Vec<String>,
}

impl Server {
    pub fn start(data_dir: &Path, config: Option<&Path>, extra: &[&str]) -> Self {
        Self::start_with_env(data_dir, config, extra, &[])
    }

    /// [`Server::start`] with extra environment variables.
    pub fn start_with_env(
        data_dir: &Path,
        config: Option<&Path>,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Self {
        Self::spawn(data_dir, config, extra, env, None)
    }

    /// [`Server::start`] on a chosen port (for a configuration that names its own address).
    pub fn start_on(data_dir: &Path, config: Option<&Path>, extra: &[&str], port: u16) -> Self {
        Self::spawn(data_dir, config, extra, &[], Some(port))
    }

    /// Starts the server and waits for its own "listening" line. A port from [`free_port`] can
    /// be taken by another test's listener before the server binds it: then the server exits
    /// without that line and is started again on another port.
    fn spawn(
        data_dir: &Path,
        config: Option<&Path>,
        extra: &[&str],
        env: &[(&str, &str)],
        port: Option<u16>,
    ) -> Self {
        for _ in 0..5 {
            let p = port.unwrap_or_else(free_port);
            let mut cmd = std::process::Command::new(BIN);
            cmd.arg("--data-dir").arg(data_dir);
            if let Some(c) = config {
                cmd.arg("--config").arg(c);
            }
            cmd.args(["serve", "--http", &format!("127.0.0.1:{p}")])
                .args(extra)
                .envs(env.iter().copied());
            cmd.stdout(Stdio::null()).stderr(Stdio::piped());
            let mut child = cmd.spawn().expect("spawn toolshed serve");
            let stderr = child.stderr.take().expect("piped stderr");
            if let Some(startup) = listening(stderr, p) {
                return Self {
                    child,
                    port: p,
                    startup,
                };
            }
            let _ = child.kill();
            let status = child.wait();
            if port.is_some() {
                panic!("toolshed did not start listening on {p} ({status:?})");
            }
        }
        panic!("toolshed did not start listening on any of 5 free ports");
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// SIGKILL: no graceful shutdown.
    pub fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs the CLI and returns (exit code, stdout as JSON or text).
pub fn cli(data_dir: &Path, config: Option<&Path>, args: &[&str]) -> (i32, Value) {
    cli_with_env(data_dir, config, args, &[])
}

/// [`cli`] with `env` added to the binary's environment.
pub fn cli_with_env(
    data_dir: &Path,
    config: Option<&Path>,
    args: &[&str],
    env: &[(&str, &str)],
) -> (i32, Value) {
    let mut cmd = std::process::Command::new(BIN);
    // The search settings come from the test, not from the shell that runs it.
    cmd.env_remove("TOOLSHED_SEARCH_PRECISION")
        .env_remove("TOOLSHED_SEARCH_AVX512")
        .env_remove("TOOLSHED_SEARCH_AVX_VNNI")
        .envs(env.iter().copied());
    cmd.arg("--data-dir").arg(data_dir).arg("--json");
    if let Some(c) = config {
        cmd.arg("--config").arg(c);
    }
    let out = cmd.args(args).output().expect("run toolshed");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let v = serde_json::from_str(&text)
        .unwrap_or(Value::String(text + &String::from_utf8_lossy(&out.stderr)));
    (out.status.code().unwrap_or(-1), v)
}

/// A fresh schema on the test PostgreSQL server: `(url using it, admin url, schema)`, or `None`
/// (with a printed skip line).
pub async fn postgres_schema(what: &str) -> Option<(String, String, String)> {
    use sqlx::Connection;
    sqlx::any::install_default_drivers();
    let base = std::env::var("TOOLSHED_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let connect = sqlx::AnyConnection::connect(&base);
    let mut admin = match tokio::time::timeout(Duration::from_secs(5), connect).await {
        Ok(Ok(c)) => c,
        other => {
            eprintln!(
                "skipping {what}: cannot connect to PostgreSQL at {base}: {:?}",
                other.err()
            );
            return None;
        }
    };
    let schema = format!(
        "cli_pauses_{}_{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
            % 1_000_000_000
    );
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
        .execute(&mut admin)
        .await
        .unwrap();
    let sep = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{sep}options=-c%20search_path%3D{schema}");
    Some((url, base, schema))
}

pub async fn drop_schema(base: &str, schema: &str) {
    use sqlx::Connection;
    if let Ok(mut admin) = sqlx::AnyConnection::connect(base).await {
        let drop = format!("DROP SCHEMA {schema} CASCADE");
        let _ = sqlx::query(sqlx::AssertSqlSafe(drop))
            .execute(&mut admin)
            .await;
    }
}

pub use toolshed_testing::{conformance_upstream, test_upstream};

/// Where `scripts/peers.sh` installed the peers (`$MCP_TOOLS`, default `/tmp/mcp-tools`).
pub fn peers_dir() -> std::path::PathBuf {
    std::env::var_os("MCP_TOOLS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from("/tmp/mcp-tools"))
}

/// The Python of the peers' virtual environment, when it is installed with the `mcp` SDK.
pub fn peers_python() -> Option<std::path::PathBuf> {
    let python = peers_dir().join("venv/bin/python");
    let ok = std::process::Command::new(&python)
        .args(["-c", "import httpx2, mcp"])
        .output()
        .is_ok_and(|o| o.status.success());
    ok.then_some(python)
}

/// A script of the repository's `scripts/` folder.
pub fn repo_script(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../scripts")
        .join(name)
}
