//! The n8n integration against a local axum server standing in for n8n: imported operations
//! reach it under `/api/v1` with the `X-N8N-API-KEY` header.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::HeaderMap;
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};
use toolshed_core::ToolContext;
use toolshed_n8n_integration::{n8n_plugin, N8nSettings};

#[tokio::test]
async fn n8n_imports_the_rest_of_the_public_api_with_the_key_header() {
    let seen: Arc<Mutex<Vec<(String, Value)>>> = Arc::default();
    let log = seen.clone();
    let app = Router::new().route(
        "/api/v1/tags",
        post(move |headers: HeaderMap, Json(body): Json<Value>| {
            let log = log.clone();
            async move {
                let key = headers
                    .get("x-n8n-api-key")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_string();
                log.lock().unwrap().push((key, body.clone()));
                Json(json!({"id": "t1", "name": body["name"]}))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let n8n = n8n_plugin(&N8nSettings {
        base_url: format!("http://{addr}"),
        api_key: "n8n-test-key".into(),
        allow_private: true,
        timeout: Duration::from_secs(5),
    })
    .await
    .unwrap();
    assert!(n8n.imported > 20, "imported {}", n8n.imported);
    let paths: Vec<&str> = n8n
        .plugin
        .tools
        .iter()
        .map(|t| t.def.path.as_str())
        .collect();
    let mut unique = paths.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), paths.len(), "no duplicate paths");
    assert!(paths.iter().all(|p| p.starts_with("n8n.")));

    let create_tag = n8n
        .plugin
        .tools
        .iter()
        .find(|t| t.def.path.as_str() == "n8n.tags.create")
        .unwrap_or_else(|| panic!("no create_tag among {paths:?}"));
    assert_eq!(create_tag.def.origin, "source:n8n");
    let ctx = ToolContext::new("t".into(), create_tag.def.path.clone());
    let out = create_tag
        .handler
        .call(ctx, json!({"name": "urgent"}))
        .await
        .unwrap();
    assert_eq!(out["id"], "t1");
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].0, "n8n-test-key");
    assert_eq!(seen[0].1["name"], "urgent");
}
