//! Asynchronous preemption of green threads, the signal handler's side: a thread interrupted
//! anywhere in compiled code (a loop without calls, a recursion between checkpoints) is sent,
//! when the handler returns, to a stub that saves every register and yields, as Go's
//! asynchronous preemption does (golang/go#24543). C-- has no garbage collector, so every
//! instruction of compiled code is a safe point once all registers are saved, except inside
//! the ranges the compiler lists (`crate::base::abi::NO_PREEMPT_SECTION`): a mechanism's
//! call sequences, prologues and epilogues and every C call, which may hold a value of the
//! worker's OS thread (a thread-local free list, the worker's C stack, the C-call counters)
//! across instructions while the thread could resume on another worker.
//!
//! # The path of a preemption
//! 1. The monitor sends the preemption signal ([`super::preempt`]); its handler calls
//!    [`redirect`], which checks that the thread runs compiled code outside those ranges and
//!    is in no C call (`crate::base::ccalls`), writes the interrupted pc and sp into this OS
//!    thread's `stackrt_async_tls` and points the context at `stackrt_async_stub` on this
//!    worker's preemption stack ([`worker_init`]). Nothing else: no allocation, no lock.
//! 2. The stub (`crate::green::arch::*_preempt`) saves the general-purpose registers, the
//!    flags and the x87/SSE state (`fxsave`) on the preemption stack and calls the scheduler
//!    (`crate::green::sched::async_resume`), which copies them into an [`AsyncFrame`] and
//!    switches to the worker's scheduler as a yield does. The thread's saved stack pointer is
//!    the frame's address with bit 0 set ([`tag`]).
//! 3. The worker that runs it next resumes it through `stackrt_async_resume`, which restores
//!    everything with loads and jumps to the interrupted instruction.
//!
//! Nothing is written to the thread's stack: compiled code may keep data just below its stack
//! pointer (callee-cleanup's `jmp [rsp - 8]`, the MMU convention's return address), and under
//! `lookahead` and `heap` its stack may end a few bytes below the stack pointer.

use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering::*};

use crate::base::ucontext::regs;

/// Pointer size.
const P: usize = core::mem::size_of::<usize>();

// This OS thread's words: the interrupted pc and sp (written by the handler), the resume's
// jump target, and the top of this worker's preemption stack (0: none).
crate::tls_block!("stackrt_async_tls", 4 * P);
const W_PC: usize = 0;
const W_SP: usize = 1;
const W_STACK: usize = 3;

/// Bytes of a worker's preemption stack: the stub's block and the scheduler's switch out (a
/// frame copy and a switch), with a wide margin.
const PREEMPT_STACK: usize = 64 * 1024;

/// Bytes of the block the stub saves: the `fxsave` area, the general-purpose registers and the
/// flags (the layout is in `crate::green::arch::*_preempt`).
#[cfg(target_arch = "x86_64")]
pub const BLOCK: usize = 512 + 16 * 8;
#[cfg(target_arch = "x86")]
pub const BLOCK: usize = 512 + 8 * 4;

/// A preempted thread's registers: the stub's block, then the interrupted pc and sp (the
/// offsets `stackrt_async_resume` reads), and the thread's errno.
#[repr(C, align(16))]
pub struct AsyncFrame {
    pub block: [u8; BLOCK],
    pub pc: usize,
    pub sp: usize,
    pub errno: i32,
}

const _: () = assert!(core::mem::offset_of!(AsyncFrame, pc) == BLOCK);
const _: () = assert!(core::mem::offset_of!(AsyncFrame, sp) == BLOCK + P);

/// Whether [`redirect`] may preempt (set up by [`init`]).
static ENABLED: AtomicBool = AtomicBool::new(false);
/// The compiler's ranges, sorted by start: a leaked slice.
static RANGES: AtomicPtr<[usize; 2]> = AtomicPtr::new(core::ptr::null_mut());
static RANGES_LEN: AtomicUsize = AtomicUsize::new(0);

/// Reads and sorts the program's ranges (the compiler writes them per subsection, out of
/// address order) and enables [`redirect`]; for programs whose compiled code is marked
/// (`crate::base::program::code_range`).
pub fn init() {
    let mut ranges: Vec<[usize; 2]> = crate::base::program::no_preempt_ranges().to_vec();
    ranges.sort_unstable();
    let ranges: &'static mut [[usize; 2]] = ranges.leak();
    RANGES_LEN.store(ranges.len(), Relaxed);
    RANGES.store(ranges.as_mut_ptr(), Release);
    ENABLED.store(true, Release);
}

/// Gives the calling worker OS thread its preemption stack (once; the worker lives as long as
/// the process) and touches its thread-local words outside a handler.
pub fn worker_init() {
    if !ENABLED.load(Acquire) {
        return;
    }
    let tls = crate::tls_address!("stackrt_async_tls") as *mut usize;
    // SAFETY: this OS thread's block of 4 words.
    if unsafe { tls.add(W_STACK).read() } != 0 {
        return;
    }
    // Without one this worker's threads are preempted at checkpoints and polls only.
    if let Ok(stack) = super::context::Stack::new(PREEMPT_STACK) {
        let top = stack.top();
        core::mem::forget(stack);
        // SAFETY: as above.
        unsafe { tls.add(W_STACK).write(top) };
    }
}

/// Whether `pc` lies in a range the compiler marked.
fn excluded(pc: usize) -> bool {
    let (p, n) = (RANGES.load(Acquire), RANGES_LEN.load(Relaxed));
    if p.is_null() || n == 0 {
        return false;
    }
    // SAFETY: the leaked, never-freed slice `init` stored.
    let ranges = unsafe { core::slice::from_raw_parts(p, n) };
    // The last range starting at or before pc; ranges do not overlap.
    let i = ranges.partition_point(|r| r[0] <= pc);
    i > 0 && pc < ranges[i - 1][1]
}

/// In the preemption signal's handler, for a context interrupted at `pc` inside the program's
/// compiled code: sends it to the stub (see the module docs) and returns true, or returns
/// false and changes nothing (a marked range, a C call in progress, no preemption stack).
/// Async-signal-safe: reads and writes this OS thread's words and the context only.
///
/// # Safety
/// `gregs` is the interrupted context of the calling OS thread, running compiled code of a
/// green thread.
pub unsafe fn redirect(gregs: &mut [libc::greg_t]) -> bool {
    extern "C" {
        fn stackrt_async_stub();
    }
    if !ENABLED.load(Acquire) {
        return false;
    }
    let pc = gregs[regs::PC] as usize;
    let (started, finished) = crate::base::ccalls::read(crate::base::ccalls::address());
    // Inside a C callback whose C frames are on the worker's handler stack, the counters say
    // "no C call" (the callback's compiled code runs), but the thread must not leave its
    // worker: another thread would run above those frames, and it would resume them elsewhere
    // (`crate::green::sched::pinned`; a plain read of this OS thread's block, signal-safe).
    if started != finished || excluded(pc) || crate::chunk::handler::pinned() {
        return false;
    }
    let tls = crate::tls_address!("stackrt_async_tls") as *mut usize;
    // SAFETY: this OS thread's block, touched by `worker_init` before any handler ran.
    unsafe {
        let top = tls.add(W_STACK).read();
        if top == 0 {
            return false;
        }
        tls.add(W_PC).write(pc);
        tls.add(W_SP).write(gregs[regs::SP] as usize);
        gregs[regs::SP] = top as libc::greg_t;
    }
    gregs[regs::PC] = stackrt_async_stub as *const () as usize as libc::greg_t;
    true
}

/// The interrupted pc and sp [`redirect`] recorded on this OS thread (read by the scheduler's
/// side, on the preemption stack).
pub fn interrupted() -> (usize, usize) {
    let tls = crate::tls_address!("stackrt_async_tls") as *const usize;
    // SAFETY: this OS thread's block.
    unsafe { (tls.add(W_PC).read(), tls.add(W_SP).read()) }
}

/// A saved stack pointer that stands for an [`AsyncFrame`]: its address with bit 0 set (a
/// stack pointer saved by a switch is word-aligned).
pub fn tag(frame: *mut AsyncFrame) -> usize {
    frame as usize | 1
}

/// The frame a saved stack pointer stands for, if it is [`tag`]ged.
pub fn frame_of(saved_sp: usize) -> Option<*mut AsyncFrame> {
    (saved_sp & 1 != 0).then_some((saved_sp & !1) as *mut AsyncFrame)
}

/// The stack pointer of a switched-out thread whose saved stack pointer is `saved_sp`: its
/// interrupted one if it was preempted here.
pub fn thread_sp(saved_sp: usize) -> usize {
    match frame_of(saved_sp) {
        // SAFETY: a tagged saved stack pointer is a live frame owned by the switched-out
        // thread (until its resume).
        Some(f) => unsafe { (*f).sp },
        None => saved_sp,
    }
}
