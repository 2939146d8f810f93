//! Model-based property test of the heap mechanisms' frame allocator (`stackrt::mech::heap`):
//! random allocate/free sequences, in any order, on several threads at once, against a model
//! of what the allocator promises:
//! * a freed block of size class `k` is the next block of class `k` the same thread gets (the
//!   lists are LIFO, per thread: a call and return at the same depth reuse one block);
//! * a large block (over the largest class) is reused by the first freed large block, most
//!   recent first, whose capacity holds the request;
//! * otherwise the block is new: it overlaps no live block of any thread (a shared interval
//!   map of every live block checks this) and is aligned to the granule with room for the
//!   request;
//! * a block's contents survive until it is freed (each block is filled with a pattern naming
//!   its thread and allocation, checked before the free): nothing is handed out twice;
//! * every allocation is counted once.
//!
//! The inline path of the emitted code works on the same lists; the corpus and tests/heap.rs
//! run it.

#[allow(dead_code)]
mod common;

use common::NativeStack;
use std::collections::BTreeMap;
use std::sync::Mutex;

use proptest::prelude::*;
use stackrt::chunk::ChunkHeader;
use stackrt::mech::heap::{
    alloc_frame, class_for, class_size, free_frame, stackrt_heap_thread_enter,
    stackrt_heap_thread_exit, thread_frames, GRANULE, MAX_CLASS_SIZE,
};

#[derive(Clone, Debug)]
enum Op {
    /// Allocate a block of this many bytes.
    Alloc(usize),
    /// Free the live block at this index (modulo the number of live blocks).
    Free(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (1usize..=64).prop_map(|n| Op::Alloc(n * 16)),
        2 => (65usize..=1024).prop_map(|n| Op::Alloc(n * 16)),
        1 => (MAX_CLASS_SIZE / 16 + 1..=4096).prop_map(|n| Op::Alloc(n * 16)),
        6 => any::<usize>().prop_map(Op::Free),
    ]
}

/// Every live block of every thread: base -> (top, thread).
static LIVE: Mutex<BTreeMap<usize, (usize, usize)>> = Mutex::new(BTreeMap::new());

fn claim(base: usize, top: usize, thread: usize) -> Result<(), String> {
    let mut live = LIVE.lock().unwrap();
    if let Some((&b, &(t, th))) = live.range(..top).next_back() {
        if t > base {
            return Err(format!(
                "thread {thread}: new block [{base:#x}, {top:#x}) overlaps thread {th}'s \
                 live block [{b:#x}, {t:#x})"
            ));
        }
    }
    live.insert(base, (top, thread));
    Ok(())
}

fn release(base: usize) {
    LIVE.lock().unwrap().remove(&base);
}

/// A live block: its top, the bytes asked for, the bytes it really has, its pattern.
struct Block {
    top: usize,
    size: usize,
    cap: usize,
    pattern: usize,
}

fn fill(b: &Block) {
    let words = b.size / 8;
    for i in [0, words / 2, words - 1] {
        // SAFETY: the block's [top - size, top) is ours until it is freed.
        unsafe {
            ((b.top - b.size) as *mut u64)
                .add(i)
                .write(b.pattern as u64 + i as u64)
        };
    }
}

fn intact(b: &Block) -> bool {
    let words = b.size / 8;
    [0, words / 2, words - 1].iter().all(|&i| {
        // SAFETY: as in `fill`.
        unsafe { ((b.top - b.size) as *const u64).add(i).read() == b.pattern as u64 + i as u64 }
    })
}

/// The capacity of a new block: its class's size, or for a large block the chunk it was given
/// (its top is the chunk's header; the chunk's stack reaches down to `limit`).
fn capacity(top: usize, size: usize) -> usize {
    match class_for(size) {
        Some(k) => class_size(k),
        // SAFETY: a large block's top is the header of a chunk of this thread's chain.
        None => top - unsafe { (*(top as *const ChunkHeader)).limit },
    }
}

fn run_thread(thread: usize, ops: &[Op]) -> Result<(), String> {
    let stack = NativeStack::new(0);
    let entry = stackrt_heap_thread_enter(stack.addr(), 16);
    claim(entry - 16, entry, thread)?;
    let mut live: Vec<Block> = Vec::new();
    // The model's free lists: per class (LIFO) and the large blocks (most recent first).
    let mut free: Vec<Vec<(usize, usize)>> = vec![Vec::new(); 64];
    let mut free_large: Vec<(usize, usize)> = Vec::new();
    let mut allocs = 1u64;
    for (n, op) in ops.iter().enumerate() {
        match *op {
            Op::Alloc(size) => {
                allocs += 1;
                let expect = match class_for(size) {
                    Some(k) => free[k].pop(),
                    None => free_large
                        .iter()
                        .position(|&(_, cap)| cap >= size)
                        .map(|i| free_large.remove(i)),
                };
                let top = alloc_frame(size);
                if std::env::var_os("HEAP_MODEL_TRACE").is_some() {
                    eprintln!("t{thread} op{n} alloc {size} -> {top:#x} expect {expect:x?}");
                }
                if !top.is_multiple_of(GRANULE) {
                    return Err(format!("thread {thread}: block top {top:#x} not aligned"));
                }
                let cap = match expect {
                    Some((want, cap)) if want == top => cap,
                    Some((want, _)) => {
                        return Err(format!(
                            "thread {thread} op {n}: allocation of {size} bytes returned \
                             {top:#x}, the model expected the freed block {want:#x}"
                        ))
                    }
                    None => capacity(top, size),
                };
                if cap < size {
                    return Err(format!("thread {thread}: block of {cap} bytes for {size}"));
                }
                claim(top - cap, top, thread)?;
                let b = Block {
                    top,
                    size,
                    cap,
                    pattern: (thread << 40) | (n << 16),
                };
                fill(&b);
                live.push(b);
            }
            Op::Free(i) => {
                if live.is_empty() {
                    continue;
                }
                let b = live.swap_remove(i % live.len());
                if !intact(&b) {
                    return Err(format!(
                        "thread {thread} op {n}: block {:#x} of {} bytes was overwritten while \
                         live",
                        b.top, b.size
                    ));
                }
                release(b.top - b.cap);
                free_frame(b.top, b.size);
                match class_for(b.size) {
                    Some(k) => free[k].push((b.top, b.cap)),
                    None => free_large.insert(0, (b.top, b.cap)),
                }
            }
        }
    }
    for b in &live {
        if !intact(b) {
            return Err(format!("thread {thread}: block {:#x} overwritten", b.top));
        }
    }
    let counted = thread_frames();
    if counted != allocs {
        return Err(format!(
            "thread {thread}: {counted} frames counted, {allocs} allocated"
        ));
    }
    // The thread's memory goes back to the pool: forget its blocks.
    for b in &live {
        release(b.top - b.cap);
    }
    release(entry - 16);
    stackrt_heap_thread_exit();
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn the_allocator_behaves_as_its_model(
        threads in proptest::collection::vec(proptest::collection::vec(op(), 1..400), 1..4)
    ) {
        // A failed case (proptest then shrinks it) leaves its threads' blocks behind.
        LIVE.lock().unwrap().clear();
        let results: Vec<Result<(), String>> = std::thread::scope(|s| {
            let handles: Vec<_> = threads
                .iter()
                .enumerate()
                .map(|(i, ops)| s.spawn(move || run_thread(i, ops)))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for r in results {
            prop_assert!(r.is_ok(), "{}", r.unwrap_err());
        }
    }
}

/// The model can fail: a block handed out twice is caught by the pattern check.
#[test]
fn a_block_given_twice_is_caught() {
    let stack = NativeStack::new(0);
    let _ = stackrt_heap_thread_enter(stack.addr(), 16);
    let a = Block {
        top: alloc_frame(64),
        size: 64,
        cap: 64,
        pattern: 1 << 40,
    };
    fill(&a);
    free_frame(a.top, 64);
    let b = Block {
        top: alloc_frame(64),
        size: 64,
        cap: 64,
        pattern: 2 << 40,
    };
    assert_eq!(a.top, b.top, "a freed block is the next one of its class");
    fill(&b);
    assert!(!intact(&a));
    assert!(intact(&b));
    free_frame(b.top, 64);
    stackrt_heap_thread_exit();
}
