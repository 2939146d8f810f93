//! The chunk runtime proper, independent of any global state: a [`Runtime`] (geometry, limits,
//! the shared pool, statistics) and a [`ThreadChain`] per thread (its chain of chunks and its
//! private cache). The process-wide instances and the `extern "C"` entry points are in
//! [`super::global`]; tests build their own instances and simulate many threads in one.
//!
//! Where a chunk comes from, in order: the thread's cache (LIFO, at most `cache_max`), the
//! shared pool (LIFO), a fresh `mmap`. Where a released chunk goes: on underflow the thread's
//! cache if it has room, else the pool if it holds fewer than `pool_high_water` chunks, else
//! `munmap`. So a call and return oscillating across a chunk boundary (the "hot split") reuses
//! the same cached chunk with no system call and no lock.
//!
//! Compiled code may unlink a chunk by itself (header word 0 = [`UNLINKED`]); such chunks stay
//! at the top of the chain until the thread's next overflow, underflow or exit, which first
//! unlinks them as [`ThreadChain::underflow`] would have, newest first. So the order of every
//! list and every statistic is the same as with an underflow handler called on the spot.
//!
//! A [`ThreadChain`] has only `Cell`s of plain data and raw pointers, no destructor and a
//! `const` constructor, so a `const`-initialised thread-local of it compiles to a direct TLS
//! access usable from a signal handler (runtime-facts.md). Its methods are not reentrant: the
//! MMU mechanisms may call them from a `SIGSEGV` handler only for faults raised by compiled
//! code, which never runs while a method of the same thread's chain is active.

use core::cell::Cell;
use core::fmt;
use core::ptr::{self, NonNull};
use core::sync::atomic::{AtomicU32, AtomicUsize, Ordering::Relaxed};

use super::header::{ChunkGeometry, ChunkHeader, HEADER_SIZE, UNLINKED};
use super::mapping::{ChunkMapping, MapError};
use super::pool::{FreeList, SpinLock};
use crate::stats::Stats;

/// Per-thread cache size: chunks a thread keeps for itself after underflows. One is enough
/// for the hot split; a few more absorb short recursive bursts without touching the pool.
pub const DEFAULT_CACHE_MAX: usize = 4;

/// Bytes of free chunks the shared pool keeps before giving memory back to the system.
pub const DEFAULT_POOL_HIGH_WATER_BYTES: usize = 16 * 1024 * 1024;

/// Settings of one runtime.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RuntimeConfig {
    pub geometry: ChunkGeometry,
    /// Per-thread limit on the bytes of chunks in a thread's chain (`chunk_size` each).
    pub stack_limit: usize,
    /// Chunks a thread keeps in its private cache.
    pub cache_max: usize,
    /// Chunks the shared pool keeps; more are unmapped.
    pub pool_high_water: usize,
    /// Kernel mappings the chunks may use in total (below `vm.max_map_count`).
    pub max_mappings: usize,
    /// Whether the hot-path statistics are counted (`STACKRT_STATS=1`). `chunks_mapped` and
    /// `chunks_unmapped` are always counted (they are on the slow path anyway).
    pub count_stats: bool,
}

impl RuntimeConfig {
    /// The defaults for `geometry`: cache of [`DEFAULT_CACHE_MAX`], pool high-water mark of
    /// [`DEFAULT_POOL_HIGH_WATER_BYTES`] (at least 16 chunks), statistics on.
    pub fn new(geometry: ChunkGeometry, stack_limit: usize, max_mappings: usize) -> Self {
        RuntimeConfig {
            geometry,
            stack_limit,
            cache_max: DEFAULT_CACHE_MAX,
            pool_high_water: (DEFAULT_POOL_HIGH_WATER_BYTES / geometry.chunk_size).max(16),
            max_mappings,
            count_stats: true,
        }
    }
}

/// A stack error. The entry points turn it into a one-line message naming the thread and end
/// the program; the Rust API returns it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChunkError {
    /// An overflow, underflow or exit on a thread that has not entered chunked code.
    NotEntered,
    /// A second enter on a thread already running on chunks.
    AlreadyEntered,
    /// The header passed in is not the thread's current chunk.
    ChainMismatch { expected: usize, got: usize },
    /// The caller's stack pointer is outside the current chunk.
    BadStackPointer {
        sp: usize,
        limit: usize,
        header: usize,
    },
    /// A checkpoint asked for more than any chunk can give (the compiler prevents it).
    ReserveTooLarge { reserve: usize, capacity: usize },
    /// An underflow in a thread's first chunk, which has no previous chunk to return to.
    UnderflowFirstChunk,
    /// One more chunk would pass the per-thread stack limit.
    StackLimit {
        in_use: usize,
        chunk_size: usize,
        limit: usize,
    },
    /// One more chunk would pass the runtime's share of `vm.max_map_count`.
    MapLimit { mappings: usize, max: usize },
    /// The system refused memory for a chunk.
    OutOfMemory { chunk_size: usize, error: MapError },
    /// The thread asked to leave chunked code while still running on one of its chunks.
    ExitOnChunk,
}

impl fmt::Display for ChunkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ChunkError::NotEntered => {
                write!(
                    f,
                    "stack chunk handler called on a thread that is not running on chunks"
                )
            }
            ChunkError::AlreadyEntered => write!(f, "thread entered chunked code twice"),
            ChunkError::ChainMismatch { expected, got } => write!(
                f,
                "corrupted stack chunk chain: current chunk header is {expected:#x}, \
                 handler was given {got:#x}"
            ),
            ChunkError::BadStackPointer { sp, limit, header } => write!(
                f,
                "corrupted stack: stack pointer {sp:#x} is outside the current chunk \
                 [{limit:#x}, {header:#x}]"
            ),
            ChunkError::ReserveTooLarge { reserve, capacity } => write!(
                f,
                "a call needs {reserve} bytes of stack, more than a chunk holds ({capacity}); \
                 recompile with a larger --chunk-size"
            ),
            ChunkError::UnderflowFirstChunk => {
                write!(
                    f,
                    "corrupted stack: underflow out of the thread's first chunk"
                )
            }
            ChunkError::StackLimit {
                in_use,
                chunk_size,
                limit,
            } => write!(
                f,
                "stack limit exceeded: {in_use} bytes of stack chunks in use, {chunk_size} \
                 more needed, limit {limit} bytes (set STACKRT_STACK_LIMIT to change it)"
            ),
            ChunkError::MapLimit { mappings, max } => write!(
                f,
                "out of memory mappings for stack chunks: {mappings} in use, at most {max} \
                 (raise vm.max_map_count or recompile with a larger --chunk-size)"
            ),
            ChunkError::OutOfMemory { chunk_size, error } => {
                let (what, e) = match error {
                    MapError::Mmap(e) => ("mmap", e),
                    MapError::Guard(e) => ("mprotect of the guard page", e),
                };
                write!(
                    f,
                    "cannot allocate a {chunk_size}-byte stack chunk: {what} failed"
                )?;
                if e == libc::ENOMEM {
                    write!(f, " (out of memory)")
                } else {
                    write!(f, " (errno {e})")
                }
            }
            ChunkError::ExitOnChunk => {
                write!(
                    f,
                    "thread tried to release its stack chunks while running on them"
                )
            }
        }
    }
}

/// Geometry, limits, the shared pool and the statistics. `Sync`: shared by all threads.
pub struct Runtime {
    config: RuntimeConfig,
    pool: SpinLock<FreeList>,
    stats: Stats,
    /// Chunks currently mapped (mapped minus unmapped), for the mapping limit.
    live_chunks: AtomicUsize,
    next_thread: AtomicU32,
}

impl Runtime {
    pub fn new(config: RuntimeConfig) -> Self {
        Runtime {
            config,
            pool: SpinLock::new(FreeList::new()),
            stats: Stats::new(),
            live_chunks: AtomicUsize::new(0),
            next_thread: AtomicU32::new(0),
        }
    }

    pub fn config(&self) -> &RuntimeConfig {
        &self.config
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Chunks in the shared pool.
    pub fn pool_len(&self) -> usize {
        self.pool.with(|p| p.len())
    }

    /// Addresses of the pooled chunks' headers, in pop order.
    pub fn pool_headers(&self) -> Vec<usize> {
        self.pool.with(|p| p.iter().map(|h| h as usize).collect())
    }

    /// Chunks currently mapped by this runtime.
    pub fn live_chunks(&self) -> usize {
        self.live_chunks.load(Relaxed)
    }

    /// Takes a chunk for `chain`: its cache, then the pool, then a new mapping.
    fn acquire(&self, chain: &ThreadChain) -> Result<NonNull<ChunkHeader>, ChunkError> {
        let cached = chain.with_cache(|c| c.pop());
        let reused = cached.or_else(|| self.pool.with(|p| p.pop()));
        if let Some(h) = reused {
            if self.config.count_stats {
                self.stats.chunks_reused.fetch_add(1, Relaxed);
            }
            // SAFETY: free lists only hold non-null headers.
            return Ok(unsafe { NonNull::new_unchecked(h) });
        }
        let per = self.config.geometry.mappings_per_chunk();
        let live = self.live_chunks.load(Relaxed);
        if (live + 1) * per > self.config.max_mappings {
            return Err(ChunkError::MapLimit {
                mappings: live * per,
                max: self.config.max_mappings,
            });
        }
        let m =
            ChunkMapping::map(self.config.geometry).map_err(|error| ChunkError::OutOfMemory {
                chunk_size: self.config.geometry.chunk_size,
                error,
            })?;
        self.live_chunks.fetch_add(1, Relaxed);
        self.stats.chunks_mapped.fetch_add(1, Relaxed);
        Ok(m.into_raw())
    }

    /// Puts a free chunk in the pool, or unmaps it if the pool is at its high-water mark.
    ///
    /// # Safety
    /// `h` is a mapped chunk of this runtime that no chain, list or running code uses.
    unsafe fn give_back(&self, h: *mut ChunkHeader) {
        let hw = self.config.pool_high_water;
        let pooled = self.pool.with(|p| {
            if p.len() < hw {
                // SAFETY: h is free and mapped (this function's contract).
                unsafe { p.push(h) };
                true
            } else {
                false
            }
        });
        if !pooled {
            // SAFETY: h came from ChunkMapping::into_raw in acquire() and is owned by nobody.
            drop(unsafe { ChunkMapping::from_raw(NonNull::new_unchecked(h)) });
            self.live_chunks.fetch_sub(1, Relaxed);
            self.stats.chunks_unmapped.fetch_add(1, Relaxed);
        }
    }

    fn new_thread_id(&self) -> u32 {
        self.next_thread.fetch_add(1, Relaxed)
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        // Chains and caches must have been exited; the pool's chunks are owned here.
        while let Some(h) = self.pool.with(|p| p.pop()) {
            // SAFETY: pooled chunks are free, mapped and owned by the pool.
            drop(unsafe { ChunkMapping::from_raw(NonNull::new_unchecked(h)) });
        }
    }
}

/// One thread's chain of chunks and private cache.
pub struct ThreadChain {
    id: Cell<u32>,
    tid: Cell<i32>,
    active: Cell<bool>,
    /// Current (newest) chunk; null when not active.
    top: Cell<*mut ChunkHeader>,
    /// Number of chunks in the chain.
    depth: Cell<usize>,
    /// Stack bytes used in the chunks below `top` (for the peak-stack statistic).
    used_below: Cell<usize>,
    cache: Cell<FreeList>,
}

impl ThreadChain {
    /// An inactive chain; usable as a `const` thread-local initialiser.
    pub const fn new() -> Self {
        ThreadChain {
            id: Cell::new(u32::MAX),
            tid: Cell::new(0),
            active: Cell::new(false),
            top: Cell::new(ptr::null_mut()),
            depth: Cell::new(0),
            used_below: Cell::new(0),
            cache: Cell::new(FreeList::new()),
        }
    }

    fn with_cache<R>(&self, f: impl FnOnce(&mut FreeList) -> R) -> R {
        let mut c = self.cache.take();
        let r = f(&mut c);
        self.cache.set(c);
        r
    }

    pub fn is_active(&self) -> bool {
        self.active.get()
    }

    /// The runtime's number for this thread (in order of entering chunked code, from 0).
    pub fn id(&self) -> u32 {
        self.id.get()
    }

    /// The kernel thread id recorded at enter.
    pub fn tid(&self) -> i32 {
        self.tid.get()
    }

    /// The newest chunk's header (null when not active). Chunks that compiled code unlinked
    /// by itself stay in the chain until the runtime next runs for the thread, so this may lie
    /// above the chunk the code runs on.
    pub fn top(&self) -> *mut ChunkHeader {
        self.top.get()
    }

    /// Chunks in the chain.
    pub fn depth(&self) -> usize {
        self.depth.get()
    }

    /// Chunks in the private cache.
    pub fn cache_len(&self) -> usize {
        self.with_cache(|c| c.len())
    }

    /// Headers of the cached chunks, in pop order.
    pub fn cache_headers(&self) -> Vec<usize> {
        self.with_cache(|c| c.iter().map(|h| h as usize).collect())
    }

    /// Headers of the chain, newest first.
    pub fn chain_headers(&self) -> Vec<usize> {
        let mut v = Vec::new();
        let mut h = self.top.get();
        while !h.is_null() {
            v.push(h as usize);
            // SAFETY: chain headers are mapped while linked.
            h = unsafe { (*h).prev_header };
        }
        v
    }

    /// Whether `addr` lies in one of the chain's chunks (usable part or header).
    pub fn contains(&self, addr: usize) -> bool {
        let mut h = self.top.get();
        while !h.is_null() {
            // SAFETY: chain headers are mapped while linked.
            let (limit, prev) = unsafe { ((*h).limit, (*h).prev_header) };
            if addr >= limit && addr < h as usize + HEADER_SIZE {
                return true;
            }
            h = prev;
        }
        false
    }

    fn check_limit(&self, rt: &Runtime) -> Result<(), ChunkError> {
        let cs = rt.config.geometry.chunk_size;
        let in_use = self.depth.get() * cs;
        if in_use + cs > rt.config.stack_limit {
            return Err(ChunkError::StackLimit {
                in_use,
                chunk_size: cs,
                limit: rt.config.stack_limit,
            });
        }
        Ok(())
    }

    /// Starts the thread's chain: takes its first chunk, whose header gets `thread_stack` and
    /// no predecessor. Returns the header (the initial chunk register and SP).
    pub fn enter(
        &self,
        rt: &Runtime,
        thread_stack: usize,
    ) -> Result<NonNull<ChunkHeader>, ChunkError> {
        if self.active.get() {
            return Err(ChunkError::AlreadyEntered);
        }
        if self.id.get() == u32::MAX {
            self.id.set(rt.new_thread_id());
            self.tid.set(super::msg::gettid());
        }
        self.check_limit(rt)?;
        let h = rt.acquire(self)?;
        // SAFETY: h is a free mapped chunk now owned by this chain.
        unsafe { init_header(h.as_ptr(), thread_stack, 0, ptr::null_mut()) };
        self.active.set(true);
        self.top.set(h.as_ptr());
        self.depth.set(1);
        self.used_below.set(0);
        if rt.config.count_stats {
            rt.stats.thread_enters.fetch_add(1, Relaxed);
            rt.stats.chunk_linked();
        }
        Ok(h)
    }

    /// Links a new chunk after `cur` (the chunk the code runs on: the newest one, or the one
    /// below the chunks compiled code unlinked by itself) for a checkpoint at `caller_sp` that
    /// needs `reserve` bytes. Returns the new header; the caller continues with chunk register
    /// = SP = that header.
    pub fn overflow(
        &self,
        rt: &Runtime,
        cur: *mut ChunkHeader,
        caller_sp: usize,
        reserve: usize,
    ) -> Result<NonNull<ChunkHeader>, ChunkError> {
        if !self.active.get() {
            return Err(ChunkError::NotEntered);
        }
        self.reclaim_unlinked(rt, cur)?;
        let top = self.top.get();
        // SAFETY: top is the chain's current chunk, mapped while linked.
        let (limit, thread_stack) = unsafe { ((*top).limit, (*top).thread_stack) };
        if caller_sp < limit || caller_sp > top as usize {
            return Err(ChunkError::BadStackPointer {
                sp: caller_sp,
                limit,
                header: top as usize,
            });
        }
        let capacity = rt.config.geometry.capacity();
        if reserve > capacity {
            return Err(ChunkError::ReserveTooLarge { reserve, capacity });
        }
        self.check_limit(rt)?;
        let h = rt.acquire(self)?;
        // SAFETY: h is a free mapped chunk now owned by this chain.
        unsafe { init_header(h.as_ptr(), thread_stack, caller_sp, top) };
        let used_here = top as usize - caller_sp;
        let below = self.used_below.get() + used_here;
        self.used_below.set(below);
        self.top.set(h.as_ptr());
        self.depth.set(self.depth.get() + 1);
        if rt.config.count_stats {
            let s = &rt.stats;
            s.overflows.fetch_add(1, Relaxed);
            s.chunk_linked();
            s.wasted((caller_sp - limit) as u64);
            s.peak_stack_bytes
                .fetch_max((below + reserve) as u64, Relaxed);
        }
        Ok(h)
    }

    /// Unlinks the chunk `cur` the code runs on (as in [`ThreadChain::overflow`]) after its
    /// first frame returned. Returns the previous chunk's header. The caller must have read
    /// `cur`'s `prev_sp` (and `prev_header`) before: the chunk may be reused or unmapped by the
    /// time this returns.
    pub fn underflow(
        &self,
        rt: &Runtime,
        cur: *mut ChunkHeader,
    ) -> Result<NonNull<ChunkHeader>, ChunkError> {
        if !self.active.get() {
            return Err(ChunkError::NotEntered);
        }
        self.reclaim_unlinked(rt, cur)?;
        if self.depth.get() < 2 {
            return Err(ChunkError::UnderflowFirstChunk);
        }
        Ok(self.unlink_top(rt))
    }

    /// Does the bookkeeping of the chunks compiled code unlinked by itself: every chunk of the
    /// chain above `cur` (the chunk the code runs on) must be marked [`UNLINKED`], and is then
    /// unlinked as an underflow would have, newest first. Checks everything before changing
    /// anything: `cur` not in the chain, or marked itself, is a [`ChunkError::ChainMismatch`].
    fn reclaim_unlinked(&self, rt: &Runtime, cur: *mut ChunkHeader) -> Result<(), ChunkError> {
        let top = self.top.get();
        let mismatch = ChunkError::ChainMismatch {
            expected: top as usize,
            got: cur as usize,
        };
        let mut above = 0;
        let mut h = top;
        while h != cur {
            if h.is_null() {
                return Err(mismatch);
            }
            // SAFETY: chain headers are mapped while in the chain.
            let (mark, prev) = unsafe { ((*h).thread_stack, (*h).prev_header) };
            if mark != UNLINKED {
                return Err(mismatch);
            }
            above += 1;
            h = prev;
        }
        // SAFETY: cur is a chain header (found above), mapped.
        if cur.is_null() || unsafe { (*cur).thread_stack } == UNLINKED {
            return Err(mismatch);
        }
        for _ in 0..above {
            self.unlink_top(rt);
        }
        Ok(())
    }

    /// Unlinks the chain's newest chunk (the chain has at least two): it goes to the thread's
    /// cache, or back to the runtime. Returns the new newest chunk.
    fn unlink_top(&self, rt: &Runtime) -> NonNull<ChunkHeader> {
        let top = self.top.get();
        // SAFETY: top is mapped while linked; its prev_header is the previous linked chunk.
        let (prev, prev_sp) = unsafe { ((*top).prev_header, (*top).prev_sp) };
        self.used_below
            .set(self.used_below.get() - (prev as usize - prev_sp));
        self.top.set(prev);
        self.depth.set(self.depth.get() - 1);
        let cache_max = rt.config.cache_max;
        let cached = self.with_cache(|c| {
            if c.len() < cache_max {
                // SAFETY: top was just unlinked: free, mapped, owned by this thread.
                unsafe { c.push(top) };
                true
            } else {
                false
            }
        });
        if !cached {
            // SAFETY: top was just unlinked and is used by nobody.
            unsafe { rt.give_back(top) };
        }
        if rt.config.count_stats {
            rt.stats.underflows.fetch_add(1, Relaxed);
            rt.stats.chunks_unlinked(1);
        }
        // SAFETY: prev is non-null because the chain had at least two chunks.
        unsafe { NonNull::new_unchecked(prev) }
    }

    /// Leaves chunked code: after the bookkeeping of chunks compiled code unlinked, the private
    /// cache (in pop order), then the chain (newest first) go to the shared pool, or are
    /// unmapped above its high-water mark. The caller must not be running on any of the
    /// chain's chunks.
    pub fn exit(&self, rt: &Runtime) -> Result<(), ChunkError> {
        if !self.active.get() {
            return Err(ChunkError::NotEntered);
        }
        // Chunks compiled code unlinked (the thread returned through them): their underflows
        // first, as if the handler had run on the spot. Only the newest chunks can be marked,
        // never the first (its first frame returns to the entry trampoline).
        // SAFETY: chain headers are mapped while linked.
        while self.depth.get() > 1 && unsafe { (*self.top.get()).thread_stack } == UNLINKED {
            self.unlink_top(rt);
        }
        while let Some(h) = self.with_cache(|c| c.pop()) {
            // SAFETY: cached chunks are free and owned by this thread.
            unsafe { rt.give_back(h) };
        }
        let mut h = self.top.get();
        let n = self.depth.get();
        while !h.is_null() {
            // SAFETY: chain headers are mapped while linked; after reading the link the chunk
            // is unlinked and handed over.
            let prev = unsafe { (*h).prev_header };
            // SAFETY: as above: h is no longer part of the chain and nothing runs on it.
            unsafe { rt.give_back(h) };
            h = prev;
        }
        self.top.set(ptr::null_mut());
        self.depth.set(0);
        self.used_below.set(0);
        self.active.set(false);
        if rt.config.count_stats {
            rt.stats.chunks_unlinked(n as u64);
            rt.stats.thread_exits.fetch_add(1, Relaxed);
        }
        Ok(())
    }
}

impl Default for ThreadChain {
    fn default() -> Self {
        Self::new()
    }
}

/// Writes the per-use header words of a chunk being linked.
///
/// # Safety
/// `h` is a mapped chunk header owned by the caller.
unsafe fn init_header(
    h: *mut ChunkHeader,
    thread_stack: usize,
    prev_sp: usize,
    prev: *mut ChunkHeader,
) {
    // SAFETY: guaranteed by the caller.
    unsafe {
        (*h).thread_stack = thread_stack;
        (*h).prev_sp = prev_sp;
        (*h).prev_header = prev;
        (*h).resume = 0;
        (*h).link = ptr::null_mut();
    }
}
