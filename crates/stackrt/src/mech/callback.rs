//! C code calling C-- back: the runtime half of the C entries (`cmm_codegen::emit::c_entry`).
//!
//! A C-- program names a function by its C entry, a System V / cdecl function that calls
//! [`stackrt_callback`] with the C-- function and its two arguments; this enters the function
//! through the mechanism's entry trampoline ([`super::enter`]), as a thread start does, but
//! nested inside the running thread, which is somewhere in C (a `qsort` its C-- code called):
//!
//! * `traditional`, `callee-cleanup`: the function runs on the stack C runs on (the thread's
//!   own); nothing to set aside.
//! * `lookahead`, `mmu`, `mmu-reuse`: the thread's chunk chain is set aside and the function
//!   runs on a chain of its own, which its exit gives back (to this OS thread's caches); then
//!   the thread's chain is restored (`crate::chunk::global::nest_chain`).
//! * `heap`, `heap-malloc`: the thread's per-thread heap state is set aside; the function's
//!   entry block comes from the same lists (`super::heap::nest`).
//! * When C itself runs on the OS thread's handler stack (green threads' C calls under
//!   `lookahead`, every C call under the MMU mechanisms: `stackrt_ccall`), the handler stack
//!   is lowered below C's frames for the callback's handlers and C calls, and the thread is
//!   pinned to its OS thread until the callback returns (`crate::chunk::handler::nest`): a green
//!   thread does not switch then (a yield goes on at once; a wait that would switch stops the
//!   program with one line, `crate::green`).

use core::ffi::c_char;

use crate::base::abi::{is_emitted_abi, ABI_HEAP, ABI_HEAP_MALLOC};
use crate::base::diag::{fail, FATAL_EXIT_STATUS};

/// Calls the C-- function `fp` with `a0, a1` (as many as it takes, at most two words) for the C
/// code that called its C entry, under the program's mechanism; returns its result register.
///
/// # Safety
/// Called only by a C entry the compiler emitted, with `fp` its C-- function.
#[no_mangle]
pub unsafe extern "C" fn stackrt_callback(fp: usize, a0: usize, a1: usize) -> usize {
    let abi = crate::base::program::program_abi();
    let here = 0u8;
    let sp = core::hint::black_box(core::ptr::addr_of!(here)) as usize;
    let handler = crate::chunk::handler::nest(sp);
    let chunked = abi == crate::base::abi::ABI_LOOKAHEAD
        || abi == crate::base::abi::ABI_MMU
        || abi == crate::base::abi::ABI_MMU_REUSE;
    let heap = abi == ABI_HEAP || abi == ABI_HEAP_MALLOC;
    let chain = chunked.then(crate::chunk::global::nest_chain);
    let heap_state = heap.then(super::heap::nest);
    crate::base::ccalls::callback_begins();
    // SAFETY: `fp` is the C-- function of a C entry, compiled for `abi` (the caller's
    // guarantee); its parameters are at most two words (the compiler gives other functions an
    // entry that never calls this).
    let result = unsafe { super::enter(abi, fp, a0, a1) };
    crate::base::ccalls::callback_ends();
    if let Some(saved) = heap_state {
        super::heap::unnest(saved);
    }
    if let Some(saved) = chain {
        crate::chunk::global::unnest_chain(saved);
    }
    crate::chunk::handler::unnest(handler);
    match result {
        Some(r) => r,
        None => fail(
            &format!(
                "stackrt: C called back a C-- function under __cmm_abi {abi}{}, which cannot be \
                 entered from C",
                if is_emitted_abi(abi) {
                    " with more than two parameters"
                } else {
                    ""
                }
            ),
            FATAL_EXIT_STATUS,
        ),
    }
}

/// What the C entry of a C-- function C cannot call does when C calls it: one line naming the
/// function, exit 70.
///
/// # Safety
/// `name` is the NUL-terminated name the compiler put beside the entry.
#[no_mangle]
pub unsafe extern "C" fn stackrt_callback_unsupported(name: *const c_char) -> ! {
    // SAFETY: the compiler's string, NUL-terminated and static.
    let name = unsafe { core::ffi::CStr::from_ptr(name) }.to_string_lossy();
    fail(
        &format!(
            "stackrt: C called the C-- function `{name}` through its address, but C can call only \
             C-- functions of at most two int, char or pointer parameters that return one of \
             those or nothing"
        ),
        FATAL_EXIT_STATUS,
    )
}
