//! The registry over real imports: overrides, sealed persistence, duplicate names and paths,
//! failure isolation, store polling and the n8n wiring against a local axum server.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::HeaderMap;
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};
use toolshed_core::{Plugin, SharedCatalog, Tool, ToolContext, ToolDef, ToolError, ToolPath};
use toolshed_outbound::SecretBox;
use toolshed_sources::{
    declare, dry_run, n8n_plugin, spawn_store_poll, AuthSpec, McpSpec, N8nSettings, OpenApiSpec,
    Origin, OverrideSpec, Registry, Sealer, SourceSpec, SourceStore,
};
use toolshed_store::Store;

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
        spec: fixture("petstore.oas3.0.json"),
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
        spec: fixture("does-not-exist.json"),
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
        move |_| {
            counter.fetch_add(1, Ordering::SeqCst);
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
        .find(|t| t.def.path.as_str().ends_with("create_tag"))
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

/// `target/<profile>/toolshed-test-upstream`, built on demand when a narrower `cargo test`
/// did not build it.
fn test_upstream() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .unwrap()
        .to_path_buf();
    let bin = profile_dir.join("toolshed-test-upstream");
    if !bin.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = std::process::Command::new(cargo)
            .args(["build", "-p", "toolshed-mcp-source", "--bins"])
            .status()
            .expect("run cargo build for the test upstream");
        assert!(status.success(), "building toolshed-test-upstream failed");
    }
    bin
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
