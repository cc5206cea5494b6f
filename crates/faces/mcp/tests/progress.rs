//! `run_script` with a progress token sends the script's events as `notifications/progress`
//! (in-process server and client over an in-memory pipe).

use std::sync::Arc;
use toolshed_testing::mcp::connect;

use rmcp::model::{
    CallToolRequestParams, NumberOrString, ProgressNotificationParam, ProgressToken,
    RequestMetaObject,
};
use rmcp::service::NotificationContext;
use rmcp::{ClientHandler, RoleClient};
use serde_json::json;
use std::sync::Mutex;
use toolshed_core::{
    Annotations, CatalogBuilder, Policy, Principal, Role, SharedCatalog, Tool, ToolDef, ToolPath,
};
use toolshed_engine::{Engine, EngineConfig};
use toolshed_mcp::{Identity, McpOptions, ToolshedMcp};
use toolshed_store::Store;

#[derive(Clone, Default)]
struct Listener(Arc<Mutex<Vec<ProgressNotificationParam>>>);

impl ClientHandler for Listener {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.0.lock().unwrap().push(params);
    }
}

#[tokio::test]
async fn run_script_reports_its_events_as_progress() {
    let mut b = CatalogBuilder::new();
    b.add_tool(Tool::from_fn(
        ToolDef::new(ToolPath::parse("demo.echo").unwrap(), "Echo", "Echoes.")
            .with_annotations(Annotations::READ_ONLY),
        |_c, a| async move { Ok(a) },
    ));
    let policy = Policy::new(
        vec![Role {
            id: "all".into(),
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
        Arc::new(SharedCatalog::new(b.build().unwrap())),
        policy,
        Store::open("sqlite::memory:").await.unwrap(),
        EngineConfig::default(),
    );
    let server = ToolshedMcp::new(engine, Identity::Fixed("me".into()), McpOptions::default());
    let listener = Listener::default();
    let client = connect(server, listener.clone()).await;
    let script = "console.log('hi'); const a = await tools.demo.echo({x: 1}); return a.x;";
    let mut params = CallToolRequestParams::new("run_script")
        .with_arguments(json!({"script": script}).as_object().unwrap().clone());
    let token = ProgressToken(NumberOrString::String("p-1".into()));
    params.meta = Some(RequestMetaObject::with_progress_token(token));
    let result = client.call_tool(params).await.unwrap();
    let text = result.content[0].as_text().unwrap().text.clone();
    assert!(text.contains('1'), "{text}");
    // Notifications may trail the result on the pipe.
    for _ in 0..50 {
        if listener.0.lock().unwrap().len() >= 5 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let got = listener.0.lock().unwrap().clone();
    let messages: Vec<String> = got.iter().filter_map(|p| p.message.clone()).collect();
    assert_eq!(
        messages,
        [
            "started",
            "tool_call demo.echo",
            "tool_result demo.echo ok",
            "log hi",
            "completed"
        ],
    );
    // (The client library puts its own token in the request; every notification carries it.)
    assert!(got
        .iter()
        .all(|p| p.progress_token == got[0].progress_token));
    let progress: Vec<f64> = got.iter().map(|p| p.progress).collect();
    assert_eq!(progress, [1.0, 2.0, 3.0, 4.0, 5.0], "increasing");

    client.cancel().await.unwrap();
}
