//! Agent-run benchmarks (plain binary, `cargo bench -p toolshed-engine --bench runs`), against
//! the scripted model server (`toolshed_testing::model_server`) answering at once on loopback:
//!
//! 1. Runtime overhead per step, excluding the model: a run of five steps (four tool calls,
//!    then an answer) is timed whole; the same five model requests sent straight to the
//!    server through the same client are timed too; the difference over five is the
//!    overhead of one step (tool call through the engine, journal checkpoint in SQLite,
//!    events). p50/p99 over 300 runs, on a store in a file (as `toolshed serve` keeps it).
//! 2. 100 concurrent runs of five steps each: how many complete, runs per second, and the
//!    process's peak resident memory.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use toolshed_core::{
    Annotations, CatalogBuilder, Policy, Principal, Role, SharedCatalog, Tool, ToolDef, ToolPath,
};
use toolshed_engine::{Engine, EngineConfig, Face, Outcome, RunRequest};
use toolshed_models::{ChatRequest, Endpoint, Message, Models, Provider};
use toolshed_store::Store;
use toolshed_testing::model_server::{ModelScript, ModelServer, Turn};

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

fn engine(store: Store, models: Models) -> Engine {
    let mut b = CatalogBuilder::new();
    let def = ToolDef::new(ToolPath::parse("rows.query").unwrap(), "Query", "Rows.")
        .with_input(json!({"type": "object", "properties": {"n": {"type": "integer"}}}))
        .with_annotations(Annotations::READ_ONLY);
    b.add_tool(Tool::from_fn(def, |_, args| async move {
        Ok(json!({"rows": [{"n": args["n"]}]}))
    }));
    let policy = Policy::new(
        vec![Role {
            id: "all".into(),
            patterns: vec!["**".into()],
            ..Role::default()
        }],
        vec![Principal {
            id: "bench".into(),
            roles: vec!["all".into()],
        }],
    )
    .unwrap();
    let config = EngineConfig {
        rate_limits: toolshed_engine::RateLimits {
            calls_per_minute: 1_000_000,
            scripts_per_minute: 1_000_000,
        },
        ..EngineConfig::default()
    };
    Engine::new(
        Arc::new(SharedCatalog::new(b.build().unwrap())),
        policy,
        store,
        config,
    )
    .with_models(models)
}

const STEPS: usize = 5;

fn script() -> ModelScript {
    let mut turns: Vec<Turn> = (0..STEPS - 1)
        .map(|n| Turn::calls(&[("rows__query", json!({"n": n}))]))
        .collect();
    turns.push(Turn::text("done"));
    ModelScript {
        turns,
        split: 16,
        ..Default::default()
    }
}

fn request() -> RunRequest {
    RunRequest {
        definition: json!({"name": "bench", "model": "openai/m", "credential": "main",
                           "instructions": "Query four times.",
                           "tools": [{"type": "catalog", "pattern": "rows.*"}]}),
        version: 1,
        input: "go".into(),
        ..RunRequest::default()
    }
}

/// The five model requests of a run, sent straight to the server.
async fn model_only(models: &Models) -> Duration {
    let mut messages = vec![Message::User {
        content: "go".into(),
    }];
    let started = Instant::now();
    for _ in 0..STEPS {
        let req = ChatRequest {
            model: "m".into(),
            system: "Query four times.".into(),
            messages: messages.clone(),
            tools: vec![],
            max_tokens: None,
        };
        let c = models.complete("main", &req, &mut |_| {}).await.unwrap();
        messages.push(Message::Assistant {
            content: c.text,
            tool_calls: c.tool_calls.clone(),
        });
        for call in c.tool_calls {
            messages.push(Message::Tool {
                tool_call_id: call.id,
                name: call.name,
                content: "{\"rows\":[]}".into(),
                is_error: false,
            });
        }
    }
    started.elapsed()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let server = ModelServer::start(script()).await;
    let models = Models::new(vec![Endpoint {
        id: "main".into(),
        provider: Provider::Openai,
        base_url: server.openai_url(),
        api_key: None,
        headers: vec![],
        timeout: Duration::from_secs(30),
        allow_private: true,
        unavailable: None,
    }])
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_dir(dir.path()).await.unwrap();
    let e = engine(store, models.clone());
    let caller = e.caller("bench", Face::Http);

    // Warm up connections and the store.
    for _ in 0..20 {
        e.start_run(&caller, request()).await.unwrap();
        model_only(&models).await;
    }
    let mut overhead = Vec::new();
    let mut whole = Vec::new();
    for _ in 0..300 {
        let started = Instant::now();
        let out = e.start_run(&caller, request()).await.unwrap();
        let run = started.elapsed();
        assert!(matches!(out, Outcome::Completed { .. }), "{out:?}");
        let model = model_only(&models).await;
        whole.push(run);
        overhead.push(run.saturating_sub(model) / STEPS as u32);
    }
    overhead.sort();
    whole.sort();
    println!(
        "run overhead per step (model excluded, file store): n={} p50={:.3}ms p99={:.3}ms; whole 5-step run p50={:.2}ms",
        overhead.len(),
        percentile(&overhead, 0.5).as_secs_f64() * 1e3,
        percentile(&overhead, 0.99).as_secs_f64() * 1e3,
        percentile(&whole, 0.5).as_secs_f64() * 1e3,
    );

    let started = Instant::now();
    let runs: Vec<_> = (0..100)
        .map(|_| {
            let e = e.clone();
            let caller = caller.clone();
            tokio::spawn(async move { e.start_run(&caller, request()).await })
        })
        .collect();
    let mut completed = 0;
    for r in runs {
        if let Ok(Ok(Outcome::Completed { result, .. })) = r.await {
            if result["steps"] == STEPS {
                completed += 1;
            }
        }
    }
    let elapsed = started.elapsed();
    println!(
        "100 concurrent runs of {STEPS} steps: {completed} completed in {:.2}s ({:.0} runs/s, {:.0} steps/s); peak RSS {:.1} MiB",
        elapsed.as_secs_f64(),
        100.0 / elapsed.as_secs_f64(),
        (100 * STEPS) as f64 / elapsed.as_secs_f64(),
        peak_rss_mib()
    );
    e.shutdown().await;
}
