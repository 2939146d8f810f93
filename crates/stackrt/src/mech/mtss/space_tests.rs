//! Tests of the MTSS region's bookkeeping (`super`): the paper's figures as examples, and a
//! model-based proptest of carving, lending, giving back, floors and retirement.

use super::*;

const P: usize = 128;
const BASE: usize = 0x1_0000;

fn space(pages: usize) -> Space {
    Space::new(BASE, pages * P, P).unwrap()
}

/// A stack of `pages` pages, parked with its floor at `floor` pages above its low end.
fn parked(sp: &mut Space, pages: usize, floor: usize) -> Carved {
    let c = sp.carve(pages * P).unwrap();
    sp.set_floor(c.id, Some(c.low + floor * P)).unwrap();
    c
}

fn at(c: Carved, page: usize, pages: usize) -> Grant {
    let (donor, low) = (c.id, c.low + page * P);
    Grant { donor, low, pages }
}

#[test]
fn carve_rounds_up_to_pages_and_bumps() {
    let mut sp = space(8);
    let a = sp.carve(1).unwrap();
    let b = sp.carve(P + 1).unwrap();
    let c = sp.carve(0).unwrap();
    assert_eq!((a.id, a.low, a.high), (StackId(0), BASE, BASE + P));
    assert_eq!((b.id, b.low, b.high), (StackId(1), BASE + P, BASE + 3 * P));
    assert_eq!((c.low, c.high), (BASE + 3 * P, BASE + 4 * P));
    assert_eq!(sp.bounds(b.id), (b.low, b.high));
    assert_eq!(sp.limit(b.id), b.low);
    assert_eq!(sp.region_used(), 4 * P);
    let (wanted, free) = (5 * P, 4 * P);
    let full = SpaceError::RegionFull { wanted, free };
    assert_eq!(sp.carve(4 * P + 3), Err(full));
    assert_eq!(sp.carve(4 * P).unwrap().high, BASE + 8 * P);
    let huge = sp.carve(usize::MAX);
    assert!(matches!(huge, Err(SpaceError::RegionFull { .. })));
    assert_eq!(sp.page(), P);
    for (base, len, page) in [(0, 0, 128), (64, 1024, 128), (0, 1000, 128), (0, 96, 8)] {
        let bad = Space::new(base, len, page).unwrap_err();
        assert_eq!(bad, SpaceError::BadGeometry);
    }
}

#[test]
fn first_fit_reuses_freed_extents_merged() {
    let mut sp = space(10);
    let a = sp.carve(2 * P).unwrap();
    let b = sp.carve(P).unwrap();
    let c = sp.carve(3 * P).unwrap();
    sp.retire(a.id).unwrap();
    sp.retire(b.id).unwrap();
    assert_eq!(sp.region_used(), 6 * P, "retired stacks hold their extents");
    // Reclaimed, a and b merged into one 3-page extent at the base, split by the carves.
    let d = sp.carve(P).unwrap();
    assert_eq!((d.id, d.low), (StackId(0), BASE));
    let e = sp.carve(2 * P).unwrap();
    assert_eq!((e.id, e.low), (StackId(1), BASE + P));
    let f = sp.carve(P).unwrap();
    assert_eq!(f.low, c.high, "nothing freed fits: bumped");
    sp.retire(f.id).unwrap();
    sp.retire(c.id).unwrap();
    assert_eq!(sp.carve(7 * P).unwrap().low, c.low, "c, f, the end merged");
}

#[test]
fn carve_prefers_freed_extents_then_reclaims_then_bumps() {
    let mut sp = space(16);
    let s: Vec<Carved> = (0..4).map(|_| sp.carve(2 * P).unwrap()).collect();
    sp.retire(s[0].id).unwrap();
    sp.retire(s[2].id).unwrap();
    let a = sp.carve(2 * P).unwrap();
    assert_eq!(a, s[0], "both reclaimed, not the end");
    assert_eq!(sp.region_used(), 6 * P);
    sp.retire(s[1].id).unwrap();
    let b = sp.carve(2 * P).unwrap();
    assert_eq!(b, s[2], "a freed extent before reclaiming");
    assert_eq!(sp.bounds(s[1].id), (s[1].low, s[1].high), "s1 still held");
    assert_eq!(sp.carve(2 * P).unwrap().low, s[1].low);
    let e = sp.carve(P).unwrap();
    assert_eq!(e.low, s[3].high, "nothing to reclaim: bumped");
}

#[test]
fn lends_from_the_only_candidate_and_takes_it_back() {
    let mut sp = space(8);
    let a = sp.carve(4 * P).unwrap();
    let b = parked(&mut sp, 4, 4);
    let g = sp.lend(a.id, 100).unwrap();
    assert_eq!(g, at(b, 0, 1));
    assert_eq!((sp.limit(b.id), sp.lent_pages(b.id)), (b.low + P, 1));
    let none = Err(SpaceError::NoRoom { bytes: 1 });
    assert_eq!(sp.lend(b.id, 1), none, "a runs");
    sp.give_back(g).unwrap();
    assert_eq!((sp.limit(b.id), sp.lent_pages(b.id)), (b.low, 0));
    assert_eq!(sp.give_back(g), Err(SpaceError::NotLent(g)));
}

/// Figure 2: T1 overflows five times; T2 and T3 take turns because the one with fewer
/// lent pages is chosen; a sixth overflow finds no room (T2's floor admits three pages,
/// T3's two and a half).
#[test]
fn figure_2_alternates_between_donors() {
    let mut sp = space(24);
    let t1 = sp.carve(8 * P).unwrap();
    let t2 = parked(&mut sp, 8, 3);
    let t3 = sp.carve(8 * P).unwrap();
    sp.set_floor(t3.id, Some(t3.low + 2 * P + P / 2)).unwrap();
    let donors: Vec<StackId> = (0..5).map(|_| sp.lend(t1.id, P).unwrap().donor).collect();
    assert_eq!(donors, [t2.id, t3.id, t2.id, t3.id, t2.id]);
    assert_eq!(sp.limit(t2.id), t2.low + 3 * P);
    assert_eq!(sp.limit(t3.id), t3.low + 2 * P);
    assert_eq!(sp.lend(t1.id, P), Err(SpaceError::NoRoom { bytes: P }));
}

/// Figure 5: T1 overflows in T2 (P1), T2 in T3 (P2), then T1 (P3) and T2 (P4) in T3; T1
/// recedes, vacating P1 and P3: P3 is a hole, taken by the next lend of its size before
/// T3's overflow pointer moves.
#[test]
fn figure_5_holes_are_reused_first() {
    let mut sp = space(24);
    let t1 = sp.carve(8 * P).unwrap();
    let t2 = parked(&mut sp, 8, 8);
    let t3 = parked(&mut sp, 8, 8);
    let p1 = sp.lend(t1.id, P).unwrap();
    assert_eq!(p1, at(t2, 0, 1));
    sp.set_floor(t2.id, None).unwrap(); // T2 runs, T1 is parked while overflowing
    assert_eq!(sp.lend(t2.id, P).unwrap(), at(t3, 0, 1)); // P2
    let p3 = sp.lend(t1.id, P).unwrap();
    assert_eq!(p3, at(t3, 1, 1));
    assert_eq!(sp.lend(t2.id, P).unwrap(), at(t3, 2, 1)); // P4
    sp.give_back(p3).unwrap();
    sp.give_back(p1).unwrap();
    assert_eq!((sp.limit(t2.id), sp.holes(t2.id)), (t2.low, 0));
    assert_eq!((sp.limit(t3.id), sp.holes(t3.id)), (t3.low + 3 * P, 1));
    assert_eq!(sp.lend(t1.id, P).unwrap(), p3);
    assert_eq!((sp.limit(t3.id), sp.holes(t3.id)), (t3.low + 3 * P, 0));
}

#[test]
fn multi_page_lends_need_contiguous_free_pages() {
    let mut sp = space(16);
    let a = sp.carve(4 * P).unwrap();
    let d = parked(&mut sp, 8, 8);
    let g: Vec<Grant> = (0..3).map(|_| sp.lend(a.id, P).unwrap()).collect();
    sp.give_back(g[1]).unwrap();
    assert_eq!(sp.holes(d.id), 1);
    let big = sp.lend(a.id, P + 1).unwrap();
    assert_eq!(big, at(d, 3, 2), "the one-page hole is skipped");
    sp.give_back(g[0]).unwrap();
    let two = sp.lend(a.id, 2 * P).unwrap();
    assert_eq!(two, at(d, 0, 2), "two holes side by side");
    assert_eq!((sp.holes(d.id), sp.lent_pages(d.id)), (0, 5));
    for g in [at(d, 3, 1), at(d, 4, 1), at(d, 2, 3)] {
        assert_eq!(sp.give_back(g), Err(SpaceError::NotLent(g)));
    }
    assert_eq!(sp.lent_pages(d.id), 5, "refused grants change nothing");
}

#[test]
fn overflow_pointer_recedes_over_trailing_free_pages() {
    let mut sp = space(16);
    let a = sp.carve(4 * P).unwrap();
    let d = parked(&mut sp, 8, 8);
    let g: Vec<Grant> = (0..3).map(|_| sp.lend(a.id, P).unwrap()).collect();
    sp.give_back(g[1]).unwrap();
    assert_eq!((sp.limit(d.id), sp.holes(d.id)), (d.low + 3 * P, 1));
    sp.give_back(g[2]).unwrap();
    let now = (sp.limit(d.id), sp.holes(d.id));
    assert_eq!(now, (d.low + P, 0), "over g2's hole too");
    sp.give_back(g[0]).unwrap();
    assert_eq!(sp.limit(d.id), d.low);
}

#[test]
fn lends_never_cross_a_floor() {
    let mut sp = space(24);
    let a = sp.carve(4 * P).unwrap();
    let d1 = sp.carve(8 * P).unwrap();
    sp.set_floor(d1.id, Some(d1.low + P + P / 2)).unwrap();
    let d2 = parked(&mut sp, 8, 2);
    let two = sp.lend(a.id, 2 * P).unwrap();
    assert_eq!(two, at(d2, 0, 2), "d1 has one page");
    let none = SpaceError::NoRoom { bytes: P + 1 };
    assert_eq!(sp.lend(a.id, P + 1), Err(none));
    assert_eq!(sp.lend(a.id, P).unwrap(), at(d1, 0, 1));
    let (id, floor) = (d2.id, d2.high + 1);
    let bad = Err(SpaceError::BadFloor { id, floor });
    assert_eq!(sp.set_floor(id, Some(floor)), bad);
    sp.give_back(at(d2, 0, 2)).unwrap();
    assert!(sp.lend(a.id, P).is_err(), "a refused floor leaves no donor");
}

#[test]
fn running_threads_and_the_borrower_are_never_donors() {
    let mut sp = space(16);
    let a = sp.carve(4 * P).unwrap();
    let b = sp.carve(4 * P).unwrap();
    assert!(sp.lend(a.id, P).is_err(), "b runs");
    sp.set_floor(a.id, Some(a.high)).unwrap();
    assert!(sp.lend(a.id, P).is_err(), "a cannot lend to itself");
    sp.set_floor(b.id, Some(b.high)).unwrap();
    assert_eq!(sp.lend(a.id, P).unwrap().donor, b.id);
    sp.set_floor(b.id, None).unwrap();
    assert!(sp.lend(a.id, P).is_err());
    assert_eq!(sp.lend(b.id, P).unwrap().donor, a.id, "borrowers donate");
    let nine = StackId(9);
    assert_eq!(sp.lend(nine, P), Err(SpaceError::NoSuchStack(nine)));
}

#[test]
fn retired_stacks_lend_everything_until_a_carve_reclaims_them() {
    let mut sp = space(16);
    let a = sp.carve(4 * P).unwrap();
    let r = parked(&mut sp, 4, 1);
    let g = sp.lend(a.id, P).unwrap();
    sp.retire(r.id).unwrap();
    assert_eq!(sp.retire(r.id), Err(SpaceError::Retired(r.id)));
    assert_eq!(sp.set_floor(r.id, None), Err(SpaceError::Retired(r.id)));
    assert_eq!(sp.lend(r.id, P), Err(SpaceError::Retired(r.id)));
    let rest = sp.lend(a.id, 3 * P).unwrap();
    assert_eq!(rest, at(r, 1, 3), "up to its high end, past the old floor");
    assert_eq!(sp.region_used(), 8 * P);
    sp.give_back(g).unwrap();
    let x = sp.carve(4 * P).unwrap();
    assert_eq!(x.low, r.high, "pages still lent: kept");
    sp.give_back(rest).unwrap();
    assert_eq!(sp.region_used(), 12 * P, "nothing lent, still held");
    let c = sp.carve(4 * P).unwrap();
    assert_eq!(c, r, "reclaimed");
    sp.retire(a.id).unwrap();
    let g = sp.lend(c.id, 2 * P).unwrap();
    assert_eq!(g, at(a, 0, 2), "its thread ended, a lends");
    sp.give_back(g).unwrap();
    assert_eq!(sp.carve(4 * P).unwrap().low, a.low, "needed: reclaimed");
}

/// The model test: an owner per page of the whole region, and the rules of the module
/// doc restated over it, checked after every operation of random sequences.
mod model {
    use super::super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Cell {
        Free,
        Native(u32),
        /// Lent from a donor to a borrower.
        Lent(u32, u32),
    }

    #[derive(Clone, Copy, Debug)]
    struct MStack {
        low: usize,
        high: usize,
        floor: Option<usize>,
        retired: bool,
    }

    #[derive(Clone, Debug)]
    enum Op {
        Carve(usize),
        Floor(usize, Option<usize>),
        Lend(usize, usize),
        GiveBack(usize),
        Retire(usize),
        /// A call the runtime should not make: a stale or mangled grant, a retired or
        /// unknown stack.
        Misuse(usize, usize),
    }

    struct Model {
        base: usize,
        page: usize,
        cells: Vec<Cell>,
        /// Stacks whose extent is held, by id.
        stacks: BTreeMap<u32, MStack>,
        /// Outstanding grants and their borrowers.
        grants: Vec<(Grant, u32)>,
        returned: Vec<Grant>,
    }

    impl Model {
        fn cell(&self, addr: usize) -> Cell {
            self.cells[(addr - self.base) / self.page]
        }
        fn pages(&self, s: &MStack) -> impl Iterator<Item = usize> {
            (s.low..s.high).step_by(self.page)
        }
        fn lent_from(&self, d: u32) -> usize {
            let s = self.stacks[&d];
            let lent = |a: &usize| self.cell(*a) != Cell::Native(d);
            self.pages(&s).filter(lent).count()
        }
        fn limit(&self, d: u32) -> usize {
            let s = self.stacks[&d];
            let lent = |a: &usize| self.cell(*a) != Cell::Native(d);
            let top = self.pages(&s).filter(lent).last();
            top.map_or(s.low, |a| a + self.page)
        }
        /// The first page of every run of `n` free pages of `d` lying in `[low, ceiling)`.
        fn runs(&self, d: u32, n: usize, ceiling: usize) -> Vec<usize> {
            let (s, p) = (self.stacks[&d], self.page);
            let free = |a: usize| a + p <= ceiling && self.cell(a) == Cell::Native(d);
            let fits = |a: &usize| *a + n * p <= s.high && (0..n).all(|j| free(*a + j * p));
            self.pages(&s).filter(fits).collect()
        }
        fn set(&mut self, low: usize, pages: usize, c: Cell) {
            let i = (low - self.base) / self.page;
            self.cells[i..i + pages].fill(c);
        }
        fn give_back(&mut self, i: usize) {
            let (g, _) = self.grants.swap_remove(i);
            self.set(g.low, g.pages, Cell::Native(g.donor.0));
            self.returned.push(g);
        }
        /// A live stack (or a retired one) chosen by `sel`.
        fn pick(&self, sel: usize, live: bool) -> Option<u32> {
            let ids = self.stacks.iter().filter(|(_, s)| s.retired != live);
            let ids: Vec<u32> = ids.map(|(&i, _)| i).collect();
            (!ids.is_empty()).then(|| ids[sel % ids.len()])
        }
    }

    type Res = Result<(), TestCaseError>;

    fn grant(donor: StackId, low: usize, pages: usize) -> Grant {
        Grant { donor, low, pages }
    }

    fn check(sp: &Space, m: &Model) -> Res {
        for (&d, s) in &m.stacks {
            let id = StackId(d);
            prop_assert_eq!(sp.bounds(id), (s.low, s.high));
            prop_assert_eq!(sp.limit(id), m.limit(d), "limit of {}", d);
            prop_assert_eq!(sp.lent_pages(id), m.lent_from(d), "lent from {}", d);
            let hole = |a: &usize| *a < m.limit(d) && m.cell(*a) == Cell::Native(d);
            prop_assert_eq!(sp.holes(id), m.pages(s).filter(hole).count());
        }
        for &(g, b) in &m.grants {
            let lent = Cell::Lent(g.donor.0, b);
            prop_assert!((0..g.pages).all(|j| m.cell(g.low + j * m.page) == lent));
        }
        let used = m.cells.iter().filter(|c| **c != Cell::Free).count() * m.page;
        prop_assert_eq!(sp.region_used(), used);
        Ok(())
    }

    fn carve(sp: &mut Space, m: &mut Model, raw: usize) -> Res {
        let n = raw % 12 + 1;
        let bytes = (n - 1) * m.page + 1 + (raw / 12) % m.page;
        let free = |w: &[Cell]| w.iter().all(|&c| c == Cell::Free);
        // First fit below the free tail (the unused end); else reclaim and fit anywhere.
        let used = m
            .cells
            .iter()
            .rposition(|&c| c != Cell::Free)
            .map_or(0, |i| i + 1);
        let mut fit = m.cells[..used].windows(n).position(free);
        if fit.is_none() {
            for (d, s) in m.stacks.clone() {
                if s.retired && m.lent_from(d) == 0 {
                    m.set(s.low, (s.high - s.low) / m.page, Cell::Free);
                    m.stacks.remove(&d);
                }
            }
            fit = m.cells.windows(n).position(free);
        }
        match (sp.carve(bytes), fit) {
            (Ok(c), Some(k)) => {
                prop_assert_eq!((c.low, c.high), (m.base + k * m.page, c.low + n * m.page));
                prop_assert!(!m.stacks.contains_key(&c.id.0), "{:?} is in use", c.id);
                m.set(c.low, n, Cell::Native(c.id.0));
                let (low, high, floor, retired) = (c.low, c.high, None, false);
                m.stacks.insert(
                    c.id.0,
                    MStack {
                        low,
                        high,
                        floor,
                        retired,
                    },
                );
            }
            (Err(SpaceError::RegionFull { wanted, free }), None) => {
                let unused = m.cells.iter().filter(|&&c| c == Cell::Free).count();
                prop_assert_eq!((wanted, free), (n * m.page, unused * m.page));
            }
            (r, e) => prop_assert!(false, "carve {}: got {:?}, first fit {:?}", bytes, r, e),
        }
        Ok(())
    }

    fn lend(sp: &mut Space, m: &mut Model, b: u32, raw: usize) -> Res {
        let (bytes, p) = (raw % (4 * m.page) + 1, m.page);
        let n = bytes.div_ceil(p);
        let mut usable = Vec::new(); // (lent pages, donor, run the rules pick)
        for (&d, s) in &m.stacks {
            let ceiling = match (s.retired, s.floor) {
                (true, _) => s.high,
                (false, Some(f)) if d != b => f,
                _ => continue,
            };
            let runs = m.runs(d, n, ceiling);
            let limit = m.limit(d);
            let inside = runs.iter().find(|&&a| a + n * p <= limit);
            match (inside, runs.is_empty()) {
                (Some(&a), _) => usable.push((m.lent_from(d), d, a)),
                (None, false) => {
                    prop_assert!(runs.contains(&limit), "model: {:?}", runs);
                    usable.push((m.lent_from(d), d, limit));
                }
                (None, true) => {}
            }
        }
        let best = usable.iter().min();
        let want = best.map(|&(_, d, low)| grant(StackId(d), low, n));
        match (sp.lend(StackId(b), bytes), want) {
            (Ok(g), Some(w)) => {
                prop_assert_eq!(g, w, "lend {} bytes to {}: usable {:?}", bytes, b, usable);
                let (d, s) = (g.donor.0, m.stacks[&g.donor.0]);
                let ceiling = s.floor.unwrap_or(s.high); // retired: None
                prop_assert!(d != b && g.low >= s.low && g.low + n * p <= ceiling);
                for a in (g.low..g.low + n * p).step_by(p) {
                    prop_assert_eq!(m.cell(a), Cell::Native(d), "lent twice: {:#x}", a);
                }
                m.set(g.low, n, Cell::Lent(d, b));
                m.grants.push((g, b));
            }
            (Err(e), None) => prop_assert_eq!(e, SpaceError::NoRoom { bytes }),
            (r, w) => prop_assert!(false, "lend {} to {}: {:?}, model {:?}", bytes, b, r, w),
        }
        Ok(())
    }

    fn misuse(sp: &mut Space, m: &mut Model, sel: usize, kind: usize) -> Res {
        let g = match (kind % 4, m.grants.get(sel % m.grants.len().max(1))) {
            (0, _) if !m.returned.is_empty() => m.returned[sel % m.returned.len()],
            (1, Some(&(g, _))) => grant(g.donor, g.low, g.pages + 1),
            (2, Some(&(g, _))) => grant(g.donor, g.low + m.page, g.pages),
            _ => {
                if let Some(d) = m.pick(sel, false) {
                    let (id, e) = (StackId(d), Err(SpaceError::Retired(StackId(d))));
                    prop_assert_eq!(sp.retire(id), e);
                    prop_assert_eq!(sp.set_floor(id, None), e);
                    prop_assert_eq!(sp.lend(id, 1).map(|_| ()), e);
                }
                let id = StackId((sel % 8) as u32);
                if !m.stacks.contains_key(&id.0) {
                    let e = Err(SpaceError::NoSuchStack(id));
                    prop_assert_eq!(sp.retire(id), e);
                    prop_assert_eq!(sp.set_floor(id, None), e);
                    prop_assert_eq!(sp.lend(id, 1).map(|_| ()), e);
                }
                return Ok(());
            }
        };
        let out = sp.give_back(g);
        match m.grants.iter().position(|&(h, _)| h == g) {
            Some(i) => {
                prop_assert_eq!(out, Ok(()));
                m.give_back(i);
            }
            None => prop_assert_eq!(out, Err(SpaceError::NotLent(g))),
        }
        Ok(())
    }

    fn floor(sp: &mut Space, m: &mut Model, d: u32, raw: Option<usize>) -> Res {
        let s = m.stacks[&d];
        let size = s.high - s.low;
        let f = raw.map(|x| match x % 10 {
            0 => s.high + 1 + x / 10 % 64,
            1..=5 => s.low + x / 10 % (size / m.page + 1) * m.page,
            _ => s.low + x / 10 % (size + 1),
        });
        let out = sp.set_floor(StackId(d), f);
        let bad = f.filter(|&f| f > s.high);
        let stack = m.stacks.get_mut(&d).unwrap();
        stack.floor = if bad.is_some() { None } else { f };
        let id = StackId(d);
        let want = bad.map_or(Ok(()), |floor| Err(SpaceError::BadFloor { id, floor }));
        prop_assert_eq!(out, want);
        Ok(())
    }

    fn run(page_log: u32, pages: usize, at: usize, initial: &[usize], ops: &[Op]) -> Res {
        let page = 1usize << page_log;
        let mut sp = Space::new(at * page, pages * page, page).unwrap();
        let mut m = Model {
            base: at * page,
            page,
            cells: vec![Cell::Free; pages],
            stacks: BTreeMap::new(),
            grants: Vec::new(),
            returned: Vec::new(),
        };
        for &raw in initial {
            carve(&mut sp, &mut m, raw)?;
            check(&sp, &m)?;
        }
        for op in ops {
            let live = m.stacks.values().filter(|s| !s.retired).count();
            match *op {
                Op::Carve(raw) if live < 6 => carve(&mut sp, &mut m, raw)?,
                Op::Floor(sel, raw) => {
                    if let Some(d) = m.pick(sel, true) {
                        floor(&mut sp, &mut m, d, raw)?;
                    }
                }
                Op::Lend(sel, raw) => {
                    if let Some(b) = m.pick(sel, true) {
                        lend(&mut sp, &mut m, b, raw)?;
                    }
                }
                Op::GiveBack(sel) if !m.grants.is_empty() => {
                    let i = sel % m.grants.len();
                    prop_assert_eq!(sp.give_back(m.grants[i].0), Ok(()));
                    m.give_back(i);
                }
                Op::Retire(sel) => {
                    if let Some(d) = m.pick(sel, true) {
                        prop_assert_eq!(sp.retire(StackId(d)), Ok(()));
                        let s = m.stacks.get_mut(&d).unwrap();
                        (s.retired, s.floor) = (true, None);
                    }
                }
                Op::Misuse(sel, kind) => misuse(&mut sp, &mut m, sel, kind)?,
                _ => {}
            }
            check(&sp, &m)?;
        }
        Ok(())
    }

    fn op() -> impl Strategy<Value = Op> {
        let floor = prop::option::weighted(0.8, any::<usize>());
        prop_oneof![
            1 => any::<usize>().prop_map(Op::Carve),
            3 => (any::<usize>(), floor).prop_map(|(s, f)| Op::Floor(s, f)),
            6 => (any::<usize>(), any::<usize>()).prop_map(|(s, b)| Op::Lend(s, b)),
            4 => any::<usize>().prop_map(Op::GiveBack),
            1 => any::<usize>().prop_map(Op::Retire),
            1 => (any::<usize>(), any::<usize>()).prop_map(|(s, k)| Op::Misuse(s, k)),
        ]
    }

    proptest! {
        // Regressions are not persisted: this file's directory has no place for them.
        #![proptest_config(ProptestConfig {
            cases: 512,
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        #[test]
        fn space_follows_the_model(
            page_log in 4u32..=16,
            pages in 8usize..=64,
            at in 0usize..1000,
            initial in prop::collection::vec(any::<usize>(), 2..=6),
            ops in prop::collection::vec(op(), 100..400),
        ) {
            run(page_log, pages, at, &initial, &ops)?;
        }
    }
}
