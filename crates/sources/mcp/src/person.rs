//! The authorization-code grant completed by a person: for upstreams whose authorization server
//! shows its sign-in and consent pages to someone (the usual case), with the person's browser
//! sent back to Toolshed's callback.
//!
//! 1. An upstream configured with `grant = "authorization_code"` (without `headless`) answers
//!    `401`. The [`Authorizer`](crate::oauth) discovers the authorization server, registers or
//!    names its client and starts an authorization with PKCE whose redirect URI is Toolshed's
//!    callback ([`PersonGrants::callback_url`]). It parks that authorization here
//!    ([`PersonGrants::park`]), keyed by its `state`, and the connection fails at once with
//!    [`waiting`]'s text. That text names no link, since it may reach whoever called a tool of
//!    the upstream (a step-up): the link goes only to the log, to the source's report, which
//!    `toolshed serve` prints ([`PersonGrants::waiting_at`]), and to the listing of pending
//!    authorizations that those who decide the source's calls read over HTTP
//!    ([`SourceAuthorizations::pending`]). While the authorization is
//!    pending ([`LINK_TTL`]), every new attempt waits for the same link instead of starting
//!    another; when it expires, the owner is told ([`PersonGrants::on_change`]) and the next
//!    attempt makes a new one.
//! 2. The person opens the link, signs in and consents; the authorization server redirects the
//!    browser to the callback.
//! 3. The callback ([`PersonGrants::finish`]) finds the parked authorization by its `state`
//!    (single use), exchanges the code with the PKCE verifier, keeps the token for the upstream
//!    and tells the owner ([`PersonGrants::on_change`]: the registry loads the source again).
//!    That attempt takes the token and the client that got it ([`PersonGrants::take`]), which
//!    also refreshes it later.
//!
//! A call of a loaded upstream that needs a person first (a step-up to a wider scope, or a token
//! that can no longer be renewed) fails with an action for its caller
//! ([`PersonGrants::waiting_action`]: `ActionRequired`, whose link is Toolshed's listing of
//! waiting authorizations, never the authorization link): where the call may pause, the engine
//! pauses it with an `input` wait, and once answered it runs again with the approved token.
//!
//! The tokens a person's authorization got are kept in a [`TokenVault`] when the server gives
//! one ([`PersonGrants::keep_tokens_in`]; `toolshed serve` keeps them in its store, sealed with
//! its key): after a restart the upstream connects with them (refreshed when they expired)
//! instead of asking the person again. A kept token is bound to the upstream's URL and to the
//! OAuth settings that decide it (grant, client, pinned issuer, scopes), and is used only with
//! the authorization server that issued it: a source pointed elsewhere never sends it
//! ([`VaultCredentials`]).
//! Processes sharing the vault renew it one at a time, under the vault's lock
//! ([`TokenVault::lock`]), each reading the newest kept token first.
//!
//! Anyone who opens the link authorizes Toolshed with their own account at the upstream, so the
//! link goes only to those who run the server (its log and its source reports) and those who
//! decide the source's calls, never into a tool's error. The callback does not tie the state to the browser that opened the link. The
//! parked authorizations live in this process: with several replicas the callback must reach
//! the replica that made the link.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use oauth2::TokenResponse;
use rmcp::transport::auth::{
    AuthError, AuthorizationCallback, AuthorizationManager, CredentialRefreshGuard,
    CredentialStore, StoredCredentials,
};
use toolshed_core::{AuthorizationError, PendingAuthorization, SourceAuthorizations};
use toolshed_outbound::secret::redact;

use crate::oauth::query_param;

/// How long a parked authorization waits for its person.
pub const LINK_TTL: Duration = Duration::from_secs(60 * 60);
/// Most authorizations parked at once (the oldest is dropped past it).
const MAX_PARKED: usize = 64;
/// Longest authorization link parked (it is logged, reported and listed).
const MAX_LINK: usize = 4096;
/// Longest error text an authorization server's refusal is quoted with.
const MAX_QUOTED: usize = 300;

/// The text a connection (or a call) fails with while `upstream` waits for a person. It names
/// no link: a tool's caller may read it.
pub fn waiting(upstream: &str) -> String {
    format!(
        "upstream '{upstream}' needs a person to authorize Toolshed at its authorization server: whoever runs Toolshed finds the link in its log and in the source's report; Toolshed connects the upstream once it was approved"
    )
}

/// An authorization that waits for its person.
struct Parked {
    upstream: String,
    url: String,
    since: Instant,
    /// `since` in Unix milliseconds, for listings.
    since_ms: i64,
    manager: AuthorizationManager,
    /// The scopes asked for.
    asked: Vec<String>,
    /// Configured secrets, blanked out of errors.
    secrets: Vec<String>,
}

/// A token a person's authorization got, until the upstream's next attempt takes it.
pub(crate) struct Granted {
    /// The client that got the token (it refreshes it).
    pub manager: AuthorizationManager,
    pub token: String,
    /// The scopes asked for and granted.
    pub held: Vec<String>,
}

type OnChange = Arc<dyn Fn(&str) + Send + Sync>;

#[derive(Default)]
struct Inner {
    /// By `state`.
    parked: HashMap<String, Parked>,
    /// By upstream.
    granted: HashMap<String, Granted>,
}

/// The authorizations that wait for a person, and the tokens they got (see the module docs).
pub struct PersonGrants {
    callback: String,
    /// Where those who decide a source's calls find its waiting link (Toolshed's listing).
    listing: Option<String>,
    inner: Mutex<Inner>,
    on_change: Mutex<Option<OnChange>>,
    vault: Mutex<Option<Arc<dyn TokenVault>>>,
    writers: Arc<Writers>,
}

/// Which credential store of each upstream may write to the vault: the one that got the newest
/// token (see [`VaultCredentials`]'s `save`).
#[derive(Default)]
struct Writers {
    next: std::sync::atomic::AtomicU64,
    current: Mutex<HashMap<String, u64>>,
}

impl PartialEq for PersonGrants {
    /// One set of grants is equal only to itself.
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

impl Eq for PersonGrants {}

impl std::fmt::Debug for PersonGrants {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PersonGrants")
            .field("callback", &self.callback)
            .finish_non_exhaustive()
    }
}

impl PersonGrants {
    /// Grants whose person comes back to `callback_url` (Toolshed's callback route).
    pub fn new(callback_url: impl Into<String>) -> Arc<Self> {
        Self::with_listing(callback_url, None)
    }

    /// [`PersonGrants::new`], with the URL of Toolshed's listing of waiting authorizations: a
    /// call that waits for a person then asks its caller to have them act there
    /// ([`PersonGrants::waiting_action`]).
    pub fn with_listing(callback_url: impl Into<String>, listing: Option<String>) -> Arc<Self> {
        Arc::new(Self {
            callback: callback_url.into(),
            listing,
            inner: Mutex::default(),
            on_change: Mutex::default(),
            vault: Mutex::default(),
            writers: Arc::default(),
        })
    }

    /// Keeps the tokens persons' authorizations get in `vault`, so that they outlive the
    /// process (see the module docs).
    pub fn keep_tokens_in(&self, vault: Arc<dyn TokenVault>) {
        *self.vault.lock().unwrap_or_else(|p| p.into_inner()) = Some(vault);
    }

    /// rmcp's credential store for `upstream`, kept in the vault and bound to `binding` (what
    /// the token is for: [`crate::oauth`] names the URL and the OAuth settings that matter);
    /// `None` without a vault. A `fresh` store starts empty (a new authorization) instead of
    /// reading what is kept.
    pub(crate) fn credentials(
        &self,
        upstream: &str,
        binding: String,
        fresh: bool,
    ) -> Option<VaultCredentials> {
        let vault = self
            .vault
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()?;
        Some(VaultCredentials {
            vault,
            upstream: upstream.to_string(),
            binding,
            cached: tokio::sync::RwLock::new(fresh.then_some(None)),
            id: self
                .writers
                .next
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            unsaved_fresh: std::sync::atomic::AtomicBool::new(fresh),
            writers: self.writers.clone(),
        })
    }

    /// The redirect URI sent to authorization servers.
    pub fn callback_url(&self) -> &str {
        &self.callback
    }

    /// Runs `f` with the upstream's name each time a person's authorization got a token, and
    /// each time one expired unused (the next attempt makes a new link).
    pub fn on_change(&self, f: impl Fn(&str) + Send + Sync + 'static) {
        *self.on_change.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(f));
    }

    fn changed(&self, upstream: &str) {
        let hook = self
            .on_change
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if let Some(hook) = hook {
            hook(upstream);
        }
    }

    fn inner(&self) -> MutexGuard<'_, Inner> {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.parked.retain(|_, p| p.since.elapsed() < LINK_TTL);
        inner
    }

    /// What a call of `upstream` that failed because a person must authorize Toolshed first
    /// asks of its caller: the listing's URL (never the authorization link) and what to do
    /// there. `None` unless such an authorization waits and a listing is known.
    pub fn waiting_action(&self, upstream: &str) -> Option<(String, String)> {
        let listing = self.listing.clone()?;
        self.waiting_at(upstream)?;
        let message = format!(
            "upstream '{upstream}' needs a person to authorize Toolshed at its authorization server: someone whose roles decide the calls of '{upstream}' finds the link at {listing}; once they approved, answer this and the call runs again"
        );
        Some((listing, message))
    }

    /// The link of `upstream`'s authorization that is still waiting, if any (for the log and
    /// the source's report, never for a tool's caller).
    pub fn waiting_at(&self, upstream: &str) -> Option<String> {
        self.inner()
            .parked
            .values()
            .find(|p| p.upstream == upstream)
            .map(|p| p.url.clone())
    }

    /// Parks `upstream`'s authorization at `url` (whose `state` keys it), made by `manager`
    /// with the scopes `asked`. An older one of the same upstream is dropped.
    pub(crate) fn park(
        self: &Arc<Self>,
        upstream: &str,
        url: &str,
        manager: AuthorizationManager,
        asked: Vec<String>,
        secrets: Vec<String>,
    ) -> Result<(), String> {
        if url.len() > MAX_LINK {
            return Err(format!(
                "the authorization URL is {} bytes long, more than the {MAX_LINK} shown",
                url.len()
            ));
        }
        let state = query_param(url, "state").ok_or("the authorization URL carries no state")?;
        let mut inner = self.inner();
        inner.parked.retain(|_, p| p.upstream != upstream);
        if inner.parked.len() >= MAX_PARKED {
            let oldest = inner
                .parked
                .iter()
                .min_by_key(|(_, p)| p.since)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                inner.parked.remove(&k);
            }
        }
        // Told when it expires unused, so that the next attempt makes a new link.
        let (grants, key, name) = (Arc::downgrade(self), state.clone(), upstream.to_string());
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                tokio::time::sleep(LINK_TTL).await;
                let Some(grants) = grants.upgrade() else {
                    return;
                };
                let expired = grants
                    .inner
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .parked
                    .remove(&key)
                    .is_some();
                if expired {
                    tracing::warn!(upstream = %name, "the link to authorize the upstream expired unused; a new one is made");
                    grants.changed(&name);
                }
            });
        }
        inner.parked.insert(
            state,
            Parked {
                upstream: upstream.to_string(),
                url: url.to_string(),
                since: Instant::now(),
                since_ms: std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
                manager,
                asked,
                secrets,
            },
        );
        Ok(())
    }

    /// The token a person's authorization got for `upstream`, once.
    pub(crate) fn take(&self, upstream: &str) -> Option<Granted> {
        self.inner().granted.remove(upstream)
    }

    /// Completes the authorization `callback_url` answers (see the module docs); the upstream's
    /// name.
    pub async fn complete(&self, callback_url: &str) -> Result<String, PersonGrantError> {
        reqwest::Url::parse(callback_url)
            .map_err(|e| PersonGrantError::BadCallback(e.to_string()))?;
        let param = |name: &str| query_param(callback_url, name);
        let state = param("state").ok_or(PersonGrantError::UnknownState)?;
        let parked = self
            .inner()
            .parked
            .remove(&state)
            .ok_or(PersonGrantError::UnknownState)?;
        let clean = |text: &str| {
            let refs: Vec<&str> = parked.secrets.iter().map(String::as_str).collect();
            let text = redact(text, &refs);
            text.chars().take(MAX_QUOTED).collect::<String>()
        };
        if let Some(error) = param("error") {
            let detail = param("error_description")
                .map(|d| format!(": {d}"))
                .unwrap_or_default();
            return Err(PersonGrantError::Refused {
                upstream: parked.upstream,
                reason: clean(&format!("{error}{detail}")),
            });
        }
        let callback = AuthorizationCallback::from_redirect_url(callback_url)
            .map_err(|e| PersonGrantError::BadCallback(clean(&e.to_string())))?;
        let token = parked
            .manager
            .exchange_code_for_token_with_issuer(
                &callback.code,
                &callback.csrf_token,
                callback.issuer.as_deref(),
            )
            .await
            .map_err(|e| PersonGrantError::Exchange {
                upstream: parked.upstream.clone(),
                reason: clean(&e.to_string()),
            })?;
        let granted = parked.manager.get_current_scopes().await;
        let mut held = parked.asked.clone();
        for s in granted {
            if !held.contains(&s) {
                held.push(s);
            }
        }
        let upstream = parked.upstream.clone();
        self.inner().granted.insert(
            upstream.clone(),
            Granted {
                manager: parked.manager,
                token: token.access_token().secret().to_string(),
                held,
            },
        );
        tracing::info!(upstream = %upstream, "a person authorized Toolshed at the upstream's authorization server");
        self.changed(&upstream);
        Ok(upstream)
    }
}

#[async_trait::async_trait]
impl SourceAuthorizations for PersonGrants {
    fn pending(&self) -> Vec<PendingAuthorization> {
        let ttl = i64::try_from(LINK_TTL.as_millis()).unwrap_or(i64::MAX);
        let mut out: Vec<_> = self
            .inner()
            .parked
            .values()
            .map(|p| PendingAuthorization {
                source: p.upstream.clone(),
                url: p.url.clone(),
                since_ms: p.since_ms,
                expires_at_ms: p.since_ms.saturating_add(ttl),
            })
            .collect();
        out.sort_by(|a, b| a.source.cmp(&b.source));
        out
    }

    async fn finish(&self, query: &str) -> Result<String, AuthorizationError> {
        self.complete(&format!("{}?{query}", self.callback))
            .await
            .map_err(|e| AuthorizationError {
                status: e.status(),
                message: e.to_string(),
            })
    }
}

/// Where the tokens of persons' authorizations outlive the process. Keys are upstream (source)
/// names; documents are JSON holding a refresh token, so an implementation seals them at rest
/// and bounds their size. Its errors name no secret.
#[async_trait::async_trait]
pub trait TokenVault: Send + Sync {
    /// The document kept for `upstream`, if any.
    async fn load(&self, upstream: &str) -> Result<Option<String>, String>;
    /// Keeps `document` for `upstream`: replacing what was there, or with `create` false only
    /// if something is there (a renewed token must not bring back what was forgotten, such as
    /// the token of a source removed meanwhile).
    async fn save(&self, upstream: &str, document: &str, create: bool) -> Result<(), String>;
    /// Forgets what is kept for `upstream`.
    async fn clear(&self, upstream: &str) -> Result<(), String>;
    /// Waits for the lock that processes sharing this vault take around a renewal of
    /// `upstream`'s token (released when the answer is dropped); `None` when the vault has
    /// only one process.
    async fn lock(&self, _upstream: &str) -> Result<Option<Box<dyn Send>>, String> {
        Ok(None)
    }
}

/// Longest wait for the renewal lock; past it the token is renewed without.
const LOCK_WAIT: Duration = Duration::from_secs(30);

/// What the vault keeps for one upstream: rmcp's credentials and what they are for.
#[derive(serde::Serialize, serde::Deserialize)]
struct Kept {
    binding: String,
    credentials: StoredCredentials,
}

/// rmcp's credential store for one upstream, kept in a [`TokenVault`]: written through, read
/// once. What was kept under another binding (the source points elsewhere now, or its OAuth
/// settings changed) is never used. Of the stores of one upstream in this process, only the one
/// that got the newest token writes: a fresh store takes over with its first save (the person's
/// code exchanged), so a store still renewing the older token meanwhile (during a step-up) does
/// not overwrite the approval.
pub(crate) struct VaultCredentials {
    vault: Arc<dyn TokenVault>,
    upstream: String,
    binding: String,
    /// `None` until read.
    cached: tokio::sync::RwLock<Option<Option<StoredCredentials>>>,
    id: u64,
    /// A fresh store that has not saved yet: its first save is a person's new token.
    unsaved_fresh: std::sync::atomic::AtomicBool,
    writers: Arc<Writers>,
}

impl VaultCredentials {
    /// What the vault keeps for this upstream, if it was kept under this binding.
    async fn read(&self) -> Result<Option<StoredCredentials>, AuthError> {
        let Some(text) = self.vault.load(&self.upstream).await.map_err(|e| {
            AuthError::CredentialStoreError(format!(
                "reading the kept token of upstream '{}': {e}",
                self.upstream
            ))
        })?
        else {
            return Ok(None);
        };
        let kept: Kept = match serde_json::from_str(&text) {
            Ok(k) => k,
            Err(e) => {
                // The error's position only: its text may quote a value.
                tracing::warn!(upstream = %self.upstream, line = e.line(), column = e.column(), "the kept token is unreadable; a person authorizes again");
                return Ok(None);
            }
        };
        if kept.binding != self.binding {
            tracing::info!(upstream = %self.upstream, "the kept token is for another URL or other OAuth settings; not used");
            return Ok(None);
        }
        Ok(Some(kept.credentials))
    }

    /// Whether this store writes for its upstream now (or none does yet).
    fn is_writer(&self) -> bool {
        let current = self
            .writers
            .current
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        current.get(&self.upstream).is_none_or(|id| *id == self.id)
    }

    /// Whether this store may write now, taking over from the others of its upstream with a
    /// fresh store's first save.
    fn may_write(&self) -> (bool, bool) {
        let first = self
            .unsaved_fresh
            .swap(false, std::sync::atomic::Ordering::SeqCst);
        let mut current = self
            .writers
            .current
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        match current.get(&self.upstream) {
            Some(id) if *id != self.id && !first => (false, false),
            _ => {
                current.insert(self.upstream.clone(), self.id);
                (true, first)
            }
        }
    }
}

#[async_trait::async_trait]
impl CredentialStore for VaultCredentials {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        if let Some(c) = self.cached.read().await.as_ref() {
            return Ok(c.clone());
        }
        let mut cached = self.cached.write().await;
        if let Some(c) = cached.as_ref() {
            return Ok(c.clone());
        }
        let read = self.read().await?;
        *cached = Some(read.clone());
        Ok(read)
    }

    /// Kept in memory whatever happens; a vault that fails is logged, not fatal (the token then
    /// lasts until a restart, as without a vault).
    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let kept = Kept {
            binding: self.binding.clone(),
            credentials,
        };
        let text = serde_json::to_string(&kept);
        *self.cached.write().await = Some(Some(kept.credentials));
        let (write, create) = self.may_write();
        if !write {
            tracing::debug!(upstream = %self.upstream, "a newer token was approved; this renewal is not kept");
            return Ok(());
        }
        let outcome = match text {
            Ok(text) => self.vault.save(&self.upstream, &text, create).await,
            Err(e) => Err(e.to_string()),
        };
        if let Err(e) = outcome {
            tracing::warn!(upstream = %self.upstream, error = %e, "the token could not be kept; after a restart a person authorizes again");
        }
        Ok(())
    }

    /// Processes sharing the vault renew one at a time: under the vault's lock, the writing
    /// store reads what is kept again, so that it renews the newest token (another process
    /// may have renewed it, and a refresh token that rotates is good once).
    async fn acquire_refresh_guard(&self) -> Result<Option<CredentialRefreshGuard>, AuthError> {
        let lock = match tokio::time::timeout(LOCK_WAIT, self.vault.lock(&self.upstream)).await {
            Ok(Ok(Some(lock))) => lock,
            Ok(Ok(None)) => return Ok(None),
            Ok(Err(e)) => {
                tracing::warn!(upstream = %self.upstream, error = %e, "renewing the token without the vault's lock");
                return Ok(None);
            }
            Err(_) => {
                tracing::warn!(upstream = %self.upstream, "the vault's lock was not had within {LOCK_WAIT:?}; renewing the token without it");
                return Ok(None);
            }
        };
        if self.is_writer() {
            match self.read().await {
                Ok(Some(kept)) => *self.cached.write().await = Some(Some(kept)),
                // Nothing readable kept (a write failed before): this copy stays.
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(upstream = %self.upstream, error = %e, "renewing this process's copy of the token");
                }
            }
        }
        Ok(Some(CredentialRefreshGuard::new(lock)))
    }

    async fn clear(&self) -> Result<(), AuthError> {
        *self.cached.write().await = Some(None);
        if !self.may_write().0 {
            return Ok(());
        }
        if let Err(e) = self.vault.clear(&self.upstream).await {
            tracing::warn!(upstream = %self.upstream, error = %e, "the kept token could not be forgotten");
        }
        Ok(())
    }
}

/// Why a callback did not complete an authorization. No variant carries a secret.
#[derive(Debug, thiserror::Error)]
pub enum PersonGrantError {
    #[error("unknown, used or expired state: open the link in the source's report again (a new one is made after {} minutes)", LINK_TTL.as_secs() / 60)]
    UnknownState,
    #[error("the callback is malformed: {0}")]
    BadCallback(String),
    #[error("the authorization server refused to authorize Toolshed for upstream '{upstream}': {reason}")]
    Refused { upstream: String, reason: String },
    #[error("exchanging the code for a token failed for upstream '{upstream}': {reason}")]
    Exchange { upstream: String, reason: String },
}

impl PersonGrantError {
    /// The HTTP status of the failure.
    pub fn status(&self) -> u16 {
        match self {
            Self::UnknownState | Self::BadCallback(_) => 400,
            Self::Refused { .. } => 403,
            Self::Exchange { .. } => 502,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_keys_an_authorization() {
        assert_eq!(
            query_param(
                "https://as.example/authorize?client_id=c&state=abc%2B1&scope=x",
                "state"
            )
            .as_deref(),
            Some("abc+1")
        );
        assert_eq!(
            query_param("https://as.example/authorize?client_id=c", "state"),
            None
        );
        assert!(
            !waiting("tracker").contains("http"),
            "no link for a tool's caller"
        );
    }

    #[derive(Default)]
    struct Memory(Mutex<HashMap<String, String>>);

    #[async_trait::async_trait]
    impl TokenVault for Memory {
        async fn load(&self, upstream: &str) -> Result<Option<String>, String> {
            Ok(self.0.lock().unwrap().get(upstream).cloned())
        }
        async fn save(&self, upstream: &str, document: &str, create: bool) -> Result<(), String> {
            let mut kept = self.0.lock().unwrap();
            if create || kept.contains_key(upstream) {
                kept.insert(upstream.into(), document.into());
            }
            Ok(())
        }
        async fn clear(&self, upstream: &str) -> Result<(), String> {
            self.0.lock().unwrap().remove(upstream);
            Ok(())
        }
        async fn lock(&self, _upstream: &str) -> Result<Option<Box<dyn Send>>, String> {
            Ok(Some(Box::new(())))
        }
    }

    #[tokio::test]
    async fn under_the_renewal_lock_the_newest_kept_token_is_read() {
        let vault = Arc::new(Memory::default());
        let (one, two) = (
            PersonGrants::new("http://a/cb"),
            PersonGrants::new("http://b/cb"),
        );
        one.keep_tokens_in(vault.clone());
        two.keep_tokens_in(vault.clone());
        let first = one.credentials("up", "b".into(), true).unwrap();
        first.save(credentials("approved")).await.unwrap();
        // Another replica connected with what was kept then ...
        let other = two.credentials("up", "b".into(), false).unwrap();
        assert_eq!(other.load().await.unwrap().unwrap().client_id, "approved");
        // ... the first renews it ...
        first.save(credentials("renewed")).await.unwrap();
        assert_eq!(other.load().await.unwrap().unwrap().client_id, "approved");
        // ... and the other, about to renew, reads the newest under the lock.
        let guard = other.acquire_refresh_guard().await.unwrap();
        assert!(guard.is_some());
        assert_eq!(other.load().await.unwrap().unwrap().client_id, "renewed");
    }

    fn credentials(client: &str) -> StoredCredentials {
        StoredCredentials::new(client.into(), None, vec![], None)
    }

    async fn kept_client(vault: &Memory) -> Option<String> {
        let text = vault.load("up").await.unwrap()?;
        let kept: Kept = serde_json::from_str(&text).unwrap();
        Some(kept.credentials.client_id)
    }

    #[tokio::test]
    async fn only_the_store_with_the_newest_approval_writes() {
        let grants = PersonGrants::new("http://127.0.0.1:1/cb");
        let vault = Arc::new(Memory::default());
        grants.keep_tokens_in(vault.clone());
        let first = grants.credentials("up", "b".into(), true).unwrap();
        first.save(credentials("one")).await.unwrap();
        assert_eq!(kept_client(&vault).await.as_deref(), Some("one"));
        // A step-up: a new authorization's store takes over with the person's token ...
        let second = grants.credentials("up", "b".into(), true).unwrap();
        second.save(credentials("two")).await.unwrap();
        // ... and the older one, still renewing its token meanwhile, no longer writes.
        first.save(credentials("one, renewed")).await.unwrap();
        assert_eq!(kept_client(&vault).await.as_deref(), Some("two"));
        assert_eq!(
            first.load().await.unwrap().unwrap().client_id,
            "one, renewed",
            "it keeps its own copy"
        );
        second.save(credentials("two, renewed")).await.unwrap();
        assert_eq!(kept_client(&vault).await.as_deref(), Some("two, renewed"));
        // Another process reads it under the same binding only.
        let restarted = PersonGrants::new("http://127.0.0.1:1/cb");
        restarted.keep_tokens_in(vault.clone());
        let same = restarted.credentials("up", "b".into(), false).unwrap();
        assert_eq!(
            same.load().await.unwrap().unwrap().client_id,
            "two, renewed"
        );
        let other = restarted.credentials("up", "c".into(), false).unwrap();
        assert!(other.load().await.unwrap().is_none());
        // A renewal never brings back what was forgotten.
        vault.clear("up").await.unwrap();
        same.save(credentials("three")).await.unwrap();
        assert_eq!(kept_client(&vault).await, None);
    }

    #[tokio::test]
    async fn callbacks_without_a_parked_authorization_are_refused() {
        let grants = PersonGrants::new("http://127.0.0.1:1/connect/upstreams/callback");
        let e = grants
            .complete("http://127.0.0.1:1/connect/upstreams/callback?code=c&state=nope")
            .await
            .unwrap_err();
        assert!(matches!(e, PersonGrantError::UnknownState));
        assert_eq!(e.status(), 400);
        let e = grants.complete("not a url").await.unwrap_err();
        assert!(matches!(e, PersonGrantError::BadCallback(_)));
        assert!(grants.pending().is_empty());
    }
}
