//! The shared half of the chunk runtime: a [`Runtime`] (geometry and limits, the arenas, the
//! shared pool per size class, the memory-pressure and release-policy state, the statistics)
//! and its accessors. Its operations live beside it by concern: [`super::supply`] (where chunks
//! come from), [`super::pressure`] (growth tokens and waits), [`super::release`] (giving memory
//! back); a thread's side is [`super::chain`].

use core::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering::Relaxed};

use super::arena::Arenas;
use super::config::{RuntimeConfig, ALL_CLASSES};
use super::header::ChunkHeader;
use super::pool::{BatchStack, FreeList};
use super::stats::Stats;
use crate::base::os::page_size;
use crate::base::spin::SpinLock;

/// The pool of one size class: batches of resident free chunks, and free chunks whose pages
/// were given back to the system (or never touched: an arena's spill).
pub(super) struct ClassPool {
    pub(super) hot: BatchStack,
    pub(super) cold: FreeList,
}

impl ClassPool {
    const fn new() -> Self {
        ClassPool {
            hot: BatchStack::new(),
            cold: FreeList::new(),
        }
    }
}

/// Geometry, limits, arenas, the shared pool, the release policy and the statistics. `Sync`:
/// shared by all threads.
pub struct Runtime {
    pub(super) config: RuntimeConfig,
    pub(super) pools: [SpinLock<ClassPool>; ALL_CLASSES],
    pub(super) arenas: SpinLock<Arenas>,
    pub(super) stats: Stats,
    /// Bytes of chunks outside the pool (in chains and caches).
    pub(super) held: AtomicUsize,
    /// Bytes of resident chunks in the pool.
    pub(super) pooled_hot: AtomicUsize,
    /// Largest `held` in the current window and the previous one; start of the current one.
    pub(super) peak_now: AtomicUsize,
    pub(super) peak_before: AtomicUsize,
    pub(super) window_start: AtomicU64,
    pub(super) next_thread: AtomicU32,
    pub(super) page: usize,
    /// Incremented at every give to the pool: the futex word growth waits sleep on.
    pub(super) gives: AtomicU32,
    /// Threads in a growth wait.
    pub(super) waiters: AtomicU32,
    /// Threads holding a growth token (allowed to carve above the soft limit).
    pub(super) growers: AtomicUsize,
    /// Bytes of stack memory carved outside the arenas and counted against the memory limit
    /// like chunks: green threads' stack blocks ([`Runtime::carve_foreign`]).
    pub(super) foreign_carved: AtomicUsize,
}

// SAFETY: the pools' and arenas' contents are only reached through their spin locks; the rest
// are atomics and immutable configuration.
unsafe impl Sync for Runtime {}
// SAFETY: as above; nothing is tied to the creating thread.
unsafe impl Send for Runtime {}

impl Runtime {
    pub fn new(config: RuntimeConfig) -> Self {
        Runtime {
            config,
            pools: [const { SpinLock::new(ClassPool::new()) }; ALL_CLASSES],
            arenas: SpinLock::new(Arenas::new()),
            stats: Stats::new(),
            held: AtomicUsize::new(0),
            pooled_hot: AtomicUsize::new(0),
            peak_now: AtomicUsize::new(0),
            peak_before: AtomicUsize::new(0),
            window_start: AtomicU64::new((config.clock)()),
            next_thread: AtomicU32::new(0),
            gives: AtomicU32::new(0),
            waiters: AtomicU32::new(0),
            growers: AtomicUsize::new(0),
            foreign_carved: AtomicUsize::new(0),
            page: page_size(),
        }
    }

    pub fn config(&self) -> &RuntimeConfig {
        &self.config
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Free chunks in the shared pool (all classes, resident or not).
    pub fn pool_len(&self) -> usize {
        self.pools
            .iter()
            .map(|p| p.with(|p| p.hot.chunks() + p.cold.len()))
            .sum()
    }

    /// Resident free chunks in the pool of class `k`, and released ones.
    pub fn pool_class_len(&self, k: usize) -> (usize, usize) {
        self.pools[k].with(|p| (p.hot.chunks(), p.cold.len()))
    }

    /// Headers of the free chunks of class `k` in the pool: resident ones, then released ones.
    pub fn pool_headers(&self, k: usize) -> (Vec<usize>, Vec<usize>) {
        self.pools[k].with(|p| {
            (
                p.hot.headers().map(|h| h as usize).collect(),
                p.cold.iter().map(|h| h as usize).collect(),
            )
        })
    }

    /// Bytes of chunks held by threads (chains and caches), and of resident pool chunks.
    pub fn held_bytes(&self) -> usize {
        self.held.load(Relaxed)
    }

    pub fn pooled_resident_bytes(&self) -> usize {
        self.pooled_hot.load(Relaxed)
    }

    /// Mappings made, bytes mapped, bytes carved into chunks.
    pub fn arena_usage(&self) -> (usize, usize, usize) {
        self.arenas
            .with(|a| (a.regions(), a.mapped_bytes(), a.carved_bytes()))
    }

    /// Whether `addr` lies in the runtime's chunk memory.
    pub fn owns(&self, addr: usize) -> bool {
        self.arenas.with(|a| a.contains(addr))
    }

    pub(super) fn class_of(&self, h: *mut ChunkHeader) -> usize {
        // SAFETY: h is a mapped chunk header of this runtime; map_len is constant.
        let len = unsafe { (*h).map_len } - self.config.geometry.guard_size;
        // len = class_size(0) << k: no division on the overflow path.
        (len.trailing_zeros() - self.config.class_size(0).trailing_zeros()) as usize
    }

    pub(super) fn new_thread_id(&self) -> u32 {
        self.next_thread.fetch_add(1, Relaxed)
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        // Chains and caches must have been exited; every chunk lives in the arenas.
        // SAFETY: the runtime is being dropped, so no thread uses its chunks any more (the
        // process-wide runtime is a static and never dropped).
        self.arenas.with(|a| unsafe { a.unmap_all() });
    }
}
