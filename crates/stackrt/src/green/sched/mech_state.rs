//! The mechanism's part of a green thread's record: its chunk chain (chunked mechanisms) or
//! its part of the heap state (heap mechanisms). A program uses one mechanism, so the two
//! share their bytes: the record is part of every thread's memory (a million parked threads
//! hold a million records), and the chain alone is 40 bytes on x86-64.

use core::mem::ManuallyDrop;

use crate::chunk::state::ChainState;
use crate::mech::heap::HeapThreadState;

/// A chain or a heap state; which one is fixed for the process ([`MechState::new`]).
pub union MechState {
    chain: ManuallyDrop<ChainState>,
    heap: HeapThreadState,
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
    /// The thread's chain (chunked mechanisms only).
    pub(super) fn chain(&self) -> *mut ChainState {
        MechState::chain(self.mech.get())
    }

    /// The thread's heap state (heap mechanisms only).
    pub(super) fn heap_state(&self) -> *mut HeapThreadState {
        MechState::heap(self.mech.get())
    }
}
