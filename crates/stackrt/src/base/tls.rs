//! Thread-local blocks that assembly names directly: a `.tbss` block defined in assembly (so
//! that hand-written and emitted code can address it as `fs:[sym@tpoff]` / `gs:[sym@ntpoff]`,
//! the local-exec model, without a register) and the Rust way to its address. Used by the
//! heap mechanisms' allocator block and the chunk handlers' block.

/// Defines the zero-initialised thread-local block `$sym` (a string literal) of `$size` bytes,
/// 16-byte aligned, global so that other objects' assembly can name it.
#[macro_export]
macro_rules! tls_block {
    ($sym:literal, $size:expr) => {
        core::arch::global_asm!(
            ".pushsection .tbss,\"awT\",@nobits",
            concat!(".globl ", $sym),
            concat!(".type ", $sym, ", @object"),
            ".p2align 4",
            concat!($sym, ":"),
            ".zero {size}",
            concat!(".size ", $sym, ", {size}"),
            ".popsection",
            size = const $size,
        );
    };
}

/// The calling thread's address of the thread-local block `$sym` (defined with
/// [`tls_block!`]), as a `usize`.
#[macro_export]
macro_rules! tls_address {
    ($sym:literal) => {{
        let p: usize;
        #[cfg(target_arch = "x86_64")]
        // SAFETY: reads the thread pointer (fs:0 holds its own address, System V TLS ABI) and
        // adds the link-time offset of the executable's TLS symbol; no memory is written.
        unsafe {
            core::arch::asm!(
                "mov {p}, qword ptr fs:0",
                concat!("lea {p}, [{p} + ", $sym, "@tpoff]"),
                p = out(reg) p,
                options(nostack, readonly, preserves_flags)
            );
        }
        #[cfg(target_arch = "x86")]
        // SAFETY: as above with gs:0 and the i386 negative offset.
        unsafe {
            core::arch::asm!(
                "mov {p}, dword ptr gs:0",
                concat!("lea {p}, [{p} + ", $sym, "@ntpoff]"),
                p = out(reg) p,
                options(nostack, readonly, preserves_flags)
            );
        }
        p
    }};
}
