//! i686 assembly of the `lookahead` mechanism (ABI 3, thesis 3.4.3): the entry trampoline
//! (listing 3.13's role), the overflow handler (listing 3.14), the reclaim handler, the
//! pending switch and the thread-library stub of green threads. They switch to the OS thread's
//! handler stack (`crate::chunk::handler`: the thread's native stack, or a green-thread
//! worker's own; its top is the TLS word `gs:[stackrt_chunk_tls@ntpoff]`), where the thesis's
//! `MOV ESP, [EBP]` goes to the thread's own native stack, and call the chunk runtime's Rust
//! entry points (`crate::chunk::global`, cdecl) with `esp` 16-byte aligned, instead of
//! `malloc`. The underflow (listing 3.15) has no handler: the emitted code unlinks
//! the chunk inline and marks it (`crate::chunk::UNLINKED`); the runtime gives it back later,
//! at the latest when the reclaim budget runs out and the code calls the reclaim handler.
//!
//! The chunk register is `ebp`, as in the thesis: the address of the current chunk's header
//! (`ChunkHeader`, word `i` at `4 * i`: 0 thread stack, 1 previous SP, 2 previous header,
//! 3 limit). The emitted sequences that call the handlers are documented in
//! `crates/cmm-codegen/src/emit/mech/lookahead.rs`. No absolute relocations in `.text`.

use core::arch::global_asm;

// stackrt_enter_lookahead(fp, a0, a1, nargs) -> eax, cdecl.
//
// Calls the C-- function `fp` with its first `nargs` (0..=2) of `a0, a1` on a fresh first
// chunk (at least as big as the u32 stack need at `fp - 8`), then gives the thread's chunks
// back. Preserves ebp ebx esi edi. The call is callee-cleanup's (the return address pushed
// before the arguments, a jump; the callee pops both and jumps back). The first SP is the
// highest address at most H that is `ENTRY_PHASE` modulo `PHASE_LINE` (`crate::chunk::header`:
// the phase the fixed-stack entries give `fp`'s frames), so the chunk is asked for the need
// plus `PHASE_ROOM`.
//
//   native stack                              first chunk
//   | nargs a1 a0 fp    | X + 20 ..           +-----------------------+ H = ebp = header
//   |                   |                     | (0-48 bytes: phase)   |
//   | return address    | X + 16              | return address        |
//   | ebp ebx esi edi   | 16 bytes            | a1 (if nargs = 2)     |
//   +-------------------+ X                   | a0 (if nargs >= 1)    |
//   | (alignment)       |                     | frame of fp ...       |
//   | X                 | T + 12              v                       v
//   | (unused)          | T + 4 .. T + 8
//   | reclaim budget    | T + 0 (u32)
//   +-------------------+ T = thread stack (16-byte aligned): header word 0
//   | (an OS thread: the handler stack, whose frames grow down from T while a handler runs;
//   |  a green thread: its first chunk's header right below T)
//
// The calls into the runtime (need and T their cdecl arguments) run on the handler stack, or
// on T when the OS thread has none yet (its enter makes T the handler stack). When `fp`
// returns, every chunk switch has been undone (each checkpoint unlinks its chunk), so ebp = H
// again and [ebp] = T finds X.
global_asm!(
    ".text",
    ".globl stackrt_enter_lookahead",
    ".type stackrt_enter_lookahead, @function",
    ".p2align 4",
    "stackrt_enter_lookahead:",
    "push %ebp",
    "push %ebx",
    "push %esi",
    "push %edi",
    "mov %esp, %ebx",
    "and $-16, %esp",
    "sub $16, %esp",
    "mov %ebx, 12(%esp)",
    "mov %esp, %eax",
    "mov %gs:stackrt_chunk_tls@ntpoff, %ecx",
    "test %ecx, %ecx",
    "jz .Lla_enter_here32",
    "mov %ecx, %esp",
    ".Lla_enter_here32:",
    "sub $16, %esp",
    "mov %eax, (%esp)",
    "mov 20(%ebx), %eax",
    "mov -8(%eax), %eax",
    "add ${room}, %eax",
    "mov %eax, 4(%esp)",
    "call {enter}",
    "mov %eax, %ebp",
    "lea -{phase}(%eax), %esp",
    "and $-{line}, %esp",
    "add ${phase}, %esp",
    // The `call` pushes the return address (to the `jmp` after it) first, callee-cleanup's
    // order, without an absolute relocation.
    "call .Lla_push_args32",
    "jmp .Lla_entered32",
    ".Lla_push_args32:",
    "mov 32(%ebx), %ecx",
    "cmp $2, %ecx",
    "jb .Lla_one32",
    "push 28(%ebx)",
    ".Lla_one32:",
    "cmp $1, %ecx",
    "jb .Lla_none32",
    "push 24(%ebx)",
    ".Lla_none32:",
    "jmp *20(%ebx)",
    ".Lla_entered32:",
    "mov (%ebp), %esp",
    "mov %eax, %esi",
    "mov %esp, %edi",
    "mov %gs:stackrt_chunk_tls@ntpoff, %esp",
    "sub $16, %esp",
    "call {exit}",
    "mov %edi, %esp",
    "mov %esi, %eax",
    "mov 12(%esp), %esp",
    "pop %edi",
    "pop %esi",
    "pop %ebx",
    "pop %ebp",
    "ret",
    ".size stackrt_enter_lookahead, .-stackrt_enter_lookahead",
    enter = sym crate::chunk::stackrt_chunk_thread_enter,
    exit = sym crate::chunk::stackrt_chunk_thread_exit,
    phase = const crate::chunk::header::ENTRY_PHASE,
    line = const crate::chunk::header::PHASE_LINE,
    room = const crate::chunk::header::PHASE_ROOM,
    options(att_syntax)
);

// stackrt_green_enter_lookahead(fp, a0, a1, nargs, done) -> !, cdecl: a green thread's entry.
// As stackrt_enter_lookahead, but it never returns: when `fp` returns, the chunks go back and
// `done(result)` is called (cdecl) on the thread's stack at T (`done` never returns either).
// So no callee-saved register is saved, and the entry frames of every green thread are
// smaller (`crate::green::stacks::ENTRY_ROOM`). Registers: everything is clobbered; ebx
// points at the arguments until the call, esi and edi hold the result and T around the exit.
//
//   the thread's stack (block)                first chunk
//   | done nargs a1 a0 fp | ebx + 4 ..        +-----------------------+ H = ebp = header
//   | return address      | ebx               | return address        |
//   +---------------------+ (aligned)         | a1 (if nargs = 2)     |
//   | (unused)            | T + 8 .. T + 12   | a0 (if nargs >= 1)    |
//   | done                | T + 4             | frame of fp ...       |
//   | reclaim budget      | T + 0 (u32)       v                       v
//   +---------------------+ T = thread stack: header word 0
//   | the first chunk's header right below T; `done` runs from T down once the chunks are back
global_asm!(
    ".text",
    ".globl stackrt_green_enter_lookahead",
    ".type stackrt_green_enter_lookahead, @function",
    ".p2align 4",
    "stackrt_green_enter_lookahead:",
    "mov %esp, %ebx",
    "and $-16, %esp",
    "sub $16, %esp",
    "mov 20(%ebx), %eax",
    "mov %eax, 4(%esp)",
    "mov %esp, %eax",
    "mov %gs:stackrt_chunk_tls@ntpoff, %ecx",
    "test %ecx, %ecx",
    "jz .Lgla_enter_here32",
    "mov %ecx, %esp",
    ".Lgla_enter_here32:",
    "sub $16, %esp",
    "mov %eax, (%esp)",
    "mov 4(%ebx), %eax",
    "mov -8(%eax), %eax",
    "mov %eax, 4(%esp)",
    "call {enter}",
    "mov %eax, %ebp",
    "mov %eax, %esp",
    // The `call` pushes the return address (to the `jmp` after it) first, callee-cleanup's
    // order, without an absolute relocation.
    "call .Lgla_push_args32",
    "jmp .Lgla_entered32",
    ".Lgla_push_args32:",
    "mov 16(%ebx), %ecx",
    "cmp $2, %ecx",
    "jb .Lgla_one32",
    "push 12(%ebx)",
    ".Lgla_one32:",
    "cmp $1, %ecx",
    "jb .Lgla_none32",
    "push 8(%ebx)",
    ".Lgla_none32:",
    "jmp *4(%ebx)",
    ".Lgla_entered32:",
    "mov (%ebp), %esp",
    "mov %eax, %esi",
    "mov %esp, %edi",
    "mov %gs:stackrt_chunk_tls@ntpoff, %esp",
    "sub $16, %esp",
    "call {exit}",
    "mov %edi, %esp",
    "mov 4(%esp), %eax",
    "sub $12, %esp",
    "push %esi",
    "call *%eax",
    "ud2",
    ".size stackrt_green_enter_lookahead, .-stackrt_green_enter_lookahead",
    enter = sym crate::chunk::stackrt_chunk_thread_enter,
    exit = sym crate::chunk::stackrt_chunk_thread_exit,
    options(att_syntax)
);

// stackrt_lookahead_overflow: called by a checkpoint's stub when the reserve does not fit.
//
// In:  ecx = reserve R (bytes below the caller's SP before its pushes), edx = A (bytes the
//      caller pushed: arguments and padding), ebp = current header, [esp] = return address
//      into the stub, [esp + 4 .. esp + 4 + A) = the pushed arguments.
// Out: ebp = new header; esp = new header - A - 4 - P with the arguments and the return
//      address copied there; returns into the stub, which makes the call on the new chunk.
//      For a C-- call (the `_cmm` entry) P (0 to 60) gives esp the old esp's address modulo
//      `crate::chunk::header::PHASE_LINE`, so the callee's frames lie on their cache lines as
//      on a contiguous stack, on an OS thread's chain (not a green-thread worker's, whose
//      small classes are sized to what threads touch: `crate::chunk::handler::
//      FROM_ENTER_OFFSET`) and where the chunk has P bytes to spare below R (else P = 0: the
//      phase never makes a chunk larger); for a C call P = 0 (its checkpoint's underflow
//      test is `esp == ebp` after the call). The entries store the mask of P (0 or
//      PHASE_LINE - 1) at +12.
// Clobbered: eax ecx edx, flags (dead at a checkpoint: i686 calls pass nothing in registers).
// Preserved: ebx esi edi, xmm registers are not touched by the copy (Rust may clobber them;
//      none is live before a call).
//
// If the checkpoint hook asked for a switch (`crate::chunk::handler`), the handler jumps to
// stackrt_lookahead_switch instead of returning, once esp is on the new chunk.
//
// The hot split's fast path (`crate::chunk::handler::HOT_SPLIT_OFFSET`): where the thread's
// hot-split word allows it and the chunk after ebp (header word 7) is one compiled code
// unlinked, saved at this caller_sp, after ebp, with room for R, the handler relinks it
// itself (word 0 = ebp's thread stack T, the budget at [T] incremented back) and goes on as
// if the runtime had returned it; ebx is kept at +24 meanwhile. Otherwise it calls the runtime.
//
//   old chunk                       handler stack (top S)            new chunk
//   | caller frame     | caller_sp  +------------------+ S          +------------------+ H'
//   | args (A bytes)   |            | ebx (fast path)  | +24        | args (copied)    |
//   | ret into stub    | <- esp     | A                | +20        | ret into stub    |
//   |                  |            | old esp          | +16        +------------------+ <- esp
//   |                  |            | phase mask       | +12
//   |                  |            | reserve R        | +8   cdecl arguments of
//   |                  |            | caller_sp        | +4   stackrt_chunk_overflow
//   |                  |            | cur header       | +0 <- esp at the call (S - 32)
global_asm!(
    ".text",
    ".globl stackrt_lookahead_overflow",
    ".type stackrt_lookahead_overflow, @function",
    ".p2align 4",
    "stackrt_lookahead_overflow:",
    "mov %esp, %eax",
    "mov %gs:stackrt_chunk_tls@ntpoff, %esp",
    "sub $32, %esp",
    "movl $0, 12(%esp)",
    "jmp .Lla_common32",
    // The handler for checkpoints at C-- calls is the same routine on i686 (it saves nothing
    // that a C-- call would need kept; x86-64 has a lighter one) but for the phase: a C
    // call's checkpoint finds its underflow by `esp == ebp` after the call, so its arguments
    // go right below the header; a C-- call's keep the caller's phase.
    ".globl stackrt_lookahead_overflow_cmm",
    ".type stackrt_lookahead_overflow_cmm, @function",
    "stackrt_lookahead_overflow_cmm:",
    "mov %esp, %eax",
    "mov %gs:stackrt_chunk_tls@ntpoff, %esp",
    "sub $32, %esp",
    "movl $0, 12(%esp)",
    "cmpl $0, %gs:stackrt_chunk_tls@ntpoff+{own}",
    "je .Lla_common32",
    "movl ${line_mask}, 12(%esp)",
    ".Lla_common32:",
    "mov %eax, 16(%esp)",
    "mov %edx, 20(%esp)",
    "mov %ebp, (%esp)",
    "lea 4(%eax,%edx), %eax",
    "mov %eax, 4(%esp)",
    "mov %ecx, 8(%esp)",
    "cmpl $0, %gs:stackrt_chunk_tls@ntpoff+{hot}",
    "je .Lla_slow32",
    "mov %ebx, 24(%esp)",
    "mov {link}(%ebp), %ebx",
    "test %ebx, %ebx",
    "jz .Lla_slow_ebx32",
    "cmpl $-1, {mark}(%ebx)",
    "jne .Lla_slow_ebx32",
    "cmp %eax, {prev_sp}(%ebx)",
    "jne .Lla_slow_ebx32",
    "cmp %ebp, {prev_header}(%ebx)",
    "jne .Lla_slow_ebx32",
    "mov %ebx, %edx",
    "sub {limit}(%ebx), %edx",
    "add ${slack}, %ecx",
    "cmp %ecx, %edx",
    "jb .Lla_slow_ebx32",
    "mov {mark}(%ebp), %ecx",
    "mov %ecx, {mark}(%ebx)",
    "addl $1, (%ecx)",
    "mov %ebx, %eax",
    "mov 24(%esp), %ebx",
    "jmp .Lla_linked32",
    ".Lla_slow_ebx32:",
    "mov 24(%esp), %ebx",
    ".Lla_slow32:",
    "call {overflow}",
    ".Lla_linked32:",
    "mov %eax, %ebp",
    "mov 16(%esp), %ecx",
    "mov 20(%esp), %edx",
    // The phase: P = (unpadded esp - old esp) & mask, if the chunk has P bytes to spare
    // below the reserve (P + R + slack + limit <= header), else 0.
    "lea -4(%eax), %eax",
    "sub %edx, %eax",
    "sub %ecx, %eax",
    "and 12(%esp), %eax",
    "mov %eax, 12(%esp)",
    "add 8(%esp), %eax",
    "add ${slack}, %eax",
    "add {limit}(%ebp), %eax",
    "cmp %ebp, %eax",
    "mov 12(%esp), %eax",
    "jbe .Lla_phase32",
    "xor %eax, %eax",
    ".Lla_phase32:",
    "lea -4(%ebp), %esp",
    "sub %edx, %esp",
    "sub %eax, %esp",
    "add $4, %edx",
    ".Lla_copy32:",
    "sub $4, %edx",
    "mov (%ecx,%edx), %eax",
    "mov %eax, (%esp,%edx)",
    "jnz .Lla_copy32",
    "cmpl $0, %gs:stackrt_chunk_tls@ntpoff+4",
    "jne stackrt_lookahead_switch",
    "ret",
    ".size stackrt_lookahead_overflow, .-stackrt_lookahead_overflow",
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
// In:  ebp = the chunk the code runs on (header; word 0 = T), esp = the caller's SP in it.
// Out: every register as on entry but ecx and the flags (eax, edx, xmm0-7 preserved); the
//      budget at [T] refilled.
//
//   chunk (caller)                handler stack (top S)
//   | caller frame    |           +------------------+ S
//   | ret into code   | <- esp    | xmm0..xmm7       | +32..+160
//   |                 |           | old esp          | +24
//   |                 |           | edx              | +20
//   |                 |           | eax              | +16
//   |                 |           | (pad) cur header | +0 <- esp at the call (S - 160)
global_asm!(
    ".text",
    ".globl stackrt_lookahead_reclaim",
    ".type stackrt_lookahead_reclaim, @function",
    ".p2align 4",
    "stackrt_lookahead_reclaim:",
    "mov %esp, %ecx",
    "mov %gs:stackrt_chunk_tls@ntpoff, %esp",
    "sub $160, %esp",
    "mov %eax, 16(%esp)",
    "mov %edx, 20(%esp)",
    "mov %ecx, 24(%esp)",
    "movups %xmm0, 32(%esp)",
    "movups %xmm1, 48(%esp)",
    "movups %xmm2, 64(%esp)",
    "movups %xmm3, 80(%esp)",
    "movups %xmm4, 96(%esp)",
    "movups %xmm5, 112(%esp)",
    "movups %xmm6, 128(%esp)",
    "movups %xmm7, 144(%esp)",
    "mov %ebp, (%esp)",
    "call {reclaim}",
    "mov 16(%esp), %eax",
    "mov 20(%esp), %edx",
    "movups 32(%esp), %xmm0",
    "movups 48(%esp), %xmm1",
    "movups 64(%esp), %xmm2",
    "movups 80(%esp), %xmm3",
    "movups 96(%esp), %xmm4",
    "movups 112(%esp), %xmm5",
    "movups 128(%esp), %xmm6",
    "movups 144(%esp), %xmm7",
    "mov 24(%esp), %esp",
    "ret",
    ".size stackrt_lookahead_reclaim, .-stackrt_lookahead_reclaim",
    reclaim = sym crate::chunk::stackrt_chunk_reclaim,
    options(att_syntax)
);

// stackrt_lookahead_switch: the end of an overflow whose checkpoint hook asked for a switch
// (a preemption, a decision of the deterministic scheduler). Jumped to by the overflow
// handler instead of its `ret`, with esp already on the new chunk, which has
// `crate::chunk::handler::SWITCH_ROOM` bytes to spare for this.
//
// In:  esp = the new chunk's SP ([esp] = return address into the stub).
// Out: returns into the stub, perhaps on another OS thread; ebx esi edi ebp kept, eax ecx edx
//      and the flags clobbered (dead at a checkpoint: i686 calls pass nothing in registers).
//
//   new chunk
//   | args (copied)    |
//   | ret into stub    | <- esp on entry
//   | (alignment)      |
//   | (pad)            |
//   | old esp          | +0 <- esp at the call (16-byte aligned)
global_asm!(
    ".text",
    ".globl stackrt_lookahead_switch",
    ".type stackrt_lookahead_switch, @function",
    ".p2align 4",
    "stackrt_lookahead_switch:",
    "mov %esp, %ecx",
    "and $-16, %esp",
    "sub $16, %esp",
    "mov %ecx, (%esp)",
    "call {pending}",
    "mov (%esp), %esp",
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
// thread's stack in the green switch's format (`crate::green::arch`: ebp ebx esi edi
// pushed, esp stored in *lib_save) and resumes lib_load. When the thread is resumed, perhaps
// on another OS thread, the stub makes the same call again with the TLS word `resumed` set;
// the library then finishes what it had started (`crate::threads`).
//
// In:  ecx = the library function, [esp] = return address into compiled code, [esp + 4 ..
//      esp + 16) = its (at most three) word arguments (cdecl).
// Out: the function's result in eax; ebx esi edi ebp kept; ecx edx clobbered. The thread's
//      stack gets 40 bytes below the return address.
//
//   thread's stack                     handler stack (top S)
//   | a2 a1 a0         | +28 +24 +20   +------------------+ S
//   | ret into code    | +16           | thread's esp     | S - 16
//   | a2 a1 a0 (copy)  | +12 +8 +4     | a2 a1 a0         | S - 24 .. S - 32
//   | function (ecx)   | <- esp (+0)   +------------------+ <- esp at the call (S - 32)
//   | ret into stub    |  \
//   | ebp ebx esi edi  |  / a deferred switch's saved context (esp stored in *lib_save)
global_asm!(
    ".text",
    ".globl stackrt_lookahead_libcall",
    ".type stackrt_lookahead_libcall, @function",
    ".p2align 4",
    "stackrt_lookahead_libcall:",
    "push 12(%esp)",
    "push 12(%esp)",
    "push 12(%esp)",
    "push %ecx",
    ".Lla_lib_call32:",
    "mov %gs:stackrt_chunk_tls@ntpoff, %eax",
    "mov %esp, -16(%eax)",
    "mov 4(%esp), %edx",
    "mov %edx, -32(%eax)",
    "mov 8(%esp), %edx",
    "mov %edx, -28(%eax)",
    "mov 12(%esp), %edx",
    "mov %edx, -24(%eax)",
    "mov (%esp), %ecx",
    "lea -32(%eax), %esp",
    "call *%ecx",
    "mov %gs:stackrt_chunk_tls@ntpoff, %ecx",
    "mov -16(%ecx), %esp",
    "cmpl $0, %gs:stackrt_chunk_tls@ntpoff+12",
    "jne .Lla_lib_switch32",
    "add $16, %esp",
    "ret",
    ".Lla_lib_switch32:",
    "call .Lla_lib_save32",
    "movl $1, %gs:stackrt_chunk_tls@ntpoff+20",
    "jmp .Lla_lib_call32",
    // The switch: the green switch's frame, then the other context's.
    ".Lla_lib_save32:",
    "push %ebp",
    "push %ebx",
    "push %esi",
    "push %edi",
    "mov %gs:stackrt_chunk_tls@ntpoff+12, %ecx",
    "mov %gs:stackrt_chunk_tls@ntpoff+16, %edx",
    "movl $0, %gs:stackrt_chunk_tls@ntpoff+12",
    "mov %esp, (%ecx)",
    "mov %edx, %esp",
    "pop %edi",
    "pop %esi",
    "pop %ebx",
    "pop %ebp",
    "ret",
    ".size stackrt_lookahead_libcall, .-stackrt_lookahead_libcall",
    options(att_syntax)
);
