//! The schedule trace file (`STACKRT_SCHED_TRACE`, read back by `STACKRT_SCHED=replay:FILE`
//! and `relaxed:FILE`): its text format, one line per entry, and its parser.
//!
//! ```text
//! stackrt-sched-trace 2 POLICY          header (version 1: decisions only, no --race events)
//! program SITES HASH                    the --race program: its site count and site-table hash
//! 3                                     a decision: thread 3 (its handle) runs next
//! event T N after U.M [V.K ...] KIND [at SITE]
//!                                       thread T's N-th event comes after U's M-th (and V's K-th)
//! end T N                               thread T ended after N events
//! ```
//!
//! Decisions are the total order strict replay follows (`green::det`). The rest is the partial
//! order relaxed replay enforces: threads are numbered in creation order (0 is `main`; the
//! k-th thread created is thread k, which is its handle unless handles were reused after a
//! join), and each thread counts its own events from 1: every instrumented load and store
//! (of any memory) and every `sthread_create`, `sthread_join`, `sthread_mutex_lock`,
//! `sthread_mutex_unlock` and `sthread_cas`. An `event` line lists the earlier events of other
//! threads that must have happened first (conflicting accesses to the same bytes, the previous
//! unlock of a mutex, the previous create or join; a compare-and-swap conflicts as a write of
//! its 4 bytes, so the CASes of one word are in one order), less those the thread already comes
//! after through earlier lines, creation, joins and mutexes. KIND is `read`, `write`, `lock`,
//! `create`, `join` or `cas`, and SITE an access's `file:line:col`; both are there for people,
//! not for replay.
//! Lines of one thread's events are in increasing N.

/// The header's first words.
pub const MAGIC: &str = "stackrt-sched-trace";

/// One `event` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub thread: u32,
    pub seq: u64,
    /// Where its (thread, event) pairs that come first are in [`Trace::afters`]: a trace has
    /// hundreds of thousands of `event` lines, most with one pair, so they share one vector
    /// instead of an allocation each.
    pub after: core::ops::Range<u32>,
}

/// A parsed trace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trace {
    pub version: u32,
    pub policy: String,
    /// The `program` line: site count and hash.
    pub program: Option<(u64, u64)>,
    pub decisions: Vec<i32>,
    pub events: Vec<Event>,
    /// The events' (thread, event) pairs, event after event ([`Trace::after_of`]).
    pub afters: Vec<(u32, u64)>,
    /// `end` lines: (thread, events).
    pub ends: Vec<(u32, u64)>,
}

impl Trace {
    /// The (thread, event) pairs that come before event `e` of this trace.
    pub fn after_of(&self, e: &Event) -> &[(u32, u64)] {
        &self.afters[e.after.start as usize..e.after.end as usize]
    }

    /// Adds an event that comes after the events `after` (for traces built in memory).
    pub fn push_event(&mut self, thread: u32, seq: u64, after: &[(u32, u64)]) {
        let start = self.afters.len() as u32;
        self.afters.extend_from_slice(after);
        self.events.push(Event {
            thread,
            seq,
            after: start..self.afters.len() as u32,
        });
    }
}

/// Most threads a trace may name (a bound on the tables relaxed replay builds from it).
pub const MAX_THREADS: u32 = 1 << 20;

const KINDS: [&str; 6] = ["read", "write", "lock", "create", "join", "cas"];

fn thread(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(t) if t < MAX_THREADS => Ok(t),
        _ => Err(format!("{s:?} is not a thread number")),
    }
}

fn seq(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("{s:?} is not an event number (1 or more)")),
    }
}

/// Parses an `event` line's words, its pairs appended to `afters`.
fn parse_event(words: &[&str], afters: &mut Vec<(u32, u64)>) -> Result<Event, String> {
    let usage = "expected: event T N after U.M [U.M ...] KIND [at SITE]";
    if words.len() < 5 || words[3] != "after" {
        return Err(usage.into());
    }
    let t = thread(words[1])?;
    let n = seq(words[2])?;
    let start = afters.len();
    let mut i = 4;
    while i < words.len() && words[i].contains('.') {
        let (u, m) = words[i].split_once('.').unwrap_or_default();
        let (u, m) = (thread(u)?, seq(m)?);
        if u == t {
            return Err(format!("thread {t} cannot come after itself"));
        }
        afters.push((u, m));
        i += 1;
    }
    if afters.len() == start {
        return Err(usage.into());
    }
    let (Ok(first), Ok(end)) = (u32::try_from(start), u32::try_from(afters.len())) else {
        return Err("too many event pairs in one trace".into());
    };
    match words.get(i) {
        Some(k) if KINDS.contains(k) => {}
        Some(k) => return Err(format!("{k:?} is not an event kind ({})", KINDS.join(", "))),
        None => return Err(usage.into()),
    }
    if let Some(w) = words.get(i + 1) {
        if *w != "at" || words.len() == i + 2 {
            return Err(usage.into());
        }
    }
    Ok(Event {
        thread: t,
        seq: n,
        after: first..end,
    })
}

/// The lines of `text` as `str::lines` gives them (without `\n` or `\r\n`), found by a plain
/// byte loop: a trace's lines are about ten bytes, too short for `lines`' per-line searcher
/// call to pay (it was a tenth of relaxed replay's time on IRS's Fibonacci).
fn lines_of(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    core::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let end = rest.bytes().position(|b| b == b'\n');
        let line = match end {
            Some(i) => {
                let line = &rest[..i];
                rest = &rest[i + 1..];
                line.strip_suffix('\r').unwrap_or(line)
            }
            None => core::mem::take(&mut rest),
        };
        Some(line)
    })
}

/// Parses a trace; an error names the line (1-based) and what is wrong with it.
pub fn parse(text: &str) -> Result<Trace, (usize, String)> {
    let mut lines = lines_of(text).enumerate().map(|(i, l)| (i + 1, l));
    let mut t = Trace::default();
    match lines
        .next()
        .map(|(_, l)| (l, l.split_whitespace().collect::<Vec<_>>()))
    {
        Some((_, w)) if w.len() == 3 && w[0] == MAGIC && (w[1] == "1" || w[1] == "2") => {
            t.version = if w[1] == "1" { 1 } else { 2 };
            t.policy = w[2].to_string();
        }
        Some((_, w)) if w.first() == Some(&MAGIC) => {
            return Err((1, "expected: stackrt-sched-trace 1|2 POLICY".into()))
        }
        _ => return Err((1, "not a stackrt schedule trace".into())),
    }
    // The last event number of each thread seen so far (0: none), for the ordering check, and
    // the threads that ended; by thread number (below MAX_THREADS).
    let mut last: Vec<u64> = Vec::new();
    let mut ended: Vec<bool> = Vec::new();
    // A trace holds millions of lines (every decision of a run): a line's words go into this
    // array, not a vector of their own, and a decision line is read as digits.
    let mut buf: [&str; 24] = [""; 24];
    let mut spill: Vec<&str> = Vec::new();
    for (no, line) in lines {
        let err = |m: String| (no, m);
        let bytes = line.as_bytes();
        if !bytes.is_empty() && bytes.len() <= 9 && bytes.iter().all(u8::is_ascii_digit) {
            // A decision: one handle (nine digits fit an i32).
            t.decisions.push(line.parse::<i32>().unwrap_or(0));
            continue;
        }
        let mut count = 0;
        spill.clear();
        for w in line.split_ascii_whitespace() {
            if count < buf.len() {
                buf[count] = w;
            } else {
                if count == buf.len() {
                    spill.extend_from_slice(&buf);
                }
                spill.push(w);
            }
            count += 1;
        }
        let words: &[&str] = if count <= buf.len() {
            &buf[..count]
        } else {
            &spill
        };
        let Some(first) = words.first() else {
            return Err(err("empty line".into()));
        };
        if let Ok(h) = first.parse::<i32>() {
            if words.len() != 1 || h < 0 {
                return Err(err("a decision line is one thread handle".into()));
            }
            t.decisions.push(h);
            continue;
        }
        if t.version == 1 {
            return Err(err("a version 1 trace has decision lines only".into()));
        }
        match *first {
            "program" => {
                let nums: Option<Vec<u64>> = words[1..].iter().map(|w| w.parse().ok()).collect();
                match nums.as_deref() {
                    Some([sites, hash]) if t.program.is_none() => {
                        t.program = Some((*sites, *hash));
                    }
                    _ => return Err(err("expected one line: program SITES HASH".into())),
                }
            }
            "event" => {
                let e = parse_event(words, &mut t.afters).map_err(err)?;
                let i = e.thread as usize;
                if last.len() <= i {
                    last.resize(i + 1, 0);
                    ended.resize(i + 1, false);
                }
                if last[i] >= e.seq {
                    return Err((
                        no,
                        format!(
                            "event {} of thread {} after a later or equal one of the same thread",
                            e.seq, e.thread
                        ),
                    ));
                }
                if ended[i] {
                    return Err((no, format!("thread {} ended above", e.thread)));
                }
                last[i] = e.seq;
                t.events.push(e);
            }
            "end" => {
                if words.len() != 3 {
                    return Err(err("expected: end T N".into()));
                }
                let th = thread(words[1]).map_err(err)?;
                let n: u64 = words[2]
                    .parse()
                    .map_err(|_| (no, format!("{:?} is not a number of events", words[2])))?;
                let i = th as usize;
                if last.len() <= i {
                    last.resize(i + 1, 0);
                    ended.resize(i + 1, false);
                }
                if last[i] > n || ended[i] {
                    return Err((no, format!("thread {th} cannot end here")));
                }
                ended[i] = true;
                t.ends.push((th, n));
            }
            other => return Err(err(format!("{other:?} starts no known line"))),
        }
    }
    Ok(t)
}

/// The header line of a trace recorded under `policy`.
pub fn header(version: u32, policy: &str) -> String {
    format!("{MAGIC} {version} {policy}\n")
}

/// The `event` line of thread `t`'s event `n` after `after`, of kind `kind` (at `site`).
pub fn event_line(t: u32, n: u64, after: &[(u32, u64)], kind: &str, site: Option<&[u8]>) -> String {
    use std::fmt::Write as _;
    let mut s = format!("event {t} {n} after");
    for (u, m) in after {
        let _ = write!(s, " {u}.{m}");
    }
    let _ = write!(s, " {kind}");
    if let Some(site) = site {
        let _ = write!(s, " at {}", String::from_utf8_lossy(site));
    }
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_trace_parses_back() {
        let mut text = header(2, "pct:3:2:40");
        text.push_str("program 12 987654321\n0\n1\n");
        text.push_str(&event_line(
            2,
            5,
            &[(1, 4), (3, 9)],
            "write",
            Some(b"a b.cm:3:4"),
        ));
        text.push_str(&event_line(2, 7, &[(0, 2)], "lock", None));
        text.push_str("2\nend 2 9\n");
        let t = parse(&text).unwrap();
        assert_eq!(t.version, 2);
        assert_eq!(t.policy, "pct:3:2:40");
        assert_eq!(t.program, Some((12, 987654321)));
        assert_eq!(t.decisions, [0, 1, 2]);
        let events: Vec<_> = t
            .events
            .iter()
            .map(|e| (e.thread, e.seq, t.after_of(e).to_vec()))
            .collect();
        assert_eq!(events, [(2, 5, vec![(1, 4), (3, 9)]), (2, 7, vec![(0, 2)])]);
        assert_eq!(t.ends, [(2, 9)]);
        let v1 = parse("stackrt-sched-trace 1 random:1\n2\n0\n").unwrap();
        assert_eq!((v1.version, v1.decisions), (1, vec![2, 0]));
    }

    #[test]
    fn lines_are_split_as_str_lines_does() {
        for text in [
            "",
            "a",
            "a\n",
            "a\r\nb",
            "\n\n",
            "ab\ncd\r\n\r\nef\r",
            "x\ry\n",
        ] {
            assert_eq!(
                lines_of(text).collect::<Vec<_>>(),
                text.lines().collect::<Vec<_>>(),
                "{text:?}"
            );
        }
    }

    #[test]
    fn malformed_lines_are_named_by_number() {
        let h = "stackrt-sched-trace 2 random:1\n";
        for (body, line) in [
            ("", 1),
            ("x\n", 1),
            ("stackrt-sched-trace 3 random:1\n", 1),
            (
                "stackrt-sched-trace 1 random:1\n0\nevent 1 2 after 0.1 read\n",
                3,
            ),
        ] {
            let text = if line == 1 || body.starts_with(MAGIC) {
                body.to_string()
            } else {
                format!("{h}{body}")
            };
            assert_eq!(parse(&text).map_err(|e| e.0), Err(line), "{text:?}");
        }
        for bad in [
            "-1",
            "1 2",
            "",
            "evnt 1 2 after 0.1 read",
            "event 1 2 after read",
            "event 1 0 after 0.1 read",
            "event 1 2 after 1.1 read",
            "event 1 2 after 0.x read",
            "event 1 2 after 0.1 poke",
            "event 1 2 after 0.1",
            "event 1 2 after 0.1 read at",
            "event 1 2 after 0.1 read on x",
            "event 1 2 before 0.1 read",
            "program 1",
            "end 1",
            "end x 3",
        ] {
            let text = format!("{h}0\n{bad}\n1\n");
            assert_eq!(parse(&text).map_err(|e| e.0), Err(3), "{bad:?}");
        }
        let twice = format!("{h}event 1 5 after 0.1 read\nevent 1 5 after 0.2 read\n");
        assert_eq!(parse(&twice).map_err(|e| e.0), Err(3));
        let after_end = format!("{h}end 1 5\nevent 1 6 after 0.2 read\n");
        assert_eq!(parse(&after_end).map_err(|e| e.0), Err(3));
        let early_end = format!("{h}event 1 6 after 0.2 read\nend 1 5\n");
        assert_eq!(parse(&early_end).map_err(|e| e.0), Err(3));
        let two_programs = format!("{h}program 1 2\nprogram 1 2\n");
        assert_eq!(parse(&two_programs).map_err(|e| e.0), Err(3));
    }
}
