//! Where `serve` may listen. Without API keys every HTTP caller is the local principal with all
//! of its tools, so such a server listens on loopback addresses only; a non-loopback address
//! needs keys, or `[http] insecure_listen = true` as an explicit choice.

use std::net::SocketAddr;

use anyhow::Context;

use crate::config::Config;

/// The first address that is reachable from other machines, if any.
fn exposed(addrs: &[SocketAddr]) -> Option<SocketAddr> {
    addrs.iter().copied().find(|a| !a.ip().is_loopback())
}

/// Refuses an address other machines can reach when no principal has an API key and no
/// `[oauth]` is configured (every caller would be the anonymous principal), unless `[http]
/// insecure_listen` is set. Checked before anything listens.
pub async fn check(addr: &str, config: &Config) -> anyhow::Result<()> {
    if config.has_api_keys() || config.oauth.is_some() || config.http.insecure_listen {
        return Ok(());
    }
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host(addr)
        .await
        .with_context(|| format!("resolving the listen address {addr}"))?
        .collect();
    if let Some(open) = exposed(&addrs) {
        anyhow::bail!(
            "refusing to listen on {addr} ({}): it is not a loopback address and no principal \
             has an API key, so anyone who can reach it could use every tool. Give principals \
             `api_keys`, listen on 127.0.0.1, or set [http] insecure_listen = true \
             (TOOLSHED_HTTP__INSECURE_LISTEN=true) to accept the risk",
            open.ip()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addrs(list: &[&str]) -> Vec<SocketAddr> {
        list.iter().map(|a| a.parse().unwrap()).collect()
    }

    #[test]
    fn only_loopback_addresses_are_private() {
        assert_eq!(exposed(&addrs(&["127.0.0.1:1", "[::1]:1"])), None);
        assert_eq!(
            exposed(&addrs(&["127.0.0.1:1", "0.0.0.0:7"])),
            Some("0.0.0.0:7".parse().unwrap())
        );
        assert!(exposed(&addrs(&["[::]:7"])).is_some());
        assert!(exposed(&addrs(&["192.168.1.5:7"])).is_some());
    }

    #[tokio::test]
    async fn keys_or_the_setting_allow_other_addresses() {
        let mut config = Config::default();
        let e = check("0.0.0.0:0", &config).await.unwrap_err().to_string();
        assert!(
            e.contains("0.0.0.0:0") && e.contains("insecure_listen"),
            "{e}"
        );
        check("127.0.0.1:0", &config).await.unwrap();
        check("localhost:0", &config).await.unwrap();
        config.http.insecure_listen = true;
        check("0.0.0.0:0", &config).await.unwrap();
    }
}
