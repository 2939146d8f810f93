//! After register allocation: moving one preserved register's values to the spare register, so
//! the function saves one register less.
//!
//! The C-- convention has one register that C preserves and C-- calls clobber (the spare,
//! [`regs::spare`]: `rbp`, or `r15` when a mechanism reserves `rbp`). A value that lives
//! across a C call but no C-- call belongs there: it survives the C call and costs no save.
//! regalloc2 does not always put it there: it probes the free registers from an offset, so the
//! spare may go to some short-lived value while the long-lived one takes a preserved register,
//! which the function must then save and restore on every activation. In a recursion that
//! calls C only on a rare path (`crates/bench/programs/deep_repeat.cm`) that save and restore
//! is most of the difference between `lookahead` and `callee-cleanup` per call.
//!
//! The pass, on the allocated code (a backward liveness with regalloc2's moves): a preserved
//! register none of whose values lives across an instruction that clobbers the spare (a C--
//! call) becomes the spare, every allocation of it. If the spare itself holds values, they
//! first move to a caller-saved register the function never names, when no instruction they
//! live across clobbers that one (they cross no call). Values keep their places in time, so
//! nothing else changes.

use regalloc2::{Allocation, Block, Edit, Function as _, InstOrEdit, OperandKind, PReg, RegClass};

use super::regs;
use super::vcode::VCode;
use super::Target;

/// Integer registers as a bit set of hardware encodings.
type Set = u32;

fn bit(a: Allocation) -> Set {
    match a.as_reg() {
        Some(r) if r.class() == RegClass::Int => 1 << r.hw_enc(),
        _ => 0,
    }
}

/// Caller-saved registers a mechanism's sequences name besides the allocation (`rax`: results
/// and `al`; `r10`/`r11`: the mechanisms' scratch): the spare's values never move there.
const NOT_EVICT_TO: [u8; 3] = [regs::RAX, 10, 11];

/// Renames one preserved register (of `preserved`) to `spare` when no instruction across which
/// it holds a value clobbers the spare (so it crosses no C-- call), first moving the spare's
/// own values to a register the function leaves unused if they cross nothing that clobbers
/// it. Returns the register renamed.
pub fn to_spare(
    vc: &VCode,
    ra: &mut regalloc2::Output,
    target: Target,
    preserved: &[u8],
    spare: PReg,
) -> Option<PReg> {
    let used = used_regs(ra);
    // On i686 `ebp`, `esi` and `edi` have no byte form (`bpl`, `sil` and `dil` are x86-64's),
    // so `ebx`, whose values may be bytes, never moves to `ebp`.
    let candidates: Set = preserved
        .iter()
        .filter(|&&g| !(target == Target::I686 && g == regs::RBX))
        .fold(0, |s, &g| s | (1 << g))
        & used;
    if candidates == 0 {
        return None;
    }
    let clob = clobbered_while_live(vc, ra);
    let spare_bit: Set = 1 << spare.hw_enc();
    let free = (0..32)
        .filter(|&r| candidates & (1 << r) != 0 && clob[r] & spare_bit == 0)
        .map(|r| r as u8)
        .next()?;
    if used & spare_bit != 0 {
        let caller_saved = regs::c_caller_saved(target);
        let to = (0..16u8).find(|&g| {
            caller_saved.contains(regs::gpr(g))
                && !NOT_EVICT_TO.contains(&g)
                && used & (1 << g) == 0
                && clob[spare.hw_enc()] & (1 << g) == 0
        })?;
        rename(ra, spare, regs::gpr(to));
    }
    let from = regs::gpr(free);
    rename(ra, from, spare);
    Some(from)
}

/// The integer registers any allocation or move of the function names.
fn used_regs(ra: &regalloc2::Output) -> Set {
    let mut used: Set = ra.allocs.iter().fold(0, |s, &a| s | bit(a));
    for (_, Edit::Move { from, to }) in &ra.edits {
        used |= bit(*from) | bit(*to);
    }
    used
}

/// Every allocation and move of `from` becomes `to`.
fn rename(ra: &mut regalloc2::Output, from: PReg, to: PReg) {
    let (old, new) = (Allocation::reg(from), Allocation::reg(to));
    for a in ra.allocs.iter_mut() {
        if *a == old {
            *a = new;
        }
    }
    for (_, Edit::Move { from: f, to: t }) in ra.edits.iter_mut() {
        if *f == old {
            *f = new;
        }
        if *t == old {
            *t = new;
        }
    }
}

/// Per integer register: the integer registers clobbered by some instruction across which it
/// holds a value (live after the instruction and not defined by it). A backward liveness
/// over the allocated code, regalloc2's moves included, to a fixed point over the blocks.
fn clobbered_while_live(vc: &VCode, ra: &regalloc2::Output) -> [Set; 32] {
    let nb = vc.num_blocks();
    let mut live_in: Vec<Set> = vec![0; nb];
    let mut clob: [Set; 32] = [0; 32];
    loop {
        let mut changed = false;
        for b in (0..nb).rev() {
            let block = Block::new(b);
            let mut live: Set = vc
                .block_succs(block)
                .iter()
                .fold(0, |s, succ| s | live_in[succ.index()]);
            let items: Vec<_> = ra.block_insts_and_edits(vc, block).collect();
            for item in items.into_iter().rev() {
                match item {
                    InstOrEdit::Edit(Edit::Move { from, to }) => {
                        live &= !bit(*to);
                        live |= bit(*from);
                    }
                    InstOrEdit::Inst(i) => {
                        let inst = &vc.insts[i.index()];
                        let allocs = ra.inst_allocs(i);
                        let mut defs: Set = 0;
                        let mut uses: Set = 0;
                        for (op, &a) in inst.ops.iter().zip(allocs) {
                            match op.kind() {
                                OperandKind::Def => defs |= bit(a),
                                OperandKind::Use => uses |= bit(a),
                            }
                        }
                        let clobbers: Set = (0..16u8)
                            .filter(|&g| inst.clobbers.contains(regs::gpr(g)))
                            .fold(0, |s, g| s | (1 << g));
                        if clobbers != 0 {
                            let across = live & !defs;
                            for (r, c) in clob.iter_mut().enumerate() {
                                if across & (1 << r) != 0 {
                                    *c |= clobbers;
                                }
                            }
                        }
                        live = (live & !defs) | uses;
                    }
                }
            }
            if live != live_in[b] {
                live_in[b] = live;
                changed = true;
            }
        }
        if !changed {
            return clob;
        }
    }
}
