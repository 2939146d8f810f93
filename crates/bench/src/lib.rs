//! Criterion benchmarks and the experiment harness for C-- stack mechanisms.
