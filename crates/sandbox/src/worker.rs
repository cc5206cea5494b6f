//! The worker process: the main loop a sandbox worker runs (the `toolshed` binary started with
//! [`ARG`], or this crate's `toolshed-sandbox-worker`).
//!
//! At start the worker turns off core dumps, starts one runner thread with the large stack
//! QuickJS needs, and that thread installs the system-call filter ([`crate::seccomp`], applied
//! to every thread) before it announces itself ready. From then on it reads [`ToWorker`] frames
//! on stdin and writes [`FromWorker`] frames on stdout, one script at a time, in the same
//! [`crate::engine`] as in-process runs: a host call becomes a `Call` frame, and while the
//! script waits, the loop reads `Reply` frames from the pipe. The worker never answers a call
//! itself, so every tool call still takes the server's one call path.
//!
//! The worker keeps no state between scripts (each gets a fresh QuickJS runtime). It exits
//! when its stdin closes; the server kills it when a limit is overrun.

use std::collections::HashMap;
use std::fs::File;
use std::future::Future;
use std::io;
use std::mem::ManuallyDrop;
use std::os::fd::FromRawFd;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use futures::FutureExt;

use crate::engine::{self, Cancel, Job};
use crate::proto::{self, FromWorker, ToWorker};
use crate::types::{Determinism, Host, HostCall, HostError, HostReply, Limits};

/// The first argument that turns the `toolshed` binary into a sandbox worker.
pub const ARG: &str = "__sandbox-worker";
/// With [`ARG`]: install the system-call filter, try forbidden calls, print the report, exit
/// 0 when every one was refused.
pub const SELF_TEST_ARG: &str = "--self-test";

/// Exit codes of a worker that could not start.
const EXIT_FILTER: i32 = 3;
const EXIT_PIPE: i32 = 4;
const EXIT_THREAD: i32 = 5;

/// Whether this process was started as a sandbox worker (its first argument is [`ARG`]).
/// Check it at the very top of `main`, before anything else starts.
pub fn is_worker() -> bool {
    std::env::args_os().nth(1).is_some_and(|a| a == ARG)
}

/// The worker's main function: never returns.
pub fn main() -> ! {
    let self_test = std::env::args_os().any(|a| a == SELF_TEST_ARG);
    die_with_parent();
    set_limit(libc::RLIMIT_CORE, 0);
    let runner = std::thread::Builder::new()
        .name("toolshed-sandbox-worker".into())
        .stack_size(crate::pool::STACK_BYTES)
        .spawn(move || if self_test { self_test_main() } else { serve() });
    let code = match runner {
        Ok(h) => h.join().unwrap_or(EXIT_THREAD),
        Err(_) => EXIT_THREAD,
    };
    std::process::exit(code)
}

/// The worker is killed when the server dies, so no orphan keeps running a script.
fn die_with_parent() {
    // SAFETY: plain prctl/getppid calls.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        // The server may have died before the request took effect: we were reparented.
        if libc::getppid() == 1 {
            std::process::exit(0);
        }
    }
}

fn set_limit(resource: libc::__rlimit_resource_t, value: libc::rlim_t) {
    let lim = libc::rlimit {
        rlim_cur: value,
        rlim_max: value,
    };
    // SAFETY: a valid rlimit struct; failure leaves the limit as it was.
    unsafe {
        libc::setrlimit(resource, &lim);
    }
}

fn self_test_main() -> i32 {
    match crate::seccomp::self_test() {
        Ok(lines) => {
            println!("{}", lines.join("\n"));
            0
        }
        Err(e) => {
            println!("{e}");
            1
        }
    }
}

fn serve() -> i32 {
    if let Err(e) = crate::seccomp::install() {
        eprintln!("toolshed sandbox worker: cannot install the system-call filter: {e}");
        return EXIT_FILTER;
    }
    let pipe = Arc::new(Pipe::stdio());
    if pipe.send(&FromWorker::Ready).is_err() {
        return 0;
    }
    loop {
        // The next script often follows at once: poll briefly before blocking in read.
        readable_soon(SPIN);
        let msg = match pipe.recv() {
            Ok(Some(m)) => m,
            Ok(None) => return 0,
            Err(_) => return EXIT_PIPE,
        };
        let ToWorker::Run {
            run,
            source,
            limits,
            det,
        } = msg
        else {
            continue; // a late reply of a run that already ended
        };
        let done = run_one(&pipe, run, source, limits, det);
        if pipe.send(&done).is_err() {
            return 0;
        }
    }
}

fn run_one(
    pipe: &Arc<Pipe>,
    run: u64,
    source: String,
    mut limits: Limits,
    det: Determinism,
) -> FromWorker {
    // The runner's stack is fixed before the filter forbids new threads.
    let room = crate::pool::STACK_BYTES - crate::pool::STACK_MARGIN;
    limits.stack_bytes = limits.stack_bytes.min(room);
    {
        let mut slots = pipe.slots.lock().unwrap_or_else(|e| e.into_inner());
        slots.run = run;
        slots.map.clear();
    }
    let waiter = pipe.clone();
    let job = Job {
        source,
        host: Arc::new(PipeHost {
            pipe: pipe.clone(),
            run,
        }),
        limits,
        det,
        cancel: Arc::new(Cancel::default()),
        start: Instant::now(),
        wait: Some(Arc::new(move |t| waiter.pump(t))),
    };
    let r = engine::execute(job);
    FromWorker::Done {
        run,
        status: r.status,
        logs: r.logs,
        calls: r.calls,
    }
}

/// stdin and stdout as unbuffered files, and the replies received for the current run.
struct Pipe {
    input: Mutex<ManuallyDrop<File>>,
    output: Mutex<ManuallyDrop<File>>,
    slots: Mutex<Slots>,
}

#[derive(Default)]
struct Slots {
    run: u64,
    map: HashMap<u32, Slot>,
}

#[derive(Default)]
struct Slot {
    reply: Option<HostReply>,
    waker: Option<Waker>,
}

impl Pipe {
    fn stdio() -> Self {
        // SAFETY: fds 0 and 1 are open for the life of the process; ManuallyDrop never closes
        // them, and nothing else in the worker reads stdin or writes stdout.
        let (input, output) = unsafe { (File::from_raw_fd(0), File::from_raw_fd(1)) };
        Self {
            input: Mutex::new(ManuallyDrop::new(input)),
            output: Mutex::new(ManuallyDrop::new(output)),
            slots: Mutex::new(Slots::default()),
        }
    }

    fn send(&self, msg: &FromWorker) -> io::Result<()> {
        let mut out = self.output.lock().unwrap_or_else(|e| e.into_inner());
        proto::write_frame(&mut **out, msg)
    }

    fn recv(&self) -> io::Result<Option<ToWorker>> {
        let mut input = self.input.lock().unwrap_or_else(|e| e.into_inner());
        proto::read_frame(&mut **input)
    }

    /// Waits up to `timeout` for a frame on stdin and files the reply it carries. The server
    /// gone (end of stdin) ends the worker.
    fn pump(&self, timeout: Duration) {
        if !readable_soon(SPIN) {
            let ms = timeout.as_millis().clamp(1, i32::MAX as u128) as i32;
            if !readable_within(ms) {
                return;
            }
        }
        match self.recv() {
            Ok(Some(ToWorker::Reply { run, seq, reply })) => self.file(run, seq, reply),
            Ok(Some(ToWorker::Run { .. })) => {}
            Ok(None) | Err(_) => std::process::exit(0),
        }
    }

    fn file(&self, run: u64, seq: u32, reply: HostReply) {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        if slots.run != run {
            return;
        }
        let slot = slots.map.entry(seq).or_default();
        slot.reply = Some(reply);
        if let Some(w) = slot.waker.take() {
            w.wake();
        }
    }
}

/// How long a worker polls stdin without sleeping before it blocks: a reply usually arrives
/// within tens of microseconds, and waking a sleeping process (on a virtual machine, an idle
/// virtual CPU) costs far more than that.
const SPIN: Duration = Duration::from_micros(100);

/// Whether stdin has data within `ms` milliseconds (0: now).
fn readable_within(ms: i32) -> bool {
    let mut fds = libc::pollfd {
        fd: 0,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut fds, 1, ms) > 0 }
}

/// Polls stdin without sleeping for up to `spin`.
fn readable_soon(spin: Duration) -> bool {
    let until = Instant::now() + spin;
    loop {
        if readable_within(0) {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        std::hint::spin_loop();
    }
}

/// The worker's [`Host`]: forwards each call to the server and waits for its reply.
struct PipeHost {
    pipe: Arc<Pipe>,
    run: u64,
}

impl Host for PipeHost {
    fn call(&self, call: HostCall) -> BoxFuture<'static, HostReply> {
        let seq = call.seq;
        if let Err(e) = self.pipe.send(&FromWorker::Call {
            run: self.run,
            call,
        }) {
            let err = HostError::new("internal", format!("the sandbox pipe failed: {e}"));
            return futures::future::ready(HostReply::Err(err)).boxed();
        }
        ReplyFuture {
            pipe: self.pipe.clone(),
            seq,
        }
        .boxed()
    }
}

struct ReplyFuture {
    pipe: Arc<Pipe>,
    seq: u32,
}

impl Future for ReplyFuture {
    type Output = HostReply;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<HostReply> {
        let mut slots = self.pipe.slots.lock().unwrap_or_else(|e| e.into_inner());
        let slot = slots.map.entry(self.seq).or_default();
        match slot.reply.take() {
            Some(r) => Poll::Ready(r),
            None => {
                slot.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}
