//! Helpers shared by the chunk runtime's test binaries.

use std::cell::UnsafeCell;

/// A thread's native stack area as the entry trampolines lay it out: the thread stack address
/// `T` is its start, 16-byte aligned, and the runtime keeps the 32-bit reclaim budget in its
/// first 4 bytes.
#[repr(C, align(16))]
pub struct NativeStack(UnsafeCell<[u32; 4]>);

impl NativeStack {
    /// An area whose budget word holds `budget`.
    pub fn new(budget: u32) -> Self {
        NativeStack(UnsafeCell::new([budget, 0, 0, 0]))
    }

    /// The thread stack address to give the runtime.
    pub fn addr(&self) -> usize {
        self.0.get() as usize
    }

    pub fn budget(&self) -> u32 {
        // SAFETY: the cell is ours and alive; the runtime writes it only during its calls.
        unsafe { std::ptr::read_volatile(self.0.get().cast::<u32>()) }
    }

    /// What compiled code does to the budget at an inline unlink.
    pub fn set_budget(&self, v: u32) {
        // SAFETY: as in `budget`.
        unsafe { std::ptr::write_volatile(self.0.get().cast::<u32>(), v) }
    }
}
