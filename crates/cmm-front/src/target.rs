//! The target facts the front end needs: pointer width and C ABI struct layout rules.

/// Properties of the target that change types' sizes and struct layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TargetInfo {
    /// Size and alignment of pointers, in bytes (4 on i686, 8 on x86-64).
    pub pointer_size: u32,
    /// Alignment of `double` as a struct member (i386 System V: 4; x86-64 System V: 8).
    pub double_align_in_struct: u32,
}

impl TargetInfo {
    pub const X86_64: TargetInfo = TargetInfo {
        pointer_size: 8,
        double_align_in_struct: 8,
    };
    pub const I686: TargetInfo = TargetInfo {
        pointer_size: 4,
        double_align_in_struct: 4,
    };
}
