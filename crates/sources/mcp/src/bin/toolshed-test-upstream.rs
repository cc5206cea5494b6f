//! `toolshed-test-upstream`: a small MCP server used by this crate's tests and benchmark.
//!
//! ```text
//! toolshed-test-upstream                 serve over stdio
//! toolshed-test-upstream --http ADDR     serve streamable HTTP at http://ADDR/mcp and print
//!                                        "LISTENING http://<bound address>/mcp" on stdout
//! toolshed-test-upstream --hang          accept stdin but never answer (hangs at start)
//! toolshed-test-upstream --crash         print an error on stderr and exit 3 at start (after
//!                                        the value of TEST_UPSTREAM_SAY, when set)
//! toolshed-test-upstream --modern-only   only speak MCP 2026-07-28 (`initialize` is refused
//!                                        with "unsupported protocol version", -32022)
//! toolshed-test-upstream --no-initialize only speak MCP 2026-07-28 and answer `initialize`
//!                                        with "method not found" (-32601)
//! toolshed-test-upstream --max-version V support the known MCP revisions up to V only
//!                                        (e.g. 2025-06-18: `initialize` answers V)
//! toolshed-test-upstream --early-notify  send notifications before answering `initialize`
//! toolshed-test-upstream --crash-if-exists PATH
//!                                        crash at start while PATH exists (restart tests)
//! toolshed-test-upstream --resources     also offer the resource `test://counter` with
//!                                        subscriptions, and the tool `touch`
//! ```
//!
//! With `--resources`, `touch` counts `test://counter` up and announces
//! `notifications/resources/updated` to the subscribers of that URI: on 2026-07-28 the
//! `subscriptions/listen` streams whose acknowledged filter carries it, on earlier revisions
//! the sessions that sent `resources/subscribe` (until one sends `resources/unsubscribe`).
//!
//! Tools: `echo` (read-only), `add` (structured content and an output schema),
//! `delete_everything` (destructive), `fail` (answers `isError: true`), `getStatus.v2`
//! (idempotent, JSON text, odd name), `whoami` (its pid), `sleep` (waits `ms`) and
//! `toggle_extra`, which adds or removes the tool `extra` and sends `tools/list_changed`,
//! `getenv` (read-only: the value of the environment variable `name`, or null),
//! `http_headers` (read-only: the HTTP request headers of the call, `{}` over stdio) and `media`
//! (read-only: one content block of every kind, structured content and `_meta`), `ask`
//! (read-only: asks its client for a `name` by elicitation, or on 2026-07-28 with an
//! `input_required` result, and answers what came back) and
//! `sample` (read-only: asks its client's model by sampling and answers its text).

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::serve::ListenerExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorCode, ErrorData,
    Implementation, InitializeRequestParams, InitializeResult, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ProtocolVersion, ServerCapabilities,
    ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{RoleServer, ServerHandler, ServiceExt};
use serde_json::{json, Map, Value};

/// The resource `--resources` offers.
const COUNTER: &str = "test://counter";

/// The subscribers of `test://counter`: the open 2026-07-28 listen streams (by their request
/// id) and the older sessions that subscribed.
#[derive(Default)]
struct Subscribers {
    streams: Vec<(String, rmcp::service::SubscriptionSink)>,
    legacy: Vec<rmcp::Peer<RoleServer>>,
}

#[derive(Clone, Default)]
struct TestUpstream {
    /// `--resources`: the counter resource, its subscriptions and `touch`.
    resources: bool,
    counter: Arc<std::sync::atomic::AtomicU64>,
    subscribers: Arc<std::sync::Mutex<Subscribers>>,
    extra: Arc<AtomicBool>,
    /// The revisions this server speaks; empty means every revision rmcp knows.
    versions: Vec<ProtocolVersion>,
    /// Answer `initialize` with "method not found", like a server that never had it.
    no_initialize: bool,
}

fn schema(v: Value) -> Arc<Map<String, Value>> {
    match v {
        Value::Object(m) => Arc::new(m),
        _ => Arc::new(Map::new()),
    }
}

fn hints(
    read_only: Option<bool>,
    destructive: Option<bool>,
    idem: Option<bool>,
) -> ToolAnnotations {
    ToolAnnotations::from_raw(None, read_only, destructive, idem, None)
}

impl TestUpstream {
    fn tools(&self) -> Vec<Tool> {
        let text_arg = json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]});
        let mut echo = Tool::new("echo", "Echoes the text back.", schema(text_arg));
        echo.annotations = Some(hints(Some(true), None, None));

        let mut add = Tool::new(
            "add",
            "Adds two numbers.",
            schema(
                json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}),
            ),
        );
        add.title = Some("Add Numbers".into());
        add.output_schema = Some(schema(
            json!({"type": "object", "properties": {"sum": {"type": "number"}}, "required": ["sum"]}),
        ));
        add.annotations = Some(hints(Some(false), Some(false), Some(true)));

        let mut delete = Tool::new(
            "delete_everything",
            "Deletes everything (pretends to).",
            schema(json!({"type": "object", "properties": {}})),
        );
        delete.annotations = Some(hints(None, Some(true), None));

        let fail = Tool::new(
            "fail",
            "Always fails with isError.",
            schema(json!({"type": "object", "properties": {}})),
        );

        let mut status = Tool::new(
            "getStatus.v2",
            "Returns the status as JSON text.",
            schema(json!({"type": "object"})),
        );
        status.annotations = Some(hints(Some(true), None, None));

        let mut whoami = Tool::new(
            "whoami",
            "Returns the server's pid.",
            schema(json!({"type": "object"})),
        );
        whoami.annotations = Some(hints(Some(true), None, None));

        let mut sleep = Tool::new(
            "sleep",
            "Sleeps for `ms` milliseconds; when the call is cancelled first, writes `cancelled` to the file `cancelled_marker` (if given).",
            schema(json!({"type": "object", "properties": {"ms": {"type": "integer"}}})),
        );
        sleep.annotations = Some(hints(Some(true), None, None));

        let mut log = Tool::new(
            "log",
            "Sends one log message per entry of `levels` (notifications/message, logger `test`), then answers.",
            schema(json!({"type": "object", "properties": {"levels": {"type": "array", "items": {"type": "string"}}}})),
        );
        log.annotations = Some(hints(Some(true), None, None));

        let mut toggle = Tool::new(
            "toggle_extra",
            "Adds or removes the `extra` tool and announces the change.",
            schema(json!({"type": "object"})),
        );
        toggle.annotations = Some(hints(Some(false), Some(false), None));

        let mut getenv = Tool::new(
            "getenv",
            "Returns the value of the environment variable `name` (null when unset).",
            schema(
                json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}),
            ),
        );
        getenv.annotations = Some(hints(Some(true), None, None));

        let mut http_headers = Tool::new(
            "http_headers",
            "Returns the HTTP request headers this call arrived with ({} over stdio).",
            schema(json!({"type": "object"})),
        );
        http_headers.annotations = Some(hints(Some(true), None, None));

        let mut media = Tool::new(
            "media",
            "Answers with one content block of every kind, structured content and _meta.",
            schema(json!({"type": "object"})),
        );
        media.annotations = Some(hints(Some(true), None, None));
        media.meta = serde_json::from_value(json!({"example.com/origin": "test-upstream"})).ok();

        let mut steps = Tool::new(
            "steps",
            "Reports progress three times (when the call carries a progress token), then answers.",
            schema(json!({"type": "object"})),
        );
        steps.annotations = Some(hints(Some(true), None, None));

        let mut ask = Tool::new(
            "ask",
            "Asks the client for a name (elicitation/create) and answers the client's answer.",
            schema(json!({"type": "object"})),
        );
        ask.annotations = Some(hints(Some(true), None, None));

        let mut sample = Tool::new(
            "sample",
            "Asks the client's model to complete `prompt` (sampling/createMessage) and answers its text.",
            schema(json!({"type": "object", "properties": {"prompt": {"type": "string"}}})),
        );
        sample.annotations = Some(hints(Some(true), None, None));

        let mut tools = vec![
            ask,
            sample,
            media,
            steps,
            echo,
            add,
            delete,
            fail,
            status,
            whoami,
            sleep,
            log,
            toggle,
            getenv,
            http_headers,
        ];
        if self.resources {
            let mut touch = Tool::new(
                "touch",
                "Counts test://counter up and tells its subscribers.",
                schema(json!({"type": "object"})),
            );
            touch.annotations = Some(hints(Some(false), Some(false), None));
            tools.push(touch);
        }
        if self.extra.load(Ordering::SeqCst) {
            tools.push(Tool::new(
                "extra",
                "Appears on demand.",
                schema(json!({"type": "object"})),
            ));
        }
        tools
    }
}

/// The answer of `media`: every content kind MCP defines, structured content and `_meta`.
fn media_result() -> Value {
    json!({
        "content": [
            {"type": "text", "text": "a caption", "annotations": {"audience": ["user"], "priority": 0.5}},
            {"type": "image", "data": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==", "mimeType": "image/png"},
            {"type": "audio", "data": "UklGRiQAAABXQVZFZm10IBAAAAABAAEARKwAAIhYAQACABAAZGF0YQAAAAA=", "mimeType": "audio/wav"},
            {"type": "resource", "resource": {"uri": "test://notes/1", "mimeType": "text/plain", "text": "embedded note"}},
            {"type": "resource_link", "uri": "test://files/report.pdf", "name": "report.pdf", "mimeType": "application/pdf"}
        ],
        "structuredContent": {"caption": "a caption", "items": 5},
        "_meta": {"example.com/trace": "t-42"}
    })
}

fn text(s: impl Into<String>) -> CallToolResponse {
    CallToolResponse::Complete(CallToolResult::success(vec![ContentBlock::text(s)]))
}

impl ServerHandler for TestUpstream {
    // It logs (the `log` tool), so it declares logging, deprecated by 2026-07-28 (SEP-2577).
    #[allow(deprecated)]
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_logging()
            .build();
        if self.resources {
            capabilities.resources = serde_json::from_value(json!({"subscribe": true})).ok();
        }
        let config = ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("toolshed-test-upstream", "0.1.0"));
        match self.versions.last() {
            Some(newest) => config.with_protocol_version(newest.clone()),
            None => config,
        }
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        if self.versions.is_empty() {
            Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS)
        } else {
            Cow::Owned(self.versions.clone())
        }
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        if self.no_initialize {
            return Err(ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                "Method not found: initialize",
                None,
            ));
        }
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourcesResult, ErrorData> {
        let listed = if self.resources {
            vec![rmcp::model::Resource::new(COUNTER, "counter")]
        } else {
            vec![]
        };
        Ok(rmcp::model::ListResourcesResult::with_all_items(listed))
    }

    async fn read_resource(
        &self,
        request: rmcp::model::ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ReadResourceResponse, ErrorData> {
        if !self.resources || request.uri != COUNTER {
            return Err(ErrorData::resource_not_found("no such resource", None));
        }
        let n = self.counter.load(Ordering::SeqCst);
        Ok(
            rmcp::model::ReadResourceResult::new(vec![rmcp::model::ResourceContents::text(
                n.to_string(),
                COUNTER,
            )])
            .into(),
        )
    }

    /// 2026-07-28: a listen stream gets the resource URIs it asks for that exist.
    fn accepted_subscription_filter(
        &self,
        requested: &rmcp::model::SubscriptionFilter,
    ) -> Option<rmcp::model::SubscriptionFilter> {
        if !self.resources {
            return None;
        }
        let known: Vec<String> = requested
            .resource_subscriptions
            .iter()
            .flatten()
            .filter(|u| *u == COUNTER)
            .cloned()
            .collect();
        Some(
            rmcp::model::SubscriptionFilter::builder()
                .resource_subscriptions(known)
                .build(),
        )
    }

    async fn listen(&self, context: rmcp::service::SubscriptionContext) -> Result<(), ErrorData> {
        let id = format!("{:?}", context.sink().id());
        self.subscribers
            .lock()
            .unwrap()
            .streams
            .push((id.clone(), context.sink().clone()));
        context.cancelled().await;
        self.subscribers
            .lock()
            .unwrap()
            .streams
            .retain(|(i, _)| *i != id);
        Ok(())
    }

    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: rmcp::model::SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if !self.resources || request.uri != COUNTER {
            return Err(ErrorData::resource_not_found("no such resource", None));
        }
        self.subscribers.lock().unwrap().legacy.push(context.peer);
        Ok(())
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        _request: rmcp::model::UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        // Peers cannot be told apart: the one session over stdio (and, over HTTP, every
        // older session) stops hearing of updates.
        let _ = context;
        self.subscribers.lock().unwrap().legacy.clear();
        Ok(())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        match request.name.as_ref() {
            "echo" => Ok(text(
                args.get("text").and_then(Value::as_str).unwrap_or_default(),
            )),
            "add" => {
                let a = args.get("a").and_then(Value::as_f64);
                let b = args.get("b").and_then(Value::as_f64);
                match (a, b) {
                    (Some(a), Some(b)) => Ok(CallToolResponse::Complete(
                        CallToolResult::structured(json!({"sum": a + b})),
                    )),
                    _ => Err(ErrorData::invalid_params(
                        "'a' and 'b' must be numbers",
                        None,
                    )),
                }
            }
            "delete_everything" => Ok(text("deleted nothing, really")),
            "fail" => Ok(CallToolResponse::Complete(CallToolResult::error(vec![
                ContentBlock::text("the widget is broken"),
            ]))),
            "getStatus.v2" => Ok(text(r#"{"status": "ok", "items": [1, 2, 3]}"#)),
            "whoami" => Ok(CallToolResponse::Complete(CallToolResult::structured(
                json!({"pid": std::process::id()}),
            ))),
            "sleep" => {
                let ms = args.get("ms").and_then(Value::as_u64).unwrap_or(0);
                tokio::select! {
                    _ = tokio::time::sleep(std::time::Duration::from_millis(ms)) => {}
                    _ = context.ct.cancelled() => {
                        // The caller's `notifications/cancelled` arrived: say so where asked.
                        if let Some(file) = args.get("cancelled_marker").and_then(Value::as_str) {
                            let _ = std::fs::write(file, "cancelled");
                        }
                        return Err(ErrorData::invalid_request("cancelled", None));
                    }
                }
                Ok(text(format!("slept {ms} ms")))
            }
            "touch" if self.resources => {
                let n = self.counter.fetch_add(1, Ordering::SeqCst) + 1;
                let (streams, legacy) = {
                    let subs = self.subscribers.lock().unwrap();
                    let streams: Vec<_> = subs.streams.iter().map(|(_, s)| s.clone()).collect();
                    (streams, subs.legacy.clone())
                };
                let mut told = 0;
                for sink in streams {
                    if sink.notify_resource_updated(COUNTER).await.is_ok() {
                        told += 1;
                    }
                }
                for peer in legacy {
                    let update = rmcp::model::ResourceUpdatedNotificationParam::new(COUNTER);
                    if peer.notify_resource_updated(update).await.is_ok() {
                        told += 1;
                    }
                }
                Ok(text(format!("counter {n}, {told} subscribers told")))
            }
            "toggle_extra" => {
                let now = !self.extra.fetch_xor(true, Ordering::SeqCst);
                let _ = context.peer.notify_tool_list_changed().await;
                Ok(text(if now { "extra added" } else { "extra removed" }))
            }
            "getenv" => {
                let name = args.get("name").and_then(Value::as_str).unwrap_or_default();
                Ok(CallToolResponse::Complete(CallToolResult::structured(
                    json!({"name": name, "value": std::env::var(name).ok()}),
                )))
            }
            "http_headers" => {
                let mut seen = Map::new();
                if let Some(parts) = context.extensions.get::<axum::http::request::Parts>() {
                    for (k, v) in &parts.headers {
                        seen.insert(
                            k.as_str().to_string(),
                            Value::String(String::from_utf8_lossy(v.as_bytes()).into_owned()),
                        );
                    }
                }
                Ok(CallToolResponse::Complete(CallToolResult::structured(
                    json!({"headers": seen}),
                )))
            }
            "log" => {
                let levels: Vec<String> = args
                    .get("levels")
                    .and_then(|l| serde_json::from_value(l.clone()).ok())
                    .unwrap_or_default();
                for level in &levels {
                    #[allow(deprecated)]
                    if let Ok(l) = serde_json::from_value::<rmcp::model::LoggingLevel>(json!(level))
                    {
                        #[allow(deprecated)]
                        let note = rmcp::model::LoggingMessageNotificationParam::new(
                            l,
                            json!(format!("a {level} message")),
                        )
                        .with_logger("test");
                        #[allow(deprecated)]
                        let _ = context.peer.notify_logging_message(note).await;
                    }
                }
                Ok(text(format!("{} messages", levels.len())))
            }
            "steps" => {
                let token = context.meta.get_progress_token();
                if let Some(token) = token.clone() {
                    for i in 1..=3 {
                        let note = ProgressNotificationParam::new(token.clone(), i as f64)
                            .with_total(3.0)
                            .with_message(format!("step {i} of 3"));
                        let _ = context.peer.notify_progress(note).await;
                    }
                }
                Ok(text(if token.is_some() {
                    "3 steps"
                } else {
                    "no token"
                }))
            }
            "ask"
                if context
                    .protocol_version()
                    .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28) =>
            {
                // 2026-07-28 takes no server-to-client requests: ask with `input_required`,
                // and answer once the retry brings the answer and the state back.
                let answer = request.input_responses.and_then(|mut r| r.remove("name"));
                match (answer, request.request_state.as_deref()) {
                    (Some(answer), Some("asked-for-name")) => Ok(text(answer.to_string())),
                    _ => Ok(CallToolResponse::InputRequired(
                        serde_json::from_value(json!({
                            "resultType": "input_required",
                            "inputRequests": {"name": {"method": "elicitation/create", "params": {
                                "mode": "form",
                                "message": "What is your name?",
                                "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
                            }}},
                            "requestState": "asked-for-name"
                        }))
                        .expect("a valid input_required result"),
                    )),
                }
            }
            "ask" => {
                let params = serde_json::from_value(json!({
                    "mode": "form",
                    "message": "What is your name?",
                    "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
                }))
                .expect("valid elicitation params");
                match context.peer.create_elicitation(params).await {
                    Ok(answer) => Ok(text(serde_json::to_string(&answer).unwrap_or_default())),
                    Err(e) => Ok(CallToolResponse::Complete(CallToolResult::error(vec![
                        ContentBlock::text(format!("elicitation failed: {e}")),
                    ]))),
                }
            }
            "sample" => {
                let prompt = args.get("prompt").and_then(Value::as_str).unwrap_or("hi");
                let params = serde_json::from_value(json!({
                    "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
                    "maxTokens": 50
                }))
                .expect("valid sampling params");
                #[allow(deprecated)]
                match context.peer.create_message(params).await {
                    Ok(answer) => {
                        let said = serde_json::to_value(&answer).unwrap_or_default();
                        let said = said["content"]["text"]
                            .as_str()
                            .unwrap_or_default()
                            .to_string();
                        Ok(text(format!("the model said: {said}")))
                    }
                    Err(e) => Ok(CallToolResponse::Complete(CallToolResult::error(vec![
                        ContentBlock::text(format!("sampling failed: {e}")),
                    ]))),
                }
            }
            "media" => Ok(CallToolResponse::Complete(
                serde_json::from_value(media_result()).expect("a valid CallToolResult"),
            )),
            "extra" if self.extra.load(Ordering::SeqCst) => Ok(text("extra!")),
            other => Err(ErrorData::invalid_params(
                format!("unknown tool '{other}'"),
                None,
            )),
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let has = |flag: &str| args.iter().any(|a| a == flag);
    if let Some(i) = args.iter().position(|a| a == "--crash-if-exists") {
        if args
            .get(i + 1)
            .is_some_and(|p| std::path::Path::new(p).exists())
        {
            eprintln!("boom: crash marker present");
            std::process::exit(4);
        }
    }
    if has("--crash") {
        if let Ok(say) = std::env::var("TEST_UPSTREAM_SAY") {
            eprintln!("{say}");
        }
        eprintln!("boom: the test upstream was told to crash at start");
        std::process::exit(3);
    }
    if has("--hang") {
        // Read (and ignore) stdin forever: the handshake never completes.
        let mut sink = tokio::io::sink();
        tokio::io::copy(&mut tokio::io::stdin(), &mut sink).await?;
        std::future::pending::<()>().await;
    }
    let no_initialize = has("--no-initialize");
    let versions = if has("--modern-only") || no_initialize {
        vec![ProtocolVersion::V_2026_07_28]
    } else if let Some(i) = args.iter().position(|a| a == "--max-version") {
        let Some(max) = args.get(i + 1) else {
            eprintln!("--max-version needs a revision, e.g. 2025-06-18");
            std::process::exit(2);
        };
        let max: ProtocolVersion = serde_json::from_value(Value::String(max.clone()))?;
        let known = ProtocolVersion::known_up_to(&max);
        if known.is_empty() {
            eprintln!("--max-version {max}: no known MCP revision is that old");
            std::process::exit(2);
        }
        known.to_vec()
    } else {
        Vec::new()
    };
    let server = TestUpstream {
        resources: has("--resources"),
        extra: Arc::new(AtomicBool::new(false)),
        versions,
        no_initialize,
        ..TestUpstream::default()
    };
    if let Some(i) = args.iter().position(|a| a == "--http") {
        let addr = args.get(i + 1).map(String::as_str).unwrap_or("127.0.0.1:0");
        let factory = server.clone();
        let service = StreamableHttpService::new(
            move || Ok(factory.clone()),
            Arc::new(LocalSessionManager::default()),
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
    if has("--early-notify") {
        // Like chatty servers: read `initialize`, then log and announce before answering it.
        use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
        let mut stdin = tokio::io::BufReader::new(tokio::io::stdin());
        let mut first = String::new();
        stdin.read_line(&mut first).await?;
        let mut out = tokio::io::stdout();
        out.write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"booting\"}}\n").await?;
        out.write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n")
            .await?;
        out.flush().await?;
        let reader = std::io::Cursor::new(first.into_bytes()).chain(stdin);
        let running = server.serve((reader, out)).await?;
        running.waiting().await?;
        return Ok(());
    }
    let running = server.serve(rmcp::transport::stdio()).await?;
    running.waiting().await?;
    Ok(())
}
