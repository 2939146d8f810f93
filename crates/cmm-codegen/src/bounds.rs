//! Static stack bounds from the call graph: every function's worst-case stack use in bytes,
//! exact where no cycle lies below it, else `unbounded` with the cycle that makes it so.
//!
//! # Model
//!
//! The same as the look-ahead analysis' ([`crate::callgraph`]), without checkpoints:
//!
//! * a function's **frame** is what one activation occupies below its incoming arguments: the
//!   bytes its caller pushes besides the arguments (the return address, [`BoundsFunction::frame`]
//!   includes them) plus what its prologue reserves, as the emission stage lays it out under the
//!   chosen mechanism and target;
//! * a call site pushes `arg bytes` below the caller's frame (arguments and alignment padding);
//! * `need(f) = frame(f) + max(0, arg bytes(s) + need(callee(s)) for the call sites s of f)`,
//!   where a C function's need is a documented budget ([`BoundsConfig`]);
//! * the **bound** of `f` is `in(f) + need(f)`: the bytes from the stack pointer before a caller
//!   pushes `f`'s arguments (`in(f)`, the runtime's entry bytes for `main`) down to the deepest
//!   byte `f` and its callees can reach. A thread whose entry function has bound `B` never needs
//!   more than `B` bytes of stack below where the runtime enters it.
//!
//! A function on a cycle of the call graph (recursion, mutual recursion) has no bound; neither
//! has one that can reach such a function. C-- has no calls through pointers (a function whose
//! address is taken is only ever a thread entry, a root of its own thread's stack), so every
//! other function's bound is exact for the frames the emission stage printed.
//!
//! # Algorithm
//!
//! Tarjan's strongly connected components give the functions callee-first; a component is a
//! cycle if it has more than one function or a function calling itself. A function of a cyclic
//! component reports the shortest cycle through itself (a breadth-first search inside the
//! component); a function that only reaches one reports the first such callee's cycle, in call
//! order. Everything else is a maximum over already final callees.

use std::collections::VecDeque;
use std::fmt;

use crate::callgraph::CallSite;
use cmm_front::typed::Callee;

/// One function as the emission stage printed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BoundsFunction {
    pub name: String,
    /// Bytes of incoming arguments the caller pushes (for `main`, the runtime's entry bytes).
    pub arg_bytes: u32,
    /// Bytes the caller pushes besides the arguments plus the bytes the prologue reserves.
    pub frame: u32,
    /// Call sites in program order.
    pub calls: Vec<CallSite>,
    /// A root: `main` or a thread entry (its address is taken).
    pub root: bool,
}

/// The whole program: functions by index ([`Callee::Function`]) and externs by index
/// ([`Callee::Extern`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BoundsInput {
    pub functions: Vec<BoundsFunction>,
    pub externs: Vec<String>,
}

/// What the analysis counts for a call to C.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BoundsConfig {
    /// `"x86_64"` or `"i686"` and the mechanism's name, for the header of the text.
    pub target: String,
    pub mech: String,
    /// Bytes a call to the extern named `name` needs below its pushed arguments.
    pub budgets: Vec<u32>,
    /// One line saying how `budgets` were chosen (printed in the header).
    pub budget_note: String,
}

/// A function's worst-case stack use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Bound {
    /// Exactly this many bytes at most (see the module docs for where they are counted from).
    Bytes(u64),
    /// No bound: the functions of a cycle below it, the first repeated at the end
    /// (`["f", "g", "f"]`).
    Unbounded(Vec<String>),
}

/// The analysis result: one bound per function, in program order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StackBounds {
    pub names: Vec<String>,
    pub roots: Vec<bool>,
    pub bounds: Vec<Bound>,
    pub config: BoundsConfig,
}

impl StackBounds {
    /// The bound of the function named `name`.
    pub fn of(&self, name: &str) -> Option<&Bound> {
        let i = self.names.iter().position(|n| n == name)?;
        self.bounds.get(i)
    }
}

/// Computes every function's bound.
pub fn analyze(input: &BoundsInput, config: &BoundsConfig) -> StackBounds {
    let n = input.functions.len();
    let succ: Vec<Vec<usize>> = input
        .functions
        .iter()
        .map(|f| {
            f.calls
                .iter()
                .filter_map(|c| match c.callee {
                    Callee::Function(g) if (g as usize) < n => Some(g as usize),
                    _ => None,
                })
                .collect()
        })
        .collect();
    let (comp, order) = tarjan(&succ);
    // need(f) as above, or the cycle that leaves it without one.
    let mut need: Vec<Option<Result<u64, Vec<usize>>>> = vec![None; n];
    for members in &order {
        let cyclic = members.len() > 1 || succ[members[0]].contains(&members[0]);
        for &f in members {
            let result = if cyclic {
                Err(shortest_cycle(f, &succ, &comp))
            } else {
                let node = &input.functions[f];
                let mut deepest = 0u64;
                let mut unbounded = None;
                for c in &node.calls {
                    let below = match c.callee {
                        Callee::Function(g) => match need[g as usize].as_ref() {
                            Some(Ok(b)) => *b,
                            Some(Err(cycle)) => {
                                unbounded.get_or_insert_with(|| cycle.clone());
                                continue;
                            }
                            // Callees come first in Tarjan's order; an index out of range is a
                            // malformed input, counted as nothing rather than a panic.
                            None => 0,
                        },
                        Callee::Extern(e) => {
                            u64::from(config.budgets.get(e as usize).copied().unwrap_or(0))
                        }
                    };
                    deepest = deepest.max(u64::from(c.arg_bytes) + below);
                }
                match unbounded {
                    Some(cycle) => Err(cycle),
                    None => Ok(u64::from(node.frame) + deepest),
                }
            };
            need[f] = Some(result);
        }
    }
    let bounds = input
        .functions
        .iter()
        .zip(need)
        .map(|(f, r)| match r {
            Some(Ok(b)) => Bound::Bytes(u64::from(f.arg_bytes) + b),
            Some(Err(cycle)) => Bound::Unbounded(
                cycle
                    .iter()
                    .map(|&i| input.functions[i].name.clone())
                    .collect(),
            ),
            None => Bound::Bytes(0),
        })
        .collect();
    StackBounds {
        names: input.functions.iter().map(|f| f.name.clone()).collect(),
        roots: input.functions.iter().map(|f| f.root).collect(),
        bounds,
        config: config.clone(),
    }
}

/// Tarjan's algorithm, iterative: the component of every node and the components in the order
/// they complete (every component after the components it calls into).
fn tarjan(succ: &[Vec<usize>]) -> (Vec<usize>, Vec<Vec<usize>>) {
    let n = succ.len();
    const NONE: usize = usize::MAX;
    let mut index = vec![NONE; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut comp = vec![NONE; n];
    let mut order = Vec::new();
    let mut next = 0;
    for root in 0..n {
        if index[root] != NONE {
            continue;
        }
        // (node, next successor to look at)
        let mut work = vec![(root, 0usize)];
        index[root] = next;
        low[root] = next;
        next += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(&mut (v, ref mut k)) = work.last_mut() {
            if let Some(&w) = succ[v].get(*k) {
                *k += 1;
                if index[w] == NONE {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(u, _)) = work.last() {
                low[u] = low[u].min(low[v]);
            }
            if low[v] == index[v] {
                let id = order.len();
                let mut members = Vec::new();
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    comp[w] = id;
                    members.push(w);
                    if w == v {
                        break;
                    }
                }
                members.reverse();
                order.push(members);
            }
        }
    }
    (comp, order)
}

/// The shortest cycle from `f` back to `f` inside `f`'s component, `f` first and last.
fn shortest_cycle(f: usize, succ: &[Vec<usize>], comp: &[usize]) -> Vec<usize> {
    let mut parent = vec![usize::MAX; succ.len()];
    let mut queue = VecDeque::from([f]);
    while let Some(v) = queue.pop_front() {
        for &w in &succ[v] {
            if comp[w] != comp[f] {
                continue;
            }
            if w == f {
                let mut path = vec![f];
                let mut u = v;
                while u != f {
                    path.push(u);
                    u = parent[u];
                }
                // Collected backwards from the last function before `f`.
                path[1..].reverse();
                path.push(f);
                return path;
            }
            if parent[w] == usize::MAX {
                parent[w] = v;
                queue.push_back(w);
            }
        }
    }
    // Not reached for a cyclic component; a one-element "cycle" is still a truthful report.
    vec![f, f]
}

impl fmt::Display for StackBounds {
    /// The text of `cmm compile FILE --emit stack-bounds`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "# stack bounds: target {}, mechanism {}",
            self.config.target, self.config.mech
        )?;
        writeln!(
            f,
            "# bytes from the stack pointer before a call pushes the function's arguments to the \
             deepest byte it and its callees reach"
        )?;
        writeln!(f, "# {}", self.config.budget_note)?;
        let width = self.names.iter().map(|n| n.len()).max().unwrap_or(0);
        for ((name, bound), root) in self.names.iter().zip(&self.bounds).zip(&self.roots) {
            let entry = if *root { "  (thread entry)" } else { "" };
            let entry = if name == "main" {
                "  (program entry)"
            } else {
                entry
            };
            match bound {
                Bound::Bytes(b) => writeln!(f, "{name:<width$}  {b}{entry}")?,
                Bound::Unbounded(cycle) => {
                    writeln!(f, "{name:<width$}  unbounded: {}{entry}", cycle.join(" → "))?
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn func(name: &str, arg_bytes: u32, frame: u32, calls: &[(Callee, u32)]) -> BoundsFunction {
        BoundsFunction {
            name: name.into(),
            arg_bytes,
            frame,
            calls: calls
                .iter()
                .map(|&(callee, arg_bytes)| CallSite { callee, arg_bytes })
                .collect(),
            root: false,
        }
    }

    fn config(budgets: &[u32]) -> BoundsConfig {
        BoundsConfig {
            target: "x86_64".into(),
            mech: "traditional".into(),
            budgets: budgets.to_vec(),
            budget_note: "test".into(),
        }
    }

    use Callee::{Extern as E, Function as F};

    /// main(0 in, 24) → a(8 in, 40) → b(16 in, 8); main → c(0 in, 100) → puts.
    /// b: 16 + 8 = 24. a: 8 + 40 + (16 + 8) = 72. c: 100 + (0 + 8192) = 8292.
    /// main: 24 + max(8 + 40 + 24, 0 + 100 + 8192) = 24 + 8292 = 8316.
    #[test]
    fn exact_bounds_add_frames_pushes_and_c_budgets_along_the_deepest_path() {
        let input = BoundsInput {
            functions: vec![
                func("main", 0, 24, &[(F(1), 8), (F(3), 0)]),
                func("a", 8, 40, &[(F(2), 16)]),
                func("b", 16, 8, &[]),
                func("c", 0, 100, &[(E(0), 0)]),
            ],
            externs: vec!["puts".into()],
        };
        let b = analyze(&input, &config(&[8192]));
        assert_eq!(b.of("b"), Some(&Bound::Bytes(24)));
        assert_eq!(b.of("a"), Some(&Bound::Bytes(72)));
        assert_eq!(b.of("c"), Some(&Bound::Bytes(8292)));
        assert_eq!(b.of("main"), Some(&Bound::Bytes(8316)));
    }

    /// f → g → f is a cycle; main reaches it through h; k is called by f but bounded.
    #[test]
    fn cycles_and_what_reaches_them_are_unbounded_with_the_cycle() {
        let input = BoundsInput {
            functions: vec![
                func("main", 0, 16, &[(F(4), 0), (F(1), 0)]),
                func("f", 0, 16, &[(F(3), 0), (F(2), 0)]),
                func("g", 0, 16, &[(F(1), 0)]),
                func("k", 0, 32, &[]),
                func("h", 0, 8, &[(F(1), 0)]),
                func("self", 0, 8, &[(F(3), 0), (F(5), 0)]),
            ],
            externs: vec![],
        };
        let b = analyze(&input, &config(&[]));
        let cyc = |v: &[&str]| Bound::Unbounded(v.iter().map(|s| s.to_string()).collect());
        assert_eq!(b.of("f"), Some(&cyc(&["f", "g", "f"])));
        assert_eq!(b.of("g"), Some(&cyc(&["g", "f", "g"])));
        assert_eq!(b.of("h"), Some(&cyc(&["f", "g", "f"])));
        assert_eq!(b.of("main"), Some(&cyc(&["f", "g", "f"])));
        assert_eq!(b.of("k"), Some(&Bound::Bytes(32)));
        assert_eq!(b.of("self"), Some(&cyc(&["self", "self"])));
    }

    /// Of two cycles through f (f → f and f → g → f) the shorter is reported.
    #[test]
    fn the_shortest_cycle_through_a_function_is_named() {
        let input = BoundsInput {
            functions: vec![
                func("f", 0, 16, &[(F(1), 0), (F(0), 0)]),
                func("g", 0, 16, &[(F(0), 0)]),
            ],
            externs: vec![],
        };
        let b = analyze(&input, &config(&[]));
        assert_eq!(
            b.of("f"),
            Some(&Bound::Unbounded(vec!["f".into(), "f".into()]))
        );
    }

    /// A four-function cycle is named in call order from each of its functions.
    #[test]
    fn a_long_cycle_is_named_in_call_order() {
        let input = BoundsInput {
            functions: vec![
                func("a", 0, 16, &[(F(1), 0)]),
                func("b", 0, 16, &[(F(2), 0)]),
                func("c", 0, 16, &[(F(3), 0)]),
                func("d", 0, 16, &[(F(0), 0)]),
            ],
            externs: vec![],
        };
        let b = analyze(&input, &config(&[]));
        let cyc = |v: &[&str]| Bound::Unbounded(v.iter().map(|s| s.to_string()).collect());
        assert_eq!(b.of("a"), Some(&cyc(&["a", "b", "c", "d", "a"])));
        assert_eq!(b.of("c"), Some(&cyc(&["c", "d", "a", "b", "c"])));
    }

    /// A long chain does not recurse in the analysis (iterative Tarjan).
    #[test]
    fn a_chain_of_100000_functions_is_summed_without_deep_recursion() {
        let n = 100_000u32;
        let functions = (0..n)
            .map(|i| {
                let calls: Vec<(Callee, u32)> = if i + 1 < n {
                    vec![(F(i + 1), 8)]
                } else {
                    vec![]
                };
                func(&format!("f{i}"), 8, 16, &calls)
            })
            .collect();
        let b = analyze(
            &BoundsInput {
                functions,
                externs: vec![],
            },
            &config(&[]),
        );
        // Every level: 8 bytes of arguments and a 16-byte frame.
        assert_eq!(b.of("f0"), Some(&Bound::Bytes(24 * u64::from(n))));
    }

    #[test]
    fn the_text_has_one_line_per_function() {
        let mut main = func("main", 0, 16, &[(F(1), 0)]);
        main.root = true;
        let input = BoundsInput {
            functions: vec![main, func("fib", 8, 24, &[(F(1), 8)])],
            externs: vec![],
        };
        let text = analyze(&input, &config(&[])).to_string();
        let lines: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(
            lines,
            [
                "main  unbounded: fib → fib  (program entry)",
                "fib   unbounded: fib → fib"
            ]
        );
    }
}
