//! The green-thread scheduler (`cmm compile --threads green`): M green threads on N worker OS
//! threads, per-worker run queues with work stealing ([`super::queue`]), parking and waking
//! for joins and mutexes ([`super::sync`]).
//!
//! # Workers and switches
//!
//! Every worker has a *scheduler context* on its own stack (Go's `g0`): it picks a runnable
//! green thread, switches to it, and when the thread switches back, carries out what the
//! thread asked for on the way out (`After`): requeue it (a yield), release the lock it
//! parked under (a join or a mutex: nobody may wake the thread before its context is saved,
//! Go's `gopark` with an unlock function), or end it (its stack goes back at once). The main
//! OS thread is worker 0; the program's `main` runs as a green thread on the main thread's own
//! stack, so it keeps the stack size `ulimit -s` gives it, and worker 0's scheduler context
//! gets a small stack of its own. Workers 1..N are OS threads started with the scheduler.
//!
//! # Stacks
//!
//! A green thread gets its stack when it first runs, not when it is created. Under the
//! chunked mechanisms that is a block ([`super::stacks::block_size`]); under `lookahead` its
//! lower part is the thread's first chunk (offered to the chunk runtime with
//! `crate::chunk::global::offer_first_chunk`), under `mmu`/`mmu-reuse` the first chunk is a
//! guarded one of the runtime's. The thread grows by linking the runtime's chunks (under
//! `lookahead` of the small classes first: a worker's chains start at 512 bytes and double),
//! and its chain (a `ChainState`) is swapped into the worker's chunk runtime while it runs, so
//! chunk caches stay per worker. Under the fixed-stack conventions it is a guarded
//! stack of the size `sthread_create` asked for (default [`DEFAULT_FIXED_STACK`]).
//!
//! # Thread-local storage and migration
//!
//! A green thread may resume on another worker than the one it switched away on. Rust code
//! running on a green stack must therefore never keep a thread-local's address across a switch:
//! the functions that switch (`switch_out`) reach the worker through `this_worker`, an
//! out-of-line call, before the switch only, and nothing after a switch in the same function
//! touches a thread-local.

mod after;
pub(crate) mod async_resume;
mod det_mode;
mod entry;
mod handler_stacks;
mod handoff;
mod idle;
pub mod libcall;
mod mech_state;
mod mtss;
mod pinned;
pub mod polls;
mod prepare;
mod stats;
mod worker_thread;

pub use polls::poll_point;
pub use stats::GreenStats;

use core::cell::{Cell, UnsafeCell};
use core::ffi::c_int;
use core::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering::*};
use std::sync::{Condvar, Mutex, OnceLock};

use super::context::{self, Stack};
use super::det::Det;
use super::fixed_stacks::{StackCache, StackPool};
use super::preempt::{self, Preemption};
use super::preempt_async;
use super::queue::{RunQueues, Source};
use super::stacks::{BlockCache, Blocks};
use crate::base::spin::RawSpin;
use crate::chunk::poison;

/// Stack of a green thread under a fixed-stack convention when `sthread_create` asks for none
/// (`fpStackSize <= 0`): 8 MiB, glibc's default thread stack under the usual `ulimit -s`.
pub const DEFAULT_FIXED_STACK: usize = 8 << 20;

/// Stack of a worker's scheduler context (worker 0's; workers 1..N run it on their OS stack).
const SCHEDULER_STACK: usize = 256 * 1024;

/// Native stack of workers 1..N: the scheduler context, the chunk runtime's bookkeeping on the
/// way in and out of threads.
const WORKER_OS_STACK: usize = 256 * 1024;

/// What the thread that just switched back to its worker asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum After {
    None,
    /// Runnable again: to the back of the worker's queue.
    Yield,
    /// Preempted by time: to the queue of preempted threads (`super::queue`).
    Preempted,
    /// Parked: release this lock (held across the switch); a waker will queue the thread.
    Park(*const RawSpin),
    /// Ended: its stack goes back, joiners are woken.
    Exit,
}

/// Where a green thread's stack comes from.
enum GreenStack {
    /// None: the thread ended.
    None,
    /// Not allocated yet (the thread has not run): `fpStackSize` of `sthread_create`, for the
    /// fixed-stack conventions.
    Requested(c_int),
    /// A block of [`Blocks`] (chunked mechanisms): address and size.
    Block(usize, usize),
    /// A guarded fixed stack.
    Fixed(Stack),
    /// A native stack of the `mtss` region (its record is the thread's, [`Green::mtss`]).
    Mtss,
    /// The main OS thread's own stack (the program's `main`): its bounds as recorded for the
    /// crash reports, (0, 0) if unknown.
    Native((usize, usize)),
}

/// Join bookkeeping of a green thread, under its `join` lock: the thread waiting to join it,
/// null, or [`FINISHED`] once it ended (one word: the record is in every thread's memory).
struct JoinState {
    joiner: *const Green,
}

/// [`JoinState::joiner`] of a thread that ended: a dangling address (the record's alignment,
/// in the unmapped first page), where no record lies.
const FINISHED: *const Green = core::ptr::dangling();

/// One green thread. Allocated by [`create`], freed by the join that collects its result.
pub struct Green {
    /// The saved stack pointer while switched out.
    sp: UnsafeCell<usize>,
    /// The `sthread_*` handle (0 for `main`).
    handle: c_int,
    fp: usize,
    /// The argument of `fp` until the thread starts, then its result (one word: the record
    /// is part of every thread's memory).
    arg_or_result: UnsafeCell<usize>,
    started: Cell<bool>,
    stack: UnsafeCell<GreenStack>,
    /// Its chunk chain, or its C stack and entry block under the heap mechanisms.
    mech: UnsafeCell<mech_state::MechState>,
    /// The race detector's state of the thread (`--race`; null otherwise).
    race: *mut crate::race::RaceThread,
    join: RawSpin,
    join_state: UnsafeCell<JoinState>,
    /// A thread-library call whose switch the library stub made (`lookahead`, see
    /// [`libcall::lib_entry`]): where the repeated call goes on (0: from the start), a value it keeps
    /// meanwhile, and the caller's errno.
    lib_phase: Cell<u32>,
    lib_value: Cell<usize>,
    lib_errno: Cell<i32>,
    /// The registers a loop-head poll saved while the thread switches out of it (see
    /// [`polls::keep_poll_regs`]).
    poll_regs: Cell<Option<Box<polls::PollRegs>>>,
}

// SAFETY: a Green is touched by one OS thread at a time: the worker running it (its scheduler
// context and the thread itself), handed over through the run queues' locks; `join_state` only
// under `join`.
unsafe impl Sync for Green {}
// SAFETY: as above.
unsafe impl Send for Green {}

/// A queued green thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct GreenPtr(*const Green);
// SAFETY: see Green's Send.
unsafe impl Send for GreenPtr {}

impl super::queue::Word for GreenPtr {
    fn to_word(self) -> usize {
        self.0 as usize
    }
    fn from_word(w: usize) -> Self {
        GreenPtr(w as *const Green)
    }
}

/// One worker's state, touched only by the OS thread that runs the worker.
pub struct Worker {
    index: usize,
    /// The scheduler context's saved stack pointer while a green thread runs.
    sched_sp: UnsafeCell<usize>,
    current: Cell<*const Green>,
    after: Cell<After>,
    /// Set by a direct switch between two threads ([`yield_now`]): the thread that switched
    /// away, to be requeued by the context that resumes ([`complete_switch`]) once its
    /// context is saved.
    pending: Cell<*const Green>,
    blocks: UnsafeCell<BlockCache>,
    /// Its cache of fixed stacks (fixed-stack and heap mechanisms).
    fixed: UnsafeCell<StackCache>,
    /// Odd while a green thread runs, even in the scheduler context; changes at every switch.
    /// The preemption monitor reads it: unchanged and odd for a whole slice means one thread
    /// kept the worker.
    tick: AtomicUsize,
    /// The worker's OS thread: kernel thread id and `pthread_t`, for the monitor.
    tid: AtomicI32,
    /// Its OS thread's counters of C calls (`crate::base::ccalls::address`; 0 before it runs).
    ccalls: AtomicUsize,
    os_thread: AtomicUsize,
    /// Worker 0's scheduler stack (the other workers use their OS stack).
    _sched_stack: Option<Stack>,
    /// Its role for the hand-off of blocking calls ([`handoff`]).
    slot: handoff::Slot,
    /// The monitor asked its thread to yield at the next loop head ([`polls`]): through the
    /// program's flag, and through the worker OS thread's own flag at this address.
    poll_request: AtomicBool,
    poll_flag: AtomicUsize,
}

// SAFETY: each Worker is used by exactly one OS thread (its own); the array is shared only so
// that every worker can be found from `SCHED`.
unsafe impl Sync for Worker {}
// SAFETY: as above; a Worker is created on the main thread before any worker runs.
unsafe impl Send for Worker {}

/// The scheduler of the process.
pub struct Sched {
    abi: u32,
    /// The threads run on chunk chains (`lookahead`, `mmu`, `mmu-reuse`).
    chunked: bool,
    /// The heap mechanisms: a thread's stack is its C stack, and its part of the heap state
    /// (`HeapThreadState`) is swapped into the worker's TLS block while it runs.
    heap: bool,
    /// A thread's stack block holds its first chunk (`lookahead`; the MMU mechanisms' first
    /// chunk needs a guard page below it, so the chunk runtime provides it).
    first_chunk_in_block: bool,
    /// `mtss`: threads run on native stacks of the region, and lend while parked
    /// (`crate::mech::mtss::green`).
    mtss: bool,
    /// Workers have handler stacks of their own, where C calls, the library stub's calls and
    /// the mechanism's handlers run (the chunked mechanisms and `mtss`).
    handler_stacks: bool,
    queues: RunQueues<GreenPtr>,
    /// `n_workers` workers and `spares` spare slots ([`handoff`]).
    workers: Box<[Worker]>,
    n_workers: usize,
    spares: usize,
    /// Slots whose OS threads have started (`workers[..started]`).
    started: AtomicUsize,
    /// Active slots (kept at `n_workers`) and handed-off ones (blocked in a call).
    active: AtomicUsize,
    handed: AtomicUsize,
    /// The monitor also signals a worker whose thread ran a whole slice ([`preempt`]: the
    /// thread is preempted where it is, or at its next `lookahead` checkpoint).
    signals: bool,
    /// Workers asked to yield at a loop head that have not yet ([`polls`]).
    poll_pending: AtomicUsize,
    /// Loop-head polls of the deterministic mode, which decides at every
    /// [`polls::DET_POLL_EVERY`]th.
    det_polls: AtomicUsize,
    idle: Mutex<()>,
    wake: Condvar,
    sleepers: AtomicUsize,
    /// Workers looking for a thread before they sleep ([`Sched::spin`]): a push wakes a
    /// sleeper only when none is spinning, since a spinner will take the thread.
    spinning: AtomicUsize,
    /// Green threads created and not yet ended, `main` included.
    alive: AtomicUsize,
    blocks: Blocks,
    /// The fixed stacks behind the workers' caches.
    fixed: StackPool,
    pub stats: GreenStats,
    count_stats: bool,
    /// The deterministic scheduler (`STACKRT_SCHED`), which then replaces the run queues.
    det: Option<Mutex<Det<GreenPtr>>>,
}

static SCHED: OnceLock<Sched> = OnceLock::new();
static ENABLED: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// The worker the calling OS thread runs (null on other threads).
    static WORKER: Cell<*const Worker> = const { Cell::new(core::ptr::null()) };
}

/// Whether the program runs its threads as green threads.
pub fn enabled() -> bool {
    ENABLED.load(Relaxed)
}

fn sched() -> &'static Sched {
    SCHED.get().expect("green scheduler used before start")
}

/// The calling OS thread's worker. Out of line on purpose (module docs: migration).
#[inline(never)]
fn this_worker() -> &'static Worker {
    let w = WORKER.with(|w| w.get());
    assert!(!w.is_null(), "green thread library called outside a worker");
    // SAFETY: workers live in the 'static scheduler and are never freed.
    unsafe { &*w }
}

/// The green thread running on the calling OS thread.
#[inline(never)]
pub fn current() -> &'static Green {
    // SAFETY: `current` is set by the worker for as long as the thread runs on it; threads are
    // freed only by a join, which cannot be the thread itself.
    unsafe { &*this_worker().current.get() }
}

fn fail(msg: &str) -> ! {
    crate::base::diag::fail(msg, crate::base::abi::THREAD_FAILURE_EXIT_STATUS)
}

/// Starts the scheduler for a program of convention `abi` on the main OS thread, which becomes
/// worker 0 running `main` as a green thread on its own stack; returns that thread's record.
pub fn start(abi: u32) -> &'static Green {
    let det = det_mode::from_env();
    if det.is_none() && std::env::var_os("STACKRT_SCHED_TRACE").is_some() {
        fail("stackrt: STACKRT_SCHED_TRACE needs a deterministic STACKRT_SCHED (random:SEED, pct:SEED:DEPTH or replay:FILE)");
    }
    // The deterministic mode runs every green thread on one worker, with no hand-off.
    let n = if det.is_some() {
        1
    } else {
        handoff::worker_count()
    };
    let spares = if det.is_some() {
        0
    } else {
        handoff::spare_bound(crate::base::abi::is_fixed_stack_abi(abi))
    };
    let lookahead = abi == crate::base::abi::ABI_LOOKAHEAD;
    let chunked =
        lookahead || abi == crate::base::abi::ABI_MMU || abi == crate::base::abi::ABI_MMU_REUSE;
    let (slice, signals) = match preempt::configure(lookahead, det.is_some()) {
        Preemption::Off => (None, false),
        Preemption::Deterministic(watchdog) => {
            if lookahead {
                poison::set_checkpoint_hook(at_checkpoint, checkpoint_switch);
            }
            (watchdog, watchdog.is_some())
        }
        Preemption::Slice(d) => {
            if lookahead {
                poison::set_checkpoint_hook(at_checkpoint, checkpoint_switch);
            }
            (Some(d), true)
        }
        Preemption::Polls(d) => (Some(d), false),
    };
    let heap = abi == crate::base::abi::ABI_HEAP || abi == crate::base::abi::ABI_HEAP_MALLOC;
    if heap {
        crate::mech::heap::set_worker_mode();
    }
    let mtss = abi == crate::base::abi::ABI_MTSS;
    if mtss {
        mtss::set_hooks();
    }
    let handler_stacks = chunked || mtss;
    if handler_stacks {
        crate::chunk::handler::set_handle_hook(|| current().handle);
    }
    if lookahead && det.is_none() {
        // Not in the deterministic mode: its decisions are the checkpoints that enter the
        // runtime, and a recursion that learned sizes let fit in its block would make none.
        crate::chunk::first_block::set_first_overflow_hook(prepare::first_block_outgrown);
    }
    let sched_stack = Stack::new(SCHEDULER_STACK)
        .unwrap_or_else(|e| fail(&format!("stackrt: cannot map a scheduler stack: {e}")));
    let mut workers: Box<[Worker]> = (0..n + spares)
        .map(|i| Worker {
            index: i,
            sched_sp: UnsafeCell::new(0),
            current: Cell::new(core::ptr::null()),
            after: Cell::new(After::None),
            pending: Cell::new(core::ptr::null()),
            blocks: UnsafeCell::new(BlockCache::default()),
            fixed: UnsafeCell::new(StackCache::default()),
            // Worker 0 starts out running `main`.
            tick: AtomicUsize::new(usize::from(i == 0)),
            tid: AtomicI32::new(0),
            ccalls: AtomicUsize::new(0),
            os_thread: AtomicUsize::new(0),
            _sched_stack: None,
            slot: handoff::Slot::new(i < n),
            poll_request: AtomicBool::new(false),
            poll_flag: AtomicUsize::new(0),
        })
        .collect();
    let top = sched_stack.top();
    workers[0]._sched_stack = Some(sched_stack);
    // SAFETY: the top of worker 0's fresh scheduler stack, used by nothing else.
    *workers[0].sched_sp.get_mut() = unsafe { context::init(top, worker_thread::worker0_entry, 0) };
    let s = Sched {
        abi,
        chunked,
        first_chunk_in_block: lookahead,
        heap,
        mtss,
        handler_stacks,
        queues: RunQueues::with_live(n + spares, n),
        workers,
        n_workers: n,
        spares,
        started: AtomicUsize::new(n),
        active: AtomicUsize::new(n),
        handed: AtomicUsize::new(0),
        signals,
        poll_pending: AtomicUsize::new(0),
        det_polls: AtomicUsize::new(0),
        idle: Mutex::new(()),
        wake: Condvar::new(),
        sleepers: AtomicUsize::new(0),
        spinning: AtomicUsize::new(0),
        alive: AtomicUsize::new(1),
        blocks: Blocks::new(),
        fixed: StackPool::new(),
        stats: GreenStats::default(),
        count_stats: std::env::var_os("STACKRT_STATS").is_some_and(|v| v == "1"),
        det: det.map(Mutex::new),
    };
    if SCHED.set(s).is_err() {
        fail("stackrt: the green scheduler was started twice");
    }
    let s = sched();
    ENABLED.store(true, Relaxed);
    if let Some(d) = &s.det {
        polls::deterministic();
        det_mode::lock(d).created(0);
        // SAFETY: registering a plain extern "C" function with no arguments.
        unsafe { libc::atexit(det_mode::flush_trace_at_exit) };
        // `--race`: racing accesses are decisions of the seed too (README, "Memory-level
        // schedules").
        crate::race::set_decision_hook(race_decision);
    }
    if s.count_stats {
        s.stats.created.store(1, Relaxed);
        s.stats.peak_alive.store(1, Relaxed);
        // SAFETY: registering a plain extern "C" function with no arguments.
        unsafe { libc::atexit(stats::print_stats_at_exit) };
    }
    let main = Box::leak(Box::new(Green::new(
        0,
        0,
        0,
        0,
        crate::race::current(),
        heap,
    )));
    main.started.set(true);
    if mtss {
        main.set_mtss(core::ptr::null_mut());
    }
    // SAFETY: nothing else refers to the fresh record yet.
    unsafe { *main.stack.get() = GreenStack::Native(crate::signals::fixed_stack()) };
    if heap {
        crate::mech::heap::enter_worker();
    }
    if handler_stacks {
        handler_stacks::give_handler_stack();
    }
    let w0 = &s.workers[0];
    w0.register_os_thread();
    WORKER.with(|w| w.set(w0));
    w0.current.set(main);
    if chunked {
        crate::chunk::global::set_worker();
    }
    for i in 1..n {
        let spawned = std::thread::Builder::new()
            .name(format!("stackrt-worker-{i}"))
            .stack_size(WORKER_OS_STACK)
            .spawn(move || worker_thread::worker_os_thread(i, None));
        if let Err(e) = spawned {
            fail(&format!(
                "stackrt: cannot start green-thread worker {i}: {e}"
            ));
        }
    }
    if slice.is_some() || spares > 0 {
        let spawned = std::thread::Builder::new()
            .name("stackrt-monitor".into())
            .stack_size(64 * 1024)
            .spawn(move || s.monitor(slice));
        if let Err(e) = spawned {
            fail(&format!(
                "stackrt: cannot start the preemption monitor: {e}"
            ));
        }
    }
    main
}

impl Worker {
    /// Records the calling OS thread as this worker's, for the preemption monitor.
    fn register_os_thread(&self) {
        self.tid.store(crate::base::os::gettid(), Relaxed);
        self.ccalls.store(crate::base::ccalls::address(), Relaxed);
        self.os_thread
            .store(nix::sys::pthread::pthread_self() as usize, Relaxed);
        poison::thread_init();
        polls::register_flag(self);
        preempt_async::worker_init();
    }

    /// Counts `by` switches in [`Worker::tick`] (only the worker's own thread writes it).
    #[inline(always)]
    fn bump_tick(&self, by: usize) {
        self.tick
            .store(self.tick.load(Relaxed).wrapping_add(by), Relaxed);
    }
}

impl Green {
    /// Tells the crash reports which thread the calling worker is about to run.
    fn announce(&self) {
        // SAFETY: the stack slot is set before the thread first runs and changes only when it
        // has ended; the worker switching to it owns it now.
        let fixed = match unsafe { &*self.stack.get() } {
            GreenStack::Fixed(s) => s.usable(),
            GreenStack::Native(bounds) => *bounds,
            GreenStack::Block(..)
            | GreenStack::Mtss
            | GreenStack::None
            | GreenStack::Requested(_) => (0, 0),
        };
        crate::signals::set_running_green(self.handle, fixed);
        crate::race::set_current(self.race);
    }

    fn new(
        handle: c_int,
        fp: usize,
        arg: usize,
        stack_request: c_int,
        race: *mut crate::race::RaceThread,
        heap: bool,
    ) -> Green {
        Green {
            sp: UnsafeCell::new(0),
            handle,
            fp,
            arg_or_result: UnsafeCell::new(arg),
            started: Cell::new(false),
            stack: UnsafeCell::new(GreenStack::Requested(stack_request)),
            mech: UnsafeCell::new(mech_state::MechState::new(heap)),
            race,
            join: RawSpin::new(),
            join_state: UnsafeCell::new(JoinState {
                joiner: core::ptr::null(),
            }),
            lib_phase: Cell::new(0),
            lib_value: Cell::new(0),
            lib_errno: Cell::new(0),
            poll_regs: Cell::new(None),
        }
    }

    /// The thread's `sthread_*` handle (0: `main`).
    pub fn handle(&self) -> c_int {
        self.handle
    }

    /// The thread's race detector state (null without `--race`).
    pub fn race(&self) -> *mut crate::race::RaceThread {
        self.race
    }
}

impl Sched {
    fn worker_loop(&self, w: &Worker) -> ! {
        if let Some(d) = &self.det {
            loop {
                let picked = det_mode::lock(d).pick();
                match picked {
                    Ok(e) => self.run(w, e.thread.0),
                    Err(e) => {
                        det_mode::lock(d).flush();
                        crate::base::diag::fail(
                            &format!("stackrt: {e}"),
                            crate::base::diag::FATAL_EXIT_STATUS,
                        )
                    }
                }
            }
        }
        loop {
            self.drop_poll_request(w);
            self.check_role(w);
            match self.queues.pop(w.index) {
                Some((g, source)) => {
                    if self.count_stats && matches!(source, Source::Stolen(_)) {
                        self.stats.steals.fetch_add(1, Relaxed);
                    }
                    self.run(w, g.0);
                }
                None => {
                    if let Some((g, source)) = self.spin(w) {
                        if self.count_stats && matches!(source, Source::Stolen(_)) {
                            self.stats.steals.fetch_add(1, Relaxed);
                        }
                        self.run(w, g.0);
                    } else {
                        self.sleep();
                    }
                }
            }
        }
    }

    /// Puts a yielding thread back at the end of worker `w`'s queue. No sleeping worker is
    /// woken (the fence that would take costs a third of a yield): the thread was runnable
    /// before, and a worker about to sleep still sees it and steals it.
    fn requeue(&self, w: usize, g: *const Green) {
        if self.det.is_some() {
            return self.push(w, g, false);
        }
        self.queues.push(w, GreenPtr(g));
    }

    /// Puts `g` at the back of worker `w`'s queue (at the front if `next`) and wakes a
    /// sleeping worker.
    fn push(&self, w: usize, g: *const Green, next: bool) {
        if let Some(d) = &self.det {
            // SAFETY: a thread being made runnable is alive.
            let handle = unsafe { (*g).handle };
            det_mode::lock(d).push(GreenPtr(g), handle);
            return;
        }
        if next {
            self.queues.push_front(w, GreenPtr(g));
        } else {
            self.queues.push(w, GreenPtr(g));
        }
        self.wake_idle();
    }

    fn run(&self, w: &Worker, g: *const Green) {
        // SAFETY: a queued thread is alive and switched out; this worker owns it now.
        let gr = unsafe { &*g };
        w.current.set(g);
        if self.chunked {
            // SAFETY: the thread is switched out: nothing else uses its chain state.
            crate::chunk::global::swap_chain(unsafe { &mut *gr.chain() });
        }
        if self.heap {
            // SAFETY: as above, for its heap state.
            crate::mech::heap::swap_thread_state(unsafe { &mut *gr.heap_state() });
        }
        if !gr.started.get() {
            self.prepare(w, gr);
        } else if self.mtss {
            // SAFETY: a started thread's record, switched out and this worker's now.
            unsafe { crate::mech::mtss::green::resumed(gr.mtss()) };
        }
        if self.count_stats {
            self.stats.switches.fetch_add(1, Relaxed);
        }
        gr.announce();
        w.bump_tick(1);
        // SAFETY: `sched_sp` is this worker's, written by the switch; `gr.sp` is the saved
        // context of a suspended thread (prepared above, saved by its last switch out, or its
        // asynchronous preemption's frame).
        unsafe { async_resume::resume_or_switch(w.sched_sp.get(), gr.sp.get()) };
        // Not necessarily `g`: threads switch directly to each other (`yield_direct`); the one
        // that switched back is the worker's current thread.
        self.after_switch(w, w.current.get());
    }
}

/// What a function that may switch threads did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub enum Switched {
    /// Nothing to switch to, or the switch happened and the thread runs again.
    Done,
    /// The running code is a thread-library call on the handler stack: the switch is left to
    /// the library stub, which repeats the call with `phase` when the thread resumes (see
    /// [`libcall::lib_entry`]); the caller must return at once.
    Deferred,
}

/// Switches the running thread `g`'s context (saved into `save`) to `load`, or, when the
/// running code is a thread-library call on the worker's handler stack, leaves that to the
/// library stub (`crate::chunk::handler::defer_switch`) with `phase` for the call's repetition.
///
/// # Safety
/// `save` is the running thread's saved-SP slot and `load` a suspended context, as for
/// `context::switch`.
#[inline(always)]
unsafe fn switch_context(g: &Green, load: usize, phase: u32) -> Switched {
    let here = 0u8;
    let sp = core::hint::black_box(core::ptr::addr_of!(here)) as usize;
    if crate::chunk::handler::on_worker_handler_stack(sp) {
        g.lib_phase.set(phase);
        // SAFETY: we run under the library stub (the only way a green thread runs library
        // code on the handler stack) and return to it at once.
        unsafe { crate::chunk::handler::defer_switch(g.sp.get(), load) };
        return Switched::Deferred;
    }
    // SAFETY: the caller's guarantee.
    unsafe { context::switch(g.sp.get(), load) };
    complete_switch();
    Switched::Done
}

/// Switches from the running green thread to its worker's scheduler, which does `after`.
/// Returns when the thread is resumed, possibly on another worker, or at once if the switch
/// is deferred to the library stub ([`switch_context`]).
#[inline(never)]
fn switch_out(after: After, phase: u32) -> Switched {
    if poison::hooked() {
        poison::disarm();
    }
    if let Some(done) = pinned::check(&after) {
        return done;
    }
    let w = this_worker();
    let g = w.current.get();
    w.after.set(after);
    // SAFETY: `g` is the running thread (its record outlives its run); the scheduler context's
    // saved stack pointer is valid while one of its threads runs.
    unsafe { switch_context(&*g, *w.sched_sp.get(), phase) }
}

/// Run by a thread right after it resumed: if another thread switched to it directly
/// ([`yield_now`]), that thread's context is saved now, so it may go back to the run queue.
/// Out of line: it finds the worker afresh (the thread may have moved).
#[inline(never)]
fn complete_switch() {
    let _ = complete_switch_current();
}

/// [`complete_switch`], returning the running thread (one lookup of the worker for both).
#[inline(never)]
fn complete_switch_current() -> &'static Green {
    let w = this_worker();
    let prev = w.pending.replace(core::ptr::null());
    if !prev.is_null() {
        sched().requeue(w.index, prev);
    }
    // SAFETY: as in `current`.
    unsafe { &*w.current.get() }
}

/// `sthread_yield`'s common case: the next thread of this worker's own queue runs, switched to
/// directly (one switch, no trip through the scheduler context); the yielding thread goes to
/// the back of the queue once its context is saved. With nothing else queued here it simply
/// continues (the other workers serve their own queues).
#[inline(never)]
fn yield_direct(s: &Sched, phase: u32) -> Switched {
    if poison::hooked() {
        poison::disarm();
    }
    if let Some(done) = pinned::check(&After::Yield) {
        return done;
    }
    let w = this_worker();
    if w.slot.role.load(Acquire) != handoff::ACTIVE {
        // Handed off while its thread was in a call: back to the scheduler loop, which decides
        // whether this worker goes on (`Sched::check_role`).
        return switch_out(After::Yield, phase);
    }
    let Some(GreenPtr(next)) = s.queues.pop_own(w.index) else {
        return Switched::Done;
    };
    let cur = w.current.get();
    // SAFETY: `next` was queued, so it is alive and switched out, and now this worker's; `cur`
    // is the running thread.
    let (nx, cr) = unsafe { (&*next, &*cur) };
    // A preempted thread resumes from its frame, through the scheduler context too.
    // SAFETY: `next` is switched out: its saved stack pointer is written.
    let preempted = preempt_async::frame_of(unsafe { *nx.sp.get() }).is_some();
    if !nx.started.get() || preempted {
        return start_through_scheduler(s, w, next, phase);
    }
    if s.chunked {
        // SAFETY: `cur` runs here (its chain is the worker's) and `next` is switched out.
        unsafe { crate::chunk::global::switch_chain(&mut *cr.chain(), &*nx.chain()) };
        // SAFETY: `cur`'s chain state was just saved.
        if s.first_chunk_in_block && unsafe { (*cr.chain()).outgrown() } {
            // As `after_switch` does for a thread that switched out through the scheduler;
            // here the stack pointer is this frame's, or the library stub's.
            let here = 0u8;
            let mut sp = core::hint::black_box(core::ptr::addr_of!(here)) as usize;
            if crate::chunk::handler::on_worker_handler_stack(sp) {
                sp = crate::chunk::handler::stub_caller_sp();
            }
            // SAFETY: `cur`'s chain state was just saved; this runs on its stack.
            if let Some(used) = unsafe { (*cr.chain()).outgrown_use(sp) } {
                super::sizing::learn(cr.fp, used);
            }
        }
    }
    if s.heap {
        // SAFETY: as above, for their heap states.
        unsafe { crate::mech::heap::switch_thread_state(&mut *cr.heap_state(), &*nx.heap_state()) };
    }
    if s.mtss {
        // SAFETY: `next` started (checked above), is switched out and this worker's now.
        unsafe { crate::mech::mtss::green::resumed(nx.mtss()) };
    }
    if s.count_stats {
        s.stats.switches.fetch_add(1, Relaxed);
    }
    nx.announce();
    w.bump_tick(2);
    w.current.set(next);
    w.pending.set(cur);
    // SAFETY: `next` is suspended (prepared, or saved by its last switch); `cur`'s record
    // outlives its run.
    unsafe { switch_context(cr, *nx.sp.get(), phase) }
}

/// `yield_direct` to a thread that never ran: it starts through the scheduler context. A
/// direct switch would leave the yielding thread's requeue to the new thread's first frames
/// (`complete_switch`), on its stack block, whose entry room does not hold a requeue that
/// spills the run queue (the spill allocates: glibc's `free` wrote 80 bytes below an i686
/// block's first chunk with 10,000 yielding threads). `next` goes back to the front (its
/// slot is empty: `pop_own` took it first), and runs right after the switch. Out of line and
/// cold: it is rare, and the yield's common path stays small (`pop_own` and `lib_entry` are
/// `#[inline]` because a round trip took 33 instructions more when LLVM stopped inlining them).
#[cold]
#[inline(never)]
fn start_through_scheduler(s: &Sched, w: &Worker, next: *const Green, phase: u32) -> Switched {
    s.queues.push_front(w.index, GreenPtr(next));
    switch_out(After::Yield, phase)
}

/// Creates a green thread running `fp(arg)` with race detector state `race` (null without
/// `--race`); returns its record (queued on this worker).
pub fn create(
    handle: c_int,
    fp: usize,
    arg: usize,
    stack_request: c_int,
    race: *mut crate::race::RaceThread,
) -> *const Green {
    let s = sched();
    let g: *const Green = Box::into_raw(Box::new(Green::new(
        handle,
        fp,
        arg,
        stack_request,
        race,
        s.heap,
    )));
    if s.mtss {
        // SAFETY: the fresh record, not shared yet.
        unsafe { (*g).set_mtss(core::ptr::null_mut()) };
    }
    if let Some(d) = &s.det {
        det_mode::lock(d).created(handle);
    }
    let alive = s.alive.fetch_add(1, AcqRel) + 1;
    if s.count_stats {
        s.stats.created.fetch_add(1, Relaxed);
        s.stats.peak_alive.fetch_max(alive as u64, Relaxed);
    }
    s.push(this_worker().index, g, false);
    g
}

/// `sthread_yield` under green threads: lets the worker run the other runnable threads first.
/// `phase`: see [`Switched::Deferred`].
pub fn yield_now(phase: u32) -> Switched {
    if let Some(d) = &sched().det {
        let handle = current().handle;
        det_mode::lock(d).yielded(handle);
        return switch_out(After::Yield, phase);
    }
    yield_direct(sched(), phase)
}

/// The chunk runtime's checkpoint hook (`crate::chunk::poison`): a checkpoint entered the
/// runtime's overflow. Runs on the worker's handler stack, so it never switches: it answers
/// whether the thread should yield (it was asked to: its limit was poisoned; or the
/// deterministic mode lets the seed decide), and [`checkpoint_switch`] then runs on the
/// thread's own new chunk.
#[inline(never)]
fn at_checkpoint() -> bool {
    let poisoned = poison::disarm();
    if pinned::skip_preemption() {
        return false;
    }
    if poisoned {
        // Under memory pressure a preempted thread would keep its chunks while others grow:
        // the running one goes on, to finish and give them back (as only as many OS threads
        // as CPUs may grow then).
        !crate::chunk::global::under_memory_pressure()
    } else {
        // A decision of the deterministic mode (the same as `det_point`). Only there: in the
        // other modes this path runs at every overflow and switches nothing.
        sched().det.is_some()
    }
}

/// The switch [`at_checkpoint`] asked for, on the thread's own stack (the chunk the overflow
/// linked). Compiled code was interrupted between any two instructions: its errno must be the
/// same when it resumes, on whichever worker.
fn checkpoint_switch() {
    let _kept = crate::base::os::KeptErrno::new();
    // On the thread's chunk, not the handler stack: the switches happen here.
    if sched().det.is_some() {
        let _ = switch_out(After::Yield, 0);
    } else {
        preempt_current();
    }
}

/// A preemption requested at a checkpoint ([`at_checkpoint`]): the thread yields as
/// `sthread_yield` would.
fn preempt_current() {
    let s = sched();
    if s.count_stats {
        s.stats.preemptions.fetch_add(1, Relaxed);
    }
    s.wake_for_preempted();
    let _ = yield_now(0);
}

/// The race detector's decision hook (deterministic mode, `--race`): the running thread is
/// about to make an access that races with another thread's, and the seed decides who runs
/// first. Compiled code called the detector between any two instructions: errno is kept.
fn race_decision() {
    let _kept = crate::base::os::KeptErrno::new();
    let _ = det_point(0);
}

/// A scheduling point of the deterministic mode (create, lock, unlock, join): the running
/// thread yields, so the seed decides who runs next. Nothing in the other modes. `phase`: see
/// [`Switched::Deferred`].
pub fn det_point(phase: u32) -> Switched {
    if sched().det.is_some() {
        return switch_out(After::Yield, phase);
    }
    Switched::Done
}

/// Parks the running thread: `lock` (held by the caller) is released by the worker once the
/// thread is switched out; some waker will [`wake`] it. Returns when it runs again.
///
/// # Safety
/// The caller holds `lock`, and the thread is registered where a waker will find it.
pub unsafe fn park(lock: &RawSpin, phase: u32) -> Switched {
    let s = sched();
    if s.count_stats {
        s.stats.parks.fetch_add(1, Relaxed);
    }
    switch_out(After::Park(lock), phase)
}

/// Makes a parked thread runnable: it runs next on the calling worker.
///
/// # Safety
/// `g` is parked (its `park` lock was released by its worker) and woken once.
pub unsafe fn wake(g: *const Green) {
    sched().push(this_worker().index, g, true);
}

/// Ends the running thread with `result` (`sthread_exit`).
pub fn exit_current(result: usize) -> ! {
    let g = current();
    // SAFETY: only this thread writes its result.
    unsafe { *g.arg_or_result.get() = result };
    // `sthread_exit` is called on the thread's own stack, never through the library stub.
    let _ = switch_out(After::Exit, 0);
    unreachable!("an ended green thread was resumed")
}

/// Waits for `g` to end and returns its result (`Ok`); frees its record. `Err(Deferred)`:
/// the wait is left to the library stub (see [`Switched::Deferred`]), and the call repeated
/// with `phase` gets the result from [`join_result`].
///
/// # Safety
/// `g` comes from [`create`], is joined once (the handle table's guarantee), and is not the
/// calling thread.
pub unsafe fn join(g: *const Green, phase: u32) -> Result<usize, Switched> {
    // SAFETY: alive until this join frees it.
    let gr = unsafe { &*g };
    gr.join.lock();
    // SAFETY: join_state under `join`.
    let st = unsafe { &mut *gr.join_state.get() };
    if st.joiner == FINISHED {
        gr.join.unlock();
    } else {
        st.joiner = current();
        // SAFETY: `join` is held and the thread is registered as the joiner, which `finish`
        // wakes once.
        if unsafe { park(&gr.join, phase) } == Switched::Deferred {
            return Err(Switched::Deferred);
        }
    }
    // SAFETY: as `join_result` requires: `g` ended.
    Ok(unsafe { join_result(g) })
}

/// The result of `g`, which ended and was joined by the caller ([`join`]); frees its record.
///
/// # Safety
/// `g` ended (its finish happened before the joiner's wake, or was seen under its lock) and
/// nothing else refers to it.
pub unsafe fn join_result(g: *const Green) -> usize {
    // SAFETY: the caller's guarantee: the result is final and the record is the caller's.
    unsafe {
        let r = *(*g).arg_or_result.get();
        drop(Box::from_raw(g.cast_mut()));
        r
    }
}
