//! Synchronisation of green threads: the chunk pool's raw spin lock ([`RawSpin`], which one OS
//! thread may lock and another unlock: a parking thread's lock is released by its worker after
//! the switch, see [`super::sched::park`]), and the green mutex behind `sthread_mutex_*` under `--threads
//! green`: a waiting thread parks and its worker runs another; unlock hands the mutex to the
//! longest waiter (FIFO), so a program's schedule does not depend on who wins a race.

use core::cell::UnsafeCell;
use std::collections::VecDeque;

use super::sched::{self, Green};
pub use crate::base::spin::RawSpin;

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

    /// Locks the mutex, parking the running green thread while another holds it. When the
    /// park is left to the library stub (`Switched::Deferred`), the thread owns the mutex once
    /// it runs again with `phase` (`unlock` hands it over).
    pub fn lock(&self, phase: u32) -> sched::Switched {
        self.spin.lock();
        // SAFETY: under `spin`.
        let st = unsafe { &mut *self.state.get() };
        if !st.locked {
            st.locked = true;
            self.spin.unlock();
            return sched::Switched::Done;
        }
        st.waiters.push_back(sched::current());
        // SAFETY: `spin` is held and the thread is queued as a waiter, which `unlock` wakes
        // once, handing it the mutex.
        unsafe { sched::park(&self.spin, phase) }
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
