//! `toolshed sources remove`: deletes a stored source.

use super::*;

pub(super) async fn remove(
    config: &Config,
    sources: &SourceStore,
    name: &str,
    json_out: bool,
) -> anyhow::Result<ExitCode> {
    if sources.remove(name).await? {
        if json_out {
            print_json(&json!({"name": name, "removed": true}))?;
        } else {
            outln!("removed source '{name}'");
        }
        return Ok(ExitCode::SUCCESS);
    }
    let message = if config.sources.iter().any(|s| s.name() == name) {
        format!("source '{name}' is declared in the config file; edit the file to remove it")
    } else {
        format!("no stored source named '{name}'")
    };
    Ok(fail(json_out, name, &message))
}
