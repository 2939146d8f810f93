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
