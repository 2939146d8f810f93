//! A thread's private caches of free chunks, one LIFO list per size class, no lock: taking a
//! chunk for an overflow, the adaptive capacity of the standard class's cache, and trimming a cache
//! over its capacity into the shared pool (the chain module's docs, "Adaptive caches").

use core::ptr::NonNull;

use super::chain::ThreadChain;
use super::config::{RuntimeConfig, ALL_CLASSES, LARGE_CLASS_CACHE, SMALL_CLASS_CACHE_BYTES};
use super::error::ChunkError;
use super::header::ChunkHeader;
use super::pool::FreeList;
use super::runtime::Runtime;

impl ThreadChain {
    pub(super) fn with_cache<R>(&self, k: usize, f: impl FnOnce(&mut FreeList) -> R) -> R {
        let mut c = self.caches[k].take();
        let r = f(&mut c);
        self.caches[k].set(c);
        r
    }

    pub(super) fn cache_splice(&self, k: usize, list: FreeList) {
        self.with_cache(k, |c| c.splice(list));
    }

    /// Chunks in the private cache of standard chunks.
    pub fn cache_len(&self, rt: &Runtime) -> usize {
        self.with_cache(rt.config.std_class(), |c| c.len())
    }

    /// Chunks in all private caches.
    pub fn cache_len_all(&self) -> usize {
        (0..ALL_CLASSES)
            .map(|k| self.with_cache(k, |c| c.len()))
            .sum()
    }

    /// Current capacity of the standard class's cache.
    pub fn cache_capacity(&self) -> usize {
        self.cap.get()
    }

    /// Headers of the cached chunks of all classes, in pop order per class.
    pub fn cache_headers(&self) -> Vec<usize> {
        (0..ALL_CLASSES)
            .flat_map(|k| self.with_cache(k, |c| c.iter().map(|h| h as usize).collect::<Vec<_>>()))
            .collect()
    }

    /// Takes a chunk of class `k`: the cache, else a refill.
    pub(super) fn acquire(
        &self,
        rt: &Runtime,
        k: usize,
    ) -> Result<NonNull<ChunkHeader>, ChunkError> {
        let h = match self.with_cache(k, |c| c.pop()) {
            Some(h) => {
                rt.stats.cache_hit(rt.config.count_stats);
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

    /// Sizes the standard class's cache before a refill (module docs): after releases, to the
    /// chunks released since the previous refill (the thread's last excursion: it is going down as
    /// far again); after a refill, twice as big (it keeps going deeper).
    pub(super) fn adapt_cap_at_refill(&self, config: &RuntimeConfig) {
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

    /// Capacity of the cache of class `k`: adaptive for the standard class, a few chunks
    /// above it, [`SMALL_CLASS_CACHE_BYTES`] below it.
    pub(super) fn cache_cap(&self, config: &RuntimeConfig, k: usize) -> usize {
        let std = config.std_class();
        if k == std {
            self.cap.get()
        } else if k > std {
            LARGE_CLASS_CACHE
        } else {
            (SMALL_CLASS_CACHE_BYTES / config.class_size(k)).max(2)
        }
    }

    /// A cache of class `k` over its capacity keeps its newest half and gives the rest to the
    /// pool (one lock operation); the standard class's capacity adapts (module docs).
    pub(super) fn trim_cache(&self, rt: &Runtime, k: usize) {
        let cap = self.cache_cap(&rt.config, k);
        if self.with_cache(k, |c| c.len()) <= cap {
            return;
        }
        let rest = self.with_cache(k, |c| c.split_off(cap / 2));
        if k == rt.config.std_class() {
            self.refilled.set(false);
            self.released.set(self.released.get() + rest.len());
        }
        rt.give(k, rest);
        rt.release_growth_token(self);
    }
}
