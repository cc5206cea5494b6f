//! The server side of a worker process: starting it, running one script on it over its pipe,
//! and stopping it when a limit is overrun.
//!
//! A run sets the worker's rlimits for the script (address space: what the worker had mapped
//! when it became ready plus twice the memory limit plus a fixed slack; CPU: the worker's
//! usage so far plus the budget, rounded up to whole seconds, as a backstop the kernel
//! enforces), sends the script, forwards each `Call` to the [`Host`] (the engine's call path)
//! and each answer back, concurrently, until `Done`. The QuickJS interrupt handler inside the
//! worker stops ordinary runaway JavaScript gracefully; this side is the guarantee for the
//! rest (interpreter built-ins that never poll it): SIGKILL once the wall clock plus
//! [`KILL_MARGIN`] has passed, or once the worker's CPU time for this run exceeds the budget
//! plus [`KILL_MARGIN`] (read from `/proc/<pid>/stat`).

use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::stream::{FuturesUnordered, StreamExt};
use futures::FutureExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin, ChildStdout};
use tokio::time::Instant as TokioInstant;

use crate::engine::RunResult;
use crate::proto::{self, FrameBuffer, FromWorker, ToWorker};
use crate::types::{Determinism, Host, HostReply, Limits, ScriptError, ScriptErrorKind, Status};

/// Time past a limit before the worker is killed (the graceful interrupt usually wins).
pub const KILL_MARGIN: Duration = Duration::from_millis(250);
/// How long a new worker may take to become ready.
pub const START_TIMEOUT: Duration = Duration::from_secs(10);
/// Address space a worker may map beyond its start-up mappings and twice the memory limit.
pub const ADDRESS_SLACK: u64 = 256 * 1024 * 1024;

/// How to start a worker process: a program and its arguments (for the `toolshed` binary, its
/// own path and [`crate::worker::ARG`]). The worker starts with an empty environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerCommand {
    pub program: PathBuf,
    pub args: Vec<String>,
}

impl WorkerCommand {
    /// `program __sandbox-worker`.
    pub fn new(program: impl Into<PathBuf>) -> Self {
        Self {
            program: program.into(),
            args: vec![crate::worker::ARG.to_owned()],
        }
    }
}

/// One worker process and its pipe.
pub(crate) struct Worker {
    child: Child,
    stdin: ChildStdin,
    stdout: ChildStdout,
    buf: FrameBuffer,
    pid: u32,
    /// Bytes of address space mapped once ready (0 until then).
    baseline_as: u64,
    ready: bool,
    next_run: u64,
}

/// How a run on a worker ended.
pub(crate) enum Ended {
    /// The worker reported the outcome and can run the next script.
    Done(RunResult),
    /// The worker was killed or died; the outcome says why.
    Lost(RunResult),
}

fn failed(kind: ScriptErrorKind, message: String) -> RunResult {
    RunResult {
        status: Status::Failed(ScriptError::new(kind, message)),
        logs: Vec::new(),
        calls: 0,
    }
}

impl Worker {
    /// Starts a worker (it becomes ready in the background; [`Self::run`] waits for it).
    pub(crate) fn spawn(cmd: &WorkerCommand) -> io::Result<Self> {
        let mut child = tokio::process::Command::new(&cmd.program)
            .args(&cmd.args)
            .env_clear()
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .kill_on_drop(true)
            .spawn()?;
        let missing = || io::Error::other("the worker's pipes are missing");
        let stdin = child.stdin.take().ok_or_else(missing)?;
        let stdout = child.stdout.take().ok_or_else(missing)?;
        let pid = child.id().ok_or_else(missing)?;
        Ok(Self {
            child,
            stdin,
            stdout,
            buf: FrameBuffer::new(proto::MAX_FRAME),
            pid,
            baseline_as: 0,
            ready: false,
            next_run: 0,
        })
    }

    /// The worker's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    async fn wait_ready(&mut self) -> io::Result<()> {
        if self.ready {
            return Ok(());
        }
        let deadline = TokioInstant::now() + START_TIMEOUT;
        match self.next_message(deadline).await? {
            FromWorker::Ready => {}
            other => {
                return Err(io::Error::other(format!(
                    "the worker sent {other:?} before it was ready"
                )))
            }
        }
        self.ready = true;
        self.baseline_as = address_space(self.pid).unwrap_or(0);
        Ok(())
    }

    /// Reads until one whole message is there (cancel-safe: bytes stay buffered).
    async fn next_message(&mut self, deadline: TokioInstant) -> io::Result<FromWorker> {
        let mut chunk = [0u8; 16 * 1024];
        loop {
            if let Some(body) = self.buf.next_frame()? {
                return proto::decode(&body);
            }
            let n = tokio::time::timeout_at(deadline, self.stdout.read(&mut chunk))
                .await
                .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "the worker is silent"))??;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the worker closed its pipe",
                ));
            }
            self.buf.extend(&chunk[..n]);
        }
    }

    async fn send(&mut self, msg: &ToWorker, deadline: TokioInstant) -> io::Result<()> {
        let bytes = proto::encode(msg)?;
        tokio::time::timeout_at(deadline, self.stdin.write_all(&bytes))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "the worker does not read"))?
    }

    /// Kills the worker and reaps it.
    async fn kill(&mut self) {
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
    }

    /// Runs one script on this worker.
    pub(crate) async fn run(
        &mut self,
        source: &str,
        host: Arc<dyn Host>,
        limits: &Limits,
        det: Determinism,
    ) -> Ended {
        let start = TokioInstant::now();
        if let Err(e) = self.wait_ready().await {
            self.kill().await;
            return Ended::Lost(failed(
                ScriptErrorKind::Internal,
                format!("the sandbox worker did not start: {e}"),
            ));
        }
        let run = self.next_run;
        self.next_run += 1;
        let cpu_start = process_cpu(self.pid).unwrap_or_default();
        self.set_limits(limits, cpu_start);
        self.buf = FrameBuffer::new(frame_limit(limits));
        let mut session = Session {
            run,
            limits,
            host,
            start,
            kill_at: start + limits.wall_clock + KILL_MARGIN,
            cpu_start,
            calls: 0,
        };
        let msg = ToWorker::Run {
            run,
            source: source.to_owned(),
            limits: limits.clone(),
            det,
        };
        if let Err(e) = self.send(&msg, session.kill_at).await {
            return self.lost_after(&session, e).await;
        }
        session.drive(self).await
    }

    fn set_limits(&self, limits: &Limits, cpu_used: Duration) {
        let budget = cpu_used + limits.cpu_time + KILL_MARGIN;
        let cpu_secs = budget.as_secs() + 1 + u64::from(budget.subsec_nanos() > 0);
        set_rlimit(self.pid, libc::RLIMIT_CPU, cpu_secs);
        if self.baseline_as > 0 {
            let bytes = (limits.memory_bytes as u64)
                .saturating_mul(2)
                .saturating_add(self.baseline_as)
                .saturating_add(ADDRESS_SLACK);
            set_rlimit(self.pid, libc::RLIMIT_AS, bytes);
        }
    }

    /// The worker's pipe broke: find out why (it was killed for CPU, ran out of memory, ...).
    async fn lost_after(&mut self, s: &Session<'_>, cause: io::Error) -> Ended {
        let used = process_cpu(self.pid).map(|c| c.saturating_sub(s.cpu_start));
        let exited = tokio::time::timeout(Duration::from_secs(1), self.child.wait()).await;
        let status = match exited {
            Ok(Ok(st)) => Some(st),
            _ => {
                self.kill().await;
                None
            }
        };
        let signal = status.and_then(|st| std::os::unix::process::ExitStatusExt::signal(&st));
        let result = match signal {
            Some(libc::SIGXCPU) => s.cpu_error(),
            Some(libc::SIGKILL) if used.is_some_and(|u| u >= s.limits.cpu_time) => s.cpu_error(),
            Some(libc::SIGABRT | libc::SIGSEGV | libc::SIGBUS) => s.memory_error(),
            _ if TokioInstant::now() >= s.kill_at => s.timeout_error(),
            _ => failed(
                ScriptErrorKind::Internal,
                format!(
                    "the sandbox worker stopped unexpectedly ({}; {cause})",
                    status.map_or("still running".to_owned(), |st| st.to_string())
                ),
            ),
        };
        Ended::Lost(result)
    }
}

/// One run in progress on a worker.
struct Session<'a> {
    run: u64,
    limits: &'a Limits,
    host: Arc<dyn Host>,
    start: TokioInstant,
    kill_at: TokioInstant,
    cpu_start: Duration,
    calls: u32,
}

/// What one step of the loop decided.
enum Step {
    Continue,
    End(Ended),
}

impl Session<'_> {
    async fn drive(&mut self, w: &mut Worker) -> Ended {
        let mut inflight = FuturesUnordered::new();
        let mut cpu_check = self.start + self.limits.cpu_time + KILL_MARGIN;
        let mut chunk = vec![0u8; 64 * 1024];
        loop {
            match self.handle_buffered(w, &mut inflight).await {
                Step::Continue => {}
                Step::End(e) => return e,
            }
            tokio::select! {
                read = w.stdout.read(&mut chunk) => match read {
                    Ok(n) if n > 0 => w.buf.extend(&chunk[..n]),
                    Ok(_) => return w.lost_after(self, io::ErrorKind::UnexpectedEof.into()).await,
                    Err(e) => return w.lost_after(self, e).await,
                },
                Some((seq, reply)) = inflight.next(), if !inflight.is_empty() => {
                    let msg = ToWorker::Reply { run: self.run, seq, reply };
                    if let Err(e) = w.send(&msg, self.kill_at).await {
                        return self.overrun(w, e).await;
                    }
                }
                _ = tokio::time::sleep_until(cpu_check.min(self.kill_at)) => {
                    if TokioInstant::now() >= self.kill_at {
                        w.kill().await;
                        return Ended::Lost(self.timeout_error());
                    }
                    let used = process_cpu(w.pid).unwrap_or_default().saturating_sub(self.cpu_start);
                    let allowed = self.limits.cpu_time + KILL_MARGIN;
                    if used >= allowed {
                        w.kill().await;
                        return Ended::Lost(self.cpu_error());
                    }
                    cpu_check = TokioInstant::now() + (allowed - used).max(Duration::from_millis(10));
                }
            }
        }
    }

    /// A blocked pipe at the deadline: the worker is spinning, stop it.
    async fn overrun(&self, w: &mut Worker, e: io::Error) -> Ended {
        if e.kind() == io::ErrorKind::TimedOut {
            w.kill().await;
            return Ended::Lost(self.timeout_error());
        }
        w.lost_after(self, e).await
    }

    /// Handles every complete message already buffered.
    async fn handle_buffered(
        &mut self,
        w: &mut Worker,
        inflight: &mut FuturesUnordered<futures::future::BoxFuture<'static, (u32, HostReply)>>,
    ) -> Step {
        loop {
            let body = match w.buf.next_frame() {
                Ok(Some(b)) => b,
                Ok(None) => return Step::Continue,
                Err(e) => return Step::End(self.misbehaved(w, e).await),
            };
            let msg: FromWorker = match proto::decode(&body) {
                Ok(m) => m,
                Err(e) => return Step::End(self.misbehaved(w, e).await),
            };
            match msg {
                FromWorker::Call { run, call } if run == self.run => {
                    self.calls += 1;
                    if self.calls > self.limits.max_tool_calls {
                        let e = io::Error::other("more calls than the tool-call limit");
                        return Step::End(self.misbehaved(w, e).await);
                    }
                    // The worker moves its own deadline for a long tool; the kill follows.
                    if let Some(long) = self.limits.long_call(&call.target) {
                        let cap = self.start
                            + self.limits.wall_clock
                            + self.limits.longest_call()
                            + KILL_MARGIN;
                        let moved = (TokioInstant::now() + long + KILL_MARGIN).min(cap);
                        self.kill_at = self.kill_at.max(moved);
                    }
                    let seq = call.seq;
                    inflight.push(self.host.call(call).map(move |r| (seq, r)).boxed());
                }
                FromWorker::Done {
                    run,
                    status,
                    logs,
                    calls,
                } if run == self.run => {
                    return Step::End(Ended::Done(RunResult {
                        status,
                        logs,
                        calls,
                    }))
                }
                _ => {}
            }
        }
    }

    async fn misbehaved(&self, w: &mut Worker, e: io::Error) -> Ended {
        w.kill().await;
        Ended::Lost(failed(
            ScriptErrorKind::Internal,
            format!("the sandbox worker sent an invalid message ({e}); it was stopped"),
        ))
    }

    fn timeout_error(&self) -> RunResult {
        failed(
            ScriptErrorKind::Timeout,
            format!(
                "the script exceeded its wall-clock limit of {} ms; its worker process was stopped",
                self.limits.wall_clock.as_millis()
            ),
        )
    }

    fn cpu_error(&self) -> RunResult {
        failed(
            ScriptErrorKind::CpuLimit,
            format!(
                "the script used more than its CPU-time limit of {} ms; its worker process was stopped",
                self.limits.cpu_time.as_millis()
            ),
        )
    }

    fn memory_error(&self) -> RunResult {
        failed(
            ScriptErrorKind::MemoryLimit,
            format!(
                "the script ran out of memory (limit {} bytes); its worker process was stopped",
                self.limits.memory_bytes
            ),
        )
    }
}

/// Largest message a worker may send during a run: results, logs and call arguments are all
/// bounded by the script's limits.
fn frame_limit(l: &Limits) -> usize {
    l.memory_bytes
        .saturating_mul(2)
        .saturating_add(l.max_result_bytes)
        .saturating_add(l.max_log_bytes.saturating_mul(2))
        .saturating_add(1 << 20)
}

fn set_rlimit(pid: u32, resource: libc::__rlimit_resource_t, soft: u64) {
    let new = libc::rlimit {
        rlim_cur: soft,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: a valid rlimit for a process we started (same user); failure is logged.
    let rc = unsafe { libc::prlimit(pid as libc::pid_t, resource, &new, std::ptr::null_mut()) };
    if rc != 0 {
        tracing::warn!(pid, error = %io::Error::last_os_error(), "cannot set a sandbox worker's rlimit");
    }
}

/// CPU time (user + system) a process has used, from `/proc/<pid>/stat`.
pub fn process_cpu(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let hz = u64::try_from(hz).ok().filter(|h| *h > 0).unwrap_or(100);
    Some(Duration::from_nanos((utime + stime) * 1_000_000_000 / hz))
}

/// Bytes of address space a process has mapped, from `/proc/<pid>/statm`.
fn address_space(pid: u32) -> Option<u64> {
    let statm = std::fs::read_to_string(format!("/proc/{pid}/statm")).ok()?;
    let pages: u64 = statm.split_whitespace().next()?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page).ok().filter(|p| *p > 0).unwrap_or(4096))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn own_cpu_and_address_space_are_readable() {
        let me = std::process::id();
        let t = Instant::now();
        while t.elapsed() < Duration::from_millis(30) {
            std::hint::black_box(0u64);
        }
        assert!(process_cpu(me).unwrap() > Duration::ZERO);
        assert!(address_space(me).unwrap() > 1 << 20);
        assert!(process_cpu(u32::MAX - 1).is_none());
    }

    #[test]
    fn frame_limit_follows_the_limits() {
        let l = Limits::default();
        assert!(frame_limit(&l) > l.max_result_bytes + l.memory_bytes);
        assert!(frame_limit(&l) < proto::MAX_FRAME);
    }
}
