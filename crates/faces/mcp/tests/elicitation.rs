//! Approval through MCP elicitation: a client that supports form elicitation is asked at once
//! when a script pauses; accept approves, decline denies, cancel leaves it paused. A client
//! without the capability gets the paused result and settles it with `resume`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use toolshed_testing::mcp::connect;

use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult,
    ElicitationAction, Implementation,
};
use rmcp::service::RequestContext;
use rmcp::{ClientHandler, ErrorData, RoleClient};
use serde_json::{json, Value};
use toolshed_core::{
    Annotations, CatalogBuilder, Policy, Principal, Role, SharedCatalog, Tool, ToolDef, ToolPath,
};
use toolshed_engine::{Engine, EngineConfig};
use toolshed_mcp::{Identity, McpOptions, ToolshedMcp};
use toolshed_store::Store;

#[derive(Clone)]
struct Human {
    answer: Option<ElicitationAction>,
    asked: Arc<AtomicUsize>,
}

impl ClientHandler for Human {
    fn get_info(&self) -> ClientConfig {
        let caps = if self.answer.is_some() {
            ClientCapabilities::builder().enable_elicitation().build()
        } else {
            ClientCapabilities::default()
        };
        ClientConfig::new(caps, Implementation::new("test-human", "1"))
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        let ElicitRequestParams::FormElicitationParams { message, .. } = request else {
            panic!("expected a form elicitation");
        };
        assert!(message.contains("danger.drop"), "{message}");
        Ok(ElicitResult::new(self.answer.clone().unwrap()))
    }
}

async fn setup(
    answer: Option<ElicitationAction>,
) -> (
    rmcp::service::RunningService<RoleClient, Human>,
    Arc<AtomicUsize>,
    Arc<AtomicUsize>,
) {
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    let mut b = CatalogBuilder::new();
    b.add_tool(Tool::from_fn(
        ToolDef::new(ToolPath::parse("danger.drop").unwrap(), "Drop", "Drops it.")
            .with_annotations(Annotations::DESTRUCTIVE),
        move |_c, _a| {
            let r = r.clone();
            async move {
                r.fetch_add(1, Ordering::SeqCst);
                Ok(json!("dropped"))
            }
        },
    ));
    let policy = Policy::new(
        vec![Role {
            id: "all".into(),
            name: String::new(),
            patterns: vec!["*".into()],
            // Like the built-in local principal: decides everything, also through `resume`.
            decide: vec!["**".into()],
            self_decide: true,
            ..Role::default()
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
    let asked = Arc::new(AtomicUsize::new(0));
    let client = connect(
        server,
        Human {
            answer,
            asked: asked.clone(),
        },
    )
    .await;
    (client, asked, ran)
}

async fn run(client: &rmcp::service::RunningService<RoleClient, Human>) -> Value {
    let script =
        r#"try { return await tools.danger.drop({}) } catch (e) { return "refused: " + e.code }"#;
    let r = client
        .call_tool(
            CallToolRequestParams::new("run_script")
                .with_arguments(json!({"script": script}).as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    serde_json::from_str(&r.content[0].as_text().unwrap().text).unwrap()
}

#[tokio::test]
async fn accept_approves_at_once() {
    let (client, asked, ran) = setup(Some(ElicitationAction::Accept)).await;
    let v = run(&client).await;
    assert_eq!(v["status"], "completed", "{v}");
    assert_eq!(v["result"], "dropped");
    assert_eq!(
        (asked.load(Ordering::SeqCst), ran.load(Ordering::SeqCst)),
        (1, 1)
    );
}

#[tokio::test]
async fn decline_denies() {
    let (client, asked, ran) = setup(Some(ElicitationAction::Decline)).await;
    let v = run(&client).await;
    assert_eq!(v["result"], "refused: denied", "{v}");
    assert_eq!(
        (asked.load(Ordering::SeqCst), ran.load(Ordering::SeqCst)),
        (1, 0)
    );
}

#[tokio::test]
async fn cancel_or_no_support_leaves_it_paused() {
    for answer in [Some(ElicitationAction::Cancel), None] {
        let (client, _asked, ran) = setup(answer).await;
        let v = run(&client).await;
        assert_eq!(v["status"], "paused", "{v}");
        assert_eq!(ran.load(Ordering::SeqCst), 0);
        let r = client
            .call_tool(
                CallToolRequestParams::new("resume").with_arguments(
                    json!({"executionId": v["executionId"], "decision": "approve"})
                        .as_object()
                        .unwrap()
                        .clone(),
                ),
            )
            .await
            .unwrap();
        let v: Value = serde_json::from_str(&r.content[0].as_text().unwrap().text).unwrap();
        assert_eq!(v["result"], "dropped", "{v}");
        assert_eq!(ran.load(Ordering::SeqCst), 1);
    }
}
