//! Checkpoint placement on random call graphs (random frames, some larger than a chunk, edges
//! with self-loops and cycles, extern calls, roots), checked against an independent reference:
//! the non-checkpoint graph must be acyclic, every longest path is recomputed by brute force,
//! every checkpoint's reserve must equal (so cover) the longest path to the next checkpoints,
//! every longest path must stay within its function's bound (what a chunk gives it, or its
//! frame when that alone is more, and within the root bound green threads give thread entries),
//! and a site becomes a checkpoint for its size only when it
//! has to. Plus hand-computed examples, frames and extern calls larger than a chunk, and the
//! `--emit callgraph` text.

use cmm_codegen::callgraph::{
    analyze, chunk_capacity, validate_chunk_size, CallGraphConfig, CallGraphInput, CallSite,
    CheckpointReason, ChunkHeaderLayout, FunctionNode, UNLINKED_MARK,
};
use cmm_front::typed::Callee;
use proptest::prelude::*;

fn graph_strategy() -> impl Strategy<Value = (CallGraphInput, CallGraphConfig)> {
    (1usize..10, 1usize..4).prop_flat_map(|(n, n_ext)| {
        // Zero argument bytes and a zero extern budget give paths of 0 bytes, which need no
        // checkpoint even in a function whose frame alone is over the capacity.
        let arg_bytes = prop_oneof![1 => Just(0u32), 3 => 0u32..48];
        let site = (0..n + n_ext, arg_bytes).prop_map(move |(t, arg_bytes)| CallSite {
            callee: if t < n {
                Callee::Function(t as u32)
            } else {
                Callee::Extern((t - n) as u32)
            },
            arg_bytes,
        });
        let frame = prop_oneof![8 => 0u32..400, 2 => 0u32..3000, 1 => 0u32..12000];
        let func = (
            frame,
            prop::collection::vec(site, 0..5),
            prop::option::weighted(0.3, 0u32..24),
        );
        (
            prop::collection::vec(func, n),
            1000u32..16000,
            prop_oneof![Just(0u32), 0u32..2000, 0u32..9000],
            prop_oneof![Just(0u32), 1u32..600],
        )
            .prop_map(move |(fs, capacity, extern_budget, root_bound)| {
                let input = CallGraphInput {
                    functions: fs
                        .into_iter()
                        .enumerate()
                        .map(|(i, (frame, calls, root))| FunctionNode {
                            name: format!("f{i}"),
                            frame,
                            calls,
                            root,
                        })
                        .collect(),
                    externs: (0..n_ext).map(|e| format!("x{e}")).collect(),
                };
                (
                    input,
                    CallGraphConfig {
                        chunk_size: 0,
                        capacity,
                        extern_budget,
                        green: false,
                        root_bound,
                        pointer_size: 8,
                    },
                )
            })
    })
}

/// Longest path by brute force over the non-checkpoint edges (`checkpoint(f, i)`), which must
/// be acyclic; None if a cycle without checkpoint is found.
fn reference_lp(
    input: &CallGraphInput,
    cfg: &CallGraphConfig,
    is_cp: &dyn Fn(usize, usize) -> bool,
) -> Option<Vec<u64>> {
    fn go(
        f: usize,
        input: &CallGraphInput,
        cfg: &CallGraphConfig,
        is_cp: &dyn Fn(usize, usize) -> bool,
        on_path: &mut Vec<bool>,
    ) -> Option<u64> {
        if on_path[f] {
            return None;
        }
        on_path[f] = true;
        let mut best = 0u64;
        for (i, s) in input.functions[f].calls.iter().enumerate() {
            if is_cp(f, i) {
                continue;
            }
            let need = match s.callee {
                Callee::Function(g) => go(g as usize, input, cfg, is_cp, on_path)?,
                Callee::Extern(_) => cfg.extern_budget as u64,
            };
            best = best.max(s.arg_bytes as u64 + need);
        }
        on_path[f] = false;
        Some(input.functions[f].frame as u64 + best)
    }
    let n = input.functions.len();
    (0..n)
        .map(|f| go(f, input, cfg, is_cp, &mut vec![false; n]))
        .collect()
}

fn max_incoming(input: &CallGraphInput, f: usize) -> u64 {
    let mut m = input.functions[f].root.unwrap_or(0) as u64;
    for g in &input.functions {
        for s in &g.calls {
            if s.callee == Callee::Function(f as u32) {
                m = m.max(s.arg_bytes as u64);
            }
        }
    }
    m
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn placement_is_sound((input, cfg) in graph_strategy()) {
        let cap = cfg.capacity as u64;
        // Never an error: the result is a plan whatever the frames and the capacity.
        let plan = analyze(&input, &cfg);
        let is_cp = |f: usize, i: usize| plan.functions[f].sites[i].checkpoint.is_some();
        // Every cycle crosses a checkpoint.
        let lp = reference_lp(&input, &cfg, &is_cp);
        prop_assert!(lp.is_some(), "a cycle without checkpoint");
        let lp = lp.unwrap();
        for (f, fp) in plan.functions.iter().enumerate() {
            prop_assert_eq!(fp.longest_path as u64, lp[f]);
            // Every path between checkpoints fits in what a chunk gives the function after
            // the pushes that enter it, unless its frame alone is more: then it is its frame.
            let frame = input.functions[f].frame as u64;
            // A thread entry under a root bound (green threads) keeps its path within it too.
            let mut bound = cap.saturating_sub(max_incoming(&input, f));
            if cfg.root_bound > 0 && fp.root.is_some() {
                bound = bound.min(cfg.root_bound as u64);
            }
            let bound = bound.max(frame);
            prop_assert!(lp[f] <= bound, "f{} LP {} over its bound {}", f, lp[f], bound);
            if frame + max_incoming(&input, f) <= cap {
                prop_assert!(lp[f] + max_incoming(&input, f) <= cap, "f{} does not fit", f);
                if let Some(entry) = fp.root {
                    prop_assert!(entry as u64 + lp[f] <= cap);
                }
            }
            for (i, s) in fp.sites.iter().enumerate() {
                let call = input.functions[f].calls[i];
                prop_assert_eq!(s.callee, call.callee);
                let need = match call.callee {
                    Callee::Function(g) => lp[g as usize],
                    Callee::Extern(_) => cfg.extern_budget as u64,
                };
                prop_assert_eq!(s.path as u64, call.arg_bytes as u64 + need);
                match s.checkpoint {
                    // The reserve covers the longest path to the next checkpoints, even when
                    // that is more than a chunk holds (the runtime links a larger chunk).
                    Some(_) => prop_assert_eq!(s.reserve, s.path),
                    None => {
                        prop_assert_eq!(s.reserve, 0);
                        // A path over the capacity cannot stay inside its caller's chunk.
                        prop_assert!(s.path as u64 <= cap, "f{} site {} not a checkpoint", f, i);
                    }
                }
                // Size checkpoints only where the path would break the bound.
                if s.checkpoint == Some(CheckpointReason::Size) {
                    prop_assert!(frame + s.path as u64 > bound, "f{} site {} needless", f, i);
                }
                if call.callee == Callee::Function(f as u32) {
                    prop_assert_eq!(s.checkpoint, Some(CheckpointReason::Cycle));
                }
            }
        }
        // The text output names every function.
        let text = plan.to_string();
        for f in &input.functions {
            let header = format!("{}: frame {}", f.name, f.frame);
            prop_assert!(text.contains(&header));
        }
    }
}

fn node(name: &str, frame: u32, calls: &[(Callee, u32)], root: Option<u32>) -> FunctionNode {
    FunctionNode {
        name: name.into(),
        frame,
        calls: calls
            .iter()
            .map(|&(callee, arg_bytes)| CallSite { callee, arg_bytes })
            .collect(),
        root,
    }
}

/// The thesis's single-threaded summation (listing A.5) on i686 with 32 KiB chunks and
/// hand-chosen frame sizes: `main` (frame 28, entry 8) calls `atoi` (args 4), `summation`
/// (args 4) and `printf` (args 12); `summation` (frame 24) calls itself (args 4).
#[test]
fn summation_by_hand() {
    use Callee::{Extern, Function};
    let input = CallGraphInput {
        functions: vec![
            node("summation", 24, &[(Function(0), 4)], None),
            node(
                "main",
                28,
                &[(Extern(0), 4), (Function(0), 4), (Extern(1), 12)],
                Some(8),
            ),
        ],
        externs: vec!["atoi".into(), "printf".into()],
    };
    let cfg = CallGraphConfig::new(32768, 4);
    assert_eq!(cfg.capacity, 32720);
    assert_eq!(cfg.extern_budget, 8192);
    let plan = analyze(&input, &cfg);
    // summation: the self-call is the only checkpoint; LP = its frame; reserve = 4 + 24.
    assert_eq!(plan.longest_path(0), 24);
    let s = plan.site(0, 0);
    assert_eq!(
        (s.checkpoint, s.reserve),
        (Some(CheckpointReason::Cycle), 28)
    );
    // main: LP = 28 + max(4 + 8192, 4 + 24, 12 + 8192) = 8232; no checkpoint needed.
    assert_eq!(plan.longest_path(1), 8232);
    assert!(plan.functions[1]
        .sites
        .iter()
        .all(|s| s.checkpoint.is_none()));
    assert_eq!(plan.checkpoint_count(), 1);
    assert_eq!(
        plan.to_string(),
        "call graph: chunk size 32768 bytes, capacity 32720 bytes, extern budget 8192 bytes, \
         1 checkpoints\n\
         summation: frame 24, longest path 24\n  \
         call summation: args 4, path 28, checkpoint (cycle), reserve 28\n\
         main: frame 28, longest path 8232, root (entry 8)\n  \
         call atoi (extern): args 4, path 8196\n  \
         call summation: args 4, path 28\n  \
         call printf (extern): args 12, path 8204\n"
    );
}

/// A chain a → b → c → d of big frames in a small chunk: the checkpoints go where the path
/// outgrows the chunk, and mutual recursion c ↔ d gets one cycle checkpoint.
#[test]
fn chain_and_mutual_recursion_by_hand() {
    use Callee::Function;
    let input = CallGraphInput {
        functions: vec![
            node("a", 1000, &[(Function(1), 8)], Some(0)),
            node("b", 1500, &[(Function(2), 8)], None),
            node("c", 1200, &[(Function(3), 8)], None),
            node("d", 900, &[(Function(2), 8)], None),
        ],
        externs: vec![],
    };
    let cfg = CallGraphConfig {
        chunk_size: 8192,
        capacity: 4000,
        extern_budget: 0,
        green: false,
        root_bound: 0,
        pointer_size: 8,
    };
    let plan = analyze(&input, &cfg);
    // DFS a, b, c, d: d → c is the back edge. LP(d) = 900, LP(c) = 1200 + 8 + 900 = 2108,
    // LP(b) = 1500 + 8 + 2108 = 3616 (bound 4000 - 8 = 3992: fits),
    // LP(a) would be 1000 + 8 + 3616 = 4624 > 4000: a → b becomes a size checkpoint.
    assert_eq!(plan.site(3, 0).checkpoint, Some(CheckpointReason::Cycle));
    assert_eq!(plan.site(3, 0).reserve, 8 + 2108);
    assert_eq!(plan.site(0, 0).checkpoint, Some(CheckpointReason::Size));
    assert_eq!(plan.site(0, 0).reserve, 8 + 3616);
    assert_eq!(plan.site(1, 0).checkpoint, None);
    assert_eq!(plan.site(2, 0).checkpoint, None);
    assert_eq!(
        [0, 1, 2, 3].map(|f| plan.longest_path(f)),
        [1000, 3616, 2108, 900]
    );
}

/// Frames and extern calls larger than a chunk are no error: `huge` (frame 3990, entered with
/// 16 bytes of arguments, in a capacity of 4000) checkpoints its call of `leaf`, `main`
/// checkpoints its call of `huge` and of `printf` (1001 + 3000 bytes) with reserves over the
/// capacity, and the root `thread`, whose frame alone is over the capacity, gets a longest path
/// (so a stack need) over it.
#[test]
fn frames_and_externs_larger_than_a_chunk_become_checkpoints() {
    use Callee::{Extern, Function};
    use CheckpointReason::Size;
    let cfg = CallGraphConfig {
        chunk_size: 8192,
        capacity: 4000,
        extern_budget: 3000,
        green: false,
        root_bound: 0,
        pointer_size: 8,
    };
    let input = CallGraphInput {
        functions: vec![
            node(
                "main",
                100,
                &[(Function(1), 16), (Extern(0), 1001)],
                Some(8),
            ),
            node("huge", 3990, &[(Function(2), 8)], None),
            node("leaf", 40, &[], None),
            node("thread", 4500, &[(Extern(0), 4)], Some(4)),
        ],
        externs: vec!["printf".into()],
    };
    let plan = analyze(&input, &cfg);
    // leaf: bound 4000 - 8, LP 40. huge: bound max(4000 - 16, 3990) = 3990, and 3990 + 8 + 40
    // is over it: the call of leaf is a checkpoint, LP(huge) = 3990.
    assert_eq!(plan.longest_path(2), 40);
    assert_eq!(
        (plan.site(1, 0).checkpoint, plan.site(1, 0).reserve),
        (Some(Size), 48)
    );
    assert_eq!(plan.longest_path(1), 3990);
    // main: paths 16 + 3990 = 4006 and 1001 + 3000 = 4001, both over the capacity.
    assert_eq!(
        (plan.site(0, 0).checkpoint, plan.site(0, 0).reserve),
        (Some(Size), 4006)
    );
    assert_eq!(
        (plan.site(0, 1).checkpoint, plan.site(0, 1).reserve),
        (Some(Size), 4001)
    );
    assert_eq!(plan.longest_path(0), 100);
    // thread: bound max(4000 - 4, 4500) = 4500; the extern call (4 + 3000) is a checkpoint and
    // the root's need, entry + LP = 4 + 4500, is over the capacity.
    assert_eq!(
        (plan.site(3, 0).checkpoint, plan.site(3, 0).reserve),
        (Some(Size), 3004)
    );
    assert_eq!(plan.longest_path(3), 4500);
    assert_eq!(plan.checkpoint_count(), 4);
    let text = plan.to_string();
    assert!(
        text.contains("  call huge: args 16, path 4006, checkpoint (size), reserve 4006\n"),
        "{text}"
    );
}

#[test]
fn abi_numbers_match_the_runtime_contract() {
    // Hand-checked against stackrt's chunk_layout test: header word i at i * P, 8 words.
    assert_eq!(
        ChunkHeaderLayout::for_pointer_size(4),
        ChunkHeaderLayout {
            thread_stack: 0,
            prev_sp: 4,
            prev_header: 8,
            limit: 12,
            resume: 16,
            check: 16,
            size: 32
        }
    );
    assert_eq!(ChunkHeaderLayout::for_pointer_size(8).size, 64);
    assert_eq!(ChunkHeaderLayout::for_pointer_size(8).check, 32);
    // stackrt's UNLINKED is all ones: -1 as a 32-bit immediate, sign-extended on x86-64.
    assert_eq!(UNLINKED_MARK, -1);
    assert_eq!(chunk_capacity(32768, 4), 32720);
    assert_eq!(chunk_capacity(32768, 8), 32688);
    assert_eq!(validate_chunk_size(32768), Ok(32768));
    assert!(validate_chunk_size(5000).is_err());
    assert!(validate_chunk_size(0).is_err());
    assert!(validate_chunk_size(1 << 31).is_err());
}
