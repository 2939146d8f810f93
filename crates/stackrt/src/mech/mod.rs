//! Calling into C-- code under the mechanism an object was compiled with.
//!
//! The compiled object names its convention in the `__cmm_abi` data symbol (ids in
//! [`crate::abi`]); [`enter`] calls a C-- function through the matching entry trampoline of
//! [`crate::arch`]. Program start (`main` → `cmm_main(argc, argv)`) and thread start
//! (`sthread_create` → `fp(arg)`) both go through it.

use core::ffi::c_void;

pub mod heap;
pub mod lookahead;
pub mod mmu;

use crate::abi::{
    ABI_CALLEE_CLEANUP as CALLEE_CLEANUP, ABI_HEAP as HEAP, ABI_HEAP_MALLOC as HEAP_MALLOC,
    ABI_LOOKAHEAD as LOOKAHEAD, ABI_MMU as MMU, ABI_MMU_REUSE as MMU_REUSE,
    ABI_TRADITIONAL as TRADITIONAL,
};
use crate::start::StartRoutine;

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
unsafe fn arg_count(fp: usize) -> usize {
    // SAFETY: the emission stage places a 4-byte argument size right before every C--
    // function's entry (in `.text`, readable); the caller guarantees `fp` is such an entry.
    let bytes = unsafe { core::ptr::read_unaligned((fp - 4) as *const u32) } as usize;
    bytes / SLOT
}

/// Whether [`enter`] knows the convention `abi`.
pub fn is_emitted_abi(abi: u32) -> bool {
    abi == TRADITIONAL
        || abi == CALLEE_CLEANUP
        || abi == LOOKAHEAD
        || abi == MMU
        || abi == MMU_REUSE
        || abi == HEAP
        || abi == HEAP_MALLOC
}

/// Whether C-- code of convention `abi` runs on a fixed (pthread or main) stack: the native
/// back end's, `traditional` and `callee-cleanup`.
pub fn is_fixed_stack_abi(abi: u32) -> bool {
    abi == crate::abi::ABI_NATIVE_SYSV || abi == TRADITIONAL || abi == CALLEE_CLEANUP
}

/// Calls the C-- function at `fp` with its declared number of the arguments `a0, a1` (the
/// number is read from the function's header, see [`arg_count`]) under the emitted convention
/// `abi`, and returns its integer result register. Returns `None` if `abi` is not one of the
/// emission stage's conventions or the function declares more than two parameters.
///
/// # Safety
/// `fp` must be the address of a C-- function compiled by the emission stage for convention
/// `abi` whose parameters are word-sized (ints or pointers), and whose body is safe to run with
/// these arguments.
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
        _ => None,
    }
}

/// What a thread started under an emitted convention runs: `fp(arg)` entered with `abi`.
struct ThreadStart {
    abi: u32,
    fp: usize,
    arg: usize,
}

/// The `pthread_create` start routine and argument that run the C-- function at `fp` with
/// `arg` under the emitted convention `abi` (see [`enter`]).
pub fn thread_routine(abi: u32, fp: usize, arg: *mut c_void) -> (StartRoutine, *mut c_void) {
    let start = Box::new(ThreadStart {
        abi,
        fp,
        arg: arg as usize,
    });
    (emitted_thread_entry, Box::into_raw(start).cast())
}

extern "C" fn emitted_thread_entry(p: *mut c_void) -> *mut c_void {
    // SAFETY: `p` is the `Box<ThreadStart>` leaked by `thread_routine` for exactly this thread.
    let start = unsafe { Box::from_raw(p.cast::<ThreadStart>()) };
    crate::signals::thread_setup(is_fixed_stack_abi(start.abi), false);
    // SAFETY: `sthread_create`'s caller guarantees `fp` is a C-- thread entry of this program,
    // compiled with the program's convention `abi`.
    match unsafe { enter(start.abi, start.fp, start.arg, 0) } {
        Some(r) => r as *mut c_void,
        None => crate::threads::fail(
            "sthread_create: the thread entry function takes more than two parameters",
            crate::abi::THREAD_FAILURE_EXIT_STATUS,
        ),
    }
}
