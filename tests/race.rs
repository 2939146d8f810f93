//! End-to-end tests of `cmm compile --race`: deliberately racy programs (`tests/race/`) whose
//! reports name both accesses' lines, checked exactly (written here by hand from the sources),
//! under OS and green threads, every mechanism on both targets, and both back ends; a race-free
//! program with no report; `STACKRT_RACE=abort` and a bad `STACKRT_RACE`. The corpus runs
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
            for mech in [
                "traditional",
                "callee-cleanup",
                "heap",
                "heap-malloc",
                "lookahead",
                "mmu",
                "mmu-reuse",
            ] {
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
    for (mech, target) in [("lookahead", "x86_64"), ("traditional", "i686")] {
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
        let k = std::fs::read_to_string(&trace).unwrap().lines().count() - 1;
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
