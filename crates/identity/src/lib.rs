//! Who is calling a network face: an API key, or an OAuth 2.1 bearer token.
//!
//! - [`keys`]: [`KeyRing`], API keys → principals (digests only, constant-time comparison).
//! - [`config`]: `[oauth]`, this server as a protected resource and the issuers it trusts.
//! - `issuer`: one trusted issuer's metadata and signing keys (cached, refreshed on an unknown
//!   key id at most every 30 s) and its introspection endpoint.
//! - `token`: JWT checks (signature against the issuer's published keys, `iss`, `aud` = this
//!   server's resource, `exp`/`nbf` with leeway, `sub`), introspection answers, and the
//!   principal (`{iss}#{sub}`, so two issuers never collide), roles (`roles_claim` values
//!   through `role_map`, else `default_roles`) and scopes of verified claims.
//!
//! [`Authenticator`] puts them together for the faces: [`Authenticator::authenticate`] reads
//! the request's headers and answers [`Who`] is calling or an [`AuthError`], whose
//! [`AuthError::status`] and [`Authenticator::challenge`] make the RFC 6750 / RFC 9728 answer
//! (`401` with `WWW-Authenticate: Bearer resource_metadata="…"`, `403` with an
//! `insufficient_scope` challenge naming the scopes). [`Authenticator::resource_metadata`] is
//! the document served at `/.well-known/oauth-protected-resource`.
//!
//! A token is never logged, stored or echoed; errors name what was wrong with it, not what it
//! was.

use std::collections::HashMap;
use std::sync::Arc;

use http::{HeaderMap, HeaderValue, StatusCode};
use serde_json::{json, Value};

pub mod config;
mod issuer;
pub mod keys;
mod token;

pub use config::{IntrospectionConfig, IssuerConfig, OAuthConfig, OAuthConfigError};
pub use keys::KeyRing;

/// Most verified tokens remembered (their digests), so a token is checked once, not per
/// request.
const MAX_CACHED_TOKENS: usize = 10_000;
/// Longest an introspected token is trusted without asking again, in seconds.
const INTROSPECTION_TTL_SECS: u64 = 30;
/// Introspection requests in flight at once: a flood of made-up opaque tokens costs the issuer
/// at most this many requests at a time.
const MAX_INTROSPECTIONS: usize = 8;
/// How long a request waits for an introspection slot before it is refused.
const INTROSPECTION_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// A principal signed in with a token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedIn {
    /// `{iss}#{sub}`.
    pub principal: String,
    /// Roles from the token's claims (or the default roles).
    pub roles: Vec<String>,
    pub scopes: Vec<String>,
    /// The token's `exp`, in seconds since the epoch.
    pub expires_at: Option<u64>,
    /// The bearer token itself, for a source that exchanges it for its own (RFC 8693). It
    /// never shows itself (Debug, Display, Serialize).
    pub token: toolshed_outbound::Secret,
}

/// Who is calling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Who {
    /// A configured principal: by API key, or the anonymous principal of an open server.
    Principal(String),
    /// A principal signed in with an OAuth token; its roles come from the token.
    SignedIn(SignedIn),
}

impl Who {
    pub fn principal(&self) -> &str {
        match self {
            Self::Principal(p) => p,
            Self::SignedIn(s) => &s.principal,
        }
    }

    /// The roles the token grants (`None` for a configured principal: the policy says).
    pub fn roles(&self) -> Option<&[String]> {
        match self {
            Self::Principal(_) => None,
            Self::SignedIn(s) => Some(&s.roles),
        }
    }
}

/// Why a request is not authenticated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("missing credentials: send 'Authorization: Bearer <API key or token>'")]
    Missing,
    #[error("unknown API key: send 'Authorization: Bearer <key>' with a configured key")]
    UnknownKey,
    #[error("invalid token: {0}")]
    InvalidToken(String),
    #[error("the token lacks the scope(s) this server requires: {}", missing.join(" "))]
    InsufficientScope { missing: Vec<String> },
    #[error("cannot check the token: issuer {issuer} is unavailable ({reason})")]
    IssuerUnavailable { issuer: String, reason: String },
}

impl AuthError {
    /// The HTTP status of the refusal.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::Missing | Self::UnknownKey | Self::InvalidToken(_) => StatusCode::UNAUTHORIZED,
            Self::InsufficientScope { .. } => StatusCode::FORBIDDEN,
            Self::IssuerUnavailable { .. } => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// A short machine-readable code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Missing | Self::UnknownKey => "unauthorized",
            Self::InvalidToken(_) => "invalid_token",
            Self::InsufficientScope { .. } => "insufficient_scope",
            Self::IssuerUnavailable { .. } => "issuer_unavailable",
        }
    }
}

/// At most 200 characters of a string taken from a request, for an error message.
pub(crate) fn bounded(s: &str) -> String {
    match s.char_indices().nth(200) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

pub(crate) fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// OAuth, when configured.
struct OAuth {
    config: OAuthConfig,
    issuers: Vec<issuer::Issuer>,
    /// SHA-256 of a verified token → who it is, until it expires.
    verified: parking_lot::Mutex<HashMap<[u8; 32], (SignedIn, u64)>>,
    /// Bounds the introspection requests in flight.
    introspections: tokio::sync::Semaphore,
    /// Opaque tokens the issuer called inactive, for a short while.
    refused: parking_lot::Mutex<HashMap<[u8; 32], (AuthError, u64)>>,
}

/// Authenticates requests of the network faces. Cheap to clone.
#[derive(Clone)]
pub struct Authenticator {
    keys: KeyRing,
    oauth: Option<Arc<OAuth>>,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator")
            .field("keys", &self.keys)
            .field("oauth", &self.oauth.as_ref().map(|o| &o.config.resource))
            .finish()
    }
}

impl From<KeyRing> for Authenticator {
    fn from(keys: KeyRing) -> Self {
        Self { keys, oauth: None }
    }
}

impl Authenticator {
    /// API keys, plus OAuth tokens when `oauth` is set (check it with
    /// [`OAuthConfig::check`] first). With OAuth configured there is no anonymous principal:
    /// every request must authenticate.
    pub fn new(keys: KeyRing, oauth: Option<OAuthConfig>) -> Result<Self, AuthError> {
        let Some(config) = oauth else {
            return Ok(keys.into());
        };
        let issuers = config
            .issuers
            .iter()
            .cloned()
            .map(issuer::Issuer::new)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            keys: keys.without_anonymous(),
            oauth: Some(Arc::new(OAuth {
                config,
                issuers,
                verified: parking_lot::Mutex::new(HashMap::new()),
                introspections: tokio::sync::Semaphore::new(MAX_INTROSPECTIONS),
                refused: parking_lot::Mutex::new(HashMap::new()),
            })),
        })
    }

    /// The OAuth configuration, when tokens are accepted.
    pub fn oauth(&self) -> Option<&OAuthConfig> {
        self.oauth.as_ref().map(|o| &o.config)
    }

    /// Who sent a request with these headers.
    pub async fn authenticate(&self, headers: &HeaderMap) -> Result<Who, AuthError> {
        let h = |n: &str| headers.get(n).and_then(|v| v.to_str().ok());
        let presented = KeyRing::key_from_headers(h("authorization"), h("x-api-key"));
        if let Some(p) = self.keys.principal(presented) {
            return Ok(Who::Principal(p));
        }
        let (Some(oauth), Some(token)) = (&self.oauth, presented.map(str::trim)) else {
            return Err(match presented {
                None => AuthError::Missing,
                Some(_) => AuthError::UnknownKey,
            });
        };
        if token.is_empty() {
            return Err(AuthError::Missing);
        }
        oauth.verify(token).await.map(Who::SignedIn)
    }

    /// The `WWW-Authenticate` value for a refusal (RFC 6750, with RFC 9728's
    /// `resource_metadata` when OAuth is configured).
    pub fn challenge(&self, e: &AuthError) -> Option<HeaderValue> {
        let mut params: Vec<String> = Vec::new();
        match e {
            AuthError::Missing | AuthError::UnknownKey => {}
            AuthError::InvalidToken(message) => {
                params.push("error=\"invalid_token\"".into());
                params.push(format!("error_description=\"{}\"", quoted(message)));
            }
            AuthError::InsufficientScope { .. } => {
                params.push("error=\"insufficient_scope\"".into());
            }
            AuthError::IssuerUnavailable { .. } => return None,
        }
        if let Some(o) = &self.oauth {
            if !o.config.scopes.is_empty() {
                params.push(format!("scope=\"{}\"", quoted(&o.config.scopes.join(" "))));
            }
            params.push(format!("resource_metadata=\"{}\"", self.metadata_url()?));
        }
        let value = match params.is_empty() {
            true => "Bearer".to_string(),
            false => format!("Bearer {}", params.join(", ")),
        };
        HeaderValue::from_str(&value).ok()
    }

    /// Where the protected-resource metadata is (RFC 9728 §3.1: the well-known path inserted
    /// between the resource's origin and its path).
    pub fn metadata_url(&self) -> Option<String> {
        let o = self.oauth.as_ref()?;
        let url = url::Url::parse(&o.config.resource).ok()?;
        let path = url.path().trim_end_matches('/');
        Some(format!(
            "{}/.well-known/oauth-protected-resource{path}",
            url.origin().ascii_serialization()
        ))
    }

    /// The protected-resource metadata document (RFC 9728), when OAuth is configured.
    pub fn resource_metadata(&self) -> Option<Value> {
        let o = self.oauth.as_ref()?;
        let mut doc = json!({
            "resource": o.config.resource,
            "authorization_servers": o.issuers.iter().map(|i| i.id()).collect::<Vec<_>>(),
            "bearer_methods_supported": ["header"],
            "resource_name": "Toolshed",
        });
        if !o.config.scopes.is_empty() {
            doc["scopes_supported"] = json!(o.config.scopes);
        }
        Some(doc)
    }
}

/// A value for a quoted-string of a challenge: no quotes, backslashes or control characters.
fn quoted(s: &str) -> String {
    bounded(s)
        .chars()
        .map(|c| match c {
            '"' | '\\' => '\'',
            c if c.is_control() || !c.is_ascii() => ' ',
            c => c,
        })
        .collect()
}

fn digest(token: &str) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(token.as_bytes()).into()
}

impl OAuth {
    async fn verify(&self, token: &str) -> Result<SignedIn, AuthError> {
        let key = digest(token);
        let now = now_secs();
        if let Some((who, until)) = self.verified.lock().get(&key) {
            if now < *until {
                return Ok(who.clone());
            }
        }
        let (mut who, until) = if token::looks_like_jwt(token) {
            let (index, claims) = token::verify_jwt(&self.config, &self.issuers, token).await?;
            let who = token::signed_in(&self.config, &self.issuers[index], &claims);
            let until = who.expires_at.unwrap_or(now);
            (who, until)
        } else {
            if let Some((e, until)) = self.refused.lock().get(&key) {
                if now < *until {
                    return Err(e.clone());
                }
            }
            let who = match self.introspect(token).await {
                Ok(who) => who,
                Err(e @ AuthError::InvalidToken(_)) => {
                    // The same made-up token again is answered without asking the issuer.
                    let mut refused = self.refused.lock();
                    if refused.len() >= MAX_CACHED_TOKENS {
                        refused.clear();
                    }
                    refused.insert(key, (e.clone(), now + INTROSPECTION_TTL_SECS));
                    return Err(e);
                }
                Err(e) => return Err(e),
            };
            let until = who
                .expires_at
                .unwrap_or(u64::MAX)
                .min(now + INTROSPECTION_TTL_SECS);
            (who, until)
        };
        who.token = toolshed_outbound::Secret::new(token);
        let missing: Vec<String> = self
            .config
            .scopes
            .iter()
            .filter(|s| !who.scopes.contains(s))
            .cloned()
            .collect();
        if !missing.is_empty() {
            return Err(AuthError::InsufficientScope { missing });
        }
        let mut verified = self.verified.lock();
        if verified.len() >= MAX_CACHED_TOKENS {
            verified.retain(|_, (_, until)| now < *until);
            if verified.len() >= MAX_CACHED_TOKENS {
                verified.clear();
            }
        }
        verified.insert(key, (who.clone(), until));
        Ok(who)
    }

    /// An opaque token, asked about at each issuer with introspection configured.
    async fn introspect(&self, token: &str) -> Result<SignedIn, AuthError> {
        let busy = || AuthError::IssuerUnavailable {
            issuer: "introspection".into(),
            reason: "too many opaque tokens are being checked at once; retry shortly".into(),
        };
        let _slot = tokio::time::timeout(INTROSPECTION_WAIT, self.introspections.acquire())
            .await
            .map_err(|_| busy())?
            .map_err(|_| busy())?;
        let mut last = None;
        for issuer in &self.issuers {
            let Some(answer) = issuer.introspect(token).await else {
                continue;
            };
            match answer.and_then(|a| token::check_introspected(&self.config, issuer, a)) {
                Ok(claims) => return Ok(token::signed_in(&self.config, issuer, &claims)),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| {
            AuthError::InvalidToken(
                "neither a configured API key nor a JWT (no issuer has introspection configured for opaque tokens)"
                    .into(),
            )
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn oauth() -> OAuthConfig {
        OAuthConfig {
            resource: "https://toolshed.example.com/".into(),
            scopes: vec!["toolshed".into()],
            issuers: vec![IssuerConfig {
                issuer: "https://id.example.com".into(),
                ..IssuerConfig::default()
            }],
            ..OAuthConfig::default()
        }
    }

    #[tokio::test]
    async fn keys_still_work_beside_oauth_and_anonymous_ends() {
        let ring = KeyRing::new(
            [("k1".to_string(), "bot".to_string())],
            Some("local".into()),
        );
        let open = Authenticator::from(ring.clone());
        assert_eq!(
            open.authenticate(&HeaderMap::new()).await,
            Ok(Who::Principal("local".into()))
        );
        let auth = Authenticator::new(ring, Some(oauth())).unwrap();
        assert_eq!(
            auth.authenticate(&HeaderMap::new()).await,
            Err(AuthError::Missing)
        );
        let mut headers = HeaderMap::new();
        headers.insert("authorization", HeaderValue::from_static("Bearer k1"));
        assert_eq!(
            auth.authenticate(&headers).await,
            Ok(Who::Principal("bot".into()))
        );
        headers.insert("authorization", HeaderValue::from_static("Bearer opaque"));
        let e = auth.authenticate(&headers).await.unwrap_err();
        assert_eq!(e.status(), StatusCode::UNAUTHORIZED);
    }

    #[test]
    fn challenges_name_the_metadata_and_scopes() {
        let auth = Authenticator::new(KeyRing::new([], None), Some(oauth())).unwrap();
        assert_eq!(
            auth.metadata_url().as_deref(),
            Some("https://toolshed.example.com/.well-known/oauth-protected-resource")
        );
        let missing = auth.challenge(&AuthError::Missing).unwrap();
        assert_eq!(
            missing,
            "Bearer scope=\"toolshed\", resource_metadata=\"https://toolshed.example.com/.well-known/oauth-protected-resource\""
        );
        let bad = auth
            .challenge(&AuthError::InvalidToken("say \"hi\"\n".into()))
            .unwrap();
        let bad = bad.to_str().unwrap();
        assert!(
            bad.starts_with("Bearer error=\"invalid_token\", error_description=\"say 'hi' \""),
            "{bad}"
        );
        let scope = AuthError::InsufficientScope {
            missing: vec!["toolshed".into()],
        };
        assert_eq!(scope.status(), StatusCode::FORBIDDEN);
        assert!(auth
            .challenge(&scope)
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("Bearer error=\"insufficient_scope\", scope=\"toolshed\""));
        let doc = auth.resource_metadata().unwrap();
        assert_eq!(doc["authorization_servers"][0], "https://id.example.com");
        assert_eq!(doc["scopes_supported"][0], "toolshed");
        // Without OAuth a missing key is a plain Bearer challenge.
        let keys = Authenticator::from(KeyRing::new([], None));
        assert_eq!(keys.challenge(&AuthError::Missing).unwrap(), "Bearer");
        assert!(keys.resource_metadata().is_none());
    }

    #[test]
    fn a_resource_with_a_path_puts_it_after_the_well_known_part() {
        let mut c = oauth();
        c.resource = "http://127.0.0.1:8080/mcp".into();
        let auth = Authenticator::new(KeyRing::new([], None), Some(c)).unwrap();
        assert_eq!(
            auth.metadata_url().as_deref(),
            Some("http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp")
        );
    }
}
