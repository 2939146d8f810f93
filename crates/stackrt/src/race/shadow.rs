//! Shadow memory of the race detector: which memory is tracked, and a [`Cell`] per tracked
//! 8-byte granule (Go's race detector's granule too).
//!
//! Only the program's globals and the blocks it got from `malloc`/`calloc`/`realloc` (through
//! the runtime's wrappers, `cmm_codegen::race`) are tracked. Stack memory is not: it passes
//! from thread to thread with no synchronisation the detector sees (a stack chunk from the
//! shared pool, a heap mechanism's frame block on a worker's free list, a reused fixed stack),
//! so its old accesses would look like races with the new owner's.
//!
//! The address space is cut into 4 MiB regions; a region's shadow (a bitmap of tracked granules
//! and 16 bytes of [`Cell`] per granule: 8 MiB + 64 KiB of address space, `MAP_NORESERVE`, so
//! only touched pages cost memory) is mapped when memory in it is first tracked, and installed
//! in a directory mapped at start (2^25 words on x86-64, 1024 on i686) with a compare-and-swap.
//! Regions are never unmapped. Cells are locked by address-hashed spin locks.

use core::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use core::sync::atomic::{AtomicPtr, AtomicU32, AtomicUsize};

use crate::base::diag::fail;
use crate::base::spin::RawSpin;

use super::detect::{self, Cell};

const REGION_SHIFT: u32 = 22;
/// Bytes of memory one [`Cell`] shadows.
pub const GRANULE: usize = 8;
const WORDS: usize = 1 << (REGION_SHIFT - 3);
#[cfg(target_pointer_width = "64")]
const ADDRESS_BITS: u32 = 47;
#[cfg(target_pointer_width = "32")]
const ADDRESS_BITS: u32 = 32;
const REGIONS: usize = 1 << (ADDRESS_BITS - REGION_SHIFT);

/// The shadow of one region.
#[repr(C)]
struct Region {
    tracked: [AtomicU32; WORDS / 32],
    cells: [Cell; WORDS],
}

static DIRECTORY: AtomicPtr<AtomicPtr<Region>> = AtomicPtr::new(core::ptr::null_mut());
/// Exit status of the detector's own failures (out of address space for shadow memory).
const SHADOW_FAILURE_STATUS: i32 = 70;

fn map(bytes: usize, what: &str) -> *mut u8 {
    crate::base::os::map_noreserve(bytes).unwrap_or_else(|| {
        fail(
            &format!("stackrt: --race: cannot map {bytes} bytes of {what}"),
            SHADOW_FAILURE_STATUS,
        )
    })
}

/// Maps the region directory; idempotent.
pub fn init() {
    if DIRECTORY.load(Acquire).is_null() {
        let d = map(
            REGIONS * core::mem::size_of::<usize>(),
            "the shadow directory",
        );
        if DIRECTORY
            .compare_exchange(core::ptr::null_mut(), d.cast(), AcqRel, Acquire)
            .is_err()
        {
            // SAFETY: `d` was mapped above with this size and lost the race: nobody uses it.
            unsafe { libc::munmap(d.cast(), REGIONS * core::mem::size_of::<usize>()) };
        }
    }
}

#[inline(always)]
fn slot(addr: usize) -> Option<&'static AtomicPtr<Region>> {
    let d = DIRECTORY.load(Acquire);
    let i = addr >> REGION_SHIFT;
    if d.is_null() || i >= REGIONS {
        return None;
    }
    // SAFETY: the directory has REGIONS words and is never unmapped.
    Some(unsafe { &*d.add(i) })
}

#[inline(always)]
fn region(addr: usize) -> Option<&'static Region> {
    let r = slot(addr)?.load(Acquire);
    // SAFETY: installed regions are never unmapped.
    (!r.is_null()).then(|| unsafe { &*r })
}

fn region_or_map(addr: usize) -> Option<&'static Region> {
    let s = slot(addr)?;
    let r = s.load(Acquire);
    if !r.is_null() {
        // SAFETY: installed regions are never unmapped.
        return Some(unsafe { &*r });
    }
    let size = core::mem::size_of::<Region>();
    let fresh = map(size, "shadow memory").cast::<Region>();
    match s.compare_exchange(core::ptr::null_mut(), fresh, AcqRel, Acquire) {
        // SAFETY: just installed; zeroed memory is a valid Region (atomics of 0).
        Ok(_) => Some(unsafe { &*fresh }),
        Err(other) => {
            // SAFETY: `fresh` lost the race and was never shared.
            unsafe { libc::munmap(fresh.cast(), size) };
            // SAFETY: installed regions are never unmapped.
            Some(unsafe { &*other })
        }
    }
}

fn word_index(addr: usize) -> usize {
    (addr >> 3) & (WORDS - 1)
}

/// The cell of the word at `addr` if it is tracked.
#[inline(always)]
pub fn tracked_cell(addr: usize) -> Option<&'static Cell> {
    let r = region(addr)?;
    let w = word_index(addr);
    let bit = r.tracked[w / 32].load(Relaxed) & (1 << (w % 32)) != 0;
    bit.then(|| &r.cells[w])
}

/// Threads of the program that may still access memory: forked and not ended (`main` is one).
static RUNNING: AtomicUsize = AtomicUsize::new(0);

/// A thread starts (before it can run: `main` at start, a child in `sthread_create`).
pub fn thread_started() {
    RUNNING.fetch_add(1, Relaxed);
}

/// A thread made its last access.
pub fn thread_ended() {
    RUNNING.fetch_sub(1, Release);
}

/// Threads started and not yet joined, `main` included ([`quiescent`]).
static UNJOINED: AtomicUsize = AtomicUsize::new(0);

/// A thread is created (`main` at start, a child in `sthread_create`): see [`quiescent`].
pub fn thread_created() {
    UNJOINED.fetch_add(1, Relaxed);
}

/// A thread was joined by a thread whose clock took in the joined one's.
pub fn thread_joined() {
    UNJOINED.fetch_sub(1, Release);
}

/// Whether every thread but the calling one has been joined, so that everything any other
/// thread did happens before what the caller does now (each joined thread's clock went into
/// its joiner's, and every joiner but the caller was joined in turn), and everything the caller
/// does now happens before whatever a thread created later does. An access then can race with
/// no access, past or future, and needs no shadow at all: no record, no check, not even the
/// cell's load (a program's single-threaded start, building the data its threads share, and
/// its single-threaded end, freeing it, are most of what `--race` costs the thesis's Tree
/// besides the searches). Stricter than [`alone`]: a thread that ended but was not joined
/// (nor ever will be) is not ordered before the caller, and its accesses are still checked
/// against.
#[inline(always)]
pub fn quiescent() -> bool {
    UNJOINED.load(Acquire) == 1
}

/// Threads of the program that may still access memory (relaxed replay's waits spin less when
/// they outnumber the CPUs).
pub fn running() -> usize {
    RUNNING.load(Relaxed)
}

/// Whether the calling thread is the only one that can access memory, so that no other thread
/// can touch a cell or a tracking word: it then changes them without the locks and the locked
/// instructions that order them between threads. (Only it can start another thread, and an
/// ended thread's changes are seen through the Release/Acquire pair.) A program's
/// single-threaded start, which builds the data its threads share, took 3.5x its plain time
/// under `--race`, a fifth of it in those locked instructions (the thesis's Tree built and
/// freed without searches: 0.91x the time without them).
#[inline(always)]
pub fn alone() -> bool {
    RUNNING.load(Acquire) == 1
}

/// 64 KiB of one-byte locks: neighbouring cells share a lock's cache line, and threads working
/// on memory 512 bytes or more apart seldom do. (1,024 stripes were 16 lines, which every core
/// wrote all the time: the 8-thread `--race` Tree took 1.09x the time it takes now on 2 cores.)
const STRIPES: usize = 1 << 16;
static LOCKS: [RawSpin; STRIPES] = [const { RawSpin::new() }; STRIPES];

/// The lock of `cell` (striped by the cell's address, so neighbouring granules have
/// different locks).
#[inline]
pub fn lock_of(cell: &Cell) -> &'static RawSpin {
    &LOCKS[(cell as *const Cell as usize / core::mem::size_of::<Cell>()) % STRIPES]
}

/// Starts tracking `[addr, addr + len)` (memory just allocated). Its cells are clear: cells
/// change only while tracked, and [`untrack`] clears them.
pub fn track(addr: usize, len: usize) {
    let touch = len <= TOUCH_LIMIT;
    let alone = alone();
    for_words(addr, len, true, |r, first, bits| {
        let word = &r.tracked[first / 32];
        if alone {
            word.store(word.load(Relaxed) | bits, Relaxed);
        } else {
            word.fetch_or(bits, Relaxed);
        }
        if touch {
            // A small block is written soon after it is allocated; its first access would
            // read the shadow page (mapping the zero page) and its update write it (a second
            // fault copying that page). A write of what is there takes one write fault now:
            // alone, a store of 0 (the cells of untracked memory are clear, see above); else
            // an RMW that changes nothing (`fetch_or(0)` would be compiled to a load; `lock
            // cmpxchg` writes either way), in case another thread wrote the cell meanwhile.
            // (Also alone, where its first accesses write no shadow (`race::checked`): the
            // threads started later would write it, replacing the zero page, and in a process
            // of several threads each such fault cost the other CPUs a TLB flush: the
            // 4-thread Tree took 1.25x the time on x86-64 without this, with 0.44x the peak
            // memory.)
            let w = &r.cells[first + bits.trailing_zeros() as usize].w;
            if alone {
                w.store(0, Relaxed);
            } else {
                let _ = w.compare_exchange(0, 0, Relaxed, Relaxed);
            }
        }
    });
}

/// Blocks up to this size get their shadow pages written at `track` (larger ones may never be
/// touched in full: their shadow is committed page by page as the program goes).
const TOUCH_LIMIT: usize = 4096;

/// Stops tracking `[addr, addr + len)` (memory being freed) and forgets its accesses.
pub fn untrack(addr: usize, len: usize) {
    let alone = alone();
    let accessed = core::cell::Cell::new(false);
    for_words(addr, len, false, |r, first, bits| {
        let word = &r.tracked[first / 32];
        if alone {
            word.store(word.load(Relaxed) & !bits, Relaxed);
        } else {
            word.fetch_and(!bits, Relaxed);
        }
        let mut rest = bits;
        while rest != 0 {
            let i = rest.trailing_zeros() as usize;
            rest &= rest - 1;
            let c = &r.cells[first + i];
            // Untouched cells stay unwritten, so freeing a large block commits no shadow.
            if c.w.load(Relaxed) != 0 || c.r.load(Relaxed) != 0 {
                accessed.set(true);
                if alone {
                    detect::reset(c);
                } else {
                    let l = lock_of(c);
                    l.lock();
                    detect::reset(c);
                    l.unlock();
                }
            }
        }
    });
    if accessed.get() {
        // The threads' filters may say a read of this memory is recorded; its next owner's
        // memory is new (`filter`'s module docs).
        super::filter::memory_freed();
    }
}

/// Calls `f(region, first word of a group of 32, bits of the group in the range)` for every
/// group of 32 words that `[addr, addr + len)` touches, mapping regions if `map_regions`.
fn for_words(addr: usize, len: usize, map_regions: bool, f: impl Fn(&Region, usize, u32)) {
    if len == 0 {
        return;
    }
    let mut a = addr & !(GRANULE - 1);
    let end = addr.saturating_add(len);
    while a < end {
        let region_end = ((a >> REGION_SHIFT) + 1) << REGION_SHIFT;
        // 32 granules: 256 bytes.
        let group_end = (((a >> 8) + 1) << 8)
            .min(region_end)
            .min(end.next_multiple_of(GRANULE));
        let r = if map_regions {
            region_or_map(a)
        } else {
            region(a)
        };
        if let Some(r) = r {
            let first = word_index(a) & !31;
            let mut bits = 0u32;
            let mut w = a;
            while w < group_end {
                bits |= 1 << (word_index(w) % 32);
                w += GRANULE;
            }
            f(r, first, bits);
        }
        a = group_end;
    }
}
