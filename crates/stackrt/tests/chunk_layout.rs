//! The chunk ABI in numbers: header offsets and sizes (the contract with the compiler's emitted
//! sequences, hand-checked for i686 and x86-64), capacities, geometry checks, byte-count
//! parsing; and what chunks carved from arenas really look like in `/proc/self/maps`: unguarded
//! chunks share their arena's mapping, a guarded chunk costs two (guard `---p`, chunk `rw-p`),
//! a block over half an arena gets its own, an arena's tail is spilled as standard chunks, and
//! a released chunk's stack pages go back to the system.

use stackrt::base::os::page_size;
use stackrt::chunk::arena::{release_pages, Arenas};
use stackrt::chunk::header::{
    GeometryError, OFF_CHECK, OFF_LIMIT, OFF_LINK, OFF_MAP_BASE, OFF_MAP_LEN, OFF_PREV_HEADER,
    OFF_PREV_SP, OFF_RESUME, OFF_THREAD_STACK,
};
use stackrt::chunk::pool::FreeList;
use stackrt::chunk::{
    chunk_capacity, parse_bytes, ChunkGeometry, ChunkHeader, Runtime, RuntimeConfig, ThreadChain,
    CHECK_SLACK, HEADER_SIZE, UNLINKED,
};

#[test]
fn header_offsets_are_the_documented_abi() {
    let got = [
        OFF_THREAD_STACK,
        OFF_PREV_SP,
        OFF_PREV_HEADER,
        OFF_LIMIT,
        OFF_RESUME,
        OFF_MAP_BASE,
        OFF_MAP_LEN,
        OFF_LINK,
    ];
    #[cfg(target_pointer_width = "64")]
    {
        assert_eq!(got, [0, 8, 16, 24, 32, 40, 48, 56]);
        assert_eq!(HEADER_SIZE, 64);
        // 32768 - 64 - 16
        assert_eq!(chunk_capacity(32768), 32688);
    }
    #[cfg(target_pointer_width = "32")]
    {
        // Thesis Figure 3.4: [EBP] thread stack, [EBP+4] previous ESP, [EBP+8] previous EBP.
        assert_eq!(got, [0, 4, 8, 12, 16, 20, 24, 28]);
        assert_eq!(HEADER_SIZE, 32);
        // 32768 - 32 - 16
        assert_eq!(chunk_capacity(32768), 32720);
    }
    assert_eq!(CHECK_SLACK, 16);
    assert_eq!(HEADER_SIZE % 16, 0);
    // lookahead's check word is word 4 (the compiler's ChunkHeaderLayout::check).
    assert_eq!(OFF_CHECK, 4 * core::mem::size_of::<usize>());
    // What `mov [chunk_reg], -1` stores on either target (the compiler's UNLINKED_MARK).
    assert_eq!(UNLINKED, (-1isize) as usize);
}

#[test]
fn geometry_is_checked() {
    let p = page_size();
    assert_eq!(
        ChunkGeometry::new(p + 8, 0),
        Err(GeometryError::ChunkSizeNotPages {
            chunk_size: p + 8,
            page_size: p
        })
    );
    assert_eq!(
        ChunkGeometry::new(0, 0),
        Err(GeometryError::ChunkSizeNotPages {
            chunk_size: 0,
            page_size: p
        })
    );
    assert_eq!(
        ChunkGeometry::new(2 * p, 100),
        Err(GeometryError::GuardNotPages {
            guard_size: 100,
            page_size: p
        })
    );
    let g = ChunkGeometry::new(8 * p, p).unwrap();
    assert_eq!(g.map_len(), 9 * p);
    assert_eq!(g.mappings_per_chunk(), 2);
    assert_eq!(
        ChunkGeometry::new(8 * p, 0).unwrap().mappings_per_chunk(),
        1
    );
}

#[test]
fn byte_counts_parse() {
    assert_eq!(parse_bytes("8388608"), Some(8388608));
    assert_eq!(parse_bytes("64K"), Some(65536));
    assert_eq!(parse_bytes("64kib"), Some(65536));
    assert_eq!(parse_bytes(" 3M "), Some(3 << 20));
    assert_eq!(parse_bytes("1G"), Some(1 << 30));
    assert_eq!(parse_bytes("1gb"), Some(1 << 30));
    assert_eq!(parse_bytes(""), None);
    assert_eq!(parse_bytes("M"), None);
    assert_eq!(parse_bytes("12X"), None);
    assert_eq!(parse_bytes("-5"), None);
    assert_eq!(parse_bytes("99999999999999999999999"), None);
}

/// One line of `/proc/self/maps`: start, end, permissions.
type MapLine = (usize, usize, String);

/// Held by every test that maps memory and reads `/proc/self/maps`, so that one test's
/// mappings never appear in, or take the address ranges of, another's.
static MAPPINGS: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn lock_mappings() -> std::sync::MutexGuard<'static, ()> {
    MAPPINGS.lock().unwrap_or_else(|e| e.into_inner())
}

fn maps() -> Vec<MapLine> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    maps.lines()
        .map(|line| {
            let mut f = line.split_whitespace();
            let (a, b) = f.next().unwrap().split_once('-').unwrap();
            (
                usize::from_str_radix(a, 16).unwrap(),
                usize::from_str_radix(b, 16).unwrap(),
                f.next().unwrap().to_string(),
            )
        })
        .collect()
}

/// The (unclipped) maps lines that intersect any of the `[lo, hi)` ranges.
fn lines_touching(ranges: &[(usize, usize)]) -> Vec<MapLine> {
    maps()
        .into_iter()
        .filter(|(a, b, _)| ranges.iter().any(|&(lo, hi)| *a < hi && *b > lo))
        .collect()
}

/// The maps line holding `addr`.
fn line_at(addr: usize) -> MapLine {
    maps()
        .into_iter()
        .find(|(a, b, _)| *a <= addr && addr < *b)
        .unwrap_or_else(|| panic!("{addr:#x} is not mapped"))
}

/// A chunk's constant header words: (map_base, map_len, limit).
fn block_of(h: *mut ChunkHeader) -> (usize, usize, usize) {
    // SAFETY: callers pass headers of live chunks; header pages are always mapped.
    unsafe { ((*h).map_base, (*h).map_len, (*h).limit) }
}

/// Checks a chunk's layout: header at the top of its block, 16-byte aligned, limit above the
/// guard, and every usable stack byte writable.
fn check_layout(h: *mut ChunkHeader, size: usize, guard: usize) {
    let (map_base, map_len, limit) = block_of(h);
    assert_eq!(map_base % page_size(), 0);
    assert_eq!(map_len, guard + size);
    assert_eq!(limit, map_base + guard);
    assert_eq!(h as usize, map_base + guard + size - HEADER_SIZE);
    assert_eq!(
        h as usize % 16,
        0,
        "a fresh chunk's SP (= header) must be 16-byte aligned"
    );
    for a in (limit..h as usize).step_by(64) {
        // SAFETY: the usable stack of a chunk linked into the caller's chain.
        unsafe { (a as *mut u64).write(a as u64) };
    }
}

/// A private runtime: standard chunks of 2 pages, the given guard and arena size, caches that
/// refill one chunk at a time (capacity 2, so `cap / 2` = 1), no limits.
fn runtime(guard: usize, arena_blocks: usize) -> Runtime {
    let p = page_size();
    let geometry = ChunkGeometry::new(2 * p, guard).unwrap();
    let mut cfg = RuntimeConfig::new(geometry, usize::MAX / 2, usize::MAX / 2);
    cfg.arena_size = arena_blocks * geometry.map_len();
    cfg.cache_min = 2;
    cfg.cache_max = 2;
    Runtime::new(cfg)
}

/// Enters and overflows until the chain is `depth` chunks deep (standard chunks); returns the
/// headers, first first.
fn dive(rt: &Runtime, chain: &ThreadChain, ts: usize, depth: usize) -> Vec<*mut ChunkHeader> {
    let mut hs = vec![chain.enter(rt, ts, 0).unwrap().as_ptr()];
    while hs.len() < depth {
        let cur = *hs.last().unwrap();
        hs.push(
            chain
                .overflow(rt, cur, cur as usize - 64, 0)
                .unwrap()
                .as_ptr(),
        );
    }
    hs
}

/// Under `lookahead` every link writes the check word, `limit + bias` (the first chunk, an
/// overflow's and a hot split's relink); otherwise word 4 is 0 (the MMU mechanisms' resume).
#[test]
fn links_write_the_check_word() {
    let _maps = lock_mappings();
    for bias in [None, Some(0), Some(8240)] {
        let p = page_size();
        let geometry = ChunkGeometry::new(4 * p, 0).unwrap();
        let mut cfg = RuntimeConfig::new(geometry, usize::MAX / 2, usize::MAX / 2);
        cfg.check_bias = bias;
        let rt = Runtime::new(cfg);
        let chain = ThreadChain::new();
        let want = |h: *mut ChunkHeader| {
            // SAFETY: a linked chunk's header, mapped.
            let limit = unsafe { (*h).limit };
            bias.map_or(0, |b| limit + b)
        };
        let hs = dive(&rt, &chain, 0x1000, 3);
        for &h in &hs {
            // SAFETY: as above.
            assert_eq!(unsafe { (*h).resume }, want(h), "bias {bias:?}");
        }
        // Compiled code unlinks the top chunk by itself; the next overflow relinks it (the
        // hot split) and writes the word again.
        // SAFETY: as above; the mark is what the emitted unlink stores.
        let top = hs[2];
        unsafe {
            (*top).thread_stack = UNLINKED;
            (*top).resume = 1;
        }
        let again = chain
            .overflow(&rt, hs[1], hs[1] as usize - 64, 0)
            .unwrap()
            .as_ptr();
        assert_eq!(again, hs[2], "the hot split relinks the same chunk");
        // SAFETY: as above.
        assert_eq!(unsafe { (*again).resume }, want(again), "bias {bias:?}");
        chain.exit(&rt).unwrap();
    }
}

/// 200 unguarded chunks from arenas of 64 blocks: 4 arenas, carved back to back, and at most 4
/// lines in `/proc/self/maps` (fewer where the kernel merged adjacent arenas), not 200.
#[test]
fn unguarded_chunks_share_their_arena_mapping() {
    let _maps = lock_mappings();
    let p = page_size();
    let rt = runtime(0, 64);
    let chain = ThreadChain::new();
    let hs = dive(&rt, &chain, 0x1000, 200);
    assert_eq!(rt.arena_usage(), (4, 4 * 64 * 2 * p, 200 * 2 * p));
    assert_eq!(rt.stats().snapshot().chunks_carved, 200);
    for (j, &h) in hs.iter().enumerate() {
        check_layout(h, 2 * p, 0);
        if j % 64 != 0 {
            assert_eq!(
                block_of(h).0,
                block_of(hs[j - 1]).0 + 2 * p,
                "chunk {j} not next"
            );
        }
    }
    let blocks: Vec<(usize, usize)> = hs
        .iter()
        .map(|&h| (block_of(h).0, block_of(h).0 + 2 * p))
        .collect();
    let lines = lines_touching(&blocks);
    assert!(!lines.is_empty() && lines.len() <= 4, "{lines:x?}");
    assert!(lines.iter().all(|l| l.2 == "rw-p"), "{lines:x?}");
    chain.exit(&rt).unwrap();
}

/// Guarded chunks: each guard page splits the arena, so 20 chunks are 40 lines, each guard
/// exactly its page and `---p`, each chunk `rw-p` from its limit to the next guard (the last
/// one on into the arena's uncarved rest).
#[test]
fn guarded_chunks_cost_two_mappings_each() {
    let _maps = lock_mappings();
    let p = page_size();
    let rt = runtime(p, 32);
    assert_eq!(rt.config().geometry.mappings_per_chunk(), 2);
    let chain = ThreadChain::new();
    let hs = dive(&rt, &chain, 0x1000, 20);
    assert_eq!(rt.arena_usage(), (1, 32 * 3 * p, 20 * 3 * p));
    for (j, &h) in hs.iter().enumerate() {
        check_layout(h, 2 * p, p);
        let (map_base, _, limit) = block_of(h);
        assert_eq!(
            line_at(map_base),
            (map_base, map_base + p, "---p".to_string()),
            "guard {j}"
        );
        let (a, b, perms) = line_at(limit);
        assert_eq!((a, perms.as_str()), (limit, "rw-p"), "chunk {j}");
        if j + 1 < hs.len() {
            assert_eq!(b, map_base + 3 * p, "chunk {j} ends at the next guard");
            assert_eq!(block_of(hs[j + 1]).0, map_base + 3 * p);
        } else {
            assert!(b >= map_base + 3 * p);
        }
    }
    let blocks: Vec<(usize, usize)> = hs
        .iter()
        .map(|&h| (block_of(h).0, block_of(h).0 + 3 * p))
        .collect();
    assert_eq!(lines_touching(&blocks).len(), 40);
    chain.exit(&rt).unwrap();
}

/// Size classes in an arena of 8 standard blocks (16 pages; caches of one chunk): a class-3
/// block (16 pages) is over half an arena and gets a mapping of its own; classes 0-2 are
/// carved from the arena's bump pointer; when the rest of an arena is too small for a block,
/// it is carved into standard chunks for the pool's released list (class 0) and a new arena
/// is mapped.
#[test]
fn large_blocks_and_arena_tails() {
    let _maps = lock_mappings();
    let p = page_size();
    let rt = runtime(0, 8);
    let cs = 2 * p;
    let reserve = |k: usize| chunk_capacity(cs << (k - 1)) + 1;
    let chain = ThreadChain::new();
    let a = chain.enter(&rt, 0x1000, 0).unwrap().as_ptr();
    let arena = block_of(a).0;
    let mut top = a;
    let mut link = |k: usize| {
        let r = if k == 0 { 0 } else { reserve(k) };
        top = chain
            .overflow(&rt, top, top as usize - 64, r)
            .unwrap()
            .as_ptr();
        let (base, len, _) = block_of(top);
        check_layout(top, cs << k, 0);
        assert_eq!(len, cs << k);
        base
    };
    // Arena A: [class 0 | class 0 | class 2 (4 blocks) | class 1 (2 blocks)]; class 3 apart.
    let d = link(3);
    assert!(
        d + 16 * p <= arena || d >= arena + 16 * p,
        "class 3 inside the arena"
    );
    assert_eq!(rt.arena_usage().0, 2);
    assert_eq!(link(0), arena + 2 * p);
    assert_eq!(link(2), arena + 4 * p);
    assert_eq!(link(1), arena + 12 * p);
    assert_eq!(
        rt.arena_usage(),
        (2, 32 * p, 2 * p + 16 * p + 2 * p + 8 * p + 4 * p)
    );
    // Arena A is full: a standard chunk opens arena B.
    let b = link(0);
    assert!(b + 16 * p <= arena || b >= arena + 16 * p);
    assert_eq!(rt.arena_usage().0, 3);
    assert_eq!(link(2), b + 2 * p);
    // 6 pages left in B: too few for a class-2 block; they become 3 standard chunks in the
    // released list of class 0, and the block goes to arena C.
    let c = link(2);
    assert_eq!(
        rt.arena_usage(),
        (4, 64 * p, 34 * p + 8 * p + 6 * p + 8 * p)
    );
    assert_eq!(rt.pool_class_len(0), (0, 3));
    let spilled: Vec<usize> = [14, 12, 10]
        .iter()
        .map(|&o| b + o * p + cs - HEADER_SIZE)
        .collect();
    assert_eq!(
        rt.pool_headers(0).1,
        spilled,
        "spilled chunks, last carved on top"
    );
    assert!(c + 16 * p <= b || c >= b + 16 * p);
    assert_eq!(rt.stats().snapshot().chunks_carved, 11);
    chain.exit(&rt).unwrap();
}

/// An arena directly: blocks in carving order (the list pops the newest first), the tail
/// spilled as blocks of the spill size when the next block does not fit, a block over half an
/// arena mapped alone, and the book-keeping of all of it.
#[test]
fn arenas_carve_in_order() {
    let _maps = lock_mappings();
    let p = page_size();
    let mut a = Box::new(Arenas::new());
    let (mut out, mut spill) = (FreeList::new(), FreeList::new());
    let headers = |l: &FreeList| l.iter().map(|h| h as usize).collect::<Vec<_>>();
    a.carve(2 * p, 0, 1, 9 * p, 2 * p, usize::MAX, &mut out, &mut spill)
        .unwrap();
    let arena = block_of(out.iter().next().unwrap()).0;
    a.carve(4 * p, 0, 1, 9 * p, 2 * p, usize::MAX, &mut out, &mut spill)
        .unwrap();
    assert_eq!(
        headers(&out),
        [arena + 6 * p - HEADER_SIZE, arena + 2 * p - HEADER_SIZE]
    );
    assert!(spill.is_empty());
    // 3 pages left: no room for 4; one spilled block of 2 pages, then arena B.
    a.carve(4 * p, 0, 1, 9 * p, 2 * p, usize::MAX, &mut out, &mut spill)
        .unwrap();
    assert_eq!(headers(&spill), [arena + 8 * p - HEADER_SIZE]);
    let b = block_of(out.iter().next().unwrap()).0;
    assert!(b + 9 * p <= arena || b >= arena + 9 * p);
    // 6 pages: over half of 9, a mapping of its own.
    a.carve(6 * p, 0, 1, 9 * p, 2 * p, usize::MAX, &mut out, &mut spill)
        .unwrap();
    let d = block_of(out.iter().next().unwrap()).0;
    assert_eq!(a.regions(), 3);
    assert_eq!(a.mapped_bytes(), 24 * p);
    assert_eq!(a.carved_bytes(), 18 * p);
    assert_eq!(a.guarded_blocks(), 0);
    assert!(a.contains(arena) && a.contains(arena + 9 * p - 1) && a.contains(b) && a.contains(d));
    assert!(!a.contains(&p as *const usize as usize));
    // Guarded blocks: guard below each chunk, PROT_NONE.
    let mut g = FreeList::new();
    a.carve(2 * p, p, 2, 9 * p, 2 * p, usize::MAX, &mut g, &mut spill)
        .unwrap();
    assert_eq!(a.guarded_blocks(), 2);
    for h in g.iter() {
        let (base, len, limit) = block_of(h);
        assert_eq!((len, limit), (3 * p, base + p));
        assert_eq!(line_at(base), (base, base + p, "---p".to_string()));
    }
    let all: Vec<(usize, usize)> = [arena, b].iter().map(|&x| (x, x + 9 * p)).collect();
    // SAFETY: nothing uses these chunks any more: the lists are dropped unused.
    unsafe { a.unmap_all() };
    assert!(lines_touching(&all).is_empty(), "arenas not unmapped");
    // Exactly that mapping is gone (a thread stack the test harness maps for another test may
    // take the freed range at once).
    assert!(!maps().iter().any(|l| l.0 == d && l.1 == d + 6 * p));
}

/// `release_pages` gives a free chunk's stack pages back (`MADV_DONTNEED`: not resident, zeros
/// when read again) and keeps its header page and header words.
#[test]
fn released_chunk_keeps_only_its_header_page() {
    let _maps = lock_mappings();
    // SAFETY: PR_SET_THP_DISABLE only changes this process's huge page policy.
    unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
    let p = page_size();
    let mut a = Box::new(Arenas::new());
    let (mut out, mut spill) = (FreeList::new(), FreeList::new());
    a.carve(4 * p, 0, 1, 16 * p, 4 * p, usize::MAX, &mut out, &mut spill)
        .unwrap();
    let h = out.pop().unwrap();
    let (base, len, limit) = block_of(h);
    let resident = |lo: usize, hi: usize| {
        let mut v = vec![0u8; (hi - lo) / p];
        // SAFETY: [lo, hi) lies in the arena's mapping; mincore writes one byte per page.
        let rc = unsafe { libc::mincore(lo as *mut libc::c_void, hi - lo, v.as_mut_ptr()) };
        assert_eq!(rc, 0);
        v.iter().filter(|&&b| b & 1 != 0).count()
    };
    for a in (limit..h as usize).step_by(p) {
        // SAFETY: the chunk's stack, owned by this test.
        unsafe { (a as *mut u64).write(7) };
    }
    assert_eq!(resident(base, base + 4 * p), 4);
    // SAFETY: h is a free chunk owned by this test; nothing uses its stack.
    assert_eq!(unsafe { release_pages(h, p) }, 3 * p);
    assert_eq!(resident(base, base + 3 * p), 0);
    assert_eq!(resident(base + 3 * p, base + 4 * p), 1);
    assert_eq!(block_of(h), (base, len, limit));
    // SAFETY: as above; the pages read as fresh zeros.
    assert_eq!(unsafe { (limit as *const u64).read() }, 0);
    // SAFETY: nothing uses the arena's chunks any more.
    unsafe { a.unmap_all() };
}
