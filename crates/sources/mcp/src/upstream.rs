//! [`Upstream`]: one supervised MCP client session to an upstream server, shared by every
//! tool imported from it.
//!
//! [`Upstream::connect`] spawns the child (stdio) or opens the streamable HTTP session and
//! completes the MCP handshake within `connect_timeout` ([`connect`](crate::connect): transports,
//! protocol revisions from [`MIN_PROTOCOL_VERSION`] through [`MAX_PROTOCOL_VERSION`], the
//! `server/discover` fallback). A supervisor task then owns the session and reconnects it with
//! backoff when it is lost ([`supervisor`](crate::supervisor)). [`Upstream::tools`] lists the
//! upstream's tools; their handlers (module `handler`) send `tools/call` on the one
//! shared session (over streamable HTTP, a plain call is posted from the caller's own task
//! with that session's id and headers: module `direct`).
//!
//! Children are stopped on [`Upstream::shutdown`] and when the last handle (an [`Upstream`]
//! clone or a tool from [`Upstream::tools`]) is dropped.
//!
//! # Secrets
//!
//! [`UpstreamConfig::redacted_values`] (credential-named environment variables and headers, and
//! the listed [`UpstreamConfig::secrets`]) are blanked out of tool results, tool errors and the
//! child's stderr (logged and quoted), in case the upstream echoes them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{ProtocolVersion, Tool as McpTool};
use rmcp::{Peer, RoleClient};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use toolshed_core::Tool;

use crate::config::UpstreamConfig;
use crate::connect::{connect_once, SourceClient};
use crate::error::McpSourceError;
use crate::handler::UpstreamToolHandler;
use crate::mapping::map_tools;
use crate::supervisor::{publish, refresh_loop, supervise, Event, SHUTDOWN_GRACE};

pub use crate::connect::{
    protocol_supported, refuses_initialize, MAX_PROTOCOL_VERSION, MIN_PROTOCOL_VERSION,
};
pub use crate::supervisor::backoff_delay;

/// A connected upstream MCP server. Cheap to clone; all clones share one session.
#[derive(Clone)]
pub struct Upstream {
    inner: Arc<UpstreamState>,
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
struct UpstreamState {
    shared: Arc<Shared>,
}

impl Drop for UpstreamState {
    fn drop(&mut self) {
        self.shared.shutdown.send_replace(true);
    }
}

/// State shared with the background tasks (which do not keep the upstream alive).
pub(crate) struct Shared {
    pub(crate) cfg: UpstreamConfig,
    pub(crate) state: watch::Sender<State>,
    pub(crate) changes: watch::Sender<u64>,
    pub(crate) shutdown: watch::Sender<bool>,
    pub(crate) restarts: AtomicU64,
    pub(crate) known_tools: Mutex<Option<Vec<McpTool>>>,
    pub(crate) events: mpsc::UnboundedSender<Event>,
    /// [`UpstreamConfig::redacted_values`], blanked out of results and errors.
    pub(crate) redact: Vec<String>,
    /// Where the upstream's progress for each call in flight goes.
    pub(crate) progress: crate::connect::ProgressRoutes,
    /// The calls waiting for the upstream, whose client gets the upstream's requests.
    pub(crate) calls: Arc<crate::relay::CallsInFlight>,
    /// Sessions' subscriptions to the upstream's resources, counted per URI.
    pub(crate) subscriptions: crate::entries::Subscriptions,
    /// A 2026-07-28 upstream's `subscriptions/listen` stream of the subscribed URIs.
    pub(crate) listener: crate::entries::Listener,
    /// The OAuth state, shared by the reconnects ([`crate::oauth`]).
    pub(crate) oauth: Option<Arc<crate::oauth::Authorizer>>,
    /// Calls answered through the fast path ([`crate::direct`]).
    pub(crate) direct_calls: AtomicU64,
}

/// Where the session stands; watched by calls waiting for a session.
#[derive(Clone)]
pub(crate) enum State {
    Ready(Arc<Session>),
    Reconnecting { last_error: String },
    Closed,
}

/// One established session; `generation` counts reconnects.
pub(crate) struct Session {
    pub(crate) peer: Peer<RoleClient>,
    pub(crate) pid: Option<u32>,
    pub(crate) protocol: ProtocolVersion,
    pub(crate) generation: u64,
    /// The fast path of plain `tools/call` (streamable HTTP only, [`crate::direct`]).
    pub(crate) direct: Option<crate::direct::DirectPost>,
}

impl Upstream {
    /// Connects (spawning the child for stdio) and completes the handshake within
    /// `cfg.connect_timeout`.
    pub async fn connect(cfg: UpstreamConfig) -> Result<Self, McpSourceError> {
        cfg.validate()?;
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        let progress = crate::connect::ProgressRoutes::default();
        let calls = Arc::new(crate::relay::CallsInFlight::default());
        let oauth = match (&cfg.oauth, &cfg.transport) {
            (Some(oauth), crate::config::Transport::Http { url, .. }) => {
                crate::oauth::Authorizer::new(&cfg.name, url, oauth.clone(), cfg.allow_private)
                    .map(Arc::new)
            }
            _ => None,
        };
        let client = SourceClient {
            name: cfg.name.clone(),
            events: events_tx.clone(),
            progress: progress.clone(),
            notices: cfg.notices.clone(),
            calls: calls.clone(),
            oauth: oauth.clone(),
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
            progress,
            calls,
            subscriptions: Default::default(),
            listener: Default::default(),
            oauth,
            direct_calls: AtomicU64::new(0),
        });
        let session = publish(&shared, &conn, 1);
        tokio::spawn(supervise(shared.clone(), conn, session));
        tokio::spawn(refresh_loop(shared.clone(), events_rx));
        Ok(Self {
            inner: Arc::new(UpstreamState { shared }),
        })
    }

    /// The state shared with the supervisor and the tool handlers.
    pub(crate) fn shared(&self) -> &Shared {
        &self.inner.shared
    }

    /// The values blanked out of what the upstream answers ([`UpstreamConfig::redacted_values`]).
    /// What is blanked out of the upstream's answers: the configured secrets and the newest
    /// OAuth tokens Toolshed sent it.
    pub(crate) fn secrets(&self) -> Vec<String> {
        let shared = &self.inner.shared;
        let mut out = shared.redact.clone();
        if let Some(oauth) = &shared.oauth {
            out.extend(oauth.tokens());
        }
        out
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

    /// [`Self::tools`], then the upstream's resources, resource templates and prompts as
    /// catalog entries ([`crate::entries`]) when it offers them. A listing of those that fails
    /// is logged and leaves them out; the tools still load.
    pub async fn entries(&self) -> Result<Vec<Tool>, McpSourceError> {
        let mut tools = self.tools().await?;
        let shared = &self.inner.shared;
        let deadline = Instant::now() + shared.cfg.call_timeout;
        let session = wait_ready(shared, deadline, 0).await?;
        let (resources, prompts) = session
            .peer
            .peer_info()
            .map(|i| {
                (
                    i.capabilities.resources.is_some(),
                    i.capabilities.prompts.is_some(),
                )
            })
            .unwrap_or_default();
        if !resources && !prompts {
            return Ok(tools);
        }
        let ns = shared.cfg.name.as_str();
        let prefix = format!("{ns}.");
        let mut used: std::collections::HashSet<String> = tools
            .iter()
            .filter_map(|t| t.def.path.as_str().strip_prefix(&prefix))
            .map(str::to_string)
            .collect();
        let peer = &session.peer;
        let (listed, templates, prompts) = tokio::join!(
            listing(
                ns,
                deadline,
                "resources/list",
                resources,
                peer.list_all_resources()
            ),
            listing(
                ns,
                deadline,
                "resources/templates/list",
                resources,
                peer.list_all_resource_templates()
            ),
            listing(
                ns,
                deadline,
                "prompts/list",
                prompts,
                peer.list_all_prompts()
            ),
        );
        tools.extend(crate::entries::entries(
            self, &mut used, &listed, &templates, &prompts,
        ));
        Ok(tools)
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

    /// How many `tools/call` were answered through the fast path of streamable HTTP upstreams
    /// (the caller's task posting and reading the answer, see `direct.rs`); for tests and
    /// benchmarks.
    #[doc(hidden)]
    pub fn direct_calls(&self) -> u64 {
        self.inner.shared.direct_calls.load(Ordering::Relaxed)
    }
}

/// One listing of [`Upstream::entries`]: empty when the upstream does not offer it, or (logged)
/// when it fails or does not answer in time.
async fn listing<T>(
    ns: &str,
    deadline: Instant,
    operation: &str,
    offered: bool,
    request: impl std::future::Future<Output = Result<Vec<T>, rmcp::ServiceError>>,
) -> Vec<T> {
    if !offered {
        return Vec::new();
    }
    match tokio::time::timeout_at(deadline, request).await {
        Ok(Ok(items)) => items,
        Ok(Err(e)) => {
            tracing::warn!(upstream = ns, operation, error = %e, "listing failed; leaving these entries out");
            Vec::new()
        }
        Err(_) => {
            tracing::warn!(
                upstream = ns,
                operation,
                "listing timed out; leaving these entries out"
            );
            Vec::new()
        }
    }
}

/// Locks `m`, also after a panic elsewhere poisoned it.
pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Waits for a usable session of at least `min_generation` until `deadline`.
pub(crate) async fn wait_ready(
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

#[cfg(test)]
mod tests {
    use super::*;

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
