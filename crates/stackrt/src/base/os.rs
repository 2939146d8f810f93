//! Operating-system helpers every layer uses: the page size, the CPU count, reserving address
//! space, the calling thread's ids and `errno`, a coarse monotonic clock and the futex wait and
//! wake the chunk runtime's memory pressure sleeps on. Plain system calls and vDSO reads: no allocation, no
//! lock, usable on the overflow path.

use core::cell::Cell;
use core::sync::atomic::{AtomicU32, AtomicUsize, Ordering::Relaxed};

/// The page size once read (0 before): it never changes, and thread creation asks for it.
static PAGE_SIZE: AtomicUsize = AtomicUsize::new(0);

/// The system's minimum thread stack (`PTHREAD_STACK_MIN`): what an OS thread gets at least
/// whatever a program asks for, and so a green thread on a fixed stack too.
pub fn min_thread_stack() -> usize {
    // SAFETY: sysconf has no preconditions.
    let min = unsafe { libc::sysconf(libc::_SC_THREAD_STACK_MIN) };
    if min > 0 {
        min as usize
    } else {
        libc::PTHREAD_STACK_MIN
    }
}

/// The system page size.
pub fn page_size() -> usize {
    let cached = PAGE_SIZE.load(Relaxed);
    if cached != 0 {
        return cached;
    }
    // SAFETY: sysconf has no memory-safety preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let p = if p > 0 { p as usize } else { 4096 };
    PAGE_SIZE.store(p, Relaxed);
    p
}

/// A fresh anonymous private read-write mapping of `bytes` with no swap reserved
/// (`MAP_NORESERVE`: only the pages touched cost memory), or `None` if the system refuses it.
pub fn map_noreserve(bytes: usize) -> Option<*mut u8> {
    map_anonymous(bytes, libc::MAP_NORESERVE)
}

/// A fresh private anonymous read-write mapping of `bytes` with its pages already present
/// (`MAP_POPULATE`: one system call instead of a fault per page), or `None` if the system
/// refuses it.
pub fn map_populated(bytes: usize) -> Option<*mut u8> {
    map_anonymous(bytes, libc::MAP_POPULATE)
}

/// A fresh private anonymous read-write mapping of `bytes` with the extra mmap `flags`.
fn map_anonymous(bytes: usize, flags: libc::c_int) -> Option<*mut u8> {
    // SAFETY: a fresh anonymous private mapping affects no existing memory; the result is
    // checked.
    let p = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            bytes,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | flags,
            -1,
            0,
        )
    };
    (p != libc::MAP_FAILED).then_some(p.cast())
}

/// The CPUs online (at least 1).
pub fn cpus() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(cpus).unwrap_or(1).max(1)
}

/// The calling thread's `errno`.
pub fn errno() -> i32 {
    // SAFETY: `errno_slot` is the calling OS thread's errno, valid for the thread's lifetime.
    unsafe { *errno_slot() }
}

/// The calling OS thread's errno slot: `__errno_location()`, asked once per OS thread (a call
/// through the PLT; a green thread's switch keeps and restores errno two or three times). Never
/// kept across a switch: a green thread may resume on another OS thread.
#[inline(always)]
pub fn errno_slot() -> *mut i32 {
    let slot = ERRNO.with(Cell::get);
    if !slot.is_null() {
        return slot;
    }
    errno_slot_slow()
}

#[cold]
fn errno_slot_slow() -> *mut i32 {
    // SAFETY: __errno_location has no preconditions; its result is the calling thread's slot.
    let slot = unsafe { libc::__errno_location() };
    ERRNO.with(|e| e.set(slot));
    slot
}

thread_local! {
    /// The calling OS thread's kernel id once asked for (0 before). `const`, no destructor:
    /// readable in a signal handler.
    static TID: Cell<i32> = const { Cell::new(0) };
    /// The calling OS thread's errno slot once asked for (null before); as `TID`.
    static ERRNO: Cell<*mut i32> = const { Cell::new(core::ptr::null_mut()) };
}

/// Keeps the calling thread's `errno` across a call that may switch green threads: saved when
/// made, written back when dropped, through `__errno_location()` evaluated then (after a switch
/// the thread may run on another OS thread, whose slot it must write). The C library keeps one
/// errno per OS thread; green threads share their workers' OS threads, so every thread-library
/// call and every preemption that can switch keeps one of these, and the thread's errno follows
/// it wherever it resumes (a call that returns an error returns it, as `sthread_join` does,
/// and leaves errno alone, as pthreads does on success).
pub struct KeptErrno(i32);

impl KeptErrno {
    #[inline(always)]
    pub fn new() -> Self {
        KeptErrno(errno())
    }

    /// Keeps `value` instead of the current errno (a call that goes on after a switch made
    /// elsewhere and kept the caller's errno itself).
    pub fn with(value: i32) -> Self {
        KeptErrno(value)
    }

    /// The kept value.
    pub fn value(&self) -> i32 {
        self.0
    }
}

impl Default for KeptErrno {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for KeptErrno {
    #[inline(always)]
    fn drop(&mut self) {
        // SAFETY: the calling OS thread's errno slot, valid for the thread's lifetime.
        unsafe { *errno_slot() = self.0 };
    }
}

/// The kernel thread id of the caller. Read once per OS thread: a green thread's chain records
/// its worker's id at every thread start, and a system call there was a tenth of the cost of
/// creating a thread. (A process that forks keeps the parent's value in the forking thread of
/// the child: only messages use it.)
pub fn gettid() -> i32 {
    let cached = TID.with(Cell::get);
    if cached != 0 {
        return cached;
    }
    // SAFETY: gettid has no arguments and cannot fail.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) as i32 };
    TID.with(|t| t.set(tid));
    tid
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
