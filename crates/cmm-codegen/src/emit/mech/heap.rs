//! Mechanisms `heap` and `heap-malloc`: every activation in its own heap block (thesis 3.4.2,
//! paper 4.3). The caller allocates a block of `stacksizeof(callee)` bytes plus one word for
//! its own stack pointer, moves SP to the block's top, pushes the arguments and calls; after
//! the return it frees the block and restores its SP. A thread's stack is a linked list of
//! blocks; it never holds more than the blocks of its live frames and its free lists.
//!
//! `heap` allocates from per-thread free lists by size class, inline and without a lock or a
//! call (a call and return at the same depth reuse the same block); `heap-malloc` is the
//! thesis's variant, a runtime call to `malloc` and `free` for every frame, kept for
//! comparison. The runtime side is `crates/stackrt/src/mech/heap.rs` and
//! `crates/stackrt/src/mech/arch/*_heap.rs`.
//!
//! # Thread state: a thread-local block instead of a reserved register
//!
//! The thesis reserves `EBP` for the thread stack and calls an overflow routine (listing 3.8)
//! that `malloc`s the frame. Here the thread's allocator state is a thread-local block of the
//! runtime, [`TLS_SYMBOL`], addressed through the thread pointer (`gs:` on i686, `fs:` on
//! x86-64, the local-exec TLS model: one segment-relative operand, no register). Its layout
//! (word = 4 bytes on i686, 8 on x86-64) is part of the ABI, mirrored by `stackrt::mech::heap`
//! and checked on both sides:
//!
//! ```text
//!  word 0   cstack    the C stack's top (16-byte aligned): C calls and runtime calls run there
//!  word 1   bump      top of the next block to carve (moves down) in the current slab
//!  word 2   bump_end  the current slab's lowest address
//!  word 3   large     the block top a general allocation returned
//!  +4 words frames    u64: frames allocated (statistics)
//!  then     heads[k]  free list of size class k: the address of a free block's top word
//!                     (which holds the next one), 0 when empty
//!  then     carved[k] blocks of class k carved so far (statistics: class k's peak live count)
//! ```
//!
//! `ebp`/`rbp` is reserved as the *call base*: the caller's SP from the allocation to the
//! transfer of control (the pushes read the caller's spill slots through it, SP is already on
//! the new block), as under `mmu`.
//!
//! # Sequences, side by side with the thesis (i686; x86-64: rbp, rsp, qword, `fs:`)
//!
//! `T(x)` stands for `dword ptr gs:[stackrt_heap_tls@ntpoff + x]`, `C` for the class size.
//!
//! ```text
//!  thesis listing 3.4 (caller)          this stage, size class k
//!  MOV  EAX, ESP                        mov  ebp, esp
//!  MOV  ESP, EBP                        mov  esp, T(heads + 4k)   ; a free block of class k
//!  PUSH CALLEE_STACK_SIZE + 4           test esp, esp
//!  CALL STAMEX_OVERFLOW_HANDLER         jz   .LhpN_new            ; none: carve one
//!    (malloc, [top-4] = old ESP)        pop  T(heads + 4k)        ; unlink it; esp = its top
//!                                      .LhpN_got:
//!                                       push ebp                  ; the caller's SP, top word
//!                                       prefetcht0 [esp - 8C]     ; the block taken next
//!                                       add  T(frames), 1 ; adc T(frames + 4), 0
//!                                       push offset .Lret         ; callee-cleanup's return
//!  PUSH arg1 ... PUSH argn              push argN ... push arg1   ; spills read [ebp + k]
//!  CALL callee_name                     jmp  callee
//!  SUB  ESP, ...                       .Lret:                     ; esp = the top word
//!  CALL STAMEX_UNDERFLOW_HANDLER        pop  ecx                  ; the caller's SP
//!    (free, ESP = old ESP)              push T(heads + 4k)        ; the block's top word links
//!                                       mov  T(heads + 4k), esp   ;  the list; it is the head
//!                                       mov  esp, ecx
//!
//!  slow paths (.subsection 1):
//!  .LhpN_new:  mov esp, T(bump)         ; carve C bytes below the bump pointer
//!              sub esp, C
//!              cmp esp, T(bump_end)
//!              jb  .LhpN_slab
//!              mov T(bump), esp
//!              add T(carved + 4k), 1
//!              add esp, C               ; the new block's top
//!              jmp .LhpN_got
//!  .LhpN_slab: mov esp, T(cstack)       ; the slab is used up: the runtime links a new one
//!              push C                   ; (a stack chunk) and points bump/bump_end at it;
//!              call stackrt_heap_slab   ; it preserves every register
//!              jmp .LhpN_new
//!
//!  thesis listing 3.5 (callee)          this stage: callee-cleanup's return
//!  SUB ESP, S ... ADD ESP, S ; RET      sub esp, S ...
//!                                       mov ecx, [esp + S + args] ; add esp, S + args + 4
//!                                       jmp ecx                   ; x86-64: add rsp, S + args + 8
//!                                                                 ;  jmp qword ptr [rsp - 8]
//! ```
//!
//! The semantics are the thesis's: every activation has its own block, freed when it returns;
//! the caller's SP is kept in the block's top word. Differences:
//!
//! * The allocation is inline: four instructions and a well-predicted branch when the class's
//!   free list holds a block, seven more when it must carve one from the thread's slab, and a
//!   prefetch of the block a recursion takes next ([`PREFETCH_BLOCKS`]); the
//!   runtime is called once per slab (a stack chunk, `--chunk-size`, default 64 KiB). The
//!   thesis's two runtime calls per call (`malloc`, `free`) are what `heap-malloc` keeps.
//! * No register holds the thread state, so `ebp` serves as the thesis's `EAX` (the caller's
//!   SP), and no register at all is clobbered before the arguments are pushed: the allocation
//!   runs with SP itself as its only scratch register. The free uses `ecx`, which a C-- call
//!   clobbers anyway and which never holds a result.
//! * The callee removes its arguments and returns through the saved address with an indirect
//!   `jmp`, as under `callee-cleanup` (paper 4.2): the return needs no `add esp, args` in the
//!   caller, and a deep recursion's returns are predicted by the branch target buffer where
//!   `ret` mispredicts once the return stack buffer is exhausted (issue 26: `deep_repeat.cm`
//!   1,000,000 deep on x86-64, 1.49x `callee-cleanup` with `call`/`ret`).
//! * Blocks keep the body's SP aligned to the target's granule ([`granule`]): 16 bytes on
//!   x86-64 as under every other mechanism, 8 on i686, where no C call runs on a block and
//!   address space is scarce. `stacksizeof(f)` and the size classes ([`class_size`]) are
//!   multiples of it.
//! * Frames larger than the largest class ([`max_class_size`]) and every frame of
//!   `heap-malloc` take the general path: a runtime call on the C stack for the allocation and
//!   one for the free, as the thesis's handlers:
//!
//! ```text
//!  mov  ebp, esp                        jmp  callee
//!  mov  esp, T(cstack)                 .Lret:
//!  push B                               mov  ebp, dword ptr [esp]    ; the caller's SP
//!  call stackrt_heap_alloc              lea  ecx, [esp + 4]          ; the block's top
//!  mov  esp, T(large)                   mov  esp, T(cstack)
//!  push ebp                             push B
//!  push offset .Lret                    call stackrt_heap_free       ; preserves eax, edx, xmm0
//!  push args ...
//!                                       mov  esp, ebp
//! ```
//!
//! * Calls to C functions run on the thread's C stack (its native stack, below the entry
//!   trampoline's frame), with the C ABI's alignment:
//!   `mov ebp, esp; mov esp, T(cstack); <the shared C call>; mov esp, ebp` (C code preserves
//!   `ebp`). C code never calls back into C-- code on the same thread, so one C stack top
//!   serves every C call.
//!
//! # Signals
//! SP points into a small heap block, or briefly at a free one, so a signal handler must not
//! run on the current stack: every handler the runtime installs uses `SA_ONSTACK` and each
//! thread has an alternate signal stack (`stackrt::signals`), as Go requires of foreign
//! handlers. The same holds for handlers a C library linked into the program installs.

use std::collections::HashMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU32, Ordering};

use regalloc2::PReg;

use super::{sub_sp, CallSite, FrameInfo, Mechanism};
use crate::emit::{regs, EmitError, EmitOptions, Target};
use crate::lower::LoweredProgram;

/// ABI id of `heap` (`stackrt::base::abi::ABI_HEAP`).
pub const ABI_HEAP: u32 = 6;
/// ABI id of `heap-malloc` (`stackrt::base::abi::ABI_HEAP_MALLOC`).
pub const ABI_HEAP_MALLOC: u32 = 7;

/// The runtime's thread-local allocator block (see the module docs for its layout).
pub const TLS_SYMBOL: &str = "stackrt_heap_tls";
/// The runtime's slab stub: links a new slab for a block of `[sp + slot]` bytes; preserves
/// every register.
pub const SLAB_STUB: &str = "stackrt_heap_slab";
/// The runtime's general allocation stub: a block of `[sp + slot]` bytes, its top stored in
/// the TLS word `large`; preserves every register.
pub const ALLOC_STUB: &str = "stackrt_heap_alloc";
/// The runtime's general free stub: frees the block of `[sp + slot]` bytes whose top is in
/// `ecx`/`rcx`; preserves every other register.
pub const FREE_STUB: &str = "stackrt_heap_free";

/// Default slab size (`--chunk-size`) of the heap mechanisms: 64 KiB, four of the largest
/// class.
pub const DEFAULT_SLAB_SIZE: u32 = 64 * 1024;

/// Number of size classes: 32 of steps of the target's granule (16 bytes on x86-64, 8 on
/// i686), then four per doubling, 20 more. Mirrored by `stackrt::mech::heap::NUM_CLASSES`.
pub const NUM_CLASSES: usize = 52;

/// The step of the small size classes and the alignment of every block: 16 bytes on x86-64
/// (the body's SP stays 16-byte aligned, as under the other mechanisms), 8 on i686, where
/// address space is scarce and no C call runs on a block (the thesis's Summation frame is 24
/// bytes there instead of 32).
pub const fn granule(t: Target) -> u32 {
    match t {
        Target::I686 => 8,
        Target::X86_64 => 16,
    }
}

/// Bytes of size class `k` (`k < NUM_CLASSES`) on target `t`: `granule * (k + 1)` up to
/// `32 * granule`, then `base + base/4 * (1..=4)` per doubling of `base`.
pub const fn class_size(t: Target, k: usize) -> u32 {
    let g = granule(t);
    if k < 32 {
        g * (k as u32 + 1)
    } else {
        let j = (k - 32) as u32;
        let base = (32 * g) << (j / 4);
        base + base / 4 * (j % 4 + 1)
    }
}

/// The largest size class: 16 KiB on x86-64, 8 KiB on i686; larger blocks take the general
/// path.
pub const fn max_class_size(t: Target) -> u32 {
    class_size(t, NUM_CLASSES - 1)
}

/// The smallest size class holding `bytes`, or None above [`max_class_size`].
pub fn class_for(t: Target, bytes: u32) -> Option<usize> {
    (0..NUM_CLASSES).find(|&k| class_size(t, k) >= bytes)
}

/// Byte offsets of the TLS block's fields on a target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TlsLayout {
    pub cstack: u32,
    pub bump: u32,
    pub bump_end: u32,
    pub large: u32,
    pub frames: u32,
    pub heads: u32,
    pub carved: u32,
}

impl TlsLayout {
    pub const fn for_target(t: Target) -> TlsLayout {
        let p = match t {
            Target::I686 => 4,
            Target::X86_64 => 8,
        };
        let heads = 4 * p + 8;
        TlsLayout {
            cstack: 0,
            bump: p,
            bump_end: 2 * p,
            large: 3 * p,
            frames: 4 * p,
            heads,
            carved: heads + NUM_CLASSES as u32 * p,
        }
    }
}

/// `heap` or `heap-malloc`: the sequences; the block sizes come from the first pass.
pub struct Heap {
    malloc: bool,
    /// `stacksizeof` of each C-- function by symbol (None: not known, as in the first pass;
    /// every call then uses the smallest block).
    sizes: Option<HashMap<String, u32>>,
    /// Numbers the slow-path labels of the calls printed so far.
    labels: AtomicU32,
}

/// `heap` for [`super::by_kind`] (name, ABI id, frame conventions), without block sizes.
pub static HEAP_BASE: Heap = Heap::new(false, None);
/// `heap-malloc` for [`super::by_kind`].
pub static HEAP_MALLOC_BASE: Heap = Heap::new(true, None);

fn base_reg(t: Target) -> &'static str {
    match t {
        Target::I686 => "ebp",
        Target::X86_64 => "rbp",
    }
}

fn scratch(t: Target) -> &'static str {
    match t {
        Target::I686 => "ecx",
        Target::X86_64 => "rcx",
    }
}

/// A pointer-sized operand at `off` in the TLS block.
fn tls(t: Target, off: u32) -> String {
    super::tls_operand(t, TLS_SYMBOL, off, false)
}

/// A 32-bit operand at `off` in the TLS block.
fn tls32(t: Target, off: u32) -> String {
    super::tls_operand(t, TLS_SYMBOL, off, true)
}

impl Mechanism for Heap {
    fn name(&self) -> &'static str {
        if self.malloc {
            "heap-malloc"
        } else {
            "heap"
        }
    }
    fn abi_id(&self) -> u32 {
        if self.malloc {
            ABI_HEAP_MALLOC
        } else {
            ABI_HEAP
        }
    }
    fn reserved_regs(&self, _target: Target) -> Vec<PReg> {
        vec![regs::gpr(regs::RBP)]
    }
    fn entry_arg_offset(&self, _target: Target) -> u32 {
        0
    }
    /// The return address and the caller's SP in the block's top word.
    fn call_overhead(&self, target: Target) -> u32 {
        2 * target.slot()
    }
    fn call_base(&self, target: Target) -> Option<&'static str> {
        Some(base_reg(target))
    }
    fn stack_need_word(&self, f: &FrameInfo) -> Option<u32> {
        Some(f.frame_size + f.arg_bytes + 2 * f.target.slot())
    }
    fn frame_align(&self, target: Target) -> u32 {
        granule(target)
    }
    fn prologue(&self, f: &FrameInfo, out: &mut String) {
        sub_sp(f.target, f.frame_size, out);
    }
    fn epilogue(&self, f: &FrameInfo, out: &mut String) {
        super::callee_cleanup::epilogue(f, out);
    }
    fn call_prefix(&self, c: &CallSite, out: &mut String) -> u32 {
        match self.block(c) {
            (_, Some(k)) => {
                let n = self.labels.fetch_add(1, Ordering::Relaxed);
                class_alloc(c.target, k, n, out);
            }
            (b, None) => general_alloc(c.target, b, out),
        }
        let _ = writeln!(out, "\tpush offset {}", c.return_label);
        2 * c.target.slot()
    }
    fn call_suffix(&self, c: &CallSite, out: &mut String) {
        match self.block(c) {
            (_, Some(k)) => class_free(c, k, out),
            (b, None) => general_free(c, b, out),
        }
    }
    fn extern_call_prefix(&self, c: &CallSite, out: &mut String) {
        to_c_stack(c.target, out);
    }
    fn extern_call_return(&self, c: &CallSite, out: &mut String) {
        let _ = writeln!(out, "\tmov {}, {}", c.target.sp(), base_reg(c.target));
    }
}

/// `mov ebp, esp; mov esp, T(cstack)`.
fn to_c_stack(t: Target, out: &mut String) {
    let l = TlsLayout::for_target(t);
    let _ = writeln!(out, "\tmov {}, {}", base_reg(t), t.sp());
    let _ = writeln!(out, "\tmov {}, {}\t# the C stack", t.sp(), tls(t, l.cstack));
}

/// Counts one allocated frame in the TLS `frames` word (u64 on both targets).
fn count_frame(t: Target, out: &mut String) {
    let l = TlsLayout::for_target(t);
    match t {
        Target::X86_64 => {
            let _ = writeln!(out, "\tadd {}, 1", tls(t, l.frames));
        }
        Target::I686 => {
            let _ = writeln!(out, "\tadd {}, 1", tls32(t, l.frames));
            let _ = writeln!(out, "\tadc {}, 0", tls32(t, l.frames + 4));
        }
    }
}

/// The general path's allocation of a block of `block` bytes: a runtime call on the C stack.
fn general_alloc(t: Target, block: u32, out: &mut String) {
    let l = TlsLayout::for_target(t);
    to_c_stack(t, out);
    let _ = writeln!(out, "\tpush {block}");
    let _ = writeln!(out, "\tcall {ALLOC_STUB}");
    let _ = writeln!(
        out,
        "\tmov {}, {}\t# the new block's top",
        t.sp(),
        tls(t, l.large)
    );
    let _ = writeln!(out, "\tpush {}\t# the caller's SP", base_reg(t));
}

/// The general path's call and free of a block of `block` bytes.
fn general_free(c: &CallSite, block: u32, out: &mut String) {
    let t = c.target;
    let sp = t.sp();
    let l = TlsLayout::for_target(t);
    call_jump(c, out);
    let w = if t == Target::I686 { "dword" } else { "qword" };
    let _ = writeln!(
        out,
        "\tmov {}, {w} ptr [{sp}]\t# the caller's SP",
        base_reg(t)
    );
    let _ = writeln!(
        out,
        "\tlea {}, [{sp} + {}]\t# the block's top",
        scratch(t),
        t.slot()
    );
    let _ = writeln!(out, "\tmov {sp}, {}\t# the C stack", tls(t, l.cstack));
    let _ = writeln!(out, "\tpush {block}");
    let _ = writeln!(out, "\tcall {FREE_STUB}");
    let _ = writeln!(out, "\tmov {sp}, {}", base_reg(t));
}

impl Heap {
    const fn new(malloc: bool, sizes: Option<HashMap<String, u32>>) -> Self {
        Heap {
            malloc,
            sizes,
            labels: AtomicU32::new(0),
        }
    }

    /// The callee's block size and its size class (None: the general path).
    fn block(&self, c: &CallSite) -> (u32, Option<usize>) {
        let b = self
            .sizes
            .as_ref()
            .and_then(|s| s.get(c.callee))
            .copied()
            .unwrap_or(16);
        if self.malloc {
            (b, None)
        } else {
            (b, class_for(c.target, b))
        }
    }
}

/// The inline allocation from class `k`'s free list (label number `n`).
fn class_alloc(t: Target, k: usize, n: u32, out: &mut String) {
    let sp = t.sp();
    let l = TlsLayout::for_target(t);
    let p = t.slot();
    let head = tls(t, l.heads + k as u32 * p);
    let size = class_size(t, k);
    let _ = writeln!(out, "\tmov {}, {sp}", base_reg(t));
    let _ = writeln!(out, "\tmov {sp}, {head}\t# a free block of {size} bytes");
    let _ = writeln!(out, "\ttest {sp}, {sp}");
    let _ = writeln!(out, "\tjz .Lhp{n}_new");
    let _ = writeln!(out, "\tpop {head}");
    let _ = writeln!(out, ".Lhp{n}_got:");
    let _ = writeln!(out, "\tpush {}\t# the caller's SP", base_reg(t));
    let _ = writeln!(
        out,
        "\tprefetcht0 [{sp} - {}]\t# the block a recursion takes next",
        prefetch_distance(size)
    );
    count_frame(t, out);
    out.push_str("\t.subsection 1\n");
    let _ = writeln!(out, ".Lhp{n}_new:");
    let _ = writeln!(out, "\tmov {sp}, {}", tls(t, l.bump));
    let _ = writeln!(out, "\tsub {sp}, {size}");
    let _ = writeln!(out, "\tcmp {sp}, {}", tls(t, l.bump_end));
    let _ = writeln!(out, "\tjb .Lhp{n}_slab");
    let _ = writeln!(out, "\tmov {}, {sp}", tls(t, l.bump));
    let _ = writeln!(out, "\tadd {}, 1", tls(t, l.carved + k as u32 * p));
    let _ = writeln!(out, "\tadd {sp}, {size}");
    let _ = writeln!(out, "\tjmp .Lhp{n}_got");
    let _ = writeln!(out, ".Lhp{n}_slab:");
    let _ = writeln!(out, "\tmov {sp}, {}", tls(t, l.cstack));
    let _ = writeln!(out, "\tpush {size}");
    let _ = writeln!(out, "\tcall {SLAB_STUB}");
    let _ = writeln!(out, "\tjmp .Lhp{n}_new");
    out.push_str("\t.subsection 0\n");
}

/// How far below a new block's top the allocation prefetches: [`PREFETCH_BLOCKS`] blocks of
/// its class, at most [`PREFETCH_MAX`] bytes.
pub fn prefetch_distance(class_size: u32) -> u32 {
    (PREFETCH_BLOCKS * class_size).clamp(PREFETCH_MIN, PREFETCH_MAX)
}

/// A deep recursion takes the blocks of its class in the order the runtime carved them, one
/// below the other, and reusing a block means loading its link word first: a cache miss per
/// call once the recursion's blocks outgrow the caches (a stack's stores to cold lines do not
/// wait, a free list's load does). A prefetch this many blocks ahead hides most of it (Big
/// Summation, 128-byte frames 100,000 deep: 0.66x the time without it; 0.82x when the blocks
/// fit in L2).
pub const PREFETCH_BLOCKS: u32 = 8;
/// The nearest prefetch, in bytes: eight small blocks are too few calls ahead to hide a miss
/// beyond the caches (`deep_repeat.cm` 1,000,000 deep with 24-byte blocks on i686: 0.8x the
/// time of a prefetch 192 bytes ahead).
pub const PREFETCH_MIN: u32 = 2048;
/// The farthest prefetch, in bytes.
pub const PREFETCH_MAX: u32 = 16384;

/// The transfer of control: callee-cleanup's (the callee pops its arguments and the return
/// address, so SP is back at the block's top word at the return label).
fn call_jump(c: &CallSite, out: &mut String) {
    let _ = writeln!(out, "\tjmp {}", c.callee);
    let _ = writeln!(out, "{}:", c.return_label);
}

/// The call and the inline free into class `k`'s free list.
fn class_free(c: &CallSite, k: usize, out: &mut String) {
    let t = c.target;
    let sp = t.sp();
    let l = TlsLayout::for_target(t);
    let head = tls(t, l.heads + k as u32 * t.slot());
    call_jump(c, out);
    let _ = writeln!(out, "\tpop {}\t# the caller's SP", scratch(t));
    let _ = writeln!(out, "\tpush {head}\t# the block joins its free list");
    let _ = writeln!(out, "\tmov {head}, {sp}");
    let _ = writeln!(out, "\tmov {sp}, {}", scratch(t));
}

/// Emits the whole program under `heap` / `heap-malloc` (see [`crate::emit::emit_program`]):
/// a first pass for the blocks, a second printing the sequences
/// ([`crate::emit::emit_sized_program`]). Also defines `__cmm_chunk_size` (the slab size).
pub fn emit_program(
    p: &LoweredProgram,
    opts: &EmitOptions,
    malloc: bool,
    slab_size: u32,
) -> Result<String, EmitError> {
    crate::emit::emit_sized_program(p, opts, slab_size, "slab size", |sizes| {
        Heap::new(malloc, Some(sizes))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(t: Target, arg_bytes: u32) -> CallSite<'static> {
        CallSite {
            target: t,
            callee: "cmm_f",
            arg_bytes,
            return_label: ".Lf0ret1",
            pushes_keep_flags: true,
        }
    }

    /// The size-class table is part of the ABI: `stackrt::mech::heap` has the same test.
    #[test]
    fn size_classes_step_by_the_granule_then_grow_by_quarters() {
        let x = Target::X86_64;
        assert_eq!(class_size(x, 0), 16);
        assert_eq!(class_size(x, 31), 512);
        assert_eq!(
            [32, 33, 34, 35, 36].map(|k| class_size(x, k)),
            [640, 768, 896, 1024, 1280]
        );
        assert_eq!(max_class_size(x), 16384);
        let i = Target::I686;
        assert_eq!(class_size(i, 0), 8);
        assert_eq!(class_size(i, 31), 256);
        assert_eq!(
            [32, 33, 34, 35, 36].map(|k| class_size(i, k)),
            [320, 384, 448, 512, 640]
        );
        assert_eq!(max_class_size(i), 8192);
        for t in [x, i] {
            for k in 1..NUM_CLASSES {
                assert!(class_size(t, k) > class_size(t, k - 1));
                assert_eq!(class_size(t, k) % granule(t), 0);
            }
            assert_eq!(class_for(t, max_class_size(t)), Some(NUM_CLASSES - 1));
            assert_eq!(class_for(t, max_class_size(t) + 8), None);
        }
        assert_eq!(class_for(x, 48), Some(2));
        assert_eq!(class_for(i, 24), Some(2));
        assert_eq!(class_for(x, 520), Some(32));
    }

    #[test]
    fn tls_layout_is_the_documented_one() {
        let l = TlsLayout::for_target(Target::X86_64);
        assert_eq!((l.cstack, l.bump, l.bump_end, l.large), (0, 8, 16, 24));
        assert_eq!((l.frames, l.heads, l.carved), (32, 40, 40 + 52 * 8));
        let l = TlsLayout::for_target(Target::I686);
        assert_eq!((l.frames, l.heads, l.carved), (16, 24, 24 + 52 * 4));
    }

    #[test]
    fn a_call_takes_and_gives_back_a_block_of_its_class() {
        let mut s = String::new();
        let c = site(Target::X86_64, 16);
        let mut sizes = HashMap::new();
        sizes.insert("cmm_f".to_string(), 48);
        let h = Heap::new(false, Some(sizes));
        assert_eq!(h.call_prefix(&c, &mut s), 16);
        h.call_suffix(&c, &mut s);
        let main: String = s.split("\t.subsection 1\n").next().unwrap().to_string();
        let tail = s.split("\t.subsection 0\n").nth(1).unwrap();
        assert_eq!(
            main,
            "\tmov rbp, rsp\n\
             \tmov rsp, qword ptr fs:[stackrt_heap_tls@tpoff + 56]\t# a free block of 48 bytes\n\
             \ttest rsp, rsp\n\
             \tjz .Lhp0_new\n\
             \tpop qword ptr fs:[stackrt_heap_tls@tpoff + 56]\n\
             .Lhp0_got:\n\
             \tpush rbp\t# the caller's SP\n\
             \tprefetcht0 [rsp - 2048]\t# the block a recursion takes next\n\
             \tadd qword ptr fs:[stackrt_heap_tls@tpoff + 32], 1\n"
        );
        assert!(
            s.contains("\t.subsection 0\n\tpush offset .Lf0ret1\n"),
            "{s}"
        );
        assert_eq!(
            tail,
            "\tpush offset .Lf0ret1\n\
             \tjmp cmm_f\n\
             .Lf0ret1:\n\
             \tpop rcx\t# the caller's SP\n\
             \tpush qword ptr fs:[stackrt_heap_tls@tpoff + 56]\t# the block joins its free list\n\
             \tmov qword ptr fs:[stackrt_heap_tls@tpoff + 56], rsp\n\
             \tmov rsp, rcx\n"
        );
    }

    #[test]
    fn large_frames_and_heap_malloc_take_the_general_path() {
        for (malloc, size) in [(false, max_class_size(Target::I686) + 8), (true, 48)] {
            let mut sizes = HashMap::new();
            sizes.insert("cmm_f".to_string(), size);
            let h = Heap::new(malloc, Some(sizes));
            let mut s = String::new();
            let c = site(Target::I686, 8);
            h.call_prefix(&c, &mut s);
            h.call_suffix(&c, &mut s);
            assert!(
                s.contains(&format!("\tpush {size}\n\tcall {ALLOC_STUB}\n")),
                "{s}"
            );
            assert!(
                s.contains(&format!("\tpush {size}\n\tcall {FREE_STUB}\n")),
                "{s}"
            );
            assert!(!s.contains("subsection"), "{s}");
        }
    }
}
