//! The executables an experiment compares ("variants"): every `--mech` the compiler accepts on
//! both targets, the native back end, and the peers (gcc at several settings, Go). Building a
//! variant is how its availability is detected: a mechanism the compiler rejects, a missing
//! `go` or a gcc that cannot link `-fsplit-stack` become "not available" with the reason.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Target architecture of an executable.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum Target {
    X86_64,
    I686,
}

impl Target {
    pub const ALL: [Target; 2] = [Target::X86_64, Target::I686];

    pub fn name(self) -> &'static str {
        match self {
            Target::X86_64 => "x86_64",
            Target::I686 => "i686",
        }
    }

    fn gcc_flags(self) -> &'static [&'static str] {
        match self {
            Target::X86_64 => &["-m64"],
            // Doubles in SSE2 registers, as the emission stage and the corpus oracle do.
            Target::I686 => &["-m32", "-msse2", "-mfpmath=sse"],
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// gcc settings used as peers.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum GccLevel {
    /// `gcc -O0`: the thesis's "gcc".
    O0,
    /// `gcc -O2 -fno-optimize-sibling-calls`: keeps the recursions recursive.
    O2NoSibling,
    /// Plain `gcc -O2`, the thesis's "gcc -O2": turns tail recursion into loops.
    O2,
    /// `gcc -O2 -fno-optimize-sibling-calls -fsplit-stack`: gcc's own segmented stacks.
    SplitStack,
    /// `gcc -O2 -fno-optimize-sibling-calls -fsanitize=thread`: ThreadSanitizer, the race
    /// detector `--race` is compared with (64-bit only), beside `O2NoSibling` as its plain run.
    Tsan,
}

impl GccLevel {
    fn flags(self) -> &'static [&'static str] {
        match self {
            GccLevel::O0 => &["-O0"],
            GccLevel::O2NoSibling => &["-O2", "-fno-optimize-sibling-calls"],
            GccLevel::O2 => &["-O2"],
            GccLevel::SplitStack => &["-O2", "-fno-optimize-sibling-calls", "-fsplit-stack"],
            GccLevel::Tsan => &["-O2", "-fno-optimize-sibling-calls", "-fsanitize=thread"],
        }
    }
}

/// How a `--race` build is run (the `irs_*` experiments).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum RaceRun {
    /// Race detection on, threads scheduled as usual.
    Detect,
    /// `STACKRT_SCHED=replay:TRACE`: the recorded decisions on one worker (green threads).
    Strict,
    /// `STACKRT_SCHED=relaxed:TRACE`: the recorded order of conflicting events only, threads in
    /// parallel on this many workers (green threads), or as OS threads (0).
    Relaxed(u32),
    /// The same with a trace recorded under [`PCT_RECORDING`] instead of [`RANDOM_RECORDING`]:
    /// the schedule of a bug PCT found switches threads at a few change points and where a
    /// thread waits, not at nearly every access as `random` does, and a replay is held back
    /// only where the recording switched.
    RelaxedPct(u32),
}

/// The policy the harness records the traces of replays under (`STACKRT_SCHED`).
pub const RANDOM_RECORDING: &str = "random:1";
/// The policy of [`RaceRun::RelaxedPct`]'s trace: PCT of depth 3 (two change points among the
/// first 10,000 decisions), the depth of the lost update and of most of PCT's paper's bugs.
pub const PCT_RECORDING: &str = "pct:1:3";

impl RaceRun {
    /// Whether this run reads a recorded trace.
    pub fn replays(self) -> bool {
        self != RaceRun::Detect
    }

    /// The policy this run's trace is recorded under.
    pub fn recording(self) -> &'static str {
        match self {
            RaceRun::RelaxedPct(_) => PCT_RECORDING,
            _ => RANDOM_RECORDING,
        }
    }
}

/// How a variant's executable is made.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum Toolchain {
    /// `cmm compile --backend emit --mech MECH`, with `--threads green` if `green`.
    Cmm {
        mech: String,
        green: bool,
    },
    /// The same with `--race`, run as `run` says (the trace a replay reads is recorded by the
    /// harness first: `harness`).
    CmmRace {
        mech: String,
        green: bool,
        run: RaceRun,
    },
    /// `cmm compile --backend native` (x86-64, traditional calls only).
    Native,
    Gcc(GccLevel),
    /// The Go version of the program (goroutines on growable stacks).
    Go,
    /// The Go version built with `go build -race` (Go's race detector, ThreadSanitizer's
    /// runtime; amd64 only), beside `Go` as its plain run.
    GoRace,
}

/// One executable of an experiment row: a toolchain for a target.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct Variant {
    pub target: Target,
    pub tool: Toolchain,
}

/// Mechanisms whose threads run on fixed-size stacks (the program's stack-size argument must be
/// big enough); every other one grows its stacks.
const FIXED_STACK_MECHS: [&str; 2] = ["traditional", "callee-cleanup"];

impl Variant {
    /// The name used in tables, plots and `results.csv`.
    pub fn label(&self) -> String {
        match &self.tool {
            Toolchain::Cmm { mech, green: false } => mech.clone(),
            Toolchain::Cmm { mech, green: true } => format!("{mech}, green threads"),
            Toolchain::CmmRace { mech, green, run } => {
                let what = match run {
                    RaceRun::Detect => "--race".to_string(),
                    RaceRun::Strict => "strict replay".to_string(),
                    RaceRun::Relaxed(1) => "relaxed replay 1 worker".to_string(),
                    RaceRun::Relaxed(n) if *green => format!("relaxed replay {n} workers"),
                    RaceRun::Relaxed(_) => "relaxed replay".to_string(),
                    RaceRun::RelaxedPct(1) => "relaxed replay 1 worker, pct trace".to_string(),
                    RaceRun::RelaxedPct(n) if *green => {
                        format!("relaxed replay {n} workers, pct trace")
                    }
                    RaceRun::RelaxedPct(_) => "relaxed replay, pct trace".to_string(),
                };
                if *green {
                    format!("{mech} {what}, green threads")
                } else {
                    format!("{mech} {what}")
                }
            }
            Toolchain::Native => "native (Cranelift)".into(),
            Toolchain::Gcc(GccLevel::O0) => "gcc -O0".into(),
            Toolchain::Gcc(GccLevel::O2NoSibling) => "gcc -O2 -fno-sibling".into(),
            Toolchain::Gcc(GccLevel::O2) => "gcc -O2".into(),
            Toolchain::Gcc(GccLevel::SplitStack) => "gcc -fsplit-stack".into(),
            Toolchain::Gcc(GccLevel::Tsan) => "gcc -fsanitize=thread".into(),
            Toolchain::Go => "go".into(),
            Toolchain::GoRace => "go -race".into(),
        }
    }

    /// True when the variant's threads need a stack-size argument big enough for their depth.
    pub fn fixed_stack(&self) -> bool {
        match &self.tool {
            Toolchain::Cmm { mech, .. } | Toolchain::CmmRace { mech, .. } => {
                FIXED_STACK_MECHS.contains(&mech.as_str())
            }
            Toolchain::Native => true,
            Toolchain::Gcc(level) => *level != GccLevel::SplitStack,
            Toolchain::Go | Toolchain::GoRace => false,
        }
    }

    /// True for `--mech mtss` (with or without `--race`).
    pub fn is_mtss(&self) -> bool {
        matches!(&self.tool, Toolchain::Cmm { mech, .. } | Toolchain::CmmRace { mech, .. } if mech == "mtss")
    }

    /// True for C-- code linked with `stackrt` (it prints statistics under `STACKRT_STATS=1`).
    pub fn is_cmm(&self) -> bool {
        matches!(
            self.tool,
            Toolchain::Cmm { .. } | Toolchain::CmmRace { .. } | Toolchain::Native
        )
    }

    /// A file-name-safe key.
    pub fn file_key(&self) -> String {
        let tool = match &self.tool {
            Toolchain::Cmm { mech, green: false } => format!("cmm-{mech}"),
            Toolchain::Cmm { mech, green: true } => format!("cmm-{mech}-green"),
            // Every run of one build shares its executable (see `Builder::build`).
            Toolchain::CmmRace {
                mech, green: false, ..
            } => format!("cmm-{mech}-race"),
            Toolchain::CmmRace {
                mech, green: true, ..
            } => format!("cmm-{mech}-race-green"),
            Toolchain::Native => "native".into(),
            Toolchain::Gcc(level) => format!("gcc-{level:?}"),
            Toolchain::Go => "go".into(),
            Toolchain::GoRace => "go-race".into(),
        };
        format!("{}-{}", self.target, tool.to_lowercase())
    }
}

/// Bytes by which layout `k` moves a `cmm` executable's code (`cmm compile --text-offset`):
/// 16 bytes a layout, so each moves every function, branch target and loop head against the
/// 16-, 32- and 64-byte boundaries that fetch, the branch predictors and the cache lines see.
/// A build's layout alone moves the time of these programs by 4-13 % (README, "Using the
/// compiler"), more than the differences some findings are about.
pub fn layout_offset(k: usize) -> usize {
    16 * k
}

/// The `--mech` values the compiler's command line accepts, read from `cmm compile --help` so
/// that a new mechanism is measured without touching the harness (falls back to the known
/// list).
pub fn accepted_mechanisms(cmm: &Path) -> Vec<String> {
    let fallback = [
        "traditional",
        "callee-cleanup",
        "lookahead",
        "heap",
        "heap-malloc",
        "mmu",
        "mmu-reuse",
    ];
    let help = Command::new(cmm)
        .args(["compile", "--help"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let mechs = mechanisms_in_help(&help);
    if mechs.is_empty() {
        fallback.iter().map(|s| s.to_string()).collect()
    } else {
        mechs
    }
}

/// The values listed under `--mech <MECH>` in clap's long help ("- name: description" lines
/// up to the "[default" line).
fn mechanisms_in_help(help: &str) -> Vec<String> {
    let mut mechs = Vec::new();
    if let Some(start) = help.find("--mech <MECH>") {
        for line in help[start..].lines().skip(1) {
            let line = line.trim();
            if line.starts_with("[default") || line.starts_with("--") {
                break;
            }
            if let Some((name, _)) = line.strip_prefix("- ").and_then(|i| i.split_once(':')) {
                mechs.push(name.trim().to_string());
            }
        }
    }
    mechs
}

/// Where an experiment's program comes from.
#[derive(Debug, Clone)]
pub struct Sources {
    /// The C-- source (also valid C for gcc).
    pub cm: PathBuf,
    /// The Go version, if the experiment has one.
    pub go: Option<PathBuf>,
    /// Extra `cmm compile` options (e.g. a fixed `--chunk-size`).
    pub cmm_options: Vec<String>,
}

/// The `cmm_options` that apply to the native back end too: `--threads` (the chunk size
/// applies to the emission stage's chunked mechanisms only).
fn native_options(options: &[String]) -> Vec<String> {
    options
        .windows(2)
        .filter(|w| w[0] == "--threads")
        .flat_map(|w| w.iter().cloned())
        .collect()
}

/// Builds executables into one directory, once per (source, variant).
pub struct Builder {
    root: PathBuf,
    cmm: PathBuf,
    dir: PathBuf,
    /// By source, options, variant and layout.
    #[allow(clippy::type_complexity)]
    built: HashMap<(PathBuf, Vec<String>, Variant, usize), Result<PathBuf, String>>,
    /// The C thread library's object by target, and whether ThreadSanitizer instruments it.
    sthread: HashMap<(Target, bool), Result<PathBuf, String>>,
    gcc_major: u32,
}

fn stderr_reason(out: &std::process::Output) -> String {
    let text = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let first = lines.iter().position(|l| l.contains("error")).unwrap_or(0);
    let reason = lines
        .iter()
        .skip(first)
        .take(2)
        .copied()
        .collect::<Vec<_>>()
        .join(" ");
    if reason.is_empty() {
        "failed without a message".into()
    } else {
        reason.chars().take(240).collect()
    }
}

fn run_build(cmd: &mut Command) -> Result<(), String> {
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {:?}: {e}", cmd.get_program()))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(stderr_reason(&out))
    }
}

impl Builder {
    pub fn new(root: &Path, cmm: &Path, dir: &Path) -> Result<Builder, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let gcc_major = Command::new("gcc")
            .arg("-dumpversion")
            .output()
            .ok()
            .and_then(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .trim()
                    .split('.')
                    .next()?
                    .parse()
                    .ok()
            })
            .unwrap_or(0);
        Ok(Builder {
            root: root.to_path_buf(),
            cmm: cmm.to_path_buf(),
            dir: dir.to_path_buf(),
            built: HashMap::new(),
            sthread: HashMap::new(),
            gcc_major,
        })
    }

    /// The corpus oracle's gcc flags (tests/oracle/bless.sh) without the optimization level.
    fn oracle_flags(&self) -> Vec<&'static str> {
        let mut flags = vec!["-w", "-fwrapv", "-no-pie", "-DNULL=0", "-Dstacksizeof(x)=0"];
        if self.gcc_major >= 14 {
            // gcc 14 made implicit declarations errors; C-- needs no forward declarations.
            flags.push("-fpermissive");
        }
        flags
    }

    /// The C build of the thread library (tests/oracle/sthread.c) for a target; with `tsan`,
    /// instrumented by ThreadSanitizer, which then sees `sthread_cas`'s atomic swap (an
    /// uninstrumented one hides the order it gives, and every access it protects is reported).
    fn sthread_object(&mut self, target: Target, tsan: bool) -> Result<PathBuf, String> {
        if let Some(done) = self.sthread.get(&(target, tsan)) {
            return done.clone();
        }
        let object = self.dir.join(match tsan {
            false => format!("sthread-{target}.o"),
            true => format!("sthread-{target}-tsan.o"),
        });
        let result = run_build(
            Command::new("gcc")
                .args(target.gcc_flags())
                .args(self.oracle_flags())
                .args(["-O2", "-c"])
                .args(if tsan {
                    &["-fsanitize=thread"][..]
                } else {
                    &[]
                })
                .arg(self.root.join("tests/oracle/sthread.c"))
                .arg("-o")
                .arg(&object),
        )
        .map(|()| object);
        self.sthread.insert((target, tsan), result.clone());
        result
    }

    /// Builds (or returns the already built) executable of `variant` for `sources`;
    /// `Err(reason)` means "not available".
    pub fn build(&mut self, sources: &Sources, variant: &Variant) -> Result<PathBuf, String> {
        self.build_at(sources, variant, 0)
    }

    /// The executable of `variant` with its code at layout `layout` (see [`layout_offset`]):
    /// for a `cmm` emission-stage build other than `--race` ones, the program compiled with
    /// `--text-offset`; for every other variant (whose layout the harness does not vary), the
    /// one executable [`Builder::build`] makes.
    pub fn build_at(
        &mut self,
        sources: &Sources,
        variant: &Variant,
        layout: usize,
    ) -> Result<PathBuf, String> {
        let layout = if matches!(variant.tool, Toolchain::Cmm { .. }) {
            layout
        } else {
            0
        };
        // The runs of one `--race` build differ only in their environment: one executable.
        let mut variant = variant.clone();
        if let Toolchain::CmmRace { run, .. } = &mut variant.tool {
            *run = RaceRun::Detect;
        }
        let variant = &variant;
        let key = (
            sources.cm.clone(),
            sources.cmm_options.clone(),
            variant.clone(),
            layout,
        );
        if let Some(done) = self.built.get(&key) {
            return done.clone();
        }
        let stem = sources
            .cm
            .file_stem()
            .map_or("prog".into(), |s| s.to_string_lossy().into_owned());
        let exe = match layout {
            0 => self.dir.join(format!("{stem}-{}", variant.file_key())),
            k => self
                .dir
                .join(format!("{stem}-{}-layout{k}", variant.file_key())),
        };
        let result = self
            .build_uncached(sources, variant, layout, &exe)
            .map(|()| exe);
        self.built.insert(key, result.clone());
        result
    }

    fn build_uncached(
        &mut self,
        sources: &Sources,
        variant: &Variant,
        layout: usize,
        exe: &Path,
    ) -> Result<(), String> {
        let target = variant.target;
        match &variant.tool {
            Toolchain::Cmm { mech, green } => run_build(
                Command::new(&self.cmm)
                    .args(["compile", "--backend", "emit", "--mech", mech])
                    .args(["--target", target.name()])
                    .args(&sources.cmm_options)
                    .args(match layout {
                        0 => vec![],
                        k => vec!["--text-offset".to_string(), layout_offset(k).to_string()],
                    })
                    .args(if *green {
                        &["--threads", "green"][..]
                    } else {
                        &[]
                    })
                    .arg(&sources.cm)
                    .arg("-o")
                    .arg(exe),
            ),
            Toolchain::CmmRace { mech, green, .. } => run_build(
                Command::new(&self.cmm)
                    .args(["compile", "--backend", "emit", "--race", "--mech", mech])
                    .args(["--target", target.name()])
                    .args(&sources.cmm_options)
                    .args(["--threads", if *green { "green" } else { "os" }])
                    .arg(&sources.cm)
                    .arg("-o")
                    .arg(exe),
            ),
            Toolchain::Native => run_build(
                Command::new(&self.cmm)
                    .args(["compile", "--backend", "native", "--target", target.name()])
                    .args(native_options(&sources.cmm_options))
                    .arg(&sources.cm)
                    .arg("-o")
                    .arg(exe),
            ),
            Toolchain::Gcc(GccLevel::Tsan) if target == Target::I686 => {
                Err("ThreadSanitizer runs on 64-bit targets only".to_string())
            }
            Toolchain::Gcc(level) => {
                let sthread = self.sthread_object(target, *level == GccLevel::Tsan)?;
                let compile = |extra: &[&str]| {
                    run_build(
                        Command::new("gcc")
                            .args(target.gcc_flags())
                            .args(self.oracle_flags())
                            .args(level.flags())
                            .args(extra)
                            .arg("-x")
                            .arg("c")
                            .arg(&sources.cm)
                            .args(["-x", "none"])
                            .arg(&sthread)
                            .arg("-pthread")
                            .arg("-o")
                            .arg(exe),
                    )
                };
                match compile(&[]) {
                    // Split-stack code calling code compiled without it (the C library, the
                    // thread library) needs gold on some distributions.
                    Err(first) if *level == GccLevel::SplitStack => compile(&["-fuse-ld=gold"])
                        .map_err(|gold| format!("{first}; with -fuse-ld=gold: {gold}")),
                    other => other,
                }
            }
            Toolchain::GoRace if target == Target::I686 => {
                Err("Go's race detector runs on 64-bit targets only (linux/amd64 here)".to_string())
            }
            Toolchain::Go | Toolchain::GoRace => {
                let race = variant.tool == Toolchain::GoRace;
                let go_source = sources
                    .go
                    .as_ref()
                    .ok_or_else(|| "no Go version of this program".to_string())?;
                let goarch = match target {
                    Target::X86_64 => "amd64",
                    Target::I686 => "386",
                };
                run_build(
                    Command::new("go")
                        .arg("build")
                        .args(if race { &["-race"][..] } else { &[] })
                        .arg("-o")
                        .arg(exe)
                        .arg(go_source)
                        .env("GOARCH", goarch)
                        // The race detector's runtime is linked through cgo.
                        .env("CGO_ENABLED", if race { "1" } else { "0" }),
                )
                .map_err(|e| {
                    if e.starts_with("cannot run") {
                        "go is not installed".to_string()
                    } else {
                        e
                    }
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mechanisms_are_read_from_the_help_text() {
        let help = "      --target <TARGET>\n          Target\n\n          Possible values:\n\
                    - x86_64: 64-bit\n\n      --mech <MECH>\n          Call-stack mechanism\n\n\
                    Possible values:\n          - traditional:    fixed\n          \
                    - mmu-reuse: chunks, reused\n          \n          [default: traditional]\n\
                    \n      --backend <BACKEND>\n          - native: x\n";
        assert_eq!(mechanisms_in_help(help), ["traditional", "mmu-reuse"]);
        assert!(mechanisms_in_help("no such option").is_empty());
    }

    #[test]
    fn fixed_stack_variants() {
        let v = |tool| Variant {
            target: Target::I686,
            tool,
        };
        for green in [false, true] {
            assert!(v(Toolchain::Cmm {
                mech: "traditional".into(),
                green
            })
            .fixed_stack());
            assert!(!v(Toolchain::Cmm {
                mech: "lookahead".into(),
                green
            })
            .fixed_stack());
        }
        assert!(!v(Toolchain::Gcc(GccLevel::SplitStack)).fixed_stack());
        assert!(v(Toolchain::Gcc(GccLevel::O0)).fixed_stack());
        assert!(!v(Toolchain::Go).fixed_stack());
        assert!(!v(Toolchain::GoRace).fixed_stack());
        assert!(v(Toolchain::Gcc(GccLevel::Tsan)).fixed_stack());
        assert_eq!(v(Toolchain::GoRace).label(), "go -race");
        assert_eq!(v(Toolchain::GoRace).file_key(), "i686-go-race");
        assert_eq!(
            v(Toolchain::Gcc(GccLevel::Tsan)).file_key(),
            "i686-gcc-tsan"
        );
    }
}
