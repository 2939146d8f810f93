//! Run queues of the green-thread scheduler: one FIFO queue per worker, with work stealing. A
//! worker takes from the front of its own queue; when that is empty it steals the older half of
//! the first non-empty queue after its own (in worker order, wrapping around), as Go's
//! `runqsteal` takes half of a victim's queue: one steal feeds a worker for a while, and the
//! oldest threads move first.
//!
//! Each queue has its own lock, so workers contend only when one steals from another; the
//! locks are held for a few queue operations, never across a context switch.
//!
//! Only the first [`RunQueues::set_live`] queues are looked at by steals and by the emptiness
//! checks: the scheduler's spare worker slots (`super::sched::handoff`) have queues that stay
//! out of every scan until their OS threads start.

use core::sync::atomic::{AtomicUsize, Ordering::Acquire, Ordering::Release};
use std::collections::VecDeque;
use std::sync::Mutex;

/// Where [`RunQueues::pop`] found the thread it returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The worker's own queue.
    Own,
    /// Stolen from this worker's queue (the rest of the stolen half went to the thief's queue).
    Stolen(usize),
}

/// One FIFO queue per worker.
pub struct RunQueues<T> {
    queues: Box<[Mutex<VecDeque<T>>]>,
    /// Queues in use: `queues[..live]`.
    live: AtomicUsize,
}

impl<T> RunQueues<T> {
    /// Queues for `workers` workers (at least one), all in use.
    pub fn new(workers: usize) -> Self {
        Self::with_live(workers, workers)
    }

    /// Queues for `workers` workers (at least one), the first `live` of them in use.
    pub fn with_live(workers: usize, live: usize) -> Self {
        RunQueues {
            queues: (0..workers.max(1))
                .map(|_| Mutex::new(VecDeque::new()))
                .collect(),
            live: AtomicUsize::new(live.clamp(1, workers.max(1))),
        }
    }

    /// The number of queues in use.
    pub fn workers(&self) -> usize {
        self.live.load(Acquire)
    }

    /// Puts the first `n` queues in use (never fewer than before).
    pub fn set_live(&self, n: usize) {
        self.live.fetch_max(n.min(self.queues.len()), Release);
    }

    fn queue(&self, w: usize) -> std::sync::MutexGuard<'_, VecDeque<T>> {
        // A panic while a queue is locked cannot leave it inconsistent (every operation is one
        // VecDeque call), so a poisoned lock is still usable.
        self.queues[w]
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Puts `t` at the back of worker `w`'s queue.
    pub fn push(&self, w: usize, t: T) {
        self.queue(w).push_back(t);
    }

    /// Puts `t` at the front of worker `w`'s queue: it runs next there (a woken thread, Go's
    /// `runnext`: a mutex handed to a parked thread is not held while a whole queue of other
    /// threads runs first).
    pub fn push_front(&self, w: usize, t: T) {
        self.queue(w).push_front(t);
    }

    /// The front of worker `w`'s own queue, without stealing.
    pub fn pop_own(&self, w: usize) -> Option<T> {
        self.queue(w).pop_front()
    }

    /// The next thread for worker `w`: the front of its own queue, else the first of the older
    /// half stolen from the first non-empty queue after `w`'s (the rest of the half goes to the
    /// back of `w`'s queue). None when every queue is empty.
    pub fn pop(&self, w: usize) -> Option<(T, Source)> {
        if let Some(t) = self.queue(w).pop_front() {
            return Some((t, Source::Own));
        }
        let n = self.workers();
        for k in 1..n {
            let v = (w + k) % n;
            let mut stolen: VecDeque<T> = {
                let mut q = self.queue(v);
                let take = q.len().div_ceil(2);
                q.drain(..take).collect()
            };
            if let Some(first) = stolen.pop_front() {
                if !stolen.is_empty() {
                    self.queue(w).append(&mut stolen);
                }
                return Some((first, Source::Stolen(v)));
            }
        }
        None
    }

    /// Threads queued on worker `w`.
    pub fn len_of(&self, w: usize) -> usize {
        self.queue(w).len()
    }

    /// Threads queued on all workers.
    pub fn len(&self) -> usize {
        (0..self.workers()).map(|w| self.len_of(w)).sum()
    }

    /// Whether every queue is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
