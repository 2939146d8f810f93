//! Calling into C-- code under the mechanism an object was compiled with.
//!
//! The compiled object names its convention in the `__cmm_abi` data symbol (ids in
//! [`crate::base::abi`]); [`enter`] calls a C-- function through the matching entry trampoline of
//! [`arch`]. Program start (`main` → `cmm_main(argc, argv)`, `crate::start`) and thread
//! start (`sthread_create` → `fp(arg)`, `crate::threads::entry`) both go through it.

pub mod arch;
pub mod callback;
pub mod heap;
pub mod lookahead;
pub mod mmu;
pub mod mtss;

use crate::base::abi::{
    ABI_CALLEE_CLEANUP as CALLEE_CLEANUP, ABI_HEAP as HEAP, ABI_HEAP_MALLOC as HEAP_MALLOC,
    ABI_LOOKAHEAD as LOOKAHEAD, ABI_MMU as MMU, ABI_MMU_REUSE as MMU_REUSE,
    ABI_TRADITIONAL as TRADITIONAL,
};

extern "C" {
    fn stackrt_enter_traditional(fp: usize, a0: usize, a1: usize, nargs: usize) -> usize;
    fn stackrt_enter_callee_cleanup(fp: usize, a0: usize, a1: usize, nargs: usize) -> usize;
}

/// Size of an argument slot of the emitted conventions (a pushed word).
const SLOT: usize = core::mem::size_of::<usize>();

/// The number of word arguments the C-- function at `fp` expects: the emission stage writes
/// its argument bytes in the 4 bytes before its entry.
///
/// # Safety
/// `fp` must be the entry of a function compiled by the emission stage.
pub unsafe fn arg_count(fp: usize) -> usize {
    // SAFETY: the emission stage places a 4-byte argument size right before every C--
    // function's entry (in `.text`, readable); the caller guarantees `fp` is such an entry.
    let bytes = unsafe { core::ptr::read_unaligned((fp - 4) as *const u32) } as usize;
    bytes / SLOT
}

/// As [`enter`] under `lookahead` for a green thread's entry: never returns when it calls the
/// function (`done` gets its result, see [`lookahead::enter_then`]); returns only when the
/// function declares more than two parameters.
///
/// # Safety
/// As [`enter`] for `lookahead`; and the caller's frames may be discarded.
#[inline(always)]
pub unsafe fn enter_lookahead_then(fp: usize, a0: usize, done: extern "C" fn(usize) -> !) {
    // SAFETY: forwarded from the caller.
    let nargs = unsafe { arg_count(fp) };
    if nargs <= 2 {
        // SAFETY: as above.
        unsafe { lookahead::enter_then(fp, a0, 0, nargs, done) }
    }
}

/// Calls the C-- function at `fp` with its declared number of the arguments `a0, a1` (the
/// number is read from the function's header, see `arg_count`) under the emitted convention
/// `abi`, and returns its integer result register. Returns `None` if `abi` is not one of the
/// emission stage's conventions or the function declares more than two parameters.
///
/// # Safety
/// `fp` must be the address of a C-- function compiled by the emission stage for convention
/// `abi` whose parameters are word-sized (ints or pointers), and whose body is safe to run with
/// these arguments.
#[inline]
pub unsafe fn enter(abi: u32, fp: usize, a0: usize, a1: usize) -> Option<usize> {
    // SAFETY: forwarded from the caller.
    let nargs = unsafe { arg_count(fp) };
    if nargs > 2 {
        return None;
    }
    match abi {
        // SAFETY: the caller guarantees `fp` follows the traditional convention; the trampoline
        // saves every register the C ABI requires and restores the stack pointer.
        TRADITIONAL => Some(unsafe { stackrt_enter_traditional(fp, a0, a1, nargs) }),
        // SAFETY: as above for the callee-cleanup convention; the trampoline recovers its stack
        // pointer whatever number of arguments the callee pops.
        CALLEE_CLEANUP => Some(unsafe { stackrt_enter_callee_cleanup(fp, a0, a1, nargs) }),
        // SAFETY: as above for the lookahead convention (a fresh first chunk per entry).
        LOOKAHEAD => Some(unsafe { lookahead::enter(fp, a0, a1, nargs) }),
        // SAFETY: as above for the MMU conventions (a fresh first chunk with a guard page; the
        // thread got its alternate signal stack from `crate::signals::thread_setup`).
        MMU | MMU_REUSE => Some(unsafe { mmu::enter(fp, a0, a1, nargs) }),
        HEAP | HEAP_MALLOC => {
            if abi == HEAP_MALLOC {
                heap::set_malloc();
            }
            // SAFETY: as above for the heap conventions (a fresh entry block; C calls run on
            // this native stack).
            Some(unsafe { heap::enter(fp, a0, a1, nargs) })
        }
        // SAFETY: as above for the MTSS convention (a fresh native stack of the region; C calls
        // run on this OS stack, the handler stack).
        crate::base::abi::ABI_MTSS => Some(unsafe { mtss::enter(fp, a0, a1, nargs) }),
        _ => None,
    }
}
