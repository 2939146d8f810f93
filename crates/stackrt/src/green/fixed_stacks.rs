//! Guarded fixed stacks of green threads (`traditional`, `callee-cleanup`, the native back end,
//! and the C stacks of the heap mechanisms), reused instead of mapped and unmapped per thread.
//!
//! A [`Stack`] costs two kernel mappings and three system calls to make (`mmap`, `mprotect`
//! for its guard page) and one to free: about 40 µs per thread once the process has many
//! mappings. A thread's stack goes back to its worker's cache when it ends and the next thread
//! of that size takes it, as Go's stack allocator reuses stacks through per-P caches and a
//! global pool: in steady state creating a thread costs no system call. A cache over
//! [`WORKER_CACHE`] stacks gives half of them to the shared pool (one lock operation); the
//! pool keeps at most [`SHARED_BYTES`] bytes of stacks and unmaps what would exceed it.
//!
//! A reused stack keeps the pages its previous thread touched (no `madvise` on the hot path):
//! the memory a cache holds is at most what the threads that ended last used, bounded by the
//! cache's size. Stacks whose size nobody asks for again are only ever held up to those bounds.

use core::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

use super::context::Stack;

/// Stacks a worker keeps for its next threads.
pub const WORKER_CACHE: usize = 16;

/// Address space of the stacks the shared pool keeps (their touched pages are what counts
/// against memory; the untouched rest of a `MAP_NORESERVE` stack costs nothing): 256 MiB on
/// 64-bit targets, 64 MiB on i686, whose 3 GiB of address space also hold every live stack.
#[cfg(target_pointer_width = "64")]
pub const SHARED_BYTES: usize = 256 << 20;
#[cfg(target_pointer_width = "32")]
pub const SHARED_BYTES: usize = 64 << 20;

/// A worker's cache, newest last. Only its worker's OS thread touches it.
#[derive(Default)]
pub struct StackCache {
    stacks: Vec<Stack>,
}

/// The process-wide pool behind the workers' caches.
#[derive(Default)]
pub struct StackPool {
    shared: Mutex<Shared>,
    /// Stacks mapped so far (the `STACKRT_STATS=1` report's "fixed stacks mapped").
    mapped: AtomicU64,
}

#[derive(Default)]
struct Shared {
    stacks: Vec<Stack>,
    bytes: usize,
}

impl StackPool {
    pub const fn new() -> Self {
        StackPool {
            shared: Mutex::new(Shared {
                stacks: Vec::new(),
                bytes: 0,
            }),
            mapped: AtomicU64::new(0),
        }
    }

    fn shared(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A stack of `size` usable bytes (as [`Stack::new`] rounds it): the newest of that size in
    /// `cache`, else one from the shared pool, else a fresh mapping.
    pub fn take(&self, cache: &mut StackCache, size: usize) -> Result<Stack, nix::Error> {
        let len = Stack::mapping_len(size);
        if let Some(i) = cache.stacks.iter().rposition(|s| s.mapping_bytes() == len) {
            return Ok(cache.stacks.swap_remove(i));
        }
        {
            let mut sh = self.shared();
            if let Some(i) = sh.stacks.iter().rposition(|s| s.mapping_bytes() == len) {
                let s = sh.stacks.swap_remove(i);
                sh.bytes -= len;
                return Ok(s);
            }
        }
        self.mapped.fetch_add(1, Relaxed);
        Stack::new(size)
    }

    /// Stacks mapped so far: in steady state it stops growing.
    pub fn mapped(&self) -> u64 {
        self.mapped.load(Relaxed)
    }

    /// Gives back the stack of a thread that ended (nothing runs on it any more).
    pub fn give(&self, cache: &mut StackCache, stack: Stack) {
        cache.stacks.push(stack);
        if cache.stacks.len() <= WORKER_CACHE {
            return;
        }
        // The older half goes to the shared pool; what would pass its bound is unmapped
        // (outside the lock).
        let older: Vec<Stack> = cache.stacks.drain(..WORKER_CACHE / 2).collect();
        let mut unmap = Vec::new();
        {
            let mut sh = self.shared();
            for s in older {
                if sh.bytes + s.mapping_bytes() <= SHARED_BYTES {
                    sh.bytes += s.mapping_bytes();
                    sh.stacks.push(s);
                } else {
                    unmap.push(s);
                }
            }
        }
        drop(unmap);
    }

    /// Stacks in the shared pool and their bytes (for tests).
    pub fn shared_len(&self) -> (usize, usize) {
        let sh = self.shared();
        (sh.stacks.len(), sh.bytes)
    }
}

impl StackCache {
    /// Stacks in this cache (for tests).
    pub fn len(&self) -> usize {
        self.stacks.len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.stacks.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_given_stack_is_the_next_one_taken_of_its_size() {
        let pool = StackPool::new();
        let mut cache = StackCache::default();
        let a = pool.take(&mut cache, 64 << 10).unwrap();
        let b = pool.take(&mut cache, 128 << 10).unwrap();
        let (a_top, b_top) = (a.top(), b.top());
        pool.give(&mut cache, a);
        pool.give(&mut cache, b);
        assert_eq!(cache.len(), 2);
        // Sizes never mix: a 64 KiB request gets the 64 KiB stack, whatever came back last.
        assert_eq!(pool.take(&mut cache, 64 << 10).unwrap().top(), a_top);
        // Rounded to pages as `Stack::new` rounds: 128 KiB - 1 is the same stack.
        assert_eq!(pool.take(&mut cache, (128 << 10) - 1).unwrap().top(), b_top);
        assert!(cache.is_empty());
        assert_eq!(pool.mapped(), 2);
    }

    #[test]
    fn an_over_full_cache_gives_its_older_half_to_the_shared_pool() {
        let pool = StackPool::new();
        let mut cache = StackCache::default();
        let size = 16 << 10;
        let stacks: Vec<Stack> = (0..=WORKER_CACHE)
            .map(|_| Stack::new(size).unwrap())
            .collect();
        let tops: Vec<usize> = stacks.iter().map(Stack::top).collect();
        for s in stacks {
            pool.give(&mut cache, s);
        }
        let moved = WORKER_CACHE / 2;
        assert_eq!(cache.len(), WORKER_CACHE + 1 - moved);
        assert_eq!(pool.shared_len(), (moved, moved * Stack::mapping_len(size)));
        // The cache serves its own stacks newest first, then the pool's.
        let mut other = StackCache::default();
        let from_pool = pool.take(&mut other, size).unwrap();
        assert!(tops[..moved].contains(&from_pool.top()));
        assert_eq!(pool.shared_len().0, moved - 1);
        assert_eq!(
            pool.take(&mut cache, size).unwrap().top(),
            tops[WORKER_CACHE]
        );
    }

    #[test]
    fn the_shared_pool_keeps_at_most_its_bound() {
        let pool = StackPool::new();
        let mut cache = StackCache::default();
        // Stacks of a quarter of the bound (address space only: nothing is touched).
        let size = SHARED_BYTES / 4;
        for _ in 0..=WORKER_CACHE * 2 {
            pool.give(&mut cache, Stack::new(size).unwrap());
        }
        let (n, bytes) = pool.shared_len();
        assert!(bytes <= SHARED_BYTES, "{bytes} bytes kept");
        assert_eq!(
            n, 3,
            "three mappings of a quarter plus a page fit, a fourth does not"
        );
        assert!(cache.len() <= WORKER_CACHE);
    }
}
