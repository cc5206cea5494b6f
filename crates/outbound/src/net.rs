//! Address classification and the DNS resolver that refuses non-public addresses.
//!
//! Literal IPs in URLs are checked by [`check_url`]; names go through [`GuardedResolver`], which
//! reqwest uses for every connection (redirect targets included), so a name that resolves, or
//! later rebinds, to a private address is refused at connect time.

use std::error::Error as StdError;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::str::FromStr;
use std::sync::Arc;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use crate::error::OutboundError;

/// Why an address is not public, or `None` when it is.
pub fn classify(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn classify_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let o = ip.octets();
    if o[0] == 127 {
        Some("loopback")
    } else if o[0] == 10
        || (o[0] == 172 && (16..=31).contains(&o[1]))
        || (o[0] == 192 && o[1] == 168)
    {
        Some("private")
    } else if o[0] == 169 && o[1] == 254 {
        Some("link-local")
    } else if o[0] == 0 {
        Some("unspecified")
    } else if o[0] == 100 && (64..=127).contains(&o[1]) {
        Some("CGNAT (shared)")
    } else if ip.is_broadcast() {
        Some("broadcast")
    } else if ip.is_multicast() {
        Some("multicast")
    } else if o[0] >= 240 {
        Some("reserved")
    } else if o[0] == 198 && (o[1] & 0xfe) == 18 {
        Some("benchmarking")
    } else if ip.is_documentation() {
        Some("documentation")
    } else {
        None
    }
}

fn classify_v6(ip: Ipv6Addr) -> Option<&'static str> {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return classify_v4(v4);
    }
    let s = ip.segments();
    if ip.is_loopback() {
        Some("loopback")
    } else if ip.is_unspecified() {
        Some("unspecified")
    } else if (s[0] & 0xfe00) == 0xfc00 {
        Some("private (unique local)")
    } else if (s[0] & 0xffc0) == 0xfe80 || (s[0] & 0xffc0) == 0xfec0 {
        Some("link-local")
    } else if (s[0] & 0xff00) == 0xff00 {
        Some("multicast")
    } else if s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0, 0, 0, 0] {
        // NAT64: judge the embedded IPv4 address.
        let v4 = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
        classify_v4(v4)
    } else {
        None
    }
}

/// An address block, `ADDR/PREFIX` (`10.0.0.0/8`, `fd00::/8`) or one address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Network {
    addr: IpAddr,
    prefix: u8,
}

impl Network {
    /// Whether `ip` lies in this block (an IPv4-mapped IPv6 address counts as its IPv4 one).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

impl FromStr for Network {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let addr: IpAddr = addr
            .trim()
            .parse()
            .map_err(|_| format!("'{s}' is not an address or ADDR/PREFIX block"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => p
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= max)
                .ok_or_else(|| format!("'{s}': the prefix must be a number from 0 to {max}"))?,
        };
        Ok(Self { addr, prefix })
    }
}

impl fmt::Display for Network {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

impl serde::Serialize for Network {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Network {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// The refusal reason of an address inside a denied block.
pub const DENIED: &str = "denied by configuration";

/// Which addresses a client may connect to: public ones (and with `allow_private` also
/// loopback, private and link-local ones), never one inside a `denied` block.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AddressRule {
    pub allow_private: bool,
    pub denied: Vec<Network>,
}

impl AddressRule {
    /// Public addresses only, or also private ones.
    pub fn new(allow_private: bool) -> Self {
        Self {
            allow_private,
            denied: Vec::new(),
        }
    }

    /// Why `ip` is refused, or `None` when it may be contacted.
    pub fn refusal(&self, ip: IpAddr) -> Option<&'static str> {
        if self.denied.iter().any(|n| n.contains(ip)) {
            return Some(DENIED);
        }
        if self.allow_private {
            None
        } else {
            classify(ip)
        }
    }
}

/// Refuses a URL whose host is a literal non-public IP (names are checked at resolution).
pub fn check_url(url: &url::Url, allow_private: bool) -> Result<(), OutboundError> {
    check_url_under(url, &AddressRule::new(allow_private))
}

/// [`check_url`] under an [`AddressRule`].
pub fn check_url_under(url: &url::Url, rule: &AddressRule) -> Result<(), OutboundError> {
    match url.scheme() {
        "http" | "https" => {}
        other => {
            return Err(OutboundError::InvalidUrl {
                url: url.to_string(),
                reason: format!("scheme '{other}' is not allowed; use http or https"),
            })
        }
    }
    let ip = match url.host() {
        Some(url::Host::Ipv4(v4)) => IpAddr::V4(v4),
        Some(url::Host::Ipv6(v6)) => IpAddr::V6(v6),
        Some(url::Host::Domain(_)) => return Ok(()),
        None => {
            return Err(OutboundError::InvalidUrl {
                url: url.to_string(),
                reason: "it has no host".into(),
            })
        }
    };
    match rule.refusal(ip) {
        Some(class) => Err(OutboundError::refused_address(
            url.host_str().unwrap_or_default().to_string(),
            ip.to_string(),
            class,
        )),
        None => Ok(()),
    }
}

/// Checks a URL before a transport connects on its own: a literal address directly, a name by
/// resolving it now (every answer must be public), so that a refusal comes early and names the
/// address. The resolver of the client ([`GuardedResolver`]) still checks every connection.
pub async fn check_host(url: &url::Url, allow_private: bool) -> Result<(), OutboundError> {
    check_url(url, allow_private)?;
    if allow_private {
        return Ok(());
    }
    let Some(url::Host::Domain(name)) = url.host() else {
        return Ok(());
    };
    let port = url.port_or_known_default().unwrap_or(443);
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((name, port))
        .await
        .map_err(|e| OutboundError::Http(format!("cannot resolve {name}: {e}")))?
        .collect();
    if addrs.is_empty() {
        return Err(OutboundError::Http(format!(
            "{name} resolves to no address"
        )));
    }
    match addrs
        .iter()
        .find_map(|a| classify(a.ip()).map(|c| (a.ip(), c)))
    {
        Some((addr, class)) => Err(OutboundError::PrivateAddress {
            host: name.to_string(),
            addr: addr.to_string(),
            class,
        }),
        None => Ok(()),
    }
}

/// The error the resolver returns when a name resolves only to refused addresses.
#[derive(Debug, Clone)]
pub struct Refused {
    pub host: String,
    pub addr: IpAddr,
    pub class: &'static str,
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} resolves to {}, a {} address",
            self.host, self.addr, self.class
        )
    }
}

impl StdError for Refused {}

/// A system resolver that drops the addresses its [`AddressRule`] refuses (non-public ones
/// unless private addresses are allowed, and denied blocks).
#[derive(Debug, Clone)]
pub struct GuardedResolver {
    rule: Arc<AddressRule>,
}

impl GuardedResolver {
    pub fn new(rule: AddressRule) -> Self {
        Self {
            rule: Arc::new(rule),
        }
    }
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let rule = self.rule.clone();
        let host = name.as_str().to_string();
        Box::pin(async move {
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let mut first_refused = None;
            let mut public = Vec::with_capacity(addrs.len());
            for a in addrs {
                match rule.refusal(a.ip()) {
                    None => public.push(a),
                    Some(class) => {
                        first_refused.get_or_insert((a.ip(), class));
                    }
                }
            }
            if public.is_empty() {
                if let Some((addr, class)) = first_refused {
                    return Err(Box::new(Refused { host, addr, class }) as _);
                }
            }
            Ok(Box::new(public.into_iter()) as Addrs)
        })
    }
}

/// Finds a [`Refused`] in an error's source chain.
pub fn find_refused(err: &(dyn StdError + 'static)) -> Option<Refused> {
    let mut cur: Option<&(dyn StdError + 'static)> = Some(err);
    while let Some(e) = cur {
        if let Some(r) = e.downcast_ref::<Refused>() {
            return Some(r.clone());
        }
        cur = e.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(s: &str) -> Option<&'static str> {
        classify(s.parse().unwrap())
    }

    #[test]
    fn networks_parse_and_contain() {
        let n: Network = "10.0.0.0/8".parse().unwrap();
        assert!(n.contains("10.200.1.1".parse().unwrap()));
        assert!(!n.contains("11.0.0.1".parse().unwrap()));
        // An IPv4-mapped IPv6 address is its IPv4 address.
        assert!(n.contains("::ffff:10.0.0.1".parse().unwrap()));
        let one: Network = "169.254.169.254".parse().unwrap();
        assert_eq!(one.to_string(), "169.254.169.254/32");
        assert!(one.contains("169.254.169.254".parse().unwrap()));
        assert!(!one.contains("169.254.169.253".parse().unwrap()));
        let v6: Network = "fd00::/8".parse().unwrap();
        assert!(v6.contains("fd12::1".parse().unwrap()));
        assert!(!v6.contains("fe80::1".parse().unwrap()));
        let all: Network = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains("8.8.8.8".parse().unwrap()));
        for bad in ["10.0.0.0/33", "nonsense", "10.0.0.0/x", "::/129"] {
            let e = bad.parse::<Network>().unwrap_err();
            assert!(e.contains(bad), "{e}");
        }
    }

    #[test]
    fn a_denied_block_is_refused_even_when_private_addresses_are_allowed() {
        let rule = AddressRule {
            allow_private: true,
            denied: vec!["127.0.0.2/32".parse().unwrap()],
        };
        assert_eq!(rule.refusal("127.0.0.1".parse().unwrap()), None);
        assert_eq!(
            rule.refusal("127.0.0.2".parse().unwrap()),
            Some("denied by configuration")
        );
        let url = url::Url::parse("http://127.0.0.2:8080/x").unwrap();
        let e = check_url_under(&url, &rule).unwrap_err().to_string();
        assert!(
            e.contains("127.0.0.2") && e.contains("denied network"),
            "{e}"
        );
        // Without allow_private the usual classes are refused as before.
        let public_only = AddressRule::new(false);
        assert_eq!(
            public_only.refusal("10.0.0.1".parse().unwrap()),
            Some("private")
        );
        assert_eq!(public_only.refusal("8.8.8.8".parse().unwrap()), None);
    }

    #[test]
    fn classifies_ranges() {
        assert_eq!(c("127.0.0.1"), Some("loopback"));
        assert_eq!(c("10.1.2.3"), Some("private"));
        assert_eq!(c("172.16.0.1"), Some("private"));
        assert_eq!(c("172.31.255.1"), Some("private"));
        assert_eq!(c("172.32.0.1"), None);
        assert_eq!(c("192.168.1.1"), Some("private"));
        assert_eq!(c("169.254.169.254"), Some("link-local"));
        assert_eq!(c("0.0.0.0"), Some("unspecified"));
        assert_eq!(c("100.64.0.1"), Some("CGNAT (shared)"));
        assert_eq!(c("100.128.0.1"), None);
        assert_eq!(c("8.8.8.8"), None);
        assert_eq!(c("::1"), Some("loopback"));
        assert_eq!(c("::"), Some("unspecified"));
        assert_eq!(c("fd00::1"), Some("private (unique local)"));
        assert_eq!(c("fe80::1"), Some("link-local"));
        assert_eq!(c("::ffff:127.0.0.1"), Some("loopback"));
        assert_eq!(c("64:ff9b::a00:1"), Some("private"));
        assert_eq!(c("2606:4700::1111"), None);
    }

    #[tokio::test]
    async fn hosts_are_checked_by_literal_and_by_name() {
        for u in [
            "http://127.0.0.1:9/mcp",
            "http://[::1]:9/mcp",
            "http://10.0.0.5/mcp",
            "http://localhost:9/mcp",
        ] {
            let url = url::Url::parse(u).unwrap();
            let e = check_host(&url, false).await.unwrap_err();
            assert!(
                matches!(e, OutboundError::PrivateAddress { .. }),
                "{u}: {e}"
            );
            assert!(check_host(&url, true).await.is_ok(), "{u}");
        }
        let url = url::Url::parse("http://93.184.215.14/mcp").unwrap();
        assert!(check_host(&url, false).await.is_ok());
    }

    #[test]
    fn literal_urls_are_checked() {
        let u = url::Url::parse("http://169.254.169.254/latest/meta-data").unwrap();
        let e = check_url(&u, false).unwrap_err();
        assert!(e.to_string().contains("link-local"), "{e}");
        assert!(check_url(&u, true).is_ok());
        let u = url::Url::parse("http://[::1]:8080/").unwrap();
        assert!(check_url(&u, false).is_err());
        let u = url::Url::parse("file:///etc/passwd").unwrap();
        assert!(check_url(&u, true).is_err());
        let u = url::Url::parse("https://example.com/").unwrap();
        assert!(check_url(&u, false).is_ok());
    }
}
