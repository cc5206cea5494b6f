//! OAuth for streamable HTTP upstreams, per the MCP authorization specification (revisions
//! 2025-06-18 and 2025-11-25), built on rmcp's `auth` module.
//!
//! Nothing happens until the upstream asks. A request answered `401` with a
//! `WWW-Authenticate: Bearer` challenge starts discovery: the protected resource metadata
//! (RFC 9728) named by the challenge's `resource_metadata` (or found at the well-known
//! locations), whose `resource` must designate this upstream, then the authorization server's
//! metadata (RFC 8414, or OpenID Connect discovery). Toolshed then gets a token with the
//! configured grant ([`OAuthConfig`]):
//!
//! - `client_credentials`: a pre-registered client authenticates with its secret
//!   (`client_secret_basic` when the server offers only that, else `client_secret_post`) or a
//!   signed JWT (`private_key_jwt`);
//! - `authorization_code`: with PKCE (S256) and the resource indicator (RFC 8707). The client is
//!   the pre-registered `client_id` when one is configured, else a Client ID Metadata Document
//!   URL when the server supports them, else one registered dynamically (RFC 7591). The user's
//!   part (the authorization server's page, then the redirect back) is done by the configured
//!   [`AuthorizationAgent`]; the built-in [`FollowRedirects`] follows the server's redirects
//!   itself, for authorization servers that approve without a person. Without an agent, a
//!   person does it: the authorization is parked with a link and completed by Toolshed's
//!   callback ([`crate::person`]).
//!
//! With `issuer` configured ([`OAuthConfig::issuer`]), discovery must end at that authorization
//! server: a resource whose metadata does not list it, and an authorization server whose
//! metadata names another issuer, are refused with both named ([`crate::issuer`]).
//!
//! Scopes: the configured ones with the challenge's `scope`; with none configured, the
//! challenge's `scope`, else the resource's `scopes_supported`, else none (the parameter is
//! left out). `offline_access` is added when the authorization server lists it.
//!
//! The request is then sent again with the token. A `403` whose challenge says
//! `error="insufficient_scope"` and names scopes beyond those already asked for re-authorizes
//! once with the union and sends the request again ([`step_up_scopes`]); a challenge that asks
//! for nothing new is not retried. A rejected token is refreshed once (when a refresh token was
//! issued) before a new authorization. Tokens live in memory, per upstream, across reconnects.
//!
//! Secrets (the client secret, the private key, tokens) never appear in logs or errors: errors
//! have configured secret values blanked out, and [`crate::UpstreamConfig::redacted_values`]
//! lists them so that results echoing them are blanked out too.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::stream::BoxStream;
use oauth2::TokenResponse;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::auth::{
    AuthError, AuthorizationCallback, AuthorizationManager, AuthorizationRequest,
    AuthorizationSession, ClientCredentialsConfig, CredentialStore, JwtSigningAlgorithm,
    WWWAuthenticateParams,
};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
};
use serde::{Deserialize, Serialize};
use sse_stream::Sse;
use toolshed_outbound::secret::{redact, Secret};

use crate::person::{waiting, PersonGrants};

/// The redirect URI used when none is configured (authorization code).
pub const DEFAULT_REDIRECT_URI: &str = "http://localhost:3000/callback";
/// The client name sent in dynamic client registration when none is configured.
pub const DEFAULT_CLIENT_NAME: &str = "Toolshed";

/// How Toolshed gets a token.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OAuthGrant {
    /// A pre-registered client with a secret or a private key; no person involved.
    #[default]
    ClientCredentials,
    /// The authorization-code flow with PKCE; the user's part is done by an
    /// [`AuthorizationAgent`].
    AuthorizationCode,
}

impl OAuthGrant {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ClientCredentials => "client_credentials",
            Self::AuthorizationCode => "authorization_code",
        }
    }
}

/// OAuth settings of one streamable HTTP upstream. Debug shows no secret.
#[derive(Clone, PartialEq, Eq)]
pub struct OAuthConfig {
    pub grant: OAuthGrant,
    /// The pre-registered client. Required for `client_credentials`; for `authorization_code`,
    /// without one the client identifies with [`Self::client_metadata_url`] or registers.
    pub client_id: Option<String>,
    /// The pre-registered client's secret.
    pub client_secret: Option<Secret>,
    /// A PEM private key (RSA or EC) for `private_key_jwt` client authentication
    /// (`client_credentials` only), signed with [`Self::signing_algorithm`].
    pub private_key: Option<Secret>,
    /// `RS256` (default), `RS384`, `RS512`, `ES256` or `ES384`.
    pub signing_algorithm: Option<String>,
    /// Scopes asked for besides those the upstream names.
    pub scopes: Vec<String>,
    /// Where the authorization server sends the user back (`authorization_code`).
    pub redirect_uri: String,
    /// An HTTPS URL of this client's metadata document, used as its `client_id` where the
    /// authorization server supports Client ID Metadata Documents.
    pub client_metadata_url: Option<String>,
    /// The name sent when registering dynamically.
    pub client_name: String,
    /// Who does the user's part of the authorization-code flow.
    pub agent: Option<Agent>,
    /// Without an agent: where the authorization waits for a person, who comes back to
    /// Toolshed's callback ([`crate::person`]).
    pub person: Option<Arc<PersonGrants>>,
    /// The one authorization server accepted (its issuer identifier, RFC 8414); `None`
    /// accepts the one the upstream names.
    pub issuer: Option<String>,
}

impl std::fmt::Debug for OAuthConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthConfig")
            .field("grant", &self.grant)
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret)
            .field("private_key", &self.private_key)
            .field("signing_algorithm", &self.signing_algorithm)
            .field("scopes", &self.scopes)
            .field("redirect_uri", &self.redirect_uri)
            .field("client_metadata_url", &self.client_metadata_url)
            .field("client_name", &self.client_name)
            .field("agent", &self.agent.is_some())
            .field("person", &self.person.is_some())
            .field("issuer", &self.issuer)
            .finish()
    }
}

impl OAuthConfig {
    /// `client_credentials` for a pre-registered client with a secret.
    pub fn client_credentials(client_id: impl Into<String>, client_secret: Secret) -> Self {
        Self {
            client_id: Some(client_id.into()),
            client_secret: Some(client_secret),
            ..Self::authorization_code()
        }
        .with_grant(OAuthGrant::ClientCredentials)
    }

    /// `authorization_code` with no client configured (Client ID Metadata Document or dynamic
    /// registration) and no agent yet.
    pub fn authorization_code() -> Self {
        Self {
            grant: OAuthGrant::AuthorizationCode,
            client_id: None,
            client_secret: None,
            private_key: None,
            signing_algorithm: None,
            scopes: Vec::new(),
            redirect_uri: DEFAULT_REDIRECT_URI.into(),
            client_metadata_url: None,
            client_name: DEFAULT_CLIENT_NAME.into(),
            agent: None,
            person: None,
            issuer: None,
        }
    }

    pub fn with_grant(mut self, grant: OAuthGrant) -> Self {
        self.grant = grant;
        self
    }

    pub fn with_client(mut self, client_id: impl Into<String>, secret: Option<Secret>) -> Self {
        self.client_id = Some(client_id.into());
        self.client_secret = secret;
        self
    }

    pub fn with_scopes<I, S>(mut self, scopes: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.scopes = scopes.into_iter().map(Into::into).collect();
        self
    }

    pub fn with_agent(mut self, agent: Arc<dyn AuthorizationAgent>) -> Self {
        self.agent = Some(Agent(agent));
        self
    }

    /// Has a person do the user's part ([`crate::person`]): the redirect URI becomes the
    /// grants' callback unless `keep_redirect_uri` (one was configured, for a callback behind a
    /// proxy that reaches Toolshed's).
    pub fn with_person(mut self, grants: Arc<PersonGrants>, keep_redirect_uri: bool) -> Self {
        if !keep_redirect_uri {
            self.redirect_uri = grants.callback_url().to_string();
        }
        self.person = Some(grants);
        self
    }

    /// Pins the authorization server ([`Self::issuer`]).
    pub fn with_issuer(mut self, issuer: impl Into<String>) -> Self {
        self.issuer = Some(issuer.into());
        self
    }

    /// The secret values of this configuration, for redaction.
    pub fn secret_values(&self) -> Vec<String> {
        [&self.client_secret, &self.private_key]
            .into_iter()
            .flatten()
            .map(|s| s.expose().to_string())
            .collect()
    }

    /// Checks what can be checked without connecting; the reason names the field.
    pub fn validate(&self) -> Result<(), String> {
        let client_id = self.client_id.as_deref().map(str::trim);
        if client_id == Some("") {
            return Err("oauth.client_id is empty".into());
        }
        if self.client_secret.as_ref().is_some_and(Secret::is_empty) {
            return Err("oauth.client_secret is empty".into());
        }
        if self.private_key.as_ref().is_some_and(Secret::is_empty) {
            return Err("oauth.private_key is empty".into());
        }
        if let Some(alg) = &self.signing_algorithm {
            if self.private_key.is_none() {
                return Err("oauth.signing_algorithm is only used with oauth.private_key".into());
            }
            signing_algorithm(alg)?;
        }
        if let Some(issuer) = &self.issuer {
            crate::issuer::validate(issuer)?;
        }
        if let Some(s) = self.scopes.iter().find(|s| s.is_empty() || s.contains(' ')) {
            return Err(format!(
                "oauth.scopes: '{s}' is not one scope (no spaces, not empty)"
            ));
        }
        match self.grant {
            OAuthGrant::ClientCredentials => {
                if client_id.is_none() {
                    return Err(
                        "oauth.client_id is required for the client_credentials grant".into(),
                    );
                }
                match (&self.client_secret, &self.private_key) {
                    (None, None) => {
                        return Err("the client_credentials grant needs oauth.client_secret or oauth.private_key".into())
                    }
                    (Some(_), Some(_)) => {
                        return Err(
                            "give oauth.client_secret or oauth.private_key, not both".into()
                        )
                    }
                    _ => {}
                }
            }
            OAuthGrant::AuthorizationCode => {
                if self.private_key.is_some() {
                    return Err(
                        "oauth.private_key is only used with the client_credentials grant".into(),
                    );
                }
                if self.client_secret.is_some() && client_id.is_none() {
                    return Err("oauth.client_secret needs oauth.client_id".into());
                }
                let redirect = reqwest::Url::parse(&self.redirect_uri).map_err(|e| {
                    format!(
                        "oauth.redirect_uri '{}' is not a valid URL: {e}",
                        self.redirect_uri
                    )
                })?;
                if redirect.fragment().is_some() {
                    return Err("oauth.redirect_uri must not have a fragment".into());
                }
                if let Some(url) = &self.client_metadata_url {
                    let ok = reqwest::Url::parse(url)
                        .is_ok_and(|u| u.scheme() == "https" && u.path() != "/");
                    if !ok {
                        return Err(format!(
                            "oauth.client_metadata_url '{url}' must be an https URL with a path"
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

fn signing_algorithm(name: &str) -> Result<JwtSigningAlgorithm, String> {
    Ok(match name {
        "RS256" => JwtSigningAlgorithm::RS256,
        "RS384" => JwtSigningAlgorithm::RS384,
        "RS512" => JwtSigningAlgorithm::RS512,
        "ES256" => JwtSigningAlgorithm::ES256,
        "ES384" => JwtSigningAlgorithm::ES384,
        other => {
            return Err(format!(
                "oauth.signing_algorithm '{other}' is not one of RS256, RS384, RS512, ES256, ES384"
            ))
        }
    })
}

/// The `oauth` table of an MCP source as written in configuration:
///
/// ```toml
/// [sources.oauth]
/// grant = "client_credentials"          # or "authorization_code"
/// client_id = "toolshed"
/// client_secret = "env:UPSTREAM_CLIENT_SECRET"
/// scopes = ["mcp:read"]
/// issuer = "https://login.example.com"  # optional: the one authorization server accepted
/// ```
///
/// Secret fields (`client_secret`, `private_key`) accept `env:NAME` or `${NAME}`, like every
/// credential in Toolshed's configuration. `headless = true` lets Toolshed follow the
/// authorization server's redirects itself ([`FollowRedirects`]): for servers that approve
/// without a person (development servers, pre-consented clients).
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OAuthSpec {
    #[serde(default)]
    pub grant: OAuthGrant,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signing_algorithm: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redirect_uri: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_metadata_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_name: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub headless: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
}

impl std::fmt::Debug for OAuthSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hidden = |v: &Option<String>| v.as_ref().map(|_| "[REDACTED]");
        f.debug_struct("OAuthSpec")
            .field("grant", &self.grant)
            .field("client_id", &self.client_id)
            .field("client_secret", &hidden(&self.client_secret))
            .field("private_key", &hidden(&self.private_key))
            .field("scopes", &self.scopes)
            .field("issuer", &self.issuer)
            .finish_non_exhaustive()
    }
}

impl OAuthSpec {
    /// The configuration, secrets read and checked; the error names the field (never a
    /// secret's value).
    pub fn resolve(&self, allow_private: bool) -> Result<OAuthConfig, String> {
        let secret = |field: &str, value: &Option<String>| -> Result<Option<Secret>, String> {
            value
                .as_deref()
                .map(|v| Secret::from_config(v).map_err(|e| format!("oauth.{field}: {e}")))
                .transpose()
        };
        let mut cfg = OAuthConfig {
            grant: self.grant,
            client_id: self.client_id.clone(),
            client_secret: secret("client_secret", &self.client_secret)?,
            private_key: secret("private_key", &self.private_key)?,
            signing_algorithm: self.signing_algorithm.clone(),
            scopes: self.scopes.clone(),
            redirect_uri: self
                .redirect_uri
                .clone()
                .unwrap_or_else(|| DEFAULT_REDIRECT_URI.into()),
            client_metadata_url: self.client_metadata_url.clone(),
            client_name: self
                .client_name
                .clone()
                .unwrap_or_else(|| DEFAULT_CLIENT_NAME.into()),
            agent: None,
            person: None,
            issuer: self.issuer.clone(),
        };
        if self.headless {
            if self.grant != OAuthGrant::AuthorizationCode {
                return Err("oauth.headless applies to the authorization_code grant only".into());
            }
            cfg.agent = Some(Agent(Arc::new(FollowRedirects::new(allow_private))));
        }
        cfg.validate()?;
        Ok(cfg)
    }

    /// Checks the settings without reading secrets (an `env:` secret may be set only where the
    /// server runs); the error names the field.
    pub fn check(&self) -> Result<(), String> {
        let mut shape = self.clone();
        for s in [&mut shape.client_secret, &mut shape.private_key]
            .into_iter()
            .flatten()
        {
            if !s.trim().is_empty() {
                *s = "given".into();
            }
        }
        shape.resolve(true).map(|_| ())
    }

    /// Whether a person approves this grant at a link (an authorization code without
    /// `headless`): no tools can be imported until then.
    pub fn needs_a_person(&self) -> bool {
        self.grant == OAuthGrant::AuthorizationCode && !self.headless
    }
}

/// Does the user's part of the authorization-code flow: takes the authorization request to the
/// authorization server as a browser would and answers the URL the server redirected back to
/// (at `redirect_uri`, with `code` and `state`, or `error`).
#[async_trait::async_trait]
pub trait AuthorizationAgent: Send + Sync {
    async fn authorize(
        &self,
        authorization_url: &str,
        redirect_uri: &str,
    ) -> Result<String, String>;
}

/// An [`AuthorizationAgent`] in a configuration (compared by identity).
#[derive(Clone)]
pub struct Agent(pub Arc<dyn AuthorizationAgent>);

impl PartialEq for Agent {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Agent {}

/// Follows the authorization server's redirects (at most 10, each target through Toolshed's
/// address guard) until one goes to the redirect URI, which is not requested: its URL is the
/// answer. For authorization servers that approve at once; one that shows a page instead is an
/// error saying a person must approve.
pub struct FollowRedirects {
    allow_private: bool,
}

impl FollowRedirects {
    pub fn new(allow_private: bool) -> Self {
        Self { allow_private }
    }
}

/// Whether `url` is a redirect to `redirect_uri` (same scheme, host, port and path).
fn is_redirect_to(url: &reqwest::Url, redirect_uri: &reqwest::Url) -> bool {
    url.scheme() == redirect_uri.scheme()
        && url.host_str() == redirect_uri.host_str()
        && url.port_or_known_default() == redirect_uri.port_or_known_default()
        && url.path() == redirect_uri.path()
}

#[async_trait::async_trait]
impl AuthorizationAgent for FollowRedirects {
    async fn authorize(
        &self,
        authorization_url: &str,
        redirect_uri: &str,
    ) -> Result<String, String> {
        let target = reqwest::Url::parse(redirect_uri)
            .map_err(|e| format!("the redirect URI is not a URL: {e}"))?;
        let client = toolshed_outbound::client::unfollowing_client(self.allow_private)
            .map_err(|e| e.to_string())?;
        let mut url = reqwest::Url::parse(authorization_url)
            .map_err(|e| format!("the authorization URL is not a URL: {e}"))?;
        for _ in 0..10 {
            if is_redirect_to(&url, &target) {
                return Ok(url.to_string());
            }
            toolshed_outbound::net::check_host(&url, self.allow_private)
                .await
                .map_err(|e| e.to_string())?;
            let response = client
                .get(url.clone())
                .timeout(Duration::from_secs(30))
                .send()
                .await
                .map_err(|e| format!("the authorization server could not be reached: {e}"))?;
            let status = response.status();
            let location = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|v| v.to_str().ok());
            match location {
                Some(next) if status.is_redirection() => {
                    url = url
                        .join(next)
                        .map_err(|e| format!("the authorization server redirected to a bad URL: {e}"))?;
                }
                _ => {
                    return Err(format!(
                        "the authorization server answered HTTP {status} instead of redirecting to {redirect_uri}; a person must approve this client there"
                    ))
                }
            }
        }
        Err("the authorization server redirected more than 10 times".into())
    }
}

/// What a `WWW-Authenticate` challenge asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Challenge {
    pub error: Option<String>,
    pub scopes: Vec<String>,
    pub resource_metadata: Option<String>,
}

impl Challenge {
    /// Parses a `WWW-Authenticate` value; a relative `resource_metadata` is resolved against
    /// `base` (the upstream's URL).
    pub fn parse(header: &str, base: &reqwest::Url) -> Self {
        let p = WWWAuthenticateParams::parse(header, base);
        Self {
            error: p.error,
            scopes: p
                .scope
                .as_deref()
                .unwrap_or_default()
                .split_whitespace()
                .map(str::to_string)
                .collect(),
            resource_metadata: p.resource_metadata_url.map(|u| u.to_string()),
        }
    }
}

/// The step-up decision on a `403`: re-authorize with the scopes returned (those `held` — asked
/// for or granted — plus those the challenge requires) when the challenge is
/// `insufficient_scope` and requires a scope not held; `None` when asking again could not help
/// (another error, no scope named, or nothing new).
pub fn step_up_scopes(held: &[String], challenge: &Challenge) -> Option<Vec<String>> {
    if challenge.error.as_deref() != Some("insufficient_scope") {
        return None;
    }
    if challenge.scopes.iter().all(|s| held.contains(s)) {
        return None;
    }
    Some(union(held, &challenge.scopes))
}

/// `a` then the members of `b` not in `a`, without duplicates.
fn union(a: &[String], b: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(a.len() + b.len());
    for s in a.iter().chain(b) {
        if !out.contains(s) {
            out.push(s.clone());
        }
    }
    out
}

/// The OAuth state of one upstream, shared by its connections (reconnects keep the token).
pub(crate) struct Authorizer {
    name: String,
    url: reqwest::Url,
    cfg: OAuthConfig,
    allow_private: bool,
    state: tokio::sync::Mutex<State>,
    /// The newest tokens handed out, blanked out of what the upstream answers.
    issued: std::sync::Mutex<std::collections::VecDeque<String>>,
}

/// How many recent tokens are blanked out of answers.
const ISSUED_KEPT: usize = 4;

#[derive(Default)]
struct State {
    manager: Option<AuthorizationManager>,
    token: Option<String>,
    /// Counts tokens: a request that failed with an older token retries with the newer one.
    generation: u64,
    /// Scopes asked for or granted with the current token.
    held: Vec<String>,
}

type HttpError = StreamableHttpError<reqwest::Error>;

impl Authorizer {
    pub(crate) fn new(
        name: &str,
        url: &str,
        cfg: OAuthConfig,
        allow_private: bool,
    ) -> Option<Self> {
        Some(Self {
            name: name.to_string(),
            url: reqwest::Url::parse(url).ok()?,
            cfg,
            allow_private,
            state: Default::default(),
            issued: Default::default(),
        })
    }

    /// Notes a token handed out, so that an upstream echoing it does not reveal it.
    fn issued(&self, token: &str) {
        let mut issued = self.issued.lock().unwrap_or_else(|p| p.into_inner());
        if !issued.iter().any(|t| t == token) {
            if issued.len() >= ISSUED_KEPT {
                issued.pop_front();
            }
            issued.push_back(token.to_string());
        }
    }

    /// The newest tokens handed out (for redaction).
    pub(crate) fn tokens(&self) -> Vec<String> {
        let issued = self.issued.lock().unwrap_or_else(|p| p.into_inner());
        issued.iter().cloned().collect()
    }

    /// The token to send now (refreshed when it is about to expire) and its generation.
    async fn current(&self) -> (Option<String>, u64) {
        let mut st = self.state.lock().await;
        if let (Some(manager), Some(_)) = (&st.manager, &st.token) {
            match manager.get_access_token().await {
                Ok(token) => {
                    self.issued(&token);
                    st.token = Some(token);
                }
                Err(e) => {
                    tracing::debug!(upstream = %self.name, error = %self.clean(&e.to_string()), "no usable token; the next challenge re-authorizes");
                    st.token = None;
                }
            }
        }
        (st.token.clone(), st.generation)
    }

    /// A `401`: the token sent (of generation `sent`) was missing or refused.
    async fn unauthorized(&self, header: &str, sent: u64) -> Result<(String, u64), HttpError> {
        let mut st = self.state.lock().await;
        if st.generation != sent {
            if let Some(token) = st.token.clone() {
                return Ok((token, st.generation));
            }
        }
        if st.token.is_some() {
            if let Some(manager) = &st.manager {
                if let Ok(fresh) = manager.refresh_token().await {
                    let token = fresh.access_token().secret().to_string();
                    if st.token.as_deref() != Some(token.as_str()) {
                        return Ok(self.store(&mut st, token, None));
                    }
                }
            }
        }
        let challenge = Challenge::parse(header, &self.url);
        let scopes = union(&self.cfg.scopes, &challenge.scopes);
        self.authorize(&mut st, header, scopes, false).await
    }

    /// A `403`: re-authorizes with wider scopes when [`step_up_scopes`] says so; `None` when the
    /// refusal stands.
    async fn insufficient_scope(
        &self,
        header: &str,
        sent: u64,
    ) -> Result<Option<(String, u64)>, HttpError> {
        let mut st = self.state.lock().await;
        if st.generation != sent {
            return Ok(st.token.clone().map(|t| (t, st.generation)));
        }
        let challenge = Challenge::parse(header, &self.url);
        let Some(wider) = step_up_scopes(&st.held, &challenge) else {
            tracing::debug!(upstream = %self.name, "403 without a wider scope to ask for; not re-authorizing");
            return Ok(None);
        };
        tracing::debug!(upstream = %self.name, scopes = ?wider, "step-up authorization");
        self.authorize(&mut st, header, wider, true).await.map(Some)
    }

    fn store(&self, st: &mut State, token: String, held: Option<Vec<String>>) -> (String, u64) {
        self.issued(&token);
        st.token = Some(token.clone());
        st.generation += 1;
        if let Some(held) = held {
            st.held = held;
        }
        (token, st.generation)
    }

    /// Gets a token for `scopes` (empty: the ones the upstream names): a new authorization,
    /// discovering the authorization server from `header`, or with `step_up` one with the
    /// client and metadata of the current one.
    async fn authorize(
        &self,
        st: &mut State,
        header: &str,
        scopes: Vec<String>,
        step_up: bool,
    ) -> Result<(String, u64), HttpError> {
        let outcome = self.obtain(st, header, scopes, step_up).await;
        match outcome {
            Ok((token, held)) => Ok(self.store(st, token, Some(held))),
            Err(e) => {
                if let Some(url) = self.person_waiting() {
                    tracing::warn!(upstream = %self.name, authorization_url = %url, "the upstream waits for a person to authorize Toolshed: open the authorization_url");
                    return Err(StreamableHttpError::Auth(AuthError::AuthorizationFailed(
                        waiting(&self.name),
                    )));
                }
                let reason = self.clean(&e.to_string());
                tracing::warn!(upstream = %self.name, error = %reason, "OAuth authorization failed");
                Err(StreamableHttpError::Auth(AuthError::AuthorizationFailed(
                    format!(
                        "OAuth ({}) for upstream '{}' failed: {reason}",
                        self.cfg.grant.as_str(),
                        self.name
                    ),
                )))
            }
        }
    }

    /// The link of this upstream's authorization that waits for a person, if any.
    fn person_waiting(&self) -> Option<String> {
        self.person()?.waiting_at(&self.name)
    }

    /// The person's grants, when a person does the user's part of this upstream's flow.
    fn person(&self) -> Option<&Arc<PersonGrants>> {
        match (&self.cfg.grant, &self.cfg.agent, &self.cfg.person) {
            (OAuthGrant::AuthorizationCode, None, Some(p)) => Some(p),
            _ => None,
        }
    }

    /// Parks the authorization at `url` for a person ([`crate::person`]); the error says so.
    fn park(
        &self,
        person: &Arc<PersonGrants>,
        url: &str,
        manager: AuthorizationManager,
        asked: Vec<String>,
    ) -> AuthError {
        match person.park(&self.name, url, manager, asked, self.cfg.secret_values()) {
            Ok(()) => AuthError::AuthorizationFailed(waiting(&self.name)),
            Err(e) => AuthError::AuthorizationFailed(e),
        }
    }

    /// The token and the scopes it was asked with.
    async fn obtain(
        &self,
        st: &mut State,
        header: &str,
        scopes: Vec<String>,
        step_up: bool,
    ) -> Result<(String, Vec<String>), AuthError> {
        if let Some(person) = self.person() {
            // A person approved since the last attempt: their token, and the client that got it.
            if let Some(granted) = person.take(&self.name) {
                st.manager = Some(granted.manager);
                return Ok((granted.token, granted.held));
            }
            if person.waiting_at(&self.name).is_some() {
                return Err(AuthError::AuthorizationFailed(waiting(&self.name)));
            }
            // The first attempt of this process: a token a person approved before, if kept.
            if !step_up && st.manager.is_none() {
                if let Some((manager, token, held)) = self.restore(person, header).await? {
                    st.manager = Some(manager);
                    return Ok((token, held));
                }
            }
        }
        let manager = match st.manager.take() {
            // A step-up keeps the client (and the metadata) of the first authorization; one a
            // person approves starts afresh instead, so that the current token keeps being
            // refreshed until the person approved.
            Some(m) if step_up && self.person().is_some() => {
                st.manager = Some(m);
                None
            }
            Some(m) if step_up => Some(m),
            _ => None,
        };
        let stepping_up = manager.is_some();
        let mut manager = match manager {
            Some(m) => m,
            None => self.discover(header).await?,
        };
        if !stepping_up {
            // What a person approves now is kept for the next start.
            if let Some(kept) = self.person().and_then(|p| self.kept_credentials(p, true)) {
                manager.set_credential_store(kept);
            }
        }
        let result = match self.cfg.grant {
            OAuthGrant::ClientCredentials => {
                // Nothing configured or challenged: the resource's `scopes_supported`, if any.
                let scopes = if scopes.is_empty() && !stepping_up {
                    let mut s = manager.select_initial_scopes(&[]).await;
                    s.retain(|s| s != "offline_access");
                    s
                } else {
                    scopes
                };
                let config = self.client_credentials(scopes.clone())?;
                let r = match manager
                    .validate_client_credentials_metadata(&config)
                    .and_then(|()| manager.configure_client_credentials(&config))
                {
                    Ok(()) => {
                        let (m, r) = exchange_client_credentials(manager, config).await;
                        manager = m;
                        r
                    }
                    Err(e) => Err(e),
                };
                r.map(|t| (t.access_token().secret().to_string(), scopes))
            }
            OAuthGrant::AuthorizationCode if stepping_up => {
                let url = manager.request_scope_upgrade(&scopes.join(" ")).await;
                match url {
                    Ok(url) => self.complete(&manager, &url).await.map(|t| (t, scopes)),
                    Err(e) => Err(e),
                }
            }
            OAuthGrant::AuthorizationCode => {
                let mut request = AuthorizationRequest::new(self.cfg.redirect_uri.clone())
                    .with_client_name(self.cfg.client_name.clone());
                request = if scopes.is_empty() {
                    request.with_initial_scope_selection()
                } else {
                    request.with_scopes(scopes.clone())
                };
                if let Some(id) = &self.cfg.client_id {
                    request = request.with_preregistered_client(id.clone());
                    if let Some(secret) = &self.cfg.client_secret {
                        request = request.with_client_secret(secret.expose());
                    }
                } else if let Some(url) = &self.cfg.client_metadata_url {
                    request = request.with_client_metadata_url(url.clone());
                }
                match AuthorizationSession::new(manager, request).await {
                    Ok(session) => {
                        let url = session.auth_url.clone();
                        let asked = scopes_of(&url);
                        if let Some(person) = self.person() {
                            return Err(self.park(person, &url, session.auth_manager, asked));
                        }
                        let token = self.complete(&session.auth_manager, &url).await;
                        manager = session.auth_manager;
                        token.map(|t| (t, asked))
                    }
                    Err((m, e)) => {
                        manager = m;
                        Err(e)
                    }
                }
            }
        };
        let granted = match &result {
            Ok(_) => manager.get_current_scopes().await,
            Err(_) => Vec::new(),
        };
        // Kept after a failure too: a later step-up reuses its client and metadata.
        st.manager = Some(manager);
        let (token, asked) = result?;
        Ok((token, union(&asked, &granted)))
    }

    /// The credential store of this upstream in the person's vault, if there is one.
    fn kept_credentials(
        &self,
        person: &PersonGrants,
        fresh: bool,
    ) -> Option<crate::person::VaultCredentials> {
        person.credentials(&self.name, self.binding(), fresh)
    }

    /// What a kept token is for: the upstream's URL and the OAuth settings that decide which
    /// token it gets. A token kept under other settings is not used.
    fn binding(&self) -> String {
        let mut scopes = self.cfg.scopes.clone();
        scopes.sort();
        serde_json::json!({
            "url": self.url.as_str(),
            "grant": self.cfg.grant.as_str(),
            "client_id": self.cfg.client_id,
            "client_metadata_url": self.cfg.client_metadata_url,
            "issuer": self.cfg.issuer,
            "scopes": scopes,
        })
        .to_string()
    }

    /// The token a person approved before this process started, kept in the vault
    /// ([`crate::person`]), refreshed when it expired. `None` (a person authorizes again) when
    /// none is kept for these settings, when the authorization server is not the one that
    /// issued it, or when it can no longer be renewed; an error (the next attempt tries again)
    /// when the authorization server or the vault could not be reached.
    async fn restore(
        &self,
        person: &PersonGrants,
        header: &str,
    ) -> Result<Option<(AuthorizationManager, String, Vec<String>)>, AuthError> {
        let Some(kept) = self.kept_credentials(person, false) else {
            return Ok(None);
        };
        let stored = match kept.load().await? {
            Some(c) if c.token_response.is_some() => c,
            _ => return Ok(None),
        };
        let (mut manager, issuer) = self.discover_issuer(header).await?;
        if stored.issuer != issuer {
            // Never send the kept refresh token to another server (nor to the default
            // endpoints of an upstream that stopped publishing its metadata).
            tracing::warn!(upstream = %self.name, "the authorization server is not the one that issued the kept token; a person authorizes again");
            return Ok(None);
        }
        manager.set_credential_store(kept);
        if !manager.initialize_from_store().await? {
            return Ok(None);
        }
        if let (Some(id), Some(secret)) = (&self.cfg.client_id, &self.cfg.client_secret) {
            // A confidential client renews with its secret.
            let client = rmcp::transport::auth::OAuthClientConfig::new(
                id.clone(),
                self.cfg.redirect_uri.clone(),
            )
            .with_client_secret(secret.expose())
            .with_scopes(stored.granted_scopes.clone());
            manager.configure_client(client)?;
        }
        match manager.get_access_token().await {
            Ok(token) => {
                tracing::info!(upstream = %self.name, "connected with the token a person approved before");
                Ok(Some((manager, token, stored.granted_scopes)))
            }
            Err(AuthError::AuthorizationRequired | AuthError::TokenRefreshRejected(_)) => {
                tracing::warn!(upstream = %self.name, "the kept token can no longer be renewed; a person authorizes again");
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// A fresh manager with the authorization server's metadata found from `header`.
    async fn discover(&self, header: &str) -> Result<AuthorizationManager, AuthError> {
        Ok(self.discover_issuer(header).await?.0)
    }

    /// [`Self::discover`], with the issuer the metadata names (`None` for the default
    /// endpoints of a server that publishes none).
    async fn discover_issuer(
        &self,
        header: &str,
    ) -> Result<(AuthorizationManager, Option<String>), AuthError> {
        let mut manager = if self.allow_private {
            AuthorizationManager::new_allowing_private_addresses(self.url.as_str()).await?
        } else {
            AuthorizationManager::new(self.url.as_str()).await?
        };
        let resolution = manager
            .resolve_metadata_from_challenge(Some(header))
            .await?;
        let metadata = match &self.cfg.issuer {
            Some(pinned) => self.pinned(pinned, header, resolution).await?,
            None => {
                if !resolution.source.is_discovered() {
                    tracing::info!(upstream = %self.name, "no OAuth metadata published; using the 2025-03-26 default endpoints (/authorize, /token, /register)");
                }
                resolution.metadata
            }
        };
        let issuer = metadata.issuer.clone();
        manager.set_metadata(metadata);
        Ok((manager, issuer))
    }

    /// The metadata of the pinned authorization server `pinned` ([`crate::issuer`]).
    async fn pinned(
        &self,
        pinned: &str,
        header: &str,
        resolution: rmcp::transport::auth::AuthorizationMetadataResolution,
    ) -> Result<rmcp::transport::auth::AuthorizationMetadata, AuthError> {
        let client = toolshed_outbound::client::unfollowing_client(self.allow_private)
            .map_err(|e| AuthError::InternalError(e.to_string()))?;
        let discovery = crate::issuer::Discovery {
            client: &client,
            resource: &self.url,
            resource_metadata: Challenge::parse(header, &self.url).resource_metadata,
        };
        crate::issuer::pinned_metadata(pinned, &discovery, resolution)
            .await
            .map_err(|e| AuthError::AuthorizationFailed(e.to_string()))
    }

    fn client_credentials(
        &self,
        scopes: Vec<String>,
    ) -> Result<ClientCredentialsConfig, AuthError> {
        let client_id = self.cfg.client_id.clone().unwrap_or_default();
        // RFC 8707: the MCP server's canonical URI.
        let mut resource = self.url.clone();
        resource.set_fragment(None);
        let resource = Some(resource.to_string());
        Ok(match (&self.cfg.client_secret, &self.cfg.private_key) {
            (_, Some(key)) => ClientCredentialsConfig::PrivateKeyJwt {
                client_id,
                signing_key: key.expose().as_bytes().to_vec(),
                signing_algorithm: signing_algorithm(
                    self.cfg.signing_algorithm.as_deref().unwrap_or("RS256"),
                )
                .map_err(AuthError::ClientCredentialsError)?,
                token_endpoint_audience: None,
                scopes,
                resource,
            },
            (Some(secret), None) => ClientCredentialsConfig::ClientSecret {
                client_id,
                client_secret: secret.expose().to_string(),
                scopes,
                resource,
            },
            (None, None) => {
                return Err(AuthError::ClientCredentialsError(
                    "no client_secret or private_key configured".into(),
                ))
            }
        })
    }

    /// Has the agent take the user through `url`, then exchanges the code for a token.
    async fn complete(
        &self,
        manager: &AuthorizationManager,
        url: &str,
    ) -> Result<String, AuthError> {
        let Some(agent) = &self.cfg.agent else {
            return Err(AuthError::AuthorizationFailed(
                "the authorization_code grant needs a person to approve at the authorization server, and no authorization agent is configured (Toolshed's server gives one; set oauth.headless for servers that approve at once)".into(),
            ));
        };
        let back = agent
            .0
            .authorize(url, &self.cfg.redirect_uri)
            .await
            .map_err(AuthError::AuthorizationFailed)?;
        if let Some(error) = reqwest::Url::parse(&back).ok().and_then(|u| {
            u.query_pairs()
                .find(|(k, _)| k == "error")
                .map(|(_, v)| v.into_owned())
        }) {
            return Err(AuthError::AuthorizationFailed(format!(
                "the authorization server refused: {error}"
            )));
        }
        let callback = AuthorizationCallback::from_redirect_url(&back)?;
        let token = manager
            .exchange_code_for_token_with_issuer(
                &callback.code,
                &callback.csrf_token,
                callback.issuer.as_deref(),
            )
            .await?;
        Ok(token.access_token().secret().to_string())
    }

    /// `text` with configured secrets and the current token blanked out.
    fn clean(&self, text: &str) -> String {
        let mut secrets = self.cfg.secret_values();
        secrets.extend(self.tokens());
        let refs: Vec<&str> = secrets.iter().map(String::as_str).collect();
        redact(text, &refs)
    }
}

/// [`AuthorizationManager::exchange_client_credentials`], whose future is not `Send` (with
/// `private_key_jwt` compiled in, rmcp keeps a form serializer across an await), run to its end
/// on a blocking thread. Answers the manager back with the outcome.
async fn exchange_client_credentials(
    manager: AuthorizationManager,
    config: ClientCredentialsConfig,
) -> (
    AuthorizationManager,
    Result<rmcp::transport::auth::OAuthTokenResponse, AuthError>,
) {
    let handle = tokio::runtime::Handle::current();
    let done = tokio::task::spawn_blocking(move || {
        let outcome = handle.block_on(manager.exchange_client_credentials(&config));
        (manager, outcome)
    })
    .await;
    match done {
        Ok(done) => done,
        // The exchange panicked; the manager is lost with it.
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
}

/// The `scope` parameter of an authorization URL, split.
fn scopes_of(url: &str) -> Vec<String> {
    query_param(url, "scope")
        .map(|v| v.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

/// The parameter `name` of `url`'s query, decoded.
pub(crate) fn query_param(url: &str, name: &str) -> Option<String> {
    reqwest::Url::parse(url)
        .ok()?
        .query_pairs()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

/// The streamable HTTP client of an upstream: Toolshed's guarded client and, when the source
/// has OAuth, the token added and challenges answered ([`Authorizer`]).
#[derive(Clone)]
pub(crate) struct UpstreamHttp {
    pub(crate) inner: reqwest::Client,
    pub(crate) auth: Option<Arc<Authorizer>>,
    /// Whether the upstream may be on a private address (the client's own connections check
    /// it, [`crate::h1`]).
    pub(crate) allow_private: bool,
}

impl UpstreamHttp {
    /// Runs `call` with the current token; a `401` authorizes and runs it once more, a `403`
    /// that warrants a step-up too. For an SSE stream (`stream`), a failed authorization or a
    /// refused step-up answers the server's own challenge, which ends rmcp's reconnection
    /// attempts instead of authorizing again at each. Without OAuth, `call` runs once, without
    /// a token.
    async fn with_token<T, F, Fut>(&self, stream: bool, call: F) -> Result<T, HttpError>
    where
        F: Fn(Option<String>) -> Fut,
        Fut: std::future::Future<Output = Result<T, HttpError>>,
    {
        let Some(auth) = &self.auth else {
            return call(None).await;
        };
        let (mut token, mut generation) = auth.current().await;
        let (mut reauthorized, mut stepped_up) = (false, false);
        loop {
            match call(token.clone()).await {
                Err(StreamableHttpError::AuthRequired(e)) if !reauthorized => {
                    reauthorized = true;
                    match auth
                        .unauthorized(&e.www_authenticate_header, generation)
                        .await
                    {
                        Ok((t, g)) => (token, generation) = (Some(t), g),
                        Err(_) if stream => return Err(StreamableHttpError::AuthRequired(e)),
                        Err(failed) => return Err(failed),
                    }
                }
                Err(StreamableHttpError::InsufficientScope(e)) if !stepped_up => {
                    stepped_up = true;
                    let refused = match auth
                        .insufficient_scope(&e.www_authenticate_header, generation)
                        .await
                    {
                        Ok(Some((t, g))) => {
                            (token, generation) = (Some(t), g);
                            continue;
                        }
                        Ok(None) => None,
                        Err(failed) => Some(failed),
                    };
                    if stream {
                        return Err(StreamableHttpError::InsufficientScope(e));
                    }
                    return Err(refused.unwrap_or_else(|| {
                        let required = Challenge::parse(&e.www_authenticate_header, &auth.url);
                        StreamableHttpError::Auth(AuthError::InsufficientScope {
                            required_scope: required.scopes.join(" "),
                            upgrade_url: None,
                        })
                    }));
                }
                other => return other,
            }
        }
    }
}

impl StreamableHttpClient for UpstreamHttp {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        self.with_token(false, |token| {
            self.inner.post_message(
                uri.clone(),
                message.clone(),
                session_id.clone(),
                token,
                custom_headers.clone(),
            )
        })
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        self.with_token(false, |token| {
            self.inner.post_message_with_max_sse_event_size(
                uri.clone(),
                message.clone(),
                session_id.clone(),
                token,
                custom_headers.clone(),
                max_sse_event_size,
            )
        })
        .await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        _auth: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), HttpError> {
        self.with_token(false, |token| {
            self.inner.delete_session(
                uri.clone(),
                session_id.clone(),
                token,
                custom_headers.clone(),
            )
        })
        .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        _auth: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, HttpError> {
        self.with_token(true, |token| {
            self.inner.get_stream(
                uri.clone(),
                session_id.clone(),
                last_event_id.clone(),
                token,
                custom_headers.clone(),
            )
        })
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        _auth: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, HttpError> {
        self.with_token(true, |token| {
            self.inner.get_stream_with_max_sse_event_size(
                uri.clone(),
                session_id.clone(),
                last_event_id.clone(),
                token,
                custom_headers.clone(),
                max_sse_event_size,
            )
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn base() -> reqwest::Url {
        reqwest::Url::parse("https://mcp.example.com/mcp").unwrap()
    }

    #[test]
    fn challenges_are_parsed() {
        let c = Challenge::parse(
            r#"Bearer error="insufficient_scope", scope="mcp:basic mcp:write", resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp""#,
            &base(),
        );
        assert_eq!(c.error.as_deref(), Some("insufficient_scope"));
        assert_eq!(c.scopes, strings(&["mcp:basic", "mcp:write"]));
        assert_eq!(
            c.resource_metadata.as_deref(),
            Some("https://mcp.example.com/.well-known/oauth-protected-resource/mcp")
        );
        // A relative metadata URL is the resource's own.
        let c = Challenge::parse(
            r#"Bearer resource_metadata="/.well-known/oauth-protected-resource""#,
            &base(),
        );
        assert_eq!(
            c.resource_metadata.as_deref(),
            Some("https://mcp.example.com/.well-known/oauth-protected-resource")
        );
        assert!(c.scopes.is_empty() && c.error.is_none());
        assert_eq!(Challenge::parse("Bearer", &base()), Challenge::default());
    }

    fn insufficient(scope: &str) -> Challenge {
        Challenge {
            error: Some("insufficient_scope".into()),
            scopes: scope.split_whitespace().map(str::to_string).collect(),
            resource_metadata: None,
        }
    }

    #[test]
    fn step_up_only_for_a_wider_scope() {
        let held = strings(&["mcp:basic"]);
        // A scope not held: re-authorize with the union, held ones first.
        assert_eq!(
            step_up_scopes(&held, &insufficient("mcp:write mcp:basic")),
            Some(strings(&["mcp:basic", "mcp:write"]))
        );
        assert_eq!(
            step_up_scopes(&[], &insufficient("mcp:admin")),
            Some(strings(&["mcp:admin"]))
        );
        // Nothing new: asking again cannot help (the retry-limit case).
        assert_eq!(step_up_scopes(&held, &insufficient("mcp:basic")), None);
        // No scope named: nothing to ask for.
        assert_eq!(step_up_scopes(&held, &insufficient("")), None);
        // Other refusals are not scope problems.
        let mut other = insufficient("mcp:write");
        other.error = Some("invalid_token".into());
        assert_eq!(step_up_scopes(&held, &other), None);
        other.error = None;
        assert_eq!(step_up_scopes(&held, &other), None);
    }

    #[test]
    fn unions_keep_order_without_duplicates() {
        assert_eq!(
            union(&strings(&["a", "b"]), &strings(&["b", "c", "a", "c"])),
            strings(&["a", "b", "c"])
        );
        assert_eq!(
            scopes_of("https://as.example/authorize?client_id=x&scope=mcp%3Abasic+offline_access"),
            strings(&["mcp:basic", "offline_access"])
        );
        assert!(scopes_of("https://as.example/authorize?client_id=x").is_empty());
    }

    fn invalid(cfg: OAuthConfig) -> String {
        cfg.validate().unwrap_err()
    }

    #[test]
    fn invalid_configs_name_the_field() {
        let secret = Secret::new("s3cret-value");
        assert!(OAuthConfig::client_credentials("toolshed", secret.clone())
            .validate()
            .is_ok());
        assert!(OAuthConfig::authorization_code().validate().is_ok());

        let no_client = OAuthConfig::authorization_code().with_grant(OAuthGrant::ClientCredentials);
        assert!(invalid(no_client).contains("oauth.client_id is required"));
        let no_secret = OAuthConfig::authorization_code()
            .with_client("toolshed", None)
            .with_grant(OAuthGrant::ClientCredentials);
        assert!(invalid(no_secret).contains("oauth.client_secret or oauth.private_key"));
        let both = OAuthConfig {
            private_key: Some(Secret::new("-----BEGIN PRIVATE KEY-----")),
            ..OAuthConfig::client_credentials("toolshed", secret.clone())
        };
        assert!(invalid(both).contains("not both"));
        let empty_id = OAuthConfig::client_credentials(" ", secret.clone());
        assert!(invalid(empty_id).contains("oauth.client_id is empty"));
        let empty_secret = OAuthConfig::client_credentials("toolshed", Secret::new(""));
        assert!(invalid(empty_secret).contains("oauth.client_secret is empty"));
        let bad_scope =
            OAuthConfig::client_credentials("toolshed", secret.clone()).with_scopes(["a b"]);
        assert!(invalid(bad_scope).contains("oauth.scopes"));
        let bad_alg = OAuthConfig {
            private_key: Some(Secret::new("pem")),
            client_secret: None,
            signing_algorithm: Some("HS256".into()),
            ..OAuthConfig::client_credentials("toolshed", secret.clone())
        };
        assert!(invalid(bad_alg).contains("oauth.signing_algorithm 'HS256'"));

        let secret_without_id = OAuthConfig {
            client_secret: Some(secret.clone()),
            ..OAuthConfig::authorization_code()
        };
        assert!(invalid(secret_without_id).contains("oauth.client_secret needs oauth.client_id"));
        let bad_redirect = OAuthConfig {
            redirect_uri: "not a url".into(),
            ..OAuthConfig::authorization_code()
        };
        assert!(invalid(bad_redirect).contains("oauth.redirect_uri"));
        let http_cimd = OAuthConfig {
            client_metadata_url: Some("http://client.example/metadata.json".into()),
            ..OAuthConfig::authorization_code()
        };
        assert!(invalid(http_cimd).contains("oauth.client_metadata_url"));
        let key_with_code = OAuthConfig {
            private_key: Some(Secret::new("pem")),
            ..OAuthConfig::authorization_code()
        };
        assert!(invalid(key_with_code).contains("oauth.private_key"));
    }

    #[test]
    fn specs_read_secrets_from_the_environment_and_never_show_them() {
        let var = "TOOLSHED_OAUTH_TEST_SECRET_7F3A";
        std::env::set_var(var, "env-secret-value-42");
        let spec: OAuthSpec = serde_json::from_value(serde_json::json!({
            "client_id": "toolshed",
            "client_secret": format!("env:{var}"),
            "scopes": ["mcp:read"],
        }))
        .unwrap();
        let cfg = spec.resolve(false).unwrap();
        assert_eq!(cfg.grant, OAuthGrant::ClientCredentials);
        assert_eq!(
            cfg.client_secret.as_ref().map(Secret::expose),
            Some("env-secret-value-42")
        );
        assert_eq!(cfg.secret_values(), vec!["env-secret-value-42".to_string()]);
        let shown = format!("{cfg:?}");
        assert!(!shown.contains("env-secret-value-42"), "{shown}");

        // A missing variable names the field and the variable, not a value.
        let missing = OAuthSpec {
            client_secret: Some("env:TOOLSHED_OAUTH_TEST_UNSET_9C1".into()),
            ..spec.clone()
        };
        let e = missing.resolve(false).unwrap_err();
        assert!(
            e.contains("oauth.client_secret") && e.contains("TOOLSHED_OAUTH_TEST_UNSET_9C1"),
            "{e}"
        );

        // Unknown fields are refused; headless is for the authorization-code grant.
        let unknown = serde_json::from_value::<OAuthSpec>(serde_json::json!({"client_secrt": "x"}));
        assert!(unknown.unwrap_err().to_string().contains("client_secrt"));
        let headless = OAuthSpec {
            headless: true,
            ..spec.clone()
        };
        assert!(headless
            .resolve(false)
            .unwrap_err()
            .contains("oauth.headless"));
        let code: OAuthSpec = serde_json::from_value(serde_json::json!({
            "grant": "authorization_code",
            "headless": true,
        }))
        .unwrap();
        let cfg = code.resolve(true).unwrap();
        assert!(cfg.agent.is_some());
        assert_eq!(cfg.redirect_uri, DEFAULT_REDIRECT_URI);
        assert_eq!(cfg.client_name, DEFAULT_CLIENT_NAME);
    }

    #[test]
    fn redirects_are_matched_on_origin_and_path() {
        let target = reqwest::Url::parse("http://localhost:3000/callback").unwrap();
        let url = |s: &str| reqwest::Url::parse(s).unwrap();
        assert!(is_redirect_to(
            &url("http://localhost:3000/callback?code=c&state=s"),
            &target
        ));
        assert!(!is_redirect_to(
            &url("http://localhost:3001/callback?code=c"),
            &target
        ));
        assert!(!is_redirect_to(
            &url("http://localhost:3000/other?code=c"),
            &target
        ));
        assert!(!is_redirect_to(
            &url("https://localhost:3000/callback?code=c"),
            &target
        ));
    }

    /// The headless agent follows the server's redirects to the redirect URI without requesting
    /// it, and says a person is needed when the server shows a page instead.
    #[tokio::test]
    async fn the_headless_agent_follows_redirects_to_the_callback() {
        use axum::response::{IntoResponse, Redirect};
        let app = axum::Router::new()
            .route(
                "/authorize",
                axum::routing::get(|| async { Redirect::to("/approve?x=1") }),
            )
            .route(
                "/approve",
                axum::routing::get(|| async {
                    Redirect::to("http://localhost:3000/callback?code=the-code&state=st")
                }),
            )
            .route(
                "/consent",
                axum::routing::get(|| async { "<html>approve?</html>".into_response() }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });

        let agent = FollowRedirects::new(true);
        let back = agent
            .authorize(
                &format!("http://{addr}/authorize?client_id=c"),
                DEFAULT_REDIRECT_URI,
            )
            .await
            .unwrap();
        assert_eq!(
            back,
            "http://localhost:3000/callback?code=the-code&state=st"
        );

        let e = agent
            .authorize(&format!("http://{addr}/consent"), DEFAULT_REDIRECT_URI)
            .await
            .unwrap_err();
        assert!(
            e.contains("HTTP 200") && e.contains("a person must approve"),
            "{e}"
        );

        // Without allow_private, the loopback authorization server is not contacted.
        let e = FollowRedirects::new(false)
            .authorize(&format!("http://{addr}/authorize"), DEFAULT_REDIRECT_URI)
            .await
            .unwrap_err();
        assert!(!e.is_empty());
    }
}
