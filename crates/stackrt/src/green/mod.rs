//! Green threads (M:N) on the runtime's stacks: the building blocks so far. [`context`] holds
//! the context switch (the per-architecture assembly is in `crate::arch::*_switch`) and the
//! stacks a context runs on; [`queue`] the scheduler's per-worker run queues with work
//! stealing. The scheduler, the thread library's green mapping and the deterministic mode
//! build on them.

pub mod context;
pub mod queue;
