//! End-to-end tests of the MMU mechanisms (`mmu`, `mmu-reuse`; thesis 3.4.4) and of the
//! runtime's `SIGSEGV` handler under every mechanism: deep recursion through guard-page faults,
//! crashes that must be reported (not taken for stack growth, never a loop or a hang), a signal
//! storm during deep recursion, many threads on i686, and fixed stacks that explain their
//! overflow. Expected outputs come from formulas and the programs' own `printf` lines; the
//! corpus (tests/corpus.rs) runs every program under both MMU mechanisms too.

use std::os::unix::process::ExitStatusExt;
mod common;

use common::{
    assert_one_line, build_storm, compile, deep_sum_expected, root, run_within, stat,
    storm_signals, text, CRASH_DEADLINE,
};

use std::process::Command;
use std::time::Duration;

const MMU_MECHS: [&str; 2] = ["mmu", "mmu-reuse"];
const TARGETS: [&str; 2] = ["x86_64", "i686"];
const SIGSEGV: i32 = 11;
#[test]
fn ten_million_nested_calls_through_guard_page_faults() {
    let dir = tempfile::tempdir().unwrap();
    let src = root().join("tests/lookahead/deep_sum.cm");
    let n = 10_000_000;
    for target in TARGETS {
        for mech in MMU_MECHS {
            let exe = compile(
                &src,
                dir.path(),
                &format!("deep-{mech}-{target}"),
                &["--mech", mech, "--target", target],
            );
            let mut cmd = Command::new(&exe);
            cmd.arg(n.to_string()).env("STACKRT_STATS", "1");
            let o = run_within(cmd, Duration::from_secs(120), "10 million levels");
            let err = text(&o.stderr);
            assert_eq!(o.status.code(), Some(0), "{mech} {target}: {err}");
            assert_eq!(text(&o.stdout), deep_sum_expected(n), "{mech} {target}");
            // At least 16 bytes per level (argument and return address slots, frame): over
            // 160 MB of stack, so over a hundred chunks of the default size, each linked by
            // a fault and left through the underflow stub.
            let faults = stat(&err, "guard faults taken");
            assert!(faults > 100, "{mech} {target}: {err}");
            assert_eq!(faults, stat(&err, "overflows"), "{err}");
            assert_eq!(stat(&err, "underflows"), stat(&err, "overflows"), "{err}");
            if mech == "mmu" {
                // Without reuse every chunk left goes back to the system at once.
                assert_eq!(stat(&err, "chunks from cache"), 0, "{err}");
                assert!(stat(&err, "chunks released") >= faults, "{err}");
            } else {
                assert!(stat(&err, "chunks from cache") > 0, "{err}");
            }
        }
    }
}

#[test]
fn crashes_are_reported_in_one_line_and_die_with_sigsegv() {
    let dir = tempfile::tempdir().unwrap();
    let src = root().join("tests/mmu/crash.cm");
    let cases = [
        ("null", "NULL pointer dereference"),
        ("wild", "invalid access to address"),
        ("cfault", "NULL pointer dereference"),
    ];
    for target in TARGETS {
        for mech in [
            "mmu",
            "mmu-reuse",
            "lookahead",
            "heap",
            "heap-malloc",
            "traditional",
            "callee-cleanup",
        ] {
            let exe = compile(
                &src,
                dir.path(),
                &format!("crash-{mech}-{target}"),
                &["--mech", mech, "--target", target],
            );
            for (case, want) in cases {
                let what = format!("{case} under {mech} on {target}");
                let mut cmd = Command::new(&exe);
                cmd.arg(case);
                let o = run_within(cmd, CRASH_DEADLINE, &what);
                assert_eq!(o.status.signal(), Some(SIGSEGV), "{what}: {:?}", o.status);
                assert_one_line(&o, want, &what);
                assert!(!text(&o.stderr).contains("overflowed"), "{what}");
            }
            // The control: no fault, no report.
            let mut cmd = Command::new(&exe);
            cmd.args(["deep", "1000"]);
            let o = run_within(cmd, CRASH_DEADLINE, "deep 1000");
            assert_eq!(o.status.code(), Some(0));
            assert_eq!(text(&o.stdout), "500500\n");
            assert_eq!(text(&o.stderr), "");
        }
    }
}

#[test]
fn runaway_recursion_stops_at_the_stack_limit_under_mmu() {
    let dir = tempfile::tempdir().unwrap();
    let src = root().join("tests/mmu/crash.cm");
    for target in TARGETS {
        for mech in MMU_MECHS {
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

#[test]
fn fixed_stacks_explain_their_overflow() {
    let dir = tempfile::tempdir().unwrap();
    let src = root().join("tests/mmu/crash.cm");
    let configs = [
        ("traditional", "x86_64", "emit"),
        ("traditional", "i686", "emit"),
        ("callee-cleanup", "x86_64", "emit"),
        ("callee-cleanup", "i686", "emit"),
        ("traditional", "x86_64", "native"),
    ];
    for (mech, target, backend) in configs {
        {
            let exe = compile(
                &src,
                dir.path(),
                &format!("fixed-{mech}-{target}-{backend}"),
                &["--mech", mech, "--target", target, "--backend", backend],
            );
            for case in ["runaway", "thread"] {
                let what = format!("{case} under {mech} on {target}");
                let mut cmd = Command::new("sh");
                // An 8 MiB main stack whatever the caller's limit (the report names its size).
                cmd.arg("-c")
                    .arg("ulimit -s 8192 && exec \"$0\" \"$1\"")
                    .arg(&exe)
                    .arg(case);
                let o = run_within(cmd, CRASH_DEADLINE, &what);
                assert_eq!(o.status.signal(), Some(SIGSEGV), "{what}: {:?}", o.status);
                assert_one_line(&o, "overflowed its fixed stack of", &what);
                let err = text(&o.stderr);
                assert!(err.contains(&format!("--mech {mech}")), "{what}: {err}");
                if case == "runaway" {
                    assert!(err.contains("main thread"), "{what}: {err}");
                }
            }
        }
    }
}

#[test]
fn a_signal_storm_during_deep_recursion_changes_no_output() {
    let dir = tempfile::tempdir().unwrap();
    let src = root().join("tests/lookahead/deep_sum.cm");
    let n = 2_000_000;
    for target in TARGETS {
        let storm = build_storm(dir.path(), target);
        for mech in MMU_MECHS {
            // Small chunks: a guard fault every few hundred levels, signals arriving in the
            // middle of probes, returns through the stub and fault handling alike.
            let exe = compile(
                &src,
                dir.path(),
                &format!("storm-{mech}-{target}"),
                &["--mech", mech, "--target", target, "--chunk-size", "16384"],
            );
            let mut cmd = Command::new(&exe);
            // Fixed chunks (no growth): a fault every 16 KiB however deep.
            cmd.arg(n.to_string())
                .env("LD_PRELOAD", &storm)
                .env("STACKRT_CHUNK_GROWTH", "0")
                .env("STACKRT_STATS", "1");
            let o = run_within(cmd, Duration::from_secs(120), "the storm");
            let err = text(&o.stderr);
            assert_eq!(o.status.code(), Some(0), "{mech} {target}: {err}");
            assert_eq!(text(&o.stdout), deep_sum_expected(n), "{mech} {target}");
            let signals = storm_signals(&err);
            assert!(
                signals >= 50,
                "{mech} {target}: only {signals} signals: {err}"
            );
            assert!(stat(&err, "guard faults taken") > 500, "{err}");
        }
    }
}

/// The thesis's tree parameters with 256 threads, one spike each (see tests/lookahead.rs):
/// every spike recurses 1 million calls (16 MiB) deep on i686, where 256 fixed stacks of that
/// size do not fit.
const TREE_ARGS: [&str; 6] = ["1000", "1000000", "0.3", "3", "256", "16777216"];

#[test]
fn the_tree_with_256_threads_runs_in_32_bits() {
    let dir = tempfile::tempdir().unwrap();
    let src = root().join("tests/programs/thesis/tree_multi.cm");
    let expected = "balanced_size 1000\nunbalanced_size 1000000\npercent_spike 0.300000\n\
                    searches 3\nthreads 256\nUsing given stack size\nstacksize 16777216\n\
                    Data: 256\n";
    for mech in MMU_MECHS {
        let exe = compile(
            &src,
            dir.path(),
            &format!("tree-{mech}"),
            &["--mech", mech, "--target", "i686"],
        );
        // Growing chains (the default), then the thesis's fixed chunks.
        for (growth, min_faults) in [(None, 256 * 16), (Some("0"), 256 * 100)] {
            let mut cmd = Command::new(&exe);
            cmd.args(TREE_ARGS).env("STACKRT_STATS", "1");
            if let Some(g) = growth {
                cmd.env("STACKRT_CHUNK_GROWTH", g);
            }
            let o = run_within(cmd, Duration::from_secs(120), "256 tree threads");
            let err = text(&o.stderr);
            let what = format!("{mech}, STACKRT_CHUNK_GROWTH {growth:?}");
            assert_eq!(o.status.code(), Some(0), "{what}: {err}");
            assert_eq!(text(&o.stdout), expected, "{what}");
            assert_eq!(stat(&err, "threads entered"), 257, "{what}: {err}");
            // Each spike is 16 MiB deep: with fixed chunks about 16 MiB / 128 KiB = 128 chunks,
            // each linked by a fault; growing chains link chunks of up to 1 MiB, so at least 16.
            let faults = stat(&err, "guard faults taken");
            assert!(faults >= min_faults, "{what}: {err}");
            if growth.is_none() {
                assert!(faults < 256 * 64, "{what}: chains did not grow: {err}");
            }
            assert!(
                stat(&err, "peak stack bytes") >= 15_500_000,
                "{what}: {err}"
            );
        }
    }
}
