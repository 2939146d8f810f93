//! The chunk runtime proper, independent of any global state: a [`Runtime`] (geometry, limits,
//! the arenas, the shared pool, the release policy, statistics) and a [`ThreadChain`] per
//! thread (its chain of chunks and its private caches). The process-wide instances and the
//! `extern "C"` entry points are in [`super::global`]; tests build their own instances and
//! simulate many threads in one.
//!
//! # Size classes
//! A chunk of class `k` is `chunk_size << k` bytes (header included, guard excluded). A
//! checkpoint whose reserve does not fit a standard chunk (class 0) gets the smallest class
//! that holds it, so frames of any size run; every class has its own caches and pool lists.
//!
//! # Growth
//! A chain that gets deep gets larger chunks (when [`RuntimeConfig::growth_max`] is above the
//! standard size: `lookahead`, 16 MiB by default, `STACKRT_CHUNK_GROWTH`; see
//! [`super::global::set_growth`] for why not the other mechanisms). A chunk linked for a
//! checkpoint with `B` bytes of stack in use below it is of the largest class of at most
//! `B / 2` and at most `growth_max` bytes (class 0 while `B` is below four standard chunks),
//! or larger if its reserve needs it. The size is a function of the depth, so a recursion
//! that goes down and up again links the same classes at the same depths, and the hot split
//! works at every depth. A forced overflow (the reserve fits the running chunk after all: a
//! green thread's preemption poisons the limit word) gets the reserve's class, never a grown
//! one. Why grow: every chunk boundary an unwind crosses costs it a mispredicted return (the
//! chunk's first frame returns into the checkpoint's out-of-line path, not to the address the
//! return predictor holds), and a deep unwind is memory-bound, so that costs far more than a
//! pipeline flush. A million-deep recursion of 32-byte frames crossed about a thousand
//! boundaries with 32 KiB chunks; with growth it crosses about fifteen. The cost: a chain's
//! newest chunk may be up to half empty, so a deep thread holds up to about twice the stack
//! it uses (the untouched part is not resident); the reclaim budget counts in bytes
//! ([`RuntimeConfig::reclaim_budget_at`]).
//!
//! # Where a chunk comes from and where it goes
//! * **Acquire** (an overflow or a thread's first chunk): the thread's cache of that class
//!   (LIFO, no lock, no system call), else one batch from the shared pool (one lock operation
//!   for up to [`RuntimeConfig::max_batch`] chunks: resident chunks first, then chunks whose
//!   pages were given back), else a batch carved from an arena ([`super::arena`]; a new arena
//!   is mapped only when the current one is used up).
//! * **Release** (the bookkeeping of an unlinked chunk): into the thread's cache. A cache over
//!   its capacity keeps the newest half and gives the rest to the pool as batches, in one lock
//!   operation. A thread's exit gives its caches and chain to the pool the same way.
//! * **Adaptive caches**: a class-0 cache starts at [`RuntimeConfig::cache_min`] chunks and is
//!   resized at each refill from the pool, between `cache_min` and
//!   [`RuntimeConfig::cache_max`]: to the number of chunks the thread gave back since its
//!   previous refill (rounded up to a power of two: the depth of its last excursion, which it
//!   is likely to repeat), or, when it refills twice in a row (going deeper), to twice its
//!   size. A refill takes half a cache; a cache over its capacity gives all but half of it
//!   back. A hot split never leaves the cache; a deep recursion, down and up again, moves its
//!   chunks in batches of half the largest cache.
//! * **Giving memory back**: all chunk memory not in the pool is *held* (in chains and caches).
//!   The pool's resident chunks are only kept while `held + resident pool` is at most the
//!   recent peak of `held` plus `pool_floor`, where the recent peak is the largest `held` seen
//!   in the current and the previous window of [`RuntimeConfig::trim_window_ms`] (windows
//!   advance at pool operations). Beyond that, pool chunks are given back in bulk with
//!   `madvise(MADV_DONTNEED)` (their address range stays carved, and reusing them costs page
//!   faults, no system call). So resident chunk memory follows the program's recent peak: a
//!   program that keeps recursing as deep keeps its memory, one that stopped gives it back
//!   within two windows of its next pool operation. Arenas are never unmapped.
//!
//! * **Memory pressure**: while the chunks held by threads exceed
//!   [`RuntimeConfig::soft_limit`], only [`RuntimeConfig::max_growers`] threads at a time may
//!   take more chunks (they hold a growth token until they give memory back); another thread
//!   that needs a refill sleeps until the held memory drops, a token comes free or a give
//!   happens (a give wakes as many waiters as there are tokens; one that finds the held memory
//!   below the soft limit wakes as many more), and goes on anyway only when nothing at all was
//!   given back for
//!   [`RuntimeConfig::growth_wait_ms`]. With many threads recursing deep at once (the OS
//!   scheduler runs them all a little at a time), a few go down and back up while the others
//!   wait, and the memory in use stays near the soft limit instead of growing to the sum of
//!   every thread's depth. Threads that all need memory and give none back (a barrier at the
//!   bottom) lose one such wait each, and then take memory up to the hard
//!   [`RuntimeConfig::memory_limit`].
//!
//! Compiled code may unlink a chunk by itself (header word 0 = [`UNLINKED`]); such chunks stay
//! at the top of the chain until the thread's next overflow, reclaim call or exit, which first
//! unlinks them as an underflow handler would have, newest first, into the thread's caches;
//! a cache over its capacity is then trimmed once for all of them (so the pool may see one
//! larger batch where handlers called on the spot would have given several). The hot split
//! (the only marked chunk is a standard one right above the running chunk, and the overflow
//! wants a standard chunk) relinks that chunk at once: what unlinking it into the LIFO cache
//! and taking it back would have done. The *reclaim budget* bounds how long marked chunks
//! wait: the runtime stores [`RuntimeConfig::reclaim_budget`] in the 32-bit word at the
//! thread stack address (header word 0) whenever it runs for the thread, compiled code
//! decrements it at each inline unlink, and calls the runtime's reclaim handler when it
//! reaches zero (see [`DEFAULT_RECLAIM_BYTES`] for the size).
//!
//! A [`ThreadChain`] has only `Cell`s of plain data and raw pointers, no destructor and a
//! `const` constructor, so a `const`-initialised thread-local of it compiles to a direct TLS
//! access usable from a signal handler (runtime-facts.md). Its methods are not reentrant: the
//! MMU mechanisms may call them from a `SIGSEGV` handler only for faults raised by compiled
//! code, which never runs while a method of the same thread's chain is active.

use core::cell::Cell;
use core::fmt;
use core::ptr::{self, NonNull};
use core::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering::Relaxed, Ordering::SeqCst};

use super::arena::{release_pages, Arenas, MapError, DEFAULT_ARENA_SIZE};
use super::header::{
    chunk_capacity, page_size, ChunkGeometry, ChunkHeader, CHECK_SLACK, HEADER_SIZE, UNLINKED,
};
use super::pool::{BatchStack, FreeList, SpinLock};
use crate::stats::Stats;

/// Size classes: class `k` holds chunks of `chunk_size << k` bytes.
pub const NUM_CLASSES: usize = 20;

/// Smallest class-0 cache capacity (chunks). One is enough for the hot split; a few absorb
/// short recursive bursts without touching the pool.
pub const DEFAULT_CACHE_MIN: usize = 4;

/// Cache capacity of the classes above 0 (large frames are rare; one cached chunk keeps a
/// call of a large-frame function in a loop off the pool). Grown chunks use these caches too:
/// a thread keeps its next deep recursion's largest chunks at hand, without a refill that
/// would wait at the soft limit. Measured on the thesis-size tree with 64 threads: with at
/// most one cached chunk of each class over 512 KiB, 1.11x `traditional`'s time (x86-64) at
/// 435 MiB; with two, 1.03x at 772 MiB (traditional: 2018 MiB); with none of 1 MiB and more,
/// about 1.16x (i686).
pub const LARGE_CLASS_CACHE: usize = 2;

/// Bytes of chunks a class-0 cache may hold at most, and a batch at most (512 KiB: 16 chunks
/// of 32 KiB). Small, because it is per thread: with hundreds of threads deep at once, what
/// caches hold adds up; 16 chunks per lock operation already make the pool's lock cold.
pub const DEFAULT_CACHE_MAX_BYTES: usize = 512 << 10;

/// Bytes of resident free chunks the pool keeps whatever the recent peak.
pub const DEFAULT_POOL_FLOOR_BYTES: usize = 4 << 20;

/// Longest wait of a thread that needs fresh chunk memory above the soft limit.
pub const DEFAULT_GROWTH_WAIT_MS: u64 = 1000;

/// Length of a window of the release policy.
pub const DEFAULT_TRIM_WINDOW_MS: u64 = 1000;

/// The reclaim budget in bytes of standard chunks (8 MiB, i.e. 256 chunks of 32 KiB): compiled
/// code calls the runtime to hand back the chunks it unlinked once it has unlinked this many
/// since the runtime last ran for the thread, so a thread never holds more than 8 MiB of
/// unlinked chunks. Not less: a call made while a deep recursion unwinds costs return
/// predictions (with 16 chunks, a repeated 30,000-deep recursion ran 1.85x slower on x86-64
/// and 2.4x on i686; with 256 it never calls, and 1,000-chunk unwinds show no difference).
pub const DEFAULT_RECLAIM_BYTES: usize = 8 << 20;

/// Largest chunk a deep chain grows to by default (module docs, "Growth"): 16 MiB. A
/// million-deep recursion of 32-byte frames then crosses about fifteen chunk boundaries
/// instead of a thousand.
pub const DEFAULT_GROWTH_MAX_BYTES: usize = 16 << 20;

/// Settings of one runtime.
#[derive(Clone, Copy, Debug)]
pub struct RuntimeConfig {
    pub geometry: ChunkGeometry,
    /// Per-thread limit on the bytes of chunks in a thread's chain.
    pub stack_limit: usize,
    /// Limit on the bytes of chunk memory carved by all threads together.
    pub memory_limit: usize,
    /// Bytes of chunks held by threads above which only `max_growers` threads at a time may
    /// take more (module docs, "Memory pressure").
    pub soft_limit: usize,
    /// How long a waiting thread waits when nothing is given back, milliseconds.
    pub growth_wait_ms: u64,
    /// Threads that may carve above the soft limit at once (growth tokens).
    pub max_growers: usize,
    /// Bytes of one arena.
    pub arena_size: usize,
    /// Smallest and largest class-0 cache capacity, chunks.
    pub cache_min: usize,
    pub cache_max: usize,
    /// Most chunks one batch moves between a thread and the pool.
    pub max_batch: usize,
    /// Resident free chunk bytes the pool keeps whatever the recent peak.
    pub pool_floor: usize,
    /// Window of the release policy, in the units of `clock`.
    pub trim_window_ms: u64,
    /// Milliseconds of a monotonic clock (the policy's windows).
    pub clock: fn() -> u64,
    /// Value stored in the 32-bit reclaim budget word at the thread stack address whenever
    /// the runtime runs for a thread; 0: the runtime never writes it (test runtimes whose
    /// thread stacks are not real).
    pub reclaim_budget: u32,
    /// Kernel mappings the runtime's arenas and guard pages may use (below `vm.max_map_count`).
    pub max_mappings: usize,
    /// Whether the hot-path statistics are counted (`STACKRT_STATS=1`). Slow-path counters
    /// (carving, batches, arenas, releases) are always counted.
    pub count_stats: bool,
    /// Largest chunk a deep chain grows to (module docs, "Growth"), bytes. Growth is off when
    /// it is below two standard chunks (0 included): every chunk is then a standard one unless
    /// a reserve needs more.
    pub growth_max: usize,
    /// Whether unlinked chunks are kept for reuse (thread caches, resident pool). `false` is
    /// the thesis's `mmu` without reuse: every unlinked chunk's pages go back to the system
    /// at once (`madvise`), and every new chunk is taken from the released ones (or carved).
    pub reuse: bool,
}

impl RuntimeConfig {
    /// The defaults for `geometry` and the limits: caches of 4 up to 512 KiB of chunks, batches
    /// of at most that, a 4 MiB pool floor, 1 s windows, statistics on, no reclaim budget word.
    pub fn new(geometry: ChunkGeometry, stack_limit: usize, max_mappings: usize) -> Self {
        let cache_max = (DEFAULT_CACHE_MAX_BYTES / geometry.chunk_size).max(DEFAULT_CACHE_MIN);
        RuntimeConfig {
            geometry,
            stack_limit,
            memory_limit: usize::MAX,
            soft_limit: usize::MAX,
            growth_wait_ms: DEFAULT_GROWTH_WAIT_MS,
            max_growers: 2,
            arena_size: DEFAULT_ARENA_SIZE.max(4 * (geometry.chunk_size + geometry.guard_size)),
            cache_min: DEFAULT_CACHE_MIN,
            cache_max,
            max_batch: cache_max,
            pool_floor: DEFAULT_POOL_FLOOR_BYTES,
            trim_window_ms: DEFAULT_TRIM_WINDOW_MS,
            clock: monotonic_ms,
            reclaim_budget: 0,
            growth_max: 0,
            max_mappings,
            count_stats: true,
            reuse: true,
        }
    }

    /// The reclaim budget for real threads: [`DEFAULT_RECLAIM_BYTES`] of standard chunks, at
    /// least 8 unlinks.
    pub fn default_reclaim_budget(chunk_size: usize) -> u32 {
        Self::reclaim_budget_for(DEFAULT_RECLAIM_BYTES, chunk_size)
    }

    /// The reclaim budget for `bytes` of standard chunks of `chunk_size` bytes: at least 8
    /// unlinks, at most 2^30.
    pub fn reclaim_budget_for(bytes: usize, chunk_size: usize) -> u32 {
        (bytes / chunk_size).clamp(8, 1 << 30) as u32
    }

    /// Bytes of a chunk of class `k`.
    pub fn class_size(&self, k: usize) -> usize {
        self.geometry.chunk_size << k
    }

    /// The class of a new chunk linked for a checkpoint with `below` bytes of stack in use
    /// below it (module docs, "Growth"): about half of that, a power-of-two multiple of the
    /// standard size, at most [`RuntimeConfig::growth_max`]. Class 0 while the stack is
    /// shallow or growth is off.
    #[inline]
    pub fn growth_class(&self, below: usize) -> usize {
        let cs = self.geometry.chunk_size;
        let target = (below / 2).min(self.growth_max);
        if target < 2 * cs {
            // The hot split's usual case: two compares, no call.
            return 0;
        }
        self.grown_class(target)
    }

    #[inline(never)]
    fn grown_class(&self, target: usize) -> usize {
        ((target / self.geometry.chunk_size).ilog2() as usize).min(self.max_class())
    }

    /// The reclaim budget while the chain's newest chunk is of class `k`: as many unlinks as
    /// give back about [`RuntimeConfig::reclaim_budget`] standard chunks' bytes (the chunks
    /// below a grown chunk are no larger than it), at least one.
    pub fn reclaim_budget_at(&self, k: usize) -> u32 {
        (self.reclaim_budget >> k.min(31)).max(1)
    }

    /// The smallest class whose chunks hold `reserve` bytes below a fresh chunk's SP.
    pub fn class_for(&self, reserve: usize) -> Option<usize> {
        (0..=self.max_class()).find(|&k| chunk_capacity(self.class_size(k)) >= reserve)
    }

    /// The largest class whose chunk size is representable (and leaves address space to spare).
    pub fn max_class(&self) -> usize {
        let cs = self.geometry.chunk_size;
        (0..NUM_CLASSES)
            .take_while(|&k| cs <= (usize::MAX >> 2) >> k)
            .last()
            .unwrap_or(0)
    }
}

/// Milliseconds of `CLOCK_MONOTONIC_COARSE` (a vDSO read, no system call).
pub fn monotonic_ms() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000
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
    /// A call asked for more stack in one piece than the largest chunk class holds.
    ReserveTooLarge { reserve: usize, largest: usize },
    /// An underflow in a thread's first chunk, which has no previous chunk to return to.
    UnderflowFirstChunk,
    /// One more chunk would pass the per-thread stack limit.
    StackLimit {
        in_use: usize,
        needed: usize,
        limit: usize,
    },
    /// More chunk memory would pass the process-wide limit.
    MemoryLimit {
        carved: usize,
        needed: usize,
        limit: usize,
    },
    /// One more guarded chunk would pass the runtime's share of `vm.max_map_count`.
    MapLimit { mappings: usize, max: usize },
    /// The system refused memory for chunks.
    OutOfMemory { error: MapError },
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
            ChunkError::ReserveTooLarge { reserve, largest } => write!(
                f,
                "a call needs {reserve} bytes of stack in one piece, more than the largest \
                 stack chunk holds ({largest})"
            ),
            ChunkError::UnderflowFirstChunk => {
                write!(
                    f,
                    "corrupted stack: underflow out of the thread's first chunk"
                )
            }
            ChunkError::StackLimit {
                in_use,
                needed,
                limit,
            } => write!(
                f,
                "stack limit exceeded: {in_use} bytes of stack chunks in use, {needed} \
                 more needed, limit {limit} bytes (set STACKRT_STACK_LIMIT to change it)"
            ),
            ChunkError::MemoryLimit {
                carved,
                needed,
                limit,
            } => write!(
                f,
                "out of memory for stack chunks: {carved} bytes used by all threads, {needed} \
                 more needed, limit {limit} bytes (set STACKRT_MEMORY_LIMIT to change it)"
            ),
            ChunkError::MapLimit { mappings, max } => write!(
                f,
                "out of memory mappings for stack chunks: {mappings} in use, at most {max} \
                 (raise vm.max_map_count or recompile with a larger --chunk-size)"
            ),
            ChunkError::OutOfMemory { error } => match error {
                MapError::Mmap { bytes, errno } => {
                    write!(f, "cannot map {bytes} bytes for stack chunks: mmap failed")?;
                    if errno == libc::ENOMEM {
                        write!(f, " (out of memory or address space)")
                    } else {
                        write!(f, " (errno {errno})")
                    }
                }
                MapError::Guard(e) => write!(
                    f,
                    "cannot protect the guard page of a stack chunk: mprotect failed (errno {e})"
                ),
                MapError::TooManyRegions => write!(
                    f,
                    "cannot map more memory for stack chunks: {} mappings recorded",
                    super::arena::MAX_REGIONS
                ),
            },
            ChunkError::ExitOnChunk => {
                write!(
                    f,
                    "thread tried to release its stack chunks while running on them"
                )
            }
        }
    }
}

/// The pool of one size class: batches of resident free chunks, and free chunks whose pages
/// were given back to the system (or never touched: an arena's spill).
struct ClassPool {
    hot: BatchStack,
    cold: FreeList,
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
    config: RuntimeConfig,
    pools: [SpinLock<ClassPool>; NUM_CLASSES],
    arenas: SpinLock<Arenas>,
    stats: Stats,
    /// Bytes of chunks outside the pool (in chains and caches).
    held: AtomicUsize,
    /// Bytes of resident chunks in the pool.
    pooled_hot: AtomicUsize,
    /// Largest `held` in the current window and the previous one; start of the current one.
    peak_now: AtomicUsize,
    peak_before: AtomicUsize,
    window_start: AtomicU64,
    next_thread: AtomicU32,
    page: usize,
    /// Incremented at every give to the pool: the futex word growth waits sleep on.
    gives: AtomicU32,
    /// Threads in a growth wait.
    waiters: AtomicU32,
    /// Threads holding a growth token (allowed to carve above the soft limit).
    growers: AtomicUsize,
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
            pools: [const { SpinLock::new(ClassPool::new()) }; NUM_CLASSES],
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

    fn class_of(&self, h: *mut ChunkHeader) -> usize {
        // SAFETY: h is a mapped chunk header of this runtime; map_len is constant.
        let len = unsafe { (*h).map_len } - self.config.geometry.guard_size;
        // len = chunk_size << k: no division on the overflow path.
        (len.trailing_zeros() - self.config.geometry.chunk_size.trailing_zeros()) as usize
    }

    /// Moves chunks of class `k` into `chain`'s cache: one pool batch (resident first), else
    /// released chunks, else freshly carved ones. The cache is empty on entry.
    fn refill(&self, chain: &ThreadChain, k: usize) -> Result<(), ChunkError> {
        if k == 0 {
            chain.adapt_cap_at_refill(&self.config);
        }
        let want = if k == 0 && self.config.reuse {
            (chain.cap.get() / 2).clamp(1, self.config.max_batch.max(1))
        } else {
            1
        };
        let size = self.config.class_size(k);
        // A green-thread worker never waits: blocking it would also stop the green threads
        // queued on it, which may be the ones to give memory back, and only as many green
        // threads as workers run at once anyway.
        if !chain.grower.get()
            && !chain.worker.get()
            && self.held.load(Relaxed) >= self.config.soft_limit
        {
            self.wait_for_growth_token(chain);
        }
        let (list, hot_chunks) = self.take_from_pool(k, want);
        let fresh = list.is_empty();
        let list = if fresh { self.carve(k, want)? } else { list };
        if !fresh {
            self.stats
                .chunks_from_pool
                .fetch_add(list.len() as u64, Relaxed);
            self.stats.pool_takes.fetch_add(1, Relaxed);
        }
        let bytes = list.len() * size;
        self.pooled_hot.fetch_sub(hot_chunks * size, Relaxed);
        let held = self.held.fetch_add(bytes, Relaxed) + bytes;
        self.peak_now.fetch_max(held, Relaxed);
        self.note_resident();
        chain.cache_splice(k, list);
        Ok(())
    }

    /// Memory pressure (module docs): while the chunks held by threads are above the soft
    /// limit, only `max_growers` threads may take more (they hold a growth token until they
    /// give memory back); this one waits for a token, or for the held memory to drop below the
    /// soft limit. The count of gives is read before the state is checked again, so a give or
    /// token release in between ends the wait at once. Every give (progress somewhere) moves
    /// the deadline on; only when nothing was given back for `growth_wait_ms` (threads that
    /// wait for each other) does the thread go on anyway, with a token of its own.
    fn wait_for_growth_token(&self, chain: &ThreadChain) {
        let mut deadline = monotonic_ms() + self.config.growth_wait_ms;
        let mut seen = self.gives.load(SeqCst);
        let mut waited = false;
        loop {
            if self.held.load(SeqCst) < self.config.soft_limit {
                if waited {
                    // Below the soft limit every waiter may go on, not only the few one give
                    // woke: pass the wake on.
                    self.wake_waiters();
                }
                return;
            }
            let g = self.growers.load(SeqCst);
            if g < self.config.max_growers
                && self
                    .growers
                    .compare_exchange(g, g + 1, SeqCst, Relaxed)
                    .is_ok()
            {
                chain.grower.set(true);
                return;
            }
            // Gives are checked before the deadline: a give wakes only a few waiters (see
            // `wake_waiters`), the others see it when their sleep times out.
            let now = monotonic_ms();
            let now_seen = self.gives.load(SeqCst);
            if now_seen != seen {
                seen = now_seen;
                deadline = now + self.config.growth_wait_ms;
            } else if now >= deadline {
                self.growers.fetch_add(1, SeqCst);
                chain.grower.set(true);
                self.stats.growth_timeouts.fetch_add(1, Relaxed);
                return;
            }
            self.wait_for_give(seen, deadline - now);
            waited = true;
        }
    }

    /// Takes up to `want` chunks of class `k` from the pool in one lock operation: resident
    /// batches first (as many as `want` needs: the givers' batches may be small), then released
    /// chunks. Returns them and how many were resident.
    fn take_from_pool(&self, k: usize, want: usize) -> (FreeList, usize) {
        self.pools[k].with(|p| {
            let mut l = FreeList::new();
            while l.len() < want {
                match p.hot.pop() {
                    Some(b) => l.splice(b),
                    None => break,
                }
            }
            let hot_chunks = l.len();
            while l.len() < want {
                match p.cold.pop() {
                    // SAFETY: h was free in the pool and is now owned by `l`.
                    Some(h) => unsafe { l.push(h) },
                    None => break,
                }
            }
            (l, hot_chunks)
        })
    }

    /// Sleeps until the next give to the pool (the count of gives differs from `seen`) or for
    /// `ms` milliseconds, whichever comes first (`futex`; a plain system call, no lock held).
    fn wait_for_give(&self, seen: u32, ms: u64) {
        self.waiters.fetch_add(1, SeqCst);
        let timeout = libc::timespec {
            tv_sec: (ms / 1000) as libc::time_t,
            tv_nsec: ((ms % 1000) * 1_000_000) as libc::c_long,
        };
        // SAFETY: FUTEX_WAIT on an aligned AtomicU32 that lives as long as the runtime, with a
        // valid relative timeout; it only reads the word.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_futex,
                self.gives.as_ptr(),
                libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                seen,
                &timeout as *const libc::timespec,
                core::ptr::null::<u32>(),
                0u32,
            )
        };
        let _ = rc;
        self.waiters.fetch_sub(1, SeqCst);
        self.stats.growth_waits.fetch_add(1, Relaxed);
    }

    /// A thread that gives memory back (it is shrinking) gives up its growth token, if any,
    /// and wakes the waiters (the give that follows or preceded did, or will).
    fn release_growth_token(&self, chain: &ThreadChain) {
        if chain.grower.replace(false) {
            self.growers.fetch_sub(1, SeqCst);
            self.gives.fetch_add(1, SeqCst);
            self.wake_waiters();
        }
    }

    /// Wakes as many threads in a growth wait as can go on: every one of them (up to as many
    /// as there are growth tokens) when the held memory is below the soft limit, else one per
    /// free growth token, else none. Waking all of them made every give (a batch of chunks,
    /// a token given back) wake every waiting thread, hundreds with many deep threads, to
    /// find that all but a few must sleep again; and every wake is two context switches, each
    /// costing a thread that was in the middle of a deep unwind the return predictions of the
    /// rest of it. The others see the give when their sleep times out, and since it moved
    /// their deadline on, they sleep again (`wait_for_growth_token`).
    fn wake_waiters(&self) {
        if self.waiters.load(SeqCst) == 0 {
            return;
        }
        let max = self.config.max_growers.max(1);
        let wake = if self.held.load(SeqCst) < self.config.soft_limit {
            max
        } else {
            max.saturating_sub(self.growers.load(SeqCst))
        };
        if wake == 0 {
            return;
        }
        let wake = i32::try_from(wake).unwrap_or(i32::MAX);
        // SAFETY: FUTEX_WAKE on the runtime's aligned AtomicU32; no memory is written.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                self.gives.as_ptr(),
                libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
                wake,
            )
        };
    }

    /// Carves `n` fresh chunks of class `k` (checking the memory and mapping limits).
    fn carve(&self, k: usize, n: usize) -> Result<FreeList, ChunkError> {
        let size = self.config.class_size(k);
        let g = self.config.geometry;
        let block = size + g.guard_size;
        let mut out = FreeList::new();
        let mut spill = FreeList::new();
        let carved = self.arenas.with(|a| -> Result<(), ChunkError> {
            let carved = a.carved_bytes();
            let limit = self.config.memory_limit;
            let room = limit.saturating_sub(carved);
            if room < block {
                return Err(ChunkError::MemoryLimit {
                    carved,
                    needed: block,
                    limit,
                });
            }
            // As many as the limit admits, at least the one needed.
            let n = n.min(room / block);
            let mappings = a.regions() + a.guarded_blocks() * g.mappings_per_chunk();
            let more = if g.guard_size == 0 {
                1
            } else {
                n * g.mappings_per_chunk() + 1
            };
            if mappings + more > self.config.max_mappings {
                return Err(ChunkError::MapLimit {
                    mappings,
                    max: self.config.max_mappings,
                });
            }
            let regions = a.regions();
            let r = a.carve(
                size,
                g.guard_size,
                n,
                self.config.arena_size,
                g.chunk_size,
                limit,
                &mut out,
                &mut spill,
            );
            let mapped = a.regions() - regions;
            if mapped != 0 {
                self.stats.arenas_mapped.fetch_add(mapped as u64, Relaxed);
                self.stats
                    .bytes_mapped
                    .store(a.mapped_bytes() as u64, Relaxed);
            }
            r.map_err(|error| ChunkError::OutOfMemory { error })
        });
        if !spill.is_empty() {
            self.stats
                .chunks_carved
                .fetch_add(spill.len() as u64, Relaxed);
            self.pools[0].with(|p| p.cold.splice(spill));
        }
        if let Err(e) = carved {
            // Blocks carved before the failure stay usable: fresh, so not resident.
            self.stats
                .chunks_carved
                .fetch_add(out.len() as u64, Relaxed);
            self.pools[k].with(|p| p.cold.splice(out));
            return Err(e);
        }
        self.stats
            .chunks_carved
            .fetch_add(out.len() as u64, Relaxed);
        Ok(out)
    }

    /// Gives `list` (free chunks of class `k`, owned by the caller, resident) to the pool in
    /// batches of at most `max_batch`, one lock operation; then applies the release policy.
    fn give(&self, k: usize, mut list: FreeList) {
        let n = list.len();
        if n == 0 {
            return;
        }
        // Accounted before the chunks become visible in the pool: a taker's subtraction then
        // always follows this addition (no transient wrap-around of `pooled_hot`, which the
        // release policy and the resident-peak statistic read).
        let bytes = n * self.config.class_size(k);
        self.held.fetch_sub(bytes, Relaxed);
        self.pooled_hot.fetch_add(bytes, Relaxed);
        let max = self.config.max_batch.max(1);
        let mut batches: [FreeList; 16] = [const { FreeList::new() }; 16];
        while !list.is_empty() {
            // Up to 16 batches per lock operation; only a thread's exit gives more.
            let mut used = 0;
            while !list.is_empty() && used < batches.len() {
                let rest = list.split_off(max);
                batches[used] = core::mem::replace(&mut list, rest);
                used += 1;
            }
            self.pools[k].with(|p| {
                for b in batches[..used].iter_mut() {
                    p.hot.push(core::mem::take(b));
                }
            });
        }
        self.stats.pool_gives.fetch_add(1, Relaxed);
        // Wake the threads waiting for memory that can go on (`wake_waiters`; SeqCst pairs
        // with wait_for_give: either this sees the waiter, or the waiter's futex sees the new
        // count and does not sleep).
        self.gives.fetch_add(1, SeqCst);
        self.wake_waiters();
        self.trim();
    }

    /// Rotates the policy's window if it is over, and gives resident pool chunks back to the
    /// system while `held + resident pool` is above the recent peak of `held` + the floor.
    pub fn trim(&self) {
        let now = (self.config.clock)();
        let start = self.window_start.load(Relaxed);
        if now.wrapping_sub(start) >= self.config.trim_window_ms
            && self
                .window_start
                .compare_exchange(start, now, Relaxed, Relaxed)
                .is_ok()
        {
            let held = self.held.load(Relaxed);
            let last = self.peak_now.swap(held, Relaxed);
            self.peak_before.store(last, Relaxed);
        }
        let peak = self
            .peak_now
            .load(Relaxed)
            .max(self.peak_before.load(Relaxed));
        let allowed = peak.saturating_add(self.config.pool_floor);
        // Largest classes first: they give the most back per system call.
        for k in (0..NUM_CLASSES).rev() {
            loop {
                let resident = self.held.load(Relaxed) + self.pooled_hot.load(Relaxed);
                if resident <= allowed {
                    return;
                }
                let Some(batch) = self.pools[k].with(|p| p.hot.pop()) else {
                    break;
                };
                let bytes = batch.len() * self.config.class_size(k);
                self.pooled_hot.fetch_sub(bytes, Relaxed);
                let mut released = 0usize;
                for h in batch.iter() {
                    // SAFETY: the batch's chunks are free and owned here; nothing runs on them.
                    released += unsafe { release_pages(h, self.page) };
                }
                self.stats
                    .chunks_released
                    .fetch_add(batch.len() as u64, Relaxed);
                self.stats
                    .bytes_released
                    .fetch_add(released as u64, Relaxed);
                self.pools[k].with(|p| p.cold.splice(batch));
            }
        }
    }

    /// Without reuse: gives the pages of the just-unlinked chunk `h` of class `k` back to the
    /// system and puts it with the pool's released chunks (one `madvise`, one lock operation).
    fn release_now(&self, k: usize, h: *mut ChunkHeader) {
        self.held.fetch_sub(self.config.class_size(k), Relaxed);
        // SAFETY: h was just unlinked by its thread: free, mapped, nothing runs on it.
        let released = unsafe { release_pages(h, self.page) };
        self.stats.chunks_released.fetch_add(1, Relaxed);
        self.stats
            .bytes_released
            .fetch_add(released as u64, Relaxed);
        let mut l = FreeList::new();
        // SAFETY: h is free and owned here until it is in the pool.
        unsafe { l.push(h) };
        self.pools[k].with(|p| p.cold.splice(l));
        // Memory went back: a thread waiting for memory may go on (as after a give).
        self.gives.fetch_add(1, SeqCst);
        self.wake_waiters();
    }

    fn note_resident(&self) {
        let r = self.held.load(Relaxed) + self.pooled_hot.load(Relaxed);
        self.stats.peak_resident_bytes.fetch_max(r as u64, Relaxed);
    }

    fn new_thread_id(&self) -> u32 {
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

/// One thread's chain of chunks and private caches.
pub struct ThreadChain {
    id: Cell<u32>,
    tid: Cell<i32>,
    active: Cell<bool>,
    /// Current (newest) chunk; null when not active.
    top: Cell<*mut ChunkHeader>,
    /// Number of chunks in the chain.
    depth: Cell<usize>,
    /// Bytes of the chunks in the chain (for the stack limit).
    chain_bytes: Cell<usize>,
    /// Stack bytes used in the chunks below `top` (for the peak-stack statistic).
    used_below: Cell<usize>,
    caches: [Cell<FreeList>; NUM_CLASSES],
    /// Capacity of the class-0 cache (adaptive), whether the last pool operation of the cache
    /// was a refill, and the chunks given to the pool since the last refill.
    cap: Cell<usize>,
    refilled: Cell<bool>,
    released: Cell<usize>,
    /// Whether the thread holds a growth token (see [`Runtime`]'s memory pressure).
    grower: Cell<bool>,
    /// Whether the chain's first chunk is memory the runtime does not own (a green thread's
    /// stack block, [`ThreadChain::offer_first_chunk`]): it never goes to a cache.
    foreign_first: Cell<bool>,
    /// Low end of the memory offered for the next [`ThreadChain::enter`]'s first chunk; 0: none.
    offer: Cell<usize>,
    /// Whether this OS thread is a green-thread worker: chains come and go on it, so an exit
    /// keeps the caches (trimmed to their capacity) for the next green thread.
    worker: Cell<bool>,
}

/// The part of a [`ThreadChain`] that belongs to one thread of execution rather than to the OS
/// thread running it: a green thread's chain while it is switched out
/// ([`ThreadChain::swap_state`]). The caches stay with the OS thread (the worker), like Go's
/// per-P stack caches.
#[derive(Debug)]
pub struct ChainState {
    id: u32,
    active: bool,
    top: *mut ChunkHeader,
    depth: usize,
    chain_bytes: usize,
    used_below: usize,
    grower: bool,
    foreign_first: bool,
}

impl ChainState {
    /// The state of a thread that has not entered chunked code yet.
    pub const fn new() -> Self {
        ChainState {
            id: u32::MAX,
            active: false,
            top: ptr::null_mut(),
            depth: 0,
            chain_bytes: 0,
            used_below: 0,
            grower: false,
            foreign_first: false,
        }
    }

    /// Whether the thread is in chunked code (has a chain).
    pub fn is_active(&self) -> bool {
        self.active
    }
}

impl Default for ChainState {
    fn default() -> Self {
        Self::new()
    }
}

/// Bytes between the thread stack `T` and a foreign first chunk's header
/// ([`ThreadChain::offer_first_chunk`]): the handlers' and the runtime's frames grow down from
/// `T` into this room while the thread runs on chunks. 8 KiB holds the fatal-error path (its
/// 2 KiB report buffer and formatting) with a wide margin; pages of it that are never reached
/// are never touched.
pub const FOREIGN_HANDLER_ROOM: usize = 8 * 1024;

impl ThreadChain {
    /// An inactive chain; usable as a `const` thread-local initialiser.
    pub const fn new() -> Self {
        ThreadChain {
            id: Cell::new(u32::MAX),
            tid: Cell::new(0),
            active: Cell::new(false),
            top: Cell::new(ptr::null_mut()),
            depth: Cell::new(0),
            chain_bytes: Cell::new(0),
            used_below: Cell::new(0),
            caches: [const { Cell::new(FreeList::new()) }; NUM_CLASSES],
            cap: Cell::new(0),
            refilled: Cell::new(false),
            released: Cell::new(0),
            grower: Cell::new(false),
            foreign_first: Cell::new(false),
            offer: Cell::new(0),
            worker: Cell::new(false),
        }
    }

    /// Marks the OS thread as a green-thread worker (see the `worker` field).
    pub fn set_worker(&self) {
        self.worker.set(true);
    }

    /// The per-thread part of the chain.
    fn save_state(&self) -> ChainState {
        ChainState {
            id: self.id.get(),
            active: self.active.get(),
            top: self.top.get(),
            depth: self.depth.get(),
            chain_bytes: self.chain_bytes.get(),
            used_below: self.used_below.get(),
            grower: self.grower.get(),
            foreign_first: self.foreign_first.get(),
        }
    }

    /// Makes `state` the per-thread part of the chain (the OS thread's id stays).
    fn load_state(&self, state: &ChainState) {
        self.id.set(state.id);
        self.active.set(state.active);
        self.top.set(state.top);
        self.depth.set(state.depth);
        self.chain_bytes.set(state.chain_bytes);
        self.used_below.set(state.used_below);
        self.grower.set(state.grower);
        self.foreign_first.set(state.foreign_first);
        if self.tid.get() == 0 {
            self.tid.set(super::msg::gettid());
        }
    }

    /// Exchanges the per-thread part of the chain with `state` (a green thread switching in or
    /// out of this OS thread); the caches stay. Not while a handler of this chain runs.
    pub fn swap_state(&self, state: &mut ChainState) {
        let mine = self.save_state();
        self.load_state(state);
        *state = mine;
    }

    /// Saves the per-thread part of the chain in `save` and loads it from `load`: a direct
    /// switch from one green thread to another on this OS thread.
    pub fn switch_state(&self, save: &mut ChainState, load: &ChainState) {
        *save = self.save_state();
        self.load_state(load);
    }

    /// Offers the memory from `low` up to the next [`ThreadChain::enter`]'s thread stack as its
    /// first chunk: a green thread's stack block, whose top holds the entry frames. The chunk's
    /// header goes [`FOREIGN_HANDLER_ROOM`] below the thread stack `T`, its limit is `low`;
    /// if the entry's need does not fit, the offer is ignored and a chunk of the runtime's is
    /// taken. The memory stays the caller's: the chain never caches or releases it.
    pub fn offer_first_chunk(&self, low: usize) {
        self.offer.set(low);
    }

    fn with_cache<R>(&self, k: usize, f: impl FnOnce(&mut FreeList) -> R) -> R {
        let mut c = self.caches[k].take();
        let r = f(&mut c);
        self.caches[k].set(c);
        r
    }

    fn cache_splice(&self, k: usize, list: FreeList) {
        self.with_cache(k, |c| c.splice(list));
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

    /// Chunks in the private cache of class 0 (standard chunks).
    pub fn cache_len(&self) -> usize {
        self.with_cache(0, |c| c.len())
    }

    /// Chunks in all private caches.
    pub fn cache_len_all(&self) -> usize {
        (0..NUM_CLASSES)
            .map(|k| self.with_cache(k, |c| c.len()))
            .sum()
    }

    /// Current capacity of the class-0 cache.
    pub fn cache_capacity(&self) -> usize {
        self.cap.get()
    }

    /// Headers of the cached chunks of all classes, in pop order per class.
    pub fn cache_headers(&self) -> Vec<usize> {
        (0..NUM_CLASSES)
            .flat_map(|k| self.with_cache(k, |c| c.iter().map(|h| h as usize).collect::<Vec<_>>()))
            .collect()
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

    fn check_limit(&self, rt: &Runtime, needed: usize) -> Result<(), ChunkError> {
        let in_use = self.chain_bytes.get();
        if in_use + needed > rt.config.stack_limit {
            return Err(ChunkError::StackLimit {
                in_use,
                needed,
                limit: rt.config.stack_limit,
            });
        }
        Ok(())
    }

    fn class_for(&self, rt: &Runtime, reserve: usize) -> Result<usize, ChunkError> {
        rt.config
            .class_for(reserve)
            .ok_or(ChunkError::ReserveTooLarge {
                reserve,
                largest: chunk_capacity(rt.config.class_size(rt.config.max_class())),
            })
    }

    /// Takes a chunk of class `k`: the cache, else a refill.
    fn acquire(&self, rt: &Runtime, k: usize) -> Result<NonNull<ChunkHeader>, ChunkError> {
        let h = match self.with_cache(k, |c| c.pop()) {
            Some(h) => {
                if rt.config.count_stats {
                    rt.stats.chunks_reused.fetch_add(1, Relaxed);
                }
                h
            }
            None => {
                rt.refill(self, k)?;
                self.with_cache(k, |c| c.pop())
                    .expect("a refill leaves at least one chunk in the cache")
            }
        };
        // SAFETY: free lists only hold non-null headers.
        Ok(unsafe { NonNull::new_unchecked(h) })
    }

    /// Sizes the class-0 cache before a refill (module docs): after releases, to the chunks
    /// released since the previous refill (the thread's last excursion: it is going down as
    /// far again); after a refill, twice as big (it keeps going deeper).
    fn adapt_cap_at_refill(&self, config: &RuntimeConfig) {
        let released = self.released.replace(0);
        let cap = if released > 0 {
            released.next_power_of_two()
        } else if self.refilled.get() {
            self.cap.get() * 2
        } else {
            self.cap.get()
        };
        self.cap.set(cap.clamp(config.cache_min, config.cache_max));
        self.refilled.set(true);
    }

    /// A cache of class `k` over its capacity keeps its newest half and gives the rest to the
    /// pool (one lock operation); the class-0 capacity adapts (module docs).
    fn trim_cache(&self, rt: &Runtime, k: usize) {
        let cap = if k == 0 {
            self.cap.get()
        } else {
            LARGE_CLASS_CACHE
        };
        if self.with_cache(k, |c| c.len()) <= cap {
            return;
        }
        let rest = self.with_cache(k, |c| c.split_off(cap / 2));
        if k == 0 {
            self.refilled.set(false);
            self.released.set(self.released.get() + rest.len());
        }
        rt.give(k, rest);
        rt.release_growth_token(self);
    }

    /// Stores the reclaim budget for a chain whose newest chunk is of class `k`.
    fn set_budget(&self, rt: &Runtime, thread_stack: usize, k: usize) {
        if rt.config.reclaim_budget != 0 {
            // SAFETY: with a budget configured, the thread stack address is the entry
            // trampoline's 16-byte aligned scratch area, whose first 4 bytes are reserved for
            // the budget (global.rs), writable while the thread runs chunked code.
            unsafe { (thread_stack as *mut u32).write(rt.config.reclaim_budget_at(k)) };
        }
    }

    /// The class of the chain's newest chunk for its reclaim budget: 0 for the first chunk
    /// (nothing below it is ever unlinked; it may be offered memory of any length).
    fn top_budget_class(&self, rt: &Runtime) -> usize {
        if self.depth.get() < 2 {
            0
        } else {
            rt.class_of(self.top.get())
        }
    }

    /// Starts the thread's chain: takes its first chunk, big enough for `need` bytes below its
    /// header, which gets `thread_stack` and no predecessor. Returns the header (the initial
    /// chunk register and SP).
    pub fn enter(
        &self,
        rt: &Runtime,
        thread_stack: usize,
        need: usize,
    ) -> Result<NonNull<ChunkHeader>, ChunkError> {
        if self.active.get() {
            return Err(ChunkError::AlreadyEntered);
        }
        if self.id.get() == u32::MAX {
            self.id.set(rt.new_thread_id());
            self.tid.set(super::msg::gettid());
            self.cap.set(rt.config.cache_min);
        }
        self.chain_bytes.set(0);
        let offer = self.offer.replace(0);
        let foreign = thread_stack
            .checked_sub(FOREIGN_HANDLER_ROOM + HEADER_SIZE)
            .map(|h| h & !15)
            .filter(|&h| offer != 0 && h > offer && h - offer >= need + CHECK_SLACK);
        let (h, size) = if let Some(h) = foreign {
            let size = h + HEADER_SIZE - offer;
            self.check_limit(rt, size)?;
            let h = h as *mut ChunkHeader;
            // SAFETY: the offered memory is the caller's, writable and unused (the offer's
            // contract); the header is written inside it.
            unsafe {
                (*h).limit = offer;
                (*h).map_base = offer;
                (*h).map_len = size;
            }
            // SAFETY: h was just checked non-null (it lies above `offer` > 0).
            (unsafe { NonNull::new_unchecked(h) }, size)
        } else {
            let k = self.class_for(rt, need)?;
            let size = rt.config.class_size(k);
            self.check_limit(rt, size)?;
            (self.acquire(rt, k)?, size)
        };
        self.foreign_first.set(foreign.is_some());
        // SAFETY: h is a free mapped chunk (or offered memory) now owned by this chain.
        unsafe { init_header(h.as_ptr(), thread_stack, 0, ptr::null_mut()) };
        self.active.set(true);
        self.top.set(h.as_ptr());
        self.depth.set(1);
        self.chain_bytes.set(size);
        self.used_below.set(0);
        self.set_budget(rt, thread_stack, 0);
        if rt.config.count_stats {
            rt.stats.thread_enters.fetch_add(1, Relaxed);
            rt.stats.chunk_linked(size as u64);
        }
        Ok(h)
    }

    /// Links a new chunk after `cur` (the chunk the code runs on: the newest one, or the one
    /// below the chunks compiled code unlinked by itself) for a checkpoint at `caller_sp` that
    /// needs `reserve` bytes (of any size: a larger class if need be). Returns the new header;
    /// the caller continues with chunk register = SP = that header.
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
        if let Some(h) = self.relink_hot_split(rt, cur, caller_sp, reserve) {
            return Ok(h);
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
        let used_here = top as usize - caller_sp;
        let below = self.used_below.get() + used_here;
        let growth = if fits(caller_sp, reserve, limit) {
            0
        } else {
            rt.config.growth_class(below)
        };
        let k = if reserve <= rt.config.geometry.capacity() {
            growth
        } else {
            self.class_for(rt, reserve)?.max(growth)
        };
        let size = rt.config.class_size(k);
        self.check_limit(rt, size)?;
        let h = self.acquire(rt, k)?;
        // SAFETY: h is a free mapped chunk now owned by this chain.
        unsafe { init_header(h.as_ptr(), thread_stack, caller_sp, top) };
        self.used_below.set(below);
        self.top.set(h.as_ptr());
        self.depth.set(self.depth.get() + 1);
        self.chain_bytes.set(self.chain_bytes.get() + size);
        self.set_budget(rt, thread_stack, k);
        if rt.config.count_stats {
            let s = &rt.stats;
            s.overflows.fetch_add(1, Relaxed);
            s.chunk_linked(size as u64);
            s.wasted((caller_sp - limit) as u64);
            s.peak_stack_bytes
                .fetch_max((below + reserve) as u64, Relaxed);
        }
        Ok(h)
    }

    /// The hot split: the only chunk above `cur` is a chunk compiled code unlinked, and the
    /// checkpoint wants a chunk of its class (a standard one, or the class growth gives at
    /// this depth; module docs, "Growth"). Unlinking it into the cache and taking it back
    /// (the cache is LIFO) would link the same chunk again, so it is relinked on the spot, with
    /// the same statistics. `None` when the case does not apply (or something looks wrong:
    /// the general path then checks and reports it).
    #[inline]
    fn relink_hot_split(
        &self,
        rt: &Runtime,
        cur: *mut ChunkHeader,
        caller_sp: usize,
        reserve: usize,
    ) -> Option<NonNull<ChunkHeader>> {
        let top = self.top.get();
        if top == cur || cur.is_null() || reserve > rt.config.geometry.capacity() {
            return None;
        }
        // SAFETY: top is the chain's newest chunk, mapped while linked.
        let (mark, prev, old_prev_sp, len) = unsafe {
            (
                (*top).thread_stack,
                (*top).prev_header,
                (*top).prev_sp,
                (*top).map_len,
            )
        };
        if mark != UNLINKED || prev != cur {
            return None;
        }
        // SAFETY: cur is top's predecessor in the chain, mapped while linked.
        let (limit, thread_stack) = unsafe { ((*cur).limit, (*cur).thread_stack) };
        if thread_stack == UNLINKED || caller_sp < limit || caller_sp > cur as usize {
            return None;
        }
        let k = rt.class_of(top);
        let size = rt.config.class_size(k);
        let below =
            self.used_below.get() - (cur as usize - old_prev_sp) + (cur as usize - caller_sp);
        // The class an overflow here would want: growth's, from the stack below (none for a
        // forced overflow).
        let grown = rt.config.growth_class(below);
        let want = if grown != 0 && fits(caller_sp, reserve, limit) {
            0
        } else {
            grown
        };
        if len != size + rt.config.geometry.guard_size || k != want {
            return None;
        }
        // SAFETY: top is unlinked by the code and owned by this chain; relinking it.
        unsafe { init_header(top, thread_stack, caller_sp, cur) };
        self.used_below.set(below);
        self.set_budget(rt, thread_stack, k);
        if rt.config.count_stats {
            let s = &rt.stats;
            let size = size as u64;
            s.underflows.fetch_add(1, Relaxed);
            s.chunks_unlinked(1, size);
            s.overflows.fetch_add(1, Relaxed);
            s.chunks_reused.fetch_add(1, Relaxed);
            s.chunk_linked(size);
            s.wasted((caller_sp - limit) as u64);
            s.peak_stack_bytes
                .fetch_max((below + reserve) as u64, Relaxed);
        }
        // SAFETY: an active chain has a non-null top.
        Some(unsafe { NonNull::new_unchecked(top) })
    }

    /// Unlinks the chunk `cur` the code runs on (as in [`ThreadChain::overflow`]) after its
    /// first frame returned. Returns the previous chunk's header. The caller must have read
    /// `cur`'s `prev_sp` (and `prev_header`) before: the chunk may be reused or released by the
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
        let (prev, k) = self.unlink_top(rt);
        self.trim_cache(rt, k);
        // SAFETY: prev is the chain's current chunk, mapped while linked.
        let thread_stack = unsafe { (*prev.as_ptr()).thread_stack };
        self.set_budget(rt, thread_stack, self.top_budget_class(rt));
        Ok(prev)
    }

    /// The reclaim call of compiled code whose budget ran out: the bookkeeping of the chunks
    /// above `cur` that compiled code unlinked, and a fresh budget. Returns `cur`.
    pub fn reclaim(
        &self,
        rt: &Runtime,
        cur: *mut ChunkHeader,
    ) -> Result<NonNull<ChunkHeader>, ChunkError> {
        if !self.active.get() {
            return Err(ChunkError::NotEntered);
        }
        self.reclaim_unlinked(rt, cur)?;
        if rt.config.count_stats {
            rt.stats.reclaims.fetch_add(1, Relaxed);
        }
        // reclaim_unlinked checked that `cur` is in the chain and unlinked everything above it:
        // it is the chain's (non-null) top now.
        let top = self.top.get();
        // SAFETY: top is the chain's current chunk, mapped while linked.
        let thread_stack = unsafe { (*top).thread_stack };
        self.set_budget(rt, thread_stack, self.top_budget_class(rt));
        // SAFETY: an active chain has a non-null top.
        Ok(unsafe { NonNull::new_unchecked(top) })
    }

    /// Does the bookkeeping of the chunks compiled code unlinked by itself: every chunk of the
    /// chain above `cur` (the chunk the code runs on) must be marked [`UNLINKED`], and is then
    /// unlinked as an underflow would have, newest first. Checks everything before changing
    /// anything: `cur` not in the chain, or marked itself, is a [`ChunkError::ChainMismatch`].
    fn reclaim_unlinked(&self, rt: &Runtime, cur: *mut ChunkHeader) -> Result<(), ChunkError> {
        let top = self.top.get();
        if top == cur && !cur.is_null() {
            // SAFETY: cur is the chain's top, mapped while linked.
            if unsafe { (*cur).thread_stack } != UNLINKED {
                return Ok(());
            }
        }
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
        let mut classes = 0u32;
        for _ in 0..above {
            classes |= 1 << self.unlink_top(rt).1;
        }
        while classes != 0 {
            let k = classes.trailing_zeros() as usize;
            classes &= classes - 1;
            self.trim_cache(rt, k);
        }
        Ok(())
    }

    /// Unlinks the chain's newest chunk (the chain has at least two): it goes to the thread's
    /// cache (the caller then calls [`ThreadChain::trim_cache`] for its class). Returns the new
    /// newest chunk and the class of the unlinked one.
    fn unlink_top(&self, rt: &Runtime) -> (NonNull<ChunkHeader>, usize) {
        let top = self.top.get();
        // SAFETY: top is mapped while linked; its prev_header is the previous linked chunk.
        let (prev, prev_sp) = unsafe { ((*top).prev_header, (*top).prev_sp) };
        self.used_below
            .set(self.used_below.get() - (prev as usize - prev_sp));
        self.top.set(prev);
        self.depth.set(self.depth.get() - 1);
        let k = rt.class_of(top);
        self.chain_bytes
            .set(self.chain_bytes.get() - rt.config.class_size(k));
        if rt.config.reuse {
            // SAFETY: top was just unlinked: free, mapped, owned by this thread.
            self.with_cache(k, |c| unsafe { c.push(top) });
        } else {
            rt.release_now(k, top);
        }
        if rt.config.count_stats {
            rt.stats.underflows.fetch_add(1, Relaxed);
            rt.stats.chunks_unlinked(1, rt.config.class_size(k) as u64);
        }
        // SAFETY: prev is non-null because the chain had at least two chunks.
        (unsafe { NonNull::new_unchecked(prev) }, k)
    }

    /// Leaves chunked code: after the bookkeeping of chunks compiled code unlinked, the private
    /// caches and the chain go to the shared pool. The caller must not be running on any of
    /// the chain's chunks.
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
        let n = self.depth.get();
        let bytes = self.chain_bytes.get();
        let mut h = self.top.get();
        while !h.is_null() {
            // SAFETY: chain headers are mapped while linked; after reading the link the chunk
            // is unlinked and goes to the cache of its class.
            let prev = unsafe { (*h).prev_header };
            if prev.is_null() && self.foreign_first.get() {
                break;
            }
            let k = rt.class_of(h);
            // SAFETY: h is no longer part of the chain and nothing runs on it.
            self.with_cache(k, |c| unsafe { c.push(h) });
            h = prev;
        }
        if self.worker.get() {
            for k in 0..NUM_CLASSES {
                self.trim_cache(rt, k);
            }
        } else {
            for k in 0..NUM_CLASSES {
                let all = self.caches[k].take();
                rt.give(k, all);
            }
        }
        rt.release_growth_token(self);
        self.top.set(ptr::null_mut());
        self.depth.set(0);
        self.chain_bytes.set(0);
        self.used_below.set(0);
        self.active.set(false);
        self.foreign_first.set(false);
        if !self.worker.get() {
            self.cap.set(rt.config.cache_min);
            self.refilled.set(false);
            self.released.set(0);
        }
        if rt.config.count_stats {
            rt.stats.chunks_unlinked(n as u64, bytes as u64);
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

/// Whether a checkpoint at `caller_sp` that needs `reserve` bytes fits above `limit` after all:
/// its overflow was forced (a green thread's preemption poisons the limit word), so the chunk
/// it gets is the reserve's class, never grown (module docs, "Growth"): a preempted thread
/// leaves its chunk's rest unused, and that must not cost it a grown chunk each time.
fn fits(caller_sp: usize, reserve: usize, limit: usize) -> bool {
    caller_sp
        .checked_sub(reserve.saturating_add(CHECK_SLACK))
        .is_some_and(|low| low >= limit)
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
