//! `toolshed sources ...`: add (validated by importing first), list, remove and refresh the tool
//! sources kept in the store. Config-file sources (`[[sources]]`) are listed and refreshed too,
//! but only the config file changes them.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::{json, Value};
use toolshed_sources::{
    dry_run, AuthSpec, GraphqlSpec, KeyLocation, McpSpec, OpenApiSpec, OverrideSpec, Progress,
    Report, SourceSpec, SourceStore,
};

use crate::app::{open_store, source_store};
use crate::config::Config;

/// Imports with more operations than this show a progress bar (on a terminal).
pub const PROGRESS_THRESHOLD: usize = 200;

// Parsed once per process; boxing the large variant would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
pub enum SourcesAction {
    /// Add a source; it is imported first and only stored when the import succeeds.
    Add {
        #[command(subcommand)]
        kind: AddKind,
    },
    /// List the sources of the config file and of the store (secrets are never shown).
    List,
    /// Remove a stored source.
    Remove { name: String },
    /// Import sources again (all, or one) and report their counts; re-validates stored specs.
    Refresh { name: Option<String> },
}

#[derive(Subcommand)]
pub enum AddKind {
    /// An OpenAPI 2.0 / 3.0 / 3.1 document (JSON or YAML).
    Openapi {
        name: String,
        /// File path or http(s) URL of the document.
        #[arg(long)]
        spec: String,
        /// Replaces the document's servers.
        #[arg(long)]
        base_url: Option<String>,
        /// `Authorization: Bearer` token (`env:VAR` reads it from the environment).
        #[arg(long, value_name = "TOKEN", conflicts_with = "api_key_header")]
        bearer: Option<String>,
        /// An API key header, e.g. `X-Api-Key=env:PETS_KEY`.
        #[arg(long, value_name = "NAME=VALUE")]
        api_key_header: Option<String>,
        #[arg(long, value_name = "MS")]
        timeout_ms: Option<u64>,
        #[command(flatten)]
        common: CommonAdd,
    },
    /// A GraphQL API: schema from SDL, an introspection file, or the live endpoint.
    Graphql {
        name: String,
        /// Schema definition language file.
        #[arg(long, conflicts_with = "introspection")]
        sdl: Option<PathBuf>,
        /// Introspection result file (JSON).
        #[arg(long)]
        introspection: Option<PathBuf>,
        /// Where calls go (and what is introspected without --sdl/--introspection).
        #[arg(long)]
        endpoint: Option<String>,
        /// `Authorization: Bearer` token (`env:VAR` allowed).
        #[arg(long, value_name = "TOKEN")]
        bearer: Option<String>,
        /// Extra header on every request (`env:VAR` allowed in the value).
        #[arg(long = "header", value_name = "NAME=VALUE")]
        headers: Vec<String>,
        #[arg(long)]
        selection_depth: Option<usize>,
        #[command(flatten)]
        common: CommonAdd,
    },
    /// An upstream MCP server: a stdio command or a streamable HTTP URL.
    Mcp {
        name: String,
        /// The server command (stdio).
        #[arg(long, conflicts_with = "url", required_unless_present = "url")]
        command: Option<String>,
        /// One argument of the command (repeat for more).
        #[arg(long = "arg", value_name = "ARG", allow_hyphen_values = true)]
        args: Vec<String>,
        /// Extra environment of the command (`env:VAR` allowed in the value).
        #[arg(long = "env", value_name = "NAME=VALUE")]
        env: Vec<String>,
        /// Working directory of the command.
        #[arg(long)]
        cwd: Option<PathBuf>,
        /// The streamable HTTP endpoint.
        #[arg(long)]
        url: Option<String>,
        /// Extra HTTP header (`env:VAR` allowed in the value).
        #[arg(long = "header", value_name = "NAME=VALUE")]
        headers: Vec<String>,
        #[command(flatten)]
        common: CommonAdd,
    },
}

/// Flags every `sources add` takes.
#[derive(Args, Debug)]
pub struct CommonAdd {
    /// Permit loopback and private addresses.
    #[arg(long)]
    allow_private: bool,
    /// Print every tool and warning the import would create; store nothing.
    #[arg(long)]
    dry_run: bool,
    /// Replace a stored source of the same name.
    #[arg(long)]
    replace: bool,
    /// Hide the tools matching this dot-glob (repeatable).
    #[arg(long, value_name = "PATTERN")]
    hide: Vec<String>,
    /// Mark the tools matching this dot-glob read-only (repeatable).
    #[arg(long, value_name = "PATTERN")]
    read_only: Vec<String>,
    /// Mark the tools matching this dot-glob destructive (repeatable).
    #[arg(long, value_name = "PATTERN")]
    destructive: Vec<String>,
}

impl CommonAdd {
    fn overrides(&self) -> Vec<OverrideSpec> {
        let mut out = Vec::new();
        for p in &self.hide {
            out.push(OverrideSpec {
                pattern: p.clone(),
                hidden: true,
                ..Default::default()
            });
        }
        for p in &self.read_only {
            out.push(OverrideSpec {
                pattern: p.clone(),
                read_only: Some(true),
                ..Default::default()
            });
        }
        for p in &self.destructive {
            out.push(OverrideSpec {
                pattern: p.clone(),
                destructive: Some(true),
                ..Default::default()
            });
        }
        out
    }
}

fn pair(text: &str, flag: &str) -> anyhow::Result<(String, String)> {
    match text.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => bail!("{flag} expects NAME=VALUE, got '{text}'"),
    }
}

/// The spec an `add` describes, relative paths made absolute.
fn spec_of(kind: &AddKind) -> anyhow::Result<(SourceSpec, &CommonAdd)> {
    let (mut spec, common) = match kind {
        AddKind::Openapi {
            name,
            spec,
            base_url,
            bearer,
            api_key_header,
            timeout_ms,
            common,
        } => {
            let auth = match (bearer, api_key_header) {
                (Some(t), _) => Some(AuthSpec::Bearer { token: t.clone() }),
                (None, Some(h)) => {
                    let (k, v) = pair(h, "--api-key-header")?;
                    Some(AuthSpec::ApiKey {
                        name: k,
                        value: v,
                        location: KeyLocation::Header,
                    })
                }
                (None, None) => None,
            };
            let s = OpenApiSpec {
                name: name.clone(),
                spec: spec.clone(),
                base_url: base_url.clone(),
                auth,
                allow_private: common.allow_private,
                timeout_ms: *timeout_ms,
                overrides: common.overrides(),
            };
            (SourceSpec::Openapi(s), common)
        }
        AddKind::Graphql {
            name,
            sdl,
            introspection,
            endpoint,
            bearer,
            headers,
            selection_depth,
            common,
        } => {
            let Some(endpoint) = endpoint.clone() else {
                bail!("GraphQL sources need --endpoint URL: calls are sent there");
            };
            let s = GraphqlSpec {
                name: name.clone(),
                sdl: sdl.as_ref().map(|p| p.display().to_string()),
                introspection: introspection.as_ref().map(|p| p.display().to_string()),
                endpoint,
                headers: headers
                    .iter()
                    .map(|h| pair(h, "--header"))
                    .collect::<anyhow::Result<_>>()?,
                auth: bearer
                    .as_ref()
                    .map(|t| AuthSpec::Bearer { token: t.clone() }),
                selection_depth: *selection_depth,
                allow_private: common.allow_private,
                timeout_ms: None,
                overrides: common.overrides(),
            };
            (SourceSpec::Graphql(s), common)
        }
        AddKind::Mcp {
            name,
            command,
            args,
            env,
            cwd,
            url,
            headers,
            common,
        } => {
            let s = McpSpec {
                name: name.clone(),
                command: command.clone(),
                args: args.clone(),
                env: env
                    .iter()
                    .map(|h| pair(h, "--env"))
                    .collect::<anyhow::Result<_>>()?,
                cwd: cwd.clone(),
                url: url.clone(),
                headers: headers
                    .iter()
                    .map(|h| pair(h, "--header"))
                    .collect::<anyhow::Result<_>>()?,
                allow_private: common.allow_private,
                overrides: common.overrides(),
                ..Default::default()
            };
            (SourceSpec::Mcp(s), common)
        }
    };
    spec.absolutize(&std::env::current_dir().context("reading the working directory")?);
    Ok((spec, common))
}

/// A progress callback drawing an `indicatif` bar on stderr, only when stderr is a terminal and
/// the import has more than [`PROGRESS_THRESHOLD`] operations.
fn progress_bar(label: &str) -> Option<Progress> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let bar: Arc<Mutex<Option<ProgressBar>>> = Arc::default();
    let label = label.to_string();
    Some(Arc::new(move |done, total| {
        if total <= PROGRESS_THRESHOLD {
            return;
        }
        let mut slot = bar.lock().unwrap_or_else(|p| p.into_inner());
        let pb = slot.get_or_insert_with(|| {
            let pb =
                ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stderr());
            if let Ok(style) =
                ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} operations")
            {
                pb.set_style(style.progress_chars("=> "));
            }
            pb.set_message(format!("importing {label}"));
            pb
        });
        pb.set_position(done as u64);
        if done >= total {
            pb.finish_and_clear();
        }
    }))
}

fn print_json(v: &Value) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}

fn print_report(report: &Report) {
    for t in &report.tools {
        let flag = if t.destructive {
            " [destructive]"
        } else if t.read_only {
            " [read-only]"
        } else {
            ""
        };
        println!("  {}{flag}  {}", t.path, t.name);
    }
    for w in &report.warnings {
        println!("  warning: {w}");
    }
}

/// Runs one `sources` verb.
pub async fn run(
    config: &Config,
    action: SourcesAction,
    json_out: bool,
) -> anyhow::Result<ExitCode> {
    let store = open_store(config).await?;
    let sources = source_store(config, &store)?;
    let code = match action {
        SourcesAction::Add { kind } => add(config, &sources, &kind, json_out).await?,
        SourcesAction::List => list(config, &sources, json_out).await?,
        SourcesAction::Remove { name } => remove(config, &sources, &name, json_out).await?,
        SourcesAction::Refresh { name } => refresh(config, &sources, name, json_out).await?,
    };
    store.close().await;
    Ok(code)
}

/// Namespaces of the plugins a source may not take.
fn plugin_namespaces(config: &Config) -> Vec<&'static str> {
    let mut out = vec!["tables"];
    if config.n8n.is_some() {
        out.push("n8n");
    }
    out
}

fn fail(json_out: bool, name: &str, message: &str) -> ExitCode {
    if json_out {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({"name": name, "error": message}))
                .unwrap_or_default()
        );
    } else {
        eprintln!("error: {message}");
    }
    ExitCode::from(1)
}

async fn add(
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
        let e = toolshed_sources::SourcesError::DuplicateName {
            name: name.clone(),
            first: toolshed_sources::Origin::Config.to_string(),
            second: toolshed_sources::Origin::Store.to_string(),
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
            println!(
                "dry run: '{name}' would add {} tools ({} warnings); nothing stored",
                report.tools.len(),
                report.warnings.len()
            );
            print_report(&report);
        } else {
            println!(
                "added {} source '{name}': {} tools, {} warnings",
                spec.kind(),
                report.tools.len(),
                report.warnings.len()
            );
            for w in &report.warnings {
                println!("  warning: {w}");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Where a source's tools come from, for listings.
fn location(spec: &SourceSpec) -> String {
    match spec {
        SourceSpec::Openapi(s) => s.spec.clone(),
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

async fn list(config: &Config, sources: &SourceStore, json_out: bool) -> anyhow::Result<ExitCode> {
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
        println!("no sources (add one with `toolshed sources add openapi|graphql|mcp NAME ...`)");
    } else {
        for (spec, origin, _, error) in &rows {
            match error {
                Some(e) => println!("{}  {origin}  unreadable: {e}", spec.name()),
                None => println!(
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

async fn remove(
    config: &Config,
    sources: &SourceStore,
    name: &str,
    json_out: bool,
) -> anyhow::Result<ExitCode> {
    if sources.remove(name).await? {
        if json_out {
            print_json(&json!({"name": name, "removed": true}))?;
        } else {
            println!("removed source '{name}'");
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

async fn refresh(
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
                Some(e) => println!("{}: FAILED: {e}", r["name"].as_str().unwrap_or_default()),
                None => println!(
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(subcommand)]
        action: SourcesAction,
    }

    fn parse(args: &[&str]) -> SourcesAction {
        T::try_parse_from(std::iter::once("t").chain(args.iter().copied()))
            .unwrap()
            .action
    }

    #[test]
    fn openapi_add_flags_make_a_spec() {
        let SourcesAction::Add { kind } = parse(&[
            "add",
            "openapi",
            "pets",
            "--spec",
            "/x/p.json",
            "--base-url",
            "http://h/v2",
            "--api-key-header",
            "X-Key=env:K",
            "--hide",
            "pets.store.*",
            "--allow-private",
        ]) else {
            panic!("expected add");
        };
        let (spec, common) = spec_of(&kind).unwrap();
        assert!(common.allow_private && !common.dry_run);
        let SourceSpec::Openapi(o) = spec else {
            panic!("expected openapi")
        };
        assert_eq!(o.spec, "/x/p.json");
        assert_eq!(
            o.auth,
            Some(AuthSpec::ApiKey {
                name: "X-Key".into(),
                value: "env:K".into(),
                location: KeyLocation::Header
            })
        );
        assert!(o.overrides[0].hidden);
    }

    #[test]
    fn mcp_needs_a_command_or_a_url() {
        assert!(T::try_parse_from(["t", "add", "mcp", "m"]).is_err());
        assert!(T::try_parse_from([
            "t",
            "add",
            "mcp",
            "m",
            "--command",
            "c",
            "--url",
            "http://h"
        ])
        .is_err());
        let SourcesAction::Add { kind } = parse(&[
            "add",
            "mcp",
            "m",
            "--command",
            "srv",
            "--arg",
            "--flag",
            "--env",
            "A=1",
        ]) else {
            panic!("expected add");
        };
        let (spec, _) = spec_of(&kind).unwrap();
        let SourceSpec::Mcp(m) = spec else {
            panic!("expected mcp")
        };
        assert_eq!(m.args, vec!["--flag"]);
        assert_eq!(m.env.get("A").map(String::as_str), Some("1"));
    }

    #[test]
    fn bad_pairs_and_missing_endpoints_are_clear() {
        let SourcesAction::Add { kind } = parse(&["add", "graphql", "g", "--sdl", "s.graphql"])
        else {
            panic!("expected add");
        };
        assert!(spec_of(&kind)
            .unwrap_err()
            .to_string()
            .contains("--endpoint"));
        assert!(pair("novalue", "--header").is_err());
    }
}
