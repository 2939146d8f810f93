//! The MTSS seed's experiments (Middha, Simpson, Barua, CASES 2005, sections 5-6): the
//! overhead of `--mech mtss` without overflow (table 2), each task's Maximum Satisfiable
//! Overflow and each workload's Proportional Reduction Satisfiability found by bisection
//! (figures 6, 7), MSO against the page size (figure 8), `traditional` and `lookahead` on the
//! same budget, and the cost of the worst single overflow; their report tables and findings.

mod share;

pub use share::{measure, Context, PageShare, PeerRun, Prs, Share};

use crate::build::{Sources, Target, Toolchain, Variant};
use crate::experiments::{Experiment, Mechanisms, Point, Shape, Size};
use crate::harness::Results;
use crate::run::MainStack;
use crate::table::{cell, xs, Table};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The experiment made of the custom MSO/PRS step (no ordinary points).
pub const SHARE: &str = "mtss_share";
/// The overflow microbenchmark.
pub const OVERFLOW: &str = "mtss_overflow";
/// The page the paper's results use unless they say otherwise (and `--chunk-size`'s default).
pub const DEFAULT_PAGE: u64 = 128;
/// The paper's averages (section 6, figures 6 and 7).
pub const PAPER_MSO: f64 = 0.47;
pub const PAPER_PRS: f64 = 0.18;

/// A multi-task workload after the paper's MiBench domains (table 1).
#[derive(Debug, Clone, Copy)]
pub struct Workload {
    /// Short name: experiment names end with it (`mtss_overhead_auto`).
    pub key: &'static str,
    pub file: &'static str,
    /// The paper's domain name.
    pub domain: &'static str,
    /// The paper's run-time increase without overflow (table 2), in percent.
    pub paper_overhead: f64,
}

pub const WORKLOADS: [Workload; 3] = [
    Workload {
        key: "auto",
        file: "mibench_auto.cm",
        domain: "automotive",
        paper_overhead: 5.43,
    },
    Workload {
        key: "net",
        file: "mibench_net.cm",
        domain: "network",
        paper_overhead: 0.47,
    },
    Workload {
        key: "sec",
        file: "mibench_sec.cm",
        domain: "security",
        paper_overhead: 0.84,
    },
];

fn overhead_name(w: &Workload) -> &'static str {
    match w.key {
        "auto" => "mtss_overhead_auto",
        "net" => "mtss_overhead_net",
        _ => "mtss_overhead_sec",
    }
}

/// The thesis's recursions measured with `mtss` (a check at every call).
const RECURSIONS: [&str; 3] = [
    "mtss_overhead_summation",
    "mtss_overhead_tree",
    "mtss_overhead_calls",
];

/// The arguments of a program's `// args:` and `// args[big]:` lines.
pub fn program_args(source: &str) -> (Option<Vec<String>>, Option<Vec<String>>) {
    let line = |prefix: &str| {
        source
            .lines()
            .find_map(|l| l.strip_prefix(prefix))
            .map(|rest| rest.split_whitespace().map(str::to_string).collect())
    };
    (line("// args:"), line("// args[big]:"))
}

/// Parses the line `STACKRT_STATS=1` prints at exit under `mtss` ("stackrt: mtss: region R
/// bytes, page P bytes, O overflows, L pages lent at most, U bytes of native stacks at most")
/// into `stats`: `overflows` (the name the other mechanisms' statistics use, so the report's
/// overflow column shows it) and `mtss_<words>` for the rest. False for any other line (the
/// out-of-room message also begins with "stackrt: mtss:").
pub fn parse_stats_line(line: &str, stats: &mut BTreeMap<String, u64>) -> bool {
    let Some(rest) = line.strip_prefix("stackrt: mtss: region ") else {
        return false;
    };
    for item in format!("region {rest}").split(", ") {
        let words: Vec<&str> = item.split_whitespace().collect();
        let Some(at) = words.iter().position(|w| w.parse::<u64>().is_ok()) else {
            continue;
        };
        let mut name: Vec<&str> = words.clone();
        name.remove(at);
        let name = name.join("_");
        let key = if name == "overflows" {
            name
        } else {
            format!("mtss_{name}")
        };
        stats.insert(key, words[at].parse().expect("checked above"));
    }
    true
}

/// The environment that gives an `mtss` executable's `main` room for the deep recursions of
/// the experiments that run under `ulimit -s unlimited`. `main` runs on a native stack of the
/// region: `ulimit -s` bytes, but only 4 GiB (i686: 256 MiB) when that is unlimited, less than
/// Summation's 100 million levels need on i686. Here: 30 GiB of x86-64's 64 GiB region; on
/// i686 a 2 GiB region (what a 32-bit process under `ulimit -s unlimited` can map; the default
/// is 1 GiB) with 1900 MiB for `main`. Nothing under a finite limit, which `main` follows.
pub fn main_stack_env(
    v: &Variant,
    main_stack: MainStack,
    env: &[(String, String)],
) -> Vec<(String, String)> {
    let is_mtss = matches!(&v.tool, Toolchain::Cmm { mech, .. } if mech == "mtss");
    if !is_mtss
        || main_stack != MainStack::Unlimited
        || env.iter().any(|(k, _)| k.starts_with("STACKRT_MTSS_"))
    {
        return Vec::new();
    }
    let pairs: &[(&str, &str)] = match v.target {
        Target::X86_64 => &[("STACKRT_MTSS_MAIN_STACK", "30G")],
        Target::I686 => &[
            ("STACKRT_MTSS_REGION", "2G"),
            ("STACKRT_MTSS_MAIN_STACK", "1900M"),
        ],
    };
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn point(x: f64, args: Vec<String>, threads: u64, work: Option<f64>) -> Point {
    Point {
        x,
        args,
        probe: None,
        threads,
        work,
        x86_64_only: false,
        go_least_bytes: 0,
    }
}

/// What the MSO/PRS step measures at a size.
#[derive(Debug, Clone)]
pub struct SharePlan {
    pub workloads: Vec<Workload>,
    pub x86_64_only: bool,
    pub pages: Vec<u64>,
    /// Runs a size must pass to count as completing (S, PRS).
    pub repeats: usize,
}

pub fn share_plan(size: Size) -> SharePlan {
    match size {
        Size::Full => SharePlan {
            workloads: WORKLOADS.to_vec(),
            x86_64_only: false,
            pages: vec![32, 64, 128, 256, 512],
            repeats: 2,
        },
        Size::Quick | Size::Tiny => SharePlan {
            workloads: vec![WORKLOADS[1]],
            x86_64_only: true,
            pages: vec![DEFAULT_PAGE],
            repeats: 1,
        },
    }
}

/// The MTSS experiments at `size` (`experiments::all` appends them).
pub fn experiments(root: &Path, size: Size) -> Vec<Experiment> {
    let overhead = |name, title, figures, cm: PathBuf, points, main_stack, reductions| Experiment {
        name,
        title,
        figures,
        sources: Sources {
            cm,
            go: None,
            cmm_options: Vec::new(),
        },
        x_label: "scale",
        log_x: false,
        points,
        mechanisms: Mechanisms::Listed(&["traditional", "callee-cleanup", "mtss"]),
        gcc: Vec::new(),
        native: false,
        go: false,
        main_stack,
        shape: Shape::Curve,
        baseline: "traditional",
        unit: "call",
        counts: Vec::new(),
        reductions,
        env: Vec::new(),
        green: &[],
        race: Vec::new(),
    };
    let mut list = Vec::new();
    for w in &WORKLOADS {
        let cm = root.join("tests/programs").join(w.file);
        let (_, big) = program_args(&std::fs::read_to_string(&cm).unwrap_or_default());
        let Some(big) = big else { continue };
        let scale: u64 = big.first().and_then(|s| s.parse().ok()).unwrap_or(1);
        // --quick: a quarter of the big scale (0.2-1 s a run at the big scale).
        let at = match size {
            Size::Full => scale,
            Size::Quick => (scale / 4).max(1),
            Size::Tiny => 1,
        };
        let mut args = big.clone();
        args[0] = at.to_string();
        list.push(overhead(
            overhead_name(w),
            match w.key {
                "auto" => "MTSS without overflow: the automotive workload (basicmath, qsort, bitcnt, susan)",
                "net" => "MTSS without overflow: the network workload (dijkstra, patricia, treeadd)",
                _ => "MTSS without overflow: the security workload (sha, xtea, msort, rsa)",
            },
            "the MTSS seed, table 2 (run-time increase without overflow: 1.84% on average, 5.43% at worst)",
            cm,
            vec![point(at as f64, args, 4, None)],
            MainStack::KiB(8 * 1024),
            if at == scale {
                vec!["every task on the default stack (8 MiB): no overflow (the overflows column)".into()]
            } else {
                vec![format!("scale: the workload's big scale {scale} -> {at}")]
            },
        ));
    }
    let thesis = |f: &str| root.join("tests/programs/thesis").join(f);
    let n: u64 = match size {
        Size::Full => 30_000_000,
        Size::Quick => 3_000_000,
        Size::Tiny => 20_000,
    };
    list.push(overhead(
        RECURSIONS[0],
        "MTSS without overflow: Deep Summation (a check at every call)",
        "the MTSS seed, section 6 (recursion runs a check at every call: automotive's bitcnt, 5.43%)",
        thesis("summation_single.cm"),
        vec![point(n as f64, vec![n.to_string()], 1, Some(n as f64))],
        MainStack::Unlimited,
        vec![format!("n = {n}; mtss's main stack: 30 GiB of the region (i686: 1900 MiB of a 2 GiB region) for `ulimit -s unlimited`")],
    ));
    list.last_mut().expect("pushed").x_label = "n (recursion depth)";
    let (balanced, branch): (u64, u64) = match size {
        Size::Full => (1_048_575, 1_000_000),
        Size::Quick => (65_535, 100_000),
        Size::Tiny => (1_023, 2_000),
    };
    list.push(overhead(
        RECURSIONS[1],
        "MTSS without overflow: Unbalanced Binary Tree, single-threaded",
        "the MTSS seed, section 6 (recursion runs a check at every call)",
        thesis("tree_single.cm"),
        vec![point(
            40.0,
            vec![
                balanced.to_string(),
                branch.to_string(),
                "0.3".into(),
                "40".into(),
            ],
            1,
            None,
        )],
        MainStack::Unlimited,
        vec![format!(
            "tree: {balanced} balanced nodes and a {branch}-node branch, 40 searches (30% spikes)"
        )],
    ));
    list.last_mut().expect("pushed").x_label = "searches (30% spikes)";
    // The check alone: a recursion that fits in the caches, repeated (no stack growth after the
    // first repetition, which Summation's and Tree's first descent pay in page faults).
    let calls: u64 = match size {
        Size::Full => 200_000_000,
        Size::Quick => 40_000_000,
        Size::Tiny => 400_000,
    };
    let reps = calls / 4096;
    let mut e = overhead(
        RECURSIONS[2],
        "MTSS without overflow: a 4096-deep recursion repeated (the entry check alone)",
        "the MTSS seed, table 2 (the check at every procedure's entry)",
        root.join("crates/bench/programs/deep_repeat.cm"),
        vec![point(
            4096.0,
            vec!["4096".into(), reps.to_string()],
            1,
            Some((reps * 4096) as f64),
        )],
        MainStack::Unlimited,
        vec![format!(
            "{} calls: a 4096-deep recursion repeated {reps} times",
            reps * 4096
        )],
    );
    e.x_label = "recursion depth";
    e.shape = Shape::PerUnit;
    list.push(e);
    let plan = share_plan(size);
    let mut share = overhead(
        SHARE,
        "MTSS: Maximum Satisfiable Overflow and Proportional Reduction Satisfiability",
        "the MTSS seed, figures 6 (MSO per task: 47% on average), 7 (PRS per workload: 18% on average) and 8 (MSO against the page size, network workload)",
        root.join("tests/programs/mibench_{auto,net,sec}.cm"),
        Vec::new(),
        MainStack::KiB(8 * 1024),
        share_reductions(&plan),
    );
    share.mechanisms = Mechanisms::Listed(&[]);
    share.x_label = "-";
    list.push(share);
    let pairs: u64 = match size {
        Size::Full => 2_000_000,
        Size::Quick => 300_000,
        Size::Tiny => 20_000,
    };
    let mut ovf = overhead(
        OVERFLOW,
        "MTSS: cost of the worst single overflow and its return",
        "the MTSS seed, figure 9 (real-time bound: every page overflowing costs 11% of run time on average)",
        root.join("crates/bench/programs/mtss_overflow.cm"),
        vec![
            point(0.0, vec![pairs.to_string(), "0".into()], 2, Some(pairs as f64)),
            point(1.0, vec![pairs.to_string(), DEFAULT_PAGE.to_string()], 2, Some(pairs as f64)),
        ],
        MainStack::KiB(8 * 1024),
        vec![format!("{pairs} calls per run; x = 0: the default 8 MiB stack (no overflow), x = 1: a one-page stack (every call overflows into two pages of main's stack)")],
    );
    ovf.x_label = "0 = no overflow, 1 = every call overflows";
    ovf.sources.cmm_options = vec!["--chunk-size".into(), DEFAULT_PAGE.to_string()];
    ovf.mechanisms = Mechanisms::Listed(&["mtss"]);
    ovf.shape = Shape::HotSplit;
    ovf.baseline = "mtss";
    ovf.unit = "overflow and return";
    list.push(ovf);
    list
}

fn share_reductions(plan: &SharePlan) -> Vec<String> {
    let mut r = vec![
        "every run at the workload's default (`// args:`) scale, the MiBench small inputs' role: a bisection takes dozens of runs".to_string(),
        format!("a run passes when it exits 0 and prints what the run with default stacks printed; a size completes when {} in a row pass (with overflow, completing can depend on which threads have ended when one overflows); bisection to one page (assumes monotony: the paper lowered the stack step by step instead)", match plan.repeats { 1 => "one run".to_string(), n => format!("{n} runs") }),
        "P (need) of a task: its least stack with no overflow, the other tasks on 8 MiB; main's likewise through STACKRT_MTSS_MAIN_STACK (main parks in sthread_join and lends its free space like a task)".to_string(),
        "S of a task: its least stack that completes, the others (and main) on their P; MSO = 1 - S/P. PRS = 1 - f, f the least common factor of every P (tasks and main) that completes".to_string(),
    ];
    if plan.workloads.len() < WORKLOADS.len() {
        r.push(format!(
            "workloads: {} only (the full run: all three)",
            plan.workloads
                .iter()
                .map(|w| w.domain)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if plan.x86_64_only {
        r.push("x86-64 only (the full run: both targets)".into());
    }
    if plan.repeats == 1 {
        r.push("one run per size (the full run: two in a row)".into());
    }
    if plan.pages.len() == 1 {
        r.push(format!(
            "page {} bytes only (the full run: 32-512)",
            plan.pages[0]
        ));
    }
    r
}

// ----------------------------------------------------------------------------------- report

/// Why MSO comes out as it does here (printed under the MSO table).
const LENDERS: &str = "Who lends here: `mtss` lends only the free space of threads parked in \
sthread_join or a contended mutex (main, in these workloads), of threads running on other \
threads' pages, and of ended threads' stacks while pages are lent from them (an ended stack \
with nothing lent is freed at once, and is no donor after that). A running task never lends: \
its stack pointer is not known to the others. The paper's tasks lend their free space \
whenever they are preempted, and their stacks stay allocated after they end. So with main at \
its need, a task that overflows can borrow only what main leaves free below its floor, and \
MSO measures that; with main on 8 MiB, what a parked donor with room lets a task recover \
(bounded by its largest frame, which must fit in contiguous pages).";

/// The mean of values that must all be there.
fn mean(values: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    let all: Vec<f64> = values.collect::<Option<Vec<f64>>>()?;
    (!all.is_empty()).then(|| all.iter().sum::<f64>() / all.len() as f64)
}

fn percent(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{:.0}%", v * 100.0))
}

fn bytes(v: Option<u64>) -> String {
    v.map_or("-".into(), |b| b.to_string())
}

/// Pthreads give a thread at least 16 KiB, in whole 4 KiB pages (glibc's PTHREAD_STACK_MIN).
fn pthread_stack(s: u64) -> u64 {
    s.div_ceil(4096).max(4) * 4096
}

/// The `mtss_share` section's tables.
pub fn write_tables(out: &mut String, results: &Results) {
    if results.mtss.is_empty() {
        return;
    }
    for &target in &Target::ALL {
        let shares: Vec<&Share> = results.mtss.iter().filter(|s| s.target == target).collect();
        if shares.is_empty() {
            continue;
        }
        let _ = writeln!(
            out,
            "\n{target}, page {DEFAULT_PAGE} bytes: P = a task's least stack with no overflow, S = its least stack that completes while the others (and main) have their P, MSO = 1 - S/P (bytes; the paper: MSO {:.0}% per task on average, 0% to 100%; * = S failed once when run again). The last two columns give main its default 8 MiB instead of its P.\n",
            PAPER_MSO * 100.0
        );
        let _ = writeln!(
            out,
            "| workload | task | P | S | MSO | S, main on 8 MiB | MSO, main on 8 MiB |\n|---|---|---:|---:|---:|---:|---:|"
        );
        for s in &shares {
            let Some(ps) = s.page(DEFAULT_PAGE) else {
                continue;
            };
            for (i, name) in s.tasks.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "| {} | {i} {name} | {} | {}{} | {} | {} | {} |",
                    s.workload.domain,
                    bytes(ps.need.get(i).copied().flatten()),
                    bytes(ps.least.get(i).copied().flatten()),
                    if ps.unstable.contains(&i) { "*" } else { "" },
                    percent(ps.mso(i)),
                    bytes(ps.least_main_free.get(i).copied().flatten()),
                    percent(ps.mso_main_free(i))
                );
            }
            let _ = writeln!(
                out,
                "| {} | main (parked in sthread_join) | {} | - | - | | |",
                s.workload.domain,
                bytes(ps.main_need)
            );
            let _ = writeln!(
                out,
                "| {} | **mean over the tasks** | | | **{}** | | {} |",
                s.workload.domain,
                percent(ps.mean_mso()),
                percent(mean((0..s.tasks.len()).map(|i| ps.mso_main_free(i))))
            );
        }
        let _ = writeln!(out, "\n{LENDERS}");
        let _ = writeln!(
            out,
            "\n{target}: PRS = 1 - (bytes at f) / (bytes at P), f the least factor with which every stack (tasks and main) at f x P, rounded up to a page, completes (the paper: {:.0}% per workload on average); at that budget `traditional` and `lookahead` run with the same stack arguments (main: the default 8 MiB; pthreads round a thread's stack up to 16 KiB and whole 4 KiB pages, so `traditional` had the larger budget in the last column).\n",
            PAPER_PRS * 100.0
        );
        let _ = writeln!(
            out,
            "| workload | PRS | budget bytes (tasks + main) | mtss: overflows, peak RSS MiB | traditional | lookahead: peak RSS MiB | traditional's budget (pthreads) | runs, time |\n|---|---:|---:|---|---|---|---:|---|"
        );
        for s in &shares {
            let Some(p) = &s.prs else {
                let _ = writeln!(
                    out,
                    "| {} | - | | | | | | {} runs, {:.0} s |",
                    s.workload.domain, s.runs, s.seconds
                );
                continue;
            };
            let peer = |m: &str| p.peers.iter().find(|r| r.mech == m);
            let trad = peer("traditional").map_or("-".into(), |r| {
                if r.completed {
                    "completed".to_string()
                } else {
                    format!("failed: {}", r.ending)
                }
            });
            let look = peer("lookahead").map_or("-".into(), |r| {
                if r.completed {
                    format!("completed, {:.1}", r.rss_kib as f64 / 1024.0)
                } else {
                    format!("failed: {}", r.ending)
                }
            });
            let pthread_budget: u64 = p.stacks.iter().map(|&b| pthread_stack(b)).sum();
            let at = match &p.again {
                None => format!(
                    "{}, {:.1}",
                    p.overflows.map_or("-".into(), |o| o.to_string()),
                    p.rss_kib as f64 / 1024.0
                ),
                Some(how) => format!("failed when run again: {how}"),
            };
            let _ = writeln!(
                out,
                "| {} | {:.1}% (f = {}/{}) | {} of {} | {at} | {trad} | {look} | {pthread_budget} + 8 MiB | {} runs, {:.0} s |",
                s.workload.domain,
                p.prs() * 100.0,
                p.n,
                p.of,
                p.budget(),
                p.full,
                s.runs,
                s.seconds
            );
        }
        let pages: Vec<u64> = {
            let mut v: Vec<u64> = shares
                .iter()
                .flat_map(|s| s.pages.iter().map(|p| p.page))
                .collect();
            v.sort();
            v.dedup();
            v
        };
        if pages.len() > 1 {
            let _ = writeln!(
                out,
                "\n{target}: MSO against the page size (`--chunk-size`; P and S found again at each page), per task and averaged (the paper's figure 8, network: MSO falls as the page grows, except treeadd's small frames at 32-64 bytes).\n"
            );
            let head: Vec<String> = pages.iter().map(|p| format!("{p} B")).collect();
            let _ = writeln!(
                out,
                "| workload | task | {} |\n|---|---|{}",
                head.join(" | "),
                "---:|".repeat(pages.len())
            );
            for s in &shares {
                // One row per task, then their mean (`None`).
                let mut rows: Vec<(String, Option<usize>)> = s
                    .tasks
                    .iter()
                    .enumerate()
                    .map(|(i, n)| (format!("{i} {n}"), Some(i)))
                    .collect();
                rows.push(("**mean**".into(), None));
                for (name, task) in rows {
                    let cells: Vec<String> = pages
                        .iter()
                        .map(|&pg| {
                            let p = s.page(pg);
                            percent(match task {
                                Some(i) => p.and_then(|p| p.mso(i)),
                                None => p.and_then(PageShare::mean_mso),
                            })
                        })
                        .collect();
                    let _ = writeln!(
                        out,
                        "| {} | {name} | {} |",
                        s.workload.domain,
                        cells.join(" | ")
                    );
                }
            }
        }
    }
}

// --------------------------------------------------------------------------------- findings

type Measured = Option<(f64, Option<f64>, String)>;

/// The largest mtss / traditional time (means; minimums as the robust value) among
/// `experiments`, or "overflowed" when a verification run of mtss overflowed.
fn worst_overhead(table: &Table, t: Target, experiments: &[&str]) -> Measured {
    let mut worst: Option<(f64, f64)> = None;
    let mut parts = Vec::new();
    for e in experiments {
        let Some(&x) = xs(table, e).last() else {
            continue;
        };
        let (Some(m), Some(b)) = (
            cell(table, e, t, "mtss", x),
            cell(table, e, t, "traditional", x),
        ) else {
            continue;
        };
        let overflows = m.stats.get("overflows").copied().unwrap_or(0.0);
        if overflows > 0.0 {
            return Some((
                f64::INFINITY,
                None,
                format!("{e}: mtss overflowed {overflows:.0} times"),
            ));
        }
        let (r, by_min) = (m.time.mean / b.time.mean, m.time.min / b.time.min);
        // mtss's calls are callee-cleanup's: against it, the check alone.
        let check = cell(table, e, t, "callee-cleanup", x).map_or(String::new(), |c| {
            format!(
                ", {:+.1}% vs callee-cleanup",
                (m.time.mean / c.time.mean - 1.0) * 100.0
            )
        });
        let paper = WORKLOADS
            .iter()
            .find(|w| overhead_name(w) == *e)
            .map_or(String::new(), |w| {
                format!(", paper {:+.2}%", w.paper_overhead)
            });
        parts.push(format!(
            "{} {:+.1}% (by minimum {:+.1}%{check}{paper})",
            e.trim_start_matches("mtss_overhead_"),
            (r - 1.0) * 100.0,
            (by_min - 1.0) * 100.0
        ));
        if worst.is_none_or(|w| r > w.0) {
            worst = Some((r, by_min));
        }
    }
    let (r, by_min) = worst?;
    Some((r, Some(by_min), parts.join("; ")))
}

fn shares_of(results: &Results, t: Target) -> Vec<&Share> {
    results.mtss.iter().filter(|s| s.target == t).collect()
}

/// Tasks and workloads without an MSO or PRS (0: all found), with the figures.
fn mso_prs_found(results: &Results, t: Target) -> Measured {
    let shares = shares_of(results, t);
    if shares.is_empty() {
        return None;
    }
    let mut missing = 0;
    let mut parts = Vec::new();
    for s in &shares {
        let ps = s.page(DEFAULT_PAGE);
        let mso = ps.and_then(PageShare::mean_mso);
        let free = ps.and_then(|p| mean((0..s.tasks.len()).map(|i| p.mso_main_free(i))));
        let prs = s.prs.as_ref().map(Prs::prs);
        missing += usize::from(mso.is_none()) + usize::from(prs.is_none());
        parts.push(format!(
            "{} MSO {} (main on 8 MiB: {}) PRS {}",
            s.workload.key,
            percent(mso),
            percent(free),
            percent(prs)
        ));
    }
    Some((missing as f64, None, parts.join("; ")))
}

/// Workloads where `traditional` completed at the PRS budget (0: it failed on every one).
fn traditional_completed(results: &Results, t: Target) -> Measured {
    let shares: Vec<&Share> = shares_of(results, t)
        .into_iter()
        .filter(|s| s.prs.is_some())
        .collect();
    if shares.is_empty() {
        return None;
    }
    let mut completed = 0;
    let mut parts = Vec::new();
    for s in &shares {
        let p = s.prs.as_ref().expect("filtered");
        let Some(r) = p.peers.iter().find(|r| r.mech == "traditional") else {
            continue;
        };
        completed += usize::from(r.completed);
        let word = if r.completed { "completed" } else { "failed" };
        parts.push(format!("{}: {word}", s.workload.key));
    }
    Some((completed as f64, None, parts.join(", ")))
}

/// Mean MSO at the largest page / at the smallest, over the workloads measured at both.
fn page_trend(results: &Results, t: Target) -> Measured {
    let shares = shares_of(results, t);
    let (mut small, mut large, mut parts) = (Vec::new(), Vec::new(), Vec::new());
    for s in &shares {
        let (Some(a), Some(b)) = (s.pages.first(), s.pages.last()) else {
            continue;
        };
        if a.page == b.page {
            continue;
        }
        let (Some(ma), Some(mb)) = (a.mean_mso(), b.mean_mso()) else {
            continue;
        };
        small.push(ma);
        large.push(mb);
        parts.push(format!(
            "{} {} -> {}",
            s.workload.key,
            percent(Some(ma)),
            percent(Some(mb))
        ));
    }
    if small.is_empty() {
        return None;
    }
    let (a, b) = (small.iter().sum::<f64>(), large.iter().sum::<f64>());
    Some((
        b - a,
        None,
        format!(
            "mean MSO at the smallest -> largest page: {}",
            parts.join("; ")
        ),
    ))
}

/// The MTSS rows of the findings table (`findings::findings` appends them).
pub(crate) fn findings() -> Vec<crate::findings::Finding> {
    use crate::findings::Finding;
    vec![
        Finding {
            plot: "mtss_overhead_auto-ratio",
            source: "the MTSS seed, table 2",
            claim: "MTSS costs at most 2% over Traditional when no stack overflows (each workload)",
            thesis: "run-time increase 1.84% on average, 5.43% at worst (automotive)",
            measure: |_, t, tg| worst_overhead(t, tg, &["mtss_overhead_auto", "mtss_overhead_net", "mtss_overhead_sec"]),
            holds: |r| r <= 1.02,
            changed_because: "",
        },
        Finding {
            plot: "mtss_overhead_tree-ratio",
            source: "the MTSS seed, section 6",
            claim: "... and at most 5% on Summation and Tree (recursion: a check at every call; also a 4096-deep recursion repeated, the check alone)",
            thesis: "bitcnt's small recursive functions made automotive the worst, 5.43%",
            measure: |_, t, tg| worst_overhead(t, tg, &RECURSIONS),
            holds: |r| r <= 1.05,
            changed_because: "",
        },
        Finding {
            plot: "-",
            source: "the MTSS seed, figures 6, 7",
            claim: "MSO and PRS are found for every task and workload (value: how many were not)",
            thesis: "MSO 47% per task on average (0% to 100%), PRS 18% per workload on average",
            measure: |r, _, tg| mso_prs_found(r, tg),
            holds: |n| n == 0.0,
            changed_because: "",
        },
        Finding {
            plot: "-",
            source: "the MTSS seed, figure 8",
            claim: "MSO falls as the page grows from 32 to 512 bytes",
            thesis: "network workload: MSO decreases with the page size (treeadd: less at 32-64 bytes)",
            measure: |r, _, tg| page_trend(r, tg),
            // Strictly: an MSO that is nil at every page does not fall.
            holds: |d| d < 0.0,
            changed_because: "with every stack at its need nothing here has free space to lend at any page: only main, parked in sthread_join, lends, and an ended thread's stack is freed at once (see mtss_share, \"Who lends here\")",
        },
        Finding {
            plot: "-",
            source: "the MTSS seed, sections 1, 6",
            claim: "At the PRS budget Traditional crashes where MTSS completes (value: workloads where it completed)",
            thesis: "MTSS recovers from overflows a fixed stack cannot survive",
            measure: |r, _, tg| traditional_completed(r, tg),
            holds: |n| n == 0.0,
            changed_because: "pthreads give every thread at least 16 KiB (PTHREAD_STACK_MIN), more than these tasks' budgets: traditional ran on more stack than mtss",
        },
    ]
}

/// Rows of the findings table with a figure but no verdict ("measured").
pub struct MeasuredRow {
    pub claim: &'static str,
    pub source: &'static str,
    pub paper: &'static str,
    /// i686, x86-64.
    pub ours: [Option<String>; 2],
    pub plot: &'static str,
}

/// The cost of the worst single overflow, and lookahead's memory at the PRS budget.
pub fn measured_rows(results: &Results, table: &Table) -> Vec<MeasuredRow> {
    let pairs = results
        .experiments
        .iter()
        .find(|e| e.name == OVERFLOW)
        .and_then(|e| e.points.first()?.work);
    let ns = |t: Target| {
        let (a, b) = (
            cell(table, OVERFLOW, t, "mtss", 0.0)?,
            cell(table, OVERFLOW, t, "mtss", 1.0)?,
        );
        let pairs = pairs?;
        let overflows = b.stats.get("overflows").copied().unwrap_or(f64::NAN);
        Some(format!(
            "{:.0} ns per overflow and return ({overflows:.0} overflows in {pairs:.0} calls)",
            (b.time.median - a.time.median) / pairs * 1e9
        ))
    };
    let memory = |t: Target| {
        let parts: Vec<String> = shares_of(results, t)
            .iter()
            .filter_map(|s| {
                let p = s.prs.as_ref()?;
                let look = p
                    .peers
                    .iter()
                    .find(|r| r.mech == "lookahead" && r.completed)?;
                Some(format!(
                    "{}: lookahead {:.1} vs mtss {:.1} MiB",
                    s.workload.key,
                    look.rss_kib as f64 / 1024.0,
                    p.rss_kib as f64 / 1024.0
                ))
            })
            .collect();
        (!parts.is_empty()).then(|| parts.join("; "))
    };
    vec![
        MeasuredRow {
            claim: "Cost of the worst single overflow: a call whose frame takes two pages of a parked thread's stack, and its return",
            source: "the MTSS seed, figure 9",
            paper: "every page overflowing bounds the run time at +11% on average",
            ours: [ns(Target::I686), ns(Target::X86_64)],
            plot: "mtss_overflow-time",
        },
        MeasuredRow {
            claim: "Look-Ahead completes at the PRS budget too, allocating its chunks: peak RSS beside MTSS's",
            source: "this project",
            paper: "(the paper compares with no growing stack)",
            ours: [memory(Target::I686), memory(Target::X86_64)],
            plot: "-",
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mtss_statistics_line_is_parsed_and_the_out_of_room_line_is_not() {
        let mut stats = BTreeMap::new();
        assert!(parse_stats_line(
            "stackrt: mtss: region 68719476736 bytes, page 128 bytes, 1203 overflows, 30 pages lent at most, 8392704 bytes of native stacks at most",
            &mut stats
        ));
        assert_eq!(stats["overflows"], 1203);
        assert_eq!(stats["mtss_region_bytes"], 68719476736);
        assert_eq!(stats["mtss_page_bytes"], 128);
        assert_eq!(stats["mtss_pages_lent_at_most"], 30);
        assert_eq!(stats["mtss_bytes_of_native_stacks_at_most"], 8392704);
        let mut none = BTreeMap::new();
        assert!(!parse_stats_line(
            "stackrt: mtss: thread 3 overflowed its stack and no thread has 256 contiguous bytes free to lend (give the threads larger stacks, or smaller pages: --chunk-size)",
            &mut none
        ));
        assert!(none.is_empty());
        // Through the harness's parser: statistics, not an error message.
        let (stats, tail) = crate::run::parse_stats(
            "stackrt: mtss: region 1073741824 bytes, page 64 bytes, 0 overflows, 0 pages lent at most, 16777216 bytes of native stacks at most\n",
        );
        assert_eq!(stats["overflows"], 0);
        assert!(tail.is_empty());
    }

    #[test]
    fn workload_arguments_and_task_names_are_read_back() {
        let (small, big) = program_args("// args: 1\n// args[big]: 40 0\nint main() {}\n");
        assert_eq!(small, Some(vec!["1".to_string()]));
        assert_eq!(big, Some(vec!["40".to_string(), "0".to_string()]));
        assert_eq!(program_args("int x;\n"), (None, None));
        let out = "mibench network, scale 1\ntask 0 dijkstra: 5 (recursion 3 levels)\n\
                   task 1 patricia: 7 (recursion 9 levels)\ntotal: 12\n";
        assert_eq!(share::task_names(out), ["dijkstra", "patricia"]);
    }

    #[test]
    fn mtss_main_gets_the_stack_the_others_get() {
        let v = |mech: &str, target| Variant {
            target,
            tool: Toolchain::Cmm {
                mech: mech.into(),
                green: false,
            },
        };
        // Under a finite limit main follows it by itself.
        assert!(main_stack_env(&v("mtss", Target::X86_64), MainStack::KiB(8192), &[]).is_empty());
        let env = main_stack_env(&v("mtss", Target::X86_64), MainStack::Unlimited, &[]);
        assert_eq!(
            env,
            [("STACKRT_MTSS_MAIN_STACK".to_string(), "30G".to_string())]
        );
        let i686 = main_stack_env(&v("mtss", Target::I686), MainStack::Unlimited, &[]);
        assert_eq!(i686.len(), 2);
        assert!(
            main_stack_env(&v("lookahead", Target::X86_64), MainStack::Unlimited, &[]).is_empty()
        );
        let given = [("STACKRT_MTSS_MAIN_STACK".to_string(), "1M".to_string())];
        assert!(
            main_stack_env(&v("mtss", Target::X86_64), MainStack::Unlimited, &given).is_empty()
        );
    }

    #[test]
    fn the_quick_plan_is_a_reduction_of_the_full_one() {
        let (full, quick) = (share_plan(Size::Full), share_plan(Size::Quick));
        assert_eq!(full.workloads.len(), 3);
        assert!(full.pages.contains(&DEFAULT_PAGE) && quick.pages == [DEFAULT_PAGE]);
        assert!(share_reductions(&quick).len() > share_reductions(&full).len());
    }
}
