//! The experiments of the thesis (section 3.5, chapter 4) and the paper (sections 5-6), with
//! their parameters: the thesis's in the full run wherever that fits the 2-hour budget,
//! reduced in `--quick`; every reduction is written next to the thesis's value and printed in
//! the report.

use crate::build::{GccLevel, RaceRun, Sources, Target};
use crate::run::MainStack;
use std::path::Path;

/// Arguments may contain `{stack}` (the thread stack size: just big enough for fixed stacks,
/// see [`Probe`]) and `{boundary}` (the recursion depth at which the hot split's loop call sits
/// on a chunk boundary, found per executable).
pub const STACK_TOKEN: &str = "{stack}";
pub const BOUNDARY_TOKEN: &str = "{boundary}";
/// In a [`Probe`]'s arguments: the recursion depth.
pub const DEPTH_TOKEN: &str = "{depth}";

/// How to find a fixed-stack executable's "just big enough" thread stack for a point: the
/// smallest working stack is searched at two small depths with one thread (`args` with
/// `{depth}` and `{stack}`), and extrapolated linearly to `depth`.
#[derive(Debug, Clone)]
pub struct Probe {
    pub args: Vec<String>,
    pub depth: u64,
    pub small_depths: (u64, u64),
}

/// One x value of an experiment.
#[derive(Debug, Clone)]
pub struct Point {
    pub x: f64,
    pub args: Vec<String>,
    pub probe: Option<Probe>,
    /// Threads the program runs (their fixed stacks must fit in memory together).
    pub threads: u64,
    /// Units of work (calls, overflow-underflow pairs) for a per-unit time, if meaningful.
    pub work: Option<f64>,
    /// Measured on x86-64 only (the experiment's reductions say why).
    pub x86_64_only: bool,
    /// The least memory the Go peer can need here (0: no estimate): where it exceeds 3/4 of
    /// physical memory the peer is not run (the kernel's OOM killer would end it, and perhaps
    /// another process of the machine's first).
    pub go_least_bytes: u64,
}

/// Which mechanisms an experiment compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanisms {
    All,
    /// Only mechanisms that grow the stack in chunks (the hot split exists only there).
    Chunked,
    /// Only these mechanisms.
    Listed(&'static [&'static str]),
}

/// How the report derives the experiment's headline numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Time (and peak RSS) against x.
    Curve,
    /// Time per unit of work against x (ns per call).
    PerUnit,
    /// Two points, x = 0 (no chunk crossed) and x = 1 (every iteration crosses): ns per pair.
    HotSplit,
}

/// One experiment: a program, its points, the peers it is compared with.
#[derive(Debug, Clone)]
pub struct Experiment {
    pub name: &'static str,
    pub title: &'static str,
    /// The thesis/paper figures it re-draws.
    pub figures: &'static str,
    pub sources: Sources,
    pub x_label: &'static str,
    pub log_x: bool,
    pub points: Vec<Point>,
    pub mechanisms: Mechanisms,
    pub gcc: Vec<GccLevel>,
    pub native: bool,
    pub go: bool,
    pub main_stack: MainStack,
    pub shape: Shape,
    /// The variant every other is compared with (ratio plots and tables): `traditional`, or for
    /// experiments that do not run it, another.
    pub baseline: &'static str,
    /// What one unit of [`Point::work`] is ("call", "yield", "overflow-underflow pair").
    pub unit: &'static str,
    /// Extra one-off measurements at the first point (instruction or system-call counts).
    pub counts: Vec<Count>,
    /// "parameter: thesis value -> value here" lines.
    pub reductions: Vec<String>,
    /// Environment variables of every run (all variants: C--, gcc and Go executables).
    pub env: Vec<(String, String)>,
    /// Mechanisms also run with `--threads green` (a second variant each, beside the one on
    /// OS threads).
    pub green: &'static [&'static str],
    /// Runs of a `--race` build of each mechanism, beside its plain build: detection on OS
    /// threads and (for mechanisms of [`Experiment::green`]) green threads, replays of a trace
    /// the harness records first (strict and relaxed on green threads; relaxed with 0 workers:
    /// on OS threads).
    pub race: Vec<crate::build::RaceRun>,
}

/// A one-off count made with a tool, once per executable at an experiment's first point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Count {
    /// User-space instructions of the whole process (valgrind's `I refs`): deterministic,
    /// immune to the machine's noise.
    Instructions,
    /// System calls (`strace -f -c`), with the program's last argument (its repetitions) as
    /// given and divided by 10: equal counts mean none per repetition.
    Syscalls,
}

/// Experiment sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Size {
    /// Under 5 minutes on a 2-core machine.
    Quick,
    /// The thesis's parameters where they fit a 2-hour run.
    Full,
    /// Seconds: for the CI smoke test.
    Tiny,
}

/// Instruction counts run every executable under valgrind (tens of times slower): the full run
/// only, so that `--quick` fits its 5 minutes.
fn instruction_counts(size: Size) -> Vec<Count> {
    match size {
        Size::Full => vec![Count::Instructions],
        Size::Quick | Size::Tiny => Vec::new(),
    }
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn pick<T: Clone>(size: Size, full: T, quick: T, tiny: T) -> T {
    match size {
        Size::Full => full,
        Size::Quick => quick,
        Size::Tiny => tiny,
    }
}

/// The most threads `green_alive` keeps alive on i686.
const I686_MOST_ALIVE: u64 = 100_000;
const THREADED_MAIN_STACK: MainStack = MainStack::KiB(256 * 1024);
const ALL_GCC: [GccLevel; 4] = [
    GccLevel::O0,
    GccLevel::O2NoSibling,
    GccLevel::O2,
    GccLevel::SplitStack,
];

/// Bytes per level of `tests/green/grid.cm`'s three recursions under `lookahead` with
/// `--threads green`, by their size class (the frame argument: about 16, 48 or 256 bytes): the
/// frame, the arguments and the return address of one level, as the assembly's frame lines
/// give them (`tests/green.rs` checks these numbers against `cmm compile --emit asm`, so a code
/// generator that changes them must change them here).
pub fn grid_level_bytes(target: Target, frame: u64) -> Option<u64> {
    Some(match (target, frame) {
        (Target::X86_64, 16) => 16,
        (Target::X86_64, 48) => 24,
        (Target::X86_64, 256) => 240,
        (Target::I686, 16) => 8,
        (Target::I686, 48) => 12,
        (Target::I686, 256) => 216,
        _ => return None,
    })
}

/// How the threads of a `green_grid` point wait for each other (`tests/green/grid.cm`'s fourth
/// argument).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GridWait {
    /// Parked on a mutex.
    Mutex,
    /// Yielding in a loop.
    Yield,
    /// Parked on a mutex, one thread in a hundred a hundred times deeper than the others.
    Mixed,
}

impl GridWait {
    pub const ALL: [GridWait; 3] = [GridWait::Mutex, GridWait::Yield, GridWait::Mixed];

    /// The program's argument.
    pub fn arg(self) -> &'static str {
        match self {
            GridWait::Mutex => "mutex",
            GridWait::Yield => "yield",
            GridWait::Mixed => "mixed",
        }
    }

    /// One word for a point's description.
    pub fn word(self) -> &'static str {
        match self {
            GridWait::Mutex => "parked",
            GridWait::Yield => "yielding",
            GridWait::Mixed => "parked, 1% 100x deeper",
        }
    }

    /// A title for the points that wait this way.
    pub fn title(self) -> &'static str {
        match self {
            GridWait::Mutex => "parked on a mutex",
            GridWait::Yield => "waiting by yielding",
            GridWait::Mixed => {
                "parked on a mutex, one in a hundred (every hundredth thread) a hundred times deeper"
            }
        }
    }
}

/// One point of `green_grid`, read back from its arguments (THREADS DEPTH FRAME WAIT).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GridShape {
    pub threads: u64,
    /// The depth of most threads (under [`GridWait::Mixed`], every hundredth goes 100x deeper).
    pub depth: u64,
    /// The frame argument, a size class: 16, 48 or 256 (see [`grid_level_bytes`]).
    pub frame: u64,
    pub wait: GridWait,
}

impl GridShape {
    pub fn of(args: &[String]) -> Option<GridShape> {
        let [threads, depth, frame, wait] = args else {
            return None;
        };
        Some(GridShape {
            threads: threads.parse().ok()?,
            depth: depth.parse().ok()?,
            frame: frame.parse().ok()?,
            wait: *GridWait::ALL.iter().find(|w| w.arg() == wait)?,
        })
    }

    /// The live frames of one thread, on average: depth x bytes per level (under
    /// [`GridWait::Mixed`], the threads numbered 0, 100, 200, ... go 100 x depth deep).
    pub fn floor_per_thread(&self, target: Target) -> Option<u64> {
        let level = grid_level_bytes(target, self.frame)?;
        Some(match self.wait {
            GridWait::Mixed => {
                let deep = self.threads.div_ceil(100);
                let levels = (self.threads - deep) * self.depth + deep * 100 * self.depth;
                levels * level / self.threads.max(1)
            }
            _ => self.depth * level,
        })
    }
}

/// The grid's points above this floor (all threads' live frames on x86-64) are not run: 1,000,000
/// threads 1000 deep or 100 deep with 256-byte frames, and 100,000 threads 1000 deep with
/// 256-byte frames need 26-264 GB of frames alone.
const GRID_MOST_FLOOR: u64 = 6 << 30;
/// On i686 only the points whose floor is at most this (a 32-bit address space holds 3-4 GiB,
/// and Go doubles a goroutine's stack when it grows).
const GRID_I686_MOST_FLOOR: u64 = 1 << 30;
/// Go cannot go below this per goroutine: a 2 KiB stack and its goroutine record (about 400
/// bytes).
const GO_LEAST_PER_GOROUTINE: u64 = 2048 + 384;

/// The points of `green_grid`: x is the point's number, its arguments say its shape (the
/// report's grid tables read them back with [`GridShape::of`]).
fn grid_points(size: Size) -> Vec<Point> {
    let (threads, depths, frames): (Vec<u64>, Vec<u64>, Vec<u64>) = pick(
        size,
        (
            vec![10_000, 100_000, 1_000_000],
            vec![10, 100, 1000],
            vec![16, 48, 256],
        ),
        (vec![10_000], vec![10, 100], vec![16, 256]),
        (vec![1_000], vec![10], vec![16]),
    );
    let mut shapes = Vec::new();
    for wait in GridWait::ALL {
        for &t in &threads {
            // Mixed depths up to 100,000 threads and 100 deep (10,000 deep for the deepest):
            // Go's goroutines 10,000 deep double their stacks to 1 MiB each.
            if wait == GridWait::Mixed && t > 100_000 {
                continue;
            }
            for &d in &depths {
                if wait == GridWait::Mixed && d > 100 {
                    continue;
                }
                for &f in &frames {
                    shapes.push(GridShape {
                        threads: t,
                        depth: d,
                        frame: f,
                        wait,
                    });
                }
            }
        }
    }
    if size == Size::Full {
        // Ten million threads at depth 10: the target that needs a green thread far below Go's
        // 2 KiB (x86-64 only: a 32-bit address space holds under 430 bytes per thread).
        shapes.push(GridShape {
            threads: 10_000_000,
            depth: 10,
            frame: 16,
            wait: GridWait::Mutex,
        });
    }
    shapes
        .into_iter()
        .filter(|s| s.threads * s.floor_per_thread(Target::X86_64).unwrap_or(0) <= GRID_MOST_FLOOR)
        .enumerate()
        .map(|(i, s)| {
            let floor = s.threads * s.floor_per_thread(Target::X86_64).unwrap_or(0);
            Point {
                x: (i + 1) as f64,
                args: vec![
                    s.threads.to_string(),
                    s.depth.to_string(),
                    s.frame.to_string(),
                    s.wait.arg().to_string(),
                ],
                probe: None,
                threads: s.threads,
                work: None,
                x86_64_only: s.threads > I686_MOST_ALIVE || floor > GRID_I686_MOST_FLOOR,
                go_least_bytes: s.threads * GO_LEAST_PER_GOROUTINE,
            }
        })
        .collect()
}

/// Every experiment at `size`. `root` is the workspace root.
pub fn all(root: &Path, size: Size) -> Vec<Experiment> {
    let thesis = |file: &str| root.join("tests/programs/thesis").join(file);
    let go = |file: &str| Some(root.join("crates/bench/programs/go").join(file));
    let cm = |file: &str, go_file: Option<&str>| Sources {
        cm: thesis(file),
        go: go_file.and_then(go),
        cmm_options: Vec::new(),
    };
    let mut list = Vec::new();
    // Depths at which the smallest fixed stacks are searched (see `Probe`); tiny runs (the CI
    // smoke test) search shallower.
    let calibration: (u64, u64) = pick(size, (50_000, 250_000), (50_000, 250_000), (2_000, 12_000));

    // --- Summation (thesis 3.5.1, figures 4.1-4.4; paper figures 5, 6, 9-11) ---
    let sum_ns: Vec<u64> = pick(
        size,
        vec![1, 10, 100]
            .into_iter()
            .map(|m| m * 1_000_000)
            .collect(),
        vec![1_000_000, 3_000_000],
        vec![20_000],
    );
    list.push(Experiment {
        name: "summation_single",
        env: Vec::new(),
        race: Vec::new(),
        green: &[],
        title: "Deep Summation, single-threaded",
        figures: "thesis figures 4.1, 4.2; paper figures 5, 6",
        sources: cm("summation_single.cm", Some("summation_single.go")),
        x_label: "n (recursion depth)",
        log_x: false,
        points: sum_ns
            .iter()
            .map(|&n| Point {
                x: n as f64,
                args: vec![n.to_string()],
                probe: None,
                threads: 1,
                work: Some(n as f64),
                x86_64_only: false,
                go_least_bytes: 0,
            })
            .collect(),
        mechanisms: Mechanisms::All,
        gcc: ALL_GCC.to_vec(),
        native: true,
        go: true,
        main_stack: MainStack::Unlimited,
        shape: Shape::Curve,
        baseline: "traditional",
        unit: "call",
        counts: instruction_counts(size),
        reductions: vec![format!(
            "n: thesis 1, 5, 10, 30, 50, 70, 100 million -> {sum_ns:?} (the curve is linear; the 2-hour budget)"
        )],
    });

    let sum_total: u64 = pick(size, 10_000_000, 2_000_000, 40_000);
    let summation_multi = |name, title, figures, threads: Vec<u64>, thesis_threads: &str| {
        Experiment {
            name,
            env: Vec::new(),
            race: Vec::new(),
        green: &[],
            title,
            figures,
            sources: cm("summation_multi.cm", Some("summation_multi.go")),
            x_label: "threads",
            log_x: name.ends_with("quantity"),
            points: threads
                .iter()
                .map(|&t| {
                    let depth = sum_total / t;
                    Point {
                        x: t as f64,
                        args: vec![t.to_string(), depth.to_string(), STACK_TOKEN.into()],
                        probe: Some(Probe {
                            args: strings(&["1", DEPTH_TOKEN, STACK_TOKEN]),
                            depth,
                            small_depths: calibration,
                        }),
                        threads: t,
                        work: Some(sum_total as f64),
                        x86_64_only: false,
                        go_least_bytes: 0,
                    }
                })
                .collect(),
            mechanisms: Mechanisms::All,
            gcc: ALL_GCC.to_vec(),
            native: true,
            go: true,
            main_stack: THREADED_MAIN_STACK,
            shape: Shape::Curve,
            baseline: "traditional",
            unit: "call",
            counts: vec![],
            reductions: vec![
                format!("n (summed over all threads, n / threads each): thesis 100 million -> {sum_total} (the 2-hour budget: 16 executables x 8 points x 11 runs)"),
                format!("threads: thesis {thesis_threads} -> {threads:?}"),
            ],
        }
    };
    list.push(summation_multi(
        "summation_cores",
        "Summation multi-threaded, \"cores\"",
        "thesis figure 4.3; paper figures 9, 10 (left)",
        pick(size, (1..=8).collect(), vec![1, 2], vec![1, 2]),
        "1-8",
    ));
    list.push(summation_multi(
        "summation_quantity",
        "Summation multi-threaded, \"quantity\"",
        "thesis figure 4.4; paper figures 9, 10 (right)",
        pick(
            size,
            vec![8, 16, 32, 64, 128, 256, 512, 1024],
            vec![8, 512],
            vec![8],
        ),
        "8, 16, 32, 64, 128, 256, 512, 1024",
    ));

    // --- Big Summation (paper section 5, figures 11 and 12) ---
    let repeat_total: u64 = pick(size, 5_000_000, 500_000, 20_000);
    let repeat_threads: Vec<u64> = pick(size, vec![8, 64, 512, 1024], vec![8, 256], vec![4]);
    list.push(Experiment {
        name: "summation_repeat",
        env: Vec::new(),
        race: Vec::new(),
        green: &[],
        title: "Summation multi-threaded, repeated 10 times",
        figures: "paper figure 11",
        sources: cm("big_summation.cm", None),
        x_label: "threads",
        log_x: true,
        points: repeat_threads
            .iter()
            .map(|&t| {
                let depth = repeat_total / t;
                Point {
                    x: t as f64,
                    args: vec![
                        t.to_string(),
                        depth.to_string(),
                        "16".into(),
                        "10".into(),
                        STACK_TOKEN.into(),
                    ],
                    probe: Some(Probe {
                        args: strings(&["1", DEPTH_TOKEN, "16", "1", STACK_TOKEN]),
                        depth,
                        small_depths: calibration,
                    }),
                    threads: t,
                    work: Some(10.0 * repeat_total as f64),
                    x86_64_only: false,
                    go_least_bytes: 0,
                }
            })
            .collect(),
        mechanisms: Mechanisms::All,
        gcc: ALL_GCC.to_vec(),
        native: true,
        go: false,
        main_stack: THREADED_MAIN_STACK,
        shape: Shape::Curve,
        baseline: "traditional",
        unit: "call",
        counts: vec![],
        reductions: vec![
            format!(
                "n (over all threads): the paper does not say (its figure 11 runs for seconds) -> {repeat_total}, 10 repeats, 16-byte frames (big_summation.cm)"
            ),
            format!("threads: paper 8-1024 -> {repeat_threads:?}"),
        ],
    });

    let frame_sizes: Vec<u64> = pick(
        size,
        (1..=8).map(|k| k * 16).collect(),
        vec![16, 128],
        vec![16, 128],
    );
    let (big_threads, big_n): (u64, u64) = pick(size, (4, 1_000_000), (2, 300_000), (2, 10_000));
    list.push(Experiment {
        name: "big_summation",
        env: Vec::new(),
        race: Vec::new(),
        green: &[],
        title: "Big Summation: frame size",
        figures: "paper figure 12",
        sources: cm("big_summation.cm", None),
        x_label: "frame size (bytes, thesis accounting)",
        log_x: false,
        points: frame_sizes
            .iter()
            .map(|&f| Point {
                x: f as f64,
                args: vec![
                    big_threads.to_string(),
                    big_n.to_string(),
                    f.to_string(),
                    "1".into(),
                    STACK_TOKEN.into(),
                ],
                probe: Some(Probe {
                    args: vec![
                        "1".into(),
                        DEPTH_TOKEN.into(),
                        f.to_string(),
                        "1".into(),
                        STACK_TOKEN.into(),
                    ],
                    depth: big_n,
                    small_depths: calibration,
                }),
                threads: big_threads,
                work: Some((big_threads * big_n) as f64),
                x86_64_only: false,
                go_least_bytes: 0,
            })
            .collect(),
        mechanisms: Mechanisms::All,
        gcc: ALL_GCC.to_vec(),
        native: true,
        go: false,
        main_stack: THREADED_MAIN_STACK,
        shape: Shape::Curve,
        baseline: "traditional",
        unit: "call",
        counts: vec![],
        reductions: vec![format!(
            "threads x n: the paper does not say -> {big_threads} threads x {big_n}, one run; frame sizes {frame_sizes:?} (paper 16-128)"
        )],
    });

    // --- Unbalanced Binary Tree (thesis 3.5.2, figures 4.5-4.8; paper figures 7, 13) ---
    let (balanced, unbalanced): (u64, u64) = pick(
        size,
        (1_048_575, 1_000_000),
        (65_535, 100_000),
        (1_023, 2_000),
    );
    let tree_reduction = vec![format!(
        "tree: thesis 2^20-1 balanced nodes and a 1,000,000-node branch -> {balanced} and {unbalanced}"
    )];
    let searches: Vec<u64> = pick(size, vec![10, 100, 200], vec![10, 40], vec![10]);
    let mut single_reductions = tree_reduction.clone();
    single_reductions.push(format!(
        "searches: thesis 10, 100, 500, 1000 -> {searches:?} (a spike search is 1,000,000 calls; the 2-hour budget)"
    ));
    list.push(Experiment {
        name: "tree_single",
        env: Vec::new(),
        race: Vec::new(),
        green: &[],
        title: "Unbalanced Binary Tree, single-threaded",
        figures: "thesis figures 4.5, 4.6; paper figure 7",
        sources: cm("tree_single.cm", Some("tree.go")),
        x_label: "searches (30% spikes)",
        log_x: false,
        points: searches
            .iter()
            .map(|&s| Point {
                x: s as f64,
                args: vec![
                    balanced.to_string(),
                    unbalanced.to_string(),
                    "0.3".into(),
                    s.to_string(),
                ],
                probe: None,
                threads: 1,
                work: None,
                x86_64_only: false,
                go_least_bytes: 0,
            })
            .collect(),
        mechanisms: Mechanisms::All,
        gcc: ALL_GCC.to_vec(),
        native: true,
        go: true,
        main_stack: MainStack::Unlimited,
        shape: Shape::Curve,
        baseline: "traditional",
        unit: "call",
        counts: instruction_counts(size),
        reductions: single_reductions,
    });
    let tree_searches: u64 = pick(size, 5, 3, 4);
    // tree_multi's fixed stacks are probed with one thread's spike `depth` levels deep.
    let tree_probe = |depth: u64| Probe {
        args: vec![
            "1000".into(),
            DEPTH_TOKEN.into(),
            "1.0".into(),
            "1".into(),
            "1".into(),
            STACK_TOKEN.into(),
        ],
        depth,
        small_depths: calibration,
    };
    // One point of tree_multi: `t` threads of `per_thread` searches with `spike` of them
    // spikes; fixed stacks are probed with one thread's spike.
    let tree_point = |t: u64, spike: &str, per_thread: u64| Point {
        x: t as f64,
        args: vec![
            balanced.to_string(),
            unbalanced.to_string(),
            spike.into(),
            per_thread.to_string(),
            t.to_string(),
            STACK_TOKEN.into(),
        ],
        probe: Some(tree_probe(unbalanced)),
        threads: t,
        work: None,
        x86_64_only: false,
        go_least_bytes: 0,
    };
    let tree_multi = |name, title, figures, threads: Vec<u64>, spike: &str, per_thread: u64| {
        let mut reductions = tree_reduction.clone();
        if per_thread != 1 {
            reductions.push(format!(
                "searches per thread: thesis 100 -> {per_thread} (64 threads x 100 searches x 30% spikes is 1.9 billion calls per run and executable)"
            ));
        }
        Experiment {
            name,
            env: Vec::new(),
            race: Vec::new(),
            green: &[],
            title,
            figures,
            sources: cm("tree_multi.cm", Some("tree.go")),
            x_label: "threads",
            log_x: !name.ends_with("cores"),
            points: threads
                .iter()
                .map(|&t| tree_point(t, spike, per_thread))
                .collect(),
            mechanisms: Mechanisms::All,
            gcc: ALL_GCC.to_vec(),
            native: true,
            // Go's goroutine stacks grow by copying (twice the depth's memory for a moment):
            // thousands of goroutines all spiking 1,000,000 deep would exhaust the machine.
            go: !name.ends_with("spike"),
            main_stack: THREADED_MAIN_STACK,
            shape: Shape::Curve,
            baseline: "traditional",
            unit: "call",
            counts: vec![],
            reductions,
        }
    };
    let cores: Vec<u64> = pick(size, vec![1, 2, 4, 8], vec![1, 2], vec![2]);
    let mut e = tree_multi(
        "tree_cores",
        "Unbalanced Binary Tree multi-threaded, \"cores\"",
        "thesis figure 4.7; paper figure 13 (left)",
        cores.clone(),
        "0.3",
        tree_searches,
    );
    e.reductions.push(format!(
        "threads: thesis 1-8 -> {cores:?} (this machine has {} CPUs)",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    ));
    list.push(e);
    let quantity: Vec<u64> = pick(size, vec![8, 16, 32, 64], vec![8, 64], vec![8]);
    let mut e = tree_multi(
        "tree_quantity",
        "Unbalanced Binary Tree multi-threaded, \"quantity\"",
        "thesis figure 4.8; paper figure 13 (right)",
        quantity.clone(),
        "0.3",
        tree_searches,
    );
    e.reductions
        .push(format!("threads: thesis 8, 16, 32, 64 -> {quantity:?}"));
    list.push(e);
    let spikes: Vec<u64> = pick(size, vec![64, 256, 1024], vec![16, 64], vec![16]);
    let spike_branch: u64 = pick(size, 100_000, 100_000, 2_000);
    let mut e = tree_multi(
        "tree_spike",
        "Unbalanced Binary Tree, one spike per thread",
        "beyond the thesis (its figure 4.8 stops at 64 threads): one search per thread, always a spike",
        spikes,
        "1.0",
        1,
    );
    e.reductions = vec![
        format!("tree: thesis 2^20-1 balanced nodes and a 1,000,000-node branch -> {balanced} and {spike_branch}"),
        "one search per thread, always a spike (100 searches with 30% spikes at 1024 threads would take hours per run)".into(),
    ];
    for point in &mut e.points {
        point.args[1] = spike_branch.to_string();
        if let Some(probe) = &mut point.probe {
            probe.depth = spike_branch;
        }
    }
    list.push(e);

    // --- "Real World" (thesis 3.5.3, figures 4.9-4.14) ---
    let (nonrec_work, rec_work): (u64, u64) =
        pick(size, (1_000_000, 10_000), (100_000, 1_000), (1_000, 10));
    let work_reduction = format!(
        "work per non-recursive / recursive call: thesis 10,000,000 / 10,000 -> {nonrec_work} / {rec_work}"
    );
    let iterations: Vec<u64> = pick(size, vec![10, 50, 100], vec![10, 20], vec![2]);
    list.push(Experiment {
        name: "realworld_single",
        env: Vec::new(),
        race: Vec::new(),
        green: &[],
        title: "\"Real World\", single-threaded",
        figures: "thesis figures 4.9, 4.10",
        sources: cm("realworld_single.cm", None),
        x_label: "overall iterations",
        log_x: false,
        points: iterations
            .iter()
            .map(|&i| Point {
                x: i as f64,
                args: vec![
                    i.to_string(),
                    "100".into(),
                    nonrec_work.to_string(),
                    rec_work.to_string(),
                ],
                probe: None,
                threads: 1,
                work: None,
                x86_64_only: false,
                go_least_bytes: 0,
            })
            .collect(),
        mechanisms: Mechanisms::All,
        // gcc -O2 folds the work loops into constants (thesis 4.3): only -O0 is a peer.
        gcc: vec![GccLevel::O0],
        native: true,
        go: false,
        main_stack: MainStack::Unlimited,
        shape: Shape::Curve,
        baseline: "traditional",
        unit: "call",
        counts: instruction_counts(size),
        reductions: vec![
            work_reduction.clone(),
            format!("overall iterations: thesis 100-1000 -> {iterations:?}"),
        ],
    });
    let (rw_nonrec_many, rw_rec_many): (u64, u64) = (nonrec_work / 20, rec_work / 20);
    let realworld_multi =
        |name, title, figures, threads: Vec<u64>, work: (u64, u64), note| Experiment {
            name,
            env: Vec::new(),
            race: Vec::new(),
            green: &[],
            title,
            figures,
            sources: cm("realworld_multi.cm", None),
            x_label: "threads",
            log_x: false,
            points: threads
                .iter()
                .map(|&t| Point {
                    x: t as f64,
                    args: vec![
                        t.to_string(),
                        "10".into(),
                        "100".into(),
                        work.0.to_string(),
                        work.1.to_string(),
                        STACK_TOKEN.into(),
                    ],
                    probe: Some(Probe {
                        args: vec![
                            "1".into(),
                            "1".into(),
                            DEPTH_TOKEN.into(),
                            "10".into(),
                            "10".into(),
                            STACK_TOKEN.into(),
                        ],
                        depth: 100,
                        small_depths: (100, 2_000),
                    }),
                    threads: t,
                    work: None,
                    x86_64_only: false,
                    go_least_bytes: 0,
                })
                .collect(),
            mechanisms: Mechanisms::All,
            gcc: vec![GccLevel::O0],
            native: true,
            go: false,
            main_stack: THREADED_MAIN_STACK,
            shape: Shape::Curve,
            baseline: "traditional",
            unit: "call",
            counts: vec![],
            reductions: vec![note],
        };
    let rw_cores: Vec<u64> = pick(size, (1..=8).collect(), vec![1, 2], vec![2]);
    list.push(realworld_multi(
        "realworld_cores",
        "\"Real World\" multi-threaded, \"cores\"",
        "thesis figures 4.11, 4.12",
        rw_cores.clone(),
        (nonrec_work, rec_work),
        format!("{work_reduction}; threads: thesis 1-8 -> {rw_cores:?}"),
    ));
    let rw_quantity: Vec<u64> = pick(size, vec![100, 500, 1000], vec![50, 200], vec![16]);
    list.push(realworld_multi(
        "realworld_quantity",
        "\"Real World\" multi-threaded, \"quantity\"",
        "thesis figures 4.13, 4.14",
        rw_quantity.clone(),
        (rw_nonrec_many, rw_rec_many),
        format!(
            "work per non-recursive / recursive call: thesis 10,000,000 / 10,000 -> {rw_nonrec_many} / {rw_rec_many}; threads: thesis 100-1000 -> {rw_quantity:?}"
        ),
    ));

    // --- Quicksort (paper section 5, figure 8) ---
    let counts: Vec<u64> = pick(
        size,
        vec![1_000_000, 10_000_000],
        vec![100_000, 500_000],
        vec![10_000],
    );
    list.push(Experiment {
        name: "quicksort",
        env: Vec::new(),
        race: Vec::new(),
        green: &[],
        title: "Quicksort, single-threaded",
        figures: "paper figure 8",
        sources: cm("quicksort.cm", None),
        x_label: "integers sorted",
        log_x: true,
        points: counts
            .iter()
            .map(|&c| Point {
                x: c as f64,
                args: vec![c.to_string(), "12345".into()],
                probe: None,
                threads: 1,
                work: None,
                x86_64_only: false,
                go_least_bytes: 0,
            })
            .collect(),
        mechanisms: Mechanisms::All,
        gcc: ALL_GCC.to_vec(),
        native: true,
        go: false,
        main_stack: MainStack::Unlimited,
        shape: Shape::Curve,
        baseline: "traditional",
        unit: "call",
        counts: instruction_counts(size),
        reductions: vec![format!(
            "integers: paper 10^6, 10^7, 10^8 -> {counts:?} (10^8: about 10 s per run and executable, over the full run's budget)"
        )],
    });

    // --- Micro-benchmarks ---
    let total_calls: u64 = pick(size, 30_000_000, 4_000_000, 200_000);
    let depths: Vec<u64> = pick(
        size,
        vec![
            8, 16, 32, 64, 256, 4_096, 16_384, 65_536, 262_144, 1_000_000, 4_000_000,
        ],
        vec![16, 4_096, 1_000_000],
        vec![16, 1_000],
    );
    list.push(Experiment {
        name: "call_depth",
        env: Vec::new(),
        race: Vec::new(),
        green: &[],
        title: "Cost of a call against recursion depth",
        figures: "explains paper section 6.1 (\"surprisingly\"): why callee-cleanup beats traditional deep down",
        sources: Sources {
            cm: root.join("crates/bench/programs/deep_repeat.cm"),
            go: None,
            cmm_options: Vec::new(),
        },
        x_label: "recursion depth (repeated to the same total number of calls)",
        log_x: true,
        points: depths
            .iter()
            .map(|&d| {
                let reps = (total_calls / d).max(1);
                Point {
                    x: d as f64,
                    args: vec![d.to_string(), reps.to_string()],
                    probe: None,
                    threads: 1,
                    work: Some((d * reps) as f64),
                    x86_64_only: false,
                    go_least_bytes: 0,
                }
            })
            .collect(),
        mechanisms: Mechanisms::All,
        gcc: vec![GccLevel::O0, GccLevel::O2NoSibling],
        native: true,
        go: false,
        main_stack: MainStack::Unlimited,
        shape: Shape::PerUnit,
        baseline: "traditional",
        unit: "call",
        counts: vec![Count::Syscalls],
        reductions: vec![format!(
            "{total_calls} calls per run at every depth: depths below the return stack buffer (16-32 entries), \
             within the L1/L2 caches, and far beyond the last-level cache"
        )],
    });
    let (unwind_depth, unwind_reps): (u64, u64) =
        pick(size, (30_000, 1_000), (30_000, 200), (1_000, 10));
    list.push(Experiment {
        name: "unwind_call",
        env: Vec::new(),
        race: Vec::new(),
        green: &[],
        title: "A C call every 8192 levels while a deep recursion unwinds",
        figures: "the cost the lookahead underflow avoids by making no call (ARCHITECTURE.md)",
        sources: Sources {
            cm: root.join("crates/bench/programs/deep_repeat.cm"),
            go: None,
            cmm_options: Vec::new(),
        },
        x_label: "levels between C calls on the way up (0 = none)",
        log_x: false,
        points: [0u64, 8192]
            .iter()
            .map(|&every| Point {
                x: every as f64,
                args: vec![
                    unwind_depth.to_string(),
                    unwind_reps.to_string(),
                    every.to_string(),
                ],
                probe: None,
                threads: 1,
                work: Some((unwind_depth * unwind_reps) as f64),
                x86_64_only: false,
                go_least_bytes: 0,
            })
            .collect(),
        mechanisms: Mechanisms::All,
        gcc: vec![GccLevel::O0, GccLevel::O2NoSibling],
        native: true,
        go: false,
        main_stack: MainStack::Unlimited,
        shape: Shape::PerUnit,
        baseline: "traditional",
        unit: "call",
        counts: vec![],
        reductions: vec![format!(
            "a {unwind_depth}-deep recursion repeated {unwind_reps} times"
        )],
    });
    let pairs: u64 = pick(size, 500_000, 100_000, 20_000);
    list.push(Experiment {
        name: "hot_split",
        env: Vec::new(),
        race: Vec::new(),
        green: &[],
        title: "Cost of one overflow and underflow (the hot split)",
        figures: "thesis 3.4.3 / paper section 4 (the cost the chunked mechanisms add)",
        sources: Sources {
            cm: root.join("tests/lookahead/hot_split.cm"),
            go: None,
            // The same chunk size for every chunked mechanism: the boundary search sweeps
            // depths up to 20000, and each mechanism's default could differ.
            cmm_options: vec!["--chunk-size".into(), "32768".into()],
        },
        x_label: "0 = no chunk crossed, 1 = every iteration crosses a chunk boundary",
        log_x: false,
        points: vec![
            Point {
                x: 0.0,
                args: vec!["10".into(), "10".into(), pairs.to_string()],
                probe: None,
                threads: 1,
                work: Some(pairs as f64),
                x86_64_only: false,
                go_least_bytes: 0,
            },
            Point {
                x: 1.0,
                args: vec![
                    BOUNDARY_TOKEN.into(),
                    BOUNDARY_TOKEN.into(),
                    pairs.to_string(),
                ],
                probe: None,
                threads: 1,
                work: Some(pairs as f64),
                x86_64_only: false,
                go_least_bytes: 0,
            },
        ],
        mechanisms: Mechanisms::Chunked,
        gcc: vec![],
        native: false,
        go: false,
        main_stack: MainStack::Unlimited,
        shape: Shape::HotSplit,
        baseline: "lookahead",
        unit: "overflow-underflow pair",
        counts: vec![Count::Syscalls],
        reductions: vec![format!("{pairs} overflow-underflow pairs per run")],
    });
    // --- Green threads against OS threads: the multi-threaded thesis programs ---
    let many: Vec<u64> = pick(size, vec![64, 1024, 100_000], vec![64, 1024], vec![8, 64]);
    let both_threads: &[&str] = &["lookahead", "traditional"];
    list.push(Experiment {
        name: "green_summation",
        env: Vec::new(),
        race: Vec::new(),
        green: both_threads,
        title: "Summation multi-threaded: green threads against OS threads",
        figures: "beyond the thesis: figure 4.4's program with up to 100,000 threads",
        sources: cm("summation_multi.cm", Some("summation_multi.go")),
        x_label: "threads",
        log_x: true,
        points: many
            .iter()
            .map(|&t| {
                let depth = (sum_total / t).max(1);
                Point {
                    x: t as f64,
                    args: vec![t.to_string(), depth.to_string(), STACK_TOKEN.into()],
                    probe: Some(Probe {
                        args: strings(&["1", DEPTH_TOKEN, STACK_TOKEN]),
                        depth,
                        small_depths: calibration,
                    }),
                    threads: t,
                    work: Some((depth * t) as f64),
                    x86_64_only: false,
                    go_least_bytes: 0,
                }
            })
            .collect(),
        mechanisms: Mechanisms::Listed(both_threads),
        gcc: vec![GccLevel::O2NoSibling],
        native: false,
        go: true,
        main_stack: THREADED_MAIN_STACK,
        shape: Shape::Curve,
        baseline: "traditional",
        unit: "call",
        counts: vec![],
        reductions: vec![
            format!(
                "n (summed over all threads, n / threads each): thesis 100 million -> {sum_total}"
            ),
            format!(
                "threads: {many:?} (OS threads stop at the kernel's thread limit, 32,768 here)"
            ),
        ],
    });
    // Every thread of tree_multi draws the same random sequence: 1 search is never a spike,
    // 3 searches hold one spike.
    let tree_points: Vec<(u64, u64)> = pick(
        size,
        vec![(64, tree_searches), (1024, 3), (100_000, 1)],
        vec![(64, 3), (1024, 1)],
        vec![(8, tree_searches), (64, 3)],
    );
    list.push(Experiment {
        name: "green_tree",
        env: Vec::new(),
        race: Vec::new(),
        green: both_threads,
        title: "Unbalanced Binary Tree: green threads against OS threads",
        figures: "beyond the thesis: figure 4.8's program with up to 100,000 threads",
        sources: cm("tree_multi.cm", Some("tree.go")),
        x_label: "threads",
        log_x: true,
        points: tree_points
            .iter()
            .map(|&(t, per_thread)| tree_point(t, "0.3", per_thread))
            .collect(),
        mechanisms: Mechanisms::Listed(both_threads),
        gcc: vec![GccLevel::O2NoSibling],
        native: false,
        go: true,
        main_stack: THREADED_MAIN_STACK,
        shape: Shape::Curve,
        baseline: "traditional",
        unit: "call",
        counts: vec![],
        reductions: {
            let mut r = tree_reduction.clone();
            r.push(format!(
                "(threads, searches per thread): thesis (64, 100) -> {tree_points:?} (a thread's searches are the same random sequence in every thread: 1 search is never a spike, 3 hold one)"
            ));
            r
        },
    });

    // --- Green threads (`--threads green`; not in the thesis) ---
    let green_sources = |file: &str, go_file: &str| Sources {
        cm: root.join("tests/green").join(file),
        go: go(go_file),
        cmm_options: strings(&["--threads", "green"]),
    };
    // Full: 5 million, not 20: gcc's OS threads with sched_yield took 6 minutes of the 2-hour
    // budget at 20 million (2026-11-24), and the per-switch cost does not change with the count.
    let yields: u64 = pick(size, 5_000_000, 500_000, 100_000);
    list.push(Experiment {
        name: "green_yield",
        env: vec![
            ("STACKRT_WORKERS".into(), "1".into()),
            ("GOMAXPROCS".into(), "1".into()),
        ],
        race: Vec::new(),
        green: &[],
        title: "Context switch: two threads yielding to each other",
        figures: "beyond the thesis: sthread_yield ping-pong on one worker, Go's runtime.Gosched on one P, gcc with OS threads and sched_yield",
        sources: green_sources("yield_pingpong.cm", "yield_pingpong.go"),
        x_label: "yields per thread",
        log_x: false,
        points: vec![Point {
            x: yields as f64,
            args: vec![yields.to_string()],
            probe: None,
            threads: 2,
            work: Some(2.0 * yields as f64),
            x86_64_only: false,
            go_least_bytes: 0,
        }],
        mechanisms: Mechanisms::All,
        gcc: vec![GccLevel::O2NoSibling],
        native: true,
        go: true,
        main_stack: MainStack::KiB(8 * 1024),
        shape: Shape::PerUnit,
        baseline: "traditional",
        unit: "yield",
        counts: vec![],
        reductions: vec![],
    });
    // Blocking calls (README, "Blocking C calls hand the worker on"): the same program under OS
    // threads and green threads, against goroutines making the same raw system calls.
    let blocking = || Sources {
        cm: root.join("tests/green/blocking.cm"),
        go: go("blocking.go"),
        cmm_options: Vec::new(),
    };
    let both: &[&str] = &["lookahead", "traditional"];
    let sleepers: Vec<u64> = pick(size, vec![8, 100, 1000], vec![8, 100], vec![8]);
    list.push(Experiment {
        name: "green_blocking",
        env: Vec::new(),
        race: Vec::new(),
        green: both,
        title: "Blocking system calls: threads that sleep",
        figures: "beyond the thesis: N threads each call usleep(10 ms) ten times; green threads hand a blocked worker on to a spare OS thread, against OS threads and goroutines in nanosleep system calls",
        sources: blocking(),
        x_label: "threads",
        log_x: true,
        points: sleepers
            .iter()
            .map(|&n| Point {
                x: n as f64,
                args: vec![n.to_string(), "10".into(), "sleep".into(), "10000".into()],
                probe: None,
                threads: n,
                work: None,
                x86_64_only: false,
                go_least_bytes: 0,
            })
            .collect(),
        mechanisms: Mechanisms::Listed(both),
        gcc: vec![GccLevel::O2NoSibling],
        native: false,
        go: true,
        main_stack: MainStack::KiB(8 * 1024),
        shape: Shape::Curve,
        baseline: "traditional",
        unit: "call",
        counts: vec![],
        reductions: vec![],
    });
    let pipers: Vec<u64> = pick(size, vec![8, 100, 1000], vec![8, 100], vec![8]);
    let trips: u64 = pick(size, 1000, 200, 50);
    list.push(Experiment {
        name: "green_pipe",
        env: Vec::new(),
        race: Vec::new(),
        green: both,
        title: "Blocking system calls: threads in pairs talking through pipes",
        figures: "beyond the thesis: N threads in pairs pass a byte back and forth through two pipes (every read blocks until the partner writes), against OS threads and goroutines in read/write system calls",
        sources: blocking(),
        x_label: "threads",
        log_x: true,
        points: pipers
            .iter()
            .map(|&n| Point {
                x: n as f64,
                args: vec![n.to_string(), trips.to_string(), "pipe".into()],
                probe: None,
                threads: n,
                work: Some((n * trips) as f64),
                x86_64_only: false,
                go_least_bytes: 0,
            })
            .collect(),
        mechanisms: Mechanisms::Listed(both),
        gcc: vec![GccLevel::O2NoSibling],
        native: false,
        go: true,
        main_stack: MainStack::KiB(8 * 1024),
        shape: Shape::PerUnit,
        baseline: "traditional",
        unit: "round trip",
        counts: vec![],
        reductions: vec![format!("{trips} round trips per pair")],
    });
    let calls: u64 = pick(size, 20_000_000, 2_000_000, 200_000);
    list.push(Experiment {
        name: "green_ccall",
        env: Vec::new(),
        race: Vec::new(),
        green: &["lookahead", "traditional", "mmu"],
        title: "A short C call from green and OS threads",
        figures: "beyond the thesis: two threads each call abs() in a loop; the cost of one C call (under lookahead a green thread's C call runs on the worker's stack; the hand-off of blocking calls adds nothing to it)",
        sources: blocking(),
        x_label: "calls per thread",
        log_x: false,
        points: vec![Point {
            x: calls as f64,
            args: vec!["2".into(), calls.to_string(), "abs".into()],
            probe: None,
            threads: 2,
            work: Some(2.0 * calls as f64),
            x86_64_only: false,
            go_least_bytes: 0,
        }],
        mechanisms: Mechanisms::Listed(&["lookahead", "traditional", "mmu"]),
        gcc: vec![GccLevel::O2NoSibling],
        native: false,
        go: true,
        main_stack: MainStack::KiB(8 * 1024),
        shape: Shape::PerUnit,
        baseline: "traditional",
        unit: "C call",
        counts: vec![],
        reductions: vec![],
    });
    // Thread churn (issue 23's target: creating a thread costs no system call once warm).
    let rounds: u64 = pick(size, 100_000, 20_000, 1_000);
    list.push(Experiment {
        name: "green_churn",
        env: vec![
            ("STACKRT_WORKERS".into(), "2".into()),
            ("GOMAXPROCS".into(), "2".into()),
        ],
        race: Vec::new(),
        green: &[],
        title: "Thread churn: create 8 threads that return at once, join them, repeat",
        figures: "beyond the thesis: the cost of one short-lived thread, created and joined, on 2 workers (2 Ps), against goroutines each joined through its own WaitGroup and gcc's OS threads",
        sources: green_sources("churn.cm", "churn.go"),
        x_label: "rounds",
        log_x: false,
        points: vec![Point {
            x: rounds as f64,
            args: vec![rounds.to_string()],
            probe: None,
            threads: 8,
            work: Some(8.0 * rounds as f64),
            x86_64_only: false,
            go_least_bytes: 0,
        }],
        mechanisms: Mechanisms::All,
        // OS threads (about 30 µs a thread) in the full run only: at --quick's size they took
        // 38 of the experiment's 45 seconds.
        gcc: if size == Size::Full {
            vec![GccLevel::O2NoSibling]
        } else {
            vec![]
        },
        native: true,
        go: true,
        main_stack: MainStack::KiB(8 * 1024),
        shape: Shape::PerUnit,
        baseline: "traditional",
        unit: "thread",
        counts: vec![],
        reductions: if size == Size::Full {
            vec![]
        } else {
            vec![format!(
                "rounds: 100000 -> {rounds}; gcc's OS threads not run (full run only)"
            )]
        },
    });
    let alive: Vec<u64> = pick(
        size,
        vec![10_000, 100_000, 1_000_000],
        // OS threads spin on sched_yield until all have arrived (quadratic): a few thousand.
        vec![1_000, 3_000],
        vec![1_000],
    );
    list.push(Experiment {
        name: "green_alive",
        env: Vec::new(),
        race: Vec::new(),
        green: &[],
        title: "Many threads alive at once, each 100 levels deep",
        figures: "beyond the thesis: time and peak memory of N threads that recurse 100 levels, wait for each other and unwind, against Go goroutines and OS threads",
        sources: green_sources("alive.cm", "alive.go"),
        x_label: "threads",
        log_x: true,
        points: alive
            .iter()
            .map(|&n| Point {
                x: n as f64,
                args: vec![n.to_string(), "100".into()],
                probe: None,
                threads: n,
                work: None,
                x86_64_only: n > I686_MOST_ALIVE,
                go_least_bytes: 0,
            })
            .collect(),
        mechanisms: Mechanisms::All,
        gcc: vec![GccLevel::O2NoSibling],
        native: true,
        go: true,
        main_stack: MainStack::KiB(8 * 1024),
        shape: Shape::Curve,
        baseline: "traditional",
        unit: "call",
        counts: vec![],
        reductions: if alive.iter().any(|&n| n > I686_MOST_ALIVE) {
            vec![format!(
                "threads on i686: at most {I686_MOST_ALIVE} (a million threads leave under 3 KiB of a 32-bit address space each, and Go's i686 runtime needs over 6 CPU-minutes per run there)"
            )]
        } else {
            vec![]
        },
    });
    // Threads parked on a mutex at depth 10, 100 and 1000: the shape on which green threads
    // were found to need 1.3-2.9x Go's memory (green_alive's threads wait by yielding and fit
    // their first stack block). Only the mechanisms that keep 100,000 green threads within the
    // kernel's mappings (fixed stacks and guarded chunks take two mappings each).
    let parked: u64 = pick(size, 100_000, 3_000, 1_000);
    let park_depths: Vec<u64> = pick(
        size,
        vec![10, 100, 1000],
        vec![10, 100, 1000],
        vec![10, 100],
    );
    list.push(Experiment {
        name: "green_park",
        env: Vec::new(),
        race: Vec::new(),
        green: &[],
        title: "Threads parked on a mutex, by depth",
        figures: "beyond the thesis: time and peak memory of many threads (100,000 in the full run) that recurse D levels (frames of three locals), then wait on a mutex main holds until all have arrived, against Go goroutines",
        sources: green_sources("park.cm", "park.go"),
        x_label: "depth (levels)",
        log_x: true,
        points: park_depths
            .iter()
            .map(|&d| Point {
                x: d as f64,
                args: vec![parked.to_string(), d.to_string()],
                probe: None,
                threads: parked,
                work: None,
                // 100,000 threads 1000 levels deep need about 5 GB: more than i686's address
                // space.
                x86_64_only: d >= 1000 && parked > 10_000,
                go_least_bytes: 0,
            })
            .collect(),
        mechanisms: Mechanisms::Listed(&["lookahead", "heap"]),
        gcc: vec![],
        native: false,
        go: true,
        main_stack: MainStack::KiB(8 * 1024),
        shape: Shape::Curve,
        baseline: "lookahead",
        unit: "call",
        counts: vec![],
        reductions: if parked > 10_000 {
            vec![format!(
                "depth 1000 on i686: not run ({parked} threads that deep need about 5 GB, more than a 32-bit address space)"
            )]
        } else {
            vec![]
        },
    });
    list.push(Experiment {
        name: "green_grid",
        env: Vec::new(),
        race: Vec::new(),
        green: &[],
        title: "Threads alive at once: threads x depth x frame x way of waiting",
        figures: "beyond the thesis: peak memory per thread beside the live frames (depth x bytes per level) and time, of threads that recurse and wait for each other on a mutex (some threads 100x deeper than the others, in one shape) or by yielding, against the same program as goroutines",
        sources: green_sources("grid.cm", "grid.go"),
        x_label: "grid point (its shape: see the tables)",
        log_x: false,
        points: grid_points(size),
        mechanisms: Mechanisms::Listed(&["lookahead"]),
        gcc: vec![],
        native: false,
        go: true,
        main_stack: MainStack::KiB(8 * 1024),
        shape: Shape::Curve,
        baseline: "lookahead",
        unit: "call",
        counts: vec![],
        reductions: if size == Size::Full {
            vec![
                format!("not run: points whose live frames alone exceed {} GiB (1,000,000 threads 1000 deep, or 100 deep with 256-byte frames; 100,000 threads 1000 deep with 256-byte frames)", GRID_MOST_FLOOR >> 30),
                format!("i686: only points with at most {I686_MOST_ALIVE} threads and {} GiB of live frames (a 32-bit address space)", GRID_I686_MOST_FLOOR >> 30),
                "10,000,000 threads: depth 10, the smallest frames, parked on the mutex, x86-64 only".to_string(),
            ]
        } else {
            vec![]
        },
    });
    // --- IRS's benchmarks (the seed 002: Iterative Relaxed Scheduling, section 5) ---
    let corpus = |file: &str| Sources {
        cm: root.join("tests/programs").join(file),
        go: None,
        cmm_options: Vec::new(),
    };
    // The figures column: IRS's execution overhead on the program, then the race detectors'.
    macro_rules! irs_figures {
        ($irs:literal) => {
            concat!(
                "the IRS seed (002): execution overhead of its schedulers over the plain run, ",
                $irs,
                "; ThreadSanitizer documents 5-15x time and 5-10x memory for race detection, Go's race detector 2-20x and 5-10x; measured beside them (x86-64, with peers): gcc's ThreadSanitizer against gcc -O2 (OS threads)"
            )
        };
    }
    let irs = [
        (
            "irs_fibonacci",
            "IRS's Fibonacci: 2 threads x 25 iterations, taking turns through sthread_cas",
            "irs_fibonacci.cm",
            pick(size, vec![3_000, 10_000], vec![1_000], vec![20]),
            2,
            irs_figures!("table 5.3 (Fibonacci, 3 traces): 152-520% for its six kernel-space prototypes, 152-278% for the best two (2.5-3.8x the plain time)"),
        ),
        (
            "irs_last_zero",
            "IRS's Last Zero: a reader and 15 writers of an array (every access a sthread_cas)",
            "irs_last_zero.cm",
            pick(size, vec![300, 1_000], vec![100], vec![10]),
            16,
            irs_figures!("tables B.1-B.3 (Last Zero, 2-8 cores): 60-457% for the prototypes and IRS_Opt, up to 3183% for IRS_Sh"),
        ),
        (
            "irs_indexer",
            "IRS's Indexer: 15 threads insert 4 messages each into a hash table with sthread_cas",
            "irs_indexer.cm",
            pick(size, vec![300, 1_000], vec![100], vec![10]),
            15,
            irs_figures!("tables B.4-B.6 (Indexer, 4-8 cores): 158-416% for the prototypes, 1331-1990% for IRS_Opt, 10-913% for IRS_Sh"),
        ),
        (
            "irs_philosophers",
            "IRS's Dining Philosophers: 16 threads x 10 meals, chopsticks taken with sthread_cas",
            "irs_philosophers.cm",
            pick(size, vec![300, 1_000], vec![100], vec![10]),
            16,
            irs_figures!("table B.7 (Dining Philosophers, 4 cores): 555-2338% for the prototypes, 2450-36849% for the user-space designs"),
        ),
    ];
    for (name, title, file, rounds, threads, figures) in irs {
        list.push(Experiment {
            name,
            env: Vec::new(),
            race: vec![
                RaceRun::Detect,
                RaceRun::Strict,
                RaceRun::Relaxed(1),
                RaceRun::Relaxed(2),
                RaceRun::Relaxed(0),
                RaceRun::RelaxedPct(2),
            ],
            green: &["lookahead"],
            title,
            figures,
            sources: corpus(file),
            x_label: "rounds (each creates the threads and joins them)",
            log_x: false,
            points: rounds
                .iter()
                .map(|&r| Point {
                    x: r as f64,
                    args: vec![r.to_string()],
                    probe: None,
                    threads,
                    work: None,
                    x86_64_only: false,
                    go_least_bytes: 0,
                })
                .collect(),
            mechanisms: Mechanisms::Listed(&["lookahead"]),
            // ThreadSanitizer beside gcc -O2 (with peers, x86-64): the programs have no Go
            // version.
            gcc: vec![GccLevel::O2NoSibling, GccLevel::Tsan],
            native: false,
            go: false,
            main_stack: MainStack::KiB(8 * 1024),
            shape: Shape::Curve,
            baseline: "lookahead",
            unit: "round",
            counts: vec![],
            reductions: vec![
                format!("IRS ran each program once (a few dozen shared accesses per thread, far below a millisecond); here it is repeated {rounds:?} times so that a run takes measurable time"),
                "IRS's programs are racy by design (plain loads and stores); here their shared words go through sthread_cas so that the output is the same in every interleaving (the corpus checks it against gcc): the constrained events of a trace are the swaps".to_string(),
                "replays read a trace the harness records first with the green --race build under STACKRT_SCHED=random:1 (not timed); strict replay runs on one worker; relaxed replay with 1 and 2 workers, and on OS threads; \"pct trace\": relaxed replay on 2 workers of a trace recorded under STACKRT_SCHED=pct:1:3 instead, the schedule a PCT seed finds".to_string(),
            ],
        });
    }
    // --- Race detection on the thesis's multi-threaded programs (issue: at most 3x the time,
    // 4x the peak memory) ---
    let race_detection = |name, title, file, go_file, point: Point, reductions: Vec<String>| {
        Experiment {
        name,
        env: Vec::new(),
        race: vec![RaceRun::Detect],
        green: &["lookahead"],
        title,
        figures: "the detectors' own documentation: ThreadSanitizer 5-15x time and 5-10x memory, Go's race detector 2-20x and 5-10x; measured beside them (x86-64, with peers): Go's race detector on the Go version against plain Go, gcc's ThreadSanitizer against gcc -O2",
        sources: cm(file, Some(go_file)),
        x_label: "threads",
        log_x: false,
        points: vec![point],
        mechanisms: Mechanisms::Listed(&["traditional", "lookahead"]),
        gcc: vec![GccLevel::O2NoSibling, GccLevel::Tsan],
        native: false,
        go: true,
        main_stack: THREADED_MAIN_STACK,
        shape: Shape::Curve,
        baseline: "traditional",
        unit: "call",
        counts: vec![],
        reductions,
    }
    };
    let (sum_threads, sum_depth): (u64, u64) =
        pick(size, (8, 1_000_000), (8, 1_000_000), (2, 10_000));
    list.push(race_detection(
        "race_summation",
        "Race detection (--race) on Summation: threads that share nothing",
        "summation_multi.cm",
        "summation_multi.go",
        Point {
            x: sum_threads as f64,
            args: vec![
                sum_threads.to_string(),
                sum_depth.to_string(),
                STACK_TOKEN.into(),
            ],
            probe: Some(Probe {
                args: strings(&["1", DEPTH_TOKEN, STACK_TOKEN]),
                depth: sum_depth,
                small_depths: calibration,
            }),
            threads: sum_threads,
            work: Some((sum_threads * sum_depth) as f64),
            x86_64_only: false,
            go_least_bytes: 0,
        },
        vec![format!(
            "n: thesis 100 million in all -> {sum_depth} levels in each of {sum_threads} threads"
        )],
    ));
    // (balanced, unbalanced, searches per thread, threads). The searches are the thesis's
    // 100 cut to 20, not to tree_multi's 5: under --race a thread's first search of the shared
    // tree costs the most (each node it reads becomes read-shared), and 20 take hardly longer
    // than 5 while they weigh the tree's building, done once, less out of proportion.
    let (bal, unbal, searches, tree_threads): (u64, u64, u64, u64) = pick(
        size,
        (1_048_575, 1_000_000, 20, 8),
        (1_000_000, 1_000_000, 20, 4),
        (1_023, 1_000, 2, 2),
    );
    list.push(race_detection(
        "race_tree",
        "Race detection (--race) on the Unbalanced Binary Tree: every thread reads every node it passes",
        "tree_multi.cm",
        "tree.go",
        Point {
            x: tree_threads as f64,
            args: vec![
                bal.to_string(),
                unbal.to_string(),
                "0.3".into(),
                searches.to_string(),
                tree_threads.to_string(),
                STACK_TOKEN.into(),
            ],
            probe: Some(tree_probe(unbal)),
            threads: tree_threads,
            work: None,
            x86_64_only: false,
            go_least_bytes: 0,
        },
        vec![format!(
            "tree: thesis 2^20-1 balanced nodes, a 1,000,000-node branch, 100 searches in each of 8 threads -> {bal}, {unbal}, {searches} in each of {tree_threads}"
        )],
    ));
    list
}
