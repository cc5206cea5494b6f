//! Credentials through the shared outbound code against a guarded local server: OAuth2 client
//! credentials (one token fetch, cached, sent as a bearer), API keys in a header and the query
//! string, basic auth, and failures that name the cause without leaking the secret.

use crate::common::{self, API_KEY, BASIC_PASSWORD, CLIENT_SECRET};
use crate::live::options;

use std::sync::atomic::Ordering;

use serde_json::{json, Value};
use toolshed_core::{Tool, ToolContext, ToolError, ToolErrorKind};
use toolshed_graphql::{
    import, ApiKeyLocation, AuthConfig, GraphqlError, GraphqlOptions, Imported, SchemaInput, Secret,
};

fn oauth(base: &str, secret: &str) -> AuthConfig {
    AuthConfig::OAuth2ClientCredentials {
        token_url: format!("{base}/oauth/token"),
        client_id: "client-1".into(),
        client_secret: Secret::new(secret),
        scopes: vec!["books:read".into()],
        audience: None,
    }
}

fn with_auth(auth: AuthConfig) -> GraphqlOptions {
    let mut o = options("");
    o.auth = auth;
    o
}

async fn introspected(base: &str, opts: &GraphqlOptions) -> Result<Imported, GraphqlError> {
    import(
        SchemaInput::Endpoint {
            url: format!("{base}/graphql"),
        },
        opts,
    )
    .await
}

fn find<'a>(imported: &'a Imported, path: &str) -> &'a Tool {
    imported
        .tools
        .iter()
        .find(|t| t.def.path.as_str() == path)
        .unwrap_or_else(|| panic!("no tool {path}"))
}

async fn call(tool: &Tool, args: Value) -> Result<Value, ToolError> {
    let ctx = ToolContext::new("tester".into(), tool.def.path.clone());
    tool.handler.call(ctx, args).await
}

#[tokio::test]
async fn oauth2_token_is_fetched_once_cached_and_sent_as_bearer() {
    let (base, srv) = common::start_guarded().await;
    let lib = introspected(&base, &with_auth(oauth(&base, CLIENT_SECRET)))
        .await
        .unwrap();
    // Introspection needed the token already.
    assert_eq!(srv.token_hits.load(Ordering::SeqCst), 1);
    let whoami = find(&lib, "lib.query.whoami");
    for _ in 0..3 {
        let out = call(whoami, json!({})).await.unwrap();
        // The server saw the fetched token (see `seen` below); its echo is blanked out like a
        // configured secret.
        assert_eq!(out, json!({"whoami": "Bearer [REDACTED]"}));
    }
    let count = call(find(&lib, "lib.query.count"), json!({}))
        .await
        .unwrap();
    assert_eq!(count, json!({"count": 2}));
    assert_eq!(
        srv.token_hits.load(Ordering::SeqCst),
        1,
        "introspection and four calls share one token"
    );
    let seen = srv.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 5, "{seen:?}");
    assert!(seen.iter().all(|s| s == "Bearer gql-token-1"), "{seen:?}");
}

#[tokio::test]
async fn api_keys_work_in_a_header_and_the_query_string() {
    let (base, srv) = common::start_guarded().await;
    let header = AuthConfig::ApiKey {
        location: ApiKeyLocation::Header,
        name: "X-Api-Key".into(),
        value: Secret::new(API_KEY),
    };
    let lib = introspected(&base, &with_auth(header)).await.unwrap();
    let out = call(find(&lib, "lib.query.count"), json!({}))
        .await
        .unwrap();
    assert_eq!(out, json!({"count": 2}));
    let query = AuthConfig::ApiKey {
        location: ApiKeyLocation::Query,
        name: "api_key".into(),
        value: Secret::new(API_KEY),
    };
    let lib = introspected(&base, &with_auth(query)).await.unwrap();
    call(find(&lib, "lib.query.count"), json!({}))
        .await
        .unwrap();
    let seen = srv.seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        [
            "api key header",
            "api key header",
            "api key query",
            "api key query"
        ]
    );
    assert_eq!(srv.token_hits.load(Ordering::SeqCst), 0);
}

/// The server checks the header (`whoami` answers only to it); its echo, the base64
/// `user:password`, is a secret of its own and comes back blanked out.
#[tokio::test]
async fn basic_auth_is_sent() {
    let (base, _) = common::start_guarded().await;
    let basic = AuthConfig::Basic {
        username: "ann".into(),
        password: Secret::new(BASIC_PASSWORD),
    };
    let lib = introspected(&base, &with_auth(basic)).await.unwrap();
    let out = call(find(&lib, "lib.query.whoami"), json!({}))
        .await
        .unwrap();
    assert_eq!(out, json!({"whoami": "Basic [REDACTED]"}));
}

#[tokio::test]
async fn missing_or_refused_credentials_fail_clearly_without_leaking() {
    let (base, srv) = common::start_guarded().await;
    // No credentials: introspection is refused with the status.
    let e = introspected(&base, &with_auth(AuthConfig::None))
        .await
        .unwrap_err();
    assert!(matches!(&e, GraphqlError::Request { .. }), "{e}");
    assert!(e.to_string().contains("401"), "{e}");

    // A wrong client secret: the token request fails, naming the token URL, not the secret.
    let wrong = "wrong-client-secret-9";
    let e = introspected(&base, &with_auth(oauth(&base, wrong)))
        .await
        .unwrap_err();
    let text = format!("{e} {e:?}");
    assert!(
        text.contains("/oauth/token") && text.contains("401"),
        "{text}"
    );
    assert!(!text.contains(wrong), "{text}");

    // The same at call time (schema from SDL, so no introspection): an Unauthorized tool error.
    let mut opts = with_auth(oauth(&base, wrong));
    opts.endpoint = format!("{base}/graphql");
    let lib = import(SchemaInput::Sdl("type Query { count: Int }".into()), &opts)
        .await
        .unwrap();
    let e = call(find(&lib, "lib.query.count"), json!({}))
        .await
        .unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::Unauthorized, "{e:?}");
    assert!(e.message.contains("/oauth/token"), "{}", e.message);
    assert!(!format!("{e:?}").contains(wrong));
    assert_eq!(srv.token_hits.load(Ordering::SeqCst), 0);
    // Debug output of the options never shows a secret either.
    assert!(!format!("{opts:?}").contains(wrong));
}
