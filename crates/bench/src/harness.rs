//! Runs experiments: builds every variant (what does not build is "not available"), sizes fixed
//! stacks, checks that every executable prints what the others print, then measures in
//! interleaved rounds (each executable of a point once per round, in an order rotated from
//! round to round: the machine is shared and has slow phases lasting seconds), with a progress
//! bar (`indicatif`) and an estimate of the time left.

use crate::build::{
    accepted_mechanisms, Builder, GccLevel, RaceRun, Sources, Target, Toolchain, Variant,
};
use crate::experiments::{
    Count, Experiment, Mechanisms, Point, Probe, Size, BOUNDARY_TOKEN, DEPTH_TOKEN, STACK_TOKEN,
};
use crate::machine::Machine;
use crate::run::{Invocation, MainStack, Outcome, Runner};
use std::collections::HashMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What `cargo xtask experiments` was asked to do.
#[derive(Debug, Clone)]
pub struct Options {
    pub root: PathBuf,
    pub cmm: PathBuf,
    pub out: PathBuf,
    pub size: Size,
    pub only: Vec<String>,
    /// Measured rounds (a verification round comes first and is not counted).
    pub runs: usize,
    /// Measuring time per executable and point beyond which an executable gets fewer rounds
    /// (never fewer than [`MIN_ROUNDS`]); `None`: always `runs`. See [`rounds_within`].
    pub round_budget: Option<Duration>,
    pub targets: Vec<Target>,
    /// Only these mechanisms of the compiler (empty: every one it accepts).
    pub mechs: Vec<String>,
    /// Whether gcc, Go and the native back end are measured beside the mechanisms.
    pub peers: bool,
    pub progress: bool,
    /// Go on with the run in `out`: experiments it holds parts of ([`crate::part`]) are kept,
    /// not measured again.
    pub resume: bool,
    /// Code layouts of every `cmm` executable (at least 1): each is built this many times,
    /// its code moved by [`crate::build::layout_offset`], and measured round `r` runs layout
    /// `(r - 1) % layouts`, so every round's ratios compare executables of one layout and a
    /// point's mean ratio spans the layouts.
    pub layouts: usize,
}

/// The fewest measured rounds an executable gets under a round budget: a mean, a confidence
/// interval and a median need at least three.
pub const MIN_ROUNDS: usize = 3;

/// Measured rounds for an executable whose verification run took `verification_seconds`:
/// `runs`, or as many as fit in `budget` when fewer do, but at least [`MIN_ROUNDS`]. A handful
/// of executables take a minute or more per run (a million goroutines spinning until all have
/// arrived, malloc per call at 100 million levels); ten rounds of each would take the full
/// run past its time budget while adding little a narrower confidence interval would change.
pub fn rounds_within(budget: Option<Duration>, runs: usize, verification_seconds: f64) -> usize {
    match budget {
        None => runs,
        Some(budget) => {
            let fit = budget.as_secs_f64() / verification_seconds.max(1e-6);
            (fit.floor() as usize).clamp(MIN_ROUNDS.min(runs), runs)
        }
    }
}

/// One execution, as written to `results.csv`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Record {
    #[serde(deserialize_with = "crate::persist::static_name")]
    pub experiment: crate::persist::Name,
    pub x: f64,
    pub target: Target,
    pub variant: String,
    /// 0 is the verification (warm-up) run, 1.. the measured rounds.
    pub round: usize,
    pub args: String,
    pub outcome: Outcome,
}

/// A one-off count of one executable (see [`Count`]).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct CountRecord {
    #[serde(deserialize_with = "crate::persist::static_name")]
    pub experiment: crate::persist::Name,
    pub x: f64,
    pub target: Target,
    pub variant: String,
    pub count: Count,
    /// Instructions: one value; system calls: repetitions R, calls at R, repetitions 10 R,
    /// calls at 10 R.
    pub values: Vec<u64>,
}

pub use crate::note::{Note, NoteKind};

impl NoteKind {
    /// How the report names it.
    pub fn describe(self) -> &'static str {
        match self {
            NoteKind::NotApplicable => "not applicable",
            NoteKind::NotAvailable => "not available",
            NoteKind::FixedStackCannot => "a fixed stack could not do it",
            NoteKind::OutOfResources => "exceeds this machine's limits",
            NoteKind::PeerLimit => "beyond the peer's own limits",
            NoteKind::Failed => "failed",
        }
    }
}

/// Whether a failed run's stderr says it ran out of memory, kernel memory mappings or threads
/// (the runtime's and the C thread library's messages), or under `mtss` out of its one stack
/// region (a fixed budget by design, reserved at start: a 32-bit address space cannot hold
/// 100,000 stacks of 64 KiB, nor the 64 GiB default region a million): a limit, not a bug.
pub fn out_of_resources(stderr: &str) -> bool {
    [
        "ENOMEM",
        "out of memory",
        "Resource temporarily unavailable",
        "Cannot allocate memory",
        "no room in the stack region",
    ]
    .iter()
    .any(|needle| stderr.contains(needle))
}

/// Why a mechanism does not apply to an experiment that compares only chunked mechanisms
/// (the hot split), or `None` when it applies.
pub fn not_applicable_to_chunked(v: &Variant) -> Option<&'static str> {
    match &v.tool {
        _ if v.fixed_stack() => {
            Some("a fixed stack has no chunks: nothing overflows or underflows")
        }
        Toolchain::Cmm { mech, .. } if mech.starts_with("heap") => Some(
            "every frame is a heap block of its own: no call sits on a chunk boundary, so there \
             is no split to provoke",
        ),
        // Its overflow borrows pages of another thread's stack: a lone thread has no donor
        // (`mtss_overflow` measures it with one).
        Toolchain::Cmm { mech, .. } if mech == "mtss" => Some(
            "a fixed native stack that overflows into other threads' stacks: a single thread \
             has no donor (mtss_overflow measures an overflow and its return)",
        ),
        _ => None,
    }
}

/// Everything a run of the harness produced.
#[derive(Debug, Clone)]
pub struct Results {
    pub machine: Machine,
    pub size: Size,
    pub runs: usize,
    /// Code layouts per `cmm` executable ([`Options::layouts`]).
    pub layouts: usize,
    pub round_budget: Option<Duration>,
    pub mechanisms: Vec<String>,
    pub experiments: Vec<Experiment>,
    pub records: Vec<Record>,
    pub notes: Vec<Note>,
    pub counts: Vec<CountRecord>,
    /// Per experiment: variant label and target -> the stack-size argument it was given.
    pub stacks: Vec<(String, String)>,
    /// The MTSS seed's MSO/PRS step (`mtss_share`), per workload and target.
    pub mtss: Vec<crate::mtss::Share>,
    /// Measuring time of every experiment, over all sessions.
    pub elapsed: Duration,
    /// The sessions that measured the run ([`crate::part`]), each with its experiments, in
    /// the order they ran; one unless the run was resumed.
    pub sessions: Vec<(crate::part::Session, Vec<String>)>,
}

/// What one experiment measured, kept in the run's directory as soon as it ends
/// ([`crate::part`]: `--resume` goes on from there).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Part {
    pub experiment: String,
    pub session: crate::part::Session,
    pub settings: crate::part::Settings,
    /// Its measuring time.
    pub seconds: f64,
    pub records: Vec<Record>,
    pub notes: Vec<Note>,
    pub counts: Vec<CountRecord>,
    pub stacks: Vec<(String, String)>,
    pub mtss: Vec<crate::mtss::Share>,
}

/// The parts of the run in `out`, which must have been measured with `settings`.
fn earlier_parts(out: &Path, settings: &crate::part::Settings) -> Result<Vec<Part>, String> {
    let mut parts = Vec::new();
    for (path, part) in crate::part::read_all::<Part>(out)? {
        if part.settings != *settings {
            return Err(format!(
                "{} was measured with other settings ({:?}) than this run's ({:?}): resume it \
                 with the same options, or give another --out",
                path.display(),
                part.settings,
                settings
            ));
        }
        parts.push(part);
    }
    Ok(parts)
}

/// Thread stack given to variants whose stacks grow (chunked mechanisms, split-stack, Go):
/// they ignore it or outgrow it, and it is the same for all of them.
const GROWING_STACK: u64 = 256 * 1024;
/// Added to the smallest working fixed stack: "just big enough", as the thesis's.
const STACK_MARGIN: u64 = 64 * 1024;

/// Progress of the whole run: an `indicatif` bar (current experiment and point, percentage,
/// time left) on a terminal; otherwise (CI, a log file) a plain line every few seconds.
struct Progress {
    enabled: bool,
    bar: indicatif::ProgressBar,
    start: Instant,
    /// When a plain line was last printed.
    last_line: Option<Instant>,
}

impl Progress {
    fn new(enabled: bool, total: usize, start: Instant) -> Progress {
        let bar = if enabled && std::io::stderr().is_terminal() {
            let bar = indicatif::ProgressBar::new(total as u64);
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "{elapsed:>4} [{bar:28.cyan/blue}] {percent:>3}% ~{eta} left  {wide_msg}",
                )
                .expect("a valid template")
                .progress_chars("=> "),
            );
            bar.enable_steady_tick(Duration::from_millis(500));
            bar
        } else {
            // Counts steps (for the estimate) without drawing.
            indicatif::ProgressBar::hidden().with_finish(indicatif::ProgressFinish::AndLeave)
        };
        bar.set_length(total as u64);
        Progress {
            enabled,
            bar,
            start,
            last_line: None,
        }
    }

    /// Counts `steps` runs as done (measured, or skipped: a variant that did not build).
    fn advance(&mut self, steps: usize) {
        self.bar.inc(steps as u64);
    }

    fn show(&mut self, what: &str) {
        if !self.enabled {
            return;
        }
        if !self.bar.is_hidden() {
            self.bar.set_message(what.to_string());
            return;
        }
        if self
            .last_line
            .is_some_and(|t| t.elapsed() < Duration::from_secs(5))
        {
            return;
        }
        self.last_line = Some(Instant::now());
        let done = self.bar.position();
        let total = self.bar.length().unwrap_or(0).max(1);
        let elapsed = self.start.elapsed().as_secs_f64();
        let eta = if done == 0 {
            "?".to_string()
        } else {
            format_duration(elapsed / done as f64 * total.saturating_sub(done) as f64)
        };
        eprintln!(
            "[{:>3}%] {what} | {} elapsed, ~{eta} left",
            100 * done / total,
            format_duration(elapsed)
        );
    }

    fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// "1h 02m", "3m 05s", "12s".
pub fn format_duration(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    if s >= 3600 {
        format!("{}h {:02}m", s / 3600, s % 3600 / 60)
    } else if s >= 60 {
        format!("{}m {:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

/// The variants an experiment compares, in table order.
/// Whether `v` is measured at `point` (some points are measured on x86-64 only).
fn runs_at(v: &Variant, point: &Point) -> bool {
    !(point.x86_64_only && v.target == Target::I686)
}

fn variants_of(
    e: &Experiment,
    mechanisms: &[String],
    targets: &[Target],
    peers: bool,
) -> Vec<Variant> {
    let mut list = Vec::new();
    for &target in targets {
        for mech in mechanisms {
            let variant = Variant {
                target,
                tool: Toolchain::Cmm {
                    mech: mech.clone(),
                    green: false,
                },
            };
            match e.mechanisms {
                Mechanisms::Chunked if not_applicable_to_chunked(&variant).is_some() => continue,
                Mechanisms::Listed(only) if !only.contains(&mech.as_str()) => continue,
                _ => {}
            }
            list.push(variant);
            let green = e.green.contains(&mech.as_str());
            if green {
                list.push(Variant {
                    target,
                    tool: Toolchain::Cmm {
                        mech: mech.clone(),
                        green: true,
                    },
                });
            }
            for &run in &e.race {
                // Detection on both kinds of threads; the deterministic scheduler's replays on
                // green threads; relaxed replay with 0 workers on OS threads.
                let kinds: &[bool] = match run {
                    RaceRun::Detect if green => &[false, true],
                    RaceRun::Detect | RaceRun::Relaxed(0) | RaceRun::RelaxedPct(0) => &[false],
                    RaceRun::Strict | RaceRun::Relaxed(_) | RaceRun::RelaxedPct(_) if green => {
                        &[true]
                    }
                    RaceRun::Strict | RaceRun::Relaxed(_) | RaceRun::RelaxedPct(_) => &[],
                };
                for &green in kinds {
                    list.push(Variant {
                        target,
                        tool: Toolchain::CmmRace {
                            mech: mech.clone(),
                            green,
                            run,
                        },
                    });
                }
            }
        }
        if !peers {
            continue;
        }
        if e.native && target == Target::X86_64 {
            list.push(Variant {
                target,
                tool: Toolchain::Native,
            });
        }
        for &level in &e.gcc {
            list.push(Variant {
                target,
                tool: Toolchain::Gcc(level),
            });
        }
        if e.go {
            list.push(Variant {
                target,
                tool: Toolchain::Go,
            });
            // Where `--race` is measured, Go's race detector is too (beside Go's plain run).
            if !e.race.is_empty() {
                list.push(Variant {
                    target,
                    tool: Toolchain::GoRace,
                });
            }
        }
    }
    list
}

/// What a variant's output is compared on: the lines that do not depend on the stack-size
/// argument (Go versions print only the "Data:" line of the C-- programs).
fn normalized_output(text: &str, only_data: bool) -> String {
    text.lines()
        .filter(|l| !l.starts_with("stacksize") && !l.starts_with("Using "))
        .filter(|l| !only_data || l.starts_with("Data"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Why ThreadSanitizer cannot run a deep recursion: gcc 12's stops in one about 300,000 calls
/// deep whatever stack the thread has (Summation's recursion ran 250,000 deep under it with a
/// 1 GiB stack, not 300,000; the thesis's programs go 1,000,000 deep).
const TSAN_DEPTH: &str = "ThreadSanitizer stops in a recursion about 300,000 calls deep, whatever the thread's stack (\"ThreadSanitizer: nested bug in the same thread, aborting\" or SIGSEGV)";

fn physical_memory_bytes() -> u64 {
    (Machine::detect().memory_gib * 1024.0 * 1024.0 * 1024.0) as u64
}

struct Session<'a> {
    options: &'a Options,
    runner: Runner,
    builder: Builder,
    progress: Progress,
    records: Vec<Record>,
    notes: Vec<Note>,
    counts: Vec<CountRecord>,
    stacks: Vec<(String, String)>,
    min_stacks: HashMap<(PathBuf, String), Option<u64>>,
    boundaries: HashMap<PathBuf, Option<u64>>,
    /// `STACKRT_MTSS_REGION` of an `mtss` executable run with these arguments, where the
    /// default region is too small for its native stacks.
    mtss_regions: HashMap<(PathBuf, Vec<String>), u64>,
    /// The executables of every layout (layout 0 first) by layout 0's executable, for the
    /// variants that have more than one ([`Options::layouts`]).
    layouts: HashMap<PathBuf, Vec<PathBuf>>,
    memory_budget: u64,
    scratch: PathBuf,
}

impl Session<'_> {
    fn note(&mut self, e: &Experiment, v: &Variant, x: Option<f64>, kind: NoteKind, text: String) {
        self.notes.push(Note {
            experiment: e.name,
            target: v.target,
            variant: v.label(),
            x,
            kind,
            text,
        });
    }

    fn invocation(&self, e: &Experiment, v: &Variant, exe: &Path, args: &[String]) -> Invocation {
        let mut env = e.env.clone();
        env.extend(crate::mtss::main_stack_env(v, e.main_stack, &e.env));
        if let Some(region) = self.mtss_regions.get(&(exe.to_path_buf(), args.to_vec())) {
            env.push(("STACKRT_MTSS_REGION".into(), region.to_string()));
        }
        if v.is_cmm() {
            env.push(("STACKRT_STATS".to_string(), "1".to_string()));
        }
        if let Toolchain::CmmRace { run, .. } = &v.tool {
            let trace = self.trace_path(e, v, args).display().to_string();
            match *run {
                RaceRun::Detect => {}
                RaceRun::Strict => env.push(("STACKRT_SCHED".into(), format!("replay:{trace}"))),
                RaceRun::Relaxed(workers) | RaceRun::RelaxedPct(workers) => {
                    env.push(("STACKRT_SCHED".into(), format!("relaxed:{trace}")));
                    if workers > 0 {
                        env.push(("STACKRT_WORKERS".into(), workers.to_string()));
                    }
                }
            }
        }
        Invocation {
            exe: exe.to_path_buf(),
            args: args.to_vec(),
            env,
            main_stack: e.main_stack,
            timeout: match self.options.size {
                Size::Full => Duration::from_secs(900),
                Size::Quick => Duration::from_secs(120),
                Size::Tiny => Duration::from_secs(60),
            },
            stdout: None,
        }
    }

    /// The smallest working stack at `depth`: searched at two small depths, extrapolated
    /// linearly (the stack used per level rounded to a multiple of 4 bytes: the search is only
    /// precise to a page), plus a margin, then checked with one thread at `depth` and raised by
    /// an eighth until it works. With `no_overflow` (`mtss`) a stack works only when the thread
    /// never overflows it.
    fn fixed_stack(
        &mut self,
        exe: &Path,
        probe: &Probe,
        main_stack: MainStack,
        no_overflow: bool,
    ) -> Option<u64> {
        let key = (
            exe.to_path_buf(),
            format!("{:?}@{}", probe.args, probe.depth),
        );
        if let Some(known) = self.min_stacks.get(&key) {
            return *known;
        }
        let args_at = |depth: u64, stack: u64| -> Vec<String> {
            probe
                .args
                .iter()
                .map(|a| match a.as_str() {
                    DEPTH_TOKEN => depth.to_string(),
                    STACK_TOKEN => stack.to_string(),
                    other => other.to_string(),
                })
                .collect()
        };
        let (d1, d2) = probe.small_depths;
        let search = |depth: u64| {
            self.runner.min_stack(
                exe,
                |stack| args_at(depth, stack),
                main_stack,
                4 << 30,
                no_overflow,
            )
        };
        let found = (|| {
            let s1 = search(d1)? as f64;
            let s2 = search(d2)? as f64;
            let measured = ((s2 - s1) / (d2 - d1) as f64).max(0.0);
            let per_level = if d2 - d1 >= 50_000 {
                (measured / 4.0).round() * 4.0
            } else {
                measured
            };
            let need = s1 + per_level * (probe.depth as f64 - d1 as f64);
            let mut bytes = (need.max(s1) as u64 + STACK_MARGIN).div_ceil(4096) * 4096;
            for _ in 0..6 {
                let check = self.runner.run(&Invocation {
                    exe: exe.to_path_buf(),
                    args: args_at(probe.depth, bytes),
                    env: crate::run::stats_env(no_overflow),
                    main_stack,
                    timeout: Duration::from_secs(600),
                    stdout: None,
                });
                if crate::run::works_alone(&check, no_overflow) {
                    return Some(bytes);
                }
                bytes = (bytes + bytes / 8).div_ceil(4096) * 4096;
            }
            None
        })();
        self.min_stacks.insert(key, found);
        found
    }

    /// The hot split's boundary depth of a chunked executable: the depth at which the loop's
    /// call overflows on every iteration (bisection over ranges of depths; the program sweeps a
    /// range and `STACKRT_STATS` counts the overflows).
    fn boundary(&mut self, e: &Experiment, v: &Variant, exe: &Path) -> Option<u64> {
        if let Some(known) = self.boundaries.get(exe) {
            return *known;
        }
        const LOOPS: u64 = 2000;
        let overflows_of_loops = |session: &Self, first: u64, last: u64| -> u64 {
            let count = |n: u64| {
                let outcome = session.runner.run(&session.invocation(
                    e,
                    v,
                    exe,
                    &[first.to_string(), last.to_string(), n.to_string()],
                ));
                outcome.stats.get("overflows").copied().unwrap_or(0)
            };
            // The descents to each depth overflow too; only the loops' overflows count.
            count(LOOPS).saturating_sub(count(0))
        };
        // The first boundary lies about a chunk's worth of frames deep: a small range is tried
        // first, as a sweep's descents cost the square of its range.
        let mut low = 11u64;
        let top = [4_000u64, 20_000]
            .into_iter()
            .find(|&top| overflows_of_loops(self, low, top) >= LOOPS / 2);
        let found = if let Some(mut high) = top {
            while low < high {
                let mid = (low + high) / 2;
                if overflows_of_loops(self, low, mid) >= LOOPS / 2 {
                    high = mid;
                } else {
                    low = mid + 1;
                }
            }
            Some(low)
        } else {
            None
        };
        self.boundaries.insert(exe.to_path_buf(), found);
        found
    }

    /// The arguments of `point` for one variant, or why it cannot run there.
    fn arguments(
        &mut self,
        e: &Experiment,
        v: &Variant,
        exe: &Path,
        point: &Point,
    ) -> Result<Vec<String>, (NoteKind, String)> {
        if matches!(v.tool, Toolchain::Go | Toolchain::GoRace)
            && point.go_least_bytes > self.memory_budget
        {
            return Err((
                NoteKind::OutOfResources,
                format!(
                    "Go needs at least {:.1} GiB here (2 KiB of stack and a goroutine record per goroutine), more than 3/4 of physical memory",
                    point.go_least_bytes as f64 / (1u64 << 30) as f64
                ),
            ));
        }
        let mut stack = None;
        let mut region_of_run = None;
        if point.args.iter().any(|a| a == STACK_TOKEN) {
            // `mtss`'s native stacks are sized as the fixed stacks are, to what one thread
            // needs without overflowing (as the MTSS paper sized each task from its peak):
            // a growing-stack size would put every deep spike on pages lent 128 bytes at a
            // time, which measures lending, not the mechanism (`mtss_share` does that).
            let mtss = v.is_mtss();
            let bytes = match (&point.probe, v.fixed_stack() || mtss) {
                (Some(probe), true) => self.fixed_stack(exe, probe, e.main_stack, mtss).ok_or(
                    if v.tool == Toolchain::Gcc(GccLevel::Tsan) {
                        (NoteKind::PeerLimit, TSAN_DEPTH.to_string())
                    } else {
                        (
                            NoteKind::FixedStackCannot,
                            "no stack size up to 4 GiB runs one thread".to_string(),
                        )
                    },
                )?,
                _ => GROWING_STACK,
            };
            if mtss && point.probe.is_some() {
                let region = crate::mtss::region_for(v.target, point.threads, bytes, e.main_stack)
                    .map_err(|why| (NoteKind::FixedStackCannot, why))?;
                region_of_run = region;
            }
            if v.fixed_stack() || (mtss && point.probe.is_some()) {
                let together = bytes.saturating_mul(point.threads);
                if v.target == Target::I686 && together > 3 << 30 {
                    return Err((
                        NoteKind::FixedStackCannot,
                        format!(
                            "{} threads x {:.1} MiB stacks do not fit a 32-bit address space",
                            point.threads,
                            bytes as f64 / 1048576.0
                        ),
                    ));
                }
                if together > self.memory_budget {
                    return Err((
                        NoteKind::FixedStackCannot,
                        format!(
                            "{} threads x {:.1} MiB stacks exceed 3/4 of physical memory (all may be deep at once)",
                            point.threads,
                            bytes as f64 / 1048576.0
                        ),
                    ));
                }
            }
            stack = Some(bytes);
        }
        let mut boundary = None;
        if point.args.iter().any(|a| a == BOUNDARY_TOKEN) {
            boundary = Some(self.boundary(e, v, exe).ok_or((
                NoteKind::Failed,
                "no depth up to 20000 puts the loop's call on a chunk boundary".to_string(),
            ))?);
        }
        let args: Vec<String> = point
            .args
            .iter()
            .map(|a| match a.as_str() {
                STACK_TOKEN => stack.expect("set above").to_string(),
                BOUNDARY_TOKEN => boundary.expect("set above").to_string(),
                other => other.to_string(),
            })
            .collect();
        if let Some(region) = region_of_run {
            self.mtss_regions
                .insert((exe.to_path_buf(), args.clone()), region);
        }
        Ok(args)
    }

    /// The schedule trace the replays of `v`'s mechanism and target read at `args`.
    fn trace_path(&self, e: &Experiment, v: &Variant, args: &[String]) -> PathBuf {
        let (mech, policy) = match &v.tool {
            Toolchain::CmmRace { mech, run, .. } => (mech.as_str(), run.recording()),
            _ => ("none", "none"),
        };
        let slug = |s: &str| -> String {
            s.chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
                .collect()
        };
        let (args, policy) = (slug(&args.join("_")), slug(policy));
        self.scratch.join("traces").join(format!(
            "{}-{}-{mech}-{policy}-{args}.trace",
            e.name, v.target
        ))
    }

    /// Records the traces the replays among `built` read at `args` (once per mechanism, target
    /// and recording policy), with the green `--race` build under the run's
    /// [`RaceRun::recording`] policy (not timed); a replay whose trace could not be recorded is
    /// noted and left out.
    fn record_traces(
        &mut self,
        e: &Experiment,
        point: &Point,
        built: &[(Variant, PathBuf)],
    ) -> Vec<(Variant, PathBuf)> {
        let mut kept = Vec::new();
        let mut recorded: HashMap<PathBuf, Result<(), String>> = HashMap::new();
        for (v, exe) in built {
            let Toolchain::CmmRace { mech, run, .. } = &v.tool else {
                kept.push((v.clone(), exe.clone()));
                continue;
            };
            if !run.replays() {
                kept.push((v.clone(), exe.clone()));
                continue;
            }
            let trace = self.trace_path(e, v, &point.args);
            if !recorded.contains_key(&trace) {
                self.progress.show(&format!(
                    "{} x={} {} {mech}: recording a schedule trace",
                    e.name, point.x, v.target
                ));
                let recorder = Variant {
                    target: v.target,
                    tool: Toolchain::CmmRace {
                        mech: mech.clone(),
                        green: true,
                        run: RaceRun::Detect,
                    },
                };
                let outcome = self.record_trace(e, &recorder, run.recording(), &point.args, &trace);
                recorded.insert(trace.clone(), outcome);
            }
            match &recorded[&trace] {
                Ok(()) => kept.push((v.clone(), exe.clone())),
                Err(why) => {
                    self.note(e, v, Some(point.x), NoteKind::Failed, why.clone());
                    self.progress.advance(self.options.runs + 1);
                }
            }
        }
        kept
    }

    fn record_trace(
        &mut self,
        e: &Experiment,
        recorder: &Variant,
        policy: &str,
        args: &[String],
        trace: &Path,
    ) -> Result<(), String> {
        let sources: &Sources = &e.sources;
        let exe = self
            .builder
            .build(sources, recorder)
            .map_err(|why| format!("the recording build is not available: {why}"))?;
        if let Some(dir) = trace.parent() {
            std::fs::create_dir_all(dir).map_err(|err| format!("{}: {err}", dir.display()))?;
        }
        let mut inv = self.invocation(e, recorder, &exe, args);
        inv.env.push(("STACKRT_SCHED".into(), policy.into()));
        inv.env
            .push(("STACKRT_SCHED_TRACE".into(), trace.display().to_string()));
        inv.stdout = Some(self.scratch.join("recording.txt"));
        let outcome = self.runner.run(&inv);
        if outcome.ending.ok() {
            Ok(())
        } else {
            Err(format!(
                "recording the trace failed: {} {}",
                outcome.ending.describe(),
                outcome.stderr_tail
            )
            .trim()
            .to_string())
        }
    }

    fn run_point(&mut self, e: &Experiment, point: &Point, built: &[(Variant, PathBuf)]) {
        let built = &self.record_traces(e, point, built)[..];
        // Arguments and the verification round: every executable must succeed and print what
        // the first one printed.
        // Each with its number of measured rounds (see `rounds_within`).
        let mut runnable: Vec<(Variant, PathBuf, Vec<String>, usize)> = Vec::new();
        let mut reference: Option<(String, String)> = None;
        for (v, exe) in built {
            self.progress.show(&format!(
                "{} x={} {} {}: checking",
                e.name,
                point.x,
                v.target,
                v.label()
            ));
            let args = match self.arguments(e, v, exe, point) {
                Ok(args) => args,
                Err((kind, text)) => {
                    self.note(e, v, Some(point.x), kind, text);
                    self.progress.advance(self.options.runs + 1);
                    continue;
                }
            };
            if let Some(i) = point.args.iter().position(|a| a == STACK_TOKEN) {
                self.stacks.push((
                    format!("{} x={} {} {}", e.name, point.x, v.target, v.label()),
                    args[i].clone(),
                ));
            }
            let out_path = self.scratch.join("stdout.txt");
            let mut inv = self.invocation(e, v, exe, &args);
            inv.stdout = Some(out_path.clone());
            let outcome = self.runner.run(&inv);
            self.progress.advance(1);
            let printed = std::fs::read_to_string(&out_path).unwrap_or_default();
            let only_data = matches!(v.tool, Toolchain::Go | Toolchain::GoRace);
            self.records.push(Record {
                experiment: e.name,
                x: point.x,
                target: v.target,
                variant: v.label(),
                round: 0,
                args: args.join(" "),
                outcome: outcome.clone(),
            });
            if !outcome.ending.ok() {
                // A fixed stack that overflows (a thread's, or the main thread's under
                // `ulimit -s unlimited` when the address space ends first) dies of SIGSEGV.
                let overflowed = outcome.ending == crate::run::Ending::Signaled(libc::SIGSEGV);
                let kind = if v.tool == Toolchain::Gcc(GccLevel::Tsan)
                    && (overflowed || outcome.stderr_tail.contains("ThreadSanitizer"))
                {
                    NoteKind::PeerLimit
                } else if v.fixed_stack()
                    && (overflowed || point.args.iter().any(|a| a == STACK_TOKEN))
                    && !out_of_resources(&outcome.stderr_tail)
                {
                    NoteKind::FixedStackCannot
                } else if out_of_resources(&outcome.stderr_tail) {
                    NoteKind::OutOfResources
                } else if matches!(v.tool, Toolchain::Go | Toolchain::GoRace)
                    && outcome.stderr_tail.contains("goroutine stack exceeds")
                {
                    // Go stops a goroutine's stack at its limit (1 GB on 64-bit unless
                    // `debug.SetMaxStack` raises it) and never lets it pass twice the default
                    // (the runtime's `maxstackceiling`, stack.go).
                    NoteKind::PeerLimit
                } else {
                    NoteKind::Failed
                };
                let text = format!("{} {}", outcome.ending.describe(), outcome.stderr_tail);
                self.note(e, v, Some(point.x), kind, text.trim().to_string());
                self.progress.advance(self.options.runs);
                continue;
            }
            match &reference {
                None => {
                    reference = Some((
                        format!("{} {}", v.target, v.label()),
                        normalized_output(&printed, false),
                    ))
                }
                Some((who, expected)) => {
                    let expected = if only_data {
                        normalized_output(expected, true)
                    } else {
                        expected.clone()
                    };
                    if normalized_output(&printed, only_data) != expected {
                        self.note(
                            e,
                            v,
                            Some(point.x),
                            NoteKind::Failed,
                            format!("prints something else than {who}"),
                        );
                        self.progress.advance(self.options.runs);
                        continue;
                    }
                }
            }
            let rounds = rounds_within(
                self.options.round_budget,
                self.options.runs,
                outcome.seconds,
            );
            self.progress.advance(self.options.runs - rounds);
            runnable.push((v.clone(), exe.clone(), args, rounds));
        }
        let first = e.points.first().is_some_and(|p| p.x == point.x);
        let last = e.points.last().is_some_and(|p| p.x == point.x);
        for &count in &e.counts {
            let here = match count {
                Count::Instructions => first,
                Count::Syscalls => last,
            };
            if !here {
                continue;
            }
            for (v, exe, args, _) in &runnable {
                self.progress.show(&format!(
                    "{} x={} counting {count:?} {} {}",
                    e.name,
                    point.x,
                    v.target,
                    v.label()
                ));
                let values = match count {
                    Count::Instructions => {
                        let env = self.invocation(e, v, exe, args).env;
                        count_instructions(exe, args, v.target, &env).map(|n| vec![n])
                    }
                    Count::Syscalls => {
                        // Under strace every system call is slow: count at a hundredth and a
                        // tenth of the repetitions (the last argument), at least 1 and 10.
                        let reps = args
                            .last()
                            .and_then(|a| a.parse::<u64>().ok())
                            .unwrap_or(100);
                        let fewer = (reps / 100).max(1);
                        let with_reps = |n: u64| {
                            let mut a = args.clone();
                            if let Some(last) = a.last_mut() {
                                *last = n.to_string();
                            }
                            a
                        };
                        count_syscalls(exe, &with_reps(fewer), e.main_stack)
                            .and_then(|a| {
                                Some(vec![
                                    fewer,
                                    a,
                                    fewer * 10,
                                    count_syscalls(exe, &with_reps(fewer * 10), e.main_stack)?,
                                ])
                            })
                            .ok_or_else(|| "strace is missing or the traced run failed".to_string())
                    }
                };
                match values {
                    Ok(values) => self.counts.push(CountRecord {
                        experiment: e.name,
                        x: point.x,
                        target: v.target,
                        variant: v.label(),
                        count,
                        values,
                    }),
                    // Valgrind runs the program on its own simulated CPU and signal delivery,
                    // which cannot grow a stack from a SIGSEGV handler: the MMU mechanisms'
                    // instructions cannot be counted this way (a limit of the tool).
                    Err(_)
                        if count == Count::Instructions
                            && matches!(&v.tool, Toolchain::Cmm { mech, .. } if mech.starts_with("mmu")) =>
                    {
                        self.note(
                            e,
                            v,
                            Some(point.x),
                            NoteKind::NotApplicable,
                            "instruction count: valgrind cannot run a program that grows its stack \
                             from SIGSEGV (the MMU mechanisms)"
                                .to_string(),
                        )
                    }
                    Err(why) => self.note(
                        e,
                        v,
                        Some(point.x),
                        NoteKind::Failed,
                        format!("could not count {count:?}: {why}"),
                    ),
                }
            }
        }
        for round in 1..=self.options.runs {
            let here: Vec<_> = runnable
                .iter()
                .filter(|(.., rounds)| *rounds >= round)
                .collect();
            let n = here.len();
            for k in 0..n {
                let (v, exe, args, _) = here[(k + round) % n];
                // This round's layout of the executable (one layout for every variant).
                let exe = self
                    .layouts
                    .get(exe)
                    .map_or(exe, |all| &all[(round - 1) % all.len()]);
                self.progress.show(&format!(
                    "{} x={} round {round}/{} {} {}",
                    e.name,
                    point.x,
                    self.options.runs,
                    v.target,
                    v.label()
                ));
                // Measured without `STACKRT_STATS`: counting costs atomic operations on the
                // runtime's hot paths (a `lookahead` hot split took 64 ns a pair with it, 9
                // without). The statistics columns repeat the verification run's.
                let mut inv = self.invocation(e, v, exe, args);
                inv.env.retain(|(k, _)| k != "STACKRT_STATS");
                let mut outcome = self.runner.run(&inv);
                if let Some(verified) = self.records.iter().rev().find(|r| {
                    r.round == 0
                        && r.experiment == e.name
                        && r.x == point.x
                        && r.target == v.target
                        && r.variant == v.label()
                }) {
                    outcome.stats = verified.outcome.stats.clone();
                }
                self.progress.advance(1);
                self.records.push(Record {
                    experiment: e.name,
                    x: point.x,
                    target: v.target,
                    variant: v.label(),
                    round,
                    args: args.join(" "),
                    outcome,
                });
            }
        }
    }
}

/// User-space instructions of one run (valgrind's `I refs`) with the environment `env` of its
/// measured runs, or why not.
fn count_instructions(
    exe: &Path,
    args: &[String],
    target: Target,
    env: &[(String, String)],
) -> Result<u64, String> {
    // Valgrind gives its client an 8 MiB stack unless told otherwise; a 32-bit valgrind cannot
    // reserve more than about 64 MiB here.
    let stack: u64 = match target {
        Target::X86_64 => 1 << 30,
        Target::I686 => 64 << 20,
    };
    let mut cmd = std::process::Command::new("valgrind");
    // A 32-bit valgrind cannot reserve the 2 GiB `mtss` region the measured i686 runs get
    // (`crate::mtss`'s main-stack environment): there the runtime's default region (halved
    // until the system grants it) and main's stack as large as valgrind's.
    let valgrind_region = |k: &str| {
        target == Target::I686 && (k == "STACKRT_MTSS_REGION" || k == "STACKRT_MTSS_MAIN_STACK")
    };
    let env: Vec<&(String, String)> = env.iter().filter(|(k, _)| !valgrind_region(k)).collect();
    cmd.envs(env.iter().map(|(k, v)| (k, v)));
    // `mtss` carves main's stack from its region, sized by the stack limit, which valgrind's
    // option does not raise: the same size, unless the run sets its own.
    if !env.iter().any(|(k, _)| k == "STACKRT_MTSS_MAIN_STACK") {
        cmd.env("STACKRT_MTSS_MAIN_STACK", stack.to_string());
    }
    let out = cmd
        .args([
            "--tool=cachegrind",
            "--cache-sim=no",
            "--cachegrind-out-file=/dev/null",
        ])
        .arg(format!("--main-stacksize={stack}"))
        .arg(exe)
        .args(args)
        .stdout(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot run valgrind: {e}"))?;
    let text = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        // Valgrind's own signal handling does not support growing stacks from SIGSEGV (mmu).
        let why = text
            .lines()
            .map(|l| {
                l.trim_start_matches(|c: char| c == '=' || c.is_ascii_digit())
                    .trim()
            })
            .find(|l| {
                !l.is_empty()
                    && (l.starts_with("Process terminating") || l.starts_with("valgrind:"))
            })
            // Else the program's own last line (a runtime fault: `stackrt: ...`).
            .or_else(|| {
                text.lines()
                    .rev()
                    .find(|l| !l.is_empty() && !l.starts_with("==") && !l.starts_with("--"))
            })
            .unwrap_or("");
        return Err(format!(
            "the program under valgrind ended with {}: {why}",
            out.status
        ));
    }
    text.lines()
        .find(|l| l.contains("I refs:") || l.contains("I   refs:"))
        .and_then(|line| {
            line.rsplit(':')
                .next()?
                .trim()
                .replace(',', "")
                .parse()
                .ok()
        })
        .ok_or_else(|| "valgrind printed no instruction count".to_string())
}

/// System calls of one run, all threads (`strace -f -c`), or `None`. The program gets the
/// main-thread stack it gets when measured (a deep recursion needs `ulimit -s unlimited`).
fn count_syscalls(exe: &Path, args: &[String], main_stack: MainStack) -> Option<u64> {
    use std::os::unix::process::CommandExt as _;
    let table = std::env::temp_dir().join(format!("experiments-strace-{}", std::process::id()));
    let limit = match main_stack {
        MainStack::Unlimited => libc::RLIM_INFINITY,
        MainStack::KiB(kib) => kib.saturating_mul(1024) as libc::rlim_t,
    };
    let mut cmd = std::process::Command::new("strace");
    // SAFETY: between fork and exec the closure only calls getrlimit and setrlimit, system
    // calls that are async-signal-safe, on a local struct; strace and the traced program
    // inherit the soft limit (raised at most to the hard one, as runrss does).
    unsafe {
        cmd.pre_exec(move || {
            let mut rl = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            if libc::getrlimit(libc::RLIMIT_STACK, &mut rl) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            rl.rlim_cur = if rl.rlim_max == libc::RLIM_INFINITY {
                limit
            } else {
                limit.min(rl.rlim_max)
            };
            if libc::setrlimit(libc::RLIMIT_STACK, &rl) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let ok = cmd
        .args(["-f", "-qq", "-c", "-o"])
        .arg(&table)
        .arg(exe)
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .ok()?
        .success();
    let text = std::fs::read_to_string(&table).ok();
    let _ = std::fs::remove_file(&table);
    if !ok {
        return None;
    }
    // A 32-bit process gets one table per mode (its execve is a 64-bit call): add the totals
    // (columns: % time, seconds, usecs/call, calls, [errors,] "total").
    let total = text?
        .lines()
        .filter(|l| l.trim_end().ends_with("total"))
        .filter_map(|l| l.split_whitespace().nth(3)?.parse::<u64>().ok())
        .sum();
    Some(total)
}

/// Whether `--only NAME` selects the experiment `experiment`: its name, or the family the name
/// begins (`irs` selects `irs_fibonacci`, `irs_last_zero`, ...).
pub fn selected_by(experiment: &str, name: &str) -> bool {
    experiment == name
        || experiment
            .strip_prefix(name)
            .is_some_and(|rest| rest.starts_with('_'))
}

/// Runs the selected experiments and returns everything measured.
pub fn run(options: &Options) -> Result<Results, String> {
    let start = Instant::now();
    let mut known = crate::experiments::all(&options.root, options.size);
    // The MTSS seed's (defined apart: they read the harness's results for their report).
    known.extend(crate::mtss::experiments(&options.root, options.size));
    let unknown: Vec<&String> = options
        .only
        .iter()
        .filter(|o| !known.iter().any(|e| selected_by(e.name, o)))
        .collect();
    if !unknown.is_empty() {
        return Err(format!(
            "no experiment named {}; known: {}",
            unknown
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            known.iter().map(|e| e.name).collect::<Vec<_>>().join(", ")
        ));
    }
    let experiments: Vec<Experiment> = known
        .into_iter()
        .filter(|e| options.only.is_empty() || options.only.iter().any(|o| selected_by(e.name, o)))
        .collect();
    let runner = Runner::beside_current_exe()?;
    let scratch = options.out.join("work");
    std::fs::create_dir_all(&scratch).map_err(|e| format!("{}: {e}", scratch.display()))?;
    let builder = Builder::new(&options.root, &options.cmm, &scratch.join("bin"))?;
    let mechanisms: Vec<String> = accepted_mechanisms(&options.cmm)
        .into_iter()
        .filter(|m| options.mechs.is_empty() || options.mechs.contains(m))
        .collect();
    let settings = crate::part::Settings {
        size: options.size,
        runs: options.runs,
        layouts: options.layouts,
        round_budget_seconds: options.round_budget.map(|d| d.as_secs_f64()),
        targets: options.targets.clone(),
        mechanisms: mechanisms.clone(),
        peers: options.peers,
    };
    let earlier = earlier_parts(&options.out, &settings)?;
    if !options.resume && !earlier.is_empty() {
        return Err(format!(
            "{} already holds measurements of a run ({}): --resume goes on with it, or give \
             another --out",
            options.out.display(),
            crate::part::dir(&options.out).display()
        ));
    }
    let this_session = crate::part::new_session(&options.root);
    let mut parts: HashMap<String, Part> = earlier
        .into_iter()
        .filter(|p| experiments.iter().any(|e| e.name == p.experiment))
        .map(|p| (p.experiment.clone(), p))
        .collect();
    let total: usize = experiments
        .iter()
        .filter(|e| !parts.contains_key(e.name))
        .map(|e| {
            let variants = variants_of(e, &mechanisms, &options.targets, options.peers);
            e.points
                .iter()
                .map(|p| variants.iter().filter(|v| runs_at(v, p)).count())
                .sum::<usize>()
                * (options.runs + 1)
        })
        .sum();
    let mut session = Session {
        options,
        runner,
        builder,
        progress: Progress::new(options.progress, total, start),
        records: Vec::new(),
        notes: Vec::new(),
        counts: Vec::new(),
        stacks: Vec::new(),
        min_stacks: HashMap::new(),
        boundaries: HashMap::new(),
        mtss_regions: HashMap::new(),
        layouts: HashMap::new(),
        memory_budget: physical_memory_bytes() / 4 * 3,
        scratch,
    };
    let mut mtss = Vec::new();
    for e in &experiments {
        if parts.contains_key(e.name) {
            continue;
        }
        let began = Instant::now();
        let marks = (
            session.records.len(),
            session.notes.len(),
            session.counts.len(),
            session.stacks.len(),
            mtss.len(),
        );
        if e.name == crate::mtss::SHARE {
            // A custom step (bisections over stack sizes), not points measured in rounds.
            let progress = &mut session.progress;
            let (shares, notes) = crate::mtss::measure(crate::mtss::Context {
                root: &options.root,
                cmm: &options.cmm,
                scratch: &session.scratch,
                runner: &session.runner,
                size: options.size,
                targets: &options.targets,
                show: &mut |what: &str| progress.show(what),
            });
            mtss.extend(shares);
            session.notes.extend(notes);
        }
        if e.mechanisms == Mechanisms::Chunked {
            for &target in &options.targets {
                for mech in &mechanisms {
                    let v = Variant {
                        target,
                        tool: Toolchain::Cmm {
                            mech: mech.clone(),
                            green: false,
                        },
                    };
                    if let Some(why) = not_applicable_to_chunked(&v) {
                        session.note(e, &v, None, NoteKind::NotApplicable, why.to_string());
                    }
                }
            }
        }
        let variants = variants_of(e, &mechanisms, &options.targets, options.peers);
        let mut built = Vec::new();
        for v in &variants {
            session
                .progress
                .show(&format!("{}: building {} {}", e.name, v.target, v.label()));
            match session.builder.build(&e.sources, v) {
                Ok(exe) => {
                    let mut all = vec![exe.clone()];
                    // Only the emission stage's plain builds vary their layout (`build_at`).
                    let layouts = match v.tool {
                        Toolchain::Cmm { .. } => options.layouts.min(options.runs).max(1),
                        _ => 1,
                    };
                    for k in 1..layouts {
                        match session.builder.build_at(&e.sources, v, k) {
                            Ok(other) => all.push(other),
                            Err(reason) => {
                                session.note(
                                    e,
                                    v,
                                    None,
                                    NoteKind::Failed,
                                    format!("layout {k} not built: {reason}"),
                                );
                                all.truncate(1);
                                break;
                            }
                        }
                    }
                    if all.len() > 1 {
                        session.layouts.insert(exe.clone(), all);
                    }
                    built.push((v.clone(), exe));
                }
                Err(reason) => {
                    session.note(e, v, None, NoteKind::NotAvailable, reason);
                    session.progress.advance(
                        e.points.iter().filter(|p| runs_at(v, p)).count() * (options.runs + 1),
                    );
                }
            }
        }
        for point in &e.points {
            let here: Vec<_> = built
                .iter()
                .filter(|(v, _)| runs_at(v, point))
                .cloned()
                .collect();
            session.run_point(e, point, &here);
        }
        let part = Part {
            experiment: e.name.to_string(),
            session: this_session.clone(),
            settings: settings.clone(),
            seconds: began.elapsed().as_secs_f64(),
            records: session.records[marks.0..].to_vec(),
            notes: session.notes[marks.1..].to_vec(),
            counts: session.counts[marks.2..].to_vec(),
            stacks: session.stacks[marks.3..].to_vec(),
            mtss: mtss[marks.4..].to_vec(),
        };
        crate::part::write(&options.out, &part.experiment, &part)?;
        parts.insert(part.experiment.clone(), part);
    }
    session.progress.finish();
    Ok(assemble(
        options,
        mechanisms,
        experiments,
        parts,
        (&this_session, start.elapsed()),
    ))
}

/// The results of a run from its parts, in the experiments' order. `now` is this session and
/// how long it took: beyond its experiments' time, what it spent between them counts too.
fn assemble(
    options: &Options,
    mechanisms: Vec<String>,
    experiments: Vec<Experiment>,
    mut parts: HashMap<String, Part>,
    now: (&crate::part::Session, Duration),
) -> Results {
    let mut results = Results {
        machine: Machine::detect(),
        size: options.size,
        runs: options.runs,
        layouts: options.layouts.min(options.runs).max(1),
        round_budget: options.round_budget,
        mechanisms,
        experiments: Vec::new(),
        records: Vec::new(),
        notes: Vec::new(),
        counts: Vec::new(),
        stacks: Vec::new(),
        mtss: Vec::new(),
        elapsed: Duration::ZERO,
        sessions: Vec::new(),
    };
    let mut measured = 0.0;
    let mut this_session = 0.0;
    for e in &experiments {
        let Some(p) = parts.remove(e.name) else {
            continue;
        };
        measured += p.seconds;
        match results.sessions.iter_mut().find(|(s, _)| *s == p.session) {
            Some((_, names)) => names.push(p.experiment.clone()),
            None => results
                .sessions
                .push((p.session.clone(), vec![p.experiment.clone()])),
        }
        if p.session == *now.0 {
            this_session += p.seconds;
        }
        results.records.extend(p.records);
        results.notes.extend(p.notes);
        results.counts.extend(p.counts);
        results.stacks.extend(p.stacks);
        results.mtss.extend(p.mtss);
    }
    results.sessions.sort_by_key(|(s, _)| s.id);
    // The current session's own overhead (building, probing between experiments) counts too.
    let overhead = (now.1.as_secs_f64() - this_session).max(0.0);
    results.elapsed = Duration::from_secs_f64(measured + overhead);
    results.experiments = experiments;
    results
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::Ending;

    fn settings() -> crate::part::Settings {
        crate::part::Settings {
            size: Size::Tiny,
            runs: 2,
            layouts: 1,
            round_budget_seconds: Some(10.0),
            targets: vec![Target::X86_64],
            mechanisms: vec!["lookahead".into()],
            peers: true,
        }
    }

    #[test]
    fn a_part_reads_back_as_written_and_other_settings_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let outcome = Outcome {
            ending: Ending::Exited(0),
            seconds: 0.25,
            maxrss_kib: 1234,
            minor_faults: 5,
            major_faults: 0,
            // A run that timed out has no CPU times.
            user_seconds: f64::NAN,
            system_seconds: 0.05,
            stats: [("overflows".to_string(), 7)].into_iter().collect(),
            stderr_tail: String::new(),
        };
        let part = Part {
            experiment: "summation_single".into(),
            session: crate::part::new_session(dir.path()),
            settings: settings(),
            seconds: 12.5,
            records: vec![Record {
                experiment: "summation_single",
                x: 1000.0,
                target: Target::X86_64,
                variant: "lookahead".into(),
                round: 1,
                args: "1000".into(),
                outcome,
            }],
            notes: Vec::new(),
            counts: Vec::new(),
            stacks: vec![("summation_single x=1000".into(), "65536".into())],
            mtss: Vec::new(),
        };
        crate::part::write(dir.path(), &part.experiment, &part).unwrap();
        let back = earlier_parts(dir.path(), &settings()).unwrap();
        assert_eq!(back.len(), 1);
        assert_eq!(back[0].experiment, "summation_single");
        assert_eq!(back[0].session, part.session);
        assert_eq!(back[0].records[0].experiment, "summation_single");
        assert_eq!(back[0].records[0].outcome.stats["overflows"], 7);
        assert!(back[0].records[0].outcome.user_seconds.is_nan());
        assert_eq!(back[0].records[0].outcome.system_seconds, 0.05);
        assert_eq!(back[0].stacks, part.stacks);
        let v = Variant {
            target: Target::I686,
            tool: Toolchain::Cmm {
                mech: "mtss".into(),
                green: true,
            },
        };
        let json = serde_json::to_string(&v).unwrap();
        assert_eq!(serde_json::from_str::<Variant>(&json).unwrap(), v);
        let mut other = settings();
        other.runs = 10;
        let err = earlier_parts(dir.path(), &other).unwrap_err();
        assert!(err.contains("other settings"), "{err}");
        assert!(earlier_parts(&dir.path().join("none"), &settings())
            .unwrap()
            .is_empty());
    }

    #[test]
    fn slow_executables_get_fewer_rounds_but_at_least_three() {
        let budget = Some(Duration::from_secs(10));
        assert_eq!(rounds_within(None, 10, 100.0), 10);
        assert_eq!(rounds_within(budget, 10, 0.5), 10);
        assert_eq!(rounds_within(budget, 10, 1.0), 10);
        assert_eq!(rounds_within(budget, 10, 2.5), 4);
        assert_eq!(rounds_within(budget, 10, 91.0), MIN_ROUNDS);
        assert_eq!(rounds_within(budget, 2, 91.0), 2);
        assert_eq!(rounds_within(budget, 10, 0.0), 10);
    }

    #[test]
    fn running_out_of_memory_mappings_or_threads_is_a_limit_not_a_failure() {
        // Messages of the full run of 2026-11-24 (its report was in docs/experiments/).
        for limit in [
            "exit status 1 sthread_create: cannot map a stack of 65536 bytes for green thread \
             32745: ENOMEM: Out of memory",
            "exit status 70 stackrt: thread 18009 (tid 23005): out of memory for stack chunks: \
             18956517376 bytes used by all threads",
            "exit status 1 sthread_create: cannot create thread 32450: Resource temporarily \
             unavailable",
            // The full run of 2026-11-27, green_alive under mtss on i686 at 100,000 threads.
            "exit status 70 stackrt: mtss: no room in the stack region for green thread 16130's \
             stack of 66048 bytes: mtss: no 66048-byte extent (65024 free)",
        ] {
            assert!(out_of_resources(limit), "{limit}");
        }
        assert!(out_of_resources(&crate::run::Ending::OomKilled.describe()));
        assert!(!out_of_resources(
            &crate::run::Ending::Signaled(9).describe()
        ));
        assert!(!out_of_resources("killed by signal 11 (SIGSEGV)"));
        assert!(!out_of_resources(
            "prints something else than x86_64 traditional"
        ));
    }

    #[test]
    fn the_hot_split_does_not_apply_to_fixed_stacks_or_heap_frames() {
        let cmm = |mech: &str| Variant {
            target: Target::X86_64,
            tool: Toolchain::Cmm {
                mech: mech.into(),
                green: false,
            },
        };
        for mech in ["traditional", "callee-cleanup", "heap", "heap-malloc"] {
            assert!(not_applicable_to_chunked(&cmm(mech)).is_some(), "{mech}");
        }
        assert!(not_applicable_to_chunked(&cmm("mtss")).is_some());
        for mech in ["lookahead", "mmu", "mmu-reuse"] {
            assert!(not_applicable_to_chunked(&cmm(mech)).is_none(), "{mech}");
        }
    }
}
