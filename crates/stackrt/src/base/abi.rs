//! The ABI shared by the compiler and the runtime: `__cmm_abi` values and symbol names.
//!
//! Every object the compiler emits defines the 32-bit data symbol [`ABI_SYMBOL`]. Its value
//! names the calling convention of the object's C-- functions, so the runtime knows how to
//! enter `cmm_main` and thread entry functions (see `crate::start`). An object whose value the
//! runtime does not know makes the program stop before `cmm_main` runs, with one line on stderr
//! and exit status [`UNKNOWN_ABI_EXIT_STATUS`].
//!
//! New mechanisms add their id here together with their entry trampolines.

/// Name of the `u32` data symbol naming an object's calling convention.
pub const ABI_SYMBOL: &str = "__cmm_abi";

/// `__cmm_abi` value of the native back end (Cranelift): C-- functions follow the System V
/// ABI of the target, so `cmm_main(argc, argv)` and a thread entry `void *f(void *)` are
/// called directly (a thread entry is then a valid `pthread_create` start routine).
pub const ABI_NATIVE_SYSV: u32 = 0;

/// `__cmm_abi` value of the emission stage's `traditional` mechanism (thesis listings 3.2-3.3):
/// arguments pushed right to left, `call`, the caller pops them; C-- code preserves no
/// register. Entered through `crate::mech::enter`.
pub const ABI_TRADITIONAL: u32 = 1;

/// `__cmm_abi` value of the emission stage's `callee-cleanup` mechanism (paper section 4.2):
/// the caller pushes the return address and the arguments and jumps; the callee pops them all.
/// Entered through `crate::mech::enter`.
pub const ABI_CALLEE_CLEANUP: u32 = 2;

/// `__cmm_abi` value of the emission stage's `lookahead` mechanism (thesis 3.4.3): calls as in
/// `traditional`, and on stack chunks: `ebp`/`rbp` holds the current chunk header, checkpoint
/// calls call `stackrt_lookahead_overflow` (`crate::mech::arch::*_lookahead`) and unlink chunks
/// inline (`crate::chunk::UNLINKED`). The object also defines `__cmm_chunk_size`. Entered
/// through `crate::mech::lookahead`.
pub const ABI_LOOKAHEAD: u32 = 3;

/// `__cmm_abi` value of the emission stage's `mmu` mechanism (thesis 3.4.4): linked stack
/// chunks with a guard page; the caller writes the callee's return address at the deepest word
/// of its frame before the call (the probe, `crate::mech::mmu`), the callee removes its frame
/// and arguments and jumps through that word; `ebp`/`rbp` holds the caller's SP during a call
/// sequence. A probe in the guard page is a `SIGSEGV` that `crate::signals` turns into a new
/// chunk; every underflow gives its chunk back to the system. Defines `__cmm_chunk_size`.
pub const ABI_MMU: u32 = 4;

/// `__cmm_abi` value of `mmu-reuse` (paper 4.5, MMU-with-reuse): as [`ABI_MMU`], with chunks
/// kept in the thread's cache and the shared pool, and an underflow stub that makes no call.
pub const ABI_MMU_REUSE: u32 = 5;

/// `__cmm_abi` value of the emission stage's `heap` mechanism (thesis 3.4.2): every activation
/// in its own heap block, taken inline from per-thread free lists by size class (the TLS block
/// of `crate::mech::heap`); calls as in `traditional` once SP is on the block, whose top word
/// holds the caller's SP; `ebp`/`rbp` holds the caller's SP during a call sequence; C calls run
/// on the thread's C stack. Defines `__cmm_chunk_size` (the slab size).
pub const ABI_HEAP: u32 = 6;

/// `__cmm_abi` value of `heap-malloc` (the thesis's heap variant): as [`ABI_HEAP`], with every
/// frame from a runtime call to `malloc` and one to `free`.
pub const ABI_HEAP_MALLOC: u32 = 7;

/// `__cmm_abi` value of `mtss` (the MTSS seed, `crate::mech::mtss`): callee-cleanup's calls, an
/// entry check against the thread's limit (the thread register `ebp`/`rbp` points at its
/// record, limit at word 0) in every function, every C call through `stackrt_ccall`.
/// Mirrors `cmm_codegen::emit::mech::mtss::ABI_MTSS`.
pub const ABI_MTSS: u32 = 8;

/// Label at the start of a `lookahead` program's compiled code (emitted by the compiler as a
/// global symbol before the first function). Between it and [`CODE_END_SYMBOL`] (after every
/// function and out-of-line stub) the chunk register always holds the running chunk's header:
/// the green threads' preemption signal acts only on a pc in that range
/// (`crate::green::preempt`).
pub const CODE_BEGIN_SYMBOL: &str = "__cmm_code_begin";

/// Label at the end of a `lookahead` program's compiled code, see [`CODE_BEGIN_SYMBOL`].
pub const CODE_END_SYMBOL: &str = "__cmm_code_end";

/// The `u32` right before a *C entry*: the System V / cdecl function whose address a C--
/// program gets for one of its functions (`cmm_codegen::emit::c_entry`), so that C code can
/// call it; the word before the magic holds the C-- function's own address (see
/// `crate::base::program::c_entry_target`). "CMMC".
pub const C_ENTRY_MAGIC: u32 = 0x434d_4d43;

/// The runtime function C entries call with the C-- function and the two arguments
/// (`crate::mech::callback`).
pub const CALLBACK_ENTRY: &str = "stackrt_callback";

/// The runtime function the C entry of a function C cannot call (more than two parameters, or
/// a `double`) calls with the function's name: one line, exit 70.
pub const CALLBACK_UNSUPPORTED: &str = "stackrt_callback_unsupported";

/// The thread-local counters of C calls started and finished that green threads' compiled
/// code keeps (`crate::base::ccalls`).
pub const CCALLS_SYMBOL: &str = "stackrt_ccalls";

/// The section of the table of address ranges of compiled code that asynchronous preemption must
/// not interrupt (pairs of pointers, begin and end; `crate::green::preempt_async`); the linker
/// defines `__start_cmm_nopreempt` and `__stop_cmm_nopreempt` around it.
pub const NO_PREEMPT_SECTION: &str = "cmm_nopreempt";

/// The thread-local area where the emission stage's loop-head polls save the C ABI's
/// caller-saved registers around their call (`crate::green::sched::polls::POLL_SAVE_BYTES`).
pub const POLL_SAVE_SYMBOL: &str = "stackrt_poll_save";

/// Exit status when `__cmm_abi` holds a value this runtime does not know (`EX_SOFTWARE`).
pub const UNKNOWN_ABI_EXIT_STATUS: i32 = 70;

/// Symbol of the program's `main` function: C-- `main` becomes `cmm_main`; the runtime defines
/// the C `main` that calls it.
pub const MAIN_SYMBOL: &str = "cmm_main";

/// Prefix of the symbol of every C-- function (`f` is `cmm_f`), so C-- names never interpose on
/// the C library.
pub const FUNCTION_PREFIX: &str = "cmm_";

/// Prefix of the symbol of every C-- global variable (`g` is `cmmg_g`).
pub const GLOBAL_PREFIX: &str = "cmmg_";

/// Name of the `u32` data symbol holding the chunk size of chunked mechanisms (bytes; read
/// through `crate::base::program::program_chunk_size`).
pub const CHUNK_SIZE_SYMBOL: &str = "__cmm_chunk_size";

/// Name of the `u32` data symbol a `lookahead` program defines: the bias of its checkpoints'
/// check word (`crate::chunk::header::OFF_CHECK`), bytes; absent: 0 (the check word is the
/// limit).
pub const CHECK_BIAS_SYMBOL: &str = "__cmm_check_bias";

/// Name of the `u32` data symbol an `mtss` program defines: its lending margin, the bytes
/// below a stopped thread's stack pointer its functions may still push into when it goes on
/// (`crate::mech::mtss`, "Who may lend"); absent: 0.
pub const MTSS_MARGIN_SYMBOL: &str = "__cmm_mtss_margin";

/// Name of the `u32` data symbol a program compiled with `--threads green` defines (value
/// [`THREADS_GREEN`]); absent or 0: OS threads.
pub const THREADS_SYMBOL: &str = "__cmm_threads";

/// `__cmm_threads` value of `--threads green`.
pub const THREADS_GREEN: u32 = 1;

/// The writable `u32` a green-threads program defines and polls at every loop head (mirrors
/// `cmm_codegen::lower::PREEMPT_FLAG_SYMBOL`): while it is not 0, loop heads call
/// [`PREEMPT_POINT`] (`crate::green::sched`'s preemption by polls).
pub const PREEMPT_FLAG_SYMBOL: &str = "__cmm_preempt";

/// The thread-local `u32` of every OS thread that the emission stage's loop heads poll
/// instead of [`PREEMPT_FLAG_SYMBOL`] (mirrors `cmm_codegen::lower::PREEMPT_TLS_SYMBOL`;
/// defined in `crate::green::sched`'s polls).
pub const PREEMPT_TLS_SYMBOL: &str = "stackrt_preempt_tls";

/// The thread-library function loop heads call while their flag is set (mirrors
/// `cmm_codegen::lower::PREEMPT_POINT`).
pub const PREEMPT_POINT: &str = "sthread_preempt_point";

/// The tables a program compiled with `--race` defines (`cmm_codegen::race`, module docs:
/// sites, strings, globals); their presence turns the race detector on.
pub const RACE_SITES_SYMBOL: &str = "__cmm_race_sites";
pub const RACE_STRINGS_SYMBOL: &str = "__cmm_race_strings";
pub const RACE_GLOBALS_SYMBOL: &str = "__cmm_race_globals";
/// The entries `--race` code calls before a load and a store: `(addr, size, site)`.
pub const RACE_READ_ENTRY: &str = "__stackrt_race_read";
pub const RACE_WRITE_ENTRY: &str = "__stackrt_race_write";
/// The thread-local word the emission stage's inline read check loads first: the address of
/// the running thread's read filter (`crate::race::filter::Filter`) while reads may be settled
/// without a call, else 0 (mirrors `cmm_codegen::race::FILTER_TLS_SYMBOL`).
pub const RACE_FILTER_TLS_SYMBOL: &str = "__stackrt_race_filter";
/// The global word the inline check compares with the filter's generation (`FREED`).
pub const RACE_FREED_SYMBOL: &str = "__stackrt_race_freed";
/// Byte offsets in a `Filter` of its directory pointer and of its generation word.
pub const RACE_FILTER_DIR_OFFSET: usize = 0;
pub const RACE_FILTER_GEN_OFFSET: usize = core::mem::size_of::<usize>();
/// Log2 of the bytes of address space one bitmap of the filter covers, and of the bytes one
/// bitmap word covers (one bit per 4 bytes, words of the pointer's width).
#[cfg(target_pointer_width = "64")]
pub const RACE_FILTER_SHIFT: u32 = 22;
#[cfg(target_pointer_width = "32")]
pub const RACE_FILTER_SHIFT: u32 = 20;
pub const RACE_FILTER_WORD_SHIFT: u32 = (usize::BITS * 4).trailing_zeros();

/// Whether `crate::mech::enter` knows the convention `abi` (an emission-stage mechanism).
pub fn is_emitted_abi(abi: u32) -> bool {
    abi == ABI_TRADITIONAL
        || abi == ABI_CALLEE_CLEANUP
        || abi == ABI_LOOKAHEAD
        || abi == ABI_MMU
        || abi == ABI_MMU_REUSE
        || abi == ABI_HEAP
        || abi == ABI_HEAP_MALLOC
        || abi == ABI_MTSS
}

/// Whether C-- code of convention `abi` runs on a fixed (pthread or main) stack: the native
/// back end's, `traditional` and `callee-cleanup`.
pub fn is_fixed_stack_abi(abi: u32) -> bool {
    abi == ABI_NATIVE_SYSV || abi == ABI_TRADITIONAL || abi == ABI_CALLEE_CLEANUP
}

/// The thread library's C entry points, called from C-- through `extern` declarations:
///
/// ```c
/// extern int sthread_create(void *arg, int fp, int fpStackSize); /* handle >= 1 */
/// extern int sthread_join(int handle, void **retval);            /* 0 or an errno value */
/// extern void sthread_exit(void *val);
/// extern void *sthread_mutex_create();
/// extern void sthread_mutex_destroy(void *m);
/// extern void sthread_mutex_lock(void *m);
/// extern void sthread_mutex_unlock(void *m);
/// extern int sthread_cas(int *p, int old, int new);              /* the value *p held before */
/// ```
///
/// Handles are small integers: the lowest free handle, starting at 1; a handle becomes free
/// when it is joined. The gcc oracle (`tests/oracle/sthread.c`) follows the same policy so
/// programs printing handles have one expected output.
pub const THREAD_LIBRARY: [&str; 8] = [
    "sthread_create",
    "sthread_join",
    "sthread_exit",
    "sthread_mutex_create",
    "sthread_mutex_destroy",
    "sthread_mutex_lock",
    "sthread_mutex_unlock",
    "sthread_cas",
];

/// Exit status of a program whose thread library call failed (e.g. `pthread_create` ran out of
/// address space); the reason is printed on one line on stderr.
pub const THREAD_FAILURE_EXIT_STATUS: i32 = 1;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_symbols_are_the_compilers() {
        // Mirrored in cmm_codegen (lower::THREADS_SYMBOL / THREADS_GREEN and the chunk size
        // symbol; checked there too), and referenced by name in `base::program`'s weak
        // references.
        assert_eq!(CHUNK_SIZE_SYMBOL, "__cmm_chunk_size");
        assert_eq!(CHECK_BIAS_SYMBOL, "__cmm_check_bias");
        assert_eq!(MTSS_MARGIN_SYMBOL, "__cmm_mtss_margin");
        assert_eq!(THREADS_SYMBOL, "__cmm_threads");
        assert_eq!(THREADS_GREEN, 1);
    }

    #[test]
    fn preemption_poll_symbols_are_the_compilers() {
        // Mirrored in cmm_codegen::lower (checked there too); the flag is referenced by name in
        // `base::program`'s weak references, the point defined in `crate::threads`.
        assert_eq!(PREEMPT_FLAG_SYMBOL, "__cmm_preempt");
        assert_eq!(PREEMPT_TLS_SYMBOL, "stackrt_preempt_tls");
        assert_eq!(PREEMPT_POINT, "sthread_preempt_point");
        // Mirrored in cmm_codegen::emit::print::POLL_SAVE_SYMBOL (checked there too).
        assert_eq!(POLL_SAVE_SYMBOL, "stackrt_poll_save");
        // Mirrored in cmm_codegen::emit::print::CCALLS_SYMBOL (checked there too).
        assert_eq!(CCALLS_SYMBOL, "stackrt_ccalls");
        // Mirrored in cmm_codegen::emit::print::NO_PREEMPT_SECTION (checked there too); the
        // section's bounds are referenced by name in `base::program`'s weak references.
        assert_eq!(NO_PREEMPT_SECTION, "cmm_nopreempt");
    }

    #[test]
    fn c_entry_symbols_are_the_compilers() {
        // Mirrored in cmm_codegen::emit::c_entry (checked there too); the entries are defined
        // in `crate::mech::callback`.
        assert_eq!(C_ENTRY_MAGIC, 0x434d_4d43);
        assert_eq!(CALLBACK_ENTRY, "stackrt_callback");
        assert_eq!(CALLBACK_UNSUPPORTED, "stackrt_callback_unsupported");
    }

    #[test]
    fn code_range_symbols_are_the_compilers() {
        // Mirrored in cmm_codegen::emit::mech::lookahead::CODE_BEGIN_SYMBOL / CODE_END_SYMBOL
        // (checked there too), and referenced by name in `base::program`'s weak references.
        assert_eq!(CODE_BEGIN_SYMBOL, "__cmm_code_begin");
        assert_eq!(CODE_END_SYMBOL, "__cmm_code_end");
    }

    #[test]
    fn race_symbols_are_the_compilers() {
        // Mirrored in cmm_codegen::race (checked there too); the entries are defined in
        // `crate::race` and the tables referenced by name in `base::program`.
        assert_eq!(RACE_SITES_SYMBOL, "__cmm_race_sites");
        assert_eq!(RACE_STRINGS_SYMBOL, "__cmm_race_strings");
        assert_eq!(RACE_GLOBALS_SYMBOL, "__cmm_race_globals");
        assert_eq!(RACE_READ_ENTRY, "__stackrt_race_read");
        assert_eq!(RACE_WRITE_ENTRY, "__stackrt_race_write");
        assert_eq!(RACE_FILTER_TLS_SYMBOL, "__stackrt_race_filter");
        assert_eq!(RACE_FREED_SYMBOL, "__stackrt_race_freed");
        // cmm_codegen::race::FILTER_* for this target (checked there too).
        assert_eq!(RACE_FILTER_DIR_OFFSET, 0);
        #[cfg(target_pointer_width = "64")]
        assert_eq!(
            (
                RACE_FILTER_GEN_OFFSET,
                RACE_FILTER_SHIFT,
                RACE_FILTER_WORD_SHIFT
            ),
            (8, 22, 8)
        );
        #[cfg(target_pointer_width = "32")]
        assert_eq!(
            (
                RACE_FILTER_GEN_OFFSET,
                RACE_FILTER_SHIFT,
                RACE_FILTER_WORD_SHIFT
            ),
            (4, 20, 7)
        );
    }

    #[test]
    fn main_symbol_uses_function_prefix() {
        assert_eq!(MAIN_SYMBOL, format!("{FUNCTION_PREFIX}main"));
    }
}
