//! The chunk ABI in numbers: header offsets and sizes (the contract with the compiler's emitted
//! sequences, hand-checked for i686 and x86-64), capacities, geometry checks, byte-count
//! parsing, and what a chunk mapping really looks like in `/proc/self/maps`.

use stackrt::chunk::header::{
    page_size, GeometryError, OFF_LIMIT, OFF_LINK, OFF_MAP_BASE, OFF_MAP_LEN, OFF_PREV_HEADER,
    OFF_PREV_SP, OFF_RESUME, OFF_THREAD_STACK,
};
use stackrt::chunk::{
    chunk_capacity, parse_bytes, ChunkGeometry, ChunkMapping, CHECK_SLACK, HEADER_SIZE, UNLINKED,
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

/// The permissions of the `/proc/self/maps` lines covering `[lo, hi)`.
fn maps_covering(lo: usize, hi: usize) -> Vec<(usize, usize, String)> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let mut out = Vec::new();
    for line in maps.lines() {
        let mut f = line.split_whitespace();
        let range = f.next().unwrap();
        let perms = f.next().unwrap().to_string();
        let (a, b) = range.split_once('-').unwrap();
        let (a, b) = (
            usize::from_str_radix(a, 16).unwrap(),
            usize::from_str_radix(b, 16).unwrap(),
        );
        if a < hi && b > lo {
            out.push((a.max(lo), b.min(hi), perms));
        }
    }
    out
}

#[test]
fn mapping_has_guard_below_and_header_on_top() {
    let p = page_size();
    let g = ChunkGeometry::new(8 * p, p).unwrap();
    let m = ChunkMapping::map(g).unwrap();
    let h = m.header().as_ptr();
    // SAFETY: the header of a live mapping.
    let (map_base, map_len, limit, link) =
        unsafe { ((*h).map_base, (*h).map_len, (*h).limit, (*h).link) };
    assert_eq!(map_base % p, 0);
    assert_eq!(map_len, 9 * p);
    assert_eq!(limit, map_base + p);
    assert_eq!(m.limit(), limit);
    assert_eq!(h as usize, map_base + 9 * p - HEADER_SIZE);
    assert_eq!(
        h as usize % 16,
        0,
        "a fresh chunk's SP (= header) must be 16-byte aligned"
    );
    assert!(link.is_null());
    let regions = maps_covering(map_base, map_base + map_len);
    assert_eq!(regions.len(), 2, "{regions:?}");
    assert_eq!(regions[0], (map_base, map_base + p, "---p".to_string()));
    assert_eq!(
        regions[1],
        (map_base + p, map_base + 9 * p, "rw-p".to_string())
    );
    // The whole usable stack is writable.
    for a in (limit..h as usize).step_by(64) {
        // SAFETY: inside the read-write part of the mapping owned by `m`.
        unsafe { (a as *mut u64).write(a as u64) };
    }
    let raw = m.into_raw();
    assert_eq!(raw.as_ptr(), h);
    // SAFETY: `raw` came from into_raw just above.
    let m = unsafe { ChunkMapping::from_raw(raw) };
    drop(m);
    assert!(
        maps_covering(map_base, map_base + map_len).is_empty(),
        "chunk not unmapped"
    );
}

#[test]
fn mapping_without_guard_is_all_usable() {
    let p = page_size();
    let g = ChunkGeometry::new(2 * p, 0).unwrap();
    let m = ChunkMapping::map(g).unwrap();
    let h = m.header().as_ptr();
    // SAFETY: the header of a live mapping.
    let (map_base, limit) = unsafe { ((*h).map_base, (*h).limit) };
    assert_eq!(limit, map_base);
    assert_eq!(h as usize - limit, 2 * p - HEADER_SIZE);
    let regions = maps_covering(map_base, map_base + 2 * p);
    assert!(regions.iter().all(|r| r.2 == "rw-p"), "{regions:?}");
}
