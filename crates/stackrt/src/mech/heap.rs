//! The `heap` and `heap-malloc` mechanisms' side of the runtime (ABIs [`crate::base::abi::ABI_HEAP`]
//! and [`crate::base::abi::ABI_HEAP_MALLOC`], thesis 3.4.2, paper 4.3): the per-thread frame
//! allocator that the emitted code runs inline, its slow paths, and entering C-- code.
//!
//! Every C-- activation has its own heap block: the caller takes one of the callee's size class
//! from the thread's free list, moves SP to its top, stores its own SP in the top word, pushes
//! the arguments and calls; after the return it puts the block back at the head of the list.
//! The sequences are in `crates/cmm-codegen/src/emit/mech/heap.rs`; this module owns the data
//! they work on:
//!
//! * [`HeapTls`], the thread-local block the emitted code addresses through the thread pointer
//!   (symbol `stackrt_heap_tls`, local-exec TLS: `gs:`/`fs:` plus a link-time offset). Its
//!   layout up to `carved` is the ABI contract with the compiler, checked on both sides.
//! * Free lists by size class ([`class_size`]): the head is the address of a free block's top
//!   word, which holds the next one. Only the owning thread touches them: no lock, no atomic.
//! * Slabs: blocks are carved below a bump pointer from *slabs*, which are stack chunks of the
//!   thread's chunk chain ([`crate::chunk`]): arena-backed memory, the per-thread stack limit
//!   (`STACKRT_STACK_LIMIT`, the same one-line error), the per-thread caches and the shared
//!   pool that follows the program's recent peak. A carved block stays with its class's list
//!   until the thread ends; then every slab goes back to the pool at once, and from there to
//!   other threads or the system, as the chunks of the other mechanisms.
//! * Blocks larger than [`MAX_CLASS_SIZE`] take the general path: a runtime call that takes a
//!   block from the thread's list of large blocks or links a chunk big enough for it.
//! * `heap-malloc` (the thesis's variant): the general path for every frame, with `malloc` and
//!   `free`.
//!
//! Statistics (`STACKRT_STATS=1`): the emitted code counts frames in the TLS block (`frames`)
//! and carved blocks per class (`carved`). A class's block is carved only when its list is
//! empty, i.e. when every block of the class is live, so `carved[k]` is exactly the peak number
//! of live frames of class `k`; the report sums it over the classes (an upper bound of the
//! thread's peak of live frames, exact when one class dominates, as in a deep recursion).

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

use crate::base::diag::{exit_fatal, StackBuf};
use crate::base::os::gettid;
use crate::chunk::{stackrt_chunk_current, ChunkHeader};

extern "C" {
    fn stackrt_enter_heap(fp: usize, a0: usize, a1: usize, nargs: usize) -> usize;
}

/// Number of size classes (mirrors `cmm_codegen::emit::mech::heap::NUM_CLASSES`).
pub const NUM_CLASSES: usize = 52;
/// Pointer size: the word of the emitted conventions.
const P: usize = core::mem::size_of::<usize>();
/// Step of the small classes and alignment of every block: 16 bytes on 64-bit targets, 8 on
/// 32-bit ones (mirrors the compiler's `granule`).
pub const GRANULE: usize = if P == 8 { 16 } else { 8 };

/// Bytes of size class `k`: `GRANULE * (k + 1)` up to `32 * GRANULE`, then four classes per
/// doubling (mirrors the compiler's `class_size`).
pub const fn class_size(k: usize) -> usize {
    if k < 32 {
        GRANULE * (k + 1)
    } else {
        let j = k - 32;
        let base = (32 * GRANULE) << (j / 4);
        base + base / 4 * (j % 4 + 1)
    }
}

/// The largest size class (16 KiB on x86-64, 8 KiB on i686); larger blocks take the general
/// path.
pub const MAX_CLASS_SIZE: usize = class_size(NUM_CLASSES - 1);

/// The smallest class holding `bytes`, or None above [`MAX_CLASS_SIZE`].
pub fn class_for(bytes: usize) -> Option<usize> {
    (0..NUM_CLASSES).find(|&k| class_size(k) >= bytes)
}

/// The thread's allocator state. Fields up to `carved` are read and written by emitted code at
/// fixed offsets (see the compiler's `TlsLayout`); the rest is the runtime's.
#[repr(C)]
pub struct HeapTls {
    /// Top of the thread's C stack (16-byte aligned); C and runtime calls run below it.
    pub cstack: usize,
    /// Top of the next block to carve; moves down towards `bump_end`.
    pub bump: usize,
    /// Lowest address of the current slab.
    pub bump_end: usize,
    /// The block top returned by the general allocation stub.
    pub large: usize,
    /// Frames allocated (counted inline by the emitted code and by the general path).
    pub frames: u64,
    /// Free list heads by class: the address of a free block's top word, or 0.
    pub heads: [usize; NUM_CLASSES],
    /// Blocks carved per class.
    pub carved: [usize; NUM_CLASSES],
    /// Free large blocks: the top of one; `[top - P]` = next, `[top - 2P]` = its capacity.
    large_free: usize,
    /// Large blocks (or, under `heap-malloc`, all blocks) live now and at most, and their bytes.
    general_live: usize,
    general_peak: usize,
    general_bytes: usize,
    general_peak_bytes: usize,
    /// Large blocks ever created (not counting reuse).
    large_created: usize,
    /// Nonzero while the thread runs heap code.
    active: usize,
    /// The entry function's block (freed at exit under `heap-malloc`).
    entry_top: usize,
    entry_size: usize,
    /// C callbacks into C-- running on this OS thread outside worker mode ([`nest`]): their
    /// entries take a block from the thread's lists as a green thread's do, and their exits
    /// give only that block back.
    nested: usize,
}

const _: () = {
    assert!(core::mem::offset_of!(HeapTls, cstack) == 0);
    assert!(core::mem::offset_of!(HeapTls, bump) == P);
    assert!(core::mem::offset_of!(HeapTls, bump_end) == 2 * P);
    assert!(core::mem::offset_of!(HeapTls, large) == 3 * P);
    assert!(core::mem::offset_of!(HeapTls, frames) == 4 * P);
    assert!(core::mem::offset_of!(HeapTls, heads) == 4 * P + 8);
    assert!(core::mem::offset_of!(HeapTls, carved) == 4 * P + 8 + NUM_CLASSES * P);
};

// The TLS block itself: `.tbss`, zero at thread start, defined in assembly so that the emitted
// code can name it (`stackrt_heap_tls@tpoff` / `@ntpoff`; `crate::base::tls`).
crate::tls_block!("stackrt_heap_tls", core::mem::size_of::<HeapTls>());

/// The calling thread's [`HeapTls`].
#[inline(always)]
fn tls() -> *mut HeapTls {
    crate::tls_address!("stackrt_heap_tls") as *mut HeapTls
}

/// Whether the program is `heap-malloc` (set before the first thread enters).
static MALLOC: AtomicBool = AtomicBool::new(false);

/// Process-wide statistics, summed over the threads that left heap code.
struct HeapStats {
    used: AtomicBool,
    frames: AtomicU64,
    carved: AtomicU64,
    large_created: AtomicU64,
    peak_live: AtomicU64,
    peak_bytes: AtomicU64,
}

static STATS: HeapStats = HeapStats {
    used: AtomicBool::new(false),
    frames: AtomicU64::new(0),
    carved: AtomicU64::new(0),
    large_created: AtomicU64::new(0),
    peak_live: AtomicU64::new(0),
    peak_bytes: AtomicU64::new(0),
};

thread_local! {
    /// Flushes the thread's statistics when it ends without the trampoline's exit
    /// (`sthread_exit` from C-- code); the chunk runtime's own guard gives the slabs back.
    static EXIT_GUARD: ExitGuard = const { ExitGuard };
}

struct ExitGuard;

impl Drop for ExitGuard {
    fn drop(&mut self) {
        let t = tls();
        // SAFETY: the TLS block of the exiting thread is still valid in its TLS destructors.
        if unsafe { (*t).active } != 0 {
            // SAFETY: as above; only this thread touches its block.
            unsafe { flush_stats(&mut *t) };
            // SAFETY: as above.
            unsafe { (*t).active = 0 };
        }
    }
}

/// One thread's numbers, added to [`STATS`].
fn flush_stats(t: &mut HeapTls) {
    let carved: usize = t.carved.iter().sum();
    let carved_bytes: usize = (0..NUM_CLASSES).map(|k| t.carved[k] * class_size(k)).sum();
    STATS.used.store(true, Relaxed);
    STATS.frames.fetch_add(t.frames, Relaxed);
    STATS.carved.fetch_add(carved as u64, Relaxed);
    STATS
        .large_created
        .fetch_add(t.large_created as u64, Relaxed);
    STATS
        .peak_live
        .fetch_max((carved + t.general_peak) as u64, Relaxed);
    STATS
        .peak_bytes
        .fetch_max((carved_bytes + t.general_peak_bytes) as u64, Relaxed);
    t.frames = 0;
    t.carved = [0; NUM_CLASSES];
    t.large_created = 0;
}

/// Ends the program with `stackrt: thread N (tid T): <message>`.
fn fatal(args: core::fmt::Arguments<'_>) -> ! {
    let mut buf = StackBuf::<512>::new();
    let _ = match crate::chunk::global::thread_number() {
        Some(n) => core::fmt::write(
            &mut buf,
            format_args!("stackrt: thread {n} (tid {}): {args}\n", gettid()),
        ),
        None => core::fmt::write(
            &mut buf,
            format_args!("stackrt: thread (tid {}): {args}\n", gettid()),
        ),
    };
    buf.write_to_stderr();
    exit_fatal()
}

/// A new chunk from the thread's chain holding at least `bytes` below its header.
fn new_chunk(bytes: usize) -> *mut ChunkHeader {
    let cur = stackrt_chunk_current();
    if cur.is_null() {
        fatal(format_args!(
            "heap frame allocation on a thread not running heap code"
        ));
    }
    // SAFETY: `cur` is the chain's newest chunk, mapped while the thread runs.
    let limit = unsafe { (*cur).limit };
    // The chain wants the caller's SP inside its newest chunk; the heap uses the whole chunk.
    let h = crate::chunk::stackrt_chunk_overflow(cur, limit, bytes);
    // SAFETY: a freshly linked chunk of this thread.
    let new_limit = unsafe { (*h).limit };
    if (h as usize) - new_limit < bytes {
        fatal(format_args!(
            "heap slab of {} bytes cannot hold a block of {bytes} bytes",
            h as usize - new_limit
        ));
    }
    h
}

/// Slow path of the inline allocation: the current slab has no room for a block of `size`
/// bytes; link a new slab and point the bump region at it (the old slab's rest is left).
pub extern "C" fn stackrt_heap_new_slab(size: usize, _top: usize) {
    let t = tls();
    // SAFETY: only this thread touches its TLS block.
    new_slab(unsafe { &mut *t }, size);
}

fn new_slab(t: &mut HeapTls, size: usize) {
    let h = new_chunk(size);
    t.bump = h as usize;
    // SAFETY: `h` is a chunk of this thread's chain, just linked.
    t.bump_end = unsafe { (*h).limit };
}

/// Counts a block of `bytes` of the general path (large blocks, every `heap-malloc` block)
/// going live: frames, live blocks and bytes, and their peaks.
fn note_live(t: &mut HeapTls, bytes: usize) {
    t.frames += 1;
    t.general_live += 1;
    t.general_bytes += bytes;
    t.general_peak = t.general_peak.max(t.general_live);
    t.general_peak_bytes = t.general_peak_bytes.max(t.general_bytes);
}

/// The counterpart of [`note_live`].
fn note_freed(t: &mut HeapTls, bytes: usize) {
    t.general_live -= 1;
    t.general_bytes -= bytes;
}

fn stack_limit() -> usize {
    crate::chunk::runtime().map_or(usize::MAX, |rt| rt.config().stack_limit)
}

/// Allocates a block of `size` bytes outside the inline path and returns its top (aligned to
/// [`GRANULE`]): from a class list or the slab, the large list or a new chunk; or `malloc`
/// under `heap-malloc`.
fn alloc_block(t: &mut HeapTls, size: usize) -> usize {
    if MALLOC.load(Relaxed) {
        let limit = stack_limit();
        if t.general_bytes + size > limit {
            fatal(format_args!(
                "stack limit exceeded: {} bytes of heap frames in use, {size} more needed, \
                 limit {limit} bytes (set STACKRT_STACK_LIMIT to change it)",
                t.general_bytes
            ));
        }
        note_live(t, size);
        let mut p: *mut libc::c_void = core::ptr::null_mut();
        // SAFETY: posix_memalign writes a pointer to a fresh allocation or fails.
        let r = unsafe { libc::posix_memalign(&mut p, 16, size.max(16)) };
        if r != 0 {
            fatal(format_args!(
                "out of memory for a heap frame of {size} bytes (malloc)"
            ));
        }
        return p as usize + size;
    }
    if let Some(k) = class_for(size) {
        t.frames += 1;
        let head = t.heads[k];
        if head != 0 {
            // SAFETY: a free block of this thread's list; its top word holds the next one.
            t.heads[k] = unsafe { *(head as *const usize) };
            return head + P;
        }
        let c = class_size(k);
        if t.bump < t.bump_end + c {
            new_slab(t, c);
        }
        t.bump -= c;
        t.carved[k] += 1;
        return t.bump + c;
    }
    // A large block: the smallest free one that fits, else a chunk of its own.
    let mut prev: *mut usize = &mut t.large_free;
    // SAFETY: the list links large blocks of this thread; each top word pair is inside its block.
    unsafe {
        while *prev != 0 {
            let top = *prev;
            let next = *((top - P) as *const usize);
            let cap = *((top - 2 * P) as *const usize);
            if cap >= size {
                *prev = next;
                note_live(t, cap);
                return top;
            }
            prev = (top - P) as *mut usize;
        }
    }
    let h = new_chunk(size);
    // SAFETY: a fresh chunk of this thread's chain.
    let cap = h as usize - unsafe { (*h).limit };
    t.large_created += 1;
    note_live(t, cap);
    // The block's top is the chunk's header: the free path finds the capacity from it.
    h as usize
}

/// Gives the block of `size` bytes at `top` back (the counterpart of [`alloc_block`]).
fn free_block(t: &mut HeapTls, top: usize, size: usize) {
    if MALLOC.load(Relaxed) {
        note_freed(t, size);
        // SAFETY: `top - size` is the pointer posix_memalign returned for this block.
        unsafe { libc::free((top - size) as *mut libc::c_void) };
        return;
    }
    if let Some(k) = class_for(size) {
        // SAFETY: the block is this thread's and no longer in use; its top word links it.
        unsafe { *((top - P) as *mut usize) = t.heads[k] };
        t.heads[k] = top - P;
        return;
    }
    let cap = large_capacity(top);
    note_freed(t, cap);
    // SAFETY: the block is free; its two top words hold the link and the capacity.
    unsafe {
        *((top - P) as *mut usize) = t.large_free;
        *((top - 2 * P) as *mut usize) = cap;
    }
    t.large_free = top;
}

/// The capacity of the large block at `top`: its chunk's whole stack range (a large block's
/// top is the header of the chunk made for it).
fn large_capacity(top: usize) -> usize {
    // SAFETY: large blocks are created only by `alloc_block` as whole chunks, whose header
    // stays mapped while the thread lives.
    top - unsafe { (*(top as *const ChunkHeader)).limit }
}

/// Allocates a block of `size` bytes for the calling thread, which must be running heap code
/// ([`stackrt_heap_thread_enter`]), outside the inline path; returns its top (aligned to
/// [`GRANULE`]). The same lists and slabs as the emitted code's inline path.
pub fn alloc_frame(size: usize) -> usize {
    let t = tls();
    // SAFETY: only this thread touches its TLS block.
    alloc_block(unsafe { &mut *t }, size)
}

/// Gives back the calling thread's block of `size` bytes at `top` (from [`alloc_frame`] or
/// the inline path).
pub fn free_frame(top: usize, size: usize) {
    let t = tls();
    // SAFETY: only this thread touches its TLS block.
    free_block(unsafe { &mut *t }, top, size);
}

/// The frames the calling thread allocated since it entered heap code (or since the last
/// statistics flush).
pub fn thread_frames() -> u64 {
    // SAFETY: the calling thread's own block.
    unsafe { (*tls()).frames }
}

/// The general allocation stub's Rust half: a block of `size` bytes, its top in `large`.
pub extern "C" fn stackrt_heap_alloc_general(size: usize, _top: usize) {
    let top = alloc_frame(size);
    // SAFETY: only this thread touches its TLS block.
    unsafe { (*tls()).large = top };
}

/// The general free stub's Rust half.
pub extern "C" fn stackrt_heap_free_general(size: usize, top: usize) {
    free_frame(top, size);
}

/// Starts heap code on the calling thread: `cstack` is the C stack's top (16-byte aligned;
/// the 16 bytes above it belong to the chunk runtime's budget word), `need` the entry
/// function's block size. Returns the top of the entry function's block.
pub extern "C" fn stackrt_heap_thread_enter(cstack: usize, need: usize) -> usize {
    let t = tls();
    // SAFETY: only this thread touches its TLS block.
    let t = unsafe { &mut *t };
    if WORKER_MODE.load(Relaxed) || t.nested != 0 {
        // A green thread, on a worker whose lists and slabs serve every thread it runs; or a C
        // callback, served by the lists of the thread it runs on.
        if t.nested == 0 {
            enter_worker();
        }
        t.cstack = cstack;
        let top = alloc_block(t, need);
        t.entry_top = top;
        t.entry_size = need;
        return top;
    }
    if t.active != 0 {
        fatal(format_args!("thread entered heap code twice"));
    }
    EXIT_GUARD.with(|_| ());
    let h = crate::chunk::stackrt_chunk_thread_enter(cstack, 0);
    t.cstack = cstack;
    t.bump = h as usize;
    // SAFETY: the thread's first chunk, just linked.
    t.bump_end = unsafe { (*h).limit };
    t.active = 1;
    if crate::chunk::runtime().is_some_and(|rt| rt.config().count_stats) {
        note_stats_used();
    }
    let top = alloc_block(t, need);
    t.entry_top = top;
    t.entry_size = need;
    top
}

/// Ends heap code on the calling thread: the statistics are summed, the lists forgotten and
/// every slab goes back to the chunk pool. Called on the C stack after the entry function
/// returned.
pub extern "C" fn stackrt_heap_thread_exit() {
    let t = tls();
    // SAFETY: only this thread touches its TLS block.
    let t = unsafe { &mut *t };
    if WORKER_MODE.load(Relaxed) || t.nested != 0 {
        return end_green_thread(t);
    }
    if MALLOC.load(Relaxed) && t.entry_top != 0 {
        free_block(t, t.entry_top, t.entry_size);
    }
    flush_stats(t);
    let cstack = t.cstack;
    // SAFETY: a zeroed HeapTls is its initial state (it lives in .tbss).
    unsafe { core::ptr::write_bytes(t as *mut HeapTls, 0, 1) };
    t.cstack = cstack;
    crate::chunk::stackrt_chunk_thread_exit();
}

/// A heap thread entered with statistics on: the heap report becomes part of the exit report
/// (after the chunk runtime's, which registered when its runtime started).
fn note_stats_used() {
    if !STATS.used.swap(true, Relaxed) {
        crate::base::diag::add_exit_report(print_report);
    }
}

/// The heap mechanisms' part of the `STACKRT_STATS=1` exit report.
fn print_report() {
    let mut buf = StackBuf::<1024>::new();
    let _ = write_report(&mut buf);
    buf.write_to_stderr();
}

/// Appends the heap report to `out` if a heap program ran with statistics on.
pub fn write_report(out: &mut impl core::fmt::Write) -> core::fmt::Result {
    if !STATS.used.load(Relaxed) {
        return Ok(());
    }
    // The calling thread (main, at exit) may still be running heap code: count it too.
    let t = tls();
    // SAFETY: the calling thread's own block.
    if unsafe { (*t).active } != 0 {
        // SAFETY: as above.
        flush_stats(unsafe { &mut *t });
    }
    let frames = STATS.frames.load(Relaxed);
    let carved = STATS.carved.load(Relaxed) + STATS.large_created.load(Relaxed);
    let malloc = MALLOC.load(Relaxed);
    writeln!(
        out,
        "stackrt: heap frames ({})",
        if malloc {
            "malloc and free"
        } else {
            "free lists by size class"
        }
    )?;
    writeln!(out, "stackrt:   frames allocated      {frames}")?;
    if malloc {
        writeln!(
            out,
            "stackrt:   frames reused         0 (every frame from malloc)"
        )?;
    } else {
        writeln!(
            out,
            "stackrt:   frames reused         {} ({} blocks carved)",
            frames.saturating_sub(carved),
            carved
        )?;
    }
    writeln!(
        out,
        "stackrt:   peak live frames      {} of one thread (per size class, summed)",
        STATS.peak_live.load(Relaxed)
    )?;
    writeln!(
        out,
        "stackrt:   peak frame bytes      {} of one thread",
        STATS.peak_bytes.load(Relaxed)
    )
}

/// Whether green threads run heap code (`--threads green`): each worker's TLS block (free
/// lists, slabs, statistics) serves every green thread it runs and is never taken down; a
/// green thread has only its C stack and entry block of its own ([`HeapThreadState`]).
static WORKER_MODE: AtomicBool = AtomicBool::new(false);

/// The chunk runtime's thread stack word of a worker's chain (16-byte aligned, 16 bytes).
#[repr(C, align(16))]
struct WorkerChainStack([u32; 4]);

/// The part of the heap state that belongs to one green thread: its C stack's top and its
/// entry function's block. Swapped into the worker's TLS block while the thread runs.
#[derive(Clone, Copy, Debug, Default)]
pub struct HeapThreadState {
    cstack: usize,
    entry_top: usize,
    entry_size: usize,
    /// Large (or, under `heap-malloc`, all) blocks the thread holds, and their bytes: the
    /// stack limit is per thread.
    general_live: usize,
    general_bytes: usize,
}

/// Makes every worker's TLS block outlive the green threads it runs (see `WORKER_MODE`).
/// Called before the first thread enters heap code.
pub fn set_worker_mode() {
    WORKER_MODE.store(true, Relaxed);
}

/// A green thread ends (its entry returned, or it called `sthread_exit`, with its state
/// swapped in): its entry block goes back; the worker keeps its lists and slabs for the next
/// threads. Nothing if the block went back already.
fn end_green_thread(t: &mut HeapTls) {
    if t.entry_top != 0 {
        free_block(t, t.entry_top, t.entry_size);
    }
    t.entry_top = 0;
    t.entry_size = 0;
    // Workers never end: their counts go to the report as their threads end.
    if crate::chunk::runtime().is_some_and(|rt| rt.config().count_stats) {
        flush_stats(t);
    }
}

/// `end_green_thread` for the thread whose state the calling worker holds.
pub fn exit_green_thread() {
    // SAFETY: as in `swap_thread_state`.
    end_green_thread(unsafe { &mut *tls() });
}

/// Makes the calling green-thread worker ready for heap code: its lists, and slabs from a
/// chunk chain of its own. Every worker does it before it runs a thread, since a thread that
/// started elsewhere may move to it in the middle of heap code. Nothing if done already.
pub fn enter_worker() {
    // SAFETY: only this OS thread touches its TLS block.
    let t = unsafe { &mut *tls() };
    if t.active != 0 {
        return;
    }
    EXIT_GUARD.with(|_| ());
    // The chain outlives every green thread: its chunk runtime word (the reclaim budget at
    // `T`) is one of the worker's own, not on a thread's C stack.
    let chain_stack = Box::leak(Box::new(WorkerChainStack([0; 4]))).0.as_mut_ptr() as usize;
    let h = crate::chunk::stackrt_chunk_thread_enter(chain_stack, 0);
    t.bump = h as usize;
    // SAFETY: the chain's first chunk, just linked.
    t.bump_end = unsafe { (*h).limit };
    t.active = 1;
    if crate::chunk::runtime().is_some_and(|rt| rt.config().count_stats) {
        note_stats_used();
    }
}

/// Exchanges the calling worker's per-thread heap state with `state` (a green thread's, before
/// it runs and after it switched back).
pub fn swap_thread_state(state: &mut HeapThreadState) {
    // SAFETY: only this OS thread touches its TLS block, and no heap code runs on it now (the
    // scheduler runs between threads).
    let t = unsafe { &mut *tls() };
    core::mem::swap(&mut t.cstack, &mut state.cstack);
    core::mem::swap(&mut t.entry_top, &mut state.entry_top);
    core::mem::swap(&mut t.entry_size, &mut state.entry_size);
    core::mem::swap(&mut t.general_live, &mut state.general_live);
    core::mem::swap(&mut t.general_bytes, &mut state.general_bytes);
}

/// The heap state a C callback ([`nest`]) put aside.
pub struct HeapNest(HeapThreadState);

/// C code calls C-- back on the calling OS thread, which runs heap code: the per-thread state
/// (C stack, entry block, counts) is put aside so that the callback's entry takes a block of
/// its own and its exit gives back only that; the lists and slabs serve both. [`unnest`]
/// restores it.
pub fn nest() -> HeapNest {
    let mut saved = HeapThreadState::default();
    switch_thread_state(&mut saved, &HeapThreadState::default());
    // SAFETY: only this OS thread touches its TLS block; no heap code runs now (C code does).
    let t = unsafe { &mut *tls() };
    if !WORKER_MODE.load(Relaxed) {
        t.nested += 1;
    }
    HeapNest(saved)
}

/// Restores the state [`nest`] put aside, once the callback's entry function returned.
pub fn unnest(saved: HeapNest) {
    let mut nested = HeapThreadState::default();
    switch_thread_state(&mut nested, &saved.0);
    // SAFETY: as in `nest`.
    let t = unsafe { &mut *tls() };
    if !WORKER_MODE.load(Relaxed) {
        t.nested -= 1;
    }
}

/// Saves the calling worker's per-thread heap state in `save` and loads `load`'s (a direct
/// switch between two green threads).
pub fn switch_thread_state(save: &mut HeapThreadState, load: &HeapThreadState) {
    // SAFETY: as in `swap_thread_state`: the switching thread is in the runtime, not in heap
    // code.
    let t = unsafe { &mut *tls() };
    *save = HeapThreadState {
        cstack: t.cstack,
        entry_top: t.entry_top,
        entry_size: t.entry_size,
        general_live: t.general_live,
        general_bytes: t.general_bytes,
    };
    t.cstack = load.cstack;
    t.entry_top = load.entry_top;
    t.entry_size = load.entry_size;
    t.general_live = load.general_live;
    t.general_bytes = load.general_bytes;
}

/// Makes the runtime use `malloc` and `free` for every frame (`heap-malloc`).
pub fn set_malloc() {
    MALLOC.store(true, Relaxed);
}

/// Calls the C-- function at `fp` with `nargs` (0..=2) of `a0, a1` in a fresh heap block.
///
/// # Safety
/// `fp` must be a C-- function compiled with `heap` or `heap-malloc` whose parameters are
/// `nargs` words.
pub unsafe fn enter(fp: usize, a0: usize, a1: usize, nargs: usize) -> usize {
    // SAFETY: the caller guarantees `fp` follows the heap convention; the trampoline preserves
    // the C ABI's callee-saved registers and returns on the native stack.
    unsafe { stackrt_enter_heap(fp, a0, a1, nargs) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The size-class table is part of the ABI: the compiler's `heap` module has the same test.
    #[test]
    fn size_classes_step_by_the_granule_then_grow_by_quarters() {
        if P == 8 {
            assert_eq!((class_size(0), class_size(31)), (16, 512));
            assert_eq!(
                [32, 33, 34, 35, 36].map(class_size),
                [640, 768, 896, 1024, 1280]
            );
            assert_eq!(MAX_CLASS_SIZE, 16384);
            assert_eq!(class_for(48), Some(2));
        } else {
            assert_eq!((class_size(0), class_size(31)), (8, 256));
            assert_eq!(
                [32, 33, 34, 35, 36].map(class_size),
                [320, 384, 448, 512, 640]
            );
            assert_eq!(MAX_CLASS_SIZE, 8192);
            assert_eq!(class_for(24), Some(2));
        }
        assert_eq!(class_for(MAX_CLASS_SIZE + 8), None);
    }
}
