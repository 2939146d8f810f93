//! The release policy: resident free chunks beyond the program's recent peak go back to the
//! system in bulk (`madvise`), and `mmu` without reuse gives every unlinked chunk back at once
//! (the chain module's docs, "Giving memory back").

use core::sync::atomic::{Ordering::Relaxed, Ordering::SeqCst};

use super::arena::release_pages;
use super::config::ALL_CLASSES;
use super::header::ChunkHeader;
use super::pool::FreeList;
use super::runtime::Runtime;

impl Runtime {
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
        // Largest classes first: they give the most back per system call. Small chunks share
        // pages with their neighbours and stay resident (chain module docs, "Small classes").
        for k in (self.config.std_class()..ALL_CLASSES).rev() {
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
    pub(super) fn release_now(&self, k: usize, h: *mut ChunkHeader) {
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

    pub(super) fn note_resident(&self) {
        let r = self.held.load(Relaxed) + self.pooled_hot.load(Relaxed);
        self.stats.peak_resident_bytes.fetch_max(r as u64, Relaxed);
    }
}
