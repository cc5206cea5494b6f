//! Engine hardening end to end: bounded audit under hostile paths, who decides approvals (by
//! principal and channel), per-principal rate limits, empty principals.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{json, Value};
use toolshed_core::{
    Annotations, CatalogBuilder, Policy, Principal, Role, SharedCatalog, Tool, ToolDef, ToolPath,
};
use toolshed_engine::{Decision, DecisionChannel, Engine, EngineConfig, Face, Outcome, RateLimits};
use toolshed_store::Store;

const HUMAN: DecisionChannel = DecisionChannel::Human(Face::Http);
const AGENT: DecisionChannel = DecisionChannel::AgentTool;

fn catalog() -> SharedCatalog {
    let mut b = CatalogBuilder::new();
    let def = |path: &str, ann| {
        ToolDef::new(
            ToolPath::parse(path).unwrap(),
            path,
            format!("The {path} tool."),
        )
        .with_input(json!({"type": "object"}))
        .with_annotations(ann)
    };
    b.add_tool(Tool::from_fn(
        def("demo.echo", Annotations::READ_ONLY),
        |_ctx, args| async move { Ok(json!({"echo": args})) },
    ));
    b.add_tool(Tool::from_fn(
        def("demo.destroy", Annotations::DESTRUCTIVE),
        |ctx, _args| async move { Ok(json!({"destroyedBy": ctx.principal.to_string()})) },
    ));
    // Two tools that answer after 1.2 s: one declares its own timeout (as n8n.workflows.run
    // and agents.run do), the other does not.
    b.add_tool(Tool::from_fn(
        def("demo.long", Annotations::READ_ONLY).with_timeout(std::time::Duration::from_secs(5)),
        |_ctx, _args| async move {
            tokio::time::sleep(std::time::Duration::from_millis(1_200)).await;
            Ok(json!({"done": true}))
        },
    ));
    b.add_tool(Tool::from_fn(
        def("demo.slow", Annotations::READ_ONLY),
        |_ctx, _args| async move {
            tokio::time::sleep(std::time::Duration::from_millis(1_200)).await;
            Ok(json!({"done": true}))
        },
    ));
    SharedCatalog::new(b.build().unwrap())
}

fn role(id: &str, patterns: &[&str], decide: &[&str], self_decide: bool) -> Role {
    Role {
        id: id.into(),
        patterns: patterns.iter().map(|p| p.to_string()).collect(),
        decide: decide.iter().map(|p| p.to_string()).collect(),
        self_decide,
        ..Role::default()
    }
}

fn policy() -> Policy {
    let principal = |id: &str, roles: &[&str]| Principal {
        id: id.into(),
        roles: roles.iter().map(|r| r.to_string()).collect(),
    };
    Policy::new(
        vec![
            role("user", &["demo.**"], &[], false),
            role("decider", &["demo.**"], &["demo.**"], false),
            role("trusted", &["demo.**"], &["demo.**"], true),
            role("admin", &["*"], &["**"], false),
        ],
        vec![
            principal("plain", &["user"]),
            principal("other", &["user"]),
            principal("clerk", &["decider"]),
            principal("bot", &["trusted"]),
            principal("root", &["admin"]),
        ],
    )
    .unwrap()
}

async fn engine_with(config: EngineConfig) -> (Engine, Store) {
    let store = Store::open("sqlite::memory:").await.unwrap();
    let e = Engine::new(Arc::new(catalog()), policy(), store.clone(), config);
    (e, store)
}

async fn engine() -> (Engine, Store) {
    engine_with(EngineConfig::default()).await
}

async fn paused(e: &Engine, principal: &str) -> String {
    let caller = e.caller(principal, Face::Http);
    match e.call(&caller, "demo.destroy", json!({})).await.unwrap() {
        Outcome::Paused { execution_id, .. } => execution_id,
        other => panic!("{other:?}"),
    }
}

fn code(r: Result<Outcome, toolshed_engine::EngineError>) -> String {
    match r {
        Ok(Outcome::Completed { .. }) => "completed".into(),
        Ok(other) => format!("{other:?}"),
        Err(e) => e.code().to_string(),
    }
}

/// 1,000 calls with 100 kB names from one script: each answers `not_found` like an unknown
/// tool, the answer does not repeat the name in full, and each stored audit entry stays small.
#[tokio::test]
async fn hostile_paths_keep_the_audit_log_small() {
    let (e, store) = engine().await;
    let root = e.caller("root", Face::Mcp);
    let script = r#"
        const long = "a".repeat(100000);
        const names = [long, long + ".b", "x." + long, "demo." + long.slice(0, 300)];
        const codes = {};
        let longest = 0;
        for (let i = 0; i < 1000; i++) {
            try { await tools[names[i % 4]]({ blob: long }); codes.ok = (codes.ok || 0) + 1; }
            catch (err) {
                codes[err.code] = (codes[err.code] || 0) + 1;
                longest = Math.max(longest, err.message.length);
            }
        }
        return { codes, longest };
    "#;
    let out = e.run_script(&root, script).await.unwrap();
    let Outcome::Completed { result, .. } = out else {
        panic!("{out:?}")
    };
    assert_eq!(result["codes"], json!({"not_found": 1000}), "{result}");
    assert!(result["longest"].as_u64().unwrap() < 1_000, "{result}");
    // The same through a direct call: the unknown-tool answer.
    let long = "a".repeat(100_000);
    let direct = e.call(&root, &format!("demo.{long}"), json!({})).await;
    assert_eq!(code(direct), "not_found");
    e.flush_audit().await;
    let entries = store.recent_audit(5_000).await.unwrap();
    assert_eq!(entries.len(), 1_001);
    for a in &entries {
        let bytes = a.id.len()
            + a.principal.len()
            + a.face.len()
            + a.path.len()
            + a.execution_id.as_deref().map_or(0, str::len)
            + a.args.len()
            + a.outcome.len()
            + a.error.as_deref().map_or(0, str::len);
        assert!(bytes < 5_000, "{bytes} bytes stored for one entry");
        assert_eq!(a.outcome, "not_found");
    }
}

/// The journal of a paused script names each call's target at most 256 bytes long, so calls
/// with huge names do not make the stored execution (or the run's memory) huge.
#[tokio::test]
async fn hostile_paths_keep_the_journal_small() {
    let (e, store) = engine().await;
    let root = e.caller("root", Face::Mcp);
    let script = r#"
        const long = "a".repeat(100000);
        for (let i = 0; i < 50; i++) { try { await tools[long + i]({}); } catch (err) {} }
        return await tools.demo.destroy({});
    "#;
    let out = e.run_script(&root, script).await.unwrap();
    let Outcome::Paused { execution_id, .. } = out else {
        panic!("{out:?}")
    };
    let rec = store.get_execution(&execution_id).await.unwrap().unwrap();
    let journal = rec.journal.to_string();
    assert_eq!(rec.journal.as_array().unwrap().len(), 50);
    assert!(journal.len() < 50 * 1_000, "{} bytes", journal.len());
    // Replayed on approval: the same answers, then the approved call.
    let done = e
        .resume(&root, &execution_id, Decision::Approve, HUMAN)
        .await
        .unwrap();
    assert_eq!(done.to_json()["result"], json!({"destroyedBy": "root"}));
}

/// A failing script's error message is bounded like its result and logs.
#[tokio::test]
async fn script_error_messages_are_bounded() {
    let (e, _) = engine().await;
    let root = e.caller("root", Face::Cli);
    let out = e
        .run_script(&root, r#"throw new Error("x".repeat(1000000))"#)
        .await
        .unwrap();
    let Outcome::Failed { error, .. } = out else {
        panic!("{out:?}")
    };
    let message = error["message"].as_str().unwrap();
    assert!(message.len() < 5_000, "{} bytes", message.len());
    assert!(message.ends_with("…(truncated)"));
}

/// Without `decide` a principal cannot settle its own execution; with `decide` it can through
/// a human channel but not through the agent's tool unless `self_decide` is on.
#[tokio::test]
async fn who_decides_is_policy_by_principal_and_channel() {
    let (e, _) = engine().await;
    for (who, human, agent) in [
        ("plain", "forbidden", "forbidden"),
        ("clerk", "completed", "forbidden"),
        ("bot", "completed", "completed"),
    ] {
        let caller = e.caller(who, Face::Mcp);
        let id = paused(&e, who).await;
        assert_eq!(
            code(e.resume(&caller, &id, Decision::Approve, AGENT).await),
            agent,
            "{who} through the resume tool"
        );
        if agent != "completed" {
            assert_eq!(
                code(e.resume(&caller, &id, Decision::Approve, HUMAN).await),
                human,
                "{who} through the HTTP API"
            );
        }
    }
    // The refusal says why; the execution stays paused for a person who may decide.
    let id = paused(&e, "plain").await;
    let plain = e.caller("plain", Face::Http);
    let err = e
        .resume(&plain, &id, Decision::Approve, HUMAN)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("decide"), "{err}");
    assert_eq!(e.execution(&plain, &id).await.unwrap().status, "paused");
}

/// A principal whose `decide` matches settles another principal's execution through a human
/// channel; the call runs as its owner. Others do not even see it, and the agent's tool never
/// decides for another principal.
#[tokio::test]
async fn a_decider_settles_other_principals_executions() {
    let (e, _) = engine().await;
    let id = paused(&e, "plain").await;
    let root = e.caller("root", Face::Http);
    let other = e.caller("other", Face::Http);
    assert_eq!(
        code(e.resume(&other, &id, Decision::Approve, HUMAN).await),
        "unknown_execution"
    );
    assert!(e.pending(&other).await.unwrap().is_empty());
    assert_eq!(
        e.execution(&other, &id).await.unwrap_err().code(),
        "unknown_execution"
    );
    let listed = e.pending(&root).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].principal, "plain");
    assert_eq!(e.execution(&root, &id).await.unwrap().principal, "plain");
    let bot = e.caller("bot", Face::Mcp);
    assert_eq!(
        code(e.resume(&bot, &id, Decision::Approve, AGENT).await),
        "forbidden"
    );
    let done = e
        .resume(&root, &id, Decision::Approve, HUMAN)
        .await
        .unwrap();
    let Outcome::Completed { result, .. } = done else {
        panic!("{done:?}")
    };
    assert_eq!(result, json!({"destroyedBy": "plain"}));
}

/// The (N+1)-th tool call within a minute is refused with `rate_limited` and a hint; another
/// principal is unaffected; scripts have their own limit, and their calls count as calls.
#[tokio::test]
async fn per_principal_rate_limits() {
    let (e, _) = engine_with(EngineConfig {
        rate_limits: RateLimits {
            calls_per_minute: 3,
            scripts_per_minute: 2,
        },
        principal_rate_limits: HashMap::from([(
            "root".to_string(),
            RateLimits {
                calls_per_minute: 0,
                scripts_per_minute: 0,
            },
        )]),
        ..EngineConfig::default()
    })
    .await;
    let plain = e.caller("plain", Face::Http);
    for _ in 0..3 {
        assert_eq!(
            code(e.call(&plain, "demo.echo", json!({})).await),
            "completed"
        );
    }
    let err = e.call(&plain, "demo.echo", json!({})).await.unwrap_err();
    assert_eq!(err.code(), "rate_limited");
    assert!(err.retry_after_secs().unwrap() >= 1);
    assert!(err.data().unwrap()["retryAfterSecs"].as_u64().unwrap() >= 1);
    let other = e.caller("other", Face::Mcp);
    assert_eq!(
        code(e.call(&other, "demo.echo", json!({})).await),
        "completed"
    );
    // Scripts: two per minute; their calls draw on the same call allowance.
    let out = e
        .run_script(&other, "try { await tools.demo.echo({}); await tools.demo.echo({}); await tools.demo.echo({}); return 'all' } catch (err) { return err.code }")
        .await
        .unwrap();
    assert_eq!(out.to_json()["result"], json!("rate_limited"));
    e.run_script(&other, "return 1").await.unwrap();
    let err = e.run_script(&other, "return 1").await.unwrap_err();
    assert_eq!(err.code(), "rate_limited");
    // An override of 0 is unlimited.
    let root = e.caller("root", Face::Cli);
    for _ in 0..10 {
        assert_eq!(
            code(e.call(&root, "demo.echo", json!({})).await),
            "completed"
        );
    }
}

/// An empty principal id sees no one's executions or audit entries.
#[tokio::test]
async fn an_empty_principal_sees_nothing() {
    let (e, _) = engine().await;
    let id = paused(&e, "plain").await;
    e.call(&e.caller("root", Face::Cli), "demo.echo", json!({}))
        .await
        .unwrap();
    e.flush_audit().await;
    let empty = e.caller("", Face::Http);
    assert!(e.pending(&empty).await.unwrap().is_empty());
    assert!(e.audit_of(&empty, 100).await.unwrap().is_empty());
    assert!(e.execution(&empty, &id).await.is_err());
    let value: Value = json!(e
        .audit_of(&e.caller("root", Face::Cli), 10)
        .await
        .unwrap()
        .len());
    assert_eq!(value, json!(1));
}

/// A script may wait for a tool as long as the tool's own declared timeout, past the script's
/// wall clock; a tool without one is still held to the wall clock.
#[tokio::test]
async fn a_script_waits_for_a_long_tool_past_its_wall_clock() {
    let mut config = EngineConfig::default();
    config.limits.wall_clock = std::time::Duration::from_millis(500);
    let (e, _) = engine_with(config).await;
    let caller = e.caller("plain", Face::Http);
    let run = |script: &str| {
        let (e, caller) = (e.clone(), caller.clone());
        let script = script.to_string();
        async move {
            e.run_script_args(
                &caller,
                toolshed_engine::ops::RunScriptArgs {
                    script,
                    client_tools: vec![],
                },
            )
            .await
        }
    };
    let done = run("return await tools.demo.long({});").await.unwrap();
    assert_eq!(done.to_json()["result"], json!({"done": true}), "{done:?}");
    let late = run("return await tools.demo.slow({});").await;
    let text = format!("{late:?}");
    assert!(text.contains("wall-clock"), "{text}");
}
