//! Where the chunk handlers run: the calling OS thread's *handler stack*, and the switch a
//! checkpoint hook asked for, which runs on the thread's own chunk instead.
//!
//! The `lookahead` handlers (overflow, reclaim, the entry trampoline's calls into this
//! runtime) leave the chunk they were called on and run their Rust code on the handler stack,
//! whose top is the first word of the thread-local block [`TLS_SYMBOL`] (read by the assembly
//! as `fs:[stackrt_chunk_tls@tpoff]` / `gs:[stackrt_chunk_tls@ntpoff]`). On an OS thread it is
//! the thread's native stack below the entry trampoline's frame (the thread stack `T`, set by
//! the first [`super::global::stackrt_chunk_thread_enter`]); on a green-thread worker it is a
//! stack of the worker's own (Go's `g0`), set by the scheduler before any green thread runs,
//! so a green thread's stack holds none of the runtime's frames and needs no room for them.
//! Green threads' calls to C functions run there too (`stackrt_ccall`).
//!
//! Nothing on the handler stack may outlive the handler's call: another green thread uses it
//! next. So a checkpoint hook that wants the thread to switch (a preemption, a decision of the
//! deterministic scheduler) does not switch there: it answers `true`, the overflow entry sets
//! the *switch pending* word (the block's second) and links a chunk with [`SWITCH_ROOM`] more
//! bytes, and the handler's assembly, back on the new chunk, calls
//! [`stackrt_chunk_pending_switch`], which switches on the thread's own stack.

use core::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// The thread-local block's symbol (two words: handler stack top, switch pending).
pub const TLS_SYMBOL: &str = "stackrt_chunk_tls";

/// Bytes an overflow adds to its reserve when a switch is pending: the switch routine's save
/// area (208 bytes on x86-64) and the scheduler's Rust frames down to the context switch,
/// with a wide margin (they measured under 1 KiB).
pub const SWITCH_ROOM: usize = 4096;

#[repr(C)]
struct ChunkTls {
    /// Top of the handler stack (16-byte aligned), or 0 before the thread entered chunked
    /// code (the entry trampoline then calls the runtime on its own stack).
    handler_stack: usize,
    /// Non-zero: the overflow that is returning must switch before the call it resumes.
    switch_pending: usize,
    /// Non-zero: `handler_stack` is this OS thread's own stack below its entry trampoline, set
    /// at its enter (reset at its exit), not a worker's.
    from_enter: usize,
    /// A switch a thread-library call made through `stackrt_lookahead_libcall` deferred to
    /// the stub (see [`defer_switch`]): where the thread's context goes (0: none) ...
    lib_save: usize,
    /// ... and the context to resume.
    lib_load: usize,
    /// Non-zero: the stub repeats a thread-library call after the switch it deferred.
    resumed: usize,
    /// C calls of compiled code running on the handler stack now (`stackrt_ccall` counts them
    /// up and down): a C callback into C-- then runs below C's frames there ([`nest`]).
    ccalls: usize,
    /// C callbacks running on the handler stack: the green thread must not switch away (the
    /// C frames below it are on the worker's stack), see [`pinned`].
    pinned: usize,
    /// Non-zero: the `lookahead` overflow handlers may relink a hot split's chunk themselves
    /// ([`HOT_SPLIT_OFFSET`]).
    hot_split: usize,
}

const P: usize = core::mem::size_of::<usize>();
const _: () = {
    assert!(core::mem::offset_of!(ChunkTls, handler_stack) == 0);
    assert!(core::mem::offset_of!(ChunkTls, switch_pending) == P);
    assert!(core::mem::offset_of!(ChunkTls, lib_save) == 3 * P);
    assert!(core::mem::offset_of!(ChunkTls, lib_load) == 4 * P);
    assert!(core::mem::offset_of!(ChunkTls, resumed) == 5 * P);
    assert!(core::mem::offset_of!(ChunkTls, ccalls) == CCALLS_OFFSET);
    // Mirrored in `cmm_codegen::emit::mech::ccall` (`LIB_SAVE_WORD`, `CCALLS_WORD`, `SP_SLOT`):
    // the MMU mechanisms' inline C calls write and read these words themselves.
    assert!(CCALLS_OFFSET == 6 * P && LIB_SP_SLOT == 16);
    assert!(core::mem::offset_of!(ChunkTls, hot_split) == HOT_SPLIT_OFFSET);
    assert!(core::mem::offset_of!(ChunkTls, from_enter) == FROM_ENTER_OFFSET);
};

/// Byte offset of the `from_enter` word in the block (word 2): non-zero on an OS thread that
/// entered chunked code itself, zero on a green-thread worker. The `lookahead` overflow
/// handlers keep a frame's phase on its cache line (`super::header::PHASE_LINE`) only where it
/// is non-zero: a worker's chains link small classes sized to what their threads touch, and
/// the phase's bytes there made 20,000 green threads hold 8% more (`tests/green.rs`,
/// `green_blocks_hold_what_their_threads_touch`, 256-byte frames).
pub const FROM_ENTER_OFFSET: usize = 2 * P;

/// Byte offset of the *hot split* word in the block (word 8; the `lookahead` overflow
/// handlers' assembly reads it as `stackrt_chunk_tls@tpoff+64` / `@ntpoff+32`). Non-zero on
/// an OS thread that entered chunked code itself while no checkpoint hook is registered and
/// statistics are off ([`entered`]): there every overflow is a real one (nothing poisons a
/// check word) and nothing is counted, so the handler may take the hot split's fast path.
/// When the chunk the code runs on, `cur`, has a chunk linked after it (`ChunkHeader::link`)
/// that compiled code unlinked (`UNLINKED`), whose saved SP is the overflowing call's and
/// which holds the reserve, the handler relinks it on its own: word 0 gets `cur`'s thread
/// stack back and the reclaim budget at `T` its unlink back. That is everything the runtime's
/// relink ([`super::chain`], the hot split) would change: the chunk is still the chain's, at
/// the same place, with the same stack below it, so the chain's words stay exact. Green
/// threads (a worker's handler stack) keep the runtime's path, which calls the checkpoint
/// hook.
pub const HOT_SPLIT_OFFSET: usize = 8 * P;

/// Byte offset of the count of C calls on the handler stack in the block (word 6; the C-call
/// trampolines' assembly uses it as `stackrt_chunk_tls@tpoff+48` / `@ntpoff+24`).
pub const CCALLS_OFFSET: usize = 6 * P;

/// Bytes a C callback leaves free below the SP it was called with before the handler stack it
/// lowers to: its own frames down to the mechanism's entry trampoline.
const CALLBACK_GAP: usize = 1024;

/// What a C callback ([`nest`]) changed in the calling OS thread's block.
#[derive(Debug)]
pub struct HandlerNest {
    handler_stack: usize,
    from_enter: usize,
    ccalls: usize,
    pinned: usize,
}

/// A C function called back into C-- (`crate::mech::callback`) with its stack pointer at about
/// `sp`. If C runs on the handler stack (a C call through `stackrt_ccall`), the handler stack
/// becomes the memory below `sp` until [`unnest`], so the callback's handlers and C calls do
/// not overwrite C's frames, and the thread is pinned to this OS thread. Returns what to
/// restore.
pub fn nest(sp: usize) -> HandlerNest {
    let t = tls();
    // SAFETY: the calling thread's own block; no handler of this thread runs now (C code does).
    unsafe {
        let saved = HandlerNest {
            handler_stack: (*t).handler_stack,
            from_enter: (*t).from_enter,
            ccalls: (*t).ccalls,
            pinned: (*t).pinned,
        };
        if saved.ccalls != 0 && saved.handler_stack != 0 {
            (*t).handler_stack = (sp - CALLBACK_GAP) & !15;
            (*t).ccalls = 0;
            (*t).pinned += 1;
        }
        saved
    }
}

/// Undoes [`nest`] when the callback returns to C.
pub fn unnest(saved: HandlerNest) {
    let t = tls();
    // SAFETY: the calling thread's own block (a pinned callback never left its OS thread).
    unsafe {
        (*t).handler_stack = saved.handler_stack;
        (*t).from_enter = saved.from_enter;
        (*t).ccalls = saved.ccalls;
        (*t).pinned = saved.pinned;
    }
}

/// Whether a C callback runs on this OS thread's handler stack, under C frames there: the green
/// thread running it cannot switch until it returns (`crate::green`'s switches check it).
#[inline]
pub fn pinned() -> bool {
    // SAFETY: the calling thread's own block.
    unsafe { (*tls()).pinned != 0 }
}

// The block itself, named by the handlers' assembly (`crate::base::tls`).
crate::tls_block!("stackrt_chunk_tls", core::mem::size_of::<ChunkTls>());

/// The calling thread's block.
#[inline(always)]
fn tls() -> *mut ChunkTls {
    crate::tls_address!("stackrt_chunk_tls") as *mut ChunkTls
}

/// Makes `top` (16-byte aligned, with at least [`MIN_HANDLER_STACK`] bytes below it) the
/// calling OS thread's handler stack for good: a green-thread worker's own stack.
pub fn set_worker_stack(top: usize) {
    debug_assert_eq!(top % 16, 0);
    // SAFETY: the calling thread's own block; no handler runs on this thread now.
    unsafe {
        (*tls()).handler_stack = top;
        (*tls()).from_enter = 0;
    }
}

/// Bytes a worker's handler stack should have: the handlers' frames, and under green threads
/// every C call of compiled code (glibc's `printf` of very precise doubles puts up to 64 KiB
/// of digits on the stack).
pub const MIN_HANDLER_STACK: usize = 1 << 20;

/// At a thread's enter: the thread stack `T` becomes the handler stack unless a worker set
/// one; then the hot split's fast path is allowed if `hot_split` ([`HOT_SPLIT_OFFSET`]).
pub fn entered(thread_stack: usize, hot_split: bool) {
    let t = tls();
    // SAFETY: the calling thread's own block.
    unsafe {
        if (*t).handler_stack == 0 {
            (*t).handler_stack = thread_stack;
            (*t).from_enter = 1;
            (*t).hot_split = usize::from(hot_split);
        }
    }
}

/// At a thread's exit: forgets a handler stack that `entered` set.
pub fn exited() {
    let t = tls();
    // SAFETY: the calling thread's own block.
    unsafe {
        if (*t).from_enter != 0 {
            (*t).handler_stack = 0;
            (*t).from_enter = 0;
            (*t).hot_split = 0;
        }
    }
}

/// Marks a switch pending for the overflow that is returning (see the module docs).
pub(super) fn set_switch_pending() {
    // SAFETY: the calling thread's own block.
    unsafe { (*tls()).switch_pending = 1 };
}

/// What runs a pending switch on the thread's own stack (registered with the checkpoint
/// hook, see `super::poison::set_checkpoint_hook`); 0 when none.
static SWITCH_HOOK: AtomicUsize = AtomicUsize::new(0);

pub(super) fn set_switch_hook(f: fn()) {
    SWITCH_HOOK.store(f as usize, Relaxed);
}

/// Called by the overflow handlers' assembly, on the new chunk, when the switch-pending word
/// is set: clears it (before switching: the thread may resume on another OS thread) and runs
/// the registered switch.
#[no_mangle]
pub extern "C" fn stackrt_chunk_pending_switch() {
    // SAFETY: the calling thread's own block.
    unsafe { (*tls()).switch_pending = 0 };
    let h = SWITCH_HOOK.load(Relaxed);
    if h != 0 {
        // SAFETY: a non-zero value was stored by `set_switch_hook` from a `fn()`.
        let f = unsafe { core::mem::transmute::<usize, fn()>(h) };
        f();
    }
}

/// Whether `sp` lies on the calling OS thread's handler stack of a green-thread worker (a
/// thread-library call made through `stackrt_lookahead_libcall` runs there).
#[inline]
pub fn on_worker_handler_stack(sp: usize) -> bool {
    let t = tls();
    // SAFETY: the calling thread's own block.
    let (top, from_enter) = unsafe { ((*t).handler_stack, (*t).from_enter) };
    top.wrapping_sub(sp) <= MIN_HANDLER_STACK && from_enter == 0 && top != 0
}

/// Defers a context switch to the thread-library stub (`stackrt_lookahead_libcall`) that
/// called the running code on the handler stack: when the call returns to it, the stub saves
/// the thread's context on the thread's own stack (the green switch's format) into `*save`
/// and resumes the context `load`; when the thread is resumed, the stub makes the same call
/// again with [`take_resumed`] true. So a thread parked in the thread library holds only the
/// stub's few words on its stack, not the library's frames (Go's `mcall`: the goroutine's
/// state is saved and the scheduler runs on `g0`).
///
/// # Safety
/// The caller runs on the handler stack under the stub (see [`on_worker_handler_stack`]) and
/// returns to it without any other switch; `save` and `load` are valid for the switch.
pub unsafe fn defer_switch(save: *mut usize, load: usize) {
    // SAFETY: the calling thread's own block.
    unsafe {
        (*tls()).lib_load = load;
        (*tls()).lib_save = save as usize;
    }
}

/// What names the running green thread's handle (0: `main`) for
/// [`stackrt_ccall_switched`]'s line, registered by the green threads at start; 0 when none.
static HANDLE_HOOK: AtomicUsize = AtomicUsize::new(0);

pub fn set_handle_hook(f: fn() -> i32) {
    HANDLE_HOOK.store(f as usize, Relaxed);
}

/// Whether the running thread-library call is the stub's repetition after a deferred switch
/// (and clears the mark).
pub fn take_resumed() -> bool {
    // SAFETY: the calling thread's own block.
    unsafe { core::mem::replace(&mut (*tls()).resumed, 0) != 0 }
}

/// The SP of the thread whose library call runs on the handler stack: the stub keeps it in
/// the handler stack's top slot ([`on_worker_handler_stack`] must hold).
pub fn stub_caller_sp() -> usize {
    // SAFETY: the calling thread's own block; the stub wrote the slot below the top.
    unsafe { *(((*tls()).handler_stack - LIB_SP_SLOT) as *const usize) }
}

/// Where below the handler stack's top the C-call and library stubs keep the thread's SP.
pub const LIB_SP_SLOT: usize = 16;

/// Called by the C-call trampoline (`stackrt_ccall`) when the C function it called left a
/// switch to a stub ([`defer_switch`]): C code called the thread library, which can switch
/// green threads only from compiled code. Ends the program with one line (status 70).
#[no_mangle]
pub extern "C" fn stackrt_ccall_switched() -> ! {
    let h = HANDLE_HOOK.load(Relaxed);
    let handle = if h == 0 {
        0
    } else {
        // SAFETY: a non-zero value was stored by `set_handle_hook` from a `fn() -> i32`.
        let f = unsafe { core::mem::transmute::<usize, fn() -> i32>(h) };
        f()
    };
    let thread = match handle {
        0 => "main thread".to_string(),
        n => format!("green thread {n}"),
    };
    crate::base::diag::fail(
        &format!(
            "stackrt: {thread}: a C function called from C-- code called the thread library, \
             which cannot switch green threads from C code (call it from C-- code instead)"
        ),
        crate::base::diag::FATAL_EXIT_STATUS,
    )
}
