//! Idle workers: a worker with nothing to run spins for a moment, then sleeps until a push
//! wakes it; the rule that keeps a push from being lost between the two; and the deadlock a
//! program is in when every worker sleeps with nothing queued.

use core::sync::atomic::{fence, Ordering::SeqCst};

use super::{GreenPtr, Sched, Worker};
use crate::green::queue::Source;

/// How long an idle worker looks for a thread before it sleeps (`Sched::spin`).
const SPIN: std::time::Duration = std::time::Duration::from_micros(50);

impl Sched {
    /// Looks for a thread for up to [`SPIN`] before the worker sleeps, as Go's idle Ms spin
    /// before they park. A futex sleep and wake costs two context switches and a wake-up IPI;
    /// short threads created and joined in a loop made the other workers sleep and be woken
    /// for every handful of threads (three quarters of the time went to the kernel). While a
    /// worker spins, pushes wake nobody (`push`); one that found a thread wakes a sleeper if
    /// more are queued.
    ///
    /// Why no push is lost: a spinner stops spinning (`spinning` decremented, `SeqCst`) before
    /// it sleeps, and `sleep` re-checks the queues after counting itself a sleeper; a pusher
    /// that read `spinning != 0` did so before that decrement, so its push is seen by the
    /// re-check.
    pub(super) fn spin(&self, w: &Worker) -> Option<(GreenPtr, Source)> {
        self.spinning.fetch_add(1, SeqCst);
        let start = std::time::Instant::now();
        let found = loop {
            for _ in 0..64 {
                core::hint::spin_loop();
            }
            if let Some(found) = self.queues.pop(w.index) {
                break Some(found);
            }
            if start.elapsed() >= SPIN {
                break None;
            }
        };
        self.spinning.fetch_sub(1, SeqCst);
        if found.is_some() {
            // Pushes made while this worker spun woke nobody: if more threads wait, a sleeper
            // takes them now (Go's `resetspinning` → `wakep`), or they would wait for this
            // worker.
            if !self.queues.is_empty() {
                self.wake_idle();
            }
        }
        found
    }

    /// Waits until some queue may have a thread. A pusher that sees no sleeper has its push
    /// seen by the sleeper's re-check (both sides fence between their write and their read).
    ///
    /// When every active worker is here with nothing queued and no worker is blocked in a call, no thread runs and none can be woken
    /// (wakes come from running threads): every alive thread waits for another, a deadlock,
    /// reported in one line (status 70) instead of hanging.
    pub(super) fn sleep(&self) {
        let guard = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let sleeping = self.sleepers.fetch_add(1, SeqCst) + 1;
        fence(SeqCst);
        if self.queues.is_empty() {
            // Every active worker sleeps and none is handed off (blocked in a call that will
            // return): nothing can wake anyone.
            if sleeping >= self.active.load(SeqCst) && self.handed.load(SeqCst) == 0 {
                crate::base::diag::fail(
                    &format!(
                        "stackrt: deadlock: every green thread is blocked ({} alive, all \
                         waiting for a join or a mutex)",
                        self.alive.load(SeqCst)
                    ),
                    crate::base::diag::FATAL_EXIT_STATUS,
                );
            }
            drop(self.wake.wait(guard).unwrap_or_else(|e| e.into_inner()));
        } else {
            drop(guard);
        }
        self.sleepers.fetch_sub(1, SeqCst);
    }

    /// A preempted thread is about to go to the back of its worker's queue: a sleeping worker
    /// is woken to take it (it spins long enough to see the requeue), as a yield does not do
    /// (`requeue`). Without this, threads preempted on one worker stayed there while the other
    /// slept: four Real World threads on two workers took 2 to 4 times as long as without
    /// preemption.
    pub(super) fn wake_for_preempted(&self) {
        self.wake_idle();
    }

    /// After a push (made visible by the fence): wakes a sleeping worker unless one is
    /// spinning, which will take the thread.
    pub(super) fn wake_idle(&self) {
        fence(SeqCst);
        if self.sleepers.load(SeqCst) != 0 && self.spinning.load(SeqCst) == 0 {
            let _guard = self.idle.lock().unwrap_or_else(|e| e.into_inner());
            self.wake.notify_one();
        }
    }
}
