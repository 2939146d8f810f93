//! x86-64 context switch of the green threads (issue: green threads on chunked stacks): save
//! the System V callee-saved registers and the stack pointer of one context, resume another.
//! Everything else is dead at a switch: switches happen inside C calls (the thread library),
//! and C code may clobber every caller-saved register. MXCSR and the x87 control word are not
//! switched: neither C-- code nor the runtime changes them, so all contexts share one setting
//! (as Go's goroutine switch does).

use core::arch::global_asm;

// stackrt_green_switch(save = rdi: *mut usize, to = rsi: usize), System V.
//
// Pushes rbp rbx r12-r15, stores rsp in *save, loads rsp = to, pops the other context's
// registers and returns into it. Register contract: in rdi, rsi; out: the resumed context's
// callee-saved registers and rsp; no other register is written (the caller-saved ones arrive
// in the resumed context as they were, which its C caller must assume lost anyway).
//
//   a suspended context's stack
//   | ...the context's frames         |
//   | return address (into its caller)|  <- sp + 48
//   | rbp                             |  <- sp + 40
//   | rbx                             |  <- sp + 32
//   | r12                             |  <- sp + 24
//   | r13                             |  <- sp + 16
//   | r14                             |  <- sp + 8
//   | r15                             |  <- sp = the saved word
//
// A new context (crate::green::context::init) starts with this frame laid out so that the
// return lands in stackrt_green_start with r12 = entry function, r13 = its argument:
//
//   +--------------------------------+  T (16-byte aligned stack top)
//   | 0 (no return address)          |  T - 8
//   | stackrt_green_start            |  T - 16
//   | rbp rbx r12=entry r13=arg r14 r15 |  T - 24 .. T - 64  <- the initial sp
global_asm!(
    ".text",
    ".globl stackrt_green_switch",
    ".type stackrt_green_switch, @function",
    ".p2align 4",
    "stackrt_green_switch:",
    "push rbp",
    "push rbx",
    "push r12",
    "push r13",
    "push r14",
    "push r15",
    "mov qword ptr [rdi], rsp",
    "mov rsp, rsi",
    "pop r15",
    "pop r14",
    "pop r13",
    "pop r12",
    "pop rbx",
    "pop rbp",
    "ret",
    ".size stackrt_green_switch, .-stackrt_green_switch",
);

// stackrt_green_start: where a new context's first switch returns. In: r12 = entry function
// `extern "C" fn(usize) -> !`, r13 = its argument, rsp = T - 8. Aligns rsp to 16 for the
// call; the entry never returns (it switches away for good), so a return traps.
global_asm!(
    ".text",
    ".globl stackrt_green_start",
    ".type stackrt_green_start, @function",
    ".p2align 4",
    "stackrt_green_start:",
    "and rsp, -16",
    "mov rdi, r13",
    "call r12",
    "ud2",
    ".size stackrt_green_start, .-stackrt_green_start",
);
