//! Per-user connections: sources whose calls carry each principal's own grant (`auth = { type =
//! "oauth2_user", ... }`), obtained with the OAuth 2.0 authorization-code flow and PKCE.
//!
//! 1. A call of such a source by a principal without a grant fails in its handler with
//!    `grant_required`; the engine pauses it with an `input` wait in `url` mode whose link is
//!    [`Connections::link`]: `{public_url}/connect/{connection}?nonce=…`. The browser that opens
//!    it carries no bearer token, so the nonce is the credential: random, stored only as its
//!    SHA-256, single-use, bound to the principal, the connection and the execution, valid 10
//!    minutes.
//! 2. `GET /connect/{connection}?nonce=…` ([`Connections::start`]) binds a fresh `state` and a
//!    PKCE verifier to the request (once) and redirects to the provider's authorization URL,
//!    with the redirect URI `{public_url}/connect/callback` and nothing taken from the request.
//! 3. `GET /connect/callback?code=…&state=…` ([`Connections::finish`]) finds the request by the
//!    state's hash, uses it up (single use, also between replicas), exchanges the code with the
//!    verifier and stores the tokens sealed per (principal, connection). The engine then
//!    answers the paused call's wait, and the call continues as its owner.
//!
//! A token close to expiry is refreshed with the refresh token; a failed refresh deletes the
//! grant, so the next call pauses for a new one. [`Connections::list`] shows a principal its own
//! grants (never the tokens) and [`Connections::revoke`] deletes one; every lookup is by the
//! calling principal.

use std::collections::HashMap;
use std::sync::Arc;

use base64::Engine as _;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::Digest;
use toolshed_core::{TokenSource, ToolError};
use toolshed_outbound::{Method, Outbound, OutboundConfig, TokenExchange, UserOAuth};
use toolshed_sealed::SecretBox;
use toolshed_store::grants::{ConnectRequest, GrantRecord};
use toolshed_store::{now_ms, Store};

/// How long a link in a paused call may be used.
pub const LINK_TTL_MS: i64 = 10 * 60 * 1000;
/// Longest scope list kept with a grant, in bytes (the provider's answer is capped at 1 MiB).
const MAX_SCOPES_BYTES: usize = 2_048;
/// A token this close to expiry is refreshed before use (less for short-lived tokens).
const REFRESH_MARGIN_MS: i64 = 30_000;

/// One connection as configured: the source's credentials, and whether its provider may be on
/// a private address.
#[derive(Debug, Clone)]
pub struct ConnectionSpec {
    pub auth: ConnectionAuth,
    pub allow_private: bool,
}

/// How a connection gets the caller's own token.
#[derive(Debug, Clone)]
pub enum ConnectionAuth {
    /// `oauth2_user`: each principal's grant, made once through `/connect`.
    Grant(UserOAuth),
    /// `token_exchange`: the principal's sign-in token exchanged (RFC 8693) on each new token.
    Exchange(TokenExchange),
}

impl ConnectionAuth {
    fn id(&self) -> &str {
        match self {
            Self::Grant(u) => &u.connection,
            Self::Exchange(x) => &x.connection,
        }
    }

    /// Token endpoint, client id and client secret.
    fn client(&self) -> (&str, &str, Option<&toolshed_outbound::Secret>) {
        match self {
            Self::Grant(u) => (&u.token_url, &u.client_id, u.client_secret.as_ref()),
            Self::Exchange(x) => (&x.token_url, &x.client_id, x.client_secret.as_ref()),
        }
    }
}

/// Why a step of the connect flow failed. Nothing is stored on a failure.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("no connection '{0}' is configured")]
    UnknownConnection(String),
    #[error("this link is unknown or has expired: call the tool again for a new one")]
    UnknownLink,
    #[error("this link was already used: call the tool again for a new one")]
    UsedLink,
    #[error("unknown, used or expired state: start again from the link in the paused call")]
    UnknownState,
    #[error("the provider refused the grant: {0}")]
    Refused(String),
    #[error("the provider's token endpoint failed: {0}")]
    Token(String),
    #[error("storing the grant failed: {0}")]
    Store(#[from] toolshed_store::StoreError),
    #[error("the sealed verifier cannot be read: {0}")]
    Sealed(String),
}

impl ConnectError {
    /// The HTTP status of the failure.
    pub fn status(&self) -> u16 {
        match self {
            Self::UnknownConnection(_) => 404,
            Self::UnknownLink | Self::UnknownState => 400,
            Self::UsedLink => 410,
            Self::Refused(_) => 403,
            Self::Token(_) => 502,
            Self::Store(_) | Self::Sealed(_) => 500,
        }
    }
}

/// A principal's grant as shown to it: never the tokens.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionInfo {
    pub connection: String,
    pub scopes: Vec<String>,
    pub connected_at: i64,
    pub updated_at: i64,
    /// When the current access token expires (ms since the epoch), if the provider said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
}

/// The sealed token document of a grant.
#[derive(Serialize, Deserialize)]
struct Tokens {
    access_token: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    refresh_token: Option<String>,
}

struct Connection {
    auth: ConnectionAuth,
    http: Outbound,
}

/// Most exchanged tokens kept (by connection and the digest of the token they were exchanged
/// for).
const MAX_EXCHANGED: usize = 10_000;
const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";

/// The configured connections, with the store of grants.
pub struct Connections {
    public_url: String,
    /// By connection id; replaced when the sources change.
    by_id: parking_lot::RwLock<HashMap<String, Arc<Connection>>>,
    sealer: Arc<SecretBox>,
    store: Store,
    /// One refresh at a time per (principal, connection).
    refreshing: tokio::sync::Mutex<()>,
    /// Exchanged tokens: (connection, digest of the sign-in token) → (token, expiry ms).
    exchanged: parking_lot::Mutex<HashMap<(String, String), (String, i64)>>,
}

fn random_token() -> String {
    let bytes: [u8; 32] = rand::random();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// Whether two URLs share scheme, host and port.
fn same_origin(a: &str, b: &str) -> bool {
    match (url::Url::parse(a), url::Url::parse(b)) {
        (Ok(a), Ok(b)) => a.origin() == b.origin(),
        _ => false,
    }
}

fn hash(s: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(s.as_bytes()))
}

impl Connections {
    /// `public_url` is where browsers reach this server (`[http] public_url`).
    pub fn new(
        store: Store,
        sealer: Arc<SecretBox>,
        public_url: &str,
        specs: Vec<ConnectionSpec>,
    ) -> Result<Self, String> {
        let this = Self {
            public_url: public_url.trim_end_matches('/').to_string(),
            by_id: parking_lot::RwLock::new(HashMap::new()),
            sealer,
            store,
            refreshing: tokio::sync::Mutex::new(()),
            exchanged: parking_lot::Mutex::new(HashMap::new()),
        };
        this.replace(specs)?;
        Ok(this)
    }

    /// Replaces the connections (the sources changed). Grants stay stored: a connection that
    /// comes back finds its principals' grants.
    pub fn replace(&self, specs: Vec<ConnectionSpec>) -> Result<(), String> {
        let mut by_id = HashMap::new();
        for s in specs {
            let http = Outbound::new(OutboundConfig {
                allow_private: s.allow_private,
                max_response_bytes: 1024 * 1024,
                max_redirects: 0,
                ..OutboundConfig::default()
            })
            .map_err(|e| format!("connection '{}': {e}", s.auth.id()))?;
            let id = s.auth.id().to_string();
            by_id.insert(id, Arc::new(Connection { auth: s.auth, http }));
        }
        *self.by_id.write() = by_id;
        Ok(())
    }

    /// Whether a tool of `origin` (`source:<name>`) calls with a connection's token.
    pub(crate) fn covers(&self, origin: &str) -> bool {
        origin
            .strip_prefix("source:")
            .is_some_and(|name| self.by_id.read().contains_key(name))
    }

    fn get(&self, id: &str) -> Option<Arc<Connection>> {
        self.by_id.read().get(id).cloned()
    }

    /// The redirect URI registered at providers.
    pub fn redirect_uri(&self) -> String {
        format!("{}/connect/callback", self.public_url)
    }

    /// A connection whose principals grant access through `/connect`.
    fn granted(&self, id: &str) -> Result<(Arc<Connection>, UserOAuth), ConnectError> {
        let unknown = || ConnectError::UnknownConnection(crate::audit::truncated(id, 128));
        let c = self.get(id).ok_or_else(unknown)?;
        let oauth = match &c.auth {
            ConnectionAuth::Grant(u) => u.clone(),
            ConnectionAuth::Exchange(_) => return Err(unknown()),
        };
        Ok((c, oauth))
    }

    /// A new link for `principal` to grant access at `connection`, bound to the paused
    /// execution's wait.
    pub(crate) async fn link(
        &self,
        principal: &str,
        connection: &str,
        execution_id: &str,
        wait_id: &str,
    ) -> Result<String, toolshed_store::StoreError> {
        let nonce = random_token();
        self.store
            .put_connect_request(&ConnectRequest {
                nonce_hash: hash(&nonce),
                principal: principal.to_string(),
                connection: connection.to_string(),
                execution_id: execution_id.to_string(),
                wait_id: wait_id.to_string(),
                state_hash: None,
                verifier: None,
                expires_at: now_ms() + LINK_TTL_MS,
                used: false,
            })
            .await?;
        Ok(format!(
            "{}/connect/{connection}?nonce={nonce}",
            self.public_url
        ))
    }

    /// `GET /connect/{connection}?nonce=…`: the provider's authorization URL to redirect to.
    pub async fn start(&self, connection: &str, nonce: &str) -> Result<String, ConnectError> {
        let (_, oauth) = self.granted(connection)?;
        let oauth = &oauth;
        let request = self
            .store
            .connect_request(&hash(nonce))
            .await?
            .filter(|r| r.connection == connection && r.expires_at > now_ms())
            .ok_or(ConnectError::UnknownLink)?;
        if request.used || request.state_hash.is_some() {
            return Err(ConnectError::UsedLink);
        }
        let (state, verifier) = (random_token(), random_token());
        let bound = self
            .store
            .bind_connect_state(
                &request.nonce_hash,
                &hash(&state),
                &self.sealer.seal(&verifier),
            )
            .await?;
        if !bound {
            return Err(ConnectError::UsedLink);
        }
        let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(sha2::Sha256::digest(verifier.as_bytes()));
        let mut url = url::Url::parse(&oauth.authorization_url)
            .map_err(|e| ConnectError::Refused(format!("bad authorization_url: {e}")))?;
        {
            let mut q = url.query_pairs_mut();
            q.append_pair("response_type", "code")
                .append_pair("client_id", &oauth.client_id)
                .append_pair("redirect_uri", &self.redirect_uri())
                .append_pair("state", &state)
                .append_pair("code_challenge", &challenge)
                .append_pair("code_challenge_method", "S256");
            if !oauth.scopes.is_empty() {
                q.append_pair("scope", &oauth.scopes.join(" "));
            }
            if let Some(r) = &oauth.resource {
                q.append_pair("resource", r);
            }
        }
        Ok(url.to_string())
    }

    /// `GET /connect/callback?code=…&state=…`: uses up the request the state belongs to,
    /// exchanges the code and stores the grant. The request is answered for the caller to
    /// resume its execution.
    pub async fn finish(
        &self,
        state: &str,
        code: Option<&str>,
        error: Option<&str>,
        iss: Option<&str>,
    ) -> Result<ConnectRequest, ConnectError> {
        let request = self
            .store
            .connect_request_by_state(&hash(state))
            .await?
            .filter(|r| !r.used && r.expires_at > now_ms())
            .ok_or(ConnectError::UnknownState)?;
        if !self.store.use_connect_request(&request.nonce_hash).await? {
            return Err(ConnectError::UnknownState);
        }
        if let Some(e) = error {
            return Err(ConnectError::Refused(crate::audit::truncated(e, 200)));
        }
        let code = code.ok_or_else(|| ConnectError::Refused("no code in the answer".into()))?;
        let (c, oauth) = self.granted(&request.connection)?;
        let (c, oauth) = (c.as_ref(), &oauth);
        // RFC 9207: an answer that names its issuer must name this connection's provider
        // (the one its authorization URL belongs to), against mix-up attacks.
        if let Some(iss) = iss {
            let base = iss.trim_end_matches('/');
            let ours = oauth.authorization_url == base
                || oauth.authorization_url.starts_with(&format!("{base}/"));
            if base.is_empty() || !ours {
                return Err(ConnectError::Refused(format!(
                    "the answer names issuer '{}', which is not this connection's provider",
                    crate::audit::truncated(iss, 200)
                )));
            }
        }
        let verifier = request
            .verifier
            .as_deref()
            .map(|v| self.sealer.open(v))
            .transpose()
            .map_err(|e| ConnectError::Sealed(e.to_string()))?
            .ok_or(ConnectError::UnknownState)?;
        let redirect_uri = self.redirect_uri();
        let mut form = vec![
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", redirect_uri.as_str()),
            ("code_verifier", verifier.as_str()),
        ];
        if let Some(r) = &oauth.resource {
            form.push(("resource", r));
        }
        let answer = self.token_request(c, &form).await?;
        self.store_grant(&request.principal, oauth, answer, None)
            .await?;
        Ok(request)
    }

    /// POSTs to the connection's token endpoint (client authentication: basic with a secret,
    /// else `client_id` in the form).
    async fn token_request(
        &self,
        c: &Connection,
        form: &[(&str, &str)],
    ) -> Result<Value, ConnectError> {
        let token_error = |e: String| ConnectError::Token(e);
        let (token_url, client_id, client_secret) = c.auth.client();
        let mut req = c
            .http
            .request(Method::POST, token_url)
            .map_err(|e| token_error(e.to_string()))?;
        let mut form: Vec<(&str, &str)> = form.to_vec();
        match client_secret {
            Some(secret) => req = req.basic_auth(client_id, Some(secret.expose())),
            None => form.push(("client_id", client_id)),
        }
        let answer = c
            .http
            .send(req.form(&form))
            .await
            .map_err(|e| token_error(e.to_string()))?;
        let body = answer.value();
        if !answer.is_success() || body.get("access_token").and_then(Value::as_str).is_none() {
            let reason = body
                .get("error_description")
                .or_else(|| body.get("error"))
                .and_then(Value::as_str)
                .map(|s| crate::audit::truncated(s, 200))
                .unwrap_or_else(|| format!("status {}", answer.status.as_u16()));
            return Err(token_error(reason));
        }
        Ok(body)
    }

    /// Seals and stores a token answer; a refresh answer without a refresh token keeps the
    /// one it was refreshed with.
    async fn store_grant(
        &self,
        principal: &str,
        oauth: &UserOAuth,
        answer: Value,
        kept_refresh: Option<String>,
    ) -> Result<String, toolshed_store::StoreError> {
        let text = |k: &str| answer.get(k).and_then(Value::as_str).map(str::to_string);
        let access_token = text("access_token").unwrap_or_default();
        let tokens = Tokens {
            access_token: access_token.clone(),
            refresh_token: text("refresh_token").or(kept_refresh),
        };
        let now = now_ms();
        let created = self
            .store
            .grant(principal, &oauth.connection)
            .await?
            .map_or(now, |g| g.created_at);
        let sealed = self
            .sealer
            .seal(&serde_json::to_string(&tokens).unwrap_or_default());
        self.store
            .put_grant(&GrantRecord {
                principal: principal.to_string(),
                connection: oauth.connection.clone(),
                sealed,
                scopes: crate::audit::truncated(
                    &text("scope").unwrap_or_else(|| oauth.scopes.join(" ")),
                    MAX_SCOPES_BYTES,
                ),
                expires_at: answer
                    .get("expires_in")
                    .and_then(Value::as_i64)
                    .map(|s| now + s * 1000),
                created_at: created,
                updated_at: now,
            })
            .await?;
        Ok(access_token)
    }

    /// The caller's own token at `connection`: `principal`'s grant (refreshed when close to
    /// expiry), or `subject` exchanged.
    pub(crate) async fn token(
        &self,
        principal: &str,
        connection: &str,
        subject: Option<&toolshed_outbound::Secret>,
    ) -> Result<String, ToolError> {
        let c = self.get(connection).ok_or_else(|| {
            ToolError::internal(format!("no connection '{connection}' is configured"))
        })?;
        match &c.auth {
            ConnectionAuth::Grant(oauth) => self.granted_token(principal, &c, oauth).await,
            ConnectionAuth::Exchange(x) => self.exchange(&c, x, principal, subject).await,
        }
    }

    /// An exchanged token for `subject` (cached until shortly before it expires).
    async fn exchange(
        &self,
        c: &Connection,
        x: &TokenExchange,
        principal: &str,
        subject: Option<&toolshed_outbound::Secret>,
    ) -> Result<String, ToolError> {
        let subject = subject.filter(|s| !s.is_empty()).ok_or_else(|| {
            ToolError::unauthorized(format!(
                "'{}' exchanges the caller's own sign-in token (RFC 8693): call it with the OAuth token you signed in with (an API key, or a run resumed later, carries none)",
                x.connection
            ))
        })?;
        // The sign-in token goes only to its own issuer (the `{iss}` of `{iss}#{sub}`).
        let issuer = principal.split_once('#').map_or("", |(iss, _)| iss);
        if !same_origin(issuer, &x.token_url) {
            return Err(ToolError::unauthorized(format!(
                "'{}' would send your sign-in token to {}, which is not its issuer ({issuer}): the token stays with its issuer",
                x.connection,
                crate::audit::truncated(&x.token_url, 200)
            )));
        }
        let key = (x.connection.clone(), hash(subject.expose()));
        let now = now_ms();
        if let Some((token, until)) = self.exchanged.lock().get(&key) {
            if *until > now {
                return Ok(token.clone());
            }
        }
        let scope = x.scopes.join(" ");
        let mut form = vec![
            ("grant_type", TOKEN_EXCHANGE),
            ("subject_token", subject.expose()),
            ("subject_token_type", ACCESS_TOKEN_TYPE),
        ];
        if let Some(a) = &x.audience {
            form.push(("audience", a));
        }
        if let Some(r) = &x.resource {
            form.push(("resource", r));
        }
        if !scope.is_empty() {
            form.push(("scope", &scope));
        }
        let answer = self.token_request(c, &form).await.map_err(|e| {
            ToolError::unauthorized(format!("token exchange for '{}' failed: {e}", x.connection))
        })?;
        let token = answer
            .get("access_token")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let lifetime = answer
            .get("expires_in")
            .and_then(Value::as_i64)
            .unwrap_or(60)
            * 1000;
        let until = now + lifetime - REFRESH_MARGIN_MS.min(lifetime / 5);
        let mut cache = self.exchanged.lock();
        if cache.len() >= MAX_EXCHANGED {
            cache.retain(|_, (_, u)| *u > now);
            if cache.len() >= MAX_EXCHANGED {
                cache.clear();
            }
        }
        cache.insert(key, (token.clone(), until));
        Ok(token)
    }

    /// `principal`'s current access token from its grant, refreshed when close to expiry.
    async fn granted_token(
        &self,
        principal: &str,
        c: &Connection,
        oauth: &UserOAuth,
    ) -> Result<String, ToolError> {
        let connection = oauth.connection.as_str();
        let store_error = |e: toolshed_store::StoreError| ToolError::internal(e.to_string());
        // Refreshed a little before expiry: 30 s, or a fifth of a short-lived token's life.
        let fresh = |g: &GrantRecord| {
            g.expires_at.is_none_or(|at| {
                let margin = REFRESH_MARGIN_MS.min((at - g.updated_at).max(0) / 5);
                at - margin > now_ms()
            })
        };
        let Some(grant) = self
            .store
            .grant(principal, connection)
            .await
            .map_err(store_error)?
        else {
            return Err(ToolError::grant_required(connection));
        };
        let tokens = self.open(&grant);
        if fresh(&grant) {
            if let Some(t) = tokens {
                return Ok(t.access_token);
            }
        }
        let _one = self.refreshing.lock().await;
        // Refreshed by another call meanwhile?
        if let Some(g) = self
            .store
            .grant(principal, connection)
            .await
            .map_err(store_error)?
        {
            if g.updated_at > grant.updated_at && fresh(&g) {
                if let Some(t) = self.open(&g) {
                    return Ok(t.access_token);
                }
            }
        }
        let refresh = tokens.and_then(|t| t.refresh_token);
        let refreshed = match &refresh {
            Some(r) => {
                let mut form = vec![
                    ("grant_type", "refresh_token"),
                    ("refresh_token", r.as_str()),
                ];
                if let Some(res) = &oauth.resource {
                    form.push(("resource", res));
                }
                self.token_request(c, &form).await.ok()
            }
            None => None,
        };
        match refreshed {
            Some(answer) => self
                .store_grant(principal, oauth, answer, refresh)
                .await
                .map_err(store_error),
            None => {
                // Expired and not refreshable: the grant is gone; the call pauses for a new one.
                tracing::info!(
                    connection,
                    "a grant could not be refreshed; a new one is needed"
                );
                self.store
                    .delete_grant(principal, connection)
                    .await
                    .map_err(store_error)?;
                Err(ToolError::grant_required(connection))
            }
        }
    }

    fn open(&self, g: &GrantRecord) -> Option<Tokens> {
        let text = self.sealer.open(&g.sealed).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// `principal`'s grants (never the tokens).
    pub async fn list(
        &self,
        principal: &str,
    ) -> Result<Vec<ConnectionInfo>, toolshed_store::StoreError> {
        Ok(self
            .store
            .grants(principal)
            .await?
            .into_iter()
            .map(|g| ConnectionInfo {
                connection: g.connection,
                scopes: g.scopes.split_whitespace().map(str::to_string).collect(),
                connected_at: g.created_at,
                updated_at: g.updated_at,
                expires_at: g.expires_at,
            })
            .collect())
    }

    /// Deletes `principal`'s grant at `connection`; whether there was one.
    pub async fn revoke(
        &self,
        principal: &str,
        connection: &str,
    ) -> Result<bool, toolshed_store::StoreError> {
        self.store.delete_grant(principal, connection).await
    }
}

/// The credentials one call's handler gets: the plugin providers of its origin, and the
/// calling principal's own grants.
pub(crate) struct CallTokens {
    pub plugin: Option<Arc<dyn TokenSource>>,
    pub connections: Arc<Connections>,
    pub principal: Arc<str>,
    /// The caller's sign-in token, for token-exchange connections.
    pub subject: Option<toolshed_outbound::Secret>,
}

#[async_trait::async_trait]
impl TokenSource for CallTokens {
    async fn token(&self, provider: &str) -> Result<String, ToolError> {
        match &self.plugin {
            Some(p) => p.token(provider).await,
            None => Err(ToolError::unauthorized(format!(
                "no credentials are configured for auth provider '{provider}'"
            ))),
        }
    }

    async fn user_token(&self, connection: &str) -> Result<String, ToolError> {
        self.connections
            .token(&self.principal, connection, self.subject.as_ref())
            .await
    }
}

impl crate::Engine {
    /// A link for `principal` to grant access at `connection`, bound to a wait of an execution
    /// (`wait_id` empty when nothing waits: the call failed instead). No link is made for a
    /// connection that is not configured (its source is being added or removed): it could
    /// never be opened.
    pub(crate) async fn grant_link(
        &self,
        principal: &str,
        connection: &str,
        execution_id: &str,
        wait_id: &str,
    ) -> Result<String, crate::EngineError> {
        let connections =
            self.inner
                .connections
                .as_ref()
                .ok_or_else(|| crate::EngineError::Tool {
                    path: connection.to_string(),
                    error: Box::new(ToolError::grant_required(connection)),
                })?;
        if connections.get(connection).is_none() {
            return Err(crate::EngineError::Tool {
                path: connection.to_string(),
                error: Box::new(ToolError::not_found(
                    ConnectError::UnknownConnection(crate::audit::truncated(connection, 128))
                        .to_string(),
                )),
            });
        }
        Ok(connections
            .link(principal, connection, execution_id, wait_id)
            .await?)
    }

    /// The `input` wait a call pauses on until `principal` grants access at `connection`.
    pub(crate) async fn grant_wait(
        &self,
        principal: &str,
        connection: &str,
        execution_id: &str,
        seq: u64,
    ) -> Result<crate::executions::Wait, crate::EngineError> {
        use crate::executions::{InputMode, Wait};
        let wait_id = format!("input_{seq}");
        let link = self
            .grant_link(principal, connection, execution_id, &wait_id)
            .await?;
        let message = format!(
            "Connect your account at '{connection}': open the link and grant access; the call then continues."
        );
        Ok(Wait::input(seq, InputMode::Url, message, None, Some(link)))
    }

    /// The error of a call that needs a grant where it cannot pause (a call made by another
    /// tool, or a repeated call in a script): it carries a link to grant access.
    pub(crate) async fn grant_error(
        &self,
        principal: &str,
        connection: &str,
        path: &str,
        execution_id: &str,
    ) -> crate::EngineError {
        let mut error = ToolError::grant_required(connection);
        if let Ok(link) = self
            .grant_link(principal, connection, execution_id, "")
            .await
        {
            error.message = format!(
                "connect your account at '{connection}' first: open {link} and grant access, then call again"
            );
            error.data = Some(serde_json::json!({"connection": connection, "url": link}));
        }
        crate::EngineError::Tool {
            path: path.to_string(),
            error: Box::new(error),
        }
    }

    /// `GET /connect/callback`: completes a grant and continues the call that waited for it, as
    /// its owner. The answer is the execution's outcome (or `None` when nothing waited).
    pub async fn complete_grant(
        &self,
        state: &str,
        code: Option<&str>,
        error: Option<&str>,
        iss: Option<&str>,
    ) -> Result<Option<Result<crate::Outcome, crate::EngineError>>, ConnectError> {
        let connections = self
            .inner
            .connections
            .as_ref()
            .ok_or(ConnectError::UnknownState)?;
        let request = connections.finish(state, code, error, iss).await?;
        if request.wait_id.is_empty() {
            return Ok(None);
        }
        let owner = self.owner(&request.principal, crate::Face::Http).await;
        Ok(Some(
            self.answer(
                &owner,
                &request.execution_id,
                &request.wait_id,
                crate::executions::AnswerAction::Accept,
                None,
                crate::DecisionChannel::Human(crate::Face::Http),
            )
            .await,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_compare_scheme_host_and_port() {
        assert!(same_origin(
            "http://127.0.0.1:5",
            "http://127.0.0.1:5/token"
        ));
        assert!(!same_origin(
            "http://127.0.0.1:5",
            "http://127.0.0.1:6/token"
        ));
        assert!(!same_origin(
            "https://id.example",
            "https://evil.example/token"
        ));
        assert!(!same_origin("", "https://id.example/token"));
    }

    #[test]
    fn tokens_are_random_and_hashes_stable() {
        let (a, b) = (random_token(), random_token());
        assert_ne!(a, b);
        assert!(a.len() >= 43, "PKCE needs at least 43 characters: {a}");
        assert_eq!(hash(&a), hash(&a));
        assert_ne!(hash(&a), a);
    }
}
