//! `[oauth]`: this server as an OAuth 2.1 protected resource, and the issuers whose tokens it
//! trusts.
//!
//! ```toml
//! [oauth]
//! resource = "https://toolshed.example.com"   # the audience a token must carry
//! scopes = ["toolshed"]                       # required scopes (optional)
//! default_roles = ["reader"]                  # roles of a signed-in principal no mapping names
//! [[oauth.issuers]]
//! issuer = "https://id.example.com"
//! roles_claim = "groups"
//! role_map = { admins = ["admin"], devs = ["dev"] }
//! allow_private = false
//! ```
//!
//! [`OAuthConfig::check`] refuses a configuration that could not work (a resource that is not an
//! absolute http(s) URL, no issuer, an issuer twice, a role the policy does not define), naming
//! the field.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Longest accepted configured string (URLs, claim names, scopes, role names).
const MAX_FIELD: usize = 2048;

/// `[oauth]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OAuthConfig {
    /// This server's resource URI (RFC 8707): tokens must name it in `aud`.
    pub resource: String,
    /// Scopes every token must carry.
    pub scopes: Vec<String>,
    /// Roles of a signed-in principal whose claims no `role_map` entry names.
    pub default_roles: Vec<String>,
    /// The authorization servers whose tokens are accepted.
    pub issuers: Vec<IssuerConfig>,
    /// Clock skew allowed on `exp` and `nbf`, in seconds (default 60).
    pub leeway_secs: u64,
}

/// `[[oauth.issuers]]`: one trusted authorization server.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IssuerConfig {
    /// The issuer identifier; its metadata is read from
    /// `{issuer}/.well-known/openid-configuration` (or RFC 8414's
    /// `/.well-known/oauth-authorization-server`).
    pub issuer: String,
    /// The claim whose values map to roles (a top-level claim, or a dotted path such as
    /// `realm_access.roles`).
    pub roles_claim: Option<String>,
    /// Claim value → roles.
    pub role_map: BTreeMap<String, Vec<String>>,
    /// Reach the issuer on loopback or private addresses (as for sources).
    pub allow_private: bool,
    /// Check opaque (non-JWT) tokens at the issuer's introspection endpoint (RFC 7662) with
    /// these client credentials.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub introspection: Option<IntrospectionConfig>,
}

/// Client credentials for token introspection. `client_secret` accepts `env:NAME`.
#[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IntrospectionConfig {
    pub client_id: String,
    pub client_secret: String,
}

impl std::fmt::Debug for IntrospectionConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IntrospectionConfig")
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &toolshed_outbound::secret::shown(&self.client_secret),
            )
            .finish()
    }
}

/// A configuration that cannot work, with the field it is about.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("[oauth] {field}: {message}")]
pub struct OAuthConfigError {
    pub field: String,
    pub message: String,
}

fn err(field: impl Into<String>, message: impl Into<String>) -> OAuthConfigError {
    OAuthConfigError {
        field: field.into(),
        message: message.into(),
    }
}

/// An absolute http(s) URL without fragment, or why not.
fn http_url(s: &str) -> Result<url::Url, String> {
    if s.len() > MAX_FIELD {
        return Err(format!("longer than {MAX_FIELD} characters"));
    }
    let u = url::Url::parse(s).map_err(|e| format!("'{s}' is not an absolute URL ({e})"))?;
    if !matches!(u.scheme(), "http" | "https") {
        return Err(format!("'{s}' is not an http or https URL"));
    }
    if u.fragment().is_some() {
        return Err(format!("'{s}' has a fragment"));
    }
    if u.host_str().is_none() {
        return Err(format!("'{s}' has no host"));
    }
    Ok(u)
}

/// `s` without a trailing slash: `https://a.example/` and `https://a.example` name one resource.
pub(crate) fn trim_slash(s: &str) -> &str {
    s.strip_suffix('/').unwrap_or(s)
}

impl OAuthConfig {
    /// The leeway on `exp`/`nbf` (60 s when unset).
    pub fn leeway(&self) -> u64 {
        if self.leeway_secs == 0 {
            60
        } else {
            self.leeway_secs.min(600)
        }
    }

    /// Refuses what cannot work; `role_exists` says whether the policy defines a role.
    pub fn check(&self, role_exists: impl Fn(&str) -> bool) -> Result<(), OAuthConfigError> {
        http_url(&self.resource).map_err(|m| err("resource", m))?;
        if self.issuers.is_empty() {
            return Err(err(
                "issuers",
                "no issuer: add at least one [[oauth.issuers]] with `issuer = \"https://...\"`",
            ));
        }
        for s in &self.scopes {
            if s.is_empty() || s.len() > MAX_FIELD || s.contains(char::is_whitespace) {
                return Err(err("scopes", format!("'{s}' is not a scope token")));
            }
        }
        let role = |field: &str, r: &str| {
            if role_exists(r) {
                Ok(())
            } else {
                Err(err(
                    field,
                    format!("role '{r}' is not defined in [[roles]]"),
                ))
            }
        };
        for r in &self.default_roles {
            role("default_roles", r)?;
        }
        let mut seen = std::collections::BTreeSet::new();
        for (i, iss) in self.issuers.iter().enumerate() {
            let field = |name: &str| format!("issuers[{}].{name}", i + 1);
            http_url(&iss.issuer).map_err(|m| err(field("issuer"), m))?;
            if !seen.insert(trim_slash(&iss.issuer).to_string()) {
                return Err(err(
                    field("issuer"),
                    format!("'{}' is listed twice", iss.issuer),
                ));
            }
            if let Some(c) = &iss.roles_claim {
                if c.is_empty() || c.len() > MAX_FIELD {
                    return Err(err(field("roles_claim"), "empty or too long"));
                }
            }
            if !iss.role_map.is_empty() && iss.roles_claim.is_none() {
                return Err(err(
                    field("role_map"),
                    "a role_map needs roles_claim (the claim whose values it maps)",
                ));
            }
            for roles in iss.role_map.values() {
                for r in roles {
                    role(&field("role_map"), r)?;
                }
            }
            if let Some(x) = &iss.introspection {
                if x.client_id.is_empty() {
                    return Err(err(field("introspection.client_id"), "empty"));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn good() -> OAuthConfig {
        OAuthConfig {
            resource: "https://toolshed.example.com".into(),
            scopes: vec!["toolshed".into()],
            default_roles: vec!["reader".into()],
            issuers: vec![IssuerConfig {
                issuer: "https://id.example.com".into(),
                roles_claim: Some("groups".into()),
                role_map: [("admins".to_string(), vec!["admin".to_string()])].into(),
                ..IssuerConfig::default()
            }],
            leeway_secs: 0,
        }
    }

    #[test]
    fn a_workable_configuration_passes() {
        assert_eq!(good().check(|r| r == "reader" || r == "admin"), Ok(()));
        assert_eq!(good().leeway(), 60);
    }

    /// Each mistake is refused with the field it is about.
    #[test]
    fn mistakes_name_their_field() {
        let roles = |r: &str| r == "reader" || r == "admin";
        type Change = Box<dyn Fn(&mut OAuthConfig)>;
        let cases: Vec<(Change, &str)> = vec![
            (Box::new(|c| c.resource = "toolshed".into()), "resource"),
            (
                Box::new(|c| c.resource = "ftp://x.example".into()),
                "resource",
            ),
            (Box::new(|c| c.issuers.clear()), "issuers"),
            (Box::new(|c| c.scopes = vec!["a b".into()]), "scopes"),
            (
                Box::new(|c| c.default_roles = vec!["nope".into()]),
                "default_roles",
            ),
            (
                Box::new(|c| c.issuers[0].issuer = "id.example.com".into()),
                "issuers[1].issuer",
            ),
            (
                Box::new(|c| {
                    let again = c.issuers[0].clone();
                    c.issuers.push(again)
                }),
                "issuers[2].issuer",
            ),
            (
                Box::new(|c| {
                    c.issuers[0]
                        .role_map
                        .insert("x".into(), vec!["ghost".into()]);
                }),
                "issuers[1].role_map",
            ),
            (
                Box::new(|c| c.issuers[0].roles_claim = None),
                "issuers[1].role_map",
            ),
        ];
        for (change, field) in cases {
            let mut c = good();
            change(&mut c);
            let e = c.check(roles).expect_err(field);
            assert_eq!(e.field, field, "{e}");
        }
    }

    #[test]
    fn the_introspection_secret_is_not_shown() {
        let x = IntrospectionConfig {
            client_id: "rs".into(),
            client_secret: "s3cret-value".into(),
        };
        assert!(!format!("{x:?}").contains("s3cret-value"));
    }
}
