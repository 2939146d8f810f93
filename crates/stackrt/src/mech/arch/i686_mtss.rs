//! i686 assembly of `mtss` (ABI 8, `crate::mech::mtss`): the entry trampoline, the overflow
//! handler the entry checks call, and the return stub of a frame that overflowed onto pages.
//!
//! The thread register `ebp` holds the running thread's `MtssThread` record: word 0 the limit,
//! word 1 the native stack's top, words 2 and 3 where the return stub goes on (`ret_to`,
//! `ret_sp`). The handler stack's top is the first word of the thread-local block
//! `stackrt_chunk_tls` (`crate::chunk::handler`); the routines keep their caller's stack
//! pointer in the slot 16 bytes below it, as `stackrt_ccall` does.

use core::arch::global_asm;

// stackrt_enter_mtss(fp, a0, a1, nargs) -> eax, cdecl.
//
// Calls the C-- function `fp` with its first `nargs` (0..=2) of `a0, a1` on a fresh native
// stack of the region, then retires it. Preserves ebx, esi, edi and ebp. The C-- code
// preserves ebx, esi and edi (`cmm_codegen::emit::regs::cmm_callee_saved`); esi keeps the OS
// stack's frame (the arguments at esi + 20..).
//
//   OS stack                              native stack (region)
//   | nargs a1 a0 fp           | esi+20.. +---------------------+ top (record word 1)
//   | return address (to Rust) |          | .Lmtss_back32       |
//   | ebx ebp esi edi          |          | a1, a0 (as nargs)   | <- esp at the jmp
//   +--------------------------+ esi      | frames of fp ...    |
//   | handler stack below T = esi & -16
global_asm!(
    ".text",
    ".globl stackrt_enter_mtss",
    ".type stackrt_enter_mtss, @function",
    ".p2align 4",
    "stackrt_enter_mtss:",
    "push %ebx",
    "push %ebp",
    "push %esi",
    "push %edi",
    "mov %esp, %esi",
    "and $-16, %esp",
    "mov %esp, %eax",
    "sub $12, %esp",
    "push %eax",
    "call {enter}",
    "mov %eax, %ebp",
    "mov 4(%ebp), %esp",
    "push $.Lmtss_back32",
    "mov 32(%esi), %eax",
    "cmp $2, %eax",
    "jb .Lmtss_one32",
    "push 28(%esi)",
    ".Lmtss_one32:",
    "cmp $1, %eax",
    "jb .Lmtss_none32",
    "push 24(%esi)",
    ".Lmtss_none32:",
    "jmp *20(%esi)",
    ".Lmtss_back32:",
    "mov %esi, %esp",
    "and $-16, %esp",
    "mov %eax, %ebx",
    "sub $12, %esp",
    "push %ebp",
    "call {exit}",
    "mov %ebx, %eax",
    "mov %esi, %esp",
    "pop %edi",
    "pop %esi",
    "pop %ebp",
    "pop %ebx",
    "ret",
    ".size stackrt_enter_mtss, .-stackrt_enter_mtss",
    enter = sym crate::mech::mtss::stackrt_mtss_thread_enter,
    exit = sym crate::mech::mtss::stackrt_mtss_thread_exit,
    options(att_syntax)
);

// stackrt_mtss_overflow: called by a function's failed entry check.
//
// In:  ecx = the room the function needs below its arguments, edx = A (its argument bytes),
//      ebp = the thread's record, [esp] = the address to go on at (the function's `.Lmt_go`),
//      [esp + 4 .. esp + 4 + A) = its arguments, [esp + 4 + A] = its return address.
// Out: esp = the function's stack pointer on the pages lent to it; jumps to [esp] of the
//      call. Clobbers eax, ecx, edx, the xmm registers and the flags (free at a C-- entry).
//
// Under green threads `grow` returns 0 when the thread must wait for room, as on x86-64
// (see x86_64_mtss.rs): the green switch's frame (return address, ebp ebx esi edi) goes into
// the record's save area (end at `SAVE_END_OFFSET` = 60), the TLS words are lib_save (+12),
// lib_load (+16) and resumed (+20), and the retry words are 16, 20, 24 of the record.
global_asm!(
    ".text",
    ".globl stackrt_mtss_overflow",
    ".type stackrt_mtss_overflow, @function",
    ".p2align 4",
    "stackrt_mtss_overflow:",
    "mov %gs:stackrt_chunk_tls@ntpoff, %eax",
    "mov %esp, -16(%eax)",
    "lea -16(%eax), %esp",
    "push %edx",
    "push %ecx",
    "mov -16(%eax), %ecx",
    "add $4, %ecx",
    "push %ecx",
    "push %ebp",
    "call {grow}",
    "test %eax, %eax",
    "jz .Lmt_wait32",
    "mov %gs:stackrt_chunk_tls@ntpoff, %ecx",
    "mov -16(%ecx), %ecx",
    "mov (%ecx), %ecx",
    "mov %eax, %esp",
    "jmp *%ecx",
    ".Lmt_wait32:",
    "lea 60(%ebp), %esp",
    "call .Lmt_save32",
    "movl $1, %gs:stackrt_chunk_tls@ntpoff+20",
    "mov 16(%ebp), %esp",
    "mov 20(%ebp), %ecx",
    "mov 24(%ebp), %edx",
    "jmp stackrt_mtss_overflow",
    ".Lmt_save32:",
    "push %ebp",
    "push %ebx",
    "push %esi",
    "push %edi",
    "mov %gs:stackrt_chunk_tls@ntpoff+12, %ecx",
    "mov %gs:stackrt_chunk_tls@ntpoff+16, %edx",
    "movl $0, %gs:stackrt_chunk_tls@ntpoff+12",
    "mov %esp, (%ecx)",
    "mov %edx, %esp",
    "pop %edi",
    "pop %esi",
    "pop %ebx",
    "pop %ebp",
    "ret",
    ".size stackrt_mtss_overflow, .-stackrt_mtss_overflow",
    grow = sym crate::mech::mtss::stackrt_mtss_grow,
    options(att_syntax)
);

// stackrt_mtss_return: the return address of the first frame on a run of pages.
//
// In:  esp = the pages' top, eax / edx / xmm0 = the function's result, ebp = the record.
// Out: the same results, esp = the caller's stack pointer after the call, jumps to the real
//      return address; ecx and the flags clobbered.
global_asm!(
    ".text",
    ".globl stackrt_mtss_return",
    ".type stackrt_mtss_return, @function",
    ".p2align 4",
    "stackrt_mtss_return:",
    "mov %gs:stackrt_chunk_tls@ntpoff, %ecx",
    "lea -32(%ecx), %esp",
    "mov %eax, 16(%esp)",
    "mov %edx, 20(%esp)",
    "movsd %xmm0, 24(%esp)",
    "sub $12, %esp",
    "push %ebp",
    "call {shrink}",
    "add $16, %esp",
    "mov 16(%esp), %eax",
    "mov 20(%esp), %edx",
    "movsd 24(%esp), %xmm0",
    "mov 12(%ebp), %esp",
    "jmp *8(%ebp)",
    ".size stackrt_mtss_return, .-stackrt_mtss_return",
    shrink = sym crate::mech::mtss::stackrt_mtss_shrink,
    options(att_syntax)
);
