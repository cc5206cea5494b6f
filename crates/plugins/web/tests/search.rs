//! `web.search` against loopback servers answering like the Brave Search API and SearXNG (no
//! search API is reachable from the test machines; the answers are in each provider's
//! documented JSON shape).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::Query;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use serde_json::{json, Value};
use toolshed_outbound::Secret;
use toolshed_testing::fixture;
use toolshed_web::{plugin, SearchProvider, WebConfig};

use crate::support::{call, serve_on};

const KEY: &str = "brave-test-key-7f3a9c";

/// A Brave-like provider; records the queries it got.
async fn brave(queries: Arc<Mutex<Vec<HashMap<String, String>>>>) -> String {
    let app = Router::new().route(
        "/res/v1/web/search",
        get(
            move |headers: HeaderMap, Query(q): Query<HashMap<String, String>>| {
                let queries = queries.clone();
                async move {
                    if headers
                        .get("x-subscription-token")
                        .and_then(|v| v.to_str().ok())
                        != Some(KEY)
                    {
                        return (
                            StatusCode::UNAUTHORIZED,
                            format!("bad token {:?}", headers.get("x-subscription-token")),
                        )
                            .into_response();
                    }
                    queries.lock().unwrap().push(q);
                    axum::Json(fixture!("brave.json")).into_response()
                }
            },
        ),
    );
    serve_on("127.0.0.1", app).await
}

fn with(provider: SearchProvider) -> toolshed_core::Plugin {
    plugin(WebConfig {
        search: Some(provider),
        ..WebConfig::default()
    })
    .unwrap()
}

#[tokio::test]
async fn brave_results_are_normalized_filtered_and_cached() {
    let queries = Arc::new(Mutex::new(Vec::new()));
    let base = brave(queries.clone()).await;
    let p = with(SearchProvider::Brave {
        base_url: base,
        api_key: Secret::new(KEY),
    });
    let a = call(
        &p,
        "web.search",
        json!({"query": "rust async runtime", "maxResults": 2}),
    )
    .await
    .unwrap();
    assert_eq!(a["provider"], "brave");
    let results = a["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    assert_eq!(results[0]["url"], "https://tokio.rs/");
    assert_eq!(
        results[0]["snippet"],
        "Tokio is an event-driven, non-blocking I/O platform for writing asynchronous applications with the Rust programming language."
    );
    assert_eq!(queries.lock().unwrap()[0]["count"], "2");
    // Cached: the same call does not reach the provider again.
    call(
        &p,
        "web.search",
        json!({"query": "rust async runtime", "maxResults": 2}),
    )
    .await
    .unwrap();
    assert_eq!(queries.lock().unwrap().len(), 1);
    // Domains: asked of the provider and enforced on what comes back.
    let d = call(
        &p,
        "web.search",
        json!({"query": "rust async runtime", "includeDomains": ["docs.rs"]}),
    )
    .await
    .unwrap();
    let urls: Vec<&str> = d["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["url"].as_str().unwrap())
        .collect();
    assert_eq!(urls, ["https://docs.rs/tokio/latest/tokio/"]);
    assert_eq!(
        queries.lock().unwrap()[1]["q"],
        "rust async runtime site:docs.rs"
    );
    let err = call(
        &p,
        "web.search",
        json!({"query": "x", "includeDomains": ["not a domain"]}),
    )
    .await
    .unwrap_err();
    assert!(err.message.contains("not a domain"), "{}", err.message);
}

#[tokio::test]
async fn a_rejected_key_is_a_clear_error_without_the_key() {
    let base = brave(Arc::default()).await;
    let p = with(SearchProvider::Brave {
        base_url: base,
        api_key: Secret::new("wrong-key-should-not-leak"),
    });
    let err = call(&p, "web.search", json!({"query": "anything"}))
        .await
        .unwrap_err();
    assert!(
        err.message.contains("brave search provider answered 401"),
        "{}",
        err.message
    );
    let shown = format!("{err:?} {}", err.message);
    assert!(!shown.contains("wrong-key-should-not-leak"), "{shown}");
}

#[tokio::test]
async fn searxng_results_are_normalized() {
    let hits = Arc::new(AtomicUsize::new(0));
    let h = hits.clone();
    let app = Router::new().route(
        "/search",
        get(move |Query(q): Query<HashMap<String, String>>| {
            let h = h.clone();
            async move {
                h.fetch_add(1, Ordering::SeqCst);
                assert_eq!(q["format"], "json");
                axum::Json::<Value>(fixture!("searxng.json"))
            }
        }),
    );
    let base = serve_on("127.0.0.1", app).await;
    let p = with(SearchProvider::Searxng { base_url: base });
    let a = call(&p, "web.search", json!({"query": "sqlite wal mode"}))
        .await
        .unwrap();
    assert_eq!(a["provider"], "searxng");
    assert_eq!(a["results"][0]["title"], "Write-Ahead Logging");
    assert_eq!(a["results"][0]["url"], "https://www.sqlite.org/wal.html");
    assert!(a["results"][0]["snippet"]
        .as_str()
        .unwrap()
        .contains("Write-Ahead Log"));
    assert_eq!(a["results"].as_array().unwrap().len(), 2);
    assert_eq!(hits.load(Ordering::SeqCst), 1);
}

#[test]
fn without_a_provider_there_is_no_search_tool() {
    let p = plugin(WebConfig::default()).unwrap();
    let paths: Vec<&str> = p.tools.iter().map(|t| t.def.path.as_str()).collect();
    assert_eq!(paths, ["web.fetch"]);
}
