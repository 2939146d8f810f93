//! Linked stack chunks: the mechanism-independent runtime shared by the look-ahead mechanism
//! (thesis 3.4.3, Capriccio-style checkpoints) and the MMU mechanisms (3.4.4, guard page and
//! `SIGSEGV`). Chunk memory comes from arenas ([`arena`]), moves between per-thread caches and
//! a shared pool in batches ([`pool`], [`chain`]) and goes back to the system under a policy
//! that follows the program's recent peak ([`chain`] module docs).
//!
//! # ABI contract with the compiler and the assembly handlers
//!
//! * **Chunk size**: the program defines the 32-bit data symbol [`CHUNK_SIZE_SYMBOL`]
//!   (`__cmm_chunk_size`, the `--chunk-size` value in bytes: a multiple of 4096, header
//!   included, guard page excluded). The runtime references it weakly; without it the size is
//!   [`DEFAULT_CHUNK_SIZE`] (32 KiB). Larger chunks (size classes `chunk_size << k`) serve
//!   reserves a standard chunk cannot hold.
//! * **Chunk header**: [`ChunkHeader`], at the top of each chunk, word `i` at offset `i * P`:
//!   0 `thread_stack`, 1 `prev_sp`, 2 `prev_header`, 3 `limit`, 4 `resume` (MMU),
//!   5..7 runtime-private. [`HEADER_SIZE`] = 8 words. The chunk register points at it.
//! * **Unlinking by compiled code**: code may unlink the chunk it runs on without calling the
//!   runtime, when that chunk's first frame has returned (SP = chunk register): SP = `prev_sp`,
//!   word 0 = [`UNLINKED`], chunk register = `prev_header`. The runtime does the bookkeeping on
//!   its next entry for the thread (see [`UNLINKED`]); entry points given a chunk take it as the
//!   one the code runs on, and the chain's chunks above it must all be marked.
//! * **Reclaim budget**: the thread stack address `T` (header word 0 of every live chunk) is
//!   16-byte aligned and its first 4 bytes belong to the budget: whenever the runtime runs for
//!   the thread it stores a positive count there; compiled code decrements the 32-bit word at
//!   each inline unlink and, when it reaches zero, calls the reclaim handler
//!   (`stackrt_lookahead_reclaim`, which calls [`stackrt_chunk_reclaim`]). So a thread never
//!   holds more than a budget's worth of unlinked chunks, and a hot split (the budget is
//!   refilled at every overflow) never calls it.
//! * **Checkpoint test** for reserve `R`: overflow iff `SP - R < limit + CHECK_SLACK`. `R` may
//!   exceed a standard chunk's [`chunk_capacity`]: the overflow handler then links a chunk of
//!   the smallest size class that holds it.
//! * **Stack need at entry**: under `lookahead` the u32 at `fp - 8` of every C-- function is
//!   the bytes it needs below the SP before its arguments are pushed (arguments, return address
//!   and its longest path to the next checkpoints); the entry trampoline gives the thread's
//!   first chunk at least that capacity.
//! * **Entry points** (`extern "C"`, called on the thread's native stack, i.e. after the
//!   handler switched SP to `[chunk_reg + OFF_THREAD_STACK]` and aligned it to 16):
//!   - `ChunkHeader *stackrt_chunk_thread_enter(uintptr_t thread_stack, uintptr_t need)` —
//!     first chunk;
//!   - `ChunkHeader *stackrt_chunk_overflow(ChunkHeader *cur, uintptr_t caller_sp,
//!     uintptr_t reserve)` — new chunk, `prev_sp = caller_sp`, `prev_header = cur`;
//!   - `ChunkHeader *stackrt_chunk_reclaim(ChunkHeader *cur)` — the bookkeeping of the chunks
//!     compiled code unlinked above `cur`, a fresh budget; returns `cur`;
//!   - `ChunkHeader *stackrt_chunk_underflow(ChunkHeader *cur)` — returns `cur->prev_header`;
//!     load `cur->prev_sp` before the call (for handlers that cannot unlink inline, e.g. an
//!     underflow through a replaced return address);
//!   - `void stackrt_chunk_thread_exit(void)` — after the C-- function returned, off-chunk;
//!   - `stackrt_chunk_thread_enter_guarded`, `stackrt_chunk_current`, `stackrt_chunk_size`.
//!
//!   They never return on error: they print one line naming the thread and `_exit` with
//!   [`FATAL_EXIT_STATUS`].
//!
//! # Environment
//! `STACKRT_STACK_LIMIT` (bytes, suffix K/M/G allowed) limits each thread's chunk bytes,
//! `STACKRT_MEMORY_LIMIT` the chunk memory of all threads together (defaults in
//! [`global`]); `STACKRT_STATS=1` prints [`stats`] at exit.

pub mod arena;
pub mod cache;
pub mod chain;
pub mod config;
pub mod error;
pub mod first_block;
pub mod global;
pub mod handler;
pub mod header;
pub mod poison;
pub mod pool;
pub mod pressure;
pub mod release;
pub mod runtime;
pub mod state;
pub mod stats;
pub mod supply;

pub use crate::base::diag::FATAL_EXIT_STATUS;
pub use arena::MapError;
pub use chain::ThreadChain;
pub use config::{RuntimeConfig, ALL_CLASSES, MAX_SMALL_CLASSES, MIN_SMALL_CHUNK, NUM_CLASSES};
pub use error::ChunkError;
pub use global::{
    default_limits, parse_bytes, runtime, stackrt_chunk_current, stackrt_chunk_overflow,
    stackrt_chunk_reclaim, stackrt_chunk_size, stackrt_chunk_thread_enter,
    stackrt_chunk_thread_enter_guarded, stackrt_chunk_thread_exit, stackrt_chunk_underflow,
};
pub use header::{
    chunk_capacity, ChunkGeometry, ChunkHeader, CHECK_SLACK, DEFAULT_CHUNK_SIZE, HEADER_SIZE,
    UNLINKED,
};
pub use runtime::Runtime;

/// Name of the data symbol holding the program's chunk size (a `u32`, bytes).
pub use crate::base::abi::CHUNK_SIZE_SYMBOL;
