//! i686 assembly of the `heap` and `heap-malloc` mechanisms (ABIs 6 and 7, thesis 3.4.2): the
//! entry trampoline (listing 3.7's role) and the three stubs the emitted code calls on the
//! thread's C stack (listings 3.8-3.9's role, but only for a new slab, a large frame or, under
//! `heap-malloc`, every frame). The allocator itself is `crate::mech::heap`; the emitted
//! sequences are documented in `crates/cmm-codegen/src/emit/mech/heap.rs`.
//!
//! The thread's allocator state is the thread-local block `stackrt_heap_tls` (word 0: the C
//! stack's top `T`), addressed as `gs:[stackrt_heap_tls@ntpoff + offset]`. The thesis keeps
//! the thread stack in `EBP`; here `ebp` is the call sequences' base register instead.

use core::arch::global_asm;

// stackrt_enter_heap(fp, a0, a1, nargs) -> eax, cdecl.
//
// Calls the C-- function `fp` with its first `nargs` (0..=2) of `a0, a1` in a heap block of
// the u32 stack need at `fp - 8`, then ends the thread's heap code. Preserves ebp ebx esi edi.
// The C-- function returns callee-cleanup's way: it pops its arguments and the return address
// (`.Lheap_back32`, found position-independently) and jumps there; after the return the
// trampoline finds T in the TLS block and X at T + 12.
//
//   native stack (the C stack)                 entry block
//   | nargs a1 a0 fp    | X + 20 ..            +-----------------------+ top (16-byte aligned)
//   | return address    | X + 16               | T  ("the caller's SP")|
//   | ebp ebx esi edi   | 16 bytes             | return address        |
//   +-------------------+ X                    | a1 (if nargs = 2)     |
//   | (alignment)       |                      | a0 (if nargs >= 1)    |
//   | X                 | T + 12               | frame of fp ...       |
//   | (unused)          | T + 4 .. T + 8
//   | reclaim budget    | T + 0 (u32, the chunk runtime's)
//   +-------------------+ T = C stack top (TLS word 0), 16-byte aligned
//   | need, T           | cdecl arguments of stackrt_heap_thread_enter (T - 16 ..)
//   | C calls of C-- code, the stubs' save areas and Rust frames
global_asm!(
    ".text",
    ".globl stackrt_enter_heap",
    ".type stackrt_enter_heap, @function",
    ".p2align 4",
    "stackrt_enter_heap:",
    "push ebp",
    "push ebx",
    "push esi",
    "push edi",
    "mov ebx, esp",
    "and esp, -16",
    "sub esp, 16",
    "mov dword ptr [esp + 12], ebx",
    "mov eax, esp",
    "sub esp, 16",
    "mov dword ptr [esp], eax",
    "mov eax, dword ptr [ebx + 20]",
    "mov eax, dword ptr [eax - 8]",
    "mov dword ptr [esp + 4], eax",
    "call {enter}",
    "mov esp, eax",
    "push dword ptr gs:[stackrt_heap_tls@ntpoff]",
    "call .Lheap_here32",
    ".Lheap_here32:",
    "pop eax",
    // Intel syntax takes one symbol per memory operand; the difference is AT&T's.
    ".att_syntax",
    "lea (.Lheap_back32 - .Lheap_here32)(%eax), %eax",
    ".intel_syntax noprefix",
    "push eax",
    "mov ecx, dword ptr [ebx + 32]",
    "cmp ecx, 2",
    "jb 2f",
    "push dword ptr [ebx + 28]",
    "2:",
    "cmp ecx, 1",
    "jb 3f",
    "push dword ptr [ebx + 24]",
    "3:",
    "jmp dword ptr [ebx + 20]",
    ".Lheap_back32:",
    "mov esp, dword ptr gs:[stackrt_heap_tls@ntpoff]",
    "mov esi, eax",
    "sub esp, 16",
    "call {exit}",
    "mov eax, esi",
    "mov esp, dword ptr [esp + 28]",
    "pop edi",
    "pop esi",
    "pop ebx",
    "pop ebp",
    "ret",
    ".size stackrt_enter_heap, .-stackrt_enter_heap",
    enter = sym crate::mech::heap::stackrt_heap_thread_enter,
    exit = sym crate::mech::heap::stackrt_heap_thread_exit,
);

// The stubs: stackrt_heap_slab, stackrt_heap_alloc, stackrt_heap_free. Each calls its Rust half
// `fn(size, top)` (cdecl) and preserves every register but the flags (see the x86-64 module for
// why).
//
// In:  esp = T - 8 (the emitted code set esp = T, pushed the block size and called), so
//      [esp] = return address, [esp + 4] = block size; ecx = the block's top (free only).
// Out: every register as on entry (the allocation's result is in the TLS word `large`).
//
//   C stack
//   +----------------------+ T
//   | block size           | +172
//   | return address       | +168
//   | (unused)             | +156
//   | eax ecx edx          | +144 .. +156
//   | xmm0 .. xmm7         | +16 .. +144
//   | (unused)             | +8
//   | top, size            | +0 <- esp at the Rust call (T - 176, 16-byte aligned)
macro_rules! heap_stub {
    ($name:literal, $rust:path) => {
        global_asm!(
            ".text",
            concat!(".globl ", $name),
            concat!(".type ", $name, ", @function"),
            ".p2align 4",
            concat!($name, ":"),
            "sub esp, 168",
            "mov dword ptr [esp + 144], eax",
            "mov dword ptr [esp + 148], ecx",
            "mov dword ptr [esp + 152], edx",
            "movups xmmword ptr [esp + 16], xmm0",
            "movups xmmword ptr [esp + 32], xmm1",
            "movups xmmword ptr [esp + 48], xmm2",
            "movups xmmword ptr [esp + 64], xmm3",
            "movups xmmword ptr [esp + 80], xmm4",
            "movups xmmword ptr [esp + 96], xmm5",
            "movups xmmword ptr [esp + 112], xmm6",
            "movups xmmword ptr [esp + 128], xmm7",
            "mov eax, dword ptr [esp + 172]",
            "mov dword ptr [esp], eax",
            "mov dword ptr [esp + 4], ecx",
            "call {rust}",
            "mov eax, dword ptr [esp + 144]",
            "mov ecx, dword ptr [esp + 148]",
            "mov edx, dword ptr [esp + 152]",
            "movups xmm0, xmmword ptr [esp + 16]",
            "movups xmm1, xmmword ptr [esp + 32]",
            "movups xmm2, xmmword ptr [esp + 48]",
            "movups xmm3, xmmword ptr [esp + 64]",
            "movups xmm4, xmmword ptr [esp + 80]",
            "movups xmm5, xmmword ptr [esp + 96]",
            "movups xmm6, xmmword ptr [esp + 112]",
            "movups xmm7, xmmword ptr [esp + 128]",
            "add esp, 168",
            "ret",
            concat!(".size ", $name, ", .-", $name),
            rust = sym $rust,
        );
    };
}

heap_stub!(
    "stackrt_heap_slab",
    crate::mech::heap::stackrt_heap_new_slab
);
heap_stub!(
    "stackrt_heap_alloc",
    crate::mech::heap::stackrt_heap_alloc_general
);
heap_stub!(
    "stackrt_heap_free",
    crate::mech::heap::stackrt_heap_free_general
);
