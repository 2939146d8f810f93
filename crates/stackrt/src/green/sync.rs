//! Synchronisation of green threads: a raw spin lock that one OS thread may lock and another
//! unlock (a parking thread's lock is released by its worker after the switch, see
//! [`super::sched::park`]), and the green mutex behind `sthread_mutex_*` under `--threads
//! green`: a waiting thread parks and its worker runs another; unlock hands the mutex to the
//! longest waiter (FIFO), so a program's schedule does not depend on who wins a race.

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, Ordering};
use std::collections::VecDeque;

use super::sched::{self, Green};

/// A test-and-test-and-set spin lock without a guard object. Held for a few instructions, or
/// across a switch by a parking thread until its worker releases it.
pub struct RawSpin {
    locked: AtomicBool,
}

impl RawSpin {
    pub const fn new() -> Self {
        RawSpin {
            locked: AtomicBool::new(false),
        }
    }

    pub fn lock(&self) {
        let mut spins = 0u32;
        while self
            .locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            while self.locked.load(Ordering::Relaxed) {
                spins += 1;
                if spins < 64 {
                    core::hint::spin_loop();
                } else {
                    // SAFETY: sched_yield has no preconditions.
                    unsafe { libc::sched_yield() };
                }
            }
        }
    }

    /// Releases the lock; the caller (or the worker of the thread that parked holding it)
    /// holds it.
    pub fn unlock(&self) {
        self.locked.store(false, Ordering::Release);
    }
}

impl Default for RawSpin {
    fn default() -> Self {
        Self::new()
    }
}

struct MutexState {
    locked: bool,
    waiters: VecDeque<*const Green>,
}

/// The mutex of `sthread_mutex_create` under green threads.
pub struct GreenMutex {
    spin: RawSpin,
    state: UnsafeCell<MutexState>,
}

// SAFETY: `state` is accessed only under `spin`.
unsafe impl Sync for GreenMutex {}
// SAFETY: as above; the waiters are records of live parked threads.
unsafe impl Send for GreenMutex {}

impl GreenMutex {
    pub fn new() -> Self {
        GreenMutex {
            spin: RawSpin::new(),
            state: UnsafeCell::new(MutexState {
                locked: false,
                waiters: VecDeque::new(),
            }),
        }
    }

    /// Locks the mutex, parking the running green thread while another holds it.
    pub fn lock(&self) {
        self.spin.lock();
        // SAFETY: under `spin`.
        let st = unsafe { &mut *self.state.get() };
        if !st.locked {
            st.locked = true;
            self.spin.unlock();
            return;
        }
        st.waiters.push_back(sched::current());
        // SAFETY: `spin` is held and the thread is queued as a waiter, which `unlock` wakes
        // once, handing it the mutex.
        unsafe { sched::park(&self.spin) };
    }

    /// Unlocks the mutex: the longest waiter, if any, owns it now and runs again.
    pub fn unlock(&self) {
        self.spin.lock();
        // SAFETY: under `spin`.
        let st = unsafe { &mut *self.state.get() };
        let next = st.waiters.pop_front();
        if next.is_none() {
            st.locked = false;
        }
        self.spin.unlock();
        if let Some(g) = next {
            // SAFETY: `g` parked under `spin` (released only after its switch) and was queued
            // once; it is woken once, here.
            unsafe { sched::wake(g) };
        }
    }

    /// Whether the mutex is locked or has waiters (destroying it then is an error).
    pub fn is_busy(&self) -> bool {
        self.spin.lock();
        // SAFETY: under `spin`.
        let busy = unsafe {
            let st = &*self.state.get();
            st.locked || !st.waiters.is_empty()
        };
        self.spin.unlock();
        busy
    }
}

impl Default for GreenMutex {
    fn default() -> Self {
        Self::new()
    }
}
