//! Maps keyed by the program's addresses and thread numbers (synchronisation objects' clocks,
//! the recorder's granules and mutexes), hashed with one multiply instead of the standard
//! library's SipHash: every swap and lock under `--race` looks its object's clock up, and
//! SipHash was a sixth of IRS Fibonacci's `--race` run on i686. The keys are the program's
//! own addresses, not input an adversary chooses.

/// Hashes an address (or a thread number) with one multiply.
#[derive(Clone, Copy, Default)]
pub struct AddrHasher(u64);

impl core::hash::Hasher for AddrHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b) ^ self.0.rotate_left(8));
        }
    }

    fn write_u64(&mut self, n: u64) {
        // The multiply fills the high bits (the table's tags); the shift brings them down to
        // the low ones (its bucket index), where aligned addresses have zeros.
        let h = (self.0 ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        self.0 = h ^ (h >> 29);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }
}

/// A map keyed by addresses or numbers, hashed by [`AddrHasher`].
pub type AddrMap<K, V> =
    std::collections::HashMap<K, V, core::hash::BuildHasherDefault<AddrHasher>>;

#[cfg(test)]
mod tests {
    use super::*;
    use core::hash::BuildHasher;

    /// Aligned addresses spread over the low bits (a table's bucket index) and the top seven
    /// (its tags), and a map finds what it holds.
    #[test]
    fn aligned_addresses_spread_and_maps_work() {
        let b = core::hash::BuildHasherDefault::<AddrHasher>::default();
        let mut low = std::collections::HashSet::new();
        let mut top = std::collections::HashSet::new();
        for i in 0..1024usize {
            let h = b.hash_one(0x0804_c000 + 16 * i);
            low.insert(h & 0x3ff);
            top.insert(h >> 57);
        }
        assert!(low.len() > 600, "{} of 1024 low values", low.len());
        assert_eq!(top.len(), 128);
        let mut m: AddrMap<usize, usize> = AddrMap::default();
        for i in 0..10_000 {
            m.insert(8 * i, i);
        }
        assert!((0..10_000).all(|i| m.get(&(8 * i)) == Some(&i)));
    }
}
