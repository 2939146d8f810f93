//! Run queues of the green-thread scheduler: one queue per worker, with work stealing, laid out
//! as Go's (`runtime/proc.go`: `runqput`, `runqget`, `runqgrab`). A worker takes from its own
//! queue; when that is empty it steals the older half of the first non-empty queue after its
//! own (in worker order, wrapping around), as Go's `runqsteal` does: one steal feeds a worker
//! for a while, and the oldest threads move first.
//!
//! # A queue
//! - **`next`**: one thread that runs before the others (a woken thread, Go's `runnext`: a
//!   mutex handed to a parked thread is not held while a whole queue of other threads runs
//!   first). A thread put there pushes the one it replaces to the back of the ring.
//! - **The ring**: [`RING`] slots between `head` and `tail`. Only the queue's own worker (the
//!   OS thread that runs it) writes slots and `tail`: a push is a store of the slot and a
//!   release store of `tail`, no atomic read-modify-write. Taking from the front, by the worker
//!   or a thief, reads the slots and then moves `head` with a compare-and-swap, which fails if
//!   anyone took them first; `head` only grows (no ABA: a slot is rewritten only after `head`
//!   passed it, and a stale taker's swap then fails).
//! - **The overflow**: a locked list for what does not fit in the ring (half the ring moves
//!   there when it is full) and for threads another OS thread hands over
//!   ([`RunQueues::push_remote`]). It holds the older threads, so takes look there first (the
//!   queue stays a FIFO: with the ring first, a million threads yielding in a loop until all
//!   have arrived ran 4x slower, the ring's 256 yielding again and again while the others
//!   waited); its length is published in an atomic, so a take looks there, and takes its
//!   lock, only when it holds something: with fewer runnable threads than the ring holds, a
//!   queue takes no lock. A steal takes half of it, at most half a ring.
//!
//! # When a thief steals
//! A queue of a few threads whose worker keeps taking them is left to that worker: a thief
//! steals from it only once the worker has taken nothing from it for [`STEAL_AGE`] (it is
//! running one thread for that long), or when it holds at least [`STEAL_AT_ONCE`] threads.
//! Threads created and joined in a loop (8 at a time) otherwise went to the spinning second
//! worker as soon as they were queued, their joins woke the creator on the other core, and
//! the creator moved from core to core with them: on this project's 2-core VM that took
//! 2.5 times as long as on one worker in about one run in five (the phases when the two
//! virtual CPUs sat far apart), while Go's peer stayed on one core. Go's scheduler keeps a
//! thread's `runnext` from thieves for 3 µs (`runqgrab`) for the same reason; its thieves
//! also arrive late, woken through a futex. Threads that run 3 µs or longer, and long queues,
//! are spread as before.
//!
//! # Threads preempted by time
//! A thread preempted because it ran a whole time slice goes to one queue shared by all
//! workers ([`RunQueues::push_preempted`]), not to the back of its worker's: a worker takes
//! from it at every [`PREEMPTED_EVERY`]th take while it holds something, and whenever the
//! worker's own queue is empty, as Go's scheduler checks its global run queue once every 61
//! scheduling rounds. Behind its worker's whole queue, a preempted thread waited for every
//! runnable thread to run once: a thread creating a million threads that wait for it by
//! yielding got one slice per cycle through all of them.
//!
//! # Abandoned queues
//! A worker handed off in a blocking call, or asleep as a spare (`super::sched::handoff`),
//! takes nothing from its queue; the scheduler marks that queue abandoned
//! ([`RunQueues::set_abandoned`]). Its threads are stolen like any others when a worker runs
//! out of work, at once whatever the queue's length, and also while the active workers are
//! busy: at every [`PREEMPTED_EVERY`]th take, when no preempted thread waits, a worker steals
//! from an abandoned queue. Without that, active workers whose threads yield in a loop (never
//! empty) left an abandoned queue alone for good: a million threads queued on the main
//! thread's worker, which had been handed off and became a spare, waited for threads that
//! waited for them (a livelock, about one run in thirty). Go moves the queue itself with the
//! processor (`handoffp`); here the spare that replaces a worker starts with an empty queue,
//! and a worker becoming a spare moves its threads to an active one, which can miss a thread
//! pushed meanwhile (the queue may then sit on a spare).
//!
//! A yield takes its next thread and puts the yielding one back without a lock (a round trip
//! took 74 ns with two lock/unlock pairs of `std` mutexes per yield, most of it in them).
//!
//! Only the first [`RunQueues::set_live`] queues are looked at by steals and by the emptiness
//! checks: the scheduler's spare worker slots (`super::sched::handoff`) have queues that stay
//! out of every scan until their OS threads start.

use core::cell::Cell;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering::*};
use std::collections::VecDeque;
use std::sync::Mutex;

/// What a queue holds: a value that is one nonzero word (a thread's record).
pub trait Word: Copy {
    fn to_word(self) -> usize;
    fn from_word(w: usize) -> Self;
}

/// Slots of a queue's ring (Go's `runq` has 256).
pub const RING: usize = 256;

/// How long a queue's worker must have taken nothing from it before a thief takes from a
/// queue shorter than [`STEAL_AT_ONCE`] (module docs).
pub const STEAL_AGE: std::time::Duration = std::time::Duration::from_micros(3);

/// A queue this long is stolen from at once: its last thread waits for that many others.
pub const STEAL_AT_ONCE: usize = RING / 8;

/// A worker takes from the queue of preempted threads at every this-many takes (Go's 61).
pub const PREEMPTED_EVERY: u32 = 61;

/// Where [`RunQueues::pop`] found the thread it returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The worker's own queue.
    Own,
    /// Stolen from this worker's queue (the rest of the stolen half went to the thief's queue).
    Stolen(usize),
}

/// Runs `f` on a locked list and publishes its new length in `len`, which takes read without
/// the lock (the overflow, the preempted threads). A panic while the list is locked cannot
/// leave it inconsistent (every operation is one VecDeque call), so a poisoned lock is still
/// usable.
fn with_counted<R>(
    list: &Mutex<VecDeque<usize>>,
    len: &AtomicUsize,
    f: impl FnOnce(&mut VecDeque<usize>) -> R,
) -> R {
    let mut l = list
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let r = f(&mut l);
    len.store(l.len(), Release);
    r
}

/// One worker's queue (module docs).
struct Local {
    head: AtomicU32,
    tail: AtomicU32,
    next: AtomicUsize,
    overflow: Mutex<VecDeque<usize>>,
    /// The overflow's length, written under its lock: a take looks at the overflow only when
    /// it holds something, without the lock.
    spilled: AtomicUsize,
}

/// A thief's record of one victim queue it found short and busy: which queue, what it looked
/// like ([`Local::progress`]), and since when (nanoseconds after [`RunQueues`]'s epoch).
/// Atomics only so that a queue is `Sync`; one OS thread uses them (`Relaxed`).
struct Watch {
    victim: AtomicUsize,
    progress: AtomicUsize,
    since: AtomicU64,
    /// The worker's takes while preempted threads waited ([`PREEMPTED_EVERY`]).
    takes: AtomicU32,
}

/// `Watch::victim` when no queue is watched.
const NO_VICTIM: usize = usize::MAX;

impl Local {
    fn new() -> Self {
        Local {
            head: AtomicU32::new(0),
            tail: AtomicU32::new(0),
            next: AtomicUsize::new(0),
            overflow: Mutex::new(VecDeque::new()),
            spilled: AtomicUsize::new(0),
        }
    }

    /// A word that changes whenever a thread is taken from the queue (its `head` moves, its
    /// next thread or its overflow's length changes): unchanged over [`STEAL_AGE`] means the
    /// queue's worker took nothing meanwhile. (Two states that differ but give the same word
    /// only delay a steal.)
    fn progress(&self) -> usize {
        (self.head.load(Acquire) as usize)
            ^ self.next.load(Acquire).rotate_left(20)
            ^ self.spilled.load(Acquire).rotate_left(40)
    }

    /// Runs `f` on the overflow under its lock and publishes its new length.
    fn with_overflow<R>(&self, f: impl FnOnce(&mut VecDeque<usize>) -> R) -> R {
        with_counted(&self.overflow, &self.spilled, f)
    }

    /// The front of the overflow, if it holds anything.
    fn overflow_front(&self) -> Option<usize> {
        if self.spilled.load(Acquire) == 0 {
            return None;
        }
        self.with_overflow(|o| o.pop_front())
    }

    /// The worker's push to the back of its ring; the older half of the ring goes to the back
    /// of the overflow when the ring is full.
    fn push_back(&self, ring: &[AtomicUsize], w: usize) {
        loop {
            let h = self.head.load(Acquire);
            let t = self.tail.load(Relaxed);
            if t.wrapping_sub(h) < RING as u32 {
                ring[t as usize % RING].store(w, Relaxed);
                self.tail.store(t.wrapping_add(1), Release);
                return;
            }
            // Full: move the older half out with one swap of `head` (Go's `runqputslow`).
            if let Some(batch) = self.grab(ring, h, RING as u32 / 2) {
                self.with_overflow(|o| o.extend(batch));
            }
            // Room now (ours, or a thief took some): `w` goes in behind the rest of the ring.
        }
    }

    /// The `n` slots from `head` = `h` on, if `head` still is `h` once they are read (then it
    /// moves past them); None if someone took from the ring meanwhile.
    fn grab(&self, ring: &[AtomicUsize], h: u32, n: u32) -> Option<Vec<usize>> {
        let batch: Vec<usize> = (0..n)
            .map(|i| ring[h.wrapping_add(i) as usize % RING].load(Relaxed))
            .collect();
        self.head
            .compare_exchange(h, h.wrapping_add(n), AcqRel, Relaxed)
            .is_ok()
            .then_some(batch)
    }

    /// The front of the ring, by the worker or a thief.
    fn take_front(&self, ring: &[AtomicUsize]) -> Option<usize> {
        loop {
            let h = self.head.load(Acquire);
            let t = self.tail.load(Acquire);
            if t == h {
                return None;
            }
            let w = ring[h as usize % RING].load(Relaxed);
            if self
                .head
                .compare_exchange(h, h.wrapping_add(1), AcqRel, Relaxed)
                .is_ok()
            {
                return Some(w);
            }
        }
    }

    /// The older half of the ring (at least one if any), taken by a thief (Go's `runqgrab`).
    fn take_half(&self, ring: &[AtomicUsize]) -> Vec<usize> {
        loop {
            let h = self.head.load(Acquire);
            let t = self.tail.load(Acquire);
            let n = t.wrapping_sub(h);
            if n == 0 {
                return Vec::new();
            }
            if n > RING as u32 {
                // Read `head` and `tail` at different moments: try again.
                continue;
            }
            if let Some(batch) = self.grab(ring, h, n - n / 2) {
                return batch;
            }
        }
    }

    fn len(&self) -> usize {
        let h = self.head.load(Acquire);
        let t = self.tail.load(Acquire);
        (t.wrapping_sub(h) as usize).min(RING)
            + usize::from(self.next.load(Acquire) != 0)
            + self.spilled.load(Acquire)
    }
}

/// One queue per worker.
pub struct RunQueues<T> {
    queues: Box<[Local]>,
    /// The rings of all queues, [`RING`] slots each, in one zeroed allocation: a large one
    /// comes straight from `mmap`, so the rings of the spare slots, which may never run, cost
    /// no resident memory (1,024 spares' rings are 2 MiB).
    rings: Box<[AtomicUsize]>,
    /// Queues in use: `queues[..live]`.
    live: AtomicUsize,
    /// Per worker as a thief: the short queue it waits to see stall
    /// ([`RunQueues::stealable`]). Written and read only by that worker. Apart from the
    /// queues: in them it made a queue 88 bytes instead of 64, and a yield round trip 3 ns
    /// slower.
    watches: Box<[Watch]>,
    /// Time zero of the thieves' watches (`Watch::since`).
    epoch: std::time::Instant,
    /// Threads preempted by time (module docs), and their number, written under the lock: a
    /// take looks at them only when there are some, without the lock.
    preempted: Mutex<VecDeque<usize>>,
    preempted_len: AtomicUsize,
    /// Queues whose worker takes nothing from them (module docs, "Abandoned queues"), and how
    /// many there are.
    abandoned: Box<[AtomicBool]>,
    abandoned_count: AtomicUsize,
    /// [`STEAL_AGE`] in nanoseconds, or 0: every non-empty queue may be stolen from at once
    /// ([`RunQueues::without_steal_age`]).
    steal_age_ns: u64,
    _values: core::marker::PhantomData<Cell<T>>,
}

// SAFETY: the queues hold words (`Word`), and hand them between OS threads only through the
// atomics and the locks above; `T: Send` is what the scheduler's values promise.
unsafe impl<T: Send> Sync for RunQueues<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Send for RunQueues<T> {}

impl<T: Word> RunQueues<T> {
    /// Queues for `workers` workers (at least one), all in use.
    pub fn new(workers: usize) -> Self {
        Self::with_live(workers, workers)
    }

    /// Queues for `workers` workers (at least one), the first `live` of them in use.
    pub fn with_live(workers: usize, live: usize) -> Self {
        let n = workers.max(1);
        // `vec![0; len]` asks the allocator for zeroed memory (`calloc`), which it leaves
        // untouched when it maps it fresh.
        let words: Box<[usize]> = vec![0usize; n * RING].into_boxed_slice();
        // SAFETY: `AtomicUsize` has the size, alignment and bit validity of `usize`, so a
        // boxed slice of one is a boxed slice of the other (same length, same allocation).
        let rings = unsafe { core::mem::transmute::<Box<[usize]>, Box<[AtomicUsize]>>(words) };
        RunQueues {
            queues: (0..n).map(|_| Local::new()).collect(),
            rings,
            live: AtomicUsize::new(live.clamp(1, workers.max(1))),
            watches: (0..n)
                .map(|_| Watch {
                    victim: AtomicUsize::new(NO_VICTIM),
                    progress: AtomicUsize::new(0),
                    since: AtomicU64::new(0),
                    takes: AtomicU32::new(0),
                })
                .collect(),
            preempted: Mutex::new(VecDeque::new()),
            preempted_len: AtomicUsize::new(0),
            abandoned: (0..n).map(|_| AtomicBool::new(false)).collect(),
            abandoned_count: AtomicUsize::new(0),
            epoch: std::time::Instant::now(),
            steal_age_ns: STEAL_AGE.as_nanos() as u64,
            _values: core::marker::PhantomData,
        }
    }

    /// These queues with every non-empty queue open to thieves at once, whatever its length
    /// and age: a model that predicts every steal from the queues' contents alone (the age
    /// rule depends on time; its own tests are below).
    pub fn without_steal_age(mut self) -> Self {
        self.steal_age_ns = 0;
        self
    }

    fn ring(&self, w: usize) -> &[AtomicUsize] {
        &self.rings[w * RING..(w + 1) * RING]
    }

    /// The number of queues in use.
    pub fn workers(&self) -> usize {
        self.live.load(Acquire)
    }

    /// Puts the first `n` queues in use (never fewer than before).
    pub fn set_live(&self, n: usize) {
        self.live.fetch_max(n.min(self.queues.len()), Release);
    }

    /// Puts `t` at the back of worker `w`'s queue. Only on worker `w`'s OS thread.
    pub fn push(&self, w: usize, t: T) {
        self.queues[w].push_back(self.ring(w), t.to_word());
    }

    /// Puts `t` at the back of worker `w`'s queue from another OS thread (through the lock of
    /// its overflow).
    pub fn push_remote(&self, w: usize, t: T) {
        self.queues[w].with_overflow(|o| o.push_back(t.to_word()));
    }

    /// Puts `t`, preempted by time, in the queue every worker takes from now and then (module
    /// docs, "Threads preempted by time"). From any OS thread.
    pub fn push_preempted(&self, t: T) {
        self.with_preempted(|q| q.push_back(t.to_word()));
    }

    fn with_preempted<R>(&self, f: impl FnOnce(&mut VecDeque<usize>) -> R) -> R {
        with_counted(&self.preempted, &self.preempted_len, f)
    }

    /// The oldest preempted thread, if any.
    fn take_preempted(&self) -> Option<usize> {
        if self.preempted_len.load(Acquire) == 0 {
            return None;
        }
        self.with_preempted(|q| q.pop_front())
    }

    /// At every [`PREEMPTED_EVERY`]th take of worker `w` while some thread was preempted or
    /// some queue is abandoned: the oldest preempted thread, else a steal from an abandoned
    /// queue (module docs, "Abandoned queues").
    #[cold]
    #[inline(never)]
    fn take_shared(&self, w: usize) -> Option<usize> {
        let takes = &self.watches[w].takes;
        let n = takes.load(Relaxed).wrapping_add(1);
        takes.store(n, Relaxed);
        if !n.is_multiple_of(PREEMPTED_EVERY) {
            return None;
        }
        if let Some(t) = self.take_preempted() {
            return Some(t);
        }
        self.take_abandoned(w)
    }

    /// A steal by worker `w` from the first non-empty abandoned queue, if any.
    fn take_abandoned(&self, w: usize) -> Option<usize> {
        if self.abandoned_count.load(Acquire) == 0 {
            return None;
        }
        (0..self.workers())
            .filter(|&v| v != w && self.abandoned[v].load(Acquire))
            .find_map(|v| self.steal_from(w, v))
    }

    /// Marks worker `w`'s queue abandoned (its worker takes nothing from it: handed off in a
    /// blocking call, or a sleeping spare) or not (module docs, "Abandoned queues"). From any
    /// OS thread.
    pub fn set_abandoned(&self, w: usize, abandoned: bool) {
        if self.abandoned[w].swap(abandoned, SeqCst) != abandoned {
            if abandoned {
                self.abandoned_count.fetch_add(1, SeqCst);
            } else {
                self.abandoned_count.fetch_sub(1, SeqCst);
            }
        }
    }

    /// Makes `t` the next thread of worker `w` (the one it replaces goes to the back). Only on
    /// worker `w`'s OS thread.
    pub fn push_front(&self, w: usize, t: T) {
        let q = &self.queues[w];
        let old = q.next.swap(t.to_word(), AcqRel);
        if old != 0 {
            q.push_back(self.ring(w), old);
        }
    }

    /// The next thread of worker `w`'s own queue, without stealing. Only on worker `w`'s OS
    /// thread.
    #[inline]
    pub fn pop_own(&self, w: usize) -> Option<T> {
        // Preempted threads and abandoned queues now and then (two loads while there are
        // none).
        if (self.preempted_len.load(Relaxed) | self.abandoned_count.load(Relaxed)) != 0 {
            if let Some(t) = self.take_shared(w) {
                return Some(T::from_word(t));
            }
        }
        let q = &self.queues[w];
        // A load first: the swap, an atomic read-modify-write, only when there is something
        // to take (a thief may still take it first).
        if q.next.load(Relaxed) != 0 {
            let next = q.next.swap(0, AcqRel);
            if next != 0 {
                return Some(T::from_word(next));
            }
        }
        // The overflow holds the older threads (the ring's older half moves there when the
        // ring is full), so it goes first: a FIFO over both. With fewer runnable threads than
        // the ring holds it is empty, and no lock is taken.
        if let Some(t) = q.overflow_front() {
            return Some(T::from_word(t));
        }
        if let Some(t) = q.take_front(self.ring(w)) {
            return Some(T::from_word(t));
        }
        self.take_preempted().map(T::from_word)
    }

    /// The next thread for worker `w`: from its own queue, else the first of the older half
    /// stolen from the first non-empty queue after `w`'s (the rest of the half goes to `w`'s
    /// queue). None when every queue is empty. Only on worker `w`'s OS thread.
    pub fn pop(&self, w: usize) -> Option<(T, Source)> {
        if let Some(t) = self.pop_own(w) {
            return Some((t, Source::Own));
        }
        let n = self.workers();
        for k in 1..n {
            let v = (w + k) % n;
            if !self.stealable(w, v) {
                continue;
            }
            if let Some(t) = self.steal_from(w, v) {
                return Some((T::from_word(t), Source::Stolen(v)));
            }
        }
        None
    }

    /// Worker `w` steals from worker `v`'s queue: the first thread of the older half, whose
    /// rest goes to `w`'s queue. Only on worker `w`'s OS thread.
    fn steal_from(&self, w: usize, v: usize) -> Option<usize> {
        let victim = &self.queues[v];
        // The older threads first: half the overflow (at most half a ring: Go takes at most
        // that from its global queue; half of ten million threads moved at once cost 40 MB of
        // a temporary list), else half the ring.
        let mut stolen = Vec::new();
        if victim.spilled.load(Acquire) != 0 {
            victim.with_overflow(|o| {
                let take = o.len().div_ceil(2).min(RING / 2);
                stolen.extend(o.drain(..take));
            });
        }
        if stolen.is_empty() {
            stolen = victim.take_half(self.ring(v));
        }
        if stolen.is_empty() {
            // Its next thread, last: the victim is about to run it.
            if victim.next.load(Relaxed) != 0 {
                let next = victim.next.swap(0, AcqRel);
                if next != 0 {
                    stolen.push(next);
                }
            }
        }
        let mut it = stolen.into_iter();
        let first = it.next()?;
        for t in it {
            self.queues[w].push_back(self.ring(w), t);
        }
        Some(first)
    }

    /// Whether worker `w` may steal from worker `v`'s queue now (module docs, "When a thief
    /// steals"): it holds [`STEAL_AT_ONCE`] threads or more, or some and `w` has seen it
    /// unchanged for [`STEAL_AGE`]. `w` watches one short queue at a time; with more workers
    /// it moves to another only when the one it watches is empty or was taken from.
    fn stealable(&self, w: usize, v: usize) -> bool {
        let victim = &self.queues[v];
        let len = victim.len();
        if len == 0 {
            return false;
        }
        if len >= STEAL_AT_ONCE || self.steal_age_ns == 0 || self.abandoned[v].load(Relaxed) {
            return true;
        }
        let watch = &self.watches[w];
        let progress = victim.progress();
        let now = self.epoch.elapsed().as_nanos() as u64;
        let watched = watch.victim.load(Relaxed);
        if watched == v && watch.progress.load(Relaxed) == progress {
            return now.saturating_sub(watch.since.load(Relaxed)) >= self.steal_age_ns;
        }
        let idle_watch = watched == NO_VICTIM
            || watched == v
            || watched >= self.workers()
            || self.queues[watched].len() == 0
            || self.queues[watched].progress() != watch.progress.load(Relaxed);
        if idle_watch {
            watch.victim.store(v, Relaxed);
            watch.progress.store(progress, Relaxed);
            watch.since.store(now, Relaxed);
        }
        false
    }

    /// Threads queued on worker `w` (a snapshot while others push and take).
    pub fn len_of(&self, w: usize) -> usize {
        self.queues[w].len()
    }

    /// Threads queued on all workers, preempted ones included.
    pub fn len(&self) -> usize {
        (0..self.workers()).map(|w| self.len_of(w)).sum::<usize>()
            + self.preempted_len.load(Acquire)
    }

    /// Whether every queue is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    struct Id(usize);
    impl Word for Id {
        fn to_word(self) -> usize {
            self.0
        }
        fn from_word(w: usize) -> Self {
            Id(w)
        }
    }

    #[test]
    fn one_worker_is_fifo_with_next_first() {
        let q = RunQueues::<Id>::new(1);
        for i in 1..=1000 {
            q.push(0, Id(i));
        }
        q.push_front(0, Id(5000));
        assert_eq!(q.len(), 1001);
        assert_eq!(q.pop_own(0), Some(Id(5000)));
        // The ring overflowed (more than RING threads): still first in, first out, and a
        // thread put back while others wait goes behind them all.
        for i in 1..=500 {
            assert_eq!(q.pop_own(0), Some(Id(i)));
            q.push(0, Id(i));
        }
        let rest: Vec<usize> = core::iter::from_fn(|| q.pop_own(0))
            .map(|Id(i)| i)
            .collect();
        assert_eq!(rest, (501..=1000).chain(1..=500).collect::<Vec<_>>());
        assert!(q.is_empty());
    }

    #[test]
    fn a_replaced_next_goes_to_the_back() {
        let q = RunQueues::<Id>::new(1);
        q.push(0, Id(1));
        q.push_front(0, Id(2));
        q.push_front(0, Id(3));
        let order: Vec<_> = core::iter::from_fn(|| q.pop_own(0)).collect();
        assert_eq!(order, [Id(3), Id(1), Id(2)]);
    }

    #[test]
    fn a_steal_takes_the_older_half() {
        let q = RunQueues::<Id>::new(2);
        for i in 1..=10 {
            q.push(0, Id(i));
        }
        // A short queue is the owner's until it stalls.
        assert_eq!(q.pop(1), None);
        std::thread::sleep(STEAL_AGE * 2);
        assert_eq!(q.pop(1), Some((Id(1), Source::Stolen(0))));
        assert_eq!(q.len_of(1), 4);
        assert_eq!(q.len_of(0), 5);
        assert_eq!(q.pop_own(0), Some(Id(6)));
        assert_eq!(q.pop_own(1), Some(Id(2)));
    }

    #[test]
    fn a_short_queue_its_owner_takes_from_is_not_stolen() {
        let q = RunQueues::<Id>::new(2);
        for i in 1..=8 {
            q.push(0, Id(i));
        }
        let mut owner_took = 0;
        for _ in 0..4 {
            assert_eq!(q.pop(1), None);
            std::thread::sleep(STEAL_AGE * 2);
            // The owner takes one and queues another within the age: still no steal.
            assert!(q.pop_own(0).is_some());
            owner_took += 1;
            q.push(0, Id(100 + owner_took));
        }
        assert_eq!(q.pop(1), None);
        // Now it stalls.
        std::thread::sleep(STEAL_AGE * 2);
        assert!(matches!(q.pop(1), Some((_, Source::Stolen(0)))));
    }

    #[test]
    fn a_preempted_thread_runs_after_a_few_others_not_after_all() {
        let q = RunQueues::<Id>::new(1);
        for i in 1..=1000 {
            q.push(0, Id(i));
        }
        q.push_preempted(Id(5000));
        assert_eq!(q.len(), 1001);
        let order: Vec<usize> = (0..PREEMPTED_EVERY)
            .map(|_| q.pop_own(0).unwrap().0)
            .collect();
        assert_eq!(order.last(), Some(&5000), "{order:?}");
        assert_eq!(&order[..3], &[1, 2, 3]);
        // And at once when the worker's own queue is empty.
        let q = RunQueues::<Id>::new(2);
        q.push_preempted(Id(7));
        assert_eq!(q.pop_own(1), Some(Id(7)));
        assert!(q.is_empty());
    }

    /// A busy worker (its own queue never empty: its threads yield in a loop) still takes the
    /// threads of an abandoned queue: a batch at every PREEMPTED_EVERYth take. Not once the
    /// queue's worker is back.
    #[test]
    fn a_busy_worker_takes_from_an_abandoned_queue() {
        let q = RunQueues::<Id>::new(2);
        for i in 1..=10 {
            q.push(0, Id(i));
        }
        for i in 1000..1003 {
            q.push(1, Id(i));
        }
        let cycle = |q: &RunQueues<Id>| -> Vec<usize> {
            (0..PREEMPTED_EVERY)
                .map(|_| {
                    let t = q.pop_own(1).unwrap();
                    q.push(1, t);
                    t.0
                })
                .collect()
        };
        // Worker 0 takes from its queue: worker 1 keeps to its own three.
        assert!(cycle(&q).iter().all(|&t| t >= 1000));
        q.set_abandoned(0, true);
        let got = cycle(&q);
        assert_eq!(got.iter().filter(|&&t| t < 1000).count(), 1, "{got:?}");
        // The rest of the stolen half is now worker 1's.
        assert_eq!(q.len_of(1), 3 + 5);
        assert_eq!(q.len_of(0), 5);
        q.set_abandoned(0, false);
        let got = cycle(&q);
        assert_eq!(q.len_of(0), 5, "{got:?}");
        // An abandoned short queue is stolen from at once by an idle worker, without the age
        // rule's wait.
        let q = RunQueues::<Id>::new(2);
        q.push(0, Id(1));
        assert_eq!(q.pop(1), None);
        q.set_abandoned(0, true);
        assert_eq!(q.pop(1), Some((Id(1), Source::Stolen(0))));
    }

    #[test]
    fn a_long_queue_is_stolen_from_at_once() {
        let q = RunQueues::<Id>::new(2);
        for i in 1..=STEAL_AT_ONCE {
            q.push(0, Id(i));
        }
        assert_eq!(q.pop(1), Some((Id(1), Source::Stolen(0))));
        // Its next thread alone, once stalled.
        let q = RunQueues::<Id>::new(2);
        q.push_front(0, Id(7));
        assert_eq!(q.pop(1), None);
        std::thread::sleep(STEAL_AGE * 2);
        assert_eq!(q.pop(1), Some((Id(7), Source::Stolen(0))));
    }

    /// Every value pushed comes out exactly once while owners push and take and others steal
    /// from all sides at once (the invariant the scheduler needs: a thread never runs twice
    /// at once, and none is lost).
    #[test]
    fn values_come_out_exactly_once_under_stealing() {
        const WORKERS: usize = 4;
        const PER: usize = 50_000;
        let q = RunQueues::<Id>::new(WORKERS);
        let taken: Vec<AtomicU32> = (0..WORKERS * PER + 1).map(|_| AtomicU32::new(0)).collect();
        let done = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for w in 0..WORKERS {
                let (q, taken, done) = (&q, &taken, &done);
                s.spawn(move || {
                    let mut next = 0;
                    while done.load(Acquire) < WORKERS * PER {
                        if next < PER {
                            let v = 1 + w * PER + next;
                            if next % 997 == 0 {
                                q.push_remote((w + 1) % WORKERS, Id(v));
                            } else if next % 7 == 0 {
                                q.push_front(w, Id(v));
                            } else {
                                q.push(w, Id(v));
                            }
                            next += 1;
                        }
                        if next % 3 != 0 || next >= PER {
                            if let Some((Id(v), _)) = q.pop(w) {
                                assert_eq!(taken[v].fetch_add(1, AcqRel), 0, "{v} twice");
                                done.fetch_add(1, AcqRel);
                            }
                        }
                    }
                });
            }
        });
        assert!(taken[1..].iter().all(|t| t.load(Acquire) == 1));
    }
}
