//! The system-call filter of a worker process: a seccomp-BPF allow-list of what a worker that
//! reads its pipe, writes its pipe, allocates memory and keeps time needs. Everything else
//! (opening files, sockets, starting programs or threads, changing its own rlimits, signal
//! handlers) fails with `EPERM`; a system call of a foreign architecture kills the process.
//!
//! The filter is installed with `PR_SET_NO_NEW_PRIVS` and `SECCOMP_FILTER_FLAG_TSYNC`, so it
//! covers every thread of the worker, and it cannot be removed. [`self_test`] proves it: the
//! worker's `--self-test` mode installs it and tries the forbidden calls.

use std::io;

const BPF_LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
const BPF_JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const BPF_RET_K: u16 = 0x06; // BPF_RET | BPF_K
const RET_ALLOW: u32 = 0x7fff_0000;
const RET_ERRNO: u32 = 0x0005_0000;
const RET_KILL_PROCESS: u32 = 0x8000_0000;
const SECCOMP_SET_MODE_FILTER: libc::c_uint = 1;
const SECCOMP_FILTER_FLAG_TSYNC: libc::c_uint = 1;
/// Offsets in `struct seccomp_data`.
const DATA_NR: u32 = 0;
const DATA_ARCH: u32 = 4;

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xc000_003e;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xc000_00b7;

/// The system calls a worker may make once it runs scripts.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn allowed() -> Vec<libc::c_long> {
    let mut v = vec![
        libc::SYS_read,
        libc::SYS_write,
        libc::SYS_writev,
        libc::SYS_ppoll,
        libc::SYS_close,
        libc::SYS_mmap,
        libc::SYS_munmap,
        libc::SYS_mremap,
        libc::SYS_mprotect,
        libc::SYS_madvise,
        libc::SYS_brk,
        libc::SYS_futex,
        libc::SYS_clock_gettime,
        libc::SYS_clock_nanosleep,
        libc::SYS_sched_yield,
        libc::SYS_getrandom,
        libc::SYS_gettid,
        libc::SYS_getpid,
        libc::SYS_tgkill,
        libc::SYS_rt_sigreturn,
        libc::SYS_rt_sigprocmask,
        libc::SYS_sigaltstack,
        libc::SYS_exit,
        libc::SYS_exit_group,
    ];
    #[cfg(target_arch = "x86_64")]
    v.extend([libc::SYS_poll, libc::SYS_nanosleep]);
    v
}

fn stmt(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump_eq(k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter {
        code: BPF_JEQ_K,
        jt,
        jf,
        k,
    }
}

/// The BPF program: check the architecture, then allow the listed calls, else `EPERM`.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub fn program() -> Vec<libc::sock_filter> {
    let mut p = vec![
        stmt(BPF_LD_W_ABS, DATA_ARCH),
        jump_eq(AUDIT_ARCH, 1, 0),
        stmt(BPF_RET_K, RET_KILL_PROCESS),
        stmt(BPF_LD_W_ABS, DATA_NR),
    ];
    for nr in allowed() {
        // Match: skip the "next comparison" chain straight to ALLOW, one instruction ahead.
        p.push(jump_eq(nr as u32, 0, 1));
        p.push(stmt(BPF_RET_K, RET_ALLOW));
    }
    p.push(stmt(BPF_RET_K, RET_ERRNO | libc::EPERM as u32));
    p
}

/// Installs the filter on every thread of the process. Irreversible.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub fn install() -> io::Result<()> {
    let prog = program();
    let fprog = libc::sock_fprog {
        len: u16::try_from(prog.len()).map_err(io::Error::other)?,
        filter: prog.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: plain prctl/seccomp system calls; `fprog` points at `prog`, which outlives them
    // (the kernel copies the program).
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(io::Error::last_os_error());
        }
        let rc = libc::syscall(
            libc::SYS_seccomp,
            SECCOMP_SET_MODE_FILTER,
            SECCOMP_FILTER_FLAG_TSYNC,
            &fprog as *const libc::sock_fprog,
        );
        match rc {
            0 => Ok(()),
            -1 => Err(io::Error::last_os_error()),
            tid => Err(io::Error::other(format!(
                "thread {tid} could not take the system-call filter"
            ))),
        }
    }
}

/// No filter exists for this architecture: refuse to run scripts rather than run them open.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub fn install() -> io::Result<()> {
    Err(io::Error::other(
        "no system-call filter for this architecture",
    ))
}

/// Installs the filter, then tries what it must forbid. Returns one line per probe; `Err` names
/// every probe that was not refused.
pub fn self_test() -> Result<Vec<String>, String> {
    install().map_err(|e| format!("cannot install the filter: {e}"))?;
    let mut report = Vec::new();
    let mut leaks = Vec::new();
    let mut probe = |what: &str, refused: bool| {
        report.push(format!(
            "{what}: {}",
            if refused { "refused" } else { "ALLOWED" }
        ));
        if !refused {
            leaks.push(what.to_owned());
        }
    };
    probe("open", std::fs::File::open("/proc/self/status").is_err());
    probe(
        "create",
        std::fs::File::create("/tmp/toolshed-sandbox-probe").is_err(),
    );
    // SAFETY: plain system calls with valid (or null) arguments; results are only compared.
    let socket = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
    probe("socket", socket < 0);
    let prog = c"/bin/true";
    let argv = [prog.as_ptr(), std::ptr::null()];
    let envp = [std::ptr::null()];
    // SAFETY: null-terminated argument and environment arrays of valid C strings.
    let exec = unsafe { libc::execve(prog.as_ptr(), argv.as_ptr(), envp.as_ptr()) };
    probe("execve", exec < 0);
    probe("thread", std::thread::Builder::new().spawn(|| ()).is_err());
    let lim = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: a valid rlimit struct.
    let raised = unsafe { libc::setrlimit(libc::RLIMIT_CPU, &lim) };
    probe("setrlimit", raised < 0);
    if leaks.is_empty() {
        Ok(report)
    } else {
        Err(format!("not refused: {}", leaks.join(", ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_checks_the_architecture_and_ends_with_eperm() {
        let p = program();
        assert_eq!(p[0].k, DATA_ARCH);
        assert_eq!(p[1].k, AUDIT_ARCH);
        assert_eq!(p[2].k, RET_KILL_PROCESS);
        let last = p.last().unwrap();
        assert_eq!(last.code, BPF_RET_K);
        assert_eq!(last.k, RET_ERRNO | libc::EPERM as u32);
        let nrs: Vec<u32> = p
            .iter()
            .filter(|i| i.code == BPF_JEQ_K)
            .map(|i| i.k)
            .collect();
        for forbidden in [
            libc::SYS_openat,
            libc::SYS_socket,
            libc::SYS_execve,
            libc::SYS_clone,
        ] {
            assert!(!nrs.contains(&(forbidden as u32)), "{forbidden}");
        }
        assert!(nrs.contains(&(libc::SYS_read as u32)));
    }
}
