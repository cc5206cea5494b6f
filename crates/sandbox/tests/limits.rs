//! Resource limits: wall clock (CPU loops and waits on host calls), CPU time spent executing
//! JavaScript (waits and host work excluded), memory, stack and the
//! number of tool calls.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{run_with, TestHost};
use serde_json::json;
use toolshed_sandbox::{Limits, ScriptErrorKind, Status};

fn limits() -> Limits {
    Limits {
        wall_clock: Duration::from_millis(500),
        memory_bytes: 16 * 1024 * 1024,
        ..Limits::default()
    }
}

fn kind(status: &Status) -> ScriptErrorKind {
    match status {
        Status::Failed(e) => e.kind,
        other => panic!("expected Failed, got {other:?}"),
    }
}

#[tokio::test]
async fn cpu_loops_time_out_within_the_limit() {
    let start = Instant::now();
    let o = run_with("while (true) {}", Arc::new(TestHost::default()), &limits()).await;
    let took = start.elapsed();
    assert_eq!(kind(&o.status), ScriptErrorKind::Timeout);
    assert!(took >= Duration::from_millis(500), "{took:?}");
    assert!(took < Duration::from_secs(3), "{took:?}");
    if let Status::Failed(e) = &o.status {
        assert!(e.message.contains("500 ms"), "{}", e.message);
    }
}

#[tokio::test]
async fn timeouts_cannot_be_caught() {
    let o = run_with(
        "try { while (true) {} } catch (e) { return 'caught'; }",
        Arc::new(TestHost::default()),
        &limits(),
    )
    .await;
    assert_eq!(kind(&o.status), ScriptErrorKind::Timeout);
}

#[tokio::test]
async fn waiting_on_a_host_call_times_out() {
    let start = Instant::now();
    let o = run_with(
        "return await tools.never.answers({});",
        Arc::new(TestHost::default()),
        &limits(),
    )
    .await;
    assert_eq!(kind(&o.status), ScriptErrorKind::Timeout);
    assert!(start.elapsed() < Duration::from_secs(3));
}

/// A host whose `long.*` tools answer after 1.2 s (past a 500 ms wall clock).
struct LongHost;

impl toolshed_sandbox::Host for LongHost {
    fn call(
        &self,
        call: toolshed_sandbox::HostCall,
    ) -> futures::future::BoxFuture<'static, toolshed_sandbox::HostReply> {
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(1_200)).await;
            toolshed_sandbox::HostReply::Ok(json!({"seq": call.seq}))
        })
    }
}

fn with_long(tool: &str, ms: u64) -> Limits {
    let mut l = limits();
    l.long_calls_ms.insert(tool.into(), ms);
    l
}

#[tokio::test]
async fn a_call_to_a_long_tool_moves_the_deadline_and_nothing_else_does() {
    // The long tool's own time (3 s) covers its 1.2 s answer past the 500 ms wall clock.
    let o = run_with(
        "const a = await tools.long.run({}); return a.seq;",
        Arc::new(LongHost),
        &with_long("long.run", 3_000),
    )
    .await;
    assert_eq!(o.status, Status::Completed(json!(0)));
    // Another tool as slow is still held to the wall clock.
    let o = run_with(
        "return await tools.other.run({});",
        Arc::new(LongHost),
        &with_long("long.run", 3_000),
    )
    .await;
    assert_eq!(kind(&o.status), ScriptErrorKind::Timeout);
    // The moved deadline still ends a loop after the call: at the call's start plus 1.5 s.
    let start = Instant::now();
    let o = run_with(
        "await tools.long.run({}); while (true) {}",
        Arc::new(LongHost),
        &with_long("long.run", 1_500),
    )
    .await;
    assert_eq!(kind(&o.status), ScriptErrorKind::Timeout);
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(1_500) && took < Duration::from_secs(4),
        "{took:?}"
    );
    // Many long calls in turn: the deadline never passes the wall clock plus the longest one
    // (0.5 s + 1.5 s), though each call moves it.
    let start = Instant::now();
    let o = run_with(
        "for (;;) { await tools.long.run({}); }",
        Arc::new(LongHost),
        &with_long("long.run", 1_500),
    )
    .await;
    assert_eq!(kind(&o.status), ScriptErrorKind::Timeout);
    let took = start.elapsed();
    assert!(took < Duration::from_millis(3_500), "{took:?}");
}

#[tokio::test]
async fn memory_bombs_hit_the_memory_limit() {
    for src in [
        "const a = []; while (true) a.push('x'.repeat(1024) + a.length);",
        "const a = []; while (true) a.push(new Array(100000).fill(1.5));",
        "const a = []; for (;;) a.push({i: a.length, pad: [1, 2, 3, 4]});",
    ] {
        let o = run_with(
            src,
            Arc::new(TestHost::default()),
            &Limits {
                wall_clock: Duration::from_secs(10),
                ..limits()
            },
        )
        .await;
        assert_eq!(
            kind(&o.status),
            ScriptErrorKind::MemoryLimit,
            "{src}: {:?}",
            o.status
        );
        if let Status::Failed(e) = &o.status {
            assert!(e.message.contains("out of memory"), "{}", e.message);
        }
    }
}

#[tokio::test]
async fn deep_recursion_is_a_stack_overflow() {
    let o = run_with(
        "function f(n) { return f(n + 1) + 1; }\nreturn f(0);",
        Arc::new(TestHost::default()),
        &limits(),
    )
    .await;
    assert_eq!(kind(&o.status), ScriptErrorKind::StackOverflow);
    // Within the limit, recursion is fine.
    let o = run_with(
        "function f(n) { return n === 0 ? 0 : f(n - 1) + 1; }\nreturn f(100);",
        Arc::new(TestHost::default()),
        &limits(),
    )
    .await;
    assert_eq!(o.status, Status::Completed(json!(100)));
}

#[tokio::test]
async fn the_call_beyond_the_limit_rejects_and_fails_the_script() {
    let lim = Limits {
        max_tool_calls: 3,
        ..limits()
    };
    let host = Arc::new(TestHost::default());
    let o = run_with(
        "for (let i = 0; i < 5; i++) await tools.a.b({i});\nreturn 'unreachable';",
        host.clone(),
        &lim,
    )
    .await;
    assert_eq!(kind(&o.status), ScriptErrorKind::CallLimit);
    assert_eq!(o.calls, 3);
    assert_eq!(host.calls.lock().unwrap().len(), 3);

    let o = run_with(
        "for (let i = 0; i < 3; i++) await tools.a.b({i});\n\
         try { await tools.a.b({}); } catch (e) { return [e instanceof Error, e.code]; }",
        Arc::new(TestHost::default()),
        &lim,
    )
    .await;
    assert_eq!(o.status, Status::Completed(json!([true, "call_limit"])));
    assert_eq!(o.calls, 3);
}

#[tokio::test]
async fn busy_loops_hit_the_cpu_limit_before_the_wall_clock() {
    let lim = Limits {
        wall_clock: Duration::from_secs(20),
        cpu_time: Duration::from_millis(300),
        ..limits()
    };
    let start = Instant::now();
    let o = run_with("while (true) {}", Arc::new(TestHost::default()), &lim).await;
    let took = start.elapsed();
    assert_eq!(kind(&o.status), ScriptErrorKind::CpuLimit, "{:?}", o.status);
    assert!(took >= Duration::from_millis(300), "{took:?}");
    assert!(took < Duration::from_secs(10), "{took:?}");
    if let Status::Failed(e) = &o.status {
        assert!(
            e.message.contains("CPU-time limit of 300 ms"),
            "{}",
            e.message
        );
    }
    // Cannot be caught either.
    let o = run_with(
        "try { while (true) {} } catch (e) { return 'caught'; }",
        Arc::new(TestHost::default()),
        &lim,
    )
    .await;
    assert_eq!(kind(&o.status), ScriptErrorKind::CpuLimit);
}

#[tokio::test]
async fn waiting_on_slow_tools_does_not_use_the_cpu_budget() {
    // Four sequential 300 ms tool calls: 1.2 s of waiting against a 150 ms CPU budget.
    let lim = Limits {
        wall_clock: Duration::from_secs(20),
        cpu_time: Duration::from_millis(150),
        ..limits()
    };
    let o = run_with(
        "let n = 0;\nfor (let i = 0; i < 4; i++) { await tools.slow.op({i}); n++; }\nreturn n;",
        Arc::new(TestHost::default()),
        &lim,
    )
    .await;
    assert_eq!(o.status, Status::Completed(json!(4)));
    assert!(o.elapsed >= Duration::from_millis(1200), "{:?}", o.elapsed);
}

/// A host whose handler burns CPU on the sandbox thread: host work is not the script's.
struct BusyHost;

impl toolshed_sandbox::Host for BusyHost {
    fn call(
        &self,
        _call: toolshed_sandbox::HostCall,
    ) -> futures::future::BoxFuture<'static, toolshed_sandbox::HostReply> {
        Box::pin(async {
            let start = Instant::now();
            let mut x: u64 = 0;
            while start.elapsed() < Duration::from_millis(100) {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
            }
            toolshed_sandbox::HostReply::Ok(json!(x % 2))
        })
    }
}

#[tokio::test]
async fn host_work_is_not_charged_to_the_script() {
    let lim = Limits {
        wall_clock: Duration::from_secs(20),
        cpu_time: Duration::from_millis(150),
        ..limits()
    };
    let o = run_with(
        "for (let i = 0; i < 4; i++) await tools.busy.op({});\nreturn 'done';",
        Arc::new(BusyHost),
        &lim,
    )
    .await;
    assert_eq!(o.status, Status::Completed(json!("done")));
}
