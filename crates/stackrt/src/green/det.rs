//! The deterministic scheduler of green threads (`STACKRT_SCHED`): one worker, and every
//! scheduling decision taken from a seed, recorded, or replayed.
//!
//! * `random:SEED`: at every decision the next thread is drawn uniformly from the runnable
//!   ones; after an explicit `sthread_yield`, from the others if there are any. A thread
//!   yields when it cannot go on until another one does (a spin-wait's retry): drawing it
//!   again would only repeat its failed check, a step that explores nothing and that a
//!   recorded trace, and so every replay of it, would have to repeat (loom's `yield_now` and
//!   PCT below treat a yield the same way).
//! * `pct:SEED:DEPTH[:STEPS]`: PCT (Burckhardt et al., ASPLOS 2010). Every thread gets a random
//!   priority when created; `DEPTH - 1` change points are drawn among the first `STEPS`
//!   (default 10,000) decisions, and at the i-th the thread that ran last drops to priority
//!   `DEPTH - 1 - i`, below every initial one; the highest-priority runnable thread runs. A bug
//!   of depth d among n threads and k steps shows with probability at least 1/(n k^(d-1)) per
//!   run. An explicit `sthread_yield` also drops the yielding thread below every other
//!   (otherwise a thread that yields in a loop waiting for others would keep the worker).
//! * `replay:FILE`: the decisions of a trace, in order; a trace that no longer fits the
//!   program (the thread it names is not runnable) ends it with one line.
//!
//! `STACKRT_SCHED_TRACE=FILE` records the decisions: a header line with the policy, then one
//! line per decision with the handle of the thread that runs (0 is `main`); for a `--race`
//! program also the partial order of its conflicting events, which `relaxed:FILE` enforces
//! with the threads running in parallel (the format: `crate::race::trace`; the recording:
//! `crate::race::record`, whose file this module writes its lines to). A decision is taken
//! whenever the worker picks a thread: after a yield, a park (join, contended lock), an exit,
//! and, in this mode only, at every `sthread_create`, `sthread_mutex_lock`,
//! `sthread_mutex_unlock` and `sthread_join` (each makes the calling thread yield first), so
//! the interleavings at those points are explored too. Same policy and program input, same
//! decisions, same output and trace, byte for byte.

use std::fmt;

use core::ffi::c_int;

/// A policy of `STACKRT_SCHED`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Policy {
    Random { seed: u64 },
    Pct { seed: u64, depth: u32, steps: u64 },
    Replay { path: String },
}

/// Default `STEPS` of `pct:`.
pub const DEFAULT_PCT_STEPS: u64 = 10_000;

impl Policy {
    /// Parses a `STACKRT_SCHED` value.
    pub fn parse(s: &str) -> Result<Policy, String> {
        let parts: Vec<&str> = s.trim().splitn(2, ':').collect();
        let num = |v: &str, what: &str| -> Result<u64, String> {
            v.trim()
                .parse::<u64>()
                .map_err(|_| format!("{what} {v:?} is not a number"))
        };
        match (parts[0], parts.get(1)) {
            ("random", Some(rest)) => Ok(Policy::Random {
                seed: num(rest, "seed")?,
            }),
            ("pct", Some(rest)) => {
                let f: Vec<&str> = rest.split(':').collect();
                if f.len() < 2 || f.len() > 3 {
                    return Err("pct takes SEED:DEPTH or SEED:DEPTH:STEPS".into());
                }
                let depth = num(f[1], "depth")?;
                if depth == 0 || depth > 1000 {
                    return Err(format!("depth {depth} is not between 1 and 1000"));
                }
                let steps = match f.get(2) {
                    Some(v) => num(v, "steps")?.max(1),
                    None => DEFAULT_PCT_STEPS,
                };
                Ok(Policy::Pct {
                    seed: num(f[0], "seed")?,
                    depth: depth as u32,
                    steps,
                })
            }
            ("replay", Some(path)) if !path.is_empty() => Ok(Policy::Replay {
                path: path.to_string(),
            }),
            _ => Err(
                "expected random:SEED, pct:SEED:DEPTH[:STEPS], replay:FILE or relaxed:FILE".into(),
            ),
        }
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Policy::Random { seed } => write!(f, "random:{seed}"),
            Policy::Pct { seed, depth, steps } => write!(f, "pct:{seed}:{depth}:{steps}"),
            Policy::Replay { path } => write!(f, "replay:{path}"),
        }
    }
}

/// SplitMix64: a small, well-mixed generator whose whole state is one word.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}

/// A runnable thread as the deterministic scheduler sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry<T> {
    pub thread: T,
    pub handle: c_int,
}

/// Why a decision could not be taken.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DetError {
    /// Nothing is runnable while threads are alive: they all wait for each other.
    Deadlock,
    /// The replayed trace names a thread that is not runnable, or ended.
    Diverged { step: u64, wanted: Option<c_int> },
}

impl fmt::Display for DetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DetError::Deadlock => write!(f, "deadlock: every green thread is blocked"),
            DetError::Diverged {
                step,
                wanted: Some(h),
            } => write!(
                f,
                "replay diverged at decision {step}: thread {h} of the trace is not runnable"
            ),
            DetError::Diverged { step, wanted: None } => {
                write!(f, "replay diverged at decision {step}: the trace ended")
            }
        }
    }
}

/// The deterministic scheduler's state: the runnable threads in the order they became
/// runnable, and the policy's state. Generic over the thread type so the policy can be tested
/// without threads.
pub struct Det<T> {
    policy: Policy,
    runnable: Vec<Entry<T>>,
    rng: Rng,
    step: u64,
    /// PCT: priority of each thread by handle (index), the change points (sorted), the next
    /// low priority to give.
    priorities: Vec<i64>,
    change_points: Vec<u64>,
    next_change: usize,
    last: Option<c_int>,
    lowest: i64,
    /// Replay: the trace's decisions.
    replay: Vec<c_int>,
    /// Whether decisions are recorded (`crate::race::record` has the file).
    trace: bool,
    /// The next pick follows a thread's preemption by time (a spin-wait), not a decision
    /// point: [`Det::preempted`].
    after_preemption: bool,
    /// Random: the thread whose explicit yield the next pick follows ([`Det::yielded`]).
    yielder: Option<c_int>,
}

impl<T: Copy + PartialEq> Det<T> {
    /// A scheduler for `policy`; `replay` holds a replayed trace's text, `trace` the file that
    /// records the decisions. A malformed trace is an error naming its line.
    pub fn new(
        policy: Policy,
        replay_text: Option<&str>,
        trace: Option<std::fs::File>,
    ) -> Result<Det<T>, String> {
        let (seed, replay) = match &policy {
            Policy::Random { seed } | Policy::Pct { seed, .. } => (*seed, Vec::new()),
            Policy::Replay { path } => {
                let text = replay_text.ok_or_else(|| format!("cannot read {path}"))?;
                let t = crate::race::trace::parse(text)
                    .map_err(|(line, m)| format!("{path}:{line}: {m}"))?;
                (0, t.decisions)
            }
        };
        let mut rng = Rng::new(seed);
        let mut change_points = Vec::new();
        if let Policy::Pct { depth, steps, .. } = policy {
            for _ in 1..depth {
                change_points.push(1 + rng.below(steps));
            }
            change_points.sort_unstable();
        }
        let det = Det {
            policy,
            runnable: Vec::new(),
            rng,
            step: 0,
            priorities: Vec::new(),
            change_points,
            next_change: 0,
            last: None,
            lowest: 0,
            replay,
            trace: trace.is_some(),
            after_preemption: false,
            yielder: None,
        };
        if let Some(file) = trace {
            crate::race::record::open(file);
            // A `--race` program's events go into the same file, after the header: version 3.
            let version = if crate::race::enabled() { 3 } else { 1 };
            let policy = det.policy.to_string();
            crate::race::record::line(&crate::race::trace::header(version, &policy));
            if version == 3 {
                crate::race::start_recording();
            }
        }
        Ok(det)
    }

    fn write_trace(&mut self, s: &str) {
        if self.trace {
            crate::race::record::line(s);
        }
    }

    /// Flushes the trace file.
    pub fn flush(&mut self) {
        if self.trace {
            crate::race::record::flush();
        }
    }

    /// A thread was created (PCT gives it its random priority).
    pub fn created(&mut self, handle: c_int) {
        if let Policy::Pct { depth, .. } = self.policy {
            let idx = handle as usize;
            if self.priorities.len() <= idx {
                self.priorities.resize(idx + 1, 0);
            }
            // Initial priorities lie above every change-point priority (0..depth-1).
            self.priorities[idx] = depth as i64 + (self.rng.next_u64() >> 2) as i64;
        }
    }

    /// The thread `handle` yielded explicitly (PCT drops it below every other; random draws
    /// the next thread from the others).
    pub fn yielded(&mut self, handle: c_int) {
        if matches!(self.policy, Policy::Random { .. }) {
            self.yielder = Some(handle);
        }
        if matches!(self.policy, Policy::Pct { .. }) {
            self.lowest -= 1;
            let lowest = self.lowest;
            if let Some(p) = self.priorities.get_mut(handle as usize) {
                *p = lowest;
            }
        }
    }

    /// The running thread is preempted because it ran a whole (long) slice without reaching a
    /// decision point, e.g. in a loop waiting for a flag another thread sets. The next pick is
    /// not a decision of the seed: it takes the thread runnable longest (the preempted one
    /// goes last), writes nothing to the trace and leaves the decision count alone, so the
    /// decisions that follow are those of a run in which the preemption came earlier or later.
    pub fn preempted(&mut self) {
        self.after_preemption = true;
    }

    /// A thread became runnable.
    pub fn push(&mut self, thread: T, handle: c_int) {
        self.runnable.push(Entry { thread, handle });
    }

    /// Whether no thread is runnable.
    pub fn is_empty(&self) -> bool {
        self.runnable.is_empty()
    }

    /// The decision: which runnable thread runs next (removed from the runnable ones).
    pub fn pick(&mut self) -> Result<Entry<T>, DetError> {
        if self.runnable.is_empty() {
            return Err(DetError::Deadlock);
        }
        let yielder = self.yielder.take();
        if core::mem::take(&mut self.after_preemption) {
            return Ok(self.runnable.remove(0));
        }
        self.step += 1;
        let i = match &self.policy {
            Policy::Random { .. } => {
                let n = self.runnable.len();
                match yielder.and_then(|h| self.runnable.iter().position(|e| e.handle == h)) {
                    Some(y) if n > 1 => {
                        // Uniform over the others: skip the yielder's index.
                        let i = self.rng.below(n as u64 - 1) as usize;
                        i + usize::from(i >= y)
                    }
                    _ => self.rng.below(n as u64) as usize,
                }
            }
            Policy::Pct { depth, .. } => {
                let depth = *depth as i64;
                while self.next_change < self.change_points.len()
                    && self.change_points[self.next_change] <= self.step
                {
                    if let Some(p) = self.last.and_then(|h| self.priorities.get_mut(h as usize)) {
                        *p = (depth - 1 - self.next_change as i64).min(self.lowest - 1);
                        self.lowest = *p;
                    }
                    self.next_change += 1;
                }
                let prio = |e: &Entry<T>| {
                    self.priorities
                        .get(e.handle as usize)
                        .copied()
                        .unwrap_or(i64::MIN)
                };
                let mut best = 0;
                for (j, e) in self.runnable.iter().enumerate() {
                    if prio(e) > prio(&self.runnable[best]) {
                        best = j;
                    }
                }
                best
            }
            Policy::Replay { .. } => {
                let wanted = self.replay.get(self.step as usize - 1).copied();
                match wanted.and_then(|h| self.runnable.iter().position(|e| e.handle == h)) {
                    Some(i) => i,
                    None => {
                        return Err(DetError::Diverged {
                            step: self.step,
                            wanted,
                        })
                    }
                }
            }
        };
        let e = self.runnable.remove(i);
        self.last = Some(e.handle);
        let line = format!("{}\n", e.handle);
        self.write_trace(&line);
        Ok(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_parse_and_print() {
        assert_eq!(Policy::parse("random:42"), Ok(Policy::Random { seed: 42 }));
        assert_eq!(
            Policy::parse("pct:7:3"),
            Ok(Policy::Pct {
                seed: 7,
                depth: 3,
                steps: DEFAULT_PCT_STEPS
            })
        );
        assert_eq!(
            Policy::parse("pct:7:3:50").unwrap().to_string(),
            "pct:7:3:50"
        );
        assert_eq!(
            Policy::parse("replay:/tmp/t"),
            Ok(Policy::Replay {
                path: "/tmp/t".into()
            })
        );
        for bad in [
            "", "random", "random:x", "pct:1", "pct:1:0", "fifo:1", "replay:",
        ] {
            assert!(Policy::parse(bad).is_err(), "{bad:?}");
        }
    }

    fn run(policy: Policy, n: c_int, picks: usize) -> Vec<c_int> {
        let mut d: Det<c_int> = Det::new(policy, None, None).unwrap();
        for h in 0..n {
            d.created(h);
            d.push(h, h);
        }
        (0..picks)
            .map(|_| {
                let e = d.pick().unwrap();
                d.push(e.thread, e.handle);
                e.handle
            })
            .collect()
    }

    #[test]
    fn same_seed_same_decisions_other_seed_other_decisions() {
        let a = run(Policy::Random { seed: 1 }, 5, 200);
        assert_eq!(a, run(Policy::Random { seed: 1 }, 5, 200));
        assert_ne!(a, run(Policy::Random { seed: 2 }, 5, 200));
        for h in 0..5 {
            assert!(a.contains(&h), "thread {h} never picked");
        }
    }

    #[test]
    fn pct_runs_the_highest_priority_until_a_change_point() {
        let picks = run(
            Policy::Pct {
                seed: 3,
                depth: 1,
                steps: 100,
            },
            4,
            50,
        );
        // Depth 1: no change point, one thread keeps running.
        assert!(picks.iter().all(|&h| h == picks[0]));
        let picks = run(
            Policy::Pct {
                seed: 3,
                depth: 2,
                steps: 20,
            },
            4,
            50,
        );
        let distinct: std::collections::BTreeSet<_> = picks.iter().collect();
        assert_eq!(distinct.len(), 2, "one change point: two threads run");
    }

    #[test]
    fn random_never_draws_a_yielder_while_another_thread_can_run() {
        let mut d: Det<c_int> = Det::new(Policy::Random { seed: 5 }, None, None).unwrap();
        for h in 0..3 {
            d.push(h, h);
        }
        let mut e = d.pick().unwrap();
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..300 {
            d.yielded(e.handle);
            d.push(e.thread, e.handle);
            let next = d.pick().unwrap();
            assert_ne!(next.handle, e.handle);
            seen.insert((e.handle, next.handle));
            e = next;
        }
        // Each of the others is drawn: 3 threads, 2 successors each.
        assert_eq!(seen.len(), 6);
        // Without a yield the same thread may be drawn again.
        let again = run(Policy::Random { seed: 5 }, 3, 300);
        assert!(again.windows(2).any(|w| w[0] == w[1]));
        // Alone, a yielder runs on.
        let mut d: Det<c_int> = Det::new(Policy::Random { seed: 1 }, None, None).unwrap();
        d.push(4, 4);
        d.yielded(4);
        assert_eq!(d.pick().unwrap().handle, 4);
    }

    #[test]
    fn a_preemption_by_time_is_not_a_decision() {
        let mut d: Det<c_int> = Det::new(Policy::Random { seed: 7 }, None, None).unwrap();
        for h in 0..3 {
            d.push(h, h);
        }
        let running = d.pick().unwrap();
        let steps = d.step;
        let rng = d.rng.0;
        // Preempted by time: the thread runnable longest runs, no decision is made.
        d.preempted();
        d.push(running.thread, running.handle);
        let next = d.pick().unwrap();
        assert_eq!(next.handle, if running.handle == 0 { 1 } else { 0 });
        assert_eq!((d.step, d.rng.0), (steps, rng));
        // The pick after it is a decision again.
        d.push(next.thread, next.handle);
        d.pick().unwrap();
        assert_eq!(d.step, steps + 1);
    }

    #[test]
    fn replay_follows_the_trace_and_reports_divergence() {
        let text = "stackrt-sched-trace 1 random:1\n2\n0\n1\n";
        let mut d: Det<c_int> =
            Det::new(Policy::Replay { path: "t".into() }, Some(text), None).unwrap();
        for h in 0..3 {
            d.push(h, h);
        }
        assert_eq!(d.pick().unwrap().handle, 2);
        assert_eq!(d.pick().unwrap().handle, 0);
        assert_eq!(
            d.pick(),
            Ok(Entry {
                thread: 1,
                handle: 1
            })
        );
        assert_eq!(d.pick(), Err(DetError::Deadlock));
        d.push(5, 5);
        assert_eq!(
            d.pick(),
            Err(DetError::Diverged {
                step: 4,
                wanted: None
            })
        );
        assert!(Det::<c_int>::new(
            Policy::Replay { path: "t".into() },
            Some("nonsense\n"),
            None
        )
        .is_err());
    }
}
