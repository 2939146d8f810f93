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
    /// Workers handed off while their thread was blocked in a call, and the most worker OS
    /// threads started (`super::handoff`).
    pub handoffs: AtomicU64,
    pub peak_os_workers: AtomicU64,
}
