//! Stack mechanisms: the prologue, epilogue and call sequences that differ between conventions.
//!
//! The rest of the emission stage (instruction selection, register allocation, frame layout,
//! argument pushes, C calls) is shared. Adding a mechanism means adding one module here with a
//! type implementing [`Mechanism`] and one arm in [`by_kind`].

use std::fmt::Write;

use regalloc2::PReg;

use super::{MechKind, Target};

mod callee_cleanup;
pub mod ccall;
pub mod heap;
pub mod lookahead;
pub mod mmu;
pub mod mtss;
mod traditional;

pub use callee_cleanup::CalleeCleanup;
pub use lookahead::{Lookahead, LookaheadBase};
pub use mmu::Mmu;
pub use traditional::Traditional;

/// What a mechanism needs to know about the function whose prologue/epilogue it writes.
#[derive(Clone, Copy, Debug)]
pub struct FrameInfo<'a> {
    pub target: Target,
    pub symbol: &'a str,
    /// `S`: bytes the prologue reserves below the incoming arguments and return address.
    pub frame_size: u32,
    /// Bytes of incoming arguments (the slots pushed by the caller).
    pub arg_bytes: u32,
}

/// What a mechanism needs to know about one call to a C-- function.
#[derive(Clone, Copy, Debug)]
pub struct CallSite<'a> {
    pub target: Target,
    pub callee: &'a str,
    /// Bytes of arguments the caller pushes.
    pub arg_bytes: u32,
    /// A label unique in the output file, usable as the return address.
    pub return_label: &'a str,
    /// Whether the flags survive the argument pushes between [`Mechanism::call_prefix`] and
    /// [`Mechanism::call_suffix`] (no `f64` pushed from a register, which takes a `sub`), so a
    /// compare in the prefix can branch in the suffix.
    pub pushes_keep_flags: bool,
}

/// A call-stack mechanism. All sequences are written as Intel-syntax assembly lines.
pub trait Mechanism {
    /// The name used on the command line (`--mech`).
    fn name(&self) -> &'static str;
    /// The `__cmm_abi` id of objects compiled with this mechanism (see `stackrt::base::abi`); the
    /// runtime picks the entry trampoline for `main` and thread starts from it.
    fn abi_id(&self) -> u32;
    /// Registers the mechanism keeps for itself (never allocated), e.g. a chunk register.
    fn reserved_regs(&self, _target: Target) -> Vec<PReg> {
        Vec::new()
    }
    /// Bytes between the stack pointer at function entry and the first argument slot.
    fn entry_arg_offset(&self, target: Target) -> u32;
    /// Bytes the caller pushes besides the arguments (the return address).
    fn call_overhead(&self, target: Target) -> u32 {
        target.slot()
    }
    /// A 32-bit word the runtime reads right before the argument-bytes word of the function
    /// (at `entry - 8`), or None for padding there. `lookahead` puts the function's stack need
    /// at entry there, so the runtime can size the first chunk of a root. Default: None.
    fn stack_need_word(&self, _f: &FrameInfo) -> Option<u32> {
        None
    }
    /// Bytes at the bottom of every frame that belong to the mechanism (`mmu`: the return
    /// address, which the caller's probe writes there); the printer lays the frame out above
    /// them. Default: none.
    fn frame_bottom(&self, _target: Target) -> u32 {
        0
    }
    /// Alignment of the stack pointer in a function's body, which the frame sizes keep: 16 (the
    /// C ABI's, for calls to C made on the same stack). `heap` on i686 uses 8: its C calls run
    /// on a separate C stack and its blocks are sized in 8-byte steps. Default: 16.
    fn frame_align(&self, _target: Target) -> u32 {
        16
    }
    /// The register that holds the caller's stack pointer from [`Mechanism::call_prefix`] /
    /// [`Mechanism::extern_call_prefix`] to the transfer of control (`mmu`: the probe may move
    /// SP to a new chunk before the arguments are pushed); the printer then reads the spill
    /// slots it pushes from it. Default: None, spill slots are read `esp`-relative.
    fn call_base(&self, _target: Target) -> Option<&'static str> {
        None
    }
    /// Lines at the function's entry label: reserve the frame.
    fn prologue(&self, f: &FrameInfo, out: &mut String);
    /// Lines that leave the function (the result is already in `eax`/`xmm0`).
    fn epilogue(&self, f: &FrameInfo, out: &mut String);
    /// Lines before the arguments are pushed; returns the bytes they push.
    fn call_prefix(&self, c: &CallSite, out: &mut String) -> u32;
    /// Lines after the arguments are pushed: the transfer of control and, on return, whatever
    /// restores the caller's stack pointer.
    fn call_suffix(&self, c: &CallSite, out: &mut String);
    /// Lines before a C function's arguments are pushed (`c.arg_bytes` = the bytes that will be
    /// pushed, alignment padding included). Default: none.
    fn extern_call_prefix(&self, _c: &CallSite, _out: &mut String) {}
    /// Lines right before the `call` of a C function, once its arguments are in place
    /// (`c.arg_bytes` = bytes pushed, alignment padding included; `c.return_label` is empty).
    /// Default: none.
    fn extern_call_check(&self, _c: &CallSite, _out: &mut String) {}
    /// The transfer of control to a C function, once its arguments are in place and after
    /// [`Mechanism::extern_call_check`] (`c.arg_bytes` as there). Default: `call callee`.
    fn extern_call(&self, c: &CallSite, out: &mut String) {
        let _ = writeln!(out, "\tcall {}", c.callee);
    }
    /// Lines after a C function returned and its stack arguments were removed. Default: none.
    fn extern_call_return(&self, _c: &CallSite, _out: &mut String) {}
}

/// The mechanism object for a command-line choice.
pub fn by_kind(kind: MechKind) -> &'static dyn Mechanism {
    match kind {
        MechKind::Traditional => &Traditional,
        MechKind::CalleeCleanup => &CalleeCleanup,
        MechKind::Lookahead { .. } => &LookaheadBase,
        MechKind::Mmu { reuse: false, .. } => &mmu::MMU_BASE,
        MechKind::Mmu { reuse: true, .. } => &mmu::MMU_REUSE_BASE,
        MechKind::Heap { malloc: false, .. } => &heap::HEAP_BASE,
        MechKind::Heap { malloc: true, .. } => &heap::HEAP_MALLOC_BASE,
        MechKind::Mtss { .. } => &mtss::MtssBase,
    }
}

/// `sub esp, n` (or nothing when `n` is 0).
pub(crate) fn sub_sp(target: Target, n: u32, out: &mut String) {
    if n != 0 {
        let _ = writeln!(out, "\tsub {}, {}", target.sp(), n);
    }
}

/// An operand at `off` bytes into the runtime's thread-local block `symbol` (local-exec TLS:
/// `gs` on i686, `fs` on x86-64), pointer-sized, or 32 bits wide with `dword` (a counter).
pub(crate) fn tls_operand(t: Target, symbol: &str, off: u32, dword: bool) -> String {
    match t {
        Target::I686 => format!("dword ptr gs:[{symbol}@ntpoff + {off}]"),
        Target::X86_64 if dword => format!("dword ptr fs:[{symbol}@tpoff + {off}]"),
        Target::X86_64 => format!("qword ptr fs:[{symbol}@tpoff + {off}]"),
    }
}

/// `add esp, n` (or nothing when `n` is 0).
pub(crate) fn add_sp(target: Target, n: u32, out: &mut String) {
    if n != 0 {
        let _ = writeln!(out, "\tadd {}, {}", target.sp(), n);
    }
}
