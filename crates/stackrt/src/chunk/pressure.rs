//! Memory pressure: above the soft limit only as many threads as hold a growth token take
//! more chunk memory; the others sleep on a futex until memory is given back (the chain
//! module's docs, "Memory pressure").

use core::sync::atomic::{Ordering::Relaxed, Ordering::SeqCst};

use super::chain::ThreadChain;
use super::runtime::Runtime;
use crate::base::os::monotonic_ms;
use crate::base::os::{futex_wait, futex_wake};

impl Runtime {
    /// Memory pressure (module docs): while the chunks held by threads are above the soft
    /// limit, only `max_growers` threads may take more (they hold a growth token until they
    /// give memory back); this one waits for a token, or for the held memory to drop below the
    /// soft limit. The count of gives is read before the state is checked again, so a give or
    /// token release in between ends the wait at once. Every give (progress somewhere) moves
    /// the deadline on; only when nothing was given back for `growth_wait_ms` (threads that
    /// wait for each other) does the thread go on anyway, with a token of its own.
    pub(super) fn wait_for_growth_token(&self, chain: &ThreadChain) {
        let mut deadline = monotonic_ms() + self.config.growth_wait_ms;
        let mut seen = self.gives.load(SeqCst);
        let mut waited = false;
        loop {
            if self.held.load(SeqCst) < self.config.soft_limit {
                if waited {
                    // Below the soft limit every waiter may go on, not only the few one give
                    // woke: pass the wake on.
                    self.wake_waiters();
                }
                return;
            }
            let g = self.growers.load(SeqCst);
            if g < self.config.max_growers
                && self
                    .growers
                    .compare_exchange(g, g + 1, SeqCst, Relaxed)
                    .is_ok()
            {
                chain.grower.set(true);
                return;
            }
            // Gives are checked before the deadline: a give wakes only a few waiters (see
            // `wake_waiters`), the others see it when their sleep times out.
            let now = monotonic_ms();
            let now_seen = self.gives.load(SeqCst);
            if now_seen != seen {
                seen = now_seen;
                deadline = now + self.config.growth_wait_ms;
            } else if now >= deadline {
                self.growers.fetch_add(1, SeqCst);
                chain.grower.set(true);
                self.stats.growth_timeouts.fetch_add(1, Relaxed);
                return;
            }
            self.wait_for_give(seen, deadline - now);
            waited = true;
        }
    }

    /// Sleeps until the next give to the pool (the count of gives differs from `seen`) or for
    /// `ms` milliseconds, whichever comes first (`futex`; a plain system call, no lock held).
    pub(super) fn wait_for_give(&self, seen: u32, ms: u64) {
        self.waiters.fetch_add(1, SeqCst);
        futex_wait(&self.gives, seen, ms);
        self.waiters.fetch_sub(1, SeqCst);
        self.stats.growth_waits.fetch_add(1, Relaxed);
    }

    /// A thread that gives memory back (it is shrinking) gives up its growth token, if any,
    /// and wakes the waiters (the give that follows or preceded did, or will).
    pub(super) fn release_growth_token(&self, chain: &ThreadChain) {
        if chain.grower.replace(false) {
            self.growers.fetch_sub(1, SeqCst);
            self.gives.fetch_add(1, SeqCst);
            self.wake_waiters();
        }
    }

    /// Wakes as many threads in a growth wait as can go on: every one of them (up to as many
    /// as there are growth tokens) when the held memory is below the soft limit, else one per
    /// free growth token, else none. Waking all of them made every give (a batch of chunks,
    /// a token given back) wake every waiting thread, hundreds with many deep threads, to
    /// find that all but a few must sleep again; and every wake is two context switches, each
    /// costing a thread that was in the middle of a deep unwind the return predictions of the
    /// rest of it. The others see the give when their sleep times out, and since it moved
    /// their deadline on, they sleep again (`wait_for_growth_token`).
    pub(super) fn wake_waiters(&self) {
        if self.waiters.load(SeqCst) == 0 {
            return;
        }
        let max = self.config.max_growers.max(1);
        let wake = if self.held.load(SeqCst) < self.config.soft_limit {
            max
        } else {
            max.saturating_sub(self.growers.load(SeqCst))
        };
        if wake == 0 {
            return;
        }
        let wake = i32::try_from(wake).unwrap_or(i32::MAX);
        futex_wake(&self.gives, wake);
    }
}
