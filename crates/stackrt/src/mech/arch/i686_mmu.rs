//! i686 assembly of the MMU mechanisms (ABIs 4 `mmu` and 5 `mmu-reuse`, thesis 3.4.4): the
//! entry trampoline (listing 3.21's role) and the underflow stubs. Overflow has no routine here:
//! the caller's probe faults and `crate::signals` links the chunk (listing 3.24's role).
//!
//! The emitted sequences are documented in `crates/cmm-codegen/src/emit/mech/mmu.rs`. The
//! chunk header is `ChunkHeader` (word `i` at `4 * i`: 0 thread stack `T`, 1 previous SP,
//! 2 previous header, 3 limit, 4 resume = the real return address of the chunk's first frame).
//! No absolute relocations in `.text`: label addresses come from a `call`/`pop` pair.

use core::arch::global_asm;

// stackrt_enter_mmu(fp, a0, a1, nargs) -> eax, cdecl.
//
// Calls the C-- function `fp` with its first `nargs` (0..=2) of `a0, a1` on a fresh first
// chunk with a guard page (at least as big as the u32 stack need at `fp - 8`, which is
// `stacksizeof(fp)`), writing the return address where a caller's probe would (the lowest word
// of fp's frame), then gives the thread's chunks back. Preserves ebp ebx esi edi.
//
//   native stack                              first chunk
//   | nargs a1 a0 fp    | X + 20 ..           +-----------------------+ H = header
//   | return address    | X + 16              | a1 (if nargs = 2)     |
//   | ebp ebx esi edi   | 16 bytes            | a0 (if nargs >= 1)    | <- esp at the jmp
//   +-------------------+ X                   | frame of fp           |
//   | (alignment)       |                     | .Lmmu_back32          | H - need (fp's [esp])
//   | X                 | T + 12              +-----------------------+
//   | (unused)          | T + 4 .. T + 8
//   | reclaim budget    | T + 0 (u32)
//   +-------------------+ T = thread stack (16-byte aligned): header word 0
//   | need, T           | cdecl arguments of stackrt_chunk_thread_enter_guarded (T - 16 ..)
//
// fp returns with `add esp, S + A; jmp [esp - (S + A)]`: esp = H again at .Lmmu_back32.
global_asm!(
    ".text",
    ".globl stackrt_enter_mmu",
    ".type stackrt_enter_mmu, @function",
    ".p2align 4",
    "stackrt_enter_mmu:",
    "push %ebp",
    "push %ebx",
    "push %esi",
    "push %edi",
    "mov %esp, %ebx",
    "and $-16, %esp",
    "sub $16, %esp",
    "mov %ebx, 12(%esp)",
    "mov %esp, %eax",
    "sub $16, %esp",
    "mov %eax, (%esp)",
    "mov 20(%ebx), %eax",
    "mov -8(%eax), %eax",
    "mov %eax, 4(%esp)",
    "call {enter}",
    "mov %eax, %esp",
    "mov 20(%ebx), %ecx",
    "sub -8(%ecx), %eax",
    "call .Lmmu_pc32",
    ".Lmmu_pc32:",
    "pop %edx",
    "lea .Lmmu_back32-.Lmmu_pc32(%edx), %edx",
    "mov %edx, (%eax)",
    "mov 32(%ebx), %ecx",
    "cmp $2, %ecx",
    "jb .Lmmu_one32",
    "push 28(%ebx)",
    ".Lmmu_one32:",
    "cmp $1, %ecx",
    "jb .Lmmu_none32",
    "push 24(%ebx)",
    ".Lmmu_none32:",
    "jmp *20(%ebx)",
    ".Lmmu_back32:",
    "mov (%esp), %esp",
    "mov %eax, %esi",
    "sub $16, %esp",
    "call {exit}",
    "mov %esi, %eax",
    "mov 28(%esp), %esp",
    "pop %edi",
    "pop %esi",
    "pop %ebx",
    "pop %ebp",
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
// In:  esp = H, the header of the chunk being left; eax / xmm0 = the call's result; ebx esi edi
//      live (C-- preserved registers); ebp dead (the call base register is only live inside a
//      call sequence).
// Out: esp = H's previous SP, jumps to H's resume address; H marked unlinked (word 0 = -1,
//      `crate::chunk::UNLINKED`), the runtime does its bookkeeping later. Clobbers ecx edx ebp
//      and the flags; no call, but once per reclaim budget (the 32-bit word at T), when it
//      calls stackrt_chunk_reclaim(previous header) on the native stack.
//
//   native stack (only on the reclaim path)
//   +-----------------+ T
//   | xmm0            | T - 32
//   | rax             | T - 40
//   | resume          | T - 44
//   | prev_sp         | T - 48
//   | (pad) cur       | T - 64 <- esp at the call
global_asm!(
    ".text",
    ".globl stackrt_mmu_underflow_reuse",
    ".type stackrt_mmu_underflow_reuse, @function",
    ".p2align 4",
    "stackrt_mmu_underflow_reuse:",
    "mov 16(%esp), %ecx",
    "mov 0(%esp), %edx",
    "mov 8(%esp), %ebp",
    "movl $-1, 0(%esp)",
    "mov 4(%esp), %esp",
    "subl $1, (%edx)",
    "jz .Lmmu_reclaim32",
    "jmp *%ecx",
    ".Lmmu_reclaim32:",
    "mov %esp, -48(%edx)",
    "mov %ecx, -44(%edx)",
    "mov %eax, -40(%edx)",
    "movups %xmm0, -32(%edx)",
    "lea -64(%edx), %esp",
    "mov %ebp, (%esp)",
    "call {reclaim}",
    "mov 20(%esp), %ecx",
    "mov 24(%esp), %eax",
    "movups 32(%esp), %xmm0",
    "mov 16(%esp), %esp",
    "jmp *%ecx",
    ".size stackrt_mmu_underflow_reuse, .-stackrt_mmu_underflow_reuse",
    reclaim = sym crate::chunk::stackrt_chunk_reclaim,
    options(att_syntax)
);

// stackrt_mmu_underflow: the same place under `mmu`, which gives the chunk back to the system
// at once (thesis: `free` in the underflow handler), so it always calls the runtime.
//
// In:  as stackrt_mmu_underflow_reuse.
// Out: esp = H's previous SP, jumps to H's resume address; H unlinked and released by
//      stackrt_chunk_underflow(H). Clobbers ecx edx ebp, xmm1-7 and the flags.
//
//   native stack: the same save area as stackrt_mmu_underflow_reuse's, with H at T - 64.
global_asm!(
    ".text",
    ".globl stackrt_mmu_underflow",
    ".type stackrt_mmu_underflow, @function",
    ".p2align 4",
    "stackrt_mmu_underflow:",
    "mov 16(%esp), %ecx",
    "mov 0(%esp), %edx",
    "mov %esp, %ebp",
    "mov 4(%esp), %esp",
    "mov %esp, -48(%edx)",
    "mov %ecx, -44(%edx)",
    "mov %eax, -40(%edx)",
    "movups %xmm0, -32(%edx)",
    "lea -64(%edx), %esp",
    "mov %ebp, (%esp)",
    "call {underflow}",
    "mov 20(%esp), %ecx",
    "mov 24(%esp), %eax",
    "movups 32(%esp), %xmm0",
    "mov 16(%esp), %esp",
    "jmp *%ecx",
    ".size stackrt_mmu_underflow, .-stackrt_mmu_underflow",
    underflow = sym crate::chunk::stackrt_chunk_underflow,
    options(att_syntax)
);
