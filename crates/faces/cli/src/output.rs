//! Standard output of the CLI verbs. A reader that stops early (`toolshed search x | head -1`)
//! is not an error: the rest of the output is dropped quietly and the verb finishes normally
//! (audit flushed, exit status unchanged) instead of panicking on the broken pipe. Any other
//! failure to write (a full disk) is reported once on stderr and ends with exit status 2.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

/// Standard output can no longer be written.
static CLOSED: AtomicBool = AtomicBool::new(false);
/// It failed for another reason than the reader going away.
static FAILED: AtomicBool = AtomicBool::new(false);

/// Writes one line to standard output; see the module docs for what happens on errors.
pub fn write_line(args: std::fmt::Arguments<'_>) {
    write(args, true);
}

/// Writes text without a line end and flushes it (streamed text); as [`write_line`] on errors.
pub fn write_text(args: std::fmt::Arguments<'_>) {
    write(args, false);
}

fn write(args: std::fmt::Arguments<'_>, line: bool) {
    if CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut out = std::io::stdout().lock();
    let end: &[u8] = if line { b"\n" } else { b"" };
    if let Err(e) = out
        .write_fmt(args)
        .and_then(|()| out.write_all(end))
        .and_then(|()| if line { Ok(()) } else { out.flush() })
    {
        CLOSED.store(true, Ordering::Relaxed);
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            FAILED.store(true, Ordering::Relaxed);
            eprintln!("error: writing to standard output: {e}");
        }
    }
}

/// Whether writing failed for another reason than a closed pipe.
pub fn failed() -> bool {
    FAILED.load(Ordering::Relaxed)
}

/// `print!` (flushed) that tolerates a closed standard output (see [`write_text`]).
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::output::write_text(format_args!($($arg)*))
    };
}

/// `println!` that tolerates a closed standard output (see [`write_line`]).
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::output::write_line(format_args!($($arg)*))
    };
}
