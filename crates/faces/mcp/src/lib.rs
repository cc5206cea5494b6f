//! Toolshed's MCP face.
//!
//! Agents see four meta-tools whose descriptions are generated from their own view of the
//! catalog (how many tools, which namespaces):
//!
//! - `search_tools` — ranked search, compact hits;
//! - `read_tool` — the compact schema text of one tool, with an example call;
//! - `run_script` — JavaScript in the sandbox, calling tools through `tools.<path>(args)`;
//! - `resume` — approve or deny the pending destructive call of a paused execution.
//!
//! In direct mode the allowed tools are also listed as plain MCP tools (dots become `__` in their
//! MCP names for clients that reject dots). Every call goes through the engine; this module only
//! translates between MCP messages and engine calls.
//!
//! Approvals: when a call pauses and the client supports form elicitation (protocol versions
//! before 2026-07-28), the human is asked right away through the client; accept approves,
//! decline denies, cancel leaves the execution paused for `resume`.
//!
//! Virtual servers ([`McpOptions::server`], [`virtual_server`]): named views of the catalog served
//! at `/mcp/servers/{name}` (or over stdio) as plain MCP tools under catalog or original names,
//! relaying upstream results unchanged.
//!
//! Transports: [`serve_stdio`] and [`http_router`] (streamable HTTP, mounted at `/mcp`). Over
//! HTTP the caller is authenticated before a session exists ([`admit`]), and sessions are
//! bounded in total and per principal and end when idle ([`sessions`]).

mod admit;
mod channel;
mod elicit;
mod fast;
mod held;
mod logs;
mod meta;
mod progress;
pub mod sessions;
mod subscriptions;
mod tasks;
mod virtual_server;

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ContentBlock,
    CreateTaskResult, CustomRequest, CustomResult, GetPromptRequestParams, GetPromptResponse,
    GetTaskParams, GetTaskResult, Implementation, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams,
    ReadResourceResponse, ServerCapabilities, ServerConfig, Tool as McpTool, ToolAnnotations,
    UpdateTaskParams,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Map, Value};
use toolshed_core::VirtualServer;
use toolshed_engine::{Caller, Engine, EngineError, Face, Outcome};
use toolshed_identity::{Authenticator, Who};

pub use meta::{search_text, META_TOOLS};
pub use sessions::{SessionLimits, SessionTable};

/// Errors starting an MCP transport.
#[derive(Debug, thiserror::Error)]
pub enum McpFaceError {
    #[error("MCP session failed: {0}")]
    Session(String),
}

/// How principals are found for a connection.
#[derive(Clone)]
pub enum Identity {
    /// One configured principal (stdio, CLI).
    Fixed(String),
    /// Whoever the admission layer authenticated from the HTTP headers (API keys, OAuth tokens).
    Network(Authenticator),
}

/// Options of the MCP face.
#[derive(Clone, Debug)]
pub struct McpOptions {
    /// Also expose every allowed tool as a plain MCP tool.
    pub direct: bool,
    /// Offer the `resume` meta-tool (the agent deciding, where policy allows); on by default.
    pub resume_tool: bool,
    /// Serve this virtual server instead: its tools only, no meta-tools.
    pub server: Option<Arc<VirtualServer>>,
    /// Where upstream log messages arrive; a virtual server relays those of its sources.
    pub notices: Option<toolshed_core::notices::Notices>,
}

impl Default for McpOptions {
    fn default() -> Self {
        Self {
            direct: false,
            resume_tool: true,
            server: None,
            notices: None,
        }
    }
}

/// The MCP server handler. One per session; cheap to clone.
#[derive(Clone)]
pub struct ToolshedMcp {
    engine: Engine,
    identity: Arc<Identity>,
    options: McpOptions,
    /// This session's `logging/setLevel` (relayed upstream logs).
    log_level: logs::SessionLevel,
    /// This session's resource subscriptions (virtual servers).
    subscriptions: subscriptions::SessionSubscriptions,
    /// This session's identity among the clients of upstream requests ([`channel`]).
    session_id: u64,
    /// Calls of 2026-07-28 clients that wait for their input (shared by every session).
    held: Arc<held::HeldCalls>,
    /// Over streamable HTTP: the session table, where a new session's plain calls are let
    /// onto the direct path ([`fast`]).
    sessions: Option<Arc<SessionTable>>,
}

impl ToolshedMcp {
    pub fn new(engine: Engine, identity: Identity, options: McpOptions) -> Self {
        Self {
            engine,
            identity: Arc::new(identity),
            options,
            log_level: Arc::default(),
            subscriptions: Arc::default(),
            session_id: channel::new_session_id(),
            held: held::HeldCalls::of_process(),
            sessions: None,
        }
    }

    /// The handler of a new session: shared engine and options, a level of its own.
    fn for_session(&self) -> Self {
        Self {
            log_level: Arc::default(),
            subscriptions: Arc::default(),
            session_id: channel::new_session_id(),
            ..self.clone()
        }
    }

    fn caller(&self, ctx: &RequestContext<RoleServer>) -> Result<Caller, McpError> {
        self.caller_of(
            ctx.extensions
                .get::<http::request::Parts>()
                .and_then(|p| p.extensions.get::<Who>()),
        )
    }

    /// The caller: the configured principal, or whom the admission layer authenticated.
    fn caller_of(&self, who: Option<&Who>) -> Result<Caller, McpError> {
        match self.identity.as_ref() {
            Identity::Fixed(p) => Ok(self.engine.caller(p, Face::Mcp)),
            // The admission layer authenticated the request and left who it is in the
            // request's extensions; a request without one never passed admission.
            Identity::Network(_) => match who {
                Some(Who::Principal(p)) => Ok(self.engine.caller(p, Face::Mcp)),
                Some(Who::SignedIn(s)) => {
                    Ok(self
                        .engine
                        .signed_in(&s.principal, &s.roles, &s.token, Face::Mcp))
                }
                None => Err(McpError::invalid_request(
                    "the request was not authenticated",
                    None,
                )),
            },
        }
    }
}

/// How a call on a virtual server is answered: as a task, with waits put to the client
/// (`peer`), with the upstream's progress relayed.
struct VirtualCall<'a> {
    as_task: bool,
    peer: Option<&'a rmcp::Peer<RoleServer>>,
    progress: Option<&'a progress::Forward>,
    /// The session's client, for the upstream's requests during the call.
    client: Option<&'a Arc<dyn toolshed_core::ClientChannel>>,
}

impl ToolshedMcp {
    /// A call on a virtual server: its name resolved among the tools it exposes to the caller,
    /// then the engine's one path, the upstream's answer relayed unchanged.
    async fn call_virtual(
        &self,
        server: &VirtualServer,
        caller: &Caller,
        name: &str,
        args: Value,
        how: VirtualCall<'_>,
    ) -> Result<CallToolResponse, McpError> {
        let VirtualCall {
            as_task,
            peer,
            progress,
            client,
        } = how;
        let Some(path) = virtual_server::resolve(&self.engine, caller, server, name) else {
            return Err(McpError::invalid_params(
                format!("unknown tool '{}'", truncate(name, 200)),
                None,
            ));
        };
        let hooks = toolshed_engine::RelayHooks {
            progress: progress.map(progress::Forward::sink),
            client: client.cloned(),
        };
        let relayed = self.engine.relay(caller, &path, args, hooks).await;
        let settled = match &relayed.outcome {
            Ok(o) if o.is_paused() && as_task => {
                return Ok(CallToolResponse::Task(CreateTaskResult::new(
                    tasks::of_paused(o),
                )))
            }
            Ok(o) if o.is_paused() => {
                Some(elicit::settle(&self.engine, caller, o.clone(), peer).await)
            }
            _ => None,
        };
        Ok(virtual_server::answer(relayed, settled).into())
    }
}

/// A call on a virtual server that may be held for its client's input ([`held`]).
struct HeldCall {
    server: Arc<VirtualServer>,
    caller: Caller,
    name: String,
    args: Value,
    as_task: bool,
    /// The upstream's progress, relayed under the first request's token.
    progress: Option<progress::Forward>,
}

impl ToolshedMcp {
    /// Runs a call of a 2026-07-28 client in a task of its own, whose upstream's questions
    /// come back to the client as `input_required` ([`held`]).
    async fn call_held(
        &self,
        call: HeldCall,
        capabilities: Option<rmcp::model::ClientCapabilities>,
    ) -> Result<CallToolResponse, McpError> {
        let (client, questions) = held::client(&call.caller.principal, capabilities);
        let principal = call.caller.principal.clone();
        let tool = call.name.clone();
        let this = self.clone();
        let task = tokio::spawn(async move {
            let how = VirtualCall {
                as_task: call.as_task,
                peer: None,
                progress: call.progress.as_ref(),
                client: Some(&client),
            };
            let r = this
                .call_virtual(&call.server, &call.caller, &call.name, call.args, how)
                .await;
            if let Some(p) = call.progress {
                p.finish().await;
            }
            r
        });
        self.held.start(principal, tool, questions, task).await
    }
}

fn truncate(s: &str, max: usize) -> &str {
    &s[..s.floor_char_boundary(max)]
}

/// What a virtual server says of itself: its own name and description.
fn virtual_info(server: &VirtualServer) -> ServerConfig {
    let description = match server.def().description.trim() {
        "" => format!("The '{}' tools, served through Toolshed.", server.name()),
        d => d.to_string(),
    };
    let mut capabilities = ServerCapabilities::builder()
        .enable_tools()
        .enable_tool_list_changed()
        .enable_tasks()
        .build();
    // Upstream log messages are relayed (logging/setLevel per session).
    capabilities.logging = Some(Default::default());
    if server.has_resources() {
        // Subscriptions are relayed to upstreams that offer them (others refuse, saying so).
        capabilities.resources =
            serde_json::from_value(serde_json::json!({"subscribe": true})).ok();
    }
    if server.has_prompts() {
        capabilities.prompts = Some(Default::default());
    }
    if server.has_resources() || server.has_prompts() {
        capabilities.completions = Some(Default::default());
    }
    ServerConfig::new(capabilities)
        .with_server_info(Implementation::new(
            server.name().to_string(),
            env!("CARGO_PKG_VERSION"),
        ))
        .with_instructions(description)
}

/// `tables.rows.query` → `tables__rows__query` for clients that reject dots in tool names.
pub fn mcp_name(path: &str) -> String {
    path.replace('.', "__")
}

/// The reverse of [`mcp_name`]; plain dot paths are accepted too.
pub fn path_from_mcp_name(name: &str) -> String {
    name.replace("__", ".")
}

fn text_result(text: String, is_error: bool) -> CallToolResult {
    if is_error {
        CallToolResult::error(vec![ContentBlock::text(text)])
    } else {
        CallToolResult::success(vec![ContentBlock::text(text)])
    }
}

fn json_text(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// An engine error as an MCP tool error the agent can read. A tool's structured refusal (for
/// example `{ok: false, stage, errors}` of a document that does not validate) is also the
/// result's `structuredContent`.
pub fn error_result(e: &EngineError) -> CallToolResult {
    let mut r = text_result(json_text(&serde_json::json!({"error": e.to_json()})), true);
    if e.is_rejection() {
        r.structured_content = e.data();
    }
    r
}

/// A script or call outcome as an MCP result (failed scripts are tool errors).
pub fn outcome_result(o: &Outcome) -> CallToolResult {
    let is_error = matches!(o, Outcome::Failed { .. });
    text_result(json_text(&o.to_json()), is_error)
}

fn object_schema(v: Value) -> Arc<Map<String, Value>> {
    match v {
        Value::Object(m) => Arc::new(m),
        _ => Arc::new(Map::new()),
    }
}

/// What a call needs of the session it arrived on.
pub(crate) struct CallIn {
    /// The session's client.
    pub(crate) peer: rmcp::Peer<RoleServer>,
    /// The call's JSON-RPC id (the upstream's requests during the call name it).
    pub(crate) id: rmcp::model::RequestId,
    /// The client's progress token, when it asked for progress.
    pub(crate) progress: Option<rmcp::model::ProgressToken>,
    pub(crate) capabilities: Option<rmcp::model::ClientCapabilities>,
    /// A 2026-07-28 client (no server-to-client requests).
    pub(crate) modern: bool,
}

impl ToolshedMcp {
    /// `tools/call` of a session, however it arrived: through rmcp's session ([`ServerHandler::call_tool`])
    /// or on the direct path of plain calls ([`fast`]). One definition for both, so they
    /// cannot answer differently. `cancelled` completes when the client cancels the call.
    pub(crate) async fn call_tool_in(
        &self,
        caller: Caller,
        request: CallToolRequestParams,
        how: CallIn,
        cancelled: impl std::future::Future<Output = ()>,
    ) -> Result<CallToolResponse, McpError> {
        let CallIn {
            peer: session_peer,
            id,
            progress: progress_token,
            capabilities,
            modern,
        } = how;
        let args = Value::Object(request.arguments.unwrap_or_default());
        let name = request.name.as_ref();
        let resume_tool = self.options.resume_tool;
        // A client of the tasks extension gets a paused run as a task to poll, not an
        // elicitation in the middle of the call.
        let as_task = capabilities.as_ref().is_some_and(|c| c.supports_tasks());
        let peer = (!as_task).then_some(&session_peer);
        if let Some(server) = &self.options.server {
            // A client of 2026-07-28 takes no requests from the server: an upstream's question
            // comes back as `input_required`, and its retry continues the held call.
            if let Some(state) = request.request_state.as_deref() {
                return self
                    .held
                    .resume(&caller.principal, name, state, request.input_responses)
                    .await;
            }
            if modern {
                let held = HeldCall {
                    server: server.clone(),
                    caller,
                    name: name.to_string(),
                    args,
                    as_task,
                    progress: progress_token
                        .map(|token| progress::Forward::start(session_peer.clone(), token)),
                };
                return self.call_held(held, capabilities).await;
            }
            let progress = progress_token
                .clone()
                .map(|token| progress::Forward::start(session_peer.clone(), token));
            let client = channel::of(self.session_id, session_peer.clone(), id);
            let how = VirtualCall {
                as_task,
                peer,
                progress: progress.as_ref(),
                client: Some(&client),
            };
            // A client's `notifications/cancelled` drops the call, and with it the upstream
            // request, which then hears of the cancellation too.
            let r = tokio::select! {
                r = self.call_virtual(server, &caller, name, args, how) => r,
                _ = cancelled => Err(McpError::invalid_request("the call was cancelled", None)),
            };
            if let Some(p) = progress {
                p.finish().await;
            }
            return r;
        }
        if let Some(r) = meta::call_meta(
            &self.engine,
            &caller,
            name,
            &args,
            meta::MetaCall {
                peer,
                progress: progress_token,
                resume_tool,
                as_task,
            },
        )
        .await
        {
            return Ok(match r {
                meta::MetaAnswer::Done(r) => r.into(),
                meta::MetaAnswer::Task(o) => {
                    CallToolResponse::Task(CreateTaskResult::new(tasks::of_paused(&o)))
                }
            });
        }
        if !self.options.direct {
            return Ok(error_result(&EngineError::NotFound {
                path: name.to_string(),
            })
            .into());
        }
        let path = path_from_mcp_name(name);
        let result = match self.engine.call(&caller, &path, args).await {
            Ok(o) if as_task && o.is_paused() => {
                return Ok(CallToolResponse::Task(CreateTaskResult::new(
                    tasks::of_paused(&o),
                )))
            }
            Ok(o) => outcome_result(&elicit::settle(&self.engine, &caller, o, peer).await),
            Err(e) => error_result(&e),
        };
        Ok(result.into())
    }
}

impl ServerHandler for ToolshedMcp {
    fn get_info(&self) -> ServerConfig {
        if let Some(server) = &self.options.server {
            return virtual_info(server);
        }
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_tasks()
                .build(),
        )
            .with_server_info(
                Implementation::new("toolshed", env!("CARGO_PKG_VERSION")).with_title("Toolshed tool gateway"),
            )
            .with_instructions(
                "Toolshed gives you one governed catalog of tools. Find tools with search_tools, read one with \
                 read_tool, then call them from run_script: `return await tools.<path>({...})`. Destructive calls \
                 pause for human approval; continue with resume.",
            )
    }

    /// Watches the catalog for this session and tells the client when its tool list changed
    /// (sources added, removed or refreshed, upstream servers changing their tools).
    async fn on_initialized(&self, context: rmcp::service::NotificationContext<RoleServer>) {
        let engine = self.engine.clone();
        let peer = context.peer;
        if let (Some(server), Some(notices)) = (&self.options.server, &self.options.notices) {
            logs::relay(
                notices,
                server.clone(),
                logs::Session {
                    level: self.log_level.clone(),
                    subscriptions: self.subscriptions.clone(),
                },
                peer.clone(),
            );
        }
        let subscriptions = self.subscriptions.clone();
        // Over HTTP, a session whose client is never asked anything during a call may have its
        // plain calls served without rmcp's session machinery ([`fast`]).
        let direct = self.sessions.clone().and_then(|table| {
            let id = context
                .extensions
                .get::<http::request::Parts>()?
                .headers
                .get("mcp-session-id")?
                .to_str()
                .ok()?
                .to_string();
            table.register_direct(&id, fast::Direct::of(self, &peer)?);
            Some((table, id))
        });
        tokio::spawn(async move {
            let mut seen = engine.catalog().load().version();
            loop {
                tokio::time::sleep(std::time::Duration::from_millis(500)).await;
                if peer.is_transport_closed() {
                    if let Some((table, id)) = &direct {
                        table.forget_direct(id);
                    }
                    subscriptions::end_all(&engine, &subscriptions).await;
                    break;
                }
                let now = engine.catalog().load().version();
                if now != seen {
                    seen = now;
                    if peer.notify_tool_list_changed().await.is_err() {
                        subscriptions::end_all(&engine, &subscriptions).await;
                        break;
                    }
                }
            }
        });
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let caller = self.caller(&ctx)?;
        if let Some(server) = &self.options.server {
            let tools = virtual_server::list(&self.engine, &caller, server);
            return Ok(ListToolsResult::with_all_items(tools));
        }
        let mut tools = meta::meta_tools(&self.engine, &caller, self.options.resume_tool);
        if self.options.direct {
            for d in self.engine.list_tools(&caller) {
                let ann = ToolAnnotations::new()
                    .read_only(d.annotations.read_only)
                    .destructive(d.annotations.destructive)
                    .idempotent(d.annotations.idempotent);
                tools.push(
                    McpTool::new(
                        mcp_name(d.path.as_str()),
                        d.description.clone(),
                        object_schema(d.input_schema.clone()),
                    )
                    .with_title(d.name.clone())
                    .with_annotations(ann),
                );
            }
        }
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let caller = self.caller(&ctx)?;
        let how = CallIn {
            peer: ctx.peer.clone(),
            id: ctx.id.clone(),
            progress: ctx.meta.get_progress_token(),
            capabilities: ctx.client_capabilities(),
            modern: ctx
                .protocol_version()
                .is_some_and(|v| v >= rmcp::model::ProtocolVersion::V_2026_07_28),
        };
        self.call_tool_in(caller, request, how, ctx.ct.cancelled())
            .await
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let caller = self.caller(&ctx)?;
        let Some(server) = &self.options.server else {
            return Ok(ListResourcesResult::default());
        };
        let (resources, _) = virtual_server::resources(&self.engine, &caller, server);
        Ok(ListResourcesResult::with_all_items(resources))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        let caller = self.caller(&ctx)?;
        let Some(server) = &self.options.server else {
            return Ok(ListResourceTemplatesResult::default());
        };
        let (_, templates) = virtual_server::resources(&self.engine, &caller, server);
        Ok(ListResourceTemplatesResult::with_all_items(templates))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let caller = self.caller(&ctx)?;
        let Some(server) = &self.options.server else {
            return Err(McpError::resource_not_found(
                "this endpoint serves no resources: connect to a virtual server (/mcp/servers/{name})",
                None,
            ));
        };
        let r = virtual_server::read(&self.engine, &caller, server, &request.uri).await?;
        Ok(r.into())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        let caller = self.caller(&ctx)?;
        let Some(server) = &self.options.server else {
            return Ok(ListPromptsResult::default());
        };
        let prompts = virtual_server::prompts(&self.engine, &caller, server);
        Ok(ListPromptsResult::with_all_items(prompts))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let caller = self.caller(&ctx)?;
        let Some(server) = &self.options.server else {
            return Err(McpError::invalid_params(
                "this endpoint serves no prompts: connect to a virtual server (/mcp/servers/{name})",
                None,
            ));
        };
        let r = virtual_server::get_prompt(
            &self.engine,
            &caller,
            server,
            &request.name,
            request.arguments,
        )
        .await?;
        Ok(r.into())
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        let caller = self.caller(&ctx)?;
        let task = tasks::get(&self.engine, &caller, &request.task_id).await?;
        Ok(GetTaskResult::new(task))
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let caller = self.caller(&ctx)?;
        tasks::update(
            &self.engine,
            &caller,
            &request.task_id,
            request.input_responses,
        )
        .await
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let caller = self.caller(&ctx)?;
        tasks::cancel(&self.engine, &caller, &request.task_id).await
    }

    async fn complete(
        &self,
        request: rmcp::model::CompleteRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CompleteResult, McpError> {
        let caller = self.caller(&ctx)?;
        let Some(server) = &self.options.server else {
            return Ok(rmcp::model::CompleteResult::default());
        };
        subscriptions::complete(&self.engine, &caller, server, request).await
    }

    async fn subscribe(
        &self,
        request: rmcp::model::SubscribeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let caller = self.caller(&ctx)?;
        let Some(server) = &self.options.server else {
            return Err(McpError::resource_not_found(
                "this endpoint serves no resources: connect to a virtual server (/mcp/servers/{name})",
                None,
            ));
        };
        subscriptions::subscribe(
            &self.engine,
            &caller,
            server,
            &self.subscriptions,
            &request.uri,
        )
        .await
    }

    async fn unsubscribe(
        &self,
        request: rmcp::model::UnsubscribeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.caller(&ctx)?;
        subscriptions::unsubscribe(&self.engine, &self.subscriptions, &request.uri).await
    }

    #[allow(deprecated)]
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        logs::set_level(&self.log_level, request.level);
        Ok(())
    }

    /// `tasks/result` and `tasks/list` (the 2025-11-25 Tasks utility's requests, see
    /// [`tasks`]); any other method is not found.
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CustomResult, McpError> {
        let caller = self.caller(&ctx)?;
        match request.method.as_str() {
            "tasks/result" => {
                let task_id = request
                    .params
                    .as_ref()
                    .and_then(|p| p.get("taskId"))
                    .and_then(Value::as_str)
                    .ok_or_else(|| {
                        McpError::invalid_params(
                            "tasks/result needs params.taskId (a string)",
                            None,
                        )
                    })?;
                // A client of the tasks extension answers with tasks/update, not elicitation.
                let as_task = ctx
                    .client_capabilities()
                    .is_some_and(|c| c.supports_tasks());
                let peer = (!as_task).then_some(&ctx.peer);
                let r = tokio::select! {
                    r = tasks::result(&self.engine, &caller, task_id, peer) => r,
                    _ = ctx.ct.cancelled() => Err(McpError::invalid_request("the request was cancelled", None)),
                };
                r.map(CustomResult)
            }
            "tasks/list" => tasks::list(&self.engine, &caller).await.map(CustomResult),
            other => Err(McpError::new(
                rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                format!("method not found: '{}'", truncate(other, 100)),
                None,
            )),
        }
    }
}

/// Serves one MCP session over stdin/stdout until the client disconnects.
pub async fn serve_stdio(
    engine: Engine,
    principal: String,
    options: McpOptions,
) -> Result<(), McpFaceError> {
    let server = ToolshedMcp::new(engine, Identity::Fixed(principal), options);
    let running = server
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| McpFaceError::Session(e.to_string()))?;
    running
        .waiting()
        .await
        .map_err(|e| McpFaceError::Session(e.to_string()))?;
    Ok(())
}

/// Options of the streamable HTTP transport.
#[derive(Clone, Debug)]
pub struct HttpOptions {
    /// Hosts accepted in the `Host` header (loopback names when empty; `*` for any host).
    pub allowed_hosts: Vec<String>,
    /// The session table: its limits apply, and it shows the sessions that exist.
    pub sessions: Arc<SessionTable>,
    /// Virtual servers, each served at `/mcp/servers/{name}`; replaceable while serving.
    pub servers: ServerSet,
}

/// The virtual servers an HTTP face serves. Cheap to clone; clones share the set, so replacing
/// it ([`ServerSet::replace`]: servers defined or removed at runtime) changes what every router
/// built with it serves. A replaced definition gets a fresh endpoint: its open sessions end.
#[derive(Clone, Default, Debug)]
pub struct ServerSet(Arc<std::sync::RwLock<Vec<Arc<VirtualServer>>>>);

impl ServerSet {
    pub fn new(servers: Vec<Arc<VirtualServer>>) -> Self {
        Self(Arc::new(std::sync::RwLock::new(servers)))
    }

    /// Serves `servers` from now on.
    pub fn replace(&self, servers: Vec<Arc<VirtualServer>>) {
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = servers;
    }

    /// The server named `name`.
    pub fn get(&self, name: &str) -> Option<Arc<VirtualServer>> {
        let all = self.0.read().unwrap_or_else(|p| p.into_inner());
        all.iter().find(|s| s.name() == name).cloned()
    }

    /// Every server served now.
    pub fn all(&self) -> Vec<Arc<VirtualServer>> {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            allowed_hosts: vec![],
            sessions: SessionTable::new(SessionLimits::default()),
            servers: ServerSet::default(),
        }
    }
}

/// A router serving streamable HTTP MCP at `/mcp`: admission (authentication, session owner)
/// first, then rmcp's service over [`sessions::CappedSessions`].
pub fn http_router(
    engine: Engine,
    identity: Identity,
    options: McpOptions,
    http: HttpOptions,
) -> axum::Router {
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    let identity = Arc::new(identity);
    let mut config = StreamableHttpServerConfig::default();
    if http.allowed_hosts.iter().any(|h| h.trim() == "*") {
        config = config.disable_allowed_hosts();
    } else if !http.allowed_hosts.is_empty() {
        config.allowed_hosts = http.allowed_hosts;
    }
    let gate = admit::Gate {
        identity: identity.clone(),
        table: http.sessions.clone(),
    };
    let sessions_table = http.sessions.clone();
    let service = move |options: McpOptions| {
        let mut server = ToolshedMcp::new(engine.clone(), (*identity).clone(), options);
        server.sessions = Some(sessions_table.clone());
        StreamableHttpService::new(
            move || Ok(server.for_session()),
            Arc::new(sessions::CappedSessions::new(sessions_table.clone())),
            config.clone(),
        )
    };
    let notices = options.notices.clone();
    let main = service(options);
    // One endpoint per virtual server, made when it is first asked for and made again when
    // its definition changed; a name that is not served is not found (rather than the
    // meta-tool endpoint).
    type Endpoint = (
        Arc<VirtualServer>,
        StreamableHttpService<ToolshedMcp, sessions::CappedSessions>,
    );
    let endpoints: Arc<std::sync::Mutex<std::collections::HashMap<String, Endpoint>>> =
        Arc::default();
    let servers = http.servers.clone();
    let dispatch = move |axum::extract::Path(params): axum::extract::Path<
        Vec<(String, String)>,
    >,
                         request: axum::extract::Request| {
        let (servers, endpoints, service, notices) = (
            servers.clone(),
            endpoints.clone(),
            service.clone(),
            notices.clone(),
        );
        async move {
            use axum::response::IntoResponse;
            let name = params
                .iter()
                .find(|(k, _)| k == "name")
                .map(|(_, v)| v.chars().take(64).collect::<String>())
                .unwrap_or_default();
            let Some(server) = servers.get(&name) else {
                return (
                    axum::http::StatusCode::NOT_FOUND,
                    axum::Json(serde_json::json!({
                        "error": {"code": "unknown_server", "message": format!("no virtual server '{name}' is configured")}
                    })),
                )
                    .into_response();
            };
            let endpoint = {
                let mut all = endpoints.lock().unwrap_or_else(|p| p.into_inner());
                all.retain(|n, _| servers.get(n).is_some());
                match all.get(&name) {
                    Some((def, svc)) if Arc::ptr_eq(def, &server) => svc.clone(),
                    _ => {
                        let svc = service(McpOptions {
                            direct: false,
                            resume_tool: false,
                            server: Some(server.clone()),
                            notices: notices.clone(),
                        });
                        all.insert(name, (server, svc.clone()));
                        svc
                    }
                }
            };
            endpoint.handle(request).await.into_response()
        }
    };
    let router = axum::Router::new()
        .route("/mcp/servers/{name}", axum::routing::any(dispatch.clone()))
        .route("/mcp/servers/{name}/{*rest}", axum::routing::any(dispatch));
    let fast = fast::FastPath {
        table: http.sessions.clone(),
        servers: http.servers.clone(),
    };
    router
        .nest_service("/mcp", main)
        .layer(axum::middleware::from_fn_with_state(fast, fast::fast_path))
        .layer(axum::middleware::from_fn_with_state(gate, admit::admit))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(r: &CallToolResult) -> String {
        serde_json::to_value(r).unwrap()["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    #[test]
    fn overloaded_is_a_tool_error_distinct_from_busy() {
        let e = EngineError::Overloaded(toolshed_engine::Overloaded {
            running: 4,
            queued: 64,
        });
        let r = error_result(&e);
        assert_eq!(r.is_error, Some(true));
        let t = text(&r);
        assert!(t.contains(r#""code":"overloaded""#), "{t}");
        assert!(t.contains("the server is overloaded"), "{t}");
        let busy = text(&error_result(&EngineError::Busy { id: "ex_1".into() }));
        assert!(
            busy.contains(r#""code":"busy""#) && !busy.contains("overloaded"),
            "{busy}"
        );
    }
}
