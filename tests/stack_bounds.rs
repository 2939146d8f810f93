//! End-to-end tests of `cmm compile --emit stack-bounds`: bounds of a small program checked
//! against values computed by hand from its frames (tests/bounds/chain.cm), cycles named, and
//! a measured lower bound: how deep a thread's stack really got (tests/bounds/measure.cm, which
//! takes addresses of locals) lies between the static bounds of its entry and of its first
//! callee, under every mechanism whose frames are contiguous, both targets and thread models.

mod common;

use common::{cmm, compile, root, run_within, text};

use std::collections::HashMap;
use std::process::Command;
use std::time::Duration;

/// The bounds `cmm compile --emit stack-bounds` prints, by function (`Err`: unbounded, with
/// the cycle's text).
fn bounds(file: &str, args: &[&str]) -> HashMap<String, Result<u64, String>> {
    let o = cmm()
        .arg("compile")
        .arg(root().join(file))
        .args(["--emit", "stack-bounds"])
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "{args:?}: {}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.starts_with("# stack bounds: target "), "{out}");
    out.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let (name, rest) = l.split_once(' ').unwrap();
            let rest = rest.trim_start();
            let rest = rest
                .split("  (")
                .next()
                .unwrap_or(rest)
                .trim_end()
                .to_string();
            let value = match rest.strip_prefix("unbounded: ") {
                Some(cycle) => Err(cycle.to_string()),
                None => Ok(rest.parse().unwrap_or_else(|_| panic!("not a bound: {l}"))),
            };
            (name.to_string(), value)
        })
        .collect()
}

/// Hand-computed from the frames of `cmm compile --emit asm` (the `# C-- function` lines:
/// frame `S`, argument bytes `in`) and each call's pushes: bound = in + return address + S +
/// the deepest (pushes + callee's bound without its own `in`); a C call counts 8,192 bytes.
///
/// x86-64 traditional: leaf = 8 + 8 + 0 = 16; mid = 16 + 8 + 56 + (8 + 8) = 96; top = 8 + 8 +
/// 0 + max(printf: 0 pushed + 8192, mid: 16 + 80) = 8208.
/// i686 traditional: leaf = 4 + 4 + 8 = 16; mid = 8 + 4 + 52 + (4 + 12) = 80; top = 4 + 4 + 8 +
/// max(printf: 16 pushed (8 of padding) + 8192, mid: 8 + 72) = 8224.
/// x86-64 heap (two words pushed by each call): leaf = 8 + 16 + 8 = 32; mid = 16 + 16 + 48 +
/// (8 + 24) = 112.
#[test]
fn bounds_of_a_small_program_match_the_hand_computed_values() {
    let x64 = bounds("tests/bounds/chain.cm", &["--target", "x86_64"]);
    assert_eq!(x64["leaf"], Ok(16));
    assert_eq!(x64["mid"], Ok(96));
    assert_eq!(x64["top"], Ok(8208));
    let i686 = bounds("tests/bounds/chain.cm", &["--target", "i686"]);
    assert_eq!(i686["leaf"], Ok(16));
    assert_eq!(i686["mid"], Ok(80));
    assert_eq!(i686["top"], Ok(8224));
    let heap = bounds(
        "tests/bounds/chain.cm",
        &["--target", "x86_64", "--mech", "heap"],
    );
    assert_eq!(heap["leaf"], Ok(32));
    assert_eq!(heap["mid"], Ok(112));
    for b in [&x64, &i686, &heap] {
        assert_eq!(b["fib"], Err("fib → fib".to_string()));
        assert_eq!(b["even"], Err("even → odd → even".to_string()));
        assert_eq!(b["odd"], Err("odd → even → odd".to_string()));
        // main calls even first, so its first unbounded callee's cycle is named.
        assert_eq!(b["main"], Err("even → odd → even".to_string()));
    }
}

/// The static bound is never below what a run reaches, and not far above it: in
/// tests/bounds/measure.cm the thread entry `entry` marks the address of a local near the top
/// of its frame, the deepest function `three` the address of the lowest element of its local
/// array at the bottom of its frame, and prints the difference. That lies between the bound
/// of `one` (from the SP before `entry` pushes `one`'s argument, minus at most 16 bytes of
/// `three`'s frame below the array) and the bound of `entry`. Every mechanism whose frames are
/// contiguous on one stack or chunk (not `heap`), both targets, OS and green threads.
#[test]
fn a_run_never_goes_deeper_than_the_static_bound() {
    let dir = tempfile::tempdir().unwrap();
    for target in ["x86_64", "i686"] {
        for mech in [
            "traditional",
            "callee-cleanup",
            "lookahead",
            "mmu",
            "mmu-reuse",
        ] {
            for threads in ["os", "green"] {
                let args = ["--target", target, "--mech", mech, "--threads", threads];
                let what = format!("{target} {mech} {threads}");
                let b = bounds("tests/bounds/measure.cm", &args);
                let exe = compile(
                    &root().join("tests/bounds/measure.cm"),
                    dir.path(),
                    &format!("measure-{target}-{mech}-{threads}"),
                    &args,
                );
                let o = run_within(Command::new(&exe), Duration::from_secs(30), &what);
                assert!(o.status.success(), "{what}: {}", text(&o.stderr));
                let measured: u64 = text(&o.stdout).trim().parse().unwrap();
                let (Ok(entry), Ok(one)) = (b["entry"].clone(), b["one"].clone()) else {
                    panic!("{what}: measure.cm has no cycle: {b:?}");
                };
                assert!(
                    measured <= entry,
                    "{what}: ran {measured} bytes deep, bound {entry}"
                );
                assert!(
                    measured + 16 >= one,
                    "{what}: ran {measured} bytes deep, bound of one {one}: too loose"
                );
            }
        }
    }
}

/// The native back end's frames are Cranelift's, which the analysis does not see: a clear
/// error, not a wrong answer.
#[test]
fn the_native_back_end_is_refused_with_a_reason() {
    let o = cmm()
        .arg("compile")
        .arg(root().join("tests/bounds/chain.cm"))
        .args(["--emit", "stack-bounds", "--backend", "native"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = text(&o.stderr);
    assert!(
        err.contains("--emit stack-bounds needs --backend emit"),
        "{err}"
    );
    assert!(o.stdout.is_empty());
}
