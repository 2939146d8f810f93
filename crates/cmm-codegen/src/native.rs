//! The native back end: Cranelift's own x86-64 code generator plus cranelift-object.
//!
//! [`compile_native`] turns a [`LoweredProgram`] built for x86-64 into an ELF relocatable object
//! (System V ABI, non-PIC, for a `-no-pie` executable). Every IR external name resolves directly:
//! the module's `FuncId`s and `DataId`s are declared in the order of the IR contract, so
//! `UserExternalName { namespace, index }` of the IR *is* cranelift-module's name for the same
//! declaration.
//!
//! Function index layout in the module (namespace 0):
//!
//! ```text
//! 0 .. F            C-- functions, exported as cmm_<name>
//! F .. F+E          externs: the C symbol itself (imported), or for a variadic extern the local
//!                   thunk __cmm_va_<name> (see below)
//! F+E ..            the real C symbols behind the variadic thunks (imported)
//! ```
//!
//! Data objects (namespace 1) follow [`LoweredProgram::data`], then `__cmm_abi` (a 32-bit
//! exported constant 0 = "native System V", see `crates/stackrt/src/base/abi.rs`).
//!
//! **Variadic externs.** Cranelift has no variadic signatures, so it never sets `al` (the number
//! of vector registers holding arguments) before a call; glibc's `printf` then may skip or
//! misread its `double` arguments. Every call to a variadic extern therefore goes to a thunk
//! defined from raw bytes:
//!
//! ```text
//! __cmm_va_printf:  b0 08           mov  al, 8        ; upper bound of xmm args used
//!                   e9 <rel32>      jmp  printf       ; R_X86_64_PLT32-style branch reloc
//! ```
//!
//! The thunk leaves every argument register and the stack untouched, so the callee sees exactly
//! the caller's call.
//!
//! **Frame sizes.** The frame-size cell of each function (read by `stacksizeof`) receives the
//! real size of the frame Cranelift built: `MachBufferFinalized::frame_layout()` gives
//! `frame_to_fp_offset`, the distance from the stack pointer after the prologue to the saved
//! frame pointer (clobber saves + spill slots and stack slots + outgoing argument area); the x86-64
//! back end always adds a 16-byte setup area (return address and saved `rbp`). So
//! `frame size = frame_to_fp_offset + 16`: the bytes a call to the function occupies on the stack,
//! from the caller's stack pointer before the `call` down to the callee's stack pointer.

use std::fmt;
use std::str::FromStr;

use cranelift_codegen::ir::{self, types};
use cranelift_codegen::isa::{self, OwnedTargetIsa};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_codegen::{binemit::Reloc, Context};
use cranelift_module::{
    default_libcall_names, DataDescription, Linkage, Module, ModuleReloc, ModuleRelocTarget,
};
use cranelift_object::{ObjectBuilder, ObjectModule};
use target_lexicon::Triple;

use crate::lower::{DataKind, DataWord, LoweredProgram, DATA_NAMESPACE, FUNC_NAMESPACE};

/// The size of the x86-64 setup area Cranelift always creates: return address + saved `rbp`.
pub const X86_64_SETUP_AREA: u32 = 16;

/// Why the native back end could not produce an object.
#[derive(Debug)]
pub enum NativeError {
    /// The program was lowered for a target this back end does not generate code for.
    UnsupportedTarget(String),
    /// Cranelift could not set up the ISA.
    Isa(String),
    /// cranelift-module rejected a declaration or definition, or compilation failed.
    Module(String),
    /// Writing the object file failed.
    Object(String),
}

impl fmt::Display for NativeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NativeError::UnsupportedTarget(t) => {
                write!(f, "the native back end only generates x86-64 code, not {t}")
            }
            NativeError::Isa(e) => write!(f, "cannot set up the x86-64 code generator: {e}"),
            NativeError::Module(e) => write!(f, "native code generation failed: {e}"),
            NativeError::Object(e) => write!(f, "cannot write the object file: {e}"),
        }
    }
}

impl std::error::Error for NativeError {}

/// The result of native compilation.
#[derive(Debug)]
pub struct NativeOutput {
    /// The ELF relocatable object.
    pub object: Vec<u8>,
    /// The frame size of each C-- function, in `LoweredProgram::functions` order.
    pub frame_sizes: Vec<u32>,
    /// Cranelift's disassembly of each function (VCode after register allocation), when asked.
    pub disasm: Option<String>,
}

/// The Cranelift x86-64 ISA with the settings this back end uses (opt_level speed, non-PIC,
/// inline stack probes for large frames).
pub fn x86_64_isa() -> Result<OwnedTargetIsa, NativeError> {
    let mut flags = settings::builder();
    for (k, v) in [
        ("opt_level", "speed"),
        ("is_pic", "false"),
        ("enable_probestack", "true"),
        ("probestack_strategy", "inline"),
    ] {
        flags
            .set(k, v)
            .map_err(|e| NativeError::Isa(format!("{k}={v}: {e}")))?;
    }
    let triple = Triple::from_str("x86_64-unknown-linux-gnu")
        .map_err(|e| NativeError::Isa(e.to_string()))?;
    isa::lookup(triple)
        .map_err(|e| NativeError::Isa(e.to_string()))?
        .finish(settings::Flags::new(flags))
        .map_err(|e| NativeError::Isa(e.to_string()))
}

fn module_err(e: impl fmt::Display) -> NativeError {
    NativeError::Module(e.to_string())
}

/// Compiles a program lowered for x86-64 into an object file. With `want_disasm`, also returns
/// Cranelift's disassembly.
pub fn compile_native(p: &LoweredProgram, want_disasm: bool) -> Result<NativeOutput, NativeError> {
    if p.pointer_type != types::I64 {
        return Err(NativeError::UnsupportedTarget("i686".into()));
    }
    let isa = x86_64_isa()?;
    let builder = ObjectBuilder::new(isa, "cmm", default_libcall_names()).map_err(module_err)?;
    let mut module = ObjectModule::new(builder);

    // Functions, in IR index order.
    let mut func_ids = Vec::new();
    for f in &p.functions {
        func_ids.push(
            module
                .declare_function(&f.symbol, Linkage::Export, &f.func.signature)
                .map_err(module_err)?,
        );
    }
    for e in &p.externs {
        let (name, linkage) = if e.variadic {
            (format!("__cmm_va_{}", e.name), Linkage::Local)
        } else {
            (e.name.clone(), Linkage::Import)
        };
        func_ids.push(
            module
                .declare_function(&name, linkage, &e.signature)
                .map_err(module_err)?,
        );
    }
    for (i, id) in func_ids.iter().enumerate() {
        debug_assert_eq!(
            id.as_u32(),
            i as u32,
            "module function ids follow the IR contract"
        );
    }
    let mut thunks = Vec::new();
    for (j, e) in p.externs.iter().enumerate() {
        if e.variadic {
            let target = module
                .declare_function(&e.name, Linkage::Import, &e.signature)
                .map_err(module_err)?;
            thunks.push((func_ids[p.functions.len() + j], target));
        }
    }

    // Data objects, in IR index order.
    let mut data_ids = Vec::new();
    for d in &p.data {
        let imported = d.kind == DataKind::ImportedTls;
        let linkage = if imported {
            Linkage::Import
        } else if d.exported {
            Linkage::Export
        } else {
            Linkage::Local
        };
        data_ids.push(
            module
                .declare_data(&d.symbol, linkage, d.writable, imported)
                .map_err(module_err)?,
        );
    }
    for (i, id) in data_ids.iter().enumerate() {
        debug_assert_eq!(
            id.as_u32(),
            i as u32,
            "module data ids follow the IR contract"
        );
    }
    let abi_id = module
        .declare_data("__cmm_abi", Linkage::Export, false, false)
        .map_err(module_err)?;

    // Code.
    let mut ctx = Context::new();
    ctx.set_disasm(want_disasm);
    let mut frame_sizes = Vec::new();
    let mut disasm = String::new();
    for (f, id) in p.functions.iter().zip(&func_ids) {
        ctx.func = f.func.clone();
        module
            .define_function(*id, &mut ctx)
            .map_err(|e| NativeError::Module(format!("function {}: {e:?}", f.name)))?;
        let compiled = ctx
            .compiled_code()
            .ok_or_else(|| module_err("no compiled code"))?;
        let frame = compiled
            .buffer
            .frame_layout()
            .map_or(0, |l| l.frame_to_fp_offset);
        frame_sizes.push(frame + X86_64_SETUP_AREA);
        if let Some(text) = &compiled.vcode {
            disasm.push_str(&format!("{}:\n{}\n", f.symbol, text));
        }
        ctx.clear();
        ctx.set_disasm(want_disasm);
    }
    for (thunk, target) in thunks {
        // mov al, 8 ; jmp rel32 (patched to the real function)
        let bytes = [0xb0, 0x08, 0xe9, 0, 0, 0, 0];
        let reloc = ModuleReloc {
            offset: 3,
            kind: Reloc::X86CallPCRel4,
            name: ModuleRelocTarget::user(FUNC_NAMESPACE, target.as_u32()),
            addend: -4,
        };
        module
            .define_function_bytes(thunk, 16, &bytes, &[reloc])
            .map_err(module_err)?;
    }

    // Data.
    for (d, id) in p.data.iter().zip(&data_ids) {
        if d.kind == DataKind::ImportedTls {
            continue;
        }
        let mut desc = DataDescription::new();
        desc.set_align(u64::from(d.align));
        match &d.kind {
            DataKind::Zeroed => desc.define_zeroinit(d.size as usize),
            DataKind::Bytes(b) => desc.define(b.clone().into_boxed_slice()),
            DataKind::FrameSize { function } => {
                let size = frame_sizes.get(*function as usize).copied().unwrap_or(0);
                desc.define(Box::new(size.to_le_bytes()));
            }
            DataKind::Words(words) => {
                let mut bytes = Vec::with_capacity(words.len() * 8);
                for (i, w) in words.iter().enumerate() {
                    match *w {
                        DataWord::Int(v) => bytes.extend_from_slice(&v.to_le_bytes()),
                        DataWord::Addr(index) => {
                            bytes.extend_from_slice(&[0; 8]);
                            let target = data_ids[index as usize];
                            let gv = module.declare_data_in_data(target, &mut desc);
                            desc.write_data_addr((i * 8) as u32, gv, 0);
                        }
                    }
                }
                desc.define(bytes.into_boxed_slice());
            }
            DataKind::ImportedTls => {}
        }
        module.define_data(*id, &desc).map_err(module_err)?;
    }
    let mut abi = DataDescription::new();
    abi.set_align(4);
    abi.define(Box::new(0u32.to_le_bytes()));
    module.define_data(abi_id, &abi).map_err(module_err)?;
    let _ = DATA_NAMESPACE;

    let object = module
        .finish()
        .emit()
        .map_err(|e| NativeError::Object(e.to_string()))?;
    Ok(NativeOutput {
        object,
        frame_sizes,
        disasm: want_disasm.then_some(disasm),
    })
}

/// The IR type check every back end can use: is this program lowered for x86-64?
pub fn is_x86_64(p: &LoweredProgram) -> bool {
    p.pointer_type == ir::types::I64
}
