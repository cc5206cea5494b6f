//! What a tool is ([`ToolDef`]), what it does ([`ToolHandler`]) and how it fails ([`ToolError`]).
//!
//! Handlers are never called directly by a face: the engine calls them after resolution,
//! validation, policy and approval. A handler receives a [`ToolContext`] and asks it for
//! credentials (`ctx.token("github")`) instead of holding secrets itself.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::path::ToolPath;

/// Behaviour hints. `destructive` tools go through the approval gate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Annotations {
    /// The tool does not modify its environment.
    pub read_only: bool,
    /// The tool may delete or overwrite data; calls need approval.
    pub destructive: bool,
    /// Calling it twice with the same arguments has the same effect as once.
    pub idempotent: bool,
    /// It changes only a draft kept by Toolshed (an agent definition being edited), which acts
    /// on nothing in the world: the default policy lets it run without confirmation.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub draft: bool,
}

impl Annotations {
    pub const READ_ONLY: Self = Self {
        read_only: true,
        destructive: false,
        idempotent: true,
        draft: false,
    };
    pub const WRITE: Self = Self {
        read_only: false,
        destructive: false,
        idempotent: false,
        draft: false,
    };
    pub const DESTRUCTIVE: Self = Self {
        read_only: false,
        destructive: true,
        idempotent: false,
        draft: false,
    };
    /// A write to a Toolshed-kept draft (see [`Annotations::draft`]).
    pub const DRAFT: Self = Self {
        read_only: false,
        destructive: false,
        idempotent: false,
        draft: true,
    };
}

/// The description of a tool: everything but its behaviour. Serializable, shown to agents.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolDef {
    pub path: ToolPath,
    /// Title Case display name, e.g. "Create Issue".
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments (an object schema).
    pub input_schema: Value,
    /// JSON Schema of the result, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    #[serde(default)]
    pub annotations: Annotations,
    /// Where the tool comes from, e.g. `plugin:tables` or `source:github`. Named in errors.
    #[serde(default)]
    pub origin: String,
    /// How long one call may take, when the tool needs another time than the engine's call
    /// timeout (a workflow run waits minutes). The engine caps it at its maximum call timeout.
    #[serde(default, rename = "timeoutMs", skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// The tool exactly as its upstream declared it (an MCP `Tool` object: original name,
    /// title, icons, annotations, `_meta`), for faces that serve it unchanged (virtual servers
    /// with original names). `None` for tools Toolshed defines itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub native: Option<Value>,
    /// What the entry is: a tool (the default), or an upstream's resource or prompt, which
    /// share the catalog's paths, policy, audit and search but are read, not called, by faces.
    #[serde(default, skip_serializing_if = "EntryKind::is_tool")]
    pub kind: EntryKind,
}

/// What a catalog entry is ([`ToolDef::kind`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    #[default]
    Tool,
    /// An MCP resource (or resource template): calling it reads it.
    Resource,
    /// An MCP prompt: calling it with the prompt's arguments gets it.
    Prompt,
}

impl EntryKind {
    pub fn is_tool(&self) -> bool {
        *self == Self::Tool
    }

    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Tool => "tool",
            Self::Resource => "resource",
            Self::Prompt => "prompt",
        }
    }

    /// `tool`, `resource` or `prompt`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "tool" => Some(Self::Tool),
            "resource" => Some(Self::Resource),
            "prompt" => Some(Self::Prompt),
            _ => None,
        }
    }
}

impl ToolDef {
    /// A definition with an empty-object input schema and default annotations.
    pub fn new(path: ToolPath, name: impl Into<String>, description: impl Into<String>) -> Self {
        Self {
            path,
            name: name.into(),
            description: description.into(),
            input_schema: serde_json::json!({"type": "object", "properties": {}}),
            output_schema: None,
            annotations: Annotations::default(),
            origin: String::new(),
            timeout_ms: None,
            native: None,
            kind: EntryKind::Tool,
        }
    }

    /// Declares the tool's own call timeout (see [`ToolDef::timeout_ms`]).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout_ms = Some(timeout.as_millis().min(u64::MAX as u128) as u64);
        self
    }

    pub fn with_input(mut self, schema: Value) -> Self {
        self.input_schema = schema;
        self
    }

    pub fn with_output(mut self, schema: Value) -> Self {
        self.output_schema = Some(schema);
        self
    }

    pub fn with_annotations(mut self, annotations: Annotations) -> Self {
        self.annotations = annotations;
        self
    }

    /// The first line of the description, for compact listings.
    pub fn summary(&self) -> &str {
        self.description.lines().next().unwrap_or("").trim()
    }
}

/// Makes a Title Case tool name from words or an identifier: `issues_create` → "Issues Create",
/// `listPets` → "List Pets", `"Find pet by ID"` → "Find Pet By Id".
///
/// Every generated tool name (imported operations, upstream MCP tools, plugins) goes through
/// this helper, and the catalog normalises names that are not Title Case ([`is_title_case`]).
pub fn title_case(s: &str) -> String {
    crate::path::to_segment(s)
        .split('_')
        .map(capitalize)
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Upper-cases the first letter of each word of human-written text and keeps the rest:
/// `"Create GitHub issue"` → "Create GitHub Issue". Identifiers go through [`title_case`].
pub fn capitalize_words(s: &str) -> String {
    s.split_whitespace()
        .map(capitalize)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether `name` is a Title Case tool name: not empty, no surrounding or doubled whitespace,
/// no identifier separators (`_`), and every word that starts with a letter starts with an
/// upper-case one ("List Pets", "Get v2 Items" is not; "Get V2 Items" is).
pub fn is_title_case(name: &str) -> bool {
    !name.is_empty()
        && name.trim() == name
        && !name.contains("  ")
        && !name.contains('_')
        && name.split_whitespace().all(|w| {
            w.chars()
                .next()
                .is_some_and(|c| !c.is_alphabetic() || c.is_uppercase())
        })
}

fn capitalize(w: &str) -> String {
    let mut c = w.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

/// The broad class of a tool failure; faces map it to their own codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolErrorKind {
    /// The arguments were wrong in a way the schema could not say.
    InvalidInput,
    /// Something the tool looked for does not exist.
    NotFound,
    /// The thing already exists or conflicts with current state.
    Conflict,
    /// An upstream service failed or answered with an error.
    Upstream,
    /// The tool did not finish in time.
    Timeout,
    /// Credentials missing or refused.
    Unauthorized,
    /// A bug or unexpected state inside the tool.
    Internal,
    /// The input was read and refused for reasons given in `data` (e.g. a document's staged
    /// validation errors); nothing changed. Faces answer it as the caller's error (HTTP 422).
    Rejected,
    /// The caller has not granted access to their own account at an upstream (a source with
    /// `oauth2_user` credentials); `data.connection` names it. The engine pauses the call until
    /// the grant is made.
    GrantRequired,
    /// A person must do something at a link first (enter a secret on the upstream's own page,
    /// say); `data.url` is the link. The engine pauses the call on an `input` wait with that
    /// link and runs it again once the wait is answered, so the handler can check it was done.
    ActionRequired,
}

/// A handler's failure: a kind, a message for humans and agents, and optional structured data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolError {
    pub kind: ToolErrorKind,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl ToolError {
    pub fn new(kind: ToolErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            data: None,
        }
    }
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ToolErrorKind::InvalidInput, message)
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ToolErrorKind::NotFound, message)
    }
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(ToolErrorKind::Conflict, message)
    }
    pub fn upstream(message: impl Into<String>) -> Self {
        Self::new(ToolErrorKind::Upstream, message)
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ToolErrorKind::Internal, message)
    }
    /// Refused with a structured answer (`data`) the caller can act on.
    pub fn rejected(message: impl Into<String>, data: Value) -> Self {
        Self::new(ToolErrorKind::Rejected, message).with_data(data)
    }
    /// The caller must first grant access to their account at `connection`.
    pub fn grant_required(connection: &str) -> Self {
        Self::new(
            ToolErrorKind::GrantRequired,
            format!("connect your account at '{connection}' first: the call needs your own grant"),
        )
        .with_data(serde_json::json!({"connection": connection}))
    }

    /// A person must first act at `url` (see [`ToolErrorKind::ActionRequired`]).
    pub fn action_required(message: impl Into<String>, url: &str) -> Self {
        Self::new(ToolErrorKind::ActionRequired, message).with_data(serde_json::json!({"url": url}))
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(ToolErrorKind::Unauthorized, message)
    }
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ToolError {}

/// Gives handlers credentials by auth-provider id. Secrets never pass through scripts.
#[async_trait::async_trait]
pub trait TokenSource: Send + Sync {
    /// A token or key for `provider` (e.g. "github"), fetched or refreshed as needed.
    async fn token(&self, provider: &str) -> Result<String, ToolError>;

    /// The calling principal's own access token at `connection` (a source with `oauth2_user`
    /// credentials), refreshed as needed; a [`ToolErrorKind::GrantRequired`] error when the
    /// principal has not granted access (or the grant can no longer be refreshed).
    async fn user_token(&self, connection: &str) -> Result<String, ToolError> {
        Err(ToolError::grant_required(connection))
    }
}

/// What a handler may know about the call it serves.
#[derive(Clone)]
pub struct ToolContext {
    /// The principal on whose behalf the call runs.
    pub principal: Arc<str>,
    /// The execution (script or paused call) this call belongs to, if any.
    pub execution_id: Option<Arc<str>>,
    /// The path being called (handlers shared by many tools use it).
    pub path: ToolPath,
    /// The time the handler may take; the engine enforces it too.
    pub timeout: Duration,
    tokens: Option<Arc<dyn TokenSource>>,
    engine: Option<Arc<dyn EngineAccess>>,
    wire: Option<WireSlot>,
    progress: Option<ProgressSink>,
    client: Option<Arc<dyn ClientChannel>>,
}

/// Where a handler that relays another protocol keeps the answer exactly as that protocol gave
/// it (an MCP `CallToolResult` with every content block, `structuredContent`, `_meta`,
/// `isError`), beside the JSON value it returns. The engine sets one only for a face that
/// relays results unchanged (a virtual MCP server); the first answer kept wins.
pub type WireSlot = Arc<std::sync::OnceLock<Value>>;

/// One progress report of a long call (MCP `notifications/progress`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    pub progress: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Where a handler reports progress for a face that relays it to its client (a virtual MCP
/// server whose client asked for progress). The engine sets one only for the face's own call.
#[derive(Clone)]
pub struct ProgressSink(Arc<dyn Fn(Progress) + Send + Sync>);

impl ProgressSink {
    pub fn new(f: impl Fn(Progress) + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }

    /// Passes one report on.
    pub fn report(&self, progress: Progress) {
        (self.0)(progress)
    }
}

impl fmt::Debug for ProgressSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ProgressSink")
    }
}

/// The face's client, for the requests an upstream makes during a call that a face relays
/// unchanged (MCP `elicitation/create`, `sampling/createMessage`). The engine hands it only to
/// the face's own call, as it does progress.
#[async_trait::async_trait]
pub trait ClientChannel: Send + Sync {
    /// Which client this is: channels of calls from one client (one session of a face) have
    /// the same id, and channels of different clients different ones.
    fn client_id(&self) -> u64;
    /// Whether the client declared `capability`: `elicitation` (form mode), `elicitation.url`
    /// or `sampling`.
    fn supports(&self, capability: &str) -> bool;
    /// Sends the request `method` with `params` to the client and answers its result.
    async fn request(&self, method: &str, params: Value) -> Result<Value, ToolError>;
}

impl fmt::Debug for dyn ClientChannel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ClientChannel")
    }
}

/// What a handler may ask of the engine that runs it, always as the same caller: the interface
/// lets tools that compose other tools (agent builders, saved scripts, agent runs) go through
/// the one call path without any plugin or source importing the engine.
#[async_trait::async_trait]
pub trait EngineAccess: Send + Sync {
    /// The paths of every tool the caller may see.
    fn visible_paths(&self) -> Vec<String>;
    /// The definition of the catalog entry at `path` (a tool, resource or prompt), when the
    /// caller may see it.
    fn entry(&self, _path: &str) -> Option<ToolDef> {
        None
    }
    /// Calls a tool as the caller through the engine's call path (policy, validation,
    /// approval, audit). A call that would need approval fails instead of pausing.
    async fn call(&self, path: &str, args: Value) -> Result<Value, ToolError>;
    /// Runs `code` (an async function body with `input` and the `tools` proxy) in the sandbox
    /// as the caller; its tool calls go through the engine's call path.
    async fn run_script(
        &self,
        code: &str,
        input: Value,
        how: NestedRun,
    ) -> Result<Value, ToolError>;
    /// Runs the live version of agent `agent` on `input` as the caller (a sub-agent when the
    /// caller is itself an execution: its waits pause that execution) and answers the run's
    /// result `{output, steps, toolCalls, usage, ...}`.
    async fn run_agent(
        &self,
        agent: &str,
        input: String,
        thread_id: Option<String>,
    ) -> Result<Value, ToolError> {
        let _ = (agent, input, thread_id);
        Err(ToolError::internal("agent runs are not available here"))
    }
    /// Asks the caller's people `message` (a form of `schema`) while the call runs, as a stored
    /// question any session may answer, and waits up to `timeout`: `{action, content?}` as
    /// MCP's `ElicitResult`.
    async fn ask(
        &self,
        message: &str,
        schema: Option<Value>,
        timeout: Duration,
    ) -> Result<Value, ToolError> {
        let _ = (message, schema, timeout);
        Err(ToolError::internal("questions are not available here"))
    }
}

/// How [`EngineAccess::run_script`] runs saved code.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NestedRun {
    /// Only read-only tools may be called; any other call fails with a clear error.
    pub read_only: bool,
    /// A trial run: a call that would need approval is refused, never paused or run.
    pub trial: bool,
    /// Only check that the code compiles: nothing runs.
    pub compile_only: bool,
}

impl fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolContext")
            .field("principal", &self.principal)
            .field("execution_id", &self.execution_id)
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl ToolContext {
    pub fn new(principal: Arc<str>, path: ToolPath) -> Self {
        Self {
            principal,
            execution_id: None,
            path,
            timeout: Duration::from_secs(30),
            tokens: None,
            engine: None,
            wire: None,
            progress: None,
            client: None,
        }
    }
    /// Lets the handler put requests to the face's client ([`ClientChannel`]).
    pub fn with_client(mut self, client: Option<Arc<dyn ClientChannel>>) -> Self {
        self.client = client;
        self
    }
    /// The face's client, when the face relays its requests.
    pub fn client(&self) -> Option<&Arc<dyn ClientChannel>> {
        self.client.as_ref()
    }
    /// Lets the handler report progress ([`ProgressSink`]).
    pub fn with_progress(mut self, sink: Option<ProgressSink>) -> Self {
        self.progress = sink;
        self
    }
    /// Whether the face relays progress reports ([`Self::report_progress`]).
    pub fn wants_progress(&self) -> bool {
        self.progress.is_some()
    }
    /// Reports progress to the face's client; a no-op when nobody asked for it.
    pub fn report_progress(&self, progress: Progress) {
        if let Some(sink) = &self.progress {
            sink.report(progress);
        }
    }
    /// Lets the handler keep its protocol's own answer (see [`WireSlot`]).
    pub fn with_wire(mut self, slot: Option<WireSlot>) -> Self {
        self.wire = slot;
        self
    }
    /// Whether the face wants the protocol's own answer ([`Self::keep_wire`]).
    pub fn wants_wire(&self) -> bool {
        self.wire.is_some()
    }
    /// Keeps the protocol's own answer for a face that relays it unchanged; a no-op when no
    /// face asked for it.
    pub fn keep_wire(&self, answer: Value) {
        if let Some(slot) = &self.wire {
            let _ = slot.set(answer);
        }
    }
    pub fn with_engine(mut self, engine: Option<Arc<dyn EngineAccess>>) -> Self {
        self.engine = engine;
        self
    }
    /// The engine, as the caller (`None` outside an engine, e.g. in a plugin's unit tests).
    pub fn engine(&self) -> Option<&Arc<dyn EngineAccess>> {
        self.engine.as_ref()
    }
    pub fn with_execution(mut self, id: Option<Arc<str>>) -> Self {
        self.execution_id = id;
        self
    }
    pub fn with_tokens(mut self, tokens: Option<Arc<dyn TokenSource>>) -> Self {
        self.tokens = tokens;
        self
    }
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
    /// The calling principal's own token at `connection` ([`TokenSource::user_token`]).
    pub async fn user_token(&self, connection: &str) -> Result<String, ToolError> {
        match &self.tokens {
            Some(t) => t.user_token(connection).await,
            None => Err(ToolError::grant_required(connection)),
        }
    }

    /// Asks for a credential of the plugin's auth provider `provider`.
    pub async fn token(&self, provider: &str) -> Result<String, ToolError> {
        match &self.tokens {
            Some(t) => t.token(provider).await,
            None => Err(ToolError::unauthorized(format!(
                "no credentials are configured for auth provider '{provider}'"
            ))),
        }
    }
}

/// The behaviour of a tool.
#[async_trait::async_trait]
pub trait ToolHandler: Send + Sync {
    async fn call(&self, ctx: ToolContext, args: Value) -> Result<Value, ToolError>;

    /// An operation on a catalog entry other than reading it ([`EntryOp`]); entries of
    /// sources that have none refuse it.
    async fn entry_op(&self, ctx: ToolContext, op: EntryOp) -> Result<Value, ToolError> {
        let _ = ctx;
        Err(ToolError::invalid(format!(
            "this entry does not support {}",
            op.name()
        )))
    }
}

/// What a face may ask of a resource or prompt entry besides reading it.
#[derive(Debug, Clone, PartialEq)]
pub enum EntryOp {
    /// Suggestions for one argument (MCP `completion/complete`): `argument` is `{name, value}`,
    /// `context` the optional `{arguments}` already chosen. Answers `{completion: {values,
    /// total?, hasMore?}}`.
    Complete {
        argument: Value,
        context: Option<Value>,
    },
    /// Tell the face when the resource at `uri` changes (MCP `resources/subscribe`).
    Subscribe { uri: String },
    /// Stop telling (MCP `resources/unsubscribe`).
    Unsubscribe { uri: String },
}

impl EntryOp {
    /// The operation's MCP method, for messages.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Complete { .. } => "completion/complete",
            Self::Subscribe { .. } => "resources/subscribe",
            Self::Unsubscribe { .. } => "resources/unsubscribe",
        }
    }
}

/// Adapts an async closure into a [`ToolHandler`].
pub struct FnHandler<F>(pub F);

#[async_trait::async_trait]
impl<F, Fut> ToolHandler for FnHandler<F>
where
    F: Fn(ToolContext, Value) -> Fut + Send + Sync,
    Fut: std::future::Future<Output = Result<Value, ToolError>> + Send,
{
    async fn call(&self, ctx: ToolContext, args: Value) -> Result<Value, ToolError> {
        (self.0)(ctx, args).await
    }
}

/// A tool: its definition and its handler.
#[derive(Clone)]
pub struct Tool {
    pub def: ToolDef,
    pub handler: Arc<dyn ToolHandler>,
}

impl fmt::Debug for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tool").field("def", &self.def).finish()
    }
}

impl Tool {
    pub fn new(def: ToolDef, handler: Arc<dyn ToolHandler>) -> Self {
        Self { def, handler }
    }

    /// A tool from a definition and an async closure.
    pub fn from_fn<F, Fut>(def: ToolDef, f: F) -> Self
    where
        F: Fn(ToolContext, Value) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<Value, ToolError>> + Send + 'static,
    {
        Self::new(def, Arc::new(FnHandler(f)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn title_case_from_identifiers() {
        assert_eq!(title_case("issues_create"), "Issues Create");
        assert_eq!(title_case("listPets"), "List Pets");
        assert_eq!(title_case("get_node"), "Get Node");
        assert_eq!(title_case("HTTPServer"), "Http Server");
        assert_eq!(title_case("issues/create-comment"), "Issues Create Comment");
        assert_eq!(title_case("v2Items"), "V2 Items");
        assert_eq!(title_case("tables.rows.insert"), "Tables Rows Insert");
        assert_eq!(title_case("Find pet by ID"), "Find Pet By Id");
        assert_eq!(title_case("List all pets"), "List All Pets");
    }

    #[test]
    fn words_are_capitalized_keeping_their_letters() {
        assert_eq!(
            capitalize_words("Create GitHub issue"),
            "Create GitHub Issue"
        );
        assert_eq!(capitalize_words("  read   file "), "Read File");
        assert_eq!(capitalize_words("élan vital"), "Élan Vital");
    }

    #[test]
    fn title_case_check() {
        for ok in [
            "List Pets",
            "Get V2 Items",
            "Create GitHub Issue",
            "Echo",
            "Sum (Beta)",
        ] {
            assert!(is_title_case(ok), "{ok}");
        }
        for bad in [
            "",
            "list pets",
            "List pets",
            "list_pets",
            " List",
            "List  Pets",
            "listPets",
        ] {
            assert!(!is_title_case(bad), "{bad:?}");
        }
        for s in ["list_pets", "listPets", "List all pets", "HTTPServer", "x"] {
            assert!(is_title_case(&title_case(s)), "{s}");
        }
    }

    #[tokio::test]
    async fn context_without_tokens_is_a_clear_error() {
        let ctx = ToolContext::new("alice".into(), ToolPath::parse("a.b").unwrap());
        let e = ctx.token("github").await.unwrap_err();
        assert_eq!(e.kind, ToolErrorKind::Unauthorized);
        assert!(e.message.contains("github"));
    }

    #[tokio::test]
    async fn closures_are_handlers() {
        let t = Tool::from_fn(
            ToolDef::new(ToolPath::parse("a.b").unwrap(), "B", "b"),
            |_c, a| async move { Ok(a) },
        );
        let ctx = ToolContext::new("x".into(), t.def.path.clone());
        let out = t
            .handler
            .call(ctx, serde_json::json!({"k": 1}))
            .await
            .unwrap();
        assert_eq!(out["k"], 1);
    }
}
