//! End-to-end tests of the heap mechanisms (`heap`, `heap-malloc`; thesis 3.4.2): deep
//! recursion, frames larger than the largest size class and than a slab, mutual recursion with
//! mixed frame sizes, the statistics, the per-thread limit and a signal storm (their crash
//! reports are checked with every other mechanism's in tests/mmu.rs).
//! Expected outputs come from formulas; the corpus (tests/corpus.rs) runs every program,
//! threaded thesis programs with 64 threads included, under both heap mechanisms.

mod common;

use common::{
    assert_one_line, build_storm, compile, deep_sum_expected, root, run_within, stat,
    storm_signals, sum_formula, text, CRASH_DEADLINE,
};

use std::process::Command;

const HEAP_MECHS: [&str; 2] = ["heap", "heap-malloc"];
const TARGETS: [&str; 2] = ["x86_64", "i686"];

#[test]
fn ten_million_levels_on_both_targets() {
    let dir = tempfile::tempdir().unwrap();
    let src = root().join("tests/lookahead/deep_sum.cm");
    let n: u64 = 10_000_000;
    for target in TARGETS {
        let exe = compile(
            &src,
            dir.path(),
            &format!("deep-{target}"),
            &["--mech", "heap", "--target", target],
        );
        let o = Command::new(&exe)
            .arg(n.to_string())
            .env("STACKRT_STATS", "1")
            .output()
            .unwrap();
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{target}: {err}");
        assert_eq!(text(&o.stdout), deep_sum_expected(n), "{target}");
        // One frame per level, each carved fresh on the way down (nothing is free yet).
        let frames = stat(&err, "frames allocated");
        assert!(frames > n, "{target}: {err}");
        let live = stat(&err, "peak live frames");
        assert!(live > n && live <= frames, "{target}: {err}");
        // At least 16 bytes per frame: argument, return address, the caller's SP.
        assert!(stat(&err, "peak frame bytes") >= 16 * n, "{target}: {err}");
    }
}

#[test]
fn calls_at_the_same_depth_reuse_one_block() {
    // Big Summation runs each thread's recursion `repeats` times: the second and later
    // repeats find every block they need on the free lists.
    let dir = tempfile::tempdir().unwrap();
    let src = root().join("tests/programs/thesis/big_summation.cm");
    for target in TARGETS {
        let exe = compile(
            &src,
            dir.path(),
            &format!("big-sum-{target}"),
            &["--mech", "heap", "--target", target],
        );
        // 1 thread, n = 1000, frame 48 bytes, 10 repeats.
        let o = Command::new(&exe)
            .args(["1", "1000", "48", "10", "262144"])
            .env("STACKRT_STATS", "1")
            .output()
            .unwrap();
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{target}: {err}");
        let frames = stat(&err, "frames allocated");
        let reused = stat(&err, "frames reused");
        // 10 repeats of ~1000 levels: the first carves, the other nine reuse.
        assert!(frames >= 10_000, "{target}: {err}");
        assert!(reused >= 9_000, "{target}: {err}");
        assert!(stat(&err, "peak live frames") < 1_100, "{target}: {err}");
    }
}

/// `big` has a 40,000-byte array (over the largest size class, 16 KiB, and the smallest slab)
/// and recurses; `small` and `big_mutual` recurse into each other with frames of very different
/// sizes; `main` holds a 48,000-byte array, so even the entry block is a large one.
#[test]
fn frames_larger_than_the_largest_class_and_mixed_sizes() {
    let dir = tempfile::tempdir().unwrap();
    let src = root().join("tests/lookahead/big_frames.cm");
    for target in TARGETS {
        for mech in HEAP_MECHS {
            for slab in [None, Some("4096")] {
                let mut args = vec!["--mech", mech, "--target", target];
                if let Some(c) = slab {
                    args.extend(["--chunk-size", c]);
                }
                let name = format!("big-{mech}-{target}-{}", slab.unwrap_or("default"));
                let exe = compile(&src, dir.path(), &name, &args);
                let n = 300;
                let o = Command::new(&exe)
                    .arg(n.to_string())
                    .env("STACKRT_STATS", "1")
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
                // The 40 KB frames, 300 deep, are over 12 MB of live frames at once.
                assert!(stat(&err, "peak frame bytes") > 12_000_000, "{name}: {err}");
            }
        }
    }
}

#[test]
fn runaway_recursion_stops_at_the_stack_limit() {
    let dir = tempfile::tempdir().unwrap();
    let src = root().join("tests/mmu/crash.cm");
    for target in TARGETS {
        for mech in HEAP_MECHS {
            let exe = compile(
                &src,
                dir.path(),
                &format!("runaway-{mech}-{target}"),
                &["--mech", mech, "--target", target],
            );
            for case in ["runaway", "thread"] {
                let what = format!("{case} under {mech} on {target}");
                let mut cmd = Command::new(&exe);
                cmd.arg(case).env("STACKRT_STACK_LIMIT", "64M");
                let o = run_within(cmd, CRASH_DEADLINE, &what);
                assert_eq!(o.status.code(), Some(70), "{what}: {:?}", o.status);
                assert_one_line(&o, "stack limit exceeded", &what);
            }
        }
    }
}

/// SP points into small heap blocks: a signal handler must run on the alternate stack
/// (`SA_ONSTACK`), as the one of tests/mmu/storm.c does. A storm of them during deep recursion
/// changes nothing.
#[test]
fn a_signal_storm_during_deep_recursion_changes_no_output() {
    let dir = tempfile::tempdir().unwrap();
    let src = root().join("tests/lookahead/deep_sum.cm");
    let n = 2_000_000;
    for target in TARGETS {
        let storm = build_storm(dir.path(), target);
        for mech in HEAP_MECHS {
            let exe = compile(
                &src,
                dir.path(),
                &format!("storm-{mech}-{target}"),
                &["--mech", mech, "--target", target],
            );
            let o = Command::new(&exe)
                .arg(n.to_string())
                .env("LD_PRELOAD", &storm)
                .output()
                .unwrap();
            let err = text(&o.stderr);
            assert_eq!(o.status.code(), Some(0), "{mech} {target}: {err}");
            assert_eq!(text(&o.stdout), deep_sum_expected(n), "{mech} {target}");
            let signals = storm_signals(&err);
            assert!(
                signals >= 20,
                "{mech} {target}: only {signals} signals: {err}"
            );
        }
    }
}
