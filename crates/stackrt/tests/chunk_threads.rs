//! The chunk runtime from real threads. Through the process-wide runtime's `extern "C"` entry
//! points: the program-defined chunk size symbol is honoured; concurrent walks (overflows
//! with reserves of all sizes, underflows, unlinking by compiled code with its reclaim budget
//! and reclaim calls) never hand one chunk to two threads; the budget word is refilled on
//! every runtime call; statistics add up across threads; after all exits every carved chunk
//! is back in the pool; and a thread that ends without `stackrt_chunk_thread_exit` (as after
//! `sthread_exit`) still gives its chunks back. On a private runtime: threads recursing deep
//! at once move chunks in batches, with far fewer pool lock operations than overflows.
//!
//! Only one `#[test]` uses the process-wide runtime: its counters are process-wide.

mod common;

use common::NativeStack;
use std::collections::HashSet;
use std::sync::{Arc, Barrier, Mutex};

use stackrt::base::program::program_chunk_size;
use stackrt::chunk::config::{DEFAULT_GROWTH_MAX_BYTES, DEFAULT_RECLAIM_BYTES};
use stackrt::chunk::{
    chunk_capacity, runtime, stackrt_chunk_current, stackrt_chunk_overflow, stackrt_chunk_reclaim,
    stackrt_chunk_size, stackrt_chunk_thread_enter, stackrt_chunk_thread_exit,
    stackrt_chunk_underflow, ChunkGeometry, ChunkHeader, Runtime, RuntimeConfig, ThreadChain,
    ALL_CLASSES, CHECK_SLACK, HEADER_SIZE, NUM_CLASSES, UNLINKED,
};

/// This program's chunk size, as a compiled C-- program would define it.
#[no_mangle]
pub static __cmm_chunk_size: u32 = 16384;

const CHUNK: usize = 16384;

/// The budget the process-wide runtime stores: `DEFAULT_RECLAIM_BYTES` of standard chunks.
const BUDGET: u32 = (DEFAULT_RECLAIM_BYTES / CHUNK) as u32;

/// The size of the chunk a reserve needs: the smallest `CHUNK << k` that holds it.
fn class_size(reserve: usize) -> usize {
    (0..NUM_CLASSES)
        .map(|k| CHUNK << k)
        .find(|&s| chunk_capacity(s) >= reserve)
        .unwrap()
}

/// The size growth gives a chunk linked for a checkpoint with `below` bytes of stack in use:
/// the largest `CHUNK << k` of at most twice that and at most the default growth limit,
/// `CHUNK` at least.
fn growth_size(below: usize) -> usize {
    let mut s = CHUNK;
    while 2 * s <= 2 * below && 2 * s <= DEFAULT_GROWTH_MAX_BYTES {
        s *= 2;
    }
    s
}

/// The budget word while the newest chunk has `size` bytes: `BUDGET` standard chunks' bytes
/// of such unlinks, at least one.
fn budget_for(size: usize) -> u32 {
    (BUDGET / (size / CHUNK) as u32).max(1)
}

/// Bytes of the chunk at `h` (header included).
fn size_of(h: *mut ChunkHeader) -> usize {
    // SAFETY: h is a linked chunk; reading its limit.
    h as usize + HEADER_SIZE - unsafe { (*h).limit }
}

/// Writes `tag` into every 97th word of a chunk's usable stack.
fn mark(h: *mut ChunkHeader, tag: u64) {
    // SAFETY: a linked chunk of the calling thread; its usable area is mapped and its own.
    unsafe {
        let limit = (*h).limit;
        for a in (limit..h as usize).step_by(8 * 97) {
            (a as *mut u64).write(tag);
        }
    }
}

fn verify(h: *mut ChunkHeader, tag: u64) {
    // SAFETY: as in `mark`.
    unsafe {
        let limit = (*h).limit;
        for a in (limit..h as usize).step_by(8 * 97) {
            let v = (a as *const u64).read();
            assert_eq!(v, tag, "chunk {h:?} was used by another");
        }
    }
}

/// What one walk did.
#[derive(Debug, Default)]
struct Walk {
    max_depth: usize,
    overflows: u64,
    reclaims: u64,
    /// Chunks still linked and running at the end (the first included).
    final_depth: usize,
}

/// One thread's walk through the entry points, and what the test knows of its chain: the
/// chunks, first first, each with its tag; `running` of them run, the rest at the top were
/// unlinked by "compiled code" and wait for the runtime's bookkeeping.
struct Walker {
    native: NativeStack,
    owner: u64,
    chain: Vec<(*mut ChunkHeader, u64)>,
    running: usize,
    tags: u64,
    w: Walk,
}

impl Walker {
    /// Boxed: the runtime keeps the address of `native` (the thread stack address).
    fn enter(owner: u64, need: usize) -> Box<Self> {
        let mut me = Box::new(Walker {
            native: NativeStack::new(0),
            owner,
            chain: Vec::new(),
            running: 0,
            tags: 0,
            w: Walk::default(),
        });
        let first = stackrt_chunk_thread_enter(me.native.addr(), need);
        assert_eq!(stackrt_chunk_current(), first);
        assert_eq!(me.native.budget(), BUDGET);
        // SAFETY: the first chunk is linked; reading its words.
        unsafe {
            assert_eq!(
                (*first).limit,
                first as usize + HEADER_SIZE - class_size(need)
            );
            assert_eq!((*first).thread_stack, me.native.addr());
        }
        me.chain.push((first, owner << 32));
        me.running = 1;
        mark(first, owner << 32);
        me
    }

    fn cur(&self) -> *mut ChunkHeader {
        self.chain[self.running - 1].0
    }

    /// Bytes of the chunks that run (the runtime's chain once it did the bookkeeping of the
    /// ones the code unlinked).
    fn bytes(&self) -> usize {
        self.chain[..self.running]
            .iter()
            .map(|&(h, _)| size_of(h))
            .sum()
    }

    /// Bytes of stack in use for a checkpoint at `sp` in the running chunk: every running
    /// chunk above the first from its header down to the SP its successor's checkpoint had,
    /// and the running chunk down to `sp`.
    fn used(&self, sp: usize) -> usize {
        self.chain[..self.running]
            .windows(2)
            // SAFETY: running chunks are linked; reading the successor's prev_sp.
            .map(|w| w[0].0 as usize - unsafe { (*w[1].0).prev_sp })
            .sum::<usize>()
            + (self.cur() as usize - sp)
    }

    /// The budget word after the runtime ran with the running chunks as its chain.
    fn budget(&self) -> u32 {
        if self.running < 2 {
            BUDGET
        } else {
            budget_for(size_of(self.cur()))
        }
    }

    /// An overflow `below` bytes under the running chunk's header (at least at its limit).
    fn overflow(&mut self, below: usize, reserve: usize, seen: &Mutex<HashSet<usize>>) {
        let cur = self.cur();
        // SAFETY: cur is a running chunk; reading its limit.
        let limit = unsafe { (*cur).limit };
        let sp = ((cur as usize - below) & !15).max(limit);
        // A reserve that fits the running chunk (a forced overflow) gets no growth.
        let grown = if sp >= limit + reserve + CHECK_SLACK {
            CHUNK
        } else {
            growth_size(self.used(sp))
        };
        let size = class_size(reserve).max(grown);
        let new = stackrt_chunk_overflow(cur, sp, reserve);
        // SAFETY: new is the header of a freshly linked chunk.
        unsafe {
            assert_eq!((*new).prev_header, cur);
            assert_eq!((*new).prev_sp, sp);
            assert_eq!((*new).thread_stack, self.native.addr());
            assert_eq!((*new).limit, new as usize + HEADER_SIZE - size);
        }
        assert_eq!(
            self.native.budget(),
            budget_for(size),
            "the overflow refills the budget"
        );
        seen.lock().unwrap().insert(new as usize);
        // The chunks the code unlinked above cur were unlinked first.
        self.chain.truncate(self.running);
        self.tags += 1;
        let tag = self.owner << 32 | self.tags;
        self.chain.push((new, tag));
        self.running += 1;
        mark(new, tag);
        self.w.overflows += 1;
        self.w.max_depth = self.w.max_depth.max(self.chain.len());
    }

    /// The underflow handler's call.
    fn underflow(&mut self) {
        let (cur, tag) = self.chain[self.running - 1];
        verify(cur, tag);
        // SAFETY: cur is linked; read prev_sp before the call as the handlers must.
        let prev_sp = unsafe { (*cur).prev_sp };
        let prev = stackrt_chunk_underflow(cur);
        self.running -= 1;
        self.chain.truncate(self.running);
        assert_eq!(prev, self.cur());
        assert!(prev_sp <= prev as usize);
        assert_eq!(
            self.native.budget(),
            self.budget(),
            "the underflow refills the budget"
        );
    }

    /// What emitted code does when a chunk's first frame returns: mark, decrement the budget
    /// word, and call the reclaim handler when it reaches zero.
    fn code_unlink(&mut self) {
        let (cur, tag) = self.chain[self.running - 1];
        verify(cur, tag);
        // SAFETY: cur is the chunk the code runs on: mark it as the emitted code does.
        unsafe { (*cur).thread_stack = UNLINKED };
        self.running -= 1;
        let b = self.native.budget() - 1;
        self.native.set_budget(b);
        if b == 0 {
            let back = self.cur();
            assert_eq!(stackrt_chunk_reclaim(back), back);
            self.chain.truncate(self.running);
            assert_eq!(
                self.native.budget(),
                self.budget(),
                "the reclaim refills the budget"
            );
            self.w.reclaims += 1;
        }
    }
}

/// A deterministic pseudo-random walk on the calling thread through the entry points:
/// overflows (reserves mostly within a standard chunk, some of larger classes), underflows
/// through the handler, unlinks by "compiled code", and now and then a burst deeper than the
/// reclaim budget that compiled code unwinds (so the budget runs out and the reclaim handler
/// is called).
fn walk(seed: u64, steps: usize, owner: u64, seen: &Mutex<HashSet<usize>>) -> Walk {
    let mut state = seed;
    let mut next = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) as usize
    };
    let need = if next() % 4 == 0 { 20000 } else { 100 };
    let mut t = Walker::enter(owner, need);
    for _ in 0..steps {
        let r = next();
        let (below, big) = ((r >> 6) % 4000, (r >> 6) % 40000);
        if r % 64 == 63 {
            // Deeper than the budget's bytes (the chunks grow on the way down).
            while t.bytes() < DEFAULT_RECLAIM_BYTES + 8 * CHUNK {
                t.overflow(below, 100, seen);
            }
            while t.running > 1 {
                t.code_unlink();
            }
        } else if r % 16 < 7 || t.running == 1 {
            let reserve = if r % 16 == 0 { big } else { (r >> 6) % 12000 };
            t.overflow(below, reserve, seen);
        } else if r % 16 < 12 {
            t.underflow();
        } else {
            t.code_unlink();
        }
        // The runtime's newest chunk may be one the code unlinked, not yet reclaimed.
        assert_eq!(stackrt_chunk_current(), t.chain.last().unwrap().0);
    }
    for &(h, tag) in &t.chain[..t.running] {
        verify(h, tag);
    }
    t.w.final_depth = t.running;
    std::mem::take(&mut t.w)
}

/// Resident and released chunks of each class in a runtime's pool, as bytes.
fn pool_bytes(rt: &Runtime) -> (usize, usize) {
    // Class k: the standard size halved `small_classes - k` times or doubled `k - small_classes`
    // times.
    let unit = rt.config().geometry.chunk_size >> rt.config().small_classes;
    (0..ALL_CLASSES).fold((0, 0), |(hot, cold), k| {
        let (h, c) = rt.pool_class_len(k);
        (hot + h * (unit << k), cold + c * (unit << k))
    })
}

/// With every thread gone, every carved chunk is back in the pool.
fn all_in_pool(rt: &Runtime) {
    let st = rt.stats().snapshot();
    let (hot, cold) = pool_bytes(rt);
    assert_eq!(rt.held_bytes(), 0, "bytes still held");
    assert_eq!(rt.pooled_resident_bytes(), hot);
    assert_eq!(
        hot + cold,
        rt.arena_usage().2,
        "carved bytes not in the pool"
    );
    assert_eq!(rt.pool_len() as u64, st.chunks_carved);
    assert_eq!((st.chunks_in_use, st.bytes_in_use), (0, 0));
}

#[test]
fn entry_points_from_many_threads() {
    std::env::set_var("STACKRT_STATS", "1");
    // As a `lookahead` program's start does: deep chains grow.
    stackrt::chunk::global::set_growth();
    assert_eq!(program_chunk_size(), Some(CHUNK));

    // Phase 1: eight threads walk concurrently, then exit explicitly (some with chunks the
    // code unlinked still pending: the exit does their bookkeeping).
    let seen = Arc::new(Mutex::new(HashSet::new()));
    let barrier = Arc::new(Barrier::new(8));
    let handles: Vec<_> = (0..8u64)
        .map(|i| {
            let seen = Arc::clone(&seen);
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                barrier.wait();
                let w = walk(i * 7919 + 1, 3000, i + 1, &seen);
                stackrt_chunk_thread_exit();
                assert!(stackrt_chunk_current().is_null());
                w
            })
        })
        .collect();
    let walks: Vec<Walk> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert!(
        walks.iter().all(|w| w.max_depth > 5 && w.reclaims > 0),
        "walks too shallow to test anything: {walks:?}"
    );
    assert_eq!(stackrt_chunk_size(), CHUNK);

    let rt = runtime().expect("initialised by the threads");
    assert_eq!(rt.config().geometry.chunk_size, CHUNK);
    assert_eq!(rt.config().reclaim_budget, BUDGET);
    assert!(rt.config().count_stats);
    let st = rt.stats().snapshot();
    assert_eq!((st.thread_enters, st.thread_exits), (8, 8));
    let overflows: u64 = walks.iter().map(|w| w.overflows).sum();
    assert_eq!(st.overflows, overflows);
    assert_eq!(st.reclaims, walks.iter().map(|w| w.reclaims).sum::<u64>());
    // Every chunk linked above a first chunk was unlinked by an underflow (the handler, a
    // reclaim, or the exit for chunks the code unlinked), except those still running at exit.
    let left: u64 = walks.iter().map(|w| w.final_depth as u64 - 1).sum();
    assert_eq!(st.underflows, overflows - left);
    // Each acquisition came from the thread's cache or from one refill (a pool batch, or a
    // carve of at least one chunk).
    let acquisitions = st.overflows + st.thread_enters;
    assert!(st.chunks_reused + st.pool_takes <= acquisitions);
    assert!(acquisitions <= st.chunks_reused + st.pool_takes + st.chunks_carved);
    assert!(st.peak_chunks_in_use >= walks.iter().map(|w| w.max_depth).max().unwrap() as u64);
    assert!(
        st.chunks_reused > st.chunks_carved,
        "caches not used: {st:?}"
    );
    assert!(seen.lock().unwrap().len() as u64 <= st.chunks_carved);
    // Batching: the pool's lock is taken far less often than chunks are linked.
    assert!(
        (st.pool_takes + st.pool_gives) * 4 <= st.overflows,
        "{} pool takes and {} gives for {} overflows",
        st.pool_takes,
        st.pool_gives,
        st.overflows
    );
    all_in_pool(rt);

    // Phase 2: a thread that ends without stackrt_chunk_thread_exit (sthread_exit's path).
    let before = rt.stats().snapshot();
    std::thread::spawn(|| {
        let native = NativeStack::new(0);
        let first = stackrt_chunk_thread_enter(native.addr(), 0);
        let a = stackrt_chunk_overflow(first, first as usize - 64, 100);
        let _b = stackrt_chunk_overflow(a, a as usize - 64, 100);
    })
    .join()
    .unwrap();
    let after = rt.stats().snapshot();
    assert_eq!(
        after.thread_exits,
        before.thread_exits + 1,
        "exit guard did not run"
    );
    all_in_pool(rt);
}

/// Four threads on one private runtime each recurse 300 chunks deep and back, five times:
/// "a deep recursion moves chunks in ever larger batches" (chain.rs), so the pool's lock is
/// taken far less often than chunks are linked. With caches from 4 up to 64 chunks and batches
/// of up to 64, a descent's refills bring 2, 2, 4, 8, 16, 32, 32, ... chunks: 14 lock
/// operations for 300 chunks; the unwinding gives back as much in about as few. About 1 lock
/// operation per 10 overflows; the test allows 1 in 6.
#[test]
fn deep_recursions_move_chunks_in_batches() {
    let geometry = ChunkGeometry::new(CHUNK, 0).unwrap();
    let mut cfg = RuntimeConfig::new(geometry, usize::MAX / 2, usize::MAX / 2);
    cfg.cache_min = 4;
    cfg.cache_max = 64;
    cfg.max_batch = 64;
    let rt = Arc::new(Runtime::new(cfg));
    let barrier = Arc::new(Barrier::new(4));
    let handles: Vec<_> = (0..4u64)
        .map(|i| {
            let rt = Arc::clone(&rt);
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                let chain = ThreadChain::new();
                barrier.wait();
                let first = chain.enter(&rt, 0x1000, 0).unwrap().as_ptr();
                for dive in 0..5u64 {
                    let mut hs = vec![first];
                    for d in 1..300u64 {
                        let cur = *hs.last().unwrap();
                        let h = chain.overflow(&rt, cur, cur as usize - 64, 0).unwrap();
                        mark(h.as_ptr(), (i + 1) << 32 | dive << 16 | d);
                        hs.push(h.as_ptr());
                    }
                    for d in (1..300u64).rev() {
                        let h = hs.pop().unwrap();
                        verify(h, (i + 1) << 32 | dive << 16 | d);
                        assert_eq!(chain.underflow(&rt, h).unwrap().as_ptr(), hs[hs.len() - 1]);
                    }
                }
                chain.exit(&rt).unwrap();
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let st = rt.stats().snapshot();
    assert_eq!((st.overflows, st.underflows), (4 * 5 * 299, 4 * 5 * 299));
    let lock_ops = st.pool_takes + st.pool_gives;
    eprintln!(
        "{} overflows, {} pool takes, {} gives, {} chunks carved",
        st.overflows, st.pool_takes, st.pool_gives, st.chunks_carved
    );
    assert!(
        lock_ops * 6 <= st.overflows,
        "{lock_ops} pool lock operations for {} overflows",
        st.overflows
    );
    all_in_pool(&rt);
}
