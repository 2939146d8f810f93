//! The mechanism's part of a green thread's record: its chunk chain (chunked mechanisms), its
//! part of the heap state (heap mechanisms) or its `mtss` record. A program uses one mechanism, so the two
//! share their bytes: the record is part of every thread's memory (a million parked threads
//! hold a million records), and the chain alone is 40 bytes on x86-64.

use core::mem::ManuallyDrop;

use crate::chunk::state::ChainState;
use crate::mech::heap::HeapThreadState;
use crate::mech::mtss::MtssThread;

/// A chain, a heap state or an `mtss` record; which one is fixed for the process
/// ([`MechState::new`], [`super::Green::set_mtss`]).
pub union MechState {
    chain: ManuallyDrop<ChainState>,
    heap: HeapThreadState,
    mtss: *mut MtssThread,
}

impl MechState {
    /// The state a new thread starts with: a heap state under the heap mechanisms, an empty
    /// chain otherwise (the fixed-stack mechanisms use neither).
    pub fn new(heap: bool) -> Self {
        if heap {
            MechState {
                heap: HeapThreadState::default(),
            }
        } else {
            MechState {
                chain: ManuallyDrop::new(ChainState::new()),
            }
        }
    }

    /// The chain. Only under a chunked mechanism, whose threads were made with
    /// `MechState::new(false)`.
    pub fn chain(this: *mut MechState) -> *mut ChainState {
        // SAFETY: a field's address, no read; `ManuallyDrop` is `repr(transparent)`.
        unsafe { core::ptr::addr_of_mut!((*this).chain) }.cast()
    }

    /// The heap state. Only under a heap mechanism, whose threads were made with
    /// `MechState::new(true)`.
    pub fn heap(this: *mut MechState) -> *mut HeapThreadState {
        // SAFETY: a field's address, no read.
        unsafe { core::ptr::addr_of_mut!((*this).heap) }
    }
}

impl super::Green {
    /// The thread's `mtss` record (`mtss` only, once [`Self::set_mtss`] wrote it; null before
    /// the thread entered C-- code).
    pub(super) fn mtss(&self) -> *mut MtssThread {
        // SAFETY: under `mtss` the field was written by `set_mtss` when the record was made.
        unsafe { (*self.mech.get()).mtss }
    }

    /// Sets the thread's `mtss` record (`mtss` only; the record is the worker's to write: the
    /// thread is being made, prepared, or runs on it).
    pub(super) fn set_mtss(&self, rec: *mut MtssThread) {
        // SAFETY: a plain write of a `Copy` field; the state is unused under `mtss`.
        unsafe { (*self.mech.get()).mtss = rec };
    }

    /// The thread's chain (chunked mechanisms only).
    pub(super) fn chain(&self) -> *mut ChainState {
        MechState::chain(self.mech.get())
    }

    /// The thread's heap state (heap mechanisms only).
    pub(super) fn heap_state(&self) -> *mut HeapThreadState {
        MechState::heap(self.mech.get())
    }
}
