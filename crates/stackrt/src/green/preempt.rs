//! Preemption of green threads by the monitor's signal: a thread that has run for a whole time
//! slice is preempted where it is, anywhere in compiled code (`super::preempt_async`), or,
//! where it cannot be, under `lookahead` at its next checkpoint, the way Go's `sysmon` poisons
//! a goroutine's stack guard so that its next function prologue takes the slow path.
//!
//! # The signal
//! A monitor thread ([`super::sched`]) looks at every worker once per slice (`STACKRT_TIMESLICE`,
//! default [`DEFAULT_SLICE`]). A worker that has run the same thread since the last look, and
//! is running (not blocked in a system call), gets `SIGURG`. The handler (`on_preempt`, on
//! the worker's alternate signal stack) looks at the interrupted context. If its pc is in the
//! program's compiled code (between the labels `__cmm_code_begin` and `__cmm_code_end`, see
//! `crate::base::abi::CODE_BEGIN_SYMBOL`), it sends the thread to yield there
//! (`super::preempt_async::redirect`) unless the compiler marked the spot or the thread is in a
//! C call. Otherwise, under `lookahead`, the chunk register holds the running chunk's header,
//! and the handler poisons the header's check word, what the checkpoints compare with
//! (`crate::chunk::poison::arm`). The next checkpoint in that chunk compares below it and calls
//! the overflow handler, which calls the scheduler's checkpoint hook
//! (`super::sched::at_checkpoint`: it restores the word and yields) before it links the chunk the checkpoint asked for, as any overflow
//! would. Anywhere else (the runtime, the C library, a C function) the signal does nothing,
//! and the monitor asks again one slice later. The poisoning itself and the hook through which
//! the overflow entry reaches the scheduler belong to the chunk runtime
//! (`crate::chunk::poison`, with the invariant that keeps a poisoned word from escaping);
//! this file is the requesting side.
//!
//! Preemption trades memory for fairness: a thread preempted deep in a recursion keeps its
//! chunks while the others run, so threads that would have run one after the other hold their
//! depth at once, as OS threads do. Above the chunk runtime's soft limit (memory pressure) the
//! monitor sends nothing and a request already made is dropped: the running threads finish
//! and give their chunks back.
//!
//! Programs compiled with `--preempt-loops` also poll at loop heads (`super::sched::polls`,
//! asked by the same monitor round), the only preemption of the native back end's code,
//! which is not marked.
//!
//! # Deterministic mode
//! Under `STACKRT_SCHED` the monitor only preempts a thread that ran [`DET_SLICE`] without a
//! decision point, asynchronously, and the pick after it is not a decision
//! (`crate::green::det::Det::preempted`); every entry of a checkpoint into the runtime (each
//! overflow and reclaim: the same ones in every run of the same program and input) is a
//! scheduling decision of the seed.

use core::ffi::{c_int, c_void};
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::time::Duration;

use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};

use crate::base::ucontext::regs;
use crate::chunk::poison;

/// The default time slice: Go's `forcePreemptNS`.
pub const DEFAULT_SLICE: Duration = Duration::from_millis(10);

/// The deterministic mode's slice: a thread that runs this long without reaching a decision
/// point (a spin-wait) is preempted, and the thread runnable longest runs, without a decision
/// of the seed (`crate::green::det::Det::preempted`). Long, so that a thread that computes
/// rarely meets it: where the program's results depend on where it stops, a run is no longer
/// reproducible.
pub const DET_SLICE: Duration = Duration::from_millis(50);

/// The signal that asks a worker to preempt its thread (Go's choice too: ignored by default,
/// so a stray one is harmless, and rarely used by programs).
pub const PREEMPT_SIGNAL: Signal = Signal::SIGURG;

/// The compiled code's range, `[begin, end)`, for the handler.
static CODE_BEGIN: AtomicUsize = AtomicUsize::new(0);
static CODE_END: AtomicUsize = AtomicUsize::new(0);
/// Whether the program is a `lookahead` one (its checkpoints can be poisoned).
static LOOKAHEAD: AtomicBool = AtomicBool::new(false);

/// Parses `STACKRT_TIMESLICE`: a number with the unit `us`, `ms` (the default) or `s`; `0`
/// or `off` turns preemption off (`None`).
pub fn parse_slice(s: &str) -> Result<Option<Duration>, String> {
    let t = s.trim();
    if t.eq_ignore_ascii_case("off") {
        return Ok(None);
    }
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let n: u64 = t[..digits]
        .parse()
        .map_err(|_| "not a time slice (examples: 10ms, 500us, 1s, off)".to_string())?;
    let d = match &t[digits..] {
        "" | "ms" => Duration::from_millis(n),
        "us" => Duration::from_micros(n),
        "s" => Duration::from_secs(n),
        _ => return Err("not a time slice (examples: 10ms, 500us, 1s, off)".to_string()),
    };
    if d.is_zero() {
        return Ok(None);
    }
    if d < Duration::from_micros(100) {
        return Err("a time slice below 100us would preempt more often than threads run".into());
    }
    Ok(Some(d))
}

/// How checkpoints take part in scheduling, as [`configure`] set it up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preemption {
    /// Checkpoints are not scheduling points.
    Off,
    /// Every checkpoint that enters the runtime is a decision of the deterministic scheduler
    /// (`lookahead`); a monitor preempts a thread that ran [`DET_SLICE`] without a decision
    /// point, if the compiled code is marked (`Some`).
    Deterministic(Option<Duration>),
    /// A monitor signals the worker of a thread that ran a whole slice: the thread is
    /// preempted where it is (`super::preempt_async`), or under `lookahead` at its next
    /// checkpoint (its chunk limit poisoned) where it cannot be; its loops are asked to yield
    /// too, as under [`Preemption::Polls`], when compiled with polls.
    Slice(Duration),
    /// A monitor asks a thread that ran for a whole slice to yield at its next loop head
    /// (`super::sched::polls`) only: programs whose compiled code is not marked (the native
    /// back end), or where the signal handler cannot be installed.
    Polls(Duration),
}

/// Sets preemption up for a `lookahead` program or another, with or without the deterministic
/// scheduler (`det`). Under `lookahead` the caller registers its checkpoint hook
/// (`crate::chunk::poison::set_checkpoint_hook`) unless the answer is [`Preemption::Off`] or
/// [`Preemption::Polls`]; it runs a monitor for a slice. Ends the program with one line if
/// `STACKRT_TIMESLICE` is malformed.
pub fn configure(lookahead: bool, det: bool) -> Preemption {
    let slice = match std::env::var("STACKRT_TIMESLICE") {
        Ok(v) => parse_slice(&v).unwrap_or_else(|e| {
            crate::base::diag::fail(
                &format!("stackrt: STACKRT_TIMESLICE={v:?}: {e}"),
                crate::base::abi::THREAD_FAILURE_EXIT_STATUS,
            )
        }),
        Err(_) => Some(DEFAULT_SLICE),
    };
    if det {
        // Not with `STACKRT_TIMESLICE=off`; its length is the mode's own.
        let watchdog = slice.is_some() && install(false);
        return Preemption::Deterministic(watchdog.then_some(DET_SLICE));
    }
    let Some(slice) = slice else {
        return Preemption::Off;
    };
    if install(lookahead) {
        Preemption::Slice(slice)
    } else {
        Preemption::Polls(slice)
    }
}

/// Installs the preemption signal's handler for a program whose compiled code is marked:
/// threads are preempted anywhere in it, and where they cannot be, under `lookahead`
/// (`poisons`), at their next checkpoint. False if the code is not marked (the native back
/// end) or the handler cannot be installed.
fn install(poisons: bool) -> bool {
    let Some((begin, end)) = crate::base::program::code_range() else {
        return false;
    };
    CODE_BEGIN.store(begin, Relaxed);
    CODE_END.store(end, Relaxed);
    LOOKAHEAD.store(poisons, Relaxed);
    if poisons {
        poison::thread_init();
    }
    super::preempt_async::init();
    let action = SigAction::new(
        SigHandler::SigAction(on_preempt),
        SaFlags::SA_SIGINFO | SaFlags::SA_ONSTACK | SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    // SAFETY: the handler only reads its context and TLS and writes TLS words, its context
    // and one header word (async-signal-safe); it runs on the worker's alternate stack.
    unsafe { sigaction(PREEMPT_SIGNAL, &action) }.is_ok()
}

/// `SIGURG`: if the thread was interrupted in compiled code, sends it to yield where it is
/// (`super::preempt_async::redirect`) or, where it cannot (a marked range, a C call), under
/// `lookahead` poisons the running chunk's limit.
extern "C" fn on_preempt(_sig: c_int, _info: *mut libc::siginfo_t, ctx: *mut c_void) {
    let uc = ctx.cast::<libc::ucontext_t>();
    // SAFETY: the kernel passes a valid ucontext to an SA_SIGINFO handler; gregs holds the
    // interrupted thread's registers, which the kernel loads back from it on return.
    let gregs = unsafe { &mut (*uc).uc_mcontext.gregs };
    let pc = gregs[regs::PC] as usize;
    if pc < CODE_BEGIN.load(Relaxed) || pc >= CODE_END.load(Relaxed) {
        return;
    }
    // SAFETY: the context of this OS thread, interrupted in compiled code, which only green
    // threads run while a monitor signals.
    if unsafe { super::preempt_async::redirect(gregs) } {
        return;
    }
    if LOOKAHEAD.load(Relaxed) {
        // SAFETY: in compiled `lookahead` code the chunk register always holds the header of
        // the chunk the thread runs on, a chunk of its chain (the ABI contract,
        // `crate::base::abi`).
        unsafe { poison::arm(gregs[regs::CHUNK] as usize) };
    }
}

/// Whether the OS thread `tid` of this process is running or runnable (`R` in
/// `/proc/self/task/TID/stat`); true if that cannot be read. The monitor does not signal a
/// worker blocked in a system call: the signal could not preempt anything there, and would
/// cut short a `sleep` the program asked for.
pub fn os_thread_running(tid: i32) -> bool {
    let Ok(stat) = std::fs::read(format!("/proc/self/task/{tid}/stat")) else {
        return true;
    };
    // The state follows the command name, which is in parentheses and may hold anything.
    match stat.iter().rposition(|&b| b == b')') {
        Some(i) => stat.get(i + 2).is_none_or(|&s| s == b'R'),
        None => true,
    }
}

/// Sends the preemption signal to the worker OS thread `thread` (a `pthread_t`).
pub fn signal(thread: libc::pthread_t) {
    // A worker's thread lives as long as the process.
    let _ = nix::sys::pthread::pthread_kill(thread, PREEMPT_SIGNAL);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_parse() {
        assert_eq!(parse_slice("10ms"), Ok(Some(Duration::from_millis(10))));
        assert_eq!(parse_slice("25"), Ok(Some(Duration::from_millis(25))));
        assert_eq!(parse_slice("500us"), Ok(Some(Duration::from_micros(500))));
        assert_eq!(parse_slice("1s"), Ok(Some(Duration::from_secs(1))));
        assert_eq!(parse_slice("0"), Ok(None));
        assert_eq!(parse_slice("off"), Ok(None));
        assert!(parse_slice("10 ms").is_err());
        assert!(parse_slice("fast").is_err());
        assert!(parse_slice("50us").is_err());
        assert!(parse_slice("").is_err());
    }

    #[test]
    fn the_running_test_thread_is_running() {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        assert!(os_thread_running(tid));
    }

    #[test]
    fn a_sleeping_thread_is_not_running() {
        let (tx, rx) = std::sync::mpsc::channel();
        let t = std::thread::spawn(move || {
            // SAFETY: gettid has no preconditions.
            tx.send(unsafe { libc::gettid() }).unwrap();
            std::thread::sleep(Duration::from_millis(500));
        });
        let tid = rx.recv().unwrap();
        std::thread::sleep(Duration::from_millis(100));
        assert!(!os_thread_running(tid));
        t.join().unwrap();
    }
}
