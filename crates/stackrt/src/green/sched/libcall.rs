//! The thread library's side of a switch deferred to the library stub (`lookahead`, see
//! [`super::Switched::Deferred`] and `crate::chunk::handler::defer_switch`): how a repeated
//! call learns where it left off, and what it keeps meanwhile.

use super::{complete_switch_current, current};

/// A thread-library function's start (`crate::threads`): 0 for a fresh call, with the
/// caller's errno kept; for the library stub's repetition of a call whose switch it made
/// (the thread runs again), completes that switch and returns the phase the call gave, with
/// the errno of the fresh call kept.
#[inline]
pub fn lib_entry() -> (u32, crate::base::os::KeptErrno) {
    if !crate::chunk::handler::take_resumed() {
        let kept = crate::base::os::KeptErrno::new();
        current().lib_errno.set(kept.value());
        return (0, kept);
    }
    let g = complete_switch_current();
    (
        g.lib_phase.replace(0),
        crate::base::os::KeptErrno::with(g.lib_errno.get()),
    )
}

/// A value a thread-library call keeps across its deferred switch ([`lib_entry`]).
pub fn set_lib_value(v: usize) {
    current().lib_value.set(v);
}

/// See [`set_lib_value`].
pub fn lib_value() -> usize {
    current().lib_value.get()
}
