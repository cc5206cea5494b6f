//! Who is calling, through which face, and what they may see.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use toolshed_core::Access;

/// The surface a call arrived through; recorded in the audit log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Face {
    Mcp,
    Http,
    Cli,
    Script,
}

impl Face {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Mcp => "mcp",
            Self::Http => "http",
            Self::Cli => "cli",
            Self::Script => "script",
        }
    }
}

/// A principal with its compiled access. Build it with [`crate::Engine::caller`].
#[derive(Debug, Clone)]
pub struct Caller {
    pub principal: Arc<str>,
    pub access: Access,
    pub face: Face,
}

impl Caller {
    pub fn allows(&self, path: &str) -> bool {
        self.access.allows(path)
    }
}

/// Maps API keys to principals for network faces. With no keys configured, requests are served
/// as the `anonymous` principal (meant for a loopback-only default), if one is set.
#[derive(Debug, Clone, Default)]
pub struct KeyRing {
    keys: std::collections::HashMap<String, String>,
    anonymous: Option<String>,
}

impl KeyRing {
    pub fn new(
        keys: impl IntoIterator<Item = (String, String)>,
        anonymous: Option<String>,
    ) -> Self {
        Self {
            keys: keys.into_iter().collect(),
            anonymous,
        }
    }

    /// The principal for a presented key (`None` = not authenticated).
    pub fn principal(&self, presented: Option<&str>) -> Option<String> {
        match presented {
            Some(k) => self.keys.get(k.trim()).cloned(),
            None => self.anonymous.clone(),
        }
    }

    /// Extracts a key from `Authorization: Bearer K` or `X-Api-Key: K` header values.
    pub fn key_from_headers<'a>(
        authorization: Option<&'a str>,
        x_api_key: Option<&'a str>,
    ) -> Option<&'a str> {
        authorization
            .and_then(|a| {
                a.strip_prefix("Bearer ")
                    .or_else(|| a.strip_prefix("bearer "))
            })
            .or(x_api_key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_map_to_principals() {
        let ring = KeyRing::new([("k1".to_string(), "alice".to_string())], None);
        assert_eq!(ring.principal(Some("k1")).as_deref(), Some("alice"));
        assert_eq!(ring.principal(Some("nope")), None);
        assert_eq!(ring.principal(None), None);
        let open = KeyRing::new([], Some("local".into()));
        assert_eq!(open.principal(None).as_deref(), Some("local"));
        assert_eq!(
            KeyRing::key_from_headers(Some("Bearer abc"), None),
            Some("abc")
        );
        assert_eq!(KeyRing::key_from_headers(None, Some("xyz")), Some("xyz"));
    }
}
