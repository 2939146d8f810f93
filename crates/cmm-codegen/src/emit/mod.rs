//! The emission stage: i686 and x86-64 assembly (GNU as, Intel syntax) from the lowered
//! Cranelift IR, with the call sequences of a chosen stack mechanism.
//!
//! Pipeline per function: [`isel`] (Cranelift IR → [`vcode::VCode`] over virtual registers) →
//! regalloc2 → [`print`] (frame layout, mechanism sequences from [`mech`], assembly text).
//! See `ARCHITECTURE.md`, "Emission stage", for the conventions and frame diagrams.

use std::fmt::{self, Write};

use cranelift_codegen::ir::{ExternalName, InstructionData};

use crate::lower::{DataKind, DataWord, LoweredProgram, NameTarget};

pub mod bounds;
pub mod c_entry;
pub mod isel;
pub mod mech;
pub mod print;
pub mod regs;
mod rename;
mod spare_users;
pub mod vcode;

pub use mech::Mechanism;

/// The target architecture of the emitted code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    I686,
    X86_64,
}

impl Target {
    /// Size of a stack slot (a pushed argument or return address).
    pub fn slot(self) -> u32 {
        match self {
            Target::I686 => 4,
            Target::X86_64 => 8,
        }
    }
    /// The stack pointer's name.
    pub fn sp(self) -> &'static str {
        match self {
            Target::I686 => "esp",
            Target::X86_64 => "rsp",
        }
    }
}

/// The stack mechanisms the emission stage implements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MechKind {
    /// Thesis listings 3.2-3.3: caller pushes, `call`, caller pops.
    Traditional,
    /// Paper section 4.2: caller pushes the return address and jumps, callee pops everything.
    CalleeCleanup,
    /// Thesis 3.4.3: linked stack chunks of `chunk_size` bytes, checkpoint calls test for room
    /// (`mech::lookahead`).
    Lookahead { chunk_size: u32 },
    /// Thesis 3.4.4 / paper 4.5: linked stack chunks with a guard page; the caller's probe
    /// faults into the runtime's `SIGSEGV` handler on overflow (`mech::mmu`). `reuse`: the
    /// paper's MMU-with-reuse (`mmu-reuse`), chunks kept in caches and the shared pool;
    /// without it (`mmu`) every underflow gives its chunk back to the system, as the thesis's.
    Mmu { reuse: bool, chunk_size: u32 },
    /// Thesis 3.4.2 / paper 4.3: every activation in its own heap block (`mech::heap`), from
    /// per-thread free lists by size class carved from slabs of `slab_size` bytes; `malloc`:
    /// the thesis's variant, `malloc` and `free` for every frame (`heap-malloc`).
    Heap { malloc: bool, slab_size: u32 },
    /// The MTSS seed (Middha, Simpson, Barua, CASES 2005): every thread's native stack in one
    /// region, an entry check in every function, and overflow into pages of `page_size` bytes
    /// at the far end of other threads' stacks (`mech::mtss`).
    Mtss { page_size: u32 },
}

impl MechKind {
    pub fn name(self) -> &'static str {
        mech::by_kind(self).name()
    }
    /// Parses a `--mech` value.
    pub fn from_name(s: &str) -> Option<MechKind> {
        match s {
            "traditional" => Some(MechKind::Traditional),
            "callee-cleanup" => Some(MechKind::CalleeCleanup),
            "lookahead" => Some(MechKind::Lookahead {
                chunk_size: crate::callgraph::DEFAULT_CHUNK_SIZE,
            }),
            "mmu" | "mmu-reuse" => Some(MechKind::Mmu {
                reuse: s == "mmu-reuse",
                chunk_size: mech::mmu::DEFAULT_CHUNK_SIZE_64,
            }),
            "heap" | "heap-malloc" => Some(MechKind::Heap {
                malloc: s == "heap-malloc",
                slab_size: mech::heap::DEFAULT_SLAB_SIZE,
            }),
            "mtss" => Some(MechKind::Mtss {
                page_size: mech::mtss::DEFAULT_PAGE_SIZE,
            }),
            _ => None,
        }
    }
}

/// Options of one emission.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EmitOptions {
    pub target: Target,
    pub mech: MechKind,
}

/// An internal error of the emission stage (the input was not what the lowering produces).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EmitError {
    /// The C-- function being emitted, if any.
    pub function: Option<String>,
    pub message: String,
}

impl fmt::Display for EmitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.function {
            Some(func) => write!(f, "emission stage, function `{func}`: {}", self.message),
            None => write!(f, "emission stage: {}", self.message),
        }
    }
}

impl std::error::Error for EmitError {}

/// Emits a whole program as one assembly file: the text of every function, the data objects
/// (globals, strings, frame-size cells) and `__cmm_abi`.
pub fn emit_program(p: &LoweredProgram, opts: &EmitOptions) -> Result<String, EmitError> {
    if let MechKind::Lookahead { chunk_size } = opts.mech {
        return mech::lookahead::emit_program(p, opts, chunk_size);
    }
    if let MechKind::Mmu { reuse, chunk_size } = opts.mech {
        return mech::mmu::emit_program(p, opts, reuse, chunk_size);
    }
    if let MechKind::Heap { malloc, slab_size } = opts.mech {
        return mech::heap::emit_program(p, opts, malloc, slab_size);
    }
    if let MechKind::Mtss { page_size } = opts.mech {
        check_pointer_type(p, opts)?;
        return mech::mtss::emit_program(p, opts, page_size);
    }
    let mech = mech::by_kind(opts.mech);
    check_pointer_type(p, opts)?;
    let printed = print_all(p, opts.target, mech)?;
    Ok(assemble_printed(p, opts, mech, &printed, None))
}

/// The assembly file of a printed program: the header, every function's text between the
/// compiled code's labels, the data objects and, for the chunked mechanisms, the
/// `__cmm_chunk_size` object (`size`: its value and what the header calls it).
pub(crate) fn assemble_printed(
    p: &LoweredProgram,
    opts: &EmitOptions,
    mech: &dyn Mechanism,
    printed: &[print::Printed],
    size: Option<(u32, &str)>,
) -> String {
    let mut out = String::new();
    out.push_str("\t.intel_syntax noprefix\n");
    match size {
        Some((value, name)) => {
            let _ = writeln!(
                out,
                "# cmm emission stage: target {:?}, mechanism {}, {name} {value}",
                opts.target,
                mech.name()
            );
        }
        None => {
            let _ = writeln!(
                out,
                "# cmm emission stage: target {:?}, mechanism {}",
                opts.target,
                mech.name()
            );
        }
    }
    out.push_str("\t.text\n");
    let mut frame_sizes = Vec::with_capacity(p.functions.len());
    let mut rodata = String::new();
    code_begin(p, &mut out);
    for f in printed {
        out.push_str(&f.text);
        rodata.push_str(&f.rodata);
        frame_sizes.push(f.frame_size);
    }
    code_end(p, &mut out);
    emit_data(p, opts, mech, &frame_sizes, &rodata, &mut out);
    if let Some((value, _)) = size {
        emit_chunk_size(value, &mut out);
    }
    out.push_str("\t.section .note.GNU-stack,\"\",@progbits\n");
    out
}

/// The whole-program step every mechanism can use: instruction selection, register allocation
/// and printing of every function under `mech`, in program order, each function under its
/// register convention ([`spare_users`]). Mechanisms whose sequences
/// depend on other functions' frames (`lookahead`'s reserves, `mmu`'s probe distances) run it
/// twice: first to learn the frames, then to print with them.
pub fn print_all(
    p: &LoweredProgram,
    target: Target,
    mech: &dyn Mechanism,
) -> Result<Vec<print::Printed>, EmitError> {
    let mut plan = spare_users::spare_users(p, target, mech)?;
    let reserved = mech.reserved_regs(target);
    let mut out = Vec::with_capacity(p.functions.len());
    for (i, f) in p.functions.iter().enumerate() {
        let err = |message: String| EmitError {
            function: Some(f.name.clone()),
            message,
        };
        let vcode = match plan.vcodes[i].take() {
            Some(vcode) => vcode,
            None => isel::lower_function(p, i, target, mech, &plan.users).map_err(err)?,
        };
        let conv = regs::convention(target, &reserved, plan.users.contains(&f.symbol));
        out.push(print::print_function(p, i, &vcode, target, mech, conv).map_err(err)?);
    }
    Ok(out)
}

/// The largest `stacksizeof` a frame may have under the mechanisms whose call sequences hold it
/// in a 32-bit displacement or immediate (`mmu`'s probe distance, `heap`'s block size).
pub const MAX_SIZED_FRAME: u32 = i32::MAX as u32;

/// The whole-program step of the mechanisms whose call sequences need every callee's
/// `stacksizeof` (`mmu`, `heap`): prints the program under `make(empty map)` to learn the
/// frames, then under `make(frames by symbol)`, and assembles the file, which also defines
/// `__cmm_chunk_size` = `chunk_size` (`size_name` names it in the header comment). The second
/// pass must print the same frames as the first (the sequences do not change the frames).
pub(crate) fn emit_sized_program<M: Mechanism>(
    p: &LoweredProgram,
    opts: &EmitOptions,
    chunk_size: u32,
    size_name: &str,
    make: impl Fn(std::collections::HashMap<String, u32>) -> M,
) -> Result<String, EmitError> {
    let target = opts.target;
    check_pointer_type(p, opts)?;
    let whole = |message: String| EmitError {
        function: None,
        message,
    };
    crate::callgraph::validate_chunk_size(chunk_size as u64).map_err(whole)?;
    let first = print_all(p, target, &make(std::collections::HashMap::new()))?;
    let mut sizes = std::collections::HashMap::with_capacity(p.functions.len());
    for (f, printed) in p.functions.iter().zip(&first) {
        if printed.frame_size > MAX_SIZED_FRAME {
            return Err(EmitError {
                function: Some(f.name.clone()),
                message: format!(
                    "a frame of {} bytes is over {MAX_SIZED_FRAME} bytes, the most a 32-bit \
                     displacement reaches",
                    printed.frame_size
                ),
            });
        }
        sizes.insert(f.symbol.clone(), printed.frame_size);
    }
    let mech = make(sizes);
    let second = print_all(p, target, &mech)?;
    for (a, b) in first.iter().zip(&second) {
        if a.frame_size != b.frame_size {
            return Err(whole(format!(
                "{}: the second pass printed different frames than the first",
                mech.name()
            )));
        }
    }
    Ok(assemble_printed(
        p,
        opts,
        &mech,
        &second,
        Some((chunk_size, size_name)),
    ))
}

/// Green-thread programs: the label before the first function of the compiled code (the
/// runtime preempts a green thread asynchronously only between it and [`code_end`]'s label;
/// `lookahead` programs always have both, for their checkpoints' preemption).
fn code_begin(p: &LoweredProgram, out: &mut String) {
    if crate::lower::is_green_threads(p) {
        let sym = mech::lookahead::CODE_BEGIN_SYMBOL;
        let _ = writeln!(out, "\t.globl {sym}\n{sym}:");
    }
}

/// See [`code_begin`]: after every function and every slow path (`.subsection 1`).
fn code_end(p: &LoweredProgram, out: &mut String) {
    if crate::lower::is_green_threads(p) {
        let sym = mech::lookahead::CODE_END_SYMBOL;
        let _ = writeln!(
            out,
            "\t.subsection 2\n\t.globl {sym}\n{sym}:\n\t.subsection 0"
        );
    }
}

/// Checks that the program was lowered for the target's pointer width.
pub(crate) fn check_pointer_type(p: &LoweredProgram, opts: &EmitOptions) -> Result<(), EmitError> {
    let want_ptr = match opts.target {
        Target::I686 => cranelift_codegen::ir::types::I32,
        Target::X86_64 => cranelift_codegen::ir::types::I64,
    };
    if p.pointer_type != want_ptr {
        return Err(EmitError {
            function: None,
            message: format!(
                "program was lowered with pointer type {} but the target is {:?}",
                p.pointer_type, opts.target
            ),
        });
    }
    Ok(())
}

/// Defines `__cmm_chunk_size` (the chunked mechanisms' `--chunk-size`, read by the runtime).
pub(crate) fn emit_chunk_size(chunk_size: u32, out: &mut String) {
    out.push_str("\t.section .rodata\n\t.globl __cmm_chunk_size\n\t.p2align 2\n");
    out.push_str("\t.type __cmm_chunk_size, @object\n\t.size __cmm_chunk_size, 4\n");
    let _ = writeln!(out, "__cmm_chunk_size:\n\t.long {chunk_size}");
}

pub(crate) fn emit_data(
    p: &LoweredProgram,
    opts: &EmitOptions,
    mech: &dyn Mechanism,
    frame_sizes: &[u32],
    rodata: &str,
    out: &mut String,
) {
    // The C entries are code, in their own section; every mechanism's file gets them here.
    c_entry::emit(p, opts.target, &address_taken(p), out);
    out.push_str("\t.section .rodata\n");
    out.push_str("\t.p2align 4\n");
    out.push_str(".Lcmm_sign_mask:\n\t.quad 0x8000000000000000, 0\n");
    out.push_str(rodata);
    for d in &p.data {
        if d.kind == DataKind::ImportedTls {
            continue;
        }
        let section = if d.writable {
            match d.kind {
                DataKind::Zeroed => ".bss",
                _ => ".data",
            }
        } else {
            ".rodata"
        };
        let _ = writeln!(out, "\t.section {section}");
        if d.exported {
            let _ = writeln!(out, "\t.globl {}", d.symbol);
        }
        let _ = writeln!(out, "\t.p2align {}", d.align.max(1).trailing_zeros());
        let _ = writeln!(out, "\t.type {}, @object", d.symbol);
        let _ = writeln!(out, "\t.size {}, {}", d.symbol, d.size);
        let _ = writeln!(out, "{}:", d.symbol);
        match &d.kind {
            DataKind::Zeroed => {
                let _ = writeln!(out, "\t.zero {}", d.size.max(1));
            }
            DataKind::Bytes(bytes) => {
                for chunk in bytes.chunks(16) {
                    let list: Vec<String> = chunk.iter().map(|b| b.to_string()).collect();
                    let _ = writeln!(out, "\t.byte {}", list.join(", "));
                }
            }
            DataKind::FrameSize { function } => {
                let size = frame_sizes.get(*function as usize).copied().unwrap_or(0);
                let _ = writeln!(
                    out,
                    "\t.long {size}\t# frame of {}",
                    p.functions
                        .get(*function as usize)
                        .map_or("?", |f| f.symbol.as_str())
                );
            }
            DataKind::Words(words) => {
                let directive = if opts.target == Target::X86_64 {
                    ".quad"
                } else {
                    ".long"
                };
                for w in words {
                    match *w {
                        DataWord::Int(v) => {
                            let _ = writeln!(out, "\t{directive} {v}");
                        }
                        DataWord::Addr(index) => {
                            let _ =
                                writeln!(out, "\t{directive} {}", p.data[index as usize].symbol);
                        }
                    }
                }
            }
            DataKind::ImportedTls => {}
        }
    }
    out.push_str("\t.section .rodata\n\t.globl __cmm_abi\n\t.p2align 2\n");
    out.push_str("\t.type __cmm_abi, @object\n\t.size __cmm_abi, 4\n");
    let _ = writeln!(
        out,
        "__cmm_abi:\n\t.long {}\t# {}",
        mech.abi_id(),
        mech.name()
    );
    let _ = opts;
}

/// The C-- functions (by index) that `f`'s instructions name, each with whether the
/// instruction calls it (`call`) or takes its address (`func_addr`).
pub(crate) fn function_refs<'a>(
    p: &'a LoweredProgram,
    f: &'a cranelift_codegen::ir::Function,
) -> impl Iterator<Item = (bool, usize)> + 'a {
    f.layout
        .blocks()
        .flat_map(move |block| f.layout.block_insts(block))
        .filter_map(move |inst| {
            let (call, func_ref) = match f.dfg.insts[inst] {
                InstructionData::Call { func_ref, .. } => (true, func_ref),
                InstructionData::FuncAddr { func_ref, .. } => (false, func_ref),
                _ => return None,
            };
            let ExternalName::User(r) = &f.dfg.ext_funcs[func_ref].name else {
                return None;
            };
            match p.resolve(&f.params.user_named_funcs()[*r]) {
                Some(NameTarget::Function(i)) => Some((call, i as usize)),
                _ => None,
            }
        })
}

/// Functions whose address is taken: thread entries (roots of the call graph) and functions
/// C code may call back (they get a C entry, [`c_entry`]).
pub(crate) fn address_taken(p: &LoweredProgram) -> Vec<bool> {
    let mut taken = vec![false; p.functions.len()];
    for lf in &p.functions {
        for (call, i) in function_refs(p, &lf.func) {
            if !call {
                taken[i] = true;
            }
        }
    }
    taken
}

/// Every function's index by its symbol (`cmm_f` → index in `p.functions`).
pub(crate) fn function_index(p: &LoweredProgram) -> std::collections::HashMap<String, usize> {
    p.functions
        .iter()
        .enumerate()
        .map(|(i, f)| (f.symbol.clone(), i))
        .collect()
}

/// The callee of a call the emission stage printed: the extern named `symbol` if `external`,
/// else the C-- function of that symbol (`index`: [`function_index`]).
pub(crate) fn resolve_callee(
    p: &LoweredProgram,
    index: &std::collections::HashMap<String, usize>,
    symbol: &str,
    external: bool,
) -> Result<cmm_front::typed::Callee, EmitError> {
    let missing = |message: String| EmitError {
        function: None,
        message,
    };
    if external {
        let j = p
            .externs
            .iter()
            .position(|e| e.name == symbol)
            .ok_or_else(|| missing(format!("unknown extern `{symbol}`")))?;
        Ok(cmm_front::typed::Callee::Extern(j as u32))
    } else {
        let g = index
            .get(symbol)
            .copied()
            .ok_or_else(|| missing(format!("call to unknown function `{symbol}`")))?;
        Ok(cmm_front::typed::Callee::Function(g as u32))
    }
}
