//! [`Registry`]: every declared source loaded, kept, and assembled into the catalog.
//!
//! Sources come from the config file and from the store ([`declare`] merges them; a name used
//! by both is an error naming both). [`Registry::sync`] loads new or changed sources
//! concurrently, keeps unchanged ones (and their MCP sessions), and drops removed ones. A source
//! that fails is reported (name and reason) and the others are served. [`Registry::assemble`]
//! builds the catalog from plugins and every ready source; once [`Registry::attach`]ed to a
//! [`SharedCatalog`], the registry re-assembles by itself when an upstream MCP server changes
//! its tool list or when [`Registry::sync`] changes the sources. What must follow the sources
//! (the per-user connections) is brought in step by [`Registry::before_publish`], before each
//! assembly is published: a tool is never served ahead of what its calls need.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use serde::Serialize;
use toolshed_core::{CatalogBuilder, CatalogError, Plugin, SharedCatalog, Tool};
use toolshed_mcp_source::Upstream;
use toolshed_outbound::AuthConfig;

use crate::error::SourcesError;
use crate::load::apply_overrides;
use crate::spec::SourceSpec;
use crate::store::{Fingerprint, SourceStore};

/// Where a source is declared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// `[[sources]]` in the config file.
    Config,
    /// `toolshed sources add`.
    Store,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Origin::Config => "the config file ([[sources]])",
            Origin::Store => "the store (toolshed sources add)",
        })
    }
}

/// A source to serve.
#[derive(Debug, Clone, PartialEq)]
pub struct Declared {
    pub spec: SourceSpec,
    pub origin: Origin,
    /// For a stored source, its update time: a re-written record (`sources refresh`,
    /// `sources add --replace`) is imported again even when its spec did not change.
    pub revision: Option<i64>,
}

/// A declaration that cannot be served (duplicate name, unreadable stored record).
#[derive(Debug)]
pub struct Rejected {
    pub name: String,
    pub kind: String,
    pub origin: Origin,
    pub error: SourcesError,
}

/// Merges config-declared and stored sources. A name declared twice is rejected with an error
/// naming both places; the config file's declaration is the one kept.
pub fn declare(config: &[SourceSpec], stored: Vec<SourceSpec>) -> (Vec<Declared>, Vec<Rejected>) {
    let mut seen: HashMap<String, Origin> = HashMap::new();
    let mut declared = Vec::new();
    let mut rejected = Vec::new();
    let all = config
        .iter()
        .cloned()
        .map(|s| (s, Origin::Config))
        .chain(stored.into_iter().map(|s| (s, Origin::Store)));
    for (spec, origin) in all {
        let name = spec.name().to_string();
        if let Some(first) = seen.get(&name) {
            rejected.push(Rejected {
                kind: spec.kind().to_string(),
                error: SourcesError::DuplicateName {
                    name: name.clone(),
                    first: first.to_string(),
                    second: origin.to_string(),
                },
                name,
                origin,
            });
            continue;
        }
        seen.insert(name, origin);
        declared.push(Declared {
            spec,
            origin,
            revision: None,
        });
    }
    (declared, rejected)
}

/// [`declare`] over the config's sources and everything in `store`; stored records that
/// cannot be read or opened are rejected.
pub async fn declare_with_store(
    config: &[SourceSpec],
    store: &SourceStore,
) -> Result<(Vec<Declared>, Vec<Rejected>), SourcesError> {
    let mut stored = Vec::new();
    let mut revisions = HashMap::new();
    let mut unreadable = Vec::new();
    for r in store.list().await? {
        match r {
            Ok(s) => {
                revisions.insert(s.spec.name().to_string(), s.updated_at);
                stored.push(s.spec)
            }
            Err((name, error)) => unreadable.push(Rejected {
                name,
                kind: String::new(),
                origin: Origin::Store,
                error,
            }),
        }
    }
    let (mut declared, mut rejected) = declare(config, stored);
    for d in &mut declared {
        if d.origin == Origin::Store {
            d.revision = revisions.get(d.spec.name()).copied();
        }
    }
    rejected.extend(unreadable);
    Ok((declared, rejected))
}

/// How one source is doing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SourceReport {
    pub name: String,
    pub kind: String,
    pub origin: Origin,
    /// Tools it contributes to the catalog (0 when failed).
    pub tools: usize,
    pub warnings: Vec<String>,
    /// Why it is not served, when it is not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl SourceReport {
    pub fn ok(&self) -> bool {
        self.error.is_none()
    }

    /// `pets (openapi): 20 tools, 1 warning` or `pets (openapi): FAILED: reason`.
    pub fn summary_line(&self) -> String {
        match &self.error {
            Some(e) => format!("source {} ({}): FAILED: {e}", self.name, self.kind),
            None => format!(
                "source {} ({}): {} tool{}, {} warning{}",
                self.name,
                self.kind,
                self.tools,
                if self.tools == 1 { "" } else { "s" },
                self.warnings.len(),
                if self.warnings.len() == 1 { "" } else { "s" },
            ),
        }
    }
}

enum State {
    Ready {
        tools: Vec<Tool>,
        warnings: Vec<String>,
        upstream: Option<Upstream>,
        /// The per-user connection of its calls (with `allow_private`).
        connection: Option<Box<(AuthConfig, bool)>>,
    },
    Failed(String),
}

impl State {
    /// The state a load's outcome leaves a source in.
    fn of(result: Result<crate::load::LoadedSource, crate::SourcesError>) -> Self {
        match result {
            Ok(l) => State::Ready {
                tools: l.tools,
                warnings: l.warnings,
                upstream: l.upstream,
                connection: l.connection.map(Box::new),
            },
            Err(e) => State::Failed(e.to_string()),
        }
    }
}

struct Entry {
    spec: SourceSpec,
    origin: Origin,
    revision: Option<i64>,
    state: State,
    /// Set by assembly when a tool path collides with another origin.
    conflict: Option<String>,
    watcher: Option<tokio::task::JoinHandle<()>>,
}

impl Entry {
    fn report(&self) -> SourceReport {
        let (tools, warnings, error) = match (&self.state, &self.conflict) {
            (State::Failed(e), _) => (0, Vec::new(), Some(e.clone())),
            (State::Ready { warnings, .. }, Some(c)) => (0, warnings.clone(), Some(c.clone())),
            (
                State::Ready {
                    tools, warnings, ..
                },
                None,
            ) => (tools.len(), warnings.clone(), None),
        };
        SourceReport {
            name: self.spec.name().to_string(),
            kind: self.spec.kind().to_string(),
            origin: self.origin,
            tools,
            warnings,
            error,
        }
    }

    fn stop(&mut self) -> Option<Upstream> {
        if let Some(w) = self.watcher.take() {
            w.abort();
        }
        match &mut self.state {
            State::Ready { upstream, .. } => upstream.take(),
            State::Failed(_) => None,
        }
    }
}

struct Publication {
    plugins: Vec<Plugin>,
    catalog: Arc<SharedCatalog>,
}

/// Runs in every assembly, just before the catalog is published.
type PublishHook = Arc<dyn Fn(&Registry) + Send + Sync>;

#[derive(Default)]
struct RegistryState {
    /// Where the sources' upstreams publish their log messages.
    notices: toolshed_core::notices::Notices,
    entries: Mutex<BTreeMap<String, Entry>>,
    rejected: Mutex<Vec<SourceReport>>,
    target: Mutex<Option<Publication>>,
    sync_lock: tokio::sync::Mutex<()>,
    before_publish: Mutex<Option<PublishHook>>,
    /// Where upstreams' authorization-code grants wait for a person.
    person: Mutex<Option<Arc<toolshed_mcp_source::person::PersonGrants>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The result of one assembly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assembled {
    /// The catalog version stored.
    pub version: u64,
    /// Tools in the catalog.
    pub tools: usize,
    /// Sources left out because a tool path collided: (source, error naming both origins).
    pub excluded: Vec<(String, String)>,
}

/// LoadedSource sources. Cheap to clone; clones share state.
#[derive(Clone, Default)]
pub struct Registry {
    inner: Arc<RegistryState>,
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("sources", &lock(&self.inner.entries).len())
            .finish()
    }
}

impl Registry {
    pub fn new() -> Self {
        Self::default()
    }

    /// Runs `hook` in every assembly once the sources (and their conflicts) are settled and
    /// just before the catalog is published, so that what follows the sources (per-user
    /// connections) is in place before their tools can be called.
    pub fn before_publish(&self, hook: impl Fn(&Registry) + Send + Sync + 'static) {
        *lock(&self.inner.before_publish) = Some(Arc::new(hook));
    }

    /// Where the sources' upstreams publish their log messages (faces relay them).
    pub fn notices(&self) -> toolshed_core::notices::Notices {
        self.inner.notices.clone()
    }

    /// Has a person do the user's part of upstreams' authorization-code grants that have no
    /// agent ([`toolshed_mcp_source::person`]); a source whose authorization a person
    /// completed (or whose link expired) is loaded again at once ([`Registry::reload`]), and
    /// the report of a source that waits names the link ([`Registry::reports`]).
    pub fn with_person_grants(&self, grants: Arc<toolshed_mcp_source::person::PersonGrants>) {
        let registry = self.clone();
        grants.on_change(move |name| {
            let (registry, name) = (registry.clone(), name.to_string());
            tokio::spawn(async move { registry.reload(&name).await });
        });
        *lock(&self.inner.person) = Some(grants);
    }

    /// What the upstream MCP servers loaded get.
    fn mcp_context(&self) -> crate::load::McpContext {
        crate::load::McpContext {
            notices: Some(self.inner.notices.clone()),
            person: lock(&self.inner.person).clone(),
        }
    }

    /// Loads the source `name` again when it failed (an upstream a person just authorized),
    /// and re-assembles; a ready source, or one no longer declared, is left alone. False when
    /// nothing was loaded.
    pub async fn reload(&self, name: &str) -> bool {
        let _guard = self.inner.sync_lock.lock().await;
        let spec = match lock(&self.inner.entries).get(name) {
            Some(Entry {
                spec,
                state: State::Failed(_),
                ..
            }) => spec.clone(),
            _ => return false,
        };
        let result = crate::load::load_with(&spec, None, &self.mcp_context()).await;
        // The entry may have changed meanwhile (a sync replaced or removed it): then the
        // loaded upstream is not used.
        let stale = {
            let mut entries = lock(&self.inner.entries);
            match (entries.get_mut(name).filter(|e| e.spec == spec), result) {
                (None, Ok(l)) => Some(l.upstream),
                (None, Err(_)) => return false,
                (Some(entry), Err(e)) => {
                    tracing::warn!(source = %name, error = %e, "loading the source again failed");
                    entry.state = State::Failed(e.to_string());
                    return false;
                }
                (Some(entry), Ok(l)) => {
                    if let Some(up) = &l.upstream {
                        entry.watcher = Some(self.watch_upstream(name, up));
                    }
                    entry.state = State::of(Ok(l));
                    None
                }
            }
        };
        if let Some(unused) = stale {
            if let Some(up) = unused {
                up.shutdown().await;
            }
            return false;
        }
        if let Err(e) = self.reassemble() {
            tracing::error!(error = %e, "re-assembling the catalog failed");
        }
        true
    }

    /// Loads the given config-declared sources (see [`Registry::sync`]).
    pub async fn load(&self, specs: &[SourceSpec]) -> Vec<SourceReport> {
        let (declared, rejected) = declare(specs, Vec::new());
        self.sync(declared, rejected).await
    }

    /// Makes the registry serve exactly `declared`: new or changed sources are loaded
    /// concurrently, unchanged ready ones are kept, removed ones are shut down. Failed sources
    /// are reported, never fatal. Re-assembles when attached. Returns every source's report.
    pub async fn sync(
        &self,
        declared: Vec<Declared>,
        rejected: Vec<Rejected>,
    ) -> Vec<SourceReport> {
        let _guard = self.inner.sync_lock.lock().await;
        let to_load: Vec<Declared> = {
            let entries = lock(&self.inner.entries);
            declared
                .iter()
                .filter(|d| {
                    !entries.get(d.spec.name()).is_some_and(|e| {
                        e.spec == d.spec
                            && e.origin == d.origin
                            && e.revision == d.revision
                            && matches!(e.state, State::Ready { .. })
                    })
                })
                .cloned()
                .collect()
        };
        let mcp = &self.mcp_context();
        let loaded = futures::future::join_all(to_load.into_iter().map(|d| async move {
            let result = crate::load::load_with(&d.spec, None, mcp).await;
            (d, result)
        }))
        .await;
        let mut stopped = Vec::new();
        {
            let mut entries = lock(&self.inner.entries);
            let keep: HashMap<&str, ()> = declared.iter().map(|d| (d.spec.name(), ())).collect();
            let gone: Vec<String> = entries
                .keys()
                .filter(|k| !keep.contains_key(k.as_str()))
                .cloned()
                .collect();
            for name in gone {
                if let Some(mut e) = entries.remove(&name) {
                    stopped.extend(e.stop());
                }
            }
            for (d, result) in loaded {
                let name = d.spec.name().to_string();
                if let Some(mut old) = entries.remove(&name) {
                    stopped.extend(old.stop());
                }
                let mut entry = Entry {
                    spec: d.spec,
                    origin: d.origin,
                    revision: d.revision,
                    state: State::of(result),
                    conflict: None,
                    watcher: None,
                };
                if let State::Ready {
                    upstream: Some(up), ..
                } = &entry.state
                {
                    entry.watcher = Some(self.watch_upstream(&name, up));
                }
                entries.insert(name, entry);
            }
            *lock(&self.inner.rejected) = rejected
                .into_iter()
                .map(|r| SourceReport {
                    name: r.name,
                    kind: r.kind,
                    origin: r.origin,
                    tools: 0,
                    warnings: Vec::new(),
                    error: Some(r.error.to_string()),
                })
                .collect();
        }
        for up in stopped {
            up.shutdown().await;
        }
        if let Err(e) = self.reassemble() {
            tracing::error!(error = %e, "re-assembling the catalog failed");
        }
        self.reports()
    }

    /// Every source's state, by name, then the rejected declarations. A source that waits for
    /// a person's authorization names the link in its error (reports are for those who run
    /// Toolshed; a tool's caller never sees the link).
    pub fn reports(&self) -> Vec<SourceReport> {
        let person = lock(&self.inner.person).clone();
        let mut out: Vec<SourceReport> = lock(&self.inner.entries)
            .values()
            .map(|e| {
                let mut report = e.report();
                let link = person.as_ref().and_then(|p| p.waiting_at(&report.name));
                if let (Some(error), Some(link)) = (report.error.as_mut(), link) {
                    error.push_str(&format!(" (open {link})"));
                }
                report
            })
            .collect();
        out.extend(lock(&self.inner.rejected).iter().cloned());
        out
    }

    /// The per-user connections of the sources being served (read from each source when it
    /// loaded), each with whether its provider may be on a private address.
    pub fn connections(&self) -> Vec<(AuthConfig, bool)> {
        lock(&self.inner.entries)
            .values()
            .filter(|e| e.conflict.is_none())
            .filter_map(|e| match &e.state {
                State::Ready { connection, .. } => connection.as_deref().cloned(),
                State::Failed(_) => None,
            })
            .collect()
    }

    /// The tools of the ready sources, by source name.
    pub fn tools(&self) -> Vec<Tool> {
        lock(&self.inner.entries)
            .values()
            .filter_map(|e| match &e.state {
                State::Ready { tools, .. } if e.conflict.is_none() => Some(tools.clone()),
                _ => None,
            })
            .flatten()
            .collect()
    }

    /// Builds a catalog from `plugins` and every ready source and stores it in `catalog`.
    /// Plugins whose paths collide are an error naming both origins; a source colliding with a
    /// plugin or an earlier source (by name) is left out and reported with that error.
    pub fn assemble(
        &self,
        plugins: &[Plugin],
        catalog: &SharedCatalog,
    ) -> Result<Assembled, SourcesError> {
        let mut builder = CatalogBuilder::new();
        let mut seen: HashMap<String, String> = HashMap::new();
        for p in plugins {
            builder.add_plugin(p);
            for t in &p.tools {
                let origin = if t.def.origin.is_empty() {
                    p.origin()
                } else {
                    t.def.origin.clone()
                };
                seen.entry(t.def.path.to_string()).or_insert(origin);
            }
        }
        let mut excluded = Vec::new();
        {
            let mut entries = lock(&self.inner.entries);
            for (name, entry) in entries.iter_mut() {
                entry.conflict = None;
                let State::Ready { tools, .. } = &entry.state else {
                    continue;
                };
                let mut local: HashMap<&str, &str> = HashMap::new();
                let mut conflict = None;
                for t in tools {
                    let path = t.def.path.as_str();
                    let first = seen
                        .get(path)
                        .map(String::as_str)
                        .or_else(|| local.get(path).copied());
                    if let Some(first) = first {
                        conflict = Some(CatalogError::Duplicate {
                            path: path.to_string(),
                            first: first.to_string(),
                            second: t.def.origin.clone(),
                        });
                        break;
                    }
                    local.insert(path, &t.def.origin);
                }
                if let Some(c) = conflict {
                    let text = c.to_string();
                    tracing::warn!(source = %name, error = %text, "source left out of the catalog");
                    entry.conflict = Some(text.clone());
                    excluded.push((name.clone(), text));
                    continue;
                }
                for t in tools {
                    seen.insert(t.def.path.to_string(), t.def.origin.clone());
                }
                builder.add_tools(tools.iter().cloned());
            }
        }
        let built = builder.build()?;
        let hook = lock(&self.inner.before_publish).clone();
        if let Some(hook) = hook {
            hook(self);
        }
        let tools = built.len();
        let version = catalog.store(built);
        Ok(Assembled {
            version,
            tools,
            excluded,
        })
    }

    /// Remembers `plugins` and `catalog` for automatic re-assembly, and assembles now.
    pub fn attach(
        &self,
        plugins: Vec<Plugin>,
        catalog: Arc<SharedCatalog>,
    ) -> Result<Assembled, SourcesError> {
        let assembled = self.assemble(&plugins, &catalog)?;
        *lock(&self.inner.target) = Some(Publication { plugins, catalog });
        Ok(assembled)
    }

    /// Replaces the attached plugin with `plugin`'s id (its tools changed, e.g. a custom tool
    /// was saved) and re-assembles; `Ok(None)` when not attached.
    pub fn replace_plugin(&self, plugin: Plugin) -> Result<Option<Assembled>, SourcesError> {
        let mut target = lock(&self.inner.target);
        let Some(t) = target.as_mut() else {
            return Ok(None);
        };
        match t.plugins.iter_mut().find(|p| p.id == plugin.id) {
            Some(p) => *p = plugin,
            None => t.plugins.push(plugin),
        }
        self.assemble(&t.plugins, &t.catalog).map(Some)
    }

    /// Assembles into the attached catalog; `Ok(None)` when not attached.
    pub fn reassemble(&self) -> Result<Option<Assembled>, SourcesError> {
        let target = lock(&self.inner.target);
        match &*target {
            Some(t) => self.assemble(&t.plugins, &t.catalog).map(Some),
            None => Ok(None),
        }
    }

    /// Shuts down every upstream session and stops watching them.
    pub async fn shutdown(&self) {
        let ups: Vec<Upstream> = lock(&self.inner.entries)
            .values_mut()
            .filter_map(Entry::stop)
            .collect();
        for up in ups {
            up.shutdown().await;
        }
    }

    /// Re-lists an upstream's tools whenever its change counter moves, then re-assembles.
    fn watch_upstream(&self, name: &str, upstream: &Upstream) -> tokio::task::JoinHandle<()> {
        let weak: Weak<RegistryState> = Arc::downgrade(&self.inner);
        let mut changes = upstream.subscribe_changes();
        let name = name.to_string();
        tokio::spawn(async move {
            while changes.changed().await.is_ok() {
                let Some(inner) = weak.upgrade() else { break };
                let registry = Registry { inner };
                let (up, overrides) = {
                    let entries = lock(&registry.inner.entries);
                    match entries.get(&name) {
                        Some(Entry {
                            state:
                                State::Ready {
                                    upstream: Some(up), ..
                                },
                            spec,
                            ..
                        }) => (up.clone(), spec.overrides().to_vec()),
                        _ => break,
                    }
                };
                let listed = match up.entries().await {
                    Ok(t) => apply_overrides(&name, t, &overrides),
                    Err(e) => Err(SourcesError::import(&name, e)),
                };
                match listed {
                    Ok((tools, warnings)) => {
                        let count = tools.len();
                        if let Some(Entry {
                            state:
                                State::Ready {
                                    tools: t,
                                    warnings: w,
                                    ..
                                },
                            ..
                        }) = lock(&registry.inner.entries).get_mut(&name)
                        {
                            *t = tools;
                            *w = warnings;
                        }
                        tracing::info!(source = %name, tools = count, "upstream tools changed");
                        if let Err(e) = registry.reassemble() {
                            tracing::error!(error = %e, "re-assembling the catalog failed");
                        }
                    }
                    Err(e) => {
                        tracing::warn!(source = %name, error = %e, "re-listing upstream tools failed")
                    }
                }
            }
        })
    }
}

/// Polls the store every `every` and re-syncs `registry` when the stored sources change
/// (another process ran `toolshed sources add/remove`). `on_change` gets the new reports after
/// every sync, with `first` set for the first one.
///
/// The first tick always syncs, so a change made between the caller's own assembly and the
/// task's first run is never missed; sources already loaded with the same spec are left alone
/// by [`Registry::sync`] (which is why a caller may not want to report the first sync).
pub fn spawn_store_poll(
    registry: Registry,
    store: SourceStore,
    config: Vec<SourceSpec>,
    every: Duration,
    on_change: impl Fn(&[SourceReport], bool) + Send + Sync + 'static,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut last: Option<Fingerprint> = None;
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tick.tick().await;
            let now = match store.fingerprint().await {
                Ok(f) => f,
                Err(e) => {
                    tracing::warn!(error = %e, "polling stored sources failed");
                    continue;
                }
            };
            if last.as_ref() == Some(&now) {
                continue;
            }
            let first = last.replace(now).is_none();
            match declare_with_store(&config, &store).await {
                Ok((declared, rejected)) => {
                    let reports = registry.sync(declared, rejected).await;
                    on_change(&reports, first);
                }
                Err(e) => tracing::warn!(error = %e, "reading stored sources failed"),
            }
        }
    })
}
