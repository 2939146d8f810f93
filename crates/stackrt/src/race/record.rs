//! Recording a schedule (`STACKRT_SCHED_TRACE`): the trace file every line goes to, and, for a
//! `--race` program under the deterministic scheduler, the partial order of its events that
//! relaxed replay enforces (`event` lines of `trace`).
//!
//! The deterministic scheduler runs one thread at a time, so this recorder sees the events in
//! the order they happen and keeps, per byte of any memory accessed (in 8-byte granules), the
//! last write and the reads since it: accesses conflict only where their bytes meet. An access comes after the conflicting ones of other
//! threads (a read after the last write; a write after it and the reads since), an acquired
//! mutex after its previous unlock, a create or join after the previous create or join of any
//! thread (handles and thread numbers are given out in that order). Each thread keeps a vector
//! clock of the events it already comes after (its own program order, creation, joins, mutexes
//! and the edges written so far), and an edge it covers is not written: a mutex-protected
//! counter gives lock lines, not one line per access.

use rustc_hash::FxHashMap;
use std::io::Write as _;
use std::sync::Mutex;

use super::trace;

/// The trace file, shared with the deterministic scheduler's decision lines.
static SINK: Mutex<Option<std::io::BufWriter<std::fs::File>>> = Mutex::new(None);

fn sink() -> std::sync::MutexGuard<'static, Option<std::io::BufWriter<std::fs::File>>> {
    SINK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Makes `file` the trace file.
pub fn open(file: std::fs::File) {
    *sink() = Some(std::io::BufWriter::new(file));
}

/// Appends `s` (whole lines) to the trace file, if one is open.
pub fn line(s: &str) {
    if let Some(w) = sink().as_mut() {
        let _ = w.write_all(s.as_bytes());
    }
}

/// Writes out what is buffered, pending runs of failed swaps first.
pub fn flush() {
    for (t, r) in with(Recorder::take_runs).unwrap_or_default() {
        line(&trace::failed_line(t, r.first, r.count, r.value));
    }
    if let Some(w) = sink().as_mut() {
        let _ = w.flush();
    }
}

/// A thread's event: (thread number, event number).
pub type Ev = (u32, u64);

/// The history of one 8-byte granule, byte by byte: two accesses conflict only if they share a
/// byte (adjacent `int` globals share a granule, and ordering their accesses too would hold a
/// replay back where the run was free).
#[derive(Default)]
struct Granule {
    /// The last write of each byte.
    writes: [Option<Ev>; 8],
    /// Reads since the last write of the bytes they read: (event, those bytes as a mask).
    reads: Vec<(Ev, u8)>,
}

/// Consecutive events of one thread, each a compare-and-swap that failed finding `value`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    pub first: u64,
    pub count: u64,
    pub value: i32,
}

/// The recorder's state.
#[derive(Default)]
pub struct Recorder {
    /// Each thread's run of failed swaps not written yet (written before the thread's next
    /// line, its `end` line, or at exit).
    runs: FxHashMap<u32, Run>,
    granules: FxHashMap<usize, Granule>,
    /// Vector clock of each live thread, by thread number.
    clocks: FxHashMap<u32, Vec<u64>>,
    /// Each mutex's last unlock and the unlocker's clock then.
    mutexes: FxHashMap<usize, (Ev, Vec<u64>)>,
    last_handle_op: Option<Ev>,
}

fn join_into(a: &mut Vec<u64>, b: &[u64]) {
    if a.len() < b.len() {
        a.resize(b.len(), 0);
    }
    for (x, y) in a.iter_mut().zip(b) {
        *x = (*x).max(*y);
    }
}

impl Recorder {
    fn clock(&mut self, t: u32) -> &mut Vec<u64> {
        self.clocks.entry(t).or_default()
    }

    /// Thread `t`'s event `n`: sets its own clock entry and keeps those of `deps` (one per
    /// thread, the latest) it does not already cover; returns them.
    fn edges(&mut self, t: u32, n: u64, deps: &[Ev]) -> Vec<Ev> {
        let c = self.clock(t);
        if c.len() <= t as usize {
            c.resize(t as usize + 1, 0);
        }
        c[t as usize] = n;
        let mut out: Vec<Ev> = Vec::new();
        for &(u, m) in deps {
            if u == t || c.get(u as usize).copied().unwrap_or(0) >= m {
                continue;
            }
            match out.iter_mut().find(|e| e.0 == u) {
                Some(e) => e.1 = e.1.max(m),
                None => out.push((u, m)),
            }
        }
        for &(u, m) in &out {
            if c.len() <= u as usize {
                c.resize(u as usize + 1, 0);
            }
            c[u as usize] = m;
        }
        out.sort_unstable();
        out
    }

    /// An access of `len` bytes at `addr` by thread `t`, its event `n`; returns its edges.
    pub fn access(&mut self, t: u32, n: u64, addr: usize, len: usize, write: bool) -> Vec<Ev> {
        let mut deps = Vec::new();
        let end = addr.saturating_add(len.max(1));
        let mut a = addr & !7;
        while a < end {
            // The bytes of this granule the access touches.
            let lo = addr.max(a) - a;
            let hi = end.min(a + 8) - a;
            let mask = ((1u16 << hi) - (1u16 << lo)) as u8;
            let g = self.granules.entry(a).or_default();
            for (i, w) in g.writes.iter_mut().enumerate() {
                if mask & (1 << i) != 0 {
                    deps.extend(*w);
                    if write {
                        *w = Some((t, n));
                    }
                }
            }
            if write {
                // Reads of these bytes come before this write; their other bytes stay read.
                g.reads.retain_mut(|(ev, m)| {
                    if *m & mask != 0 {
                        deps.push(*ev);
                        *m &= !mask;
                    }
                    *m != 0
                });
            } else {
                // This thread's earlier reads of no other bytes are covered by this one.
                g.reads.retain(|(ev, m)| ev.0 != t || *m & !mask != 0);
                g.reads.push(((t, n), mask));
            }
            a += 8;
        }
        self.edges(t, n, &deps)
    }

    /// Thread `t`'s event `n` was a compare-and-swap that failed, finding `value`: it joins the
    /// thread's pending run, or starts one and returns the run it ends (to be written).
    pub fn failed(&mut self, t: u32, n: u64, value: i32) -> Option<Run> {
        match self.runs.get_mut(&t) {
            Some(r) if r.first + r.count == n && r.value == value => {
                r.count += 1;
                None
            }
            _ => self.runs.insert(
                t,
                Run {
                    first: n,
                    count: 1,
                    value,
                },
            ),
        }
    }

    /// Thread `t`'s pending run, taken (its next line is about to be written).
    pub fn take_run(&mut self, t: u32) -> Option<Run> {
        self.runs.remove(&t)
    }

    /// Every thread's pending run, taken (the trace is being flushed).
    fn take_runs(&mut self) -> Vec<(u32, Run)> {
        let mut v: Vec<(u32, Run)> = self.runs.drain().collect();
        v.sort_unstable_by_key(|&(t, _)| t);
        v
    }

    /// Thread `t`'s event `n` acquired mutex `m`.
    pub fn lock(&mut self, t: u32, n: u64, m: usize) -> Vec<Ev> {
        let Some((ev, vc)) = self.mutexes.get(&m).cloned() else {
            return self.edges(t, n, &[]);
        };
        let out = self.edges(t, n, &[ev]);
        join_into(self.clock(t), &vc);
        out
    }

    /// Thread `t`'s event `n` unlocks mutex `m`.
    pub fn unlock(&mut self, t: u32, n: u64, m: usize) {
        self.edges(t, n, &[]);
        let vc = self.clock(t).clone();
        self.mutexes.insert(m, ((t, n), vc));
    }

    /// A create or join, thread `t`'s event `n`: after the previous one of any thread.
    fn handle_op(&mut self, t: u32, n: u64) -> Vec<Ev> {
        let deps: Vec<Ev> = self.last_handle_op.into_iter().collect();
        self.last_handle_op = Some((t, n));
        self.edges(t, n, &deps)
    }

    /// Thread `t`'s event `n` created thread `child`, which starts after it.
    pub fn create(&mut self, t: u32, n: u64, child: u32) -> Vec<Ev> {
        let out = self.handle_op(t, n);
        let vc = self.clock(t).clone();
        self.clocks.insert(child, vc);
        out
    }

    /// Thread `t`'s event `n` joined thread `child`, which ended after `child_events`.
    pub fn join(&mut self, t: u32, n: u64, child: u32, child_events: u64) -> Vec<Ev> {
        let out = self.handle_op(t, n);
        let mut vc = self.clocks.remove(&child).unwrap_or_default();
        if vc.len() <= child as usize {
            vc.resize(child as usize + 1, 0);
        }
        vc[child as usize] = vc[child as usize].max(child_events);
        join_into(self.clock(t), &vc);
        out
    }
}

static RECORDER: Mutex<Option<Recorder>> = Mutex::new(None);

/// Runs `f` on the recorder, if recording is on.
pub fn with<R>(f: impl FnOnce(&mut Recorder) -> R) -> Option<R> {
    let mut g = RECORDER.lock().unwrap_or_else(|e| e.into_inner());
    g.as_mut().map(f)
}

/// Turns the recorder on (the caller writes the header and `program` line).
pub fn start() {
    *RECORDER.lock().unwrap_or_else(|e| e.into_inner()) = Some(Recorder::default());
}

/// Writes the `event` line of `edges`, if there are any (after the thread's pending run).
pub fn write_event(t: u32, n: u64, edges: &[Ev], kind: &str, site: Option<&[u8]>) {
    if !edges.is_empty() {
        end_run(t);
        line(&trace::event_line(t, n, edges, kind, site));
    }
}

/// Thread `t`'s event `n` was a compare-and-swap that failed, finding `value`.
pub fn write_failed(t: u32, n: u64, value: i32) {
    if let Some(r) = with(|r| r.failed(t, n, value)).flatten() {
        line(&trace::failed_line(t, r.first, r.count, r.value));
    }
}

/// Writes thread `t`'s pending run of failed swaps, if any (before its next line).
pub fn end_run(t: u32) {
    if let Some(r) = with(|r| r.take_run(t)).flatten() {
        line(&trace::failed_line(t, r.first, r.count, r.value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conflicting_accesses_give_edges_once_and_reads_do_not_order_reads() {
        let mut r = Recorder::default();
        r.clock(1);
        r.clock(2);
        assert_eq!(r.access(1, 1, 100, 4, true), []);
        // Read after another thread's write.
        assert_eq!(r.access(2, 1, 100, 4, false), [(1, 1)]);
        // Again: already covered.
        assert_eq!(r.access(2, 2, 100, 4, false), []);
        // A read of thread 1 does not come after thread 2's read.
        assert_eq!(r.access(1, 2, 100, 4, false), []);
        // A write of thread 1 after thread 2's reads (the latest).
        assert_eq!(r.access(1, 3, 100, 4, true), [(2, 2)]);
        // Other bytes (of the same granule): no history.
        assert_eq!(r.access(2, 3, 96, 4, true), []);
        assert_eq!(r.access(2, 4, 108, 4, true), []);
        // Spanning two granules: after the writes of its bytes (thread 1's at 100, thread 2's
        // at 108 is not one of them).
        assert_eq!(r.access(3, 1, 100, 8, true), [(1, 3)]);
        // A read of one byte of thread 3's write and one of thread 2's (at 96).
        assert_eq!(r.access(1, 4, 99, 2, false), [(2, 3), (3, 1)]);
        // A write of byte 100 comes after that read and thread 3's write; one of byte 98 after
        // thread 2's write only (nobody read it); one of byte 99 after the read, which still
        // holds for it.
        assert_eq!(r.access(2, 5, 100, 1, true), [(1, 4), (3, 1)]);
        assert_eq!(r.access(3, 2, 98, 1, true), [(2, 3)]);
        assert_eq!(r.access(3, 3, 99, 1, true), [(1, 4)]);
    }

    #[test]
    fn failed_swaps_of_a_thread_make_runs_of_one_value() {
        let mut r = Recorder::default();
        assert_eq!(r.failed(1, 3, 7), None);
        assert_eq!(r.failed(1, 4, 7), None);
        assert_eq!(r.failed(2, 1, 7), None);
        // Another value, then a gap: each ends the run before it.
        let run = |first, count, value| {
            Some(Run {
                first,
                count,
                value,
            })
        };
        assert_eq!(r.failed(1, 5, -1), run(3, 2, 7));
        assert_eq!(r.failed(1, 7, -1), run(5, 1, -1));
        assert_eq!(r.take_run(1), run(7, 1, -1));
        assert_eq!(r.take_run(1), None);
        assert_eq!(
            r.take_runs(),
            vec![(
                2,
                Run {
                    first: 1,
                    count: 1,
                    value: 7
                }
            )]
        );
    }

    #[test]
    fn mutexes_and_joins_cover_the_accesses_they_order() {
        let mut r = Recorder::default();
        let m = 0x40;
        assert_eq!(r.create(0, 1, 1), []);
        assert_eq!(r.create(0, 2, 2), []);
        assert_eq!(r.lock(1, 1, m), []);
        assert_eq!(r.access(1, 2, 8, 4, true), []);
        r.unlock(1, 3, m);
        assert_eq!(r.lock(2, 1, m), [(1, 3)]);
        // Ordered by the mutex: no edge.
        assert_eq!(r.access(2, 2, 8, 4, true), []);
        r.unlock(2, 3, m);
        // Handle operations are ordered: the join comes after thread 0's create (its own) and
        // joining covers everything thread 2 did.
        assert_eq!(r.join(0, 3, 2, 3), []);
        assert_eq!(r.access(0, 4, 8, 4, false), []);
        // Thread 1 created a thread after main's join: an edge.
        assert_eq!(r.create(1, 4, 3), [(0, 3)]);
    }
}
