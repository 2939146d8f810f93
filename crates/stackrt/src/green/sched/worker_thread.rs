//! The worker OS threads' entries: worker 0's scheduler context (the main OS thread's) and
//! the other workers' OS threads, which set up their signals, handler stacks and mechanism
//! state before they run the scheduler loop.

use super::{handler_stacks, sched, Stack, WORKER};

pub(super) extern "C" fn worker0_entry(_: usize) -> ! {
    let s = sched();
    let w = &s.workers[0];
    // The first switch to worker 0's scheduler comes from `main`, which no `run` switched to.
    s.after_switch(w, w.current.get());
    s.worker_loop(w)
}

/// A worker OS thread: worker `i`, with `handler` as its handler stack if its starter mapped
/// one (else it maps its own under the chunked mechanisms).
pub(super) fn worker_os_thread(i: usize, handler: Option<Stack>) {
    let s = sched();
    crate::signals::thread_setup(crate::base::abi::is_fixed_stack_abi(s.abi), false);
    if s.chunked {
        crate::chunk::global::set_worker();
    }
    if s.handler_stacks {
        match handler {
            Some(stack) => handler_stacks::use_handler_stack(stack),
            None => handler_stacks::give_handler_stack(),
        }
    }
    if s.heap {
        crate::mech::heap::enter_worker();
    }
    let w = &s.workers[i];
    w.register_os_thread();
    WORKER.with(|c| c.set(w));
    s.worker_loop(w)
}
