//! A model of the race detector's rules (`stackrt::race::detect`): random sequences of reads,
//! writes and synchronisation (lock release/acquire, a thread taking another's clock as a
//! join does) on four threads and three shadow granules, checked against a plain model that
//! keeps every access with the full vector clock of its thread and calls two accesses a race
//! when they are by different threads, touch a common byte, one is a write, and neither
//! happened before the other. Some threads' slots share a home in a read set.
//!
//! - Every race the detector reports is one of the model's, with the right earlier access (the
//!   site of an access word is the access's index here): no false positives, whatever the
//!   bytes.
//! - The detector reports a race at exactly the access where the model first sees one on each
//!   granule, and none before: FastTrack's guarantee for whole-granule accesses, and with
//!   kept writes (`detect`, "Kept writes") for accesses of any bytes too. (Before them, a
//!   thread writing two parts of a granule kept only the second, and this failed.)
//!
//! Each thread has its filter of recorded reads (`stackrt::race::filter`) in front of the
//! shadow, as the runtime's checked path does: a read it covers is skipped, a write clears its
//! bytes, a tick clears it. Both properties hold with it. (The filters note every read; the
//! runtime's start noting after an epoch's first few, which only sets the same bits later.)

use proptest::prelude::*;
use stackrt::race::clock::{self, VClock};
use stackrt::race::detect::{self, Cell};
use stackrt::race::filter::Filter;

const THREADS: usize = 6;
/// Each thread's slot: 0, 8 and 40 have the same home (entry `slot mod 8` of a read set of 8
/// entries, `detect`'s homes), and 8 and 40 in a set of 16 or 32 entries too.
const SLOT: [usize; THREADS] = [0, 1, 8, 7, 22, 40];
const WORDS: usize = 3;
const LOCKS: usize = 2;

#[derive(Clone, Debug)]
enum Op {
    Access {
        t: usize,
        word: usize,
        write: bool,
        mask: u32,
    },
    Release {
        t: usize,
        lock: usize,
    },
    Acquire {
        t: usize,
        lock: usize,
    },
    /// `t` goes on after everything `from` did so far (a join, or a create seen from the
    /// child's side).
    Join {
        t: usize,
        from: usize,
    },
}

fn op(whole_words: bool) -> impl Strategy<Value = Op> {
    let mask = if whole_words {
        Just(0xffu32).boxed()
    } else {
        (1u32..256).boxed()
    };
    prop_oneof![
        6 => (0..THREADS, 0..WORDS, any::<bool>(), mask).prop_map(|(t, word, write, mask)| Op::Access { t, word, write, mask }),
        1 => (0..THREADS, 0..LOCKS).prop_map(|(t, lock)| Op::Release { t, lock }),
        1 => (0..THREADS, 0..LOCKS).prop_map(|(t, lock)| Op::Acquire { t, lock }),
        1 => (0..THREADS, 0..THREADS).prop_map(|(t, from)| Op::Join { t, from }),
    ]
}

/// One access as the model keeps it.
struct Past {
    t: usize,
    /// The thread's own clock at the access.
    clock: u32,
    write: bool,
    mask: u32,
    index: u32,
}

struct World {
    /// Each thread's vector clock (the runtime's rules: own entry starts at 1, ticks after a
    /// release).
    vc: Vec<VClock>,
    locks: Vec<VClock>,
    cells: Vec<Cell>,
    history: Vec<Vec<Past>>,
    filters: Vec<Filter>,
    /// The memory the filters see: granule `word` is at `memory + 8 * word`.
    memory: Box<Memory>,
}

#[repr(align(256))]
struct Memory([u8; 8 * WORDS]);

/// The bytes of `mask` as one range (offset, length), if they are one.
fn range(mask: u32) -> Option<(usize, usize)> {
    let lo = mask.trailing_zeros() as usize;
    let len = (mask >> lo).trailing_ones() as usize;
    (mask >> lo == (1 << len) - 1).then_some((lo, len))
}

impl World {
    fn new() -> World {
        World {
            vc: (0..THREADS)
                .map(|t| {
                    let mut v = VClock::new();
                    v.set(SLOT[t], 1);
                    v
                })
                .collect(),
            locks: vec![VClock::new(); LOCKS],
            cells: (0..WORDS).map(|_| Cell::default()).collect(),
            history: (0..WORDS).map(|_| Vec::new()).collect(),
            filters: (0..THREADS).map(|_| Filter::eager()).collect(),
            memory: Box::new(Memory([0; 8 * WORDS])),
        }
    }

    fn tick(&mut self, t: usize) {
        let c = self.vc[t].get(SLOT[t]) + 1;
        self.vc[t].set(SLOT[t], c);
        self.filters[t].clear();
    }

    /// Applies `op` (access number `index`); for an access: the detector's race, and the
    /// model's races (indices of the earlier accesses it races with).
    fn step(&mut self, op: &Op, index: u32) -> Option<(Option<detect::Race>, Vec<u32>)> {
        match *op {
            Op::Release { t, lock } => {
                self.locks[lock] = self.vc[t].clone();
                self.tick(t);
                None
            }
            Op::Acquire { t, lock } => {
                let l = self.locks[lock].clone();
                self.vc[t].join(&l);
                None
            }
            Op::Join { t, from } => {
                if t != from {
                    let f = self.vc[from].clone();
                    self.vc[t].join(&f);
                    // The other thread goes on in a new epoch, as a thread that was joined
                    // would be a new thread with a new clock.
                    self.tick(from);
                }
                None
            }
            Op::Access {
                t,
                word,
                write,
                mask,
            } => {
                let own = self.vc[t].get(SLOT[t]);
                let acc = clock::access(own, SLOT[t], mask, index);
                let cell = &self.cells[word];
                let granule = self.memory.0.as_ptr() as usize + 8 * word;
                let filter = &self.filters[t];
                let span = range(mask);
                let filtered = match span {
                    _ if write => {
                        let lo = mask.trailing_zeros() as usize;
                        filter.forget(granule + lo, 32 - mask.leading_zeros() as usize - lo);
                        false
                    }
                    Some((off, len)) => filter.covers(granule + off, len as i32),
                    None => false,
                };
                let redundant = filtered
                    || if write {
                        detect::write_is_redundant(cell, acc)
                    } else {
                        detect::read_is_redundant(cell, acc)
                    };
                let race = if redundant {
                    None
                } else if write {
                    detect::write(cell, acc, &self.vc[t])
                } else {
                    detect::read(cell, acc, &self.vc[t])
                };
                if let (false, Some((off, len))) = (write || filtered, span) {
                    filter.note(granule + off, len);
                }
                let vc = &self.vc[t];
                let model: Vec<u32> = self.history[word]
                    .iter()
                    .filter(|p| {
                        p.t != t
                            && (p.write || write)
                            && p.mask & mask != 0
                            && p.clock > vc.get(SLOT[p.t])
                    })
                    .map(|p| p.index)
                    .collect();
                self.history[word].push(Past {
                    t,
                    clock: own,
                    write,
                    mask,
                    index,
                });
                Some((race, model))
            }
        }
    }
}

fn word_of(op: &Op) -> Option<usize> {
    match op {
        Op::Access { word, .. } => Some(*word),
        _ => None,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn every_reported_race_is_a_real_one(ops in prop::collection::vec(op(false), 1..80)) {
        let mut w = World::new();
        for (i, o) in ops.iter().enumerate() {
            if let Some((Some(race), model)) = w.step(o, i as u32) {
                let prev = clock::site(race.prev);
                prop_assert!(
                    model.contains(&prev),
                    "access {i} {o:?}: reported a race with access {prev}, the model's races are {model:?}"
                );
                let Op::Access { word, .. } = o else { unreachable!() };
                let past = w.history[*word].iter().find(|p| p.index == prev).unwrap();
                prop_assert_eq!(past.write, race.prev_write);
            }
        }
    }

    #[test]
    fn whole_word_races_are_found_exactly_up_to_the_first_on_each_word(
        ops in prop::collection::vec(op(true), 1..80)
    ) {
        first_races_are_exact(&ops)?;
    }

    #[test]
    fn races_of_any_bytes_are_found_exactly_up_to_the_first_on_each_word(
        ops in prop::collection::vec(op(false), 1..80)
    ) {
        first_races_are_exact(&ops)?;
    }
}

/// The detector reports a race at each access where the model first sees one on its granule,
/// and at no access before.
fn first_races_are_exact(ops: &[Op]) -> Result<(), TestCaseError> {
    {
        let mut w = World::new();
        let mut raced = [false; WORDS];
        for (i, o) in ops.iter().enumerate() {
            let word = word_of(o);
            if let Some((race, model)) = w.step(o, i as u32) {
                let word = word.unwrap();
                if raced[word] {
                    continue;
                }
                prop_assert_eq!(
                    race.is_some(),
                    !model.is_empty(),
                    "access {} {:?}: detector {:?}, model {:?}",
                    i,
                    o,
                    race,
                    model
                );
                raced[word] = !model.is_empty();
            }
        }
    }
    Ok(())
}

#[test]
fn the_model_check_can_fail_a_detector_that_misses_races() {
    // Two unordered writes by different threads race; one that ignored the last write would
    // say nothing, and the exactness property above would fail.
    let mut w = World::new();
    let a = Op::Access {
        t: 0,
        word: 0,
        write: true,
        mask: 0xff,
    };
    let b = Op::Access {
        t: 1,
        word: 0,
        write: true,
        mask: 0xff,
    };
    assert!(matches!(w.step(&a, 0), Some((None, ref m)) if m.is_empty()));
    let (race, model) = w.step(&b, 1).unwrap();
    assert_eq!(model, vec![0]);
    assert_eq!(clock::site(race.unwrap().prev), 0);
    // After a release by thread 1 and an acquire by thread 2, thread 2's write is ordered.
    w.step(&Op::Release { t: 1, lock: 0 }, 2);
    w.step(&Op::Acquire { t: 2, lock: 0 }, 3);
    let c = Op::Access {
        t: 2,
        word: 0,
        write: true,
        mask: 0xff,
    };
    let (race, model) = w.step(&c, 4).unwrap();
    // Thread 0's write is still unordered with thread 2's: a race in both.
    assert_eq!(model, vec![0]);
    assert!(race.is_none() || clock::site(race.unwrap().prev) == 0);
}

/// Reads of threads with and without a home in a shared read set (thread 5's slot has none),
/// then a write ordered after every reader but thread 5: it races with thread 5's read, which
/// the set must therefore hold, and with nothing else.
#[test]
fn a_read_by_a_thread_without_a_home_is_kept_in_a_shared_set() {
    let read = |t: usize| Op::Access {
        t,
        word: 0,
        write: false,
        mask: 0xff,
    };
    for (first, second) in [(0, 1), (5, 0), (1, 5)] {
        let mut w = World::new();
        let mut i = 0;
        let mut step = |w: &mut World, o: &Op| {
            i += 1;
            w.step(o, i)
        };
        step(&mut w, &read(first));
        step(&mut w, &read(second));
        // Thread 5 reads (once more if it did already: the same epoch's read is not new).
        step(&mut w, &read(5));
        step(&mut w, &read(5));
        for from in [0, 1] {
            step(&mut w, &Op::Join { t: 2, from });
        }
        let (race, model) = step(
            &mut w,
            &Op::Access {
                t: 2,
                word: 0,
                write: true,
                mask: 0xff,
            },
        )
        .unwrap();
        let race = race.unwrap_or_else(|| panic!("({first}, {second}): no race, model {model:?}"));
        assert!(
            model.contains(&clock::site(race.prev)),
            "({first}, {second}): {model:?}"
        );
        assert!(!race.prev_write);
    }
}
