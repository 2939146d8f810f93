//! Where a thread's chunks come from and where they go back: a refill of a thread's cache from
//! the shared pool (resident batches first, then released chunks, else chunks carved from an
//! arena) and a give of chunks to the pool (the chain module's docs, "Where a chunk comes from
//! and where it goes").

use core::sync::atomic::{Ordering::Relaxed, Ordering::SeqCst};

use super::chain::ThreadChain;
use super::error::ChunkError;
use super::pool::FreeList;
use super::runtime::Runtime;

impl Runtime {
    /// Moves chunks of class `k` into `chain`'s cache: one pool batch (resident first), else
    /// released chunks, else freshly carved ones. The cache is empty on entry.
    pub(super) fn refill(&self, chain: &ThreadChain, k: usize) -> Result<(), ChunkError> {
        let std = self.config.std_class();
        if k == std {
            chain.adapt_cap_at_refill(&self.config);
        }
        // Half a cache: of standard chunks (at most a batch), of small ones (a worker's
        // threads link them in bursts); one chunk of the rare larger classes.
        let want = if k <= std && self.config.reuse {
            (chain.cache_cap(&self.config, k) / 2).clamp(1, self.config.max_batch.max(1))
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

    /// Takes up to `want` chunks of class `k` from the pool in one lock operation: resident
    /// batches first (as many as `want` needs: the givers' batches may be small), then released
    /// chunks. Returns them and how many were resident.
    pub(super) fn take_from_pool(&self, k: usize, want: usize) -> (FreeList, usize) {
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

    /// Admits up to `n` stack blocks of `bytes` each carved outside the arenas (green threads'
    /// stack blocks) against the memory limit, as if they were chunks: returns how many fit,
    /// at least one, or the limit's error.
    pub fn carve_foreign(&self, bytes: usize, n: usize) -> Result<usize, ChunkError> {
        self.arenas.with(|a| {
            let carved = a.carved_bytes() + self.foreign_carved.load(Relaxed);
            let limit = self.config.memory_limit;
            let room = limit.saturating_sub(carved);
            if room < bytes {
                return Err(ChunkError::MemoryLimit {
                    carved,
                    needed: bytes,
                    limit,
                });
            }
            let n = n.min(room / bytes.max(1)).max(1);
            self.foreign_carved.fetch_add(n * bytes, Relaxed);
            Ok(n)
        })
    }

    /// Takes back `bytes` admitted by [`Runtime::carve_foreign`] but not carved.
    pub fn uncarve_foreign(&self, bytes: usize) {
        self.foreign_carved.fetch_sub(bytes, Relaxed);
    }

    /// Carves `n` fresh chunks of class `k` (checking the memory and mapping limits). A small
    /// class is carved as standard blocks split into its chunks (`arena::split_block`), so as
    /// many more as fill the last block.
    pub(super) fn carve(&self, k: usize, n: usize) -> Result<FreeList, ChunkError> {
        let size = self.config.class_size(k);
        let g = self.config.geometry;
        let small = k < self.config.std_class();
        let (block_size, per) = if small {
            (g.chunk_size, g.chunk_size / size)
        } else {
            (size, 1)
        };
        let block = block_size + g.guard_size;
        let mut out = FreeList::new();
        let mut spill = FreeList::new();
        let carved = self.arenas.with(|a| -> Result<(), ChunkError> {
            let carved = a.carved_bytes() + self.foreign_carved.load(Relaxed);
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
            let n = n.div_ceil(per).min(room / block);
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
                block_size,
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
        if small {
            // In carving order (the list pops the newest first): reversed once, popped again.
            let mut blocks = FreeList::new();
            while let Some(h) = out.pop() {
                // SAFETY: h was just carved, free and owned here.
                unsafe { blocks.push(h) };
            }
            while let Some(h) = blocks.pop() {
                // SAFETY: h is a freshly carved unguarded standard block owned here.
                unsafe { super::arena::split_block(h, size, &mut out) };
            }
        }
        if !spill.is_empty() {
            self.stats
                .chunks_carved
                .fetch_add(spill.len() as u64, Relaxed);
            self.pools[self.config.std_class()].with(|p| p.cold.splice(spill));
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
    pub(super) fn give(&self, k: usize, mut list: FreeList) {
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
}
