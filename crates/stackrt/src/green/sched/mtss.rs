//! `mtss`'s hooks into the scheduler (`crate::mech::mtss::green`): the record of a native
//! stack the trampoline carved for the running thread, and the yield of an overflow that
//! waits for room and its completion.

use super::{complete_switch_current, current, switch_out, After, Switched};

/// Registers the hooks (the scheduler's start under `mtss`).
pub(super) fn set_hooks() {
    crate::mech::mtss::green::set_hook(entered, wait, resume);
}

/// `mtss`'s hook (`crate::mech::mtss::green::set_hook`): the trampoline carved a native stack
/// for the running green thread (`main`'s first entry; a C callback's, which the thread keeps
/// out of its record).
fn entered(rec: *mut crate::mech::mtss::MtssThread) {
    let g = current();
    if g.mtss().is_null() {
        g.set_mtss(rec);
    }
}

/// `mtss`'s hook for an overflow that waits for room: a yield whose switch the overflow
/// handler makes (true), or none when the thread cannot switch (false).
fn wait() -> bool {
    switch_out(After::Yield, 0) == Switched::Deferred
}

/// `mtss`'s hook when a thread that waited for room runs again: completes its switch.
fn resume() {
    let _ = complete_switch_current();
}
