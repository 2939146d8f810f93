//! x86-64 assembly of the `lookahead` mechanism (ABI 3, thesis 3.4.3): the entry trampoline
//! (listing 3.13's role), the overflow handler (listing 3.14), the reclaim handler, the
//! pending switch and the thread-library stub of green threads. They switch to the OS thread's
//! handler stack (`crate::chunk::handler`: the thread's native stack, or a green-thread
//! worker's own; its top is the TLS word `fs:[stackrt_chunk_tls@tpoff]`) and call the chunk
//! runtime's Rust entry points (`crate::chunk::global`) with `rsp` 16-byte aligned. The
//! thesis's handlers switch to `[ebp]`, the thread's own native stack; a green thread has
//! none to spare. The underflow (listing 3.15) has no
//! handler: the emitted code unlinks the chunk inline and marks it (`crate::chunk::UNLINKED`),
//! and calls the reclaim handler only once per reclaim budget (8 MiB) of such unlinks.
//!
//! The chunk register is `rbp`: the address of the current chunk's header (`ChunkHeader`, word
//! `i` at `8 * i`: 0 thread stack, 1 previous SP, 2 previous header, 3 limit). The emitted
//! sequences that call the handlers are documented in
//! `crates/cmm-codegen/src/emit/mech/lookahead.rs`.

use core::arch::global_asm;

// stackrt_enter_lookahead(fp = rdi, a0 = rsi, a1 = rdx, nargs = rcx) -> rax, System V.
//
// Calls the C-- function `fp` with its first `nargs` (0..=2) of `a0, a1` on a fresh first
// chunk (at least as big as the u32 stack need at `fp - 8`), then gives the thread's chunks
// back. Preserves every System V callee-saved register. The call is callee-cleanup's (the
// return address pushed before the arguments, a jump; the callee pops both and jumps back).
// The first SP is the highest address at most H that is `ENTRY_PHASE` modulo `PHASE_LINE`
// (`crate::chunk::header`: the phase the fixed-stack entries give `fp`'s frames), so the
// chunk is asked for the need plus `PHASE_ROOM`.
//
//   native stack                              first chunk
//   | return address (to Rust) |              +-----------------------+ H = rbp = header
//   |                          |              | (0-48 bytes: phase)   |
//   | rbx rbp r12 r13 r14 r15  |  48 bytes    | return address        |
//   +--------------------------+ X            | a1 (if nargs = 2)     |
//   | (alignment)              |              | a0 (if nargs >= 1)    |
//   | X                        | T + 8        | frame of fp ...       |
//   | reclaim budget (u32)     | T + 0        v                       v
//   +--------------------------+ T = thread stack (16-byte aligned): header word 0
//   | (an OS thread: the handler stack, whose frames grow down from T while a handler runs;
//   |  a green thread: its first chunk's header right below T)
//
// The calls into the runtime run on the handler stack, or on T when the OS thread has none
// yet (its enter makes T the handler stack). When `fp` returns, every chunk switch has been
// undone (each checkpoint unlinks its chunk), so rbp = H again and [rbp] = T finds X.
global_asm!(
    ".text",
    ".globl stackrt_enter_lookahead",
    ".type stackrt_enter_lookahead, @function",
    ".p2align 4",
    "stackrt_enter_lookahead:",
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
    "add ${room}, %esi",
    "mov %fs:stackrt_chunk_tls@tpoff, %rax",
    "test %rax, %rax",
    "jz .Lla_enter_here64",
    "mov %rax, %rsp",
    ".Lla_enter_here64:",
    "call {enter}",
    "mov %rax, %rbp",
    "lea -{phase}(%rax), %rsp",
    "and $-{line}, %rsp",
    "add ${phase}, %rsp",
    "lea .Lla_entered64(%rip), %rax",
    "push %rax",
    "cmp $2, %r15",
    "jb .Lla_one64",
    "push %r14",
    ".Lla_one64:",
    "cmp $1, %r15",
    "jb .Lla_none64",
    "push %r13",
    ".Lla_none64:",
    "jmp *%r12",
    ".Lla_entered64:",
    "mov (%rbp), %rsp",
    "mov %rax, %rbx",
    "mov %rsp, %r12",
    "mov %fs:stackrt_chunk_tls@tpoff, %rsp",
    "call {exit}",
    "mov %r12, %rsp",
    "mov %rbx, %rax",
    "mov 8(%rsp), %rsp",
    "pop %r15",
    "pop %r14",
    "pop %r13",
    "pop %r12",
    "pop %rbp",
    "pop %rbx",
    "ret",
    ".size stackrt_enter_lookahead, .-stackrt_enter_lookahead",
    enter = sym crate::chunk::stackrt_chunk_thread_enter,
    exit = sym crate::chunk::stackrt_chunk_thread_exit,
    phase = const crate::chunk::header::ENTRY_PHASE,
    line = const crate::chunk::header::PHASE_LINE,
    room = const crate::chunk::header::PHASE_ROOM,
    options(att_syntax)
);

// stackrt_green_enter_lookahead(fp = rdi, a0 = rsi, a1 = rdx, nargs = rcx, done = r8) -> !,
// System V: a green thread's entry. As stackrt_enter_lookahead, but it never returns: when
// `fp` returns, the chunks go back and `done(result)` is called on the thread's stack at T
// (`done` never returns either). So nothing is kept for a return: no callee-saved register
// is saved, and the entry frames of every green thread are 64 bytes smaller (a green
// thread's block holds them: `crate::green::stacks::ENTRY_ROOM`). Registers: everything is
// clobbered; r12-r15 hold fp, a0, a1, nargs until the call (the Rust entry keeps them), rbx
// and r12 the result and T around the exit.
//
//   the thread's stack (block)                first chunk
//   | the caller's frames      |              +-----------------------+ H = rbp = header
//   | return address           |              | return address        |
//   +--------------------------+ (aligned)    | a1 (if nargs = 2)     |
//   | done                     | T + 8        | a0 (if nargs >= 1)    |
//   | reclaim budget (u32)     | T + 0        | frame of fp ...       |
//   +--------------------------+ T = thread stack: header word 0
//   | the first chunk's header right below T, then its stack; `done` runs from T down once
//   | the chunks are back
global_asm!(
    ".text",
    ".globl stackrt_green_enter_lookahead",
    ".type stackrt_green_enter_lookahead, @function",
    ".p2align 4",
    "stackrt_green_enter_lookahead:",
    "mov %rdi, %r12",
    "mov %rsi, %r13",
    "mov %rdx, %r14",
    "mov %rcx, %r15",
    "and $-16, %rsp",
    "sub $16, %rsp",
    "mov %r8, 8(%rsp)",
    "mov %rsp, %rdi",
    "mov -8(%r12), %esi",
    "mov %fs:stackrt_chunk_tls@tpoff, %rax",
    "test %rax, %rax",
    "jz .Lgla_enter_here64",
    "mov %rax, %rsp",
    ".Lgla_enter_here64:",
    "call {enter}",
    "mov %rax, %rbp",
    "mov %rax, %rsp",
    "lea .Lgla_entered64(%rip), %rax",
    "push %rax",
    "cmp $2, %r15",
    "jb .Lgla_one64",
    "push %r14",
    ".Lgla_one64:",
    "cmp $1, %r15",
    "jb .Lgla_none64",
    "push %r13",
    ".Lgla_none64:",
    "jmp *%r12",
    ".Lgla_entered64:",
    "mov (%rbp), %rsp",
    "mov %rax, %rbx",
    "mov %rsp, %r12",
    "mov %fs:stackrt_chunk_tls@tpoff, %rsp",
    "call {exit}",
    "mov %r12, %rsp",
    "mov %rbx, %rdi",
    "call *8(%rsp)",
    "ud2",
    ".size stackrt_green_enter_lookahead, .-stackrt_green_enter_lookahead",
    enter = sym crate::chunk::stackrt_chunk_thread_enter,
    exit = sym crate::chunk::stackrt_chunk_thread_exit,
    options(att_syntax)
);

// stackrt_lookahead_overflow: called by a checkpoint's stub when the reserve does not fit.
//
// In:  r11 = reserve R (bytes below the caller's SP before its pushes), r10 = A (bytes the
//      caller pushed: arguments and padding), rbp = current header, [rsp] = return address
//      into the stub, [rsp + 8 .. rsp + 8 + A) = the pushed arguments.
// Out: rbp = new header; rsp = new header - A - 8 with the arguments and the return address
//      copied there; returns into the stub, which makes the call on the new chunk.
// Preserved: every register but r10, r11 and the flags (the System V argument registers
//      rdi rsi rdx rcx r8 r9 rax and xmm0-7 too: a checkpoint may be a C call).
//
// If the checkpoint hook asked for a switch (`crate::chunk::handler`), the handler jumps to
// stackrt_lookahead_switch instead of returning, once rsp is on the new chunk.
//
//   old chunk                       handler stack (top S)            new chunk
//   | caller frame     | caller_sp  +------------------+ S          +------------------+ H'
//   | args (A bytes)   |            | xmm0..xmm7       | +80..+208  | args (copied)    |
//   | ret into stub    | <- rsp     | packed A<<32 | R | +64        | ret into stub    |
//   |                  |            | old rsp          | +56        +------------------+ <- rsp
//   |                  |            | rax rcx rdx rsi  |            |                  |
//   |                  |            | rdi r8 r9        | +0 <- rsp at the call (S - 208)
global_asm!(
    ".text",
    ".globl stackrt_lookahead_overflow",
    ".type stackrt_lookahead_overflow, @function",
    ".p2align 4",
    "stackrt_lookahead_overflow:",
    "shl $32, %r10",
    "or %r10, %r11",
    "mov %rsp, %r10",
    "mov %fs:stackrt_chunk_tls@tpoff, %rsp",
    "sub $208, %rsp",
    "mov %rax, 0(%rsp)",
    "mov %rcx, 8(%rsp)",
    "mov %rdx, 16(%rsp)",
    "mov %rsi, 24(%rsp)",
    "mov %rdi, 32(%rsp)",
    "mov %r8, 40(%rsp)",
    "mov %r9, 48(%rsp)",
    "mov %r10, 56(%rsp)",
    "mov %r11, 64(%rsp)",
    "movups %xmm0, 80(%rsp)",
    "movups %xmm1, 96(%rsp)",
    "movups %xmm2, 112(%rsp)",
    "movups %xmm3, 128(%rsp)",
    "movups %xmm4, 144(%rsp)",
    "movups %xmm5, 160(%rsp)",
    "movups %xmm6, 176(%rsp)",
    "movups %xmm7, 192(%rsp)",
    "mov %rbp, %rdi",
    "mov %r11, %rsi",
    "shr $32, %rsi",
    "lea 8(%r10,%rsi), %rsi",
    "mov %r11d, %edx",
    "call {overflow}",
    "mov %rax, %rbp",
    "mov 56(%rsp), %r10",
    "mov 64(%rsp), %rcx",
    "shr $32, %rcx",
    "lea -8(%rax), %r11",
    "sub %rcx, %r11",
    "add $8, %rcx",
    ".Lla_copy64:",
    "sub $8, %rcx",
    "mov (%r10,%rcx), %rdx",
    "mov %rdx, (%r11,%rcx)",
    "jnz .Lla_copy64",
    "mov 0(%rsp), %rax",
    "mov 8(%rsp), %rcx",
    "mov 16(%rsp), %rdx",
    "mov 24(%rsp), %rsi",
    "mov 32(%rsp), %rdi",
    "mov 40(%rsp), %r8",
    "mov 48(%rsp), %r9",
    "movups 80(%rsp), %xmm0",
    "movups 96(%rsp), %xmm1",
    "movups 112(%rsp), %xmm2",
    "movups 128(%rsp), %xmm3",
    "movups 144(%rsp), %xmm4",
    "movups 160(%rsp), %xmm5",
    "movups 176(%rsp), %xmm6",
    "movups 192(%rsp), %xmm7",
    "mov %r11, %rsp",
    "cmpq $0, %fs:stackrt_chunk_tls@tpoff+8",
    "jne stackrt_lookahead_switch",
    "ret",
    ".size stackrt_lookahead_overflow, .-stackrt_lookahead_overflow",
    overflow = sym crate::chunk::stackrt_chunk_overflow,
    options(att_syntax)
);

// stackrt_lookahead_overflow_cmm: the overflow handler for checkpoints at calls to C--
// functions. Same contract as stackrt_lookahead_overflow, but a C-- call passes nothing in
// registers and clobbers every register but rbx, r12-r15 (preserved by the Rust code too), so
// nothing is saved: this is the hot split's path.
//
// The hot split's fast path (`crate::chunk::handler::HOT_SPLIT_OFFSET`): where the thread's
// hot-split word allows it and the chunk after rbp (header word 7) is one compiled code
// unlinked, saved at this caller_sp, after rbp, with room for R, the handler relinks it
// itself (word 0 = rbp's thread stack T, the budget at [T] incremented back) and goes on as
// if the runtime had returned it (rax). Otherwise it calls the runtime.
//
// In:  r11 = reserve R, r10 = A, rbp = current header, [rsp] = return address into the stub,
//      [rsp + 8 .. rsp + 8 + A) = the pushed arguments.
// Out: rbp = new header; rsp = new header - A - 8 - P with the arguments and the return
//      address copied there, where P (0 to 56) gives rsp the old rsp's address modulo
//      `crate::chunk::header::PHASE_LINE`: the callee's frames lie on their cache lines as on
//      a contiguous stack. P is 0 on a green-thread worker (its chains link small classes
//      sized to what threads touch: `crate::chunk::handler::FROM_ENTER_OFFSET`) and where the
//      chunk has not P bytes to spare below R (the phase never makes a chunk larger).
//      (The C-call handler above places at P = 0: its checkpoint's underflow test is
//      `rsp == rbp`.)
//      Clobbers rax rcx rdx rsi rdi r8-r11, xmm0-15, flags.
//
//   old chunk                       handler stack (top S)            new chunk
//   | caller frame     | caller_sp  +------------------+ S          +------------------+ H'
//   |                  |            |                  |            | (P bytes: phase) |
//   | args (A bytes)   |            | packed A<<32 | R | +8         | args (copied)    |
//   | ret into stub    | <- rsp     | old rsp          | +0 <- rsp  | ret into stub    |
//   |                  |            +------------------+ (S - 16)   +------------------+ <- rsp
global_asm!(
    ".text",
    ".globl stackrt_lookahead_overflow_cmm",
    ".type stackrt_lookahead_overflow_cmm, @function",
    ".p2align 4",
    "stackrt_lookahead_overflow_cmm:",
    "shl $32, %r10",
    "or %r10, %r11",
    "mov %rsp, %r10",
    "mov %fs:stackrt_chunk_tls@tpoff, %rsp",
    "sub $16, %rsp",
    "mov %r10, 0(%rsp)",
    "mov %r11, 8(%rsp)",
    "mov %rbp, %rdi",
    "mov %r11, %rsi",
    "shr $32, %rsi",
    "lea 8(%r10,%rsi), %rsi",
    "mov %r11d, %edx",
    "cmpq $0, %fs:stackrt_chunk_tls@tpoff+{hot}",
    "je .Lla_slow64_cmm",
    "mov {link}(%rdi), %rax",
    "test %rax, %rax",
    "jz .Lla_slow64_cmm",
    "cmpq $-1, {mark}(%rax)",
    "jne .Lla_slow64_cmm",
    "cmp %rsi, {prev_sp}(%rax)",
    "jne .Lla_slow64_cmm",
    "cmp %rdi, {prev_header}(%rax)",
    "jne .Lla_slow64_cmm",
    "mov %rax, %rcx",
    "sub {limit}(%rax), %rcx",
    "lea {slack}(%rdx), %r8",
    "cmp %r8, %rcx",
    "jb .Lla_slow64_cmm",
    "mov {mark}(%rdi), %rcx",
    "mov %rcx, {mark}(%rax)",
    "addl $1, (%rcx)",
    "jmp .Lla_linked64_cmm",
    ".Lla_slow64_cmm:",
    "call {overflow}",
    ".Lla_linked64_cmm:",
    "mov %rax, %rbp",
    "mov 0(%rsp), %r10",
    "mov 8(%rsp), %rcx",
    "shr $32, %rcx",
    "lea -8(%rax), %r11",
    "sub %rcx, %r11",
    // The phase: P = (r11 - old rsp) mod PHASE_LINE on an OS thread's chain, if the chunk
    // has P bytes to spare below the reserve (header - limit - R - slack), else 0.
    "xor %edx, %edx",
    "cmpq $0, %fs:stackrt_chunk_tls@tpoff+{own}",
    "je .Lla_placed64_cmm",
    "mov %r11, %rdx",
    "sub %r10, %rdx",
    "and ${line_mask}, %rdx",
    "mov %rax, %r8",
    "sub {limit}(%rax), %r8",
    "mov 8(%rsp), %r9d",
    "add ${slack}, %r9",
    "sub %r9, %r8",
    "xor %r9d, %r9d",
    "cmp %r8, %rdx",
    "cmova %r9, %rdx",
    ".Lla_placed64_cmm:",
    "sub %rdx, %r11",
    "add $8, %rcx",
    ".Lla_copy64_cmm:",
    "sub $8, %rcx",
    "mov (%r10,%rcx), %rdx",
    "mov %rdx, (%r11,%rcx)",
    "jnz .Lla_copy64_cmm",
    "mov %r11, %rsp",
    "cmpq $0, %fs:stackrt_chunk_tls@tpoff+8",
    "jne stackrt_lookahead_switch",
    "ret",
    ".size stackrt_lookahead_overflow_cmm, .-stackrt_lookahead_overflow_cmm",
    overflow = sym crate::chunk::stackrt_chunk_overflow,
    hot = const crate::chunk::handler::HOT_SPLIT_OFFSET,
    link = const crate::chunk::header::OFF_LINK,
    mark = const crate::chunk::header::OFF_THREAD_STACK,
    prev_sp = const crate::chunk::header::OFF_PREV_SP,
    prev_header = const crate::chunk::header::OFF_PREV_HEADER,
    limit = const crate::chunk::header::OFF_LIMIT,
    slack = const crate::chunk::header::CHECK_SLACK,
    line_mask = const crate::chunk::header::PHASE_LINE - 1,
    own = const crate::chunk::handler::FROM_ENTER_OFFSET,
    options(att_syntax)
);

// stackrt_lookahead_reclaim: called by compiled code when the reclaim budget at [T] reached
// zero at an inline unlink (see `crate::chunk`, "Reclaim budget").
//
// In:  rbp = the chunk the code runs on (header; word 0 = T), rsp = the caller's SP in it.
// Out: every register as on entry but r11 and the flags; the budget at [T] refilled.
//
//   chunk (caller)                handler stack (top S)
//   | caller frame    |           +------------------+ S
//   | ret into code   | <- rsp    | xmm0..xmm15      | +80..+336
//   |                 |           | old rsp          | +64
//   |                 |           | rax rcx rdx rsi  |
//   |                 |           | rdi r8 r9 r10    | +0 <- rsp at the call (S - 336)
global_asm!(
    ".text",
    ".globl stackrt_lookahead_reclaim",
    ".type stackrt_lookahead_reclaim, @function",
    ".p2align 4",
    "stackrt_lookahead_reclaim:",
    "mov %rsp, %r11",
    "mov %fs:stackrt_chunk_tls@tpoff, %rsp",
    "sub $336, %rsp",
    "mov %rax, 0(%rsp)",
    "mov %rcx, 8(%rsp)",
    "mov %rdx, 16(%rsp)",
    "mov %rsi, 24(%rsp)",
    "mov %rdi, 32(%rsp)",
    "mov %r8, 40(%rsp)",
    "mov %r9, 48(%rsp)",
    "mov %r10, 56(%rsp)",
    "mov %r11, 64(%rsp)",
    "movups %xmm0, 80(%rsp)",
    "movups %xmm1, 96(%rsp)",
    "movups %xmm2, 112(%rsp)",
    "movups %xmm3, 128(%rsp)",
    "movups %xmm4, 144(%rsp)",
    "movups %xmm5, 160(%rsp)",
    "movups %xmm6, 176(%rsp)",
    "movups %xmm7, 192(%rsp)",
    "movups %xmm8, 208(%rsp)",
    "movups %xmm9, 224(%rsp)",
    "movups %xmm10, 240(%rsp)",
    "movups %xmm11, 256(%rsp)",
    "movups %xmm12, 272(%rsp)",
    "movups %xmm13, 288(%rsp)",
    "movups %xmm14, 304(%rsp)",
    "movups %xmm15, 320(%rsp)",
    "mov %rbp, %rdi",
    "call {reclaim}",
    "mov 0(%rsp), %rax",
    "mov 8(%rsp), %rcx",
    "mov 16(%rsp), %rdx",
    "mov 24(%rsp), %rsi",
    "mov 32(%rsp), %rdi",
    "mov 40(%rsp), %r8",
    "mov 48(%rsp), %r9",
    "mov 56(%rsp), %r10",
    "movups 80(%rsp), %xmm0",
    "movups 96(%rsp), %xmm1",
    "movups 112(%rsp), %xmm2",
    "movups 128(%rsp), %xmm3",
    "movups 144(%rsp), %xmm4",
    "movups 160(%rsp), %xmm5",
    "movups 176(%rsp), %xmm6",
    "movups 192(%rsp), %xmm7",
    "movups 208(%rsp), %xmm8",
    "movups 224(%rsp), %xmm9",
    "movups 240(%rsp), %xmm10",
    "movups 256(%rsp), %xmm11",
    "movups 272(%rsp), %xmm12",
    "movups 288(%rsp), %xmm13",
    "movups 304(%rsp), %xmm14",
    "movups 320(%rsp), %xmm15",
    "mov 64(%rsp), %rsp",
    "ret",
    ".size stackrt_lookahead_reclaim, .-stackrt_lookahead_reclaim",
    reclaim = sym crate::chunk::stackrt_chunk_reclaim,
    options(att_syntax)
);

// stackrt_lookahead_switch: the end of an overflow whose checkpoint hook asked for a switch
// (a preemption, a decision of the deterministic scheduler). Jumped to by the overflow
// handlers instead of their `ret`, with rsp already on the new chunk, which has
// `crate::chunk::handler::SWITCH_ROOM` bytes to spare for this.
//
// In:  rsp = the new chunk's SP ([rsp] = return address into the stub), every register as the
//      overflow handler returns it.
// Out: returns into the stub, perhaps on another OS thread, with every register as on entry
//      but r10, r11 and the flags (the System V argument registers and xmm0-7 too: the
//      checkpoint may be a C call's).
//
//   new chunk
//   | args (copied)    |
//   | ret into stub    | <- rsp on entry (r11)
//   | (alignment)      |
//   | xmm0..xmm7       | +80..+208
//   | old rsp          | +56
//   | rax rcx rdx rsi  |
//   | rdi r8 r9        | +0 <- rsp at the call (16-byte aligned)
global_asm!(
    ".text",
    ".globl stackrt_lookahead_switch",
    ".type stackrt_lookahead_switch, @function",
    ".p2align 4",
    "stackrt_lookahead_switch:",
    "mov %rsp, %r11",
    "and $-16, %rsp",
    "sub $208, %rsp",
    "mov %rax, 0(%rsp)",
    "mov %rcx, 8(%rsp)",
    "mov %rdx, 16(%rsp)",
    "mov %rsi, 24(%rsp)",
    "mov %rdi, 32(%rsp)",
    "mov %r8, 40(%rsp)",
    "mov %r9, 48(%rsp)",
    "mov %r11, 56(%rsp)",
    "movups %xmm0, 80(%rsp)",
    "movups %xmm1, 96(%rsp)",
    "movups %xmm2, 112(%rsp)",
    "movups %xmm3, 128(%rsp)",
    "movups %xmm4, 144(%rsp)",
    "movups %xmm5, 160(%rsp)",
    "movups %xmm6, 176(%rsp)",
    "movups %xmm7, 192(%rsp)",
    "call {pending}",
    "mov 0(%rsp), %rax",
    "mov 8(%rsp), %rcx",
    "mov 16(%rsp), %rdx",
    "mov 24(%rsp), %rsi",
    "mov 32(%rsp), %rdi",
    "mov 40(%rsp), %r8",
    "mov 48(%rsp), %r9",
    "movups 80(%rsp), %xmm0",
    "movups 96(%rsp), %xmm1",
    "movups 112(%rsp), %xmm2",
    "movups 128(%rsp), %xmm3",
    "movups 144(%rsp), %xmm4",
    "movups 160(%rsp), %xmm5",
    "movups 176(%rsp), %xmm6",
    "movups 192(%rsp), %xmm7",
    "mov 56(%rsp), %rsp",
    "ret",
    ".size stackrt_lookahead_switch, .-stackrt_lookahead_switch",
    pending = sym crate::chunk::handler::stackrt_chunk_pending_switch,
    options(att_syntax)
);

// stackrt_lookahead_libcall: a green thread's call into the thread library (`sthread_*` but
// `sthread_exit`), made on the OS thread's handler stack like a C call, so that a thread that
// parks or yields there holds only this stub's words on its own stack (Go's `mcall`). When
// the library wants to switch, it does not switch on the handler stack (another thread uses
// it next): it leaves the switch to this stub (`crate::chunk::handler::defer_switch`: the TLS
// words lib_save, lib_load) and returns; the stub then saves the thread's context on the
// thread's stack in the green switch's format (`crate::green::arch`: rbp rbx r12-r15 pushed,
// rsp stored in *lib_save) and resumes lib_load. When the thread is resumed, perhaps on
// another OS thread, the stub makes the same call again with the TLS word `resumed` set; the
// library then finishes what it had started (`crate::threads`).
//
// In:  r11 = the library function, rdi rsi rdx = its (at most three) word arguments,
//      [rsp] = return address into compiled code.
// Out: the function's result in rax; every callee-saved register kept; the other registers
//      clobbered (a C call's). The thread's stack gets 88 bytes below the return address.
//
//   thread's stack                     handler stack (top S)
//   | ret into code    |               +------------------+ S
//   | a2 (rdx)         | +24           | (unused)         | S - 8
//   | a1 (rsi)         | +16           | thread's rsp     | S - 16
//   | a0 (rdi)         | +8            +------------------+ <- rsp at the call (S - 16)
//   | function (r11)   | <- rsp (+0)
//   | ret into stub    |  \
//   | rbp rbx r12-r15  |  / a deferred switch's saved context (rsp stored in *lib_save)
global_asm!(
    ".text",
    ".globl stackrt_lookahead_libcall",
    ".type stackrt_lookahead_libcall, @function",
    ".p2align 4",
    "stackrt_lookahead_libcall:",
    "push %rdx",
    "push %rsi",
    "push %rdi",
    "push %r11",
    ".Lla_lib_call64:",
    "mov %fs:stackrt_chunk_tls@tpoff, %rax",
    "mov %rsp, -16(%rax)",
    "lea -16(%rax), %rsp",
    "call *%r11",
    "mov %fs:stackrt_chunk_tls@tpoff, %r11",
    "mov -16(%r11), %rsp",
    "cmpq $0, %fs:stackrt_chunk_tls@tpoff+24",
    "jne .Lla_lib_switch64",
    "add $32, %rsp",
    "ret",
    ".Lla_lib_switch64:",
    "call .Lla_lib_save64",
    "movq $1, %fs:stackrt_chunk_tls@tpoff+40",
    "mov (%rsp), %r11",
    "mov 8(%rsp), %rdi",
    "mov 16(%rsp), %rsi",
    "mov 24(%rsp), %rdx",
    "jmp .Lla_lib_call64",
    // The switch: the green switch's frame, then the other context's.
    ".Lla_lib_save64:",
    "push %rbp",
    "push %rbx",
    "push %r12",
    "push %r13",
    "push %r14",
    "push %r15",
    "mov %fs:stackrt_chunk_tls@tpoff+24, %rdi",
    "mov %fs:stackrt_chunk_tls@tpoff+32, %rsi",
    "movq $0, %fs:stackrt_chunk_tls@tpoff+24",
    "mov %rsp, (%rdi)",
    "mov %rsi, %rsp",
    "pop %r15",
    "pop %r14",
    "pop %r13",
    "pop %r12",
    "pop %rbx",
    "pop %rbp",
    "ret",
    ".size stackrt_lookahead_libcall, .-stackrt_lookahead_libcall",
    options(att_syntax)
);
