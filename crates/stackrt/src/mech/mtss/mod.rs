//! Mechanism `mtss`, the runtime's side (ABI [`crate::base::abi::ABI_MTSS`]): multi-task stack
//! sharing (Middha, Simpson, Barua, CASES 2005). Every thread's own ("native") stack is carved
//! from one region reserved at start; a thread whose native stack overflows grows, a page at a
//! time, into the free space at the far end of another thread's stack. The compiled side
//! (entry checks, the overflow handler's call) is `cmm_codegen::emit::mech::mtss`; the region's
//! accounting is [`space`]; the assembly is `crate::mech::arch::*_mtss`.
//!
//! # The thread record
//! The thread register (`rbp`/`ebp`) points at the running thread's [`MtssThread`] while C--
//! code runs. Its first word is the *limit* the entry checks compare against, plus the
//! program's check bias (`__cmm_check_bias`, the compiler's module docs, "The check bias"):
//! the thread's overflow pointer while it runs on its native stack, the low end of the page it
//! runs on otherwise. Other threads write it (under the space's lock) when they take pages from its
//! native stack; only the owner reads the rest.
//!
//! # Overflow and return
//! A failed entry check calls `stackrt_mtss_overflow` (assembly), which switches to the OS
//! thread's handler stack and calls [`stackrt_mtss_grow`]: the pages come from [`space`]
//! (the donor with the fewest pages lent, holes first), the function's arguments and return
//! address are copied to the top of the pages, the copied return address becomes
//! `stackrt_mtss_return`, and the function goes on there. When the first frame of the pages
//! returns, the stub calls [`stackrt_mtss_shrink`], which gives the pages back (the donor's
//! overflow pointer recedes), restores the limit and tells the stub where to return.
//!
//! # Who may lend (the protocol that keeps a donor out of pages it gave away)
//! A thread lends pages of its native stack only while it cannot grow into them:
//! * while it is parked in the thread library (`sthread_join`, a contended
//!   `sthread_mutex_lock`): [`park`] publishes its *floor* under the space's lock, and
//!   [`unpark`] withdraws it under the same lock before the thread returns to C-- code, whose
//!   next entry check then reads the limit a lender raised;
//! * while it runs on pages of other threads: its native stack below the point where it left
//!   is untouched until its stack returns there, which [`stackrt_mtss_shrink`] does under the
//!   lock;
//! * under green threads, while it is parked (switched out to wait: [`green`]).
//!
//! The floor is the stack pointer where the thread stopped less the program's *lending
//! margin* (`__cmm_mtss_margin`, the compiler's largest pushes of a function plus the check's
//! slack): when the thread goes on, the functions it returns to may push that far below the
//! stack pointer they had, which their entry checks allowed against the limit of the moment,
//! not against pages lent while the thread waited.
//! * after it ended (its stack is retired: all of it may be lent, until a new thread's stack
//!   needs its space and nothing is lent from it any more; `space`'s module docs).
//!
//! A thread running on its native stack is never a donor: its stack pointer is not known here,
//! so a page taken below it could hold its live frames. The thread library's code never runs
//! on an MTSS stack (every C call goes to the handler stack; the exceptions, `--race`'s
//! detector entries and green threads' `sthread_exit`, never park), so the stack pointer at a
//! parking call is the lowest address the thread uses until the call returns.
//!
//! # Sizes
//! A thread's native stack is what `sthread_create` asks for (rounded up to pages), or
//! [`DEFAULT_THREAD_STACK`] when it asks for 0; `main`'s is `STACKRT_MTSS_MAIN_STACK`, else
//! the stack limit (`ulimit -s`), or [`UNLIMITED_MAIN_STACK`] when that is unlimited. The region is reserved once, at the first entry:
//! `STACKRT_MTSS_REGION` bytes, or [`DEFAULT_REGION`] (halved until the system grants it);
//! its pages cost memory only once touched. `STACKRT_STATS=1` prints its size, the page size,
//! the overflows and the most pages lent at once.
//!
//! When no thread has room for an overflow, the program stops with one line naming the thread
//! and the bytes it needed (status 70).

pub mod green;
pub mod space;

use core::cell::Cell;
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock};

use space::{Grant, Space, StackId};

use crate::base::diag::{fail, FATAL_EXIT_STATUS};

/// A word of the emitted conventions.
const P: usize = core::mem::size_of::<usize>();

/// A thread's native stack when `sthread_create` asks for 0 bytes: the size of an OS thread's
/// default stack, so programs written for fixed stacks run unchanged.
pub const DEFAULT_THREAD_STACK: usize = 8 << 20;

/// `main`'s native stack under `ulimit -s unlimited` (else it is the limit, as a fixed main
/// stack's; `STACKRT_MTSS_MAIN_STACK` overrides both): address space, not memory.
#[cfg(target_pointer_width = "64")]
pub const UNLIMITED_MAIN_STACK: usize = 4 << 30;
#[cfg(target_pointer_width = "32")]
pub const UNLIMITED_MAIN_STACK: usize = 256 << 20;

/// The region reserved at start (`STACKRT_MTSS_REGION`): address space, not memory.
#[cfg(target_pointer_width = "64")]
pub const DEFAULT_REGION: usize = 64 << 30;
#[cfg(target_pointer_width = "32")]
pub const DEFAULT_REGION: usize = 1 << 30;

/// The smallest region the start accepts when it halves the default.
const MIN_REGION: usize = 16 << 20;

/// The record the thread register points at (see the module docs). Words 0-3 are read by the
/// assembly at fixed offsets.
#[repr(C)]
pub struct MtssThread {
    /// Word 0: the limit of the entry checks, plus the check bias ([`Shared::bias`]).
    limit: AtomicUsize,
    /// Word 1: the native stack's top (the entry trampoline's first stack pointer).
    top: usize,
    /// Words 2 and 3: where the return stub goes on, written by [`stackrt_mtss_shrink`].
    ret_to: usize,
    ret_sp: usize,
    /// Words 4-6: an overflow waiting for room under green threads ([`green`]): the stack
    /// pointer at the overflow handler's call, the room and the argument bytes it was called
    /// with, for its retry.
    retry_sp: usize,
    retry_room: usize,
    retry_args: usize,
    /// Words 7-14: that waiting thread's context, in the green switch's format (its stack has
    /// no room for it), the saved stack pointer pointing into it.
    save: [usize; 8],
    /// The thread waits for room ([`green`]) and does not count as active meanwhile.
    waiting: bool,
    /// The native stack's name in the space.
    id: StackId,
    /// The thread's `sthread_*` handle (0: `main`), for messages.
    handle: i32,
    /// The pages the thread's stack runs on, innermost last.
    frames: Vec<PageFrame>,
    /// The record this OS thread ran before this one was entered (a C callback's nesting).
    outer: *mut MtssThread,
    /// A green thread's record ([`green`]): its stack is retired by the scheduler once the
    /// thread switched away for good, not by the entry trampoline.
    green: bool,
    /// Under green threads: the thread is parked and its floor published ([`green`]).
    floor_published: AtomicBool,
}

/// Bytes below a function's arguments that the overflow stub uses on the native stack (its
/// return address; 16 on both targets, as the entry checks' slack).
const STUB_WORDS: usize = 16;

/// Offsets of the words the assembly reads (`crate::mech::arch::*_mtss`).
pub const TOP_OFFSET: usize = P;
pub const RET_TO_OFFSET: usize = 2 * P;
pub const RET_SP_OFFSET: usize = 3 * P;
pub const RETRY_SP_OFFSET: usize = 4 * P;
pub const RETRY_ROOM_OFFSET: usize = 5 * P;
pub const RETRY_ARGS_OFFSET: usize = 6 * P;
/// One past the save area: the waiting thread's switch frame is pushed below it.
pub const SAVE_END_OFFSET: usize = 15 * P;
const _: () = {
    assert!(core::mem::offset_of!(MtssThread, retry_sp) == RETRY_SP_OFFSET);
    assert!(core::mem::offset_of!(MtssThread, retry_room) == RETRY_ROOM_OFFSET);
    assert!(core::mem::offset_of!(MtssThread, retry_args) == RETRY_ARGS_OFFSET);
    assert!(core::mem::offset_of!(MtssThread, save) + 8 * P == SAVE_END_OFFSET);
    assert!(core::mem::offset_of!(MtssThread, limit) == 0);
    assert!(core::mem::offset_of!(MtssThread, top) == TOP_OFFSET);
    assert!(core::mem::offset_of!(MtssThread, ret_to) == RET_TO_OFFSET);
    assert!(core::mem::offset_of!(MtssThread, ret_sp) == RET_SP_OFFSET);
};

/// One run of pages the thread's stack entered.
struct PageFrame {
    grant: Grant,
    /// The caller's stack pointer once the function that overflowed has returned (callee
    /// cleanup: above its arguments and return address).
    caller_sp: usize,
    /// That function's real return address.
    ret: usize,
    /// The limit word before the overflow (bias included).
    prev_limit: usize,
}

/// What the space's lock guards: the accounting and, per stack, its live record (to raise its
/// limit when pages are lent from it) and whether it runs on pages now.
struct Shared {
    space: Space,
    owners: Vec<Option<Owner>>,
    page: usize,
    /// The program's lending margin (`__cmm_mtss_margin`; module docs, "Who may lend").
    margin: usize,
    /// The program's check bias (`__cmm_check_bias`): the limit word is the limit plus this,
    /// and a grant holds this many bytes more than the room asked for (module docs).
    bias: usize,
    region: (usize, usize),
    /// Threads that may still give pages back or become donors: entered, not parked in the
    /// thread library and not waiting for room ([`stackrt_mtss_grow`]).
    active: usize,
    /// Threads blocked on [`ROOM`]: only then do changes of the space wake it (a wake-up is a
    /// system call, and every return from pages changes the space).
    waiters: usize,
}

#[derive(Clone, Copy)]
struct Owner {
    rec: *const MtssThread,
    on_pages: bool,
}

// SAFETY: the records behind `Owner::rec` are shared only through their atomic limit word;
// `Shared` is reached only through its mutex.
unsafe impl Send for Shared {}

static SHARED: OnceLock<Mutex<Shared>> = OnceLock::new();

/// Where overflows that found no room wait for a thread to park, end or give pages back.
static ROOM: Condvar = Condvar::new();

/// Statistics (`STACKRT_STATS=1`).
static OVERFLOWS: AtomicU64 = AtomicU64::new(0);
static PEAK_LENT: AtomicUsize = AtomicUsize::new(0);
static LENT_NOW: AtomicUsize = AtomicUsize::new(0);
static PEAK_USED: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// The record of the C-- thread this OS thread runs (null outside C-- code).
    static CURRENT: Cell<*mut MtssThread> = const { Cell::new(core::ptr::null_mut()) };
    /// The native stack size the next entry on this OS thread asks for (0: the default), and
    /// the thread's handle (`main`: 0).
    static REQUEST: Cell<(usize, i32)> = const { Cell::new((0, 0)) };
    /// Retires the thread's stack if it ends without returning through its entry
    /// (`sthread_exit`).
    static OWNED: ExitGuard = const { ExitGuard(Cell::new(core::ptr::null_mut())) };
}

struct ExitGuard(Cell<*mut MtssThread>);

impl Drop for ExitGuard {
    fn drop(&mut self) {
        let rec = self.0.get();
        if !rec.is_null() {
            // SAFETY: a record this OS thread entered and never left; its stack is dead.
            unsafe { leave(rec) };
        }
    }
}

fn lock() -> MutexGuard<'static, Shared> {
    SHARED
        .get_or_init(|| Mutex::new(reserve_region()))
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A byte count from the environment variable `name`, or `default`.
fn env_bytes(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(v) => match crate::chunk::global::parse_bytes(v.trim()) {
            Some(n) if n > 0 => n,
            _ => fail(
                &format!("stackrt: {name}={v:?} is not a size in bytes (e.g. 65536, 64k, 8m)"),
                crate::base::abi::THREAD_FAILURE_EXIT_STATUS,
            ),
        },
        Err(_) => default,
    }
}

/// Maps the region (module docs, "Sizes") and sets its accounting up with the program's page.
fn reserve_region() -> Shared {
    let page = crate::base::program::program_chunk_size().unwrap_or(128);
    let explicit = std::env::var_os("STACKRT_MTSS_REGION").is_some();
    let mut len = env_bytes("STACKRT_MTSS_REGION", DEFAULT_REGION);
    len = len.div_ceil(page) * page;
    let base = loop {
        if let Some(p) = crate::base::os::map_noreserve(len) {
            break p as usize;
        }
        if explicit || len / 2 < MIN_REGION {
            fail(
                &format!("stackrt: mtss: cannot reserve a stack region of {len} bytes"),
                FATAL_EXIT_STATUS,
            );
        }
        len /= 2;
    };
    let space = Space::new(base, len, page).unwrap_or_else(|e| {
        fail(
            &format!("stackrt: mtss: region of {len} bytes with pages of {page}: {e}"),
            FATAL_EXIT_STATUS,
        )
    });
    if std::env::var_os("STACKRT_STATS").is_some_and(|v| v == "1") {
        crate::base::diag::add_exit_report(print_stats);
    }
    Shared {
        space,
        owners: Vec::new(),
        page,
        margin: crate::base::program::program_mtss_margin(),
        bias: crate::base::program::program_check_bias().unwrap_or(0),
        region: (base, len),
        active: 0,
        waiters: 0,
    }
}

fn print_stats() {
    let (region, page) = SHARED
        .get()
        .map(|s| {
            let s = s.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            (s.region.1, s.page)
        })
        .unwrap_or((0, 0));
    let mut b = crate::base::diag::StackBuf::<256>::new();
    let _ = core::fmt::Write::write_fmt(
        &mut b,
        format_args!(
            "stackrt: mtss: region {region} bytes, page {page} bytes, {} overflows, {} pages \
             lent at most, {} bytes of native stacks at most\n",
            OVERFLOWS.load(Relaxed),
            PEAK_LENT.load(Relaxed),
            PEAK_USED.load(Relaxed),
        ),
    );
    b.write_to_stderr();
}

/// The native stack size the next [`enter`] on this OS thread gives its thread (`sthread_create`'s
/// request; 0 or less: the default) and the thread's handle.
pub fn request_stack(bytes: core::ffi::c_int, handle: core::ffi::c_int) {
    REQUEST.with(|r| r.set((bytes.max(0) as usize, handle)));
}

/// Makes the next [`enter`] on this OS thread `main`'s: its native stack is
/// `STACKRT_MTSS_MAIN_STACK` bytes, else the stack limit (`ulimit -s`) as a fixed main stack
/// has, or [`UNLIMITED_MAIN_STACK`] when that is unlimited.
pub fn request_main_stack() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the limit into `lim`, a valid rlimit.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_STACK, &mut lim) };
    let limit = if rc != 0 || lim.rlim_cur == libc::RLIM_INFINITY {
        UNLIMITED_MAIN_STACK
    } else {
        (lim.rlim_cur as usize).min(UNLIMITED_MAIN_STACK)
    };
    let size = env_bytes("STACKRT_MTSS_MAIN_STACK", limit);
    REQUEST.with(|r| r.set((size, 0)));
}

#[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
extern "C" {
    fn stackrt_enter_mtss(fp: usize, a0: usize, a1: usize, nargs: usize) -> usize;
    /// The return stub (`crate::mech::arch::*_mtss`): the return address of the first frame
    /// on a run of pages.
    fn stackrt_mtss_return();
}

/// Calls the C-- function at `fp` with `nargs` (0..=2) of `a0, a1` on a fresh native stack of
/// the region.
///
/// # Safety
/// `fp` must be a C-- function compiled with `mtss` whose parameters are `nargs` words.
#[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
pub unsafe fn enter(fp: usize, a0: usize, a1: usize, nargs: usize) -> usize {
    // SAFETY: the caller's guarantee; the trampoline preserves the C ABI's callee-saved
    // registers and returns on this native stack.
    unsafe { stackrt_enter_mtss(fp, a0, a1, nargs) }
}

/// Called by the entry trampoline on the OS thread's own stack, whose top below the trampoline
/// is `handler_top` (it becomes the handler stack of C calls and of the handlers): carves the
/// thread's native stack and returns its record.
#[no_mangle]
pub extern "C" fn stackrt_mtss_thread_enter(handler_top: usize) -> *mut MtssThread {
    if let Some(rec) = green::take_entry(handler_top) {
        return rec;
    }
    // No lookahead overflow runs on an `mtss` thread: no hot split either.
    crate::chunk::handler::entered(handler_top, false);
    let (request, handle) = REQUEST.with(|r| r.replace((0, -1)));
    let size = if request > 0 {
        request
    } else {
        DEFAULT_THREAD_STACK
    };
    let mut sh = lock();
    let carved = match sh.space.carve(size) {
        Ok(c) => c,
        Err(e) => {
            drop(sh);
            fail(
                &format!(
                    "stackrt: mtss: no room in the stack region for a stack of {size} bytes: {e}"
                ),
                FATAL_EXIT_STATUS,
            )
        }
    };
    PEAK_USED.fetch_max(sh.space.region_used(), Relaxed);
    let rec = register(
        &mut sh,
        carved,
        carved.high,
        handle,
        CURRENT.with(Cell::get),
        false,
    );
    drop(sh);
    CURRENT.with(|c| c.set(rec));
    OWNED.with(|o| {
        if o.0.get().is_null() {
            o.0.set(rec)
        }
    });
    green::entered(rec);
    rec
}

/// Makes the record of the stack `carved` (its C-- code starts at `top`) and registers it as
/// that stack's live owner, counted active.
fn register(
    sh: &mut Shared,
    carved: space::Carved,
    top: usize,
    handle: i32,
    outer: *mut MtssThread,
    green: bool,
) -> *mut MtssThread {
    let rec = Box::into_raw(Box::new(MtssThread {
        limit: AtomicUsize::new(sh.space.limit(carved.id) + sh.bias),
        top,
        ret_to: 0,
        ret_sp: 0,
        retry_sp: 0,
        retry_room: 0,
        retry_args: 0,
        save: [0; 8],
        waiting: false,
        id: carved.id,
        handle,
        frames: Vec::new(),
        outer,
        green,
        floor_published: AtomicBool::new(false),
    }));
    let i = carved.id.0 as usize;
    if sh.owners.len() <= i {
        sh.owners.resize(i + 1, None);
    }
    sh.owners[i] = Some(Owner {
        rec,
        on_pages: false,
    });
    sh.active += 1;
    rec
}

/// Called by the entry trampoline, back on the OS thread's stack, when the thread's function
/// returned: retires its native stack.
///
/// # Safety
/// `rec` is the record [`stackrt_mtss_thread_enter`] returned on this OS thread.
#[no_mangle]
pub unsafe extern "C" fn stackrt_mtss_thread_exit(rec: *mut MtssThread) {
    // SAFETY: the caller's guarantee: a live record.
    if unsafe { (*rec).green } {
        // Its stack is still in use (the green thread's end runs on it): the scheduler
        // retires it ([`green::retire`]).
        return;
    }
    OWNED.with(|o| {
        if o.0.get() == rec {
            o.0.set(core::ptr::null_mut())
        }
    });
    // SAFETY: the caller's guarantee.
    unsafe { leave(rec) };
}

/// Retires `rec`'s stack, frees the record, and makes the outer record current again.
///
/// # Safety
/// `rec` is a live record of this OS thread whose C-- code has ended.
unsafe fn leave(rec: *mut MtssThread) {
    // SAFETY: the caller's guarantee: the record is live and this thread's.
    let r = unsafe { Box::from_raw(rec) };
    {
        let mut sh = lock();
        for f in r.frames.iter().rev() {
            give_back(&mut sh, f.grant);
        }
        let _ = sh.space.retire(r.id);
        sh.owners[r.id.0 as usize] = None;
        sh.active -= 1;
        wake_waiters(&sh);
    }
    CURRENT.with(|c| c.set(r.outer));
    if r.outer.is_null() {
        crate::chunk::handler::exited();
    }
}

/// Gives `g` back and lowers its donor's limit if the donor runs on its native stack.
fn give_back(sh: &mut Shared, g: Grant) {
    if sh.space.give_back(g).is_err() {
        fail(
            "stackrt: mtss: pages given back twice (the runtime's bookkeeping is broken)",
            FATAL_EXIT_STATUS,
        );
    }
    LENT_NOW.fetch_sub(g.pages, Relaxed);
    sync_limit(sh, g.donor);
    wake_waiters(sh);
}

/// Wakes the overflows waiting for room, if any: the space changed under the lock.
fn wake_waiters(sh: &Shared) {
    if sh.waiters > 0 {
        ROOM.notify_all();
    }
}

/// Writes `id`'s limit word from the space, unless its thread runs on pages (it reads the
/// space when it returns to its native stack) or has ended.
fn sync_limit(sh: &Shared, id: StackId) {
    if let Some(Some(o)) = sh.owners.get(id.0 as usize) {
        if !o.on_pages {
            // SAFETY: a registered record is live until `leave` unregisters it under this lock.
            unsafe { (*o.rec).limit.store(sh.space.limit(id) + sh.bias, Release) };
        }
    }
}

/// Set by the first thread that finds no room (module docs): the others that find none while
/// it exits say nothing more.
static OUT_OF_ROOM: AtomicBool = AtomicBool::new(false);

/// Ends the program: the calling thread (`handle`) overflowed and no thread has `bytes`
/// contiguous bytes to lend, nor can any (every other thread is parked or waits for room too).
/// One line, whichever threads find it at once.
fn no_room(sh: MutexGuard<'static, Shared>, handle: i32, bytes: usize) -> ! {
    drop(sh);
    if OUT_OF_ROOM.swap(true, AcqRel) {
        loop {
            // SAFETY: pause has no preconditions; the first thread here ends the process.
            unsafe { libc::pause() };
        }
    }
    let what = match handle {
        0 => "main".to_string(),
        h if h > 0 => format!("thread {h}"),
        _ => format!("a C callback (tid {})", crate::base::os::gettid()),
    };
    fail(
        &format!(
            "stackrt: mtss: {what} overflowed its stack and no thread has {bytes} contiguous \
             bytes free to lend (give the threads larger stacks, or smaller pages: \
             --chunk-size)"
        ),
        FATAL_EXIT_STATUS,
    )
}

/// The overflow handler's Rust half, on the handler stack: the function whose entry check
/// failed has its `args` bytes of arguments at `sp` and its return address above them, and
/// needs `room` bytes below them. Returns its new stack pointer, on pages lent by another
/// thread (module docs), or 0 under green threads when the thread must wait for room: the
/// scheduler left a switch for the handler to make, and the handler calls again when the
/// thread is resumed ([`green`]).
///
/// # Safety
/// Called only by `stackrt_mtss_overflow` with the running thread's record.
#[no_mangle]
pub unsafe extern "C" fn stackrt_mtss_grow(
    rec: *mut MtssThread,
    sp: usize,
    room: usize,
    args: usize,
) -> usize {
    // SAFETY: the running thread's record (the thread register), touched only by this thread
    // but for its atomic limit.
    let r = unsafe { &mut *rec };
    let copy = args + P;
    if green::on() && crate::chunk::handler::take_resumed() {
        // A retry after a wait for room (below): the switch that resumed the thread is done.
        green::resume_hook();
    }
    let mut sh = lock();
    // A short check may fail up to the bias early; the bias more lets the function's first
    // callee pass its own check on the pages.
    let bytes = room + sh.bias + copy;
    // The lowest word of the native stack in use until the stub has jumped to the pages is the
    // stub's own return address, just below the function's arguments; once the function
    // returns, its callers may push down to the lending margin below them (module docs).
    let floor = sp.saturating_sub(STUB_WORDS.max(sh.margin));
    if r.waiting {
        r.waiting = false;
        sh.active += 1;
        if r.frames.is_empty() {
            let _ = sh.space.set_floor(r.id, None);
        }
    }
    let grant = loop {
        match sh.space.lend(r.id, bytes) {
            Ok(g) => break g,
            // A green worker cannot block: the thread yields, lending its own free native
            // stack meanwhile, and the overflow handler calls again when it is resumed.
            Err(_) if sh.active > 1 && green::on() => {
                sh.active -= 1;
                if r.frames.is_empty() {
                    let _ = sh.space.set_floor(r.id, Some(floor));
                }
                r.waiting = true;
                (r.retry_sp, r.retry_room, r.retry_args) = (sp - P, room, args);
                drop(sh);
                if green::wait_hook() {
                    return 0;
                }
                // It could not switch (inside a C callback): no wait after all.
                sh = lock();
                r.waiting = false;
                sh.active += 1;
                if r.frames.is_empty() {
                    let _ = sh.space.set_floor(r.id, None);
                }
                no_room(sh, r.handle, bytes)
            }
            // Some other thread may still park, end or give pages back: wait for it, lending
            // this thread's own free native stack meanwhile if it runs there.
            Err(_) if sh.active > 1 => {
                sh.active -= 1;
                if r.frames.is_empty() {
                    let _ = sh.space.set_floor(r.id, Some(floor));
                }
                sh.waiters += 1;
                sh = ROOM
                    .wait(sh)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                sh.waiters -= 1;
                sh.active += 1;
                if r.frames.is_empty() {
                    let _ = sh.space.set_floor(r.id, None);
                }
            }
            Err(_) => no_room(sh, r.handle, bytes),
        }
    };
    sync_limit(&sh, grant.donor);
    let (page, bias) = (sh.page, sh.bias);
    if r.frames.is_empty() {
        // Its native stack below the function's arguments is free until it comes back (the
        // arguments are copied; the stub reads its return address below them after this).
        let _ = sh.space.set_floor(r.id, Some(floor));
        if let Some(Some(o)) = sh.owners.get_mut(r.id.0 as usize) {
            o.on_pages = true;
        }
    }
    drop(sh);
    OVERFLOWS.fetch_add(1, Relaxed);
    let now = LENT_NOW.fetch_add(grant.pages, Relaxed) + grant.pages;
    PEAK_LENT.fetch_max(now, Relaxed);
    let top = grant.low + grant.pages * page;
    let new_sp = top - copy;
    // SAFETY: `[sp, sp + copy)` are the function's arguments and return address (the
    // overflow stub's contract); `[new_sp, top)` lies in the pages just lent to this thread.
    let ret = unsafe {
        core::ptr::copy_nonoverlapping(sp as *const u8, new_sp as *mut u8, copy);
        let ret = *((sp + args) as *const usize);
        *((top - P) as *mut usize) = stackrt_mtss_return as *const () as usize;
        ret
    };
    r.frames.push(PageFrame {
        grant,
        caller_sp: sp + copy,
        ret,
        prev_limit: r.limit.load(Relaxed),
    });
    r.limit.store(grant.low + bias, Release);
    new_sp
}

/// The return stub's Rust half, on the handler stack: the first frame on the innermost pages
/// returned. Gives them back and writes where the stub goes on (`ret_to`, `ret_sp`).
///
/// # Safety
/// Called only by `stackrt_mtss_return` with the running thread's record.
#[no_mangle]
pub unsafe extern "C" fn stackrt_mtss_shrink(rec: *mut MtssThread) {
    // SAFETY: as in `stackrt_mtss_grow`.
    let r = unsafe { &mut *rec };
    let Some(f) = r.frames.pop() else {
        fail(
            "stackrt: mtss: a return from pages the thread never entered",
            FATAL_EXIT_STATUS,
        )
    };
    let mut sh = lock();
    give_back(&mut sh, f.grant);
    if r.frames.is_empty() {
        let _ = sh.space.set_floor(r.id, None);
        if let Some(Some(o)) = sh.owners.get_mut(r.id.0 as usize) {
            o.on_pages = false;
        }
        r.limit.store(sh.space.limit(r.id) + sh.bias, Release);
    } else {
        r.limit.store(f.prev_limit, Release);
    }
    drop(sh);
    r.ret_to = f.ret;
    r.ret_sp = f.caller_sp;
}

/// The calling thread is about to block in the thread library (module docs, "Who may lend"):
/// its native stack below its stack pointer at the C call may be lent until [`unpark`].
/// Returns what it did, for [`unpark`].
pub fn park() -> Parked {
    let rec = CURRENT.with(Cell::get);
    // Green threads lend when the scheduler parks them ([`green`]), not here.
    if rec.is_null() || green::on() {
        return Parked::No;
    }
    // SAFETY: this OS thread's running record.
    let r = unsafe { &*rec };
    if !r.frames.is_empty() {
        // On pages: its floor is already published; it waits, though.
        let mut sh = lock();
        sh.active -= 1;
        wake_waiters(&sh);
        return Parked::Waiting;
    }
    let sp = crate::chunk::handler::stub_caller_sp();
    let mut sh = lock();
    let floor = sp.saturating_sub(sh.margin);
    let _ = sh.space.set_floor(r.id, Some(floor));
    sh.active -= 1;
    wake_waiters(&sh);
    Parked::Floor
}

/// What [`park`] did, for [`unpark`].
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Parked {
    /// Nothing: the thread runs no `mtss` code.
    No,
    /// It counts as waiting (no longer active).
    Waiting,
    /// It waits and published its floor.
    Floor,
}

/// The calling thread woke from the block [`park`] published: its stack is its own again.
pub fn unpark(parked: Parked) {
    if parked == Parked::No {
        return;
    }
    let rec = CURRENT.with(Cell::get);
    // SAFETY: this OS thread's running record (`park` saw it).
    let r = unsafe { &*rec };
    let mut sh = lock();
    if parked == Parked::Floor {
        let _ = sh.space.set_floor(r.id, None);
    }
    sh.active += 1;
}
