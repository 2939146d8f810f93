//! Preemption at loop heads: compiled code of green threads polls a flag at the head of every
//! loop and, while it is set, calls `sthread_preempt_point`, which lands here ([`poll_point`]).
//! A loop that makes no call, `while (flag == 0) n = n + 1;`, thus yields within a time slice
//! under every mechanism, as Go's goroutines do since asynchronous preemption
//! (golang/go#10958); the look-ahead checkpoints cover recursion.
//!
//! The emission stage's code polls the worker OS thread's own flag, the thread-local
//! `stackrt_preempt_tls` defined here (`crate::base::abi::PREEMPT_TLS_SYMBOL`: one
//! `fs:`/`gs:`-relative load and a branch per iteration). The monitor ([`super::handoff`]) sets
//! the flag of the worker whose thread ran a whole slice (each worker records its flag's
//! address, [`register_flag`]); only that thread takes the call, and clears it.
//!
//! The native back end cannot read a thread-local without a call, so its code polls one flag
//! for the whole program (`crate::base::abi::PREEMPT_FLAG_SYMBOL`): the monitor sets the
//! worker's own request ([`Worker::poll_request`]) and then that flag. Every running thread
//! takes the slow call while it is set, but only the threads of requested workers yield; the
//! last request served clears it. A request made while the flag is being cleared may find it
//! cleared: the monitor sets the flag again at its next round (one slice later).
//!
//! A request its thread did not serve (it switched out first) is dropped when the worker is
//! between threads ([`Sched::drop_poll_request`]). The deterministic mode keeps the flags set
//! from the start, and every [`DET_POLL_EVERY`]th poll is a decision of the seed (the same
//! ones in every run of the same program and input): a spin-wait on a flag another thread
//! sets cannot hang a seeded run.

use core::sync::atomic::{AtomicU32, Ordering::*};

use super::{det_point, sched, this_worker, yield_now, Sched, Switched, Worker};

/// Polls between two decisions of the deterministic mode: about a million, a few milliseconds
/// of a spin-wait. Far fewer would make every loop of a program a stream of decisions, which
/// changes what the seeds explore: a thread that yields in the middle of an update would
/// almost always be resumed by one of the many decisions of another thread's loop before a
/// third thread could interleave (tests/green.rs, the lost update).
pub const DET_POLL_EVERY: usize = 1 << 20;

crate::tls_block!("stackrt_preempt_tls", 16);

/// Bytes of the save area in which compiled code stores the C ABI's caller-saved registers
/// before a poll's call and loads them after (`cmm_codegen`'s `print::poll_save`: word `k` at
/// `k * P`, xmm `k` at `16 * P + 16 * k`), so that a poll clobbers no register and a loop keeps
/// its values in registers across it.
pub const POLL_SAVE_BYTES: usize = 16 * core::mem::size_of::<usize>() + 16 * 16;

crate::tls_block!("stackrt_poll_save", POLL_SAVE_BYTES);

/// A copy of the save area: a thread that switches out of a poll takes its registers along.
pub type PollRegs = [u8; POLL_SAVE_BYTES];

/// Before a poll switches: the registers in this OS thread's save area go with the thread
/// (another thread's poll on this worker would overwrite them).
fn keep_poll_regs() {
    let area = crate::tls_address!("stackrt_poll_save") as *const PollRegs;
    // SAFETY: the calling OS thread's own block, written by the compiled code's poll.
    let regs = Box::new(unsafe { *area });
    super::current().poll_regs.set(Some(regs));
}

/// After a poll's switch (on whichever worker the thread runs now): its registers back into
/// this OS thread's save area, where the compiled code loads them. Nothing if the poll did not
/// reach a switch. Out of line: the thread-local's address must be this OS thread's.
#[inline(never)]
pub fn restore_poll_regs() {
    if let Some(regs) = super::current().poll_regs.take() {
        let area = crate::tls_address!("stackrt_poll_save") as *mut PollRegs;
        // SAFETY: the calling OS thread's own block; the poll's compiled code loads it next.
        unsafe { *area = *regs };
    }
}

/// The calling OS thread's flag.
fn own_flag() -> &'static AtomicU32 {
    let p = crate::tls_address!("stackrt_preempt_tls") as *const AtomicU32;
    // SAFETY: the thread's own instance of the 16-byte, 16-aligned block, whose first word
    // only ever is read and written as this atomic; it lives as long as the OS thread, and
    // workers' OS threads live as long as the process.
    unsafe { &*p }
}

/// Records the calling worker OS thread's flag for the monitor.
pub(super) fn register_flag(w: &Worker) {
    w.poll_flag
        .store(own_flag() as *const AtomicU32 as usize, Release);
}

/// Sets the flags for good (the deterministic mode, on its only worker's OS thread).
pub(super) fn deterministic() {
    own_flag().store(1, Relaxed);
    if let Some(flag) = crate::base::program::preempt_flag() {
        flag.store(1, Relaxed);
    }
}

impl Sched {
    /// A worker between threads: a request its last thread did not serve (it switched out
    /// first) is dropped, or the flag would stay set, and every loop of every thread call the
    /// runtime, while this worker has nothing to run.
    pub(super) fn drop_poll_request(&self, w: &Worker) {
        let own = own_flag();
        if own.load(Relaxed) != 0 {
            own.store(0, Relaxed);
        }
        if w.poll_request.load(Relaxed) && w.poll_request.swap(false, AcqRel) {
            self.served_poll();
        }
    }

    /// One request fewer; the last one clears the flag.
    fn served_poll(&self) {
        if self.poll_pending.fetch_sub(1, AcqRel) == 1 {
            if let Some(flag) = crate::base::program::preempt_flag() {
                flag.store(0, Release);
            }
        }
    }

    /// The monitor asks worker `w`'s running thread to yield at its next loop head.
    pub(super) fn request_poll(&self, w: &Worker) {
        let own = w.poll_flag.load(Acquire);
        if own != 0 {
            // SAFETY: the address `register_flag` recorded: the worker OS thread's flag, alive
            // as long as the process.
            unsafe { &*(own as *const AtomicU32) }.store(1, Release);
        }
        let Some(flag) = crate::base::program::preempt_flag() else {
            return;
        };
        if !w.poll_request.swap(true, AcqRel) {
            self.poll_pending.fetch_add(1, AcqRel);
        }
        flag.store(1, Release);
    }
}

/// `sthread_preempt_point`: the running thread yields if its worker was asked to
/// ([`Sched::request_poll`]); in the deterministic mode every [`DET_POLL_EVERY`]th call is a
/// decision. `phase`: see [`Switched::Deferred`].
pub fn poll_point(phase: u32) -> Switched {
    let s = sched();
    if s.det.is_some() {
        if s.det_polls.fetch_add(1, Relaxed) % DET_POLL_EVERY == DET_POLL_EVERY - 1 {
            keep_poll_regs();
            return det_point(phase);
        }
        return Switched::Done;
    }
    let w = this_worker();
    let own = own_flag().swap(0, AcqRel) != 0;
    let global = w.poll_request.load(Relaxed) && w.poll_request.swap(false, AcqRel);
    if global {
        s.served_poll();
    }
    if !own && !global {
        return Switched::Done;
    }
    if s.count_stats {
        s.stats.preemptions.fetch_add(1, Relaxed);
    }
    s.wake_for_preempted();
    keep_poll_regs();
    yield_now(phase)
}
