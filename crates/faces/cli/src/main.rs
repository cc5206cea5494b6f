//! The `toolshed` command: `serve` (MCP over stdio or streamable HTTP plus the HTTP API) and CLI
//! verbs that reach tools through the same engine as every other face. This file parses the
//! command line and starts the runtime; each verb is a file of [`commands`].

#[macro_use]
mod output;

mod app;
mod commands;
mod config;
mod listen;
mod private;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

use crate::commands::Command;
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
    commands::dispatch(config, cli.command, cli.json).await
}
