//! Protocol revisions: an upstream capped at 2025-06-18 negotiates it (stdio and streamable
//! HTTP); one capped at 2025-03-26 is refused with `UnsupportedProtocol` unless configured with
//! `accept_2025_03_26`; a 2026-07-28-only
//! upstream is reached through `server/discover` over both transports, whether it refuses
//! `initialize` as "unsupported protocol version" (-32022) or as "method not found" (-32601).

use crate::common;

use std::time::Duration;

use common::*;
use serde_json::json;
use toolshed_mcp_source::{McpSourceError, Upstream, UpstreamConfig};

fn http(name: &str, url: &str) -> UpstreamConfig {
    UpstreamConfig::http(name, url)
        .with_allow_private(true)
        .with_connect_timeout(Duration::from_secs(10))
        .with_call_timeout(Duration::from_secs(10))
}

/// Lists, calls `echo`, and sees `tools/list_changed` after `toggle_extra`.
async fn works(up: &Upstream, ns: &str) {
    let tools = up.tools().await.unwrap();
    assert!(tools.len() >= 8, "{} tools", tools.len());
    assert_eq!(
        call(tool(&tools, &format!("{ns}.echo")), json!({"text": "hi"}))
            .await
            .unwrap(),
        json!("hi")
    );
    assert_eq!(
        call(tool(&tools, &format!("{ns}.add")), json!({"a": 1, "b": 2}))
            .await
            .unwrap(),
        json!({"sum": 3.0})
    );
    let mut changes = up.subscribe_changes();
    let seen = *changes.borrow();
    call(tool(&tools, &format!("{ns}.toggle_extra")), json!({}))
        .await
        .unwrap();
    next_change(&mut changes, seen).await;
    let tools = up.tools().await.unwrap();
    assert_eq!(
        call(tool(&tools, &format!("{ns}.extra")), json!({}))
            .await
            .unwrap(),
        json!("extra!")
    );
}

fn assert_refused_2025_03_26(e: McpSourceError) {
    match &e {
        McpSourceError::UnsupportedProtocol {
            name, version, min, ..
        } => {
            assert_eq!(name, "old");
            assert_eq!(version, "2025-03-26");
            assert_eq!(*min, "2025-06-18");
        }
        other => panic!("expected UnsupportedProtocol, got {other}"),
    }
    let text = e.to_string();
    assert!(
        text.contains("2025-03-26") && text.contains("2025-06-18 through 2026-07-28"),
        "{text}"
    );
}

#[tokio::test]
async fn capped_at_2025_06_18_over_stdio() {
    let up = Upstream::connect(stdio("v0618", &["--max-version", "2025-06-18"]))
        .await
        .unwrap();
    assert_eq!(up.protocol_version().as_deref(), Some("2025-06-18"));
    works(&up, "v0618").await;
    up.shutdown().await;
}

#[tokio::test]
async fn capped_at_2025_06_18_over_http() {
    let server = HttpServer::start(&["--max-version", "2025-06-18"]).await;
    let up = Upstream::connect(http("v0618", &server.url)).await.unwrap();
    assert_eq!(up.protocol_version().as_deref(), Some("2025-06-18"));
    works(&up, "v0618").await;
    up.shutdown().await;
}

#[tokio::test]
async fn capped_at_2025_03_26_is_refused_over_stdio() {
    let e = Upstream::connect(stdio("old", &["--max-version", "2025-03-26"]))
        .await
        .unwrap_err();
    assert_refused_2025_03_26(e);
}

#[tokio::test]
async fn capped_at_2025_03_26_is_refused_over_http() {
    let server = HttpServer::start(&["--max-version", "2025-03-26"]).await;
    let e = Upstream::connect(http("old", &server.url))
        .await
        .unwrap_err();
    assert_refused_2025_03_26(e);
}

/// An upstream configured with `accept_2025_03_26` may negotiate that revision.
#[tokio::test]
async fn capped_at_2025_03_26_is_accepted_when_configured() {
    let server = HttpServer::start(&["--max-version", "2025-03-26"]).await;
    let up = Upstream::connect(http("old", &server.url).with_accept_2025_03_26(true))
        .await
        .unwrap();
    assert_eq!(up.protocol_version().as_deref(), Some("2025-03-26"));
    works(&up, "old").await;
    up.shutdown().await;
}

#[tokio::test]
async fn modern_only_over_http_lists_calls_and_sees_list_changes() {
    let server = HttpServer::start(&["--modern-only"]).await;
    let up = Upstream::connect(http("modern", &server.url))
        .await
        .unwrap();
    assert_eq!(up.protocol_version().as_deref(), Some("2026-07-28"));
    works(&up, "modern").await;
    up.shutdown().await;
}

#[tokio::test]
async fn modern_only_over_stdio_sees_list_changes() {
    let up = Upstream::connect(stdio("modern", &["--modern-only"]))
        .await
        .unwrap();
    assert_eq!(up.protocol_version().as_deref(), Some("2026-07-28"));
    works(&up, "modern").await;
    up.shutdown().await;
}

#[tokio::test]
async fn initialize_answered_with_method_not_found_falls_back_over_stdio() {
    let up = Upstream::connect(stdio("noinit", &["--no-initialize"]))
        .await
        .unwrap();
    assert_eq!(up.protocol_version().as_deref(), Some("2026-07-28"));
    works(&up, "noinit").await;
    up.shutdown().await;
}

#[tokio::test]
async fn initialize_answered_with_method_not_found_falls_back_over_http() {
    let server = HttpServer::start(&["--no-initialize"]).await;
    let up = Upstream::connect(http("noinit", &server.url))
        .await
        .unwrap();
    assert_eq!(up.protocol_version().as_deref(), Some("2026-07-28"));
    works(&up, "noinit").await;
    up.shutdown().await;
}
