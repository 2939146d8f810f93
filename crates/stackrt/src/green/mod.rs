//! Green threads (M:N) on the runtime's stacks, behind the thread library under `cmm compile
//! --threads green`: [`context`] holds the context switch (the per-architecture assembly is in
//! `crate::arch::*_switch`) and the stacks a context runs on, [`stacks`] the green threads'
//! stack blocks, [`queue`] the per-worker run queues with work stealing, [`sched`] the
//! scheduler, [`det`] its deterministic mode (`STACKRT_SCHED`) and [`sync`] parking locks and
//! the green mutex.

pub mod context;
pub mod det;
pub mod queue;
pub mod sched;
pub mod stacks;
pub mod sync;

/// Name of the `u32` data symbol a program compiled with `--threads green` defines (value
/// [`THREADS_GREEN`]); absent or 0: OS threads.
pub const THREADS_SYMBOL: &str = "__cmm_threads";

/// `__cmm_threads` value of `--threads green`.
pub const THREADS_GREEN: u32 = 1;

// `__cmm_threads` is weak: programs compiled for OS threads (and the runtime's own test
// binaries) do not define it. A pointer to it is assembled here, null when it is undefined, as
// for `__cmm_chunk_size` (`crate::chunk::global`).
#[cfg(target_arch = "x86_64")]
core::arch::global_asm!(
    ".weak __cmm_threads",
    ".pushsection .data.rel.ro.stackrt_threads_ref,\"aw\",@progbits",
    ".balign 8",
    ".globl stackrt_threads_ref",
    ".hidden stackrt_threads_ref",
    "stackrt_threads_ref:",
    ".quad __cmm_threads",
    ".popsection",
    options(att_syntax)
);
#[cfg(target_arch = "x86")]
core::arch::global_asm!(
    ".weak __cmm_threads",
    ".pushsection .data.rel.ro.stackrt_threads_ref,\"aw\",@progbits",
    ".balign 4",
    ".globl stackrt_threads_ref",
    ".hidden stackrt_threads_ref",
    "stackrt_threads_ref:",
    ".long __cmm_threads",
    ".popsection",
    options(att_syntax)
);

extern "C" {
    /// Address of `__cmm_threads`, or null if the program does not define it.
    static stackrt_threads_ref: *const u32;
}

/// The program's `__cmm_threads` value: 0 (OS threads) when it does not define the symbol.
pub fn program_threads() -> u32 {
    // SAFETY: stackrt_threads_ref is a pointer-sized word defined above, written only by the
    // linker; when non-null it points at the program's 32-bit constant.
    let p = unsafe { core::ptr::read_volatile(core::ptr::addr_of!(stackrt_threads_ref)) };
    if p.is_null() {
        0
    } else {
        // SAFETY: a non-null reference is the address of the program's u32 symbol.
        unsafe { p.read() }
    }
}

/// Whether green threads run programs of convention `abi` (the others are refused at start
/// with one line).
pub fn supports_abi(abi: u32) -> bool {
    crate::mech::is_fixed_stack_abi(abi) || abi == crate::abi::ABI_LOOKAHEAD
}

#[cfg(test)]
mod tests {
    #[test]
    fn threads_symbol_is_the_compilers() {
        // Mirrored in cmm_codegen::lower::THREADS_SYMBOL / THREADS_GREEN (checked there too).
        assert_eq!(super::THREADS_SYMBOL, "__cmm_threads");
        assert_eq!(super::THREADS_GREEN, 1);
    }
}
