//! Stack statistics of the chunk mechanisms: atomic counters aggregated across threads, a
//! consistent snapshot, and the report printed on stderr at exit when `STACKRT_STATS=1`.
//!
//! Everything here is allocation-free: the counters are plain atomics, and the report is
//! formatted into a stack buffer ([`crate::chunk::msg::StackBuf`]) and written with `write(2)`,
//! so it can also be printed from the fatal-error path.

use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::chunk::msg::StackBuf;

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
    /// Chunks obtained from the system with `mmap`.
    pub chunks_mapped: AtomicU64,
    /// Chunks given back to the system with `munmap`.
    pub chunks_unmapped: AtomicU64,
    /// Chunk acquisitions satisfied from a thread's cache or the shared pool (no system call).
    pub chunks_reused: AtomicU64,
    /// Chunks currently linked into some thread's chain.
    pub chunks_in_use: AtomicU64,
    /// Maximum of `chunks_in_use` over time.
    pub peak_chunks_in_use: AtomicU64,
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
    pub chunks_mapped: u64,
    pub chunks_unmapped: u64,
    pub chunks_reused: u64,
    pub chunks_in_use: u64,
    pub peak_chunks_in_use: u64,
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
            chunks_mapped: AtomicU64::new(0),
            chunks_unmapped: AtomicU64::new(0),
            chunks_reused: AtomicU64::new(0),
            chunks_in_use: AtomicU64::new(0),
            peak_chunks_in_use: AtomicU64::new(0),
            peak_stack_bytes: AtomicU64::new(0),
            wasted_bytes_total: AtomicU64::new(0),
            wasted_bytes_max: AtomicU64::new(0),
        }
    }

    /// One more chunk linked into a chain; updates the peak.
    pub fn chunk_linked(&self) {
        let now = self.chunks_in_use.fetch_add(1, Relaxed) + 1;
        self.peak_chunks_in_use.fetch_max(now, Relaxed);
    }

    /// `n` chunks unlinked from chains.
    pub fn chunks_unlinked(&self, n: u64) {
        self.chunks_in_use.fetch_sub(n, Relaxed);
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
            chunks_mapped: self.chunks_mapped.load(Relaxed),
            chunks_unmapped: self.chunks_unmapped.load(Relaxed),
            chunks_reused: self.chunks_reused.load(Relaxed),
            chunks_in_use: self.chunks_in_use.load(Relaxed),
            peak_chunks_in_use: self.peak_chunks_in_use.load(Relaxed),
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
        writeln!(out, "stackrt:   chunks mapped         {}", s.chunks_mapped)?;
        writeln!(
            out,
            "stackrt:   chunks unmapped       {}",
            s.chunks_unmapped
        )?;
        writeln!(out, "stackrt:   chunks reused         {}", s.chunks_reused)?;
        writeln!(
            out,
            "stackrt:   peak chunks in use    {} ({} bytes)",
            s.peak_chunks_in_use,
            s.peak_chunks_in_use.saturating_mul(chunk_size as u64)
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
        let mut buf = StackBuf::<1024>::new();
        // A report that does not fit is truncated by StackBuf, never an error worth reporting.
        let _ = self.write_report(&mut buf, chunk_size);
        buf.write_to_stderr();
    }
}
