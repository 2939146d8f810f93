//! C-ABI entries of C-- functions whose address is taken: a C-- function's name used as a value
//! is the address of its *C entry*, a small System V (x86-64) or cdecl (i686) function that C
//! code may call (a `qsort` comparator, a callback); it calls the runtime's
//! `stackrt_callback(fp, a0, a1)`, which enters the C-- function under the program's mechanism
//! (its stack: a chunk, a heap block, the thread's own stack; `stackrt::mech::callback`).
//!
//! A C entry is preceded by two words the runtime reads to find the C-- function from the
//! address (`sthread_create` receives C entries too and starts the C-- function itself):
//!
//! ```text
//!   | address of the C-- function (one pointer) |  entry - 4 - P
//!   | C_ENTRY_MAGIC (u32)                       |  entry - 4
//!   +-------------------------------------------+  entry: the C ABI function
//! ```
//!
//! (A C-- function has its argument bytes at `entry - 4`, always far below the magic.)
//!
//! The entry passes at most two parameters, each an `int`, `char` or pointer, and returns such
//! a value or nothing: what `stackrt::mech::enter` takes. A function of any other signature
//! whose address is taken gets an entry that stops the program with one line naming it if C
//! ever calls it (its address can still be given to the thread library, which calls the C--
//! function directly, or compared).
//!
//! The entries live in their own section (`.text.cmm_c_entries`), outside the compiled code's
//! range (`__cmm_code_begin`..`__cmm_code_end`): they are C code as far as the runtime is
//! concerned.

use std::fmt::Write;

use cranelift_codegen::ir::types;

use super::Target;
use crate::LoweredProgram;

/// The `u32` right before a C entry (mirrors `stackrt::base::abi::C_ENTRY_MAGIC`): "CMMC".
pub const C_ENTRY_MAGIC: u32 = 0x434d_4d43;

/// The runtime function a C entry calls (mirrors `stackrt::base::abi::CALLBACK_ENTRY`).
pub const CALLBACK: &str = "stackrt_callback";

/// The runtime function an entry of an unsupported signature calls with the function's name
/// (mirrors `stackrt::base::abi::CALLBACK_UNSUPPORTED`).
pub const CALLBACK_UNSUPPORTED: &str = "stackrt_callback_unsupported";

/// The symbol of the C entry of the C-- function whose symbol is `function_symbol`
/// (`cmm_f` → `cmmc_f`).
pub fn symbol(function_symbol: &str) -> String {
    match function_symbol.strip_prefix("cmm_") {
        Some(name) => format!("cmmc_{name}"),
        None => format!("{function_symbol}$c"),
    }
}

/// Whether C can call function `i` through its C entry (see the module docs).
fn supported(p: &LoweredProgram, i: usize) -> bool {
    let sig = &p.functions[i].func.signature;
    let word = |t: types::Type| t.is_int() && t.bits() <= p.pointer_type.bits();
    sig.params.len() <= 2
        && sig.params.iter().all(|a| word(a.value_type))
        && sig.returns.iter().all(|r| word(r.value_type))
}

/// Writes the C entries of the functions marked in `taken`.
pub fn emit(p: &LoweredProgram, target: Target, taken: &[bool], out: &mut String) {
    if !taken.iter().any(|&t| t) {
        return;
    }
    out.push_str("\t.section .text.cmm_c_entries,\"ax\",@progbits\n");
    for (i, f) in p.functions.iter().enumerate() {
        if !taken.get(i).copied().unwrap_or(false) {
            continue;
        }
        let entry = symbol(&f.symbol);
        let _ = writeln!(out, "# C entry of C-- function `{}`", f.name);
        match target {
            Target::X86_64 => {
                let _ = writeln!(out, "\t.p2align 3\n\t.quad {}", f.symbol);
            }
            Target::I686 => {
                let _ = writeln!(out, "\t.p2align 2\n\t.long {}", f.symbol);
            }
        }
        let _ = writeln!(out, "\t.long {C_ENTRY_MAGIC:#x}\t# C entry magic");
        let _ = writeln!(out, "\t.type {entry}, @function\n{entry}:");
        if !supported(p, i) {
            let name = format!(".Lcmmc_name_{i}");
            match target {
                // Aligns the stack for the call the runtime makes (it never returns).
                Target::X86_64 => {
                    let _ = writeln!(
                        out,
                        "\tlea rdi, [rip + {name}]\n\tjmp {CALLBACK_UNSUPPORTED}"
                    );
                }
                Target::I686 => {
                    let _ = writeln!(
                        out,
                        "\tsub esp, 8\n\tpush offset {name}\n\tcall {CALLBACK_UNSUPPORTED}"
                    );
                }
            }
            let _ = writeln!(out, "{name}:\n\t.asciz \"{}\"", f.name);
        } else {
            match target {
                // In: rdi = a0, rsi = a1 (System V). Out: rax. The runtime's function is
                // System V too, so the entry shifts the arguments and jumps (the stack stays as
                // C left it, aligned for a call).
                Target::X86_64 => {
                    let _ = writeln!(
                        out,
                        "\tmov rdx, rsi\n\tmov rsi, rdi\n\tlea rdi, [rip + {}]\n\tjmp {CALLBACK}",
                        f.symbol
                    );
                }
                // In: [esp + 4] = a0, [esp + 8] = a1 (cdecl; the second may be the caller's
                // frame when there is one argument: read, never used). At entry esp is 12
                // modulo 16, so three pushes align it for the call.
                Target::I686 => {
                    let _ = writeln!(
                        out,
                        "\tmov eax, dword ptr [esp + 4]\n\tmov ecx, dword ptr [esp + 8]\n\
                         \tpush ecx\n\tpush eax\n\tpush offset {}\n\tcall {CALLBACK}\n\
                         \tadd esp, 12\n\tret",
                        f.symbol
                    );
                }
            }
        }
        let _ = writeln!(out, "\t.size {entry}, .-{entry}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_symbols_follow_the_function_symbols() {
        assert_eq!(symbol("cmm_compare"), "cmmc_compare");
        assert_eq!(symbol("odd"), "odd$c");
    }
}
