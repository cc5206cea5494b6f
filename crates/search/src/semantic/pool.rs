//! A small fork-join pool for the encoder's matrix products.
//!
//! A query's forward pass is a few dozen products of a millisecond or less each, so the cost that
//! matters is how fast helpers join a product, not throughput. Helpers spin for a short while
//! after each job (the next product of the same query follows within microseconds) and only then
//! sleep. Work is split in chunks that every participant, the caller included, claims from one
//! counter: a helper that is late, or not scheduled at all on a busy machine, only takes fewer
//! chunks; the caller never waits for a helper that has not started one. One job runs at a time;
//! a second caller meanwhile (another query on another thread) runs its chunks alone.
//!
//! The caller does wait for a chunk a helper has started, and a helper that loses its core in
//! the middle of one (another process, or the server's own background embedding, wants the
//! core) holds the whole product up until it is scheduled again. On a loaded two-core machine
//! two threads were slower than one (one busy process beside the benchmark, the longest
//! requests: median 5.0–5.5 against 4.2–4.4 ms, p99 14.8–15.3 against 8.6–9.5 ms). So a join
//! that waits longer than [`LATE_JOIN`] for a helper puts the pool on its own for a while
//! ([`Solo`]): jobs run on the caller alone, and the window doubles while late joins keep
//! following it.
//!
//! Searches come first. The server embeds a new catalog on a background thread with the same
//! model, and so with this pool; a search's query would then run on its own thread against
//! both of the catalog's. A thread that embeds a query marks itself ([`Pool::foreground`]), and
//! every other caller's job gives way while one is marked: its participants finish the chunks
//! they hold, the helpers are left to the search, and the caller sleeps until no search embeds.

use std::cell::Cell;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long an idle helper spins before it sleeps.
const SPIN: Duration = Duration::from_micros(300);

/// A join that waits longer than this for a helper's chunk means the helper lost its core. A
/// chunk is a few dozen microseconds of work, and on an idle machine a join waits up to half a
/// millisecond now and then (an interrupt, a page fault); a helper that lost its core to
/// another thread waited 3–10 ms (a scheduler's slice).
const LATE_JOIN: Duration = Duration::from_millis(1);
/// How long jobs run on the caller alone after a late join that follows a calm spell: a
/// query or two. A late join within one window's length after the last window ended (the core
/// is still taken) doubles it, up to [`SOLO_MAX`].
const SOLO_FIRST: Duration = Duration::from_millis(10);
/// The longest window alone.
const SOLO_MAX: Duration = Duration::from_secs(1);

/// When the pool runs jobs on the caller alone (see the module docs): a heuristic shared by all
/// callers, so its atomics need no ordering with each other. Times are nanoseconds on the pool's
/// clock.
struct Solo {
    origin: Instant,
    /// Jobs run alone until this time.
    until: AtomicU64,
    /// The length of the last window.
    window: AtomicU64,
    /// The first window's length after a calm spell ([`SOLO_FIRST`] but in tests).
    first: u64,
}

/// `d` in nanoseconds.
fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Solo {
    fn new(first: Duration) -> Self {
        Self {
            origin: Instant::now(),
            until: AtomicU64::new(0),
            window: AtomicU64::new(0),
            first: nanos(first),
        }
    }

    fn now(&self) -> u64 {
        nanos(self.origin.elapsed())
    }

    /// Whether jobs run on the caller alone at `now`.
    fn on(&self, now: u64) -> bool {
        now < self.until.load(Relaxed)
    }

    /// Opens a window after a join at `now` was late: twice the last one if that ended less
    /// than its length ago, the first length otherwise.
    fn late(&self, now: u64) {
        let last = self.window.load(Relaxed);
        let calm = now.saturating_sub(self.until.load(Relaxed)) > last;
        let window = if calm {
            self.first
        } else {
            // Never shorter than the first window (a test's may exceed SOLO_MAX).
            last.saturating_mul(2).min(nanos(SOLO_MAX)).max(self.first)
        };
        self.window.store(window, Relaxed);
        self.until.store(now.saturating_add(window), Relaxed);
    }
}

/// How long a job that gives way to a search sleeps before it looks again.
const GIVE_WAY: Duration = Duration::from_micros(100);

thread_local! {
    /// Whether this thread is embedding a search's query ([`Pool::foreground`]).
    static FOREGROUND: Cell<bool> = const { Cell::new(false) };
}

/// One job: `run(i)` for every chunk `i < count`.
struct Job<'a> {
    run: &'a (dyn Fn(usize) + Sync),
    count: usize,
    next: AtomicUsize,
    /// For a job that gives way to searches: the number of searches embedding now.
    gives_way: Option<&'a AtomicUsize>,
}

impl Job<'_> {
    /// Claims and runs chunks until none is left (true), or until a search starts embedding
    /// when the job gives way to searches (false).
    fn work(&self) -> bool {
        loop {
            if self.waiting() {
                return false;
            }
            let i = self.next.fetch_add(1, SeqCst);
            if i >= self.count {
                return true;
            }
            (self.run)(i);
        }
    }

    /// Whether the job gives way to a search that is embedding now.
    fn waiting(&self) -> bool {
        self.gives_way.is_some_and(|n| n.load(SeqCst) > 0)
    }

    /// Whether every chunk has been claimed.
    fn claimed(&self) -> bool {
        self.next.load(SeqCst) >= self.count
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
    solo: Solo,
    /// Searches embedding their queries now ([`Pool::foreground`]).
    foreground: AtomicUsize,
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
        Self::with_first_solo(threads, SOLO_FIRST)
    }

    /// A pool whose first window alone after a late join lasts `first_solo`.
    fn with_first_solo(threads: usize, first_solo: Duration) -> Self {
        let shared = Arc::new(Shared {
            job: AtomicPtr::new(std::ptr::null_mut()),
            epoch: AtomicU64::new(0),
            active: AtomicUsize::new(0),
            sleepers: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            panicked: AtomicBool::new(false),
            busy: Mutex::new(()),
            solo: Solo::new(first_solo),
            foreground: AtomicUsize::new(0),
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

    /// Whether jobs run on the caller alone for now, after a helper was late to join.
    #[cfg(test)]
    fn solo(&self) -> bool {
        let solo = &self.shared.solo;
        solo.on(solo.now())
    }

    /// Marks this thread as embedding a search's query until the guard drops: meanwhile the
    /// jobs of other threads (a catalog embedded in the background) give way to it.
    pub(crate) fn foreground(&self) -> Foreground<'_> {
        let nested = FOREGROUND.replace(true);
        if !nested {
            self.shared.foreground.fetch_add(1, SeqCst);
        }
        Foreground {
            shared: &self.shared,
            nested,
            _thread: std::marker::PhantomData,
        }
    }

    /// Runs `run(i)` for every `i < count`, on the caller and the helpers; returns when all
    /// are done. A job of a thread that is not embedding a search ([`Pool::foreground`]) gives
    /// way to searches: while one embeds, its participants finish the chunks they hold, the
    /// job leaves the helpers to the search, and the caller sleeps until no search embeds.
    pub(crate) fn run(&self, count: usize, run: &(dyn Fn(usize) + Sync)) {
        let s = &*self.shared;
        let job = Job {
            run,
            count,
            next: AtomicUsize::new(0),
            gives_way: (!FOREGROUND.get()).then_some(&s.foreground),
        };
        while !job.claimed() {
            while job.waiting() {
                std::thread::sleep(GIVE_WAY);
            }
            let solo = &s.solo;
            let shared = (count > 1 && !self.handles.is_empty() && !solo.on(solo.now()))
                .then(|| s.busy.try_lock().ok())
                .flatten();
            match shared {
                Some(guard) => self.share(&job, guard),
                None => {
                    job.work();
                }
            }
        }
    }

    /// Works on `job` with the helpers until every chunk is claimed or the job gives way,
    /// holding `guard` (the pool's one shared job) meanwhile.
    fn share(&self, job: &Job<'_>, guard: std::sync::MutexGuard<'_, ()>) {
        let s = &*self.shared;
        // Publishing a pointer to this frame is sound because a helper raises `active` before
        // it reads `job` and lowers it after its last use of the job, and `Unpublish` (also on
        // unwinding) clears `job` and then waits for `active` to fall to zero, all in SeqCst
        // order: no helper touches the job once this function has returned.
        let ptr = job as *const Job<'_> as *mut Job<'static>;
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

/// A thread's mark as embedding a search's query ([`Pool::foreground`]). It stays on the thread
/// that took it (not `Send`): dropping it elsewhere would unmark the wrong thread.
pub(crate) struct Foreground<'a> {
    shared: &'a Shared,
    /// The thread was marked already (the outer guard unmarks it).
    nested: bool,
    _thread: std::marker::PhantomData<*const ()>,
}

impl crate::hybrid::HeldForSearch for Foreground<'_> {}

impl Drop for Foreground<'_> {
    fn drop(&mut self) {
        if !self.nested {
            FOREGROUND.set(false);
            self.shared.foreground.fetch_sub(1, SeqCst);
        }
    }
}

/// Clears the published job and waits until no helper is inside it; a wait longer than
/// [`LATE_JOIN`] puts the pool on its own for a while.
struct Unpublish<'a>(&'a Shared);

impl Drop for Unpublish<'_> {
    fn drop(&mut self) {
        self.0.job.store(std::ptr::null_mut(), SeqCst);
        if self.0.active.load(SeqCst) == 0 {
            return;
        }
        let start = Instant::now();
        while self.0.active.load(SeqCst) != 0 {
            std::hint::spin_loop();
        }
        if start.elapsed() > LATE_JOIN {
            let solo = &self.0.solo;
            solo.late(solo.now());
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
            let work = || {
                job.work();
            };
            if std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).is_err() {
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
    fn a_helper_late_to_join_leaves_the_caller_alone_for_a_while() {
        // A first window long enough that a loaded test machine cannot outlast it.
        let pool = Pool::with_first_solo(2, Duration::from_secs(600));
        let caller = std::thread::current().id();
        let mut late = false;
        for _ in 0..1000 {
            // Two chunks; one a helper takes outlasts the caller's by three LATE_JOINs. A helper
            // may not be scheduled in time to take one: then try again.
            let helped = AtomicBool::new(false);
            pool.run(2, &|_| {
                if std::thread::current().id() == caller {
                    std::thread::sleep(LATE_JOIN);
                } else {
                    helped.store(true, SeqCst);
                    std::thread::sleep(LATE_JOIN * 4);
                }
            });
            assert!(
                helped.load(SeqCst) || !pool.solo(),
                "alone after an on-time join"
            );
            if helped.load(SeqCst) {
                late = true;
                break;
            }
        }
        assert!(late, "no helper took a chunk in 1,000 jobs");
        assert!(pool.solo());
        for _ in 0..20 {
            let elsewhere = AtomicUsize::new(0);
            pool.run(8, &|_| {
                if std::thread::current().id() != caller {
                    elsewhere.fetch_add(1, SeqCst);
                }
                std::thread::sleep(Duration::from_micros(50));
            });
            assert_eq!(
                elsewhere.load(SeqCst),
                0,
                "a helper ran a chunk while alone"
            );
        }
    }

    #[test]
    fn windows_alone_double_while_late_joins_follow_them_and_start_over_after_calm() {
        let ms = |n: u64| n * 1_000_000;
        let solo = Solo::new(Duration::from_millis(10));
        assert!(!solo.on(0));
        solo.late(ms(100));
        assert!(solo.on(ms(100)) && solo.on(ms(109)) && !solo.on(ms(110)));
        // Late again within 10 ms of the window's end: 20 ms.
        solo.late(ms(115));
        assert!(solo.on(ms(134)) && !solo.on(ms(135)), "doubled");
        // Late again more than 20 ms after: 10 ms again.
        solo.late(ms(160));
        assert!(solo.on(ms(169)) && !solo.on(ms(170)), "calm starts over");
        let mut now = ms(200);
        for _ in 0..12 {
            solo.late(now);
            now = solo.until.load(Relaxed) + ms(1);
        }
        assert_eq!(solo.window.load(Relaxed), nanos(SOLO_MAX), "capped");
    }

    #[test]
    fn a_job_gives_way_while_a_search_embeds_and_then_finishes() {
        let pool = Pool::new(2);
        let started = AtomicUsize::new(0);
        let runs: Vec<AtomicUsize> = (0..400).map(|_| AtomicUsize::new(0)).collect();
        let grace = Duration::from_millis(20);
        std::thread::scope(|scope| {
            let background = scope.spawn(|| {
                pool.run(runs.len(), &|i| {
                    started.fetch_add(1, SeqCst);
                    runs[i].fetch_add(1, SeqCst);
                    std::thread::sleep(Duration::from_micros(200));
                });
            });
            while started.load(SeqCst) < 5 {
                std::thread::yield_now();
            }
            let search = pool.foreground();
            // Chunks already claimed finish; then none starts while the search embeds.
            std::thread::sleep(grace);
            let before = started.load(SeqCst);
            let ours = AtomicUsize::new(0);
            pool.run(8, &|_| {
                ours.fetch_add(1, SeqCst);
            });
            assert_eq!(ours.load(SeqCst), 8, "the search's own job runs");
            std::thread::sleep(grace);
            assert_eq!(
                started.load(SeqCst),
                before,
                "a chunk started during the search"
            );
            assert!(before < runs.len(), "the job ended before the search");
            drop(search);
            background.join().expect("the background job ends");
        });
        assert!(runs.iter().all(|r| r.load(SeqCst) == 1), "every chunk once");
        assert_eq!(pool.shared.foreground.load(SeqCst), 0);
    }

    #[test]
    fn a_nested_search_mark_is_released_by_the_outer_one() {
        let pool = Pool::new(2);
        let outer = pool.foreground();
        let inner = pool.foreground();
        assert_eq!(pool.shared.foreground.load(SeqCst), 1);
        drop(inner);
        assert!(FOREGROUND.get());
        drop(outer);
        assert!(!FOREGROUND.get());
        assert_eq!(pool.shared.foreground.load(SeqCst), 0);
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
