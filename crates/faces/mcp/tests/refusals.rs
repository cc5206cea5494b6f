//! A tool's structured refusal over MCP: a handler that refuses with data (the `agents.*`
//! builder tools' `{ok: false, stage, errors}`) answers a tool result with `isError` whose
//! `structuredContent` is that object, both as a direct tool and from a script; an ordinary
//! failure carries no `structuredContent`.

use std::sync::Arc;

use rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation};
use rmcp::{ClientHandler, RoleClient};
use serde_json::{json, Value};
use toolshed_core::{
    Annotations, CatalogBuilder, Policy, Principal, Role, SharedCatalog, Tool, ToolDef, ToolError,
    ToolPath,
};
use toolshed_engine::{Engine, EngineConfig};
use toolshed_mcp::{Identity, McpOptions, ToolshedMcp};
use toolshed_store::Store;

#[derive(Clone)]
struct Plain;

impl ClientHandler for Plain {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("plain", "1"),
        )
    }
}

fn refusal() -> Value {
    json!({"ok": false, "stage": "schema", "errors": [
        {"path": "/config/maxSteps", "message": "too large", "expected": "integer ≤ 200", "received": "500"}
    ]})
}

async fn client() -> rmcp::service::RunningService<RoleClient, Plain> {
    let mut b = CatalogBuilder::new();
    b.add_tool(Tool::from_fn(
        ToolDef::new(
            ToolPath::parse("docs.write").unwrap(),
            "Write",
            "Writes a document.",
        )
        .with_annotations(Annotations::READ_ONLY),
        |_c, a: Value| async move {
            match a["fail"].as_str() {
                Some("plain") => Err(ToolError::invalid("bad document")),
                _ => Err(ToolError::rejected(
                    "the document does not validate",
                    refusal(),
                )),
            }
        },
    ));
    let policy = Policy::new(
        vec![Role {
            id: "all".into(),
            patterns: vec!["**".into()],
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
    let options = McpOptions {
        direct: true,
        ..McpOptions::default()
    };
    let server = ToolshedMcp::new(engine, Identity::Fixed("me".into()), options);
    toolshed_testing::mcp::connect(server, Plain).await
}

fn call(name: &str, args: Value) -> CallToolRequestParams {
    CallToolRequestParams::new(name.to_string()).with_arguments(args.as_object().unwrap().clone())
}

#[tokio::test]
async fn a_structured_refusal_is_an_error_result_with_its_object() {
    let client = client().await;
    let r = client
        .call_tool(call("docs__write", json!({})))
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(true), "{r:?}");
    assert_eq!(r.structured_content, Some(refusal()), "{r:?}");

    let plain = client
        .call_tool(call("docs__write", json!({"fail": "plain"})))
        .await
        .unwrap();
    assert_eq!(plain.is_error, Some(true), "{plain:?}");
    assert_eq!(plain.structured_content, None, "{plain:?}");
    client.cancel().await.unwrap();
}
