//! VCode: x86 machine instructions over virtual registers, the input of regalloc2.
//!
//! Every instruction keeps its regalloc2 [`Operand`]s in a list; its fields refer to operands by
//! position ([`Op`]), so the printer reads each operand's [`regalloc2::Allocation`] at the same
//! index without a second, mirrored traversal. Blocks are Cranelift's blocks plus one edge block
//! per successor of every two-way branch (so no critical edge reaches the allocator).

use regalloc2::{Block, Inst as RInst, InstRange, Operand, PRegSet, RegClass, VReg};

use super::regs::Width;

/// Index of an operand in its instruction's operand list.
pub type Op = u8;

/// Integer condition codes (x86 `setcc`/`jcc` suffixes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cc {
    E,
    Ne,
    L,
    Le,
    G,
    Ge,
    B,
    Be,
    A,
    Ae,
    P,
    Np,
}

impl Cc {
    pub fn suffix(self) -> &'static str {
        match self {
            Cc::E => "e",
            Cc::Ne => "ne",
            Cc::L => "l",
            Cc::Le => "le",
            Cc::G => "g",
            Cc::Ge => "ge",
            Cc::B => "b",
            Cc::Be => "be",
            Cc::A => "a",
            Cc::Ae => "ae",
            Cc::P => "p",
            Cc::Np => "np",
        }
    }
    pub fn invert(self) -> Cc {
        match self {
            Cc::E => Cc::Ne,
            Cc::Ne => Cc::E,
            Cc::L => Cc::Ge,
            Cc::Le => Cc::G,
            Cc::G => Cc::Le,
            Cc::Ge => Cc::L,
            Cc::B => Cc::Ae,
            Cc::Be => Cc::A,
            Cc::A => Cc::Be,
            Cc::Ae => Cc::B,
            Cc::P => Cc::Np,
            Cc::Np => Cc::P,
        }
    }
}

/// A floating-point condition after `ucomisd a, b` (operands possibly swapped by isel).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FCond {
    /// Ordered and equal: ZF=1 and PF=0.
    Eq,
    /// Unordered or not equal: ZF=0 or PF=1.
    Ne,
    /// A single flag test (`a`, `ae`, `b`, `be`, `p`, `np`, `e`, `ne`).
    Simple(Cc),
}

/// Two-operand integer ALU operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AluOp {
    Add,
    Sub,
    And,
    Or,
    Xor,
}

impl AluOp {
    pub fn mnemonic(self) -> &'static str {
        match self {
            AluOp::Add => "add",
            AluOp::Sub => "sub",
            AluOp::And => "and",
            AluOp::Or => "or",
            AluOp::Xor => "xor",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShiftOp {
    Shl,
    Sar,
    Shr,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FOp {
    Add,
    Sub,
    Mul,
    Div,
}

/// The second source of an integer instruction: an operand (register or spill slot) or an
/// immediate that fits a sign-extended 32-bit field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rmi {
    Op(Op),
    Imm(i32),
}

/// The base of an address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Base {
    None,
    Reg(Op),
    /// Offset of a Cranelift stack slot within the frame (resolved when the frame is known).
    Slot(u32),
    /// A symbol's absolute address (`-no-pie`).
    Sym(String),
    /// A thread-local symbol defined in the executable (the runtime's), local-exec:
    /// `fs:[sym@tpoff]` on x86-64, `gs:[sym@ntpoff]` on i686. Only in a load or store, without
    /// an index: `lea` ignores the segment.
    Tls(String),
}

/// `base + index * scale + disp`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Amode {
    pub base: Base,
    pub index: Option<(Op, u8)>,
    pub disp: i32,
}

/// What a memory access reads or writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mem {
    /// Byte, sign-extended to 32 bits on load.
    S8,
    /// Byte, zero-extended on load.
    U8,
    I32,
    I64,
    F64,
}

/// How a call argument is passed on the stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgKind {
    /// An integer or pointer slot of the given register width.
    Int(Width),
    F64,
}

/// One argument pushed on the stack by a call sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StackArg {
    pub op: Op,
    pub kind: ArgKind,
}

/// The kind of a call: to a C-- function (the mechanism's sequence) or to a C function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallInfo {
    pub symbol: String,
    /// Calls a C function through the target's C ABI.
    pub external: bool,
    /// Stack arguments in source order (pushed right to left).
    pub stack_args: Vec<StackArg>,
    /// For C calls on x86-64 to variadic functions: the value of `al`.
    pub variadic_vec_regs: Option<u8>,
    /// The return value operand and whether it is a double (`None`: no value used).
    pub ret: Option<(Op, RetKind)>,
    /// The C function returns a double on i686 (in `st0`, which must be popped even if unused).
    pub x87_ret: bool,
    /// The call clobbers no register: the printed sequence saves the C ABI's caller-saved
    /// registers before it and restores them after (the loop heads' preemption poll, whose
    /// call is taken about once a time slice: the loop's values stay in their registers).
    pub saves_all: bool,
    /// A `--race` read entry's call with its constant size and site: the printer settles the
    /// read inline first when the thread's filter covers it (`crate::race`, module docs).
    pub race_read: Option<(u32, i32)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetKind {
    Int,
    /// A `char` returned by a C function: sign-extend `al`.
    Char,
    F64,
}

/// One machine instruction (or a short fixed sequence) over operands.
#[derive(Clone, Debug, PartialEq)]
pub enum Kind {
    /// Loads incoming argument slot at byte `offset` from the first argument.
    LoadArg {
        dst: Op,
        offset: u32,
        mem: Mem,
    },
    MovImm {
        dst: Op,
        imm: i64,
        w: Width,
    },
    /// `dst = 0.0`.
    ZeroF64 {
        dst: Op,
    },
    /// `dst = ` the double with these bits (from the function's constant pool).
    LoadConstF64 {
        dst: Op,
        bits: u64,
    },
    /// `dst = src` where `dst` reuses `src`'s register (no code unless they differ).
    Copy {
        dst: Op,
        src: Op,
        class: RegClass,
    },
    Alu {
        op: AluOp,
        w: Width,
        dst: Op,
        a: Op,
        b: Rmi,
    },
    Imul {
        w: Width,
        dst: Op,
        a: Op,
        b: Op,
    },
    ImulImm {
        w: Width,
        dst: Op,
        src: Op,
        imm: i32,
    },
    Neg {
        w: Width,
        dst: Op,
        src: Op,
    },
    Not {
        w: Width,
        dst: Op,
        src: Op,
    },
    /// Shift; `amt` is an operand fixed in `ecx` or an immediate.
    Shift {
        op: ShiftOp,
        w: Width,
        dst: Op,
        src: Op,
        amt: Rmi,
    },
    /// Sign-extends the low byte of `src` into `dst` (reusing its register).
    Sext8 {
        dst: Op,
        src: Op,
    },
    /// `movsxd dst64, src32` (x86-64).
    Sext32To64 {
        dst: Op,
        src: Op,
    },
    /// `mov dst32, src32`: zero-extends to 64 bits.
    Zext32To64 {
        dst: Op,
        src: Op,
    },
    /// `cdq`/`cqo`: `dst` (fixed edx) = sign of `src` (fixed eax).
    SignHi {
        w: Width,
        dst: Op,
        src: Op,
    },
    /// `xor dst, dst` for the high half of an unsigned division.
    ZeroHi {
        dst: Op,
    },
    Div {
        signed: bool,
        w: Width,
        lo: Op,
        hi: Op,
        divisor: Op,
        quot: Op,
        rem: Op,
    },
    /// `imul b` / `mul b`: the high half of `a` (fixed eax) times `b` into `hi` (fixed edx);
    /// `lo` (fixed eax) is the low half, unused.
    MulHi {
        signed: bool,
        w: Width,
        a: Op,
        b: Op,
        hi: Op,
        lo: Op,
    },
    /// `cmp a, b; setcc dst8; movzx dst, dst8`.
    Setcc {
        cc: Cc,
        w: Width,
        a: Op,
        b: Rmi,
        dst: Op,
    },
    /// `ucomisd a, b` and materialise `cond` as 0/1 into `dst`; `tmp` is a byte register.
    FSetcc {
        cond: FCond,
        a: Op,
        b: Op,
        dst: Op,
        tmp: Op,
    },
    /// `test c, c; dst = c != 0 ? t : f` (`dst` reuses `f`).
    Select {
        w: Width,
        c: Op,
        t: Op,
        f: Op,
        dst: Op,
        class: RegClass,
    },
    Load {
        mem: Mem,
        dst: Op,
        addr: Amode,
    },
    Store {
        mem: Mem,
        src: Op,
        addr: Amode,
    },
    StoreImm {
        mem: Mem,
        imm: i32,
        addr: Amode,
    },
    Lea {
        w: Width,
        dst: Op,
        addr: Amode,
    },
    FAlu {
        op: FOp,
        dst: Op,
        a: Op,
        b: Op,
    },
    FNeg {
        dst: Op,
        src: Op,
    },
    CvtI2F {
        w: Width,
        dst: Op,
        src: Op,
    },
    /// Saturating truncation (`fcvt_to_sint_sat`): NaN → 0, overflow saturates.
    CvtF2ISat {
        w: Width,
        dst: Op,
        src: Op,
        tmp: Op,
    },
    /// Truncation whose out-of-range result is x86's "integer indefinite" (`fcvt_to_sint`).
    CvtF2I {
        w: Width,
        dst: Op,
        src: Op,
    },
    Jmp {
        target: Block,
    },
    /// `cmp a, b; jcc t; jmp f`.
    BrCmp {
        cc: Cc,
        w: Width,
        a: Op,
        b: Rmi,
        t: Block,
        f: Block,
        /// The flags already hold `cmp a, b` (see `isel::mark_flag_reuse`): no `cmp` is printed.
        flags_set: bool,
    },
    /// `ucomisd a, b; j<cond> t; jmp f`.
    BrFCmp {
        cond: FCond,
        a: Op,
        b: Op,
        t: Block,
        f: Block,
    },
    Call(Box<CallInfo>),
    Ret {
        val: Option<Op>,
    },
    Trap,
}

#[derive(Clone, Debug)]
pub struct Inst {
    pub kind: Kind,
    pub ops: Vec<Operand>,
    pub clobbers: PRegSet,
}

#[derive(Clone, Debug, Default)]
pub struct BlockData {
    pub start: u32,
    pub end: u32,
    pub succs: Vec<Block>,
    pub preds: Vec<Block>,
    pub params: Vec<VReg>,
    /// Outgoing block arguments, one list per successor.
    pub succ_args: Vec<Vec<VReg>>,
}

/// A function's VCode.
#[derive(Clone, Debug, Default)]
pub struct VCode {
    pub insts: Vec<Inst>,
    pub blocks: Vec<BlockData>,
    pub num_vregs: usize,
}

impl regalloc2::Function for VCode {
    fn num_insts(&self) -> usize {
        self.insts.len()
    }
    fn num_blocks(&self) -> usize {
        self.blocks.len()
    }
    fn entry_block(&self) -> Block {
        Block::new(0)
    }
    fn block_insns(&self, block: Block) -> InstRange {
        let b = &self.blocks[block.index()];
        InstRange::new(RInst::new(b.start as usize), RInst::new(b.end as usize))
    }
    fn block_succs(&self, block: Block) -> &[Block] {
        &self.blocks[block.index()].succs
    }
    fn block_preds(&self, block: Block) -> &[Block] {
        &self.blocks[block.index()].preds
    }
    fn block_params(&self, block: Block) -> &[VReg] {
        &self.blocks[block.index()].params
    }
    fn is_ret(&self, insn: RInst) -> bool {
        matches!(self.insts[insn.index()].kind, Kind::Ret { .. } | Kind::Trap)
    }
    fn is_branch(&self, insn: RInst) -> bool {
        matches!(
            self.insts[insn.index()].kind,
            Kind::Jmp { .. } | Kind::BrCmp { .. } | Kind::BrFCmp { .. }
        )
    }
    fn branch_blockparams(&self, block: Block, _insn: RInst, succ_idx: usize) -> &[VReg] {
        &self.blocks[block.index()].succ_args[succ_idx]
    }
    fn inst_operands(&self, insn: RInst) -> &[Operand] {
        &self.insts[insn.index()].ops
    }
    fn inst_clobbers(&self, insn: RInst) -> PRegSet {
        self.insts[insn.index()].clobbers
    }
    fn num_vregs(&self) -> usize {
        self.num_vregs
    }
    fn spillslot_size(&self, _regclass: RegClass) -> usize {
        // Every spill slot is 8 bytes: enough for a double, a pointer or an int.
        1
    }
}
