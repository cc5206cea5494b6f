//! The bundled test upstream over streamable HTTP on 127.0.0.1, and the outbound address
//! policy (`allow_private`).

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::json;
use toolshed_core::{Annotations, ToolErrorKind};
use toolshed_mcp_source::{McpSourceError, Upstream, UpstreamConfig};

fn http(name: &str, url: &str) -> UpstreamConfig {
    UpstreamConfig::http(name, url)
        .with_allow_private(true)
        .with_connect_timeout(Duration::from_secs(10))
        .with_call_timeout(Duration::from_secs(10))
}

#[tokio::test]
async fn lists_calls_and_refreshes_over_http() {
    let server = HttpServer::start(&[]).await;
    let up = Upstream::connect(http("web", &server.url)).await.unwrap();
    assert_eq!(up.pid(), None);
    assert_eq!(up.protocol_version().as_deref(), Some("2025-11-25"));
    let tools = up.tools().await.unwrap();
    assert_eq!(
        tool(&tools, "web.echo").def.annotations,
        Annotations::READ_ONLY
    );
    assert_eq!(
        tool(&tools, "web.delete_everything").def.annotations,
        Annotations::DESTRUCTIVE
    );

    assert_eq!(
        call(tool(&tools, "web.echo"), json!({"text": "hi"}))
            .await
            .unwrap(),
        json!("hi")
    );
    assert_eq!(
        call(tool(&tools, "web.add"), json!({"a": 1.5, "b": 2}))
            .await
            .unwrap(),
        json!({"sum": 3.5})
    );
    let e = call(tool(&tools, "web.fail"), json!({})).await.unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::Upstream);
    assert_eq!(e.message, "the widget is broken");

    // The server process answers every call: one session, one server pid.
    let out = call(tool(&tools, "web.whoami"), json!({})).await.unwrap();
    assert_eq!(out["pid"].as_u64().map(|p| p as u32), server.pid());

    let mut changes = up.subscribe_changes();
    let seen = *changes.borrow();
    call(tool(&tools, "web.toggle_extra"), json!({}))
        .await
        .unwrap();
    next_change(&mut changes, seen).await;
    let tools = up.tools().await.unwrap();
    assert_eq!(
        call(tool(&tools, "web.extra"), json!({})).await.unwrap(),
        json!("extra!")
    );
    up.shutdown().await;
}

#[tokio::test]
async fn concurrent_calls_over_http() {
    let server = HttpServer::start(&[]).await;
    let up = Upstream::connect(http("web", &server.url)).await.unwrap();
    let tools = up.tools().await.unwrap();
    let echo = tool(&tools, "web.echo").clone();
    let calls = (0..32).map(|i| {
        let t = echo.clone();
        async move { (i, call(&t, json!({"text": format!("m{i}")})).await.unwrap()) }
    });
    for (i, out) in futures::future::join_all(calls).await {
        assert_eq!(out, json!(format!("m{i}")));
    }
    up.shutdown().await;
}

#[tokio::test]
async fn private_addresses_need_allow_private() {
    let server = HttpServer::start(&[]).await;
    let localhost = server.url.replace("127.0.0.1", "localhost");
    for url in [server.url.as_str(), localhost.as_str()] {
        let cfg = UpstreamConfig::http("web", url);
        let e = Upstream::connect(cfg).await.unwrap_err();
        match &e {
            McpSourceError::PrivateAddress { reason, .. } => {
                assert!(reason.contains("loopback"), "{reason}")
            }
            other => panic!("expected PrivateAddress for {url}, got {other}"),
        }
    }
    // The same URL works once allowed.
    let up = Upstream::connect(http("web", &server.url)).await.unwrap();
    assert!(up.is_connected());
    up.shutdown().await;
}

#[tokio::test]
async fn unreachable_endpoint_fails_within_connect_timeout() {
    // Bind then drop a listener to get a closed port.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let cfg = http("gone", &format!("http://127.0.0.1:{port}/mcp"))
        .with_connect_timeout(Duration::from_secs(2));
    let started = Instant::now();
    let e = Upstream::connect(cfg).await.unwrap_err();
    assert!(
        matches!(
            e,
            McpSourceError::Handshake { .. } | McpSourceError::ConnectTimeout { .. }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("gone"));
    assert!(started.elapsed() < Duration::from_secs(4));
}

#[tokio::test]
async fn custom_headers_reach_the_server_and_echoed_credentials_are_blanked_out() {
    let server = HttpServer::start(&[]).await;
    let cfg = UpstreamConfig::new(
        "web",
        toolshed_mcp_source::Transport::Http {
            url: server.url.clone(),
            headers: vec![
                ("X-Tenant".into(), "acme-corp".into()),
                ("Authorization".into(), "Bearer tok-http-secret-41".into()),
            ],
        },
    )
    .with_allow_private(true)
    .with_connect_timeout(Duration::from_secs(10));
    let up = Upstream::connect(cfg).await.unwrap();
    let tools = up.tools().await.unwrap();
    let out = call(tool(&tools, "web.http_headers"), json!({}))
        .await
        .unwrap();
    let headers = &out["headers"];
    assert_eq!(headers["x-tenant"], "acme-corp", "{out}");
    // The server saw the credential (it echoes a header it received), and the echo is blanked.
    assert_eq!(headers["authorization"], "[REDACTED]", "{out}");
    assert!(!out.to_string().contains("tok-http-secret-41"), "{out}");
    // The MCP transport's own headers are there too.
    assert!(headers["mcp-session-id"].is_string(), "{out}");
    up.shutdown().await;

    // Transport-managed headers cannot be configured.
    let cfg = UpstreamConfig::new(
        "web",
        toolshed_mcp_source::Transport::Http {
            url: server.url.clone(),
            headers: vec![("Mcp-Protocol-Version".into(), "2020-01-01".into())],
        },
    )
    .with_allow_private(true);
    let e = Upstream::connect(cfg).await.unwrap_err();
    assert!(matches!(e, McpSourceError::InvalidConfig { .. }), "{e}");
    assert!(e.to_string().contains("Mcp-Protocol-Version"), "{e}");
}
