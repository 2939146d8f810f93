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
//! same-epoch check one entry's load, whatever the number of readers. Threads of slots beyond
//! [`HOME_SLOTS`] have no home: their reads take any free entry and are searched for.
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

use core::sync::atomic::Ordering::Relaxed;
use core::sync::atomic::{AtomicPtr, AtomicU64};

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

/// Reads of a cell by threads whose reads are not ordered: up to 7 access words (0: free),
/// then a further block. 64 bytes.
#[repr(C, align(64))]
pub struct ReadSet {
    entries: [AtomicU64; 7],
    next: AtomicPtr<ReadSet>,
}

/// Released read sets, linked through `next`: the process's pool, behind a lock that each OS
/// thread takes once per [`BATCH`] sets ([`LOCAL`]).
static POOL: SpinLock<usize> = SpinLock::new(0);
const BATCH: usize = 64;

/// A list of released sets linked through `next`: its first and last set and its length.
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
    /// The sets this OS thread took from [`POOL`] or released, so that a cell's reads going
    /// shared and its memory being freed take no shared lock (threads reading the same data
    /// make and release sets on every core at once). At most `4 * BATCH` long; a thread's
    /// end gives it back ([`return_local_sets`]).
    static LOCAL: core::cell::Cell<List> = const { core::cell::Cell::new(EMPTY) };
}

/// The next set of a pool list.
fn next_of(s: usize) -> usize {
    // SAFETY: pool entries are leaked, never freed, ReadSets.
    unsafe { (*(s as *mut ReadSet)).next.load(Relaxed) as usize }
}

/// Takes up to [`BATCH`] sets from the process's pool, making a new batch when it is empty.
fn refill() -> List {
    let taken = POOL.with(|head| {
        let mut l = EMPTY;
        while *head != 0 && l.len < BATCH {
            let s = *head;
            *head = next_of(s);
            if l.head == 0 {
                l.head = s;
            } else {
                // SAFETY: `l.tail` is a set of this list.
                unsafe {
                    (*(l.tail as *mut ReadSet))
                        .next
                        .store(s as *mut ReadSet, Relaxed)
                };
            }
            l.tail = s;
            l.len += 1;
        }
        l
    });
    if taken.len > 0 {
        // SAFETY: the last set of the list taken.
        unsafe {
            (*(taken.tail as *mut ReadSet))
                .next
                .store(core::ptr::null_mut(), Relaxed)
        };
        return taken;
    }
    // A batch leaked on purpose: sets are never given back to the allocator (see the module
    // docs).
    let batch: &'static mut [ReadSet] = Box::leak(
        (0..BATCH)
            .map(|_| ReadSet {
                entries: Default::default(),
                next: AtomicPtr::new(core::ptr::null_mut()),
            })
            .collect(),
    );
    let mut l = EMPTY;
    for s in batch.iter_mut().rev() {
        s.next.store(l.head as *mut ReadSet, Relaxed);
        if l.tail == 0 {
            l.tail = s as *mut ReadSet as usize;
        }
        l.head = s as *mut ReadSet as usize;
        l.len += 1;
    }
    l
}

fn new_set() -> &'static ReadSet {
    let mut l = LOCAL.get();
    if l.head == 0 {
        l = refill();
    }
    let p = l.head as *mut ReadSet;
    l.head = next_of(l.head);
    l.len -= 1;
    if l.head == 0 {
        l.tail = 0;
    }
    LOCAL.set(l);
    // SAFETY: a leaked ReadSet, now the caller's alone.
    let s = unsafe { &*p };
    s.next.store(core::ptr::null_mut(), Relaxed);
    for e in &s.entries {
        e.store(0, Relaxed);
    }
    s
}

/// Gives a set and its further blocks back to the pool.
fn release_set(mut s: *mut ReadSet) {
    let mut l = LOCAL.get();
    while !s.is_null() {
        // SAFETY: sets are leaked ReadSets; this chain was the releasing cell's.
        let next = unsafe { (*s).next.load(Relaxed) };
        // SAFETY: as above.
        unsafe { (*s).next.store(l.head as *mut ReadSet, Relaxed) };
        if l.tail == 0 {
            l.tail = s as usize;
        }
        l.head = s as usize;
        l.len += 1;
        s = next;
    }
    if l.len > 4 * BATCH {
        give_back(l);
        l = EMPTY;
    }
    LOCAL.set(l);
}

/// Puts the list `l` in front of the process's pool.
fn give_back(l: List) {
    if l.len == 0 {
        return;
    }
    POOL.with(|head| {
        // SAFETY: `l.tail` is the last set of the list.
        unsafe {
            (*(l.tail as *mut ReadSet))
                .next
                .store(*head as *mut ReadSet, Relaxed)
        };
        *head = l.head;
    });
}

/// Gives the calling OS thread's released sets back to the process (its thread ends).
pub fn return_local_sets() {
    let l = LOCAL.replace(EMPTY);
    give_back(l);
}

fn set_of(r: u64) -> *mut ReadSet {
    (r & !SHARED) as usize as *mut ReadSet
}

/// Calls `f` on every entry word of the set chain starting at `s`.
fn for_entries(s: *mut ReadSet, mut f: impl FnMut(&AtomicU64)) {
    let mut s = s;
    while !s.is_null() {
        // SAFETY: sets are leaked ReadSets (type-stable).
        let set = unsafe { &*s };
        for e in &set.entries {
            f(e);
        }
        s = set.next.load(Relaxed);
    }
}

/// Thread slots below this have a home (the first four blocks of a set): a set grows to its
/// readers' home blocks, and a home further down would cost a cell read by a few threads of
/// high slots a long chain. Threads of higher slots take any free entry, as sets did before
/// homes.
const HOME_SLOTS: usize = 28;

/// The *home* of `acc`'s thread in the chain at `s`: entry `slot % 7` of block `slot / 7`,
/// where its reads go when the entry is free (a read vector clock's layout, FastTrack's, for
/// the common case), so that its same-epoch check loads one entry ([`read_is_redundant`]).
/// `None` if its slot has no home ([`HOME_SLOTS`]), `Some(None)` if the chain is shorter.
#[inline(always)]
fn home(s: *mut ReadSet, acc: u64) -> Option<Option<&'static AtomicU64>> {
    let slot = clock::slot(acc);
    if slot >= HOME_SLOTS {
        return None;
    }
    let mut s = s;
    for _ in 0..slot / 7 {
        // SAFETY: sets are leaked ReadSets (type-stable).
        s = unsafe { (*s).next.load(Relaxed) };
        if s.is_null() {
            return Some(None);
        }
    }
    // SAFETY: as above.
    Some(Some(unsafe { &(*s).entries[slot % 7] }))
}

/// [`home`], adding empty blocks to reach it; `None` if its slot has no home. The caller holds
/// the cell's lock.
fn home_or_grow(s: *mut ReadSet, acc: u64) -> Option<&'static AtomicU64> {
    let slot = clock::slot(acc);
    if slot >= HOME_SLOTS {
        return None;
    }
    let mut s = s;
    for _ in 0..slot / 7 {
        // SAFETY: sets are leaked ReadSets (type-stable); the chain is the locked cell's.
        let set = unsafe { &*s };
        let mut next = set.next.load(Relaxed);
        if next.is_null() {
            next = new_set() as *const ReadSet as *mut ReadSet;
            set.next.store(next, Relaxed);
        }
        s = next;
    }
    // SAFETY: as above.
    Some(unsafe { &(*s).entries[slot % 7] })
}

/// Puts `acc` into its home in the chain at `s` if free, else the first free entry, adding a
/// block if all are used. The caller holds the cell's lock.
fn insert(s: *mut ReadSet, acc: u64) {
    if let Some(h) = home_or_grow(s, acc) {
        if h.load(Relaxed) == 0 {
            h.store(acc, Relaxed);
            return;
        }
    }
    let mut s = s;
    loop {
        // SAFETY: sets are leaked ReadSets (type-stable).
        let set = unsafe { &*s };
        if let Some(e) = set.entries.iter().find(|e| e.load(Relaxed) == 0) {
            e.store(acc, Relaxed);
            return;
        }
        let next = set.next.load(Relaxed);
        if next.is_null() {
            let fresh = new_set();
            fresh.entries[0].store(acc, Relaxed);
            set.next
                .store(fresh as *const ReadSet as *mut ReadSet, Relaxed);
            return;
        }
        s = next;
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
    let mut s = set_of(r);
    // A thread's reads go home whenever home is free or its own ([`read`], [`insert`]), so
    // only a home taken by another thread sends them elsewhere. ("Not redundant" is always
    // safe: [`read`] then finds what a search here would.)
    match home(s, acc) {
        // Its home block does not exist: it never read here.
        Some(None) => return false,
        Some(Some(h)) => {
            let h = h.load(Relaxed);
            if h == 0 || clock::slot(h) == clock::slot(acc) {
                return same_epoch_covering(h, acc);
            }
        }
        None => {}
    }
    while !s.is_null() {
        // SAFETY: as above.
        let set = unsafe { &*s };
        if set
            .entries
            .iter()
            .any(|e| same_epoch_covering(e.load(Relaxed), acc))
        {
            return true;
        }
        s = set.next.load(Relaxed);
    }
    false
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
            let p = new_set() as *const ReadSet as *mut ReadSet;
            insert(p, r);
            insert(p, acc);
            cell.r.store(SHARED | p as usize as u64, Relaxed);
        }
    } else {
        let s = set_of(r);
        if let Some(h) = home_or_grow(s, acc) {
            let v = h.load(Relaxed);
            if v != 0 && same_epoch_covering(v, acc) {
                return race;
            }
            if v == 0 || (clock::slot(v) == clock::slot(acc) && replaces(v)) {
                // Its home entry is free or holds an earlier read of its own thread of no
                // other bytes: the read goes there, leaving the other entries alone (module
                // docs, "Kept reads").
                h.store(acc, Relaxed);
                return race;
            }
        }
        let mut known = false;
        for_entries(s, |e| {
            let v = e.load(Relaxed);
            known = known || same_epoch_covering(v, acc);
        });
        if !known {
            for_entries(s, |e| {
                let v = e.load(Relaxed);
                if v != 0 && replaces(v) {
                    e.store(0, Relaxed);
                }
            });
            insert(s, acc);
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
        for_entries(s, |e| {
            let v = e.load(Relaxed);
            if v == 0 {
                return;
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
        });
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
