//! `toolshed audit [--limit N]`: the newest audit entries (arguments already redacted).

use std::process::ExitCode;

use serde_json::json;

use crate::app::App;

pub async fn run(app: &App, limit: i64, json_out: bool) -> anyhow::Result<ExitCode> {
    let entries = app.store.recent_audit(limit.clamp(1, 10_000)).await?;
    if json_out {
        outln!(
            "{}",
            serde_json::to_string_pretty(&json!({"entries": entries}))?
        );
        return Ok(ExitCode::SUCCESS);
    }
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
    Ok(ExitCode::SUCCESS)
}
