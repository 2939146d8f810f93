//! End-to-end tests of the `lookahead` mechanism (thesis 3.4.3): recursion far deeper than a
//! fixed stack, the runtime's statistics with tiny chunks, and the multi-threaded Unbalanced
//! Binary Tree with 256 threads in a 32-bit address space, which fixed-size stacks cannot run.
//! Expected outputs come from formulas and from the programs' own `printf` lines, never from
//! the code under test. The corpus (tests/corpus.rs) runs every program under lookahead too.

mod common;

use common::{cmm, compile, deep_sum_expected, root, stat, sum_formula, text};

use std::path::Path;
use std::process::{Command, Output};

fn run_deep_sum(exe: &Path, n: u64) -> Output {
    run_deep_sum_growing(exe, n, "0")
}

/// `deep_sum` with the chunk growth limit `growth` (`STACKRT_CHUNK_GROWTH`; "0": every chunk
/// of the standard size, as the tests that count chunks need).
fn run_deep_sum_growing(exe: &Path, n: u64, growth: &str) -> Output {
    Command::new(exe)
        .arg(n.to_string())
        .env("STACKRT_STATS", "1")
        .env("STACKRT_CHUNK_GROWTH", growth)
        .output()
        .unwrap()
}

#[test]
fn ten_million_nested_calls_on_i686_with_the_default_chunk_size() {
    let dir = tempfile::tempdir().unwrap();
    let src = root().join("tests/lookahead/deep_sum.cm");
    let exe = compile(
        &src,
        dir.path(),
        "deep",
        &["--mech", "lookahead", "--target", "i686"],
    );
    let n = 10_000_000;
    let o = run_deep_sum(&exe, n);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "stderr:\n{err}");
    assert_eq!(text(&o.stdout), deep_sum_expected(n));
    assert!(err.contains("chunk size 32768 bytes"), "{err}");
    // Every level is at least 12 bytes (argument, return address, frame): 10 million levels
    // are over 120 MB of stack, so thousands of 32 KiB chunks, each linked and unlinked.
    let overflows = stat(&err, "overflows");
    assert!(overflows > 3_000, "{err}");
    assert_eq!(overflows, stat(&err, "underflows"), "{err}");
    assert!(stat(&err, "peak stack bytes") > 120_000_000, "{err}");

    // With growth up to 16 MiB (chunks of up to twice the stack below them), the same 120 MB
    // cross few boundaries: the chunks double from 32 KiB to 16 MiB, then stay there (36
    // overflows on 2026-11-28, against over 3,000 with fixed 32 KiB chunks above).
    let o = run_deep_sum_growing(&exe, n, "16M");
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "stderr:\n{err}");
    assert_eq!(text(&o.stdout), deep_sum_expected(n));
    let grown = stat(&err, "overflows");
    assert!((10..200).contains(&grown), "{err}");
    assert_eq!(grown, stat(&err, "underflows"), "{err}");
    assert!(stat(&err, "peak stack bytes") > 120_000_000, "{err}");
}

#[test]
fn tiny_chunks_overflow_often_and_the_statistics_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let src = root().join("tests/lookahead/deep_sum.cm");
    for target in ["x86_64", "i686"] {
        let mut overflows = Vec::new();
        for chunk in ["12288", "32768"] {
            let exe = compile(
                &src,
                dir.path(),
                &format!("deep-{target}-{chunk}"),
                &[
                    "--mech",
                    "lookahead",
                    "--target",
                    target,
                    "--chunk-size",
                    chunk,
                ],
            );
            let n = 100_000;
            let o = run_deep_sum(&exe, n);
            let err = text(&o.stderr);
            assert_eq!(o.status.code(), Some(0), "{target} {chunk}: {err}");
            assert_eq!(text(&o.stdout), deep_sum_expected(n), "{target} {chunk}");
            assert!(
                err.contains(&format!("chunk size {chunk} bytes")),
                "{target}: {err}"
            );
            let ov = stat(&err, "overflows");
            assert!(ov > 0, "{target} {chunk}: {err}");
            assert_eq!(ov, stat(&err, "underflows"), "{target} {chunk}: {err}");
            assert_eq!(stat(&err, "threads entered"), 1, "{target} {chunk}: {err}");
            overflows.push(ov);
        }
        // Same depth, chunks 8/3 times larger: fewer overflows.
        assert!(overflows[0] > 2 * overflows[1], "{target}: {overflows:?}");
    }
}

/// A chunk switch keeps every frame where a contiguous stack would put it on its cache line
/// (stackrt's `chunk::header::PHASE_LINE`): `tests/lookahead/phase.cm` prints locals'
/// addresses modulo 64 through two recursions, and under `lookahead` with 4 KiB chunks (over
/// a thousand switches, each with a C call's reserve) it must print exactly what
/// `callee-cleanup` and `traditional` print on their one stack. Before the phase was kept,
/// over a third of the lines differed on both targets.
#[test]
fn chunk_switches_keep_the_frames_phase_on_a_cache_line() {
    let dir = tempfile::tempdir().unwrap();
    let src = root().join("tests/lookahead/phase.cm");
    let depth = "3000";
    for target in ["x86_64", "i686"] {
        let run = |mech: &str, chunk: Option<&str>| -> (String, String) {
            let mut args = vec!["--mech", mech, "--target", target];
            if let Some(c) = chunk {
                args.extend(["--chunk-size", c]);
            }
            let exe = compile(
                &src,
                dir.path(),
                &format!("phase-{target}-{mech}-{}", chunk.unwrap_or("default")),
                &args,
            );
            let o = Command::new(&exe)
                .arg(depth)
                .env("STACKRT_STATS", "1")
                .env("STACKRT_CHUNK_GROWTH", "0")
                .output()
                .unwrap();
            let err = text(&o.stderr);
            assert_eq!(o.status.code(), Some(0), "{target} {mech}: {err}");
            (text(&o.stdout), err)
        };
        let (contiguous, _) = run("callee-cleanup", None);
        // Both recursions add one per level (hand-checked: each prints 3000 after its
        // levels), and the levels print their phases as they go down.
        assert!(contiguous.ends_with("\n3000\n"), "{target}: {contiguous}");
        assert_eq!(
            contiguous.lines().filter(|l| *l == "3000").count(),
            2,
            "{target}"
        );
        assert_eq!(contiguous.lines().count(), 601 + 215 + 215 + 2, "{target}");
        assert_eq!(run("traditional", None).0, contiguous, "{target}");
        for chunk in [Some("4096"), None] {
            let (chunked, err) = run("lookahead", chunk);
            if chunk.is_some() {
                assert!(stat(&err, "overflows") > 1000, "{target}: {err}");
            }
            assert_eq!(chunked, contiguous, "{target} lookahead {chunk:?}");
        }
    }
}

#[test]
fn without_stats_the_runtime_prints_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let src = root().join("tests/lookahead/deep_sum.cm");
    let exe = compile(&src, dir.path(), "deep", &["--mech", "lookahead"]);
    let o = Command::new(&exe).arg("1000").output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(text(&o.stdout), deep_sum_expected(1000));
    assert_eq!(text(&o.stderr), "");
}

/// The thesis's tree parameters (3.5.2): a 1-million-node unbalanced branch. A spike search
/// recurses 1 million calls deep; every call of `ubt_node_search` takes 16 bytes on i686
/// (8 bytes of arguments, the return address, a 4-byte frame), so a thread needs 16 MiB of
/// stack, and 256 such fixed stacks are the whole 4 GiB address space of an i686 process.
/// With 3 searches each thread runs one spike (the third search: `rand_r` from the program's
/// seed gives 0.666, 0.426, then 0.092 < 0.3).
const TREE_ARGS: [&str; 6] = ["1000", "1000000", "0.3", "3", "256", "16777216"];

fn tree_expected(threads: &str) -> String {
    format!(
        "balanced_size 1000\nunbalanced_size 1000000\npercent_spike 0.300000\nsearches 3\n\
         threads {threads}\nUsing given stack size\nstacksize 16777216\nData: {threads}\n"
    )
}

#[test]
fn tree_multi_with_256_threads_runs_on_i686_under_lookahead() {
    let dir = tempfile::tempdir().unwrap();
    let src = root().join("tests/programs/thesis/tree_multi.cm");
    // 64 KiB chunks: with 32 KiB ones the runtime's share of vm.max_map_count (57339 chunk
    // mappings here, 1.8 GiB) is smaller than what 256 threads spiking at once hold.
    let exe = compile(
        &src,
        dir.path(),
        "tree",
        &[
            "--mech",
            "lookahead",
            "--target",
            "i686",
            "--chunk-size",
            "65536",
        ],
    );
    let o = Command::new(&exe)
        .args(TREE_ARGS)
        .env("STACKRT_STATS", "1")
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "stderr:\n{err}");
    assert_eq!(text(&o.stdout), tree_expected("256"));
    // main and 256 threads entered chunked code; the deepest went about 16 MB deep.
    assert_eq!(stat(&err, "threads entered"), 257, "{err}");
    // Measured at overflows: the last chunk a spike links, at `B` bytes of stack, holds at
    // most `B / 2` more, so the 16 MB deep spike's last overflow is at least 2/3 of the way
    // down.
    assert!(stat(&err, "peak stack bytes") >= 10_500_000, "{err}");
    // Chunks grow with the depth (to 1 MiB), so a spike crosses about twenty boundaries, not
    // 244.
    assert!(stat(&err, "overflows") >= 256 * 8, "{err}");
}

#[test]
fn tree_multi_with_256_fixed_stacks_does_not_fit_in_32_bits() {
    let dir = tempfile::tempdir().unwrap();
    let src = root().join("tests/programs/thesis/tree_multi.cm");
    let exe = compile(
        &src,
        dir.path(),
        "tree",
        &["--mech", "traditional", "--target", "i686"],
    );
    // main's own recursion (building and freeing the tree) needs more than the usual 8 MiB
    // process stack under a fixed-stack mechanism.
    let run = |threads: &str| {
        let mut args = TREE_ARGS.map(String::from);
        args[4] = threads.to_string();
        Command::new("sh")
            .arg("-c")
            .arg("ulimit -s unlimited && exec \"$0\" \"$@\"")
            .arg(&exe)
            .args(&args)
            .output()
            .unwrap()
    };
    // 16 MiB per thread is enough: one thread runs.
    let one = run("1");
    assert_eq!(one.status.code(), Some(0), "{}", text(&one.stderr));
    assert_eq!(text(&one.stdout), tree_expected("1"));
    // 256 of them are not: pthread_create runs out of address space.
    let all = run("256");
    let err = text(&all.stderr);
    assert_eq!(all.status.code(), Some(1), "stderr:\n{err}");
    assert!(
        err.starts_with("sthread_create: cannot create thread ")
            && err
                .trim_end()
                .ends_with(": Resource temporarily unavailable")
            && err.lines().count() == 1,
        "{err}"
    );
    assert!(!text(&all.stdout).contains("Data:"));
}

#[test]
fn chunk_size_is_validated_and_callgraph_is_printed() {
    let src = root().join("tests/lookahead/deep_sum.cm");
    for bad in ["1000", "0", "6000"] {
        let o = cmm()
            .args([
                "compile",
                "--mech",
                "lookahead",
                "--chunk-size",
                bad,
                "--emit",
                "asm",
            ])
            .arg(&src)
            .output()
            .unwrap();
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{bad}: {err}");
        assert!(err.starts_with("cmm: error: "), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    // A chunk smaller than the 8 KiB extern budget compiles: the C calls become checkpoints
    // whose reserve the runtime serves with a larger chunk (see `frames_larger_than_a_chunk_run`).
    let o = cmm()
        .args([
            "compile",
            "--mech",
            "lookahead",
            "--chunk-size",
            "4096",
            "--emit",
            "callgraph",
        ])
        .arg(&src)
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        text(&o.stdout).contains("checkpoint (size)"),
        "{}",
        text(&o.stdout)
    );
    // The plan: `sum` and `half` call themselves (cycle checkpoints), main is a root.
    let o = cmm()
        .args([
            "compile",
            "--mech",
            "lookahead",
            "--target",
            "i686",
            "--emit",
            "callgraph",
        ])
        .arg(&src)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let plan = text(&o.stdout);
    assert!(
        plan.starts_with("call graph: chunk size 32768 bytes"),
        "{plan}"
    );
    assert_eq!(plan.matches("checkpoint (cycle)").count(), 2, "{plan}");
    assert!(
        plan.contains("main: frame") && plan.contains("root (entry 8)"),
        "{plan}"
    );
    // Only lookahead has a plan.
    let o = cmm()
        .args(["compile", "--mech", "traditional", "--emit", "callgraph"])
        .arg(&src)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    // The object defines the chunk size and ABI 3.
    let dir = tempfile::tempdir().unwrap();
    let obj = dir.path().join("p.o");
    let o = cmm()
        .args([
            "compile",
            "--mech",
            "lookahead",
            "--chunk-size",
            "65536",
            "--emit",
            "obj",
        ])
        .arg(&src)
        .arg("-o")
        .arg(&obj)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let nm = Command::new("nm").arg(&obj).output().unwrap();
    let syms = text(&nm.stdout);
    assert!(syms.contains(" R __cmm_chunk_size"), "{syms}");
    assert!(syms.contains(" R __cmm_abi"), "{syms}");
    let dump = Command::new("objdump")
        .args(["-s", "-j", ".rodata"])
        .arg(&obj)
        .output()
        .unwrap();
    // 65536 = 0x00010000 little-endian, 3 = ABI_LOOKAHEAD.
    let d = text(&dump.stdout);
    assert!(d.contains("00000100") && d.contains("03000000"), "{d}");
}

/// The hot split (a call and return oscillating across a chunk boundary) reuses one cached
/// chunk: tens of thousands of overflows, one arena and a handful of carved chunks whatever
/// the count (the experiment `hot_split`, crates/bench/src/experiments.rs, counts the system
/// calls with strace).
#[test]
fn a_hot_split_reuses_its_chunk_without_mapping_memory() {
    let dir = tempfile::tempdir().unwrap();
    let src = root().join("tests/lookahead/hot_split.cm");
    for target in ["x86_64", "i686"] {
        let exe = compile(
            &src,
            dir.path(),
            &format!("hot-{target}"),
            &["--mech", "lookahead", "--target", target],
        );
        let (last_depth, n) = (1500u64, 20_000u64);
        let o = Command::new(&exe)
            .args(["0", &last_depth.to_string(), &n.to_string()])
            .env("STACKRT_STATS", "1")
            .output()
            .unwrap();
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{target}: {err}");
        assert_eq!(text(&o.stdout), format!("{}\n", (last_depth + 1) * n));
        // At least one depth puts the loop's call at a boundary: n overflows from there.
        let overflows = stat(&err, "overflows");
        assert!(overflows >= n, "{target}: {err}");
        assert_eq!(overflows, stat(&err, "underflows"), "{target}: {err}");
        // 1500 levels need a few chunks, carved from one arena; after that every chunk comes
        // from the thread's own cache: no lock, no system call per overflow.
        let carved = stat(&err, "chunks carved");
        assert!(carved <= 8, "{target}: {err}");
        assert_eq!(stat(&err, "arenas mapped"), 1, "{target}: {err}");
        assert_eq!(stat(&err, "chunks released"), 0, "{target}: {err}");
        assert!(
            stat(&err, "chunks from cache") + carved > overflows,
            "{target}: every chunk but the carved ones comes from the cache\n{err}"
        );
        assert_eq!(
            stat(&err, "chunks from pool"),
            0,
            "{target}: every chunk but the mapped ones is a reused one\n{err}"
        );
    }
}

/// The handlers' own relink of a hot split's chunk (`stackrt::chunk::handler::HOT_SPLIT_OFFSET`,
/// taken only with statistics off) under what may happen between two splits: deep
/// recursions linking and leaving marked chunks above the split one, C calls at their
/// bottom, the reclaim budget running out (a small `STACKRT_RECLAIM_BYTES`), another
/// function called from the same stack pointer. The sum is the closed form of
/// `tests/lookahead/hot_split_mixed.cm`; the run with statistics (the runtime's relink) must
/// print the same and show the splits happening.
#[test]
fn the_handlers_hot_split_relink_keeps_the_chain_exact() {
    let dir = tempfile::tempdir().unwrap();
    let src = root().join("tests/lookahead/hot_split_mixed.cm");
    let (first, last, n, every, far) = (0u64, 1500u64, 200u64, 50u64, 2000u64);
    let k = n.div_ceil(every);
    let want = format!("{}\n", (last - first + 1) * (k * (far + 1) + n - k));
    let args = [first, last, n, every, far].map(|v| v.to_string());
    for target in ["x86_64", "i686"] {
        let exe = compile(
            &src,
            dir.path(),
            &format!("mixed-{target}"),
            &["--mech", "lookahead", "--target", target],
        );
        for (env, value) in [
            ("STACKRT_RECLAIM_BYTES", None),
            ("STACKRT_RECLAIM_BYTES", Some("32768")),
            ("STACKRT_STATS", Some("1")),
        ] {
            let mut cmd = Command::new(&exe);
            cmd.args(&args);
            if let Some(v) = value {
                cmd.env(env, v);
            }
            let o = cmd.output().unwrap();
            let err = text(&o.stderr);
            assert_eq!(o.status.code(), Some(0), "{target} {env}={value:?}: {err}");
            assert_eq!(text(&o.stdout), want, "{target} {env}={value:?}: {err}");
            if env == "STACKRT_STATS" {
                // Some depth puts the loop's calls at a boundary: n - k splits there.
                let overflows = stat(&err, "overflows");
                assert!(overflows >= n - k, "{target}: {err}");
                assert_eq!(overflows, stat(&err, "underflows"), "{target}: {err}");
            }
        }
    }
}

/// `n(n+1)/2` for every thread, summed, with 32-bit wrap-around.
fn all_alive_expected(threads: u64, depth: u64) -> String {
    let total = (threads as u32).wrapping_mul(sum_formula(depth) as u32) as i32;
    format!("{threads} threads, depth {depth}, total {total}\n")
}

/// Frames larger than a chunk run under `lookahead` with the default chunk size (and with the
/// smallest one): a 40 KB frame recursing, 70 KB and tiny frames in mutual recursion, and a
/// `main` whose own frame needs a first chunk larger than a standard one. Each of these calls
/// gets a chunk of a larger size class.
#[test]
fn frames_larger_than_a_chunk_run() {
    let dir = tempfile::tempdir().unwrap();
    let src = root().join("tests/lookahead/big_frames.cm");
    for target in ["x86_64", "i686"] {
        for chunk in [None, Some("4096")] {
            let mut args = vec!["--mech", "lookahead", "--target", target];
            if let Some(c) = chunk {
                args.extend(["--chunk-size", c]);
            }
            let name = format!("big-{target}-{}", chunk.unwrap_or("default"));
            let exe = compile(&src, dir.path(), &name, &args);
            let n = 300;
            // Standard chunks only: every level's frame must need a large class of its own.
            let o = Command::new(&exe)
                .arg(n.to_string())
                .env("STACKRT_STATS", "1")
                .env("STACKRT_CHUNK_GROWTH", "0")
                .output()
                .unwrap();
            let err = text(&o.stderr);
            assert_eq!(o.status.code(), Some(0), "{name}: {err}");
            let s = sum_formula(n);
            assert_eq!(
                text(&o.stdout),
                format!("big {n} = {s}\nmutual {n} = {s}\nmain's array 7 8\n"),
                "{name}"
            );
            // Every level of `big` and `big_mutual` overflows into a chunk of its own.
            assert!(stat(&err, "overflows") >= 300, "{name}: {err}");
            // The 40 KB frames, 300 deep, are over 12 MB of stack.
            assert!(stat(&err, "peak stack bytes") > 12_000_000, "{name}: {err}");
        }
    }
}

/// All threads deep at once, with 4 KiB chunks: more chunks in use at the same time than
/// `vm.max_map_count` (65530) allows mappings, so a runtime mapping each chunk on its own
/// could not run it; chunks from arenas need a few dozen mappings. CI-sized stand-in for the
/// thesis-size tree with 1024 threads (x86-64) and 256 threads (i686), one spike each, which
/// the closing note of the chunk-memory issue reports.
#[test]
fn more_chunks_at_once_than_the_kernel_allows_mappings() {
    let dir = tempfile::tempdir().unwrap();
    let src = root().join("tests/lookahead/all_alive.cm");
    for (target, threads, depth) in [("x86_64", 1024u64, 10_000u64), ("i686", 256, 70_000)] {
        let exe = compile(
            &src,
            dir.path(),
            &format!("alive-{target}"),
            &[
                "--mech",
                "lookahead",
                "--target",
                target,
                "--chunk-size",
                "4096",
            ],
        );
        // Chunks of 4 KiB, none grown: the point is their number.
        let o = Command::new(&exe)
            .args([threads.to_string(), depth.to_string()])
            .env("STACKRT_STATS", "1")
            .env("STACKRT_CHUNK_GROWTH", "0")
            .output()
            .unwrap();
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{target}: {err}");
        assert_eq!(
            text(&o.stdout),
            all_alive_expected(threads, depth),
            "{target}"
        );
        assert!(stat(&err, "peak chunks in use") > 65_530, "{target}: {err}");
        assert!(stat(&err, "arenas mapped") < 100, "{target}: {err}");
        assert_eq!(
            stat(&err, "threads entered"),
            threads + 1,
            "{target}: {err}"
        );
    }
}

/// The thesis's deepest Summation (4.1.1: every C-- mechanism reached 100 million levels) runs
/// with the default settings on both targets: 1.6 GB of stack on i686, 3.2 GB on x86-64.
#[test]
fn hundred_million_levels_with_the_default_limits() {
    let dir = tempfile::tempdir().unwrap();
    let src = root().join("tests/programs/thesis/summation_single.cm");
    for target in ["x86_64", "i686"] {
        let exe = compile(
            &src,
            dir.path(),
            &format!("sum-{target}"),
            &["--mech", "lookahead", "--target", target],
        );
        let n = 100_000_000u64;
        let o = Command::new(&exe).arg(n.to_string()).output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{target}: {}", text(&o.stderr));
        assert_eq!(
            text(&o.stdout),
            format!("Data: 100 {}\n", sum_formula(n)),
            "{target}"
        );
    }
}

/// A runaway recursion stops at the stack limit, and a program whose threads together want
/// more than the memory limit stops at it: one line naming the thread, exit status 70.
#[test]
fn runaway_recursion_and_memory_limits_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let src = root().join("tests/lookahead/deep_sum.cm");
    for target in ["x86_64", "i686"] {
        let exe = compile(
            &src,
            dir.path(),
            &format!("deep-{target}"),
            &["--mech", "lookahead", "--target", target],
        );
        for (var, value, want) in [
            ("STACKRT_STACK_LIMIT", "64M", "stack limit exceeded: "),
            (
                "STACKRT_MEMORY_LIMIT",
                "64M",
                "out of memory for stack chunks: ",
            ),
        ] {
            let o = Command::new(&exe)
                .arg("1000000000")
                .env(var, value)
                .output()
                .unwrap();
            let err = text(&o.stderr);
            assert_eq!(o.status.code(), Some(70), "{target} {var}: {err}");
            assert_eq!(text(&o.stdout), "", "{target} {var}");
            assert_eq!(err.lines().count(), 1, "{target} {var}: {err}");
            assert!(
                err.starts_with("stackrt: thread 0 (tid ") && err.contains(want),
                "{target} {var}: {err}"
            );
            assert!(err.contains(&format!("set {var} to change it")), "{err}");
        }
    }
}

/// Memory pressure: 256 threads each searching a 100,000-deep spike (3.2 MB of stack on x86-64)
/// with the chunk memory limited to 48 MiB (the soft limit is a third of it). The OS runs the
/// threads all a little at a time, so without the soft limit they would be deep at once and
/// pass the limit; with it, above 16 MiB only two threads at a time take more chunks and the
/// others wait for memory given back, and the program completes.
#[test]
fn many_deep_threads_wait_for_memory_instead_of_exhausting_it() {
    let dir = tempfile::tempdir().unwrap();
    let src = root().join("tests/programs/thesis/tree_multi.cm");
    let exe = compile(&src, dir.path(), "tree", &["--mech", "lookahead"]);
    // The memory limit sets the soft limit to a third of it; STACKRT_SOFT_LIMIT sets it alone.
    for (var, value, hard_limit) in [
        ("STACKRT_MEMORY_LIMIT", "48M", Some(48u64 << 20)),
        ("STACKRT_SOFT_LIMIT", "16M", None),
    ] {
        let o = Command::new(&exe)
            .args(["1000", "100000", "1.0", "1", "256", "16384"])
            .env("STACKRT_STATS", "1")
            .env(var, value)
            .output()
            .unwrap();
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{var}: {err}");
        assert!(
            text(&o.stdout).ends_with("Data: 256\n"),
            "{var}: {}",
            text(&o.stdout)
        );
        let in_use = err
            .lines()
            .find(|l| l.contains("peak chunks in use"))
            .and_then(|l| l.split('(').nth(1))
            .and_then(|l| l.split_whitespace().next())
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or_else(|| panic!("no peak bytes in use in {err}"));
        if let Some(limit) = hard_limit {
            assert!(in_use <= limit, "{var}: {in_use} bytes in use: {err}");
        }
        // The threads wait once the chunks in use pass the soft limit (16 MiB), except the
        // holders of the growth tokens (one per CPU), which go on to the bottom of their spike
        // (3.2 MB, at most 4 MiB with chunk ends). How many are deep at once is up to the OS
        // scheduler: on a loaded machine only the token holders may have been, and then no
        // thread had to wait.
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
        assert!(
            stat(&err, "waits for memory") > 0 || in_use <= (16 << 20) + cpus * (4 << 20),
            "{var}: no thread waited although {in_use} bytes were in use: {err}"
        );
    }
    // A soft limit that is not a byte count is a clear error, before any C-- code runs.
    let o = Command::new(&exe)
        .args(["1000", "100000", "1.0", "1", "2", "16384"])
        .env("STACKRT_SOFT_LIMIT", "lots")
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(70), "{err}");
    assert_eq!(text(&o.stdout), "");
    assert!(
        err.starts_with("stackrt: ")
            && err.contains("STACKRT_SOFT_LIMIT=\"lots\" is not a byte count"),
        "{err}"
    );
}
