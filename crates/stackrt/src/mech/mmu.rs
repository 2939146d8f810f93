//! The `mmu` and `mmu-reuse` mechanisms' side of the runtime (ABIs [`crate::base::abi::ABI_MMU`] and
//! [`crate::base::abi::ABI_MMU_REUSE`], thesis 3.4.4, paper 4.5): telling a stack-growth fault from a
//! crash, and entering C-- code on a first chunk with a guard page.
//!
//! The compiled caller *probes* before every call: it writes the callee's return address at the
//! deepest word the callee's frame will use (`mov [sp - N], offset ret`), after a read probe
//! (`test [sp - d], esp`) every 4096 bytes when `N` is larger than the guard page; before a call
//! to C it reads down to the extern budget. A probe that lands in the guard page below the
//! current chunk raises `SIGSEGV`; [`crate::signals`] asks [`classify`] whether it is a growth
//! fault, and if so links a chunk and completes the probe run on it (see
//! `crates/cmm-codegen/src/emit/mech/mmu.rs` for the sequences).
//!
//! # Growth fault: every condition (runtime-facts.md)
//! 1. the thread runs chunked code and has a current chunk;
//! 2. `si_code` is `SEGV_ACCERR` (a protection fault, not an unmapped address);
//! 3. the fault address lies in the guard page(s) right below that chunk's `limit`;
//! 4. the stack pointer lies inside that chunk (`limit ..= header`);
//! 5. the faulting instruction is one of the compiler's probes ([`decode_run`]) and its target
//!    (`sp - distance`) is exactly the fault address.
//!
//! Anything else is a real crash.
//!
//! # Probe encodings (the ABI contract with the compiler, mirrored in
//! `cmm_codegen::emit::mech::mmu` and checked against the assembler on both sides)
//! * read probe, both targets: `85 A4 24 d32` = `test dword ptr [esp/rsp + d32], esp`;
//! * return-address probe, i686: `C7 44 24 d8 imm32` / `C7 84 24 d32 imm32` =
//!   `mov dword ptr [esp + d], imm32`;
//! * return-address probe, x86-64: `48 C7 44 24 d8 imm32` / `48 C7 84 24 d32 imm32` =
//!   `mov qword ptr [rsp + d], imm32` (the immediate sign-extended: code lies below 2 GiB).
//!
//! A *probe run* is a sequence of read probes, optionally ended by one return-address probe; a
//! fault on any of them is handled by linking a chunk for the run's largest distance and
//! resuming after the run, the return-address write done by the handler (with the underflow
//! stub's address) on the new chunk.

/// `si_code` of a protection fault (`SEGV_ACCERR`; the `libc` crate does not export it for
/// linux-gnu).
pub const SEGV_ACCERR: i32 = 2;

/// Opcode bytes of a read probe (followed by a 32-bit displacement).
pub const PROBE_TEST: [u8; 3] = [0x85, 0xA4, 0x24];
/// Opcode bytes of the i686 return-address probe with a disp8 / disp32 displacement.
pub const PROBE_WRITE_32: [[u8; 3]; 2] = [[0xC7, 0x44, 0x24], [0xC7, 0x84, 0x24]];
/// Opcode bytes of the x86-64 return-address probe with a disp8 / disp32 displacement.
pub const PROBE_WRITE_64: [[u8; 4]; 2] = [[0x48, 0xC7, 0x44, 0x24], [0x48, 0xC7, 0x84, 0x24]];

/// Most probes one run may have (a frame of 4 GiB probed every 4 KiB); a longer run is not one
/// the compiler emits.
pub const MAX_RUN: usize = 1 << 20;

/// A decoded probe run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeRun {
    /// Distance below SP of the faulting (first decoded) probe.
    pub first: usize,
    /// Largest distance of the run: the bytes the call needs below SP.
    pub distance: usize,
    /// The return address of a run ended by a return-address probe; None for read probes only
    /// (a call to C).
    pub ret: Option<usize>,
    /// Bytes of code of the run from the faulting probe on: where execution resumes.
    pub len: usize,
}

fn read_i32(code: &impl Fn(usize) -> u8, at: usize) -> i32 {
    i32::from_le_bytes([code(at), code(at + 1), code(at + 2), code(at + 3)])
}

/// One probe at `at`: (distance, return address if a write, length), or None.
fn decode_one(
    code: &impl Fn(usize) -> u8,
    at: usize,
    is64: bool,
) -> Option<(usize, Option<usize>, usize)> {
    let neg = |d: i32| (d < 0).then(|| d.unsigned_abs() as usize);
    // Byte by byte, stopping at the first mismatch: never a read past a non-probe's opcode.
    let matches = |at: usize, pat: &[u8]| pat.iter().enumerate().all(|(i, b)| code(at + i) == *b);
    if matches(at, &PROBE_TEST) {
        return Some((neg(read_i32(code, at + 3))?, None, 7));
    }
    let rex = usize::from(is64);
    if is64 && code(at) != 0x48 {
        return None;
    }
    let (disp, imm_at) = if matches(at + rex, &PROBE_WRITE_32[0]) {
        (i32::from(code(at + rex + 3) as i8), at + rex + 4)
    } else if matches(at + rex, &PROBE_WRITE_32[1]) {
        (read_i32(code, at + rex + 3), at + rex + 7)
    } else {
        return None;
    };
    let imm = read_i32(code, imm_at);
    // x86-64 sign-extends the immediate; on i686 it is the whole 32-bit address.
    let ret = if is64 {
        imm as i64 as usize
    } else {
        imm as u32 as usize
    };
    Some((neg(disp)?, Some(ret), imm_at + 4 - at))
}

/// Decodes the probe run starting at offset 0 of `code` (a byte reader: the handler passes one
/// over the faulting instruction's address). Reads a byte only once the bytes before it have
/// been recognised as part of a probe, so it never reads past the run's first non-probe
/// instruction's opcode bytes. None if the first instruction is not a probe.
pub fn decode_run(code: impl Fn(usize) -> u8, is64: bool) -> Option<ProbeRun> {
    let (first, mut ret, mut at) = decode_one(&code, 0, is64)?;
    let mut distance = first;
    let mut probes = 1;
    while ret.is_none() && probes < MAX_RUN {
        let Some((d, r, len)) = decode_one(&code, at, is64) else {
            break;
        };
        distance = distance.max(d);
        ret = r;
        at += len;
        probes += 1;
    }
    Some(ProbeRun {
        first,
        distance,
        ret,
        len: at,
    })
}

/// What the handler knows of a fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault {
    /// `si_code`.
    pub code: i32,
    /// `si_addr`.
    pub addr: usize,
    /// The stack pointer at the fault.
    pub sp: usize,
}

/// The chunk the thread runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkBounds {
    /// Its header address (the highest usable SP).
    pub header: usize,
    /// Its lowest usable address.
    pub limit: usize,
    /// Bytes of guard below `limit`.
    pub guard: usize,
}

/// Why a fault is not a growth fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Crash {
    /// The thread runs no chunked code.
    NotChunked,
    /// Not a protection fault.
    NotAccessError,
    /// The address is not in the current chunk's guard page.
    OutsideGuard,
    /// In the guard page, but the stack pointer is not inside the chunk.
    StackPointerOutside,
    /// In the guard page, but not by one of the compiler's probes (C code or the runtime used
    /// more stack than budgeted, or a wild access).
    NotAProbe,
}

/// The handler's decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Grow(ProbeRun),
    Crash(Crash),
}

/// Applies the rules of the module docs, in order.
pub fn classify(
    f: &Fault,
    chunk: Option<ChunkBounds>,
    code: impl Fn(usize) -> u8,
    is64: bool,
) -> Verdict {
    let Some(c) = chunk else {
        return Verdict::Crash(Crash::NotChunked);
    };
    if f.code != SEGV_ACCERR {
        return Verdict::Crash(Crash::NotAccessError);
    }
    if c.guard == 0 || f.addr >= c.limit || f.addr < c.limit.saturating_sub(c.guard) {
        return Verdict::Crash(Crash::OutsideGuard);
    }
    if f.sp < c.limit || f.sp > c.header {
        return Verdict::Crash(Crash::StackPointerOutside);
    }
    match decode_run(code, is64) {
        Some(run) if f.sp.checked_sub(run.first) == Some(f.addr) => Verdict::Grow(run),
        _ => Verdict::Crash(Crash::NotAProbe),
    }
}

#[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
extern "C" {
    fn stackrt_enter_mmu(fp: usize, a0: usize, a1: usize, nargs: usize) -> usize;
    /// The underflow stubs (`crate::mech::arch::*_mmu`): the address a growth fault writes in place
    /// of the first frame's return address.
    pub fn stackrt_mmu_underflow();
    pub fn stackrt_mmu_underflow_reuse();
}

/// Calls the C-- function at `fp` with `nargs` (0..=2) of `a0, a1` on a fresh first chunk with
/// a guard page. The thread must have its alternate signal stack ([`crate::signals`]).
///
/// # Safety
/// `fp` must be a C-- function compiled with `mmu` or `mmu-reuse` whose parameters are
/// `nargs` words.
#[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
pub unsafe fn enter(fp: usize, a0: usize, a1: usize, nargs: usize) -> usize {
    // SAFETY: the caller guarantees `fp` follows the MMU convention; the trampoline preserves
    // the C ABI's callee-saved registers and returns on the native stack.
    unsafe { stackrt_enter_mmu(fp, a0, a1, nargs) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader(bytes: &[u8]) -> impl Fn(usize) -> u8 + '_ {
        // A non-probe filler after the given bytes (`nop`).
        move |i| bytes.get(i).copied().unwrap_or(0x90)
    }

    #[test]
    fn decodes_a_write_probe_with_disp8_and_disp32() {
        // mov dword ptr [esp - 32], 0x08049000
        let b = [0xC7, 0x44, 0x24, 0xE0, 0x00, 0x90, 0x04, 0x08];
        let run = decode_run(reader(&b), false).unwrap();
        assert_eq!(
            run,
            ProbeRun {
                first: 32,
                distance: 32,
                ret: Some(0x0804_9000),
                len: 8
            }
        );
        // mov qword ptr [rsp - 40000], 0x401000
        let d = (-40000i32).to_le_bytes();
        let b = [
            0x48, 0xC7, 0x84, 0x24, d[0], d[1], d[2], d[3], 0x00, 0x10, 0x40, 0x00,
        ];
        let run = decode_run(reader(&b), true).unwrap();
        assert_eq!(run.distance, 40000);
        assert_eq!(run.ret, Some(0x401000));
        assert_eq!(run.len, 12);
    }

    #[test]
    fn a_run_of_read_probes_takes_the_largest_distance() {
        let mut b = Vec::new();
        for d in [4096i32, 8192, 8200] {
            b.extend_from_slice(&PROBE_TEST);
            b.extend_from_slice(&(-d).to_le_bytes());
        }
        let run = decode_run(reader(&b), true).unwrap();
        assert_eq!(run.first, 4096);
        assert_eq!(run.distance, 8200);
        assert_eq!(run.ret, None);
        assert_eq!(run.len, 21);
    }

    #[test]
    fn positive_displacements_and_other_instructions_are_not_probes() {
        // mov dword ptr [esp + 8], 5: a store into the frame, not a probe.
        let b = [0xC7, 0x44, 0x24, 0x08, 0x05, 0x00, 0x00, 0x00];
        assert_eq!(decode_run(reader(&b), false), None);
        // push rbp
        assert_eq!(decode_run(reader(&[0x55]), true), None);
        // the i686 form without REX is not an x86-64 probe
        let b = [0xC7, 0x44, 0x24, 0xE0, 0, 0, 0, 0];
        assert_eq!(decode_run(reader(&b), true), None);
    }
}
