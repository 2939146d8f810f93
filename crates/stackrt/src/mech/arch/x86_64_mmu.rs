//! x86-64 assembly of the MMU mechanisms (ABIs 4 `mmu` and 5 `mmu-reuse`, thesis 3.4.4): the
//! entry trampoline (listing 3.21's role) and the underflow stubs. Overflow has no routine here:
//! the caller's probe faults and `crate::signals` links the chunk (listing 3.24's role).
//!
//! The emitted sequences are documented in `crates/cmm-codegen/src/emit/mech/mmu.rs`. The
//! chunk header is `ChunkHeader` (word `i` at `8 * i`: 0 thread stack `T`, 1 previous SP,
//! 2 previous header, 3 limit, 4 resume = the real return address of the chunk's first frame).

use core::arch::global_asm;

// stackrt_enter_mmu(fp = rdi, a0 = rsi, a1 = rdx, nargs = rcx) -> rax, System V.
//
// Calls the C-- function `fp` with its first `nargs` (0..=2) of `a0, a1` on a fresh first
// chunk with a guard page (at least as big as the u32 stack need at `fp - 8`, which is
// `stacksizeof(fp)`), writing the return address where a caller's probe would (the lowest word
// of fp's frame), then gives the thread's chunks back. Preserves every System V callee-saved
// register.
//
//   native stack                              first chunk
//   | return address (to Rust) |              +-----------------------+ H = header
//   | rbx rbp r12 r13 r14 r15  |  48 bytes    | a1 (if nargs = 2)     |
//   +--------------------------+ X            | a0 (if nargs >= 1)    | <- rsp at the jmp
//   | (alignment)              |              | frame of fp           |
//   | X                        | T + 8        | .Lmmu_back64          | H - need (fp's [rsp])
//   | reclaim budget (u32)     | T + 0        +-----------------------+
//   +--------------------------+ T = thread stack (16-byte aligned): header word 0
//   | underflow stubs' save areas and Rust frames (below T, only while they run)
//
// fp returns with `add rsp, S + A; jmp [rsp - (S + A)]`: rsp = H again at .Lmmu_back64 (every
// chunk linked since has been left through an underflow stub), and [H] = T.
global_asm!(
    ".text",
    ".globl stackrt_enter_mmu",
    ".type stackrt_enter_mmu, @function",
    ".p2align 4",
    "stackrt_enter_mmu:",
    "push %rbx",
    "push %rbp",
    "push %r12",
    "push %r13",
    "push %r14",
    "push %r15",
    "mov %rdi, %r12",
    "mov %rsi, %r13",
    "mov %rdx, %r14",
    "mov %rcx, %r15",
    "mov %rsp, %rbx",
    "and $-16, %rsp",
    "sub $16, %rsp",
    "mov %rbx, 8(%rsp)",
    "mov %rsp, %rdi",
    "mov -8(%r12), %esi",
    "call {enter}",
    "mov %rax, %rsp",
    "mov -8(%r12), %esi",
    "sub %rsi, %rax",
    "lea .Lmmu_back64(%rip), %rcx",
    "mov %rcx, (%rax)",
    "cmp $2, %r15",
    "jb .Lmmu_one64",
    "push %r14",
    ".Lmmu_one64:",
    "cmp $1, %r15",
    "jb .Lmmu_none64",
    "push %r13",
    ".Lmmu_none64:",
    "jmp *%r12",
    ".Lmmu_back64:",
    "mov (%rsp), %rsp",
    "mov %rax, %rbx",
    "call {exit}",
    "mov %rbx, %rax",
    "mov 8(%rsp), %rsp",
    "pop %r15",
    "pop %r14",
    "pop %r13",
    "pop %r12",
    "pop %rbp",
    "pop %rbx",
    "ret",
    ".size stackrt_enter_mmu, .-stackrt_enter_mmu",
    enter = sym crate::chunk::stackrt_chunk_thread_enter_guarded,
    exit = sym crate::chunk::stackrt_chunk_thread_exit,
    options(att_syntax)
);

// stackrt_mmu_underflow_reuse: where the first frame of a chunk returns to under `mmu-reuse`
// (the fault handler wrote this address in place of its return address), and where a C call
// made on a new chunk continues (the emitted code stored its resume address first).
//
// In:  rsp = H, the header of the chunk being left; rax / xmm0 = the call's result; rbx and
//      r12-r15 live (C-- preserved registers).
// Out: rsp = H's previous SP, jumps to H's resume address; H marked unlinked (word 0 = -1,
//      `crate::chunk::UNLINKED`), the runtime does its bookkeeping later. Clobbers rcx rdx
//      r10 r11 and the flags (dead after a C-- or C call); no call, but once per reclaim
//      budget (the 32-bit word at T), when it calls stackrt_chunk_reclaim on the native stack.
//
//   chunk H (left)          previous chunk                native stack (reclaim path only)
//   +------------------+ H  | caller's frame |            +-----------------+ T
//   | T, prev_sp, prev |    +----------------+ <- prev_sp | xmm0            | T - 16
//   | header, resume   |       (rsp after the stub)       | rax             | T - 32
//                                                         | resume          | T - 40
//                                                         | prev_sp         | T - 48 <- rsp
global_asm!(
    ".text",
    ".globl stackrt_mmu_underflow_reuse",
    ".type stackrt_mmu_underflow_reuse, @function",
    ".p2align 4",
    "stackrt_mmu_underflow_reuse:",
    "mov 32(%rsp), %rcx",
    "mov 0(%rsp), %r11",
    "mov 16(%rsp), %rdx",
    "movq $-1, 0(%rsp)",
    "mov 8(%rsp), %rsp",
    "subl $1, (%r11)",
    "jz .Lmmu_reclaim64",
    "jmp *%rcx",
    ".Lmmu_reclaim64:",
    "mov %rsp, %r10",
    "mov %r11, %rsp",
    "sub $48, %rsp",
    "mov %r10, 0(%rsp)",
    "mov %rcx, 8(%rsp)",
    "mov %rax, 16(%rsp)",
    "movups %xmm0, 32(%rsp)",
    "mov %rdx, %rdi",
    "call {reclaim}",
    "mov 8(%rsp), %rcx",
    "mov 16(%rsp), %rax",
    "movups 32(%rsp), %xmm0",
    "mov 0(%rsp), %rsp",
    "jmp *%rcx",
    ".size stackrt_mmu_underflow_reuse, .-stackrt_mmu_underflow_reuse",
    reclaim = sym crate::chunk::stackrt_chunk_reclaim,
    options(att_syntax)
);

// stackrt_mmu_underflow: the same place under `mmu`, which gives the chunk back to the
// system at once (thesis: `free` in the underflow handler), so it always calls the runtime.
//
// In:  as stackrt_mmu_underflow_reuse.
// Out: rsp = H's previous SP, jumps to H's resume address; H unlinked and released by
//      stackrt_chunk_underflow. Clobbers rcx rdx rsi rdi r8-r11, xmm1-15 and the flags.
//
//   native stack
//   +-----------------+ T
//   | xmm0            | +32
//   | rax             | +16
//   | resume          | +8
//   | prev_sp         | +0 <- rsp at the call (T - 48)
global_asm!(
    ".text",
    ".globl stackrt_mmu_underflow",
    ".type stackrt_mmu_underflow, @function",
    ".p2align 4",
    "stackrt_mmu_underflow:",
    "mov 32(%rsp), %rcx",
    "mov 8(%rsp), %r10",
    "mov %rsp, %rdi",
    "mov 0(%rsp), %rsp",
    "sub $48, %rsp",
    "mov %r10, 0(%rsp)",
    "mov %rcx, 8(%rsp)",
    "mov %rax, 16(%rsp)",
    "movups %xmm0, 32(%rsp)",
    "call {underflow}",
    "mov 8(%rsp), %rcx",
    "mov 16(%rsp), %rax",
    "movups 32(%rsp), %xmm0",
    "mov 0(%rsp), %rsp",
    "jmp *%rcx",
    ".size stackrt_mmu_underflow, .-stackrt_mmu_underflow",
    underflow = sym crate::chunk::stackrt_chunk_underflow,
    options(att_syntax)
);
