//! The `toolshed` command: `serve` (MCP over stdio or streamable HTTP plus the HTTP API) and CLI
//! verbs that reach tools through the same engine as every other face.

#[macro_use]
mod output;

mod agents_cmd;
mod app;
mod config;
mod executions_cmd;
mod listen;
mod private;
mod sources_cmd;

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use serde_json::{json, Value};
use toolshed_engine::ops::RunScriptArgs;
use toolshed_engine::{Engine, EngineError, Face, Outcome, WaitKind};

use crate::app::App;
use crate::config::Config;

#[derive(Parser)]
#[command(
    name = "toolshed",
    version,
    about = "A governed, token-efficient tool gateway for AI agents"
)]
struct Cli {
    /// Configuration file (default: ./toolshed.toml when present).
    #[arg(long, global = true, env = "TOOLSHED_CONFIG")]
    config: Option<PathBuf>,
    /// Data directory for the embedded database (overrides the config).
    #[arg(long, global = true)]
    data_dir: Option<PathBuf>,
    /// Print machine-readable JSON.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve MCP and the HTTP API (default: HTTP on the configured address).
    Serve {
        /// Serve one MCP session over stdin/stdout.
        #[arg(long, conflicts_with = "http")]
        stdio: bool,
        /// Serve HTTP (MCP at /mcp and the API at /v1) on this address.
        #[arg(long, value_name = "ADDR")]
        http: Option<String>,
        /// Also expose every allowed tool as a plain MCP tool.
        #[arg(long)]
        direct: bool,
    },
    /// Ranked search over the tools you may use.
    Search {
        query: String,
        #[arg(long, default_value_t = 10)]
        limit: usize,
        #[arg(long)]
        namespace: Option<String>,
    },
    /// Show one tool's inputs, outputs and an example call.
    Describe {
        path: String,
        /// Also print the raw JSON Schemas.
        #[arg(long)]
        schemas: bool,
    },
    /// Call a tool with JSON arguments (`-` reads them from stdin).
    Call { path: String, args: Option<String> },
    /// Run a JavaScript file (`-` reads stdin) in the sandbox.
    Run {
        file: String,
        /// A JSON file declaring tools this client runs itself (MCP, OpenAI, Anthropic or
        /// custom format): calls to them pause the script for their results.
        #[arg(long, value_name = "FILE")]
        client_tools: Option<String>,
    },
    /// The newest audit entries: who called what, how it ended, how long it took.
    Audit {
        #[arg(long, default_value_t = 20)]
        limit: i64,
    },
    /// Executions waiting for a decision.
    Approvals {
        #[command(subcommand)]
        action: executions_cmd::ApprovalAction,
    },
    /// Agent definitions: list, get, write, patch, versions, restore, publish, delete, schema.
    Agents {
        #[command(subcommand)]
        action: agents_cmd::AgentsAction,
    },
    /// Executions: list what waits, show, cancel, post client tool results, answer questions.
    Executions {
        #[command(subcommand)]
        action: executions_cmd::ExecutionsAction,
    },
    /// Tool sources (OpenAPI, GraphQL, upstream MCP): add, list, remove, refresh.
    Sources {
        #[command(subcommand)]
        action: sources_cmd::SourcesAction,
    },
}

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // A sandbox worker (started by this binary's own sandbox) does nothing else.
    if toolshed_sandbox::worker::is_worker() {
        toolshed_sandbox::worker::main();
    }
    private::restrict_umask();
    let cli = Cli::parse();
    let stdio = matches!(cli.command, Command::Serve { stdio: true, .. });
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("TOOLSHED_LOG")
                .unwrap_or_else(|_| "toolshed=info,warn".into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(!stdio)
        .init();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let code = match rt.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    };
    // A stdio session stopped by a signal leaves a blocking read of stdin behind; dropping the
    // runtime would wait for it forever. Everything that matters was shut down by `run`.
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    if output::failed() {
        return ExitCode::from(2);
    }
    code
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let mut config = Config::load(cli.config.as_deref())?;
    if let Some(d) = cli.data_dir {
        config.data_dir = Some(d);
    }
    let command = match cli.command {
        Command::Sources { action } => {
            return sources_cmd::run(&config, action, cli.json).await;
        }
        other => other,
    };
    // Refuse an exposed address before anything starts (upstream children start in the build).
    if let Command::Serve {
        stdio: false, http, ..
    } = &command
    {
        listen::check(http.as_deref().unwrap_or(&config.http.addr), &config).await?;
    }
    // Listen before building: upstream children start during the build.
    let stop = matches!(command, Command::Serve { .. }).then(shutdown_signal);
    let app = App::build(config).await?;
    let json_out = cli.json;
    let principal = app.config.principal.clone();
    let caller = app.engine.caller(&principal, Face::Cli);
    let code = match command {
        Command::Serve {
            stdio,
            http,
            direct,
        } => {
            let stop = stop.unwrap_or_else(shutdown_signal);
            serve(&app, stdio, http, direct || app.config.mcp.direct, stop).await?;
            ExitCode::SUCCESS
        }
        Command::Search {
            query,
            limit,
            namespace,
        } => {
            if app.config.search.model.is_some() {
                // One-shot: rank with embeddings too (stored vectors make later runs quick).
                let engine = app.engine.clone();
                let waited = tokio::task::spawn_blocking(move || {
                    engine.wait_semantic_search(std::time::Duration::from_secs(600))
                })
                .await?;
                if let Err(e) = waited {
                    eprintln!("semantic search unavailable ({e}): ranking by words only");
                }
            }
            let answer = app
                .engine
                .search(&caller, &query, limit, namespace.as_deref());
            if json_out {
                outln!("{}", serde_json::to_string_pretty(&answer)?);
            } else {
                outln!("{} matching tools", answer.total);
                for h in answer.hits {
                    let flag = if h.destructive { " [destructive]" } else { "" };
                    outln!("  {}{flag}\n      {} — {}", h.path, h.name, h.summary);
                }
            }
            ExitCode::SUCCESS
        }
        Command::Describe { path, schemas } => match app.engine.describe(&caller, &path, schemas) {
            Ok(d) if json_out => {
                outln!("{}", serde_json::to_string_pretty(&d)?);
                ExitCode::SUCCESS
            }
            Ok(d) => {
                outln!("{}", d.text);
                if schemas {
                    outln!(
                        "input schema: {}",
                        serde_json::to_string_pretty(&d.input_schema)?
                    );
                    if let Some(o) = &d.output_schema {
                        outln!("output schema: {}", serde_json::to_string_pretty(o)?);
                    }
                }
                ExitCode::SUCCESS
            }
            Err(e) => report_error(&e, json_out),
        },
        Command::Call { path, args } => {
            let text = match args.as_deref() {
                Some("-") => read_stdin()?,
                Some(t) => t.to_string(),
                None => String::new(),
            };
            let result = match Engine::parse_args(&path, &text) {
                Ok(args) => app.engine.call(&caller, &path, args).await,
                Err(e) => Err(e),
            };
            match result {
                Ok(o) => report_outcome(&o, json_out),
                Err(e) => report_error(&e, json_out),
            }
        }
        Command::Run { file, client_tools } => {
            let script = if file == "-" {
                read_stdin()?
            } else {
                std::fs::read_to_string(&file).with_context(|| format!("reading script {file}"))?
            };
            let client_tools = match client_tools {
                None => vec![],
                Some(f) => {
                    let v = read_json_arg(&f).context("reading the client tools")?;
                    match v {
                        Value::Array(items) => items,
                        _ => {
                            anyhow::bail!("{f}: client tools must be a JSON array of declarations")
                        }
                    }
                }
            };
            let args = RunScriptArgs {
                script,
                client_tools,
            };
            match app.engine.run_script_args(&caller, args).await {
                Ok(o) => report_outcome(&o, json_out),
                Err(e) => report_error(&e, json_out),
            }
        }
        Command::Audit { limit } => {
            let entries = app.store.recent_audit(limit.clamp(1, 10_000)).await?;
            if json_out {
                outln!(
                    "{}",
                    serde_json::to_string_pretty(&json!({"entries": entries}))?
                );
            } else {
                for e in entries {
                    let exec = e.execution_id.as_deref().unwrap_or("-");
                    outln!(
                        "{}  {:<8} {:<5} {:<10} {}  {} µs  exec {exec}  args {}",
                        e.ts,
                        e.principal,
                        e.face,
                        e.outcome,
                        e.path,
                        e.duration_us,
                        e.args
                    );
                }
            }
            ExitCode::SUCCESS
        }
        Command::Approvals { action } => {
            executions_cmd::approvals(&app, &caller, action, json_out).await?
        }
        Command::Executions { action } => {
            executions_cmd::executions(&app, &caller, action, json_out).await?
        }
        Command::Agents { action } => agents_cmd::run(&app, &caller, action, json_out).await?,
        // Normally answered before the app is built (see above); kept for exhaustiveness.
        Command::Sources { action } => sources_cmd::run(&app.config, action, json_out).await?,
    };
    // Graceful shutdown: every queued audit entry is written before the process exits.
    app.engine.shutdown().await;
    app.shutdown().await;
    app.store.close().await;
    Ok(code)
}

/// JSON from a file, or from stdin for `-`.
fn read_json_arg(arg: &str) -> anyhow::Result<Value> {
    let text = if arg == "-" {
        read_stdin()?
    } else if std::path::Path::new(arg).is_file() {
        std::fs::read_to_string(arg).with_context(|| format!("reading {arg}"))?
    } else {
        arg.to_string()
    };
    serde_json::from_str(&text).with_context(|| format!("{arg} is not valid JSON"))
}

pub(crate) fn read_stdin() -> anyhow::Result<String> {
    let mut s = String::new();
    std::io::stdin()
        .read_to_string(&mut s)
        .context("reading standard input")?;
    Ok(s)
}

pub(crate) fn report_outcome(o: &Outcome, json_out: bool) -> ExitCode {
    if json_out {
        outln!(
            "{}",
            serde_json::to_string_pretty(&o.to_json()).unwrap_or_default()
        );
    } else {
        match o {
            Outcome::Completed { result, logs, .. } => {
                for l in logs {
                    eprintln!("[{}] {}", l.level, l.message);
                }
                outln!("{}", pretty(result));
            }
            Outcome::Failed { error, logs, .. } => {
                for l in logs {
                    eprintln!("[{}] {}", l.level, l.message);
                }
                eprintln!("failed: {}", pretty(error));
            }
            Outcome::Paused {
                execution_id,
                waits,
                ..
            }
            | Outcome::ToolCallRequired {
                execution_id,
                waits,
                ..
            } => print_waits(execution_id, waits),
            Outcome::Cancelled { execution_id, .. } => outln!("cancelled: {execution_id}"),
        }
    }
    match o {
        Outcome::Failed { .. } => ExitCode::from(1),
        _ => ExitCode::SUCCESS,
    }
}

/// What a paused execution waits on, and the command that answers each wait.
fn print_waits(id: &str, waits: &[toolshed_engine::Wait]) {
    outln!("paused: execution {id} waits on {} answer(s)", waits.len());
    for w in waits {
        let wid = &w.wait_id;
        match w.kind {
            WaitKind::Approval => outln!(
                "  {wid}: '{}' needs approval
    args: {}
    approve: toolshed approvals approve {id} --wait-id {wid}
    deny:    toolshed approvals deny {id} --wait-id {wid}",
                w.decision_path(),
                w.arguments.as_ref().map(Value::to_string).unwrap_or_default()
            ),
            WaitKind::ToolResult => outln!(
                "  {wid}: client tool '{}' ({})
    args: {}
    answer: toolshed executions tool-results {id} '[{{\"callId\": \"{wid}\", \"result\": ...}}]'",
                w.name.as_deref().unwrap_or_default(),
                w.decision_path(),
                w.arguments.as_ref().map(Value::to_string).unwrap_or_default()
            ),
            WaitKind::Input => outln!(
                "  {wid}: question \"{}\"{}\n    answer: toolshed executions answer {id} {wid} accept '<json>'   (or decline, cancel)",
                w.message.as_deref().unwrap_or_default(),
                w.url.as_deref().map(|u| format!(" (open {u})")).unwrap_or_default()
            ),
        }
    }
}

pub(crate) fn report_error(e: &EngineError, json_out: bool) -> ExitCode {
    if json_out {
        outln!(
            "{}",
            serde_json::to_string_pretty(&json!({"error": e.to_json()})).unwrap_or_default()
        );
    } else {
        eprintln!("error: {e}");
    }
    ExitCode::from(1)
}

fn pretty(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => serde_json::to_string_pretty(other).unwrap_or_default(),
    }
}

/// Ctrl-C, or SIGTERM (what service managers and containers send) on Unix. The Unix listeners
/// are registered when this is called, not when the future is first polled: a signal that
/// arrives while the app is still being built (upstream children already running) ends `serve`
/// as soon as it starts, through the normal shutdown, instead of killing the process outright.
fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    let listeners = {
        use tokio::signal::unix::{signal, SignalKind};
        signal(SignalKind::terminate())
            .ok()
            .zip(signal(SignalKind::interrupt()).ok())
    };
    async move {
        #[cfg(unix)]
        if let Some((mut term, mut int)) = listeners {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
            return;
        }
        let _ = tokio::signal::ctrl_c().await;
    }
}

async fn serve(
    app: &App,
    stdio: bool,
    http: Option<String>,
    direct: bool,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let options = toolshed_mcp::McpOptions {
        direct,
        resume_tool: app.config.mcp.resume_tool,
    };
    app.engine.warm_search();
    let _purge = app.engine.spawn_audit_retention();
    let _poll = app.watch_stored_sources();
    let _custom = app.watch_custom_tools();
    if stdio {
        // SIGTERM or Ctrl-C end the session like a closed stdin, so the caller's shutdown
        // (audit flush, upstream children killed) still runs.
        tokio::select! {
            r = toolshed_mcp::serve_stdio(app.engine.clone(), app.config.principal.clone(), options) => r?,
            _ = stop => tracing::info!("signal received; stopping"),
        }
        return Ok(());
    }
    let addr = http.unwrap_or_else(|| app.config.http.addr.clone());
    let keys = app
        .keys
        .as_ref()
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .clone();
    let http_config = &app.config.http;
    let mcp = toolshed_mcp::http_router(
        app.engine.clone(),
        toolshed_mcp::Identity::Keys(keys.clone()),
        options,
        toolshed_mcp::HttpOptions {
            allowed_hosts: http_config.allowed_hosts.clone(),
            sessions: toolshed_mcp::SessionTable::new(app.config.mcp.session_limits()),
        },
    );
    // One guard in front of every route: Host, Origin and content type.
    let router = toolshed_http::guard(
        toolshed_http::router(app.engine.clone(), keys).merge(mcp),
        toolshed_http::GuardConfig {
            allowed_hosts: http_config.allowed_hosts.clone(),
            allowed_origins: http_config.allowed_origins.clone(),
        },
    );
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .with_context(|| format!("binding {addr}"))?;
    let local = listener.local_addr()?;
    tracing::info!(%local, "toolshed listening: MCP at /mcp, API at /v1");
    eprintln!("toolshed listening on http://{local} (MCP: /mcp, API: /v1)");
    // Small SSE frames (the end of a streamed MCP reply) must not wait for delayed ACKs, or
    // clients give up on the connection and reconnect for every call.
    use axum::serve::ListenerExt;
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, router)
        .with_graceful_shutdown(stop)
        .await?;
    Ok(())
}
