//! Lowers every program of the corpus (`tests/programs/**/*.cm`) for both pointer widths and
//! runs Cranelift's IR verifier on every function.

use std::path::{Path, PathBuf};

use cmm_codegen::{lower_program, verify};
use cmm_front::TargetInfo;

fn corpus() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
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
    assert!(
        files.len() >= 40,
        "corpus not found or too small: {} files",
        files.len()
    );
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
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn corpus_verifies_x86_64() {
    check_all(TargetInfo::X86_64);
}

#[test]
fn corpus_verifies_i686() {
    check_all(TargetInfo::I686);
}

#[test]
fn tables_follow_the_ir_contract() {
    use cmm_codegen::lower::{DataKind, NameTarget};
    use cranelift_codegen::ir::{types, ArgumentExtension};
    let src = r#"
extern int printf(char *fmt, ...);
extern void *malloc(int n);
int counter;
char buf[10];
char first(char *s) { return s[0]; }
int main() {
    malloc(4);
    printf("a");
    printf("b %d\n", stacksizeof(first));
    return first("c");
}"#;
    for (target, ptr) in [
        (TargetInfo::X86_64, types::I64),
        (TargetInfo::I686, types::I32),
    ] {
        let prog = cmm_front::check("t.cm", src, target).unwrap();
        let lp = lower_program(&prog);
        verify(&lp).unwrap();
        assert_eq!(lp.pointer_type, ptr);
        let names: Vec<&str> = lp.functions.iter().map(|f| f.symbol.as_str()).collect();
        assert_eq!(names, ["cmm_first", "cmm_main"]);
        // main is (i32 argc, ptr argv) -> i32 even when declared without parameters.
        let main_sig = &lp.functions[1].func.signature;
        let main_params: Vec<_> = main_sig.params.iter().map(|p| p.value_type).collect();
        assert_eq!(main_params, [types::I32, ptr]);
        // char parameters/returns are i8 sext.
        let first = &lp.functions[0].func.signature;
        assert_eq!(first.returns[0].value_type, types::I8);
        assert_eq!(first.returns[0].extension, ArgumentExtension::Sext);
        // Extern int parameters are sign-extended (malloc(size_t) on x86-64).
        let malloc = &lp.externs[1];
        assert_eq!(malloc.name, "malloc");
        assert_eq!(malloc.signature.params[0].value_type, types::I32);
        assert_eq!(
            malloc.signature.params[0].extension,
            ArgumentExtension::Sext
        );
        assert!(lp.externs[0].variadic && !malloc.variadic);
        // Data: 2 globals, 3 strings, 2 frame-size cells, in that order.
        assert_eq!((lp.num_globals, lp.num_strings, lp.data.len()), (2, 3, 7));
        assert_eq!(lp.data[0].symbol, "cmmg_counter");
        assert_eq!(
            (lp.data[1].size, lp.data[1].kind.clone()),
            (10, DataKind::Zeroed)
        );
        assert_eq!(lp.data[2].kind, DataKind::Bytes(b"a\0".to_vec()));
        assert_eq!(
            lp.data[lp.frame_size_data(0) as usize].kind,
            DataKind::FrameSize { function: 0 }
        );
        // Every external name used by the IR resolves, and printf is called with two
        // signatures (fixed part only, then with the extra int).
        let main = &lp.functions[1].func;
        let mut printf_sigs = Vec::new();
        for (_, ext) in main.dfg.ext_funcs.iter() {
            let cranelift_codegen::ir::ExternalName::User(r) = ext.name else {
                panic!()
            };
            let name = &main.params.user_named_funcs()[r];
            if lp.resolve(name) == Some(NameTarget::Extern(0)) {
                printf_sigs.push(main.dfg.signatures[ext.signature].params.len());
            }
            assert!(lp.resolve(name).is_some());
        }
        printf_sigs.sort();
        assert_eq!(printf_sigs, [1, 2]);
    }
}
