//! i686 assembly of the C-call trampoline `stackrt_ccall`: compiled code's calls to C
//! functions run on the OS thread's handler stack instead of the thread's own (see the
//! routine's comment).

use core::arch::global_asm;

// stackrt_ccall: a call of compiled code to a C function, made on the OS thread's handler
// stack (`crate::chunk::handler`: a green-thread worker's own stack, or an OS thread's native
// stack below its entry trampoline), as Go runs system calls and cgo on g0, so that the
// thread's stack needs no room for C code: green threads' C calls under `lookahead`, and every
// C call under `mmu` and `mmu-reuse`, whose C calls would otherwise probe 8 KiB below the
// stack pointer (`cmm_codegen`'s `mech::ccall`). C code never switches green threads (the
// thread library's calls go through their own stub), so nothing else runs on the handler
// stack until the call returns, and the OS thread is the same then. If C code called the
// thread library and it left a switch to a stub (it runs on the handler stack), the switch
// cannot be made here: the program stops with one line instead of going on as if it had.
//
// In:  ecx = the C function, edx = A (bytes of arguments the caller pushed, padding included:
//      a multiple of 16), [esp] = return address into compiled code, [esp + 4 .. esp + 4 + A)
//      = the arguments (cdecl).
// Out: the C function's results (eax, edx, st0) and ebx esi edi ebp; ecx, xmm7 and the flags
//      clobbered. The thread's own stack gets nothing below the return address.
//      While the C function runs, TLS word 6 (the count of C calls on the handler stack,
//      `crate::chunk::handler::CCALLS_OFFSET`) is one higher: a C callback into C-- then
//      knows C's frames are on the handler stack.
//
//   thread's stack                  handler stack (top S)
//   | args (A)         |            +------------------+ S
//   | ret into code    | <- esp'    | (unused)         | S - 12 .. S - 4
//   |                  |            | esp'             | S - 16
//   |                  |            | args (A)         | copied
//   |                  |            +------------------+ <- esp at the call (S - 16 - A)
global_asm!(
    ".text",
    ".globl stackrt_ccall",
    ".type stackrt_ccall, @function",
    ".p2align 4",
    "stackrt_ccall:",
    "mov %gs:stackrt_chunk_tls@ntpoff, %eax",
    "mov %esp, -16(%eax)",
    "sub $16, %eax",
    "sub %edx, %eax",
    "test %edx, %edx",
    "jz .Lla_ccall_go32",
    ".Lla_ccall_copy32:",
    "sub $4, %edx",
    "movd 4(%esp,%edx), %xmm7",
    "movd %xmm7, (%eax,%edx)",
    "jnz .Lla_ccall_copy32",
    ".Lla_ccall_go32:",
    "mov %eax, %esp",
    "incl %gs:stackrt_chunk_tls@ntpoff+24",
    "call *%ecx",
    "decl %gs:stackrt_chunk_tls@ntpoff+24",
    "mov %gs:stackrt_chunk_tls@ntpoff, %ecx",
    "mov -16(%ecx), %esp",
    "cmpl $0, %gs:stackrt_chunk_tls@ntpoff+12",
    "jne {switched}",
    "ret",
    ".size stackrt_ccall, .-stackrt_ccall",
    switched = sym crate::chunk::handler::stackrt_ccall_switched,
    options(att_syntax)
);
