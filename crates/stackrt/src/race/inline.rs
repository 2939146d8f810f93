//! The thread-local word behind the emission stage's inline read check
//! (`cmm_codegen::race`, "The inline read check"): the address of the running thread's read
//! filter while its reads may be settled without calling [`super::__stackrt_race_read`], else 0.
//!
//! The word is 0 whenever every access must take the full path (the deterministic scheduler,
//! recording, relaxed replay: [`super::FULL_PATH`]) and on an OS thread that runs no thread of
//! the program. It is written where the running thread changes ([`super::set_current`]: a
//! thread's entry, a green worker's switch) and where the full path is taken (at start, before
//! a second thread exists), so compiled code always finds its own thread's filter there: a
//! green thread moved to another worker is set there before it runs again.

use crate::base::abi::RACE_FILTER_TLS_SYMBOL;

crate::tls_block!("__stackrt_race_filter", 16);

const _: () = assert!(matches!(
    RACE_FILTER_TLS_SYMBOL.as_bytes(),
    b"__stackrt_race_filter"
));

/// Sets the calling OS thread's word to `filter` (its address) or 0.
pub fn publish(filter: *const super::filter::Filter) {
    let w = crate::tls_address!("__stackrt_race_filter") as *mut usize;
    // SAFETY: the calling thread's own block, 16 bytes, aligned; only this thread writes it.
    unsafe { w.write(filter as usize) };
}

/// The calling OS thread's word (tests).
pub fn published() -> usize {
    let w = crate::tls_address!("__stackrt_race_filter") as *const usize;
    // SAFETY: as in `publish`.
    unsafe { w.read() }
}
