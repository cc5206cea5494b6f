//! How verbs print: an outcome (completed, failed, paused with the command that answers each
//! wait, cancelled), an engine error, and reading JSON arguments from text, a file or stdin.

use std::io::Read;
use std::process::ExitCode;

use anyhow::Context;
use serde_json::{json, Value};
use toolshed_engine::{EngineError, Outcome, Wait, WaitKind};

/// JSON given as text, as a file name, or `-` for stdin.
pub fn read_json_arg(arg: &str) -> anyhow::Result<Value> {
    let text = if arg == "-" {
        read_stdin()?
    } else if std::path::Path::new(arg).is_file() {
        std::fs::read_to_string(arg).with_context(|| format!("reading {arg}"))?
    } else {
        arg.to_string()
    };
    serde_json::from_str(&text).with_context(|| format!("{arg} is not valid JSON"))
}

pub fn read_stdin() -> anyhow::Result<String> {
    let mut s = String::new();
    std::io::stdin()
        .read_to_string(&mut s)
        .context("reading standard input")?;
    Ok(s)
}

/// Prints an outcome; a failed one exits 1 (a pause is not a failure).
pub fn report_outcome(o: &Outcome, json_out: bool) -> ExitCode {
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

fn arguments(w: &Wait) -> String {
    w.arguments
        .as_ref()
        .map(Value::to_string)
        .unwrap_or_default()
}

/// What a paused execution waits on, and the command that answers each wait.
fn print_waits(id: &str, waits: &[Wait]) {
    outln!("paused: execution {id} waits on {} answer(s)", waits.len());
    for w in waits {
        let wid = &w.wait_id;
        match w.kind {
            WaitKind::Approval => {
                outln!("  {wid}: '{}' needs approval", w.decision_path());
                outln!("    args: {}", arguments(w));
                outln!("    approve: toolshed approvals approve {id} --wait-id {wid}");
                outln!("    deny:    toolshed approvals deny {id} --wait-id {wid}");
            }
            WaitKind::ToolResult => {
                let name = w.name.as_deref().unwrap_or_default();
                outln!("  {wid}: client tool '{name}' ({})", w.decision_path());
                outln!("    args: {}", arguments(w));
                outln!("    answer: toolshed executions tool-results {id} '[{{\"callId\": \"{wid}\", \"result\": ...}}]'");
            }
            WaitKind::Input => {
                let link = w.url.as_deref().map(|u| format!(" (open {u})"));
                let question = w.message.as_deref().unwrap_or_default();
                outln!(
                    "  {wid}: question \"{question}\"{}",
                    link.unwrap_or_default()
                );
                outln!("    answer: toolshed executions answer {id} {wid} accept '<json>'   (or decline, cancel)");
            }
        }
    }
}

/// Prints an engine error; exits 1.
pub fn report_error(e: &EngineError, json_out: bool) -> ExitCode {
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
