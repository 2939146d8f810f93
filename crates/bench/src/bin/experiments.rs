//! `cargo xtask experiments`: re-measures the thesis's and the paper's experiments with every
//! mechanism the compiler accepts and the peers, and writes results.csv, report.md and plots.

use bench::build::Target;
use bench::experiments::Size;
use bench::harness::{self, Options};
use clap::Parser;
use std::path::PathBuf;
use std::process::exit;

/// Re-measures the thesis's and the paper's experiments (see crates/bench/src/experiments.rs).
#[derive(Parser, Debug)]
#[command(name = "experiments")]
struct Cli {
    /// Reduced sizes: about 5 minutes on a 2-core machine (the report lists every
    /// reduction next to the thesis's value).
    #[arg(long, conflicts_with = "tiny")]
    quick: bool,
    /// Seconds-long sizes (the CI smoke test).
    #[arg(long)]
    tiny: bool,
    /// Run only these experiments (names as in the report, e.g. summation_single tree_cores).
    #[arg(long, num_args = 1..)]
    only: Vec<String>,
    /// Measured rounds per executable (default 10, --quick 3).
    #[arg(long)]
    runs: Option<usize>,
    /// Seconds of measuring per executable and point: an executable whose verification run
    /// takes longer than this divided by the rounds gets fewer rounds, but at least 3 (0: always
    /// all rounds).
    #[arg(long, default_value_t = 10.0, value_name = "SECONDS")]
    round_budget: f64,
    /// Code layouts per C-- executable: each is also built with its code moved by 16, 32, ...
    /// bytes (`cmm compile --text-offset`), and round r runs layout (r - 1) mod N, so each
    /// round's ratios compare one layout and the mean ratio spans N of them (a build's layout
    /// alone moves these programs' times by 4-13 %). 1: one build per mechanism.
    #[arg(long, default_value_t = 4, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=64))]
    layouts: u32,
    /// Output directory (default target/experiments/<UTC date and time>).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Go on with the run in --out that was stopped: the experiments it finished (kept in
    /// OUT/parts as each ends) are kept, the others measured; then the report covers all and
    /// names each session that measured some. Needs --out and the options the run began with.
    #[arg(long, requires = "out")]
    resume: bool,
    /// Targets to measure.
    #[arg(long, num_args = 1.., default_values = ["x86_64", "i686"])]
    target: Vec<String>,
    /// Measure only these mechanisms (default: every one the compiler accepts).
    #[arg(long, num_args = 1.., value_name = "MECH")]
    mech: Vec<String>,
    /// Leave out the peers (gcc, gcc -fsplit-stack, Go, the native back end).
    #[arg(long)]
    no_peers: bool,
    /// The compiler (default target/release/cmm; `cargo xtask experiments` builds it first).
    #[arg(long)]
    cmm: Option<PathBuf>,
    /// List the experiments and exit.
    #[arg(long)]
    list: bool,
    /// No progress line.
    #[arg(long)]
    quiet: bool,
}

fn main() {
    let cli = Cli::parse();
    if !cli.round_budget.is_finite() || cli.round_budget < 0.0 {
        eprintln!(
            "experiments: --round-budget must be a number of seconds, 0 or more (got {})",
            cli.round_budget
        );
        exit(2);
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the workspace root exists");
    let size = if cli.tiny {
        Size::Tiny
    } else if cli.quick {
        Size::Quick
    } else {
        Size::Full
    };
    if cli.list {
        let all = bench::experiments::all(&root, size)
            .into_iter()
            .chain(bench::mtss::experiments(&root, size));
        for e in all {
            println!("{:<20} {} ({})", e.name, e.title, e.figures);
        }
        return;
    }
    let mut targets = Vec::new();
    for t in &cli.target {
        match t.as_str() {
            "x86_64" => targets.push(Target::X86_64),
            "i686" => targets.push(Target::I686),
            other => {
                eprintln!("experiments: unknown target {other} (x86_64, i686)");
                exit(2);
            }
        }
    }
    let cmm = cli.cmm.unwrap_or_else(|| root.join("target/release/cmm"));
    if !cmm.is_file() {
        eprintln!(
            "experiments: {} is missing; build it: cargo build --release",
            cmm.display()
        );
        exit(2);
    }
    let accepted = bench::build::accepted_mechanisms(&cmm);
    if let Some(unknown) = cli.mech.iter().find(|m| !accepted.contains(m)) {
        eprintln!(
            "experiments: unknown mechanism {unknown} ({})",
            accepted.join(", ")
        );
        exit(2);
    }
    // A directory name without spaces or colons: 2026-11-23T2012.
    let stamp = bench::machine::utc_stamp()
        .replace(' ', "T")
        .replace(':', "");
    let out = cli
        .out
        .unwrap_or_else(|| root.join("target/experiments").join(stamp));
    let options = Options {
        root,
        cmm,
        out: out.clone(),
        size,
        only: cli.only,
        runs: cli.runs.unwrap_or(match size {
            Size::Full => 10,
            Size::Quick => 2,
            Size::Tiny => 2,
        }),
        round_budget: (cli.round_budget > 0.0)
            .then(|| std::time::Duration::from_secs_f64(cli.round_budget)),
        targets,
        mechs: cli.mech,
        peers: !cli.no_peers,
        progress: !cli.quiet,
        resume: cli.resume,
        layouts: cli.layouts as usize,
    };
    let command = format!(
        "cargo xtask experiments {}",
        std::env::args().skip(1).collect::<Vec<_>>().join(" ")
    );
    let results = match harness::run(&options) {
        Ok(results) => results,
        Err(e) => {
            eprintln!("experiments: {e}");
            exit(1);
        }
    };
    match bench::write_outputs(&results, &out, command.trim()) {
        Ok(plot_errors) => {
            for e in plot_errors {
                eprintln!("experiments: plot not drawn: {e}");
            }
            eprintln!(
                "experiments: {} runs in {}; report: {}",
                results.records.len(),
                harness::format_duration(results.elapsed.as_secs_f64()),
                out.join("report.md").display()
            );
        }
        Err(e) => {
            eprintln!("experiments: {e}");
            exit(1);
        }
    }
}
