//! First-block sizes learned per thread entry function (`lookahead`): threads that outgrew
//! their blocks tell the next threads of the same function to start bigger, as Go sizes new
//! goroutines' stacks from the stacks it has seen (`GODEBUG=adaptivestackstart`), but only
//! as big as most of them need.
//!
//! A block starts at the entry function's compiled stack need: its path up to its first
//! checkpoints, which under green threads the compiler keeps small (`cmm-codegen`'s
//! `green_root_bound`: the calls into a recursion or a large frame are checkpoints at the
//! entry), so that a thread holds what it touches, not the longest path its function could
//! take. A thread that goes further links chunks of the small classes, 512 bytes and doubling
//! (the chunk layer's chain docs, "Small classes"), so it holds at most about twice what it
//! touches; a block that fits holds exactly that. Two measurements say what threads needed:
//! - the chunk runtime's hook ([`crate::chunk::first_block`]), once per outgrown thread: the
//!   bytes below the block's top that the checkpoint which did not fit needed (its stack in
//!   use plus its reserve);
//! - the worker, whenever an outgrown thread parks or yields: the bytes of stack it is using
//!   (a thread parks where its deepest frames are, usually).
//!
//! The next blocks of a function are sized once per window of [`WINDOW`] threads started: if
//! a fraction `f` of them outgrew their blocks (at least an eighth), the new need is the
//! smallest that leaves at most an eighth of all threads outgrowing it, i.e. the
//! `1 - 1/(8f)` quantile of the measurements (kept in power-of-two buckets with each
//! bucket's largest value, which is the one taken). So threads of one shape converge in a
//! window or two (every thread outgrows, the quantile is their depth), and a few deep
//! threads among many shallow ones (one in a hundred a thousand levels deep) do not make
//! every block deep: they link chunks instead. Sizes only grow: threads that fit report
//! nothing. A thread that yields many times while outgrown is measured many times (each
//! measurement counts); the outgrown fraction counts threads. The deterministic mode learns
//! nothing: its decisions are the checkpoints that enter the runtime, and a recursion whose
//! threads learned to fit in their blocks would make none.

use core::sync::atomic::{AtomicU32, AtomicUsize, Ordering::Relaxed};

/// Entry functions remembered; more distinct ones than this keep their compiled need.
const SLOTS: usize = 256;

/// Threads started per sizing decision.
pub const WINDOW: u32 = 32;

/// The largest learned need: deeper threads link chunks (which grow geometrically) instead of
/// starting with a block this big (256 KiB: 5,000 levels of 48-byte frames).
pub const MAX_LEARNED: usize = 256 << 10;

/// Buckets of measurements: bucket `b` holds values of `2^b` up to `2^(b+1) - 1` bytes
/// (bucket 0 everything below 2); values over [`MAX_LEARNED`] count as `MAX_LEARNED`.
const BUCKETS: usize = MAX_LEARNED.ilog2() as usize + 1;

struct Slot {
    fp: AtomicUsize,
    need: AtomicUsize,
    /// Threads started and threads outgrown in the current window.
    started: AtomicU32,
    outgrown: AtomicU32,
    /// Measurements of the current window per bucket, and each bucket's largest.
    counts: [AtomicU32; BUCKETS],
    largest: [AtomicUsize; BUCKETS],
}

static TABLE: [Slot; SLOTS] = [const {
    Slot {
        fp: AtomicUsize::new(0),
        need: AtomicUsize::new(0),
        started: AtomicU32::new(0),
        outgrown: AtomicU32::new(0),
        counts: [const { AtomicU32::new(0) }; BUCKETS],
        largest: [const { AtomicUsize::new(0) }; BUCKETS],
    }
}; SLOTS];

fn slot(fp: usize, insert: bool) -> Option<&'static Slot> {
    let start = (fp >> 4).wrapping_mul(0x9e37_79b9) % SLOTS;
    for i in 0..SLOTS {
        let s = &TABLE[(start + i) % SLOTS];
        let k = s.fp.load(Relaxed);
        if k == fp {
            return Some(s);
        }
        if k == 0 {
            if !insert {
                return None;
            }
            match s.fp.compare_exchange(0, fp, Relaxed, Relaxed) {
                Ok(_) => return Some(s),
                Err(k) if k == fp => return Some(s),
                Err(_) => continue,
            }
        }
    }
    None
}

/// The bytes a new thread entering at `fp`, whose compiled stack need is `need`, gets below
/// its first chunk's top: `need`, or what most threads of `fp` were seen to need if that is
/// more. Counts the thread as started, and sizes the next window's blocks when this one is
/// full.
pub fn block_need(fp: usize, need: usize) -> usize {
    let Some(s) = slot(fp, false) else {
        return need;
    };
    if s.started.fetch_add(1, Relaxed) + 1 == WINDOW {
        decide(s);
    }
    s.need.load(Relaxed).max(need)
}

/// The end of a window: the new need from its measurements (module docs), and a fresh window.
fn decide(s: &Slot) {
    let started = s.started.swap(0, Relaxed).max(1) as u64;
    let outgrown = s.outgrown.swap(0, Relaxed) as u64;
    let counts: [u64; BUCKETS] = core::array::from_fn(|b| s.counts[b].swap(0, Relaxed) as u64);
    let largest: [usize; BUCKETS] = core::array::from_fn(|b| s.largest[b].swap(0, Relaxed));
    let measured: u64 = counts.iter().sum();
    if let Some(need) = quantile_need(started, outgrown, measured, &counts, &largest) {
        s.need.fetch_max(need, Relaxed);
    }
}

/// The need that leaves at most an eighth of `started` threads outgrowing it, given that
/// `outgrown` of them did and `counts`/`largest` of their `measured` measurements; None when
/// fewer than an eighth outgrew (or nothing was measured).
fn quantile_need(
    started: u64,
    outgrown: u64,
    measured: u64,
    counts: &[u64; BUCKETS],
    largest: &[usize; BUCKETS],
) -> Option<usize> {
    if measured == 0 || outgrown * 8 < started {
        return None;
    }
    // Measurements that may stay above the need: the share of all threads that may outgrow
    // it (an eighth), among those that did.
    let allowed = measured * started / (8 * outgrown.max(1));
    let mut above = 0;
    for b in (0..BUCKETS).rev() {
        above += counts[b];
        if above > allowed {
            return Some(largest[b]);
        }
    }
    None
}

/// Records one measurement of `bytes` for `fp`.
fn measure(s: &Slot, bytes: usize) {
    let v = bytes.clamp(1, MAX_LEARNED);
    let b = v.ilog2() as usize;
    s.counts[b].fetch_add(1, Relaxed);
    s.largest[b].fetch_max(v, Relaxed);
}

/// A thread entering at `fp` was using `bytes` of stack below its first chunk's top while it
/// had outgrown its block (parked or yielding).
pub fn learn(fp: usize, bytes: usize) {
    if let Some(s) = slot(fp, true) {
        measure(s, bytes);
    }
}

/// A checkpoint of a thread entering at `fp` needed `bytes` below its first chunk's top and
/// did not fit in its block: the thread outgrew it (once per thread).
pub fn learn_need(fp: usize, bytes: usize) {
    if let Some(s) = slot(fp, true) {
        s.outgrown.fetch_add(1, Relaxed);
        measure(s, bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(values: &[(usize, u64)]) -> ([u64; BUCKETS], [usize; BUCKETS], u64) {
        let mut counts = [0u64; BUCKETS];
        let mut largest = [0usize; BUCKETS];
        for &(v, n) in values {
            let b = v.ilog2() as usize;
            counts[b] += n;
            largest[b] = largest[b].max(v);
        }
        (counts, largest, values.iter().map(|v| v.1).sum())
    }

    /// Hand-checked windows of 32 threads.
    #[test]
    fn sizes_cover_all_but_an_eighth() {
        // Every thread outgrew at about 4.8 KB: one bucket (4 to 8 KiB) holds them all, and
        // its largest, 4800, is the need.
        let (c, l, m) = window(&[(4700, 28), (4800, 4)]);
        assert_eq!(quantile_need(32, 32, m, &c, &l), Some(4800));
        // One in 32 is 48 KB deep, one in 32 outgrew at all: below an eighth, no change.
        let (c, l, m) = window(&[(48_000, 1)]);
        assert_eq!(quantile_need(32, 1, m, &c, &l), None);
        // A quarter outgrew: 6 threads at 1 KB, 2 at 48 KB. An eighth of 32 is 4 threads;
        // among the 8 outgrown, 4 may stay above: the need is 1 KB's bucket's largest.
        let (c, l, m) = window(&[(1000, 6), (48_000, 2)]);
        assert_eq!(quantile_need(32, 8, m, &c, &l), Some(1000));
        // Half outgrew to 2 KB, a quarter to 48 KB: 4 threads may stay above the need, 8 would
        // stay above 2 KB, so the need is the 48 KB bucket's.
        let (c, l, m) = window(&[(2000, 16), (48_000, 8)]);
        assert_eq!(quantile_need(32, 24, m, &c, &l), Some(48_000));
        // Nothing measured (threads outgrew but never parked, and the hook did not run).
        assert_eq!(quantile_need(32, 32, 0, &[0; BUCKETS], &[0; BUCKETS]), None);
    }
}
