//! First-block sizes learned per thread entry function (`lookahead`): a green thread that
//! outgrew its block tells the next threads of the same function to start bigger, as Go
//! sizes new goroutines' stacks from the stacks it has seen (`GODEBUG=adaptivestackstart`).
//!
//! A block starts at the entry function's compiled stack need: its path up to its first
//! checkpoints, which under green threads the compiler keeps small (`cmm-codegen`'s
//! `green_root_bound`: the calls into a recursion or a large frame are checkpoints at the
//! entry), so that a thread holds what it touches, not the longest path its function could
//! take. A thread that goes further links a standard chunk (a page or more resident for a few
//! hundred bytes of frames), and two measurements size the next blocks of its function:
//! - the chunk runtime's hook ([`crate::chunk::first_block`]): the bytes below the block's top
//!   that the checkpoint which did not fit needed (its stack in use plus its reserve), so that
//!   the next blocks pass it;
//! - the worker, whenever an outgrown thread parks or yields: the bytes of stack it is using
//!   (a thread parks where its deepest frames are, usually).
//!
//! The largest of each, over all threads of the function, is the next blocks' need
//! ([`block_need`]). A new function converges in a few generations of threads (each one's
//! overflow teaches the next a deeper checkpoint), and blocks are packed in 16-byte steps, so
//! a learned size costs what the threads touch. The deterministic mode learns nothing: its
//! decisions are the checkpoints that enter the runtime, and a recursion whose threads
//! learned to fit in their blocks would make none.

use core::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// Entry functions remembered; more distinct ones than this keep their compiled need.
const SLOTS: usize = 256;

/// The largest learned need: deeper threads link chunks (which grow geometrically) instead of
/// starting with a block this big (256 KiB: 5,000 levels of 48-byte frames).
pub const MAX_LEARNED: usize = 256 << 10;

struct Slot {
    fp: AtomicUsize,
    need: AtomicUsize,
}

static TABLE: [Slot; SLOTS] = [const {
    Slot {
        fp: AtomicUsize::new(0),
        need: AtomicUsize::new(0),
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
/// its first chunk's top: `need`, or what threads of `fp` were seen to need if that is more
/// (at most [`MAX_LEARNED`]).
pub fn block_need(fp: usize, need: usize) -> usize {
    let learned = slot(fp, false).map_or(0, |s| s.need.load(Relaxed));
    learned.min(MAX_LEARNED).max(need)
}

/// A thread entering at `fp` was using `bytes` of stack below its first chunk's top while it
/// had outgrown its block. No margin: a thread of `fp` that goes deeper overflows once and
/// teaches the next ones through [`learn_need`] (a 64th more cost 43 bytes a thread at
/// 2.8 KiB, 1.5% of a million threads' memory).
pub fn learn(fp: usize, bytes: usize) {
    learn_need(fp, bytes);
}

/// A checkpoint of a thread entering at `fp` needed `bytes` below its first chunk's top and
/// did not fit in its block.
pub fn learn_need(fp: usize, bytes: usize) {
    if let Some(s) = slot(fp, true) {
        s.need.fetch_max(bytes, Relaxed);
    }
}
