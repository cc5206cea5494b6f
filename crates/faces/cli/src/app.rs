//! Assembly: opens the store, gathers plugins and sources into the catalog, compiles the policy
//! and starts the engine. Every face of the binary is built on the [`App`] this returns.
//!
//! The catalog holds the tables plugin, the n8n plugin (with the rest of n8n's public API) when
//! `[n8n]` is configured, and every source of `[[sources]]` and of the store, loaded through a
//! [`Registry`]. Plugins' auth providers get their credentials from `[auth.<provider>]`
//! ([`credentials`]). A serving process keeps it current: upstream MCP servers that change their
//! tools and sources added or removed by another process are picked up without a restart.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use toolshed_core::{Plugin, SharedCatalog};
use toolshed_engine::{Credentials, Engine, WorkerCommand};
use toolshed_registry::{
    declare_with_store, PersonGrants, Registry, Sealer, SourceReport, SourceStore,
};
use toolshed_store::Store;

use crate::config::Config;

/// How often a serving process looks for sources added or removed by another process.
pub const STORE_POLL: Duration = Duration::from_secs(2);

/// A running Toolshed: config, store, sources and engine.
pub struct App {
    /// The configuration, without literal API keys (they live on only as digests in `auth`).
    pub config: Config,
    /// Who may call the network faces (API keys, OAuth tokens); an unreadable key or a broken
    /// `[oauth]` is an error only for the commands that serve them.
    pub auth: Result<toolshed_identity::Authenticator, crate::config::ConfigError>,
    pub store: Store,
    pub engine: Engine,
    pub registry: Registry,
    pub sources: SourceStore,
    pub custom: toolshed_custom::CustomTools,
}

/// What a saved or deleted custom tool re-assembles: set once the registry exists.
type CustomHook = Arc<std::sync::OnceLock<(Registry, toolshed_custom::CustomTools)>>;

/// The custom tools over `store`; after a change they rebuild their plugin in `hook`'s registry.
fn custom_tools(store: &Store, hook: &CustomHook) -> toolshed_custom::CustomTools {
    let hook = hook.clone();
    toolshed_custom::CustomTools::new(
        store.clone(),
        Arc::new(move || {
            let hook = hook.clone();
            Box::pin(async move {
                if let Some((registry, custom)) = hook.get() {
                    let plugin = custom.plugin().await;
                    if let Err(e) = registry.replace_plugin(plugin) {
                        tracing::error!(error = %e, "re-assembling the catalog after a custom tool changed failed");
                    }
                }
            })
        }),
    )
}

/// Opens the configured database, after making the data directory private.
pub async fn open_store(config: &Config) -> anyhow::Result<Store> {
    crate::private::secure_data_dir(&config.data_dir())?;
    match &config.database_url {
        Some(url) => Store::open(url).await,
        None => Store::open_dir(&config.data_dir()).await,
    }
    .context("opening the database")
}

/// The settings key of the sealing key's check value.
const SEAL_CHECK: &str = "seal_check";

/// The stored sources, sealed with `TOOLSHED_SECRET_KEY` when set, else the data directory's
/// key. The database keeps a check value of the key its secrets were sealed with: a server
/// (another replica on a shared PostgreSQL database, say) whose key does not match refuses to
/// start instead of failing to open every secret.
pub async fn source_store(config: &Config, store: &Store) -> anyhow::Result<SourceStore> {
    let sealer = Sealer::from_data_dir(&config.data_dir()).context("opening the secret key")?;
    let stored = store
        .setting_or_insert(SEAL_CHECK, &sealer.check_value())
        .await
        .context("reading the sealing key's check value")?;
    if !sealer.matches_check(&stored) {
        anyhow::bail!(
            "the key that seals secrets (TOOLSHED_SECRET_KEY, or secret.key in the data directory) \
             is not the key this database was set up with: every server on a shared database \
             must use the same TOOLSHED_SECRET_KEY"
        );
    }
    Ok(SourceStore::new(store.clone(), sealer))
}

/// The key that seals secrets kept in the store (grants, runtime model keys): from
/// `TOOLSHED_SECRET_KEY` when set, else the data directory's `secret.key`. [`source_store`]
/// checks it against the database.
pub fn secret_box(config: &Config) -> anyhow::Result<toolshed_sealed::SecretBox> {
    toolshed_sealed::SecretBox::from_env_or_file(
        toolshed_registry::secrets::KEY_ENV,
        &config.data_dir().join(toolshed_registry::secrets::KEY_FILE),
    )
    .context("opening the secret key")
}

/// The per-user connections of the sources the registry serves (`auth` of type `oauth2_user`
/// or `token_exchange`, read when each source loaded).
fn connection_specs(registry: &Registry) -> Vec<toolshed_engine::connections::ConnectionSpec> {
    use toolshed_engine::connections::{ConnectionAuth, ConnectionSpec};
    registry
        .connections()
        .into_iter()
        .filter_map(|(auth, allow_private)| {
            let auth = match auth {
                toolshed_outbound::AuthConfig::OAuth2User(u) => ConnectionAuth::Grant(u),
                toolshed_outbound::AuthConfig::TokenExchange(x) => ConnectionAuth::Exchange(x),
                _ => return None,
            };
            Some(ConnectionSpec {
                auth,
                allow_private,
            })
        })
        .collect()
}

/// Keeps `connections` in step with the registry's sources: replaced in every assembly before
/// the catalog is published, so that a source's tools are never served without its connection.
fn follow_sources(
    registry: &Registry,
    connections: Arc<toolshed_engine::connections::Connections>,
) {
    registry.before_publish(move |registry| {
        if let Err(e) = connections.replace(connection_specs(registry)) {
            eprintln!("per-user connections: {e}");
        }
    });
}

/// The URL browsers reach this server at (`[http] public_url`, else the listen address).
fn public_url(config: &Config) -> String {
    config
        .http
        .public_url
        .clone()
        .unwrap_or_else(|| format!("http://{}", config.http.addr))
}

/// The connections' grant store: tokens sealed with the key that seals stored sources.
fn connections(
    config: &Config,
    store: &Store,
    specs: Vec<toolshed_engine::connections::ConnectionSpec>,
) -> anyhow::Result<Arc<toolshed_engine::connections::Connections>> {
    let key = secret_box(config)?;
    let c = toolshed_engine::connections::Connections::new(
        store.clone(),
        Arc::new(key),
        &public_url(config),
        specs,
    )
    .map_err(anyhow::Error::msg)?;
    Ok(Arc::new(c))
}

/// The plugins: tables, agents, resources and prompts (reading upstream entries), web and n8n when configured (a failing n8n setup is reported, not fatal).
pub async fn plugins(config: &Config, store: &Store) -> Vec<Plugin> {
    let mut plugins = vec![
        toolshed_tables::plugin(store.clone()),
        toolshed_agents::plugin(store.clone(), config.model_credentials()),
        toolshed_servers::plugin(store.clone(), config.servers.clone()),
    ];
    plugins.extend(toolshed_entries::plugins());
    match config.web.settings().map(|s| s.map(toolshed_web::plugin)) {
        Ok(None) => {}
        Ok(Some(Ok(web))) => plugins.push(web),
        Ok(Some(Err(e))) => eprintln!("plugin web: FAILED: {e}"),
        Err(e) => eprintln!("plugin web: FAILED: {e}"),
    }
    match config.n8n_settings() {
        Ok(None) => {}
        Ok(Some(settings)) => match async {
            if let Some(w) = toolshed_n8n_integration::cleartext_warning(&settings.base_url) {
                eprintln!("plugin n8n: WARNING: {w}");
            }
            let login = config.n8n_login().map_err(|e| e.to_string())?;
            toolshed_n8n_integration::n8n_plugin_with_login(&settings, login, Some(store.clone()))
                .await
                .map_err(|e| e.to_string())
        }
        .await
        {
            Ok(n8n) => {
                eprintln!(
                    "plugin n8n: {} tools ({} imported from the public API), {} warnings",
                    n8n.plugin.tools.len(),
                    n8n.imported,
                    n8n.warnings.len()
                );
                for w in &n8n.warnings {
                    tracing::debug!(warning = %w, "n8n import");
                }
                plugins.push(n8n.plugin);
            }
            Err(e) => eprintln!("plugin n8n: FAILED: {e}"),
        },
        Err(e) => eprintln!("plugin n8n: FAILED: {e}"),
    }
    plugins
}

/// The sentence-embedding model of `[search] model`, its products in the precision
/// `TOOLSHED_SEARCH_PRECISION` names (the default when unset).
#[cfg(feature = "semantic")]
fn load_embedder(dir: &std::path::Path) -> anyhow::Result<Arc<dyn toolshed_search::TextEmbedder>> {
    let precision = toolshed_search::semantic::Precision::from_env()?;
    let model = toolshed_search::Embedder::load_with(dir, precision)
        .with_context(|| format!("[search] model: loading {}", dir.display()))?;
    tracing::info!("search: embedding model loaded: {model:?}");
    Ok(Arc::new(model))
}

/// Without the `semantic` feature a configured model is an error rather than silently unused.
#[cfg(not(feature = "semantic"))]
fn load_embedder(dir: &std::path::Path) -> anyhow::Result<Arc<dyn toolshed_search::TextEmbedder>> {
    anyhow::bail!(
        "[search] model = {}: this toolshed was built without semantic search; rebuild with \
         `cargo build --release -p toolshed --features semantic` or remove the setting",
        dir.display()
    )
}

/// The credentials of `[auth.<provider>]` for the providers the plugins declare (and any other
/// provider a source asks for by id). A credential that cannot be read is an error naming it.
pub fn credentials(config: &Config, plugins: &[Plugin]) -> anyhow::Result<Arc<Credentials>> {
    let mut c = Credentials::new();
    for p in plugins {
        c.declare_plugin(p)?;
    }
    for (provider, cfg) in &config.auth {
        c.configure(provider, cfg).context("[auth] section")?;
    }
    for (provider, plugin) in c.unconfigured() {
        tracing::debug!(%provider, %plugin, "auth provider without credentials");
    }
    Ok(Arc::new(c))
}

/// Prints one line per source to stderr.
pub fn print_reports(reports: &[SourceReport]) {
    for r in reports {
        eprintln!("{}", r.summary_line());
    }
}

impl App {
    pub async fn build(mut config: Config) -> anyhow::Result<Self> {
        let auth = config.authenticator();
        // The literal keys are not kept: only their digests, in the key ring.
        for p in &mut config.principals {
            p.api_keys.clear();
        }
        let store = open_store(&config).await?;
        let sources = source_store(&config, &store).await?;
        let mut plugins = plugins(&config, &store).await;
        let hook = CustomHook::default();
        let custom = custom_tools(&store, &hook);
        plugins.push(custom.plugin().await);
        let credentials = credentials(&config, &plugins)?;
        let registry = Registry::new();
        // Upstreams whose OAuth waits for a person: the browser comes back to this server.
        let public = public_url(&config);
        let public = public.trim_end_matches('/');
        let person = PersonGrants::with_listing(
            format!("{public}/connect/upstreams/callback"),
            Some(format!("{public}/v1/sources/authorizations")),
        );
        // What a person approves outlives a restart, sealed in the store.
        person.keep_tokens_in(sources.token_vault());
        registry.with_person_grants(person.clone());
        let _ = hook.set((registry.clone(), custom.clone()));
        let (declared, rejected) = declare_with_store(&config.sources, &sources)
            .await
            .context("reading stored sources")?;
        registry.sync(declared, rejected).await;
        let catalog = Arc::new(SharedCatalog::default());
        registry
            .attach(plugins, catalog.clone())
            .context("building the tool catalog")?;
        print_reports(&registry.reports());
        for r in catalog.load().renamed() {
            tracing::debug!("{r}");
        }
        let policy = config.policy()?;
        let mut engine_config = config.engine_config();
        // Scripts always run in worker processes: this very binary, started as a worker.
        let exe = std::env::current_exe().context("finding this binary for sandbox workers")?;
        engine_config.sandbox.workers = Some(WorkerCommand::new(exe));
        let models = toolshed_models::Models::new(config.model_endpoints()?)
            .context("configuring the model endpoints")?;
        let mut engine = Engine::new(catalog, policy, store.clone(), engine_config)
            .with_credentials(credentials)
            .with_models(models)
            .with_sealer(Arc::new(secret_box(&config)?));
        // Always present, so that a source added at runtime gets its connection.
        let per_user = connections(&config, &store, connection_specs(&registry))?;
        follow_sources(&registry, per_user.clone());
        engine = engine
            .with_connections(per_user)
            .with_source_authorizations(person);
        match &config.search.model {
            Some(dir) => {
                let vectors = config.data_dir().join("tool-vectors.bin");
                engine = engine.with_embedder(load_embedder(dir)?, Some(vectors));
            }
            None => tracing::info!(
                "search: no embedding model ([search] model, TOOLSHED_SEARCH__MODEL); ranking lexically \
                 (scripts/serve.sh fetches one)"
            ),
        }
        Ok(Self {
            config,
            auth,
            store,
            engine,
            registry,
            sources,
            custom,
        })
    }

    /// The virtual servers to serve: the configured ones, then those stored at runtime.
    pub async fn virtual_servers(&self) -> anyhow::Result<Vec<Arc<toolshed_core::VirtualServer>>> {
        let mut all = self.config.virtual_servers()?;
        let stored = toolshed_servers::stored(&self.store, &self.config.servers)
            .await
            .map_err(anyhow::Error::msg)?;
        for s in &stored.skipped {
            tracing::warn!("{s}: skipped");
        }
        all.extend(stored.servers.into_iter().map(|(s, _)| s));
        Ok(all)
    }

    /// Keeps `set` in step with the virtual servers stored at runtime (by any replica): a
    /// definition that changed is served afresh, a removed one is no longer served.
    pub fn watch_virtual_servers(
        &self,
        set: toolshed_mcp::ServerSet,
    ) -> tokio::task::JoinHandle<()> {
        let (store, config) = (self.store.clone(), self.config.clone());
        tokio::spawn(async move {
            let mut seen: Vec<(String, i64)> = vec![];
            let mut tick = tokio::time::interval(STORE_POLL);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Ok(stored) = toolshed_servers::stored(&store, &config.servers).await else {
                    continue;
                };
                let now: Vec<(String, i64)> = stored
                    .servers
                    .iter()
                    .map(|(s, at)| (s.name().to_string(), *at))
                    .collect();
                if now == seen {
                    continue;
                }
                let Ok(mut all) = config.virtual_servers() else {
                    continue;
                };
                // Unchanged servers keep their definition (and so their open sessions).
                let current = set.all();
                for (s, at) in stored.servers {
                    let same = seen.iter().any(|(n, a)| n == s.name() && *a == at);
                    match current.iter().find(|c| c.name() == s.name()) {
                        Some(c) if same => all.push(c.clone()),
                        _ => all.push(s),
                    }
                }
                set.replace(all);
                seen = now;
            }
        })
    }

    /// Keeps the catalog in step with the custom tools saved in the store (by other replicas).
    pub fn watch_custom_tools(&self) -> tokio::task::JoinHandle<()> {
        let (registry, custom) = (self.registry.clone(), self.custom.clone());
        tokio::spawn(async move {
            let mut last = custom.fingerprint().await.ok();
            let mut tick = tokio::time::interval(STORE_POLL);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let now = match custom.fingerprint().await {
                    Ok(f) => f,
                    Err(e) => {
                        tracing::warn!(error = %e, "polling custom tools failed");
                        continue;
                    }
                };
                if last.as_ref() == Some(&now) {
                    continue;
                }
                last = Some(now);
                if let Err(e) = registry.replace_plugin(custom.plugin().await) {
                    tracing::error!(error = %e, "re-assembling the catalog after custom tools changed failed");
                }
            }
        })
    }

    /// Keeps the catalog in step with the store's sources while serving (the per-user
    /// connections follow in each assembly, see [`follow_sources`]).
    pub fn watch_stored_sources(&self) -> tokio::task::JoinHandle<()> {
        toolshed_registry::spawn_store_poll(
            self.registry.clone(),
            self.sources.clone(),
            self.config.sources.clone(),
            STORE_POLL,
            move |reports, first| {
                if !first {
                    eprintln!("stored sources changed; catalog re-assembled:");
                    print_reports(reports);
                }
            },
        )
    }

    /// Stops upstream MCP sessions.
    pub async fn shutdown(&self) {
        self.registry.shutdown().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A build without the model code refuses a configured model instead of ignoring it.
    #[cfg(not(feature = "semantic"))]
    #[tokio::test]
    async fn a_configured_model_needs_the_semantic_build() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config {
            data_dir: Some(dir.path().to_path_buf()),
            search: crate::config::SearchConfig {
                model: Some("/models/all-MiniLM-L6-v2".into()),
            },
            ..Config::default()
        };
        let err = App::build(config).await.err().expect("refused");
        let text = format!("{err:#}");
        assert!(
            text.contains("[search] model = /models/all-MiniLM-L6-v2"),
            "{text}"
        );
        assert!(text.contains("--features semantic"), "{text}");
    }

    /// With the model code, a directory that is not a model names the missing file.
    #[cfg(feature = "semantic")]
    #[tokio::test]
    async fn a_model_directory_without_files_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config {
            data_dir: Some(dir.path().to_path_buf()),
            search: crate::config::SearchConfig {
                model: Some(dir.path().to_path_buf()),
            },
            ..Config::default()
        };
        let err = App::build(config).await.err().expect("refused");
        assert!(format!("{err:#}").contains("config.json"), "{err:#}");
    }
}
