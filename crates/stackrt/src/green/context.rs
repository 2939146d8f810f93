//! Execution contexts of green threads: a stack, a saved stack pointer, and the switch between
//! two contexts (`stackrt_green_switch`, `crate::green::arch::{x86_64,i686}`), which saves only
//! the C ABI's callee-saved registers: a switch happens inside a C call (the thread library),
//! where everything else is dead.
//!
//! A new context's stack is prepared by [`init`] so that the first switch to it calls its entry
//! function with one argument. An entry function never returns; it ends by switching away for
//! good.

use core::num::NonZeroUsize;

use nix::sys::mman::{mmap_anonymous, mprotect, munmap, MapFlags, ProtFlags};

extern "C" {
    fn stackrt_green_switch(save: *mut usize, to: usize);
    fn stackrt_green_start();
}

/// The entry function of a context: called with the argument given to [`init`]; must never
/// return (it switches away for good instead).
pub type Entry = extern "C" fn(usize) -> !;

/// Pointer size.
const P: usize = core::mem::size_of::<usize>();

/// Prepares a new context on the stack whose (16-byte aligned) top is `top` and returns its
/// initial stack pointer, to be passed to [`switch`] as `to`. The first switch to it calls
/// `entry(arg)` with the stack 16-byte aligned at the call.
///
/// # Safety
/// `[top - 64, top)` must be writable memory that nothing else uses, with room for `entry`'s
/// frames below it; `top` must be 16-byte aligned.
pub unsafe fn init(top: usize, entry: Entry, arg: usize) -> usize {
    debug_assert!(top.is_multiple_of(16));
    let slot = |i: usize| (top - i * P) as *mut usize;
    // SAFETY: the caller gives us [top - 64, top); the words written are the frame that
    // `stackrt_green_switch` pops (see the layout in `crate::green::arch`).
    unsafe {
        slot(1).write(0);
        slot(2).write(stackrt_green_start as *const () as usize);
        if P == 8 {
            // rbp rbx r12 r13 r14 r15, popped in reverse order.
            slot(3).write(0);
            slot(4).write(0);
            slot(5).write(entry as usize);
            slot(6).write(arg);
            slot(7).write(0);
            slot(8).write(0);
            top - 8 * P
        } else {
            // ebp ebx esi edi.
            slot(3).write(0);
            slot(4).write(entry as usize);
            slot(5).write(arg);
            slot(6).write(0);
            top - 6 * P
        }
    }
}

/// Saves the calling context's stack pointer (with its callee-saved registers below it) in
/// `*save` and resumes the context whose saved stack pointer is `to`. Returns when some context
/// switches back to the word stored in `*save`.
///
/// # Safety
/// `to` must be the stack pointer of a suspended context ([`init`] or an earlier `switch`'s
/// `*save`) that is not running anywhere, and `save` must stay valid until the calling context
/// is resumed.
#[inline(always)]
pub unsafe fn switch(save: *mut usize, to: usize) {
    // SAFETY: forwarded from the caller; the switch follows the C ABI for the calling context.
    unsafe { stackrt_green_switch(save, to) }
}

/// A stack for a context: an anonymous mapping with a `PROT_NONE` guard page at its low end,
/// unmapped on drop.
pub struct Stack {
    base: usize,
    len: usize,
}

impl Stack {
    /// A stack with `size` usable bytes (rounded up to pages) above a one-page guard.
    pub fn new(size: usize) -> Result<Stack, nix::Error> {
        let page = crate::base::os::page_size();
        let len = Self::mapping_len(size);
        let n = NonZeroUsize::new(len).ok_or(nix::Error::EINVAL)?;
        // SAFETY: a fresh private anonymous mapping at an address the kernel chooses.
        let p = unsafe {
            mmap_anonymous(
                None,
                n,
                ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                MapFlags::MAP_PRIVATE | MapFlags::MAP_NORESERVE | MapFlags::MAP_STACK,
            )
        }?;
        // SAFETY: the first page of the mapping just made, owned by this Stack.
        if let Err(e) = unsafe { mprotect(p, page, ProtFlags::PROT_NONE) } {
            // SAFETY: the mapping made above, not yet handed out.
            let _ = unsafe { munmap(p, len) };
            return Err(e);
        }
        Ok(Stack {
            base: p.as_ptr() as usize,
            len,
        })
    }

    /// Bytes of the mapping of a stack of `size` usable bytes: whole pages, at least one, and
    /// the guard page.
    pub fn mapping_len(size: usize) -> usize {
        let page = crate::base::os::page_size();
        size.div_ceil(page).max(1) * page + page
    }

    /// Bytes of the mapping, guard page included.
    pub fn mapping_bytes(&self) -> usize {
        self.len
    }

    /// The stack's top: its highest address, 16-byte aligned (page aligned).
    pub fn top(&self) -> usize {
        self.base + self.len
    }

    /// The usable part as (lowest address, size): everything above the guard page.
    pub fn usable(&self) -> (usize, usize) {
        let page = crate::base::os::page_size();
        (self.base + page, self.len - page)
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        if let Some(p) = core::ptr::NonNull::new(self.base as *mut core::ffi::c_void) {
            // SAFETY: the mapping this Stack made; no context may run on it any more (the
            // owner's obligation, as for any stack).
            let _ = unsafe { munmap(p, self.len) };
        }
    }
}
