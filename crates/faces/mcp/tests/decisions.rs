//! Who decides through the `resume` meta-tool: an agent settles its own pending call only when
//! its principal may decide the call and has `self_decide`; `resume_tool = false` removes the
//! tool. The client here has no elicitation, so nothing is asked of a person.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use toolshed_testing::mcp::connect;

use rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation};
use rmcp::{ClientHandler, RoleClient};
use serde_json::{json, Value};
use toolshed_core::{
    Annotations, CatalogBuilder, Policy, Principal, Role, SharedCatalog, Tool, ToolDef, ToolPath,
};
use toolshed_engine::{Engine, EngineConfig};
use toolshed_mcp::{Identity, McpOptions, ToolshedMcp};
use toolshed_store::Store;

#[derive(Clone)]
struct Agent;

impl ClientHandler for Agent {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("test-agent", "1"),
        )
    }
}

type Client = rmcp::service::RunningService<RoleClient, Agent>;

/// A session of `principal` (as an API-key principal would be) over an engine where `plain`
/// decides nothing, `clerk` decides `danger.*` and `bot` also has `self_decide`.
async fn session(principal: &str, options: McpOptions) -> (Client, Arc<AtomicUsize>) {
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
    let role = |id: &str, decide: &[&str], self_decide: bool| Role {
        id: id.into(),
        patterns: vec!["danger.*".into()],
        decide: decide.iter().map(|d| d.to_string()).collect(),
        self_decide,
        ..Default::default()
    };
    let member = |id: &str, role: &str| Principal {
        id: id.into(),
        roles: vec![role.into()],
    };
    let policy = Policy::new(
        vec![
            role("user", &[], false),
            role("decider", &["danger.*"], false),
            role("trusted", &["danger.*"], true),
        ],
        vec![
            member("plain", "user"),
            member("clerk", "decider"),
            member("bot", "trusted"),
        ],
    )
    .unwrap();
    let engine = Engine::new(
        Arc::new(SharedCatalog::new(b.build().unwrap())),
        policy,
        Store::open("sqlite::memory:").await.unwrap(),
        EngineConfig::default(),
    );
    let server = ToolshedMcp::new(engine, Identity::Fixed(principal.into()), options);
    (connect(server, Agent).await, ran)
}

async fn call(client: &Client, tool: &str, args: Value) -> Value {
    let r = client
        .call_tool(
            CallToolRequestParams::new(tool.to_string())
                .with_arguments(args.as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    serde_json::from_str(&r.content[0].as_text().unwrap().text).unwrap()
}

/// Runs a script that pauses on `danger.drop`, then tries to approve it with `resume`.
async fn approve_own(client: &Client) -> Value {
    let paused = call(
        client,
        "run_script",
        json!({"script": "return await tools.danger.drop({})"}),
    )
    .await;
    assert_eq!(paused["status"], "paused", "{paused}");
    call(
        client,
        "resume",
        json!({"executionId": paused["executionId"], "decision": "approve"}),
    )
    .await
}

#[tokio::test]
async fn the_agent_decides_its_own_calls_only_with_decide_and_self_decide() {
    for (who, expected) in [("plain", false), ("clerk", false), ("bot", true)] {
        let (client, ran) = session(who, McpOptions::default()).await;
        let v = approve_own(&client).await;
        if expected {
            assert_eq!(v["status"], "completed", "{who}: {v}");
            assert_eq!(ran.load(Ordering::SeqCst), 1, "{who}");
        } else {
            assert_eq!(v["error"]["code"], "forbidden", "{who}: {v}");
            assert_eq!(ran.load(Ordering::SeqCst), 0, "{who}");
        }
    }
}

#[tokio::test]
async fn resume_tool_false_removes_the_meta_tool() {
    let options = McpOptions {
        resume_tool: false,
        ..Default::default()
    };
    let (client, ran) = session("bot", options).await;
    let names: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    assert!(names.contains(&"run_script".to_string()), "{names:?}");
    assert!(!names.contains(&"resume".to_string()), "{names:?}");
    let v = approve_own(&client).await;
    assert_eq!(v["error"]["code"], "not_found", "{v}");
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    let (client, _) = session("bot", McpOptions::default()).await;
    let listed = client.list_all_tools().await.unwrap();
    assert!(listed.iter().any(|t| t.name == "resume"));
}
