//! Measures how much stack glibc functions really use, on i686 and x86-64, and checks that
//! the default extern budget of the call-graph analysis covers every measurement.
//!
//! The oracle is the C library itself: a C program (built with the system `cc`, `-m32` and
//! `-m64`) paints a 1 MiB region with a byte pattern, runs one call on it as a stack through
//! `makecontext`/`swapcontext`, and reports how far below the top the pattern was overwritten.
//! Every case runs in a fresh process, so first-call costs (lazy PLT binding, which saves the
//! whole vector state on the stack; stdio buffer set-up) are included.

use std::path::{Path, PathBuf};
use std::process::Command;

use cmm_codegen::callgraph::default_extern_budget;

const PROBE_C: &str = r#"
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>

#define REGION (1 << 20)
#define PAINT 0xA5

static ucontext_t main_ctx, work_ctx;
static int which_id = -1;
static const char *const names[] = {
    "printf_d", "printf_f", "printf_f_big", "printf_e_tiny", "printf_prec", "puts",
    "malloc_free", "atoi", "pthread_create_join", "pthread_mutex",
};
static volatile double big = 1e308, small = 3.14159, tiny = 1e-300;

static void *thread_fn(void *a) { return a; }

static void work(void) {
    /* The case was looked up before the switch to this stack: the first library call made
       here is the measured one (with its lazy PLT binding). */
    if (which_id == 0) {
        printf("%d %s\n", 42, "x");
    } else if (which_id == 1) {
        printf("%f %f\n", small, small * 2);
    } else if (which_id == 2) {
        printf("%f\n", big);
    } else if (which_id == 3) {
        printf("%.17e %g\n", tiny, tiny);
    } else if (which_id == 4) {
        printf("%.400f %.60e\n", tiny, big);
    } else if (which_id == 5) {
        puts("x");
    } else if (which_id == 6) {
        void *p = malloc(24);
        void *q = malloc(1 << 20);
        free(p);
        free(q);
    } else if (which_id == 7) {
        if (atoi("12345") != 12345) abort();
    } else if (which_id == 8) {
        pthread_t t;
        if (pthread_create(&t, NULL, thread_fn, NULL) != 0) abort();
        pthread_join(t, NULL);
    } else if (which_id == 9) {
        pthread_mutex_t *m = malloc(sizeof *m);
        pthread_mutex_init(m, NULL);
        pthread_mutex_lock(m);
        pthread_mutex_unlock(m);
        pthread_mutex_destroy(m);
        free(m);
    } else {
        abort();
    }
    fflush(stdout);
}

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    for (int k = 0; k < (int)(sizeof names / sizeof names[0]); k++)
        if (!strcmp(argv[1], names[k])) which_id = k;
    if (which_id < 0) return 2;
    unsigned char *region = mmap(NULL, REGION, PROT_READ | PROT_WRITE,
                                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (region == MAP_FAILED) return 3;
    memset(region, PAINT, REGION);
    getcontext(&work_ctx);
    work_ctx.uc_stack.ss_sp = region;
    work_ctx.uc_stack.ss_size = REGION;
    work_ctx.uc_link = &main_ctx;
    makecontext(&work_ctx, work, 0);
    swapcontext(&main_ctx, &work_ctx);
    size_t i = 0;
    while (i < REGION && region[i] == PAINT) i++;
    dprintf(2, "DEPTH %zu\n", (size_t)REGION - i);
    return 0;
}
"#;

const CASES: [&str; 10] = [
    "printf_d",
    "printf_f",
    "printf_f_big",
    "printf_e_tiny",
    "printf_prec",
    "puts",
    "malloc_free",
    "atoi",
    "pthread_create_join",
    "pthread_mutex",
];

fn build(dir: &Path, bits: u32) -> PathBuf {
    let src = dir.join("probe.c");
    std::fs::write(&src, PROBE_C).unwrap();
    let exe = dir.join(format!("probe{bits}"));
    let out = Command::new("cc")
        .arg(format!("-m{bits}"))
        .args(["-O2", "-no-pie", "-pthread", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .expect("running cc");
    assert!(
        out.status.success(),
        "cc -m{bits} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

fn depth(exe: &Path, case: &str) -> u32 {
    let out = Command::new(exe).arg(case).output().unwrap();
    assert!(out.status.success(), "{case}: {out:?}");
    let err = String::from_utf8(out.stderr).unwrap();
    let line = err
        .lines()
        .find_map(|l| l.strip_prefix("DEPTH "))
        .expect("no DEPTH line");
    line.trim().parse().unwrap()
}

fn measure(bits: u32) -> Vec<(&'static str, u32)> {
    let dir = std::env::temp_dir().join(format!("cmm-extern-budget-{}-{bits}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let exe = build(&dir, bits);
    let r = CASES.iter().map(|&c| (c, depth(&exe, c))).collect();
    let _ = std::fs::remove_dir_all(&dir);
    r
}

fn check(bits: u32) {
    let budget = default_extern_budget(bits / 8);
    let results = measure(bits);
    for (case, d) in &results {
        eprintln!("-m{bits} {case:22} {d:6} bytes (budget {budget})");
    }
    let get = |name: &str| results.iter().find(|r| r.0 == name).unwrap().1;
    // The measurement itself works: formatting a double takes real stack, and printing
    // 1e308 with %f takes more than a small double (big-number digit buffers).
    assert!(get("printf_f") > 1000, "{results:?}");
    assert!(get("printf_f_big") > get("printf_f"), "{results:?}");
    for (case, d) in &results {
        assert!(
            *d <= budget,
            "-m{bits}: {case} used {d} bytes, over the extern budget {budget}"
        );
    }
}

#[test]
fn extern_budget_covers_glibc_on_x86_64() {
    check(64);
}

#[test]
fn extern_budget_covers_glibc_on_i686() {
    check(32);
}
