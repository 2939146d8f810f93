//! Mechanism `traditional`: the thesis's fixed-size stack with caller cleanup (listings 3.2, 3.3).
//!
//! ```text
//! caller:  push argN ... push arg1      callee:  sub esp, S
//!          call callee                           ...
//!          add esp, args_size                    add esp, S
//!                                                ret
//! ```
//!
//! Frame of a callee (higher addresses up; slots are 4 bytes on i686, 8 on x86-64):
//!
//! ```text
//!   | arg N-1          |
//!   | ...              |
//!   | arg 0            |  <- esp + S + slot
//!   | return address   |  <- esp + S
//!   | frame (S bytes)  |
//!   +------------------+  <- esp (16-byte aligned inside the body)
//! ```

use std::fmt::Write;

use super::{add_sp, sub_sp, CallSite, FrameInfo, Mechanism};
use crate::emit::Target;

/// Caller pushes, `call`s and pops; callee reserves and frees `S` and `ret`urns.
pub struct Traditional;

/// ABI id of `traditional` (`stackrt::base::abi::TRADITIONAL`).
pub const ABI_TRADITIONAL: u32 = 1;

impl Mechanism for Traditional {
    fn name(&self) -> &'static str {
        "traditional"
    }
    fn abi_id(&self) -> u32 {
        ABI_TRADITIONAL
    }
    fn entry_arg_offset(&self, target: Target) -> u32 {
        target.slot()
    }
    fn prologue(&self, f: &FrameInfo, out: &mut String) {
        sub_sp(f.target, f.frame_size, out);
    }
    fn epilogue(&self, f: &FrameInfo, out: &mut String) {
        add_sp(f.target, f.frame_size, out);
        out.push_str("\tret\n");
    }
    fn call_prefix(&self, _c: &CallSite, _out: &mut String) -> u32 {
        0
    }
    fn call_suffix(&self, c: &CallSite, out: &mut String) {
        let _ = writeln!(out, "\tcall {}", c.callee);
        add_sp(c.target, c.arg_bytes, out);
    }
}
