//! Credentials for auth providers: what a handler gets from `ctx.token("<provider>")`.
//!
//! Plugins declare the providers their handlers need ([`toolshed_core::Plugin::with_auth`]); the
//! deployment configures a credential per provider id ([`CredentialConfig`], `[auth.<id>]` in
//! `toolshed.toml`): a static API key or bearer token, or OAuth2 client credentials whose access
//! tokens are fetched through `toolshed-outbound` (cached until shortly before they expire,
//! concurrent callers share one fetch).
//!
//! The engine hands each call a view scoped to the tool's origin: a provider declared by a plugin
//! serves only that plugin's tools. Providers no plugin declares (e.g. a GraphQL source's
//! `token_provider`) serve any tool. An unconfigured provider is an `unauthorized` error that
//! names the provider and says where to configure it.

use std::collections::HashMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use toolshed_core::{Plugin, TokenSource, ToolError};
use toolshed_outbound::{AuthConfig, Outbound, OutboundConfig, Secret};

/// A configured credential for one auth provider (tagged by `type`). Secret values accept
/// `env:NAME` to read an environment variable. Debug shows `env:` references but never a
/// literal secret.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", deny_unknown_fields)]
pub enum CredentialConfig {
    /// A static API key; the handler gets the key.
    #[serde(rename = "api_key")]
    ApiKey { key: String },
    /// A static bearer token; the handler gets the token.
    #[serde(rename = "bearer")]
    Bearer { token: String },
    /// OAuth2 client credentials; the handler gets a current access token.
    #[serde(rename = "oauth2_client_credentials")]
    OAuth2ClientCredentials {
        token_url: String,
        client_id: String,
        client_secret: String,
        #[serde(default)]
        scopes: Vec<String>,
        #[serde(default)]
        audience: Option<String>,
        /// Allows a token endpoint on a private or loopback address.
        #[serde(default)]
        allow_private: bool,
    },
}

use toolshed_outbound::secret::shown as shown_secret;

impl std::fmt::Debug for CredentialConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::ApiKey { key } => f
                .debug_struct("ApiKey")
                .field("key", &shown_secret(key))
                .finish(),
            Self::Bearer { token } => f
                .debug_struct("Bearer")
                .field("token", &shown_secret(token))
                .finish(),
            Self::OAuth2ClientCredentials {
                token_url,
                client_id,
                client_secret,
                scopes,
                audience,
                allow_private,
            } => f
                .debug_struct("OAuth2ClientCredentials")
                .field("token_url", token_url)
                .field("client_id", client_id)
                .field("client_secret", &shown_secret(client_secret))
                .field("scopes", scopes)
                .field("audience", audience)
                .field("allow_private", allow_private)
                .finish(),
        }
    }
}

/// Why a credential could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum CredentialError {
    #[error("auth provider '{provider}': {reason}")]
    Invalid { provider: String, reason: String },
    #[error("auth provider '{provider}' is declared by both plugin '{first}' and plugin '{second}'; a provider serves one plugin's tools, so one of them must declare it under another id")]
    DuplicateProvider {
        provider: String,
        first: String,
        second: String,
    },
}

enum Provider {
    Static(Secret),
    OAuth2 {
        auth: AuthConfig,
        outbound: Outbound,
    },
}

/// Declared providers and configured credentials.
#[derive(Default)]
pub struct Credentials {
    /// Provider id → the plugin that declared it, and the declared kind.
    declared: HashMap<String, (String, String)>,
    configured: HashMap<String, Provider>,
}

impl Credentials {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records the providers `plugin` declares; they serve only its tools. A provider another
    /// plugin already declared is an error naming both plugins (nothing of `plugin` is
    /// recorded then).
    pub fn declare_plugin(&mut self, plugin: &Plugin) -> Result<&mut Self, CredentialError> {
        for p in &plugin.auth {
            if let Some((owner, _)) = self.declared.get(&p.id) {
                if owner != &plugin.id {
                    return Err(CredentialError::DuplicateProvider {
                        provider: p.id.clone(),
                        first: owner.clone(),
                        second: plugin.id.clone(),
                    });
                }
            }
        }
        for p in &plugin.auth {
            self.declared
                .insert(p.id.clone(), (plugin.id.clone(), p.kind.clone()));
        }
        Ok(self)
    }

    /// Sets the credential of `provider` from configuration (reading `env:` secrets now).
    pub fn configure(
        &mut self,
        provider: &str,
        config: &CredentialConfig,
    ) -> Result<&mut Self, CredentialError> {
        let invalid = |reason: String| CredentialError::Invalid {
            provider: provider.to_string(),
            reason,
        };
        let secret = |field: &str, value: &str| {
            let s = Secret::from_config(value).map_err(|e| invalid(format!("{field}: {e}")))?;
            if s.is_empty() {
                return Err(invalid(format!("{field} is empty")));
            }
            Ok(s)
        };
        let entry = match config {
            CredentialConfig::ApiKey { key } => Provider::Static(secret("key", key)?),
            CredentialConfig::Bearer { token } => Provider::Static(secret("token", token)?),
            CredentialConfig::OAuth2ClientCredentials {
                token_url,
                client_id,
                client_secret,
                scopes,
                audience,
                allow_private,
            } => {
                let outbound = Outbound::new(OutboundConfig {
                    allow_private: *allow_private,
                    ..OutboundConfig::default()
                })
                .map_err(|e| invalid(e.to_string()))?;
                Provider::OAuth2 {
                    auth: AuthConfig::OAuth2ClientCredentials {
                        token_url: token_url.clone(),
                        client_id: client_id.clone(),
                        client_secret: secret("client_secret", client_secret)?,
                        scopes: scopes.clone(),
                        audience: audience.clone(),
                    },
                    outbound,
                }
            }
        };
        self.configured.insert(provider.to_string(), entry);
        Ok(self)
    }

    /// Sets a static credential (an API key or token) for `provider`.
    pub fn set_static(&mut self, provider: &str, value: impl Into<String>) -> &mut Self {
        self.configured
            .insert(provider.to_string(), Provider::Static(Secret::new(value)));
        self
    }

    /// Providers that a plugin declares but nobody configured, as `(provider, plugin)`.
    pub fn unconfigured(&self) -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = self
            .declared
            .iter()
            .filter(|(id, _)| !self.configured.contains_key(*id))
            .map(|(id, (plugin, _))| (id.clone(), plugin.clone()))
            .collect();
        v.sort();
        v
    }

    /// The credential source for one call of a tool from `origin` (`plugin:<id>`, `source:<id>`).
    pub fn scoped(self: &Arc<Self>, origin: &str) -> Arc<dyn TokenSource> {
        Arc::new(Scoped {
            credentials: self.clone(),
            origin: origin.to_string(),
        })
    }

    async fn token_for(&self, origin: &str, provider: &str) -> Result<String, ToolError> {
        if let Some((plugin, _)) = self.declared.get(provider) {
            if origin != format!("plugin:{plugin}") {
                return Err(ToolError::unauthorized(format!(
                    "auth provider '{provider}' belongs to plugin '{plugin}'; a tool from {} cannot use it",
                    if origin.is_empty() { "an unnamed origin" } else { origin }
                )));
            }
        }
        match self.configured.get(provider) {
            Some(Provider::Static(s)) => Ok(s.expose().to_string()),
            Some(Provider::OAuth2 { auth, outbound }) => {
                oauth2_token(auth, outbound).await.map_err(|e| {
                    ToolError::unauthorized(format!(
                        "auth provider '{provider}': cannot get an access token: {}",
                        e.message
                    ))
                })
            }
            None => {
                let declared = match self.declared.get(provider) {
                    Some((plugin, kind)) => {
                        format!(" (declared by plugin '{plugin}' as {kind})")
                    }
                    None => String::new(),
                };
                Err(ToolError::unauthorized(format!(
                    "no credentials are configured for auth provider '{provider}'{declared}; add an [auth.{provider}] section to toolshed.toml"
                )))
            }
        }
    }
}

/// An access token from the outbound client's cached OAuth2 flow.
async fn oauth2_token(auth: &AuthConfig, outbound: &Outbound) -> Result<String, ToolError> {
    // The flow is applied to a request that is never sent; its Authorization header carries
    // the (cached or freshly fetched) token.
    let probe = outbound.client().get("http://token.invalid/");
    let req = outbound
        .authorize(probe, auth)
        .await
        .map_err(|e| e.into_tool_error())?
        .build()
        .map_err(|e| ToolError::internal(e.to_string()))?;
    req.headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_string)
        .ok_or_else(|| ToolError::internal("the OAuth2 flow produced no bearer token"))
}

struct Scoped {
    credentials: Arc<Credentials>,
    origin: String,
}

#[async_trait::async_trait]
impl TokenSource for Scoped {
    async fn token(&self, provider: &str) -> Result<String, ToolError> {
        self.credentials.token_for(&self.origin, provider).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolshed_core::AuthProviderDef;

    #[test]
    fn debug_never_shows_literal_secrets() {
        let configs = [
            CredentialConfig::ApiKey {
                key: "key-literal-1".into(),
            },
            CredentialConfig::Bearer {
                token: "token-literal-2".into(),
            },
            CredentialConfig::OAuth2ClientCredentials {
                token_url: "https://auth.example.com/token".into(),
                client_id: "client-7".into(),
                client_secret: "secret-literal-3".into(),
                scopes: vec!["read".into()],
                audience: None,
                allow_private: false,
            },
        ];
        let text = format!("{configs:?}");
        for secret in ["key-literal-1", "token-literal-2", "secret-literal-3"] {
            assert!(!text.contains(secret), "{text}");
        }
        assert!(
            text.contains("client-7") && text.contains("https://auth.example.com/token"),
            "{text}"
        );
        let env = CredentialConfig::Bearer {
            token: "env:CRM_TOKEN".into(),
        };
        assert!(format!("{env:?}").contains("env:CRM_TOKEN"));
    }

    #[test]
    fn a_provider_declared_by_two_plugins_is_refused() {
        let a = Plugin::new("alpha", "Alpha", "A.")
            .with_auth(AuthProviderDef::new("shared", "api_key", "A key."));
        let b = Plugin::new("beta", "Beta", "B.")
            .with_auth(AuthProviderDef::new("own", "api_key", "B's own key."))
            .with_auth(AuthProviderDef::new("shared", "api_key", "Same id."));
        let mut c = Credentials::new();
        c.declare_plugin(&a).unwrap();
        let e = c.declare_plugin(&b).err().unwrap().to_string();
        assert!(
            e.contains("'shared'") && e.contains("'alpha'") && e.contains("'beta'"),
            "{e}"
        );
        // The first owner keeps it; nothing of the refused plugin was recorded.
        assert_eq!(
            c.unconfigured(),
            vec![("shared".to_string(), "alpha".to_string())]
        );
        // A plugin declared again keeps its own providers.
        c.declare_plugin(&a).unwrap();
    }
}
