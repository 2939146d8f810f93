//! First-block sizes learned per thread entry function (`lookahead`): a green thread whose
//! stack outgrew its block tells the next threads of the same function to start bigger, as Go
//! sizes new goroutines' stacks from the stacks it has seen (`GODEBUG=adaptivestackstart`).
//!
//! The compiler's stack need of an entry function covers one level of each recursion (its
//! longest path up to the checkpoints on call-graph cycles), so a thread that recurses deeper
//! links a standard chunk: a page or more resident for a few hundred bytes of frames. The
//! worker records, when such a thread switches out (parks or yields), how many bytes of stack
//! it was using, and blocks of threads that start afterwards hold that much, a 64th more,
//! and the compiled need again (see [`block_need`]).
//! Blocks are packed in 64-byte steps, so a learned size costs what the threads touch.

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
/// its first chunk's top: `need` until a thread of `fp` outgrew its block; then the most such
/// a thread was seen to use, a 64th more, and `need` again on top, which covers the reserve
/// its next checkpoint tests for (it outgrew its block when a reserve did not fit, not when
/// its frames did).
pub fn block_need(fp: usize, need: usize) -> usize {
    match slot(fp, false).map_or(0, |s| s.need.load(Relaxed)) {
        0 => need,
        used => (used + used / 64).min(MAX_LEARNED) + need,
    }
}

/// A thread entering at `fp` was using `bytes` of stack below its first chunk's top while it
/// had outgrown its block.
pub fn learn(fp: usize, bytes: usize) {
    if let Some(s) = slot(fp, true) {
        s.need.fetch_max(bytes, Relaxed);
    }
}
