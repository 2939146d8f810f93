//! Instruction selection: one Cranelift IR function → [`VCode`] over virtual registers.
//!
//! Cheap values (constants, addresses of stack slots and symbols, comparisons) are not computed
//! where Cranelift defines them but *rematerialised at each use*: folded into an immediate or an
//! address mode, fused into a compare-and-branch, or recomputed into a fresh virtual register.
//! Everything else is computed once, at its definition. Unsupported opcodes and types are
//! reported as errors naming them.

use std::collections::HashMap;

use cranelift_codegen::ir::{
    self, condcodes::CondCode, condcodes::FloatCC, condcodes::IntCC, types, BlockArg, ExternalName,
    GlobalValueData, InstructionData, Opcode, Value, ValueDef,
};
use regalloc2::{
    Block, Operand, OperandConstraint, OperandKind, OperandPos, PReg, PRegSet, RegClass, VReg,
};

use super::mech::Mechanism;
use super::regs::{self, Width};
use super::vcode::*;
use super::Target;
use crate::lower::{LoweredProgram, NameTarget};

type R<T> = Result<T, String>;

/// Register width of an integer IR type (`i8` and `i32` live in 32-bit registers).
fn width_of(ty: ir::Type) -> R<Width> {
    match ty {
        types::I8 | types::I32 => Ok(Width::B32),
        types::I64 => Ok(Width::B64),
        _ => Err(format!("unsupported integer type {ty}")),
    }
}

fn class_of(ty: ir::Type) -> RegClass {
    if ty.is_float() {
        RegClass::Float
    } else {
        RegClass::Int
    }
}

/// Size of the stack slot an argument of this type takes in the C-- convention.
pub fn arg_slot_size(ty: ir::Type, target: Target) -> u32 {
    match target {
        Target::X86_64 => 8,
        Target::I686 => {
            if ty == types::F64 {
                8
            } else {
                4
            }
        }
    }
}

/// The operand list of an instruction under construction.
struct Ops {
    ops: Vec<Operand>,
}

impl Ops {
    fn new() -> Ops {
        Ops { ops: Vec::new() }
    }
    fn push(&mut self, o: Operand) -> Op {
        self.ops.push(o);
        (self.ops.len() - 1) as Op
    }
    fn reg(&mut self, v: VReg) -> Op {
        self.push(Operand::reg_use(v))
    }
    fn any(&mut self, v: VReg) -> Op {
        self.push(Operand::any_use(v))
    }
    fn fixed(&mut self, v: VReg, p: PReg) -> Op {
        self.push(Operand::reg_fixed_use(v, p))
    }
    fn def(&mut self, v: VReg) -> Op {
        self.push(Operand::reg_def(v))
    }
    fn fixed_def(&mut self, v: VReg, p: PReg) -> Op {
        self.push(Operand::reg_fixed_def(v, p))
    }
    fn reuse(&mut self, v: VReg, idx: Op) -> Op {
        self.push(Operand::reg_reuse_def(v, idx as usize))
    }
    /// A use limited to the first `n` registers (`n` = 4: the byte-addressable ones on i686).
    fn limited(&mut self, v: VReg, n: usize, kind: OperandKind, pos: OperandPos) -> Op {
        self.push(Operand::new(v, OperandConstraint::Limit(n), kind, pos))
    }
}

/// An address before its registers become operands.
#[derive(Clone, Debug)]
struct AddrV {
    base: BaseV,
    index: Option<(VReg, u8)>,
    disp: i64,
}

#[derive(Clone, Debug)]
enum BaseV {
    Reg(VReg),
    Slot(u32),
    Sym(String),
    /// A thread-local symbol of the runtime (local-exec; `tls_value`).
    Tls(String),
}

/// The comparison a branch or select tests.
enum CondV {
    Int { cc: Cc, w: Width, a: VReg, b: RmiV },
    Float { cond: FCond, a: VReg, b: VReg },
}

#[derive(Clone, Copy)]
enum RmiV {
    V(VReg),
    Imm(i32),
}

struct Isel<'a> {
    p: &'a LoweredProgram,
    f: &'a ir::Function,
    target: Target,
    vc: VCode,
    vregs: HashMap<Value, VReg>,
    blocks: HashMap<ir::Block, Block>,
    /// Offsets of Cranelift stack slots inside the stack-slot area.
    slot_offsets: Vec<u32>,
    /// Clobbers of a call to a C-- function (every allocatable register but the preserved ones).
    all_regs: PRegSet,
    /// The spare users' symbols and the register a call to one clobbers besides `all_regs`
    /// ([`regs::per_function_spare`]).
    spare_users: (
        &'a std::collections::HashSet<String>,
        Option<regalloc2::PReg>,
    ),
    /// Byte-register constraint on i686 (`Limit(4)`: eax, ecx, edx, ebx).
    byte_limit: Option<usize>,
    /// Set when a `brif` has closed its block (its edge blocks follow).
    block_ended: bool,
    /// The temporary of the `i8` result being computed (see [`Self::result_vreg`]).
    i8_temp: Option<VReg>,
    /// Instructions not emitted: no side effect and no used result.
    dead: std::collections::HashSet<ir::Inst>,
    /// Values with at least one use in a live instruction.
    used: std::collections::HashSet<Value>,
}

/// Lowers function `index` of `p` to VCode; `spare_users` are the functions (by symbol) that a
/// call clobbers `edi` in too ([`super::spare_users`]).
pub fn lower_function<'a>(
    p: &'a LoweredProgram,
    index: usize,
    target: Target,
    mech: &dyn Mechanism,
    spare_users: &'a std::collections::HashSet<String>,
) -> Result<VCode, String> {
    let optimized = optimize(&p.functions[index].func)?;
    let f = &optimized;
    let mut all_regs = PRegSet::empty();
    let reserved = mech.reserved_regs(target);
    for g in regs::allocatable_gprs(target) {
        let r = regs::gpr(g);
        if !reserved.contains(&r) && !regs::cmm_callee_saved(target, &reserved).contains(&g) {
            all_regs.add(r);
        }
    }
    for x in 0..regs::num_xmms(target) {
        all_regs.add(regs::xmm(x));
    }
    let mut slot_offsets = Vec::new();
    let mut off = 0u32;
    for (_, data) in f.sized_stack_slots.iter() {
        let align = 1u32 << data.align_shift.min(4);
        off = off.div_ceil(align) * align;
        slot_offsets.push(off);
        off += data.size;
    }
    let mut s = Isel {
        p,
        f,
        target,
        vc: VCode::default(),
        vregs: HashMap::new(),
        blocks: HashMap::new(),
        slot_offsets,
        all_regs,
        spare_users: (
            spare_users,
            regs::per_function_spare(target, &mech.reserved_regs(target)),
        ),
        byte_limit: if target == Target::I686 {
            Some(4)
        } else {
            None
        },
        block_ended: false,
        i8_temp: None,
        dead: Default::default(),
        used: Default::default(),
    };
    s.run()?;
    Ok(s.vc)
}

/// Cranelift's target-independent mid-end on a copy of `f`: unreachable-code removal, then the
/// e-graph pass at `opt_level=speed` (GVN, constant folding, algebraic simplification, redundant
/// load elimination, loop-invariant code motion). It needs no ISA, so it serves both pointer
/// widths; it never inlines, so every C-- call stays a call.
pub fn optimize(f: &ir::Function) -> R<ir::Function> {
    use cranelift_codegen::settings::{self, Configurable};
    let mut b = settings::builder();
    b.set("opt_level", "speed")
        .map_err(|e| format!("optimizer settings: {e}"))?;
    let flags = settings::Flags::new(b);
    let mut ctx = cranelift_codegen::Context::for_function(f.clone());
    let err = |e: cranelift_codegen::CodegenError| format!("optimizer: {e}");
    ctx.compute_cfg();
    ctx.compute_domtree();
    ctx.eliminate_unreachable_code(&flags).map_err(err)?;
    ctx.remove_constant_phis(&flags).map_err(err)?;
    ctx.func.dfg.resolve_all_aliases();
    ctx.egraph_pass(&flags, &mut Default::default())
        .map_err(err)?;
    Ok(ctx.func)
}

/// Total size of the Cranelift stack slots of a function (with their alignment).
pub fn stack_slots_size(f: &ir::Function) -> u32 {
    let mut off = 0u32;
    for (_, data) in f.sized_stack_slots.iter() {
        let align = 1u32 << data.align_shift.min(4);
        off = off.div_ceil(align) * align + data.size;
    }
    off
}

impl<'a> Isel<'a> {
    fn run(&mut self) -> R<()> {
        let f = self.f;
        // Only blocks reachable from the entry are emitted (regalloc2 requires it).
        let entry = f
            .layout
            .entry_block()
            .ok_or("function has no entry block")?;
        let mut reachable = std::collections::HashSet::new();
        let mut work = vec![entry];
        while let Some(b) = work.pop() {
            if !reachable.insert(b) {
                continue;
            }
            if let Some(t) = f.layout.last_inst(b) {
                for bc in
                    f.dfg.insts[t].branch_destination(&f.dfg.jump_tables, &f.dfg.exception_tables)
                {
                    work.push(bc.block(&f.dfg.value_lists));
                }
            }
        }
        let order: Vec<ir::Block> = f
            .layout
            .blocks()
            .filter(|b| reachable.contains(b))
            .collect();
        self.dead_code(&order);
        // Block numbering in emission order: each Cranelift block, then its edge blocks.
        let mut n = 0usize;
        for &b in &order {
            self.blocks.insert(b, Block::new(n));
            n += 1;
            if let Some(t) = f.layout.last_inst(b) {
                if f.dfg.insts[t].opcode() == Opcode::Brif {
                    n += 2;
                }
            }
        }
        self.vc.blocks = vec![BlockData::default(); n];
        for &b in &order {
            let vb = self.blocks[&b];
            self.vc.blocks[vb.index()].start = self.vc.insts.len() as u32;
            if b == entry {
                self.lower_params(b)?;
            } else {
                let params: Vec<Value> = f.dfg.block_params(b).to_vec();
                let vregs: Vec<VReg> = params.iter().map(|&v| self.vreg(v)).collect();
                self.vc.blocks[vb.index()].params = vregs;
            }
            for inst in f.layout.block_insts(b) {
                self.lower_inst(inst, vb)?;
            }
            if !self.block_ended {
                self.vc.blocks[vb.index()].end = self.vc.insts.len() as u32;
            }
            self.block_ended = false;
        }
        self.remove_dead_vcode();
        // Predecessors.
        for i in 0..self.vc.blocks.len() {
            let succs = self.vc.blocks[i].succs.clone();
            for s in succs {
                self.vc.blocks[s.index()].preds.push(Block::new(i));
            }
        }
        mark_flag_reuse(&mut self.vc);
        Ok(())
    }

    /// Finds instructions without side effects whose results are never used, and parameters
    /// never used; neither is emitted.
    fn dead_code(&mut self, order: &[ir::Block]) {
        let f = self.f;
        let mut uses: HashMap<Value, u32> = HashMap::new();
        let mut insts = Vec::new();
        for &b in order {
            for i in f.layout.block_insts(b) {
                insts.push(i);
                for v in f.dfg.inst_values(i) {
                    *uses.entry(f.dfg.resolve_aliases(v)).or_default() += 1;
                }
            }
        }
        loop {
            let mut changed = false;
            for &i in insts.iter().rev() {
                if self.dead.contains(&i) || !is_pure(f.dfg.insts[i].opcode()) {
                    continue;
                }
                let results = f.dfg.inst_results(i);
                if results.is_empty()
                    || results
                        .iter()
                        .any(|r| uses.get(r).copied().unwrap_or(0) > 0)
                {
                    continue;
                }
                self.dead.insert(i);
                changed = true;
                for v in f.dfg.inst_values(i) {
                    if let Some(n) = uses.get_mut(&f.dfg.resolve_aliases(v)) {
                        *n -= 1;
                    }
                }
            }
            if !changed {
                break;
            }
        }
        self.used = uses
            .into_iter()
            .filter(|&(_, n)| n > 0)
            .map(|(v, _)| v)
            .collect();
    }

    /// Removes VCode instructions without side effects whose definitions are never used (e.g.
    /// an address computation every use of which was folded into an address mode).
    fn remove_dead_vcode(&mut self) {
        let vc = &mut self.vc;
        let mut uses = vec![0u32; vc.num_vregs];
        for inst in &vc.insts {
            for o in &inst.ops {
                if o.kind() == OperandKind::Use {
                    uses[o.vreg().vreg()] += 1;
                }
            }
        }
        for b in &vc.blocks {
            for args in &b.succ_args {
                for v in args {
                    uses[v.vreg()] += 1;
                }
            }
        }
        let mut dead = vec![false; vc.insts.len()];
        loop {
            let mut changed = false;
            for (i, inst) in vc.insts.iter().enumerate().rev() {
                if dead[i] || !removable(&inst.kind) {
                    continue;
                }
                let defs_unused = inst
                    .ops
                    .iter()
                    .filter(|o| o.kind() == OperandKind::Def)
                    .all(|o| uses[o.vreg().vreg()] == 0);
                if defs_unused {
                    dead[i] = true;
                    changed = true;
                    for o in &inst.ops {
                        if o.kind() == OperandKind::Use {
                            uses[o.vreg().vreg()] -= 1;
                        }
                    }
                }
            }
            if !changed {
                break;
            }
        }
        // Compact the instruction list and renumber the block ranges.
        let mut new_index = Vec::with_capacity(vc.insts.len() + 1);
        let mut n = 0u32;
        for d in &dead {
            new_index.push(n);
            if !d {
                n += 1;
            }
        }
        new_index.push(n);
        for b in &mut vc.blocks {
            b.start = new_index[b.start as usize];
            b.end = new_index[b.end as usize];
        }
        let insts = std::mem::take(&mut vc.insts);
        vc.insts = insts
            .into_iter()
            .zip(dead)
            .filter(|(_, d)| !d)
            .map(|(i, _)| i)
            .collect();
    }

    fn new_vreg(&mut self, class: RegClass) -> VReg {
        let v = VReg::new(self.vc.num_vregs, class);
        self.vc.num_vregs += 1;
        v
    }

    fn vreg(&mut self, v: Value) -> VReg {
        let v = self.f.dfg.resolve_aliases(v);
        if let Some(&r) = self.vregs.get(&v) {
            return r;
        }
        let r = self.new_vreg(class_of(self.f.dfg.value_type(v)));
        self.vregs.insert(v, r);
        r
    }

    fn emit(&mut self, kind: Kind, ops: Ops) {
        self.emit_clob(kind, ops, PRegSet::empty());
    }

    fn emit_clob(&mut self, kind: Kind, ops: Ops, clobbers: PRegSet) {
        self.vc.insts.push(Inst {
            kind,
            ops: ops.ops,
            clobbers,
        });
    }

    fn ty(&self, v: Value) -> ir::Type {
        self.f.dfg.value_type(v)
    }

    /// The instruction defining `v`, if it is an instruction result.
    fn def_inst(&self, v: Value) -> Option<ir::Inst> {
        match self.f.dfg.value_def(self.f.dfg.resolve_aliases(v)) {
            ValueDef::Result(i, _) => Some(i),
            _ => None,
        }
    }

    /// The constant value of `v` if an `iconst` defines it.
    fn iconst(&self, v: Value) -> Option<i64> {
        let i = self.def_inst(v)?;
        match self.f.dfg.insts[i] {
            InstructionData::UnaryImm {
                opcode: Opcode::Iconst,
                imm,
            } => {
                let bits = self.ty(v).bits();
                let raw = imm.bits();
                // Sign-extend from the type's width.
                Some(if bits < 64 {
                    (raw << (64 - bits)) >> (64 - bits)
                } else {
                    raw
                })
            }
            _ => None,
        }
    }

    /// Whether `v` is rematerialised at its uses instead of computed at its definition.
    fn is_lazy(&self, v: Value) -> bool {
        let Some(i) = self.def_inst(v) else {
            return false;
        };
        match self.f.dfg.insts[i].opcode() {
            Opcode::Iconst
            | Opcode::F64const
            | Opcode::StackAddr
            | Opcode::SymbolValue
            | Opcode::TlsValue
            | Opcode::FuncAddr
            | Opcode::Icmp
            | Opcode::Fcmp => true,
            Opcode::Uextend => {
                let a = self.f.dfg.inst_args(i)[0];
                self.cmp_of(a).is_some()
            }
            _ => false,
        }
    }

    /// If `v` is a comparison result (possibly zero-extended), its defining compare.
    fn cmp_of(&self, v: Value) -> Option<ir::Inst> {
        let i = self.def_inst(v)?;
        match self.f.dfg.insts[i].opcode() {
            Opcode::Icmp | Opcode::Fcmp => Some(i),
            Opcode::Uextend => self.cmp_of(self.f.dfg.inst_args(i)[0]),
            _ => None,
        }
    }

    fn rmi(&mut self, v: Value) -> R<RmiV> {
        if let Some(c) = self.iconst(v) {
            if let Ok(c) = i32::try_from(c) {
                return Ok(RmiV::Imm(c));
            }
        }
        Ok(RmiV::V(self.reg_of(v)?))
    }

    /// A virtual register holding `v`, rematerialising lazy values here.
    fn reg_of(&mut self, v: Value) -> R<VReg> {
        let v = self.f.dfg.resolve_aliases(v);
        if !self.is_lazy(v) {
            return Ok(self.vreg(v));
        }
        let i = self.def_inst(v).ok_or("lazy value without instruction")?;
        let ty = self.ty(v);
        let data = self.f.dfg.insts[i];
        match data.opcode() {
            Opcode::Iconst => {
                let imm = self.iconst(v).unwrap_or(0);
                let w = width_of(ty)?;
                Ok(self.imm_vreg(imm, w))
            }
            Opcode::F64const => {
                let InstructionData::UnaryIeee64 { imm, .. } = data else {
                    return Err("malformed f64const".into());
                };
                let dst = self.new_vreg(RegClass::Float);
                let mut o = Ops::new();
                let d = o.def(dst);
                let bits = imm.bits();
                if bits == 0 {
                    self.emit(Kind::ZeroF64 { dst: d }, o);
                } else {
                    self.emit(Kind::LoadConstF64 { dst: d, bits }, o);
                }
                Ok(dst)
            }
            Opcode::StackAddr | Opcode::SymbolValue | Opcode::FuncAddr => {
                let addr = self.addr_of(v, 0)?;
                let dst = self.new_vreg(RegClass::Int);
                let w = width_of(ty)?;
                let mut o = Ops::new();
                let amode = self.amode_ops(&addr, &mut o);
                let d = o.def(dst);
                self.emit(
                    Kind::Lea {
                        w,
                        dst: d,
                        addr: amode,
                    },
                    o,
                );
                Ok(dst)
            }
            Opcode::Icmp | Opcode::Fcmp | Opcode::Uextend => {
                let c = self.cond_of(v)?;
                let dst = self.new_vreg(RegClass::Int);
                self.setcc(c, dst);
                Ok(dst)
            }
            op => Err(format!("cannot rematerialise {op}")),
        }
    }

    fn setcc(&mut self, c: CondV, dst: VReg) {
        let mut o = Ops::new();
        match c {
            CondV::Int { cc, w, a, b } => {
                let a = o.reg(a);
                let b = self.rmi_op(b, &mut o);
                let d = match self.byte_limit {
                    Some(n) => o.limited(dst, n, OperandKind::Def, OperandPos::Late),
                    None => o.def(dst),
                };
                self.emit(
                    Kind::Setcc {
                        cc,
                        w,
                        a,
                        b,
                        dst: d,
                    },
                    o,
                );
            }
            CondV::Float { cond, a, b } => {
                let a = o.reg(a);
                let b = o.any(b);
                let n = self.byte_limit.unwrap_or(16);
                let d = o.limited(dst, n, OperandKind::Def, OperandPos::Late);
                let tmpv = self.new_vreg(RegClass::Int);
                let tmp = o.limited(tmpv, n, OperandKind::Def, OperandPos::Early);
                self.emit(
                    Kind::FSetcc {
                        cond,
                        a,
                        b,
                        dst: d,
                        tmp,
                    },
                    o,
                );
            }
        }
    }

    fn rmi_op(&mut self, b: RmiV, o: &mut Ops) -> Rmi {
        match b {
            RmiV::V(v) => Rmi::Op(o.any(v)),
            RmiV::Imm(i) => Rmi::Imm(i),
        }
    }

    /// The condition `v != 0` as a flag test, fusing a comparison that defines `v`.
    fn cond_of(&mut self, v: Value) -> R<CondV> {
        if let Some(i) = self.cmp_of(v) {
            let data = self.f.dfg.insts[i];
            match data {
                InstructionData::IntCompare { cond, args, .. }
                    if matches!(cond, IntCC::Equal | IntCC::NotEqual)
                        && self.iconst(args[1]) == Some(0)
                        && self.cmp_of(args[0]).is_some() =>
                {
                    // `(a < b) != 0` is `a < b`; `(a < b) == 0` is its negation.
                    let inner = self.cond_of(args[0])?;
                    return Ok(if cond == IntCC::Equal {
                        invert(inner)
                    } else {
                        inner
                    });
                }
                InstructionData::IntCompare { cond, args, .. } => {
                    let w = width_of(self.ty(args[0]))?;
                    let (cc, l, r) =
                        if self.iconst(args[0]).is_some() && self.iconst(args[1]).is_none() {
                            (int_cc(cond.swap_args()), args[1], args[0])
                        } else {
                            (int_cc(cond), args[0], args[1])
                        };
                    let a = self.reg_of(l)?;
                    let b = self.rmi(r)?;
                    return Ok(CondV::Int { cc, w, a, b });
                }
                InstructionData::FloatCompare { cond, args, .. } => {
                    let (fc, swap) = float_cond(cond);
                    let (l, r) = if swap {
                        (args[1], args[0])
                    } else {
                        (args[0], args[1])
                    };
                    let a = self.reg_of(l)?;
                    let b = self.reg_of(r)?;
                    return Ok(CondV::Float { cond: fc, a, b });
                }
                _ => {}
            }
        }
        let w = width_of(self.ty(v))?;
        let a = self.reg_of(v)?;
        Ok(CondV::Int {
            cc: Cc::Ne,
            w,
            a,
            b: RmiV::Imm(0),
        })
    }

    /// The address `v + disp`, folding constants, stack slots, symbols and scaled indices.
    fn addr_of(&mut self, v: Value, disp: i64) -> R<AddrV> {
        let v = self.f.dfg.resolve_aliases(v);
        if let Some(i) = self.def_inst(v) {
            let data = self.f.dfg.insts[i];
            match data {
                InstructionData::StackAddr {
                    stack_slot, offset, ..
                } => {
                    let base = self.slot_offsets[stack_slot.as_u32() as usize];
                    return Ok(AddrV {
                        base: BaseV::Slot(base),
                        index: None,
                        disp: disp + i64::from(i32::from(offset)),
                    });
                }
                InstructionData::UnaryGlobalValue {
                    opcode,
                    global_value,
                } => {
                    let (sym, off) = self.global_symbol(global_value)?;
                    return Ok(AddrV {
                        base: if opcode == Opcode::TlsValue {
                            BaseV::Tls(sym)
                        } else {
                            BaseV::Sym(sym)
                        },
                        index: None,
                        disp: disp + off,
                    });
                }
                InstructionData::FuncAddr { func_ref, .. } => {
                    // A C-- function's address is its C entry (`super::c_entry`), which C code
                    // may call; an extern's is its own.
                    let (sym, ext) = self.func_symbol(func_ref)?;
                    let sym = match ext {
                        None => super::c_entry::symbol(&sym),
                        Some(_) => sym,
                    };
                    return Ok(AddrV {
                        base: BaseV::Sym(sym),
                        index: None,
                        disp,
                    });
                }
                InstructionData::Binary {
                    opcode: Opcode::Iadd,
                    args,
                } => {
                    if let Some(c) = self.iconst(args[1]) {
                        return self.addr_of(args[0], disp + c);
                    }
                    if let Some(c) = self.iconst(args[0]) {
                        return self.addr_of(args[1], disp + c);
                    }
                    // base + index * scale
                    let (bv, iv) =
                        if self.scaled(args[0]).is_some() && self.scaled(args[1]).is_none() {
                            (args[1], args[0])
                        } else {
                            (args[0], args[1])
                        };
                    let (idx_val, scale) = self.scaled(iv).unwrap_or((iv, 1));
                    let mut a = if self.is_lazy(bv) {
                        self.addr_of(bv, disp)?
                    } else {
                        AddrV {
                            base: BaseV::Reg(self.vreg(bv)),
                            index: None,
                            disp,
                        }
                    };
                    if a.index.is_none() && fits(a.disp) {
                        let r = self.reg_of(idx_val)?;
                        a.index = Some((r, scale));
                        return Ok(a);
                    }
                }
                _ => {}
            }
        }
        let r = self.reg_of(v)?;
        Ok(AddrV {
            base: BaseV::Reg(r),
            index: None,
            disp,
        })
    }

    /// `v` as `index * scale` with scale 1, 2, 4 or 8, if it is such a multiplication or shift.
    fn scaled(&self, v: Value) -> Option<(Value, u8)> {
        let i = self.def_inst(v)?;
        match self.f.dfg.insts[i] {
            InstructionData::Binary {
                opcode: Opcode::Imul,
                args,
            } => {
                let c = self.iconst(args[1])?;
                scale_ok(c).map(|s| (args[0], s))
            }
            InstructionData::Binary {
                opcode: Opcode::Ishl,
                args,
            } => {
                let c = self.iconst(args[1])?;
                (0..=3).contains(&c).then(|| (args[0], 1u8 << c))
            }
            _ => None,
        }
    }

    /// Turns an address into an [`Amode`] whose registers are operands of `o`.
    fn amode_ops(&mut self, a: &AddrV, o: &mut Ops) -> Amode {
        let mut disp = a.disp;
        let mut base = match &a.base {
            BaseV::Reg(r) => Base::Reg(o.reg(*r)),
            BaseV::Slot(s) => Base::Slot(*s),
            BaseV::Sym(s) => Base::Sym(s.clone()),
            BaseV::Tls(s) => Base::Tls(s.clone()),
        };
        let index = a.index.map(|(r, s)| (o.reg(r), s));
        if !fits(disp) {
            // Not reachable with C-- objects (all < 2 GiB); keep the address exact anyway.
            disp = 0;
            base = Base::None;
        }
        Amode {
            base,
            index,
            disp: disp as i32,
        }
    }

    /// A new register holding `imm` (`mov`, or `xor` for 0, at width `w`).
    fn imm_vreg(&mut self, imm: i64, w: Width) -> VReg {
        let dst = self.new_vreg(RegClass::Int);
        let mut o = Ops::new();
        let d = o.def(dst);
        self.emit(Kind::MovImm { dst: d, imm, w }, o);
        dst
    }

    /// An address ready for a memory access: disp must fit 32 bits, else it is computed.
    fn mem_addr(&mut self, v: Value, disp: i64) -> R<AddrV> {
        let a = self.addr_of(v, disp)?;
        if fits(a.disp) {
            return Ok(a);
        }
        let r = self.reg_of(v)?;
        let c = self.imm_vreg(disp, Width::B64);
        Ok(AddrV {
            base: BaseV::Reg(r),
            index: Some((c, 1)),
            disp: 0,
        })
    }

    fn global_symbol(&self, gv: ir::GlobalValue) -> R<(String, i64)> {
        match &self.f.global_values[gv] {
            GlobalValueData::Symbol { name, offset, .. } => {
                Ok((self.name_symbol(name)?.0, offset.bits()))
            }
            other => Err(format!("unsupported global value {other}")),
        }
    }

    fn func_symbol(&self, fr: ir::FuncRef) -> R<(String, Option<u32>)> {
        self.name_symbol(&self.f.dfg.ext_funcs[fr].name)
    }

    /// Symbol of an external name; for externs also their index.
    fn name_symbol(&self, name: &ExternalName) -> R<(String, Option<u32>)> {
        let ExternalName::User(r) = name else {
            return Err(format!("unsupported external name {name:?}"));
        };
        let u = &self.f.params.user_named_funcs()[*r];
        match self.p.resolve(u) {
            Some(NameTarget::Function(i)) => {
                Ok((self.p.functions[i as usize].symbol.clone(), None))
            }
            Some(NameTarget::Extern(j)) => Ok((self.p.externs[j as usize].name.clone(), Some(j))),
            Some(NameTarget::Data(d)) => Ok((self.p.data[d as usize].symbol.clone(), None)),
            None => Err(format!("unknown external name {u}")),
        }
    }

    fn lower_params(&mut self, entry: ir::Block) -> R<()> {
        let params: Vec<Value> = self.f.dfg.block_params(entry).to_vec();
        let mut offset = 0u32;
        for v in params {
            let ty = self.ty(v);
            if !self.used.contains(&v) {
                offset += arg_slot_size(ty, self.target);
                continue;
            }
            let dst = self.vreg(v);
            let mem = if ty == types::F64 {
                Mem::F64
            } else if ty == types::I64 {
                Mem::I64
            } else if ty == types::I32 || ty == types::I8 {
                Mem::I32
            } else {
                return Err(format!("unsupported parameter type {ty}"));
            };
            let mut o = Ops::new();
            let d = o.def(dst);
            self.emit(
                Kind::LoadArg {
                    dst: d,
                    offset,
                    mem,
                },
                o,
            );
            offset += arg_slot_size(ty, self.target);
        }
        Ok(())
    }

    fn block_args(&mut self, bc: &ir::BlockCall) -> R<Vec<VReg>> {
        let args: Vec<BlockArg> = bc.args(&self.f.dfg.value_lists).collect();
        let mut out = Vec::new();
        for a in args {
            match a {
                BlockArg::Value(v) => out.push(self.reg_of(v)?),
                other => return Err(format!("unsupported block argument {other}")),
            }
        }
        Ok(out)
    }

    fn lower_inst(&mut self, inst: ir::Inst, vb: Block) -> R<()> {
        let f = self.f;
        let data = f.dfg.insts[inst];
        let op = data.opcode();
        let args: Vec<Value> = f.dfg.inst_args(inst).to_vec();
        let res = f.dfg.inst_results(inst).first().copied();
        let unsupported = |what: &str| Err(format!("unsupported opcode `{op}`{what}"));
        if self.dead.contains(&inst) {
            return Ok(());
        }
        // Lazy values are produced at their uses.
        if let Some(r) = res {
            if self.is_lazy(r) {
                return Ok(());
            }
        }
        match op {
            Opcode::Nop => Ok(()),
            Opcode::Jump => {
                let InstructionData::Jump { destination, .. } = data else {
                    return unreachable_data(op);
                };
                let args = self.block_args(&destination)?;
                let t = self.blocks[&destination.block(&f.dfg.value_lists)];
                let o = Ops::new();
                self.emit(Kind::Jmp { target: t }, o);
                let bd = &mut self.vc.blocks[vb.index()];
                bd.succs.push(t);
                bd.succ_args.push(args);
                Ok(())
            }
            Opcode::Brif => {
                let InstructionData::Brif { arg, blocks, .. } = data else {
                    return unreachable_data(op);
                };
                let c = self.cond_of(arg)?;
                let te = Block::new(vb.index() + 1);
                let fe = Block::new(vb.index() + 2);
                let mut o = Ops::new();
                let kind = match c {
                    CondV::Int { cc, w, a, b } => {
                        let a = o.reg(a);
                        let b = self.rmi_op(b, &mut o);
                        Kind::BrCmp {
                            cc,
                            w,
                            a,
                            b,
                            t: te,
                            f: fe,
                            flags_set: false,
                        }
                    }
                    CondV::Float { cond, a, b } => {
                        let a = o.reg(a);
                        let b = o.any(b);
                        Kind::BrFCmp {
                            cond,
                            a,
                            b,
                            t: te,
                            f: fe,
                        }
                    }
                };
                self.emit(kind, o);
                let bd = &mut self.vc.blocks[vb.index()];
                bd.succs = vec![te, fe];
                bd.succ_args = vec![vec![], vec![]];
                self.vc.blocks[vb.index()].end = self.vc.insts.len() as u32;
                // The two edge blocks: each a jump carrying the block arguments.
                for (k, bc) in blocks.iter().enumerate() {
                    let eb = Block::new(vb.index() + 1 + k);
                    self.vc.blocks[eb.index()].start = self.vc.insts.len() as u32;
                    let args = self.block_args(bc)?;
                    let t = self.blocks[&bc.block(&f.dfg.value_lists)];
                    self.emit(Kind::Jmp { target: t }, Ops::new());
                    let ed = &mut self.vc.blocks[eb.index()];
                    ed.end = self.vc.insts.len() as u32;
                    ed.succs = vec![t];
                    ed.succ_args = vec![args];
                }
                self.block_ended = true;
                Ok(())
            }
            Opcode::Return => {
                let mut o = Ops::new();
                let val = match args.first() {
                    Some(&v) => {
                        let r = self.reg_of(v)?;
                        let p = if self.ty(v).is_float() {
                            regs::xmm(0)
                        } else {
                            regs::gpr(regs::RAX)
                        };
                        Some(o.fixed(r, p))
                    }
                    None => None,
                };
                self.emit(Kind::Ret { val }, o);
                Ok(())
            }
            Opcode::Trap => {
                self.emit(Kind::Trap, Ops::new());
                Ok(())
            }
            Opcode::Iadd | Opcode::Isub | Opcode::Band | Opcode::Bor | Opcode::Bxor => {
                let aop = match op {
                    Opcode::Iadd => AluOp::Add,
                    Opcode::Isub => AluOp::Sub,
                    Opcode::Band => AluOp::And,
                    Opcode::Bor => AluOp::Or,
                    _ => AluOp::Xor,
                };
                let (l, r) = if op != Opcode::Isub && self.iconst(args[0]).is_some() {
                    (args[1], args[0])
                } else {
                    (args[0], args[1])
                };
                let ty = self.ty(res.ok_or("no result")?);
                if ty.is_float() || ty.is_vector() {
                    return unsupported(&format!(" on {ty}"));
                }
                let a = self.reg_of(l)?;
                let b = self.rmi(r)?;
                self.alu(aop, res.unwrap(), a, b)
            }
            Opcode::Imul => {
                let r = res.unwrap();
                let ty = self.ty(r);
                let w = width_of(ty)?;
                let (x, c) = if let Some(c) = self.iconst(args[1]) {
                    (args[0], Some(c))
                } else if let Some(c) = self.iconst(args[0]) {
                    (args[1], Some(c))
                } else {
                    (args[0], None)
                };
                let dst = self.result_vreg(r);
                let mut o = Ops::new();
                match c.and_then(|c| i32::try_from(c).ok()) {
                    Some(imm) => {
                        let src = self.reg_of(x)?;
                        let s = o.any(src);
                        let d = o.def(dst);
                        self.emit(
                            Kind::ImulImm {
                                w,
                                dst: d,
                                src: s,
                                imm,
                            },
                            o,
                        );
                    }
                    None => {
                        let a = self.reg_of(args[0])?;
                        let b = self.reg_of(args[1])?;
                        let a = o.reg(a);
                        let b = o.any(b);
                        let d = o.reuse(dst, a);
                        self.emit(Kind::Imul { w, dst: d, a, b }, o);
                    }
                }
                self.fix_i8(r)
            }
            Opcode::Sdiv | Opcode::Srem | Opcode::Udiv | Opcode::Urem => {
                let r = res.unwrap();
                let ty = self.ty(r);
                if ty == types::I8 {
                    return unsupported(" on i8");
                }
                let w = width_of(ty)?;
                let signed = matches!(op, Opcode::Sdiv | Opcode::Srem);
                let lo = self.reg_of(args[0])?;
                let divisor = self.reg_of(args[1])?;
                let hi = self.new_vreg(RegClass::Int);
                let mut o = Ops::new();
                if signed {
                    let s = o.fixed(lo, regs::gpr(regs::RAX));
                    let d = o.fixed_def(hi, regs::gpr(regs::RDX));
                    self.emit(Kind::SignHi { w, dst: d, src: s }, o);
                } else {
                    let d = o.fixed_def(hi, regs::gpr(regs::RDX));
                    self.emit(Kind::ZeroHi { dst: d }, o);
                }
                let q = self.new_vreg(RegClass::Int);
                let rem = self.new_vreg(RegClass::Int);
                let mut o = Ops::new();
                let lo = o.fixed(lo, regs::gpr(regs::RAX));
                let hi = o.fixed(hi, regs::gpr(regs::RDX));
                let dv = o.reg(divisor);
                let quot = o.fixed_def(q, regs::gpr(regs::RAX));
                let remo = o.fixed_def(rem, regs::gpr(regs::RDX));
                self.emit(
                    Kind::Div {
                        signed,
                        w,
                        lo,
                        hi,
                        divisor: dv,
                        quot,
                        rem: remo,
                    },
                    o,
                );
                let want = if matches!(op, Opcode::Sdiv | Opcode::Udiv) {
                    q
                } else {
                    rem
                };
                self.copy_to(r, want, RegClass::Int);
                Ok(())
            }
            Opcode::Smulhi | Opcode::Umulhi => {
                // From the optimizer's division by a constant.
                let r = res.unwrap();
                let ty = self.ty(r);
                if ty == types::I8 {
                    return unsupported(" on i8");
                }
                let w = width_of(ty)?;
                let a = self.reg_of(args[0])?;
                let b = self.reg_of(args[1])?;
                let lo = self.new_vreg(RegClass::Int);
                let dst = self.vreg(r);
                let mut o = Ops::new();
                let a = o.fixed(a, regs::gpr(regs::RAX));
                let b = o.reg(b);
                let hi = o.fixed_def(dst, regs::gpr(regs::RDX));
                let lo = o.fixed_def(lo, regs::gpr(regs::RAX));
                self.emit(
                    Kind::MulHi {
                        signed: op == Opcode::Smulhi,
                        w,
                        a,
                        b,
                        hi,
                        lo,
                    },
                    o,
                );
                Ok(())
            }
            Opcode::Ishl | Opcode::Sshr | Opcode::Ushr => {
                let r = res.unwrap();
                let ty = self.ty(r);
                if ty == types::I8 {
                    return self.shift_i8(op, &args, r);
                }
                let w = width_of(ty)?;
                let sop = match op {
                    Opcode::Ishl => ShiftOp::Shl,
                    Opcode::Sshr => ShiftOp::Sar,
                    _ => ShiftOp::Shr,
                };
                let amount = self.iconst(args[1]);
                let src = self.reg_of(args[0])?;
                let dst = self.vreg(r);
                let mut o = Ops::new();
                let s = o.reg(src);
                let amt = match amount {
                    Some(c) => Rmi::Imm((c & i64::from(ty.bits() - 1)) as i32),
                    None => {
                        let a = self.reg_of(args[1])?;
                        Rmi::Op(o.fixed(a, regs::gpr(regs::RCX)))
                    }
                };
                let d = o.reuse(dst, s);
                self.emit(
                    Kind::Shift {
                        op: sop,
                        w,
                        dst: d,
                        src: s,
                        amt,
                    },
                    o,
                );
                Ok(())
            }
            Opcode::Ineg | Opcode::Bnot => {
                let r = res.unwrap();
                let w = width_of(self.ty(r))?;
                let src = self.reg_of(args[0])?;
                let dst = self.result_vreg(r);
                let mut o = Ops::new();
                let s = o.reg(src);
                let d = o.reuse(dst, s);
                let k = if op == Opcode::Ineg {
                    Kind::Neg { w, dst: d, src: s }
                } else {
                    Kind::Not { w, dst: d, src: s }
                };
                self.emit(k, o);
                self.fix_i8(r)
            }
            Opcode::Sextend | Opcode::Uextend | Opcode::Ireduce => {
                let r = res.unwrap();
                let to = self.ty(r);
                let from = self.ty(args[0]);
                let src = self.reg_of(args[0])?;
                let dst = self.vreg(r);
                let mut o = Ops::new();
                match (op, from, to) {
                    (Opcode::Sextend, types::I8, types::I32)
                    | (Opcode::Ireduce, types::I64, types::I32) => {
                        let s = o.reg(src);
                        let d = o.reuse(dst, s);
                        self.emit(
                            Kind::Copy {
                                dst: d,
                                src: s,
                                class: RegClass::Int,
                            },
                            o,
                        );
                    }
                    (Opcode::Sextend, types::I8 | types::I32, types::I64) => {
                        let s = o.any(src);
                        let d = o.def(dst);
                        self.emit(Kind::Sext32To64 { dst: d, src: s }, o);
                    }
                    (Opcode::Uextend, types::I32, types::I64) => {
                        let s = o.any(src);
                        let d = o.def(dst);
                        self.emit(Kind::Zext32To64 { dst: d, src: s }, o);
                    }
                    (Opcode::Uextend, types::I8, types::I32 | types::I64) => {
                        let s = o.reg(src);
                        let d = o.reuse(dst, s);
                        self.emit(
                            Kind::Alu {
                                op: AluOp::And,
                                w: Width::B32,
                                dst: d,
                                a: s,
                                b: Rmi::Imm(255),
                            },
                            o,
                        );
                    }
                    (Opcode::Ireduce, types::I32 | types::I64, types::I8) => {
                        let s = o.reg(src);
                        let d = o.reuse(dst, s);
                        self.emit(Kind::Sext8 { dst: d, src: s }, o);
                    }
                    _ => return unsupported(&format!(" from {from} to {to}")),
                }
                Ok(())
            }
            Opcode::Select => {
                let r = res.unwrap();
                let ty = self.ty(r);
                let class = class_of(ty);
                let w = if class == RegClass::Float {
                    Width::B64
                } else {
                    width_of(ty)?
                };
                let c = self.reg_of(args[0])?;
                let t = self.reg_of(args[1])?;
                let fv = self.reg_of(args[2])?;
                let dst = self.vreg(r);
                let mut o = Ops::new();
                let c = o.reg(c);
                let t = o.reg(t);
                let fo = o.reg(fv);
                let d = o.reuse(dst, fo);
                self.emit(
                    Kind::Select {
                        w,
                        c,
                        t,
                        f: fo,
                        dst: d,
                        class,
                    },
                    o,
                );
                Ok(())
            }
            Opcode::Load | Opcode::Sload8 | Opcode::Uload8 => {
                let InstructionData::Load { arg, offset, .. } = data else {
                    return unreachable_data(op);
                };
                let r = res.unwrap();
                let ty = self.ty(r);
                let mem = match (op, ty) {
                    (Opcode::Load, types::I8) | (Opcode::Sload8, _) => Mem::S8,
                    (Opcode::Uload8, _) => Mem::U8,
                    (Opcode::Load, types::I32) => Mem::I32,
                    (Opcode::Load, types::I64) => Mem::I64,
                    (Opcode::Load, types::F64) => Mem::F64,
                    _ => return unsupported(&format!(" of {ty}")),
                };
                let a = self.mem_addr(arg, i64::from(i32::from(offset)))?;
                self.load(mem, r, a)
            }
            Opcode::Store | Opcode::Istore8 => {
                let InstructionData::Store {
                    args: sargs,
                    offset,
                    ..
                } = data
                else {
                    return unreachable_data(op);
                };
                let ty = self.ty(sargs[0]);
                let mem = if op == Opcode::Istore8 {
                    Mem::S8
                } else {
                    mem_of(ty).ok_or_else(|| format!("unsupported opcode `store` of {ty}"))?
                };
                let a = self.mem_addr(sargs[1], i64::from(i32::from(offset)))?;
                self.store(mem, sargs[0], a)
            }
            Opcode::Fadd | Opcode::Fsub | Opcode::Fmul | Opcode::Fdiv => {
                let fop = match op {
                    Opcode::Fadd => FOp::Add,
                    Opcode::Fsub => FOp::Sub,
                    Opcode::Fmul => FOp::Mul,
                    _ => FOp::Div,
                };
                let r = res.unwrap();
                if self.ty(r) != types::F64 {
                    return unsupported(&format!(" on {}", self.ty(r)));
                }
                let a = self.reg_of(args[0])?;
                let b = self.reg_of(args[1])?;
                let dst = self.vreg(r);
                let mut o = Ops::new();
                let a = o.reg(a);
                let b = o.any(b);
                let d = o.reuse(dst, a);
                self.emit(
                    Kind::FAlu {
                        op: fop,
                        dst: d,
                        a,
                        b,
                    },
                    o,
                );
                Ok(())
            }
            Opcode::Fneg => {
                let r = res.unwrap();
                let src = self.reg_of(args[0])?;
                let dst = self.vreg(r);
                let mut o = Ops::new();
                let s = o.reg(src);
                let d = o.reuse(dst, s);
                self.emit(Kind::FNeg { dst: d, src: s }, o);
                Ok(())
            }
            Opcode::FcvtFromSint => {
                let r = res.unwrap();
                let from = self.ty(args[0]);
                let w = width_of(from)?;
                let src = self.reg_of(args[0])?;
                let dst = self.vreg(r);
                let mut o = Ops::new();
                let s = o.any(src);
                let d = o.def(dst);
                self.emit(Kind::CvtI2F { w, dst: d, src: s }, o);
                Ok(())
            }
            Opcode::FcvtToSint | Opcode::FcvtToSintSat => {
                let r = res.unwrap();
                let to = self.ty(r);
                if to == types::I8 {
                    return unsupported(" to i8");
                }
                let w = width_of(to)?;
                let src = self.reg_of(args[0])?;
                let dst = self.vreg(r);
                let mut o = Ops::new();
                if op == Opcode::FcvtToSint {
                    let s = o.any(src);
                    let d = o.def(dst);
                    self.emit(Kind::CvtF2I { w, dst: d, src: s }, o);
                } else {
                    let s = o.reg(src);
                    let d = o.def(dst);
                    let t = self.new_vreg(RegClass::Float);
                    let tmp = o.push(Operand::reg_temp(t));
                    self.emit(
                        Kind::CvtF2ISat {
                            w,
                            dst: d,
                            src: s,
                            tmp,
                        },
                        o,
                    );
                }
                Ok(())
            }
            Opcode::Call => self.lower_call(inst),
            _ => unsupported(""),
        }
    }

    fn alu(&mut self, op: AluOp, r: Value, a: VReg, b: RmiV) -> R<()> {
        let w = width_of(self.ty(r))?;
        let dst = self.result_vreg(r);
        let mut o = Ops::new();
        let a = o.reg(a);
        let b = self.rmi_op(b, &mut o);
        let d = o.reuse(dst, a);
        self.emit(
            Kind::Alu {
                op,
                w,
                dst: d,
                a,
                b,
            },
            o,
        );
        self.fix_i8(r)
    }

    /// The register an instruction computing `r` writes: `r`'s own, or for `i8` results a
    /// temporary that [`Self::fix_i8`] sign-extends into `r`'s register.
    fn result_vreg(&mut self, r: Value) -> VReg {
        if self.ty(r) == types::I8 {
            let t = self.new_vreg(RegClass::Int);
            self.i8_temp = Some(t);
            t
        } else {
            self.vreg(r)
        }
    }

    /// An `i8` shift by a constant (the optimizer narrows `ireduce.i8(imul x, 2^k)` to
    /// `ishl.i8`), done at 32 bits on the sign-extended value: `ushr` first moves the byte to
    /// the top (`shl 24`) so the logical shift brings in zeros above bit 7; the result is then
    /// sign-extended again. A shift by a variable amount never appears on `i8` (C-- shifts
    /// operate on promoted `int`s), so it stays an internal error.
    fn shift_i8(&mut self, op: Opcode, args: &[Value], r: Value) -> R<()> {
        let Some(amount) = self.iconst(args[1]) else {
            return Err(format!(
                "unsupported opcode '{op}' on i8 by a variable amount"
            ));
        };
        let amount = (amount & 7) as i32;
        let steps: &[(ShiftOp, i32)] = match op {
            Opcode::Ishl => &[(ShiftOp::Shl, amount)],
            Opcode::Sshr => &[(ShiftOp::Sar, amount)],
            _ => &[(ShiftOp::Shl, 24), (ShiftOp::Shr, 24 + amount)],
        };
        let mut src = self.reg_of(args[0])?;
        let dst = self.result_vreg(r);
        for (i, &(sop, by)) in steps.iter().enumerate() {
            let out = if i + 1 == steps.len() {
                dst
            } else {
                self.new_vreg(RegClass::Int)
            };
            let mut o = Ops::new();
            let s = o.reg(src);
            let d = o.reuse(out, s);
            self.emit(
                Kind::Shift {
                    op: sop,
                    w: Width::B32,
                    dst: d,
                    src: s,
                    amt: Rmi::Imm(by),
                },
                o,
            );
            src = out;
        }
        self.fix_i8(r)
    }

    /// Restores the invariant that an `i8` value is sign-extended in its 32-bit register.
    fn fix_i8(&mut self, r: Value) -> R<()> {
        let Some(t) = self.i8_temp.take() else {
            return Ok(());
        };
        let dst = self.vreg(r);
        let mut o = Ops::new();
        let s = o.reg(t);
        let d = o.reuse(dst, s);
        self.emit(Kind::Sext8 { dst: d, src: s }, o);
        Ok(())
    }

    /// Makes `r`'s vreg a copy of `src`.
    fn copy_to(&mut self, r: Value, src: VReg, class: RegClass) {
        let dst = self.vreg(r);
        let mut o = Ops::new();
        let s = o.reg(src);
        let d = o.reuse(dst, s);
        self.emit(
            Kind::Copy {
                dst: d,
                src: s,
                class,
            },
            o,
        );
    }

    fn load(&mut self, mem: Mem, r: Value, a: AddrV) -> R<()> {
        let dst = self.vreg(r);
        let mut o = Ops::new();
        let addr = self.amode_ops(&a, &mut o);
        let d = o.def(dst);
        self.emit(Kind::Load { mem, dst: d, addr }, o);
        Ok(())
    }

    fn store(&mut self, mem: Mem, v: Value, a: AddrV) -> R<()> {
        if mem != Mem::F64 {
            if let Some(c) = self.iconst(v) {
                if let Ok(imm) = i32::try_from(c) {
                    let mut o = Ops::new();
                    let addr = self.amode_ops(&a, &mut o);
                    self.emit(Kind::StoreImm { mem, imm, addr }, o);
                    return Ok(());
                }
            }
        }
        let src = self.reg_of(v)?;
        let mut o = Ops::new();
        let addr = self.amode_ops(&a, &mut o);
        let s = match (mem, self.byte_limit) {
            (Mem::S8 | Mem::U8, Some(n)) => o.limited(src, n, OperandKind::Use, OperandPos::Early),
            _ => o.reg(src),
        };
        self.emit(Kind::Store { mem, src: s, addr }, o);
        Ok(())
    }

    fn lower_call(&mut self, inst: ir::Inst) -> R<()> {
        let f = self.f;
        let InstructionData::Call { func_ref, .. } = f.dfg.insts[inst] else {
            return Err("malformed call".into());
        };
        let (symbol, ext) = self.func_symbol(func_ref)?;
        let args: Vec<Value> = f.dfg.inst_args(inst).to_vec();
        let res = f.dfg.inst_results(inst).first().copied();
        let sig = &f.dfg.signatures[f.dfg.ext_funcs[func_ref].signature];
        let ret_ty = sig.returns.first().map(|p| p.value_type);
        let external = ext.is_some();
        let variadic = ext.is_some_and(|j| self.p.externs[j as usize].variadic);
        // Materialise arguments first (they may emit instructions).
        let mut vals = Vec::new();
        for &a in &args {
            let ty = self.ty(a);
            let widen =
                external && self.target == Target::X86_64 && (ty == types::I32 || ty == types::I8);
            if let (true, Some(imm)) = (widen, self.iconst(a)) {
                // A constant goes into the 64-bit register already extended (`iconst` gives it
                // sign-extended from its type): one `mov`, not a `mov` and a `movsxd`.
                vals.push((self.imm_vreg(imm, Width::B64), ty));
                continue;
            }
            let mut r = self.reg_of(a)?;
            if widen {
                // C int parameters are read as 64-bit values by size_t callees (malloc).
                let n = self.new_vreg(RegClass::Int);
                let mut o = Ops::new();
                let s = o.any(r);
                let d = o.def(n);
                self.emit(Kind::Sext32To64 { dst: d, src: s }, o);
                r = n;
            }
            vals.push((r, ty));
        }
        let mut o = Ops::new();
        let mut stack_args = Vec::new();
        let mut vec_regs = 0u8;
        if external && self.target == Target::X86_64 {
            let mut ni = 0;
            for &(r, ty) in &vals {
                if ty.is_float() {
                    if vec_regs < 8 {
                        o.fixed(r, regs::xmm(vec_regs));
                        vec_regs += 1;
                    } else {
                        stack_args.push(StackArg {
                            op: o.any(r),
                            kind: ArgKind::F64,
                        });
                    }
                } else if ni < 6 {
                    o.fixed(r, regs::gpr(regs::SYSV_INT_ARGS[ni]));
                    ni += 1;
                } else {
                    stack_args.push(StackArg {
                        op: o.any(r),
                        kind: ArgKind::Int(Width::B64),
                    });
                }
            }
        } else {
            for &(r, ty) in &vals {
                let kind = if ty.is_float() {
                    ArgKind::F64
                } else {
                    ArgKind::Int(width_of(ty).unwrap_or(Width::B32))
                };
                let kind = match (kind, self.target) {
                    (ArgKind::Int(_), Target::X86_64) => ArgKind::Int(Width::B64),
                    (k, _) => k,
                };
                stack_args.push(StackArg { op: o.any(r), kind });
            }
        }
        // The preemption poll's call saves what C may overwrite itself (see `CallInfo`).
        let saves_all = external && symbol == crate::lower::PREEMPT_POINT && res.is_none();
        let mut clobbers = if saves_all {
            regalloc2::PRegSet::empty()
        } else if external {
            regs::c_caller_saved(self.target)
        } else {
            let mut set = self.all_regs;
            if let (users, Some(own)) = self.spare_users {
                if users.contains(&symbol) {
                    set.add(own);
                }
            }
            set
        };
        let mut ret = None;
        let x87_ret = external && self.target == Target::I686 && ret_ty == Some(types::F64);
        if let (Some(r), Some(ty)) = (res, ret_ty) {
            let preg = if ty.is_float() {
                regs::xmm(0)
            } else {
                regs::gpr(regs::RAX)
            };
            clobbers.remove(preg);
            let dst = self.vreg(r);
            let d = o.fixed_def(dst, preg);
            let kind = if ty.is_float() {
                RetKind::F64
            } else if ty == types::I8 && external {
                RetKind::Char
            } else {
                RetKind::Int
            };
            ret = Some((d, kind));
        }
        let race_read = match (symbol == crate::race::READ_ENTRY, &args[..]) {
            (true, &[_, size, site]) => match (self.iconst(size), self.iconst(site)) {
                (Some(n @ 1..=8), Some(s)) => i32::try_from(s).ok().map(|s| (n as u32, s)),
                _ => None,
            },
            _ => None,
        };
        let info = CallInfo {
            race_read,
            symbol,
            external,
            stack_args,
            variadic_vec_regs: (variadic && self.target == Target::X86_64).then_some(vec_regs),
            ret,
            x87_ret,
            saves_all,
        };
        self.emit_clob(Kind::Call(Box::new(info)), o, clobbers);
        Ok(())
    }
}

/// What a compare-and-branch compares: width, first operand, second operand (register or
/// immediate), all by virtual register (SSA: the same vregs hold the same values everywhere).
type CmpKey = (Width, VReg, Result<VReg, i32>);

fn cmp_key(inst: &Inst) -> Option<CmpKey> {
    let Kind::BrCmp { w, a, b, .. } = inst.kind else {
        return None;
    };
    let b = match b {
        Rmi::Op(o) => Ok(inst.ops[o as usize].vreg()),
        Rmi::Imm(i) => Err(i),
    };
    Some((w, inst.ops[a as usize].vreg(), b))
}

/// Marks compare-and-branches whose comparison is already in the flags: a block that starts
/// with `cmp a, b; jcc` and is reached only from a branch on the same `cmp a, b` (through edge
/// blocks that hold nothing but a jump). Between the two, the only code is the register
/// allocator's moves, and `mov` leaves the flags alone. E.g. `if (x == n->v) ... else if (x <
/// n->v)` compares once.
fn mark_flag_reuse(vc: &mut VCode) {
    // The comparison in the flags at the end of block `b`, if known.
    fn at_end(vc: &VCode, b: Block, depth: u32) -> Option<CmpKey> {
        let bd = &vc.blocks[b.index()];
        let insts = &vc.insts[bd.start as usize..bd.end as usize];
        match insts {
            [.., last] if cmp_key(last).is_some() => cmp_key(last),
            [only] if matches!(only.kind, Kind::Jmp { .. }) && depth < 4 => {
                at_entry(vc, b, depth + 1)
            }
            _ => None,
        }
    }
    fn at_entry(vc: &VCode, b: Block, depth: u32) -> Option<CmpKey> {
        match vc.blocks[b.index()].preds[..] {
            [p] => at_end(vc, p, depth),
            _ => None,
        }
    }
    for b in 0..vc.blocks.len() {
        let start = vc.blocks[b].start as usize;
        if start >= vc.blocks[b].end as usize {
            continue;
        }
        let Some(key) = cmp_key(&vc.insts[start]) else {
            continue;
        };
        if at_entry(vc, Block::new(b), 0) == Some(key) {
            if let Kind::BrCmp { flags_set, .. } = &mut vc.insts[start].kind {
                *flags_set = true;
            }
        }
    }
}

fn unreachable_data<T>(op: Opcode) -> R<T> {
    Err(format!("malformed instruction data for `{op}`"))
}

/// Whether a VCode instruction may be dropped when its definitions are unused.
fn removable(k: &Kind) -> bool {
    !matches!(
        k,
        Kind::Call(_)
            | Kind::Store { .. }
            | Kind::StoreImm { .. }
            | Kind::Jmp { .. }
            | Kind::BrCmp { .. }
            | Kind::BrFCmp { .. }
            | Kind::Ret { .. }
            | Kind::Trap
            | Kind::Div { .. }
    )
}

/// Whether an instruction may be dropped when its results are unused.
fn is_pure(op: Opcode) -> bool {
    !(op.is_call()
        || op.is_branch()
        || op.is_terminator()
        || op.can_store()
        || op.can_trap()
        || op.other_side_effects()
        || op.can_load())
        || op == Opcode::Load
}

/// The negation of a condition (for floats: unordered operands make the negation true).
fn invert(c: CondV) -> CondV {
    match c {
        CondV::Int { cc, w, a, b } => CondV::Int {
            cc: cc.invert(),
            w,
            a,
            b,
        },
        CondV::Float { cond, a, b } => {
            let cond = match cond {
                FCond::Eq => FCond::Ne,
                FCond::Ne => FCond::Eq,
                FCond::Simple(cc) => FCond::Simple(cc.invert()),
            };
            CondV::Float { cond, a, b }
        }
    }
}

fn fits(d: i64) -> bool {
    i32::try_from(d).is_ok()
}

fn scale_ok(c: i64) -> Option<u8> {
    match c {
        1 | 2 | 4 | 8 => Some(c as u8),
        _ => None,
    }
}

fn mem_of(ty: ir::Type) -> Option<Mem> {
    match ty {
        types::I8 => Some(Mem::S8),
        types::I32 => Some(Mem::I32),
        types::I64 => Some(Mem::I64),
        types::F64 => Some(Mem::F64),
        _ => None,
    }
}

fn int_cc(c: IntCC) -> Cc {
    match c {
        IntCC::Equal => Cc::E,
        IntCC::NotEqual => Cc::Ne,
        IntCC::SignedLessThan => Cc::L,
        IntCC::SignedLessThanOrEqual => Cc::Le,
        IntCC::SignedGreaterThan => Cc::G,
        IntCC::SignedGreaterThanOrEqual => Cc::Ge,
        IntCC::UnsignedLessThan => Cc::B,
        IntCC::UnsignedLessThanOrEqual => Cc::Be,
        IntCC::UnsignedGreaterThan => Cc::A,
        IntCC::UnsignedGreaterThanOrEqual => Cc::Ae,
    }
}

/// The flag test after `ucomisd a, b` for a Cranelift float condition; `true` = swap a and b.
fn float_cond(c: FloatCC) -> (FCond, bool) {
    use FloatCC::*;
    match c {
        Equal => (FCond::Eq, false),
        NotEqual => (FCond::Ne, false),
        Ordered => (FCond::Simple(Cc::Np), false),
        Unordered => (FCond::Simple(Cc::P), false),
        OrderedNotEqual => (FCond::Simple(Cc::Ne), false),
        UnorderedOrEqual => (FCond::Simple(Cc::E), false),
        GreaterThan => (FCond::Simple(Cc::A), false),
        GreaterThanOrEqual => (FCond::Simple(Cc::Ae), false),
        LessThan => (FCond::Simple(Cc::A), true),
        LessThanOrEqual => (FCond::Simple(Cc::Ae), true),
        UnorderedOrLessThan => (FCond::Simple(Cc::B), false),
        UnorderedOrLessThanOrEqual => (FCond::Simple(Cc::Be), false),
        UnorderedOrGreaterThan => (FCond::Simple(Cc::B), true),
        UnorderedOrGreaterThanOrEqual => (FCond::Simple(Cc::Be), true),
    }
}
