//! `toolshed sources add`: imports the source first (a dry run) and stores it only when it
//! imports.

use super::*;

pub(super) async fn add(
    config: &Config,
    sources: &SourceStore,
    kind: &AddKind,
    json_out: bool,
) -> anyhow::Result<ExitCode> {
    let (spec, common) = spec_of(kind)?;
    let name = spec.name().to_string();
    if let Err(e) = spec.validate() {
        return Ok(fail(json_out, &name, &e.to_string()));
    }
    if config.sources.iter().any(|s| s.name() == name) {
        let e = toolshed_registry::SourcesError::DuplicateName {
            name: name.clone(),
            first: toolshed_registry::Origin::Config.to_string(),
            second: toolshed_registry::Origin::Store.to_string(),
        };
        return Ok(fail(json_out, &name, &e.to_string()));
    }
    if plugin_namespaces(config).contains(&name.as_str()) {
        return Ok(fail(
            json_out,
            &name,
            &format!("'{name}' is the namespace of a plugin; choose another name"),
        ));
    }
    if !common.dry_run && !common.replace && sources.get(&name).await.is_ok() {
        return Ok(fail(
            json_out,
            &name,
            &format!("source '{name}' already exists; remove it first or pass --replace"),
        ));
    }
    if let Some(ok) = waits_for_a_person(&spec, common, sources, json_out).await? {
        return Ok(ok);
    }
    let report = match dry_run(&spec, progress_bar(&name)).await {
        Ok(r) => r,
        Err(e) => return Ok(fail(json_out, &name, &format!("{e} (nothing was stored)"))),
    };
    let stored = !common.dry_run;
    if stored {
        sources.put(&spec).await?;
    }
    if json_out {
        print_json(&json!({
            "name": name,
            "kind": spec.kind(),
            "stored": stored,
            "tools": report.tools,
            "warnings": report.warnings,
        }))?;
    } else {
        if common.dry_run {
            outln!(
                "dry run: '{name}' would add {} tools ({} warnings); nothing stored",
                report.tools.len(),
                report.warnings.len()
            );
            print_report(&report);
        } else {
            outln!(
                "added {} source '{name}': {} tools, {} warnings",
                spec.kind(),
                report.tools.len(),
                report.warnings.len()
            );
            for w in &report.warnings {
                outln!("  warning: {w}");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// An upstream whose authorization code a person approves cannot be imported here: nobody is
/// there to approve. It is stored unimported (not with --dry-run); `toolshed serve` prints the
/// link to approve at, and loads it once approved. `None` for every other source.
async fn waits_for_a_person(
    spec: &SourceSpec,
    common: &flags::CommonAdd,
    sources: &SourceStore,
    json_out: bool,
) -> anyhow::Result<Option<ExitCode>> {
    if !super::refresh::needs_a_person(spec) {
        return Ok(None);
    }
    let name = spec.name();
    let note = "a person authorizes Toolshed at the upstream's authorization server first: `toolshed serve` prints the link (and logs it), then imports the tools";
    if common.dry_run {
        return Ok(Some(fail(
            json_out,
            name,
            &format!("a dry run cannot import it: {note}"),
        )));
    }
    sources.put(spec).await?;
    if json_out {
        print_json(&json!({
            "name": name,
            "kind": spec.kind(),
            "stored": true,
            "tools": [],
            "warnings": [note],
        }))?;
    } else {
        outln!("added mcp source '{name}' (not imported yet): {note}");
    }
    Ok(Some(ExitCode::SUCCESS))
}

/// Where a source's tools come from, for listings.
pub(super) fn location(spec: &SourceSpec) -> String {
    match spec {
        SourceSpec::Openapi(s) => s.location.clone(),
        SourceSpec::Graphql(s) => match (&s.sdl, &s.introspection) {
            (Some(p), _) | (None, Some(p)) => format!("{p} -> {}", s.endpoint),
            _ => s.endpoint.clone(),
        },
        SourceSpec::Mcp(s) => match (&s.command, &s.url) {
            (Some(c), _) => std::iter::once(c.clone())
                .chain(s.args.iter().cloned())
                .collect::<Vec<_>>()
                .join(" "),
            (None, Some(u)) => u.clone(),
            _ => String::new(),
        },
    }
}
