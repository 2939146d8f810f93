//! The MTSS seed's MSO/PRS step (`mtss_share`, sections 5-6, figures 6-8): per workload and
//! target, each task's need and least stack found by bisection over stack sizes, the workload's
//! PRS, MSO at every page size, and `traditional` and `lookahead` at the PRS budget.

use super::{program_args, share_plan, Workload, DEFAULT_PAGE, SHARE};
use crate::build::{Builder, Sources, Target, Toolchain, Variant};
use crate::experiments::Size;
use crate::note::{Note, NoteKind};
use crate::run::{Invocation, MainStack, Outcome, Runner};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

// ------------------------------------------------------------------------------- bisection

/// The least multiple of `step` in (`fails`, `passes`] for which `works` holds, `passes` known
/// to work and `fails` known (or taken) to fail; both multiples of `step`. Bisection: `works` is
/// taken to be monotone. `fails` and `passes` themselves are never tried.
pub fn least_between(
    fails: u64,
    passes: u64,
    step: u64,
    mut works: impl FnMut(u64) -> bool,
) -> u64 {
    let (mut lo, mut hi) = (fails, passes);
    while hi - lo > step {
        let mid = lo + (hi - lo) / step / 2 * step;
        if works(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    hi
}

/// The least multiple of `step` (at least `step`) up to `max` for which `works` holds: doubling
/// from `start`, then [`least_between`]; `None` when `max` fails too.
pub fn least_up_to(
    start: u64,
    max: u64,
    step: u64,
    mut works: impl FnMut(u64) -> bool,
) -> Option<u64> {
    let mut lo = 0;
    let mut hi = start.div_ceil(step).max(1) * step;
    while !works(hi) {
        if hi >= max {
            return None;
        }
        lo = hi;
        hi = (hi * 2).min(max).div_ceil(step) * step;
    }
    Some(least_between(lo, hi, step, works))
}

/// Where the need at page `page` lies, knowing the need `need` found to a resolution of `step`
/// (the true need is in (need - step, need]): (a size that fails, one that works), multiples of
/// `page`.
pub fn need_bounds(need: u64, step: u64, page: u64) -> (u64, u64) {
    (
        need.saturating_sub(step) / page * page,
        need.div_ceil(page) * page,
    )
}

/// Every stack at `n / of` of its need, rounded up to the page (at least a page).
pub fn scaled(needs: &[u64], n: u64, of: u64, page: u64) -> Vec<u64> {
    needs
        .iter()
        .map(|&p| ((p * n).div_ceil(of).div_ceil(page) * page).max(page))
        .collect()
}

/// The task names of a workload's output ("task K NAME: ..." lines, in order).
pub fn task_names(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter_map(|l| {
            let mut words = l.strip_prefix("task ")?.split_whitespace();
            words.next()?.parse::<u32>().ok()?;
            Some(words.next()?.trim_end_matches(':').to_string())
        })
        .collect()
}

// ------------------------------------------------------------------------ the MSO/PRS step

/// One page size's sizes of one workload (bytes; `None`: not found).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct PageShare {
    pub page: u64,
    /// P: each task's least stack with no overflow.
    pub need: Vec<Option<u64>>,
    pub main_need: Option<u64>,
    /// S: each task's least stack that completes, the others on their P.
    pub least: Vec<Option<u64>>,
    /// Tasks whose S failed once when tried again (the runs differ in timing).
    pub unstable: Vec<usize>,
    /// S with main on its default 8 MiB instead of its need (the default page only): what a
    /// parked thread with room lets a task recover.
    pub least_main_free: Vec<Option<u64>>,
}

impl PageShare {
    pub fn mso(&self, k: usize) -> Option<f64> {
        mso_of(self.need.get(k).copied()?, self.least.get(k).copied()?)
    }

    /// MSO from [`PageShare::least_main_free`].
    pub fn mso_main_free(&self, k: usize) -> Option<f64> {
        mso_of(
            self.need.get(k).copied()?,
            self.least_main_free.get(k).copied()?,
        )
    }

    /// MSO averaged over the tasks (all must have one).
    pub fn mean_mso(&self) -> Option<f64> {
        let all: Option<Vec<f64>> = (0..self.need.len()).map(|k| self.mso(k)).collect();
        let all = all?;
        (!all.is_empty()).then(|| all.iter().sum::<f64>() / all.len() as f64)
    }
}

/// `needs` with task `i`'s replaced by `s`.
fn tasks_at(needs: &[u64], i: usize, s: u64) -> Vec<u64> {
    let mut tasks = needs.to_vec();
    tasks[i] = s;
    tasks
}

fn mso_of(need: Option<u64>, least: Option<u64>) -> Option<f64> {
    Some(1.0 - least? as f64 / need? as f64)
}

/// The PRS of a workload (at the default page) and the runs at its budget.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Prs {
    /// f = n / of.
    pub n: u64,
    pub of: u64,
    /// The tasks' stacks and main's at f.
    pub stacks: Vec<u64>,
    pub main: u64,
    /// Every need (P) summed, tasks and main: the budget at f = 1.
    pub full: u64,
    pub overflows: Option<u64>,
    pub rss_kib: u64,
    /// How the run at the budget ended when run once more, if it failed then.
    pub again: Option<String>,
    /// `traditional` and `lookahead` with the same stack arguments.
    pub peers: Vec<PeerRun>,
}

impl Prs {
    /// From the bytes given, not f: stacks of a few pages round up to their need at f near 1.
    pub fn prs(&self) -> f64 {
        1.0 - self.budget() as f64 / self.full as f64
    }

    pub fn budget(&self) -> u64 {
        self.stacks.iter().sum::<u64>() + self.main
    }
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct PeerRun {
    pub mech: String,
    pub completed: bool,
    /// How it ended (exit status or signal, the last line of its stderr).
    pub ending: String,
    pub rss_kib: u64,
}

/// One workload on one target.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Share {
    #[serde(with = "super::workload_key")]
    pub workload: Workload,
    pub target: Target,
    pub args: Vec<String>,
    pub tasks: Vec<String>,
    pub pages: Vec<PageShare>,
    pub prs: Option<Prs>,
    pub problems: Vec<String>,
    pub runs: usize,
    #[serde(with = "crate::persist::maybe_nan")]
    pub seconds: f64,
}

impl Share {
    pub fn page(&self, page: u64) -> Option<&PageShare> {
        self.pages.iter().find(|p| p.page == page)
    }
}

/// What the step needs from the harness.
pub struct Context<'a> {
    pub root: &'a Path,
    pub cmm: &'a Path,
    pub scratch: &'a Path,
    pub runner: &'a Runner,
    pub size: Size,
    pub targets: &'a [Target],
    pub show: &'a mut dyn FnMut(&str),
}

/// Runs one workload executable and checks it against the reference output.
struct Lab<'a> {
    runner: &'a Runner,
    /// Runs a size must pass to count as completing (S and PRS).
    repeats: usize,
    stdout: PathBuf,
    runs: usize,
    what: String,
    show: &'a mut dyn FnMut(&str),
}

/// One run's verdict.
struct Trial {
    passed: bool,
    overflows: Option<u64>,
    outcome: Outcome,
    printed: String,
}

impl Lab<'_> {
    fn run(
        &mut self,
        exe: &Path,
        args: Vec<String>,
        env: Vec<(String, String)>,
        reference: Option<&str>,
    ) -> Trial {
        self.runs += 1;
        (self.show)(&format!("{SHARE}: {} (run {})", self.what, self.runs));
        let _ = std::fs::remove_file(&self.stdout);
        let mut env = env;
        env.push(("STACKRT_STATS".into(), "1".into()));
        let outcome = self.runner.run(&Invocation {
            exe: exe.to_path_buf(),
            args,
            env,
            main_stack: MainStack::KiB(8 * 1024),
            timeout: Duration::from_secs(60),
            stdout: Some(self.stdout.clone()),
        });
        let printed = std::fs::read_to_string(&self.stdout).unwrap_or_default();
        Trial {
            passed: outcome.ending.ok() && reference.is_none_or(|r| r == printed),
            overflows: outcome.stats.get("overflows").copied(),
            outcome,
            printed,
        }
    }

    /// The workload with these task stacks (0: the default) and main's (`None`: the default).
    fn workload(
        &mut self,
        exe: &Path,
        scale: &[String],
        tasks: &[u64],
        main: Option<u64>,
        reference: &str,
    ) -> Trial {
        let mut args = scale.to_vec();
        args.extend(tasks.iter().map(u64::to_string));
        let env = main.map_or(Vec::new(), |m| {
            vec![("STACKRT_MTSS_MAIN_STACK".into(), m.to_string())]
        });
        self.run(exe, args, env, Some(reference))
    }

    /// Whether the workload passes [`Lab::repeats`] runs in a row: with overflow, completing
    /// can depend on which threads have ended (or parked) when one overflows.
    fn completes(
        &mut self,
        exe: &Path,
        scale: &[String],
        tasks: &[u64],
        main: Option<u64>,
        reference: &str,
    ) -> bool {
        (0..self.repeats).all(|_| self.workload(exe, scale, tasks, main, reference).passed)
    }
}

/// Largest stack the need searches try (the default thread stack is 8 MiB).
const MOST_NEED: u64 = 64 << 20;

/// Runs the MSO/PRS step: every planned workload on every planned target.
pub fn measure(cx: Context) -> (Vec<Share>, Vec<Note>) {
    let plan = share_plan(cx.size);
    let mut shares = Vec::new();
    let mut notes = Vec::new();
    let mut builders: BTreeMap<u64, Builder> = BTreeMap::new();
    for &target in cx.targets {
        if plan.x86_64_only && target != Target::X86_64 {
            continue;
        }
        for w in &plan.workloads {
            let start = Instant::now();
            let cm = cx.root.join("tests/programs").join(w.file);
            let (scale, _) = program_args(&std::fs::read_to_string(&cm).unwrap_or_default());
            let scale = scale.unwrap_or_else(|| vec!["1".into()]);
            // One builder per page: the builder names an executable by source and variant only.
            let mut exes = BTreeMap::new();
            let mut failed = None;
            for mech in ["mtss", "traditional", "lookahead"] {
                for &page in &plan.pages {
                    if mech != "mtss" && page != DEFAULT_PAGE {
                        continue;
                    }
                    let builder = match builders.entry(page) {
                        std::collections::btree_map::Entry::Occupied(b) => b.into_mut(),
                        std::collections::btree_map::Entry::Vacant(slot) => {
                            match Builder::new(
                                cx.root,
                                cx.cmm,
                                &cx.scratch.join(format!("bin-{SHARE}-{page}")),
                            ) {
                                Ok(b) => slot.insert(b),
                                Err(e) => {
                                    notes.push(note(target, mech, NoteKind::Failed, e));
                                    continue;
                                }
                            }
                        }
                    };
                    let sources = Sources {
                        cm: cm.clone(),
                        go: None,
                        // The peers keep their own chunk sizes (the option is mtss's page).
                        cmm_options: if mech == "mtss" {
                            vec!["--chunk-size".into(), page.to_string()]
                        } else {
                            Vec::new()
                        },
                    };
                    let v = Variant {
                        target,
                        tool: Toolchain::Cmm {
                            mech: mech.into(),
                            green: false,
                        },
                    };
                    match builder.build(&sources, &v) {
                        Ok(exe) => {
                            exes.insert((mech, page), exe);
                        }
                        Err(why) if mech == "mtss" => failed = Some(why),
                        Err(why) => notes.push(note(target, mech, NoteKind::NotAvailable, why)),
                    }
                }
            }
            if let Some(why) = failed {
                notes.push(note(
                    target,
                    "mtss",
                    NoteKind::NotAvailable,
                    format!("{}: {why}", w.file),
                ));
                continue;
            }
            let mut lab = Lab {
                runner: cx.runner,
                repeats: plan.repeats,
                stdout: cx.scratch.join(format!("{SHARE}-stdout.txt")),
                runs: 0,
                what: format!("{} {target}", w.domain),
                show: &mut *cx.show,
            };
            let mut share = Share {
                workload: *w,
                target,
                args: scale.clone(),
                tasks: Vec::new(),
                pages: Vec::new(),
                prs: None,
                problems: Vec::new(),
                runs: 0,
                seconds: 0.0,
            };
            one_workload(&mut lab, &mut share, &plan.pages, &exes);
            share.runs = lab.runs;
            share.seconds = start.elapsed().as_secs_f64();
            for p in &share.problems {
                notes.push(note(
                    target,
                    "mtss",
                    NoteKind::Failed,
                    format!("{}: {p}", w.domain),
                ));
            }
            shares.push(share);
        }
    }
    (shares, notes)
}

fn note(target: Target, variant: &str, kind: NoteKind, text: String) -> Note {
    Note {
        experiment: SHARE,
        target,
        variant: variant.into(),
        x: None,
        kind,
        text,
    }
}

fn one_workload(
    lab: &mut Lab,
    share: &mut Share,
    pages: &[u64],
    exes: &BTreeMap<(&str, u64), PathBuf>,
) {
    let scale = share.args.clone();
    let default_exe = &exes[&("mtss", DEFAULT_PAGE)];
    let first = lab.run(default_exe, scale.clone(), Vec::new(), None);
    if !first.passed || first.overflows != Some(0) {
        share.problems.push(format!(
            "the run with default stacks did not complete without overflow: {} {:?} overflows {}",
            first.outcome.ending.describe(),
            first.overflows,
            first.outcome.stderr_tail
        ));
        return;
    }
    let reference = first.printed;
    share.tasks = task_names(&reference);
    let k = share.tasks.len();
    if k == 0 {
        share
            .problems
            .push("the output names no task (\"task K NAME: ...\" lines)".into());
        return;
    }
    // The default page first: the other pages' needs are bounded by its.
    let mut order: Vec<u64> = pages.to_vec();
    order.sort_by_key(|&p| (p != DEFAULT_PAGE, p));
    let mut known: Option<PageShare> = None;
    for page in order {
        let Some(exe) = exes.get(&("mtss", page)) else {
            continue;
        };
        lab.what = format!("{} {} page {page}", share.workload.domain, share.target);
        let ps = one_page(lab, share, exe, page, &reference, known.as_ref(), k);
        if page == DEFAULT_PAGE {
            known = Some(ps.clone());
            share.prs = prs(lab, share, exe, exes, &ps, &reference);
        }
        share.pages.push(ps);
    }
    share.pages.sort_by_key(|p| p.page);
}

/// The needs (P) and least sizes (S) of every task at one page size.
fn one_page(
    lab: &mut Lab,
    share: &mut Share,
    exe: &Path,
    page: u64,
    reference: &str,
    known: Option<&PageShare>,
    k: usize,
) -> PageShare {
    let scale = share.args.clone();
    let mut ps = PageShare {
        page,
        ..PageShare::default()
    };
    // P: no overflow, the others on the default stack. Bounded by the default page's need.
    let need_of = |lab: &mut Lab, who: Option<usize>, hint: Option<u64>| -> Option<u64> {
        let mut works = |s: u64| {
            let mut tasks = vec![0; k];
            let main = match who {
                Some(i) => {
                    tasks[i] = s;
                    None
                }
                None => Some(s),
            };
            let t = lab.workload(exe, &scale, &tasks, main, reference);
            t.passed && t.overflows == Some(0)
        };
        if let Some(h) = hint {
            let (lo, hi) = need_bounds(h, DEFAULT_PAGE, page);
            if works(hi) {
                return Some(least_between(lo, hi, page, works));
            }
        }
        least_up_to(4096, MOST_NEED, page, works)
    };
    for i in 0..k {
        let hint = known.and_then(|p| p.need[i]);
        ps.need.push(need_of(lab, Some(i), hint));
    }
    ps.main_need = need_of(lab, None, known.and_then(|p| p.main_need));
    let (Some(needs), Some(main)) = (
        ps.need.iter().copied().collect::<Option<Vec<u64>>>(),
        ps.main_need,
    ) else {
        share.problems.push(format!(
            "page {page}: a need (P) was not found up to {MOST_NEED} bytes"
        ));
        return ps;
    };
    // Every stack at its need: the paper's starting point (no overflow).
    let all = lab.workload(exe, &scale, &needs, Some(main), reference);
    if !(all.passed && all.overflows == Some(0)) {
        share.problems.push(format!(
            "page {page}: every stack at its need did not complete without overflow ({}, {:?} overflows)",
            all.outcome.ending.describe(),
            all.overflows
        ));
        return ps;
    }
    // Main at its need (the paper's method), then (default page) main on its default stack.
    let mains: &[Option<u64>] = if page == DEFAULT_PAGE {
        &[Some(main), None]
    } else {
        &[Some(main)]
    };
    for &main_stack in mains {
        for i in 0..k {
            let s = least_between(0, needs[i], page, |s| {
                lab.completes(exe, &scale, &tasks_at(&needs, i, s), main_stack, reference)
            });
            if main_stack.is_none() {
                ps.least_main_free.push(Some(s));
                continue;
            }
            // Once more: a pass that depended on the timing of the other tasks shows here.
            if !lab
                .workload(exe, &scale, &tasks_at(&needs, i, s), main_stack, reference)
                .passed
            {
                ps.unstable.push(i);
            }
            ps.least.push(Some(s));
        }
    }
    ps
}

/// PRS at `ps`'s page, then `traditional` and `lookahead` with the same stack arguments.
fn prs(
    lab: &mut Lab,
    share: &mut Share,
    exe: &Path,
    exes: &BTreeMap<(&str, u64), PathBuf>,
    ps: &PageShare,
    reference: &str,
) -> Option<Prs> {
    let scale = share.args.clone();
    let mut all: Vec<u64> = ps.need.iter().copied().collect::<Option<Vec<u64>>>()?;
    all.push(ps.main_need?);
    if ps.least.len() != ps.need.len() {
        return None;
    }
    let page = ps.page;
    let of = all.iter().sum::<u64>().div_ceil(page);
    let k = all.len() - 1;
    let mut works = |n: u64| {
        let s = scaled(&all, n, of, page);
        lab.completes(exe, &scale, &s[..k], Some(s[k]), reference)
    };
    let n = least_between(0, of, 1, &mut works);
    let s = scaled(&all, n, of, page);
    // Once more, for the budget's overflows and memory: whether a run completes can depend
    // on which threads have ended when one overflows.
    let at = lab.workload(exe, &scale, &s[..k], Some(s[k]), reference);
    let mut args = scale.clone();
    args.extend(s[..k].iter().map(u64::to_string));
    let mut peers = Vec::new();
    for mech in ["traditional", "lookahead"] {
        let Some(peer) = exes.get(&(mech, DEFAULT_PAGE)) else {
            continue;
        };
        let t = lab.run(peer, args.clone(), Vec::new(), Some(reference));
        let last = t
            .outcome
            .stderr_tail
            .rsplit(" | ")
            .next()
            .unwrap_or("")
            .to_string();
        peers.push(PeerRun {
            mech: mech.into(),
            completed: t.passed,
            ending: format!("{} {last}", t.outcome.ending.describe())
                .trim()
                .to_string(),
            rss_kib: t.outcome.maxrss_kib,
        });
    }
    Some(Prs {
        n,
        of,
        stacks: s[..k].to_vec(),
        main: s[k],
        full: all.iter().sum(),
        overflows: at.overflows,
        rss_kib: at.outcome.maxrss_kib,
        again: (!at.passed).then(|| {
            format!(
                "{} {}",
                at.outcome.ending.describe(),
                at.outcome.stderr_tail
            )
            .trim()
            .to_string()
        }),
        peers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake workload: passes from `threshold` up, counting its runs.
    fn fake(threshold: u64) -> (impl FnMut(u64) -> bool, std::rc::Rc<std::cell::Cell<usize>>) {
        let runs = std::rc::Rc::new(std::cell::Cell::new(0));
        let seen = runs.clone();
        (
            move |s: u64| {
                seen.set(seen.get() + 1);
                s >= threshold
            },
            runs,
        )
    }

    #[test]
    fn bisection_finds_the_least_passing_page_multiple() {
        for threshold in [1, 127, 128, 129, 1000, 4096, 4097, 70_000] {
            let (works, runs) = fake(threshold);
            let found = least_up_to(4096, MOST_NEED, 128, works).unwrap();
            assert_eq!(
                found,
                threshold.div_ceil(128) * 128,
                "threshold {threshold}"
            );
            assert!(runs.get() <= 20, "{} runs for {threshold}", runs.get());
        }
        let (works, _) = fake(MOST_NEED + 1);
        assert_eq!(least_up_to(4096, MOST_NEED, 128, works), None);
        // Between known bounds only: never tries them.
        let mut tried = Vec::new();
        let found = least_between(0, 1024, 128, |s| {
            tried.push(s);
            s >= 300
        });
        assert_eq!(found, 384);
        assert!(!tried.contains(&0) && !tried.contains(&1024));
        assert_eq!(
            least_between(0, 128, 128, |_| panic!("nothing to try")),
            128
        );
        // PRS: steps of one.
        assert_eq!(least_between(0, 100, 1, |n| n >= 37), 37);
    }

    #[test]
    fn needs_at_other_pages_are_bounded_by_the_default_pages() {
        // The true need lies in (need - 128, need]: at 32 bytes the search is within it.
        assert_eq!(need_bounds(1280, 128, 32), (1152, 1280));
        assert_eq!(need_bounds(1280, 128, 512), (1024, 1536));
        assert_eq!(need_bounds(128, 128, 64), (0, 128));
        for truth in [1153u64, 1200, 1280] {
            let need = truth.div_ceil(128) * 128;
            for page in [32u64, 64, 256, 512] {
                let (lo, hi) = need_bounds(need, 128, page);
                assert!(lo < truth && hi >= truth, "{truth} at {page}: {lo}..{hi}");
                let found = least_between(lo, hi, page, |s| s >= truth);
                assert_eq!(found, truth.div_ceil(page) * page);
            }
        }
    }

    #[test]
    fn proportional_stacks_round_up_to_pages() {
        let needs = [1000, 256, 4096];
        let of = needs.iter().sum::<u64>().div_ceil(128);
        assert_eq!(scaled(&needs, of, of, 128), vec![1024, 256, 4096]);
        assert_eq!(scaled(&needs, 0, of, 128), vec![128, 128, 128]);
        assert_eq!(scaled(&needs, of / 2, of, 128), vec![512, 128, 2048]);
    }

    #[test]
    fn mso_is_the_share_of_the_need_recovered() {
        let ps = PageShare {
            page: 128,
            need: vec![Some(1024), Some(512)],
            main_need: Some(256),
            least: vec![Some(512), Some(512)],
            unstable: vec![],
            least_main_free: vec![Some(128), None],
        };
        assert_eq!(ps.mso(0), Some(0.5));
        assert_eq!(ps.mso(1), Some(0.0));
        assert_eq!(ps.mean_mso(), Some(0.25));
        assert_eq!(ps.mso_main_free(0), Some(0.875));
        assert_eq!(ps.mso_main_free(1), None);
        let partial = PageShare {
            least: vec![Some(512)],
            ..ps
        };
        assert_eq!(partial.mean_mso(), None);
    }
}
