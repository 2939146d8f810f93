//! Green threads (M:N) on the runtime's stacks, behind the thread library under `cmm compile
//! --threads green`: [`context`] holds the context switch (the per-architecture assembly is in
//! `crate::green::arch`) and the stacks a context runs on, [`stacks`] the green threads'
//! stack blocks, [`sizing`] their sizes learned per entry function, [`fixed_stacks`] the
//! reuse of fixed stacks, [`queue`] the per-worker run queues with work stealing, [`sched`] the
//! scheduler, [`preempt`] preemption at `lookahead` checkpoints and the monitor's signal,
//! [`preempt_async`] preemption anywhere in compiled code, [`det`] the deterministic mode
//! (`STACKRT_SCHED`) and [`sync`] parking locks and the green mutex.

mod arch;
pub mod context;
pub mod det;
pub mod fixed_stacks;
pub mod futex;
pub mod preempt;
pub mod preempt_async;
pub mod queue;
pub mod sched;
pub mod sizing;
pub mod stacks;
pub mod sync;

/// Whether green threads run programs of convention `abi` (the others are refused at start
/// with one line).
pub fn supports_abi(abi: u32) -> bool {
    crate::base::abi::is_fixed_stack_abi(abi)
        || abi == crate::base::abi::ABI_LOOKAHEAD
        || abi == crate::base::abi::ABI_MMU
        || abi == crate::base::abi::ABI_MMU_REUSE
        || abi == crate::base::abi::ABI_HEAP
        || abi == crate::base::abi::ABI_HEAP_MALLOC
        || abi == crate::base::abi::ABI_MTSS
}
