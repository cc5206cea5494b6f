//! Virtual MCP servers defined at runtime, beside `[[servers]]` of the configuration:
//!
//! - `servers.list`: every virtual server, configured (`source: "config"`) and stored
//!   (`source: "store"`), with its definition;
//! - `servers.put {name, description?, tools?, resources?, prompts?, names?}`: checks the
//!   definition as the configuration's are checked ([`toolshed_core::VirtualServer::new`]) and
//!   stores it (a write: confirmed under the default policy);
//! - `servers.delete {name}`: removes a stored server (destructive).
//!
//! A configured name cannot be replaced or deleted here. Running servers serve a stored server
//! at `/mcp/servers/{name}` from their next look at the store (a few seconds).

use std::sync::Arc;

use serde_json::{json, Value};
use toolshed_core::{
    Annotations, Plugin, ServerDef, Tool, ToolDef, ToolError, ToolPath, VirtualServer,
};
use toolshed_store::Store;

/// The plugin over a store, knowing the configured servers.
pub fn plugin(store: Store, configured: Vec<ServerDef>) -> Plugin {
    let shared = Arc::new(Shared { store, configured });
    Plugin::new(
        "servers",
        "Virtual servers",
        "Virtual MCP servers: named views of the catalog at /mcp/servers/{name}.",
    )
    .with_tool(list(shared.clone()))
    .with_tool(put(shared.clone()))
    .with_tool(delete(shared))
}

struct Shared {
    store: Store,
    configured: Vec<ServerDef>,
}

impl Shared {
    fn is_configured(&self, name: &str) -> bool {
        self.configured.iter().any(|s| s.name == name)
    }
}

fn def(path: &str, name: &str, description: &str, ann: Annotations, input: Value) -> ToolDef {
    let mut d = ToolDef::new(
        ToolPath::parse(path).expect("a valid path"),
        name,
        description,
    )
    .with_annotations(ann)
    .with_input(input);
    d.origin = "plugin:servers".into();
    d
}

fn store_error(e: toolshed_store::StoreError) -> ToolError {
    ToolError::internal(format!("the store failed: {e}"))
}

fn name_prop() -> Value {
    json!({"type": "string", "pattern": "^[a-z0-9][a-z0-9_-]{0,63}$", "description": "The server's name: /mcp/servers/{name}"})
}

fn list(shared: Arc<Shared>) -> Tool {
    let d = def(
        "servers.list",
        "List Virtual Servers",
        "Every virtual MCP server: its definition and whether it is configured or stored.",
        Annotations::READ_ONLY,
        json!({"type": "object", "properties": {}, "additionalProperties": false}),
    );
    Tool::from_fn(d, move |_ctx, _args| {
        let shared = shared.clone();
        async move {
            let mut out: Vec<Value> = shared
                .configured
                .iter()
                .map(|s| json!({"source": "config", "server": s}))
                .collect();
            for s in shared.store.list_servers().await.map_err(store_error)? {
                if shared.is_configured(&s.name) {
                    continue;
                }
                let server: Value = serde_json::from_str(&s.definition).unwrap_or(Value::Null);
                out.push(json!({"source": "store", "server": server}));
            }
            Ok(json!({"servers": out}))
        }
    })
}

fn put(shared: Arc<Shared>) -> Tool {
    let glob_list =
        json!({"type": "array", "maxItems": 256, "items": {"type": "string", "maxLength": 512}});
    let d = def(
        "servers.put",
        "Define Virtual Server",
        "Defines (or replaces) a virtual MCP server served at /mcp/servers/{name}: the tools, resources and prompts it exposes (dot-globs over the catalog) and whether it lists them under catalog paths or the upstream's original names (one source only).",
        Annotations::WRITE,
        json!({"type": "object", "properties": {
            "name": name_prop(),
            "description": {"type": "string", "maxLength": 4096},
            "tools": glob_list, "resources": glob_list, "prompts": glob_list,
            "names": {"type": "string", "enum": ["catalog", "original"]}
        }, "required": ["name"], "additionalProperties": false}),
    );
    Tool::from_fn(d, move |_ctx, args| {
        let shared = shared.clone();
        async move {
            let server: ServerDef = serde_json::from_value(args)
                .map_err(|e| ToolError::invalid(format!("not a server definition: {e}")))?;
            if shared.is_configured(&server.name) {
                return Err(ToolError::conflict(format!(
                    "server '{}' is configured in toolshed.toml ([[servers]]): change it there",
                    server.name
                )));
            }
            VirtualServer::new(server.clone()).map_err(|e| ToolError::invalid(e.to_string()))?;
            let text = serde_json::to_string(&server).unwrap_or_default();
            shared
                .store
                .put_server(&server.name, &text)
                .await
                .map_err(store_error)?;
            Ok(
                json!({"ok": true, "name": server.name, "url": format!("/mcp/servers/{}", server.name)}),
            )
        }
    })
}

fn delete(shared: Arc<Shared>) -> Tool {
    let d = def(
        "servers.delete",
        "Delete Virtual Server",
        "Deletes a stored virtual MCP server; its endpoint answers 404 from then on.",
        Annotations::DESTRUCTIVE,
        json!({"type": "object", "properties": {"name": name_prop()}, "required": ["name"], "additionalProperties": false}),
    );
    Tool::from_fn(d, move |_ctx, args| {
        let shared = shared.clone();
        async move {
            let name = args["name"].as_str().unwrap_or_default().to_string();
            if shared.is_configured(&name) {
                return Err(ToolError::conflict(format!(
                    "server '{name}' is configured in toolshed.toml ([[servers]]): remove it there"
                )));
            }
            if !shared
                .store
                .delete_server(&name)
                .await
                .map_err(store_error)?
            {
                return Err(ToolError::not_found(format!("no stored server '{name}'")));
            }
            Ok(json!({"ok": true, "deleted": name}))
        }
    })
}

/// What the store holds that can be served.
pub struct Stored {
    /// Each definition with the `updated_at` it was stored with.
    pub servers: Vec<(Arc<VirtualServer>, i64)>,
    /// Definitions that no longer check (stored by another version), with the reason.
    pub skipped: Vec<String>,
}

/// The stored servers that can be served: each checked again, configured names left out.
pub async fn stored(store: &Store, configured: &[ServerDef]) -> Result<Stored, String> {
    let mut out = Stored {
        servers: vec![],
        skipped: vec![],
    };
    for s in store.list_servers().await.map_err(|e| e.to_string())? {
        if configured.iter().any(|c| c.name == s.name) {
            continue;
        }
        match serde_json::from_str::<ServerDef>(&s.definition)
            .map_err(|e| e.to_string())
            .and_then(|d| VirtualServer::new(d).map_err(|e| e.to_string()))
        {
            Ok(v) => out.servers.push((Arc::new(v), s.updated_at)),
            Err(e) => out
                .skipped
                .push(format!("virtual server '{}' in the store: {e}", s.name)),
        }
    }
    Ok(out)
}
