//! A thread's filter of the reads it has already recorded in the current epoch: one bit per
//! aligned 4 bytes of tracked memory, so that a read the shadow would call redundant
//! (FastTrack's same-epoch case) is settled without touching the shadow at all.
//!
//! # Why
//!
//! Data that several threads read (the thesis's Tree, searched by every thread) has a read set
//! per granule: checking a read that adds nothing loads the granule's cell and then its set's
//! entry, two dependent cache misses beside the program's own. The filter is dense (one bit per
//! 4 bytes, 1/32 of the data) and indexed by address, so a thread walking its data walks its
//! filter in order too: one line of filter covers 2 KiB of data.
//!
//! # What a set bit means
//!
//! Bit `h` set in thread `t`'s filter: in `t`'s current epoch, `t` read all 4 bytes of half
//! `h`, and that read was recorded in the shadow (or found the same epoch's read there, or
//! needed no record: `t` was the only thread running and the granule had no access recorded,
//! `race::checked`; `t` ticks before any other thread can exist, at its next create). A read
//! whose halves all have their bit set is skipped. The bit stays true as long as
//!
//! - `t`'s epoch does not change: [`Filter::clear`] at every tick of its clock (a release, a
//!   create, a CAS), the only way anything `t` did gets ordered before another thread's access;
//! - `t` does not write those bytes (a write drops the reads it covers): [`Filter::forget`] at
//!   each of its writes;
//! - the shadow is not reset under it: freeing tracked memory that was accessed bumps
//!   [`FREED`], and a filter whose generation differs is cleared before it is used. (Without
//!   this, a block freed and reallocated would inherit the old block's bits.)
//!
//! The one other way a recorded read leaves the shadow is another thread's write of its bytes
//! while `t` is still in the same epoch: such a write is not ordered after the read, so it is
//! reported as racing with it; a later read of `t` in that epoch is then skipped where the
//! shadow would have reported it against that write too. The first race on each word is
//! therefore still found exactly (`tests/race_model.rs` runs the model with filters).
//!
//! # Memory
//!
//! The filter is a directory of regions ([`SHIFT`]: 4 MiB of address space on x86-64, 1 MiB on
//! i686) mapped at the thread's first filtered read, and a bitmap per region mapped when it is
//! first used (`MAP_NORESERVE`: only touched pages cost memory). A mapping the system refuses
//! turns the thread's filter off: its reads all go to the shadow, as before. Words that became
//! nonzero are logged, so a clear writes only those; the log is never longer than the words
//! mapped. When the thread's state is freed (its join) its filter is cleared and its mappings
//! go to a pool for the next thread's filter ([`POOL`]).

use core::cell::{Cell, UnsafeCell};
use core::sync::atomic::AtomicUsize;
use core::sync::atomic::Ordering::Relaxed;

use crate::base::os::map_noreserve;
use crate::base::spin::SpinLock;

/// Log2 of the bytes of address space one bitmap covers (the compiler's inline check uses it).
const SHIFT: u32 = crate::base::abi::RACE_FILTER_SHIFT;
#[cfg(target_pointer_width = "64")]
const ADDRESS_BITS: u32 = 47;
#[cfg(target_pointer_width = "32")]
const ADDRESS_BITS: u32 = 32;
const REGIONS: usize = 1 << (ADDRESS_BITS - SHIFT);
/// Bytes of memory one bit covers.
const HALF: usize = 4;
/// A bitmap word: 32 bits on i686, where 64-bit shifts take several instructions.
type Word = usize;
const BITS: usize = Word::BITS as usize;
/// Log2 of the bytes of memory one word covers (256 on x86-64, 128 on i686).
const WORD_SHIFT: u32 = crate::base::abi::RACE_FILTER_WORD_SHIFT;
const _: () = assert!(1 << WORD_SHIFT == BITS * HALF);
/// Words of one region's bitmap.
const WORDS: usize = 1 << (SHIFT - WORD_SHIFT);

/// Bumped when tracked memory that was accessed is freed (`shadow::untrack`). Exported: the
/// compiler's inline read check compares it with the running filter's generation.
#[export_name = "__stackrt_race_freed"]
static FREED: AtomicUsize = AtomicUsize::new(0);

/// Tracked memory whose shadow had accesses is being freed: every filter is stale.
pub fn memory_freed() {
    FREED.fetch_add(1, Relaxed);
}

/// One thread's filter (see the module docs). Only its thread uses it. `repr(C)`: code the
/// emission stage inlines before a read reads `dir` and `generation` at the offsets
/// `base::abi::RACE_FILTER_*_OFFSET` (see [`crate::race::inline`]).
#[repr(C)]
pub struct Filter {
    /// `REGIONS` bitmap pointers, null until the first note (and after a mapping failed).
    dir: Cell<*mut *mut Word>,
    /// [`FREED`] when the filter was last cleared. (A word: on i686 a filter not used for
    /// exactly 2^32 frees would be taken for a fresh one.)
    generation: Cell<usize>,
    /// A mapping failed: the filter stays empty.
    off: Cell<bool>,
    /// Words that became nonzero since the last clear.
    log: UnsafeCell<Vec<*mut Word>>,
    /// Regions mapped (to unmap them).
    mapped: UnsafeCell<Vec<*mut Word>>,
    /// Reads noted in this epoch, and how many go unnoted before the first one that is.
    seen: Cell<u32>,
    after: u32,
}

/// Reads of an epoch that [`Filter::note`] lets pass before it notes one. In IRS's Dining
/// Philosophers, whose threads swap a word between every few reads, noting from the first read
/// cost 1.1x the run's time.
const NOTE_AFTER: u32 = 8;

/// The bits of halves `lo..=hi` of a word.
#[inline(always)]
fn bits(lo: usize, hi: usize) -> Word {
    (Word::MAX >> (BITS - 1 - (hi - lo))) << lo
}

impl Default for Filter {
    fn default() -> Self {
        Self::new()
    }
}

impl Filter {
    /// An empty filter (maps nothing yet).
    pub fn new() -> Filter {
        let mut f = Self::eager();
        f.after = NOTE_AFTER;
        f
    }

    /// A filter that notes every read from an epoch's first (for tests: the bits mean the
    /// same, only sooner).
    pub fn eager() -> Filter {
        Filter {
            seen: Cell::new(0),
            after: 0,
            dir: Cell::new(core::ptr::null_mut()),
            off: Cell::new(false),
            generation: Cell::new(FREED.load(Relaxed)),
            log: UnsafeCell::new(Vec::new()),
            mapped: UnsafeCell::new(Vec::new()),
        }
    }

    /// The bitmap word of `addr`, if its region's bitmap is mapped.
    #[inline(always)]
    fn word(&self, addr: usize) -> Option<*mut Word> {
        let d = self.dir.get();
        let r = addr >> SHIFT;
        if d.is_null() || r >= REGIONS {
            return None;
        }
        // SAFETY: the directory has REGIONS entries and lives as long as the filter.
        let b = unsafe { *d.add(r) };
        if b.is_null() {
            return None;
        }
        // SAFETY: a mapped bitmap has WORDS words.
        Some(unsafe { b.add((addr >> WORD_SHIFT) & (WORDS - 1)) })
    }

    /// Whether the read of `size` bytes at `addr` was recorded in this epoch already: every
    /// half it touches was read in full (by reads within one granule each). False for sizes
    /// outside 1 to 8 and for reads that cross a bitmap word's bytes (aligned 256 or 128).
    #[inline(always)]
    pub fn covers(&self, addr: usize, size: core::ffi::c_int) -> bool {
        let size = size as usize;
        if size.wrapping_sub(1) >= 8 {
            return false;
        }
        let Some(w) = self.word(addr) else {
            return false;
        };
        // SAFETY: `word` points into a mapped bitmap of this thread's.
        let word = unsafe { *w };
        let first = addr / HALF;
        // Halves after the first: 0 to 2 (more only where the address wraps around). Past the
        // word's last, the shift below loses them, hence the second check.
        let more = (addr.wrapping_add(size - 1) / HALF).wrapping_sub(first);
        if more > 2 {
            return false;
        }
        let m = ((2 << more) - 1) << (first % BITS);
        word & m == m
            && (first % BITS) + more < BITS
            && self.generation.get() == FREED.load(Relaxed)
    }

    /// The read of `size` bytes at `addr` (within one granule) is recorded in the shadow:
    /// sets the bits of the halves it covers in full.
    #[inline]
    pub fn note(&self, addr: usize, size: usize) {
        let seen = self.seen.get();
        if seen < self.after {
            // Not yet: most epochs of a thread that synchronises often read a few words
            // once each, and the filter would only cost them.
            self.seen.set(seen + 1);
            return;
        }
        let lo = addr.div_ceil(HALF);
        let end = (addr + size) / HALF;
        if lo >= end {
            return;
        }
        if self.generation.get() != FREED.load(Relaxed) {
            self.clear();
        }
        let w = match self.word(addr) {
            Some(w) => w,
            None => match self.map_region(addr) {
                Some(w) => w,
                None => return,
            },
        };
        let m = bits(lo % BITS, (end - 1) % BITS);
        // SAFETY: `w` points into a mapped bitmap of this thread's; only it writes there.
        unsafe {
            let old = *w;
            if old == 0 {
                (*self.log.get()).push(w);
            }
            *w = old | m;
        }
    }

    /// This thread writes `[addr, addr + size)`: its earlier reads of those bytes leave the
    /// shadow, so their bits go.
    #[inline]
    pub fn forget(&self, addr: usize, size: usize) {
        if self.dir.get().is_null() || size == 0 {
            return;
        }
        let end = addr.saturating_add(size);
        let mut a = addr;
        while a < end {
            let word_end = ((a >> WORD_SHIFT) + 1) << WORD_SHIFT;
            let stop = word_end.min(end);
            if let Some(w) = self.word(a) {
                let m = bits((a / HALF) % BITS, ((stop - 1) / HALF) % BITS);
                // SAFETY: as in `note`.
                unsafe {
                    if *w & m != 0 {
                        *w &= !m;
                    }
                }
            }
            a = stop;
        }
    }

    /// A new epoch (or freed memory): no read is recorded in it yet.
    pub fn clear(&self) {
        // SAFETY: only this thread uses its filter; the logged words are in mapped bitmaps.
        let log = unsafe { &mut *self.log.get() };
        for &w in log.iter() {
            // SAFETY: as above.
            unsafe { *w = 0 };
        }
        log.clear();
        self.seen.set(0);
        self.generation.set(FREED.load(Relaxed));
    }

    /// Maps the directory if needed (or takes a pooled one) and `addr`'s region's bitmap;
    /// its word of `addr`.
    #[cold]
    #[inline(never)]
    fn map_region(&self, addr: usize) -> Option<*mut Word> {
        let r = addr >> SHIFT;
        if r >= REGIONS || self.off.get() {
            return None;
        }
        if self.dir.get().is_null() {
            if let Some(m) = POOL.with(|p| p.pop()) {
                self.dir.set(m.dir);
                // SAFETY: only this thread uses its filter.
                unsafe { *self.mapped.get() = m.mapped };
                if let Some(w) = self.word(addr) {
                    return Some(w);
                }
            } else {
                match map_noreserve(REGIONS * core::mem::size_of::<usize>()) {
                    Some(d) => self.dir.set(d.cast()),
                    None => {
                        self.off.set(true);
                        return None;
                    }
                }
            }
        }
        let Some(b) = map_noreserve(WORDS * core::mem::size_of::<Word>()) else {
            self.clear();
            self.take().unmap();
            self.off.set(true);
            return None;
        };
        // SAFETY: the directory has REGIONS entries; this thread alone writes them.
        unsafe { *self.dir.get().add(r) = b.cast() };
        // SAFETY: only this thread uses its filter.
        unsafe { (*self.mapped.get()).push(b.cast()) };
        self.word(addr)
    }

    /// The filter's mappings, leaving it empty.
    fn take(&self) -> Maps {
        let dir = self.dir.replace(core::ptr::null_mut());
        // SAFETY: only this thread (or the joiner freeing its state) uses the filter.
        let mapped = core::mem::take(unsafe { &mut *self.mapped.get() });
        Maps { dir, mapped }
    }
}

/// A filter's directory and bitmaps, every bit clear.
struct Maps {
    dir: *mut *mut Word,
    mapped: Vec<*mut Word>,
}

// SAFETY: pooled mappings belong to no thread; the next filter to take them is their only user.
unsafe impl Send for Maps {}

impl Maps {
    fn unmap(self) {
        for &b in &self.mapped {
            // SAFETY: mapped by `map_region` with this size, referred to by nobody else.
            unsafe { libc::munmap(b.cast(), WORDS * core::mem::size_of::<Word>()) };
        }
        if !self.dir.is_null() {
            // SAFETY: mapped by `map_region` with this size.
            unsafe { libc::munmap(self.dir.cast(), REGIONS * core::mem::size_of::<usize>()) };
        }
    }
}

/// Mappings of ended threads' filters, for the next threads: IRS's Fibonacci starts 2,000
/// threads one after another, and mapping and unmapping a filter for each (the unmaps flushing
/// the TLBs of the other CPUs) took 15 times its `--race` run's time.
static POOL: SpinLock<Vec<Maps>> = SpinLock::new(Vec::new());
/// At most this many pooled filters (more are unmapped).
const POOLED: usize = 256;

impl Drop for Filter {
    fn drop(&mut self) {
        // Every nonzero word is in the log, so the bitmaps are clear after this.
        self.clear();
        let m = self.take();
        if m.dir.is_null() {
            return;
        }
        if let Err(m) = POOL.with(|p| {
            if p.len() < POOLED {
                p.push(m);
                Ok(())
            } else {
                Err(m)
            }
        }) {
            m.unmap();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tests that use filters run one at a time: one of them bumps the global [`FREED`],
    /// which would make another's filter stale between its note and its check.
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

    /// 512 bytes at the start of a bitmap word's bytes (so no test access crosses a word).
    #[repr(align(256))]
    struct Data([u8; 512]);

    #[test]
    fn a_read_is_covered_once_noted_until_a_clear_a_write_or_a_free() {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let data = Box::new(Data([0; 512]));
        let a = data.0.as_ptr() as usize;
        let f = Filter::eager();
        assert!(!f.covers(a, 4));
        f.note(a, 4);
        assert!(f.covers(a, 4));
        assert!(f.covers(a + 1, 2), "a part of a noted half");
        assert!(!f.covers(a + 2, 4), "reaches the next half");
        assert!(!f.covers(a, 8));
        f.note(a + 4, 4);
        assert!(f.covers(a, 8));
        f.forget(a + 3, 2);
        assert!(!f.covers(a, 4) && !f.covers(a + 4, 4));
        f.note(a + 8, 8);
        assert!(f.covers(a + 12, 4));
        f.clear();
        assert!(!f.covers(a + 8, 8));
        f.note(a + 16, 8);
        memory_freed();
        assert!(!f.covers(a + 16, 8));
        // A read of part of a half covers nothing (the half's other bytes were not read).
        f.note(a + 25, 2);
        assert!(!f.covers(a + 25, 1) && !f.covers(a + 24, 4));
        f.note(a + 30, 2);
        assert!(!f.covers(a + 30, 2));
        f.note(a + 28, 4);
        assert!(f.covers(a + 30, 2));
        // Across granules: both halves were read in full.
        f.note(a + 32, 8);
        assert!(f.covers(a + 30, 4));
        assert!(!f.covers(a + 30, 0) && !f.covers(a + 30, 9) && !f.covers(a + 30, -1));
    }

    #[test]
    fn an_epoch_notes_reads_only_after_its_first_few() {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let data = Box::new(Data([0; 512]));
        let a = data.0.as_ptr() as usize;
        let f = Filter::new();
        for _ in 0..NOTE_AFTER {
            f.note(a, 4);
            assert!(!f.covers(a, 4));
        }
        f.note(a, 4);
        assert!(f.covers(a, 4));
        f.clear();
        f.note(a, 4);
        assert!(!f.covers(a, 4), "a new epoch starts counting again");
    }

    #[test]
    fn bits_span_the_halves_asked_for() {
        assert_eq!(bits(0, 0), 1);
        assert_eq!(bits(3, 4), 0b11000);
        assert_eq!(bits(0, BITS - 1), Word::MAX);
        assert_eq!(bits(BITS - 1, BITS - 1), 1 << (BITS - 1));
    }
}
