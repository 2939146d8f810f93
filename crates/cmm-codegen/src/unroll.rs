//! Recursion unrolling, a whole-program step on the lowered IR: a small self-recursive
//! function gets `k - 1` copies, and its recursive calls go round the ring of the `k` copies,
//! so that a mechanism which checks for room on every call of a call-graph cycle checks on one
//! call in `k` (issue 26, "checking once per k levels of a self-recursion with a k-frame
//! reserve").
//!
//! # Why
//!
//! `lookahead` puts a checkpoint on every back edge of the call graph ([`crate::callgraph`]),
//! so a self-recursion tests its chunk's limit on every call: a compare with a memory operand
//! and a branch, 8-15% of a call that does little else (`call_depth`, x86-64). With the ring
//! `f → f#1 → … → f#(k-1) → f`, the depth-first search of the analysis sees one back edge,
//! the call into `f` from its last copy; the other calls are ordinary edges of an acyclic
//! graph, covered by that checkpoint's reserve, which grows by `k - 1` frames. Nothing else
//! changes: every cycle still has a checkpoint, the reserve covers every path between two of
//! them, and the runtime's overflow and underflow paths are the same code.
//!
//! # The rule
//!
//! A function is unrolled when it calls itself directly and its IR has at most
//! [`MAX_INSTS`] instructions (the copies cost code size, `k` times the function). Mutual
//! recursion is left as it is. Calls from other functions, and every use of the function's
//! address, keep naming the original, so the copies are reached only through the ring; a copy
//! is a local function named `f#c` (symbol `cmm_f.c`, which no C-- identifier can spell).
//!
//! # Indices
//!
//! The copies are appended after the program's functions. Function indices of namespace 0 at
//! or past `functions.len()` name externs ([`LoweredProgram::extern_func_index`]), so every
//! function's names of externs move up by the number of copies. Data indices do not change:
//! the copies have no frame-size cell (`stacksizeof(f)` is the original's frame, which every
//! copy shares).

use cranelift_codegen::ir::{
    ExtFuncData, ExternalName, InstructionData, UserExternalName, UserFuncName,
};

use crate::lower::{LoweredFunction, LoweredProgram, FUNC_NAMESPACE};

/// Copies of a self-recursive function in the ring, the original included: one checkpoint
/// every `UNROLL` levels. Measured on `call_depth` (x86-64, 64 and 1,000 deep): 2 and 4
/// copies both take the checkpoint's cost off; 4 keeps it off with one frame more per
/// checkpoint test for the mispredictions of the check.
pub const UNROLL: u32 = 4;

/// The largest function, in IR instructions, that is unrolled.
pub const MAX_INSTS: usize = 200;

/// Whether function `i` of `p` calls itself, and how many instructions its IR has.
fn self_recursive(p: &LoweredProgram, i: usize) -> Option<usize> {
    let f = &p.functions[i].func;
    let mut insts = 0;
    let mut recursive = false;
    for block in f.layout.blocks() {
        for inst in f.layout.block_insts(block) {
            insts += 1;
            if let InstructionData::Call { func_ref, .. } = f.dfg.insts[inst] {
                recursive |= names_function(p, f, func_ref) == Some(i);
            }
        }
    }
    recursive.then_some(insts)
}

/// The C-- function (index) `func_ref` names in `f`, if it names one.
fn names_function(
    p: &LoweredProgram,
    f: &cranelift_codegen::ir::Function,
    func_ref: cranelift_codegen::ir::FuncRef,
) -> Option<usize> {
    let ExternalName::User(r) = &f.dfg.ext_funcs[func_ref].name else {
        return None;
    };
    let name = &f.params.user_named_funcs()[*r];
    (name.namespace == FUNC_NAMESPACE && (name.index as usize) < p.functions.len())
        .then_some(name.index as usize)
}

/// The functions [`unroll`] would unroll, by index.
pub fn candidates(p: &LoweredProgram) -> Vec<usize> {
    (0..p.functions.len())
        .filter(|&i| self_recursive(p, i).is_some_and(|n| n <= MAX_INSTS))
        .collect()
}

/// `p` with every candidate unrolled into a ring of [`UNROLL`] copies (module docs); `None`
/// when there is no candidate.
pub fn unroll(p: &LoweredProgram) -> Option<LoweredProgram> {
    let chosen = candidates(p);
    if chosen.is_empty() {
        return None;
    }
    let mut out = p.clone();
    let n = p.functions.len() as u32;
    let added = chosen.len() as u32 * (UNROLL - 1);
    // Externs move up past the copies; rename from the highest index down, so that no name
    // is renamed onto one not yet renamed (the function's table deduplicates names).
    for lf in &mut out.functions {
        shift_externs(&mut lf.func, n, added);
    }
    let mut copies = Vec::with_capacity(added as usize);
    for (j, &i) in chosen.iter().enumerate() {
        // Copy c of function i: c = 0 is the original, copies 1.. are appended in order.
        let index_of = |c: u32| {
            if c == 0 {
                i as u32
            } else {
                n + j as u32 * (UNROLL - 1) + (c - 1)
            }
        };
        let original = out.functions[i].clone();
        for c in 0..UNROLL {
            let next = index_of((c + 1) % UNROLL);
            if c == 0 {
                retarget_self_calls(p, &mut out.functions[i].func, i, next);
                continue;
            }
            let mut func = original.func.clone();
            func.name = UserFuncName::user(FUNC_NAMESPACE, index_of(c));
            retarget_self_calls(p, &mut func, i, next);
            copies.push(LoweredFunction {
                name: format!("{}#{c}", original.name),
                symbol: format!("{}.{c}", original.symbol),
                func,
                copy_of: Some(i as u32),
            });
        }
    }
    out.functions.extend(copies);
    Some(out)
}

/// Renames every name of an extern (namespace 0, index `>= n`) in `func` to `index + added`.
fn shift_externs(func: &mut cranelift_codegen::ir::Function, n: u32, added: u32) {
    let mut names: Vec<_> = func
        .params
        .user_named_funcs()
        .iter()
        .filter(|(_, name)| name.namespace == FUNC_NAMESPACE && name.index >= n)
        .map(|(r, name)| (r, name.index))
        .collect();
    names.sort_by_key(|&(_, index)| std::cmp::Reverse(index));
    for (r, index) in names {
        func.params
            .reset_user_func_name(r, UserExternalName::new(FUNC_NAMESPACE, index + added));
    }
}

/// Makes every direct call of function `me` in `func` (the original's IR or a copy's) call
/// function `next` instead; references to `me`'s address are left alone.
fn retarget_self_calls(
    p: &LoweredProgram,
    func: &mut cranelift_codegen::ir::Function,
    me: usize,
    next: u32,
) {
    let mut target = None;
    let calls: Vec<_> = func
        .layout
        .blocks()
        .flat_map(|b| func.layout.block_insts(b))
        .filter(|&inst| {
            matches!(func.dfg.insts[inst], InstructionData::Call { func_ref, .. }
                if names_function(p, func, func_ref) == Some(me))
        })
        .collect();
    for inst in calls {
        let InstructionData::Call { func_ref, .. } = func.dfg.insts[inst] else {
            continue;
        };
        let new_ref = *target.get_or_insert_with(|| {
            let old = func.dfg.ext_funcs[func_ref].clone();
            let name =
                func.declare_imported_user_function(UserExternalName::new(FUNC_NAMESPACE, next));
            func.import_function(ExtFuncData {
                name: ExternalName::User(name),
                signature: old.signature,
                colocated: old.colocated,
                patchable: old.patchable,
            })
        });
        if let InstructionData::Call { func_ref, .. } = &mut func.dfg.insts[inst] {
            *func_ref = new_ref;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lower::NameTarget;
    use cmm_front::TargetInfo;

    fn lowered(src: &str) -> LoweredProgram {
        let typed = cmm_front::check_rendered("t.cm", src, TargetInfo::X86_64).expect("valid C--");
        crate::lower::lower_program(&typed)
    }

    /// Every call and address reference of function `i`, resolved: (is a call, target).
    fn refs(p: &LoweredProgram, i: usize) -> Vec<(bool, NameTarget)> {
        let f = &p.functions[i].func;
        let mut out = Vec::new();
        for block in f.layout.blocks() {
            for inst in f.layout.block_insts(block) {
                let (call, func_ref) = match f.dfg.insts[inst] {
                    InstructionData::Call { func_ref, .. } => (true, func_ref),
                    InstructionData::FuncAddr { func_ref, .. } => (false, func_ref),
                    _ => continue,
                };
                let ExternalName::User(r) = &f.dfg.ext_funcs[func_ref].name else {
                    continue;
                };
                out.push((
                    call,
                    p.resolve(&f.params.user_named_funcs()[*r])
                        .expect("resolves"),
                ));
            }
        }
        out
    }

    const SRC: &str = "extern int abs(int x);\nextern int sthread_create(int f, int a);\n\
        int leaf(int x) { return abs(x); }\n\
        int ping(int n);\n\
        int pong(int n) { if (n == 0) { return 0; } return ping(n - 1); }\n\
        int ping(int n) { if (n == 0) { return 0; } return pong(n - 1); }\n\
        int down(int n) { if (n == 0) { return abs(n) + sthread_create(down, 0); }\n\
          return down(n - 1) + down(n - 2) + leaf(n); }\n\
        int main() { return down(3) + ping(4); }\n";

    #[test]
    fn only_direct_self_recursions_small_enough_are_candidates() {
        let p = lowered(SRC);
        let names: Vec<&str> = candidates(&p)
            .iter()
            .map(|&i| p.functions[i].name.as_str())
            .collect();
        assert_eq!(names, ["down"]);
        let big = format!(
            "int f(int n) {{ int s; s = 0; {} if (n == 0) {{ return s; }} return f(n - 1) + s; }}\n\
             int main() {{ return f(2); }}\n",
            "s = s * 3 + n; ".repeat(MAX_INSTS)
        );
        assert!(candidates(&lowered(&big)).is_empty());
    }

    #[test]
    fn the_ring_calls_round_and_everything_else_names_what_it_named() {
        let p = lowered(SRC);
        let u = unroll(&p).expect("down is a candidate");
        let n = p.functions.len();
        let down = p.functions.iter().position(|f| f.name == "down").unwrap();
        assert_eq!(u.functions.len(), n + UNROLL as usize - 1);
        assert_eq!(u.externs.len(), p.externs.len());
        // The ring: down -> down#1 -> down#2 -> down#3 -> down; each copy also still calls
        // `leaf`, the externs, and takes the original's address.
        let ring: Vec<usize> = std::iter::once(down).chain(n..n + 3).collect();
        for (c, &i) in ring.iter().enumerate() {
            let f = &u.functions[i];
            if c > 0 {
                assert_eq!(f.name, format!("down#{c}"));
                assert_eq!(f.symbol, format!("cmm_down.{c}"));
                assert_eq!(f.copy_of, Some(down as u32));
                assert_eq!(f.func.name, UserFuncName::user(FUNC_NAMESPACE, i as u32));
            }
            let next = ring[(c + 1) % ring.len()] as u32;
            let got = refs(&u, i);
            let want = refs(&p, down)
                .into_iter()
                .map(|(call, t)| match t {
                    NameTarget::Function(d) if call && d as usize == down => {
                        (call, NameTarget::Function(next))
                    }
                    other => (call, other),
                })
                .collect::<Vec<_>>();
            assert_eq!(got, want, "copy {c}");
            assert!(got.contains(&(false, NameTarget::Function(down as u32))));
        }
        // The other functions name what they named, externs included.
        for i in (0..n).filter(|&i| i != down) {
            assert_eq!(refs(&u, i), refs(&p, i), "{}", p.functions[i].name);
        }
        assert!(crate::verify(&u).is_ok());
    }

    #[test]
    fn the_plan_has_one_checkpoint_per_ring() {
        use crate::emit::{mech::lookahead, Target};
        let p = lowered(SRC);
        let plan = lookahead::plan_program(&p, Target::X86_64, 32768).expect("plans");
        // The ring's back edges, `down#3`'s two calls of `down`, and one on ping and pong's
        // cycle; `down`'s reserve spans the ring's four frames.
        assert_eq!(plan.checkpoint_count(), 3, "{plan}");
        for f in &plan.functions {
            let checked = f.sites.iter().filter(|s| s.checkpoint.is_some()).count();
            let want = match f.name.as_str() {
                "down#3" => 2,
                "pong" | "ping" => checked,
                _ => 0,
            };
            assert_eq!(checked, want, "{plan}");
        }
        let down = plan.functions.iter().find(|f| f.name == "down").unwrap();
        assert!(down.longest_path >= 4 * down.frame, "{plan}");
    }
}
