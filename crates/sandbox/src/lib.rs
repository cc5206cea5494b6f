//! Toolshed's JavaScript "code mode" sandbox, on QuickJS.
//!
//! An agent sends a script; [`run`] executes it as the body of an async function in a fresh
//! QuickJS runtime and context, with a global `tools` proxy whose calls go to a [`Host`] (in
//! Toolshed, the engine's single call path). The script's `return` value comes back as JSON.
//!
//! ```text
//! const issues = await tools.github.issues.list({ repo: "a/b" });
//! const hits = await tools.search({ query: "create issue", limit: 3 });
//! return issues.length;
//! ```
//!
//! Guarantees:
//! - **Isolation**: no file system, network, timers, `require`, `import()`, `process` or `fetch`;
//!   nothing is shared between runs. The `tools` proxy cannot be enumerated.
//! - **Limits** ([`Limits`]): memory, stack, wall clock (CPU loops and waits on host calls), CPU
//!   time spent executing JavaScript (enforced by the interrupt handler, waits excluded), the
//!   number of host calls, console output and result size. A call to a tool named in
//!   [`Limits::long_calls_ms`] (tools with their own, longer timeout) moves the deadline to at
//!   least the call's start plus that time, in the worker and for the server's kill alike.
//! - **Replay** ([`Determinism`]): `Math.random` is seeded, `Date` is pinned, and host replies
//!   reach the script in the order the calls were issued, so a rerun whose host answers from a
//!   journal behaves identically. A host can [`HostReply::Suspend`] a call (e.g. pending
//!   approval); the run then ends [`Status::Suspended`] and can be replayed later.
//!
//! - **Preemption**: with [`Sandbox`] in worker mode ([`SandboxConfig::workers`]) every script
//!   runs in a pre-started worker process (the same binary, see [`worker`]) under a seccomp
//!   allow-list (no files, sockets, programs or threads) and address-space and CPU rlimits.
//!   The QuickJS interrupt handler stops ordinary runaway JavaScript gracefully; the server
//!   SIGKILLs the worker when the wall clock or the CPU budget is overrun by [`process::KILL_MARGIN`]
//!   (interpreter built-ins that never poll the handler), the run ends `Failed` with the
//!   matching [`ScriptErrorKind`], and a fresh worker takes the killed one's place.
//! - **Admission**: [`Sandbox::admit`] bounds the scripts running at once (= worker processes)
//!   and the queue waiting for them; beyond both it answers [`Overloaded`].
//!
//! Threading and processes: in worker mode the run's future forwards the worker's host calls
//! to the [`Host`] and polls their futures itself, in the caller's task; one pipe pair per
//! worker carries length-prefixed JSON frames ([`proto`]). In process ([`run`], for tests and
//! embedders), each run executes on a thread of a small elastic pool ([`pool`] explains why
//! not on tokio's workers), polls its host futures there, and hands the [`RunOutcome`] back
//! through a oneshot channel. Either way the future is `Send` and never blocks a tokio worker.
//!
//! Modules: [`types`] (the public data types), [`engine`] (one run: runtime, prelude, event
//! loop), [`alloc`] (the memory budget), [`pool`] (the threads), [`service`] (admission and the
//! worker pool), [`process`] (the server side of a worker), [`worker`] (the worker's main
//! loop), [`proto`] (the pipe frames), [`seccomp`] (the system-call filter).

pub mod alloc;
pub mod engine;
pub mod pool;
pub mod process;
pub mod proto;
pub mod seccomp;
pub mod service;
pub mod types;
pub mod worker;

use std::sync::Arc;
use std::time::Instant;

pub use process::WorkerCommand;

/// The identity of the script runtime: this crate's version, the interpreter's and a digest of
/// the prelude that shapes `tools`. Executions record it; a replay by a different runtime cannot
/// be guaranteed to follow the journal and is refused.
pub fn runtime_version() -> &'static str {
    static VERSION: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    VERSION.get_or_init(|| {
        // FNV-1a: stable across Rust releases, unlike the standard library's hasher.
        let digest = include_str!("prelude.js")
            .bytes()
            .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
            });
        format!(
            "toolshed-sandbox/{} quickjs/{} prelude/{digest:016x}",
            env!("CARGO_PKG_VERSION"),
            QUICKJS_VERSION
        )
    })
}

/// The QuickJS release bundled by the `rquickjs` version this crate pins.
const QUICKJS_VERSION: &str = "rquickjs-0.14";
pub use service::{Overloaded, Permit, Sandbox, SandboxConfig};
pub use types::{
    CallTarget, Determinism, Host, HostCall, HostError, HostReply, Limits, LogEntry, RunOutcome,
    ScriptError, ScriptErrorKind, Status, MAX_LONG_CALLS,
};

/// Cancels the run when the caller drops the future returned by [`run`].
struct CancelOnDrop(Arc<engine::Cancel>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// Runs `source` (the body of an async function) against `host` in this process and reports
/// how it ended. No admission control, and a built-in that never yields to the interrupt
/// handler cannot be stopped: servers use [`Sandbox`] in worker mode.
///
/// The returned future is `Send`; the JavaScript itself runs on a sandbox pool thread. Dropping
/// the future cancels the run. Host futures are polled inside the caller's tokio runtime
/// context when there is one.
pub async fn run(
    source: &str,
    host: Arc<dyn Host>,
    limits: &Limits,
    det: Determinism,
) -> RunOutcome {
    let start = Instant::now();
    let cancel = Arc::new(engine::Cancel::default());
    let guard = CancelOnDrop(cancel.clone());
    let job = engine::Job {
        source: source.to_owned(),
        host,
        limits: limits.clone(),
        det,
        cancel,
        start,
        wait: None,
    };
    let handle = tokio::runtime::Handle::try_current().ok();
    let (tx, rx) = tokio::sync::oneshot::channel();
    pool::execute(limits.stack_bytes, move || {
        let _entered = handle.as_ref().map(|h| h.enter());
        let result = engine::execute(job);
        let _ = tx.send(result);
    });
    let result = rx.await;
    drop(guard);
    match result {
        Ok(r) => RunOutcome {
            status: r.status,
            logs: r.logs,
            calls: r.calls,
            elapsed: start.elapsed(),
        },
        Err(_) => RunOutcome {
            status: Status::Failed(ScriptError::new(
                ScriptErrorKind::Internal,
                "the sandbox thread stopped without an outcome",
            )),
            logs: Vec::new(),
            calls: 0,
            elapsed: start.elapsed(),
        },
    }
}
