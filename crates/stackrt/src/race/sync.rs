//! Thread-library events (`sthread_create`, `_join`, `_mutex_lock`, `_cas`): their numbers in
//! schedule traces, and relaxed replay's holds around them ([`super::relaxed`]).

use super::{current, relaxed, RaceThread};

/// The running thread's race state, if it has one (the callers here are out of line, so each
/// finds it afresh after a switch).
#[inline(always)]
fn running() -> Option<&'static RaceThread> {
    let cur = current();
    // SAFETY: the running thread's state (alive until its join, after it ends); only this
    // thread changes its counters and cursor.
    (!cur.is_null()).then(|| unsafe { &*cur })
}

/// Counts the thread-library call at event `n` (its number for `sync_event` readers).
#[inline(always)]
fn count(t: &RaceThread, n: u64) {
    t.events.set(n);
    t.sync_event.set(n);
}

/// A thread-library call that is an event of schedule traces (`sthread_create`, `_join`,
/// `_mutex_lock`, `_cas`; `_unlock` counts in [`super::release`]) starts: it gets its number. Under relaxed
/// replay the caller then waits ([`sync_wait`], or [`sync_wait_green`]) before it acts.
#[inline(never)]
pub fn sync_begin() {
    let Some(t) = running() else {
        return;
    };
    let n = t.events.get() + 1;
    count(t, n);
    if t.cursor.needs(n) {
        relaxed::begin(&t.cursor, n);
    }
}

/// What relaxed replay asks of a compare-and-swap ([`relaxed_quiet_cas`]).
pub enum QuietCas {
    /// Make the swap: the trace holds nothing at it.
    Swap,
    /// Return this value without a swap: the recorded one failed, finding it.
    Found(i32),
    /// The full path: [`sync_begin`], [`sync_wait`], [`super::cas`], [`sync_done`] (also
    /// outside relaxed replay).
    Full,
}

/// Relaxed replay's common compare-and-swap, in one call. When the trace has nothing at the
/// running thread's next event `n` nor at `n + 1` (no wait, no failed swap, nothing to publish
/// when it is done), counts `n` as [`sync_begin`] would and returns [`QuietCas::Swap`]; when it
/// has nothing there but a run of failed swaps that `n` is in, counts `n` and returns
/// [`QuietCas::Found`] with the recorded value ([`relaxed::quiet_failed`]). The caller then
/// makes the swap as an uninstrumented build does, or returns the value, without
/// [`sync_wait`], the relaxed branch of [`super::cas`] or [`sync_done`] (each of which would
/// find nothing more to do at `n`). [`QuietCas::Full`], with nothing counted, otherwise. A
/// spinning thread's swaps are mostly such events: Philosophers (16 threads) makes about 1,300
/// per round, and the four calls, each finding the running thread afresh, cost it about a
/// third of the plain run; a `random:1` recording of Fibonacci has 135,000 failed tries in
/// 1,000 rounds.
#[inline(never)]
pub fn relaxed_quiet_cas(old: i32) -> QuietCas {
    let Some(t) = running().filter(|_| relaxed::on()) else {
        return QuietCas::Full;
    };
    let n = t.events.get() + 1;
    // `needs(n + 1)` is false only if the next event of interest is after `n + 1`, so it is
    // false at `n` too: `begin`, `wait_in`, `failed_value` and `done` would all return at once.
    let q = if !t.cursor.needs(n.saturating_add(1)) {
        QuietCas::Swap
    } else if let Some(v) = relaxed::quiet_failed(&t.cursor, n, old) {
        QuietCas::Found(v)
    } else {
        return QuietCas::Full;
    };
    count(t, n);
    q
}

/// Waits until the recorded order lets the call begun by [`sync_begin`] go on (relaxed replay;
/// OS threads: spinning, then sleeping).
#[inline(never)]
pub fn sync_wait() {
    // Nothing is deferred outside a green thread's library stub.
    let _ = sync_wait_green(0);
}

/// [`sync_wait`] for a green thread in a thread-library call: true when its park was left to
/// the library stub, which repeats the call in `phase` (the caller returns at once).
#[inline(never)]
pub fn sync_wait_green(phase: u32) -> bool {
    running()
        .filter(|_| relaxed::on())
        .is_some_and(|t| relaxed::wait_in(&t.cursor, t.sync_event.get(), phase))
}

/// The call begun by [`sync_begin`] is done (other threads may wait for it).
#[inline(never)]
pub fn sync_done() {
    if let Some(t) = running().filter(|_| relaxed::on()) {
        relaxed::done(&t.cursor, t.events.get());
    }
}

/// Relaxed replay: whether the running thread's next event would wait for another thread now
/// (`sthread_yield` yields only then: see there).
#[inline(never)]
pub fn relaxed_next_waits() -> bool {
    running().is_some_and(|t| relaxed::waits_now(&t.cursor, t.events.get() + 1))
}
