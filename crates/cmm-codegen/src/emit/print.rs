//! Register allocation with regalloc2, frame layout and assembly printing of one function.
//!
//! Frame (higher addresses up; see `ARCHITECTURE.md`, "Emission stage"):
//!
//! ```text
//!   | incoming args, return address (placement per mechanism) |
//!   +---------------------------------------------------------+ <- esp at entry
//!   | padding (keeps the body's esp 16-byte aligned; 8 under   |
//!   | heap on i686, [`Mechanism::frame_align`])                |
//!   | Cranelift stack slots (address-taken locals, arrays)     | <- esp + spill_bytes
//!   | regalloc2 spill slots, 8 bytes each                      | <- esp
//!   +---------------------------------------------------------+
//! ```
//!
//! Inside a call sequence the pushes move `esp`; the printer tracks the pushed bytes (`depth`)
//! and adds them to every stack-relative address it prints.

use std::fmt::Write;

use regalloc2::{
    Allocation, Block, Function as _, InstOrEdit, MachineEnv, PReg, PRegSet, RegClass,
    RegallocOptions,
};

use super::isel::{arg_slot_size, stack_slots_size};
use super::mech::{CallSite, FrameInfo, Mechanism};
use super::regs::{self, Width};
use super::vcode::*;
use super::Target;
use crate::lower::LoweredProgram;

type R<T> = Result<T, String>;

/// The printed text of one function.
pub struct Printed {
    pub text: String,
    /// Constant-pool entries, placed in `.rodata`.
    pub rodata: String,
    /// The value of the function's frame-size cell (`stacksizeof`): everything one activation
    /// occupies on the stack, i.e. arguments, return address and frame.
    pub frame_size: u32,
}

/// The regalloc2 environment of a target under a mechanism, for a function of convention
/// `conv`.
pub fn machine_env(target: Target, mech: &dyn Mechanism, conv: regs::Convention) -> MachineEnv {
    let reserved = mech.reserved_regs(target);
    let mut gprs = PRegSet::empty();
    let mut saved = PRegSet::empty();
    for g in regs::allocatable_gprs(target) {
        let r = regs::gpr(g);
        if reserved.contains(&r) {
            continue;
        }
        if conv.preserved.contains(&g) {
            saved.add(r);
        } else {
            gprs.add(r);
        }
    }
    let mut xmms = PRegSet::empty();
    for x in 0..regs::num_xmms(target) {
        xmms.add(regs::xmm(x));
    }
    MachineEnv {
        preferred_regs_by_class: [gprs, xmms, PRegSet::empty()],
        // Preserved registers cost a save and a restore: used when the others run out, e.g.
        // for values live across calls.
        non_preferred_regs_by_class: [saved, PRegSet::empty(), PRegSet::empty()],
        scratch_by_class: [None, None, None],
        fixed_stack_slots: Vec::new(),
    }
}

struct Printer<'a> {
    target: Target,
    mech: &'a dyn Mechanism,
    fi: usize,
    out: String,
    rodata: String,
    /// Bytes pushed since the body's stack pointer (inside call sequences).
    depth: u32,
    /// Inside a call sequence of a mechanism with a call base register
    /// ([`Mechanism::call_base`]): that register and the pushed bytes when it took the SP.
    /// Spill slots read by the pushes are then addressed from it.
    base: Option<(&'static str, u32)>,
    /// Bytes at the bottom of the frame the mechanism owns ([`Mechanism::frame_bottom`]).
    bottom: u32,
    spill_bytes: u32,
    frame: FrameInfo<'a>,
    /// Offset of the first incoming argument from the body's stack pointer.
    args_at: u32,
    labels: u32,
    consts: Vec<u64>,
    /// Preserved registers the function uses and their save slots (offsets from esp).
    saved: Vec<(PReg, u32)>,
    /// Per block: it is a lone return (no moves), so a jump to it becomes the return itself.
    ret_only: Vec<bool>,
    /// Per block: it is a lone compare-and-branch (no moves) with its allocations, so a jump to
    /// it becomes a copy of the compare-and-branch (a loop's back edge then tests the condition
    /// at the bottom and falls out of the loop).
    branch_only: Vec<Option<(Kind, Vec<Allocation>)>>,
    /// Green threads: C calls are counted in the runtime's thread-local [`CCALLS_SYMBOL`]
    /// (started before, finished after), so its monitor can hand off a worker whose thread is
    /// inside one C call for long.
    count_ccalls: bool,
    /// Green threads: the printed ranges asynchronous preemption must not interrupt (begin and
    /// end labels, see [`Printer::no_preempt_since`]), and the count of such labels.
    no_preempt: Option<Vec<(String, String)>>,
    np_labels: u32,
}

/// Register allocation of a function (`vc`) of convention `conv`, with the spare pass
/// ([`super::rename`]). Returns the allocation and the preserved registers the function must
/// save: those it writes, and those a call it makes clobbers (a call to a spare user clobbers
/// `edi`, which a function of the program's convention preserves).
pub fn allocate(
    vc: &VCode,
    target: Target,
    mech: &dyn Mechanism,
    conv: regs::Convention,
) -> R<(regalloc2::Output, Vec<PReg>)> {
    let env = machine_env(target, mech, conv);
    let opts = RegallocOptions {
        verbose_log: false,
        validate_ssa: cfg!(debug_assertions),
        ..Default::default()
    };
    let mut ra =
        regalloc2::run(vc, &env, &opts).map_err(|e| format!("register allocation: {e:?}"))?;
    let preserved = conv.preserved;
    if let Some(spare) = conv.spare {
        super::rename::to_spare(vc, &mut ra, target, preserved, spare);
    }
    let mut saved: Vec<PReg> = Vec::new();
    let mut note = |r: PReg| {
        if r.class() == RegClass::Int
            && preserved.contains(&(r.hw_enc() as u8))
            && !saved.contains(&r)
        {
            saved.push(r);
        }
    };
    for a in &ra.allocs {
        if let Some(r) = a.as_reg() {
            note(r);
        }
    }
    for (_, regalloc2::Edit::Move { to, .. }) in &ra.edits {
        if let Some(r) = to.as_reg() {
            note(r);
        }
    }
    for inst in &vc.insts {
        for &g in preserved {
            if inst.clobbers.contains(regs::gpr(g)) {
                note(regs::gpr(g));
            }
        }
    }
    saved.sort_by_key(|r| r.hw_enc());
    Ok((ra, saved))
}

/// Allocates registers for `vc` and prints function `index` of `p`, of convention `conv`.
pub fn print_function(
    p: &LoweredProgram,
    index: usize,
    vc: &VCode,
    target: Target,
    mech: &dyn Mechanism,
    conv: regs::Convention,
) -> R<Printed> {
    let lf = &p.functions[index];
    // Preserved registers are saved after the prologue and restored before each epilogue.
    let (ra, saved) = allocate(vc, target, mech, conv)?;

    // Frame layout.
    let bottom = mech.frame_bottom(target);
    let align = mech.frame_align(target);
    let spill_bytes = (ra.num_spillslots as u32 * 8).div_ceil(align) * align;
    let slots_end = spill_bytes + stack_slots_size(&lf.func).div_ceil(8) * 8;
    let content = bottom + slots_end + target.slot() * saved.len() as u32;
    let arg_bytes: u32 = lf
        .func
        .signature
        .params
        .iter()
        .map(|a| arg_slot_size(a.value_type, target))
        .sum();
    let overhead = mech.call_overhead(target);
    let pushed = arg_bytes + overhead;
    let frame_size = (content + pushed).div_ceil(align) * align - pushed;
    let frame = FrameInfo {
        target,
        symbol: &lf.symbol,
        frame_size,
        arg_bytes,
    };
    let mut pr = Printer {
        target,
        mech,
        fi: index,
        out: String::new(),
        rodata: String::new(),
        depth: 0,
        base: None,
        bottom,
        spill_bytes,
        frame,
        args_at: frame_size + mech.entry_arg_offset(target),
        labels: 0,
        consts: Vec::new(),
        saved: saved
            .iter()
            .enumerate()
            .map(|(i, r)| (*r, bottom + slots_end + target.slot() * i as u32))
            .collect(),
        ret_only: Vec::new(),
        branch_only: Vec::new(),
        count_ccalls: crate::lower::is_green_threads(p),
        no_preempt: crate::lower::is_green_threads(p).then(Vec::new),
        np_labels: 0,
    };
    for b in 0..vc.num_blocks() {
        let items: Vec<_> = ra.block_insts_and_edits(vc, Block::new(b)).collect();
        let single = match items[..] {
            [InstOrEdit::Inst(i)] => Some(i),
            _ => None,
        };
        let kind = single.map(|i| &vc.insts[i.index()].kind);
        pr.ret_only.push(matches!(kind, Some(Kind::Ret { .. })));
        pr.branch_only.push(match (single, kind) {
            (
                Some(i),
                Some(
                    k @ Kind::BrCmp {
                        flags_set: false, ..
                    },
                ),
            ) => Some((k.clone(), ra.inst_allocs(i).to_vec())),
            _ => None,
        });
    }
    let _ = writeln!(
        pr.out,
        "\n# C-- function `{}`: frame {} bytes, {} bytes of arguments, {} spill slots",
        lf.name, frame_size, arg_bytes, ra.num_spillslots
    );
    // The 4 bytes before the entry hold the bytes of arguments the function expects: the
    // runtime's entry trampolines read them to push the right number of arguments. The 4
    // before those hold the mechanism's stack-need word, if it has one (the runtime reads it
    // to size a root's first chunk); padding otherwise, so the entry stays 16-byte aligned.
    // A copy of an unrolled recursion is reached only from its ring ([`crate::unroll`]).
    if lf.copy_of.is_none() {
        let _ = writeln!(pr.out, "\t.globl {}", lf.symbol);
    }
    let _ = write!(pr.out, "\t.type {0}, @function\n\t.p2align 4\n", lf.symbol);
    match mech.stack_need_word(&frame) {
        None => pr.out.push_str("\t.skip 12\n"),
        Some(need) => {
            let _ = writeln!(pr.out, "\t.skip 8\n\t.long {need}\t# stack need at entry");
        }
    }
    let _ = writeln!(
        pr.out,
        "\t.long {1}\t# argument bytes\n{0}:",
        lf.symbol, arg_bytes
    );
    let start = pr.out.len();
    mech.prologue(&frame, &mut pr.out);
    pr.no_preempt_since(start);
    for (r, off) in pr.saved.clone() {
        let w = pr.word();
        pr.line(format!(
            "mov {} ptr [{} + {off}], {}",
            ptr_kw(w),
            target.sp(),
            regs::name(r, w)
        ));
    }

    // Blocks that are a lone jump with no moves are not printed; branches go to their target.
    let nb = vc.num_blocks();
    let mut trivial = vec![false; nb];
    for (b, t) in trivial.iter_mut().enumerate() {
        let items: Vec<_> = ra.block_insts_and_edits(vc, Block::new(b)).collect();
        *t = b != 0
            && items.len() == 1
            && matches!(items[0], InstOrEdit::Inst(i) if matches!(vc.insts[i.index()].kind, Kind::Jmp { .. }));
    }
    let resolve = |mut b: Block| -> Block {
        let mut guard = 0;
        while trivial[b.index()] && guard < nb {
            let Kind::Jmp { target } = vc.insts[vc.blocks[b.index()].start as usize].kind else {
                break;
            };
            b = target;
            guard += 1;
        }
        b
    };
    for b in 0..nb {
        if trivial[b] {
            continue;
        }
        let next = (b + 1..nb).find(|&n| !trivial[n]).map(Block::new);
        let _ = writeln!(pr.out, "{}:", pr.label(Block::new(b)));
        for item in ra.block_insts_and_edits(vc, Block::new(b)) {
            match item {
                InstOrEdit::Edit(regalloc2::Edit::Move { from, to }) => pr.mov(*from, *to)?,
                InstOrEdit::Inst(i) => {
                    let inst = &vc.insts[i.index()];
                    let allocs = ra.inst_allocs(i);
                    pr.inst(inst, allocs, &resolve, next)?;
                }
            }
        }
    }
    pr.out = peephole(&pr.out, target.sp(), &format!(".Lf{index}b"));
    let _ = writeln!(pr.out, "\t.size {0}, .-{0}", lf.symbol);
    if let Some(ranges) = pr.no_preempt.take() {
        no_preempt_table(&mut pr.out, target, &ranges);
    }
    for (k, bits) in pr.consts.iter().enumerate() {
        let _ = writeln!(
            pr.rodata,
            "\t.p2align 3\n.LCf{}_{}:\n\t.quad {:#x}\t# {}",
            index,
            k,
            bits,
            f64::from_bits(*bits)
        );
    }
    Ok(Printed {
        text: pr.out,
        rodata: pr.rodata,
        frame_size: frame_size + pushed,
    })
}

/// Last touches on a function's text: two stack-pointer adjustments in a row become one (a
/// call's argument cleanup followed by the epilogue: `add esp, 8` + `add esp, 4` = `add esp,
/// 12`; nothing reads the flags of such an `add`), and blocks (labels starting with
/// `block_prefix`) that no jump names and no code falls into are dropped (a jump to them was
/// replaced by a copy of their code).
fn peephole(text: &str, sp: &str, block_prefix: &str) -> String {
    let add = format!("\tadd {sp}, ");
    let imm = |l: &str| {
        l.strip_prefix(add.as_str())
            .and_then(|n| n.parse::<u32>().ok())
    };
    let lines: Vec<&str> = text.lines().collect();
    let mut merged: Vec<String> = Vec::with_capacity(lines.len());
    for l in lines {
        if let (Some(b), Some(a)) = (imm(l), merged.last().and_then(|p| imm(p))) {
            *merged.last_mut().expect("checked") = format!("{add}{}", a + b);
        } else {
            merged.push(l.to_string());
        }
    }
    let is_label = |l: &str| !l.starts_with('\t') && !l.starts_with('#') && l.ends_with(':');
    // Every word of every instruction: the labels some jump names.
    let referenced: std::collections::HashSet<&str> = merged
        .iter()
        .filter(|l| l.starts_with('\t'))
        .flat_map(|l| l.split([' ', ',', '\t']))
        .collect();
    let mut out = String::with_capacity(text.len());
    let mut dropping = false;
    let mut prev_ends_flow = false;
    // Mechanisms put slow paths in `.subsection 1`; code after `.subsection 0` continues the
    // main line where it left off, so each subsection keeps its own fall-through state.
    let mut subsection = 0usize;
    let mut ends_flow_by_subsection = [false; 2];
    for l in &merged {
        if let Some(n) = l.strip_prefix("\t.subsection ") {
            let n = n.trim().parse::<usize>().unwrap_or(0).min(1);
            ends_flow_by_subsection[subsection] = prev_ends_flow;
            subsection = n;
            prev_ends_flow = ends_flow_by_subsection[n];
            dropping = false;
            out.push_str(l);
            out.push('\n');
            continue;
        }
        if is_label(l) && !l.starts_with(NO_PREEMPT_LABEL) {
            let name = &l[..l.len() - 1];
            dropping =
                name.starts_with(block_prefix) && prev_ends_flow && !referenced.contains(name);
            // Code arrives at any label kept (e.g. a return label after `jmp f`).
            prev_ends_flow = dropping;
        }
        if dropping {
            continue;
        }
        if l.starts_with('\t') && !l.starts_with("\t.") {
            prev_ends_flow = l == "\tret" || l.starts_with("\tjmp ") || l == "\tud2";
        }
        out.push_str(l);
        out.push('\n');
    }
    out
}

/// The prefix of the labels around ranges asynchronous preemption must not interrupt.
const NO_PREEMPT_LABEL: &str = ".Lnp";

/// The section of the table of those ranges: pairs of addresses (begin, end), a pointer each.
/// The linker defines `__start_` and `__stop_` symbols around it (its name is a C identifier),
/// which the runtime reads (mirrors `stackrt::base::abi::NO_PREEMPT_SECTION`).
pub const NO_PREEMPT_SECTION: &str = "cmm_nopreempt";

/// Appends to `text` the table entries of the `ranges` whose labels `text` still holds (the
/// peephole drops blocks no jump reaches, and the ranges inside them).
fn no_preempt_table(text: &mut String, target: Target, ranges: &[(String, String)]) {
    let present: std::collections::HashSet<&str> = text
        .lines()
        .filter(|l| l.starts_with(NO_PREEMPT_LABEL))
        .map(|l| l.trim_end_matches(':'))
        .collect();
    let kept: Vec<&(String, String)> = ranges
        .iter()
        .filter(|(b, e)| present.contains(b.as_str()) && present.contains(e.as_str()))
        .collect();
    if kept.is_empty() {
        return;
    }
    let word = match target {
        Target::I686 => ".long",
        Target::X86_64 => ".quad",
    };
    let mut table = format!("\t.pushsection {NO_PREEMPT_SECTION},\"a\"\n");
    for (b, e) in kept {
        let _ = writeln!(table, "\t{word} {b}, {e}");
    }
    table.push_str("\t.popsection\n");
    text.push_str(&table);
}

fn ptr_kw(w: Width) -> &'static str {
    match w {
        Width::B8 => "byte",
        Width::B32 => "dword",
        Width::B64 => "qword",
    }
}

impl<'a> Printer<'a> {
    fn label(&self, b: Block) -> String {
        format!(".Lf{}b{}", self.fi, b.index())
    }

    /// Marks the text printed since byte `start` of the output as a range asynchronous
    /// preemption must not interrupt (green threads only): a mechanism's sequence or a C call,
    /// which may hold a value of the worker OS thread (a thread-local free list, the worker's
    /// C stack, the C-call counters) across instructions; a thread preempted there could
    /// resume on another worker. Each `.subsection` switch inside starts a new range (the
    /// subsections are laid out apart).
    fn no_preempt_since(&mut self, start: usize) {
        if self.no_preempt.is_none() || self.out[start..].trim().is_empty() {
            return;
        }
        let tail = self.out.split_off(start);
        let mut begin = self.np_label();
        let _ = writeln!(self.out, "{begin}:");
        for line in tail.lines() {
            let switch = line.trim_start().starts_with(".subsection");
            if switch {
                let ended = core::mem::take(&mut begin);
                self.close_no_preempt(ended);
            }
            let _ = writeln!(self.out, "{line}");
            if switch {
                begin = self.np_label();
                let _ = writeln!(self.out, "{begin}:");
            }
        }
        self.close_no_preempt(begin);
    }

    /// Ends the range that began at label `begin` here and records it.
    fn close_no_preempt(&mut self, begin: String) {
        let end = self.np_label();
        let _ = writeln!(self.out, "{end}:");
        if let Some(ranges) = self.no_preempt.as_mut() {
            ranges.push((begin, end));
        }
    }

    fn np_label(&mut self) -> String {
        self.np_labels += 1;
        format!("{NO_PREEMPT_LABEL}{}_{}", self.fi, self.np_labels)
    }

    fn local_label(&mut self, what: &str) -> String {
        self.labels += 1;
        format!(".Lf{}{}{}", self.fi, what, self.labels)
    }

    fn line(&mut self, s: impl AsRef<str>) {
        self.out.push('\t');
        self.out.push_str(s.as_ref());
        self.out.push('\n');
    }

    /// The address of spill slot `slot` from the current stack pointer (or the call base).
    fn spill_addr(&self, slot: usize) -> String {
        self.frame_ref(slot as u32 * 8)
    }

    /// The address of the frame byte `off` bytes above the spill slots: from the stack pointer,
    /// or inside a call sequence with a call base register, from that register.
    fn frame_ref(&self, off: u32) -> String {
        match self.base {
            Some((r, at)) => format!("[{r} + {}]", off + self.bottom + at),
            None => format!(
                "[{} + {}]",
                self.target.sp(),
                off + self.bottom + self.depth
            ),
        }
    }

    fn reg(&self, a: Allocation, w: Width) -> R<&'static str> {
        a.as_reg()
            .map(|r| regs::name(r, w))
            .ok_or_else(|| format!("expected a register, got {a}"))
    }

    /// A register or spill slot operand of width `w` (`qword` for doubles).
    fn rm(&self, a: Allocation, w: Width) -> R<String> {
        if let Some(r) = a.as_reg() {
            return Ok(regs::name(r, w).to_string());
        }
        match a.as_stack() {
            Some(s) => Ok(format!("{} ptr {}", ptr_kw(w), self.spill_addr(s.index()))),
            None => Err("operand without allocation".into()),
        }
    }

    /// The native width of integer registers on the target.
    fn word(&self) -> Width {
        match self.target {
            Target::I686 => Width::B32,
            Target::X86_64 => Width::B64,
        }
    }

    fn amode(&self, a: &Amode, allocs: &[Allocation]) -> R<String> {
        let aw = self.word();
        let mut parts: Vec<String> = Vec::new();
        let mut disp = i64::from(a.disp);
        if let Base::Tls(s) = &a.base {
            if a.index.is_some() {
                return Err(format!("an indexed address of the thread-local {s}"));
            }
            let (seg, reloc) = match self.target {
                Target::X86_64 => ("fs", "tpoff"),
                Target::I686 => ("gs", "ntpoff"),
            };
            return Ok(match disp {
                0 => format!("{seg}:[{s}@{reloc}]"),
                d => format!("{seg}:[{s}@{reloc} + {d}]"),
            });
        }
        match &a.base {
            Base::None => {}
            Base::Reg(o) => parts.push(self.reg(allocs[*o as usize], aw)?.to_string()),
            Base::Slot(off) => {
                parts.push(self.target.sp().to_string());
                disp += i64::from(self.spill_bytes + off + self.bottom + self.depth);
            }
            // Returned above.
            Base::Tls(_) => {}
            Base::Sym(s) => {
                if self.target == Target::X86_64 && a.index.is_none() {
                    parts.push("rip".into());
                }
                parts.push(s.clone());
            }
        }
        if let Some((o, scale)) = a.index {
            let r = self.reg(allocs[o as usize], aw)?;
            parts.push(if scale == 1 {
                r.to_string()
            } else {
                format!("{r}*{scale}")
            });
        }
        let mut s = parts.join(" + ");
        if disp > 0 || parts.is_empty() {
            if s.is_empty() {
                s = disp.to_string();
            } else {
                let _ = write!(s, " + {disp}");
            }
        } else if disp < 0 {
            let _ = write!(s, " - {}", -disp);
        }
        Ok(format!("[{s}]"))
    }

    /// A move inserted by the register allocator.
    fn mov(&mut self, from: Allocation, to: Allocation) -> R<()> {
        if from == to {
            return Ok(());
        }
        let class = from
            .as_reg()
            .or(to.as_reg())
            .map(|r| r.class())
            .unwrap_or(RegClass::Int);
        let w = self.word();
        let line = match (from.as_reg(), to.as_reg(), class) {
            (Some(f), Some(t), RegClass::Float) => {
                format!("movapd {}, {}", regs::name(t, w), regs::name(f, w))
            }
            (Some(f), Some(t), _) => format!("mov {}, {}", regs::name(t, w), regs::name(f, w)),
            (Some(f), None, RegClass::Float) => {
                format!("movsd {}, {}", self.rm(to, Width::B64)?, regs::name(f, w))
            }
            (Some(f), None, _) => format!("mov {}, {}", self.rm(to, w)?, regs::name(f, w)),
            (None, Some(t), RegClass::Float) => {
                format!("movsd {}, {}", regs::name(t, w), self.rm(from, Width::B64)?)
            }
            (None, Some(t), _) => format!("mov {}, {}", regs::name(t, w), self.rm(from, w)?),
            (None, None, _) => return Err("stack-to-stack move".into()),
        };
        self.line(line);
        Ok(())
    }

    fn jump_to(&mut self, target: Block, next: Option<Block>) {
        if Some(target) != next {
            let l = self.label(target);
            self.line(format!("jmp {l}"));
        }
    }

    /// Conditional branch on `cc` to `t`, else `f`.
    fn branch(&mut self, cc: Cc, t: Block, f: Block, next: Option<Block>) {
        if Some(f) == next {
            let l = self.label(t);
            self.line(format!("j{} {l}", cc.suffix()));
        } else if Some(t) == next {
            let l = self.label(f);
            self.line(format!("j{} {l}", cc.invert().suffix()));
        } else {
            let l = self.label(t);
            self.line(format!("j{} {l}", cc.suffix()));
            self.jump_to(f, next);
        }
    }

    fn cmp(&mut self, w: Width, a: Allocation, b: Rmi, allocs: &[Allocation]) -> R<()> {
        let ra = self.reg(a, w)?;
        match b {
            Rmi::Imm(0) => self.line(format!("test {ra}, {ra}")),
            Rmi::Imm(i) => self.line(format!("cmp {ra}, {i}")),
            Rmi::Op(o) => {
                let rb = self.rm(allocs[o as usize], w)?;
                self.line(format!("cmp {ra}, {rb}"));
            }
        }
        Ok(())
    }

    fn ucomisd(&mut self, a: Allocation, b: Allocation) -> R<()> {
        let ra = self.reg(a, Width::B64)?;
        let rb = self.rm(b, Width::B64)?;
        self.line(format!("ucomisd {ra}, {rb}"));
        Ok(())
    }

    fn const_label(&mut self, bits: u64) -> String {
        let k = match self.consts.iter().position(|&c| c == bits) {
            Some(k) => k,
            None => {
                self.consts.push(bits);
                self.consts.len() - 1
            }
        };
        self.sym_mem(&format!(".LCf{}_{}", self.fi, k))
    }

    /// A memory operand at a symbol (RIP-relative on x86-64).
    fn sym_mem(&self, sym: &str) -> String {
        match self.target {
            Target::X86_64 => format!("[rip + {sym}]"),
            Target::I686 => format!("[{sym}]"),
        }
    }

    fn push_arg(&mut self, a: Allocation, kind: ArgKind) -> R<u32> {
        let sp = self.target.sp();
        match (kind, a.as_reg()) {
            (ArgKind::Int(_), Some(r)) => {
                let n = regs::name(r, self.word());
                self.line(format!("push {n}"));
                self.depth += self.target.slot();
                Ok(self.target.slot())
            }
            (ArgKind::Int(_), None) => {
                let m = self.rm(a, self.word())?;
                self.line(format!("push {m}"));
                self.depth += self.target.slot();
                Ok(self.target.slot())
            }
            (ArgKind::F64, Some(r)) => {
                self.line(format!("sub {sp}, 8"));
                self.line(format!(
                    "movsd qword ptr [{sp}], {}",
                    regs::name(r, Width::B64)
                ));
                self.depth += 8;
                Ok(8)
            }
            (ArgKind::F64, None) => {
                let slot = a.as_stack().ok_or("argument without allocation")?.index() as u32 * 8;
                match self.target {
                    Target::X86_64 => {
                        self.line(format!("push qword ptr {}", self.frame_ref(slot)));
                        self.depth += 8;
                    }
                    Target::I686 => {
                        // High half first: it lives at the higher address.
                        self.line(format!("push dword ptr {}", self.frame_ref(slot + 4)));
                        self.depth += 4;
                        self.line(format!("push dword ptr {}", self.frame_ref(slot)));
                        self.depth += 4;
                    }
                }
                Ok(8)
            }
        }
    }

    fn inst(
        &mut self,
        inst: &Inst,
        al: &[Allocation],
        resolve: &dyn Fn(Block) -> Block,
        next: Option<Block>,
    ) -> R<()> {
        let a = |o: Op| al[o as usize];
        match &inst.kind {
            Kind::LoadArg { dst, offset, mem } => {
                let sp = self.target.sp();
                let at = self.args_at + offset;
                match mem {
                    Mem::F64 => {
                        let d = self.reg(a(*dst), Width::B64)?;
                        self.line(format!("movsd {d}, qword ptr [{sp} + {at}]"));
                    }
                    Mem::I64 => {
                        let d = self.reg(a(*dst), Width::B64)?;
                        self.line(format!("mov {d}, qword ptr [{sp} + {at}]"));
                    }
                    _ => {
                        let d = self.reg(a(*dst), Width::B32)?;
                        self.line(format!("mov {d}, dword ptr [{sp} + {at}]"));
                    }
                }
            }
            Kind::MovImm { dst, imm, w } => {
                let d32 = self.reg(a(*dst), Width::B32)?;
                if *imm == 0 {
                    self.line(format!("xor {d32}, {d32}"));
                } else if *w == Width::B32 || (0..=u32::MAX as i64).contains(imm) {
                    self.line(format!(
                        "mov {d32}, {}",
                        if *w == Width::B32 {
                            *imm as i32 as i64
                        } else {
                            *imm
                        }
                    ));
                } else {
                    let d = self.reg(a(*dst), Width::B64)?;
                    self.line(format!("mov {d}, {imm}"));
                }
            }
            Kind::ZeroF64 { dst } => {
                let d = self.reg(a(*dst), Width::B64)?;
                self.line(format!("xorps {d}, {d}"));
            }
            Kind::LoadConstF64 { dst, bits } => {
                let d = self.reg(a(*dst), Width::B64)?;
                let m = self.const_label(*bits);
                self.line(format!("movsd {d}, qword ptr {m}"));
            }
            Kind::Copy { dst, src, class } => {
                if a(*dst) != a(*src) {
                    let _ = class;
                    self.mov(a(*src), a(*dst))?;
                }
            }
            Kind::Alu {
                op,
                w,
                dst,
                a: _,
                b,
            } => {
                let d = self.reg(a(*dst), *w)?;
                let src = match b {
                    Rmi::Imm(i) => i.to_string(),
                    Rmi::Op(o) => self.rm(a(*o), *w)?,
                };
                self.line(format!("{} {d}, {src}", op.mnemonic()));
            }
            Kind::Imul { w, dst, a: _, b } => {
                let d = self.reg(a(*dst), *w)?;
                let s = self.rm(a(*b), *w)?;
                self.line(format!("imul {d}, {s}"));
            }
            Kind::ImulImm { w, dst, src, imm } => {
                let d = self.reg(a(*dst), *w)?;
                let s = self.rm(a(*src), *w)?;
                self.line(format!("imul {d}, {s}, {imm}"));
            }
            Kind::Neg { w, dst, .. } => {
                let d = self.reg(a(*dst), *w)?;
                self.line(format!("neg {d}"));
            }
            Kind::Not { w, dst, .. } => {
                let d = self.reg(a(*dst), *w)?;
                self.line(format!("not {d}"));
            }
            Kind::Shift {
                op, w, dst, amt, ..
            } => {
                let d = self.reg(a(*dst), *w)?;
                let m = match op {
                    ShiftOp::Shl => "shl",
                    ShiftOp::Sar => "sar",
                    ShiftOp::Shr => "shr",
                };
                match amt {
                    Rmi::Imm(0) => {}
                    Rmi::Imm(i) => self.line(format!("{m} {d}, {i}")),
                    Rmi::Op(_) => self.line(format!("{m} {d}, cl")),
                }
            }
            Kind::Sext8 { dst, .. } => {
                let d = self.reg(a(*dst), Width::B32)?;
                match self.target {
                    Target::X86_64 => {
                        let d8 = self.reg(a(*dst), Width::B8)?;
                        self.line(format!("movsx {d}, {d8}"));
                    }
                    Target::I686 => {
                        self.line(format!("shl {d}, 24"));
                        self.line(format!("sar {d}, 24"));
                    }
                }
            }
            Kind::Sext32To64 { dst, src } => {
                let d = self.reg(a(*dst), Width::B64)?;
                let s = self.rm(a(*src), Width::B32)?;
                self.line(format!("movsxd {d}, {s}"));
            }
            Kind::Zext32To64 { dst, src } => {
                let d = self.reg(a(*dst), Width::B32)?;
                let s = self.rm(a(*src), Width::B32)?;
                self.line(format!("mov {d}, {s}"));
            }
            Kind::SignHi { w, .. } => self.line(if *w == Width::B64 { "cqo" } else { "cdq" }),
            Kind::ZeroHi { .. } => self.line("xor edx, edx"),
            Kind::Div {
                signed, w, divisor, ..
            } => {
                let s = self.rm(a(*divisor), *w)?;
                self.line(format!("{} {s}", if *signed { "idiv" } else { "div" }));
            }
            Kind::MulHi { signed, w, b, .. } => {
                let s = self.rm(a(*b), *w)?;
                self.line(format!("{} {s}", if *signed { "imul" } else { "mul" }));
            }
            Kind::Setcc {
                cc,
                w,
                a: x,
                b,
                dst,
            } => {
                self.cmp(*w, a(*x), *b, al)?;
                let d8 = self.reg(a(*dst), Width::B8)?;
                let d = self.reg(a(*dst), Width::B32)?;
                self.line(format!("set{} {d8}", cc.suffix()));
                self.line(format!("movzx {d}, {d8}"));
            }
            Kind::FSetcc {
                cond,
                a: x,
                b,
                dst,
                tmp,
            } => {
                self.ucomisd(a(*x), a(*b))?;
                let d8 = self.reg(a(*dst), Width::B8)?;
                let d = self.reg(a(*dst), Width::B32)?;
                let t8 = self.reg(a(*tmp), Width::B8)?;
                match cond {
                    FCond::Eq => {
                        self.line(format!("sete {d8}"));
                        self.line(format!("setnp {t8}"));
                        self.line(format!("and {d8}, {t8}"));
                    }
                    FCond::Ne => {
                        self.line(format!("setne {d8}"));
                        self.line(format!("setp {t8}"));
                        self.line(format!("or {d8}, {t8}"));
                    }
                    FCond::Simple(cc) => self.line(format!("set{} {d8}", cc.suffix())),
                }
                self.line(format!("movzx {d}, {d8}"));
            }
            Kind::Select {
                w,
                c,
                t,
                dst,
                class,
                ..
            } => {
                let c32 = self.reg(a(*c), Width::B32)?;
                self.line(format!("test {c32}, {c32}"));
                if *class == RegClass::Float {
                    let skip = self.local_label("sel");
                    let d = self.reg(a(*dst), Width::B64)?;
                    let tr = self.reg(a(*t), Width::B64)?;
                    self.line(format!("je {skip}"));
                    self.line(format!("movapd {d}, {tr}"));
                    let _ = writeln!(self.out, "{skip}:");
                } else {
                    let d = self.reg(a(*dst), *w)?;
                    let tr = self.reg(a(*t), *w)?;
                    self.line(format!("cmovne {d}, {tr}"));
                }
            }
            Kind::Load { mem, dst, addr } => {
                let m = self.amode(addr, al)?;
                let line = match mem {
                    Mem::S8 => format!("movsx {}, byte ptr {m}", self.reg(a(*dst), Width::B32)?),
                    Mem::U8 => format!("movzx {}, byte ptr {m}", self.reg(a(*dst), Width::B32)?),
                    Mem::I32 => format!("mov {}, dword ptr {m}", self.reg(a(*dst), Width::B32)?),
                    Mem::I64 => format!("mov {}, qword ptr {m}", self.reg(a(*dst), Width::B64)?),
                    Mem::F64 => format!("movsd {}, qword ptr {m}", self.reg(a(*dst), Width::B64)?),
                };
                self.line(line);
            }
            Kind::Store { mem, src, addr } => {
                let m = self.amode(addr, al)?;
                let line = match mem {
                    Mem::S8 | Mem::U8 => {
                        format!("mov byte ptr {m}, {}", self.reg(a(*src), Width::B8)?)
                    }
                    Mem::I32 => format!("mov dword ptr {m}, {}", self.reg(a(*src), Width::B32)?),
                    Mem::I64 => format!("mov qword ptr {m}, {}", self.reg(a(*src), Width::B64)?),
                    Mem::F64 => format!("movsd qword ptr {m}, {}", self.reg(a(*src), Width::B64)?),
                };
                self.line(line);
            }
            Kind::StoreImm { mem, imm, addr } => {
                let m = self.amode(addr, al)?;
                let line = match mem {
                    Mem::S8 | Mem::U8 => format!("mov byte ptr {m}, {}", *imm as i8),
                    Mem::I32 => format!("mov dword ptr {m}, {imm}"),
                    Mem::I64 => format!("mov qword ptr {m}, {imm}"),
                    Mem::F64 => return Err("immediate double store".into()),
                };
                self.line(line);
            }
            Kind::Lea { w, dst, addr } => {
                let m = self.amode(addr, al)?;
                let d = self.reg(a(*dst), *w)?;
                self.line(format!("lea {d}, {m}"));
            }
            Kind::FAlu { op, dst, b, .. } => {
                let d = self.reg(a(*dst), Width::B64)?;
                let s = self.rm(a(*b), Width::B64)?;
                let m = match op {
                    FOp::Add => "addsd",
                    FOp::Sub => "subsd",
                    FOp::Mul => "mulsd",
                    FOp::Div => "divsd",
                };
                self.line(format!("{m} {d}, {s}"));
            }
            Kind::FNeg { dst, .. } => {
                let d = self.reg(a(*dst), Width::B64)?;
                let m = self.sym_mem(".Lcmm_sign_mask");
                self.line(format!("xorpd {d}, xmmword ptr {m}"));
            }
            Kind::CvtI2F { w, dst, src } => {
                let d = self.reg(a(*dst), Width::B64)?;
                let s = self.rm(a(*src), *w)?;
                self.line(format!("xorps {d}, {d}"));
                self.line(format!("cvtsi2sd {d}, {s}"));
            }
            Kind::CvtF2I { w, dst, src } => {
                let d = self.reg(a(*dst), *w)?;
                let s = self.rm(a(*src), Width::B64)?;
                self.line(format!("cvttsd2si {d}, {s}"));
            }
            Kind::CvtF2ISat { w, dst, src, tmp } => {
                let d = self.reg(a(*dst), *w)?;
                let s = self.reg(a(*src), Width::B64)?;
                let t = self.reg(a(*tmp), Width::B64)?;
                let done = self.local_label("satdone");
                let nan = self.local_label("satnan");
                let max = if *w == Width::B64 {
                    i64::MAX
                } else {
                    i64::from(i32::MAX)
                };
                self.line(format!("cvttsd2si {d}, {s}"));
                // Only the "integer indefinite" result overflows `cmp d, 1`.
                self.line(format!("cmp {d}, 1"));
                self.line(format!("jno {done}"));
                self.line(format!("xorpd {t}, {t}"));
                self.line(format!("ucomisd {s}, {t}"));
                self.line(format!("jp {nan}"));
                self.line(format!("jbe {done}"));
                self.line(format!("mov {d}, {max}"));
                self.line(format!("jmp {done}"));
                let _ = writeln!(self.out, "{nan}:");
                let d32 = self.reg(a(*dst), Width::B32)?;
                self.line(format!("xor {d32}, {d32}"));
                let _ = writeln!(self.out, "{done}:");
            }
            Kind::Jmp { target } => {
                let r = resolve(*target);
                if self.ret_only[r.index()] {
                    // Even instead of falling through: the call before it may merge its stack
                    // adjustment with the epilogue's, and the block may become unreachable.
                    self.ret()?;
                } else if Some(r) == next {
                    // Falls through.
                } else if let Some((
                    Kind::BrCmp {
                        cc,
                        w,
                        a: x,
                        b,
                        t,
                        f,
                        ..
                    },
                    ba,
                )) = self.branch_only[r.index()].clone()
                {
                    self.cmp(w, ba[x as usize], b, &ba)?;
                    self.branch(cc, resolve(t), resolve(f), next);
                } else {
                    self.jump_to(r, next);
                }
            }
            Kind::BrCmp {
                cc,
                w,
                a: x,
                b,
                t,
                f,
                flags_set,
            } => {
                if !flags_set {
                    self.cmp(*w, a(*x), *b, al)?;
                }
                self.branch(*cc, resolve(*t), resolve(*f), next);
            }
            Kind::BrFCmp {
                cond,
                a: x,
                b,
                t,
                f,
            } => {
                self.ucomisd(a(*x), a(*b))?;
                let (t, f) = (resolve(*t), resolve(*f));
                match cond {
                    FCond::Simple(cc) => self.branch(*cc, t, f, next),
                    FCond::Eq => {
                        let (lt, lf) = (self.label(t), self.label(f));
                        self.line(format!("jp {lf}"));
                        self.line(format!("je {lt}"));
                        self.jump_to(f, next);
                    }
                    FCond::Ne => {
                        let lt = self.label(t);
                        self.line(format!("jne {lt}"));
                        self.line(format!("jp {lt}"));
                        self.jump_to(f, next);
                    }
                }
            }
            Kind::Call(info) => self.call(info, al)?,
            Kind::Ret { .. } => self.ret()?,
            Kind::Trap => self.line("ud2"),
        }
        Ok(())
    }

    /// Restores the preserved registers and returns (the mechanism's epilogue).
    fn ret(&mut self) -> R<()> {
        for (r, off) in self.saved.clone() {
            let w = self.word();
            let sp = self.target.sp();
            self.line(format!(
                "mov {}, {} ptr [{sp} + {off}]",
                regs::name(r, w),
                ptr_kw(w)
            ));
        }
        let frame = self.frame;
        let start = self.out.len();
        self.mech.epilogue(&frame, &mut self.out);
        self.no_preempt_since(start);
        Ok(())
    }

    fn call(&mut self, info: &CallInfo, al: &[Allocation]) -> R<()> {
        let sp = self.target.sp();
        if !info.external {
            let ret_label = self.local_label("ret");
            let arg_bytes: u32 = info
                .stack_args
                .iter()
                .map(|s| match s.kind {
                    ArgKind::F64 => 8,
                    ArgKind::Int(_) => self.target.slot(),
                })
                .sum();
            // An f64 pushed from a register takes a `sub` (see `push_arg`).
            let pushes_keep_flags = info
                .stack_args
                .iter()
                .all(|s| !matches!(s.kind, ArgKind::F64) || al[s.op as usize].as_reg().is_none());
            let site = CallSite {
                target: self.target,
                callee: &info.symbol,
                arg_bytes,
                return_label: &ret_label,
                pushes_keep_flags,
            };
            let start = self.out.len();
            let mut pre = String::new();
            let at = self.depth;
            self.depth += self.mech.call_prefix(&site, &mut pre);
            self.out.push_str(&pre);
            self.base = self.mech.call_base(self.target).map(|r| (r, at));
            for s in info.stack_args.iter().rev() {
                self.push_arg(al[s.op as usize], s.kind)?;
            }
            let mut post = String::new();
            self.mech.call_suffix(&site, &mut post);
            self.out.push_str(&post);
            self.no_preempt_since(start);
            self.depth = 0;
            self.base = None;
            return Ok(());
        }
        // A C function: cdecl (i686) or System V (x86-64), 16-byte aligned at the call.
        let arg_bytes: u32 = info
            .stack_args
            .iter()
            .map(|s| match s.kind {
                ArgKind::F64 => 8,
                ArgKind::Int(_) => self.target.slot(),
            })
            .sum();
        let pad = (16 - arg_bytes % 16) % 16;
        let site = CallSite {
            target: self.target,
            callee: &info.symbol,
            arg_bytes: pad + arg_bytes,
            return_label: "",
            // Unused: C calls' checkpoints compare after the pushes.
            pushes_keep_flags: false,
        };
        let start = self.out.len();
        let race_done = match info.race_read {
            Some((size, _)) => self.race_read_check(info, al, size)?,
            None => None,
        };
        if info.saves_all {
            self.poll_save(true);
        }
        // The thread library's calls switch green threads and the runtime's entries are short:
        // only the program's own C calls are counted.
        let counted = self.count_ccalls
            && !info.saves_all
            && !info
                .symbol
                .starts_with(crate::callgraph::THREAD_LIBRARY_PREFIX)
            && !info.symbol.starts_with(crate::race::ENTRY_PREFIX);
        if counted {
            self.ccall_count(0);
        }
        self.mech.extern_call_prefix(&site, &mut self.out);
        self.base = self.mech.call_base(self.target).map(|r| (r, self.depth));
        if pad != 0 {
            self.line(format!("sub {sp}, {pad}"));
            self.depth += pad;
        }
        for (k, s) in info.stack_args.iter().enumerate().rev() {
            match (race_done.is_some(), info.race_read, k) {
                // The inline check may have used the size's and site's registers (i686).
                (true, Some((size, _)), 1) => self.push_imm(i64::from(size)),
                (true, Some((_, site)), 2) => self.push_imm(i64::from(site)),
                _ => {
                    self.push_arg(al[s.op as usize], s.kind)?;
                }
            }
        }
        if let Some(n) = info.variadic_vec_regs {
            self.line(format!("mov eax, {n}"));
        }
        self.base = None;
        self.mech.extern_call_check(&site, &mut self.out);
        self.mech.extern_call(&site, &mut self.out);
        let mut cleanup = pad + arg_bytes;
        if info.x87_ret {
            if matches!(info.ret, Some((_, RetKind::F64))) {
                if cleanup < 8 {
                    self.line(format!("sub {sp}, 8"));
                    cleanup += 8;
                }
                self.line(format!("fstp qword ptr [{sp}]"));
                self.line(format!("movsd xmm0, qword ptr [{sp}]"));
            } else {
                self.line("fstp st(0)");
            }
        }
        if let Some((_, RetKind::Char)) = info.ret {
            self.line("movsx eax, al");
        }
        if cleanup != 0 {
            self.line(format!("add {sp}, {cleanup}"));
        }
        self.mech.extern_call_return(&site, &mut self.out);
        if let Some(done) = race_done {
            let _ = writeln!(self.out, "{done}:");
        }
        if counted {
            self.ccall_count(4);
        }
        if info.saves_all {
            self.poll_save(false);
        }
        self.no_preempt_since(start);
        self.depth = 0;
        Ok(())
    }

    /// Pushes a word-sized immediate argument.
    fn push_imm(&mut self, v: i64) {
        self.line(format!("push {v}"));
        self.depth += self.target.slot();
    }

    /// `--race`: the inline read check before a call of the read entry for `size` bytes
    /// (`crate::race`, module docs): settles the read without the call when the running
    /// thread's filter covers it. Returns the label after the call sequence, where a covered
    /// read goes (None: no check for this size).
    fn race_read_check(
        &mut self,
        info: &CallInfo,
        al: &[Allocation],
        size: u32,
    ) -> R<Option<String>> {
        if !matches!(size, 1 | 2 | 4 | 8) {
            return Ok(None);
        }
        let (gen_off, shift, word_shift, w) = crate::race::filter_geometry(self.target.slot());
        let width = self.word();
        let wk = ptr_kw(width);
        let name = |r: u8| regs::name(regs::gpr(r), width);
        // The address and two scratch registers the call clobbers that hold nothing the call
        // sequence still needs (the module docs of `crate::race`).
        let (a, x, y) = match self.target {
            Target::X86_64 => (name(regs::RDI), name(10), name(11)),
            Target::I686 => {
                let arg = al[info
                    .stack_args
                    .first()
                    .ok_or("race read without address")?
                    .op as usize];
                match arg.as_reg() {
                    Some(r) if r == regs::gpr(regs::RAX) => {
                        (name(regs::RAX), name(regs::RCX), name(regs::RDX))
                    }
                    Some(r) if r == regs::gpr(regs::RCX) => {
                        (name(regs::RCX), name(regs::RAX), name(regs::RDX))
                    }
                    Some(r) if r == regs::gpr(regs::RDX) => {
                        (name(regs::RDX), name(regs::RAX), name(regs::RCX))
                    }
                    Some(r) => (regs::name(r, width), name(regs::RCX), name(regs::RDX)),
                    None => {
                        let m = self.rm(arg, width)?;
                        self.line(format!("mov eax, {m}"));
                        (name(regs::RAX), name(regs::RCX), name(regs::RDX))
                    }
                }
            }
        };
        let slow = self.local_label("rs");
        let done = self.local_label("rd");
        let tls = super::mech::tls_operand(
            self.target,
            crate::race::FILTER_TLS_SYMBOL,
            0,
            self.target == Target::I686,
        );
        let freed = self.sym_mem(crate::race::FREED_SYMBOL);
        let dir = crate::race::FILTER_DIR_OFFSET;
        self.line(format!("mov {x}, {tls}"));
        self.line(format!("test {x}, {x}"));
        self.line(format!("jz {slow}"));
        self.line(format!("mov {y}, {wk} ptr {freed}"));
        self.line(format!("cmp {y}, {wk} ptr [{x} + {gen_off}]"));
        self.line(format!("jne {slow}"));
        self.line(format!("mov {x}, {wk} ptr [{x} + {dir}]"));
        self.line(format!("test {x}, {x}"));
        self.line(format!("jz {slow}"));
        self.line(format!("mov {y}, {a}"));
        self.line(format!("shr {y}, {shift}"));
        if self.target == Target::X86_64 {
            // The directory covers the 47-bit user address space.
            self.line(format!("cmp {y}, {}", 1u64 << (47 - shift)));
            self.line(format!("jae {slow}"));
        }
        self.line(format!("mov {x}, {wk} ptr [{x} + {y}*{w}]"));
        self.line(format!("test {x}, {x}"));
        self.line(format!("jz {slow}"));
        if size > 1 {
            // Within one 4-byte half (8 bytes: two aligned halves of one bitmap word).
            let m = if size == 2 { 1 } else { size - 1 };
            self.line(format!("test {a}, {m}"));
            self.line(format!("jnz {slow}"));
        }
        self.line(format!("mov {y}, {a}"));
        self.line(format!("shr {y}, {word_shift}"));
        self.line(format!("and {y}, {}", (1u32 << (shift - word_shift)) - 1));
        self.line(format!("mov {x}, {wk} ptr [{x} + {y}*{w}]"));
        self.line(format!("mov {y}, {a}"));
        self.line(format!("shr {y}, 2"));
        self.line(format!("bt {x}, {y}"));
        if size == 8 {
            self.line(format!("jnc {slow}"));
            self.line(format!("inc {y}"));
            self.line(format!("bt {x}, {y}"));
        }
        self.line(format!("jc {done}"));
        let _ = writeln!(self.out, "{slow}:");
        Ok(Some(done))
    }

    /// Adds one to the counter at byte `offset` of [`CCALLS_SYMBOL`] (0: started, 4: finished).
    fn ccall_count(&mut self, offset: u32) {
        let (seg, reloc) = match self.target {
            Target::X86_64 => ("fs", "tpoff"),
            Target::I686 => ("gs", "ntpoff"),
        };
        self.line(format!(
            "inc dword ptr {seg}:[{CCALLS_SYMBOL}@{reloc} + {offset}]"
        ));
    }

    /// Stores (`save`) or loads the C ABI's caller-saved registers in the thread-local save
    /// area of the preemption poll ([`POLL_SAVE_SYMBOL`]): general-purpose register `k` at
    /// `k * P`, xmm register `k` at `16 * P + 16 * k`. Thread-local, not on the stack: the
    /// stack pointer of some mechanisms leaves no room below it (a heap block, an MMU frame),
    /// and the runtime carries the area over a switch (`stackrt::green`'s polls).
    fn poll_save(&mut self, save: bool) {
        let (seg, reloc, word, p) = match self.target {
            Target::X86_64 => ("fs", "tpoff", "qword", 8),
            Target::I686 => ("gs", "ntpoff", "dword", 4),
        };
        let gprs: &[u8] = match self.target {
            Target::I686 => &[regs::RAX, regs::RCX, regs::RDX],
            Target::X86_64 => &[
                regs::RAX,
                regs::RCX,
                regs::RDX,
                regs::RSI,
                regs::RDI,
                regs::R8,
                regs::R9,
                10,
                11,
            ],
        };
        let width = match self.target {
            Target::X86_64 => Width::B64,
            Target::I686 => Width::B32,
        };
        for &g in gprs {
            let mem = format!(
                "{word} ptr {seg}:[{POLL_SAVE_SYMBOL}@{reloc} + {}]",
                u32::from(g) * p
            );
            let r = regs::name(regs::gpr(g), width);
            self.line(if save {
                format!("mov {mem}, {r}")
            } else {
                format!("mov {r}, {mem}")
            });
        }
        for x in 0..regs::num_xmms(self.target) {
            let mem = format!(
                "xmmword ptr {seg}:[{POLL_SAVE_SYMBOL}@{reloc} + {}]",
                16 * p + 16 * u32::from(x)
            );
            let r = regs::name(regs::xmm(x), Width::B64);
            self.line(if save {
                format!("movups {mem}, {r}")
            } else {
                format!("movups {r}, {mem}")
            });
        }
    }
}

/// The runtime's thread-local counters of C calls started and finished (mirrors
/// `stackrt::base::abi::CCALLS_SYMBOL`).
pub const CCALLS_SYMBOL: &str = "stackrt_ccalls";

/// The runtime's thread-local save area of the preemption poll's registers (mirrors
/// `stackrt::base::abi::POLL_SAVE_SYMBOL`): 16 words and 16 xmm registers.
pub const POLL_SAVE_SYMBOL: &str = "stackrt_poll_save";

#[cfg(test)]
mod tests {
    use super::peephole;

    #[test]
    fn the_poll_save_area_is_the_runtimes() {
        // Mirrored in stackrt::base::abi::POLL_SAVE_SYMBOL (checked there too).
        assert_eq!(super::POLL_SAVE_SYMBOL, "stackrt_poll_save");
        // Mirrored in stackrt::base::abi::CCALLS_SYMBOL (checked there too).
        assert_eq!(super::CCALLS_SYMBOL, "stackrt_ccalls");
        // Mirrored in stackrt::base::abi::NO_PREEMPT_SECTION (checked there too).
        assert_eq!(super::NO_PREEMPT_SECTION, "cmm_nopreempt");
    }

    #[test]
    fn adjacent_stack_adds_merge_but_not_across_a_label() {
        let text = "\tcall cmm_f\n\tadd esp, 8\n\tadd esp, 4\n\tret\n\
                    .Lf0b1:\n\tadd esp, 4\n.Lf0b2:\n\tadd esp, 12\n\tadd eax, 1\n\tadd esp, 4\n\tret\n";
        let want = "\tcall cmm_f\n\tadd esp, 12\n\tret\n\
                    .Lf0b1:\n\tadd esp, 4\n.Lf0b2:\n\tadd esp, 12\n\tadd eax, 1\n\tadd esp, 4\n\tret\n";
        // .Lf0b1 is not referenced but follows a `ret`: dropped; .Lf0b2 is reached by falling
        // through from .Lf0b1, which is dropped, so it is unreachable too.
        let got = peephole(text, "esp", ".Lf0b");
        assert_eq!(got, "\tcall cmm_f\n\tadd esp, 12\n\tret\n");
        // With the blocks referenced, only the first pair merges.
        let referenced = format!("{text}\tjmp .Lf0b1\n\tjne .Lf0b2\n");
        let got = peephole(&referenced, "esp", ".Lf0b");
        assert_eq!(got, format!("{want}\tjmp .Lf0b1\n\tjne .Lf0b2\n"));
    }

    #[test]
    fn blocks_reached_by_falling_through_or_after_a_return_label_stay() {
        // Callee-cleanup call: the code after `jmp f` is reached through the return label.
        let text = "\tpush offset .Lf0ret1\n\tjmp cmm_f\n.Lf0ret1:\n.Lf0b3:\n\tmov eax, 1\n\
                    \tjmp .Lf0b5\n.Lf0b4:\n\tmov eax, 2\n.Lf0b5:\n\tadd rsp, 8\n\tret\n";
        let got = peephole(text, "rsp", ".Lf0b");
        // .Lf0b4 follows a `jmp` and nothing names it: dropped. .Lf0b5 is named.
        let want = "\tpush offset .Lf0ret1\n\tjmp cmm_f\n.Lf0ret1:\n.Lf0b3:\n\tmov eax, 1\n\
                    \tjmp .Lf0b5\n.Lf0b5:\n\tadd rsp, 8\n\tret\n";
        assert_eq!(got, want);
    }

    #[test]
    fn code_after_a_slow_path_subsection_continues_the_main_line() {
        // A lookahead call: the slow paths in subsection 1 end in `jmp`, but the main line
        // resumes after `.subsection 0`, falling into .Lf0b9 which nothing names.
        let text = "\tcall cmm_f\n\tcmp rsp, rbp\n\tje .Lla0_unf\n.Lla0_back:\n\t.subsection 1\n\
                    .Lla0_unf:\n\tmov rsp, qword ptr [rbp + 8]\n\tmov rbp, qword ptr [rbp + 16]\n\tjmp .Lla0_back\n\
                    \t.subsection 0\n.Lf0b9:\n\tadd eax, 1\n\tret\n\
                    \t.subsection 1\n.Lf0b10:\n\tud2\n\t.subsection 0\n.Lf0b11:\n\tret\n";
        let got = peephole(text, "rsp", ".Lf0b");
        // .Lf0b9 stays (falls through from the call); .Lf0b10 is the first thing in its
        // subsection after a `jmp`: dropped; .Lf0b11 follows a `ret` in subsection 0: dropped.
        let want = "\tcall cmm_f\n\tcmp rsp, rbp\n\tje .Lla0_unf\n.Lla0_back:\n\t.subsection 1\n\
                    .Lla0_unf:\n\tmov rsp, qword ptr [rbp + 8]\n\tmov rbp, qword ptr [rbp + 16]\n\tjmp .Lla0_back\n\
                    \t.subsection 0\n.Lf0b9:\n\tadd eax, 1\n\tret\n\
                    \t.subsection 1\n\t.subsection 0\n";
        assert_eq!(got, want);
    }
}
