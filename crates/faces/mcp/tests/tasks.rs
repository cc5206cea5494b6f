//! MCP Tasks (SEP-2663) over durable executions, with the official Rust SDK as the client: a
//! client that declares the tasks extension gets a paused `run_script` as a task in
//! `input_required`; after the server restarted, another session reads it, answers the
//! approval with `tasks/update`, and reads the completed result; `tasks/cancel` stops one.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities, ClientConfig,
    GetTaskParams, Implementation, InputRequest, TaskPayload, TaskStatus, UpdateTaskParams,
};
use rmcp::{ClientHandler, RoleClient};
use serde_json::json;
use toolshed_core::{
    Annotations, CatalogBuilder, Policy, Principal, Role, SharedCatalog, Tool, ToolDef, ToolPath,
};
use toolshed_engine::{Engine, EngineConfig};
use toolshed_mcp::{Identity, McpOptions, ToolshedMcp};
use toolshed_store::Store;

#[derive(Clone)]
struct TaskClient;

impl ClientHandler for TaskClient {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::builder().enable_tasks().build(),
            Implementation::new("task-client", "1"),
        )
    }
}

type Client = rmcp::service::RunningService<RoleClient, TaskClient>;

/// A server on the store in `dir` (a fresh engine each time: a restart) and a new session.
async fn connect(dir: &Path, ran: Arc<AtomicUsize>) -> Client {
    let mut b = CatalogBuilder::new();
    b.add_tool(Tool::from_fn(
        ToolDef::new(ToolPath::parse("danger.drop").unwrap(), "Drop", "Drops it.")
            .with_annotations(Annotations::DESTRUCTIVE),
        move |_c, _a| {
            let r = ran.clone();
            async move {
                r.fetch_add(1, Ordering::SeqCst);
                Ok(json!("dropped"))
            }
        },
    ));
    let policy = Policy::new(
        vec![Role {
            id: "all".into(),
            patterns: vec!["*".into()],
            decide: vec!["**".into()],
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
        Store::open_dir(dir).await.unwrap(),
        EngineConfig::default(),
    );
    let server = ToolshedMcp::new(engine, Identity::Fixed("me".into()), McpOptions::default());
    toolshed_testing::mcp::connect(server, TaskClient).await
}

async fn start_task(client: &Client) -> String {
    let script = "const r = await tools.danger.drop({}); return {r};";
    let answer = client
        .call_tool_once(
            CallToolRequestParams::new("run_script")
                .with_arguments(json!({"script": script}).as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    let CallToolResponse::Task(created) = answer else {
        panic!("expected a task, got {answer:?}");
    };
    assert_eq!(created.task.status, TaskStatus::InputRequired);
    assert!(created.task.task_id.starts_with("ex_"));
    created.task.task_id
}

#[tokio::test]
async fn a_paused_script_is_a_task_answered_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    let client = connect(dir.path(), ran.clone()).await;
    let id = start_task(&client).await;
    let got = client.get_task(GetTaskParams::new(&id)).await.unwrap();
    let TaskPayload::InputRequired { input_requests } = &got.task.payload else {
        panic!("expected input_required: {got:?}");
    };
    assert!(
        matches!(
            input_requests.get("approval_0"),
            Some(InputRequest::Elicitation(_))
        ),
        "{input_requests:?}"
    );
    assert!(got
        .task
        .task
        .status_message
        .as_deref()
        .unwrap()
        .contains("danger.drop"));
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    client.cancel().await.unwrap();

    // Restarted: a new engine on the same store, a new session.
    let client = connect(dir.path(), ran.clone()).await;
    let got = client.get_task(GetTaskParams::new(&id)).await.unwrap();
    assert_eq!(got.task.status(), TaskStatus::InputRequired);
    // A response to an input request the task does not have is refused; nothing changes.
    let wrong = BTreeMap::from([("approval_9".to_string(), json!({"action": "accept"}))]);
    let err = client
        .update_task(UpdateTaskParams::new(&id, wrong))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("approval_9"), "{err}");
    let accept = BTreeMap::from([("approval_0".to_string(), json!({"action": "accept"}))]);
    client
        .update_task(UpdateTaskParams::new(&id, accept))
        .await
        .unwrap();
    let got = client.get_task(GetTaskParams::new(&id)).await.unwrap();
    let TaskPayload::Completed { result } = &got.task.payload else {
        panic!("expected completed: {got:?}");
    };
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("\"r\":\"dropped\""), "{text}");
    assert_eq!(ran.load(Ordering::SeqCst), 1, "ran once");

    // Cancel: another paused task stops and reads as cancelled; unknown tasks are errors.
    let other = start_task(&client).await;
    client
        .cancel_task(CancelTaskParams::new(&other))
        .await
        .unwrap();
    let got = client.get_task(GetTaskParams::new(&other)).await.unwrap();
    assert_eq!(got.task.status(), TaskStatus::Cancelled);
    let err = client
        .get_task(GetTaskParams::new("ex_nope"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("unknown task"), "{err}");
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    client.cancel().await.unwrap();
}

/// Sends a request outside the SDK's typed set (the 2025-11-25 `tasks/result` and
/// `tasks/list`); answers its result or the error's text.
async fn custom(
    client: &Client,
    method: &str,
    params: serde_json::Value,
) -> Result<serde_json::Value, String> {
    let request = rmcp::model::ClientRequest::CustomRequest(rmcp::model::CustomRequest::new(
        method,
        Some(params),
    ));
    // The SDK reads an answer as the first result type it fits (a `CallToolResult` here).
    match client.send_request(request).await {
        Ok(r) => Ok(serde_json::to_value(r).unwrap()),
        Err(e) => Err(e.to_string()),
    }
}

#[tokio::test]
async fn tasks_result_waits_for_the_end_and_tasks_list_shows_what_waits() {
    let dir = tempfile::tempdir().unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    let client = connect(dir.path(), ran.clone()).await;
    let id = start_task(&client).await;

    let listed = custom(&client, "tasks/list", json!({})).await.unwrap();
    let task = listed["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["taskId"] == id.as_str())
        .unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(task["status"], "input_required", "{task}");
    assert!(task["statusMessage"]
        .as_str()
        .unwrap()
        .contains("danger.drop"));
    assert!(task["createdAt"].as_str().unwrap().ends_with('Z'));

    // tasks/result waits while the task waits for its approval ...
    let waiting = {
        let peer = client.peer().clone();
        let id = id.clone();
        tokio::spawn(async move {
            let request = rmcp::model::ClientRequest::CustomRequest(
                rmcp::model::CustomRequest::new("tasks/result", Some(json!({"taskId": id}))),
            );
            peer.send_request(request).await
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    assert!(
        !waiting.is_finished(),
        "tasks/result answered before the task ended"
    );
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    // ... and answers the call's result, tied to the task, once it is approved.
    let accept = BTreeMap::from([("approval_0".to_string(), json!({"action": "accept"}))]);
    client
        .update_task(UpdateTaskParams::new(&id, accept))
        .await
        .unwrap();
    let answer = tokio::time::timeout(std::time::Duration::from_secs(10), waiting)
        .await
        .expect("tasks/result answers once the task ended")
        .unwrap()
        .unwrap();
    let result = serde_json::to_value(answer).unwrap();
    assert!(
        result["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("\"r\":\"dropped\""),
        "{result}"
    );
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        id.as_str()
    );
    assert_eq!(ran.load(Ordering::SeqCst), 1, "ran once");
    // An ended task is no longer listed; a second tasks/result answers the same result.
    let listed = custom(&client, "tasks/list", json!({})).await.unwrap();
    assert!(
        !listed["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["taskId"] == id.as_str()),
        "{listed}"
    );
    let again = custom(&client, "tasks/result", json!({"taskId": id}))
        .await
        .unwrap();
    assert_eq!(again["content"], result["content"]);

    // A cancelled task has no result; unknown tasks, missing ids and unknown methods are errors.
    let other = start_task(&client).await;
    client
        .cancel_task(CancelTaskParams::new(&other))
        .await
        .unwrap();
    let err = custom(&client, "tasks/result", json!({"taskId": other}))
        .await
        .unwrap_err();
    assert!(err.contains("was cancelled"), "{err}");
    let err = custom(&client, "tasks/result", json!({"taskId": "ex_nope"}))
        .await
        .unwrap_err();
    assert!(err.contains("unknown task"), "{err}");
    let err = custom(&client, "tasks/result", json!({}))
        .await
        .unwrap_err();
    assert!(err.contains("params.taskId"), "{err}");
    let err = custom(&client, "tasks/frobnicate", json!({}))
        .await
        .unwrap_err();
    assert!(err.contains("method not found"), "{err}");
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    client.cancel().await.unwrap();
}
