//! `toolshed.toml` plus `TOOLSHED_*` environment overrides (nested keys with `__`, e.g.
//! `TOOLSHED_HTTP__ADDR=0.0.0.0:8080`). With no file at all every setting has a working default:
//! SQLite in the data directory, one local principal with access to everything.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use figment::providers::{Env, Format, Serialized, Toml};
use figment::Figment;
use serde::{Deserialize, Serialize};
use toolshed_core::{Policy, Principal, Role};
use toolshed_engine::{CredentialConfig, EngineConfig, RateLimits, SandboxConfig};
use toolshed_identity::{Authenticator, KeyRing};
use toolshed_outbound::secret::{env_ref, shown as shown_secret, REDACTED};
use toolshed_outbound::Secret;

pub mod models;
pub mod web;
use toolshed_registry::SourceSpec;
use toolshed_sandbox::Limits;

/// Configuration errors, naming the file and key.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("configuration error: {0}")]
    Figment(String),
    #[error("config file {0} does not exist")]
    Missing(PathBuf),
    #[error("invalid policy: {0}")]
    Policy(#[from] toolshed_core::PolicyError),
    #[error("principal '{principal}': API key from environment variable {var} is not set")]
    MissingKeyEnv { principal: String, var: String },
    #[error("[[principals]] entry #{index} (roles {roles:?}) has an empty id: every principal needs a non-empty id")]
    EmptyPrincipalId { index: usize, roles: Vec<String> },
    #[error("principal '{principal}': API key #{index} is empty{}; an empty key would let anyone in", .var.as_ref().map(|v| format!(" (environment variable {v})")).unwrap_or_default())]
    EmptyApiKey {
        principal: String,
        index: usize,
        var: Option<String>,
    },
    #[error("`principal` (the local principal) is empty: give it a non-empty id")]
    EmptyLocalPrincipal,
    #[error("[limits] call_timeout_ms = {call} must be at least 1 and at most max_call_timeout_ms = {max}")]
    BadCallTimeouts { call: u64, max: u64 },
    #[error("[n8n] api_key: environment variable {var} is not set")]
    MissingN8nKeyEnv { var: String },
    #[error("[n8n] password: environment variable {var} is not set")]
    MissingN8nPasswordEnv { var: String },
    #[error(
        "[n8n] email and password go together: set both (for the full node catalog) or neither"
    )]
    N8nLoginIncomplete,
    #[error("[notify] webhook_url is not an http:// or https:// URL")]
    BadWebhook,
    #[error("[models.{id}] {message}")]
    Model { id: String, message: String },
    #[error("[web] {0}")]
    Web(String),
    #[error("[[servers]] entry #{index}: {message}")]
    Server { index: usize, message: String },
    #[error(transparent)]
    OAuth(#[from] toolshed_identity::OAuthConfigError),
    #[error("[oauth] {0}")]
    OAuthIssuer(String),
}

/// The top-level keys of [`Config`], for environment filtering.
const TOP_LEVEL_KEYS: &[&str] = &[
    "data_dir",
    "database_url",
    "principal",
    "http",
    "mcp",
    "limits",
    "approvals",
    "notify",
    "models",
    "audit",
    "roles",
    "principals",
    "sources",
    "n8n",
    "auth",
    "search",
    "web",
    "executions",
    "oauth",
];

/// Debug output (e.g. in logs) never shows a literal secret: credentials, API keys, the
/// database password and the sources' settings are left out or redacted.
#[derive(Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Where the SQLite database and key files live.
    pub data_dir: Option<PathBuf>,
    /// `sqlite://...` or `postgres://...`; overrides `data_dir` for the database.
    pub database_url: Option<String>,
    /// The principal used by stdio MCP and the CLI.
    pub principal: String,
    pub http: HttpConfig,
    pub mcp: McpConfig,
    pub limits: LimitsConfig,
    pub approvals: ApprovalsConfig,
    pub audit: AuditConfig,
    /// Credentials of auth providers, by provider id (`[auth.<id>]`, tagged by `type`:
    /// `api_key` with `key`, `bearer` with `token`, or `oauth2_client_credentials` with
    /// `token_url`, `client_id`, `client_secret`, `scopes`). Plugin handlers get them with
    /// `ctx.token("<id>")`; secrets accept `env:NAME`.
    pub auth: BTreeMap<String, CredentialConfig>,
    pub roles: Vec<Role>,
    pub principals: Vec<PrincipalConfig>,
    /// Tool sources declared in the file (`[[sources]]`); more are added at runtime with
    /// `toolshed sources add`.
    pub sources: Vec<SourceSpec>,
    /// An n8n instance: its plugin plus the rest of its public API.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub n8n: Option<N8nConfigFile>,
    pub search: SearchConfig,
    /// `[web]`: `web.fetch` and `web.search`.
    pub web: web::WebConfigFile,
    pub notify: NotifyConfig,
    /// `[executions]`: how long finished executions and their events are kept.
    pub executions: ExecutionsConfig,
    /// Model credentials agent definitions name in `credential` (`[models.<id>]`).
    pub models: BTreeMap<String, models::ModelConfig>,
    /// Virtual MCP servers (`[[servers]]`: `name`, `description`, `tools` dot-globs, `names =
    /// "catalog" | "original"`), each served at `/mcp/servers/{name}`.
    pub servers: Vec<toolshed_core::ServerDef>,
    /// `[oauth]`: MCP clients and API callers sign in with OAuth 2.1 bearer tokens from the
    /// listed issuers (API keys keep working beside them). See `toolshed_identity::config`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oauth: Option<toolshed_identity::OAuthConfig>,
}

/// Resolves a configured secret with the one resolver ([`Secret::from_config`]): `env:NAME` or
/// `${NAME}` from the environment, else the literal; `Err` names the missing variable.
fn resolve_secret(v: &str) -> Result<String, String> {
    Secret::from_config(v)
        .map(|s| s.expose().to_string())
        .map_err(|_| env_ref(v).unwrap_or_default().to_string())
}

/// A database URL for Debug output, without the password (`postgres://user:[REDACTED]@host`).
fn shown_url(url: &str) -> String {
    if let Some((scheme, rest)) = url.split_once("://") {
        if let Some((creds, host)) = rest.rsplit_once('@') {
            let user = creds.split_once(':').map_or(creds, |(u, _)| u);
            return format!("{scheme}://{user}:{REDACTED}@{host}");
        }
    }
    url.to_string()
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sources: Vec<String> = self
            .sources
            .iter()
            .map(|s| format!("{}:{}", s.kind(), s.name()))
            .collect();
        f.debug_struct("Config")
            .field("data_dir", &self.data_dir)
            .field("database_url", &self.database_url.as_deref().map(shown_url))
            .field("principal", &self.principal)
            .field("http", &self.http)
            .field("mcp", &self.mcp)
            .field("limits", &self.limits)
            .field("approvals", &self.approvals)
            .field("audit", &self.audit)
            .field("auth", &self.auth)
            .field("roles", &self.roles)
            .field("principals", &self.principals)
            .field("sources", &sources)
            .field("n8n", &self.n8n)
            .field("search", &self.search)
            .field("web", &self.web)
            .field("notify", &self.notify)
            .field("models", &self.models)
            .field("oauth", &self.oauth)
            .finish()
    }
}

/// `[search]`: ranking options.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SearchConfig {
    /// A sentence-transformers model directory (all-MiniLM-L6-v2 or another BERT model with
    /// `config.json`, `tokenizer.json`, `model.safetensors`): search then fuses embedding
    /// similarity with BM25F. Needs a binary built with `--features semantic`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<PathBuf>,
}

#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct N8nConfigFile {
    /// The instance, e.g. `https://n8n.example.com` (`/api/v1` is added). Use https for any
    /// host but loopback: over plain http the API key (and the password) travel in clear text,
    /// and startup prints a warning saying so.
    pub base_url: String,
    /// The public API key; `env:NAME` reads it from the environment.
    pub api_key: String,
    #[serde(default)]
    pub allow_private: bool,
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Optional login of an n8n user (no MFA): with it, node discovery searches the instance's
    /// full node catalog (the editor's `/types/nodes.json`); without it, only the node types
    /// the workflows use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    /// That user's password; `env:NAME` reads it from the environment. Never logged or shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
}

impl std::fmt::Debug for N8nConfigFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let secret = |v: &str| shown_secret(v).to_string();
        f.debug_struct("N8nConfigFile")
            .field("base_url", &self.base_url)
            .field("api_key", &secret(&self.api_key))
            .field("allow_private", &self.allow_private)
            .field("timeout_ms", &self.timeout_ms)
            .field("email", &self.email)
            .field("password", &self.password.as_deref().map(secret))
            .finish()
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpConfig {
    pub addr: String,
    /// Hosts accepted in the `Host` header of every request (`name`, `name:port`, or `*`);
    /// loopback names with any port when empty.
    pub allowed_hosts: Vec<String>,
    /// Browser origins besides the server's own that may call it (`https://app.example.com`).
    pub allowed_origins: Vec<String>,
    /// Listen on a non-loopback address although no principal has an API key.
    pub insecure_listen: bool,
    /// Where browsers reach this server (`https://toolshed.example.com`): links of calls that
    /// pause for a per-user grant, and the redirect URI `{public_url}/connect/callback` to
    /// register at providers. Default `http://{addr}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub public_url: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct McpConfig {
    /// Also list every allowed tool as a plain MCP tool.
    pub direct: bool,
    /// Offer the `resume` meta-tool, through which an agent decides its own pending calls where
    /// its roles allow `self_decide` (default true; false removes the tool).
    pub resume_tool: bool,
    /// MCP sessions over HTTP, all principals together.
    pub max_sessions: usize,
    /// MCP sessions over HTTP of one principal.
    pub max_sessions_per_principal: usize,
    /// An MCP session without any request for this long is closed.
    pub session_idle_secs: u64,
}

impl Default for McpConfig {
    fn default() -> Self {
        let l = toolshed_mcp::SessionLimits::default();
        Self {
            direct: false,
            resume_tool: true,
            max_sessions: l.max_sessions,
            max_sessions_per_principal: l.max_per_principal,
            session_idle_secs: l.idle.as_secs(),
        }
    }
}

impl McpConfig {
    /// The session limits of the streamable HTTP transport.
    pub fn session_limits(&self) -> toolshed_mcp::SessionLimits {
        toolshed_mcp::SessionLimits {
            max_sessions: self.max_sessions,
            max_per_principal: self.max_sessions_per_principal,
            idle: Duration::from_secs(self.session_idle_secs.max(1)),
        }
    }
}

/// `[notify]`: who is told when an execution pauses.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NotifyConfig {
    /// POSTed `{"event": "paused", "executionId", "principal", "kind", "waits": [{waitId,
    /// kind}], "expiresAt"}` whenever an execution pauses (no arguments or results).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub webhook_url: Option<String>,
}

/// `[audit]`: how long audit entries are kept.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuditConfig {
    /// Days an audit entry is kept; older ones are purged by the serving process (at start-up,
    /// then hourly). 0 keeps them forever.
    pub retention_days: u64,
}

impl Default for AuditConfig {
    fn default() -> Self {
        Self { retention_days: 90 }
    }
}

/// `[executions]`: how long finished executions are kept.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ExecutionsConfig {
    /// Days a settled execution (completed, failed, expired, cancelled), its journal and its
    /// events are kept after it last changed; purged by the serving process (at start-up, then
    /// hourly). Paused and running executions are never purged. 0 keeps them forever.
    pub retention_days: u64,
}

impl Default for ExecutionsConfig {
    fn default() -> Self {
        Self { retention_days: 30 }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsConfig {
    pub memory_mb: usize,
    pub wall_clock_ms: u64,
    /// CPU time a script may spend executing JavaScript (waiting on tools does not count).
    pub cpu_ms: u64,
    pub max_tool_calls: u32,
    pub call_timeout_ms: u64,
    /// Longest any call may take, also for tools that declare their own longer timeout (a
    /// workflow run).
    pub max_call_timeout_ms: u64,
    /// Tool calls each principal may start per minute (script calls included); 0 = unlimited.
    pub calls_per_minute: u32,
    /// Scripts each principal may start per minute; 0 = unlimited.
    pub scripts_per_minute: u32,
    /// Scripts running at once, each in its own worker process (default: the number of
    /// CPUs, at least 2).
    pub max_concurrent_scripts: usize,
    /// Scripts waiting for a slot; beyond it a script is refused as `overloaded`.
    pub max_queued_scripts: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ApprovalsConfig {
    pub ttl_secs: u64,
    /// Seconds past the longest possible run after which a resumed execution that stopped
    /// (e.g. the process died) counts as interrupted and may be resumed again.
    pub recovery_grace_secs: u64,
}

#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrincipalConfig {
    pub id: String,
    #[serde(default)]
    pub roles: Vec<String>,
    /// API keys for HTTP; `env:NAME` reads the key from the environment.
    #[serde(default)]
    pub api_keys: Vec<String>,
    /// This principal's own `[limits] calls_per_minute` (0 = unlimited).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calls_per_minute: Option<u32>,
    /// This principal's own `[limits] scripts_per_minute` (0 = unlimited).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scripts_per_minute: Option<u32>,
}

impl std::fmt::Debug for PrincipalConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let keys: Vec<&str> = self.api_keys.iter().map(|k| shown_secret(k)).collect();
        f.debug_struct("PrincipalConfig")
            .field("id", &self.id)
            .field("roles", &self.roles)
            .field("api_keys", &keys)
            .field("calls_per_minute", &self.calls_per_minute)
            .field("scripts_per_minute", &self.scripts_per_minute)
            .finish()
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            data_dir: None,
            database_url: None,
            principal: "local".into(),
            http: HttpConfig::default(),
            mcp: McpConfig::default(),
            limits: LimitsConfig::default(),
            approvals: ApprovalsConfig::default(),
            audit: AuditConfig::default(),
            auth: BTreeMap::new(),
            roles: vec![],
            principals: vec![],
            sources: vec![],
            n8n: None,
            search: SearchConfig::default(),
            web: web::WebConfigFile::default(),
            notify: NotifyConfig::default(),
            executions: ExecutionsConfig::default(),
            models: BTreeMap::new(),
            servers: vec![],
            oauth: None,
        }
    }
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            addr: "127.0.0.1:7777".into(),
            allowed_hosts: vec![],
            allowed_origins: vec![],
            insecure_listen: false,
            public_url: None,
        }
    }
}

impl Default for LimitsConfig {
    fn default() -> Self {
        let l = Limits::default();
        Self {
            memory_mb: l.memory_bytes / (1024 * 1024),
            wall_clock_ms: l.wall_clock.as_millis() as u64,
            cpu_ms: l.cpu_time.as_millis() as u64,
            max_tool_calls: l.max_tool_calls,
            call_timeout_ms: 30_000,
            max_call_timeout_ms: 600_000,
            calls_per_minute: 0,
            scripts_per_minute: 0,
            max_concurrent_scripts: toolshed_sandbox::service::default_concurrency(),
            max_queued_scripts: toolshed_sandbox::service::DEFAULT_MAX_QUEUED,
        }
    }
}

impl Default for ApprovalsConfig {
    fn default() -> Self {
        Self {
            ttl_secs: 24 * 3600,
            recovery_grace_secs: 60,
        }
    }
}

impl Config {
    /// Loads defaults ← `file` (or `./toolshed.toml` when present) ← `TOOLSHED_*` environment.
    pub fn load(file: Option<&Path>) -> Result<Self, ConfigError> {
        let mut fig = Figment::from(Serialized::defaults(Config::default()));
        match file {
            Some(f) if !f.exists() => return Err(ConfigError::Missing(f.to_path_buf())),
            Some(f) => fig = fig.merge(Toml::file(f)),
            None if Path::new("toolshed.toml").exists() => {
                fig = fig.merge(Toml::file("toolshed.toml"))
            }
            None => {}
        }
        // Only keys that name a setting: other TOOLSHED_* variables (TOOLSHED_LOG, TOOLSHED_BIN in
        // scripts, ...) are not configuration.
        fig = fig.merge(
            Env::prefixed("TOOLSHED_")
                .filter(|k| {
                    let k = k.as_str().to_ascii_lowercase();
                    TOP_LEVEL_KEYS.contains(&k.split("__").next().unwrap_or_default())
                })
                .split("__"),
        );
        let mut config: Config = fig
            .extract()
            .map_err(|e| ConfigError::Figment(e.to_string()))?;
        // Relative file paths in [[sources]] are relative to the config file's directory.
        let base = file
            .and_then(Path::parent)
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let base = std::env::current_dir().unwrap_or_default().join(base);
        for s in &mut config.sources {
            s.absolutize(&base);
        }
        config.check_principals()?;
        let (call, max) = (
            config.limits.call_timeout_ms,
            config.limits.max_call_timeout_ms,
        );
        if call == 0 || call > max {
            return Err(ConfigError::BadCallTimeouts { call, max });
        }
        for (id, m) in &config.models {
            m.endpoint(id)?;
        }
        config.web.settings()?;
        config.virtual_servers()?;
        if let Some(url) = &config.notify.webhook_url {
            if !toolshed_core::is_url(url) {
                return Err(ConfigError::BadWebhook);
            }
        }
        Ok(config)
    }

    /// Refuses empty principal ids and empty literal API keys: an empty id would see every
    /// principal's executions and audit entries, an empty key would let anyone in.
    fn check_principals(&self) -> Result<(), ConfigError> {
        if self.principal.trim().is_empty() {
            return Err(ConfigError::EmptyLocalPrincipal);
        }
        for (index, p) in self.principals.iter().enumerate() {
            if p.id.trim().is_empty() {
                return Err(ConfigError::EmptyPrincipalId {
                    index: index + 1,
                    roles: p.roles.clone(),
                });
            }
            if let Some(index) = p
                .api_keys
                .iter()
                .position(|k| k.trim().is_empty() || env_ref(k) == Some(""))
            {
                return Err(ConfigError::EmptyApiKey {
                    principal: p.id.clone(),
                    index: index + 1,
                    var: None,
                });
            }
        }
        Ok(())
    }

    /// The virtual servers, checked: valid names and patterns, no name twice.
    pub fn virtual_servers(
        &self,
    ) -> Result<Vec<std::sync::Arc<toolshed_core::VirtualServer>>, ConfigError> {
        let mut out: Vec<std::sync::Arc<toolshed_core::VirtualServer>> = vec![];
        for (i, def) in self.servers.iter().enumerate() {
            let server = toolshed_core::VirtualServer::new(def.clone()).map_err(|e| {
                ConfigError::Server {
                    index: i + 1,
                    message: e.to_string(),
                }
            })?;
            if out.iter().any(|s| s.name() == server.name()) {
                return Err(ConfigError::Server {
                    index: i + 1,
                    message: format!("server '{}' is defined twice", server.name()),
                });
            }
            out.push(std::sync::Arc::new(server));
        }
        Ok(out)
    }

    /// The model endpoints agent runs use, keys resolved.
    pub fn model_endpoints(&self) -> Result<Vec<toolshed_models::Endpoint>, ConfigError> {
        self.models.iter().map(|(id, m)| m.endpoint(id)).collect()
    }

    /// The configured model credentials, without their keys.
    pub fn model_credentials(&self) -> Vec<toolshed_agents::ModelCredential> {
        self.models
            .iter()
            .map(|(id, m)| toolshed_agents::ModelCredential {
                id: id.clone(),
                kind: m.kind.clone(),
                base_url: m.base_url.clone(),
                runtime: false,
            })
            .collect()
    }

    /// The n8n settings with the API key resolved.
    pub fn n8n_settings(
        &self,
    ) -> Result<Option<toolshed_n8n_integration::N8nSettings>, ConfigError> {
        let Some(n) = &self.n8n else {
            return Ok(None);
        };
        let api_key =
            resolve_secret(&n.api_key).map_err(|var| ConfigError::MissingN8nKeyEnv { var })?;
        Ok(Some(toolshed_n8n_integration::N8nSettings {
            base_url: n.base_url.clone(),
            api_key,
            allow_private: n.allow_private,
            timeout: Duration::from_millis(n.timeout_ms.unwrap_or(30_000)),
        }))
    }

    /// The n8n login (email and password resolved), when `[n8n]` has one.
    pub fn n8n_login(&self) -> Result<Option<toolshed_n8n_integration::N8nLogin>, ConfigError> {
        let Some(n) = &self.n8n else {
            return Ok(None);
        };
        match (&n.email, &n.password) {
            (None, None) => Ok(None),
            (Some(email), Some(password)) if !email.trim().is_empty() && !password.is_empty() => {
                let password = resolve_secret(password)
                    .map_err(|var| ConfigError::MissingN8nPasswordEnv { var })?;
                Ok(Some(toolshed_n8n_integration::N8nLogin {
                    email: email.trim().to_string(),
                    password,
                }))
            }
            _ => Err(ConfigError::N8nLoginIncomplete),
        }
    }

    /// The data directory: configured, `$XDG_DATA_HOME/toolshed`, `~/.local/share/toolshed`, or
    /// `./.toolshed`.
    pub fn data_dir(&self) -> PathBuf {
        if let Some(d) = &self.data_dir {
            return d.clone();
        }
        if let Some(x) = std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
            return PathBuf::from(x).join("toolshed");
        }
        if let Some(h) = std::env::var_os("HOME").filter(|v| !v.is_empty()) {
            return PathBuf::from(h).join(".local/share/toolshed");
        }
        PathBuf::from(".toolshed")
    }

    /// Roles and principals; with none configured, the local principal may use everything.
    pub fn policy(&self) -> Result<Policy, ConfigError> {
        let (roles, principals) = self.roles_and_principals();
        Ok(Policy::new(roles, principals)?)
    }

    fn roles_and_principals(&self) -> (Vec<Role>, Vec<Principal>) {
        let mut roles = self.roles.clone();
        let mut principals: Vec<Principal> = self
            .principals
            .iter()
            .map(|p| Principal {
                id: p.id.clone(),
                roles: p.roles.clone(),
            })
            .collect();
        if roles.is_empty() && principals.is_empty() {
            roles.push(Role {
                id: "admin".into(),
                name: "Administrator".into(),
                patterns: vec!["*".into()],
                // The local user's own agent: it shows the action and relays the user's answer.
                decide: vec!["**".into()],
                self_decide: true,
                // No call rules: the default (writes and destructive calls need confirmation).
                ..Role::default()
            });
            principals.push(Principal {
                id: self.principal.clone(),
                roles: vec!["admin".into()],
            });
        }
        (roles, principals)
    }

    /// Whether any principal has an API key (HTTP then needs one on every request).
    pub fn has_api_keys(&self) -> bool {
        self.principals.iter().any(|p| !p.api_keys.is_empty())
    }

    /// API keys → principals. With no keys configured, HTTP callers are the local principal
    /// (the default listens on loopback only).
    pub fn key_ring(&self) -> Result<KeyRing, ConfigError> {
        let mut keys = Vec::new();
        for p in &self.principals {
            for (index, k) in p.api_keys.iter().enumerate() {
                let key = resolve_secret(k).map_err(|var| ConfigError::MissingKeyEnv {
                    principal: p.id.clone(),
                    var,
                })?;
                if key.trim().is_empty() || p.id.trim().is_empty() {
                    return Err(ConfigError::EmptyApiKey {
                        principal: p.id.clone(),
                        index: index + 1,
                        var: env_ref(k).map(str::to_string),
                    });
                }
                keys.push((key, p.id.clone()));
            }
        }
        let anonymous = (keys.is_empty() && self.oauth.is_none()).then(|| self.principal.clone());
        Ok(KeyRing::new(keys, anonymous))
    }

    /// Who may call the network faces: the API keys, plus OAuth tokens with `[oauth]` (checked
    /// against the policy's roles). With `[oauth]` there is no anonymous principal.
    pub fn authenticator(&self) -> Result<Authenticator, ConfigError> {
        let keys = self.key_ring()?;
        let Some(oauth) = &self.oauth else {
            return Ok(keys.into());
        };
        let policy = self.policy()?;
        oauth.check(|role| policy.has_role(role))?;
        Authenticator::new(keys, Some(oauth.clone()))
            .map_err(|e| ConfigError::OAuthIssuer(e.to_string()))
    }

    pub fn engine_config(&self) -> EngineConfig {
        let limits = Limits {
            memory_bytes: self.limits.memory_mb * 1024 * 1024,
            wall_clock: Duration::from_millis(self.limits.wall_clock_ms),
            cpu_time: Duration::from_millis(self.limits.cpu_ms),
            max_tool_calls: self.limits.max_tool_calls,
            ..Limits::default()
        };
        let rate_limits = RateLimits {
            calls_per_minute: self.limits.calls_per_minute,
            scripts_per_minute: self.limits.scripts_per_minute,
        };
        let principal_rate_limits = self
            .principals
            .iter()
            .filter(|p| p.calls_per_minute.is_some() || p.scripts_per_minute.is_some())
            .map(|p| {
                let own = RateLimits {
                    calls_per_minute: p.calls_per_minute.unwrap_or(rate_limits.calls_per_minute),
                    scripts_per_minute: p
                        .scripts_per_minute
                        .unwrap_or(rate_limits.scripts_per_minute),
                };
                (p.id.clone(), own)
            })
            .collect();
        let days = self.audit.retention_days;
        let execution_days = self.executions.retention_days;
        EngineConfig {
            execution_retention: (execution_days > 0)
                .then(|| Duration::from_secs(execution_days * 24 * 3600)),
            call_timeout: Duration::from_millis(self.limits.call_timeout_ms),
            max_call_timeout: Duration::from_millis(self.limits.max_call_timeout_ms),
            approval_ttl: Duration::from_secs(self.approvals.ttl_secs),
            recovery_grace: Duration::from_secs(self.approvals.recovery_grace_secs),
            limits,
            audit_retention: (days > 0).then(|| Duration::from_secs(days * 24 * 3600)),
            rate_limits,
            principal_rate_limits,
            notify_webhook: self.notify.webhook_url.clone(),
            sandbox: SandboxConfig {
                workers: None,
                max_concurrent: self.limits.max_concurrent_scripts.max(1),
                max_queued: self.limits.max_queued_scripts,
            },
            ..EngineConfig::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_work_without_a_file() {
        let c = Config::default();
        let p = c.policy().unwrap();
        assert!(p.access("local").allows("tables.create"));
        assert_eq!(
            c.key_ring().unwrap().principal(None).as_deref(),
            Some("local")
        );
    }

    #[test]
    fn limits_approvals_and_auth_reach_the_engine() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("toolshed.toml");
        std::fs::write(
            &f,
            r#"
[limits]
memory_mb = 8
cpu_ms = 250
max_tool_calls = 7
max_concurrent_scripts = 3
max_queued_scripts = 5
call_timeout_ms = 20000
max_call_timeout_ms = 300000
[approvals]
recovery_grace_secs = 3
[auth.crm]
type = "api_key"
key = "env:TOOLSHED_CONFIG_TEST_CRM_KEY"
[auth.svc]
type = "oauth2_client_credentials"
token_url = "https://auth.example.com/token"
client_id = "id"
client_secret = "s"
scopes = ["read"]
"#,
        )
        .unwrap();
        let c = Config::load(Some(&f)).unwrap();
        let e = c.engine_config();
        assert_eq!(e.limits.memory_bytes, 8 * 1024 * 1024);
        assert_eq!(e.limits.cpu_time, Duration::from_millis(250));
        assert_eq!(e.limits.max_tool_calls, 7);
        assert_eq!(e.sandbox.max_concurrent, 3);
        assert_eq!(e.sandbox.max_queued, 5);
        assert_eq!(e.recovery_grace, Duration::from_secs(3));
        assert_eq!(e.call_timeout, Duration::from_secs(20));
        assert_eq!(e.max_call_timeout, Duration::from_secs(300));
        assert_eq!(
            c.auth["crm"],
            CredentialConfig::ApiKey {
                key: "env:TOOLSHED_CONFIG_TEST_CRM_KEY".into()
            }
        );
        assert!(matches!(
            &c.auth["svc"],
            CredentialConfig::OAuth2ClientCredentials { scopes, .. } if scopes == &["read"]
        ));
        let d = Config::default().engine_config();
        assert_eq!(d.limits.cpu_time, Duration::from_secs(10));
        assert!(d.sandbox.max_concurrent >= 2);
        assert_eq!(d.sandbox.max_queued, 64);
        assert_eq!(d.recovery_grace, Duration::from_secs(60));
        assert_eq!(d.max_call_timeout, Duration::from_secs(600));
        std::fs::write(&f, "[auth.x]\ntype = \"magic\"\n").unwrap();
        let e = Config::load(Some(&f)).unwrap_err().to_string();
        assert!(e.contains("magic"), "{e}");
        std::fs::write(&f, "[limits]\ncall_timeout_ms = 700000\n").unwrap();
        let e = Config::load(Some(&f)).unwrap_err().to_string();
        assert!(
            e.contains("call_timeout_ms = 700000") && e.contains("max_call_timeout_ms = 600000"),
            "{e}"
        );
    }

    /// Debug output of a loaded configuration (as a log line might show it) carries no
    /// literal secret: `[auth.x]` credentials, API keys, the database password, source auth.
    /// `[oauth]` is read, checked against the roles (a mistake names its field) and ends the
    /// anonymous principal; its introspection secret never shows.
    #[test]
    fn oauth_is_read_checked_and_closes_the_open_server() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("toolshed.toml");
        let text = |role: &str| {
            format!(
                r#"
[[roles]]
id = "dev"
patterns = ["tables.*"]
[oauth]
resource = "https://toolshed.example.com"
default_roles = ["{role}"]
[[oauth.issuers]]
issuer = "https://id.example.com"
introspection = {{ client_id = "rs", client_secret = "introspect-secret-9" }}
"#
            )
        };
        std::fs::write(&f, text("dev")).unwrap();
        let c = Config::load(Some(&f)).unwrap();
        let auth = c.authenticator().unwrap();
        assert!(auth.oauth().is_some());
        assert_eq!(
            c.key_ring().unwrap().principal(None),
            None,
            "no anonymous principal"
        );
        assert!(!format!("{c:?}").contains("introspect-secret-9"));
        std::fs::write(&f, text("ghost")).unwrap();
        let e = Config::load(Some(&f))
            .unwrap()
            .authenticator()
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("[oauth] default_roles") && e.contains("ghost"),
            "{e}"
        );
    }

    #[test]
    fn debug_output_never_shows_secrets() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("toolshed.toml");
        std::fs::write(
            &f,
            r#"
database_url = "postgres://toolshed:db-pass-6@db.example.com/toolshed"
[auth.crm]
type = "api_key"
key = "crm-key-literal-1"
[auth.bot]
type = "bearer"
token = "bot-token-literal-2"
[auth.svc]
type = "oauth2_client_credentials"
token_url = "https://auth.example.com/token"
client_id = "svc-client"
client_secret = "svc-secret-literal-3"
[auth.envref]
type = "bearer"
token = "env:SOME_TOKEN_VAR"
[[principals]]
id = "ops"
api_keys = ["ops-api-key-literal-4"]
[[sources]]
kind = "openapi"
name = "pets"
spec = "pets.json"
auth = { type = "bearer", token = "pets-token-literal-5" }
"#,
        )
        .unwrap();
        let c = Config::load(Some(&f)).unwrap();
        let text = format!("{c:?}");
        for secret in [
            "crm-key-literal-1",
            "bot-token-literal-2",
            "svc-secret-literal-3",
            "ops-api-key-literal-4",
            "pets-token-literal-5",
            "db-pass-6",
        ] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
        for shown in [
            "env:SOME_TOKEN_VAR",
            "svc-client",
            "openapi:pets",
            "db.example.com",
        ] {
            assert!(text.contains(shown), "{shown} missing from {text}");
        }
    }

    /// API keys, the n8n key and its password resolve like every other secret: `env:NAME` and
    /// `${NAME}` alike, through the one resolver.
    #[test]
    fn secrets_resolve_through_the_one_resolver() {
        std::env::set_var("TOOLSHED_CONFIG_TEST_BRACED_KEY", "k-braced");
        std::env::set_var("TOOLSHED_CONFIG_TEST_BRACED_PW", "pw-braced");
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("toolshed.toml");
        std::fs::write(
            &f,
            r#"
[[principals]]
id = "ops"
api_keys = ["${TOOLSHED_CONFIG_TEST_BRACED_KEY}"]
[n8n]
base_url = "http://127.0.0.1:5678"
api_key = "${TOOLSHED_CONFIG_TEST_BRACED_KEY}"
email = "a@example.com"
password = "${TOOLSHED_CONFIG_TEST_BRACED_PW}"
"#,
        )
        .unwrap();
        let c = Config::load(Some(&f)).unwrap();
        let ring = c.key_ring().unwrap();
        assert_eq!(ring.principal(Some("k-braced")).as_deref(), Some("ops"));
        assert_eq!(c.n8n_settings().unwrap().unwrap().api_key, "k-braced");
        assert_eq!(c.n8n_login().unwrap().unwrap().password, "pw-braced");
        let text = format!("{c:?}");
        assert!(
            !text.contains("pw-braced") && !text.contains("k-braced"),
            "{text}"
        );
    }

    #[test]
    fn listener_and_session_settings() {
        let d = Config::default();
        assert!(!d.http.insecure_listen && d.http.allowed_origins.is_empty());
        assert_eq!(
            d.mcp.session_limits(),
            toolshed_mcp::SessionLimits::default()
        );
        assert!(!d.has_api_keys());
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("toolshed.toml");
        std::fs::write(
            &f,
            r#"
[http]
allowed_hosts = ["tools.example.com"]
allowed_origins = ["https://app.example.com"]
insecure_listen = true
[mcp]
max_sessions = 50
max_sessions_per_principal = 5
session_idle_secs = 90
"#,
        )
        .unwrap();
        let c = Config::load(Some(&f)).unwrap();
        assert_eq!(c.http.allowed_origins, ["https://app.example.com"]);
        assert!(c.http.insecure_listen);
        let l = c.mcp.session_limits();
        assert_eq!((l.max_sessions, l.max_per_principal), (50, 5));
        assert_eq!(l.idle, Duration::from_secs(90));
    }

    #[test]
    fn file_roles_and_keys() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("toolshed.toml");
        std::fs::write(
            &f,
            r#"
principal = "ops"
[limits]
wall_clock_ms = 1234
[[roles]]
id = "rows"
patterns = ["tables.rows.*"]
[[principals]]
id = "ops"
roles = ["rows"]
api_keys = ["k-ops"]
"#,
        )
        .unwrap();
        let c = Config::load(Some(&f)).unwrap();
        assert_eq!(
            c.engine_config().limits.wall_clock,
            Duration::from_millis(1234)
        );
        let p = c.policy().unwrap();
        assert!(p.access("ops").allows("tables.rows.insert"));
        assert!(!p.access("ops").allows("tables.create"));
        let ring = c.key_ring().unwrap();
        assert_eq!(ring.principal(Some("k-ops")).as_deref(), Some("ops"));
        assert_eq!(
            ring.principal(None),
            None,
            "with keys configured, anonymous calls are refused"
        );
    }

    #[test]
    #[allow(clippy::result_large_err)] // figment's Jail closure returns figment's own error
    fn environment_overrides_known_keys_only() {
        figment::Jail::expect_with(|jail| {
            jail.set_env("TOOLSHED_HTTP__ADDR", "127.0.0.1:9999");
            jail.set_env("TOOLSHED_PRINCIPAL", "ops");
            jail.set_env("TOOLSHED_BIN", "/usr/bin/x");
            let c = Config::load(None).unwrap();
            assert_eq!(c.http.addr, "127.0.0.1:9999");
            assert_eq!(c.principal, "ops");
            Ok(())
        });
    }

    #[test]
    fn sources_and_n8n_sections() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("toolshed.toml");
        std::fs::write(
            &f,
            r#"
[n8n]
base_url = "https://n8n.example.com"
api_key = "env:TOOLSHED_CONFIG_TEST_N8N_KEY_UNSET"

[[sources]]
kind = "openapi"
name = "pets"
spec = "specs/pets.json"
auth = { type = "bearer", token = "env:PETS_TOKEN" }
[[sources.overrides]]
pattern = "pets.store.*"
hidden = true

[[sources]]
kind = "mcp"
name = "mem"
command = "npx"
args = ["-y", "server-memory"]
"#,
        )
        .unwrap();
        let c = Config::load(Some(&f)).unwrap();
        assert_eq!(c.sources.len(), 2);
        match &c.sources[0] {
            SourceSpec::Openapi(o) => {
                assert_eq!(
                    o.location,
                    dir.path().join("specs/pets.json").display().to_string()
                );
                assert!(o.overrides[0].hidden);
            }
            other => panic!("expected openapi, got {other:?}"),
        }
        assert_eq!(c.sources[1].kind(), "mcp");
        let e = c.n8n_settings().unwrap_err().to_string();
        assert!(e.contains("TOOLSHED_CONFIG_TEST_N8N_KEY_UNSET"), "{e}");
        assert_eq!(c.n8n_login().unwrap(), None);
    }

    #[test]
    fn n8n_login_resolves_the_password_and_never_shows_it() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("toolshed.toml");
        let write = |extra: &str| {
            std::fs::write(
                &f,
                format!("[n8n]\nbase_url = \"https://n8n.example.com\"\napi_key = \"k\"\n{extra}"),
            )
            .unwrap();
            Config::load(Some(&f)).unwrap()
        };
        let c = write("email = \"owner@example.com\"\npassword = \"literal-pw-123\"\n");
        let l = c.n8n_login().unwrap().unwrap();
        assert_eq!(l.email, "owner@example.com");
        assert_eq!(l.password, "literal-pw-123");
        assert!(!format!("{c:?}").contains("literal-pw-123"));
        let c = write(
            "email = \"owner@example.com\"\npassword = \"env:TOOLSHED_CONFIG_TEST_N8N_PW_UNSET\"\n",
        );
        let e = c.n8n_login().unwrap_err().to_string();
        assert!(
            e.contains("[n8n] password") && e.contains("TOOLSHED_CONFIG_TEST_N8N_PW_UNSET"),
            "{e}"
        );
        let c = write("email = \"owner@example.com\"\n");
        assert!(c
            .n8n_login()
            .unwrap_err()
            .to_string()
            .contains("email and password go together"));
    }

    /// An empty principal id or API key is refused at load, naming the principal.
    #[test]
    #[allow(clippy::result_large_err)] // figment's Jail closure returns figment's own error
    fn empty_principal_ids_and_keys_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("toolshed.toml");
        let load = |text: &str| {
            std::fs::write(&f, text).unwrap();
            Config::load(Some(&f))
        };
        let e = load("[[principals]]\nid = \"\"\nroles = []\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("#1") && e.contains("empty id"), "{e}");
        for key in ["\"\"", "\"  \"", "\"env:\""] {
            let e = load(&format!(
                "[[principals]]\nid = \"ops\"\napi_keys = [\"k\", {key}]\n"
            ))
            .unwrap_err()
            .to_string();
            assert!(
                e.contains("'ops'") && e.contains("#2") && e.contains("empty"),
                "{e}"
            );
        }
        // Inside a jail: another test sets TOOLSHED_PRINCIPAL in one, which would override
        // the file's empty value if it ran meanwhile.
        figment::Jail::expect_with(|_| {
            assert!(load("principal = \"\"\n").is_err());
            Ok(())
        });
        std::env::set_var("TOOLSHED_CONFIG_TEST_EMPTY_KEY", "");
        let c = load(
            "[[principals]]\nid = \"ops\"\napi_keys = [\"env:TOOLSHED_CONFIG_TEST_EMPTY_KEY\"]\n",
        )
        .unwrap();
        let e = c.key_ring().unwrap_err().to_string();
        assert!(
            e.contains("'ops'") && e.contains("TOOLSHED_CONFIG_TEST_EMPTY_KEY"),
            "{e}"
        );
    }

    /// Rate limits, their per-principal overrides, the audit retention and `[mcp] resume_tool`.
    #[test]
    fn rate_limits_retention_and_resume_tool() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("toolshed.toml");
        std::fs::write(
            &f,
            r#"
[limits]
calls_per_minute = 60
scripts_per_minute = 5
[audit]
retention_days = 7
[mcp]
resume_tool = false
[[roles]]
id = "ops"
patterns = ["*"]
decide = ["tables.**"]
self_decide = true
[[principals]]
id = "ops"
roles = ["ops"]
scripts_per_minute = 0
"#,
        )
        .unwrap();
        let c = Config::load(Some(&f)).unwrap();
        let e = c.engine_config();
        assert_eq!(e.rate_limits.calls_per_minute, 60);
        assert_eq!(e.rate_limits.scripts_per_minute, 5);
        let ops = e.principal_rate_limits["ops"];
        assert_eq!((ops.calls_per_minute, ops.scripts_per_minute), (60, 0));
        assert_eq!(e.audit_retention, Some(Duration::from_secs(7 * 24 * 3600)));
        assert!(!c.mcp.resume_tool);
        let access = c.policy().unwrap().access("ops");
        assert!(access.may_decide("tables.rows.delete") && access.self_decide());
        let d = Config::default();
        assert!(d.mcp.resume_tool);
        assert_eq!(
            d.engine_config().audit_retention,
            Some(Duration::from_secs(90 * 24 * 3600))
        );
        // The built-in local principal decides everything, also through `resume`.
        let local = d.policy().unwrap().access("local");
        assert!(local.may_decide("any.tool") && local.self_decide());
    }

    #[test]
    fn unknown_keys_and_bad_files_are_clear_errors() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("t.toml");
        std::fs::write(&f, "colour = 'blue'\n").unwrap();
        let e = Config::load(Some(&f)).unwrap_err().to_string();
        assert!(e.contains("colour"), "{e}");
        std::fs::write(&f, "[limits\n").unwrap();
        assert!(Config::load(Some(&f)).is_err());
        assert!(matches!(
            Config::load(Some(&dir.path().join("nope.toml"))),
            Err(ConfigError::Missing(_))
        ));
    }
}
