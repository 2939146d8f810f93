//! Choosing, per function, whether it takes `edi` as its own spare register: the whole-program
//! step that gives i686 under the mechanisms reserving `ebp` what every other configuration
//! has, a register C preserves and C-- calls clobber ([`regs::spare`]).
//!
//! On x86-64 and under the fixed-stack mechanisms the spare is the program's convention: one
//! C-preserved register stays out of the preserved set, so a value that lives across C calls
//! but no C-- call costs no save. i686 under `lookahead`, `mmu`, `mmu-reuse`, `heap` and `mtss`
//! has four C-preserved registers and `ebp` is reserved; with a program-wide spare only two
//! would be preserved across C-- calls, too few for the green threads' recursions (their
//! frames grew by a spill). So each function decides for itself: a *spare user* preserves
//! `ebx` and `esi` only, and every call to it clobbers `edi` as well, which its callers, known
//! since the program is compiled whole, take into account (a caller that preserves `edi` saves
//! it when it calls a spare user). A recursion like `crates/bench/programs/deep_repeat.cm`'s
//! `down` then keeps the value it holds across its C call in `edi` and saves one register
//! instead of two per activation, as under `callee-cleanup`, which has `ebp` for it.
//!
//! The rule:
//! * Only functions every caller of which is compiled here are candidates: not `main` and not
//!   a function whose address is taken (thread entries, C callbacks: the runtime and C call
//!   them and expect the program's convention), and not a function in a cycle of calls through
//!   other functions (a caller in the cycle would be allocated before the decision; a
//!   function's calls to itself are allocated with it). The copies of an unrolled recursion
//!   ([`crate::unroll`]) count as their original, so their ring is a self-recursion, and
//!   take the original's decision: they are the same function.
//! * Candidates are decided callees first (a post-order of the call graph), so every call a
//!   function makes has its clobbers settled when the function is allocated.
//! * A candidate is allocated both ways and becomes a spare user when that saves registers:
//!   fewer saved registers plus spill slots, or as many and fewer moves. Its callers' extra
//!   save of `edi`, once per activation of a caller, is not counted; a caller that is itself a
//!   candidate avoids it by becoming a spare user.

use std::collections::HashSet;

use super::mech::Mechanism;
use super::vcode::VCode;
use super::{isel, print, regs, EmitError, Target};
use crate::lower::LoweredProgram;

/// What [`spare_users`] decided.
pub struct Plan {
    /// The symbols of the functions that take their own spare (module docs); empty where the
    /// program's convention has a spare.
    pub users: HashSet<String>,
    /// Per function, the VCode of its chosen convention if the decision made it (a candidate's
    /// VCode depends only on its callees' and its own decision, all made by then), so that
    /// printing does not select its instructions again.
    pub vcodes: Vec<Option<VCode>>,
}

/// Decides every function's convention (module docs).
pub fn spare_users(
    p: &LoweredProgram,
    target: Target,
    mech: &dyn Mechanism,
) -> Result<Plan, EmitError> {
    let n = p.functions.len();
    let mut plan = Plan {
        users: HashSet::new(),
        vcodes: (0..n).map(|_| None).collect(),
    };
    let reserved = mech.reserved_regs(target);
    if regs::per_function_spare(target, &reserved).is_none() {
        return Ok(plan);
    }
    // A copy is its original here: the graph's nodes are the source's functions.
    let original: Vec<usize> = (0..n)
        .map(|i| p.functions[i].copy_of.map_or(i, |o| o as usize))
        .collect();
    let mut callees: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, list) in direct_callees(p).into_iter().enumerate() {
        for j in list {
            let (i, j) = (original[i], original[j]);
            if !callees[i].contains(&j) {
                callees[i].push(j);
            }
        }
    }
    let ring = |i: usize| -> Vec<String> {
        (0..n)
            .filter(|&k| original[k] == i)
            .map(|k| p.functions[k].symbol.clone())
            .collect()
    };
    let taken = super::address_taken(p);
    let candidate: Vec<bool> = (0..n)
        .map(|i| {
            original[i] == i
                && !taken[i]
                && p.functions[i].name != "main"
                && !callees[i]
                    .iter()
                    .any(|&j| j != i && reaches(&callees, j, i))
        })
        .collect();
    for i in post_order(&callees) {
        if !candidate[i] {
            continue;
        }
        let err = |message: String| EmitError {
            function: Some(p.functions[i].name.clone()),
            message,
        };
        let trial = |users: &HashSet<String>, user: bool| -> Result<_, EmitError> {
            let vc = isel::lower_function(p, i, target, mech, users).map_err(err)?;
            let conv = regs::convention(target, &reserved, user);
            let (ra, saved) = print::allocate(&vc, target, mech, conv).map_err(err)?;
            Ok(((saved.len() + ra.num_spillslots, ra.edits.len()), vc))
        };
        let (keeping, vc_keeping) = trial(&plan.users, false)?;
        let symbols = ring(i);
        plan.users.extend(symbols.iter().cloned());
        let (taking, vc_taking) = trial(&plan.users, true)?;
        plan.vcodes[i] = Some(if taking < keeping {
            vc_taking
        } else {
            for s in &symbols {
                plan.users.remove(s);
            }
            vc_keeping
        });
    }
    Ok(plan)
}

/// Per function, the C-- functions it calls directly (each once, in no particular order).
fn direct_callees(p: &LoweredProgram) -> Vec<Vec<usize>> {
    p.functions
        .iter()
        .map(|lf| {
            let mut out: Vec<usize> = Vec::new();
            for (call, j) in super::function_refs(p, &lf.func) {
                if call && !out.contains(&j) {
                    out.push(j);
                }
            }
            out
        })
        .collect()
}

/// Whether `to` is reachable from `from` by calls (an explicit stack: call chains of generated
/// programs may be long).
fn reaches(callees: &[Vec<usize>], from: usize, to: usize) -> bool {
    let mut seen = vec![false; callees.len()];
    let mut stack = vec![from];
    seen[from] = true;
    while let Some(f) = stack.pop() {
        if f == to {
            return true;
        }
        for &g in &callees[f] {
            if !seen[g] {
                seen[g] = true;
                stack.push(g);
            }
        }
    }
    false
}

/// Every function once, each after the functions it calls except along a cycle.
fn post_order(callees: &[Vec<usize>]) -> Vec<usize> {
    let n = callees.len();
    let mut seen = vec![false; n];
    let mut out = Vec::with_capacity(n);
    for root in 0..n {
        if seen[root] {
            continue;
        }
        seen[root] = true;
        // (function, index of its next callee to visit)
        let mut stack = vec![(root, 0usize)];
        while let Some(top) = stack.last_mut() {
            let (f, next) = *top;
            if let Some(&g) = callees[f].get(next) {
                top.1 += 1;
                if !seen[g] {
                    seen[g] = true;
                    stack.push((g, 0));
                }
            } else {
                out.push(f);
                stack.pop();
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn post_order_puts_callees_first_and_cycles_anywhere() {
        // 0 -> 1 -> 2, 0 -> 2, 3 -> 3 (self), 4 <-> 5.
        let g = vec![vec![1, 2], vec![2], vec![], vec![3], vec![5], vec![4]];
        let order = post_order(&g);
        let at = |f: usize| order.iter().position(|&x| x == f).unwrap();
        assert_eq!(order.len(), 6);
        assert!(at(2) < at(1) && at(1) < at(0));
        assert!(reaches(&g, 4, 5) && reaches(&g, 5, 4));
        assert!(reaches(&g, 0, 2) && !reaches(&g, 2, 0));
        assert!(reaches(&g, 3, 3));
    }
}
