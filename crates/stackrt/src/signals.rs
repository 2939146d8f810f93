//! The runtime's `SIGSEGV` handler, for every mechanism: it grows MMU stacks
//! ([`crate::mech::mmu`]) and explains every other fault in one line (a thread that overflowed
//! its fixed stack, a NULL dereference, any other invalid access), then lets the process die
//! with the original signal.
//!
//! # Alternate signal stacks, `SA_ONSTACK`
//! Every thread the runtime starts (main included) gets an alternate signal stack before it
//! runs C-- code, and the handler is installed with `SA_ONSTACK`. Two reasons: a thread that
//! overflowed its stack has no stack left to run a handler on; and the MMU convention keeps
//! live data *below* the stack pointer (the caller writes the callee's return address there
//! before moving SP; the callee-cleanup return jumps through a word just below SP), where a
//! signal frame delivered on the normal stack would land and destroy it. So every handler in
//! a program compiled with `mmu` must use `SA_ONSTACK`; C code that installs its own handlers
//! must do the same (the tests' timer-signal helper does).
//!
//! # Async-signal safety
//! The handler formats into a stack buffer and writes with `write(2)`; it never allocates,
//! locks a std lock or prints through std. The MMU growth path calls the chunk runtime, which
//! takes its own spin locks and may `mmap`/`madvise`: that is safe because a growth fault is
//! synchronous and raised only by compiled C-- code at a probe, never while the thread is
//! inside the runtime or the C library, so nothing the handler needs can be held by the
//! interrupted code (the same argument as for a function call at that point).
//!
//! # Fixed stacks
//! Under `traditional` and `callee-cleanup` the runtime records each thread's stack (and its
//! guard: the pthread guard page of threads, the kernel's stack guard gap below main's stack);
//! a fault in it is reported as an overflow of that thread's fixed stack of so many bytes.

use core::cell::Cell;
use core::ffi::{c_int, c_void};
use core::num::NonZeroUsize;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU32, Ordering::Relaxed};

use nix::sys::mman::{mmap_anonymous, mprotect, munmap, MapFlags, ProtFlags};
use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};

use crate::base::diag::StackBuf;
use crate::base::os::gettid;
use crate::base::ucontext::regs;
use crate::mech::mmu::{self, ChunkBounds, Fault, Verdict};

/// The program's ABI, for the handler (0 until [`install`]).
static ABI: AtomicU32 = AtomicU32::new(u32::MAX);

/// Addresses below this are reported as a NULL pointer dereference (Linux's default
/// `vm.mmap_min_addr`: nothing is ever mapped there).
const NULL_PAGE_END: usize = 65536;

/// Bytes below a fixed stack's lowest address that count as its overflow: the pthread guard
/// (one page by default) or the kernel's stack guard gap below the main stack (256 pages), and
/// frames that step a little beyond.
const FIXED_GUARD_REACH: usize = 1 << 20;

thread_local! {
    /// This thread's fixed stack as (lowest usable address, size), or (0, 0).
    static FIXED_STACK: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
    /// Whether this is the program's main thread.
    static IS_MAIN: Cell<bool> = const { Cell::new(false) };
    /// The handle of the green thread this worker runs (`--threads green`; 0 is `main`), or -1.
    static GREEN_HANDLE: Cell<i32> = const { Cell::new(-1) };
    /// This thread's alternate signal stack mapping (base, length), or (0, 0).
    static ALT_STACK: AltStack = const { AltStack(Cell::new((0, 0))) };
}

/// Owns a thread's alternate signal stack; disabled and unmapped when the thread ends.
struct AltStack(Cell<(usize, usize)>);

impl Drop for AltStack {
    fn drop(&mut self) {
        let (base, len) = self.0.get();
        if base == 0 {
            return;
        }
        let disable = libc::stack_t {
            ss_sp: core::ptr::null_mut(),
            ss_flags: libc::SS_DISABLE,
            ss_size: 0,
        };
        // SAFETY: disabling the calling thread's alternate stack (nix has no sigaltstack);
        // the thread runs no handler now (TLS destructors run outside signal handlers).
        unsafe { libc::sigaltstack(&disable, core::ptr::null_mut()) };
        if let Some(p) = NonNull::new(base as *mut c_void) {
            // SAFETY: [base, base + len) is the mapping made in `thread_setup`, no longer in
            // use as a signal stack (disabled above).
            let _ = unsafe { munmap(p, len) };
        }
    }
}

/// Installs the handler (once per process, before any C-- code runs) for a program of `abi`.
pub fn install(abi: u32) {
    ABI.store(abi, Relaxed);
    let action = SigAction::new(
        SigHandler::SigAction(on_segv),
        SaFlags::SA_SIGINFO | SaFlags::SA_ONSTACK,
        SigSet::empty(),
    );
    // SAFETY: the handler is async-signal-safe (module docs) and runs on the alternate stack.
    let _ = unsafe { sigaction(Signal::SIGSEGV, &action) };
}

fn page() -> usize {
    crate::base::os::page_size()
}

/// Gives the calling thread its alternate signal stack and, for fixed-stack mechanisms
/// (`fixed`), records its stack for the overflow report. `main` says whether it is the
/// program's main thread.
pub fn thread_setup(fixed: bool, main: bool) {
    IS_MAIN.with(|m| m.set(main));
    // The handler's report names the thread: its cached id's first touch happens here, outside
    // any handler (runtime-facts.md).
    let _ = gettid();
    ALT_STACK.with(|a| {
        if a.0.get().0 != 0 {
            return;
        }
        // SAFETY: getauxval has no preconditions; 0 when the kernel does not say.
        let min = unsafe { libc::getauxval(libc::AT_MINSIGSTKSZ) } as usize;
        let size = (2 * min.max(2048) + (48 << 10)).next_multiple_of(page());
        let len = size + page();
        let Some(nz) = NonZeroUsize::new(len) else {
            return;
        };
        // SAFETY: a fresh private anonymous mapping; nothing else refers to it.
        let Ok(p) = (unsafe {
            mmap_anonymous(
                None,
                nz,
                ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                MapFlags::MAP_PRIVATE | MapFlags::MAP_NORESERVE,
            )
        }) else {
            return;
        };
        // SAFETY: the lowest page of the mapping just made becomes its guard.
        let _ = unsafe { mprotect(p, page(), ProtFlags::PROT_NONE) };
        let st = libc::stack_t {
            ss_sp: (p.as_ptr() as usize + page()) as *mut c_void,
            ss_flags: 0,
            ss_size: size,
        };
        // SAFETY: the stack lies in the mapping made above, owned by this thread until its
        // TLS destructor disables and unmaps it.
        if unsafe { libc::sigaltstack(&st, core::ptr::null_mut()) } == 0 {
            a.0.set((p.as_ptr() as usize, len));
        } else {
            // SAFETY: unmapping the mapping made above, not in use.
            let _ = unsafe { munmap(p, len) };
        }
    });
    if fixed {
        FIXED_STACK.with(|f| f.set(current_stack().unwrap_or((0, 0))));
    }
}

/// Records, on a green-thread worker, the green thread it is about to run: its handle (0 for
/// `main`) and its fixed stack as (lowest usable address, size), or (0, 0) on chunks; the crash
/// reports name it and recognise an overflow of its stack.
pub fn set_running_green(handle: i32, fixed_stack: (usize, usize)) {
    GREEN_HANDLE.with(|g| g.set(handle));
    IS_MAIN.with(|m| m.set(handle == 0));
    FIXED_STACK.with(|f| f.set(fixed_stack));
}

/// The calling thread's fixed stack as recorded by [`thread_setup`], or (0, 0).
pub fn fixed_stack() -> (usize, usize) {
    FIXED_STACK.with(|f| f.get())
}

/// The calling thread's stack as (lowest usable address, size), from `pthread_getattr_np`.
fn current_stack() -> Option<(usize, usize)> {
    let mut attr = core::mem::MaybeUninit::<libc::pthread_attr_t>::uninit();
    // SAFETY: pthread_getattr_np initialises `attr` for the calling thread on success.
    if unsafe { libc::pthread_getattr_np(libc::pthread_self(), attr.as_mut_ptr()) } != 0 {
        return None;
    }
    let mut addr: *mut c_void = core::ptr::null_mut();
    let mut size: libc::size_t = 0;
    // SAFETY: attr was initialised above; addr and size are valid out-pointers.
    let rc = unsafe { libc::pthread_attr_getstack(attr.as_ptr(), &mut addr, &mut size) };
    // SAFETY: attr was initialised by pthread_getattr_np and is destroyed once.
    unsafe { libc::pthread_attr_destroy(attr.as_mut_ptr()) };
    (rc == 0).then_some((addr as usize, size))
}

extern "C" fn on_segv(_sig: c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
    // SAFETY: the kernel passes a valid siginfo and ucontext to an SA_SIGINFO handler.
    let (code, addr) = unsafe { ((*info).si_code, (*info).si_addr() as usize) };
    let uc = ctx.cast::<libc::ucontext_t>();
    // SAFETY: as above; gregs holds the interrupted thread's registers.
    let gregs = unsafe { &mut (*uc).uc_mcontext.gregs };
    let sp = gregs[regs::SP] as usize;
    let pc = gregs[regs::PC] as usize;
    let abi = ABI.load(Relaxed);
    let mmu_abi = abi == crate::base::abi::ABI_MMU || abi == crate::base::abi::ABI_MMU_REUSE;
    let chunk = if mmu_abi {
        crate::chunk::global::running_chunk()
    } else {
        None
    };
    let bounds = chunk.map(|(h, limit, guard)| ChunkBounds {
        header: h as usize,
        limit,
        guard,
    });
    let fault = Fault { code, addr, sp };
    // SAFETY: the decoder reads code bytes from the faulting instruction on, each only after
    // the bytes before it were recognised as part of a probe (decode_run), so it stays within
    // the program's text.
    let code_at = |i: usize| unsafe { *((pc + i) as *const u8) };
    let verdict = if mmu_abi {
        mmu::classify(&fault, bounds, code_at, regs::IS64)
    } else {
        Verdict::Crash(mmu::Crash::NotChunked)
    };
    match (verdict, chunk) {
        (Verdict::Grow(run), Some((cur, _, _))) => {
            let new = crate::chunk::global::fault_overflow(cur, sp, run.distance);
            let stub = if abi == crate::base::abi::ABI_MMU_REUSE {
                mmu::stackrt_mmu_underflow_reuse as *const () as usize
            } else {
                mmu::stackrt_mmu_underflow as *const () as usize
            };
            let top = new as usize;
            // SAFETY: `new` is the header of a chunk just linked for this thread with room for
            // `run.distance` bytes below it; the probe's word is the first frame's return
            // address slot, completed here with the underflow stub's address.
            unsafe {
                if let Some(ret) = run.ret {
                    ((top - run.distance) as *mut usize).write(stub);
                    (*new).resume = ret;
                } else {
                    (*new).resume = 0;
                }
            }
            gregs[regs::SP] = top as _;
            gregs[regs::PC] = (pc + run.len) as _;
        }
        (Verdict::Crash(why), _) => {
            report(addr, pc, sp, why, bounds);
            restore_default();
        }
        (Verdict::Grow(_), None) => {
            report(addr, pc, sp, mmu::Crash::NotChunked, bounds);
            restore_default();
        }
    }
}

/// Restores the default action, so that returning re-executes the faulting instruction and
/// the process dies with `SIGSEGV` as it would have without the runtime.
fn restore_default() {
    let dfl = SigAction::new(SigHandler::SigDfl, SaFlags::empty(), SigSet::empty());
    // SAFETY: sigaction is async-signal-safe; SIG_DFL has no handler code.
    let _ = unsafe { sigaction(Signal::SIGSEGV, &dfl) };
}

fn mech_name(abi: u32) -> &'static str {
    match abi {
        crate::base::abi::ABI_TRADITIONAL => "traditional",
        crate::base::abi::ABI_CALLEE_CLEANUP => "callee-cleanup",
        crate::base::abi::ABI_LOOKAHEAD => "lookahead",
        crate::base::abi::ABI_MMU => "mmu",
        crate::base::abi::ABI_MMU_REUSE => "mmu-reuse",
        crate::base::abi::ABI_HEAP => "heap",
        crate::base::abi::ABI_HEAP_MALLOC => "heap-malloc",
        crate::base::abi::ABI_MTSS => "mtss",
        _ => "traditional --backend native",
    }
}

/// Set by the first crash reported: threads that crash while it ends the process (two
/// threads overflowing their fixed stacks at once) say nothing more, so a crash is one line.
static REPORTED: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

/// The one line of a real crash (module docs), written with `write(2)`; if another thread
/// reported one already, waits for it to end the process.
fn report(addr: usize, pc: usize, sp: usize, why: mmu::Crash, chunk: Option<ChunkBounds>) {
    use core::fmt::Write;
    if REPORTED.swap(true, core::sync::atomic::Ordering::AcqRel) {
        // The reporting thread ends the process once its line is out: returning here would
        // kill it first, with no line at all.
        loop {
            // SAFETY: pause is async-signal-safe and has no preconditions.
            unsafe { libc::pause() };
        }
    }
    let mut buf = StackBuf::<512>::new();
    let tid = gettid();
    let green = GREEN_HANDLE.with(|g| g.get());
    let _ = match crate::chunk::global::thread_number() {
        _ if IS_MAIN.with(|m| m.get()) => write!(buf, "stackrt: main thread (tid {tid})"),
        _ if green > 0 => write!(buf, "stackrt: green thread {green} (tid {tid})"),
        Some(n) => write!(buf, "stackrt: thread {n} (tid {tid})"),
        None => write!(buf, "stackrt: thread (tid {tid})"),
    };
    let (low, size) = FIXED_STACK.with(|f| f.get());
    let in_fixed_guard = size != 0 && addr < low && addr >= low.saturating_sub(FIXED_GUARD_REACH);
    let abi = ABI.load(Relaxed);
    let _ = if in_fixed_guard {
        writeln!(
            buf,
            " overflowed its fixed stack of {size} bytes (--mech {}; segmentation fault at \
             {addr:#x}): use a chunked mechanism (--mech lookahead or mmu) or a larger stack \
             size",
            mech_name(abi)
        )
    } else if addr < NULL_PAGE_END {
        writeln!(
            buf,
            ": segmentation fault: invalid access to address {addr:#x}, a NULL pointer \
             dereference (instruction {pc:#x})"
        )
    } else if why == mmu::Crash::NotAProbe || why == mmu::Crash::StackPointerOutside {
        let limit = chunk.map_or(0, |c| c.limit);
        writeln!(
            buf,
            ": segmentation fault at {addr:#x} in the guard page of its stack chunk (limit \
             {limit:#x}, sp {sp:#x}, instruction {pc:#x}): a C function called from C-- used \
             more stack than the extern budget, or a wild access"
        )
    } else {
        writeln!(
            buf,
            ": segmentation fault: invalid access to address {addr:#x} (instruction {pc:#x}, \
             sp {sp:#x})"
        )
    };
    buf.write_to_stderr();
}
