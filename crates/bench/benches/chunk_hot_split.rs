//! Micro-benchmark of the chunk runtime's "hot split": a call and return oscillating across a
//! chunk boundary, i.e. one overflow + one underflow of the runtime per iteration.
//!
//! Cases:
//! - `runtime_pair`: `ThreadChain::overflow` + `underflow` on a private runtime with the default
//!   caches (the thread's cache serves every overflow: no lock, no system call);
//! - `code_unlinked_pair`: the overflow, then the unlinking as emitted `lookahead` code does it
//!   (only header word 0 is marked; the next overflow links the same chunk again on the spot);
//! - `pool_pair`: the same with the thread caches disabled (`cache_min = cache_max = 0`): every
//!   underflow gives its chunk to the shared pool and every overflow takes it back, two lock
//!   operations per pair, still no system call;
//! - `entry_point_pair`: the cached pair through the `extern "C"` entry points the assembly
//!   handlers call (adds the thread-local lookup);
//! - `release_refault`: what reusing a chunk whose pages were given back costs: the
//!   `madvise(MADV_DONTNEED)` of a free chunk and the page faults of writing its pages again
//!   (the cost a naive runtime, or gcc's split stacks, pays with `mmap`/`munmap` per split).
//!
//! The runtime counts its own slow paths: after each case the bench prints the chunks carved
//! and the pool's lock operations, and it fails if a cached case carved more than its first
//! batch (two chunks: the first chunk and the one the split reuses) or touched the pool. To see
//! every system call instead, run `strace -f -c -e trace=mmap,munmap,mprotect,madvise cargo
//! bench -p bench --bench chunk_hot_split -- runtime_pair`.

use std::cell::UnsafeCell;
use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use stackrt::base::os::page_size;
use stackrt::chunk::arena::{release_pages, Arenas};
use stackrt::chunk::pool::FreeList;
use stackrt::chunk::stats::StatsSnapshot;
use stackrt::chunk::{
    runtime, stackrt_chunk_overflow, stackrt_chunk_thread_enter, stackrt_chunk_underflow,
    ChunkGeometry, ChunkHeader, Runtime, RuntimeConfig, ThreadChain, DEFAULT_CHUNK_SIZE, UNLINKED,
};

fn geometry() -> ChunkGeometry {
    ChunkGeometry::new(DEFAULT_CHUNK_SIZE, 0).expect("32 KiB is a page multiple")
}

fn private_runtime(cached: bool) -> Runtime {
    let mut cfg = RuntimeConfig::new(geometry(), 1 << 30, 60_000);
    cfg.count_stats = true;
    if !cached {
        cfg.cache_min = 0;
        cfg.cache_max = 0;
    }
    Runtime::new(cfg)
}

/// One overflow at 96 bytes below the first chunk's top, then the underflow back.
fn pair(rt: &Runtime, chain: &ThreadChain, first: *mut ChunkHeader) {
    let sp = first as usize - 96;
    let h = chain
        .overflow(rt, first, black_box(sp), black_box(2000))
        .expect("overflow");
    let back = chain.underflow(rt, h.as_ptr()).expect("underflow");
    debug_assert_eq!(back.as_ptr(), first);
}

/// The same pair as `lookahead` code does it: the return only marks the chunk.
fn code_pair(rt: &Runtime, chain: &ThreadChain, first: *mut ChunkHeader) {
    let sp = first as usize - 96;
    let h = chain
        .overflow(rt, first, black_box(sp), black_box(2000))
        .expect("overflow");
    // SAFETY: h is the chunk just linked; emitted code marks it the same way.
    unsafe { (*h.as_ptr()).thread_stack = UNLINKED };
}

fn report(name: &str, st: &StatsSnapshot) {
    eprintln!(
        "{name}: {} overflows, {} chunks carved, {} from the cache, {} pool takes, {} gives, \
         {} released",
        st.overflows,
        st.chunks_carved,
        st.chunks_reused,
        st.pool_takes,
        st.pool_gives,
        st.chunks_released
    );
}

/// After a cached hot split: the enter's one batch of 2 chunks was all that was carved, and
/// the pool was never locked.
fn assert_cached(name: &str, st: &StatsSnapshot) {
    report(name, st);
    assert_eq!(st.chunks_carved, 2, "{name}: the hot split carved chunks");
    assert_eq!(
        (st.pool_takes, st.pool_gives),
        (0, 0),
        "{name}: the hot split used the pool"
    );
    assert_eq!(
        st.chunks_reused, st.overflows,
        "{name}: an overflow missed the cache"
    );
}

/// The thread stack area the entry points need: 16-byte aligned, the budget in its first word.
#[repr(C, align(16))]
struct NativeStack(UnsafeCell<[u32; 4]>);

fn hot_split(c: &mut Criterion) {
    let mut g = c.benchmark_group("hot_split");

    let rt = private_runtime(true);
    let chain = ThreadChain::new();
    let first = chain.enter(&rt, 0x1000, 0).expect("enter").as_ptr();
    g.bench_function("runtime_pair", |b| b.iter(|| pair(&rt, &chain, first)));
    assert_cached("runtime_pair", &rt.stats().snapshot());
    chain.exit(&rt).expect("exit");

    let rt = private_runtime(true);
    let chain = ThreadChain::new();
    let first = chain.enter(&rt, 0x1000, 0).expect("enter").as_ptr();
    g.bench_function("code_unlinked_pair", |b| {
        b.iter(|| code_pair(&rt, &chain, first))
    });
    assert_cached("code_unlinked_pair", &rt.stats().snapshot());
    chain.exit(&rt).expect("exit");

    let rt = private_runtime(false);
    let chain = ThreadChain::new();
    let first = chain.enter(&rt, 0x1000, 0).expect("enter").as_ptr();
    g.bench_function("pool_pair", |b| b.iter(|| pair(&rt, &chain, first)));
    let st = rt.stats().snapshot();
    report("pool_pair", &st);
    // Carved: the first chunk, then the split's chunk at the first overflow; from then on every
    // underflow gives it to the pool and every overflow takes it back, resident.
    assert_eq!(st.chunks_carved, 2);
    assert_eq!(
        st.pool_gives, st.underflows,
        "every underflow gives to the pool"
    );
    assert_eq!(
        st.pool_takes,
        st.overflows - 1,
        "every later overflow takes from it"
    );
    assert_eq!(st.chunks_released, 0);
    chain.exit(&rt).expect("exit");

    // The process-wide runtime, through the entry points the assembly handlers call.
    let native = NativeStack(UnsafeCell::new([0; 4]));
    let first = stackrt_chunk_thread_enter(native.0.get() as usize, 0);
    g.bench_function("entry_point_pair", |b| {
        b.iter(|| {
            let h = stackrt_chunk_overflow(first, black_box(first as usize - 96), 2000);
            stackrt_chunk_underflow(h)
        })
    });
    let rt = runtime().expect("initialised by the enter above");
    assert_cached("entry_point_pair", &rt.stats().snapshot());

    // A free chunk whose pages go back to the system and are faulted in again.
    let p = page_size();
    let mut arenas = Box::new(Arenas::new());
    let (mut out, mut spill) = (FreeList::new(), FreeList::new());
    arenas
        .carve(
            DEFAULT_CHUNK_SIZE,
            0,
            1,
            4 * DEFAULT_CHUNK_SIZE,
            DEFAULT_CHUNK_SIZE,
            usize::MAX,
            &mut out,
            &mut spill,
        )
        .expect("carve");
    let h = out.pop().expect("one chunk");
    // SAFETY: h is a free chunk owned here; its limit word is constant.
    let limit = unsafe { (*h).limit };
    g.bench_function("release_refault", |b| {
        b.iter(|| {
            for a in (limit..h as usize).step_by(p) {
                // SAFETY: the stack pages of a chunk this bench owns and nothing else uses.
                unsafe { (a as *mut u64).write_volatile(1) };
            }
            // SAFETY: as above; nothing runs on the chunk.
            black_box(unsafe { release_pages(h, p) })
        })
    });
    // SAFETY: the chunk is not used any more.
    unsafe { arenas.unmap_all() };
    g.finish();
}

criterion_group!(benches, hot_split);
criterion_main!(benches);
