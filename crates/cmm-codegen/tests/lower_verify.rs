//! Lowers every program of the corpus (`tests/programs/**/*.cm`) for both pointer widths and
//! runs Cranelift's IR verifier on every function.

use std::path::{Path, PathBuf};

use cmm_codegen::{lower_program, verify};
use cmm_front::TargetInfo;

fn corpus() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "cm") {
                out.push(p);
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/programs");
    let mut out = Vec::new();
    walk(&root, &mut out);
    out.sort();
    out
}

fn check_all(target: TargetInfo) {
    let files = corpus();
    assert!(files.len() >= 40, "corpus not found or too small: {} files", files.len());
    let mut failures = Vec::new();
    for f in &files {
        let src = std::fs::read_to_string(f).unwrap();
        let name = f.display().to_string();
        let prog = match cmm_front::check_rendered(&name, &src, target) {
            Ok(p) => p,
            Err(e) => {
                failures.push(format!("{name}: front end rejected it:\n{e}"));
                continue;
            }
        };
        let lowered = lower_program(&prog);
        assert_eq!(lowered.functions.len(), prog.functions.len());
        if let Err(e) = verify(&lowered) {
            failures.push(format!("{name}: {e}"));
        }
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn corpus_verifies_x86_64() {
    check_all(TargetInfo::X86_64);
}

#[test]
fn corpus_verifies_i686() {
    check_all(TargetInfo::I686);
}
