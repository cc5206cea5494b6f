//! The registry over real imports: overrides, sealed persistence, duplicate names and paths,
//! failure isolation and store polling.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::HeaderMap;
use axum::response::IntoResponse;
use axum::{Json, Router};
use serde_json::{json, Value};
use toolshed_core::{Plugin, SharedCatalog, Tool, ToolContext, ToolDef, ToolError, ToolPath};
use toolshed_registry::{
    declare, dry_run, spawn_store_poll, AuthSpec, GraphqlSpec, KeyLocation, McpSpec, OpenApiSpec,
    Origin, OverrideSpec, Registry, SchemeAuthKind, SchemeAuthSpec, Sealer, SourceSpec,
    SourceStore,
};
use toolshed_sealed::SecretBox;
use toolshed_store::Store;
use toolshed_testing::test_upstream;

fn fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
        .display()
        .to_string()
}

fn petstore(name: &str) -> OpenApiSpec {
    OpenApiSpec {
        name: name.into(),
        location: fixture("petstore.oas3.0.json"),
        base_url: Some("http://127.0.0.1:9/v2".into()),
        allow_private: true,
        ..Default::default()
    }
}

fn plugin_tool(path: &str) -> Tool {
    Tool::from_fn(
        ToolDef::new(ToolPath::parse(path).unwrap(), "T", "d"),
        |_c, _a| async { Err::<Value, _>(ToolError::internal("unused")) },
    )
}

#[tokio::test]
async fn overrides_mark_destructive_read_only_and_hide() {
    let mut spec = petstore("pets");
    spec.overrides = vec![
        OverrideSpec {
            pattern: "pets.store.*".into(),
            hidden: true,
            ..Default::default()
        },
        OverrideSpec {
            pattern: "pets.pet.find_pets_by_*".into(),
            destructive: Some(true),
            ..Default::default()
        },
        OverrideSpec {
            pattern: "pets.user.create_user".into(),
            read_only: Some(true),
            ..Default::default()
        },
    ];
    let report = dry_run(&SourceSpec::Openapi(spec), None).await.unwrap();
    let get = |p: &str| report.tools.iter().find(|t| t.path == p);
    assert!(report
        .tools
        .iter()
        .all(|t| !t.path.starts_with("pets.store.")));
    assert_eq!(
        report.tools.len(),
        20 - 4,
        "the four store operations are hidden"
    );
    let find = get("pets.pet.find_pets_by_status").unwrap();
    assert!(find.destructive && !find.read_only);
    let create = get("pets.user.create_user").unwrap();
    assert!(create.read_only && !create.destructive);
    assert!(
        get("pets.pet.delete_pet").unwrap().destructive,
        "defaults stay"
    );
}

#[tokio::test]
async fn dry_run_reports_progress_and_every_tool() {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let seen = calls.clone();
    let report = dry_run(
        &SourceSpec::Openapi(petstore("pets")),
        Some(Arc::new(move |done, total| {
            seen.lock().unwrap().push((done, total))
        })),
    )
    .await
    .unwrap();
    assert_eq!(report.tools.len(), 20);
    assert!(report
        .tools
        .iter()
        .any(|t| t.path == "pets.pet.add_pet" && t.destructive));
    let calls = calls.lock().unwrap();
    assert_eq!(calls.last(), Some(&(20, 20)), "{calls:?}");
}

#[tokio::test]
async fn stored_specs_round_trip_with_sealed_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_dir(dir.path()).await.unwrap();
    let sealer = Sealer::new(SecretBox::from_base64(&SecretBox::generate_key()).unwrap());
    let sources = SourceStore::new(store.clone(), sealer);
    let mut spec = petstore("pets");
    spec.auth = Some(AuthSpec::ApiKey {
        name: "X-Key".into(),
        value: "very-literal-secret-42".into(),
        location: Default::default(),
    });
    let spec = SourceSpec::Openapi(spec);
    let mcp = SourceSpec::Mcp(McpSpec {
        name: "mem".into(),
        command: Some("some-server".into()),
        env: [("TOKEN".to_string(), "env:MEM_TOKEN".to_string())].into(),
        ..Default::default()
    });
    sources.put(&spec).await.unwrap();
    sources.put(&mcp).await.unwrap();

    let raw = store.list_sources().await.unwrap();
    let text = serde_json::to_string(&raw).unwrap();
    assert!(!text.contains("very-literal-secret-42"), "{text}");
    assert!(text.contains("sealed:"), "{text}");
    assert!(
        text.contains("env:MEM_TOKEN"),
        "env references are kept as they are"
    );

    let listed: Vec<SourceSpec> = sources
        .list()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.unwrap().spec)
        .collect();
    assert_eq!(listed, vec![mcp.clone(), spec.clone()]);
    assert!(!serde_json::to_string(&spec.redacted())
        .unwrap()
        .contains("very-literal-secret-42"));
    assert!(sources.remove("mem").await.unwrap());
    assert_eq!(sources.list().await.unwrap().len(), 1);
}

#[test]
fn a_name_in_config_and_store_is_an_error_naming_both() {
    let (declared, rejected) = declare(
        &[SourceSpec::Openapi(petstore("pets"))],
        vec![
            SourceSpec::Openapi(petstore("pets")),
            SourceSpec::Openapi(petstore("other")),
        ],
    );
    assert_eq!(declared.len(), 2);
    assert_eq!(declared[0].origin, Origin::Config);
    assert_eq!(rejected.len(), 1);
    let msg = rejected[0].error.to_string();
    assert!(
        msg.contains("pets") && msg.contains("config file") && msg.contains("store"),
        "{msg}"
    );
}

#[tokio::test]
async fn a_failing_source_does_not_block_the_others() {
    let registry = Registry::new();
    let broken = OpenApiSpec {
        name: "broken".into(),
        location: fixture("does-not-exist.json"),
        ..Default::default()
    };
    let missing_child = McpSpec {
        name: "ghost".into(),
        command: Some("/nonexistent/toolshed-no-such-server".into()),
        connect_timeout_ms: Some(3000),
        ..Default::default()
    };
    let reports = registry
        .load(&[
            SourceSpec::Openapi(petstore("pets")),
            SourceSpec::Openapi(broken),
            SourceSpec::Mcp(missing_child),
        ])
        .await;
    let by = |n: &str| reports.iter().find(|r| r.name == n).unwrap();
    assert!(by("pets").ok());
    assert_eq!(by("pets").tools, 20);
    assert!(by("broken")
        .error
        .as_deref()
        .unwrap()
        .contains("does-not-exist.json"));
    assert!(by("ghost").error.as_deref().unwrap().contains("ghost"));
    assert!(by("ghost").summary_line().contains("FAILED"));

    let catalog = Arc::new(SharedCatalog::default());
    let tables = Plugin::new("tables", "Tables", "d").with_tool(plugin_tool("tables.list"));
    let assembled = registry.attach(vec![tables], catalog.clone()).unwrap();
    assert_eq!(assembled.tools, 21);
    assert!(catalog.load().get("pets.pet.add_pet").is_some());
    assert!(catalog.load().get("tables.list").is_some());
}

#[tokio::test]
async fn a_duplicate_path_names_both_origins_and_leaves_the_source_out() {
    let registry = Registry::new();
    registry
        .load(&[
            SourceSpec::Openapi(petstore("pets")),
            SourceSpec::Openapi(petstore("zoo")),
        ])
        .await;
    let clash = Plugin::new("pets", "Pets", "d").with_tool(plugin_tool("pets.pet.add_pet"));
    let catalog = SharedCatalog::default();
    let assembled = registry.assemble(&[clash], &catalog).unwrap();
    assert_eq!(assembled.excluded.len(), 1);
    let (name, msg) = &assembled.excluded[0];
    assert_eq!(name, "pets");
    assert!(
        msg.contains("pets.pet.add_pet")
            && msg.contains("plugin:pets")
            && msg.contains("source:pets"),
        "{msg}"
    );
    assert!(
        catalog.load().get("zoo.pet.add_pet").is_some(),
        "others are served"
    );
    let report = registry
        .reports()
        .into_iter()
        .find(|r| r.name == "pets")
        .unwrap();
    assert!(!report.ok());
}

#[tokio::test]
async fn the_store_poll_picks_up_added_and_removed_sources() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_dir(dir.path()).await.unwrap();
    let sources = SourceStore::new(store, Sealer::from_data_dir(dir.path()).unwrap());
    let registry = Registry::new();
    let catalog = Arc::new(SharedCatalog::default());
    registry.attach(vec![], catalog.clone()).unwrap();
    let changes = Arc::new(AtomicUsize::new(0));
    let counter = changes.clone();
    let poll = spawn_store_poll(
        registry.clone(),
        sources.clone(),
        vec![],
        Duration::from_millis(50),
        move |_, first| {
            if !first {
                counter.fetch_add(1, Ordering::SeqCst);
            }
        },
    );
    sources
        .put(&SourceSpec::Openapi(petstore("pets")))
        .await
        .unwrap();
    let wait = |want: bool| {
        let catalog = catalog.clone();
        async move {
            for _ in 0..200 {
                if catalog.load().get("pets.pet.add_pet").is_some() == want {
                    return true;
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            false
        }
    };
    assert!(wait(true).await, "added source appears");
    sources.remove("pets").await.unwrap();
    assert!(wait(false).await, "removed source disappears");
    // The add may land in the poll's first (silent) sync; the removal is always a change.
    assert!(changes.load(Ordering::SeqCst) >= 1);
    poll.abort();
}

#[tokio::test]
async fn an_upstream_tool_list_change_reassembles_the_catalog() {
    let registry = Registry::new();
    let spec = McpSpec {
        name: "up".into(),
        command: Some(test_upstream().display().to_string()),
        ..Default::default()
    };
    let reports = registry.load(&[SourceSpec::Mcp(spec)]).await;
    assert!(reports[0].ok(), "{reports:?}");
    let catalog = Arc::new(SharedCatalog::default());
    registry.attach(vec![], catalog.clone()).unwrap();
    assert!(catalog.load().get("up.echo").is_some());
    assert!(catalog.load().get("up.extra").is_none());
    let toggle = catalog.load().get("up.toggle_extra").unwrap().tool.clone();
    let ctx = ToolContext::new("t".into(), toggle.def.path.clone());
    toggle.handler.call(ctx, json!({})).await.unwrap();
    let mut found = false;
    for _ in 0..100 {
        if catalog.load().get("up.extra").is_some() {
            found = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        found,
        "the new upstream tool is in the re-assembled catalog"
    );
    registry.shutdown().await;
}

/// Every file of a directory (the SQLite database, its WAL and shared memory), as bytes.
fn dir_bytes(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| (p.display().to_string(), std::fs::read(&p).unwrap()))
        .collect()
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

fn scheme_spec() -> SourceSpec {
    let mut spec = petstore("pets");
    spec.auth = Some(AuthSpec::Schemes {
        schemes: [
            (
                "api_key".to_string(),
                SchemeAuthSpec {
                    value: Some("scheme-literal-key-71".into()),
                    ..Default::default()
                },
            ),
            (
                "petstore_auth".to_string(),
                SchemeAuthSpec {
                    client_id: Some("toolshed".into()),
                    client_secret: Some("scheme-literal-client-72".into()),
                    token_url: Some("https://id.example.com/token".into()),
                    scopes: Some(vec!["read:pets".into()]),
                    ..Default::default()
                },
            ),
        ]
        .into(),
    });
    SourceSpec::Openapi(spec)
}

fn graphql_oauth_spec() -> SourceSpec {
    SourceSpec::Graphql(GraphqlSpec {
        name: "gql".into(),
        endpoint: "https://gql.example.com/graphql".into(),
        auth: Some(AuthSpec::Oauth2ClientCredentials {
            token_url: "https://id.example.com/token".into(),
            client_id: "toolshed".into(),
            client_secret: "gql-literal-client-73".into(),
            scopes: vec![],
            audience: Some("gql".into()),
        }),
        ..Default::default()
    })
}

#[tokio::test]
async fn new_auth_forms_round_trip_sealed_in_the_database_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_dir(dir.path()).await.unwrap();
    let sealer = Sealer::new(SecretBox::from_base64(&SecretBox::generate_key()).unwrap());
    let sources = SourceStore::new(store.clone(), sealer);
    let schemes = scheme_spec();
    let gql = graphql_oauth_spec();
    let gql_key = SourceSpec::Graphql(GraphqlSpec {
        name: "gql_key".into(),
        endpoint: "https://gql.example.com/graphql".into(),
        auth: Some(AuthSpec::ApiKey {
            name: "api_key".into(),
            value: "gql-literal-query-key-74".into(),
            location: KeyLocation::Query,
        }),
        ..Default::default()
    });
    for s in [&schemes, &gql, &gql_key] {
        sources.put(s).await.unwrap();
    }
    let secrets = [
        "scheme-literal-key-71",
        "scheme-literal-client-72",
        "gql-literal-client-73",
        "gql-literal-query-key-74",
    ];
    let files = dir_bytes(dir.path());
    assert!(
        files.iter().any(|(p, _)| p.ends_with("toolshed.db")),
        "{:?}",
        files.iter().map(|f| &f.0).collect::<Vec<_>>()
    );
    let mut sealed_seen = false;
    for (path, bytes) in &files {
        for s in secrets {
            assert!(!contains(bytes, s), "{s} is in {path} in the clear");
        }
        sealed_seen |= contains(bytes, "sealed:");
    }
    assert!(sealed_seen, "the sealed values are in the database");

    let mut listed: Vec<SourceSpec> = sources
        .list()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.unwrap().spec)
        .collect();
    listed.sort_by(|a, b| a.name().cmp(b.name()));
    assert_eq!(listed, vec![gql.clone(), gql_key.clone(), schemes.clone()]);

    // What `sources list` shows: no secret, `type = "schemes"` spelled out.
    for s in &listed {
        let shown = serde_json::to_string(&s.redacted()).unwrap();
        for secret in secrets {
            assert!(!shown.contains(secret), "{shown}");
        }
    }
    let shown = serde_json::to_value(schemes.redacted()).unwrap();
    assert_eq!(shown["auth"]["type"], "schemes");
    assert_eq!(shown["auth"]["schemes"]["api_key"]["value"], "[REDACTED]");
    assert_eq!(
        shown["auth"]["schemes"]["petstore_auth"]["client_id"],
        "toolshed"
    );
}

#[test]
fn toml_declares_per_scheme_credentials_and_full_graphql_auth() {
    #[derive(serde::Deserialize)]
    struct File {
        sources: Vec<SourceSpec>,
    }
    let text = r#"
[[sources]]
kind = "openapi"
name = "pets"
spec = "specs/petstore.json"
[sources.auth.schemes.api_key]
value = "env:PETS_KEY"
[sources.auth.schemes.petstore_auth]
client_id = "toolshed"
client_secret = "env:PETS_CLIENT_SECRET"
token_url = "https://id.example.com/token"

[[sources]]
kind = "openapi"
name = "legacy"
spec = "specs/petstore.json"
auth = { type = "api_key", name = "X-Key", value = "env:K", location = "query" }

[[sources]]
kind = "graphql"
name = "gql"
endpoint = "https://gql.example.com/graphql"
[sources.auth]
type = "oauth2_client_credentials"
token_url = "https://id.example.com/token"
client_id = "toolshed"
client_secret = "env:GQL_SECRET"
"#;
    let file: File = toml::from_str(text).unwrap();
    for s in &file.sources {
        s.validate().unwrap();
    }
    let SourceSpec::Openapi(pets) = &file.sources[0] else {
        panic!("openapi")
    };
    let Some(AuthSpec::Schemes { schemes }) = &pets.auth else {
        panic!("{:?}", pets.auth)
    };
    assert_eq!(schemes["api_key"].value.as_deref(), Some("env:PETS_KEY"));
    assert_eq!(
        schemes["petstore_auth"].kind().unwrap(),
        SchemeAuthKind::OAuth2ClientCredentials
    );
    assert!(matches!(
        &file.sources[1],
        SourceSpec::Openapi(OpenApiSpec {
            auth: Some(AuthSpec::ApiKey {
                location: KeyLocation::Query,
                ..
            }),
            ..
        })
    ));
    assert!(matches!(
        &file.sources[2],
        SourceSpec::Graphql(GraphqlSpec {
            auth: Some(AuthSpec::Oauth2ClientCredentials { .. }),
            ..
        })
    ));
    // The stored JSON form reads back the same.
    let json = serde_json::to_value(&file.sources[0]).unwrap();
    assert_eq!(
        serde_json::from_value::<SourceSpec>(json).unwrap(),
        file.sources[0]
    );

    // Mistakes are named.
    let bad = |auth: &str| {
        toml::from_str::<File>(&format!(
            "[[sources]]\nkind = \"openapi\"\nname = \"p\"\nspec = \"a.json\"\n{auth}"
        ))
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default()
    };
    let e = bad("auth = { token = \"t\" }");
    assert!(e.contains("'type'") && e.contains("schemes"), "{e}");
    let e = bad("[sources.auth.schemes.k]\nvalue = \"v\"\ncolour = \"blue\"");
    assert!(e.contains("colour"), "{e}");
    let spec = |schemes: &str| -> SourceSpec {
        toml::from_str::<File>(&format!(
            "[[sources]]\nkind = \"openapi\"\nname = \"p\"\nspec = \"a.json\"\n{schemes}"
        ))
        .unwrap()
        .sources
        .remove(0)
    };
    let e = spec("[sources.auth.schemes.k]\nvalue = \"v\"\ntoken = \"t\"")
        .validate()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("auth.schemes.k") && e.contains("value, token"),
        "{e}"
    );
    let e = spec("[sources.auth.schemes.k]\nusername = \"ann\"")
        .validate()
        .unwrap_err()
        .to_string();
    assert!(e.contains("without 'password'"), "{e}");
    let e = SourceSpec::Graphql(GraphqlSpec {
        name: "g".into(),
        endpoint: "https://g.example.com/graphql".into(),
        auth: Some(AuthSpec::Schemes {
            schemes: Default::default(),
        }),
        ..Default::default()
    })
    .validate()
    .unwrap_err()
    .to_string();
    assert!(e.contains("OpenAPI sources only"), "{e}");
}

#[tokio::test]
async fn per_scheme_credentials_reach_the_calls() {
    let app = Router::new().route(
        "/v2/store/inventory",
        axum::routing::get(|h: HeaderMap| async move {
            match h.get("api_key").and_then(|v| v.to_str().ok()) {
                Some("scheme-literal-key-71") => Json(json!({"available": 1})).into_response(),
                _ => (axum::http::StatusCode::UNAUTHORIZED, "no key").into_response(),
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let SourceSpec::Openapi(mut spec) = scheme_spec() else {
        unreachable!()
    };
    spec.base_url = Some(format!("http://{addr}/v2"));
    let spec = SourceSpec::Openapi(spec);
    let loaded = toolshed_registry::load(&spec, None).await.unwrap();
    let inv = loaded
        .tools
        .iter()
        .find(|t| t.def.path.as_str() == "pets.store.get_inventory")
        .unwrap();
    let ctx = ToolContext::new("t".into(), inv.def.path.clone());
    let out = inv.handler.call(ctx, json!({})).await.unwrap();
    assert_eq!(out["available"], 1);
    // The implicit-flow scheme is configured with a token URL, so no operation is left
    // without credentials.
    assert!(
        !loaded.warnings.iter().any(|w| w.contains("cannot meet")),
        "{:?}",
        loaded.warnings
    );
    // Without the OAuth2 client, its operations are reported.
    let mut only_key = spec.clone();
    if let SourceSpec::Openapi(o) = &mut only_key {
        if let Some(AuthSpec::Schemes { schemes }) = &mut o.auth {
            schemes.remove("petstore_auth");
        }
    }
    let report = dry_run(&only_key, None).await.unwrap();
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.contains("cannot meet the security requirement (\"petstore_auth\")")),
        "{:?}",
        report.warnings
    );
}

/// The one override rule on a large real document (moved here with the only override type):
/// flags are changed and a whole tag is hidden.
#[test]
fn overrides_change_flags_and_hide_on_a_real_document() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../openapi/tests/fixtures/star-trek.oas3.0.json");
    let doc = toolshed_openapi::parse_document(&std::fs::read_to_string(path).unwrap()).unwrap();
    let opts = toolshed_openapi::ImportOptions {
        namespace: "stapi".into(),
        ..Default::default()
    };
    let imported = toolshed_openapi::import(&doc, &opts).unwrap();
    let all = imported.tools.len();
    let overrides = [
        OverrideSpec {
            pattern: "stapi.*.post_*_search".into(),
            read_only: Some(true),
            destructive: Some(false),
            hidden: false,
        },
        OverrideSpec {
            pattern: "stapi.book.*".into(),
            hidden: true,
            ..Default::default()
        },
    ];
    let (tools, _) =
        toolshed_registry::apply_overrides("stapi", imported.tools, &overrides).unwrap();
    let search = tools
        .iter()
        .find(|t| t.def.path.as_str() == "stapi.animal.post_animal_search")
        .unwrap();
    assert!(search.def.annotations.read_only && !search.def.annotations.destructive);
    assert!(tools
        .iter()
        .all(|t| !t.def.path.as_str().starts_with("stapi.book.")));
    assert!(tools.len() < all && !tools.is_empty());
}
