//! The chunk header: the book-keeping words at the top of every stack chunk, and the chunk
//! geometry. This layout is the ABI contract between the compiler's emitted sequences, the
//! assembly handlers in `mech/arch/` and the Rust chunk runtime.
//!
//! A chunk (a page-aligned block carved from an arena, see `super::arena`) looks like this; addresses grow to the right and the
//! stack grows to the left, from the header down towards `limit`:
//!
//! ```text
//!  map_base          limit = base                                      header       base+chunk_size
//!  |  guard page     |  usable stack  <-- grows down ...  <-- SP      |  ChunkHeader |
//!  |  (PROT_NONE,    |                                                 |  8 words     |
//!  |   optional)     |<------------- chunk_size - HEADER_SIZE -------->|<-HEADER_SIZE>|
//!  |<-- guard_size ->|<------------------------- chunk_size ----------------------->|
//! ```
//!
//! `chunk_size` (the compiler's `--chunk-size`, symbol [`super::CHUNK_SIZE_SYMBOL`]) counts
//! the header but not the guard page, like the thesis's "8 pages or 32 kilobytes, excluding
//! the space for the guard page". The chunk register (EBP on i686 as in the thesis, see the
//! emission stage for x86-64) points at the header; a fresh chunk starts with SP = header.
//!
//! Word `i` of the header is at byte offset `i * P` (P = pointer size: 4 on i686, 8 on x86-64);
//! words 0..=2 are exactly the thesis's Figure 3.4 (`[EBP]` thread stack, `[EBP+4]` previous
//! ESP, `[EBP+8]` previous EBP).

use crate::base::os::page_size;

/// The header at the top of every chunk. `#[repr(C)]`, all fields pointer-sized.
#[repr(C)]
#[derive(Debug)]
pub struct ChunkHeader {
    /// Word 0. The thread's runtime stack pointer: the handlers switch SP to this value (on the
    /// thread's native stack, below the entry trampoline's frame) before calling into Rust.
    /// Copied from chunk to chunk; 16-byte aligned. [`UNLINKED`] once compiled code has
    /// unlinked the chunk on its own (see there).
    pub thread_stack: usize,
    /// Word 1. The stack pointer to restore on underflow: the caller's SP passed to the overflow
    /// handler. 0 in a thread's first chunk.
    pub prev_sp: usize,
    /// Word 2. The previous chunk's header (the chunk register value to restore on underflow);
    /// null in a thread's first chunk.
    pub prev_header: *mut ChunkHeader,
    /// Word 3. Lowest usable stack address of this chunk (just above the guard page, if any).
    /// Constant for the chunk's lifetime.
    pub limit: usize,
    /// Word 4, two uses by mechanism. MMU mechanisms: the real return address of the first
    /// frame in the chunk (thesis Figure 3.5, "PROC A RETURN ADDR"); the runtime writes 0 on
    /// overflow. `lookahead`: the *check word*, `limit + bias` (the program's
    /// [`crate::base::abi::CHECK_BIAS_SYMBOL`]), written at every link: the checkpoints compare
    /// against it (see [`OFF_CHECK`]), and a preemption request poisons it (`super::poison`).
    pub resume: usize,
    /// Word 5. Start of the chunk's block (its guard page, if any). Constant; runtime-private.
    pub map_base: usize,
    /// Word 6. Length of the block in bytes (the chunk's size class's size + `guard_size`).
    /// Constant; runtime-private.
    pub map_len: usize,
    /// Word 7. Free-list link while the chunk sits in a thread cache or the shared pool.
    /// While the chunk is in use: the chunk linked after it, as long as that one is in the
    /// chain (linked, or unlinked by compiled code and [`UNLINKED`]); null otherwise. The
    /// `lookahead` overflow handlers read it for the hot split's fast path (`crate::mech`'s
    /// assembly, [`super::handler`]). (While a chunk is free, words 1, 2 and 4 are scratch for
    /// the pool's batches, see `super::pool`.)
    pub link: *mut ChunkHeader,
}

/// Size of [`ChunkHeader`]: 32 bytes on i686, 64 on x86-64 (a multiple of 16, so a fresh
/// chunk's SP = header address is 16-byte aligned).
pub const HEADER_SIZE: usize = core::mem::size_of::<ChunkHeader>();

/// Byte offsets of the header words, for the assembly handlers (`[chunk_reg + OFF]`).
pub const OFF_THREAD_STACK: usize = core::mem::offset_of!(ChunkHeader, thread_stack);
pub const OFF_PREV_SP: usize = core::mem::offset_of!(ChunkHeader, prev_sp);
pub const OFF_PREV_HEADER: usize = core::mem::offset_of!(ChunkHeader, prev_header);
pub const OFF_LIMIT: usize = core::mem::offset_of!(ChunkHeader, limit);
pub const OFF_RESUME: usize = core::mem::offset_of!(ChunkHeader, resume);
/// The check word of `lookahead` chunks (word 4, [`ChunkHeader::resume`]'s other use):
/// `limit + bias`. A checkpoint whose distance below SP (reserve minus the bytes it pushed,
/// plus [`CHECK_SLACK`]) is at most the bias compares SP itself with it (`cmp rsp, [rbp + 32];
/// jb`: no scratch register, one instruction less on the hottest path); the others compare
/// `SP - (distance - bias)`. Both are the old test `SP - distance < limit` or a stricter one,
/// and the stricter one passes the overflow handler the reserve it implies (`pushed + bias -
/// CHECK_SLACK`), so the runtime's view of every overflow stays exact.
pub const OFF_CHECK: usize = OFF_RESUME;
pub const OFF_MAP_BASE: usize = core::mem::offset_of!(ChunkHeader, map_base);
pub const OFF_MAP_LEN: usize = core::mem::offset_of!(ChunkHeader, map_len);
pub const OFF_LINK: usize = core::mem::offset_of!(ChunkHeader, link);

/// Word 0 of a chunk that compiled code unlinked without calling the runtime: all ones (the
/// emitted code stores the immediate -1, sign-extended on x86-64).
///
/// The `lookahead` checkpoint unlinks the chunk its call ran on by itself, with loads and one
/// store and no call (`mov sp, [chunk + prev_sp]; mov [chunk], -1; mov chunk, [chunk +
/// prev_header]`), because any call made while a deep recursion unwinds costs the recursion's
/// remaining returns their prediction (measured: 1.5-2x on whole programs). The chunk then
/// stays in the thread's chain, above the running chunk, until the runtime next runs for the
/// thread (an overflow, an explicit underflow or the thread's exit), which does the
/// unlinking's bookkeeping then, exactly as an underflow handler would have
/// (`ThreadChain::overflow`). A thread stack is 16-byte aligned, so it is never all ones.
pub const UNLINKED: usize = usize::MAX;

/// Bytes a checkpoint keeps free below its reserve: the overflow handler is *called*, which
/// pushes a return address below SP, and the test must leave room for that push even when
/// the reserve is exactly what is left. 16 keeps x86-64 alignment arithmetic simple.
///
/// The emitted test at a checkpoint with reserve `R` is: overflow iff `SP - R < limit + 16`,
/// equivalently (thesis form, chunk register = header):
/// `SP + (chunk_size - HEADER_SIZE - CHECK_SLACK - R) < header`.
pub const CHECK_SLACK: usize = 16;

/// The line whose phase `lookahead`'s chunk switches keep: a cache line.
///
/// A contiguous stack puts a thread's frames at addresses fixed modulo a cache line by the
/// thread's first SP and the frame sizes; a chunk switch that placed the callee's frame at a
/// fixed offset below the new header would move every frame after it to another phase, and
/// with it which of a frame's words share a line (a frame of 32 bytes is one line's half, or
/// two lines' quarters). That alone moved `call_depth` at 4,096 deep by 3% on x86-64 (Zen 4,
/// 2026-11-28: the same code with its recursion shifted by 16 bytes: 1.036x and 1.002x
/// `callee-cleanup`'s time). So the overflow handlers at C-- calls place the copied arguments
/// at the caller's SP's phase ([`PHASE_ROOM`]), and the entry at [`ENTRY_PHASE`]: a recursion
/// has the phases it has on a contiguous stack, and a comparison with the fixed-stack
/// mechanisms measures the mechanism, not a layout.
pub const PHASE_LINE: usize = 64;

/// Most bytes a phase costs below a header (a line less one stack slot; SPs are
/// slot-aligned). An overflow leaves that many between a new chunk's header and the
/// arguments it copies there where the chunk has them to spare below the reserve (so a chunk
/// sized to its reserve costs nothing more); the entry asks for them on top of its need.
pub const PHASE_ROOM: usize = PHASE_LINE - core::mem::size_of::<usize>();

/// The address modulo [`PHASE_LINE`] of a thread's first SP on its first chunk, before the
/// entry pushes the return address and the arguments: the phase the fixed-stack entries give
/// (`stackrt_enter_traditional` and `stackrt_enter_callee_cleanup`: a 256-byte aligned
/// address less 16). The entry asks for [`PHASE_ROOM`] bytes more than the entry's need.
pub const ENTRY_PHASE: usize = 48;

/// Largest reserve a checkpoint may request with chunks of `chunk_size` bytes: a fresh chunk
/// offers `chunk_size - HEADER_SIZE` bytes below SP, minus [`CHECK_SLACK`].
/// 32 KiB chunks: 32720 on i686, 32688 on x86-64.
pub const fn chunk_capacity(chunk_size: usize) -> usize {
    chunk_size.saturating_sub(HEADER_SIZE + CHECK_SLACK)
}

/// Default chunk size: 8 pages of 4 KiB, the thesis's value.
pub const DEFAULT_CHUNK_SIZE: usize = 32 * 1024;

/// Shape of the standard chunks of one runtime (the standard size class; the `j`-th class
/// above it has chunks of `chunk_size << j` bytes with the same guard).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkGeometry {
    /// Bytes from `limit` to the end of the chunk, header included; a multiple of the page size.
    pub chunk_size: usize,
    /// Bytes of `PROT_NONE` guard below `limit`: 0 (look-ahead) or a multiple of the page size
    /// (the MMU mechanisms; as large as the largest probe distance, see runtime-facts.md).
    pub guard_size: usize,
}

/// Why a geometry is unusable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GeometryError {
    /// The chunk size is not a positive multiple of the page size.
    ChunkSizeNotPages { chunk_size: usize, page_size: usize },
    /// The guard size is not a multiple of the page size.
    GuardNotPages { guard_size: usize, page_size: usize },
    /// The chunk is too small to hold the header and any reserve.
    ChunkTooSmall { chunk_size: usize },
}

impl core::fmt::Display for GeometryError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            GeometryError::ChunkSizeNotPages {
                chunk_size,
                page_size,
            } => write!(
                f,
                "chunk size {chunk_size} is not a positive multiple of the page size {page_size}"
            ),
            GeometryError::GuardNotPages {
                guard_size,
                page_size,
            } => {
                write!(
                    f,
                    "guard size {guard_size} is not a multiple of the page size {page_size}"
                )
            }
            GeometryError::ChunkTooSmall { chunk_size } => {
                write!(
                    f,
                    "chunk size {chunk_size} leaves no room below the chunk header"
                )
            }
        }
    }
}

impl ChunkGeometry {
    /// Checks the geometry against the system page size.
    pub fn new(chunk_size: usize, guard_size: usize) -> Result<Self, GeometryError> {
        let page_size = page_size();
        if chunk_size == 0 || !chunk_size.is_multiple_of(page_size) {
            return Err(GeometryError::ChunkSizeNotPages {
                chunk_size,
                page_size,
            });
        }
        if !guard_size.is_multiple_of(page_size) {
            return Err(GeometryError::GuardNotPages {
                guard_size,
                page_size,
            });
        }
        if chunk_capacity(chunk_size) == 0 {
            return Err(GeometryError::ChunkTooSmall { chunk_size });
        }
        Ok(ChunkGeometry {
            chunk_size,
            guard_size,
        })
    }

    /// Largest reserve a checkpoint may request ([`chunk_capacity`]).
    pub const fn capacity(&self) -> usize {
        chunk_capacity(self.chunk_size)
    }

    /// Bytes of one standard block (chunk and guard).
    pub const fn map_len(&self) -> usize {
        self.chunk_size + self.guard_size
    }

    /// Kernel mappings (VMAs) one guarded chunk costs: its guard page splits the arena's
    /// mapping, so guard and chunk are a mapping each. Unguarded chunks share their arena's.
    pub const fn mappings_per_chunk(&self) -> usize {
        if self.guard_size == 0 {
            1
        } else {
            2
        }
    }
}
