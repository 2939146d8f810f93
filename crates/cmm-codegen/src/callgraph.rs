//! Call-graph analysis for linked stack chunks with look-ahead overflow detection (thesis
//! 3.4.3, after Capriccio, thesis 2.4): every function's stack need, the whole program's call
//! graph, and the *checkpoints* — the call sites that test for room and link a new chunk.
//!
//! # Model
//!
//! * A function's **frame** is the bytes its activation occupies below its incoming arguments:
//!   the return address plus everything its prologue reserves (`call_overhead + S` in the
//!   emission stage's terms).
//! * A call site's **arg bytes** are the bytes its caller pushes below its own frame before the
//!   call instruction (the arguments, alignment padding, and any arguments of an enclosing call
//!   already pushed).
//! * The **path** of a call site is `arg bytes + need(callee)`, where the need of a C--
//!   function is its longest path `LP`, and the need of an `extern` function is the configured
//!   budget ([`CallGraphConfig::extern_budget`], see [`DEFAULT_EXTERN_BUDGET_64`]; for green
//!   threads [`CallGraphConfig::budget_of`]: C calls run on the worker's stack and need
//!   [`GREEN_CCALL_BUDGET`], the thread library [`thread_library_budget`]).
//! * `LP(f) = frame(f) + max(0, path(s) for the call sites s of f that are not checkpoints)`:
//!   the deepest the stack gets below the SP at a call of `f` before the next checkpoints.
//! * A **checkpoint** at site `s` tests, before pushing the arguments, whether
//!   `reserve(s) = path(s)` bytes are left in the current chunk (the stackrt test is
//!   `SP - reserve < limit + CHECK_SLACK`) and links a new chunk if not.
//! * **Roots** are entered on a fresh chunk by a runtime trampoline: `main`, and thread entry
//!   functions (whose address is taken); they need `entry bytes + LP(root)` bytes of that first
//!   chunk (the emission stage writes this *stack need* before each function, see
//!   `emit::mech::lookahead`).
//!
//! Placement guarantees: every cycle of the call graph (recursion, mutual recursion) contains
//! a checkpoint; every path between two checkpoints, or from a root's entry to its first
//! checkpoints, is covered by the checkpoint's reserve (the root's stack need). Reserves and
//! needs normally fit in a chunk's [`chunk_capacity`]; they exceed it only when one frame does
//! (a large local array, or an extern call's arguments plus the budget): the runtime then links
//! a chunk at least as big as the reserve (gives a root a first chunk at least as big as its
//! need), so no frame is too large for any `--chunk-size`.
//!
//! # Algorithm
//!
//! 1. A depth-first search from the roots (then from the remaining functions) makes every
//!    back edge — a call to a function still on the DFS stack, self-calls included — a
//!    checkpoint ([`CheckpointReason::Cycle`]). Every cycle has a back edge, so the remaining
//!    call graph is acyclic, and the DFS finishing order is a callee-before-caller order of it.
//! 2. In that order, each function gets `LP`; when `LP(f)` exceeds its *bound*, the call
//!    sites with the largest paths become checkpoints ([`CheckpointReason::Size`]) until it
//!    fits. The bound is `max(capacity - max_in(f), frame(f))` (the subtraction saturating at
//!    0), where `max_in(f)` is the largest arg bytes of any call to `f` (or the entry bytes for
//!    a root): what a chunk can give `f` after the pushes of its caller, or `f`'s frame alone
//!    when that is more. So `LP(f) <= bound(f)` always holds; a function whose frame alone is
//!    over the bound gets every outgoing call with a nonzero path checkpointed and `LP(f) =
//!    frame(f)`, and since its callers then see a path over the capacity, their calls to it
//!    become checkpoints too, with a reserve over the capacity (as do extern calls whose
//!    arguments plus budget exceed it).
//! 3. Each checkpoint's reserve is its path, now that every `LP` is final.
//!
//! Input and output are plain data so the emission stage can build the input from its own
//! frames and call instructions ([`CallGraphInput`]) and read, per call site, whether to emit
//! the check and with which reserve ([`CallGraphPlan::site`]). [`CallGraphPlan`]'s `Display`
//! is the text of `cmm compile FILE --emit callgraph`.

use std::fmt;

use cmm_front::typed::{self, Callee, Expr, ExprKind, FuncId, Place, PlaceKind, Stmt};

/// The thesis's chunk size: 8 pages of 4 KiB (header included, guard page excluded).
pub const DEFAULT_CHUNK_SIZE: u32 = 32 * 1024;

/// Bytes a checkpoint keeps free below its reserve for the call of the overflow handler;
/// equals `stackrt::chunk::CHECK_SLACK`.
pub const CHECK_SLACK: u32 = 16;

/// Size of stackrt's chunk header (`stackrt::chunk::HEADER_SIZE`): 8 pointer-sized words.
pub const fn chunk_header_size(pointer_size: u32) -> u32 {
    8 * pointer_size
}

/// Byte offsets of the header words the emitted code and handlers use (word `i` at `i * P`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkHeaderLayout {
    /// Native stack pointer the handlers switch to.
    pub thread_stack: u32,
    /// Stack pointer to restore on underflow.
    pub prev_sp: u32,
    /// Previous chunk's header (chunk register to restore on underflow).
    pub prev_header: u32,
    /// Lowest usable address of the chunk.
    pub limit: u32,
    /// MMU mechanisms: real return address of the chunk's first frame.
    pub resume: u32,
    /// `lookahead`: the check word, `limit + bias` (the same word as `resume`; see
    /// [`crate::emit::mech::lookahead`], "The check word").
    pub check: u32,
    /// Size of the header.
    pub size: u32,
}

impl ChunkHeaderLayout {
    pub const fn for_pointer_size(p: u32) -> Self {
        ChunkHeaderLayout {
            thread_stack: 0,
            prev_sp: p,
            prev_header: 2 * p,
            limit: 3 * p,
            resume: 4 * p,
            check: 4 * p,
            size: chunk_header_size(p),
        }
    }
}

/// What emitted code stores in header word 0 (`thread_stack`) of a chunk it unlinked without
/// calling the runtime (`stackrt::chunk::UNLINKED`: all ones; a 32-bit immediate, sign-extended
/// on x86-64).
pub const UNLINKED_MARK: i32 = -1;

/// Bytes a standard chunk gives a checkpoint's reserve: `chunk_size - header - CHECK_SLACK`
/// (equals `stackrt::chunk::chunk_capacity` on the target). 32 KiB: 32720 on i686, 32688 on
/// x86-64. The analysis keeps every reserve within it unless a single frame is larger; a larger
/// reserve makes the runtime link a chunk of at least that capacity.
pub const fn chunk_capacity(chunk_size: u32, pointer_size: u32) -> u32 {
    chunk_size.saturating_sub(chunk_header_size(pointer_size) + CHECK_SLACK)
}

/// Checks a `--chunk-size` value: a multiple of 4096 between 4 KiB and 1 GiB.
pub fn validate_chunk_size(bytes: u64) -> Result<u32, String> {
    if bytes == 0 || !bytes.is_multiple_of(4096) || bytes > (1 << 30) {
        return Err(format!(
            "chunk size {bytes} must be a multiple of 4096 bytes between 4096 and 1073741824"
        ));
    }
    Ok(bytes as u32)
}

/// Default stack budget of a call to an `extern` (C) function on x86-64, in bytes, measured
/// from the SP before the call (return address included).
///
/// Measured by `tests/callgraph_extern_budget.rs` (a C program paints a stack, runs one call
/// on it with `swapcontext` in a fresh process, and finds the deepest byte touched; glibc
/// 2.36, first calls included), x86-64 / i686 in bytes:
///
/// | call                               | x86-64 | i686 |
/// |------------------------------------|-------:|-----:|
/// | `printf("%d %s")`                  |   3240 | 2224 |
/// | `printf("%f")`, ordinary doubles   |   3240 | 2688 |
/// | `printf("%f", 1e308)`              |   4776 | 4656 |
/// | `printf("%.400f %.60e")`           |   5208 | 5104 |
/// | `puts`, `atoi`, `malloc`/`free`    |   3240 |  960 |
/// | `pthread_create` + `pthread_join`  |   3560 |  860 |
///
/// On x86-64 every first call costs at least 3.2 KiB: lazy PLT binding saves the whole vector
/// state (AVX-512 here) on the stack. 8 KiB covers the worst case with 2.8 KiB to spare for
/// other glibc versions. Not covered: huge precisions (`%.5000f`: glibc puts digit buffers of
/// up to 64 KiB on the stack) and signal handlers running on a chunk (give threads an
/// alternate signal stack). The test fails if a measurement exceeds the budget.
pub const DEFAULT_EXTERN_BUDGET_64: u32 = 8 * 1024;

/// Default extern budget on i686 (see [`DEFAULT_EXTERN_BUDGET_64`]: 32-bit frames are smaller
/// but `printf` of large or very precise doubles still needs over 5 KiB).
pub const DEFAULT_EXTERN_BUDGET_32: u32 = 8 * 1024;

/// Budget of a green thread's call to a C function under `lookahead`: the call runs on the
/// worker's handler stack (`stackrt_ccall`, `emit::mech::lookahead`, "C calls of
/// green threads"), so the thread's own stack holds only the trampoline's return address and
/// the one word it saves.
pub const GREEN_CCALL_BUDGET: u32 = 16;

/// Budget of a green thread's call into the thread library (`sthread_*` but `sthread_exit`)
/// under `lookahead`, 12 words: the call runs on the worker's handler stack through
/// `stackrt_lookahead_libcall` (`emit::mech::lookahead`, "C calls of green threads"), and a
/// switch it makes saves the thread's context on the thread's stack below the stub's words:
/// 88 bytes on x86-64 and 40 on i686 below the return address, measured 2026-11-26 (the
/// return address included: 96 and 44). The budget is every green thread's, in its stack
/// block, so it has no margin. A budget a few words short is absorbed (checked 2026-11-26
/// with 4 and 6 words): a block's first chunk is at least stackrt's `EXIT_ROOM`, and blocks
/// learned from threads that outgrew theirs hold what those threads were seen to use; a call
/// that ran past its block would stop the program at the block's canary.
pub const fn libcall_budget(pointer_size: u32) -> u32 {
    12 * pointer_size
}

/// Budget of a green thread's call of `sthread_exit` under `lookahead`, which switches away
/// for good on the thread's own stack (its deepest path to the switch, 176 bytes on x86-64 as
/// `sthread_mutex_lock`'s was, with a margin). `tests/green.rs`
/// (`the_thread_library_fits_its_budget_on_a_green_stack`) runs every call of the library at
/// the bottom of threads; the runtime checks a canary below every green thread's first chunk
/// when the thread ends and stops the program with one line if a call overran.
pub const THREAD_EXIT_BUDGET: u32 = 512;

/// The budget of a green thread's call of the thread-library function `name`.
pub fn thread_library_budget(name: &str, pointer_size: u32) -> u32 {
    if name == THREAD_EXIT {
        THREAD_EXIT_BUDGET
    } else {
        libcall_budget(pointer_size)
    }
}

/// Under green threads, the most a thread entry's longest path may be before its calls with
/// the largest paths become checkpoints ([`CheckpointReason::Size`]): 32 words. A green
/// thread's first stack block holds its entry's stack need, so every byte of the need is a
/// byte of every thread of that function, whichever path the thread takes. With the calls into
/// recursions and large frames checkpointed at the entry, a thread that takes them links a
/// chunk once and the runtime sizes the next blocks of the function from what the checkpoint
/// needed (stackrt's `green::sizing`).
pub const fn green_root_bound(pointer_size: u32) -> u32 {
    32 * pointer_size
}

/// The thread library's function that never returns (called directly, not through the stub).
pub const THREAD_EXIT: &str = "sthread_exit";

/// The prefix of the thread library's functions.
pub const THREAD_LIBRARY_PREFIX: &str = "sthread_";

/// The default extern budget for a target's pointer size.
pub const fn default_extern_budget(pointer_size: u32) -> u32 {
    if pointer_size == 8 {
        DEFAULT_EXTERN_BUDGET_64
    } else {
        DEFAULT_EXTERN_BUDGET_32
    }
}

/// One call instruction of a function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallSite {
    pub callee: Callee,
    /// Bytes the caller pushes below its frame for this call (see the module docs).
    pub arg_bytes: u32,
}

/// One C-- function of the analysis input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionNode {
    pub name: String,
    /// Bytes below the incoming arguments: return address + frame (see the module docs).
    pub frame: u32,
    /// The function's calls, in any order the caller of the analysis likes; the plan answers
    /// per index into this list.
    pub calls: Vec<CallSite>,
    /// `Some(entry bytes)` if a trampoline enters this function on a fresh chunk (`main`,
    /// thread entries): the bytes it pushes before the call.
    pub root: Option<u32>,
}

/// The analysis input: one node per C-- function (index = `FuncId`), extern names (index =
/// `ExternId`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CallGraphInput {
    pub functions: Vec<FunctionNode>,
    pub externs: Vec<String>,
}

/// Sizes the analysis works with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallGraphConfig {
    /// `--chunk-size` (for display; the analysis uses `capacity`).
    pub chunk_size: u32,
    /// Bytes a standard chunk gives a reserve ([`chunk_capacity`]): the analysis places
    /// checkpoints so that paths fit in it, wherever a single frame allows.
    pub capacity: u32,
    /// Bytes reserved for a call to any `extern` function.
    pub extern_budget: u32,
    /// Green threads (`--threads green`): a call to a C function runs on the worker's handler
    /// stack and needs [`GREEN_CCALL_BUDGET`]; a call into the thread library runs on the
    /// thread's stack and needs [`thread_library_budget`] (`extern_budget` is not used).
    pub green: bool,
    /// Thread entries (roots other than `main`) keep their longest path within this many
    /// bytes where their frames allow, by checkpointing their calls with the largest paths;
    /// 0: no such bound. Green threads use [`green_root_bound`].
    pub root_bound: u32,
    /// Bytes of a pointer on the target (4 or 8).
    pub pointer_size: u32,
}

impl CallGraphConfig {
    /// The budget of a call to the extern named `name`.
    pub fn budget_of(&self, name: &str) -> u32 {
        if !self.green || name.starts_with(crate::race::ENTRY_PREFIX) {
            self.extern_budget
        } else if name.starts_with(THREAD_LIBRARY_PREFIX) {
            thread_library_budget(name, self.pointer_size)
        } else {
            GREEN_CCALL_BUDGET
        }
    }
}

impl CallGraphConfig {
    /// The configuration for a chunk size and target pointer size, default extern budget.
    pub fn new(chunk_size: u32, pointer_size: u32) -> Self {
        CallGraphConfig {
            chunk_size,
            capacity: chunk_capacity(chunk_size, pointer_size),
            extern_budget: default_extern_budget(pointer_size),
            green: false,
            root_bound: 0,
            pointer_size,
        }
    }
}

/// Why a call site is a checkpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckpointReason {
    /// The call closes a cycle of the call graph (recursion).
    Cycle,
    /// Without it the path would not fit in a chunk.
    Size,
}

/// The analysis result for one call site.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SitePlan {
    pub callee: Callee,
    pub arg_bytes: u32,
    /// `arg_bytes + need(callee)`.
    pub path: u32,
    /// `Some` if the site is a checkpoint.
    pub checkpoint: Option<CheckpointReason>,
    /// Bytes to test for at a checkpoint (`path`); 0 at other sites.
    pub reserve: u32,
}

/// The analysis result for one function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionPlan {
    pub name: String,
    pub frame: u32,
    /// `LP`: deepest stack use below the SP at a call of this function, up to the next
    /// checkpoints.
    pub longest_path: u32,
    pub root: Option<u32>,
    pub sites: Vec<SitePlan>,
}

/// The analysis result: a plan per function, per call site.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallGraphPlan {
    pub config: CallGraphConfig,
    pub functions: Vec<FunctionPlan>,
    pub externs: Vec<String>,
}

impl CallGraphPlan {
    /// The plan of call site `site` of function `f`.
    pub fn site(&self, f: FuncId, site: usize) -> &SitePlan {
        &self.functions[f as usize].sites[site]
    }

    /// `LONGEST_PATH(f)`.
    pub fn longest_path(&self, f: FuncId) -> u32 {
        self.functions[f as usize].longest_path
    }

    /// Number of checkpoints in the program.
    pub fn checkpoint_count(&self) -> usize {
        self.functions
            .iter()
            .flat_map(|f| &f.sites)
            .filter(|s| s.checkpoint.is_some())
            .count()
    }
}

/// Places the checkpoints (see the module docs).
///
/// Never fails: a site whose path does not fit in a chunk becomes a checkpoint, and a reserve
/// over [`CallGraphConfig::capacity`] is left to the runtime, which links a chunk big enough.
pub fn analyze(input: &CallGraphInput, config: &CallGraphConfig) -> CallGraphPlan {
    let n = input.functions.len();
    let cap = config.capacity as u64;
    let budgets: Vec<u64> = input
        .externs
        .iter()
        .map(|e| config.budget_of(e) as u64)
        .collect();
    let budget = |e: u32| {
        budgets
            .get(e as usize)
            .copied()
            .unwrap_or(config.extern_budget as u64)
    };

    // The largest bytes pushed by any way of entering each function (see `bound` below).
    let mut max_in = vec![0u64; n];
    for f in &input.functions {
        for s in &f.calls {
            if let Callee::Function(g) = s.callee {
                let g = g as usize;
                max_in[g] = max_in[g].max(s.arg_bytes as u64);
            }
        }
    }
    for (i, f) in input.functions.iter().enumerate() {
        if let Some(entry) = f.root {
            max_in[i] = max_in[i].max(entry as u64);
        }
    }

    let mut checkpoint: Vec<Vec<Option<CheckpointReason>>> = input
        .functions
        .iter()
        .map(|f| vec![None; f.calls.len()])
        .collect();

    // 1. DFS: back edges become checkpoints; `order` is the finishing order.
    let order = dfs_mark_back_edges(input, &mut checkpoint);

    // 2. Longest paths callee-first, turning the largest paths into checkpoints when needed.
    let mut lp = vec![0u64; n];
    for &f in &order {
        let node = &input.functions[f];
        let frame = node.frame as u64;
        // What a chunk can give `f` below its caller's pushes; when `f`'s frame alone is more,
        // the frame (its callers' checkpoints reserve it whole, in a chunk big enough), so
        // that every call of `f` with a nonzero path becomes a checkpoint and LP(f) = frame.
        let mut bound = cap.saturating_sub(max_in[f]);
        if config.root_bound > 0 && node.root.is_some() && node.name != "main" {
            bound = bound.min(config.root_bound as u64);
        }
        let bound = bound.max(frame);
        let path_of = |s: &CallSite| -> u64 {
            s.arg_bytes as u64
                + match s.callee {
                    Callee::Function(g) => lp[g as usize],
                    Callee::Extern(e) => budget(e),
                }
        };
        let mut open: Vec<(u64, usize)> = node
            .calls
            .iter()
            .enumerate()
            .filter(|(i, _)| checkpoint[f][*i].is_none())
            .map(|(i, s)| (path_of(s), i))
            .collect();
        // Largest first; ties by site index for a deterministic plan.
        open.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut k = 0;
        while k < open.len() && frame + open[k].0 > bound {
            checkpoint[f][open[k].1] = Some(CheckpointReason::Size);
            k += 1;
        }
        lp[f] = frame + open.get(k).map_or(0, |o| o.0);
    }

    // 3. The plan.
    let functions = input
        .functions
        .iter()
        .enumerate()
        .map(|(f, node)| FunctionPlan {
            name: node.name.clone(),
            frame: node.frame,
            longest_path: saturate(lp[f]),
            root: node.root,
            sites: node
                .calls
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    let path = s.arg_bytes as u64
                        + match s.callee {
                            Callee::Function(g) => lp[g as usize],
                            Callee::Extern(e) => budget(e),
                        };
                    let cp = checkpoint[f][i];
                    SitePlan {
                        callee: s.callee,
                        arg_bytes: s.arg_bytes,
                        path: saturate(path),
                        checkpoint: cp,
                        reserve: if cp.is_some() { saturate(path) } else { 0 },
                    }
                })
                .collect(),
        })
        .collect();
    CallGraphPlan {
        config: *config,
        functions,
        externs: input.externs.clone(),
    }
}

/// A byte count of the plan: sums of `u32` frames can exceed `u32` only for absurd frames, which
/// the emission stage rejects anyway (it cannot load such a reserve into a register).
fn saturate(bytes: u64) -> u32 {
    bytes.min(u32::MAX as u64) as u32
}

/// Iterative DFS over C-- call edges, roots first. Marks back edges as cycle checkpoints and
/// returns the nodes in finishing order.
fn dfs_mark_back_edges(
    input: &CallGraphInput,
    checkpoint: &mut [Vec<Option<CheckpointReason>>],
) -> Vec<usize> {
    #[derive(Clone, Copy, PartialEq)]
    enum Color {
        White,
        Grey,
        Black,
    }
    let n = input.functions.len();
    let mut color = vec![Color::White; n];
    let mut order = Vec::with_capacity(n);
    let starts = (0..n)
        .filter(|&i| input.functions[i].root.is_some())
        .chain((0..n).filter(|&i| input.functions[i].root.is_none()));
    let mut stack: Vec<(usize, usize)> = Vec::new();
    for s in starts {
        if color[s] != Color::White {
            continue;
        }
        color[s] = Color::Grey;
        stack.push((s, 0));
        while let Some(&mut (u, ref mut next)) = stack.last_mut() {
            let calls = &input.functions[u].calls;
            if *next == calls.len() {
                color[u] = Color::Black;
                order.push(u);
                stack.pop();
                continue;
            }
            let i = *next;
            *next += 1;
            if let Callee::Function(v) = calls[i].callee {
                let v = v as usize;
                match color[v] {
                    Color::Grey => checkpoint[u][i] = Some(CheckpointReason::Cycle),
                    Color::White => {
                        color[v] = Color::Grey;
                        stack.push((v, 0));
                    }
                    Color::Black => {}
                }
            }
        }
    }
    order
}

impl fmt::Display for CallGraphPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = &self.config;
        if c.green {
            writeln!(
                f,
                "call graph: chunk size {} bytes, capacity {} bytes, green threads (C calls \
                 {} bytes on the thread's stack, the thread library {} bytes, sthread_exit \
                 {} bytes), {} checkpoints",
                c.chunk_size,
                c.capacity,
                GREEN_CCALL_BUDGET,
                libcall_budget(c.pointer_size),
                THREAD_EXIT_BUDGET,
                self.checkpoint_count()
            )?;
        } else {
            writeln!(
                f,
                "call graph: chunk size {} bytes, capacity {} bytes, extern budget {} bytes, \
                 {} checkpoints",
                c.chunk_size,
                c.capacity,
                c.extern_budget,
                self.checkpoint_count()
            )?;
        }
        for func in &self.functions {
            write!(
                f,
                "{}: frame {}, longest path {}",
                func.name, func.frame, func.longest_path
            )?;
            if let Some(entry) = func.root {
                write!(f, ", root (entry {entry})")?;
            }
            writeln!(f)?;
            for s in &func.sites {
                match s.callee {
                    Callee::Function(g) => {
                        let name = self.functions.get(g as usize).map_or("?", |p| &p.name);
                        write!(f, "  call {name}")?;
                    }
                    Callee::Extern(e) => {
                        let name = self.externs.get(e as usize).map_or("?", |s| s.as_str());
                        write!(f, "  call {name} (extern)")?;
                    }
                }
                write!(f, ": args {}, path {}", s.arg_bytes, s.path)?;
                match s.checkpoint {
                    Some(CheckpointReason::Cycle) => {
                        write!(f, ", checkpoint (cycle), reserve {}", s.reserve)?
                    }
                    Some(CheckpointReason::Size) => {
                        write!(f, ", checkpoint (size), reserve {}", s.reserve)?
                    }
                    None => {}
                }
                writeln!(f)?;
            }
        }
        Ok(())
    }
}

impl CallGraphInput {
    /// Builds the input from a typed program, with the call sites of each function in
    /// evaluation order of its body (arguments left to right, before the call itself).
    ///
    /// `frame(f)` gives the frame bytes of function `f` (module docs); `arg_bytes(callee,
    /// args)` the bytes one call pushes. The arg bytes of a call nested in the arguments of
    /// another include the enclosing calls' bytes (an upper bound whatever the push order).
    /// Roots are `main` (entry bytes: two pointer slots, `argc` and `argv`) and every function
    /// whose address is taken (thread entries, one pointer slot). A back end whose call
    /// instructions are not in this order should build [`CallGraphInput`] itself.
    pub fn from_typed(
        program: &typed::Program,
        frame: impl Fn(FuncId) -> u32,
        arg_bytes: impl Fn(Callee, &[Expr]) -> u32,
    ) -> CallGraphInput {
        let p = program.target.pointer_size;
        let mut address_taken = vec![false; program.functions.len()];
        let mut functions: Vec<FunctionNode> = program
            .functions
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let mut w = Walker {
                    calls: Vec::new(),
                    address_taken: &mut address_taken,
                    arg_bytes: &arg_bytes,
                    outer: 0,
                };
                for s in &f.body {
                    w.stmt(s);
                }
                FunctionNode {
                    name: f.name.clone(),
                    frame: frame(i as FuncId),
                    calls: w.calls,
                    root: None,
                }
            })
            .collect();
        for (i, f) in functions.iter_mut().enumerate() {
            if f.name == "main" {
                f.root = Some(2 * p);
            } else if address_taken[i] {
                f.root = Some(p);
            }
        }
        CallGraphInput {
            functions,
            externs: program.externs.iter().map(|e| e.name.clone()).collect(),
        }
    }
}

struct Walker<'a, F: Fn(Callee, &[Expr]) -> u32> {
    calls: Vec<CallSite>,
    address_taken: &'a mut Vec<bool>,
    arg_bytes: &'a F,
    /// Bytes pushed by enclosing calls whose arguments are being evaluated.
    outer: u32,
}

impl<F: Fn(Callee, &[Expr]) -> u32> Walker<'_, F> {
    fn stmt(&mut self, s: &Stmt) {
        match s {
            Stmt::Expr(e) => self.expr(e),
            Stmt::If { cond, then, els } => {
                self.expr(cond);
                self.stmt(then);
                if let Some(e) = els {
                    self.stmt(e);
                }
            }
            Stmt::While { cond, body } => {
                self.expr(cond);
                self.stmt(body);
            }
            Stmt::DoWhile { body, cond } => {
                self.stmt(body);
                self.expr(cond);
            }
            Stmt::For {
                init,
                cond,
                step,
                body,
            } => {
                for e in [init, cond].into_iter().flatten() {
                    self.expr(e);
                }
                self.stmt(body);
                if let Some(e) = step {
                    self.expr(e);
                }
            }
            Stmt::Return(Some(e)) => self.expr(e),
            Stmt::Block(b) => b.iter().for_each(|s| self.stmt(s)),
            Stmt::Break | Stmt::Continue | Stmt::Return(None) | Stmt::Empty => {}
        }
    }

    fn place(&mut self, p: &Place) {
        match &p.kind {
            PlaceKind::Local(_) | PlaceKind::Global(_) => {}
            PlaceKind::Deref(e) => self.expr(e),
            PlaceKind::Member(p, _) => self.place(p),
        }
    }

    fn expr(&mut self, e: &Expr) {
        match &e.kind {
            ExprKind::IntConst(_)
            | ExprKind::DoubleConst(_)
            | ExprKind::StringLit(_)
            | ExprKind::Null
            | ExprKind::StackSizeOf(_) => {}
            ExprKind::FuncAddr(f) => self.address_taken[*f as usize] = true,
            ExprKind::Load(p) | ExprKind::AddrOf(p) => self.place(p),
            ExprKind::Assign(p, v) => {
                self.place(p);
                self.expr(v);
            }
            ExprKind::Unary(_, a) | ExprKind::Convert(a) => self.expr(a),
            ExprKind::Binary(_, a, b)
            | ExprKind::LogicalAnd(a, b)
            | ExprKind::LogicalOr(a, b)
            | ExprKind::Comma(a, b)
            | ExprKind::PtrDiff { lhs: a, rhs: b, .. }
            | ExprKind::PtrOffset {
                ptr: a, index: b, ..
            } => {
                self.expr(a);
                self.expr(b);
            }
            ExprKind::Call { callee, args } => {
                let bytes = (self.arg_bytes)(*callee, args);
                let saved = self.outer;
                self.outer = saved.saturating_add(bytes);
                for a in args {
                    self.expr(a);
                }
                self.outer = saved;
                self.calls.push(CallSite {
                    callee: *callee,
                    arg_bytes: saved.saturating_add(bytes),
                });
            }
        }
    }
}
