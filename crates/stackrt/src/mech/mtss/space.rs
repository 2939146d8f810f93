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
#[path = "space_tests.rs"]
mod tests;
