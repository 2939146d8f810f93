//! The race detector of programs compiled with `cmm compile --race`: happens-before with
//! vector clocks and FastTrack's epochs (`detect`), over shadow memory for the globals and the
//! heap (`shadow`), with one-line reports (`report`).
//!
//! Synchronisation, as the thread library (`crate::threads`) tells it: creating a thread
//! ([`fork`]: the child starts after everything its parent did), joining one ([`join`]:
//! everything the thread did, up to its exit, before the joiner goes on), unlocking and locking
//! a mutex ([`release`], [`acquire`]), and a compare-and-swap ([`cas`]: both, on a clock kept
//! per address). Each thread has a slot (at most [`clock::MAX_SLOTS`]
//! alive at once; a joined thread's slot is reused, its clock going on from where the old
//! thread's stopped, so old accesses look ordered before the new thread's: missed races, never
//! false ones) and a vector clock that only it changes, but for the joiner reading it after
//! the thread ended.
//!
//! The running thread's state is a thread-local pointer, set by the OS thread's entry
//! (`crate::threads::entry`) and, under green threads, by the worker at every switch to a
//! thread (`crate::green::sched`): so this layer sits below `green`. Only the deterministic
//! scheduler's decision hook ([`set_decision_hook`]) switches threads here; an entry keeps its
//! own thread's state (a heap object, not the thread-local's address) across it.
//!
//! Schedules (`STACKRT_SCHED_TRACE`, `STACKRT_SCHED=relaxed:FILE`): every thread counts its
//! events (instrumented accesses and thread-library calls, [`sync_begin`]); under the
//! deterministic scheduler `record` writes the partial order of conflicting events into the
//! trace file (`trace`), and `relaxed` enforces it in a parallel run, where detection is off.

use core::cell::Cell;
use core::ffi::{c_int, c_void};
use core::sync::atomic::Ordering::{Relaxed, SeqCst};
use core::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicUsize};
use std::collections::VecDeque;
use std::sync::{Mutex, OnceLock};

use crate::base::abi::THREAD_FAILURE_EXIT_STATUS;
use crate::base::diag::{fail, StackBuf, FATAL_EXIT_STATUS};
use crate::base::spin::SpinLock;

pub mod clock;
pub mod detect;
pub mod filter;
pub mod inline;
pub mod record;
pub mod relaxed;
pub mod report;
pub mod shadow;
mod sync;
pub mod trace;
pub mod trace_file;

use clock::{VClock, MAX_CLOCK, MAX_SLOTS};
use rustc_hash::FxHashMap;
use shadow::GRANULE;
pub use sync::{
    relaxed_next_waits, relaxed_quiet_cas, sync_begin, sync_done, sync_wait, sync_wait_green,
    QuietCas,
};

static ENABLED: AtomicBool = AtomicBool::new(false);
/// The green scheduler's decision hook (`fn()`), or 0: see [`set_decision_hook`].
static DECISION_HOOK: AtomicUsize = AtomicUsize::new(0);

/// Registers `f`, called before an access that races with another thread's (after its report,
/// if any): the deterministic scheduler takes a decision there (`crate::green::sched`), so a
/// seed can interleave the accesses of a lost update with no thread-library call between
/// them. Called with no lock held; it may switch threads.
pub fn set_decision_hook(f: fn()) {
    DECISION_HOOK.store(f as usize, Relaxed);
    take_full_path();
}

/// Accesses take the full path ([`full`]): the deterministic scheduler decides at contended
/// words, a trace is being recorded, or relaxed replay runs. Otherwise an access is checked
/// by [`checked`], which settles the common case in a leaf's few instructions.
static FULL_PATH: AtomicBool = AtomicBool::new(false);

/// Sends every access to the full path (relaxed replay starts).
pub(crate) fn take_full_path() {
    FULL_PATH.store(true, Relaxed);
    // At start, on the only thread: no read of this thread's is settled inline from now on
    // (every other thread publishes its filter in `set_current`, which reads the flag).
    inline::publish(core::ptr::null());
}
static ABORT: AtomicBool = AtomicBool::new(false);
/// The deterministic scheduler records a trace: events go into it too (`record`).
static RECORDING: AtomicBool = AtomicBool::new(false);
/// Thread numbers (`trace`): creation order, `main` is 0.
static NEXT_ID: AtomicU32 = AtomicU32::new(0);
static TABLES: OnceLock<report::Tables> = OnceLock::new();

/// Whether the program was compiled with `--race` (set once at start).
#[inline]
pub fn enabled() -> bool {
    ENABLED.load(Relaxed)
}

/// One thread as the detector sees it.
pub struct RaceThread {
    slot: usize,
    vc: VClock,
    /// `clock::epoch` of its own clock and slot: the high bits of its access words.
    epoch: u64,
    /// Its number in schedule traces.
    id: u32,
    /// Events so far (`trace`), and the number of the thread-library call's under way.
    events: Cell<u64>,
    sync_event: Cell<u64>,
    cursor: relaxed::Cursor,
    /// Reads recorded in the current epoch ([`checked`] skips them).
    filter: filter::Filter,
}

thread_local! {
    /// The running thread's state (null: not a thread of the program, or detection off).
    static CURRENT: Cell<*mut RaceThread> = const { Cell::new(core::ptr::null_mut()) };
}

/// The running thread's state (null when detection is off).
///
/// A green thread may move to another worker (OS thread) at every switch, and the compiler
/// may keep a thread-local's address for a whole function: the thread library's entries here
/// (`fork`, `join`, `acquire`, `release`, `sync_*`, `thread_end`), which it calls after calls
/// that may switch, are out of line, so each finds the running thread afresh.
#[inline]
pub fn current() -> *mut RaceThread {
    CURRENT.with(|c| c.get())
}

/// Makes `t` the calling OS thread's running thread (a thread's entry; a green thread's
/// worker when it switches to it).
pub fn set_current(t: *mut RaceThread) {
    CURRENT.with(|c| c.set(t));
    inline::publish(if t.is_null() || FULL_PATH.load(Relaxed) {
        core::ptr::null()
    } else {
        // The address of `(*t).filter`, computed without reading `t`.
        t.cast::<u8>()
            .wrapping_add(core::mem::offset_of!(RaceThread, filter))
            .cast()
    });
}

struct Slots {
    /// Slots of joined threads, the longest free first: a report names an earlier access's
    /// thread by its slot, so a slot is reused as late as possible.
    free: VecDeque<usize>,
    next: usize,
    /// The last clock of each slot's previous thread.
    last: Vec<u32>,
}

static SLOTS: Mutex<Slots> = Mutex::new(Slots {
    free: VecDeque::new(),
    next: 0,
    last: Vec::new(),
});
/// The `sthread_*` handle of each slot's thread (0 is `main`), for the reports.
static HANDLES: [AtomicI32; MAX_SLOTS] = [const { AtomicI32::new(0) }; MAX_SLOTS];

/// Stripes of [`LOCK_CLOCKS`].
const CLOCK_STRIPES: usize = 64;

/// Synchronisation objects' clocks by address: mutexes' at their last unlock, CAS words' at
/// their last CAS. In stripes by address, each behind a spin lock (the critical sections are a
/// lookup and a join): threads synchronising on different objects do not meet, and the CASes
/// of one word still take one lock in turn. A futex mutex for them all made green threads
/// spinning on CAS words sleep in the kernel. Hashed with FxHash (one multiply; the keys are
/// the program's own addresses): the standard library's SipHash was a sixth of IRS
/// Fibonacci's `--race` run on i686.
static LOCK_CLOCKS: [SpinLock<Option<FxHashMap<usize, VClock>>>; CLOCK_STRIPES] =
    [const { SpinLock::new(None) }; CLOCK_STRIPES];

/// Runs `f` on the clocks of the stripe of `addr`.
fn with_clocks<R>(addr: usize, f: impl FnOnce(&mut FxHashMap<usize, VClock>) -> R) -> R {
    LOCK_CLOCKS[stripe(addr)].with(|map| f(map.get_or_insert_with(FxHashMap::default)))
}

/// The stripe of a synchronisation object's address (objects are at least 4-byte aligned).
fn stripe(addr: usize) -> usize {
    ((addr >> 2).wrapping_mul(0x9e37_79b9) >> 7) % CLOCK_STRIPES
}

fn slots() -> std::sync::MutexGuard<'static, Slots> {
    SLOTS.lock().unwrap_or_else(|e| e.into_inner())
}

fn new_thread(handle: c_int, parent: &VClock) -> *mut RaceThread {
    let mut s = slots();
    let slot = match s.free.pop_front() {
        Some(slot) => slot,
        None if s.next < MAX_SLOTS => {
            s.next += 1;
            s.last.push(0);
            s.next - 1
        }
        None => fail(
            &format!("stackrt: --race: more than {MAX_SLOTS} threads alive at once"),
            FATAL_EXIT_STATUS,
        ),
    };
    let start = s.last[slot] + 1;
    drop(s);
    HANDLES[slot].store(handle, Relaxed);
    let mut vc = parent.clone();
    vc.set(slot, start);
    let id = NEXT_ID.fetch_add(1, Relaxed);
    Box::into_raw(Box::new(RaceThread {
        slot,
        vc,
        epoch: clock::epoch(start, slot),
        id,
        events: Cell::new(0),
        sync_event: Cell::new(0),
        cursor: relaxed::Cursor::new(id),
        filter: filter::Filter::new(),
    }))
}

fn tick(t: &mut RaceThread) {
    let c = t.vc.get(t.slot) + 1;
    if c > MAX_CLOCK {
        fail(
            &format!("stackrt: --race: a thread synchronised more than {MAX_CLOCK} times"),
            FATAL_EXIT_STATUS,
        );
    }
    t.vc.set(t.slot, c);
    t.epoch = clock::epoch(c, t.slot);
    t.filter.clear();
}

/// Turns detection on if the program was compiled with `--race`: reads `STACKRT_RACE`, maps
/// the shadow directory, tracks the globals and makes the calling (main) thread thread 0.
pub fn start() {
    use crate::base::program::{race_globals, race_sites, race_strings};
    let relaxed_path = std::env::var("STACKRT_SCHED")
        .ok()
        .and_then(|v| v.trim().strip_prefix("relaxed:").map(str::to_string));
    if race_sites() == 0 {
        if relaxed_path.is_some() {
            fail(
                "stackrt: STACKRT_SCHED=relaxed:FILE needs a program compiled with --race",
                THREAD_FAILURE_EXIT_STATUS,
            );
        }
        return;
    }
    match std::env::var("STACKRT_RACE").as_deref() {
        Err(_) | Ok("") | Ok("report") => {}
        Ok("abort") => ABORT.store(true, Relaxed),
        Ok(other) => fail(
            &format!("stackrt: STACKRT_RACE={other:?} is neither \"report\" nor \"abort\""),
            FATAL_EXIT_STATUS,
        ),
    }
    shadow::init();
    let tables = report::Tables {
        sites: race_sites() as *const u32,
        strings: race_strings() as *const u8,
        globals: race_globals() as *const usize,
    };
    for (addr, size, _) in tables.globals() {
        shadow::track(addr, size);
    }
    let _ = TABLES.set(tables);
    if let Some(path) = relaxed_path {
        start_relaxed(&path);
    }
    set_current(new_thread(0, &VClock::new()));
    shadow::thread_started();
    shadow::thread_created();
    ENABLED.store(true, Relaxed);
}

/// The site table's size and an FNV-1a hash of its texts: which program a trace belongs to.
pub fn program_fingerprint() -> Option<(u64, u64)> {
    let tables = TABLES.get()?;
    let n = if tables.sites.is_null() {
        0
    } else {
        // SAFETY: a non-null `sites` starts with its count (the compiler's contract).
        unsafe { *tables.sites }
    };
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for s in 0..n {
        for &b in tables.site(s).iter().chain(b"\n") {
            h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
    }
    Some((n as u64, h))
}

/// `STACKRT_SCHED=relaxed:FILE`: reads the trace (bad input: one line, status 1) and turns
/// relaxed replay on, detection off.
fn start_relaxed(path: &str) {
    let bad = |m: String| -> ! {
        fail(
            &format!("stackrt: STACKRT_SCHED: {m}"),
            THREAD_FAILURE_EXIT_STATUS,
        )
    };
    if path.is_empty() {
        bad("relaxed takes a trace file: relaxed:FILE".into());
    }
    // The plan is built as the lines are read (decisions, which strict replay needs, are not
    // kept), by two threads if the trace is long, and the text is unmapped before replay
    // starts.
    let (t, plan) = {
        let file =
            trace_file::read(path).unwrap_or_else(|e| bad(format!("cannot read {path}: {e}")));
        let text = file
            .text()
            .unwrap_or_else(|e| bad(format!("cannot read {path}: {e}")));
        let (header, mut plan, second) =
            trace::parse_split(text, crate::base::os::cpus(), relaxed::Builder::default)
                .unwrap_or_else(|(line, m)| bad(format!("{path}:{line}: {m}")));
        if let Some(second) = second {
            plan.append(second);
        }
        (header, plan)
    };
    match t.program {
        None => bad(format!(
            "{path} has no --race events (record it from a --race build under the deterministic scheduler)"
        )),
        Some(p) if Some(p) != program_fingerprint() => {
            bad(format!("{path} was recorded from another program"))
        }
        Some(_) => plan.start(&t.ends),
    }
}

/// Called by the deterministic scheduler once it wrote a trace file's header (version 2 when
/// [`enabled`]): the events of a `--race` program are recorded into it (`record`).
pub fn start_recording() {
    if !enabled() {
        return;
    }
    if let Some((n, h)) = program_fingerprint() {
        record::line(&format!("program {n} {h}\n"));
    }
    record::start();
    RECORDING.store(true, Relaxed);
    take_full_path();
}

fn recording() -> bool {
    RECORDING.load(Relaxed)
}

/// Whether accesses are checked (not under relaxed replay).
fn detecting() -> bool {
    enabled() && !relaxed::on()
}

/// The running OS thread ends (returns from its function or calls `sthread_exit`).
#[inline(never)]
pub fn thread_end() {
    // SAFETY: the calling thread's own state (or null), alive until its join.
    unsafe { thread_end_of(current()) };
    detect::return_local_sets();
}

/// Thread `t` (null: none) ended: the green scheduler calls this on its own stack once the
/// thread switched away for good, the OS thread's entry ([`thread_end`]) on its native stack.
///
/// # Safety
/// `t` is null or an ended thread's state that its join has not freed yet.
pub unsafe fn thread_end_of(t: *mut RaceThread) {
    if t.is_null() {
        return;
    }
    // SAFETY: the caller's guarantee: the state stays alive until its join, after this.
    let t = unsafe { &*t };
    shadow::thread_ended();
    if relaxed::on() {
        relaxed::ended(&t.cursor, t.events.get());
    }
    if recording() {
        record::end_run(t.id);
        record::line(&format!("end {} {}\n", t.id, t.events.get()));
    }
}

/// `sthread_create` in the parent, before the child can run: the child's state, which starts
/// after everything the parent did (null when detection is off).
#[inline(never)]
pub fn fork(handle: c_int) -> *mut RaceThread {
    let cur = current();
    if cur.is_null() {
        return core::ptr::null_mut();
    }
    // SAFETY: the running thread's state is changed only by the thread itself.
    let parent = unsafe { &mut *cur };
    let child = new_thread(handle, &parent.vc);
    shadow::thread_started();
    shadow::thread_created();
    tick(parent);
    if recording() {
        // SAFETY: `child` is fresh and not running yet.
        let cid = unsafe { (*child).id };
        let n = parent.sync_event.get();
        if let Some(e) = record::with(|r| r.create(parent.id, n, cid)) {
            record::write_event(parent.id, n, &e, "create", None);
        }
    }
    child
}

/// `sthread_join` once `child` (from [`fork`]) has ended: the joiner goes on after everything
/// the child did; the child's state is freed and its slot reused.
///
/// # Safety
/// `child` comes from [`fork`], its thread has ended, and it is joined once.
#[inline(never)]
pub unsafe fn join(child: *mut RaceThread) {
    if child.is_null() {
        return;
    }
    // SAFETY: per the contract the child ended and nobody else refers to its state.
    let child = unsafe { Box::from_raw(child) };
    let cur = current();
    if !cur.is_null() {
        // SAFETY: as in `fork`.
        let t = unsafe { &mut *cur };
        t.vc.join(&child.vc);
        shadow::thread_joined();
        if recording() {
            let n = t.sync_event.get();
            let ce = child.events.get();
            if let Some(e) = record::with(|r| r.join(t.id, n, child.id, ce)) {
                record::write_event(t.id, n, &e, "join", None);
            }
        }
    }
    let mut s = slots();
    s.last[child.slot] = child.vc.get(child.slot);
    s.free.push_back(child.slot);
}

/// Before unlocking mutex `m`: its next locker goes on after everything done so far.
#[inline(never)]
pub fn release(m: usize) {
    let cur = current();
    if cur.is_null() {
        return;
    }
    // SAFETY: as in `fork`.
    let t = unsafe { &mut *cur };
    // The unlock is an event of schedule traces (published at once: only the next lock of
    // `m` waits for it, and that blocks on the mutex anyway).
    let n = t.events.get() + 1;
    t.events.set(n);
    if relaxed::on() {
        if t.cursor.needs(n) {
            relaxed::begin(&t.cursor, n);
        }
        relaxed::done(&t.cursor, n);
        return;
    }
    if recording() {
        record::with(|r| r.unlock(t.id, n, m));
    }
    with_clocks(m, |map| match map.get_mut(&m) {
        Some(vc) => vc.assign(&t.vc),
        None => {
            map.insert(m, t.vc.clone());
        }
    });
    tick(t);
}

/// After locking mutex `m`: everything done before its last unlock happened before.
#[inline(never)]
pub fn acquire(m: usize) {
    let cur = current();
    if cur.is_null() {
        return;
    }
    // SAFETY: as in `fork`.
    let t = unsafe { &mut *cur };
    if relaxed::on() {
        return;
    }
    if recording() {
        let n = t.sync_event.get();
        if let Some(e) = record::with(|r| r.lock(t.id, n, m)) {
            record::write_event(t.id, n, &e, "lock", None);
        }
    }
    with_clocks(m, |map| {
        if let Some(vc) = map.get(&m) {
            t.vc.join(vc);
        }
    });
}

/// `sthread_cas`: an atomic compare-and-swap of the `int` at `p` (`old` to `new`); returns the
/// value `*p` held before (it swapped if that is `old`). For the detector it is a synchronising
/// access, an acquire and a release of a clock kept per address as a mutex's is (every CAS,
/// failed ones too, as a lock/unlock pair: ordering a failed CAS's thread before the next CAS
/// may hide a race, never invents one), so a protocol built on CAS (a spin lock released by
/// `sthread_cas(&l, 1, 0)`, Indexer's table) orders the plain accesses it protects. The CAS
/// itself is not checked against plain accesses of the same word. Recorded in schedule traces
/// (kind `cas`) as a write of its 4 bytes when it changed the word, else as a read: under
/// relaxed replay every CAS reads the word after the same write as when recorded, so it
/// succeeds or fails as it did, and the plain accesses around them keep their order. The caller (`crate::threads`) brackets
/// it with [`sync_begin`] and [`sync_done`] as the other thread-library events.
///
/// # Safety
/// `p` is valid, 4-byte aligned, and accessed by other threads only atomically or in
/// accesses the program orders with this one.
#[inline(never)]
pub unsafe fn cas(p: *mut c_int, old: c_int, new: c_int) -> c_int {
    // SAFETY: the caller's contract.
    let swap = || unsafe { swap_word(p, old, new) };
    let cur = current();
    if cur.is_null() {
        return swap();
    }
    if relaxed::on() {
        // SAFETY: the running thread's state; only this thread changes it.
        let t = unsafe { &*cur };
        return relaxed::failed_value(&t.cursor, t.sync_event.get(), old).unwrap_or_else(swap);
    }
    // SAFETY: as in `fork`.
    let t = unsafe { &mut *cur };
    let addr = p as usize;
    // The swap happens under the clocks' lock, so the order of the CASes of one word is the
    // order in which their threads acquire and release its clock.
    let was = with_clocks(addr, |map| {
        let vc = map.entry(addr).or_default();
        t.vc.join(vc);
        let was = swap();
        vc.assign(&t.vc);
        was
    });
    if recording() {
        let n = t.sync_event.get();
        if was != old {
            // Failed: relaxed replay gives it the value it found (`record`), unordered.
            record::write_failed(t.id, n, was);
        } else {
            // Only a swap that changed the word is a write: one that wrote the value it found
            // read the word, so replay needs it only after the write it read and before the
            // next one, not in one order with the other threads' reads.
            let wrote = new != old;
            if let Some(e) = record::with(|r| r.access(t.id, n, addr, 4, wrote)) {
                record::write_event(t.id, n, &e, "cas", None);
            }
        }
    }
    tick(t);
    was
}

/// The compare-and-swap itself, sequentially consistent; returns the value `*p` held.
///
/// # Safety
/// As [`cas`].
#[inline]
pub unsafe fn swap_word(p: *mut c_int, old: c_int, new: c_int) -> c_int {
    // SAFETY: per the contract `p` is valid and aligned for an `AtomicI32`, and other
    // threads' accesses of it are atomic or ordered with this one.
    let word = unsafe { AtomicI32::from_ptr(p) };
    match word.compare_exchange(old, new, SeqCst, SeqCst) {
        Ok(v) | Err(v) => v,
    }
}

/// Mutex `m` is destroyed (its address may name another mutex later).
pub fn forget(m: usize) {
    LOCK_CLOCKS[stripe(m)].with(|map| {
        if let Some(map) = map {
            map.remove(&m);
        }
    });
}

/// An access under relaxed replay: counted, and held back only where the trace says (the
/// common case is an add and a compare: kept apart from [`access`], whose frame is larger).
#[inline(always)]
fn relaxed_access() {
    let cur = current();
    if cur.is_null() {
        return;
    }
    // SAFETY: the running thread's state; only this thread changes it.
    let t = unsafe { &*cur };
    let n = t.events.get() + 1;
    t.events.set(n);
    if t.cursor.needs(n) {
        relaxed_wait(t, n);
    }
}

#[cold]
#[inline(never)]
fn relaxed_wait(t: &RaceThread, n: u64) {
    relaxed::begin(&t.cursor, n);
    relaxed::not_failed(&t.cursor, n);
    relaxed::wait(&t.cursor, n);
}

/// One instrumented access.
struct Access {
    addr: usize,
    size: usize,
    site: u32,
    write: bool,
}

impl Access {
    /// The access an entry was called with (a negative size touches nothing).
    #[inline(always)]
    fn new(addr: usize, size: c_int, site: c_int, write: bool) -> Self {
        Access {
            addr,
            size: size.max(0) as usize,
            site: site as u32,
            write,
        }
    }
}

/// An instrumented access when no decision, trace or replay is under way: what [`access`]
/// does, with the common case (one granule, adding nothing to its history, FastTrack's
/// same-epoch case) made of loads and one store and no call.
#[inline(always)]
fn checked(addr: usize, size: c_int, site: c_int, write: bool) {
    let cur = current();
    if cur.is_null() {
        return;
    }
    // Every other thread joined: nothing to record or check (`shadow::quiescent`). The
    // thread's filter is left as it is: a bit it keeps for bytes written now stands for a read
    // that needed no record, and the next thread created ticks this one's clock, which clears
    // the filter before any other thread exists.
    if shadow::quiescent() {
        return;
    }
    // SAFETY: the running thread's state; only this thread changes it.
    let t = unsafe { &*cur };
    // (Events are not counted: only traces and relaxed replay, on the full path, read them.)
    let offset = addr & (GRANULE - 1);
    if size <= 0 || offset + size as usize > GRANULE {
        if size > 0 {
            spanning(t, addr, size, site, write);
        }
        return;
    }
    let size = size as usize;
    if write {
        t.filter.forget(addr, size);
    }
    if let Some(cell) = shadow::tracked_cell(addr) {
        if cell.w.load(Relaxed) == 0 && cell.r.load(Relaxed) == 0 && shadow::alone() {
            // No access to race with, and none to keep: everything a thread does while it is
            // the only one comes before whatever a thread started later does (its creation
            // is ordered after it), and no earlier thread can run again. So a single-threaded
            // start building data, and later freeing it, writes no shadow.
            if !write {
                t.filter.note(addr, size);
            }
            return;
        }
        let mask = ((1u32 << size) - 1) << offset;
        let acc = t.epoch | clock::bytes_and_site(mask, site as u32);
        let redundant = if write {
            detect::write_is_redundant(cell, acc)
        } else {
            detect::read_is_redundant(cell, acc)
        };
        if !redundant {
            update(
                t,
                cell,
                &Access::new(addr, size as c_int, site, write),
                acc,
                false,
            );
        }
        if !write {
            t.filter.note(addr, size);
        }
    }
}

/// A read on the full path (out of line, so that the filter's path saves fewer registers).
#[inline(never)]
fn read_full_path(addr: usize, size: c_int, site: c_int) {
    if relaxed::on() {
        return relaxed_access();
    }
    full(addr, size, site, false);
}

/// [`checked`] for a read that the thread's filter does not settle.
#[inline(never)]
fn checked_read(addr: usize, size: c_int, site: c_int) {
    checked(addr, size, site, false);
}

/// [`checked`]'s accesses that span granules.
#[cold]
#[inline(never)]
fn spanning(t: &RaceThread, addr: usize, size: c_int, site: c_int, write: bool) {
    if write {
        t.filter.forget(addr, size as usize);
    }
    granules(t, &Access::new(addr, size, site, write));
}

/// An instrumented access on the full path ([`FULL_PATH`]) but for relaxed replay's.
#[inline(never)]
fn full(addr: usize, size: c_int, site: c_int, write: bool) {
    access(addr, size, site, write);
}

/// An instrumented access in full: counted, checked, recorded, with the deterministic
/// scheduler's decisions.
#[inline(always)]
fn access(addr: usize, size: c_int, site: c_int, write: bool) {
    let cur = current();
    if cur.is_null() {
        return;
    }
    // SAFETY: the running thread's state; only this thread changes it (also across a
    // decision hook's switch: it stays this thread's).
    let t = unsafe { &*cur };
    // Every call is an event of schedule traces, as under relaxed replay.
    let n = t.events.get() + 1;
    t.events.set(n);
    let a = Access::new(addr, size, site, write);
    let offset = addr & (GRANULE - 1);
    if a.size > 0 && offset + a.size <= GRANULE {
        // Within one granule: nearly every access.
        if let Some(cell) = shadow::tracked_cell(addr) {
            granule(t, cell, &a, ((1u32 << a.size) - 1) << offset);
        }
    } else if a.size > 0 {
        granules(t, &a);
    }
    if recording() {
        record_access(t, n, addr, a.size, write, a.site);
    }
}

/// An access spanning granules (unaligned or larger than 8 bytes): each granule's part.
#[inline(never)]
fn granules(t: &RaceThread, a: &Access) {
    let end = a.addr.saturating_add(a.size);
    let mut g = a.addr & !(GRANULE - 1);
    while g < end {
        if let Some(cell) = shadow::tracked_cell(g) {
            let lo = a.addr.max(g) - g;
            let hi = end.min(g + GRANULE) - g;
            granule(t, cell, a, ((1u32 << hi) - 1) & !((1u32 << lo) - 1));
        }
        g += GRANULE;
    }
}

/// The part of access `a` that touches the bytes `mask` of `cell`'s granule. The same-epoch
/// checks only load; anything else is [`update`]'s.
#[inline(always)]
fn granule(t: &RaceThread, cell: &detect::Cell, a: &Access, mask: u32) {
    // The deterministic scheduler decides before every access to a contended word.
    let deciding = DECISION_HOOK.load(Relaxed) != 0;
    let contended = deciding && detect::is_contended(cell);
    if contended {
        decide();
    }
    let acc = t.epoch | clock::bytes_and_site(mask, a.site);
    let redundant = if a.write {
        detect::write_is_redundant(cell, acc)
    } else {
        detect::read_is_redundant(cell, acc)
    };
    if !redundant {
        update(t, cell, a, acc, deciding && !contended);
    }
}

/// Checks and records the access word `acc` of `a`, which adds to `cell`'s history, under the
/// cell's lock; reports a race; takes a decision if `decide_on_race` and the word just became
/// contended (this access is a decision too).
#[inline(never)]
fn update(t: &RaceThread, cell: &detect::Cell, a: &Access, acc: u64, decide_on_race: bool) {
    let check = || {
        if a.write {
            detect::write(cell, acc, &t.vc)
        } else {
            detect::read(cell, acc, &t.vc)
        }
    };
    let race = if shadow::alone() {
        check()
    } else {
        let l = shadow::lock_of(cell);
        l.lock();
        let race = check();
        l.unlock();
        race
    };
    if let Some(r) = race {
        report_race(a.addr, a.size, a.write, t, a.site, &r);
        if decide_on_race {
            decide();
        }
    }
}

/// Records access `n` of `t` (after any decision: the access follows at once).
#[cold]
fn record_access(t: &RaceThread, n: u64, addr: usize, size: usize, write: bool, site: u32) {
    if let Some(e) = record::with(|r| r.access(t.id, n, addr, size, write)) {
        let text = TABLES.get().map(|tb| tb.site(site));
        let kind = if write { "write" } else { "read" };
        record::write_event(t.id, n, &e, kind, text);
    }
}

/// A decision of the deterministic scheduler before a racing access, if one is registered.
fn decide() {
    let h = DECISION_HOOK.load(Relaxed);
    if h != 0 {
        // SAFETY: the word holds a `fn()` stored by `set_decision_hook`.
        let f = unsafe { core::mem::transmute::<usize, fn()>(h) };
        f();
    }
}

#[cold]
fn report_race(addr: usize, size: usize, write: bool, t: &RaceThread, site: u32, r: &detect::Race) {
    if !report::first_time(site, clock::site(r.prev)) {
        return;
    }
    let Some(tables) = TABLES.get() else { return };
    let cur = report::Current {
        addr,
        size,
        write,
        thread: HANDLES[t.slot].load(Relaxed),
        site,
    };
    let mut line = StackBuf::<1024>::new();
    let prev_thread = HANDLES[clock::slot(r.prev)].load(Relaxed);
    report::format(tables, &cur, r, prev_thread, &mut line);
    line.write_to_stderr();
    if ABORT.load(Relaxed) {
        // SAFETY: fflush(NULL) flushes every stdio stream (the program's output so far); _exit
        // then ends the process without running atexit handlers while other threads run.
        unsafe {
            libc::fflush(core::ptr::null_mut());
            libc::_exit(report::RACE_EXIT_STATUS);
        }
    }
}

/// Called by `--race` code before a load of `size` bytes at `addr`, at site `site`.
#[no_mangle]
pub extern "C" fn __stackrt_race_read(addr: *const c_void, size: c_int, site: c_int) {
    if FULL_PATH.load(Relaxed) {
        return read_full_path(addr as usize, size, site);
    }
    // The common case of data several threads read again and again: a read this thread
    // already recorded in its epoch, settled by its filter in a few loads (`filter`).
    let cur = current();
    // SAFETY: the running thread's state (or null); only this thread changes its filter.
    if !cur.is_null() && unsafe { (*cur).filter.covers(addr as usize, size) } {
        return;
    }
    checked_read(addr as usize, size, site);
}

/// Called by `--race` code before a store of `size` bytes at `addr`, at site `site`.
#[no_mangle]
pub extern "C" fn __stackrt_race_write(addr: *const c_void, size: c_int, site: c_int) {
    if FULL_PATH.load(Relaxed) {
        if relaxed::on() {
            return relaxed_access();
        }
        return full(addr as usize, size, site, true);
    }
    checked(addr as usize, size, site, true);
}

/// `malloc` of a `--race` program: the block is tracked, with no accesses yet.
#[no_mangle]
pub extern "C" fn __stackrt_race_malloc(n: usize) -> *mut c_void {
    // SAFETY: malloc has no preconditions.
    let p = unsafe { libc::malloc(n) };
    if !p.is_null() && detecting() {
        shadow::track(p as usize, n);
    }
    p
}

/// `calloc` of a `--race` program.
#[no_mangle]
pub extern "C" fn __stackrt_race_calloc(n: usize, size: usize) -> *mut c_void {
    // SAFETY: calloc has no preconditions.
    let p = unsafe { libc::calloc(n, size) };
    if !p.is_null() && detecting() {
        shadow::track(p as usize, n.saturating_mul(size));
    }
    p
}

/// `realloc` of a `--race` program: the old block is forgotten, the new one tracked.
///
/// # Safety
/// As `realloc`: `p` is NULL or a live block from the allocator.
#[no_mangle]
pub unsafe extern "C" fn __stackrt_race_realloc(p: *mut c_void, n: usize) -> *mut c_void {
    let old = if p.is_null() {
        0
    } else {
        // SAFETY: per the contract `p` is a live block of the allocator.
        unsafe { libc::malloc_usable_size(p) }
    };
    if old != 0 && detecting() {
        shadow::untrack(p as usize, old);
    }
    // SAFETY: per the contract.
    let q = unsafe { libc::realloc(p, n) };
    if detecting() {
        if !q.is_null() {
            shadow::track(q as usize, n);
        } else if old != 0 {
            shadow::track(p as usize, old);
        }
    }
    q
}

/// `free` of a `--race` program: the block's accesses are forgotten (another thread may get
/// its memory from `malloc` with no synchronisation the detector sees).
///
/// # Safety
/// As `free`: `p` is NULL or a live block from the allocator.
#[no_mangle]
pub unsafe extern "C" fn __stackrt_race_free(p: *mut c_void) {
    if !p.is_null() && detecting() {
        // SAFETY: per the contract `p` is a live block.
        shadow::untrack(p as usize, unsafe { libc::malloc_usable_size(p) });
    }
    // SAFETY: per the contract.
    unsafe { libc::free(p) }
}
