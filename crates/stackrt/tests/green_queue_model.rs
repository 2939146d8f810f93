//! Model-based property test of the green scheduler's run queues (`stackrt::green::queue`):
//! random create (one thread, or a burst that fills a ring and spills into the overflow) /
//! yield / direct yield / park / wake (to the `next` slot) / exit / schedule sequences over a
//! few workers, against a model that predicts every queue's exact contents (the `next` slot,
//! the ring of `RING` slots and the overflow), every steal (victim and the half that moves)
//! and every thread's state (with every queue open to thieves at once: the age rule for short
//! queues depends on time and is tested in the module). After every step: each live thread is
//! in exactly one place (running on one worker, queued once, or parked), and no thread runs on
//! two workers.
//!
//! A second test runs real OS threads as workers against the queues concurrently: every green
//! thread yields a fixed number of times and must run exactly that many times, never on two
//! workers at once.

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;

use proptest::prelude::*;
use stackrt::green::queue::{RunQueues, Source, Word, RING};

/// A green thread of the test: a number (queues hold nonzero words).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Th(u32);

impl Word for Th {
    fn to_word(self) -> usize {
        self.0 as usize + 1
    }
    fn from_word(w: usize) -> Self {
        Th((w - 1) as u32)
    }
}

#[derive(Clone, Debug)]
enum Op {
    /// A new thread, queued on this worker.
    Create(usize),
    /// A hundred new threads on this worker (rings fill and spill).
    Burst(usize),
    /// The thread running on this worker goes to the back of the worker's queue.
    Yield(usize),
    /// The thread running on this worker blocks (a lock, a join).
    Park(usize),
    /// A parked thread (index into the parked list) becomes ready on this worker, at the front
    /// of its queue (it runs next, as the scheduler's wakes do).
    Wake(usize, usize),
    /// The thread running on this worker yields directly to the front of the worker's own
    /// queue (no stealing) and goes to the back; with nothing queued it keeps running.
    DirectYield(usize),
    /// The thread running on this worker ends.
    Exit(usize),
    /// This worker, if idle, takes its next thread.
    Schedule(usize),
}

const WORKERS: usize = 3;

fn op() -> impl Strategy<Value = Op> {
    let w = 0..WORKERS;
    prop_oneof![
        2 => w.clone().prop_map(Op::Create),
        1 => w.clone().prop_map(Op::Burst),
        3 => w.clone().prop_map(Op::Yield),
        3 => w.clone().prop_map(Op::DirectYield),
        1 => w.clone().prop_map(Op::Park),
        1 => (any::<usize>(), w.clone()).prop_map(|(i, w)| Op::Wake(i, w)),
        1 => w.clone().prop_map(Op::Exit),
        4 => w.prop_map(Op::Schedule),
    ]
}

/// One worker's queue in the model.
#[derive(Clone, Default)]
struct ModelQueue {
    next: Option<u32>,
    ring: VecDeque<u32>,
    overflow: VecDeque<u32>,
}

impl ModelQueue {
    fn push(&mut self, t: u32) {
        if self.ring.len() == RING {
            let half: Vec<u32> = self.ring.drain(..RING / 2).collect();
            self.overflow.extend(half);
        }
        self.ring.push_back(t);
    }

    fn push_front(&mut self, t: u32) {
        if let Some(old) = self.next.replace(t) {
            self.push(old);
        }
    }

    fn pop_own(&mut self) -> Option<u32> {
        self.next
            .take()
            .or_else(|| self.overflow.pop_front())
            .or_else(|| self.ring.pop_front())
    }

    fn len(&self) -> usize {
        self.ring.len() + self.overflow.len() + usize::from(self.next.is_some())
    }

    fn iter(&self) -> impl Iterator<Item = &u32> {
        self.next.iter().chain(&self.overflow).chain(&self.ring)
    }
}

/// The model: the queues, what runs where, what is parked.
struct Model {
    queues: Vec<ModelQueue>,
    running: Vec<Option<u32>>,
    parked: Vec<u32>,
    next: u32,
    done: HashSet<u32>,
}

impl Model {
    /// What `RunQueues::pop` must return, applied to the model: the own queue, else the older
    /// half of the first non-empty queue after it (its overflow's half but at most half a
    /// ring, else its ring's half), else that queue's next thread.
    fn pop(&mut self, w: usize) -> Option<(u32, Source)> {
        if let Some(t) = self.queues[w].pop_own() {
            return Some((t, Source::Own));
        }
        for k in 1..WORKERS {
            let v = (w + k) % WORKERS;
            let q = &mut self.queues[v];
            let mut stolen: Vec<u32> = if !q.overflow.is_empty() {
                let take = q.overflow.len().div_ceil(2).min(RING / 2);
                q.overflow.drain(..take).collect()
            } else {
                let take = q.ring.len().div_ceil(2);
                q.ring.drain(..take).collect()
            };
            if stolen.is_empty() {
                stolen.extend(q.next.take());
            }
            let mut it = stolen.into_iter();
            if let Some(first) = it.next() {
                for t in it {
                    self.queues[w].push(t);
                }
                return Some((first, Source::Stolen(v)));
            }
        }
        None
    }

    /// Every live thread is in exactly one place.
    fn check(&self, q: &RunQueues<Th>) -> Result<(), String> {
        let mut seen = HashSet::new();
        let queued = self.queues.iter().flat_map(ModelQueue::iter);
        let running = self.running.iter().flatten();
        for t in queued.chain(running).chain(self.parked.iter()) {
            if !seen.insert(*t) {
                return Err(format!("thread {t} is in two places"));
            }
            if self.done.contains(t) {
                return Err(format!("thread {t} ended but is still scheduled"));
            }
        }
        if seen.len() + self.done.len() != self.next as usize {
            return Err(format!(
                "{} threads created, {} live and {} ended",
                self.next,
                seen.len(),
                self.done.len()
            ));
        }
        for w in 0..WORKERS {
            if q.len_of(w) != self.queues[w].len() {
                return Err(format!(
                    "worker {w}: {} queued, the model has {:?}",
                    q.len_of(w),
                    self.queues[w].iter().collect::<Vec<_>>()
                ));
            }
        }
        Ok(())
    }
}

fn run(ops: &[Op]) -> Result<(), String> {
    // The model predicts steals from contents alone; the age rule for short queues (a thief
    // waits until the owner has taken nothing for a while) has its own tests in the module.
    let q = RunQueues::new(WORKERS).without_steal_age();
    let mut m = Model {
        queues: vec![ModelQueue::default(); WORKERS],
        running: vec![None; WORKERS],
        parked: Vec::new(),
        next: 0,
        done: HashSet::new(),
    };
    for (n, op) in ops.iter().enumerate() {
        match *op {
            Op::Create(w) => {
                q.push(w, Th(m.next));
                m.queues[w].push(m.next);
                m.next += 1;
            }
            Op::Burst(w) => {
                for _ in 0..100 {
                    q.push(w, Th(m.next));
                    m.queues[w].push(m.next);
                    m.next += 1;
                }
            }
            Op::Yield(w) => {
                if let Some(t) = m.running[w].take() {
                    q.push(w, Th(t));
                    m.queues[w].push(t);
                }
            }
            Op::Park(w) => {
                if let Some(t) = m.running[w].take() {
                    m.parked.push(t);
                }
            }
            Op::Wake(i, w) => {
                if !m.parked.is_empty() {
                    let t = m.parked.swap_remove(i % m.parked.len());
                    q.push_front(w, Th(t));
                    m.queues[w].push_front(t);
                }
            }
            Op::DirectYield(w) => {
                if let Some(t) = m.running[w] {
                    let want = m.queues[w].pop_own();
                    let got = q.pop_own(w).map(|Th(t)| t);
                    if got != want {
                        return Err(format!(
                            "step {n}: worker {w}'s own queue gave {got:?}, the model predicts \
                             {want:?}"
                        ));
                    }
                    if let Some(next) = got {
                        m.running[w] = Some(next);
                        q.push(w, Th(t));
                        m.queues[w].push(t);
                    }
                }
            }
            Op::Exit(w) => {
                if let Some(t) = m.running[w].take() {
                    m.done.insert(t);
                }
            }
            Op::Schedule(w) => {
                if m.running[w].is_none() {
                    let want = m.pop(w);
                    let got = q.pop(w).map(|(Th(t), s)| (t, s));
                    if got != want {
                        return Err(format!(
                            "step {n}: worker {w} popped {got:?}, the model predicts {want:?}"
                        ));
                    }
                    if let Some((t, _)) = got {
                        if m.running.contains(&Some(t)) {
                            return Err(format!("step {n}: thread {t} runs on two workers"));
                        }
                        m.running[w] = Some(t);
                    }
                }
            }
        }
        m.check(&q).map_err(|e| format!("step {n} ({op:?}): {e}"))?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn the_queues_behave_as_their_model(ops in proptest::collection::vec(op(), 1..300)) {
        let r = run(&ops);
        prop_assert!(r.is_ok(), "{}", r.unwrap_err());
    }
}

#[test]
fn a_steal_takes_the_older_half_of_the_next_queue() {
    let q = RunQueues::new(3).without_steal_age();
    for t in 0..5 {
        q.push(2, Th(t));
    }
    // Worker 0's queue is empty and worker 1's too: worker 2's older half (3 of 5) moves.
    assert_eq!(q.pop(0), Some((Th(0), Source::Stolen(2))));
    assert_eq!(q.len_of(0), 2);
    assert_eq!(q.len_of(2), 2);
    assert_eq!(q.pop(0), Some((Th(1), Source::Own)));
    assert_eq!(q.pop(2), Some((Th(3), Source::Own)));
}

/// Real workers: `WORKERS + 1` OS threads take green "threads" (numbers) from the queues and put
/// each back `ROUNDS` times; a flag per thread catches a thread running on two workers at once.
#[test]
fn concurrent_workers_never_lose_or_double_run_a_thread() {
    const THREADS: u32 = 2000;
    const ROUNDS: u32 = 50;
    let workers = WORKERS + 1;
    let q = Arc::new(RunQueues::new(workers));
    let runs: Arc<Vec<AtomicU32>> = Arc::new((0..THREADS).map(|_| AtomicU32::new(0)).collect());
    let running: Arc<Vec<AtomicBool>> =
        Arc::new((0..THREADS).map(|_| AtomicBool::new(false)).collect());
    let finished = Arc::new(AtomicU32::new(0));
    for t in 0..THREADS {
        q.push(t as usize % workers, Th(t));
    }
    let handles: Vec<_> = (0..workers)
        .map(|w| {
            let (q, runs, running, finished) =
                (q.clone(), runs.clone(), running.clone(), finished.clone());
            std::thread::spawn(move || -> Result<(), String> {
                let start = std::time::Instant::now();
                while finished.load(Ordering::Acquire) < THREADS {
                    if start.elapsed() > std::time::Duration::from_secs(60) {
                        return Err("a thread was lost: the workers ran dry for a minute".into());
                    }
                    let Some((Th(t), _)) = q.pop(w) else {
                        std::thread::yield_now();
                        continue;
                    };
                    if running[t as usize].swap(true, Ordering::AcqRel) {
                        return Err(format!("thread {t} runs on two workers at once"));
                    }
                    let n = runs[t as usize].fetch_add(1, Ordering::Relaxed) + 1;
                    running[t as usize].store(false, Ordering::Release);
                    if n < ROUNDS {
                        q.push(w, Th(t));
                    } else {
                        finished.fetch_add(1, Ordering::AcqRel);
                    }
                }
                Ok(())
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap().unwrap();
    }
    for (t, r) in runs.iter().enumerate() {
        assert_eq!(r.load(Ordering::Relaxed), ROUNDS, "thread {t}");
    }
    assert!(q.is_empty());
}
