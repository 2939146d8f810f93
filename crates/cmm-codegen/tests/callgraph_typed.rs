//! `CallGraphInput::from_typed` on real C-- source (through the front end): call sites in
//! evaluation order with nested-call argument bytes, roots (`main` and address-taken thread
//! entries), and the resulting checkpoints of a threaded, mutually recursive program.

use cmm_codegen::callgraph::{analyze, CallGraphConfig, CallGraphInput, CheckpointReason};
use cmm_front::typed::Callee;
use cmm_front::TargetInfo;

const SRC: &str = r#"
extern int printf(char *fmt, ...);
extern int sthread_create(void *arg, int fp, int fpStackSize);
extern int sthread_join(int id, void **retval);

int is_even(int n) {
    if (n == 0) {
        return 1;
    }
    return is_odd(n - 1);
}

int is_odd(int n) {
    if (n == 0) {
        return 0;
    }
    return is_even(n - 1);
}

int add(int a, int b) {
    return a + b;
}

void *worker(void *arg) {
    printf("%d\n", add(1, add(2, 3)));
    return arg;
}

int main(int argc, char **argv) {
    int t;
    t = sthread_create(argv, worker, stacksizeof(worker));
    sthread_join(t, NULL);
    return is_even(10);
}
"#;

#[test]
fn sites_roots_and_checkpoints_from_source() {
    let program = cmm_front::check_rendered("t.cm", SRC, TargetInfo::I686).unwrap();
    let id = |name: &str| {
        program
            .functions
            .iter()
            .position(|f| f.name == name)
            .unwrap() as u32
    };
    let ext = |name: &str| program.externs.iter().position(|e| e.name == name).unwrap() as u32;
    // Hand-chosen sizes: every frame 32 bytes, every argument 4 bytes.
    let input = CallGraphInput::from_typed(&program, |_| 32, |_, args| 4 * args.len() as u32);
    let sites = |f: &str| -> Vec<(Callee, u32)> {
        input.functions[id(f) as usize]
            .calls
            .iter()
            .map(|s| (s.callee, s.arg_bytes))
            .collect()
    };
    // Evaluation order: inner calls first; a call nested in another's arguments counts the
    // enclosing call's argument bytes too.
    assert_eq!(
        sites("worker"),
        [
            (Callee::Function(id("add")), 8 + 8 + 8),
            (Callee::Function(id("add")), 8 + 8),
            (Callee::Extern(ext("printf")), 8),
        ]
    );
    assert_eq!(
        sites("main"),
        [
            (Callee::Extern(ext("sthread_create")), 12),
            (Callee::Extern(ext("sthread_join")), 8),
            (Callee::Function(id("is_even")), 4),
        ]
    );
    assert_eq!(input.functions[id("main") as usize].root, Some(8));
    assert_eq!(input.functions[id("worker") as usize].root, Some(4));
    assert_eq!(input.functions[id("add") as usize].root, None);
    assert_eq!(input.functions[id("is_odd") as usize].root, None);

    let plan = analyze(&input, &CallGraphConfig::new(32768, 4));
    // The only cycle is is_even <-> is_odd; the DFS from main enters is_even first, so the
    // back edge is is_odd -> is_even. Reserve: 4 + LP(is_even) = 4 + 32 + 4 + 32 = 72.
    let back = plan.site(id("is_odd"), 0);
    assert_eq!(
        (back.checkpoint, back.reserve),
        (Some(CheckpointReason::Cycle), 72)
    );
    assert_eq!(plan.checkpoint_count(), 1);
    assert_eq!(plan.longest_path(id("is_even")), 68);
    // worker: 32 + max(24 + 32, 16 + 32, 8 + 8192) = 8232.
    assert_eq!(plan.longest_path(id("worker")), 8232);
}
