//! Diagnostics of every layer: allocation-free messages (a fixed-size stack buffer that
//! implements `fmt::Write`, written to stderr with `write(2)`), the two ways a program stops
//! with one line ([`exit_fatal`] for stack errors, [`fail`] for thread-library misuse), and the
//! exit reports `STACKRT_STATS=1` prints ([`add_exit_report`]).
//!
//! `core::fmt` formats without allocating or locking, so the buffer is usable on the overflow
//! path and (for the MMU mechanisms) inside a signal handler.

use core::ffi::c_int;
use core::fmt;
use core::sync::atomic::{AtomicUsize, Ordering};

use super::os::errno;

/// Exit status of a program stopped by a stack error (limit exceeded, out of memory, a broken
/// chunk chain). 70 is `EX_SOFTWARE` of `sysexits.h`.
pub const FATAL_EXIT_STATUS: i32 = 70;

/// A byte buffer of `N` bytes on the stack; text that does not fit is dropped (the last bytes
/// are replaced by `...\n` so a truncated message still ends a line).
pub struct StackBuf<const N: usize> {
    buf: [u8; N],
    len: usize,
    truncated: bool,
}

impl<const N: usize> StackBuf<N> {
    pub const fn new() -> Self {
        StackBuf {
            buf: [0; N],
            len: 0,
            truncated: false,
        }
    }

    /// The text written so far.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// Writes the buffer to file descriptor 2, retrying on `EINTR` and short writes.
    pub fn write_to_stderr(&self) {
        write_all_stderr(self.as_bytes());
    }
}

impl<const N: usize> Default for StackBuf<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> fmt::Write for StackBuf<N> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        if self.truncated {
            return Ok(());
        }
        let room = N - self.len;
        if s.len() <= room {
            self.buf[self.len..self.len + s.len()].copy_from_slice(s.as_bytes());
            self.len += s.len();
        } else {
            self.truncated = true;
            let tail = b"...\n";
            let keep = N.saturating_sub(tail.len());
            let copy = keep.saturating_sub(self.len).min(s.len());
            self.buf[self.len..self.len + copy].copy_from_slice(&s.as_bytes()[..copy]);
            self.len += copy;
            let t = tail.len().min(N - self.len);
            self.buf[self.len..self.len + t].copy_from_slice(&tail[..t]);
            self.len += t;
        }
        Ok(())
    }
}

/// `write(2)` all of `bytes` to stderr; errors other than `EINTR` end the attempt silently
/// (there is nowhere else to report them).
pub fn write_all_stderr(mut bytes: &[u8]) {
    while !bytes.is_empty() {
        // SAFETY: the pointer and length describe a live byte slice; write(2) only reads it.
        let n = unsafe { libc::write(2, bytes.as_ptr().cast(), bytes.len()) };
        if n > 0 {
            bytes = &bytes[n as usize..];
        } else if n < 0 && errno() == libc::EINTR {
            continue;
        } else {
            return;
        }
    }
}

/// Ends the process at once with [`FATAL_EXIT_STATUS`] after `msg` has been printed. Uses
/// `_exit`: other threads may still be running on stack chunks, so no exit handler may run.
pub fn exit_fatal() -> ! {
    // SAFETY: _exit is async-signal-safe and never returns.
    unsafe { libc::_exit(FATAL_EXIT_STATUS) }
}

/// Writes `msg` and a newline to stderr and exits with `status` through the C library's
/// `exit` (flushing stdout): the thread library's errors, which the program could have avoided.
pub fn fail(msg: &str, status: c_int) -> ! {
    let mut line = Vec::with_capacity(msg.len() + 1);
    line.extend_from_slice(msg.as_bytes());
    line.push(b'\n');
    write_all_stderr(&line);
    // SAFETY: `exit` runs the atexit handlers and flushes stdio; it does not return.
    unsafe { libc::exit(status) }
}

/// The C library's text for an errno value.
pub fn errno_text(err: c_int) -> String {
    let mut buf = [0 as libc::c_char; 128];
    // SAFETY: `buf` is writable for its length; the XSI `strerror_r` NUL-terminates on success.
    let rc = unsafe { libc::strerror_r(err, buf.as_mut_ptr(), buf.len()) };
    if rc != 0 {
        return format!("error {err}");
    }
    // SAFETY: strerror_r succeeded, so `buf` holds a NUL-terminated string.
    unsafe { core::ffi::CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

/// A part of the `STACKRT_STATS=1` report printed at exit: writes its lines to stderr.
pub type ExitReport = fn();

/// How many parts the exit report can have (the chunk runtime's statistics, the heap
/// mechanisms' figures; room for more).
const EXIT_REPORTS: usize = 4;

/// The registered parts, in registration order, as `fn()` addresses; 0 marks a free slot.
static REPORTS: [AtomicUsize; EXIT_REPORTS] = [const { AtomicUsize::new(0) }; EXIT_REPORTS];

/// Adds `report` to what is printed at exit (registering the same function twice prints it
/// once). The first registration installs one `atexit` handler that prints every part in
/// registration order. This is how a lower layer's report includes a higher layer's figures
/// without calling up into it: the chunk runtime registers its statistics when it starts, the
/// heap mechanisms theirs when their first thread enters. Ends the program with one line if
/// more than `EXIT_REPORTS` (4) distinct parts are registered (a runtime bug).
pub fn add_exit_report(report: ExitReport) {
    let f = report as usize;
    for (i, slot) in REPORTS.iter().enumerate() {
        match slot.compare_exchange(0, f, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => {
                if i == 0 {
                    // SAFETY: registering a plain extern "C" function with no arguments.
                    unsafe { libc::atexit(print_exit_reports) };
                }
                return;
            }
            Err(existing) if existing == f => return,
            Err(_) => {}
        }
    }
    write_all_stderr(b"stackrt: too many exit reports registered\n");
    exit_fatal()
}

extern "C" fn print_exit_reports() {
    for slot in &REPORTS {
        let f = slot.load(Ordering::Acquire);
        if f == 0 {
            break;
        }
        // SAFETY: every non-zero slot holds an `ExitReport` stored by `add_exit_report`.
        let report = unsafe { core::mem::transmute::<usize, ExitReport>(f) };
        report();
    }
}
