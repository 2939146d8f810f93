//! i686 entry trampolines: calling a C-- function (program `main`, a thread's entry) from Rust
//! under each emission-stage mechanism.
//!
//! Both trampolines are cdecl functions `fn(fp, a0, a1, nargs) -> u32` that call the C--
//! function at `fp` with its first `nargs` (0 to 2) arguments of `a0, a1` and return its `eax`. C-- code preserves no register (thesis 3.3.1), so the trampolines save the
//! cdecl callee-saved registers `ebp ebx esi edi`. The C-- convention wants `esp` 16-byte
//! aligned before the caller starts pushing; both trampolines establish that. They are
//! position-independent (no absolute relocations in `.text`).

use core::arch::global_asm;

// Mechanism `traditional` (ABI 1): cdecl-shaped: push the arguments, `call`, the callee leaves
// them.
//
// Register contract: in [esp+4] = fp, [esp+8] = a0, [esp+12] = a1, [esp+16] = number of
// arguments to push (0, 1 or 2: what the callee declares, so its frame stays 16-byte aligned);
// out eax = result; ebp ebx esi edi preserved. C-- code preserves no register, so the old esp
// is saved at a 256-byte boundary `A` and found again by rounding esp up after the call.
//
//   | nargs, a1, a0, fp        |  cdecl arguments
//   | return address (to Rust) |
//   | ebp ebx esi edi          |  saved, 16 bytes
//   | ... (< 256 bytes)        |
//   +--------------------------+  A = esp rounded down to 256
//   | old esp                  |  A - 4
//   | (unused, 12 bytes)       |
//   | a1 (if nargs = 2)        |
//   | a0 (if nargs >= 1)       |  <- esp at the `call`
//
// After the call esp lies in [A - 24, A - 16], so (esp + 255) & -256 = A.
global_asm!(
    ".text",
    ".globl stackrt_enter_traditional",
    ".type stackrt_enter_traditional, @function",
    ".p2align 4",
    "stackrt_enter_traditional:",
    "push %ebp",
    "push %ebx",
    "push %esi",
    "push %edi",
    "mov 20(%esp), %eax",
    "mov 24(%esp), %ecx",
    "mov 28(%esp), %edx",
    "mov 32(%esp), %esi",
    "mov %esp, %ebx",
    "and $-256, %esp",
    "mov %ebx, -4(%esp)",
    "sub $16, %esp",
    "cmp $2, %esi",
    "jb .Ltr_one32",
    "push %edx",
    ".Ltr_one32:",
    "cmp $1, %esi",
    "jb .Ltr_none32",
    "push %ecx",
    ".Ltr_none32:",
    "call *%eax",
    "add $255, %esp",
    "and $-256, %esp",
    "mov -4(%esp), %esp",
    "pop %edi",
    "pop %esi",
    "pop %ebx",
    "pop %ebp",
    "ret",
    ".size stackrt_enter_traditional, .-stackrt_enter_traditional",
    options(att_syntax)
);

// Mechanism `callee-cleanup` (ABI 2): push the return address and the arguments, `jmp`; the
// callee pops its frame, arguments and return address and jumps back to `.Lcc_back32`. The old
// esp is saved at a 256-byte boundary `A` as above. Position-independent: the return address
// is computed with a `call`/`pop` pair, no absolute relocation.
//
// Register contract: in [esp+4] = fp, [esp+8] = a0, [esp+12] = a1, [esp+16] = number of
// arguments (0, 1 or 2, what the callee declares); out eax = result; ebp ebx esi edi preserved.
//
//   | nargs, a1, a0, fp        |  cdecl arguments
//   | return address (to Rust) |
//   | ebp ebx esi edi          |  saved
//   | ... (< 256 bytes)        |
//   +--------------------------+  A = esp rounded down to 256
//   | old esp                  |  A - 4
//   | (unused, 12 bytes)       |
//   | return address .Lcc_back32 |
//   | a1 (if nargs = 2)        |
//   | a0 (if nargs >= 1)       |  <- esp at the `jmp`
//
// The callee pops everything it was given, so esp is A - 16 again at `.Lcc_back32`.
global_asm!(
    ".text",
    ".globl stackrt_enter_callee_cleanup",
    ".type stackrt_enter_callee_cleanup, @function",
    ".p2align 4",
    "stackrt_enter_callee_cleanup:",
    "push %ebp",
    "push %ebx",
    "push %esi",
    "push %edi",
    "mov 20(%esp), %eax",
    "mov 24(%esp), %ecx",
    "mov 28(%esp), %edx",
    "mov 32(%esp), %esi",
    "mov %esp, %ebx",
    "and $-256, %esp",
    "mov %ebx, -4(%esp)",
    "sub $16, %esp",
    "call .Lcc_here32",
    ".Lcc_here32:",
    "pop %ebx",
    "lea (.Lcc_back32-.Lcc_here32)(%ebx), %ebx",
    "push %ebx",
    "cmp $2, %esi",
    "jb .Lcc_one32",
    "push %edx",
    ".Lcc_one32:",
    "cmp $1, %esi",
    "jb .Lcc_none32",
    "push %ecx",
    ".Lcc_none32:",
    "jmp *%eax",
    ".Lcc_back32:",
    "add $255, %esp",
    "and $-256, %esp",
    "mov -4(%esp), %esp",
    "pop %edi",
    "pop %esi",
    "pop %ebx",
    "pop %ebp",
    "ret",
    ".size stackrt_enter_callee_cleanup, .-stackrt_enter_callee_cleanup",
    options(att_syntax)
);
