//! `toolshed sources refresh`: re-imports sources and reports what changed. An upstream whose
//! OAuth a person approves is not imported here (nobody is here to approve): a stored one is
//! re-written, so that a running server imports it again.

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
        if needs_a_person(&spec) {
            // Nobody is here to approve: the running server imports it with its kept token.
            if origin == "store" {
                sources.put(&spec).await?;
            }
            results.push(json!({
                "name": name, "kind": spec.kind(), "origin": origin,
                "deferred": "a person approves its OAuth: `toolshed serve` imports it (with the token kept from the last approval, or after the link it reports is approved)",
            }));
            continue;
        }
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
            let name = r["name"].as_str().unwrap_or_default();
            if let Some(why) = r.get("deferred").and_then(Value::as_str) {
                outln!("{name}: not imported here: {why}");
                continue;
            }
            match r.get("error").and_then(Value::as_str) {
                Some(e) => outln!("{name}: FAILED: {e}"),
                None => outln!(
                    "{name} ({}): {} tools, {} warnings",
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

/// An upstream whose authorization code a person approves: this command cannot import it.
pub(super) fn needs_a_person(spec: &SourceSpec) -> bool {
    matches!(spec, SourceSpec::Mcp(m) if m.oauth.as_ref().is_some_and(|o| o.needs_a_person()))
}
