//! The emission stage on the whole corpus: every program of `tests/programs` is compiled with
//! `cmm_codegen::emit` for i686 and x86-64 under every mechanism, linked with `stackrt` and run;
//! stdout and exit status must equal the gcc-produced expectation (`NAME[.VARIANT].expected`,
//! `.expected32` for i686 where it differs). Also proves that no corpus program makes the
//! emission stage fail (e.g. with an unsupported opcode).
//!
//! `CMM_EMIT_FILTER=substring` restricts the programs; `CMM_EMIT_CONFIGS=x86_64:traditional,...`
//! restricts the configurations.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use cmm_codegen::emit::{emit_program, EmitOptions, MechKind, Target};
use cmm_front::TargetInfo;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

fn triple(t: Target) -> &'static str {
    match t {
        Target::I686 => "i686-unknown-linux-gnu",
        Target::X86_64 => "x86_64-unknown-linux-gnu",
    }
}

/// Builds `libstackrt.a` for `t` in a target directory of this test and returns its path.
fn stackrt(t: Target) -> PathBuf {
    static LIBS: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    let (a, b) = LIBS.get_or_init(|| {
        let dir = root().join("target-emit-stackrt");
        let mut out = Vec::new();
        for t in [Target::I686, Target::X86_64] {
            let status = Command::new(env!("CARGO"))
                .args(["build", "--release", "--quiet", "-p", "stackrt"])
                .args(["--target", triple(t)])
                .env("CARGO_TARGET_DIR", &dir)
                .current_dir(root())
                .status()
                .expect("cargo runs");
            assert!(status.success(), "building stackrt for {t:?}");
            out.push(dir.join(triple(t)).join("release/libstackrt.a"));
        }
        (out[0].clone(), out[1].clone())
    });
    match t {
        Target::I686 => a.clone(),
        Target::X86_64 => b.clone(),
    }
}

/// Compiles `src` to an executable at `exe`; Err is a compile or link failure.
pub fn build(src: &str, t: Target, mech: MechKind, exe: &Path) -> Result<(), String> {
    let info = match t {
        Target::I686 => TargetInfo::I686,
        Target::X86_64 => TargetInfo::X86_64,
    };
    let typed = cmm_front::check_rendered("prog.cm", src, info)?;
    let lowered = cmm_codegen::lower_program(&typed);
    let asm =
        emit_program(&lowered, &EmitOptions { target: t, mech }).map_err(|e| e.to_string())?;
    let s = exe.with_extension("s");
    std::fs::write(&s, &asm).unwrap();
    let m = if t == Target::I686 { "-m32" } else { "-m64" };
    let out = Command::new("cc")
        .args([m, "-no-pie", "-o"])
        .arg(exe)
        .arg(&s)
        .arg(stackrt(t))
        .args(["-lpthread", "-ldl", "-lm", "-lrt", "-lutil"])
        .output()
        .unwrap();
    if !out.status.success() {
        return Err(format!(
            "cc failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(())
}

/// `(variant, args)` runs of a program from its `// args:` lines.
fn runs(src: &str) -> Vec<(String, Vec<String>)> {
    let mut v = Vec::new();
    for line in src.lines() {
        let Some(rest) = line.trim().strip_prefix("//") else {
            break;
        };
        let rest = rest.trim();
        if let Some(a) = rest.strip_prefix("args:") {
            v.push((
                String::new(),
                a.split_whitespace().map(String::from).collect(),
            ));
        } else if let Some(r) = rest.strip_prefix("args[") {
            if let Some((name, a)) = r.split_once("]:") {
                v.push((
                    name.to_string(),
                    a.split_whitespace().map(String::from).collect(),
                ));
            }
        }
    }
    if v.iter().all(|(n, _)| !n.is_empty()) {
        v.insert(0, (String::new(), Vec::new()));
    }
    v
}

fn expected(cm: &Path, variant: &str, t: Target) -> Option<String> {
    let stem = cm.file_stem().unwrap().to_string_lossy().to_string();
    let base = if variant.is_empty() {
        stem
    } else {
        format!("{stem}.{variant}")
    };
    let dir = cm.parent().unwrap();
    if t == Target::I686 {
        if let Ok(s) = std::fs::read_to_string(dir.join(format!("{base}.expected32"))) {
            return Some(s);
        }
    }
    std::fs::read_to_string(dir.join(format!("{base}.expected"))).ok()
}

fn corpus() -> Vec<PathBuf> {
    let mut v = Vec::new();
    for d in [
        "tests/programs",
        "tests/programs/thesis",
        "tests/programs/cmm_only",
    ] {
        let Ok(rd) = std::fs::read_dir(root().join(d)) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "cm") {
                v.push(p);
            }
        }
    }
    v.sort();
    let filter = std::env::var("CMM_EMIT_FILTER").unwrap_or_default();
    v.retain(|p| p.to_string_lossy().contains(&filter));
    v
}

fn configs() -> Vec<(Target, MechKind)> {
    let all = [
        (Target::X86_64, MechKind::Traditional),
        (Target::I686, MechKind::Traditional),
        (Target::X86_64, MechKind::CalleeCleanup),
        (Target::I686, MechKind::CalleeCleanup),
    ];
    let want = std::env::var("CMM_EMIT_CONFIGS").unwrap_or_default();
    all.into_iter()
        .filter(|(t, m)| {
            want.is_empty()
                || want.split(',').any(|w| {
                    w == format!(
                        "{}:{}",
                        if *t == Target::I686 { "i686" } else { "x86_64" },
                        m.name()
                    )
                })
        })
        .collect()
}

/// Runs `exe` with `args`; returns stdout plus the `exit: N` line (the corpus format).
fn run(exe: &Path, args: &[String]) -> String {
    let out = Command::new("timeout")
        .arg("120")
        .arg(exe)
        .args(args)
        .output()
        .unwrap();
    let mut s = String::from_utf8_lossy(&out.stdout).to_string();
    if !s.is_empty() && !s.ends_with('\n') {
        s.push('\n');
    }
    use std::os::unix::process::ExitStatusExt;
    match out.status.code() {
        Some(c) => s.push_str(&format!("exit: {c}\n")),
        None => s.push_str(&format!("signal: {}\n", out.status.signal().unwrap_or(0))),
    }
    s
}

#[test]
fn corpus_runs_like_gcc_under_every_emitted_configuration() {
    let tmp = std::env::temp_dir().join(format!("cmm-emit-corpus-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let mut failures = Vec::new();
    let mut checked = 0;
    for cm in corpus() {
        let src = std::fs::read_to_string(&cm).unwrap();
        let name = cm.file_stem().unwrap().to_string_lossy().to_string();
        for (t, mech) in configs() {
            let exe = tmp.join(format!("{name}-{t:?}-{}", mech.name()));
            if let Err(e) = build(&src, t, mech, &exe) {
                failures.push(format!("{name} {t:?} {}: {e}", mech.name()));
                continue;
            }
            for (variant, args) in runs(&src) {
                let Some(want) = expected(&cm, &variant, t) else {
                    continue;
                };
                let got = run(&exe, &args);
                checked += 1;
                if got.trim_end() != want.trim_end() {
                    let cut = |s: &str| s.chars().take(600).collect::<String>();
                    failures.push(format!(
                        "{name}[{variant}] {t:?} {}: output differs\n--- want\n{}\n--- got\n{}",
                        mech.name(),
                        cut(&want),
                        cut(&got)
                    ));
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&tmp);
    assert!(
        failures.is_empty(),
        "{} failures ({} runs checked):\n{}",
        failures.len(),
        checked,
        failures.join("\n")
    );
    assert!(checked > 0, "no corpus run was checked");
}
