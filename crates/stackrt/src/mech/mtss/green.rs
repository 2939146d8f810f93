//! `mtss` under green threads: a green thread's native stack carved from the region by the
//! scheduler, its entry on that stack, its floor published while it is parked, and its stack
//! retired once the thread switched away for good.
//!
//! # A green thread's native stack
//!
//! ```text
//!   high  +--------------------------------+
//!         | the green entry's Rust frames  |  ENTRY_ROOM: the context's start frame,
//!         | (the scheduler's entry, the    |  `green_entry`, `run_body`, [`enter`] and the
//!         |  trampoline's saved registers) |  trampoline (checked at every entry)
//!   top   +--------------------------------+  the record's `top`: the C-- function's frame
//!         | C-- frames ...                 |  starts here, as on an OS thread's native stack
//!         |                                |
//!         | free: lendable while parked    |
//!   low   +--------------------------------+
//! ```
//!
//! The native stack is what `sthread_create` asked for (or [`super::DEFAULT_THREAD_STACK`]),
//! plus [`ENTRY_ROOM`]. The thread's end runs Rust code (the trampoline's return, the switch
//! away) below `top` once its C-- code returned, so a floor never lies above
//! `top - EXIT_ROOM`.
//!
//! # Who lends, and when (the protocol)
//!
//! A green thread lends while it is *parked* (switched out to wait: a join, a contended mutex,
//! a condition): the scheduler calls [`parked`] on the worker it switched back to, with the
//! thread's saved stack pointer, *before* it releases the lock that lets wakers see the thread
//! (`crate::green::sched`'s `After::Park`). The floor is published under the space's lock.
//! Before any worker switches to a thread again (its scheduler loop or a direct switch), it
//! calls [`resumed`], which withdraws the floor under the same lock. So every lend from a
//! parked thread's stack happens while no worker runs it, and the limit word the lender raised
//! under the lock is read by the thread only after the worker took that lock. A thread that
//! yields or is preempted is runnable and lends nothing; a thread running on pages lends below
//! the point where it left its native stack, as on OS threads.
//!
//! # Waiting for room
//!
//! An overflow that finds no room while another thread is active (not parked, not waiting
//! for room itself) waits, as on OS threads, but a green worker cannot block: the overflow
//! handler (`stackrt_mtss_overflow`, on the worker's handler stack) asks the scheduler for a
//! yield through [`wait_hook`], which leaves the switch to the handler (as the thread
//! library's stub does), and the handler saves the thread's context in its record (its stack
//! has no room), switches, and when the thread is resumed calls the overflow handler again
//! with the same arguments ([`resume_hook`] completes the switch first). When no other thread
//! is active, nothing can free room: the program stops with the out-of-room line.
//!
//! `main`'s green thread runs on a native stack the trampoline carves as on OS threads; the
//! scheduler's hook ([`set_hook`]) learns its record so that it lends while parked too.

use core::cell::Cell;
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering::*};

use super::{lock, MtssThread, DEFAULT_THREAD_STACK};
use crate::base::diag::{fail, FATAL_EXIT_STATUS};

/// Bytes above a green thread's C-- stack for its entry's Rust frames (module docs): 96 bytes
/// on x86-64 and 128 on i686 down to the trampoline's stack pointer, measured 2026-11-27 (also
/// under `--race` and the deterministic scheduler), with a wide margin; [`take_entry`] stops
/// the program with one line if they ever need more.
pub const ENTRY_ROOM: usize = 512;

/// Bytes below `top` that the thread's end may use after its C-- code returned: never lent.
pub const EXIT_ROOM: usize = 1024;

/// Green threads run `mtss` code ([`set_hook`] was called).
static GREEN: AtomicBool = AtomicBool::new(false);

/// The scheduler's hooks (`set_hook`): a record the trampoline carved for the running green
/// thread (`main`'s, or a C callback's); a yield left to the overflow handler (true if it was
/// left; false if the thread cannot switch); the completion of the switch that resumed it.
static HOOK: AtomicUsize = AtomicUsize::new(0);
static WAIT: AtomicUsize = AtomicUsize::new(0);
static RESUME: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// The record [`enter`] hands to the trampoline's `stackrt_mtss_thread_enter`.
    static ENTRY: Cell<*mut MtssThread> = const { Cell::new(core::ptr::null_mut()) };
}

/// Whether the program's threads are green ([`set_hook`] was called at the scheduler's start).
pub fn on() -> bool {
    GREEN.load(Relaxed)
}

/// The green scheduler's start: `hook` learns records the trampoline carves on this worker's
/// OS thread (`main`'s native stack); `wait` and `resume` serve an overflow that waits for
/// room (module docs).
pub fn set_hook(hook: fn(*mut MtssThread), wait: fn() -> bool, resume: fn()) {
    HOOK.store(hook as usize, Relaxed);
    WAIT.store(wait as usize, Relaxed);
    RESUME.store(resume as usize, Relaxed);
    GREEN.store(true, Relaxed);
}

/// The scheduler's yield for an overflow that waits for room (module docs): true if the
/// switch was left to the overflow handler.
pub(super) fn wait_hook() -> bool {
    let h = WAIT.load(Relaxed);
    // SAFETY: stored from a `fn() -> bool` by `set_hook` (non-zero once `on()`).
    h != 0 && unsafe { core::mem::transmute::<usize, fn() -> bool>(h) }()
}

/// Completes the switch that resumed a thread waiting for room.
pub(super) fn resume_hook() {
    let h = RESUME.load(Relaxed);
    if h != 0 {
        // SAFETY: stored from a `fn()` by `set_hook`.
        let resume = unsafe { core::mem::transmute::<usize, fn()>(h) };
        resume();
    }
}

/// Called by `stackrt_mtss_thread_enter` for a record it carved.
pub(super) fn entered(rec: *mut MtssThread) {
    let h = HOOK.load(Relaxed);
    if h != 0 {
        // SAFETY: `h` was stored from a `fn(*mut MtssThread)` by `set_hook`.
        let hook = unsafe { core::mem::transmute::<usize, fn(*mut MtssThread)>(h) };
        hook(rec);
    }
}

/// Carves a green thread's native stack of `request` bytes (0: the default) plus
/// [`ENTRY_ROOM`] and makes its record. Returns the record and the stack's top (where the
/// thread's context starts).
pub fn carve(request: usize, handle: i32) -> (*mut MtssThread, usize) {
    let size = if request > 0 {
        request
    } else {
        DEFAULT_THREAD_STACK
    } + ENTRY_ROOM;
    let mut sh = lock();
    let carved = match sh.space.carve(size) {
        Ok(c) => c,
        Err(e) => {
            drop(sh);
            fail(
                &format!(
                    "stackrt: mtss: no room in the stack region for green thread {handle}'s \
                     stack of {size} bytes: {e}"
                ),
                FATAL_EXIT_STATUS,
            )
        }
    };
    super::PEAK_USED.fetch_max(sh.space.region_used(), Relaxed);
    let rec = super::register(
        &mut sh,
        carved,
        carved.high - ENTRY_ROOM,
        handle,
        core::ptr::null_mut(),
        true,
    );
    (rec, carved.high)
}

/// Calls the C-- function at `fp` with `nargs` (0..=2) of `a0, a1` for the green thread whose
/// record is `rec`, on its native stack below [`ENTRY_ROOM`] (the caller runs at its top).
///
/// # Safety
/// `rec` is a record [`carve`] made whose stack the calling code runs on, and `fp` a C--
/// function compiled with `mtss` whose parameters are `nargs` words.
#[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
pub unsafe fn enter(rec: *mut MtssThread, fp: usize, a0: usize, a1: usize, nargs: usize) -> usize {
    ENTRY.with(|e| e.set(rec));
    // SAFETY: the caller's guarantee; the trampoline takes `rec` through `take_entry` instead
    // of carving a stack, and returns here on this stack.
    unsafe { super::enter(fp, a0, a1, nargs) }
}

/// The trampoline's entry on behalf of [`enter`]: the record it was given, if any. Stops the
/// program if the entry's frames reached the thread's C-- stack (`sp`: the trampoline's
/// stack pointer, all of them above it).
pub(super) fn take_entry(sp: usize) -> Option<*mut MtssThread> {
    let rec = ENTRY.with(|e| e.replace(core::ptr::null_mut()));
    if rec.is_null() {
        return None;
    }
    // SAFETY: a record `carve` made, alive until `retire`.
    let top = unsafe { (*rec).top };
    if sp < top {
        fail(
            &format!(
                "stackrt: mtss: a green thread's entry used {} bytes of its stack, more than \
                 the {ENTRY_ROOM} bytes kept for it",
                top + ENTRY_ROOM - sp
            ),
            FATAL_EXIT_STATUS,
        );
    }
    Some(rec)
}

/// The thread of `rec` parked, its context saved at `sp` (module docs, the protocol): its
/// stack below the floor may be lent until [`resumed`], and it no longer counts as active (an
/// overflow waiting for room gives up when no thread is). A thread that runs on pages keeps
/// the floor it published when it left its native stack.
///
/// # Safety
/// `rec` is the live record of a switched-out green thread that no worker runs, and no waker
/// can see it yet.
pub unsafe fn parked(rec: *mut MtssThread, sp: usize) {
    // SAFETY: the caller's guarantee; only the atomic flag is written while others may read
    // the record's limit.
    let r = unsafe { &*rec };
    let mut sh = lock();
    sh.active -= 1;
    if r.frames.is_empty() {
        let floor = sp.saturating_sub(sh.margin).min(r.top - EXIT_ROOM);
        let _ = sh.space.set_floor(r.id, Some(floor));
    }
    r.floor_published.store(true, Release);
    super::wake_waiters(&sh);
}

/// A worker is about to run the thread of `rec` again: its floor, if [`parked`] published
/// one, is withdrawn under the space's lock (so the thread's next entry check reads any limit
/// a lender raised meanwhile).
///
/// # Safety
/// `rec` is the live record of a switched-out green thread this worker now owns.
#[inline]
pub unsafe fn resumed(rec: *mut MtssThread) {
    // SAFETY: the caller's guarantee.
    let r = unsafe { &*rec };
    if !r.floor_published.load(Acquire) {
        return;
    }
    let mut sh = lock();
    if r.frames.is_empty() {
        let _ = sh.space.set_floor(r.id, None);
    }
    sh.active += 1;
    r.floor_published.store(false, Relaxed);
}

/// The green thread of `rec` ended and switched away for good: its pages go back, its stack
/// is retired (a donor until a carve needs its space), its record is freed.
///
/// # Safety
/// `rec` is a record [`carve`] made whose thread ended; nothing runs on its stack any more.
pub unsafe fn retire(rec: *mut MtssThread) {
    // SAFETY: the caller's guarantee: the record is live and nobody else uses it.
    let r = unsafe { Box::from_raw(rec) };
    {
        let mut sh = lock();
        for f in r.frames.iter().rev() {
            super::give_back(&mut sh, f.grant);
        }
        let _ = sh.space.retire(r.id);
        sh.owners[r.id.0 as usize] = None;
        sh.active -= 1;
    }
}
