//! Runs one script on the current (pool) thread: a fresh QuickJS runtime and context, the
//! prelude, the user's source wrapped in an async function, and the event loop that connects
//! the script's host calls to the [`Host`].
//!
//! The loop is what makes runs replayable. Host futures are all polled concurrently (a
//! `FuturesUnordered` on this thread, woken by unparking it), but their replies are handed to
//! JavaScript strictly in issue order, one at a time, and the job queue is drained completely
//! after each delivery. The script's execution is therefore a function of the reply values
//! alone, not of their timing, so a host answering instantly from a journal reproduces it.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context as TaskContext, Poll, Wake, Waker};
use std::thread::Thread;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use futures::stream::{FuturesUnordered, StreamExt};
use futures::FutureExt;
use rquickjs::context::EvalOptions;
use rquickjs::function::Func;
use rquickjs::promise::PromiseState;
use rquickjs::{Coerced, Context, Ctx, FromJs, Function, Object, Promise, Runtime, Value};

use crate::alloc::{Budget, Limited};
use crate::types::{
    CallTarget, Determinism, Host, HostCall, HostReply, Limits, LogEntry, ScriptError,
    ScriptErrorKind, Status,
};

const PRELUDE: &str = include_str!("prelude.js");
const PRELUDE_FILE: &str = "sandbox-prelude.js";
/// File name the user's script is compiled under; stack frames from it carry user positions.
pub(crate) const SCRIPT_FILE: &str = "script.js";
/// Text put before the user's first line (on the same line, so line numbers are unchanged).
pub(crate) const WRAP_PREFIX: &str = "(async function () {";
const WRAP_SUFFIX: &str = "\n})()";
const LOG_TRUNCATED: &str = " … [console output truncated: log limit reached]";

/// Shared between [`crate::run`]'s future and the thread running the script.
#[derive(Default)]
pub(crate) struct Cancel {
    flag: AtomicBool,
    thread: OnceLock<Thread>,
}

impl Cancel {
    /// Asks the run to stop as soon as possible.
    pub(crate) fn cancel(&self) {
        self.flag.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
    }

    fn is_cancelled(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }
}

/// Everything a run needs, moved onto the pool thread.
pub(crate) struct Job {
    pub source: String,
    pub host: Arc<dyn Host>,
    pub limits: Limits,
    pub det: Determinism,
    pub cancel: Arc<Cancel>,
    pub start: Instant,
    /// How the loop waits for host replies: parking the thread (in process) or, in a worker
    /// process, reading replies from the pipe.
    pub wait: Option<Waiter>,
}

/// Blocks for at most the given time or until a host reply may have arrived.
pub(crate) type Waiter = Arc<dyn Fn(Duration) + Send + Sync>;

impl Job {
    fn wait(&self, timeout: Duration) {
        match &self.wait {
            Some(w) => w(timeout),
            None => std::thread::park_timeout(timeout),
        }
    }
}

/// What the thread hands back (the caller adds timing).
pub(crate) struct RunResult {
    pub status: Status,
    pub logs: Vec<LogEntry>,
    pub calls: u32,
}

struct ThreadWaker(Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// The run's deadline: the wall clock from the start, moved later (never earlier) by a call to a
/// long tool ([`Limits::long_calls_ms`]). Read by the interrupt handler on every check.
pub(crate) struct Deadline {
    start: Instant,
    /// Milliseconds after `start`.
    after_ms: AtomicU64,
    /// The latest it may move to, in ms after `start`: the wall clock plus the longest long
    /// call, however many long calls a script makes.
    cap_ms: u64,
}

impl Deadline {
    fn new(start: Instant, limits: &Limits) -> Self {
        let wall = u64::try_from(limits.wall_clock.as_millis()).unwrap_or(u64::MAX);
        Self {
            start,
            after_ms: AtomicU64::new(wall),
            cap_ms: wall.saturating_add(limits.longest_call().as_millis() as u64),
        }
    }

    fn at(&self) -> Instant {
        self.start + Duration::from_millis(self.after_ms.load(Ordering::SeqCst))
    }

    /// Moves the deadline to `until` when that is later.
    fn extend_to(&self, until: Instant) {
        let ms = u64::try_from(until.saturating_duration_since(self.start).as_millis())
            .unwrap_or(u64::MAX)
            .min(self.cap_ms);
        self.after_ms.fetch_max(ms, Ordering::SeqCst);
    }
}

type Inflight = FuturesUnordered<BoxFuture<'static, (u32, HostReply)>>;

/// State the native functions share with the loop.
struct Shared {
    host: Arc<dyn Host>,
    deadline: Arc<Deadline>,
    limits: Limits,
    next_seq: u32,
    max_calls: u32,
    call_limit_hit: bool,
    inflight: Inflight,
    logs: Vec<LogEntry>,
    log_bytes: usize,
    max_log_bytes: usize,
    log_truncated: bool,
    rng: u64,
}

impl Shared {
    fn issue(&mut self, path: String, json: &str) -> i32 {
        if self.next_seq >= self.max_calls {
            self.call_limit_hit = true;
            return -1;
        }
        let args = serde_json::from_str(json).unwrap_or(serde_json::Value::Null);
        let target = match path.as_str() {
            "search" => CallTarget::Search,
            "describe.tool" => CallTarget::Describe,
            "ask_user" => CallTarget::Ask,
            _ => CallTarget::Tool(path),
        };
        if let Some(long) = self.limits.long_call(&target) {
            self.deadline.extend_to(Instant::now() + long);
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        tracing::trace!(seq, %target, "sandbox host call");
        let fut = self.host.call(HostCall { seq, target, args });
        self.inflight.push(fut.map(move |r| (seq, r)).boxed());
        // `max_calls` is a u32 well below i32::MAX in any sane configuration; saturate anyway.
        i32::try_from(seq).unwrap_or(i32::MAX)
    }

    fn log(&mut self, level: String, message: String) {
        if self.log_truncated {
            return;
        }
        let room = self.max_log_bytes.saturating_sub(self.log_bytes);
        if message.len() <= room {
            self.log_bytes += message.len();
            self.logs.push(LogEntry { level, message });
            return;
        }
        let mut cut = room;
        while !message.is_char_boundary(cut) {
            cut -= 1;
        }
        let mut kept = message[..cut].to_owned();
        kept.push_str(LOG_TRUNCATED);
        self.log_bytes = self.max_log_bytes;
        self.log_truncated = true;
        self.logs.push(LogEntry {
            level,
            message: kept,
        });
    }

    /// splitmix64, mapped to [0, 1) with 53 bits of precision.
    fn random(&mut self) -> f64 {
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// Flags the interrupt handler raises.
#[derive(Default)]
struct Tripped {
    timed_out: AtomicBool,
    cpu_exceeded: AtomicBool,
}

/// CPU time of the current thread (the run's thread), from the OS.
#[cfg(unix)]
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_THREAD_CPUTIME_ID is always supported
    // on the platforms we build for, and on failure `ts` stays zero.
    unsafe {
        libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts);
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Without a per-thread CPU clock, elapsed time on the run's thread stands in for it.
#[cfg(not(unix))]
fn thread_cpu() -> Duration {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed()
}

/// Measures the CPU time the script's JavaScript uses: the run thread's CPU time since the
/// start, minus what the thread spent polling host futures (tool handlers run there too).
/// Waiting (parked) uses no CPU time. Read from the interrupt handler, hence the atomics.
struct CpuMeter {
    start: Duration,
    host_ns: AtomicU64,
}

impl CpuMeter {
    fn start() -> Self {
        Self {
            start: thread_cpu(),
            host_ns: AtomicU64::new(0),
        }
    }

    /// CPU time used by JavaScript so far. Only meaningful on the run's thread.
    fn used(&self) -> Duration {
        thread_cpu()
            .saturating_sub(self.start)
            .saturating_sub(Duration::from_nanos(self.host_ns.load(Ordering::Relaxed)))
    }

    /// Runs `f` (host work) without charging its CPU time to the script.
    fn exclude<T>(&self, f: impl FnOnce() -> T) -> T {
        let before = thread_cpu();
        let out = f();
        let spent = thread_cpu().saturating_sub(before);
        self.host_ns.fetch_add(
            u64::try_from(spent.as_nanos()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
        out
    }
}

/// Runs the job to the end on the current thread.
pub(crate) fn execute(job: Job) -> RunResult {
    let _ = job.cancel.thread.set(std::thread::current());
    let deadline = Arc::new(Deadline::new(job.start, &job.limits));
    let shared = Rc::new(RefCell::new(Shared {
        host: job.host.clone(),
        deadline: deadline.clone(),
        limits: job.limits.clone(),
        next_seq: 0,
        max_calls: job.limits.max_tool_calls,
        call_limit_hit: false,
        inflight: FuturesUnordered::new(),
        logs: Vec::new(),
        log_bytes: 0,
        max_log_bytes: job.limits.max_log_bytes,
        log_truncated: false,
        rng: job.det.seed,
    }));
    let status = match setup_and_run(&job, &shared) {
        Ok(status) => status,
        Err(e) => Status::Failed(e),
    };
    let mut sh = shared.borrow_mut();
    RunResult {
        status,
        logs: std::mem::take(&mut sh.logs),
        calls: sh.next_seq,
    }
}

fn internal(what: &str, e: impl std::fmt::Display) -> ScriptError {
    ScriptError::new(ScriptErrorKind::Internal, format!("{what}: {e}"))
}

fn setup_and_run(job: &Job, shared: &Rc<RefCell<Shared>>) -> Result<Status, ScriptError> {
    let deadline = shared.borrow().deadline.clone();
    let budget = Budget::new(job.limits.memory_bytes);
    let rt = Runtime::new_with_alloc(Limited(budget.clone())).map_err(|e| {
        if budget.exhausted() {
            ScriptError::new(ScriptErrorKind::MemoryLimit, memory_message(&job.limits))
        } else {
            internal("cannot create a JavaScript runtime", e)
        }
    })?;
    rt.set_max_stack_size(job.limits.stack_bytes);
    let tripped = Arc::new(Tripped::default());
    let cpu = Arc::new(CpuMeter::start());
    {
        let tripped = tripped.clone();
        let cancel = job.cancel.clone();
        let cpu = cpu.clone();
        let cpu_limit = job.limits.cpu_time;
        let deadline = deadline.clone();
        rt.set_interrupt_handler(Some(Box::new(move || {
            if cancel.is_cancelled() {
                return true;
            }
            if Instant::now() >= deadline.at() {
                tripped.timed_out.store(true, Ordering::SeqCst);
                return true;
            }
            if cpu.used() >= cpu_limit {
                tripped.cpu_exceeded.store(true, Ordering::SeqCst);
                return true;
            }
            false
        })));
    }
    let context = Context::full(&rt).map_err(|e| {
        if budget.exhausted() {
            ScriptError::new(ScriptErrorKind::MemoryLimit, memory_message(&job.limits))
        } else {
            internal("cannot create a JavaScript context", e)
        }
    })?;
    let status = context.with(|ctx| {
        let mut lp = Loop {
            ctx: ctx.clone(),
            job,
            shared: shared.clone(),
            tripped: &tripped,
            cpu: &cpu,
            budget: &budget,
            deadline,
            helpers: None,
        };
        lp.run()
    });
    drop(context);
    drop(rt);
    Ok(status)
}

fn memory_message(limits: &Limits) -> String {
    format!(
        "the script ran out of memory (limit {} bytes)",
        limits.memory_bytes
    )
}

struct Loop<'a, 'js> {
    ctx: Ctx<'js>,
    job: &'a Job,
    shared: Rc<RefCell<Shared>>,
    tripped: &'a Tripped,
    cpu: &'a CpuMeter,
    budget: &'a Budget,
    deadline: Arc<Deadline>,
    helpers: Option<Object<'js>>,
}

/// What the thrown value looked like.
#[derive(Default)]
struct Thrown {
    name: Option<String>,
    message: Option<String>,
    stack: Option<String>,
    code: Option<String>,
    text: String,
}

impl<'js> Loop<'_, 'js> {
    fn run(&mut self) -> Status {
        let promise = match self.start() {
            Ok(p) => p,
            Err(e) => return Status::Failed(e),
        };
        let status = self.drive(&promise);
        self.drain_inflight();
        status
    }

    fn eval_options(filename: &str) -> EvalOptions {
        let mut o = EvalOptions::default();
        o.global = true;
        o.strict = false;
        o.backtrace_barrier = true;
        o.promise = false;
        o.filename = Some(filename.to_owned());
        o
    }

    /// Installs the prelude and starts the user's script.
    fn start(&mut self) -> Result<Promise<'js>, ScriptError> {
        if let Some(at) = self.job.source.find('\0') {
            return Err(nul_error(&self.job.source, at));
        }
        let ctx = self.ctx.clone();
        let natives = Object::new(ctx.clone()).map_err(|e| self.setup_error(e))?;
        let sh = self.shared.clone();
        let issue = Func::from(move |path: String, json: String| -> i32 {
            sh.borrow_mut().issue(path, &json)
        });
        let sh = self.shared.clone();
        let log = Func::from(move |level: String, message: String| {
            sh.borrow_mut().log(level, message);
        });
        let sh = self.shared.clone();
        let random = Func::from(move || -> f64 { sh.borrow_mut().random() });
        natives
            .set("issue", issue)
            .and_then(|_| natives.set("log", log))
            .and_then(|_| natives.set("random", random))
            .map_err(|e| self.setup_error(e))?;
        let install: Function = ctx
            .eval_with_options(PRELUDE, Self::eval_options(PRELUDE_FILE))
            .map_err(|e| self.setup_error(e))?;
        let helpers: Object = install
            .call((natives, self.job.limits.max_tool_calls, self.job.det.now_ms))
            .map_err(|e| self.setup_error(e))?;
        self.helpers = Some(helpers);

        let mut wrapped =
            String::with_capacity(WRAP_PREFIX.len() + self.job.source.len() + WRAP_SUFFIX.len());
        wrapped.push_str(WRAP_PREFIX);
        wrapped.push_str(&self.job.source);
        wrapped.push_str(WRAP_SUFFIX);
        let value: Value = match ctx.eval_with_options(wrapped, Self::eval_options(SCRIPT_FILE)) {
            Ok(v) => v,
            Err(rquickjs::Error::Exception) => {
                let thrown = ctx.catch();
                let info = self.inspect(thrown);
                if info.name.as_deref() == Some("SyntaxError") {
                    let (line, column) = clamp_to_source(&self.job.source, info.location());
                    return Err(ScriptError {
                        kind: ScriptErrorKind::Syntax,
                        message: info.message.unwrap_or(info.text),
                        line,
                        column,
                        stack: None,
                    });
                }
                return Err(self.classify(info));
            }
            Err(e) => return Err(internal("cannot evaluate the script", e)),
        };
        value.into_promise().ok_or_else(|| {
            ScriptError::new(
                ScriptErrorKind::Internal,
                "the wrapped script did not produce a promise",
            )
        })
    }

    fn setup_error(&self, e: rquickjs::Error) -> ScriptError {
        if let rquickjs::Error::Exception = e {
            let thrown = self.ctx.catch();
            let info = self.inspect(thrown);
            let err = self.classify(info);
            if err.kind != ScriptErrorKind::Thrown {
                return err;
            }
            return internal("sandbox setup failed", err.message);
        }
        internal("sandbox setup failed", e)
    }

    /// Runs queued jobs until none are left.
    fn run_jobs(&self) {
        while self.ctx.execute_pending_job() {}
    }

    fn check_tripped(&self) -> Option<ScriptError> {
        if self.job.cancel.is_cancelled() {
            return Some(ScriptError::new(
                ScriptErrorKind::Internal,
                "the run was cancelled",
            ));
        }
        if self.tripped.timed_out.load(Ordering::SeqCst) || Instant::now() >= self.deadline.at() {
            return Some(self.timeout_error());
        }
        if self.tripped.cpu_exceeded.load(Ordering::SeqCst)
            || self.cpu.used() >= self.job.limits.cpu_time
        {
            return Some(ScriptError::new(
                ScriptErrorKind::CpuLimit,
                format!(
                    "the script used more than its CPU-time limit of {} ms executing JavaScript (time spent waiting for tool calls does not count)",
                    self.job.limits.cpu_time.as_millis()
                ),
            ));
        }
        None
    }

    fn timeout_error(&self) -> ScriptError {
        ScriptError::new(
            ScriptErrorKind::Timeout,
            format!(
                "the script exceeded its wall-clock limit of {} ms",
                self.job.limits.wall_clock.as_millis()
            ),
        )
    }

    fn drive(&mut self, promise: &Promise<'js>) -> Status {
        let waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
        let mut cx = TaskContext::from_waker(&waker);
        let mut ready: BTreeMap<u32, HostReply> = BTreeMap::new();
        let mut next_deliver: u32 = 0;
        loop {
            self.run_jobs();
            match promise.state() {
                PromiseState::Resolved => {
                    if let Some(e) = self.check_tripped() {
                        return Status::Failed(e);
                    }
                    return self.finish_ok(promise);
                }
                PromiseState::Rejected => {
                    let _ = promise.result::<Value>();
                    let thrown = self.ctx.catch();
                    let info = self.inspect(thrown);
                    return Status::Failed(self.classify(info));
                }
                PromiseState::Pending => {}
            }
            if let Some(e) = self.check_tripped() {
                return Status::Failed(e);
            }
            // Host futures (tool handlers included) run here; their CPU time is not the script's.
            self.cpu.exclude(|| {
                let mut sh = self.shared.borrow_mut();
                while let Poll::Ready(Some((seq, reply))) = sh.inflight.poll_next_unpin(&mut cx) {
                    ready.insert(seq, reply);
                }
            });
            if let Some(reply) = ready.remove(&next_deliver) {
                let seq = next_deliver;
                next_deliver += 1;
                if let Err(e) = self.deliver(seq, reply) {
                    return e;
                }
                continue;
            }
            let issued = self.shared.borrow().next_seq;
            if next_deliver >= issued {
                return Status::Failed(ScriptError::new(
                    ScriptErrorKind::Deadlock,
                    "the script awaits a promise that can never settle (no tool call is in flight and no work is pending)",
                ));
            }
            let now = Instant::now();
            let deadline = self.deadline.at();
            if now >= deadline {
                return Status::Failed(self.timeout_error());
            }
            // Reading replies from a worker's pipe is host work too.
            self.cpu.exclude(|| self.job.wait(deadline - now));
        }
    }

    /// Hands one reply to JavaScript. `Err` carries the status that ends the run.
    fn deliver(&self, seq: u32, reply: HostReply) -> Result<(), Status> {
        let Some(helpers) = &self.helpers else {
            return Err(Status::Failed(ScriptError::new(
                ScriptErrorKind::Internal,
                "sandbox helpers missing",
            )));
        };
        let deliver: Function = helpers
            .get("deliver")
            .map_err(|e| Status::Failed(internal("sandbox helper missing", e)))?;
        let res = match reply {
            HostReply::Suspend => return Err(Status::Suspended { seq }),
            HostReply::Ok(v) => {
                let json = serde_json::to_string(&v).unwrap_or_else(|_| "null".into());
                deliver.call::<_, ()>((seq, true, json, None::<String>, None::<String>))
            }
            HostReply::Err(e) => {
                let data = e
                    .data
                    .as_ref()
                    .map(|d| serde_json::to_string(d).unwrap_or_else(|_| "null".into()));
                deliver.call::<_, ()>((seq, false, e.message, Some(e.code), data))
            }
        };
        match res {
            Ok(()) => Ok(()),
            Err(rquickjs::Error::Exception) => {
                let thrown = self.ctx.catch();
                let info = self.inspect(thrown);
                Err(Status::Failed(self.classify(info)))
            }
            Err(e) => Err(Status::Failed(internal("cannot deliver a tool result", e))),
        }
    }

    fn finish_ok(&self, promise: &Promise<'js>) -> Status {
        let value: Value = match promise.result::<Value>() {
            Some(Ok(v)) => v,
            _ => {
                let thrown = self.ctx.catch();
                return Status::Failed(self.classify(self.inspect(thrown)));
            }
        };
        let Some(helpers) = &self.helpers else {
            return Status::Failed(ScriptError::new(
                ScriptErrorKind::Internal,
                "sandbox helpers missing",
            ));
        };
        let to_json: Function = match helpers.get("toJson") {
            Ok(f) => f,
            Err(e) => return Status::Failed(internal("sandbox helper missing", e)),
        };
        let text: String = match to_json.call((value,)) {
            Ok(t) => t,
            Err(rquickjs::Error::Exception) => {
                let thrown = self.ctx.catch();
                let info = self.inspect(thrown);
                let err = self.classify(info);
                if err.kind != ScriptErrorKind::Thrown {
                    return Status::Failed(err);
                }
                return Status::Failed(ScriptError::new(
                    ScriptErrorKind::InvalidResult,
                    err.message
                        .strip_prefix("TypeError: ")
                        .unwrap_or(&err.message)
                        .to_owned(),
                ));
            }
            Err(e) => return Status::Failed(internal("cannot convert the result", e)),
        };
        if text.len() > self.job.limits.max_result_bytes {
            return Status::Failed(ScriptError::new(
                ScriptErrorKind::InvalidResult,
                format!(
                    "the script's result is {} bytes of JSON, over the limit of {} bytes",
                    text.len(),
                    self.job.limits.max_result_bytes
                ),
            ));
        }
        match serde_json::from_str(&text) {
            Ok(v) => Status::Completed(v),
            Err(e) => Status::Failed(ScriptError::new(
                ScriptErrorKind::InvalidResult,
                format!("the script's result is not valid JSON: {e}"),
            )),
        }
    }

    /// Reads what it can from a thrown value without letting a failure escape.
    fn inspect(&self, value: Value<'js>) -> Thrown {
        let mut t = Thrown::default();
        if let Some(obj) = value.as_object() {
            let get = |key: &str| -> Option<String> {
                let v: Value = match obj.get(key) {
                    Ok(v) => v,
                    Err(_) => {
                        self.ctx.catch();
                        return None;
                    }
                };
                if v.is_undefined() || v.is_null() {
                    return None;
                }
                match Coerced::<String>::from_js(&self.ctx, v) {
                    Ok(s) => Some(s.0),
                    Err(_) => {
                        self.ctx.catch();
                        None
                    }
                }
            };
            t.name = get("name");
            t.message = get("message");
            t.stack = get("stack");
            t.code = get("code");
        }
        t.text = self.format_value(value);
        t
    }

    fn format_value(&self, value: Value<'js>) -> String {
        if let Some(s) = value.as_string() {
            return s.to_string().unwrap_or_default();
        }
        let formatted = self
            .helpers
            .as_ref()
            .and_then(|h| h.get::<_, Function>("fmt").ok())
            .and_then(|f| f.call::<_, String>((value,)).ok());
        match formatted {
            Some(s) => s,
            None => {
                self.ctx.catch();
                "an unprintable value".to_owned()
            }
        }
    }

    /// Maps a thrown value to a [`ScriptError`].
    fn classify(&self, info: Thrown) -> ScriptError {
        if let Some(e) = self.check_tripped() {
            return e;
        }
        let (line, column) = info.location();
        let message = info.message.clone().unwrap_or_default();
        let name = info.name.clone().unwrap_or_default();
        let kind = if self.budget.exhausted()
            || (name == "InternalError" && message == "out of memory")
        {
            ScriptErrorKind::MemoryLimit
        } else if (name == "RangeError" && message == "Maximum call stack size exceeded")
            || (name == "InternalError" && message == "stack overflow")
        {
            ScriptErrorKind::StackOverflow
        } else if info.code.as_deref() == Some("call_limit") && self.shared.borrow().call_limit_hit
        {
            ScriptErrorKind::CallLimit
        } else {
            ScriptErrorKind::Thrown
        };
        let text = match kind {
            ScriptErrorKind::MemoryLimit => memory_message(&self.job.limits),
            ScriptErrorKind::StackOverflow => format!(
                "maximum call stack size exceeded (limit {} bytes)",
                self.job.limits.stack_bytes
            ),
            _ => {
                let base = match (&info.name, &info.message) {
                    (Some(n), Some(m)) if !n.is_empty() => format!("{n}: {m}"),
                    (_, Some(m)) => m.clone(),
                    _ => info.text.clone(),
                };
                match &info.code {
                    Some(code) if info.message.is_some() => format!("{base} (code {code})"),
                    _ => base,
                }
            }
        };
        ScriptError {
            kind,
            message: text,
            line,
            column,
            stack: info.stack.as_deref().and_then(user_frames),
        }
    }

    /// Lets calls that are still running finish (their side effects may be journaled by the
    /// host), bounded by the wall clock; their results are discarded.
    fn drain_inflight(&self) {
        let waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
        let mut cx = TaskContext::from_waker(&waker);
        loop {
            {
                let mut sh = self.shared.borrow_mut();
                loop {
                    match sh.inflight.poll_next_unpin(&mut cx) {
                        Poll::Ready(Some(_)) => continue,
                        Poll::Ready(None) => return,
                        Poll::Pending => break,
                    }
                }
            }
            let now = Instant::now();
            let deadline = self.deadline.at();
            if now >= deadline || self.job.cancel.is_cancelled() {
                return;
            }
            self.job.wait(deadline - now);
        }
    }
}

/// The interpreter takes C strings: a NUL character in the source is a syntax error at its
/// position (1-based line and column, in characters).
fn nul_error(source: &str, at: usize) -> ScriptError {
    let before = &source[..at];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
    ScriptError {
        kind: ScriptErrorKind::Syntax,
        message:
            "the script contains a NUL character (\\u0000), which is not allowed in source text"
                .into(),
        line: u32::try_from(line).ok(),
        column: u32::try_from(column).ok(),
        stack: None,
    }
}

/// A syntax error found at the closing text of the wrapper (e.g. a trailing `1 +`) is reported
/// just past the end of the user's last line.
fn clamp_to_source(source: &str, loc: (Option<u32>, Option<u32>)) -> (Option<u32>, Option<u32>) {
    let lines = source.split('\n').count();
    let lines = u32::try_from(lines).unwrap_or(u32::MAX);
    match loc {
        (Some(l), _) if l > lines => {
            let last = source.rsplit('\n').next().unwrap_or("");
            let col = u32::try_from(last.chars().count() + 1).unwrap_or(u32::MAX);
            (Some(lines), Some(col))
        }
        other => other,
    }
}

/// Drops the sandbox's own frames from a stack trace.
fn user_frames(stack: &str) -> Option<String> {
    let kept: Vec<&str> = stack
        .lines()
        .filter(|l| !l.contains(PRELUDE_FILE) && !l.trim().is_empty())
        .collect();
    if kept.is_empty() {
        None
    } else {
        Some(kept.join("\n"))
    }
}

impl Thrown {
    /// Line and column in the user's source, from the first stack frame in the script file.
    fn location(&self) -> (Option<u32>, Option<u32>) {
        self.stack
            .as_deref()
            .and_then(parse_location)
            .map_or((None, None), |(l, c)| (Some(l), Some(c)))
    }
}

/// Finds `script.js:LINE:COL` in a QuickJS stack and maps it back to the user's source.
pub(crate) fn parse_location(stack: &str) -> Option<(u32, u32)> {
    let needle = format!("{SCRIPT_FILE}:");
    let mut rest = stack;
    while let Some(pos) = rest.find(&needle) {
        rest = &rest[pos + needle.len()..];
        let mut parts = rest.splitn(3, |c: char| !c.is_ascii_digit());
        let line = parts.next().and_then(|s| s.parse::<u32>().ok());
        let column = parts.next().and_then(|s| s.parse::<u32>().ok());
        if let (Some(line), Some(column)) = (line, column) {
            let column = if line == 1 {
                column.saturating_sub(WRAP_PREFIX.len() as u32).max(1)
            } else {
                column
            };
            return Some((line, column));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_are_mapped_to_user_source() {
        let prefix = WRAP_PREFIX.len() as u32;
        let s = format!("    at <anonymous> (script.js:1:{})\n", prefix + 5);
        assert_eq!(parse_location(&s), Some((1, 5)));
        assert_eq!(
            parse_location("    at f (sandbox-prelude.js:9:1)\n    at g (script.js:3:7)\n"),
            Some((3, 7))
        );
        assert_eq!(parse_location("    at f (sandbox-prelude.js:9:1)\n"), None);
    }

    #[test]
    fn syntax_positions_past_the_end_are_clamped() {
        assert_eq!(
            clamp_to_source("return 1 +", (Some(2), Some(1))),
            (Some(1), Some(11))
        );
        assert_eq!(
            clamp_to_source("a\nbc", (Some(2), Some(1))),
            (Some(2), Some(1))
        );
        assert_eq!(
            clamp_to_source("a\nbc", (Some(3), Some(1))),
            (Some(2), Some(3))
        );
        assert_eq!(
            user_frames("    at deliver (sandbox-prelude.js:1:1)\n    at f (script.js:2:3)\n"),
            Some("    at f (script.js:2:3)".to_owned())
        );
        assert_eq!(
            user_frames("    at deliver (sandbox-prelude.js:1:1)\n"),
            None
        );
    }

    #[test]
    fn logs_are_truncated_once_with_a_marker() {
        struct Nop;
        impl Host for Nop {
            fn call(&self, _: HostCall) -> BoxFuture<'static, HostReply> {
                futures::future::ready(HostReply::Ok(serde_json::Value::Null)).boxed()
            }
        }
        let mut sh = Shared {
            host: Arc::new(Nop),
            deadline: Arc::new(Deadline::new(Instant::now(), &Limits::default())),
            limits: Limits::default(),
            next_seq: 0,
            max_calls: 1,
            call_limit_hit: false,
            inflight: FuturesUnordered::new(),
            logs: Vec::new(),
            log_bytes: 0,
            max_log_bytes: 10,
            log_truncated: false,
            rng: 1,
        };
        sh.log("log".into(), "12345".into());
        sh.log("log".into(), "é6789abc".into());
        sh.log("log".into(), "more".into());
        assert_eq!(sh.logs.len(), 2);
        assert!(sh.logs[1].message.starts_with("é678"));
        assert!(sh.logs[1].message.ends_with(LOG_TRUNCATED));
        assert!(sh.issue("a.b".into(), "{}") == 0);
        assert!(sh.issue("a.b".into(), "{}") < 0);
        assert!(sh.call_limit_hit);
        let r = sh.random();
        assert!((0.0..1.0).contains(&r));
    }
}
