//! `toolshed sources refresh`: re-imports sources and reports what changed.

use super::*;

pub(super) async fn refresh(
    config: &Config,
    sources: &SourceStore,
    only: Option<String>,
    json_out: bool,
) -> anyhow::Result<ExitCode> {
    let mut targets: Vec<(SourceSpec, &str)> = config
        .sources
        .iter()
        .map(|s| (s.clone(), "config"))
        .collect();
    let mut unreadable = Vec::new();
    for r in sources.list().await? {
        match r {
            Ok(s) => targets.push((s.spec, "store")),
            Err((name, e)) => unreadable.push((name, e.to_string())),
        }
    }
    if let Some(n) = &only {
        targets.retain(|(s, _)| s.name() == n);
        unreadable.retain(|(name, _)| name == n);
        if targets.is_empty() && unreadable.is_empty() {
            return Ok(fail(json_out, n, &format!("no source named '{n}'")));
        }
    }
    let mut results = Vec::new();
    let mut failed = !unreadable.is_empty();
    for (spec, origin) in targets {
        let name = spec.name().to_string();
        let outcome = dry_run(&spec, progress_bar(&name)).await;
        if outcome.is_ok() && origin == "store" {
            // Re-writing bumps the update time, so running servers re-import it.
            sources.put(&spec).await?;
        }
        match outcome {
            Ok(report) => results.push(json!({
                "name": name, "kind": spec.kind(), "origin": origin,
                "tools": report.tools.len(), "warnings": report.warnings,
            })),
            Err(e) => {
                failed = true;
                results.push(json!({
                    "name": name, "kind": spec.kind(), "origin": origin, "error": e.to_string(),
                }))
            }
        }
    }
    for (name, e) in unreadable {
        results.push(json!({"name": name, "origin": "store", "error": e}));
    }
    if json_out {
        print_json(&json!({"sources": results}))?;
    } else {
        for r in &results {
            match r.get("error").and_then(Value::as_str) {
                Some(e) => outln!("{}: FAILED: {e}", r["name"].as_str().unwrap_or_default()),
                None => outln!(
                    "{} ({}): {} tools, {} warnings",
                    r["name"].as_str().unwrap_or_default(),
                    r["kind"].as_str().unwrap_or_default(),
                    r["tools"],
                    r["warnings"].as_array().map_or(0, Vec::len)
                ),
            }
        }
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
