//! [`Upstream`]: one supervised MCP client session to an upstream server, and the tool
//! handlers that forward calls over it.
//!
//! # Session
//!
//! [`Upstream::connect`] spawns the child (stdio) or opens the streamable HTTP session and
//! completes the MCP handshake within `connect_timeout`. Every tool handler then sends
//! `tools/call` on that one shared session; there is no handshake per call.
//!
//! # Protocol versions
//!
//! Toolshed accepts upstreams that negotiate any revision from [`MIN_PROTOCOL_VERSION`]
//! (2025-06-18) through [`MAX_PROTOCOL_VERSION`] (2026-07-28). The handshake is the classic
//! `initialize`, proposing 2025-11-25 (rmcp's newest revision that still has `initialize`); a
//! server answers with the revision it speaks (the npm reference servers answer 2025-06-18 or
//! 2025-11-25). A server that refuses `initialize` itself — "unsupported protocol version"
//! (-32022), "method not found" (-32601), or an invalid-request answer naming the protocol
//! version ([`refuses_initialize`]): a 2026-07-28-only server — is retried with rmcp's
//! `server/discover` lifecycle, preferring
//! 2026-07-28; in that mode `tools/list_changed` arrives through a `subscriptions/listen`
//! stream, which Toolshed opens when the server advertises `tools.listChanged`. Revisions
//! outside the range are refused with [`McpSourceError::UnsupportedProtocol`]. Notifications
//! (logging, progress...) sent before the `initialize` answer are tolerated by rmcp.
//!
//! # Supervision
//!
//! A supervisor task owns the running session. When it ends without a shutdown (the child died,
//! the HTTP session broke), the upstream is marked reconnecting and reconnected with
//! exponential backoff ([`backoff_delay`]: 100 ms doubling up to 30 s; the backoff resets only
//! after a session stayed up for 30 s, so a crash loop keeps backing off). After a reconnect
//! the tools are listed again and [`Upstream::subscribe_changes`] bumps if the list differs.
//!
//! Calls made while reconnecting wait for the new session up to `call_timeout` (or the
//! context's timeout, if shorter) and then fail with a clear message. A call whose connection
//! is lost mid-flight is retried once on the new session only for read-only or idempotent
//! tools, or when writing the request to a dead stdio child failed (it was never delivered);
//! otherwise it fails saying the call may or may not have run.
//!
//! Children are started with `kill_on_drop`, their stderr is logged at debug level (the last
//! lines are quoted in handshake errors), and they are stopped on [`Upstream::shutdown`] and
//! when the last handle (an [`Upstream`] clone or a tool from [`Upstream::tools`]) is dropped.
//!
//! # Secrets
//!
//! [`UpstreamConfig::redacted_values`] (credential-named environment variables and headers, and
//! the listed [`UpstreamConfig::secrets`]) are blanked out of tool results, tool errors and the
//! child's stderr (logged and quoted), in case the upstream echoes them.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientConfig, ErrorCode,
    Implementation, ProtocolVersion, ServerNotification, SubscriptionFilter, Tool as McpTool,
};
use rmcp::service::{
    serve_client_with_lifecycle, ClientInitializeError, ClientLifecycleMode, NotificationContext,
    RunningService,
};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, Peer, RoleClient, ServiceError};
use serde_json::Value;
use tokio::io::AsyncBufReadExt;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use toolshed_core::{Tool, ToolContext, ToolError, ToolErrorKind, ToolHandler};
use toolshed_outbound::client::unfollowing_client;
use toolshed_outbound::net::check_host;
use toolshed_outbound::secret::{redact, redact_outcome};

use crate::config::{Transport, UpstreamConfig};
use crate::error::McpSourceError;
use crate::mapping::{convert_result, map_tools};

/// The oldest MCP revision Toolshed accepts from an upstream.
pub const MIN_PROTOCOL_VERSION: &str = "2025-06-18";
/// The newest MCP revision Toolshed accepts from an upstream.
pub const MAX_PROTOCOL_VERSION: &str = "2026-07-28";

const BACKOFF_BASE: Duration = Duration::from_millis(100);
const BACKOFF_CAP: Duration = Duration::from_secs(30);
/// A session that stayed up this long resets the backoff.
const STABLE_AFTER: Duration = Duration::from_secs(30);
/// How long shutdown waits for a graceful close (rmcp: close stdin, 3 s, SIGTERM, 3 s, kill).
const SHUTDOWN_GRACE: Duration = Duration::from_secs(8);
const STDERR_TAIL_LINES: usize = 8;

/// The delay before reconnect attempt number `failures` (0-based): 100 ms doubling, capped
/// at 30 s.
pub fn backoff_delay(failures: u32) -> Duration {
    let factor = 1u32.checked_shl(failures.min(16)).unwrap_or(u32::MAX);
    BACKOFF_BASE.saturating_mul(factor).min(BACKOFF_CAP)
}

/// Whether an upstream's negotiated revision is inside the accepted range.
pub fn protocol_supported(version: &str) -> bool {
    (MIN_PROTOCOL_VERSION..=MAX_PROTOCOL_VERSION).contains(&version)
}

/// A connected upstream MCP server. Cheap to clone; all clones share one session.
#[derive(Clone)]
pub struct Upstream {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("name", &self.inner.shared.cfg.name)
            .field("pid", &self.pid())
            .field("protocol_version", &self.protocol_version())
            .finish_non_exhaustive()
    }
}

/// Owned by handles; dropping the last one shuts the upstream down.
struct Inner {
    shared: Arc<Shared>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.shared.shutdown.send_replace(true);
    }
}

/// State shared with the background tasks (which do not keep the upstream alive).
struct Shared {
    cfg: UpstreamConfig,
    state: watch::Sender<State>,
    changes: watch::Sender<u64>,
    shutdown: watch::Sender<bool>,
    restarts: AtomicU64,
    known_tools: Mutex<Option<Vec<McpTool>>>,
    events: mpsc::UnboundedSender<Event>,
    /// [`UpstreamConfig::redacted_values`], blanked out of results and errors.
    redact: Vec<String>,
}

#[derive(Clone)]
enum State {
    Ready(Arc<Session>),
    Reconnecting { last_error: String },
    Closed,
}

struct Session {
    peer: Peer<RoleClient>,
    pid: Option<u32>,
    protocol: ProtocolVersion,
    generation: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Event {
    ListChanged,
    Reconnected,
}

/// The rmcp client handler: identifies Toolshed and forwards `tools/list_changed`.
#[derive(Clone)]
struct SourceClient {
    name: String,
    events: mpsc::UnboundedSender<Event>,
}

impl ClientHandler for SourceClient {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("toolshed", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        tracing::debug!(upstream = %self.name, "upstream sent tools/list_changed");
        let _ = self.events.send(Event::ListChanged);
    }
}

/// A fresh connection, before it is published.
struct Connection {
    running: RunningService<RoleClient, SourceClient>,
    pid: Option<u32>,
    protocol: ProtocolVersion,
}

impl Upstream {
    /// Connects (spawning the child for stdio) and completes the handshake within
    /// `cfg.connect_timeout`.
    pub async fn connect(cfg: UpstreamConfig) -> Result<Self, McpSourceError> {
        cfg.validate()?;
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        let client = SourceClient {
            name: cfg.name.clone(),
            events: events_tx.clone(),
        };
        let conn = connect_once(&cfg, client).await?;
        let (shutdown, _) = watch::channel(false);
        let (state, _) = watch::channel(State::Reconnecting {
            last_error: "connecting".into(),
        });
        let (changes, _) = watch::channel(0u64);
        let redact = cfg.redacted_values();
        let shared = Arc::new(Shared {
            redact,
            cfg,
            state,
            changes,
            shutdown,
            restarts: AtomicU64::new(0),
            known_tools: Mutex::new(None),
            events: events_tx,
        });
        let session = publish(&shared, &conn, 1);
        tokio::spawn(supervise(shared.clone(), conn, session));
        tokio::spawn(refresh_loop(shared.clone(), events_rx));
        Ok(Self {
            inner: Arc::new(Inner { shared }),
        })
    }

    /// The namespace (the configured name).
    pub fn name(&self) -> &str {
        &self.inner.shared.cfg.name
    }

    /// The configuration this upstream was connected with.
    pub fn config(&self) -> &UpstreamConfig {
        &self.inner.shared.cfg
    }

    /// Lists the upstream's tools now and maps them to Toolshed tools under the namespace.
    /// Waits up to `call_timeout` if the upstream is reconnecting.
    pub async fn tools(&self) -> Result<Vec<Tool>, McpSourceError> {
        let shared = &self.inner.shared;
        let deadline = Instant::now() + shared.cfg.call_timeout;
        let session = wait_ready(shared, deadline, 0).await?;
        let listed = tokio::time::timeout_at(deadline, session.peer.list_all_tools())
            .await
            .map_err(|_| McpSourceError::Request {
                name: shared.cfg.name.clone(),
                operation: "tools/list",
                message: format!("no answer within {:?}", shared.cfg.call_timeout),
            })?
            .map_err(|e| McpSourceError::Request {
                name: shared.cfg.name.clone(),
                operation: "tools/list",
                message: e.to_string(),
            })?;
        *lock(&shared.known_tools) = Some(listed.clone());
        Ok(map_tools(&shared.cfg.name, &listed)
            .into_iter()
            .map(|m| {
                let retry_safe = m.def.annotations.read_only || m.def.annotations.idempotent;
                let handler = UpstreamToolHandler {
                    upstream: self.clone(),
                    remote_name: m.remote_name,
                    retry_safe,
                };
                Tool::new(m.def, Arc::new(handler))
            })
            .collect())
    }

    /// A counter that increases after the upstream announced `tools/list_changed` (or came back
    /// from a reconnect with a different list) and the list was fetched again.
    pub fn subscribe_changes(&self) -> watch::Receiver<u64> {
        self.inner.shared.changes.subscribe()
    }

    /// Stops the session: closes the child's stdin, then terminates and kills it if needed
    /// (or ends the HTTP session). Later calls fail with "shut down".
    pub async fn shutdown(&self) {
        let shared = &self.inner.shared;
        shared.shutdown.send_replace(true);
        let mut rx = shared.state.subscribe();
        let _ = tokio::time::timeout(
            SHUTDOWN_GRACE + Duration::from_secs(1),
            rx.wait_for(|s| matches!(s, State::Closed)),
        )
        .await;
    }

    /// The process id of the current stdio child, if connected over stdio.
    pub fn pid(&self) -> Option<u32> {
        match &*self.inner.shared.state.borrow() {
            State::Ready(s) => s.pid,
            _ => None,
        }
    }

    /// The MCP revision negotiated with the current session.
    pub fn protocol_version(&self) -> Option<String> {
        match &*self.inner.shared.state.borrow() {
            State::Ready(s) => Some(s.protocol.to_string()),
            _ => None,
        }
    }

    /// Whether a session is established right now (false while reconnecting or after shutdown).
    pub fn is_connected(&self) -> bool {
        matches!(&*self.inner.shared.state.borrow(), State::Ready(s) if !s.peer.is_transport_closed())
    }

    /// How many times the upstream was reconnected after losing its session.
    pub fn restarts(&self) -> u64 {
        self.inner.shared.restarts.load(Ordering::Relaxed)
    }
}

/// Resolves once shutdown was requested (or every sender is gone).
async fn until_shutdown(rx: &mut watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await;
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn publish(shared: &Shared, conn: &Connection, generation: u64) -> Arc<Session> {
    let session = Arc::new(Session {
        peer: conn.running.peer().clone(),
        pid: conn.pid,
        protocol: conn.protocol.clone(),
        generation,
    });
    shared.state.send_replace(State::Ready(session.clone()));
    session
}

/// Waits for a usable session of at least `min_generation` until `deadline`.
async fn wait_ready(
    shared: &Shared,
    deadline: Instant,
    min_generation: u64,
) -> Result<Arc<Session>, McpSourceError> {
    let started = Instant::now();
    let mut rx = shared.state.subscribe();
    let mut last_error = String::from("the session was lost");
    loop {
        match rx.borrow_and_update().clone() {
            State::Ready(s) if s.generation >= min_generation && !s.peer.is_transport_closed() => {
                return Ok(s)
            }
            State::Closed => {
                return Err(McpSourceError::Closed {
                    name: shared.cfg.name.clone(),
                })
            }
            State::Reconnecting { last_error: e } => last_error = e,
            State::Ready(_) => {}
        }
        match tokio::time::timeout_at(deadline, rx.changed()).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => {
                return Err(McpSourceError::Closed {
                    name: shared.cfg.name.clone(),
                })
            }
            Err(_) => {
                return Err(McpSourceError::Unavailable {
                    name: shared.cfg.name.clone(),
                    waited: started.elapsed(),
                    last_error,
                })
            }
        }
    }
}

/// Owns the running session; reconnects with backoff when it ends unexpectedly.
async fn supervise(shared: Arc<Shared>, first: Connection, first_session: Arc<Session>) {
    let mut shutdown = shared.shutdown.subscribe();
    let mut conn = first;
    let mut generation = first_session.generation;
    let mut failures: u32 = 0;
    drop(first_session);
    loop {
        let started = Instant::now();
        let ct = conn.running.cancellation_token();
        let waiting = conn.running.waiting();
        tokio::pin!(waiting);
        tokio::select! {
            _ = &mut waiting => {}
            _ = until_shutdown(&mut shutdown) => {
                ct.cancel();
                let _ = tokio::time::timeout(SHUTDOWN_GRACE, &mut waiting).await;
                shared.state.send_replace(State::Closed);
                tracing::debug!(upstream = %shared.cfg.name, "upstream shut down");
                return;
            }
        }
        if *shutdown.borrow() {
            shared.state.send_replace(State::Closed);
            return;
        }
        if started.elapsed() >= STABLE_AFTER {
            failures = 0;
        }
        let mut last_error = String::from("the upstream closed the session");
        tracing::warn!(upstream = %shared.cfg.name, "upstream session ended; reconnecting");
        shared.state.send_replace(State::Reconnecting {
            last_error: last_error.clone(),
        });
        conn = loop {
            let delay = backoff_delay(failures);
            failures = failures.saturating_add(1);
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = until_shutdown(&mut shutdown) => {
                    shared.state.send_replace(State::Closed);
                    return;
                }
            }
            let client = SourceClient {
                name: shared.cfg.name.clone(),
                events: shared.events.clone(),
            };
            let attempt = tokio::select! {
                r = connect_once(&shared.cfg, client) => r,
                _ = until_shutdown(&mut shutdown) => {
                    shared.state.send_replace(State::Closed);
                    return;
                }
            };
            match attempt {
                Ok(c) => break c,
                Err(e) => {
                    last_error = e.to_string();
                    tracing::warn!(upstream = %shared.cfg.name, error = %last_error, next_delay = ?backoff_delay(failures), "reconnect failed");
                    shared.state.send_replace(State::Reconnecting {
                        last_error: last_error.clone(),
                    });
                }
            }
        };
        generation += 1;
        shared.restarts.fetch_add(1, Ordering::Relaxed);
        publish(&shared, &conn, generation);
        tracing::info!(upstream = %shared.cfg.name, pid = ?conn.pid, "upstream reconnected");
        let _ = shared.events.send(Event::Reconnected);
    }
}

/// Re-lists tools after `tools/list_changed` or a reconnect and bumps the change counter.
async fn refresh_loop(shared: Arc<Shared>, mut events: mpsc::UnboundedReceiver<Event>) {
    let mut shutdown = shared.shutdown.subscribe();
    loop {
        let first = tokio::select! {
            e = events.recv() => match e { Some(e) => e, None => return },
            _ = until_shutdown(&mut shutdown) => return,
        };
        let mut list_changed = first == Event::ListChanged;
        while let Ok(e) = events.try_recv() {
            list_changed |= e == Event::ListChanged;
        }
        let deadline = Instant::now() + shared.cfg.call_timeout;
        let Ok(session) = wait_ready(&shared, deadline, 0).await else {
            continue;
        };
        let listed = tokio::time::timeout_at(deadline, session.peer.list_all_tools()).await;
        match listed {
            Ok(Ok(tools)) => {
                let previous = lock(&shared.known_tools).replace(tools.clone());
                let differs = previous.is_some_and(|p| p != tools);
                if list_changed || differs {
                    shared.changes.send_modify(|v| *v += 1);
                }
            }
            Ok(Err(e)) => {
                tracing::warn!(upstream = %shared.cfg.name, error = %e, "re-listing tools failed")
            }
            Err(_) => tracing::warn!(upstream = %shared.cfg.name, "re-listing tools timed out"),
        }
    }
}

/// Why one handshake attempt failed; `VersionRejected` triggers the discover fallback.
enum AttemptError {
    VersionRejected(McpSourceError),
    Fatal(McpSourceError),
}

impl From<McpSourceError> for AttemptError {
    fn from(e: McpSourceError) -> Self {
        Self::Fatal(e)
    }
}

/// Connects once: classic `initialize`, falling back to `server/discover` for servers that
/// reject it for its version. The whole thing is bounded by `connect_timeout`.
async fn connect_once(
    cfg: &UpstreamConfig,
    client: SourceClient,
) -> Result<Connection, McpSourceError> {
    let deadline = Instant::now() + cfg.connect_timeout;
    let conn = match attempt(
        cfg,
        client.clone(),
        ClientLifecycleMode::Initialize,
        deadline,
    )
    .await
    {
        Ok(c) => c,
        Err(AttemptError::VersionRejected(first)) => {
            tracing::debug!(upstream = %cfg.name, error = %first, "initialize refused; trying server/discover");
            let mode = ClientLifecycleMode::Discover {
                preferred_versions: vec![
                    ProtocolVersion::V_2026_07_28,
                    ProtocolVersion::V_2025_11_25,
                    ProtocolVersion::V_2025_06_18,
                ],
            };
            match attempt(cfg, client.clone(), mode, deadline).await {
                Ok(c) => c,
                // Both lifecycles failed: say so, with the reason of each.
                Err(AttemptError::VersionRejected(e) | AttemptError::Fatal(e)) => {
                    return Err(match e {
                        McpSourceError::Handshake { name, message } => McpSourceError::Handshake {
                            name,
                            message: format!(
                                "{message} (after `initialize` was refused: {})",
                                handshake_message(&first)
                            ),
                        },
                        other => other,
                    })
                }
            }
        }
        Err(AttemptError::Fatal(e)) => return Err(e),
    };
    if !protocol_supported(conn.protocol.as_str()) {
        let version = conn.protocol.to_string();
        let mut running = conn.running;
        let _ = running.close_with_timeout(SHUTDOWN_GRACE).await;
        return Err(McpSourceError::UnsupportedProtocol {
            name: cfg.name.clone(),
            version,
            min: MIN_PROTOCOL_VERSION,
            max: MAX_PROTOCOL_VERSION,
        });
    }
    if !conn.protocol.has_initialize() {
        listen_for_list_changes(&conn, client);
    }
    Ok(conn)
}

/// The message of a handshake error without the "upstream 'x': MCP handshake failed" prefix.
fn handshake_message(e: &McpSourceError) -> String {
    match e {
        McpSourceError::Handshake { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

/// In the 2026-07-28 lifecycle, notifications only flow inside a `subscriptions/listen`.
fn listen_for_list_changes(conn: &Connection, client: SourceClient) {
    let advertises = conn
        .running
        .peer()
        .peer_info()
        .and_then(|i| i.capabilities.tools.as_ref().and_then(|t| t.list_changed))
        .unwrap_or(false);
    if !advertises {
        return;
    }
    let peer = conn.running.peer().clone();
    tokio::spawn(async move {
        let filter = SubscriptionFilter::builder().tools_list_changed().build();
        let mut sub = match peer.listen(filter).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(upstream = %client.name, error = %e, "could not subscribe to tools/list_changed");
                return;
            }
        };
        while let Ok(Some(n)) = sub.next().await {
            if matches!(n, ServerNotification::ToolListChangedNotification(_)) {
                let _ = client.events.send(Event::ListChanged);
            }
        }
    });
}

fn classify_init_error(name: &str, e: ClientInitializeError, detail: &str) -> AttemptError {
    let message = format!("{e}{detail}");
    let err = McpSourceError::Handshake {
        name: name.to_string(),
        message,
    };
    match &e {
        ClientInitializeError::JsonRpcError(data)
            if refuses_initialize(data.code, &data.message) =>
        {
            AttemptError::VersionRejected(err)
        }
        _ => AttemptError::Fatal(err),
    }
}

/// Whether an error answering `initialize` says "not this handshake" rather than "broken":
/// "unsupported protocol version" (-32022), "method not found" (-32601: a server that never
/// had `initialize`), or an invalid-request/params answer that names the protocol version or
/// the method. These are worth a `server/discover` attempt; anything else is reported as is.
pub fn refuses_initialize(code: ErrorCode, message: &str) -> bool {
    if code == ErrorCode::UNSUPPORTED_PROTOCOL_VERSION || code == ErrorCode::METHOD_NOT_FOUND {
        return true;
    }
    let message = message.to_ascii_lowercase();
    (code == ErrorCode::INVALID_REQUEST || code == ErrorCode::INVALID_PARAMS)
        && (message.contains("protocol version")
            || message.contains("protocolversion")
            || message.contains("initialize"))
}

async fn attempt(
    cfg: &UpstreamConfig,
    client: SourceClient,
    mode: ClientLifecycleMode,
    deadline: Instant,
) -> Result<Connection, AttemptError> {
    let name = cfg.name.as_str();
    let timeout_error = |detail: String| McpSourceError::ConnectTimeout {
        name: name.to_string(),
        timeout: cfg.connect_timeout,
        detail,
    };
    let (running, pid) = match &cfg.transport {
        Transport::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let mut cmd = tokio::process::Command::new(command);
            cmd.args(args).kill_on_drop(true);
            for (k, v) in env {
                cmd.env(k, v);
            }
            if let Some(dir) = cwd {
                cmd.current_dir(dir);
            }
            let (child, stderr) = TokioChildProcess::builder(cmd)
                .stderr(std::process::Stdio::piped())
                .spawn()
                .map_err(|source| McpSourceError::Spawn {
                    name: name.to_string(),
                    command: command.clone(),
                    source,
                })?;
            let pid = child.id();
            let tail = StderrTail::start(name, stderr, cfg.redacted_values());
            match tokio::time::timeout_at(
                deadline,
                serve_client_with_lifecycle(client, child, mode),
            )
            .await
            {
                Ok(Ok(running)) => (running, pid),
                Ok(Err(e)) => {
                    tail.wait_eof(Duration::from_millis(300)).await;
                    let detail = match classify_exit(&e) {
                        Some(what) => format!(" ({what}){}", tail.detail()),
                        None => tail.detail(),
                    };
                    return Err(classify_init_error(name, e, &detail));
                }
                Err(_) => return Err(timeout_error(tail.detail()).into()),
            }
        }
        Transport::Http { url, headers } => {
            let parsed = reqwest::Url::parse(url).map_err(|e| McpSourceError::InvalidConfig {
                name: name.to_string(),
                reason: format!("'{url}' is not a valid URL: {e}"),
            })?;
            if !cfg.allow_private {
                match tokio::time::timeout_at(deadline, check_host(&parsed, false)).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => {
                        return Err(McpSourceError::PrivateAddress {
                            name: name.to_string(),
                            host: parsed.host_str().unwrap_or_default().to_string(),
                            reason: e.to_string(),
                        }
                        .into())
                    }
                    Err(_) => return Err(timeout_error(": resolving the host".into()).into()),
                }
            }
            let http = unfollowing_client(cfg.allow_private).map_err(|e| {
                McpSourceError::InvalidConfig {
                    name: name.to_string(),
                    reason: format!("cannot build the HTTP client: {e}"),
                }
            })?;
            let config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                .custom_headers(header_map(name, headers)?);
            let transport = StreamableHttpClientTransport::with_client(http, config);
            match tokio::time::timeout_at(
                deadline,
                serve_client_with_lifecycle(client, transport, mode),
            )
            .await
            {
                Ok(Ok(running)) => (running, None),
                Ok(Err(e)) => return Err(classify_init_error(name, e, "")),
                Err(_) => return Err(timeout_error(String::new()).into()),
            }
        }
    };
    let protocol = running
        .peer()
        .peer_info()
        .map(|i| i.protocol_version.clone())
        .unwrap_or_default();
    Ok(Connection {
        running,
        pid,
        protocol,
    })
}

fn classify_exit(e: &ClientInitializeError) -> Option<&'static str> {
    match e {
        ClientInitializeError::ConnectionClosed(_) => {
            Some("the process closed its output; it probably exited")
        }
        _ => None,
    }
}

fn header_map(
    name: &str,
    headers: &[(String, String)],
) -> Result<HashMap<reqwest::header::HeaderName, reqwest::header::HeaderValue>, McpSourceError> {
    const RESERVED: [&str; 4] = [
        "accept",
        "mcp-session-id",
        "mcp-protocol-version",
        "last-event-id",
    ];
    let mut out = HashMap::new();
    for (k, v) in headers {
        let invalid = |reason: String| McpSourceError::InvalidConfig {
            name: name.to_string(),
            reason,
        };
        if RESERVED.iter().any(|r| k.eq_ignore_ascii_case(r)) {
            return Err(invalid(format!(
                "header '{k}' is managed by the MCP transport and cannot be set"
            )));
        }
        let hn = reqwest::header::HeaderName::from_bytes(k.as_bytes())
            .map_err(|e| invalid(format!("invalid header name '{k}': {e}")))?;
        let hv = reqwest::header::HeaderValue::from_str(v)
            .map_err(|e| invalid(format!("invalid value for header '{k}': {e}")))?;
        out.insert(hn, hv);
    }
    Ok(out)
}

/// Drains a child's stderr into the log and keeps the last lines for error messages.
struct StderrTail {
    lines: Arc<Mutex<VecDeque<String>>>,
    eof: watch::Receiver<bool>,
}

impl StderrTail {
    /// `secrets` are blanked out of every line before it is logged or quoted.
    fn start(
        name: &str,
        stderr: Option<tokio::process::ChildStderr>,
        secrets: Vec<String>,
    ) -> Self {
        let lines = Arc::new(Mutex::new(VecDeque::new()));
        let (eof_tx, eof) = watch::channel(false);
        if let Some(stderr) = stderr {
            let name = name.to_string();
            let lines = lines.clone();
            tokio::spawn(async move {
                let secrets: Vec<&str> = secrets.iter().map(String::as_str).collect();
                let mut reader = tokio::io::BufReader::new(stderr).lines();
                while let Ok(Some(line)) = reader.next_line().await {
                    let line = redact(&line, &secrets);
                    tracing::debug!(upstream = %name, "stderr: {line}");
                    let mut l = lock(&lines);
                    if l.len() == STDERR_TAIL_LINES {
                        l.pop_front();
                    }
                    l.push_back(line);
                }
                let _ = eof_tx.send(true);
            });
        } else {
            let _ = eof_tx.send(true);
        }
        Self { lines, eof }
    }

    async fn wait_eof(&self, limit: Duration) {
        let mut eof = self.eof.clone();
        let _ = tokio::time::timeout(limit, eof.wait_for(|e| *e)).await;
    }

    /// "; stderr: a | b" or "" when the child wrote nothing.
    fn detail(&self) -> String {
        let l = lock(&self.lines);
        if l.is_empty() {
            String::new()
        } else {
            let joined: Vec<&str> = l.iter().map(String::as_str).collect();
            format!("; stderr: {}", joined.join(" | "))
        }
    }
}

/// Forwards one Toolshed tool to its upstream tool over the shared session.
struct UpstreamToolHandler {
    upstream: Upstream,
    remote_name: String,
    /// Read-only or idempotent: may be re-sent once when the connection dies mid-call.
    retry_safe: bool,
}

#[async_trait::async_trait]
impl ToolHandler for UpstreamToolHandler {
    /// Forwards the call; configured secrets the upstream echoes are blanked out of the
    /// result and of errors.
    async fn call(&self, ctx: ToolContext, args: Value) -> Result<Value, ToolError> {
        let secrets: Vec<&str> = self
            .upstream
            .inner
            .shared
            .redact
            .iter()
            .map(String::as_str)
            .collect();
        let outcome = self.forward(ctx, args).await;
        redact_outcome(outcome, &secrets)
    }
}

impl UpstreamToolHandler {
    async fn forward(&self, ctx: ToolContext, args: Value) -> Result<Value, ToolError> {
        let shared = &self.upstream.inner.shared;
        let ns = shared.cfg.name.as_str();
        let budget = shared.cfg.call_timeout.min(ctx.timeout);
        let deadline = Instant::now() + budget;
        let arguments = match args {
            Value::Object(m) => Some(m),
            Value::Null => None,
            other => {
                return Err(ToolError::invalid(format!(
                    "arguments must be a JSON object, got {other}"
                )))
            }
        };
        let mut min_generation = 0;
        for attempt in 0..2 {
            let session =
                wait_ready(shared, deadline, min_generation)
                    .await
                    .map_err(|e| match e {
                        McpSourceError::Unavailable { .. } => {
                            ToolError::new(ToolErrorKind::Timeout, e.to_string())
                        }
                        other => ToolError::upstream(other.to_string()),
                    })?;
            let mut params = CallToolRequestParams::new(self.remote_name.clone());
            params.arguments = arguments.clone();
            let outcome =
                tokio::time::timeout_at(deadline, session.peer.call_tool_once(params)).await;
            match outcome {
                Err(_) => {
                    return Err(ToolError::new(
                        ToolErrorKind::Timeout,
                        format!(
                            "upstream '{ns}' tool '{}' did not answer within {budget:?}",
                            self.remote_name
                        ),
                    ))
                }
                Ok(Ok(CallToolResponse::Complete(result))) => return convert_result(result),
                Ok(Ok(CallToolResponse::InputRequired(_))) => {
                    return Err(ToolError::upstream(format!(
                        "upstream '{ns}' tool '{}' asked for interactive input, which Toolshed does not provide",
                        self.remote_name
                    )))
                }
                Ok(Ok(_)) => {
                    return Err(ToolError::upstream(format!(
                        "upstream '{ns}' tool '{}' answered with an asynchronous task, which Toolshed does not poll",
                        self.remote_name
                    )))
                }
                Ok(Err(e @ (ServiceError::TransportClosed | ServiceError::TransportSend(_)))) => {
                    // Only a session that really ended is worth waiting for: a failed HTTP POST
                    // on a live session is reported as is.
                    let session_ended = matches!(e, ServiceError::TransportClosed)
                        || session.peer.is_transport_closed();
                    // A failed write to a stdio child never delivered the request: the child
                    // is gone, so any tool may be sent again on the restarted one.
                    let never_delivered = matches!(e, ServiceError::TransportSend(_))
                        && matches!(shared.cfg.transport, Transport::Stdio { .. });
                    if attempt == 0 && (never_delivered || (self.retry_safe && session_ended)) {
                        min_generation = session.generation + 1;
                        continue;
                    }
                    return Err(ToolError::upstream(format!(
                        "the connection to upstream '{ns}' failed during '{}' ({e}); the call may or may not have run",
                        self.remote_name
                    )));
                }
                Ok(Err(ServiceError::McpError(e))) => {
                    let message = format!("upstream '{ns}' refused '{}': {}", self.remote_name, e.message);
                    let kind = if e.code == ErrorCode::INVALID_PARAMS {
                        ToolErrorKind::InvalidInput
                    } else if e.code == ErrorCode::METHOD_NOT_FOUND {
                        ToolErrorKind::NotFound
                    } else {
                        ToolErrorKind::Upstream
                    };
                    let mut err = ToolError::new(kind, message);
                    if let Some(data) = e.data {
                        err = err.with_data(data);
                    }
                    return Err(err);
                }
                Ok(Err(ServiceError::Timeout { timeout })) => {
                    return Err(ToolError::new(
                        ToolErrorKind::Timeout,
                        format!("upstream '{ns}' did not answer within {timeout:?}"),
                    ))
                }
                Ok(Err(e)) => {
                    return Err(ToolError::upstream(format!(
                        "calling '{}' on upstream '{ns}' failed: {e}",
                        self.remote_name
                    )))
                }
            }
        }
        Err(ToolError::upstream(format!(
            "upstream '{ns}' lost its connection twice during '{}'",
            self.remote_name
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_caps() {
        assert_eq!(backoff_delay(0), Duration::from_millis(100));
        assert_eq!(backoff_delay(1), Duration::from_millis(200));
        assert_eq!(backoff_delay(4), Duration::from_millis(1600));
        assert_eq!(backoff_delay(9), Duration::from_secs(30));
        assert_eq!(backoff_delay(u32::MAX), Duration::from_secs(30));
        for n in 0..40 {
            assert!(backoff_delay(n) <= backoff_delay(n + 1));
        }
    }

    #[test]
    fn protocol_range() {
        for v in ["2025-06-18", "2025-11-25", "2026-07-28"] {
            assert!(protocol_supported(v), "{v}");
        }
        for v in ["2024-11-05", "2025-03-26", "2026-12-01"] {
            assert!(!protocol_supported(v), "{v}");
        }
    }

    #[test]
    fn refusals_of_initialize_are_recognised() {
        assert!(refuses_initialize(
            ErrorCode::UNSUPPORTED_PROTOCOL_VERSION,
            "x"
        ));
        assert!(refuses_initialize(
            ErrorCode::METHOD_NOT_FOUND,
            "Method not found"
        ));
        assert!(refuses_initialize(
            ErrorCode::INVALID_REQUEST,
            "Unsupported protocol version: 2025-11-25"
        ));
        assert!(refuses_initialize(
            ErrorCode::INVALID_PARAMS,
            "initialize is not supported; use server/discover"
        ));
        assert!(!refuses_initialize(
            ErrorCode::INVALID_PARAMS,
            "missing field clientInfo"
        ));
        assert!(!refuses_initialize(
            ErrorCode::INTERNAL_ERROR,
            "protocol version"
        ));
    }

    #[test]
    fn headers_are_checked() {
        let ok = header_map("w", &[("Authorization".into(), "Bearer x".into())]).unwrap();
        assert_eq!(ok.len(), 1);
        let e = header_map("w", &[("Mcp-Session-Id".into(), "1".into())]).unwrap_err();
        assert!(e.to_string().contains("Mcp-Session-Id"));
        assert!(header_map("w", &[("bad header".into(), "v".into())]).is_err());
        assert!(header_map("w", &[("x-a".into(), "line\nbreak".into())]).is_err());
    }

    #[tokio::test]
    async fn missing_command_is_a_spawn_error() {
        let cfg = UpstreamConfig::stdio(
            "ghost",
            "/nonexistent/toolshed-no-such-binary",
            Vec::<String>::new(),
        );
        let e = Upstream::connect(cfg).await.unwrap_err();
        assert!(matches!(e, McpSourceError::Spawn { .. }), "{e}");
        assert!(e.to_string().contains("toolshed-no-such-binary"));
    }

    #[tokio::test]
    async fn private_http_targets_are_refused_before_connecting() {
        for url in [
            "http://127.0.0.1:1/mcp",
            "http://localhost:1/mcp",
            "http://[::1]:1/mcp",
        ] {
            let e = Upstream::connect(UpstreamConfig::http("web", url))
                .await
                .unwrap_err();
            assert!(
                matches!(e, McpSourceError::PrivateAddress { .. }),
                "{url}: {e}"
            );
        }
    }
}
