//! Runtime linked into every C-- program: thread library, stack chunks, mechanism trampolines, statistics.

pub mod abi;
pub mod chunk;
pub mod start;
pub mod stats;
pub mod threads;
