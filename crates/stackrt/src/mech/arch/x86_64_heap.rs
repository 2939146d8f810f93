//! x86-64 assembly of the `heap` and `heap-malloc` mechanisms (ABIs 6 and 7, thesis 3.4.2):
//! the entry trampoline (listing 3.7's role) and the three stubs the emitted code calls on the
//! thread's C stack (listings 3.8-3.9's role, but only for a new slab, a large frame or, under
//! `heap-malloc`, every frame). The allocator itself is `crate::mech::heap`; the emitted
//! sequences are documented in `crates/cmm-codegen/src/emit/mech/heap.rs`.
//!
//! The thread's allocator state is the thread-local block `stackrt_heap_tls` (word 0: the C
//! stack's top `T`), addressed as `fs:[stackrt_heap_tls@tpoff + offset]`.

use core::arch::global_asm;

// stackrt_enter_heap(fp = rdi, a0 = rsi, a1 = rdx, nargs = rcx) -> rax, System V.
//
// Calls the C-- function `fp` with its first `nargs` (0..=2) of `a0, a1` in a heap block of
// the u32 stack need at `fp - 8` (its `stacksizeof`), then ends the thread's heap code (every
// slab back to the pool). Preserves every System V callee-saved register.
//
//   native stack (the C stack)                entry block (from stackrt_heap_thread_enter)
//   | return address (to Rust) |              +-----------------------+ top (16-byte aligned)
//   | rbx rbp r12 r13 r14 r15  |  48 bytes    | T  ("the caller's SP")|
//   +--------------------------+ X            | return address        |
//   | (alignment)              |              | a1 (if nargs = 2)     |
//   | X                        | T + 8        | a0 (if nargs >= 1)    |
//   | reclaim budget (chunks)  | T + 0        | frame of fp ...       |
//   +--------------------------+ T = C stack top (TLS word 0), 16-byte aligned
//   | C calls of C-- code, the stubs' save areas and Rust frames
//
// The C-- function returns callee-cleanup's way (it pops its arguments and the return address
// and jumps to `.Lheap_back64`). C-- code preserves rbx and r12-r15 but the trampoline does not
// rely on it after the return: it finds T in the TLS block and X at T + 8.
global_asm!(
    ".text",
    ".globl stackrt_enter_heap",
    ".type stackrt_enter_heap, @function",
    ".p2align 4",
    "stackrt_enter_heap:",
    "push rbx",
    "push rbp",
    "push r12",
    "push r13",
    "push r14",
    "push r15",
    "mov r12, rdi",
    "mov r13, rsi",
    "mov r14, rdx",
    "mov r15, rcx",
    "mov rbx, rsp",
    "and rsp, -16",
    "sub rsp, 16",
    "mov qword ptr [rsp + 8], rbx",
    "mov rdi, rsp",
    "mov esi, dword ptr [r12 - 8]",
    "call {enter}",
    "mov rsp, rax",
    "push qword ptr fs:[stackrt_heap_tls@tpoff]",
    "lea rax, [rip + .Lheap_back64]",
    "push rax",
    "cmp r15, 2",
    "jb 2f",
    "push r14",
    "2:",
    "cmp r15, 1",
    "jb 3f",
    "push r13",
    "3:",
    "jmp r12",
    ".Lheap_back64:",
    "mov rsp, qword ptr fs:[stackrt_heap_tls@tpoff]",
    "mov rbx, rax",
    "call {exit}",
    "mov rax, rbx",
    "mov rsp, qword ptr [rsp + 8]",
    "pop r15",
    "pop r14",
    "pop r13",
    "pop r12",
    "pop rbp",
    "pop rbx",
    "ret",
    ".size stackrt_enter_heap, .-stackrt_enter_heap",
    enter = sym crate::mech::heap::stackrt_heap_thread_enter,
    exit = sym crate::mech::heap::stackrt_heap_thread_exit,
);

// The stubs: stackrt_heap_slab, stackrt_heap_alloc, stackrt_heap_free. Each calls its Rust half
// `fn(size, top)` and preserves every register but the flags: they run inside a call sequence,
// before the arguments are pushed (the slab and allocation stubs: any caller-saved register may
// hold an argument) or after the return (the free stub: rax and xmm0 hold the result).
//
// In:  rsp = T - 16 (the emitted code set rsp = T, pushed the block size and called), so
//      [rsp] = return address, [rsp + 8] = block size; rcx = the block's top (free only).
// Out: every register as on entry (the allocation's result is in the TLS word `large`).
//
//   C stack
//   +----------------------+ T
//   | block size           | +344
//   | return address       | +336
//   | xmm0 .. xmm15        | +80 .. +336
//   | (unused)             | +72
//   | rax rcx rdx rsi rdi  |
//   | r8 r9 r10 r11        | +0 <- rsp at the Rust call (T - 352, 16-byte aligned)
macro_rules! heap_stub {
    ($name:literal, $rust:path) => {
        global_asm!(
            ".text",
            concat!(".globl ", $name),
            concat!(".type ", $name, ", @function"),
            ".p2align 4",
            concat!($name, ":"),
            "sub rsp, 336",
            "mov qword ptr [rsp + 0], rax",
            "mov qword ptr [rsp + 8], rcx",
            "mov qword ptr [rsp + 16], rdx",
            "mov qword ptr [rsp + 24], rsi",
            "mov qword ptr [rsp + 32], rdi",
            "mov qword ptr [rsp + 40], r8",
            "mov qword ptr [rsp + 48], r9",
            "mov qword ptr [rsp + 56], r10",
            "mov qword ptr [rsp + 64], r11",
            "movups xmmword ptr [rsp + 80], xmm0",
            "movups xmmword ptr [rsp + 96], xmm1",
            "movups xmmword ptr [rsp + 112], xmm2",
            "movups xmmword ptr [rsp + 128], xmm3",
            "movups xmmword ptr [rsp + 144], xmm4",
            "movups xmmword ptr [rsp + 160], xmm5",
            "movups xmmword ptr [rsp + 176], xmm6",
            "movups xmmword ptr [rsp + 192], xmm7",
            "movups xmmword ptr [rsp + 208], xmm8",
            "movups xmmword ptr [rsp + 224], xmm9",
            "movups xmmword ptr [rsp + 240], xmm10",
            "movups xmmword ptr [rsp + 256], xmm11",
            "movups xmmword ptr [rsp + 272], xmm12",
            "movups xmmword ptr [rsp + 288], xmm13",
            "movups xmmword ptr [rsp + 304], xmm14",
            "movups xmmword ptr [rsp + 320], xmm15",
            "mov rdi, qword ptr [rsp + 344]",
            "mov rsi, rcx",
            "call {rust}",
            "mov rax, qword ptr [rsp + 0]",
            "mov rcx, qword ptr [rsp + 8]",
            "mov rdx, qword ptr [rsp + 16]",
            "mov rsi, qword ptr [rsp + 24]",
            "mov rdi, qword ptr [rsp + 32]",
            "mov r8, qword ptr [rsp + 40]",
            "mov r9, qword ptr [rsp + 48]",
            "mov r10, qword ptr [rsp + 56]",
            "mov r11, qword ptr [rsp + 64]",
            "movups xmm0, xmmword ptr [rsp + 80]",
            "movups xmm1, xmmword ptr [rsp + 96]",
            "movups xmm2, xmmword ptr [rsp + 112]",
            "movups xmm3, xmmword ptr [rsp + 128]",
            "movups xmm4, xmmword ptr [rsp + 144]",
            "movups xmm5, xmmword ptr [rsp + 160]",
            "movups xmm6, xmmword ptr [rsp + 176]",
            "movups xmm7, xmmword ptr [rsp + 192]",
            "movups xmm8, xmmword ptr [rsp + 208]",
            "movups xmm9, xmmword ptr [rsp + 224]",
            "movups xmm10, xmmword ptr [rsp + 240]",
            "movups xmm11, xmmword ptr [rsp + 256]",
            "movups xmm12, xmmword ptr [rsp + 272]",
            "movups xmm13, xmmword ptr [rsp + 288]",
            "movups xmm14, xmmword ptr [rsp + 304]",
            "movups xmm15, xmmword ptr [rsp + 320]",
            "add rsp, 336",
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
