//! The native back end on edge cases of C semantics: each C-- program is checked by the front
//! end, lowered, compiled to an object, linked by `cc` with a two-line C `main` that calls
//! `cmm_main`, and run. Expected outputs are hand-derived C/x86-64 results (noted next to each
//! program), not outputs of this compiler.

use std::path::Path;
use std::process::Command;

use cmm_codegen::native::compile_native;
use cmm_codegen::{lower_program, verify};
use cmm_front::TargetInfo;

const MAIN_SHIM: &str = "int cmm_main(int, char **);\n\
                         int main(int argc, char **argv) { return cmm_main(argc, argv); }\n";

/// Compiles and runs `src`; returns (stdout, exit status).
fn run(src: &str) -> (String, i32) {
    let prog = cmm_front::check_rendered("test.cm", src, TargetInfo::X86_64)
        .unwrap_or_else(|e| panic!("front end rejected the test program:\n{e}"));
    let lowered = lower_program(&prog);
    verify(&lowered).unwrap();
    let out = compile_native(&lowered, false).expect("native compilation");
    let dir = tempfile_dir();
    let obj = dir.join("prog.o");
    let shim = dir.join("shim.c");
    let exe = dir.join("prog");
    std::fs::write(&obj, &out.object).unwrap();
    std::fs::write(&shim, MAIN_SHIM).unwrap();
    let cc = Command::new("cc")
        .args(["-m64", "-no-pie"])
        .arg(&shim)
        .arg(&obj)
        .args(["-lm", "-o"])
        .arg(&exe)
        .output()
        .expect("cc runs");
    assert!(
        cc.status.success(),
        "link failed: {}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let run = Command::new(&exe).output().expect("program runs");
    let _ = std::fs::remove_dir_all(&dir);
    (
        String::from_utf8_lossy(&run.stdout).into_owned(),
        run.status.code().expect("exit status"),
    )
}

fn tempfile_dir() -> std::path::PathBuf {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let d = std::env::temp_dir().join(format!(
        "cmm-native-test-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&d).unwrap();
    assert!(Path::new(&d).is_dir());
    d
}

#[test]
fn double_to_int_truncates_like_cvttsd2si() {
    // C truncates toward zero; out-of-range values and NaN give INT_MIN on x86 (cvttsd2si).
    let (out, status) = run(r#"
extern int printf(char *fmt, ...);
int main() {
    double z;
    z = 0.0;
    printf("%d %d %d %d %d %d\n", (int)3.9, (int)-3.9, (int)1e10, (int)-1e10, (int)(z / z),
           (int)2147483647.5);
    return 0;
}"#);
    assert_eq!(out, "3 -3 -2147483648 -2147483648 -2147483648 2147483647\n");
    assert_eq!(status, 0);
}

#[test]
fn nan_comparisons_follow_c() {
    // Every ordered comparison with NaN is false, != is true, and NaN is a true condition.
    let (out, _) = run(r#"
extern int printf(char *fmt, ...);
int main() {
    double n;
    double z;
    int t;
    z = 0.0;
    n = z / z;
    t = 0;
    if (n) { t = 1; }
    printf("%d %d %d %d %d %d %d %d\n", n == n, n != n, n < 1.0, n > 1.0, n <= n, n >= n, !n, t);
    return 0;
}"#);
    assert_eq!(out, "0 1 0 0 0 0 0 1\n");
}

#[test]
fn int_arithmetic_wraps_and_divides_like_c() {
    let (out, _) = run(r#"
extern int printf(char *fmt, ...);
int main() {
    int big;
    int m;
    big = 2147483647;
    m = 65536;
    printf("%d %d %d\n", big + 1, m * m, -big - 1 - 1);
    printf("%d %d %d %d\n", -7 / 2, -7 % 2, 7 / -2, 7 % -2);
    printf("%d %d %d\n", -16 >> 2, 1 << 31, ~5);
    return 0;
}"#);
    // 2^31 wraps to -2^31; 2^32 wraps to 0; -2^31 - 1 wraps to 2^31 - 1.
    assert_eq!(
        out,
        "-2147483648 0 2147483647\n-3 -1 -3 1\n-4 -2147483648 -6\n"
    );
}

#[test]
fn chars_are_signed_bytes() {
    let (out, status) = run(r#"
extern int printf(char *fmt, ...);
char id(char c) { return c; }
int main() {
    char c;
    c = (char)200;
    printf("%d %d %d\n", c, id((char)-1) + 0, (char)(c + 56));
    return id((char)300);
}"#);
    // 200 - 256 = -56; (char)0 = 0; (char)300 = 44.
    assert_eq!(out, "-56 -1 0\n");
    assert_eq!(status, 44);
}

#[test]
fn struct_copies_small_odd_and_large() {
    // 13-byte struct (inline chunks 8+4+1) and 400-byte struct (copy loop).
    let (out, _) = run(r#"
extern int printf(char *fmt, ...);
struct small { char b[13]; };
struct large { int v[100]; };
struct small s1;
struct small s2;
struct large l1;
struct large l2;
int main() {
    int i;
    int sum;
    for (i = 0; i < 13; i = i + 1) { s1.b[i] = (char)(i + 1); }
    for (i = 0; i < 100; i = i + 1) { l1.v[i] = i; }
    s2 = s1;
    l2 = l1;
    s1.b[12] = (char)0;
    l1.v[99] = 0;
    sum = 0;
    for (i = 0; i < 13; i = i + 1) { sum = sum + s2.b[i]; }
    printf("%d ", sum);
    sum = 0;
    for (i = 0; i < 100; i = i + 1) { sum = sum + l2.v[i]; }
    printf("%d\n", sum);
    return 0;
}"#);
    // 1+...+13 = 91; 0+...+99 = 4950 (the copies are unaffected by the later writes).
    assert_eq!(out, "91 4950\n");
}

#[test]
fn variadic_calls_pass_doubles() {
    let (out, _) = run(r#"
extern int printf(char *fmt, ...);
int main() {
    double a;
    a = 1.5;
    printf("%f %d %f %s %.2f\n", a, 7, a * a, "x", -0.126);
    return 0;
}"#);
    assert_eq!(out, "1.500000 7 2.250000 x -0.13\n");
}

#[test]
fn short_circuit_and_loops() {
    let (out, _) = run(r#"
extern int printf(char *fmt, ...);
int calls;
int t(int v) { calls = calls + 1; return v; }
int main() {
    int i;
    int s;
    printf("%d %d %d %d ", t(0) && t(1), t(1) || t(0), t(1) && t(2), t(0) || t(0));
    printf("%d\n", calls);
    s = 0;
    for (i = 0; ; i = i + 1) {
        if (i == 10) { break; }
        if (i % 2) { continue; }
        s = s + i;
    }
    do { s = s + 1000; } while (0);
    printf("%d\n", s);
    return 0;
}"#);
    // Calls: 1 + 1 + 2 + 2 = 6; even numbers below 10 sum to 20.
    assert_eq!(out, "0 1 1 0 6\n1020\n");
}

#[test]
fn falling_off_the_end_returns_zero() {
    let (_, status) = run("int f() { } int main() { f(); }");
    assert_eq!(status, 0);
}

#[test]
fn frame_sizes_come_from_the_compiled_code() {
    let src = r#"
int leaf(int x) { return x + 1; }
int big(int x) { int pad[1000]; pad[0] = x; pad[999] = x; return pad[0] + pad[999]; }
int main() { return 0; }"#;
    let prog = cmm_front::check("t.cm", src, TargetInfo::X86_64).unwrap();
    let out = compile_native(&lower_program(&prog), false).unwrap();
    // A leaf frame is the return address and saved rbp; a 4000-byte array frame is at least
    // that plus those 16 bytes; System V keeps frames 16-byte aligned.
    assert_eq!(out.frame_sizes[0], 16);
    assert!(out.frame_sizes[1] >= 4016, "{}", out.frame_sizes[1]);
    assert!(
        out.frame_sizes.iter().all(|s| s % 16 == 0),
        "{:?}",
        out.frame_sizes
    );
}

#[test]
fn stacksizeof_reads_the_frame_size_cell() {
    let src = r#"
int big(int x) { int pad[1000]; pad[0] = x; pad[999] = x; return pad[0] + pad[999]; }
int main() { return stacksizeof(big) - 4000; }"#;
    let prog = cmm_front::check("t.cm", src, TargetInfo::X86_64).unwrap();
    let out = compile_native(&lower_program(&prog), false).unwrap();
    let expected = (out.frame_sizes[0] - 4000) as i32;
    assert!(
        (16..=255).contains(&expected),
        "frame {}",
        out.frame_sizes[0]
    );
    assert_eq!(run(src).1, expected);
}
