//! Mechanism `lookahead`: linked stack chunks with look-ahead overflow detection (thesis 3.4.3,
//! after Capriccio): checkpoint call sites test for room before the call and, when the reserve
//! would not fit, make the call on a newly linked chunk and unlink it as soon as the call
//! returns. Which call sites are checkpoints, and what they reserve, comes from
//! [`crate::callgraph`], fed with this stage's real frame sizes (so the program is emitted in
//! two passes, see [`emit_program`]).
//!
//! On OS threads the plan is made for the program with its small self-recursions unrolled
//! into rings of four copies ([`crate::unroll`], see [`unrolled`] for why not under green
//! threads): only the ring's back edge is a checkpoint, so a recursion tests for room once
//! every four levels, with a reserve of four frames, instead of on every call.
//!
//! # Chunk register
//!
//! The chunk register holds the address of the current chunk's header (stackrt's
//! `ChunkHeader`, word `i` at `i * P`: 0 thread stack, 1 previous SP, 2 previous header,
//! 3 limit, 4 resume): `ebp` on i686 as in the thesis, `rbp` on x86-64 (the same register; it is
//! callee-saved in both C ABIs, so C functions called on a chunk keep it, and it has no fixed
//! role in the C-- convention). It is reserved: never allocated.
//!
//! # Sequences, side by side with the thesis
//!
//! Calls and returns are `callee-cleanup`'s (paper 4.2, [`super::CalleeCleanup`]): the caller
//! pushes the return address, then the arguments, and jumps; the callee (listing 3.11's `sub
//! esp, S` at entry) removes its frame, its arguments and the return address and jumps back
//! through it (`add rsp, S + A + 8; jmp [rsp - 8]`; on i686 `mov ecx, [esp + S + A]; add esp,
//! S + A + 4; jmp ecx`). The thesis's listings use `call`/`ret`; the paper's conclusions
//! suggest combining the look-ahead checkpoints with callee-cleanup sequences, and they pay:
//! deep down, once the return stack buffer is exhausted, an indirect `jmp` through the saved
//! address is predicted where a `ret` is not (the harness's `call_depth`). A call site that is
//! not a checkpoint is the `callee-cleanup` one. A checkpoint with reserve `R` (bytes below the
//! caller's SP: return address, arguments and the callee's longest path) and `A` bytes pushed
//! (the return address and the arguments):
//!
//! ```text
//!  thesis listing 3.10                        this stage (i686; x86-64: r11, r10, rsp, rbp)
//!  MOV  EAX, ESP                              push offset .Lret                (the return)
//!  MOV  EDX, ESP                              push argN ... push arg1          (A bytes in all)
//!  ADD  EDX, CHUNK - LONGEST_PATH - 16        lea  ecx, [esp - (R - A + 16 - B)]
//!  CMP  EDX, EBP                              cmp  ecx, dword ptr [ebp + 16]   ; limit + B
//!  JGE  .L1                                   jae  callee                      ; room: the call
//!  CALL STAMEX_OVERFLOW_HANDLER               jmp  .LlaN_ovf                   ; out of line
//! .L1: PUSH arg1 ... PUSH argn              .Lret:            ; x86-64: jb .LlaN_ovf; jmp callee
//!  CALL callee                              .LlaN_back:
//!  ADD  ESP, args_size                        ; in `.subsection 1` (after all functions):
//!  CMP  EBP, ESP                            .LlaN_ovf:  mov ecx, R ; mov edx, A
//!  JNE  .L2                                             call stackrt_lookahead_overflow_cmm
//!  CALL STAMEX_UNDERFLOW_HANDLER                        mov  dword ptr [esp + A - 4], offset .LlaN_unl
//! .L2:                                                  jmp  callee        ; on the new chunk
//!                                                     .LlaN_unl:           ; esp = ebp again
//!                                                       mov  esp, dword ptr [ebp + 4]
//!                                                       mov  ecx, dword ptr [ebp + 0]  ; T
//!                                                       mov  dword ptr [ebp + 0], -1
//!                                                       mov  ebp, dword ptr [ebp + 8]
//!                                                       sub  dword ptr [ecx], 1  ; budget
//!                                                       jnz  .LlaN_back
//!                                                       call stackrt_lookahead_reclaim
//!                                                       jmp  .LlaN_back
//! ```
//!
//! The overflow handler copies the `A` pushed bytes to the new chunk; the copy of the return
//! address (the highest word) is replaced by the unlink's label, so the callee, returning
//! through it, lands on the unlink, which restores the caller's SP (`prev_sp`, the SP before
//! the pushes: what callee-cleanup's return leaves) and goes on at the caller's return label.
//! The chunk's first frame thus returns by a jump predicted per call site, not by a `ret`
//! that every underflow would mispredict. Measured with the thesis-size Unbalanced Binary
//! Tree, one thread (2-core AMD EPYC under load, 2026-11-26, paired runs): 0.57x the
//! `call`/`ret` sequences' time on x86-64 and 0.59x on i686, and 1.00x and 0.91x
//! `callee-cleanup`'s.
//!
//! The semantics are the thesis's: overflow iff the reserve does not fit above the chunk's
//! limit (`SP - R < limit + 16`, stackrt's `CHECK_SLACK` of 16 bytes leaves room for the
//! handler's return address, like the thesis's `- 16`); then a new chunk is linked and the call
//! runs on it; when the call has returned to the new chunk's header, the chunk is unlinked.
//! Differences:
//!
//! * The underflow test is gone from the common path. The thesis tests `SP == EBP` after every
//!   checkpoint call, because the call may have been made on a new chunk. Here only the
//!   out-of-line path makes calls on a new chunk (a chunk is linked nowhere else), so that path
//!   knows its call ends at the new chunk's header and unlinks it unconditionally; the common
//!   path's call never changes chunks. Deep recursion, where every call is a checkpoint, pays
//!   three instructions per call for the test and nothing for the underflow; with rings (above),
//!   one call in four does.
//! * The underflow is inline and usually makes no call: `esp = prev_sp`, header word 0 = -1
//!   (stackrt's `UNLINKED`: the runtime does the bookkeeping, cache and statistics, later),
//!   `ebp = prev_header`. Any call made while a deep recursion unwinds costs the remaining
//!   returns their prediction on the machines measured (a C call every 8192 levels on the way
//!   up made `traditional` 1.5-2x slower, `cargo xtask experiments --only unwind_call`); with the
//!   thesis's underflow handler call, the repeated deep recursion ran 2.5x slower under
//!   `lookahead` than under `traditional`.
//! * The unlinked chunks are reclaimed on a budget. Header word 0 held the thread stack `T`
//!   (kept in the scratch register `ecx` / `r11` before the mark overwrites it), and the 32-bit
//!   word at `T` is the thread's *reclaim budget*: each inline unlink decrements it, and the
//!   one that reaches zero calls `stackrt_lookahead_reclaim` ([`RECLAIM_HANDLER`]), which
//!   gives the marked chunks back (to the thread's cache and the shared pool) and refills the
//!   budget. Without it a thread that unwound a deep recursion would hold all those chunks
//!   until its next overflow (the tree with 64 threads at the thesis's size: 1.8 GB instead of
//!   1.35 GB). The runtime's budget is 8 MiB of chunks (256 of 32 KiB), so the call comes at
//!   most once per 8 MiB of unwinding: a call in the middle of a deep unwind costs return
//!   predictions (with a budget of 16 chunks, a repeated 30,000-deep recursion ran 1.85x
//!   slower on x86-64 and 2.4x on i686; with 256 its 1,000-chunk unwinds show no difference),
//!   and recursions shallower than the budget never make it. A hot split (a loop calling
//!   across one chunk boundary: overflow, unlink, overflow, ...) never calls it either: every
//!   overflow refills the budget. The scratch register is free at the unlink (see
//!   `unlink_chunk`), and the routine preserves every other register, so the call's result in
//!   `eax`/`rax`/`xmm0` survives.
//! * The test comes *after* the pushes, right before the `call`. There every register the call
//!   clobbers is dead (arguments have been pushed; C-- calls pass nothing in registers; the
//!   System V register arguments of C calls are never `r10`/`r11`), so the test needs no
//!   register of its own, and the pushes keep reading spill slots `esp`-relative. The thesis
//!   tests before the pushes and keeps `eax` as a base pointer to the caller's frame instead.
//!   The overflow handler therefore copies the `A` bytes of pushed arguments (and its return
//!   address) to the new chunk; `prev_sp` is the caller's SP before the pushes, as in the
//!   thesis. Since the pushes precede the test, the call graph counts the largest pushes of a
//!   function as part of its frame (`--emit callgraph` shows `frame = P + S + pushes`), so the
//!   room for them was reserved by the checkpoint that entered the caller.
//! * The test compares against a header word, the *check word* `limit + B` (below), instead of
//!   computing `SP + chunk_size - ...` against `ebp`: the same condition, without the
//!   wrap-around the thesis form has for chunks mapped near the top of a 32-bit address space.
//!   Where the distance `R - A + 16` is at most `B`, the `lea` goes: `cmp esp, dword ptr [ebp
//!   + 16]` and the branch.
//! * On i686 the test's branch is the call's jump: `jae callee`, followed by `jmp .LlaN_ovf`,
//!   which only an overflow reaches, so a call takes one branch, as under `callee-cleanup`.
//!   On x86-64 a call keeps `jb .LlaN_ovf` and then `jmp callee`. Measured with
//!   `deep_repeat.cm`, the new form against the two branches, geometric means over 4 code
//!   layouts (`--text-offset` 0, 16, 32, 48) of paired medians of 9 (AMD EPYC Zen 4,
//!   2026-11-28): i686 0.91x at 8 deep, 0.89x at 64, 0.87x at 1,000, 0.88x at 16,384;
//!   x86-64 0.93x, 0.86x and 0.95x at 8, 64 and 1,000 deep but 1.35x at 4,096 and 1.42x at
//!   16,384 (1.01x at 1,000,000), hence the two forms. That cost comes with chunk crossings
//!   (with 1 MiB chunks, none at those depths, the forms run alike): each overflow and
//!   underflow pair took about 0.7 µs more, for no reason the runtime's statistics show. A C
//!   call's checkpoint keeps `jb .LlaN_ovf` before its `call`.
//! * Except where the check word lets the compare be SP's own (below): then the compare comes
//!   *before* the pushes, as in the thesis, and only the branch after them (pushes keep the
//!   flags; a call pushing an `f64` from a register, which takes a `sub`, keeps the compare
//!   after). Reading SP right after pushes costs the common path about a cycle per call
//!   on the AMD EPYC measured (the stack engine's synchronisation): `deep_repeat.cm`
//!   16,384 deep on x86-64, 1.70x `callee-cleanup`'s time with the compare after the pushes,
//!   1.06x before them.
//! * The overflow path is out of line (`.subsection 1`), so the common path is one or two
//!   instructions before the call's conditional jump.
//!
//! # The check word
//!
//! Header word 4 (the MMU mechanisms' `resume`) holds `limit + B` in `lookahead` chunks,
//! written by the runtime at every link; `B`, the program's *check bias*, is the data symbol
//! `__cmm_check_bias` (`stackrt::base::abi::CHECK_BIAS_SYMBOL`). A checkpoint at distance `D =
//! R - A + 16` below its SP (after the pushes) tests `SP - (D - B) < limit + B`, which is the
//! thesis's `SP - D < limit`; when `D <= B` it tests `SP < limit + B` instead: stricter, the
//! exact test of a reserve `R' = A + B - 16`, which is what its overflow stub passes the
//! handler, so the runtime sees every overflow as one of a reserve it can check
//! (`stackrt::chunk::chain`'s "forced" overflow stays exact). The bias ([`check_bias`]) is the
//! largest distance of a checkpoint of the program within a third of a chunk's capacity, so
//! the hottest checkpoints, a recursion's, usually lose the `lea`; a chunk then leaves at most
//! `B` bytes at its low end to the calls that need them (a C call's budget, usually) instead
//! of to frames. A call to a C-- function whose distance from the SP *before* its pushes,
//! `R + 16`, is within `B` compares that SP instead (`cmp esp, [ebp + 16]` before the pushes,
//! the branch after them): the exact test of a reserve `B - 16`, which its stub passes; the bias
//! counts such sites by that distance. Why it pays: with `deep_repeat.cm`'s recursion 8 deep, the checkpoint's third
//! instruction was most of `lookahead`'s extra cost per call over `callee-cleanup` on x86-64
//! (the other part was a register save, see `crate::emit::rename`). Green threads keep `B = 0`
//! and the exact test everywhere: their stacks are sized to their need, and a bias would be
//! slack in each of a million of them.
//!
//! A preemption request poisons the check word (`stackrt::chunk::poison`), never the limit.
//!
//! Calls to C functions are checkpoints too when the analysis says so (a large frame calling
//! `printf` with small chunks). The shared printer emits their call (register arguments, `al`
//! for varargs, the result's conversion), so they keep the thesis's shape: the same test right
//! before `call`, whose out-of-line path links the chunk and jumps back to the `call`, and the
//! underflow test (`cmp esp, ebp; je .LlaN_unf`) after the stack cleanup, whose out-of-line
//! path is the same inline underflow with its reclaim budget. C code preserves `ebp`/`rbp`, so
//! the chunk register survives every C call.
//!
//! # C calls of green threads
//!
//! Under `--threads green` (the program carries `__cmm_threads`, see
//! [`crate::lower::is_green_threads`]) a call to a C function other than the thread library's
//! (`sthread_*`) does not run on the thread's chunk: after the arguments are in place (and the
//! checkpoint's test, if the site is one) the printer's `call f` becomes
//!
//! ```text
//!  i686                                   x86-64
//!  mov  ecx, OFFSET f                     lea  r11, [rip + f]
//!  mov  edx, A        ; stack arg bytes   mov  r10d, A
//!  call stackrt_ccall                     call stackrt_ccall
//! ```
//!
//! and the runtime's trampoline ([`super::ccall::CCALL_TRAMPOLINE`]) copies the `A` bytes of stack arguments
//! to the worker's handler stack, calls `f` there and returns on the thread's stack with `f`'s
//! results, as Go runs system calls and cgo on `g0`. So the call graph gives such a call
//! [`callgraph::GREEN_CCALL_BUDGET`] (16 bytes) instead of the 8 KiB extern budget.
//!
//! Calls into the thread library may switch threads. They run on the handler stack too,
//! through [`LIBCALL_STUB`] (`lea r11, [rip + sthread_f]; call stackrt_lookahead_libcall`,
//! `mov ecx, OFFSET sthread_f` on i686), which makes the switch the library asks for itself,
//! saving the thread's context on the thread's own stack, and repeats the call when the
//! thread is resumed (Go's `mcall`). A thread parked in a mutex or a join thus holds its C--
//! frames and the stub's words ([`callgraph::libcall_budget`], 96 bytes on x86-64 and 48 on i686), not the library's
//! frames. `sthread_exit`, which never returns, is called directly on the thread's stack
//! ([`callgraph::THREAD_EXIT_BUDGET`]).
//!
//! The registers are free at both stubs' calls for the same reason the checkpoint's test needs
//! none (see above); `al` of a variadic call on x86-64 is kept by the trampoline. Under OS
//! threads a C call stays a plain `call` on the chunk, with the 8 KiB budget.
//!
//! # Frames of green threads
//!
//! With every C call on the handler stack, nothing runs on a green thread's chunks that needs
//! the C ABI's 16-byte stack alignment: the trampolines copy stack arguments to the aligned
//! handler stack, and the runtime's own code on a chunk (a deferred switch, see
//! `stackrt::chunk::handler`) aligns the stack itself. So frames are aligned to a word only
//! ([`Mechanism::frame_align`]): a recursion of `f(int, int)` with two saved registers takes
//! 40 bytes a level on x86-64 instead of 48 (Go's frame for the same function is 40). The
//! exceptions: `sthread_exit`, called on the thread's stack, aligns the stack pointer before
//! its call (it never returns; at most 28 bytes of its budget), and under `--race` the
//! detector's entries are called on the thread's stack, so frames keep 16 bytes.
//!
//! # Frames larger than a chunk
//!
//! A reserve may exceed the standard chunk's capacity ([`callgraph::chunk_capacity`]) when a
//! single frame does (a large local array, or an extern call's arguments plus the extern
//! budget in small chunks); the analysis then makes the call a checkpoint, and the overflow
//! handler, given any reserve `R`, links a chunk with room for at least `R` bytes. So every
//! program compiles at every `--chunk-size`.
//!
//! "Room" and "capacity" are meant as in [`callgraph::chunk_capacity`]: the `CHECK_SLACK` bytes
//! above the limit stay free besides. Every call the mechanism's own code makes below a C--
//! frame (the overflow handler's from the test, the reclaim routine's from the unlink, at the
//! caller's SP whose frame and pushes the entering checkpoint reserved) pushes its return
//! address into those bytes, and the runtime routine must switch to the thread stack before
//! it uses more.
//!
//! # Stack-need word
//!
//! Roots (`main`, thread entries) are entered on a fresh first chunk, which must hold the
//! root's arguments and its longest path up to its first checkpoints. Before every function
//! the mechanism emits (through [`Mechanism::stack_need_word`]) its *stack need at entry*:
//!
//! ```text
//!  .p2align 4
//!  .skip 8
//!  .long NEED      # stack need at entry: argument bytes + longest path (u32, at entry - 8)
//!  .long ARGBYTES  # argument bytes (u32, at entry - 4), as under every mechanism
//! cmm_f:
//! ```
//!
//! `NEED` counts from the SP before the arguments are pushed (for a root: the entry bytes plus
//! `LP(root)`, what the analysis reserves for it); the runtime gives the first chunk a capacity
//! of at least `NEED`, with the `CHECK_SLACK` bytes below it as for any reserve. It can exceed
//! the standard capacity, like a reserve. The word is there before every function (any may
//! become a thread entry through its address); other mechanisms leave padding there.
//!
//! # Stack of a lookahead program (i686; x86-64 the same with 8-byte words)
//!
//! ```text
//!  chunk k (older)                               chunk k+1 (linked at a checkpoint)
//!  +---------------------------+ header k        +---------------------------+ header k+1 = ebp
//!  | ...frames...              |                 | return address: .LlaN_unl |   (copied,
//!  | caller's frame (S bytes)  |                 | args of the checkpoint    |    replaced)
//!  +---------------------------+ <- prev_sp      | callee's frame (S bytes)  |
//!  | (free: was the pushed     |    of k+1       | ...deeper frames...       |
//!  |  return and args, copied) |                 +---------------------------+ <- esp
//!  |  ... unused tail ...      |                 |  ... free ...             |
//!  +---------------------------+ limit k         +---------------------------+ limit k+1
//! ```
//!
//! `header k+1` holds `prev_sp` (the caller's SP before its pushes), `prev_header = header k`
//! and the thread stack `T` (above the thread's entry frames; the 32-bit word at `T` is the
//! reclaim budget; the handlers run their Rust code on the OS thread's handler stack, see
//! `stackrt::chunk::handler`).

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt::Write;

use regalloc2::PReg;

use super::{sub_sp, CallSite, CalleeCleanup, FrameInfo, Mechanism};
use crate::callgraph::{
    self, CallGraphConfig, CallGraphInput, CallGraphPlan, ChunkHeaderLayout, FunctionNode,
};
use crate::emit::{regs, EmitError, EmitOptions, Target};
use crate::lower::LoweredProgram;
use cmm_front::typed::Callee;

/// ABI id of `lookahead` (`stackrt::base::abi::ABI_LOOKAHEAD`).
pub const ABI_LOOKAHEAD: u32 = 3;

/// The runtime's overflow handler (`crates/stackrt/src/mech/arch/*`): called by a checkpoint's
/// out-of-line stub with the reserve and the pushed argument bytes. It links a chunk whose
/// capacity is at least the reserve (larger than the standard chunk if need be) and refills
/// the thread's reclaim budget.
pub const OVERFLOW_HANDLER: &str = "stackrt_lookahead_overflow";

/// The overflow handler for checkpoints at calls to C-- functions: the same contract, except
/// that it may clobber every register a C-- call clobbers (C-- calls pass nothing in
/// registers), so on x86-64 it saves none of the System V argument registers and `xmm0-7`
/// that [`OVERFLOW_HANDLER`] keeps for C calls (the hot split's cost). On i686 the two are
/// the same routine.
pub const OVERFLOW_HANDLER_CMM: &str = "stackrt_lookahead_overflow_cmm";

/// The runtime's reclaim routine: called by the inline unlink that spends the thread's reclaim
/// budget (the 32-bit word at the thread stack `T`, header word 0), with the chunk register
/// and SP already back on the previous chunk. It does the bookkeeping of the chunks marked
/// unlinked, refills the budget and returns; it preserves every register but the scratch
/// (`ecx` / `r11`) and the flags.
pub const RECLAIM_HANDLER: &str = "stackrt_lookahead_reclaim";

/// The runtime's thread-library stub of green threads: calls the thread-library function in
/// the scratch register on the worker's handler stack, and makes the context switch the
/// library asks for on the thread's own stack (see the module docs).
pub const LIBCALL_STUB: &str = "stackrt_lookahead_libcall";

/// Labels around the program's compiled code (every function and its out-of-line stubs;
/// mirrors `stackrt::base::abi::CODE_BEGIN_SYMBOL` / `CODE_END_SYMBOL`). Between them the chunk
/// register always holds the running chunk's header, which is what lets the runtime's
/// preemption signal poison that chunk's limit (`stackrt::green::preempt`).
pub const CODE_BEGIN_SYMBOL: &str = "__cmm_code_begin";
/// See [`CODE_BEGIN_SYMBOL`]; placed in `.subsection 2`, after every slow path.
pub const CODE_END_SYMBOL: &str = "__cmm_code_end";

/// The chunk register's hardware encoding: `ebp`/`rbp` on both targets.
pub const CHUNK_REGISTER: u8 = regs::RBP;

/// Largest immediate the stubs load with a 32-bit `mov`, and so the largest reserve or stack
/// need (only a frame of about 2 GiB could ask for more).
const MAX_IMM: u32 = i32::MAX as u32;

/// The stateless face of the mechanism ([`super::by_kind`]): name, ABI id, reserved register
/// and the `traditional` sequences. [`emit_program`] uses [`Lookahead`], which adds the plan.
pub struct LookaheadBase;

impl Mechanism for LookaheadBase {
    fn name(&self) -> &'static str {
        "lookahead"
    }
    fn abi_id(&self) -> u32 {
        ABI_LOOKAHEAD
    }
    fn reserved_regs(&self, _target: Target) -> Vec<PReg> {
        vec![regs::gpr(CHUNK_REGISTER)]
    }
    fn entry_arg_offset(&self, target: Target) -> u32 {
        CalleeCleanup.entry_arg_offset(target)
    }
    fn prologue(&self, f: &FrameInfo, out: &mut String) {
        // Listing 3.11, line 1.
        sub_sp(f.target, f.frame_size, out);
    }
    fn epilogue(&self, f: &FrameInfo, out: &mut String) {
        // Callee-cleanup's (paper 4.2): the frame, the arguments and the return address go,
        // and the return is a jump through the saved address.
        CalleeCleanup.epilogue(f, out);
    }
    fn call_prefix(&self, c: &CallSite, out: &mut String) -> u32 {
        CalleeCleanup.call_prefix(c, out)
    }
    fn call_suffix(&self, c: &CallSite, out: &mut String) {
        CalleeCleanup.call_suffix(c, out);
    }
}

/// Registers of the checkpoint sequences on a target.
struct Regs {
    sp: &'static str,
    chunk: &'static str,
    /// Scratch for the test and for the thread stack at an unlink; the reserve for the
    /// overflow handler.
    scratch: &'static str,
    /// The reserve in the stub (32-bit name of `scratch`).
    reserve: &'static str,
    /// The argument bytes in the stub.
    args: &'static str,
    word: &'static str,
}

fn regs_of(t: Target) -> Regs {
    match t {
        Target::I686 => Regs {
            sp: "esp",
            chunk: "ebp",
            scratch: "ecx",
            reserve: "ecx",
            args: "edx",
            word: "dword",
        },
        Target::X86_64 => Regs {
            sp: "rsp",
            chunk: "rbp",
            scratch: "r11",
            reserve: "r11d",
            args: "r10d",
            word: "qword",
        },
    }
}

/// The overflow test of a checkpoint, printed after the arguments are pushed and right before
/// the `call` (see the module docs): `reserve` counts from the SP before the pushes, `args` is
/// what was pushed since, `bias` is the program's check bias. Returns the reserve the
/// out-of-line stub passes (see [`checkpoint_compare`]).
pub fn checkpoint_test(
    t: Target,
    label: u32,
    reserve: u32,
    args: u32,
    bias: u32,
    out: &mut String,
) -> u32 {
    let passed = checkpoint_compare(t, reserve, args, bias, out);
    let _ = writeln!(out, "\tjb .Lla{label}_ovf");
    let _ = writeln!(out, ".Lla{label}_go:");
    passed
}

/// The compare with the check word (`limit + bias`), for a branch to the out-of-line
/// overflow path when below (module docs, "The check word"). Returns the reserve the stub
/// passes to the overflow handler: `reserve` itself, or at a site whose distance is within the
/// bias, the reserve the stricter test implies, `args + bias - CHECK_SLACK`.
fn checkpoint_compare(t: Target, reserve: u32, args: u32, bias: u32, out: &mut String) -> u32 {
    let r = regs_of(t);
    let check = ChunkHeaderLayout::for_pointer_size(t.slot()).check;
    let distance = reserve - args + callgraph::CHECK_SLACK;
    if distance <= bias {
        sp_compare(t, &format!("reserve {reserve}, within the bias"), out);
        return args + bias - callgraph::CHECK_SLACK;
    }
    let _ = writeln!(
        out,
        "\tlea {}, [{} - {}]\t# checkpoint: reserve {reserve}",
        r.scratch,
        r.sp,
        distance - bias
    );
    let _ = writeln!(
        out,
        "\tcmp {}, {} ptr [{} + {check}]\t# check word: limit + bias",
        r.scratch, r.word, r.chunk
    );
    reserve
}

/// Whether a checkpoint at a call to a C-- function with `reserve` (from the SP before the
/// pushes) compares before the pushes: its distance from that SP, `reserve + CHECK_SLACK`, is
/// within the bias, so the compare is SP's own against the check word (module docs, "The
/// check word").
fn compares_early(reserve: u32, bias: u32) -> bool {
    reserve + callgraph::CHECK_SLACK <= bias
}

/// The compare of a checkpoint that [`compares_early`]: `cmp esp, [ebp + check]`, before the
/// return address and the arguments are pushed; the branch follows them (they keep the flags).
fn early_compare(t: Target, reserve: u32, out: &mut String) {
    sp_compare(t, &format!("reserve {reserve}, before the pushes"), out);
}

/// The short form of a checkpoint's compare: the stack pointer itself against the check word
/// (limit + bias), `note` saying why it may.
fn sp_compare(t: Target, note: &str, out: &mut String) {
    let r = regs_of(t);
    let check = ChunkHeaderLayout::for_pointer_size(t.slot()).check;
    let _ = writeln!(
        out,
        "\tcmp {}, {} ptr [{} + {check}]\t# checkpoint: {note}",
        r.sp, r.word, r.chunk
    );
}

/// A checkpoint at a call to a C-- function (see the module docs): the test, the common path's
/// call, and out of line the call on a new chunk, which is unlinked as soon as the call
/// returns, so the common path needs no underflow test.
/// `early`: the compare was printed before the pushes ([`early_compare`]); only the branch
/// is left, and the stub passes the reserve that compare tests exactly, `bias - CHECK_SLACK`.
fn checkpoint_call(
    c: &CallSite,
    label: u32,
    reserve: u32,
    bias: u32,
    early: bool,
    out: &mut String,
) {
    let t = c.target;
    let r = regs_of(t);
    // The return address and the arguments are pushed (callee-cleanup's order).
    let pushed = c.arg_bytes + t.slot();
    let passed = if early {
        bias - callgraph::CHECK_SLACK
    } else {
        checkpoint_compare(t, reserve, pushed, bias, out)
    };
    if t == Target::I686 {
        // The test's branch is the jump to the callee (module docs, "the test's branch").
        let _ = writeln!(out, "\tjae {}", c.callee);
        let _ = writeln!(out, "\tjmp .Lla{label}_ovf");
        let _ = writeln!(out, "{}:", c.return_label);
    } else {
        let _ = writeln!(out, "\tjb .Lla{label}_ovf");
        CalleeCleanup.call_suffix(c, out);
    }
    overflow_stub(t, label, passed, pushed, OVERFLOW_HANDLER_CMM, out);
    // On the new chunk the callee returns to the unlink, not to the caller: the copied return
    // address (the highest pushed word) is replaced.
    let _ = writeln!(
        out,
        "\tmov {} ptr [{} + {}], offset .Lla{label}_unl",
        r.word,
        r.sp,
        pushed - t.slot()
    );
    let _ = writeln!(out, "\tjmp {}", c.callee);
    let _ = writeln!(out, ".Lla{label}_unl:");
    unlink_chunk(t, label, out);
    out.push_str("\t.subsection 0\n");
}

/// The underflow, inline, then back to `.Lla{label}_back`: the call made on the chunk returned
/// (SP = chunk register), so SP goes back to the caller's (`prev_sp`) and the chunk register to
/// the previous chunk; word 0 marks the chunk unlinked (`stackrt::chunk::UNLINKED`), after the
/// thread stack `T` it held is kept in the scratch register, and the reclaim budget at `T` is
/// decremented. Only when the budget is spent does the code call [`RECLAIM_HANDLER`], which
/// does the runtime's bookkeeping of the marked chunks; otherwise no call (a call here, while
/// a deep recursion unwinds, costs return predictions; see the module docs).
///
/// The scratch register is free here: after a C-- call only `eax`/`rax` or `xmm0` (the result)
/// and the preserved registers are live (isel gives C-- calls every other allocatable register
/// as clobbers), and after a C call the result is already converted into `eax`/`xmm0` (the
/// printer's `fstp`/`movsd`/`movsx` come before [`Mechanism::extern_call_return`]) and
/// `ecx`/`r11` are caller-saved in the C ABIs (isel's C-call clobbers). The flags are dead at
/// both points too.
fn unlink_chunk(t: Target, label: u32, out: &mut String) {
    let r = regs_of(t);
    let layout = ChunkHeaderLayout::for_pointer_size(t.slot());
    let _ = writeln!(
        out,
        "\tmov {}, {} ptr [{} + {}]\t# underflow: the caller's SP",
        r.sp, r.word, r.chunk, layout.prev_sp
    );
    let _ = writeln!(
        out,
        "\tmov {}, {} ptr [{} + {}]\t# the thread stack",
        r.scratch, r.word, r.chunk, layout.thread_stack
    );
    let _ = writeln!(
        out,
        "\tmov {} ptr [{} + {}], {}\t# chunk unlinked",
        r.word,
        r.chunk,
        layout.thread_stack,
        callgraph::UNLINKED_MARK
    );
    let _ = writeln!(
        out,
        "\tmov {}, {} ptr [{} + {}]\t# previous chunk",
        r.chunk, r.word, r.chunk, layout.prev_header
    );
    let _ = writeln!(out, "\tsub dword ptr [{}], 1\t# reclaim budget", r.scratch);
    let _ = writeln!(out, "\tjnz .Lla{label}_back");
    let _ = writeln!(out, "\tcall {RECLAIM_HANDLER}");
    let _ = writeln!(out, "\tjmp .Lla{label}_back");
}

/// The end of a checkpoint's common path (`.Lla{label}_back`) and the start of its out-of-line
/// path: the call of the overflow handler with the reserve and the argument bytes.
fn overflow_stub(t: Target, label: u32, reserve: u32, args: u32, handler: &str, out: &mut String) {
    let r = regs_of(t);
    let _ = writeln!(out, ".Lla{label}_back:");
    out.push_str("\t.subsection 1\n");
    let _ = writeln!(out, ".Lla{label}_ovf:");
    let _ = writeln!(out, "\tmov {}, {reserve}", r.reserve);
    let _ = writeln!(out, "\tmov {}, {args}", r.args);
    let _ = writeln!(out, "\tcall {handler}");
}

/// The underflow test after a checkpoint's call to a C function (the arguments already
/// removed), and the two out-of-line stubs: overflow (with the reserve [`checkpoint_test`]
/// returned), and the inline underflow.
pub fn checkpoint_return(t: Target, label: u32, reserve: u32, args: u32, out: &mut String) {
    let r = regs_of(t);
    let _ = writeln!(out, "\tcmp {}, {}", r.sp, r.chunk);
    let _ = writeln!(out, "\tje .Lla{label}_unf");
    overflow_stub(t, label, reserve, args, OVERFLOW_HANDLER, out);
    let _ = writeln!(out, "\tjmp .Lla{label}_go");
    let _ = writeln!(out, ".Lla{label}_unf:");
    unlink_chunk(t, label, out);
    out.push_str("\t.subsection 0\n");
}

/// One call as the printer emits it (first pass), in printing order.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Recorded {
    callee: String,
    external: bool,
    arg_bytes: u32,
}

#[derive(Default)]
struct State {
    /// Function being printed.
    current: usize,
    /// Next call site of `current`.
    cursor: usize,
    /// Labels handed out so far.
    labels: u32,
    /// An extern checkpoint between its test and its return: (label, reserve its stub passes).
    pending: Option<(u32, u32)>,
    /// The next call to a C-- function got its checkpoint's compare before its pushes.
    early: bool,
    /// Per function `P + S` and its argument bytes.
    frames: Vec<Option<(u32, u32)>>,
    /// Per function its calls in printing order (recorded in both passes).
    sites: Vec<Vec<Recorded>>,
}

/// What the second pass prints from the call-graph plan.
struct Plan {
    /// Per function, per call site in printing order: the reserve at checkpoints.
    sites: Vec<Vec<Option<u32>>>,
    /// Per function: its stack need at entry (argument bytes + longest path), the word before
    /// its argument bytes.
    needs: Vec<u32>,
    /// The check word's bias (module docs, "The check word"), `__cmm_check_bias`.
    bias: u32,
}

/// The `lookahead` mechanism of one emission: without a plan (first pass) it prints the
/// `traditional` sequences and records frames and calls; with one, the checkpoints and the
/// stack-need words.
pub struct Lookahead {
    /// Symbol of each C-- function → its index.
    index: HashMap<String, usize>,
    plan: Option<Plan>,
    state: RefCell<State>,
    /// The program runs green threads: C calls go through [`super::ccall::CCALL_TRAMPOLINE`].
    green: bool,
    /// Frames are aligned to a word only (see "Frames of green threads" in the module docs):
    /// green threads without `--race`.
    word_frames: bool,
}

impl Lookahead {
    /// The plan-less mechanism of the first pass: it prints the frames the program gets (word
    /// aligned under green threads), with no checkpoint.
    pub(crate) fn planless(p: &LoweredProgram) -> Self {
        Self::new(p, None)
    }

    fn new(p: &LoweredProgram, plan: Option<Plan>) -> Self {
        let n = p.functions.len();
        Lookahead {
            index: crate::emit::function_index(p),
            plan,
            state: RefCell::new(State {
                frames: vec![None; n],
                sites: vec![Vec::new(); n],
                ..State::default()
            }),
            green: crate::lower::is_green_threads(p),
            word_frames: crate::lower::is_green_threads(p)
                && !p
                    .externs
                    .iter()
                    .any(|e| e.name.starts_with(crate::race::ENTRY_PREFIX)),
        }
    }

    /// Records the next call site of the current function and returns its reserve if it is a
    /// checkpoint, with a fresh label.
    fn next_site(&self, c: &CallSite, external: bool) -> Option<(u32, u32)> {
        let mut st = self.state.borrow_mut();
        let cur = st.current;
        let k = st.cursor;
        st.cursor += 1;
        st.sites[cur].push(Recorded {
            callee: c.callee.to_string(),
            external,
            arg_bytes: c.arg_bytes,
        });
        let reserve = self
            .plan
            .as_ref()
            .and_then(|p| p.sites.get(cur).and_then(|s| s.get(k)).copied().flatten())?;
        let label = st.labels;
        st.labels += 1;
        Some((label, reserve))
    }

    /// The reserve of the next call site's checkpoint (None: no checkpoint there, or the
    /// first pass), without moving to the site after it as [`Lookahead::next_site`] does.
    fn peek_reserve(&self) -> Option<u32> {
        let st = self.state.borrow();
        let plan = self.plan.as_ref()?;
        plan.sites
            .get(st.current)?
            .get(st.cursor)
            .copied()
            .flatten()
    }

    /// The check word's bias: the plan's (0 in the first pass, which prints no checkpoint).
    fn bias(&self) -> u32 {
        self.plan.as_ref().map_or(0, |p| p.bias)
    }
}

impl Mechanism for Lookahead {
    fn name(&self) -> &'static str {
        LookaheadBase.name()
    }
    fn abi_id(&self) -> u32 {
        LookaheadBase.abi_id()
    }
    fn reserved_regs(&self, target: Target) -> Vec<PReg> {
        LookaheadBase.reserved_regs(target)
    }
    fn entry_arg_offset(&self, target: Target) -> u32 {
        LookaheadBase.entry_arg_offset(target)
    }
    fn frame_align(&self, target: Target) -> u32 {
        if self.word_frames {
            target.slot()
        } else {
            16
        }
    }
    fn stack_need_word(&self, f: &FrameInfo) -> Option<u32> {
        // None in the first pass, whose text is thrown away: the plan does not exist yet.
        let i = *self.index.get(f.symbol)?;
        self.plan.as_ref()?.needs.get(i).copied()
    }
    fn prologue(&self, f: &FrameInfo, out: &mut String) {
        {
            let mut st = self.state.borrow_mut();
            let cur = self.index.get(f.symbol).copied().unwrap_or(usize::MAX);
            if cur < st.frames.len() {
                st.current = cur;
                st.cursor = 0;
                st.sites[cur].clear();
                st.frames[cur] = Some((f.frame_size + f.target.slot(), f.arg_bytes));
            }
        }
        LookaheadBase.prologue(f, out);
    }
    fn epilogue(&self, f: &FrameInfo, out: &mut String) {
        LookaheadBase.epilogue(f, out);
    }
    fn call_prefix(&self, c: &CallSite, out: &mut String) -> u32 {
        let bias = self.bias();
        match self.peek_reserve() {
            Some(reserve) if c.pushes_keep_flags && compares_early(reserve, bias) => {
                early_compare(c.target, reserve, out);
                self.state.borrow_mut().early = true;
            }
            _ => {}
        }
        LookaheadBase.call_prefix(c, out)
    }
    fn call_suffix(&self, c: &CallSite, out: &mut String) {
        let early = std::mem::take(&mut self.state.borrow_mut().early);
        match self.next_site(c, false) {
            None => {
                debug_assert!(!early, "an early compare without a checkpoint");
                LookaheadBase.call_suffix(c, out)
            }
            Some((label, reserve)) => {
                checkpoint_call(c, label, reserve, self.bias(), early, out);
            }
        }
    }
    fn extern_call_check(&self, c: &CallSite, out: &mut String) {
        let site = self.next_site(c, true).map(|(label, reserve)| {
            let passed = checkpoint_test(c.target, label, reserve, c.arg_bytes, self.bias(), out);
            (label, passed)
        });
        self.state.borrow_mut().pending = site;
    }
    fn extern_call(&self, c: &CallSite, out: &mut String) {
        if self.word_frames && c.callee == callgraph::THREAD_EXIT {
            exit_aligned(c, out);
        } else if !self.green
            || c.callee == callgraph::THREAD_EXIT
            || c.callee.starts_with(crate::race::ENTRY_PREFIX)
        {
            let _ = writeln!(out, "\tcall {}", c.callee);
        } else if c.callee.starts_with(callgraph::THREAD_LIBRARY_PREFIX) {
            green_libcall(c, out);
        } else {
            super::ccall::call_on_handler_stack(c, out);
        }
    }
    fn extern_call_return(&self, c: &CallSite, out: &mut String) {
        let pending = self.state.borrow_mut().pending.take();
        if let Some((label, reserve)) = pending {
            checkpoint_return(c.target, label, reserve, c.arg_bytes, out);
        }
    }
}

/// A green thread's call into the thread library (see the module docs): through
/// [`LIBCALL_STUB`] with the function in the scratch register; the (at most three) word
/// arguments stay where the C ABI put them.
pub(super) fn green_libcall(c: &CallSite, out: &mut String) {
    let r = regs_of(c.target);
    match c.target {
        Target::X86_64 => {
            let _ = writeln!(out, "\tlea {}, [rip + {}]", r.scratch, c.callee);
        }
        Target::I686 => {
            let _ = writeln!(out, "\tmov {}, OFFSET {}", r.scratch, c.callee);
        }
    }
    let _ = writeln!(out, "\tcall {LIBCALL_STUB}\t# on the worker's stack");
}

/// A call of `sthread_exit` from a word-aligned frame: the stack pointer is aligned for the
/// C ABI first (the call never returns, so nothing restores it); the i686 argument is pushed
/// again below the alignment.
pub(super) fn exit_aligned(c: &CallSite, out: &mut String) {
    match c.target {
        Target::X86_64 => {
            let _ = writeln!(out, "\tand rsp, -16\t# sthread_exit: the C ABI's alignment");
        }
        Target::I686 => {
            let _ = writeln!(
                out,
                "\tmov eax, dword ptr [esp]\n\tand esp, -16\t# sthread_exit: the C ABI's \
                 alignment\n\tsub esp, 12\n\tpush eax"
            );
        }
    }
    let _ = writeln!(out, "\tcall {}", c.callee);
}

fn emit_error(message: String) -> EmitError {
    EmitError {
        function: None,
        message,
    }
}

/// First pass: instruction selection, register allocation and printing with the plan-less
/// mechanism, for every function's frame and calls. Returns the analysis input.
fn first_pass(p: &LoweredProgram, target: Target) -> Result<(CallGraphInput, State), EmitError> {
    let rec = Lookahead::new(p, None);
    crate::emit::print_all(p, target, &rec)?;
    let state = rec.state.into_inner();
    let taken = crate::emit::address_taken(p);
    let mut functions = Vec::with_capacity(p.functions.len());
    for (i, f) in p.functions.iter().enumerate() {
        let (frame, args) = state.frames[i]
            .ok_or_else(|| emit_error(format!("function `{}` was not printed", f.name)))?;
        let mut calls = Vec::new();
        for s in &state.sites[i] {
            let callee = crate::emit::resolve_callee(p, &rec.index, &s.callee, s.external)?;
            calls.push(callgraph::CallSite {
                callee,
                arg_bytes: s.arg_bytes,
            });
        }
        // The pushes of a checkpoint happen before its test, so they must fit in the room
        // reserved for the caller: the analysis sees them as part of the caller's frame. A
        // call to a C-- function pushes its return address first (callee-cleanup's order).
        let pushes = calls
            .iter()
            .map(|c| match c.callee {
                Callee::Function(_) => c.arg_bytes + target.slot(),
                Callee::Extern(_) => c.arg_bytes,
            })
            .max()
            .unwrap_or(0);
        functions.push(FunctionNode {
            name: f.name.clone(),
            frame: frame + pushes,
            calls,
            root: (f.name == "main" || taken[i]).then_some(args),
        });
    }
    let input = CallGraphInput {
        functions,
        externs: p.externs.iter().map(|e| e.name.clone()).collect(),
    };
    Ok((input, state))
}

/// The analysis' sizes for a program: green threads' C calls run on the worker's stack.
fn plan_config(p: &LoweredProgram, target: Target, chunk_size: u32) -> CallGraphConfig {
    let mut config = CallGraphConfig::new(chunk_size, target.slot());
    config.green = crate::lower::is_green_threads(p);
    if config.green {
        config.root_bound = callgraph::green_root_bound(target.slot());
    }
    config
}

/// The program the plan is made for: small self-recursions unrolled
/// into rings of copies ([`crate::unroll`]), so that one call in [`crate::unroll::UNROLL`]
/// is a checkpoint. Not under green threads: a ring's checkpoint reserves three frames more,
/// and a green thread's stack blocks are sized from what its checkpoints asked for (the
/// runtime learns a thread kind's first block from the first checkpoint that did not fit), so
/// a million threads parked in a recursion would each hold them; and the deterministic
/// scheduler's decision points, which are the checkpoints, would move.
fn unrolled(p: &LoweredProgram) -> Cow<'_, LoweredProgram> {
    if crate::lower::is_green_threads(p) {
        return Cow::Borrowed(p);
    }
    crate::unroll::unroll(p).map_or(Cow::Borrowed(p), Cow::Owned)
}

/// The look-ahead plan of a program: checkpoints and reserves from the emission stage's frames
/// (what `cmm compile --emit callgraph` prints).
pub fn plan_program(
    p: &LoweredProgram,
    target: Target,
    chunk_size: u32,
) -> Result<CallGraphPlan, EmitError> {
    let unrolled = unrolled(p);
    let p = &*unrolled;
    let (input, _) = first_pass(p, target)?;
    Ok(callgraph::analyze(
        &input,
        &plan_config(p, target, chunk_size),
    ))
}

/// Emits the whole program under `lookahead` (see [`crate::emit::emit_program`]): a first pass
/// for the frames, the call-graph analysis, and a second pass printing the checkpoints. Also
/// defines `__cmm_chunk_size`.
pub fn emit_program(
    p: &LoweredProgram,
    opts: &EmitOptions,
    chunk_size: u32,
) -> Result<String, EmitError> {
    let target = opts.target;
    callgraph::validate_chunk_size(chunk_size as u64).map_err(emit_error)?;
    let unrolled = unrolled(p);
    let p = &*unrolled;
    let (input, first) = first_pass(p, target)?;
    let plan = callgraph::analyze(&input, &plan_config(p, target, chunk_size));
    let too_large = |what: &str, f: &str, bytes: u64| {
        emit_error(format!(
            "{what} of {bytes} bytes in `{f}` is over {MAX_IMM} bytes, the most a chunk can hold"
        ))
    };
    let mut table = Plan {
        sites: Vec::with_capacity(plan.functions.len()),
        needs: Vec::with_capacity(plan.functions.len()),
        bias: 0,
    };
    for (i, f) in plan.functions.iter().enumerate() {
        let mut sites = Vec::with_capacity(f.sites.len());
        for s in &f.sites {
            if s.checkpoint.is_some() && s.reserve > MAX_IMM {
                return Err(too_large(
                    "a checkpoint's reserve",
                    &f.name,
                    s.reserve.into(),
                ));
            }
            sites.push(s.checkpoint.map(|_| s.reserve));
        }
        table.sites.push(sites);
        // The stack need at entry: the function's own argument bytes (the entry bytes of a
        // root) plus its longest path, so from the SP before the arguments are pushed.
        let (_, args) = first.frames[i].unwrap_or((0, 0));
        let need = u64::from(args) + u64::from(f.longest_path);
        if need > u64::from(MAX_IMM) {
            return Err(too_large("the stack need", &f.name, need));
        }
        table.needs.push(need as u32);
    }
    table.bias = check_bias(p, target, chunk_size, &table, &first);
    let bias = table.bias;
    let mech = Lookahead::new(p, Some(table));
    let mut out = String::new();
    out.push_str("\t.intel_syntax noprefix\n");
    let _ = writeln!(
        out,
        "# cmm emission stage: target {:?}, mechanism {}, chunk size {chunk_size}, {} checkpoints",
        target,
        mech.name(),
        plan.checkpoint_count()
    );
    out.push_str("\t.text\n");
    let _ = writeln!(out, "\t.globl {CODE_BEGIN_SYMBOL}\n{CODE_BEGIN_SYMBOL}:");
    let mut frame_sizes = Vec::with_capacity(p.functions.len());
    let mut rodata = String::new();
    for printed in crate::emit::print_all(p, target, &mech)? {
        out.push_str(&printed.text);
        rodata.push_str(&printed.rodata);
        frame_sizes.push(printed.frame_size);
    }
    // Subsections are laid out in order: the end label follows the slow paths of subsection 1.
    let _ = writeln!(
        out,
        "\t.subsection 2\n\t.globl {CODE_END_SYMBOL}\n{CODE_END_SYMBOL}:\n\t.subsection 0"
    );
    // The second pass must have printed the calls the plan was made for, in the same order.
    let second = mech.state.into_inner();
    if second.sites != first.sites || second.frames != first.frames {
        return Err(emit_error(
            "lookahead: the second pass printed different calls or frames than the first".into(),
        ));
    }
    crate::emit::emit_data(p, opts, &LookaheadBase, &frame_sizes, &rodata, &mut out);
    crate::emit::emit_chunk_size(chunk_size, &mut out);
    emit_check_bias(bias, &mut out);
    out.push_str("\t.section .note.GNU-stack,\"\",@progbits\n");
    Ok(out)
}

/// The check word's bias of a program (module docs, "The check word"): the largest distance
/// of a checkpoint that is at most a third of a standard chunk's capacity, so every such
/// checkpoint compares SP itself and a chunk still gives at least two thirds of its capacity
/// to frames. Green threads: 0, every checkpoint keeps its exact test, because a green
/// thread's stack is sized to its need (small classes, learned first blocks) and a bias would
/// be slack in every one of a million stacks.
fn check_bias(
    p: &LoweredProgram,
    target: Target,
    chunk_size: u32,
    table: &Plan,
    first: &State,
) -> u32 {
    if crate::lower::is_green_threads(p) {
        return 0;
    }
    let cap = callgraph::chunk_capacity(chunk_size, target.slot()) / 3;
    let mut bias = 0;
    for (sites, recorded) in table.sites.iter().zip(&first.sites) {
        for (reserve, call) in sites.iter().zip(recorded) {
            let Some(reserve) = reserve else { continue };
            let pushed = if call.external {
                call.arg_bytes
            } else {
                call.arg_bytes + target.slot()
            };
            // From the SP after the pushes; a call to a C-- function may compare before them,
            // `pushed` bytes farther (module docs, "The check word").
            let after = reserve - pushed + callgraph::CHECK_SLACK;
            let before = reserve + callgraph::CHECK_SLACK;
            if !call.external && before <= cap {
                bias = bias.max(before);
            } else if after <= cap {
                bias = bias.max(after);
            }
        }
    }
    bias
}

/// Defines `__cmm_check_bias` (mirrors `stackrt::base::abi::CHECK_BIAS_SYMBOL`); `mtss`
/// defines it too, for its limit word.
pub(super) fn emit_check_bias(bias: u32, out: &mut String) {
    out.push_str("\t.section .rodata\n\t.globl __cmm_check_bias\n\t.p2align 2\n");
    out.push_str("\t.type __cmm_check_bias, @object\n\t.size __cmm_check_bias, 4\n");
    let _ = writeln!(out, "__cmm_check_bias:\n\t.long {bias}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emit::MechKind;
    use cmm_front::TargetInfo;

    fn site(t: Target, arg_bytes: u32) -> CallSite<'static> {
        CallSite {
            target: t,
            callee: "cmm_f",
            arg_bytes,
            return_label: ".Lret",
            pushes_keep_flags: true,
        }
    }

    #[test]
    fn code_range_symbols_are_the_runtimes() {
        // Mirrored in stackrt::base::abi::CODE_BEGIN_SYMBOL / CODE_END_SYMBOL (checked there too).
        assert_eq!(CODE_BEGIN_SYMBOL, "__cmm_code_begin");
        assert_eq!(CODE_END_SYMBOL, "__cmm_code_end");
    }

    /// The whole sequence of a checkpoint at a C-- call, line by line (module docs, listing).
    #[test]
    fn c_checkpoint_sequence_i686() {
        let mut s = String::new();
        checkpoint_call(&site(Target::I686, 8), 7, 100, 0, false, &mut s);
        // The return address and 8 bytes of arguments were pushed: 100 - 12 + 16 = 104 below
        // the SP after the pushes; the check word (limit + bias 0) is header word 4; prev_sp, prev_header and the thread
        // stack are words 1, 2 and 0. On the new chunk the copied return address, 8 bytes
        // above the SP, becomes the unlink's.
        let want = "\tlea ecx, [esp - 104]\t# checkpoint: reserve 100\n\
                    \tcmp ecx, dword ptr [ebp + 16]\t# check word: limit + bias\n\
                    \tjae cmm_f\n\
                    \tjmp .Lla7_ovf\n\
                    .Lret:\n\
                    .Lla7_back:\n\
                    \t.subsection 1\n\
                    .Lla7_ovf:\n\
                    \tmov ecx, 100\n\
                    \tmov edx, 12\n\
                    \tcall stackrt_lookahead_overflow_cmm\n\
                    \tmov dword ptr [esp + 8], offset .Lla7_unl\n\
                    \tjmp cmm_f\n\
                    .Lla7_unl:\n\
                    \tmov esp, dword ptr [ebp + 4]\t# underflow: the caller's SP\n\
                    \tmov ecx, dword ptr [ebp + 0]\t# the thread stack\n\
                    \tmov dword ptr [ebp + 0], -1\t# chunk unlinked\n\
                    \tmov ebp, dword ptr [ebp + 8]\t# previous chunk\n\
                    \tsub dword ptr [ecx], 1\t# reclaim budget\n\
                    \tjnz .Lla7_back\n\
                    \tcall stackrt_lookahead_reclaim\n\
                    \tjmp .Lla7_back\n\
                    \t.subsection 0\n";
        assert_eq!(s, want);
    }

    #[test]
    fn c_checkpoint_sequence_x86_64() {
        let mut s = String::new();
        checkpoint_call(&site(Target::X86_64, 16), 0, 64, 0, false, &mut s);
        // Words are 8 bytes: 24 bytes pushed, 64 - 24 + 16 = 56; the check word at 32, prev_sp at 8,
        // prev_header at 16; the budget at the thread stack stays a 32-bit word.
        let want = "\tlea r11, [rsp - 56]\t# checkpoint: reserve 64\n\
                    \tcmp r11, qword ptr [rbp + 32]\t# check word: limit + bias\n\
                    \tjb .Lla0_ovf\n\
                    \tjmp cmm_f\n\
                    .Lret:\n\
                    .Lla0_back:\n\
                    \t.subsection 1\n\
                    .Lla0_ovf:\n\
                    \tmov r11d, 64\n\
                    \tmov r10d, 24\n\
                    \tcall stackrt_lookahead_overflow_cmm\n\
                    \tmov qword ptr [rsp + 16], offset .Lla0_unl\n\
                    \tjmp cmm_f\n\
                    .Lla0_unl:\n\
                    \tmov rsp, qword ptr [rbp + 8]\t# underflow: the caller's SP\n\
                    \tmov r11, qword ptr [rbp + 0]\t# the thread stack\n\
                    \tmov qword ptr [rbp + 0], -1\t# chunk unlinked\n\
                    \tmov rbp, qword ptr [rbp + 16]\t# previous chunk\n\
                    \tsub dword ptr [r11], 1\t# reclaim budget\n\
                    \tjnz .Lla0_back\n\
                    \tcall stackrt_lookahead_reclaim\n\
                    \tjmp .Lla0_back\n\
                    \t.subsection 0\n";
        assert_eq!(s, want);
    }

    /// A checkpoint whose distance is within the bias compares SP itself with the check word,
    /// and its stub passes the reserve that stricter test implies; one beyond the bias
    /// compares SP minus the part of its distance the bias does not cover.
    #[test]
    fn checkpoints_against_a_biased_check_word() {
        // 24 bytes pushed, reserve 64: distance 64 - 24 + 16 = 56, within a bias of 8240; the
        // test `rsp < limit + 8240` is `caller_sp - (24 + 8240 - 16) - 16 < limit`, i.e. the
        // exact test of a reserve of 8248.
        let mut s = String::new();
        checkpoint_call(&site(Target::X86_64, 16), 0, 64, 8240, false, &mut s);
        assert!(s.starts_with(
            "\tcmp rsp, qword ptr [rbp + 32]\t# checkpoint: reserve 64, within the bias\n\
             \tjb .Lla0_ovf\n\tjmp cmm_f\n"
        ));
        assert!(s.contains("\tmov r11d, 8248\n\tmov r10d, 24\n"));
        // The distance exactly the bias: still the short form.
        let mut s = String::new();
        let passed = checkpoint_test(Target::I686, 2, 100, 12, 104, &mut s);
        assert_eq!(passed, 100);
        assert!(s.starts_with("\tcmp esp, dword ptr [ebp + 16]"));
        // Beyond the bias: 8208 - 16 + 16 = 8208 below SP, 8208 - 64 below the biased word.
        let mut s = String::new();
        let passed = checkpoint_test(Target::I686, 3, 8208, 16, 64, &mut s);
        assert_eq!(passed, 8208);
        assert_eq!(
            s,
            "\tlea ecx, [esp - 8144]\t# checkpoint: reserve 8208\n\
             \tcmp ecx, dword ptr [ebp + 16]\t# check word: limit + bias\n\
             \tjb .Lla3_ovf\n\
             .Lla3_go:\n"
        );
    }

    /// A checkpoint whose distance from the SP before the pushes is within the bias compares
    /// there, branches after the pushes, and its stub passes the reserve that compare tests
    /// exactly: `rsp < limit + B` before the pushes is `caller_sp - (B - 16) - 16 < limit`.
    #[test]
    fn checkpoints_compare_before_the_pushes_within_the_bias() {
        assert!(compares_early(8240, 8256));
        assert!(!compares_early(8241, 8256));
        assert!(!compares_early(0, 0));
        let mut s = String::new();
        early_compare(Target::X86_64, 8240, &mut s);
        s.push_str("\tpush offset .Lf0ret1\n\tpush r8\n");
        checkpoint_call(&site(Target::X86_64, 16), 0, 8240, 8256, true, &mut s);
        assert!(
            s.starts_with(
                "\tcmp rsp, qword ptr [rbp + 32]\t# checkpoint: reserve 8240, before the pushes\n\
                 \tpush offset .Lf0ret1\n\tpush r8\n\
                 \tjb .Lla0_ovf\n\tjmp cmm_f\n"
            ),
            "{s}"
        );
        assert!(s.contains("\tmov r11d, 8240\n\tmov r10d, 24\n"), "{s}");
        let mut s = String::new();
        early_compare(Target::I686, 100, &mut s);
        assert_eq!(
            s,
            "\tcmp esp, dword ptr [ebp + 16]\t# checkpoint: reserve 100, before the pushes\n"
        );
    }

    /// An extern checkpoint: the test before the printer's `call`, then the underflow test
    /// and the two out-of-line stubs.
    #[test]
    fn extern_checkpoint_sequence_i686() {
        let mut s = String::new();
        let passed = checkpoint_test(Target::I686, 3, 8208, 16, 0, &mut s);
        assert_eq!(passed, 8208);
        s.push_str("\tcall printf\n\tadd esp, 16\n");
        checkpoint_return(Target::I686, 3, 8208, 16, &mut s);
        let want = "\tlea ecx, [esp - 8208]\t# checkpoint: reserve 8208\n\
                    \tcmp ecx, dword ptr [ebp + 16]\t# check word: limit + bias\n\
                    \tjb .Lla3_ovf\n\
                    .Lla3_go:\n\
                    \tcall printf\n\
                    \tadd esp, 16\n\
                    \tcmp esp, ebp\n\
                    \tje .Lla3_unf\n\
                    .Lla3_back:\n\
                    \t.subsection 1\n\
                    .Lla3_ovf:\n\
                    \tmov ecx, 8208\n\
                    \tmov edx, 16\n\
                    \tcall stackrt_lookahead_overflow\n\
                    \tjmp .Lla3_go\n\
                    .Lla3_unf:\n\
                    \tmov esp, dword ptr [ebp + 4]\t# underflow: the caller's SP\n\
                    \tmov ecx, dword ptr [ebp + 0]\t# the thread stack\n\
                    \tmov dword ptr [ebp + 0], -1\t# chunk unlinked\n\
                    \tmov ebp, dword ptr [ebp + 8]\t# previous chunk\n\
                    \tsub dword ptr [ecx], 1\t# reclaim budget\n\
                    \tjnz .Lla3_back\n\
                    \tcall stackrt_lookahead_reclaim\n\
                    \tjmp .Lla3_back\n\
                    \t.subsection 0\n";
        assert_eq!(s, want);
    }

    #[test]
    fn extern_checkpoint_sequence_x86_64() {
        let mut s = String::new();
        checkpoint_test(Target::X86_64, 1, 8192, 0, 0, &mut s);
        s.push_str("\tcall printf\n");
        checkpoint_return(Target::X86_64, 1, 8192, 0, &mut s);
        let want = "\tlea r11, [rsp - 8208]\t# checkpoint: reserve 8192\n\
                    \tcmp r11, qword ptr [rbp + 32]\t# check word: limit + bias\n\
                    \tjb .Lla1_ovf\n\
                    .Lla1_go:\n\
                    \tcall printf\n\
                    \tcmp rsp, rbp\n\
                    \tje .Lla1_unf\n\
                    .Lla1_back:\n\
                    \t.subsection 1\n\
                    .Lla1_ovf:\n\
                    \tmov r11d, 8192\n\
                    \tmov r10d, 0\n\
                    \tcall stackrt_lookahead_overflow\n\
                    \tjmp .Lla1_go\n\
                    .Lla1_unf:\n\
                    \tmov rsp, qword ptr [rbp + 8]\t# underflow: the caller's SP\n\
                    \tmov r11, qword ptr [rbp + 0]\t# the thread stack\n\
                    \tmov qword ptr [rbp + 0], -1\t# chunk unlinked\n\
                    \tmov rbp, qword ptr [rbp + 16]\t# previous chunk\n\
                    \tsub dword ptr [r11], 1\t# reclaim budget\n\
                    \tjnz .Lla1_back\n\
                    \tcall stackrt_lookahead_reclaim\n\
                    \tjmp .Lla1_back\n\
                    \t.subsection 0\n";
        assert_eq!(s, want);
    }

    /// `main` and `fill` each have a 40 KB array; `fill` calls `leaf`.
    const LARGE_FRAMES: &str = "
int leaf(int x) { return x + 1; }
int fill(int n) { char buf[40000]; buf[n] = 'x'; return leaf(buf[n]); }
int main() { char big[40000]; big[0] = 1; return fill(big[0]) + big[0]; }
";

    fn lowered(src: &str, t: Target) -> LoweredProgram {
        let info = match t {
            Target::I686 => TargetInfo::I686,
            Target::X86_64 => TargetInfo::X86_64,
        };
        let typed = cmm_front::check_rendered("t.cm", src, info).expect("valid C--");
        crate::lower_program(&typed)
    }

    /// Frames larger than a chunk compile: the calls into and out of a 40 KB frame are size
    /// checkpoints, the one into it reserving more than a chunk holds, and `main`'s stack-need
    /// word is over the capacity too (the runtime gives such reserves and roots a larger chunk).
    #[test]
    fn frames_larger_than_a_chunk_get_checkpoints_and_a_large_need() {
        use crate::callgraph::CheckpointReason::Size;
        let chunk = 32 * 1024;
        for t in [Target::I686, Target::X86_64] {
            let p = lowered(LARGE_FRAMES, t);
            let plan = plan_program(&p, t, chunk).expect("plans");
            let cap = plan.config.capacity;
            let id = |n: &str| plan.functions.iter().position(|f| f.name == n).unwrap() as u32;
            let (leaf, fill, main) = (id("leaf"), id("fill"), id("main"));
            // fill's frame alone is over the capacity: its call of leaf is checkpointed and
            // its longest path is its frame.
            let fp = &plan.functions[fill as usize];
            assert!(fp.frame > cap, "{t:?}: {plan}");
            assert_eq!(fp.longest_path, fp.frame, "{t:?}: {plan}");
            assert_eq!(fp.sites.len(), 1);
            assert_eq!(
                (fp.sites[0].callee, fp.sites[0].checkpoint),
                (Callee::Function(leaf), Some(Size))
            );
            // main's call of fill reserves fill's whole frame: more than a chunk holds.
            let mp = &plan.functions[main as usize];
            let call = mp
                .sites
                .iter()
                .find(|s| s.callee == Callee::Function(fill))
                .unwrap();
            assert_eq!(call.checkpoint, Some(Size), "{t:?}: {plan}");
            assert_eq!(call.reserve, call.arg_bytes + fp.frame);
            assert!(call.reserve > cap);
            assert_eq!(mp.longest_path, mp.frame, "{t:?}: {plan}");

            let asm = crate::emit::emit_program(
                &p,
                &EmitOptions {
                    target: t,
                    mech: MechKind::Lookahead { chunk_size: chunk },
                },
            )
            .expect("emits");
            // The test with that reserve guards the call of fill (lea, cmp, then i686 `jae
            // fill`, x86-64 `jb` to the overflow path and `jmp fill`).
            let lines: Vec<&str> = asm.lines().collect();
            let at = lines
                .iter()
                .position(|l| l.ends_with(&format!("# checkpoint: reserve {}", call.reserve)))
                .unwrap_or_else(|| panic!("{t:?}: no checkpoint with reserve {}", call.reserve));
            let (line, want) = match t {
                Target::I686 => (at + 2, "\tjae cmm_fill"),
                Target::X86_64 => (at + 3, "\tjmp cmm_fill"),
            };
            assert_eq!(lines[line], want, "{t:?}: {asm}");
            // main's need word: its argument bytes (argc, argv) + its longest path.
            let need = 2 * t.slot() + mp.longest_path;
            assert!(need > cap);
            let header = format!(
                "\t.p2align 4\n\t.skip 8\n\t.long {need}\t# stack need at entry\n\
                 \t.long {}\t# argument bytes\ncmm_main:\n",
                2 * t.slot()
            );
            assert!(asm.contains(&header), "{t:?}: {asm}");
        }
    }

    /// Every function gets a need word under lookahead (argument bytes + longest path), and no
    /// other mechanism emits one.
    #[test]
    fn need_words_only_under_lookahead() {
        let src = "int twice(int x) {\n    return x + x;\n}\n\
                   int main() {\n    return twice(2);\n}\n";
        for t in [Target::I686, Target::X86_64] {
            let p = lowered(src, t);
            let plan = plan_program(&p, t, 32 * 1024).expect("plans");
            let emit = |mech| {
                crate::emit::emit_program(&p, &EmitOptions { target: t, mech }).expect("emits")
            };
            let asm = emit(MechKind::Lookahead {
                chunk_size: 32 * 1024,
            });
            for (f, args) in [("twice", t.slot()), ("main", 2 * t.slot())] {
                let fp = plan.functions.iter().find(|p| p.name == f).unwrap();
                let want = format!(
                    "\t.skip 8\n\t.long {}\t# stack need at entry\n\t.long {args}\t# argument \
                     bytes\ncmm_{f}:\n",
                    args + fp.longest_path
                );
                assert!(asm.contains(&want), "{t:?} {f}: {asm}");
            }
            assert!(!asm.contains(".skip 12"), "{asm}");
            for mech in [MechKind::Traditional, MechKind::CalleeCleanup] {
                let asm = emit(mech);
                assert!(!asm.contains("stack need"), "{mech:?}: {asm}");
                assert_eq!(
                    asm.matches("\t.skip 12\n\t.long ").count(),
                    2,
                    "{mech:?}: {asm}"
                );
            }
        }
    }
}
