//! The n8n integration: the hand-written tools of the n8n plugin (`toolshed-n8n`) plus every
//! other operation of n8n's public API, imported from the bundled OpenAPI document
//! ([`public_api_spec`], n8n 2.41.1) under the same `n8n` namespace with `X-N8N-API-KEY` auth and
//! the `<base_url>/api/v1` base URL.
//!
//! It sits above the plugin and the sources registry (whose OpenAPI import it runs), so neither
//! of them depends on the other.
//!
//! Hand-written tools win: operations listed by [`toolshed_n8n::hand_written_paths`] are removed
//! from the document before import, and an imported tool whose path equals a hand-written
//! tool's path is dropped (with a warning). Together they cover all 154 operations of the
//! bundled 2.41.1 document.
//!
//! Imported operations use the same transport rules as the hand-written client: no redirect is
//! followed (the `X-N8N-API-KEY` header would go with it to wherever it points) and reply bodies
//! are capped at [`toolshed_n8n::DEFAULT_MAX_RESPONSE_BYTES`].
//!
//! Imported operations are renamed and classed like the hand-written tools ([`names`]): one
//! `n8n.<resources>.<verb>` namespace with one approval rule.

pub mod names;

use std::collections::HashSet;
use std::time::Duration;

use serde_json::Value;
use toolshed_core::Plugin;
use toolshed_openapi::ImportOptions;
use toolshed_outbound::{ApiKeyLocation, AuthConfig, Outbound, OutboundConfig, Secret};

pub use toolshed_n8n::{cleartext_warning, N8nLogin};

use toolshed_registry::{import_openapi_blocking, SourcesError};

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

/// n8n's public API OpenAPI document ([`toolshed_n8n::N8N_API_VERSION`], bundled YAML), for
/// importing the operations the hand-written tools do not cover.
pub fn public_api_spec() -> &'static str {
    include_str!("../spec/openapi-n8n-2.41.1-bundled.yml")
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

/// The transport of the imported operations: never follow a redirect (the API key header would
/// go with it), cap reply bodies like the hand-written client does.
pub fn imported_outbound_config(settings: &N8nSettings) -> OutboundConfig {
    OutboundConfig {
        timeout: settings.timeout,
        allow_private: settings.allow_private,
        max_redirects: 0,
        max_response_bytes: toolshed_n8n::DEFAULT_MAX_RESPONSE_BYTES,
        ..OutboundConfig::default()
    }
}

/// Builds the n8n plugin with every operation of the public API reachable.
pub async fn n8n_plugin(settings: &N8nSettings) -> Result<N8nPlugin, SourcesError> {
    n8n_plugin_with_login(settings, None, None).await
}

/// [`n8n_plugin`] with an optional user login, which gives node discovery the instance's full
/// node catalog (see [`toolshed_n8n::catalog`]).
/// With a `store`, the verification loop's work items are kept there
/// (`n8n.workflows.report_verdict`).
pub async fn n8n_plugin_with_login(
    settings: &N8nSettings,
    login: Option<N8nLogin>,
    store: Option<toolshed_store::Store>,
) -> Result<N8nPlugin, SourcesError> {
    let name = toolshed_n8n::PLUGIN_ID;
    let mut plugin = toolshed_n8n::plugin(toolshed_n8n::N8nConfig {
        timeout: settings.timeout,
        allow_private: settings.allow_private,
        login,
        state: store,
        ..toolshed_n8n::N8nConfig::new(settings.base_url.clone(), settings.api_key.clone())
    })
    .map_err(|e| SourcesError::invalid(name, e.to_string()))?;
    let doc = toolshed_openapi::parse_document(public_api_spec())
        .map_err(|e| SourcesError::import(name, format!("bundled public API document: {e}")))?;
    let doc = without_operations(&doc, &toolshed_n8n::hand_written_paths());
    let (doc, classes) = names::rewrite(&doc, name);
    let outbound = Outbound::new(imported_outbound_config(settings))
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
        let mut t = t;
        if let Some(class) = classes.get(t.def.path.as_str()) {
            t.def.annotations = *class;
        }
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
    use std::sync::{Arc, Mutex};
    use toolshed_core::ToolContext;

    fn settings(base_url: String) -> N8nSettings {
        N8nSettings {
            base_url,
            api_key: "n8n-key-must-not-travel".into(),
            allow_private: true,
            timeout: Duration::from_secs(5),
        }
    }

    /// Hand-written and imported tools together cover every operation of the 2.41.1 document:
    /// the imported ones are exactly the full import minus the hand-written operations.
    #[tokio::test]
    async fn hand_written_and_imported_tools_cover_all_154_operations() {
        let doc = toolshed_openapi::parse_document(public_api_spec()).unwrap();
        assert_eq!(toolshed_openapi::count_operations(&doc), 154);
        let hand = toolshed_n8n::HAND_WRITTEN;
        let rest = without_operations(&doc, &toolshed_n8n::hand_written_paths());
        assert_eq!(
            toolshed_openapi::count_operations(&rest),
            154 - hand.len(),
            "every hand-written operation is in the document, once"
        );
        let s = settings("https://n8n.example.com".into());
        // The full document under the same names as the plugin's import.
        let (renamed, _) = names::rewrite(&doc, "n8n");
        let full = toolshed_openapi::import(
            &renamed,
            &ImportOptions {
                namespace: "n8n".into(),
                base_url: Some("https://n8n.example.com/api/v1".into()),
                ..ImportOptions::default()
            },
        )
        .unwrap();
        assert_eq!(full.tools.len(), 154, "skipped: {:?}", full.skipped);
        let full_paths: HashSet<String> =
            full.tools.iter().map(|t| t.def.path.to_string()).collect();

        let n8n = n8n_plugin(&s).await.unwrap();
        assert!(
            n8n.warnings
                .iter()
                .all(|w| !w.contains("skipped") && !w.contains("dropped") && !w.contains("taken")),
            "{:?}",
            n8n.warnings
        );
        let imported: Vec<&str> = n8n
            .plugin
            .tools
            .iter()
            .filter(|t| t.def.origin == "source:n8n")
            .map(|t| t.def.path.as_str())
            .collect();
        assert_eq!(imported.len(), n8n.imported);
        assert_eq!(n8n.imported + hand.len(), 154);
        assert!(imported.iter().all(|p| full_paths.contains(*p)));
        // One namespace: no singular resource beside a plural one.
        for singular in [
            "n8n.workflow.",
            "n8n.credential.",
            "n8n.data_table.",
            "n8n.user.",
        ] {
            assert!(
                imported.iter().all(|p| !p.starts_with(singular)),
                "{singular}: {imported:?}"
            );
        }
        // Equivalent operations wait alike: an imported publish like the hand-written activate.
        let class = |path: &str| {
            n8n.plugin
                .tools
                .iter()
                .find(|t| t.def.path.as_str() == path)
                .unwrap_or_else(|| panic!("no {path}"))
                .def
                .annotations
        };
        let (publish, activate) = (
            class("n8n.workflows.publish"),
            class("n8n.workflows.activate"),
        );
        assert_eq!(
            (publish.read_only, publish.destructive),
            (activate.read_only, activate.destructive)
        );
        assert!(class("n8n.tags.delete").destructive);
        assert!(class("n8n.tags.list").read_only);
        let written: HashSet<&str> = n8n
            .plugin
            .tools
            .iter()
            .filter(|t| t.def.origin == "plugin:n8n")
            .map(|t| t.def.path.as_str())
            .collect();
        for (op, tool) in hand {
            assert!(
                written.contains(tool),
                "{op} has no hand-written tool {tool}"
            );
        }
        // The full import minus what was imported is one tool per hand-written operation.
        let replaced = full_paths.len() - imported.len();
        assert_eq!(replaced, hand.len());
    }

    /// An imported operation answered with a redirect does not carry the key to its target.
    #[tokio::test]
    async fn imported_operations_do_not_follow_redirects() {
        let hits: Arc<Mutex<Vec<String>>> = Arc::default();
        let log = hits.clone();
        let target = axum::Router::new().fallback(move |h: axum::http::HeaderMap| {
            let log = log.clone();
            async move {
                log.lock().unwrap().push(format!("{h:?}"));
                axum::Json(json!({"id": "t1", "name": "x"}))
            }
        });
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let target_addr = l.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(l, target).await.unwrap() });
        let redirect = axum::Router::new().fallback(move || async move {
            (
                axum::http::StatusCode::TEMPORARY_REDIRECT,
                [(
                    axum::http::header::LOCATION,
                    format!("http://{target_addr}/api/v1/tags"),
                )],
            )
        });
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(l, redirect).await.unwrap() });

        let s = settings(format!("http://{addr}"));
        assert_eq!(imported_outbound_config(&s).max_redirects, 0);
        let n8n = n8n_plugin(&s).await.unwrap();
        let create_tag = n8n
            .plugin
            .tools
            .iter()
            .find(|t| t.def.path.as_str() == "n8n.tags.create")
            .unwrap();
        assert_eq!(create_tag.def.origin, "source:n8n");
        let ctx = ToolContext::new("t".into(), create_tag.def.path.clone());
        let out = create_tag
            .handler
            .call(ctx, json!({"name": "urgent"}))
            .await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(
            hits.lock().unwrap().is_empty(),
            "the redirect was followed: {:?}",
            hits.lock().unwrap()
        );
        let e = out.unwrap_err();
        assert!(
            !e.message.contains("n8n-key-must-not-travel"),
            "{}",
            e.message
        );
    }

    /// The workflow keys the plugin writes are exactly the writable keys of the 2.41.1 schemas.
    #[test]
    fn writable_workflow_keys_match_the_spec() {
        use toolshed_n8n::tools::workflows::{WRITABLE_NODE_KEYS, WRITABLE_SETTINGS};
        let doc = toolshed_openapi::parse_document(public_api_spec()).unwrap();
        let writable = |schema: &str| -> Vec<String> {
            let mut keys: Vec<String> = doc["components"]["schemas"][schema]["properties"]
                .as_object()
                .unwrap()
                .iter()
                .filter(|(_, v)| v["readOnly"] != true)
                .map(|(k, _)| k.clone())
                .collect();
            keys.sort();
            keys
        };
        let sorted = |keys: &[&str]| -> Vec<String> {
            let mut v: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
            v.sort();
            v
        };
        assert_eq!(sorted(WRITABLE_SETTINGS), writable("workflowSettings"));
        assert_eq!(sorted(WRITABLE_NODE_KEYS), writable("node"));
    }

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

    #[test]
    fn hand_written_paths_exist_in_the_bundled_spec() {
        let spec = public_api_spec();
        assert!(spec.contains("openapi"));
        for op in toolshed_n8n::hand_written_paths() {
            let (method, path) = op.split_once(' ').unwrap();
            let key = format!("\n  {path}:\n");
            let at = spec
                .find(&key)
                .unwrap_or_else(|| panic!("{path} not in spec"));
            // The method appears in the path item before the next path.
            let rest = &spec[at + key.len() - 1..];
            let end = rest.find("\n  /").unwrap_or(rest.len());
            assert!(
                rest[..end].contains(&format!("\n    {}:", method.to_ascii_lowercase())),
                "{op} not in spec"
            );
        }
    }
}
