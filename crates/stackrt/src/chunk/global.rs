//! The process-wide chunk runtime and its `extern "C"` entry points, called by the assembly
//! thread trampolines and overflow/underflow handlers of the chunk mechanisms.
//!
//! Initialisation happens in the first `stackrt_chunk_thread_enter*` call (normally the main
//! thread's entry trampoline, before any C-- code runs): it reads the chunk size the program
//! was compiled with (the weak data symbol [`super::CHUNK_SIZE_SYMBOL`]), `STACKRT_STACK_LIMIT`,
//! `STACKRT_MEMORY_LIMIT`, `STACKRT_SOFT_LIMIT`, `STACKRT_STATS` and `vm.max_map_count`. Every error of the entry points ends the program
//! with one line on stderr naming the thread (see [`crate::base::diag::FATAL_EXIT_STATUS`]).

use core::ptr::{self, NonNull};
use std::sync::OnceLock;

use super::chain::ThreadChain;
use super::config::{RuntimeConfig, DEFAULT_GROWTH_MAX_BYTES, DEFAULT_RECLAIM_BYTES};
use super::error::ChunkError;
use super::header::{ChunkGeometry, ChunkHeader, DEFAULT_CHUNK_SIZE};
use super::poison;
use super::runtime::Runtime;
use crate::base::diag::{exit_fatal, StackBuf};
use crate::base::os::page_size;
use crate::base::program::{program_check_bias, program_chunk_size};

/// The default limits: `(per-thread stack limit, memory limit of all threads)`, both 3/4 of
/// the physical memory, and on 32-bit targets at most 3 GiB (where the address space runs out
/// first: the arenas' `mmap` then fails and the program stops with a clear error too). A thread
/// may recurse as deep as the machine allows (the thesis's 100-million-deep Summation needs
/// 1.6 GB on i686 and 3.2 GB on x86-64); a runaway recursion stops with one line before the
/// machine runs out of memory.
pub fn default_limits() -> (usize, usize) {
    // SAFETY: sysconf has no memory-safety preconditions.
    let pages = unsafe { libc::sysconf(libc::_SC_PHYS_PAGES) };
    let phys = if pages > 0 {
        pages as u64 * page_size() as u64
    } else {
        4 << 30
    };
    let mut limit = phys / 4 * 3;
    if cfg!(target_pointer_width = "32") {
        limit = limit.min(3 << 30);
    }
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    (limit, limit)
}

/// Chunk bytes per CPU held by all threads together above which the threads take turns to
/// grow (see [`default_soft_limit`]).
pub const SOFT_LIMIT_PER_CPU: usize = 128 << 20;

/// The default soft limit (`RuntimeConfig::soft_limit`, memory pressure): 128 MiB per CPU, at
/// most a third of the memory limit. Only as many threads as CPUs run at once, so only they
/// can use fresh stack memory; past this much held by all threads, the others wait for memory
/// given back instead of each holding its depth while it is preempted. It follows the CPUs,
/// not the memory: with 1024 OS threads each going 1,000,000 levels deep once (the thesis's
/// tree), a third of 24 GB let 6.6 GB pile up where gcc -fsplit-stack peaks at 1.5 GB.
pub fn default_soft_limit(memory_limit: usize, cpus: usize) -> usize {
    SOFT_LIMIT_PER_CPU
        .saturating_mul(cpus.max(1))
        .min(memory_limit / 3)
}

/// Mappings left to the rest of the program (libraries, malloc arenas, thread stacks) when the
/// chunks' share of `vm.max_map_count` is computed: max(4096, max_map_count / 8).
const MAP_COUNT_MARGIN_MIN: usize = 4096;

static RUNTIME: OnceLock<Runtime> = OnceLock::new();

thread_local! {
    /// The calling thread's chain: `const`-initialised, no destructor (signal-handler safe).
    static CHAIN: ThreadChain = const { ThreadChain::new() };
    /// Gives the thread's chunks back when the thread ends without calling
    /// `stackrt_chunk_thread_exit` (`sthread_exit` / `pthread_exit` from C-- code). glibc runs
    /// it on the thread's native stack after the exit unwinding.
    static EXIT_GUARD: ExitGuard = const { ExitGuard };
}

struct ExitGuard;

impl Drop for ExitGuard {
    fn drop(&mut self) {
        let Some(rt) = RUNTIME.get() else { return };
        let here = approx_sp();
        // `try_with`: the chain has no destructor, so this only fails if TLS is gone entirely.
        let _ = CHAIN.try_with(|c| {
            // Still running on a chunk (exit() called from C-- code runs TLS destructors on the
            // current stack): the process is ending, leave the chunks mapped.
            if c.is_active() && !c.contains(here) {
                let _ = c.exit(rt);
            }
        });
    }
}

/// Parses a byte count: decimal digits with an optional binary suffix `K`, `M` or `G` (either
/// case, optionally followed by `B` or `iB`).
pub fn parse_bytes(s: &str) -> Option<usize> {
    let s = s.trim();
    let digits_end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    if digits_end == 0 {
        return None;
    }
    let n: usize = s[..digits_end].parse().ok()?;
    let mult: usize = match s[digits_end..].to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return None,
    };
    n.checked_mul(mult)
}

fn init_error(args: core::fmt::Arguments<'_>) -> ! {
    let mut buf = StackBuf::<256>::new();
    let _ = core::fmt::write(&mut buf, format_args!("stackrt: {args}\n"));
    buf.write_to_stderr();
    exit_fatal()
}

fn max_map_count() -> usize {
    std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(65530)
}

/// The chunk runtime's part of the `STACKRT_STATS=1` exit report.
fn print_stats_at_exit() {
    if let Some(rt) = RUNTIME.get() {
        rt.stats().snapshot().print(rt.config().geometry.chunk_size);
    }
}

/// A byte-count setting from the environment, or `default`.
fn byte_setting(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(v) => parse_bytes(&v).unwrap_or_else(|| {
            init_error(format_args!(
                "{name}={v:?} is not a byte count (examples: 8388608, 64M, 1G)"
            ))
        }),
        Err(std::env::VarError::NotPresent) => default,
        Err(std::env::VarError::NotUnicode(_)) => {
            init_error(format_args!("{name} is not a byte count"))
        }
    }
}

/// Whether the runtime keeps unlinked chunks for reuse ([`RuntimeConfig::reuse`]); set by the
/// `mmu` mechanism (no reuse) before the first thread enters, read when the runtime is built.
static REUSE: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(true);

/// Makes the runtime give every unlinked chunk back to the system (`--mech mmu`, the thesis's
/// MMU without reuse). Must be called before the first `stackrt_chunk_thread_enter*`.
pub fn set_no_reuse() {
    REUSE.store(false, core::sync::atomic::Ordering::Relaxed);
}

/// Whether deep chains get larger chunks ([`RuntimeConfig::growth_max`]); set for `lookahead`
/// and the MMU mechanisms before the first thread enters, read when the runtime is built. Not
/// for the heap mechanisms, whose slab chain links a chunk per large frame (a grown one would
/// be megabytes per frame). The MMU mechanisms link each chunk from a `SIGSEGV` (about 20 us
/// on i686, whose signal frames the kernel converts): with the thesis's fixed chunks a
/// million-deep recursion of 16-byte frames took 122 guard faults per descent, and
/// `deep_repeat.cm 1000000 20 1` under `mmu-reuse` cost 1.33x `callee-cleanup` on i686; growing
/// chains take 22 and 1.09x (chain module docs, "Growth"). On x86-64, whose MMU chunks are
/// already 1 MiB, the default growth limit changes nothing. `STACKRT_CHUNK_GROWTH=0` keeps the
/// thesis's fixed chunks.
static GROWTH: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

/// Lets deep chains grow (`GROWTH`): `lookahead`, `mmu` and `mmu-reuse`. Must be called before
/// the first `stackrt_chunk_thread_enter*`.
pub fn set_growth() {
    GROWTH.store(true, core::sync::atomic::Ordering::Relaxed);
}

/// Whether links write the check word (`lookahead`, [`RuntimeConfig::check_bias`]); set
/// before the first thread enters, read when the runtime is built.
static CHECK_WORD: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

/// Makes every link write the check word with the program's bias (`__cmm_check_bias`):
/// `lookahead`. Must be called before the first `stackrt_chunk_thread_enter*`.
pub fn set_check_word() {
    CHECK_WORD.store(true, core::sync::atomic::Ordering::Relaxed);
}

fn build_runtime(guard: bool) -> Runtime {
    let chunk_size = program_chunk_size().unwrap_or(DEFAULT_CHUNK_SIZE);
    let guard_size = if guard { page_size() } else { 0 };
    let geometry = ChunkGeometry::new(chunk_size, guard_size)
        .unwrap_or_else(|e| init_error(format_args!("bad stack chunk geometry: {e}")));
    let (default_stack, default_memory) = default_limits();
    let stack_limit = byte_setting("STACKRT_STACK_LIMIT", default_stack);
    if stack_limit < chunk_size {
        init_error(format_args!(
            "STACKRT_STACK_LIMIT={stack_limit} is below one stack chunk ({chunk_size} bytes)"
        ));
    }
    let memory_limit = byte_setting("STACKRT_MEMORY_LIMIT", default_memory);
    if memory_limit < chunk_size + guard_size {
        init_error(format_args!(
            "STACKRT_MEMORY_LIMIT={memory_limit} is below one stack chunk ({chunk_size} bytes)"
        ));
    }
    let count_stats = std::env::var_os("STACKRT_STATS").is_some_and(|v| v == "1");
    let mmc = max_map_count();
    let max_mappings = mmc
        .saturating_sub((mmc / 8).max(MAP_COUNT_MARGIN_MIN))
        .max(16);
    let mut config = RuntimeConfig::new(geometry, stack_limit, max_mappings);
    config.memory_limit = memory_limit;
    let cpus = crate::base::os::cpus();
    config.soft_limit = byte_setting("STACKRT_SOFT_LIMIT", default_soft_limit(memory_limit, cpus))
        .min(memory_limit);
    config.max_growers = cpus;
    config.count_stats = count_stats;
    config.reclaim_budget = RuntimeConfig::reclaim_budget_for(
        byte_setting("STACKRT_RECLAIM_BYTES", DEFAULT_RECLAIM_BYTES),
        chunk_size,
    );
    if GROWTH.load(core::sync::atomic::Ordering::Relaxed) {
        config.growth_max = byte_setting("STACKRT_CHUNK_GROWTH", DEFAULT_GROWTH_MAX_BYTES);
        if !guard {
            // Green threads' chains start small and double (chain module docs, "Small
            // classes"); a guarded chunk is never smaller than the standard one.
            config.small_classes = RuntimeConfig::small_classes_for(chunk_size);
        }
    }
    config.reuse = REUSE.load(core::sync::atomic::Ordering::Relaxed);
    if CHECK_WORD.load(core::sync::atomic::Ordering::Relaxed) {
        config.check_bias = Some(program_check_bias().unwrap_or(0));
    }
    Runtime::new(config)
}

/// The process-wide runtime, once some thread has entered chunked code.
pub fn runtime() -> Option<&'static Runtime> {
    RUNTIME.get()
}

fn runtime_init(guard: bool) -> &'static Runtime {
    let mut created = false;
    let rt = RUNTIME.get_or_init(|| {
        created = true;
        build_runtime(guard)
    });
    if created && rt.config().count_stats {
        crate::base::diag::add_exit_report(print_stats_at_exit);
    }
    if (rt.config().geometry.guard_size != 0) != guard {
        init_error(format_args!(
            "stack chunks requested both with and without guard pages in one program"
        ));
    }
    rt
}

/// Ends the program with `stackrt: thread N (tid T): <error>` (and the statistics, if on).
fn fatal(chain: &ThreadChain, err: ChunkError) -> ! {
    let mut buf = StackBuf::<384>::new();
    let _ = if chain.id() == u32::MAX {
        core::fmt::write(
            &mut buf,
            format_args!(
                "stackrt: thread (tid {}): {err}\n",
                crate::base::os::gettid()
            ),
        )
    } else {
        core::fmt::write(
            &mut buf,
            format_args!(
                "stackrt: thread {} (tid {}): {err}\n",
                chain.id(),
                chain.tid()
            ),
        )
    };
    buf.write_to_stderr();
    if let Some(rt) = RUNTIME.get() {
        if rt.config().count_stats {
            rt.stats().snapshot().print(rt.config().geometry.chunk_size);
        }
    }
    exit_fatal()
}

fn unwrap_or_fatal(
    chain: &ThreadChain,
    r: Result<NonNull<ChunkHeader>, ChunkError>,
) -> *mut ChunkHeader {
    match r {
        Ok(h) => h.as_ptr(),
        Err(e) => fatal(chain, e),
    }
}

fn enter(thread_stack: usize, need: usize, guard: bool) -> *mut ChunkHeader {
    let rt = runtime_init(guard);
    EXIT_GUARD.with(|_| ());
    super::handler::entered(thread_stack, !rt.config.count_stats && !poison::hooked());
    CHAIN.with(|c| unwrap_or_fatal(c, c.enter(rt, thread_stack, need)))
}

/// Starts chunked execution on the calling thread (look-ahead mechanism: no guard pages).
///
/// Called by the entry/thread trampoline on the thread's native stack, with `thread_stack` =
/// the native SP the handlers should later switch to (16-byte aligned, below everything the
/// trampoline keeps live; its first 4 bytes hold the reclaim budget, see the module docs of
/// [`super`]) and `need` = the bytes the C-- function needs below the chunk's top (the u32 at
/// `fp - 8`). Returns the first chunk's header: the trampoline sets the chunk register and SP
/// to it and calls the C-- function.
#[no_mangle]
pub extern "C" fn stackrt_chunk_thread_enter(thread_stack: usize, need: usize) -> *mut ChunkHeader {
    enter(thread_stack, need, false)
}

/// Like [`stackrt_chunk_thread_enter`], with a one-page `PROT_NONE` guard below every chunk
/// (the MMU mechanisms). A program uses one kind only.
#[no_mangle]
pub extern "C" fn stackrt_chunk_thread_enter_guarded(
    thread_stack: usize,
    need: usize,
) -> *mut ChunkHeader {
    enter(thread_stack, need, true)
}

/// Overflow: links a new chunk after `cur` (the current chunk header, i.e. the chunk
/// register) for a checkpoint whose SP was `caller_sp` and which needs `reserve` bytes.
/// Returns the new header; the handler sets chunk register = SP = it and resumes the caller.
/// `caller_sp` is stored as the new header's `prev_sp`.
#[no_mangle]
pub extern "C" fn stackrt_chunk_overflow(
    cur: *mut ChunkHeader,
    caller_sp: usize,
    reserve: usize,
) -> *mut ChunkHeader {
    let mut reserve = reserve;
    if let Some(hook) = poison::checkpoint_hook() {
        if hook() {
            // The switch runs on the new chunk, which gets room for it (`super::handler`).
            super::handler::set_switch_pending();
            reserve += super::handler::SWITCH_ROOM;
        }
    }
    overflow_here(cur, caller_sp, reserve)
}

#[inline(never)]
fn overflow_here(cur: *mut ChunkHeader, caller_sp: usize, reserve: usize) -> *mut ChunkHeader {
    let rt = runtime_or_fatal();
    CHAIN.with(|c| unwrap_or_fatal(c, c.overflow(rt, cur, caller_sp, reserve)))
}

/// Underflow: unlinks `cur` (the current chunk header) and returns the previous one. The
/// handler must load `cur->prev_sp` (and `cur->prev_header`) *before* the call: the chunk may
/// be reused or unmapped when this returns.
#[no_mangle]
pub extern "C" fn stackrt_chunk_underflow(cur: *mut ChunkHeader) -> *mut ChunkHeader {
    let rt = runtime_or_fatal();
    CHAIN.with(|c| unwrap_or_fatal(c, c.underflow(rt, cur)))
}

/// Reclaim: the bookkeeping of the chunks compiled code unlinked above `cur` (the chunk it
/// runs on), called by compiled code when the thread's reclaim budget ran out; refills the
/// budget. Returns `cur`.
#[no_mangle]
pub extern "C" fn stackrt_chunk_reclaim(cur: *mut ChunkHeader) -> *mut ChunkHeader {
    // The chunk a requester poisoned may be among those given back: its limit is restored
    // first, and `cur` (where the code goes on) poisoned instead, so the request reaches the
    // next checkpoint. No switch here: the code's SP has no room for one.
    let rearm = poison::hooked() && poison::disarm();
    let r = reclaim_here(cur);
    if rearm {
        // SAFETY: `cur` is the running thread's current chunk, the code that called this
        // runs on it on this OS thread, and it stays linked.
        unsafe { poison::arm(cur as usize) };
    }
    r
}

#[inline(never)]
fn reclaim_here(cur: *mut ChunkHeader) -> *mut ChunkHeader {
    let rt = runtime_or_fatal();
    CHAIN.with(|c| unwrap_or_fatal(c, c.reclaim(rt, cur)))
}

/// Ends chunked execution on the calling thread: all its chunks go back to the pool (or the
/// system). Called by the trampoline after the C-- function returned, back on the native
/// stack. Calling it while running on a chunk, or twice, is a fatal error.
#[no_mangle]
pub extern "C" fn stackrt_chunk_thread_exit() {
    if poison::hooked() {
        poison::disarm();
    }
    let rt = runtime_or_fatal();
    let sp = approx_sp();
    CHAIN.with(|c| {
        let r = if c.is_active() && c.contains(sp) {
            Err(ChunkError::ExitOnChunk)
        } else {
            c.exit(rt)
        };
        if let Err(e) = r {
            fatal(c, e)
        }
    });
    super::handler::exited();
}

/// The chunk size in use (bytes, header included, guard excluded); 0 before initialisation.
#[no_mangle]
pub extern "C" fn stackrt_chunk_size() -> usize {
    RUNTIME
        .get()
        .map_or(0, |rt| rt.config().geometry.chunk_size)
}

/// The calling thread's newest chunk header, or null. Async-signal-safe (one TLS read). Under
/// `lookahead` it may lie above the chunk the code runs on (chunks the emitted code unlinked by
/// itself stay in the chain until the next overflow: see [`super::header::UNLINKED`]).
#[no_mangle]
pub extern "C" fn stackrt_chunk_current() -> *mut ChunkHeader {
    CHAIN.with(|c| c.top())
}

/// The chunk the calling thread's code runs on, for the MMU fault handler: the newest chunk of
/// its chain that compiled code has not marked unlinked, as `(header, limit, guard size)`;
/// None if the thread is not running chunked code. Async-signal-safe: TLS and header reads.
pub fn running_chunk() -> Option<(*mut ChunkHeader, usize, usize)> {
    let rt = RUNTIME.get()?;
    CHAIN.with(|c| {
        if !c.is_active() {
            return None;
        }
        let mut h = c.top();
        // SAFETY: the chain's headers are mapped while linked; marked ones stay linked until
        // the runtime's next entry for this thread, which cannot be running (the fault came
        // from compiled code).
        while !h.is_null() && unsafe { (*h).thread_stack } == super::UNLINKED {
            // SAFETY: as above: `h` is a linked header of this chain.
            h = unsafe { (*h).prev_header };
        }
        if h.is_null() {
            return None;
        }
        // SAFETY: as above.
        let limit = unsafe { (*h).limit };
        Some((h, limit, rt.config().geometry.guard_size))
    })
}

/// The growth of an MMU fault: links a chunk after `cur` (from [`running_chunk`]) for a probe
/// at `caller_sp` reaching `distance` bytes below it, and counts the fault. Ends the program
/// with one line on error (the stack limit: a runaway recursion). Called from the `SIGSEGV`
/// handler for a fault of compiled code only (the chain's methods are not reentrant).
pub fn fault_overflow(
    cur: *mut ChunkHeader,
    caller_sp: usize,
    distance: usize,
) -> *mut ChunkHeader {
    let rt = runtime_or_fatal();
    rt.stats().fault(rt.config().count_stats);
    CHAIN.with(|c| unwrap_or_fatal(c, c.overflow(rt, cur, caller_sp, distance)))
}

/// The calling thread's number in the chunk runtime (`None` before it entered chunked code):
/// for the fault handler's messages.
pub fn thread_number() -> Option<u32> {
    CHAIN.with(|c| (c.id() != u32::MAX).then(|| c.id()))
}

/// An address in the caller's current stack frame (a local's), standing for its SP.
#[inline(always)]
fn approx_sp() -> usize {
    let here = 0u8;
    core::hint::black_box(ptr::addr_of!(here)) as usize
}

fn runtime_or_fatal() -> &'static Runtime {
    match RUNTIME.get() {
        Some(rt) => rt,
        None => CHAIN.with(|c| fatal(c, ChunkError::NotEntered)),
    }
}

/// Whether the chunks held by threads are at or above the soft limit (memory pressure, see
/// `RuntimeConfig::soft_limit`): green threads are then not preempted, so that the running
/// ones finish and give their chunks back instead of more threads holding their depth at once.
pub fn under_memory_pressure() -> bool {
    RUNTIME
        .get()
        .is_some_and(|rt| rt.held_bytes() >= rt.config().soft_limit)
}

/// Exchanges the calling OS thread's chain with a green thread's (`crate::green`): the worker
/// swaps a green thread's chain in before switching to it and out after it switched back.
pub fn swap_chain(state: &mut super::state::ChainState) {
    CHAIN.with(|c| c.swap_state(state))
}

/// Saves the calling OS thread's chain in `save` and loads `load`'s (a direct switch between
/// two green threads).
pub fn switch_chain(save: &mut super::state::ChainState, load: &super::state::ChainState) {
    CHAIN.with(|c| c.switch_state(save, load))
}

/// A chain put aside by [`nest_chain`].
pub struct NestedChain(super::state::ChainState, bool);

/// Puts the calling OS thread's chain aside for a nested entry into chunked code (a C callback
/// into C--, `crate::mech::callback`); [`unnest_chain`] restores it after the nested chain's
/// exit.
pub fn nest_chain() -> NestedChain {
    let (state, worker) = CHAIN.with(|c| c.nest());
    NestedChain(state, worker)
}

/// Restores the chain [`nest_chain`] put aside.
pub fn unnest_chain(saved: NestedChain) {
    CHAIN.with(|c| c.unnest(&saved.0, saved.1))
}

/// Offers `[low, T - room)` as the first chunk of the calling OS thread's next
/// `stackrt_chunk_thread_enter*` (see `ThreadChain::offer_first_chunk`): `room` is 0 when the
/// handlers run on a worker's handler stack (`lookahead`), else
/// [`super::config::FOREIGN_HANDLER_ROOM`].
pub fn offer_first_chunk(low: usize, room: usize) {
    CHAIN.with(|c| c.offer_first_chunk(low, room))
}

/// Marks the calling OS thread as a green-thread worker (its chunk caches outlive the chains).
pub fn set_worker() {
    CHAIN.with(|c| c.set_worker())
}

/// Gives back the chunks of the chain swapped in on the calling OS thread, if it is active: a
/// green thread that ended with `sthread_exit` while on its chunks. The caller runs on its own
/// stack, not on the chain.
pub fn exit_chain_if_active() {
    let Some(rt) = RUNTIME.get() else { return };
    CHAIN.with(|c| {
        if c.is_active() {
            if let Err(e) = c.exit(rt) {
                fatal(c, e)
            }
        }
    })
}

/// Admits up to `n` green-thread stack blocks of `bytes` each against the memory limit, as if
/// they were chunks (`Runtime::carve_foreign`): returns how many fit (at least one), or ends
/// the program with the limit's one line naming green thread `thread`, status 70, as a chunk
/// over the limit would. With no runtime yet, admits all.
pub fn admit_foreign_blocks(bytes: usize, n: usize, thread: i32) -> usize {
    let Some(rt) = RUNTIME.get() else { return n };
    match rt.carve_foreign(bytes, n) {
        Ok(n) => n,
        Err(e) => {
            let mut buf = StackBuf::<384>::new();
            let _ = core::fmt::write(
                &mut buf,
                format_args!(
                    "stackrt: green thread {thread} (tid {}): {e}\n",
                    crate::base::os::gettid()
                ),
            );
            buf.write_to_stderr();
            if rt.config().count_stats {
                rt.stats().snapshot().print(rt.config().geometry.chunk_size);
            }
            exit_fatal()
        }
    }
}

/// Gives back an admission of [`admit_foreign_blocks`] for `bytes` that were not carved.
pub fn unadmit_foreign_blocks(bytes: usize) {
    if let Some(rt) = RUNTIME.get() {
        rt.uncarve_foreign(bytes);
    }
}
