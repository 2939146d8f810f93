//! Mechanisms `mmu` and `mmu-reuse`: linked stack chunks with MMU overflow detection (thesis
//! 3.4.4, paper 4.5). Every chunk has a `PROT_NONE` guard page below it. The caller *probes*:
//! it writes the callee's return address at the deepest point the callee's frame will use,
//! before it moves the stack pointer. If that write lands in the guard page, the runtime's
//! `SIGSEGV` handler links a new chunk, moves SP there and completes the write on the new chunk
//! with the address of the runtime's underflow stub in place of the return address. So the
//! common path has no compare at all, and underflow is never tested: the first frame of a chunk
//! returns into the stub, which goes back to the previous chunk and jumps to the real return
//! address (kept in the chunk header's `resume` word).
//!
//! `mmu` gives the chunk back to the system on every underflow (the thesis freed it); `mmu-reuse`
//! keeps it in the thread's cache and the shared pool (the paper's MMU-with-reuse), and the stub
//! then makes no call at all (see the runtime side, `crates/stackrt/src/mech/arch/*_mmu.rs`).
//!
//! # Sequences, side by side with the thesis
//!
//! Calls to C-- functions (`N` = `stacksizeof(callee)`: its arguments and frame, return address
//! slot included; listing 3.16 and 3.17):
//!
//! ```text
//!  thesis listing 3.16 (caller)               this stage (i686; x86-64: rbp, rsp, qword)
//!  MOV  EAX, ESP                              mov  ebp, esp
//!  MOV  EDX, return_label                     test dword ptr [esp - 4096], esp   ; only if
//!  MOV  [ESP - CALLEE_STACK_SIZE], EDX        ...                                ;  N > 4096
//!  PUSH arg1 ... PUSH argn                    mov  dword ptr [esp - N], offset .Lret ; probe
//!  JMP  callee_name                           push argN ... push arg1  ; spills read [ebp + k]
//! return_label:                               jmp  callee
//!                                            .Lret:
//!
//!  thesis listing 3.17 (callee)               this stage
//!  SUB  ESP, LOCAL_STACK_SIZE                 sub  esp, S
//!  ...                                        ...
//!  ADD  ESP, COMPLETE_STACK_SIZE              add  esp, S + A
//!  JMP  [ESP - COMPLETE_STACK_SIZE]           jmp  dword ptr [esp - (S + A)]
//! ```
//!
//! The semantics are the thesis's: the probe is the return address's own store, at the lowest
//! word of the callee's frame (`[esp]` in the callee's body, which the printer keeps free: the
//! frame's spill slots start above it, [`Mechanism::frame_bottom`]); the callee removes its
//! frame and arguments and jumps through that word. Differences:
//!
//! * The return address is an immediate instead of `EDX`, so the call needs no free register.
//!   On a growth fault the handler cannot change the immediate, so it *completes* the probe
//!   itself (writes the stub's address on the new chunk and resumes after the instruction).
//!   The handler recognizes the probe by its bytes ([`PROBE_WRITE_32`] etc.); the runtime
//!   mirrors them (`stackrt::mech::mmu::probe`), and both sides' tests check them against the
//!   assembler.
//! * The caller's SP register (thesis `EAX`) is `ebp`/`rbp`, reserved (as under `lookahead`):
//!   the pushes read the caller's spill slots through it ([`Mechanism::call_base`]), since after
//!   a growth fault SP is on the new chunk. The handler does not need it (it reads SP from the
//!   signal context).
//! * Frames larger than the guard page: a single probe at `[esp - N]` could step over the guard
//!   into whatever lies below it. The probe is preceded by one read probe (`test`) every 4096
//!   bytes ([`PROBE_STRIDE`], the guard size), as paper 4.5 says; the handler, faulting at any
//!   of them, decodes the run up to its end to learn `N`.
//! * `stacksizeof(callee)` comes from the callee's frame, so the program is printed twice
//!   ([`crate::emit::print_all`]): once to learn every frame, once with the probe distances.
//!
//! Calls to C functions (listings 3.18-3.19): the thesis pushes a return address and jumps to an
//! extern trampoline that calls the C function and returns through that address (possibly the
//! underflow stub), and does not keep the C ABI's 16-byte alignment. Here the C function runs on
//! the OS thread's handler stack (its native stack below the entry trampoline, or a
//! green-thread worker's own), and the caller moves there itself before it pushes the
//! arguments: the shared printer's C call (alignment padding, register arguments on x86-64)
//! between the inline form of [`super::ccall`]'s switch (`mov ebp, esp; mov esp, T(handler)`
//! ... `mov esp, ebp`). The chunk gets nothing below SP, so the call probes nothing, cannot
//! fault and cannot move to a new chunk. Before (issue 26): the arguments were pushed on the
//! chunk below one probe and copied by the runtime's trampoline, and a level within that many
//! bytes of a chunk's end faulted on its C call (`deep_repeat.cm 1000000 20 1`, i686
//! `mmu-reuse`: 7,320 guard faults against 2,440 without the calls, and 1.66x `callee-cleanup`
//! against 1.40x without them); before that, probes down to an 8 KiB C budget (three cache
//! lines and often a page far from the working set, on every call).
//!
//! ```text
//!  mov  ebp, esp
//!  mov  esp, dword ptr gs:[stackrt_chunk_tls@ntpoff]   ; the handler stack's top S
//!  mov  dword ptr [esp - 16], ebp ; sub esp, 16         ; the thread's SP, as the runtime expects
//!  sub  esp, pad ; push args                            ; spills read [ebp + k]
//!  inc  T(ccalls) ; call f ; dec T(ccalls)              ; C runs on the handler stack
//!  cmp  T(lib_save), 0 ; jne stackrt_ccall_switched     ; C called the thread library: exit 70
//!  add  esp, pad + args ; mov esp, ebp
//! ```
//!
//! Calls into the thread library (`sthread_*`) may switch green threads, so they run on the
//! thread's own stack as the thesis's C calls did: probes down to the extern budget (8 KiB,
//! see [`crate::callgraph::DEFAULT_EXTERN_BUDGET_64`]) and a plain `call`. C code preserves
//! `ebp`/`rbp`.
//!
//! # Stack of an `mmu` program (i686; x86-64 the same with 8-byte words)
//!
//! ```text
//!  chunk k (older)                          chunk k+1 (linked by the SIGSEGV handler)
//!  +--------------------------+ header k    +--------------------------+ header k+1: resume =
//!  | ...frames...             |             | args of the call         |  .Lret, prev_sp = X
//!  | caller's frame (S bytes) |             | callee's frame (S bytes) |
//!  +--------------------------+ <- X = SP   | [esp]: stub address      | <- callee's esp
//!  |  ... unused ...          |    at the   | ...deeper frames...      |
//!  +--------------------------+ limit k     +--------------------------+ limit k+1
//!  |  guard page (PROT_NONE)  | <- probe    |  guard page (PROT_NONE)  |
//!  +--------------------------+    faulted  +--------------------------+
//! ```
//!
//! # Stack-need word
//!
//! As under `lookahead`, the u32 at `entry - 8` of every function is its stack need at entry:
//! here `stacksizeof(f)` (arguments and frame). The runtime's entry trampoline gives a thread's
//! first chunk at least that much and writes its return address at `[header - need]`, like a
//! caller's probe.

use std::collections::HashMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU32, Ordering};

use regalloc2::PReg;

use super::{sub_sp, CallSite, FrameInfo, Mechanism};
use crate::callgraph::ChunkHeaderLayout;
use crate::emit::{regs, EmitError, EmitOptions, Target};
use crate::lower::LoweredProgram;

/// ABI id of `mmu` (`stackrt::base::abi::ABI_MMU`).
pub const ABI_MMU: u32 = 4;
/// ABI id of `mmu-reuse` (`stackrt::base::abi::ABI_MMU_REUSE`).
pub const ABI_MMU_REUSE: u32 = 5;

/// Default chunk size on i686: 128 KiB. Every guarded chunk costs two of the kernel's
/// `vm.max_map_count` mappings (about 28,600 guarded chunks at once, ARCHITECTURE.md "Guard
/// pages"), and the 32-bit address space holds about 3 GiB: 128 KiB chunks let one thread
/// recurse through most of it (the thesis's 100-million-deep Summation needs 1.6 GB there).
pub const DEFAULT_CHUNK_SIZE_32: u32 = 128 * 1024;
/// Default chunk size on x86-64: 1 MiB (address space is plentiful; pages are committed only
/// when touched; 28,600 chunks hold 28 GiB of stack).
pub const DEFAULT_CHUNK_SIZE_64: u32 = 1024 * 1024;

/// The default `--chunk-size` of the MMU mechanisms on a target.
pub fn default_chunk_size(t: Target) -> u32 {
    match t {
        Target::I686 => DEFAULT_CHUNK_SIZE_32,
        Target::X86_64 => DEFAULT_CHUNK_SIZE_64,
    }
}

/// Distance between consecutive probes of one call: the guard page's size, so no probe run
/// steps over a guard.
pub const PROBE_STRIDE: u32 = 4096;

/// The runtime's underflow stub of `mmu`: gives the chunk back (a call into the runtime).
pub const UNDERFLOW_RELEASE: &str = "stackrt_mmu_underflow";
/// The runtime's underflow stub of `mmu-reuse`: marks the chunk unlinked, no call (but once
/// per reclaim budget, as under `lookahead`).
pub const UNDERFLOW_REUSE: &str = "stackrt_mmu_underflow_reuse";

/// The call base register (the caller's SP during a call sequence): `ebp` / `rbp`.
pub const CALL_BASE: u8 = regs::RBP;

/// Opcode bytes of a read probe on both targets: `test dword ptr [esp + disp32], esp` /
/// `test dword ptr [rsp + disp32], esp` (`85 /r`, ModRM 0xA4 = disp32 + SIB, SIB 0x24 = base
/// esp), followed by the 32-bit displacement (negative). Mirrored by `stackrt::mech::mmu`.
pub const PROBE_TEST: [u8; 3] = [0x85, 0xA4, 0x24];
/// Opcode bytes of the return-address probe on i686: `mov dword ptr [esp + disp], imm32`
/// (`C7 /0`), with a disp8 (ModRM 0x44) or disp32 (ModRM 0x84) displacement, then the imm32.
pub const PROBE_WRITE_32: [[u8; 3]; 2] = [[0xC7, 0x44, 0x24], [0xC7, 0x84, 0x24]];
/// The same on x86-64 with REX.W: `mov qword ptr [rsp + disp], imm32` (sign-extended).
pub const PROBE_WRITE_64: [[u8; 4]; 2] = [[0x48, 0xC7, 0x44, 0x24], [0x48, 0xC7, 0x84, 0x24]];

/// `mmu` or `mmu-reuse`: the sequences; the probe distances come from the first pass.
pub struct Mmu {
    reuse: bool,
    /// `stacksizeof` of each C-- function by symbol (None: not known, as in the first pass;
    /// every probe then uses the smallest distance).
    sizes: Option<HashMap<String, u32>>,
    /// Numbers the underflow labels of the C calls printed so far.
    labels: AtomicU32,
    /// The program runs green threads: C calls test for a switch the thread library deferred
    /// (`super::ccall`'s module docs).
    green: bool,
}

/// `mmu` for [`super::by_kind`] (name, ABI id, frame conventions), without probe distances.
pub static MMU_BASE: Mmu = Mmu::new(false, None, true);
/// `mmu-reuse` for [`super::by_kind`].
pub static MMU_REUSE_BASE: Mmu = Mmu::new(true, None, true);

impl Mechanism for Mmu {
    fn name(&self) -> &'static str {
        name(self.reuse)
    }
    fn abi_id(&self) -> u32 {
        abi(self.reuse)
    }
    fn reserved_regs(&self, _target: Target) -> Vec<PReg> {
        vec![regs::gpr(CALL_BASE)]
    }
    fn entry_arg_offset(&self, _target: Target) -> u32 {
        0
    }
    fn call_overhead(&self, _target: Target) -> u32 {
        0
    }
    fn frame_bottom(&self, target: Target) -> u32 {
        target.slot()
    }
    fn call_base(&self, target: Target) -> Option<&'static str> {
        Some(base_reg(target))
    }
    fn stack_need_word(&self, f: &FrameInfo) -> Option<u32> {
        Some(f.frame_size + f.arg_bytes)
    }
    fn prologue(&self, f: &FrameInfo, out: &mut String) {
        sub_sp(f.target, f.frame_size, out);
    }
    fn epilogue(&self, f: &FrameInfo, out: &mut String) {
        epilogue(f, out);
    }
    fn call_prefix(&self, c: &CallSite, out: &mut String) -> u32 {
        let n = self
            .sizes
            .as_ref()
            .and_then(|s| s.get(c.callee))
            .copied()
            .unwrap_or(c.target.slot());
        call_probe(c, n, out);
        0
    }
    fn call_suffix(&self, c: &CallSite, out: &mut String) {
        call_jump(c, out);
    }
    fn extern_call_prefix(&self, c: &CallSite, out: &mut String) {
        let t = c.target;
        if !on_thread_stack(c) {
            super::ccall::switch_to_handler_stack(t, base_reg(t), out);
            return;
        }
        let sp = t.sp();
        let distance = Self::extern_distance(c);
        let _ = writeln!(out, "\tmov {}, {sp}", base_reg(t));
        stride_probes(t, distance, out);
        let _ = writeln!(
            out,
            "\t{{disp32}} test dword ptr [{sp} - {distance}], esp\t# probe: C function's stack"
        );
    }
    fn extern_call(&self, c: &CallSite, out: &mut String) {
        if on_thread_stack(c) {
            let _ = writeln!(out, "\tcall {}", c.callee);
        } else {
            super::ccall::call_inline(c, self.green, out);
        }
    }
    fn extern_call_return(&self, c: &CallSite, out: &mut String) {
        let t = c.target;
        if !on_thread_stack(c) {
            super::ccall::switch_back(t, base_reg(t), out);
            return;
        }
        let sp = t.sp();
        let k = self.labels.fetch_add(1, Ordering::Relaxed);
        let resume = ChunkHeaderLayout::for_pointer_size(t.slot()).resume;
        let _ = writeln!(out, "\tcmp {sp}, {}\t# on a new chunk?", base_reg(t));
        let _ = writeln!(out, "\tjne .Lmmu{k}_unf");
        let _ = writeln!(out, ".Lmmu{k}_back:");
        out.push_str("\t.subsection 1\n");
        let _ = writeln!(out, ".Lmmu{k}_unf:");
        let _ = writeln!(
            out,
            "\tmov {} ptr [{sp} + {resume}], offset .Lmmu{k}_back\t# resume after the underflow",
            word(t)
        );
        let _ = writeln!(out, "\tjmp {}", self.underflow_stub());
        out.push_str("\t.subsection 0\n");
    }
}

/// Whether a C call runs on the thread's own stack: the thread library's and the race
/// detector's (`--race`), which may switch green threads (the handler stack is the worker's,
/// used by the next thread).
fn on_thread_stack(c: &CallSite) -> bool {
    c.callee
        .starts_with(crate::callgraph::THREAD_LIBRARY_PREFIX)
        || c.callee.starts_with(crate::race::ENTRY_PREFIX)
}

fn name(reuse: bool) -> &'static str {
    if reuse {
        "mmu-reuse"
    } else {
        "mmu"
    }
}

fn abi(reuse: bool) -> u32 {
    if reuse {
        ABI_MMU_REUSE
    } else {
        ABI_MMU
    }
}

fn base_reg(t: Target) -> &'static str {
    match t {
        Target::I686 => "ebp",
        Target::X86_64 => "rbp",
    }
}

fn word(t: Target) -> &'static str {
    match t {
        Target::I686 => "dword",
        Target::X86_64 => "qword",
    }
}

/// Listing 3.17, lines 3-4: frame and arguments removed at once, then the jump through the
/// return address at the bottom of the frame (the stub's, in a chunk's first frame).
fn epilogue(f: &FrameInfo, out: &mut String) {
    let total = f.frame_size + f.arg_bytes;
    let sp = f.target.sp();
    let _ = writeln!(out, "\tadd {sp}, {total}");
    let _ = writeln!(out, "\tjmp {} ptr [{sp} - {total}]", word(f.target));
}

/// Read probes every [`PROBE_STRIDE`] bytes strictly above `distance` below SP.
fn stride_probes(t: Target, distance: u32, out: &mut String) {
    let sp = t.sp();
    let mut d = PROBE_STRIDE;
    while d < distance {
        let _ = writeln!(out, "\ttest dword ptr [{sp} - {d}], esp\t# probe");
        d += PROBE_STRIDE;
    }
}

/// Listing 3.16, lines 1-3: the caller's SP into the call base register, the probes and the
/// return address written at `[SP - distance]`.
fn call_probe(c: &CallSite, distance: u32, out: &mut String) {
    let t = c.target;
    let sp = t.sp();
    let _ = writeln!(out, "\tmov {}, {sp}", base_reg(t));
    stride_probes(t, distance, out);
    let _ = writeln!(
        out,
        "\tmov {} ptr [{sp} - {distance}], offset {}\t# probe: return address",
        word(t),
        c.return_label
    );
}

/// Listing 3.16, lines 7-8.
fn call_jump(c: &CallSite, out: &mut String) {
    let _ = writeln!(out, "\tjmp {}", c.callee);
    let _ = writeln!(out, "{}:", c.return_label);
}

impl Mmu {
    const fn new(reuse: bool, sizes: Option<HashMap<String, u32>>, green: bool) -> Self {
        Mmu {
            reuse,
            sizes,
            labels: AtomicU32::new(0),
            green,
        }
    }

    fn underflow_stub(&self) -> &'static str {
        if self.reuse {
            UNDERFLOW_REUSE
        } else {
            UNDERFLOW_RELEASE
        }
    }

    /// How far below SP a call into the thread library probes: the extern budget, its pushed
    /// arguments and its return address. Such a call may switch green threads, so it runs on
    /// the thread's stack; every other C call runs on the handler stack
    /// ([`super::ccall::switch_to_handler_stack`]) and probes nothing.
    fn extern_distance(c: &CallSite) -> u32 {
        crate::callgraph::default_extern_budget(c.target.slot()) + c.arg_bytes + c.target.slot()
    }
}

/// Emits the whole program under `mmu` / `mmu-reuse` (see [`crate::emit::emit_program`]): a
/// first pass for the frames, a second printing the probes
/// ([`crate::emit::emit_sized_program`]). Also defines `__cmm_chunk_size`.
pub fn emit_program(
    p: &LoweredProgram,
    opts: &EmitOptions,
    reuse: bool,
    chunk_size: u32,
) -> Result<String, EmitError> {
    let green = crate::lower::is_green_threads(p);
    crate::emit::emit_sized_program(p, opts, chunk_size, "chunk size", |sizes| {
        Mmu::new(reuse, Some(sizes), green)
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

    #[test]
    fn call_probe_writes_the_return_address_at_the_callee_frame_bottom() {
        let mut s = String::new();
        call_probe(&site(Target::I686, 8), 32, &mut s);
        call_jump(&site(Target::I686, 8), &mut s);
        assert_eq!(
            s,
            "\tmov ebp, esp\n\
             \tmov dword ptr [esp - 32], offset .Lf0ret1\t# probe: return address\n\
             \tjmp cmm_f\n\
             .Lf0ret1:\n"
        );
    }

    #[test]
    fn large_frames_are_probed_every_page() {
        let mut s = String::new();
        call_probe(&site(Target::X86_64, 16), 9000, &mut s);
        assert_eq!(
            s,
            "\tmov rbp, rsp\n\
             \ttest dword ptr [rsp - 4096], esp\t# probe\n\
             \ttest dword ptr [rsp - 8192], esp\t# probe\n\
             \tmov qword ptr [rsp - 9000], offset .Lf0ret1\t# probe: return address\n"
        );
        // Exactly one page: no extra probe (the write is within a guard page of SP).
        let mut s = String::new();
        call_probe(&site(Target::X86_64, 16), 4096, &mut s);
        assert!(!s.contains("test"), "{s}");
    }

    /// Assembles `text` with the system C compiler and returns the bytes of `.text`.
    fn assemble(text: &str, t: Target) -> Vec<u8> {
        let dir =
            std::env::temp_dir().join(format!("cmm-mmu-probe-{}-{:?}", std::process::id(), t));
        std::fs::create_dir_all(&dir).unwrap();
        let (s, o, bin) = (dir.join("p.s"), dir.join("p.o"), dir.join("p.bin"));
        std::fs::write(&s, format!("\t.intel_syntax noprefix\n\t.text\n{text}")).unwrap();
        let m = if t == Target::I686 { "-m32" } else { "-m64" };
        let run = |c: &mut std::process::Command| assert!(c.status().unwrap().success());
        run(std::process::Command::new("cc")
            .args([m, "-c", "-o"])
            .arg(&o)
            .arg(&s));
        run(std::process::Command::new("objcopy")
            .args(["-O", "binary", "--only-section=.text"])
            .arg(&o)
            .arg(&bin));
        let b = std::fs::read(&bin).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        b
    }

    /// The compiler's half of the probe-encoding contract with the runtime's fault handler
    /// (`stackrt::mech::mmu`): what this module prints assembles to the documented bytes.
    #[test]
    fn printed_probes_assemble_to_the_documented_encodings() {
        for t in [Target::I686, Target::X86_64] {
            for (distance, tests) in [(32u32, 0usize), (4096, 0), (40000, 9)] {
                let mut s = String::new();
                call_probe(&site(t, 8), distance, &mut s);
                s.push_str(".Lf0ret1:\n");
                let b = assemble(&s, t);
                // `mov ebp, esp` / `mov rbp, rsp`
                let mov = if t == Target::I686 { 2 } else { 3 };
                let mut at = mov;
                for k in 1..=tests {
                    assert_eq!(&b[at..at + 3], &PROBE_TEST, "{t:?} {distance}");
                    let d = i32::from_le_bytes(b[at + 3..at + 7].try_into().unwrap());
                    assert_eq!(d, -(k as i32 * 4096));
                    at += 7;
                }
                let (op, disp_len): (&[u8], usize) = match (t, distance <= 128) {
                    (Target::I686, true) => (&PROBE_WRITE_32[0], 1),
                    (Target::I686, false) => (&PROBE_WRITE_32[1], 4),
                    (Target::X86_64, true) => (&PROBE_WRITE_64[0], 1),
                    (Target::X86_64, false) => (&PROBE_WRITE_64[1], 4),
                };
                assert_eq!(&b[at..at + op.len()], op, "{t:?} {distance}");
                assert_eq!(b.len(), at + op.len() + disp_len + 4, "{t:?} {distance}");
            }
            // A call into the thread library runs on the thread's stack: probes every page
            // down to the C reserve, its arguments and return address, the last with a 32-bit
            // displacement as the fault handler expects.
            let lib = CallSite {
                callee: "sthread_yield",
                ..site(t, 16)
            };
            let mut s = String::new();
            Mmu::new(false, None, true).extern_call_prefix(&lib, &mut s);
            let b = assemble(&s, t);
            let mov = if t == Target::I686 { 2 } else { 3 };
            assert_eq!((b.len() - mov) % 7, 0);
            for p in b[mov..].chunks(7) {
                assert_eq!(&p[..3], &PROBE_TEST);
            }
            let last = &b[b.len() - 7..];
            let reach = crate::callgraph::default_extern_budget(t.slot()) + 16 + t.slot();
            assert_eq!(
                i32::from_le_bytes(last[3..7].try_into().unwrap()),
                -(reach as i32)
            );
        }
    }

    /// Any other C call moves to the handler stack before its arguments: no probe, and no
    /// underflow test after it (SP never leaves the chunk it was on).
    #[test]
    fn c_calls_run_on_the_handler_stack_without_a_probe() {
        for t in [Target::I686, Target::X86_64] {
            let c = CallSite {
                callee: "abs",
                ..site(t, 16)
            };
            let m = Mmu::new(true, None, true);
            let mut s = String::new();
            m.extern_call_prefix(&c, &mut s);
            m.extern_call(&c, &mut s);
            m.extern_call_return(&c, &mut s);
            assert!(!s.contains("probe"), "{s}");
            assert!(!s.contains("jne .Lmmu"), "{s}");
            assert!(s.contains("\tcall abs\t# on the handler stack\n"), "{s}");
            assert!(
                s.ends_with(&format!("\tmov {}, {}\n", t.sp(), base_reg(t))),
                "{s}"
            );
        }
    }

    #[test]
    fn epilogue_removes_frame_and_arguments_and_jumps_through_the_bottom_word() {
        let mut s = String::new();
        let f = FrameInfo {
            target: Target::X86_64,
            symbol: "cmm_f",
            frame_size: 40,
            arg_bytes: 24,
        };
        epilogue(&f, &mut s);
        assert_eq!(s, "\tadd rsp, 64\n\tjmp qword ptr [rsp - 64]\n");
    }
}
