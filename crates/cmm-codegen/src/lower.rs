//! Lowering of a typed C-- program to Cranelift IR: the contract every back end reads.
//!
//! [`lower_program`] turns a [`typed::Program`] into a [`LoweredProgram`]: one
//! [`ir::Function`] per C-- function plus the tables a back end needs to define them (function
//! symbols, extern signatures, data objects). The rules are those of the "Contract: Cranelift IR"
//! section of `ARCHITECTURE.md`:
//!
//! - **External names.** `UserExternalName { namespace: 0, index }` is a function: `index < F` is
//!   C-- function `index` ([`LoweredProgram::functions`]), `F + j` is extern `j`
//!   ([`LoweredProgram::externs`]). `namespace: 1` is a data object: the index is the position in
//!   [`LoweredProgram::data`], which holds the `G` globals, then the `S` string literals, then one
//!   frame-size cell per C-- function (see [`LoweredProgram::global_data`],
//!   [`LoweredProgram::string_data`], [`LoweredProgram::frame_size_data`]). Every function and
//!   data object is imported with `colocated: true` (`-no-pie` executables).
//! - **Value types.** `int` → `i32`, `char` → `i8`, `double` → `f64`, pointers → the target
//!   pointer type ([`LoweredProgram::pointer_type`]: `i32` on i686, `i64` on x86-64).
//! - **Signatures.** Calling convention `system_v`. `char` parameters and returns are `i8 sext`.
//!   Extern parameters of type `int` are `i32 sext`: on x86-64 the back end must sign-extend them
//!   to 64 bits (glibc's `malloc(size_t)` reads the whole register); on i686 it is a no-op.
//!   `main` always has the signature `(i32 argc, ptr argv) -> i32`, whatever it declares.
//! - **Locals.** Locals with `needs_memory` are explicit stack slots (size and alignment of the
//!   local) addressed with `stack_addr`; the others are cranelift-frontend `Variable`s,
//!   initialised to zero at entry.
//! - **Calls.** Every C-- call is a plain `call` (never inlined, never a tail call); arguments are
//!   evaluated right to left, as gcc does on x86 (C leaves the order unspecified). A call to a
//!   variadic extern imports the extern with a per-call-site signature: the fixed parameters
//!   followed by the (already promoted) argument types; the signature's params are then longer
//!   than [`ExternDecl::signature`], whose params are only the fixed ones.
//! - **Semantics.** `int` arithmetic wraps (`iadd`/`isub`/`imul`/`ishl`), `/` and `%` are
//!   `sdiv`/`srem`, `>>` is `sshr`; comparisons give `i32` 0/1; `&&`/`||` short-circuit through
//!   a block parameter; `double` comparisons follow C (`!=` is true for NaN: `une`; the others
//!   are ordered); `double` → `int` truncates like x86's `cvttsd2si` (out of range or NaN gives
//!   `INT_MIN`) without ever trapping; struct assignment is an inline copy in pointer-sized
//!   chunks (a loop above [`INLINE_COPY_LIMIT`] bytes); a function falling off its end returns 0.
//! - **`stacksizeof(f)`** loads the `i32` in the frame-size cell of `f`; a back end defines the
//!   cell once it knows the frame. A function name used as a value is `func_addr` reduced to `i32`.

use std::collections::HashMap;

use cmm_front::diag::Span;
use cmm_front::typed::{self, BinaryOp, Callee, Expr, ExprKind, Place, PlaceKind, Stmt, UnaryOp};
use cmm_front::types::{size_of, Type as CType};
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{
    self, types, AbiParam, ArgumentExtension, Block, BlockArg, ExtFuncData, ExternalName, FuncRef,
    GlobalValue, GlobalValueData, InstBuilder, MemFlagsData, Signature, StackSlot, StackSlotData,
    StackSlotKind, UserExternalName, UserFuncName, Value,
};
use cranelift_codegen::isa::{CallConv, TargetFrontendConfig};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Variable};
use target_lexicon::PointerWidth;

use crate::race;

/// `UserExternalName::namespace` of functions (C-- functions, then externs).
pub const FUNC_NAMESPACE: u32 = 0;
/// `UserExternalName::namespace` of data objects (globals, strings, frame-size cells).
pub const DATA_NAMESPACE: u32 = 1;
/// Struct copies up to this many bytes are unrolled; larger ones use a loop.
pub const INLINE_COPY_LIMIT: u32 = 128;

/// The IR of a whole program plus the tables the back ends need.
#[derive(Clone, Debug)]
pub struct LoweredProgram {
    /// `i32` on i686, `i64` on x86-64 (from `Program::target.pointer_size`).
    pub pointer_type: ir::Type,
    /// One entry per C-- function, in `Program::functions` order (function index `i`).
    pub functions: Vec<LoweredFunction>,
    /// One entry per extern, in `Program::externs` order (function index `functions.len() + j`).
    pub externs: Vec<ExternDecl>,
    /// Data objects: globals, then string literals, then frame-size cells (data index = position),
    /// then `__cmm_threads` if the driver marked the program ([`mark_green_threads`]).
    pub data: Vec<DataObject>,
    /// Number of globals (`G`).
    pub num_globals: u32,
    /// Number of string literals (`S`).
    pub num_strings: u32,
}

impl LoweredProgram {
    /// Function index (namespace 0) of extern `j`.
    pub fn extern_func_index(&self, j: u32) -> u32 {
        self.functions.len() as u32 + j
    }
    /// Data index (namespace 1) of global `g`.
    pub fn global_data(&self, g: u32) -> u32 {
        g
    }
    /// Data index (namespace 1) of string literal `s`.
    pub fn string_data(&self, s: u32) -> u32 {
        self.num_globals + s
    }
    /// Data index (namespace 1) of the frame-size cell of C-- function `f`.
    pub fn frame_size_data(&self, f: u32) -> u32 {
        self.num_globals + self.num_strings + f
    }
    /// What a `UserExternalName` of this program refers to.
    pub fn resolve(&self, name: &UserExternalName) -> Option<NameTarget> {
        let f = self.functions.len() as u32;
        match name.namespace {
            FUNC_NAMESPACE if name.index < f => Some(NameTarget::Function(name.index)),
            FUNC_NAMESPACE if name.index - f < self.externs.len() as u32 => {
                Some(NameTarget::Extern(name.index - f))
            }
            DATA_NAMESPACE if (name.index as usize) < self.data.len() => {
                Some(NameTarget::Data(name.index))
            }
            _ => None,
        }
    }
    /// The IR of every function as text (what `cmm compile --emit clif` prints).
    pub fn to_clif(&self) -> String {
        let mut out = String::new();
        for f in &self.functions {
            out.push_str(&format!(
                "; {} ({})\n{}\n",
                f.name,
                f.symbol,
                f.func.display()
            ));
        }
        out
    }
}

/// The referent of a `UserExternalName`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameTarget {
    /// Index into [`LoweredProgram::functions`].
    Function(u32),
    /// Index into [`LoweredProgram::externs`].
    Extern(u32),
    /// Index into [`LoweredProgram::data`].
    Data(u32),
}

/// One C-- function.
#[derive(Clone, Debug)]
pub struct LoweredFunction {
    /// The C-- name.
    pub name: String,
    /// The object symbol, `cmm_<name>` (exported).
    pub symbol: String,
    /// The IR; its name is `UserFuncName::user(0, index)` and `func.signature` is its signature.
    pub func: ir::Function,
    /// The function (index) this one is a copy of, made by recursion unrolling
    /// ([`crate::unroll`]); `None` for every function of the source.
    pub copy_of: Option<u32>,
}

/// An `extern` C function.
#[derive(Clone, Debug)]
pub struct ExternDecl {
    /// The C symbol name.
    pub name: String,
    /// Signature with the fixed parameters only (see the module docs for variadic calls).
    pub signature: Signature,
    /// Declared with `...`.
    pub variadic: bool,
    /// The C-- parameter types, for back ends that need more than the IR types.
    pub c_params: Vec<CType>,
    /// The C-- return type.
    pub c_ret: CType,
}

/// One data object of the program.
#[derive(Clone, Debug, PartialEq)]
pub struct DataObject {
    /// Symbol name: `cmmg_<name>` for globals, `__cmm_str_<s>` for strings,
    /// `__cmm_framesize_<function>` for frame-size cells.
    pub symbol: String,
    /// Exported from the object (globals); the others are local symbols.
    pub exported: bool,
    /// Lives in writable memory (globals); strings and frame-size cells are read-only.
    pub writable: bool,
    /// Size in bytes.
    pub size: u32,
    /// Alignment in bytes (a power of two).
    pub align: u32,
    /// Contents.
    pub kind: DataKind,
}

/// The contents of a [`DataObject`].
#[derive(Clone, Debug, PartialEq)]
pub enum DataKind {
    /// `size` zero bytes (a C-- global).
    Zeroed,
    /// These bytes (a string literal with its terminating NUL).
    Bytes(Vec<u8>),
    /// A little-endian `i32`: the frame size of C-- function `function`, in bytes, chosen by the
    /// back end that compiles it.
    FrameSize {
        /// Index into [`LoweredProgram::functions`].
        function: u32,
    },
    /// Pointer-sized little-endian words (the `--race` globals table, `crate::race`).
    Words(Vec<DataWord>),
    /// Not defined by the program: a thread-local symbol of the runtime that compiled code
    /// reads (`PREEMPT_TLS_SYMBOL`); back ends emit nothing for it.
    ImportedTls,
}

/// One pointer-sized word of [`DataKind::Words`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataWord {
    /// This value.
    Int(u64),
    /// The address of data object `index` (an index into [`LoweredProgram::data`]).
    Addr(u32),
}

/// The IR type of a scalar C-- type (`None` for `void`, arrays and structs).
pub fn ir_type(ty: &CType, pointer_type: ir::Type) -> Option<ir::Type> {
    match ty {
        CType::Char => Some(types::I8),
        CType::Int => Some(types::I32),
        CType::Double => Some(types::F64),
        CType::Pointer(_) => Some(pointer_type),
        CType::Void | CType::Array(..) | CType::Struct(_) => None,
    }
}

fn abi_param(ty: &CType, ptr: ir::Type, is_extern: bool) -> Option<AbiParam> {
    let t = ir_type(ty, ptr)?;
    let ext = match ty {
        CType::Char => ArgumentExtension::Sext,
        CType::Int if is_extern => ArgumentExtension::Sext,
        _ => ArgumentExtension::None,
    };
    Some(AbiParam {
        extension: ext,
        ..AbiParam::new(t)
    })
}

fn function_signature(p: &typed::Program, f: &typed::Function, ptr: ir::Type) -> Signature {
    let mut sig = Signature::new(CallConv::SystemV);
    if f.name == "main" {
        sig.params.push(AbiParam::new(types::I32));
        sig.params.push(AbiParam::new(ptr));
        sig.returns.push(AbiParam::new(types::I32));
        return sig;
    }
    let _ = p;
    for l in &f.locals[..f.param_count as usize] {
        sig.params.extend(abi_param(&l.ty, ptr, false));
    }
    sig.returns.extend(abi_param(&f.ret, ptr, false));
    sig
}

fn extern_signature(e: &typed::Extern, ptr: ir::Type) -> Signature {
    let mut sig = Signature::new(CallConv::SystemV);
    for t in &e.params {
        sig.params.extend(abi_param(t, ptr, true));
    }
    sig.returns.extend(abi_param(&e.ret, ptr, true));
    sig
}

/// Lowers a whole typed program. Never fails: the typed program's invariants are relied upon.
pub fn lower_program(p: &typed::Program) -> LoweredProgram {
    lower(p, None, None)
}

/// Lowers a whole typed program for green threads (`cmm compile --threads green`): as
/// [`lower_program`] (or [`lower_program_race`] with `race = Some((file, src))`), plus, with
/// `flag` (`--preempt-loops`), a preemption poll at the head of every loop (see
/// [`PREEMPT_FLAG_SYMBOL`]). The driver also marks the result ([`mark_green_threads`]).
pub fn lower_program_green(
    p: &typed::Program,
    race: Option<(&str, &str)>,
    flag: Option<PollFlag>,
) -> LoweredProgram {
    lower(p, race.map(|(file, src)| race::Sites::new(file, src)), flag)
}

/// Which flag the loop heads of a green-threads program poll (see [`PREEMPT_POINT`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PollFlag {
    /// The runtime's thread-local [`PREEMPT_TLS_SYMBOL`] (the emission stage: one
    /// `fs:`/`gs:`-relative load), set by the monitor for one worker's thread only.
    ThreadLocal,
    /// The program's [`PREEMPT_FLAG_SYMBOL`], one for all workers (Cranelift's native back end,
    /// whose thread-local access is a call); while it is set every thread takes the call.
    Global,
}

/// The writable `u32` a green-threads program compiled by the native back end defines (mirrors
/// `stackrt::base::abi::PREEMPT_FLAG_SYMBOL`): every loop head loads it, and when it is not 0
/// calls [`PREEMPT_POINT`], so a loop that makes no call can still be preempted. The runtime's
/// monitor sets it when a worker ran one thread for a whole time slice (Go's preemption of
/// tight loops, golang/go#10958, by asynchronous signals since 1.14; here by polls: one load
/// and a branch per iteration), and the deterministic mode keeps it set so that spin-waits
/// are decisions of the seed.
pub const PREEMPT_FLAG_SYMBOL: &str = "__cmm_preempt";

/// The runtime's thread-local `u32` that the emission stage's loop heads poll instead (mirrors
/// `stackrt::base::abi::PREEMPT_TLS_SYMBOL`): each worker OS thread has its own, so a request
/// for one worker's thread costs the others nothing.
pub const PREEMPT_TLS_SYMBOL: &str = "stackrt_preempt_tls";

/// The runtime's preemption point, called from a loop head when [`PREEMPT_FLAG_SYMBOL`] is
/// set (mirrors `stackrt::base::abi::PREEMPT_POINT`). A thread-library function: under
/// `lookahead` it goes through the library stub like `sthread_yield`.
pub const PREEMPT_POINT: &str = "sthread_preempt_point";

/// Lowers a whole typed program for `cmm compile --race` (see [`crate::race`]): every access
/// that may touch shared memory calls the runtime's race detector first, with its site in
/// `src` (named `file` in reports). Without `--race` the driver calls [`lower_program`], which
/// adds nothing.
pub fn lower_program_race(p: &typed::Program, file: &str, src: &str) -> LoweredProgram {
    lower(p, Some(race::Sites::new(file, src)), None)
}

/// The state of `--race` lowering: the sites so far and the extern indices of the entries.
struct RaceLowering {
    sites: race::Sites,
    read: u32,
    write: u32,
}

fn lower(
    p: &typed::Program,
    race_sites: Option<race::Sites>,
    polls: Option<PollFlag>,
) -> LoweredProgram {
    let ptr = if p.target.pointer_size == 4 {
        types::I32
    } else {
        types::I64
    };
    let sigs: Vec<Signature> = p
        .functions
        .iter()
        .map(|f| function_signature(p, f, ptr))
        .collect();
    let externs: Vec<ExternDecl> = p
        .externs
        .iter()
        .map(|e| ExternDecl {
            name: e.name.clone(),
            signature: extern_signature(e, ptr),
            variadic: e.variadic,
            c_params: e.params.clone(),
            c_ret: e.ret.clone(),
        })
        .collect();
    let mut externs = externs;
    let mut race_state = race_sites.map(|sites| {
        for e in externs.iter_mut() {
            if let Some((_, w)) = race::ALLOC_WRAPPERS.iter().find(|(c, _)| *c == e.name) {
                e.name = w.to_string();
            }
        }
        let entry = |name: &str| {
            let params = vec![
                CType::Pointer(Box::new(CType::Void)),
                CType::Int,
                CType::Int,
            ];
            let mut signature = Signature::new(CallConv::SystemV);
            for t in &params {
                signature.params.extend(abi_param(t, ptr, true));
            }
            ExternDecl {
                name: name.to_string(),
                signature,
                variadic: false,
                c_params: params,
                c_ret: CType::Void,
            }
        };
        let read = externs.len() as u32;
        externs.push(entry(race::READ_ENTRY));
        externs.push(entry(race::WRITE_ENTRY));
        RaceLowering {
            sites,
            read,
            write: read + 1,
        }
    });

    let mut data = Vec::new();
    for g in &p.globals {
        data.push(DataObject {
            symbol: format!("cmmg_{}", g.name),
            exported: true,
            writable: true,
            size: g.size.max(1),
            align: g.align.max(1),
            kind: DataKind::Zeroed,
        });
    }
    for (s, bytes) in p.strings.iter().enumerate() {
        let mut b = bytes.clone();
        b.push(0);
        data.push(DataObject {
            symbol: format!("__cmm_str_{s}"),
            exported: false,
            writable: false,
            size: b.len() as u32,
            align: 1,
            kind: DataKind::Bytes(b),
        });
    }
    for (i, f) in p.functions.iter().enumerate() {
        data.push(DataObject {
            symbol: format!("__cmm_framesize_{}", f.name),
            exported: false,
            writable: false,
            size: 4,
            align: 4,
            kind: DataKind::FrameSize { function: i as u32 },
        });
    }

    let poll = polls.map(|flag| {
        let d = data.len() as u32;
        data.push(match flag {
            PollFlag::Global => DataObject {
                symbol: PREEMPT_FLAG_SYMBOL.to_string(),
                exported: true,
                writable: true,
                size: 4,
                align: 4,
                kind: DataKind::Zeroed,
            },
            PollFlag::ThreadLocal => DataObject {
                symbol: PREEMPT_TLS_SYMBOL.to_string(),
                exported: false,
                writable: true,
                size: 4,
                align: 4,
                kind: DataKind::ImportedTls,
            },
        });
        let e = externs.len() as u32;
        externs.push(ExternDecl {
            name: PREEMPT_POINT.to_string(),
            signature: Signature::new(CallConv::SystemV),
            variadic: false,
            c_params: Vec::new(),
            c_ret: CType::Void,
        });
        (d, e, flag)
    });

    let mut lowered = LoweredProgram {
        pointer_type: ptr,
        functions: Vec::new(),
        externs,
        data,
        num_globals: p.globals.len() as u32,
        num_strings: p.strings.len() as u32,
    };
    let mut fctx = FunctionBuilderContext::new();
    for (i, f) in p.functions.iter().enumerate() {
        let mut func =
            ir::Function::with_name_signature(UserFuncName::user(0, i as u32), sigs[i].clone());
        {
            let b = FunctionBuilder::new(&mut func, &mut fctx);
            let mut fl = FnLower {
                b,
                p,
                lp: &lowered,
                sigs: &sigs,
                ptr,
                f,
                locals: Vec::new(),
                loops: Vec::new(),
                funcs: HashMap::new(),
                gvs: HashMap::new(),
                race: race_state.take(),
                poll,
                cold_polls: Vec::new(),
            };
            fl.lower_body();
            fl.b.finalize(frontend_config(ptr));
            race_state = fl.race.take();
        }
        if let Some(r) = &race_state {
            let entry =
                |j: u32| UserExternalName::new(FUNC_NAMESPACE, p.functions.len() as u32 + j);
            crate::race_repeats::remove_repeated_reads(&mut func, entry(r.read), entry(r.write));
        }
        lowered.functions.push(LoweredFunction {
            name: f.name.clone(),
            symbol: format!("cmm_{}", f.name),
            func,
            copy_of: None,
        });
    }
    if let Some(r) = race_state {
        add_race_tables(p, &mut lowered, r.sites.texts());
    }
    lowered
}

/// Appends the `--race` tables (`crate::race`, module docs) to the program's data.
fn add_race_tables(p: &typed::Program, lowered: &mut LoweredProgram, sites: &[String]) {
    let names: Vec<&str> = p.globals.iter().map(|g| g.name.as_str()).collect();
    let (site_bytes, strings, name_offsets) = race::tables(sites, &names);
    let word = lowered.pointer_type.bytes();
    let mut words = vec![DataWord::Int(p.globals.len() as u64)];
    for (g, (global, off)) in p.globals.iter().zip(name_offsets).enumerate() {
        words.push(DataWord::Addr(lowered.global_data(g as u32)));
        words.push(DataWord::Int(u64::from(global.size)));
        words.push(DataWord::Int(u64::from(off)));
    }
    let table = |symbol: &str, align: u32, size: usize, kind: DataKind| DataObject {
        symbol: symbol.to_string(),
        exported: true,
        writable: false,
        size: size as u32,
        align,
        kind,
    };
    lowered.data.push(table(
        race::SITES_SYMBOL,
        4,
        site_bytes.len(),
        DataKind::Bytes(site_bytes),
    ));
    lowered.data.push(table(
        race::STRINGS_SYMBOL,
        1,
        strings.len(),
        DataKind::Bytes(strings),
    ));
    lowered.data.push(table(
        race::GLOBALS_SYMBOL,
        word,
        words.len() * word as usize,
        DataKind::Words(words),
    ));
}

/// What cranelift-frontend needs to know about the target.
fn frontend_config(ptr: ir::Type) -> TargetFrontendConfig {
    TargetFrontendConfig {
        default_call_conv: CallConv::SystemV,
        pointer_width: if ptr == types::I32 {
            PointerWidth::U32
        } else {
            PointerWidth::U64
        },
        page_size_align_log2: 12,
    }
}

#[derive(Clone, Copy)]
enum Storage {
    Var(Variable),
    Slot(StackSlot),
}

/// How to reach a place: a variable or an address.
enum PlaceRef {
    Var(Variable),
    Mem(Value),
}

struct FnLower<'a, 'b> {
    b: FunctionBuilder<'b>,
    p: &'a typed::Program,
    lp: &'a LoweredProgram,
    sigs: &'a [Signature],
    ptr: ir::Type,
    f: &'a typed::Function,
    locals: Vec<Storage>,
    /// (continue target, break target) of the enclosing loops.
    loops: Vec<(Block, Block)>,
    funcs: HashMap<(u32, Signature), FuncRef>,
    gvs: HashMap<u32, GlobalValue>,
    /// `--race`: the sites and entries; `None` lowers exactly as without the flag.
    race: Option<RaceLowering>,
    /// Green threads: the data index of the polled flag, the extern index of
    /// [`PREEMPT_POINT`] and which flag it is, for the poll at every loop head.
    poll: Option<(u32, u32, PollFlag)>,
    /// The polls' calls, each with the block it returns to: placed after the function's
    /// body, off the loops' straight-line path.
    cold_polls: Vec<(ir::Block, ir::Block)>,
}

/// Whether an access to `pl` may touch memory another thread can reach: not when it is the
/// function's own stack slot (or a part of one) named directly, without a pointer.
fn may_be_shared(pl: &Place) -> bool {
    match &pl.kind {
        PlaceKind::Local(_) => false,
        PlaceKind::Global(_) | PlaceKind::Deref(_) => true,
        PlaceKind::Member(base, _) => may_be_shared(base),
    }
}

fn mem() -> MemFlagsData {
    MemFlagsData::new()
}

impl FnLower<'_, '_> {
    fn ty(&self, t: &CType) -> ir::Type {
        ir_type(t, self.ptr).unwrap_or(types::I32)
    }

    fn size(&self, t: &CType) -> u32 {
        size_of(t, &self.p.structs, self.p.target)
    }

    fn zero(&mut self, t: ir::Type) -> Value {
        if t == types::F64 {
            self.b.ins().f64const(0.0)
        } else {
            self.b.ins().iconst(t, 0)
        }
    }

    /// Starts a fresh (unreachable) block after a terminator, so later code has somewhere to go.
    fn start_dead_block(&mut self) {
        let dead = self.b.create_block();
        self.b.switch_to_block(dead);
    }

    fn lower_body(&mut self) {
        let entry = self.b.create_block();
        self.b.append_block_params_for_function_params(entry);
        self.b.switch_to_block(entry);
        let params: Vec<Value> = self.b.block_params(entry).to_vec();
        let f = self.f;
        for (i, l) in f.locals.iter().enumerate() {
            let storage = if l.needs_memory {
                let align_shift = l.align.max(1).trailing_zeros() as u8;
                let slot = self.b.create_sized_stack_slot(StackSlotData::new(
                    StackSlotKind::ExplicitSlot,
                    l.size.max(1),
                    align_shift,
                ));
                Storage::Slot(slot)
            } else {
                Storage::Var(self.b.declare_var(self.ty(&l.ty)))
            };
            let is_param = (i as u32) < f.param_count;
            let init = if is_param {
                params.get(i).copied()
            } else {
                None
            };
            match storage {
                Storage::Var(v) => {
                    let val = match init {
                        Some(v) => v,
                        None => {
                            let t = self.ty(&l.ty);
                            self.zero(t)
                        }
                    };
                    self.b.def_var(v, val);
                }
                Storage::Slot(s) => {
                    if let Some(val) = init {
                        self.b.ins().stack_store(self.ptr, val, s, 0);
                    }
                }
            }
            self.locals.push(storage);
        }
        for s in &f.body {
            self.stmt(s);
        }
        // Falling off the end: return 0 (or nothing).
        self.default_return();
        self.place_cold_polls();
        self.b.seal_all_blocks();
    }

    fn default_return(&mut self) {
        let rets: Vec<ir::Type> = self
            .b
            .func
            .signature
            .returns
            .iter()
            .map(|r| r.value_type)
            .collect();
        let vals: Vec<Value> = rets.into_iter().map(|t| self.zero(t)).collect();
        self.b.ins().return_(&vals);
    }

    fn stmt(&mut self, s: &Stmt) {
        match s {
            Stmt::Expr(e) => {
                self.expr(e);
            }
            Stmt::If { cond, then, els } => {
                let then_bb = self.b.create_block();
                let merge = self.b.create_block();
                let else_bb = if els.is_some() {
                    self.b.create_block()
                } else {
                    merge
                };
                self.branch(cond, then_bb, else_bb);
                self.b.switch_to_block(then_bb);
                self.stmt(then);
                self.b.ins().jump(merge, &[]);
                if let Some(e) = els {
                    self.b.switch_to_block(else_bb);
                    self.stmt(e);
                    self.b.ins().jump(merge, &[]);
                }
                self.b.switch_to_block(merge);
            }
            Stmt::While { cond, body } => {
                let header = self.b.create_block();
                let body_bb = self.b.create_block();
                let exit = self.b.create_block();
                self.b.ins().jump(header, &[]);
                self.b.switch_to_block(header);
                self.preempt_poll();
                self.branch(cond, body_bb, exit);
                self.b.switch_to_block(body_bb);
                self.loop_body(body, header, exit);
                self.b.ins().jump(header, &[]);
                self.b.switch_to_block(exit);
            }
            Stmt::DoWhile { body, cond } => {
                let body_bb = self.b.create_block();
                let cond_bb = self.b.create_block();
                let exit = self.b.create_block();
                self.b.ins().jump(body_bb, &[]);
                self.b.switch_to_block(body_bb);
                self.preempt_poll();
                self.loop_body(body, cond_bb, exit);
                self.b.ins().jump(cond_bb, &[]);
                self.b.switch_to_block(cond_bb);
                self.branch(cond, body_bb, exit);
                self.b.switch_to_block(exit);
            }
            Stmt::For {
                init,
                cond,
                step,
                body,
            } => {
                if let Some(i) = init {
                    self.expr(i);
                }
                let header = self.b.create_block();
                let body_bb = self.b.create_block();
                let step_bb = self.b.create_block();
                let exit = self.b.create_block();
                self.b.ins().jump(header, &[]);
                self.b.switch_to_block(header);
                self.preempt_poll();
                match cond {
                    Some(c) => self.branch(c, body_bb, exit),
                    None => {
                        self.b.ins().jump(body_bb, &[]);
                    }
                }
                self.b.switch_to_block(body_bb);
                self.loop_body(body, step_bb, exit);
                self.b.ins().jump(step_bb, &[]);
                self.b.switch_to_block(step_bb);
                if let Some(st) = step {
                    self.expr(st);
                }
                self.b.ins().jump(header, &[]);
                self.b.switch_to_block(exit);
            }
            Stmt::Break | Stmt::Continue => {
                // Sema rejects break/continue outside loops; ignore them defensively.
                if let Some(&(cont, brk)) = self.loops.last() {
                    let target = if matches!(s, Stmt::Break) { brk } else { cont };
                    self.b.ins().jump(target, &[]);
                    self.start_dead_block();
                }
            }
            Stmt::Return(value) => {
                let v = value.as_ref().and_then(|e| self.expr(e));
                let want = self.b.func.signature.returns.first().map(|r| r.value_type);
                match (v, want) {
                    (Some(v), Some(t)) if self.b.func.dfg.value_type(v) == t => {
                        self.b.ins().return_(&[v]);
                    }
                    (_, Some(t)) => {
                        // `main` declared void, or `return;` in a non-void function: return 0.
                        let z = self.zero(t);
                        self.b.ins().return_(&[z]);
                    }
                    (_, None) => {
                        self.b.ins().return_(&[]);
                    }
                }
                self.start_dead_block();
            }
            Stmt::Block(stmts) => {
                for s in stmts {
                    self.stmt(s);
                }
            }
            Stmt::Empty => {}
        }
    }

    fn loop_body(&mut self, body: &Stmt, cont: Block, brk: Block) {
        self.loops.push((cont, brk));
        self.stmt(body);
        self.loops.pop();
    }

    /// Evaluates a scalar condition and branches.
    fn branch(&mut self, cond: &Expr, then_bb: Block, else_bb: Block) {
        let t = self.truth(cond);
        self.b.ins().brif(t, then_bb, &[], else_bb, &[]);
    }

    /// Evaluates a scalar expression to an `i8` truth value (non-zero / non-NULL; NaN is true).
    fn truth(&mut self, e: &Expr) -> Value {
        let v = self.value(e);
        if e.ty == CType::Double {
            let z = self.b.ins().f64const(0.0);
            self.b.ins().fcmp(FloatCC::NotEqual, v, z)
        } else {
            self.b.ins().icmp_imm_s(IntCC::NotEqual, v, 0)
        }
    }

    /// Evaluates an expression that must produce a value.
    fn value(&mut self, e: &Expr) -> Value {
        match self.expr(e) {
            Some(v) => v,
            None => {
                // Only reachable with a void operand, which sema rejects.
                let t = self.ty(&e.ty);
                self.zero(t)
            }
        }
    }

    fn bool_to_int(&mut self, b: Value) -> Value {
        self.b.ins().uextend(types::I32, b)
    }

    fn data_gv(&mut self, index: u32) -> GlobalValue {
        if let Some(&gv) = self.gvs.get(&index) {
            return gv;
        }
        let name = self
            .b
            .func
            .declare_imported_user_function(UserExternalName::new(DATA_NAMESPACE, index));
        let gv = self.b.create_global_value(GlobalValueData::Symbol {
            name: ExternalName::user(name),
            offset: ir::immediates::Imm64::new(0),
            colocated: true,
            tls: false,
        });
        self.gvs.insert(index, gv);
        gv
    }

    /// Green threads: at a loop head, calls the runtime's preemption point when its flag is
    /// set (see [`PREEMPT_FLAG_SYMBOL`]); the call sits in a block of its own, off the loop's
    /// path.
    fn preempt_poll(&mut self) {
        let Some((d, _, kind)) = self.poll else {
            return;
        };
        let addr = match kind {
            PollFlag::Global => self.data_addr(d),
            PollFlag::ThreadLocal => {
                let gv = self.data_gv(d);
                self.b.func.global_values[gv] = match self.b.func.global_values[gv].clone() {
                    GlobalValueData::Symbol {
                        name,
                        offset,
                        colocated,
                        ..
                    } => GlobalValueData::Symbol {
                        name,
                        offset,
                        colocated,
                        tls: true,
                    },
                    other => other,
                };
                self.b.ins().tls_value(self.ptr, gv)
            }
        };
        let flag = self.b.ins().load(types::I32, mem(), addr, 0);
        let call_bb = self.b.create_block();
        let cont = self.b.create_block();
        self.b.set_cold_block(call_bb);
        self.b.ins().brif(flag, call_bb, &[], cont, &[]);
        self.b.switch_to_block(cont);
        self.cold_polls.push((call_bb, cont));
    }

    /// The polls' calls (see [`FnLower::preempt_poll`]), after the function's body.
    fn place_cold_polls(&mut self) {
        let Some((_, e, _)) = self.poll else {
            return;
        };
        for (call_bb, cont) in std::mem::take(&mut self.cold_polls) {
            self.b.switch_to_block(call_bb);
            let sig = self.lp.externs[e as usize].signature.clone();
            let f = self.func_ref(self.p.functions.len() as u32 + e, sig);
            self.b.ins().call(f, &[]);
            self.b.ins().jump(cont, &[]);
        }
    }

    fn data_addr(&mut self, index: u32) -> Value {
        let gv = self.data_gv(index);
        self.b.ins().symbol_value(self.ptr, gv)
    }

    fn func_ref(&mut self, index: u32, sig: Signature) -> FuncRef {
        let key = (index, sig);
        if let Some(&r) = self.funcs.get(&key) {
            return r;
        }
        let name = self
            .b
            .func
            .declare_imported_user_function(UserExternalName::new(FUNC_NAMESPACE, index));
        let sigref = self.b.import_signature(key.1.clone());
        let r = self.b.import_function(ExtFuncData {
            name: ExternalName::user(name),
            signature: sigref,
            colocated: true,
            patchable: false,
        });
        self.funcs.insert(key, r);
        r
    }

    fn place(&mut self, pl: &Place) -> PlaceRef {
        match &pl.kind {
            PlaceKind::Local(id) => match self.locals[*id as usize] {
                Storage::Var(v) => PlaceRef::Var(v),
                Storage::Slot(s) => PlaceRef::Mem(self.b.ins().stack_addr(self.ptr, s, 0)),
            },
            PlaceKind::Global(g) => {
                let idx = self.lp.global_data(*g);
                PlaceRef::Mem(self.data_addr(idx))
            }
            PlaceKind::Deref(e) => PlaceRef::Mem(self.value(e)),
            PlaceKind::Member(base, offset) => {
                let a = self.place_addr(base);
                PlaceRef::Mem(if *offset == 0 {
                    a
                } else {
                    self.b.ins().iadd_imm_s(a, *offset as i64)
                })
            }
        }
    }

    fn place_addr(&mut self, pl: &Place) -> Value {
        match self.place(pl) {
            PlaceRef::Mem(a) => a,
            PlaceRef::Var(v) => {
                // A scalar local whose address is taken always has `needs_memory`; fall back to
                // its value so lowering never panics on an inconsistent program.
                let val = self.b.use_var(v);
                let t = self.b.func.dfg.value_type(val);
                if t == self.ptr {
                    val
                } else {
                    self.zero(self.ptr)
                }
            }
        }
    }

    fn load_place(&mut self, pl: &Place) -> Value {
        let t = self.ty(&pl.ty);
        match self.place(pl) {
            PlaceRef::Var(v) => self.b.use_var(v),
            PlaceRef::Mem(a) => {
                if may_be_shared(pl) {
                    self.race_access(false, a, t.bytes(), pl.span);
                }
                self.b.ins().load(t, mem(), a, 0)
            }
        }
    }

    /// `--race`: calls the detector's read or write entry for `size` bytes at `addr`, an
    /// access at `span`. Nothing without `--race`.
    fn race_access(&mut self, write: bool, addr: Value, size: u32, span: Span) {
        let Some(r) = &mut self.race else { return };
        let site = r.sites.site(span);
        let j = if write { r.write } else { r.read };
        let sig = self.lp.externs[j as usize].signature.clone();
        let f = self.func_ref(self.p.functions.len() as u32 + j, sig);
        let size = self.b.ins().iconst(types::I32, i64::from(size));
        let site = self.b.ins().iconst(types::I32, i64::from(site));
        self.b.ins().call(f, &[addr, size, site]);
    }

    /// Copies `size` bytes from `src` to `dst` (non-overlapping or identical).
    fn copy_bytes(&mut self, dst: Value, src: Value, size: u32) {
        let word = self.ptr.bytes();
        let words = size / word;
        let mut off = 0u32;
        if size <= INLINE_COPY_LIMIT {
            for _ in 0..words {
                let v = self.b.ins().load(self.ptr, mem(), src, off as i32);
                self.b.ins().store(mem(), v, dst, off as i32);
                off += word;
            }
        } else {
            // for (i = 0; i != words*word; i += word) dst[i] = src[i];
            let header = self.b.create_block();
            let body = self.b.create_block();
            let exit = self.b.create_block();
            let i = self.b.append_block_param(header, self.ptr);
            let zero = self.b.ins().iconst(self.ptr, 0);
            self.b.ins().jump(header, &[BlockArg::Value(zero)]);
            self.b.switch_to_block(header);
            let done = self
                .b
                .ins()
                .icmp_imm_s(IntCC::Equal, i, (words * word) as i64);
            self.b.ins().brif(done, exit, &[], body, &[]);
            self.b.switch_to_block(body);
            let s = self.b.ins().iadd(src, i);
            let d = self.b.ins().iadd(dst, i);
            let v = self.b.ins().load(self.ptr, mem(), s, 0);
            self.b.ins().store(mem(), v, d, 0);
            let next = self.b.ins().iadd_imm_s(i, word as i64);
            self.b.ins().jump(header, &[BlockArg::Value(next)]);
            self.b.switch_to_block(exit);
            off = words * word;
        }
        for chunk in [4u32, 2, 1] {
            while size - off >= chunk {
                let t = ir::Type::int(chunk as u16 * 8).unwrap_or(types::I8);
                let v = self.b.ins().load(t, mem(), src, off as i32);
                self.b.ins().store(mem(), v, dst, off as i32);
                off += chunk;
            }
        }
    }

    fn expr(&mut self, e: &Expr) -> Option<Value> {
        let ptr = self.ptr;
        let v = match &e.kind {
            ExprKind::IntConst(c) => {
                let t = self.ty(&e.ty);
                self.b.ins().iconst(t, *c as i64)
            }
            ExprKind::DoubleConst(d) => self.b.ins().f64const(*d),
            ExprKind::StringLit(s) => {
                let idx = self.lp.string_data(*s);
                self.data_addr(idx)
            }
            ExprKind::Null => self.b.ins().iconst(ptr, 0),
            ExprKind::FuncAddr(f) => {
                let sig = self.sigs[*f as usize].clone();
                let r = self.func_ref(*f, sig);
                let a = self.b.ins().func_addr(ptr, r);
                if ptr == types::I32 {
                    a
                } else {
                    self.b.ins().ireduce(types::I32, a)
                }
            }
            ExprKind::StackSizeOf(f) => {
                let idx = self.lp.frame_size_data(*f);
                let a = self.data_addr(idx);
                self.b
                    .ins()
                    .load(types::I32, MemFlagsData::trusted().with_readonly(), a, 0)
            }
            ExprKind::Load(pl) => self.load_place(pl),
            ExprKind::AddrOf(pl) => self.place_addr(pl),
            ExprKind::Assign(pl, val) => {
                if matches!(pl.ty, CType::Struct(_) | CType::Array(..)) {
                    let src = self.value(val);
                    let dst = self.place_addr(pl);
                    let size = self.size(&pl.ty);
                    if self.race.is_some() {
                        // The copy reads the whole source and writes the whole destination;
                        // the source is an address whose origin the detector sorts out.
                        self.race_access(false, src, size, val.span);
                        if may_be_shared(pl) {
                            self.race_access(true, dst, size, pl.span);
                        }
                    }
                    self.copy_bytes(dst, src, size);
                    return None;
                }
                let v = self.value(val);
                match self.place(pl) {
                    PlaceRef::Var(var) => self.b.def_var(var, v),
                    PlaceRef::Mem(a) => {
                        if may_be_shared(pl) {
                            let t = self.b.func.dfg.value_type(v);
                            self.race_access(true, a, t.bytes(), pl.span);
                        }
                        self.b.ins().store(mem(), v, a, 0);
                    }
                }
                v
            }
            ExprKind::Unary(op, a) => {
                let x = self.value(a);
                match op {
                    UnaryOp::Neg if a.ty == CType::Double => self.b.ins().fneg(x),
                    UnaryOp::Neg => self.b.ins().ineg(x),
                    UnaryOp::BitNot => self.b.ins().bnot(x),
                    UnaryOp::LogNot => {
                        let z = if a.ty == CType::Double {
                            let zero = self.b.ins().f64const(0.0);
                            self.b.ins().fcmp(FloatCC::Equal, x, zero)
                        } else {
                            self.b.ins().icmp_imm_s(IntCC::Equal, x, 0)
                        };
                        self.bool_to_int(z)
                    }
                }
            }
            ExprKind::Binary(op, l, r) => {
                let a = self.value(l);
                let b = self.value(r);
                self.binary(*op, &l.ty, a, b)
            }
            ExprKind::PtrOffset {
                ptr: p,
                index,
                elem_size,
                subtract,
            } => {
                let base = self.value(p);
                let i = self.value(index);
                let i = self.int_to_ptr(i, &index.ty);
                let scaled = if *elem_size == 1 {
                    i
                } else {
                    self.b.ins().imul_imm_s(i, *elem_size as i64)
                };
                if *subtract {
                    self.b.ins().isub(base, scaled)
                } else {
                    self.b.ins().iadd(base, scaled)
                }
            }
            ExprKind::PtrDiff {
                lhs,
                rhs,
                elem_size,
            } => {
                let a = self.value(lhs);
                let b = self.value(rhs);
                let d = self.b.ins().isub(a, b);
                let q = if *elem_size <= 1 {
                    d
                } else {
                    let n = self.b.ins().iconst(ptr, *elem_size as i64);
                    self.b.ins().sdiv(d, n)
                };
                if ptr == types::I32 {
                    q
                } else {
                    self.b.ins().ireduce(types::I32, q)
                }
            }
            ExprKind::LogicalAnd(l, r) | ExprKind::LogicalOr(l, r) => {
                let is_and = matches!(e.kind, ExprKind::LogicalAnd(..));
                let rhs_bb = self.b.create_block();
                let done = self.b.create_block();
                let res = self.b.append_block_param(done, types::I32);
                let tl = self.truth(l);
                let short = self.b.ins().iconst(types::I32, if is_and { 0 } else { 1 });
                if is_and {
                    self.b
                        .ins()
                        .brif(tl, rhs_bb, &[], done, &[BlockArg::Value(short)]);
                } else {
                    self.b
                        .ins()
                        .brif(tl, done, &[BlockArg::Value(short)], rhs_bb, &[]);
                }
                self.b.switch_to_block(rhs_bb);
                let tr = self.truth(r);
                let tr = self.bool_to_int(tr);
                self.b.ins().jump(done, &[BlockArg::Value(tr)]);
                self.b.switch_to_block(done);
                res
            }
            ExprKind::Convert(a) => {
                let x = self.expr(a);
                return match x {
                    Some(x) => self.convert(x, &a.ty, &e.ty),
                    None => None,
                };
            }
            ExprKind::Call { callee, args } => return self.call(*callee, args),
            ExprKind::Comma(a, b) => {
                self.expr(a);
                return self.expr(b);
            }
        };
        Some(v)
    }

    fn int_to_ptr(&mut self, v: Value, from: &CType) -> Value {
        let v = if *from == CType::Char {
            self.b.ins().sextend(types::I32, v)
        } else {
            v
        };
        if self.ptr == types::I32 {
            v
        } else {
            self.b.ins().sextend(self.ptr, v)
        }
    }

    fn convert(&mut self, v: Value, from: &CType, to: &CType) -> Option<Value> {
        if *to == CType::Void {
            return None;
        }
        let from_t = self.b.func.dfg.value_type(v);
        let to_t = ir_type(to, self.ptr)?;
        if from_t == to_t {
            return Some(v);
        }
        let ins = self.b.ins();
        Some(match (from, to) {
            (CType::Double, _) => {
                // cvttsd2si semantics: truncation toward zero, INT_MIN when out of range or NaN.
                let sat = self.b.ins().fcvt_to_sint_sat(types::I32, v);
                let lo = self.b.ins().f64const(-2147483649.0);
                let hi = self.b.ins().f64const(2147483648.0);
                let above = self.b.ins().fcmp(FloatCC::GreaterThan, v, lo);
                let below = self.b.ins().fcmp(FloatCC::LessThan, v, hi);
                let ok = self.b.ins().band(above, below);
                let min = self.b.ins().iconst(types::I32, i32::MIN as i64);
                let i = self.b.ins().select(ok, sat, min);
                if to_t == types::I32 {
                    i
                } else {
                    self.b.ins().ireduce(to_t, i)
                }
            }
            (_, CType::Double) => {
                let i = if from_t.bits() < 32 {
                    ins.sextend(types::I32, v)
                } else {
                    v
                };
                let i = if from_t.bits() > 32 {
                    self.b.ins().ireduce(types::I32, i)
                } else {
                    i
                };
                self.b.ins().fcvt_from_sint(types::F64, i)
            }
            _ => {
                if from_t.bits() < to_t.bits() {
                    ins.sextend(to_t, v)
                } else {
                    ins.ireduce(to_t, v)
                }
            }
        })
    }

    fn binary(&mut self, op: BinaryOp, ty: &CType, a: Value, b: Value) -> Value {
        let ins = self.b.ins();
        if *ty == CType::Double {
            let cc = match op {
                BinaryOp::Add => return ins.fadd(a, b),
                BinaryOp::Sub => return ins.fsub(a, b),
                BinaryOp::Mul => return ins.fmul(a, b),
                BinaryOp::Div => return ins.fdiv(a, b),
                BinaryOp::Eq => FloatCC::Equal,
                BinaryOp::Ne => FloatCC::NotEqual,
                BinaryOp::Lt => FloatCC::LessThan,
                BinaryOp::Le => FloatCC::LessThanOrEqual,
                BinaryOp::Gt => FloatCC::GreaterThan,
                BinaryOp::Ge => FloatCC::GreaterThanOrEqual,
                // Sema allows only arithmetic and comparisons on doubles.
                _ => return ins.fadd(a, b),
            };
            let c = ins.fcmp(cc, a, b);
            return self.bool_to_int(c);
        }
        let signed = !ty.is_pointer();
        let cc = match op {
            BinaryOp::Add => return ins.iadd(a, b),
            BinaryOp::Sub => return ins.isub(a, b),
            BinaryOp::Mul => return ins.imul(a, b),
            BinaryOp::Div => return ins.sdiv(a, b),
            BinaryOp::Rem => return ins.srem(a, b),
            BinaryOp::Shl => return ins.ishl(a, b),
            BinaryOp::Shr => return ins.sshr(a, b),
            BinaryOp::BitAnd => return ins.band(a, b),
            BinaryOp::BitOr => return ins.bor(a, b),
            BinaryOp::BitXor => return ins.bxor(a, b),
            BinaryOp::Eq => IntCC::Equal,
            BinaryOp::Ne => IntCC::NotEqual,
            BinaryOp::Lt if signed => IntCC::SignedLessThan,
            BinaryOp::Le if signed => IntCC::SignedLessThanOrEqual,
            BinaryOp::Gt if signed => IntCC::SignedGreaterThan,
            BinaryOp::Ge if signed => IntCC::SignedGreaterThanOrEqual,
            BinaryOp::Lt => IntCC::UnsignedLessThan,
            BinaryOp::Le => IntCC::UnsignedLessThanOrEqual,
            BinaryOp::Gt => IntCC::UnsignedGreaterThan,
            BinaryOp::Ge => IntCC::UnsignedGreaterThanOrEqual,
        };
        let c = ins.icmp(cc, a, b);
        self.bool_to_int(c)
    }

    fn call(&mut self, callee: Callee, args: &[Expr]) -> Option<Value> {
        // Arguments are evaluated right to left, as gcc does on x86 (the corpus's oracle).
        let mut vals: Vec<Value> = args.iter().rev().map(|a| self.value(a)).collect();
        vals.reverse();
        let (index, sig) = match callee {
            Callee::Function(f) => (f, self.sigs[f as usize].clone()),
            Callee::Extern(j) => {
                let d = &self.lp.externs[j as usize];
                let mut sig = d.signature.clone();
                if d.variadic {
                    for a in &args[d.c_params.len().min(args.len())..] {
                        sig.params.extend(abi_param(&a.ty, self.ptr, true));
                    }
                }
                (self.p.functions.len() as u32 + j, sig)
            }
        };
        // `main`'s IR signature is fixed at (argc, argv); pad or trim calls to it accordingly.
        vals.truncate(sig.params.len());
        while vals.len() < sig.params.len() {
            let t = sig.params[vals.len()].value_type;
            let z = self.zero(t);
            vals.push(z);
        }
        let has_ret = !sig.returns.is_empty();
        let r = self.func_ref(index, sig);
        let call = self.b.ins().call(r, &vals);
        if has_ret {
            Some(self.b.inst_results(call)[0])
        } else {
            None
        }
    }
}

/// Name of the `u32` data symbol that selects the thread library's implementation in the
/// runtime (mirrors `stackrt::base::abi::THREADS_SYMBOL`): absent or 0, OS threads; 1, green
/// threads (`cmm compile --threads green`).
pub const THREADS_SYMBOL: &str = "__cmm_threads";

/// `THREADS_SYMBOL`'s value for green threads (mirrors `stackrt::base::abi::THREADS_GREEN`).
pub const THREADS_GREEN: u32 = 1;

/// Marks a lowered program as running its `sthread_*` threads as green threads: appends the
/// exported read-only data object `__cmm_threads` = [`THREADS_GREEN`], which every back end
/// emits like the program's own data (after them, so no IR data index changes).
pub fn mark_green_threads(p: &mut LoweredProgram) {
    p.data.push(DataObject {
        symbol: THREADS_SYMBOL.to_string(),
        exported: true,
        writable: false,
        size: 4,
        align: 4,
        kind: DataKind::Bytes(THREADS_GREEN.to_le_bytes().to_vec()),
    });
}

/// Whether [`mark_green_threads`] marked the program.
pub fn is_green_threads(p: &LoweredProgram) -> bool {
    p.data.iter().any(|d| {
        d.symbol == THREADS_SYMBOL
            && matches!(&d.kind, DataKind::Bytes(b) if b[..] == THREADS_GREEN.to_le_bytes())
    })
}

#[cfg(test)]
mod thread_model_tests {
    use super::*;

    #[test]
    fn preemption_poll_symbols_are_the_runtimes() {
        // Mirrored in stackrt::base::abi::PREEMPT_FLAG_SYMBOL / PREEMPT_TLS_SYMBOL /
        // PREEMPT_POINT (checked there too).
        assert_eq!(PREEMPT_FLAG_SYMBOL, "__cmm_preempt");
        assert_eq!(PREEMPT_TLS_SYMBOL, "stackrt_preempt_tls");
        assert_eq!(PREEMPT_POINT, "sthread_preempt_point");
    }

    #[test]
    fn green_threads_mark_is_the_runtimes_symbol() {
        // Mirrored in stackrt::base::abi::THREADS_SYMBOL / THREADS_GREEN (checked there too).
        assert_eq!(THREADS_SYMBOL, "__cmm_threads");
        assert_eq!(THREADS_GREEN, 1);
        let mut p = LoweredProgram {
            pointer_type: types::I64,
            functions: Vec::new(),
            externs: Vec::new(),
            data: Vec::new(),
            num_globals: 0,
            num_strings: 0,
        };
        assert!(!is_green_threads(&p));
        mark_green_threads(&mut p);
        assert!(is_green_threads(&p));
        assert_eq!(p.data.len(), 1);
        assert_eq!(p.data[0].symbol, "__cmm_threads");
        assert!(p.data[0].exported && !p.data[0].writable);
        assert_eq!(p.data[0].kind, DataKind::Bytes(vec![1, 0, 0, 0]));
    }
}
