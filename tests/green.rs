//! End-to-end tests of green threads (`cmm compile --threads green`): many threads alive at
//! once, deep recursion in green threads on both targets,
//! preemption at checkpoints, the deterministic scheduler
//! (`STACKRT_SCHED`: same seed same output and trace, replay, a lost update found by a seed
//! search), misuse and configuration errors. Expected outputs come from formulas or are
//! written here by hand; the corpus (tests/corpus.rs) runs every program under green threads.

mod common;

use common::{compile, root, run_within, sum_formula, text};

use std::process::Command;
use std::time::Duration;

const TARGETS: [&str; 2] = ["x86_64", "i686"];

fn green(mech: &str, target: &str) -> Vec<String> {
    ["--mech", mech, "--target", target, "--threads", "green"]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

fn build(src: &str, dir: &std::path::Path, mech: &str, target: &str) -> std::path::PathBuf {
    let args = green(mech, target);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    compile(
        &root().join(src),
        dir,
        &format!("{}-{mech}-{target}", src.replace('/', "_")),
        &args,
    )
}

/// As [`build`], with `--preempt-loops` (polls at every loop head).
fn build_polled(src: &str, dir: &std::path::Path, mech: &str, target: &str) -> std::path::PathBuf {
    let mut args = green(mech, target);
    args.push("--preempt-loops".into());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    compile(
        &root().join(src),
        dir,
        &format!("{}-{mech}-{target}-polled", src.replace('/', "_")),
        &args,
    )
}

/// The green threads' line of the `STACKRT_STATS=1` report in `stderr`.
fn green_stats_line(stderr: &str) -> &str {
    stderr
        .lines()
        .find(|l| l.starts_with("stackrt: green threads:"))
        .unwrap_or_else(|| panic!("no green statistics: {stderr}"))
}

/// The count of that line's field named `what` (`"steals"` in `..., 5 steals, ...`).
fn green_stat(stderr: &str, what: &str) -> u64 {
    let line = green_stats_line(stderr);
    line.split(", ")
        .find_map(|f| f.strip_suffix(what)?.strip_suffix(' '))
        .and_then(|n| n.rsplit(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no count of {what}: {line}"))
}

/// 100,000 threads on x86-64 (20,000 on i686, whose address space is smaller), all alive and
/// 100 levels deep at once, under lookahead; each checks in under a mutex and yields until all
/// have arrived. The million-thread run is the same program with 1000000 (see the README).
/// Then tests/green/grid.cm, the `green_grid` experiment's program, in all its shapes.
#[test]
fn a_hundred_thousand_threads_alive_at_once() {
    let dir = tempfile::tempdir().unwrap();
    for (target, n) in [("x86_64", 100_000), ("i686", 20_000)] {
        let exe = build("tests/green/alive.cm", dir.path(), "lookahead", target);
        let mut cmd = Command::new(&exe);
        cmd.args([n.to_string(), "100".into()])
            .env("STACKRT_STATS", "1");
        let o = run_within(cmd, Duration::from_secs(120), "alive");
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{target}: {err}");
        assert_eq!(
            text(&o.stdout),
            format!("{n} threads arrived, 0 results wrong\n"),
            "{target}"
        );
        let line = green_stats_line(&err);
        assert!(
            line.contains(&format!("{} created, {} peak alive", n + 1, n + 1)),
            "{target}: {line}"
        );
        // Every thread's first chunk is its stack block: no chunk of the runtime's is carved
        // per thread (the first threads' overflows, before their blocks are sized, take a few
        // standard chunks' worth of small ones).
        assert!(
            common::stat(&err, "peak resident chunks") < 16 * 32768,
            "{target}: {err}"
        );
    }
    // The shapes of the `green_grid` experiment (tests/green/grid.cm) at a small count: every
    // frame size, 100 and 1000 deep, parked on a mutex, yielding, and parked with every
    // hundredth thread a hundred times deeper; and 10,000 threads 10 deep, whose yields fill a
    // worker's run queue until it spills (a thread started by a direct switch used to requeue
    // the yielding one on its fresh block, and glibc's `free` in the spill overran i686
    // blocks: "overran its stack block", in every run on one worker, in most on two). The
    // expected line is the program's format filled in by hand (gcc with tests/oracle/sthread.c
    // prints the same).
    let exes: Vec<_> = TARGETS
        .iter()
        .map(|t| (t, build("tests/green/grid.cm", dir.path(), "lookahead", t)))
        .collect();
    for (target, exe) in &exes {
        for (threads, depth, workers) in [
            (2000, 100, "2"),
            (200, 1000, "2"),
            (10_000, 10, "1"),
            (10_000, 10, "2"),
        ] {
            for frame in ["16", "48", "256"] {
                for wait in ["mutex", "yield", "mixed"] {
                    let mut cmd = Command::new(exe);
                    cmd.args([&threads.to_string(), &depth.to_string(), frame, wait])
                        .env("STACKRT_WORKERS", workers);
                    let o = run_within(cmd, Duration::from_secs(60), "grid");
                    assert_eq!(
                        o.status.code(),
                        Some(0),
                        "{target} {threads} {depth} {frame} {wait}, {workers} workers: {}",
                        text(&o.stderr)
                    );
                    assert_eq!(
                        text(&o.stdout),
                        format!(
                            "{threads} threads arrived {depth} deep (frame {frame}, {wait}), 0 results wrong\n"
                        ),
                        "{target}"
                    );
                }
            }
        }
    }
    // The bytes per level the experiment's report divides by (`grid_level_bytes` in
    // crates/bench/src/experiments.rs): what one level of each recursion holds on the stack,
    // its frame, its arguments and its return address, read from the assembly's frame lines
    // (`# C-- function `f`: frame F bytes, A bytes of arguments`). The numbers were checked by
    // hand against the listings: `down16` pushes its return address and one argument and has
    // no frame; `down48` two arguments; `down256` a frame of 216 bytes on x86-64 (204 on
    // i686) for its 48 ints and saved registers.
    for (target, want) in [("x86_64", [16, 24, 240]), ("i686", [8, 12, 216])] {
        let o = common::cmm()
            .args(["compile", "--emit", "asm"])
            .args(green("lookahead", target))
            .arg(root().join("tests/green/grid.cm"))
            .output()
            .unwrap();
        let asm = text(&o.stdout);
        let slot = if target == "x86_64" { 8 } else { 4 };
        for (f, want) in ["down16", "down48", "down256"].iter().zip(want) {
            let (frame, args): (u64, u64) = asm
                .lines()
                .find_map(|l| {
                    let rest = l.strip_prefix(&format!("# C-- function `{f}`: frame "))?;
                    let (frame, rest) = rest.split_once(" bytes, ")?;
                    let (args, _) = rest.split_once(" bytes of arguments")?;
                    Some((frame.parse().ok()?, args.parse().ok()?))
                })
                .unwrap_or_else(|| panic!("{target}: no frame line of {f}: {asm}"));
            assert_eq!(frame + args + slot, want, "{target} {f}");
        }
    }
}

/// Every call of the thread library made at the bottom of green threads' stacks
/// (tests/green/library.cm), on one and two workers and under the deterministic scheduler's
/// seeds: under `lookahead` these calls run on the thread's own stack, in the budget the
/// compiler reserves for them (`cmm_codegen::callgraph::thread_library_budget`), with the
/// thread's first chunk packed next to other threads' blocks. The runtime checks a canary
/// below every first chunk when its thread ends; a call that ran past its block ends the run
/// with "overran its stack block". (A budget a few words short no longer gets there: blocks
/// are at least stackrt's `EXIT_ROOM` and learned from what threads used; checked by hand
/// with 4 and 6 words of the 12.) The
/// expected output is gcc's with the oracle's thread library (50 threads x 20 rounds x 2).
#[test]
fn the_thread_library_fits_its_budget_on_a_green_stack() {
    let dir = tempfile::tempdir().unwrap();
    for target in TARGETS {
        let exe = build("tests/green/library.cm", dir.path(), "lookahead", target);
        for (workers, sched) in [("1", ""), ("2", ""), ("1", "random:7"), ("1", "pct:3:3")] {
            let mut cmd = Command::new(&exe);
            cmd.env("STACKRT_WORKERS", workers);
            if !sched.is_empty() {
                cmd.env("STACKRT_SCHED", sched);
            }
            let o = run_within(cmd, Duration::from_secs(60), "library");
            let err = text(&o.stderr);
            assert_eq!(
                o.status.code(),
                Some(0),
                "{target} {workers} {sched}: {err}"
            );
            assert_eq!(
                text(&o.stdout),
                "2000\n",
                "{target} {workers} {sched}: {err}"
            );
            assert!(err.is_empty(), "{target} {workers} {sched}: {err}");
        }
    }
}

/// C calls at every level of a 20,000-deep recursion in four green threads
/// (tests/green/ccall_deep.cm: `sprintf`, `atoi` and `abs` per level), under a chunked, an MMU,
/// a heap and a fixed-stack mechanism, on both targets. Under `lookahead` the calls run on the
/// worker's handler stack (`stackrt_ccall`), so the recursion needs its C-- frames
/// only: 20,000 levels of a 16-byte buffer frame fit in well under the 8 KiB per level a C
/// call reserves on an OS thread's chunk (160 MiB per thread). Expected: gcc's output with
/// the oracle's thread library (each thread sums 0..19999).
#[test]
fn green_threads_call_c_at_every_level_of_a_deep_recursion() {
    let dir = tempfile::tempdir().unwrap();
    let want: String = (0..4).map(|i| format!("thread {i}: 199990000\n")).collect();
    for target in TARGETS {
        for mech in ["lookahead", "mmu-reuse", "heap", "traditional"] {
            let exe = build("tests/green/ccall_deep.cm", dir.path(), mech, target);
            let mut cmd = Command::new(&exe);
            cmd.env("STACKRT_STATS", "1");
            let o = run_within(cmd, Duration::from_secs(60), "ccall_deep");
            let err = text(&o.stderr);
            assert_eq!(o.status.code(), Some(0), "{mech} {target}: {err}");
            assert_eq!(text(&o.stdout), want, "{mech} {target}: {err}");
            if mech == "lookahead" {
                // Four threads' stacks: 20,000 levels of at most 64 bytes each, far below
                // what 8 KiB per level would hold (650 MB).
                let peak = common::stat(&err, "peak resident chunks");
                assert!(peak < 64 << 20, "{target}: {err}");
            }
        }
    }
}

/// Green threads' stack blocks count against `STACKRT_MEMORY_LIMIT` like the runtime's chunks
/// (README: "bytes of stack chunks all threads together may use"), and a thread holds about
/// what it uses: 20,000 threads parked 10 levels deep (tests/green/park.cm) hold under 2 KiB
/// of stack each and run under a 64 MiB limit; 100 levels deep, where every thread's frames
/// outgrow the block its compiled stack need asks for (the recursion's depth is not known
/// statically), under 8 KiB each, within 256 MiB. When each thread linked a 32 KiB chunk
/// beside its block, both needed over 600 MiB. An 8 MiB limit (blocks of 10 levels take about
/// 1,000 bytes a thread on x86-64 and 600 on i686, 12 MiB for 20,000) stops the program with
/// one line naming the thread, status 70.
#[test]
fn green_stack_blocks_count_against_the_memory_limit() {
    let dir = tempfile::tempdir().unwrap();
    for target in TARGETS {
        let exe = build("tests/green/park.cm", dir.path(), "lookahead", target);
        let run = |depth: &str, limit: &str| {
            let mut cmd = Command::new(&exe);
            cmd.args(["20000", depth])
                .env("STACKRT_WORKERS", "1")
                .env("STACKRT_MEMORY_LIMIT", limit);
            run_within(cmd, Duration::from_secs(60), "park")
        };
        for (depth, limit) in [("10", "64M"), ("100", "256M")] {
            let o = run(depth, limit);
            assert_eq!(
                o.status.code(),
                Some(0),
                "{target} {depth}: {}",
                text(&o.stderr)
            );
            assert_eq!(
                text(&o.stdout),
                "20000 threads arrived, 0 results wrong\n",
                "{target} {depth}"
            );
        }
        let o = run("10", "8M");
        assert_eq!(o.status.code(), Some(70), "{target}: {}", text(&o.stderr));
        common::assert_one_line(&o, "out of memory for stack chunks", "8M limit");
        assert!(text(&o.stderr).contains("green thread "), "{target}");
    }
}

/// Each green thread has its own `errno`: eight threads make C calls fail with different
/// errors, yield, and read `errno` back (tests/green/errno.cm). The expected line is what gcc
/// prints for the same source with the oracle's thread library (`tests/oracle/sthread.c`, OS
/// threads, each with its C library's errno), on both targets. On two workers some threads are
/// stolen by the other worker, so they read their errno on another OS thread than they set
/// it on. Without keeping `errno` across the thread-library calls that switch, most reads saw
/// another thread's error.
#[test]
fn every_green_thread_has_its_own_errno() {
    let dir = tempfile::tempdir().unwrap();
    for target in TARGETS {
        for mech in ["traditional", "lookahead", "heap", "mmu-reuse"] {
            let exe = build("tests/green/errno.cm", dir.path(), mech, target);
            // Returns the run's steals.
            let run = |workers: &str| -> u64 {
                let mut cmd = Command::new(&exe);
                cmd.env("STACKRT_WORKERS", workers)
                    .env("STACKRT_STATS", "1");
                let o = run_within(cmd, Duration::from_secs(60), "errno");
                let err = text(&o.stderr);
                assert_eq!(o.status.code(), Some(0), "{mech} {target}: {err}");
                assert_eq!(
                    text(&o.stdout),
                    "0 errno reads wrong; last seen 9 2\n",
                    "{mech} {target} {workers} workers"
                );
                green_stat(&err, "steals")
            };
            run("1");
            // On two workers some thread usually moves to the other worker's OS thread (a
            // steal) and reads its errno there; on a loaded machine the other worker may not
            // get a CPU before the threads are done, so a few runs are allowed to find one.
            let stolen = (0..10).any(|_| run("2") >= 1);
            assert!(stolen, "{mech} {target}: no run on two workers had a steal");
        }
    }
}

/// Creating and joining 80,000 short threads, 8 at a time: under the fixed-stack mechanisms
/// (and the heap mechanisms' C stacks) every thread's guarded stack is a reused one once the
/// workers' caches are warm, not a fresh mapping (each costs `mmap` + `mprotect` + `munmap`).
#[test]
fn thread_churn_reuses_fixed_stacks() {
    let dir = tempfile::tempdir().unwrap();
    for target in TARGETS {
        for mech in ["traditional", "callee-cleanup", "heap"] {
            let exe = build("tests/green/churn.cm", dir.path(), mech, target);
            let mut cmd = Command::new(&exe);
            cmd.arg("10000").env("STACKRT_STATS", "1");
            let o = run_within(cmd, Duration::from_secs(60), "churn");
            let err = text(&o.stderr);
            assert_eq!(o.status.code(), Some(0), "{mech} {target}: {err}");
            assert_eq!(text(&o.stdout), "10000 rounds\n", "{mech} {target}");
            let line = green_stats_line(&err);
            assert!(line.contains("80001 created"), "{mech} {target}: {line}");
            // At most 8 alive at once, plus what the workers' caches and the shared pool hold
            // when threads end on one worker and start on another: far below one per thread.
            let mapped = green_stat(&err, "fixed stacks mapped");
            assert!(
                mapped <= 200,
                "{mech} {target}: {mapped} stacks mapped for 80,000 threads"
            );
        }
    }
}

/// Fixed stacks (traditional, callee-cleanup) for 10,000 green threads: each has a guarded
/// stack of the size it asked for; under mmu-reuse each has a guarded first chunk of the
/// runtime's.
#[test]
fn ten_thousand_threads_on_guarded_stacks() {
    let dir = tempfile::tempdir().unwrap();
    for target in TARGETS {
        for mech in ["traditional", "callee-cleanup", "mmu-reuse"] {
            let exe = build("tests/green/alive.cm", dir.path(), mech, target);
            let mut cmd = Command::new(&exe);
            cmd.args(["10000", "100"]);
            let o = run_within(cmd, Duration::from_secs(60), "alive");
            assert_eq!(
                o.status.code(),
                Some(0),
                "{mech} {target}: {}",
                text(&o.stderr)
            );
            assert_eq!(
                text(&o.stdout),
                "10000 threads arrived, 0 results wrong\n",
                "{mech} {target}"
            );
        }
    }
}

/// A green thread's stack block holds what its threads touch, learned per entry function
/// (stackrt's `green::sizing`): tests/green/grid.cm's threads, whose entry reaches three
/// recursions of different frame sizes (the calls into them are checkpoints at the entry,
/// `cmm_codegen::callgraph::green_root_bound`), 10 levels deep parked on a mutex.
/// - 20,000 and 40,000 threads of one depth: the first window of 32 threads outgrows its
///   blocks (each links small chunks, 512 bytes and doubling: a few overflows each, 16 at
///   most) and teaches the next ones, which never overflow: the larger run overflows as
///   often as the smaller. The stack memory of all threads (the runtime's count of chunk
///   bytes in use: every thread's block below its entry frames) is at most 1.1 x the live
///   frames + 320 bytes per thread (the first chunk's header, slack and thread-stack word, 96
///   bytes on x86-64; the thread library's budget at the bottom, 96; the entry's and
///   `wait_all`'s frames; blocks sized by the longest path, as before the sizing, hold 560
///   bytes at 10 x 16 on x86-64 and fail).
/// - 20,000 threads of mixed depths (`mixed`: every hundredth thread 1000 deep): the blocks
///   are sized for the shallow ones, the deep ones link chunks (with blocks sized for the
///   deep ones, as the sizing by the largest need did, 256-byte frames ran out of the memory
///   limit at 100,000 threads). At most 1.1 x the average live frames + 512 bytes per thread
///   (the bound, without its 64 MiB): the deep threads' chunks grow geometrically, up
///   to about 1.2 x their frames.
///
/// The bytes per level are the assembly's (see `a_hundred_thousand_threads_alive_at_once`):
/// 16, 24 and 240 on x86-64; 8, 12 and 216 on i686.
#[test]
fn green_blocks_hold_what_their_threads_touch() {
    let dir = tempfile::tempdir().unwrap();
    for (target, levels) in [("x86_64", [16u64, 24, 240]), ("i686", [8, 12, 216])] {
        let exe = build("tests/green/grid.cm", dir.path(), "lookahead", target);
        // (overflows, bytes of chunks in use) of one run.
        let run = |threads: u64, frame: &str, wait: &str| -> (u64, u64) {
            let depth = 10;
            let mut cmd = Command::new(&exe);
            cmd.args([&threads.to_string(), &depth.to_string(), frame, wait])
                .env("STACKRT_STATS", "1");
            let o = run_within(cmd, Duration::from_secs(60), "grid");
            let err = text(&o.stderr);
            assert_eq!(o.status.code(), Some(0), "{target} {frame} {wait}: {err}");
            assert_eq!(
                text(&o.stdout),
                format!("{threads} threads arrived {depth} deep (frame {frame}, {wait}), 0 results wrong\n"),
                "{target} {frame} {wait}"
            );
            let in_use = err
                .lines()
                .find(|l| l.contains("peak chunks in use"))
                .and_then(|l| {
                    l.split_once('(')?
                        .1
                        .split_once(" bytes")?
                        .0
                        .parse::<u64>()
                        .ok()
                })
                .unwrap_or_else(|| panic!("{target} {frame}: no chunk bytes: {err}"));
            (common::stat(&err, "overflows"), in_use)
        };
        for (frame, level) in ["16", "48", "256"].into_iter().zip(levels) {
            let what = format!("{target} {frame}");
            let (overflows, in_use) = run(20_000, frame, "mutex");
            assert!(overflows <= 32 * 16, "{what}: {overflows} overflows");
            let bound = 20_000 * (10 * level * 11 / 10 + 320);
            assert!(
                in_use <= bound,
                "{what}: {in_use} bytes of stack for 20,000 threads (bound {bound})"
            );
            let (more, _) = run(40_000, frame, "mutex");
            assert!(
                more <= overflows + 32,
                "{what}: {overflows} overflows with 20,000 threads, {more} with 40,000"
            );
            // Threads 0, 100, ..., 19,900 go 1000 deep, the others 10: 19,800 x 10 + 200 x
            // 1000 levels.
            let (_, in_use) = run(20_000, frame, "mixed");
            let floor = (19_800 * 10 + 200 * 1000) * level;
            let bound = floor * 11 / 10 + 20_000 * 512;
            assert!(
                in_use <= bound,
                "{what} mixed: {in_use} bytes of stack for 20,000 threads (bound {bound})"
            );
        }
    }
}

/// Green threads recurse a million levels each, yielding on the way (so they move between
/// workers with deep chains), under lookahead (preempted every 200 us too) and the MMU
/// mechanisms (growing on guard faults, the fault handler finding the green thread's chain)
/// and the heap mechanisms (frames from the worker's lists, each thread on its own C stack),
/// on both targets.
#[test]
fn green_threads_recurse_a_million_levels() {
    let dir = tempfile::tempdir().unwrap();
    for target in TARGETS {
        // Lookahead's chunks grow with the depth (to 1 MiB): about forty boundaries per
        // thread's million levels, more with preemptions (each links a standard chunk).
        for (mech, growth, least) in [
            ("lookahead", "overflows", 40),
            // The MMU mechanisms' chains grow too: at least sixteen faults a thread.
            ("mmu", "guard faults taken", 60),
            ("mmu-reuse", "guard faults taken", 60),
            ("heap", "frames allocated", 100),
            ("heap-malloc", "frames allocated", 100),
        ] {
            let exe = build("tests/green/deep_threads.cm", dir.path(), mech, target);
            // Short time slices: lookahead threads are also preempted deep in their chains.
            let o = Command::new(&exe)
                .args(["4", "1000000"])
                .env("STACKRT_STATS", "1")
                .env("STACKRT_TIMESLICE", "200us")
                .output()
                .unwrap();
            let err = text(&o.stderr);
            assert_eq!(o.status.code(), Some(0), "{mech} {target}: {err}");
            let want: String = (1..=4)
                .map(|i| format!("thread {i}: sum 1000000 = {}\n", sum_formula(1_000_000)))
                .collect();
            assert_eq!(text(&o.stdout), want, "{mech} {target}");
            assert!(common::stat(&err, growth) > least, "{mech} {target}: {err}");
        }
    }
}

fn run_det(exe: &std::path::Path, sched: &str, trace: Option<&std::path::Path>) -> (String, i32) {
    let mut cmd = Command::new(exe);
    if exe.to_string_lossy().contains("threads_mutex") {
        cmd.args(["8", "200"]);
    }
    cmd.env("STACKRT_SCHED", sched);
    if let Some(t) = trace {
        cmd.env("STACKRT_SCHED_TRACE", t);
    }
    let o = run_within(cmd, Duration::from_secs(30), sched);
    (
        text(&o.stdout) + &text(&o.stderr),
        o.status.code().unwrap_or(-1),
    )
}

/// The same seed gives byte-identical output and trace; another seed another interleaving;
/// a recorded trace replays exactly. On the corpus's mutex program (8 threads updating shared
/// data under mutexes; it exits with 1 when the totals are right).
#[test]
fn same_seed_same_run_and_replay_reproduces_it() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(
        "tests/programs/threads_mutex.cm",
        dir.path(),
        "lookahead",
        "x86_64",
    );
    let t1 = dir.path().join("t1");
    let t2 = dir.path().join("t2");
    let (out1, rc1) = run_det(&exe, "random:11", Some(&t1));
    let (out2, rc2) = run_det(&exe, "random:11", Some(&t2));
    assert_eq!((rc1, rc2), (1, 1), "{out1}");
    assert_eq!(out1, out2);
    let trace1 = std::fs::read(&t1).unwrap();
    assert_eq!(trace1, std::fs::read(&t2).unwrap(), "traces differ");
    assert!(trace1.starts_with(b"stackrt-sched-trace 1 random:11\n"));
    let decisions = trace1.iter().filter(|&&b| b == b'\n').count();
    assert!(decisions > 20, "only {decisions} decisions");
    // Other seeds: other decisions.
    let others: Vec<Vec<u8>> = (12..16)
        .map(|seed| {
            let t = dir.path().join(format!("t{seed}"));
            let (out, rc) = run_det(&exe, &format!("random:{seed}"), Some(&t));
            assert_eq!((rc, &out), (1, &out1));
            std::fs::read(&t).unwrap()
        })
        .collect();
    assert!(others
        .iter()
        .any(|t| t[t.iter().position(|&b| b == b'\n').unwrap()..]
            != trace1[trace1.iter().position(|&b| b == b'\n').unwrap()..]));
    // Replay: the same decisions, the same output.
    let t3 = dir.path().join("t3");
    let (out3, rc3) = run_det(&exe, &format!("replay:{}", t1.display()), Some(&t3));
    assert_eq!(rc3, 1, "{out3}");
    assert_eq!(out3, out1);
    let trace3 = std::fs::read(&t3).unwrap();
    let body = |t: &[u8]| t[t.iter().position(|&b| b == b'\n').unwrap()..].to_vec();
    assert_eq!(body(&trace3), body(&trace1));
}

/// The lost update of tests/green/lost_update.cm: four threads add 1 to a counter with a
/// read-modify-write split by a yield. A search over seeds finds a schedule that loses an
/// update (random and PCT), and the recorded trace reproduces it exactly, run after run.
#[test]
fn a_seed_search_finds_the_lost_update_and_the_trace_replays_it() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(
        "tests/green/lost_update.cm",
        dir.path(),
        "lookahead",
        "x86_64",
    );
    for policy in ["random:{}", "pct:{}:2:50"] {
        let found = (1..=20u64).find_map(|seed| {
            let sched = policy.replace("{}", &seed.to_string());
            let trace = dir.path().join(format!("lost-{seed}"));
            let (out, rc) = run_det(&exe, &sched, Some(&trace));
            assert_eq!(rc, 0, "{sched}: {out}");
            assert!(out.starts_with("counter "), "{sched}: {out}");
            (out != "counter 4\n").then_some((sched, out, trace))
        });
        let (sched, out, trace) =
            found.unwrap_or_else(|| panic!("{policy}: no seed of 1..=20 lost an update"));
        for _ in 0..3 {
            let (again, _) = run_det(&exe, &format!("replay:{}", trace.display()), None);
            assert_eq!(again, out, "replay of {sched}");
        }
    }
}

/// Preemption at checkpoints (tests/green/preempt.cm): spinners that never call the thread
/// library keep computing until `main`, which needs the worker back, has seen each of them
/// run. On one worker (and on two) the monitor's requests make them yield at a checkpoint;
/// with preemption off the same run never ends. Both targets.
#[test]
fn spinning_threads_are_preempted_at_checkpoints() {
    let dir = tempfile::tempdir().unwrap();
    for target in TARGETS {
        let exe = build("tests/green/preempt.cm", dir.path(), "lookahead", target);
        for workers in ["1", "2"] {
            let mut cmd = Command::new(&exe);
            cmd.arg("8")
                .env("STACKRT_WORKERS", workers)
                .env("STACKRT_STATS", "1");
            let o = run_within(cmd, Duration::from_secs(60), "preempt");
            let err = text(&o.stderr);
            assert_eq!(o.status.code(), Some(0), "{target} {workers}: {err}");
            assert_eq!(
                text(&o.stdout),
                "8 spinners stopped, 0 sums wrong\n",
                "{target} {workers}"
            );
            let preemptions = green_stat(&err, "preemptions");
            assert!(
                preemptions >= 1,
                "{target} {workers}: {}",
                green_stats_line(&err)
            );
        }
        // Without preemption the spinners keep the only worker: still running after 3 s.
        let mut child = Command::new(&exe)
            .arg("8")
            .env("STACKRT_WORKERS", "1")
            .env("STACKRT_TIMESLICE", "off")
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_secs(3));
        let ended = child.try_wait().unwrap();
        let _ = child.kill();
        let _ = child.wait();
        assert!(
            ended.is_none(),
            "{target}: ended without preemption: {ended:?}"
        );
    }
}

/// Preemption makes threads that would run one after the other hold their depth at once; above
/// the chunk runtime's soft limit it stops, so the running threads finish and give their chunks
/// back. Sixteen Summation threads 1,000,000 levels deep (2,000,000 on i686, whose
/// word-aligned frames took 118 to 308 MiB at 1,000,000 levels, 543 or more at 2,000,000),
/// preempted every 200 us: without a soft limit (`STACKRT_SOFT_LIMIT=2G`) their chunks peak
/// above 128 MiB together; with `STACKRT_MEMORY_LIMIT=128M` (soft limit a third of it) the
/// program still ends, below the limit (two threads 2,000,000 deep on x86-64's two workers
/// would not fit in it). Both targets.
#[test]
fn preemption_stops_under_memory_pressure() {
    let dir = tempfile::tempdir().unwrap();
    for target in TARGETS {
        let exe = build(
            "tests/programs/thesis/summation_multi.cm",
            dir.path(),
            "lookahead",
            target,
        );
        let run = |limit: Option<&str>| {
            let mut cmd = Command::new(&exe);
            let depth = if target == "i686" {
                "2000000"
            } else {
                "1000000"
            };
            cmd.args(["16", depth, "0"])
                .env("STACKRT_STATS", "1")
                .env("STACKRT_TIMESLICE", "200us");
            match limit {
                Some(l) => cmd.env("STACKRT_MEMORY_LIMIT", l),
                // No memory pressure at all (the default soft limit is 128 MiB per CPU).
                None => cmd.env("STACKRT_SOFT_LIMIT", "2G"),
            };
            let o = run_within(cmd, Duration::from_secs(60), "summation_multi");
            let err = text(&o.stderr);
            assert_eq!(o.status.code(), Some(0), "{target} {limit:?}: {err}");
            assert_eq!(text(&o.stdout), "Data: 16\n", "{target} {limit:?}");
            common::stat(&err, "peak resident chunks")
        };
        let free = run(None);
        assert!(
            free > 128 << 20,
            "{target}: all threads deep at once only {free} bytes"
        );
        let limited = run(Some("128M"));
        assert!(
            limited < 128 << 20,
            "{target}: {limited} bytes under a 128M limit"
        );
    }
}

/// In the deterministic mode the checkpoints that enter the runtime are scheduling decisions:
/// the spinners of tests/green/preempt.cm give the worker back there, the same seed gives the
/// same trace, and the trace replays.
#[test]
fn deterministic_mode_decides_at_checkpoints() {
    let dir = tempfile::tempdir().unwrap();
    for target in TARGETS {
        let exe = build("tests/green/preempt.cm", dir.path(), "lookahead", target);
        let t1 = dir.path().join(format!("p1-{target}"));
        let t2 = dir.path().join(format!("p2-{target}"));
        let (out1, rc1) = run_det(&exe, "random:5", Some(&t1));
        let (out2, rc2) = run_det(&exe, "random:5", Some(&t2));
        assert_eq!((rc1, rc2), (0, 0), "{target}: {out1}");
        assert_eq!(out1, "4 spinners stopped, 0 sums wrong\n", "{target}");
        assert_eq!(out2, out1, "{target}");
        let trace1 = std::fs::read(&t1).unwrap();
        assert_eq!(
            trace1,
            std::fs::read(&t2).unwrap(),
            "{target}: traces differ"
        );
        let (out3, rc3) = run_det(&exe, &format!("replay:{}", t1.display()), None);
        assert_eq!((rc3, out3), (0, out1), "{target}: replay");
    }
}

/// Misuse: joining oneself is EDEADLK; a deadlock (two threads waiting for each other) is one
/// line and status 70, never a hang, with the deterministic scheduler and with the default
/// workers; a replay that no longer fits the program stops at the
/// first divergent decision; `main` ending with sthread_exit lets the other threads finish.
#[test]
fn misuse_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    for target in TARGETS {
        let exe = build("tests/green/errors.cm", dir.path(), "lookahead", target);
        let o = Command::new(&exe).arg("self-join").output().unwrap();
        assert_eq!(text(&o.stdout), "self-join returned 35\n", "{target}");
        for sched in [Some("random:1"), None] {
            let mut cmd = Command::new(&exe);
            cmd.arg("deadlock");
            if let Some(s) = sched {
                cmd.env("STACKRT_SCHED", s);
            }
            let o = run_within(cmd, Duration::from_secs(10), "deadlock");
            assert_eq!(o.status.code(), Some(70), "{target} {sched:?}");
            common::assert_one_line(&o, "deadlock: every green thread is blocked", "deadlock");
        }
        let o = Command::new(&exe)
            .arg("exit-main")
            .env("STACKRT_WORKERS", "1")
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{target}");
        assert_eq!(
            text(&o.stdout),
            "main exits\nlate thread done\n",
            "{target}"
        );
    }
    let exe = build("tests/green/errors.cm", dir.path(), "lookahead", "x86_64");
    let bad = dir.path().join("bad-trace");
    std::fs::write(&bad, "stackrt-sched-trace 1 random:1\n0\n7\n").unwrap();
    let mut cmd = Command::new(&exe);
    cmd.arg("self-join")
        .env("STACKRT_SCHED", format!("replay:{}", bad.display()));
    let o = run_within(cmd, Duration::from_secs(10), "replay");
    assert_eq!(o.status.code(), Some(70));
    common::assert_one_line(
        &o,
        "replay diverged at decision 2: thread 7 of the trace is not runnable",
        "replay",
    );
}

/// A green thread that overflows its fixed stack is reported as such, naming the green thread,
/// and the process dies with SIGSEGV, as an OS thread's overflow is.
#[test]
fn fixed_stack_overflow_names_the_green_thread() {
    use std::os::unix::process::ExitStatusExt as _;
    let dir = tempfile::tempdir().unwrap();
    for target in TARGETS {
        for mech in ["traditional", "callee-cleanup"] {
            let exe = build("tests/green/errors.cm", dir.path(), mech, target);
            let mut cmd = Command::new(&exe);
            cmd.arg("overflow");
            let o = run_within(cmd, common::CRASH_DEADLINE * 5, "overflow");
            assert_eq!(o.status.signal(), Some(libc_sigsegv()), "{mech} {target}");
            common::assert_one_line(
                &o,
                "green thread 1 (tid",
                &format!("{mech} {target} overflow"),
            );
            assert!(
                text(&o.stderr).contains("overflowed its fixed stack of 65536 bytes"),
                "{mech} {target}: {}",
                text(&o.stderr)
            );
        }
    }
}

/// `SIGSEGV`'s number on Linux.
fn libc_sigsegv() -> i32 {
    11
}

/// Bad settings get one line and status 1 before the program runs.
#[test]
fn bad_settings_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build("tests/green/errors.cm", dir.path(), "traditional", "x86_64");
    for (var, value, want) in [
        (
            "STACKRT_WORKERS",
            "0",
            "STACKRT_WORKERS=\"0\" is not a number of workers",
        ),
        (
            "STACKRT_SCHED",
            "fifo",
            "STACKRT_SCHED=\"fifo\": expected random:SEED",
        ),
        (
            "STACKRT_SCHED",
            "pct:1:0",
            "depth 0 is not between 1 and 1000",
        ),
        (
            "STACKRT_SCHED",
            "replay:/nonexistent/t",
            "cannot read /nonexistent/t",
        ),
        (
            "STACKRT_TIMESLICE",
            "fast",
            "STACKRT_TIMESLICE=\"fast\": not a time slice",
        ),
        (
            "STACKRT_SCHED_TRACE",
            "/tmp/t",
            "STACKRT_SCHED_TRACE needs a deterministic STACKRT_SCHED",
        ),
        (
            "STACKRT_SPARE_WORKERS",
            "many",
            "STACKRT_SPARE_WORKERS=\"many\" is not a number of spare workers",
        ),
    ] {
        let o = Command::new(&exe)
            .arg("self-join")
            .env(var, value)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{var}={value}");
        assert!(text(&o.stdout).is_empty());
        common::assert_one_line(&o, want, var);
    }
}

/// A green thread blocked in `read` on an empty pipe does not keep the other threads from
/// running (tests/green/pipe.cm): the reader runs first, and the thread that writes the byte
/// it waits for runs only if the blocked worker hands its threads on. On one worker, before
/// the hand-off, the program never ended. Every mechanism, both targets, one and two workers;
/// the expected line is gcc's with the oracle's thread library (OS threads).
#[test]
fn a_blocked_read_does_not_stall_the_other_green_threads() {
    let dir = tempfile::tempdir().unwrap();
    for target in TARGETS {
        for mech in common::MECHS {
            let exe = build("tests/green/pipe.cm", dir.path(), mech, target);
            for workers in ["1", "2"] {
                let mut cmd = Command::new(&exe);
                cmd.env("STACKRT_WORKERS", workers);
                let o = run_within(cmd, Duration::from_secs(60), "pipe");
                let what = format!("{target} {mech} {workers} workers");
                assert_eq!(o.status.code(), Some(0), "{what}: {}", text(&o.stderr));
                assert_eq!(
                    text(&o.stdout),
                    "read 1 byte 'x' after 4 threads finished\n",
                    "{what}"
                );
            }
        }
    }
}

/// Eight green threads that each sleep 300 ms in `usleep` all sleep at once
/// (tests/green/sleepers.cm: the first to wake saw all eight go to sleep), where before the
/// hand-off only as many as there were workers did: a blocked worker's threads go on on a
/// spare OS thread, which `STACKRT_STATS` counts. With `STACKRT_SPARE_WORKERS=0` the sleeps are
/// serialised again (one worker: the first to wake saw only itself), and the deterministic
/// mode, whose single worker runs everything, hands nothing off. The expected lines are gcc's
/// with the oracle's thread library, and for the serialised runs written by hand.
#[test]
fn blocking_calls_hand_the_worker_on() {
    let dir = tempfile::tempdir().unwrap();
    for target in TARGETS {
        for mech in common::MECHS {
            let exe = build("tests/green/sleepers.cm", dir.path(), mech, target);
            for workers in ["1", "2"] {
                let mut cmd = Command::new(&exe);
                cmd.args(["8", "300"])
                    .env("STACKRT_WORKERS", workers)
                    .env("STACKRT_STATS", "1");
                let o = run_within(cmd, Duration::from_secs(60), "sleepers");
                let what = format!("{target} {mech} {workers} workers");
                let err = text(&o.stderr);
                assert_eq!(o.status.code(), Some(0), "{what}: {err}");
                assert_eq!(
                    text(&o.stdout),
                    "8 threads slept, sum 28, 8 asleep when the first woke\n",
                    "{what}"
                );
                assert!(green_stat(&err, "hand-offs") >= 1, "{what}: {err}");
            }
        }
        let exe = build("tests/green/sleepers.cm", dir.path(), "lookahead", target);
        let mut cmd = Command::new(&exe);
        cmd.args(["4", "100"])
            .env("STACKRT_WORKERS", "1")
            .env("STACKRT_SPARE_WORKERS", "0");
        let o = run_within(cmd, Duration::from_secs(60), "sleepers without spares");
        assert_eq!(
            text(&o.stdout),
            "4 threads slept, sum 6, 1 asleep when the first woke\n",
            "{target}"
        );
        let mut cmd = Command::new(&exe);
        cmd.args(["4", "100"])
            .env("STACKRT_SCHED", "random:1")
            .env("STACKRT_STATS", "1");
        let o = run_within(cmd, Duration::from_secs(60), "sleepers, deterministic");
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{target}: {err}");
        assert!(
            text(&o.stdout).starts_with("4 threads slept, sum 6, "),
            "{target}"
        );
        assert_eq!(green_stat(&err, "hand-offs"), 0, "{target}: {err}");
    }
}

/// Threads queued on a worker that was handed off run while every active worker stays busy
/// (tests/green/stranded.cm: main, left on its handed-off worker after a `usleep`, queues
/// eight threads there and spins until they have run, while four threads yield in a loop on
/// the active workers). Before, an active worker took from other queues only once its own was
/// empty, and the program never ended. Every mechanism, both targets, one and two workers; the
/// expected line is gcc's with the oracle's thread library (-O0: at -O2 gcc keeps the spun-on
/// flags in registers).
#[test]
fn threads_queued_on_a_handed_off_worker_run_while_the_others_are_busy() {
    let dir = tempfile::tempdir().unwrap();
    for target in TARGETS {
        for mech in common::MECHS {
            let exe = build("tests/green/stranded.cm", dir.path(), mech, target);
            for workers in ["1", "2"] {
                let mut cmd = Command::new(&exe);
                cmd.env("STACKRT_WORKERS", workers)
                    .env("STACKRT_STATS", "1");
                let o = run_within(cmd, Duration::from_secs(60), "stranded");
                let what = format!("{target} {mech} {workers} workers");
                let err = text(&o.stderr);
                assert_eq!(o.status.code(), Some(0), "{what}: {err}");
                assert_eq!(
                    text(&o.stdout),
                    "8 late threads ran while 4 yielded\n",
                    "{what}"
                );
                // The case arose: main's worker was handed off while it slept.
                assert!(green_stat(&err, "hand-offs") >= 1, "{what}: {err}");
            }
        }
    }
}

/// Two green threads spin in `while (flag == 0) n = n + 1;`, a loop that makes no call, and a
/// third sets `flag` once both have started, spinning until then (tests/green/spin.cm):
/// three spinning threads on one or two workers, so the program ends only if one is preempted
/// inside its loop, whatever the order the scheduler picks (before, the setter could run first
/// on the second worker and no preemption was needed). Built as it is (the monitor's signal
/// preempts a thread anywhere in compiled code) and with `--preempt-loops` (polls at loop
/// heads). Every mechanism, both targets, one and two workers, and seeded deterministic runs:
/// of the polled build, whose polls are decisions, and of the plain build, recorded and
/// replayed, whose spinners are preempted by time without a decision. The expected line is
/// gcc's with the oracle's thread library.
#[test]
fn loops_without_calls_are_preempted_under_every_mechanism() {
    let dir = tempfile::tempdir().unwrap();
    let want = "flag 1, both spinners saw it\n";
    for target in TARGETS {
        for mech in common::MECHS {
            let plain = build("tests/green/spin.cm", dir.path(), mech, target);
            for workers in ["1", "2"] {
                let mut cmd = Command::new(&plain);
                cmd.env("STACKRT_WORKERS", workers)
                    .env("STACKRT_STATS", "1");
                let o = run_within(cmd, Duration::from_secs(60), "spin");
                let what = format!("{target} {mech} {workers} workers, no polls");
                let err = text(&o.stderr);
                assert_eq!(o.status.code(), Some(0), "{what}: {err}");
                assert_eq!(text(&o.stdout), want, "{what}");
                assert!(green_stat(&err, "preemptions") >= 1, "{what}: {err}");
            }
            // Seeded: a spinner that reaches no decision point for a long slice is preempted
            // by time, without a decision of the seed, so a recorded trace replays.
            for seed in ["1", "2"] {
                let trace = dir
                    .path()
                    .join(format!("spin-{target}-{mech}-{seed}.trace"));
                let mut cmd = Command::new(&plain);
                cmd.env("STACKRT_SCHED", format!("random:{seed}"))
                    .env("STACKRT_SCHED_TRACE", &trace);
                let o = run_within(cmd, Duration::from_secs(60), "spin, seeded, no polls");
                let what = format!("{target} {mech} seed {seed}, no polls");
                assert_eq!(o.status.code(), Some(0), "{what}: {}", text(&o.stderr));
                assert_eq!(text(&o.stdout), want, "{what}");
                let mut cmd = Command::new(&plain);
                cmd.env("STACKRT_SCHED", format!("replay:{}", trace.display()));
                let o = run_within(cmd, Duration::from_secs(60), "spin, replayed, no polls");
                assert_eq!(
                    o.status.code(),
                    Some(0),
                    "{what}, replay: {}",
                    text(&o.stderr)
                );
                assert_eq!(text(&o.stdout), want, "{what}, replay");
            }
            let exe = build_polled("tests/green/spin.cm", dir.path(), mech, target);
            for workers in ["1", "2"] {
                let mut cmd = Command::new(&exe);
                cmd.env("STACKRT_WORKERS", workers)
                    .env("STACKRT_STATS", "1");
                let o = run_within(cmd, Duration::from_secs(60), "spin");
                let what = format!("{target} {mech} {workers} workers");
                let err = text(&o.stderr);
                assert_eq!(o.status.code(), Some(0), "{what}: {err}");
                assert_eq!(text(&o.stdout), want, "{what}");
                assert!(green_stat(&err, "preemptions") >= 1, "{what}: {err}");
            }
            for seed in ["1", "2", "3"] {
                let mut cmd = Command::new(&exe);
                cmd.env("STACKRT_SCHED", format!("random:{seed}"));
                let o = run_within(cmd, Duration::from_secs(60), "spin, deterministic");
                let what = format!("{target} {mech} seed {seed}");
                assert_eq!(o.status.code(), Some(0), "{what}: {}", text(&o.stderr));
                assert_eq!(text(&o.stdout), want, "{what}");
            }
        }
    }
}

/// tests/green/poll_regs.cm: four threads whose loops keep four ints and two doubles in
/// registers are preempted again and again (100 us slices) on one and two workers, so every
/// sum is gcc's (`gcc` with tests/oracle/sthread.c, x86-64 and -m32 print the same) only if
/// a preemption keeps every register. Built as it is, they are preempted anywhere in the loop
/// by the monitor's signal: the stub saves every register, the flags and the x87/SSE state,
/// and the thread resumes from them on whichever worker. With `--preempt-loops`, at the loop
/// head's poll, which clobbers no register (the compiled code saves them in the runtime's
/// thread-local area, which a preempted thread takes along); without the runtime carrying
/// the area over the switch every line is wrong.
#[test]
fn loops_keep_their_registers_across_preemption() {
    let dir = tempfile::tempdir().unwrap();
    let want = "0: 1328293569 5000007.389055\n1: 1314738631 5000007.889055\n\
                2: 1217559757 5000008.389055\n3: 1270919127 5000008.889055\n";
    for target in TARGETS {
        for mech in common::MECHS {
            for (how, exe) in [
                (
                    "signal",
                    build("tests/green/poll_regs.cm", dir.path(), mech, target),
                ),
                (
                    "polls",
                    build_polled("tests/green/poll_regs.cm", dir.path(), mech, target),
                ),
            ] {
                for workers in ["1", "2"] {
                    let mut cmd = Command::new(&exe);
                    cmd.args(["4", "20000000"])
                        .env("STACKRT_WORKERS", workers)
                        .env("STACKRT_TIMESLICE", "100us")
                        .env("STACKRT_STATS", "1");
                    let o = run_within(cmd, Duration::from_secs(60), "poll_regs");
                    let what = format!("{target} {mech} {workers} workers, {how}");
                    let err = text(&o.stderr);
                    assert_eq!(o.status.code(), Some(0), "{what}: {err}");
                    assert_eq!(text(&o.stdout), want, "{what}");
                    assert!(green_stat(&err, "preemptions") >= 1, "{what}: {err}");
                }
            }
        }
    }
}

/// tests/green/ccompute.cm on one worker: one thread computes in C (memset of 256 MiB, no
/// blocking system call), another queued behind it needs only a moment. The compiled code
/// counts its C calls, so the monitor hands the worker on to a spare OS thread and the quick
/// thread ends while the other is still in memset (as with OS threads and gcc); without spares
/// it waits for memset to return. Every mechanism, both targets.
#[test]
fn a_long_c_computation_hands_the_worker_on() {
    let dir = tempfile::tempdir().unwrap();
    let line = |ran: u8| format!("the quick thread ran while the other was in memset: {ran}\n");
    for target in TARGETS {
        for mech in common::MECHS {
            let exe = build("tests/green/ccompute.cm", dir.path(), mech, target);
            let what = format!("{target} {mech}");
            let mut cmd = Command::new(&exe);
            cmd.env("STACKRT_WORKERS", "1").env("STACKRT_STATS", "1");
            let o = run_within(cmd, Duration::from_secs(60), "ccompute");
            let err = text(&o.stderr);
            assert_eq!(o.status.code(), Some(0), "{what}: {err}");
            assert_eq!(text(&o.stdout), line(1), "{what}: {err}");
            assert!(green_stat(&err, "hand-offs") >= 1, "{what}: {err}");
            let mut cmd = Command::new(&exe);
            cmd.env("STACKRT_WORKERS", "1")
                .env("STACKRT_SPARE_WORKERS", "0");
            let o = run_within(cmd, Duration::from_secs(60), "ccompute, no spares");
            assert_eq!(text(&o.stdout), line(0), "{what} without spares");
        }
    }
}

/// A green thread on a fixed stack sized to its C-- frames (`stacksizeof`, the thesis's "Real
/// World" program asks for 4,096 bytes) is preempted at a loop head at the bottom of its
/// recursion: the runtime's frames of the preemption need room too, and a green thread gets at
/// least the system's minimum thread stack, as an OS thread does. Before, a 200 us time slice
/// made every run end in a fixed-stack overflow. The expected output is the corpus's (gcc).
#[test]
fn preemption_fits_at_the_bottom_of_a_small_fixed_stack() {
    let dir = tempfile::tempdir().unwrap();
    let want =
        std::fs::read_to_string(root().join("tests/programs/thesis/realworld_multi.t64.expected"))
            .unwrap();
    for target in TARGETS {
        for mech in ["traditional", "callee-cleanup"] {
            let exe = build_polled(
                "tests/programs/thesis/realworld_multi.cm",
                dir.path(),
                mech,
                target,
            );
            let mut cmd = Command::new(&exe);
            cmd.args(["64", "10", "100", "1000", "100"])
                .env("STACKRT_TIMESLICE", "200us");
            let o = run_within(cmd, Duration::from_secs(60), "realworld");
            let got = format!(
                "{}exit: {}\n",
                text(&o.stdout),
                o.status.code().unwrap_or(-1)
            );
            assert_eq!(got, want, "{target} {mech}: {}", text(&o.stderr));
        }
    }
}

/// Preemption anywhere, under load: Real World (tests/programs/thesis/realworld_multi.cm, 8
/// threads of recursions, loops and calls; `8 200 1000 2000 200`, 1 MiB fixed stacks) on two
/// workers with 100 us slices is preempted some hundreds of times a run, in the middle of
/// everything the compiler did not mark (a preemption inside a `heap` call sequence or a C call resumed on the other
/// worker would use that worker's free lists or stack). Every mechanism, both targets; the
/// output is gcc's (-O2 with tests/oracle/sthread.c, x86-64 and -m32 alike).
#[test]
fn threads_preempted_anywhere_compute_what_gcc_computes() {
    let dir = tempfile::tempdir().unwrap();
    let mut want = String::from(
        "threads: 8\noverall_iterations: 200\nrecursive_count: 1000\n\
         work_per_non_recursive_call: 2000\nwork_per_recursive_call: 200\n",
    );
    for i in 1..=8 {
        want.push_str(&format!("main: created {i}\n"));
    }
    for i in 1..=8 {
        want.push_str(&format!("Joined thread {i} with ret value 42000000\n"));
    }
    want.push_str("Data: 8\n");
    for target in TARGETS {
        for mech in common::MECHS {
            let exe = build(
                "tests/programs/thesis/realworld_multi.cm",
                dir.path(),
                mech,
                target,
            );
            let mut cmd = Command::new(&exe);
            cmd.args(["8", "200", "1000", "2000", "200", "1048576"])
                .env("STACKRT_WORKERS", "2")
                .env("STACKRT_TIMESLICE", "100us")
                .env("STACKRT_STATS", "1");
            let o = run_within(cmd, Duration::from_secs(60), "realworld_multi");
            let what = format!("{target} {mech}");
            let err = text(&o.stderr);
            assert_eq!(o.status.code(), Some(0), "{what}: {err}");
            assert_eq!(text(&o.stdout), want, "{what}");
            assert!(green_stat(&err, "preemptions") >= 1, "{what}: {err}");
        }
    }
}
