//! i686 context switch of the green threads (issue: green threads on chunked stacks): save the
//! cdecl callee-saved registers and the stack pointer of one context, resume another.
//! Everything else is dead at a switch: switches happen inside C calls (the thread library),
//! and C code may clobber eax, ecx, edx and every xmm register. MXCSR and the x87 control word
//! are not switched: neither C-- code nor the runtime changes them.

use core::arch::global_asm;

// stackrt_green_switch(save: *mut usize, to: usize), cdecl.
//
// Pushes ebp ebx esi edi, stores esp in *save, loads esp = to, pops the other context's
// registers and returns into it. Register contract: in [esp + 4] = save, [esp + 8] = to;
// clobbers eax, edx; out: the resumed context's callee-saved registers and esp.
//
//   a suspended context's stack
//   | to, save (its call's arguments) |
//   | return address (into its caller)|  <- sp + 16
//   | ebp                             |  <- sp + 12
//   | ebx                             |  <- sp + 8
//   | esi                             |  <- sp + 4
//   | edi                             |  <- sp = the saved word
//
// A new context (crate::green::context::init) starts with this frame laid out so that the
// return lands in stackrt_green_start with ebx = entry function, esi = its argument:
//
//   +--------------------------------+  T (16-byte aligned stack top)
//   | 0 (no return address)          |  T - 4
//   | stackrt_green_start            |  T - 8
//   | ebp ebx=entry esi=arg edi      |  T - 12 .. T - 24  <- the initial sp
global_asm!(
    ".text",
    ".globl stackrt_green_switch",
    ".type stackrt_green_switch, @function",
    ".p2align 4",
    "stackrt_green_switch:",
    "mov eax, dword ptr [esp + 4]",
    "mov edx, dword ptr [esp + 8]",
    "push ebp",
    "push ebx",
    "push esi",
    "push edi",
    "mov dword ptr [eax], esp",
    "mov esp, edx",
    "pop edi",
    "pop esi",
    "pop ebx",
    "pop ebp",
    "ret",
    ".size stackrt_green_switch, .-stackrt_green_switch",
);

// stackrt_green_start: where a new context's first switch returns. In: ebx = entry function
// `extern "C" fn(usize) -> !`, esi = its argument, esp = T - 4. Calls the entry with esp
// 16-byte aligned at the call (cdecl); the entry never returns, so a return traps.
global_asm!(
    ".text",
    ".globl stackrt_green_start",
    ".type stackrt_green_start, @function",
    ".p2align 4",
    "stackrt_green_start:",
    "and esp, -16",
    "sub esp, 12",
    "push esi",
    "call ebx",
    "ud2",
    ".size stackrt_green_start, .-stackrt_green_start",
);
