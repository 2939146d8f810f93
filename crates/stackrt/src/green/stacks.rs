//! Stacks of green threads: stack blocks for the chunked mechanisms (a small first chunk plus
//! the thread's entry frames, see [`BLOCK_SIZE`]), carved from large mappings and reused
//! through a per-worker cache and a shared free list; fixed stacks for the others are
//! [`super::context::Stack`]s.

use core::num::NonZeroUsize;
use std::collections::VecDeque;
use std::sync::Mutex;

use nix::sys::mman::{madvise, mmap_anonymous, MapFlags, MmapAdvise, ProtFlags};

/// Bytes of a green thread's stack block under the chunked mechanisms. From the top: the
/// thread's entry frames (a few hundred bytes), the thread stack `T` of the chunk handlers,
/// `crate::chunk::chain::FOREIGN_HANDLER_ROOM` (8 KiB) for the handlers' frames, then the
/// thread's first chunk (header and about 7.5 KiB of stack). Pages are touched only as they
/// are used: a thread that runs a few hundred bytes of stack and never overflows holds two
/// pages (the entry frames' and the first chunk's top), Go's goroutines start at 2 KiB of
/// stack plus their descriptor and grow by copying. A deeper thread links the runtime's
/// standard chunks below the block, as any chunked thread does.
pub const BLOCK_SIZE: usize = 16 * 1024;

/// Bytes mapped at once for blocks (`MAP_NORESERVE`: pages count only once touched).
#[cfg(target_pointer_width = "64")]
const REGION_SIZE: usize = 64 << 20;
#[cfg(target_pointer_width = "32")]
const REGION_SIZE: usize = 8 << 20;

/// Blocks a worker keeps for its next threads; beyond it half the cache goes to the shared list.
pub const WORKER_CACHE: usize = 64;

/// Free blocks the shared list keeps resident; blocks given beyond it have their pages given
/// back to the system first (`MADV_DONTNEED`), so a program whose threads have all ended does
/// not keep their memory.
const RESIDENT_FREE: usize = 1024;

struct Shared {
    /// Free blocks: released ones at the front, possibly resident ones at the back (taken
    /// first).
    free: VecDeque<usize>,
    /// Blocks at the back of `free` whose pages may still be resident.
    resident: usize,
    /// Uncarved rest of the newest region.
    next: usize,
    end: usize,
}

/// The process-wide free list of blocks and the region they are carved from.
pub struct Blocks {
    shared: Mutex<Shared>,
}

impl Blocks {
    pub const fn new() -> Self {
        Blocks {
            shared: Mutex::new(Shared {
                free: VecDeque::new(),
                resident: 0,
                next: 0,
                end: 0,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.shared
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Fills `cache` with up to half a cache of blocks (at least one), from the shared list or
    /// fresh from a region.
    pub fn refill(&self, cache: &mut Vec<usize>) -> Result<(), nix::Error> {
        let mut s = self.lock();
        let want = (WORKER_CACHE / 2).max(1);
        while cache.len() < want {
            if let Some(b) = s.free.pop_back() {
                s.resident = s.resident.saturating_sub(1);
                cache.push(b);
                continue;
            }
            if s.next == s.end {
                if !cache.is_empty() {
                    break;
                }
                let len = NonZeroUsize::new(REGION_SIZE).ok_or(nix::Error::EINVAL)?;
                // SAFETY: a fresh private anonymous mapping at an address the kernel chooses;
                // it is never unmapped (its blocks are reused).
                let p = unsafe {
                    mmap_anonymous(
                        None,
                        len,
                        ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                        MapFlags::MAP_PRIVATE | MapFlags::MAP_NORESERVE,
                    )
                }?;
                s.next = p.as_ptr() as usize;
                s.end = s.next + REGION_SIZE;
            }
            cache.push(s.next);
            s.next += BLOCK_SIZE;
        }
        Ok(())
    }

    /// Takes the older half of a full `cache` into the shared list.
    pub fn spill(&self, cache: &mut Vec<usize>) {
        let keep = cache.len() / 2;
        let mut s = self.lock();
        for b in cache.drain(..cache.len() - keep) {
            if s.resident >= RESIDENT_FREE {
                if let Some(p) = core::ptr::NonNull::new(b as *mut core::ffi::c_void) {
                    // SAFETY: a free block of a region this allocator mapped; nothing runs on
                    // it, and its pages read as zero afterwards, which no user relies on.
                    let _ = unsafe { madvise(p, BLOCK_SIZE, MmapAdvise::MADV_DONTNEED) };
                }
                s.free.push_front(b);
            } else {
                s.free.push_back(b);
                s.resident += 1;
            }
        }
    }
}

impl Default for Blocks {
    fn default() -> Self {
        Self::new()
    }
}
