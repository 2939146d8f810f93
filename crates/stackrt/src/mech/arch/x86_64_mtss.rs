//! x86-64 assembly of `mtss` (ABI 8, `crate::mech::mtss`): the entry trampoline, the overflow
//! handler the entry checks call, and the return stub of a frame that overflowed onto pages.
//!
//! The thread register `rbp` holds the running thread's `MtssThread` record: word 0 the limit,
//! word 1 the native stack's top, words 2 and 3 where the return stub goes on (`ret_to`,
//! `ret_sp`). The handler stack's top is the first word of the thread-local block
//! `stackrt_chunk_tls` (`crate::chunk::handler`); the routines keep their caller's stack
//! pointer in the slot 16 bytes below it, as `stackrt_ccall` does.

use core::arch::global_asm;

// stackrt_enter_mtss(fp = rdi, a0 = rsi, a1 = rdx, nargs = rcx) -> rax, System V.
//
// Calls the C-- function `fp` with its first `nargs` (0..=2) of `a0, a1` on a fresh native
// stack of the region, then retires it. Preserves every System V callee-saved register. The
// C-- code preserves rbx and r12-r14 (`r15` is the spare of a mechanism that reserves `rbp`,
// which C-- calls clobber: `cmm_codegen::emit::regs::spare`), so `rbx` carries the OS stack
// pointer across it.
//
//   OS stack                              native stack (region)
//   | return address (to Rust) |          +---------------------+ top (record word 1)
//   | rbx rbp r12 r13 r14 r15  |          | .Lmtss_back64       |  pushed return address
//   +--------------------------+ r15, rbx | a1 (if nargs = 2)   |
//   | (alignment)              |          | a0 (if nargs >= 1)  | <- rsp at the jmp
//   +--------------------------+ T        | frames of fp ...    |
//   | handler stack: C calls, handlers    |
//
// fp returns with `add rsp, S + A + 8; jmp [rsp - 8]`: rsp = top at .Lmtss_back64.
global_asm!(
    ".text",
    ".globl stackrt_enter_mtss",
    ".type stackrt_enter_mtss, @function",
    ".p2align 4",
    "stackrt_enter_mtss:",
    "push %rbx",
    "push %rbp",
    "push %r12",
    "push %r13",
    "push %r14",
    "push %r15",
    "mov %rdi, %r12",
    "mov %rsi, %r13",
    "mov %rdx, %r14",
    "mov %rcx, %rbx",
    "mov %rsp, %r15",
    "and $-16, %rsp",
    "mov %rsp, %rdi",
    "call {enter}",
    "mov %rax, %rbp",
    "mov 8(%rbp), %rsp",
    "lea .Lmtss_back64(%rip), %rax",
    "push %rax",
    "cmp $2, %rbx",
    "jb .Lmtss_one64",
    "push %r14",
    ".Lmtss_one64:",
    "cmp $1, %rbx",
    "jb .Lmtss_none64",
    "push %r13",
    ".Lmtss_none64:",
    "mov %r15, %rbx",
    "jmp *%r12",
    ".Lmtss_back64:",
    "mov %rbx, %r15",
    "mov %r15, %rsp",
    "and $-16, %rsp",
    "mov %rax, %rbx",
    "mov %rbp, %rdi",
    "call {exit}",
    "mov %rbx, %rax",
    "mov %r15, %rsp",
    "pop %r15",
    "pop %r14",
    "pop %r13",
    "pop %r12",
    "pop %rbp",
    "pop %rbx",
    "ret",
    ".size stackrt_enter_mtss, .-stackrt_enter_mtss",
    enter = sym crate::mech::mtss::stackrt_mtss_thread_enter,
    exit = sym crate::mech::mtss::stackrt_mtss_thread_exit,
    options(att_syntax)
);

// stackrt_mtss_overflow: called by a function's failed entry check.
//
// In:  r11d = the room the function needs below its arguments, r10d = A (its argument bytes),
//      rbp = the thread's record, [rsp] = the address to go on at (the function's `.Lmt_go`),
//      [rsp + 8 .. rsp + 8 + A) = its arguments, [rsp + 8 + A] = its return address.
// Out: rsp = the function's stack pointer on the pages lent to it (its arguments and return
//      address copied there, the latter replaced by stackrt_mtss_return); jumps to [rsp] of
//      the call. Clobbers the registers a C-- function's entry has free: rax, rcx, rdx, rsi,
//      rdi, r8-r11, xmm0-15 and the flags (C-- passes nothing in registers).
//
// Under green threads `grow` returns 0 when the thread must wait for room
// (`crate::mech::mtss::green`, "Waiting for room"): it wrote the retry words of the record
// (4-6: the stack pointer at this call, r11d, r10d) and left a switch in the TLS words
// lib_save (+24) and lib_load (+32), as the thread library's stub gets it. The thread's stack
// has no room for its context, so the green switch's frame (return address, rbp rbx r12-r15)
// is pushed into the record's save area (words 7-14, `SAVE_END_OFFSET` = 120 its end) and
// the saved stack pointer points there. Resumed, it sets the TLS word `resumed` (+40, for
// `grow` to complete the switch) and calls this handler again as the entry check did.
global_asm!(
    ".text",
    ".globl stackrt_mtss_overflow",
    ".type stackrt_mtss_overflow, @function",
    ".p2align 4",
    "stackrt_mtss_overflow:",
    "mov %fs:stackrt_chunk_tls@tpoff, %rax",
    "mov %rsp, -16(%rax)",
    "lea 8(%rsp), %rsi",
    "mov %rbp, %rdi",
    "mov %r11d, %edx",
    "mov %r10d, %ecx",
    "lea -16(%rax), %rsp",
    "call {grow}",
    "test %rax, %rax",
    "jz .Lmt_wait64",
    "mov %fs:stackrt_chunk_tls@tpoff, %r11",
    "mov -16(%r11), %r11",
    "mov (%r11), %r11",
    "mov %rax, %rsp",
    "jmp *%r11",
    ".Lmt_wait64:",
    "lea 120(%rbp), %rsp",
    "call .Lmt_save64",
    "movq $1, %fs:stackrt_chunk_tls@tpoff+40",
    "mov 32(%rbp), %rsp",
    "mov 40(%rbp), %r11",
    "mov 48(%rbp), %r10",
    "jmp stackrt_mtss_overflow",
    ".Lmt_save64:",
    "push %rbp",
    "push %rbx",
    "push %r12",
    "push %r13",
    "push %r14",
    "push %r15",
    "mov %fs:stackrt_chunk_tls@tpoff+24, %rdi",
    "mov %fs:stackrt_chunk_tls@tpoff+32, %rsi",
    "movq $0, %fs:stackrt_chunk_tls@tpoff+24",
    "mov %rsp, (%rdi)",
    "mov %rsi, %rsp",
    "pop %r15",
    "pop %r14",
    "pop %r13",
    "pop %r12",
    "pop %rbx",
    "pop %rbp",
    "ret",
    ".size stackrt_mtss_overflow, .-stackrt_mtss_overflow",
    grow = sym crate::mech::mtss::stackrt_mtss_grow,
    options(att_syntax)
);

// stackrt_mtss_return: the return address of the first frame on a run of pages.
//
// In:  rsp = the pages' top (the frame removed itself, its arguments and its return address),
//      rax / rdx / xmm0 = the function's result, rbp = the thread's record.
// Out: the same results, rsp = the caller's stack pointer after the call, jumps to the real
//      return address; r10, r11, the other caller-saved registers and the flags clobbered
//      (dead after a C-- call).
global_asm!(
    ".text",
    ".globl stackrt_mtss_return",
    ".type stackrt_mtss_return, @function",
    ".p2align 4",
    "stackrt_mtss_return:",
    "mov %fs:stackrt_chunk_tls@tpoff, %r11",
    "lea -48(%r11), %rsp",
    "mov %rax, (%rsp)",
    "mov %rdx, 8(%rsp)",
    "movsd %xmm0, 16(%rsp)",
    "mov %rbp, %rdi",
    "call {shrink}",
    "mov (%rsp), %rax",
    "mov 8(%rsp), %rdx",
    "movsd 16(%rsp), %xmm0",
    "mov 24(%rbp), %rsp",
    "jmp *16(%rbp)",
    ".size stackrt_mtss_return, .-stackrt_mtss_return",
    shrink = sym crate::mech::mtss::stackrt_mtss_shrink,
    options(att_syntax)
);
