//! `toolshed agents ...`: agent definitions through the `agents.*` tools and the engine's one
//! call path, like every other face. A definition that fails a stage prints `{ok: false, stage,
//! errors}` and exits 1.

use std::process::ExitCode;

use anyhow::Context;
use clap::Subcommand;
use serde_json::{json, Value};
use toolshed_engine::events::Event;
use toolshed_engine::{Caller, Outcome};

use super::report::{read_stdin, report_error, report_outcome};
use crate::app::App;

#[derive(Subcommand)]
pub enum AgentsAction {
    /// Every agent definition.
    List,
    /// An agent's draft and live definitions (or one `--version`).
    Get {
        name: String,
        #[arg(long)]
        version: Option<i64>,
    },
    /// Write a whole definition (JSON file, `-` for stdin) as the new draft.
    Write { name: String, file: String },
    /// Apply RFC 6902 operations (JSON file, `-` for stdin) to the draft.
    Patch { name: String, file: String },
    /// Every version of an agent.
    Versions { name: String },
    /// Copy an earlier version into a new draft.
    Restore { name: String, version: i64 },
    /// Make the draft the live version (needs approval under the default policy).
    Publish { name: String },
    /// Delete an agent and every version (needs approval under the default policy).
    Delete { name: String },
    /// The definition's schema as compact text (`--json`: the JSON Schema).
    Schema,
    /// Run the agent's live version with an input, printing the model's text as it streams
    /// (tool calls on stderr), then the outcome.
    Run {
        name: String,
        input: String,
        /// Continue thread ID: its newest messages precede the input, and the input and answer
        /// are added to it (the agent must enable memory).
        #[arg(long)]
        thread: Option<String>,
    },
}

/// The text of a file, or stdin for `-` (kept as text so parse errors name line and column).
fn text_of(file: &str) -> anyhow::Result<String> {
    if file == "-" {
        return read_stdin();
    }
    std::fs::read_to_string(file).with_context(|| format!("reading {file}"))
}

/// The tool and arguments of an action.
fn call_of(action: AgentsAction, json_out: bool) -> anyhow::Result<(&'static str, Value)> {
    Ok(match action {
        AgentsAction::List => ("agents.list", json!({})),
        AgentsAction::Get { name, version } => {
            let mut a = json!({"name": name});
            if let Some(v) = version {
                a["version"] = json!(v);
            }
            ("agents.get", a)
        }
        AgentsAction::Write { name, file } => (
            "agents.config.write",
            json!({"name": name, "config": text_of(&file)?}),
        ),
        AgentsAction::Patch { name, file } => (
            "agents.config.patch",
            json!({"name": name, "patch": text_of(&file)?}),
        ),
        AgentsAction::Versions { name } => ("agents.versions", json!({"name": name})),
        AgentsAction::Restore { name, version } => {
            ("agents.restore", json!({"name": name, "version": version}))
        }
        AgentsAction::Publish { name } => ("agents.publish", json!({"name": name})),
        AgentsAction::Delete { name } => ("agents.delete", json!({"name": name})),
        AgentsAction::Schema => (
            "agents.schema",
            json!({"format": if json_out { "json" } else { "text" }}),
        ),
        AgentsAction::Run { .. } => unreachable!("runs are not one tool call"),
    })
}

/// `toolshed agents ...`.
pub async fn run(
    app: &App,
    caller: &Caller,
    action: AgentsAction,
    json_out: bool,
) -> anyhow::Result<ExitCode> {
    if let AgentsAction::Run {
        name,
        input,
        thread,
    } = action
    {
        return run_agent(app, caller, &name, input, thread, json_out).await;
    }
    let text_schema = matches!(action, AgentsAction::Schema) && !json_out;
    let (path, args) = call_of(action, json_out)?;
    Ok(match app.engine.call(caller, path, args).await {
        Ok(Outcome::Completed { result, .. }) if text_schema => {
            outln!("{}", result["text"].as_str().unwrap_or_default());
            ExitCode::SUCCESS
        }
        Ok(Outcome::Completed { result, .. }) => {
            outln!("{}", serde_json::to_string_pretty(&result)?);
            ExitCode::SUCCESS
        }
        Ok(other) => report_outcome(&other, json_out),
        Err(e) if e.is_rejection() => {
            outln!(
                "{}",
                serde_json::to_string_pretty(&e.data().unwrap_or_default())?
            );
            ExitCode::from(1)
        }
        Err(e) => report_error(&e, json_out),
    })
}

/// `toolshed agents run NAME INPUT`: the run's events as they come, then its outcome.
async fn run_agent(
    app: &App,
    caller: &Caller,
    name: &str,
    input: String,
    thread: Option<String>,
    json_out: bool,
) -> anyhow::Result<ExitCode> {
    let id = toolshed_engine::executions::new_execution_id();
    let mut follower = app.engine.events().open_streaming(&id);
    let printer = (!json_out).then(|| {
        tokio::spawn(async move {
            let mut wrote_text = false;
            while let Some(Ok(e)) = follower.next_until_pause().await {
                match &e.event {
                    Event::TextDelta { text } => {
                        out!("{text}");
                        wrote_text = true;
                    }
                    Event::ToolCall { path, .. } => eprintln!("→ {path}"),
                    Event::ToolResult {
                        path,
                        ok: false,
                        error,
                        ..
                    } => {
                        eprintln!(
                            "✗ {path}: {}",
                            error
                                .as_ref()
                                .map_or(String::new(), |e| e["message"].to_string())
                        )
                    }
                    _ => {}
                }
            }
            if wrote_text {
                outln!("");
            }
        })
    });
    let outcome = app
        .engine
        .run_agent(caller, name, input, &[], thread, Some(id.clone()))
        .await;
    if outcome.is_err() {
        app.engine.events().close(&id, false).await;
    }
    if let Some(p) = printer {
        p.await.ok();
    }
    Ok(match outcome {
        // The streamed text was the answer; print the rest of the result as data.
        Ok(Outcome::Completed { result, .. }) if !json_out => {
            eprintln!(
                "completed in {} steps, {} tool calls, {} input / {} output tokens",
                result["steps"],
                result["toolCalls"],
                result["usage"]["inputTokens"],
                result["usage"]["outputTokens"]
            );
            ExitCode::SUCCESS
        }
        Ok(o) => report_outcome(&o, json_out),
        Err(e) => report_error(&e, json_out),
    })
}
