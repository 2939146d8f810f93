//! Free chunks: an intrusive LIFO list threaded through the headers' `link` word, used both as
//! a thread's private cache (no lock) and, behind a spin lock, as the pool shared by all
//! threads.
//!
//! Nothing here allocates. The shared pool's lock is held only for a constant-time push or pop
//! that makes no call and touches no probed stack, so a thread can never be interrupted by its
//! own stack-growth `SIGSEGV` while holding it (MMU mechanisms take chunks from the pool in
//! that handler): other holders always release it after a few instructions.

use core::cell::UnsafeCell;
use core::ptr;
use core::sync::atomic::{AtomicBool, Ordering};

use super::header::ChunkHeader;

/// A LIFO list of free chunks, linked through [`ChunkHeader::link`].
#[derive(Debug)]
pub struct FreeList {
    head: *mut ChunkHeader,
    len: usize,
}

impl FreeList {
    pub const fn new() -> Self {
        FreeList {
            head: ptr::null_mut(),
            len: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Pushes a free chunk.
    ///
    /// # Safety
    /// `h` is a chunk header owned by the caller (in no chain, list or mapping owner) whose
    /// memory stays mapped while it is in the list.
    pub unsafe fn push(&mut self, h: *mut ChunkHeader) {
        // SAFETY: the caller hands over an exclusively owned, mapped header.
        unsafe { (*h).link = self.head };
        self.head = h;
        self.len += 1;
    }

    /// Pops the most recently pushed chunk; its `link` is reset to null.
    pub fn pop(&mut self) -> Option<*mut ChunkHeader> {
        if self.head.is_null() {
            return None;
        }
        let h = self.head;
        // SAFETY: every header in the list was pushed under push()'s contract: mapped and
        // owned by the list.
        unsafe {
            self.head = (*h).link;
            (*h).link = ptr::null_mut();
        }
        self.len -= 1;
        Some(h)
    }

    /// The headers in pop order (for tests and invariant checks).
    pub fn iter(&self) -> impl Iterator<Item = *mut ChunkHeader> + '_ {
        let mut cur = self.head;
        core::iter::from_fn(move || {
            if cur.is_null() {
                return None;
            }
            let h = cur;
            // SAFETY: headers in the list are mapped (push() contract).
            cur = unsafe { (*h).link };
            Some(h)
        })
    }
}

impl Default for FreeList {
    fn default() -> Self {
        Self::new()
    }
}

/// A minimal test-and-test-and-set spin lock around a value; `sched_yield` after a few spins
/// so a preempted holder gets the CPU on an oversubscribed machine.
pub struct SpinLock<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: access to `value` is serialised by `locked` (acquire on lock, release on unlock).
unsafe impl<T: Send> Sync for SpinLock<T> {}
// SAFETY: moving the lock moves the value; no thread affinity.
unsafe impl<T: Send> Send for SpinLock<T> {}

impl<T> SpinLock<T> {
    pub const fn new(value: T) -> Self {
        SpinLock {
            locked: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    /// Runs `f` with exclusive access to the value. `f` must not block or call back into code
    /// that takes this lock.
    pub fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
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
                    // SAFETY: sched_yield has no preconditions (and is a plain system call).
                    unsafe { libc::sched_yield() };
                }
            }
        }
        // SAFETY: the lock is held, so this is the only reference to the value until unlock.
        let r = f(unsafe { &mut *self.value.get() });
        self.locked.store(false, Ordering::Release);
        r
    }
}

// SAFETY: the list is only reached through SpinLock, which serialises access; the raw pointers
// are free chunks owned by the list, not tied to a thread.
unsafe impl Send for FreeList {}
