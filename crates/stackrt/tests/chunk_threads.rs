//! The process-wide chunk runtime through its `extern "C"` entry points, from real threads:
//! the program-defined chunk size symbol is honoured, concurrent overflow/underflow walks never
//! hand one chunk to two threads, statistics add up across threads, and a thread that ends
//! without `stackrt_chunk_thread_exit` (as after `sthread_exit`) still gives its chunks back.
//!
//! One `#[test]` only: the runtime and its counters are process-wide.

use std::collections::HashSet;
use std::sync::{Arc, Barrier, Mutex};

use stackrt::chunk::{
    program_chunk_size, runtime, stackrt_chunk_current, stackrt_chunk_overflow, stackrt_chunk_size,
    stackrt_chunk_thread_enter, stackrt_chunk_thread_exit, stackrt_chunk_underflow, ChunkHeader,
    HEADER_SIZE,
};

/// This program's chunk size, as a compiled C-- program would define it.
#[no_mangle]
pub static __cmm_chunk_size: u32 = 16384;

/// A deterministic pseudo-random walk: overflow when `r % 8 < 4`, else underflow (if possible).
fn walk(seed: u64, steps: usize, owner: u64, seen: &Mutex<HashSet<usize>>) -> usize {
    let native = 0u64;
    let first = stackrt_chunk_thread_enter(&native as *const u64 as usize & !15);
    assert_eq!(stackrt_chunk_current(), first);
    let mut chain: Vec<*mut ChunkHeader> = vec![first];
    let mut state = seed;
    let mut max_depth = 1;
    let mark = |h: *mut ChunkHeader, depth: usize| {
        // SAFETY: a linked chunk of this thread; its usable area is mapped and ours.
        unsafe {
            let limit = (*h).limit;
            let words = (h as usize - limit) / 8;
            for i in (0..words).step_by(97) {
                ((limit + i * 8) as *mut u64).write(owner << 32 | depth as u64);
            }
        }
    };
    let verify = |h: *mut ChunkHeader, depth: usize| {
        // SAFETY: as in `mark`.
        unsafe {
            let limit = (*h).limit;
            let words = (h as usize - limit) / 8;
            for i in (0..words).step_by(97) {
                let v = ((limit + i * 8) as *const u64).read();
                assert_eq!(
                    v,
                    owner << 32 | depth as u64,
                    "chunk {h:?} was used by another"
                );
            }
        }
    };
    mark(first, 0);
    for _ in 0..steps {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let r = (state >> 33) as usize;
        let top = *chain.last().unwrap();
        if r % 8 < 4 || chain.len() == 1 {
            // SAFETY: top is linked; reading its limit.
            let limit = unsafe { (*top).limit };
            let sp = (top as usize - (r % 4000)) & !15;
            let sp = sp.max(limit);
            let new = stackrt_chunk_overflow(top, sp, r % 12000);
            // SAFETY: new is the header of a freshly linked chunk.
            unsafe {
                assert_eq!((*new).prev_header, top);
                assert_eq!((*new).prev_sp, sp);
                assert_eq!((*new).limit, new as usize + HEADER_SIZE - 16384);
            }
            seen.lock().unwrap().insert(new as usize);
            chain.push(new);
            mark(new, chain.len() - 1);
            max_depth = max_depth.max(chain.len());
        } else {
            verify(top, chain.len() - 1);
            // SAFETY: top is linked; read prev_sp before the call as the handlers must.
            let prev_sp = unsafe { (*top).prev_sp };
            let prev = stackrt_chunk_underflow(top);
            chain.pop();
            assert_eq!(prev, *chain.last().unwrap());
            assert!(prev_sp <= prev as usize);
        }
        assert_eq!(stackrt_chunk_current(), *chain.last().unwrap());
    }
    for (d, &h) in chain.iter().enumerate() {
        verify(h, d);
    }
    max_depth
}

#[test]
fn entry_points_from_many_threads() {
    std::env::set_var("STACKRT_STATS", "1");
    assert_eq!(program_chunk_size(), Some(16384));

    // Phase 1: eight threads walk concurrently, then exit explicitly.
    let seen = Arc::new(Mutex::new(HashSet::new()));
    let barrier = Arc::new(Barrier::new(8));
    let handles: Vec<_> = (0..8u64)
        .map(|i| {
            let seen = Arc::clone(&seen);
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                barrier.wait();
                let d = walk(i * 7919 + 1, 3000, i + 1, &seen);
                stackrt_chunk_thread_exit();
                assert!(stackrt_chunk_current().is_null());
                d
            })
        })
        .collect();
    let depths: Vec<usize> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert!(
        depths.iter().all(|&d| d > 5),
        "walks too shallow to test anything: {depths:?}"
    );
    assert_eq!(stackrt_chunk_size(), 16384);

    let rt = runtime().expect("initialised by the threads");
    assert_eq!(rt.config().geometry.chunk_size, 16384);
    assert!(rt.config().count_stats);
    let st = rt.stats().snapshot();
    assert_eq!(st.thread_enters, 8);
    assert_eq!(st.thread_exits, 8);
    assert_eq!(st.chunks_in_use, 0);
    assert_eq!(
        st.chunks_mapped + st.chunks_reused,
        st.overflows + st.thread_enters
    );
    assert_eq!(
        st.chunks_mapped - st.chunks_unmapped,
        rt.live_chunks() as u64
    );
    assert_eq!(
        rt.live_chunks(),
        rt.pool_len(),
        "all chunks back in the pool"
    );
    assert!(rt.pool_len() <= rt.config().pool_high_water);
    assert!(st.peak_chunks_in_use >= *depths.iter().max().unwrap() as u64);
    assert!(
        st.chunks_reused > st.chunks_mapped,
        "caches and pool not used: {st:?}"
    );

    // Phase 2: a thread that ends without stackrt_chunk_thread_exit (sthread_exit's path).
    let before = rt.stats().snapshot();
    std::thread::spawn(|| {
        let native = 0u64;
        let first = stackrt_chunk_thread_enter(&native as *const u64 as usize & !15);
        let a = stackrt_chunk_overflow(first, first as usize - 64, 100);
        let _b = stackrt_chunk_overflow(a, a as usize - 64, 100);
    })
    .join()
    .unwrap();
    let after = rt.stats().snapshot();
    assert_eq!(
        after.thread_exits,
        before.thread_exits + 1,
        "exit guard did not run"
    );
    assert_eq!(after.chunks_in_use, 0);
    assert_eq!(rt.live_chunks(), rt.pool_len());
}
