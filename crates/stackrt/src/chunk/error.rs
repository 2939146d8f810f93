//! The chunk runtime's errors: what a chain operation refuses, and the one-line text the entry
//! points print before they stop the program.

use super::arena::MapError;

use core::fmt;

/// A stack error. The entry points turn it into a one-line message naming the thread and end
/// the program; the Rust API returns it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChunkError {
    /// An overflow, underflow or exit on a thread that has not entered chunked code.
    NotEntered,
    /// A second enter on a thread already running on chunks.
    AlreadyEntered,
    /// The header passed in is not the thread's current chunk.
    ChainMismatch { expected: usize, got: usize },
    /// The caller's stack pointer is outside the current chunk.
    BadStackPointer {
        sp: usize,
        limit: usize,
        header: usize,
    },
    /// A call asked for more stack in one piece than the largest chunk class holds.
    ReserveTooLarge { reserve: usize, largest: usize },
    /// An underflow in a thread's first chunk, which has no previous chunk to return to.
    UnderflowFirstChunk,
    /// One more chunk would pass the per-thread stack limit.
    StackLimit {
        in_use: usize,
        needed: usize,
        limit: usize,
    },
    /// More chunk memory would pass the process-wide limit.
    MemoryLimit {
        carved: usize,
        needed: usize,
        limit: usize,
    },
    /// One more guarded chunk would pass the runtime's share of `vm.max_map_count`.
    MapLimit { mappings: usize, max: usize },
    /// The system refused memory for chunks.
    OutOfMemory { error: MapError },
    /// The thread asked to leave chunked code while still running on one of its chunks.
    ExitOnChunk,
}

impl fmt::Display for ChunkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ChunkError::NotEntered => {
                write!(
                    f,
                    "stack chunk handler called on a thread that is not running on chunks"
                )
            }
            ChunkError::AlreadyEntered => write!(f, "thread entered chunked code twice"),
            ChunkError::ChainMismatch { expected, got } => write!(
                f,
                "corrupted stack chunk chain: current chunk header is {expected:#x}, \
                 handler was given {got:#x}"
            ),
            ChunkError::BadStackPointer { sp, limit, header } => write!(
                f,
                "corrupted stack: stack pointer {sp:#x} is outside the current chunk \
                 [{limit:#x}, {header:#x}]"
            ),
            ChunkError::ReserveTooLarge { reserve, largest } => write!(
                f,
                "a call needs {reserve} bytes of stack in one piece, more than the largest \
                 stack chunk holds ({largest})"
            ),
            ChunkError::UnderflowFirstChunk => {
                write!(
                    f,
                    "corrupted stack: underflow out of the thread's first chunk"
                )
            }
            ChunkError::StackLimit {
                in_use,
                needed,
                limit,
            } => write!(
                f,
                "stack limit exceeded: {in_use} bytes of stack chunks in use, {needed} \
                 more needed, limit {limit} bytes (set STACKRT_STACK_LIMIT to change it)"
            ),
            ChunkError::MemoryLimit {
                carved,
                needed,
                limit,
            } => write!(
                f,
                "out of memory for stack chunks: {carved} bytes used by all threads, {needed} \
                 more needed, limit {limit} bytes (set STACKRT_MEMORY_LIMIT to change it)"
            ),
            ChunkError::MapLimit { mappings, max } => write!(
                f,
                "out of memory mappings for stack chunks: {mappings} in use, at most {max} \
                 (raise vm.max_map_count or recompile with a larger --chunk-size)"
            ),
            ChunkError::OutOfMemory { error } => match error {
                MapError::Mmap { bytes, errno } => {
                    write!(f, "cannot map {bytes} bytes for stack chunks: mmap failed")?;
                    if errno == libc::ENOMEM {
                        write!(f, " (out of memory or address space)")
                    } else {
                        write!(f, " (errno {errno})")
                    }
                }
                MapError::Guard(e) => write!(
                    f,
                    "cannot protect the guard page of a stack chunk: mprotect failed (errno {e})"
                ),
                MapError::TooManyRegions => write!(
                    f,
                    "cannot map more memory for stack chunks: {} mappings recorded",
                    super::arena::MAX_REGIONS
                ),
            },
            ChunkError::ExitOnChunk => {
                write!(
                    f,
                    "thread tried to release its stack chunks while running on them"
                )
            }
        }
    }
}
