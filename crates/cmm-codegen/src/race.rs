//! `cmm compile --race`: the tables the lowering adds for the runtime's race detector
//! (`crates/stackrt/src/race/`), and the names of the runtime entries instrumented code calls.
//!
//! The lowering (`lower::lower_program_race`) calls [`READ_ENTRY`] / [`WRITE_ENTRY`]
//! `(addr, size, site)` before every load and store that may touch memory shared between
//! threads, and renames the program's `malloc`, `calloc`, `realloc` and `free` externs to the
//! runtime's wrappers ([`ALLOC_WRAPPERS`]), which tell the detector which heap memory is live
//! (freed memory that another thread gets back from `malloc` is new memory, not a race).
//!
//! Three data objects describe the program to the runtime (all read-only, exported; the
//! runtime finds them through weak references, and their presence turns detection on):
//!
//! - [`SITES_SYMBOL`]: `u32` little-endian words: the number of sites `n`, then for each site
//!   the byte offset of its text (`file:line:col`) in [`STRINGS_SYMBOL`].
//! - [`STRINGS_SYMBOL`]: NUL-terminated strings (site texts, global names).
//! - [`GLOBALS_SYMBOL`]: pointer-sized words: the number of globals `g`, then for each global
//!   its address, its size in bytes and the offset of its name in [`STRINGS_SYMBOL`].
//!
//! Mirrored in `stackrt::base::abi` (checked on both sides).
//!
//! # The inline read check (emission stage)
//!
//! Most reads of data several threads share were recorded in the reading thread's current
//! epoch already; the runtime's per-thread *filter* (`stackrt::race::filter`: one bit per
//! aligned 4 bytes, a directory of bitmaps per 4 MiB (i686: 1 MiB) of address space) says so
//! in a few loads. The emission stage settles such a read inline, before the call's sequence,
//! and skips the call (and with it every mechanism's C-call sequence) when it is:
//!
//! ```text
//!     mov  X, [tls FILTER_TLS_SYMBOL]     ; the running thread's filter, or 0
//!     test X, X ;  jz slow
//!     mov  Y, [FREED_SYMBOL]              ; freeing accessed memory bumps it
//!     cmp  Y, [X + FILTER_GEN_OFFSET] ;  jne slow
//!     mov  X, [X + FILTER_DIR_OFFSET]     ; directory of bitmaps, or null
//!     test X, X ;  jz slow
//!     mov  Y, A ;  shr Y, FILTER_SHIFT    ; (x86-64: cmp Y, 2^25; jae slow)
//!     mov  X, [X + Y*W]                   ; the region's bitmap, or null
//!     test X, X ;  jz slow
//!     test A, size-1 ;  jnz slow          ; (size 2: test A, 1; size 1: none)
//!     mov  Y, A ;  shr Y, FILTER_WORD_SHIFT ;  and Y, words-1
//!     mov  X, [X + Y*W]                   ; the bitmap word
//!     mov  Y, A ;  shr Y, 2 ;  bt X, Y    ; (size 8: jnc slow; inc Y; bt X, Y)
//!     jc   done
//! slow:
//!     <the call, as without the check>
//! done:
//! ```
//!
//! `A` is the address (x86-64: `rdi`, the call's first argument; i686: its register, or
//! `eax` loaded from its spill slot), `X` and `Y` two registers the call clobbers that hold no
//! argument still needed (x86-64: `r10`, `r11`; i686: two of `eax`, `ecx`, `edx`, the size and
//! site then pushed as immediates), `W` the word size. Only reads of 1, 2, 4 or 8 bytes that
//! lie within one 4-byte half (8: two aligned halves) are settled inline; anything else, and
//! every read the filter does not cover, calls [`READ_ENTRY`], which checks the filter again
//! and goes on to the shadow. The check is conservative: it skips a call only where the
//! runtime's own `Filter::covers` would have returned at once.

use std::collections::HashMap;

use cmm_front::diag::{LineIndex, Span};

/// The runtime entry called before a load: `(addr, size: i32, site: i32)`.
pub const READ_ENTRY: &str = "__stackrt_race_read";

/// The prefix of every runtime entry `--race` code calls: they run on the calling thread's own
/// stack under every mechanism (the detector's decision hook may switch green threads there,
/// in the deterministic mode), with the C extern budget (`callgraph::budget_of`).
pub const ENTRY_PREFIX: &str = "__stackrt_race_";
/// The runtime entry called before a store: `(addr, size: i32, site: i32)`.
pub const WRITE_ENTRY: &str = "__stackrt_race_write";
/// The thread-local word of the inline read check (module docs; mirrors
/// `stackrt::base::abi::RACE_FILTER_TLS_SYMBOL`).
pub const FILTER_TLS_SYMBOL: &str = "__stackrt_race_filter";
/// The global word the inline check compares with the filter's generation.
pub const FREED_SYMBOL: &str = "__stackrt_race_freed";
/// Byte offset of the filter's directory pointer.
pub const FILTER_DIR_OFFSET: u32 = 0;

/// The filter's geometry on a target whose pointers are `word` bytes (8: x86-64, 4: i686):
/// (generation offset, log2 of a bitmap's bytes of address space, log2 of a bitmap word's
/// bytes of address space, bitmap word size).
pub fn filter_geometry(word: u32) -> (u32, u32, u32, u32) {
    if word == 8 {
        (8, 22, 8, 8)
    } else {
        (4, 20, 7, 4)
    }
}

/// The site table (see the module docs).
pub const SITES_SYMBOL: &str = "__cmm_race_sites";
/// The string table (see the module docs).
pub const STRINGS_SYMBOL: &str = "__cmm_race_strings";
/// The globals table (see the module docs).
pub const GLOBALS_SYMBOL: &str = "__cmm_race_globals";
/// The C library's allocation functions and the runtime wrappers that replace them.
pub const ALLOC_WRAPPERS: [(&str, &str); 4] = [
    ("malloc", "__stackrt_race_malloc"),
    ("calloc", "__stackrt_race_calloc"),
    ("realloc", "__stackrt_race_realloc"),
    ("free", "__stackrt_race_free"),
];

/// Source locations of instrumented accesses, collected while lowering.
pub struct Sites {
    file: String,
    lines: LineIndex,
    index: HashMap<(usize, usize), u32>,
    texts: Vec<String>,
}

impl Sites {
    /// Sites of the source `src`, named `file` in reports.
    pub fn new(file: &str, src: &str) -> Sites {
        Sites {
            file: file.to_string(),
            lines: LineIndex::new(src),
            index: HashMap::new(),
            texts: Vec::new(),
        }
    }

    /// The site number of the access starting at `span` (one per source position).
    pub fn site(&mut self, span: Span) -> u32 {
        let (line, col) = self.lines.line_col(span.start);
        if let Some(&s) = self.index.get(&(line, col)) {
            return s;
        }
        let s = self.texts.len() as u32;
        self.texts.push(format!("{}:{line}:{col}", self.file));
        self.index.insert((line, col), s);
        s
    }

    /// The site texts, by site number.
    pub fn texts(&self) -> &[String] {
        &self.texts
    }
}

/// The bytes of [`SITES_SYMBOL`] and [`STRINGS_SYMBOL`], and the name offsets of `globals`.
pub fn tables(sites: &[String], globals: &[&str]) -> (Vec<u8>, Vec<u8>, Vec<u32>) {
    let mut strings = Vec::new();
    let mut site_words = Vec::new();
    site_words.extend_from_slice(&(sites.len() as u32).to_le_bytes());
    for s in sites {
        site_words.extend_from_slice(&(strings.len() as u32).to_le_bytes());
        strings.extend_from_slice(s.as_bytes());
        strings.push(0);
    }
    let mut name_offsets = Vec::new();
    for g in globals {
        name_offsets.push(strings.len() as u32);
        strings.extend_from_slice(g.as_bytes());
        strings.push(0);
    }
    (site_words, strings, name_offsets)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sites_are_numbered_once_per_position_with_one_based_lines_and_columns() {
        let src = "int a;\nint main() {\n  a = 1;\n}\n";
        let mut s = Sites::new("x.cm", src);
        let a = src.find("a = 1").unwrap() as u32;
        assert_eq!(s.site(Span::new(a as usize, a as usize + 1)), 0);
        assert_eq!(s.site(Span::new(4, 5)), 1);
        assert_eq!(s.site(Span::new(a as usize, a as usize + 5)), 0);
        assert_eq!(s.texts(), ["x.cm:3:3", "x.cm:1:5"]);
    }

    #[test]
    fn names_are_the_runtimes() {
        // Mirrored in stackrt::base::abi::RACE_* (checked there too).
        assert_eq!(READ_ENTRY, "__stackrt_race_read");
        assert_eq!(WRITE_ENTRY, "__stackrt_race_write");
        assert_eq!(SITES_SYMBOL, "__cmm_race_sites");
        assert_eq!(STRINGS_SYMBOL, "__cmm_race_strings");
        assert_eq!(GLOBALS_SYMBOL, "__cmm_race_globals");
        assert_eq!(FILTER_TLS_SYMBOL, "__stackrt_race_filter");
        assert_eq!(FREED_SYMBOL, "__stackrt_race_freed");
        assert_eq!(FILTER_DIR_OFFSET, 0);
        // stackrt::base::abi::RACE_FILTER_{GEN_OFFSET, SHIFT, WORD_SHIFT} on each target.
        assert_eq!(filter_geometry(8), (8, 22, 8, 8));
        assert_eq!(filter_geometry(4), (4, 20, 7, 4));
    }

    #[test]
    fn tables_hold_counts_offsets_and_nul_terminated_strings() {
        let (sites, strings, names) = tables(&["a:1:2".into(), "a:3:4".into()], &["g"]);
        assert_eq!(sites, [2, 0, 0, 0, 0, 0, 0, 0, 6, 0, 0, 0]);
        assert_eq!(strings, b"a:1:2\0a:3:4\0g\0");
        assert_eq!(names, [12]);
    }
}
