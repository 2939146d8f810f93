//! Tidy checks over the repository's own sources (in the manner of rust-analyzer's tidy test):
//! module docs on every file, a `// SAFETY:` comment for every `unsafe` block, no debugging
//! leftovers or stubs, an ARCHITECTURE.md that names every crate, and docs whose paths exist.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under the given directories, skipping build output.
fn rust_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                if !name.starts_with("target") && !name.starts_with('.') {
                    walk(&path, out);
                }
            } else if name.ends_with(".rs") {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    for dir in ["src", "crates", "xtask", "tests", "build.rs"] {
        let p = root().join(dir);
        if p.is_file() {
            out.push(p);
        } else {
            walk(&p, &mut out);
        }
    }
    out.sort();
    out
}

fn rel(p: &Path) -> String {
    p.strip_prefix(root()).unwrap_or(p).display().to_string()
}

#[test]
fn every_file_starts_with_a_module_doc() {
    let missing: Vec<String> = rust_files()
        .into_iter()
        .filter(|p| {
            let text = std::fs::read_to_string(p).unwrap_or_default();
            !text.trim_start().starts_with("//!")
        })
        .map(|p| rel(&p))
        .collect();
    assert!(
        missing.is_empty(),
        "files without a leading `//!` line: {missing:#?}"
    );
}

#[test]
fn every_unsafe_block_has_a_safety_comment() {
    let mut offenders = Vec::new();
    for path in rust_files() {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if !code.contains("unsafe {") || code.contains("fn ") {
                continue;
            }
            let window = &lines[i.saturating_sub(8)..=i];
            if !window.iter().any(|l| l.contains("SAFETY:")) {
                offenders.push(format!("{}:{}: {}", rel(&path), i + 1, line.trim()));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "`unsafe` blocks without a `// SAFETY:` comment:\n{}",
        offenders.join("\n")
    );
}

#[test]
fn no_stubs_or_debugging_leftovers() {
    // Built from pieces so that this file does not match itself.
    let patterns = [
        format!("{}!(", "todo"),
        format!("{}!(", "unimplemented"),
        format!("{}!(", "dbg"),
        format!("#[{}", "ignore"),
    ];
    let mut offenders = Vec::new();
    for path in rust_files() {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        for (i, line) in text.lines().enumerate() {
            if patterns.iter().any(|p| line.contains(p.as_str())) {
                offenders.push(format!("{}:{}: {}", rel(&path), i + 1, line.trim()));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "stubs or debugging leftovers:\n{}",
        offenders.join("\n")
    );
}

#[test]
fn architecture_names_every_crate() {
    let arch =
        std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md exists");
    let crates: Vec<String> = std::fs::read_dir(root().join("crates"))
        .expect("crates/ exists")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!crates.is_empty());
    for name in crates.iter().map(String::as_str).chain(["xtask"]) {
        assert!(
            arch.contains(&format!("`{name}`")) || arch.contains(&format!("crates/{name}")),
            "ARCHITECTURE.md does not mention crate `{name}`"
        );
    }
}

/// The README's quick start and the docs' code maps name files; a renamed file must not leave a
/// command that fails on a fresh machine (the quick start once named a program that did not
/// exist).
#[test]
fn paths_named_in_the_docs_exist() {
    let mut missing = Vec::new();
    for doc in ["README.md", "ARCHITECTURE.md"] {
        let text = std::fs::read_to_string(root().join(doc)).expect("doc exists");
        for word in text.split(|c: char| c.is_whitespace() || "`()[]<>,;:\"'".contains(c)) {
            let word = word.trim_end_matches('.');
            let names_a_file = ["tests/", "crates/", "xtask/", "src/", ".ci/"]
                .iter()
                .any(|p| word.starts_with(p))
                && !word.contains(['*', '{', '$', '…'])
                && !word.ends_with("...");
            if names_a_file && !root().join(word).exists() {
                missing.push(format!("{doc}: {word}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "paths named in the docs that do not exist:\n{}",
        missing.join("\n")
    );
}
