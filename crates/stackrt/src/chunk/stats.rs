//! Stack statistics of the chunk mechanisms: atomic counters aggregated across threads, a
//! consistent snapshot, and the report printed on stderr at exit when `STACKRT_STATS=1`.
//!
//! Everything here is allocation-free: the counters are plain atomics, and the report is
//! formatted into a stack buffer ([`crate::base::diag::StackBuf`]) and written with `write(2)`,
//! so it can also be printed from the fatal-error path.

use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::base::diag::StackBuf;

/// The counters. One instance per chunk runtime; the process-wide runtime owns one.
///
/// All updates are `Relaxed`: the counters are independent numbers, read only for reporting.
#[derive(Debug, Default)]
pub struct Stats {
    /// Overflows handled: a checkpoint found too little room and a new chunk was linked.
    pub overflows: AtomicU64,
    /// Underflows handled: the first frame of a chunk returned and the chunk was unlinked.
    pub underflows: AtomicU64,
    /// Threads that entered chunked code (each takes a first chunk).
    pub thread_enters: AtomicU64,
    /// Threads that left chunked code and gave their chunks back.
    pub thread_exits: AtomicU64,
    /// Chunk acquisitions served by the thread's own cache (no lock, no system call).
    pub chunks_reused: AtomicU64,
    /// Chunks taken from the shared pool (resident or released), a batch at a time.
    pub chunks_from_pool: AtomicU64,
    /// Chunks carved fresh from arenas (memory never used as stack before).
    pub chunks_carved: AtomicU64,
    /// Refills served by the pool, and gives of chunks to it: each one lock operation on the
    /// pool (a give may push several batches at once).
    pub pool_takes: AtomicU64,
    pub pool_gives: AtomicU64,
    /// Free chunks whose pages were given back to the system (`madvise`), and those bytes.
    pub chunks_released: AtomicU64,
    pub bytes_released: AtomicU64,
    /// Arenas (and dedicated mappings of very large chunks) mapped, and the bytes mapped.
    pub arenas_mapped: AtomicU64,
    pub bytes_mapped: AtomicU64,
    /// Largest chunk memory resident at once (held by threads plus resident in the pool; an
    /// upper bound: a chunk counts whole once used).
    pub peak_resident_bytes: AtomicU64,
    /// Calls of compiled code whose reclaim budget ran out.
    pub reclaims: AtomicU64,
    /// Guard-page faults of the MMU mechanisms that grew a stack (each one an overflow).
    pub faults: AtomicU64,
    /// Sleeps waiting for memory above the soft limit, and the threads that waited until the
    /// deadline and carved anyway.
    pub growth_waits: AtomicU64,
    pub growth_timeouts: AtomicU64,
    /// Chunks currently linked into some thread's chain.
    pub chunks_in_use: AtomicU64,
    /// Maximum of `chunks_in_use` over time.
    pub peak_chunks_in_use: AtomicU64,
    /// Bytes of the chunks linked into chains (chunks of larger classes count their size), and
    /// its maximum over time.
    pub bytes_in_use: AtomicU64,
    pub peak_bytes_in_use: AtomicU64,
    /// Largest stack depth of one thread in bytes, measured at overflows: the bytes used in the
    /// chunks below plus the reserve requested by the checkpoint.
    pub peak_stack_bytes: AtomicU64,
    /// Sum over all overflows of the bytes left unused at the end of the chunk being left
    /// (Capriccio's "internal wasted space").
    pub wasted_bytes_total: AtomicU64,
    /// Largest single such waste.
    pub wasted_bytes_max: AtomicU64,
}

/// A copy of the counters at one moment (each field read once; fields are not mutually atomic
/// while other threads run, but are consistent once the threads have stopped).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StatsSnapshot {
    pub overflows: u64,
    pub underflows: u64,
    pub thread_enters: u64,
    pub thread_exits: u64,
    pub chunks_reused: u64,
    pub chunks_from_pool: u64,
    pub chunks_carved: u64,
    pub pool_takes: u64,
    pub pool_gives: u64,
    pub chunks_released: u64,
    pub bytes_released: u64,
    pub arenas_mapped: u64,
    pub bytes_mapped: u64,
    pub peak_resident_bytes: u64,
    pub reclaims: u64,
    pub faults: u64,
    pub growth_waits: u64,
    pub growth_timeouts: u64,
    pub chunks_in_use: u64,
    pub peak_chunks_in_use: u64,
    pub bytes_in_use: u64,
    pub peak_bytes_in_use: u64,
    pub peak_stack_bytes: u64,
    pub wasted_bytes_total: u64,
    pub wasted_bytes_max: u64,
}

impl Stats {
    /// All counters zero; usable in a `static`.
    pub const fn new() -> Self {
        Stats {
            overflows: AtomicU64::new(0),
            underflows: AtomicU64::new(0),
            thread_enters: AtomicU64::new(0),
            thread_exits: AtomicU64::new(0),
            chunks_reused: AtomicU64::new(0),
            chunks_from_pool: AtomicU64::new(0),
            chunks_carved: AtomicU64::new(0),
            pool_takes: AtomicU64::new(0),
            pool_gives: AtomicU64::new(0),
            chunks_released: AtomicU64::new(0),
            bytes_released: AtomicU64::new(0),
            arenas_mapped: AtomicU64::new(0),
            bytes_mapped: AtomicU64::new(0),
            peak_resident_bytes: AtomicU64::new(0),
            reclaims: AtomicU64::new(0),
            faults: AtomicU64::new(0),
            growth_waits: AtomicU64::new(0),
            growth_timeouts: AtomicU64::new(0),
            chunks_in_use: AtomicU64::new(0),
            peak_chunks_in_use: AtomicU64::new(0),
            bytes_in_use: AtomicU64::new(0),
            peak_bytes_in_use: AtomicU64::new(0),
            peak_stack_bytes: AtomicU64::new(0),
            wasted_bytes_total: AtomicU64::new(0),
            wasted_bytes_max: AtomicU64::new(0),
        }
    }

    // The hot path's events: each counts only when `hot` (`RuntimeConfig::count_stats`,
    // `STACKRT_STATS=1`) is on, so a chain operation costs one test of it, as before.

    /// A chunk taken from the thread's own cache.
    #[inline(always)]
    pub fn cache_hit(&self, hot: bool) {
        if hot {
            self.chunks_reused.fetch_add(1, Relaxed);
        }
    }

    /// A thread entered chunked code with a first chunk of `bytes`.
    #[inline(always)]
    pub fn thread_entered(&self, hot: bool, bytes: usize) {
        if hot {
            self.thread_enters.fetch_add(1, Relaxed);
            self.chunk_linked(bytes as u64);
        }
    }

    /// An overflow linked a chunk of `bytes`, leaving `wasted` bytes unused at the end of the
    /// chunk it left, with `depth` bytes of stack in use (below plus the reserve).
    #[inline(always)]
    pub fn overflowed(&self, hot: bool, bytes: usize, wasted: usize, depth: usize) {
        if hot {
            self.overflows.fetch_add(1, Relaxed);
            self.chunk_linked(bytes as u64);
            self.wasted(wasted as u64);
            self.peak_stack_bytes.fetch_max(depth as u64, Relaxed);
        }
    }

    /// A hot split relinked the chunk of `bytes` compiled code had just unlinked: an underflow
    /// and an overflow served by the cache, counted as such.
    #[inline(always)]
    pub fn hot_split(&self, hot: bool, bytes: usize, wasted: usize, depth: usize) {
        if hot {
            self.underflows.fetch_add(1, Relaxed);
            self.chunks_unlinked(1, bytes as u64);
            self.chunks_reused.fetch_add(1, Relaxed);
            self.overflowed(hot, bytes, wasted, depth);
        }
    }

    /// An underflow unlinked a chunk of `bytes`.
    #[inline(always)]
    pub fn underflowed(&self, hot: bool, bytes: usize) {
        if hot {
            self.underflows.fetch_add(1, Relaxed);
            self.chunks_unlinked(1, bytes as u64);
        }
    }

    /// Compiled code's reclaim budget ran out.
    #[inline(always)]
    pub fn reclaimed(&self, hot: bool) {
        if hot {
            self.reclaims.fetch_add(1, Relaxed);
        }
    }

    /// A thread left chunked code, unlinking its last `n` chunks of `bytes` in all.
    #[inline(always)]
    pub fn thread_exited(&self, hot: bool, n: usize, bytes: usize) {
        if hot {
            self.chunks_unlinked(n as u64, bytes as u64);
            self.thread_exits.fetch_add(1, Relaxed);
        }
    }

    /// A guard-page fault of the MMU mechanisms grew a stack.
    #[inline(always)]
    pub fn fault(&self, hot: bool) {
        if hot {
            self.faults.fetch_add(1, Relaxed);
        }
    }

    /// One more chunk (of `bytes`) linked into a chain; updates the peaks.
    pub fn chunk_linked(&self, bytes: u64) {
        let now = self.chunks_in_use.fetch_add(1, Relaxed) + 1;
        self.peak_chunks_in_use.fetch_max(now, Relaxed);
        let b = self.bytes_in_use.fetch_add(bytes, Relaxed) + bytes;
        self.peak_bytes_in_use.fetch_max(b, Relaxed);
    }

    /// `n` chunks of `bytes` in all unlinked from chains.
    pub fn chunks_unlinked(&self, n: u64, bytes: u64) {
        self.chunks_in_use.fetch_sub(n, Relaxed);
        self.bytes_in_use.fetch_sub(bytes, Relaxed);
    }

    /// Records the waste at the end of a chunk left by an overflow.
    pub fn wasted(&self, bytes: u64) {
        self.wasted_bytes_total.fetch_add(bytes, Relaxed);
        self.wasted_bytes_max.fetch_max(bytes, Relaxed);
    }

    /// Reads every counter once.
    pub fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            overflows: self.overflows.load(Relaxed),
            underflows: self.underflows.load(Relaxed),
            thread_enters: self.thread_enters.load(Relaxed),
            thread_exits: self.thread_exits.load(Relaxed),
            chunks_reused: self.chunks_reused.load(Relaxed),
            chunks_from_pool: self.chunks_from_pool.load(Relaxed),
            chunks_carved: self.chunks_carved.load(Relaxed),
            pool_takes: self.pool_takes.load(Relaxed),
            pool_gives: self.pool_gives.load(Relaxed),
            chunks_released: self.chunks_released.load(Relaxed),
            bytes_released: self.bytes_released.load(Relaxed),
            arenas_mapped: self.arenas_mapped.load(Relaxed),
            bytes_mapped: self.bytes_mapped.load(Relaxed),
            peak_resident_bytes: self.peak_resident_bytes.load(Relaxed),
            reclaims: self.reclaims.load(Relaxed),
            faults: self.faults.load(Relaxed),
            growth_waits: self.growth_waits.load(Relaxed),
            growth_timeouts: self.growth_timeouts.load(Relaxed),
            chunks_in_use: self.chunks_in_use.load(Relaxed),
            peak_chunks_in_use: self.peak_chunks_in_use.load(Relaxed),
            bytes_in_use: self.bytes_in_use.load(Relaxed),
            peak_bytes_in_use: self.peak_bytes_in_use.load(Relaxed),
            peak_stack_bytes: self.peak_stack_bytes.load(Relaxed),
            wasted_bytes_total: self.wasted_bytes_total.load(Relaxed),
            wasted_bytes_max: self.wasted_bytes_max.load(Relaxed),
        }
    }
}

impl StatsSnapshot {
    /// Writes the human-readable report (several lines, each starting with `stackrt: `).
    pub fn write_report(
        &self,
        out: &mut impl core::fmt::Write,
        chunk_size: usize,
    ) -> core::fmt::Result {
        let s = self;
        writeln!(
            out,
            "stackrt: stack statistics (chunk size {chunk_size} bytes)"
        )?;
        writeln!(out, "stackrt:   overflows             {}", s.overflows)?;
        writeln!(out, "stackrt:   underflows            {}", s.underflows)?;
        writeln!(out, "stackrt:   threads entered       {}", s.thread_enters)?;
        writeln!(out, "stackrt:   chunks from cache     {}", s.chunks_reused)?;
        writeln!(
            out,
            "stackrt:   chunks from pool      {} in {} takes ({} gives)",
            s.chunks_from_pool, s.pool_takes, s.pool_gives
        )?;
        writeln!(out, "stackrt:   chunks carved         {}", s.chunks_carved)?;
        writeln!(
            out,
            "stackrt:   chunks released       {} ({} bytes)",
            s.chunks_released, s.bytes_released
        )?;
        writeln!(
            out,
            "stackrt:   arenas mapped         {} ({} bytes)",
            s.arenas_mapped, s.bytes_mapped
        )?;
        writeln!(
            out,
            "stackrt:   peak resident chunks  {} bytes",
            s.peak_resident_bytes
        )?;
        writeln!(out, "stackrt:   reclaim calls         {}", s.reclaims)?;
        writeln!(out, "stackrt:   guard faults taken    {}", s.faults)?;
        writeln!(
            out,
            "stackrt:   waits for memory      {} ({} gave up waiting)",
            s.growth_waits, s.growth_timeouts
        )?;
        writeln!(
            out,
            "stackrt:   peak chunks in use    {} ({} bytes)",
            s.peak_chunks_in_use, s.peak_bytes_in_use
        )?;
        writeln!(
            out,
            "stackrt:   peak stack bytes      {}",
            s.peak_stack_bytes
        )?;
        writeln!(
            out,
            "stackrt:   wasted at chunk ends  {} bytes total, {} max",
            s.wasted_bytes_total, s.wasted_bytes_max
        )
    }

    /// Prints the report on stderr with `write(2)`; no allocation, no lock.
    pub fn print(&self, chunk_size: usize) {
        let mut buf = StackBuf::<2048>::new();
        // A report that does not fit is truncated by StackBuf, never an error worth reporting.
        let _ = self.write_report(&mut buf, chunk_size);
        buf.write_to_stderr();
    }
}
