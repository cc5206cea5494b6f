//! Script semantics: results, the `tools` proxy, errors, syntax positions, console capture,
//! the absence of ambient capabilities and determinism of built-ins.

use crate::common;

use std::sync::Arc;
use std::time::Instant;

use common::{quick_limits, run_simple, run_with, TestHost};
use serde_json::json;
use toolshed_sandbox::{CallTarget, Limits, ScriptError, ScriptErrorKind, Status};

fn completed(status: &Status) -> &serde_json::Value {
    match status {
        Status::Completed(v) => v,
        other => panic!("expected Completed, got {other:?}"),
    }
}

fn failed(status: &Status) -> &ScriptError {
    match status {
        Status::Failed(e) => e,
        other => panic!("expected Failed, got {other:?}"),
    }
}

#[tokio::test]
async fn happy_path_returns_the_tool_result() {
    let host = Arc::new(TestHost::default());
    let o = run_with(
        "const r = await tools.demo.echo({x: 1});\nreturn {got: r.args.x, target: r.target};",
        host.clone(),
        &quick_limits(),
    )
    .await;
    assert_eq!(
        completed(&o.status),
        &json!({"got": 1, "target": "tools.demo.echo"})
    );
    assert_eq!(o.calls, 1);
    let calls = host.calls.lock().unwrap();
    assert_eq!(calls[0].seq, 0);
    assert_eq!(calls[0].target, CallTarget::Tool("demo.echo".into()));
    assert_eq!(calls[0].args, json!({"x": 1}));
}

#[tokio::test]
async fn undefined_result_is_null_and_args_default_to_empty_object() {
    let host = Arc::new(TestHost::default());
    let o = run_with("await tools.a.b();", host.clone(), &quick_limits()).await;
    assert_eq!(completed(&o.status), &json!(null));
    assert_eq!(host.calls.lock().unwrap()[0].args, json!({}));
}

#[tokio::test]
async fn search_and_describe_have_their_own_targets_and_count_in_seq() {
    let host = Arc::new(TestHost::default());
    let o = run_with(
        "const s = await tools.search({query: 'issues', limit: 2});\n\
         const d = await tools.describe.tool({path: 'github.issues.create'});\n\
         const t = await tools.github.issues.create({title: 't'});\n\
         return [s.seq, s.target, d.seq, d.target, t.seq, t.target];",
        host.clone(),
        &quick_limits(),
    )
    .await;
    assert_eq!(
        completed(&o.status),
        &json!([
            0,
            "tools.search",
            1,
            "tools.describe.tool",
            2,
            "tools.github.issues.create"
        ])
    );
    let calls = host.calls.lock().unwrap();
    assert_eq!(calls[0].target, CallTarget::Search);
    assert_eq!(calls[0].args, json!({"query": "issues", "limit": 2}));
    assert_eq!(calls[1].target, CallTarget::Describe);
}

#[tokio::test]
async fn promise_all_runs_host_calls_concurrently() {
    let host = Arc::new(TestHost::default());
    let start = Instant::now();
    let o = run_with(
        "const r = await Promise.all([tools.slow.a({}), tools.slow.b({}), tools.slow.c({})]);\n\
         return r.map(x => x.seq);",
        host.clone(),
        &quick_limits(),
    )
    .await;
    let took = start.elapsed();
    assert_eq!(completed(&o.status), &json!([0, 1, 2]));
    assert_eq!(
        host.max_inflight.load(std::sync::atomic::Ordering::SeqCst),
        3
    );
    assert!(took < common::SLOW * 2, "three slow calls took {took:?}");
}

#[tokio::test]
async fn replies_reach_the_script_in_issue_order() {
    // The first call is slow, the second instant: the second must still settle second.
    let o = run_simple(
        "const order = [];\n\
         const a = tools.slow.first({}).then(() => order.push('first'));\n\
         const b = tools.fast.second({}).then(() => order.push('second'));\n\
         await Promise.all([a, b]);\n\
         return order;",
    )
    .await;
    assert_eq!(completed(&o.status), &json!(["first", "second"]));
}

#[tokio::test]
async fn tool_errors_can_be_caught_with_code_message_and_data() {
    let o = run_simple(
        "try { await tools.fail.now({}); return 'no'; }\n\
         catch (e) { return [e instanceof Error, e.code, e.message, e.data]; }",
    )
    .await;
    assert_eq!(
        completed(&o.status),
        &json!([true, "boom", "it failed", {"why": "test"}])
    );
}

#[tokio::test]
async fn uncaught_tool_error_fails_as_thrown() {
    let o = run_simple("await tools.fail.now({});\nreturn 1;").await;
    let e = failed(&o.status);
    assert_eq!(e.kind, ScriptErrorKind::Thrown);
    assert!(e.message.contains("it failed"), "{}", e.message);
    assert!(e.message.contains("boom"), "{}", e.message);
}

#[tokio::test]
async fn thrown_errors_carry_message_and_position() {
    let o = run_simple("const x = 1;\n\n  throw new Error('kaput');").await;
    let e = failed(&o.status);
    assert_eq!(e.kind, ScriptErrorKind::Thrown);
    assert_eq!(e.message, "Error: kaput");
    assert_eq!(e.line, Some(3));
    assert!(e.stack.as_deref().unwrap_or("").contains("script.js:3"));

    let o = run_simple("throw 'plain string';").await;
    let e = failed(&o.status);
    assert_eq!(e.kind, ScriptErrorKind::Thrown);
    assert_eq!(e.message, "plain string");
}

#[tokio::test]
async fn syntax_errors_report_user_line_and_column() {
    let o = run_simple("let a = ;").await;
    let e = failed(&o.status);
    assert_eq!(e.kind, ScriptErrorKind::Syntax);
    assert_eq!((e.line, e.column), (Some(1), Some(9)), "{e:?}");

    let o = run_simple("let a = 1;\nlet b = 2;\nlet c = );").await;
    let e = failed(&o.status);
    assert_eq!(e.kind, ScriptErrorKind::Syntax);
    assert_eq!((e.line, e.column), (Some(3), Some(9)), "{e:?}");
    assert!(e.message.contains(")"), "{}", e.message);
}

#[tokio::test]
async fn non_json_results_are_rejected_clearly() {
    for (src, needle) in [
        ("return () => 1;", "function"),
        ("return {a: 10n};", "BigInt"),
        ("const o = {}; o.self = o; return o;", "circular"),
        ("return {f() {}};", "function"),
    ] {
        let o = run_simple(src).await;
        let e = failed(&o.status);
        assert_eq!(e.kind, ScriptErrorKind::InvalidResult, "{src}");
        assert!(e.message.contains(needle), "{src}: {}", e.message);
    }
}

#[tokio::test]
async fn oversized_results_are_rejected() {
    let limits = Limits {
        max_result_bytes: 1000,
        ..quick_limits()
    };
    let o = run_with(
        "return 'x'.repeat(2000);",
        Arc::new(TestHost::default()),
        &limits,
    )
    .await;
    let e = failed(&o.status);
    assert_eq!(e.kind, ScriptErrorKind::InvalidResult);
    assert!(e.message.contains("1000"), "{}", e.message);
    let o = run_with(
        "return 'x'.repeat(100);",
        Arc::new(TestHost::default()),
        &limits,
    )
    .await;
    assert_eq!(completed(&o.status), &json!("x".repeat(100)));
}

#[tokio::test]
async fn non_json_arguments_reject_without_calling_the_host() {
    let host = Arc::new(TestHost::default());
    let o = run_with(
        "try { await tools.a.b({f: () => 1}); } catch (e) { return [e.name, e.message]; }",
        host.clone(),
        &quick_limits(),
    )
    .await;
    let v = completed(&o.status);
    assert_eq!(v[0], json!("TypeError"));
    assert!(v[1].as_str().unwrap().contains("must be JSON"), "{v}");
    assert_eq!(o.calls, 0);
    assert!(host.calls.lock().unwrap().is_empty());
}

#[tokio::test]
async fn ambient_capabilities_are_absent() {
    let o = run_simple(
        "return [typeof require, typeof process, typeof setTimeout, typeof setInterval,\n\
                 typeof fetch, typeof performance, typeof XMLHttpRequest, typeof std, typeof os];",
    )
    .await;
    assert_eq!(completed(&o.status), &json!(vec!["undefined"; 9]));

    let o = run_simple(
        "try { await import('fs'); return 'loaded'; } catch (e) { return 'failed: ' + e.message; }",
    )
    .await;
    let v = completed(&o.status).as_str().unwrap().to_owned();
    assert!(v.starts_with("failed: "), "{v}");

    let o = run_simple("require('fs');").await;
    assert_eq!(failed(&o.status).kind, ScriptErrorKind::Thrown);
}

#[tokio::test]
async fn the_tools_proxy_cannot_be_enumerated() {
    let host = Arc::new(TestHost::default());
    let o = run_with(
        "const keys = [];\n\
         for (const k in tools) keys.push(k);\n\
         for (const k in tools.github) keys.push(k);\n\
         return [Object.keys(tools), Reflect.ownKeys(tools), Object.getOwnPropertyNames(tools.a),\n\
                 keys, JSON.stringify(tools) === undefined, 'github' in tools,\n\
                 Object.getOwnPropertyDescriptor(tools, 'github') === undefined,\n\
                 typeof tools.github.issues.create, String(tools.github)];",
        host.clone(),
        &quick_limits(),
    )
    .await;
    assert_eq!(
        completed(&o.status),
        &json!([
            [],
            [],
            [],
            [],
            true,
            false,
            true,
            "function",
            "[tools.github]"
        ])
    );
    // Awaiting a path (which probes `then`) must not call anything.
    let o = run_with(
        "const t = await tools.a.b; return typeof t;",
        host.clone(),
        &quick_limits(),
    )
    .await;
    assert_eq!(completed(&o.status), &json!("function"));
    assert!(host.calls.lock().unwrap().is_empty());
}

#[tokio::test]
async fn console_output_is_captured_with_levels() {
    let o = run_simple(
        "console.log('hello', {a: 1}, [1, 2], 3);\n\
         console.info('i'); console.warn('w'); console.error('e'); console.debug('d');\n\
         return 0;",
    )
    .await;
    let got: Vec<(&str, &str)> = o
        .logs
        .iter()
        .map(|l| (l.level.as_str(), l.message.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("log", "hello {\"a\":1} [1,2] 3"),
            ("info", "i"),
            ("warn", "w"),
            ("error", "e"),
            ("debug", "d")
        ]
    );
}

#[tokio::test]
async fn console_output_is_truncated_at_the_limit() {
    let limits = Limits {
        max_log_bytes: 100,
        ..quick_limits()
    };
    let o = run_with(
        "for (let i = 0; i < 100; i++) console.log('line ' + i);\nreturn 'done';",
        Arc::new(TestHost::default()),
        &limits,
    )
    .await;
    assert_eq!(completed(&o.status), &json!("done"));
    let total: usize = o.logs.iter().map(|l| l.message.len()).sum();
    assert!(o.logs.len() < 100);
    assert!(o.logs.last().unwrap().message.contains("truncated"));
    assert!(total < 100 + 80, "{total}");
}

#[tokio::test]
async fn math_random_and_date_are_pinned() {
    let src = "return [Math.random(), Math.random(), Date.now(), new Date().getTime(),\n\
                       new Date(0).getTime(), typeof Date(), new Date() instanceof Date];";
    let a = run_simple(src).await;
    let b = run_simple(src).await;
    let va = completed(&a.status).clone();
    assert_eq!(Some(&va), Some(completed(&b.status)));
    assert_ne!(va[0], va[1]);
    assert_eq!(va[2], json!(1_700_000_000_000u64));
    assert_eq!(va[3], json!(1_700_000_000_000u64));
    assert_eq!(va[4], json!(0));
    assert_eq!(va[5], json!("string"));
    assert_eq!(va[6], json!(true));

    // Another seed gives another sequence.
    let det = toolshed_sandbox::Determinism {
        seed: 43,
        now_ms: 5.0,
    };
    let c = toolshed_sandbox::run(src, Arc::new(TestHost::default()), &quick_limits(), det).await;
    let vc = completed(&c.status);
    assert_ne!(vc[0], va[0]);
    assert_eq!(vc[2], json!(5));
}

#[tokio::test]
async fn each_script_gets_a_fresh_context() {
    let o = run_simple("globalThis.leak = 1; Object.prototype.polluted = 2; return 1;").await;
    assert_eq!(completed(&o.status), &json!(1));
    let o = run_simple("return [typeof leak, ({}).polluted === undefined];").await;
    assert_eq!(completed(&o.status), &json!(["undefined", true]));
}

#[tokio::test]
async fn deadlock_is_detected() {
    let o = run_simple("await new Promise(() => {});\nreturn 1;").await;
    let e = failed(&o.status);
    assert_eq!(e.kind, ScriptErrorKind::Deadlock);
    assert!(e.message.contains("never settle"), "{}", e.message);
}

#[tokio::test]
async fn outcome_serializes_to_camel_case_json() {
    let o = run_simple("console.log('x'); return {ok: true};").await;
    let v = serde_json::to_value(&o).unwrap();
    assert_eq!(v["status"], json!({"completed": {"ok": true}}));
    assert_eq!(v["logs"][0], json!({"level": "log", "message": "x"}));
    assert!(v["elapsed"].is_number());
}

#[tokio::test]
async fn a_nul_character_in_the_source_is_a_syntax_error_at_its_position() {
    // Found by the fuzz target: the source `\0\0\x04` ended as an internal error.
    let o = run_simple("\0\0\u{4}").await;
    let Status::Failed(e) = &o.status else {
        panic!("{:?}", o.status)
    };
    assert_eq!(e.kind, ScriptErrorKind::Syntax, "{e:?}");
    assert!(e.message.contains("NUL character"), "{}", e.message);
    assert_eq!((e.line, e.column), (Some(1), Some(1)));
    let o = run_simple("const a = 1;\nreturn 'x\0';").await;
    let Status::Failed(e) = &o.status else {
        panic!("{:?}", o.status)
    };
    assert_eq!(
        (e.kind, e.line, e.column),
        (ScriptErrorKind::Syntax, Some(2), Some(10))
    );
}
