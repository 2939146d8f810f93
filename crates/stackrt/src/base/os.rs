//! Operating-system helpers every layer uses: the page size, the CPU count, the calling
//! thread's ids and `errno`, a coarse monotonic clock and the futex wait and wake the chunk
//! runtime's memory pressure sleeps on. Plain system calls and vDSO reads: no allocation, no
//! lock, usable on the overflow path.

use core::sync::atomic::AtomicU32;

/// The system page size.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

/// The CPUs online (at least 1).
pub fn cpus() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(cpus).unwrap_or(1).max(1)
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

/// Milliseconds of `CLOCK_MONOTONIC_COARSE` (a vDSO read, no system call).
pub fn monotonic_ms() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000
}

/// Sleeps while `word` holds `expected`, at most `ms` milliseconds, or until a
/// [`futex_wake`] on it (`FUTEX_WAIT`, process-private). Spurious returns are possible: the
/// caller re-checks its condition.
pub fn futex_wait(word: &AtomicU32, expected: u32, ms: u64) {
    let timeout = libc::timespec {
        tv_sec: (ms / 1000) as libc::time_t,
        tv_nsec: ((ms % 1000) * 1_000_000) as libc::c_long,
    };
    // SAFETY: FUTEX_WAIT on an aligned AtomicU32 the caller keeps alive for the call, with a
    // valid relative timeout; the kernel only reads the word.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            &timeout as *const libc::timespec,
            core::ptr::null::<u32>(),
            0u32,
        )
    };
}

/// Wakes up to `n` threads sleeping in [`futex_wait`] on `word`.
pub fn futex_wake(word: &AtomicU32, n: i32) {
    // SAFETY: FUTEX_WAKE on an aligned AtomicU32; no memory is written.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            n,
        )
    };
}
