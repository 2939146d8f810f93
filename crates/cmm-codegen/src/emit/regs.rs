//! Physical registers of i686 and x86-64 as regalloc2 `PReg`s, their assembly names and the
//! register sets (allocatable, caller-saved under the C ABI) of each target.

use regalloc2::{PReg, PRegSet, RegClass};

use super::Target;

/// Hardware encodings of the general-purpose registers (the x86 ModRM numbering).
pub const RAX: u8 = 0;
pub const RCX: u8 = 1;
pub const RDX: u8 = 2;
pub const RBX: u8 = 3;
pub const RSP: u8 = 4;
pub const RBP: u8 = 5;
pub const RSI: u8 = 6;
pub const RDI: u8 = 7;
pub const R8: u8 = 8;
pub const R9: u8 = 9;

pub fn gpr(enc: u8) -> PReg {
    PReg::new(enc as usize, RegClass::Int)
}

pub fn xmm(enc: u8) -> PReg {
    PReg::new(enc as usize, RegClass::Float)
}

/// Width of an integer operation or register name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Width {
    /// 8-bit (`al`, `sil`, `r8b`); only for `setcc`, byte stores and byte extension.
    B8,
    /// 32-bit (`eax`); `char` and `int` values live in 32-bit registers.
    B32,
    /// 64-bit (`rax`); pointers on x86-64.
    B64,
}

const NAMES64: [&str; 16] = [
    "rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi", "r8", "r9", "r10", "r11", "r12", "r13",
    "r14", "r15",
];
const NAMES32: [&str; 16] = [
    "eax", "ecx", "edx", "ebx", "esp", "ebp", "esi", "edi", "r8d", "r9d", "r10d", "r11d", "r12d",
    "r13d", "r14d", "r15d",
];
const NAMES8: [&str; 16] = [
    "al", "cl", "dl", "bl", "spl", "bpl", "sil", "dil", "r8b", "r9b", "r10b", "r11b", "r12b",
    "r13b", "r14b", "r15b",
];
const XMM: [&str; 16] = [
    "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
    "xmm11", "xmm12", "xmm13", "xmm14", "xmm15",
];

/// The assembly name of a physical register at a width (ignored for xmm registers).
pub fn name(reg: PReg, width: Width) -> &'static str {
    let i = reg.hw_enc();
    match reg.class() {
        RegClass::Int => match width {
            Width::B8 => NAMES8[i],
            Width::B32 => NAMES32[i],
            Width::B64 => NAMES64[i],
        },
        _ => XMM[i],
    }
}

/// General-purpose registers the allocator may hand out on a target (the stack pointer never).
pub fn allocatable_gprs(target: Target) -> Vec<u8> {
    match target {
        Target::I686 => vec![RAX, RCX, RDX, RBX, RSI, RDI, RBP],
        Target::X86_64 => vec![
            RAX, RCX, RDX, RBX, RSI, RDI, R8, R9, 10, 11, 12, 13, 14, 15, RBP,
        ],
    }
}

/// Number of xmm registers on a target.
pub fn num_xmms(target: Target) -> u8 {
    match target {
        Target::I686 => 8,
        Target::X86_64 => 16,
    }
}

/// Registers a C function may overwrite (cdecl on i686, System V on x86-64): every xmm register
/// and the caller-saved general-purpose registers.
pub fn c_caller_saved(target: Target) -> PRegSet {
    let mut set = PRegSet::empty();
    let gprs: &[u8] = match target {
        Target::I686 => &[RAX, RCX, RDX],
        Target::X86_64 => &[RAX, RCX, RDX, RSI, RDI, R8, R9, 10, 11],
    };
    for &g in gprs {
        set.add(gpr(g));
    }
    for x in 0..num_xmms(target) {
        set.add(xmm(x));
    }
    set
}

/// C ABI callee-saved general-purpose registers: the entry trampolines save these because C--
/// code does not preserve any register.
pub fn c_callee_saved(target: Target) -> &'static [u8] {
    match target {
        Target::I686 => &[RBX, RSI, RDI, RBP],
        Target::X86_64 => &[RBX, RBP, 12, 13, 14, 15],
    }
}

/// System V x86-64 integer argument registers, in order.
pub const SYSV_INT_ARGS: [u8; 6] = [RDI, RSI, RDX, RCX, R8, R9];

/// Registers the C-- convention of the emission stage preserves across calls (a subset of the C
/// ABI's callee-saved registers, so C calls and the runtime's entry trampolines preserve them
/// too), given the registers the mechanism reserves. A function saves those it uses in its
/// frame. Everything else is clobbered by a call.
///
/// One C-preserved register stays out of the set, the [`spare`]: `ebp`/`rbp`, or on x86-64
/// `r15` when the mechanism reserves `rbp` (its chunk, thread or call-base register). A value
/// that lives across C calls but no C-- call costs no save there. i686 has no program-wide
/// spare when `ebp` is reserved: with `edi` as the spare, two preserved registers were too few
/// (green threads' frames grew by a spill, `tests/green.rs`' hand-derived sizes), against one
/// save and restore fewer in a recursion that calls C on the side (`deep_repeat.cm`: 1.16x to
/// 1.01x `callee-cleanup` per call, 8 deep). There single functions take `edi` as their own
/// spare instead ([`per_function_spare`]).
pub fn cmm_callee_saved(target: Target, reserved: &[PReg]) -> &'static [u8] {
    match target {
        Target::I686 => &[RBX, RSI, RDI],
        Target::X86_64 if reserved.contains(&gpr(RBP)) => &[RBX, 12, 13, 14],
        Target::X86_64 => &[RBX, 12, 13, 14, 15],
    }
}

/// The C-preserved register C-- calls clobber (see [`cmm_callee_saved`]), if the mechanism
/// leaves one: none on i686 when `ebp` is reserved.
pub fn spare(target: Target, reserved: &[PReg]) -> Option<PReg> {
    let saved = cmm_callee_saved(target, reserved);
    c_callee_saved(target)
        .iter()
        .map(|&g| gpr(g))
        .find(|r| !saved.contains(&(r.hw_enc() as u8)) && !reserved.contains(r))
}

/// Where the convention has no spare for all (i686 with `ebp` reserved), the register a single
/// function may take as its own spare: `edi`. A function that does (a *spare user*, chosen by
/// [`super::spare_users`]) preserves only `ebx` and `esi`, and every call to it clobbers `edi`
/// too; its callers know, since the program is compiled whole.
pub fn per_function_spare(target: Target, reserved: &[PReg]) -> Option<PReg> {
    (target == Target::I686 && spare(target, reserved).is_none()).then(|| gpr(RDI))
}

/// One function's register convention: the registers it preserves (saves when it writes
/// them, or when a call it makes clobbers them) and its spare, if any.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Convention {
    pub preserved: &'static [u8],
    pub spare: Option<PReg>,
}

/// The convention of a function under a mechanism: the program's ([`cmm_callee_saved`],
/// [`spare`]), or, for a spare user, that less `edi`, which becomes its spare.
pub fn convention(target: Target, reserved: &[PReg], spare_user: bool) -> Convention {
    match per_function_spare(target, reserved) {
        Some(own) if spare_user => Convention {
            preserved: &[RBX, RSI],
            spare: Some(own),
        },
        _ => Convention {
            preserved: cmm_callee_saved(target, reserved),
            spare: spare(target, reserved),
        },
    }
}
