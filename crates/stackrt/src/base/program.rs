//! What the linked program says about itself: its calling convention (`__cmm_abi`), its chunk
//! size, whether its threads are green, and the range of its compiled code. Every layer reads
//! these; the symbols other than `__cmm_abi` are optional and referenced weakly.

use super::abi::{is_emitted_abi, ABI_NATIVE_SYSV, C_ENTRY_MAGIC, UNKNOWN_ABI_EXIT_STATUS};
use super::weak::weak_symbol;

#[cfg(not(test))]
extern "C" {
    /// Defined by every compiled C-- object: its calling convention (see `crate::base::abi`).
    static __cmm_abi: u32;
}

/// The calling convention of the linked C-- program.
#[cfg(not(test))]
pub fn program_abi() -> u32 {
    // SAFETY: `__cmm_abi` is a 32-bit constant defined by the compiled object and never
    // written; reading it by value is a plain load.
    unsafe { core::ptr::read_volatile(&raw const __cmm_abi) }
}

/// Unit tests link no C-- object: they see the native convention.
#[cfg(test)]
pub fn program_abi() -> u32 {
    ABI_NATIVE_SYSV
}

/// Stops the program with one line on stderr when `abi` is not a convention this runtime knows.
pub fn check_abi(abi: u32) {
    if abi != ABI_NATIVE_SYSV && !is_emitted_abi(abi) {
        super::diag::fail(
            &format!(
                "cmm runtime: the program's __cmm_abi is {abi}, which this runtime does not know \
                 (object and runtime from different compiler versions?)"
            ),
            UNKNOWN_ABI_EXIT_STATUS,
        );
    }
}

weak_symbol!(
    /// Address of `__cmm_chunk_size` (weak: programs of the non-chunk mechanisms and the
    /// runtime's own test binaries do not define it, and then the default applies), or 0.
    fn chunk_size_symbol => "__cmm_chunk_size", stackrt_chunk_size_ref
);

/// The chunk size the program was compiled with (`__cmm_chunk_size`), if it defines one.
pub fn program_chunk_size() -> Option<usize> {
    let p = chunk_size_symbol();
    // SAFETY: a non-zero address is the program's u32 symbol.
    (p != 0).then(|| unsafe { (p as *const u32).read() } as usize)
}

weak_symbol!(
    /// Address of `__cmm_check_bias` (weak: only `lookahead` programs define it), or 0.
    fn check_bias_symbol => "__cmm_check_bias", stackrt_check_bias_ref
);

/// The bias of a `lookahead` program's check word (`__cmm_check_bias`), if it defines one.
pub fn program_check_bias() -> Option<usize> {
    let p = check_bias_symbol();
    // SAFETY: a non-zero address is the program's u32 symbol.
    (p != 0).then(|| unsafe { (p as *const u32).read() } as usize)
}

weak_symbol!(
    /// Address of `__cmm_mtss_margin` (weak: only `mtss` programs define it), or 0.
    fn mtss_margin_symbol => "__cmm_mtss_margin", stackrt_mtss_margin_ref
);

/// The lending margin of an `mtss` program (`__cmm_mtss_margin`), 0 if it defines none.
pub fn program_mtss_margin() -> usize {
    let p = mtss_margin_symbol();
    if p == 0 {
        return 0;
    }
    // SAFETY: a non-zero address is the program's u32 symbol.
    unsafe { (p as *const u32).read() as usize }
}

weak_symbol!(
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

weak_symbol!(
    /// Address of `__cmm_preempt` (programs compiled with `--threads green`: see
    /// `crate::base::abi::PREEMPT_FLAG_SYMBOL`), or 0.
    fn preempt_symbol => "__cmm_preempt", stackrt_preempt_ref
);

/// The program's preemption-poll flag (`__cmm_preempt`), if it defines one: a `u32` its loop
/// heads read, written here with atomic stores.
pub fn preempt_flag() -> Option<&'static core::sync::atomic::AtomicU32> {
    let p = preempt_symbol();
    // SAFETY: a non-zero address is the program's writable, 4-aligned u32, which lives as
    // long as the program and is written only through this atomic view.
    (p != 0).then(|| unsafe { &*(p as *const core::sync::atomic::AtomicU32) })
}

weak_symbol!(
    /// Address of `__cmm_race_sites` (programs compiled with `--race`), or 0.
    pub fn race_sites => "__cmm_race_sites", stackrt_race_sites_ref
);
weak_symbol!(
    /// Address of `__cmm_race_strings`, or 0.
    pub fn race_strings => "__cmm_race_strings", stackrt_race_strings_ref
);
weak_symbol!(
    /// Address of `__cmm_race_globals`, or 0.
    pub fn race_globals => "__cmm_race_globals", stackrt_race_globals_ref
);

weak_symbol!(
    /// Address of `__cmm_code_begin` (`lookahead` programs and the emission stage's
    /// green-thread programs define it), or 0.
    fn code_begin => "__cmm_code_begin", stackrt_code_begin_ref
);
weak_symbol!(
    /// Address of `__cmm_code_end`, or 0.
    fn code_end => "__cmm_code_end", stackrt_code_end_ref
);

weak_symbol!(
    /// Address of `__start_cmm_nopreempt`, the table of ranges asynchronous preemption must not
    /// interrupt (green-thread programs of the emission stage: see
    /// `crate::base::abi::NO_PREEMPT_SECTION`), or 0.
    fn no_preempt_start => "__start_cmm_nopreempt", stackrt_no_preempt_start_ref
);
weak_symbol!(
    /// Address of `__stop_cmm_nopreempt`, or 0.
    fn no_preempt_stop => "__stop_cmm_nopreempt", stackrt_no_preempt_stop_ref
);

/// The program's table of `(begin, end)` ranges of compiled code that asynchronous preemption
/// must not interrupt, in the order the compiler wrote them (empty if it has none).
pub fn no_preempt_ranges() -> &'static [[usize; 2]] {
    let (start, stop) = (no_preempt_start(), no_preempt_stop());
    if start == 0 || stop <= start {
        return &[];
    }
    let n = (stop - start) / core::mem::size_of::<[usize; 2]>();
    // SAFETY: the linker's bounds of the program's read-only section of pointer pairs, which
    // lives as long as the program.
    unsafe { core::slice::from_raw_parts(start as *const [usize; 2], n) }
}

/// The program's compiled code, `[begin, end)`, if it marks it (`lookahead` programs: see
/// `crate::base::abi::CODE_BEGIN_SYMBOL`).
pub fn code_range() -> Option<(usize, usize)> {
    let (begin, end) = (code_begin(), code_end());
    (begin != 0 && end > begin).then_some((begin, end))
}

/// The C-- function a function address of the program stands for: `fp` itself, or, when `fp` is
/// the C entry of a C-- function (what the emission stage gives a C-- program for a function's
/// name, `cmm_codegen::emit::c_entry`), that function.
///
/// # Safety
/// `fp` must be the address of a function of the linked program (a C-- function or a C entry,
/// whose preceding bytes are part of the program's text).
pub unsafe fn c_entry_target(fp: usize) -> usize {
    const P: usize = core::mem::size_of::<usize>();
    if !is_emitted_abi(program_abi()) || fp < 4 + P {
        return fp;
    }
    // SAFETY: the caller guarantees the bytes before `fp` are the program's text: a C--
    // function's argument-bytes word or a C entry's magic.
    let magic = unsafe { core::ptr::read_unaligned((fp - 4) as *const u32) };
    if magic != C_ENTRY_MAGIC {
        return fp;
    }
    // SAFETY: a C entry's magic follows the pointer-sized address of its C-- function.
    unsafe { core::ptr::read_unaligned((fp - 4 - P) as *const usize) }
}
