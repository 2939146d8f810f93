//! Differential test on random C-- programs: every program from the generator in `tests/gen/`
//! (random call graphs with self- and mutual recursion, frame sizes from a few bytes to several
//! KiB, recursion depths up to 100 000, doubles and `printf` at random points) must print the
//! same and exit with the same status when built by `cmm` in every supported configuration as
//! when built by gcc (`-m64`, and `-m32` for the i686 configurations), the independent oracle.
//!
//! Environment:
//! - `CMM_RANDOM_CASES=N`: number of programs (default [`DEFAULT_CASES`]);
//! - `CMM_RANDOM_SEED=S`: base seed, decimal or `0x` hex (default [`DEFAULT_SEED`]); case `n`
//!   of seed `S` is always the same program, whatever `CMM_RANDOM_CASES` is;
//! - `CMM_RANDOM_CASE=n`: run only case `n` (to reproduce a reported failure);
//! - `CMM_RANDOM_CONFIGS=name,name`: run only these configurations (names as printed);
//! - `CMM_RANDOM_SHRINK_SECS=T`: time allowed to minimise the first failing case (default 240;
//!   0 disables it). Minimisation is structural (`gen::reductions`: drop functions, statements,
//!   declarations, simplify expressions, lower depth and fuel), which converges much faster
//!   than proptest's generic shrinking on these large genomes;
//! - `CMM_RANDOM_KEEP=DIR`: also write every generated program to `DIR`;
//! - `CI`: when set, a missing `gcc -m32` is an error instead of skipping the i686 oracle.
//!
//! On failure the program (and its shrunk version) is written to `target/random-failures/`
//! (under `CARGO_TARGET_DIR` when that is set), and the message names the file, the seed, the
//! case number, the configuration and the first differing lines.

mod gen;

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config as RunnerConfig, RngAlgorithm, TestRng, TestRunner};

/// Programs checked when `CMM_RANDOM_CASES` is not set (about a minute on two cores).
const DEFAULT_CASES: u64 = 24;
/// Base seed when `CMM_RANDOM_SEED` is not set: CI is reproducible.
const DEFAULT_SEED: u64 = 0x00c0_ffee_5eed_2024;
/// Compile-and-run jobs at a time.
const PARALLEL_JOBS: usize = 2;
/// A compilation or run taking longer than this is killed and reported.
const TIMEOUT: Duration = Duration::from_secs(30);
/// Stack limit (KiB) the programs run under: gcc's and the traditional mechanisms' deepest
/// programs need more than the usual 8 MiB (the generator's budget is `gen::STACK_BUDGET`).
const STACK_KIB: u64 = 512 * 1024;
/// Chunk sizes tried, smallest first, to find the smallest one `cmm` accepts: today 4096, the
/// smallest `--chunk-size` that passes validation (any program compiles at any valid size: a
/// reserve over a chunk's capacity gets a larger chunk at run time). The smaller sizes keep
/// the probe following the compiler should it ever accept smaller chunks.
const CHUNK_CANDIDATES: &[u32] = &[
    1, 256, 1024, 2048, 4096, 8192, 12288, 16384, 20480, 24576, 32768,
];

/// How a configuration sets the chunk size of chunked mechanisms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Chunk {
    /// No `--chunk-size` option.
    Default,
    /// The smallest `--chunk-size` the compiler accepts.
    Tiny,
}

/// One way of compiling: `cmm compile --backend B --mech M --target T [--chunk-size N]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Config {
    backend: &'static str,
    mech: &'static str,
    target: &'static str,
    chunk: Chunk,
}

const fn cfg(backend: &'static str, mech: &'static str, target: &'static str) -> Config {
    Config {
        backend,
        mech,
        target,
        chunk: Chunk::Default,
    }
}

const fn tiny(backend: &'static str, mech: &'static str, target: &'static str) -> Config {
    Config {
        backend,
        mech,
        target,
        chunk: Chunk::Tiny,
    }
}

/// Every configuration the test knows. Those the compiler does not support yet (a trivial
/// program does not compile) are skipped with a note, unless listed in [`REQUIRED`].
const CONFIGS: &[Config] = &[
    cfg("native", "traditional", "x86_64"),
    cfg("emit", "traditional", "x86_64"),
    cfg("emit", "traditional", "i686"),
    cfg("emit", "callee-cleanup", "x86_64"),
    cfg("emit", "callee-cleanup", "i686"),
    cfg("emit", "lookahead", "x86_64"),
    tiny("emit", "lookahead", "x86_64"),
    cfg("emit", "lookahead", "i686"),
    tiny("emit", "lookahead", "i686"),
    cfg("emit", "heap", "x86_64"),
    tiny("emit", "heap", "x86_64"),
    cfg("emit", "heap", "i686"),
    tiny("emit", "heap", "i686"),
    cfg("emit", "heap-malloc", "x86_64"),
    cfg("emit", "heap-malloc", "i686"),
];

/// Configurations that must work: a regression in one of them fails the test instead of being
/// skipped. (i686 ones are required only where `gcc -m32` works, which CI guarantees.)
const REQUIRED: &[&str] = &[
    "native-traditional-x86_64",
    "emit-traditional-x86_64",
    "emit-traditional-i686",
    "emit-callee-cleanup-x86_64",
    "emit-callee-cleanup-i686",
    "emit-lookahead-x86_64",
    "emit-lookahead-x86_64-tiny",
    "emit-lookahead-i686",
    "emit-lookahead-i686-tiny",
    "emit-heap-x86_64",
    "emit-heap-x86_64-tiny",
    "emit-heap-i686",
    "emit-heap-i686-tiny",
    "emit-heap-malloc-x86_64",
    "emit-heap-malloc-i686",
];

impl Config {
    fn name(&self) -> String {
        let mut n = format!("{}-{}-{}", self.backend, self.mech, self.target);
        if self.chunk == Chunk::Tiny {
            n.push_str("-tiny");
        }
        n
    }

    fn is_i686(&self) -> bool {
        self.target == "i686"
    }

    /// The `cmm compile` arguments after the source file.
    fn args(&self, tiny_chunk: Option<u32>) -> Vec<String> {
        let mut a: Vec<String> = [
            "--backend",
            self.backend,
            "--mech",
            self.mech,
            "--target",
            self.target,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        if self.chunk == Chunk::Tiny {
            a.push("--chunk-size".into());
            a.push(tiny_chunk.expect("tiny chunk size probed").to_string());
        }
        a
    }
}

/// How a process ended, with its stdout.
#[derive(Clone, Debug, PartialEq, Eq)]
struct RunResult {
    stdout: String,
    stderr: String,
    status: String,
}

impl RunResult {
    fn ok(&self) -> bool {
        self.status.starts_with("exit ")
    }

    /// The comparable text: stdout followed by the status line.
    fn observable(&self) -> String {
        let mut t = self.stdout.clone();
        if !t.is_empty() && !t.ends_with('\n') {
            t.push('\n');
        }
        writeln!(t, "{}", self.status).unwrap();
        t
    }
}

/// Runs `cmd` with a timeout; stdout and stderr go to files in `dir` named after `tag`.
fn run_with_timeout(mut cmd: Command, dir: &Path, tag: &str) -> Result<RunResult, String> {
    let out_path = dir.join(format!("{tag}.stdout"));
    let err_path = dir.join(format!("{tag}.stderr"));
    let stdout = fs::File::create(&out_path).map_err(|e| format!("create stdout file: {e}"))?;
    let stderr = fs::File::create(&err_path).map_err(|e| format!("create stderr file: {e}"))?;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .spawn()
        .map_err(|e| format!("cannot start {cmd:?}: {e}"))?;
    let start = Instant::now();
    let status = loop {
        match child.try_wait().map_err(|e| format!("wait: {e}"))? {
            Some(status) => {
                use std::os::unix::process::ExitStatusExt;
                break match (status.code(), status.signal()) {
                    (Some(code), _) => format!("exit {code}"),
                    (None, Some(sig)) => format!("killed by signal {sig}"),
                    (None, None) => "ended without status".to_string(),
                };
            }
            None if start.elapsed() > TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                break format!("timed out after {TIMEOUT:?}");
            }
            None => std::thread::sleep(Duration::from_millis(2)),
        }
    };
    let read = |p: &Path| String::from_utf8_lossy(&fs::read(p).unwrap_or_default()).into_owned();
    Ok(RunResult {
        stdout: read(&out_path),
        stderr: read(&err_path),
        status,
    })
}

/// Runs a built program under the larger stack limit.
fn run_program(exe: &Path, dir: &Path, tag: &str) -> Result<RunResult, String> {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(format!("ulimit -s {STACK_KIB} && exec \"$0\""))
        .arg(exe)
        .current_dir(dir);
    run_with_timeout(cmd, dir, tag)
}

/// gcc's flags as the corpus oracle (`tests/oracle/bless.sh`) uses them.
fn gcc_flags(bits: u32) -> Vec<String> {
    let mut f: Vec<String> = [
        format!("-m{bits}"),
        "-w".into(),
        "-fwrapv".into(),
        "-O0".into(),
        "-no-pie".into(),
        "-DNULL=0".into(),
        "-Dstacksizeof(x)=0".into(),
    ]
    .to_vec();
    if bits == 32 {
        // IEEE double semantics (SSE2), as the i686 back end has.
        f.push("-msse2".into());
        f.push("-mfpmath=sse".into());
    }
    let major = Command::new("gcc")
        .arg("-dumpversion")
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .split('.')
                .next()?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0u32);
    if major >= 14 {
        f.push("-fpermissive".into());
    }
    f
}

/// Builds `src` with gcc for `bits`-bit x86 and runs it.
fn gcc_run(src: &Path, bits: u32, dir: &Path) -> Result<RunResult, String> {
    let exe = dir.join(format!("gcc{bits}"));
    let mut cmd = Command::new("gcc");
    cmd.args(gcc_flags(bits))
        .arg("-x")
        .arg("c")
        .arg(src)
        .arg("-o")
        .arg(&exe);
    let built = run_with_timeout(cmd, dir, &format!("gcc{bits}-build"))?;
    if built.status != "exit 0" {
        return Err(format!(
            "gcc -m{bits} rejects the program ({}):\n{}",
            built.status,
            excerpt(&built.stderr, 10)
        ));
    }
    run_program(&exe, dir, &format!("gcc{bits}-run"))
}

/// True when gcc can build and run a 32-bit program here.
fn gcc_m32_works(dir: &Path) -> bool {
    let src = dir.join("m32probe.c");
    fs::write(
        &src,
        "int main(void) { return sizeof(void *) == 4 ? 0 : 1; }\n",
    )
    .unwrap();
    match gcc_run(&src, 32, dir) {
        Ok(r) => r.status == "exit 0",
        Err(_) => false,
    }
}

fn cmm_compile(
    src: &Path,
    config: &Config,
    tiny_chunk: Option<u32>,
    exe: &Path,
    dir: &Path,
    tag: &str,
) -> Result<RunResult, String> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cmm"));
    cmd.arg("compile")
        .arg(src)
        .args(config.args(tiny_chunk))
        .arg("-o")
        .arg(exe);
    run_with_timeout(cmd, dir, tag)
}

/// The configurations to run, the smallest accepted chunk size, and notes about skipped ones.
struct Plan {
    configs: Vec<Config>,
    tiny_chunk: Option<u32>,
    have_m32: bool,
    notes: Vec<String>,
}

/// Probes which configurations `cmm` supports by compiling a trivial program in each.
fn plan(work: &Path) -> Plan {
    let dir = work.join("probe");
    fs::create_dir_all(&dir).unwrap();
    let raised = Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -s {STACK_KIB}"))
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        raised,
        "cannot raise the stack limit to {STACK_KIB} KiB (`ulimit -s {STACK_KIB}` fails): the \
         deep random programs need it under gcc and the fixed-stack mechanisms (see `ulimit -Hs`)"
    );
    let have_m32 = gcc_m32_works(&dir);
    if std::env::var_os("CI").is_some() {
        assert!(
            have_m32,
            "CI is set but `gcc -m32` cannot build and run a program: install gcc-multilib \
             (`cargo xtask setup`)"
        );
    }
    let src = dir.join("trivial.cm");
    fs::write(&src, "int main() {\n    return 0;\n}\n").unwrap();
    // Chunk sizes are probed with a program that calls `printf` with a double, as the random
    // programs do: at the smallest sizes the call's reserve (the extern budget) is over a
    // chunk's capacity, which the compiler must accept.
    let printf_src = dir.join("printf.cm");
    fs::write(
        &printf_src,
        "extern int printf(char *fmt, ...);\n\
         int main() {\n    printf(\"%d %.4f\\n\", 1, 2.5);\n    return 0;\n}\n",
    )
    .unwrap();
    let exe = dir.join("trivial");
    let compiles = |c: &Config, tiny: Option<u32>| {
        let src = if tiny.is_some() { &printf_src } else { &src };
        cmm_compile(src, c, tiny, &exe, &dir, "probe").is_ok_and(|r| r.status == "exit 0")
    };
    // The smallest chunk size the compiler accepts, probed on the first chunked configuration
    // that compiles at all.
    let tiny_chunk = CONFIGS
        .iter()
        .filter(|c| c.chunk == Chunk::Tiny)
        .find(|c| {
            compiles(
                &Config {
                    chunk: Chunk::Default,
                    ..**c
                },
                None,
            )
        })
        .and_then(|c| {
            CHUNK_CANDIDATES
                .iter()
                .copied()
                .find(|&size| compiles(c, Some(size)))
        });

    let wanted: Option<Vec<String>> = std::env::var("CMM_RANDOM_CONFIGS")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.split(',').map(|x| x.trim().to_string()).collect());
    if let Some(w) = &wanted {
        for name in w {
            assert!(
                CONFIGS.iter().any(|c| c.name() == *name),
                "CMM_RANDOM_CONFIGS names unknown configuration {name:?}; known: {:?}",
                CONFIGS.iter().map(Config::name).collect::<Vec<_>>()
            );
        }
    }
    let mut configs = Vec::new();
    let mut notes = Vec::new();
    for c in CONFIGS {
        let name = c.name();
        if wanted.as_ref().is_some_and(|w| !w.contains(&name)) {
            continue;
        }
        if c.is_i686() && !have_m32 {
            notes.push(format!(
                "{name}: skipped, gcc -m32 (the i686 oracle) is missing"
            ));
            continue;
        }
        let supported = match c.chunk {
            Chunk::Default => compiles(c, None),
            Chunk::Tiny => tiny_chunk.is_some_and(|t| compiles(c, Some(t))),
        };
        if supported {
            configs.push(*c);
        } else if REQUIRED.contains(&name.as_str()) {
            let (probe, size) = match c.chunk {
                Chunk::Default => (&src, None),
                Chunk::Tiny => (&printf_src, tiny_chunk.or(CHUNK_CANDIDATES.last().copied())),
            };
            let detail = cmm_compile(probe, c, size, &exe, &dir, "probe")
                .map(|r| format!("{}: {}", r.status, r.stderr.trim()))
                .unwrap_or_else(|e| e);
            panic!(
                "required configuration {name} cannot compile {} ({detail})",
                probe.display()
            );
        } else {
            notes.push(format!(
                "{name}: skipped, not supported by this cmm yet (trivial program fails to compile)"
            ));
        }
    }
    Plan {
        configs,
        tiny_chunk,
        have_m32,
        notes,
    }
}

/// The 32-byte ChaCha seed of case `n` under base seed `seed` (splitmix64 stream).
fn case_seed(seed: u64, n: u64) -> [u8; 32] {
    let mut state = seed ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let mut out = [0u8; 32];
    for chunk in out.chunks_mut(8) {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        chunk.copy_from_slice(&z.to_le_bytes());
    }
    out
}

fn runner_for(seed: u64, n: u64) -> TestRunner {
    let config = RunnerConfig {
        failure_persistence: None,
        ..RunnerConfig::default()
    };
    TestRunner::new_with_rng(
        config,
        TestRng::from_seed(RngAlgorithm::ChaCha, &case_seed(seed, n)),
    )
}

fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    let v = v.trim();
    let parsed = match v.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => v.parse(),
    };
    Some(parsed.unwrap_or_else(|e| panic!("{name}={v:?} is not a number: {e}")))
}

/// What one program did under the oracle and under each configuration.
#[derive(Debug)]
enum Verdict {
    /// Every configuration agreed with gcc; the oracle's stdout.
    Pass(String),
    /// The generator produced something invalid or target-dependent (a test bug).
    BadProgram(String),
    /// `cmm` disagreed with gcc in these configurations (name, message).
    Mismatch(Vec<(String, String)>),
}

fn header(seed: u64, n: u64, r: &gen::Rendered) -> String {
    format!(
        "Random C-- program from tests/gen (seed {seed:#x}, case {n}).\n\
         Reproduce: CMM_RANDOM_SEED={seed:#x} CMM_RANDOM_CASE={n} cargo test --test \
         random_programs\n\
         depth {}, fuel {}, largest frame estimate {} bytes",
        r.depth, r.fuel, r.max_frame
    )
}

/// Compiles and runs `source` with the oracle and in `configs`. `full` also checks that gcc's
/// `-m32` and `-m64` builds agree (shrinking skips that and the oracles it does not need).
fn check_source(source: &str, configs: &[Config], plan: &Plan, dir: &Path, full: bool) -> Verdict {
    fs::create_dir_all(dir).unwrap();
    let src = dir.join("prog.cm");
    fs::write(&src, source).unwrap();
    for (target, info) in [
        ("x86_64", cmm_front::TargetInfo::X86_64),
        ("i686", cmm_front::TargetInfo::I686),
    ] {
        if let Err(e) = cmm_front::check_rendered("prog.cm", source, info) {
            return Verdict::BadProgram(format!(
                "the front end rejects the program for {target}:\n{}",
                excerpt(&e, 10)
            ));
        }
    }
    let oracle64 = match gcc_run(&src, 64, dir) {
        Ok(r) if r.ok() => r,
        Ok(r) => {
            return Verdict::BadProgram(format!(
                "the gcc -m64 build {}:\n{}",
                r.status,
                excerpt(&r.stderr, 5)
            ))
        }
        Err(e) => return Verdict::BadProgram(e),
    };
    let oracle32 = if plan.have_m32 && (full || configs.iter().any(Config::is_i686)) {
        match gcc_run(&src, 32, dir) {
            Ok(r) if !full || r.observable() == oracle64.observable() => Some(r),
            Ok(r) => {
                return Verdict::BadProgram(format!(
                    "gcc -m32 and gcc -m64 builds disagree (the program depends on the \
                     target):\n{}",
                    diff_excerpt(&oracle64.observable(), &r.observable())
                ))
            }
            Err(e) => return Verdict::BadProgram(e),
        }
    } else {
        None
    };
    let mut mismatches = Vec::new();
    for c in configs {
        let oracle = if c.is_i686() {
            oracle32
                .as_ref()
                .expect("i686 configurations need gcc -m32")
        } else {
            &oracle64
        };
        let name = c.name();
        let exe = dir.join(format!("cmm-{name}"));
        let built = cmm_compile(
            &src,
            c,
            plan.tiny_chunk,
            &exe,
            dir,
            &format!("{name}-build"),
        );
        let name = match plan.tiny_chunk {
            Some(size) if c.chunk == Chunk::Tiny => format!("{name} (--chunk-size {size})"),
            _ => name,
        };
        match built {
            Err(e) => mismatches.push((name, e)),
            Ok(r) if r.status != "exit 0" => mismatches.push((
                name,
                format!(
                    "cmm compile failed ({}):\n{}",
                    r.status,
                    excerpt(&r.stderr, 10)
                ),
            )),
            Ok(_) => match run_program(&exe, dir, &format!("{name}-run")) {
                Err(e) => mismatches.push((name, e)),
                Ok(r) if r.observable() != oracle.observable() => {
                    let mut msg = format!(
                        "output differs from gcc -m{} (- gcc, + cmm):\n{}",
                        if c.is_i686() { 32 } else { 64 },
                        diff_excerpt(&oracle.observable(), &r.observable())
                    );
                    if !r.stderr.is_empty() {
                        write!(msg, "    stderr:\n{}", excerpt(&r.stderr, 5)).unwrap();
                    }
                    mismatches.push((name, msg));
                }
                Ok(_) => {}
            },
        }
    }
    if mismatches.is_empty() {
        Verdict::Pass(oracle64.stdout)
    } else {
        Verdict::Mismatch(mismatches)
    }
}

/// A short diff-like excerpt: the first differing line with two lines of context.
fn diff_excerpt(expected: &str, actual: &str) -> String {
    let exp: Vec<&str> = expected.lines().collect();
    let act: Vec<&str> = actual.lines().collect();
    let first = (0..exp.len().max(act.len()))
        .find(|&i| exp.get(i) != act.get(i))
        .unwrap_or(0);
    let mut out = String::new();
    for line in &exp[first.saturating_sub(2)..first] {
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
            "    ... (gcc printed {} lines, cmm {})",
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

fn failures_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"));
    let target = if target.is_relative() {
        Path::new(env!("CARGO_MANIFEST_DIR")).join(target)
    } else {
        target
    };
    target.join("random-failures")
}

/// Minimises failing case `n`: starting from its genome, repeatedly takes the first of
/// [`gen::reductions`] that still makes one of `configs` disagree with gcc, until none does or
/// `budget` is spent. Returns the smallest failing program and its mismatches.
fn shrink(
    seed: u64,
    n: u64,
    configs: &[Config],
    plan: &Plan,
    work: &Path,
    budget: Duration,
) -> Option<(String, Vec<(String, String)>)> {
    let mut runner = runner_for(seed, n);
    let mut current = gen::genome().new_tree(&mut runner).ok()?.current();
    let start = Instant::now();
    let dir = work.join(format!("shrink-{n}"));
    let mut best = None;
    let mut tried = std::collections::HashSet::new();
    let mut steps = 0u32;
    'outer: while start.elapsed() < budget {
        for candidate in gen::reductions(&current) {
            if start.elapsed() >= budget {
                break 'outer;
            }
            let rendered = gen::render(&candidate, "");
            let source = gen::render(&candidate, &header(seed, n, &rendered)).source;
            if !tried.insert(source.clone()) {
                continue;
            }
            steps += 1;
            if let Verdict::Mismatch(m) = check_source(&source, configs, plan, &dir, false) {
                best = Some((source, m));
                current = candidate;
                continue 'outer;
            }
        }
        break;
    }
    eprintln!(
        "random_programs: shrinking case {n}: {steps} candidates in {:.1?}{}",
        start.elapsed(),
        if start.elapsed() >= budget {
            " (time budget spent)"
        } else {
            " (no smaller failing program)"
        }
    );
    best
}

#[test]
fn random_programs_match_gcc() {
    let seed = env_u64("CMM_RANDOM_SEED").unwrap_or(DEFAULT_SEED);
    let cases: Vec<u64> = match env_u64("CMM_RANDOM_CASE") {
        Some(n) => vec![n],
        None => (0..env_u64("CMM_RANDOM_CASES").unwrap_or(DEFAULT_CASES)).collect(),
    };
    let keep = std::env::var_os("CMM_RANDOM_KEEP").map(PathBuf::from);
    let work = tempfile::tempdir().expect("temporary directory");
    let plan = plan(work.path());
    eprintln!(
        "random_programs: seed {seed:#x}, {} cases, configurations: {}; tiny chunk size: {}",
        cases.len(),
        plan.configs
            .iter()
            .map(Config::name)
            .collect::<Vec<_>>()
            .join(", "),
        plan.tiny_chunk
            .map_or_else(|| "none".to_string(), |t| t.to_string())
    );
    for note in &plan.notes {
        eprintln!("random_programs: {note}");
    }

    let jobs: Mutex<VecDeque<u64>> = Mutex::new(cases.iter().copied().collect());
    let results: Mutex<Vec<(u64, String, gen::Rendered, Verdict)>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..PARALLEL_JOBS {
            s.spawn(|| loop {
                let Some(n) = jobs.lock().unwrap().pop_front() else {
                    break;
                };
                let mut runner = runner_for(seed, n);
                let genome = gen::genome()
                    .new_tree(&mut runner)
                    .expect("the genome strategy never rejects")
                    .current();
                let rendered = gen::render(&genome, "");
                let source = gen::render(&genome, &header(seed, n, &rendered)).source;
                if let Some(dir) = &keep {
                    fs::create_dir_all(dir).unwrap();
                    fs::write(dir.join(format!("case-{n}.cm")), &source).unwrap();
                }
                let start = Instant::now();
                let verdict = check_source(
                    &source,
                    &plan.configs,
                    &plan,
                    &work.path().join(format!("case-{n}")),
                    true,
                );
                eprintln!(
                    "random_programs: case {n}: depth {}, fuel {}, frame <= {} B, {:.1?}: {}",
                    rendered.depth,
                    rendered.fuel,
                    rendered.max_frame,
                    start.elapsed(),
                    match &verdict {
                        Verdict::Pass(out) =>
                            format!("ok ({})", out.lines().last().unwrap_or("no output")),
                        Verdict::BadProgram(_) => "INVALID PROGRAM".into(),
                        Verdict::Mismatch(m) => format!("FAILED in {} configurations", m.len()),
                    }
                );
                results.lock().unwrap().push((n, source, rendered, verdict));
            });
        }
    });
    let mut results = results.into_inner().unwrap();
    results.sort_by_key(|r| r.0);

    let mut report = String::new();
    let mut shrunk_one = false;
    let shrink_budget = Duration::from_secs(env_u64("CMM_RANDOM_SHRINK_SECS").unwrap_or(240));
    let fail_dir = failures_dir();
    let mut failed = 0;
    for (n, source, _, verdict) in &results {
        let (kind, details) = match verdict {
            Verdict::Pass(_) => continue,
            Verdict::BadProgram(msg) => ("generator produced an invalid program", msg.clone()),
            Verdict::Mismatch(m) => (
                "cmm disagrees with gcc",
                m.iter()
                    .map(|(c, msg)| format!("  [{c}] {msg}"))
                    .collect::<Vec<_>>()
                    .join("\n"),
            ),
        };
        failed += 1;
        fs::create_dir_all(&fail_dir).unwrap();
        let path = fail_dir.join(format!("seed-{seed:x}-case-{n}.cm"));
        fs::write(&path, source).unwrap();
        writeln!(
            report,
            "case {n} (seed {seed:#x}): {kind}\n  program: {}\n  reproduce: \
             CMM_RANDOM_SEED={seed:#x} CMM_RANDOM_CASE={n} cargo test --test random_programs\n\
             {details}",
            path.display()
        )
        .unwrap();
        if let Verdict::Mismatch(m) = verdict {
            if !shrunk_one && !shrink_budget.is_zero() {
                shrunk_one = true;
                let failing: Vec<Config> = plan
                    .configs
                    .iter()
                    .copied()
                    .filter(|c| m.iter().any(|(name, _)| *name == c.name()))
                    .collect();
                if let Some((min, m)) =
                    shrink(seed, *n, &failing, &plan, work.path(), shrink_budget)
                {
                    let min_path = fail_dir.join(format!("seed-{seed:x}-case-{n}.min.cm"));
                    fs::write(&min_path, &min).unwrap();
                    writeln!(
                        report,
                        "  shrunk program ({} lines): {}\n{}",
                        min.lines().count(),
                        min_path.display(),
                        m.iter()
                            .map(|(c, msg)| format!("  [{c}] {msg}"))
                            .collect::<Vec<_>>()
                            .join("\n")
                    )
                    .unwrap();
                }
            }
        }
        report.push('\n');
    }
    assert!(
        failed == 0,
        "{failed} of {} random programs failed:\n\n{report}",
        results.len()
    );
    // The generator must keep producing what this test is for: with enough cases, some program
    // recursed deeply (a stack far larger than one chunk). Half the programs are deep and half
    // have a recursion spine, so 24 cases all missing 5000 levels has odds of about 0.1%.
    if results.len() >= 24 {
        let deepest = results
            .iter()
            .filter_map(|(_, _, _, v)| match v {
                Verdict::Pass(out) => out
                    .lines()
                    .last()?
                    .split_whitespace()
                    .skip_while(|w| *w != "max")
                    .nth(1)?
                    .parse::<u64>()
                    .ok(),
                _ => None,
            })
            .max()
            .unwrap_or(0);
        assert!(
            deepest >= 5000,
            "no random program recursed deeper than {deepest} calls: the generator lost its deep \
             recursions"
        );
    }
}

/// Cheap generator check without gcc: many programs, all accepted by the C-- front end for
/// both targets.
#[test]
fn generated_programs_pass_the_front_end() {
    let seed = env_u64("CMM_RANDOM_SEED").unwrap_or(DEFAULT_SEED);
    for n in 0..200u64 {
        let mut runner = runner_for(seed ^ 0xf00d, n);
        let genome = gen::genome().new_tree(&mut runner).unwrap().current();
        let r = gen::render(&genome, "front-end check");
        for info in [cmm_front::TargetInfo::X86_64, cmm_front::TargetInfo::I686] {
            if let Err(e) = cmm_front::check_rendered("gen.cm", &r.source, info) {
                let path = failures_dir().join(format!("frontend-{n}.cm"));
                fs::create_dir_all(path.parent().unwrap()).unwrap();
                fs::write(&path, &r.source).unwrap();
                panic!(
                    "generated program {n} ({}) is rejected by the front end:\n{e}",
                    path.display()
                );
            }
        }
    }
}
