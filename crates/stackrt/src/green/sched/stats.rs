//! The green threads' counters (`STACKRT_STATS=1`) and their line at exit ([`print_stats_at_exit`]).

use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

use super::SCHED;

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

/// Prints the green threads' line of `STACKRT_STATS=1` (registered with `atexit`).
pub(super) extern "C" fn print_stats_at_exit() {
    let Some(s) = SCHED.get() else { return };
    let mut buf = crate::base::diag::StackBuf::<640>::new();
    let st = &s.stats;
    let _ = core::fmt::write(
        &mut buf,
        format_args!(
            "stackrt: green threads: {} workers, {} created, {} peak alive, {} switches, {} steals, {} parks, {} fixed stacks mapped, {} preemptions, {} hand-offs, {} worker OS threads at most\n",
            s.n_workers,
            st.created.load(Relaxed),
            st.peak_alive.load(Relaxed),
            st.switches.load(Relaxed),
            st.steals.load(Relaxed),
            st.parks.load(Relaxed),
            s.fixed.mapped(),
            st.preemptions.load(Relaxed),
            st.handoffs.load(Relaxed),
            st.peak_os_workers.load(Relaxed).max(s.n_workers as u64),
        ),
    );
    buf.write_to_stderr();
}
