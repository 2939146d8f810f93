//! End-to-end tests of the `cmm` command line: exit statuses, error messages, `run`'s
//! pass-through of the program's output, arguments, exit status and signals.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn cmm() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cmm"))
}

/// A temporary directory holding one C-- source file.
struct Src {
    dir: tempfile::TempDir,
    path: PathBuf,
}

fn src(text: &str) -> Src {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("prog.cm");
    std::fs::write(&path, text).unwrap();
    Src { dir, path }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

const HELLO: &str = r#"
extern int printf(char *fmt, ...);
int main(int argc, char **argv) {
    int i;
    for (i = 1; i < argc; i = i + 1) {
        printf("[%s]", argv[i]);
    }
    printf("hello %d\n", argc);
    return 3;
}
"#;

#[test]
fn bad_usage_exits_2() {
    for args in [
        &[][..],
        &["compile"],
        &["frobnicate"],
        &["run", "x.cm", "--mech", "nope"],
    ] {
        let o = cmm().args(args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "cmm {args:?}: {}", stderr(&o));
    }
}

#[test]
fn help_texts_exist() {
    for args in [
        &["--help"][..],
        &["compile", "--help"],
        &["run", "--help"],
        &["check", "--help"],
    ] {
        let o = cmm().args(args).output().unwrap();
        assert_eq!(o.status.code(), Some(0));
        assert!(stdout(&o).contains("Usage: cmm"), "{}", stdout(&o));
    }
    let o = cmm().args(["compile", "--help"]).output().unwrap();
    for word in [
        "--target",
        "--mech",
        "--backend",
        "--emit",
        "--chunk-size",
        "callee-cleanup",
    ] {
        assert!(stdout(&o).contains(word), "compile --help lacks {word}");
    }
}

#[test]
fn diagnostics_exit_1_in_gcc_style() {
    let s = src("int main() {\n    return x;\n}\n");
    for sub in ["check", "compile", "run"] {
        let o = cmm().arg(sub).arg(&s.path).output().unwrap();
        assert_eq!(o.status.code(), Some(1), "{sub}");
        let err = stderr(&o);
        let want = format!("{}:2:12: error:", s.path.display());
        assert!(err.starts_with(&want), "{sub}: {err}");
    }
}

#[test]
fn check_accepts_a_valid_program_silently() {
    let s = src(HELLO);
    let o = cmm()
        .arg("check")
        .arg(&s.path)
        .args(["--target", "i686"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(o.stdout.is_empty() && o.stderr.is_empty());
}

#[test]
fn unreadable_file_is_one_line_exit_1() {
    let o = cmm()
        .args(["run", "/nonexistent/dir/prog.cm"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        "cmm: error: cannot read /nonexistent/dir/prog.cm: No such file or directory\n"
    );
}

#[test]
fn unimplemented_combinations_exit_2_with_one_line() {
    let s = src(HELLO);
    let cases: [&[&str]; 5] = [
        &["--target", "i686", "--backend", "native"],
        &["--backend", "native", "--mech", "heap"],
        &["--mech", "heap", "--chunk-size", "1000"],
        &["--mech", "traditional", "--chunk-size", "4096"],
        &["--backend", "native", "--mech", "callee-cleanup"],
    ];
    for extra in cases {
        let o = cmm().arg("run").arg(&s.path).args(extra).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(err.starts_with("cmm: error: "), "{extra:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{extra:?}: {err}");
        assert!(!err.contains("panicked"));
    }
}

#[test]
fn run_passes_output_arguments_and_status_through() {
    let s = src(HELLO);
    let o = cmm()
        .arg("run")
        .arg(&s.path)
        .args(["--", "a b", "-x"])
        .output()
        .unwrap();
    assert_eq!(stdout(&o), "[a b][-x]hello 3\n");
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(o.stderr.is_empty(), "{}", stderr(&o));
}

#[test]
fn run_reports_a_signal() {
    // Writing through a null pointer is SIGSEGV (11).
    let s = src("int main() { int *p; p = NULL; *p = 1; return 0; }\n");
    let o = cmm().arg("run").arg(&s.path).output().unwrap();
    assert_eq!(o.status.code(), Some(128 + 11));
    assert!(
        stderr(&o).ends_with("cmm: program terminated by signal 11 (SIGSEGV)\n"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn run_reports_abort() {
    let s = src("extern void abort();\nint main() { abort(); return 0; }\n");
    let o = cmm().arg("run").arg(&s.path).output().unwrap();
    assert_eq!(o.status.code(), Some(128 + 6));
    assert!(stderr(&o).ends_with("cmm: program terminated by signal 6 (SIGABRT)\n"));
}

fn compile(s: &Src, extra: &[&str]) -> Output {
    cmm()
        .arg("compile")
        .arg(&s.path)
        .args(extra)
        .current_dir(s.dir.path())
        .output()
        .unwrap()
}

#[test]
fn compile_produces_a_working_executable() {
    let s = src(HELLO);
    let exe = s.dir.path().join("hello-exe");
    let o = compile(&s, &["-o", exe.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let run = Command::new(&exe).arg("z").output().unwrap();
    assert_eq!(stdout(&run), "[z]hello 2\n");
    assert_eq!(run.status.code(), Some(3));
    // Without -o the executable is named after the source file.
    let o = compile(&s, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(s.dir.path().join("prog").is_file());
}

#[test]
fn compile_emits_object_clif_and_asm() {
    let s = src(HELLO);
    let o = compile(&s, &["--emit", "obj"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let obj = std::fs::read(s.dir.path().join("prog.o")).unwrap();
    assert_eq!(&obj[..4], b"\x7fELF");
    assert_eq!(obj[4], 2, "64-bit ELF");

    let o = compile(&s, &["--emit", "clif"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("function u0:0(i32, i64) -> i32"), "{text}");
    assert!(text.contains("call "), "{text}");

    // The IR does not depend on the back end, so i686 IR is available too.
    let o = compile(&s, &["--emit", "clif", "--target", "i686"]);
    assert!(
        stdout(&o).contains("function u0:0(i32, i32) -> i32"),
        "{}",
        stdout(&o)
    );

    let out = s.dir.path().join("prog.s");
    let o = compile(&s, &["--emit", "asm", "-o", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let asm = std::fs::read_to_string(&out).unwrap();
    assert!(asm.contains("cmm_main"), "{asm}");
}

#[test]
fn objects_define_the_abi_symbol_and_prefixed_names() {
    let s = src("int g;\nint f() { return g; }\nint main() { return f(); }\n");
    let o = compile(&s, &["--emit", "obj"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let nm = Command::new("nm").arg(s.dir.path().join("prog.o")).output();
    let Ok(nm) = nm else { return };
    let syms = stdout(&nm);
    for want in ["R __cmm_abi", "T cmm_main", "T cmm_f", "cmmg_g"] {
        assert!(syms.contains(want), "nm lacks {want}:\n{syms}");
    }
}

#[test]
fn corpus_style_invocation_works_from_another_directory() {
    // tests/corpus.rs runs `cmm run FILE -- args` with a path to the corpus.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let hello = root.join("tests/programs/hello.cm");
    let o = cmm()
        .arg("run")
        .arg(&hello)
        .current_dir(std::env::temp_dir())
        .output()
        .unwrap();
    assert_eq!(stdout(&o), "hello, world\n");
    assert_eq!(o.status.code(), Some(0));
}

/// `-o -` is standard output for text and objects (no file named `-` appears), and one line,
/// exit 1, for an executable.
#[test]
fn output_dash_is_standard_output() {
    let s = src(HELLO);
    let asm = cmm()
        .current_dir(s.dir.path())
        .args(["compile", "--backend", "emit", "--emit", "asm", "-o", "-"])
        .arg(&s.path)
        .output()
        .unwrap();
    assert!(asm.status.success(), "{}", stderr(&asm));
    assert!(stdout(&asm).contains("cmm_main:"), "{}", stdout(&asm));
    let obj = cmm()
        .current_dir(s.dir.path())
        .args(["compile", "--emit", "obj", "-o", "-"])
        .arg(&s.path)
        .output()
        .unwrap();
    assert!(obj.status.success(), "{}", stderr(&obj));
    assert!(obj.stdout.starts_with(b"\x7fELF"));
    let exe = cmm()
        .current_dir(s.dir.path())
        .args(["compile", "-o", "-"])
        .arg(&s.path)
        .output()
        .unwrap();
    assert_eq!(exe.status.code(), Some(1), "{}", stderr(&exe));
    assert!(stderr(&exe).contains("cannot write an executable to standard output"));
    assert_eq!(stderr(&exe).lines().count(), 1, "{}", stderr(&exe));
    assert!(!s.dir.path().join("-").exists());
}

/// `--link` adds C code to an executable (`cmm run` too); it is refused for other outputs,
/// and a file that is not there gets its own line before anything is compiled.
#[test]
fn link_adds_c_code_to_executables_only() {
    let s = src(r#"
extern int printf(char *fmt, ...);
extern int twice(int x);
int main(int argc, char **argv) {
    printf("%d\n", twice(21));
    return 0;
}
"#);
    std::fs::write(
        s.dir.path().join("twice.c"),
        "int twice(int x) { return 2 * x; }\n",
    )
    .unwrap();
    let o = compile(&s, &["--link", "twice.c", "-o", "prog"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let run = Command::new(s.dir.path().join("prog")).output().unwrap();
    assert_eq!(stdout(&run), "42\n");
    let o = cmm()
        .args(["run", "--link", "twice.c"])
        .arg(&s.path)
        .current_dir(s.dir.path())
        .output()
        .unwrap();
    assert_eq!(stdout(&o), "42\n", "{}", stderr(&o));
    let o = compile(&s, &["--link", "twice.c", "--emit", "asm"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o).lines().collect::<Vec<_>>(),
        ["cmm: error: --link links C code into an executable; it does not apply to --emit asm"]
    );
    let o = compile(&s, &["--link", "missing.c"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("cannot read 'missing.c' given to --link"),
        "{}",
        stderr(&o)
    );
    assert_eq!(stderr(&o).lines().count(), 1, "{}", stderr(&o));
}

/// `--text-offset N` moves the program's code N bytes on (a `nop` pad where the text starts)
/// and changes nothing else: the same output; the native back end refuses it.
#[test]
fn text_offset_moves_the_code_and_nothing_else() {
    let s = src(HELLO);
    let o = compile(&s, &["--text-offset", "48", "--emit", "asm", "-o", "-"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let moved = stdout(&o);
    let o = compile(&s, &["--emit", "asm", "-o", "-"]);
    let plain = stdout(&o);
    let pad = "\t.skip 48, 0x90\t# --text-offset 48: the code moved on\n";
    assert_eq!(moved.replacen(pad, "", 1), plain);
    assert!(moved.contains(&format!("\t.text\n{pad}")), "{moved}");
    let o = compile(&s, &["--text-offset", "48", "-o", "prog"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let run = Command::new(s.dir.path().join("prog"))
        .arg("x")
        .output()
        .unwrap();
    assert_eq!(
        (stdout(&run), run.status.code()),
        ("[x]hello 2\n".into(), Some(3))
    );
    let o = compile(&s, &["--backend", "native", "--text-offset", "16"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("--text-offset needs --backend emit"),
        "{}",
        stderr(&o)
    );
}
