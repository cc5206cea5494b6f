//! Authentication schemes applied to outbound requests.
//!
//! [`AuthConfig`] is deserialized from configuration (tagged by `type`). OAuth2 client
//! credentials tokens are cached per client until shortly before they expire; concurrent
//! callers wait on one shared fetch.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::header::COOKIE;
use reqwest::{Method, RequestBuilder};
use serde::{Deserialize, Serialize};

use crate::client::Outbound;
use crate::error::OutboundError;
use crate::secret::Secret;

/// Where an API key goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApiKeyLocation {
    Header,
    Query,
    Cookie,
}

/// How requests authenticate.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum AuthConfig {
    #[default]
    #[serde(rename = "none")]
    None,
    #[serde(rename = "api_key")]
    ApiKey {
        location: ApiKeyLocation,
        name: String,
        value: Secret,
    },
    #[serde(rename = "bearer")]
    Bearer { token: Secret },
    #[serde(rename = "basic")]
    Basic { username: String, password: Secret },
    #[serde(rename = "oauth2_client_credentials")]
    OAuth2ClientCredentials {
        token_url: String,
        client_id: String,
        client_secret: Secret,
        #[serde(default)]
        scopes: Vec<String>,
        #[serde(default)]
        audience: Option<String>,
    },
    /// Each principal's own grant (OAuth 2.0 authorization code with PKCE): the request carries
    /// the calling principal's access token for `connection`, which the handler obtains from
    /// its call context and puts in place with [`AuthConfig::for_user`]. The flow's settings
    /// are read by the engine's connections.
    #[serde(rename = "oauth2_user")]
    OAuth2User(UserOAuth),
    /// The calling principal's own sign-in token exchanged (RFC 8693) for a token of this API;
    /// like `oauth2_user`, put in place by the handler with [`AuthConfig::for_user`].
    #[serde(rename = "token_exchange")]
    TokenExchange(TokenExchange),
}

/// The settings of a token-exchange connection (RFC 8693).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenExchange {
    /// The connection's id: the source's name.
    #[serde(default)]
    pub connection: String,
    pub token_url: String,
    pub client_id: String,
    #[serde(default)]
    pub client_secret: Option<Secret>,
    /// The `audience` parameter (a logical name of the API).
    #[serde(default)]
    pub audience: Option<String>,
    /// The `resource` parameter (the API's URI).
    #[serde(default)]
    pub resource: Option<String>,
    #[serde(default)]
    pub scopes: Vec<String>,
}

/// The settings of a per-user OAuth connection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserOAuth {
    /// The connection's id: the source's name.
    #[serde(default)]
    pub connection: String,
    pub authorization_url: String,
    pub token_url: String,
    pub client_id: String,
    #[serde(default)]
    pub client_secret: Option<Secret>,
    #[serde(default)]
    pub scopes: Vec<String>,
    /// The API's resource indicator (RFC 8707), sent in the authorization and token requests.
    #[serde(default)]
    pub resource: Option<String>,
}

impl AuthConfig {
    /// The secret values of this configuration, for redacting text that might echo them,
    /// including what a request derives from them: for `basic`, the base64 `user:password` the
    /// `Authorization` header carries. ([`crate::secret::redact`] adds the URL-encoded forms.)
    pub fn secrets(&self) -> Vec<String> {
        match self {
            AuthConfig::None => vec![],
            AuthConfig::ApiKey { value, .. } => vec![value.expose().to_string()],
            AuthConfig::Bearer { token } => vec![token.expose().to_string()],
            AuthConfig::Basic { username, password } => {
                vec![
                    password.expose().to_string(),
                    crate::secret::basic_credential(username, password.expose()),
                ]
            }
            AuthConfig::OAuth2ClientCredentials {
                client_id,
                client_secret,
                ..
            } => vec![
                client_secret.expose().to_string(),
                crate::secret::basic_credential(client_id, client_secret.expose()),
            ],
            AuthConfig::OAuth2User(UserOAuth {
                client_id,
                client_secret,
                ..
            })
            | AuthConfig::TokenExchange(TokenExchange {
                client_id,
                client_secret,
                ..
            }) => client_secret
                .iter()
                .flat_map(|s| {
                    [
                        s.expose().to_string(),
                        crate::secret::basic_credential(client_id, s.expose()),
                    ]
                })
                .collect(),
        }
    }

    /// Adds the credentials to `req`.
    pub async fn apply(
        &self,
        req: RequestBuilder,
        outbound: &Outbound,
    ) -> Result<RequestBuilder, OutboundError> {
        self.apply_with_cookies(req, outbound, Vec::new()).await
    }

    /// Adds the credentials and `cookies` to `req`, as one `Cookie` header.
    pub async fn apply_with_cookies(
        &self,
        req: RequestBuilder,
        outbound: &Outbound,
        cookies: Vec<(String, String)>,
    ) -> Result<RequestBuilder, OutboundError> {
        Self::apply_all(std::slice::from_ref(self), req, outbound, cookies).await
    }

    /// Adds the credentials of every configuration in `auths` (all of them: an OpenAPI security
    /// requirement may need several schemes at once) and `cookies` to `req`. API keys sent as
    /// cookies join `cookies` in one `Cookie` header.
    pub async fn apply_all(
        auths: &[AuthConfig],
        mut req: RequestBuilder,
        outbound: &Outbound,
        mut cookies: Vec<(String, String)>,
    ) -> Result<RequestBuilder, OutboundError> {
        for auth in auths {
            req = auth.apply_one(req, outbound, &mut cookies).await?;
        }
        if cookies.is_empty() {
            return Ok(req);
        }
        let header = cookies
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ");
        Ok(req.header(COOKIE, header))
    }

    /// Adds this configuration's credentials; a cookie key is pushed onto `cookies` instead.
    async fn apply_one(
        &self,
        req: RequestBuilder,
        outbound: &Outbound,
        cookies: &mut Vec<(String, String)>,
    ) -> Result<RequestBuilder, OutboundError> {
        Ok(match self {
            AuthConfig::None => req,
            AuthConfig::ApiKey {
                location,
                name,
                value,
            } => match location {
                ApiKeyLocation::Header => req.header(name.as_str(), value.expose()),
                ApiKeyLocation::Query => req.query(&[(name.as_str(), value.expose())]),
                ApiKeyLocation::Cookie => {
                    cookies.push((name.clone(), value.expose().to_string()));
                    req
                }
            },
            AuthConfig::Bearer { token } => req.bearer_auth(token.expose()),
            AuthConfig::Basic { username, password } => {
                req.basic_auth(username, Some(password.expose()))
            }
            AuthConfig::OAuth2ClientCredentials { .. } => {
                let token = outbound.tokens().token(self, outbound).await?;
                req.bearer_auth(token.expose())
            }
            AuthConfig::OAuth2User(UserOAuth { connection, .. })
            | AuthConfig::TokenExchange(TokenExchange { connection, .. }) => {
                return Err(OutboundError::MissingSecret {
                    name: connection.clone(),
                    reason:
                        "a per-user grant is put in place by the handler (AuthConfig::for_user)"
                            .into(),
                })
            }
        })
    }

    /// This configuration with the caller's own token in place: `oauth2_user` and
    /// `token_exchange` become `bearer` with `token`; anything else is unchanged.
    pub fn for_user(&self, token: &str) -> AuthConfig {
        match self {
            AuthConfig::OAuth2User(_) | AuthConfig::TokenExchange(_) => AuthConfig::Bearer {
                token: Secret::new(token),
            },
            other => other.clone(),
        }
    }

    /// The per-user connection this configuration needs (`oauth2_user`, `token_exchange`),
    /// if any: the handler asks its call context for the caller's token there.
    pub fn user_connection(&self) -> Option<&str> {
        match self {
            AuthConfig::OAuth2User(u) => Some(&u.connection),
            AuthConfig::TokenExchange(x) => Some(&x.connection),
            _ => None,
        }
    }

    /// `api_key`, `bearer`, ...: the configuration's `type`, for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            AuthConfig::None => "none",
            AuthConfig::ApiKey { .. } => "api_key",
            AuthConfig::Bearer { .. } => "bearer",
            AuthConfig::Basic { .. } => "basic",
            AuthConfig::OAuth2ClientCredentials { .. } => "oauth2_client_credentials",
            AuthConfig::OAuth2User(_) => "oauth2_user",
            AuthConfig::TokenExchange(_) => "token_exchange",
        }
    }
}

#[derive(Clone)]
struct CachedToken {
    token: Secret,
    refresh_at: Instant,
}

type Slot = Arc<tokio::sync::Mutex<Option<CachedToken>>>;

/// How many fetched access tokens [`TokenCache::issued`] remembers (newest kept).
const ISSUED_KEPT: usize = 32;

/// OAuth2 tokens per client, shared by clones of an [`Outbound`].
#[derive(Default)]
pub(crate) struct TokenCache {
    slots: Mutex<HashMap<String, Slot>>,
    fetches: std::sync::atomic::AtomicUsize,
    /// Access tokens fetched so far (the last [`ISSUED_KEPT`]), for redaction: an API that
    /// echoes its caller's token must not leak it into results, errors or logs.
    issued: Mutex<Vec<Secret>>,
}

impl TokenCache {
    /// The access tokens fetched by this cache, newest last.
    pub(crate) fn issued(&self) -> Vec<Secret> {
        self.issued
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn remember(&self, token: &Secret) {
        let mut issued = self.issued.lock().unwrap_or_else(|p| p.into_inner());
        if issued.contains(token) {
            return;
        }
        if issued.len() == ISSUED_KEPT {
            issued.remove(0);
        }
        issued.push(token.clone());
    }

    /// How many token requests were sent (for diagnostics).
    #[allow(dead_code)]
    pub(crate) fn fetch_count(&self) -> usize {
        self.fetches.load(std::sync::atomic::Ordering::Relaxed)
    }

    async fn token(&self, auth: &AuthConfig, outbound: &Outbound) -> Result<Secret, OutboundError> {
        let AuthConfig::OAuth2ClientCredentials {
            token_url,
            client_id,
            client_secret,
            scopes,
            audience,
        } = auth
        else {
            return Err(OutboundError::Token {
                url: String::new(),
                reason: "not an OAuth2 configuration".into(),
            });
        };
        let key = format!(
            "{token_url}\n{client_id}\n{}\n{}\n{}",
            client_secret.expose(),
            scopes.join(" "),
            audience.as_deref().unwrap_or("")
        );
        let slot = {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            slots.entry(key).or_default().clone()
        };
        let mut guard = slot.lock().await;
        if let Some(c) = guard.as_ref() {
            if Instant::now() < c.refresh_at {
                return Ok(c.token.clone());
            }
        }
        self.fetches
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut form: Vec<(&str, &str)> = vec![("grant_type", "client_credentials")];
        let scope = scopes.join(" ");
        if !scope.is_empty() {
            form.push(("scope", &scope));
        }
        if let Some(a) = audience {
            form.push(("audience", a));
        }
        let token_err = |reason: String| OutboundError::Token {
            url: token_url.clone(),
            reason,
        };
        let req = outbound
            .request(Method::POST, token_url)?
            .basic_auth(client_id, Some(client_secret.expose()))
            .header(reqwest::header::ACCEPT, "application/json")
            .form(&form);
        let resp = outbound
            .send(req)
            .await
            .map_err(|e| token_err(e.to_string()))?;
        if !resp.is_success() {
            return Err(token_err(format!(
                "status {}: {}",
                resp.status.as_u16(),
                crate::secret::redact(&resp.body_excerpt(), &[client_secret.expose()])
            )));
        }
        #[derive(Deserialize)]
        struct TokenResponse {
            access_token: String,
            #[serde(default)]
            expires_in: Option<f64>,
        }
        let parsed: TokenResponse = resp
            .json()
            .map_err(|_| token_err("the answer has no access_token".into()))?;
        let lifetime = token_lifetime(parsed.expires_in);
        let skew = (lifetime / 4).min(Duration::from_secs(30));
        let now = Instant::now();
        let cached = CachedToken {
            token: Secret::new(parsed.access_token),
            refresh_at: now.checked_add(lifetime - skew).unwrap_or(now),
        };
        self.remember(&cached.token);
        *guard = Some(cached.clone());
        Ok(cached.token)
    }
}

/// How long a token is cached when its endpoint gives no (usable) `expires_in`.
const DEFAULT_TOKEN_LIFETIME: Duration = Duration::from_secs(300);
/// The longest a token is cached, whatever its endpoint says.
const MAX_TOKEN_LIFETIME: Duration = Duration::from_secs(24 * 60 * 60);

/// The cache lifetime for a token endpoint's `expires_in` (seconds): absent or not a finite
/// number gives the default, the rest is clamped to zero .. one day (a huge value would
/// overflow `Duration` and `Instant`, a negative one means "already expired").
fn token_lifetime(expires_in: Option<f64>) -> Duration {
    match expires_in {
        Some(s) if s.is_finite() => {
            Duration::from_secs_f64(s.clamp(0.0, MAX_TOKEN_LIFETIME.as_secs_f64()))
        }
        _ => DEFAULT_TOKEN_LIFETIME,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_lifetimes_are_clamped() {
        assert_eq!(token_lifetime(None), DEFAULT_TOKEN_LIFETIME);
        assert_eq!(token_lifetime(Some(f64::NAN)), DEFAULT_TOKEN_LIFETIME);
        assert_eq!(token_lifetime(Some(f64::INFINITY)), DEFAULT_TOKEN_LIFETIME);
        assert_eq!(token_lifetime(Some(1e20)), MAX_TOKEN_LIFETIME);
        assert_eq!(token_lifetime(Some(-5.0)), Duration::ZERO);
        assert_eq!(token_lifetime(Some(90.5)), Duration::from_secs_f64(90.5));
    }

    #[test]
    fn config_is_tagged_by_type() {
        let a: AuthConfig = serde_json::from_str(
            r#"{"type":"api_key","location":"query","name":"api_key","value":"k1"}"#,
        )
        .unwrap();
        assert!(matches!(
            a,
            AuthConfig::ApiKey {
                location: ApiKeyLocation::Query,
                ..
            }
        ));
        let o: AuthConfig = serde_json::from_str(
            r#"{"type":"oauth2_client_credentials","token_url":"https://x/t","client_id":"c","client_secret":"s","scopes":["a"]}"#,
        )
        .unwrap();
        let text = serde_json::to_string(&o).unwrap();
        assert!(text.contains("oauth2_client_credentials"));
        assert!(!text.contains("\"s\""), "{text}");
        assert!(!format!("{o:?}").contains("\"s\""));
        let b: AuthConfig = serde_json::from_str(r#"{"type":"bearer","token":"tok"}"#).unwrap();
        assert_eq!(b.secrets(), vec!["tok"]);
        assert!(matches!(
            serde_json::from_str::<AuthConfig>(r#"{"type":"none"}"#).unwrap(),
            AuthConfig::None
        ));
    }
}
