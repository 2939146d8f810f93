//! Green threads inside a C callback on the worker's stack: C code called C-- back
//! (`crate::mech::callback`) while C ran on the worker's handler stack, so the C frames below
//! the callback belong to this worker until the callback returns. The thread is pinned: it
//! cannot switch away (another thread would run its C calls over those frames, and the thread
//! could resume on another worker). A yield or a preemption goes on at once; a wait that needs
//! a switch (a contended lock, a join of a running thread, `sthread_exit`) stops the program
//! with one line, as Go's runtime stops a locked goroutine's misuse.

use super::{current, After, Switched};

/// `None` when the running thread may switch; else what the switch becomes (a yield goes on
/// at once), or the program stops for a wait it cannot make.
pub(super) fn check(after: &After) -> Option<Switched> {
    if !crate::chunk::handler::pinned() {
        return None;
    }
    match after {
        After::Yield | After::Preempted | After::None => Some(Switched::Done),
        After::Park(_) | After::Exit => crate::base::diag::fail(
            &format!(
                "stackrt: green thread {} would wait (or exit) inside a C callback that runs on \
                 its worker's stack, where it cannot switch: wait outside the callback, or use \
                 --mech traditional, callee-cleanup or heap, whose C calls run on the thread's \
                 own stack",
                current().handle
            ),
            crate::base::diag::FATAL_EXIT_STATUS,
        ),
    }
}

/// Whether a preemption at a checkpoint must be skipped (the running thread is pinned).
pub(super) fn skip_preemption() -> bool {
    crate::chunk::handler::pinned()
}
