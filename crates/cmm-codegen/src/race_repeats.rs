//! `cmm compile --race`: the detector's calls for reads that repeat an access are left out.
//!
//! A read of the same bytes as an earlier instrumented read or write of the same function,
//! with no call on any path between them, is made by the same thread in the same epoch (a
//! thread's epoch changes only in the thread library, which is reached through a call): the
//! detector would find it redundant (FastTrack's same-epoch rule, or a read covered by the
//! write before it), and a write of another thread that races with it races with the earlier
//! access too, and is reported with it. So no race on the bytes goes unreported; only the
//! repeated read's own site is not named in a report. ThreadSanitizer's compiler pass leaves
//! out such accesses as well. The common case is a field read twice across a branch, as in
//! `if (v == n->value) ... else if (v < n->value)`: the thesis's Tree, where it was a fifth of
//! the `--race` build's time on i686.
//!
//! "The same bytes" is decided on the IR: the same address value (an SSA value is immutable,
//! or the same global's address) plus the same constant offset, and the same size. Repetition
//! is a forward "available accesses" analysis over the blocks in reverse postorder; a block
//! reached by a back edge starts with nothing available (so every iteration of a loop, a
//! spin-wait on a flag included, keeps its first access), as does a block after any call
//! other than the detector's own entries. Reads removed here take no decision of the
//! deterministic scheduler and count as no event of a schedule trace, in recording and replay
//! alike (both run the same executable).

use std::collections::{HashMap, HashSet};

use cranelift_codegen::dominator_tree::DominatorTree;
use cranelift_codegen::flowgraph::ControlFlowGraph;
use cranelift_codegen::ir::{
    self, ExternalName, GlobalValue, Inst, InstructionData, Opcode, UserExternalName, Value,
    ValueDef,
};

/// Where an address starts: an SSA value or a global's address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Root {
    Value(Value),
    Global(GlobalValue),
}

/// An access's bytes: root, constant offset, size.
type Key = (Root, i64, i64);

/// The detector's entries as `f` names them.
struct Entries {
    read: UserExternalName,
    write: UserExternalName,
}

/// What an instruction is to this analysis.
enum Kind {
    Read,
    Write,
    /// Any other call: it may synchronise.
    Call,
    Other,
}

fn iconst(f: &ir::Function, v: Value) -> Option<i64> {
    let ValueDef::Result(inst, _) = f.dfg.value_def(f.dfg.resolve_aliases(v)) else {
        return None;
    };
    match f.dfg.insts[inst] {
        InstructionData::UnaryImm {
            opcode: Opcode::Iconst,
            imm,
        } => Some(imm.bits()),
        _ => None,
    }
}

/// Block parameters that always hold one value: every reachable predecessor passes that value
/// (or the parameter itself, around a loop), so it is defined before the block and the
/// parameter is another name of it. The frontend gives a variable a parameter wherever edges
/// meet, also where one comes from a block nothing reaches (the code after a `return`):
/// `if (v == n->value) return 1; if (v < n->value) ...` would otherwise read through two roots.
type Same = HashMap<Value, Value>;

fn same_of(same: &Same, f: &ir::Function, mut v: Value) -> Value {
    loop {
        v = f.dfg.resolve_aliases(v);
        match same.get(&v) {
            Some(&w) => v = w,
            None => return v,
        }
    }
}

fn same_values(f: &ir::Function, cfg: &ControlFlowGraph, domtree: &DominatorTree) -> Same {
    let mut same = Same::new();
    let order: Vec<ir::Block> = domtree.cfg_rpo().copied().collect();
    // Each round names at least one more parameter or ends: a chain around loops settles in
    // as many rounds as it is long.
    loop {
        let mut changed = false;
        for &block in &order {
            for (i, &param) in f.dfg.block_params(block).iter().enumerate() {
                if same.contains_key(&param) {
                    continue;
                }
                let mut only: Option<Value> = None;
                let mut one = true;
                for pred in cfg.pred_iter(block) {
                    if !domtree.is_reachable(pred.block) {
                        continue;
                    }
                    let dests = f.dfg.insts[pred.inst]
                        .branch_destination(&f.dfg.jump_tables, &f.dfg.exception_tables);
                    for call in dests {
                        if call.block(&f.dfg.value_lists) != block {
                            continue;
                        }
                        match call.args(&f.dfg.value_lists).nth(i) {
                            Some(ir::BlockArg::Value(v)) => {
                                let v = same_of(&same, f, v);
                                if v == param {
                                    continue;
                                }
                                match only {
                                    None => only = Some(v),
                                    Some(o) if o == v => {}
                                    Some(_) => one = false,
                                }
                            }
                            _ => one = false,
                        }
                    }
                }
                if let (true, Some(v)) = (one, only) {
                    same.insert(param, v);
                    changed = true;
                }
            }
        }
        if !changed {
            return same;
        }
    }
}

/// The root and constant offset of address `v`.
fn address(f: &ir::Function, same: &Same, mut v: Value) -> (Root, i64) {
    let mut offset = 0i64;
    loop {
        // The frontend leaves a variable's uses in later blocks as aliases of its value.
        v = same_of(same, f, v);
        let ValueDef::Result(inst, _) = f.dfg.value_def(v) else {
            return (Root::Value(v), offset);
        };
        match f.dfg.insts[inst] {
            InstructionData::Binary {
                opcode: Opcode::Iadd,
                args: [a, b],
            } => match (iconst(f, a), iconst(f, b)) {
                (_, Some(c)) => {
                    offset = offset.wrapping_add(c);
                    v = a;
                }
                (Some(c), _) => {
                    offset = offset.wrapping_add(c);
                    v = b;
                }
                _ => return (Root::Value(v), offset),
            },
            InstructionData::UnaryGlobalValue {
                opcode: Opcode::SymbolValue,
                global_value,
            } => return (Root::Global(global_value), offset),
            _ => return (Root::Value(v), offset),
        }
    }
}

fn kind(f: &ir::Function, e: &Entries, inst: Inst) -> Kind {
    match f.dfg.insts[inst] {
        InstructionData::Call { func_ref, .. } => {
            let ExternalName::User(r) = &f.dfg.ext_funcs[func_ref].name else {
                return Kind::Call;
            };
            let name = &f.params.user_named_funcs()[*r];
            if *name == e.read {
                Kind::Read
            } else if *name == e.write {
                Kind::Write
            } else {
                Kind::Call
            }
        }
        _ if f.dfg.insts[inst].opcode().is_call() => Kind::Call,
        _ => Kind::Other,
    }
}

/// The bytes an entry call (`addr, size, site`) checks, if its size is a constant.
fn key(f: &ir::Function, same: &Same, call: Inst) -> Option<Key> {
    let args = f.dfg.inst_args(call);
    let (root, offset) = address(f, same, *args.first()?);
    Some((root, offset, iconst(f, *args.get(1)?)?))
}

/// Removes from `f` the calls of the read entry `read` that repeat an access (module docs);
/// `write` is the write entry. Returns how many it removed.
pub fn remove_repeated_reads(
    f: &mut ir::Function,
    read: UserExternalName,
    write: UserExternalName,
) -> usize {
    let e = Entries { read, write };
    let cfg = ControlFlowGraph::with_function(f);
    let domtree = DominatorTree::with_function(f, &cfg);
    let order: Vec<ir::Block> = domtree.cfg_rpo().copied().collect();
    let entry = f.layout.entry_block();
    let same = same_values(f, &cfg, &domtree);
    let mut out: HashMap<ir::Block, HashSet<Key>> = HashMap::new();
    let mut repeated: Vec<Inst> = Vec::new();
    for &block in &order {
        let mut avail: HashSet<Key> = HashSet::new();
        if Some(block) != entry {
            let mut first = true;
            let mut all_seen = true;
            // A block nothing reaches passes nothing (the code after a `return`).
            for p in cfg
                .pred_iter(block)
                .filter(|p| domtree.is_reachable(p.block))
            {
                match out.get(&p.block) {
                    Some(o) if first => {
                        avail = o.clone();
                        first = false;
                    }
                    Some(o) => avail.retain(|k| o.contains(k)),
                    // A back edge: nothing is known there yet.
                    None => all_seen = false,
                }
            }
            if !all_seen {
                avail.clear();
            }
        }
        for inst in f.layout.block_insts(block) {
            match kind(f, &e, inst) {
                Kind::Read => match key(f, &same, inst) {
                    Some(k) if avail.contains(&k) => repeated.push(inst),
                    Some(k) => {
                        avail.insert(k);
                    }
                    None => {}
                },
                Kind::Write => {
                    if let Some(k) = key(f, &same, inst) {
                        avail.insert(k);
                    }
                }
                Kind::Call => avail.clear(),
                Kind::Other => {}
            }
        }
        out.insert(block, avail);
    }
    // The removed calls' constant arguments go too when nothing else uses them.
    let mut uses: HashMap<Value, usize> = HashMap::new();
    for block in f.layout.blocks() {
        for inst in f.layout.block_insts(block) {
            for v in f.dfg.inst_values(inst) {
                *uses.entry(f.dfg.resolve_aliases(v)).or_default() += 1;
            }
        }
    }
    for &call in &repeated {
        let args: Vec<Value> = f.dfg.inst_args(call).to_vec();
        f.layout.remove_inst(call);
        for a in args {
            let a = f.dfg.resolve_aliases(a);
            let n = uses.entry(a).or_default();
            *n = n.saturating_sub(1);
            if *n == 0 && iconst(f, a).is_some() {
                if let ValueDef::Result(def, _) = f.dfg.value_def(a) {
                    if f.layout.inst_block(def).is_some() {
                        f.layout.remove_inst(def);
                    }
                }
            }
        }
    }
    repeated.len()
}

#[cfg(test)]
mod tests {
    use crate::emit::{emit_program, EmitOptions, MechKind, Target};
    use cmm_front::TargetInfo;

    /// The detector's read calls in the emitted code of `f`'s body, for both targets.
    fn reads(body: &str) -> usize {
        let src = format!(
            "struct s {{ int a; int b; char c; }};\nint g;\nint h;\nextern int abs(int x);\n\
             int f(struct s *p, int v) {{\n{body}\n}}\n\
             int main() {{ struct s x; return f(&x, 1); }}\n"
        );
        let mut counts = Vec::new();
        for (info, target) in [
            (TargetInfo::X86_64, Target::X86_64),
            (TargetInfo::I686, Target::I686),
        ] {
            let typed = cmm_front::check_rendered("t.cm", &src, info).expect("valid C--");
            let lowered = crate::lower::lower_program_race(&typed, "t.cm", &src);
            let opts = EmitOptions {
                target,
                mech: MechKind::Traditional,
            };
            let asm = emit_program(&lowered, &opts).expect("emits");
            let start = asm.find("# C-- function `f`").expect("f");
            let end = start + asm[start..].find(".size cmm_f,").expect("end of f");
            counts.push(asm[start..end].matches("call __stackrt_race_read").count());
        }
        assert_eq!(counts[0], counts[1], "x86-64 and i686 differ: {body}");
        counts[0]
    }

    #[test]
    fn repeated_reads_are_left_out_and_others_kept() {
        // Read twice across a branch (the Tree's search): once.
        assert_eq!(
            reads("if (v == p->a) { return 1; } else if (v < p->a) { return 2; } return 3;"),
            1
        );
        // The same after an `if` that returns: the code after the `return` joins the second
        // test, unreachable, with values of its own.
        assert_eq!(
            reads("if (v == p->a) return 1; if (v < p->a) return 2; return 3;"),
            1
        );
        assert_eq!(
            reads("while (v > 0) { if (p->b == v) return 1; if (v < p->b) v = v - 2; else v = v - 1; } return 0;"),
            1
        );
        // A read after a write of the same bytes: only the write.
        assert_eq!(reads("p->b = v; return p->b;"), 0);
        assert_eq!(reads("g = v; return g + g;"), 0);
        // Other bytes: another field, another size, another global.
        assert_eq!(reads("return p->a + p->b;"), 2);
        assert_eq!(reads("return p->c + p->a;"), 2);
        assert_eq!(reads("return g + h;"), 2);
        // A call between may synchronise: read again.
        assert_eq!(reads("int x; x = g; abs(1); return x + g;"), 2);
        // On one path only: read again where the paths meet.
        assert_eq!(reads("int x; x = 0; if (v) { x = g; } return x + g;"), 2);
        // On both paths: once more is not needed.
        assert_eq!(
            reads("int x; if (v) { x = g; } else { x = g + 1; } return x + g;"),
            2
        );
        // Every iteration of a loop keeps its read (a spin-wait on a flag).
        assert_eq!(reads("while (g == 0) { } return 0;"), 1);
        assert_eq!(
            reads("int i; i = 0; while (i < v) { i = i + g; } return i;"),
            1
        );
    }
}
