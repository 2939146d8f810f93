//! Project automation: `cargo xtask setup` installs what a fresh machine lacks, `cargo xtask test`
//! runs every check CI runs, `cargo xtask experiments` re-measures the thesis's experiments.

use std::env;
use std::path::{Path, PathBuf};
use std::process::{exit, Command};

const USAGE: &str = "\
usage: cargo xtask <command>

commands:
  setup   install what the i686 target needs (Rust target i686-unknown-linux-gnu, gcc-multilib)
  test    set up if needed, then run every test, clippy and rustfmt (what CI runs)
  check-setup  report whether the i686 toolchain pieces are present (exit 1 if not)
  experiments [--quick] [--only NAME...] [--runs N] [--round-budget S] [--out DIR [--resume]]
          build the compiler and the harness (release), then re-measure the thesis's and the
          paper's experiments: report.md, results.csv and plots in DIR (default
          target/experiments/<date>); --quick takes about 5 minutes, the full run about
          2h 15m (--resume goes on with a stopped run in DIR, keeping the experiments it
          finished); `--help` after `experiments` lists every option
";

fn main() {
    let args: Vec<String> = env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("setup") => setup(),
        Some("check-setup") => check_setup(),
        Some("test") => setup().and_then(|()| test(&args[1..])),
        Some("experiments") => experiments(&args[1..]),
        Some("-h" | "--help" | "help") => {
            print!("{USAGE}");
            Ok(())
        }
        other => {
            eprint!(
                "{}{USAGE}",
                other.map_or(String::new(), |c| format!("xtask: unknown command `{c}`\n"))
            );
            exit(2);
        }
    };
    if let Err(message) = result {
        eprintln!("xtask: error: {message}");
        exit(1);
    }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace")
        .to_path_buf()
}

/// Runs a command, echoing it; an unsuccessful status becomes an error naming it.
fn run(cmd: &mut Command) -> Result<(), String> {
    eprintln!("xtask: running {cmd:?}");
    let status = cmd
        .status()
        .map_err(|e| format!("cannot start {cmd:?}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{cmd:?} failed with {status}"))
    }
}

fn rust_target_installed() -> bool {
    Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .any(|l| l.trim() == "i686-unknown-linux-gnu")
        })
        .unwrap_or(false)
}

/// True when `cc -m32` can compile and link a program using pthreads.
fn gcc_m32_works() -> bool {
    let dir = env::temp_dir().join(format!("xtask-m32-{}", std::process::id()));
    if std::fs::create_dir_all(&dir).is_err() {
        return false;
    }
    let src = dir.join("probe.c");
    let ok = std::fs::write(&src, "#include <pthread.h>\n#include <stdio.h>\nint main(void){printf(\"%d\\n\",(int)sizeof(void*));return 0;}\n")
        .is_ok()
        && Command::new("cc")
            .arg("-m32")
            .arg(&src)
            .arg("-pthread")
            .arg("-o")
            .arg(dir.join("probe"))
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false);
    let _ = std::fs::remove_dir_all(&dir);
    ok
}

fn check_setup() -> Result<(), String> {
    let rust = rust_target_installed();
    let gcc = gcc_m32_works();
    println!(
        "Rust target i686-unknown-linux-gnu: {}",
        if rust { "installed" } else { "MISSING" }
    );
    println!(
        "cc -m32 (gcc-multilib):            {}",
        if gcc { "works" } else { "MISSING" }
    );
    if rust && gcc {
        Ok(())
    } else {
        Err("the i686 toolchain is incomplete; run `cargo xtask setup`".into())
    }
}

fn setup() -> Result<(), String> {
    if !rust_target_installed() {
        run(Command::new("rustup").args(["target", "add", "i686-unknown-linux-gnu"]))?;
    }
    if !gcc_m32_works() {
        let is_root = Command::new("id")
            .arg("-u")
            .output()
            .map(|o| o.stdout.starts_with(b"0"))
            .unwrap_or(false);
        let sudo: &[&str] = if is_root { &[] } else { &["sudo"] };
        let apt = |args: &[&str]| {
            let mut full: Vec<&str> = sudo.to_vec();
            full.push("apt-get");
            full.extend_from_slice(args);
            let mut cmd = Command::new(full[0]);
            cmd.args(&full[1..])
                .env("DEBIAN_FRONTEND", "noninteractive");
            run(&mut cmd)
        };
        apt(&["update", "-qq"])?;
        apt(&["install", "-y", "-qq", "gcc-multilib"])?;
        if !gcc_m32_works() {
            return Err(
                "gcc-multilib is installed but `cc -m32` still cannot link a program".into(),
            );
        }
    }
    eprintln!("xtask: setup complete: i686 Rust target and cc -m32 are available");
    Ok(())
}

fn test(extra: &[String]) -> Result<(), String> {
    let root = workspace_root();
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let clippy = [
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ];
    // Every step runs even when an earlier one fails, so one run reports every problem.
    let steps: Vec<Result<(), String>> = vec![
        run(Command::new(&cargo)
            .current_dir(&root)
            .args(["test", "--workspace", "--no-fail-fast"])
            .args(extra)),
        run(Command::new(&cargo).current_dir(&root).args(clippy)),
        run(Command::new(&cargo)
            .current_dir(&root)
            .args(["fmt", "--all", "--", "--check"])),
    ];
    let failures: Vec<String> = steps.into_iter().filter_map(Result::err).collect();
    if failures.is_empty() {
        eprintln!("xtask: all tests passed");
        Ok(())
    } else {
        Err(failures.join("\n"))
    }
}

/// Builds the compiler and the harness in release mode (the measurements are of the compiled
/// programs, but the compiler must be the current one), then runs the harness with `extra`.
fn experiments(extra: &[String]) -> Result<(), String> {
    let root = workspace_root();
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    run(Command::new(&cargo).current_dir(&root).args([
        "build",
        "--release",
        "--package",
        "cmm",
        "--package",
        "bench",
        "--bins",
    ]))?;
    let status = Command::new(root.join("target/release/experiments"))
        .current_dir(&root)
        .args(extra)
        .status()
        .map_err(|e| format!("cannot start the experiment harness: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("the experiment harness failed with {status}"))
    }
}
