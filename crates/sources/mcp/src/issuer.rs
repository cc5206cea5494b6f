//! The pinned authorization server of an OAuth upstream (`oauth.issuer`,
//! [`OAuthConfig::issuer`](crate::oauth::OAuthConfig::issuer)).
//!
//! Without a pin, Toolshed takes the authorization server the upstream names. With one, the
//! discovery ([`crate::oauth`]) must end at that server:
//!
//! - the protected resource metadata (RFC 9728) must list the pinned issuer among its
//!   `authorization_servers`, else it is refused ([`IssuerError::NotListed`]);
//! - the authorization server metadata (RFC 8414 / OpenID Connect) must carry exactly that
//!   `issuer` ([`IssuerError::Mismatch`], [`IssuerError::Missing`]). When the resource lists
//!   several servers and the first that answered is another one, the pinned server's own
//!   metadata is read instead;
//! - an upstream that publishes no metadata at all cannot be checked and is refused
//!   ([`IssuerError::NotPublished`]).
//!
//! Documents are read with Toolshed's guarded client (no redirects, the address guard unless
//! the source allows private addresses), bounded in time and size.

use std::time::Duration;

use reqwest::Url;
use rmcp::transport::auth::{AuthorizationMetadata, AuthorizationMetadataResolution};
use serde::Deserialize;

/// Why discovery refused the authorization server for a pinned issuer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IssuerError {
    #[error("the protected resource metadata at {url} lists the authorization servers [{listed}], which do not include the pinned issuer {pinned} (oauth.issuer)")]
    NotListed {
        url: String,
        listed: String,
        pinned: String,
    },
    #[error("the authorization server's metadata names the issuer {found}, not the pinned issuer {pinned} (oauth.issuer)")]
    Mismatch { found: String, pinned: String },
    #[error("the authorization server's metadata names no issuer, so it cannot be the pinned issuer {pinned} (oauth.issuer)")]
    Missing { pinned: String },
    #[error("the upstream publishes no OAuth metadata, so the pinned issuer {pinned} (oauth.issuer) cannot be checked")]
    NotPublished { pinned: String },
}

/// How long one metadata document may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest metadata document read.
const MAX_DOCUMENT_BYTES: usize = 256 * 1024;

/// What Toolshed reads of a protected resource metadata document.
#[derive(Debug, Default, Deserialize)]
struct ResourceMetadata {
    #[serde(default)]
    authorization_servers: Vec<String>,
    /// The singular form of early drafts.
    #[serde(default)]
    authorization_server: Option<String>,
}

impl ResourceMetadata {
    fn servers(self) -> Vec<String> {
        let mut out = self.authorization_servers;
        out.extend(self.authorization_server);
        out
    }
}

/// Where the discovery reads documents from.
pub(crate) struct Discovery<'a> {
    pub(crate) client: &'a reqwest::Client,
    /// The upstream's URL.
    pub(crate) resource: &'a Url,
    /// The challenge's `resource_metadata`, if it named one.
    pub(crate) resource_metadata: Option<String>,
}

/// The authorization server metadata to use for `pinned`, given what rmcp's discovery
/// resolved; refused as [`IssuerError`] when it cannot be the pinned server.
pub(crate) async fn pinned_metadata(
    pinned: &str,
    discovery: &Discovery<'_>,
    resolution: AuthorizationMetadataResolution,
) -> Result<AuthorizationMetadata, IssuerError> {
    if !resolution.source.is_discovered() {
        return Err(IssuerError::NotPublished {
            pinned: pinned.into(),
        });
    }
    let listed = listed_servers(discovery).await;
    if let Some((url, servers)) = &listed {
        check_listed(pinned, url, servers)?;
    }
    match resolution.metadata.issuer.as_deref() {
        Some(found) if same_issuer(found, pinned) => Ok(resolution.metadata),
        // The resource lists the pinned server, but another one answered first.
        Some(found) if listed.is_some() => match metadata_of(discovery.client, pinned).await {
            Some(own) => Ok(own),
            None => Err(IssuerError::Mismatch {
                found: found.into(),
                pinned: pinned.into(),
            }),
        },
        Some(found) => Err(IssuerError::Mismatch {
            found: found.into(),
            pinned: pinned.into(),
        }),
        None => Err(IssuerError::Missing {
            pinned: pinned.into(),
        }),
    }
}

/// Refuses a resource whose `servers` (from the document at `url`) do not include `pinned`.
pub(crate) fn check_listed(pinned: &str, url: &str, servers: &[String]) -> Result<(), IssuerError> {
    if servers.iter().any(|s| same_issuer(s, pinned)) {
        return Ok(());
    }
    Err(IssuerError::NotListed {
        url: url.into(),
        listed: servers.join(", "),
        pinned: pinned.into(),
    })
}

/// Whether two issuer identifiers name the same server: equal, or equal but for a trailing
/// slash on an issuer without a path (as RFC 8414 compares them in practice).
pub(crate) fn same_issuer(a: &str, b: &str) -> bool {
    fn root_trimmed(s: &str) -> &str {
        match s.strip_suffix('/') {
            Some(t) if Url::parse(t).is_ok_and(|u| u.path().is_empty() || u.path() == "/") => t,
            _ => s,
        }
    }
    a == b || root_trimmed(a) == root_trimmed(b)
}

/// The authorization servers the upstream's protected resource metadata lists, with the
/// document's URL; `None` when no document could be read.
async fn listed_servers(discovery: &Discovery<'_>) -> Option<(String, Vec<String>)> {
    for url in resource_metadata_urls(discovery) {
        if let Some(doc) = fetch::<ResourceMetadata>(discovery.client, &url).await {
            return Some((url.to_string(), doc.servers()));
        }
    }
    None
}

/// The challenge's `resource_metadata`, else the RFC 9728 well-known locations of the
/// upstream's URL (with its path, then at the root).
fn resource_metadata_urls(discovery: &Discovery<'_>) -> Vec<Url> {
    if let Some(url) = discovery
        .resource_metadata
        .as_deref()
        .and_then(|u| Url::parse(u).ok())
    {
        return vec![url];
    }
    well_known(discovery.resource, "oauth-protected-resource")
}

/// `/.well-known/{name}{path}` on `base`'s origin, then `/.well-known/{name}` (the second only
/// when `base` has a path).
fn well_known(base: &Url, name: &str) -> Vec<Url> {
    let path = base.path().trim_end_matches('/');
    let mut out = vec![at(base, &format!("/.well-known/{name}{path}"))];
    let root = at(base, &format!("/.well-known/{name}"));
    if !out.contains(&root) {
        out.push(root);
    }
    out
}

/// `base` with `path` and no query or fragment.
fn at(base: &Url, path: &str) -> Url {
    let mut url = base.clone();
    url.set_query(None);
    url.set_fragment(None);
    url.set_path(path);
    url
}

/// Where the server with issuer `issuer` publishes its metadata: RFC 8414's path-inserted
/// location, then OpenID Connect's (inserted, then appended).
fn metadata_urls(issuer: &Url) -> Vec<Url> {
    let path = issuer.path().trim_end_matches('/');
    let mut out = vec![
        at(
            issuer,
            &format!("/.well-known/oauth-authorization-server{path}"),
        ),
        at(issuer, &format!("/.well-known/openid-configuration{path}")),
    ];
    let appended = at(issuer, &format!("{path}/.well-known/openid-configuration"));
    if !out.contains(&appended) {
        out.push(appended);
    }
    out
}

/// The metadata the server with issuer `pinned` publishes about itself, when it names that
/// issuer.
async fn metadata_of(client: &reqwest::Client, pinned: &str) -> Option<AuthorizationMetadata> {
    let issuer = Url::parse(pinned).ok()?;
    for url in metadata_urls(&issuer) {
        let Some(metadata) = fetch::<AuthorizationMetadata>(client, &url).await else {
            continue;
        };
        if metadata
            .issuer
            .as_deref()
            .is_some_and(|i| same_issuer(i, pinned))
        {
            return Some(metadata);
        }
    }
    None
}

/// A JSON document at `url` (200, at most [`MAX_DOCUMENT_BYTES`], within
/// [`FETCH_TIMEOUT`]); `None` when there is none or it does not parse.
async fn fetch<T: serde::de::DeserializeOwned>(client: &reqwest::Client, url: &Url) -> Option<T> {
    let read = async {
        let mut response = client
            .get(url.clone())
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .ok()?;
        if response.status() != reqwest::StatusCode::OK {
            return None;
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.ok()? {
            if body.len() + chunk.len() > MAX_DOCUMENT_BYTES {
                return None;
            }
            body.extend_from_slice(&chunk);
        }
        serde_json::from_slice(&body).ok()
    };
    match tokio::time::timeout(FETCH_TIMEOUT, read).await {
        Ok(doc) => doc,
        Err(_) => {
            tracing::debug!(url = %url, "metadata document timed out");
            None
        }
    }
}

/// Checks an `oauth.issuer` value: an https URL (http only on a loopback host) without query
/// or fragment; the reason names the field.
pub(crate) fn validate(issuer: &str) -> Result<(), String> {
    let refused = || {
        format!(
            "oauth.issuer '{issuer}' must be an https URL (or an http one on a loopback host) without query or fragment"
        )
    };
    let url = Url::parse(issuer).map_err(|_| refused())?;
    let loopback = matches!(url.host_str(), Some("localhost" | "127.0.0.1" | "[::1]"));
    let scheme_ok = url.scheme() == "https" || (url.scheme() == "http" && loopback);
    if !scheme_ok || url.query().is_some() || url.fragment().is_some() {
        return Err(refused());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issuers_compare_exactly_but_for_a_root_slash() {
        assert!(same_issuer(
            "https://id.example.com",
            "https://id.example.com/"
        ));
        assert!(same_issuer(
            "https://id.example.com/t1",
            "https://id.example.com/t1"
        ));
        assert!(!same_issuer(
            "https://id.example.com/t1",
            "https://id.example.com/t1/"
        ));
        assert!(!same_issuer(
            "https://id.example.com",
            "https://evil.example.com"
        ));
        assert!(!same_issuer(
            "https://id.example.com",
            "http://id.example.com"
        ));
    }

    #[test]
    fn a_list_without_the_pinned_issuer_is_refused_naming_both() {
        let listed = vec!["https://a.example.com".to_string()];
        assert!(check_listed("https://a.example.com/", "https://r/x", &listed).is_ok());
        let e = check_listed("https://pin.example.com", "https://r/x", &listed)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("https://pin.example.com") && e.contains("https://a.example.com"),
            "{e}"
        );
    }

    #[test]
    fn well_known_locations_keep_the_path_first() {
        let base = Url::parse("https://mcp.example.com/tenant/mcp?x=1").unwrap();
        let urls: Vec<String> = well_known(&base, "oauth-protected-resource")
            .iter()
            .map(Url::to_string)
            .collect();
        assert_eq!(
            urls,
            [
                "https://mcp.example.com/.well-known/oauth-protected-resource/tenant/mcp",
                "https://mcp.example.com/.well-known/oauth-protected-resource",
            ]
        );
    }

    #[test]
    fn an_issuers_metadata_is_looked_for_where_rfc_8414_and_oidc_put_it() {
        let show = |issuer: &str| -> Vec<String> {
            metadata_urls(&Url::parse(issuer).unwrap())
                .iter()
                .map(Url::to_string)
                .collect()
        };
        assert_eq!(
            show("https://id.example.com"),
            [
                "https://id.example.com/.well-known/oauth-authorization-server",
                "https://id.example.com/.well-known/openid-configuration",
            ]
        );
        assert_eq!(
            show("https://id.example.com/t1"),
            [
                "https://id.example.com/.well-known/oauth-authorization-server/t1",
                "https://id.example.com/.well-known/openid-configuration/t1",
                "https://id.example.com/t1/.well-known/openid-configuration",
            ]
        );
    }

    #[test]
    fn issuer_values_are_checked() {
        assert!(validate("https://id.example.com").is_ok());
        assert!(validate("http://127.0.0.1:8080").is_ok());
        for bad in [
            "id.example.com",
            "http://id.example.com",
            "https://id.example.com/?x=1",
            "https://id.example.com/#f",
        ] {
            let e = validate(bad).unwrap_err();
            assert!(e.contains("oauth.issuer"), "{bad}: {e}");
        }
    }
}
