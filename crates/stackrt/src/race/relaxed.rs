//! Relaxed replay (`STACKRT_SCHED=relaxed:FILE`): the threads run in parallel, on every worker
//! or as OS threads, and only the recorded partial order of their events (`event` lines of
//! `trace`) is enforced, with one progress word per thread (a vector clock spread over the
//! threads: each waits for the entries it needs).
//!
//! Each thread counts its events as the recording did (`record`). Before its N-th event a
//! thread waits until every event its line names has happened: thread U's M-th event has
//! happened once U's progress word is M or more. U cannot tell that a load or store it was
//! allowed to make is done (compiled code makes it after the runtime call returns), so it
//! publishes "everything before event N is done" when it reaches event N, at the end of a
//! thread-library call, and when it ends; it publishes only past events some line waits for,
//! so a thread whose events nobody waits for pays one add and one compare per access. Every
//! wait is for an event earlier in the recorded run, so the earliest pending event of the run
//! can always go ahead: no deadlock, as long as no thread blocks outside the thread library
//! (a pipe, `sleep`) right after an event another waits for.
//!
//! A waiting green thread parks on the awaited thread's *bell* (`green::futex`, through a hook
//! the scheduler registers), bumped at every publication; an OS thread spins a little, then
//! sleeps on the same bell. So a thread that can go on is not switched away from at every
//! yield of its program to a thread that cannot (a spin-wait's retries in a recorded run).
//!
//! A compare-and-swap the trace says failed (a `failed` line) is not made: it returns the value
//! the recorded one found, whenever it comes, and waits for nothing (a spinning thread's retries
//! neither wait for the write they read nor hold back the next one).
//!
//! A trace that does not fit the run is found where it shows: a thread waits for an event of
//! a thread that ended before it, or a thread makes more or fewer events than the trace's
//! `end` line says; the program then ends with one line and status 70, as strict replay's
//! divergence does.

use core::cell::Cell;
use core::sync::atomic::Ordering::{Acquire, Relaxed, SeqCst};
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize};
use std::sync::OnceLock;

use super::trace::Sink;
#[cfg(test)]
use super::trace::Trace;
use crate::base::diag::{fail, FATAL_EXIT_STATUS};

/// In a progress word: the thread ended.
const ENDED: u64 = 1 << 63;

/// One thread's part of the plan: where its entries are in [`Plan`]'s tables.
struct ThreadPlan {
    /// Its first wait ([`NO_WAIT`] if none); each links to the next.
    first_wait: u32,
    sources: core::ops::Range<usize>,
    /// Its first run of failed compare-and-swaps ([`NO_WAIT`] if none); each links to the next.
    first_run: u32,
    /// Events in all, if the thread ended in the recording.
    end: Option<u64>,
}

/// An event a thread waits for: its event `e` comes after event `m` of thread `u`. In the
/// trace's order, in one table for all threads (two when two threads read the trace), each
/// linked to the thread's next: no second copy sorted by thread (a trace's waits can take tens
/// of megabytes, and in a fresh process every page of them costs a fault).
#[derive(Clone, Copy)]
struct Wait {
    e: u64,
    m: u64,
    u: u32,
    /// The index of the thread's next wait, or [`NO_WAIT`] (while the plan is built: the
    /// waiting thread).
    next: u32,
}

/// No wait (or run): the end of a thread's list.
const NO_WAIT: u32 = u32::MAX;

/// Every thread's waits ([`Wait`]) or runs ([`Run`]): the lines of the trace's first half,
/// then those of its second; an index counts across both.
struct Halves<T: 'static> {
    first: &'static [T],
    second: &'static [T],
}

impl<T> Clone for Halves<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Halves<T> {}

impl<T> Halves<T> {
    #[inline]
    fn get(&self, i: u32) -> Option<&'static T> {
        let i = i as usize;
        match i.checked_sub(self.first.len()) {
            None => self.first.get(i),
            Some(j) => self.second.get(j),
        }
    }
}

/// One thread's plan as the functions below read it (kept in its [`Cursor`]).
#[derive(Clone, Copy)]
struct View {
    /// All threads' waits; the cursor follows its own from `first_wait`.
    waits: Halves<Wait>,
    first_wait: u32,
    /// Own events some thread waits for, increasing.
    sources: &'static [u64],
    /// All threads' runs of failed compare-and-swaps; the cursor follows its own from
    /// `first_run`.
    runs: Halves<Run>,
    first_run: u32,
    end: Option<u64>,
}

/// Events `first` to `first + count - 1` of a thread are compare-and-swaps that failed, finding
/// `value` (a `failed` line). In the trace's order, in one table for all threads (two when two
/// threads read the trace), each linked to the thread's next, as [`Wait`]s are.
#[derive(Clone, Copy)]
struct Run {
    first: u64,
    count: u64,
    value: i32,
    /// The index of the thread's next run, or [`NO_WAIT`] (while the plan is built: the
    /// thread).
    next: u32,
}

impl Run {
    /// The first event after the run.
    fn end(&self) -> u64 {
        self.first + self.count
    }
}

/// One thread's progress word, and what an OS thread waiting for it sleeps on.
#[derive(Default)]
struct Progress {
    done: AtomicU64,
    /// Bumped at every publication: the futex word of sleeping waiters.
    bell: AtomicU32,
    sleepers: AtomicU32,
}

/// Every thread's waits and sources in one table each (the waits in the trace's order, the
/// sources thread after thread; a trace of many short threads would otherwise take two
/// growing allocations per thread).
struct Plan {
    threads: Vec<ThreadPlan>,
    waits: (Box<[Wait]>, Box<[Wait]>),
    sources: Box<[u64]>,
    runs: (Box<[Run]>, Box<[Run]>),
    progress: Box<[Progress]>,
}

static PLAN: OnceLock<Plan> = OnceLock::new();
static ON: AtomicBool = AtomicBool::new(false);
/// Under green threads, the scheduler's park on a word (a [`ParkHook`]), or 0: a waiting green
/// thread parks on the progress word's bell and its worker runs others (the one it waits for
/// may be queued there).
static PARK_HOOK: AtomicUsize = AtomicUsize::new(0);
/// The scheduler's wake of the green threads parked on a bell (a [`WakeHook`]), or 0.
static WAKE_HOOK: AtomicUsize = AtomicUsize::new(0);

/// Parks the running green thread while `bell` holds `expected` (returns at once if it does
/// not). Returns true when the park was left to the thread-library stub (the call runs on the
/// worker's handler stack), which repeats the call in `phase`: the caller returns at once.
pub type ParkHook = fn(bell: &AtomicU32, expected: u32, phase: u32) -> bool;
/// Wakes the green threads parked on `bell`.
pub type WakeHook = fn(bell: &AtomicU32);

/// Whether relaxed replay is on.
#[inline]
pub fn on() -> bool {
    ON.load(Relaxed)
}

/// Registers the green scheduler's park and wake (a waiting green thread parks, on its own
/// stack or through the library stub).
pub fn set_green_hooks(park: ParkHook, wake: WakeHook) {
    WAKE_HOOK.store(wake as usize, Relaxed);
    PARK_HOOK.store(park as usize, Relaxed);
}

/// The plan of a trace, built from its `event` lines as they are read
/// ([`trace::parse_into`](super::trace::parse_into)); decisions are dropped.
#[derive(Default)]
pub struct Builder {
    /// The waits of the lines this builder read, then those of the builder of the lines
    /// after them ([`Builder::append`]), in the trace's order; `next` holds the waiting thread
    /// until [`Builder::start`] links them.
    waits: Vec<Wait>,
    later: Vec<Wait>,
    /// The `failed` lines read, in the trace's order, then those of the next builder; `next`
    /// holds the thread until [`Builder::start`] links them.
    runs: Vec<Run>,
    later_runs: Vec<Run>,
    /// Threads named so far.
    threads: usize,
}

impl Builder {
    /// Takes the plan of the lines after those this builder read (`trace::parse_split`).
    pub fn append(&mut self, next: Builder) {
        self.threads = self.threads.max(next.threads);
        self.later = next.waits;
        self.later_runs = next.runs;
    }

    /// Turns relaxed replay on with this plan; `ends` are the trace's `end` lines.
    pub fn start(self, ends: &[(u32, u64)]) {
        let n = ends
            .iter()
            .map(|&(t, _)| t as usize + 1)
            .fold(self.threads, usize::max);
        if self.waits.len() + self.later.len() >= NO_WAIT as usize {
            fail(
                "stackrt: STACKRT_SCHED: the trace has more than 4 billion waits",
                super::THREAD_FAILURE_EXIT_STATUS,
            );
        }
        let mut first = self.waits.into_boxed_slice();
        let mut second = self.later.into_boxed_slice();
        // Each thread's waits linked in its own order (the trace's lines of one thread are),
        // and each thread's sources counted.
        let first_wait = link(&mut first, &mut second, n, |w| &mut w.next);
        let split = first.len();
        let mut sources_at = vec![0usize; n + 1];
        for w in first.iter().chain(second.iter()) {
            sources_at[w.u as usize + 1] += 1;
        }
        for k in 0..n {
            sources_at[k + 1] += sources_at[k];
        }
        let mut sources = vec![0u64; split + second.len()];
        let mut sn = sources_at.clone();
        for w in first.iter().chain(second.iter()) {
            sources[sn[w.u as usize]] = w.m;
            sn[w.u as usize] += 1;
        }
        // Each thread's runs linked in its own order, as its waits are (in place: a trace of a
        // spinning program has as many runs as waits, and a copy sorted by thread took longer
        // than reading them).
        let mut first_runs = self.runs.into_boxed_slice();
        let mut second_runs = self.later_runs.into_boxed_slice();
        let first_run = link(&mut first_runs, &mut second_runs, n, |r| &mut r.next);
        let mut threads: Vec<ThreadPlan> = Vec::with_capacity(n);
        let mut kept = 0;
        for k in 0..n {
            // A thread's sources come nearly sorted (lines of the same waiter are in order);
            // duplicates go, and the rest moves down over them.
            let own = &mut sources[sources_at[k]..sources_at[k + 1]];
            if !own.is_sorted() {
                own.sort_unstable();
            }
            let start = kept;
            for i in sources_at[k]..sources_at[k + 1] {
                let m = sources[i];
                if kept == start || sources[kept - 1] != m {
                    sources[kept] = m;
                    kept += 1;
                }
            }
            threads.push(ThreadPlan {
                first_wait: first_wait[k],
                sources: start..kept,
                first_run: first_run[k],
                end: None,
            });
        }
        sources.truncate(kept);
        for &(t, k) in ends {
            threads[t as usize].end = Some(k);
        }
        let progress = (0..n).map(|_| Progress::default()).collect();
        let _ = PLAN.set(Plan {
            threads,
            waits: (first, second),
            sources: sources.into_boxed_slice(),
            runs: (first_runs, second_runs),
            progress,
        });
        CPUS.store(crate::base::os::cpus(), Relaxed);
        ON.store(true, Relaxed);
        super::take_full_path();
    }
}

impl Sink for Builder {
    fn decision(&mut self, _: i32) {}

    fn keeps_decisions(&self) -> bool {
        false
    }

    fn failed(&mut self, thread: u32, first: u64, count: u64, value: i32) {
        self.runs.push(Run {
            first,
            count,
            value,
            next: thread,
        });
        self.threads = self.threads.max(thread as usize + 1);
    }

    fn event(&mut self, thread: u32, seq: u64, after: &[(u32, u64)]) {
        for &(u, m) in after {
            self.waits.push(Wait {
                e: seq,
                m,
                u,
                next: thread,
            });
            self.threads = self.threads.max(thread.max(u) as usize + 1);
        }
    }
}

/// Links each thread's entries (waits or runs) of `first` then `second` in their order: the
/// word `next` returns holds the entry's thread on entry, and the index of the thread's next
/// entry (or [`NO_WAIT`]) on return. Returns each of the `n` threads' first entry.
fn link<T>(first: &mut [T], second: &mut [T], n: usize, next: fn(&mut T) -> &mut u32) -> Vec<u32> {
    let mut head = vec![NO_WAIT; n];
    let mut tail = vec![NO_WAIT; n];
    let split = first.len();
    for i in 0..split + second.len() {
        let e = if i < split {
            &mut first[i]
        } else {
            &mut second[i - split]
        };
        let t = core::mem::replace(next(e), NO_WAIT) as usize;
        let prev = core::mem::replace(&mut tail[t], i as u32);
        match prev as usize {
            _ if prev == NO_WAIT => head[t] = i as u32,
            p if p < split => *next(&mut first[p]) = i as u32,
            p => *next(&mut second[p - split]) = i as u32,
        }
    }
    head
}

/// Builds the plan of `trace` and turns relaxed replay on (a trace built in memory; a file's
/// is read into a [`Builder`] directly).
#[cfg(test)]
pub fn start(trace: &Trace) {
    let mut b = Builder::default();
    for e in &trace.events {
        b.event(e.thread, e.seq, trace.after_of(e));
    }
    b.start(&trace.header.ends);
}

/// One thread's place in its plan. Only the thread itself uses it.
pub struct Cursor {
    id: u32,
    /// Next entry of the waits (its index), of `sources`, of the runs (its index).
    wait: Cell<u32>,
    source: Cell<usize>,
    run: Cell<u32>,
    /// The last event a failed run's value was given to ([`failed_value`]).
    served: Cell<u64>,
    /// The first event that needs [`begin`]'s attention.
    next: Cell<u64>,
    /// The same, runs of failed swaps left out: up to it a thread's failed swaps need nothing
    /// but their recorded values ([`quiet_failed`]).
    other: Cell<u64>,
    /// The thread's plan, once there is one (looked up once: every wait and publication
    /// reads it).
    view: core::cell::OnceCell<(&'static Plan, View)>,
}

fn plan_of(id: u32) -> Option<(&'static Plan, View)> {
    let p = PLAN.get()?;
    p.threads.get(id as usize).map(|t| {
        (
            p,
            View {
                waits: Halves {
                    first: &p.waits.0,
                    second: &p.waits.1,
                },
                first_wait: t.first_wait,
                sources: &p.sources[t.sources.clone()],
                runs: Halves {
                    first: &p.runs.0,
                    second: &p.runs.1,
                },
                first_run: t.first_run,
                end: t.end,
            },
        )
    })
}

impl Cursor {
    /// The cursor of thread number `id`, before its first event.
    pub fn new(id: u32) -> Cursor {
        let c = Cursor {
            id,
            wait: Cell::new(NO_WAIT),
            source: Cell::new(0),
            run: Cell::new(NO_WAIT),
            served: Cell::new(0),
            next: Cell::new(u64::MAX),
            other: Cell::new(u64::MAX),
            view: core::cell::OnceCell::new(),
        };
        c.renew();
        c
    }

    /// The plan and this thread's part of it.
    #[inline]
    fn plan(&self) -> Option<(&'static Plan, &View)> {
        if let Some((p, v)) = self.view.get() {
            return Some((p, v));
        }
        let v = plan_of(self.id)?;
        self.wait.set(v.1.first_wait);
        self.run.set(v.1.first_run);
        let (p, v) = self.view.get_or_init(|| v);
        Some((p, v))
    }

    fn renew(&self) {
        let Some((_, t)) = self.plan() else {
            return;
        };
        let w = t.waits.get(self.wait.get()).map_or(u64::MAX, |w| w.e);
        let s = t
            .sources
            .get(self.source.get())
            .map_or(u64::MAX, |&s| s + 1);
        let e = t.end.map_or(u64::MAX, |e| e.saturating_add(1));
        let r = t.runs.get(self.run.get()).map_or(u64::MAX, |r| r.first);
        let other = w.min(s).min(e);
        self.other.set(other);
        self.next.set(other.min(r));
    }

    /// The run of failed swaps event `n` is in, if any; runs before `n` are passed.
    fn run_at(&self, t: &View, n: u64) -> Option<Run> {
        let mut i = self.run.get();
        while let Some(r) = t.runs.get(i).filter(|r| r.end() <= n) {
            i = r.next;
        }
        self.run.set(i);
        t.runs.get(i).filter(|r| r.first <= n).copied()
    }

    /// Whether event `n` needs [`begin`] (the common case is no).
    #[inline]
    pub fn needs(&self, n: u64) -> bool {
        n >= self.next.get()
    }
}

fn diverged(msg: &str) -> ! {
    fail(
        &format!("stackrt: relaxed replay diverged: {msg}"),
        FATAL_EXIT_STATUS,
    )
}

/// The thread reached its event `n`: everything before it is done (published if some thread
/// waits for it). The waits of `n` are left to [`wait`].
pub fn begin(c: &Cursor, n: u64) {
    let Some((p, t)) = c.plan() else {
        return;
    };
    if t.end.is_some_and(|e| n > e) {
        diverged(&format!(
            "thread {} makes more than the trace's {} events",
            c.id,
            t.end.unwrap_or(0)
        ));
    }
    publish(c, p, t, n - 1);
    c.run_at(t, n);
    c.renew();
}

/// Event `n`, a compare-and-swap expecting `old`, is in the failed run `r`: the value the
/// recorded one found (the run leaves the trace if that is `old`: the swap would succeed).
fn serve(c: &Cursor, r: Run, n: u64, old: i32) -> i32 {
    if r.value == old {
        diverged(&format!(
            "thread {}'s compare-and-swap, its event {n}, expects {old}, which the recorded one found: it failed there",
            c.id
        ));
    }
    c.served.set(n);
    r.value
}

/// Event `n` is a compare-and-swap expecting `old`: the value the recorded one found if it
/// failed (the swap is not made), or `None`.
pub fn failed_value(c: &Cursor, n: u64, old: i32) -> Option<i32> {
    if !c.needs(n) {
        return None;
    }
    let (_, t) = c.plan()?;
    let r = c.run_at(t, n)?;
    Some(serve(c, r, n, old))
}

/// Event `n` is a compare-and-swap expecting `old` that the trace has nothing at but, maybe,
/// a run of failed swaps, and nothing at `n + 1` but that: the value the recorded one found if
/// `n` is in such a run (the swap is not made; nothing to wait for before it, nothing to
/// publish after it, as [`begin`], [`wait_in`] and [`done`] would find), else `None`, with
/// nothing done but passing the runs that ended before `n`. A spinning thread's retries: a
/// `random:1` recording of Fibonacci (1,000 rounds) has 135,000 of them.
pub fn quiet_failed(c: &Cursor, n: u64, old: i32) -> Option<i32> {
    if n.saturating_add(1) >= c.other.get() {
        return None;
    }
    let (_, t) = c.plan()?;
    let before = c.run.get();
    let r = c.run_at(t, n);
    if c.run.get() != before {
        c.renew();
    }
    let r = r?;
    Some(serve(c, r, n, old))
}

/// Event `n` is a load or store (or a thread-library call other than a compare-and-swap, once
/// done): the trace must not say it was a failed compare-and-swap.
pub fn not_failed(c: &Cursor, n: u64) {
    let Some((_, t)) = c.plan() else {
        return;
    };
    if c.served.get() != n && c.run_at(t, n).is_some() {
        diverged(&format!(
            "thread {}'s event {n} is no compare-and-swap; in the trace it is one that failed",
            c.id
        ));
    }
}

fn publish(c: &Cursor, p: &Plan, t: &View, done: u64) {
    let mut i = c.source.get();
    if i < t.sources.len() && t.sources[i] <= done {
        while i < t.sources.len() && t.sources[i] <= done {
            i += 1;
        }
        c.source.set(i);
        announce(&p.progress[c.id as usize], done);
    }
}

/// Publishes `v` and wakes the threads sleeping for it (if any: one or two loads otherwise).
fn announce(w: &Progress, v: u64) {
    w.done.store(v, SeqCst);
    // SeqCst: the green park's waiter count is read after it (`green::futex`).
    w.bell.fetch_add(1, SeqCst);
    if w.sleepers.load(SeqCst) != 0 {
        crate::base::os::futex_wake(&w.bell, i32::MAX);
    }
    let h = WAKE_HOOK.load(Relaxed);
    if h != 0 {
        // SAFETY: the word holds a `WakeHook` stored by `set_green_hooks`.
        unsafe { core::mem::transmute::<usize, WakeHook>(h)(&w.bell) };
    }
}

/// Everything up to and including event `n` is done (the end of a thread-library call).
pub fn done(c: &Cursor, n: u64) {
    // Nothing to publish when no source is at `n` or before (`next` is at most a source + 1):
    // the common end of a thread-library call, a spin-wait's failed swap among them.
    if !c.needs(n.saturating_add(1)) {
        return;
    }
    not_failed(c, n);
    if let Some((p, t)) = c.plan() {
        publish(c, p, t, n);
        c.renew();
    }
}

/// The thread ended after `n` events.
pub fn ended(c: &Cursor, n: u64) {
    let Some((p, t)) = c.plan() else {
        return;
    };
    if let Some(e) = t.end {
        if e != n {
            diverged(&format!(
                "thread {} ended after {n} events, in the trace after {e}",
                c.id
            ));
        }
    }
    announce(&p.progress[c.id as usize], n | ENDED);
}

/// The progress word event `n` still waits for, if any.
fn blocker(c: &Cursor, n: u64) -> Option<&'static Progress> {
    let (p, t) = c.plan()?;
    let mut i = c.wait.get();
    while let Some(&Wait { e, m, u, next }) = t.waits.get(i) {
        if e != n {
            break;
        }
        let w = &p.progress[u as usize];
        let v = w.done.load(Acquire);
        if v & !ENDED < m {
            if v & ENDED != 0 {
                diverged(&format!(
                    "event {n} of thread {} waits for event {m} of thread {u}, which ended after {}",
                    c.id,
                    v & !ENDED
                ));
            }
            c.wait.set(i);
            return Some(w);
        }
        i = next;
    }
    // Past its waits at `n` (if it had any): the next event of interest moves.
    if i != c.wait.get() {
        c.wait.set(i);
        c.renew();
    }
    None
}

/// Whether event `n` (the thread's next) would wait now: some event it comes after has not
/// happened yet.
pub fn waits_now(c: &Cursor, n: u64) -> bool {
    c.needs(n) && blocker(c, n).is_some()
}

/// The CPUs online, read when replay starts.
static CPUS: AtomicUsize = AtomicUsize::new(1);

/// How long a waiting OS thread spins before it sleeps. Long while every thread has a CPU: the
/// awaited one is running, and a futex handoff costs more than the wait (IRS's Fibonacci, two
/// threads: 6x the time with 16 spins). Short when threads outnumber the CPUs: the awaited one
/// may not be running, and the spin takes a CPU it needs (Philosophers, 16 threads on 2 CPUs:
/// 0.8x the time with 16 spins instead of 256). One thread more than the CPUs still counts as
/// "every thread has a CPU": the common shape is a parent asleep in a join.
fn spins() -> u32 {
    if super::shadow::running() <= CPUS.load(Relaxed) + 1 {
        256
    } else {
        16
    }
}

/// Waits until every event that event `n` waits for has happened: a green thread parks on the
/// awaited thread's bell until its next publication; an OS thread spins a little and then
/// sleeps on the same bell (a futex).
pub fn wait(c: &Cursor, n: u64) {
    // Compiled code's accesses call this on the thread's own stack: nothing is deferred.
    let _ = wait_in(c, n, 0);
}

/// [`wait`] for a thread-library call: true when a green thread's park was left to the library
/// stub, which repeats the call in `phase` (the caller returns at once).
pub fn wait_in(c: &Cursor, n: u64, phase: u32) -> bool {
    // No line waits before event `n` when `n` is before the next event of interest (waits are
    // taken in order, each at its own event).
    if !c.needs(n) {
        return false;
    }
    let mut round = 0u32;
    while let Some(w) = blocker(c, n) {
        round = round.saturating_add(1);
        let park = PARK_HOOK.load(Relaxed);
        if park != 0 {
            // The bell is read before the progress word is checked again, so a publication
            // in between changes it and the park returns at once.
            let bell = w.bell.load(SeqCst);
            if blocker(c, n).is_some_and(|w2| core::ptr::eq(w, w2)) {
                // SAFETY: the word holds a `ParkHook` stored by `set_green_hooks`.
                let park = unsafe { core::mem::transmute::<usize, ParkHook>(park) };
                if park(&w.bell, bell, phase) {
                    return true;
                }
            }
        } else if round < spins() {
            // No sched_yield: on a busy machine it hands the CPU to other processes for a
            // whole time slice, where the futex below wakes when the awaited thread publishes.
            core::hint::spin_loop();
        } else {
            // The publisher bumps the bell after its store and wakes if it sees a sleeper; the
            // sleeper counts itself before it checks again (both SeqCst), so one of the two sees
            // the other. The timeout is a second line of defence.
            let bell = w.bell.load(Acquire);
            w.sleepers.fetch_add(1, SeqCst);
            if blocker(c, n).is_some_and(|w2| core::ptr::eq(w, w2)) {
                crate::base::os::futex_wait(&w.bell, bell, 10);
            }
            w.sleepers.fetch_sub(1, SeqCst);
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::race::trace::Trace;

    /// Three OS threads of 300 events each, with waits drawn from a recorded total order (a
    /// pseudo-random interleaving): every event must come after each event it waits for, as
    /// seen by a global clock read after the wait and before the thread's next event publishes.
    /// The plan is global, so this is the module's only test that starts one.
    #[test]
    fn every_wait_holds_and_nothing_deadlocks_on_real_threads() {
        const THREADS: u32 = 3;
        const EVENTS: u64 = 300;
        // The recorded order: a deterministic shuffle of the threads' events.
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = [1u64; THREADS as usize];
        let mut order = Vec::new();
        while order.len() < (THREADS as u64 * EVENTS) as usize {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let t = (seed % THREADS as u64) as usize;
            if next[t] <= EVENTS {
                order.push((t as u32, next[t]));
                next[t] += 1;
            }
        }
        // Every 7th event waits for the latest earlier event of each other thread.
        let mut latest = [0u64; THREADS as usize];
        let mut trace = Trace {
            header: crate::race::trace::Header {
                version: 2,
                ends: (0..THREADS).map(|t| (t, EVENTS)).collect(),
                ..Default::default()
            },
            ..Trace::default()
        };
        for (i, &(t, n)) in order.iter().enumerate() {
            if i % 7 == 0 {
                let after: Vec<(u32, u64)> = (0..THREADS)
                    .filter(|&u| u != t && latest[u as usize] > 0)
                    .map(|u| (u, latest[u as usize]))
                    .collect();
                if !after.is_empty() {
                    trace.push_event(t, n, &after);
                }
            }
            latest[t as usize] = n;
        }
        start(&trace);
        static CLOCK: AtomicU64 = AtomicU64::new(0);
        let stamps: Vec<Vec<u64>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..THREADS)
                .map(|t| {
                    s.spawn(move || {
                        let c = Cursor::new(t);
                        let mut mine = vec![0u64];
                        for n in 1..=EVENTS {
                            if c.needs(n) {
                                begin(&c, n);
                                wait(&c, n);
                            }
                            mine.push(CLOCK.fetch_add(1, SeqCst));
                        }
                        ended(&c, EVENTS);
                        mine
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for e in &trace.events {
            for &(u, m) in trace.after_of(e) {
                assert!(
                    stamps[u as usize][m as usize] < stamps[e.thread as usize][e.seq as usize],
                    "event {} of thread {} ran before event {m} of thread {u}",
                    e.seq,
                    e.thread
                );
            }
        }
        assert!(trace.events.len() > 50, "{} waits only", trace.events.len());
    }
}
