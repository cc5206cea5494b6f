//! Reading the catalog's upstream resources and prompts from scripts and agents:
//!
//! - `resources.read {path, uri?}`: the resource at `path` (`uri` for a resource template),
//!   `{contents: [...]}` as the upstream answered;
//! - `prompts.get {path, args?}`: the prompt at `path` with its arguments, `{description?,
//!   messages: [...]}`.
//!
//! Both look the entry up in the caller's view and read it with a call through the engine
//! ([`toolshed_core::EngineAccess::call`]), so the entry's own policy, validation and audit
//! apply: a principal whose roles do not allow `docs.handbook` cannot read it through
//! `resources.read` either. A path that is not an entry of the asked kind answers like a path
//! that does not exist.

use serde_json::{json, Map, Value};
use toolshed_core::{
    Annotations, EntryKind, Plugin, Tool, ToolContext, ToolDef, ToolError, ToolErrorKind, ToolPath,
};

/// The plugins: `resources` (with `resources.read`) and `prompts` (with `prompts.get`).
pub fn plugins() -> Vec<Plugin> {
    vec![
        Plugin::new(
            "resources",
            "Resources",
            "Read the resources of upstream MCP servers.",
        )
        .with_tool(read_tool()),
        Plugin::new(
            "prompts",
            "Prompts",
            "Get the prompts of upstream MCP servers.",
        )
        .with_tool(get_tool()),
    ]
}

fn read_only() -> Annotations {
    Annotations {
        read_only: true,
        destructive: false,
        idempotent: true,
        ..Default::default()
    }
}

fn read_tool() -> Tool {
    let def = ToolDef::new(
        ToolPath::parse("resources.read").expect("a valid path"),
        "Read Resource",
        "Reads an upstream MCP resource by its catalog path (find paths with search kind \
         'resource'). For a resource template, also give the uri to read.",
    )
    .with_input(json!({
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "The resource's catalog path, e.g. docs.handbook"},
            "uri": {"type": "string", "description": "For a resource template: the URI to read"}
        },
        "required": ["path"],
        "additionalProperties": false
    }))
    .with_annotations(read_only());
    Tool::from_fn(def, |ctx, args| async move {
        let path = text_arg(&args, "path")?;
        let mut inner = Map::new();
        if let Some(uri) = args.get("uri") {
            inner.insert("uri".into(), uri.clone());
        }
        read_entry(&ctx, &path, EntryKind::Resource, Value::Object(inner)).await
    })
}

fn get_tool() -> Tool {
    let def = ToolDef::new(
        ToolPath::parse("prompts.get").expect("a valid path"),
        "Get Prompt",
        "Gets an upstream MCP prompt by its catalog path (find paths with search kind \
         'prompt'), filled in with its arguments.",
    )
    .with_input(json!({
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "The prompt's catalog path, e.g. everything.simple_prompt"},
            "args": {"type": "object", "description": "The prompt's arguments", "additionalProperties": {"type": "string"}}
        },
        "required": ["path"],
        "additionalProperties": false
    }))
    .with_annotations(read_only());
    Tool::from_fn(def, |ctx, args| async move {
        let path = text_arg(&args, "path")?;
        let inner = args.get("args").cloned().unwrap_or_else(|| json!({}));
        read_entry(&ctx, &path, EntryKind::Prompt, inner).await
    })
}

fn text_arg(args: &Value, name: &str) -> Result<String, ToolError> {
    args.get(name)
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| ToolError::invalid(format!("'{name}' is required")))
}

/// Reads the entry at `path` if it is one of `kind` the caller may see.
async fn read_entry(
    ctx: &ToolContext,
    path: &str,
    kind: EntryKind,
    args: Value,
) -> Result<Value, ToolError> {
    let engine = ctx
        .engine()
        .ok_or_else(|| ToolError::internal("no engine to read entries through"))?;
    let shown: String = path.chars().take(200).collect();
    match engine.entry(path) {
        Some(def) if def.kind == kind => engine.call(path, args).await,
        _ => Err(ToolError::new(
            ToolErrorKind::NotFound,
            format!("no {} at '{shown}'", kind.as_str()),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use toolshed_core::{EngineAccess, NestedRun};

    /// An engine view with one resource (`docs.handbook`) and one tool (`docs.delete`).
    #[derive(Default)]
    struct Fake {
        calls: Mutex<Vec<(String, Value)>>,
    }

    #[async_trait::async_trait]
    impl EngineAccess for Fake {
        fn visible_paths(&self) -> Vec<String> {
            vec!["docs.handbook".into(), "docs.delete".into()]
        }
        fn entry(&self, path: &str) -> Option<ToolDef> {
            let mut def = ToolDef::new(ToolPath::parse(path).ok()?, "T", "");
            match path {
                "docs.handbook" => def.kind = EntryKind::Resource,
                "docs.delete" => {}
                _ => return None,
            }
            Some(def)
        }
        async fn call(&self, path: &str, args: Value) -> Result<Value, ToolError> {
            self.calls.lock().unwrap().push((path.into(), args));
            Ok(json!({"contents": [{"uri": "doc://handbook", "text": "hi"}]}))
        }
        async fn run_script(&self, _: &str, _: Value, _: NestedRun) -> Result<Value, ToolError> {
            Err(ToolError::internal("unused"))
        }
    }

    fn ctx(engine: Arc<Fake>) -> ToolContext {
        ToolContext::new("me".into(), ToolPath::parse("resources.read").unwrap())
            .with_engine(Some(engine))
    }

    #[tokio::test]
    async fn reads_only_entries_of_the_asked_kind() {
        let fake = Arc::new(Fake::default());
        let tool = read_tool();
        let v = tool
            .handler
            .call(ctx(fake.clone()), json!({"path": "docs.handbook"}))
            .await
            .unwrap();
        assert_eq!(v["contents"][0]["text"], "hi");
        // A tool is not a resource, and nothing is called for it.
        let e = tool
            .handler
            .call(ctx(fake.clone()), json!({"path": "docs.delete"}))
            .await
            .unwrap_err();
        assert_eq!(e.kind, ToolErrorKind::NotFound);
        assert!(e.message.contains("no resource at 'docs.delete'"), "{e:?}");
        let e = get_tool()
            .handler
            .call(ctx(fake.clone()), json!({"path": "docs.handbook"}))
            .await
            .unwrap_err();
        assert!(e.message.contains("no prompt at"), "{e:?}");
        assert_eq!(fake.calls.lock().unwrap().len(), 1);
    }
}
