//! Vector clocks and the packed access words of the race detector (FastTrack's epochs).
//!
//! An *access word* (`u64`) is one access as the shadow keeps it: the epoch `clock@slot` of
//! the thread that made it, the bytes of the 8-byte shadow granule it touched (a mask) and its
//! site (the compiled access's source location, `cmm_codegen::race`). 0 is "no access".
//!
//! ```text
//!  63     62 .. 38      37 .. 26     25 .. 18    17 .. 0
//!  flag | clock (25) | slot (12) | bytes (8) | site (18)
//! ```
//!
//! A thread's own clock starts at 1 and grows at every synchronisation it releases (create,
//! unlock); 25 bits are 33 million such events per thread slot.

/// Bits of the site number.
pub const SITE_BITS: u32 = 18;
/// Bits of the thread slot: at most this many threads alive at once.
pub const SLOT_BITS: u32 = 12;
/// Bits of a thread's clock.
pub const CLOCK_BITS: u32 = 25;
/// Most threads alive at once under `--race` (slots are reused once a thread is joined).
pub const MAX_SLOTS: usize = 1 << SLOT_BITS;
/// Largest clock value.
pub const MAX_CLOCK: u32 = (1 << CLOCK_BITS) - 1;
/// In a read word: it points to a set of reads (`detect`), not an access. In a write word:
/// the shadow word is *contended*, some access to it raced with another thread's (the
/// deterministic scheduler takes a decision at every later access to it).
pub const SHARED: u64 = 1 << 63;
/// The write word's flag (the same bit as [`SHARED`]).
pub const CONTENDED: u64 = SHARED;

const MASK_SHIFT: u32 = SITE_BITS;
const SLOT_SHIFT: u32 = MASK_SHIFT + 8;
const CLOCK_SHIFT: u32 = SLOT_SHIFT + SLOT_BITS;

/// The access word of `slot` at `clock` touching `mask` (bits 0-7: bytes of the shadow granule)
/// at `site` (reduced to its bits).
pub fn access(clock: u32, slot: usize, mask: u32, site: u32) -> u64 {
    (u64::from(clock & MAX_CLOCK) << CLOCK_SHIFT)
        | ((slot as u64 & ((1 << SLOT_BITS) - 1)) << SLOT_SHIFT)
        | (u64::from(mask & 0xff) << MASK_SHIFT)
        | u64::from(site & ((1 << SITE_BITS) - 1))
}

/// The epoch `clock@slot` as the high bits of an access word: `access(clock, slot, m, s)` is
/// `epoch(clock, slot) | bytes_and_site(m, s)` (a thread keeps its epoch ready, so each access
/// only adds its bytes and site).
#[inline]
pub fn epoch(clock: u32, slot: usize) -> u64 {
    access(clock, slot, 0, 0)
}

/// The low bits of an access word: the bytes it touched and its site.
#[inline]
pub fn bytes_and_site(mask: u32, site: u32) -> u64 {
    (u64::from(mask & 0xff) << MASK_SHIFT) | u64::from(site & ((1 << SITE_BITS) - 1))
}

/// Whether two access words (without flags) have the same epoch: the same thread at the same
/// clock.
#[inline]
pub fn same_epoch(a: u64, b: u64) -> bool {
    (a ^ b) >> SLOT_SHIFT == 0
}

/// The clock of an access word.
pub fn clock(a: u64) -> u32 {
    ((a >> CLOCK_SHIFT) as u32) & MAX_CLOCK
}

/// The thread slot of an access word.
pub fn slot(a: u64) -> usize {
    ((a >> SLOT_SHIFT) as usize) & ((1 << SLOT_BITS) - 1)
}

/// The byte mask of an access word.
pub fn mask(a: u64) -> u32 {
    ((a >> MASK_SHIFT) as u32) & 0xff
}

/// The site of an access word.
pub fn site(a: u64) -> u32 {
    (a as u32) & ((1 << SITE_BITS) - 1)
}

/// The epoch and mask of an access word, without its site or flag: two accesses of one
/// thread in one epoch to the same bytes compare equal (FastTrack's same-epoch fast path).
pub fn epoch_and_mask(a: u64) -> u64 {
    (a & !SHARED) >> MASK_SHIFT
}

/// `a` with byte mask `m`.
pub fn with_mask(a: u64, m: u32) -> u64 {
    (a & !(0xff << MASK_SHIFT)) | (u64::from(m & 0xff) << MASK_SHIFT)
}

/// A vector clock: one clock per thread slot (absent slots are 0).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VClock(Vec<u32>);

impl VClock {
    pub const fn new() -> VClock {
        VClock(Vec::new())
    }

    /// The clock of `slot`.
    #[inline]
    pub fn get(&self, slot: usize) -> u32 {
        self.0.get(slot).copied().unwrap_or(0)
    }

    /// Sets the clock of `slot`.
    pub fn set(&mut self, slot: usize, c: u32) {
        if self.0.len() <= slot {
            self.0.resize(slot + 1, 0);
        }
        self.0[slot] = c;
    }

    /// Becomes a copy of `other` (a release), reusing this clock's memory.
    pub fn assign(&mut self, other: &VClock) {
        self.0.clone_from(&other.0);
    }

    /// Pointwise maximum with `other` (an acquire).
    pub fn join(&mut self, other: &VClock) {
        if self.0.len() < other.0.len() {
            self.0.resize(other.0.len(), 0);
        }
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            *a = (*a).max(*b);
        }
    }

    /// Whether the access `a` happened before the time this clock describes.
    #[inline]
    pub fn covers(&self, a: u64) -> bool {
        clock(a) <= self.get(slot(a))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_words_pack_and_unpack_every_field() {
        let a = access(MAX_CLOCK, MAX_SLOTS - 1, 0b1000_1010, (1 << SITE_BITS) - 1);
        assert_eq!(clock(a), MAX_CLOCK);
        assert_eq!(slot(a), MAX_SLOTS - 1);
        assert_eq!(mask(a), 0b1000_1010);
        assert_eq!(site(a), (1 << SITE_BITS) - 1);
        assert_eq!(a & SHARED, 0);
        let b = access(7, 3, 0b0001, 42);
        assert_eq!((clock(b), slot(b), mask(b), site(b)), (7, 3, 1, 42));
        assert_eq!(mask(with_mask(b, 0xff)), 0xff);
        assert_eq!(site(with_mask(b, 0xff)), 42);
        assert_eq!(
            epoch_and_mask(access(7, 3, 1, 42)),
            epoch_and_mask(access(7, 3, 1, 9))
        );
        assert_eq!(epoch(7, 3) | bytes_and_site(0b0001, 42), b);
        assert!(same_epoch(access(7, 3, 1, 42), access(7, 3, 0xff, 9)));
        assert!(!same_epoch(access(7, 3, 1, 42), access(8, 3, 1, 42)));
        assert!(!same_epoch(access(7, 3, 1, 42), access(7, 4, 1, 42)));
        assert!(!same_epoch(
            access(7, 3, 1, 42) | SHARED,
            access(7, 3, 1, 42)
        ));
    }

    #[test]
    fn clocks_join_pointwise_and_cover_earlier_epochs() {
        let mut a = VClock::new();
        a.set(0, 5);
        let mut b = VClock::new();
        b.set(2, 3);
        a.join(&b);
        assert_eq!((a.get(0), a.get(1), a.get(2), a.get(9)), (5, 0, 3, 0));
        assert!(a.covers(access(3, 2, 1, 0)));
        assert!(!a.covers(access(4, 2, 1, 0)));
    }
}
