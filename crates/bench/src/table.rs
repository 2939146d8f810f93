//! The measurements aggregated per cell (experiment, target, variant, x): the summaries the
//! report's tables, the findings and the plots are all computed from.

use crate::build::Target;
use crate::harness::{Record, Results};
use crate::stats::{ratio_ci, summarize, RatioCi, Summary};
use std::collections::{BTreeMap, BTreeSet};

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

/// The time of `variant` relative to `baseline` at one point: the geometric mean of the ratios
/// of runs made in the same round, with its 95% confidence interval.
pub fn ratio_to(
    table: &Table,
    e: &str,
    t: Target,
    variant: &str,
    baseline: &str,
    x: f64,
) -> Option<RatioCi> {
    let (c, b) = (
        cell(table, e, t, variant, x)?,
        cell(table, e, t, baseline, x)?,
    );
    let (a, b): (Vec<f64>, Vec<f64>) = c
        .by_round
        .iter()
        .filter_map(|(round, s)| Some((*s, *b.by_round.get(round)?)))
        .unzip();
    ratio_ci(&a, &b)
}
