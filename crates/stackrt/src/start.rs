//! Program start, the top layer: the C `main` that sets the runtime up for the program's
//! `__cmm_abi` and `__cmm_threads` (chunk settings, signal handlers, green threads) and enters
//! its `cmm_main`.
//!
//! `main` returns `cmm_main`'s result to the C library's start code, which passes it to
//! `exit`: stdio buffers (C-- programs print with `printf`) are flushed there.
//!
//! Not compiled into unit tests: the test harness has its own `main` and no C-- program.

use core::ffi::c_int;

use crate::base::abi::{is_emitted_abi, is_fixed_stack_abi, UNKNOWN_ABI_EXIT_STATUS};
use crate::base::diag::fail;
use crate::base::program::{check_abi, program_abi};

#[cfg(not(test))]
extern "C" {
    /// The C-- program's `main`.
    fn cmm_main(argc: c_int, argv: *mut *mut core::ffi::c_char) -> c_int;
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
    if abi == crate::base::abi::ABI_MMU {
        crate::chunk::global::set_no_reuse();
    }
    if abi == crate::base::abi::ABI_MMU || abi == crate::base::abi::ABI_MMU_REUSE {
        crate::chunk::global::set_growth();
    }
    if abi == crate::base::abi::ABI_LOOKAHEAD {
        crate::chunk::global::set_growth();
        crate::chunk::global::set_check_word();
    }
    crate::signals::install(abi);
    crate::signals::thread_setup(is_fixed_stack_abi(abi), true);
    // Before green threads start: `main`'s green thread takes the main thread's state.
    crate::race::start();
    let green = crate::base::program::program_threads();
    if green == crate::base::abi::THREADS_GREEN {
        if !crate::green::supports_abi(abi) {
            fail(
                &format!(
                    "cmm runtime: green threads do not support this program's mechanism yet \
                     (__cmm_abi {abi}); compile it with --threads os"
                ),
                UNKNOWN_ABI_EXIT_STATUS,
            );
        }
        crate::green::sched::start(abi);
        if crate::race::relaxed::on() {
            crate::race::relaxed::set_green_hooks(relaxed_park, crate::green::futex::wake_all);
        }
    } else if green != 0 {
        fail(
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

/// Relaxed replay's wait under green threads: the green thread parks on the awaited thread's
/// bell. Compiled code called the race detector between any two instructions, on the thread's
/// own stack: errno is kept.
#[cfg(not(test))]
fn relaxed_park(bell: &core::sync::atomic::AtomicU32, expected: u32, phase: u32) -> bool {
    let _kept = crate::base::os::KeptErrno::new();
    crate::green::futex::wait(bell, expected, phase) == crate::green::sched::Switched::Deferred
}

/// Calls `cmm_main(argc, argv)` under convention `abi` and returns its result.
#[cfg(not(test))]
fn run_main(abi: u32, argc: c_int, argv: *mut *mut core::ffi::c_char) -> c_int {
    if is_emitted_abi(abi) {
        if abi == crate::base::abi::ABI_MTSS {
            crate::mech::mtss::request_main_stack();
        }
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
            None => fail(
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
