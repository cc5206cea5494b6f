//! Pauses as one protocol: client-executed tools, approvals and questions raised together,
//! answered one by one from any session or after a restart, each wrong answer refused with its
//! own error and the execution left unchanged; cancel; the pause webhook.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use toolshed_core::{
    Annotations, CatalogBuilder, Policy, Principal, Role, SharedCatalog, Tool, ToolDef, ToolPath,
};
use toolshed_engine::ops::{ResumeArgs, RunScriptArgs};
use toolshed_engine::{
    AnswerAction, Decision, DecisionChannel, Engine, EngineConfig, Face, Outcome, ToolResultAnswer,
    WaitKind,
};
use toolshed_store::Store;

const HUMAN: DecisionChannel = DecisionChannel::Human(Face::Http);

#[derive(Default)]
struct Counters {
    query: AtomicUsize,
    destroy: AtomicUsize,
    block: AtomicUsize,
    /// Calls of `rows.setup`; it answers once `setup_done` is set.
    setup: AtomicUsize,
    setup_done: std::sync::atomic::AtomicBool,
}

fn def(path: &str, ann: Annotations) -> ToolDef {
    ToolDef::new(
        ToolPath::parse(path).unwrap(),
        path,
        format!("The {path} tool."),
    )
    .with_input(json!({"type": "object"}))
    .with_annotations(ann)
}

fn engine_on(store: Store, config: EngineConfig, c: Arc<Counters>) -> Engine {
    let mut b = CatalogBuilder::new();
    let k = c.clone();
    b.add_tool(Tool::from_fn(
        def("rows.query", Annotations::READ_ONLY),
        move |_, _| {
            let k = k.clone();
            async move {
                let n = k.query.fetch_add(1, Ordering::SeqCst) + 1;
                Ok(json!({"rows": [1, 2, 3], "run": n}))
            }
        },
    ));
    let k = c.clone();
    b.add_tool(Tool::from_fn(
        def("rows.drop", Annotations::DESTRUCTIVE),
        move |_, _| {
            let k = k.clone();
            async move {
                k.destroy.fetch_add(1, Ordering::SeqCst);
                Ok(json!({"dropped": true}))
            }
        },
    ));
    let k = c.clone();
    b.add_tool(Tool::from_fn(
        def("rows.block", Annotations::READ_ONLY),
        move |_, _| {
            let k = k.clone();
            async move {
                k.block.fetch_add(1, Ordering::SeqCst);
                std::future::pending::<()>().await;
                Ok(json!({}))
            }
        },
    ));
    // A tool that needs a person to act at its link first (as n8n.credentials.setup does).
    let k = c.clone();
    b.add_tool(Tool::from_fn(
        def("rows.setup", Annotations::READ_ONLY),
        move |ctx, _| {
            let k = k.clone();
            async move {
                let n = k.setup.fetch_add(1, Ordering::SeqCst) + 1;
                if k.setup_done.load(Ordering::SeqCst) {
                    return Ok(json!({"credentialId": "c1", "calls": n, "execution": ctx.execution_id.as_deref()}));
                }
                Err(toolshed_core::ToolError::action_required(
                    "Create the credential in n8n.",
                    "https://n8n.example.com/home/credentials/create",
                ))
            }
        },
    ));
    // A saved script (as the custom tools plugin makes them): a query, then a destructive call.
    let mut saved = def("custom.saved", Annotations::WRITE);
    saved.origin = toolshed_engine::executions::listing::SCRIPT_ORIGIN.to_string() + "custom.saved";
    b.add_tool(Tool::from_fn(saved, |ctx, args| async move {
        let code = "const q = await tools.rows.query({}); const d = await tools.rows.drop({}); return {run: q.run, dropped: d.dropped, input};";
        ctx.engine()
            .expect("the engine")
            .run_script(code, args, toolshed_core::NestedRun::default())
            .await
    }));
    let policy = Policy::new(
        vec![
            Role {
                id: "user".into(),
                patterns: vec!["rows.**".into(), "client.**".into(), "custom.**".into()],
                decide: vec!["rows.**".into(), "ask_user".into()],
                ..Role::default()
            },
            Role {
                id: "catalog_only".into(),
                patterns: vec!["rows.**".into()],
                ..Role::default()
            },
        ],
        vec![
            Principal {
                id: "alice".into(),
                roles: vec!["user".into()],
            },
            Principal {
                id: "bob".into(),
                roles: vec!["user".into()],
            },
            Principal {
                id: "carol".into(),
                roles: vec!["catalog_only".into()],
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
}

async fn engine() -> (Engine, Arc<Counters>) {
    let c = Arc::new(Counters::default());
    let store = Store::open("sqlite::memory:").await.unwrap();
    (engine_on(store, EngineConfig::default(), c.clone()), c)
}

fn calculator() -> Value {
    json!({
        "name": "calculator",
        "description": "Adds two numbers on the client.",
        "inputSchema": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]},
        "outputSchema": {"type": "object", "properties": {"sum": {"type": "number"}}, "required": ["sum"]}
    })
}

async fn run(e: &Engine, who: &str, script: &str, client_tools: Vec<Value>) -> Outcome {
    let caller = e.caller(who, Face::Http);
    e.run_script_args(
        &caller,
        RunScriptArgs {
            script: script.into(),
            client_tools,
        },
    )
    .await
    .unwrap()
}

fn result(call_id: &str, v: Value) -> ToolResultAnswer {
    ToolResultAnswer {
        call_id: call_id.into(),
        result: Some(v),
        error: None,
    }
}

const BOTH: &str = r#"
    const [sum, rows] = await Promise.all([
        tools.client.calculator({a: 2, b: 3}),
        tools.rows.query({}),
    ]);
    return {sum: sum.sum, rows: rows.rows.length, run: rows.run};
"#;

#[tokio::test]
async fn a_client_call_and_a_catalog_call_pause_together_and_complete_on_the_result() {
    let (e, c) = engine().await;
    let out = run(&e, "alice", BOTH, vec![calculator()]).await;
    let Outcome::ToolCallRequired {
        execution_id,
        tool_calls,
        waits,
        ..
    } = &out
    else {
        panic!("expected tool_call_required, got {out:?}")
    };
    let v = out.to_json();
    assert_eq!(v["status"], "tool_call_required");
    assert_eq!(v["toolCalls"][0]["arguments"], json!({"a": 2, "b": 3}));
    assert_eq!(tool_calls.len(), 1);
    assert_eq!(tool_calls[0].path, "client.calculator");
    assert_eq!(tool_calls[0].name, "calculator");
    assert_eq!(waits[0].kind, WaitKind::ToolResult);
    assert_eq!(c.query.load(Ordering::SeqCst), 1, "the catalog call ran");

    let alice = e.caller("alice", Face::Http);
    let call_id = tool_calls[0].call_id.clone();
    let done = e
        .tool_results(
            &alice,
            execution_id,
            vec![result(&call_id, json!({"sum": 5}))],
            HUMAN,
        )
        .await
        .unwrap();
    let Outcome::Completed { result: r, .. } = &done else {
        panic!("{done:?}")
    };
    assert_eq!(r, &json!({"sum": 5, "rows": 3, "run": 1}));
    assert_eq!(
        c.query.load(Ordering::SeqCst),
        1,
        "the catalog call ran exactly once"
    );
    let again = e
        .tool_results(
            &alice,
            execution_id,
            vec![result(&call_id, json!({"sum": 5}))],
            HUMAN,
        )
        .await
        .unwrap_err();
    assert_eq!(again.code(), "already_settled");
}

#[tokio::test]
async fn a_pause_survives_a_restart_and_is_answered_by_another_engine() {
    let dir = tempfile::tempdir().unwrap();
    let c = Arc::new(Counters::default());
    let e1 = engine_on(
        Store::open_dir(dir.path()).await.unwrap(),
        EngineConfig::default(),
        c.clone(),
    );
    let out = run(&e1, "alice", BOTH, vec![calculator()]).await;
    let id = out.execution_id().to_string();
    drop(e1);
    let e2 = engine_on(
        Store::open_dir(dir.path()).await.unwrap(),
        EngineConfig::default(),
        c.clone(),
    );
    let alice = e2.caller("alice", Face::Mcp);
    let done = e2
        .tool_results(
            &alice,
            &id,
            vec![result("call_0", json!({"sum": 5}))],
            HUMAN,
        )
        .await
        .unwrap();
    assert!(matches!(done, Outcome::Completed { .. }), "{done:?}");
    assert_eq!(c.query.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn answers_to_several_waits_are_recorded_one_by_one() {
    let (e, c) = engine().await;
    let script = r#"
        const [a, d, b] = await Promise.all([
            tools.client.calculator({a: 1, b: 1}),
            tools.rows.drop({}),
            tools.client.calculator({a: 2, b: 2}),
        ]);
        return [a.sum, d.dropped, b.sum];
    "#;
    let out = run(&e, "alice", script, vec![calculator()]).await;
    let v = out.to_json();
    assert_eq!(v["status"], "paused", "a mixed pause is paused: {v}");
    let kinds: Vec<&str> = v["waits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["tool_result", "approval", "tool_result"]);
    assert_eq!(
        v["pending"]["path"], "rows.drop",
        "the earlier shape is kept"
    );
    let id = out.execution_id().to_string();
    let alice = e.caller("alice", Face::Http);

    // The approval first: still waiting on both client calls.
    let next = e
        .decide(&alice, &id, Some("approval_1"), Decision::Approve, HUMAN)
        .await
        .unwrap();
    assert_eq!(next.to_json()["status"], "tool_call_required");
    assert_eq!(next.waits().len(), 2);
    assert_eq!(c.destroy.load(Ordering::SeqCst), 0, "nothing ran yet");
    // One result; then the same callId again is refused and changes nothing.
    let next = e
        .tool_results(
            &alice,
            &id,
            vec![result("call_0", json!({"sum": 2}))],
            HUMAN,
        )
        .await
        .unwrap();
    assert_eq!(next.waits().len(), 1);
    let err = e
        .tool_results(
            &alice,
            &id,
            vec![result("call_0", json!({"sum": 9}))],
            HUMAN,
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "already_answered");
    let done = e
        .tool_results(
            &alice,
            &id,
            vec![result("call_2", json!({"sum": 4}))],
            HUMAN,
        )
        .await
        .unwrap();
    let Outcome::Completed { result: r, .. } = &done else {
        panic!("{done:?}")
    };
    assert_eq!(r, &json!([2, true, 4]), "the first answer stands");
    assert_eq!(c.destroy.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn questions_take_schema_valid_answers_only() {
    let (e, _) = engine().await;
    let script = r#"
        const r = await tools.ask_user({
            message: "Which table?",
            schema: {type: "object", properties: {table: {type: "string", minLength: 2}}, required: ["table"]},
        });
        return r;
    "#;
    let out = run(&e, "alice", script, vec![]).await;
    let w = &out.waits()[0];
    assert_eq!(w.kind, WaitKind::Input);
    assert_eq!(w.message.as_deref(), Some("Which table?"));
    let id = out.execution_id().to_string();
    let alice = e.caller("alice", Face::Http);
    let bad = e
        .answer(
            &alice,
            &id,
            &w.wait_id,
            AnswerAction::Accept,
            Some(json!({"table": 5})),
            HUMAN,
        )
        .await
        .unwrap_err();
    assert_eq!(bad.code(), "invalid_answer");
    assert!(bad.to_string().contains("/table"), "{bad}");
    let info = e.execution(&alice, &id).await.unwrap();
    assert_eq!(info.status, "paused");
    assert_eq!(info.waits.len(), 1, "the wait is unchanged");
    let done = e
        .answer(
            &alice,
            &id,
            &w.wait_id,
            AnswerAction::Accept,
            Some(json!({"table": "pets"})),
            HUMAN,
        )
        .await
        .unwrap();
    assert_eq!(
        done.to_json()["result"],
        json!({"action": "accept", "content": {"table": "pets"}})
    );

    // Declined: the script sees the action and no content.
    let out = run(&e, "alice", script, vec![]).await;
    let done = e
        .answer(
            &alice,
            out.execution_id(),
            "input_0",
            AnswerAction::Decline,
            Some(json!({"x": 1})),
            HUMAN,
        )
        .await
        .unwrap();
    assert_eq!(done.to_json()["result"], json!({"action": "decline"}));
}

#[tokio::test]
async fn wrong_answers_get_their_own_errors_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_dir(dir.path()).await.unwrap();
    let c = Arc::new(Counters::default());
    let e = engine_on(store.clone(), EngineConfig::default(), c.clone());
    let out = run(&e, "alice", BOTH, vec![calculator()]).await;
    let id = out.execution_id().to_string();
    let before = store.get_execution(&id).await.unwrap().unwrap();
    let alice = e.caller("alice", Face::Http);
    let code = |r: Result<Outcome, toolshed_engine::EngineError>| r.unwrap_err().code();

    assert_eq!(
        code(
            e.tool_results(&alice, "ex_nope", vec![result("call_0", json!({}))], HUMAN)
                .await
        ),
        "unknown_execution"
    );
    assert_eq!(
        code(
            e.tool_results(&alice, &id, vec![result("call_9", json!({}))], HUMAN)
                .await
        ),
        "unknown_wait"
    );
    // Another principal cannot see it at all.
    let bob = e.caller("bob", Face::Http);
    assert_eq!(
        code(
            e.tool_results(&bob, &id, vec![result("call_0", json!({"sum": 1}))], HUMAN)
                .await
        ),
        "unknown_execution"
    );
    // Too large.
    let big = "x".repeat(toolshed_engine::executions::MAX_TOOL_RESULT_BYTES + 1);
    let err = e
        .tool_results(&alice, &id, vec![result("call_0", json!(big))], HUMAN)
        .await
        .unwrap_err();
    assert_eq!(err.code(), "invalid_answer");
    assert!(err.to_string().contains("bytes"), "{err}");
    // Failing the declared output schema.
    let err = e
        .tool_results(
            &alice,
            &id,
            vec![result("call_0", json!({"total": 5}))],
            HUMAN,
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "invalid_answer");
    assert!(err.to_string().contains("sum"), "{err}");
    // The wrong kind of answer for the wait.
    assert_eq!(
        code(
            e.decide(&alice, &id, Some("call_0"), Decision::Approve, HUMAN)
                .await
        ),
        "invalid_answer"
    );
    assert_eq!(
        code(
            e.resume_args(
                &alice,
                ResumeArgs {
                    execution_id: id.clone(),
                    ..Default::default()
                },
                HUMAN
            )
            .await
        ),
        "malformed_arguments"
    );
    let after = store.get_execution(&id).await.unwrap().unwrap();
    assert_eq!(
        after, before,
        "no wrong answer changed the stored execution"
    );

    // A runtime that is not the one that journaled the execution does not replay it.
    sqlx::query("UPDATE executions SET meta = $1 WHERE id = $2")
        .bind(json!({"runtime": "toolshed-sandbox/0.0.1"}).to_string())
        .bind(&id)
        .execute(store.pool())
        .await
        .unwrap();
    let err = e
        .tool_results(
            &alice,
            &id,
            vec![result("call_0", json!({"sum": 5}))],
            HUMAN,
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "runtime_changed");
    assert_eq!(
        store
            .get_execution(&id)
            .await
            .unwrap()
            .unwrap()
            .status
            .as_str(),
        "paused"
    );
    assert_eq!(c.query.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn an_expired_pause_refuses_answers() {
    let c = Arc::new(Counters::default());
    let config = EngineConfig {
        approval_ttl: Duration::from_millis(1),
        ..Default::default()
    };
    let e = engine_on(Store::open("sqlite::memory:").await.unwrap(), config, c);
    let out = run(&e, "alice", BOTH, vec![calculator()]).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let alice = e.caller("alice", Face::Http);
    let err = e
        .tool_results(
            &alice,
            out.execution_id(),
            vec![result("call_0", json!({"sum": 5}))],
            HUMAN,
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "expired");
}

#[tokio::test]
async fn client_tools_are_declared_in_four_formats_and_checked_before_anything_runs() {
    let (e, c) = engine().await;
    let decls = vec![
        calculator(),
        json!({"type": "function", "function": {"name": "getWeather", "description": "Weather.", "parameters": {"type": "object"}}}),
        json!({"name": "read_page", "description": "Reads.", "input_schema": {"type": "object"}}),
        json!({"type": "custom", "name": "notify", "description": "Notifies.", "parameters": {"type": "object"}}),
    ];
    let script = r#"
        const found = await tools.search({query: "weather"});
        const d = await tools.describe.tool({path: "client.get_weather"});
        return {hit: found.hits[0].path, name: d.name, client: d.client};
    "#;
    let out = run(&e, "alice", script, decls).await;
    assert_eq!(
        out.to_json()["result"],
        json!({"hit": "client.get_weather", "name": "getWeather", "client": true})
    );
    // Another execution does not see them.
    let out = run(
        &e,
        "alice",
        "return (await tools.search({query: 'weather'})).total",
        vec![],
    )
    .await;
    assert_eq!(out.to_json()["result"], json!(0));

    let alice = e.caller("alice", Face::Http);
    for (decls, index, words) in [
        (
            vec![calculator(), json!({"description": "no name"})],
            1,
            "name",
        ),
        (
            vec![json!({"name": "x", "inputSchema": {"type": "nonsense"}})],
            0,
            "schema",
        ),
        (
            vec![
                json!({"name": "getWeather"}),
                json!({"name": "get_weather"}),
            ],
            1,
            "client.get_weather",
        ),
    ] {
        let err = e
            .run_script_args(
                &alice,
                RunScriptArgs {
                    script: "return await tools.rows.query({})".into(),
                    client_tools: decls,
                },
            )
            .await
            .unwrap_err();
        assert_eq!(err.code(), "invalid_client_tools");
        assert!(err.to_string().contains(&format!("[{index}]")), "{err}");
        assert!(err.to_string().contains(words), "{err}");
    }
    assert_eq!(c.query.load(Ordering::SeqCst), 0, "nothing ran");
}

#[tokio::test]
async fn client_calls_obey_policy_and_their_schemas() {
    let (e, _) = engine().await;
    let script = r#"
        try { await tools.client.calculator({a: "two"}); return "ran"; }
        catch (err) { return err.code; }
    "#;
    let out = run(&e, "alice", script, vec![calculator()]).await;
    assert_eq!(out.to_json()["result"], json!("invalid_arguments"));
    // A role without client.** cannot call them: they do not exist for it.
    let script = r#"
        try { await tools.client.calculator({a: 1, b: 2}); return "ran"; }
        catch (err) { return err.code; }
    "#;
    let out = run(&e, "carol", script, vec![calculator()]).await;
    assert_eq!(out.to_json()["result"], json!("not_found"));
    // Undeclared: not found either.
    let out = run(&e, "alice", script, vec![]).await;
    assert_eq!(out.to_json()["result"], json!("not_found"));
}

#[tokio::test]
async fn cancel_stops_paused_and_running_executions() {
    let (e, c) = engine().await;
    let alice = e.caller("alice", Face::Http);
    let out = run(&e, "alice", BOTH, vec![calculator()]).await;
    let id = out.execution_id().to_string();
    assert_eq!(
        e.cancel(&e.caller("bob", Face::Http), &id)
            .await
            .unwrap_err()
            .code(),
        "unknown_execution"
    );
    let cancelled = e.cancel(&alice, &id).await.unwrap();
    assert_eq!(cancelled.to_json()["status"], "cancelled");
    assert_eq!(e.execution(&alice, &id).await.unwrap().status, "cancelled");
    assert_eq!(
        e.tool_results(
            &alice,
            &id,
            vec![result("call_0", json!({"sum": 5}))],
            HUMAN
        )
        .await
        .unwrap_err()
        .code(),
        "already_settled"
    );

    // Running: a resumed run blocked in a call.
    let script = "await tools.rows.drop({}); await tools.rows.block({}); return 1;";
    let out = run(&e, "alice", script, vec![]).await;
    let id = out.execution_id().to_string();
    let task = {
        let (e, alice, id) = (e.clone(), alice.clone(), id.clone());
        tokio::spawn(async move { e.resume(&alice, &id, Decision::Approve, HUMAN).await })
    };
    for _ in 0..500 {
        if c.block.load(Ordering::SeqCst) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(e.execution(&alice, &id).await.unwrap().status, "running");
    e.cancel(&alice, &id).await.unwrap();
    let ended = tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("the run stopped")
        .unwrap();
    assert!(
        matches!(ended, Ok(Outcome::Cancelled { .. }) | Err(_)),
        "{ended:?}"
    );
    assert_eq!(e.execution(&alice, &id).await.unwrap().status, "cancelled");
    assert_eq!(c.destroy.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn waiting_executions_are_listed_by_kind() {
    let (e, _) = engine().await;
    let alice = e.caller("alice", Face::Http);
    run(&e, "alice", BOTH, vec![calculator()]).await;
    run(
        &e,
        "alice",
        "return await tools.ask_user({message: 'ok?'})",
        vec![],
    )
    .await;
    assert_eq!(e.waiting(&alice, None).await.unwrap().len(), 2);
    let clients = e.waiting(&alice, Some(WaitKind::ToolResult)).await.unwrap();
    assert_eq!(clients.len(), 1);
    assert_eq!(clients[0].waits[0].kind, WaitKind::ToolResult);
    assert_eq!(
        e.waiting(&alice, Some(WaitKind::Input))
            .await
            .unwrap()
            .len(),
        1
    );
    assert!(e
        .waiting(&alice, Some(WaitKind::Approval))
        .await
        .unwrap()
        .is_empty());
    // A client tool's wait is its owner's alone: bob (who decides rows.**) does not see it.
    let bob = e.caller("bob", Face::Http);
    assert!(e
        .waiting(&bob, Some(WaitKind::ToolResult))
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn the_webhook_is_told_when_an_execution_pauses() {
    use axum::routing::post;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Value>();
    let app = axum::Router::new().route(
        "/hook",
        post(move |axum::Json(v): axum::Json<Value>| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(v);
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let config = EngineConfig {
        notify_webhook: Some(format!("http://{addr}/hook")),
        ..Default::default()
    };
    let e = engine_on(
        Store::open("sqlite::memory:").await.unwrap(),
        config,
        Arc::new(Counters::default()),
    );
    let out = run(&e, "alice", BOTH, vec![calculator()]).await;
    let body = tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(body["event"], "paused");
    assert_eq!(body["executionId"], out.execution_id());
    assert_eq!(
        body["waits"],
        json!([{"waitId": "call_0", "kind": "tool_result"}])
    );
    assert!(body.get("arguments").is_none() && !body.to_string().contains("\"a\":2"));
}

#[tokio::test]
async fn a_call_inside_a_saved_script_pauses_the_execution_and_never_runs_twice() {
    let dir = tempfile::tempdir().unwrap();
    let c = Arc::new(Counters::default());
    let e1 = engine_on(
        Store::open_dir(dir.path()).await.unwrap(),
        EngineConfig::default(),
        c.clone(),
    );
    let alice = e1.caller("alice", Face::Http);
    // Called directly: the saved script runs as an execution that pauses on the inner call.
    let out = e1
        .call(&alice, "custom.saved", json!({"x": 1}))
        .await
        .unwrap();
    let waits = out.waits().to_vec();
    assert_eq!(waits.len(), 1, "{out:?}");
    assert_eq!(waits[0].kind, WaitKind::Approval);
    assert_eq!(waits[0].path.as_deref(), Some("rows.drop"));
    assert_eq!(c.query.load(Ordering::SeqCst), 1);
    let id = out.execution_id().to_string();
    drop(e1);

    // After a restart, approved from another engine: completes; the query ran once in all.
    let e2 = engine_on(
        Store::open_dir(dir.path()).await.unwrap(),
        EngineConfig::default(),
        c.clone(),
    );
    let alice = e2.caller("alice", Face::Http);
    let done = e2
        .decide(
            &alice,
            &id,
            Some(&waits[0].wait_id),
            Decision::Approve,
            HUMAN,
        )
        .await
        .unwrap();
    assert_eq!(
        done.to_json()["result"],
        json!({"run": 1, "dropped": true, "input": {"x": 1}})
    );
    assert_eq!(c.query.load(Ordering::SeqCst), 1, "no inner call ran twice");
    assert_eq!(c.destroy.load(Ordering::SeqCst), 1);

    // From a script: the same, and a denial reaches the saved script as an error.
    let out = run(
        &e2,
        "alice",
        "try { return await tools.custom.saved({}) } catch (e) { return e.message }",
        vec![],
    )
    .await;
    let w = out.waits()[0].wait_id.clone();
    let done = e2
        .decide(&alice, out.execution_id(), Some(&w), Decision::Deny, HUMAN)
        .await
        .unwrap();
    assert!(
        done.to_json()["result"]
            .as_str()
            .unwrap()
            .contains("denied"),
        "{done:?}"
    );
    assert_eq!(c.destroy.load(Ordering::SeqCst), 1);
    assert_eq!(c.query.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_tool_that_needs_a_person_pauses_on_its_link_and_runs_again_once_answered() {
    let (e, c) = engine().await;
    let alice = e.caller("alice", Face::Http);
    // Called directly: the call pauses on an input wait in url mode with the tool's link.
    let out = e.call(&alice, "rows.setup", json!({})).await.unwrap();
    let id = out.execution_id().to_string();
    let w = out.waits()[0].clone();
    assert_eq!(w.kind, WaitKind::Input);
    assert_eq!(w.mode, Some(toolshed_engine::executions::InputMode::Url));
    assert_eq!(
        w.url.as_deref(),
        Some("https://n8n.example.com/home/credentials/create")
    );
    assert!(w
        .message
        .as_deref()
        .unwrap()
        .starts_with("Create the credential in n8n."));
    // Answered before it was done: the tool runs again, asks again, the call pauses again.
    let again = e
        .answer(&alice, &id, &w.wait_id, AnswerAction::Accept, None, HUMAN)
        .await
        .unwrap();
    assert_eq!(c.setup.load(Ordering::SeqCst), 2);
    let w2 = again.waits()[0].clone();
    assert_eq!(w2.mode, Some(toolshed_engine::executions::InputMode::Url));
    // Done, answered: the call runs once more, in the same execution, and completes.
    c.setup_done.store(true, Ordering::SeqCst);
    let done = e
        .answer(&alice, &id, &w2.wait_id, AnswerAction::Accept, None, HUMAN)
        .await
        .unwrap();
    assert_eq!(
        done.to_json()["result"],
        json!({"credentialId": "c1", "calls": 3, "execution": id})
    );
    // Declined: the call fails, and says so.
    c.setup_done.store(false, Ordering::SeqCst);
    let out = e.call(&alice, "rows.setup", json!({})).await.unwrap();
    let declined = e
        .answer(
            &alice,
            out.execution_id(),
            &out.waits()[0].wait_id,
            AnswerAction::Decline,
            None,
            HUMAN,
        )
        .await;
    let text = format!("{declined:?}");
    assert!(text.contains("den") || text.contains("declin"), "{text}");

    // In a script: the script pauses on the same wait; answered when done, it goes on. A second
    // ask of the same call is an error carrying the link (a script never loops on a person).
    c.setup_done.store(false, Ordering::SeqCst);
    let out = run(
        &e,
        "alice",
        "try { return await tools.rows.setup({}) } catch (err) { return 'error: ' + err.message }",
        vec![],
    )
    .await;
    let w = out.waits()[0].clone();
    assert_eq!(w.mode, Some(toolshed_engine::executions::InputMode::Url));
    let after = e
        .answer(
            &alice,
            out.execution_id(),
            &w.wait_id,
            AnswerAction::Accept,
            None,
            HUMAN,
        )
        .await
        .unwrap();
    let r = after.to_json()["result"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        r.starts_with("error: ") && r.contains("https://n8n.example.com/home/credentials/create"),
        "{after:?}"
    );
    let out = run(&e, "alice", "return await tools.rows.setup({})", vec![]).await;
    c.setup_done.store(true, Ordering::SeqCst);
    let after = e
        .answer(
            &alice,
            out.execution_id(),
            &out.waits()[0].wait_id,
            AnswerAction::Accept,
            None,
            HUMAN,
        )
        .await
        .unwrap();
    assert_eq!(after.to_json()["result"]["credentialId"], "c1", "{after:?}");
}
