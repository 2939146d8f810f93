//! Helpers shared by the end-to-end tests of the chunked mechanisms (tests/lookahead.rs,
//! tests/mmu.rs): compiling with the `cmm` binary under test, reading the runtime's statistics,
//! and the expected output of tests/lookahead/deep_sum.cm from its formulas.
#![allow(dead_code)] // each test crate uses its own subset

use std::path::{Path, PathBuf};
use std::process::Command;

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
