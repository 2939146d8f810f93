//! C calls in progress on this OS thread, as the emission stage's green-thread code counts
//! them: before every call of a C function (not the thread library's, not the runtime's
//! entries) it adds one to the thread-local `stackrt_ccalls` word 0 ("started"), after the
//! call one to word 1 ("finished"); two `inc`s of `fs:`/`gs:`-relative memory, no atomic
//! operation. The green-thread monitor reads both for every worker: a worker whose thread has
//! been inside the same C call (started unchanged, started != finished) for a whole poll
//! interval is handed on to a spare OS thread even if the call computes rather than blocks
//! (`crate::green::sched::handoff`). A C callback into C-- (`crate::mech::callback`) counts as
//! the C call finishing while the callback runs and starting again when it returns, so a
//! callback that switches green threads leaves both OS threads' counts balanced.

use core::sync::atomic::{AtomicU32, Ordering::Relaxed};

crate::tls_block!("stackrt_ccalls", 16);

/// The calling OS thread's two counters.
fn counters() -> &'static [AtomicU32; 2] {
    let at = crate::tls_address!("stackrt_ccalls") as *const [AtomicU32; 2];
    // SAFETY: the block is 16 bytes, 16-byte aligned, zero-initialised and lives as long as
    // the OS thread; the monitor reads it only through atomics.
    unsafe { &*at }
}

/// The calling OS thread's counters' address, for a monitor on another OS thread ([`read`]).
pub fn address() -> usize {
    counters() as *const [AtomicU32; 2] as usize
}

/// `(started, finished)` of the OS thread whose [`address`] is `at` (0: none yet).
pub fn read(at: usize) -> (u32, u32) {
    if at == 0 {
        return (0, 0);
    }
    // SAFETY: `at` came from `address` of an OS thread that never ends (a worker).
    let c = unsafe { &*(at as *const [AtomicU32; 2]) };
    (c[0].load(Relaxed), c[1].load(Relaxed))
}

/// A C callback starts running C-- code: the C call that called it counts as finished.
pub fn callback_begins() {
    let c = &counters()[1];
    c.store(c.load(Relaxed).wrapping_add(1), Relaxed);
}

/// The callback returns to C: a C call is running again.
pub fn callback_ends() {
    let c = &counters()[0];
    c.store(c.load(Relaxed).wrapping_add(1), Relaxed);
}
