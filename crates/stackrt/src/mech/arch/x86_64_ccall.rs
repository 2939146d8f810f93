//! x86_64 assembly of the C-call trampoline `stackrt_ccall`: compiled code's calls to C
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
// In:  r11 = the C function, r10 = A (bytes of stack arguments the caller pushed, padding
//      included: a multiple of 16), rax (al: a variadic call's vector registers), rdi rsi rdx
//      rcx r8 r9 xmm0-7 = the register arguments, [rsp] = return address into compiled code,
//      [rsp + 8 .. rsp + 8 + A) = the stack arguments.
// Out: the C function's results (rax, rdx, xmm0, xmm1) and every callee-saved register;
//      r10, r11, xmm15 and the flags clobbered (none of them carries a System V argument or
//      result). The thread's own stack gets 8 bytes below the return address (rax).
//      While the C function runs, TLS word 6 (the count of C calls on the handler stack,
//      `crate::chunk::handler::CCALLS_OFFSET`) is one higher: a C callback into C-- then
//      knows C's frames are on the handler stack.
//
//   thread's stack                  handler stack (top S)
//   | stack args (A)   |            +------------------+ S
//   | ret into code    |            | (unused)         | S - 8
//   | rax              | <- rsp'    | rsp'             | S - 16
//   |                  |            | stack args (A)   | copied
//   |                  |            +------------------+ <- rsp at the call (S - 16 - A)
global_asm!(
    ".text",
    ".globl stackrt_ccall",
    ".type stackrt_ccall, @function",
    ".p2align 4",
    "stackrt_ccall:",
    "push %rax",
    "mov %fs:stackrt_chunk_tls@tpoff, %rax",
    "mov %rsp, -16(%rax)",
    "sub $16, %rax",
    "sub %r10, %rax",
    "test %r10, %r10",
    "jz .Lla_ccall_go64",
    ".Lla_ccall_copy64:",
    "sub $8, %r10",
    "movq 16(%rsp,%r10), %xmm15",
    "movq %xmm15, (%rax,%r10)",
    "jnz .Lla_ccall_copy64",
    ".Lla_ccall_go64:",
    "mov %rsp, %r10",
    "mov %rax, %rsp",
    "mov (%r10), %rax",
    "incq %fs:stackrt_chunk_tls@tpoff+48",
    "call *%r11",
    "decq %fs:stackrt_chunk_tls@tpoff+48",
    "mov %fs:stackrt_chunk_tls@tpoff, %r11",
    "mov -16(%r11), %rsp",
    "cmpq $0, %fs:stackrt_chunk_tls@tpoff+24",
    "jne {switched}",
    "add $8, %rsp",
    "ret",
    ".size stackrt_ccall, .-stackrt_ccall",
    switched = sym crate::chunk::handler::stackrt_ccall_switched,
    options(att_syntax)
);
