//! Weak references to the data symbols a compiled program may define (`__cmm_chunk_size`,
//! `__cmm_threads`, `__cmm_code_begin`/`_end`): the address of the symbol, or 0 when the
//! program does not define it.
//!
//! Rust has no stable weak linkage, so `weak_symbol!` assembles a hidden pointer-sized word
//! holding the symbol's address with a `.weak` reference: the linker writes 0 there when
//! nothing defines the symbol (programs of other mechanisms, the runtime's own test binaries).

/// `weak_symbol!(fn NAME => "symbol", REF)` defines `fn NAME() -> usize`, the address of
/// `symbol` or 0, through the hidden word `REF` (a name unique in the crate).
macro_rules! weak_symbol {
    ($(#[$meta:meta])* $vis:vis fn $name:ident => $symbol:literal, $word:ident) => {
        #[cfg(target_arch = "x86_64")]
        core::arch::global_asm!(
            concat!(".weak ", $symbol),
            concat!(".pushsection .data.rel.ro.", stringify!($word), ",\"aw\",@progbits"),
            ".balign 8",
            concat!(".globl ", stringify!($word)),
            concat!(".hidden ", stringify!($word)),
            concat!(stringify!($word), ":"),
            concat!(".quad ", $symbol),
            ".popsection",
            options(att_syntax)
        );
        #[cfg(target_arch = "x86")]
        core::arch::global_asm!(
            concat!(".weak ", $symbol),
            concat!(".pushsection .data.rel.ro.", stringify!($word), ",\"aw\",@progbits"),
            ".balign 4",
            concat!(".globl ", stringify!($word)),
            concat!(".hidden ", stringify!($word)),
            concat!(stringify!($word), ":"),
            concat!(".long ", $symbol),
            ".popsection",
            options(att_syntax)
        );

        extern "C" {
            static $word: usize;
        }

        $(#[$meta])*
        $vis fn $name() -> usize {
            // SAFETY: the word is defined by the assembly above and written only by the
            // linker: the symbol's address, or 0 when it is undefined.
            unsafe { core::ptr::read_volatile(core::ptr::addr_of!($word)) }
        }
    };
}

pub(crate) use weak_symbol;
