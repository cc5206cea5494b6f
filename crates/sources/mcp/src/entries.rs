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
    ArgumentInfo, CompleteRequestParams, CompletionContext, GetPromptRequestParams, Prompt,
    ReadResourceRequestParams, Reference, Resource, ResourceTemplate, SubscribeRequestParams,
    UnsubscribeRequestParams,
};
use serde_json::{json, Map, Value};
use tokio::time::Instant;
use toolshed_core::path::to_segment;
use toolshed_core::servers::uri_template_matches;
use toolshed_core::{
    Annotations, EntryKind, EntryOp, Tool, ToolContext, ToolDef, ToolError, ToolHandler, ToolPath,
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

/// How many sessions subscribe to each URI of one upstream: the upstream is asked to
/// subscribe once, and to unsubscribe when the last session does.
#[derive(Default)]
pub(crate) struct Subscriptions(std::sync::Mutex<std::collections::HashMap<String, usize>>);

impl Subscriptions {
    /// Counts one more (`on`) or one fewer subscription to `uri`: `Some(true)` when the
    /// upstream must subscribe now, `Some(false)` when it must unsubscribe, `None` when it need
    /// not hear of it.
    pub(crate) fn change(&self, uri: &str, on: bool) -> Option<bool> {
        let mut counts = crate::upstream::lock(&self.0);
        let n = counts.entry(uri.to_string()).or_default();
        match (on, *n) {
            (true, 0) => {
                *n = 1;
                Some(true)
            }
            (true, _) => {
                *n += 1;
                None
            }
            (false, 0) => {
                counts.remove(uri);
                None
            }
            (false, 1) => {
                counts.remove(uri);
                Some(false)
            }
            (false, _) => {
                *n -= 1;
                None
            }
        }
    }
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
        // A request of the upstream meanwhile cannot be told apart from another call's.
        let _in_flight = crate::relay::enter_opaque(&self.upstream.shared().calls);
        let outcome = self.read(&ctx, args).await;
        let owned = self.upstream.secrets();
        let secrets: Vec<&str> = owned.iter().map(String::as_str).collect();
        redact_outcome(outcome, &secrets)
    }

    /// Completion of a prompt's or a template's argument (`completion/complete` with the
    /// entry's own reference), and subscriptions to a resource: one upstream subscription per
    /// URI, however many sessions subscribe ([`Subscriptions`]).
    async fn entry_op(&self, ctx: ToolContext, op: EntryOp) -> Result<Value, ToolError> {
        let _in_flight = crate::relay::enter_opaque(&self.upstream.shared().calls);
        let outcome = match op {
            EntryOp::Complete { argument, context } => self.complete(&ctx, argument, context).await,
            EntryOp::Subscribe { uri } => self.subscription(&ctx, uri, true).await,
            EntryOp::Unsubscribe { uri } => self.subscription(&ctx, uri, false).await,
        };
        let owned = self.upstream.secrets();
        let secrets: Vec<&str> = owned.iter().map(String::as_str).collect();
        redact_outcome(outcome, &secrets)
    }
}

impl EntryHandler {
    /// The upstream's session within the call's budget, and that budget's deadline.
    async fn session(
        &self,
        ctx: &ToolContext,
    ) -> Result<(std::sync::Arc<crate::upstream::Session>, Instant), ToolError> {
        let shared = self.upstream.shared();
        let budget = shared.cfg.call_timeout.min(ctx.timeout);
        let deadline = Instant::now() + budget;
        let session = wait_ready(shared, deadline, 0)
            .await
            .map_err(|e| ToolError::upstream(e.to_string()))?;
        Ok((session, deadline))
    }

    async fn complete(
        &self,
        ctx: &ToolContext,
        argument: Value,
        context: Option<Value>,
    ) -> Result<Value, ToolError> {
        let reference = match &self.target {
            Target::Prompt { name } => Reference::for_prompt(name.clone()),
            Target::Template { template } => Reference::for_resource(template.clone()),
            Target::Resource { uri } => Reference::for_resource(uri.clone()),
        };
        let argument: ArgumentInfo = serde_json::from_value(argument).map_err(|e| {
            ToolError::invalid(format!("argument must be {{name, value}} (strings): {e}"))
        })?;
        let context = context
            .map(serde_json::from_value::<CompletionContext>)
            .transpose()
            .map_err(|e| {
                ToolError::invalid(format!(
                    "context must be {{arguments: {{...strings}}}}: {e}"
                ))
            })?;
        let mut params = CompleteRequestParams::new(reference, argument);
        params.context = context;
        let (session, deadline) = self.session(ctx).await?;
        let ns = self.upstream.name();
        let answer = tokio::time::timeout_at(deadline, session.peer.complete(params))
            .await
            .map_err(|_| ToolError::upstream(format!("upstream '{ns}' did not answer in time")))?
            .map_err(|e| ToolError::upstream(format!("upstream '{ns}' refused completion: {e}")))?;
        Ok(serde_json::to_value(answer).unwrap_or_default())
    }

    /// Subscribes (`on`) or unsubscribes one session's interest in `uri`; the upstream hears
    /// of the first subscription and of the last unsubscription only.
    async fn subscription(
        &self,
        ctx: &ToolContext,
        uri: String,
        on: bool,
    ) -> Result<Value, ToolError> {
        match &self.target {
            Target::Resource { uri: own } if *own == uri => {}
            Target::Template { template } if uri_template_matches(template, &uri) => {}
            Target::Prompt { .. } => {
                return Err(ToolError::invalid("prompts have no subscriptions"));
            }
            _ => {
                let shown: String = uri.chars().take(300).collect();
                return Err(ToolError::invalid(format!(
                    "'{shown}' is not this resource's URI"
                )));
            }
        }
        let shared = self.upstream.shared();
        let ns = self.upstream.name();
        let (session, deadline) = self.session(ctx).await?;
        let subscribes = session
            .peer
            .peer_info()
            .and_then(|i| i.capabilities.resources.as_ref().and_then(|r| r.subscribe))
            .unwrap_or(false);
        if !subscribes {
            return Err(ToolError::invalid(format!(
                "upstream '{ns}' does not offer resource subscriptions"
            )));
        }
        if session.protocol >= rmcp::model::ProtocolVersion::V_2026_07_28 {
            return Err(ToolError::invalid(format!(
                "upstream '{ns}' speaks MCP 2026-07-28, whose resource updates Toolshed does not relay yet"
            )));
        }
        let Some(send) = shared.subscriptions.change(&uri, on) else {
            return Ok(json!({}));
        };
        #[allow(deprecated)]
        let answer = tokio::time::timeout_at(deadline, async {
            if send {
                session
                    .peer
                    .subscribe(SubscribeRequestParams::new(uri.clone()))
                    .await
            } else {
                session
                    .peer
                    .unsubscribe(UnsubscribeRequestParams::new(uri.clone()))
                    .await
            }
        })
        .await;
        match answer {
            Ok(Ok(())) => Ok(json!({})),
            failed => {
                // The upstream did not take it: the count goes back.
                shared.subscriptions.change(&uri, !on);
                let why = match failed {
                    Ok(Err(e)) => e.to_string(),
                    _ => "no answer in time".into(),
                };
                Err(ToolError::upstream(format!(
                    "upstream '{ns}' refused the subscription change: {why}"
                )))
            }
        }
    }

    async fn read(&self, ctx: &ToolContext, args: Value) -> Result<Value, ToolError> {
        let ns = self.upstream.name();
        let (session, deadline) = self.session(ctx).await?;
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
        .map_err(|_| ToolError::upstream(format!("upstream '{ns}' did not answer in time")))?;
        let mut value = answer
            .map_err(|e| ToolError::upstream(format!("upstream '{ns}' refused the read: {e}")))?;
        let owned = self.upstream.secrets();
        let secrets: Vec<&str> = owned.iter().map(String::as_str).collect();
        redact_value(&mut value, &secrets);
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
    fn the_upstream_hears_of_the_first_subscription_and_the_last_unsubscription() {
        let subs = Subscriptions::default();
        assert_eq!(subs.change("a://x", true), Some(true));
        assert_eq!(subs.change("a://x", true), None);
        assert_eq!(subs.change("a://y", true), Some(true));
        assert_eq!(subs.change("a://x", false), None);
        assert_eq!(subs.change("a://x", false), Some(false));
        // An unsubscription nobody subscribed for is not sent.
        assert_eq!(subs.change("a://x", false), None);
        assert_eq!(subs.change("a://x", true), Some(true));
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
