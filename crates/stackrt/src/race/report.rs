//! Race reports: one line per race (per pair of sites), naming the global the address is in,
//! the two accesses' threads and source locations; `STACKRT_RACE=abort` then ends the
//! program with status 66, as Go's race detector does with `halt_on_error`.
//!
//! The line is formatted into a stack buffer and written with one `write(2)`; duplicates are
//! found in a fixed table of site pairs with compare-and-swap: no allocation, no lock.

use core::sync::atomic::AtomicU64;
use core::sync::atomic::Ordering::Relaxed;

use crate::base::diag::StackBuf;

use super::clock;
use super::detect::Race;

/// Exit status of `STACKRT_RACE=abort` (Go's race detector's).
pub const RACE_EXIT_STATUS: i32 = 66;

/// The program's tables (`cmm_codegen::race`), read once at start.
#[derive(Clone, Copy, Debug)]
pub struct Tables {
    /// `__cmm_race_sites`: count, then string offsets.
    pub sites: *const u32,
    /// `__cmm_race_strings`.
    pub strings: *const u8,
    /// `__cmm_race_globals`: count, then (address, size, name offset) words.
    pub globals: *const usize,
}

// SAFETY: the tables are read-only data of the program.
unsafe impl Sync for Tables {}
// SAFETY: as above.
unsafe impl Send for Tables {}

impl Tables {
    /// The text of site `s` (`file:line:col`), or `?`.
    pub fn site(&self, s: u32) -> &'static [u8] {
        // SAFETY: `sites` holds its count followed by that many offsets into `strings`, each
        // the start of a NUL-terminated string (the compiler's contract).
        unsafe {
            if self.sites.is_null() || s >= *self.sites {
                return b"?";
            }
            cstr(self.strings.add(*self.sites.add(1 + s as usize) as usize))
        }
    }

    /// The globals as (address, size, name).
    pub fn globals(&self) -> impl Iterator<Item = (usize, usize, &'static [u8])> + '_ {
        // SAFETY: `globals` holds its count followed by that many triples (the compiler's
        // contract); names are NUL-terminated strings of `strings`.
        let n = if self.globals.is_null() {
            0
        } else {
            unsafe { *self.globals }
        };
        (0..n).map(move |i| unsafe {
            let g = self.globals.add(1 + 3 * i);
            (*g, *g.add(1), cstr(self.strings.add(*g.add(2))))
        })
    }
}

/// # Safety
/// `p` points to a NUL-terminated string that lives for the program.
unsafe fn cstr(p: *const u8) -> &'static [u8] {
    // SAFETY: per the contract.
    unsafe { core::ffi::CStr::from_ptr(p.cast()).to_bytes() }
}

const SEEN: usize = 4096;
static SEEN_PAIRS: [AtomicU64; SEEN] = [const { AtomicU64::new(0) }; SEEN];

/// Whether the race between sites `a` and `b` is reported for the first time (and records it).
/// A full table reports again rather than lose a new pair.
pub fn first_time(a: u32, b: u32) -> bool {
    let (lo, hi) = (a.min(b), a.max(b));
    let key = (u64::from(lo) << 32 | u64::from(hi)) + 1;
    let mut i = (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 52) as usize % SEEN;
    for _ in 0..SEEN {
        match SEEN_PAIRS[i].compare_exchange(0, key, Relaxed, Relaxed) {
            Ok(_) => return true,
            Err(k) if k == key => return false,
            Err(_) => i = (i + 1) % SEEN,
        }
    }
    true
}

/// What one report says about the current access.
pub struct Current {
    pub addr: usize,
    pub size: usize,
    pub write: bool,
    pub thread: i32,
    pub site: u32,
}

/// A byte count as a report says it: "1 byte", "4 bytes".
struct Bytes(usize);

impl core::fmt::Display for Bytes {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.0 {
            1 => f.write_str("1 byte"),
            n => write!(f, "{n} bytes"),
        }
    }
}

/// Formats the report line of `race` (thread numbers of slots through `thread_of`).
pub fn format(t: &Tables, cur: &Current, race: &Race, prev_thread: i32, out: &mut StackBuf<1024>) {
    use core::fmt::Write as _;
    let _ = out.write_str("stackrt: data race on ");
    match t
        .globals()
        .find(|&(a, s, _)| cur.addr >= a && cur.addr < a + s.max(1))
    {
        Some((a, _, name)) => {
            let _ = out.write_str(core::str::from_utf8(name).unwrap_or("?"));
            if cur.addr != a {
                let _ = write!(out, "+{}", cur.addr - a);
            }
            let _ = write!(out, " ({} at {:#x})", Bytes(cur.size), cur.addr);
        }
        None => {
            let _ = write!(out, "{:#x} ({})", cur.addr, Bytes(cur.size));
        }
    }
    let kind = |w: bool| if w { "write" } else { "read" };
    let _ = writeln!(
        out,
        ": {} by thread {} at {}, previous {} by thread {} at {}, not ordered",
        kind(cur.write),
        cur.thread,
        core::str::from_utf8(t.site(cur.site)).unwrap_or("?"),
        kind(race.prev_write),
        prev_thread,
        core::str::from_utf8(t.site(clock::site(race.prev))).unwrap_or("?"),
    );
}
