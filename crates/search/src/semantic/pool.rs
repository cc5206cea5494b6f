//! A small fork-join pool for the encoder's matrix products.
//!
//! A query's forward pass is a few dozen products of a millisecond or less each, so the cost that
//! matters is how fast helpers join a product, not throughput. Helpers spin for a short while
//! after each job (the next product of the same query follows within microseconds) and only then
//! sleep. Work is split in chunks that every participant, the caller included, claims from one
//! counter: a helper that is late, or not scheduled at all on a busy machine, only takes fewer
//! chunks; the caller never waits for a helper that has not started one. One job runs at a time;
//! a second caller meanwhile (another query on another thread) runs its chunks alone.

use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long an idle helper spins before it sleeps.
const SPIN: Duration = Duration::from_micros(300);

/// One job: `run(i)` for every chunk `i < count`.
struct Job<'a> {
    run: &'a (dyn Fn(usize) + Sync),
    count: usize,
    next: AtomicUsize,
}

impl Job<'_> {
    /// Claims and runs chunks until none is left.
    fn work(&self) {
        loop {
            let i = self.next.fetch_add(1, SeqCst);
            if i >= self.count {
                return;
            }
            (self.run)(i);
        }
    }
}

struct Shared {
    /// The open job, null when none. Points into the caller's stack frame; see `run`.
    job: AtomicPtr<Job<'static>>,
    /// Bumped when a job is published (and on shutdown).
    epoch: AtomicU64,
    /// Helpers inside a job; the caller waits for zero before its frame is left.
    active: AtomicUsize,
    /// Helpers about to sleep or sleeping.
    sleepers: AtomicUsize,
    stop: AtomicBool,
    /// A helper's chunk panicked (the caller re-raises it).
    panicked: AtomicBool,
    /// Serialises jobs: a caller that finds it taken runs its chunks alone.
    busy: Mutex<()>,
    sleep: Mutex<()>,
    wake: Condvar,
}

/// Threads that share the encoder's matrix products with the caller.
pub(crate) struct Pool {
    shared: Arc<Shared>,
    handles: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("helpers", &self.handles.len())
            .finish()
    }
}

impl Pool {
    /// A pool in which jobs run on `threads` threads: the caller and `threads − 1` helpers.
    pub(crate) fn new(threads: usize) -> Self {
        let shared = Arc::new(Shared {
            job: AtomicPtr::new(std::ptr::null_mut()),
            epoch: AtomicU64::new(0),
            active: AtomicUsize::new(0),
            sleepers: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            panicked: AtomicBool::new(false),
            busy: Mutex::new(()),
            sleep: Mutex::new(()),
            wake: Condvar::new(),
        });
        let handles = (1..threads.max(1))
            .filter_map(|i| {
                let shared = shared.clone();
                std::thread::Builder::new()
                    .name(format!("toolshed-embed-{i}"))
                    .spawn(move || helper(&shared))
                    .ok()
            })
            .collect();
        Self { shared, handles }
    }

    /// Threads a job runs on, the caller included.
    pub(crate) fn threads(&self) -> usize {
        self.handles.len() + 1
    }

    /// Runs `run(i)` for every `i < count`, on the caller and the helpers; returns when all
    /// are done.
    pub(crate) fn run(&self, count: usize, run: &(dyn Fn(usize) + Sync)) {
        let job = Job {
            run,
            count,
            next: AtomicUsize::new(0),
        };
        let guard = match self.shared.busy.try_lock() {
            Ok(g) if count > 1 && !self.handles.is_empty() => g,
            _ => {
                job.work();
                return;
            }
        };
        let s = &*self.shared;
        // Publishing a pointer to this frame is sound because a helper raises `active` before
        // it reads `job` and lowers it after its last use of the job, and `Unpublish` (also on
        // unwinding) clears `job` and then waits for `active` to fall to zero, all in SeqCst
        // order: no helper touches the job once this function has returned.
        let ptr = &job as *const Job<'_> as *mut Job<'static>;
        s.job.store(ptr, SeqCst);
        let unpublish = Unpublish(s);
        s.epoch.fetch_add(1, SeqCst);
        if s.sleepers.load(SeqCst) > 0 {
            let _lock = s.sleep.lock().unwrap_or_else(|e| e.into_inner());
            s.wake.notify_all();
        }
        job.work();
        drop(unpublish);
        drop(guard);
        if s.panicked.swap(false, SeqCst) {
            panic!("an embedding helper thread panicked");
        }
    }
}

/// Clears the published job and waits until no helper is inside it.
struct Unpublish<'a>(&'a Shared);

impl Drop for Unpublish<'_> {
    fn drop(&mut self) {
        self.0.job.store(std::ptr::null_mut(), SeqCst);
        while self.0.active.load(SeqCst) != 0 {
            std::hint::spin_loop();
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        let s = &*self.shared;
        s.stop.store(true, SeqCst);
        s.epoch.fetch_add(1, SeqCst);
        {
            let _lock = s.sleep.lock().unwrap_or_else(|e| e.into_inner());
            s.wake.notify_all();
        }
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}

fn helper(s: &Shared) {
    let mut seen = s.epoch.load(SeqCst);
    loop {
        // Wait for a new epoch: spin first, then sleep.
        let start = Instant::now();
        let mut spins = 0u32;
        // `stop` is checked as well as the epoch: a helper that starts after its pool was
        // dropped has already seen the last epoch.
        let idle = || s.epoch.load(SeqCst) == seen && !s.stop.load(SeqCst);
        while idle() {
            std::hint::spin_loop();
            spins += 1;
            if spins.is_multiple_of(256) && start.elapsed() > SPIN {
                let mut lock = s.sleep.lock().unwrap_or_else(|e| e.into_inner());
                s.sleepers.fetch_add(1, SeqCst);
                while idle() {
                    lock = s.wake.wait(lock).unwrap_or_else(|e| e.into_inner());
                }
                s.sleepers.fetch_sub(1, SeqCst);
                break;
            }
        }
        seen = s.epoch.load(SeqCst);
        if s.stop.load(SeqCst) {
            return;
        }
        s.active.fetch_add(1, SeqCst);
        let job = s.job.load(SeqCst);
        if !job.is_null() {
            // SAFETY: `active` was raised before the load, so the caller that published the job
            // waits for this helper before its frame (and the job) goes away.
            let job = unsafe { &*job };
            if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job.work())).is_err() {
                s.panicked.store(true, SeqCst);
            }
        }
        s.active.fetch_sub(1, SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pool_dropped_at_once_stops() {
        for _ in 0..50 {
            drop(Pool::new(3));
        }
    }

    #[test]
    fn every_chunk_runs_once_on_any_number_of_threads() {
        for threads in [1, 2, 4] {
            let pool = Pool::new(threads);
            assert_eq!(pool.threads(), threads);
            for round in 0..200 {
                let count = round % 17;
                let hits: Vec<AtomicUsize> = (0..count).map(|_| AtomicUsize::new(0)).collect();
                pool.run(count, &|i| {
                    hits[i].fetch_add(1, SeqCst);
                });
                assert!(
                    hits.iter().all(|h| h.load(SeqCst) == 1),
                    "{threads} {round}"
                );
                if round % 50 == 0 {
                    // Let the helpers fall asleep, then wake them.
                    std::thread::sleep(SPIN * 3);
                }
            }
        }
    }

    #[test]
    fn concurrent_callers_share_one_pool() {
        let pool = Arc::new(Pool::new(2));
        let total = Arc::new(AtomicUsize::new(0));
        std::thread::scope(|scope| {
            for _ in 0..3 {
                let (pool, total) = (pool.clone(), total.clone());
                scope.spawn(move || {
                    for _ in 0..100 {
                        pool.run(8, &|_| {
                            total.fetch_add(1, SeqCst);
                        });
                    }
                });
            }
        });
        assert_eq!(total.load(SeqCst), 3 * 100 * 8);
    }
}
