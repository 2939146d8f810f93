//! The worker's side of a switch back from a green thread: the thread's chain and heap state
//! swapped out, what it asked for done (requeued, its parking lock released, or ended: its
//! stack back to the worker's cache, its joiner woken), and its stack use noted when it
//! outgrew its block.

use core::sync::atomic::Ordering::AcqRel;

use super::{fail, After, Green, GreenPtr, GreenStack, Sched, Worker};

impl Sched {
    /// The worker's side of a switch back from `g`: swaps its chain out and does what it
    /// asked for.
    pub(super) fn after_switch(&self, w: &Worker, g: *const Green) {
        // SAFETY: `g` just switched back to this worker and is not queued anywhere.
        let gr = unsafe { &*g };
        w.bump_tick(1);
        let after = w.after.replace(After::None);
        if self.chunked {
            if after == After::Exit {
                crate::chunk::global::exit_chain_if_active();
            }
            // SAFETY: the thread is switched out: nothing else uses its chain state.
            crate::chunk::global::swap_chain(unsafe { &mut *gr.chain() });
            if self.first_chunk_in_block && after != After::Exit && self.det.is_none() {
                // SAFETY: as above; its saved SP was written by its switch.
                let sp = crate::green::preempt_async::thread_sp(unsafe { *gr.sp.get() });
                // SAFETY: as above.
                let used = unsafe { (*gr.chain()).outgrown_use(sp) };
                if let Some(used) = used {
                    crate::green::sizing::learn(gr.fp, used);
                }
            }
        }
        if self.heap {
            if after == After::Exit {
                crate::mech::heap::exit_green_thread();
            }
            // SAFETY: as above, for its heap state.
            crate::mech::heap::swap_thread_state(unsafe { &mut *gr.heap_state() });
        }
        w.current.set(core::ptr::null());
        match after {
            After::Yield => self.requeue(w.index, g),
            After::Preempted => {
                if self.det.is_some() {
                    self.requeue(w.index, g)
                } else {
                    self.queues.push_preempted(GreenPtr(g));
                    self.wake_idle();
                }
            }
            After::Park(lock) => {
                if self.mtss {
                    // Before wakers can see it (`crate::mech::mtss::green`, the protocol).
                    // SAFETY: the thread is switched out, its context saved at its SP; no
                    // waker can see it until the unlock below.
                    unsafe { crate::mech::mtss::green::parked(gr.mtss(), *gr.sp.get()) };
                }
                // SAFETY: the lock the thread held when it parked (`switch_out`'s contract);
                // releasing it lets wakers see the thread, whose context is saved now.
                unsafe { (*lock).unlock() }
            }
            After::Exit => {
                // On the scheduler's stack: the ended thread's entry room has none to spare.
                // SAFETY: the thread ended and nobody joined it yet (`finish` below lets a
                // joiner in), so its race state is alive.
                unsafe { crate::race::thread_end_of(gr.race()) };
                self.finish(w, gr)
            }
            After::None => fail("stackrt: a green thread switched back without a reason"),
        }
    }

    /// A thread ended: its stack goes back and its joiner wakes.
    fn finish(&self, w: &Worker, g: &Green) {
        // SAFETY: the thread ended; nothing runs on its stack any more.
        match core::mem::replace(unsafe { &mut *g.stack.get() }, GreenStack::None) {
            GreenStack::Block(b, size) => {
                if self.first_chunk_in_block && !crate::green::stacks::canary_intact(b) {
                    fail(&format!(
                        "stackrt: green thread {} overran its stack block: a call into the \
                         thread library used more than its budget of the thread's stack",
                        g.handle
                    ));
                }
                // SAFETY: the worker's own cache.
                self.blocks.give(unsafe { &mut *w.blocks.get() }, size, b);
            }
            // SAFETY: the worker's own cache.
            GreenStack::Fixed(stack) => self.fixed.give(unsafe { &mut *w.fixed.get() }, stack),
            // SAFETY: the record `prepare` made; the thread ended and switched away for good.
            GreenStack::Mtss => unsafe { crate::mech::mtss::green::retire(g.mtss()) },
            GreenStack::Native(_) | GreenStack::None | GreenStack::Requested(_) => {}
        }
        g.join.lock();
        // SAFETY: join_state is accessed under `join`.
        let joiner =
            unsafe { core::mem::replace(&mut (*g.join_state.get()).joiner, super::FINISHED) };
        g.join.unlock();
        if !joiner.is_null() {
            self.push(w.index, joiner, true);
        }
        if self.alive.fetch_sub(1, AcqRel) == 1 {
            // Every thread has ended (`main` with sthread_exit): the program is done.
            // SAFETY: exit runs the atexit handlers and ends the process.
            unsafe { libc::exit(0) };
        }
    }
}
