//! Engine benchmarks (plain binary, `cargo bench -p toolshed-engine`):
//!
//! 1. `run_script` with a trivial script calling one read-only tool: p50/p99 latency one at a
//!    time, and scripts per second on a 2-worker runtime; in worker processes (as the
//!    `toolshed` binary runs scripts: this bench binary doubles as the worker, 2 workers) and
//!    in process.
//! 2. Engine overhead per call (resolve, validation, policy, approval gate, audit enqueue; the
//!    handler returns at once): p50/p99.
//! 3. `search_tools` over 10,000 synthetic tools: p50/p99.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use toolshed_core::{
    Annotations, CatalogBuilder, Policy, Principal, Role, SharedCatalog, Tool, ToolDef, ToolPath,
};
use toolshed_engine::{Engine, EngineConfig, Face, WorkerCommand};
use toolshed_store::Store;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn report(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    println!(
        "{name}: n={} p50={:.1}µs p99={:.1}µs",
        samples.len(),
        percentile(&samples, 0.50).as_secs_f64() * 1e6,
        percentile(&samples, 0.99).as_secs_f64() * 1e6
    );
}

const VERBS: [&str; 12] = [
    "list", "get", "create", "update", "delete", "search", "send", "archive", "merge", "sync",
    "export", "import",
];
const NOUNS: [&str; 20] = [
    "issue",
    "repo",
    "user",
    "invoice",
    "payment",
    "order",
    "ticket",
    "message",
    "file",
    "folder",
    "event",
    "calendar",
    "contact",
    "lead",
    "deal",
    "workflow",
    "execution",
    "table",
    "row",
    "comment",
];

fn catalog(extra: usize) -> SharedCatalog {
    let mut b = CatalogBuilder::new();
    b.add_tool(Tool::from_fn(
        ToolDef::new(ToolPath::parse("demo.echo").unwrap(), "Echo", "Returns its input.")
            .with_input(json!({"type": "object", "properties": {"x": {"type": "integer", "minimum": 0}, "note": {"type": "string"}}, "required": ["x"]}))
            .with_annotations(Annotations::READ_ONLY),
        |_ctx, args| async move { Ok(args) },
    ));
    for i in 0..extra {
        let verb = VERBS[i % VERBS.len()];
        let noun = NOUNS[(i / VERBS.len()) % NOUNS.len()];
        let ns = format!("svc{}", i / 240);
        let path = format!("{ns}.{noun}s.{verb}_{noun}_{i}");
        b.add_tool(Tool::from_fn(
            ToolDef::new(
                ToolPath::parse(&path).unwrap(),
                format!("{verb} {noun} {i}"),
                format!("{verb} a {noun} in service {ns}; variant {i} with extra options for {noun} records."),
            )
            .with_input(json!({"type": "object", "properties": {"id": {"type": "string", "description": format!("The {noun} id")}, "limit": {"type": "integer"}}})),
            |_ctx, _args| async { Ok(json!({})) },
        ));
    }
    SharedCatalog::new(b.build().unwrap())
}

fn policy() -> Policy {
    Policy::new(
        vec![Role {
            id: "all".into(),
            name: "All".into(),
            patterns: vec!["*".into()],
            ..Default::default()
        }],
        vec![Principal {
            id: "bench".into(),
            roles: vec!["all".into()],
        }],
    )
    .unwrap()
}

async fn engine(extra: usize, workers: bool) -> Engine {
    let store = Store::open("sqlite::memory:").await.unwrap();
    let mut config = EngineConfig::default();
    config.sandbox.max_concurrent = 2;
    if workers {
        let exe = std::env::current_exe().expect("this bench's path");
        config.sandbox.workers = Some(WorkerCommand::new(exe));
    }
    Engine::new(Arc::new(catalog(extra)), policy(), store, config)
}

/// 1a and 1b for one way of running scripts.
async fn bench_scripts(workers: bool) {
    let label = if workers {
        "worker processes"
    } else {
        "in process"
    };
    let e = engine(0, workers).await;
    let caller = e.caller("bench", Face::Mcp);
    let script = "return await tools.demo.echo({x: 1})";

    // 1a. run_script latency, one at a time.
    for _ in 0..200 {
        e.run_script(&caller, script).await.unwrap();
    }
    let mut samples = Vec::with_capacity(3000);
    for _ in 0..3000 {
        let t = Instant::now();
        let out = e.run_script(&caller, script).await.unwrap();
        samples.push(t.elapsed());
        debug_assert!(matches!(out, toolshed_engine::Outcome::Completed { .. }));
    }
    report(
        &format!("run_script (trivial script, one read-only call), {label}, sequential"),
        samples,
    );

    // 1b. run_script throughput on 2 worker threads.
    let done = Arc::new(AtomicUsize::new(0));
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let e = e.clone();
        let caller = caller.clone();
        let done = done.clone();
        tasks.push(tokio::spawn(async move {
            while Instant::now() < deadline {
                e.run_script(&caller, script).await.unwrap();
                done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    let start = Instant::now();
    for t in tasks {
        t.await.unwrap();
    }
    let n = done.load(Ordering::Relaxed);
    println!(
        "run_script throughput, {label}, 2 worker threads, 16 concurrent: {n} scripts in {:.2}s = {:.0} scripts/s",
        start.elapsed().as_secs_f64(),
        n as f64 / start.elapsed().as_secs_f64()
    );
}

fn main() {
    if toolshed_sandbox::worker::is_worker() {
        toolshed_sandbox::worker::main();
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        bench_scripts(true).await;
        bench_scripts(false).await;
        let e = engine(0, false).await;
        let caller = e.caller("bench", Face::Mcp);

        // 2. Engine overhead per call (handler returns immediately).
        let args = json!({"x": 5, "note": "hello"});
        for _ in 0..1000 {
            e.call(&caller, "demo.echo", args.clone()).await.unwrap();
        }
        let mut samples = Vec::with_capacity(20000);
        for _ in 0..20000 {
            let a = args.clone();
            let t = Instant::now();
            e.call(&caller, "demo.echo", a).await.unwrap();
            samples.push(t.elapsed());
        }
        report(
            "engine call overhead (resolve+validate+policy+gate+audit, no-op handler)",
            samples,
        );
        e.flush_audit().await;

        // 3. search over 10,000 synthetic tools.
        let big = engine(10_000, false).await;
        let caller = big.caller("bench", Face::Mcp);
        let t = Instant::now();
        big.warm_search();
        println!(
            "search index build over 10,001 tools: {:.1}ms",
            t.elapsed().as_secs_f64() * 1e3
        );
        let queries = [
            "create an invoice",
            "list github issues",
            "delete a calendar event",
            "send message to contact",
            "export workflow executions",
            "merge deal records",
            "archive old files in folder",
            "sync users",
        ];
        let mut samples = Vec::with_capacity(4000);
        for i in 0..4000 {
            let q = queries[i % queries.len()];
            let t = Instant::now();
            let a = big.search(&caller, q, 10, None);
            samples.push(t.elapsed());
            assert!(a.total > 0);
        }
        report("search_tools over 10,001 tools (limit 10)", samples);
    });
}
