//! What the chunk runtime tells a higher layer about offered first chunks: when a thread
//! outgrows the first chunk it was offered (a green thread's stack block,
//! [`super::chain::ThreadChain::offer_first_chunk`]), the bytes below that chunk's top the
//! failing checkpoint needed. The green threads register a hook at start and size the next
//! blocks of the same entry function from it (`crate::green::sizing`); the chunk runtime
//! knows nothing of green threads.

use core::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// What the hook is given: the bytes below the first chunk's top (its header) that the
/// checkpoint needed: the stack in use at the checkpoint plus its reserve.
pub type FirstOverflowHook = fn(usize);

/// The registered hook as a `fn` address, or 0.
static HOOK: AtomicUsize = AtomicUsize::new(0);

/// Registers `hook` (once, at program start, before any thread runs compiled code).
pub fn set_first_overflow_hook(hook: FirstOverflowHook) {
    HOOK.store(hook as usize, Relaxed);
}

/// Calls the hook, if one is registered, with `bytes` (on the overflow handler's stack: the
/// hook must not switch threads).
pub(super) fn first_overflow(bytes: usize) {
    let h = HOOK.load(Relaxed);
    if h != 0 {
        // SAFETY: a non-zero value was stored by `set_first_overflow_hook` from a
        // `FirstOverflowHook`.
        let hook = unsafe { core::mem::transmute::<usize, FirstOverflowHook>(h) };
        hook(bytes);
    }
}
