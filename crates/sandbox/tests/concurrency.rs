//! Many runs at once on a multi-thread runtime, hostile and normal mixed.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{det, TestHost};
use serde_json::json;
use toolshed_sandbox::{run, Limits, ScriptErrorKind, Status};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_scripts_at_once_all_finish_correctly() {
    let limits = Limits {
        // Generous: many CPU-hungry scripts share 2 cores (and tests may run unoptimized).
        wall_clock: Duration::from_secs(20),
        memory_bytes: 8 * 1024 * 1024,
        ..Limits::default()
    };
    let host = Arc::new(TestHost::default());
    let start = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..100u32 {
        let (src, expect): (String, Option<ScriptErrorKind>) = match i % 5 {
            0 => ("while (true) {}".into(), Some(ScriptErrorKind::Timeout)),
            1 => (
                "const a = []; while (true) a.push('y'.repeat(4096) + a.length);".into(),
                Some(ScriptErrorKind::MemoryLimit),
            ),
            2 => (
                "function f() { return f() + 1; } f();".into(),
                Some(ScriptErrorKind::StackOverflow),
            ),
            3 => ("let x = ;".into(), Some(ScriptErrorKind::Syntax)),
            _ => (
                format!("const r = await tools.slow.job({{i: {i}}});\nreturn r.args.i;"),
                None,
            ),
        };
        let host = host.clone();
        let mut limits = limits.clone();
        if i % 5 == 0 {
            // Spinners stop early so they do not starve the others on 2 cores.
            limits.wall_clock = Duration::from_secs(1);
        }
        tasks.push(tokio::spawn(async move {
            (i, expect, run(&src, host, &limits, det()).await)
        }));
    }
    for t in tasks {
        let (i, expect, o) = t.await.unwrap();
        match expect {
            Some(kind) => match &o.status {
                Status::Failed(e) => assert_eq!(e.kind, kind, "script {i}: {e:?}"),
                other => panic!("script {i}: expected {kind:?}, got {other:?}"),
            },
            None => assert_eq!(o.status, Status::Completed(json!(i)), "script {i}"),
        }
    }
    assert!(
        start.elapsed() < Duration::from_secs(30),
        "{:?}",
        start.elapsed()
    );

    // The sandbox still works normally afterwards.
    let o = run(
        "return await tools.demo.echo({ok: 1});",
        host,
        &limits,
        det(),
    )
    .await;
    let Status::Completed(v) = o.status else {
        panic!("normal script failed: {:?}", o.status)
    };
    assert_eq!(v["args"], json!({"ok": 1}));
}

#[tokio::test(flavor = "current_thread")]
async fn cpu_bound_scripts_do_not_block_the_async_runtime() {
    // On a single-threaded runtime, a script running on the runtime's own thread would freeze
    // every other task until its wall clock ran out.
    let limits = Limits {
        wall_clock: Duration::from_secs(4),
        ..Limits::default()
    };
    let host = Arc::new(TestHost::default());
    let spinner = {
        let (host, limits) = (host.clone(), limits.clone());
        tokio::spawn(async move { run("while (true) {}", host, &limits, det()).await })
    };
    let t = Instant::now();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let normal = run("return await tools.demo.echo({});", host, &limits, det()).await;
    assert!(matches!(normal.status, Status::Completed(_)));
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    assert!(!spinner.is_finished());
    let o = spinner.await.unwrap();
    assert!(matches!(o.status, Status::Failed(ref e) if e.kind == ScriptErrorKind::Timeout));
}

#[tokio::test]
async fn dropping_the_future_cancels_the_run() {
    let limits = Limits {
        wall_clock: Duration::from_secs(20),
        ..Limits::default()
    };
    let host = Arc::new(TestHost::default());
    let fut = run("while (true) {}", host.clone(), &limits, det());
    let res = tokio::time::timeout(Duration::from_millis(100), fut).await;
    assert!(res.is_err());
    // The pool thread is released promptly: a new run still completes quickly.
    let o = run("return 1;", host, &limits, det()).await;
    assert_eq!(o.status, Status::Completed(json!(1)));
}
