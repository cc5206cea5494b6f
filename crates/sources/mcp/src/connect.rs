//! Connecting to an upstream: the transport (a spawned child over stdio, or a streamable HTTP
//! session) and the MCP handshake, bounded by `connect_timeout`.
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
//! outside the range are refused with [`McpSourceError::UnsupportedProtocol`], except 2025-03-26
//! for an upstream configured with [`UpstreamConfig::accept_2025_03_26`]. Notifications
//! (logging, progress...) sent before the `initialize` answer are tolerated by rmcp.
//!
//! # Children
//!
//! Children are started with `kill_on_drop`; their stderr goes through [`StderrTail`] (logged
//! at debug level, the last lines quoted in handshake errors, secrets blanked out).

use std::collections::HashMap;
use toolshed_outbound::client::unfollowing_client;
use toolshed_outbound::net::check_host;

use rmcp::model::{
    ClientCapabilities, ClientConfig, ErrorCode, Implementation, ProtocolVersion,
    ServerNotification, SubscriptionFilter,
};
use rmcp::service::{
    serve_client_with_lifecycle, ClientInitializeError, ClientLifecycleMode, NotificationContext,
    RunningService,
};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::config::{Transport, UpstreamConfig};
use crate::error::McpSourceError;
use crate::stderr::StderrTail;
use crate::supervisor::{Event, SHUTDOWN_GRACE};

/// The oldest MCP revision Toolshed accepts from an upstream.
pub const MIN_PROTOCOL_VERSION: &str = "2025-06-18";
/// The newest MCP revision Toolshed accepts from an upstream.
pub const MAX_PROTOCOL_VERSION: &str = "2026-07-28";

/// Whether an upstream's negotiated revision is inside the accepted range.
pub fn protocol_supported(version: &str) -> bool {
    (MIN_PROTOCOL_VERSION..=MAX_PROTOCOL_VERSION).contains(&version)
}

/// The rmcp client handler: identifies Toolshed, declares elicitation and sampling (relayed to
/// the client of the call in flight, see [`crate::relay`]), forwards list changes, progress,
/// log messages and resource updates.
#[derive(Clone)]
pub(crate) struct SourceClient {
    pub(crate) name: String,
    pub(crate) events: mpsc::UnboundedSender<Event>,
    /// Calls waiting for the upstream's progress, by the token Toolshed sent.
    pub(crate) progress: ProgressRoutes,
    /// Where the upstream's log messages go (virtual servers relay them).
    pub(crate) notices: Option<toolshed_core::notices::Notices>,
    /// The calls in flight, whose client gets the upstream's requests.
    pub(crate) calls: std::sync::Arc<crate::relay::CallsInFlight>,
    /// The upstream's OAuth state (streamable HTTP with `oauth` configured), kept across
    /// reconnects.
    pub(crate) oauth: Option<std::sync::Arc<crate::oauth::Authorizer>>,
}

/// Progress tokens of calls in flight and where their reports go. rmcp gives every request a
/// token of its own, known only once the request is sent, so reports that arrive before their
/// route opens wait in a small buffer (the newest [`EARLY_REPORTS`]) and are delivered, in order,
/// when it opens.
pub(crate) type ProgressRoutes = std::sync::Arc<std::sync::Mutex<Routes>>;

/// Most reports kept for routes that are not open (yet).
const EARLY_REPORTS: usize = 64;

#[derive(Default)]
pub(crate) struct Routes {
    open: std::collections::HashMap<String, toolshed_core::ProgressSink>,
    early: std::collections::VecDeque<(String, toolshed_core::Progress)>,
}

fn token_key(token: &rmcp::model::ProgressToken) -> String {
    match &token.0 {
        rmcp::model::NumberOrString::String(s) => format!("s:{s}"),
        rmcp::model::NumberOrString::Number(n) => format!("n:{n}"),
    }
}

/// An open route; closed when dropped.
pub(crate) struct Route {
    routes: ProgressRoutes,
    key: String,
}

impl Drop for Route {
    fn drop(&mut self) {
        crate::upstream::lock(&self.routes).open.remove(&self.key);
    }
}

/// Opens the route of `token` to `sink`, delivering the reports that came before it.
pub(crate) fn open_route(
    routes: &ProgressRoutes,
    token: &rmcp::model::ProgressToken,
    sink: toolshed_core::ProgressSink,
) -> Route {
    let key = token_key(token);
    let mut r = crate::upstream::lock(routes);
    let (mine, rest): (Vec<_>, Vec<_>) = r.early.drain(..).partition(|(k, _)| *k == key);
    r.early = rest.into();
    for (_, p) in mine {
        sink.report(p);
    }
    r.open.insert(key.clone(), sink);
    Route {
        routes: routes.clone(),
        key,
    }
}

impl ClientHandler for SourceClient {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            relayed_capabilities(),
            Implementation::new("toolshed", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    // Logging is deprecated by the 2026-07-28 revision (SEP-2577); upstreams of the earlier
    // revisions still send it, and clients of those revisions still expect it relayed.
    #[allow(deprecated)]
    async fn on_logging_message(
        &self,
        params: rmcp::model::LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.logged(params);
    }

    async fn on_progress(
        &self,
        params: rmcp::model::ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progressed(params);
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        tracing::debug!(upstream = %self.name, "upstream sent tools/list_changed");
        self.list_changed();
    }

    // Resources and prompts are catalog entries too: a change re-lists them with the tools.
    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.list_changed();
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.list_changed();
    }

    async fn on_resource_updated(
        &self,
        params: rmcp::model::ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.resource_updated(&params.uri);
    }

    async fn create_elicitation(
        &self,
        request: rmcp::model::ElicitRequestParams,
        context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        let url = matches!(
            request,
            rmcp::model::ElicitRequestParams::UrlElicitationParams { .. }
        );
        let asked = crate::relay::Asked {
            method: "elicitation/create",
            capability: if url {
                "elicitation.url"
            } else {
                "elicitation"
            },
        };
        self.relay(asked, &request, &context).await
    }

    // Sampling is deprecated by the 2026-07-28 revision; upstreams of earlier ones still ask.
    #[allow(deprecated)]
    async fn create_message(
        &self,
        params: rmcp::model::CreateMessageRequestParams,
        context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::CreateMessageResult, rmcp::ErrorData> {
        let asked = crate::relay::Asked {
            method: "sampling/createMessage",
            capability: "sampling",
        };
        self.relay(asked, &params, &context).await
    }
}

impl SourceClient {
    /// What the handler does with a notification the upstream sent on the answer stream of a
    /// call of the fast path ([`crate::direct`]), where rmcp's `NotificationContext` cannot be
    /// built: the same as the `on_*` methods above. A notification handled by a new `on_*`
    /// method must be added here too.
    #[allow(deprecated)]
    pub(crate) fn notified(&self, notification: ServerNotification) {
        match notification {
            ServerNotification::LoggingMessageNotification(n) => self.logged(n.params),
            ServerNotification::ProgressNotification(n) => self.progressed(n.params),
            ServerNotification::ToolListChangedNotification(_) => {
                tracing::debug!(upstream = %self.name, "upstream sent tools/list_changed");
                self.list_changed();
            }
            ServerNotification::ResourceListChangedNotification(_)
            | ServerNotification::PromptListChangedNotification(_) => self.list_changed(),
            ServerNotification::ResourceUpdatedNotification(n) => {
                self.resource_updated(&n.params.uri)
            }
            // rmcp's defaults ignore the rest too.
            _ => {}
        }
    }

    /// A log message of the upstream, to the notices (virtual servers relay them).
    #[allow(deprecated)]
    fn logged(&self, params: rmcp::model::LoggingMessageNotificationParam) {
        let Some(notices) = &self.notices else {
            return;
        };
        let level = serde_json::to_value(params.level)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_else(|| "info".into());
        notices.log(toolshed_core::notices::LogNotice {
            source: self.name.clone(),
            level,
            logger: params.logger,
            data: params.data,
        });
    }

    /// A progress report, to the route of its token (or kept until that opens).
    fn progressed(&self, params: rmcp::model::ProgressNotificationParam) {
        let key = token_key(&params.progress_token);
        let report = toolshed_core::Progress {
            progress: params.progress,
            total: params.total,
            message: params.message.map(|m| m.chars().take(1000).collect()),
        };
        let mut routes = crate::upstream::lock(&self.progress);
        match routes.open.get(&key) {
            Some(sink) => sink.report(report),
            None => {
                if routes.early.len() >= EARLY_REPORTS {
                    routes.early.pop_front();
                }
                routes.early.push_back((key, report));
            }
        }
    }

    /// The tools, resources or prompts changed: they are listed again.
    fn list_changed(&self) {
        let _ = self.events.send(Event::ListChanged);
    }

    /// An update of the resource `uri`, to the sessions subscribed to it.
    fn resource_updated(&self, uri: &str) {
        let published = self
            .notices
            .as_ref()
            .is_some_and(|n| n.resource_updated(&self.name, uri));
        if !published {
            tracing::debug!(upstream = %self.name, "a resource update no session can receive");
        }
    }

    /// Relays one request of the upstream to the client of the call it belongs to: the call on
    /// whose stream it arrived (`context`), else the call in flight.
    async fn relay<P: serde::Serialize, R: serde::de::DeserializeOwned>(
        &self,
        asked: crate::relay::Asked,
        params: &P,
        context: &rmcp::service::RequestContext<RoleClient>,
    ) -> Result<R, rmcp::ErrorData> {
        let params = serde_json::to_value(params)
            .map_err(|e| rmcp::ErrorData::invalid_params(e.to_string(), None))?;
        let on = context
            .extensions
            .get::<crate::relay::OnStreamOf>()
            .copied();
        let answer = crate::relay::relay(&self.calls, &self.name, asked, params, on).await?;
        serde_json::from_value(answer).map_err(|e| {
            rmcp::ErrorData::internal_error(
                format!("the client's answer to {} is malformed: {e}", asked.method),
                None,
            )
        })
    }
}

/// What Toolshed declares to upstreams: elicitation (form and URL) and sampling, which it
/// relays to the client of the call in flight or refuses with a reason.
fn relayed_capabilities() -> ClientCapabilities {
    serde_json::from_value(serde_json::json!({
        "elicitation": {"form": {}, "url": {}},
        "sampling": {}
    }))
    .unwrap_or_default()
}

/// A fresh connection, before it is published.
pub(crate) struct Connection {
    pub(crate) running: RunningService<RoleClient, SourceClient>,
    pub(crate) pid: Option<u32>,
    pub(crate) protocol: ProtocolVersion,
    /// The fast path of `tools/call` (streamable HTTP only, [`crate::direct`]).
    pub(crate) direct: Option<crate::direct::DirectPost>,
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
pub(crate) async fn connect_once(
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
    let legacy_accepted = cfg.accept_2025_03_26 && conn.protocol == ProtocolVersion::V_2025_03_26;
    if !protocol_supported(conn.protocol.as_str()) && !legacy_accepted {
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
    } else if client.notices.is_some() {
        ask_for_every_log(&conn, &cfg.name).await;
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

/// One handshake in `mode` over the configured transport, bounded by `deadline`.
async fn attempt(
    cfg: &UpstreamConfig,
    client: SourceClient,
    mode: ClientLifecycleMode,
    deadline: Instant,
) -> Result<Connection, AttemptError> {
    let (running, pid, direct) = match &cfg.transport {
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
            let (running, pid) = attempt_stdio(cfg, cmd, command, client, mode, deadline).await?;
            (running, pid, None)
        }
        Transport::Http { url, headers } => {
            let (running, direct) = attempt_http(cfg, url, headers, client, mode, deadline).await?;
            (running, None, Some(direct))
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
        direct,
    })
}

/// `connect_timeout` ran out; `detail` says during what (or quotes the child's stderr).
fn timeout_error(cfg: &UpstreamConfig, detail: String) -> McpSourceError {
    McpSourceError::ConnectTimeout {
        name: cfg.name.clone(),
        timeout: cfg.connect_timeout,
        detail,
    }
}

/// Spawns the child `cmd` (stderr piped into a [`StderrTail`]) and shakes hands over its
/// stdio. Returns the session and the child's pid.
async fn attempt_stdio(
    cfg: &UpstreamConfig,
    cmd: tokio::process::Command,
    command: &str,
    client: SourceClient,
    mode: ClientLifecycleMode,
    deadline: Instant,
) -> Result<(RunningService<RoleClient, SourceClient>, Option<u32>), AttemptError> {
    let name = cfg.name.as_str();
    let (child, stderr) = TokioChildProcess::builder(cmd)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|source| McpSourceError::Spawn {
            name: name.to_string(),
            command: command.to_string(),
            source,
        })?;
    let pid = child.id();
    let tail = StderrTail::start(name, stderr, cfg.redacted_values());
    match tokio::time::timeout_at(deadline, serve_client_with_lifecycle(client, child, mode)).await
    {
        Ok(Ok(running)) => Ok((running, pid)),
        Ok(Err(e)) => {
            tail.wait_eof(std::time::Duration::from_millis(300)).await;
            let detail = match classify_exit(&e) {
                Some(what) => format!(" ({what}){}", tail.detail()),
                None => tail.detail(),
            };
            Err(classify_init_error(name, e, &detail))
        }
        Err(_) => Err(timeout_error(cfg, tail.detail()).into()),
    }
}

/// Checks the URL (and, without `allow_private`, that its host is public), then shakes hands
/// over a streamable HTTP session with the configured headers. Returns the session and the
/// fast path of its `tools/call` ([`crate::direct`]).
async fn attempt_http(
    cfg: &UpstreamConfig,
    url: &str,
    headers: &[(String, String)],
    client: SourceClient,
    mode: ClientLifecycleMode,
    deadline: Instant,
) -> Result<
    (
        RunningService<RoleClient, SourceClient>,
        crate::direct::DirectPost,
    ),
    AttemptError,
> {
    let name = cfg.name.as_str();
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
            Err(_) => return Err(timeout_error(cfg, ": resolving the host".into()).into()),
        }
    }
    let http =
        unfollowing_client(cfg.allow_private).map_err(|e| McpSourceError::InvalidConfig {
            name: name.to_string(),
            reason: format!("cannot build the HTTP client: {e}"),
        })?;
    let config = StreamableHttpClientTransportConfig::with_uri(url)
        .custom_headers(header_map(name, headers)?);
    let http = crate::oauth::UpstreamHttp {
        inner: http,
        auth: client.oauth.clone(),
        allow_private: cfg.allow_private,
    };
    let (recording, direct) = crate::direct::pair(http, url, client.clone());
    let transport = StreamableHttpClientTransport::with_client(recording, config);
    let handshake = tokio::time::timeout_at(
        deadline,
        serve_client_with_lifecycle(client, transport, mode),
    )
    .await;
    match handshake {
        Ok(Ok(running)) => Ok((running, direct)),
        Ok(Err(e)) => Err(classify_init_error(name, e, "")),
        Err(_) => Err(timeout_error(cfg, String::new()).into()),
    }
}

fn classify_exit(e: &ClientInitializeError) -> Option<&'static str> {
    match e {
        ClientInitializeError::ConnectionClosed(_) => {
            Some("the process closed its output; it probably exited")
        }
        _ => None,
    }
}

/// The configured headers, checked: names and values valid, none of the transport's own.
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

/// Asks an upstream that logs (its `logging` capability) for every level, so that each client
/// session can choose its own (`logging/setLevel` is honoured per session downstream).
#[allow(deprecated)]
async fn ask_for_every_log(conn: &Connection, name: &str) {
    let logs = conn
        .running
        .peer_info()
        .is_some_and(|i| i.capabilities.logging.is_some());
    if !logs {
        return;
    }
    let params = rmcp::model::SetLevelRequestParams::new(rmcp::model::LoggingLevel::Debug);
    if let Err(e) = conn.running.peer().set_level(params).await {
        tracing::debug!(upstream = %name, error = %e, "logging/setLevel refused");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
