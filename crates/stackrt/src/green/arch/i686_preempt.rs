//! i686 asynchronous preemption of green threads (`crate::green::preempt_async`): the stub a
//! preempted thread is sent to, which saves every register, and the resume that puts them all
//! back and jumps to the interrupted instruction.
//!
//! Neither touches the thread's own stack: compiled code may keep live data just below its
//! stack pointer (callee-cleanup's `jmp [esp - 4]`, the MMU convention's return address), and
//! under `lookahead` or `heap` the stack may end a few bytes below it.

use core::arch::global_asm;

// stackrt_async_stub: where the preemption signal's handler sends a thread interrupted in
// compiled code (it wrote the interrupted eip and esp into `stackrt_async_tls` words 0 and 1
// and set esp to the top of this worker's preemption stack, word 3). In: every register but
// eip and esp is the thread's; esp 16-byte aligned. Never returns: the thread resumes through
// stackrt_async_resume. Builds on the preemption stack:
//
//   +----------------------------------+  preemption stack top
//   | eflags                           |  block + 540
//   | eax ecx edx ebx ebp esi edi      |  block + 536 .. 512
//   | fxsave area (x87, MXCSR, xmm)    |  block + 0 .. 512   <- esp = block
//
// and calls stackrt_async_preempted(block) (cdecl) with esp 16-byte aligned at the call.
global_asm!(
    ".text",
    ".globl stackrt_async_stub",
    ".type stackrt_async_stub, @function",
    ".p2align 4",
    "stackrt_async_stub:",
    "pushfd",
    "push eax",
    "push ecx",
    "push edx",
    "push ebx",
    "push ebp",
    "push esi",
    "push edi",
    "sub esp, 512",
    "fxsave [esp]",
    "mov eax, esp",
    "sub esp, 12",
    "push eax",
    "call {preempted}",
    "ud2",
    ".size stackrt_async_stub, .-stackrt_async_stub",
    preempted = sym crate::green::sched::async_resume::stackrt_async_preempted,
);

// stackrt_async_resume(save: *mut usize, frame: *const AsyncFrame), cdecl.
//
// Suspends the calling context as stackrt_green_switch does (pushes ebp ebx esi edi and stores
// esp in *save), then resumes a thread from the frame stackrt_async_preempted filled: the block
// above (fxsave area, edi..eax, eflags at 540) followed by the thread's eip (544) and esp
// (548). Everything is restored with loads, after the flags (popfd on the caller's stack): no
// instruction after popfd writes the flags. The jump goes through `stackrt_async_tls` word 2
// (this OS thread's), because no register is left to hold the target. Register contract: in
// [esp + 4] = save, [esp + 8] = frame; out: every register of the thread.
global_asm!(
    ".text",
    ".globl stackrt_async_resume",
    ".type stackrt_async_resume, @function",
    ".p2align 4",
    "stackrt_async_resume:",
    "mov eax, dword ptr [esp + 4]",
    "mov ecx, dword ptr [esp + 8]",
    "push ebp",
    "push ebx",
    "push esi",
    "push edi",
    "mov dword ptr [eax], esp",
    "fxrstor [ecx]",
    "push dword ptr [ecx + 544]",
    "pop dword ptr gs:[stackrt_async_tls@ntpoff + 8]",
    "push dword ptr [ecx + 540]",
    "popfd",
    "mov esp, dword ptr [ecx + 548]",
    "mov edi, dword ptr [ecx + 512]",
    "mov esi, dword ptr [ecx + 516]",
    "mov ebp, dword ptr [ecx + 520]",
    "mov ebx, dword ptr [ecx + 524]",
    "mov edx, dword ptr [ecx + 528]",
    "mov eax, dword ptr [ecx + 536]",
    "mov ecx, dword ptr [ecx + 532]",
    "jmp dword ptr gs:[stackrt_async_tls@ntpoff + 8]",
    ".size stackrt_async_resume, .-stackrt_async_resume",
);
