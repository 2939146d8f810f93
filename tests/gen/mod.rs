//! Random C-- program generator for `tests/random_programs.rs`: proptest strategies for a program
//! *genome* and a total rendering of any genome into a program that is valid C-- and valid C.
//!
//! # Design
//!
//! The genome ([`Genome`]) is a loose description: function indices, variable selectors and
//! array selectors are plain numbers that [`render`] resolves modulo what exists. Every genome,
//! including every shrunk one, therefore renders to a valid program, so proptest shrinking
//! (dropping functions, statements, arguments; lowering numbers) always yields a runnable repro.
//!
//! # What the rendered programs guarantee
//!
//! * **Defined behaviour in C** (with `-fwrapv`): divisors are `(x & 255) + 1` or +-(2..=129),
//!   shift counts `x & 31`, array indices `(x & 0x7fffffff) % len`; every local array is fully
//!   initialized on entry; every double variable and array element is *clamped* to (-1e9, 1e9)
//!   after each assignment (which also removes NaN and infinities), so `(int)` conversions
//!   (applied only to clamped places) are in range and double expressions (depth <= 4, constant
//!   divisors) stay finite. `char` variables, parameters and results hold truncated ints.
//! * **No unspecified evaluation order**: a call is always a statement of its own
//!   (`t = f(...)`, `t = t + f(...)`, `f(...)`); its arguments contain no calls, and `t` is a
//!   scalar the callee cannot reach.
//! * **Bounded recursion**: every C-- function takes `int depth` first and returns at once when
//!   `depth <= 0` or the global call budget `g_fuel` is spent; every call passes `depth - 1` or
//!   `depth - 2`. The call graph is otherwise arbitrary: self-recursion, mutual recursion through
//!   prototypes, calls in loops.
//! * **Bounded resources**: the initial depth is capped so that `depth * largest frame estimate`
//!   stays under [`STACK_BUDGET`] (the test runs programs with a larger `ulimit -s`), and the
//!   fuel so that `fuel * largest activation cost` stays under [`COST_BUDGET`] (well under
//!   100 ms at `-O0`). Output is bounded by the global print budget `g_prints`.
//! * **Frame-corruption detection**: locals and arrays are written on entry and read back into
//!   the checksum after the calls; pointers to caller arrays are passed down and written through.
//! * **Target independence**: no output depends on pointer size, so gcc `-m32` and `-m64` print
//!   the same (the test checks this too).

use proptest::collection::vec;
use proptest::prelude::*;

/// Largest number of C-- functions besides `main`.
pub const MAX_FUNCS: usize = 12;
/// Largest number of parameters besides `depth`.
pub const MAX_PARAMS: usize = 6;
/// Estimated stack bytes the deepest call chain may use (gcc `-O0` frame estimate).
pub const STACK_BUDGET: u64 = 48 << 20;
/// Estimated work units (array element visits, loop iterations) of one program run.
pub const COST_BUDGET: u64 = 15_000_000;
/// Largest initial recursion depth.
pub const MAX_DEPTH: u32 = 100_000;
/// Requested depths above this make a *deep* program: its arrays shrink by
/// [`DEEP_ARRAY_DIVISOR`].
pub const DEEP_THRESHOLD: u32 = 3000;
const DEEP_ARRAY_DIVISOR: u16 = 32;
/// Doubles are kept strictly inside (-CLAMP, CLAMP).
const CLAMP: &str = "1.0e9";
/// Length of the global arrays `g_ia` (int) and `g_da` (double).
const GLOBAL_INTS: u32 = 256;
const GLOBAL_DOUBLES: u32 = 64;
/// Length of `main`'s local arrays `ma` (int) and `md` (double).
const MAIN_INTS: u32 = 64;
const MAIN_DOUBLES: u32 = 32;

/// An expression; its type is decided by the context it is rendered in.
#[derive(Clone, Debug)]
pub enum Expr {
    /// A variable, constant or global element, chosen by `kind` and `sel`.
    Leaf {
        kind: u8,
        sel: u16,
    },
    Unary {
        op: u8,
        e: Box<Expr>,
    },
    Binary {
        op: u8,
        l: Box<Expr>,
        r: Box<Expr>,
    },
    /// `(double)(int expr)` in a double context, `(int)(clamped double place)` in an int one.
    Convert(Box<Expr>),
    /// An array element: `a[(idx & 0x7fffffff) % len]`.
    Index {
        sel: u8,
        idx: Box<Expr>,
    },
}

/// A statement of a function body.
#[derive(Clone, Debug)]
pub enum Stmt {
    /// Scalar assignment to an int or double variable chosen by `var`.
    Assign { var: u8, e: Expr },
    /// Assignment to an element of an array (local, pointer parameter or global).
    ArrayWrite { sel: u8, idx: Expr, e: Expr },
    /// `for (i = 0; i < len; i = i + stride) a[i] = e;` (`i` is readable in `e`).
    Fill { sel: u8, stride: u8, e: Expr },
    /// A call statement. `args[k]` is parameter `k`'s value (constant if missing), `ptrs[k]`
    /// picks the array passed for a pointer parameter, `dest`/`combine` the result's use.
    Call {
        callee: u8,
        args: Vec<Expr>,
        ptrs: Vec<u8>,
        dest: u8,
        combine: u8,
        extra_dec: bool,
    },
    /// A guarded `printf` of ints (`%d`) and doubles (`%.4f`) chosen by the bits of `types`.
    Print {
        args: Vec<Expr>,
        types: u16,
        mask: u8,
        use_result: bool,
    },
    /// `g_acc = g_acc * 31 + e;`
    Accumulate(Expr),
    If {
        cond: Expr,
        then: Vec<Stmt>,
        els: Vec<Stmt>,
    },
    /// A counted loop (`for`, `while` or `do`) of `1 + count % 4` iterations.
    Loop {
        form: u8,
        count: u8,
        body: Vec<Stmt>,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scalar {
    Int,
    Double,
    /// A `char` holding truncated int values (sign-extended when read).
    Char,
}

/// A parameter after `depth`. Pointer parameters carry the least length their callers pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Param {
    Int,
    Double,
    /// A `char` parameter: callers pass int values, converted (truncated) at the call.
    Char,
    IntPtr {
        min_len: u8,
    },
    DoublePtr {
        min_len: u8,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Elem {
    Int,
    Double,
    Char,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArrayDecl {
    pub elem: Elem,
    /// Requested size in bytes (the length is `max(1, bytes / element size)`).
    pub bytes: u16,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ret {
    Int,
    Double,
    /// Returns `r` truncated to `char`.
    Char,
    Void,
}

#[derive(Clone, Debug)]
pub struct Func {
    pub ret: Ret,
    pub params: Vec<Param>,
    pub scalars: Vec<Scalar>,
    pub arrays: Vec<ArrayDecl>,
    pub body: Vec<Stmt>,
}

/// A call made by `main`: to `callee % funcs` with depth `depth / (1 + depth_div % 4)`.
#[derive(Clone, Debug)]
pub struct Entry {
    pub callee: u8,
    pub depth_div: u8,
    pub args: Vec<Expr>,
    pub ptrs: Vec<u8>,
}

#[derive(Clone, Debug)]
pub struct Genome {
    pub funcs: Vec<Func>,
    pub entries: Vec<Entry>,
    /// Requested initial depth (capped by the stack budget when rendered).
    pub depth: u32,
    /// Requested call budget (capped by the cost budget when rendered).
    pub fuel: u32,
    /// Number of guarded prints allowed.
    pub prints: u8,
    /// A recursion spine: `Some(k)` makes `f0` and `f(k % n)` call each other (or `f0` itself)
    /// first thing, and `main` call `f0` first, so the program recurses as deep as its depth and
    /// fuel allow.
    pub spine: Option<u8>,
}

// ---------------------------------------------------------------------------------------------
// Strategies
// ---------------------------------------------------------------------------------------------

/// Number of binary operators [`render_int`] knows (see `int_binary`).
const INT_BINOPS: u8 = 22;

pub fn expr() -> impl Strategy<Value = Expr> {
    let leaf = (0u8..5, any::<u16>()).prop_map(|(kind, sel)| Expr::Leaf { kind, sel });
    leaf.prop_recursive(4, 16, 2, |inner| {
        prop_oneof![
            1 => (0u8..3, inner.clone()).prop_map(|(op, e)| Expr::Unary { op, e: Box::new(e) }),
            3 => (0u8..INT_BINOPS, inner.clone(), inner.clone()).prop_map(|(op, l, r)| {
                Expr::Binary {
                    op,
                    l: Box::new(l),
                    r: Box::new(r),
                }
            }),
            1 => inner.clone().prop_map(|e| Expr::Convert(Box::new(e))),
            1 => (any::<u8>(), inner).prop_map(|(sel, idx)| Expr::Index {
                sel,
                idx: Box::new(idx)
            }),
        ]
    })
}

fn simple_stmt() -> impl Strategy<Value = Stmt> {
    prop_oneof![
        3 => (any::<u8>(), expr()).prop_map(|(var, e)| Stmt::Assign { var, e }),
        2 => (any::<u8>(), expr(), expr())
            .prop_map(|(sel, idx, e)| Stmt::ArrayWrite { sel, idx, e }),
        1 => (any::<u8>(), any::<u8>(), expr())
            .prop_map(|(sel, stride, e)| Stmt::Fill { sel, stride, e }),
        4 => (
            any::<u8>(),
            vec(expr(), 0..=MAX_PARAMS),
            vec(any::<u8>(), 0..=MAX_PARAMS),
            any::<u8>(),
            any::<u8>(),
            prop::bool::weighted(0.2),
        )
            .prop_map(|(callee, args, ptrs, dest, combine, extra_dec)| Stmt::Call {
                callee,
                args,
                ptrs,
                dest,
                combine,
                extra_dec,
            }),
        1 => (vec(expr(), 0..10), any::<u16>(), any::<u8>(), any::<bool>()).prop_map(
            |(args, types, mask, use_result)| Stmt::Print {
                args,
                types,
                mask,
                use_result
            }
        ),
        1 => expr().prop_map(Stmt::Accumulate),
    ]
}

pub fn stmt() -> impl Strategy<Value = Stmt> {
    simple_stmt().prop_recursive(2, 24, 4, |inner| {
        prop_oneof![
            (expr(), vec(inner.clone(), 0..4), vec(inner.clone(), 0..3))
                .prop_map(|(cond, then, els)| Stmt::If { cond, then, els }),
            (any::<u8>(), any::<u8>(), vec(inner, 1..4))
                .prop_map(|(form, count, body)| Stmt::Loop { form, count, body }),
        ]
    })
}

fn array_decl() -> impl Strategy<Value = ArrayDecl> {
    let elem = prop_oneof![3 => Just(Elem::Int), 2 => Just(Elem::Double), 1 => Just(Elem::Char)];
    let bytes = prop_oneof![1u16..32, 32u16..256, 256u16..=2000];
    (elem, bytes).prop_map(|(elem, bytes)| ArrayDecl { elem, bytes })
}

fn param() -> impl Strategy<Value = Param> {
    prop_oneof![
        3 => Just(Param::Int),
        1 => Just(Param::Char),
        2 => Just(Param::Double),
        1 => (1u8..=64).prop_map(|min_len| Param::IntPtr { min_len }),
        1 => (1u8..=32).prop_map(|min_len| Param::DoublePtr { min_len }),
    ]
}

pub fn func() -> impl Strategy<Value = Func> {
    (
        prop_oneof![
            3 => Just(Ret::Int),
            2 => Just(Ret::Double),
            1 => Just(Ret::Char),
            1 => Just(Ret::Void)
        ],
        vec(param(), 0..=MAX_PARAMS),
        vec(
            prop_oneof![
                4 => Just(Scalar::Int),
                2 => Just(Scalar::Double),
                1 => Just(Scalar::Char)
            ],
            0..6,
        ),
        vec(array_decl(), 0..4),
        vec(stmt(), 0..8),
    )
        .prop_map(|(ret, params, scalars, arrays, body)| Func {
            ret,
            params,
            scalars,
            arrays,
            body,
        })
}

fn entry() -> impl Strategy<Value = Entry> {
    (
        any::<u8>(),
        any::<u8>(),
        vec(expr(), 0..=MAX_PARAMS),
        vec(any::<u8>(), 0..=MAX_PARAMS),
    )
        .prop_map(|(callee, depth_div, args, ptrs)| Entry {
            callee,
            depth_div,
            args,
            ptrs,
        })
}

/// A whole program: 1..=12 functions, 1..4 calls from `main`; mostly moderate depths (up to a
/// few thousand), sometimes deep ones (up to [`MAX_DEPTH`], subject to the stack budget).
pub fn genome() -> impl Strategy<Value = Genome> {
    let depth = prop_oneof![
        1 => 1u32..=DEEP_THRESHOLD,
        1 => (DEEP_THRESHOLD + 1)..=MAX_DEPTH,
    ];
    (
        vec(func(), 1..=MAX_FUNCS),
        vec(entry(), 1..4),
        depth,
        1u32..=200_000,
        any::<u8>(),
        prop::option::weighted(0.5, any::<u8>()),
    )
        .prop_map(|(funcs, entries, depth, fuel, prints, spine)| Genome {
            funcs,
            entries,
            depth,
            fuel,
            prints,
            spine,
        })
}

// ---------------------------------------------------------------------------------------------
// Rendering
// ---------------------------------------------------------------------------------------------

/// A rendered program and the resource numbers chosen for it.
#[derive(Clone, Debug)]
pub struct Rendered {
    pub source: String,
    /// The initial depth passed by `main` (after capping).
    pub depth: u32,
    /// The call budget (after capping).
    pub fuel: u32,
    /// The largest frame estimate, bytes.
    pub max_frame: u64,
}

const INT_CONSTS: [i32; 12] = [
    0,
    1,
    -1,
    2,
    7,
    255,
    65535,
    1_000_003,
    123_456_789,
    2_147_483_647,
    -2_147_483_647,
    -65536,
];
const DOUBLE_CONSTS: [&str; 10] = [
    "0.5", "1.5", "(-2.25)", "3.0", "0.1", "1000.0", "(-0.75)", "2.5e3", "1.0e-3", "7.0",
];
const DOUBLE_DIVISORS: [&str; 7] = ["2.0", "4.0", "0.5", "3.0", "(-8.0)", "10.0", "0.1"];
const PRINT_MASKS: [u32; 8] = [0, 0, 1, 3, 7, 15, 255, 1023];

fn elem_size(e: Elem) -> u32 {
    match e {
        Elem::Int => 4,
        Elem::Double => 8,
        Elem::Char => 1,
    }
}

fn array_len(a: &ArrayDecl) -> u32 {
    (u32::from(a.bytes) / elem_size(a.elem)).max(1)
}

fn c_type(s: Scalar) -> &'static str {
    match s {
        Scalar::Int => "int",
        Scalar::Double => "double",
        Scalar::Char => "char",
    }
}

fn param_decl(p: Param, name: &str) -> String {
    match p {
        Param::Int => format!("int {name}"),
        Param::Char => format!("char {name}"),
        Param::Double => format!("double {name}"),
        Param::IntPtr { .. } => format!("int *{name}"),
        Param::DoublePtr { .. } => format!("double *{name}"),
    }
}

fn ret_type(r: Ret) -> &'static str {
    match r {
        Ret::Int => "int",
        Ret::Char => "char",
        Ret::Double => "double",
        Ret::Void => "void",
    }
}

fn int_const(v: i64) -> String {
    if v < 0 {
        format!("({v})")
    } else {
        v.to_string()
    }
}

/// An array visible in a function: its name, length (least length for pointer parameters) and
/// element type.
#[derive(Clone, Debug)]
struct ArrayRef {
    name: String,
    len: u32,
    elem: Elem,
    /// True for arrays that can be passed as pointer arguments (not `char`).
    passable: bool,
}

/// The names visible while rendering one function body.
#[derive(Clone, Debug, Default)]
struct Scope {
    /// Readable int scalars.
    ints: Vec<String>,
    /// Assignable int scalars (never `depth` nor loop counters).
    int_targets: Vec<String>,
    /// Readable and assignable double scalars (all clamped).
    doubles: Vec<String>,
    arrays: Vec<ArrayRef>,
    /// Loop nesting (counters `k0`, `k1`).
    loops: usize,
    /// Index of the function (`None` in `main`).
    func: Option<usize>,
    /// Counter for print labels.
    prints: usize,
}

impl Scope {
    fn arrays_of(&self, pred: impl Fn(Elem) -> bool) -> Vec<&ArrayRef> {
        self.arrays.iter().filter(|a| pred(a.elem)).collect()
    }
}

/// Renders an int expression.
fn render_int(e: &Expr, s: &Scope) -> String {
    match e {
        Expr::Leaf { kind, sel } => {
            let sel = usize::from(*sel);
            match kind % 5 {
                0 | 1 if !s.ints.is_empty() => s.ints[sel % s.ints.len()].clone(),
                0..=2 => int_const((sel % 201) as i64 - 100),
                3 => int_const(i64::from(INT_CONSTS[sel % INT_CONSTS.len()])),
                _ => match sel % 3 {
                    0 => "g_acc".into(),
                    1 => format!("g_ia[{}]", sel % GLOBAL_INTS as usize),
                    _ => "g_level".into(),
                },
            }
        }
        Expr::Unary { op, e } => {
            let inner = render_int(e, s);
            match op % 3 {
                0 => format!("(-{inner})"),
                1 => format!("(~{inner})"),
                _ => format!("(!{inner})"),
            }
        }
        Expr::Binary { op, l, r } => int_binary(*op, l, r, s),
        Expr::Convert(inner) => match double_place(inner, s) {
            Some(place) => format!("((int)({place}))"),
            None => render_int(inner, s),
        },
        Expr::Index { sel, idx } => {
            let arrays = s.arrays_of(|e| e != Elem::Double);
            let a = arrays[usize::from(*sel) % arrays.len()];
            index(a, idx, s)
        }
    }
}

fn int_binary(op: u8, l: &Expr, r: &Expr, s: &Scope) -> String {
    let op = op % INT_BINOPS;
    if op == 18 || op == 19 {
        let (dl, dr) = (render_double(l, s), render_double(r, s));
        let cmp = if op == 18 { "<" } else { ">=" };
        return format!("({dl} {cmp} {dr})");
    }
    let (a, b) = (render_int(l, s), render_int(r, s));
    match op {
        0 => format!("({a} + {b})"),
        1 => format!("({a} - {b})"),
        2 => format!("({a} * {b})"),
        3 => format!("({a} & {b})"),
        4 => format!("({a} | {b})"),
        5 => format!("({a} ^ {b})"),
        6 => format!("({a} << ({b} & 31))"),
        7 => format!("({a} >> ({b} & 31))"),
        8 => format!("({a} / (({b} & 255) + 1))"),
        9 => format!("({a} % (({b} & 255) + 1))"),
        10 => format!("({a} < {b})"),
        11 => format!("({a} <= {b})"),
        12 => format!("({a} == {b})"),
        13 => format!("({a} != {b})"),
        14 => format!("({a} > {b})"),
        15 => format!("({a} >= {b})"),
        16 => format!("({a} && {b})"),
        17 => format!("({a} || {b})"),
        // Divisors of either sign, never 0 or -1: +-(2..=129).
        20 => format!("({a} / ((({b} & 127) + 2) * (1 - 2 * (({b} >> 7) & 1))))"),
        _ => format!("({a} % ((({b} & 127) + 2) * (1 - 2 * (({b} >> 7) & 1))))"),
    }
}

/// A clamped double place for `(int)` conversion: a double variable or array element.
fn double_place(e: &Expr, s: &Scope) -> Option<String> {
    match e {
        Expr::Index { sel, idx } => {
            let arrays = s.arrays_of(|e| e == Elem::Double);
            let a = arrays[usize::from(*sel) % arrays.len()];
            Some(index(a, idx, s))
        }
        Expr::Leaf { sel, .. } if !s.doubles.is_empty() => {
            Some(s.doubles[usize::from(*sel) % s.doubles.len()].clone())
        }
        _ if !s.doubles.is_empty() => Some(s.doubles[0].clone()),
        _ => None,
    }
}

/// `a[(idx & 0x7fffffff) % len]`, or a constant index when `idx` is a constant leaf.
fn index(a: &ArrayRef, idx: &Expr, s: &Scope) -> String {
    if let Expr::Leaf { kind: 2 | 3, sel } = idx {
        return format!("{}[{}]", a.name, u32::from(*sel) % a.len);
    }
    let i = render_int(idx, s);
    format!("{}[({i} & 2147483647) % {}]", a.name, a.len)
}

/// Renders a double expression (finite: see the module docs).
fn render_double(e: &Expr, s: &Scope) -> String {
    match e {
        Expr::Leaf { kind, sel } => {
            let sel = usize::from(*sel);
            match kind % 5 {
                0 | 1 if !s.doubles.is_empty() => s.doubles[sel % s.doubles.len()].clone(),
                0..=3 => DOUBLE_CONSTS[sel % DOUBLE_CONSTS.len()].to_string(),
                _ => format!("g_da[{}]", sel % GLOBAL_DOUBLES as usize),
            }
        }
        Expr::Unary { e, .. } => format!("(-{})", render_double(e, s)),
        Expr::Binary { op, l, r } => {
            let a = render_double(l, s);
            match op % 5 {
                0 => format!("({a} + {})", render_double(r, s)),
                1 => format!("({a} - {})", render_double(r, s)),
                2 => format!("({a} * {})", render_double(r, s)),
                3 => format!(
                    "({a} / {})",
                    DOUBLE_DIVISORS[usize::from(*op) % DOUBLE_DIVISORS.len()]
                ),
                _ => format!(
                    "({a} * {})",
                    DOUBLE_CONSTS[usize::from(*op) % DOUBLE_CONSTS.len()]
                ),
            }
        }
        Expr::Convert(inner) => format!("((double)({}))", render_int(inner, s)),
        Expr::Index { sel, idx } => {
            let arrays = s.arrays_of(|e| e == Elem::Double);
            let a = arrays[usize::from(*sel) % arrays.len()];
            index(a, idx, s)
        }
    }
}

/// Output buffer with indentation.
struct Out {
    text: String,
    indent: usize,
}

impl Out {
    fn line(&mut self, l: &str) {
        for _ in 0..self.indent {
            self.text.push_str("    ");
        }
        self.text.push_str(l);
        self.text.push('\n');
    }
    fn clamp(&mut self, var: &str) {
        self.line(&format!(
            "if (!({var} > -{CLAMP} && {var} < {CLAMP})) {{ {var} = 0.125; }}"
        ));
    }
}

/// Per-function facts needed by callers.
struct Sig {
    ret: Ret,
    params: Vec<Param>,
}

fn render_stmt(st: &Stmt, s: &mut Scope, sigs: &[Sig], out: &mut Out) {
    match st {
        Stmt::Assign { var, e } => {
            let n = s.int_targets.len() + s.doubles.len();
            let k = usize::from(*var) % n;
            if k < s.int_targets.len() {
                let t = s.int_targets[k].clone();
                out.line(&format!("{t} = {};", render_int(e, s)));
            } else {
                let t = s.doubles[k - s.int_targets.len()].clone();
                out.line(&format!("{t} = {};", render_double(e, s)));
                out.clamp(&t);
            }
        }
        Stmt::ArrayWrite { sel, idx, e } => {
            let a = s.arrays[usize::from(*sel) % s.arrays.len()].clone();
            write_element(&a, &index(&a, idx, s), e, s, out);
        }
        Stmt::Fill { sel, stride, e } => {
            let a = s.arrays[usize::from(*sel) % s.arrays.len()].clone();
            let stride = (1 + u32::from(*stride) % 8).max(a.len / 16);
            out.line(&format!("for (i = 0; i < {}; i = i + {stride}) {{", a.len));
            out.indent += 1;
            s.ints.push("i".into());
            write_element(&a, &format!("{}[i]", a.name), e, s, out);
            s.ints.pop();
            out.indent -= 1;
            out.line("}");
        }
        Stmt::Call {
            callee,
            args,
            ptrs,
            dest,
            combine,
            extra_dec,
        } => {
            let depth = if *extra_dec { "depth - 2" } else { "depth - 1" };
            render_call(*callee, depth, args, ptrs, *dest, *combine, s, sigs, out);
        }
        Stmt::Print {
            args,
            types,
            mask,
            use_result,
        } => {
            let label = match s.func {
                Some(f) => format!("f{f}.{}", s.prints),
                None => format!("main.{}", s.prints),
            };
            s.prints += 1;
            let mut fmt = label;
            let mut vals = Vec::new();
            for (k, a) in args.iter().enumerate() {
                if types >> k & 1 == 1 {
                    fmt.push_str(" %.4f");
                    vals.push(render_double(a, s));
                } else {
                    fmt.push_str(" %d");
                    vals.push(render_int(a, s));
                }
            }
            let guard = match s.func {
                Some(_) => format!(
                    "g_prints > 0 && (depth & {}) == 0",
                    PRINT_MASKS[usize::from(*mask) % PRINT_MASKS.len()]
                ),
                None => "g_prints > 0".into(),
            };
            out.line(&format!("if ({guard}) {{"));
            out.indent += 1;
            out.line("g_prints = g_prints - 1;");
            let call = format!(
                "printf(\"{fmt}\\n\"{})",
                vals.iter().map(|v| format!(", {v}")).collect::<String>()
            );
            if *use_result {
                out.line(&format!("r = r + {call};"));
            } else {
                out.line(&format!("{call};"));
            }
            out.indent -= 1;
            out.line("}");
        }
        Stmt::Accumulate(e) => {
            out.line(&format!("g_acc = g_acc * 31 + {};", render_int(e, s)));
        }
        Stmt::If { cond, then, els } => {
            out.line(&format!("if ({}) {{", render_int(cond, s)));
            out.indent += 1;
            for t in then {
                render_stmt(t, s, sigs, out);
            }
            out.indent -= 1;
            if els.is_empty() {
                out.line("}");
            } else {
                out.line("} else {");
                out.indent += 1;
                for t in els {
                    render_stmt(t, s, sigs, out);
                }
                out.indent -= 1;
                out.line("}");
            }
        }
        Stmt::Loop { form, count, body } => {
            if s.loops >= 2 {
                for t in body {
                    render_stmt(t, s, sigs, out);
                }
                return;
            }
            let k = format!("k{}", s.loops);
            let n = 1 + count % 4;
            let form = form % 3;
            match form {
                0 => out.line(&format!("for ({k} = 0; {k} < {n}; {k} = {k} + 1) {{")),
                1 => {
                    out.line(&format!("{k} = 0;"));
                    out.line(&format!("while ({k} < {n}) {{"));
                }
                _ => {
                    out.line(&format!("{k} = 0;"));
                    out.line("do {");
                }
            }
            out.indent += 1;
            s.loops += 1;
            s.ints.push(k.clone());
            for t in body {
                render_stmt(t, s, sigs, out);
            }
            s.ints.pop();
            s.loops -= 1;
            if form != 0 {
                out.line(&format!("{k} = {k} + 1;"));
            }
            out.indent -= 1;
            if form == 2 {
                out.line(&format!("}} while ({k} < {n});"));
            } else {
                out.line("}");
            }
        }
    }
}

/// `a[idx] = e;` with the value clamped first for double arrays.
fn write_element(a: &ArrayRef, place: &str, e: &Expr, s: &Scope, out: &mut Out) {
    match a.elem {
        Elem::Double => {
            out.line(&format!("dt = {};", render_double(e, s)));
            out.clamp("dt");
            out.line(&format!("{place} = dt;"));
        }
        Elem::Int | Elem::Char => out.line(&format!("{place} = {};", render_int(e, s))),
    }
}

#[allow(clippy::too_many_arguments)]
fn render_call(
    callee: u8,
    depth: &str,
    args: &[Expr],
    ptrs: &[u8],
    dest: u8,
    combine: u8,
    s: &Scope,
    sigs: &[Sig],
    out: &mut Out,
) {
    let j = usize::from(callee) % sigs.len();
    let sig = &sigs[j];
    let mut text = format!("f{j}({depth}");
    for (k, p) in sig.params.iter().enumerate() {
        let arg = args.get(k);
        let v = match p {
            Param::Int | Param::Char => {
                arg.map_or_else(|| int_const(k as i64 + 3), |a| render_int(a, s))
            }
            Param::Double => arg.map_or_else(|| "0.5".to_string(), |a| render_double(a, s)),
            Param::IntPtr { min_len } | Param::DoublePtr { min_len } => {
                let want = if matches!(p, Param::IntPtr { .. }) {
                    Elem::Int
                } else {
                    Elem::Double
                };
                let min = u32::from(*min_len);
                let cands: Vec<&ArrayRef> = s
                    .arrays
                    .iter()
                    .filter(|a| a.passable && a.elem == want && a.len >= min)
                    .collect();
                // The global arrays are always candidates, so `cands` is never empty.
                let sel = u32::from(ptrs.get(k).copied().unwrap_or(0));
                let a = cands[sel as usize % cands.len()];
                let off = (sel / 7) % (a.len - min + 1);
                if off == 0 {
                    a.name.clone()
                } else {
                    format!("{} + {off}", a.name)
                }
            }
        };
        text.push_str(", ");
        text.push_str(&v);
    }
    text.push(')');
    match sig.ret {
        Ret::Void => out.line(&format!("{text};")),
        Ret::Int | Ret::Char => {
            let t = &s.int_targets[usize::from(dest) % s.int_targets.len()];
            match combine % 3 {
                0 => out.line(&format!("{t} = {text};")),
                1 => out.line(&format!("{t} = {t} + {text};")),
                _ => out.line(&format!("{t} = {t} ^ {text};")),
            }
        }
        Ret::Double => match combine % 3 {
            2 => {
                let t = &s.int_targets[usize::from(dest) % s.int_targets.len()];
                out.line(&format!("{t} = {t} - (int)({text});"));
            }
            c => {
                let t = s.doubles[usize::from(dest) % s.doubles.len()].clone();
                if c == 0 {
                    out.line(&format!("{t} = {text};"));
                } else {
                    out.line(&format!("{t} = {t} + {text};"));
                    out.clamp(&t);
                }
            }
        },
    }
}

/// Estimated gcc `-O0` frame bytes of `f` (generous: spills, saved registers, call areas).
fn frame_estimate(f: &Func) -> u64 {
    let arrays: u64 = f
        .arrays
        .iter()
        .map(|a| u64::from(array_len(a) * elem_size(a.elem)) + 16)
        .sum();
    arrays + 16 * (f.params.len() + f.scalars.len() + 8) as u64 + 256
}

/// Work units of the statements (loop bodies counted per iteration).
fn stmts_cost(stmts: &[Stmt], arrays: &[u32]) -> u64 {
    stmts.iter().map(|st| stmt_cost(st, arrays)).sum()
}

fn stmt_cost(st: &Stmt, arrays: &[u32]) -> u64 {
    match st {
        Stmt::Fill { .. } => 16 + 4,
        Stmt::If { then, els, .. } => 2 + stmts_cost(then, arrays).max(stmts_cost(els, arrays)),
        Stmt::Loop { count, body, .. } => 2 + u64::from(1 + count % 4) * stmts_cost(body, arrays),
        Stmt::Print { args, .. } => 20 + args.len() as u64,
        _ => 4,
    }
}

/// Work units of one activation of `f` (initialization and read-back of its arrays included).
fn activation_cost(f: &Func) -> u64 {
    let lens: Vec<u32> = f.arrays.iter().map(array_len).collect();
    let elems: u64 = lens.iter().map(|&l| u64::from(l)).sum();
    3 * elems + stmts_cost(&f.body, &lens) + 30
}

/// Renders `g` as a C-- (and C) program; `header` becomes the leading `//` comment lines.
pub fn render(g: &Genome, header: &str) -> Rendered {
    // Deep programs get arrays 1/DEEP_ARRAY_DIVISOR the size, so that frames are small enough
    // for the stack budget and activations cheap enough for the fuel to reach the depth.
    let deep = g.depth > DEEP_THRESHOLD;
    let mut g = g.clone();
    if deep {
        for f in &mut g.funcs {
            for a in &mut f.arrays {
                a.bytes = (a.bytes / DEEP_ARRAY_DIVISOR).max(1);
            }
        }
    }
    if let Some(k) = g.spine {
        let partner = usize::from(k) % g.funcs.len();
        let call = |callee: usize| Stmt::Call {
            callee: callee as u8,
            args: Vec::new(),
            ptrs: Vec::new(),
            dest: 0,
            combine: 1,
            extra_dec: false,
        };
        g.funcs[0].body.insert(0, call(partner));
        if partner != 0 {
            g.funcs[partner].body.insert(0, call(0));
        }
        g.entries[0].callee = 0;
    }
    let g = &g;
    let max_frame = g.funcs.iter().map(frame_estimate).max().unwrap_or(256);
    let depth = g
        .depth
        .clamp(1, MAX_DEPTH)
        .min((STACK_BUDGET / max_frame) as u32)
        .max(1);
    let max_cost = g.funcs.iter().map(activation_cost).max().unwrap_or(30);
    // A deep program with a spine asks for enough fuel to reach its depth, within twice the
    // cost budget (its activations are cheap: small arrays).
    let (fuel, budget) = if deep && g.spine.is_some() {
        (g.fuel.max(depth), 2 * COST_BUDGET)
    } else {
        (g.fuel, COST_BUDGET)
    };
    let fuel = fuel
        .clamp(1, 200_000)
        .min((budget / max_cost) as u32)
        .max(1);

    let sigs: Vec<Sig> = g
        .funcs
        .iter()
        .map(|f| Sig {
            ret: f.ret,
            params: f.params.clone(),
        })
        .collect();

    let mut out = Out {
        text: String::new(),
        indent: 0,
    };
    for l in header.lines() {
        out.line(&format!("// {l}"));
    }
    out.line("extern int printf(char *fmt, ...);");
    out.line("");
    for decl in [
        "int g_fuel;",
        "int g_level;",
        "int g_max;",
        "int g_prints;",
        "int g_acc;",
    ] {
        out.line(decl);
    }
    out.line(&format!("int g_ia[{GLOBAL_INTS}];"));
    out.line(&format!("double g_da[{GLOBAL_DOUBLES}];"));
    out.line("");

    // Functions are defined in reverse index order (callees with higher indices first); a
    // function called before its definition gets a prototype.
    let order: Vec<usize> = (0..g.funcs.len()).rev().collect();
    let mut needs_proto = vec![false; g.funcs.len()];
    for (pos, &fi) in order.iter().enumerate() {
        let mut callees = Vec::new();
        collect_callees(&g.funcs[fi].body, g.funcs.len(), &mut callees);
        for c in callees {
            // `c` is defined at position order.len() - 1 - c; a call to a later definition
            // needs a prototype (a self-call does not: the definition is in scope).
            if order.len() - 1 - c > pos {
                needs_proto[c] = true;
            }
        }
    }
    let mut any_proto = false;
    for (fi, f) in g.funcs.iter().enumerate() {
        if needs_proto[fi] {
            out.line(&format!("{};", signature(fi, f)));
            any_proto = true;
        }
    }
    if any_proto {
        out.line("");
    }
    for &fi in &order {
        render_func(fi, &g.funcs[fi], &sigs, &mut out);
        out.line("");
    }
    render_main(g, depth, fuel, &sigs, &mut out);
    Rendered {
        source: out.text,
        depth,
        fuel,
        max_frame,
    }
}

fn collect_callees(stmts: &[Stmt], n: usize, acc: &mut Vec<usize>) {
    for st in stmts {
        match st {
            Stmt::Call { callee, .. } => acc.push(usize::from(*callee) % n),
            Stmt::If { then, els, .. } => {
                collect_callees(then, n, acc);
                collect_callees(els, n, acc);
            }
            Stmt::Loop { body, .. } => collect_callees(body, n, acc),
            _ => {}
        }
    }
}

fn signature(fi: usize, f: &Func) -> String {
    let mut sig = format!("{} f{fi}(int depth", ret_type(f.ret));
    for (k, p) in f.params.iter().enumerate() {
        sig.push_str(", ");
        sig.push_str(&param_decl(*p, &format!("p{k}")));
    }
    sig.push(')');
    sig
}

/// The arrays every function and `main` can see.
fn global_arrays() -> Vec<ArrayRef> {
    vec![
        ArrayRef {
            name: "g_ia".into(),
            len: GLOBAL_INTS,
            elem: Elem::Int,
            passable: true,
        },
        ArrayRef {
            name: "g_da".into(),
            len: GLOBAL_DOUBLES,
            elem: Elem::Double,
            passable: true,
        },
    ]
}

fn render_func(fi: usize, f: &Func, sigs: &[Sig], out: &mut Out) {
    out.line(&format!("{} {{", signature(fi, f)));
    out.indent += 1;
    out.line("int r;");
    out.line("int i;");
    out.line("int k0;");
    out.line("int k1;");
    out.line("double dr;");
    out.line("double dt;");
    for (k, sc) in f.scalars.iter().enumerate() {
        out.line(&format!("{} s{k};", c_type(*sc)));
    }
    let elem_type = |e: Elem| match e {
        Elem::Int => "int",
        Elem::Double => "double",
        Elem::Char => "char",
    };
    for (k, a) in f.arrays.iter().enumerate() {
        out.line(&format!("{} a{k}[{}];", elem_type(a.elem), array_len(a)));
    }
    out.line("if (depth <= 0 || g_fuel <= 0) {");
    out.indent += 1;
    match f.ret {
        Ret::Int | Ret::Char => out.line(&format!("return depth + {};", fi + 1)),
        Ret::Double => out.line(&format!("return {}.25;", fi + 1)),
        Ret::Void => out.line("return;"),
    }
    out.indent -= 1;
    out.line("}");
    out.line("g_fuel = g_fuel - 1;");
    out.line("g_level = g_level + 1;");
    out.line("if (g_level > g_max) {");
    out.line("    g_max = g_level;");
    out.line("}");

    let mut s = Scope {
        func: Some(fi),
        ..Scope::default()
    };
    s.ints.push("depth".into());
    s.ints.push("r".into());
    s.int_targets.push("r".into());
    s.doubles.push("dr".into());
    let mut int_params = Vec::new();
    for (k, p) in f.params.iter().enumerate() {
        let name = format!("p{k}");
        match p {
            Param::Int | Param::Char => {
                s.ints.push(name.clone());
                s.int_targets.push(name.clone());
                int_params.push(name);
            }
            Param::Double => {
                out.clamp(&name);
                s.doubles.push(name);
            }
            Param::IntPtr { min_len } => s.arrays.push(ArrayRef {
                name,
                len: u32::from(*min_len),
                elem: Elem::Int,
                passable: true,
            }),
            Param::DoublePtr { min_len } => s.arrays.push(ArrayRef {
                name,
                len: u32::from(*min_len),
                elem: Elem::Double,
                passable: true,
            }),
        }
    }
    out.line(&format!("r = depth * {} + {};", 2 * fi + 3, fi * 17));
    out.line(&format!("dr = {}.5;", fi));
    out.line("dt = 0.0;");
    out.line("i = 0;");
    out.line("k0 = 0;");
    out.line("k1 = 0;");
    for (k, sc) in f.scalars.iter().enumerate() {
        let name = format!("s{k}");
        match sc {
            Scalar::Int | Scalar::Char => {
                let base = int_params
                    .get(k % int_params.len().max(1))
                    .cloned()
                    .unwrap_or_else(|| "depth".into());
                out.line(&format!("{name} = {base} * {} + {};", k + 2, 100 * k + fi));
                s.ints.push(name.clone());
                s.int_targets.push(name);
            }
            Scalar::Double => {
                out.line(&format!(
                    "{name} = (double)(depth % 1000) * 0.5 + {}.75;",
                    k + fi
                ));
                s.doubles.push(name);
            }
        }
    }
    for (k, a) in f.arrays.iter().enumerate() {
        let name = format!("a{k}");
        let len = array_len(a);
        let value = match a.elem {
            Elem::Int => format!("i * {} + depth", 2 * k + 3),
            Elem::Char => format!("i + depth + {k}"),
            Elem::Double => format!("(double)(i) * 0.5 + (double)(depth) - {k}.0"),
        };
        out.line(&format!(
            "for (i = 0; i < {len}; i = i + 1) {{ {name}[i] = {value}; }}"
        ));
        s.arrays.push(ArrayRef {
            name,
            len,
            elem: a.elem,
            passable: a.elem != Elem::Char,
        });
    }
    s.arrays.extend(global_arrays());

    for st in &f.body {
        render_stmt(st, &mut s, sigs, out);
    }

    // Read everything back into the result: a frame corrupted by a callee shows here.
    for (k, a) in f.arrays.iter().enumerate() {
        let elem = match a.elem {
            Elem::Double => format!("(int)(a{k}[i])"),
            Elem::Int | Elem::Char => format!("a{k}[i]"),
        };
        out.line(&format!(
            "for (i = 0; i < {}; i = i + 1) {{ r = r * 31 + {elem}; }}",
            array_len(a)
        ));
    }
    for (k, sc) in f.scalars.iter().enumerate() {
        match sc {
            Scalar::Int | Scalar::Char => out.line(&format!("r = r * 7 + s{k};")),
            Scalar::Double => out.line(&format!("r = r * 7 + (int)(s{k});")),
        }
    }
    for (k, p) in f.params.iter().enumerate() {
        match p {
            Param::Int | Param::Char => out.line(&format!("r = r * 5 + p{k};")),
            Param::Double => out.line(&format!("r = r * 5 + (int)(p{k});")),
            _ => {}
        }
    }
    out.line("g_level = g_level - 1;");
    match f.ret {
        Ret::Int | Ret::Char => out.line("return r;"),
        Ret::Double => {
            out.line("dr = dr + (double)(r % 100000) * 0.25;");
            out.clamp("dr");
            out.line("return dr;");
        }
        Ret::Void => out.line("g_acc = g_acc ^ r;"),
    }
    out.indent -= 1;
    out.line("}");
}

fn render_main(g: &Genome, depth: u32, fuel: u32, sigs: &[Sig], out: &mut Out) {
    out.line("int main() {");
    out.indent += 1;
    for decl in [
        "int r;",
        "int i;",
        "double dr;",
        "double dt;",
        &format!("int ma[{MAIN_INTS}];"),
        &format!("double md[{MAIN_DOUBLES}];"),
    ] {
        out.line(decl);
    }
    out.line(&format!("g_fuel = {fuel};"));
    out.line(&format!("g_prints = {};", g.prints));
    out.line("g_level = 0;");
    out.line("g_max = 0;");
    out.line("g_acc = 0;");
    out.line(&format!(
        "for (i = 0; i < {GLOBAL_INTS}; i = i + 1) {{ g_ia[i] = i * 7 - 300; }}"
    ));
    out.line(&format!(
        "for (i = 0; i < {GLOBAL_DOUBLES}; i = i + 1) {{ g_da[i] = (double)(i) * 0.75 - 4.0; }}"
    ));
    out.line(&format!(
        "for (i = 0; i < {MAIN_INTS}; i = i + 1) {{ ma[i] = i * i - 5; }}"
    ));
    out.line(&format!(
        "for (i = 0; i < {MAIN_DOUBLES}; i = i + 1) {{ md[i] = (double)(i) * 1.5; }}"
    ));
    out.line("r = 0;");
    out.line("dr = 0.0;");
    out.line("dt = 0.0;");
    let mut s = Scope {
        func: None,
        ..Scope::default()
    };
    s.ints.push("r".into());
    s.int_targets.push("r".into());
    s.doubles.push("dr".into());
    s.arrays.push(ArrayRef {
        name: "ma".into(),
        len: MAIN_INTS,
        elem: Elem::Int,
        passable: true,
    });
    s.arrays.push(ArrayRef {
        name: "md".into(),
        len: MAIN_DOUBLES,
        elem: Elem::Double,
        passable: true,
    });
    s.arrays.extend(global_arrays());
    for (n, e) in g.entries.iter().enumerate() {
        let d = (depth / (1 + u32::from(e.depth_div) % 4)).max(1);
        render_call(
            e.callee,
            &d.to_string(),
            &e.args,
            &e.ptrs,
            n as u8,
            n as u8,
            &s,
            sigs,
            out,
        );
    }
    out.line(&format!(
        "for (i = 0; i < {MAIN_INTS}; i = i + 1) {{ r = r * 3 + ma[i]; }}"
    ));
    out.line(&format!(
        "for (i = 0; i < {MAIN_DOUBLES}; i = i + 1) {{ r = r * 3 + (int)(md[i]); }}"
    ));
    out.line(&format!(
        "for (i = 0; i < {GLOBAL_INTS}; i = i + 1) {{ r = r * 3 + g_ia[i]; }}"
    ));
    out.line(&format!(
        "for (i = 0; i < {GLOBAL_DOUBLES}; i = i + 1) {{ r = r * 3 + (int)(g_da[i]); }}"
    ));
    out.line("printf(\"acc %d max %d fuel %d r %d dr %.4f\\n\", g_acc, g_max, g_fuel, r, dr);");
    out.line("return r & 63;");
    out.indent -= 1;
    out.line("}");
}

// ---------------------------------------------------------------------------------------------
// Reduction (test-case minimisation)
// ---------------------------------------------------------------------------------------------

/// Candidate simplifications of `g`, most aggressive first: dropping the spine, functions,
/// `main`'s calls, statements (also inside `if` and loops, or unwrapping them), declarations,
/// expressions, and lowering the depth, fuel and print budget. Every candidate renders to a
/// valid program; the test keeps the first one that still fails and asks again.
pub fn reductions(g: &Genome) -> Vec<Genome> {
    let mut out = Vec::new();
    if g.spine.is_some() {
        out.push(Genome {
            spine: None,
            ..g.clone()
        });
    }
    for funcs in shorter_lists(&g.funcs, 1) {
        out.push(Genome { funcs, ..g.clone() });
    }
    for entries in shorter_lists(&g.entries, 1) {
        out.push(Genome {
            entries,
            ..g.clone()
        });
    }
    for (fi, f) in g.funcs.iter().enumerate() {
        let mut with = |f2: Func| {
            let mut g2 = g.clone();
            g2.funcs[fi] = f2;
            out.push(g2);
        };
        for body in stmt_list_variants(&f.body) {
            with(Func { body, ..f.clone() });
        }
        for params in shorter_lists(&f.params, 0) {
            with(Func {
                params,
                ..f.clone()
            });
        }
        for scalars in shorter_lists(&f.scalars, 0) {
            with(Func {
                scalars,
                ..f.clone()
            });
        }
        for arrays in shorter_lists(&f.arrays, 0) {
            with(Func {
                arrays,
                ..f.clone()
            });
        }
        if f.ret != Ret::Int {
            with(Func {
                ret: Ret::Int,
                ..f.clone()
            });
        }
    }
    for (fi, f) in g.funcs.iter().enumerate() {
        for (si, st) in f.body.iter().enumerate() {
            for st2 in simpler_exprs(st) {
                let mut g2 = g.clone();
                g2.funcs[fi].body[si] = st2;
                out.push(g2);
            }
        }
    }
    for (ei, e) in g.entries.iter().enumerate() {
        if !e.args.is_empty() {
            let mut g2 = g.clone();
            g2.entries[ei].args.clear();
            out.push(g2);
        }
    }
    if g.depth > 1 {
        out.push(Genome {
            depth: g.depth / 2,
            ..g.clone()
        });
    }
    if g.fuel > 1 {
        out.push(Genome {
            fuel: g.fuel / 2,
            ..g.clone()
        });
    }
    if g.prints > 0 {
        out.push(Genome {
            prints: g.prints / 2,
            ..g.clone()
        });
    }
    out
}

/// `list` without each half, quarter, ... and single element, keeping at least `min` elements.
fn shorter_lists<T: Clone>(list: &[T], min: usize) -> Vec<Vec<T>> {
    let mut out = Vec::new();
    let mut chunk = list.len().div_ceil(2).max(1);
    loop {
        let mut start = 0;
        while start < list.len() {
            let end = (start + chunk).min(list.len());
            if list.len() - (end - start) >= min {
                let mut l = list[..start].to_vec();
                l.extend_from_slice(&list[end..]);
                out.push(l);
            }
            start = end;
        }
        if chunk == 1 {
            break;
        }
        chunk = chunk.div_ceil(2);
    }
    out
}

/// Variants of a statement list: shorter lists, compound statements unwrapped, and nested
/// lists simplified the same way.
fn stmt_list_variants(list: &[Stmt]) -> Vec<Vec<Stmt>> {
    let mut out = shorter_lists(list, 0);
    for (i, st) in list.iter().enumerate() {
        let mut replace = |with: Vec<Stmt>| {
            let mut l = list[..i].to_vec();
            l.extend(with);
            l.extend_from_slice(&list[i + 1..]);
            out.push(l);
        };
        match st {
            Stmt::If { cond, then, els } => {
                replace(then.clone());
                replace(els.clone());
                for t in stmt_list_variants(then) {
                    replace(vec![Stmt::If {
                        cond: cond.clone(),
                        then: t,
                        els: els.clone(),
                    }]);
                }
                for e in stmt_list_variants(els) {
                    replace(vec![Stmt::If {
                        cond: cond.clone(),
                        then: then.clone(),
                        els: e,
                    }]);
                }
            }
            Stmt::Loop { form, count, body } => {
                replace(body.clone());
                if count % 4 != 0 {
                    replace(vec![Stmt::Loop {
                        form: *form,
                        count: 0,
                        body: body.clone(),
                    }]);
                }
                for b in stmt_list_variants(body) {
                    replace(vec![Stmt::Loop {
                        form: *form,
                        count: *count,
                        body: b,
                    }]);
                }
            }
            _ => {}
        }
    }
    out
}

/// The constant 0 in an int context, `0.5` in a double one.
const ZERO: Expr = Expr::Leaf { kind: 2, sel: 100 };

/// A statement with its expressions made constant, or its arguments dropped.
fn simpler_exprs(st: &Stmt) -> Vec<Stmt> {
    let zero_if = |e: &Expr| !matches!(e, Expr::Leaf { .. });
    match st {
        Stmt::Assign { var, e } if zero_if(e) => vec![Stmt::Assign { var: *var, e: ZERO }],
        Stmt::ArrayWrite { sel, idx, e } if zero_if(idx) || zero_if(e) => vec![Stmt::ArrayWrite {
            sel: *sel,
            idx: ZERO,
            e: ZERO,
        }],
        Stmt::Fill { sel, stride, e } if zero_if(e) => vec![Stmt::Fill {
            sel: *sel,
            stride: *stride,
            e: ZERO,
        }],
        Stmt::Call {
            callee,
            args,
            ptrs,
            dest,
            combine,
            extra_dec,
        } if !args.is_empty() || !ptrs.is_empty() => vec![Stmt::Call {
            callee: *callee,
            args: Vec::new(),
            ptrs: Vec::new(),
            dest: *dest,
            combine: *combine,
            extra_dec: *extra_dec,
        }],
        Stmt::Print {
            args,
            types,
            mask,
            use_result,
        } => shorter_lists(args, 0)
            .into_iter()
            .map(|args| Stmt::Print {
                args,
                types: *types,
                mask: *mask,
                use_result: *use_result,
            })
            .collect(),
        Stmt::Accumulate(e) if zero_if(e) => vec![Stmt::Accumulate(ZERO)],
        Stmt::If { cond, then, els } if zero_if(cond) => vec![Stmt::If {
            cond: ZERO,
            then: then.clone(),
            els: els.clone(),
        }],
        _ => Vec::new(),
    }
}
