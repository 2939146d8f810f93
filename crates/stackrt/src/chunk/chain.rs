//! A thread's chain of stack chunks, [`ThreadChain`], and its operations: enter, overflow
//! (with the hot split), underflow, reclaim and exit. With [`Runtime`] (the shared half,
//! [`super::runtime`](mod@super::runtime) and the files beside it) this is the chunk runtime proper, independent of
//! any global state; the process-wide instances and the `extern "C"` entry points are in
//! [`super::global`]; tests build their own instances and simulate many threads in one. These
//! module docs describe the whole design.
//!
//! # Size classes
//! A chunk of the standard class is `chunk_size` bytes (header included, guard excluded), of
//! the `j`-th class above it `chunk_size << j`. A checkpoint whose reserve does not fit a
//! standard chunk gets the smallest class that holds it, so frames of any size run; every
//! class has its own caches and pool lists.
//!
//! # Small classes
//! A green thread starts on a block sized to what its entry needs (tens to hundreds of
//! bytes), and a thread that touches K bytes of stack should hold about K bytes, not a
//! standard chunk, as Go's goroutine stacks start at 2 KiB and double. So, without guard
//! pages (`lookahead`), the runtime has [`RuntimeConfig::small_classes`] classes below the
//! standard one, halving down to 512 bytes (index 0 is then the smallest class; the standard
//! class is `small_classes`), and a green-thread worker's chains link them: a checkpoint with
//! `B` bytes of stack in use below it gets the largest class of at most `B` bytes (at least
//! the smallest one that holds its reserve), so each chunk about doubles what the thread
//! holds: 512, 1 KiB, 2 KiB, ... up to the standard chunk, then growth as below. Like growth,
//! the class is a function of the depth, so the hot split works at every depth. Other chains
//! never link a small class (an OS thread's stack is one chunk or more anyway; a guarded
//! chunk costs a page of guard and the kernel mapping it splits, so the MMU mechanisms' chunks
//! are never smaller than the standard one). Small chunks do not fill a page each, so the release policy
//! never gives their pages back: they stay in the pool, resident, and count as such.
//!
//! # Growth
//! A chain that gets deep gets larger chunks (when [`RuntimeConfig::growth_max`] is above the
//! standard size: `lookahead`, `mmu` and `mmu-reuse`, 1 MiB by default, `STACKRT_CHUNK_GROWTH`;
//! see [`super::global::set_growth`] for why not the heap mechanisms and why the MMU ones). A chunk linked for a checkpoint
//! with `B` bytes of stack in use below it is of the largest class of at most `2 B` and at most
//! `growth_max` bytes (the standard class while `B` is below one standard chunk), or larger if
//! its reserve needs it: each link at least doubles what the thread holds, as Go's stacks double.
//! A chain that links small classes (a green-thread worker's) keeps the lean rule from a
//! standard chunk's worth on: at most `B / 2`, the standard class below four standard chunks'
//! worth, so that among thousands of threads a deep one holds at most about 1.5 times what it
//! uses (the `2 B` rule made 20,000 green threads of which 200 go 240 KB deep hold 1.65 times
//! their frames: `tests/green.rs`, `green_blocks_hold_what_their_threads_touch`). The size is a function of the depth, so a recursion that goes down and up
//! again links the same classes at the same depths, and the hot split works at every depth. A
//! forced overflow (the reserve fits the running chunk after all: a green thread's preemption
//! poisons the check word) gets the reserve's class, never a grown one. Why grow: every chunk
//! boundary an unwind crosses costs it a mispredicted return (the chunk's first frame returns into
//! the checkpoint's out-of-line path, not to the address the return predictor holds), and a deep
//! unwind is memory-bound, so that costs far more than a pipeline flush. A million-deep recursion
//! of 32-byte frames crossed about a thousand boundaries with 32 KiB chunks; with growth it crosses
//! about forty (1 MiB chunks at most, [`super::config::DEFAULT_GROWTH_MAX_BYTES`] says why). Under
//! the MMU mechanisms every boundary a descent crosses is also a `SIGSEGV` and its handler
//! (microseconds; [`super::global::set_growth`]). Why `2 B` and from the first standard chunk
//! on: a recursion 4,096 deep of 32-byte frames with a C call's reserve (`call_depth`) crossed
//! five boundaries per descent with `B / 2` from four standard chunks on (the rule until
//! 2026-11-28), three now, and each crossing pair costs it about 60 ns (the handler, the
//! header and the new chunk's lines are cold after thousands of calls): 0.97x the time at
//! 4,096 deep, 0.985x at 16,384 (x86-64, Zen 4). The cost: a chain's newest chunk may be up to
//! two thirds empty (a worker's: half), so a deep OS thread holds up to about three times the
//! stack it uses below `growth_max` (the untouched part is not resident); the reclaim budget
//! counts in bytes
//! ([`RuntimeConfig::reclaim_budget_at`]). Measured with the thesis-size tree and 64 threads
//! (`tree_multi 1048575 1000000 0.3 5 64`, 5 interleaved pairs, 2026-11-27) growth against
//! fixed chunks under `mmu-reuse`: 0.98x the time and 1.00x the peak RSS on x86-64, 0.95x the
//! time and 1.12x the peak RSS (356 against 318 MiB) on i686; under `mmu` 1.01x / 0.99x and
//! 0.84x / 1.10x.
//!
//! # Where a chunk comes from and where it goes
//! * **Acquire** (an overflow or a thread's first chunk): the thread's cache of that class
//!   (LIFO, no lock, no system call), else one batch from the shared pool (one lock operation
//!   for up to [`RuntimeConfig::max_batch`] chunks: resident chunks first, then chunks whose
//!   pages were given back), else a batch carved from an arena ([`super::arena`]; a new arena
//!   is mapped only when the current one is used up).
//! * **Release** (the bookkeeping of an unlinked chunk): into the thread's cache. A cache over
//!   its capacity keeps the newest half and gives the rest to the pool as batches, in one lock
//!   operation. A thread's exit gives its caches and chain to the pool the same way.
//! * **Adaptive caches**: the standard class's cache starts at [`RuntimeConfig::cache_min`]
//!   chunks and is resized at each refill from the pool, between `cache_min` and
//!   [`RuntimeConfig::cache_max`]: to the number of chunks the thread gave back since its
//!   previous refill (rounded up to a power of two: the depth of its last excursion, which it
//!   is likely to repeat), or, when it refills twice in a row (going deeper), to twice its
//!   size. A refill takes half a cache; a cache over its capacity gives all but half of it
//!   back. A hot split never leaves the cache; a deep recursion, down and up again, moves its
//!   chunks in batches of half the largest cache.
//! * **Giving memory back**: all chunk memory not in the pool is *held* (in chains and caches).
//!   The pool's resident chunks are only kept while `held + resident pool` is at most the
//!   recent peak of `held` plus `pool_floor`, where the recent peak is the largest `held` seen
//!   in the current and the previous window of [`RuntimeConfig::trim_window_ms`] (windows
//!   advance at pool operations). Beyond that, pool chunks are given back in bulk with
//!   `madvise(MADV_DONTNEED)` (their address range stays carved, and reusing them costs page
//!   faults, no system call). So resident chunk memory follows the program's recent peak: a
//!   program that keeps recursing as deep keeps its memory, one that stopped gives it back
//!   within two windows of its next pool operation. Arenas are never unmapped.
//!
//! * **Memory pressure**: while the chunks held by threads exceed
//!   [`RuntimeConfig::soft_limit`], only [`RuntimeConfig::max_growers`] threads at a time may
//!   take more chunks (they hold a growth token until they give memory back); another thread
//!   that needs a refill sleeps until the held memory drops, a token comes free or a give
//!   happens (a give wakes as many waiters as there are tokens; one that finds the held memory
//!   below the soft limit wakes as many more), and goes on anyway only when nothing at all was
//!   given back for
//!   [`RuntimeConfig::growth_wait_ms`]. With many threads recursing deep at once (the OS
//!   scheduler runs them all a little at a time), a few go down and back up while the others
//!   wait, and the memory in use stays near the soft limit instead of growing to the sum of
//!   every thread's depth. Threads that all need memory and give none back (a barrier at the
//!   bottom) lose one such wait each, and then take memory up to the hard
//!   [`RuntimeConfig::memory_limit`].
//!
//! Compiled code may unlink a chunk by itself (header word 0 = [`UNLINKED`]); such chunks stay
//! at the top of the chain until the thread's next overflow, reclaim call or exit, which first
//! unlinks them as an underflow handler would have, newest first, into the thread's caches;
//! a cache over its capacity is then trimmed once for all of them (so the pool may see one
//! larger batch where handlers called on the spot would have given several). The hot split
//! (the only marked chunk is a standard one right above the running chunk, and the overflow
//! wants a standard chunk) relinks that chunk at once: what unlinking it into the LIFO cache
//! and taking it back would have done. On an OS thread with statistics off, the `lookahead`
//! overflow handler does that relink itself, without calling the runtime, where it is
//! exact: the chunk linked after the running one ([`ChunkHeader::link`], kept by
//! [`ThreadChain::overflow`] and [`ThreadChain::unlink_top`]) is marked, was linked at the
//! same stack pointer and holds the reserve (`super::handler::HOT_SPLIT_OFFSET`). Chunks the
//! code unlinked above it may stay marked in the chain meanwhile; the runtime unlinks them at
//! its next run for the thread, as ever. The *reclaim budget* bounds how long marked chunks
//! wait: the runtime stores [`RuntimeConfig::reclaim_budget`] in the 32-bit word at the
//! thread stack address (header word 0) whenever it runs for the thread, compiled code
//! decrements it at each inline unlink, and calls the runtime's reclaim handler when it
//! reaches zero (see [`DEFAULT_RECLAIM_BYTES`] for the size).
//!
//! A [`ThreadChain`] has only `Cell`s of plain data and raw pointers, no destructor and a
//! `const` constructor, so a `const`-initialised thread-local of it compiles to a direct TLS
//! access usable from a signal handler (runtime-facts.md). Its methods are not reentrant: the
//! MMU mechanisms may call them from a `SIGSEGV` handler only for faults raised by compiled
//! code, which never runs while a method of the same thread's chain is active.

use core::cell::Cell;
use core::ptr::{self, NonNull};

#[cfg(doc)]
use super::config::{RuntimeConfig, DEFAULT_RECLAIM_BYTES};
use super::config::{ALL_CLASSES, FOREIGN_HANDLER_ROOM};
use super::error::ChunkError;
use super::header::{chunk_capacity, ChunkHeader, CHECK_SLACK, HEADER_SIZE, UNLINKED};
use super::pool::FreeList;
use super::runtime::Runtime;

/// One thread's chain of chunks and private caches. In declaration order (`repr(C)`), the
/// caches last: a green thread's switch swaps the fields before them (`super::state`), which
/// then share a cache line or two.
#[repr(C)]
pub struct ThreadChain {
    pub(super) id: Cell<u32>,
    pub(super) tid: Cell<i32>,
    pub(super) active: Cell<bool>,
    /// Current (newest) chunk; null when not active.
    pub(super) top: Cell<*mut ChunkHeader>,
    /// Number of chunks in the chain.
    pub(super) depth: Cell<usize>,
    /// Bytes of the chunks in the chain (for the stack limit).
    pub(super) chain_bytes: Cell<usize>,
    /// Stack bytes used in the chunks below `top` (for the peak-stack statistic).
    pub(super) used_below: Cell<usize>,
    /// Capacity of the standard class's cache (adaptive), whether the last pool operation of it
    /// was a refill, and the chunks given to the pool since the last refill.
    pub(super) cap: Cell<usize>,
    pub(super) refilled: Cell<bool>,
    pub(super) released: Cell<usize>,
    /// Whether the thread holds a growth token (see [`Runtime`]'s memory pressure).
    pub(super) grower: Cell<bool>,
    /// Whether the chain's first chunk is memory the runtime does not own (a green thread's
    /// stack block, [`ThreadChain::offer_first_chunk`]): it never goes to a cache.
    pub(super) foreign_first: Cell<bool>,
    /// Low end of the memory offered for the next [`ThreadChain::enter`]'s first chunk; 0: none.
    pub(super) offer: Cell<usize>,
    /// Bytes kept free between the thread stack and the offered first chunk's header (see
    /// [`ThreadChain::offer_first_chunk`]).
    pub(super) offer_room: Cell<usize>,
    /// Whether this OS thread is a green-thread worker: chains come and go on it, so an exit
    /// keeps the caches (trimmed to their capacity) for the next green thread.
    pub(super) worker: Cell<bool>,
    pub(super) caches: [Cell<FreeList>; ALL_CLASSES],
}

impl ThreadChain {
    /// An inactive chain; usable as a `const` thread-local initialiser.
    pub const fn new() -> Self {
        ThreadChain {
            id: Cell::new(u32::MAX),
            tid: Cell::new(0),
            active: Cell::new(false),
            top: Cell::new(ptr::null_mut()),
            depth: Cell::new(0),
            chain_bytes: Cell::new(0),
            used_below: Cell::new(0),
            caches: [const { Cell::new(FreeList::new()) }; ALL_CLASSES],
            cap: Cell::new(0),
            refilled: Cell::new(false),
            released: Cell::new(0),
            grower: Cell::new(false),
            foreign_first: Cell::new(false),
            offer: Cell::new(0),
            offer_room: Cell::new(FOREIGN_HANDLER_ROOM),
            worker: Cell::new(false),
        }
    }

    pub fn is_active(&self) -> bool {
        self.active.get()
    }

    /// The runtime's number for this thread (in order of entering chunked code, from 0).
    pub fn id(&self) -> u32 {
        self.id.get()
    }

    /// The kernel thread id recorded at enter.
    pub fn tid(&self) -> i32 {
        self.tid.get()
    }

    /// The newest chunk's header (null when not active). Chunks that compiled code unlinked
    /// by itself stay in the chain until the runtime next runs for the thread, so this may lie
    /// above the chunk the code runs on.
    pub fn top(&self) -> *mut ChunkHeader {
        self.top.get()
    }

    /// Chunks in the chain.
    pub fn depth(&self) -> usize {
        self.depth.get()
    }

    /// Headers of the chain, newest first.
    pub fn chain_headers(&self) -> Vec<usize> {
        let mut v = Vec::new();
        let mut h = self.top.get();
        while !h.is_null() {
            v.push(h as usize);
            // SAFETY: chain headers are mapped while linked.
            h = unsafe { (*h).prev_header };
        }
        v
    }

    /// Whether `addr` lies in one of the chain's chunks (usable part or header).
    pub fn contains(&self, addr: usize) -> bool {
        let mut h = self.top.get();
        while !h.is_null() {
            // SAFETY: chain headers are mapped while linked.
            let (limit, prev) = unsafe { ((*h).limit, (*h).prev_header) };
            if addr >= limit && addr < h as usize + HEADER_SIZE {
                return true;
            }
            h = prev;
        }
        false
    }

    pub(super) fn check_limit(&self, rt: &Runtime, needed: usize) -> Result<(), ChunkError> {
        let in_use = self.chain_bytes.get();
        if in_use + needed > rt.config.stack_limit {
            return Err(ChunkError::StackLimit {
                in_use,
                needed,
                limit: rt.config.stack_limit,
            });
        }
        Ok(())
    }

    /// The smallest class from `min` up that holds `reserve`.
    pub(super) fn class_from(
        &self,
        rt: &Runtime,
        min: usize,
        reserve: usize,
    ) -> Result<usize, ChunkError> {
        rt.config
            .class_from(min, reserve)
            .ok_or(ChunkError::ReserveTooLarge {
                reserve,
                largest: chunk_capacity(rt.config.class_size(rt.config.max_class())),
            })
    }

    /// Whether this chain links small classes (module docs, "Small classes").
    #[inline]
    fn small(&self, rt: &Runtime) -> bool {
        self.worker.get() && rt.config.small_classes != 0
    }

    /// The smallest class this chain links.
    #[inline]
    pub(super) fn min_class(&self, rt: &Runtime) -> usize {
        if self.small(rt) {
            0
        } else {
            rt.config.std_class()
        }
    }

    /// The class growth gives a chunk linked with `below` bytes of stack in use below it.
    #[inline]
    fn grown(&self, rt: &Runtime, below: usize) -> usize {
        if self.small(rt) {
            rt.config.small_growth_class(below)
        } else {
            rt.config.growth_class(below)
        }
    }

    /// The class of the chunk an overflow links: growth's class for the stack `below` (the
    /// smallest class for a `forced` overflow), or the smallest larger one that holds
    /// `reserve`.
    #[inline]
    fn link_class(
        &self,
        rt: &Runtime,
        below: usize,
        forced: bool,
        reserve: usize,
    ) -> Result<usize, ChunkError> {
        let base = if forced {
            self.min_class(rt)
        } else {
            self.grown(rt, below)
        };
        if reserve <= rt.config.class_capacity(base) {
            Ok(base)
        } else {
            self.class_from(rt, base, reserve)
        }
    }

    /// Stores the reclaim budget for a chain whose newest chunk is of class `k`.
    pub(super) fn set_budget(&self, rt: &Runtime, thread_stack: usize, k: usize) {
        if rt.config.reclaim_budget != 0 {
            // SAFETY: with a budget configured, the thread stack address is the entry
            // trampoline's 16-byte aligned scratch area, whose first 4 bytes are reserved for
            // the budget (global.rs), writable while the thread runs chunked code.
            unsafe { (thread_stack as *mut u32).write(rt.config.reclaim_budget_at(k)) };
        }
    }

    /// The class of the chain's newest chunk for its reclaim budget: the standard class for
    /// the first chunk (nothing below it is ever unlinked; it may be offered memory of any
    /// length).
    pub(super) fn top_budget_class(&self, rt: &Runtime) -> usize {
        if self.depth.get() < 2 {
            rt.config.std_class()
        } else {
            rt.class_of(self.top.get())
        }
    }

    /// Starts the thread's chain: takes its first chunk, big enough for `need` bytes below its
    /// header, which gets `thread_stack` and no predecessor. Returns the header (the initial
    /// chunk register and SP).
    pub fn enter(
        &self,
        rt: &Runtime,
        thread_stack: usize,
        need: usize,
    ) -> Result<NonNull<ChunkHeader>, ChunkError> {
        if self.active.get() {
            return Err(ChunkError::AlreadyEntered);
        }
        if self.id.get() == u32::MAX {
            self.id.set(rt.new_thread_id());
            self.tid.set(crate::base::os::gettid());
            self.cap.set(rt.config.cache_min);
        }
        self.chain_bytes.set(0);
        let offer = self.offer.replace(0);
        let foreign = thread_stack
            .checked_sub(self.offer_room.get() + HEADER_SIZE)
            .map(|h| h & !15)
            .filter(|&h| offer != 0 && h > offer && h - offer >= need + CHECK_SLACK);
        let (h, size) = if let Some(h) = foreign {
            let size = h + HEADER_SIZE - offer;
            self.check_limit(rt, size)?;
            let h = h as *mut ChunkHeader;
            // SAFETY: the offered memory is the caller's, writable and unused (the offer's
            // contract); the header is written inside it.
            unsafe {
                (*h).limit = offer;
                (*h).map_base = offer;
                (*h).map_len = size;
            }
            // SAFETY: h was just checked non-null (it lies above `offer` > 0).
            (unsafe { NonNull::new_unchecked(h) }, size)
        } else {
            let k = self.class_from(rt, self.min_class(rt), need)?;
            let size = rt.config.class_size(k);
            self.check_limit(rt, size)?;
            (self.acquire(rt, k)?, size)
        };
        self.foreign_first.set(foreign.is_some());
        // SAFETY: h is a free mapped chunk (or offered memory) now owned by this chain.
        unsafe { init_header(rt, h.as_ptr(), thread_stack, 0, ptr::null_mut()) };
        self.active.set(true);
        self.top.set(h.as_ptr());
        self.depth.set(1);
        self.chain_bytes.set(size);
        self.used_below.set(0);
        self.set_budget(rt, thread_stack, 0);
        rt.stats.thread_entered(rt.config.count_stats, size);
        Ok(h)
    }

    /// Links a new chunk after `cur` (the chunk the code runs on: the newest one, or the one
    /// below the chunks compiled code unlinked by itself) for a checkpoint at `caller_sp` that
    /// needs `reserve` bytes (of any size: a larger class if need be). Returns the new header;
    /// the caller continues with chunk register = SP = that header.
    pub fn overflow(
        &self,
        rt: &Runtime,
        cur: *mut ChunkHeader,
        caller_sp: usize,
        reserve: usize,
    ) -> Result<NonNull<ChunkHeader>, ChunkError> {
        if !self.active.get() {
            return Err(ChunkError::NotEntered);
        }
        if let Some(h) = self.relink_hot_split(rt, cur, caller_sp, reserve) {
            return Ok(h);
        }
        self.reclaim_unlinked(rt, cur)?;
        let top = self.top.get();
        // SAFETY: top is the chain's current chunk, mapped while linked.
        let (limit, thread_stack) = unsafe { ((*top).limit, (*top).thread_stack) };
        if caller_sp < limit || caller_sp > top as usize {
            return Err(ChunkError::BadStackPointer {
                sp: caller_sp,
                limit,
                header: top as usize,
            });
        }
        let used_here = top as usize - caller_sp;
        let below = self.used_below.get() + used_here;
        let forced = fits(caller_sp, reserve, limit);
        if !forced && self.depth.get() == 1 && self.foreign_first.get() {
            // The offered block was too small for this checkpoint: say how much it needed, so
            // that the next blocks of the thread's kind can hold it.
            super::first_block::first_overflow(below.saturating_add(reserve));
        }
        let k = self.link_class(rt, below, forced, reserve)?;
        let size = rt.config.class_size(k);
        self.check_limit(rt, size)?;
        let h = self.acquire(rt, k)?;
        // SAFETY: h is a free mapped chunk now owned by this chain; top is the chain's
        // newest chunk, mapped while linked.
        unsafe {
            init_header(rt, h.as_ptr(), thread_stack, caller_sp, top);
            (*top).link = h.as_ptr();
        }
        self.used_below.set(below);
        self.top.set(h.as_ptr());
        self.depth.set(self.depth.get() + 1);
        self.chain_bytes.set(self.chain_bytes.get() + size);
        self.set_budget(rt, thread_stack, k);
        rt.stats.overflowed(
            rt.config.count_stats,
            size,
            caller_sp - limit,
            below + reserve,
        );
        Ok(h)
    }

    /// The hot split: the only chunk above `cur` is a chunk compiled code unlinked, and the
    /// checkpoint wants a chunk of its class (a standard one, or the class growth gives at
    /// this depth; module docs, "Growth"). Unlinking it into the cache and taking it back
    /// (the cache is LIFO) would link the same chunk again, so it is relinked on the spot, with
    /// the same statistics. `None` when the case does not apply (or something looks wrong:
    /// the general path then checks and reports it).
    #[inline]
    pub(super) fn relink_hot_split(
        &self,
        rt: &Runtime,
        cur: *mut ChunkHeader,
        caller_sp: usize,
        reserve: usize,
    ) -> Option<NonNull<ChunkHeader>> {
        let top = self.top.get();
        if top == cur || cur.is_null() {
            return None;
        }
        // SAFETY: top is the chain's newest chunk, mapped while linked.
        let (mark, prev, old_prev_sp, len) = unsafe {
            (
                (*top).thread_stack,
                (*top).prev_header,
                (*top).prev_sp,
                (*top).map_len,
            )
        };
        if mark != UNLINKED || prev != cur {
            return None;
        }
        // SAFETY: cur is top's predecessor in the chain, mapped while linked.
        let (limit, thread_stack) = unsafe { ((*cur).limit, (*cur).thread_stack) };
        if thread_stack == UNLINKED || caller_sp < limit || caller_sp > cur as usize {
            return None;
        }
        let below =
            self.used_below.get() - (cur as usize - old_prev_sp) + (cur as usize - caller_sp);
        // The class an overflow here would want (growth's, from the stack below; the
        // smallest for a forced overflow): the marked chunk is of it if its length is that
        // class's (no class lookup on this path). A reserve too large for it takes the
        // general path.
        let k = if fits(caller_sp, reserve, limit) {
            self.min_class(rt)
        } else {
            self.grown(rt, below)
        };
        let size = rt.config.class_size(k);
        if len != size + rt.config.geometry.guard_size || reserve > chunk_capacity(size) {
            return None;
        }
        // SAFETY: top is unlinked by the code and owned by this chain; relinking it.
        unsafe { init_header(rt, top, thread_stack, caller_sp, cur) };
        self.used_below.set(below);
        self.set_budget(rt, thread_stack, k);
        rt.stats.hot_split(
            rt.config.count_stats,
            size,
            caller_sp - limit,
            below + reserve,
        );
        // SAFETY: an active chain has a non-null top.
        Some(unsafe { NonNull::new_unchecked(top) })
    }

    /// Unlinks the chunk `cur` the code runs on (as in [`ThreadChain::overflow`]) after its
    /// first frame returned. Returns the previous chunk's header. The caller must have read
    /// `cur`'s `prev_sp` (and `prev_header`) before: the chunk may be reused or released by the
    /// time this returns.
    pub fn underflow(
        &self,
        rt: &Runtime,
        cur: *mut ChunkHeader,
    ) -> Result<NonNull<ChunkHeader>, ChunkError> {
        if !self.active.get() {
            return Err(ChunkError::NotEntered);
        }
        self.reclaim_unlinked(rt, cur)?;
        if self.depth.get() < 2 {
            return Err(ChunkError::UnderflowFirstChunk);
        }
        let (prev, k) = self.unlink_top(rt);
        self.trim_cache(rt, k);
        // SAFETY: prev is the chain's current chunk, mapped while linked.
        let thread_stack = unsafe { (*prev.as_ptr()).thread_stack };
        self.set_budget(rt, thread_stack, self.top_budget_class(rt));
        Ok(prev)
    }

    /// The reclaim call of compiled code whose budget ran out: the bookkeeping of the chunks
    /// above `cur` that compiled code unlinked, and a fresh budget. Returns `cur`.
    pub fn reclaim(
        &self,
        rt: &Runtime,
        cur: *mut ChunkHeader,
    ) -> Result<NonNull<ChunkHeader>, ChunkError> {
        if !self.active.get() {
            return Err(ChunkError::NotEntered);
        }
        self.reclaim_unlinked(rt, cur)?;
        rt.stats.reclaimed(rt.config.count_stats);
        // reclaim_unlinked checked that `cur` is in the chain and unlinked everything above it:
        // it is the chain's (non-null) top now.
        let top = self.top.get();
        // SAFETY: top is the chain's current chunk, mapped while linked.
        let thread_stack = unsafe { (*top).thread_stack };
        self.set_budget(rt, thread_stack, self.top_budget_class(rt));
        // SAFETY: an active chain has a non-null top.
        Ok(unsafe { NonNull::new_unchecked(top) })
    }

    /// Does the bookkeeping of the chunks compiled code unlinked by itself: every chunk of the
    /// chain above `cur` (the chunk the code runs on) must be marked [`UNLINKED`], and is then
    /// unlinked as an underflow would have, newest first. Checks everything before changing
    /// anything: `cur` not in the chain, or marked itself, is a [`ChunkError::ChainMismatch`].
    pub(super) fn reclaim_unlinked(
        &self,
        rt: &Runtime,
        cur: *mut ChunkHeader,
    ) -> Result<(), ChunkError> {
        let top = self.top.get();
        if top == cur && !cur.is_null() {
            // SAFETY: cur is the chain's top, mapped while linked.
            if unsafe { (*cur).thread_stack } != UNLINKED {
                return Ok(());
            }
        }
        let mismatch = ChunkError::ChainMismatch {
            expected: top as usize,
            got: cur as usize,
        };
        let mut above = 0;
        let mut h = top;
        while h != cur {
            if h.is_null() {
                return Err(mismatch);
            }
            // SAFETY: chain headers are mapped while in the chain.
            let (mark, prev) = unsafe { ((*h).thread_stack, (*h).prev_header) };
            if mark != UNLINKED {
                return Err(mismatch);
            }
            above += 1;
            h = prev;
        }
        // SAFETY: cur is a chain header (found above), mapped.
        if cur.is_null() || unsafe { (*cur).thread_stack } == UNLINKED {
            return Err(mismatch);
        }
        let mut classes = 0u32;
        for _ in 0..above {
            classes |= 1 << self.unlink_top(rt).1;
        }
        while classes != 0 {
            let k = classes.trailing_zeros() as usize;
            classes &= classes - 1;
            self.trim_cache(rt, k);
        }
        Ok(())
    }

    /// Unlinks the chain's newest chunk (the chain has at least two): it goes to the thread's
    /// cache (the caller then calls [`ThreadChain::trim_cache`] for its class). Returns the new
    /// newest chunk and the class of the unlinked one.
    pub(super) fn unlink_top(&self, rt: &Runtime) -> (NonNull<ChunkHeader>, usize) {
        let top = self.top.get();
        // SAFETY: top is mapped while linked; its prev_header is the previous linked chunk.
        let (prev, prev_sp) = unsafe { ((*top).prev_header, (*top).prev_sp) };
        // SAFETY: prev is the previous linked chunk, mapped (non-null: the chain had at least
        // two chunks). Nothing is linked after it any more (`ChunkHeader::link`).
        unsafe { (*prev).link = ptr::null_mut() };
        self.used_below
            .set(self.used_below.get() - (prev as usize - prev_sp));
        self.top.set(prev);
        self.depth.set(self.depth.get() - 1);
        let k = rt.class_of(top);
        self.chain_bytes
            .set(self.chain_bytes.get() - rt.config.class_size(k));
        if rt.config.reuse {
            // SAFETY: top was just unlinked: free, mapped, owned by this thread.
            self.with_cache(k, |c| unsafe { c.push(top) });
        } else {
            rt.release_now(k, top);
        }
        rt.stats
            .underflowed(rt.config.count_stats, rt.config.class_size(k));
        // SAFETY: prev is non-null because the chain had at least two chunks.
        (unsafe { NonNull::new_unchecked(prev) }, k)
    }

    /// Leaves chunked code: after the bookkeeping of chunks compiled code unlinked, the private
    /// caches and the chain go to the shared pool. The caller must not be running on any of
    /// the chain's chunks.
    pub fn exit(&self, rt: &Runtime) -> Result<(), ChunkError> {
        if !self.active.get() {
            return Err(ChunkError::NotEntered);
        }
        // The classes whose caches get chunks here: only those can be over their capacity
        // (every other push trims its class), so only those are trimmed below.
        let mut pushed = 0u32;
        // Chunks compiled code unlinked (the thread returned through them): their underflows
        // first, as if the handler had run on the spot. Only the newest chunks can be marked,
        // never the first (its first frame returns to the entry trampoline).
        // SAFETY: chain headers are mapped while linked.
        while self.depth.get() > 1 && unsafe { (*self.top.get()).thread_stack } == UNLINKED {
            pushed |= 1 << self.unlink_top(rt).1;
        }
        let n = self.depth.get();
        let bytes = self.chain_bytes.get();
        let mut h = self.top.get();
        while !h.is_null() {
            // SAFETY: chain headers are mapped while linked; after reading the link the chunk
            // is unlinked and goes to the cache of its class.
            let prev = unsafe { (*h).prev_header };
            if prev.is_null() && self.foreign_first.get() {
                break;
            }
            let k = rt.class_of(h);
            // SAFETY: h is no longer part of the chain and nothing runs on it.
            self.with_cache(k, |c| unsafe { c.push(h) });
            pushed |= 1 << k;
            h = prev;
        }
        if self.worker.get() {
            while pushed != 0 {
                let k = pushed.trailing_zeros() as usize;
                pushed &= pushed - 1;
                self.trim_cache(rt, k);
            }
        } else {
            for k in 0..ALL_CLASSES {
                let all = self.caches[k].take();
                rt.give(k, all);
            }
        }
        rt.release_growth_token(self);
        self.top.set(ptr::null_mut());
        self.depth.set(0);
        self.chain_bytes.set(0);
        self.used_below.set(0);
        self.active.set(false);
        self.foreign_first.set(false);
        if !self.worker.get() {
            self.cap.set(rt.config.cache_min);
            self.refilled.set(false);
            self.released.set(0);
        }
        rt.stats.thread_exited(rt.config.count_stats, n, bytes);
        Ok(())
    }
}

impl Default for ThreadChain {
    fn default() -> Self {
        Self::new()
    }
}

/// Whether a checkpoint at `caller_sp` that needs `reserve` bytes fits above `limit` after all:
/// its overflow was forced (a green thread's preemption poisons the check word), so the chunk
/// it gets is the reserve's class, never grown (module docs, "Growth"): a preempted thread
/// leaves its chunk's rest unused, and that must not cost it a grown chunk each time.
pub(super) fn fits(caller_sp: usize, reserve: usize, limit: usize) -> bool {
    caller_sp
        .checked_sub(reserve.saturating_add(CHECK_SLACK))
        .is_some_and(|low| low >= limit)
}

/// Writes the per-use header words of a chunk being linked: word 4 is the check word under
/// `lookahead` (`limit + bias`, [`super::header::OFF_CHECK`]), 0 otherwise.
///
/// # Safety
/// `h` is a mapped chunk header owned by the caller, its `limit` written.
#[inline]
pub(super) unsafe fn init_header(
    rt: &Runtime,
    h: *mut ChunkHeader,
    thread_stack: usize,
    prev_sp: usize,
    prev: *mut ChunkHeader,
) {
    // SAFETY: guaranteed by the caller.
    unsafe {
        (*h).thread_stack = thread_stack;
        (*h).prev_sp = prev_sp;
        (*h).prev_header = prev;
        (*h).resume = rt.config.check_bias.map_or(0, |b| (*h).limit + b);
        (*h).link = ptr::null_mut();
    }
}
