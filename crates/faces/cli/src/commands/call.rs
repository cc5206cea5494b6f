//! `toolshed call PATH [ARGS|-]`: one tool call through the engine; a call that needs approval
//! prints its pause and how to answer it.

use std::process::ExitCode;

use toolshed_engine::{Caller, Engine};

use super::report::{read_stdin, report_error, report_outcome};
use crate::app::App;

pub async fn run(
    app: &App,
    caller: &Caller,
    path: &str,
    args: Option<String>,
    json_out: bool,
) -> anyhow::Result<ExitCode> {
    let text = match args.as_deref() {
        Some("-") => read_stdin()?,
        Some(t) => t.to_string(),
        None => String::new(),
    };
    let result = match Engine::parse_args(path, &text) {
        Ok(args) => app.engine.call(caller, path, args).await,
        Err(e) => Err(e),
    };
    Ok(match result {
        Ok(o) => report_outcome(&o, json_out),
        Err(e) => report_error(&e, json_out),
    })
}
