//! The n8n plugin with the whole public API: the hand-written tools of `toolshed-n8n` plus
//! every other operation of its bundled OpenAPI document, imported under the same `n8n`
//! namespace with `X-N8N-API-KEY` auth and the `<base_url>/api/v1` base URL.
//!
//! Hand-written tools win: operations listed by [`toolshed_n8n::hand_written_paths`] are removed
//! from the document before import, and an imported tool whose path equals a hand-written
//! tool's path is dropped (with a warning).

use std::collections::HashSet;
use std::time::Duration;

use serde_json::Value;
use toolshed_core::Plugin;
use toolshed_openapi::ImportOptions;
use toolshed_outbound::{ApiKeyLocation, AuthConfig, Outbound, OutboundConfig, Secret};

use crate::error::SourcesError;
use crate::load::import_openapi_blocking;

/// The header n8n's public API reads its key from.
pub const API_KEY_HEADER: &str = "X-N8N-API-KEY";

/// How to reach an n8n instance (the key already resolved).
#[derive(Clone)]
pub struct N8nSettings {
    pub base_url: String,
    pub api_key: String,
    pub allow_private: bool,
    pub timeout: Duration,
}

impl std::fmt::Debug for N8nSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("N8nSettings")
            .field("base_url", &self.base_url)
            .field("api_key", &"[REDACTED]")
            .field("allow_private", &self.allow_private)
            .finish()
    }
}

/// The plugin and what the import of the rest of the API said.
#[derive(Debug)]
pub struct N8nPlugin {
    /// Hand-written and imported tools, all under `n8n.`.
    pub plugin: Plugin,
    /// How many tools came from the OpenAPI import.
    pub imported: usize,
    pub warnings: Vec<String>,
}

/// Removes the `METHOD /path` operations in `drop` from an OpenAPI document.
pub fn without_operations(doc: &Value, drop: &[&str]) -> Value {
    let mut doc = doc.clone();
    let drop: HashSet<(String, String)> = drop
        .iter()
        .filter_map(|op| op.split_once(' '))
        .map(|(m, p)| (m.to_ascii_lowercase(), p.to_string()))
        .collect();
    if let Some(paths) = doc.get_mut("paths").and_then(Value::as_object_mut) {
        for (path, item) in paths.iter_mut() {
            if let Some(item) = item.as_object_mut() {
                item.retain(|method, _| !drop.contains(&(method.clone(), path.clone())));
            }
        }
        paths.retain(|_, item| {
            item.as_object().is_none_or(|o| {
                o.keys().any(|k| {
                    matches!(
                        k.as_str(),
                        "get" | "put" | "post" | "delete" | "options" | "head" | "patch" | "trace"
                    )
                })
            })
        });
    }
    doc
}

/// Builds the n8n plugin with every operation of the public API reachable.
pub async fn n8n_plugin(settings: &N8nSettings) -> Result<N8nPlugin, SourcesError> {
    let name = toolshed_n8n::PLUGIN_ID;
    let mut plugin = toolshed_n8n::plugin(toolshed_n8n::N8nConfig {
        base_url: settings.base_url.clone(),
        api_key: settings.api_key.clone(),
        timeout: settings.timeout,
        allow_private: settings.allow_private,
    })
    .map_err(|e| SourcesError::invalid(name, e.to_string()))?;
    let doc = toolshed_openapi::parse_document(toolshed_n8n::public_api_spec())
        .map_err(|e| SourcesError::import(name, format!("bundled public API document: {e}")))?;
    let doc = without_operations(&doc, &toolshed_n8n::hand_written_paths());
    let outbound = Outbound::new(OutboundConfig {
        timeout: settings.timeout,
        allow_private: settings.allow_private,
        ..OutboundConfig::default()
    })
    .map_err(|e| SourcesError::import(name, e))?;
    let opts = ImportOptions {
        namespace: name.to_string(),
        // The document's servers are relative (`/api/v1`), so the base URL is always given.
        base_url: Some(toolshed_n8n::client::api_base(&settings.base_url)),
        auth: AuthConfig::ApiKey {
            location: ApiKeyLocation::Header,
            name: API_KEY_HEADER.to_string(),
            value: Secret::new(settings.api_key.clone()),
        },
        outbound: Some(outbound),
        ..ImportOptions::default()
    };
    let loaded = import_openapi_blocking(name, doc, opts).await?;
    let hand: HashSet<String> = plugin
        .tools
        .iter()
        .map(|t| t.def.path.to_string())
        .collect();
    let mut warnings = loaded.warnings;
    let mut imported = 0;
    for t in loaded.tools {
        if hand.contains(t.def.path.as_str()) {
            warnings.push(format!(
                "imported n8n tool '{}' has the path of a hand-written tool and was dropped",
                t.def.path
            ));
            continue;
        }
        imported += 1;
        plugin.tools.push(t);
    }
    Ok(N8nPlugin {
        plugin,
        imported,
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn listed_operations_are_removed() {
        let doc = json!({"openapi": "3.0.0", "paths": {
            "/a": {"get": {}, "post": {}, "parameters": []},
            "/b": {"delete": {}, "parameters": []},
        }});
        let out = without_operations(&doc, &["POST /a", "DELETE /b"]);
        assert!(out["paths"]["/a"]["get"].is_object());
        assert!(out["paths"]["/a"].get("post").is_none());
        assert!(
            out["paths"].get("/b").is_none(),
            "an item without operations goes"
        );
    }
}
