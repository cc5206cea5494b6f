//! Latency and throughput of trivial scripts against an instant in-memory host, in process
//! ([`run`]) and in worker processes ([`Sandbox`] with the crate's worker binary, 2 workers:
//! admission, a pipe round trip per tool call, and the result frame included).
//!
//! Run with `cargo bench -p toolshed-sandbox`. Set `SANDBOX_BENCH_N` to change the number of
//! scripts per phase (default 5000).

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use futures::stream::{self, StreamExt};
use futures::FutureExt;
use toolshed_sandbox::{
    run, Determinism, Host, HostCall, HostReply, Limits, RunOutcome, Sandbox, SandboxConfig,
    Status, WorkerCommand,
};

const SCRIPT: &str = "return await tools.demo.echo({x: 1})";

struct Echo;

impl Host for Echo {
    fn call(&self, call: HostCall) -> BoxFuture<'static, HostReply> {
        futures::future::ready(HostReply::Ok(call.args)).boxed()
    }
}

fn det() -> Determinism {
    Determinism {
        seed: 7,
        now_ms: 1_700_000_000_000.0,
    }
}

fn check(status: &Status) {
    match status {
        Status::Completed(v) if v["x"] == 1 => {}
        other => panic!("unexpected outcome: {other:?}"),
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx]
}

/// How the bench runs one script.
#[derive(Clone, Copy)]
enum Mode {
    InProcess,
    Workers(&'static Sandbox),
}

async fn run_one(mode: Mode, host: Arc<dyn Host>, limits: &Limits) -> RunOutcome {
    match mode {
        Mode::InProcess => run(SCRIPT, host, limits, det()).await,
        Mode::Workers(sb) => {
            let permit = sb.admit().await.expect("admitted");
            sb.run(permit, SCRIPT, host, limits, det()).await
        }
    }
}

fn main() {
    let n: usize = std::env::var("SANDBOX_BENCH_N")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let sandbox: &'static Sandbox = rt.block_on(async {
        Box::leak(Box::new(Sandbox::new(SandboxConfig {
            workers: Some(WorkerCommand::new(env!(
                "CARGO_BIN_EXE_toolshed-sandbox-worker"
            ))),
            max_concurrent: 2,
            max_queued: 1 << 20,
        })))
    });
    println!("== in process ==");
    bench(&rt, n, Mode::InProcess);
    println!("== worker processes (2) ==");
    bench(&rt, n, Mode::Workers(sandbox));
}

fn bench(rt: &tokio::runtime::Runtime, n: usize, mode: Mode) {
    let host: Arc<dyn Host> = Arc::new(Echo);
    let limits = Limits::default();

    // Warm-up: spin up pool threads and fault in QuickJS code pages.
    rt.block_on(async {
        for _ in 0..200 {
            check(&run_one(mode, host.clone(), &limits).await.status);
        }
    });

    // Sequential latency.
    let mut lat = Vec::with_capacity(n);
    let t0 = Instant::now();
    rt.block_on(async {
        for _ in 0..n {
            let t = Instant::now();
            let o = run_one(mode, host.clone(), &limits).await;
            lat.push(t.elapsed());
            check(&o.status);
        }
    });
    let seq_total = t0.elapsed();
    lat.sort();
    println!(
        "sequential: n={n} p50={:?} p90={:?} p99={:?} max={:?} ({:.0} scripts/s)",
        percentile(&lat, 0.50),
        percentile(&lat, 0.90),
        percentile(&lat, 0.99),
        lat[lat.len() - 1],
        n as f64 / seq_total.as_secs_f64()
    );

    // Concurrent throughput on the 2-worker runtime.
    for concurrency in [2usize, 8, 64] {
        let t0 = Instant::now();
        rt.block_on(async {
            let handles: Vec<_> = stream::iter(0..n)
                .map(|_| {
                    let host = host.clone();
                    let limits = limits.clone();
                    tokio::spawn(async move { run_one(mode, host, &limits).await })
                })
                .buffer_unordered(concurrency)
                .collect()
                .await;
            for o in handles {
                check(&o.expect("task").status);
            }
        });
        let el = t0.elapsed();
        println!(
            "concurrent: n={n} in-flight={concurrency} total={el:?} => {:.0} scripts/s",
            n as f64 / el.as_secs_f64()
        );
    }
}
