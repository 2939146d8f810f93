//! x86-64 entry trampolines: calling a C-- function (program `main`, a thread's entry) from Rust
//! under each emission-stage mechanism.
//!
//! Both trampolines are System V functions `fn(fp, a0, a1) -> u64` that call the C-- function
//! at `fp` with arguments `a0, a1` (a function with fewer parameters ignores the extra ones) and
//! return its `rax`. C-- code preserves no register (thesis 3.3.1), so the trampolines save the
//! System V callee-saved registers `rbx rbp r12-r15` themselves. The C-- convention wants `rsp`
//! 16-byte aligned before the caller starts pushing; both trampolines establish that.

use core::arch::global_asm;

// Mechanism `traditional` (ABI 1): push the arguments, `call`, pop them.
//
// Register contract: in rdi = fp, rsi = a0, rdx = a1; out rax = result; every System V
// callee-saved register preserved.
//
//   | return address (to Rust) |
//   | rbx rbp r12 r13 r14 r15  |  saved, 48 bytes
//   | ...                      |  rsp aligned down to 16
//   | padding (8)              |
//   | old rsp                  |
//   | a1                       |
//   | a0                       |  <- rsp at the `call`; the callee finds a0 at rsp+8
global_asm!(
    ".text",
    ".globl stackrt_enter_traditional",
    ".type stackrt_enter_traditional, @function",
    ".p2align 4",
    "stackrt_enter_traditional:",
    "push %rbx",
    "push %rbp",
    "push %r12",
    "push %r13",
    "push %r14",
    "push %r15",
    "mov %rsp, %rax",
    "and $-16, %rsp",
    "sub $8, %rsp",
    "push %rax",
    "push %rdx",
    "push %rsi",
    "call *%rdi",
    "add $16, %rsp",
    "pop %rsp",
    "pop %r15",
    "pop %r14",
    "pop %r13",
    "pop %r12",
    "pop %rbp",
    "pop %rbx",
    "ret",
    ".size stackrt_enter_traditional, .-stackrt_enter_traditional",
    options(att_syntax)
);

// Mechanism `callee-cleanup` (ABI 2): push the return address and the arguments, `jmp`; the
// callee pops its frame, its arguments and the return address, and jumps back to
// `.Lcc_back64`. How much it pops depends on how many parameters it declares, so the
// trampoline saves the old rsp at a 256-byte boundary `A` and finds it again by rounding up.
//
// Register contract: in rdi = fp, rsi = a0, rdx = a1; out rax = result; every System V
// callee-saved register preserved.
//
//   | return address (to Rust) |
//   | rbx rbp r12 r13 r14 r15  |  saved
//   | ... (< 256 bytes)        |
//   +--------------------------+  A = rsp rounded down to 256
//   | old rsp                  |  A - 8
//   | (unused)                 |  A - 16
//   | return address .Lcc_back64 |
//   | a1                       |
//   | a0                       |  <- rsp at the `jmp`
//
// After the callee returns rsp lies in (A - 256, A - 8], so (rsp + 255) & -256 = A.
global_asm!(
    ".text",
    ".globl stackrt_enter_callee_cleanup",
    ".type stackrt_enter_callee_cleanup, @function",
    ".p2align 4",
    "stackrt_enter_callee_cleanup:",
    "push %rbx",
    "push %rbp",
    "push %r12",
    "push %r13",
    "push %r14",
    "push %r15",
    "mov %rsp, %rax",
    "and $-256, %rsp",
    "mov %rax, -8(%rsp)",
    "sub $16, %rsp",
    "lea .Lcc_back64(%rip), %rax",
    "push %rax",
    "push %rdx",
    "push %rsi",
    "jmp *%rdi",
    ".Lcc_back64:",
    "add $255, %rsp",
    "and $-256, %rsp",
    "mov -8(%rsp), %rsp",
    "pop %r15",
    "pop %r14",
    "pop %r13",
    "pop %r12",
    "pop %rbp",
    "pop %rbx",
    "ret",
    ".size stackrt_enter_callee_cleanup, .-stackrt_enter_callee_cleanup",
    options(att_syntax)
);
