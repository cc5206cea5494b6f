//! `toolshed export --format mcp|openai|anthropic [--pattern GLOB]`: the tools you may use as
//! definitions of that format (a JSON array on stdout), ready for a model API's `tools` or for
//! `clientTools`. Names and what each format leaves out: [`toolshed_core::formats::export`].

use std::process::ExitCode;

use toolshed_core::formats::ExportFormat;
use toolshed_core::Pattern;
use toolshed_engine::Caller;

use crate::app::App;

pub fn run(
    app: &App,
    caller: &Caller,
    format: &str,
    pattern: Option<&str>,
) -> anyhow::Result<ExitCode> {
    let format = ExportFormat::parse(format).map_err(|e| anyhow::anyhow!("--format: {e}"))?;
    let pattern = pattern
        .map(Pattern::parse)
        .transpose()
        .map_err(|e| anyhow::anyhow!("--pattern: {e}"))?;
    let tools = app.engine.export_tools(caller, format, pattern.as_ref());
    outln!("{}", serde_json::to_string_pretty(&tools)?);
    Ok(ExitCode::SUCCESS)
}
