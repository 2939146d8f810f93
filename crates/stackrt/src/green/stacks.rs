//! Stacks of green threads: stack blocks for the chunked mechanisms (a small first chunk plus
//! the thread's entry frames, see [`block_size`]), carved from large mappings and reused
//! through a per-worker cache and a shared free list; fixed stacks for the others are
//! [`super::context::Stack`]s.

use core::num::NonZeroUsize;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

use nix::sys::mman::{madvise, mmap_anonymous, MapFlags, MmapAdvise, ProtFlags};

/// Bytes kept for a green thread's entry frames above its thread stack `T` (the context's
/// start frame, the entry function and the mechanism's entry trampoline: a few hundred bytes).
/// If they ever needed more, the chunk runtime would find the offered first chunk too small
/// for the entry's need and take one of its own chunks instead: never an overlap.
pub const ENTRY_ROOM: usize = 1024;

/// Bytes of the stack block of a green thread whose entry function needs `need` bytes below
/// its first chunk's top (the u32 before the function, its longest path with the 8 KiB budget
/// of a C call if it makes one), in whole pages. From the top: the entry frames
/// ([`ENTRY_ROOM`]), the thread stack `T` of the chunk handlers,
/// `crate::chunk::config::FOREIGN_HANDLER_ROOM` (8 KiB) for the handlers' frames, then the
/// thread's first chunk: its header and `need` bytes of stack. Pages are touched only as they
/// are used, so a thread's resident memory is the entry frames' page and the pages its stack
/// reaches; a deeper thread links the runtime's standard chunks below the block, as any
/// chunked thread does.
pub fn block_size(need: usize) -> usize {
    let bytes = ENTRY_ROOM
        + crate::chunk::config::FOREIGN_HANDLER_ROOM
        + crate::chunk::HEADER_SIZE
        + crate::chunk::CHECK_SLACK
        + 16
        + need;
    bytes.next_multiple_of(crate::base::os::page_size())
}

/// Bytes mapped at once for blocks (`MAP_NORESERVE`: pages count only once touched).
#[cfg(target_pointer_width = "64")]
const REGION_SIZE: usize = 64 << 20;
#[cfg(target_pointer_width = "32")]
const REGION_SIZE: usize = 8 << 20;

/// Blocks of one size a worker keeps for its next threads; beyond it half of them go to the
/// shared lists.
pub const WORKER_CACHE: usize = 64;

/// Free blocks of one size the shared lists keep resident; blocks given beyond it have their
/// pages given back to the system first (`MADV_DONTNEED`), so a program whose threads have all
/// ended does not keep their memory.
const RESIDENT_FREE: usize = 1024;

/// Free blocks of one size: released ones at the front, possibly resident ones at the back
/// (taken first).
#[derive(Default)]
struct SizeList {
    free: VecDeque<usize>,
    /// Blocks at the back of `free` whose pages may still be resident.
    resident: usize,
}

struct Shared {
    lists: BTreeMap<usize, SizeList>,
    /// Uncarved rest of the newest region.
    next: usize,
    end: usize,
}

/// The process-wide free lists of blocks, by size, and the region they are carved from.
pub struct Blocks {
    shared: Mutex<Shared>,
}

/// A worker's cache: free blocks by size.
#[derive(Default)]
pub struct BlockCache {
    lists: Vec<(usize, Vec<usize>)>,
}

impl BlockCache {
    fn list(&mut self, size: usize) -> &mut Vec<usize> {
        let i = match self.lists.iter().position(|(s, _)| *s == size) {
            Some(i) => i,
            None => {
                self.lists.push((size, Vec::new()));
                self.lists.len() - 1
            }
        };
        &mut self.lists[i].1
    }
}

impl Blocks {
    pub const fn new() -> Self {
        Blocks {
            shared: Mutex::new(Shared {
                lists: BTreeMap::new(),
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

    /// A block of `size` bytes (a [`block_size`]) for the worker owning `cache`: from the
    /// cache, else half a cache's worth from the shared list or fresh from a region.
    pub fn take(&self, cache: &mut BlockCache, size: usize) -> Result<usize, nix::Error> {
        let list = cache.list(size);
        if let Some(b) = list.pop() {
            return Ok(b);
        }
        let mut s = self.lock();
        let want = WORKER_CACHE / 2;
        if let Some(shared) = s.lists.get_mut(&size) {
            while list.len() < want {
                let Some(b) = shared.free.pop_back() else {
                    break;
                };
                shared.resident = shared.resident.saturating_sub(1);
                list.push(b);
            }
        }
        while list.len() < want {
            if s.end - s.next < size {
                if !list.is_empty() {
                    break;
                }
                let len = NonZeroUsize::new(REGION_SIZE.max(size)).ok_or(nix::Error::EINVAL)?;
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
                s.end = s.next + len.get();
            }
            list.push(s.next);
            s.next += size;
        }
        Ok(list.pop().expect("a refill leaves a block"))
    }

    /// Gives back a block of `size` bytes whose thread ended; a full cache spills its older
    /// half into the shared list.
    pub fn give(&self, cache: &mut BlockCache, size: usize, block: usize) {
        let list = cache.list(size);
        list.push(block);
        if list.len() <= WORKER_CACHE {
            return;
        }
        let keep = list.len() / 2;
        let mut s = self.lock();
        let shared = s.lists.entry(size).or_default();
        for b in list.drain(..list.len() - keep) {
            if shared.resident >= RESIDENT_FREE {
                if let Some(p) = core::ptr::NonNull::new(b as *mut core::ffi::c_void) {
                    // SAFETY: a free block of a region this allocator mapped; nothing runs on
                    // it, and its pages read as zero afterwards, which no user relies on.
                    let _ = unsafe { madvise(p, size, MmapAdvise::MADV_DONTNEED) };
                }
                shared.free.push_front(b);
            } else {
                shared.free.push_back(b);
                shared.resident += 1;
            }
        }
    }
}

impl Default for Blocks {
    fn default() -> Self {
        Self::new()
    }
}
