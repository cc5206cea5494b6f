//! API keys of network faces.
//!
//! Keys are kept only as SHA-256 digests and a presented key is compared, digest against
//! digest, in constant time with every configured key. Empty keys and empty principal ids are
//! never accepted.

/// Maps API keys to principals for network faces. With no keys configured, requests are served
/// as the `anonymous` principal (meant for a loopback-only default), if one is set.
#[derive(Clone, Default)]
pub struct KeyRing {
    /// SHA-256 of each key, with its principal.
    keys: Vec<([u8; 32], String)>,
    anonymous: Option<String>,
}

impl std::fmt::Debug for KeyRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyRing")
            .field("keys", &self.keys.len())
            .field("anonymous", &self.anonymous)
            .finish()
    }
}

fn digest(key: &str) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(key.as_bytes()).into()
}

impl KeyRing {
    /// Keys (trimmed) with their principals; a pair with an empty key or principal id is left
    /// out, so it can never authenticate.
    pub fn new(
        keys: impl IntoIterator<Item = (String, String)>,
        anonymous: Option<String>,
    ) -> Self {
        Self {
            keys: keys
                .into_iter()
                .filter(|(k, p)| !k.trim().is_empty() && !p.trim().is_empty())
                .map(|(k, p)| (digest(k.trim()), p))
                .collect(),
            anonymous: anonymous.filter(|a| !a.trim().is_empty()),
        }
    }

    /// The same keys, without the anonymous principal (every request must then authenticate).
    pub fn without_anonymous(mut self) -> Self {
        self.anonymous = None;
        self
    }

    /// The principal for a presented key (`None` = not authenticated). Every configured key is
    /// compared, each in constant time.
    pub fn principal(&self, presented: Option<&str>) -> Option<String> {
        use subtle::ConstantTimeEq;
        let Some(k) = presented else {
            return self.anonymous.clone();
        };
        let k = k.trim();
        if k.is_empty() {
            return None;
        }
        let d = digest(k);
        let mut found = None;
        for (stored, principal) in &self.keys {
            if bool::from(stored.ct_eq(&d)) && found.is_none() {
                found = Some(principal.clone());
            }
        }
        found
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

    /// Empty keys and empty principal ids never authenticate; keys are kept only as digests.
    #[test]
    fn empty_keys_and_principals_never_match() {
        let ring = KeyRing::new(
            [
                ("".to_string(), "alice".to_string()),
                ("  ".to_string(), "bob".to_string()),
                ("k-nobody".to_string(), "".to_string()),
                ("k-carol".to_string(), "carol".to_string()),
            ],
            None,
        );
        assert_eq!(ring.principal(Some("")), None);
        assert_eq!(ring.principal(Some("  ")), None);
        assert_eq!(ring.principal(Some("k-nobody")), None);
        assert_eq!(ring.principal(Some(" k-carol ")).as_deref(), Some("carol"));
        let shown = format!("{ring:?}");
        assert!(!shown.contains("k-carol"), "{shown}");
        assert_eq!(ring.keys.len(), 1);
        assert_eq!(ring.keys[0].0, digest("k-carol"));
    }
}
