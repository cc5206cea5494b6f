//! `toolshed run FILE|- [--client-tools FILE]`: a script through the engine's `run_script`
//! operation; calls of declared client tools pause it for their results.

use std::process::ExitCode;

use anyhow::Context;
use serde_json::Value;
use toolshed_engine::ops::RunScriptArgs;
use toolshed_engine::Caller;

use super::report::{read_json_arg, read_stdin, report_error, report_outcome};
use crate::app::App;

pub async fn run(
    app: &App,
    caller: &Caller,
    file: &str,
    client_tools: Option<String>,
    json_out: bool,
) -> anyhow::Result<ExitCode> {
    let script = if file == "-" {
        read_stdin()?
    } else {
        std::fs::read_to_string(file).with_context(|| format!("reading script {file}"))?
    };
    let client_tools = match client_tools {
        None => vec![],
        Some(f) => match read_json_arg(&f).context("reading the client tools")? {
            Value::Array(items) => items,
            _ => anyhow::bail!("{f}: client tools must be a JSON array of declarations"),
        },
    };
    let args = RunScriptArgs {
        script,
        client_tools,
    };
    Ok(match app.engine.run_script_args(caller, args).await {
        Ok(o) => report_outcome(&o, json_out),
        Err(e) => report_error(&e, json_out),
    })
}
