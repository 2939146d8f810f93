//! Waiting on a word without holding a worker: a green thread parks until the word changes,
//! and whoever changes it wakes every thread parked on it (a futex for green threads, used by
//! relaxed replay: a thread held back until another reaches an event parks instead of yielding
//! in a loop, so the threads that can go on run without switching back to it at every yield).
//!
//! Waiters are kept in a few buckets by the word's address, each a spin lock, a list and a
//! count the waker reads first (no lock when nobody waits).
//!
//! No lost wake-up: a waiter counts itself and compares the word under the bucket's lock, and
//! stays on the list with the lock held until its worker has switched away from it
//! ([`sched::park`]); the waker changes the word before it reads the count (both `SeqCst`),
//! and takes the lock to drain the list. Either the waiter sees the changed word, or the
//! waker sees the count and then finds the waiter on the list.

use core::cell::UnsafeCell;
use core::sync::atomic::Ordering::SeqCst;
use core::sync::atomic::{AtomicU32, AtomicUsize};

use super::sched::{self, Green, Switched};
use super::sync::RawSpin;

const BUCKETS: usize = 64;

struct Bucket {
    spin: RawSpin,
    /// Threads on the list (changed under `spin`).
    count: AtomicUsize,
    /// (word's address, parked thread).
    waiters: UnsafeCell<Vec<(usize, *const Green)>>,
}

// SAFETY: `waiters` is accessed only under `spin`; its threads are records of parked threads,
// alive until woken.
unsafe impl Sync for Bucket {}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Bucket = Bucket {
    spin: RawSpin::new(),
    count: AtomicUsize::new(0),
    waiters: UnsafeCell::new(Vec::new()),
};

static TABLE: [Bucket; BUCKETS] = [EMPTY; BUCKETS];

fn bucket(word: &AtomicU32) -> &'static Bucket {
    let a = word as *const AtomicU32 as usize;
    &TABLE[(a >> 2) % BUCKETS]
}

/// Parks the running green thread while `word` holds `expected`, until [`wake_all`] on it.
/// Returns at once if the word changed. A thread pinned in a C callback cannot switch away: it
/// yields instead (and its caller checks again). `phase`: see [`Switched::Deferred`].
pub fn wait(word: &AtomicU32, expected: u32, phase: u32) -> Switched {
    if crate::chunk::handler::pinned() {
        return sched::yield_now(phase);
    }
    let b = bucket(word);
    b.spin.lock();
    b.count.fetch_add(1, SeqCst);
    if word.load(SeqCst) != expected {
        b.count.fetch_sub(1, SeqCst);
        b.spin.unlock();
        return Switched::Done;
    }
    // SAFETY: under `spin`.
    unsafe { (*b.waiters.get()).push((word as *const AtomicU32 as usize, sched::current())) };
    // SAFETY: `spin` is held and the thread is on the list, from which `wake_all` takes and
    // wakes it once.
    unsafe { sched::park(&b.spin, phase) }
}

/// Wakes every green thread parked on `word` (call it after changing the word).
pub fn wake_all(word: &AtomicU32) {
    let b = bucket(word);
    if b.count.load(SeqCst) == 0 {
        return;
    }
    let a = word as *const AtomicU32 as usize;
    // One at a time, waking outside the lock (as the green mutex does): lists are short.
    loop {
        b.spin.lock();
        // SAFETY: under `spin`.
        let list = unsafe { &mut *b.waiters.get() };
        let next = list
            .iter()
            .position(|&(w, _)| w == a)
            .map(|i| list.swap_remove(i).1);
        if next.is_some() {
            b.count.fetch_sub(1, SeqCst);
        }
        b.spin.unlock();
        let Some(g) = next else {
            return;
        };
        // SAFETY: `g` parked under `spin` (released only after its switch) and was on the list
        // once; it is woken once, here.
        unsafe { sched::wake(g) };
    }
}
