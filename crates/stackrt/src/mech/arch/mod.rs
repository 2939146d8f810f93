//! Per-architecture assembly of the mechanisms' runtime halves: the entry trampolines and the
//! overflow, underflow and slab handlers of the emission stage's mechanisms (one module per
//! architecture and mechanism, selected by the target being built).

#[cfg(target_arch = "x86")]
mod i686;
#[cfg(target_arch = "x86")]
mod i686_ccall;
#[cfg(target_arch = "x86")]
mod i686_heap;
#[cfg(target_arch = "x86")]
mod i686_lookahead;
#[cfg(target_arch = "x86")]
mod i686_mmu;
#[cfg(target_arch = "x86")]
mod i686_mtss;
#[cfg(target_arch = "x86_64")]
mod x86_64;
#[cfg(target_arch = "x86_64")]
mod x86_64_ccall;
#[cfg(target_arch = "x86_64")]
mod x86_64_heap;
#[cfg(target_arch = "x86_64")]
mod x86_64_lookahead;
#[cfg(target_arch = "x86_64")]
mod x86_64_mmu;
#[cfg(target_arch = "x86_64")]
mod x86_64_mtss;
