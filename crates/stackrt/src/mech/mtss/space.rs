//! The MTSS region's bookkeeping: the native stacks' extents and the pages lent between them.
//!
//! Which part of the one stack region each thread's native stack owns, and which of its pages
//! are lent to other threads' overflowing stacks. Pure accounting: no memory is touched here;
//! the runtime holds the [`Space`] under one lock and the code generator's checks read
//! [`Space::limit`]. Terms of the paper (Middha, Simpson, Barua, CASES 2005, section 4):
//!
//! * A thread's *native stack* is an extent `[low, high)` of the region, carved when the thread
//!   starts; it grows down from `high`.
//! * The *overflow pointer* (`Overflow-Ptr[task]`) of a stack is the top of the space at its low
//!   end that has been lent to other threads whose own stacks overflowed. It starts at `low`,
//!   moves up when a lend takes the pages at it, and recedes over free pages at its top when
//!   pages come back (figure 4). The owner's procedure-entry checks compare their stack pointer
//!   against it, so the owner never grows into a lent page.
//! * *Holes* are free pages below the overflow pointer: pages given back out of order, below a
//!   page still lent (figure 5). Every page of the lent area is classified free or lent, and a
//!   lend takes the lowest run of holes that fits before it moves the pointer. A frame cannot be
//!   split, so a lend of `n` pages needs `n` contiguous free pages, hole or not.
//! * *Donor choice*: among the stacks with room, the one with the fewest pages lent, so that an
//!   overflow spreads over every stack with free space (figure 2) instead of exhausting one of
//!   them, which would make that stack overflow in turn.
//!
//! The floor rule (ours; the paper's tasks are swapped out by an OS that knows their stack
//! pointers): a page may only be lent from below the lowest address its owner may be using. A
//! running thread is never a donor: its stack pointer is unknown here, so a page taken below it
//! could hold its live frames. A parked thread publishes its stack pointer as its floor
//! ([`Space::set_floor`]) and cannot move it while parked; the runtime's wake-up takes the same
//! lock before it reads the thread's new limit, so it never grows into a page lent while it
//! was parked. A retired stack (its thread ended) has no owner: all of it above its lent pages
//! may be lent. It stays a donor, holding its extent, until a carve needs the space: running
//! threads never lend, so with ended stacks freed at once there would be almost no donors. A
//! carve that no freed extent fits frees every retired stack with nothing lent, then retries,
//! and only then takes from the unused end of the region.

use core::fmt;

/// Names a native stack across calls (an index into the space's records, reused once the
/// stack's extent is freed), small enough to keep in a thread's descriptor and in a [`Grant`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StackId(pub u32);

/// A new thread's native stack: the id for later calls and the addresses the runtime needs to
/// point the thread's stack pointer at `high` and its limit at `low`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Carved {
    /// The stack's name in later calls.
    pub id: StackId,
    /// Lowest address of the stack (its initial limit).
    pub low: usize,
    /// One past the highest address: the initial stack pointer.
    pub high: usize,
}

/// Pages `[low, low + pages * page)` lent from `donor`'s native stack to an overflowing stack:
/// the borrower keeps it and hands it back to [`Space::give_back`] when its stack leaves them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grant {
    /// The stack the pages belong to.
    pub donor: StackId,
    /// Lowest address of the pages.
    pub low: usize,
    /// Number of pages (at least one).
    pub pages: usize,
}

/// Why a call did nothing (except [`SpaceError::BadFloor`], which leaves the stack out of the
/// donors, the safe side). The runtime turns these into a one-line fatal message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpaceError {
    /// [`Space::new`]: the page size is not a power of two in 16..=65536, or the region is not
    /// page-aligned, empty, or wraps around the address space.
    BadGeometry,
    /// No free extent holds `wanted` bytes (the rounded size); `free` bytes are free in all.
    RegionFull { wanted: usize, free: usize },
    /// No donor has `bytes` bytes' worth of contiguous free pages: the paper's out-of-memory.
    NoRoom { bytes: usize },
    /// The id names no stack (never carved, or its extent was freed).
    NoSuchStack(StackId),
    /// The stack was retired: it cannot be retired again, borrow, or publish a floor.
    Retired(StackId),
    /// The floor lies outside the stack; the stack is left without a floor (not a donor).
    BadFloor { id: StackId, floor: usize },
    /// The grant is not outstanding (given back twice, or never lent in that shape).
    NotLent(Grant),
}

impl fmt::Display for SpaceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::BadGeometry => write!(f, "mtss: bad region or page size"),
            Self::RegionFull { wanted, free } => {
                write!(f, "mtss: no {wanted}-byte extent ({free} free)")
            }
            Self::NoRoom { bytes } => write!(f, "mtss: no stack can lend {bytes} bytes"),
            Self::NoSuchStack(id) => write!(f, "mtss: no stack {}", id.0),
            Self::Retired(id) => write!(f, "mtss: stack {} is retired", id.0),
            Self::BadFloor { id, floor } => {
                write!(f, "mtss: floor {floor:#x} not in stack {}", id.0)
            }
            Self::NotLent(g) => write!(f, "mtss: {g:?} is not lent"),
        }
    }
}

/// Who may be using a stack, which decides whether and up to where it may lend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Its thread lives: `Some(floor)` while parked, `None` while it may run.
    Live(Option<usize>),
    /// Its thread ended: it lends all of it until a carve that needs space frees it (only
    /// once nothing is lent from it).
    Retired,
    /// The record is unused (its extent was freed); the id may be reused by `carve`.
    Vacant,
}

/// One page of a lent area. Marking the first page of each grant lets `give_back` recognise
/// exactly the grants it handed out, so a stale or mangled grant is refused, not half-applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Page {
    Free,
    Head,
    Tail,
}

/// A native stack's record.
#[derive(Debug)]
struct Stack {
    low: usize,
    high: usize,
    state: State,
    /// The lent area, page by page from `low` up to the overflow pointer; its last page is
    /// never free (the pointer recedes over free pages).
    area: Vec<Page>,
    /// Pages of `area` that are lent (the rest are holes).
    lent: usize,
    /// No hole lies below this page of `area` (a hint that keeps a lend from scanning the
    /// pages at the bottom that stay lent while a long overflow goes on).
    first_free: usize,
}

impl Stack {
    /// The first page of the run of `n` pages this stack would lend with nothing above
    /// `ceiling` (the floor or `high`): the lowest run of holes, else the run at the overflow
    /// pointer; `None` when neither lies below the ceiling.
    fn usable_run(&self, n: usize, ceiling: usize, page: usize) -> Option<usize> {
        let fit = ceiling.saturating_sub(self.low) / page;
        if self.area.len() > self.lent {
            let mut run = 0;
            let from = self.first_free.min(fit);
            for (k, p) in self.area.iter().enumerate().take(fit).skip(from) {
                run = if *p == Page::Free { run + 1 } else { 0 };
                if run == n {
                    return Some(k + 1 - n);
                }
            }
        }
        let k = self.area.len();
        k.checked_add(n).filter(|&end| end <= fit).map(|_| k)
    }
}

/// The MTSS region: native stacks, their free extents, and the pages lent between them.
#[derive(Debug)]
pub struct Space {
    len: usize,
    /// The region's end: a free extent ending here is the unused end.
    end: usize,
    page: usize,
    /// Free extents `(low, high)`, sorted and merged, the unused end of the region included.
    free: Vec<(usize, usize)>,
    /// Indexed by `StackId`.
    stacks: Vec<Stack>,
}

impl Space {
    /// A space over `[base, base + len)` with pages of `page` bytes (the paper's default is
    /// 128: small pages waste little of a donor, large ones overflow less often). Geometry is
    /// checked once here so that no later call has to.
    pub fn new(base: usize, len: usize, page: usize) -> Result<Space, SpaceError> {
        let ok = page.is_power_of_two()
            && (16..=65536).contains(&page)
            && base.is_multiple_of(page)
            && len.is_multiple_of(page)
            && len > 0
            && base.checked_add(len).is_some();
        if !ok {
            return Err(SpaceError::BadGeometry);
        }
        Ok(Space {
            len,
            end: base + len,
            page,
            free: vec![(base, base + len)],
            stacks: Vec::new(),
        })
    }

    /// The page size, the unit of every lend: the runtime rounds frames with it and the
    /// statistics report pages.
    pub fn page(&self) -> usize {
        self.page
    }

    /// Bytes held by native stacks (carved, not yet freed, retired ones included), for the
    /// statistics and to tell a full region from a fragmented one.
    pub fn region_used(&self) -> usize {
        self.len - self.free.iter().map(|&(l, h)| h - l).sum::<usize>()
    }

    /// A native stack for a new thread, `size` bytes rounded up to whole pages (at least one,
    /// so that a stack always has a page to lend): the first freed extent that fits, else
    /// (after freeing every retired stack with nothing lent) the first that fits now, else the
    /// unused end, so that ended stacks are reused before the region is consumed.
    pub fn carve(&mut self, size: usize) -> Result<Carved, SpaceError> {
        let bytes = size.div_ceil(self.page).max(1).checked_mul(self.page);
        let wanted = bytes.unwrap_or(size);
        // First fit, over the freed extents only unless `all` (the unused end included).
        let fit = |sp: &Space, all: bool| {
            let b = bytes?;
            sp.free
                .iter()
                .position(|&(l, h)| h - l >= b && (all || h != sp.end))
        };
        let mut fits = fit(self, false);
        if fits.is_none() {
            for k in 0..self.stacks.len() {
                if self.stacks[k].state == State::Retired && self.stacks[k].lent == 0 {
                    self.vacate(k);
                }
            }
            fits = fit(self, true);
        }
        let free = self.len - self.region_used();
        let slot = self.stacks.iter().position(|s| s.state == State::Vacant);
        let id = slot.unwrap_or(self.stacks.len());
        let (Some(bytes), Some(i), Ok(raw)) = (bytes, fits, u32::try_from(id)) else {
            return Err(SpaceError::RegionFull { wanted, free });
        };
        let low = self.free[i].0;
        let high = low + bytes;
        if high == self.free[i].1 {
            self.free.remove(i);
        } else {
            self.free[i].0 = high;
        }
        // A reused record keeps its (empty) buffer: no allocation until it lends more than before.
        let area = slot.map_or(Vec::new(), |k| core::mem::take(&mut self.stacks[k].area));
        let state = State::Live(None);
        let stack = Stack {
            low,
            high,
            state,
            area,
            lent: 0,
            first_free: 0,
        };
        match slot {
            Some(k) => self.stacks[k] = stack,
            None => self.stacks.push(stack),
        }
        Ok(Carved {
            id: StackId(raw),
            low,
            high,
        })
    }

    /// Publishes the lowest address the owner may be using: `Some(sp)` when it parks, `None`
    /// before it may run again. Only parked stacks lend, and never above their floor; a floor
    /// outside the stack is refused and leaves the stack without one (not a donor).
    pub fn set_floor(&mut self, id: StackId, floor: Option<usize>) -> Result<(), SpaceError> {
        let s = self.live_mut(id)?;
        match floor {
            Some(f) if f < s.low || f > s.high => {
                s.state = State::Live(None);
                Err(SpaceError::BadFloor { id, floor: f })
            }
            _ => {
                s.state = State::Live(floor);
                Ok(())
            }
        }
    }

    /// The thread owning `id` ended: its stack lends all of it (no owner is left) until a
    /// [`Space::carve`] that needs the space frees it (once nothing is lent from it).
    pub fn retire(&mut self, id: StackId) -> Result<(), SpaceError> {
        self.live_mut(id)?.state = State::Retired;
        Ok(())
    }

    /// Finds `bytes` contiguous bytes (whole pages, at least one: a frame cannot be split) for
    /// `borrower`'s overflowing stack in another stack: the donor with the fewest lent pages
    /// among the parked or retired stacks with room below their floor (ties: lowest id), so
    /// overflow spreads; in it the lowest run of holes that fits, else the run at its overflow
    /// pointer, which moves up over it. Floors never change.
    pub fn lend(&mut self, borrower: StackId, bytes: usize) -> Result<Grant, SpaceError> {
        self.live_mut(borrower)?;
        let page = self.page;
        let n = bytes.div_ceil(page).max(1);
        let mut best: Option<(usize, usize)> = None;
        for (i, s) in self.stacks.iter().enumerate() {
            let ceiling = match s.state {
                State::Live(Some(floor)) => floor,
                State::Retired => s.high,
                _ => continue,
            };
            let fewer = best.is_none_or(|(b, _)| s.lent < self.stacks[b].lent);
            if i == borrower.0 as usize || !fewer {
                continue;
            }
            if let Some(k) = s.usable_run(n, ceiling, page) {
                best = Some((i, k));
            }
        }
        let Some((i, k)) = best else {
            return Err(SpaceError::NoRoom { bytes });
        };
        let s = &mut self.stacks[i];
        if k + n > s.area.len() {
            s.area.resize(k + n, Page::Free);
        }
        s.area[k] = Page::Head;
        s.area[k + 1..k + n].fill(Page::Tail);
        s.lent += n;
        if k == s.first_free {
            s.first_free = k + n;
            while s.area.get(s.first_free).is_some_and(|&p| p != Page::Free) {
                s.first_free += 1;
            }
        }
        Ok(Grant {
            donor: StackId(i as u32),
            low: s.low + k * page,
            pages: n,
        })
    }

    /// The borrower's stack left the pages of `grant`: they become free, the donor's overflow
    /// pointer recedes over the free pages at the top of its lent area (holes under a page
    /// still lent stay holes). A retired donor stays one: only `carve` frees it.
    pub fn give_back(&mut self, grant: Grant) -> Result<(), SpaceError> {
        let page = self.page;
        let i = grant.donor.0 as usize;
        let refused = Err(SpaceError::NotLent(grant));
        let Some(s) = self.stacks.get_mut(i).filter(|s| s.state != State::Vacant) else {
            return refused;
        };
        let off = grant.low.wrapping_sub(s.low);
        if grant.low < s.low || !off.is_multiple_of(page) || grant.pages == 0 {
            return refused;
        }
        let k = off / page;
        let end = match k.checked_add(grant.pages) {
            Some(end) if end <= s.area.len() => end,
            _ => return refused,
        };
        if s.area[k] != Page::Head
            || s.area[k + 1..end].iter().any(|&p| p != Page::Tail)
            || s.area.get(end) == Some(&Page::Tail)
        {
            return refused;
        }
        s.area[k..end].fill(Page::Free);
        s.lent -= grant.pages;
        s.first_free = s.first_free.min(k);
        while s.area.last() == Some(&Page::Free) {
            s.area.pop();
        }
        s.first_free = s.first_free.min(s.area.len());
        Ok(())
    }

    /// The overflow pointer (`Overflow-Ptr[task]`): the owner's checks compare their stack
    /// pointer against it, so the owner never grows into pages lent from it.
    pub fn limit(&self, id: StackId) -> usize {
        self.known(id)
            .map_or(0, |s| s.low + s.area.len() * self.page)
    }

    /// Pages lent from `id`: the donor choice, and the statistics of how far overflow spread.
    pub fn lent_pages(&self, id: StackId) -> usize {
        self.known(id).map_or(0, |s| s.lent)
    }

    /// Free pages below the overflow pointer (figure 5's holes), for the statistics: the
    /// paper measures how rare they are.
    pub fn holes(&self, id: StackId) -> usize {
        self.known(id).map_or(0, |s| s.area.len() - s.lent)
    }

    /// The stack's extent `(low, high)`, for the runtime to point a thread at and to find
    /// which stack an address is in.
    pub fn bounds(&self, id: StackId) -> (usize, usize) {
        self.known(id).map_or((0, 0), |s| (s.low, s.high))
    }

    /// The record of a stack whose extent is held (live or retired); an invalid id is a
    /// runtime bug, caught in debug builds and answered with zeros in release ones.
    fn known(&self, id: StackId) -> Option<&Stack> {
        let s = self
            .stacks
            .get(id.0 as usize)
            .filter(|s| s.state != State::Vacant);
        debug_assert!(s.is_some(), "mtss: no stack {}", id.0);
        s
    }

    /// The record of a stack whose thread lives, or why there is none.
    fn live_mut(&mut self, id: StackId) -> Result<&mut Stack, SpaceError> {
        match self.stacks.get_mut(id.0 as usize) {
            Some(s) if matches!(s.state, State::Live(_)) => Ok(s),
            Some(s) if s.state == State::Retired => Err(SpaceError::Retired(id)),
            _ => Err(SpaceError::NoSuchStack(id)),
        }
    }

    /// Frees stack `i`'s extent (retired, nothing lent), merging it with its neighbours so
    /// that first fit finds the largest extents.
    fn vacate(&mut self, i: usize) {
        let s = &mut self.stacks[i];
        s.state = State::Vacant;
        s.area.clear();
        s.first_free = 0;
        let (low, mut high) = (s.low, s.high);
        let j = self.free.partition_point(|&(l, _)| l < low);
        if j < self.free.len() && self.free[j].0 == high {
            high = self.free[j].1;
            self.free.remove(j);
        }
        if j > 0 && self.free[j - 1].1 == low {
            self.free[j - 1].1 = high;
        } else {
            self.free.insert(j, (low, high));
        }
    }
}

#[cfg(test)]
mod tests {
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
}
