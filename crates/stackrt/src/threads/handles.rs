//! Thread handles: the small integers C-- programs name threads by (a `pthread_t` does not fit
//! a C-- `int` on x86-64), the lowest free one first, freed only when the thread is joined.

use core::ffi::c_int;
use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};

/// Why a join request was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JoinError {
    /// No thread has this handle (never created, or already joined).
    Unknown,
    /// Another `sthread_join` is already waiting for this thread.
    AlreadyJoining,
}

impl JoinError {
    /// The errno value `sthread_join` returns for this error.
    pub fn errno(self) -> c_int {
        match self {
            JoinError::Unknown => libc::ESRCH,
            JoinError::AlreadyJoining => libc::EINVAL,
        }
    }
}

/// Handles for threads: each handle is an index + 1 into a vector of slots. The free slots
/// are kept in a min-heap, so finding the lowest free handle costs O(log n) with a million
/// threads as with ten. A slot is the thread's value or `None` (free): with a value that has
/// a niche (a `NonZeroUsize`, the green threads' records) a slot is one word, and ten million
/// threads hold ten million slots. The handles some join is waiting for are kept apart (there
/// are few at a time).
#[derive(Debug)]
pub struct HandleTable<T> {
    slots: Vec<Option<T>>,
    /// Indices of the free slots.
    free: BinaryHeap<Reverse<usize>>,
    /// Indices of the slots some `sthread_join` is waiting for: not free yet.
    joining: BTreeSet<usize>,
    live: usize,
}

impl<T: Copy> HandleTable<T> {
    pub const fn new() -> Self {
        HandleTable {
            slots: Vec::new(),
            free: BinaryHeap::new(),
            joining: BTreeSet::new(),
            live: 0,
        }
    }

    /// The handle the next [`HandleTable::insert`] will return: the lowest free one.
    pub fn next_handle(&self) -> c_int {
        let idx = self.free.peek().map_or(self.slots.len(), |r| r.0);
        idx as c_int + 1
    }

    /// Stores a running thread under the lowest free handle and returns the handle.
    pub fn insert(&mut self, value: T) -> c_int {
        let idx = match self.free.pop() {
            Some(Reverse(idx)) => {
                self.slots[idx] = Some(value);
                idx
            }
            None => {
                self.slots.push(Some(value));
                self.slots.len() - 1
            }
        };
        self.live += 1;
        idx as c_int + 1
    }

    /// Starts joining `handle`: returns its thread and marks the handle as being joined.
    pub fn begin_join(&mut self, handle: c_int) -> Result<T, JoinError> {
        let idx = usize::try_from(handle)
            .ok()
            .and_then(|h| h.checked_sub(1))
            .ok_or(JoinError::Unknown)?;
        let value = self
            .slots
            .get(idx)
            .copied()
            .flatten()
            .ok_or(JoinError::Unknown)?;
        if !self.joining.insert(idx) {
            return Err(JoinError::AlreadyJoining);
        }
        Ok(value)
    }

    /// Ends a join started by [`HandleTable::begin_join`]: frees the handle when the join
    /// succeeded, otherwise puts the thread back.
    pub fn end_join(&mut self, handle: c_int, value: T, joined: bool) {
        let idx = (handle - 1) as usize;
        let was_joining = self.joining.remove(&idx);
        debug_assert!(was_joining);
        if joined {
            self.slots[idx] = None;
            self.free.push(Reverse(idx));
            self.live -= 1;
        } else {
            self.slots[idx] = Some(value);
        }
    }

    /// Number of handles in use (running or being joined).
    pub fn live(&self) -> usize {
        self.live
    }
}

impl<T: Copy> Default for HandleTable<T> {
    fn default() -> Self {
        Self::new()
    }
}
