//! The happens-before check of one access against one shadow word (FastTrack, Flanagan and
//! Freund, PLDI 2009), with byte masks so that threads writing different bytes of one 4-byte
//! word (neighbouring `char`s) do not race.
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
//! same-epoch fast paths ([`read_is_redundant`], [`write_is_redundant`]) only load.

use core::sync::atomic::AtomicU64;
use core::sync::atomic::Ordering::Relaxed;

use super::clock::{self, VClock, SHARED};

/// The shadow of one 4-byte word: the last write and the last read (or a set of reads).
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

fn conflicts(prev: u64, acc: u64, c: &VClock) -> bool {
    prev != 0
        && clock::slot(prev) != clock::slot(acc)
        && clock::mask(prev) & clock::mask(acc) != 0
        && !c.covers(prev)
}

/// The reads of a cell in set mode.
fn read_set(r: u64) -> *mut Vec<u64> {
    (r & !SHARED) as usize as *mut Vec<u64>
}

/// Whether a read `acc` adds nothing: the same thread read the same bytes in the same epoch.
#[inline]
pub fn read_is_redundant(cell: &Cell, acc: u64) -> bool {
    let r = cell.r.load(Relaxed);
    r & SHARED == 0 && clock::epoch_and_mask(r) == clock::epoch_and_mask(acc)
}

/// Whether a write `acc` adds nothing: the same thread wrote the same bytes in the same epoch
/// and no read came since (a read since could be another thread's, to be checked).
#[inline]
pub fn write_is_redundant(cell: &Cell, acc: u64) -> bool {
    let w = cell.w.load(Relaxed);
    clock::epoch_and_mask(w) == clock::epoch_and_mask(acc) && cell.r.load(Relaxed) == 0
}

/// A read `acc` by a thread with clock `c`. The caller holds the cell's lock.
pub fn read(cell: &Cell, acc: u64, c: &VClock) -> Option<Race> {
    let w = cell.w.load(Relaxed);
    let race = conflicts(w, acc, c).then_some(Race {
        prev: w,
        prev_write: true,
    });
    let r = cell.r.load(Relaxed);
    if r == 0 {
        cell.r.store(acc, Relaxed);
    } else if r & SHARED == 0 {
        let same_epoch = clock::epoch_and_mask(clock::with_mask(r, 0))
            == clock::epoch_and_mask(clock::with_mask(acc, 0));
        if same_epoch && clock::mask(acc) & !clock::mask(r) == 0 {
            // One thread, one epoch, no new bytes: the kept read stands for this one (a read
            // is ordered like every other of its thread's epoch). Its site stays, since a
            // report must name an access that touched the racing byte.
        } else if c.covers(r) && clock::mask(r) & !clock::mask(acc) == 0 {
            cell.r.store(acc, Relaxed);
        } else {
            let set = Box::new(vec![r, acc]);
            cell.r
                .store(SHARED | Box::into_raw(set) as usize as u64, Relaxed);
        }
    } else {
        // SAFETY: a SHARED read word holds a live `Box<Vec<u64>>` owned by the cell, changed
        // only under the cell's lock, which the caller holds.
        let set = unsafe { &mut *read_set(r) };
        let key = clock::epoch_and_mask(clock::with_mask(acc, 0));
        let known = set.iter().any(|&e| {
            clock::epoch_and_mask(clock::with_mask(e, 0)) == key
                && clock::mask(acc) & !clock::mask(e) == 0
        });
        // Read-shared data read again by a thread in the same epoch (FastTrack's most common
        // shared case) changes nothing.
        if !known {
            set.retain(|&e| !(c.covers(e) && clock::mask(e) & !clock::mask(acc) == 0));
            set.push(acc);
        }
    }
    race
}

/// A write `acc` by a thread with clock `c`. The caller holds the cell's lock.
pub fn write(cell: &Cell, acc: u64, c: &VClock) -> Option<Race> {
    let w = cell.w.load(Relaxed);
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
        // SAFETY: as in `read`: the set is the cell's, under the lock the caller holds.
        let set = unsafe { &mut *read_set(r) };
        if race.is_none() {
            race = set.iter().find(|&&e| conflicts(e, acc, c)).map(|&e| Race {
                prev: e,
                prev_write: false,
            });
        }
        set.retain(|&e| !covered(e));
        if set.is_empty() {
            cell.r.store(0, Relaxed);
            // SAFETY: the set was the cell's own box; the word no longer refers to it.
            drop(unsafe { Box::from_raw(read_set(r)) });
        }
    }
    cell.w.store(acc, Relaxed);
    race
}

/// Forgets every access to the cell (its memory was freed or is allocated anew). The caller
/// holds the cell's lock or owns the memory exclusively.
pub fn reset(cell: &Cell) {
    let r = cell.r.swap(0, Relaxed);
    if r & SHARED != 0 {
        // SAFETY: the set was the cell's own box; the word no longer refers to it.
        drop(unsafe { Box::from_raw(read_set(r)) });
    }
    cell.w.store(0, Relaxed);
}
