//! Limit poisoning: how a higher layer makes a running thread's next checkpoint enter the
//! runtime, and the hook through which the chunk runtime then hands control up.
//!
//! This is Go's `stackguard0 = stackPreempt` in the chunk runtime's terms: the stack allocator
//! never calls the scheduler. A requester (the green threads' preemption signal) writes
//! [`POISON`] over the running chunk's check word ([`arm`], keeping its value in this OS
//! thread's record; `super::header::OFF_CHECK`: what every checkpoint compares with, the
//! limit plus the program's bias); the next checkpoint in that chunk compares below it and
//! calls the overflow entry. The limit word itself is never poisoned, so the runtime's own
//! reads of it need no care. The overflow and reclaim entries call the checkpoint hook first, if one is
//! registered ([`set_checkpoint_hook`]; the green scheduler's, which restores the check word with
//! [`disarm`] and yields), and then go on as for any overflow. Checking for a hook costs the
//! hot path one relaxed load, as the flag it replaces did.
//!
//! # Invariant
//! A poisoned check word exists only while its thread runs compiled code on the OS thread that
//! poisoned it. Every way out of compiled code into the runtime that could hand the chunk on
//! or read its check word disarms first: the overflow and reclaim entries (through the hook), the
//! thread's exit, and every switch away from the thread. At each of them the chunk is still
//! the thread's: the chunks compiled code unlinked by itself stay in its chain until the
//! runtime's next entry for it.

use core::cell::Cell;
use core::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use super::header::OFF_CHECK;

/// What a requested preemption writes over the running chunk's check word: no stack pointer is
/// below it, so every checkpoint in the chunk takes its slow path.
pub const POISON: usize = usize::MAX;

/// What a checkpoint that entered the runtime calls before the runtime does its own work, on the
/// handler stack: it must not switch; it answers whether the thread should (then the
/// registered switch runs on the thread's own stack, see `super::handler`).
pub type CheckpointHook = fn() -> bool;

/// The registered hook as a `fn()` address, or 0 (no hook: checkpoints are not preemption
/// points, the OS-thread and fixed-stack programs).
static CHECKPOINT_HOOK: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// The chunk header whose check word this OS thread's requester poisoned, and its value;
    /// (0, 0) when none. `const`, no destructor: safe in a signal handler.
    static ARMED: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
}

/// Makes every overflow entry call `hook` first, and `switch` on the thread's own stack when
/// the hook answered `true` (set once at program start, before any thread runs compiled
/// code). `switch` may switch to another green thread and return on another OS thread.
pub fn set_checkpoint_hook(hook: CheckpointHook, switch: fn()) {
    super::handler::set_switch_hook(switch);
    CHECKPOINT_HOOK.store(hook as usize, Relaxed);
}

/// The checkpoint hook, if one is registered. One relaxed load.
#[inline(always)]
pub fn checkpoint_hook() -> Option<CheckpointHook> {
    let h = CHECKPOINT_HOOK.load(Relaxed);
    if h == 0 {
        return None;
    }
    // SAFETY: a non-zero value was stored by `set_checkpoint_hook` from a `CheckpointHook`.
    Some(unsafe { core::mem::transmute::<usize, CheckpointHook>(h) })
}

/// Whether a checkpoint hook is registered (poisoning may be in use).
#[inline(always)]
pub fn hooked() -> bool {
    CHECKPOINT_HOOK.load(Relaxed) != 0
}

/// Touches this OS thread's record outside any handler (runtime-facts.md: a TLS variable's
/// first touch must not happen in a signal handler). Called by every OS thread that may be
/// poisoned before it runs compiled code.
pub fn thread_init() {
    ARMED.with(|a| a.get());
}

/// Poisons the check word of `header`, first restoring a chunk poisoned before (the thread left it
/// by an inline underflow without reaching a checkpoint). Async-signal-safe: TLS and header
/// words only.
///
/// # Safety
/// `header` is the header of the running thread's current chunk, and the thread is
/// interrupted in compiled code on this OS thread.
pub unsafe fn arm(header: usize) {
    let (old, old_check) = ARMED.with(|a| a.get());
    if old == header {
        return;
    }
    if old != 0 {
        // SAFETY: a chunk poisoned earlier in this run of compiled code: still in the thread's
        // chain, since no runtime entry happened since (each would have disarmed).
        unsafe { ((old + OFF_CHECK) as *mut usize).write_volatile(old_check) };
    }
    let word = (header + OFF_CHECK) as *mut usize;
    // SAFETY: the caller's guarantee: a mapped header of the running thread's chain.
    let limit = unsafe { word.read_volatile() };
    // SAFETY: as above.
    unsafe { word.write_volatile(POISON) };
    ARMED.with(|a| a.set((header, limit)));
}

/// Restores the check word this OS thread's requester poisoned, if any; returns whether there was
/// one (the thread was asked to yield). Called outside compiled code (where the requester's
/// handler does nothing, so the two never interleave). Inline: every yield asks, and the
/// answer is almost always no.
#[inline(always)]
pub fn disarm() -> bool {
    if ARMED.with(|a| a.get().0) == 0 {
        return false;
    }
    restore_armed()
}

#[inline(never)]
fn restore_armed() -> bool {
    let (header, limit) = ARMED.with(|a| a.get());
    if header == 0 {
        return false;
    }
    // SAFETY: the header is still in the running thread's chain (module docs, invariant).
    unsafe { ((header + OFF_CHECK) as *mut usize).write_volatile(limit) };
    ARMED.with(|a| a.set((0, 0)));
    true
}
