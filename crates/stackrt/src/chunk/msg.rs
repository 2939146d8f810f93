//! Allocation-free messages: a fixed-size stack buffer that implements `fmt::Write`, written
//! to stderr with `write(2)`, and the fatal-error exit used by the chunk runtime.
//!
//! `core::fmt` formats without allocating or locking, so these are usable on the overflow path
//! and (for the MMU mechanisms) inside a signal handler.

use core::fmt;

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

/// The calling thread's `errno`.
pub fn errno() -> i32 {
    // SAFETY: __errno_location returns the calling thread's errno slot, valid for the thread's
    // lifetime.
    unsafe { *libc::__errno_location() }
}

/// The kernel thread id of the caller.
pub fn gettid() -> i32 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

/// Ends the process at once with [`FATAL_EXIT_STATUS`] after `msg` has been printed. Uses
/// `_exit`: other threads may still be running on stack chunks, so no exit handler may run.
pub fn exit_fatal() -> ! {
    // SAFETY: _exit is async-signal-safe and never returns.
    unsafe { libc::_exit(FATAL_EXIT_STATUS) }
}
