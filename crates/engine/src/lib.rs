//! Toolshed's engine: the ONE path every call takes, whatever face it comes from.
//!
//! ```text
//! face (MCP / HTTP / CLI / script)
//!   → per-principal rate limit
//!   → resolve the path in the caller's view (outside the role = does not exist)
//!   → validate arguments against the input schema (errors name the JSON pointer and the rule)
//!   → approval gate (destructive calls pause their execution)
//!   → handler, with a timeout
//!   → validate the output where the tool declares a schema
//!   → audit (principal, face, path, redacted arguments, outcome, duration)
//! ```
//!
//! Modules:
//! - [`invoke`]: that path, for one call.
//! - [`access`]: the engine as handlers see it (the caller's view, calls as the caller).
//! - [`executions`]: scripts, direct calls and agent runs as executions; pausing, durable journals,
//!   deterministic replay on resume, expiry.
//! - [`discovery`]: listing, ranked search and compact descriptions in the caller's view.
//! - [`audit`]: redaction and the batched background audit writer.
//! - [`caller`]: principals with their compiled access, and the face they use; API keys.
//! - [`decisions`]: who may approve or deny a pending call, through which channel.
//! - [`rate`]: per-principal rate limits for tool calls and scripts.
//! - [`notify`]: the webhook told when an execution pauses.
//! - [`ops`]: the agent-facing operations (search, describe, run, resume, list waits, cancel),
//!   defined once for every face.
//! - [`credentials`]: auth providers' credentials, scoped per tool origin, for `ctx.token(..)`.
//! - [`error`] — [`EngineError`], with codes and JSON for faces.

pub mod access;
pub mod actions;
pub mod audit;
pub mod caller;
pub mod connections;
pub mod credentials;
pub mod decisions;
pub mod discovery;
pub mod error;
pub mod events;
pub mod executions;
pub mod export;
pub mod invoke;
pub mod notify;
pub mod ops;
pub mod rate;
pub mod runtime_models;

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use toolshed_core::{Policy, SharedCatalog};
use toolshed_sandbox::{Limits, Sandbox};
use toolshed_store::Store;

pub use caller::{Caller, Face};
pub use credentials::{CredentialConfig, CredentialError, Credentials};
pub use decisions::DecisionChannel;
pub use discovery::{Description, SearchAnswer, SearchHit, SearchState, EMBEDDING_NOTE};
pub use error::EngineError;
pub use executions::{
    AnswerAction, ClientError, Decision, ExecutionInfo, InputMode, Outcome, PendingCall,
    PendingSummary, QuestionAnswer, RelayHooks, Relayed, RunRequest, ScriptOptions, ToolCall,
    ToolResultAnswer, Wait, WaitKind,
};
pub use ops::{Op, OpAnswer};
pub use rate::RateLimits;
pub use toolshed_sandbox::{Overloaded, SandboxConfig, WorkerCommand};
pub use toolshed_store::AuditEntry;

/// How long [`Engine::shutdown`] waits for queued audit entries to be written.
pub const SHUTDOWN_AUDIT_DEADLINE: Duration = Duration::from_secs(5);

/// Engine settings.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Longest a handler may run, unless its tool declares its own timeout.
    pub call_timeout: Duration,
    /// Longest any handler may run, whatever its tool declares (`[limits] max_call_timeout_ms`).
    pub max_call_timeout: Duration,
    /// How long a paused execution waits for a decision.
    pub approval_ttl: Duration,
    /// Sandbox limits for scripts.
    pub limits: Limits,
    /// How scripts run (worker processes or in process) and how many at once / queued.
    pub sandbox: SandboxConfig,
    /// How long past the longest possible run (wall clock or call timeout) a resumed execution
    /// must be silent before it counts as interrupted and may be resumed again.
    pub recovery_grace: Duration,
    /// Audit entries that may wait for the database; beyond it the oldest are dropped (counted).
    pub audit_queue: usize,
    /// Audit entries older than this are purged; `None` keeps them forever.
    pub audit_retention: Option<Duration>,
    /// Settled executions (with their journals and events) unchanged for this long are
    /// purged; `None` keeps them forever.
    pub execution_retention: Option<Duration>,
    /// Rate limits of every principal without its own.
    pub rate_limits: RateLimits,
    /// Rate limits of single principals, replacing [`Self::rate_limits`] for them.
    pub principal_rate_limits: std::collections::HashMap<String, RateLimits>,
    /// Told (HTTP POST of a small JSON) whenever an execution pauses (`[notify] webhook_url`).
    pub notify_webhook: Option<String>,
}

impl EngineConfig {
    /// How long one call of `def` may take: its own timeout or the call timeout, never more
    /// than the maximum call timeout.
    pub fn timeout_of(&self, def: &toolshed_core::ToolDef) -> Duration {
        def.timeout_ms
            .map(Duration::from_millis)
            .unwrap_or(self.call_timeout)
            .min(self.max_call_timeout)
    }
}

/// How often [`Engine::spawn_retention`] purges old audit entries.
pub const AUDIT_PURGE_INTERVAL: Duration = Duration::from_secs(3600);

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            call_timeout: Duration::from_secs(30),
            max_call_timeout: Duration::from_secs(600),
            approval_ttl: Duration::from_secs(24 * 3600),
            limits: Limits::default(),
            sandbox: SandboxConfig::default(),
            recovery_grace: Duration::from_secs(60),
            audit_queue: 10_000,
            audit_retention: Some(Duration::from_secs(90 * 24 * 3600)),
            execution_retention: Some(Duration::from_secs(30 * 24 * 3600)),
            rate_limits: RateLimits::default(),
            principal_rate_limits: Default::default(),
            notify_webhook: None,
        }
    }
}

pub(crate) struct EngineState {
    pub catalog: Arc<SharedCatalog>,
    pub policy: ArcSwap<Policy>,
    /// Roles of principals signed in with a token.
    pub signed_in: caller::SignedInRoles,
    pub store: Store,
    pub config: EngineConfig,
    pub audit: audit::AuditSink,
    pub credentials: Option<Arc<Credentials>>,
    /// Per-user connections (sources with `oauth2_user` credentials).
    pub connections: Option<Arc<connections::Connections>>,
    /// Authorizations of sources a person completes in a browser (upstream OAuth), finished
    /// by the HTTP face's callback.
    pub source_authorizations: Option<Arc<dyn toolshed_core::SourceAuthorizations>>,
    pub search: discovery::SearchCache,
    pub rates: rate::RateLimiter,
    pub sandbox: Sandbox,
    pub running: executions::answer::Running,
    pub notifier: Option<notify::Notifier>,
    pub events: events::EventHub,
    /// Model endpoints agent runs think with (`[models.<id>]`, and runtime ones as runs need
    /// them: [`runtime_models`]).
    pub models: toolshed_models::Models,
    /// The runtime endpoints built into `models`, with the `updated_at` they were built from.
    pub runtime_models: parking_lot::Mutex<std::collections::HashMap<String, i64>>,
    /// Held while a runtime endpoint is (re)built, so two rebuilds cannot interleave.
    pub runtime_models_build: tokio::sync::Mutex<()>,
    /// Opens secrets kept sealed in the store (runtime model keys).
    pub sealer: Option<Arc<toolshed_sealed::SecretBox>>,
    /// The script limits of the current catalog: tools whose own timeout outlasts a script's
    /// wall clock, kept per catalog version ([`Engine::script_limits`]).
    pub script_limits: parking_lot::Mutex<Option<(u64, Arc<toolshed_sandbox::Limits>)>>,
    /// Subscriptions granted, per (principal, path, URI), so that an unsubscribe releases only
    /// what the same principal subscribed to ([`Engine::entry_op`]).
    pub subscriptions:
        parking_lot::Mutex<std::collections::HashMap<(String, String, String), usize>>,
}

/// The engine. Cheap to clone; every face holds one.
#[derive(Clone)]
pub struct Engine {
    pub(crate) inner: Arc<EngineState>,
}

impl Engine {
    /// Starts an engine (its audit writer, and the sandbox's worker processes when
    /// [`EngineConfig::sandbox`] names a worker command) on the current tokio runtime.
    pub fn new(
        catalog: Arc<SharedCatalog>,
        policy: Policy,
        store: Store,
        config: EngineConfig,
    ) -> Self {
        let audit = audit::AuditSink::start(store.clone(), config.audit_queue);
        let rates =
            rate::RateLimiter::new(config.rate_limits, config.principal_rate_limits.clone());
        let sandbox = Sandbox::new(config.sandbox.clone());
        let notifier = config.notify_webhook.clone().map(notify::Notifier::new);
        let events = events::EventHub::new(store.clone());
        Self {
            inner: Arc::new(EngineState {
                catalog,
                policy: ArcSwap::from_pointee(policy),
                store,
                config,
                audit,
                credentials: None,
                connections: None,
                source_authorizations: None,
                search: discovery::SearchCache::default(),
                rates,
                sandbox,
                running: Default::default(),
                notifier,
                events,
                models: toolshed_models::Models::default(),
                runtime_models: Default::default(),
                runtime_models_build: Default::default(),
                sealer: None,
                signed_in: Default::default(),
                script_limits: Default::default(),
                subscriptions: Default::default(),
            }),
        }
    }

    /// The limits of a script run: the configured ones, and as long calls every tool whose own
    /// timeout (capped by `max_call_timeout`) outlasts the wall clock, so that a script can wait
    /// for a workflow run or a sub-agent as long as the tool itself may take.
    pub(crate) fn script_limits(&self) -> Arc<toolshed_sandbox::Limits> {
        let catalog = self.inner.catalog.load();
        let mut kept = self.inner.script_limits.lock();
        if let Some((version, limits)) = kept.as_ref() {
            if *version == catalog.version() {
                return limits.clone();
            }
        }
        let c = &self.inner.config;
        let mut limits = c.limits.clone();
        for e in catalog.iter() {
            let def = &e.tool.def;
            if def.timeout_ms.is_none() {
                continue;
            }
            let t = c.timeout_of(def);
            if t > limits.wall_clock
                && limits.long_calls_ms.len() < toolshed_sandbox::MAX_LONG_CALLS
            {
                limits.long_calls_ms.insert(
                    def.path.to_string(),
                    u64::try_from(t.as_millis()).unwrap_or(u64::MAX),
                );
            }
        }
        let limits = Arc::new(limits);
        *kept = Some((catalog.version(), limits.clone()));
        limits
    }

    /// Adds the semantic search stage: tools are embedded with `embedder` (in the background,
    /// per catalog snapshot) and searches fuse the embedding similarity with BM25F. Vectors are
    /// kept in `vector_file` between runs when given.
    pub fn with_embedder(
        self,
        embedder: Arc<dyn toolshed_search::TextEmbedder>,
        vector_file: Option<std::path::PathBuf>,
    ) -> Self {
        let inner = Arc::try_unwrap(self.inner)
            .unwrap_or_else(|_| panic!("with_embedder must be called before the engine is shared"));
        Self {
            inner: Arc::new(EngineState {
                // Repeated queries skip the model.
                search: discovery::SearchCache::with_embedder(
                    Arc::new(toolshed_search::CachedEmbedder::new(
                        embedder,
                        toolshed_search::query_cache::DEFAULT_QUERY_CACHE,
                    )),
                    vector_file,
                ),
                ..inner
            }),
        }
    }

    /// Sets the auth providers' credentials; each call sees only what its tool's origin may use
    /// (a plugin's providers serve that plugin's tools).
    pub fn with_credentials(self, credentials: Arc<Credentials>) -> Self {
        let inner = Arc::try_unwrap(self.inner).unwrap_or_else(|_| {
            panic!("with_credentials must be called before the engine is shared")
        });
        Self {
            inner: Arc::new(EngineState {
                credentials: Some(credentials),
                ..inner
            }),
        }
    }

    /// Sets the per-user connections ([`connections`]): calls of their sources carry each
    /// principal's own grant, and pause for one when there is none.
    pub fn with_connections(self, connections: Arc<connections::Connections>) -> Self {
        let inner = Arc::try_unwrap(self.inner).unwrap_or_else(|_| {
            panic!("with_connections must be called before the engine is shared")
        });
        Self {
            inner: Arc::new(EngineState {
                connections: Some(connections),
                ..inner
            }),
        }
    }

    /// Sets where authorizations of sources that a person completes are finished
    /// ([`toolshed_core::authorizations`]).
    pub fn with_source_authorizations(
        self,
        authorizations: Arc<dyn toolshed_core::SourceAuthorizations>,
    ) -> Self {
        let inner = Arc::try_unwrap(self.inner).unwrap_or_else(|_| {
            panic!("with_source_authorizations must be called before the engine is shared")
        });
        Self {
            inner: Arc::new(EngineState {
                source_authorizations: Some(authorizations),
                ..inner
            }),
        }
    }

    /// Where authorizations of sources that a person completes are finished, when set.
    pub fn source_authorizations(&self) -> Option<&Arc<dyn toolshed_core::SourceAuthorizations>> {
        self.inner.source_authorizations.as_ref()
    }

    /// The authorizations of sources that wait for a person and that `caller` may see: those of
    /// the sources whose calls its roles decide as a whole (a `decide` pattern matching
    /// `<source>.*`, such as `<source>.**` or `**`). Their links let whoever opens them authorize
    /// Toolshed at the upstream with their own account, so nobody else sees them.
    pub fn pending_source_authorizations(
        &self,
        caller: &Caller,
    ) -> Vec<toolshed_core::PendingAuthorization> {
        let Some(authorizations) = self.source_authorizations() else {
            return Vec::new();
        };
        authorizations
            .pending()
            .into_iter()
            .filter(|p| caller.access.may_decide(&format!("{}.*", p.source)))
            .collect()
    }

    /// The per-user connections, when any are configured.
    pub fn connections(&self) -> Option<&Arc<connections::Connections>> {
        self.inner.connections.as_ref()
    }

    /// Sets the model endpoints agent runs use ([`executions::agent`]).
    pub fn with_models(self, models: toolshed_models::Models) -> Self {
        let inner = Arc::try_unwrap(self.inner)
            .unwrap_or_else(|_| panic!("with_models must be called before the engine is shared"));
        Self {
            inner: Arc::new(EngineState { models, ..inner }),
        }
    }

    /// Sets the key that opens secrets sealed in the store (the keys of model endpoints added
    /// at runtime).
    pub fn with_sealer(self, sealer: Arc<toolshed_sealed::SecretBox>) -> Self {
        let inner = Arc::try_unwrap(self.inner)
            .unwrap_or_else(|_| panic!("with_sealer must be called before the engine is shared"));
        Self {
            inner: Arc::new(EngineState {
                sealer: Some(sealer),
                ..inner
            }),
        }
    }

    /// The caller for a principal, with access compiled from the current policy (and, for a
    /// principal signed in with a token, the roles its newest token granted).
    pub fn caller(&self, principal: &str, face: Face) -> Caller {
        let policy = self.inner.policy.load();
        let access = self
            .inner
            .signed_in
            .access(principal, &policy)
            .unwrap_or_else(|| policy.access(principal));
        Caller::new(principal, access, face)
    }

    /// The caller for a principal signed in with `token`, which grants `roles` (on top of any
    /// the policy gives that principal id). The roles are remembered, in memory and in the
    /// store, so a run it owns resumes with them whoever answers its wait; the token is kept
    /// with the caller only (for sources that exchange it).
    pub fn signed_in(
        &self,
        principal: &str,
        roles: &[String],
        token: &toolshed_outbound::Secret,
        face: Face,
    ) -> Caller {
        if self.inner.signed_in.remember(principal, roles) {
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                let (store, who, roles) = (
                    self.inner.store.clone(),
                    principal.to_string(),
                    roles.to_vec(),
                );
                rt.spawn(async move {
                    if let Err(e) = store.put_signed_in(&who, &roles).await {
                        tracing::warn!(error = %e, "recording a signed-in principal's roles failed");
                    }
                });
            }
        }
        let policy = self.inner.policy.load_full();
        let access = self
            .inner
            .signed_in
            .access(principal, &policy)
            .unwrap_or_else(|| policy.access_with_roles(principal, roles));
        let mut caller = Caller::new(principal, access, face);
        caller.subject_token = (!token.is_empty()).then(|| token.clone());
        caller
    }

    /// The caller an execution's owner runs as when its run goes on: like [`Engine::caller`],
    /// with a signed-in principal's roles read from the store when this process has not seen
    /// the principal (after a restart, or on another replica).
    pub(crate) async fn owner(&self, principal: &str, face: Face) -> Caller {
        let known = self.inner.policy.load().knows(principal)
            || self.inner.signed_in.get(principal).is_some();
        if !known {
            if let Ok(Some(roles)) = self.inner.store.signed_in_roles(principal).await {
                self.inner.signed_in.remember(principal, &roles);
            }
        }
        self.caller(principal, face)
    }

    /// Replaces the policy (callers built afterwards see the new one).
    pub fn set_policy(&self, policy: Policy) {
        self.inner.policy.store(Arc::new(policy));
    }

    pub fn catalog(&self) -> &Arc<SharedCatalog> {
        &self.inner.catalog
    }

    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    /// The live and stored events of executions.
    pub fn events(&self) -> &events::EventHub {
        &self.inner.events
    }

    pub fn config(&self) -> &EngineConfig {
        &self.inner.config
    }

    /// Waits until queued audit entries are written.
    pub async fn flush_audit(&self) {
        self.inner.audit.flush().await;
    }

    /// Deletes audit entries older than the configured retention; returns how many went.
    pub async fn purge_audit(&self) -> Result<u64, EngineError> {
        let Some(keep) = self.inner.config.audit_retention else {
            return Ok(0);
        };
        let cutoff = toolshed_store::now_ms() - keep.as_millis() as i64;
        Ok(self.inner.store.purge_audit_before(cutoff).await?)
    }

    /// Deletes settled executions (journals and events with them) unchanged for longer than
    /// the configured retention; returns (events, executions) deleted.
    pub async fn purge_executions(&self) -> Result<(u64, u64), EngineError> {
        let Some(keep) = self.inner.config.execution_retention else {
            return Ok((0, 0));
        };
        let cutoff = toolshed_store::now_ms() - keep.as_millis() as i64;
        Ok(self.inner.store.purge_executions_before(cutoff).await?)
    }

    /// Purges old audit entries and settled executions now and then every
    /// [`AUDIT_PURGE_INTERVAL`], for a serving process. Does nothing when both are kept forever.
    pub fn spawn_retention(&self) -> Option<tokio::task::JoinHandle<()>> {
        let config = &self.inner.config;
        if config.audit_retention.is_none() && config.execution_retention.is_none() {
            return None;
        }
        let engine = self.clone();
        Some(tokio::spawn(async move {
            let mut tick = tokio::time::interval(AUDIT_PURGE_INTERVAL);
            loop {
                tick.tick().await;
                match engine.purge_audit().await {
                    Ok(0) => {}
                    Ok(n) => tracing::info!(purged = n, "old audit entries purged"),
                    Err(e) => tracing::warn!(error = %e, "purging old audit entries failed"),
                }
                match engine.purge_executions().await {
                    Ok((0, 0)) => {}
                    Ok((events, executions)) => {
                        tracing::info!(events, executions, "old executions purged")
                    }
                    Err(e) => tracing::warn!(error = %e, "purging old executions failed"),
                }
            }
        }))
    }

    /// Audit entries dropped because the audit queue was full.
    pub fn audit_dropped(&self) -> u64 {
        self.inner.audit.dropped()
    }

    /// Graceful shutdown: writes the queued audit entries, waiting at most
    /// [`SHUTDOWN_AUDIT_DEADLINE`]. Call it before the process exits.
    pub async fn shutdown(&self) {
        self.shutdown_within(SHUTDOWN_AUDIT_DEADLINE).await;
    }

    /// [`Self::shutdown`] with its own deadline for the audit flush. Returns how many queued
    /// audit entries were not written in time (they are logged as lost).
    pub async fn shutdown_within(&self, deadline: Duration) -> u64 {
        let unwritten = self.inner.audit.flush_within(deadline).await;
        if unwritten > 0 {
            tracing::error!(
                unwritten,
                waited_ms = deadline.as_millis() as u64,
                "audit entries were not written before shutdown: the database did not answer in time"
            );
        }
        let dropped = self.audit_dropped();
        if dropped > 0 {
            tracing::warn!(
                dropped,
                "audit entries were dropped because the queue was full"
            );
        }
        unwritten
    }
}
