//! CI smoke test of the experiment harness: two tiny experiments on x86-64 (seconds), checked
//! for a report with the findings table, one CSV row per run and plots, so the harness cannot rot.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The compiler the harness drives: `cargo test --workspace` builds the debug one.
fn compiler() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    ["target/debug/cmm", "target/release/cmm"]
        .iter()
        .map(|p| root.join(p))
        .filter(|p| p.is_file())
        .max_by_key(|p| p.metadata().and_then(|m| m.modified()).ok())
        .expect("no cmm binary: build it first (cargo build, or run cargo test --workspace)")
}

#[test]
fn tiny_experiments_produce_a_report() {
    let out = tempfile::tempdir().expect("temporary directory");
    let status = Command::new(env!("CARGO_BIN_EXE_experiments"))
        .args(["--tiny", "--only", "summation_single", "summation_cores"])
        .args(["--runs", "1", "--target", "x86_64", "--quiet", "--cmm"])
        .arg(compiler())
        .arg("--out")
        .arg(out.path())
        .status()
        .expect("the harness starts");
    assert!(status.success(), "harness failed: {status}");
    let report = std::fs::read_to_string(out.path().join("report.md")).expect("report.md");
    for needle in [
        "## Machine",
        "## Findings",
        "| traditional |",
        "Summation multi-threaded",
    ] {
        assert!(
            report.contains(needle),
            "report.md lacks {needle:?}:\n{report}"
        );
    }
    let csv = std::fs::read_to_string(out.path().join("results.csv")).expect("results.csv");
    let rows: Vec<&str> = csv.lines().skip(1).collect();
    // Each point: a verification run and one measured round per executable.
    assert!(
        rows.iter()
            .filter(|r| r.contains(",traditional,1,"))
            .count()
            >= 2,
        "{csv}"
    );
    assert!(rows
        .iter()
        .any(|r| r.contains("lookahead") && r.ends_with(|c: char| c.is_ascii_digit())));
    let plots = std::fs::read_dir(out.path().join("plots"))
        .expect("plots directory")
        .count();
    assert!(plots >= 2, "only {plots} plots");
}
