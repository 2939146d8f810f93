//! The MTSS seed's report: the tables of the MSO/PRS step and the findings rows of every MTSS
//! experiment (`crate::mtss` defines the experiments; this file reads their results, so the
//! harness, which runs them, never depends on it).

use crate::build::Target;
use crate::findings::{Measured, MeasuredRow};
use crate::harness::Results;
use crate::mtss::{
    overhead_name, PageShare, Prs, Share, DEFAULT_PAGE, LENDERS, OVERFLOW, PAPER_MSO, PAPER_PRS,
    RECURSIONS, WORKLOADS,
};
use crate::table::{cell, xs, Table};
use std::fmt::Write as _;

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
pub fn findings() -> Vec<crate::findings::Finding> {
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
            changed_because: "the donors here are few (main, parked in sthread_join, below its floor, and the tasks that ended), so whether a larger page still fits in what they leave depends on when the tasks end (see mtss_share, \"Who lends here\")",
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
