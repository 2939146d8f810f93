//! Asynchronous preemption, the scheduler's side (`crate::green::preempt_async` has the
//! handler's): the preempted thread's registers, saved by the stub on the worker's preemption
//! stack, go into an [`AsyncFrame`] and the thread switches out to the queue of preempted
//! threads (`crate::green::queue`, "Threads preempted by time"); the worker that runs it next
//! resumes it from the frame.
//!
//! A frame is reused: after a resume from it, it is this OS thread's retired frame until the
//! next preemption here takes it (the resume has jumped to the thread long before this OS
//! thread's scheduler or stub runs again).

use core::cell::Cell;
use core::sync::atomic::Ordering::Relaxed;

use super::{context, det_mode, poison, sched, this_worker, After};
use crate::green::preempt_async::{self, AsyncFrame, BLOCK};

extern "C" {
    fn stackrt_async_resume(save: *mut usize, frame: *const AsyncFrame);
}

thread_local! {
    /// The frame of the last resume on this OS thread (see the module docs). Not touched by
    /// any signal handler.
    static RETIRED: Cell<Option<Box<AsyncFrame>>> = const { Cell::new(None) };
}

/// Called by `stackrt_async_stub` on the worker's preemption stack with the registers it
/// saved (`block`, [`BLOCK`] bytes). Never returns: the thread goes on when a worker resumes
/// it ([`resume_or_switch`]).
///
/// # Safety
/// Only the stub calls it, for the running green thread that [`preempt_async::redirect`] sent
/// there.
#[no_mangle]
pub unsafe extern "C" fn stackrt_async_preempted(block: *const u8) -> ! {
    let errno = crate::base::os::errno();
    let (pc, sp) = preempt_async::interrupted();
    let mut frame = RETIRED.with(Cell::take).unwrap_or_else(|| {
        Box::new(AsyncFrame {
            block: [0; BLOCK],
            pc: 0,
            sp: 0,
            errno: 0,
        })
    });
    // SAFETY: the stub's block of BLOCK bytes on this worker's preemption stack.
    frame
        .block
        .copy_from_slice(unsafe { core::slice::from_raw_parts(block, BLOCK) });
    frame.pc = pc;
    frame.sp = sp;
    frame.errno = errno;
    let s = sched();
    if poison::hooked() {
        poison::disarm();
    }
    if s.count_stats {
        s.stats.preemptions.fetch_add(1, Relaxed);
    }
    if let Some(d) = &s.det {
        det_mode::lock(d).preempted();
    }
    s.wake_for_preempted();
    let w = this_worker();
    let g = w.current.get();
    // SAFETY: `g` is the running thread; its saved stack pointer now stands for the frame.
    unsafe { *(*g).sp.get() = preempt_async::tag(Box::into_raw(frame)) };
    w.after.set(After::Preempted);
    let mut abandoned = 0usize;
    // SAFETY: the scheduler context's saved stack pointer is valid while one of its threads
    // runs; this context (the preemption stack) is never resumed.
    unsafe { context::switch(&mut abandoned, *w.sched_sp.get()) };
    unreachable!("a preemption stack's context was resumed")
}

/// Resumes the switched-out thread whose saved stack pointer is `*thread_sp`, saving the
/// calling scheduler context in `save`: from its frame if it was preempted asynchronously,
/// else by a plain switch.
///
/// # Safety
/// As `context::switch`: `*thread_sp` is a suspended thread's, now this worker's.
#[inline]
pub unsafe fn resume_or_switch(save: *mut usize, thread_sp: *mut usize) {
    // SAFETY: the caller's guarantee.
    let saved = unsafe { *thread_sp };
    let Some(frame) = preempt_async::frame_of(saved) else {
        // SAFETY: the caller's guarantee.
        return unsafe { context::switch(save, saved) };
    };
    // SAFETY: a tagged stack pointer is the thread's own frame, from `Box::into_raw`.
    let frame = unsafe { Box::from_raw(frame) };
    // SAFETY: the thread's stack pointer while it runs is its own business; the slot is
    // written again by its next switch out.
    unsafe { *thread_sp = frame.sp };
    // SAFETY: the calling OS thread's errno slot.
    unsafe { *crate::base::os::errno_slot() = frame.errno };
    let at: *const AsyncFrame = &*frame;
    RETIRED.with(|r| r.set(Some(frame)));
    // SAFETY: the frame holds the thread's registers; it stays alive (this OS thread's retired
    // frame) until the next preemption on this OS thread, after the jump.
    unsafe { stackrt_async_resume(save, at) };
}
