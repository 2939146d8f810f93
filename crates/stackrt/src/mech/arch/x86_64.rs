//! x86-64 entry trampolines: calling a C-- function (program `main`, a thread's entry) from Rust
//! under each emission-stage mechanism.
//!
//! Both trampolines are System V functions `fn(fp, a0, a1, nargs) -> u64` that call the C--
//! function at `fp` with its first `nargs` (0 to 2) arguments of `a0, a1` and return its `rax`. C-- code preserves no register (thesis 3.3.1), so the trampolines save the
//! System V callee-saved registers `rbx rbp r12-r15` themselves. The C-- convention wants `rsp`
//! 16-byte aligned before the caller starts pushing; both trampolines establish that.

use core::arch::global_asm;

// Mechanism `traditional` (ABI 1): push the arguments, `call`; the callee leaves them.
//
// Register contract: in rdi = fp, rsi = a0, rdx = a1, rcx = number of arguments to push (0, 1
// or 2: what the callee declares, so its frame stays 16-byte aligned); out rax = result; every
// System V callee-saved register preserved. C-- code preserves no register, so the old rsp is
// saved at a 256-byte boundary `A` and found again by rounding rsp up after the call.
//
//   | return address (to Rust) |
//   | rbx rbp r12 r13 r14 r15  |  saved, 48 bytes
//   | ... (< 256 bytes)        |
//   +--------------------------+  A = rsp rounded down to 256
//   | old rsp                  |  A - 8
//   | (unused)                 |  A - 16
//   | a1 (if rcx = 2)          |
//   | a0 (if rcx >= 1)         |  <- rsp at the `call`
//
// After the call rsp lies in [A - 32, A - 16], so (rsp + 255) & -256 = A.
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
    "and $-256, %rsp",
    "mov %rax, -8(%rsp)",
    "sub $16, %rsp",
    "cmp $2, %rcx",
    "jb .Ltr_one64",
    "push %rdx",
    ".Ltr_one64:",
    "cmp $1, %rcx",
    "jb .Ltr_none64",
    "push %rsi",
    ".Ltr_none64:",
    "call *%rdi",
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
    ".size stackrt_enter_traditional, .-stackrt_enter_traditional",
    options(att_syntax)
);

// Mechanism `callee-cleanup` (ABI 2): push the return address and the arguments, `jmp`; the
// callee pops its frame, its arguments and the return address, and jumps back to
// `.Lcc_back64`. The old rsp is saved at a 256-byte boundary `A` as above.
//
// Register contract: in rdi = fp, rsi = a0, rdx = a1, rcx = number of arguments (0, 1 or 2,
// what the callee declares); out rax = result; every System V callee-saved register preserved.
//
//   | return address (to Rust) |
//   | rbx rbp r12 r13 r14 r15  |  saved
//   | ... (< 256 bytes)        |
//   +--------------------------+  A = rsp rounded down to 256
//   | old rsp                  |  A - 8
//   | (unused)                 |  A - 16
//   | return address .Lcc_back64 |
//   | a1 (if rcx = 2)          |
//   | a0 (if rcx >= 1)         |  <- rsp at the `jmp`
//
// The callee pops everything it was given, so rsp is A - 16 again at `.Lcc_back64`.
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
    "cmp $2, %rcx",
    "jb .Lcc_one64",
    "push %rdx",
    ".Lcc_one64:",
    "cmp $1, %rcx",
    "jb .Lcc_none64",
    "push %rsi",
    ".Lcc_none64:",
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
