//! Without `--race` the compiler's output is byte for byte what it was before `--race` existed:
//! the emitted assembly of every corpus program (both targets, all seven mechanisms) and the
//! native back end's object (x86-64) hash to the values in `plain_output.fnv`, which were
//! written by the compiler of the commit before `--race` (`daa07f3`, this very file run there
//! with `CMM_BLESS=1`), and re-blessed when `--race` was merged with main's lookahead and MMU
//! changes: every corpus program's assembly under both thread models, 7 mechanisms and 2
//! targets, and its native object, was first compared between main before the merge
//! (`6d416f5`) and the merged compiler without the flag, all 2,030 identical. A change that means to alter the plain output re-blesses the file
//! (`CMM_BLESS=1 cargo test -p cmm-codegen --test plain_output`) and says so in its commit.
//!
//! The `--race` lowering is checked to differ, so the comparison is not vacuous. Until
//! 2026-11-26 the test hashed only the OS-thread lowering (the re-blessing above compared
//! both once); since then it hashes the green-thread lowering too (keys ending in ` green`,
//! blessed from that day's compiler). Until 2026-11-27 that lowering lacked the driver's
//! green-threads mark, so its keys hashed OS-thread decisions (look-ahead's check bias);
//! re-blessed with the mark then. Re-blessed on 2026-11-27 for i686's per-function spare
//! register (`emit/spare_users.rs`): exactly the i686 keys of the mechanisms that reserve `ebp`
//! (`lookahead`, `mmu`, `mmu-reuse`, `heap`, `heap-malloc`) changed, all 460, and no other.
//! Re-blessed again that day for the MMU mechanisms' inline C calls (stores instead of
//! `inc`/`dec`, no deferred-switch test in OS-thread programs): only `mmu` and `mmu-reuse` keys
//! of programs that call C changed, 624.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use cmm_codegen::emit::{emit_program, EmitOptions, MechKind, Target};
use cmm_front::TargetInfo;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn golden_path() -> PathBuf {
    match std::env::var_os("CMM_PLAIN_OUT") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/plain_output.fnv"),
    }
}

/// FNV-1a, 64 bits: stable across Rust releases (unlike `DefaultHasher`).
fn fnv(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The corpus programs (relative path without `.cm`) and their sources, sorted.
fn programs() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for sub in ["", "thesis", "cmm_only"] {
        let dir = root().join("tests/programs").join(sub);
        let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "cm"))
            .collect();
        paths.sort();
        for p in paths {
            let stem = p.file_stem().unwrap().to_string_lossy().into_owned();
            let name = if sub.is_empty() {
                stem
            } else {
                format!("{sub}/{stem}")
            };
            out.push((name, std::fs::read_to_string(&p).unwrap()));
        }
    }
    out
}

const MECHS: [&str; 7] = [
    "traditional",
    "callee-cleanup",
    "heap",
    "heap-malloc",
    "lookahead",
    "mmu",
    "mmu-reuse",
];

/// Every output of the plain path: key `program target mech` (or `program native`) → hash.
fn plain_hashes() -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for (name, src) in programs() {
        for (t, info, tname) in [
            (Target::X86_64, TargetInfo::X86_64, "x86_64"),
            (Target::I686, TargetInfo::I686, "i686"),
        ] {
            let Ok(typed) = cmm_front::check_rendered("prog.cm", &src, info) else {
                continue;
            };
            let lowered = cmm_codegen::lower_program(&typed);
            for m in MECHS {
                let mech = MechKind::from_name(m).unwrap();
                let asm = emit_program(&lowered, &EmitOptions { target: t, mech })
                    .unwrap_or_else(|e| format!("error: {e}"));
                out.insert(format!("{name} {tname} {m}"), fnv(asm.as_bytes()));
            }
            // Green threads (`--threads green`, no loop polls): their own lowering, marked as
            // the driver marks it (the mechanisms' green-thread decisions read the mark).
            let mut green = cmm_codegen::lower::lower_program_green(&typed, None, None);
            cmm_codegen::lower::mark_green_threads(&mut green);
            for m in MECHS {
                let mech = MechKind::from_name(m).unwrap();
                let asm = emit_program(&green, &EmitOptions { target: t, mech })
                    .unwrap_or_else(|e| format!("error: {e}"));
                out.insert(format!("{name} {tname} {m} green"), fnv(asm.as_bytes()));
            }
            if t == Target::X86_64 {
                let obj = cmm_codegen::native::compile_native(&lowered, false)
                    .map(|o| o.object)
                    .unwrap_or_default();
                out.insert(format!("{name} x86_64 native"), fnv(&obj));
            }
        }
    }
    out
}

#[test]
fn plain_output_is_what_it_was_before_race() {
    let now = plain_hashes();
    assert!(now.len() > 100, "too few programs: {}", now.len());
    if std::env::var_os("CMM_BLESS").is_some() {
        let text: String = now.iter().map(|(k, h)| format!("{k} {h:016x}\n")).collect();
        std::fs::write(golden_path(), text).unwrap();
        return;
    }
    let golden = std::fs::read_to_string(golden_path()).expect("plain_output.fnv");
    let mut differ = Vec::new();
    let mut seen = 0;
    for line in golden.lines() {
        let (key, hash) = line.rsplit_once(' ').unwrap();
        let want = u64::from_str_radix(hash, 16).unwrap();
        match now.get(key) {
            Some(h) if *h == want => seen += 1,
            Some(_) => differ.push(format!("{key}: output changed")),
            // A program added since the file was blessed has no old output to compare with.
            None => {}
        }
    }
    assert!(
        differ.is_empty(),
        "the plain (no --race) output changed:\n{}",
        differ.join("\n")
    );
    assert!(seen > 100, "only {seen} outputs compared");
}

#[test]
fn race_lowering_instruments_and_differs_from_plain() {
    let src = "int g;\nint main() { g = g + 1; return g; }\n";
    let typed = cmm_front::check_rendered("prog.cm", src, TargetInfo::X86_64).unwrap();
    let plain = cmm_codegen::lower_program(&typed);
    let race = cmm_codegen::lower::lower_program_race(&typed, "prog.cm", src);
    let opts = EmitOptions {
        target: Target::X86_64,
        mech: MechKind::Traditional,
    };
    let a = emit_program(&plain, &opts).unwrap();
    let b = emit_program(&race, &opts).unwrap();
    assert!(!a.contains("__stackrt_race"));
    // A read of `g` and a write; the return's read repeats the write with no call between
    // (`cmm_codegen::race_repeats`).
    assert_eq!(b.matches("call __stackrt_race_read").count(), 1, "{b}");
    assert_eq!(b.matches("call __stackrt_race_write").count(), 1, "{b}");
    assert!(b.contains("__cmm_race_sites") && b.contains("__cmm_race_globals"));
}
