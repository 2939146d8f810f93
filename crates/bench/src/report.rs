//! Writes what the harness measured: `results.csv` (one row per run) and `report.md` (a summary
//! with the findings table, then per experiment its plots and full tables, then the method).

use crate::build::Target;
use crate::experiments::{Experiment, Shape, Size};
use crate::findings;
use crate::harness::{format_duration, NoteKind, Results};
use crate::plot::Plot;
use crate::table::{aggregate, cell, ratio_to, variants, xs, Table};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

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
    let mut out = String::from(
        "experiment,x,target,variant,round,warmup,status,seconds,maxrss_kib,minor_faults,\
         major_faults,user_seconds,system_seconds,args",
    );
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

/// A run shorter than this measures start-up as much as the work: its per-unit figure is
/// marked indicative.
const SHORTEST_MEANINGFUL_RUN: f64 = 0.050;

/// The "did not run" notes of an experiment, one line per variant and kind (the targets and
/// points it concerns listed once, with the first message).
fn notes_section(out: &mut String, results: &Results, e: &Experiment) {
    let mut groups: BTreeMap<(NoteKind, String), (Vec<String>, String)> = BTreeMap::new();
    for n in results.notes.iter().filter(|n| n.experiment == e.name) {
        let at = n.x.map_or(String::new(), |x| format!(" at {}", x_text(x)));
        let entry = groups
            .entry((n.kind, n.variant.clone()))
            .or_insert_with(|| (Vec::new(), n.text.clone()));
        let place = format!("{}{at}", n.target);
        if !entry.0.contains(&place) {
            entry.0.push(place);
        }
    }
    if groups.is_empty() {
        return;
    }
    let _ = writeln!(out, "\nNot measured:\n");
    for ((kind, variant), (places, text)) in groups {
        let mut text = text.replace('\n', " ");
        if text.chars().count() > 240 {
            text = text.chars().take(240).collect::<String>() + "...";
        }
        let _ = writeln!(
            out,
            "- {variant} ({}): **{}**: {text}",
            places.join(", "),
            kind.describe()
        );
    }
}

fn experiment_section(
    out: &mut String,
    results: &Results,
    table: &Table,
    e: &Experiment,
    plots: &[Plot],
) {
    // An explicit anchor: the summary's contents link here by the experiment's name.
    let _ = writeln!(
        out,
        "\n<a id=\"{}\"></a>\n\n### {} (`{}`)\n",
        e.name, e.title, e.name
    );
    let mut plots = plots.to_vec();
    plots.sort_by_key(|p| p.kind);
    for plot in &plots {
        let _ = writeln!(out, "![{}]({})\n", plot.file, plot.file);
    }
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
    notes_section(out, results, e);
    if e.name == "call_depth" {
        crate::findings::write_call_depth_explanation(out, results, table);
    }
    if e.name == crate::grid::EXPERIMENT {
        crate::grid::write_tables(out, table, &e.points);
    }
    if e.name == crate::mtss::SHARE {
        crate::mtss_report::write_tables(out, results);
    }
    counts_section(out, results, e);
    let baseline = e.baseline;
    for &target in &Target::ALL {
        let names = variants(results, e.name, target);
        if names.is_empty() {
            continue;
        }
        let per_unit = matches!(e.shape, Shape::PerUnit | Shape::HotSplit);
        let _ = writeln!(
            out,
            "\n{target}: time in ms over {} interleaved rounds (n=K after the mean: only K, see \
             Method): mean ± 95% CI, median, minimum; peak RSS (largest ru_maxrss); page faults \
             (median ru_minflt); time / {baseline}: geometric mean of the ratios of runs in the \
             same round, with its 95% CI{}.\n",
            results.runs,
            if per_unit {
                "; ns per unit of work from the median (* indicative: runs under 50 ms measure \
                 start-up as much as the work)"
            } else {
                ""
            }
        );
        let _ = writeln!(
            out,
            "| {} | variant | mean ± CI | median | min | peak RSS MiB | page faults | time / {baseline} | overflows |{}",
            e.x_label,
            if per_unit { " ns/unit |" } else { "" }
        );
        let _ = writeln!(
            out,
            "|---|---|---:|---:|---:|---:|---:|---:|---:|{}",
            if per_unit { "---:|" } else { "" }
        );
        for x in xs(table, e.name) {
            for name in &names {
                let Some(c) = cell(table, e.name, target, name, x) else {
                    continue;
                };
                let ratio =
                    ratio_to(table, e.name, target, name, baseline, x).map_or("-".into(), |r| {
                        if r.pairs > 1 {
                            format!("{:.3} ({:.3}-{:.3})", r.ratio, r.low, r.high)
                        } else {
                            format!("{:.3}", r.ratio)
                        }
                    });
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
                    let _ = write!(
                        out,
                        " {:.2}{} |",
                        c.time.median / work * 1e9,
                        if c.time.median < SHORTEST_MEANINGFUL_RUN {
                            "*"
                        } else {
                            ""
                        }
                    );
                }
                out.push('\n');
            }
        }
        if e.shape == Shape::HotSplit {
            let _ = writeln!(out, "\nCost of one overflow-underflow pair ({target}), from the medians: (split - base) / pairs (* indicative: the split run is under 50 ms)\n");
            let _ = writeln!(out, "| mechanism | ns per pair |\n|---|---:|");
            for name in &names {
                if let (Some(base), Some(split)) = (
                    cell(table, e.name, target, name, 0.0),
                    cell(table, e.name, target, name, 1.0),
                ) {
                    let pairs = e.points[0].work.unwrap_or(f64::NAN);
                    let _ = writeln!(
                        out,
                        "| {name} | {:.1}{} |",
                        (split.time.median - base.time.median) / pairs * 1e9,
                        if split.time.median < SHORTEST_MEANINGFUL_RUN {
                            "*"
                        } else {
                            ""
                        }
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

/// `report.md`, with the plots already written under `plots`: a summary (machine, command,
/// the findings with the plot that shows each), then one section per experiment (plots, then
/// the full tables), then the method.
pub fn write_markdown(
    results: &Results,
    path: &Path,
    plots: &BTreeMap<String, Vec<Plot>>,
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
        "**Run:** `{command}`: {} run, {} measured rounds per executable after one verification \
         run; took {}{}; written {} UTC.\n",
        match results.size {
            Size::Full => "full",
            Size::Quick => "quick (reduced sizes; verdicts and per-unit figures indicative)",
            Size::Tiny => "tiny (smoke test)",
        },
        results.runs,
        format_duration(results.elapsed.as_secs_f64()),
        if results.sessions.len() > 1 {
            format!(" in {} sessions", results.sessions.len())
        } else {
            String::new()
        },
        crate::machine::utc_stamp()
    );
    let _ = writeln!(
        out,
        "**Machine:** {} ({} online CPUs), {:.1} GiB, Linux {}; {}; {}. Mechanisms the compiler \
         accepts: {}.\n",
        m.cpu_model,
        m.online_cpus,
        m.memory_gib,
        m.kernel,
        m.gcc,
        m.go.clone()
            .unwrap_or_else(|| "go not installed (Go peers not available)".into()),
        results.mechanisms.join(", ")
    );
    if results.sessions.len() > 1 {
        let _ = writeln!(
            out,
            "**Sessions:** the run was stopped and resumed (`--resume`); each experiment was \
             measured whole in one session, so no ratio mixes machines:\n"
        );
        for (s, names) in &results.sessions {
            let _ = writeln!(
                out,
                "- {} UTC, {} ({} online CPUs), Linux {}, commit {}: {}",
                s.started,
                s.machine.cpu_model,
                s.machine.online_cpus,
                s.machine.kernel,
                s.commit.as_deref().unwrap_or("unknown"),
                names
                    .iter()
                    .map(|n| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        let _ = writeln!(out);
    }
    let _ = writeln!(
        out,
        "Contents: [Findings](#findings) · [Experiments](#experiments) ({}) · [Method](#method)",
        results
            .experiments
            .iter()
            .map(|e| format!("[`{0}`](#{0})", e.name))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let _ = writeln!(out, "\n## Findings\n");
    let by_stem: BTreeMap<String, String> = plots
        .values()
        .flatten()
        .map(|p| {
            let stem = p
                .file
                .trim_start_matches("plots/")
                .trim_end_matches(".svg")
                .to_string();
            (stem, p.file.clone())
        })
        .collect();
    findings::write_table(
        &mut out,
        results,
        &table,
        &by_stem,
        crate::mtss_report::findings(),
        crate::mtss_report::measured_rows(results, &table),
    );
    let _ = writeln!(out, "\n## Experiments");
    for e in &results.experiments {
        let plot_files = plots.get(e.name).cloned().unwrap_or_default();
        experiment_section(&mut out, results, &table, e, &plot_files);
    }
    method_section(&mut out, results, &table);
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

/// How the measurements were made.
fn method_section(out: &mut String, results: &Results, table: &Table) {
    let _ = writeln!(out, "\n## Method\n");
    let _ = writeln!(
        out,
        "Every executable of one point (one x value of one experiment, both targets, all \
         mechanisms and peers) runs once per round, in an order rotated from round to round, so \
         that the shared machine's slow phases hit all of them alike. Before the rounds, each \
         runs once (not counted) and must exit 0 and print what the first one printed. Each run \
         is forked from a small helper (`runrss`) that reports its wall time and the child's \
         `ru_maxrss` from `wait4` (a child forked from the harness itself would inherit its \
         peak). A C-- executable's verification run has `STACKRT_STATS=1`, and its statistics \
         are columns of `results.csv` (repeated on the measured runs' rows); the measured runs \
         do not count (counting costs atomic operations on the runtime's hot paths: a \
         `lookahead` hot split took 64 ns a pair with it, 9 without). Fixed-stack executables (traditional, callee-cleanup, native, gcc without \
         split-stack) get thread stacks just big enough: the smallest working stack is searched \
         at two small depths with one thread and extrapolated to the point's depth, plus 64 KiB; \
         `mtss`'s native stacks are found the same way, a stack working when the thread never \
         overflows it (the MTSS paper sized each task from its peak), in a region sized to hold \
         them all (`STACKRT_MTSS_REGION`, at most 2 GiB on i686); \
         the executables whose stacks grow get {} KiB (they ignore it or outgrow it). A fixed-stack \
         point whose stacks together would exceed the address space (i686: 3 GiB) or 3/4 of the \
         physical memory (all threads may be deep at once) is not run and is listed as something \
         a fixed stack could not do; a run that ends for want of memory, kernel memory mappings \
         or threads is listed as exceeding this machine's limits; a mechanism an experiment \
         does not apply to (the hot split of a fixed stack) as not applicable. \
         Single-threaded programs run under `ulimit -s unlimited`, \
         threaded ones with a 256 MiB main-thread stack (the tree's main thread frees the \
         branch recursively). gcc peers compile the C-- sources as C with the corpus oracle's \
         flags (tests/oracle/bless.sh), i686 with `-msse2 -mfpmath=sse`, linked with the C build \
         of the thread library (tests/oracle/sthread.c); `gcc -O2 -fno-sibling` is `-O2 \
         -fno-optimize-sibling-calls` (plain -O2 turns the recursions into loops), \
         `gcc -fsplit-stack` is that plus `-fsplit-stack`, and `gcc -fsanitize=thread` that \
         plus ThreadSanitizer (the thread library instrumented too; 64-bit only). Go peers \
         (crates/bench/programs/go) use goroutines on Go's growable stacks, `go -race` the same \
         built with Go's race detector (64-bit only); they are compared on the `Data:` line \
         only. \
         Plots: mean and 95% confidence interval (Student's t); ratios are geometric means of \
         the ratios of runs made in the same round, with a t interval on their logarithms.",
        256
    );
    if results.layouts > 1 {
        let _ = writeln!(
            out,
            "\nCode layouts: every C-- executable of the emission stage (not `--race` builds) \
             is built {} times, its code moved by 0 to {} bytes (`cmm compile --text-offset`), \
             and round r runs layout (r - 1) mod {}: the ratios of one round compare \
             executables of the same layout, and their mean spans the layouts (a build's \
             layout alone moves these programs' times by 4-13 %, README \"Using the \
             compiler\"). Peers and the native back end have one build (`--layouts`).",
            results.layouts,
            crate::build::layout_offset(results.layouts - 1),
            results.layouts,
        );
    }
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
}
