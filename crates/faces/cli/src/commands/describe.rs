//! `toolshed describe PATH`: one tool's compact text and example call (`--schemas`: the raw
//! JSON Schemas too).

use std::process::ExitCode;

use toolshed_engine::Caller;

use super::report::report_error;
use crate::app::App;

pub fn run(
    app: &App,
    caller: &Caller,
    path: &str,
    schemas: bool,
    json_out: bool,
) -> anyhow::Result<ExitCode> {
    let d = match app.engine.describe(caller, path, schemas) {
        Ok(d) => d,
        Err(e) => return Ok(report_error(&e, json_out)),
    };
    if json_out {
        outln!("{}", serde_json::to_string_pretty(&d)?);
        return Ok(ExitCode::SUCCESS);
    }
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
    Ok(ExitCode::SUCCESS)
}
