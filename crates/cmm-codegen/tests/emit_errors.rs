//! The emission stage reports input it cannot compile as an `EmitError` naming the opcode (never
//! a panic), and compiles hand-written Cranelift IR shaped like the lowering's contract.

use cmm_codegen::emit::{emit_program, EmitOptions, MechKind, Target};
use cmm_codegen::lower::{LoweredFunction, LoweredProgram};
use cranelift_codegen::ir::types;

fn program(clif: &str, ptr: cranelift_codegen::ir::Type) -> LoweredProgram {
    let funcs = cranelift_reader::parse_functions(clif).expect("valid CLIF");
    LoweredProgram {
        pointer_type: ptr,
        functions: funcs
            .into_iter()
            .enumerate()
            .map(|(i, func)| LoweredFunction {
                name: format!("f{i}"),
                symbol: format!("cmm_f{i}"),
                func,
                copy_of: None,
            })
            .collect(),
        externs: Vec::new(),
        data: Vec::new(),
        num_globals: 0,
        num_strings: 0,
    }
}

const OPTS: EmitOptions = EmitOptions {
    target: Target::X86_64,
    mech: MechKind::Traditional,
};

#[test]
fn unsupported_opcode_is_an_error_naming_it() {
    let p = program(
        "function u0:0(i32) -> i32 system_v {
         block0(v0: i32):
             v1 = popcnt v0
             return v1
         }",
        types::I64,
    );
    let err = emit_program(&p, &OPTS).expect_err("popcnt is not supported");
    assert!(err.to_string().contains("popcnt"), "{err}");
    assert_eq!(err.function.as_deref(), Some("f0"));
}

#[test]
fn wrong_pointer_type_is_an_error() {
    let p = program(
        "function u0:0() -> i32 system_v {
         block0:
             v0 = iconst.i32 7
             return v0
         }",
        types::I32,
    );
    assert!(emit_program(&p, &OPTS).is_err());
}

#[test]
fn division_uses_eax_and_edx_and_shifts_use_cl() {
    let p = program(
        "function u0:0(i32, i32) -> i32 system_v {
         block0(v0: i32, v1: i32):
             v2 = sdiv v0, v1
             v3 = srem v0, v1
             v4 = ishl v2, v3
             return v4
         }",
        types::I64,
    );
    let asm = emit_program(&p, &OPTS).expect("emits");
    assert!(asm.contains("\tcdq\n"), "{asm}");
    assert!(asm.contains("\tidiv "), "{asm}");
    assert!(asm.contains(", cl\n"), "{asm}");
}
