//! C-- middle and back ends: lowering to Cranelift IR, native x86-64 back end, emission stage.
//!
//! - [`lower`]: typed program → Cranelift IR ([`lower::LoweredProgram`]), the contract every
//!   back end reads (see `ARCHITECTURE.md`, "Contract: Cranelift IR").
//! - [`native`]: Cranelift's own x86-64 back end and cranelift-object (ABI id 0, no mechanism).
//! - [`verify()`]: runs the Cranelift IR verifier over a lowered program.

pub mod bounds;
pub mod callgraph;
pub mod emit;
pub mod lower;
pub mod native;
pub mod race;
pub mod race_repeats;
pub mod unroll;

pub use lower::{lower_program, LoweredProgram};

/// Runs `cranelift_codegen::verify_function` on every function of a lowered program; returns
/// the rendered errors of the first function that fails.
pub fn verify(p: &LoweredProgram) -> Result<(), String> {
    let flags = cranelift_codegen::settings::Flags::new(cranelift_codegen::settings::builder());
    for f in &p.functions {
        cranelift_codegen::verify_function(&f.func, &flags).map_err(|e| {
            format!(
                "IR of {} fails verification:\n{}",
                f.name,
                cranelift_codegen::print_errors::pretty_verifier_error(&f.func, None, e)
            )
        })?;
    }
    Ok(())
}
