//! File tests of the emission stage: each `tests/emit/*.cm` holds a small C-- program followed
//! by blocks
//!
//! ```text
//! // EXPECT mech=traditional target=i686
//! // <expected assembly of the functions, one line per comment line>
//! ```
//!
//! `threads=green` in the marker lowers the program for green threads (loop-head preemption
//! polls, C calls through the handler stack under `lookahead`); `race` lowers it for
//! `cmm compile --race` (the detector's calls, the inline read check).
//!
//! The expected text is the functions' part of the emitted assembly (from each function's
//! `# C-- function` header up to its `.size` line), so prologues, epilogues and call sequences
//! are compared exactly. `CMM_BLESS=1` rewrites the blocks from the current output (review the
//! diff by hand against the thesis and paper listings before committing it).

use std::path::{Path, PathBuf};

use cmm_codegen::emit::{emit_program, EmitOptions, MechKind, Target};
use cmm_front::TargetInfo;

const MARKER: &str = "// EXPECT ";

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/emit")
}

/// A block's configuration: mechanism, target, green threads, `--race`.
type Config = (MechKind, Target, bool, bool);

fn parse_config(line: &str) -> Option<Config> {
    let mut mech = None;
    let mut target = None;
    let mut green = false;
    let mut race = false;
    for word in line.trim_start_matches(MARKER).split_whitespace() {
        if word == "race" {
            race = true;
            continue;
        }
        match word.split_once('=')? {
            ("mech", m) => mech = MechKind::from_name(m),
            ("target", "i686") => target = Some(Target::I686),
            ("target", "x86_64") => target = Some(Target::X86_64),
            ("threads", "green") => green = true,
            ("threads", "os") => green = false,
            _ => return None,
        }
    }
    Some((mech?, target?, green, race))
}

fn target_name(t: Target) -> &'static str {
    match t {
        Target::I686 => "i686",
        Target::X86_64 => "x86_64",
    }
}

/// The functions' text of the emitted assembly.
fn functions_text(src: &str, (mech, target, green, race): Config) -> String {
    let info = match target {
        Target::I686 => TargetInfo::I686,
        Target::X86_64 => TargetInfo::X86_64,
    };
    let typed = cmm_front::check_rendered("test.cm", src, info).expect("valid C--");
    let race = race.then_some(("test.cm", src));
    let lowered = if green {
        let mut l = cmm_codegen::lower::lower_program_green(
            &typed,
            race,
            Some(cmm_codegen::lower::PollFlag::ThreadLocal),
        );
        cmm_codegen::lower::mark_green_threads(&mut l);
        l
    } else if let Some((file, src)) = race {
        cmm_codegen::lower::lower_program_race(&typed, file, src)
    } else {
        cmm_codegen::lower_program(&typed)
    };
    let asm = emit_program(&lowered, &EmitOptions { target, mech }).expect("emits");
    let mut out = Vec::new();
    let mut inside = false;
    for line in asm.lines() {
        if line.starts_with("# C-- function") {
            inside = true;
        }
        if inside && !line.is_empty() {
            out.push(line.replace('\t', "    "));
        }
        if line.starts_with("\t.size") {
            inside = false;
        }
    }
    out.join("\n")
}

/// Splits a file into its source (before the first marker) and its `(config line, expected)`
/// blocks.
fn split(text: &str) -> (String, Vec<(String, String)>) {
    let mut source = String::new();
    let mut blocks: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        if line.starts_with(MARKER) {
            blocks.push((line.to_string(), String::new()));
        } else if let Some((_, body)) = blocks.last_mut() {
            let l = line
                .strip_prefix("// ")
                .or_else(|| line.strip_prefix("//"))
                .unwrap_or(line);
            if !body.is_empty() {
                body.push('\n');
            }
            body.push_str(l);
        } else {
            source.push_str(line);
            source.push('\n');
        }
    }
    (source, blocks)
}

#[test]
fn emitted_sequences_match_the_expectations() {
    let bless = std::env::var("CMM_BLESS").is_ok_and(|v| v == "1");
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir())
        .expect("tests/emit exists")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "cm"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no file tests found");
    let mut failures = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let (source, mut blocks) = split(&text);
        if bless && blocks.is_empty() {
            for t in [Target::I686, Target::X86_64] {
                for m in [MechKind::Traditional, MechKind::CalleeCleanup] {
                    let cfg = format!("{MARKER}mech={} target={}", m.name(), target_name(t));
                    blocks.push((cfg, String::new()));
                }
            }
        }
        assert!(
            !blocks.is_empty(),
            "{}: no `{MARKER}` block",
            file.display()
        );
        let mut blessed = source.trim_end().to_string();
        blessed.push('\n');
        for (cfg, want) in &blocks {
            let config = parse_config(cfg)
                .unwrap_or_else(|| panic!("{}: bad marker {cfg:?}", file.display()));
            let got = functions_text(&source, config);
            if got.trim_end() != want.trim_end() {
                failures.push(format!(
                    "{} [{cfg}]:\n--- want\n{want}\n--- got\n{got}",
                    file.display()
                ));
            }
            blessed.push('\n');
            blessed.push_str(cfg);
            blessed.push('\n');
            for l in got.lines() {
                blessed.push_str(&format!("// {l}\n").replace("//     ", "//     "));
            }
        }
        if bless {
            std::fs::write(&file, blessed).unwrap();
        }
    }
    if !bless {
        assert!(
            failures.is_empty(),
            "{} mismatches (CMM_BLESS=1 to re-bless):\n{}",
            failures.len(),
            failures.join("\n")
        );
    }
}
