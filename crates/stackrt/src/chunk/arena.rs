//! Chunk memory from arenas: large anonymous mappings, made rarely, that chunks are carved out
//! of with a bump pointer. One kernel mapping serves hundreds of chunks (the kernel merges
//! adjacent arenas too), so chunks without guard pages never count against
//! `vm.max_map_count` one by one, and the overflow path never maps memory once the pools hold
//! chunks. Carving happens under one lock (the caller's), a batch of chunks at a time.
//!
//! ```text
//!  arena (one mmap, arena_size bytes)                                   bump
//!  | block 0                | block 1                | block 2         |  v   not yet carved
//!  | guard? | chunk         | guard? | chunk         | guard? | chunk  |------------------|
//!  |        |limit   header |        |limit   header |
//! ```
//!
//! A block is `guard_size + size` bytes: an optional `PROT_NONE` guard (made with one
//! `mprotect` when the block is carved, kept for the block's lifetime, so a guarded block
//! costs two kernel mappings: the guard splits the arena) and a chunk of `size` bytes with its
//! [`ChunkHeader`] at the top. A block larger than half an arena gets a mapping of its own.
//! Arenas are never unmapped while the runtime lives: memory goes back to the system with
//! `madvise(MADV_DONTNEED)` on free chunks (see `chain.rs`), which keeps the address range.

use core::ffi::c_void;
use core::ptr::NonNull;

use nix::sys::mman::{madvise, mmap_anonymous, mprotect, munmap, MapFlags, MmapAdvise, ProtFlags};

use super::header::{ChunkHeader, HEADER_SIZE};
use super::pool::FreeList;

/// Most mappings (arenas and dedicated blocks) one runtime records. 4096 arenas of 64 MiB are
/// 256 GiB of chunks on x86-64; of 16 MiB, 64 GiB on i686, more than its address space.
pub const MAX_REGIONS: usize = 4096;

/// Default arena size: 64 MiB on 64-bit targets, 16 MiB on 32-bit ones (where address space is
/// scarce and a half-used arena must not hold much of it).
pub const DEFAULT_ARENA_SIZE: usize = if cfg!(target_pointer_width = "64") {
    64 << 20
} else {
    16 << 20
};

/// Why chunk memory could not be carved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapError {
    /// `mmap` of `bytes` failed with this errno.
    Mmap { bytes: usize, errno: i32 },
    /// `mprotect` of a guard page failed with this errno.
    Guard(i32),
    /// The runtime's table of mappings is full ([`MAX_REGIONS`]).
    TooManyRegions,
}

/// The arenas of one runtime: the recorded mappings and the bump pointer of the newest arena.
pub struct Arenas {
    regions: [(usize, usize); MAX_REGIONS],
    count: usize,
    /// Next free byte of the current arena and its end (both 0 before the first arena).
    bump: usize,
    end: usize,
    /// Bytes of all recorded mappings.
    mapped_bytes: usize,
    /// Bytes of all carved blocks.
    carved_bytes: usize,
    /// Blocks carved with a guard page.
    guarded_blocks: usize,
}

impl Arenas {
    pub const fn new() -> Self {
        Arenas {
            regions: [(0, 0); MAX_REGIONS],
            count: 0,
            bump: 0,
            end: 0,
            mapped_bytes: 0,
            carved_bytes: 0,
            guarded_blocks: 0,
        }
    }

    /// Mappings made so far (arenas and dedicated blocks).
    pub fn regions(&self) -> usize {
        self.count
    }

    pub fn mapped_bytes(&self) -> usize {
        self.mapped_bytes
    }

    pub fn carved_bytes(&self) -> usize {
        self.carved_bytes
    }

    pub fn guarded_blocks(&self) -> usize {
        self.guarded_blocks
    }

    /// Whether `addr` lies in one of the recorded mappings.
    pub fn contains(&self, addr: usize) -> bool {
        self.regions[..self.count]
            .iter()
            .any(|&(b, l)| addr >= b && addr < b + l)
    }

    /// Carves `n` blocks of `guard + size` bytes and pushes their chunks on `out`. `spill`
    /// receives the chunks (of `spill_size`, same guard) carved from the tail of an arena too
    /// small for the next block, so no carved memory is lost. Maps a new arena of
    /// `arena_size` bytes (or a dedicated mapping for a block over half of it) when needed.
    /// Never carves past `limit` bytes in all (blocks and spill): it stops early instead (the
    /// caller checks that at least one block fits). On error the blocks carved so far stay in
    /// `out`/`spill`.
    #[allow(clippy::too_many_arguments)]
    pub fn carve(
        &mut self,
        size: usize,
        guard: usize,
        n: usize,
        arena_size: usize,
        spill_size: usize,
        limit: usize,
        out: &mut FreeList,
        spill: &mut FreeList,
    ) -> Result<(), MapError> {
        let block = guard + size;
        for _ in 0..n {
            if self.carved_bytes.saturating_add(block) > limit {
                break;
            }
            if block > arena_size / 2 {
                let base = self.map(block)?;
                // SAFETY: [base, base + block) is a fresh mapping owned by this runtime.
                let h = unsafe { init_block(base, guard, size) }?;
                self.note_carved(block, guard);
                // SAFETY: h is a fresh free chunk owned by nobody else.
                unsafe { out.push(h) };
                continue;
            }
            if self.end - self.bump < block {
                let spill_block = guard + spill_size;
                // The spill counts against the limit too, and must leave room for the block.
                while self.end - self.bump >= spill_block
                    && self.carved_bytes + spill_block + block <= limit
                {
                    let base = self.bump;
                    self.bump += spill_block;
                    // SAFETY: the block lies in the current arena, carved by nobody else.
                    let h = unsafe { init_block(base, guard, spill_size) }?;
                    self.note_carved(spill_block, guard);
                    // SAFETY: as above.
                    unsafe { spill.push(h) };
                }
                let base = self.map(arena_size)?;
                self.bump = base;
                self.end = base + arena_size;
            }
            let base = self.bump;
            self.bump += block;
            // SAFETY: the block lies in the current arena and was never carved before.
            let h = unsafe { init_block(base, guard, size) }?;
            self.note_carved(block, guard);
            // SAFETY: h is a fresh free chunk owned by nobody else.
            unsafe { out.push(h) };
        }
        Ok(())
    }

    fn note_carved(&mut self, block: usize, guard: usize) {
        self.carved_bytes += block;
        if guard != 0 {
            self.guarded_blocks += 1;
        }
    }

    fn map(&mut self, bytes: usize) -> Result<usize, MapError> {
        if self.count == MAX_REGIONS {
            return Err(MapError::TooManyRegions);
        }
        let Some(len) = core::num::NonZeroUsize::new(bytes) else {
            return Err(MapError::Mmap {
                bytes,
                errno: libc::EINVAL,
            });
        };
        // SAFETY: an anonymous private mapping at a kernel-chosen address; no existing memory
        // is affected. MAP_NORESERVE: pages are only committed when touched, like a thread
        // stack's. MAP_STACK is a hint only.
        let base = unsafe {
            mmap_anonymous(
                None,
                len,
                ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                MapFlags::MAP_PRIVATE | MapFlags::MAP_NORESERVE | MapFlags::MAP_STACK,
            )
        }
        .map_err(|e| MapError::Mmap {
            bytes,
            errno: e as i32,
        })?
        .as_ptr();
        self.regions[self.count] = (base as usize, bytes);
        self.count += 1;
        self.mapped_bytes += bytes;
        Ok(base as usize)
    }

    /// Unmaps every recorded mapping. Every chunk carved from them becomes invalid.
    ///
    /// # Safety
    /// No chunk of these arenas may be used afterwards (no chain, list or running code).
    pub unsafe fn unmap_all(&mut self) {
        for &(b, l) in &self.regions[..self.count] {
            if let Some(p) = NonNull::new(b as *mut c_void) {
                // SAFETY: the caller guarantees nothing uses the mapping any more.
                let _ = unsafe { munmap(p, l) };
            }
        }
        self.count = 0;
        self.bump = 0;
        self.end = 0;
    }
}

impl Default for Arenas {
    fn default() -> Self {
        Self::new()
    }
}

/// Makes the block at `base` a free chunk: protects the guard, writes the header.
///
/// # Safety
/// `[base, base + guard + size)` is mapped read-write, page-aligned and used by nothing else;
/// `size >= HEADER_SIZE`.
unsafe fn init_block(base: usize, guard: usize, size: usize) -> Result<*mut ChunkHeader, MapError> {
    if guard != 0 {
        let p = NonNull::new(base as *mut c_void).ok_or(MapError::Guard(libc::EINVAL))?;
        // SAFETY: the guard range is the first `guard` bytes of the caller's block.
        unsafe { mprotect(p, guard, ProtFlags::PROT_NONE) }
            .map_err(|e| MapError::Guard(e as i32))?;
    }
    let limit = base + guard;
    let header = (limit + size - HEADER_SIZE) as *mut ChunkHeader;
    // SAFETY: the header lies inside the block's writable part and is pointer-aligned (a
    // page-aligned end minus a multiple of 16).
    unsafe {
        header.write(ChunkHeader {
            thread_stack: 0,
            prev_sp: 0,
            prev_header: core::ptr::null_mut(),
            limit,
            resume: 0,
            map_base: base,
            map_len: guard + size,
            link: core::ptr::null_mut(),
        });
    }
    Ok(header)
}

/// Splits the free unguarded chunk `h` into `h`'s size / `size` chunks of `size` bytes each
/// (a power of two, at least `HEADER_SIZE`), pushed on `out` from its low end up: the small
/// size classes are carved a standard block at a time, so that arenas stay carved in whole
/// pages and standard chunks' pages can still be given back.
///
/// # Safety
/// `h` is a free chunk without guard owned by the caller, used by nothing; it is gone after.
pub unsafe fn split_block(h: *mut ChunkHeader, size: usize, out: &mut FreeList) {
    // SAFETY: h is a mapped chunk header (caller's contract).
    let (base, limit, len) = unsafe { ((*h).map_base, (*h).limit, (*h).map_len) };
    debug_assert!(limit == base && size >= HEADER_SIZE && len.is_multiple_of(size));
    for i in 0..len / size {
        // SAFETY: the pieces tile the caller's block, which nothing else uses; a piece's
        // header is 16-byte aligned (the block's base is, and `size` is a multiple of 16).
        // Without a guard, `init_block` cannot fail.
        unsafe { out.push(init_block(base + i * size, 0, size).unwrap_unchecked()) };
    }
}

/// Gives the pages of a free chunk back to the system (`MADV_DONTNEED`), all but the page
/// holding its header (whose words keep describing the chunk and linking it in a free list).
/// The mapping stays; touching the pages again gives zeroed memory. Returns the bytes given
/// back.
///
/// # Safety
/// `h` is a free chunk owned by the caller; nothing uses its stack pages.
pub unsafe fn release_pages(h: *mut ChunkHeader, page: usize) -> usize {
    // SAFETY: h is a mapped chunk header (caller's contract).
    let limit = unsafe { (*h).limit };
    let header_page = (h as usize) & !(page - 1);
    if header_page <= limit {
        return 0;
    }
    let len = header_page - limit;
    let Some(p) = NonNull::new(limit as *mut c_void) else {
        return 0;
    };
    // SAFETY: [limit, header_page) are the chunk's stack pages, which nothing uses (caller's
    // contract); MADV_DONTNEED on private anonymous memory only discards their contents.
    match unsafe { madvise(p, len, MmapAdvise::MADV_DONTNEED) } {
        Ok(()) => len,
        Err(_) => 0,
    }
}
