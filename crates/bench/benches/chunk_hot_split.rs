//! Micro-benchmark of the chunk runtime's "hot split": a call and return oscillating across a
//! chunk boundary, i.e. one overflow + one underflow of the runtime functions per iteration.
//!
//! Cases:
//! - `runtime_pair`: `ThreadChain::overflow` + `underflow` on a private runtime (the per-thread
//!   cache serves every overflow after the first);
//! - `entry_point_pair`: the same through the `extern "C"` entry points the assembly handlers
//!   call (adds the thread-local lookup);
//! - `no_cache_pair`: the same with the cache and the pool disabled (`cache_max = 0`,
//!   `pool_high_water = 0`): every overflow maps and every underflow unmaps, what a naive
//!   runtime (or gcc's split stacks, runtime-facts.md) pays;
//! - `mmap_touch_munmap`: one raw chunk mapping, a write to its top page, and the unmapping.
//!
//! System calls are counted by the runtime itself: after each case the bench prints the
//! `chunks_mapped`/`chunks_unmapped` statistics, and it fails if a cached case mapped more
//! than its two chunks (one per side of the split). To see every system call instead, run
//! `strace -f -c -e trace=mmap,munmap,mprotect cargo bench -p bench --bench chunk_hot_split
//! -- runtime_pair` (or `perf stat -e 'syscalls:sys_enter_mmap'` where tracepoints exist).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use stackrt::chunk::header::page_size;
use stackrt::chunk::{
    runtime, stackrt_chunk_overflow, stackrt_chunk_thread_enter, stackrt_chunk_underflow,
    ChunkGeometry, ChunkMapping, Runtime, RuntimeConfig, ThreadChain, DEFAULT_CHUNK_SIZE,
};

fn geometry() -> ChunkGeometry {
    ChunkGeometry::new(DEFAULT_CHUNK_SIZE, 0).expect("32 KiB is a page multiple")
}

fn private_runtime(cached: bool) -> Runtime {
    let mut cfg = RuntimeConfig::new(geometry(), 1 << 30, 60_000);
    cfg.count_stats = true;
    if !cached {
        cfg.cache_max = 0;
        cfg.pool_high_water = 0;
    }
    Runtime::new(cfg)
}

/// One overflow at 100 bytes below the first chunk's top, then the underflow back.
fn pair(rt: &Runtime, chain: &ThreadChain, first: *mut stackrt::chunk::ChunkHeader) {
    let sp = first as usize - 96;
    let h = chain
        .overflow(rt, first, black_box(sp), black_box(2000))
        .expect("overflow");
    let back = chain.underflow(rt, h.as_ptr()).expect("underflow");
    debug_assert_eq!(back.as_ptr(), first);
}

fn report(name: &str, rt: &Runtime) -> (u64, u64) {
    let st = rt.stats().snapshot();
    eprintln!(
        "{name}: {} overflows, {} chunks mapped, {} unmapped, {} reused",
        st.overflows, st.chunks_mapped, st.chunks_unmapped, st.chunks_reused
    );
    (st.chunks_mapped, st.chunks_unmapped)
}

fn hot_split(c: &mut Criterion) {
    let mut g = c.benchmark_group("hot_split");

    let rt = private_runtime(true);
    let chain = ThreadChain::new();
    let first = chain.enter(&rt, 0).expect("enter").as_ptr();
    g.bench_function("runtime_pair", |b| b.iter(|| pair(&rt, &chain, first)));
    let (mapped, unmapped) = report("runtime_pair", &rt);
    assert_eq!(
        (mapped, unmapped),
        (2, 0),
        "the hot split made system calls"
    );
    chain.exit(&rt).expect("exit");

    let rt = private_runtime(false);
    let chain = ThreadChain::new();
    let first = chain.enter(&rt, 0).expect("enter").as_ptr();
    g.bench_function("no_cache_pair", |b| b.iter(|| pair(&rt, &chain, first)));
    let (mapped, unmapped) = report("no_cache_pair", &rt);
    assert_eq!(mapped, unmapped + 1, "every pair maps and unmaps one chunk");
    chain.exit(&rt).expect("exit");

    // The process-wide runtime, through the entry points the assembly handlers call.
    let native = 0u64;
    let first = stackrt_chunk_thread_enter(&native as *const u64 as usize & !15);
    g.bench_function("entry_point_pair", |b| {
        b.iter(|| {
            let h = stackrt_chunk_overflow(first, black_box(first as usize - 96), 2000);
            stackrt_chunk_underflow(h)
        })
    });
    let rt = runtime().expect("initialised by the enter above");
    let st = rt.stats().snapshot();
    eprintln!(
        "entry_point_pair: {} chunks mapped, {} unmapped",
        st.chunks_mapped, st.chunks_unmapped
    );
    assert_eq!(st.chunks_mapped, 2, "the hot split made system calls");

    let p = page_size();
    g.bench_function("mmap_touch_munmap", |b| {
        b.iter(|| {
            let m = ChunkMapping::map(geometry()).expect("mmap");
            let top = (m.header().as_ptr() as usize - p) as *mut u8;
            // SAFETY: one page below the header is inside the mapping's usable stack.
            unsafe { top.write_volatile(1) };
            drop(black_box(m));
        })
    });
    g.finish();
}

criterion_group!(benches, hot_split);
criterion_main!(benches);
