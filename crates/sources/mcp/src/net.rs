//! Outbound address policy for streamable HTTP upstreams.
//!
//! Unless `allow_private` is set, Toolshed refuses to talk to loopback, private, link-local,
//! unique-local, CGNAT, multicast and unspecified addresses. The check runs twice: on the URL's
//! host before connecting (a literal address, or every address the name resolves to), and inside
//! the HTTP client's resolver for every later connection, which drops non-public answers so that
//! a name re-pointed at a private address later (DNS rebinding) is not followed. Proxies from the
//! environment are disabled and redirects are not followed, so neither can bypass the check.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// Why `ip` is not a public address, or `None` when it is: the workspace's one outbound
/// classification ([`toolshed_outbound::net::classify`]).
pub fn non_public_reason(ip: IpAddr) -> Option<&'static str> {
    toolshed_outbound::net::classify(ip)
}

/// Checks a URL host before connecting: a literal address directly, a name by resolving it.
/// Returns `Err((host, reason))` when the host is not public.
pub async fn check_host(url: &reqwest::Url) -> Result<(), (String, String)> {
    let Some(host) = url.host_str() else {
        return Err((url.to_string(), "no host".into()));
    };
    let port = url.port_or_known_default().unwrap_or(443);
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return match non_public_reason(ip) {
            Some(r) => Err((ip.to_string(), r.into())),
            None => Ok(()),
        };
    }
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((bare, port))
        .await
        .map_err(|e| (bare.to_string(), format!("cannot resolve: {e}")))?
        .collect();
    if addrs.is_empty() {
        return Err((bare.to_string(), "resolves to no address".into()));
    }
    for addr in addrs {
        if let Some(r) = non_public_reason(addr.ip()) {
            return Err((
                bare.to_string(),
                format!("resolves to {}, a {r}", addr.ip()),
            ));
        }
    }
    Ok(())
}

/// A resolver that answers only with public addresses.
#[derive(Debug, Default)]
struct PublicOnlyResolver;

impl Resolve for PublicOnlyResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_string();
        Box::pin(async move {
            let all: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let public: Vec<SocketAddr> = all
                .into_iter()
                .filter(|a| non_public_reason(a.ip()).is_none())
                .collect();
            if public.is_empty() {
                return Err(format!(
                    "'{host}' resolves only to loopback/private/link-local addresses"
                )
                .into());
            }
            let addrs: Addrs = Box::new(public.into_iter());
            Ok(addrs)
        })
    }
}

/// The HTTP client for one upstream: no environment proxies, no redirects, and (unless
/// `allow_private`) a resolver that refuses non-public addresses.
pub fn http_client(allow_private: bool) -> Result<reqwest::Client, reqwest::Error> {
    let mut builder = reqwest::Client::builder()
        .no_proxy()
        .tcp_nodelay(true)
        .redirect(reqwest::redirect::Policy::none());
    if !allow_private {
        builder = builder.dns_resolver(Arc::new(PublicOnlyResolver));
    }
    builder.build()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn classifies_addresses() {
        for s in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fd00::1",
            "fe80::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "64:ff9b::a00:1",
        ] {
            assert!(non_public_reason(ip(s)).is_some(), "{s} should be refused");
        }
        for s in [
            "1.1.1.1",
            "8.8.8.8",
            "172.32.0.1",
            "100.128.0.1",
            "2606:4700:4700::1111",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
        ] {
            assert!(non_public_reason(ip(s)).is_none(), "{s} should be allowed");
        }
        assert_eq!(non_public_reason(ip("127.0.0.1")), Some("loopback"));
    }

    #[tokio::test]
    async fn host_literals_and_local_names_are_refused() {
        for u in [
            "http://127.0.0.1:9/mcp",
            "http://[::1]:9/mcp",
            "http://10.0.0.5/mcp",
            "http://localhost:9/mcp",
        ] {
            let url = reqwest::Url::parse(u).unwrap();
            let (host, reason) = check_host(&url).await.unwrap_err();
            assert!(!host.is_empty() && !reason.is_empty(), "{u}");
        }
        let url = reqwest::Url::parse("http://93.184.215.14/mcp").unwrap();
        assert!(check_host(&url).await.is_ok());
    }

    #[tokio::test]
    async fn resolver_drops_private_answers() {
        let r = PublicOnlyResolver;
        let err = match r.resolve("localhost".parse().unwrap()).await {
            Ok(_) => panic!("localhost must not resolve"),
            Err(e) => e,
        };
        assert!(err.to_string().contains("localhost"));
    }
}
