//! End-to-end tests of C code calling C-- back through function addresses (C entries,
//! `cmm_codegen::emit::c_entry`, `stackrt::mech::callback`): `qsort` comparators that recurse
//! deep or yield, from main and threads, under every mechanism, both targets, OS and green
//! threads (and the native back end); a wait inside a callback that cannot switch; a function C
//! cannot call. The corpus's `tests/programs/c_callbacks.cm` (qsort and bsearch at the bottom of
//! a deep recursion) is checked against gcc in `tests/corpus.rs`. Expected lines were worked out
//! by hand from the sources (and agree with gcc and `tests/oracle/sthread.c`).

mod common;

use common::{compile, root, run_within, text, MECHS};

use std::process::Command;
use std::time::Duration;

const TARGETS: [&str; 2] = ["x86_64", "i686"];

fn build(
    file: &str,
    dir: &std::path::Path,
    target: &str,
    mech: &str,
    threads: &str,
) -> std::path::PathBuf {
    compile(
        &root().join(file),
        dir,
        &format!("{}-{target}-{mech}-{threads}", file.replace('/', "_")),
        &["--target", target, "--mech", mech, "--threads", threads],
    )
}

/// tests/callbacks/deep.cm: every thread sorts a permutation of 0..5 (so prints 12345, the
/// digits of 0,1,2,3,4,5) with a comparator that first recurses 100,000 levels: the callback
/// grows past chunks, guard pages and heap slabs inside qsort's call. tests/callbacks/yield.cm:
/// four green threads sort a permutation of 0..7 (1234567) with a comparator that yields.
/// A green thread preempted by time inside a C callback whose C frames are on its worker's
/// handler stack (the chunked mechanisms) is not switched out: tests/callbacks/deep.cm with
/// 100 us slices, so the monitor's signal often lands in the comparator's 100,000-level
/// recursion. Before, the asynchronous preemption switched the thread out there, and the next
/// thread to end on that worker stopped with "would wait (or exit) inside a C callback" (20
/// runs of 20 under `mmu` on i686); or its C frames would have been resumed on another worker.
#[test]
fn threads_inside_c_callbacks_are_not_preempted_away_from_their_worker() {
    let dir = tempfile::tempdir().unwrap();
    let deep = "0: 12345\n1: 12345\n2: 12345\n3: 12345\n";
    for target in TARGETS {
        for mech in ["lookahead", "mmu", "mmu-reuse"] {
            let what = format!("{target} {mech} green, 100 us slices");
            let exe = build("tests/callbacks/deep.cm", dir.path(), target, mech, "green");
            for _ in 0..3 {
                let mut cmd = Command::new(&exe);
                cmd.args(["3", "100000"])
                    .env("STACKRT_TIMESLICE", "100us")
                    .env("STACKRT_WORKERS", "2");
                let o = run_within(cmd, Duration::from_secs(60), &what);
                assert_eq!(o.status.code(), Some(0), "{what}: {}", text(&o.stderr));
                assert_eq!(text(&o.stdout), deep, "{what}");
            }
        }
    }
}

#[test]
fn c_calls_c_minus_minus_back_under_every_mechanism() {
    let dir = tempfile::tempdir().unwrap();
    let deep = "0: 12345\n1: 12345\n2: 12345\n3: 12345\n";
    for target in TARGETS {
        for mech in MECHS {
            for threads in ["os", "green"] {
                let what = format!("{target} {mech} {threads}");
                let exe = build("tests/callbacks/deep.cm", dir.path(), target, mech, threads);
                let mut cmd = Command::new(&exe);
                cmd.args(["3", "100000"]);
                let o = run_within(cmd, Duration::from_secs(60), &what);
                assert_eq!(o.status.code(), Some(0), "{what}: {}", text(&o.stderr));
                assert_eq!(text(&o.stdout), deep, "{what}");
                let exe = build(
                    "tests/callbacks/yield.cm",
                    dir.path(),
                    target,
                    mech,
                    threads,
                );
                for workers in ["1", "2"] {
                    let mut cmd = Command::new(&exe);
                    cmd.env("STACKRT_WORKERS", workers);
                    let o = run_within(cmd, Duration::from_secs(60), &what);
                    assert_eq!(o.status.code(), Some(0), "{what}: {}", text(&o.stderr));
                    assert_eq!(
                        text(&o.stdout),
                        "1234567 1234567 1234567 1234567\n",
                        "{what} {workers} workers"
                    );
                }
            }
        }
    }
    let exe = compile(
        &root().join("tests/callbacks/deep.cm"),
        dir.path(),
        "deep-native",
        &["--backend", "native"],
    );
    let mut cmd = Command::new(&exe);
    cmd.args(["3", "100000"]);
    let o = run_within(cmd, Duration::from_secs(60), "native");
    assert_eq!(text(&o.stdout), deep, "native: {}", text(&o.stderr));
}

/// tests/callbacks/wait.cm on one worker: the thread's comparator locks a mutex main holds.
/// Where C runs on the thread's own stack (OS threads; `traditional`, `callee-cleanup` and the
/// heap mechanisms under green threads) it waits and the sort completes (3,1,2,0 → 0123, printed
/// as 123); where it runs on the worker's stack (`lookahead`, `mmu`, `mmu-reuse`, `mtss` green)
/// the wait cannot switch: one line, exit 70, never a hang or a crash.
#[test]
fn a_wait_inside_a_callback_on_the_workers_stack_is_one_line() {
    let dir = tempfile::tempdir().unwrap();
    for target in TARGETS {
        for mech in MECHS {
            for threads in ["os", "green"] {
                let what = format!("{target} {mech} {threads}");
                let exe = build("tests/callbacks/wait.cm", dir.path(), target, mech, threads);
                let mut cmd = Command::new(&exe);
                cmd.env("STACKRT_WORKERS", "1");
                let o = run_within(cmd, Duration::from_secs(60), &what);
                let pinned =
                    threads == "green" && ["lookahead", "mmu", "mmu-reuse", "mtss"].contains(&mech);
                if pinned {
                    assert_eq!(o.status.code(), Some(70), "{what}");
                    assert_eq!(
                        text(&o.stderr),
                        "stackrt: green thread 1 would wait (or exit) inside a C callback that \
                         runs on its worker's stack, where it cannot switch: wait outside the \
                         callback, or use --mech traditional, callee-cleanup or heap, whose C \
                         calls run on the thread's own stack\n",
                        "{what}"
                    );
                } else {
                    assert_eq!(o.status.code(), Some(0), "{what}: {}", text(&o.stderr));
                    assert_eq!(
                        text(&o.stdout),
                        "sorted 123, compared at least once: 1\n",
                        "{what}"
                    );
                }
            }
        }
    }
}

/// tests/callbacks/unsupported.cm: qsort calls a three-parameter C-- function through its
/// address; its C entry cannot pass three words, so the program stops with one line naming it.
#[test]
fn c_cannot_call_a_function_of_three_parameters_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    for target in TARGETS {
        for mech in ["traditional", "lookahead", "heap"] {
            let exe = build(
                "tests/callbacks/unsupported.cm",
                dir.path(),
                target,
                mech,
                "os",
            );
            let o = run_within(Command::new(&exe), Duration::from_secs(30), mech);
            assert_eq!(o.status.code(), Some(70), "{target} {mech}");
            assert_eq!(
                text(&o.stderr),
                "stackrt: C called the C-- function `three` through its address, but C can call \
                 only C-- functions of at most two int, char or pointer parameters that return \
                 one of those or nothing\n",
                "{target} {mech}"
            );
        }
    }
}

/// C code linked in with `--link` (tests/callbacks/helper.c, compiled by the C compiler for
/// the target): tests/callbacks/c_yield.cm calls a plain C function and one that calls
/// `sthread_yield` while another thread is runnable. Every mechanism, both targets: under OS
/// threads both lines come (in either order). Under green threads on one worker, where C code
/// runs on the thread's own stack (fixed stacks, heap frames) the yield switches; where it runs
/// on the worker's handler stack (lookahead, mmu, mmu-reuse, mtss) it cannot, and the program
/// stops with the runtime's one line and status 70 (`stackrt_ccall_switched`, reached from the
/// C-call trampoline and from the inline form of `mmu`'s C calls) instead of going on as if the
/// yield had happened.
#[test]
fn c_code_linked_in_runs_and_cannot_switch_green_threads_from_handler_stacks() {
    let dir = tempfile::tempdir().unwrap();
    let helper = root().join("tests/callbacks/helper.c");
    let helper = helper.to_str().unwrap();
    let on_handler_stack = ["lookahead", "mmu", "mmu-reuse", "mtss"];
    for target in TARGETS {
        for mech in MECHS {
            for threads in ["os", "green"] {
                let what = format!("{target} {mech} {threads}");
                // A program linked with the C helper under this configuration.
                let build = |program: &str| {
                    compile(
                        &root().join(format!("tests/callbacks/{program}.cm")),
                        dir.path(),
                        &format!("{program}-{target}-{mech}-{threads}"),
                        &[
                            "--target",
                            target,
                            "--mech",
                            mech,
                            "--threads",
                            threads,
                            "--link",
                            helper,
                        ],
                    )
                };
                let exe = build("c_yield");
                let mut cmd = Command::new(&exe);
                cmd.env("STACKRT_WORKERS", "1");
                let o = run_within(cmd, Duration::from_secs(60), &what);
                if threads == "green" && on_handler_stack.contains(&mech) {
                    assert_eq!(o.status.code(), Some(70), "{what}");
                    assert_eq!(
                        text(&o.stderr),
                        "stackrt: main thread: a C function called from C-- code called the \
                         thread library, which cannot switch green threads from C code (call it \
                         from C-- code instead)\n",
                        "{what}"
                    );
                    assert_eq!(text(&o.stdout), "", "{what}");
                    // From a thread other than main, the line names it.
                    let exe = build("c_yield_thread");
                    let mut cmd = Command::new(&exe);
                    cmd.env("STACKRT_WORKERS", "1");
                    let o = run_within(cmd, Duration::from_secs(60), &what);
                    assert_eq!(o.status.code(), Some(70), "{what}");
                    assert!(
                        text(&o.stderr).starts_with("stackrt: green thread 1: a C function"),
                        "{what}: {}",
                        text(&o.stderr)
                    );
                } else {
                    assert_eq!(o.status.code(), Some(0), "{what}: {}", text(&o.stderr));
                    let mut lines: Vec<String> =
                        text(&o.stdout).lines().map(str::to_string).collect();
                    lines.sort();
                    assert_eq!(lines, ["42", "other"], "{what}");
                }
            }
        }
    }
}
