//! The green threads' counters (`STACKRT_STATS=1`; `super::print_stats_at_exit` prints them).

use core::sync::atomic::AtomicU64;

/// Counters of `STACKRT_STATS=1`.
#[derive(Default)]
pub struct GreenStats {
    pub created: AtomicU64,
    pub peak_alive: AtomicU64,
    pub switches: AtomicU64,
    pub steals: AtomicU64,
    pub parks: AtomicU64,
    /// Yields a preemption request forced at a checkpoint.
    pub preemptions: AtomicU64,
}
