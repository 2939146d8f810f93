//! Mechanism `mtss`: multi-task stack sharing (the MTSS seed: Middha, Simpson, Barua, CASES
//! 2005). Every thread has its own ("native") stack of the size it asked for, carved from one
//! region the runtime reserves at start; a check at every procedure entry compares the stack
//! pointer against the thread's *limit*, and a thread that would overflow its native stack grows
//! into a *page* (128 bytes by default, `--chunk-size`) at the far end of another thread's free
//! stack space (`stackrt::mech::mtss`).
//!
//! # Sequences, side by side with the paper
//!
//! Calls and returns are `callee-cleanup`'s ([`super::CalleeCleanup`]: the caller pushes the
//! return address and the arguments and jumps; the callee removes everything and jumps back).
//! The thread register `rbp`/`ebp` (reserved, as the chunk register of `lookahead`) holds the
//! address of the running thread's record, whose first word is its limit. At the entry of a
//! function whose frame is `S` bytes and whose calls push at most `P` bytes:
//!
//! ```text
//!  paper figure 3                               this stage (x86-64; i686: ecx, edx, esp, ebp)
//!  if ((Stack-Ptr < Overflow-Ptr[task]) ||      lea  r11, [rsp - (S + P + 16 - B)]
//!      Overflow-Started[task])                  cmp  r11, qword ptr [rbp]     ; limit + B
//!    call overflow handler                      jb   .LmtK_ovf
//!                                             .LmtK_go:
//!                                               sub  rsp, S
//!                                               ...
//!                                               ; in `.subsection 1`:
//!                                             .LmtK_ovf:
//!                                               mov  r11d, S + P + 16
//!                                               mov  r10d, A               ; argument bytes
//!                                               call stackrt_mtss_overflow
//!                                               jmp  .LmtK_go
//! ```
//!
//! The paper's two conditions are one compare here: while the thread runs on its native stack
//! its limit is its overflow pointer (the top of the space other threads' overflowing stacks
//! took from it); while it runs on a page, the runtime sets the limit to the page's low end
//! (the paper's `Overflow-Started`, then "the stack pointer of the task is compared against
//! the page boundary"). The check counts the pushes of the function's calls (`P`: a C-- call's
//! return address and arguments, a C call's padded arguments and the C-call trampoline's
//! words), because under callee-cleanup the caller pushes them below its frame before the
//! callee's own check runs; and 16 bytes of slack for the overflow handler's return address.
//!
//! The overflow handler ([`OVERFLOW_HANDLER`]) takes `ceil((S + P + 16 + B + A + slot) / page)`
//! contiguous pages from another thread (the one with the fewest pages lent, holes first),
//! copies the `A` bytes of arguments and the return address there (the paper: "overflowing
//! procedure arguments are copied over to the new stack page"), replaces the copied return
//! address by the runtime's return stub, and goes on at `.LmtK_go` with the stack pointer on
//! the page. The function's own epilogue then returns into the stub, which gives the pages
//! back (the overflow pointer of the donor recedes: the paper's figure 4), restores the
//! caller's stack pointer and limit, and jumps to the real return address. So the paper's
//! check at every procedure exit is made only by the first frame of a page, which is the only
//! one that can leave it: a function that does not overflow pays nothing on return.
//!
//! # The check bias
//!
//! The record's first word is not the limit itself but the limit plus the program's *check
//! bias* `B` (`__cmm_check_bias`, as under `lookahead`): the largest room of a checked function
//! that is at most [`BIAS_CAP`] bytes. A function whose room `R` is at most `B` then checks
//! with two instructions, `cmp rsp, qword ptr [rbp]; jb .LmtK_ovf` (the stack pointer at least
//! `B >= R` bytes above the limit); a larger one keeps the `lea` with `R - B`, the same
//! condition as `rsp - R >= limit`. A short check may fail with `R` bytes still free (at most
//! `B - R` too early): the runtime lends the room and `B` more, so the function's first callee
//! need not overflow again. A native stack thus holds up to `B` bytes fewer before its
//! thread overflows; on the MiBench-like workloads' hot functions (rooms 40-96 bytes) the check
//! is one instruction shorter.
//!
//! # The check before the pushes
//!
//! A call of a checked function whose room `R` plus the call's pushes `A + slot` is within
//! the bias compares in the caller, before it pushes anything: `cmp rsp, qword ptr [rbp]`,
//! the pushes, then `jb callee` (the callee's own check, at a stack pointer lower still, fails
//! too and calls the overflow handler as always) and `jmp .LmtK_go`, past the callee's check.
//! It tests the stack pointer `A + slot` bytes higher than the callee's check would, against
//! the same biased limit: passing it means `R + A + slot <= B` bytes are free above the limit
//! there, so the callee's check would pass. Why: reading the stack pointer right after pushes
//! cost about a cycle per call on the AMD EPYC measured (2026-11-27: `deep_repeat.cm` 8 and 64
//! deep, x86-64, 0.93x and 0.95x the time with the entry check). The bias counts such calls by
//! `R + A + slot`; a function called only through a pointer (a thread entry) keeps its own.
//!
//! # Functions without a check
//!
//! A function that can only be called by the program's own calls (not `main`, not a function
//! whose address is taken: thread entries and C callbacks), that lies on no cycle of the call
//! graph, and that needs at most [`UNCHECKED_NEED`] bytes below its entry (its frame, its
//! pushes, and what its own unchecked callees need) has no entry check: every caller's check
//! counts that need among its pushes, so the caller's check already holds the callee's stack.
//! The paper checks every procedure; a leaf's three instructions are a large part of a small
//! function, and its check can never fail where its caller's passed. An overflow in the
//! caller takes pages for the callee's need too, so MSO and PRS may be a few bytes higher.
//!
//! # C calls
//!
//! Every call to a C function, the thread library's included, runs on the OS thread's handler
//! stack (its native stack below the entry trampoline) through the runtime's C-call trampoline
//! ([`super::ccall`]): a thread's MTSS stack holds C-- frames only, so its size is what its C--
//! code needs, and C code, which has no checks, never runs on another thread's page.
//!
//! Under `--threads green` the thread library's calls (`sthread_*` but `sthread_exit`) go
//! through the library stub of green threads instead (`stackrt_lookahead_libcall`, see
//! [`super::lookahead`], "C calls of green threads"): the call runs on the worker's handler
//! stack, and a switch the library makes saves the thread's context on its own stack below the
//! stub's words ([`callgraph::libcall_budget`] bytes, which the entry check counts as the
//! call's pushes). `sthread_exit`, which switches away for good, is called on the thread's
//! stack with [`callgraph::THREAD_EXIT_BUDGET`] bytes counted.
//!
//! Under `--race` on OS threads the detector's entries (`__stackrt_race_*`) are C calls like
//! any other, through the C-call trampoline. Under green threads they are called on the
//! thread's own stack, as under every other mechanism (the deterministic scheduler's decisions
//! and relaxed replay's waits switch green threads inside them, which the C-call trampoline
//! cannot), with the C extern budget ([`callgraph::DEFAULT_EXTERN_BUDGET_64`]) counted as
//! their pushes and frames aligned to 16 bytes for them. That budget makes every function
//! that touches shared memory need 8 KiB below its stack pointer, so a recursion on a small
//! stack overflows at every level and borrows 8 KiB each time: on OS threads, where nothing
//! switches inside the detector, the trampoline keeps a thread's need what its C-- code
//! pushes (the thesis's `realworld_multi` with 64 threads on `stacksizeof` stacks borrowed
//! 12 MiB at once and outgrew an 8 MiB `main` stack on i686).
//!
//! # The lending margin
//!
//! A thread's stack lends pages only below its *floor*, the lowest address it may still use.
//! A thread parked in a thread-library call, or running on pages, stops at a stack pointer
//! `s`; when it goes on, the functions it returns to may push up to their own `P` bytes (and
//! the check's slack) below the stack pointer they had, which can lie below `s`. So the
//! runtime puts the floor [`MARGIN_SYMBOL`] bytes below `s`: the largest `P + 16` of the
//! program, `P` including what unchecked callees need (each function's pushes were counted by
//! its own entry check, against the limit of the moment, not against pages lent later).
//!
//! # Frames
//!
//! Nothing that needs the C ABI's 16-byte alignment runs on an MTSS stack, so frames are
//! aligned to a word only, as under green `lookahead`. The exception is `sthread_exit` under
//! green threads, called on the thread's stack: it aligns the stack pointer first.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::fmt::Write;

use regalloc2::PReg;

use super::{sub_sp, CallSite, CalleeCleanup, FrameInfo, Mechanism};
use crate::callgraph;
use crate::emit::{regs, EmitError, EmitOptions, Target};
use crate::lower::LoweredProgram;

/// ABI id of `mtss` (`stackrt::base::abi::ABI_MTSS`).
pub const ABI_MTSS: u32 = 8;

/// The paper's default page: 128 bytes.
pub const DEFAULT_PAGE_SIZE: u32 = 128;

/// The runtime's overflow handler (`stackrt::mech::arch::*_mtss`).
pub const OVERFLOW_HANDLER: &str = "stackrt_mtss_overflow";

/// The thread register: `rbp`/`ebp`, the address of the running thread's record, whose first
/// word is the limit the entry checks compare against.
pub const THREAD_REGISTER: u8 = regs::RBP;

/// Bytes below the checked room that stay free besides: the overflow handler's return address
/// (and the i686 handler's alignment).
pub const CHECK_SLACK: u32 = 16;

/// The largest check bias (module docs, "The check bias"): a paper page. A larger bias would
/// make short checks of larger functions, but every native stack and every grant of pages
/// would keep that many bytes unused.
pub const BIAS_CAP: u32 = 128;

/// Bytes of the thread's stack a C call uses below the arguments it pushed: the trampoline's
/// words ([`super::ccall::CCALL_STACK`]).
const C_CALL_WORDS: u32 = super::ccall::CCALL_STACK;

/// The program's lending margin (module docs, "The lending margin"), a `u32` in bytes.
/// Mirrors `stackrt::base::abi::MTSS_MARGIN_SYMBOL`.
pub const MARGIN_SYMBOL: &str = "__cmm_mtss_margin";

/// Checks that a page size (`--chunk-size` under `mtss`) is one the runtime accepts: a power
/// of two from 16 bytes to 64 KiB (the paper measured 32 to 512).
pub fn validate_page_size(bytes: u64) -> Result<u32, String> {
    if !(16..=65536).contains(&bytes) || !bytes.is_power_of_two() {
        return Err(format!(
            "page size {bytes} must be a power of two between 16 and 65536 bytes"
        ));
    }
    Ok(bytes as u32)
}

/// The stateless face of the mechanism ([`super::by_kind`]): name, ABI id, reserved register
/// and sequences whose entry checks count the frame alone. [`emit_program`] prints with
/// [`Mtss`], which adds every function's pushes.
pub struct MtssBase;

impl Mechanism for MtssBase {
    fn name(&self) -> &'static str {
        "mtss"
    }
    fn abi_id(&self) -> u32 {
        ABI_MTSS
    }
    fn reserved_regs(&self, _target: Target) -> Vec<PReg> {
        vec![regs::gpr(THREAD_REGISTER)]
    }
    fn entry_arg_offset(&self, target: Target) -> u32 {
        CalleeCleanup.entry_arg_offset(target)
    }
    fn frame_align(&self, target: Target) -> u32 {
        target.slot()
    }
    fn prologue(&self, f: &FrameInfo, out: &mut String) {
        entry_check(f, f.frame_size + CHECK_SLACK, 0, false, out);
        sub_sp(f.target, f.frame_size, out);
    }
    fn epilogue(&self, f: &FrameInfo, out: &mut String) {
        CalleeCleanup.epilogue(f, out);
    }
    fn call_prefix(&self, c: &CallSite, out: &mut String) -> u32 {
        CalleeCleanup.call_prefix(c, out)
    }
    fn call_suffix(&self, c: &CallSite, out: &mut String) {
        CalleeCleanup.call_suffix(c, out);
    }
    fn extern_call(&self, c: &CallSite, out: &mut String) {
        super::ccall::call_on_handler_stack(c, out);
    }
}

/// The mechanism as [`emit_program`] prints with it: the first pass records every function's
/// frame and largest pushes; the second prints the entry checks with their room.
struct Mtss {
    /// Per function symbol: the room its entry check tests, or `None` for a function without
    /// a check (module docs, "Functions without a check"); the map is absent in the first pass.
    room: Option<HashMap<String, Option<u32>>>,
    /// The program's check bias (module docs, "The check bias"); 0 in the first pass.
    bias: u32,
    /// Functions some call may enter past their check (module docs, "The check before the
    /// pushes"): the label there is aligned.
    early_targets: HashSet<String>,
    /// The program runs green threads: the thread library's calls go through the library stub.
    green: bool,
    /// `--race`: under green threads the detector's entries are called on the thread's stack (module
    /// docs).
    race: bool,
    state: RefCell<State>,
}

/// What the first pass records while it prints.
#[derive(Default)]
struct State {
    /// The function being printed.
    current: String,
    /// Per function symbol: its frame `S` and the most bytes one of its calls pushes.
    frames: HashMap<String, (u32, u32)>,
    /// Per function symbol: its calls of C-- functions, callee and bytes pushed.
    calls: HashMap<String, Vec<(String, u32)>>,
    /// The call being printed compared before its pushes ([`Mtss::compares_early`]).
    early: bool,
}

impl Mtss {
    /// Whether a call of `c.callee` compares the stack pointer before its pushes (module docs,
    /// "The check before the pushes"): the callee has a check, its room and the call's pushes
    /// are within the bias, and the pushes keep the flags.
    fn compares_early(&self, c: &CallSite) -> bool {
        let pushed = c.arg_bytes + c.target.slot();
        let room = self
            .room
            .as_ref()
            .and_then(|r| r.get(c.callee).copied().flatten());
        c.pushes_keep_flags && room.is_some_and(|room| room + pushed <= self.bias)
    }

    fn note_pushes(&self, bytes: u32) {
        let mut st = self.state.borrow_mut();
        let cur = st.current.clone();
        if let Some(e) = st.frames.get_mut(&cur) {
            e.1 = e.1.max(bytes);
        }
    }
}

impl Mechanism for Mtss {
    fn name(&self) -> &'static str {
        MtssBase.name()
    }
    fn abi_id(&self) -> u32 {
        MtssBase.abi_id()
    }
    fn reserved_regs(&self, target: Target) -> Vec<PReg> {
        MtssBase.reserved_regs(target)
    }
    fn entry_arg_offset(&self, target: Target) -> u32 {
        MtssBase.entry_arg_offset(target)
    }
    fn frame_align(&self, target: Target) -> u32 {
        if self.race && self.green {
            // The detector's entries are C functions called on the thread's stack.
            CalleeCleanup.frame_align(target)
        } else {
            MtssBase.frame_align(target)
        }
    }
    fn prologue(&self, f: &FrameInfo, out: &mut String) {
        {
            let mut st = self.state.borrow_mut();
            st.current = f.symbol.to_string();
            st.frames.insert(f.symbol.to_string(), (f.frame_size, 0));
        }
        let room = match self.room.as_ref().and_then(|r| r.get(f.symbol)) {
            Some(room) => *room,
            None => Some(f.frame_size + CHECK_SLACK),
        };
        if let Some(room) = room {
            let align = self.early_targets.contains(f.symbol);
            entry_check(f, room, self.bias, align, out);
        } else {
            let _ = writeln!(
                out,
                "\t# mtss: no check (its callers' checks hold its need)"
            );
        }
        sub_sp(f.target, f.frame_size, out);
    }
    fn epilogue(&self, f: &FrameInfo, out: &mut String) {
        MtssBase.epilogue(f, out);
    }
    fn call_prefix(&self, c: &CallSite, out: &mut String) -> u32 {
        if self.compares_early(c) {
            let (sp, tr, word) = match c.target {
                Target::X86_64 => ("rsp", "rbp", "qword"),
                Target::I686 => ("esp", "ebp", "dword"),
            };
            let _ = writeln!(
                out,
                "\tcmp {sp}, {word} ptr [{tr}]\t# mtss: {}'s check, before the pushes",
                c.callee
            );
            self.state.borrow_mut().early = true;
        }
        MtssBase.call_prefix(c, out)
    }
    fn call_suffix(&self, c: &CallSite, out: &mut String) {
        let pushed = c.arg_bytes + c.target.slot();
        self.note_pushes(pushed);
        if std::mem::take(&mut self.state.borrow_mut().early) {
            // Failed: the callee's own check fails too (its stack pointer is lower still) and
            // calls the overflow handler; passed: past the callee's check.
            let _ = writeln!(out, "\tjb {}", c.callee);
            let _ = writeln!(out, "\tjmp .Lmt_{}_go", c.callee);
            let _ = writeln!(out, "{}:", c.return_label);
            let mut st = self.state.borrow_mut();
            let cur = st.current.clone();
            st.calls
                .entry(cur)
                .or_default()
                .push((c.callee.to_string(), pushed));
            return;
        }
        {
            let mut st = self.state.borrow_mut();
            let cur = st.current.clone();
            st.calls
                .entry(cur)
                .or_default()
                .push((c.callee.to_string(), pushed));
        }
        MtssBase.call_suffix(c, out);
    }
    fn extern_call(&self, c: &CallSite, out: &mut String) {
        let library = c.callee.starts_with(callgraph::THREAD_LIBRARY_PREFIX);
        if self.green && c.callee.starts_with(crate::race::ENTRY_PREFIX) {
            // On the thread's stack, with the C extern budget: the deterministic scheduler's
            // decisions and relaxed replay's waits switch green threads inside them.
            let budget = callgraph::default_extern_budget(c.target.slot());
            self.note_pushes(c.arg_bytes + budget + 16);
            let _ = writeln!(out, "\tcall {}", c.callee);
        } else if self.green && c.callee == callgraph::THREAD_EXIT {
            // Never returns: its pushes are its budget on the thread's stack.
            self.note_pushes(c.arg_bytes + callgraph::THREAD_EXIT_BUDGET + 16);
            super::lookahead::exit_aligned(c, out);
        } else if self.green && library {
            self.note_pushes(c.arg_bytes + callgraph::libcall_budget(c.target.slot()));
            super::lookahead::green_libcall(c, out);
        } else {
            // An x87 result is stored through 8 bytes of the stack after the call (i686).
            self.note_pushes(c.arg_bytes.max(8) + C_CALL_WORDS);
            MtssBase.extern_call(c, out);
        }
    }
}

/// The entry check (see the module docs) of a function needing `room` bytes, against the limit
/// word biased by `bias`, and, out of line, the call of the overflow handler. Its labels are
/// named after the function (unique in the file).
/// `align`: calls enter past the check (module docs, "The check before the pushes"), at a label
/// aligned to 16 bytes (x86-64, `deep_repeat.cm` 8 deep: 1.10x the time of the entry check
/// with the label where the check ends, 0.94x aligned).
fn entry_check(f: &FrameInfo, room: u32, bias: u32, align: bool, out: &mut String) {
    let (sp, tr, scratch, scratch32, args32, word) = match f.target {
        Target::X86_64 => ("rsp", "rbp", "r11", "r11d", "r10d", "qword"),
        Target::I686 => ("esp", "ebp", "ecx", "ecx", "edx", "dword"),
    };
    let l = f.symbol;
    if room <= bias {
        let _ = writeln!(
            out,
            "\tcmp {sp}, {word} ptr [{tr}]\t# mtss: room {room}, within the bias {bias}"
        );
    } else {
        let _ = writeln!(
            out,
            "\tlea {scratch}, [{sp} - {}]\t# mtss: room {room}, bias {bias}",
            room - bias
        );
        let _ = writeln!(
            out,
            "\tcmp {scratch}, {word} ptr [{tr}]\t# the thread's limit + bias"
        );
    }
    let _ = writeln!(out, "\tjb .Lmt_{l}_ovf");
    if align {
        out.push_str("\t.p2align 4\n");
    }
    let _ = writeln!(out, ".Lmt_{l}_go:");
    out.push_str("\t.subsection 1\n");
    let _ = writeln!(out, ".Lmt_{l}_ovf:");
    let _ = writeln!(out, "\tmov {scratch32}, {room}");
    let _ = writeln!(out, "\tmov {args32}, {}", f.arg_bytes);
    let _ = writeln!(out, "\tcall {OVERFLOW_HANDLER}");
    let _ = writeln!(out, "\tjmp .Lmt_{l}_go");
    out.push_str("\t.subsection 0\n");
}

/// The program's check bias (module docs, "The check bias"): the largest room of a checked
/// function, or of a checked callee plus a call's pushes (module docs, "The check before the
/// pushes"), within [`BIAS_CAP`]; 0 if none.
fn check_bias(
    room: &HashMap<String, Option<u32>>,
    calls: &HashMap<String, Vec<(String, u32)>>,
) -> u32 {
    let at_calls = calls
        .values()
        .flatten()
        .filter_map(|(callee, pushed)| Some(room.get(callee).copied().flatten()? + pushed));
    room.values()
        .flatten()
        .copied()
        .chain(at_calls)
        .filter(|&r| r <= BIAS_CAP)
        .max()
        .unwrap_or(0)
}

/// Emits the whole program under `mtss`: a first pass learns every function's frame and
/// largest pushes, the second prints the entry checks with them; `__cmm_chunk_size` holds the
/// page size (the runtime's, `--chunk-size`).
pub fn emit_program(
    p: &LoweredProgram,
    opts: &EmitOptions,
    page_size: u32,
) -> Result<String, EmitError> {
    validate_page_size(page_size as u64).map_err(|message| EmitError {
        function: None,
        message,
    })?;
    let green = crate::lower::is_green_threads(p);
    let race = p
        .externs
        .iter()
        .any(|e| e.name.starts_with(crate::race::ENTRY_PREFIX));
    let first = Mtss {
        room: None,
        bias: 0,
        early_targets: HashSet::new(),
        green,
        race,
        state: RefCell::new(State::default()),
    };
    crate::emit::print_all(p, opts.target, &first)?;
    let st = first.state.into_inner();
    let taken = crate::emit::address_taken(p);
    let entered: HashSet<&str> = p
        .functions
        .iter()
        .zip(&taken)
        .filter(|(f, &t)| t || f.name == "main")
        .map(|(f, _)| f.symbol.as_str())
        .collect();
    let plan = plan_checks(&st.frames, &st.calls, &entered);
    let margin = plan.margin;
    let bias = check_bias(&plan.room, &st.calls);
    // Every callee a call may enter past its check; a call whose pushes clobber the flags
    // (an `f64` from a register) does not, but its callee's label is aligned all the same.
    let early_targets = st
        .calls
        .values()
        .flatten()
        .filter(|(callee, pushed)| {
            plan.room
                .get(callee)
                .copied()
                .flatten()
                .is_some_and(|room| room + pushed <= bias)
        })
        .map(|(callee, _)| callee.clone())
        .collect();
    let mech = Mtss {
        room: Some(plan.room),
        bias,
        early_targets,
        green,
        race,
        state: RefCell::new(State::default()),
    };
    let printed = crate::emit::print_all(p, opts.target, &mech)?;
    let mut out =
        crate::emit::assemble_printed(p, opts, &mech, &printed, Some((page_size, "page size")));
    let _ = writeln!(
        out,
        "\t.section .rodata\n\t.globl {MARGIN_SYMBOL}\n\t.p2align 2\n\t.type {MARGIN_SYMBOL}, \
         @object\n\t.size {MARGIN_SYMBOL}, 4\n{MARGIN_SYMBOL}:\n\t.long {margin}"
    );
    super::lookahead::emit_check_bias(bias, &mut out);
    Ok(out)
}

/// The most bytes a function without a check may need below its entry (module docs,
/// "Functions without a check"): its callers' checks test that much more. Small: a small
/// function's check is a large part of it; a larger one's is not, and removing it moves code
/// (with 256, `sha1` lost its check too and the security workload ran 1.22x traditional's time
/// on i686 against 0.97x with every check, measured 2026-11-27: code placement).
pub const UNCHECKED_NEED: u32 = 64;

/// Which functions have entry checks and with what room, and the lending margin.
#[derive(Debug, PartialEq)]
struct Plan {
    /// Per function symbol: its check's room, or `None` for no check.
    room: HashMap<String, Option<u32>>,
    /// The lending margin (module docs): the most any function may use below its frame.
    margin: u32,
}

/// Plans the entry checks (module docs, "Functions without a check") from every function's
/// frame and largest pushes (`frames`), its calls of C-- functions with their pushes
/// (`calls`), and the functions entered from outside the program's calls (`entered`: `main`,
/// functions whose address is taken), which always check.
fn plan_checks(
    frames: &HashMap<String, (u32, u32)>,
    calls: &HashMap<String, Vec<(String, u32)>>,
    entered: &HashSet<&str>,
) -> Plan {
    let mut planner = Planner {
        frames,
        calls,
        entered,
        need: HashMap::new(),
        checked: HashSet::new(),
        on_path: HashSet::new(),
    };
    let mut names: Vec<&str> = frames.keys().map(String::as_str).collect();
    names.sort_unstable();
    for f in &names {
        planner.decide(f);
    }
    let mut margin = 0;
    let room = names
        .iter()
        .map(|&f| {
            let extent = planner.below(f);
            if planner.need.contains_key(f) {
                margin = margin.max(extent);
                (f.to_string(), None)
            } else {
                margin = margin.max(extent + CHECK_SLACK);
                (f.to_string(), Some(frames[f].0 + extent + CHECK_SLACK))
            }
        })
        .collect();
    Plan { room, margin }
}

/// [`plan_checks`]'s walk of the call graph.
struct Planner<'a> {
    frames: &'a HashMap<String, (u32, u32)>,
    calls: &'a HashMap<String, Vec<(String, u32)>>,
    entered: &'a HashSet<&'a str>,
    /// The bytes an unchecked function uses below its entry.
    need: HashMap<&'a str, u32>,
    /// Functions that check.
    checked: HashSet<&'a str>,
    /// The functions of the walk's current path.
    on_path: HashSet<&'a str>,
}

impl<'a> Planner<'a> {
    fn calls_of(&self, f: &str) -> &'a [(String, u32)] {
        self.calls.get(f).map_or(&[][..], Vec::as_slice)
    }

    /// Below `f`'s frame: the most one of its calls pushes, with what an unchecked callee
    /// needs after it.
    fn below(&self, f: &str) -> u32 {
        let pushes = self.frames.get(f).map_or(0, |&(_, p)| p);
        self.calls_of(f)
            .iter()
            .map(|(g, pushed)| pushed + self.need.get(g.as_str()).copied().unwrap_or(0))
            .max()
            .unwrap_or(0)
            .max(pushes)
    }

    /// Decides `f` once its callees are decided (depth first; a function found on the
    /// current path closes a cycle and checks, so every cycle has a check).
    fn decide(&mut self, f: &'a str) {
        if self.need.contains_key(f) || self.checked.contains(f) {
            return;
        }
        if !self.on_path.insert(f) {
            self.checked.insert(f);
            return;
        }
        for (g, _) in self.calls_of(f) {
            self.decide(g);
        }
        self.on_path.remove(f);
        if self.checked.contains(f) {
            return;
        }
        let Some(&(frame, _)) = self.frames.get(f) else {
            self.checked.insert(f);
            return;
        };
        let n = frame + self.below(f);
        if self.entered.contains(f) || n > UNCHECKED_NEED {
            self.checked.insert(f);
        } else {
            self.need.insert(f, n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(frames: &[(&str, u32, u32)], calls: &[(&str, &str, u32)], entered: &[&str]) -> Plan {
        let frames = frames
            .iter()
            .map(|&(f, s, p)| (f.to_string(), (s, p)))
            .collect();
        let mut by_caller: HashMap<String, Vec<(String, u32)>> = HashMap::new();
        for &(f, g, pushed) in calls {
            by_caller
                .entry(f.to_string())
                .or_default()
                .push((g.to_string(), pushed));
        }
        plan_checks(&frames, &by_caller, &entered.iter().copied().collect())
    }

    /// Hand-computed: `main` (frame 8) calls `a` pushing 16; `a` (frame 8) calls `b` pushing
    /// 24 and `printf` pushing 40; `b` (frame 16) is a leaf. `b` needs 16, `a` 8 + max(24 +
    /// 16, 40) = 48, so neither checks and `main`'s room is 8 + (16 + 48) + 16 = 88. The
    /// margin is the largest extent below a frame: `main`'s 64 + 16.
    #[test]
    fn unchecked_callees_are_counted_by_their_callers() {
        let p = plan(
            &[("main", 8, 16), ("a", 8, 40), ("b", 16, 0)],
            &[("main", "a", 16), ("a", "b", 24)],
            &["main"],
        );
        assert_eq!(p.room["b"], None);
        assert_eq!(p.room["a"], None);
        assert_eq!(p.room["main"], Some(88));
        assert_eq!(p.margin, 80);
        // With `b` 8 bytes larger, `a` needs 72, more than `UNCHECKED_NEED`: `a` checks.
        let p = plan(
            &[("main", 8, 16), ("a", 8, 40), ("b", 40, 0)],
            &[("main", "a", 16), ("a", "b", 24)],
            &["main"],
        );
        assert_eq!(p.room["a"], Some(8 + 24 + 40 + 16));
        assert_eq!(p.room["main"], Some(8 + 16 + 16));
    }

    /// A cycle keeps a check on it (here `f`, the first reached); a function whose address is
    /// taken keeps its check; a need over `UNCHECKED_NEED` keeps the check.
    #[test]
    fn cycles_entries_and_large_needs_keep_their_checks() {
        let p = plan(
            &[
                ("main", 0, 16),
                ("f", 8, 16),
                ("g", 8, 16),
                ("entry", 0, 0),
                ("big", UNCHECKED_NEED, 8),
            ],
            &[
                ("main", "f", 16),
                ("f", "g", 16),
                ("g", "f", 16),
                ("main", "big", 8),
            ],
            &["main", "entry"],
        );
        // `g` calls the checked `f`: 8 + 16 = 24 below its entry, unchecked.
        assert_eq!(p.room["g"], None);
        // `f`, on the cycle, checks, counting `g`'s 24 after the 16 of its call.
        assert_eq!(p.room["f"], Some(8 + 16 + 24 + 16), "on the cycle: checks");
        assert_eq!(p.room["entry"], Some(16), "address taken");
        assert_eq!(p.room["big"], Some(UNCHECKED_NEED + 8 + 16));
        // `main` calls the checked `f` and `big`: its largest push, 16.
        assert_eq!(p.room["main"], Some(16 + 16));
    }

    /// Hand-computed: checked rooms 40, 88, 128 and 200 and an unchecked function give the
    /// bias 128 (200 is over the cap); rooms all over the cap give 0.
    #[test]
    fn the_bias_is_the_largest_room_within_the_cap() {
        let rooms = |v: &[Option<u32>]| {
            v.iter()
                .enumerate()
                .map(|(i, r)| (format!("f{i}"), *r))
                .collect::<HashMap<_, _>>()
        };
        let none = HashMap::new();
        let r = rooms(&[Some(40), Some(88), Some(BIAS_CAP), Some(200), None]);
        assert_eq!(check_bias(&r, &none), BIAS_CAP);
        assert_eq!(check_bias(&rooms(&[Some(40), Some(88), None]), &none), 88);
        assert_eq!(check_bias(&rooms(&[Some(BIAS_CAP + 8), None]), &none), 0);
        // A call of f0 (room 40) pushing 24 bytes counts 64; of f1 (56) pushing 48, 104; of
        // f1 pushing 80, 136, over the cap; of f2 (no check), nothing.
        let calls = |v: &[(&str, u32)]| {
            HashMap::from([(
                "caller".to_string(),
                v.iter()
                    .map(|(c, p)| (c.to_string(), *p))
                    .collect::<Vec<_>>(),
            )])
        };
        let r = rooms(&[Some(40), Some(56), None]);
        assert_eq!(check_bias(&r, &calls(&[("f0", 24)])), 64);
        assert_eq!(check_bias(&r, &calls(&[("f0", 8), ("f1", 48)])), 104);
        assert_eq!(check_bias(&r, &calls(&[("f1", 80)])), 56);
        assert_eq!(check_bias(&r, &calls(&[("f2", 100)])), 56);
    }

    /// A call whose callee's room and pushes fit the bias compares before the pushes and jumps
    /// past the callee's check; otherwise the plain call.
    #[test]
    fn calls_within_the_bias_compare_before_the_pushes() {
        let m = Mtss {
            early_targets: HashSet::new(),
            room: Some(HashMap::from([
                ("cmm_f".to_string(), Some(48)),
                ("cmm_g".to_string(), Some(100)),
                ("cmm_h".to_string(), None),
            ])),
            bias: 64,
            green: false,
            race: false,
            state: RefCell::new(State::default()),
        };
        let site = |callee, keep| CallSite {
            target: Target::X86_64,
            callee,
            arg_bytes: 8,
            return_label: ".Lf0ret1",
            pushes_keep_flags: keep,
        };
        let mut s = String::new();
        m.call_prefix(&site("cmm_f", true), &mut s);
        s.push_str("\tpush r8\n");
        m.call_suffix(&site("cmm_f", true), &mut s);
        assert_eq!(
            s,
            "\tcmp rsp, qword ptr [rbp]\t# mtss: cmm_f's check, before the pushes\n\
             \tpush offset .Lf0ret1\n\tpush r8\n\tjb cmm_f\n\tjmp .Lmt_cmm_f_go\n.Lf0ret1:\n"
        );
        // The callee's label past its check is aligned.
        let f = FrameInfo {
            target: Target::X86_64,
            symbol: "cmm_f",
            frame_size: 8,
            arg_bytes: 8,
        };
        let mut s = String::new();
        entry_check(&f, 48, 64, true, &mut s);
        assert!(
            s.starts_with(
                "\tcmp rsp, qword ptr [rbp]\t# mtss: room 48, within the bias 64\n\
                 \tjb .Lmt_cmm_f_ovf\n\t.p2align 4\n.Lmt_cmm_f_go:\n"
            ),
            "{s}"
        );
        for (callee, keep) in [("cmm_f", false), ("cmm_g", true), ("cmm_h", true)] {
            let mut s = String::new();
            m.call_prefix(&site(callee, keep), &mut s);
            m.call_suffix(&site(callee, keep), &mut s);
            assert!(!s.contains("cmp"), "{callee}: {s}");
            assert!(s.contains(&format!("\tjmp {callee}\n")), "{callee}: {s}");
        }
    }

    /// A room within the bias (the boundary included) compares the stack pointer itself; a
    /// larger room subtracts only what exceeds the bias; the handler always gets the room.
    #[test]
    fn short_checks_within_the_bias() {
        for (t, sp, tr, scratch) in [
            (Target::X86_64, "rsp", "rbp", "r11"),
            (Target::I686, "esp", "ebp", "ecx"),
        ] {
            let f = FrameInfo {
                target: t,
                symbol: "cmm_f",
                frame_size: 24,
                arg_bytes: 8,
            };
            let lines = |room, bias| {
                let mut out = String::new();
                entry_check(&f, room, bias, false, &mut out);
                out.lines()
                    .map(|l| l.split('#').next().unwrap().trim().to_string())
                    .collect::<Vec<_>>()
            };
            let short = lines(88, 88);
            assert_eq!(short[0], format!("cmp {sp}, {} ptr [{tr}]", t_word(t)));
            assert_eq!(short[1], "jb .Lmt_cmm_f_ovf");
            assert!(
                short.contains(&format!("mov {}, 88", scratch32(t))),
                "{short:?}"
            );
            let long = lines(96, 88);
            assert_eq!(long[0], format!("lea {scratch}, [{sp} - 8]"));
            assert_eq!(long[1], format!("cmp {scratch}, {} ptr [{tr}]", t_word(t)));
            assert!(
                long.contains(&format!("mov {}, 96", scratch32(t))),
                "{long:?}"
            );
            assert_eq!(lines(96, 0)[0], format!("lea {scratch}, [{sp} - 96]"));
        }
    }

    fn t_word(t: Target) -> &'static str {
        match t {
            Target::X86_64 => "qword",
            Target::I686 => "dword",
        }
    }

    fn scratch32(t: Target) -> &'static str {
        match t {
            Target::X86_64 => "r11d",
            Target::I686 => "ecx",
        }
    }
}
