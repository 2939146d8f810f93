//! End-to-end tests of `--mech mtss` (the MTSS seed, `stackrt::mech::mtss`): tasks whose
//! stacks are too small for their recursion complete by growing into other threads' free
//! stack space where a fixed stack reports its overflow; every page size; threads that overflow
//! again and again on several CPUs while others park and lend; the one-line error when no
//! thread has room; the options `mtss` does not take. Each on OS threads and on green threads
//! (where a parked thread lends and an overflow that finds no room yields until some is free). Expected outputs are gcc's on the same
//! programs with the oracle's thread library and default stacks (written here), or the
//! programs' formulas. The corpus (tests/corpus.rs) runs every program under `mtss` too.

mod common;

use common::{assert_one_line, cmm, compile, root, run_within, text};

use std::process::Command;
use std::time::Duration;

const TARGETS: [&str; 2] = ["x86_64", "i686"];

/// The thread models: OS threads, and green threads on two workers.
const THREADS: [&[&str]; 2] = [&[], &["--threads", "green"]];

/// `extra` after the thread model's options.
fn with(threads: &[&'static str], extra: &[&'static str]) -> Vec<&'static str> {
    [threads, extra].concat()
}

/// gcc's output of `tests/mtss/small_stacks.cm 4 1000 0` (x86-64 and -m32 alike).
const SMALL_STACKS_4_1000: &str = "task 0: 1000 levels, sum 3997\n\
                                   task 1: 2000 levels, sum 7997\n\
                                   task 2: 3000 levels, sum 11999\n\
                                   task 3: 4000 levels, sum 16003\n\
                                   total 39996\n";

/// gcc's output of `tests/mtss/stress.cm 8 200 0` (x86-64 and -m32 alike).
const STRESS_8_200: &str = "8 threads, 1600 rounds done, total 3809\n";

fn build(name: &str, dir: &std::path::Path, target: &str, extra: &[&str]) -> std::path::PathBuf {
    let src = root().join(format!("tests/mtss/{name}.cm"));
    let mut args = vec!["--mech", "mtss", "--target", target];
    args.extend_from_slice(extra);
    let tag = extra.join("");
    compile(&src, dir, &format!("{name}-{target}{tag}"), &args)
}

/// A number in the `stackrt: mtss:` statistics line: after `region` and `page`, before the
/// other names.
fn mtss_stat(stderr: &str, what: &str) -> u64 {
    let line = stderr
        .lines()
        .find(|l| l.starts_with("stackrt: mtss: region"))
        .unwrap_or_else(|| panic!("no mtss statistics in:\n{stderr}"));
    let words: Vec<&str> = line.split([' ', ',']).filter(|w| !w.is_empty()).collect();
    let at = words
        .iter()
        .position(|w| *w == what)
        .unwrap_or_else(|| panic!("no `{what}` in {line:?}"));
    let n = if what == "region" || what == "page" {
        words[at + 1]
    } else {
        words[at - 1]
    };
    n.parse().unwrap()
}

/// Four tasks on 2 KiB stacks recurse 1,000 to 4,000 levels (tens of KiB each): under `mtss`
/// they overflow, a page at a time, into `main`'s stack while it waits in `sthread_join` and
/// into the stacks of the tasks that ended, and print gcc's lines; under `traditional` the same
/// request (16 KiB, the system's minimum) ends in the fixed stack's one-line overflow report.
#[test]
fn tasks_with_too_small_stacks_complete_by_sharing() {
    let dir = tempfile::tempdir().unwrap();
    for (t, threads) in TARGETS.into_iter().flat_map(|t| THREADS.map(|m| (t, m))) {
        let exe = build("small_stacks", dir.path(), t, threads);
        let target = &format!("{t} {threads:?}");
        let mut cmd = Command::new(&exe);
        cmd.args(["4", "1000", "2048"]).env("STACKRT_STATS", "1");
        let o = run_within(cmd, Duration::from_secs(60), "small stacks");
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{target}: {err}");
        assert_eq!(text(&o.stdout), SMALL_STACKS_4_1000, "{target}");
        // Thousands of levels a task beyond its 2 KiB: many pages.
        assert!(mtss_stat(&err, "overflows") > 100, "{target}: {err}");
        assert!(mtss_stat(&err, "pages") > 100, "{target}: {err}");
        // Without overflows, nothing is lent.
        let mut cmd = Command::new(&exe);
        cmd.args(["4", "1000", "0"]).env("STACKRT_STATS", "1");
        let o = run_within(cmd, Duration::from_secs(60), "default stacks");
        let err = text(&o.stderr);
        assert_eq!(text(&o.stdout), SMALL_STACKS_4_1000, "{target}");
        assert_eq!(mtss_stat(&err, "overflows"), 0, "{target}: {err}");

        let fixed = compile(
            &root().join("tests/mtss/small_stacks.cm"),
            dir.path(),
            &format!("small-traditional-{t}{}", threads.concat()),
            &[threads, &["--mech", "traditional", "--target", t]].concat(),
        );
        let mut cmd = Command::new(&fixed);
        cmd.args(["4", "1000", "2048"]);
        let o = run_within(cmd, Duration::from_secs(60), "traditional");
        assert_one_line(&o, "overflowed its fixed stack", target);
    }
}

/// Every page size from the paper's smallest to a whole OS page gives the same output; smaller
/// pages overflow more often.
#[test]
fn every_page_size_gives_the_same_output() {
    let dir = tempfile::tempdir().unwrap();
    for (target, threads) in TARGETS.into_iter().flat_map(|t| THREADS.map(|m| (t, m))) {
        let mut overflows = Vec::new();
        for page in ["32", "128", "512", "4096"] {
            let exe = build(
                "small_stacks",
                dir.path(),
                target,
                &with(threads, &["--chunk-size", page]),
            );
            let target = &format!("{target} {threads:?}");
            let mut cmd = Command::new(&exe);
            cmd.args(["4", "1000", "2048"]).env("STACKRT_STATS", "1");
            let o = run_within(cmd, Duration::from_secs(60), "page sizes");
            let err = text(&o.stderr);
            assert_eq!(o.status.code(), Some(0), "{target} page {page}: {err}");
            assert_eq!(text(&o.stdout), SMALL_STACKS_4_1000, "{target} page {page}");
            assert_eq!(
                mtss_stat(&err, "page"),
                page.parse::<u64>().unwrap(),
                "{err}"
            );
            overflows.push(mtss_stat(&err, "overflows"));
        }
        assert!(
            overflows.windows(2).all(|w| w[0] >= w[1]) && overflows[0] > overflows[3],
            "{target}: overflows by page size {overflows:?}"
        );
    }
}

/// Eight threads on 1 KiB stacks (on a 2-CPU machine: two run at once, the others wait on a
/// contended mutex and lend) overflow tens of thousands of times in 200 rounds each, taking
/// pages from stacks whose owners may wake at any moment: the total is gcc's, in every one of
/// ten runs on each target, and with a one-page region left to spare nothing is corrupted.
#[test]
fn threads_overflowing_while_others_park_and_wake_compute_what_gcc_computes() {
    let dir = tempfile::tempdir().unwrap();
    for (target, threads) in TARGETS.into_iter().flat_map(|t| THREADS.map(|m| (t, m))) {
        let exe = build("stress", dir.path(), target, threads);
        let target = &format!("{target} {threads:?}");
        for run in 0..10 {
            let mut cmd = Command::new(&exe);
            cmd.args(["8", "200", "1024"]).env("STACKRT_STATS", "1");
            // Green threads: every other run on one worker.
            if !threads.is_empty() {
                cmd.env("STACKRT_WORKERS", if run % 2 == 0 { "2" } else { "1" });
            }
            let o = run_within(cmd, Duration::from_secs(60), "stress");
            let err = text(&o.stderr);
            assert_eq!(o.status.code(), Some(0), "{target} run {run}: {err}");
            assert_eq!(text(&o.stdout), STRESS_8_200, "{target} run {run}");
            assert!(mtss_stat(&err, "overflows") > 1000, "{target}: {err}");
        }
    }
}

/// When no thread has room and none can make any (every other thread waits for room too, or
/// for a join), the program stops with one line naming the thread and the bytes it needed,
/// status 70, instead of hanging or corrupting a stack.
#[test]
fn no_room_anywhere_is_one_line_and_status_70() {
    let dir = tempfile::tempdir().unwrap();
    for (target, threads) in TARGETS.into_iter().flat_map(|t| THREADS.map(|m| (t, m))) {
        for (name, args) in [
            ("small_stacks", ["3", "1000", "256"]),
            ("stress", ["8", "200", "256"]),
        ] {
            let exe = build(name, dir.path(), target, threads);
            let target = &format!("{target} {threads:?}");
            for _ in 0..3 {
                let mut cmd = Command::new(&exe);
                cmd.args(args).env("STACKRT_MTSS_MAIN_STACK", "4096");
                let o = run_within(cmd, Duration::from_secs(60), "no room");
                let what = format!("{target} {name}");
                assert_eq!(o.status.code(), Some(70), "{what}: {}", text(&o.stderr));
                assert_one_line(&o, "overflowed its stack and no thread has", &what);
                let err = text(&o.stderr);
                assert!(
                    err.starts_with("stackrt: mtss: thread ") && err.contains(" contiguous bytes"),
                    "{what}: {err}"
                );
            }
        }
    }
}

/// `mtss` takes a page size that is a power of two from 16 to 65536 bytes: each refusal is
/// one line, the usage status 2.
#[test]
fn options_mtss_does_not_take_are_refused() {
    let src = root().join("tests/mtss/small_stacks.cm");
    for (extra, want) in [
        (&["--chunk-size", "100"][..], "must be a power of two"),
        (&["--chunk-size", "8"][..], "must be a power of two"),
    ] {
        let o = cmm()
            .arg("compile")
            .arg(&src)
            .args(["--mech", "mtss", "-o", "/dev/null"])
            .args(extra)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{extra:?}");
        let err = text(&o.stderr);
        assert!(
            err.starts_with("cmm: error: ") && err.contains(want),
            "{extra:?}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{extra:?}: {err}");
    }
}
