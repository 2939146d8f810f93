//! Runtime linked into every C-- program: thread library, stack chunks, mechanism trampolines, statistics.

pub mod chunk;
pub mod stats;
