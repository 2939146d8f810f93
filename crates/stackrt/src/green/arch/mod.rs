//! The green threads' context switch in assembly, one module per architecture (selected by the
//! target being built); `super::context` is its Rust side.

#[cfg(target_arch = "x86")]
mod i686;
#[cfg(target_arch = "x86_64")]
mod x86_64;
