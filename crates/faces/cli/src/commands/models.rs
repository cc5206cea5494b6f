//! `toolshed models add|list|remove`: model endpoints kept in the store beside the
//! `[models.<id>]` of the configuration, for agent definitions to name in `credential`. The key
//! is read from an environment variable or standard input (never from a flag, which would land
//! in shell history) and sealed with the server's secret key, as stored sources' secrets are; a
//! running server uses a new or changed endpoint from its next run.

use std::process::ExitCode;

use anyhow::{bail, Context};
use serde_json::json;
use toolshed_engine::runtime_models::{stored_model, ModelSecrets, NewModel};

use crate::app::{open_store, secret_box, source_store};
use crate::config::Config;

#[derive(clap::Subcommand, Debug)]
pub enum ModelsAction {
    /// Add (or replace) a model endpoint.
    Add {
        /// The id agent definitions name in `credential`.
        id: String,
        /// The wire format: openai (Chat Completions) or anthropic (Messages).
        #[arg(long)]
        kind: String,
        /// The API's base URL (default: the provider's public API).
        #[arg(long)]
        base_url: Option<String>,
        /// Read the API key from this environment variable.
        #[arg(long, value_name = "NAME", conflicts_with = "api_key_stdin")]
        api_key_env: Option<String>,
        /// Read the API key from standard input.
        #[arg(long)]
        api_key_stdin: bool,
        /// An extra header sent with every request, `Name: value` (repeatable).
        #[arg(long = "header", value_name = "NAME: VALUE")]
        headers: Vec<String>,
        /// The whole request, stream included, in milliseconds.
        #[arg(long, default_value_t = 120_000)]
        timeout_ms: u64,
        /// Let the base URL be on a loopback or private address (a local Ollama or vLLM).
        #[arg(long)]
        allow_private: bool,
    },
    /// The model endpoints of the configuration and of the store (never their keys).
    List,
    /// Remove a stored model endpoint.
    Remove { id: String },
}

/// Runs a `models` verb on the store (no server is built).
pub async fn run(
    config: &Config,
    action: ModelsAction,
    json_out: bool,
) -> anyhow::Result<ExitCode> {
    let store = open_store(config).await?;
    // Refuses a secret key that is not the one this database was set up with.
    source_store(config, &store).await?;
    let code = match action {
        ModelsAction::Add {
            id,
            kind,
            base_url,
            api_key_env,
            api_key_stdin,
            headers,
            timeout_ms,
            allow_private,
        } => {
            if config.models.contains_key(&id) {
                bail!(
                    "model '{id}' is configured in toolshed.toml ([models.{id}]): change it there"
                );
            }
            let api_key = match (api_key_env, api_key_stdin) {
                (Some(name), _) => Some(std::env::var(&name).with_context(|| {
                    format!("--api-key-env {name}: the environment variable is not set")
                })?),
                (None, true) => Some(read_key()?),
                (None, false) => None,
            };
            let headers = headers
                .iter()
                .map(|h| match h.split_once(':') {
                    Some((k, v))
                        if axum::http::HeaderName::from_bytes(k.trim().as_bytes()).is_ok()
                            && axum::http::HeaderValue::from_str(v.trim()).is_ok() =>
                    {
                        Ok((k.trim().to_string(), v.trim().to_string()))
                    }
                    _ => bail!(
                        "--header '{}': write it as 'Name: value' with a valid header name and value",
                        h.split(':').next().unwrap_or_default()
                    ),
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            let new = NewModel {
                id: id.clone(),
                kind,
                base_url,
                secrets: ModelSecrets { api_key, headers },
                timeout_ms,
                allow_private,
            };
            let sealer = secret_box(config)?;
            let row = stored_model(new, &sealer).map_err(anyhow::Error::msg)?;
            store.put_model(&row).await?;
            if json_out {
                outln!("{}", json!({"added": id, "kind": row.kind}));
            } else {
                outln!(
                    "model '{id}' ({}) stored; running servers use it from their next run",
                    row.kind
                );
            }
            ExitCode::SUCCESS
        }
        ModelsAction::List => {
            let stored = store.list_models().await?;
            let mut list: Vec<serde_json::Value> = config
                .models
                .iter()
                .map(|(id, m)| json!({"id": id, "kind": m.kind, "baseUrl": m.base_url, "source": "config"}))
                .collect();
            list.extend(stored.iter().filter(|m| !config.models.contains_key(&m.id)).map(|m| {
                json!({"id": m.id, "kind": m.kind, "baseUrl": m.base_url, "source": "store"})
            }));
            if json_out {
                outln!(
                    "{}",
                    serde_json::to_string_pretty(&json!({"models": list}))?
                );
            } else if list.is_empty() {
                outln!("no models");
            } else {
                for m in list {
                    outln!(
                        "{:<20} {:<10} {:<7} {}",
                        m["id"].as_str().unwrap_or_default(),
                        m["kind"].as_str().unwrap_or_default(),
                        m["source"].as_str().unwrap_or_default(),
                        m["baseUrl"].as_str().unwrap_or("(the provider's API)")
                    );
                }
            }
            ExitCode::SUCCESS
        }
        ModelsAction::Remove { id } => {
            if !store.delete_model(&id).await? {
                bail!("no stored model '{id}' (toolshed models list shows them)");
            }
            if json_out {
                outln!("{}", json!({"removed": id}));
            } else {
                outln!("removed model '{id}'");
            }
            ExitCode::SUCCESS
        }
    };
    store.close().await;
    Ok(code)
}

/// The key from standard input: its first line, trimmed.
fn read_key() -> anyhow::Result<String> {
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .context("reading the API key from standard input")?;
    let key = line.trim().to_string();
    if key.is_empty() {
        bail!("--api-key-stdin: standard input held no key");
    }
    Ok(key)
}
