//! End to end against a real GraphQL server on 127.0.0.1: live introspection, query and
//! mutation calls through the tool handlers, `_selection`, GraphQL and HTTP errors.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use toolshed_core::{TokenSource, Tool, ToolContext, ToolError, ToolErrorKind};
use toolshed_graphql::{
    import, AuthConfig, GraphqlError, GraphqlOptions, Imported, SchemaInput, Secret,
};

pub(crate) fn options(endpoint: &str) -> GraphqlOptions {
    let mut o = GraphqlOptions::new("lib", endpoint);
    o.allow_private = true;
    o.timeout = Duration::from_secs(10);
    o
}

async fn imported(base: &str, opts: GraphqlOptions) -> Imported {
    import(
        SchemaInput::Endpoint {
            url: format!("{base}/graphql"),
        },
        &opts,
    )
    .await
    .unwrap()
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
async fn live_introspection_then_queries_and_mutations() {
    let base = common::start().await;
    let lib = imported(&base, options("")).await;
    assert!(lib.warnings.is_empty(), "{:?}", lib.warnings);
    assert_eq!(lib.tools.len(), 6);

    let book = find(&lib, "lib.query.book");
    let out = call(book, json!({"id": "1"})).await.unwrap();
    assert_eq!(out["book"]["title"], "Dune");
    assert_eq!(out["book"]["genre"], "FICTION");
    assert_eq!(out["book"]["author"]["name"], "Frank Herbert");
    assert_eq!(out["book"]["rating"], 4.5);
    let missing = call(book, json!({"id": "404"})).await.unwrap();
    assert_eq!(missing, json!({"book": null}));

    let books = find(&lib, "lib.query.books");
    let out = call(books, json!({"filter": {"any": [{"genre": "SCIENCE"}]}}))
        .await
        .unwrap();
    let titles: Vec<&str> = out["books"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["title"].as_str().unwrap())
        .collect();
    assert_eq!(titles, ["Cosmos"]);

    let add = find(&lib, "lib.mutation.add_book");
    assert!(add.def.annotations.destructive);
    let out = call(
        add,
        json!({"input": {"title": "SPQR", "genre": "HISTORY", "authorName": "Mary Beard", "pages": 608}}),
    )
    .await
    .unwrap();
    assert_eq!(out["addBook"]["id"], "3");
    assert_eq!(
        out["addBook"]["author"],
        json!({"name": "Mary Beard", "born": null})
    );
    let count = call(find(&lib, "lib.query.count"), json!({}))
        .await
        .unwrap();
    assert_eq!(count, json!({"count": 3}));
    let out = call(books, json!({"filter": {"minPages": 500}}))
        .await
        .unwrap();
    assert_eq!(out["books"][0]["title"], "SPQR");
}

#[tokio::test]
async fn selection_override_replaces_the_default() {
    let base = common::start().await;
    let lib = imported(&base, options("")).await;
    let book = find(&lib, "lib.query.book");
    let out = call(
        book,
        json!({"id": "2", "_selection": "{ title author { born } }"}),
    )
    .await
    .unwrap();
    assert_eq!(
        out,
        json!({"book": {"title": "Cosmos", "author": {"born": 1934}}})
    );
    let err = call(book, json!({"id": "2", "_selection": "title } count"}))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::InvalidInput);
    let err = call(book, json!({"id": "2", "_selection": "{ nosuchfield }"}))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::Upstream);
    assert!(err.message.contains("nosuchfield"), "{}", err.message);
}

#[tokio::test]
async fn graphql_errors_are_upstream_errors() {
    let base = common::start().await;
    let lib = imported(&base, options("")).await;
    let err = call(find(&lib, "lib.query.broken"), json!({}))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::Upstream);
    assert!(
        err.message.contains("the shelf is on fire"),
        "{}",
        err.message
    );
    let data = err.data.unwrap();
    assert_eq!(data["errors"][0]["message"], "the shelf is on fire");
    let err = call(
        find(&lib, "lib.query.book"),
        json!({"id": 1, "extra": true}),
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::InvalidInput, "{}", err.message);
}

#[tokio::test]
async fn http_errors_carry_status_and_body() {
    let base = common::start().await;
    let lib = imported(&base, options(&format!("{base}/fail"))).await;
    let err = call(find(&lib, "lib.query.count"), json!({}))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::Upstream);
    assert!(err.message.contains("500"), "{}", err.message);
    assert!(err.message.contains("upstream exploded"), "{}", err.message);
    assert_eq!(err.data.unwrap()["status"], 500);
}

#[tokio::test]
async fn headers_and_auth_are_sent() {
    let base = common::start().await;
    let mut opts = options("");
    opts.auth = AuthConfig::Bearer {
        token: Secret::new("s3cret"),
    };
    let lib = imported(&base, opts).await;
    let out = call(find(&lib, "lib.query.whoami"), json!({}))
        .await
        .unwrap();
    // The server saw the token; a configured secret echoed back is blanked out of results.
    assert_eq!(out, json!({"whoami": "Bearer [REDACTED]"}));

    struct Tokens;
    #[async_trait::async_trait]
    impl TokenSource for Tokens {
        async fn token(&self, provider: &str) -> Result<String, ToolError> {
            Ok(format!("{provider}-token"))
        }
    }
    let mut opts = options("");
    opts.token_provider = Some("library".into());
    let lib = imported(&base, opts).await;
    let whoami = find(&lib, "lib.query.whoami");
    let ctx = ToolContext::new("tester".into(), whoami.def.path.clone())
        .with_tokens(Some(Arc::new(Tokens)));
    let out = whoami.handler.call(ctx, json!({})).await.unwrap();
    // The caller's own token reached the server; its echo is blanked out of the result.
    assert_eq!(out, json!({"whoami": "Bearer [REDACTED]"}));

    // Headers: a credential header's echo is blanked out; ordinary header values are not
    // secrets (a tenant name must not be blanked out wherever it appears in results).
    let mut opts = options("");
    opts.headers = vec![
        ("Authorization".into(), "Token hdr-secret-552".into()),
        ("X-Tenant".into(), "Dune".into()),
    ];
    let lib = imported(&base, opts).await;
    let out = call(find(&lib, "lib.query.whoami"), json!({}))
        .await
        .unwrap();
    assert_eq!(out, json!({"whoami": "[REDACTED]"}));
    let out = call(
        find(&lib, "lib.query.books"),
        json!({"_selection": "title"}),
    )
    .await
    .unwrap();
    assert!(out.to_string().contains("Dune"), "{out}");
    let err = call(whoami, json!({})).await.unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::Unauthorized);
}

#[tokio::test]
async fn down_endpoints_fail_clearly() {
    let down = common::closed_url().await;
    let err = import(SchemaInput::Endpoint { url: down.clone() }, &options(""))
        .await
        .unwrap_err();
    match &err {
        GraphqlError::Request { url, .. } => assert_eq!(url, &down),
        other => panic!("expected a request error, got {other}"),
    }

    let base = common::start().await;
    let lib = imported(&base, options(&down)).await;
    let err = call(find(&lib, "lib.query.count"), json!({}))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::Upstream);
    assert!(err.message.contains(&down), "{}", err.message);
}

#[tokio::test]
async fn private_endpoints_need_allow_private() {
    let base = common::start().await;
    let opts = GraphqlOptions::new("lib", "");
    let err = import(
        SchemaInput::Endpoint {
            url: format!("{base}/graphql"),
        },
        &opts,
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("allow_private"), "{err}");
}

#[tokio::test]
async fn chosen_queries_are_resources_read_with_their_arguments() {
    let base = common::start().await;
    let mut opts = options("");
    opts.resources = vec!["lib.query.*".into(), "lib.mutation.**".into()];
    let lib = imported(&base, opts).await;
    // Mutations matched by a pattern are named, not made resources.
    assert!(
        lib.warnings
            .iter()
            .any(|w| w.contains("only queries can be resources")),
        "{:?}",
        lib.warnings
    );
    let book = find(&lib, "lib.query.book_resource");
    assert_eq!(book.def.kind, toolshed_core::EntryKind::Resource);
    let native = book.def.native.clone().unwrap();
    assert_eq!(native["uriTemplate"], "graphql://lib/book/{id}");
    let out = call(book, json!({"uri": "graphql://lib/book/1"}))
        .await
        .unwrap();
    assert_eq!(out["contents"][0]["mimeType"], "application/json");
    let text = out["contents"][0]["text"].as_str().unwrap();
    assert!(text.contains("Dune"), "{text}");
    let err = call(book, json!({"uri": "graphql://lib/other/1"}))
        .await
        .unwrap_err();
    assert!(err.message.contains("is not a URI of the form"), "{err:?}");
    // Only GET-like reads: no resource entry is writable.
    assert!(lib
        .tools
        .iter()
        .filter(|t| t.def.kind == toolshed_core::EntryKind::Resource)
        .all(|t| t.def.annotations.read_only));
}
