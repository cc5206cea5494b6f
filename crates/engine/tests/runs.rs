//! Agent runs against a scripted model server that speaks the real streaming wire formats of
//! OpenAI Chat Completions and Anthropic Messages (no model API is reachable from the test
//! machines; `toolshed_testing::model_server` says how it behaves like the real services).
//! Each scenario runs on both providers where it applies.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use toolshed_core::{
    Annotations, CatalogBuilder, Policy, Principal, Role, SharedCatalog, Tool, ToolDef, ToolPath,
};
use toolshed_engine::{
    AnswerAction, Decision, DecisionChannel, Engine, EngineConfig, Face, Outcome, RunRequest,
    ToolResultAnswer,
};
use toolshed_models::{Endpoint, Models, Provider, RetryPolicy};
use toolshed_outbound::Secret;
use toolshed_store::Store;
use toolshed_testing::model_server::{Failure, ModelScript, ModelServer, Turn};

const HUMAN: DecisionChannel = DecisionChannel::Human(Face::Http);
const KEY: &str = "sk-test-secret-key-0123456789";

#[derive(Default)]
struct Counters {
    query: AtomicUsize,
    drop: AtomicUsize,
    /// Arguments `n8n.workflows.run` received.
    workflow_runs: std::sync::Mutex<Vec<Value>>,
}

fn def(path: &str, ann: Annotations) -> ToolDef {
    ToolDef::new(
        ToolPath::parse(path).unwrap(),
        path,
        format!("The {path} tool."),
    )
    .with_input(json!({"type": "object", "properties": {"table": {"type": "string"}}}))
    .with_annotations(ann)
}

fn engine_on(store: Store, models: Models, c: Arc<Counters>) -> Engine {
    engine_with(store, models, c, EngineConfig::default())
}

fn engine_with(store: Store, models: Models, c: Arc<Counters>, config: EngineConfig) -> Engine {
    let mut b = CatalogBuilder::new();
    let k = c.clone();
    b.add_tool(Tool::from_fn(
        def("rows.query", Annotations::READ_ONLY),
        move |_, args| {
            let k = k.clone();
            async move {
                k.query.fetch_add(1, Ordering::SeqCst);
                Ok(json!({"rows": [{"id": 1, "table": args["table"]}]}))
            }
        },
    ));
    let k = c.clone();
    b.add_tool(Tool::from_fn(
        def("rows.drop", Annotations::DESTRUCTIVE),
        move |_, _| {
            let k = k.clone();
            async move {
                k.drop.fetch_add(1, Ordering::SeqCst);
                Ok(json!({"dropped": true}))
            }
        },
    ));
    let k = c.clone();
    b.add_tool(Tool::from_fn(
        ToolDef::new(
            ToolPath::parse("n8n.workflows.run").unwrap(),
            "Run Workflow",
            "Runs a workflow.",
        )
        .with_annotations(Annotations::READ_ONLY),
        move |_, args| {
            let k = k.clone();
            async move {
                k.workflow_runs.lock().unwrap().push(args.clone());
                Ok(json!({"executionId": "9", "status": "success", "data": {"sample": [args["inputData"]]}}))
            }
        },
    ));
    b.add_tool(Tool::from_fn(
        def("secret.read", Annotations::READ_ONLY),
        |_, _| async { Ok(json!("classified")) },
    ));
    let policy = Policy::new(
        vec![
            Role {
                id: "user".into(),
                patterns: vec![
                    "rows.**".into(),
                    "secret.**".into(),
                    "client.**".into(),
                    "n8n.**".into(),
                ],
                decide: vec!["rows.**".into(), "ask_user".into()],
                ..Role::default()
            },
            Role {
                id: "reader".into(),
                patterns: vec!["rows.query".into()],
                ..Role::default()
            },
        ],
        vec![
            Principal {
                id: "alice".into(),
                roles: vec!["user".into()],
            },
            Principal {
                id: "carol".into(),
                roles: vec!["reader".into()],
            },
        ],
    )
    .unwrap();
    Engine::new(
        Arc::new(SharedCatalog::new(b.build().unwrap())),
        policy,
        store,
        config,
    )
    .with_models(models)
}

fn models(server: &ModelServer, provider: Provider, key: &str) -> Models {
    let base_url = match provider {
        Provider::Openai => server.openai_url(),
        Provider::Anthropic => server.anthropic_url(),
    };
    Models::new(vec![Endpoint {
        id: "main".into(),
        provider,
        base_url,
        api_key: Some(Secret::new(key)),
        headers: vec![],
        timeout: Duration::from_secs(10),
        allow_private: true,
        unavailable: None,
    }])
    .unwrap()
    .with_retry(RetryPolicy {
        attempts: 3,
        base: Duration::from_millis(10),
        max_wait: Duration::from_secs(5),
    })
}

fn definition(provider: Provider, tools: Value, config: Value) -> Value {
    json!({
        "name": "helper",
        "model": format!("{}/test-model", provider.as_str()),
        "credential": "main",
        "instructions": "Answer from the rows.",
        "tools": tools,
        "config": config,
    })
}

fn request(def: Value, input: &str) -> RunRequest {
    RunRequest {
        definition: def,
        version: 1,
        input: input.into(),
        ..RunRequest::default()
    }
}

async fn setup(provider: Provider, script: ModelScript) -> (ModelServer, Engine, Arc<Counters>) {
    let server = ModelServer::start(script).await;
    let c = Arc::new(Counters::default());
    let store = Store::open("sqlite::memory:").await.unwrap();
    let engine = engine_on(store, models(&server, provider, KEY), c.clone());
    (server, engine, c)
}

fn rows_tools() -> Value {
    json!([{"type": "catalog", "pattern": "rows.*"}])
}

async fn event_kinds(engine: &Engine, id: &str) -> Vec<String> {
    engine
        .store()
        .events_after(id, 0, 1000)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect()
}

const PROVIDERS: [Provider; 2] = [Provider::Openai, Provider::Anthropic];

#[tokio::test]
async fn a_two_step_run_queries_then_answers_with_usage_recorded() {
    for p in PROVIDERS {
        let script = ModelScript {
            turns: vec![
                Turn::calls(&[("rows__query", json!({"table": "orders"}))]),
                Turn::text("There is one order."),
            ],
            ..Default::default()
        };
        let (server, engine, c) = setup(p, script).await;
        let alice = engine.caller("alice", Face::Http);
        let out = engine
            .start_run(
                &alice,
                request(definition(p, rows_tools(), json!({})), "How many orders?"),
            )
            .await
            .unwrap();
        let Outcome::Completed {
            execution_id,
            result,
            ..
        } = out
        else {
            panic!("{p:?}: {out:?}")
        };
        assert_eq!(result["output"], "There is one order.", "{p:?}");
        assert_eq!(result["steps"], 2);
        assert_eq!(result["toolCalls"], 1);
        assert_eq!(
            result["usage"],
            json!({"inputTokens": 30, "outputTokens": 13}),
            "{p:?}"
        );
        assert_eq!(c.query.load(Ordering::SeqCst), 1);
        let reqs = server.requests();
        assert_eq!(reqs.len(), 2);
        let header = |name: &str| {
            reqs[0]
                .1
                .get(name)
                .and_then(|v| v.to_str().ok().map(str::to_string))
        };
        match p {
            Provider::Openai => assert_eq!(header("authorization"), Some(format!("Bearer {KEY}"))),
            Provider::Anthropic => {
                assert_eq!(header("x-api-key").as_deref(), Some(KEY));
                assert_eq!(header("anthropic-version").as_deref(), Some("2023-06-01"));
            }
        }
        // The tools offered: the agent's pattern in the caller's view, plus ask_user.
        let names: Vec<String> = reqs[0].2["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| match p {
                Provider::Openai => t["function"]["name"].as_str().unwrap().to_string(),
                Provider::Anthropic => t["name"].as_str().unwrap().to_string(),
            })
            .collect();
        assert_eq!(names, ["rows__query", "rows__drop", "ask_user"], "{p:?}");
        // The second request carries the tool's result.
        let second = reqs[1].2.to_string();
        assert!(second.contains("orders"), "{p:?}: {second}");
        let kinds = event_kinds(&engine, &execution_id).await;
        for k in [
            "started",
            "text_delta",
            "tool_call",
            "tool_result",
            "usage",
            "completed",
        ] {
            assert!(kinds.iter().any(|x| x == k), "{p:?}: no {k} in {kinds:?}");
        }
        let info = engine.execution(&alice, &execution_id).await.unwrap();
        assert_eq!(info.kind, "run");
    }
}

#[tokio::test]
async fn a_destructive_call_pauses_survives_a_restart_and_completes_once_approved() {
    for p in PROVIDERS {
        let dir = tempfile::tempdir().unwrap();
        let script = ModelScript {
            turns: vec![
                Turn::calls(&[("rows__query", json!({"table": "old"}))]),
                Turn::calls(&[("rows__drop", json!({"table": "old"}))]),
                Turn::text("Dropped."),
            ],
            ..Default::default()
        };
        let server = ModelServer::start(script).await;
        let c = Arc::new(Counters::default());
        let id = {
            let store = Store::open_dir(dir.path()).await.unwrap();
            let engine = engine_on(store, models(&server, p, KEY), c.clone());
            let alice = engine.caller("alice", Face::Http);
            let out = engine
                .start_run(
                    &alice,
                    request(definition(p, rows_tools(), json!({})), "Drop old"),
                )
                .await
                .unwrap();
            let Outcome::Paused {
                execution_id,
                waits,
                ..
            } = out
            else {
                panic!("{out:?}")
            };
            assert_eq!(waits[0].path.as_deref(), Some("rows.drop"));
            engine.shutdown().await;
            execution_id
        };
        assert_eq!(c.drop.load(Ordering::SeqCst), 0);
        // A new process on the same store.
        let store = Store::open_dir(dir.path()).await.unwrap();
        let engine = engine_on(store, models(&server, p, KEY), c.clone());
        let alice = engine.caller("alice", Face::Http);
        let out = engine
            .resume(&alice, &id, Decision::Approve, HUMAN)
            .await
            .unwrap();
        let Outcome::Completed { result, .. } = out else {
            panic!("{p:?}: {out:?}")
        };
        assert_eq!(result["output"], "Dropped.");
        assert_eq!(
            c.query.load(Ordering::SeqCst),
            1,
            "{p:?}: the query before the pause ran once"
        );
        assert_eq!(c.drop.load(Ordering::SeqCst), 1);
        // The model was asked three times in all: journaled answers are not asked again.
        assert_eq!(server.requests().len(), 3, "{p:?}");
    }
}

#[tokio::test]
async fn a_client_tool_round_trip_and_a_question_answered() {
    for p in PROVIDERS {
        let script = ModelScript {
            turns: vec![
                Turn::calls(&[("client__open_tab", json!({"url": "https://a.example"}))]),
                Turn::calls(&[(
                    "ask_user",
                    json!({"question": "Which one?", "schema": {"type": "object", "properties": {"pick": {"type": "string"}}}}),
                )]),
                Turn::text("Done."),
            ],
            ..Default::default()
        };
        let (server, engine, _) = setup(p, script).await;
        let alice = engine.caller("alice", Face::Http);
        let tools = json!([{"type": "client", "name": "open_tab", "description": "Opens a tab", "inputSchema": {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]}}]);
        let out = engine
            .start_run(&alice, request(definition(p, tools, json!({})), "Open it"))
            .await
            .unwrap();
        let Outcome::ToolCallRequired {
            execution_id: id,
            tool_calls,
            ..
        } = out
        else {
            panic!("{out:?}")
        };
        assert_eq!(tool_calls[0].path, "client.open_tab");
        let out = engine
            .tool_results(
                &alice,
                &id,
                vec![ToolResultAnswer {
                    call_id: tool_calls[0].call_id.clone(),
                    result: Some(json!({"opened": true})),
                    error: None,
                }],
                HUMAN,
            )
            .await
            .unwrap();
        let Outcome::Paused { waits, .. } = out else {
            panic!("{out:?}")
        };
        assert_eq!(waits[0].message.as_deref(), Some("Which one?"));
        let out = engine
            .answer(
                &alice,
                &id,
                &waits[0].wait_id,
                AnswerAction::Accept,
                Some(json!({"pick": "b"})),
                HUMAN,
            )
            .await
            .unwrap();
        let Outcome::Completed { result, .. } = out else {
            panic!("{out:?}")
        };
        assert_eq!(result["output"], "Done.");
        let last = server.requests().last().unwrap().2.to_string();
        assert!(
            last.contains("opened") && last.contains("pick"),
            "{p:?}: {last}"
        );
    }
}

#[tokio::test]
async fn a_tool_outside_the_agents_tools_is_an_error_the_model_sees_and_never_runs() {
    for p in PROVIDERS {
        let script = ModelScript {
            turns: vec![
                Turn::calls(&[("secret__read", json!({}))]),
                Turn::text("I cannot read that."),
            ],
            ..Default::default()
        };
        let (server, engine, _) = setup(p, script).await;
        let alice = engine.caller("alice", Face::Http);
        // alice may see secret.read, but the agent's tools do not include it.
        let out = engine
            .start_run(
                &alice,
                request(definition(p, rows_tools(), json!({})), "Read the secret"),
            )
            .await
            .unwrap();
        let Outcome::Completed { execution_id, .. } = out else {
            panic!("{out:?}")
        };
        let second = server.requests()[1].2.to_string();
        assert!(second.contains("not_offered"), "{p:?}: {second}");
        assert!(!second.contains("classified"));
        engine.flush_audit().await;
        let audit = engine.audit_of(&alice, 50).await.unwrap();
        assert!(
            audit.iter().any(|e| e.path == "secret.read"
                && e.outcome == "not_offered"
                && e.execution_id.as_deref() == Some(execution_id.as_str())),
            "{audit:?}"
        );
    }
}

#[tokio::test]
async fn a_workflow_tool_runs_its_workflow_with_the_models_input_only() {
    for p in PROVIDERS {
        let script = ModelScript {
            turns: vec![
                Turn::calls(&[(
                    "workflow__order_intake",
                    json!({"inputData": {"name": "Ann"}, "workflowId": "someone-elses"}),
                )]),
                Turn::text("Order taken."),
            ],
            ..Default::default()
        };
        let (server, engine, c) = setup(p, script).await;
        let tools =
            json!([{"type": "workflow", "workflow": "WYIG518IAdEpP55f", "name": "Order intake"}]);
        let alice = engine.caller("alice", Face::Http);
        let out = engine
            .start_run(
                &alice,
                request(definition(p, tools.clone(), json!({})), "Take Ann's order"),
            )
            .await
            .unwrap();
        assert!(matches!(out, Outcome::Completed { .. }), "{p:?}: {out:?}");
        let offered = server.requests()[0].2["tools"].to_string();
        assert!(
            offered.contains("workflow__order_intake") && offered.contains("Order intake"),
            "{offered}"
        );
        // The definition's workflow, the model's input, nothing else.
        assert_eq!(
            c.workflow_runs.lock().unwrap().as_slice(),
            [json!({"workflowId": "WYIG518IAdEpP55f", "inputData": {"name": "Ann"}})]
        );
        assert!(server.requests()[1].2.to_string().contains("executionId"));
        engine.flush_audit().await;
        let audit = engine.audit_of(&alice, 50).await.unwrap();
        assert!(
            audit
                .iter()
                .any(|e| e.path == "n8n.workflows.run" && e.outcome == "ok"),
            "{audit:?}"
        );

        // A principal that may not run workflows is not offered the tool.
        let carol = engine.caller("carol", Face::Http);
        let before = server.requests().len();
        let _ = engine
            .start_run(
                &carol,
                request(definition(p, tools, json!({})), "Take an order"),
            )
            .await
            .unwrap();
        assert!(!server.requests()[before].2["tools"]
            .to_string()
            .contains("workflow__"));
        assert_eq!(c.workflow_runs.lock().unwrap().len(), 1);
    }
}

#[tokio::test]
async fn tools_the_principals_roles_do_not_allow_are_neither_offered_nor_callable() {
    let p = Provider::Openai;
    let script = ModelScript {
        turns: vec![Turn::calls(&[("rows__drop", json!({}))]), Turn::text("ok")],
        ..Default::default()
    };
    let (server, engine, c) = setup(p, script).await;
    let carol = engine.caller("carol", Face::Http);
    let out = engine
        .start_run(
            &carol,
            request(definition(p, rows_tools(), json!({})), "Drop"),
        )
        .await
        .unwrap();
    assert!(matches!(out, Outcome::Completed { .. }), "{out:?}");
    let tools = server.requests()[0].2["tools"].to_string();
    assert!(
        tools.contains("rows__query") && !tools.contains("rows__drop"),
        "{tools}"
    );
    assert_eq!(c.drop.load(Ordering::SeqCst), 0);
    assert!(server.requests()[1].2.to_string().contains("not_offered"));
}

#[tokio::test]
async fn max_steps_ends_the_run_with_a_clear_failure() {
    for p in PROVIDERS {
        let script = ModelScript {
            turns: vec![Turn::calls(&[("rows__query", json!({}))]); 5],
            ..Default::default()
        };
        let (_server, engine, c) = setup(p, script).await;
        let alice = engine.caller("alice", Face::Http);
        let out = engine
            .start_run(
                &alice,
                request(definition(p, rows_tools(), json!({"maxSteps": 2})), "Loop"),
            )
            .await
            .unwrap();
        let Outcome::Failed { error, .. } = out else {
            panic!("{out:?}")
        };
        assert_eq!(error["code"], "max_steps", "{p:?}");
        assert!(error["message"].as_str().unwrap().contains("maxSteps of 2"));
        assert_eq!(c.query.load(Ordering::SeqCst), 2);
    }
}

#[tokio::test]
async fn a_429_is_retried_after_its_retry_after_and_a_401_fails_without_the_key() {
    for p in PROVIDERS {
        let script = ModelScript {
            turns: vec![Turn::text("fine")],
            failures: vec![Failure {
                status: 429,
                retry_after: Some(1),
                message: "slow down".into(),
            }],
            ..Default::default()
        };
        let (server, engine, _) = setup(p, script).await;
        let alice = engine.caller("alice", Face::Http);
        let started = Instant::now();
        let out = engine
            .start_run(
                &alice,
                request(definition(p, rows_tools(), json!({})), "hi"),
            )
            .await
            .unwrap();
        assert!(matches!(out, Outcome::Completed { .. }), "{out:?}");
        assert!(
            started.elapsed() >= Duration::from_secs(1),
            "Retry-After honoured"
        );
        assert_eq!(server.requests().len(), 2);

        let script = ModelScript {
            failures: vec![Failure {
                status: 401,
                retry_after: None,
                message: format!("Incorrect API key provided: {KEY}"),
            }],
            ..Default::default()
        };
        let (server, engine, _) = setup(p, script).await;
        let alice = engine.caller("alice", Face::Http);
        let out = engine
            .start_run(
                &alice,
                request(definition(p, rows_tools(), json!({})), "hi"),
            )
            .await
            .unwrap();
        let Outcome::Failed {
            execution_id,
            error,
            ..
        } = out
        else {
            panic!("{out:?}")
        };
        assert_eq!(server.requests().len(), 1, "a 4xx is not retried");
        let text = error.to_string();
        assert!(
            text.contains("401") && text.contains("test-model"),
            "{text}"
        );
        assert!(!text.contains(KEY), "{text}");
        let events = engine
            .store()
            .events_after(&execution_id, 0, 100)
            .await
            .unwrap();
        assert!(events.iter().all(|e| !e.data.to_string().contains(KEY)));
        let stored = engine.execution(&alice, &execution_id).await.unwrap();
        assert!(!serde_json::to_string(&stored).unwrap().contains(KEY));
    }
}

#[tokio::test]
async fn a_run_with_an_unknown_credential_or_empty_input_is_refused_before_it_starts() {
    let (_server, engine, _) = setup(Provider::Openai, ModelScript::default()).await;
    let alice = engine.caller("alice", Face::Http);
    let mut d = definition(Provider::Openai, rows_tools(), json!({}));
    d["credential"] = json!("other");
    let err = engine
        .start_run(&alice, request(d, "hi"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "invalid_run");
    assert!(err.to_string().contains("'other'"), "{err}");
    let err = engine
        .start_run(
            &alice,
            request(definition(Provider::Openai, rows_tools(), json!({})), " "),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("input is empty"));
}

/// A test embedder: words hashed into 64 buckets, unit length. Texts that share words are near;
/// it stands in for the search model so recall can be checked without model weights.
#[derive(Debug)]
struct Words;

impl toolshed_search::TextEmbedder for Words {
    fn dim(&self) -> usize {
        64
    }
    fn embed_texts(&self, texts: &[&str]) -> Result<Vec<f32>, toolshed_search::EmbedError> {
        let mut out = Vec::new();
        for t in texts {
            let mut v = vec![0f32; 64];
            for w in t
                .to_lowercase()
                .split(|c: char| !c.is_alphanumeric())
                .filter(|w| w.len() > 3)
            {
                let h = w
                    .bytes()
                    .fold(7u32, |h, b| h.wrapping_mul(31).wrapping_add(b as u32));
                v[(h % 64) as usize] += 1.0;
            }
            let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
            out.extend(v.iter().map(|x| x / n));
        }
        Ok(out)
    }
}

fn with_memory(p: Provider, memory: Value) -> Value {
    let mut d = definition(p, json!([]), json!({}));
    d["memory"] = memory;
    d
}

fn thread_request(def: Value, input: &str, thread: &str) -> RunRequest {
    RunRequest {
        thread_id: Some(thread.into()),
        ..request(def, input)
    }
}

/// The user and assistant texts of a model request, in order.
fn conversation(p: Provider, body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user" || m["role"] == "assistant")
        .map(|m| match (&m["content"], p) {
            (Value::String(s), _) => s.clone(),
            (Value::Array(parts), _) => parts
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join(""),
            _ => String::new(),
        })
        .collect()
}

/// The system instructions of a model request.
fn instructions(p: Provider, body: &Value) -> String {
    match p {
        Provider::Openai => body["messages"][0]["content"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        Provider::Anthropic => match &body["system"] {
            Value::String(s) => s.clone(),
            Value::Array(parts) => parts.iter().filter_map(|b| b["text"].as_str()).collect(),
            _ => String::new(),
        },
    }
}

#[tokio::test]
async fn a_thread_remembers_across_runs_and_stays_its_owners() {
    for p in PROVIDERS {
        let script = ModelScript {
            turns: vec![
                Turn::text("Nice to meet you, Ada."),
                Turn::text("Your name is Ada."),
                Turn::text("I do not know your name."),
            ],
            ..Default::default()
        };
        let (server, engine, _) = setup(p, script).await;
        let alice = engine.caller("alice", Face::Http);
        let def = with_memory(p, json!({"enabled": true, "lastMessages": 10}));
        let first = engine
            .start_run(
                &alice,
                thread_request(def.clone(), "My name is Ada.", "chat-1"),
            )
            .await
            .unwrap();
        let Outcome::Completed { result, .. } = first else {
            panic!("{p:?}: {first:?}")
        };
        assert_eq!(
            result["memory"],
            json!({"threadId": "chat-1", "messages": 0})
        );
        let second = engine
            .start_run(
                &alice,
                thread_request(def.clone(), "What is my name?", "chat-1"),
            )
            .await
            .unwrap();
        let Outcome::Completed { result, .. } = second else {
            panic!("{p:?}: {second:?}")
        };
        assert_eq!(result["memory"]["messages"], 2, "{p:?}");
        let reqs = server.requests();
        assert_eq!(
            conversation(p, &reqs[1].2),
            [
                "My name is Ada.",
                "Nice to meet you, Ada.",
                "What is my name?"
            ],
            "{p:?}"
        );
        // The same thread id of another principal is another thread.
        let carol = engine.caller("carol", Face::Http);
        engine
            .start_run(
                &carol,
                thread_request(def.clone(), "What is my name?", "chat-1"),
            )
            .await
            .unwrap();
        assert_eq!(
            conversation(p, &server.requests()[2].2),
            ["What is my name?"],
            "{p:?}"
        );
        // A bad thread id, and a thread for an agent without memory, are refused up front.
        let err = engine
            .start_run(&alice, thread_request(def.clone(), "hi", "no spaces"))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("threadId"), "{err}");
        let plain = definition(p, json!([]), json!({}));
        let err = engine
            .start_run(&alice, thread_request(plain, "hi", "chat-1"))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("memory.enabled"), "{err}");
        assert_eq!(server.requests().len(), 3, "refused runs asked no model");
    }
}

#[tokio::test]
async fn semantic_recall_brings_back_older_messages_and_says_when_it_cannot() {
    let p = Provider::Openai;
    let script = ModelScript {
        turns: (0..6).map(|i| Turn::text(&format!("answer {i}"))).collect(),
        ..Default::default()
    };
    let server = ModelServer::start(script).await;
    let store = Store::open("sqlite::memory:").await.unwrap();
    let engine = engine_on(store, models(&server, p, KEY), Arc::default())
        .with_embedder(Arc::new(Words), None);
    let alice = engine.caller("alice", Face::Http);
    let memory = json!({"enabled": true, "lastMessages": 1,
        "semanticRecall": {"topK": 1, "scope": "resource", "messageRange": {"before": 0, "after": 1}}});
    let def = with_memory(p, memory.clone());
    for (thread, input) in [
        (
            "trip",
            "Remember: the lighthouse keeper lives on Skerry island.",
        ),
        ("work", "The quarterly budget review is on Friday."),
        ("work", "Please draft the meeting agenda."),
    ] {
        engine
            .start_run(&alice, thread_request(def.clone(), input, thread))
            .await
            .unwrap();
    }
    let out = engine
        .start_run(
            &alice,
            thread_request(
                def.clone(),
                "Where does the lighthouse keeper live?",
                "work",
            ),
        )
        .await
        .unwrap();
    let Outcome::Completed { result, .. } = out else {
        panic!("{out:?}")
    };
    // Scope resource: the hit comes from the other thread, with the answer after it.
    assert_eq!(result["memory"]["recalled"], 2, "{result}");
    let system = instructions(p, &server.requests()[3].2);
    assert!(system.starts_with("Answer from the rows."), "{system}");
    assert!(
        system.contains("[thread trip #1, user] Remember: the lighthouse keeper"),
        "{system}"
    );
    assert!(
        system.contains("[thread trip #2, assistant] answer 0"),
        "{system}"
    );
    assert!(!system.contains("budget"), "{system}");
    // The window (lastMessages 1) holds the work thread's newest message only: the answer
    // to the agenda request.
    let window = conversation(p, &server.requests()[3].2);
    assert_eq!(window.len(), 2, "{window:?}");
    assert!(window[0].starts_with("answer "), "{window:?}");
    assert_eq!(window[1], "Where does the lighthouse keeper live?");

    // Without an embedding model the run says so and uses the newest messages.
    let plain = engine_on(
        Store::open("sqlite::memory:").await.unwrap(),
        models(&server, p, KEY),
        Arc::default(),
    );
    let alice = plain.caller("alice", Face::Http);
    let out = plain
        .start_run(
            &alice,
            thread_request(def, "Where does the keeper live?", "trip"),
        )
        .await
        .unwrap();
    let Outcome::Completed {
        execution_id,
        result,
        ..
    } = out
    else {
        panic!("{out:?}")
    };
    assert!(
        result["memory"]["recall"]
            .as_str()
            .unwrap()
            .contains("no embedding model"),
        "{result}"
    );
    let logs: Vec<String> = plain
        .store()
        .events_after(&execution_id, 0, 100)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == "log")
        .map(|e| e.data.to_string())
        .collect();
    assert!(
        logs.iter().any(|l| l.contains("no embedding model")),
        "{logs:?}"
    );
}

#[tokio::test]
async fn a_delegated_sub_agent_asks_the_user_and_the_whole_run_waits_across_a_restart() {
    for p in PROVIDERS {
        let dir = tempfile::tempdir().unwrap();
        let script = ModelScript {
            turns: vec![
                Turn::calls(&[
                    (
                        "update_tasks",
                        json!({"tasks": [{"id": "1", "description": "Count the rows", "status": "in_progress"}]}),
                    ),
                    (
                        "delegate",
                        json!({"role": "analyst", "instructions": "Count rows.", "tools": ["rows__query"],
                                        "briefing": "How many rows are there?"}),
                    ),
                ]),
                Turn::text("Done: one row."),
            ],
            by_instructions: vec![(
                "acting as: analyst".into(),
                vec![
                    Turn::calls(&[("ask_user", json!({"question": "Which table?"}))]),
                    Turn::calls(&[("rows__query", json!({"table": "t"}))]),
                    Turn::text("One row."),
                ],
            )],
            ..Default::default()
        };
        let server = ModelServer::start(script).await;
        let c = Arc::new(Counters::default());
        let def = definition(p, rows_tools(), json!({"orchestration": true}));
        let id = {
            let engine = engine_on(
                Store::open_dir(dir.path()).await.unwrap(),
                models(&server, p, KEY),
                c.clone(),
            );
            let alice = engine.caller("alice", Face::Http);
            let out = engine
                .start_run(&alice, request(def.clone(), "Count the rows"))
                .await
                .unwrap();
            let Outcome::Paused {
                execution_id,
                waits,
                ..
            } = out
            else {
                panic!("{p:?}: {out:?}")
            };
            assert_eq!(waits.len(), 1, "{waits:?}");
            assert_eq!(waits[0].message.as_deref(), Some("Which table?"));
            // The orchestration tools were offered to the run, not to its sub-agent.
            let first = server.requests()[0].2["tools"].to_string();
            assert!(
                first.contains("delegate") && first.contains("update_tasks"),
                "{first}"
            );
            let sub = server.requests()[1].2["tools"].to_string();
            assert!(
                !sub.contains("delegate")
                    && sub.contains("rows__query")
                    && !sub.contains("rows__drop"),
                "{sub}"
            );
            let kinds = event_kinds(&engine, &execution_id).await;
            assert!(kinds.iter().any(|k| k == "tasks_update"), "{kinds:?}");
            engine.shutdown().await;
            execution_id
        };
        // A new process on the same store answers the sub-agent's question.
        let engine = engine_on(
            Store::open_dir(dir.path()).await.unwrap(),
            models(&server, p, KEY),
            c.clone(),
        );
        let alice = engine.caller("alice", Face::Http);
        let info = engine.execution(&alice, &id).await.unwrap();
        let out = engine
            .answer(
                &alice,
                &id,
                &info.waits[0].wait_id,
                AnswerAction::Accept,
                Some(json!({"answer": "t"})),
                HUMAN,
            )
            .await
            .unwrap();
        let Outcome::Completed { result, .. } = out else {
            panic!("{p:?}: {out:?}")
        };
        assert_eq!(result["output"], "Done: one row.", "{p:?}");
        assert_eq!(c.query.load(Ordering::SeqCst), 1, "{p:?}");
        // The run asked its model twice and the sub-agent three times: nothing was asked again.
        assert_eq!(server.requests().len(), 5, "{p:?}");
        let last = server.requests().last().unwrap().2.to_string();
        assert!(
            last.contains("One row."),
            "{p:?}: the sub-agent's answer reached the run: {last}"
        );
    }
}

/// Answers the one open `input` wait of run `id` with `content`.
async fn answer_input(engine: &Engine, id: &str, content: Value) -> Outcome {
    let alice = engine.caller("alice", Face::Http);
    let info = engine.execution(&alice, id).await.unwrap();
    let wait = info
        .waits
        .iter()
        .find(|w| w.kind == toolshed_engine::WaitKind::Input)
        .unwrap_or_else(|| panic!("{info:?}"));
    engine
        .answer(
            &alice,
            id,
            &wait.wait_id,
            AnswerAction::Accept,
            Some(content),
            HUMAN,
        )
        .await
        .unwrap()
}

#[tokio::test]
async fn a_plan_is_revised_approved_and_its_tasks_run_in_dependency_order() {
    let plan = json!({"tasks": [
        {"id": "count", "title": "Count the rows", "kind": "delegate", "spec": "Count the rows of t.", "deps": [], "tools": ["rows__query"]},
        {"id": "report", "title": "Write the report", "kind": "delegate", "spec": "Write a one-line report.", "deps": ["count"]},
        {"id": "extra", "title": "Extra check", "kind": "research", "spec": "Check again.", "deps": ["count"]}
    ]});
    let script = ModelScript {
        turns: vec![
            Turn::calls(&[("plan", plan.clone())]),
            Turn::calls(&[("plan", plan)]),
            Turn::calls(&[
                (
                    "correct_background_task",
                    json!({"taskId": "report", "correction": "Be brief."}),
                ),
                ("cancel_background_task", json!({"taskId": "extra"})),
                ("cancel_background_task", json!({"taskId": "nope"})),
            ]),
            Turn::text("Waiting for the tasks."),
            Turn::text("Final: the report says 1 row."),
        ],
        by_instructions: vec![
            (
                "task of an approved plan: Count the rows".into(),
                vec![
                    Turn::calls(&[("rows__query", json!({"table": "t"}))]),
                    Turn::text("t has 1 row."),
                ],
            ),
            (
                "task of an approved plan: Write the report".into(),
                vec![Turn::text("Report: 1 row.")],
            ),
        ],
        ..Default::default()
    };
    let (server, engine, c) = setup(Provider::Openai, script).await;
    let alice = engine.caller("alice", Face::Http);
    let def = definition(
        Provider::Openai,
        rows_tools(),
        json!({"orchestration": true}),
    );
    let out = engine
        .start_run(&alice, request(def, "Report on t."))
        .await
        .unwrap();
    let Outcome::Paused {
        execution_id: id,
        waits,
        ..
    } = out
    else {
        panic!("{out:?}")
    };
    assert!(
        waits[0]
            .message
            .as_deref()
            .unwrap()
            .starts_with("Approve this plan?"),
        "{waits:?}"
    );
    assert!(waits[0]
        .message
        .as_deref()
        .unwrap()
        .contains("report: Write the report (after count)"));
    // Declined with feedback: the model sees it and proposes the plan again.
    let out = answer_input(
        &engine,
        &id,
        json!({"approved": false, "feedback": "Name the table."}),
    )
    .await;
    assert!(out.is_paused(), "{out:?}");
    let second = server.requests()[1].2.to_string();
    assert!(second.contains("Name the table."), "{second}");
    // Approved: the tasks run in the background, in dependency order; the run waits for them.
    let out = answer_input(&engine, &id, json!({"approved": true})).await;
    let Outcome::Completed { result, .. } = out else {
        panic!("{out:?}")
    };
    assert_eq!(result["output"], "Final: the report says 1 row.");
    assert_eq!(
        c.query.load(Ordering::SeqCst),
        1,
        "the count task queried once"
    );
    let reqs = server.requests();
    let first_of = |marker: &str| {
        reqs.iter()
            .position(|r| r.2.to_string().contains(marker))
            .unwrap()
    };
    let count_done = reqs
        .iter()
        .rposition(|r| {
            r.2.to_string()
                .contains("task of an approved plan: Count the rows")
        })
        .unwrap();
    let report = first_of("task of an approved plan: Write the report");
    assert!(
        count_done < report,
        "the report started after the count finished"
    );
    let report_input = reqs[report].2.to_string();
    assert!(
        report_input.contains("t has 1 row."),
        "the dependency's result: {report_input}"
    );
    assert!(
        report_input.contains("Correction from the orchestrator: Be brief."),
        "{report_input}"
    );
    // The cancel and correct answers reached the model, then the task results.
    let third = reqs[first_of("Waiting for the tasks.")..]
        .iter()
        .map(|r| r.2.to_string())
        .collect::<String>();
    assert!(
        third.contains("\"status\\\":\\\"queued\\\"") || third.contains("queued"),
        "{third}"
    );
    let last = reqs.last().unwrap().2.to_string();
    assert!(
        last.contains("report (Write the report): succeeded: Report: 1 row."),
        "{last}"
    );
    assert!(last.contains("extra (Extra check): cancelled"), "{last}");
    let kinds = event_kinds(&engine, &id).await;
    assert!(kinds.iter().any(|k| k == "tasks_update"), "{kinds:?}");
    let tasks = engine.store().background_tasks(&id).await.unwrap();
    let status: Vec<(&str, &str)> = tasks
        .iter()
        .map(|t| (t.task_id.as_str(), t.status.as_str()))
        .collect();
    assert_eq!(
        status,
        [
            ("count", "succeeded"),
            ("extra", "cancelled"),
            ("report", "succeeded")
        ]
    );
}

#[tokio::test]
async fn cancelling_a_run_cancels_the_tasks_of_its_plan() {
    let script = ModelScript {
        turns: vec![
            Turn::calls(&[(
                "plan",
                json!({"tasks": [
                    {"id": "ask", "title": "Ask the user", "kind": "delegate", "spec": "Ask.", "deps": []},
                    {"id": "after", "title": "Then this", "kind": "delegate", "spec": "Then.", "deps": ["ask"]}
                ]}),
            )]),
            Turn::text("Waiting."),
        ],
        by_instructions: vec![(
            "task of an approved plan: Ask the user".into(),
            vec![Turn::calls(&[("ask_user", json!({"question": "Which?"}))])],
        )],
        ..Default::default()
    };
    let (_server, engine, _) = setup(Provider::Openai, script).await;
    let alice = engine.caller("alice", Face::Http);
    let def = definition(
        Provider::Openai,
        rows_tools(),
        json!({"orchestration": true}),
    );
    let out = engine.start_run(&alice, request(def, "Go.")).await.unwrap();
    let Outcome::Paused {
        execution_id: id, ..
    } = out
    else {
        panic!("{out:?}")
    };
    // Approved, the run waits for its tasks; the first one pauses on its question.
    let waiting = {
        let (engine, id) = (engine.clone(), id.clone());
        tokio::spawn(async move { answer_input(&engine, &id, json!({"approved": true})).await })
    };
    let task_exec = paused_task(&engine, &id, "ask").await;
    engine.cancel(&alice, &id).await.unwrap();
    let out = waiting.await.unwrap();
    assert!(matches!(out, Outcome::Cancelled { .. }), "{out:?}");
    let tasks = engine.store().background_tasks(&id).await.unwrap();
    let status: Vec<(&str, &str)> = tasks
        .iter()
        .map(|t| (t.task_id.as_str(), t.status.as_str()))
        .collect();
    assert_eq!(status, [("after", "cancelled"), ("ask", "cancelled")]);
    let info = engine.execution(&alice, &task_exec).await.unwrap();
    assert_eq!(
        info.status, "cancelled",
        "the task's own execution stopped too"
    );
}

#[tokio::test]
async fn a_task_cancelled_on_its_own_ends_and_the_run_goes_on() {
    let script = ModelScript {
        turns: vec![
            Turn::calls(&[(
                "plan",
                json!({"tasks": [
                    {"id": "ask", "title": "Ask the user", "kind": "delegate", "spec": "Ask.", "deps": []}
                ]}),
            )]),
            Turn::text("Waiting."),
            Turn::text("Final: the task was cancelled."),
        ],
        by_instructions: vec![(
            "task of an approved plan: Ask the user".into(),
            vec![Turn::calls(&[("ask_user", json!({"question": "Which?"}))])],
        )],
        ..Default::default()
    };
    let (server, engine, _) = setup(Provider::Openai, script).await;
    let alice = engine.caller("alice", Face::Http);
    let def = definition(
        Provider::Openai,
        rows_tools(),
        json!({"orchestration": true}),
    );
    let out = engine.start_run(&alice, request(def, "Go.")).await.unwrap();
    let Outcome::Paused {
        execution_id: id, ..
    } = out
    else {
        panic!("{out:?}")
    };
    let waiting = {
        let (engine, id) = (engine.clone(), id.clone());
        tokio::spawn(async move { answer_input(&engine, &id, json!({"approved": true})).await })
    };
    let task_exec = paused_task(&engine, &id, "ask").await;
    // The paused task's own execution is cancelled (not through the plan).
    engine.cancel(&alice, &task_exec).await.unwrap();
    let out = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the run does not wait forever")
        .unwrap();
    let Outcome::Completed { result, .. } = out else {
        panic!("{out:?}")
    };
    assert_eq!(result["output"], "Final: the task was cancelled.");
    let last = server.requests().last().unwrap().2.to_string();
    assert!(last.contains("ask (Ask the user): cancelled"), "{last}");
}

/// The execution of plan task `task` of run `id`, once it pauses (the test fails after 5 s).
async fn paused_task(engine: &Engine, id: &str, task: &str) -> String {
    let alice = engine.caller("alice", Face::Http);
    for _ in 0..100 {
        let tasks = engine.store().background_tasks(id).await.unwrap();
        let exec = tasks
            .iter()
            .find(|t| t.task_id == task)
            .and_then(|t| t.execution_id.clone());
        if let Some(exec) = exec {
            if engine
                .execution(&alice, &exec)
                .await
                .is_ok_and(|i| i.status == "paused")
            {
                return exec;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("task '{task}' of {id} did not pause")
}

/// A run that pauses while its plan's tasks are unfinished, and whose pause expires, ends its
/// plan: the tasks are cancelled, not left pending or running for nobody.
#[tokio::test]
async fn an_expired_run_cancels_the_tasks_of_its_plan() {
    let script = ModelScript {
        turns: vec![
            Turn::calls(&[(
                "plan",
                json!({"tasks": [
                    {"id": "ask", "title": "Ask the user", "kind": "delegate", "spec": "Ask.", "deps": []},
                    {"id": "after", "title": "Then this", "kind": "delegate", "spec": "Then.", "deps": ["ask"]}
                ]}),
            )]),
            Turn::calls(&[("ask_user", json!({"question": "Anything else?"}))]),
        ],
        by_instructions: vec![(
            "task of an approved plan: Ask the user".into(),
            vec![Turn::calls(&[("ask_user", json!({"question": "Which?"}))])],
        )],
        ..Default::default()
    };
    let server = ModelServer::start(script).await;
    let store = Store::open("sqlite::memory:").await.unwrap();
    let config = EngineConfig {
        approval_ttl: Duration::from_secs(2),
        ..EngineConfig::default()
    };
    let engine = engine_with(
        store,
        models(&server, Provider::Openai, KEY),
        Arc::new(Counters::default()),
        config,
    );
    let alice = engine.caller("alice", Face::Http);
    let def = definition(
        Provider::Openai,
        rows_tools(),
        json!({"orchestration": true}),
    );
    let out = engine.start_run(&alice, request(def, "Go.")).await.unwrap();
    let id = out.execution_id().to_string();
    // Approved: the tasks start and the run asks its own question, pausing again.
    let out = answer_input(&engine, &id, json!({"approved": true})).await;
    assert!(matches!(out, Outcome::Paused { .. }), "{out:?}");
    paused_task(&engine, &id, "ask").await;
    let before = engine.store().background_tasks(&id).await.unwrap();
    assert!(before.iter().all(|t| !t.is_terminal()), "{before:?}");
    tokio::time::sleep(Duration::from_millis(2_300)).await;
    // The next look at the run finds it expired; its plan ended with it.
    let info = engine.execution(&alice, &id).await.unwrap();
    assert_eq!(info.status, "expired");
    let tasks = engine.store().background_tasks(&id).await.unwrap();
    let status: Vec<(&str, &str)> = tasks
        .iter()
        .map(|t| (t.task_id.as_str(), t.status.as_str()))
        .collect();
    assert_eq!(status, [("after", "cancelled"), ("ask", "cancelled")]);
}
