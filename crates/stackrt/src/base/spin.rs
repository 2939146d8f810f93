//! Spin locks: the runtime's locks that never sleep in the kernel and never allocate, so the
//! overflow path and the MMU fault handler may take them, and one thread may release a lock
//! another took (a parking green thread's lock is released by its worker).

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, Ordering};

/// A test-and-test-and-set spin lock without a value or a guard object; `sched_yield` after a
/// few spins so a preempted holder gets the CPU on an oversubscribed machine. One thread may
/// lock it and another unlock it (a parking green thread's lock is released by its worker,
/// `crate::green::sched::park`).
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
                    // SAFETY: sched_yield has no preconditions (and is a plain system call).
                    unsafe { libc::sched_yield() };
                }
            }
        }
    }

    /// Releases the lock, which the caller (or the thread it acts for) holds.
    pub fn unlock(&self) {
        self.locked.store(false, Ordering::Release);
    }
}

impl Default for RawSpin {
    fn default() -> Self {
        Self::new()
    }
}

/// A [`RawSpin`] around a value.
pub struct SpinLock<T> {
    lock: RawSpin,
    value: UnsafeCell<T>,
}

// SAFETY: access to `value` is serialised by `lock` (acquire on lock, release on unlock).
unsafe impl<T: Send> Sync for SpinLock<T> {}
// SAFETY: moving the lock moves the value; no thread affinity.
unsafe impl<T: Send> Send for SpinLock<T> {}

impl<T> SpinLock<T> {
    pub const fn new(value: T) -> Self {
        SpinLock {
            lock: RawSpin::new(),
            value: UnsafeCell::new(value),
        }
    }

    /// Runs `f` with exclusive access to the value. `f` must not block or call back into code
    /// that takes this lock.
    pub fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        self.lock.lock();
        // SAFETY: the lock is held, so this is the only reference to the value until unlock.
        let r = f(unsafe { &mut *self.value.get() });
        self.lock.unlock();
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spin_lock_excludes() {
        let lock = SpinLock::new((0u64, 0u64));
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..20_000 {
                        lock.with(|v| {
                            assert_eq!(v.0, v.1, "two holders at once");
                            v.0 += 1;
                            core::hint::spin_loop();
                            v.1 += 1;
                        });
                    }
                });
            }
        });
        assert_eq!(lock.with(|v| *v), (80_000, 80_000));
    }
}
