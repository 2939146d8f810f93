//! Per-architecture assembly of the runtime: the entry trampolines of the emission stage's
//! mechanisms (one module per architecture, selected by the target being built).

#[cfg(target_arch = "x86")]
mod i686;
#[cfg(target_arch = "x86")]
mod i686_heap;
#[cfg(target_arch = "x86")]
mod i686_lookahead;
#[cfg(target_arch = "x86")]
mod i686_mmu;
#[cfg(target_arch = "x86")]
mod i686_switch;
#[cfg(target_arch = "x86_64")]
mod x86_64;
#[cfg(target_arch = "x86_64")]
mod x86_64_heap;
#[cfg(target_arch = "x86_64")]
mod x86_64_lookahead;
#[cfg(target_arch = "x86_64")]
mod x86_64_mmu;
#[cfg(target_arch = "x86_64")]
mod x86_64_switch;
