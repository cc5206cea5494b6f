//! `toolshed sources list`: stored and config-file sources with their state.

use super::add::location;
use super::*;

pub(super) async fn list(
    config: &Config,
    sources: &SourceStore,
    json_out: bool,
) -> anyhow::Result<ExitCode> {
    let mut rows = Vec::new();
    for s in &config.sources {
        rows.push((s.redacted(), "config", None, None));
    }
    for r in sources.list().await? {
        match r {
            Ok(s) => rows.push((s.spec.redacted(), "store", Some(s.updated_at), None)),
            Err((name, e)) => rows.push((
                SourceSpec::Openapi(OpenApiSpec {
                    name,
                    ..Default::default()
                }),
                "store",
                None,
                Some(e.to_string()),
            )),
        }
    }
    if json_out {
        let items: Vec<Value> = rows
            .iter()
            .map(|(spec, origin, updated, error)| {
                json!({
                    "name": spec.name(),
                    "kind": spec.kind(),
                    "origin": origin,
                    "location": location(spec),
                    "updated_at": updated,
                    "error": error,
                    "spec": spec,
                })
            })
            .collect();
        print_json(&json!({"sources": items}))?;
    } else if rows.is_empty() {
        outln!("no sources (add one with `toolshed sources add openapi|graphql|mcp NAME ...`)");
    } else {
        for (spec, origin, _, error) in &rows {
            match error {
                Some(e) => outln!("{}  {origin}  unreadable: {e}", spec.name()),
                None => outln!(
                    "{}  {}  {origin}  {}",
                    spec.name(),
                    spec.kind(),
                    location(spec)
                ),
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
