//! `toolshed executions ...` and `toolshed approvals ...`: list what waits, answer waits
//! (decisions, client tool results, answers to questions), cancel. Every verb goes through the
//! engine's answer path, as a person at the terminal ([`DecisionChannel::Human`]).

use std::process::ExitCode;

use anyhow::Context;
use clap::Subcommand;
use serde_json::{json, Value};
use toolshed_engine::ops::ResumeArgs;
use toolshed_engine::{
    AnswerAction, Caller, Decision, DecisionChannel, Face, PendingSummary, ToolResultAnswer,
    WaitKind,
};

use super::report::{read_json_arg, report_error, report_outcome};
use crate::app::App;

const CHANNEL: DecisionChannel = DecisionChannel::Human(Face::Cli);

#[derive(Subcommand)]
pub enum ApprovalAction {
    /// List executions that wait (on approvals, client tool results or questions).
    List {
        /// Only those waiting on this kind: approval, tool_result or input.
        #[arg(long)]
        wait: Option<String>,
    },
    /// Approve a call that needs approval and continue the execution.
    Approve {
        id: String,
        /// The approval wait, when several wait.
        #[arg(long)]
        wait_id: Option<String>,
    },
    /// Deny a call that needs approval and continue the execution.
    Deny {
        id: String,
        #[arg(long)]
        wait_id: Option<String>,
    },
}

#[derive(Subcommand)]
pub enum ExecutionsAction {
    /// List executions that wait.
    List {
        /// Only those waiting on this kind: approval, tool_result or input.
        #[arg(long)]
        wait: Option<String>,
    },
    /// Show one execution: status, open waits, result.
    Show { id: String },
    /// Stop a running or paused execution.
    Cancel { id: String },
    /// Post client tool results: a JSON array `[{callId, result} | {callId, error: {message}}]`
    /// (or `{"results": [...]}`), from a file or `-` for stdin.
    ToolResults { id: String, results: String },
    /// Answer a question (an input wait): accept (with JSON content), decline or cancel.
    Answer {
        id: String,
        wait_id: String,
        /// accept, decline or cancel.
        action: String,
        /// The content of an accepted answer, as JSON text (`-` reads stdin).
        content: Option<String>,
    },
}

fn wait_kind(text: Option<String>) -> anyhow::Result<Option<WaitKind>> {
    text.map(|t| t.parse::<WaitKind>().map_err(anyhow::Error::msg))
        .transpose()
}

fn print_list(list: &[PendingSummary], json_out: bool) -> anyhow::Result<()> {
    if json_out {
        outln!(
            "{}",
            serde_json::to_string_pretty(&json!({"executions": list}))?
        );
        return Ok(());
    }
    if list.is_empty() {
        outln!("no waiting executions");
    }
    for p in list {
        outln!("{}  {}  {}", p.execution_id, p.status, p.kind);
        for w in &p.waits {
            let what = match w.kind {
                WaitKind::Input => format!("\"{}\"", w.message.as_deref().unwrap_or_default()),
                _ => format!(
                    "{} {}",
                    w.path.as_deref().unwrap_or_default(),
                    w.arguments
                        .as_ref()
                        .map(Value::to_string)
                        .unwrap_or_default()
                ),
            };
            outln!("    {} {}  {what}", w.wait_id, w.kind.as_str());
        }
    }
    Ok(())
}

/// `toolshed approvals ...`.
pub async fn approvals(
    app: &App,
    caller: &Caller,
    action: ApprovalAction,
    json_out: bool,
) -> anyhow::Result<ExitCode> {
    let (id, wait_id, decision) = match action {
        ApprovalAction::List { wait } => {
            let list = app.engine.waiting(caller, wait_kind(wait)?).await?;
            print_list(&list, json_out)?;
            return Ok(ExitCode::SUCCESS);
        }
        ApprovalAction::Approve { id, wait_id } => (id, wait_id, Decision::Approve),
        ApprovalAction::Deny { id, wait_id } => (id, wait_id, Decision::Deny),
    };
    Ok(
        match app
            .engine
            .decide(caller, &id, wait_id.as_deref(), decision, CHANNEL)
            .await
        {
            Ok(o) => report_outcome(&o, json_out),
            Err(e) => report_error(&e, json_out),
        },
    )
}

/// `toolshed executions ...`.
pub async fn executions(
    app: &App,
    caller: &Caller,
    action: ExecutionsAction,
    json_out: bool,
) -> anyhow::Result<ExitCode> {
    let outcome = match action {
        ExecutionsAction::List { wait } => {
            let list = app.engine.waiting(caller, wait_kind(wait)?).await?;
            print_list(&list, json_out)?;
            return Ok(ExitCode::SUCCESS);
        }
        ExecutionsAction::Show { id } => {
            return Ok(match app.engine.execution(caller, &id).await {
                Ok(info) => {
                    outln!("{}", serde_json::to_string_pretty(&info)?);
                    ExitCode::SUCCESS
                }
                Err(e) => report_error(&e, json_out),
            });
        }
        ExecutionsAction::Cancel { id } => app.engine.cancel(caller, &id).await,
        ExecutionsAction::ToolResults { id, results } => {
            let v = read_json_arg(&results).context("reading the tool results")?;
            let list = v.get("results").cloned().unwrap_or(v);
            let results: Vec<ToolResultAnswer> = serde_json::from_value(list).context(
                "tool results must be [{\"callId\", \"result\"} | {\"callId\", \"error\": {\"message\"}}]",
            )?;
            app.engine.tool_results(caller, &id, results, CHANNEL).await
        }
        ExecutionsAction::Answer {
            id,
            wait_id,
            action,
            content,
        } => {
            let action: AnswerAction = serde_json::from_value(json!(action))
                .context("the action is accept, decline or cancel")?;
            let content = content
                .map(|c| read_json_arg(&c))
                .transpose()
                .context("reading the answer's content")?;
            let args = ResumeArgs {
                execution_id: id,
                wait_id: Some(wait_id),
                action: Some(action),
                content,
                ..Default::default()
            };
            app.engine.resume_args(caller, args, CHANNEL).await
        }
    };
    Ok(match outcome {
        Ok(o) => report_outcome(&o, json_out),
        Err(e) => report_error(&e, json_out),
    })
}
