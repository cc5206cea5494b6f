//! [`Sandbox`]: admission control in front of the runs, and the pool of worker processes.
//!
//! At most `max_concurrent` scripts run at once; up to `max_queued` more wait for a slot, in
//! arrival order; beyond that [`Sandbox::admit`] answers [`Overloaded`] at once. In worker mode
//! the pool holds one pre-started process per slot: a run takes an idle worker, and gives it
//! back when the script ended normally. A worker that was killed (a limit was overrun), died,
//! or whose run was cancelled (the caller dropped the future) is discarded (SIGKILL, reaped)
//! and a fresh one is started in its place, so no process keeps running a script nobody waits
//! for.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::process::{Ended, Worker, WorkerCommand};
use crate::types::{Determinism, Host, Limits, RunOutcome, ScriptError, ScriptErrorKind, Status};

/// How scripts are run and how many at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxConfig {
    /// Run scripts in worker processes started with this command. `None` runs them on threads
    /// of this process (tests and embedders only: a built-in that never yields to the
    /// interrupt handler cannot be stopped there).
    pub workers: Option<WorkerCommand>,
    /// Scripts running at once (and worker processes kept); at least 1.
    pub max_concurrent: usize,
    /// Scripts waiting for a slot; beyond it, runs are refused as overloaded.
    pub max_queued: usize,
}

/// The default number of concurrent scripts: the number of CPUs, at least 2.
pub fn default_concurrency() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .max(2)
}

/// The default length of the queue of scripts waiting for a slot.
pub const DEFAULT_MAX_QUEUED: usize = 64;

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            workers: None,
            max_concurrent: default_concurrency(),
            max_queued: DEFAULT_MAX_QUEUED,
        }
    }
}

/// Every slot is busy and the queue is full.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the server is overloaded: {running} scripts are running and {queued} are waiting, the most it allows; retry shortly")]
pub struct Overloaded {
    /// Scripts running (`max_concurrent_scripts`).
    pub running: usize,
    /// Scripts waiting (`max_queued_scripts`).
    pub queued: usize,
}

/// A slot to run one script; released when dropped.
pub struct Permit {
    _slot: Option<OwnedSemaphorePermit>,
}

/// Runs scripts under admission control, in worker processes or in process.
pub struct Sandbox {
    slots: Arc<Semaphore>,
    waiting: AtomicUsize,
    config: SandboxConfig,
    pool: Option<Arc<Pool>>,
}

impl std::fmt::Debug for Sandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandbox")
            .field("config", &self.config)
            .finish()
    }
}

/// Counts a caller waiting for a slot while it waits (also when its future is dropped).
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Sandbox {
    /// A sandbox with `config`. In worker mode the workers are started now when a tokio
    /// runtime is current (else on first use).
    pub fn new(config: SandboxConfig) -> Self {
        let config = SandboxConfig {
            max_concurrent: config.max_concurrent.max(1),
            ..config
        };
        let pool = config.workers.clone().map(|cmd| {
            let pool = Arc::new(Pool {
                cmd,
                idle: Mutex::new(Vec::new()),
            });
            if tokio::runtime::Handle::try_current().is_ok() {
                for _ in 0..config.max_concurrent {
                    pool.start_one();
                }
            }
            pool
        });
        Self {
            slots: Arc::new(Semaphore::new(config.max_concurrent)),
            waiting: AtomicUsize::new(0),
            config,
            pool,
        }
    }

    /// The configuration in effect.
    pub fn config(&self) -> &SandboxConfig {
        &self.config
    }

    /// Takes a slot, waiting in the queue when all are busy; [`Overloaded`] when the queue is
    /// full too.
    pub async fn admit(&self) -> Result<Permit, Overloaded> {
        if let Ok(p) = self.slots.clone().try_acquire_owned() {
            return Ok(Permit { _slot: Some(p) });
        }
        let overloaded = || Overloaded {
            running: self.config.max_concurrent,
            queued: self.config.max_queued,
        };
        self.waiting
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < self.config.max_queued).then_some(n + 1)
            })
            .map_err(|_| overloaded())?;
        let _waiting = Waiting(&self.waiting);
        let slot = self
            .slots
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| overloaded())?;
        Ok(Permit { _slot: Some(slot) })
    }

    /// A run nested inside a run that already holds a slot (a saved script called as a tool):
    /// it must not wait for a slot its own caller holds, so it takes none. Callers bound the
    /// nesting depth.
    pub fn admit_nested(&self) -> Permit {
        Permit { _slot: None }
    }

    /// Runs `source` in the slot `permit` holds. Dropping the future cancels the run (in worker
    /// mode: the worker is killed and replaced).
    pub async fn run(
        &self,
        permit: Permit,
        source: &str,
        host: Arc<dyn Host>,
        limits: &Limits,
        det: Determinism,
    ) -> RunOutcome {
        let _permit = permit;
        let Some(pool) = &self.pool else {
            return crate::run(source, host, limits, det).await;
        };
        let start = Instant::now();
        let mut lease = match pool.checkout() {
            Ok(l) => l,
            Err(e) => {
                return RunOutcome {
                    status: Status::Failed(ScriptError::new(
                        ScriptErrorKind::Internal,
                        format!("cannot start a sandbox worker process: {e}"),
                    )),
                    logs: Vec::new(),
                    calls: 0,
                    elapsed: start.elapsed(),
                }
            }
        };
        let ended = match lease.worker.as_mut() {
            Some(w) => w.run(source, host, limits, det).await,
            None => unreachable!("a lease holds its worker until it ends"),
        };
        let r = match ended {
            Ended::Done(r) => {
                lease.give_back();
                r
            }
            Ended::Lost(r) => r, // dropping the lease replaces the worker
        };
        RunOutcome {
            status: r.status,
            logs: r.logs,
            calls: r.calls,
            elapsed: start.elapsed(),
        }
    }

    /// Process ids of the idle workers (diagnostics and tests).
    pub fn idle_worker_pids(&self) -> Vec<u32> {
        self.pool.as_ref().map_or_else(Vec::new, |p| {
            p.idle
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .map(Worker::pid)
                .collect()
        })
    }
}

/// Idle worker processes.
struct Pool {
    cmd: WorkerCommand,
    idle: Mutex<Vec<Worker>>,
}

impl Pool {
    fn start_one(&self) {
        match Worker::spawn(&self.cmd) {
            Ok(w) => self.idle.lock().unwrap_or_else(|e| e.into_inner()).push(w),
            Err(e) => tracing::error!(
                program = %self.cmd.program.display(),
                error = %e,
                "cannot start a sandbox worker process"
            ),
        }
    }

    fn checkout(self: &Arc<Self>) -> std::io::Result<Lease> {
        let idle = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let worker = match idle {
            Some(w) => w,
            None => Worker::spawn(&self.cmd)?,
        };
        Ok(Lease {
            pool: self.clone(),
            worker: Some(worker),
        })
    }
}

/// A worker out of the pool for one run. Given back after a normal end; otherwise dropping it
/// kills the worker (SIGKILL on drop, reaped in the background) and starts a replacement.
struct Lease {
    pool: Arc<Pool>,
    worker: Option<Worker>,
}

impl Lease {
    fn give_back(&mut self) {
        if let Some(w) = self.worker.take() {
            self.pool
                .idle
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(w);
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(w) = self.worker.take() {
            drop(w);
            if tokio::runtime::Handle::try_current().is_ok() {
                self.pool.start_one();
            }
        }
    }
}
