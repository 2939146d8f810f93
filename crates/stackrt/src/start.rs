//! Program start: the C `main` that enters the C-- program's `cmm_main`, and the choice of how
//! C-- functions are entered (from `main` and as thread entries) by the object's `__cmm_abi`.
//!
//! `main` returns `cmm_main`'s result to the C library's start code, which passes it to
//! `exit`: stdio buffers (C-- programs print with `printf`) are flushed there.
//!
//! Not compiled into unit tests: the test harness has its own `main` and no C-- program.

use core::ffi::{c_int, c_void};

use crate::abi::{ABI_NATIVE_SYSV, UNKNOWN_ABI_EXIT_STATUS};

/// A `pthread_create` start routine.
pub type StartRoutine = extern "C" fn(*mut c_void) -> *mut c_void;

#[cfg(not(test))]
extern "C" {
    /// Defined by every compiled C-- object: its calling convention (see `crate::abi`).
    static __cmm_abi: u32;
    /// The C-- program's `main`.
    fn cmm_main(argc: c_int, argv: *mut *mut core::ffi::c_char) -> c_int;
}

/// The calling convention of the linked C-- program.
#[cfg(not(test))]
pub fn program_abi() -> u32 {
    // SAFETY: `__cmm_abi` is a 32-bit constant defined by the compiled object and never
    // written; reading it by value is a plain load.
    unsafe { core::ptr::read_volatile(&raw const __cmm_abi) }
}

/// Unit tests link no C-- object: they see the native convention.
#[cfg(test)]
pub fn program_abi() -> u32 {
    ABI_NATIVE_SYSV
}

/// Stops the program with one line on stderr when `abi` is not a convention this runtime knows.
pub fn check_abi(abi: u32) {
    if abi != ABI_NATIVE_SYSV && !crate::mech::is_emitted_abi(abi) {
        crate::threads::fail(
            &format!(
                "cmm runtime: the program's __cmm_abi is {abi}, which this runtime does not know \
                 (object and runtime from different compiler versions?)"
            ),
            UNKNOWN_ABI_EXIT_STATUS,
        );
    }
}

/// The C entry point of every C-- program, reached through the weak `main` below.
///
/// # Safety
/// Called only by the C library's start code, with its `argc` and `argv`.
#[cfg(not(test))]
#[no_mangle]
pub unsafe extern "C" fn stackrt_main(argc: c_int, argv: *mut *mut core::ffi::c_char) -> c_int {
    let abi = program_abi();
    check_abi(abi);
    if abi == crate::abi::ABI_MMU {
        crate::chunk::global::set_no_reuse();
    }
    if abi == crate::abi::ABI_LOOKAHEAD {
        crate::chunk::global::set_growth();
    }
    crate::signals::install(abi);
    crate::signals::thread_setup(crate::mech::is_fixed_stack_abi(abi), true);
    let green = crate::green::program_threads();
    if green == crate::green::THREADS_GREEN {
        if !crate::green::supports_abi(abi) {
            crate::threads::fail(
                &format!(
                    "cmm runtime: green threads do not support this program's mechanism yet \
                     (__cmm_abi {abi}); compile it with --threads os"
                ),
                UNKNOWN_ABI_EXIT_STATUS,
            );
        }
        crate::green::sched::start(abi);
    } else if green != 0 {
        crate::threads::fail(
            &format!("cmm runtime: the program's __cmm_threads is {green}, which this runtime does not know"),
            UNKNOWN_ABI_EXIT_STATUS,
        );
    }
    let r = run_main(abi, argc, argv);
    if green != 0 {
        // `main` is a green thread and may have moved to another worker's OS thread: end the
        // process here rather than return into the C library's start code.
        // SAFETY: exit runs the atexit handlers (stdio flush) and ends the process.
        unsafe { libc::exit(r) }
    }
    r
}

/// Calls `cmm_main(argc, argv)` under convention `abi` and returns its result.
#[cfg(not(test))]
fn run_main(abi: u32, argc: c_int, argv: *mut *mut core::ffi::c_char) -> c_int {
    if crate::mech::is_emitted_abi(abi) {
        // SAFETY: the object was compiled by the emission stage with convention `abi`, and
        // `cmm_main` takes (int argc, char **argv) (the lowering's contract).
        let r = unsafe {
            crate::mech::enter(
                abi,
                cmm_main as *const () as usize,
                argc as usize,
                argv as usize,
            )
        };
        return match r {
            Some(r) => r as c_int,
            None => crate::threads::fail(
                "cmm runtime: cmm_main does not take (int argc, char **argv)",
                UNKNOWN_ABI_EXIT_STATUS,
            ),
        };
    }
    // SAFETY: the ABI is the native System V one, so `cmm_main` is an ordinary C function of
    // this signature; argc/argv come from the C library's start code unchanged.
    unsafe { cmm_main(argc, argv) }
}

// `main` is a weak symbol so that Rust test executables linking this crate as an rlib keep
// their own `main`; in a C-- program it is the only `main`.
// Register contract: none of its own; a tail jump, so `stackrt_main` sees the C library's
// arguments (argc, argv) exactly as `main` received them (registers on x86-64, stack on i686).
#[cfg(all(not(test), any(target_arch = "x86_64", target_arch = "x86")))]
core::arch::global_asm!(
    ".text",
    ".weak main",
    ".type main, @function",
    "main:",
    "jmp {start}",
    ".size main, . - main",
    start = sym stackrt_main,
    options(att_syntax),
);

/// How to start a thread running the C-- function at address `fp` (a C-- function value: an
/// `int`, zero-extended to a pointer; `-no-pie` keeps code below 2 GiB) with argument `arg`:
/// the `pthread_create` start routine and its argument.
///
/// # Safety
/// `fp` must be the address of a C-- function `void *f(void *)` of the linked program.
pub unsafe fn thread_start(fp: c_int, arg: *mut c_void) -> (StartRoutine, *mut c_void) {
    let abi = program_abi();
    check_abi(abi);
    let addr = fp as u32 as usize;
    if crate::mech::is_emitted_abi(abi) {
        return crate::mech::thread_routine(abi, addr, arg);
    }
    // SAFETY: under the native System V convention a C-- function `void *f(void *)` is an
    // `extern "C" fn(*mut c_void) -> *mut c_void`; the caller guarantees `addr` is one.
    let routine = unsafe { core::mem::transmute::<usize, StartRoutine>(addr) };
    let start = Box::new(NativeStart { routine, arg });
    (native_thread_entry, Box::into_raw(start).cast())
}

/// A native-convention thread's entry and argument, run after the thread's signal set-up.
struct NativeStart {
    routine: StartRoutine,
    arg: *mut c_void,
}

extern "C" fn native_thread_entry(p: *mut c_void) -> *mut c_void {
    // SAFETY: `p` is the `Box<NativeStart>` leaked by `thread_start` for exactly this thread.
    let start = unsafe { Box::from_raw(p.cast::<NativeStart>()) };
    crate::signals::thread_setup(true, false);
    (start.routine)(start.arg)
}
