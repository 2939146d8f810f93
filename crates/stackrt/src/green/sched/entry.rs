//! A green thread's first and last frames: the entry a new context starts in, the call of the
//! thread's function under the program's convention, and the end with its result.
//!
//! Under `lookahead` these frames sit at the top of the thread's stack block, above its first
//! chunk, for as long as the thread lives, so they are kept small: the entry calls the
//! mechanism's green trampoline (`crate::mech::enter_lookahead_then`), which keeps nothing
//! for a return and calls [`done`] once the function returned and its chunks went back. The
//! other conventions return to [`green_entry`] through `crate::mech::enter` or a C call.

use core::ffi::c_void;

use super::{complete_switch, current, fail, sched, switch_out, After, Green};

const TOO_MANY_PARAMETERS: &str =
    "sthread_create: the thread entry function takes more than two parameters";

/// The stack pointer a new context starts with: the thread's entry. Runs on the green stack.
pub(super) extern "C" fn green_entry(g: usize) -> ! {
    // SAFETY: `g` is the record `prepare` passed, alive until joined after it ended.
    let gr = unsafe { &*(g as *const Green) };
    complete_switch();
    let s = sched();
    if s.first_chunk_in_block {
        // SAFETY: the thread's own record; nothing writes its result before it ends.
        let arg = unsafe { *gr.arg_or_result.get() };
        // SAFETY: `sthread_create`'s caller guarantees `fp` is a C-- thread entry of this
        // program, compiled with `lookahead` (the only convention with blocks holding their
        // first chunk); these frames are never returned to.
        unsafe { crate::mech::enter_lookahead_then(gr.fp, arg, done) };
        fail(TOO_MANY_PARAMETERS);
    }
    done(run_body(gr))
}

/// The thread's function returned `result`: keep it for the joiner and end the thread (on
/// whichever worker runs it now).
extern "C" fn done(result: usize) -> ! {
    let g = current();
    // SAFETY: only this thread writes its result, before it ends.
    unsafe { *g.arg_or_result.get() = result };
    let _ = switch_out(After::Exit, 0);
    unreachable!("an ended green thread was resumed")
}

/// Calls the thread's function under the program's convention (but `lookahead`'s, see
/// [`green_entry`]).
#[inline(never)]
fn run_body(g: &Green) -> usize {
    let s = sched();
    // SAFETY: the thread's own record; nothing writes its result before it ends.
    let arg = unsafe { *g.arg_or_result.get() };
    if s.mtss {
        // SAFETY: `sthread_create`'s caller guarantees `fp` is a C-- thread entry compiled
        // with `mtss`.
        let nargs = unsafe { crate::mech::arg_count(g.fp) };
        if nargs > 2 {
            fail(TOO_MANY_PARAMETERS);
        }
        // SAFETY: as above; `prepare` made the record whose stack this code runs on.
        return unsafe { crate::mech::mtss::green::enter(g.mtss(), g.fp, arg, 0, nargs) };
    }
    if crate::base::abi::is_emitted_abi(s.abi) {
        // SAFETY: `sthread_create`'s caller guarantees `fp` is a C-- thread entry of this
        // program, compiled with its convention.
        match unsafe { crate::mech::enter(s.abi, g.fp, arg, 0) } {
            Some(r) => r,
            None => fail(TOO_MANY_PARAMETERS),
        }
    } else {
        // SAFETY: under the native System V convention the entry is a C function
        // `void *f(void *)` (the caller's guarantee).
        let f = unsafe {
            core::mem::transmute::<usize, extern "C" fn(*mut c_void) -> *mut c_void>(g.fp)
        };
        f(arg as *mut c_void) as usize
    }
}
