//! The `sthread_*` thread library called by C-- programs (thesis appendix A.1), on pthreads.
//!
//! A thread is named by a small integer handle, not by its `pthread_t` (which does not fit a
//! C-- `int` on x86-64): the lowest free handle, starting at 1, from a growable table behind a
//! mutex. A handle is freed only when the thread is joined, so it never names two live threads.
//!
//! Failures the program cannot handle (`pthread_create` failing, e.g. with `EAGAIN` when the
//! address space is full) print one line on stderr and exit with status 1 through `exit`, so
//! output printed so far is flushed.

use core::ffi::{c_int, c_void};
use core::num::NonZeroUsize;
use std::sync::Mutex;

use crate::base::abi::THREAD_FAILURE_EXIT_STATUS;
use crate::base::diag::{errno_text, fail};
use crate::base::os::page_size;

pub mod entry;
pub mod handles;

pub use handles::{HandleTable, JoinError};

/// `pthread_t` is an integer on linux-gnu; the table stores it by value.
/// With each thread its race detector state (`--race`; null otherwise), which its join frees.
static THREADS: Mutex<HandleTable<(libc::pthread_t, usize)>> = Mutex::new(HandleTable::new());

fn table() -> std::sync::MutexGuard<'static, HandleTable<(libc::pthread_t, usize)>> {
    // A panic while holding the lock aborts (panic = "abort"), so poisoning cannot be observed
    // in a program; tests recover the guard.
    THREADS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Under `--threads green`: the records of the green threads (`crate::green::sched::Green`).
/// The lock is never held across a context switch.
static GREEN_THREADS: Mutex<HandleTable<NonZeroUsize>> = Mutex::new(HandleTable::new());

fn green_table() -> std::sync::MutexGuard<'static, HandleTable<NonZeroUsize>> {
    GREEN_THREADS.lock().unwrap_or_else(|e| e.into_inner())
}

/// A green thread's record as a handle table's value (one word per slot).
fn record(g: usize) -> NonZeroUsize {
    NonZeroUsize::new(g).expect("a green thread record is never at address 0")
}

use crate::green::sched as green;
use crate::race::QuietCas;

/// The phase in which the library stub repeats a call that yielded while relaxed replay held
/// it back ([`green_relaxed_wait`]).
const RELAXED_PHASE: u32 = 3;

/// Relaxed replay (`crate::race::relaxed`) under green threads: parks until the recorded
/// order lets the call begun by `crate::race::sync_begin` go on. `true`: the park was left to
/// the library stub, which repeats the call in [`RELAXED_PHASE`]; the caller returns at once.
fn green_relaxed_wait() -> bool {
    crate::race::sync_wait_green(RELAXED_PHASE)
}

/// The stack size to ask pthreads for when a C-- program asks for `requested` bytes (> 0):
/// rounded up to whole pages, and at least the system's minimum thread stack.
pub fn thread_stack_size(requested: c_int, page: usize, min: usize) -> usize {
    let requested = requested.max(0) as usize;
    let rounded = requested.div_ceil(page) * page;
    rounded.max(min)
}

/// Creates a thread running the C-- function `fp` (`void *f(void *)`, as an `int`) with `arg`,
/// with a stack of `fpStackSize` bytes (see [`thread_stack_size`]) or the default size when
/// `fpStackSize <= 0`. Returns the thread's handle (>= 1).
///
/// # Safety
/// `fp` must be the address of a C-- function `void *f(void *)` of the linked program.
#[no_mangle]
#[allow(non_snake_case)]
pub unsafe extern "C" fn sthread_create(arg: *mut c_void, fp: c_int, fpStackSize: c_int) -> c_int {
    if fp == 0 {
        fail(
            "sthread_create: the thread entry function is 0",
            THREAD_FAILURE_EXIT_STATUS,
        );
    }
    // A C-- program names a function by its C entry; the thread starts the C-- function itself.
    // SAFETY: the caller guarantees `fp` is a function of the program.
    let fp = unsafe { crate::base::program::c_entry_target(fp as u32 as usize) } as u32 as c_int;
    if green::enabled() {
        // Phases of a call the library stub repeats after a switch (`green::libcall::lib_entry`): 1,
        // the thread was created and the deterministic mode's decision taken.
        let (phase, _kept) = green::libcall::lib_entry();
        if phase == 1 {
            return green::libcall::lib_value() as c_int;
        }
        if phase == 0 {
            crate::race::sync_begin();
        }
        if green_relaxed_wait() {
            return 0;
        }
        let mut threads = green_table();
        let handle = threads.next_handle();
        let race = crate::race::fork(handle);
        let g = green::create(handle, fp as u32 as usize, arg as usize, fpStackSize, race);
        let inserted = threads.insert(record(g as usize));
        debug_assert_eq!(inserted, handle);
        drop(threads);
        crate::race::sync_done();
        green::libcall::set_lib_value(handle as usize);
        let _ = green::det_point(1);
        return handle;
    }

    // What the thread asked for: its stack in the region under `mtss`.
    let requested = fpStackSize;
    // Under `lookahead` C-- code runs on stack chunks: the native stack stays small.
    #[allow(non_snake_case)]
    let fpStackSize = crate::mech::lookahead::thread_stack_request(
        crate::base::program::program_abi(),
        fpStackSize,
    );
    let mut attr = core::mem::MaybeUninit::<libc::pthread_attr_t>::uninit();
    // SAFETY: pthread_attr_init initializes the attribute object it is given.
    let rc = unsafe { libc::pthread_attr_init(attr.as_mut_ptr()) };
    if rc != 0 {
        fail(
            &format!("sthread_create: pthread_attr_init: {}", errno_text(rc)),
            1,
        );
    }
    if fpStackSize > 0 {
        let size = thread_stack_size(
            fpStackSize,
            page_size(),
            crate::base::os::min_thread_stack(),
        );
        // SAFETY: `attr` was initialized above.
        let rc = unsafe { libc::pthread_attr_setstacksize(attr.as_mut_ptr(), size) };
        if rc != 0 {
            fail(
                &format!(
                    "sthread_create: cannot use a stack of {size} bytes: {}",
                    errno_text(rc)
                ),
                THREAD_FAILURE_EXIT_STATUS,
            );
        }
    }

    crate::race::sync_begin();
    crate::race::sync_wait();
    // The lock is held across pthread_create so the handle is recorded before anyone (the new
    // thread included) can join it; the new thread only takes the lock in its own sthread_* calls.
    let mut threads = table();
    let handle = threads.next_handle();
    let race = crate::race::fork(handle);
    // SAFETY: the caller guarantees `fp` is a C-- thread entry function.
    let (routine, routine_arg) = unsafe { entry::thread_start(fp, arg, race, requested, handle) };
    let mut tid: libc::pthread_t = 0;
    // SAFETY: `attr` is initialized; `routine` is a valid start routine for `routine_arg`.
    let rc = unsafe { libc::pthread_create(&mut tid, attr.as_ptr(), routine, routine_arg) };
    // SAFETY: `attr` is initialized and no longer needed.
    unsafe { libc::pthread_attr_destroy(attr.as_mut_ptr()) };
    if rc != 0 {
        drop(threads);
        fail(
            &format!(
                "sthread_create: cannot create thread {handle}: {}",
                errno_text(rc)
            ),
            THREAD_FAILURE_EXIT_STATUS,
        );
    }
    let inserted = threads.insert((tid, race as usize));
    debug_assert_eq!(inserted, handle);
    drop(threads);
    crate::race::sync_done();
    handle
}

/// Waits for the thread `handle` to end and stores its result in `*retval` (if `retval` is not
/// NULL). Returns 0, or an errno value: `ESRCH` for a handle that names no thread (never
/// created or already joined), `EINVAL` if another join waits for it, or pthread_join's error.
///
/// # Safety
/// `retval` must be NULL or valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn sthread_join(handle: c_int, retval: *mut *mut c_void) -> c_int {
    if green::enabled() {
        // Phases of a call the library stub repeats after a switch (`green::libcall::lib_entry`): 1,
        // after the deterministic mode's decision; 2, the thread waited for ended.
        let (phase, _kept) = green::libcall::lib_entry();
        let (g, r, race) = if phase == 2 {
            let g = green::libcall::lib_value();
            // SAFETY: the thread this call waited for (kept in phase 1), which ended; its
            // record lives until `join_result` frees it.
            let race = unsafe { (*(g as *const green::Green)).race() };
            // SAFETY: as above.
            (
                g,
                unsafe { green::join_result(g as *const green::Green) },
                race,
            )
        } else {
            if phase == 0 {
                crate::race::sync_begin();
            }
            if phase != 1 && green_relaxed_wait() {
                return 0;
            }
            if phase == 0 && green::det_point(1) == green::Switched::Deferred {
                return 0;
            }
            let g = match green_table().begin_join(handle) {
                Ok(g) => g.get(),
                Err(e) => return e.errno(),
            };
            if g == green::current() as *const green::Green as usize {
                green_table().end_join(handle, record(g), false);
                return libc::EDEADLK;
            }
            green::libcall::set_lib_value(g);
            // SAFETY: `g` is a live green thread record (freed only by the join below).
            let race = unsafe { (*(g as *const green::Green)).race() };
            // SAFETY: `g` is a green thread record from `create`, joined only here (the table
            // marks it as being joined), and not the calling thread.
            match unsafe { green::join(g as *const green::Green, 2) } {
                Ok(r) => (g, r, race),
                Err(_) => return 0,
            }
        };
        // SAFETY: the thread ended (joined above) and its state is joined once, here.
        unsafe { crate::race::join(race) };
        green_table().end_join(handle, record(g), true);
        crate::race::sync_done();
        if !retval.is_null() {
            // SAFETY: `retval` is writable per the contract.
            unsafe { *retval = r as *mut c_void };
        }
        return 0;
    }
    crate::race::sync_begin();
    crate::race::sync_wait();
    let (tid, race) = match table().begin_join(handle) {
        Ok(t) => t,
        Err(e) => return e.errno(),
    };
    // Under `mtss` the joining thread's stack may lend pages while it waits.
    let parked = crate::mech::mtss::park();
    // SAFETY: `tid` is a joinable thread created by sthread_create, joined only here (the
    // table marks it as being joined); `retval` is NULL or writable per the contract.
    let rc = unsafe { libc::pthread_join(tid, retval) };
    crate::mech::mtss::unpark(parked);
    if rc == 0 {
        // SAFETY: the thread ended (pthread_join succeeded); its state is joined once, here.
        unsafe { crate::race::join(race as *mut crate::race::RaceThread) };
    }
    table().end_join(handle, (tid, race), rc == 0);
    crate::race::sync_done();
    rc
}

/// Ends the calling thread with result `val` (what `sthread_join` of it returns).
///
/// # Safety
/// The calling thread's frames must need no cleanup (C-- frames never do): they are abandoned.
///
/// `C-unwind`: under OS threads `pthread_exit` unwinds the thread (a forced unwind) through
/// this very frame, which an `extern "C"` frame would turn into an abort when the runtime is
/// built with `panic = "unwind"`.
#[no_mangle]
pub unsafe extern "C-unwind" fn sthread_exit(val: *mut c_void) -> ! {
    if green::enabled() {
        // The scheduler ends the thread's race state once it switched away.
        green::exit_current(val as usize)
    }
    crate::race::thread_end();
    // SAFETY: ends the calling thread; pthreads unwinds it (C-- frames have no cleanups).
    unsafe { libc::pthread_exit(val) }
}

/// Lets other threads run: `sched_yield` under OS threads; under green threads the calling
/// thread goes to the back of its worker's run queue. Under relaxed replay only where the
/// thread's next event would wait for another thread: elsewhere a yield changes no value and
/// no order there (a replayed failed swap returns the recorded value; a plain read comes after
/// the write it saw and before the next) and only costs a switch per recorded failed try
/// (Philosophers' `random:1` replay made 118,000 switches where the plain run makes 3,200),
/// while before an event that would wait, the yield lets the awaited thread run on this worker
/// as the program meant, cheaper than parking (Fibonacci's `pct:1:3` replay parked at every
/// turn, 49,983 times against 2,526, and took about 1.2x the time when every yield was left
/// out).
#[no_mangle]
pub extern "C" fn sthread_yield() {
    let replay_skips = || crate::race::relaxed::on() && !crate::race::relaxed_next_waits();
    if green::enabled() {
        // Phase 1 of a call the library stub repeats (`green::libcall::lib_entry`): it yielded.
        // The entry comes first: a repeated call must complete the switch it deferred.
        let (phase, kept) = green::libcall::lib_entry();
        if phase == 0 && replay_skips() {
            return;
        }
        if phase == 0 && green::yield_now(1) == green::Switched::Deferred {
            // The stub's repetition of the call restores the errno kept here; writing it now,
            // on the way to the switch, would be wasted.
            core::mem::forget(kept);
        }
    } else if !replay_skips() {
        // SAFETY: sched_yield has no preconditions.
        unsafe { libc::sched_yield() };
    }
}

/// The preemption point of green threads' loops (`crate::base::abi::PREEMPT_POINT`): compiled
/// loop heads call it while the program's poll flag is set; the running thread yields if its
/// worker was asked to preempt it, or the deterministic mode decides. Never called under OS
/// threads (their programs have no polls); does nothing there.
#[no_mangle]
pub extern "C" fn sthread_preempt_point() {
    if green::enabled() {
        // Phase 1 of a call the library stub repeats: it yielded.
        let (phase, _kept) = green::libcall::lib_entry();
        if phase == 0 && green::poll_point(1) == green::Switched::Deferred {
            return;
        }
        // Switched (or not): the poll's saved registers into this OS thread's save area.
        green::polls::restore_poll_regs();
    }
}

/// Creates a mutex (a `pthread_mutex_t` on the heap, or a green mutex under green threads; it
/// never moves).
#[no_mangle]
pub extern "C" fn sthread_mutex_create() -> *mut c_void {
    if green::enabled() {
        return Box::into_raw(Box::new(crate::green::sync::GreenMutex::new())).cast();
    }
    let m = Box::into_raw(Box::new(libc::PTHREAD_MUTEX_INITIALIZER));
    // SAFETY: `m` points to a fresh, statically initialized mutex; init with default
    // attributes is then also valid.
    unsafe { libc::pthread_mutex_init(m, core::ptr::null()) };
    m.cast()
}

fn check_mutex(m: *mut c_void, op: &str) -> *mut libc::pthread_mutex_t {
    if m.is_null() {
        fail(
            &format!("{op}: the mutex is NULL"),
            THREAD_FAILURE_EXIT_STATUS,
        );
    }
    m.cast()
}

/// Destroys a mutex made by [`sthread_mutex_create`] and frees it.
///
/// # Safety
/// `m` must come from `sthread_mutex_create`, be unlocked, and not be used afterwards.
#[no_mangle]
pub unsafe extern "C" fn sthread_mutex_destroy(m: *mut c_void) {
    if green::enabled() {
        let m = check_mutex(m, "sthread_mutex_destroy").cast::<crate::green::sync::GreenMutex>();
        // SAFETY: per the contract `m` comes from sthread_mutex_create (a boxed GreenMutex).
        if unsafe { (*m).is_busy() } {
            fail(
                "sthread_mutex_destroy: the mutex is locked",
                THREAD_FAILURE_EXIT_STATUS,
            );
        }
        crate::race::forget(m as usize);
        // SAFETY: as above, unlocked, and not used again.
        drop(unsafe { Box::from_raw(m) });
        return;
    }
    let m = check_mutex(m, "sthread_mutex_destroy");
    crate::race::forget(m as usize);
    // SAFETY: per the contract `m` is an unlocked mutex from `Box::into_raw` in
    // sthread_mutex_create, not used again.
    unsafe {
        libc::pthread_mutex_destroy(m);
        drop(Box::from_raw(m));
    }
}

/// Locks a mutex made by [`sthread_mutex_create`].
///
/// # Safety
/// `m` must come from `sthread_mutex_create` and not be destroyed.
#[no_mangle]
pub unsafe extern "C" fn sthread_mutex_lock(m: *mut c_void) {
    if green::enabled() {
        let m = check_mutex(m, "sthread_mutex_lock").cast::<crate::green::sync::GreenMutex>();
        // Phases of a call the library stub repeats (`green::libcall::lib_entry`): 1, after the
        // deterministic mode's decision; 2, it parked and was handed the mutex.
        let (phase, _kept) = green::libcall::lib_entry();
        if phase == 2 {
            // Parked, and handed the mutex by its unlocker.
            crate::race::acquire(m as usize);
            return;
        }
        if phase == 0 {
            crate::race::sync_begin();
        }
        if phase != 1 && green_relaxed_wait() {
            return;
        }
        if phase == 0 && green::det_point(1) == green::Switched::Deferred {
            return;
        }
        // SAFETY: per the contract `m` is a live green mutex from sthread_mutex_create.
        if unsafe { (*m).lock(2) } == green::Switched::Done {
            crate::race::acquire(m as usize);
        }
        return;
    }
    let m = check_mutex(m, "sthread_mutex_lock");
    crate::race::sync_begin();
    crate::race::sync_wait();
    // SAFETY: `m` is a live initialized mutex per the contract.
    if unsafe { libc::pthread_mutex_trylock(m) } != 0 {
        // Blocked: under `mtss` the thread's stack may lend pages meanwhile.
        let parked = crate::mech::mtss::park();
        // SAFETY: as above.
        unsafe { libc::pthread_mutex_lock(m) };
        crate::mech::mtss::unpark(parked);
    }
    crate::race::acquire(m as usize);
}

/// Unlocks a mutex locked by the calling thread.
///
/// # Safety
/// `m` must come from `sthread_mutex_create`, not be destroyed, and be locked by this thread.
#[no_mangle]
pub unsafe extern "C" fn sthread_mutex_unlock(m: *mut c_void) {
    if green::enabled() {
        let m = check_mutex(m, "sthread_mutex_unlock").cast::<crate::green::sync::GreenMutex>();
        // Phase 1 of a call the library stub repeats (`green::libcall::lib_entry`): it unlocked and
        // the deterministic mode decided.
        let (phase, _kept) = green::libcall::lib_entry();
        if phase == 1 {
            return;
        }
        crate::race::release(m as usize);
        // SAFETY: per the contract `m` is a live green mutex from sthread_mutex_create.
        unsafe { (*m).unlock() };
        let _ = green::det_point(1);
        return;
    }
    let m = check_mutex(m, "sthread_mutex_unlock");
    crate::race::release(m as usize);
    // SAFETY: `m` is a live initialized mutex per the contract.
    unsafe { libc::pthread_mutex_unlock(m) };
}

/// Atomically replaces the `int` at `p` by `new` if it holds `old`, and returns the value it
/// held before: the swap happened if and only if that is `old` (as gcc's
/// `__sync_val_compare_and_swap`). Sequentially consistent. Under `--race` a synchronising
/// access (an acquire and a release of a clock kept for `p`, see `crate::race::cas`); under the
/// deterministic scheduler a decision point before the swap; an event of schedule traces.
///
/// # Safety
/// `p` must point to a live, 4-byte aligned `int` that other threads access only through
/// `sthread_cas` or in accesses the program orders with it.
#[no_mangle]
pub unsafe extern "C" fn sthread_cas(p: *mut c_int, old: c_int, new: c_int) -> c_int {
    if p.is_null() {
        fail(
            "sthread_cas: the pointer is NULL",
            THREAD_FAILURE_EXIT_STATUS,
        );
    }
    if !p.is_aligned() {
        fail(
            &format!("sthread_cas: the pointer {p:p} is not aligned to 4 bytes"),
            THREAD_FAILURE_EXIT_STATUS,
        );
    }
    if green::enabled() {
        // Phases of a call the library stub repeats (`green::libcall::lib_entry`): 1, after the
        // deterministic mode's decision (the swap is made then).
        let (phase, _kept) = green::libcall::lib_entry();
        // Relaxed replay may hold nothing here and wait for nothing after (no deterministic
        // mode: `STACKRT_SCHED` is one or the other). Its flag is read here first, so a plain
        // run's swap makes no call for it; one return for both ways keeps this function's
        // shape (a second one made its thread-local reads calls: 1.2x a plain Philosophers).
        let quiet = if phase == 0 && crate::race::relaxed::on() {
            // SAFETY: per the contract `p` is a live aligned int accessed atomically.
            unsafe { quiet_cas(p, old, new) }
        } else {
            None
        };
        let was = match quiet {
            Some(v) => v,
            None => {
                if phase == 0 {
                    crate::race::sync_begin();
                }
                if phase != 1 && green_relaxed_wait() {
                    return 0;
                }
                if phase == 0 && green::det_point(1) == green::Switched::Deferred {
                    return 0;
                }
                // SAFETY: per the contract `p` is a live aligned int accessed atomically.
                let was = unsafe { crate::race::cas(p, old, new) };
                crate::race::sync_done();
                was
            }
        };
        return was;
    }
    let quiet = if crate::race::relaxed::on() {
        // SAFETY: as above.
        unsafe { quiet_cas(p, old, new) }
    } else {
        None
    };
    quiet.unwrap_or_else(|| {
        crate::race::sync_begin();
        crate::race::sync_wait();
        // SAFETY: as above.
        let was = unsafe { crate::race::cas(p, old, new) };
        crate::race::sync_done();
        was
    })
}

/// Relaxed replay's short way through `sthread_cas` ([`crate::race::relaxed_quiet_cas`]): the
/// value to return, or None for the full path.
///
/// # Safety
/// As [`sthread_cas`]'s.
#[inline(always)]
unsafe fn quiet_cas(p: *mut c_int, old: c_int, new: c_int) -> Option<c_int> {
    match crate::race::relaxed_quiet_cas(old) {
        // SAFETY: the caller's contract.
        QuietCas::Swap => Some(unsafe { crate::race::swap_word(p, old, new) }),
        QuietCas::Found(v) => Some(v),
        QuietCas::Full => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_start_at_one_and_count_up() {
        let mut t = HandleTable::new();
        assert_eq!(t.next_handle(), 1);
        assert_eq!(t.insert(10u64), 1);
        assert_eq!(t.insert(20), 2);
        assert_eq!(t.insert(30), 3);
        assert_eq!(t.live(), 3);
    }

    #[test]
    fn handle_is_reused_only_after_join() {
        let mut t = HandleTable::new();
        let a = t.insert(10u64);
        let b = t.insert(20);
        assert_eq!(t.begin_join(a), Ok(10));
        // Being joined: not free yet.
        assert_eq!(t.next_handle(), 3);
        t.end_join(a, 10, true);
        assert_eq!(t.next_handle(), a);
        assert_eq!(t.insert(30), a);
        assert_eq!(t.begin_join(a), Ok(30));
        t.end_join(a, 30, true);
        assert_eq!(t.begin_join(b), Ok(20));
        t.end_join(b, 20, true);
        assert_eq!(t.live(), 0);
        assert_eq!(t.insert(40), 1);
    }

    #[test]
    fn lowest_free_handle_wins() {
        let mut t = HandleTable::new();
        for v in 0..5u64 {
            t.insert(v);
        }
        for h in [4, 2] {
            let v = t.begin_join(h).unwrap();
            t.end_join(h, v, true);
        }
        assert_eq!(t.insert(100), 2);
        assert_eq!(t.insert(101), 4);
        assert_eq!(t.insert(102), 6);
    }

    #[test]
    fn unknown_and_double_joins_are_refused() {
        let mut t = HandleTable::new();
        let h = t.insert(7u64);
        for bad in [0, -1, 2, 1000, c_int::MIN, c_int::MAX] {
            assert_eq!(t.begin_join(bad), Err(JoinError::Unknown), "handle {bad}");
        }
        assert_eq!(t.begin_join(h), Ok(7));
        assert_eq!(t.begin_join(h), Err(JoinError::AlreadyJoining));
        t.end_join(h, 7, true);
        assert_eq!(t.begin_join(h), Err(JoinError::Unknown));
        assert_eq!(JoinError::Unknown.errno(), libc::ESRCH);
        assert_ne!(JoinError::AlreadyJoining.errno(), 0);
    }

    #[test]
    fn failed_join_keeps_the_thread() {
        let mut t = HandleTable::new();
        let h = t.insert(7u64);
        assert_eq!(t.begin_join(h), Ok(7));
        t.end_join(h, 7, false);
        assert_eq!(t.begin_join(h), Ok(7));
    }

    #[test]
    fn table_grows_past_any_initial_capacity() {
        let mut t = HandleTable::new();
        for i in 0..5000u64 {
            assert_eq!(t.insert(i), i as c_int + 1);
        }
        assert_eq!(t.begin_join(4321), Ok(4320));
        assert_eq!(t.live(), 5000);
    }

    #[test]
    fn concurrent_inserts_get_distinct_handles() {
        let table = std::sync::Arc::new(Mutex::new(HandleTable::new()));
        let workers: Vec<_> = (0..4u64)
            .map(|w| {
                let table = table.clone();
                std::thread::spawn(move || {
                    (0..250u64)
                        .map(|i| table.lock().unwrap().insert(w * 1000 + i))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut all: Vec<c_int> = workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect();
        all.sort();
        assert_eq!(all, (1..=1000).collect::<Vec<_>>());
    }

    #[test]
    fn stack_size_rounds_to_pages_and_respects_the_minimum() {
        assert_eq!(thread_stack_size(1, 4096, 16384), 16384);
        assert_eq!(thread_stack_size(16384, 4096, 16384), 16384);
        assert_eq!(thread_stack_size(100_000, 4096, 16384), 102_400);
        assert_eq!(thread_stack_size(1 << 20, 4096, 16384), 1 << 20);
        assert_eq!(
            thread_stack_size(c_int::MAX, 4096, 16384),
            (c_int::MAX as usize + 1)
        );
    }

    #[test]
    fn errno_text_is_the_c_library_text() {
        assert_eq!(errno_text(libc::EAGAIN), "Resource temporarily unavailable");
    }

    #[test]
    fn mutexes_lock_and_unlock() {
        let m = sthread_mutex_create();
        let counter = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let shared = m as usize;
        let workers: Vec<_> = (0..4)
            .map(|_| {
                let counter = counter.clone();
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        // SAFETY: `shared` is a live mutex from sthread_mutex_create.
                        unsafe { sthread_mutex_lock(shared as *mut c_void) };
                        // A non-atomic read-modify-write made safe only by the mutex.
                        let v = counter.load(std::sync::atomic::Ordering::Relaxed);
                        std::thread::yield_now();
                        counter.store(v + 1, std::sync::atomic::Ordering::Relaxed);
                        // SAFETY: locked by this thread just above.
                        unsafe { sthread_mutex_unlock(shared as *mut c_void) };
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        assert_eq!(counter.load(std::sync::atomic::Ordering::Relaxed), 4000);
        // SAFETY: unlocked, not used afterwards.
        unsafe { sthread_mutex_destroy(m) };
    }

    #[test]
    fn cas_swaps_only_the_expected_value_and_returns_the_old_one() {
        let mut word: c_int = 5;
        // SAFETY: `word` is a live aligned int of this thread only.
        assert_eq!(unsafe { sthread_cas(&mut word, 4, 9) }, 5);
        assert_eq!(word, 5);
        // SAFETY: as above.
        assert_eq!(unsafe { sthread_cas(&mut word, 5, 9) }, 5);
        assert_eq!(word, 9);
    }

    #[test]
    fn cas_spin_lock_protects_a_counter() {
        let lock = std::sync::Arc::new(std::sync::atomic::AtomicI32::new(0));
        let counter = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let workers: Vec<_> = (0..4)
            .map(|_| {
                let (lock, counter) = (lock.clone(), counter.clone());
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        // SAFETY: the lock word lives as long as the Arc, accessed atomically.
                        while unsafe { sthread_cas(lock.as_ptr(), 0, 1) } != 0 {
                            std::thread::yield_now();
                        }
                        let v = counter.load(std::sync::atomic::Ordering::Relaxed);
                        counter.store(v + 1, std::sync::atomic::Ordering::Relaxed);
                        // SAFETY: as above; held by this thread.
                        assert_eq!(unsafe { sthread_cas(lock.as_ptr(), 1, 0) }, 1);
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        assert_eq!(counter.load(std::sync::atomic::Ordering::Relaxed), 4000);
    }

    #[test]
    fn joining_unknown_handles_returns_esrch() {
        // SAFETY: NULL retval is allowed.
        assert_eq!(
            unsafe { sthread_join(987_654, core::ptr::null_mut()) },
            libc::ESRCH
        );
        // SAFETY: as above.
        assert_eq!(
            unsafe { sthread_join(0, core::ptr::null_mut()) },
            libc::ESRCH
        );
    }
}
