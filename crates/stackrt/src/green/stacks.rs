//! Stacks of green threads: stack blocks for the chunked mechanisms (a small first chunk plus
//! the thread's entry frames, see [`block_size`]; packed several to a page under
//! `lookahead`), carved from large mappings and reused
//! through a per-worker cache and a shared free list; fixed stacks for the others are
//! [`super::context::Stack`]s.

use core::num::NonZeroUsize;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

use nix::sys::mman::{madvise, mmap_anonymous, MapFlags, MmapAdvise, ProtFlags};

/// Bytes kept for a green thread's entry frames above its thread stack `T` (the context's
/// start frame, the entry function and the mechanism's green trampoline, which keeps nothing
/// for a return: `crate::mech::lookahead::enter_then`): 64 bytes on x86-64 and 112 on i686,
/// measured 2026-11-26 as the block's top less `T` (112 and 128 with the trampoline that
/// returns); every byte here is a byte of every thread. If they ever needed more, the offered
/// first chunk would start lower and hold less than its need plus what was learned for it:
/// its threads would overflow into a small chunk and the sizing (`super::sizing`) would
/// make the next blocks bigger; never an overlap (the chunk runtime takes a chunk of its own
/// when the compiled need does not fit).
#[cfg(target_pointer_width = "64")]
pub const ENTRY_ROOM: usize = 64;
#[cfg(target_pointer_width = "32")]
pub const ENTRY_ROOM: usize = 112;

/// [`ENTRY_ROOM`] of the mechanisms whose blocks hold no first chunk (`mmu`, `mmu-reuse`):
/// their entry returns (`crate::mech::enter`), 112 bytes on x86-64 and 128 on i686.
#[cfg(target_pointer_width = "64")]
pub const RETURNING_ENTRY_ROOM: usize = 112;
#[cfg(target_pointer_width = "32")]
pub const RETURNING_ENTRY_ROOM: usize = 128;

/// Bytes below a `lookahead` block's thread stack `T` that the thread's start and end need:
/// the start's `complete_switch` runs below the entry frames before the first chunk is set
/// up (it never requeues a thread there: a thread that never ran is not switched to directly,
/// see `super::sched`'s `yield_direct`), and the end (`super::sched::entry`'s `done` and the switch away) from `T` down once it
/// went back: 152 bytes on x86-64 and 132 on i686, measured 2026-11-26 by painting blocks (the
/// same under the deterministic mode, statistics, two workers and `--race`), with a quarter
/// more. A block's first chunk is at least this big; a thread whose end overran it would
/// stop the program at the canary.
#[cfg(target_pointer_width = "64")]
pub const EXIT_ROOM: usize = 192;
#[cfg(target_pointer_width = "32")]
pub const EXIT_ROOM: usize = 176;

/// Bytes at the bottom of a `lookahead` block, below its first chunk's limit, that hold a
/// known pattern while the thread runs: compiled code never writes below the limit, so a
/// changed pattern when the thread ends means a call that ran on the thread's stack (the
/// thread library's, whose budget the compiler reserves) used more than it was given, and
/// the program stops with one line instead of going on with a neighbour's stack overwritten.
pub const CANARY: usize = BLOCK_STEP;

const CANARY_WORD: usize = usize::MAX / 0xff * 0xa5;

/// Writes the canary at the bottom of the block at `b`.
///
/// # Safety
/// `b` is a block of at least [`CANARY`] bytes that nothing else uses.
pub unsafe fn set_canary(b: usize) {
    for i in 0..CANARY / core::mem::size_of::<usize>() {
        // SAFETY: the caller's guarantee; blocks are 16-byte aligned.
        unsafe { (b as *mut usize).add(i).write(CANARY_WORD) };
    }
}

/// Whether the canary [`set_canary`] wrote at the bottom of the block at `b` is unchanged.
pub fn canary_intact(b: usize) -> bool {
    // SAFETY: `b` is a mapped block (its thread just ended); reading its words is harmless.
    (0..CANARY / core::mem::size_of::<usize>())
        .all(|i| unsafe { (b as *const usize).add(i).read_volatile() } == CANARY_WORD)
}

/// Bytes of the stack block of a green thread whose entry function needs `need` bytes below
/// its first chunk's top (the u32 before the function: its longest path, with the room of the
/// thread library's calls if it makes any), when `room` bytes are kept for the chunk
/// handlers' frames between the thread stack `T` and the first chunk. From the top: the entry
/// frames ([`ENTRY_ROOM`], or [`RETURNING_ENTRY_ROOM`] with `room`), `T`, `room`, then the
/// thread's first chunk: its header and `need` bytes of stack, at least [`EXIT_ROOM`] in all
/// (and under `lookahead` the [`CANARY`] below it).
///
/// Under `lookahead` the handlers and C calls run on the worker's handler stack
/// (`crate::chunk::handler`), so `room` is 0 and the block is what the thread touches at most
/// before it links a chunk: blocks are sized in 16-byte steps and packed one after another,
/// several to a page, so a shallow thread holds about its entry frames and its frames, not a
/// page. Under the MMU mechanisms the block only holds the entry frames and the handlers'
/// room (`crate::chunk::config::FOREIGN_HANDLER_ROOM`; their first chunk needs a guard page
/// and comes from the chunk runtime), in whole pages. Pages are touched only as they are used;
/// a deeper thread links the runtime's chunks below the block: under `lookahead` of the small
/// classes first, 512 bytes and doubling (the chunk layer's chain docs, "Small classes"),
/// under the MMU mechanisms standard guarded ones.
pub fn block_size(need: usize, room: usize) -> usize {
    let below_t = crate::chunk::HEADER_SIZE + crate::chunk::CHECK_SLACK + need;
    let bytes = if room == 0 {
        ENTRY_ROOM + 16 + below_t.max(EXIT_ROOM)
    } else {
        RETURNING_ENTRY_ROOM + room + 16 + below_t
    };
    if room == 0 {
        (bytes + CANARY).next_multiple_of(BLOCK_STEP)
    } else {
        bytes.next_multiple_of(crate::base::os::page_size())
    }
}

/// The size step of packed blocks: the stack alignment. A block's lowest bytes (its canary)
/// and its neighbour's entry frames may share a cache line; neither is written while the
/// threads run, so the line is not contended (a 64-byte step cost up to 48 bytes a thread).
pub const BLOCK_STEP: usize = 16;

/// Bytes mapped at once for blocks (`MAP_NORESERVE`: pages count only once touched).
#[cfg(target_pointer_width = "64")]
const REGION_SIZE: usize = 64 << 20;
#[cfg(target_pointer_width = "32")]
const REGION_SIZE: usize = 8 << 20;

/// Bytes of blocks a worker's cache takes at most at once from the shared lists or a region.
const REFILL_BYTES: usize = 256 << 10;

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
    /// cache, else half a cache's worth from the shared list or fresh from a region. Fresh
    /// blocks are counted against the chunk runtime's memory limit
    /// (`crate::chunk::global::admit_foreign_blocks`, which ends the program with one line
    /// naming green thread `thread` when none fits).
    pub fn take(
        &self,
        cache: &mut BlockCache,
        size: usize,
        thread: i32,
    ) -> Result<usize, nix::Error> {
        let list = cache.list(size);
        if let Some(b) = list.pop() {
            return Ok(b);
        }
        let mut s = self.lock();
        // Half a cache, but no more than REFILL_BYTES of large blocks at once: fresh blocks
        // count against the memory limit.
        let want = (WORKER_CACHE / 2).min(REFILL_BYTES / size).max(1);
        if let Some(shared) = s.lists.get_mut(&size) {
            while list.len() < want {
                let Some(b) = shared.free.pop_back() else {
                    break;
                };
                shared.resident = shared.resident.saturating_sub(1);
                list.push(b);
            }
        }
        let fresh = want - list.len();
        let admitted = if fresh > 0 {
            crate::chunk::global::admit_foreign_blocks(size, fresh, thread)
        } else {
            0
        };
        let want = list.len() + admitted;
        while list.len() < want {
            if s.end - s.next < size {
                if !list.is_empty() {
                    crate::chunk::global::unadmit_foreign_blocks(size * (want - list.len()));
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
                // Only the pages wholly inside the block: a packed block shares its first
                // and last page with blocks that may be in use.
                let page = crate::base::os::page_size();
                let (lo, hi) = (b.next_multiple_of(page), (b + size) / page * page);
                if hi > lo {
                    if let Some(p) = core::ptr::NonNull::new(lo as *mut core::ffi::c_void) {
                        // SAFETY: whole pages of a free block of a region this allocator
                        // mapped; nothing runs on them, and they read as zero afterwards,
                        // which no user relies on.
                        let _ = unsafe { madvise(p, hi - lo, MmapAdvise::MADV_DONTNEED) };
                    }
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
