//! The happens-before check of one access against one shadow word (FastTrack, Flanagan and
//! Freund, PLDI 2009), with byte masks so that threads writing different bytes of one 8-byte
//! granule (neighbouring `char`s) do not race.
//!
//! A shadow [`Cell`] keeps the last write (an access word, `clock`) and either the last read
//! or, once reads of several threads are not ordered with each other, a set of reads (FastTrack's
//! read vector clock, with each read's site and bytes). The rules, for an access by thread `t`
//! with vector clock `C`:
//!
//! - read: a race if the last write is by another thread, not covered by `C`, and touched one
//!   of the bytes; the read replaces a read it covers (bytes included), else joins the set
//!   (but see "Kept reads").
//! - write: a race with the last write as above, or with any read of another thread not
//!   covered by `C` on a shared byte; the write replaces the last write, and drops the reads
//!   whose bytes it covers.
//!
//! Every access word kept is a real access with its real epoch and bytes, so every race
//! reported is real (no false positives); history is lost only where a write of other bytes
//! replaces an unordered write (false negatives, as TSan's bounded shadow has). For whole-word
//! accesses the rules are FastTrack's, which finds the first race on each word exactly
//! (`tests/race_model.rs` checks both against a full vector-clock model).
//!
//! # Kept reads
//!
//! A thread's read goes to its *home* entry of a set ([`home`]: where a read vector clock
//! keeps its slot's entry) when that entry is free or holds an older read of the same thread with no other bytes, and
//! then other threads' reads it covers stay in the set rather than being searched for and
//! dropped. A kept read is a real access; a later write reports it only if it is not ordered
//! before the write ([`conflicts`]), which makes it a real race; and a read that covers it
//! is kept too, so no race is missed. Kept reads go when a write covers their bytes. So a
//! thread's first read of data that several threads read costs one entry's store, and its
//! same-epoch check one entry's load, whatever the number of readers. A set has 8 entries,
//! then 16, 32, ... (moved to the next size when full), and a thread's home is entry `slot
//! mod size`: threads whose homes meet take any free entry and are searched for. A read that
//! would need more than 4,096 entries (more reads unordered at once than there are thread
//! slots, of different bytes of the granule) is not kept: a missed race, never a false one.
//!
//! # Locking
//!
//! The caller holds the cell's lock (`shadow::lock_of`) for [`read`] and [`write`]; the
//! same-epoch fast paths ([`read_is_redundant`], [`write_is_redundant`]) only load, the read
//! one also from a cell's read set (data read by several threads, each again and again in one
//! epoch, is FastTrack's common shared case). Read sets are therefore type-stable: blocks of
//! atomic words that go back to a pool, never to the allocator, so a fast path that loads a
//! set just released and reused for another cell reads valid memory; at worst it finds an
//! entry of its own from that other cell and skips recording a read: a missed race, never a
//! false one.

use core::sync::atomic::AtomicU64;
use core::sync::atomic::Ordering::Relaxed;

use super::clock::{self, VClock, CONTENDED, SHARED};
use crate::base::spin::SpinLock;

/// The shadow of one 8-byte granule: the last write and the last read (or a set of reads).
#[derive(Debug, Default)]
pub struct Cell {
    pub w: AtomicU64,
    pub r: AtomicU64,
}

/// A race found by [`read`] or [`write`]: the earlier access it races with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Race {
    /// The earlier access word.
    pub prev: u64,
    /// Whether the earlier access was a write.
    pub prev_write: bool,
}

/// Reads of a cell by threads whose reads are not ordered: `8 << class` access words (0:
/// free) in `1 << class` contiguous 64-byte blocks, the class in the low bits of the set's
/// pointer (blocks are 64-byte aligned). A thread's *home* is entry `slot mod capacity`, as in a
/// read vector clock: up to 8 threads of consecutive slots each have their own entry in one
/// cache line, loaded straight from the set's pointer. (Sets of 7 entries and a link to the
/// next block gave the 8th thread's reads a second block and a second dependent miss: the
/// thesis's Tree took 1.15x the time with 7 threads that it took with 6 under `--race`.)
#[repr(C, align(64))]
pub struct Block {
    entries: [AtomicU64; 8],
}

/// Entries of a block.
const PER_BLOCK: usize = 8;
/// Set classes: 8 to 4,096 entries (as many as thread slots).
const CLASSES: usize = 10;
const CLASS_MASK: usize = 0xf;

/// Released sets of each class, linked through their first entry (see [`link`]): the
/// process's pools, behind locks, and a per-OS-thread cache of each ([`LOCAL`]) that takes
/// [`BATCH`] blocks' worth at a time.
static POOLS: [SpinLock<usize>; CLASSES] = [const { SpinLock::new(0) }; CLASSES];
const BATCH: usize = 64;

/// Sets of `class` taken from the pool or made at a time.
fn batch(class: usize) -> usize {
    BATCH >> class.min(6)
}

/// A list of released sets: its first and last set and its length.
#[derive(Clone, Copy)]
struct List {
    head: usize,
    tail: usize,
    len: usize,
}

const EMPTY: List = List {
    head: 0,
    tail: 0,
    len: 0,
};

thread_local! {
    /// The sets of each class this OS thread took from the pool or released, so that a
    /// cell's reads going shared, its set growing and its memory being freed take no shared
    /// lock (threads reading the same data make and release sets on every core at once). At
    /// most `4 * batch(class)` long; a thread's end gives them back ([`return_local_sets`]).
    static LOCAL: [core::cell::Cell<List>; CLASSES] =
        const { [const { core::cell::Cell::new(EMPTY) }; CLASSES] };
}

/// A pooled set's link word: the next set with [`SHARED`] set, which no access word has, so
/// that a same-epoch check that loads a released set's first entry never takes it for a read.
fn link(next: usize) -> u64 {
    SHARED | next as u64
}

/// The next set of a pool list.
fn next_of(s: usize) -> usize {
    // SAFETY: pool entries are leaked, never freed, blocks.
    (unsafe { (*(s as *const Block)).entries[0].load(Relaxed) } & !SHARED) as usize
}

fn set_next(s: usize, next: usize) {
    // SAFETY: as above; the set is in a list only its holder changes.
    unsafe { (*(s as *const Block)).entries[0].store(link(next), Relaxed) };
}

/// Leaks `n` sets of `class` (never given back to the allocator, see the module docs) and
/// links them into a list.
fn make(class: usize, n: usize) -> List {
    let blocks = n << class;
    let batch: &'static mut [Block] = Box::leak(
        (0..blocks)
            .map(|_| Block {
                entries: Default::default(),
            })
            .collect(),
    );
    let mut l = EMPTY;
    for set in batch.chunks_exact(1 << class).rev() {
        let s = set.as_ptr() as usize;
        set_next(s, l.head);
        if l.tail == 0 {
            l.tail = s;
        }
        l.head = s;
        l.len += 1;
    }
    l
}

/// Takes [`batch`] sets of `class` from the process's pool, making them when it is empty.
fn take(class: usize) -> List {
    let n = batch(class);
    let taken = POOLS[class].with(|head| {
        if *head == 0 {
            return None;
        }
        let mut l = EMPTY;
        while *head != 0 && l.len < n {
            let s = *head;
            *head = next_of(s);
            if l.head == 0 {
                l.head = s;
            } else {
                set_next(l.tail, s);
            }
            l.tail = s;
            l.len += 1;
        }
        Some(l)
    });
    match taken {
        Some(l) => {
            set_next(l.tail, 0);
            l
        }
        // A batch of its own: a set of its own would be an allocation of its own, with the
        // allocator's alignment padding.
        None => make(class, n),
    }
}

/// A clear set of `class`, the caller's alone.
fn new_set(class: usize) -> usize {
    let s = LOCAL.with(|local| {
        let mut l = local[class].get();
        if l.head == 0 {
            l = take(class);
        }
        let s = l.head;
        l.head = next_of(s);
        l.len -= 1;
        if l.head == 0 {
            l.tail = 0;
        }
        local[class].set(l);
        s
    });
    for e in entries(s | class) {
        e.store(0, Relaxed);
    }
    s | class
}

/// Gives the set `r` (a read word's set: pointer and class) back to its pool.
fn release_set(r: usize) {
    let (s, class) = (r & !CLASS_MASK, r & CLASS_MASK);
    LOCAL.with(|local| {
        let mut l = local[class].get();
        set_next(s, l.head);
        if l.tail == 0 {
            l.tail = s;
        }
        l.head = s;
        l.len += 1;
        if l.len > 4 * batch(class) {
            give_back(class, l);
            l = EMPTY;
        }
        local[class].set(l);
    });
}

/// Puts the list `l` of `class` in front of the process's pool.
fn give_back(class: usize, l: List) {
    if l.len == 0 {
        return;
    }
    POOLS[class].with(|head| {
        set_next(l.tail, *head);
        *head = l.head;
    });
}

/// Gives the calling OS thread's released sets back to the process (its thread ends).
pub fn return_local_sets() {
    LOCAL.with(|local| {
        for (class, l) in local.iter().enumerate() {
            give_back(class, l.replace(EMPTY));
        }
    });
}

/// The set (pointer and class) of a read word with [`SHARED`].
fn set_of(r: u64) -> usize {
    (r & !SHARED) as usize
}

/// The entries of set `r` (pointer and class).
#[inline(always)]
fn entries(r: usize) -> &'static [AtomicU64] {
    let (s, class) = (r & !CLASS_MASK, r & CLASS_MASK);
    // SAFETY: sets are leaked runs of `1 << class` blocks (type-stable: a set released and
    // reused stays a run of its class).
    unsafe { core::slice::from_raw_parts(s as *const AtomicU64, PER_BLOCK << class) }
}

/// The home of `acc`'s thread in set `r`: entry `slot mod capacity` (module docs, "Kept
/// reads").
#[inline(always)]
fn home(r: usize, acc: u64) -> &'static AtomicU64 {
    let es = entries(r);
    &es[clock::slot(acc) & (es.len() - 1)]
}

/// Puts `acc` into set `r`: its home if free, else the first free entry; a full set is moved
/// to one of the next class (each entry to its home there if free) and `cell` points to it.
/// The caller holds the cell's lock.
fn insert(cell: &Cell, r: usize, acc: u64) {
    if put(r, acc) {
        return;
    }
    let class = r & CLASS_MASK;
    if class + 1 >= CLASSES {
        // More unordered reads than thread slots, of different bytes (module docs): this
        // one is not kept, a missed race, never a false one.
        return;
    }
    let bigger = new_set(class + 1);
    for e in entries(r) {
        put(bigger, e.load(Relaxed));
    }
    put(bigger, acc);
    cell.r.store(SHARED | bigger as u64, Relaxed);
    release_set(r);
}

/// Puts `acc` into set `r`: its home if free, else the first free entry; whether it had room.
fn put(r: usize, acc: u64) -> bool {
    let h = home(r, acc);
    if h.load(Relaxed) == 0 {
        h.store(acc, Relaxed);
        return true;
    }
    match entries(r).iter().find(|e| e.load(Relaxed) == 0) {
        Some(e) => {
            e.store(acc, Relaxed);
            true
        }
        None => false,
    }
}

fn conflicts(prev: u64, acc: u64, c: &VClock) -> bool {
    prev != 0
        && clock::slot(prev) != clock::slot(acc)
        && clock::mask(prev) & clock::mask(acc) != 0
        && !c.covers(prev)
}

/// Whether entry `e` is a read of the same thread in the same epoch covering `acc`'s bytes.
#[inline(always)]
fn same_epoch_covering(e: u64, acc: u64) -> bool {
    e != 0 && clock::same_epoch(e, acc) && clock::mask(acc) & !clock::mask(e) == 0
}

/// Whether a read `acc` adds nothing: the same thread read the same bytes in the same epoch
/// (the last read, or one in the read set). Loads only.
#[inline(always)]
pub fn read_is_redundant(cell: &Cell, acc: u64) -> bool {
    let r = cell.r.load(Relaxed);
    if r & SHARED == 0 {
        return r != 0 && same_epoch_covering(r, acc);
    }
    let s = set_of(r);
    // A thread's reads go home whenever home is free or its own ([`read`], [`insert`]), so
    // only a home taken by another thread sends them elsewhere. ("Not redundant" is always
    // safe: [`read`] then finds what a search here would.)
    let h = home(s, acc).load(Relaxed);
    if h == 0 || clock::slot(h) == clock::slot(acc) {
        return same_epoch_covering(h, acc);
    }
    entries(s)
        .iter()
        .any(|e| same_epoch_covering(e.load(Relaxed), acc))
}

/// Whether a write `acc` adds nothing: the same thread wrote the same bytes in the same epoch
/// and no read came since (a read since could be another thread's, to be checked).
#[inline(always)]
pub fn write_is_redundant(cell: &Cell, acc: u64) -> bool {
    let w = cell.w.load(Relaxed) & !CONTENDED;
    w != 0 && same_epoch_covering(w, acc) && cell.r.load(Relaxed) == 0
}

/// A read `acc` by a thread with clock `c`. The caller holds the cell's lock.
pub fn read(cell: &Cell, acc: u64, c: &VClock) -> Option<Race> {
    let w = cell.w.load(Relaxed) & !CONTENDED;
    let race = conflicts(w, acc, c).then_some(Race {
        prev: w,
        prev_write: true,
    });
    if race.is_some() {
        cell.w.fetch_or(CONTENDED, Relaxed);
    }
    let r = cell.r.load(Relaxed);
    let replaces = |e: u64| c.covers(e) && clock::mask(e) & !clock::mask(acc) == 0;
    if r == 0 {
        cell.r.store(acc, Relaxed);
    } else if r & SHARED == 0 {
        if same_epoch_covering(r, acc) {
            // One thread, one epoch, no new bytes: the kept read stands for this one (a read
            // is ordered like every other of its thread's epoch). Its site stays, since a
            // report must name an access that touched the racing byte.
        } else if replaces(r) {
            cell.r.store(acc, Relaxed);
        } else {
            let p = new_set(0);
            put(p, r);
            put(p, acc);
            cell.r.store(SHARED | p as u64, Relaxed);
        }
    } else {
        let s = set_of(r);
        let h = home(s, acc);
        let v = h.load(Relaxed);
        if v != 0 && same_epoch_covering(v, acc) {
            return race;
        }
        if v == 0 || (clock::slot(v) == clock::slot(acc) && replaces(v)) {
            // Its home entry is free or holds an earlier read of its own thread of no other
            // bytes: the read goes there, leaving the other entries alone (module docs, "Kept
            // reads").
            h.store(acc, Relaxed);
            return race;
        }
        let known = entries(s)
            .iter()
            .any(|e| same_epoch_covering(e.load(Relaxed), acc));
        if !known {
            for e in entries(s) {
                let v = e.load(Relaxed);
                if v != 0 && replaces(v) {
                    e.store(0, Relaxed);
                }
            }
            insert(cell, s, acc);
        }
    }
    race
}

/// A write `acc` by a thread with clock `c`. The caller holds the cell's lock.
pub fn write(cell: &Cell, acc: u64, c: &VClock) -> Option<Race> {
    let flag = cell.w.load(Relaxed) & CONTENDED;
    let w = cell.w.load(Relaxed) & !CONTENDED;
    let mut race = conflicts(w, acc, c).then_some(Race {
        prev: w,
        prev_write: true,
    });
    let r = cell.r.load(Relaxed);
    let covered = |e: u64| clock::mask(e) & !clock::mask(acc) == 0;
    if r != 0 && r & SHARED == 0 {
        if race.is_none() && conflicts(r, acc, c) {
            race = Some(Race {
                prev: r,
                prev_write: false,
            });
        }
        if covered(r) {
            cell.r.store(0, Relaxed);
        }
    } else if r != 0 {
        let s = set_of(r);
        let mut left = 0;
        for e in entries(s) {
            let v = e.load(Relaxed);
            if v == 0 {
                continue;
            }
            if race.is_none() && conflicts(v, acc, c) {
                race = Some(Race {
                    prev: v,
                    prev_write: false,
                });
            }
            if covered(v) {
                e.store(0, Relaxed);
            } else {
                left += 1;
            }
        }
        if left == 0 {
            cell.r.store(0, Relaxed);
            release_set(s);
        }
    }
    let contended = if race.is_some() { CONTENDED } else { flag };
    cell.w.store(acc | contended, Relaxed);
    race
}

/// Whether some access to the cell raced with another thread's (see [`clock::CONTENDED`]).
#[inline]
pub fn is_contended(cell: &Cell) -> bool {
    cell.w.load(Relaxed) & CONTENDED != 0
}

/// Forgets every access to the cell (its memory was freed or is allocated anew). The caller
/// holds the cell's lock (or is alone, `shadow::alone`). Loads and stores, no swap: every
/// change of a cell is made under its lock.
pub fn reset(cell: &Cell) {
    let r = cell.r.load(Relaxed);
    cell.r.store(0, Relaxed);
    if r & SHARED != 0 {
        release_set(set_of(r));
    }
    cell.w.store(0, Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` threads of slots `0..n` (each at clock 1), none ordered with another.
    fn reader(slot: usize, site: u32) -> u64 {
        clock::access(1, slot, 0xff, site)
    }

    #[test]
    fn a_read_set_grows_past_eight_readers_and_keeps_every_read() {
        let cell = Cell::default();
        // Each thread's clock knows only itself: no read covers another.
        let clock_of = |slot: usize| {
            let mut c = VClock::new();
            c.set(slot, 1);
            c
        };
        for slot in 0..40 {
            let acc = reader(slot, slot as u32);
            assert!(read(&cell, acc, &clock_of(slot)).is_none());
            assert!(read_is_redundant(&cell, acc), "slot {slot}");
        }
        let r = cell.r.load(Relaxed);
        assert_ne!(r & SHARED, 0);
        // 40 readers: a set of 64 entries (class 3).
        assert_eq!(set_of(r) & CLASS_MASK, 3);
        for slot in 0..40 {
            assert!(
                read_is_redundant(&cell, reader(slot, slot as u32)),
                "slot {slot}"
            );
        }
        // A write that knows all but the last reader races with that one, and its bytes cover
        // every read: the set is cleared and given back.
        let mut most = clock_of(100);
        for slot in 0..39 {
            most.set(slot, 1);
        }
        let w = clock::access(1, 100, 0xff, 999);
        let race = write(&cell, w, &most).expect("a race");
        assert!(!race.prev_write);
        assert_eq!(clock::slot(race.prev), 39);
        assert_eq!(cell.r.load(Relaxed), 0);
    }
}
