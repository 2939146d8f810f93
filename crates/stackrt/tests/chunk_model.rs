//! Model-based property test of the chunk runtime (`stackrt::chunk::chain`): random sequences
//! of operations over several simulated threads (enter with a random need, overflow with a
//! random reserve, both sometimes above a standard chunk's capacity; underflow; unlinking by
//! compiled code with its reclaim budget; reclaim calls; exit; a fake clock that moves the
//! release policy's windows), with small configurations so that arenas fill up and spill,
//! batches move and the pool gives memory back. The model is plain `Vec`s: the arenas' bump
//! pointers, every thread's chain and per-class caches, the pool's batches and released lists
//! per class, the release policy's windows and peak, the statistics. It predicts every chunk's
//! address (all but the base of each new mapping, which it learns from the first chunk it sees
//! in it and then holds the mapping's other chunks to), the order of every list, every error
//! and every counter. After every step the test also checks
//! * that every carved chunk is in exactly one chain, cache or pool list, and that the carved
//!   bytes and held/pooled byte counts agree;
//! * canaries written into every page of a chunk's stack when it is linked: intact while the
//!   chunk is in a chain, a cache or the resident pool (a chunk given back with
//!   `MADV_DONTNEED` would read zeros, one handed out twice would be overwritten), zeros when a
//!   released chunk is linked again;
//! * with `mincore(2)`, that released chunks' stack pages really are not resident;
//! * the header words of every chain (order, `prev_sp`, `prev_header`, `limit`, the smallest
//!   size class that holds the reserve) and the reclaim budget word at every thread stack.
//!
//! The named tests after it pin hand-derived scenarios: the hot split, the reclaim budget, the
//! release policy over windows, page release, the memory and mapping limits, a failed carve.

mod common;

use common::NativeStack;
use std::collections::HashMap;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use proptest::prelude::*;
use stackrt::base::os::page_size;
use stackrt::chunk::arena::MAX_REGIONS;
use stackrt::chunk::config::SMALL_CLASS_CACHE_BYTES;
use stackrt::chunk::stats::StatsSnapshot;
use stackrt::chunk::{
    ChunkError, ChunkGeometry, ChunkHeader, MapError, Runtime, RuntimeConfig, ThreadChain,
    ALL_CLASSES, CHECK_SLACK, HEADER_SIZE, NUM_CLASSES, UNLINKED,
};

/// Length of a window of the release policy, in units of the tests' fake clocks.
const W: u64 = 10;

/// What a budget word holds when the runtime must not write it (no budget configured).
const UNTOUCHED: u32 = 0x5eed_5eed;

/// Bytes a fresh chunk of `size` bytes offers a checkpoint's reserve (header.rs).
fn capacity(size: usize) -> usize {
    size - HEADER_SIZE - CHECK_SLACK
}

/// Whether a checkpoint at `sp` needing `reserve` bytes fits above `limit`.
fn fits(sp: usize, reserve: usize, limit: usize) -> bool {
    sp >= limit + reserve + CHECK_SLACK
}

/// Stops transparent huge pages for this process, so that `mincore` sees exactly the pages
/// touched (a huge page would make untouched neighbours resident too).
fn no_thp() {
    // SAFETY: PR_SET_THP_DISABLE only changes this process's huge page policy.
    unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
}

/// Resident pages in `[lo, hi)` (page-aligned).
fn resident_pages(lo: usize, hi: usize) -> usize {
    let page = page_size();
    if hi <= lo {
        return 0;
    }
    let mut v = vec![0u8; (hi - lo) / page];
    // SAFETY: mincore only reads the page tables of [lo, hi), which lies in one of the
    // runtime's mappings, and writes one byte per page into `v`.
    let rc = unsafe { libc::mincore(lo as *mut libc::c_void, hi - lo, v.as_mut_ptr()) };
    assert_eq!(rc, 0, "mincore failed");
    v.iter().filter(|&&b| b & 1 != 0).count()
}

/// Reads word `i` of the header at `h`.
fn word(h: usize, i: usize) -> usize {
    // SAFETY: callers pass headers of the runtime's chunks; a header page is never given
    // back, so all 8 words are readable whatever list the chunk is in.
    unsafe { (h as *const usize).add(i).read() }
}

// ---------------------------------------------------------------------------------------
// The model.

/// One carved chunk.
#[derive(Debug)]
struct ChunkRec {
    class: usize,
    /// The mapping it was carved from and its block's offset there.
    region: usize,
    offset: usize,
    /// Header address, once seen.
    addr: Option<usize>,
    /// What the canary words of its stack pages hold: the value written when it was last
    /// linked, or `None`: zeros (never linked, or its pages were given back since).
    canary: Option<u64>,
}

#[derive(Debug)]
struct Region {
    base: Option<usize>,
    len: usize,
}

/// A chain link: the chunk and the overflow (or enter) that linked it.
#[derive(Debug)]
struct Link {
    chunk: usize,
    prev_sp: usize,
    reserve: usize,
    /// The class growth gave at its link (the chunks below it): its class is the larger of
    /// that and the smallest that holds the reserve.
    growth: usize,
    /// Linked during this step: its canary is checked against its past and written anew.
    fresh: bool,
}

/// A simulated thread: the runtime's chain and what the model knows about it.
struct MThread {
    chain: ThreadChain,
    /// A green-thread worker's chain: links small classes, keeps its caches at exit.
    worker: bool,
    stack: Box<NativeStack>,
    id: Option<u32>,
    active: bool,
    links: Vec<Link>,
    /// How many links the code still runs on (the rest, at the top, compiled code unlinked).
    running: usize,
    /// Per class, top of stack last.
    caches: Vec<Vec<usize>>,
    cap: usize,
    refilled: bool,
    released: usize,
    /// The value the budget word should hold.
    budget: u32,
}

impl MThread {
    fn new(worker: bool) -> Self {
        let chain = ThreadChain::new();
        if worker {
            chain.set_worker();
        }
        MThread {
            chain,
            worker,
            stack: Box::new(NativeStack::new(UNTOUCHED)),
            id: None,
            active: false,
            links: Vec::new(),
            running: 0,
            caches: vec![Vec::new(); ALL_CLASSES],
            cap: 0,
            refilled: false,
            released: 0,
            budget: UNTOUCHED,
        }
    }

    fn ts(&self) -> usize {
        self.stack.addr()
    }
}

struct Model {
    cfg: RuntimeConfig,
    clock: fn() -> u64,
    page: usize,
    cs: usize,
    guard: usize,
    /// The standard class (the number of small classes).
    std: usize,
    max_class: usize,
    largest: usize,
    chunks: Vec<ChunkRec>,
    by_addr: HashMap<usize, usize>,
    regions: Vec<Region>,
    /// The current arena (a region) and its bump offset and end.
    arena: Option<usize>,
    bump: usize,
    end: usize,
    mapped_bytes: usize,
    carved_bytes: usize,
    guarded_blocks: usize,
    /// Per class: resident batches (top batch last, each top last), released list (top last).
    hot: Vec<Vec<Vec<usize>>>,
    cold: Vec<Vec<usize>>,
    held: usize,
    pooled: usize,
    peak_now: usize,
    peak_before: usize,
    window_start: u64,
    next_thread: u32,
    st: StatsSnapshot,
    /// The release policy's allowance at the last trim, if nothing added memory since.
    after_trim: Option<usize>,
    seq: u64,
}

impl Model {
    fn new(cfg: RuntimeConfig, clock: fn() -> u64) -> Self {
        let cs = cfg.geometry.chunk_size;
        let std = cfg.small_classes;
        // Class std + j exists while its chunk size leaves address space to spare (a quarter
        // of it).
        let max_class = std
            + (0..NUM_CLASSES)
                .filter(|&j| cs <= (usize::MAX >> 2) >> j)
                .max()
                .unwrap();
        Model {
            cfg,
            clock,
            page: page_size(),
            cs,
            guard: cfg.geometry.guard_size,
            std,
            max_class,
            largest: capacity((cs >> std) << max_class),
            chunks: Vec::new(),
            by_addr: HashMap::new(),
            regions: Vec::new(),
            arena: None,
            bump: 0,
            end: 0,
            mapped_bytes: 0,
            carved_bytes: 0,
            guarded_blocks: 0,
            hot: vec![Vec::new(); ALL_CLASSES],
            cold: vec![Vec::new(); ALL_CLASSES],
            held: 0,
            pooled: 0,
            peak_now: 0,
            peak_before: 0,
            window_start: clock(),
            next_thread: 0,
            st: StatsSnapshot::default(),
            after_trim: None,
            seq: 0,
        }
    }

    /// Bytes of a chunk of class `k`: the standard size at class `std`, halving below it.
    fn size(&self, k: usize) -> usize {
        if k >= self.std {
            self.cs << (k - self.std)
        } else {
            self.cs >> (self.std - k)
        }
    }

    /// Whether `t` links small classes: a worker's chain, when the runtime has them.
    fn small(&self, t: &MThread) -> bool {
        t.worker && self.std > 0
    }

    fn min_class(&self, t: &MThread) -> usize {
        if self.small(t) {
            0
        } else {
            self.std
        }
    }

    fn addr(&self, c: usize) -> usize {
        self.chunks[c]
            .addr
            .unwrap_or_else(|| panic!("chunk {c} not seen yet"))
    }

    fn limit(&self, c: usize) -> usize {
        self.addr(c) + HEADER_SIZE - self.size(self.chunks[c].class)
    }

    fn class_for(&self, min: usize, reserve: usize) -> Result<usize, ChunkError> {
        (min..=self.max_class)
            .find(|&k| capacity(self.size(k)) >= reserve)
            .ok_or(ChunkError::ReserveTooLarge {
                reserve,
                largest: self.largest,
            })
    }

    /// Learns (or checks) the address of chunk `c` from where the runtime shows it.
    fn resolve(&mut self, c: usize, addr: usize) {
        if let Some(a) = self.chunks[c].addr {
            assert_eq!(addr, a, "chunk {c} is not where it was");
            return;
        }
        let rec = &self.chunks[c];
        let header_off = rec.offset + self.guard + self.size(rec.class) - HEADER_SIZE;
        let (region, len) = (rec.region, self.regions[rec.region].len);
        match self.regions[region].base {
            Some(b) => assert_eq!(
                addr,
                b + header_off,
                "chunk {c} is not at its predicted place in mapping {region}"
            ),
            None => {
                let b = addr
                    .checked_sub(header_off)
                    .expect("header below its mapping");
                assert_eq!(
                    b % self.page,
                    0,
                    "mapping {region} at {b:#x} not page-aligned"
                );
                for (i, r) in self.regions.iter().enumerate() {
                    if let Some(rb) = r.base {
                        assert!(
                            b + len <= rb || rb + r.len <= b,
                            "mapping {region} at {b:#x} overlaps mapping {i} at {rb:#x}"
                        );
                    }
                }
                self.regions[region].base = Some(b);
            }
        }
        self.chunks[c].addr = Some(addr);
        assert!(
            self.by_addr.insert(addr, c).is_none(),
            "chunk {c} at {addr:#x} has the address of another chunk"
        );
    }

    fn map(&mut self, len: usize, mapped: &mut usize) -> usize {
        self.regions.push(Region { base: None, len });
        self.mapped_bytes += len;
        *mapped += 1;
        self.regions.len() - 1
    }

    fn new_chunk(&mut self, class: usize, region: usize, offset: usize) -> usize {
        self.carved_bytes += self.guard + self.size(class);
        if self.guard != 0 {
            self.guarded_blocks += 1;
        }
        self.chunks.push(ChunkRec {
            class,
            region,
            offset,
            addr: None,
            canary: None,
        });
        self.chunks.len() - 1
    }

    /// A block of `per` chunks of class `k` at `offset` in `region`, from its low end up.
    fn new_block(
        &mut self,
        k: usize,
        per: usize,
        region: usize,
        offset: usize,
        out: &mut Vec<usize>,
    ) {
        for i in 0..per {
            let c = self.new_chunk(k, region, offset + i * self.size(k));
            out.push(c);
        }
    }

    /// Carves `n` chunks of class `k` (arena.rs and `Runtime::carve`): the limits, then blocks
    /// from the current arena's bump pointer, a new arena when it is used up (its tail first
    /// carved as standard chunks for the released list of the standard class), a mapping of
    /// its own for a block over half an arena. A small class is carved as standard blocks,
    /// each split into its chunks from the low end up. Returns the chunks in push order.
    fn carve(&mut self, k: usize, n: usize) -> Result<Vec<usize>, ChunkError> {
        let small = k < self.std;
        let (block_class, per) = if small {
            (self.std, self.cs / self.size(k))
        } else {
            (k, 1)
        };
        let size = self.size(block_class);
        let block = self.guard + size;
        let limit = self.cfg.memory_limit;
        let room = limit.saturating_sub(self.carved_bytes);
        if room < block {
            return Err(ChunkError::MemoryLimit {
                carved: self.carved_bytes,
                needed: block,
                limit,
            });
        }
        // As many as the limit admits, at least the one needed.
        let n = n.div_ceil(per).min(room / block);
        let maps = if self.guard == 0 { 1 } else { 2 };
        let mappings = self.regions.len() + self.guarded_blocks * maps;
        let more = if self.guard == 0 { 1 } else { n * maps + 1 };
        if mappings + more > self.cfg.max_mappings {
            return Err(ChunkError::MapLimit {
                mappings,
                max: self.cfg.max_mappings,
            });
        }
        let arena_size = self.cfg.arena_size;
        let mut out = Vec::new();
        let mut spill = Vec::new();
        let mut mapped = 0;
        for _ in 0..n {
            if self.carved_bytes.saturating_add(block) > limit {
                break;
            }
            if block > arena_size / 2 {
                let r = self.map(block, &mut mapped);
                self.new_block(k, per, r, 0, &mut out);
                continue;
            }
            if self.end - self.bump < block {
                let spill_block = self.guard + self.cs;
                while self.end - self.bump >= spill_block
                    && self.carved_bytes + spill_block + block <= limit
                {
                    let c = self.new_chunk(self.std, self.arena.unwrap(), self.bump);
                    spill.push(c);
                    self.bump += spill_block;
                }
                let r = self.map(arena_size, &mut mapped);
                self.arena = Some(r);
                self.bump = 0;
                self.end = arena_size;
            }
            self.new_block(k, per, self.arena.unwrap(), self.bump, &mut out);
            self.bump += block;
        }
        if mapped != 0 {
            self.st.arenas_mapped += mapped as u64;
            self.st.bytes_mapped = self.mapped_bytes as u64;
        }
        if !spill.is_empty() {
            self.st.chunks_carved += spill.len() as u64;
            self.cold[self.std].extend(spill);
        }
        self.st.chunks_carved += out.len() as u64;
        Ok(out)
    }

    /// `Runtime::refill`: resident batches until `want` chunks (whole batches), then released
    /// chunks up to `want`, all in one lock operation; else a carve.
    fn refill(&mut self, t: &mut MThread, k: usize) -> Result<(), ChunkError> {
        if k == self.std {
            let released = std::mem::take(&mut t.released);
            let cap = if released > 0 {
                released.next_power_of_two()
            } else if t.refilled {
                t.cap * 2
            } else {
                t.cap
            };
            t.cap = cap.clamp(self.cfg.cache_min, self.cfg.cache_max);
            t.refilled = true;
        }
        let want = if k <= self.std {
            (self.cache_cap(t, k) / 2).clamp(1, self.cfg.max_batch.max(1))
        } else {
            1
        };
        // Lists are top last: a spliced batch goes on top, then released chunks on top of it.
        let mut list: Vec<usize> = Vec::new();
        while list.len() < want {
            match self.hot[k].pop() {
                Some(b) => list.extend(b),
                None => break,
            }
        }
        let hot_chunks = list.len();
        while list.len() < want {
            match self.cold[k].pop() {
                Some(c) => list.push(c),
                None => break,
            }
        }
        let list = if list.is_empty() {
            self.carve(k, want)?
        } else {
            self.st.chunks_from_pool += list.len() as u64;
            self.st.pool_takes += 1;
            list
        };
        let bytes = list.len() * self.size(k);
        let hot = hot_chunks == list.len();
        self.pooled -= hot_chunks * self.size(k);
        self.held += bytes;
        self.peak_now = self.peak_now.max(self.held);
        self.st.peak_resident_bytes = self
            .st
            .peak_resident_bytes
            .max((self.held + self.pooled) as u64);
        if !hot {
            self.after_trim = None;
        }
        assert!(t.caches[k].is_empty());
        t.caches[k] = list;
        Ok(())
    }

    fn acquire(&mut self, t: &mut MThread, k: usize) -> Result<usize, ChunkError> {
        if let Some(c) = t.caches[k].pop() {
            if self.cfg.count_stats {
                self.st.chunks_reused += 1;
            }
            return Ok(c);
        }
        self.refill(t, k)?;
        Ok(t.caches[k].pop().unwrap())
    }

    /// A cache's capacity: adaptive for the standard class, 2 above it, 32 KiB of chunks (at
    /// least 2) below it.
    fn cache_cap(&self, t: &MThread, k: usize) -> usize {
        if k == self.std {
            t.cap
        } else if k > self.std {
            2
        } else {
            (SMALL_CLASS_CACHE_BYTES / self.size(k)).max(2)
        }
    }

    /// A cache over its capacity keeps its newest half and gives the rest to the pool.
    fn trim_cache(&mut self, t: &mut MThread, k: usize) {
        let cap = self.cache_cap(t, k);
        if t.caches[k].len() <= cap {
            return;
        }
        let cut = t.caches[k].len() - cap / 2;
        let rest: Vec<usize> = t.caches[k].drain(..cut).collect();
        if k == self.std {
            t.refilled = false;
            t.released += rest.len();
        }
        self.give(k, rest);
    }

    /// Gives a list (top last) to the pool as batches of at most `max_batch`, newest first,
    /// so the oldest batch ends on top; then the release policy.
    fn give(&mut self, k: usize, mut list: Vec<usize>) {
        let n = list.len();
        if n == 0 {
            return;
        }
        let max = self.cfg.max_batch.max(1);
        while !list.is_empty() {
            let keep = max.min(list.len());
            let newest = list.split_off(list.len() - keep);
            self.hot[k].push(newest);
        }
        let bytes = n * self.size(k);
        self.held -= bytes;
        self.pooled += bytes;
        self.st.pool_gives += 1;
        self.trim();
    }

    /// The release policy (chain.rs module docs): rotate the window if it is over; then, largest
    /// classes first, give resident batches back while held + resident pool is above the recent
    /// peak of held plus the floor.
    fn trim(&mut self) {
        let now = (self.clock)();
        if now.wrapping_sub(self.window_start) >= self.cfg.trim_window_ms {
            self.window_start = now;
            self.peak_before = self.peak_now;
            self.peak_now = self.held;
        }
        let allowed = self
            .peak_now
            .max(self.peak_before)
            .saturating_add(self.cfg.pool_floor);
        // Small classes stay resident.
        'classes: for k in (self.std..ALL_CLASSES).rev() {
            loop {
                if self.held + self.pooled <= allowed {
                    break 'classes;
                }
                let Some(batch) = self.hot[k].pop() else {
                    break;
                };
                let size = self.size(k);
                self.pooled -= batch.len() * size;
                self.st.chunks_released += batch.len() as u64;
                // All but the header's page go back (arena.rs release_pages).
                self.st.bytes_released += (batch.len() * size.saturating_sub(self.page)) as u64;
                for &c in &batch {
                    self.chunks[c].canary = None;
                }
                self.cold[k].extend(batch);
            }
        }
        self.after_trim = Some(allowed);
    }

    fn linked(&mut self, size: usize) {
        if self.cfg.count_stats {
            self.st.chunks_in_use += 1;
            self.st.peak_chunks_in_use = self.st.peak_chunks_in_use.max(self.st.chunks_in_use);
            self.st.bytes_in_use += size as u64;
            self.st.peak_bytes_in_use = self.st.peak_bytes_in_use.max(self.st.bytes_in_use);
        }
    }

    /// The budget word after the runtime ran for `t`: the configured budget, shifted right by
    /// the class of the newest chunk (whose unlinks give back that much more each), at least
    /// 1; the full budget while the chain is the first chunk alone.
    fn refresh_budget(&self, t: &mut MThread) {
        if self.cfg.reclaim_budget != 0 {
            let k = if t.links.len() < 2 {
                self.std
            } else {
                self.chunks[t.links.last().unwrap().chunk].class
            };
            t.budget = (self.cfg.reclaim_budget >> k.saturating_sub(self.std)).max(1);
        }
    }

    /// Growth (chain.rs): a chunk linked for a checkpoint with `below` bytes of stack in use is
    /// of the largest class whose size is at most twice that and at most `growth_max`;
    /// the standard class below one standard chunk's worth. A chain of small classes: from a
    /// standard chunk's worth on, at most half of it (the standard class below four
    /// standard chunks' worth). A chain of small classes: below
    /// a standard chunk's worth, the largest class of at most `below` bytes (the smallest one
    /// at least).
    fn growth_class(&self, t: &MThread, below: usize) -> usize {
        if self.small(t) && below < self.cs {
            let mut k = 0;
            while k < self.std && self.size(k + 1) <= below {
                k += 1;
            }
            return k;
        }
        let target = if self.small(t) {
            below / 2
        } else {
            below.saturating_mul(2)
        };
        let mut k = self.std;
        while k < self.max_class
            && self.size(k + 1) <= target
            && self.size(k + 1) <= self.cfg.growth_max
        {
            k += 1;
        }
        k
    }

    fn chain_bytes(&self, t: &MThread) -> usize {
        t.links
            .iter()
            .map(|l| self.size(self.chunks[l.chunk].class))
            .sum()
    }

    /// Stack bytes used in the chunks below the top (for the peak-stack statistic).
    fn used_below(&self, t: &MThread) -> usize {
        t.links
            .windows(2)
            .map(|w| self.addr(w[0].chunk) - w[1].prev_sp)
            .sum()
    }

    fn enter(&mut self, t: &mut MThread, need: usize) -> Result<usize, ChunkError> {
        if t.active {
            return Err(ChunkError::AlreadyEntered);
        }
        if t.id.is_none() {
            t.id = Some(self.next_thread);
            self.next_thread += 1;
            t.cap = self.cfg.cache_min;
        }
        let k = self.class_for(self.min_class(t), need)?;
        let size = self.size(k);
        if size > self.cfg.stack_limit {
            return Err(ChunkError::StackLimit {
                in_use: 0,
                needed: size,
                limit: self.cfg.stack_limit,
            });
        }
        let c = self.acquire(t, k)?;
        t.active = true;
        t.links = vec![Link {
            chunk: c,
            prev_sp: 0,
            reserve: need,
            growth: self.min_class(t),
            fresh: true,
        }];
        t.running = 1;
        self.refresh_budget(t);
        if self.cfg.count_stats {
            self.st.thread_enters += 1;
        }
        self.linked(size);
        Ok(c)
    }

    /// Checks that `cur` is the chunk the code runs on (every chunk above it marked, itself
    /// not), then does the bookkeeping of the marked ones, newest first; each class's cache is
    /// trimmed once afterwards, smallest class first.
    fn reclaim_unlinked(&mut self, t: &mut MThread, cur: usize) -> Result<(), ChunkError> {
        let top = self.addr(t.links.last().unwrap().chunk);
        let running_top = self.addr(t.links[t.running - 1].chunk);
        if cur != running_top {
            return Err(ChunkError::ChainMismatch {
                expected: top,
                got: cur,
            });
        }
        let mut classes = [false; ALL_CLASSES];
        while t.links.len() > t.running {
            classes[self.unlink_top(t)] = true;
        }
        for (k, _) in classes.iter().enumerate().filter(|(_, &b)| b) {
            self.trim_cache(t, k);
        }
        Ok(())
    }

    /// Unlinks the newest chunk into its class's cache (no trim); returns its class.
    fn unlink_top(&mut self, t: &mut MThread) -> usize {
        let l = t.links.pop().unwrap();
        let k = self.chunks[l.chunk].class;
        t.caches[k].push(l.chunk);
        t.running = t.running.min(t.links.len());
        if self.cfg.count_stats {
            self.st.underflows += 1;
            self.st.chunks_in_use -= 1;
            self.st.bytes_in_use -= self.size(k) as u64;
        }
        k
    }

    fn overflow(
        &mut self,
        t: &mut MThread,
        cur: usize,
        sp: usize,
        reserve: usize,
    ) -> Result<usize, ChunkError> {
        if !t.active {
            return Err(ChunkError::NotEntered);
        }
        // The hot split: the only chunk above `cur` is one compiled code unlinked, and a chunk
        // of its class is wanted (a standard one, or growth's class above the chunks below
        // it): it is linked again on the spot (same statistics as an underflow and an
        // overflow served by the cache).
        let n = t.links.len();
        let growth_here = if n >= 2 && !fits(sp, reserve, self.limit(t.links[n - 2].chunk)) {
            // The stack in use below the checkpoint: the chunks below `cur` up to their
            // checkpoints, and `cur` down to `sp`.
            let below: usize = t.links[..n - 1]
                .windows(2)
                .map(|w| self.addr(w[0].chunk) - w[1].prev_sp)
                .sum::<usize>()
                + self.addr(t.links[n - 2].chunk).saturating_sub(sp);
            self.growth_class(t, below)
        } else {
            self.min_class(t)
        };
        if n >= 2
            && t.running == n - 1
            && self.addr(t.links[n - 2].chunk) == cur
            && self.chunks[t.links[n - 1].chunk].class == growth_here
            && reserve <= capacity(self.size(growth_here))
            && sp >= self.limit(t.links[n - 2].chunk)
            && sp <= cur
        {
            let below_cur = self.limit(t.links[n - 2].chunk);
            let l = &mut t.links[n - 1];
            l.prev_sp = sp;
            l.reserve = reserve;
            l.growth = growth_here;
            l.fresh = true;
            let c = l.chunk;
            t.running = n;
            self.refresh_budget(t);
            if self.cfg.count_stats {
                let below = self.used_below(t);
                let st = &mut self.st;
                st.underflows += 1;
                st.overflows += 1;
                st.chunks_reused += 1;
                let waste = (sp - below_cur) as u64;
                st.wasted_bytes_total += waste;
                st.wasted_bytes_max = st.wasted_bytes_max.max(waste);
                st.peak_stack_bytes = st.peak_stack_bytes.max((below + reserve) as u64);
            }
            return Ok(c);
        }
        self.reclaim_unlinked(t, cur)?;
        let top = t.links.last().unwrap().chunk;
        let (top_addr, limit) = (self.addr(top), self.limit(top));
        if sp < limit || sp > top_addr {
            return Err(ChunkError::BadStackPointer {
                sp,
                limit,
                header: top_addr,
            });
        }
        // A forced overflow (the reserve fits the running chunk after all) is never grown.
        let growth = if fits(sp, reserve, limit) {
            self.min_class(t)
        } else {
            self.growth_class(t, self.used_below(t) + (top_addr - sp))
        };
        let k = self.class_for(growth, reserve)?;
        let size = self.size(k);
        let in_use = self.chain_bytes(t);
        if in_use + size > self.cfg.stack_limit {
            return Err(ChunkError::StackLimit {
                in_use,
                needed: size,
                limit: self.cfg.stack_limit,
            });
        }
        let c = self.acquire(t, k)?;
        t.links.push(Link {
            chunk: c,
            prev_sp: sp,
            reserve,
            growth,
            fresh: true,
        });
        t.running = t.links.len();
        self.refresh_budget(t);
        if self.cfg.count_stats {
            self.st.overflows += 1;
            let waste = (sp - limit) as u64;
            self.st.wasted_bytes_total += waste;
            self.st.wasted_bytes_max = self.st.wasted_bytes_max.max(waste);
            let below = self.used_below(t);
            self.st.peak_stack_bytes = self.st.peak_stack_bytes.max((below + reserve) as u64);
        }
        self.linked(size);
        Ok(c)
    }

    fn underflow(&mut self, t: &mut MThread, cur: usize) -> Result<usize, ChunkError> {
        if !t.active {
            return Err(ChunkError::NotEntered);
        }
        self.reclaim_unlinked(t, cur)?;
        if t.links.len() < 2 {
            return Err(ChunkError::UnderflowFirstChunk);
        }
        let k = self.unlink_top(t);
        self.trim_cache(t, k);
        self.refresh_budget(t);
        Ok(self.addr(t.links.last().unwrap().chunk))
    }

    fn reclaim(&mut self, t: &mut MThread, cur: usize) -> Result<usize, ChunkError> {
        if !t.active {
            return Err(ChunkError::NotEntered);
        }
        self.reclaim_unlinked(t, cur)?;
        if self.cfg.count_stats {
            self.st.reclaims += 1;
        }
        self.refresh_budget(t);
        Ok(cur)
    }

    fn exit(&mut self, t: &mut MThread) -> Result<(), ChunkError> {
        if !t.active {
            return Err(ChunkError::NotEntered);
        }
        while t.links.len() > 1 && t.running < t.links.len() {
            self.unlink_top(t);
        }
        let n = t.links.len() as u64;
        let bytes = self.chain_bytes(t) as u64;
        while let Some(l) = t.links.pop() {
            t.caches[self.chunks[l.chunk].class].push(l.chunk);
        }
        if t.worker {
            // A worker keeps its caches for its next thread, trimmed to their capacities.
            for k in 0..ALL_CLASSES {
                self.trim_cache(t, k);
            }
        } else {
            for k in 0..ALL_CLASSES {
                let all = std::mem::take(&mut t.caches[k]);
                self.give(k, all);
            }
            t.cap = self.cfg.cache_min;
            t.refilled = false;
            t.released = 0;
        }
        t.active = false;
        t.running = 0;
        if self.cfg.count_stats {
            self.st.chunks_in_use -= n;
            self.st.bytes_in_use -= bytes;
            self.st.thread_exits += 1;
        }
        Ok(())
    }

    /// Compares a list of the model (pop order) with the runtime's, learning new addresses.
    fn match_list(&mut self, what: &str, want: &[usize], got: &[usize]) {
        assert_eq!(
            want.len(),
            got.len(),
            "{what}: model has {want:?}, runtime {got:x?}"
        );
        for (&c, &a) in want.iter().zip(got) {
            self.resolve(c, a);
        }
    }

    /// The canary words of chunk `c`: the first word of every stack page below its header's;
    /// for a small chunk (never given back), its lowest word.
    fn canary_words(&self, c: usize) -> impl Iterator<Item = usize> {
        let header_page = self.addr(c) & !(self.page - 1);
        let end = if self.chunks[c].class < self.std {
            self.limit(c) + 1
        } else {
            header_page
        };
        (self.limit(c)..end).step_by(self.page)
    }

    fn check_canary(&self, c: usize, what: &str) {
        let want = self.chunks[c].canary.unwrap_or(0);
        for a in self.canary_words(c) {
            // SAFETY: a stack page of a chunk that is in a chain, a cache or the resident pool:
            // mapped read-write, and nothing else writes it.
            let v = unsafe { ptr::read_volatile(a as *const u64) };
            assert_eq!(
                v,
                want,
                "{what}: chunk {c} at {:#x}: word at {a:#x} is {v:#x}, expected {want:#x} \
                 (0: pages given back or never used)",
                self.addr(c)
            );
        }
    }

    fn write_canary(&mut self, c: usize) {
        self.seq += 1;
        let v = 0xc0de_0000_0000_0000 | self.seq;
        for a in self.canary_words(c) {
            // SAFETY: a stack page of a chunk just linked into a simulated chain, which owns it.
            unsafe { ptr::write_volatile(a as *mut u64, v) };
        }
        self.chunks[c].canary = Some(v);
    }
}

// ---------------------------------------------------------------------------------------
// Comparing the model with the runtime after every step.

fn check(rt: &Runtime, m: &mut Model, threads: &mut [MThread]) {
    let mut seen = vec![0u32; m.chunks.len()];
    let mut held = 0;
    for (i, t) in threads.iter().enumerate() {
        let want: Vec<usize> = t.links.iter().rev().map(|l| l.chunk).collect();
        m.match_list(
            &format!("chain of thread {i}"),
            &want,
            &t.chain.chain_headers(),
        );
        let want: Vec<usize> = t
            .caches
            .iter()
            .flat_map(|c| c.iter().rev().copied())
            .collect();
        m.match_list(
            &format!("caches of thread {i}"),
            &want,
            &t.chain.cache_headers(),
        );
        for c in t.links.iter().map(|l| l.chunk).chain(want) {
            seen[c] += 1;
            held += m.size(m.chunks[c].class);
        }
        assert_eq!(t.chain.is_active(), t.active, "thread {i} active");
        assert_eq!(t.chain.depth(), t.links.len(), "thread {i} depth");
        let top = t.links.last().map_or(0, |l| m.addr(l.chunk));
        assert_eq!(t.chain.top() as usize, top, "thread {i} top");
        assert_eq!(t.chain.cache_capacity(), t.cap, "thread {i} cache capacity");
        assert_eq!(t.chain.cache_len(rt), t.caches[m.std].len());
        assert_eq!(
            t.chain.cache_len_all(),
            t.caches.iter().map(Vec::len).sum::<usize>()
        );
        assert_eq!(t.chain.id(), t.id.unwrap_or(u32::MAX), "thread {i} id");
        assert_eq!(t.stack.budget(), t.budget, "budget word of thread {i}");
        for (j, l) in t.links.iter().enumerate() {
            let h = m.addr(l.chunk);
            let what = format!("thread {i} chain[{j}] at {h:#x}");
            let want0 = if j < t.running { t.ts() } else { UNLINKED };
            assert_eq!(word(h, 0), want0, "{what}: word 0");
            let (prev_sp, prev) = if j == 0 {
                (0, 0)
            } else {
                (l.prev_sp, m.addr(t.links[j - 1].chunk))
            };
            assert_eq!(word(h, 1), prev_sp, "{what}: prev_sp");
            assert_eq!(word(h, 2), prev, "{what}: prev_header");
            assert_eq!(word(h, 4), 0, "{what}: resume");
            // The chunk after it in the chain, linked or marked (the handlers' hot split reads
            // it), or null for the newest.
            let after = t.links.get(j + 1).map_or(0, |n| m.addr(n.chunk));
            assert_eq!(word(h, 7), after, "{what}: link");
            // The smallest class that holds the reserve (standard chunks for small ones), or
            // growth's class if that is larger.
            let k = m.chunks[l.chunk].class;
            assert!(
                capacity(m.size(k)) >= l.reserve,
                "{what}: class {k} for reserve {}",
                l.reserve
            );
            assert!(
                k == l.growth || capacity(m.size(k - 1)) < l.reserve,
                "{what}: class {k} too big (growth gave {})",
                l.growth
            );
            assert!(
                k >= l.growth,
                "{what}: class {k} below growth's {}",
                l.growth
            );
            assert!(
                h - word(h, 3) >= l.reserve + CHECK_SLACK,
                "{what}: limit leaves no room"
            );
        }
    }
    let mut pooled = 0;
    for k in 0..ALL_CLASSES {
        let (hot, cold) = rt.pool_headers(k);
        let want_hot: Vec<usize> = m.hot[k]
            .iter()
            .rev()
            .flat_map(|b| b.iter().rev().copied())
            .collect();
        let want_cold: Vec<usize> = m.cold[k].iter().rev().copied().collect();
        m.match_list(&format!("pool of class {k}, resident"), &want_hot, &hot);
        m.match_list(&format!("pool of class {k}, released"), &want_cold, &cold);
        assert_eq!(rt.pool_class_len(k), (want_hot.len(), want_cold.len()));
        for &c in want_hot.iter().chain(&want_cold) {
            seen[c] += 1;
        }
        pooled += want_hot.len() * m.size(k);
    }
    // No chunk lost, none in two places.
    for (c, &n) in seen.iter().enumerate() {
        assert_eq!(n, 1, "chunk {c} ({:?}) is in {n} lists", m.chunks[c]);
    }
    assert_eq!(
        rt.pool_len(),
        m.hot.iter().flatten().flatten().count() + m.cold.iter().flatten().count()
    );
    // Every chunk is where its mapping and offset put it, with constant words intact.
    for c in 0..m.chunks.len() {
        let h = m.addr(c);
        let r = &m.chunks[c];
        let base = m.regions[r.region].base.unwrap() + r.offset;
        let size = m.size(r.class);
        assert_eq!(word(h, 5), base, "chunk {c}: map_base");
        assert_eq!(word(h, 6), m.guard + size, "chunk {c}: map_len");
        assert_eq!(word(h, 3), base + m.guard, "chunk {c}: limit");
        assert_eq!(h, base + m.guard + size - HEADER_SIZE);
        assert_eq!(h % 16, 0);
        assert!(rt.owns(base) && rt.owns(h), "chunk {c} outside the arenas");
    }
    let blocks: usize = m.chunks.iter().map(|r| m.guard + m.size(r.class)).sum();
    assert_eq!(blocks, m.carved_bytes);
    assert_eq!(
        rt.arena_usage(),
        (m.regions.len(), m.mapped_bytes, m.carved_bytes),
        "arena usage (mappings, mapped bytes, carved bytes)"
    );
    assert_eq!(m.held, held, "model: held bytes");
    assert_eq!(m.pooled, pooled, "model: pooled bytes");
    assert_eq!(rt.held_bytes(), held, "held bytes");
    assert_eq!(rt.pooled_resident_bytes(), pooled, "resident pool bytes");
    assert_eq!(rt.stats().snapshot(), m.st, "statistics");
    assert_eq!(m.st.chunks_carved, m.chunks.len() as u64);
    // The release policy, right after the pool's last give or trim: what stays resident is
    // within the recent peak plus the floor, unless no resident batch is left to give back.
    if let Some(allowed) = m.after_trim {
        let resident = rt.held_bytes() + rt.pooled_resident_bytes();
        assert!(
            resident <= allowed || m.hot.iter().all(Vec::is_empty),
            "{resident} bytes resident after a trim, allowed {allowed}"
        );
    }
    // Canaries: intact in chains, caches and the resident pool (zeros where never written).
    for t in threads.iter() {
        for c in t
            .links
            .iter()
            .map(|l| l.chunk)
            .chain(t.caches.iter().flatten().copied())
        {
            m.check_canary(c, "held chunk");
        }
    }
    for c in m.hot.iter().flatten().flatten() {
        m.check_canary(*c, "resident pool chunk");
    }
    // Released chunks: their stack pages are not resident (never touched or given back).
    for c in m.cold.iter().flatten() {
        let header_page = m.addr(*c) & !(m.page - 1);
        assert_eq!(
            resident_pages(m.limit(*c), header_page),
            0,
            "released chunk {c} at {:#x} still has resident stack pages",
            m.addr(*c)
        );
    }
    // New links get a new canary.
    for t in threads.iter_mut() {
        for l in t.links.iter_mut().filter(|l| l.fresh) {
            m.write_canary(l.chunk);
            l.fresh = false;
        }
    }
}

// ---------------------------------------------------------------------------------------
// Operations.

#[derive(Clone, Debug)]
enum Op {
    /// A new thread enters chunked code; a worker's chain (small classes, caches kept at exit)
    /// or not.
    Start {
        need: usize,
        worker: bool,
    },
    /// Enter on an existing chain: again after its exit, or twice (an error).
    Reenter {
        t: usize,
        need: usize,
    },
    Exit(usize),
    /// Overflow on thread `t` at `frac`/65535 of the way from the running chunk's limit to its
    /// header.
    Overflow {
        t: usize,
        frac: u16,
        reserve: usize,
    },
    Underflow(usize),
    /// What emitted `lookahead` code does when the first frame of a chunk returns: SP and the
    /// chunk register go back to the previous chunk, word 0 is marked, the budget word is
    /// decremented, and the reclaim handler is called when it reaches zero.
    CodeUnlink(usize),
    /// An explicit reclaim call on the running chunk.
    Reclaim(usize),
    /// The clock advances (less than a window), and the pool's policy runs.
    Tick(u64),
    /// Overflow and underflow given a header that is not the chunk the code runs on.
    WrongHeader(usize),
    /// Overflows with a caller SP outside the running chunk.
    WildSp(usize),
}

fn op_strategy(cap0: usize) -> impl Strategy<Value = Op> {
    let reserve = prop_oneof![
        14 => 0..=cap0,
        5 => cap0 + 1..=6 * cap0 + 200,
        1 => Just(usize::MAX / 2),
    ];
    let need = prop_oneof![
        10 => 0..=cap0,
        3 => cap0 + 1..=4 * cap0,
        1 => Just(usize::MAX / 2),
    ];
    prop_oneof![
        2 => (need.clone(), any::<bool>()).prop_map(|(need, worker)| Op::Start { need, worker }),
        1 => (any::<usize>(), need).prop_map(|(t, need)| Op::Reenter { t, need }),
        1 => any::<usize>().prop_map(Op::Exit),
        10 => (any::<usize>(), any::<u16>(), reserve)
            .prop_map(|(t, frac, reserve)| Op::Overflow { t, frac, reserve }),
        3 => any::<usize>().prop_map(Op::Underflow),
        4 => any::<usize>().prop_map(Op::CodeUnlink),
        1 => any::<usize>().prop_map(Op::Reclaim),
        3 => prop_oneof![0..W, Just(W - 1)].prop_map(Op::Tick),
        1 => any::<usize>().prop_map(Op::WrongHeader),
        1 => any::<usize>().prop_map(Op::WildSp),
    ]
}

fn settle(
    m: &mut Model,
    what: &str,
    got: Result<NonNull<ChunkHeader>, ChunkError>,
    want: Result<usize, ChunkError>,
) {
    match (got, want) {
        (Ok(h), Ok(c)) => m.resolve(c, h.as_ptr() as usize),
        (Err(e), Err(w)) => assert_eq!(e, w, "{what}"),
        (g, w) => panic!("{what}: runtime gave {g:?}, model expected {w:?}"),
    }
}

fn settle_addr(
    what: &str,
    got: Result<NonNull<ChunkHeader>, ChunkError>,
    want: Result<usize, ChunkError>,
) {
    assert_eq!(got.map(|h| h.as_ptr() as usize), want, "{what}");
}

/// The header the code runs on, or null for a thread that is not running on chunks.
fn running(m: &Model, t: &MThread) -> usize {
    if t.active {
        m.addr(t.links[t.running - 1].chunk)
    } else {
        0
    }
}

fn step(rt: &Runtime, m: &mut Model, threads: &mut Vec<MThread>, op: &Op, clock: &AtomicU64) {
    let n = threads.len();
    match *op {
        Op::Start { need, worker } => {
            let mut t = MThread::new(worker);
            let got = t.chain.enter(rt, t.ts(), need);
            let want = m.enter(&mut t, need);
            settle(m, "enter", got, want);
            threads.push(t);
        }
        Op::Reenter { t, need } if n > 0 => {
            let t = &mut threads[t % n];
            let got = t.chain.enter(rt, t.ts(), need);
            let want = m.enter(t, need);
            settle(m, "enter again", got, want);
        }
        Op::Exit(t) if n > 0 => {
            let t = &mut threads[t % n];
            let got = t.chain.exit(rt);
            assert_eq!(got, m.exit(t), "exit");
        }
        Op::Overflow { t, frac, reserve } if n > 0 => {
            let t = &mut threads[t % n];
            let (cur, sp) = if t.active {
                let c = t.links[t.running - 1].chunk;
                let (cur, limit) = (m.addr(c), m.limit(c));
                let sp = limit + ((cur - limit) as u64 * frac as u64 / 65535) as usize;
                (cur, sp)
            } else {
                (0, 0)
            };
            let got = t.chain.overflow(rt, cur as *mut ChunkHeader, sp, reserve);
            let want = m.overflow(t, cur, sp, reserve);
            settle(m, "overflow", got, want);
        }
        Op::Underflow(t) if n > 0 => {
            let t = &mut threads[t % n];
            let cur = running(m, t);
            let got = t.chain.underflow(rt, cur as *mut ChunkHeader);
            let want = m.underflow(t, cur);
            settle_addr("underflow", got, want);
        }
        Op::CodeUnlink(t) if n > 0 => {
            let t = &mut threads[t % n];
            if t.active && t.running > 1 {
                let h = m.addr(t.links[t.running - 1].chunk);
                // SAFETY: a running chunk of the chain: mapped; emitted code writes this word
                // the same way.
                unsafe { (h as *mut usize).write(UNLINKED) };
                t.running -= 1;
                if m.cfg.reclaim_budget != 0 {
                    let b = t.stack.budget();
                    assert!(b > 0, "budget word is {b} at an unlink");
                    t.stack.set_budget(b - 1);
                    t.budget = b - 1;
                    if b == 1 {
                        let cur = running(m, t);
                        let got = t.chain.reclaim(rt, cur as *mut ChunkHeader);
                        let want = m.reclaim(t, cur);
                        settle_addr("reclaim at budget 0", got, want);
                    }
                }
            }
        }
        Op::Reclaim(t) if n > 0 => {
            let t = &mut threads[t % n];
            let cur = running(m, t);
            let got = t.chain.reclaim(rt, cur as *mut ChunkHeader);
            let want = m.reclaim(t, cur);
            settle_addr("reclaim", got, want);
        }
        Op::Tick(dt) => {
            clock.fetch_add(dt, Relaxed);
            rt.trim();
            m.trim();
        }
        Op::WrongHeader(t) if n > 0 => {
            let t = &threads[t % n];
            if !t.active {
                return;
            }
            // Errors found before anything changes: the model does not move.
            let top = m.addr(t.links.last().unwrap().chunk);
            let mismatch = |got| Err(ChunkError::ChainMismatch { expected: top, got });
            // A chunk compiled code unlinked is no longer one the code can run on...
            if t.running < t.links.len() {
                let unlinked = m.addr(t.links[t.running].chunk);
                let got = t
                    .chain
                    .overflow(rt, unlinked as *mut ChunkHeader, unlinked - 64, 0);
                settle_addr("overflow on an unlinked chunk", got, mismatch(unlinked));
                let got = t.chain.reclaim(rt, unlinked as *mut ChunkHeader);
                settle_addr("reclaim on an unlinked chunk", got, mismatch(unlinked));
            }
            // ...nor is one below a chunk it still runs on...
            if t.running >= 2 {
                let older = m.addr(t.links[t.running - 2].chunk);
                let got = t.chain.underflow(rt, older as *mut ChunkHeader);
                settle_addr("underflow below the running chunk", got, mismatch(older));
                let got = t
                    .chain
                    .overflow(rt, older as *mut ChunkHeader, older - 64, 0);
                settle_addr("overflow below the running chunk", got, mismatch(older));
            }
            // ...nor anything else.
            let wrong = top ^ 0x40;
            let got = t.chain.overflow(rt, wrong as *mut ChunkHeader, top, 0);
            settle_addr("overflow on a wrong header", got, mismatch(wrong));
            let got = t.chain.underflow(rt, wrong as *mut ChunkHeader);
            settle_addr("underflow on a wrong header", got, mismatch(wrong));
            let got = t.chain.underflow(rt, ptr::null_mut());
            settle_addr("underflow on null", got, mismatch(0));
        }
        Op::WildSp(t) if n > 0 => {
            let t = &mut threads[t % n];
            if !t.active {
                return;
            }
            let c = t.links[t.running - 1].chunk;
            let (cur, limit) = (m.addr(c), m.limit(c));
            for sp in [limit - 8, cur + 8] {
                let got = t.chain.overflow(rt, cur as *mut ChunkHeader, sp, 0);
                let want = m.overflow(t, cur, sp, 0);
                assert!(want.is_err());
                settle(m, "overflow with a wild SP", got, want);
            }
        }
        _ => {}
    }
}

static MODEL_CLOCK: AtomicU64 = AtomicU64::new(0);

fn model_clock() -> u64 {
    MODEL_CLOCK.load(Relaxed)
}

#[derive(Clone, Copy, Debug)]
struct Params {
    guard: bool,
    arena_blocks: usize,
    arena_extra_pages: usize,
    cache_min: usize,
    cache_span: usize,
    max_batch: usize,
    floor_chunks: usize,
    budget: u32,
    limit_chunks: usize,
    count_stats: bool,
    max_mappings: usize,
    /// `growth_max` in standard chunks (0 and 1: no growth).
    growth_chunks: usize,
    /// Small classes (without guard pages only).
    small: bool,
}

fn params() -> impl Strategy<Value = Params> {
    (
        any::<bool>(),
        3usize..=10,
        0usize..=2,
        0usize..=3,
        0usize..=5,
        0usize..=4,
        0usize..=2,
        0u32..=4,
        3usize..=30,
        prop::bool::weighted(0.85),
        prop_oneof![3 => Just(usize::MAX / 2), 1 => 4usize..40],
        (
            prop_oneof![Just(0usize), Just(2), Just(4), Just(8)],
            any::<bool>(),
        ),
    )
        .prop_map(|t| Params {
            guard: t.0,
            arena_blocks: t.1,
            arena_extra_pages: t.2,
            cache_min: t.3,
            cache_span: t.4,
            max_batch: t.5,
            floor_chunks: t.6,
            budget: t.7,
            limit_chunks: t.8,
            count_stats: t.9,
            max_mappings: t.10,
            growth_chunks: t.11 .0,
            small: t.11 .1,
        })
}

fn model_config(p: &Params) -> RuntimeConfig {
    let page = page_size();
    let geometry = ChunkGeometry::new(2 * page, if p.guard { page } else { 0 }).unwrap();
    let cs = geometry.chunk_size;
    let mut cfg = RuntimeConfig::new(geometry, p.limit_chunks * cs, p.max_mappings);
    cfg.memory_limit = usize::MAX;
    cfg.arena_size = p.arena_blocks * geometry.map_len() + p.arena_extra_pages * page;
    cfg.cache_min = p.cache_min;
    cfg.cache_max = p.cache_min + p.cache_span;
    cfg.max_batch = p.max_batch;
    cfg.pool_floor = p.floor_chunks * cs;
    cfg.trim_window_ms = W;
    cfg.clock = model_clock;
    cfg.reclaim_budget = p.budget;
    cfg.count_stats = p.count_stats;
    cfg.growth_max = p.growth_chunks * cs;
    if p.small && !p.guard {
        cfg.small_classes = RuntimeConfig::small_classes_for(cs);
    }
    cfg
}

fn run(p: Params, ops: Vec<Op>) {
    no_thp();
    MODEL_CLOCK.store(1000, Relaxed);
    let cfg = model_config(&p);
    let rt = Runtime::new(cfg);
    let mut m = Model::new(cfg, model_clock);
    let mut threads: Vec<MThread> = Vec::new();
    for op in &ops {
        step(&rt, &mut m, &mut threads, op, &MODEL_CLOCK);
        check(&rt, &mut m, &mut threads);
    }
    // Every thread leaves; then the pool holds every chunk, and nothing is held or in use.
    for i in 0..threads.len() {
        if threads[i].active {
            let t = &mut threads[i];
            assert_eq!(t.chain.exit(&rt), m.exit(t));
            check(&rt, &mut m, &mut threads);
        }
        let t = &threads[i];
        assert_eq!(t.chain.exit(&rt), Err(ChunkError::NotEntered));
        assert!(t.chain.top().is_null());
    }
    // Workers keep their caches (trimmed); everything else is in the pool.
    let cached: Vec<usize> = threads
        .iter()
        .flat_map(|t| t.caches.iter().flatten().copied())
        .collect();
    assert!(threads
        .iter()
        .all(|t| t.worker || t.chain.cache_len_all() == 0));
    let cached_bytes: usize = cached.iter().map(|&c| m.size(m.chunks[c].class)).sum();
    assert_eq!(rt.held_bytes(), cached_bytes);
    assert_eq!(rt.pool_len() + cached.len(), m.chunks.len());
    let st = rt.stats().snapshot();
    assert_eq!((st.chunks_in_use, st.bytes_in_use), (0, 0));
    if p.count_stats {
        assert_eq!(st.thread_enters, st.thread_exits);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn runtime_follows_the_model(
        p in params(),
        ops in prop::collection::vec(op_strategy(capacity(2 * page_size())), 1..200),
    ) {
        run(p, ops);
    }
}

// ---------------------------------------------------------------------------------------
// Hand-derived scenarios.

/// Standard chunks of `pages` pages, no guard, no limits, the policy on `clock` with windows
/// of [`W`] and no floor, and the default caches.
fn config(pages: usize, clock: fn() -> u64) -> RuntimeConfig {
    let geometry = ChunkGeometry::new(pages * page_size(), 0).unwrap();
    let mut cfg = RuntimeConfig::new(geometry, usize::MAX / 2, usize::MAX / 2);
    cfg.clock = clock;
    cfg.trim_window_ms = W;
    cfg.pool_floor = 0;
    cfg
}

/// The thread enters and goes `depth - 1` overflows deep (reserve 0, SP 64 bytes below each
/// header); returns the chain's headers, first first.
fn dive(rt: &Runtime, chain: &ThreadChain, ts: usize, depth: usize) -> Vec<*mut ChunkHeader> {
    let mut hs = vec![chain.enter(rt, ts, 0).unwrap().as_ptr()];
    for _ in 1..depth {
        let cur = *hs.last().unwrap();
        hs.push(
            chain
                .overflow(rt, cur, cur as usize - 64, 0)
                .unwrap()
                .as_ptr(),
        );
    }
    hs
}

/// A green-thread worker's chain grows geometrically from 512 bytes (chain.rs, "Small
/// classes"); an OS thread's chain in the same runtime starts at a standard chunk. Each
/// overflow here is 64 bytes above the running chunk's limit with a reserve of 64 (so it does
/// not fit), so a chunk of S bytes holds S - 64 (header) - 64 bytes of stack below the next
/// one. Hand-derived with the rule "the largest class no larger than the stack in use, at
/// least 512, up to 32 KiB": in use 384 -> 512; 768 -> 512; 1152 -> 1 KiB; 2048 -> 2 KiB;
/// 3968 -> 2 KiB; 5888 -> 4 KiB; 9856 -> 8 KiB; 17920 -> 16 KiB; 34176 -> 32 KiB (the standard
/// chunk; a worker's growth beyond it starts at four standard chunks in use).
#[cfg(target_pointer_width = "64")]
#[test]
fn worker_chains_grow_geometrically_from_small_classes() {
    static CLOCK: AtomicU64 = AtomicU64::new(0);
    fn clock() -> u64 {
        CLOCK.load(Relaxed)
    }
    let mut cfg = config(32 * 1024 / page_size(), clock);
    cfg.small_classes = RuntimeConfig::small_classes_for(cfg.geometry.chunk_size);
    cfg.growth_max = 16 << 20;
    assert_eq!(cfg.small_classes, 6);
    let rt = Runtime::new(cfg);
    let stack = Box::new(NativeStack::new(UNTOUCHED));
    let sizes = |chain: &ThreadChain| -> Vec<usize> {
        let mut v: Vec<usize> = chain
            .chain_headers()
            .iter()
            // SAFETY: the chain's headers are mapped while linked.
            .map(|&h| unsafe { (*(h as *const ChunkHeader)).map_len })
            .collect();
        v.reverse();
        v
    };
    let worker = ThreadChain::new();
    worker.set_worker();
    let mut cur = worker.enter(&rt, stack.addr(), 100).unwrap().as_ptr();
    for _ in 0..9 {
        // SAFETY: cur is the chain's newest chunk, mapped.
        let limit = unsafe { (*cur).limit };
        cur = worker.overflow(&rt, cur, limit + 64, 64).unwrap().as_ptr();
    }
    let k = 1024;
    assert_eq!(
        sizes(&worker),
        [512, 512, 512, k, 2 * k, 2 * k, 4 * k, 8 * k, 16 * k, 32 * k]
    );
    // The hot split at a small chunk's boundary: the chunk compiled code unlinked is linked
    // again, nothing is carved.
    let mut hs = worker.chain_headers();
    hs.reverse();
    hs.truncate(5);
    while worker.depth() > 5 {
        let top = worker.top();
        // SAFETY: the newest chunk of the chain, mapped; emitted code marks it so.
        unsafe { (*top).thread_stack = UNLINKED };
        // SAFETY: as above.
        let prev = unsafe { (*top).prev_header };
        worker.reclaim(&rt, prev).unwrap();
    }
    let below = *hs.last().unwrap() as *mut ChunkHeader;
    // SAFETY: a chunk of the chain, mapped.
    let limit = unsafe { (*below).limit };
    let carved = rt.stats().snapshot().chunks_carved;
    let first = worker
        .overflow(&rt, below, limit + 64, 64)
        .unwrap()
        .as_ptr();
    for _ in 0..1000 {
        // SAFETY: the newest chunk, mapped; marked as emitted code does.
        unsafe { (*first).thread_stack = UNLINKED };
        let h = worker
            .overflow(&rt, below, limit + 64, 64)
            .unwrap()
            .as_ptr();
        assert_eq!(h, first);
    }
    assert_eq!(rt.stats().snapshot().chunks_carved, carved);
    worker.exit(&rt).unwrap();
    // Not a worker: standard chunks only, whatever the need.
    let os = ThreadChain::new();
    let first = os.enter(&rt, stack.addr(), 100).unwrap().as_ptr();
    // SAFETY: the chain's first chunk, mapped.
    let limit = unsafe { (*first).limit };
    os.overflow(&rt, first, limit + 64, 64).unwrap();
    assert_eq!(sizes(&os), [32 * k, 32 * k]);
    os.exit(&rt).unwrap();
}

/// Runs 10 000 overflows at one boundary of a fresh thread, each followed by `unlink` (given
/// the chain, the runtime and the new chunk); returns the runtime and the chain, still entered.
fn hot_split(
    budget: u32,
    unlink: impl Fn(&ThreadChain, &Runtime, *mut ChunkHeader, *mut ChunkHeader),
) -> (Runtime, ThreadChain, Box<NativeStack>) {
    static CLOCK: AtomicU64 = AtomicU64::new(0);
    fn clock() -> u64 {
        CLOCK.load(Relaxed)
    }
    let mut cfg = config(8, clock);
    cfg.reclaim_budget = budget;
    let rt = Runtime::new(cfg);
    let chain = ThreadChain::new();
    let stack = Box::new(NativeStack::new(UNTOUCHED));
    let first = chain.enter(&rt, stack.addr(), 0).unwrap();
    let sp = first.as_ptr() as usize - 100;
    let mut seen = std::collections::HashSet::new();
    for _ in 0..10_000 {
        let h = chain.overflow(&rt, first.as_ptr(), sp, 1000).unwrap();
        seen.insert(h.as_ptr() as usize);
        unlink(&chain, &rt, h.as_ptr(), first.as_ptr());
    }
    let st = rt.stats().snapshot();
    // The enter carved a batch of cache_min / 2 = 2 chunks: the first chunk and one in the
    // cache, which every overflow links again.
    assert_eq!(seen.len(), 1);
    assert_eq!(st.chunks_carved, 2);
    assert_eq!(st.chunks_reused, 10_000);
    assert_eq!(
        (st.pool_takes, st.pool_gives, st.chunks_from_pool),
        (0, 0, 0)
    );
    assert_eq!(rt.arena_usage().0, 1);
    (rt, chain, stack)
}

/// The hot split: overflow/underflow pairs at one boundary reuse one cached chunk: no lock,
/// no carving after the first batch.
#[test]
fn hot_split_carves_once() {
    let (rt, chain, _stack) = hot_split(0, |chain, rt, h, first| {
        assert_eq!(chain.underflow(rt, h).unwrap().as_ptr(), first);
    });
    let st = rt.stats().snapshot();
    assert_eq!((st.overflows, st.underflows), (10_000, 10_000));
    chain.exit(&rt).unwrap();
}

/// The hot split as emitted `lookahead` code does it: the unlinking is only the mark, and the
/// next overflow does its bookkeeping. Same chunk, same statistics as with the handler.
#[test]
fn hot_split_unlinked_by_code_carves_once() {
    let (rt, chain, _stack) = hot_split(0, |_, _, h, _| {
        // SAFETY: h is the newest chunk of the chain, mapped.
        unsafe { (*h).thread_stack = UNLINKED };
    });
    let st = rt.stats().snapshot();
    // The last unlinking is still pending; the exit does it.
    assert_eq!((st.overflows, st.underflows), (10_000, 9_999));
    assert_eq!(chain.depth(), 2);
    chain.exit(&rt).unwrap();
    let st = rt.stats().snapshot();
    assert_eq!((st.overflows, st.underflows), (10_000, 10_000));
    assert_eq!((st.chunks_in_use, st.bytes_in_use), (0, 0));
}

/// Every overflow refills the reclaim budget, so a hot split unlinked by code never runs it
/// out: with a budget of 2 the word goes 2, 1, 2, 1, ... and the reclaim handler is never due.
#[test]
fn hot_split_never_calls_reclaim() {
    let (rt, chain, stack) = hot_split(2, |_, _, h, _| {
        // SAFETY: h is the newest chunk of the chain, mapped.
        unsafe { (*h).thread_stack = UNLINKED };
        let stack = stack_of(h);
        assert_eq!(stack.budget(), 2, "the overflow refilled the budget");
        stack.set_budget(1);
    });
    assert_eq!(stack.budget(), 1);
    assert_eq!(rt.stats().snapshot().reclaims, 0);
    chain.exit(&rt).unwrap();

    /// The thread's native stack: word 0 of `h` is now marked, but the first chunk's (`h`'s
    /// predecessor's) word 0 is the thread stack address, that of the test's `NativeStack`.
    fn stack_of(h: *mut ChunkHeader) -> &'static NativeStack {
        // SAFETY: h is still in the chain and its predecessor is the thread's first chunk; the
        // NativeStack it points at lives until hot_split's caller drops it, after this call.
        unsafe { &*((*(*h).prev_header).thread_stack as *const NativeStack) }
    }
}

/// Unwinding by code: a 101-chunk chain unlinked by compiled code with a budget of 8 calls the
/// reclaim handler every 8 unlinks, so the chain never holds more than 8 unlinked chunks.
/// 100 unlinks: 12 calls (96 chunks), 4 still pending, which the exit does.
#[test]
fn reclaim_budget_bounds_unlinked_chunks() {
    static CLOCK: AtomicU64 = AtomicU64::new(0);
    fn clock() -> u64 {
        CLOCK.load(Relaxed)
    }
    let mut cfg = config(2, clock);
    cfg.reclaim_budget = 8;
    let rt = Runtime::new(cfg);
    let chain = ThreadChain::new();
    let stack = Box::new(NativeStack::new(UNTOUCHED));
    let hs = dive(&rt, &chain, stack.addr(), 101);
    assert_eq!(stack.budget(), 8);
    let mut running = 101;
    for _ in 0..100 {
        let h = hs[running - 1];
        // SAFETY: a running chunk of the chain, mapped.
        unsafe { (*h).thread_stack = UNLINKED };
        running -= 1;
        let b = stack.budget() - 1;
        stack.set_budget(b);
        if b == 0 {
            let cur = hs[running - 1];
            assert_eq!(chain.reclaim(&rt, cur).unwrap().as_ptr(), cur);
            assert_eq!(stack.budget(), 8);
        }
        assert!(
            chain.depth() - running <= 8,
            "more unlinked chunks than the budget"
        );
    }
    let st = rt.stats().snapshot();
    assert_eq!(st.reclaims, 12);
    assert_eq!(st.underflows, 96);
    assert_eq!(chain.depth(), 5);
    assert_eq!(stack.budget(), 4);
    chain.exit(&rt).unwrap();
    let st = rt.stats().snapshot();
    assert_eq!((st.underflows, st.chunks_in_use), (100, 0));
}

/// Caches of one chunk (every refill moves one chunk), pool batches of up to `max_batch`.
fn policy_config(clock: fn() -> u64, max_batch: usize) -> RuntimeConfig {
    let mut cfg = config(2, clock);
    cfg.cache_min = 1;
    cfg.cache_max = 1;
    cfg.max_batch = max_batch;
    cfg
}

/// The release policy over windows. A thread recursing 10 chunks deep once per window keeps
/// its 10 chunks resident (the recent peak is 10 chunks); when it stops, the next pool
/// operation a window later (a thread using one class-1 chunk: held peaks at 2 standard
/// chunks' bytes) gives everything back above that, largest class first.
#[test]
fn release_policy_follows_the_recent_peak() {
    static CLOCK: AtomicU64 = AtomicU64::new(1000);
    fn clock() -> u64 {
        CLOCK.load(Relaxed)
    }
    no_thp();
    let rt = Runtime::new(policy_config(clock, 16));
    let cs = rt.config().geometry.chunk_size;
    let page = page_size();
    let stack = Box::new(NativeStack::new(UNTOUCHED));
    for round in 0..5 {
        // Round 0 carves 10 chunks one by one; each later round takes them back as the one
        // batch of 10 the previous exit gave, the window having rotated in between.
        let chain = ThreadChain::new();
        let hs = dive(&rt, &chain, stack.addr(), 10);
        assert_eq!(rt.held_bytes(), 10 * cs, "round {round}");
        chain.exit(&rt).unwrap();
        let st = rt.stats().snapshot();
        assert_eq!(st.chunks_carved, 10, "round {round}");
        assert_eq!(
            st.chunks_released, 0,
            "round {round}: the recent peak is 10 chunks"
        );
        assert_eq!(rt.pooled_resident_bytes(), 10 * cs, "round {round}");
        assert_eq!(rt.pool_class_len(0), (10, 0));
        assert_eq!(hs.len(), 10);
        CLOCK.fetch_add(W, Relaxed);
    }
    // The recursion stopped. One more pool operation, a window after the last one.
    let chain = ThreadChain::new();
    chain.enter(&rt, stack.addr(), capacity(cs) + 1).unwrap();
    assert_eq!(rt.held_bytes(), 2 * cs);
    chain.exit(&rt).unwrap();
    let st = rt.stats().snapshot();
    assert_eq!(rt.pooled_resident_bytes(), 0);
    assert_eq!(st.chunks_released, 11);
    assert_eq!(
        st.bytes_released as usize,
        10 * (cs - page) + (2 * cs - page)
    );
    assert_eq!(rt.pool_class_len(0), (0, 10));
    assert_eq!(rt.pool_class_len(1), (0, 1));
    assert_eq!(st.peak_resident_bytes as usize, 12 * cs);
}

/// The policy gives back every batch above the allowance, not one per class: 10 chunks in 5
/// batches of 2; two windows later the recent peak is a thread's one batch of 2 chunks, so 4
/// batches go back and one stays.
#[test]
fn trim_gives_back_every_batch_over_the_allowance() {
    static CLOCK: AtomicU64 = AtomicU64::new(1000);
    fn clock() -> u64 {
        CLOCK.load(Relaxed)
    }
    let rt = Runtime::new(policy_config(clock, 2));
    let cs = rt.config().geometry.chunk_size;
    let stack = Box::new(NativeStack::new(UNTOUCHED));
    let chain = ThreadChain::new();
    dive(&rt, &chain, stack.addr(), 10);
    chain.exit(&rt).unwrap();
    assert_eq!(rt.pool_class_len(0), (10, 0));
    for _ in 0..2 {
        // A thread that takes one batch (2 chunks) and gives it back, a window later.
        CLOCK.fetch_add(W, Relaxed);
        let chain = ThreadChain::new();
        chain.enter(&rt, stack.addr(), 0).unwrap();
        assert_eq!(rt.held_bytes(), 2 * cs);
        chain.exit(&rt).unwrap();
    }
    let st = rt.stats().snapshot();
    assert_eq!(st.chunks_released, 8);
    assert_eq!(rt.pooled_resident_bytes(), 2 * cs);
    assert_eq!(rt.pool_class_len(0), (2, 8));
}

/// Released chunks' pages really go back: 4 chunks of 4 pages, written all over while in use
/// (3 resident stack pages each), stay resident in the pool while the recent peak covers them,
/// and after two window rotations with nothing held their stack pages are gone (their header
/// pages stay), `bytes_released` counts them, and a chunk linked again reads zeros.
#[test]
fn released_pages_are_not_resident() {
    static CLOCK: AtomicU64 = AtomicU64::new(1000);
    fn clock() -> u64 {
        CLOCK.load(Relaxed)
    }
    no_thp();
    let mut cfg = policy_config(clock, 16);
    cfg.geometry = ChunkGeometry::new(4 * page_size(), 0).unwrap();
    let rt = Runtime::new(cfg);
    let page = page_size();
    let stack = Box::new(NativeStack::new(UNTOUCHED));
    let chain = ThreadChain::new();
    let hs = dive(&rt, &chain, stack.addr(), 4);
    let stack_pages = |h: *mut ChunkHeader| {
        // SAFETY: a header of the runtime's chunks (header pages are never given back).
        let limit = unsafe { (*h).limit };
        (limit, (h as usize) & !(page - 1))
    };
    for &h in &hs {
        let (lo, hi) = stack_pages(h);
        for a in (lo..hi).step_by(page) {
            // SAFETY: a stack page of a chunk linked into our chain.
            unsafe { (a as *mut u64).write(0xfeed) };
        }
        assert_eq!(resident_pages(lo, hi), 3);
    }
    chain.exit(&rt).unwrap();
    rt.trim();
    CLOCK.fetch_add(W, Relaxed);
    rt.trim();
    // Window 1: the previous window's peak (4 chunks) still covers the pool.
    assert_eq!(rt.stats().snapshot().chunks_released, 0);
    for &h in &hs {
        let (lo, hi) = stack_pages(h);
        assert_eq!(resident_pages(lo, hi), 3, "released too early");
    }
    CLOCK.fetch_add(W, Relaxed);
    rt.trim();
    let st = rt.stats().snapshot();
    assert_eq!(st.chunks_released, 4);
    assert_eq!(st.bytes_released as usize, 4 * 3 * page);
    assert_eq!(rt.pool_class_len(0), (0, 4));
    for &h in &hs {
        let (lo, hi) = stack_pages(h);
        assert_eq!(resident_pages(lo, hi), 0, "pages of {h:?} not given back");
        assert_eq!(resident_pages(hi, hi + page), 1, "the header page stays");
    }
    let chain = ThreadChain::new();
    let h = chain.enter(&rt, stack.addr(), 0).unwrap().as_ptr();
    assert!(hs.contains(&h));
    let (lo, hi) = stack_pages(h);
    for a in (lo..hi).step_by(page) {
        // SAFETY: a stack page of the chunk just linked.
        assert_eq!(unsafe { (a as *const u64).read() }, 0);
    }
    chain.exit(&rt).unwrap();
}

/// With refills of one chunk, the memory limit is exact: 3 chunks fit a limit of 3, the 4th
/// is refused with the numbers, and nothing changes (the thread goes on within the limit).
#[test]
fn memory_limit_refuses_the_chunk_that_does_not_fit() {
    static CLOCK: AtomicU64 = AtomicU64::new(0);
    fn clock() -> u64 {
        CLOCK.load(Relaxed)
    }
    let mut cfg = policy_config(clock, 1);
    let cs = cfg.geometry.chunk_size;
    cfg.memory_limit = 3 * cs;
    let rt = Runtime::new(cfg);
    let stack = Box::new(NativeStack::new(UNTOUCHED));
    let chain = ThreadChain::new();
    let hs = dive(&rt, &chain, stack.addr(), 3);
    let top = hs[2];
    let err = ChunkError::MemoryLimit {
        carved: 3 * cs,
        needed: cs,
        limit: 3 * cs,
    };
    assert_eq!(chain.overflow(&rt, top, top as usize - 64, 0), Err(err));
    // A larger class asks for its own size.
    assert_eq!(
        chain.overflow(&rt, top, top as usize - 64, capacity(cs) + 1),
        Err(ChunkError::MemoryLimit {
            carved: 3 * cs,
            needed: 2 * cs,
            limit: 3 * cs
        })
    );
    assert_eq!(chain.depth(), 3);
    assert_eq!(chain.underflow(&rt, top).unwrap().as_ptr(), hs[1]);
    assert_eq!(
        chain
            .overflow(&rt, hs[1], hs[1] as usize - 64, 0)
            .unwrap()
            .as_ptr(),
        top
    );
    chain.exit(&rt).unwrap();
}

/// The memory limit refuses more chunk memory than the limit, not a batch that would pass it
/// when the chunk that is needed fits: with the default caches, the second refill of a thread
/// wants 2 chunks; the thread needs only its third chunk, exactly the limit of 3.
#[test]
fn memory_limit_admits_the_chunk_that_fits() {
    static CLOCK: AtomicU64 = AtomicU64::new(0);
    fn clock() -> u64 {
        CLOCK.load(Relaxed)
    }
    let mut cfg = config(2, clock);
    let cs = cfg.geometry.chunk_size;
    cfg.memory_limit = 3 * cs;
    let rt = Runtime::new(cfg);
    let stack = Box::new(NativeStack::new(UNTOUCHED));
    let chain = ThreadChain::new();
    let a = chain.enter(&rt, stack.addr(), 0).unwrap().as_ptr();
    let b = chain.overflow(&rt, a, a as usize - 64, 0).unwrap().as_ptr();
    let c = chain.overflow(&rt, b, b as usize - 64, 0);
    assert!(
        c.is_ok(),
        "3 chunks of {cs} bytes within a memory limit of {} refused: {c:?}",
        3 * cs
    );
    assert!(rt.arena_usage().2 <= 3 * cs);
    chain.exit(&rt).unwrap();
}

/// Chunk memory stays within the memory limit even when an arena's tail is spilled. Arena of
/// 4 standard blocks, limit 5 standard chunks: a standard chunk (1 block) and two class-1
/// chunks (2 blocks each) are exactly the limit, but the second class-1 chunk does not fit the
/// arena's remaining block, which is carved as a spilled standard chunk first.
#[test]
fn spilled_chunks_stay_within_the_memory_limit() {
    static CLOCK: AtomicU64 = AtomicU64::new(0);
    fn clock() -> u64 {
        CLOCK.load(Relaxed)
    }
    let mut cfg = policy_config(clock, 1);
    let cs = cfg.geometry.chunk_size;
    cfg.arena_size = 4 * cs;
    cfg.memory_limit = 5 * cs;
    let rt = Runtime::new(cfg);
    let stack = Box::new(NativeStack::new(UNTOUCHED));
    let chain = ThreadChain::new();
    let big = capacity(cs) + 1;
    let a = chain.enter(&rt, stack.addr(), 0).unwrap().as_ptr();
    let b = chain
        .overflow(&rt, a, a as usize - 64, big)
        .unwrap()
        .as_ptr();
    let c = chain.overflow(&rt, b, b as usize - 64, big);
    let carved = rt.arena_usage().2;
    assert!(
        carved <= 5 * cs,
        "{carved} bytes of chunks carved with a memory limit of {} ({:?} spilled)",
        5 * cs,
        rt.pool_class_len(0)
    );
    if let Ok(c) = c {
        let c = c.as_ptr();
        if let Ok(d) = chain.overflow(&rt, c, c as usize - 64, 0) {
            panic!("a 6th standard chunk's worth linked within a limit of 5: {d:?}");
        }
    }
    chain.exit(&rt).unwrap();
}

/// A refill whose carve fails half-way (the runtime's table of mappings fills up) keeps the
/// chunks it did carve: every carved byte stays in some list, and the next overflow uses them.
/// One-page chunks in one-page arenas: every block needs a mapping of its own; the enter's
/// class-1 chunk is mapping 1, every refill of 2 standard chunks two more, so after 2047
/// refills (4094 overflows) one mapping is left for a refill of 2.
#[test]
fn failed_carve_loses_no_chunk() {
    static CLOCK: AtomicU64 = AtomicU64::new(0);
    fn clock() -> u64 {
        CLOCK.load(Relaxed)
    }
    let page = page_size();
    let mut cfg = config(1, clock);
    cfg.arena_size = page;
    cfg.cache_min = 4;
    cfg.cache_max = 4;
    cfg.max_batch = 4;
    let rt = Runtime::new(cfg);
    let stack = Box::new(NativeStack::new(UNTOUCHED));
    let chain = ThreadChain::new();
    let mut top = chain
        .enter(&rt, stack.addr(), capacity(page) + 1)
        .unwrap()
        .as_ptr();
    let n = MAX_REGIONS - 2;
    for _ in 0..n {
        top = chain.overflow(&rt, top, top as usize, 0).unwrap().as_ptr();
    }
    assert_eq!(rt.arena_usage().0, MAX_REGIONS - 1);
    assert_eq!(
        chain.overflow(&rt, top, top as usize, 0),
        Err(ChunkError::OutOfMemory {
            error: MapError::TooManyRegions
        })
    );
    let (regions, _, carved) = rt.arena_usage();
    assert_eq!(regions, MAX_REGIONS);
    // Every carved chunk is in the chain (the class-1 first chunk and standard ones), the
    // cache or the pool.
    assert_eq!(chain.cache_len_all(), chain.cache_len(&rt));
    let pool_bytes: usize = (0..NUM_CLASSES)
        .map(|k| {
            let (hot, cold) = rt.pool_class_len(k);
            (hot + cold) * (page << k)
        })
        .sum();
    let bytes = 2 * page + (chain.depth() - 1) * page + chain.cache_len(&rt) * page + pool_bytes;
    assert_eq!(bytes, carved, "carved bytes in no list");
    let chunks = chain.depth() + chain.cache_len(&rt) + rt.pool_len();
    assert_eq!(rt.stats().snapshot().chunks_carved as usize, chunks);
    assert_eq!(chunks, MAX_REGIONS);
    // The chunk carved before the failure serves the next overflow.
    let next = chain.overflow(&rt, top, top as usize, 0);
    assert!(next.is_ok(), "{next:?}");
    chain.exit(&rt).unwrap();
}

/// The mapping limit counts a guarded chunk as two mappings (its guard splits the arena) and
/// a carve as possibly needing a new arena: with room for 7, the enter (0 + 3) and one
/// overflow (3 + 3) fit; the second overflow (5 + 3) does not.
#[test]
fn map_limit_counts_guarded_chunks() {
    static CLOCK: AtomicU64 = AtomicU64::new(0);
    fn clock() -> u64 {
        CLOCK.load(Relaxed)
    }
    let page = page_size();
    let mut cfg = policy_config(clock, 1);
    cfg.geometry = ChunkGeometry::new(2 * page, page).unwrap();
    cfg.max_mappings = 7;
    let rt = Runtime::new(cfg);
    let stack = Box::new(NativeStack::new(UNTOUCHED));
    let chain = ThreadChain::new();
    let hs = dive(&rt, &chain, stack.addr(), 2);
    assert_eq!(
        chain.overflow(&rt, hs[1], hs[1] as usize - 64, 0),
        Err(ChunkError::MapLimit {
            mappings: 5,
            max: 7
        })
    );
    assert_eq!(rt.arena_usage().0, 1);
    chain.exit(&rt).unwrap();
}
