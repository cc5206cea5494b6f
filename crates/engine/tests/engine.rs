//! The engine path end to end with in-memory tools: policy, validation, approval, durable
//! executions with replay, audit.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use toolshed_core::{
    Annotations, CatalogBuilder, Policy, Principal, Role, SharedCatalog, Tool, ToolDef, ToolError,
    ToolPath,
};
use toolshed_engine::{
    Decision, DecisionChannel, Engine, EngineConfig, EngineError, Face, Outcome,
};
use toolshed_store::Store;

struct Counters {
    echo: AtomicUsize,
    insert: AtomicUsize,
    destroy: AtomicUsize,
    /// `demo.block` runs: the first one never finishes.
    block: AtomicUsize,
}

fn def(path: &str, ann: Annotations, input: Value) -> ToolDef {
    ToolDef::new(
        ToolPath::parse(path).unwrap(),
        path,
        format!("The {path} tool."),
    )
    .with_input(input)
    .with_annotations(ann)
}

fn catalog(counters: Arc<Counters>) -> SharedCatalog {
    let mut b = CatalogBuilder::new();
    let c = counters.clone();
    b.add_tool(Tool::from_fn(
        def(
            "demo.echo",
            Annotations::READ_ONLY,
            json!({"type": "object", "properties": {"msg": {"type": "string", "minLength": 1}}, "required": ["msg"]}),
        ),
        move |_ctx, args| {
            let c = c.clone();
            async move {
                c.echo.fetch_add(1, Ordering::SeqCst);
                Ok(json!({"echo": args["msg"]}))
            }
        },
    ));
    let c = counters.clone();
    b.add_tool(Tool::from_fn(
        def(
            "demo.insert",
            Annotations::WRITE,
            json!({"type": "object", "properties": {"n": {"type": "integer"}}}),
        ),
        move |_ctx, args| {
            let c = c.clone();
            async move {
                let total = c.insert.fetch_add(1, Ordering::SeqCst) + 1;
                Ok(json!({"inserted": args["n"], "total": total}))
            }
        },
    ));
    let c = counters.clone();
    b.add_tool(Tool::from_fn(
        def(
            "demo.destroy",
            Annotations::DESTRUCTIVE,
            json!({"type": "object", "properties": {"what": {"type": "string"}}}),
        ),
        move |_ctx, args| {
            let c = c.clone();
            async move {
                c.destroy.fetch_add(1, Ordering::SeqCst);
                Ok(json!({"destroyed": args["what"]}))
            }
        },
    ));
    let c = counters.clone();
    b.add_tool(Tool::from_fn(
        def("demo.block", Annotations::WRITE, json!({"type": "object"})),
        move |_ctx, _args| {
            let c = c.clone();
            async move {
                let n = c.block.fetch_add(1, Ordering::SeqCst) + 1;
                if n == 1 {
                    std::future::pending::<()>().await;
                }
                Ok(json!({"run": n}))
            }
        },
    ));
    b.add_tool(Tool::from_fn(
        def(
            "demo.fail",
            Annotations::READ_ONLY,
            json!({"type": "object"}),
        ),
        |_ctx, _args| async {
            Err(ToolError::upstream("the upstream said no").with_data(json!({"status": 503})))
        },
    ));
    b.add_tool(Tool::from_fn(
        def(
            "demo.slow",
            Annotations::READ_ONLY,
            json!({"type": "object"}),
        ),
        |_ctx, _args| async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            Ok(json!({}))
        },
    ));
    // Declares a timeout of its own, longer than the engine's call timeout.
    b.add_tool(Tool::from_fn(
        def(
            "demo.patient",
            Annotations::READ_ONLY,
            json!({"type": "object", "properties": {"ms": {"type": "integer"}}}),
        )
        .with_timeout(Duration::from_secs(2)),
        |ctx, args| async move {
            tokio::time::sleep(Duration::from_millis(args["ms"].as_u64().unwrap_or(0))).await;
            Ok(json!({"timeoutMs": ctx.timeout.as_millis() as u64}))
        },
    ));
    b.add_tool(Tool::from_fn(
        def("demo.bad_output", Annotations::READ_ONLY, json!({"type": "object"}))
            .with_output(json!({"type": "object", "required": ["id"], "properties": {"id": {"type": "integer"}}})),
        |_ctx, _args| async { Ok(json!({"id": "not a number"})) },
    ));
    b.add_tool(Tool::from_fn(
        def(
            "secret.read",
            Annotations::READ_ONLY,
            json!({"type": "object"}),
        ),
        |_ctx, _args| async { Ok(json!("hidden")) },
    ));
    SharedCatalog::new(b.build().unwrap())
}

/// Decisions in these tests come from a person (the HTTP API).
const HUMAN: DecisionChannel = DecisionChannel::Human(Face::Http);

fn policy() -> Policy {
    Policy::new(
        vec![
            // These tests are about destructive calls pausing: writes are allowed to run
            // unconfirmed (the default would pause them too; see `toolshed_core::rules`).
            Role {
                id: "admin".into(),
                name: "Admin".into(),
                patterns: vec!["*".into()],
                allow: vec!["write".into()],
                ..Role::default()
            },
            Role {
                id: "demo".into(),
                name: "Demo".into(),
                patterns: vec!["demo.**".into()],
                allow: vec!["write".into()],
                ..Role::default()
            },
            // Alice decides her own pending demo calls (through human channels).
            Role {
                id: "demo_decider".into(),
                patterns: vec![],
                decide: vec!["demo.**".into()],
                ..Role::default()
            },
        ],
        vec![
            Principal {
                id: "alice".into(),
                roles: vec!["demo".into(), "demo_decider".into()],
            },
            Principal {
                id: "bob".into(),
                roles: vec!["demo".into()],
            },
            Principal {
                id: "root".into(),
                roles: vec!["admin".into()],
            },
        ],
    )
    .unwrap()
}

async fn engine_with(store: Store, config: EngineConfig) -> (Engine, Arc<Counters>) {
    let counters = Arc::new(Counters {
        echo: 0.into(),
        insert: 0.into(),
        destroy: 0.into(),
        block: 0.into(),
    });
    let e = engine_sharing(store, config, counters.clone());
    (e, counters)
}

/// An engine whose tools count into `counters` (shared across "restarts").
fn engine_sharing(store: Store, config: EngineConfig, counters: Arc<Counters>) -> Engine {
    Engine::new(Arc::new(catalog(counters)), policy(), store, config)
}

async fn engine() -> (Engine, Arc<Counters>) {
    let config = EngineConfig {
        call_timeout: Duration::from_millis(300),
        ..Default::default()
    };
    engine_with(Store::open("sqlite::memory:").await.unwrap(), config).await
}

fn completed(o: &Outcome) -> &Value {
    match o {
        Outcome::Completed { result, .. } => result,
        other => panic!("expected completed, got {other:?}"),
    }
}

#[tokio::test]
async fn forbidden_answers_like_missing_on_every_entry_point() {
    let (e, _) = engine().await;
    let alice = e.caller("alice", Face::Cli);
    let missing = e.call(&alice, "nope.tool", json!({})).await.unwrap_err();
    let forbidden = e.call(&alice, "secret.read", json!({})).await.unwrap_err();
    assert_eq!(missing.code(), "not_found");
    assert_eq!(forbidden.code(), "not_found");
    assert_eq!(
        forbidden.to_string().replace("secret.read", "X"),
        missing.to_string().replace("nope.tool", "X")
    );
    assert!(e.describe(&alice, "secret.read", false).is_err());
    assert!(e
        .list_tools(&alice)
        .iter()
        .all(|d| d.path.namespace() == "demo"));
    assert!(e
        .search(&alice, "secret read", 10, None)
        .hits
        .iter()
        .all(|h| h.path != "secret.read"));
    assert!(!e.view_summary(&alice).contains("secret"));
    let root = e.caller("root", Face::Cli);
    assert!(e.view_summary(&root).contains("secret (1)"));
    // Unknown principal: default deny.
    let nobody = e.caller("mallory", Face::Http);
    assert!(e.list_tools(&nobody).is_empty());
    assert_eq!(
        e.call(&nobody, "demo.echo", json!({"msg": "x"}))
            .await
            .unwrap_err()
            .code(),
        "not_found"
    );
    // Scripts obey the same view.
    let out = e
        .run_script(
            &alice,
            "try { await tools.secret.read({}); return 'leak' } catch (err) { return err.code }",
        )
        .await
        .unwrap();
    assert_eq!(completed(&out), &json!("not_found"));
}

#[tokio::test]
async fn invalid_arguments_name_pointer_and_rule() {
    let (e, c) = engine().await;
    let alice = e.caller("alice", Face::Cli);
    let err = e
        .call(&alice, "demo.echo", json!({"msg": ""}))
        .await
        .unwrap_err();
    match &err {
        EngineError::InvalidArguments { violations, .. } => {
            assert_eq!(violations[0].pointer, "/msg");
            assert_eq!(violations[0].rule, "minLength");
        }
        other => panic!("{other:?}"),
    }
    let err = e.call(&alice, "demo.echo", json!({})).await.unwrap_err();
    assert!(err.to_string().contains("required"), "{err}");
    let err = e.call(&alice, "demo.echo", json!([1])).await.unwrap_err();
    assert!(err.to_string().contains("must be a JSON object"), "{err}");
    let err = Engine::parse_args("demo.echo", "{\"msg\": ").unwrap_err();
    assert_eq!(err.code(), "malformed_arguments");
    assert!(err.to_string().contains("line 1 column"), "{err}");
    assert_eq!(
        c.echo.load(Ordering::SeqCst),
        0,
        "invalid calls never reach the handler"
    );
}

#[tokio::test]
async fn handler_errors_timeouts_and_output_validation() {
    let (e, _) = engine().await;
    let alice = e.caller("alice", Face::Cli);
    let err = e.call(&alice, "demo.fail", json!({})).await.unwrap_err();
    assert_eq!(err.code(), "upstream");
    assert_eq!(err.data().unwrap()["status"], 503);
    let err = e.call(&alice, "demo.slow", json!({})).await.unwrap_err();
    assert_eq!(err.code(), "timeout");
    let err = e
        .call(&alice, "demo.bad_output", json!({}))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "invalid_output");
    assert!(err.to_string().contains("/id"), "{err}");
}

#[tokio::test]
async fn a_tool_may_declare_a_longer_timeout_up_to_the_maximum() {
    // The engine's call timeout is 300 ms; demo.patient declares 2 s.
    let (e, _) = engine().await;
    let alice = e.caller("alice", Face::Cli);
    let o = e
        .call(&alice, "demo.patient", json!({"ms": 600}))
        .await
        .unwrap();
    assert_eq!(
        completed(&o)["timeoutMs"],
        2000,
        "the handler is told its own timeout"
    );
    // A maximum below the declared timeout caps it.
    let config = EngineConfig {
        call_timeout: Duration::from_millis(300),
        max_call_timeout: Duration::from_millis(800),
        ..Default::default()
    };
    let (e, _) = engine_with(Store::open("sqlite::memory:").await.unwrap(), config).await;
    let alice = e.caller("alice", Face::Cli);
    let o = e
        .call(&alice, "demo.patient", json!({"ms": 500}))
        .await
        .unwrap();
    assert_eq!(completed(&o)["timeoutMs"], 800);
    let started = std::time::Instant::now();
    let err = e
        .call(&alice, "demo.patient", json!({"ms": 1500}))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "timeout");
    assert!(err.to_string().contains("within 0.8s"), "{err}");
    assert!(
        started.elapsed() < Duration::from_millis(1400),
        "cut at the maximum"
    );
    // Tools without a timeout of their own keep the call timeout.
    let err = e.call(&alice, "demo.slow", json!({})).await.unwrap_err();
    assert!(err.to_string().contains("within 0.3s"), "{err}");
}

#[tokio::test]
async fn destructive_direct_call_pauses_then_approve_or_deny() {
    let (e, c) = engine().await;
    let alice = e.caller("alice", Face::Http);
    let out = e
        .call(&alice, "demo.destroy", json!({"what": "db"}))
        .await
        .unwrap();
    let Outcome::Paused {
        execution_id,
        pending,
        ..
    } = out
    else {
        panic!("{out:?}")
    };
    assert_eq!(pending.as_ref().unwrap().path, "demo.destroy");
    assert_eq!(pending.as_ref().unwrap().args, json!({"what": "db"}));
    assert_eq!(c.destroy.load(Ordering::SeqCst), 0);
    // Listed for its owner only.
    assert_eq!(e.pending(&alice).await.unwrap().len(), 1);
    assert!(e
        .pending(&e.caller("bob", Face::Http))
        .await
        .unwrap()
        .is_empty());
    // Another principal cannot resume it.
    let bob = e.caller("bob", Face::Http);
    assert_eq!(
        e.resume(&bob, &execution_id, Decision::Approve, HUMAN)
            .await
            .unwrap_err()
            .code(),
        "unknown_execution"
    );
    // Approve from another face of the same principal.
    let alice_mcp = e.caller("alice", Face::Mcp);
    let done = e
        .resume(&alice_mcp, &execution_id, Decision::Approve, HUMAN)
        .await
        .unwrap();
    assert_eq!(completed(&done), &json!({"destroyed": "db"}));
    assert_eq!(c.destroy.load(Ordering::SeqCst), 1);
    // Already settled.
    let err = e
        .resume(&alice, &execution_id, Decision::Approve, HUMAN)
        .await
        .unwrap_err();
    assert_eq!(err.code(), "already_settled");
    // Deny path.
    let Outcome::Paused { execution_id, .. } = e
        .call(&alice, "demo.destroy", json!({"what": "x"}))
        .await
        .unwrap()
    else {
        panic!()
    };
    let denied = e
        .resume(&alice, &execution_id, Decision::Deny, HUMAN)
        .await
        .unwrap();
    let Outcome::Failed { error, .. } = denied else {
        panic!("{denied:?}")
    };
    assert_eq!(error["code"], "denied");
    assert_eq!(c.destroy.load(Ordering::SeqCst), 1);
    assert_eq!(
        e.resume(&alice, "ex_unknown", Decision::Deny, HUMAN)
            .await
            .unwrap_err()
            .code(),
        "unknown_execution"
    );
    assert!("maybe".parse::<Decision>().is_err());
}

#[tokio::test]
async fn script_pauses_and_replays_without_rerunning_completed_calls() {
    let (e, c) = engine().await;
    let alice = e.caller("alice", Face::Mcp);
    let script = r#"
        const r = Math.random();
        const t = Date.now();
        const a = await tools.demo.insert({ n: 1 });
        console.log("inserted", a.total);
        const d = await tools.demo.destroy({ what: "table" });
        const b = await tools.demo.insert({ n: 2 });
        return { a, d, b, r, t };
    "#;
    let out = e.run_script(&alice, script).await.unwrap();
    let Outcome::Paused {
        execution_id,
        pending,
        ..
    } = out
    else {
        panic!("{out:?}")
    };
    assert_eq!(pending.as_ref().unwrap().path, "demo.destroy");
    assert_eq!(pending.as_ref().unwrap().seq, 1);
    assert_eq!(c.insert.load(Ordering::SeqCst), 1);
    let done = e
        .resume(&alice, &execution_id, Decision::Approve, HUMAN)
        .await
        .unwrap();
    let v = completed(&done).clone();
    assert_eq!(
        c.insert.load(Ordering::SeqCst),
        2,
        "the first insert is not run again"
    );
    assert_eq!(c.destroy.load(Ordering::SeqCst), 1);
    assert_eq!(v["a"]["total"], 1);
    assert_eq!(v["b"]["total"], 2);
    assert_eq!(v["d"]["destroyed"], "table");
    assert!(v["r"].as_f64().unwrap() >= 0.0);

    // Denial: the promise rejects with an error the script can catch.
    let script = r#"
        try { await tools.demo.destroy({ what: "x" }); return "ran" }
        catch (err) { return { code: err.code, message: err.message } }
    "#;
    let Outcome::Paused { execution_id, .. } = e.run_script(&alice, script).await.unwrap() else {
        panic!()
    };
    let done = e
        .resume(&alice, &execution_id, Decision::Deny, HUMAN)
        .await
        .unwrap();
    let v = completed(&done);
    assert_eq!(v["code"], "denied");
    assert!(v["message"].as_str().unwrap().contains("denied"));
    assert_eq!(c.destroy.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn two_destructive_calls_pause_twice() {
    let (e, c) = engine().await;
    let alice = e.caller("alice", Face::Mcp);
    let script = r#"
        await tools.demo.destroy({ what: "one" });
        await tools.demo.destroy({ what: "two" });
        return "done";
    "#;
    let Outcome::Paused {
        execution_id,
        pending,
        ..
    } = e.run_script(&alice, script).await.unwrap()
    else {
        panic!()
    };
    assert_eq!(pending.as_ref().unwrap().args["what"], "one");
    let again = e
        .resume(&alice, &execution_id, Decision::Approve, HUMAN)
        .await
        .unwrap();
    let Outcome::Paused {
        execution_id: id2,
        pending,
        ..
    } = again
    else {
        panic!("{again:?}")
    };
    assert_eq!(id2, execution_id);
    assert_eq!(pending.as_ref().unwrap().args["what"], "two");
    let done = e
        .resume(&alice, &execution_id, Decision::Approve, HUMAN)
        .await
        .unwrap();
    assert_eq!(completed(&done), &json!("done"));
    assert_eq!(c.destroy.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn paused_execution_survives_an_engine_restart() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_dir(dir.path()).await.unwrap();
    let (e, c) = engine_with(store.clone(), EngineConfig::default()).await;
    let alice = e.caller("alice", Face::Mcp);
    let Outcome::Paused { execution_id, .. } = e
        .run_script(
            &alice,
            "await tools.demo.insert({n: 1}); await tools.demo.destroy({}); return 'ok'",
        )
        .await
        .unwrap()
    else {
        panic!()
    };
    drop(e);
    store.close().await;
    // A new engine over the same file, as after a restart.
    let store = Store::open_dir(dir.path()).await.unwrap();
    let (e2, c2) = engine_with(store, EngineConfig::default()).await;
    let alice = e2.caller("alice", Face::Http);
    let done = e2
        .resume(&alice, &execution_id, Decision::Approve, HUMAN)
        .await
        .unwrap();
    assert_eq!(completed(&done), &json!("ok"));
    assert_eq!(
        c.insert.load(Ordering::SeqCst) + c2.insert.load(Ordering::SeqCst),
        1
    );
    assert_eq!(c2.destroy.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn paused_executions_expire() {
    let config = EngineConfig {
        approval_ttl: Duration::from_millis(1),
        ..Default::default()
    };
    let (e, c) = engine_with(Store::open("sqlite::memory:").await.unwrap(), config).await;
    let alice = e.caller("alice", Face::Mcp);
    let Outcome::Paused { execution_id, .. } =
        e.call(&alice, "demo.destroy", json!({})).await.unwrap()
    else {
        panic!()
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    let err = e
        .resume(&alice, &execution_id, Decision::Approve, HUMAN)
        .await
        .unwrap_err();
    assert_eq!(err.code(), "expired");
    assert!(err.to_string().contains("expired"));
    assert_eq!(
        e.resume(&alice, &execution_id, Decision::Approve, HUMAN)
            .await
            .unwrap_err()
            .code(),
        "expired"
    );
    assert_eq!(c.destroy.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn audit_records_every_call_with_redacted_arguments() {
    let (e, _) = engine().await;
    let alice = e.caller("alice", Face::Cli);
    e.call(
        &alice,
        "demo.echo",
        json!({"msg": "hi", "apiKey": "sk-live-123"}),
    )
    .await
    .unwrap();
    let _ = e.call(&alice, "secret.read", json!({})).await;
    let _ = e
        .run_script(&alice, "return await tools.demo.echo({msg: 'from script'})")
        .await
        .unwrap();
    e.flush_audit().await;
    let log = e.store().recent_audit(10).await.unwrap();
    assert_eq!(log.len(), 3, "{log:?}");
    let echo = log
        .iter()
        .find(|a| a.face == "cli" && a.path == "demo.echo")
        .unwrap();
    assert_eq!(echo.outcome, "ok");
    assert_eq!(echo.principal, "alice");
    assert!(!echo.args.contains("sk-live-123"));
    assert!(log
        .iter()
        .any(|a| a.path == "secret.read" && a.outcome == "not_found"));
    let scripted = log.iter().find(|a| a.face == "script").unwrap();
    assert!(scripted.execution_id.as_deref().unwrap().starts_with("ex_"));
}

#[tokio::test]
async fn a_call_dropped_before_it_finished_is_audited_as_cancelled() {
    let (e, _) = engine().await;
    let alice = e.caller("alice", Face::Mcp);
    let dropped = tokio::time::timeout(
        Duration::from_millis(100),
        e.call(&alice, "demo.slow", json!({"apiKey": "sk-live-123"})),
    )
    .await;
    assert!(dropped.is_err(), "the slow call should still be running");
    e.flush_audit().await;
    let log = e.store().recent_audit(10).await.unwrap();
    let entry = log.iter().find(|a| a.path == "demo.slow").expect("audited");
    assert_eq!(entry.outcome, "cancelled");
    assert_eq!(entry.principal, "alice");
    assert!(entry.error.as_deref().unwrap().contains("cancelled"));
    assert!(
        !entry.args.contains("sk-live-123"),
        "redacted: {}",
        entry.args
    );
    assert!(entry.duration_us >= 90_000, "{}", entry.duration_us);
    assert_eq!(log.len(), 1, "one entry per call: {log:?}");
}

#[tokio::test]
async fn scripts_search_and_describe_in_the_callers_view() {
    let (e, _) = engine().await;
    let alice = e.caller("alice", Face::Mcp);
    let out = e
        .run_script(
            &alice,
            r#"const s = await tools.search({query: "echo", limit: 3});
               const d = await tools.describe.tool({path: s.hits[0].path});
               return {first: s.hits[0].path, text: d.text}"#,
        )
        .await
        .unwrap();
    let v = completed(&out);
    assert_eq!(v["first"], "demo.echo");
    assert!(v["text"].as_str().unwrap().contains("msg"));
}

/// A search that finds a tool brings the tool its parameter says its value comes from, but
/// only where the caller may see that tool: the prerequisite goes through the caller's view
/// like every other hit.
#[tokio::test]
async fn a_search_brings_a_tools_prerequisite_only_into_a_view_that_holds_it() {
    let mut b = CatalogBuilder::new();
    let tool = |path: &str, description: &str, input: Value| {
        let def = ToolDef::new(ToolPath::parse(path).unwrap(), path, description)
            .with_input(input)
            .with_annotations(Annotations::READ_ONLY);
        Tool::from_fn(def, |_ctx, _args| async { Ok(json!({})) })
    };
    b.add_tool(tool(
        "travel.search_hotels",
        "Find hotels in a city for given dates.",
        json!({"type": "object", "properties": {
            "geo_id": {"type": "string", "description": "Geo ID of the city, retrieved from the Lookup Geo ID API."},
            "check_in": {"type": "string", "description": "Check-in date."}
        }}),
    ));
    b.add_tool(tool(
        "travel.lookup_geo_id",
        "Resolve a place name to its geographic identifier.",
        json!({"type": "object", "properties": {"query": {"type": "string"}}}),
    ));
    for i in 0..6 {
        b.add_tool(tool(
            &format!("travel.hotel_review_{i}"),
            "Reviews of hotels in a city.",
            json!({"type": "object"}),
        ));
    }
    let role = |id: &str, patterns: &[&str]| Role {
        id: id.into(),
        name: id.into(),
        patterns: patterns.iter().map(|p| p.to_string()).collect(),
        ..Role::default()
    };
    let policy = Policy::new(
        vec![
            role("all", &["travel.**"]),
            role("hotels", &["travel.search_hotels", "travel.hotel_review_*"]),
        ],
        vec![
            Principal {
                id: "alice".into(),
                roles: vec!["all".into()],
            },
            Principal {
                id: "bob".into(),
                roles: vec!["hotels".into()],
            },
        ],
    )
    .unwrap();
    let store = Store::open("sqlite::memory:").await.unwrap();
    let e = Engine::new(
        Arc::new(SharedCatalog::new(b.build().unwrap())),
        policy,
        store,
        EngineConfig::default(),
    );
    let paths = |who: &str| -> Vec<String> {
        let caller = e.caller(who, Face::Mcp);
        let answer = e.search(&caller, "find hotels in London for next week", 3, None);
        answer.hits.into_iter().map(|h| h.path).collect()
    };
    // The request never mentions the geo id; its look-up follows the hotel search.
    assert_eq!(
        paths("alice")[..2],
        ["travel.search_hotels", "travel.lookup_geo_id"]
    );
    let bob = paths("bob");
    assert_eq!(bob[0], "travel.search_hotels");
    assert!(bob.iter().all(|p| p != "travel.lookup_geo_id"), "{bob:?}");
    assert_eq!(bob.len(), 3);
}

/// Two engines ("replicas") over one PostgreSQL database: a script paused on one is listed and
/// resumed on the other; two replicas resuming the same execution at once settle it exactly once.
/// Runs when PostgreSQL is reachable (`TOOLSHED_TEST_POSTGRES_URL`, default
/// `postgres://postgres@127.0.0.1:5432/test`), in a fresh schema dropped afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replicas_share_paused_executions_on_postgres() {
    use sqlx::Connection;
    sqlx::any::install_default_drivers();
    let base = std::env::var("TOOLSHED_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let mut admin =
        match tokio::time::timeout(Duration::from_secs(5), sqlx::AnyConnection::connect(&base))
            .await
        {
            Ok(Ok(c)) => c,
            other => {
                eprintln!(
                    "skipping the PostgreSQL replica test: cannot connect to {base}: {:?}",
                    other.err()
                );
                return;
            }
        };
    let schema = format!("engine_test_{}", uuid_like());
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
        .execute(&mut admin)
        .await
        .unwrap();
    let sep = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{sep}options=-c%20search_path%3D{schema}");
    let result = tokio::spawn(async move {
        let (a, ca) = engine_with(Store::open(&url).await.unwrap(), EngineConfig::default()).await;
        let (b, cb) = engine_with(Store::open(&url).await.unwrap(), EngineConfig::default()).await;
        let alice_a = a.caller("alice", Face::Mcp);
        let alice_b = b.caller("alice", Face::Http);
        // Pause on A, resume on B.
        let Outcome::Paused { execution_id, .. } = a
            .run_script(
                &alice_a,
                "await tools.demo.insert({n: 1}); await tools.demo.destroy({}); return 'done'",
            )
            .await
            .unwrap()
        else {
            panic!()
        };
        assert_eq!(b.pending(&alice_b).await.unwrap().len(), 1);
        let done = b
            .resume(&alice_b, &execution_id, Decision::Approve, HUMAN)
            .await
            .unwrap();
        assert_eq!(completed(&done), &json!("done"));
        assert_eq!(
            ca.insert.load(Ordering::SeqCst) + cb.insert.load(Ordering::SeqCst),
            1
        );

        // A race: both replicas resume the same execution at once.
        for _ in 0..5 {
            let Outcome::Paused { execution_id, .. } = a
                .call(&alice_a, "demo.destroy", json!({"what": "race"}))
                .await
                .unwrap()
            else {
                panic!()
            };
            let before = ca.destroy.load(Ordering::SeqCst) + cb.destroy.load(Ordering::SeqCst);
            let (ra, rb) = tokio::join!(
                a.resume(&alice_a, &execution_id, Decision::Approve, HUMAN),
                b.resume(&alice_b, &execution_id, Decision::Approve, HUMAN)
            );
            let oks = [&ra, &rb].iter().filter(|r| r.is_ok()).count();
            assert_eq!(oks, 1, "exactly one replica settles it: {ra:?} / {rb:?}");
            let loser = match (ra, rb) {
                (Ok(_), Err(e)) | (Err(e), Ok(_)) => e,
                other => panic!("{other:?}"),
            };
            assert!(
                matches!(loser.code(), "busy" | "already_settled"),
                "{loser}"
            );
            let after = ca.destroy.load(Ordering::SeqCst) + cb.destroy.load(Ordering::SeqCst);
            assert_eq!(after, before + 1, "the approved call ran once");
        }
    })
    .await;
    sqlx::query(sqlx::AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE")))
        .execute(&mut admin)
        .await
        .unwrap();
    if let Err(e) = result {
        std::panic::resume_unwind(e.into_panic());
    }
}

fn uuid_like() -> String {
    format!(
        "{:x}{:x}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    )
}

/// A resumed run dies after the approved call completed (the task is aborted and the engine
/// dropped, as in a crash); a new engine on the same database lists the execution as
/// interrupted, its owner resumes it, and neither the journaled insert nor the approved
/// destroy runs again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupted_resume_recovers_without_rerunning_completed_calls() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_dir(dir.path()).await.unwrap();
    let (e1, c) = engine_with(store.clone(), EngineConfig::default()).await;
    let alice = e1.caller("alice", Face::Mcp);

    // Scripts that never pause leave nothing in the store.
    let out = e1
        .run_script(&alice, "return (await tools.demo.echo({msg: 'x'})).echo")
        .await
        .unwrap();
    assert_eq!(completed(&out), &json!("x"));
    assert!(store
        .list_executions(None, None, 10)
        .await
        .unwrap()
        .is_empty());

    let script = r#"
        const a = await tools.demo.insert({ n: 1 });
        const d = await tools.demo.destroy({ what: "t" });
        const b = await tools.demo.block({});
        return { a: a.total, d: d.destroyed, b: b.run };
    "#;
    let Outcome::Paused { execution_id, .. } = e1.run_script(&alice, script).await.unwrap() else {
        panic!()
    };
    let run = {
        let (e1, alice, id) = (e1.clone(), alice.clone(), execution_id.clone());
        tokio::spawn(async move { e1.resume(&alice, &id, Decision::Approve, HUMAN).await })
    };
    for _ in 0..500 {
        if c.block.load(Ordering::SeqCst) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        c.block.load(Ordering::SeqCst),
        1,
        "the run reached demo.block"
    );
    assert_eq!(c.destroy.load(Ordering::SeqCst), 1);

    // Mid-run, the decision and both completed calls are already stored.
    let rec = store.get_execution(&execution_id).await.unwrap().unwrap();
    assert_eq!(rec.status.as_str(), "running");
    assert_eq!(
        rec.decisions["1"]["decision"], "approve",
        "{}",
        rec.decisions
    );
    let seqs: Vec<u64> = rec
        .journal
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, vec![0, 1], "{}", rec.journal);
    // Listed with its state; a second resume while it runs is refused.
    let listed = e1.pending(&alice).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].status, "running");
    assert_eq!(
        e1.resume(&alice, &execution_id, Decision::Approve, HUMAN)
            .await
            .unwrap_err()
            .code(),
        "busy"
    );

    // The crash.
    run.abort();
    assert!(run.await.unwrap_err().is_cancelled());
    drop(e1);

    // A restart on the same file, with short limits so the run counts as interrupted soon.
    let config = EngineConfig {
        call_timeout: Duration::from_millis(300),
        recovery_grace: Duration::ZERO,
        limits: toolshed_sandbox::Limits {
            wall_clock: Duration::from_millis(500),
            ..Default::default()
        },
        ..Default::default()
    };
    let store2 = Store::open_dir(dir.path()).await.unwrap();
    let e2 = engine_sharing(store2, config, c.clone());
    let alice2 = e2.caller("alice", Face::Http);
    tokio::time::sleep(Duration::from_millis(700)).await;
    let listed = e2.pending(&alice2).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].status, "interrupted");
    assert_eq!(listed[0].pending.as_ref().unwrap().path, "demo.destroy");
    // Only its owner may recover it.
    assert_eq!(
        e2.resume(
            &e2.caller("bob", Face::Http),
            &execution_id,
            Decision::Approve,
            HUMAN
        )
        .await
        .unwrap_err()
        .code(),
        "unknown_execution"
    );
    let done = e2
        .resume(&alice2, &execution_id, Decision::Approve, HUMAN)
        .await
        .unwrap();
    assert_eq!(completed(&done), &json!({"a": 1, "d": "t", "b": 2}));
    assert_eq!(c.insert.load(Ordering::SeqCst), 1, "insert ran once");
    assert_eq!(c.destroy.load(Ordering::SeqCst), 1, "destroy ran once");
    assert_eq!(
        c.block.load(Ordering::SeqCst),
        2,
        "the call that never completed runs again"
    );
    assert!(e2.pending(&alice2).await.unwrap().is_empty());
    assert_eq!(
        e2.resume(&alice2, &execution_id, Decision::Approve, HUMAN)
            .await
            .unwrap_err()
            .code(),
        "already_settled"
    );
}

/// An interrupted direct call is recovered with the decision recorded by the first resume, even
/// when the recovering resume says otherwise.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupted_direct_call_keeps_its_recorded_decision() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_dir(dir.path()).await.unwrap();
    let config = EngineConfig {
        call_timeout: Duration::from_millis(200),
        recovery_grace: Duration::ZERO,
        limits: toolshed_sandbox::Limits {
            wall_clock: Duration::from_millis(200),
            ..Default::default()
        },
        ..Default::default()
    };
    let (e, c) = engine_with(store.clone(), config.clone()).await;
    let alice = e.caller("alice", Face::Cli);
    let Outcome::Paused { execution_id, .. } = e
        .call(&alice, "demo.destroy", json!({"what": "db"}))
        .await
        .unwrap()
    else {
        panic!()
    };
    // Simulate a process that claimed it (decision stored) and died before running the call.
    let mut rec = store.get_execution(&execution_id).await.unwrap().unwrap();
    rec.status = toolshed_store::ExecutionStatus::Running;
    rec.decisions = json!({"0": {"decision": "approve", "path": "demo.destroy"}});
    let v = rec.version;
    rec.version += 1;
    assert!(store.update_execution(&rec, v).await.unwrap());
    assert_eq!(
        e.resume(&alice, &execution_id, Decision::Deny, HUMAN)
            .await
            .unwrap_err()
            .code(),
        "busy"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let done = e
        .resume(&alice, &execution_id, Decision::Deny, HUMAN)
        .await
        .unwrap();
    assert_eq!(completed(&done), &json!({"destroyed": "db"}));
    assert_eq!(c.destroy.load(Ordering::SeqCst), 1);
}

/// Plugins declare auth providers; configured credentials reach their handlers through
/// `ctx.token(..)`, scoped to the plugin; an unconfigured provider is a clear error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugin_handlers_get_their_providers_tokens() {
    use toolshed_core::{AuthProviderDef, Plugin};
    use toolshed_engine::{CredentialConfig, Credentials};

    // A local OAuth2 token endpoint that counts its fetches.
    let fetches = Arc::new(AtomicUsize::new(0));
    let f = fetches.clone();
    let app = axum::Router::new().route(
        "/token",
        axum::routing::post(move |body: String| {
            let f = f.clone();
            async move {
                f.fetch_add(1, Ordering::SeqCst);
                assert!(body.contains("grant_type=client_credentials"), "{body}");
                axum::Json(json!({"access_token": "oauth-tok", "expires_in": 3600}))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let asks = |provider: &'static str| {
        move |ctx: toolshed_core::ToolContext, _args: Value| async move {
            Ok(json!(ctx.token(provider).await?))
        }
    };
    let tool = |path: &str| {
        ToolDef::new(ToolPath::parse(path).unwrap(), "Ask", "Asks for a token.")
            .with_input(json!({"type": "object"}))
            .with_annotations(Annotations::READ_ONLY)
    };
    let crm = Plugin::new("crm", "CRM", "A CRM.")
        .with_auth(AuthProviderDef::new("crm", "api_key", "The CRM API key."))
        .with_auth(AuthProviderDef::new(
            "crm_oauth",
            "oauth2_client_credentials",
            "CRM service account.",
        ))
        .with_auth(AuthProviderDef::new(
            "crm_unset",
            "api_key",
            "Never configured.",
        ))
        .with_tool(Tool::from_fn(tool("crm.key"), asks("crm")))
        .with_tool(Tool::from_fn(tool("crm.oauth"), asks("crm_oauth")))
        .with_tool(Tool::from_fn(tool("crm.unset"), asks("crm_unset")));
    let other = Plugin::new("other", "Other", "Another plugin.")
        .with_tool(Tool::from_fn(tool("other.steal"), asks("crm")));
    let mut b = CatalogBuilder::new();
    b.add_plugin(&crm).add_plugin(&other);

    let mut creds = Credentials::new();
    creds
        .declare_plugin(&crm)
        .unwrap()
        .declare_plugin(&other)
        .unwrap();
    creds
        .configure(
            "crm",
            &CredentialConfig::ApiKey {
                key: "crm-key-123".into(),
            },
        )
        .unwrap()
        .configure(
            "crm_oauth",
            &CredentialConfig::OAuth2ClientCredentials {
                token_url: format!("http://127.0.0.1:{port}/token"),
                client_id: "id".into(),
                client_secret: "secret".into(),
                scopes: vec![],
                audience: None,
                allow_private: true,
            },
        )
        .unwrap();
    assert_eq!(
        creds.unconfigured(),
        vec![("crm_unset".to_string(), "crm".to_string())]
    );
    let e = Engine::new(
        Arc::new(SharedCatalog::new(b.build().unwrap())),
        policy(),
        Store::open("sqlite::memory:").await.unwrap(),
        EngineConfig::default(),
    )
    .with_credentials(Arc::new(creds));
    let root = e.caller("root", Face::Cli);

    let out = e.call(&root, "crm.key", json!({})).await.unwrap();
    assert_eq!(completed(&out), &json!("crm-key-123"));
    for _ in 0..2 {
        let out = e.call(&root, "crm.oauth", json!({})).await.unwrap();
        assert_eq!(completed(&out), &json!("oauth-tok"));
    }
    assert_eq!(fetches.load(Ordering::SeqCst), 1, "the token is cached");
    // Scripts reach the same handlers through the same path.
    let out = e
        .run_script(&root, "return await tools.crm.key({})")
        .await
        .unwrap();
    assert_eq!(completed(&out), &json!("crm-key-123"));

    let err = e.call(&root, "crm.unset", json!({})).await.unwrap_err();
    assert_eq!(err.code(), "unauthorized");
    let msg = err.to_string();
    assert!(
        msg.contains("'crm_unset'") && msg.contains("[auth.crm_unset]"),
        "{msg}"
    );
    let err = e.call(&root, "other.steal", json!({})).await.unwrap_err();
    assert_eq!(err.code(), "unauthorized");
    assert!(err.to_string().contains("belongs to plugin 'crm'"), "{err}");
    // A secret from an unset environment variable is a clear setup error.
    let err = Credentials::new()
        .configure(
            "crm",
            &CredentialConfig::ApiKey {
                key: "env:TOOLSHED_TEST_SURELY_UNSET_VAR".into(),
            },
        )
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("'crm'") && err.contains("TOOLSHED_TEST_SURELY_UNSET_VAR"),
        "{err}"
    );
}

/// A graceful shutdown writes every queued audit entry.
#[tokio::test]
async fn shutdown_flushes_the_audit_queue() {
    let (e, _) = engine().await;
    let alice = e.caller("alice", Face::Cli);
    for i in 0..300 {
        e.call(&alice, "demo.echo", json!({"msg": format!("m{i}")}))
            .await
            .unwrap();
    }
    e.shutdown().await;
    assert_eq!(e.store().recent_audit(1000).await.unwrap().len(), 300);
    assert_eq!(e.audit_dropped(), 0);
}

/// With the database not answering (another connection holds its write lock), shutdown stops
/// waiting for the audit flush at its deadline and says how many entries were not written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_gives_up_on_the_audit_flush_at_its_deadline() {
    use sqlx::Connection;
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_dir(dir.path()).await.unwrap();
    let (e, _) = engine_with(store, EngineConfig::default()).await;
    let alice = e.caller("alice", Face::Cli);
    let url = format!("sqlite://{}", dir.path().join("toolshed.db").display());
    let mut locker = sqlx::AnyConnection::connect(&url).await.unwrap();
    sqlx::query("BEGIN IMMEDIATE")
        .execute(&mut locker)
        .await
        .unwrap();
    for i in 0..3 {
        e.call(&alice, "demo.echo", json!({"msg": format!("m{i}")}))
            .await
            .unwrap();
    }
    let started = std::time::Instant::now();
    let unwritten = e.shutdown_within(Duration::from_millis(300)).await;
    let took = started.elapsed();
    assert_eq!(unwritten, 3);
    assert!(
        took < Duration::from_secs(2),
        "shutdown waited {took:?} for a database that does not answer"
    );
    sqlx::query("ROLLBACK").execute(&mut locker).await.unwrap();
    // Once the database answers again, the entries are written.
    e.flush_audit().await;
    assert_eq!(e.store().recent_audit(10).await.unwrap().len(), 3);
}

/// The script of the journal-failure tests: the approved destroy is caught, so only a stopped
/// run keeps the insert from running.
const CATCHING_SCRIPT: &str = r#"
    try { await tools.demo.destroy({ what: "t" }); } catch (e) {}
    await tools.demo.insert({ n: 1 });
    return "done";
"#;

/// A resumed run whose journal write fails stops at once: no further tool call runs, and the
/// execution is stored as failed with `journal_failed` (not left `running` to be re-run).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_journal_write_stops_the_run() {
    let (e, c) = engine().await;
    let alice = e.caller("alice", Face::Cli);
    let Outcome::Paused { execution_id, .. } = e.run_script(&alice, CATCHING_SCRIPT).await.unwrap()
    else {
        panic!("expected a pause")
    };
    // The database refuses journal writes of running executions (the claim and the final
    // save still go through).
    sqlx::query(
        "CREATE TRIGGER journal_fails BEFORE UPDATE ON executions \
         WHEN OLD.status = 'running' AND NEW.status = 'running' \
         BEGIN SELECT RAISE(ABORT, 'disk I/O error'); END",
    )
    .execute(e.store().pool())
    .await
    .unwrap();
    let out = e
        .resume(&alice, &execution_id, Decision::Approve, HUMAN)
        .await
        .unwrap();
    let Outcome::Failed { error, .. } = &out else {
        panic!("expected a failure, got {out:?}")
    };
    assert_eq!(error["code"], "journal_failed", "{error}");
    let msg = error["message"].as_str().unwrap();
    assert!(
        msg.contains("call #0 ('demo.destroy')") && msg.contains("disk I/O error"),
        "{msg}"
    );
    assert_eq!(c.destroy.load(Ordering::SeqCst), 1);
    assert_eq!(
        c.insert.load(Ordering::SeqCst),
        0,
        "no call after the failure"
    );
    let info = e.execution(&alice, &execution_id).await.unwrap();
    assert_eq!(info.status, "failed");
    assert_eq!(info.completed_calls, 1, "the destroy's result is stored");
    assert_eq!(info.error.unwrap()["code"], "journal_failed");
}

/// A resumed run that lost its claim (another run bumped the version) stops making calls and
/// writes nothing more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_lost_its_claim_stops() {
    let (e, c) = engine().await;
    let alice = e.caller("alice", Face::Cli);
    let Outcome::Paused { execution_id, .. } = e.run_script(&alice, CATCHING_SCRIPT).await.unwrap()
    else {
        panic!("expected a pause")
    };
    // Right after this run's claim, "another run" claims it too.
    sqlx::query(
        "CREATE TRIGGER steal AFTER UPDATE ON executions \
         WHEN OLD.status = 'paused' AND NEW.status = 'running' \
         BEGIN UPDATE executions SET version = version + 100 WHERE id = NEW.id; END",
    )
    .execute(e.store().pool())
    .await
    .unwrap();
    let err = e
        .resume(&alice, &execution_id, Decision::Approve, HUMAN)
        .await
        .unwrap_err();
    assert_eq!(err.code(), "journal_failed", "{err}");
    assert!(
        err.to_string()
            .contains("another run has claimed the execution"),
        "{err}"
    );
    assert_eq!(c.destroy.load(Ordering::SeqCst), 1);
    assert_eq!(
        c.insert.load(Ordering::SeqCst),
        0,
        "no call after the claim was lost"
    );
    let rec = e
        .store()
        .get_execution(&execution_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rec.status.as_str(), "running", "left to its new owner");
}

/// A journal write still in flight when the run hits its wall clock is not cancelled: the
/// final save waits for it and stores the run's result with the right version.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_journal_write_in_flight_at_the_wall_clock_is_not_lost() {
    use sqlx::Connection;
    use toolshed_core::{CatalogBuilder as Builder, SharedCatalog as Shared};

    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_dir(dir.path()).await.unwrap();
    let url = format!("sqlite://{}", dir.path().join("toolshed.db").display());
    // The approved call takes the database's write lock, so the journal write after it waits.
    let lock: Arc<tokio::sync::Mutex<Option<sqlx::AnyConnection>>> = Arc::default();
    let slot = lock.clone();
    let mut b = Builder::new();
    b.add_tool(Tool::from_fn(
        def(
            "demo.destroy",
            Annotations::DESTRUCTIVE,
            json!({"type": "object"}),
        ),
        move |_ctx, _args| {
            let (slot, url) = (slot.clone(), url.clone());
            async move {
                let mut held = slot.lock().await;
                if held.is_none() {
                    let mut conn = sqlx::AnyConnection::connect(&url).await.unwrap();
                    sqlx::query("BEGIN IMMEDIATE")
                        .execute(&mut conn)
                        .await
                        .unwrap();
                    *held = Some(conn);
                }
                Ok(json!({"destroyed": true}))
            }
        },
    ));
    let config = EngineConfig {
        limits: toolshed_sandbox::Limits {
            wall_clock: Duration::from_millis(300),
            ..Default::default()
        },
        ..Default::default()
    };
    let e = Engine::new(
        Arc::new(Shared::new(b.build().unwrap())),
        policy(),
        store.clone(),
        config,
    );
    let alice = e.caller("alice", Face::Cli);
    let Outcome::Paused { execution_id, .. } = e
        .run_script(&alice, "return await tools.demo.destroy({})")
        .await
        .unwrap()
    else {
        panic!("expected a pause")
    };
    let run = {
        let (e, alice, id) = (e.clone(), alice.clone(), execution_id.clone());
        tokio::spawn(async move { e.resume(&alice, &id, Decision::Approve, HUMAN).await })
    };
    // Once the approved call holds the lock, the run hits its wall clock while its journal
    // write waits for it.
    for _ in 0..500 {
        if lock.lock().await.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(600)).await;
    let mut conn = lock.lock().await.take().expect("the approved call ran");
    sqlx::query("ROLLBACK").execute(&mut conn).await.unwrap();
    let out = run.await.unwrap().unwrap();
    let Outcome::Failed { error, .. } = &out else {
        panic!("expected the wall-clock failure, got {out:?}")
    };
    assert!(
        error.to_string().contains("wall-clock limit of 300 ms"),
        "{error}"
    );
    let rec = store.get_execution(&execution_id).await.unwrap().unwrap();
    assert_eq!(rec.status.as_str(), "failed", "the result was stored");
    assert_eq!(rec.journal.as_array().unwrap().len(), 1, "{}", rec.journal);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_beyond_the_slots_and_the_queue_are_refused_as_overloaded() {
    let config = EngineConfig {
        call_timeout: Duration::from_millis(600),
        sandbox: toolshed_sandbox::SandboxConfig {
            workers: None,
            max_concurrent: 2,
            max_queued: 2,
        },
        ..Default::default()
    };
    let (e, _) = engine_with(Store::open("sqlite::memory:").await.unwrap(), config).await;
    let caller = e.caller("alice", Face::Http);
    // Each admitted script holds its slot ~600 ms (the slow tool times out, caught).
    let src = "try { await tools.demo.slow({}); } catch (err) { return err.code; }";
    let mut tasks = Vec::new();
    for _ in 0..7 {
        let (e, caller) = (e.clone(), caller.clone());
        tasks.push(tokio::spawn(
            async move { e.run_script(&caller, src).await },
        ));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (mut done, mut refused) = (0, 0);
    for t in tasks {
        match t.await.unwrap() {
            Ok(o) => {
                assert_eq!(completed(&o), &json!("timeout"));
                done += 1;
            }
            Err(err) => {
                assert!(matches!(err, EngineError::Overloaded(_)), "{err}");
                assert_eq!(err.code(), "overloaded");
                assert!(err.to_string().contains("overloaded"), "{err}");
                assert!(!err.is_client_error());
                refused += 1;
            }
        }
    }
    assert_eq!((done, refused), (4, 3));
    // Once the burst is over, scripts run again.
    let o = e.run_script(&caller, "return 1;").await.unwrap();
    assert_eq!(completed(&o), &json!(1));
}

/// A resumed (stored) script waiting on a tool with its own long timeout is not taken for
/// interrupted while it waits, though it is silent past its wall clock.
#[tokio::test]
async fn a_stored_script_waiting_on_a_long_tool_is_not_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_dir(dir.path()).await.unwrap();
    let config = || EngineConfig {
        call_timeout: Duration::from_millis(300),
        recovery_grace: Duration::ZERO,
        limits: toolshed_sandbox::Limits {
            wall_clock: Duration::from_millis(500),
            ..Default::default()
        },
        ..Default::default()
    };
    let (e1, _) = engine_with(store.clone(), config()).await;
    let alice = e1.caller("alice", Face::Mcp);
    let script = r#"
        await tools.demo.destroy({ what: "t" });
        return (await tools.demo.patient({ ms: 1500 })).timeoutMs;
    "#;
    let Outcome::Paused { execution_id, .. } = e1.run_script(&alice, script).await.unwrap() else {
        panic!()
    };
    let run = {
        let (e1, alice, id) = (e1.clone(), alice.clone(), execution_id.clone());
        tokio::spawn(async move { e1.resume(&alice, &id, Decision::Approve, HUMAN).await })
    };
    // Past its wall clock and the call timeout, another engine on the same store sees it
    // running, not interrupted.
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    let (e2, _) = engine_with(store.clone(), config()).await;
    let listed = e2.pending(&e2.caller("alice", Face::Http)).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].status, "running");
    let done = run.await.unwrap().unwrap();
    assert_eq!(completed(&done), &json!(2000));
}
