//! Preemption of green threads at checkpoints (`lookahead`): a thread that has run for a whole
//! time slice is made to yield at its next checkpoint, the way Go's `sysmon` poisons a
//! goroutine's stack guard so that its next function prologue takes the slow path.
//!
//! # How a checkpoint is made to take the slow path
//! A monitor thread ([`super::sched`]) looks at every worker once per slice (`STACKRT_TIMESLICE`,
//! default [`DEFAULT_SLICE`]). A worker that has run the same thread since the last look, and
//! is running (not blocked in a system call), gets `SIGURG`. The handler ([`on_preempt`], on
//! the worker's alternate signal stack) looks at the interrupted context. If its pc is in the
//! program's compiled code (between the labels `__cmm_code_begin` and `__cmm_code_end`, see
//! `crate::abi::CODE_BEGIN_SYMBOL`), the chunk register holds the running chunk's header, and
//! the handler writes [`POISON`] over the header's limit word, keeping the real limit in the
//! worker's record ([`ARMED`]). The next checkpoint in that chunk compares below the poisoned
//! limit and calls the overflow handler, which restores the limit ([`disarm`]) and yields
//! ([`at_checkpoint`]) before it links the chunk the checkpoint asked for, as any overflow
//! would. Anywhere else (the runtime, the C library, a C function) the signal does nothing,
//! and the monitor asks again one slice later.
//!
//! Preemption trades memory for fairness: a thread preempted deep in a recursion keeps its
//! chunks while the others run, so threads that would have run one after the other hold their
//! depth at once, as OS threads do. Above the chunk runtime's soft limit (memory pressure) the
//! monitor sends nothing and a request already made is dropped: the running threads finish
//! and give their chunks back.
//!
//! Only checkpoints are preemption points: a loop that makes no checkpoint call (in
//! `lookahead`, only calls on cycles of the call graph, and calls whose reserve does not fit
//! the rest of a chunk, are checkpoints) keeps its worker until it calls the thread library.
//! The fixed-stack conventions have no checkpoints and are not preempted.
//!
//! # Invariant
//! A poisoned limit exists only while its thread runs compiled code on the worker that
//! poisoned it. Every way out of compiled code into the runtime that could hand the chunk on
//! or read its limit disarms first: the overflow and reclaim entries, the thread's exit, and
//! every switch away from the thread (`switch_out`, `yield_direct`). At each of them the
//! chunk is still the thread's: the chunks compiled code unlinked by itself stay in its chain
//! until the runtime's next entry for it.
//!
//! # Deterministic mode
//! Under `STACKRT_SCHED` no monitor runs (time is not reproducible); instead every entry of
//! a checkpoint into the runtime (each overflow and reclaim: the same ones in every run of the
//! same program and input) is a scheduling decision of the seed.

use core::cell::Cell;
use core::ffi::{c_int, c_void};
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::time::Duration;

use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};

use crate::chunk::header::OFF_LIMIT;
use crate::signals::regs;

/// What a requested preemption writes over the running chunk's limit word: no stack pointer is
/// below it, so every checkpoint in the chunk takes its slow path.
pub const POISON: usize = usize::MAX;

/// The default time slice: Go's `forcePreemptNS`.
pub const DEFAULT_SLICE: Duration = Duration::from_millis(10);

/// The signal that asks a worker to preempt its thread (Go's choice too: ignored by default,
/// so a stray one is harmless, and rarely used by programs).
pub const PREEMPT_SIGNAL: Signal = Signal::SIGURG;

/// Whether the chunk runtime's overflow and reclaim entries call [`at_checkpoint`].
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// The compiled code's range, `[begin, end)`, for the handler.
static CODE_BEGIN: AtomicUsize = AtomicUsize::new(0);
static CODE_END: AtomicUsize = AtomicUsize::new(0);

crate::weak::weak_symbol!(
    /// Address of `__cmm_code_begin` (only `lookahead` programs define it), or 0.
    fn code_begin => "__cmm_code_begin", stackrt_code_begin_ref
);
crate::weak::weak_symbol!(
    /// Address of `__cmm_code_end`, or 0.
    fn code_end => "__cmm_code_end", stackrt_code_end_ref
);

thread_local! {
    /// The chunk header whose limit this worker's preemption signal poisoned, and the real
    /// limit; (0, 0) when none. `const`, no destructor: safe in the signal handler.
    static ARMED: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
}

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

/// Sets preemption up for a program whose threads run on chunks (`chunked`) or not, with or
/// without the deterministic scheduler (`det`); returns the slice a monitor should enforce,
/// if any. Ends the program with one line if `STACKRT_TIMESLICE` is malformed.
pub fn configure(chunked: bool, det: bool) -> Option<Duration> {
    let slice = match std::env::var("STACKRT_TIMESLICE") {
        Ok(v) => parse_slice(&v).unwrap_or_else(|e| {
            crate::threads::fail(
                &format!("stackrt: STACKRT_TIMESLICE={v:?}: {e}"),
                crate::abi::THREAD_FAILURE_EXIT_STATUS,
            )
        }),
        Err(_) => Some(DEFAULT_SLICE),
    };
    if !chunked {
        return None;
    }
    if det {
        ACTIVE.store(true, Relaxed);
        return None;
    }
    let (begin, end) = (code_begin(), code_end());
    let slice = slice?;
    if begin == 0 || end <= begin {
        return None;
    }
    CODE_BEGIN.store(begin, Relaxed);
    CODE_END.store(end, Relaxed);
    thread_init();
    let action = SigAction::new(
        SigHandler::SigAction(on_preempt),
        SaFlags::SA_SIGINFO | SaFlags::SA_ONSTACK | SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    // SAFETY: the handler only reads its context and TLS and writes one header word
    // (async-signal-safe); it runs on the worker's alternate stack.
    if unsafe { sigaction(PREEMPT_SIGNAL, &action) }.is_err() {
        return None;
    }
    ACTIVE.store(true, Relaxed);
    Some(slice)
}

/// Whether overflows and reclaims are preemption points (green threads on chunks).
#[inline(always)]
pub fn active() -> bool {
    ACTIVE.load(Relaxed)
}

/// Touches this OS thread's record outside any handler (runtime-facts.md: a TLS variable's
/// first touch must not happen in a signal handler). Called by every worker before it runs
/// threads.
pub fn thread_init() {
    ARMED.with(|a| a.get());
}

/// `SIGURG`: poisons the running chunk's limit if the thread was interrupted in compiled code.
extern "C" fn on_preempt(_sig: c_int, _info: *mut libc::siginfo_t, ctx: *mut c_void) {
    let uc = ctx.cast::<libc::ucontext_t>();
    // SAFETY: the kernel passes a valid ucontext to an SA_SIGINFO handler; gregs holds the
    // interrupted thread's registers.
    let gregs = unsafe { &(*uc).uc_mcontext.gregs };
    let pc = gregs[regs::PC] as usize;
    if pc < CODE_BEGIN.load(Relaxed) || pc >= CODE_END.load(Relaxed) {
        return;
    }
    // SAFETY: in compiled `lookahead` code the chunk register always holds the header of the
    // chunk the thread runs on, a chunk of its chain (the ABI contract, `crate::abi`).
    unsafe { arm(gregs[regs::CHUNK] as usize) };
}

/// Poisons the limit of `header`, first restoring a chunk poisoned before (the thread left it
/// by an inline underflow without reaching a checkpoint).
///
/// # Safety
/// `header` is the header of the running thread's current chunk, and the thread is
/// interrupted in compiled code on this worker.
unsafe fn arm(header: usize) {
    let (old, old_limit) = ARMED.with(|a| a.get());
    if old == header {
        return;
    }
    if old != 0 {
        // SAFETY: a chunk poisoned earlier in this run of compiled code: still in the thread's
        // chain, since no runtime entry happened since (each would have disarmed).
        unsafe { ((old + OFF_LIMIT) as *mut usize).write_volatile(old_limit) };
    }
    let word = (header + OFF_LIMIT) as *mut usize;
    // SAFETY: the caller's guarantee: a mapped header of the running thread's chain.
    let limit = unsafe { word.read_volatile() };
    // SAFETY: as above.
    unsafe { word.write_volatile(POISON) };
    ARMED.with(|a| a.set((header, limit)));
}

/// Restores the limit this worker poisoned, if any; returns whether there was one (the thread
/// was asked to yield). Called on the worker, outside compiled code (where the handler does
/// nothing, so the two never interleave). Inline: every yield asks, and the answer is almost
/// always no.
#[inline(always)]
pub fn disarm() -> bool {
    if ARMED.with(|a| a.get().0) == 0 {
        return false;
    }
    restore_armed()
}

#[inline(never)]
fn restore_armed() -> bool {
    let (header, limit) = ARMED.with(|a| a.get());
    if header == 0 {
        return false;
    }
    // SAFETY: the header is still in the running thread's chain (module docs, invariant).
    unsafe { ((header + OFF_LIMIT) as *mut usize).write_volatile(limit) };
    ARMED.with(|a| a.set((0, 0)));
    true
}

/// A checkpoint entered the runtime (an overflow or a reclaim) while [`active`]: yields if
/// the thread was asked to, and in the deterministic mode lets the seed decide. Returns when
/// the thread runs again, possibly on another worker: the caller must find its thread-locals
/// afresh, out of line.
#[inline(never)]
pub fn at_checkpoint() {
    if disarm() {
        // Under memory pressure a preempted thread would keep its chunks while others grow:
        // the running one goes on, to finish and give them back (as only as many OS threads
        // as CPUs may grow then).
        if !crate::chunk::global::under_memory_pressure() {
            super::sched::preempt_current();
        }
    } else {
        super::sched::det_point();
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
