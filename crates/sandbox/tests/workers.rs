//! Worker processes: the system-call filter, preemption of built-ins that never yield, kills
//! and replacements, cancellation, the pipe protocol (seq order, suspend), admission control.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{
    assert_children_idle, children, det, run_in, worker_sandbox, JournalHandle, JournalHost,
    TestHost,
};
use serde_json::json;
use toolshed_sandbox::{Limits, ScriptErrorKind, Status};

fn short() -> Limits {
    Limits {
        wall_clock: Duration::from_secs(1),
        cpu_time: Duration::from_millis(500),
        memory_bytes: 32 * 1024 * 1024,
        ..Limits::default()
    }
}

fn kind(status: &Status) -> ScriptErrorKind {
    match status {
        Status::Failed(e) => e.kind,
        other => panic!("expected Failed, got {other:?}"),
    }
}

#[test]
fn the_worker_filter_refuses_files_sockets_programs_and_threads() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_toolshed-sandbox-worker"))
        .args([
            toolshed_sandbox::worker::ARG,
            toolshed_sandbox::worker::SELF_TEST_ARG,
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    for probe in ["open", "create", "socket", "execve", "thread", "setrlimit"] {
        assert!(text.contains(&format!("{probe}: refused")), "{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_builtin_that_never_yields_is_killed_and_its_worker_replaced() {
    let sandbox = worker_sandbox(1, 4);
    let host = Arc::new(TestHost::default());
    // Warm up: the worker is ready and runs scripts.
    let o = run_in(&sandbox, "return 1 + 1;", host.clone(), &short()).await;
    assert_eq!(o.status, Status::Completed(json!(2)));
    let before = sandbox.idle_worker_pids();
    assert_eq!(before.len(), 1);
    let t = Instant::now();
    let o = run_in(
        &sandbox,
        "Array.prototype.reverse.call({length: 2**53-1}); return 'unreachable';",
        host.clone(),
        &short(),
    )
    .await;
    let took = t.elapsed();
    let k = kind(&o.status);
    assert!(
        matches!(k, ScriptErrorKind::Timeout | ScriptErrorKind::CpuLimit),
        "{:?}",
        o.status
    );
    assert!(took < Duration::from_millis(1600), "{took:?}");
    if let Status::Failed(e) = &o.status {
        assert!(
            e.message.contains("worker process was stopped"),
            "{}",
            e.message
        );
    }
    // The killed worker is gone (reaped), a fresh one took its place, and scripts still run.
    let killed = before[0];
    assert!(!std::path::Path::new(&format!("/proc/{killed}")).exists());
    let after = sandbox.idle_worker_pids();
    assert_eq!(after.len(), 1);
    assert_ne!(after[0], killed);
    let o = run_in(
        &sandbox,
        "return await tools.demo.echo({ok: 1});",
        host,
        &short(),
    )
    .await;
    let Status::Completed(v) = o.status else {
        panic!("{:?}", o.status)
    };
    assert_eq!(v["args"], json!({"ok": 1}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cpu_budgets_kill_builtins_before_the_wall_clock() {
    let sandbox = worker_sandbox(1, 1);
    let lim = Limits {
        wall_clock: Duration::from_secs(20),
        cpu_time: Duration::from_millis(300),
        ..short()
    };
    let t = Instant::now();
    let o = run_in(
        &sandbox,
        "[].indexOf.call({length: 2**53-1}, 'x');",
        Arc::new(TestHost::default()),
        &lim,
    )
    .await;
    assert_eq!(kind(&o.status), ScriptErrorKind::CpuLimit, "{:?}", o.status);
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    // Ordinary loops still end gracefully through the interrupt handler.
    let o = run_in(
        &sandbox,
        "while (true) {}",
        Arc::new(TestHost::default()),
        &lim,
    )
    .await;
    let Status::Failed(e) = &o.status else {
        panic!("{:?}", o.status)
    };
    assert_eq!(e.kind, ScriptErrorKind::CpuLimit);
    assert!(!e.message.contains("worker process"), "{}", e.message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_inside_workers_report_the_right_kinds() {
    let sandbox = worker_sandbox(2, 4);
    let host = Arc::new(TestHost::default());
    let cases = [
        (
            "const a = []; while (true) a.push('x'.repeat(1024) + a.length);",
            ScriptErrorKind::MemoryLimit,
        ),
        (
            "function f() { return f() + 1; } f();",
            ScriptErrorKind::StackOverflow,
        ),
        ("let x = ;", ScriptErrorKind::Syntax),
        (
            "return await tools.never.answers({});",
            ScriptErrorKind::Timeout,
        ),
        ("throw new Error('no')", ScriptErrorKind::Thrown),
    ];
    let lim = Limits {
        wall_clock: Duration::from_secs(10),
        cpu_time: Duration::from_secs(10),
        memory_bytes: 8 * 1024 * 1024,
        ..Limits::default()
    };
    for (src, want) in cases {
        let lim = if want == ScriptErrorKind::Timeout {
            short()
        } else {
            lim.clone()
        };
        let o = run_in(&sandbox, src, host.clone(), &lim).await;
        assert_eq!(kind(&o.status), want, "{src}: {:?}", o.status);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_calls_cross_the_pipe_in_seq_order_and_suspend_as_before() {
    let sandbox = worker_sandbox(1, 1);
    let limits = Limits {
        wall_clock: Duration::from_secs(5),
        ..Limits::default()
    };
    let src = "const [a, b] = await Promise.all([tools.r.one({}), tools.r.two({})]);\n\
               const c = await tools.danger.drop({});\n\
               return [a.n, b.n, c.n];";
    let host = JournalHost::new();
    let o = run_in(
        &sandbox,
        src,
        Arc::new(JournalHandle(host.clone())),
        &limits,
    )
    .await;
    assert_eq!(o.status, Status::Suspended { seq: 2 });
    assert_eq!(o.calls, 3);
    host.approved
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let o = run_in(
        &sandbox,
        src,
        Arc::new(JournalHandle(host.clone())),
        &limits,
    )
    .await;
    assert_eq!(o.status, Status::Completed(json!([0, 10, 20])));
    let executed = host.executed.lock().unwrap().clone();
    assert_eq!(
        executed.iter().filter(|(s, _)| *s < 2).count(),
        2,
        "{executed:?}"
    );
    // Console output and errors from tools come back too.
    let o = run_in(
        &sandbox,
        "console.log('hi', 1); try { await tools.fail.x({}); } catch (e) { return [e.code, e.data]; }",
        Arc::new(TestHost::default()),
        &limits,
    )
    .await;
    assert_eq!(
        o.status,
        Status::Completed(json!(["boom", {"why": "test"}]))
    );
    assert_eq!(o.logs[0].message, "hi 1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_future_kills_the_worker() {
    let sandbox = worker_sandbox(1, 1);
    let host = Arc::new(TestHost::default());
    let limits = Limits {
        wall_clock: Duration::from_secs(30),
        cpu_time: Duration::from_secs(30),
        ..Limits::default()
    };
    let o = run_in(&sandbox, "return 1;", host.clone(), &limits).await;
    assert_eq!(o.status, Status::Completed(json!(1)));
    let pid = sandbox.idle_worker_pids()[0];
    let fut = run_in(
        &sandbox,
        "[].lastIndexOf.call({length: 2**53-1}, 1);",
        host.clone(),
        &limits,
    );
    assert!(tokio::time::timeout(Duration::from_millis(300), fut)
        .await
        .is_err());
    let t = Instant::now();
    while std::path::Path::new(&format!("/proc/{pid}")).exists()
        && children().iter().any(|(p, s, _)| *p == pid && *s != 'Z')
    {
        assert!(
            t.elapsed() < Duration::from_secs(2),
            "worker {pid} still running"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_children_idle(Duration::from_millis(200), Duration::from_secs(3)).await;
    let o = run_in(&sandbox, "return 2;", host, &limits).await;
    assert_eq!(o.status, Status::Completed(json!(2)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_beyond_the_slots_and_the_queue_are_overloaded() {
    let sandbox = Arc::new(worker_sandbox(2, 3));
    let limits = Limits {
        wall_clock: Duration::from_secs(10),
        ..Limits::default()
    };
    let host = Arc::new(TestHost::default());
    let mut tasks = Vec::new();
    for i in 0..9 {
        let (sandbox, host, limits) = (sandbox.clone(), host.clone(), limits.clone());
        tasks.push(tokio::spawn(async move {
            let permit = sandbox.admit().await?;
            let src = format!("const r = await tools.slow.op({{i: {i}}}); return r.args.i;");
            Ok::<_, toolshed_sandbox::Overloaded>(
                sandbox.run(permit, &src, host, &limits, det()).await,
            )
        }));
        // Admission is decided in arrival order.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let (mut done, mut refused) = (0, 0);
    for t in tasks {
        match t.await.unwrap() {
            Ok(o) => {
                assert!(matches!(o.status, Status::Completed(_)), "{:?}", o.status);
                done += 1;
            }
            Err(e) => {
                assert_eq!((e.running, e.queued), (2, 3));
                assert!(e.to_string().contains("overloaded"), "{e}");
                refused += 1;
            }
        }
    }
    assert_eq!((done, refused), (5, 4));
    // Slots free up again afterwards.
    let o = run_in(&sandbox, "return 3;", host, &limits).await;
    assert_eq!(o.status, Status::Completed(json!(3)));
}

/// A host whose every call answers after 1.5 s.
struct LateHost;

impl toolshed_sandbox::Host for LateHost {
    fn call(
        &self,
        call: toolshed_sandbox::HostCall,
    ) -> futures::future::BoxFuture<'static, toolshed_sandbox::HostReply> {
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(1_500)).await;
            toolshed_sandbox::HostReply::Ok(json!({"seq": call.seq}))
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_worker_a_long_tool_outlasts_the_wall_clock_and_the_kill() {
    let sandbox = worker_sandbox(1, 4);
    let mut limits = short();
    limits.long_calls_ms.insert("long.run".into(), 4_000);
    // 1.5 s answers against a 1 s wall clock: the worker's deadline and the host's kill both
    // moved for the long tool.
    let o = run_in(
        &sandbox,
        "const a = await tools.long.run({}); const b = await tools.long.run({}); return [a.seq, b.seq];",
        Arc::new(LateHost),
        &limits,
    )
    .await;
    assert_eq!(o.status, Status::Completed(json!([0, 1])));
    let o = run_in(
        &sandbox,
        "return await tools.other.run({});",
        Arc::new(LateHost),
        &limits,
    )
    .await;
    assert_eq!(kind(&o.status), ScriptErrorKind::Timeout);
}
