//! `web.search`: a query to the configured provider (Brave Search API or SearXNG), results as
//! `{title, url, snippet}`, optionally limited to some domains, cached.
//!
//! The provider's address is the operator's choice, so it may be local (a SearXNG on the same
//! host); its requests follow no redirect, so the Brave key never leaves its origin.

use std::sync::Arc;

use serde_json::{json, Value};
use toolshed_core::{Annotations, Tool, ToolDef, ToolError, ToolPath};
use toolshed_outbound::{Method, Outbound, OutboundConfig};

use crate::cache::TtlCache;
use crate::{SearchProvider, WebConfig, WebError};

/// Results returned when the call does not say.
pub const DEFAULT_RESULTS: usize = 5;
/// Most results one call may ask for.
pub const MAX_RESULTS: usize = 20;
/// Longest query accepted.
pub const MAX_QUERY_CHARS: usize = 400;
/// Longest snippet kept per result.
const MAX_SNIPPET_CHARS: usize = 500;

/// Sends queries to the provider and caches the answers.
pub struct Searcher {
    outbound: Outbound,
    provider: SearchProvider,
    cache: TtlCache<Value>,
}

impl Searcher {
    pub fn new(
        outbound: Outbound,
        provider: SearchProvider,
        config: &WebConfig,
    ) -> Result<Self, WebError> {
        let outbound = Outbound::new(OutboundConfig {
            allow_private: true,
            max_redirects: 0,
            ..outbound.config().clone()
        })
        .map_err(|e| WebError::InvalidConfig(format!("cannot build the search client: {e}")))?;
        Ok(Self {
            outbound,
            provider,
            cache: TtlCache::new(config.cache_ttl, config.cache_entries),
        })
    }

    fn name(&self) -> &'static str {
        match self.provider {
            SearchProvider::Brave { .. } => "brave",
            SearchProvider::Searxng { .. } => "searxng",
        }
    }

    async fn search(
        &self,
        query: &str,
        max: usize,
        domains: &[String],
    ) -> Result<Value, ToolError> {
        let key = format!(
            "{}\u{0}{query}\u{0}{max}\u{0}{}",
            self.name(),
            domains.join(",")
        );
        if let Some(hit) = self.cache.get(&key) {
            return Ok(hit);
        }
        let q = with_sites(query, domains);
        let raw = match &self.provider {
            SearchProvider::Brave { base_url, api_key } => {
                let url = format!("{}/res/v1/web/search", base_url.trim_end_matches('/'));
                let req = self
                    .outbound
                    .request(Method::GET, &url)
                    .map_err(|e| e.into_tool_error())?
                    .query(&[("q", q.as_str()), ("count", &max.to_string())])
                    .header("Accept", "application/json")
                    .header("X-Subscription-Token", api_key.expose());
                self.send(req).await?
            }
            SearchProvider::Searxng { base_url } => {
                let url = format!("{}/search", base_url.trim_end_matches('/'));
                let req = self
                    .outbound
                    .request(Method::GET, &url)
                    .map_err(|e| e.into_tool_error())?
                    .query(&[("q", q.as_str()), ("format", "json")])
                    .header("Accept", "application/json");
                self.send(req).await?
            }
        };
        let items = match self.provider {
            SearchProvider::Brave { .. } => &raw["web"]["results"],
            SearchProvider::Searxng { .. } => &raw["results"],
        };
        let snippet_key = match self.provider {
            SearchProvider::Brave { .. } => "description",
            SearchProvider::Searxng { .. } => "content",
        };
        let results: Vec<Value> = items
            .as_array()
            .map(|a| a.as_slice())
            .unwrap_or_default()
            .iter()
            .filter_map(|r| {
                let url = r["url"].as_str()?;
                in_domains(url, domains).then(|| {
                    json!({
                        "title": cut(r["title"].as_str().unwrap_or_default(), 300),
                        "url": url,
                        "snippet": cut(&strip_markup(r[snippet_key].as_str().unwrap_or_default()), MAX_SNIPPET_CHARS),
                    })
                })
            })
            .take(max)
            .collect();
        let answer = json!({"query": query, "provider": self.name(), "results": results, "_untrusted": true});
        self.cache.insert(key, answer.clone());
        Ok(answer)
    }

    async fn send(&self, req: toolshed_outbound::RequestBuilder) -> Result<Value, ToolError> {
        let resp = self
            .outbound
            .send(req)
            .await
            .map_err(|e| e.into_tool_error())?;
        if !resp.is_success() {
            // The body may echo the request; only the status is reported.
            return Err(ToolError::upstream(format!(
                "the {} search provider answered {}",
                self.name(),
                resp.status
            ))
            .with_data(json!({"status": resp.status.as_u16()})));
        }
        resp.json::<Value>().map_err(|e| {
            ToolError::upstream(format!(
                "the {} search provider answered no JSON: {e}",
                self.name()
            ))
        })
    }
}

/// The `web.search` tool.
pub fn tool(searcher: Arc<Searcher>) -> Tool {
    let mut def = ToolDef::new(
        ToolPath::parse("web.search").expect("a valid path"),
        "Search The Web",
        "Search the web and return results as title, URL and snippet; optionally only from some domains. Fetch a result with web.fetch to read it.",
    )
    .with_input(json!({
        "type": "object",
        "properties": {
            "query": {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_CHARS},
            "maxResults": {"type": "integer", "minimum": 1, "maximum": MAX_RESULTS, "description": format!("Results to return (default {DEFAULT_RESULTS}).")},
            "includeDomains": {"type": "array", "maxItems": 10, "items": {"type": "string", "minLength": 1, "maxLength": 253}, "description": "Only results from these domains (and their subdomains), e.g. [\"docs.rs\"]."},
        },
        "required": ["query"],
        "additionalProperties": false,
    }))
    .with_annotations(Annotations::READ_ONLY);
    def.origin = format!("plugin:{}", crate::PLUGIN_ID);
    Tool::from_fn(def, move |_ctx, args| {
        let searcher = searcher.clone();
        async move {
            let query = args["query"]
                .as_str()
                .map(str::trim)
                .filter(|q| !q.is_empty())
                .ok_or_else(|| ToolError::invalid("'query' is required"))?;
            let max = args["maxResults"]
                .as_u64()
                .map_or(DEFAULT_RESULTS, |n| (n as usize).clamp(1, MAX_RESULTS));
            let domains: Vec<String> = args["includeDomains"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(|d| d.trim().trim_start_matches("*.").to_ascii_lowercase())
                        .filter(|d| !d.is_empty())
                        .collect()
                })
                .unwrap_or_default();
            if let Some(bad) = domains.iter().find(|d| !is_domain(d)) {
                return Err(ToolError::invalid(format!(
                    "'includeDomains' entry '{bad}' is not a domain name"
                )));
            }
            searcher.search(query, max, &domains).await
        }
    })
}

/// `query (site:a OR site:b)`.
fn with_sites(query: &str, domains: &[String]) -> String {
    match domains {
        [] => query.to_string(),
        [one] => format!("{query} site:{one}"),
        many => format!(
            "{query} ({})",
            many.iter()
                .map(|d| format!("site:{d}"))
                .collect::<Vec<_>>()
                .join(" OR ")
        ),
    }
}

fn in_domains(url: &str, domains: &[String]) -> bool {
    if domains.is_empty() {
        return true;
    }
    let Some(host) = url::Url::parse(url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_ascii_lowercase))
    else {
        return false;
    };
    domains
        .iter()
        .any(|d| host == *d || host.ends_with(&format!(".{d}")))
}

fn is_domain(d: &str) -> bool {
    d.len() <= 253
        && d.contains('.')
        && d.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}

/// Snippets carry `<strong>` highlights; agents read them better without.
fn strip_markup(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut in_tag = false;
    for c in s.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out.replace("&amp;", "&")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
}

fn cut(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n).collect::<String>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains_are_matched_with_subdomains_and_checked() {
        let d = vec!["rust-lang.org".to_string()];
        assert!(in_domains("https://doc.rust-lang.org/book/", &d));
        assert!(in_domains("https://rust-lang.org/", &d));
        assert!(!in_domains("https://evil-rust-lang.org/", &d));
        assert!(!in_domains("https://rust-lang.org.evil.com/", &d));
        assert!(is_domain("docs.rs"));
        assert!(!is_domain("localhost"));
        assert!(!is_domain("a..b"));
        assert_eq!(with_sites("q", &d), "q site:rust-lang.org");
        assert_eq!(
            with_sites("q", &["a.com".into(), "b.org".into()]),
            "q (site:a.com OR site:b.org)"
        );
        assert_eq!(strip_markup("a <strong>b</strong> &amp; c"), "a b & c");
    }
}
