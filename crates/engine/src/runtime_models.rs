//! Model endpoints added at runtime (`toolshed models add`), beside `[models.<id>]` of the
//! configuration: read from the store when a run needs one, their key and headers unsealed
//! with the server's secret key, and rebuilt when they changed since they were last used (so
//! every replica on a shared database sees the same endpoints). A configured id always wins.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use toolshed_models::{Endpoint, Provider};
use toolshed_outbound::Secret;

use toolshed_store::models::{StoredModel, MAX_MODEL_URL};

use crate::{Engine, EngineError};

/// Longest request timeout accepted, in milliseconds.
pub const MAX_TIMEOUT_MS: u64 = 600_000;

/// A model endpoint to keep in the store.
#[derive(Debug, Clone)]
pub struct NewModel {
    pub id: String,
    pub kind: String,
    pub base_url: Option<String>,
    pub secrets: ModelSecrets,
    pub timeout_ms: u64,
    pub allow_private: bool,
}

/// Checks a new runtime endpoint (an id of the agent-name grammar, a known kind, a base URL the
/// address rule allows, a timeout in range) and seals its secrets for the store.
pub fn stored_model(
    m: NewModel,
    sealer: &toolshed_sealed::SecretBox,
) -> Result<StoredModel, String> {
    let id_ok = m.id.len() <= 64
        && m.id.starts_with(|c: char| c.is_ascii_lowercase())
        && m.id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
    if !id_ok {
        return Err(format!(
            "model id '{}': use 1-64 characters a-z, 0-9, '_' and '-', starting with a letter",
            m.id
        ));
    }
    let provider = Provider::parse(&m.kind)
        .ok_or_else(|| format!("kind '{}' is not known: use openai or anthropic", m.kind))?;
    if m.base_url.as_ref().is_some_and(|u| u.len() > MAX_MODEL_URL) {
        return Err(format!("base URL is longer than {MAX_MODEL_URL} bytes"));
    }
    if m.timeout_ms == 0 || m.timeout_ms > MAX_TIMEOUT_MS {
        return Err(format!("timeout must be 1 to {MAX_TIMEOUT_MS} ms"));
    }
    let endpoint = Endpoint {
        id: m.id.clone(),
        provider,
        base_url: m
            .base_url
            .clone()
            .unwrap_or_else(|| provider.default_base_url().to_string()),
        api_key: None,
        headers: vec![],
        timeout: Duration::from_millis(m.timeout_ms),
        allow_private: m.allow_private,
        unavailable: None,
    };
    toolshed_models::Models::check(&endpoint).map_err(|e| e.to_string())?;
    let secrets = serde_json::to_string(&m.secrets).map_err(|e| e.to_string())?;
    Ok(StoredModel {
        id: m.id,
        kind: provider.as_str().to_string(),
        base_url: m.base_url,
        sealed: sealer.seal(&secrets),
        timeout_ms: m.timeout_ms as i64,
        allow_private: m.allow_private,
        updated_at: 0,
    })
}

/// The secret part of a runtime endpoint, sealed as one JSON text.
#[derive(Default, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelSecrets {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<(String, String)>,
}

impl std::fmt::Debug for ModelSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelSecrets")
            .field("api_key", &self.api_key.as_ref().map(|_| "[REDACTED]"))
            .field(
                "headers",
                &self.headers.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl Engine {
    /// Makes endpoint `credential` ready for a run: a configured one as it is; a runtime one
    /// (re)built from the store when it is new or changed, and dropped when it was deleted.
    pub(crate) async fn ensure_model(&self, credential: &str) -> Result<(), EngineError> {
        let models = &self.inner.models;
        let known = self.inner.runtime_models.lock().get(credential).copied();
        if models.has(credential) && known.is_none() {
            return Ok(());
        }
        // One rebuild at a time: the store's newest version wins.
        let _building = self.inner.runtime_models_build.lock().await;
        let known = self.inner.runtime_models.lock().get(credential).copied();
        let not_configured = || {
            EngineError::InvalidRun(format!(
                "model credential '{credential}' is not configured ([models.{credential}] in toolshed.toml, or toolshed models add)"
            ))
        };
        let Some(row) = self.inner.store.get_model(credential).await? else {
            if known.is_some() {
                models.remove(credential);
                self.inner.runtime_models.lock().remove(credential);
            }
            return Err(not_configured());
        };
        if known == Some(row.updated_at) {
            return Ok(());
        }
        let sealer = self.inner.sealer.as_ref().ok_or_else(|| {
            EngineError::InvalidRun(format!(
                "model credential '{credential}' was added at runtime, and this server has no secret key to open it"
            ))
        })?;
        let secrets: ModelSecrets = sealer
            .open(&row.sealed)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .ok_or_else(|| {
                EngineError::InvalidRun(format!(
                    "model credential '{credential}': its stored key cannot be opened with this server's secret key"
                ))
            })?;
        let provider = Provider::parse(&row.kind).ok_or_else(not_configured)?;
        let endpoint = Endpoint {
            id: row.id.clone(),
            provider,
            base_url: row
                .base_url
                .clone()
                .unwrap_or_else(|| provider.default_base_url().to_string()),
            api_key: secrets.api_key.map(Secret::new),
            headers: secrets.headers,
            timeout: Duration::from_millis(row.timeout_ms.max(1) as u64),
            allow_private: row.allow_private,
            unavailable: None,
        };
        models
            .put(endpoint)
            .map_err(|e| EngineError::InvalidRun(e.to_string()))?;
        self.inner
            .runtime_models
            .lock()
            .insert(credential.to_string(), row.updated_at);
        Ok(())
    }
}
