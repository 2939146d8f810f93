//! Helpers shared by the end-to-end tests of the chunked and heap mechanisms (tests/lookahead.rs,
//! tests/mmu.rs, tests/heap.rs): compiling with the `cmm` binary under test, running with a
//! deadline, crash-report and statistics checks, the signal storm of tests/mmu/storm.c, and the
//! expected output of tests/lookahead/deep_sum.cm from its formulas.
#![allow(dead_code)] // each test crate uses its own subset

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Every mechanism the emission stage implements, on both targets.
pub const MECHS: [&str; 8] = [
    "traditional",
    "callee-cleanup",
    "heap",
    "heap-malloc",
    "lookahead",
    "mmu",
    "mmu-reuse",
    "mtss",
];

pub fn cmm() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cmm"))
}

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

/// Compiles `file` with `args` into `dir/name`; panics with the compiler's stderr on failure.
pub fn compile(file: &Path, dir: &Path, name: &str, args: &[&str]) -> PathBuf {
    let exe = dir.join(name);
    let o = cmm()
        .arg("compile")
        .arg(file)
        .args(args)
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "cmm compile {} {args:?}: {}",
        file.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    exe
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `n(n+1)/2` with 32-bit wrap-around, as C-- `int` arithmetic computes it.
pub fn sum_formula(n: u64) -> i32 {
    (n * (n + 1) / 2) as u32 as i32
}

pub fn deep_sum_expected(n: u64) -> String {
    format!(
        "sum {n} = {}\nhalf {n} = {:.1}\n",
        sum_formula(n),
        n as f64 / 2.0
    )
}

/// A statistics counter from the `STACKRT_STATS=1` report.
pub fn stat(stderr: &str, name: &str) -> u64 {
    let line = stderr
        .lines()
        .find(|l| {
            l.trim_start_matches("stackrt:")
                .trim_start()
                .starts_with(name)
        })
        .unwrap_or_else(|| panic!("no `{name}` in the statistics:\n{stderr}"));
    line.split_whitespace()
        .find_map(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("no number in {line:?}"))
}

/// Every crash must end within this (a handler that loops on its fault never would; they
/// take 2-70 ms here, the runaway recursions the most).
pub const CRASH_DEADLINE: Duration = Duration::from_secs(1);

/// Runs `cmd`, killing it after `deadline` (and failing the test, naming it).
pub fn run_within(mut cmd: Command, deadline: Duration, what: &str) -> Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if start.elapsed() > deadline {
            let _ = child.kill();
            let o = child.wait_with_output().unwrap();
            panic!(
                "{what} did not end within {deadline:?} (stderr: {})",
                String::from_utf8_lossy(&o.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Asserts the one report line of a crash: exactly one line on stderr, from the runtime,
/// containing `want`.
pub fn assert_one_line(o: &Output, want: &str, what: &str) {
    let err = text(&o.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{what}: want one line, got:\n{err}");
    assert!(
        lines[0].starts_with("stackrt: ") && lines[0].contains(want),
        "{what}: want a line containing {want:?}, got:\n{err}"
    );
}

/// Builds tests/mmu/storm.c, an `LD_PRELOAD` library that sends the process `SIGALRM` every
/// 100 us to an `SA_ONSTACK` handler and prints `storm: N signals` at exit, for `target`.
pub fn build_storm(dir: &Path, target: &str) -> PathBuf {
    let storm = dir.join(format!("storm-{target}.so"));
    let m = if target == "i686" { "-m32" } else { "-m64" };
    let o = Command::new("cc")
        .args([m, "-shared", "-fPIC", "-O2", "-o"])
        .arg(&storm)
        .arg(root().join("tests/mmu/storm.c"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    storm
}

/// The number of signals the storm library reports on `stderr`.
pub fn storm_signals(stderr: &str) -> u64 {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("storm: "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("no storm count: {stderr}"))
}
