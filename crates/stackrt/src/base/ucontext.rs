//! The registers of an interrupted context that the runtime's signal handlers read and write,
//! as indices into `ucontext_t.uc_mcontext.gregs`, per architecture.

/// The x86-64 registers.
#[cfg(target_arch = "x86_64")]
pub mod regs {
    /// `REG_RSP` and `REG_RIP` in `uc_mcontext.gregs`.
    pub const SP: usize = 15;
    pub const PC: usize = 16;
    /// `REG_RBP`: the chunk register of the chunked mechanisms.
    pub const CHUNK: usize = 10;
    pub const IS64: bool = true;
}

/// The i686 registers.
#[cfg(target_arch = "x86")]
pub mod regs {
    /// `REG_ESP` and `REG_EIP` in `uc_mcontext.gregs` (runtime-facts.md: writing `REG_UESP`
    /// has no effect on `sigreturn`).
    pub const SP: usize = 7;
    pub const PC: usize = 14;
    /// `REG_EBP`: the chunk register of the chunked mechanisms.
    pub const CHUNK: usize = 6;
    pub const IS64: bool = false;
}
