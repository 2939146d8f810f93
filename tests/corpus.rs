//! End-to-end corpus test: compiles every program of `tests/programs/` with the `cmm` binary in
//! every configuration of [`CONFIGS`], runs it with the arguments of each of its `// args:`
//! lines and compares stdout and the exit status with the expected files written by the gcc
//! oracle (`tests/oracle/bless.sh`) or, for `cmm_only/`, by hand.
//!
//! Environment:
//! - `CMM_CORPUS_CONFIGS=name,name`: run only these configurations (names as printed, e.g.
//!   `native-traditional-x86_64`);
//! - `CMM_CORPUS_FILTER=text`: run only programs whose path (relative to `tests/programs`,
//!   e.g. `thesis/tree_multi`) contains `text`;
//! - `CI`: when set, `oracle_is_fresh` requires `gcc -m32`.
//!
//! Program files: leading `//` comment lines may hold `// args: A B` (the default run, expected
//! output in `NAME.expected`) and `// args[V]: A B` (run `V`, expected in `NAME.V.expected`).
//! For 32-bit targets `NAME[.V].expected32` is used when it exists (the oracle writes it only
//! when the i686 output differs). An expected file is the program's stdout (with a newline
//! added if it does not end with one) followed by the line `exit: N`.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One way of compiling a program: `cmm compile --backend B --mech M --target T`.
#[derive(Clone, Copy, Debug)]
struct Config {
    backend: &'static str,
    mech: &'static str,
    target: &'static str,
    /// `--chunk-size` for the chunked mechanisms (`None`: the default).
    chunk_size: Option<u32>,
    /// `--threads green` (else the default, OS threads).
    green: bool,
    /// `STACKRT_SCHED` of every run (green threads' deterministic scheduler).
    sched: Option<&'static str>,
    /// `--race`: the same output, and no race report (the corpus is race-free).
    race: bool,
}

/// Every configuration the corpus runs in. Add one line per new back end / mechanism / target.
#[rustfmt::skip]
const CONFIGS: &[Config] = &[
    Config { backend: "native", mech: "traditional", target: "x86_64", chunk_size: None, green: false, sched: None, race: false },
    Config { backend: "emit", mech: "traditional", target: "x86_64", chunk_size: None, green: false, sched: None, race: false },
    Config { backend: "emit", mech: "traditional", target: "i686", chunk_size: None, green: false, sched: None, race: false },
    Config { backend: "emit", mech: "callee-cleanup", target: "x86_64", chunk_size: None, green: false, sched: None, race: false },
    Config { backend: "emit", mech: "callee-cleanup", target: "i686", chunk_size: None, green: false, sched: None, race: false },
    Config { backend: "emit", mech: "lookahead", target: "x86_64", chunk_size: Some(32768), green: false, sched: None, race: false },
    Config { backend: "emit", mech: "lookahead", target: "i686", chunk_size: Some(32768), green: false, sched: None, race: false },
    // The smallest chunk size accepted: many overflows and underflows, and every extern call
    // (8 KiB budget) and any frame over the 4 KiB chunk's capacity reserves more than a
    // standard chunk holds, so it runs on a larger chunk the runtime links for it.
    Config { backend: "emit", mech: "lookahead", target: "x86_64", chunk_size: Some(4096), green: false, sched: None, race: false },
    Config { backend: "emit", mech: "lookahead", target: "i686", chunk_size: Some(4096), green: false, sched: None, race: false },
    // MMU: the default chunk size (1 MiB on x86-64, 128 KiB on i686) and the smallest (a guard
    // fault every few calls; every C call's probes reach past a 4 KiB chunk into a larger one).
    Config { backend: "emit", mech: "mmu", target: "x86_64", chunk_size: None, green: false, sched: None, race: false },
    Config { backend: "emit", mech: "mmu", target: "i686", chunk_size: None, green: false, sched: None, race: false },
    Config { backend: "emit", mech: "mmu-reuse", target: "x86_64", chunk_size: None, green: false, sched: None, race: false },
    Config { backend: "emit", mech: "mmu-reuse", target: "i686", chunk_size: None, green: false, sched: None, race: false },
    Config { backend: "emit", mech: "mmu", target: "x86_64", chunk_size: Some(4096), green: false, sched: None, race: false },
    Config { backend: "emit", mech: "mmu", target: "i686", chunk_size: Some(4096), green: false, sched: None, race: false },
    Config { backend: "emit", mech: "mmu-reuse", target: "x86_64", chunk_size: Some(4096), green: false, sched: None, race: false },
    Config { backend: "emit", mech: "mmu-reuse", target: "i686", chunk_size: Some(4096), green: false, sched: None, race: false },
    // Heap: the default 64 KiB slabs and the smallest (a new slab every few dozen frames, and
    // blocks of the larger classes on slabs the runtime sizes for them); and the thesis's
    // malloc variant.
    Config { backend: "emit", mech: "heap", target: "x86_64", chunk_size: None, green: false, sched: None, race: false },
    Config { backend: "emit", mech: "heap", target: "i686", chunk_size: None, green: false, sched: None, race: false },
    Config { backend: "emit", mech: "heap", target: "x86_64", chunk_size: Some(4096), green: false, sched: None, race: false },
    Config { backend: "emit", mech: "heap", target: "i686", chunk_size: Some(4096), green: false, sched: None, race: false },
    Config { backend: "emit", mech: "heap-malloc", target: "x86_64", chunk_size: None, green: false, sched: None, race: false },
    Config { backend: "emit", mech: "heap-malloc", target: "i686", chunk_size: None, green: false, sched: None, race: false },
    // MTSS (OS threads): the paper's 128-byte pages, every program's stacks as it asks (8 MiB
    // for `main` and for threads that ask for 0).
    Config { backend: "emit", mech: "mtss", target: "x86_64", chunk_size: None, green: false, sched: None, race: false },
    Config { backend: "emit", mech: "mtss", target: "i686", chunk_size: None, green: false, sched: None, race: false },
    // Green threads (`--threads green`, two workers as on a 2-CPU machine): the fixed-stack
    // conventions, lookahead with default and smallest chunks, the MMU and heap mechanisms,
    // MTSS.
    Config { backend: "native", mech: "traditional", target: "x86_64", chunk_size: None, green: true, sched: None, race: false },
    Config { backend: "emit", mech: "traditional", target: "x86_64", chunk_size: None, green: true, sched: None, race: false },
    Config { backend: "emit", mech: "traditional", target: "i686", chunk_size: None, green: true, sched: None, race: false },
    Config { backend: "emit", mech: "callee-cleanup", target: "x86_64", chunk_size: None, green: true, sched: None, race: false },
    Config { backend: "emit", mech: "callee-cleanup", target: "i686", chunk_size: None, green: true, sched: None, race: false },
    Config { backend: "emit", mech: "lookahead", target: "x86_64", chunk_size: Some(32768), green: true, sched: None, race: false },
    Config { backend: "emit", mech: "lookahead", target: "i686", chunk_size: Some(32768), green: true, sched: None, race: false },
    Config { backend: "emit", mech: "lookahead", target: "x86_64", chunk_size: Some(4096), green: true, sched: None, race: false },
    Config { backend: "emit", mech: "lookahead", target: "i686", chunk_size: Some(4096), green: true, sched: None, race: false },
    Config { backend: "emit", mech: "mmu", target: "x86_64", chunk_size: None, green: true, sched: None, race: false },
    Config { backend: "emit", mech: "mmu", target: "i686", chunk_size: None, green: true, sched: None, race: false },
    Config { backend: "emit", mech: "mmu-reuse", target: "x86_64", chunk_size: Some(4096), green: true, sched: None, race: false },
    Config { backend: "emit", mech: "mmu-reuse", target: "i686", chunk_size: Some(4096), green: true, sched: None, race: false },
    Config { backend: "emit", mech: "heap", target: "x86_64", chunk_size: None, green: true, sched: None, race: false },
    Config { backend: "emit", mech: "heap", target: "i686", chunk_size: Some(4096), green: true, sched: None, race: false },
    Config { backend: "emit", mech: "heap-malloc", target: "x86_64", chunk_size: None, green: true, sched: None, race: false },
    Config { backend: "emit", mech: "heap-malloc", target: "i686", chunk_size: None, green: true, sched: None, race: false },
    // MTSS on green threads: x86-64 with the paper's 128-byte pages, i686 with the smallest
    // (32 bytes: the most overflows).
    Config { backend: "emit", mech: "mtss", target: "x86_64", chunk_size: None, green: true, sched: None, race: false },
    Config { backend: "emit", mech: "mtss", target: "i686", chunk_size: Some(32), green: true, sched: None, race: false },
    // The deterministic scheduler (one worker, every decision from the seed): the programs'
    // output does not depend on the interleaving, so any seed must give the oracle's.
    Config { backend: "emit", mech: "lookahead", target: "x86_64", chunk_size: Some(4096), green: true, sched: Some("random:7"), race: false },
    Config { backend: "emit", mech: "traditional", target: "i686", chunk_size: None, green: true, sched: Some("pct:7:3"), race: false },
    // `--race` (every access that may be shared calls the detector): the oracle's output and
    // no race report, on both back ends, both targets, every kind of mechanism, both kinds
    // of threads.
    Config { backend: "native", mech: "traditional", target: "x86_64", chunk_size: None, green: false, sched: None, race: true },
    Config { backend: "emit", mech: "traditional", target: "i686", chunk_size: None, green: false, sched: None, race: true },
    Config { backend: "emit", mech: "callee-cleanup", target: "x86_64", chunk_size: None, green: true, sched: None, race: true },
    Config { backend: "emit", mech: "lookahead", target: "x86_64", chunk_size: Some(4096), green: false, sched: None, race: true },
    Config { backend: "emit", mech: "lookahead", target: "i686", chunk_size: None, green: true, sched: None, race: true },
    Config { backend: "emit", mech: "mmu", target: "i686", chunk_size: None, green: false, sched: None, race: true },
    Config { backend: "emit", mech: "mmu-reuse", target: "x86_64", chunk_size: None, green: true, sched: None, race: true },
    Config { backend: "emit", mech: "heap", target: "x86_64", chunk_size: None, green: true, sched: None, race: true },
    Config { backend: "emit", mech: "heap-malloc", target: "i686", chunk_size: None, green: false, sched: None, race: true },
    Config { backend: "emit", mech: "mtss", target: "x86_64", chunk_size: None, green: true, sched: None, race: true },
    Config { backend: "emit", mech: "mtss", target: "i686", chunk_size: None, green: false, sched: None, race: true },
];

/// Programs run with this many compile-and-run jobs at a time.
const PARALLEL_JOBS: usize = 2;
/// A run taking longer than this is killed and reported.
const RUN_TIMEOUT: Duration = Duration::from_secs(30);

impl Config {
    fn name(&self) -> String {
        let base = match self.chunk_size {
            None => format!("{}-{}-{}", self.backend, self.mech, self.target),
            Some(c) => format!("{}-{}-{}-chunk{c}", self.backend, self.mech, self.target),
        };
        let base = match (self.green, self.sched) {
            (true, Some(sched)) => format!("{base}-green-{}", sched.replace(':', "")),
            (true, None) => base + "-green",
            _ => base,
        };
        if self.race {
            base + "-race"
        } else {
            base
        }
    }

    fn pointer_bits(&self) -> u32 {
        if self.target.starts_with("x86_64") {
            64
        } else {
            32
        }
    }
}

/// One corpus program.
#[derive(Clone, Debug)]
struct Program {
    /// Path relative to `tests/programs` without `.cm`, e.g. `thesis/tree_multi`.
    name: String,
    path: PathBuf,
    variants: Vec<Variant>,
}

#[derive(Clone, Debug, PartialEq)]
struct Variant {
    /// `None` for the default run.
    name: Option<String>,
    args: Vec<String>,
}

fn programs_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs")
}

/// Parses the `// args:` lines of the leading comment block.
fn parse_variants(source: &str) -> Vec<Variant> {
    let mut variants = Vec::new();
    for line in source.lines() {
        let Some(comment) = line.trim_start().strip_prefix("//") else {
            break;
        };
        let Some(rest) = comment.trim_start().strip_prefix("args") else {
            continue;
        };
        let (name, rest) = if let Some(r) = rest.strip_prefix('[') {
            match r.split_once("]:") {
                Some((name, args)) => (Some(name.to_string()), args),
                None => continue,
            }
        } else if let Some(args) = rest.strip_prefix(':') {
            (None, args)
        } else {
            continue;
        };
        let args = rest.split_whitespace().map(str::to_string).collect();
        variants.push(Variant { name, args });
    }
    if variants.is_empty() {
        variants.push(Variant {
            name: None,
            args: Vec::new(),
        });
    }
    variants
}

fn load_programs() -> Vec<Program> {
    let root = programs_dir();
    let mut programs = Vec::new();
    // cmm_only/ holds programs gcc cannot compile; their expectations are hand-derived.
    for sub in ["", "thesis", "cmm_only"] {
        let dir = root.join(sub);
        let mut paths: Vec<PathBuf> = fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
            .map(|e| e.expect("directory entry").path())
            .filter(|p| p.extension().is_some_and(|x| x == "cm"))
            .collect();
        paths.sort();
        for path in paths {
            let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
            let name = if sub.is_empty() {
                stem
            } else {
                format!("{sub}/{stem}")
            };
            let source = fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
            programs.push(Program {
                name,
                path,
                variants: parse_variants(&source),
            });
        }
    }
    programs
}

/// The expected-output file of a run for a target with `bits`-bit pointers.
fn expected_path(program: &Program, variant: &Variant, bits: u32) -> PathBuf {
    let base = program.path.with_extension("");
    let suffix = variant
        .name
        .as_ref()
        .map(|v| format!(".{v}"))
        .unwrap_or_default();
    let exp64 = PathBuf::from(format!("{}{suffix}.expected", base.display()));
    if bits == 32 {
        let exp32 = PathBuf::from(format!("{}{suffix}.expected32", base.display()));
        if exp32.exists() {
            return exp32;
        }
    }
    exp64
}

/// How a run ended.
enum Outcome {
    Exited(i32),
    Signaled(i32),
    TimedOut,
}

/// Runs `exe` with `args` in `dir`, stdout and stderr to files; returns the expected-file text
/// and stderr.
fn run_program(
    exe: &Path,
    args: &[String],
    dir: &Path,
    sched: Option<&str>,
) -> Result<(String, String), String> {
    let out_path = dir.join("stdout");
    let err_path = dir.join("stderr");
    let stdout = fs::File::create(&out_path).map_err(|e| format!("create stdout file: {e}"))?;
    let stderr = fs::File::create(&err_path).map_err(|e| format!("create stderr file: {e}"))?;
    let mut child = Command::new(exe)
        .args(args)
        .envs(sched.map(|s| ("STACKRT_SCHED", s)))
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
    let start = Instant::now();
    let outcome = loop {
        match child.try_wait().map_err(|e| format!("wait: {e}"))? {
            Some(status) => {
                use std::os::unix::process::ExitStatusExt;
                break match (status.code(), status.signal()) {
                    (Some(code), _) => Outcome::Exited(code),
                    (None, Some(sig)) => Outcome::Signaled(sig),
                    (None, None) => Outcome::Signaled(0),
                };
            }
            None if start.elapsed() > RUN_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                break Outcome::TimedOut;
            }
            None => std::thread::sleep(Duration::from_millis(5)),
        }
    };
    let stdout = fs::read(&out_path).map_err(|e| format!("read stdout: {e}"))?;
    let stderr = fs::read(&err_path).map_err(|e| format!("read stderr: {e}"))?;
    let mut text = String::from_utf8_lossy(&stdout).into_owned();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    match outcome {
        Outcome::Exited(code) => writeln!(text, "exit: {code}").unwrap(),
        Outcome::Signaled(sig) => writeln!(text, "killed by signal {sig}").unwrap(),
        Outcome::TimedOut => writeln!(text, "timed out after {RUN_TIMEOUT:?}").unwrap(),
    }
    Ok((text, String::from_utf8_lossy(&stderr).into_owned()))
}

/// A short diff-like excerpt: the first differing line with two lines of context.
fn diff_excerpt(expected: &str, actual: &str) -> String {
    let exp: Vec<&str> = expected.lines().collect();
    let act: Vec<&str> = actual.lines().collect();
    let first = (0..exp.len().max(act.len()))
        .find(|&i| exp.get(i) != act.get(i))
        .unwrap_or(0);
    let from = first.saturating_sub(2);
    let mut out = String::new();
    for line in &exp[from..first] {
        writeln!(out, "      {line}").unwrap();
    }
    for line in exp.iter().skip(first).take(3) {
        writeln!(out, "    - {line}").unwrap();
    }
    for line in act.iter().skip(first).take(3) {
        writeln!(out, "    + {line}").unwrap();
    }
    if exp.len() > first + 3 || act.len() > first + 3 {
        writeln!(
            out,
            "    ... (expected {} lines, got {})",
            exp.len(),
            act.len()
        )
        .unwrap();
    }
    out
}

fn excerpt(text: &str, lines: usize) -> String {
    let mut out = String::new();
    for line in text.lines().take(lines) {
        writeln!(out, "    | {line}").unwrap();
    }
    if text.lines().count() > lines {
        writeln!(out, "    | ...").unwrap();
    }
    out
}

/// Compiles `program` in `config` and runs all its variants; returns the failures.
fn check_program(program: &Program, config: Config, work: &Path) -> Vec<String> {
    let label = format!("{} [{}]", program.name, config.name());
    let dir = work.join(format!(
        "{}-{}",
        program.name.replace('/', "_"),
        config.name()
    ));
    if let Err(e) = fs::create_dir_all(&dir) {
        return vec![format!("{label}: cannot create {}: {e}", dir.display())];
    }
    let exe = dir.join("prog");
    let compile = Command::new(env!("CARGO_BIN_EXE_cmm"))
        .arg("compile")
        .arg(&program.path)
        .args([
            "--backend",
            config.backend,
            "--mech",
            config.mech,
            "--target",
            config.target,
        ])
        .args(
            config
                .chunk_size
                .map(|c| vec!["--chunk-size".to_string(), c.to_string()])
                .unwrap_or_default(),
        )
        .args(if config.green {
            &["--threads", "green"][..]
        } else {
            &[]
        })
        .args(if config.race { &["--race"][..] } else { &[] })
        .arg("-o")
        .arg(&exe)
        .stdin(Stdio::null())
        .output();
    match compile {
        Err(e) => return vec![format!("{label}: cannot run cmm: {e}")],
        Ok(out) if !out.status.success() => {
            return vec![format!(
                "{label}: cmm compile failed ({}):\n{}",
                out.status,
                excerpt(&String::from_utf8_lossy(&out.stderr), 8)
            )];
        }
        Ok(_) => {}
    }
    let mut failures = Vec::new();
    for variant in &program.variants {
        let run_label = match &variant.name {
            Some(v) => format!(
                "{} [{}] run {v} {:?}",
                program.name,
                config.name(),
                variant.args
            ),
            None => format!("{label} args {:?}", variant.args),
        };
        let exp_path = expected_path(program, variant, config.pointer_bits());
        let expected = match fs::read_to_string(&exp_path) {
            Ok(t) => t,
            Err(e) => {
                failures.push(format!(
                    "{run_label}: no expected file {}: {e}",
                    exp_path.display()
                ));
                continue;
            }
        };
        match run_program(&exe, &variant.args, &dir, config.sched) {
            Err(e) => failures.push(format!("{run_label}: {e}")),
            Ok((actual, stderr)) if actual != expected => {
                let mut msg = format!(
                    "{run_label}: output differs from {}\n{}",
                    exp_path.file_name().unwrap().to_string_lossy(),
                    diff_excerpt(&expected, &actual)
                );
                if !stderr.is_empty() {
                    write!(msg, "    stderr:\n{}", excerpt(&stderr, 5)).unwrap();
                }
                failures.push(msg);
            }
            Ok((_, stderr)) if config.race && stderr.contains("data race") => {
                failures.push(format!(
                    "{run_label}: a race report on a race-free program:\n{}",
                    excerpt(&stderr, 5)
                ));
            }
            Ok(_) => {}
        }
    }
    failures
}

fn selected_configs() -> Vec<Config> {
    match std::env::var("CMM_CORPUS_CONFIGS") {
        Ok(list) if !list.trim().is_empty() => {
            let wanted: Vec<&str> = list.split(',').map(str::trim).collect();
            for w in &wanted {
                assert!(
                    CONFIGS.iter().any(|c| c.name() == *w),
                    "CMM_CORPUS_CONFIGS names unknown configuration {w:?}; known: {:?}",
                    CONFIGS.iter().map(Config::name).collect::<Vec<_>>()
                );
            }
            CONFIGS
                .iter()
                .copied()
                .filter(|c| wanted.contains(&c.name().as_str()))
                .collect()
        }
        _ => CONFIGS.to_vec(),
    }
}

#[test]
fn corpus() {
    let programs: Vec<Program> = match std::env::var("CMM_CORPUS_FILTER") {
        Ok(f) if !f.is_empty() => load_programs()
            .into_iter()
            .filter(|p| p.name.contains(&f))
            .collect(),
        _ => load_programs(),
    };
    assert!(!programs.is_empty(), "no corpus programs selected");
    let configs = selected_configs();
    let work = tempfile::tempdir().expect("temporary directory");
    let jobs: Mutex<VecDeque<(Program, Config)>> = Mutex::new(
        configs
            .iter()
            .flat_map(|c| programs.iter().map(move |p| (p.clone(), *c)))
            .collect(),
    );
    let total = jobs.lock().unwrap().len();
    let failures: Mutex<Vec<String>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..PARALLEL_JOBS {
            s.spawn(|| loop {
                let Some((program, config)) = jobs.lock().unwrap().pop_front() else {
                    break;
                };
                let f = check_program(&program, config, work.path());
                failures.lock().unwrap().extend(f);
            });
        }
    });
    let mut failures = failures.into_inner().unwrap();
    failures.sort();
    assert!(
        failures.is_empty(),
        "{} of {total} corpus program compilations/runs failed:\n\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// True if `gcc -m32` can build and link a threaded C program.
fn gcc_m32_works(work: &Path) -> bool {
    let src = work.join("m32.c");
    fs::write(&src, "#include <pthread.h>\nint main(void) { return 0; }\n").unwrap();
    Command::new("gcc")
        .args(["-m32", "-pthread"])
        .arg(&src)
        .arg("-o")
        .arg(work.join("m32"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The stored expected files are exactly what gcc produces now (`bless.sh --check`), for
/// x86-64 and, where `gcc -m32` works, i686. In CI the i686 part is mandatory.
#[test]
fn oracle_is_fresh() {
    let work = tempfile::tempdir().expect("temporary directory");
    let m32 = gcc_m32_works(work.path());
    if !m32 {
        assert!(
            std::env::var_os("CI").is_none(),
            "gcc -m32 does not work (install gcc-multilib, e.g. `cargo xtask setup`): the i686 \
             half of the corpus oracle cannot be checked, and CI requires it"
        );
        eprintln!("oracle_is_fresh: gcc -m32 unavailable, checking x86-64 only (CI unset)");
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oracle/bless.sh");
    let mut cmd = Command::new("bash");
    cmd.arg(&script).arg("--check");
    if !m32 {
        cmd.arg("--no32");
    }
    let out = cmd.output().expect("run tests/oracle/bless.sh");
    assert!(
        out.status.success(),
        "the corpus's expected files differ from the gcc oracle (run tests/oracle/bless.sh to \
         regenerate after checking why):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every run of every program has an expected file, and no expected file is orphaned.
#[test]
fn every_program_has_expectations() {
    let programs = load_programs();
    let mut problems = Vec::new();
    let mut known = std::collections::HashSet::new();
    for p in &programs {
        for v in &p.variants {
            let exp = expected_path(p, v, 64);
            if !exp.exists() {
                problems.push(format!("{}: missing {}", p.name, exp.display()));
            }
            known.insert(exp);
            known.insert(expected_path(p, v, 32));
        }
    }
    for sub in ["", "thesis", "cmm_only"] {
        for entry in fs::read_dir(programs_dir().join(sub)).unwrap() {
            let path = entry.unwrap().path();
            let ext = path.extension().map(|e| e.to_string_lossy().into_owned());
            if matches!(ext.as_deref(), Some("expected" | "expected32")) && !known.contains(&path) {
                problems.push(format!("orphaned expected file {}", path.display()));
            }
        }
    }
    assert!(
        programs.len() >= 45,
        "the corpus should have at least 45 programs"
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Removes comments, string literals and character literals (keeping line structure).
fn strip_comments_and_literals(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i < b.len() && !(b[i] == b'*' && b.get(i + 1) == Some(&b'/')) {
                    if b[i] == b'\n' {
                        out.push('\n');
                    }
                    i += 1;
                }
                i += 2;
                out.push(' ');
            }
            q @ (b'"' | b'\'') => {
                i += 1;
                while i < b.len() && b[i] != q {
                    if b[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
                i += 1;
                out.push_str(if q == b'"' { "\"\"" } else { "'x'" });
            }
            c => {
                out.push(c as char);
                i += 1;
            }
        }
    }
    out
}

/// Finds uses of C features C-- omits (thesis section 3.3.2) in a program's code.
fn cmm_violations(src: &str) -> Vec<String> {
    let code = strip_comments_and_literals(src);
    let mut found = Vec::new();
    for tok in [
        "++", "--", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>=", "?", "#",
    ] {
        if code.contains(tok) {
            found.push(format!("operator/character {tok:?}"));
        }
    }
    let words: Vec<&str> = code
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .collect();
    for kw in [
        "auto", "const", "enum", "goto", "long", "register", "signed", "static", "switch",
        "typedef", "union", "unsigned", "volatile", "case", "default", "float", "short",
    ] {
        if words.contains(&kw) {
            found.push(format!("keyword {kw:?}"));
        }
    }
    // Declarations with initializers: `TYPE [*...] name [= ...]` at the start of a statement.
    for (n, line) in code.lines().enumerate() {
        let t = line.trim_start();
        let is_decl = ["int ", "char ", "double ", "void ", "struct "]
            .iter()
            .any(|k| t.starts_with(k));
        if is_decl && !t.contains('(') && t.contains('=') {
            found.push(format!("initializer in declaration on line {}", n + 1));
        }
    }
    found
}

/// Corpus programs use only C-- (no ++, compound assignment, ?:, switch, typedef, ...).
#[test]
fn programs_use_only_cmm_syntax() {
    let mut problems = Vec::new();
    for p in load_programs() {
        let src = fs::read_to_string(&p.path).unwrap();
        for v in cmm_violations(&src) {
            problems.push(format!("{}: {v}", p.name));
        }
    }
    assert!(
        problems.is_empty(),
        "non-C-- constructs in the corpus:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_syntax_check_can_fail() {
    assert!(cmm_violations("int main() { int i; i++; return 0; }").len() == 1);
    assert!(!cmm_violations("int x = 3;").is_empty());
    assert!(!cmm_violations("static int x;").is_empty());
    assert!(!cmm_violations("int f(int a) { return a ? 1 : 2; }").is_empty());
    assert!(cmm_violations("// i++ in a comment\nchar *s; int f() { s = \"a++?\"; }").is_empty());
}

#[test]
fn args_lines_are_parsed() {
    let v =
        parse_variants("// args: 4 1000\n// args[t64]: 64  1000\n// other\nint x;\n// args: 9\n");
    assert_eq!(
        v,
        vec![
            Variant {
                name: None,
                args: vec!["4".into(), "1000".into()]
            },
            Variant {
                name: Some("t64".into()),
                args: vec!["64".into(), "1000".into()]
            },
        ]
    );
    assert_eq!(
        parse_variants("int x;\n"),
        vec![Variant {
            name: None,
            args: vec![]
        }]
    );
}

#[test]
fn diff_excerpt_shows_the_first_difference() {
    let d = diff_excerpt("a\nb\nc\nexit: 0\n", "a\nb\nX\nexit: 0\n");
    assert!(d.contains("- c") && d.contains("+ X"), "{d}");
}
