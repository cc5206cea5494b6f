//! The pause protocol over loopback HTTP (plain binary, `cargo bench -p toolshed-http --bench
//! pauses`), on a SQLite file, scripts in worker processes (this binary doubles as the worker):
//!
//! 1. One client tool round trip: `POST /v1/scripts` with a client tool call (the pause is
//!    stored, 202 `tool_call_required`), then `POST /v1/executions/{id}/tool-results` (the
//!    script is replayed from its journal, continues and completes, 200). p50/p99 of each step
//!    and of the whole round trip.
//! 2. The fast path through HTTP for comparison: `POST /v1/scripts` of a script that never
//!    pauses.
//!
//! `PAUSES_BENCH_N` sets the number of round trips (default 1000).

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use toolshed_core::{
    Annotations, CatalogBuilder, Policy, Principal, Role, SharedCatalog, Tool, ToolDef, ToolPath,
};
use toolshed_engine::{Engine, EngineConfig, WorkerCommand};
use toolshed_identity::KeyRing;
use toolshed_store::Store;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn report(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    println!(
        "{name}: n={} p50={:.2}ms p99={:.2}ms",
        samples.len(),
        percentile(&samples, 0.50).as_secs_f64() * 1e3,
        percentile(&samples, 0.99).as_secs_f64() * 1e3
    );
}

async fn serve(dir: &std::path::Path) -> String {
    let mut b = CatalogBuilder::new();
    b.add_tool(Tool::from_fn(
        ToolDef::new(ToolPath::parse("rows.query").unwrap(), "Query", "Rows.")
            .with_input(json!({"type": "object"}))
            .with_annotations(Annotations::READ_ONLY),
        |_ctx, _args| async { Ok(json!({"rows": [1, 2, 3]})) },
    ));
    let policy = Policy::new(
        vec![Role {
            id: "all".into(),
            patterns: vec!["**".into()],
            ..Default::default()
        }],
        vec![Principal {
            id: "bench".into(),
            roles: vec!["all".into()],
        }],
    )
    .unwrap();
    let mut config = EngineConfig::default();
    config.sandbox.max_concurrent = 2;
    let exe = std::env::current_exe().expect("this bench's path");
    config.sandbox.workers = Some(WorkerCommand::new(exe));
    let store = Store::open_dir(dir).await.unwrap();
    let engine = Engine::new(
        Arc::new(SharedCatalog::new(b.build().unwrap())),
        policy,
        store,
        config,
    );
    let keys = KeyRing::new([("k".to_string(), "bench".to_string())], None);
    let app = toolshed_http::router(engine, keys);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    base
}

async fn post(http: &reqwest::Client, url: &str, body: &Value) -> (u16, Value) {
    let r = http
        .post(url)
        .bearer_auth("k")
        .json(body)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

fn main() {
    if toolshed_sandbox::worker::is_worker() {
        toolshed_sandbox::worker::main();
    }
    let n: usize = std::env::var("PAUSES_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let base = serve(dir.path()).await;
        let http = reqwest::Client::new();
        let script = json!({
            "script": "const [c, r] = await Promise.all([tools.client.calculator({a: 2, b: 3}), tools.rows.query({})]); return c.sum + r.rows.length;",
            "clientTools": [{"name": "calculator", "inputSchema": {"type": "object"}}],
        });
        let result = json!({"results": [{"callId": "call_0", "result": {"sum": 5}}]});
        let (mut pause, mut answer, mut whole) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..n + 50 {
            let t0 = Instant::now();
            let (s, v) = post(&http, &format!("{base}/v1/scripts"), &script).await;
            assert_eq!(s, 202, "{v}");
            let id = v["executionId"].as_str().unwrap().to_string();
            let t1 = Instant::now();
            let url = format!("{base}/v1/executions/{id}/tool-results");
            let (s, v) = post(&http, &url, &result).await;
            assert_eq!((s, &v["result"]), (200, &json!(8)), "{v}");
            let t2 = Instant::now();
            if i >= 50 {
                pause.push(t1 - t0);
                answer.push(t2 - t1);
                whole.push(t2 - t0);
            }
        }
        report("POST /v1/scripts until the pause is stored (202)", pause);
        report(
            "client tool round trip: POST tool-results until completed (200)",
            answer,
        );
        report("whole cycle: start, pause, result, completed", whole);

        let fast = json!({"script": "return (await tools.rows.query({})).rows.length"});
        let mut samples = Vec::new();
        for i in 0..n + 50 {
            let t = Instant::now();
            let (s, _) = post(&http, &format!("{base}/v1/scripts"), &fast).await;
            assert_eq!(s, 200);
            if i >= 50 {
                samples.push(t.elapsed());
            }
        }
        report("fast path: POST /v1/scripts, never pauses (200)", samples);
    });
}
