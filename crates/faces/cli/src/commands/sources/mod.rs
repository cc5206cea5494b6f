//! `toolshed sources ...`: add (validated by importing first), list, remove and refresh the tool
//! sources kept in the store. Config-file sources (`[[sources]]`) are listed and refreshed too,
//! but only the config file changes them.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::{json, Value};
use toolshed_registry::{
    dry_run, AuthSpec, GraphqlSpec, ImportProgress, KeyLocation, McpSpec, OpenApiSpec,
    OverrideSpec, Report, SchemeAuthSpec, SourceSpec, SourceStore,
};

use crate::app::{open_store, source_store};
use crate::config::Config;

mod add;
mod flags;
mod list;
mod refresh;
mod remove;

use flags::spec_of;
pub use flags::AddKind;

/// Imports with more operations than this show a progress bar (on a terminal).
pub const PROGRESS_THRESHOLD: usize = 200;

// Parsed once per process; boxing the large variant would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
pub enum SourcesAction {
    /// Add a source; it is imported first and only stored when the import succeeds.
    Add {
        #[command(subcommand)]
        kind: Box<AddKind>,
    },
    /// List the sources of the config file and of the store (secrets are never shown).
    List,
    /// Remove a stored source.
    Remove { name: String },
    /// Import sources again (all, or one) and report their counts; re-validates stored specs.
    Refresh { name: Option<String> },
}

/// A progress callback drawing an `indicatif` bar on stderr, only when stderr is a terminal and
/// the import has more than [`PROGRESS_THRESHOLD`] operations.
fn progress_bar(label: &str) -> Option<ImportProgress> {
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
    outln!("{}", serde_json::to_string_pretty(v)?);
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
        outln!("  {}{flag}  {}", t.path, t.name);
    }
    for w in &report.warnings {
        outln!("  warning: {w}");
    }
}

/// Runs one `sources` verb.
pub async fn run(
    config: &Config,
    action: SourcesAction,
    json_out: bool,
) -> anyhow::Result<ExitCode> {
    let store = open_store(config).await?;
    let sources = source_store(config, &store).await?;
    let code = match action {
        SourcesAction::Add { kind } => add::add(config, &sources, &kind, json_out).await?,
        SourcesAction::List => list::list(config, &sources, json_out).await?,
        SourcesAction::Remove { name } => remove::remove(config, &sources, &name, json_out).await?,
        SourcesAction::Refresh { name } => {
            refresh::refresh(config, &sources, name, json_out).await?
        }
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
        outln!(
            "{}",
            serde_json::to_string_pretty(&json!({"name": name, "error": message}))
                .unwrap_or_default()
        );
    } else {
        eprintln!("error: {message}");
    }
    ExitCode::from(1)
}
