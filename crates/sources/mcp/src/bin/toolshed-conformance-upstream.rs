//! `toolshed-conformance-upstream`: an MCP server with the fixtures that the official MCP
//! conformance suite (`@modelcontextprotocol/conformance` 0.1.16, `server` scenarios) calls on
//! the server under test. The interop script puts it behind the gateway and runs the suite
//! through the gateway; run the suite straight against it to see what the fixtures alone score.
//!
//! ```text
//! toolshed-conformance-upstream                serve over stdio
//! toolshed-conformance-upstream --http ADDR    serve streamable HTTP at http://ADDR/mcp and print
//!                                              "LISTENING http://<bound address>/mcp" on stdout
//! ```
//!
//! Tools (no annotations, like the suite's own fixture server): `test_simple_text`,
//! `test_image_content`, `test_audio_content`, `test_embedded_resource`,
//! `test_multiple_content_types`, `test_tool_with_logging` (three `info` log messages, 50 ms
//! apart), `test_tool_with_progress` (progress 0, 50 and 100 of 100 when the call carries a
//! progress token), `test_error_handling` (answers `isError: true`), `test_reconnection` (over
//! HTTP, closes its own SSE stream mid-call so the client has to resume with `Last-Event-ID`),
//! `test_sampling` (`sampling/createMessage` to the client), `test_elicitation`,
//! `test_elicitation_sep1034_defaults`, `test_elicitation_sep1330_enums` (`elicitation/create` to
//! the client) and `json_schema_2020_12_tool` (a JSON Schema 2020-12 input schema).
//!
//! Resources: `test://static-text`, `test://static-binary`, `test://watched-resource` (which
//! `resources/subscribe` watches: a subscriber gets `notifications/resources/updated` right away
//! and then every few seconds until it unsubscribes) and the template `test://template/{id}/data`.
//! Prompts: `test_simple_prompt`, `test_prompt_with_arguments`,
//! `test_prompt_with_embedded_resource` and `test_prompt_with_image`. `completion/complete`
//! suggests values for the prompt arguments and the template's `id`; `logging/setLevel` sets the
//! least severe level that is still sent.

// The fixtures exercise logging, sampling and `resources/subscribe`, which rmcp marks deprecated
// (SEP-2577 drops them from MCP 2026-07-28); the suite still tests them on older revisions.
#![allow(deprecated)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::serve::ListenerExt;
use futures::Stream;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientJsonRpcMessage, ClientRequest,
    CompleteRequestParams, CompleteResult, CompletionInfo, ContentBlock,
    CreateMessageRequestParams, ElicitRequestParams, ErrorData, GetPromptRequestParams,
    GetPromptResponse, GetPromptResult, Implementation, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, LoggingLevel,
    LoggingMessageNotificationParam, PaginatedRequestParams, ProgressNotificationParam, Prompt,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Reference, Resource,
    ResourceTemplate, ResourceUpdatedNotificationParam, ServerCapabilities, ServerConfig,
    ServerJsonRpcMessage, SetLevelRequestParams, SubscribeRequestParams, Tool,
    UnsubscribeRequestParams,
};
use rmcp::service::{Peer, RequestContext};
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError,
};
use rmcp::transport::streamable_http_server::session::{
    EventStore, RestoreOutcome, ServerSseMessage, SessionId, SessionManager,
};
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{RoleServer, ServerHandler, ServiceExt};
use serde::de::DeserializeOwned;
use serde_json::{json, Map, Value};

/// A 1x1 PNG.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
/// A WAV file with no samples.
const WAV: &str = "UklGRiQAAABXQVZFZm10IBAAAAABAAEARKwAAIhYAQACABAAZGF0YQAAAAA=";
const WATCHED: &str = "test://watched-resource";
/// How often a subscriber of the watched resource hears that it changed.
const WATCH_PERIOD: Duration = Duration::from_secs(3);

/// The state of one MCP session (the HTTP mode makes a new server per session).
#[derive(Default)]
struct Session {
    /// Rank (see [`rank`]) of the least severe level still sent; 0 (debug) until set.
    min_level: AtomicU64,
    /// Subscribed URIs, each with the number of its subscription (so a stale watcher stops).
    subscriptions: Mutex<HashMap<String, u64>>,
    subscription_count: AtomicU64,
    /// How often the watched resource changed.
    watched_version: AtomicU64,
}

#[derive(Clone, Default)]
struct ConformanceUpstream {
    session: Arc<Session>,
    /// Over HTTP: which SSE stream carries each request (for `test_reconnection`).
    sessions: Option<Arc<TrackingSessions>>,
}

fn rank(level: LoggingLevel) -> u64 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

fn schema(v: Value) -> Arc<Map<String, Value>> {
    match v {
        Value::Object(m) => Arc::new(m),
        _ => Arc::new(Map::new()),
    }
}

/// A value of an rmcp model type, written as its JSON.
fn from_json<T: DeserializeOwned>(v: Value) -> Result<T, ErrorData> {
    serde_json::from_value(v).map_err(|e| ErrorData::internal_error(e.to_string(), None))
}

fn text(s: impl Into<String>) -> CallToolResponse {
    CallToolResponse::Complete(CallToolResult::success(vec![ContentBlock::text(s)]))
}

fn tool_error(s: impl Into<String>) -> CallToolResponse {
    CallToolResponse::Complete(CallToolResult::error(vec![ContentBlock::text(s)]))
}

fn tools() -> Vec<Tool> {
    let draft7 = "http://json-schema.org/draft-07/schema#";
    let no_args = || schema(json!({"type": "object", "properties": {}}));
    let no_args_draft7 = || schema(json!({"type": "object", "properties": {}, "$schema": draft7}));
    let string_arg = |name: &str, description: &str| {
        schema(json!({
            "type": "object",
            "properties": {name: {"type": "string", "description": description}},
            "required": [name],
            "$schema": draft7
        }))
    };
    vec![
        Tool::new(
            "test_simple_text",
            "Tests simple text content response",
            no_args_draft7(),
        ),
        Tool::new(
            "test_image_content",
            "Tests image content response",
            no_args(),
        ),
        Tool::new(
            "test_audio_content",
            "Tests audio content response",
            no_args(),
        ),
        Tool::new(
            "test_embedded_resource",
            "Tests embedded resource content response",
            no_args(),
        ),
        Tool::new(
            "test_multiple_content_types",
            "Tests response with multiple content types (text, image, resource)",
            no_args(),
        ),
        Tool::new(
            "test_tool_with_logging",
            "Tests tool that emits log messages during execution",
            no_args_draft7(),
        ),
        Tool::new(
            "test_tool_with_progress",
            "Tests tool that reports progress notifications",
            no_args_draft7(),
        ),
        Tool::new(
            "test_error_handling",
            "Tests error response handling",
            no_args(),
        ),
        Tool::new(
            "test_reconnection",
            "Tests SSE stream disconnection and client reconnection (SEP-1699). Server will close the stream mid-call and send the result after client reconnects.",
            no_args_draft7(),
        ),
        Tool::new(
            "test_sampling",
            "Tests server-initiated sampling (LLM completion request)",
            string_arg("prompt", "The prompt to send to the LLM"),
        ),
        Tool::new(
            "test_elicitation",
            "Tests server-initiated elicitation (user input request)",
            string_arg("message", "The message to show the user"),
        ),
        Tool::new(
            "test_elicitation_sep1034_defaults",
            "Tests elicitation with default values per SEP-1034",
            no_args_draft7(),
        ),
        Tool::new(
            "test_elicitation_sep1330_enums",
            "Tests elicitation with enum schema improvements per SEP-1330",
            no_args_draft7(),
        ),
        Tool::new(
            "json_schema_2020_12_tool",
            "Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613)",
            schema(json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "address": {"$ref": "#/$defs/address"}
                },
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "$defs": {
                    "address": {
                        "type": "object",
                        "properties": {"street": {"type": "string"}, "city": {"type": "string"}}
                    }
                },
                "additionalProperties": false
            })),
        ),
    ]
}

/// The form `test_elicitation` asks for.
fn contact_form() -> Value {
    json!({
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"}
        },
        "required": ["username", "email"]
    })
}

/// A form with a default for every primitive type (SEP-1034).
fn defaults_form() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "Your name", "default": "John Doe"},
            "age": {"type": "integer", "description": "Your age", "default": 30},
            "score": {"type": "number", "description": "Your score", "default": 95.5},
            "status": {
                "type": "string",
                "description": "Account status",
                "enum": ["active", "inactive", "pending"],
                "default": "active"
            },
            "verified": {"type": "boolean", "description": "Is verified", "default": true}
        }
    })
}

/// A form with each of the five enum shapes of SEP-1330.
fn enums_form() -> Value {
    let choices = |titles: [&str; 3]| {
        titles
            .iter()
            .enumerate()
            .map(|(i, title)| json!({"const": format!("value{}", i + 1), "title": title}))
            .collect::<Vec<_>>()
    };
    json!({
        "type": "object",
        "properties": {
            "untitledSingle": {
                "type": "string",
                "description": "Pick one (plain values)",
                "enum": ["option1", "option2", "option3"]
            },
            "titledSingle": {
                "type": "string",
                "description": "Pick one (titled values)",
                "oneOf": choices(["First Option", "Second Option", "Third Option"])
            },
            "legacyEnum": {
                "type": "string",
                "description": "Pick one (legacy enumNames)",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"]
            },
            "untitledMulti": {
                "type": "array",
                "description": "Pick any (plain values)",
                "items": {"type": "string", "enum": ["option1", "option2", "option3"]}
            },
            "titledMulti": {
                "type": "array",
                "description": "Pick any (titled values)",
                "items": {"anyOf": choices(["First Choice", "Second Choice", "Third Choice"])}
            }
        }
    })
}

fn resources() -> Result<Vec<Resource>, ErrorData> {
    from_json(json!([
        {
            "uri": "test://static-text",
            "name": "static-text",
            "title": "Static Text Resource",
            "description": "A static text resource for testing",
            "mimeType": "text/plain"
        },
        {
            "uri": "test://static-binary",
            "name": "static-binary",
            "title": "Static Binary Resource",
            "description": "A static binary resource (a PNG image) for testing",
            "mimeType": "image/png"
        },
        {
            "uri": WATCHED,
            "name": "watched-resource",
            "title": "Watched Resource",
            "description": "A resource that changes every few seconds while subscribed",
            "mimeType": "text/plain"
        }
    ]))
}

fn resource_templates() -> Result<Vec<ResourceTemplate>, ErrorData> {
    from_json(json!([{
        "uriTemplate": "test://template/{id}/data",
        "name": "template",
        "title": "Resource Template",
        "description": "A resource template with parameter substitution",
        "mimeType": "application/json"
    }]))
}

fn prompts() -> Result<Vec<Prompt>, ErrorData> {
    from_json(json!([
        {
            "name": "test_simple_prompt",
            "title": "Simple Test Prompt",
            "description": "A simple prompt without arguments"
        },
        {
            "name": "test_prompt_with_arguments",
            "title": "Prompt With Arguments",
            "description": "A prompt with required arguments",
            "arguments": [
                {"name": "arg1", "description": "First test argument", "required": true},
                {"name": "arg2", "description": "Second test argument", "required": true}
            ]
        },
        {
            "name": "test_prompt_with_embedded_resource",
            "title": "Prompt With Embedded Resource",
            "description": "A prompt that includes an embedded resource",
            "arguments": [
                {"name": "resourceUri", "description": "URI of the resource to embed", "required": true}
            ]
        },
        {
            "name": "test_prompt_with_image",
            "title": "Prompt With Image",
            "description": "A prompt that includes image content"
        }
    ]))
}

/// `test://template/{id}/data` → `id`.
fn template_id(uri: &str) -> Option<&str> {
    let id = uri
        .strip_prefix("test://template/")?
        .strip_suffix("/data")?;
    (!id.is_empty() && !id.contains('/')).then_some(id)
}

fn string_arg<'a>(args: &'a Map<String, Value>, name: &str) -> Result<&'a str, ErrorData> {
    args.get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| ErrorData::invalid_params(format!("'{name}' must be a string"), None))
}

impl ConformanceUpstream {
    fn new(sessions: Option<Arc<TrackingSessions>>) -> Self {
        Self {
            session: Arc::default(),
            sessions,
        }
    }

    async fn log(&self, peer: &Peer<RoleServer>, level: LoggingLevel, message: &str) {
        if rank(level) >= self.session.min_level.load(Ordering::SeqCst) {
            let note = LoggingMessageNotificationParam::new(level, json!(message))
                .with_logger("conformance");
            let _ = peer.notify_logging_message(note).await;
        }
    }

    /// Tell `peer` the watched resource changed, now and then every [`WATCH_PERIOD`], as long as
    /// subscription number `n` of `uri` lasts.
    fn watch(&self, peer: Peer<RoleServer>, uri: String, n: u64) {
        let session = self.session.clone();
        tokio::spawn(async move {
            loop {
                let current = session.subscriptions.lock().unwrap().get(&uri) == Some(&n);
                if !current || peer.is_transport_closed() {
                    break;
                }
                if uri == WATCHED {
                    session.watched_version.fetch_add(1, Ordering::SeqCst);
                }
                let note = ResourceUpdatedNotificationParam::new(uri.clone());
                if peer.notify_resource_updated(note).await.is_err() {
                    break;
                }
                tokio::time::sleep(WATCH_PERIOD).await;
            }
        });
    }

    async fn elicit(
        &self,
        context: &RequestContext<RoleServer>,
        message: &str,
        form: Value,
        say: &str,
    ) -> Result<CallToolResponse, ErrorData> {
        let params: ElicitRequestParams =
            from_json(json!({"message": message, "requestedSchema": form}))?;
        match context.peer.create_elicitation(params).await {
            Ok(answer) => {
                let action = serde_json::to_value(&answer.action).unwrap_or(Value::Null);
                let action = action.as_str().unwrap_or("unknown");
                let content = answer.content.unwrap_or_else(|| json!({}));
                Ok(text(format!("{say}: action={action}, content={content}")))
            }
            Err(e) => Ok(tool_error(format!(
                "Elicitation not supported or error: {e}"
            ))),
        }
    }

    /// `test_reconnection`: close this call's SSE stream (over HTTP), then answer a little later
    /// on the stream the client resumes.
    async fn reconnection(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let session_id = context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.headers.get("mcp-session-id"))
            .and_then(|v| v.to_str().ok());
        if let (Some(sessions), Some(session_id)) = (&self.sessions, session_id) {
            sessions
                .close_request_stream(session_id, &context.id.to_string())
                .await;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        Ok(text(
            "Reconnection test completed successfully (over HTTP: after the client resumed the stream closed mid-call).",
        ))
    }
}

impl ServerHandler for ConformanceUpstream {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .enable_resources_subscribe()
                .enable_prompts()
                .enable_completions()
                .enable_logging()
                .build(),
        )
        .with_server_info(Implementation::new(
            "toolshed-conformance-upstream",
            "0.1.0",
        ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        match request.name.as_ref() {
            "test_simple_text" => Ok(text("This is a simple text response for testing.")),
            "test_image_content" => Ok(CallToolResponse::Complete(CallToolResult::success(vec![
                ContentBlock::image(PNG, "image/png"),
            ]))),
            "test_audio_content" => Ok(CallToolResponse::Complete(CallToolResult::success(vec![
                ContentBlock::audio(WAV, "audio/wav"),
            ]))),
            "test_embedded_resource" => Ok(CallToolResponse::Complete(from_json(json!({
                "content": [{
                    "type": "resource",
                    "resource": {
                        "uri": "test://embedded-resource",
                        "mimeType": "text/plain",
                        "text": "This is an embedded resource content."
                    }
                }]
            }))?)),
            "test_multiple_content_types" => Ok(CallToolResponse::Complete(from_json(json!({
                "content": [
                    {"type": "text", "text": "Multiple content types test:"},
                    {"type": "image", "data": PNG, "mimeType": "image/png"},
                    {
                        "type": "resource",
                        "resource": {
                            "uri": "test://mixed-content-resource",
                            "mimeType": "application/json",
                            "text": json!({"test": "data", "value": 123}).to_string()
                        }
                    }
                ]
            }))?)),
            "test_tool_with_logging" => {
                let steps = [
                    "Tool execution started",
                    "Tool processing data",
                    "Tool execution completed",
                ];
                for (i, step) in steps.iter().enumerate() {
                    if i > 0 {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    self.log(&context.peer, LoggingLevel::Info, step).await;
                }
                Ok(text("Tool with logging executed successfully"))
            }
            "test_tool_with_progress" => {
                let Some(token) = context.meta.get_progress_token() else {
                    return Ok(text("no progress token: no progress reported"));
                };
                for (i, done) in [0.0, 50.0, 100.0].into_iter().enumerate() {
                    if i > 0 {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    let note = ProgressNotificationParam::new(token.clone(), done)
                        .with_total(100.0)
                        .with_message(format!("Completed step {done} of 100"));
                    let _ = context.peer.notify_progress(note).await;
                }
                Ok(text("progress reported: 0, 50 and 100 of 100"))
            }
            "test_error_handling" => Ok(tool_error(
                "This tool intentionally returns an error for testing",
            )),
            "test_reconnection" => self.reconnection(&context).await,
            "test_sampling" => {
                let prompt = string_arg(&args, "prompt")?;
                let params: CreateMessageRequestParams = from_json(json!({
                    "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
                    "maxTokens": 100
                }))?;
                match context.peer.create_message(params).await {
                    Ok(answer) => {
                        let answer = serde_json::to_value(&answer).unwrap_or(Value::Null);
                        let said = match &answer["content"] {
                            Value::Array(blocks) => blocks
                                .iter()
                                .filter_map(|b| b["text"].as_str())
                                .collect::<Vec<_>>()
                                .join(""),
                            block => block["text"].as_str().unwrap_or_default().to_string(),
                        };
                        Ok(text(format!("LLM response: {said}")))
                    }
                    Err(e) => Ok(tool_error(format!("Sampling not supported or error: {e}"))),
                }
            }
            "test_elicitation" => {
                let message = string_arg(&args, "message")?;
                self.elicit(&context, message, contact_form(), "User response")
                    .await
            }
            "test_elicitation_sep1034_defaults" => {
                self.elicit(
                    &context,
                    "Please review and update the form fields with defaults",
                    defaults_form(),
                    "Elicitation completed",
                )
                .await
            }
            "test_elicitation_sep1330_enums" => {
                self.elicit(
                    &context,
                    "Please select options from the enum fields",
                    enums_form(),
                    "Elicitation completed",
                )
                .await
            }
            "json_schema_2020_12_tool" => Ok(text(format!(
                "JSON Schema 2020-12 tool called with: {}",
                Value::Object(args)
            ))),
            other => Err(ErrorData::invalid_params(
                format!("unknown tool '{other}'"),
                None,
            )),
        }
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(ListResourcesResult::with_all_items(resources()?))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(
            resource_templates()?,
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let uri = request.uri.as_str();
        let contents = match uri {
            "test://static-text" => json!({
                "uri": uri,
                "mimeType": "text/plain",
                "text": "This is the content of the static text resource."
            }),
            "test://static-binary" => json!({"uri": uri, "mimeType": "image/png", "blob": PNG}),
            WATCHED => json!({
                "uri": uri,
                "mimeType": "text/plain",
                "text": format!(
                    "Watched resource content, version {}",
                    self.session.watched_version.load(Ordering::SeqCst)
                )
            }),
            _ => match template_id(uri) {
                Some(id) => json!({
                    "uri": uri,
                    "mimeType": "application/json",
                    "text": json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")})
                        .to_string()
                }),
                None => {
                    return Err(ErrorData::resource_not_found(
                        format!("no resource '{uri}'"),
                        Some(json!({"uri": uri})),
                    ))
                }
            },
        };
        Ok(ReadResourceResult::new(vec![from_json(contents)?]).into())
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let n = self
            .session
            .subscription_count
            .fetch_add(1, Ordering::SeqCst)
            + 1;
        self.session
            .subscriptions
            .lock()
            .unwrap()
            .insert(request.uri.clone(), n);
        self.watch(context.peer.clone(), request.uri, n);
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.session
            .subscriptions
            .lock()
            .unwrap()
            .remove(&request.uri);
        Ok(())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Ok(ListPromptsResult::with_all_items(prompts()?))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        let user = |content: Value| json!({"role": "user", "content": content});
        let messages = match request.name.as_str() {
            "test_simple_prompt" => vec![user(
                json!({"type": "text", "text": "This is a simple prompt for testing."}),
            )],
            "test_prompt_with_arguments" => {
                let arg1 = string_arg(&args, "arg1")?;
                let arg2 = string_arg(&args, "arg2")?;
                vec![user(json!({
                    "type": "text",
                    "text": format!("Prompt with arguments: arg1='{arg1}', arg2='{arg2}'")
                }))]
            }
            "test_prompt_with_embedded_resource" => {
                let uri = string_arg(&args, "resourceUri")?;
                vec![
                    user(json!({
                        "type": "resource",
                        "resource": {
                            "uri": uri,
                            "mimeType": "text/plain",
                            "text": "Embedded resource content for testing."
                        }
                    })),
                    user(
                        json!({"type": "text", "text": "Please process the embedded resource above."}),
                    ),
                ]
            }
            "test_prompt_with_image" => vec![
                user(json!({"type": "image", "data": PNG, "mimeType": "image/png"})),
                user(json!({"type": "text", "text": "Please analyze the image above."})),
            ],
            other => {
                return Err(ErrorData::invalid_params(
                    format!("unknown prompt '{other}'"),
                    None,
                ))
            }
        };
        let result: GetPromptResult = from_json(json!({"messages": messages}))?;
        Ok(result.into())
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let argument = request.argument.name.as_str();
        let candidates: &[&str] = match &request.r#ref {
            Reference::Prompt(prompt) => match (prompt.name.as_str(), argument) {
                ("test_prompt_with_arguments", "arg1") => &["hello", "test", "testValue1"],
                ("test_prompt_with_arguments", "arg2") => &["world", "test", "testValue2"],
                ("test_prompt_with_embedded_resource", "resourceUri") => &[
                    "test://static-text",
                    "test://static-binary",
                    "test://watched-resource",
                ],
                (name, _) if prompts()?.iter().any(|p| p.name == name) => &[],
                (name, _) => {
                    return Err(ErrorData::invalid_params(
                        format!("unknown prompt '{name}'"),
                        None,
                    ))
                }
            },
            Reference::Resource(template) => match (template.uri.as_str(), argument) {
                ("test://template/{id}/data", "id") => &["1", "2", "3", "42", "123"],
                _ => &[],
            },
            _ => &[],
        };
        let typed = request.argument.value.as_str();
        let values = candidates
            .iter()
            .filter(|c| c.starts_with(typed))
            .map(|c| c.to_string())
            .collect();
        let completion = CompletionInfo::with_all_values(values)
            .map_err(|e| ErrorData::internal_error(e, None))?;
        Ok(CompleteResult::new(completion))
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.session
            .min_level
            .store(rank(request.level), Ordering::SeqCst);
        Ok(())
    }
}

/// rmcp's in-memory sessions, plus a note of which HTTP request (SSE stream) carries each
/// JSON-RPC request, so that `test_reconnection` can close its own stream mid-call.
#[derive(Default)]
struct TrackingSessions {
    local: LocalSessionManager,
    /// (session id, JSON-RPC request id) → rmcp's HTTP request id, for `test_reconnection` calls
    /// not yet answered.
    streams: Mutex<HashMap<(String, String), u64>>,
}

impl TrackingSessions {
    /// Close the SSE stream of request `request_id` of session `session_id`, announcing a
    /// reconnection delay; the answer waits in the session for the client to resume.
    async fn close_request_stream(&self, session_id: &str, request_id: &str) {
        let stream = self
            .streams
            .lock()
            .unwrap()
            .remove(&(session_id.to_string(), request_id.to_string()));
        let handle = self.local.sessions.read().await.get(session_id).cloned();
        if let (Some(stream), Some(handle)) = (stream, handle) {
            let retry = Some(Duration::from_millis(500));
            let _ = handle.close_sse_stream(stream, retry).await;
        }
    }
}

impl SessionManager for TrackingSessions {
    type Error = LocalSessionManagerError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        self.local.create_session().await
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.local.initialize_session(id, message).await
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.local.has_session(id).await
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.streams
            .lock()
            .unwrap()
            .retain(|(session, _), _| session.as_str() != id.as_ref());
        self.local.close_session(id).await
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        // What `LocalSessionManager::create_stream` does, noting the stream's HTTP request id.
        let handle = self
            .local
            .sessions
            .read()
            .await
            .get(id)
            .cloned()
            .ok_or_else(|| LocalSessionManagerError::SessionNotFound(id.clone()))?;
        let receiver = handle.establish_request_wise_channel().await?;
        let stream = receiver.http_request_id;
        if let (ClientJsonRpcMessage::Request(request), Some(stream)) = (&message, stream) {
            if let ClientRequest::CallToolRequest(call) = &request.request {
                if call.params.name == "test_reconnection" {
                    self.streams
                        .lock()
                        .unwrap()
                        .insert((id.to_string(), request.id.to_string()), stream);
                }
            }
        }
        handle.push_message(message, stream).await?;
        let mut events = receiver.inner;
        Ok(futures::stream::poll_fn(move |cx| events.poll_recv(cx)))
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.local.accept_message(id, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.local.create_standalone_stream(id).await
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.local.resume(id, last_event_id).await
    }

    async fn restore_session(
        &self,
        id: SessionId,
    ) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        self.local.restore_session(id).await
    }

    fn event_store(&self) -> Option<Arc<dyn EventStore>> {
        self.local.event_store()
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(i) = args.iter().position(|a| a == "--http") {
        let addr = args.get(i + 1).map(String::as_str).unwrap_or("127.0.0.1:0");
        let sessions = Arc::new(TrackingSessions::default());
        let factory = sessions.clone();
        // A new server (fresh log level and subscriptions) for every session.
        let service = StreamableHttpService::new(
            move || Ok(ConformanceUpstream::new(Some(factory.clone()))),
            sessions,
            StreamableHttpServerConfig::default(),
        );
        let router = axum::Router::new().nest_service("/mcp", service);
        let listener = tokio::net::TcpListener::bind(addr).await?;
        println!("LISTENING http://{}/mcp", listener.local_addr()?);
        // Responses are streamed in small writes; without NODELAY each waits for a delayed ACK.
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        axum::serve(listener, router).await?;
        return Ok(());
    }
    let running = ConformanceUpstream::new(None)
        .serve(rmcp::transport::stdio())
        .await?;
    running.waiting().await?;
    Ok(())
}
