//! Criterion benchmarks and the experiment harness for C-- stack mechanisms.
//!
//! `cargo xtask experiments` runs the harness (`src/bin/experiments.rs`): every experiment of
//! the thesis and the paper ([`experiments`]) with every mechanism the compiler accepts and the
//! peers ([`build`]), measured in interleaved rounds ([`harness`], [`run`]) and written as
//! `results.csv`, `report.md` with a findings table ([`report`], [`findings`]; the green-thread
//! grid's own tables in [`grid`], the MTSS seed's in [`mtss_report`]) and SVG plots ([`plot`]), all
//! computed from the measurements aggregated per cell ([`table`]).

pub mod build;
pub mod experiments;
pub mod findings;
pub mod grid;
pub mod harness;
pub mod machine;
pub mod mtss;
pub mod mtss_report;
pub mod note;
pub mod part;
pub mod persist;
pub mod plot;
pub mod report;
pub mod run;
pub mod stats;
pub mod table;

use std::path::Path;

/// Writes `results.csv`, the plots and `report.md` into `dir`; returns the plot errors (a plot
/// that cannot be drawn does not lose the measurements).
pub fn write_outputs(
    results: &harness::Results,
    dir: &Path,
    command: &str,
) -> Result<Vec<String>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    report::write_csv(results, &dir.join("results.csv"))
        .map_err(|e| format!("results.csv: {e}"))?;
    let (plots, errors) = plot::write_all(results, &dir.join("plots"));
    report::write_markdown(results, &dir.join("report.md"), &plots, command)
        .map_err(|e| format!("report.md: {e}"))?;
    Ok(errors)
}
