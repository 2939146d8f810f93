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
//!   of the bytes; the read replaces a read it covers (bytes included), else joins the set.
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
//! The caller holds the cell's lock (`shadow::lock_for`) for [`read`] and [`write`]; the
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

/// Released read sets, linked through `next`.
static POOL: SpinLock<usize> = SpinLock::new(0);
const BATCH: usize = 256;

fn new_set() -> &'static ReadSet {
    let p = POOL.with(|head| {
        if *head == 0 {
            // A batch leaked on purpose: sets are never given back to the allocator (see the
            // module docs).
            let batch: &'static mut [ReadSet] = Box::leak(
                (0..BATCH)
                    .map(|_| ReadSet {
                        entries: Default::default(),
                        next: AtomicPtr::new(core::ptr::null_mut()),
                    })
                    .collect(),
            );
            for s in batch.iter_mut() {
                s.next.store(*head as *mut ReadSet, Relaxed);
                *head = s as *mut ReadSet as usize;
            }
        }
        let s = *head as *mut ReadSet;
        // SAFETY: pool entries are leaked, never freed, ReadSets.
        *head = unsafe { (*s).next.load(Relaxed) } as usize;
        s
    });
    // SAFETY: as above; the set is now the caller's alone.
    let s = unsafe { &*p };
    s.next.store(core::ptr::null_mut(), Relaxed);
    for e in &s.entries {
        e.store(0, Relaxed);
    }
    s
}

/// Gives a set and its further blocks back to the pool.
fn release_set(mut s: *mut ReadSet) {
    while !s.is_null() {
        // SAFETY: sets are leaked ReadSets; this chain was the releasing cell's.
        let next = unsafe { (*s).next.load(Relaxed) };
        POOL.with(|head| {
            // SAFETY: as above.
            unsafe { (*s).next.store(*head as *mut ReadSet, Relaxed) };
            *head = s as usize;
        });
        s = next;
    }
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

/// Puts `acc` into the first free entry of the chain at `s`, adding a block if all are used.
/// The caller holds the cell's lock.
fn insert(s: *mut ReadSet, acc: u64) {
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
fn same_epoch_covering(e: u64, acc: u64) -> bool {
    e != 0
        && clock::clock(e) == clock::clock(acc)
        && clock::slot(e) == clock::slot(acc)
        && clock::mask(acc) & !clock::mask(e) == 0
}

/// Whether a read `acc` adds nothing: the same thread read the same bytes in the same epoch
/// (the last read, or one in the read set). Loads only.
#[inline]
pub fn read_is_redundant(cell: &Cell, acc: u64) -> bool {
    let r = cell.r.load(Relaxed);
    if r & SHARED == 0 {
        return r != 0 && same_epoch_covering(r, acc);
    }
    let mut s = set_of(r);
    while !s.is_null() {
        // SAFETY: sets are leaked ReadSets (type-stable), whichever cell has them now.
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
#[inline]
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
            let set = new_set();
            set.entries[0].store(r, Relaxed);
            set.entries[1].store(acc, Relaxed);
            cell.r
                .store(SHARED | set as *const ReadSet as usize as u64, Relaxed);
        }
    } else {
        let s = set_of(r);
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
/// holds the cell's lock.
pub fn reset(cell: &Cell) {
    let r = cell.r.swap(0, Relaxed);
    if r & SHARED != 0 {
        release_set(set_of(r));
    }
    cell.w.store(0, Relaxed);
}
