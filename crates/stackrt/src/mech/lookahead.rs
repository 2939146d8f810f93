//! The `lookahead` mechanism's side of the runtime (ABI [`crate::base::abi::ABI_LOOKAHEAD`], thesis
//! 3.4.3): entering C-- code on a fresh stack chunk, and the native stack size of its threads.
//!
//! The assembly (entry trampoline and overflow handler; the underflow is inline in the emitted
//! code) is in `crate::mech::arch::{x86_64,i686}_lookahead`; the chunks themselves in
//! [`crate::chunk`].

use core::ffi::c_int;

extern "C" {
    fn stackrt_enter_lookahead(fp: usize, a0: usize, a1: usize, nargs: usize) -> usize;
    fn stackrt_green_enter_lookahead(
        fp: usize,
        a0: usize,
        a1: usize,
        nargs: usize,
        done: extern "C" fn(usize) -> !,
    ) -> !;
}

/// Bytes of native (pthread) stack a `lookahead` thread gets, whatever `fpStackSize` the
/// program asks for: C-- code runs on chunks, the native stack only holds the entry
/// trampoline and the handlers' calls into the chunk runtime (a few hundred bytes; its fatal
/// error path formats into 1 KiB buffers). The thesis's trampoline likewise allocates its own
/// `THREAD_STACK_SIZE` and has no `fpStackSize` member (listing 3.12).
pub const NATIVE_THREAD_STACK: usize = 128 * 1024;

/// The stack size `sthread_create` asks pthreads for under `abi`: `requested` for fixed-stack
/// conventions, [`NATIVE_THREAD_STACK`] under the chunked ones (`lookahead`, `mmu`,
/// `mmu-reuse`), the heap ones and `mtss` (their native stack is the C stack of C calls; under
/// `mtss` the request sizes the thread's stack in the region instead).
pub fn thread_stack_request(abi: u32, requested: c_int) -> c_int {
    if abi == crate::base::abi::ABI_LOOKAHEAD
        || abi == crate::base::abi::ABI_MTSS
        || abi == crate::base::abi::ABI_MMU
        || abi == crate::base::abi::ABI_MMU_REUSE
        || abi == crate::base::abi::ABI_HEAP
        || abi == crate::base::abi::ABI_HEAP_MALLOC
    {
        NATIVE_THREAD_STACK as c_int
    } else {
        requested
    }
}

/// Calls the C-- function at `fp` with `nargs` (0..=2) of `a0, a1` on a fresh stack chunk.
///
/// # Safety
/// `fp` must be a C-- function compiled with `lookahead` whose parameters are `nargs` words.
pub unsafe fn enter(fp: usize, a0: usize, a1: usize, nargs: usize) -> usize {
    // SAFETY: the caller guarantees `fp` follows the lookahead convention; the trampoline
    // preserves the C ABI's callee-saved registers and returns on the native stack.
    unsafe { stackrt_enter_lookahead(fp, a0, a1, nargs) }
}

/// A green thread's entry: calls the C-- function at `fp` with `nargs` (0..=2) of `a0, a1` on
/// a fresh stack chunk, gives the chunks back when it returns and calls `done` with its result
/// on the thread's stack just below the entry frames. Keeps nothing for a return, so every
/// green thread's entry frames are smaller (`crate::green::stacks::ENTRY_ROOM`).
///
/// # Safety
/// As [`enter`]; and the caller's frames may be discarded: `done` never returns.
#[inline(always)]
pub unsafe fn enter_then(
    fp: usize,
    a0: usize,
    a1: usize,
    nargs: usize,
    done: extern "C" fn(usize) -> !,
) -> ! {
    // SAFETY: the caller's guarantee, as for `enter`; the trampoline never returns.
    unsafe { stackrt_green_enter_lookahead(fp, a0, a1, nargs, done) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_lookahead_overrides_the_requested_stack() {
        assert_eq!(
            thread_stack_request(crate::base::abi::ABI_TRADITIONAL, 1 << 20),
            1 << 20
        );
        assert_eq!(
            thread_stack_request(crate::base::abi::ABI_LOOKAHEAD, 48 << 20),
            NATIVE_THREAD_STACK as c_int
        );
    }
}
