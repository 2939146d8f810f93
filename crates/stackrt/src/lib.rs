//! Runtime linked into every C-- program: thread library, stack chunks, mechanism trampolines, statistics.

pub mod abi;
pub mod arch;
pub mod chunk;
pub mod green;
pub mod mech;
pub mod signals;
pub mod start;
pub mod stats;
pub mod threads;
mod weak;
