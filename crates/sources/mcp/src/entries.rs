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

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

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

use crate::upstream::{wait_ready, Session, Upstream};

/// What an entry reads.
#[derive(Debug, Clone)]
enum Target {
    Resource { uri: String },
    Template { template: String },
    Prompt { name: String },
}

/// One URI's subscription: how many sessions want it, and the upstream session (its
/// generation) that last accepted the subscription.
#[derive(Debug, Default)]
struct Subscribed {
    count: usize,
    generation: u64,
}

/// How many sessions subscribe to each URI of one upstream: the upstream is asked to
/// subscribe once, and to unsubscribe when the last session does.
///
/// Changes to one URI are serialised by a lock held across the upstream request, so that the
/// count and what the upstream was told cannot drift apart when a subscribe races an
/// unsubscribe (or a failing subscribe) of the same URI; after a reconnect the URIs with a live
/// count are subscribed again ([`resubscribe`]) under the same locks.
#[derive(Default)]
pub(crate) struct Subscriptions(std::sync::Mutex<HashMap<String, Slot>>);

type Slot = Arc<tokio::sync::Mutex<Subscribed>>;

/// Why a subscription change did not go through; the local count is unchanged.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SubscriptionError {
    #[error("another change of this subscription did not finish in time")]
    Busy,
    #[error("the upstream refused the subscription: {0}")]
    Refused(String),
}

impl Subscriptions {
    /// The lock of `uri`'s record, created when missing.
    fn slot(&self, uri: &str) -> Slot {
        let mut slots = crate::upstream::lock(&self.0);
        slots.entry(uri.to_string()).or_default().clone()
    }

    /// Forgets `uri`'s record when no session counts on it and no change waits for it.
    fn prune(&self, uri: &str, slot: Slot) {
        let mut slots = crate::upstream::lock(&self.0);
        let unused = slots.get(uri).is_some_and(|s| Arc::ptr_eq(s, &slot))
            && Arc::strong_count(&slot) == 2
            && slot.try_lock().is_ok_and(|s| s.count == 0);
        if unused {
            slots.remove(uri);
        }
    }

    /// The URIs some session subscribes to, with their locks.
    fn live(&self) -> Vec<(String, Slot)> {
        let slots = crate::upstream::lock(&self.0);
        slots.iter().map(|(u, s)| (u.clone(), s.clone())).collect()
    }

    /// How many sessions subscribe to `uri` (0 while a change of it is under way).
    #[cfg(test)]
    fn count(&self, uri: &str) -> usize {
        let slots = crate::upstream::lock(&self.0);
        slots
            .get(uri)
            .and_then(|s| s.try_lock().ok().map(|s| s.count))
            .unwrap_or(0)
    }

    /// Counts one more (`on`) or one fewer subscription to `uri`, on the upstream session
    /// number `current`. `send(true)` subscribes the upstream (on the first subscription, or
    /// when the session that accepted it is gone), `send(false)` unsubscribes it (on the last
    /// unsubscription). A refused subscribe leaves the count as it was; an unsubscription
    /// always counts (the session no longer wants the updates), a refusal is only logged.
    pub(crate) async fn change<F, Fut>(
        &self,
        uri: &str,
        on: bool,
        current: u64,
        deadline: Instant,
        send: F,
    ) -> Result<(), SubscriptionError>
    where
        F: FnOnce(bool) -> Fut,
        Fut: std::future::Future<Output = Result<(), String>>,
    {
        let slot = self.slot(uri);
        let outcome = async {
            let mut sub = tokio::time::timeout_at(deadline, slot.lock())
                .await
                .map_err(|_| SubscriptionError::Busy)?;
            match (on, sub.count) {
                (true, n) if n == 0 || sub.generation < current => {
                    send(true).await.map_err(SubscriptionError::Refused)?;
                    sub.count = n + 1;
                    sub.generation = current;
                }
                (true, n) => sub.count = n + 1,
                (false, 0) => {}
                (false, 1) => {
                    sub.count = 0;
                    if let Err(why) = send(false).await {
                        tracing::warn!(uri, error = %why, "the upstream refused to unsubscribe; its updates of this resource are no longer relayed");
                    }
                }
                (false, n) => sub.count = n - 1,
            }
            Ok(())
        }
        .await;
        self.prune(uri, slot);
        outcome
    }
}

/// The resource subscriptions of a 2026-07-28 upstream, which has no `resources/subscribe`:
/// one `subscriptions/listen` stream per upstream whose filter carries every subscribed URI
/// (`resourceSubscriptions`). A change of the set opens a new stream with the new set, and
/// once the upstream acknowledged it, cancels the previous one (so no update falls between the
/// two; one may arrive twice meanwhile); the last URI removed cancels the stream. The
/// upstream's `notifications/resources/updated` arrive on the stream and are published on the
/// same `Notices` as an older upstream's.
#[derive(Default)]
pub(crate) struct Listener(tokio::sync::Mutex<Listening>);

#[derive(Default)]
struct Listening {
    /// The upstream session (its generation) the stream and the set belong to.
    generation: u64,
    uris: std::collections::BTreeSet<String>,
    /// The task reading the stream; aborting it drops the stream, which cancels the listen.
    reader: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for Listening {
    fn drop(&mut self) {
        if let Some(r) = self.reader.take() {
            r.abort();
        }
    }
}

impl Listener {
    /// Adds (`on`) or removes `uri` from the set the upstream's stream carries, on `session`,
    /// before `deadline`. An added URI the upstream's acknowledgment leaves out is refused
    /// (and the previous stream kept).
    async fn change(
        &self,
        shared: &crate::upstream::Shared,
        session: &Session,
        uri: &str,
        on: bool,
        deadline: Instant,
    ) -> Result<(), String> {
        let refused = self
            .change_set(shared, session, &[uri.to_string()], on, deadline)
            .await?;
        if refused.is_empty() {
            Ok(())
        } else {
            Err("the upstream's subscriptions/listen did not accept this URI".into())
        }
    }

    /// Adds (`on`) or removes `changed` from the set the stream carries, with one
    /// `subscriptions/listen` for all of them; the added URIs the upstream's acknowledgment
    /// leaves out. When it accepts none of them the previous stream is kept.
    async fn change_set(
        &self,
        shared: &crate::upstream::Shared,
        session: &Session,
        changed: &[String],
        on: bool,
        deadline: Instant,
    ) -> Result<Vec<String>, String> {
        let mut st = tokio::time::timeout_at(deadline, self.0.lock())
            .await
            .map_err(|_| "another change of the subscriptions did not finish in time")?;
        if st.generation != session.generation {
            // A new session: the old stream went with the old one; the URIs are added again
            // ([`resubscribe`]).
            if let Some(r) = st.reader.take() {
                r.abort();
            }
            st.uris.clear();
            st.generation = session.generation;
        }
        let mut uris = st.uris.clone();
        for uri in changed {
            if on {
                uris.insert(uri.clone());
            } else {
                uris.remove(uri);
            }
        }
        if uris == st.uris && (st.reader.is_some() || uris.is_empty()) {
            return Ok(Vec::new());
        }
        if uris.is_empty() {
            if let Some(r) = st.reader.take() {
                r.abort();
            }
            st.uris = uris;
            return Ok(Vec::new());
        }
        let filter = rmcp::model::SubscriptionFilter::builder()
            .resource_subscriptions(uris.iter().cloned())
            .build();
        let stream = tokio::time::timeout_at(deadline, session.peer.listen(filter))
            .await
            .map_err(|_| {
                "the upstream did not acknowledge subscriptions/listen in time".to_string()
            })?
            .map_err(|e| format!("subscriptions/listen failed: {e}"))?;
        let accepted = stream
            .acknowledged()
            .resource_subscriptions
            .clone()
            .unwrap_or_default();
        let refused: Vec<String> = changed
            .iter()
            .filter(|u| on && !accepted.contains(u))
            .cloned()
            .collect();
        if on && refused.len() == changed.len() {
            return Ok(refused);
        }
        for uri in &refused {
            uris.remove(uri);
        }
        let reader = tokio::spawn(read_updates(
            stream,
            shared.cfg.name.clone(),
            shared.cfg.notices.clone(),
        ));
        if let Some(old) = st.reader.replace(reader) {
            old.abort();
        }
        st.uris = uris;
        Ok(refused)
    }
}

/// Publishes the resource updates of one `subscriptions/listen` stream until it ends.
async fn read_updates(
    mut stream: rmcp::service::Subscription,
    name: String,
    notices: Option<toolshed_core::notices::Notices>,
) {
    loop {
        match stream.next().await {
            Ok(Some(rmcp::model::ServerNotification::ResourceUpdatedNotification(n))) => {
                let published = notices
                    .as_ref()
                    .is_some_and(|ns| ns.resource_updated(&name, &n.params.uri));
                if !published {
                    tracing::debug!(upstream = %name, "a resource update no session can receive");
                }
            }
            Ok(Some(_)) => {}
            Ok(None) => {
                tracing::debug!(upstream = %name, end = ?stream.end(), "the resource subscription stream ended");
                return;
            }
            Err(e) => {
                tracing::warn!(upstream = %name, error = %e, "the resource subscription stream failed; updates stop until the subscriptions change or the upstream reconnects");
                return;
            }
        }
    }
}

/// After a reconnect: every URI some session subscribes to is subscribed again on the new
/// `session`, each under its lock (on a 2026-07-28 upstream, all of them with one
/// `subscriptions/listen`). A URI the upstream refuses keeps its count (a later subscription or
/// reconnect tries again); the refusal is logged with the URI.
pub(crate) async fn resubscribe(shared: Arc<crate::upstream::Shared>, session: Arc<Session>) {
    let ns = shared.cfg.name.as_str();
    let refused = |uri: &str, why: &str| {
        tracing::warn!(
            upstream = ns,
            uri = %uri,
            error = %why,
            "could not subscribe to a resource again after the upstream reconnected; its updates stop until it is subscribed again"
        )
    };
    if !session.protocol.has_initialize() {
        if let Err(why) = check_subscribable(&session) {
            for (uri, _) in shared.subscriptions.live() {
                refused(&uri, &why);
            }
            return;
        }
        let mut held = Vec::new();
        for (uri, slot) in shared.subscriptions.live() {
            let sub = slot.clone().lock_owned().await;
            if sub.count > 0 && sub.generation < session.generation {
                held.push((uri, sub));
            }
        }
        if held.is_empty() {
            return;
        }
        let uris: Vec<String> = held.iter().map(|(u, _)| u.clone()).collect();
        let deadline = Instant::now() + shared.cfg.call_timeout;
        match shared
            .listener
            .change_set(&shared, &session, &uris, true, deadline)
            .await
        {
            Ok(no) => {
                for (uri, mut sub) in held {
                    if no.contains(&uri) {
                        refused(
                            &uri,
                            "the upstream's subscriptions/listen did not accept it",
                        );
                    } else {
                        sub.generation = session.generation;
                    }
                }
            }
            Err(why) => uris.iter().for_each(|u| refused(u, &why)),
        }
        return;
    }
    for (uri, slot) in shared.subscriptions.live() {
        let mut sub = slot.lock().await;
        if sub.count == 0 || sub.generation >= session.generation {
            continue;
        }
        match subscribe_on(&shared, &session, &uri, shared.cfg.call_timeout).await {
            Ok(()) => sub.generation = session.generation,
            Err(why) => refused(&uri, &why),
        }
    }
}

/// Asks `session` to subscribe to `uri` within `within`.
async fn subscribe_on(
    shared: &crate::upstream::Shared,
    session: &Session,
    uri: &str,
    within: Duration,
) -> Result<(), String> {
    check_subscribable(session)?;
    upstream_change(shared, session, uri, true, Instant::now() + within).await
}

/// Whether `session` takes subscriptions Toolshed relays; why not, as text.
fn check_subscribable(session: &Session) -> Result<(), String> {
    let subscribes = session
        .peer
        .peer_info()
        .and_then(|i| i.capabilities.resources.as_ref().and_then(|r| r.subscribe))
        .unwrap_or(false);
    if !subscribes {
        return Err("it does not offer resource subscriptions".into());
    }
    Ok(())
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
    async fn session(&self, ctx: &ToolContext) -> Result<(Arc<Session>, Instant), ToolError> {
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
    /// of the first subscription and of the last unsubscription only ([`Subscriptions`]).
    async fn subscription(
        &self,
        ctx: &ToolContext,
        uri: String,
        on: bool,
    ) -> Result<Value, ToolError> {
        self.check_subscription_uri(&uri)?;
        let ns = self.upstream.name();
        let changed = if on {
            self.subscribe(ctx, &uri).await
        } else {
            self.unsubscribe(ctx, &uri).await
        };
        changed.map_err(|e| match e {
            Refusal::Unfit(why) => ToolError::invalid(format!("upstream '{ns}': {why}")),
            Refusal::NoSession(e) => e,
            Refusal::Change(e) => ToolError::upstream(format!(
                "upstream '{ns}' did not change the subscription: {e}"
            )),
        })?;
        Ok(json!({}))
    }

    /// Counts one more session's subscription to `uri`, subscribing the upstream when needed.
    async fn subscribe(&self, ctx: &ToolContext, uri: &str) -> Result<(), Refusal> {
        let (session, deadline) = self.session(ctx).await.map_err(Refusal::NoSession)?;
        check_subscribable(&session).map_err(Refusal::Unfit)?;
        let send = |on: bool| upstream_change(self.upstream.shared(), &session, uri, on, deadline);
        let subscriptions = &self.upstream.shared().subscriptions;
        subscriptions
            .change(uri, true, session.generation, deadline, send)
            .await
            .map_err(Refusal::Change)
    }

    /// Counts one session's subscription to `uri` off, also while the upstream is away (the
    /// session no longer wants the updates either way); the upstream hears of the last one
    /// when a session is there in time.
    async fn unsubscribe(&self, ctx: &ToolContext, uri: &str) -> Result<(), Refusal> {
        let deadline = Instant::now() + self.upstream.shared().cfg.call_timeout.min(ctx.timeout);
        let send = |on: bool| async move {
            let session = wait_ready(self.upstream.shared(), deadline, 0)
                .await
                .map_err(|e| e.to_string())?;
            upstream_change(self.upstream.shared(), &session, uri, on, deadline).await
        };
        let subscriptions = &self.upstream.shared().subscriptions;
        subscriptions
            .change(uri, false, 0, deadline, send)
            .await
            .map_err(Refusal::Change)
    }

    /// Whether `uri` is this entry's to subscribe to.
    fn check_subscription_uri(&self, uri: &str) -> Result<(), ToolError> {
        match &self.target {
            Target::Resource { uri: own } if own == uri => Ok(()),
            Target::Template { template } if uri_template_matches(template, uri) => Ok(()),
            Target::Prompt { .. } => Err(ToolError::invalid("prompts have no subscriptions")),
            _ => {
                let shown: String = uri.chars().take(300).collect();
                Err(ToolError::invalid(format!(
                    "'{shown}' is not this resource's URI"
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

/// Why one session's subscription did not change.
enum Refusal {
    /// The upstream takes no subscriptions Toolshed relays.
    Unfit(String),
    /// No upstream session within the call's budget.
    NoSession(ToolError),
    Change(SubscriptionError),
}

/// Sends `resources/subscribe` (`on`) or `resources/unsubscribe` for `uri` on `session`
/// before `deadline`; on a 2026-07-28 session, which has neither, changes the URIs of the
/// upstream's `subscriptions/listen` stream instead ([`Listener`]).
async fn upstream_change(
    shared: &crate::upstream::Shared,
    session: &Session,
    uri: &str,
    on: bool,
    deadline: Instant,
) -> Result<(), String> {
    if !session.protocol.has_initialize() {
        return shared
            .listener
            .change(shared, session, uri, on, deadline)
            .await;
    }
    #[allow(deprecated)]
    let answer = tokio::time::timeout_at(deadline, async {
        if on {
            session
                .peer
                .subscribe(SubscribeRequestParams::new(uri.to_string()))
                .await
        } else {
            session
                .peer
                .unsubscribe(UnsubscribeRequestParams::new(uri.to_string()))
                .await
        }
    })
    .await;
    match answer {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("no answer in time".into()),
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

    /// An upstream that answers subscription requests after a delay and records, in the order
    /// it took them, the ones it accepted, and how often two overlapped.
    #[derive(Default)]
    struct Fake {
        accepted: std::sync::Mutex<Vec<bool>>,
        subscribed: std::sync::atomic::AtomicBool,
        in_flight: std::sync::atomic::AtomicUsize,
        overlaps: std::sync::atomic::AtomicUsize,
    }

    impl Fake {
        async fn request(&self, on: bool, delay_ms: u64, accept: bool) -> Result<(), String> {
            use std::sync::atomic::Ordering::SeqCst;
            if self.in_flight.fetch_add(1, SeqCst) > 0 {
                self.overlaps.fetch_add(1, SeqCst);
            }
            tokio::time::sleep(Duration::from_millis(delay_ms)).await;
            self.in_flight.fetch_sub(1, SeqCst);
            if !accept {
                return Err("refused".into());
            }
            self.subscribed.store(on, SeqCst);
            self.accepted.lock().unwrap().push(on);
            Ok(())
        }

        fn subscribed(&self) -> bool {
            self.subscribed.load(std::sync::atomic::Ordering::SeqCst)
        }
    }

    fn soon() -> Instant {
        Instant::now() + Duration::from_secs(10)
    }

    const URI: &str = "a://x";

    #[tokio::test]
    async fn the_upstream_hears_of_the_first_subscription_and_the_last_unsubscription() {
        let (subs, up) = (Subscriptions::default(), Fake::default());
        for on in [true, true, false, false, false, true] {
            subs.change(URI, on, 1, soon(), |on| up.request(on, 0, true))
                .await
                .unwrap();
        }
        assert_eq!(*up.accepted.lock().unwrap(), [true, false, true]);
        assert_eq!(subs.count(URI), 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_subscribe_racing_an_unsubscribe_leaves_the_upstream_as_counted() {
        let subs = Arc::new(Subscriptions::default());
        let up = Arc::new(Fake::default());
        // A slow subscribe, and an unsubscribe that arrives while it is under way.
        let slow = tokio::spawn({
            let (subs, up) = (subs.clone(), up.clone());
            async move {
                subs.change(URI, true, 1, soon(), |on| up.request(on, 150, true))
                    .await
            }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        subs.change(URI, false, 1, soon(), |on| up.request(on, 0, true))
            .await
            .unwrap();
        slow.await.unwrap().unwrap();
        assert_eq!(*up.accepted.lock().unwrap(), [true, false]);
        assert!(
            !up.subscribed(),
            "nobody counts on it, yet the upstream still sends updates"
        );
        assert_eq!(subs.count(URI), 0);
        assert_eq!(up.overlaps.load(std::sync::atomic::Ordering::SeqCst), 0);
        assert!(
            crate::upstream::lock(&subs.0).is_empty(),
            "no record is left behind"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_refused_subscribe_does_not_take_a_subscription_made_meanwhile_with_it() {
        let subs = Arc::new(Subscriptions::default());
        let up = Arc::new(Fake::default());
        let refused = tokio::spawn({
            let (subs, up) = (subs.clone(), up.clone());
            async move {
                subs.change(URI, true, 1, soon(), |on| up.request(on, 150, false))
                    .await
            }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        subs.change(URI, true, 1, soon(), |on| up.request(on, 0, true))
            .await
            .unwrap();
        assert!(refused.await.unwrap().is_err());
        // The second session's subscription reached the upstream on its own.
        assert!(up.subscribed());
        assert_eq!(subs.count(URI), 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sessions_subscribing_and_unsubscribing_at_once_keep_the_count_and_the_upstream_together(
    ) {
        let subs = Arc::new(Subscriptions::default());
        let up = Arc::new(Fake::default());
        let tasks: Vec<_> = (0..40u64)
            .map(|i| {
                let (subs, up) = (subs.clone(), up.clone());
                tokio::spawn(async move {
                    let delay = i % 4;
                    subs.change(URI, true, 1, soon(), |on| up.request(on, delay, true))
                        .await
                        .unwrap();
                    tokio::time::sleep(Duration::from_millis(i % 7)).await;
                    subs.change(URI, false, 1, soon(), |on| up.request(on, delay, true))
                        .await
                        .unwrap();
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(subs.count(URI), 0);
        assert!(!up.subscribed());
        assert_eq!(up.overlaps.load(std::sync::atomic::Ordering::SeqCst), 0);
        // Subscribe and unsubscribe alternate, starting with a subscribe.
        let accepted = up.accepted.lock().unwrap().clone();
        assert!(!accepted.is_empty());
        for (i, on) in accepted.iter().enumerate() {
            assert_eq!(*on, i % 2 == 0, "{accepted:?}");
        }
    }

    #[tokio::test]
    async fn a_refused_unsubscribe_still_ends_the_sessions_interest() {
        let (subs, up) = (Subscriptions::default(), Fake::default());
        subs.change(URI, true, 1, soon(), |on| up.request(on, 0, true))
            .await
            .unwrap();
        subs.change(URI, false, 1, soon(), |on| up.request(on, 0, false))
            .await
            .unwrap();
        assert_eq!(subs.count(URI), 0);
        // The next subscription asks the upstream again.
        subs.change(URI, true, 1, soon(), |on| up.request(on, 0, true))
            .await
            .unwrap();
        assert_eq!(*up.accepted.lock().unwrap(), [true, true]);
    }

    #[tokio::test]
    async fn a_subscription_on_a_session_that_is_gone_is_sent_again() {
        let (subs, up) = (Subscriptions::default(), Fake::default());
        subs.change(URI, true, 1, soon(), |on| up.request(on, 0, true))
            .await
            .unwrap();
        // Session 2 replaced session 1 and was not subscribed yet: the next subscriber asks it.
        subs.change(URI, true, 2, soon(), |on| up.request(on, 0, true))
            .await
            .unwrap();
        subs.change(URI, true, 2, soon(), |on| up.request(on, 0, true))
            .await
            .unwrap();
        assert_eq!(*up.accepted.lock().unwrap(), [true, true]);
        assert_eq!(subs.count(URI), 3);
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
