//! Runtime linked into every C-- program: thread library, stack chunks, mechanism trampolines, statistics.

// The layers, lowest first (ARCHITECTURE.md, "The runtime's layers"; `tests/tidy.rs` checks
// that imports only point down).
pub mod base;
pub mod chunk;
pub mod green;
pub mod mech;
pub mod race;
pub mod signals;
#[cfg(not(test))]
pub mod start;
pub mod threads;
