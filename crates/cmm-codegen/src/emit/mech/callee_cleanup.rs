//! Mechanism `callee-cleanup`: section 4.2 of the paper. The caller pushes the return address and
//! the arguments and jumps; the callee removes its whole frame, arguments and return address
//! included, and jumps back.
//!
//! ```text
//! caller:  push offset .Lret            callee:  sub esp, S
//!          push argN ... push arg1               ...
//!          jmp callee                            add esp, S + args_size + slot
//! .Lret:                                         jmp [esp - slot]        (x86-64)
//! ```
//!
//! On i686, which has no red zone, a signal arriving between the `add` and the `jmp` would be
//! delivered on top of the return address; the callee therefore loads it first:
//! `mov ecx, [esp + S + args_size]; add esp, S + args_size + 4; jmp ecx` (ecx never holds a
//! return value). On x86-64 the kernel leaves the 128-byte red zone below `rsp` alone, so the
//! paper's `jmp [rsp - 8]` form is safe.
//!
//! Frame of a callee (higher addresses up):
//!
//! ```text
//!   | return address   |  <- esp + S + args_size
//!   | arg N-1          |
//!   | ...              |
//!   | arg 0            |  <- esp + S
//!   | frame (S bytes)  |
//!   +------------------+  <- esp (16-byte aligned inside the body)
//! ```

use std::fmt::Write;

use super::{sub_sp, CallSite, FrameInfo, Mechanism};
use crate::emit::Target;

/// Caller pushes the return address and arguments and jumps; callee pops everything.
pub struct CalleeCleanup;

/// ABI id of `callee-cleanup` (`stackrt::base::abi::CALLEE_CLEANUP`).
pub const ABI_CALLEE_CLEANUP: u32 = 2;

impl Mechanism for CalleeCleanup {
    fn name(&self) -> &'static str {
        "callee-cleanup"
    }
    fn abi_id(&self) -> u32 {
        ABI_CALLEE_CLEANUP
    }
    fn entry_arg_offset(&self, _target: Target) -> u32 {
        0
    }
    fn prologue(&self, f: &FrameInfo, out: &mut String) {
        sub_sp(f.target, f.frame_size, out);
    }
    fn epilogue(&self, f: &FrameInfo, out: &mut String) {
        epilogue(f, out);
    }
    fn call_prefix(&self, c: &CallSite, out: &mut String) -> u32 {
        let _ = writeln!(out, "\tpush offset {}", c.return_label);
        c.target.slot()
    }
    fn call_suffix(&self, c: &CallSite, out: &mut String) {
        let _ = writeln!(out, "\tjmp {}", c.callee);
        let _ = writeln!(out, "{}:", c.return_label);
    }
}

/// The callee-cleanup return: removes the frame, the arguments and the return address and jumps
/// through the return address (`heap` uses it too).
pub(super) fn epilogue(f: &FrameInfo, out: &mut String) {
    let slot = f.target.slot();
    let total = f.frame_size + f.arg_bytes + slot;
    match f.target {
        Target::X86_64 => {
            let _ = writeln!(out, "\tadd rsp, {total}");
            let _ = writeln!(out, "\tjmp qword ptr [rsp - {slot}]");
        }
        Target::I686 => {
            let _ = writeln!(out, "\tmov ecx, dword ptr [esp + {}]", total - slot);
            let _ = writeln!(out, "\tadd esp, {total}");
            out.push_str("\tjmp ecx\n");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epilogue_removes_frame_args_and_return_address() {
        let mut s = String::new();
        let f = FrameInfo {
            target: Target::X86_64,
            symbol: "cmm_f",
            frame_size: 24,
            arg_bytes: 16,
        };
        CalleeCleanup.epilogue(&f, &mut s);
        assert_eq!(s, "\tadd rsp, 48\n\tjmp qword ptr [rsp - 8]\n");
        let mut s = String::new();
        let f = FrameInfo {
            target: Target::I686,
            symbol: "cmm_f",
            frame_size: 4,
            arg_bytes: 8,
        };
        CalleeCleanup.epilogue(&f, &mut s);
        assert_eq!(
            s,
            "\tmov ecx, dword ptr [esp + 12]\n\tadd esp, 16\n\tjmp ecx\n"
        );
    }
}
