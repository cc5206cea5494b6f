//! Live execution events to concurrent Server-Sent Events subscribers over loopback HTTP (plain
//! binary, `cargo bench -p toolshed-http --bench events`), on a SQLite file.
//!
//! One execution emits `EVENTS_BENCH_RATE` events per second (default 1,000) for
//! `EVENTS_BENCH_SECS` seconds (default 5), then `completed`; `EVENTS_BENCH_SUBSCRIBERS`
//! clients (default 10) follow `GET /v1/executions/{id}/events` from the start. Reported: events
//! each subscriber received (all must arrive, in order, ids without gaps), the emit rate
//! achieved, and the delivery delay (emit → parsed by the subscriber) p50/p99. Subscribing makes
//! the run durable, so every event is also written to the store on the way.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::json;
use toolshed_core::{CatalogBuilder, Policy, Principal, Role, SharedCatalog};
use toolshed_engine::events::Event;
use toolshed_engine::{Engine, EngineConfig};
use toolshed_identity::KeyRing;
use toolshed_store::{now_ms, ExecutionRecord, ExecutionStatus, Store};

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

async fn serve(dir: &std::path::Path) -> (String, Engine) {
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
    let store = Store::open_dir(dir).await.unwrap();
    let engine = Engine::new(
        Arc::new(SharedCatalog::new(CatalogBuilder::new().build().unwrap())),
        policy,
        store,
        EngineConfig::default(),
    );
    let keys = KeyRing::new([("k".to_string(), "bench".to_string())], None);
    let app = toolshed_http::router(engine.clone(), keys);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (base, engine)
}

/// A running execution of the bench principal, so subscribers may follow it.
async fn stored_execution(engine: &Engine, id: &str) {
    let now = now_ms();
    let rec = ExecutionRecord {
        id: id.into(),
        principal: "bench".into(),
        kind: "script".into(),
        source: String::new(),
        seed: 0,
        now_ms: now,
        status: ExecutionStatus::Running,
        pending: None,
        journal: json!([]),
        decisions: json!({}),
        result: None,
        error: None,
        logs: json!([]),
        meta: json!({}),
        created_at: now,
        updated_at: now,
        expires_at: None,
        version: 1,
    };
    engine.store().insert_execution(&rec).await.unwrap();
}

/// Follows the stream to its end: (ids in arrival order, delivery delays in ms).
async fn subscribe(http: reqwest::Client, url: String) -> (Vec<i64>, Vec<f64>) {
    let r = http.get(url).bearer_auth("k").send().await.unwrap();
    assert_eq!(r.status(), 200);
    let mut body = r.bytes_stream();
    let (mut ids, mut delays, mut buf) = (vec![], vec![], String::new());
    while let Some(chunk) = body.next().await {
        buf.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
        while let Some(end) = buf.find("\n\n") {
            let block: String = buf.drain(..end + 2).collect();
            let Some(data) = block.lines().find_map(|l| l.strip_prefix("data:")) else {
                continue;
            };
            let v: serde_json::Value = serde_json::from_str(data.trim()).unwrap();
            ids.push(v["id"].as_i64().unwrap());
            if let Some(sent) = v["message"].as_str().and_then(|m| m.parse::<f64>().ok()) {
                delays.push(now_micros() - sent);
            }
            if v["type"] == "completed" {
                return (ids, delays);
            }
        }
    }
    (ids, delays)
}

fn now_micros() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as f64
        / 1000.0
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let rate = env_num("EVENTS_BENCH_RATE", 1000);
    let secs = env_num("EVENTS_BENCH_SECS", 5);
    let subscribers = env_num("EVENTS_BENCH_SUBSCRIBERS", 10) as usize;
    let dir = tempfile::tempdir().unwrap();
    let (base, engine) = serve(dir.path()).await;
    let id = "ex_bench_events";
    stored_execution(&engine, id).await;
    let hub = engine.events();
    hub.open(id, false).await.unwrap();
    let http = reqwest::Client::new();
    let url = format!("{base}/v1/executions/{id}/events");
    let readers: Vec<_> = (0..subscribers)
        .map(|_| tokio::spawn(subscribe(http.clone(), url.clone())))
        .collect();
    // Let every subscriber attach before the first event (they would catch up anyway).
    tokio::time::sleep(Duration::from_millis(300)).await;

    let total = rate * secs;
    let started = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    let per_tick = (rate / 100).max(1);
    let mut sent = 0;
    while sent < total {
        tick.tick().await;
        for _ in 0..per_tick.min(total - sent) {
            // The message carries the send time (ms), for the delay.
            hub.emit(
                id,
                Event::Log {
                    level: "log".into(),
                    message: format!("{:.3}", now_micros()),
                },
            );
            sent += 1;
        }
    }
    let emitting = started.elapsed();
    hub.emit(
        id,
        Event::Completed {
            result: json!(sent),
        },
    );
    hub.close(id, true).await;

    let mut all_delays = vec![];
    for (i, r) in readers.into_iter().enumerate() {
        let (ids, delays) = r.await.unwrap();
        let expected: Vec<i64> = (1..=total as i64 + 1).collect();
        assert_eq!(ids.len(), expected.len(), "subscriber {i} lost events");
        assert_eq!(ids, expected, "subscriber {i}: out of order or gaps");
        all_delays.extend(delays);
    }
    all_delays.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let stored = engine.store().last_event_id(id).await.unwrap();
    println!(
        "events: {total} at {:.0}/s to {subscribers} subscribers, every subscriber received all {} in order (stored: {stored}); delivery p50={:.2}ms p99={:.2}ms",
        total as f64 / emitting.as_secs_f64(),
        total + 1,
        percentile(&all_delays, 0.5),
        percentile(&all_delays, 0.99),
    );
}
