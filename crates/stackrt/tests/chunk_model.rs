//! Model-based property test of the chunk chain, the per-thread caches and the shared pool:
//! random sequences of thread start, overflow, underflow, unlinking by compiled code (the
//! `lookahead` checkpoint's inline underflow, which only marks the chunk) and thread exit
//! (threads simulated as separate chains in one process) run against a plain-`Vec` model that
//! predicts every chunk's identity, every list's content, every error and every statistic.

use std::collections::HashSet;

use proptest::prelude::*;
use stackrt::chunk::{
    ChunkError, ChunkGeometry, ChunkHeader, Runtime, RuntimeConfig, ThreadChain, HEADER_SIZE,
    UNLINKED,
};
use stackrt::stats::StatsSnapshot;

#[derive(Clone, Debug)]
enum Op {
    Start,
    Exit(usize),
    /// Overflow on thread `t`, caller SP at `frac`/65535 of the way from limit to header.
    Overflow {
        t: usize,
        frac: u16,
        reserve: usize,
    },
    Underflow(usize),
    /// What the emitted `lookahead` code does when a call on a new chunk returns: SP and the
    /// chunk register go back to the previous chunk and word 0 is marked, without a call.
    CodeUnlink(usize),
    /// Overflow given a header that is not the thread's current chunk.
    WrongHeader(usize),
    /// Overflow with a caller SP below the chunk's limit.
    WildSp(usize),
}

fn op_strategy(capacity: usize) -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => Just(Op::Start),
        1 => any::<usize>().prop_map(Op::Exit),
        6 => (any::<usize>(), any::<u16>(), 0..=capacity + 64)
            .prop_map(|(t, frac, reserve)| Op::Overflow { t, frac, reserve }),
        3 => any::<usize>().prop_map(Op::Underflow),
        4 => any::<usize>().prop_map(Op::CodeUnlink),
        1 => any::<usize>().prop_map(Op::WrongHeader),
        1 => any::<usize>().prop_map(Op::WildSp),
    ]
}

/// What the model knows about one simulated thread.
#[derive(Default)]
struct MThread {
    /// Chain headers, first chunk first: the running ones, then those compiled code unlinked.
    chain: Vec<usize>,
    /// How many chunks of `chain` the code still runs on (the chunk register is the last).
    running: usize,
    /// Caller SPs of the overflows that linked chain[1..].
    sps: Vec<usize>,
    /// Cache, top of stack last.
    cache: Vec<usize>,
}

struct Model {
    cfg: RuntimeConfig,
    pool: Vec<usize>,
    /// Every chunk currently mapped (in chains, caches or the pool).
    live: HashSet<usize>,
    st: StatsSnapshot,
}

impl Model {
    fn limit_of(&self, h: usize) -> usize {
        h + HEADER_SIZE - self.cfg.geometry.chunk_size
    }

    /// Predicts acquire(): Ok(Some(h)) = reuse of h, Ok(None) = a new mapping, Err = MapLimit.
    fn acquire(&mut self, t: &mut MThread) -> Result<Option<usize>, ChunkError> {
        if let Some(h) = t.cache.pop() {
            self.st.chunks_reused += 1;
            return Ok(Some(h));
        }
        if let Some(h) = self.pool.pop() {
            self.st.chunks_reused += 1;
            return Ok(Some(h));
        }
        let per = self.cfg.geometry.mappings_per_chunk();
        if (self.live.len() + 1) * per > self.cfg.max_mappings {
            return Err(ChunkError::MapLimit {
                mappings: self.live.len() * per,
                max: self.cfg.max_mappings,
            });
        }
        self.st.chunks_mapped += 1;
        Ok(None)
    }

    fn give_back(&mut self, h: usize) {
        if self.pool.len() < self.cfg.pool_high_water {
            self.pool.push(h);
        } else {
            assert!(self.live.remove(&h));
            self.st.chunks_unmapped += 1;
        }
    }

    fn link(&mut self) {
        self.st.chunks_in_use += 1;
        self.st.peak_chunks_in_use = self.st.peak_chunks_in_use.max(self.st.chunks_in_use);
    }

    /// Unlinks the thread's newest chunk as an underflow does.
    fn unlink_top(&mut self, t: &mut MThread) {
        let h = t.chain.pop().unwrap();
        t.sps.pop();
        if t.cache.len() < self.cfg.cache_max {
            t.cache.push(h);
        } else {
            self.give_back(h);
        }
        self.st.underflows += 1;
        self.st.chunks_in_use -= 1;
        t.running = t.running.min(t.chain.len());
    }

    /// What the runtime does first on each entry: the underflows of the chunks compiled code
    /// unlinked.
    fn reclaim(&mut self, t: &mut MThread) {
        while t.chain.len() > t.running {
            self.unlink_top(t);
        }
    }

    fn stack_limit_err(&self, t: &MThread) -> Option<ChunkError> {
        let cs = self.cfg.geometry.chunk_size;
        let in_use = t.chain.len() * cs;
        (in_use + cs > self.cfg.stack_limit).then_some(ChunkError::StackLimit {
            in_use,
            chunk_size: cs,
            limit: self.cfg.stack_limit,
        })
    }
}

/// Resolves a newly acquired chunk against the model's prediction.
fn settle(model: &mut Model, predicted: Option<usize>, got: usize) {
    match predicted {
        Some(h) => assert_eq!(got, h, "reused chunk is not the predicted LIFO one"),
        None => assert!(
            model.live.insert(got),
            "fresh mapping {got:#x} is already live"
        ),
    }
}

/// Writes an ownership marker into the lowest word of a chunk's usable stack.
fn mark(model: &Model, h: usize, owner: usize) {
    let p = model.limit_of(h) as *mut usize;
    // SAFETY: the chunk is linked into a chain, so its usable area is mapped and writable and
    // used by nobody else.
    unsafe { p.write(owner) };
}

fn check(rt: &Runtime, threads: &[(ThreadChain, MThread, usize)], model: &Model) {
    let mut seen = HashSet::new();
    for (chain, m, owner) in threads {
        let mut expect_chain: Vec<usize> = m.chain.clone();
        expect_chain.reverse();
        assert_eq!(
            chain.chain_headers(),
            expect_chain,
            "chain of thread {owner}"
        );
        let mut expect_cache = m.cache.clone();
        expect_cache.reverse();
        assert_eq!(
            chain.cache_headers(),
            expect_cache,
            "cache of thread {owner}"
        );
        assert!(chain.cache_len() <= model.cfg.cache_max);
        assert_eq!(chain.depth(), m.chain.len());
        for (i, &h) in m.chain.iter().enumerate() {
            let hd = h as *const ChunkHeader;
            // SAFETY: linked chunks are mapped.
            let (limit, prev, prev_sp) = unsafe { ((*hd).limit, (*hd).prev_header, (*hd).prev_sp) };
            assert_eq!(limit, model.limit_of(h));
            if i == 0 {
                assert!(prev.is_null());
                assert_eq!(prev_sp, 0);
            } else {
                assert_eq!(prev as usize, m.chain[i - 1]);
                assert_eq!(prev_sp, m.sps[i - 1]);
            }
            // SAFETY: linked chunks are mapped.
            let word0 = unsafe { (*hd).thread_stack };
            assert_eq!(word0 == UNLINKED, i >= m.running, "word 0 of chain[{i}]");
            // SAFETY: linked chunks are mapped; the marker was written when linked.
            let marker = unsafe { (model.limit_of(h) as *const usize).read() };
            assert_eq!(marker, *owner, "chunk {h:#x} was overwritten: used twice");
        }
        for &h in m.chain.iter().chain(&m.cache) {
            assert!(seen.insert(h), "chunk {h:#x} is in two places");
        }
    }
    let mut expect_pool = model.pool.clone();
    expect_pool.reverse();
    assert_eq!(rt.pool_headers(), expect_pool, "pool");
    assert!(rt.pool_len() <= model.cfg.pool_high_water);
    for &h in &model.pool {
        assert!(seen.insert(h), "pooled chunk {h:#x} is also elsewhere");
    }
    // No chunk lost: everything mapped is in exactly one chain, cache or the pool.
    assert_eq!(seen, model.live, "mapped chunks vs chains+caches+pool");
    assert_eq!(rt.live_chunks(), model.live.len());
    let st = rt.stats().snapshot();
    assert_eq!(st, model.st, "statistics");
    assert_eq!(
        st.chunks_mapped - st.chunks_unmapped,
        model.live.len() as u64
    );
    assert_eq!(
        st.chunks_mapped + st.chunks_reused,
        st.overflows + st.thread_enters
    );
}

fn run(ops: Vec<Op>, guard: bool, cache_max: usize, pool_hw: usize) {
    let page = stackrt::chunk::header::page_size();
    let geometry = ChunkGeometry::new(2 * page, if guard { page } else { 0 }).unwrap();
    let mut cfg = RuntimeConfig::new(geometry, 5 * geometry.chunk_size, 0);
    cfg.cache_max = cache_max;
    cfg.pool_high_water = pool_hw;
    cfg.max_mappings = 14 * geometry.mappings_per_chunk();
    let rt = Runtime::new(cfg);
    let mut model = Model {
        cfg,
        pool: Vec::new(),
        live: HashSet::new(),
        st: StatsSnapshot::default(),
    };
    let capacity = geometry.capacity();
    let mut threads: Vec<(ThreadChain, MThread, usize)> = Vec::new();
    let mut next_owner = 1usize;

    for op in ops {
        match op {
            Op::Start => {
                let chain = ThreadChain::new();
                let mut m = MThread::default();
                let pred = model.acquire(&mut m);
                let got = chain.enter(&rt, 0x1000);
                match pred {
                    Err(e) => assert_eq!(got.unwrap_err(), e),
                    Ok(p) => {
                        let h = got.unwrap().as_ptr() as usize;
                        settle(&mut model, p, h);
                        model.st.thread_enters += 1;
                        model.link();
                        m.chain.push(h);
                        m.running = 1;
                        mark(&model, h, next_owner);
                        threads.push((chain, m, next_owner));
                        next_owner += 1;
                    }
                }
            }
            Op::Exit(i) if !threads.is_empty() => {
                let (chain, mut m, _) = threads.swap_remove(i % threads.len());
                chain.exit(&rt).unwrap();
                model.reclaim(&mut m);
                while let Some(h) = m.cache.pop() {
                    model.give_back(h);
                }
                model.st.chunks_in_use -= m.chain.len() as u64;
                while let Some(h) = m.chain.pop() {
                    model.give_back(h);
                }
                model.st.thread_exits += 1;
                assert_eq!(chain.exit(&rt), Err(ChunkError::NotEntered));
                assert!(chain.top().is_null());
            }
            Op::Overflow { t, frac, reserve } if !threads.is_empty() => {
                let n = threads.len();
                let (chain, m, owner) = &mut threads[t % n];
                let top = m.chain[m.running - 1];
                let limit = model.limit_of(top);
                let sp = limit + (top - limit) * frac as usize / 65535;
                let got = chain.overflow(&rt, top as *mut ChunkHeader, sp, reserve);
                model.reclaim(m);
                if reserve > capacity {
                    assert_eq!(
                        got.unwrap_err(),
                        ChunkError::ReserveTooLarge { reserve, capacity }
                    );
                } else if let Some(e) = model.stack_limit_err(m) {
                    assert_eq!(got.unwrap_err(), e);
                } else {
                    match model.acquire(m) {
                        Err(e) => assert_eq!(got.unwrap_err(), e),
                        Ok(p) => {
                            let h = got.unwrap().as_ptr() as usize;
                            settle(&mut model, p, h);
                            model.st.overflows += 1;
                            model.link();
                            let waste = (sp - limit) as u64;
                            model.st.wasted_bytes_total += waste;
                            model.st.wasted_bytes_max = model.st.wasted_bytes_max.max(waste);
                            m.sps.push(sp);
                            m.chain.push(h);
                            m.running = m.chain.len();
                            let below: usize =
                                m.chain.windows(2).zip(&m.sps).map(|(w, &s)| w[0] - s).sum();
                            model.st.peak_stack_bytes =
                                model.st.peak_stack_bytes.max((below + reserve) as u64);
                            mark(&model, h, *owner);
                        }
                    }
                }
            }
            Op::Underflow(t) if !threads.is_empty() => {
                let n = threads.len();
                let (chain, m, _) = &mut threads[t % n];
                let top = m.chain[m.running - 1];
                let got = chain.underflow(&rt, top as *mut ChunkHeader);
                model.reclaim(m);
                if m.chain.len() == 1 {
                    assert_eq!(got.unwrap_err(), ChunkError::UnderflowFirstChunk);
                } else {
                    model.unlink_top(m);
                    assert_eq!(got.unwrap().as_ptr() as usize, *m.chain.last().unwrap());
                }
            }
            Op::CodeUnlink(t) if !threads.is_empty() => {
                let n = threads.len();
                let (_, m, _) = &mut threads[t % n];
                if m.running > 1 {
                    let h = m.chain[m.running - 1] as *mut ChunkHeader;
                    // SAFETY: a running chunk of the chain: mapped; the emitted code writes
                    // this word the same way.
                    unsafe { (*h).thread_stack = UNLINKED };
                    m.running -= 1;
                }
            }
            Op::WrongHeader(t) if !threads.is_empty() => {
                let n = threads.len();
                let (chain, m, _) = &threads[t % n];
                let top = *m.chain.last().unwrap();
                // A chunk compiled code unlinked is no longer one the code can run on.
                if m.running < m.chain.len() {
                    let unlinked = m.chain[m.running];
                    let got = chain.overflow(&rt, unlinked as *mut ChunkHeader, unlinked - 64, 0);
                    assert_eq!(
                        got.unwrap_err(),
                        ChunkError::ChainMismatch {
                            expected: top,
                            got: unlinked
                        }
                    );
                }
                // Nor is one below a chunk the code still runs on.
                if m.running >= 2 {
                    let older = m.chain[m.running - 2];
                    let got = chain.underflow(&rt, older as *mut ChunkHeader);
                    assert_eq!(
                        got.unwrap_err(),
                        ChunkError::ChainMismatch {
                            expected: top,
                            got: older
                        }
                    );
                }
                let wrong = top ^ 0x40;
                let got = chain.overflow(&rt, wrong as *mut ChunkHeader, top, 0);
                assert_eq!(
                    got.unwrap_err(),
                    ChunkError::ChainMismatch {
                        expected: top,
                        got: wrong
                    }
                );
                let got = chain.underflow(&rt, wrong as *mut ChunkHeader);
                assert_eq!(
                    got.unwrap_err(),
                    ChunkError::ChainMismatch {
                        expected: top,
                        got: wrong
                    }
                );
            }
            Op::WildSp(t) if !threads.is_empty() => {
                let n = threads.len();
                let (chain, m, _) = &mut threads[t % n];
                let top = m.chain[m.running - 1];
                let limit = model.limit_of(top);
                let got = chain.overflow(&rt, top as *mut ChunkHeader, limit - 8, 0);
                model.reclaim(m);
                assert_eq!(
                    got.unwrap_err(),
                    ChunkError::BadStackPointer {
                        sp: limit - 8,
                        limit,
                        header: top
                    }
                );
                let got = chain.overflow(&rt, top as *mut ChunkHeader, top + 8, 0);
                assert_eq!(
                    got.unwrap_err(),
                    ChunkError::BadStackPointer {
                        sp: top + 8,
                        limit,
                        header: top
                    }
                );
            }
            _ => {}
        }
        check(&rt, &threads, &model);
    }
    // Every thread ends; then only the pool holds chunks.
    for (chain, _, _) in &threads {
        chain.exit(&rt).unwrap();
    }
    assert_eq!(rt.live_chunks(), rt.pool_len());
    assert_eq!(rt.stats().snapshot().chunks_in_use, 0);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn chain_cache_and_pool_follow_the_model(
        ops in prop::collection::vec(op_strategy(8192 - 128), 1..160),
        guard in any::<bool>(),
        cache_max in 0usize..4,
        pool_hw in 0usize..5,
    ) {
        run(ops, guard, cache_max, pool_hw);
    }
}

/// Runs 10 000 overflows at one boundary of a fresh thread, each followed by `unlink` (given
/// the chain, the runtime and the new chunk); returns the runtime and the chain, still entered.
fn hot_split(
    unlink: impl Fn(&ThreadChain, &Runtime, *mut ChunkHeader, *mut ChunkHeader),
) -> (Runtime, ThreadChain) {
    let page = stackrt::chunk::header::page_size();
    let geometry = ChunkGeometry::new(8 * page, 0).unwrap();
    let rt = Runtime::new(RuntimeConfig::new(geometry, 1 << 20, 1000));
    let chain = ThreadChain::new();
    let first = chain.enter(&rt, 0x1000).unwrap();
    let sp = first.as_ptr() as usize - 100;
    let mut seen = HashSet::new();
    for _ in 0..10_000 {
        let h = chain.overflow(&rt, first.as_ptr(), sp, 1000).unwrap();
        seen.insert(h.as_ptr() as usize);
        unlink(&chain, &rt, h.as_ptr(), first.as_ptr());
    }
    let st = rt.stats().snapshot();
    assert_eq!(seen.len(), 1);
    assert_eq!(st.chunks_mapped, 2);
    assert_eq!(st.chunks_reused, 9_999);
    (rt, chain)
}

/// The hot split: overflow/underflow pairs at one boundary reuse one cached chunk and map
/// nothing after the first.
#[test]
fn hot_split_maps_once() {
    let (rt, chain) = hot_split(|chain, rt, h, first| {
        assert_eq!(chain.underflow(rt, h).unwrap().as_ptr(), first);
    });
    let st = rt.stats().snapshot();
    assert_eq!((st.overflows, st.underflows), (10_000, 10_000));
    chain.exit(&rt).unwrap();
}

/// The hot split as the emitted `lookahead` code does it: the unlinking is only the mark, and
/// the next overflow does its bookkeeping. Same chunks, same statistics as with the handler.
#[test]
fn hot_split_unlinked_by_code_maps_once() {
    let (rt, chain) = hot_split(|_, _, h, _| {
        // SAFETY: h is the newest chunk of the chain, mapped.
        unsafe { (*h).thread_stack = UNLINKED };
    });
    let st = rt.stats().snapshot();
    // The last unlinking is still pending; the exit does it.
    assert_eq!((st.overflows, st.underflows), (10_000, 9_999));
    assert_eq!(chain.depth(), 2);
    chain.exit(&rt).unwrap();
    let st = rt.stats().snapshot();
    assert_eq!((st.overflows, st.underflows), (10_000, 10_000));
    assert_eq!(st.chunks_in_use, 0);
}
