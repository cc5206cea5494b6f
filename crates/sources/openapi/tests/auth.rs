//! Each auth scheme against the local server, and secrets never leaking.

use crate::common;

use common::*;
use serde_json::json;
use std::sync::atomic::Ordering;
use toolshed_core::ToolErrorKind;
use toolshed_outbound::{ApiKeyLocation, AuthConfig, Secret};

fn schemes(base: &str) -> Vec<(&'static str, AuthConfig)> {
    vec![
        (
            "header",
            AuthConfig::ApiKey {
                location: ApiKeyLocation::Header,
                name: "api_key".into(),
                value: Secret::new(HEADER_KEY),
            },
        ),
        (
            "query",
            AuthConfig::ApiKey {
                location: ApiKeyLocation::Query,
                name: "api_key".into(),
                value: Secret::new(QUERY_KEY),
            },
        ),
        (
            "cookie",
            AuthConfig::ApiKey {
                location: ApiKeyLocation::Cookie,
                name: "session".into(),
                value: Secret::new(COOKIE_KEY),
            },
        ),
        (
            "bearer",
            AuthConfig::Bearer {
                token: Secret::new(BEARER),
            },
        ),
        (
            "basic",
            AuthConfig::Basic {
                username: "ann".into(),
                password: Secret::new(BASIC_PASSWORD),
            },
        ),
        (
            "oauth2",
            AuthConfig::OAuth2ClientCredentials {
                token_url: format!("{base}/oauth/token"),
                client_id: "client-1".into(),
                client_secret: Secret::new(CLIENT_SECRET),
                scopes: vec!["read:pets".into()],
                audience: None,
            },
        ),
    ]
}

const ALL_SECRETS: [&str; 6] = [
    HEADER_KEY,
    QUERY_KEY,
    COOKIE_KEY,
    BEARER,
    BASIC_PASSWORD,
    CLIENT_SECRET,
];

fn assert_clean(what: &str, text: &str) {
    for s in ALL_SECRETS {
        assert!(!text.contains(s), "{what} leaks a secret: {text}");
    }
}

#[tokio::test]
async fn every_scheme_is_accepted() {
    let (base, store) = start_petstore().await;
    let none = import_local("petstore.oas3.0.json", &base, AuthConfig::None);
    let e = call(tool(&none, "petstore.store.get_inventory"), json!({}))
        .await
        .unwrap_err();
    assert_eq!(e.data.unwrap()["status"], 401);
    for (label, auth) in schemes(&base) {
        let imp = import_local("petstore.oas3.0.json", &base, auth);
        let inv = tool(&imp, "petstore.store.get_inventory");
        for _ in 0..3 {
            let out = call(inv, json!({}))
                .await
                .unwrap_or_else(|e| panic!("{label}: {e:?}"));
            assert!(out.is_object(), "{label}");
        }
    }
    // Three OAuth2 calls, one token request.
    assert_eq!(store.token_hits.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn cookie_auth_combines_with_cookie_parameters() {
    let (base, _) = start_petstore().await;
    // A document with its own cookie parameter on the same operation.
    let doc = json!({"openapi": "3.1.0", "info": {"title": "t", "version": "1"},
        "paths": {"/store/inventory": {"get": {"operationId": "inv", "parameters": [
            {"name": "theme", "in": "cookie", "schema": {"type": "string"}}],
            "responses": {"200": {"description": "ok"}}}}}});
    let imp = toolshed_openapi::import(
        &doc,
        &toolshed_openapi::ImportOptions {
            namespace: "t".into(),
            base_url: Some(base),
            outbound: Some(local_outbound()),
            auth: AuthConfig::ApiKey {
                location: ApiKeyLocation::Cookie,
                name: "session".into(),
                value: Secret::new(COOKIE_KEY),
            },
            ..Default::default()
        },
    )
    .unwrap();
    call(&imp.tools[0], json!({"theme": "dark"})).await.unwrap();
}

#[tokio::test]
async fn secrets_never_appear_in_results_errors_or_debug() {
    let (base, _) = start_petstore().await;
    for (label, auth) in schemes(&base) {
        let imp = import_local("petstore.oas3.0.json", &base, auth.clone());
        let ok = call(tool(&imp, "petstore.store.get_inventory"), json!({}))
            .await
            .unwrap();
        assert_clean(label, &ok.to_string());
        let e = call(
            tool(&imp, "petstore.pet.get_pet_by_id"),
            json!({"petId": 999}),
        )
        .await
        .unwrap_err();
        assert_clean(label, &format!("{e:?} {e}"));
        assert_clean(label, &format!("{:?}", imp.tools));
        assert_clean(label, &format!("{auth:?}"));
        assert_clean(label, &serde_json::to_string(&auth).unwrap());
        // Connection failure: the URL with a query key must not show up.
        let dead = import_local("petstore.oas3.0.json", "http://127.0.0.1:9", auth);
        let e = call(tool(&dead, "petstore.store.get_inventory"), json!({}))
            .await
            .unwrap_err();
        assert_clean(label, &format!("{e:?}"));
        assert_ne!(e.kind, ToolErrorKind::InvalidInput);
    }
}

#[tokio::test]
async fn echoed_secrets_are_redacted_from_errors() {
    use axum::routing::get;
    let app = axum::Router::new().route(
        "/store/inventory",
        get(|q: axum::extract::RawQuery| async move {
            (
                axum::http::StatusCode::FORBIDDEN,
                format!("bad key in {}", q.0.unwrap_or_default()),
            )
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let auth = AuthConfig::ApiKey {
        location: ApiKeyLocation::Query,
        name: "api_key".into(),
        value: Secret::new(QUERY_KEY),
    };
    let imp = import_local("petstore.oas3.0.json", &format!("http://{addr}"), auth);
    let e = call(tool(&imp, "petstore.store.get_inventory"), json!({}))
        .await
        .unwrap_err();
    assert!(
        e.message.contains("403") && e.message.contains("[REDACTED]"),
        "{e:?}"
    );
    assert_clean("echo", &format!("{e:?}"));
}

/// An OAuth2 access token is fetched at runtime, so it is not among the configured secrets; an
/// API that echoes it (in a result or in an error) must not leak it either.
#[tokio::test]
async fn echoed_oauth2_access_tokens_are_redacted() {
    use axum::routing::{get, post};
    let app = axum::Router::new()
        .route(
            "/oauth/token",
            post(|| async {
                axum::Json(json!({"access_token": "runtime-access-tok-8812", "expires_in": 3600}))
            }),
        )
        .route(
            "/store/inventory",
            get(|h: axum::http::HeaderMap| async move {
                let auth = h
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_string();
                axum::Json(
                    json!({"you_sent": auth, "token_only": auth.trim_start_matches("Bearer ")}),
                )
            }),
        )
        .route(
            "/pet/{id}",
            get(|h: axum::http::HeaderMap| async move {
                let auth = h
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_string();
                (
                    axum::http::StatusCode::FORBIDDEN,
                    format!("token {auth} may not read pets"),
                )
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let base = format!("http://{addr}");
    let auth = AuthConfig::OAuth2ClientCredentials {
        token_url: format!("{base}/oauth/token"),
        client_id: "client-1".into(),
        client_secret: Secret::new(CLIENT_SECRET),
        scopes: vec![],
        audience: None,
    };
    let imp = import_local("petstore.oas3.0.json", &base, auth);
    let out = call(tool(&imp, "petstore.store.get_inventory"), json!({}))
        .await
        .unwrap();
    assert_eq!(
        out,
        json!({"you_sent": "Bearer [REDACTED]", "token_only": "[REDACTED]"})
    );
    let e = call(
        tool(&imp, "petstore.pet.get_pet_by_id"),
        json!({"petId": 1}),
    )
    .await
    .unwrap_err();
    let text = format!("{e:?} {e}");
    assert!(
        text.contains("403") && text.contains("[REDACTED]"),
        "{text}"
    );
    assert!(!text.contains("runtime-access-tok-8812"), "{text}");
}
