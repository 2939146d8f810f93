//! UI tests: every `tests/ui/*.cm` (an invalid program) must produce exactly the diagnostics
//! annotated in it, and every `tests/programs/**/*.cm` (valid programs) must check cleanly.
//!
//! An annotation is a comment `// ERROR line:col: message substring`, written by hand from the
//! program text. The reported set of (line, col, message) must match the annotated set exactly:
//! every annotation matched by one error, and no error left over. Both targets are checked.

use std::path::{Path, PathBuf};

use cmm_front::diag::{render, LineIndex};
use cmm_front::{check, TargetInfo};

const UI_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/ui");
const PROGRAMS_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/programs");

#[derive(Debug)]
struct Expected {
    line: usize,
    col: usize,
    substring: String,
}

fn annotations(src: &str, file: &Path) -> Vec<Expected> {
    let mut out = Vec::new();
    for text in src.lines() {
        let Some(i) = text.find("// ERROR ") else {
            continue;
        };
        let rest = &text[i + "// ERROR ".len()..];
        let parse = || -> Option<Expected> {
            let (pos, msg) = rest.split_once(": ")?;
            let (line, col) = pos.split_once(':')?;
            Some(Expected {
                line: line.trim().parse().ok()?,
                col: col.trim().parse().ok()?,
                substring: msg.trim().to_string(),
            })
        };
        match parse() {
            Some(e) => out.push(e),
            None => panic!("{}: malformed annotation `{text}`", file.display()),
        }
    }
    out
}

fn files_with_ext(dir: &Path, ext: &str, recursive: bool) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                if recursive {
                    stack.push(p);
                }
            } else if p.extension().is_some_and(|x| x == ext) {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Checks one UI file for one target; returns a description of any mismatch.
fn check_ui_file(path: &Path, target: TargetInfo) -> Option<String> {
    let src = std::fs::read_to_string(path).expect("read ui file");
    let expected = annotations(&src, path);
    if expected.is_empty() {
        return Some(format!("{}: has no `// ERROR` annotations", path.display()));
    }
    let name = path.display().to_string();
    let diags = match check(&name, &src, target) {
        Ok(_) => Vec::new(),
        Err(d) => d,
    };
    let index = LineIndex::new(&src);
    let mut unmatched: Vec<&Expected> = expected.iter().collect();
    let mut extra = Vec::new();
    for d in &diags {
        let (line, col) = index.line_col(d.span.start);
        let found = unmatched
            .iter()
            .position(|e| e.line == line && e.col == col && d.message.contains(&e.substring));
        match found {
            Some(i) => {
                unmatched.remove(i);
            }
            None => extra.push(format!("{line}:{col}: {}", d.message)),
        }
    }
    if unmatched.is_empty() && extra.is_empty() {
        return None;
    }
    let mut msg = format!("{name} ({target:?}):\n");
    for e in &unmatched {
        msg += &format!("  missing: {}:{}: {}\n", e.line, e.col, e.substring);
    }
    for e in &extra {
        msg += &format!("  unexpected: {e}\n");
    }
    msg += &render(&name, &src, &diags);
    Some(msg)
}

#[test]
fn ui_files_report_exactly_the_annotated_errors() {
    let files = files_with_ext(Path::new(UI_DIR), "cm", false);
    assert!(
        files.len() >= 30,
        "expected at least 30 ui files, found {}",
        files.len()
    );
    let mut failures = Vec::new();
    for f in &files {
        for target in [TargetInfo::I686, TargetInfo::X86_64] {
            if let Some(m) = check_ui_file(f, target) {
                failures.push(m);
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn the_harness_detects_missing_and_extra_errors() {
    let dir = std::env::temp_dir().join(format!("cmm-ui-selftest-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    // The error is at 2:12 (`y`), so an annotation at 2:5 is missing and the real one extra.
    let wrong = dir.join("wrong.cm");
    std::fs::write(
        &wrong,
        "int main() {\n    return y;\n}\n// ERROR 2:5: undeclared\n",
    )
    .expect("write");
    let m = check_ui_file(&wrong, TargetInfo::X86_64).expect("a mismatch");
    assert!(
        m.contains("missing: 2:5") && m.contains("unexpected: 2:12"),
        "{m}"
    );
    let right = dir.join("right.cm");
    std::fs::write(
        &right,
        "int main() {\n    return y;\n}\n// ERROR 2:12: undeclared\n",
    )
    .expect("write");
    assert_eq!(check_ui_file(&right, TargetInfo::X86_64), None);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn corpus_programs_check_without_errors() {
    let files = files_with_ext(Path::new(PROGRAMS_DIR), "cm", true);
    let mut failures = Vec::new();
    for f in &files {
        let src = std::fs::read_to_string(f).expect("read program");
        let name = f.display().to_string();
        for target in [TargetInfo::I686, TargetInfo::X86_64] {
            if let Err(d) = check(&name, &src, target) {
                failures.push(render(&name, &src, &d));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
