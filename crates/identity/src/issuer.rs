//! One trusted authorization server: its metadata (discovery), its signing keys (JWKS, cached)
//! and, when configured, its introspection endpoint.
//!
//! Metadata is read once it is first needed, from `{issuer}/.well-known/openid-configuration`
//! or else RFC 8414's `/.well-known/oauth-authorization-server`; its `issuer` must equal the
//! configured one (a server answering for another issuer is refused). Keys are fetched on first
//! use and again when a token names a key id the cached set lacks (a rotation), but at most once
//! per [`REFRESH_INTERVAL`], so tokens with made-up key ids cannot make Toolshed hammer the
//! issuer. All requests go through the guarded outbound client (address checks, size cap,
//! timeout).

use std::sync::Arc;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{Jwk, JwkSet};
use serde_json::Value;
use toolshed_outbound::{Method, Outbound, OutboundConfig, Secret};

use crate::config::{trim_slash, IssuerConfig};
use crate::AuthError;

/// The shortest time between two key fetches of one issuer.
pub const REFRESH_INTERVAL: Duration = Duration::from_secs(30);
/// The most keys kept from one issuer's set.
const MAX_KEYS: usize = 64;

/// What discovery found.
#[derive(Debug, Clone)]
struct Metadata {
    jwks_uri: String,
    introspection_endpoint: Option<String>,
}

#[derive(Default)]
struct Cache {
    metadata: Option<Metadata>,
    keys: Arc<JwkSet>,
    fetched: Option<Instant>,
    /// Why the last fetch failed: repeated until the next fetch may run.
    failed: Option<AuthError>,
}

/// A trusted issuer.
pub(crate) struct Issuer {
    pub(crate) config: IssuerConfig,
    http: Outbound,
    cache: tokio::sync::Mutex<Cache>,
    /// The keys last fetched, readable without waiting for a fetch in progress.
    keys: parking_lot::RwLock<Arc<JwkSet>>,
    introspection_secret: Option<Secret>,
}

impl Issuer {
    pub(crate) fn new(config: IssuerConfig) -> Result<Self, AuthError> {
        let http = Outbound::new(OutboundConfig {
            timeout: Duration::from_secs(10),
            max_response_bytes: 1024 * 1024,
            allow_private: config.allow_private,
            max_redirects: 0,
            ..OutboundConfig::default()
        })
        .map_err(|e| unavailable(&config.issuer, e.to_string()))?;
        let introspection_secret = match &config.introspection {
            Some(x) => Some(Secret::from_config(&x.client_secret).map_err(|e| {
                unavailable(&config.issuer, format!("introspection client_secret: {e}"))
            })?),
            None => None,
        };
        Ok(Self {
            config,
            http,
            cache: tokio::sync::Mutex::new(Cache::default()),
            keys: parking_lot::RwLock::new(Arc::new(JwkSet { keys: vec![] })),
            introspection_secret,
        })
    }

    pub(crate) fn id(&self) -> &str {
        &self.config.issuer
    }

    /// Whether `iss` (from a token) names this issuer.
    pub(crate) fn is(&self, iss: &str) -> bool {
        trim_slash(iss) == trim_slash(&self.config.issuer)
    }

    /// The key a token signed with `kid` needs: from the cache, or after a (rate-limited)
    /// refresh. A token without `kid` is accepted when the set holds exactly one key.
    pub(crate) async fn key(&self, kid: Option<&str>) -> Result<Jwk, AuthError> {
        if let Some(k) = pick(&self.keys.read(), kid) {
            return Ok(k);
        }
        let mut cache = self.cache.lock().await;
        // Another request may have refreshed while this one waited.
        if let Some(k) = pick(&cache.keys, kid) {
            return Ok(k);
        }
        let recent = cache
            .fetched
            .is_some_and(|at| at.elapsed() < REFRESH_INTERVAL);
        if !recent {
            cache.fetched = Some(Instant::now());
            let result = self.refresh(&mut cache).await;
            cache.failed = result.as_ref().err().cloned();
            result?;
        } else if let Some(e) = &cache.failed {
            return Err(e.clone());
        }
        pick(&cache.keys, kid).ok_or_else(|| {
            AuthError::InvalidToken(match kid {
                Some(kid) => format!(
                    "the token's key id '{}' is not among issuer {}'s published keys",
                    crate::bounded(kid),
                    self.id()
                ),
                None => format!(
                    "the token names no key id and issuer {} publishes more than one key",
                    self.id()
                ),
            })
        })
    }

    async fn refresh(&self, cache: &mut Cache) -> Result<(), AuthError> {
        let metadata = match &cache.metadata {
            Some(m) => m.clone(),
            None => {
                let m = self.discover().await?;
                cache.metadata = Some(m.clone());
                m
            }
        };
        let body = self
            .http
            .get_json(&metadata.jwks_uri)
            .await
            .map_err(|e| unavailable(self.id(), format!("reading its keys: {e}")))?;
        let mut set: JwkSet = serde_json::from_value(strip_unusable(body))
            .map_err(|e| unavailable(self.id(), format!("its key set does not parse: {e}")))?;
        set.keys.truncate(MAX_KEYS);
        let set = Arc::new(set);
        cache.keys = set.clone();
        *self.keys.write() = set;
        Ok(())
    }

    /// Reads the issuer's metadata (OpenID discovery, then RFC 8414).
    async fn discover(&self) -> Result<Metadata, AuthError> {
        let base = trim_slash(&self.config.issuer);
        let mut last = String::new();
        for well_known in [
            "/.well-known/openid-configuration",
            "/.well-known/oauth-authorization-server",
        ] {
            let url = format!("{base}{well_known}");
            let doc = match self.http.get_json(&url).await {
                Ok(doc) => doc,
                Err(e) => {
                    last = e.to_string();
                    continue;
                }
            };
            let stated = doc.get("issuer").and_then(Value::as_str).unwrap_or("");
            if trim_slash(stated) != base {
                return Err(unavailable(
                    self.id(),
                    format!(
                        "its metadata names issuer '{}', not the configured one",
                        crate::bounded(stated)
                    ),
                ));
            }
            let jwks_uri = doc
                .get("jwks_uri")
                .and_then(Value::as_str)
                .ok_or_else(|| unavailable(self.id(), "its metadata has no jwks_uri".into()))?;
            return Ok(Metadata {
                jwks_uri: jwks_uri.to_string(),
                introspection_endpoint: doc
                    .get("introspection_endpoint")
                    .and_then(Value::as_str)
                    .map(str::to_string),
            });
        }
        Err(unavailable(self.id(), format!("discovery failed: {last}")))
    }

    /// Asks the issuer about an opaque token (RFC 7662). `None` when no introspection is
    /// configured for this issuer.
    pub(crate) async fn introspect(&self, token: &str) -> Option<Result<Value, AuthError>> {
        let (x, secret) = (
            self.config.introspection.as_ref()?,
            self.introspection_secret.as_ref()?,
        );
        Some(self.introspect_with(token, &x.client_id, secret).await)
    }

    async fn introspect_with(
        &self,
        token: &str,
        client_id: &str,
        secret: &Secret,
    ) -> Result<Value, AuthError> {
        let endpoint = {
            let mut cache = self.cache.lock().await;
            if cache.metadata.is_none() {
                cache.metadata = Some(self.discover().await?);
            }
            cache
                .metadata
                .as_ref()
                .and_then(|m| m.introspection_endpoint.clone())
        };
        let endpoint = endpoint.ok_or_else(|| {
            unavailable(
                self.id(),
                "its metadata has no introspection_endpoint".into(),
            )
        })?;
        let req = self
            .http
            .request(Method::POST, &endpoint)
            .map_err(|e| unavailable(self.id(), e.to_string()))?
            .basic_auth(client_id, Some(secret.expose()))
            .form(&[("token", token)]);
        let answer = self
            .http
            .send_checked(req)
            .await
            .map_err(|e| unavailable(self.id(), format!("introspection: {e}")))?;
        answer
            .json::<Value>()
            .map_err(|e| unavailable(self.id(), format!("introspection answer: {e}")))
    }
}

/// The key for `kid`, or the only key when the token names none.
fn pick(set: &JwkSet, kid: Option<&str>) -> Option<Jwk> {
    match kid {
        Some(kid) => set.find(kid).cloned(),
        None if set.keys.len() == 1 => set.keys.first().cloned(),
        None => None,
    }
}

/// Keys this crate cannot use (unknown `kty`, symmetric keys) are dropped before parsing, so
/// one odd key does not make the whole set unreadable. Symmetric (`oct`) keys are never
/// accepted from a published set: a public document cannot hold a secret.
fn strip_unusable(mut body: Value) -> Value {
    if let Some(keys) = body.get_mut("keys").and_then(Value::as_array_mut) {
        keys.retain(|k| {
            let has = |fields: &[&str]| {
                fields
                    .iter()
                    .all(|f| k.get(*f).is_some_and(Value::is_string))
            };
            let complete = match k.get("kty").and_then(Value::as_str).unwrap_or("") {
                "RSA" => has(&["n", "e"]),
                "EC" => has(&["crv", "x", "y"]),
                "OKP" => has(&["crv", "x"]),
                _ => false,
            };
            complete && serde_json::from_value::<Jwk>(k.clone()).is_ok()
        });
    }
    body
}

fn unavailable(issuer: &str, reason: String) -> AuthError {
    AuthError::IssuerUnavailable {
        issuer: issuer.to_string(),
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unusable_keys_are_dropped_not_fatal() {
        let set = strip_unusable(json!({"keys": [
            {"kty": "oct", "k": "c2VjcmV0", "kid": "sym"},
            {"kty": "RSA", "kid": "bad"},
            {"kty": "EC", "crv": "P-256", "kid": "ec1",
             "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
             "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}
        ]}));
        let set: JwkSet = serde_json::from_value(set).unwrap();
        let kids: Vec<_> = set.keys.iter().map(|k| k.common.key_id.clone()).collect();
        assert_eq!(set.keys.len(), 1, "{kids:?}");
        assert!(pick(&set, Some("ec1")).is_some());
        assert!(
            pick(&set, None).is_some(),
            "one key: a token without kid may use it"
        );
        assert!(pick(&set, Some("sym")).is_none());
    }
}
