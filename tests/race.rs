//! End-to-end tests of `cmm compile --race`: deliberately racy programs (`tests/race/`) whose
//! reports name both accesses' lines, checked exactly (written here by hand from the sources),
//! under OS and green threads, every mechanism on both targets, and both back ends; a race-free
//! program with no report; `STACKRT_RACE=abort` and a bad `STACKRT_RACE`; schedules found by
//! seeds, recorded, and replayed strictly and relaxed (in parallel, on OS and green threads),
//! malformed or foreign traces, and `sthread_cas` as a synchronising access. The corpus runs
//! under `--race` in `tests/corpus.rs`, the detector's rules against a vector-clock model in
//! `crates/stackrt/tests/race_model.rs`.

mod common;

use common::{compile, root, run_within, text};

use std::process::{Command, Output};
use std::time::Duration;

/// Every mechanism on both targets under OS and green threads, and the native back end.
fn configs() -> Vec<(&'static str, &'static str, &'static str, &'static str)> {
    let mut out = Vec::new();
    for threads in ["os", "green"] {
        for target in ["x86_64", "i686"] {
            for mech in common::MECHS {
                out.push(("emit", mech, target, threads));
            }
        }
        out.push(("native", "traditional", "x86_64", threads));
    }
    out
}

fn build(src: &str, dir: &std::path::Path, c: (&str, &str, &str, &str)) -> std::path::PathBuf {
    let (backend, mech, target, threads) = c;
    let args = [
        "--race",
        "--backend",
        backend,
        "--mech",
        mech,
        "--target",
        target,
        "--threads",
        threads,
    ];
    let name = format!(
        "{}-{backend}-{mech}-{target}-{threads}",
        src.replace('/', "_")
    );
    compile(&root().join(src), dir, &name, &args)
}

fn run(exe: &std::path::Path, env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(exe);
    // Two workers: a green thread blocked reading a pipe keeps its worker.
    cmd.env("STACKRT_WORKERS", "2");
    cmd.env_remove("STACKRT_RACE");
    cmd.envs(env.iter().copied());
    run_within(cmd, Duration::from_secs(60), &exe.display().to_string())
}

/// The report lines of `stderr` with every address replaced by `0x…`.
fn reports(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .map(|l| {
            let mut out = String::new();
            let mut rest = l;
            while let Some(i) = rest.find("0x") {
                out.push_str(&rest[..i]);
                out.push_str("0x…");
                rest = rest[i + 2..].trim_start_matches(|c: char| c.is_ascii_hexdigit());
            }
            out.push_str(rest);
            out
        })
        .collect()
}

const RACY: [&str; 2] = [
    "stackrt: data race on seen (4 bytes at 0x…): read by thread 2 at racy.cm:25:47, previous write by thread 1 at racy.cm:18:5, not ordered",
    "stackrt: data race on counter (4 bytes at 0x…): write by thread 2 at racy.cm:25:37, previous read by thread 1 at racy.cm:18:12, not ordered",
];

#[test]
fn racy_globals_are_reported_once_each_with_both_lines_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    for c in configs() {
        let exe = build("tests/race/racy.cm", dir.path(), c);
        let o = run(&exe, &[]);
        assert_eq!(text(&o.stdout), "counter 1\n", "{c:?}");
        assert_eq!(o.status.code(), Some(0), "{c:?}");
        assert_eq!(reports(&text(&o.stderr)), RACY, "{c:?}");
    }
}

#[test]
fn racy_heap_memory_is_reported_by_address_and_neighbouring_bytes_do_not_race() {
    let want = ["stackrt: data race on 0x… (4 bytes): read by thread 2 at heap_race.cm:31:9, previous write by thread 1 at heap_race.cm:22:5, not ordered"];
    let dir = tempfile::tempdir().unwrap();
    for c in configs() {
        let exe = build("tests/race/heap_race.cm", dir.path(), c);
        let o = run(&exe, &[]);
        assert_eq!(text(&o.stdout), "7 9 ab\n", "{c:?}");
        assert_eq!(reports(&text(&o.stderr)), want, "{c:?}");
    }
}

#[test]
fn a_block_freed_and_allocated_again_is_new_memory_to_every_thread() {
    // The reader's first reads of the block are in its filter of recorded reads; its next,
    // in the same epoch, reads the block allocated at the same address and written by main
    // with no synchronisation between (`tests/race/reused_block.cm`).
    let want = ["stackrt: data race on 0x… (4 bytes): read by thread 1 at reused_block.cm:34:15, previous write by thread 0 at reused_block.cm:51:5, not ordered"];
    let dir = tempfile::tempdir().unwrap();
    for c in configs() {
        let exe = build("tests/race/reused_block.cm", dir.path(), c);
        let o = run(&exe, &[]);
        assert_eq!(text(&o.stdout), "1 2 same block\n", "{c:?}");
        assert_eq!(reports(&text(&o.stderr)), want, "{c:?}");
    }
}

#[test]
fn a_green_thread_does_not_inherit_the_filter_of_the_thread_run_before_it() {
    // Thread 1 writes `x`, reads it until its filter notes the reads, and yields; thread 2,
    // next on the same worker, reads `x` unordered with the write (`tests/race/switch_filter.cm`).
    // The emission stage's inline read check finds the running thread's filter through a
    // thread-local word of the worker, which every switch must set. (`x` and `c` share a
    // granule of the shadow: the race on `x` is found through the write of `x` kept there.)
    let want = [
        "stackrt: data race on x (4 bytes at 0x…): read by thread 2 at switch_filter.cm:38:15, previous write by thread 1 at switch_filter.cm:23:5, not ordered",
        "stackrt: data race on c (1 byte at 0x…): read by thread 2 at switch_filter.cm:38:19, previous write by thread 1 at switch_filter.cm:24:5, not ordered",
        "stackrt: data race on d (8 bytes at 0x…): read by thread 2 at switch_filter.cm:38:30, previous write by thread 1 at switch_filter.cm:25:5, not ordered",
    ];
    let dir = tempfile::tempdir().unwrap();
    for c in configs().into_iter().filter(|c| c.3 == "green") {
        let exe = build("tests/race/switch_filter.cm", dir.path(), c);
        let o = run(&exe, &[("STACKRT_WORKERS", "1")]);
        assert_eq!(text(&o.stdout), "2040 107 10\n", "{c:?}");
        assert_eq!(reports(&text(&o.stderr)), want, "{c:?}");
    }
}

#[test]
fn a_thread_that_ended_unjoined_still_races_with_the_one_left() {
    // The worker has ended (main sleeps after the pipe tells it the worker is done) but is not
    // joined: main runs alone, yet nothing orders the worker's accesses before its own
    // (`tests/race/unjoined.cm`). After the join, and in a thread created after it, none race.
    // (Only a thread whose every other thread was joined may skip the shadow: a detector that
    // skipped it whenever one thread was left running would miss both.)
    let want = [
        "stackrt: data race on shared (4 bytes at 0x…): read by thread 0 at unjoined.cm:37:13, previous write by thread 1 at unjoined.cm:18:5, not ordered",
        "stackrt: data race on other (4 bytes at 0x…): write by thread 0 at unjoined.cm:37:5, previous read by thread 1 at unjoined.cm:18:14, not ordered",
    ];
    let dir = tempfile::tempdir().unwrap();
    for c in configs() {
        let exe = build("tests/race/unjoined.cm", dir.path(), c);
        let o = run(&exe, &[]);
        assert_eq!(text(&o.stdout), "shared 4 other 3\n", "{c:?}");
        assert_eq!(reports(&text(&o.stderr)), want, "{c:?}");
    }
}

#[test]
fn race_free_sharing_is_not_reported() {
    let dir = tempfile::tempdir().unwrap();
    for c in configs() {
        let exe = build("tests/race/race_free.cm", dir.path(), c);
        let o = run(&exe, &[]);
        assert_eq!(text(&o.stdout), "counter 4000 abcd 10 20 sum 40\n", "{c:?}");
        assert_eq!(text(&o.stderr), "", "{c:?}");
        assert_eq!(o.status.code(), Some(0), "{c:?}");
    }
}

#[test]
fn abort_mode_stops_at_the_first_race_with_status_66() {
    let dir = tempfile::tempdir().unwrap();
    for c in [
        ("emit", "lookahead", "x86_64", "os"),
        ("emit", "heap", "i686", "green"),
    ] {
        let exe = build("tests/race/racy.cm", dir.path(), c);
        let o = run(&exe, &[("STACKRT_RACE", "abort")]);
        assert_eq!(o.status.code(), Some(66), "{c:?}");
        assert_eq!(reports(&text(&o.stderr)), RACY[..1], "{c:?}");
        assert_eq!(text(&o.stdout), "", "{c:?}");
    }
}

#[test]
fn a_bad_race_setting_is_one_line_and_status_70() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(
        "tests/race/racy.cm",
        dir.path(),
        ("emit", "traditional", "x86_64", "os"),
    );
    let o = run(&exe, &[("STACKRT_RACE", "halt")]);
    assert_eq!(o.status.code(), Some(70));
    assert_eq!(
        text(&o.stderr),
        "stackrt: STACKRT_RACE=\"halt\" is neither \"report\" nor \"abort\"\n"
    );
}

#[test]
fn without_the_flag_nothing_is_reported_or_instrumented() {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(&root().join("tests/race/racy.cm"), dir.path(), "plain", &[]);
    let o = run(&exe, &[]);
    assert_eq!(text(&o.stdout), "counter 1\n");
    assert_eq!(text(&o.stderr), "");
    let asm = common::cmm()
        .args(["compile", "--emit", "asm"])
        .arg(root().join("tests/race/racy.cm"))
        .output()
        .unwrap();
    assert!(asm.status.success());
    assert!(!text(&asm.stdout).contains("__stackrt_race"));
}

/// `sthread_cas` is a synchronising access: a counter behind a spin lock of compare-and-swaps
/// gets no report and its full total everywhere (and under seeds of the deterministic
/// scheduler, where each swap is a decision), while the same increments without the lock are
/// reported, both accesses on the increment's line.
#[test]
fn a_compare_and_swap_spin_lock_orders_what_it_protects() {
    let dir = tempfile::tempdir().unwrap();
    let with = |exe: &std::path::Path, arg: Option<&str>, env: &[(&str, &str)]| {
        let mut cmd = Command::new(exe);
        cmd.args(arg)
            .env("STACKRT_WORKERS", "2")
            .env_remove("STACKRT_RACE")
            .env_remove("STACKRT_SCHED")
            .envs(env.iter().copied());
        run_within(cmd, Duration::from_secs(60), &exe.display().to_string())
    };
    for c in configs() {
        let exe = build("tests/race/cas_lock.cm", dir.path(), c);
        let o = with(&exe, None, &[]);
        assert_eq!(text(&o.stdout), "counter 4000 clashes 0\n", "{c:?}");
        assert_eq!(text(&o.stderr), "", "{c:?}");
        assert_eq!(o.status.code(), Some(0), "{c:?}");
        let o = with(&exe, Some("plain"), &[]);
        assert_eq!(text(&o.stdout), "done\n", "{c:?}");
        let lines = reports(&text(&o.stderr));
        assert!(
            !lines.is_empty(),
            "{c:?}: the unprotected counter was not reported"
        );
        for l in &lines {
            assert!(
                l.starts_with("stackrt: data race on counter (4 bytes at 0x…): ")
                    && l.matches("cas_lock.cm:24:").count() == 2
                    && l.ends_with(", not ordered"),
                "{c:?}: {l}"
            );
        }
    }
    let exe = build(
        "tests/race/cas_lock.cm",
        dir.path(),
        ("emit", "lookahead", "x86_64", "green"),
    );
    for s in 1..=10 {
        for sched in [format!("random:{s}"), format!("pct:{s}:3")] {
            let o = with(&exe, None, &[("STACKRT_SCHED", &sched)]);
            assert_eq!(text(&o.stdout), "counter 4000 clashes 0\n", "{sched}");
            assert_eq!(text(&o.stderr), "", "{sched}");
        }
    }
}

/// Runs `exe` under `STACKRT_SCHED=sched` (one worker), returning stdout.
fn run_sched(exe: &std::path::Path, sched: &str, trace: Option<&std::path::Path>) -> String {
    let mut cmd = Command::new(exe);
    cmd.env("STACKRT_SCHED", sched).env_remove("STACKRT_RACE");
    if let Some(t) = trace {
        cmd.env("STACKRT_SCHED_TRACE", t);
    }
    let o = run_within(cmd, Duration::from_secs(60), sched);
    assert_eq!(o.status.code(), Some(0), "{sched}: {}", text(&o.stderr));
    text(&o.stdout)
}

/// The seeds of 1..=100 whose run of `exe` under `sched(seed)` loses an update.
fn losing_seeds(exe: &std::path::Path, sched: impl Fn(u32) -> String) -> Vec<u32> {
    (1..=100)
        .filter(|&s| run_sched(exe, &sched(s), None) != "counter 15\n")
        .collect()
}

#[test]
fn memory_level_decisions_find_a_lost_update_without_any_yield() {
    let dir = tempfile::tempdir().unwrap();
    let src = root().join("tests/race/lost_update.cm");
    for (mech, target) in [
        ("lookahead", "x86_64"),
        ("traditional", "i686"),
        ("mtss", "i686"),
    ] {
        let args = ["--mech", mech, "--target", target, "--threads", "green"];
        let plain = compile(&src, dir.path(), &format!("plain-{mech}"), &args);
        let mut race_args = args.to_vec();
        race_args.push("--race");
        let race = compile(&src, dir.path(), &format!("race-{mech}"), &race_args);
        // Without `--race` no decision lies between a read and its write: no seed loses one.
        assert_eq!(
            losing_seeds(&plain, |s| format!("random:{s}")),
            Vec::<u32>::new(),
            "{mech} {target}"
        );
        let random = losing_seeds(&race, |s| format!("random:{s}"));
        assert!(!random.is_empty(), "{mech} {target}: random found nothing");
        // PCT with k learned from one run, as shuttle does: the decisions a trace records.
        let trace = dir.path().join(format!("k-{mech}.trace"));
        run_sched(&race, "random:1", Some(&trace));
        let k = decisions(&std::fs::read_to_string(&trace).unwrap());
        let pct = losing_seeds(&race, |s| format!("pct:{s}:2:{k}"));
        assert!(
            !pct.is_empty(),
            "{mech} {target}: pct (k = {k}) found nothing"
        );
        // A losing seed's trace replays to the same lost update.
        let seed = pct[0];
        let t = dir.path().join(format!("lost-{mech}.trace"));
        let lost = run_sched(&race, &format!("pct:{seed}:2:{k}"), Some(&t));
        assert_ne!(lost, "counter 15\n");
        for _ in 0..3 {
            assert_eq!(
                run_sched(&race, &format!("replay:{}", t.display()), None),
                lost
            );
        }
    }
}

/// The decision lines of a trace (a number alone; PCT's `k`).
fn decisions(trace: &str) -> usize {
    trace
        .lines()
        .skip(1)
        .filter(|l| l.parse::<u32>().is_ok())
        .count()
}

/// Runs `exe` with `env` (and no `STACKRT_RACE`, `STACKRT_SCHED` or trace but what `env` says).
fn run_env(exe: &std::path::Path, env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(exe);
    cmd.env_remove("STACKRT_RACE")
        .env_remove("STACKRT_SCHED")
        .env_remove("STACKRT_SCHED_TRACE")
        .env_remove("STACKRT_WORKERS");
    cmd.envs(env.iter().copied());
    run_within(cmd, Duration::from_secs(60), &exe.display().to_string())
}

/// `relaxed:FILE` on two workers (or OS threads), `times` runs: each must print `want` with
/// status 0 and no report (detection is off under relaxed replay).
fn relaxed_runs(exe: &std::path::Path, trace: &std::path::Path, want: &str, times: usize) {
    relaxed_runs_on(exe, trace, want, times, "2");
}

/// [`relaxed_runs`] on `workers` workers.
fn relaxed_runs_on(
    exe: &std::path::Path,
    trace: &std::path::Path,
    want: &str,
    times: usize,
    workers: &str,
) {
    let sched = format!("relaxed:{}", trace.display());
    for i in 0..times {
        let o = run_env(
            exe,
            &[("STACKRT_SCHED", &sched), ("STACKRT_WORKERS", workers)],
        );
        assert_eq!(
            (
                text(&o.stdout).as_str(),
                text(&o.stderr).as_str(),
                o.status.code()
            ),
            (want, "", Some(0)),
            "{} run {i} of {times} on {workers} workers",
            exe.display()
        );
    }
}

/// A lost update found by a PCT seed and recorded: strict replay on one worker and relaxed
/// replay on two workers (green threads, 100 runs of 100), on one, and on OS threads print the recorded
/// count, which is below the 15 of an update-losing-free run (hand-checked: 3 threads x 5).
#[test]
fn a_lost_update_found_by_a_seed_reproduces_under_strict_and_relaxed_replay() {
    let dir = tempfile::tempdir().unwrap();
    let src = root().join("tests/race/lost_update.cm");
    for (mech, target) in [
        ("lookahead", "x86_64"),
        ("traditional", "i686"),
        ("mtss", "x86_64"),
    ] {
        let base = ["--race", "--mech", mech, "--target", target, "--threads"];
        let mut args = base.to_vec();
        args.push("green");
        let green = compile(&src, dir.path(), &format!("lu-green-{mech}"), &args);
        args.pop();
        args.push("os");
        let os = compile(&src, dir.path(), &format!("lu-os-{mech}"), &args);
        let ktrace = dir.path().join(format!("k-{mech}.trace"));
        run_sched(&green, "random:1", Some(&ktrace));
        let k = decisions(&std::fs::read_to_string(&ktrace).unwrap());
        let seed = (1..=100)
            .find(|s| run_sched(&green, &format!("pct:{s}:2:{k}"), None) != "counter 15\n")
            .unwrap_or_else(|| panic!("{mech} {target}: no pct seed of 100 lost an update"));
        let t = dir.path().join(format!("lost-{mech}.trace"));
        let lost = run_sched(&green, &format!("pct:{seed}:2:{k}"), Some(&t));
        let count: u32 = lost
            .trim()
            .strip_prefix("counter ")
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{lost:?}"));
        assert!(count < 15, "{mech} {target}: {lost:?}");
        let recorded = std::fs::read_to_string(&t).unwrap();
        assert!(
            recorded.starts_with(&format!("stackrt-sched-trace 3 pct:{seed}:2:{k}\nprogram ")),
            "{recorded}"
        );
        assert!(
            recorded.lines().any(|l| l.starts_with("event ")),
            "{recorded}"
        );
        assert_eq!(
            run_sched(&green, &format!("replay:{}", t.display()), None),
            lost,
            "{mech} {target}: strict replay"
        );
        relaxed_runs(&green, &t, &lost, 100);
        relaxed_runs_on(&green, &t, &lost, 10, "1");
        // The same program under OS threads has the same sites: the trace fits it too.
        relaxed_runs(&os, &t, &lost, 20);
    }
}

/// A spin-wait on a plain flag with a yield after each try: relaxed replay makes no yield
/// (`sthread_yield` does nothing there), and still prints what each recorded schedule did,
/// "spun 1" (the consumer read the flag before it was set) and "spun 0" alike, on one worker
/// (where the spinning thread must park for the producer to run), on two and on OS threads.
/// The data (hand-checked: 0 + 1 + ... + 999) is the producer's.
#[test]
fn a_spin_wait_replays_relaxed_without_its_yields() {
    let dir = tempfile::tempdir().unwrap();
    let src = root().join("tests/race/spin_flag.cm");
    for (mech, target) in [("lookahead", "x86_64"), ("traditional", "i686")] {
        let base = ["--race", "--mech", mech, "--target", target, "--threads"];
        let mut args = base.to_vec();
        args.push("green");
        let green = compile(&src, dir.path(), &format!("spin-green-{mech}"), &args);
        args.pop();
        args.push("os");
        let os = compile(&src, dir.path(), &format!("spin-os-{mech}"), &args);
        let mut seen = Vec::new();
        for seed in 1..=40 {
            let t = dir.path().join(format!("spin-{mech}-{seed}.trace"));
            let out = run_sched(&green, &format!("random:{seed}"), Some(&t));
            if seen.contains(&out) {
                continue;
            }
            assert!(
                out == "data 499500\nspun 1\n" || out == "data 499500\nspun 0\n",
                "{mech} {target} random:{seed}: {out:?}"
            );
            relaxed_runs_on(&green, &t, &out, 5, "1");
            relaxed_runs(&green, &t, &out, 5);
            relaxed_runs(&os, &t, &out, 5);
            seen.push(out);
        }
        assert_eq!(seen.len(), 2, "{mech} {target}: both outcomes in 40 seeds");
    }
}

/// Whether `out` is a run of mutex_order.cm: six digits, each of 1, 2, 3 twice.
fn is_mutex_order(out: &str) -> bool {
    let mut d: Vec<char> = out.trim_end_matches('\n').chars().collect();
    d.sort_unstable();
    d == ['1', '1', '2', '2', '3', '3'] && out.ends_with('\n')
}

/// The order in which threads take a mutex (tests/race/mutex_order.cm) differs from seed to
/// seed; each recorded order comes back under relaxed replay on two workers and on OS threads.
#[test]
fn relaxed_replay_reproduces_the_recorded_order_of_a_mutex() {
    let dir = tempfile::tempdir().unwrap();
    let src = root().join("tests/race/mutex_order.cm");
    for (mech, target) in [("lookahead", "x86_64"), ("heap", "i686")] {
        let base = ["--race", "--mech", mech, "--target", target, "--threads"];
        let mut args = base.to_vec();
        args.push("green");
        let green = compile(&src, dir.path(), &format!("mo-green-{mech}"), &args);
        args.pop();
        args.push("os");
        let os = compile(&src, dir.path(), &format!("mo-os-{mech}"), &args);
        let mut seen = std::collections::BTreeSet::new();
        for seed in 1..=12 {
            let t = dir.path().join(format!("mo-{mech}-{seed}.trace"));
            let out = run_sched(&green, &format!("random:{seed}"), Some(&t));
            assert!(is_mutex_order(&out), "{mech} {target} seed {seed}: {out:?}");
            seen.insert(out.clone());
            assert_eq!(
                run_sched(&green, &format!("replay:{}", t.display()), None),
                out
            );
            relaxed_runs(&green, &t, &out, 10);
            relaxed_runs(&os, &t, &out, 3);
        }
        assert!(seen.len() >= 2, "{mech} {target}: one order only: {seen:?}");
    }
}

/// A trace long enough to be read by two threads (IRS's Fibonacci, 400 rounds under PCT: half a
/// megabyte) replays relaxed as recorded, and a bad line in its second half, or one that only
/// the lines of its first half show to be out of order, is named by its line number.
#[test]
fn a_long_trace_is_read_in_two_halves_and_its_errors_keep_their_lines() {
    let dir = tempfile::tempdir().unwrap();
    let src = root().join("tests/programs/irs_fibonacci.cm");
    let exe = compile(
        &src,
        dir.path(),
        "fib",
        &["--race", "--threads", "green", "--mech", "lookahead"],
    );
    let run = |env: &[(&str, &str)]| {
        let mut cmd = Command::new(&exe);
        cmd.arg("400")
            .env_remove("STACKRT_RACE")
            .env_remove("STACKRT_SCHED_TRACE")
            .envs(env.iter().copied());
        run_within(cmd, Duration::from_secs(60), "fibonacci")
    };
    let t = dir.path().join("fib.trace");
    let recorded = run(&[
        ("STACKRT_SCHED", "pct:1:3"),
        ("STACKRT_SCHED_TRACE", t.to_str().unwrap()),
    ]);
    assert_eq!(
        recorded.status.code(),
        Some(0),
        "{}",
        text(&recorded.stderr)
    );
    let want = text(&recorded.stdout);
    let trace = std::fs::read_to_string(&t).unwrap();
    // Well past the size read by one thread (`trace::SPLIT_BYTES`, 256 KiB).
    assert!(trace.len() > 400 * 1024, "{} bytes", trace.len());
    // The threads' failed swaps while they wait for their turn are `failed` lines: thread 1
    // (`add_j`, waiting for `turn` to be 0) finds 1 in each.
    let failed_of_1: Vec<&str> = trace
        .lines()
        .filter(|l| l.starts_with("failed 1 "))
        .collect();
    assert!(!failed_of_1.is_empty());
    assert!(
        failed_of_1.iter().all(|l| l.ends_with(" 1")),
        "{failed_of_1:?}"
    );
    let sched = format!("relaxed:{}", t.display());
    for workers in ["1", "2"] {
        let o = run(&[("STACKRT_SCHED", &sched), ("STACKRT_WORKERS", workers)]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        assert_eq!(text(&o.stdout), want);
    }
    // Thread 1's first event line is in the first half; a copy of it three quarters down is out
    // of order only against it.
    let lines: Vec<&str> = trace.lines().collect();
    let first_of_1 = *lines
        .iter()
        .find(|l| l.starts_with("event 1 "))
        .expect("an event line of thread 1");
    let at = lines.len() * 3 / 4;
    let bad = dir.path().join("bad.trace");
    let p = bad.display().to_string();
    for (inserted, msg) in [
        (
            "event 1 x after 0.1 read",
            "\"x\" is not an event number".to_string(),
        ),
        (
            first_of_1,
            format!(
                "event {} of thread 1 after a later or equal one of the same thread",
                first_of_1.split(' ').nth(2).unwrap()
            ),
        ),
    ] {
        let mut changed = lines.clone();
        changed.insert(at, inserted);
        std::fs::write(&bad, changed.join("\n") + "\n").unwrap();
        let o = run(&[("STACKRT_SCHED", &format!("relaxed:{p}"))]);
        assert_eq!(o.status.code(), Some(1), "{inserted}");
        common::assert_one_line(&o, &format!("{p}:{}: {msg}", at + 1), inserted);
    }
    // A failed swap said to have found the value the program expects (0) would have
    // succeeded: the run left the trace.
    let f = failed_of_1[0];
    let n = f.split(' ').nth(2).unwrap();
    let changed = trace.replacen(
        &format!("\n{f}\n"),
        &format!("\n{}0\n", &f[..f.len() - 1]),
        1,
    );
    assert_ne!(changed, trace);
    std::fs::write(&bad, changed).unwrap();
    let o = run(&[("STACKRT_SCHED", &format!("relaxed:{p}"))]);
    assert_eq!(o.status.code(), Some(70), "{}", text(&o.stderr));
    common::assert_one_line(
        &o,
        &format!("relaxed replay diverged: thread 1's compare-and-swap, its event {n}, expects 0, which the recorded one found: it failed there"),
        "value",
    );
}

/// Bad traces and settings: one line naming the file (and the line of it), status 1; a trace
/// that no longer fits the run: one line, status 70.
#[test]
fn malformed_or_foreign_traces_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let lu = root().join("tests/race/lost_update.cm");
    let args = ["--race", "--threads", "green"];
    let exe = compile(&lu, dir.path(), "lu", &args);
    let good = dir.path().join("good.trace");
    let want = run_sched(&exe, "random:3", Some(&good));
    let recorded = std::fs::read_to_string(&good).unwrap();
    let status = |o: &Output| o.status.code();
    let bad = dir.path().join("bad.trace");
    let p = bad.display().to_string();
    for (body, line, msg) in [
        (
            "stackrt-sched-trace 2 random:1\n0\nevent 1 x after 0.1 read\n",
            3,
            "\"x\" is not an event number",
        ),
        (
            "stackrt-sched-trace 2 random:1\n0\nevent 1 4 after 0.1 poke\n",
            3,
            "\"poke\" is not an event kind",
        ),
        (
            "stackrt-sched-trace 2 random:1\nprogram 1\n",
            2,
            "expected one line: program SITES HASH",
        ),
        ("not a trace\n", 1, "not a stackrt schedule trace"),
        ("stackrt-sched-trace 1 random:1\n0\n\n", 3, "empty line"),
    ] {
        std::fs::write(&bad, body).unwrap();
        for sched in [format!("relaxed:{p}"), format!("replay:{p}")] {
            let o = run_env(&exe, &[("STACKRT_SCHED", &sched)]);
            assert_eq!(status(&o), Some(1), "{sched} {body:?}");
            common::assert_one_line(&o, &format!("{p}:{line}: {msg}"), &sched);
            assert_eq!(text(&o.stdout), "");
        }
    }
    let missing = dir.path().join("missing.trace");
    let o = run_env(
        &exe,
        &[("STACKRT_SCHED", &format!("relaxed:{}", missing.display()))],
    );
    assert_eq!(status(&o), Some(1));
    common::assert_one_line(&o, "cannot read", "missing");
    // A version 1 trace (no events) and another program's trace.
    std::fs::write(&bad, "stackrt-sched-trace 1 random:1\n0\n").unwrap();
    let o = run_env(&exe, &[("STACKRT_SCHED", &format!("relaxed:{p}"))]);
    assert_eq!(status(&o), Some(1));
    common::assert_one_line(&o, "has no --race events", "v1");
    let other = compile(
        &root().join("tests/race/mutex_order.cm"),
        dir.path(),
        "mo",
        &args,
    );
    let o = run_env(
        &other,
        &[("STACKRT_SCHED", &format!("relaxed:{}", good.display()))],
    );
    assert_eq!(status(&o), Some(1));
    common::assert_one_line(&o, "was recorded from another program", "foreign");
    // Without --race there is nothing to enforce.
    let plain = compile(&lu, dir.path(), "lu-plain", &["--threads", "green"]);
    let o = run_env(
        &plain,
        &[("STACKRT_SCHED", &format!("relaxed:{}", good.display()))],
    );
    assert_eq!(status(&o), Some(1));
    common::assert_one_line(&o, "needs a program compiled with --race", "plain");
    // A thread that makes fewer events than its `end` line says.
    let end = recorded
        .lines()
        .find(|l| l.starts_with("end 1 "))
        .expect("thread 1 ends in the trace");
    let n: u64 = end[6..].parse().unwrap();
    std::fs::write(&bad, recorded.replace(end, &format!("end 1 {}", n + 1))).unwrap();
    let o = run_env(&exe, &[("STACKRT_SCHED", &format!("relaxed:{p}"))]);
    assert_eq!(status(&o), Some(70), "{}", text(&o.stderr));
    common::assert_one_line(
        &o,
        &format!(
            "relaxed replay diverged: thread 1 ended after {n} events, in the trace after {}",
            n + 1
        ),
        "diverged",
    );
    // A load where the trace has a failed compare-and-swap (thread 1's third event reads
    // `counter`; the trace has no other line of thread 1 before its end).
    assert!(
        !recorded.contains("\nevent 1 ") && !recorded.contains("\nfailed 1 "),
        "{recorded}"
    );
    let (head, rest) = recorded.split_once("\n").unwrap();
    let (program, rest) = rest.split_once("\n").unwrap();
    std::fs::write(&bad, format!("{head}\n{program}\nfailed 1 3 1 5\n{rest}")).unwrap();
    let o = run_env(&exe, &[("STACKRT_SCHED", &format!("relaxed:{p}"))]);
    assert_eq!(status(&o), Some(70), "{}", text(&o.stderr));
    common::assert_one_line(
        &o,
        "relaxed replay diverged: thread 1's event 3 is no compare-and-swap; in the trace it is one that failed",
        "not a swap",
    );
    // The good trace still replays.
    relaxed_runs(&exe, &good, &want, 1);
}

/// The corpus's thread programs, recorded under a seed and replayed relaxed on two workers and
/// on OS threads, print what gcc's build printed (`NAME.expected`; threads_mutex at a smaller
/// size, hand-checked: 8 threads x 500 increments, 0 + ... + 7 = 28, a node per 100). Under
/// `lookahead` the recorder's thread-end line must not run on the ended thread's entry room,
/// and 8 OS threads waiting for each other's 2,000 locks in a recorded order must not starve.
#[test]
fn corpus_thread_programs_record_and_replay_relaxed_to_the_oracle_output() {
    let dir = tempfile::tempdir().unwrap();
    let mutex_500 = "counter 4000 dsum 2000.0 ids 28 list 40\nexit: 1\n".to_string();
    let progs = [
        ("threads_basic", Vec::<&str>::new(), None),
        ("threads_nested", vec![], None),
        ("threads_mutex", vec!["8", "500"], Some(mutex_500)),
        // IRS's benchmarks, with their `// args:` (their shared words go through sthread_cas).
        ("irs_fibonacci", vec!["3"], None),
        ("irs_last_zero", vec!["3"], None),
        ("irs_indexer", vec!["3"], None),
        ("irs_philosophers", vec!["2"], None),
    ];
    for (name, args, want) in progs {
        let src = root().join(format!("tests/programs/{name}.cm"));
        let want = want.unwrap_or_else(|| {
            std::fs::read_to_string(root().join(format!("tests/programs/{name}.expected"))).unwrap()
        });
        for mech in ["lookahead", "traditional"] {
            let out = |exe: &std::path::Path, env: &[(&str, &str)]| {
                let mut cmd = Command::new(exe);
                cmd.args(&args)
                    .env_remove("STACKRT_RACE")
                    .env_remove("STACKRT_SCHED")
                    .env_remove("STACKRT_SCHED_TRACE")
                    .envs(env.iter().copied());
                let o = run_within(cmd, Duration::from_secs(120), name);
                assert_eq!(text(&o.stderr), "", "{name} {mech} {env:?}");
                format!(
                    "{}exit: {}\n",
                    text(&o.stdout),
                    o.status.code().unwrap_or(-1)
                )
            };
            let base = ["--race", "--mech", mech, "--threads"];
            let mut a = base.to_vec();
            a.push("green");
            let green = compile(&src, dir.path(), &format!("{name}-g-{mech}"), &a);
            a.pop();
            a.push("os");
            let os = compile(&src, dir.path(), &format!("{name}-o-{mech}"), &a);
            let t = dir.path().join(format!("{name}-{mech}.trace"));
            let ts = t.display().to_string();
            let rec = out(
                &green,
                &[("STACKRT_SCHED", "random:7"), ("STACKRT_SCHED_TRACE", &ts)],
            );
            assert_eq!(rec, want, "{name} {mech} recorded");
            let relaxed = format!("relaxed:{ts}");
            for _ in 0..3 {
                let g = out(
                    &green,
                    &[("STACKRT_SCHED", &relaxed), ("STACKRT_WORKERS", "2")],
                );
                assert_eq!(g, want, "{name} {mech} relaxed, green threads");
                assert_eq!(
                    out(&os, &[("STACKRT_SCHED", &relaxed)]),
                    want,
                    "{name} {mech} relaxed, OS threads"
                );
            }
        }
    }
}
