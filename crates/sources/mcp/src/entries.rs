//! An upstream's resources, resource templates and prompts as catalog entries
//! ([`EntryKind::Resource`], [`EntryKind::Prompt`]) beside its tools.
//!
//! Each gets a path of its own under the upstream's namespace (`<source>.<segment of its
//! name>`, de-duplicated against the tools and each other with `_2`, `_3`...), so the same
//! policy globs, audit and search cover them. Calling the entry through the engine reads it:
//!
//! | entry | arguments | upstream request | value |
//! |---|---|---|---|
//! | resource | none | `resources/read` of its URI | `{contents: [...]}` |
//! | resource template | `{uri}` (must match the template) | `resources/read` of `uri` | `{contents: [...]}` |
//! | prompt | the prompt's arguments (strings) | `prompts/get` | `{description?, messages: [...]}` |
//!
//! Every entry is read-only. The upstream's own declaration is kept as the entry's `native`
//! (for virtual servers), and the upstream's own answer is kept for faces that relay it
//! ([`ToolContext::keep_wire`]).

use std::collections::HashSet;
use std::sync::Arc;

use rmcp::model::{
    GetPromptRequestParams, Prompt, ReadResourceRequestParams, Resource, ResourceTemplate,
};
use serde_json::{json, Map, Value};
use tokio::time::Instant;
use toolshed_core::path::to_segment;
use toolshed_core::servers::uri_template_matches;
use toolshed_core::{
    Annotations, EntryKind, Tool, ToolContext, ToolDef, ToolError, ToolHandler, ToolPath,
};
use toolshed_outbound::secret::{redact_outcome, redact_value};

use crate::upstream::{wait_ready, Upstream};

/// What an entry reads.
#[derive(Debug, Clone)]
enum Target {
    Resource { uri: String },
    Template { template: String },
    Prompt { name: String },
}

/// Most resources (static ones and templates together) and prompts imported per upstream.
pub const MAX_ENTRIES: usize = 1000;

/// The catalog entries of an upstream's resources, templates and prompts; `used` holds the
/// segments its tools took.
pub(crate) fn entries(
    upstream: &Upstream,
    used: &mut HashSet<String>,
    resources: &[Resource],
    templates: &[ResourceTemplate],
    prompts: &[Prompt],
) -> Vec<Tool> {
    let ns = upstream.name();
    let mut out = Vec::new();
    let mut add = |name: &str, def: ToolDef, target: Target| {
        if out.len() >= MAX_ENTRIES {
            return;
        }
        let Some(path) = free_path(ns, name, used) else {
            tracing::warn!(
                upstream = ns,
                entry = name,
                "skipping an entry with an unusable path"
            );
            return;
        };
        let mut def = def;
        def.path = path;
        def.origin = format!("source:{ns}");
        let handler = EntryHandler {
            upstream: upstream.clone(),
            target,
        };
        out.push(Tool::new(def, Arc::new(handler)));
    };
    for r in resources {
        let described = r.description.clone().unwrap_or_default();
        let def = entry_def(
            EntryKind::Resource,
            r.title.as_deref().unwrap_or(&r.name),
            format!("{described} (resource {})", r.uri).trim(),
            json!({"type": "object", "properties": {}}),
            serde_json::to_value(r).ok(),
        );
        add(&r.name, def, Target::Resource { uri: r.uri.clone() });
    }
    for t in templates {
        let described = t.description.clone().unwrap_or_default();
        let input = json!({
            "type": "object",
            "properties": {"uri": {"type": "string", "description": format!("A URI of the form {}", t.uri_template)}},
            "required": ["uri"],
        });
        let def = entry_def(
            EntryKind::Resource,
            t.title.as_deref().unwrap_or(&t.name),
            format!("{described} (resource template {})", t.uri_template).trim(),
            input,
            serde_json::to_value(t).ok(),
        );
        add(
            &t.name,
            def,
            Target::Template {
                template: t.uri_template.clone(),
            },
        );
    }
    for p in prompts {
        let def = entry_def(
            EntryKind::Prompt,
            p.title.as_deref().unwrap_or(&p.name),
            p.description.as_deref().unwrap_or_default(),
            prompt_schema(p),
            serde_json::to_value(p).ok(),
        );
        add(
            &p.name,
            def,
            Target::Prompt {
                name: p.name.clone(),
            },
        );
    }
    out
}

fn entry_def(
    kind: EntryKind,
    title: &str,
    description: &str,
    input: Value,
    native: Option<Value>,
) -> ToolDef {
    let placeholder = ToolPath::parse("entry.placeholder").expect("a valid path");
    let mut def = ToolDef::new(placeholder, title, description)
        .with_input(input)
        .with_annotations(Annotations {
            read_only: true,
            destructive: false,
            idempotent: true,
            ..Default::default()
        });
    def.kind = kind;
    def.native = native;
    def
}

/// `<ns>.<segment>`, suffixed `_2`, `_3`... while taken.
fn free_path(ns: &str, name: &str, used: &mut HashSet<String>) -> Option<ToolPath> {
    let base = to_segment(name);
    let base = if base.is_empty() {
        "entry".into()
    } else {
        base
    };
    let mut segment = base.clone();
    let mut n = 2;
    while used.contains(&segment) {
        segment = format!("{base}_{n}");
        n += 1;
    }
    let path = ToolPath::join(ns, &segment).ok()?;
    used.insert(segment);
    Some(path)
}

/// A prompt's arguments as an object schema of strings.
fn prompt_schema(p: &Prompt) -> Value {
    let mut properties = Map::new();
    let mut required = Vec::new();
    for a in p.arguments.iter().flatten() {
        let mut prop = json!({"type": "string"});
        if let Some(d) = &a.description {
            prop["description"] = json!(d);
        }
        properties.insert(a.name.clone(), prop);
        if a.required == Some(true) {
            required.push(json!(a.name));
        }
    }
    json!({"type": "object", "properties": properties, "required": required})
}

/// The upstream request one read makes.
enum Request {
    Read(String),
    Prompt(String, Option<Map<String, Value>>),
}

/// A prompt's arguments as the strings MCP carries (other JSON values as their text).
fn prompt_arguments(args: &Value) -> Option<Map<String, Value>> {
    let arguments: Map<String, Value> = args
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| {
            let text = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (k.clone(), Value::String(text))
        })
        .collect();
    (!arguments.is_empty()).then_some(arguments)
}

struct EntryHandler {
    upstream: Upstream,
    target: Target,
}

#[async_trait::async_trait]
impl ToolHandler for EntryHandler {
    async fn call(&self, ctx: ToolContext, args: Value) -> Result<Value, ToolError> {
        let secrets = self.upstream.secrets();
        let outcome = self.read(&ctx, args, &secrets).await;
        redact_outcome(outcome, &secrets)
    }
}

impl EntryHandler {
    async fn read(
        &self,
        ctx: &ToolContext,
        args: Value,
        secrets: &[&str],
    ) -> Result<Value, ToolError> {
        let shared = self.upstream.shared();
        let ns = self.upstream.name();
        let budget = shared.cfg.call_timeout.min(ctx.timeout);
        let deadline = Instant::now() + budget;
        let session = wait_ready(shared, deadline, 0)
            .await
            .map_err(|e| ToolError::upstream(e.to_string()))?;
        let request = match &self.target {
            Target::Resource { uri } => Request::Read(uri.clone()),
            Target::Template { template } => {
                let uri = args
                    .get("uri")
                    .and_then(Value::as_str)
                    .ok_or_else(|| ToolError::invalid("'uri' is required: the URI to read"))?;
                if !uri_template_matches(template, uri) {
                    let shown: String = uri.chars().take(300).collect();
                    return Err(ToolError::invalid(format!(
                        "'{shown}' does not have the form {template}"
                    )));
                }
                Request::Read(uri.to_string())
            }
            Target::Prompt { name } => Request::Prompt(name.clone(), prompt_arguments(&args)),
        };
        let peer = &session.peer;
        let answer = tokio::time::timeout_at(deadline, async {
            match request {
                Request::Read(uri) => peer
                    .read_resource(ReadResourceRequestParams::new(uri))
                    .await
                    .map(|r| serde_json::to_value(r).unwrap_or_default()),
                Request::Prompt(name, arguments) => {
                    let mut params = GetPromptRequestParams::new(name);
                    params.arguments = arguments;
                    peer.get_prompt(params)
                        .await
                        .map(|r| serde_json::to_value(r).unwrap_or_default())
                }
            }
        })
        .await
        .map_err(|_| {
            ToolError::upstream(format!("upstream '{ns}' did not answer within {budget:?}"))
        })?;
        let mut value = answer
            .map_err(|e| ToolError::upstream(format!("upstream '{ns}' refused the read: {e}")))?;
        redact_value(&mut value, secrets);
        ctx.keep_wire(value.clone());
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_arguments_become_a_string_schema() {
        let p: Prompt = serde_json::from_value(json!({
            "name": "greet",
            "arguments": [
                {"name": "who", "description": "Whom to greet", "required": true},
                {"name": "tone"}
            ]
        }))
        .unwrap();
        let s = prompt_schema(&p);
        assert_eq!(s["required"], json!(["who"]));
        assert_eq!(s["properties"]["who"]["description"], "Whom to greet");
        assert_eq!(s["properties"]["tone"]["type"], "string");
    }

    #[test]
    fn prompt_arguments_are_sent_as_strings() {
        let args = prompt_arguments(&json!({"city": "Oslo", "days": 3, "hot": true})).unwrap();
        assert_eq!(
            Value::Object(args),
            json!({"city": "Oslo", "days": "3", "hot": "true"})
        );
        assert_eq!(prompt_arguments(&json!({})), None);
    }

    #[test]
    fn entry_paths_avoid_the_tools_segments() {
        let mut used: HashSet<String> = ["echo".to_string()].into();
        assert_eq!(
            free_path("up", "echo", &mut used).unwrap().as_str(),
            "up.echo_2"
        );
        assert_eq!(
            free_path("up", "Echo", &mut used).unwrap().as_str(),
            "up.echo_3"
        );
        assert_eq!(
            free_path("up", "notes 1", &mut used).unwrap().as_str(),
            "up.notes_1"
        );
    }
}
