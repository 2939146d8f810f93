//! Writes what the harness measured: `results.csv` (one row per run), `report.md` (machine,
//! reductions, availability, tables, plots, findings table) and the SVG plots.

use crate::build::Target;
use crate::experiments::{Experiment, Shape, Size};
use crate::findings;
use crate::harness::{format_duration, NoteKind, Record, Results};
use crate::stats::{paired_ratio, summarize, Summary};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

/// Aggregated runs of one (experiment, target, variant, x).
#[derive(Debug, Clone)]
pub struct Cell {
    pub time: Summary,
    pub rss_kib: Summary,
    /// Minor page faults (`ru_minflt`).
    pub faults: Summary,
    /// Kernel-mode CPU seconds (`ru_stime`).
    pub system_seconds: Summary,
    /// Seconds of each measured round, by round number (for paired ratios).
    pub by_round: BTreeMap<usize, f64>,
    /// Median of each runtime statistic over the measured rounds.
    pub stats: BTreeMap<String, f64>,
}

/// (experiment, target, variant label, x bits) -> cell.
pub type Table = BTreeMap<(String, Target, String, u64), Cell>;

/// Aggregates the measured rounds (round 0, the verification run, is left out).
pub fn aggregate(records: &[Record]) -> Table {
    let mut groups: BTreeMap<(String, Target, String, u64), Vec<&Record>> = BTreeMap::new();
    for r in records {
        if r.round > 0 && r.outcome.ending.ok() {
            groups
                .entry((
                    r.experiment.to_string(),
                    r.target,
                    r.variant.clone(),
                    r.x.to_bits(),
                ))
                .or_default()
                .push(r);
        }
    }
    groups
        .into_iter()
        .filter_map(|(key, runs)| {
            let times: Vec<f64> = runs.iter().map(|r| r.outcome.seconds).collect();
            let rss: Vec<f64> = runs.iter().map(|r| r.outcome.maxrss_kib as f64).collect();
            let faults: Vec<f64> = runs.iter().map(|r| r.outcome.minor_faults as f64).collect();
            let system: Vec<f64> = runs.iter().map(|r| r.outcome.system_seconds).collect();
            let mut stat_values: BTreeMap<String, Vec<f64>> = BTreeMap::new();
            for r in &runs {
                for (name, value) in &r.outcome.stats {
                    stat_values
                        .entry(name.clone())
                        .or_default()
                        .push(*value as f64);
                }
            }
            let stats = stat_values
                .into_iter()
                .filter_map(|(k, v)| Some((k, summarize(&v)?.median)))
                .collect();
            Some((
                key,
                Cell {
                    time: summarize(&times)?,
                    rss_kib: summarize(&rss)?,
                    faults: summarize(&faults)?,
                    system_seconds: summarize(&system)?,
                    by_round: runs.iter().map(|r| (r.round, r.outcome.seconds)).collect(),
                    stats,
                },
            ))
        })
        .collect()
}

/// Looks a cell up.
pub fn cell<'t>(table: &'t Table, e: &str, t: Target, variant: &str, x: f64) -> Option<&'t Cell> {
    table.get(&(e.to_string(), t, variant.to_string(), x.to_bits()))
}

/// The x values measured for an experiment (any target and variant), ascending.
pub fn xs(table: &Table, e: &str) -> Vec<f64> {
    let set: BTreeSet<u64> = table
        .keys()
        .filter(|(name, ..)| name == e)
        .map(|(.., x)| *x)
        .collect();
    set.into_iter().map(f64::from_bits).collect()
}

/// Variant labels measured for an experiment and target, in the order they first ran.
pub fn variants(results: &Results, e: &str, t: Target) -> Vec<String> {
    let mut seen = Vec::new();
    for r in &results.records {
        if r.experiment == e && r.target == t && !seen.contains(&r.variant) {
            seen.push(r.variant.clone());
        }
    }
    seen
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// `results.csv`: one row per run, the runtime's statistics as extra columns.
pub fn write_csv(results: &Results, path: &Path) -> std::io::Result<()> {
    let stat_names: BTreeSet<&String> = results
        .records
        .iter()
        .flat_map(|r| r.outcome.stats.keys())
        .collect();
    let mut out =
        String::from("experiment,x,target,variant,round,warmup,status,seconds,maxrss_kib,args");
    for name in &stat_names {
        let _ = write!(out, ",stackrt_{name}");
    }
    out.push('\n');
    for r in &results.records {
        let _ = write!(
            out,
            "{},{},{},{},{},{},{},{:.6},{},{},{},{:.6},{:.6},{}",
            r.experiment,
            r.x,
            r.target,
            csv_field(&r.variant),
            r.round,
            r.round == 0,
            r.outcome.ending.code(),
            r.outcome.seconds,
            r.outcome.maxrss_kib,
            r.outcome.minor_faults,
            r.outcome.major_faults,
            r.outcome.user_seconds,
            r.outcome.system_seconds,
            csv_field(&r.args)
        );
        for name in &stat_names {
            match r.outcome.stats.get(*name) {
                Some(v) => {
                    let _ = write!(out, ",{v}");
                }
                None => out.push(','),
            }
        }
        out.push('\n');
    }
    std::fs::write(path, out)
}

fn ms(seconds: f64) -> String {
    let v = seconds * 1e3;
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn x_text(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        format!("{x}")
    }
}

/// The reference variant of ratios: `traditional` of the same target.
const REFERENCE: &str = "traditional";

fn experiment_section(
    out: &mut String,
    results: &Results,
    table: &Table,
    e: &Experiment,
    plots: &[String],
) {
    let _ = writeln!(out, "\n### {} (`{}`)\n", e.title, e.name);
    let _ = writeln!(out, "Re-draws: {}. Program: `{}`.", e.figures, {
        let path = e.sources.cm.display().to_string();
        path.rsplit_once("/tests/")
            .map(|(_, p)| format!("tests/{p}"))
            .or_else(|| {
                path.rsplit_once("/crates/")
                    .map(|(_, p)| format!("crates/{p}"))
            })
            .unwrap_or(path)
    });
    if !e.reductions.is_empty() {
        let _ = writeln!(out, "\nParameters different from the thesis/paper:");
        for r in &e.reductions {
            let _ = writeln!(out, "- {r}");
        }
    }
    for plot in plots {
        let _ = writeln!(out, "\n![{plot}]({plot})");
    }
    let notes: Vec<_> = results
        .notes
        .iter()
        .filter(|n| n.experiment == e.name)
        .collect();
    if !notes.is_empty() {
        let _ = writeln!(out, "\nDid not run:\n");
        for n in notes {
            let kind = match n.kind {
                NoteKind::NotAvailable => "not available",
                NoteKind::FixedStackCannot => "a fixed stack could not do it",
                NoteKind::Failed => "failed",
            };
            let at =
                n.x.map_or("all points".to_string(), |x| format!("x = {}", x_text(x)));
            let _ = writeln!(
                out,
                "- {} {} ({at}): **{kind}**: {}",
                n.target, n.variant, n.text
            );
        }
    }
    counts_section(out, results, e);
    for &target in &Target::ALL {
        let names = variants(results, e.name, target);
        if names.is_empty() {
            continue;
        }
        let per_unit = matches!(e.shape, Shape::PerUnit | Shape::HotSplit);
        let _ =
            writeln!(
            out,
            "\n{target}: time in ms over {} interleaved rounds (n=K after the mean: only K, see Method): mean ± 95% CI, median, minimum; \
             peak RSS (largest ru_maxrss); page faults (median ru_minflt); ratio = paired median of time / {REFERENCE}'s in the \
             same round{}.\n",
            results.runs,
            if per_unit { "; ns per unit of work from the median" } else { "" }
        );
        let _ = writeln!(
            out,
            "| {} | variant | mean ± CI | median | min | peak RSS MiB | page faults | ratio | overflows |{}",
            e.x_label,
            if per_unit { " ns/unit |" } else { "" }
        );
        let _ = writeln!(
            out,
            "|---|---|---:|---:|---:|---:|---:|---:|---:|{}",
            if per_unit { "---:|" } else { "" }
        );
        for x in xs(table, e.name) {
            let reference = cell(table, e.name, target, REFERENCE, x);
            for name in &names {
                let Some(c) = cell(table, e.name, target, name, x) else {
                    continue;
                };
                let ratio = reference
                    .and_then(|r| {
                        let (a, b): (Vec<f64>, Vec<f64>) = c
                            .by_round
                            .iter()
                            .filter_map(|(round, t)| Some((*t, *r.by_round.get(round)?)))
                            .unzip();
                        paired_ratio(&a, &b)
                    })
                    .map_or("-".into(), |r| format!("{r:.3}"));
                let overflows = c
                    .stats
                    .get("overflows")
                    .map_or("-".into(), |v| format!("{v:.0}"));
                let _ = write!(
                    out,
                    "| {} | {name} | {} ± {}{} | {} | {} | {:.1} | {:.0} | {ratio} | {overflows} |",
                    x_text(x),
                    ms(c.time.mean),
                    ms(c.time.ci95),
                    if c.time.count < results.runs {
                        format!(" (n={})", c.time.count)
                    } else {
                        String::new()
                    },
                    ms(c.time.median),
                    ms(c.time.min),
                    c.rss_kib.max / 1024.0,
                    c.faults.median,
                );
                if per_unit {
                    let work = e
                        .points
                        .iter()
                        .find(|p| p.x == x)
                        .and_then(|p| p.work)
                        .unwrap_or(f64::NAN);
                    let _ = write!(out, " {:.2} |", c.time.median / work * 1e9);
                }
                out.push('\n');
            }
        }
        if e.shape == Shape::HotSplit {
            let _ = writeln!(out, "\nCost of one overflow-underflow pair ({target}), from the medians: (split - base) / pairs\n");
            let _ = writeln!(out, "| mechanism | ns per pair |\n|---|---:|");
            for name in &names {
                if let (Some(base), Some(split)) = (
                    cell(table, e.name, target, name, 0.0),
                    cell(table, e.name, target, name, 1.0),
                ) {
                    let pairs = e.points[0].work.unwrap_or(f64::NAN);
                    let _ = writeln!(
                        out,
                        "| {name} | {:.1} |",
                        (split.time.median - base.time.median) / pairs * 1e9
                    );
                }
            }
        }
    }
}

/// The one-off counts of an experiment (instructions, system calls).
fn counts_section(out: &mut String, results: &Results, e: &Experiment) {
    let counts: Vec<_> = results
        .counts
        .iter()
        .filter(|c| c.experiment == e.name)
        .collect();
    if counts.is_empty() {
        return;
    }
    let instructions: Vec<_> = counts
        .iter()
        .filter(|c| c.count == crate::experiments::Count::Instructions)
        .collect();
    if !instructions.is_empty() {
        let _ = writeln!(
            out,
            "\nInstructions (valgrind `I refs`, whole process, deterministic) at x = {}; ratio to \
             gcc -O2 -fno-sibling of the same target:\n",
            x_text(instructions[0].x)
        );
        let _ = writeln!(
            out,
            "| target | variant | instructions (millions) | ratio |\n|---|---|---:|---:|"
        );
        for c in &instructions {
            let base = instructions
                .iter()
                .find(|b| b.target == c.target && b.variant == "gcc -O2 -fno-sibling")
                .map(|b| b.values[0] as f64);
            let ratio = base.map_or("-".into(), |b| format!("{:.2}", c.values[0] as f64 / b));
            let _ = writeln!(
                out,
                "| {} | {} | {:.1} | {ratio} |",
                c.target,
                c.variant,
                c.values[0] as f64 / 1e6
            );
        }
    }
    let syscalls: Vec<_> = counts
        .iter()
        .filter(|c| c.count == crate::experiments::Count::Syscalls)
        .collect();
    if !syscalls.is_empty() {
        let _ = writeln!(
            out,
            "\nSystem calls (`strace -f -c`, all threads) at x = {}, with R and 10 R repetitions \
             (the last argument): equal counts mean no system call per repetition.\n",
            x_text(syscalls[0].x)
        );
        let _ = writeln!(
            out,
            "| target | variant | R | system calls | 10 R | system calls |\n|---|---|---:|---:|---:|---:|"
        );
        for c in &syscalls {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} |",
                c.target, c.variant, c.values[0], c.values[1], c.values[2], c.values[3]
            );
        }
    }
}

/// `report.md`, with the plots already written under `plots`.
pub fn write_markdown(
    results: &Results,
    path: &Path,
    plots: &BTreeMap<String, Vec<String>>,
    command: &str,
) -> std::io::Result<()> {
    let table = aggregate(&results.records);
    let m = &results.machine;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# cmm experiments: the thesis's and the paper's, re-measured\n"
    );
    let _ = writeln!(
        out,
        "Command: `{command}` ({} run, {} measured rounds per executable after one verification run; took {}).\n",
        match results.size {
            Size::Full => "full",
            Size::Quick => "quick",
            Size::Tiny => "tiny (smoke test)",
        },
        results.runs,
        format_duration(results.elapsed.as_secs_f64())
    );
    let _ = writeln!(out, "Written {} UTC.\n", crate::machine::utc_stamp());
    let _ = writeln!(out, "## Machine\n");
    let _ = writeln!(
        out,
        "- CPU: {} ({} online CPUs)",
        m.cpu_model, m.online_cpus
    );
    let _ = writeln!(out, "- Memory: {:.1} GiB", m.memory_gib);
    let _ = writeln!(out, "- Kernel: Linux {}", m.kernel);
    let _ = writeln!(out, "- gcc: {}", m.gcc);
    let _ = writeln!(
        out,
        "- go: {}",
        m.go.clone()
            .unwrap_or_else(|| "not installed (Go peers not available)".into())
    );
    let _ = writeln!(
        out,
        "- Mechanisms the compiler accepts: {}",
        results.mechanisms.join(", ")
    );
    let _ = writeln!(out, "\n## Method\n");
    let _ = writeln!(
        out,
        "Every executable of one point (one x value of one experiment, both targets, all \
         mechanisms and peers) runs once per round, in an order rotated from round to round, so \
         that the shared machine's slow phases hit all of them alike. Before the rounds, each \
         runs once (not counted) and must exit 0 and print what the first one printed. Each run \
         is forked from a small helper (`runrss`) that reports its wall time and the child's \
         `ru_maxrss` from `wait4` (a child forked from the harness itself would inherit its \
         peak). C-- executables run with `STACKRT_STATS=1`; their statistics are columns of \
         `results.csv`. Fixed-stack executables (traditional, callee-cleanup, native, gcc without \
         split-stack) get thread stacks just big enough: the smallest working stack is searched \
         at two small depths with one thread and extrapolated to the point's depth, plus 64 KiB; \
         the executables whose stacks grow get {} KiB (they ignore it or outgrow it). A fixed-stack \
         point whose stacks together would exceed the address space (i686: 3 GiB) or 3/4 of the \
         physical memory (all threads may be deep at once) is not run and is listed as something \
         a fixed stack could not do. Single-threaded programs run under `ulimit -s unlimited`, \
         threaded ones with a 256 MiB main-thread stack (the tree's main thread frees the \
         branch recursively). gcc peers compile the C-- sources as C with the corpus oracle's \
         flags (tests/oracle/bless.sh), i686 with `-msse2 -mfpmath=sse`, linked with the C build \
         of the thread library (tests/oracle/sthread.c); `gcc -O2 -fno-sibling` is `-O2 \
         -fno-optimize-sibling-calls` (plain -O2 turns the recursions into loops), \
         `gcc -fsplit-stack` is that plus `-fsplit-stack`. Go peers (crates/bench/programs/go) \
         use goroutines on Go's growable stacks; they are compared on the `Data:` line only.",
        256
    );
    if let Some(budget) = results.round_budget {
        let cells = table.len();
        let fewer = table
            .values()
            .filter(|c| c.time.count < results.runs)
            .count();
        let _ = writeln!(
            out,
            "\nRounds: every executable is measured in {} rounds, or, when its verification run \
             takes longer than {:.2} s, in as many as fit in {:.1} s but at least {} \
             (`--round-budget`): {fewer} of the {cells} executable-point cells have fewer \
             rounds, marked n=K in the tables (failed runs lower K too).",
            results.runs,
            budget.as_secs_f64() / results.runs as f64,
            budget.as_secs_f64(),
            crate::harness::MIN_ROUNDS.min(results.runs),
        );
    }
    let _ = writeln!(out, "\n## Findings\n");
    findings::write_table(&mut out, results, &table);
    let _ = writeln!(out, "\n## Experiments");
    for e in &results.experiments {
        let plot_files = plots.get(e.name).cloned().unwrap_or_default();
        experiment_section(&mut out, results, &table, e, &plot_files);
    }
    if !results.stacks.is_empty() {
        let _ = writeln!(out, "\n## Thread stack sizes given\n");
        let _ = writeln!(out, "| run | stack-size argument (bytes) |\n|---|---:|");
        let mut seen = BTreeSet::new();
        for (what, bytes) in &results.stacks {
            if seen.insert(what.clone()) {
                let _ = writeln!(out, "| {what} | {bytes} |");
            }
        }
    }
    std::fs::write(path, out)
}
