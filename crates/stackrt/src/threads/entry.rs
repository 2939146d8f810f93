//! How a thread of the C-- program starts: the `pthread_create` start routine and argument
//! that set the new OS thread up (its alternate signal stack, `crate::signals::thread_setup`)
//! and enter the C-- function under the program's convention (`crate::mech::enter`, or a
//! direct call under the native back end's System V convention).

use core::ffi::{c_int, c_void};

use crate::base::abi::{is_emitted_abi, is_fixed_stack_abi, THREAD_FAILURE_EXIT_STATUS};
use crate::base::program::{check_abi, program_abi};

/// A `pthread_create` start routine.
pub type StartRoutine = extern "C" fn(*mut c_void) -> *mut c_void;

/// How to start a thread running the C-- function at address `fp` (a C-- function value: an
/// `int`, zero-extended to a pointer; `-no-pie` keeps code below 2 GiB) with argument `arg`:
/// the `pthread_create` start routine and its argument.
///
/// # Safety
/// `fp` must be the address of a C-- function `void *f(void *)` of the linked program.
/// `race` is the thread's race detector state (`crate::race::fork`; null without `--race`);
/// `stack_request` and `handle` are `sthread_create`'s stack size and the new thread's handle
/// (its native stack and its name in messages under `mtss`).
pub unsafe fn thread_start(
    fp: c_int,
    arg: *mut c_void,
    race: *mut crate::race::RaceThread,
    stack_request: c_int,
    handle: c_int,
) -> (StartRoutine, *mut c_void) {
    let abi = program_abi();
    check_abi(abi);
    let addr = fp as u32 as usize;
    if is_emitted_abi(abi) {
        let start = Box::new(EmittedStart {
            abi,
            fp: addr,
            arg: arg as usize,
            race,
            stack_request,
            handle,
        });
        return (emitted_thread_entry, Box::into_raw(start).cast());
    }
    // SAFETY: under the native System V convention a C-- function `void *f(void *)` is an
    // `extern "C" fn(*mut c_void) -> *mut c_void`; the caller guarantees `addr` is one.
    let routine = unsafe { core::mem::transmute::<usize, StartRoutine>(addr) };
    let start = Box::new(NativeStart { routine, arg, race });
    (native_thread_entry, Box::into_raw(start).cast())
}

/// What a thread started under an emitted convention runs: `fp(arg)` entered with `abi`.
struct EmittedStart {
    abi: u32,
    fp: usize,
    arg: usize,
    race: *mut crate::race::RaceThread,
    /// `sthread_create`'s stack size (the native stack under `mtss`) and the thread's handle.
    stack_request: c_int,
    handle: c_int,
}

extern "C" fn emitted_thread_entry(p: *mut c_void) -> *mut c_void {
    // SAFETY: `p` is the `Box<EmittedStart>` leaked by `thread_start` for exactly this thread.
    let start = unsafe { Box::from_raw(p.cast::<EmittedStart>()) };
    crate::signals::thread_setup(is_fixed_stack_abi(start.abi), false);
    crate::race::set_current(start.race);
    if start.abi == crate::base::abi::ABI_MTSS {
        crate::mech::mtss::request_stack(start.stack_request, start.handle);
    }
    // SAFETY: `sthread_create`'s caller guarantees `fp` is a C-- thread entry of this program,
    // compiled with the program's convention `abi`.
    let r = unsafe { crate::mech::enter(start.abi, start.fp, start.arg, 0) };
    crate::race::thread_end();
    match r {
        Some(r) => r as *mut c_void,
        None => crate::base::diag::fail(
            "sthread_create: the thread entry function takes more than two parameters",
            THREAD_FAILURE_EXIT_STATUS,
        ),
    }
}

/// A native-convention thread's entry and argument, run after the thread's signal set-up.
struct NativeStart {
    routine: StartRoutine,
    arg: *mut c_void,
    race: *mut crate::race::RaceThread,
}

extern "C" fn native_thread_entry(p: *mut c_void) -> *mut c_void {
    // SAFETY: `p` is the `Box<NativeStart>` leaked by `thread_start` for exactly this thread.
    let start = unsafe { Box::from_raw(p.cast::<NativeStart>()) };
    crate::signals::thread_setup(true, false);
    crate::race::set_current(start.race);
    let r = (start.routine)(start.arg);
    crate::race::thread_end();
    r
}
