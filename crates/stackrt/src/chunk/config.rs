//! The chunk runtime's settings: size classes, the defaults of every tunable and
//! [`RuntimeConfig`] with its size-class and growth arithmetic (the chain module's docs,
//! "Size classes" and "Growth", say what they mean).

use super::arena::DEFAULT_ARENA_SIZE;
use super::header::{chunk_capacity, ChunkGeometry};
use crate::base::os::monotonic_ms;

/// Size classes from the standard chunk up: the standard class holds chunks of `chunk_size`
/// bytes, the `j`-th above it `chunk_size << j` bytes.
pub const NUM_CLASSES: usize = 20;

/// Most size classes below the standard chunk ([`RuntimeConfig::small_classes`]).
pub const MAX_SMALL_CLASSES: usize = 6;

/// Smallest chunk of a small class: 512 bytes, of which a checkpoint gets 432 (x86-64) or
/// 464 (i686) below the header. Go's smallest goroutine stack is 2 KiB.
pub const MIN_SMALL_CHUNK: usize = 512;

/// Size classes in all: the small ones, the standard one and those above it. Class indices
/// count from the smallest small class: the standard class is
/// [`RuntimeConfig::small_classes`] (0 when there are none).
pub const ALL_CLASSES: usize = MAX_SMALL_CLASSES + NUM_CLASSES;

// A class mask fits a `u32` (`ThreadChain::exit`, `reclaim_unlinked`).
const _: () = assert!(ALL_CLASSES <= 32);

/// Capacity in bytes of a green-thread worker's cache of one small class (at least 2 chunks):
/// the chunks that one overflow burst of its threads links.
pub const SMALL_CLASS_CACHE_BYTES: usize = 32 << 10;

/// Smallest standard-class cache capacity (chunks). One is enough for the hot split; a few
/// absorb short recursive bursts without touching the pool.
pub const DEFAULT_CACHE_MIN: usize = 4;

/// Cache capacity of the classes above 0 (large frames are rare; one cached chunk keeps a
/// call of a large-frame function in a loop off the pool). Grown chunks use these caches too:
/// a thread keeps its next deep recursion's largest chunks at hand, without a refill that
/// would wait at the soft limit. Measured on the thesis-size tree with 64 threads: with at
/// most one cached chunk of each class over 512 KiB, 1.11x `traditional`'s time (x86-64) at
/// 435 MiB; with two, 1.03x at 772 MiB (traditional: 2018 MiB); with none of 1 MiB and more,
/// about 1.16x (i686).
pub const LARGE_CLASS_CACHE: usize = 2;

/// Bytes of chunks a standard-class cache may hold at most, and a batch at most (512 KiB: 16
/// chunks of 32 KiB). Small, because it is per thread: with hundreds of threads deep at once, what
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

/// Largest chunk a deep chain grows to by default (module docs, "Growth"): 1 MiB. A
/// million-deep recursion of 32-byte frames then crosses about forty chunk boundaries instead
/// of a thousand. It was 16 MiB (about fifteen), which cost the thesis-size tree with 64
/// threads 1.6 GB of resident chunks against 0.4 GB now, and 1.2x the CPU time (x86-64; each
/// thread's spike left multi-MiB chunks in its caches), for no gain on a single deep
/// recursion (`deep_repeat.cm` 4,000,000 deep: 1.00x; thesis `tree_single`: 1.00x).
pub const DEFAULT_GROWTH_MAX_BYTES: usize = 1 << 20;

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
    /// Smallest and largest standard-class cache capacity, chunks.
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
    /// Size classes below the standard chunk, each half the one above it, down to
    /// [`MIN_SMALL_CHUNK`] at the least (chain module docs, "Small classes"); 0: none. Only a
    /// green-thread worker's chains link them, and only without guard pages (`lookahead`).
    pub small_classes: usize,
    /// Whether unlinked chunks are kept for reuse (thread caches, resident pool). `false` is
    /// the thesis's `mmu` without reuse: every unlinked chunk's pages go back to the system
    /// at once (`madvise`), and every new chunk is taken from the released ones (or carved).
    pub reuse: bool,
    /// `lookahead`: the bias of the check word every link writes into header word 4
    /// (`limit + bias`, see `super::header::OFF_CHECK`); `None`: word 4 is the MMU mechanisms'
    /// and links write 0 there.
    pub check_bias: Option<usize>,
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
            small_classes: 0,
            reuse: true,
            check_bias: None,
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

    /// The number of small classes that fit above [`MIN_SMALL_CHUNK`] below a standard chunk
    /// of `chunk_size` bytes (at most [`MAX_SMALL_CLASSES`]).
    pub fn small_classes_for(chunk_size: usize) -> usize {
        (0..MAX_SMALL_CLASSES)
            .take_while(|&j| chunk_size >> (j + 1) >= MIN_SMALL_CHUNK)
            .count()
    }

    /// The standard class (`chunk_size` bytes): the number of small classes.
    #[inline]
    pub fn std_class(&self) -> usize {
        self.small_classes
    }

    /// Bytes of a chunk of class `k`.
    #[inline]
    pub fn class_size(&self, k: usize) -> usize {
        (self.geometry.chunk_size >> self.small_classes) << k
    }

    /// Bytes a fresh chunk of class `k` offers a checkpoint's reserve.
    #[inline]
    pub fn class_capacity(&self, k: usize) -> usize {
        chunk_capacity(self.class_size(k))
    }

    /// The class of a new chunk linked for a checkpoint with `below` bytes of stack in use
    /// below it (module docs, "Growth"): the largest power-of-two multiple of the standard
    /// size of at most twice that, at most [`RuntimeConfig::growth_max`]. The standard class
    /// while less than a standard chunk is in use, or growth is off.
    #[inline]
    pub fn growth_class(&self, below: usize) -> usize {
        let cs = self.geometry.chunk_size;
        let target = below.saturating_mul(2).min(self.growth_max);
        if target < 2 * cs {
            // The hot split's usual case: two compares, no call.
            return self.small_classes;
        }
        self.grown_class(target)
    }

    #[inline(never)]
    fn grown_class(&self, target: usize) -> usize {
        (self.small_classes + (target / self.geometry.chunk_size).ilog2() as usize)
            .min(self.max_class())
    }

    /// Like [`RuntimeConfig::growth_class`] for a chain that links small classes (chain module
    /// docs, "Small classes"): below a standard chunk's worth of stack, the largest class no
    /// larger than the stack in use (at least the smallest), so that each chunk about doubles
    /// what the chain holds; from there on the lean rule, a class of at most half the stack
    /// in use (the standard class below four standard chunks' worth), so that a deep green
    /// thread holds at most about 1.5 times what it uses.
    #[inline]
    pub fn small_growth_class(&self, below: usize) -> usize {
        let unit = self.geometry.chunk_size >> self.small_classes;
        if below >= self.geometry.chunk_size {
            let target = (below / 2).min(self.growth_max);
            if target < 2 * self.geometry.chunk_size {
                return self.small_classes;
            }
            return self.grown_class(target);
        }
        if below < 2 * unit {
            return 0;
        }
        ((below / unit).ilog2() as usize).min(self.small_classes)
    }

    /// The reclaim budget while the chain's newest chunk is of class `k`: as many unlinks as
    /// give back about [`RuntimeConfig::reclaim_budget`] standard chunks' bytes (the chunks
    /// below a grown chunk are no larger than it), at least one.
    pub fn reclaim_budget_at(&self, k: usize) -> u32 {
        (self.reclaim_budget >> k.saturating_sub(self.small_classes).min(31)).max(1)
    }

    /// The smallest class from `min` up whose chunks hold `reserve` bytes below a fresh chunk's
    /// SP (`min`: the standard class for a chain that links no small classes).
    pub fn class_from(&self, min: usize, reserve: usize) -> Option<usize> {
        (min..=self.max_class()).find(|&k| self.class_capacity(k) >= reserve)
    }

    /// The largest class whose chunk size is representable (and leaves address space to spare).
    pub fn max_class(&self) -> usize {
        let cs = self.geometry.chunk_size;
        self.small_classes
            + (0..NUM_CLASSES)
                .take_while(|&k| cs <= (usize::MAX >> 2) >> k)
                .last()
                .unwrap_or(0)
    }
}

/// Bytes between the thread stack `T` and a foreign first chunk's header
/// (`ThreadChain::offer_first_chunk`): the handlers' and the runtime's frames grow down from
/// `T` into this room while the thread runs on chunks. 8 KiB holds the fatal-error path (its
/// 2 KiB report buffer and formatting) with a wide margin; pages of it that are never reached
/// are never touched.
pub const FOREIGN_HANDLER_ROOM: usize = 8 * 1024;
