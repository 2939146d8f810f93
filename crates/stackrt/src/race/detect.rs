//! The happens-before check of one access against one shadow word (FastTrack, Flanagan and
//! Freund, PLDI 2009), with byte masks so that threads writing different bytes of one 8-byte
//! granule (neighbouring `char`s) do not race.
//!
//! A shadow [`Cell`] keeps the last write (an access word, `clock`) and either the last read
//! or, once reads of several threads are not ordered with each other, a set of reads (FastTrack's
//! read vector clock, with each read's site and bytes). The rules, for an access by thread `t`
//! with vector clock `C`:
//!
//! - read: a race if the last write (or a kept write, below) is by another thread, not
//!   covered by `C`, and touched one of the bytes; the read replaces a read it covers (bytes
//!   included), else joins the set (but see "Kept reads").
//! - write: a race with the last write or a kept write as above, or with any read of another
//!   thread not covered by `C` on a shared byte; the write replaces the last write (keeping
//!   it for the bytes it leaves, "Kept writes"), and drops the reads whose bytes it covers.
//!
//! Every access word kept is a real access with its real epoch and bytes, so every race
//! reported is real (no false positives). For whole-word accesses the rules are FastTrack's,
//! which finds the first race on each word exactly (`tests/race_model.rs` checks both against
//! a full vector-clock model).
//!
//! # Kept writes
//!
//! A write that does not cover all the bytes of the last write leaves those bytes' last write
//! in place: the old write word, with the mask of the bytes left, goes into the cell's set as
//! a *write entry* (its top bit set, [`WRITE_ENTRY`]; the set word then has [`KEPT_WRITES`]),
//! which reads check as they do the last write; a later write takes its bytes out of the
//! entry's mask, and drops the entry when none is left, so each byte has one last write (in
//! the last-write word or in one entry; a set holds at most 8 entries). Without this, a
//! thread writing two neighbouring variables of one granule (`p->x = 1; p->y = 2;`) kept
//! only the second, and another thread's unordered read of `p->x` went unreported. Two writes of one thread in one epoch at one site (a loop
//! filling a `char` array) are one access word of both byte masks instead: a race with
//! either names the same site, and nothing orders one before the other.
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

/// Bytes of the read sets' first arena mapping; each next one is twice as large, up to
/// [`ARENA_BYTES`] (a program with few shared reads keeps its few sets in 64 KiB).
const FIRST_ARENA_BYTES: usize = 64 << 10;
/// Bytes the read sets' arena maps at a time at most.
const ARENA_BYTES: usize = 1 << 20;

/// The rest of the read sets' current arena: its next free byte, its end, and the size of the
/// next mapping.
static ARENA: SpinLock<(usize, usize, usize)> = SpinLock::new((0, 0, FIRST_ARENA_BYTES));

/// `blocks` fresh, zeroed, 64-byte aligned blocks for read sets, from an arena mapped
/// [`FIRST_ARENA_BYTES`] to [`ARENA_BYTES`] at a time with its pages already in
/// (`MAP_POPULATE`): a cell going read-shared is a thread's first visit of data others read
/// (the thesis's Tree: every node a thread passes), and sets carved from the allocator's heap
/// one small batch at a time took a page fault per 64 sets among the program's own blocks; in
/// populated mappings the thesis's Tree4 took 0.89-0.94x the time under `--race` (2026-11-28,
/// both targets, OS and green threads).
fn carve(blocks: usize) -> *mut u8 {
    let bytes = blocks * core::mem::size_of::<Block>();
    debug_assert!(bytes <= FIRST_ARENA_BYTES);
    ARENA.with(|a| {
        if a.1 - a.0 < bytes {
            // The rest of the old arena (less than one batch) is left unused.
            let size = a.2;
            let m = crate::base::os::map_populated(size).unwrap_or_else(|| {
                crate::base::diag::fail(
                    &format!("stackrt: --race: cannot map {size} bytes of read sets"),
                    crate::base::diag::FATAL_EXIT_STATUS,
                )
            }) as usize;
            *a = (m, m + size, (size * 2).min(ARENA_BYTES));
        }
        let p = a.0;
        a.0 += bytes;
        p as *mut u8
    })
}

/// Makes `n` sets of `class` from the arena ([`carve`]; never given back, see the module docs) and
/// links them into a list.
fn make(class: usize, n: usize) -> List {
    let blocks = n << class;
    // SAFETY: `carve` returns fresh zeroed memory for `blocks` blocks that nothing else
    // uses, 64-byte aligned, never unmapped (sets are type-stable: module docs).
    let batch: &'static mut [Block] =
        unsafe { core::slice::from_raw_parts_mut(carve(blocks).cast::<Block>(), blocks) };
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
        // A batch at a time: one lock of the arena for `n` sets.
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

/// In a set entry: the entry is a kept write, not a read (module docs, "Kept writes"). The
/// accessors of `clock` ignore the bit; no read word has it.
pub const WRITE_ENTRY: u64 = SHARED;

/// In a read word with [`SHARED`]: its set may hold write entries (a set is 64-byte aligned and
/// its class takes the low 4 bits, so bit 4 of its address is free).
const KEPT_WRITES: u64 = 1 << 4;

/// The set (pointer and class) of a read word with [`SHARED`].
fn set_of(r: u64) -> usize {
    (r & !(SHARED | KEPT_WRITES)) as usize
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
    let flags = cell.r.load(Relaxed) & KEPT_WRITES;
    cell.r.store(SHARED | flags | bigger as u64, Relaxed);
    release_set(r);
}

/// Keeps the write word `w` as a write entry of the cell's set (module docs, "Kept writes"),
/// making a set when the cell has none. The caller holds the cell's lock.
fn keep_write(cell: &Cell, w: u64) {
    let e = w | WRITE_ENTRY;
    let r = cell.r.load(Relaxed);
    if r & SHARED == 0 {
        let p = new_set(0);
        if r != 0 {
            put(p, r);
        }
        put(p, e);
        cell.r.store(SHARED | KEPT_WRITES | p as u64, Relaxed);
    } else {
        cell.r.store(r | KEPT_WRITES, Relaxed);
        insert(cell, set_of(r), e);
    }
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
    let mut race = race;
    let r = cell.r.load(Relaxed);
    if r & KEPT_WRITES != 0 && r & SHARED != 0 && race.is_none() {
        race = entries(set_of(r)).iter().find_map(|e| {
            let v = e.load(Relaxed);
            (v & WRITE_ENTRY != 0 && conflicts(v & !WRITE_ENTRY, acc, c)).then_some(Race {
                prev: v & !WRITE_ENTRY,
                prev_write: true,
            })
        });
        if race.is_some() {
            cell.w.fetch_or(CONTENDED, Relaxed);
        }
    }
    // A read replaces only reads (a kept write stays until a write covers its bytes).
    let replaces =
        |e: u64| e & WRITE_ENTRY == 0 && c.covers(e) && clock::mask(e) & !clock::mask(acc) == 0;
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
    // The last write's bytes this one leaves (module docs, "Kept writes"). The checks below
    // are the write's own bytes'; only the word stored may stand for both.
    let mut stored = acc;
    let mut displaced = 0;
    let left_of = |e: u64| clock::mask(e) & !clock::mask(acc);
    if w != 0 && left_of(w) != 0 {
        if clock::same_epoch(w, acc) && clock::site(w) == clock::site(acc) {
            stored = clock::with_mask(acc, clock::mask(w) | clock::mask(acc));
        } else {
            // Only the bytes this write leaves: for the others it is the last write now.
            displaced = clock::with_mask(w, left_of(w));
        }
    }
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
        let mut writes = 0;
        for e in entries(s) {
            let v = e.load(Relaxed);
            if v == 0 {
                continue;
            }
            let is_write = v & WRITE_ENTRY != 0;
            let v = v & !WRITE_ENTRY;
            if race.is_none() && conflicts(v, acc, c) {
                race = Some(Race {
                    prev: v,
                    prev_write: is_write,
                });
            }
            if covered(v) {
                e.store(0, Relaxed);
            } else {
                if is_write && clock::mask(v) & clock::mask(acc) != 0 {
                    // A kept write keeps only the bytes no later write covers (so a granule
                    // has at most one kept write per byte).
                    e.store(clock::with_mask(v, left_of(v)) | WRITE_ENTRY, Relaxed);
                }
                left += 1;
                writes += usize::from(is_write);
            }
        }
        if left == 0 && displaced != 0 {
            // The emptied set takes the displaced write at once (no release and new set).
            put(s, displaced | WRITE_ENTRY);
            cell.r.store(r | KEPT_WRITES, Relaxed);
            displaced = 0;
        } else if left == 0 {
            cell.r.store(0, Relaxed);
            release_set(s);
        } else if writes == 0 && r & KEPT_WRITES != 0 {
            cell.r.store(r & !KEPT_WRITES, Relaxed);
        }
    }
    if displaced != 0 {
        keep_write(cell, displaced);
    }
    let contended = if race.is_some() { CONTENDED } else { flag };
    cell.w.store(stored | contended, Relaxed);
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

    /// Thread `slot`'s clock at 1, knowing nobody else.
    fn alone(slot: usize) -> VClock {
        let mut c = VClock::new();
        c.set(slot, 1);
        c
    }

    #[test]
    fn a_write_of_other_bytes_keeps_the_last_write_of_the_rest() {
        // Thread 0 writes bytes 0-3 (site 1), then byte 4 (site 2) in the same epoch: a
        // read of bytes 0-3 by thread 1, unordered, races with the first write.
        let cell = Cell::default();
        let c0 = alone(0);
        assert!(write(&cell, clock::access(1, 0, 0x0f, 1), &c0).is_none());
        assert!(write(&cell, clock::access(1, 0, 0x10, 2), &c0).is_none());
        let race = read(&cell, clock::access(1, 1, 0x0f, 3), &alone(1)).expect("a race");
        assert!(race.prev_write);
        assert_eq!(clock::site(race.prev), 1);
        assert_eq!(clock::slot(race.prev), 0);
        assert_eq!(race.prev & WRITE_ENTRY, 0);
        // The read of byte 4 races with the second write; one of bytes 5-7 with nothing.
        let race = read(&cell, clock::access(1, 1, 0x10, 4), &alone(1)).expect("a race");
        assert_eq!(clock::site(race.prev), 2);
        assert!(read(&cell, clock::access(1, 1, 0x20, 5), &alone(1)).is_none());
        // A write of thread 1 over bytes 0-4 races with a write (the kept one or the last)
        // and drops the kept write: only reads are left in the set.
        let race = write(&cell, clock::access(1, 1, 0x1f, 6), &alone(1)).expect("a race");
        assert!(race.prev_write);
        let r = cell.r.load(Relaxed);
        assert_ne!(r & SHARED, 0);
        assert_eq!(r & KEPT_WRITES, 0);
        assert!(entries(set_of(r))
            .iter()
            .all(|e| e.load(Relaxed) & WRITE_ENTRY == 0));
    }

    #[test]
    fn writes_of_one_site_in_one_epoch_are_one_word_and_other_epochs_are_kept() {
        let cell = Cell::default();
        let c0 = alone(0);
        for b in 0..8 {
            assert!(write(&cell, clock::access(1, 0, 1 << b, 7), &c0).is_none());
        }
        assert_eq!(cell.r.load(Relaxed), 0, "no set for a filled granule");
        assert_eq!(clock::mask(cell.w.load(Relaxed)), 0xff);
        // Byte 0 again in a later epoch of thread 0, which thread 1 has seen the earlier
        // epoch of: its read of byte 1 is ordered after the byte's write, of byte 0 not.
        let mut c0 = c0;
        c0.set(0, 2);
        assert!(write(&cell, clock::access(2, 0, 0x01, 7), &c0).is_none());
        let mut c1 = alone(1);
        c1.set(0, 1);
        assert!(read(&cell, clock::access(1, 1, 0x02, 8), &c1).is_none());
        let race = read(&cell, clock::access(1, 1, 0x01, 9), &c1).expect("a race");
        assert_eq!(clock::clock(race.prev), 2);
    }

    #[test]
    fn kept_writes_keep_only_the_bytes_no_later_write_covers() {
        // Thread 0 fills the granule half by half at one site, epoch after epoch: each
        // epoch's two writes are one word of both halves, and the next epoch's first half
        // leaves only the second half of it to keep, which its second half then covers. (Kept
        // whole, one entry a round piled up: IRS's Dining Philosophers under `--race` took 2.8x
        // its time.)
        let cell = Cell::default();
        let mut c0 = VClock::new();
        for epoch in 1..200u32 {
            c0.set(0, epoch);
            assert!(write(&cell, clock::access(epoch, 0, 0x0f, 1), &c0).is_none());
            assert!(write(&cell, clock::access(epoch, 0, 0xf0, 1), &c0).is_none());
        }
        let r = cell.r.load(Relaxed);
        if r & SHARED != 0 {
            assert_eq!(set_of(r) & CLASS_MASK, 0, "the set never grew");
            assert!(entries(set_of(r)).iter().all(|e| e.load(Relaxed) == 0));
        }
        assert_eq!(clock::mask(cell.w.load(Relaxed)), 0xff);
        // Another thread's write of the first half then keeps the second half's last write:
        // a read of it by a third thread that knows neither races with thread 0's.
        assert!(write(&cell, clock::access(1, 1, 0x0f, 2), &alone(1)).is_some());
        let race = read(&cell, clock::access(1, 2, 0xf0, 3), &alone(2)).expect("a race");
        assert_eq!((clock::slot(race.prev), clock::mask(race.prev)), (0, 0xf0));
    }

    #[test]
    fn a_read_set_grows_past_eight_readers_and_keeps_every_read() {
        let cell = Cell::default();
        // Each thread's clock knows only itself: no read covers another.
        let clock_of = alone;
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
