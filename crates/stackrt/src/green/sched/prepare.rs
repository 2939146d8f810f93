//! A green thread's first run: its stack (a packed block under the chunked mechanisms, sized
//! by what threads of its entry function were seen to use; a cached fixed stack under the
//! others) and its initial context.

use super::entry::green_entry;
use super::{fail, Green, GreenStack, Sched, Worker, DEFAULT_FIXED_STACK};
use crate::green::context;
use crate::green::stacks::block_size;

impl Sched {
    /// Gives a thread that runs for the first time its stack and initial context.
    pub(super) fn prepare(&self, w: &Worker, g: &Green) {
        // SAFETY: the thread has not run; its stack slot is the worker's to read.
        let request = match unsafe { &*g.stack.get() } {
            GreenStack::Requested(r) => *r,
            _ => 0,
        };
        let top = if self.mtss {
            let (rec, top) = crate::mech::mtss::green::carve(request.max(0) as usize, g.handle);
            g.set_mtss(rec);
            // SAFETY: the thread is not running; its stack slot is the worker's to set.
            unsafe { *g.stack.get() = GreenStack::Mtss };
            top
        } else if self.chunked {
            // SAFETY: the entry of a C-- function of this program (`sthread_create`'s
            // contract) is preceded by its u32 stack need (the emission stage's layout).
            let need = unsafe { core::ptr::read_unaligned((g.fp - 8) as *const u32) } as usize;
            // Room for what threads of this function were seen to use, if they outgrew their
            // blocks (`super::sizing`).
            let need = crate::green::sizing::block_need(g.fp, need);
            let (need, room) = if self.first_chunk_in_block {
                (need, 0)
            } else {
                (0, crate::chunk::config::FOREIGN_HANDLER_ROOM)
            };
            let size = block_size(need, room);
            // SAFETY: the worker's own cache, touched only on its OS thread.
            let cache = unsafe { &mut *w.blocks.get() };
            let b = self
                .blocks
                .take(cache, size, g.handle())
                .unwrap_or_else(|e| {
                    fail(&format!(
                        "stackrt: cannot map a stack for green thread {}: {e}",
                        g.handle
                    ))
                });
            // SAFETY: the thread is not running; its stack slot is the worker's to set.
            unsafe { *g.stack.get() = GreenStack::Block(b, size) };
            if self.first_chunk_in_block {
                // SAFETY: the block is the thread's, unused yet.
                unsafe { crate::green::stacks::set_canary(b) };
                crate::chunk::global::offer_first_chunk(b + crate::green::stacks::CANARY, 0);
            }
            b + size
        } else {
            let size = if self.heap {
                // The C stack of C calls; frames are heap blocks.
                crate::mech::lookahead::NATIVE_THREAD_STACK
            } else if request > 0 {
                // As pthreads do for an OS thread: at least the system's minimum, which also
                // leaves room for the runtime's frames when a loop-head preemption or a
                // thread-library call comes at the bottom of a stack sized to the C-- frames
                // alone (`stacksizeof`, thesis section 3.3).
                (request as usize).max(crate::base::os::min_thread_stack())
            } else {
                DEFAULT_FIXED_STACK
            };
            // SAFETY: the worker's own cache, touched only on its OS thread.
            let cache = unsafe { &mut *w.fixed.get() };
            let stack = self.fixed.take(cache, size).unwrap_or_else(|e| {
                let why = if e == nix::Error::ENOMEM {
                    " (out of memory, or of the kernel's memory mappings: each fixed stack \
                     with its guard page takes two of vm.max_map_count; --mech lookahead \
                     needs none per thread)"
                } else {
                    ""
                };
                fail(&format!(
                    "sthread_create: cannot map a stack of {size} bytes for green thread {}: \
                     {e}{why}",
                    g.handle
                ))
            });
            let top = stack.top();
            // SAFETY: as above.
            unsafe { *g.stack.get() = GreenStack::Fixed(stack) };
            top
        };
        // SAFETY: `top` is the top of the fresh stack just given to the thread.
        unsafe { *g.sp.get() = context::init(top, green_entry, g as *const Green as usize) };
        g.started.set(true);
    }
}

/// The chunk runtime's hook (`crate::chunk::first_block`): the running thread outgrew its
/// block at a checkpoint that needed `bytes` below the block's first chunk top.
pub(super) fn first_block_outgrown(bytes: usize) {
    crate::green::sizing::learn_need(super::current().fp, bytes);
}
