//! In-memory hosts shared by the integration tests.
#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use serde_json::{json, Value};
use toolshed_sandbox::{
    run, CallTarget, Determinism, Host, HostCall, HostError, HostReply, Limits, RunOutcome,
};

/// Answers by path:
/// - `fail.*` → an error with code `boom`, message `it failed`, data `{"why": "test"}`;
/// - `slow.*` → echoes after 300 ms;
/// - `never.*` → never answers;
/// - anything else → echoes `{seq, target, args}` at once.
///
/// Tracks the largest number of calls in flight at once.
#[derive(Default)]
pub struct TestHost {
    pub inflight: Arc<AtomicUsize>,
    pub max_inflight: Arc<AtomicUsize>,
    pub calls: Mutex<Vec<HostCall>>,
}

pub const SLOW: Duration = Duration::from_millis(300);

impl Host for TestHost {
    fn call(&self, call: HostCall) -> BoxFuture<'static, HostReply> {
        self.calls.lock().unwrap().push(call.clone());
        let path = match &call.target {
            CallTarget::Tool(p) => p.clone(),
            CallTarget::Search => "<search>".into(),
            CallTarget::Describe => "<describe>".into(),
            CallTarget::Ask => "<ask>".into(),
        };
        let echo = json!({"seq": call.seq, "target": call.target.to_string(), "args": call.args});
        if path.starts_with("fail.") {
            return futures::future::ready(HostReply::Err(HostError {
                code: "boom".into(),
                message: "it failed".into(),
                data: Some(json!({"why": "test"})),
            }))
            .boxed();
        }
        if path.starts_with("never.") {
            return futures::future::pending().boxed();
        }
        if path.starts_with("slow.") {
            let inflight = self.inflight.clone();
            let max = self.max_inflight.clone();
            return async move {
                let now = inflight.fetch_add(1, Ordering::SeqCst) + 1;
                max.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(SLOW).await;
                inflight.fetch_sub(1, Ordering::SeqCst);
                HostReply::Ok(echo)
            }
            .boxed();
        }
        futures::future::ready(HostReply::Ok(echo)).boxed()
    }
}

pub fn det() -> Determinism {
    Determinism {
        seed: 42,
        now_ms: 1_700_000_000_000.0,
    }
}

pub fn quick_limits() -> Limits {
    Limits {
        wall_clock: Duration::from_secs(5),
        ..Limits::default()
    }
}

pub async fn run_with(source: &str, host: Arc<dyn Host>, limits: &Limits) -> RunOutcome {
    run(source, host, limits, det()).await
}

pub async fn run_simple(source: &str) -> RunOutcome {
    run_with(source, Arc::new(TestHost::default()), &quick_limits()).await
}

/// A host that journals replies by seq, suspends calls to `danger.*` unless approved, and
/// records which calls it actually executed.
pub struct JournalHost {
    pub journal: Mutex<HashMap<u32, Value>>,
    pub executed: Mutex<Vec<(u32, String)>>,
    pub approved: std::sync::atomic::AtomicBool,
}

impl JournalHost {
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            journal: Mutex::new(HashMap::new()),
            executed: Mutex::new(Vec::new()),
            approved: std::sync::atomic::AtomicBool::new(false),
        })
    }
}

pub struct JournalHandle(pub Arc<JournalHost>);

impl Host for JournalHandle {
    fn call(&self, call: HostCall) -> BoxFuture<'static, HostReply> {
        let host = self.0.clone();
        async move {
            if let Some(v) = host.journal.lock().unwrap().get(&call.seq).cloned() {
                return HostReply::Ok(v);
            }
            let CallTarget::Tool(path) = &call.target else {
                return HostReply::Err(HostError::new("unsupported", "tools only"));
            };
            if path.starts_with("danger.") && !host.approved.load(Ordering::SeqCst) {
                return HostReply::Suspend;
            }
            // Later-issued reads answer faster than earlier ones, to exercise ordering.
            let delay = 40u64.saturating_sub(u64::from(call.seq) * 10);
            tokio::time::sleep(Duration::from_millis(delay)).await;
            host.executed.lock().unwrap().push((call.seq, path.clone()));
            let value = json!({"n": call.seq * 10, "path": path, "args": call.args});
            host.journal.lock().unwrap().insert(call.seq, value.clone());
            HostReply::Ok(value)
        }
        .boxed()
    }
}

/// A sandbox running scripts in worker processes of this crate's worker binary.
pub fn worker_sandbox(max_concurrent: usize, max_queued: usize) -> toolshed_sandbox::Sandbox {
    toolshed_sandbox::Sandbox::new(toolshed_sandbox::SandboxConfig {
        workers: Some(toolshed_sandbox::WorkerCommand::new(env!(
            "CARGO_BIN_EXE_toolshed-sandbox-worker"
        ))),
        max_concurrent,
        max_queued,
    })
}

/// Runs one script in `sandbox`, waiting for a slot.
pub async fn run_in(
    sandbox: &toolshed_sandbox::Sandbox,
    source: &str,
    host: Arc<dyn Host>,
    limits: &Limits,
) -> RunOutcome {
    let permit = sandbox.admit().await.expect("admitted");
    sandbox.run(permit, source, host, limits, det()).await
}

/// Child processes of this process: `(pid, state, cpu ticks)` from `/proc/<pid>/stat`.
pub fn children() -> Vec<(u32, char, u64)> {
    let me = std::process::id();
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let f: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        let ppid: u32 = f.get(1).and_then(|s| s.parse().ok()).unwrap_or(0);
        if ppid != me {
            continue;
        }
        let state = f.first().and_then(|s| s.chars().next()).unwrap_or('?');
        let ticks = f.get(11).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0)
            + f.get(12).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
        out.push((pid, state, ticks));
    }
    out
}

/// Waits until no child process uses CPU: every child is sleeping (or a zombie) and its CPU
/// time stays put over `window`. Panics with the busy ones after `within`.
pub async fn assert_children_idle(window: Duration, within: Duration) {
    let start = std::time::Instant::now();
    loop {
        let before = children();
        tokio::time::sleep(window).await;
        let after = children();
        let busy: Vec<_> = after
            .iter()
            .filter(|(pid, state, ticks)| {
                let was = before.iter().find(|(p, _, _)| p == pid).map(|b| b.2);
                *state == 'R' || was.is_some_and(|w| w != *ticks)
            })
            .cloned()
            .collect();
        if busy.is_empty() {
            return;
        }
        assert!(
            start.elapsed() < within,
            "child processes still use CPU: {busy:?}"
        );
    }
}
