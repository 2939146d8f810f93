//! A green thread's part of a chain: the [`ChainState`] a worker swaps in before the thread runs
//! and out after it switched back, the first chunk a green thread's stack block offers, and the
//! worker mode that keeps caches across chains. The chunk runtime knows no green thread: the
//! green layer calls these through `super::global`.

use core::ptr::{self};

use super::chain::ThreadChain;
use super::header::ChunkHeader;

/// The part of a [`ThreadChain`] that belongs to one thread of execution rather than to the OS
/// thread running it: a green thread's chain while it is switched out
/// ([`ThreadChain::swap_state`]). The caches stay with the OS thread (the worker), like Go's
/// per-P stack caches.
#[derive(Debug)]
pub struct ChainState {
    id: u32,
    active: bool,
    top: *mut ChunkHeader,
    depth: usize,
    chain_bytes: usize,
    used_below: usize,
    grower: bool,
    foreign_first: bool,
}

impl ChainState {
    /// The state of a thread that has not entered chunked code yet.
    pub const fn new() -> Self {
        ChainState {
            id: u32::MAX,
            active: false,
            top: ptr::null_mut(),
            depth: 0,
            chain_bytes: 0,
            used_below: 0,
            grower: false,
            foreign_first: false,
        }
    }

    /// Whether the thread is in chunked code (has a chain).
    pub fn is_active(&self) -> bool {
        self.active
    }

    /// Whether the thread has outgrown its first chunk (more than one chunk in its chain).
    #[inline]
    pub fn outgrown(&self) -> bool {
        self.active && self.depth >= 2
    }

    /// Bytes of stack a switched-out thread whose saved SP is `sp` uses, from its first
    /// chunk's top, if it has outgrown its first chunk (None otherwise, or when `sp` is not in
    /// its newest chunk).
    pub fn outgrown_use(&self, sp: usize) -> Option<usize> {
        if !self.active || self.depth < 2 {
            return None;
        }
        let top = self.top as usize;
        // SAFETY: the newest chunk of a switched-out thread's chain is mapped while linked.
        let limit = unsafe { (*self.top).limit };
        (sp >= limit && sp <= top).then(|| self.used_below + (top - sp))
    }
}

impl Default for ChainState {
    fn default() -> Self {
        Self::new()
    }
}

impl ThreadChain {
    /// Marks the OS thread as a green-thread worker (see the `worker` field).
    pub fn set_worker(&self) {
        self.worker.set(true);
    }

    /// The per-thread part of the chain.
    pub(super) fn save_state(&self) -> ChainState {
        ChainState {
            id: self.id.get(),
            active: self.active.get(),
            top: self.top.get(),
            depth: self.depth.get(),
            chain_bytes: self.chain_bytes.get(),
            used_below: self.used_below.get(),
            grower: self.grower.get(),
            foreign_first: self.foreign_first.get(),
        }
    }

    /// Makes `state` the per-thread part of the chain (the OS thread's id stays).
    pub(super) fn load_state(&self, state: &ChainState) {
        self.id.set(state.id);
        self.active.set(state.active);
        self.top.set(state.top);
        self.depth.set(state.depth);
        self.chain_bytes.set(state.chain_bytes);
        self.used_below.set(state.used_below);
        self.grower.set(state.grower);
        self.foreign_first.set(state.foreign_first);
        if self.tid.get() == 0 {
            self.tid.set(crate::base::os::gettid());
        }
    }

    /// Exchanges the per-thread part of the chain with `state` (a green thread switching in or
    /// out of this OS thread); the caches stay. Not while a handler of this chain runs.
    pub fn swap_state(&self, state: &mut ChainState) {
        let mine = self.save_state();
        self.load_state(state);
        *state = mine;
    }

    /// Saves the per-thread part of the chain in `save` and loads it from `load`: a direct
    /// switch from one green thread to another on this OS thread.
    pub fn switch_state(&self, save: &mut ChainState, load: &ChainState) {
        *save = self.save_state();
        self.load_state(load);
    }

    /// Puts the chain aside for a nested entry on this OS thread (C code calling C-- back,
    /// `crate::mech::callback`): returns its per-thread part and whether the OS thread was a
    /// worker; the thread keeps its id and has no chain until [`ThreadChain::unnest`]. The
    /// nested chain's exit keeps the caches as a worker's does (the next callback reuses them).
    pub fn nest(&self) -> (ChainState, bool) {
        let saved = self.save_state();
        let fresh = ChainState {
            id: saved.id,
            ..ChainState::new()
        };
        self.load_state(&fresh);
        (saved, self.worker.replace(true))
    }

    /// Restores the chain [`ThreadChain::nest`] put aside (the nested one has exited).
    pub fn unnest(&self, saved: &ChainState, worker: bool) {
        self.load_state(saved);
        self.worker.set(worker);
    }

    /// Offers the memory from `low` up to the next [`ThreadChain::enter`]'s thread stack as its
    /// first chunk: a green thread's stack block, whose top holds the entry frames. The chunk's
    /// header goes `room` bytes below the thread stack `T` (where the handlers' frames grow
    /// down from `T` when they run on it: [`super::config::FOREIGN_HANDLER_ROOM`]; 0 when they
    /// run on a worker's handler stack, `super::handler`), its limit is `low`;
    /// if the entry's need does not fit, the offer is ignored and a chunk of the runtime's is
    /// taken. The memory stays the caller's: the chain never caches or releases it.
    pub fn offer_first_chunk(&self, low: usize, room: usize) {
        self.offer.set(low);
        self.offer_room.set(room);
    }
}
