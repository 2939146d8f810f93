//! Blocking C calls hand the worker on: the monitor sees a worker whose green thread has been
//! blocked in the kernel (a C call: `usleep`, `read` on a pipe, `pthread_cond_wait` in a C
//! library) for a poll interval and starts a spare worker OS thread in its place, as Go's
//! `sysmon` retakes the processor of a goroutine stuck in a system call (`retake`, `handoffp`).
//!
//! # Roles
//! The scheduler has `N` workers (`STACKRT_WORKERS`, default the CPUs) and up to
//! [`spare_bound`] more slots, whose OS threads start only when needed. A slot is
//! - **active**: it runs green threads; the scheduler keeps `N` of them;
//! - **handed off**: its thread was seen blocked; a spare took its place. Its OS thread goes on
//!   with the blocked call and, when the call returns, with the same green thread until that
//!   thread next switches out. Back in its scheduler loop ([`Sched::check_role`]) the slot
//!   becomes active again if fewer than `N` are, else it gives its queued threads to an active
//!   worker and becomes
//! - **spare**: its OS thread sleeps until the monitor needs it again.
//!
//! The monitor reads the worker's switch counter (`Worker::tick`, odd while a green thread
//! runs) and, when it has not changed since the last poll, the counts of C calls the
//! emission stage's code keeps (`crate::base::ccalls`: two thread-local `inc`s around each C
//! call, about 1.5 ns): a thread still inside the same C call is handed off, whether the call
//! blocks or computes. Otherwise (the native back end's code does not count) it reads the OS
//! thread's state in `/proc/self/task/TID/stat` (`R`: running; anything else: blocked in the
//! kernel), so every mechanism and back end gets the hand-off of blocking calls.
//!
//! # Timing
//! The monitor polls every [`POLL`] (1 ms), and every [`FAST_POLL`] (20 µs, doubling back to
//! 1 ms) after a hand-off; a thread blocked for more than one poll interval is handed off. Go's
//! `sysmon` polls every 20 µs to 10 ms and retakes after 20 µs. A millisecond costs the
//! monitor about 0.3% of a CPU; it reads `/proc` only for active workers whose thread did not
//! switch for a whole interval (and less often while such a thread keeps running:
//! [`MAX_BACKOFF`]).
//!
//! A long C computation that never blocks (state `R`) is not handed off: the monitor cannot
//! tell it from C-- code without marking every C call. The deterministic mode
//! (`STACKRT_SCHED`) has no monitor: its single worker runs everything, a blocking call
//! included, so a seed replays exactly.

use core::sync::atomic::{AtomicU8, Ordering::*};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use super::{
    fail, handler_stacks::handler_stack, preempt, worker_thread::worker_os_thread, GreenPtr, Sched,
    Worker, WORKER_OS_STACK,
};

/// The monitor's longest poll interval, while no worker was handed off for a while.
pub const POLL: Duration = Duration::from_millis(1);

/// The shortest poll interval, right after a hand-off: one blocking call often comes with
/// others (a thousand threads that each sleep hand off a thousand workers, one after the
/// other), as Go's `sysmon` polls every 20 µs while it finds work. Every poll without a
/// hand-off doubles the interval, back to [`POLL`] after six.
pub const FAST_POLL: Duration = Duration::from_micros(20);

/// Polls between two reads of `/proc` for a worker whose thread keeps running without
/// switching, at most (doubling from 1).
const MAX_BACKOFF: u32 = 16;

/// Spare worker slots by default: OS threads that may be blocked in C calls at once beyond
/// the `N` workers (Go allows 10,000 OS threads in all). Each started one holds its OS stack
/// (256 KiB reserved), a handler stack under the chunked mechanisms (1 MiB reserved) and its
/// caches; pages count only once touched. On i686 the address space is the limit: 1,024
/// started spares reserve about 1.3 GiB of the 4 GiB (they start only as calls block, and one
/// whose stacks cannot be mapped is not started: the program goes on without it). With 256 on
/// i686, a thousand `lookahead` threads sleeping ten times 10 ms in `usleep` took 1.18x Go's
/// time; with 1,024, 0.67x (2-core AMD EPYC, 2026-11-26).
pub const DEFAULT_SPARES: usize = 1024;

/// The default on i686 under the fixed-stack mechanisms, whose every thread blocked in a call
/// holds its whole stack (8 MiB unless it asked for less): 256 such threads already hold 2 GiB
/// of the address space, and 1,024 spares let a thousand sleepers run out of it.
#[cfg(target_pointer_width = "32")]
pub const DEFAULT_SPARES_FIXED_STACKS: usize = 256;
#[cfg(target_pointer_width = "64")]
pub const DEFAULT_SPARES_FIXED_STACKS: usize = DEFAULT_SPARES;

/// Roles of a worker slot (see the module docs).
pub const ACTIVE: u8 = 0;
pub const HANDED: u8 = 1;
pub const SPARE: u8 = 2;
/// A slot whose OS thread has not started.
pub const UNSTARTED: u8 = 3;

/// The hand-off state of one worker slot.
pub struct Slot {
    pub role: AtomicU8,
    /// A spare sleeps here until its role is [`ACTIVE`] again.
    wait: Mutex<()>,
    wake: Condvar,
}

impl Slot {
    pub fn new(active: bool) -> Self {
        Slot {
            role: AtomicU8::new(if active { ACTIVE } else { UNSTARTED }),
            wait: Mutex::new(()),
            wake: Condvar::new(),
        }
    }
}

/// `STACKRT_SPARE_WORKERS`: how many spare worker slots the scheduler has (0: no hand-off);
/// `fixed_stacks`: the program's threads run on fixed stacks.
pub fn spare_bound(fixed_stacks: bool) -> usize {
    match std::env::var("STACKRT_SPARE_WORKERS") {
        Ok(v) => match v.trim().parse::<usize>() {
            Ok(n) if n <= 10_000 => n,
            _ => fail(&format!(
                "stackrt: STACKRT_SPARE_WORKERS={v:?} is not a number of spare workers (0 to 10000)"
            )),
        },
        Err(_) if fixed_stacks => DEFAULT_SPARES_FIXED_STACKS,
        Err(_) => DEFAULT_SPARES,
    }
}

impl Sched {
    /// The monitor thread: hands off workers blocked in C calls every [`POLL`], and under
    /// `lookahead` with a time slice asks workers that ran one thread for a whole slice to
    /// preempt it ([`preempt`]).
    pub(super) fn monitor(&self, slice: Option<Duration>) -> ! {
        let slots = self.workers.len();
        let mut seen_poll = vec![0usize; slots];
        let mut seen_call = vec![0u32; slots];
        let mut backoff = vec![(1u32, 0u32); slots];
        let mut seen_slice = vec![0usize; slots];
        let mut last_slice = Instant::now();
        // A slice shorter than the poll interval (`STACKRT_TIMESLICE=200us`) sets the pace.
        let longest = slice.map_or(POLL, |s| s.min(POLL));
        let mut poll = longest;
        loop {
            std::thread::sleep(poll);
            poll = (poll * 2).min(longest);
            let started = self.started.load(Acquire);
            if self.spares > 0 {
                for (i, w) in self.workers[..started].iter().enumerate() {
                    let tick = w.tick.load(Relaxed);
                    // Inside the same C call as at the last round (the compiled code's counts,
                    // `crate::base::ccalls`): computing or blocked, it is handed off.
                    let (started, finished) = crate::base::ccalls::read(w.ccalls.load(Relaxed));
                    let same_call = started != finished && started == seen_call[i];
                    seen_call[i] = started;
                    let (every, waited) = &mut backoff[i];
                    if tick % 2 == 0 || tick != seen_poll[i] {
                        seen_poll[i] = tick;
                        *every = 1;
                        *waited = 0;
                        continue;
                    }
                    if same_call && w.slot.role.load(Acquire) == ACTIVE {
                        *waited = 0;
                        self.hand_off(w);
                        poll = FAST_POLL;
                        continue;
                    }
                    *waited += 1;
                    if *waited < *every || w.slot.role.load(Acquire) != ACTIVE {
                        continue;
                    }
                    *waited = 0;
                    if preempt::os_thread_running(w.tid.load(Relaxed)) {
                        *every = (*every * 2).min(MAX_BACKOFF);
                    } else {
                        self.hand_off(w);
                        poll = FAST_POLL;
                    }
                }
            }
            if let Some(slice) = slice {
                if last_slice.elapsed() >= slice {
                    last_slice = Instant::now();
                    if !crate::chunk::global::under_memory_pressure() {
                        self.preempt_round(&mut seen_slice[..started]);
                    }
                }
            }
        }
    }

    /// Asks every active worker that has run the same thread since the last round, and is
    /// running (not blocked in a system call), to preempt it: at its next loop head, and under
    /// `lookahead` also at its next checkpoint.
    fn preempt_round(&self, seen: &mut [usize]) {
        for (w, last) in self.workers.iter().zip(seen.iter_mut()) {
            let tick = w.tick.load(Relaxed);
            if tick % 2 == 1
                && tick == *last
                && w.slot.role.load(Acquire) == ACTIVE
                && preempt::os_thread_running(w.tid.load(Relaxed))
            {
                self.request_poll(w);
                if self.signals {
                    preempt::signal(w.os_thread.load(Relaxed) as libc::pthread_t);
                }
            }
            *last = tick;
        }
    }

    /// `w`'s thread is blocked in the kernel, or inside one C call for a whole round: a spare
    /// takes its place.
    fn hand_off(&self, w: &Worker) {
        if w.slot
            .role
            .compare_exchange(ACTIVE, HANDED, AcqRel, Acquire)
            .is_err()
        {
            return;
        }
        self.sync_abandoned(w);
        self.handed.fetch_add(1, SeqCst);
        self.active.fetch_sub(1, SeqCst);
        if self.count_stats {
            self.stats.handoffs.fetch_add(1, Relaxed);
        }
        self.activate_spare();
    }

    /// Makes one more worker active: a sleeping spare, else a slot whose OS thread starts
    /// now; none when every slot is in use (the queued threads then wait, as without spares).
    fn activate_spare(&self) {
        let started = self.started.load(Acquire);
        for w in &self.workers[..started] {
            if w.slot
                .role
                .compare_exchange(SPARE, ACTIVE, AcqRel, Acquire)
                .is_ok()
            {
                self.active.fetch_add(1, SeqCst);
                self.sync_abandoned(w);
                let _guard = w.slot.wait.lock().unwrap_or_else(|e| e.into_inner());
                w.slot.wake.notify_one();
                return;
            }
        }
        if started == self.workers.len() {
            return;
        }
        // Only the monitor starts slots, so `started` is the next one.
        let w = &self.workers[started];
        w.slot.role.store(ACTIVE, Release);
        self.active.fetch_add(1, SeqCst);
        self.queues.set_live(started + 1);
        self.started.store(started + 1, Release);
        let i = started;
        // The handler stack first: a spare that cannot have one (i686's address space is
        // full) is not started, as one the system refuses an OS thread.
        let handler = if self.handler_stacks {
            handler_stack().ok()
        } else {
            None
        };
        let spawned = if self.handler_stacks && handler.is_none() {
            None
        } else {
            std::thread::Builder::new()
                .name(format!("stackrt-worker-{i}"))
                .stack_size(WORKER_OS_STACK)
                .spawn(move || worker_os_thread(i, handler))
                .ok()
        };
        if spawned.is_none() {
            // Out of OS threads or address space: the slot stays unusable, the program goes
            // on without it.
            w.slot.role.store(UNSTARTED, Release);
            self.active.fetch_sub(1, SeqCst);
            return;
        }
        if self.count_stats {
            self.stats
                .peak_os_workers
                .fetch_max(started as u64 + 1, Relaxed);
        }
    }

    /// Run by a worker between threads: a handed-off worker whose call has returned becomes
    /// active again if fewer than `N` are, else gives its queue away and sleeps as a spare
    /// until the monitor needs it; an active worker beyond `N` (its call returned before the
    /// spare that replaced it started) becomes a spare too. Returns at once otherwise: one
    /// load of each counter.
    pub(super) fn check_role(&self, w: &Worker) {
        if w.slot.role.load(Acquire) == ACTIVE {
            let active = self.active.load(SeqCst);
            if active <= self.n_workers
                || self
                    .active
                    .compare_exchange(active, active - 1, SeqCst, SeqCst)
                    .is_err()
            {
                return;
            }
            w.slot.role.store(SPARE, Release);
            self.sync_abandoned(w);
            self.give_queue_away(w);
        } else {
            loop {
                let active = self.active.load(SeqCst);
                if active >= self.n_workers {
                    break;
                }
                if self
                    .active
                    .compare_exchange(active, active + 1, SeqCst, SeqCst)
                    .is_ok()
                {
                    w.slot.role.store(ACTIVE, Release);
                    self.sync_abandoned(w);
                    self.handed.fetch_sub(1, SeqCst);
                    return;
                }
            }
            w.slot.role.store(SPARE, Release);
            self.sync_abandoned(w);
            self.give_queue_away(w);
            self.handed.fetch_sub(1, SeqCst);
        }
        let mut guard = w.slot.wait.lock().unwrap_or_else(|e| e.into_inner());
        while w.slot.role.load(Acquire) != ACTIVE {
            guard = w.slot.wake.wait(guard).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Marks `w`'s queue abandoned while its slot is handed off or a spare (its worker takes
    /// nothing from it; `crate::green::queue`, "Abandoned queues"). Called after every change
    /// of the slot's role, by whoever made it: the mark written last is one its writer saw
    /// agree with the role after writing it, so two changes made at once by the monitor and
    /// the worker cannot leave the mark stale.
    fn sync_abandoned(&self, w: &Worker) {
        loop {
            let role = w.slot.role.load(SeqCst);
            self.queues
                .set_abandoned(w.index, role == HANDED || role == SPARE);
            if w.slot.role.load(SeqCst) == role {
                return;
            }
        }
    }

    /// Moves the threads queued on `w` (about to sleep as a spare) to an active worker's queue.
    fn give_queue_away(&self, w: &Worker) {
        let started = self.started.load(Acquire);
        let to = self.workers[..started]
            .iter()
            .position(|v| v.slot.role.load(Acquire) == ACTIVE);
        let Some(to) = to else {
            // Every worker is handed off or spare: the monitor will start one; its steal finds
            // the queue.
            return;
        };
        let mut moved = false;
        while let Some(GreenPtr(g)) = self.queues.pop_own(w.index) {
            self.queues.push_remote(to, GreenPtr(g));
            moved = true;
        }
        if moved {
            self.wake_idle();
        }
    }
}

/// The number of workers: `STACKRT_WORKERS`, else the number of online CPUs.
pub(super) fn worker_count() -> usize {
    if let Ok(v) = std::env::var("STACKRT_WORKERS") {
        match v.trim().parse::<usize>() {
            Ok(n) if (1..=1024).contains(&n) => return n,
            _ => crate::base::diag::fail(
                &format!("stackrt: STACKRT_WORKERS={v:?} is not a number of workers (1 to 1024)"),
                crate::base::abi::THREAD_FAILURE_EXIT_STATUS,
            ),
        }
    }
    crate::base::os::cpus()
}
