//! A small elastic pool of OS threads that run QuickJS.
//!
//! Why not tokio's workers, and why not `spawn_blocking`: QuickJS is synchronous and a script
//! can spin the CPU for its whole wall-clock budget, so it must never run on an async worker.
//! `spawn_blocking` would work, but its threads get whatever stack size the embedding runtime
//! was built with, while QuickJS measures its stack limit against the real C stack: a 1 MiB JS
//! stack limit on a thread with too little stack would crash the process instead of raising
//! `StackOverflow`. This pool owns its threads, gives each [`STACK_BYTES`] of stack, and reuses
//! them (LIFO, so the hottest thread runs the next script), which keeps per-script cost to one
//! channel send. Threads are created on demand when every thread is busy (so a burst of
//! CPU-bound hostile scripts never starves normal ones) and exit after [`IDLE_TIMEOUT`] unused.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// Stack size of every pool thread.
pub const STACK_BYTES: usize = 16 * 1024 * 1024;

/// Stack kept free below the QuickJS limit for Rust frames and the interpreter's own C frames.
pub const STACK_MARGIN: usize = 2 * 1024 * 1024;

/// How long an idle thread waits for work before exiting.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

type Task = Box<dyn FnOnce() + Send + 'static>;

struct Pool {
    idle: Mutex<Vec<(u64, Sender<Task>)>>,
    next_id: AtomicU64,
}

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| Pool {
        idle: Mutex::new(Vec::new()),
        next_id: AtomicU64::new(0),
    })
}

/// Runs `task` on a pool thread. When `stack_bytes` (the QuickJS limit the task will set) does
/// not fit a pool thread, a dedicated thread with a large enough stack runs it instead.
pub fn execute(stack_bytes: usize, task: impl FnOnce() + Send + 'static) {
    let mut task: Task = Box::new(task);
    if stack_bytes.saturating_add(STACK_MARGIN) > STACK_BYTES {
        let spawned = std::thread::Builder::new()
            .name("toolshed-sandbox-big".into())
            .stack_size(stack_bytes.saturating_add(STACK_MARGIN))
            .spawn(move || run_guarded(task));
        if let Err(e) = spawned {
            tracing::error!(error = %e, "could not spawn a sandbox thread");
        }
        return;
    }
    let pool = pool();
    loop {
        let idle = pool.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        match idle {
            Some((_, tx)) => match tx.send(task) {
                Ok(()) => return,
                Err(mpsc::SendError(t)) => task = t,
            },
            None => {
                spawn_worker(pool, task);
                return;
            }
        }
    }
}

fn spawn_worker(pool: &'static Pool, first: Task) {
    let id = pool.next_id.fetch_add(1, Ordering::Relaxed);
    let spawned = std::thread::Builder::new()
        .name(format!("toolshed-sandbox-{id}"))
        .stack_size(STACK_BYTES)
        .spawn(move || worker(pool, id, first));
    if let Err(e) = spawned {
        tracing::error!(error = %e, "could not spawn a sandbox thread");
    }
}

fn worker(pool: &'static Pool, id: u64, first: Task) {
    let (tx, rx) = mpsc::channel::<Task>();
    run_guarded(first);
    loop {
        pool.idle
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((id, tx.clone()));
        let task = match rx.recv_timeout(IDLE_TIMEOUT) {
            Ok(task) => task,
            Err(RecvTimeoutError::Timeout) => {
                let mut idle = pool.idle.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(pos) = idle.iter().position(|(i, _)| *i == id) {
                    idle.remove(pos);
                    return;
                }
                drop(idle);
                // Someone took our sender just before the timeout: the task is on its way.
                match rx.recv() {
                    Ok(task) => task,
                    Err(_) => return,
                }
            }
            Err(RecvTimeoutError::Disconnected) => return,
        };
        run_guarded(task);
    }
}

fn run_guarded(task: Task) {
    if catch_unwind(AssertUnwindSafe(task)).is_err() {
        tracing::error!("a sandbox task panicked");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::channel;

    #[test]
    fn runs_tasks_and_reuses_threads() {
        let (tx, rx) = channel();
        for i in 0..8 {
            let tx = tx.clone();
            execute(1 << 20, move || {
                tx.send((i, std::thread::current().name().map(str::to_owned)))
                    .unwrap();
            });
        }
        let mut seen: Vec<_> = (0..8).map(|_| rx.recv().unwrap()).collect();
        seen.sort_by_key(|(i, _)| *i);
        assert_eq!(seen.len(), 8);
        assert!(seen
            .iter()
            .all(|(_, n)| n.as_deref().unwrap().starts_with("toolshed-sandbox-")));
    }

    #[test]
    fn survives_a_panicking_task() {
        execute(1 << 20, || panic!("boom"));
        let (tx, rx) = channel();
        execute(1 << 20, move || tx.send(42).unwrap());
        assert_eq!(rx.recv().unwrap(), 42);
    }

    #[test]
    fn big_stacks_get_a_dedicated_thread() {
        let (tx, rx) = channel();
        execute(STACK_BYTES, move || {
            tx.send(std::thread::current().name().map(str::to_owned))
                .unwrap()
        });
        assert_eq!(rx.recv().unwrap().as_deref(), Some("toolshed-sandbox-big"));
    }
}
