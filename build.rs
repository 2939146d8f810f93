//! Builds the `stackrt` runtime (a staticlib) for every target the driver can link for, and
//! tells the driver where the archives are.
//!
//! For x86-64, and for i686 when the Rust target `i686-unknown-linux-gnu` is installed, this runs
//! a nested `cargo build -p stackrt --release --target <triple>` with its own `--target-dir`
//! (under `OUT_DIR`), so it never waits on the lock of the outer cargo, and with
//! `profile.release.panic = "abort"` (a staticlib linked into C programs must not unwind).
//!
//! The driver receives `CMM_STACKRT_X86_64` and `CMM_STACKRT_I686`: the path of `libstackrt.a`,
//! or an empty string when that runtime is unavailable. `CMM_STACKRT_X86_64_ERROR` and
//! `CMM_STACKRT_I686_ERROR` carry the reason (empty when it was built). A runtime that fails to
//! build does not fail the driver's build: the driver reports it when asked to link for that
//! target, and the build prints a cargo warning.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

struct Runtime {
    env_name: &'static str,
    triple: &'static str,
}

const RUNTIMES: [Runtime; 2] = [
    Runtime {
        env_name: "CMM_STACKRT_X86_64",
        triple: "x86_64-unknown-linux-gnu",
    },
    Runtime {
        env_name: "CMM_STACKRT_I686",
        triple: "i686-unknown-linux-gnu",
    },
];

fn main() {
    let manifest_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("set by cargo"));
    println!("cargo:rerun-if-changed=crates/stackrt");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CMM_SKIP_STACKRT");

    let installed = installed_rust_targets();
    let target_dir = out_dir.join("stackrt-target");
    for rt in &RUNTIMES {
        let result = if env::var_os("CMM_SKIP_STACKRT").is_some() {
            Err("the runtime build was skipped (CMM_SKIP_STACKRT is set)".to_string())
        } else if rt.triple != "x86_64-unknown-linux-gnu"
            && !installed.iter().any(|t| t == rt.triple)
        {
            Err(format!("the Rust target {} is not installed", rt.triple))
        } else {
            build_stackrt(&manifest_dir, &target_dir, rt.triple)
        };
        match result {
            Ok(lib) => {
                println!("cargo:rustc-env={}={}", rt.env_name, lib.display());
                println!("cargo:rustc-env={}_ERROR=", rt.env_name);
            }
            Err(reason) => {
                if rt.triple == "x86_64-unknown-linux-gnu"
                    || installed.iter().any(|t| t == rt.triple)
                {
                    println!(
                        "cargo:warning=stackrt for {}: {}",
                        rt.triple,
                        first_line(&reason)
                    );
                }
                println!("cargo:rustc-env={}=", rt.env_name);
                println!(
                    "cargo:rustc-env={}_ERROR={}",
                    rt.env_name,
                    first_line(&reason)
                );
            }
        }
    }
}

fn first_line(s: &str) -> String {
    s.lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
        .to_string()
}

/// The Rust targets rustup reports as installed (empty if rustup is unavailable: then only the
/// host target, x86-64, is tried).
fn installed_rust_targets() -> Vec<String> {
    Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .map(|l| l.trim().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// Runs the nested cargo build and returns the path of the archive.
fn build_stackrt(manifest_dir: &Path, target_dir: &Path, triple: &str) -> Result<PathBuf, String> {
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(manifest_dir)
        .args([
            "build",
            "--quiet",
            "-p",
            "stackrt",
            "--lib",
            "--release",
            "--target",
            triple,
        ])
        .arg("--target-dir")
        .arg(target_dir)
        .args(["--config", "profile.release.panic=\"abort\""]);
    // The outer build's settings must not leak into the nested one.
    for (key, _) in env::vars_os() {
        let key = key.to_string_lossy().into_owned();
        if key.starts_with("CARGO_")
            && key != "CARGO_HOME"
            && key != "CARGO_MAKEFLAGS"
            && key != "CARGO_NET_OFFLINE"
        {
            cmd.env_remove(&key);
        }
    }
    for key in [
        "RUSTFLAGS",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "TARGET",
        "HOST",
    ] {
        cmd.env_remove(key);
    }
    let out = cmd.output().map_err(|e| format!("cannot run cargo: {e}"))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let reason = stderr
            .lines()
            .find(|l| l.starts_with("error"))
            .unwrap_or("nested cargo build failed")
            .to_string();
        return Err(format!("building stackrt failed: {reason}"));
    }
    let lib = target_dir.join(triple).join("release").join("libstackrt.a");
    if lib.is_file() {
        Ok(lib)
    } else {
        Err(format!("building stackrt produced no {}", lib.display()))
    }
}
