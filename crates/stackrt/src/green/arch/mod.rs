//! The green threads' context switch and asynchronous preemption in assembly, one module per
//! architecture and concern (selected by the target being built); `super::context` and
//! `super::async_preempt` are their Rust sides.

#[cfg(target_arch = "x86")]
mod i686;
#[cfg(target_arch = "x86")]
mod i686_preempt;
#[cfg(target_arch = "x86_64")]
mod x86_64;
#[cfg(target_arch = "x86_64")]
mod x86_64_preempt;
