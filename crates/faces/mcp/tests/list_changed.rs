//! A connected MCP client is told when the catalog changes, and its next `tools/list` sees the
//! new view (in-process server and client over an in-memory pipe).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use toolshed_testing::mcp::connect;

use rmcp::service::NotificationContext;
use rmcp::{ClientHandler, RoleClient};
use serde_json::json;
use toolshed_core::{
    Annotations, CatalogBuilder, Policy, Principal, Role, SharedCatalog, Tool, ToolDef, ToolPath,
};
use toolshed_engine::{Engine, EngineConfig};
use toolshed_mcp::{Identity, McpOptions, ToolshedMcp};
use toolshed_store::Store;

#[derive(Clone, Default)]
struct Counter(Arc<AtomicUsize>);

impl ClientHandler for Counter {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn tool(path: &str) -> Tool {
    Tool::from_fn(
        ToolDef::new(ToolPath::parse(path).unwrap(), path, "A tool.")
            .with_annotations(Annotations::READ_ONLY),
        |_c, _a| async { Ok(json!(1)) },
    )
}

#[tokio::test]
async fn clients_hear_about_catalog_changes() {
    let mut b = CatalogBuilder::new();
    b.add_tool(tool("one.first"));
    let catalog = Arc::new(SharedCatalog::new(b.build().unwrap()));
    let policy = Policy::new(
        vec![Role {
            id: "all".into(),
            name: String::new(),
            patterns: vec!["*".into()],
            ..Default::default()
        }],
        vec![Principal {
            id: "me".into(),
            roles: vec!["all".into()],
        }],
    )
    .unwrap();
    let engine = Engine::new(
        catalog.clone(),
        policy,
        Store::open("sqlite::memory:").await.unwrap(),
        EngineConfig::default(),
    );
    let server = ToolshedMcp::new(
        engine,
        Identity::Fixed("me".into()),
        McpOptions {
            direct: true,
            ..Default::default()
        },
    );

    let counter = Counter::default();
    let client = connect(server, counter.clone()).await;
    let names = |tools: Vec<rmcp::model::Tool>| {
        tools.iter().map(|t| t.name.to_string()).collect::<Vec<_>>()
    };
    let before = names(client.list_all_tools().await.unwrap());
    assert!(before.contains(&"one__first".to_string()), "{before:?}");

    let mut b = CatalogBuilder::new();
    b.add_tool(tool("one.first")).add_tool(tool("two.second"));
    catalog.store(b.build().unwrap());

    let mut waited = Duration::ZERO;
    while counter.0.load(Ordering::SeqCst) == 0 && waited < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(50)).await;
        waited += Duration::from_millis(50);
    }
    assert_eq!(
        counter.0.load(Ordering::SeqCst),
        1,
        "one list_changed notification"
    );
    let after = names(client.list_all_tools().await.unwrap());
    assert!(after.contains(&"two__second".to_string()), "{after:?}");
    let search = client
        .call_tool(
            rmcp::model::CallToolRequestParams::new("search_tools")
                .with_arguments(json!({"query": "second"}).as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    let text = search.content[0].as_text().unwrap().text.clone();
    assert!(
        text.contains("two.second"),
        "the search index follows the new snapshot: {text}"
    );
    client.cancel().await.unwrap();
}
