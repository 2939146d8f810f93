//! Green threads (M:N) on the runtime's stacks, behind the thread library under `cmm compile
//! --threads green`: [`context`] holds the context switch (the per-architecture assembly is in
//! `crate::arch::*_switch`) and the stacks a context runs on, [`stacks`] the green threads'
//! stack blocks, [`queue`] the per-worker run queues with work stealing, [`sched`] the
//! scheduler, [`preempt`] preemption at `lookahead` checkpoints, [`det`] the deterministic mode
//! (`STACKRT_SCHED`) and [`sync`] parking locks and the green mutex.

pub mod context;
pub mod det;
pub mod preempt;
pub mod queue;
pub mod sched;
pub mod stacks;
pub mod sync;

/// Name of the `u32` data symbol a program compiled with `--threads green` defines (value
/// [`THREADS_GREEN`]); absent or 0: OS threads.
pub const THREADS_SYMBOL: &str = "__cmm_threads";

/// `__cmm_threads` value of `--threads green`.
pub const THREADS_GREEN: u32 = 1;

crate::weak::weak_symbol!(
    /// Address of `__cmm_threads` (weak: programs compiled for OS threads and the runtime's
    /// own test binaries do not define it), or 0.
    fn threads_symbol => "__cmm_threads", stackrt_threads_ref
);

/// The program's `__cmm_threads` value: 0 (OS threads) when it does not define the symbol.
pub fn program_threads() -> u32 {
    let p = threads_symbol();
    if p == 0 {
        return 0;
    }
    // SAFETY: a non-zero address is the program's u32 symbol.
    unsafe { (p as *const u32).read() }
}

/// Whether green threads run programs of convention `abi` (the others are refused at start
/// with one line).
pub fn supports_abi(abi: u32) -> bool {
    crate::mech::is_fixed_stack_abi(abi)
        || abi == crate::abi::ABI_LOOKAHEAD
        || abi == crate::abi::ABI_MMU
        || abi == crate::abi::ABI_MMU_REUSE
        || abi == crate::abi::ABI_HEAP
        || abi == crate::abi::ABI_HEAP_MALLOC
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
