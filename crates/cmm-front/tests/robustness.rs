//! Robustness of the front end: arbitrary input never panics, hangs or overflows the stack.
//!
//! Property tests feed random bytes, random token soups and randomly mutated valid programs to
//! `check`; the deep-nesting tests run pathological inputs inside threads whose stack is the
//! default 2 MiB of a test thread (and 8 MiB, the usual main-thread size).

use std::time::{Duration, Instant};

use cmm_front::{check, TargetInfo};
use proptest::prelude::*;
use proptest::sample::Index;

const VALID: &str = r#"
extern int printf(char *fmt, ...);
extern void *malloc(int size);
struct node { struct node *next; int value; double w; char name[8]; };
int total;
int sum(struct node *n) {
    int s;
    s = 0;
    while (n != NULL) { s = s + n->value; n = n->next; }
    return s;
}
int main(int argc, char **argv) {
    struct node *head; struct node *n; int i;
    head = NULL;
    for (i = 0; i < 10; i = i + 1) {
        n = malloc(sizeof(struct node));
        n->value = i * 2 % 7; n->next = head; n->w = i / 2.0; n->name[0] = 'a' + i;
        head = n;
    }
    if (argc > 1 && argv[1][0] == '-') { total = -sum(head); } else total = sum(head);
    do { i = i - 1; if (i == 3) break; else continue; } while (i > 0);
    printf("%d %d %d\n", total, stacksizeof(sum), sum);
    return (int)(head->w + 0.5) << 1 | 3 & ~1 ^ !0;
}
"#;

/// Runs `check` for both targets and asserts it takes well under a second.
fn check_quickly(src: &str) {
    for target in [TargetInfo::I686, TargetInfo::X86_64] {
        let start = Instant::now();
        let _ = check("fuzz.cm", src, target);
        let took = start.elapsed();
        assert!(
            took < Duration::from_secs(1),
            "check took {took:?} on {src:?}"
        );
    }
}

/// The valid programs to mutate: the built-in one and the corpus, if present.
fn seeds() -> Vec<String> {
    let mut v = vec![VALID.to_string()];
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/programs");
    let mut stack = vec![std::path::PathBuf::from(dir)];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "cm") {
                if let Ok(s) = std::fs::read_to_string(&p) {
                    v.push(s);
                }
            }
        }
    }
    v.sort();
    v
}

const TOKENS: &[&str] = &[
    "int",
    "char",
    "double",
    "void",
    "struct",
    "extern",
    "if",
    "else",
    "while",
    "do",
    "for",
    "break",
    "continue",
    "return",
    "sizeof",
    "stacksizeof",
    "NULL",
    "switch",
    "case",
    "typedef",
    "unsigned",
    "x",
    "y",
    "main",
    "printf",
    "S",
    "0",
    "1",
    "2147483648",
    "0x7f",
    "1.5",
    "'a'",
    "'\\n'",
    "\"s\\t\"",
    "\"",
    "'",
    "/*",
    "*/",
    "//",
    "(",
    ")",
    "{",
    "}",
    "[",
    "]",
    ";",
    ",",
    ".",
    "->",
    "...",
    "=",
    "+",
    "-",
    "*",
    "/",
    "%",
    "&",
    "|",
    "^",
    "~",
    "!",
    "<<",
    ">>",
    "&&",
    "||",
    "==",
    "!=",
    "<",
    "<=",
    ">",
    ">=",
    "++",
    "--",
    "+=",
    "?",
    ":",
    "#",
    "@",
    "\n",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, .. ProptestConfig::default() })]

    #[test]
    fn random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..2000)) {
        check_quickly(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn random_ascii(s in "[ -~\n\t]{0,2000}") {
        check_quickly(&s);
    }

    #[test]
    fn token_soup(toks in proptest::collection::vec(proptest::sample::select(TOKENS), 0..400)) {
        check_quickly(&toks.join(" "));
    }

    #[test]
    fn valid_program_with_random_tokens(
        toks in proptest::collection::vec(proptest::sample::select(TOKENS), 0..400)
    ) {
        // Declarations followed by statement soup inside a function body.
        let src = format!("int x; int y;\nint main() {{ {} }}\n", toks.join(" "));
        check_quickly(&src);
    }

    #[test]
    fn mutated_programs(
        which in any::<Index>(),
        edits in proptest::collection::vec((0u8..3, any::<Index>(), any::<Index>(), any::<Index>()), 1..6),
    ) {
        let seeds = seeds();
        let mut src: Vec<u8> = seeds[which.index(seeds.len())].clone().into_bytes();
        for (op, a, b, c) in edits {
            if src.is_empty() {
                break;
            }
            let len = src.len();
            let (mut i, mut j) = (a.index(len), b.index(len));
            if i > j {
                std::mem::swap(&mut i, &mut j);
            }
            let j = j.min(i + 200);
            match op {
                0 => {
                    src.drain(i..j);
                }
                1 => {
                    let piece: Vec<u8> = src[i..j].to_vec();
                    let at = c.index(len + 1);
                    src.splice(at..at, piece);
                }
                _ => {
                    // Swap [i, j) with a span of the same length elsewhere, if it fits.
                    let n = j - i;
                    let k = c.index(len - n + 1);
                    if k >= j || k + n <= i {
                        for t in 0..n {
                            src.swap(i + t, k + t);
                        }
                    }
                }
            }
        }
        check_quickly(&String::from_utf8_lossy(&src));
    }
}

/// Runs `f` in a thread with `stack` bytes of stack; a stack overflow would abort the process.
fn in_thread(stack: usize, f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .stack_size(stack)
        .spawn(f)
        .expect("spawn")
        .join()
        .expect("the checked thread panicked");
}

const TWO_MIB: usize = 2 << 20;
const EIGHT_MIB: usize = 8 << 20;

fn pathological(n: usize) -> Vec<(&'static str, String)> {
    vec![
        (
            "parens",
            format!(
                "int main() {{ return {}1{}; }}",
                "(".repeat(n),
                ")".repeat(n)
            ),
        ),
        (
            "open parens",
            format!("int main() {{ return {}", "(".repeat(n)),
        ),
        (
            "blocks",
            format!(
                "int main() {{ {}{} return 0; }}",
                "{".repeat(n),
                "}".repeat(n)
            ),
        ),
        ("open blocks", format!("int main() {}", "{".repeat(n))),
        (
            "minus",
            format!("int main() {{ return {}1; }}", "- ".repeat(n)),
        ),
        (
            "not",
            format!("int main() {{ return {}1; }}", "!".repeat(n)),
        ),
        (
            "deref",
            format!("int main() {{ int *p; return {}p; }}", "*".repeat(n)),
        ),
        (
            "casts",
            format!("int main() {{ return {}1; }}", "(int)".repeat(n)),
        ),
        (
            "plus chain",
            format!("int main() {{ int a; a = 1; return a{}; }}", "+a".repeat(n)),
        ),
        (
            "assign chain",
            format!("int main() {{ int a; {}1; return a; }}", "a = ".repeat(n)),
        ),
        (
            "comma chain",
            format!("int main() {{ int a; a = 1; return a{}; }}", ",a".repeat(n)),
        ),
        (
            "index chain",
            format!("int main() {{ int a; return a{}; }}", "[0]".repeat(n)),
        ),
        (
            "call chain",
            format!(
                "int f() {{ return 0; }} int main() {{ return f{}; }}",
                "()".repeat(n)
            ),
        ),
        (
            "member chain",
            format!("int main() {{ int a; return a{}; }}", ".x".repeat(n)),
        ),
        (
            "else if",
            format!(
                "int main() {{ int x; x = 1; if (x == 0) x = 0; {} return x; }}",
                "else if (x == 1) x = 2; ".repeat(n)
            ),
        ),
        (
            "nested if",
            format!("int main() {{ {} return 0; }}", "if (1) ".repeat(n)),
        ),
        (
            "while",
            format!("int main() {{ {}; return 0; }}", "while (0) ".repeat(n)),
        ),
        (
            "pointer stars",
            format!("int {}p; int main() {{ return 0; }}", "*".repeat(n)),
        ),
        (
            "array dims",
            format!("int a{}; int main() {{ return 0; }}", "[1]".repeat(n)),
        ),
        ("struct chain", {
            let mut s = String::from("struct S0 { int x; };\n");
            for i in 1..n.min(20_000) {
                s.push_str(&format!("struct S{i} {{ struct S{} a; }};\n", i - 1));
            }
            s + "int main() { return 0; }"
        }),
    ]
}

fn deep_inputs_fail_cleanly(stack: usize) {
    in_thread(stack, || {
        for (what, src) in pathological(100_000) {
            let start = Instant::now();
            let r = check("deep.cm", &src, TargetInfo::X86_64);
            let took = start.elapsed();
            assert!(took < Duration::from_secs(10), "{what}: took {took:?}");
            // All but the struct chain are far beyond the limits.
            if what != "struct chain" {
                let errs = r.expect_err(what);
                assert!(!errs.is_empty(), "{what}");
            }
        }
    });
}

#[test]
fn deep_nesting_in_a_2_mib_thread() {
    deep_inputs_fail_cleanly(TWO_MIB);
}

#[test]
fn deep_nesting_in_a_main_sized_thread() {
    deep_inputs_fail_cleanly(EIGHT_MIB);
}

/// Inputs just inside the limits are accepted, and semantic analysis of them also fits in a
/// 2 MiB stack.
#[test]
fn nesting_just_inside_the_limits_is_accepted() {
    in_thread(TWO_MIB, || {
        let limit = cmm_front::parser::MAX_DEPTH as usize;
        let height = cmm_front::parser::MAX_HEIGHT as usize;
        let cases = [
            (
                "parens",
                format!(
                    "int main() {{ return {}1{}; }}",
                    "(".repeat(120),
                    ")".repeat(120)
                ),
            ),
            (
                "blocks",
                format!(
                    "int main() {{ {}{} return 0; }}",
                    "{".repeat(limit - 2),
                    "}".repeat(limit - 2)
                ),
            ),
            (
                "minus",
                format!("int main() {{ return {}1; }}", "- ".repeat(limit - 2)),
            ),
            (
                "plus chain",
                format!(
                    "int main() {{ int a; a = 1; return a{}; }}",
                    "+a".repeat(height - 1)
                ),
            ),
            (
                "assign chain",
                format!(
                    "int main() {{ int a; {}1; return a; }}",
                    "a = ".repeat(height - 1)
                ),
            ),
            (
                "else if",
                format!(
                    "int main() {{ int x; x = 1; if (x == 0) x = 0; {} return x; }}",
                    "else if (x == 1) x = 2; ".repeat(limit - 3)
                ),
            ),
            (
                "mixed",
                format!(
                    "int main() {{ int a; a = 0; {} a = {}a{}; {} return a; }}",
                    "while (a) {".repeat(40),
                    "-(".repeat(40),
                    ")".repeat(40),
                    "}".repeat(40)
                ),
            ),
        ];
        for (what, src) in cases {
            if let Err(e) = check("limit.cm", &src, TargetInfo::I686) {
                panic!(
                    "{what}: {:?}",
                    e.iter().map(|d| &d.message).collect::<Vec<_>>()
                );
            }
        }
        // And one more level of each is rejected with the nesting error.
        let over = format!("int main() {{ return {}1; }}", "- ".repeat(limit + 1));
        let e = check("over.cm", &over, TargetInfo::I686).expect_err("too deep");
        assert!(
            e[0].message.contains("nesting too deep"),
            "{:?}",
            e[0].message
        );
    });
}
