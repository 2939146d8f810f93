//! The MTSS seed's experiments (Middha, Simpson, Barua, CASES 2005, sections 5-6): the
//! overhead of `--mech mtss` without overflow (table 2), each task's Maximum Satisfiable
//! Overflow and each workload's Proportional Reduction Satisfiability found by bisection
//! (figures 6, 7), MSO against the page size (figure 8), `traditional` and `lookahead` on the
//! same budget, and the cost of the worst single overflow; their report tables and findings.

mod share;

pub use share::{measure, Context, PageShare, PeerRun, Prs, Share};

use crate::build::{Sources, Target, Toolchain, Variant};
use crate::experiments::{Experiment, Mechanisms, Point, Shape, Size};
use crate::run::MainStack;
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

/// A workload as its key, in a run's parts (`share::Share`).
pub mod workload_key {
    use super::{Workload, WORKLOADS};
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(w: &Workload, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(w.key)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Workload, D::Error> {
        let key = String::deserialize(d)?;
        WORKLOADS
            .iter()
            .find(|w| w.key == key)
            .copied()
            .ok_or_else(|| serde::de::Error::custom(format!("no MTSS workload {key:?}")))
    }
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

pub fn overhead_name(w: &Workload) -> &'static str {
    match w.key {
        "auto" => "mtss_overhead_auto",
        "net" => "mtss_overhead_net",
        _ => "mtss_overhead_sec",
    }
}

/// The thesis's recursions measured with `mtss` (a check at every call).
pub const RECURSIONS: [&str; 3] = [
    "mtss_overhead_summation",
    "mtss_overhead_tree",
    "mtss_overhead_calls",
];

/// The arguments of a program's `// args:` line (the corpus's run) and `// bench-args:` line
/// (the benchmark's scale, which the corpus does not run: it would cost every configuration
/// a few seconds).
pub fn program_args(source: &str) -> (Option<Vec<String>>, Option<Vec<String>>) {
    let line = |prefix: &str| {
        source
            .lines()
            .find_map(|l| l.strip_prefix(prefix))
            .map(|rest| rest.split_whitespace().map(str::to_string).collect())
    };
    (line("// args:"), line("// bench-args:"))
}

/// Address space `stackrt` reserves for `mtss` when `STACKRT_MTSS_REGION` is not set.
fn default_region(target: Target) -> u64 {
    match target {
        Target::X86_64 => 64 << 30,
        Target::I686 => 1 << 30,
    }
}

/// Beyond the native stacks, the region's room for the extra native stacks C callbacks take.
const REGION_SLACK: u64 = 64 << 20;

/// The `STACKRT_MTSS_REGION` an `mtss` run of `threads` threads on native stacks of `stack`
/// bytes needs beside `main`'s (which follows `ulimit -s`): `Ok(None)` when the default region
/// holds them; `Err` saying why when no region can (a 32-bit process has about 2 GiB of
/// contiguous address space; all stacks are reserved at once, as a fixed-stack system's).
/// Under an unlimited `ulimit -s` [`main_stack_env`] decides.
pub fn region_for(
    target: Target,
    threads: u64,
    stack: u64,
    main_stack: MainStack,
) -> Result<Option<u64>, String> {
    let MainStack::KiB(main_kib) = main_stack else {
        return Ok(None);
    };
    let need = threads
        .saturating_mul(stack)
        .saturating_add(main_kib * 1024)
        .saturating_add(REGION_SLACK);
    if need <= default_region(target) {
        return Ok(None);
    }
    let most: u64 = match target {
        Target::X86_64 => 1 << 46,
        Target::I686 => 2 << 30,
    };
    if need > most {
        return Err(format!(
            "{threads} threads x {:.1} MiB native stacks and main's {} MiB need a {:.1} GiB region; a {} process has {} GiB",
            stack as f64 / 1048576.0,
            main_kib / 1024,
            need as f64 / (1u64 << 30) as f64,
            if target == Target::I686 { "32-bit" } else { "64-bit" },
            most >> 30
        ));
    }
    Ok(Some(need.div_ceil(1 << 20) << 20))
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
pub const LENDERS: &str = "Who lends here: `mtss` lends only the free space of threads parked in \
sthread_join or a contended mutex (main, in these workloads), below their stack pointer less the \
program's lending margin (the most any function pushes below its frame, plus 16 bytes), of \
threads running on other threads' pages, and of ended threads' stacks (kept as donors until a \
new stack needs their space). A running task never lends: its stack pointer is not known to \
the others. The paper's tasks lend their free space whenever they are preempted. So with main \
at its need, a task that overflows can borrow only what main leaves free below its floor and \
what ended tasks leave, and MSO measures that; with main on 8 MiB, what a parked donor with room \
lets a task recover (bounded by its largest frame, which must fit in contiguous pages).";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::parse_mtss_stats_line as parse_stats_line;
    use std::collections::BTreeMap;

    #[test]
    fn the_region_holds_every_native_stack_and_main_or_says_why_not() {
        let main = MainStack::KiB(256 * 1024);
        // 8 x 12 MiB + 256 MiB + 64 MiB fits i686's default 1 GiB: no variable.
        assert_eq!(region_for(Target::I686, 8, 12 << 20, main), Ok(None));
        // 64 x 12 MiB = 768 MiB + 320 MiB: 1088 MiB, in MiB.
        assert_eq!(
            region_for(Target::I686, 64, 12 << 20, main),
            Ok(Some(1088 << 20))
        );
        // 64 x 32 MiB is more than a 32-bit process has; x86-64 reserves it.
        let why = region_for(Target::I686, 64, 32 << 20, main).unwrap_err();
        assert!(why.contains("64 threads x 32.0 MiB"), "{why}");
        assert_eq!(region_for(Target::X86_64, 64, 32 << 20, main), Ok(None));
        assert_eq!(
            region_for(Target::X86_64, 64, 1 << 30, main),
            Ok(Some((64 << 30) + (320 << 20)))
        );
        // Under an unlimited main stack `main_stack_env` decides.
        assert_eq!(
            region_for(Target::I686, 64, 32 << 20, MainStack::Unlimited),
            Ok(None)
        );
    }

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
        let (small, big) = program_args("// args: 1\n// bench-args: 40 0\nint main() {}\n");
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
