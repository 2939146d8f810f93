//! x86-64 asynchronous preemption of green threads (`crate::green::preempt_async`): the stub a
//! preempted thread is sent to, which saves every register, and the resume that puts them all
//! back and jumps to the interrupted instruction.
//!
//! Neither touches the thread's own stack: compiled code may keep live data just below its
//! stack pointer (callee-cleanup's `jmp [rsp - 8]`, the MMU convention's return address), and
//! under `lookahead` or `heap` the stack may end a few bytes below it.

use core::arch::global_asm;

// stackrt_async_stub: where the preemption signal's handler sends a thread interrupted in
// compiled code (it wrote the interrupted rip and rsp into `stackrt_async_tls` words 0 and 1
// and set rsp to the top of this worker's preemption stack, word 3). In: every register but
// rip and rsp is the thread's; rsp 16-byte aligned. Never returns: the thread resumes through
// stackrt_async_resume. Builds on the preemption stack:
//
//   +----------------------------------+  preemption stack top
//   | rflags                           |  block + 632
//   | rax rcx rdx rbx rbp rsi rdi      |  block + 624 .. 576
//   | r8 r9 r10 r11 r12 r13 r14 r15    |  block + 568 .. 512
//   | fxsave area (x87, MXCSR, xmm)    |  block + 0 .. 512   <- rsp = rdi = block
//
// and calls stackrt_async_preempted(block) with rsp 16-byte aligned.
global_asm!(
    ".text",
    ".globl stackrt_async_stub",
    ".type stackrt_async_stub, @function",
    ".p2align 4",
    "stackrt_async_stub:",
    "pushfq",
    "push rax",
    "push rcx",
    "push rdx",
    "push rbx",
    "push rbp",
    "push rsi",
    "push rdi",
    "push r8",
    "push r9",
    "push r10",
    "push r11",
    "push r12",
    "push r13",
    "push r14",
    "push r15",
    "sub rsp, 512",
    "fxsave64 [rsp]",
    "mov rdi, rsp",
    "call {preempted}",
    "ud2",
    ".size stackrt_async_stub, .-stackrt_async_stub",
    preempted = sym crate::green::sched::async_resume::stackrt_async_preempted,
);

// stackrt_async_resume(save = rdi: *mut usize, frame = rsi: *const AsyncFrame), System V.
//
// Suspends the calling context as stackrt_green_switch does (pushes rbp rbx r12-r15 and stores
// rsp in *save), then resumes a thread from the frame stackrt_async_preempted filled: the block
// above (fxsave area, r15..rax, rflags at 632) followed by the thread's rip (640) and rsp (648).
// Everything is restored with loads, after the flags (popfq on the caller's stack): no
// instruction after popfq writes the flags. The jump goes through `stackrt_async_tls` word 2
// (this OS thread's), because no register is left to hold the target. Register contract: in
// rdi, rsi; out: every register of the thread.
global_asm!(
    ".text",
    ".globl stackrt_async_resume",
    ".type stackrt_async_resume, @function",
    ".p2align 4",
    "stackrt_async_resume:",
    "push rbp",
    "push rbx",
    "push r12",
    "push r13",
    "push r14",
    "push r15",
    "mov qword ptr [rdi], rsp",
    "fxrstor64 [rsi]",
    "push qword ptr [rsi + 640]",
    "pop qword ptr fs:[stackrt_async_tls@tpoff + 16]",
    "push qword ptr [rsi + 632]",
    "popfq",
    "mov rsp, qword ptr [rsi + 648]",
    "mov r15, qword ptr [rsi + 512]",
    "mov r14, qword ptr [rsi + 520]",
    "mov r13, qword ptr [rsi + 528]",
    "mov r12, qword ptr [rsi + 536]",
    "mov r11, qword ptr [rsi + 544]",
    "mov r10, qword ptr [rsi + 552]",
    "mov r9, qword ptr [rsi + 560]",
    "mov r8, qword ptr [rsi + 568]",
    "mov rdi, qword ptr [rsi + 576]",
    "mov rbp, qword ptr [rsi + 592]",
    "mov rbx, qword ptr [rsi + 600]",
    "mov rdx, qword ptr [rsi + 608]",
    "mov rcx, qword ptr [rsi + 616]",
    "mov rax, qword ptr [rsi + 624]",
    "mov rsi, qword ptr [rsi + 584]",
    "jmp qword ptr fs:[stackrt_async_tls@tpoff + 16]",
    ".size stackrt_async_resume, .-stackrt_async_resume",
);
