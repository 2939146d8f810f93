//! Calls of compiled code to C functions made on the OS thread's *handler stack* instead of the
//! thread's own stack, through the runtime's trampoline [`CCALL_TRAMPOLINE`]
//! (`stackrt::mech::arch::*_ccall`): green threads' C calls under `lookahead` (their stacks
//! hold no room for C code) and every C call under `mmu` and `mmu-reuse` (which would otherwise
//! probe the C budget, 8 KiB, below the stack pointer before every call: three cache lines and
//! often a page far from the working set). The handler stack is a green-thread worker's own
//! stack, or an OS thread's native stack below its entry trampoline (`stackrt::chunk::handler`).
//!
//! ```text
//!  i686                                   x86-64
//!  mov  ecx, OFFSET f                     lea  r11, [rip + f]
//!  mov  edx, A        ; stack arg bytes   mov  r10d, A
//!  call stackrt_ccall                     call stackrt_ccall
//! ```
//!
//! The registers are free at the call: every argument is in place (`ecx`/`edx` carry none on
//! i686, `r10`/`r11` none in the System V ABI), and the trampoline keeps `al` of a variadic
//! call. It returns with the function's results (`eax`/`edx`/`st0`, `rax`/`rdx`/`xmm0-1`) and
//! every callee-saved register; the thread's own stack gets at most 16 bytes below the pushed
//! arguments ([`CCALL_STACK`]).
//!
//! # The inline form (`mmu`, `mmu-reuse`)
//!
//! A mechanism that reserves a call base register (`ebp`/`rbp`, which C preserves) can do the
//! trampoline's work inline and push the arguments on the handler stack directly
//! ([`switch_to_handler_stack`], [`call_inline`], [`switch_back`]): nothing is pushed on the
//! thread's stack, so nothing needs probing there, and there is no copy and no indirect call.
//! The protocol with the runtime is the trampoline's (`stackrt::chunk::handler`): the thread's
//! SP in the slot [`SP_SLOT`] bytes below the handler stack's top, the count of C calls on the
//! handler stack non-zero while C runs, and, in green-thread programs, the deferred-switch word
//! checked after it.
//!
//! ```text
//!  i686 (x86-64: rbp, rsp, qword, fs:[stackrt_chunk_tls@tpoff + 8k])
//!  mov  ebp, esp
//!  mov  esp, dword ptr gs:[stackrt_chunk_tls@ntpoff]        ; S: the handler stack's top
//!  mov  dword ptr [esp - 16], ebp                           ; the thread's SP
//!  sub  esp, 16
//!  sub  esp, pad ; push args                                ; spills read [ebp + k]
//!  mov  dword ptr gs:[stackrt_chunk_tls@ntpoff + 24], 1     ; C runs on the handler stack
//!  call f
//!  mov  dword ptr gs:[stackrt_chunk_tls@ntpoff + 24], 0
//!  cmp  dword ptr gs:[stackrt_chunk_tls@ntpoff + 12], 0     ; green threads only: C left a
//!  jne  stackrt_ccall_switched                              ; switch to a stub? one line, exit 70
//!  add  esp, pad + args
//!  mov  esp, ebp
//! ```
//!
//! The trampoline counts its C calls up and down; the inline form stores 1 and 0 instead (a
//! store each, no read-modify-write), which is the same: compiled code runs inside C on the
//! handler stack only in a C callback, and the callback's entry saves the count and zeroes it
//! (`stackrt::chunk::handler::nest`, restored by `unnest`), so at any one nesting level at most
//! one C call is on the handler stack. Only the green-thread scheduler defers a switch
//! (`stackrt::green::sched`), so an OS-thread program leaves the deferred-switch word 0 and
//! its C calls skip the test (a compare and a branch per C call).

use std::fmt::Write;

use super::CallSite;
use crate::emit::Target;

/// The runtime's C-call trampoline (see the module docs).
pub const CCALL_TRAMPOLINE: &str = "stackrt_ccall";

/// Bytes of the thread's stack a call through the trampoline uses below the arguments the
/// caller pushed: the return address, and on x86-64 the saved `rax`.
pub const CCALL_STACK: u32 = 16;

/// The call of `c.callee` through the trampoline (`c.arg_bytes`: the stack arguments pushed,
/// padding included, a multiple of 16).
pub fn call_on_handler_stack(c: &CallSite, out: &mut String) {
    debug_assert_eq!(c.arg_bytes % 16, 0);
    match c.target {
        Target::X86_64 => {
            let _ = writeln!(out, "\tlea r11, [rip + {}]", c.callee);
            let _ = writeln!(out, "\tmov r10d, {}", c.arg_bytes);
        }
        Target::I686 => {
            let _ = writeln!(out, "\tmov ecx, OFFSET {}", c.callee);
            let _ = writeln!(out, "\tmov edx, {}", c.arg_bytes);
        }
    }
    let _ = writeln!(out, "\tcall {CCALL_TRAMPOLINE}\t# on the handler stack");
}

/// The runtime's thread-local block of the chunk handlers (`stackrt::chunk::handler`), whose
/// word 0 is the handler stack's top.
pub const CHUNK_TLS_SYMBOL: &str = "stackrt_chunk_tls";
/// Word of the block that holds a switch a thread-library call deferred (non-zero: C code
/// called the thread library; `stackrt::chunk::handler`'s `lib_save`).
pub const LIB_SAVE_WORD: u32 = 3;
/// Word of the block that counts C calls running on the handler stack (`ccalls`).
pub const CCALLS_WORD: u32 = 6;
/// Bytes below the handler stack's top of the slot holding the calling thread's SP
/// (`stackrt::chunk::handler::LIB_SP_SLOT`).
pub const SP_SLOT: u32 = 16;
/// The runtime's routine for a C function that left a switch to a stub: one line, exit 70.
pub const SWITCHED_STUB: &str = "stackrt_ccall_switched";

/// A pointer-sized operand at word `word` of the chunk handlers' block.
fn chunk_tls(t: Target, word: u32) -> String {
    super::tls_operand(t, CHUNK_TLS_SYMBOL, word * t.slot(), false)
}

/// The inline form's first lines (see the module docs): SP in `base`, SP on the handler stack
/// below the slot that keeps it.
pub fn switch_to_handler_stack(t: Target, base: &str, out: &mut String) {
    let sp = t.sp();
    let w = if t == Target::I686 { "dword" } else { "qword" };
    let _ = writeln!(out, "\tmov {base}, {sp}");
    let _ = writeln!(out, "\tmov {sp}, {}\t# the handler stack", chunk_tls(t, 0));
    let _ = writeln!(out, "\tmov {w} ptr [{sp} - {SP_SLOT}], {base}");
    let _ = writeln!(out, "\tsub {sp}, {SP_SLOT}");
}

/// The inline form's call of `c.callee`, marked as a C call on the handler stack; `green`: the
/// program runs green threads, whose library may leave a deferred switch (module docs).
pub fn call_inline(c: &CallSite, green: bool, out: &mut String) {
    let t = c.target;
    let _ = writeln!(out, "\tmov {}, 1", chunk_tls(t, CCALLS_WORD));
    let _ = writeln!(out, "\tcall {}\t# on the handler stack", c.callee);
    let _ = writeln!(out, "\tmov {}, 0", chunk_tls(t, CCALLS_WORD));
    if green {
        let _ = writeln!(out, "\tcmp {}, 0", chunk_tls(t, LIB_SAVE_WORD));
        let _ = writeln!(out, "\tjne {SWITCHED_STUB}");
    }
}

/// The inline form's last line: back on the thread's stack.
pub fn switch_back(t: Target, base: &str, out: &mut String) {
    let _ = writeln!(out, "\tmov {}, {base}", t.sp());
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The block's layout is the runtime's (`stackrt::chunk::handler` checks the same values).
    #[test]
    fn the_chunk_tls_words_are_the_runtimes() {
        assert_eq!(CHUNK_TLS_SYMBOL, "stackrt_chunk_tls");
        assert_eq!((LIB_SAVE_WORD, CCALLS_WORD, SP_SLOT), (3, 6, 16));
        assert_eq!(SWITCHED_STUB, "stackrt_ccall_switched");
    }

    #[test]
    fn the_inline_form_keeps_the_trampolines_protocol() {
        let c = CallSite {
            target: Target::I686,
            callee: "abs",
            arg_bytes: 16,
            return_label: "",
            pushes_keep_flags: true,
        };
        for green in [true, false] {
            let mut s = String::new();
            switch_to_handler_stack(Target::I686, "ebp", &mut s);
            call_inline(&c, green, &mut s);
            switch_back(Target::I686, "ebp", &mut s);
            let test = if green {
                "\tcmp dword ptr gs:[stackrt_chunk_tls@ntpoff + 12], 0\n\
                 \tjne stackrt_ccall_switched\n"
            } else {
                ""
            };
            assert_eq!(
                s,
                format!(
                    "\tmov ebp, esp\n\
                     \tmov esp, dword ptr gs:[stackrt_chunk_tls@ntpoff + 0]\t# the handler stack\n\
                     \tmov dword ptr [esp - 16], ebp\n\
                     \tsub esp, 16\n\
                     \tmov dword ptr gs:[stackrt_chunk_tls@ntpoff + 24], 1\n\
                     \tcall abs\t# on the handler stack\n\
                     \tmov dword ptr gs:[stackrt_chunk_tls@ntpoff + 24], 0\n\
                     {test}\tmov esp, ebp\n"
                )
            );
        }
    }
}
