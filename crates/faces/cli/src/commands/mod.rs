//! The verbs of the `toolshed` binary: [`Command`] is the one table of subcommands (clap), and
//! each verb lives in its own file. Every verb reaches tools through the engine, like every
//! other face.
//!
//! | verb | file |
//! |---|---|
//! | `serve` | [`serve`] |
//! | `search` | [`search`] |
//! | `describe` | [`describe`] |
//! | `export` | [`export`] |
//! | `call` | [`call`] |
//! | `run` | [`script`] |
//! | `audit` | [`audit`] |
//! | `approvals`, `executions` | [`executions`] |
//! | `agents` | [`agents`] |
//! | `sources` | [`sources`] |
//!
//! [`report`] is how verbs print outcomes and errors.

pub mod agents;
pub mod audit;
pub mod call;
pub mod connections;
pub mod describe;
pub mod executions;
pub mod export;
pub mod models;
pub mod report;
pub mod script;
pub mod search;
pub mod serve;
pub mod sources;

use std::process::ExitCode;

use clap::Subcommand;
use toolshed_engine::Face;

use crate::app::App;
use crate::config::Config;

#[derive(Subcommand)]
pub enum Command {
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
        /// With --stdio: serve this virtual server (`[[servers]]`) instead of the meta-tools.
        #[arg(long, value_name = "NAME", requires = "stdio")]
        server: Option<String>,
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
    /// The tools you may use as definitions of a model API or protocol (a JSON array).
    Export {
        /// mcp, openai or anthropic.
        #[arg(long)]
        format: String,
        /// Only tools whose path matches this dot-glob (`tables.**`).
        #[arg(long)]
        pattern: Option<String>,
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
    /// Your grants at per-user connections: list, revoke.
    Connections {
        #[command(subcommand)]
        action: connections::ConnectionsAction,
    },
    /// Executions waiting for a decision.
    Approvals {
        #[command(subcommand)]
        action: executions::ApprovalAction,
    },
    /// Agent definitions: list, get, write, patch, versions, restore, publish, delete, schema.
    Agents {
        #[command(subcommand)]
        action: agents::AgentsAction,
    },
    /// Executions: list what waits, show, cancel, post client tool results, answer questions.
    Executions {
        #[command(subcommand)]
        action: executions::ExecutionsAction,
    },
    /// Model endpoints kept in the store (beside `[models.<id>]`): add, list, remove.
    Models {
        #[command(subcommand)]
        action: models::ModelsAction,
    },
    /// Tool sources (OpenAPI, GraphQL, upstream MCP): add, list, remove, refresh.
    Sources {
        #[command(subcommand)]
        action: sources::SourcesAction,
    },
}

/// Runs `command` with `config`: builds the app (except for `sources`, which works on the store
/// alone), runs the verb, then shuts down cleanly (every queued audit entry written).
pub async fn dispatch(
    mut config: Config,
    command: Command,
    json_out: bool,
) -> anyhow::Result<ExitCode> {
    let command = match command {
        Command::Sources { action } => return sources::run(&config, action, json_out).await,
        Command::Models { action } => return models::run(&config, action, json_out).await,
        other => other,
    };
    // Refuse an exposed address before anything starts (upstream children start in the build).
    if let Command::Serve {
        stdio: false, http, ..
    } = &command
    {
        crate::listen::check(http.as_deref().unwrap_or(&config.http.addr), &config).await?;
        // The address served is the one links of paused calls point at, unless `public_url`.
        if let Some(addr) = http {
            config.http.addr = addr.clone();
        }
    }
    // Listen before building: upstream children start during the build.
    let stop = matches!(command, Command::Serve { .. }).then(serve::shutdown_signal);
    let app = App::build(config).await?;
    let caller = app.engine.caller(&app.config.principal, Face::Cli);
    let code = match command {
        Command::Serve {
            stdio,
            http,
            direct,
            server,
        } => {
            let stop = stop.unwrap_or_else(serve::shutdown_signal);
            let direct = direct || app.config.mcp.direct;
            let mode = serve::Mode {
                stdio,
                http,
                direct,
                server,
            };
            serve::serve(&app, mode, stop).await?;
            ExitCode::SUCCESS
        }
        Command::Search {
            query,
            limit,
            namespace,
        } => search::run(&app, &caller, query, limit, namespace, json_out).await?,
        Command::Describe { path, schemas } => {
            describe::run(&app, &caller, &path, schemas, json_out)?
        }
        Command::Export { format, pattern } => {
            export::run(&app, &caller, &format, pattern.as_deref())?
        }
        Command::Call { path, args } => call::run(&app, &caller, &path, args, json_out).await?,
        Command::Run { file, client_tools } => {
            script::run(&app, &caller, &file, client_tools, json_out).await?
        }
        Command::Audit { limit } => audit::run(&app, limit, json_out).await?,
        Command::Connections { action } => {
            connections::run(&app, &caller.principal, action, json_out).await?
        }
        Command::Approvals { action } => {
            executions::approvals(&app, &caller, action, json_out).await?
        }
        Command::Executions { action } => {
            executions::executions(&app, &caller, action, json_out).await?
        }
        Command::Agents { action } => agents::run(&app, &caller, action, json_out).await?,
        Command::Sources { .. } | Command::Models { .. } => {
            unreachable!("answered before the app is built")
        }
    };
    app.engine.shutdown().await;
    app.shutdown().await;
    app.store.close().await;
    Ok(code)
}
