//! C-- middle and back ends: lowering to Cranelift IR, native x86-64 back end, emission stage.

pub mod callgraph;
