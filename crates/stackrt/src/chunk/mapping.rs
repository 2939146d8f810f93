//! One stack chunk's memory: an owned, page-aligned `mmap` with an optional `PROT_NONE` guard
//! below the usable stack. RAII like wasmtime's fiber stacks: dropping a [`ChunkMapping`]
//! unmaps it; [`ChunkMapping::into_raw`] hands the chunk to running code as a header pointer
//! and [`ChunkMapping::from_raw`] takes it back.

use core::ptr::NonNull;

use super::header::{ChunkGeometry, ChunkHeader, HEADER_SIZE};
use super::msg::errno;

/// An owned chunk mapping. The header words `limit`, `map_base` and `map_len` are written at
/// creation and describe the mapping for [`ChunkMapping::from_raw`].
#[derive(Debug)]
pub struct ChunkMapping {
    header: NonNull<ChunkHeader>,
}

// SAFETY: the mapping is exclusively owned by this value; nothing ties it to a thread.
unsafe impl Send for ChunkMapping {}

/// Why a chunk could not be mapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapError {
    /// `mmap` failed with this errno.
    Mmap(i32),
    /// `mprotect` of the guard page failed with this errno (the mapping was released).
    Guard(i32),
}

impl ChunkMapping {
    /// Maps a fresh chunk: `geometry.map_len()` bytes of anonymous private memory, the lowest
    /// `guard_size` bytes made inaccessible. The header is initialised with the geometry words;
    /// the other words are zero (fresh anonymous memory).
    pub fn map(geometry: ChunkGeometry) -> Result<Self, MapError> {
        let len = geometry.map_len();
        // SAFETY: an anonymous private mapping at a kernel-chosen address; no existing memory is
        // affected. MAP_STACK is a hint only.
        let base = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(MapError::Mmap(errno()));
        }
        if geometry.guard_size != 0 {
            // SAFETY: the guard range is the first guard_size bytes of the mapping just created.
            let rc = unsafe { libc::mprotect(base, geometry.guard_size, libc::PROT_NONE) };
            if rc != 0 {
                let e = errno();
                // SAFETY: unmapping exactly the mapping created above, which nothing else uses.
                unsafe { libc::munmap(base, len) };
                return Err(MapError::Guard(e));
            }
        }
        let map_base = base as usize;
        let limit = map_base + geometry.guard_size;
        let header = (limit + geometry.chunk_size - HEADER_SIZE) as *mut ChunkHeader;
        // SAFETY: header lies inside the writable part of the new mapping (chunk_size >=
        // HEADER_SIZE is guaranteed by ChunkGeometry) and is pointer-aligned (page-aligned
        // end minus a multiple of 16).
        unsafe {
            header.write(ChunkHeader {
                thread_stack: 0,
                prev_sp: 0,
                prev_header: core::ptr::null_mut(),
                limit,
                resume: 0,
                map_base,
                map_len: len,
                link: core::ptr::null_mut(),
            });
        }
        // SAFETY: header is derived from a successful mmap, so it is not null.
        Ok(ChunkMapping {
            header: unsafe { NonNull::new_unchecked(header) },
        })
    }

    /// The chunk's header.
    pub fn header(&self) -> NonNull<ChunkHeader> {
        self.header
    }

    /// Gives up ownership: the chunk stays mapped until [`ChunkMapping::from_raw`] reclaims it.
    pub fn into_raw(self) -> NonNull<ChunkHeader> {
        let h = self.header;
        core::mem::forget(self);
        h
    }

    /// Takes back ownership of a chunk released with [`ChunkMapping::into_raw`].
    ///
    /// # Safety
    /// `header` must come from `into_raw` and not have been reclaimed since; its `map_base` and
    /// `map_len` words must be intact.
    pub unsafe fn from_raw(header: NonNull<ChunkHeader>) -> Self {
        ChunkMapping { header }
    }

    /// Lowest usable stack address.
    pub fn limit(&self) -> usize {
        // SAFETY: the header is inside the mapping this value owns.
        unsafe { (*self.header.as_ptr()).limit }
    }
}

impl Drop for ChunkMapping {
    fn drop(&mut self) {
        // SAFETY: the header is inside the mapping this value owns; reading the geometry words.
        let (base, len) = unsafe {
            (
                (*self.header.as_ptr()).map_base,
                (*self.header.as_ptr()).map_len,
            )
        };
        // SAFETY: this value exclusively owns [base, base+len); nothing uses it after the drop.
        // munmap can only fail here with ENOMEM, when the kernel had merged this chunk with a
        // neighbouring mapping and splitting it would pass vm.max_map_count: the memory then
        // stays mapped and unused (a leak, never a corruption), so the result is ignored.
        unsafe { libc::munmap(base as *mut libc::c_void, len) };
    }
}
