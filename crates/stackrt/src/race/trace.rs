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
//! unlock of a mutex, the previous create or join; a compare-and-swap that changed the word
//! conflicts as a write of its 4 bytes, one that failed or wrote the value it found as a read),
//! less those the thread already comes after through earlier lines, creation, joins and
//! mutexes. KIND is `read`, `write`, `lock`,
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
    pub header: Header,
    pub decisions: Vec<i32>,
    pub events: Vec<Event>,
    /// The events' (thread, event) pairs, event after event ([`Trace::after_of`]).
    pub afters: Vec<(u32, u64)>,
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

/// Where the decisions and events of a trace go as [`parse_into`] reads them: a [`Trace`] keeps
/// them all; relaxed replay keeps only what each thread waits for (a trace has millions of
/// lines, and holding them twice was most of the memory a replay took).
pub trait Sink {
    /// A decision line: thread `handle` runs next.
    fn decision(&mut self, handle: i32);
    /// An `event` line: thread `thread`'s event `seq` comes after the events `after`.
    fn event(&mut self, thread: u32, seq: u64, after: &[(u32, u64)]);
    /// Whether [`Sink::decision`] does anything: if not, runs of decision lines are checked in
    /// one pass and not read one by one (most of a trace's lines are decisions).
    fn keeps_decisions(&self) -> bool {
        true
    }
}

impl Sink for Trace {
    fn decision(&mut self, handle: i32) {
        self.decisions.push(handle);
    }

    fn event(&mut self, thread: u32, seq: u64, after: &[(u32, u64)]) {
        self.push_event(thread, seq, after);
    }
}

/// The lines of a trace that are not decisions or events: the header line, the `program` line
/// and the `end` lines.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Header {
    pub version: u32,
    pub policy: String,
    /// The `program` line: site count and hash.
    pub program: Option<(u64, u64)>,
    /// `end` lines: (thread, events).
    pub ends: Vec<(u32, u64)>,
}

/// Most threads a trace may name (a bound on the tables relaxed replay builds from it).
pub const MAX_THREADS: u32 = 1 << 20;

/// Event kinds (`fast_event` matches the same words).
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

/// Digits at the start of `b` as a number (at most `max_digits` of them, no sign), and the rest.
#[inline(always)]
fn digits(b: &[u8], max_digits: usize) -> Option<(u64, &[u8])> {
    let mut v = 0u64;
    let mut n = 0;
    while let Some(&c) = b.get(n) {
        if !c.is_ascii_digit() {
            break;
        }
        if n == max_digits {
            return None;
        }
        v = v * 10 + u64::from(c - b'0');
        n += 1;
    }
    (n > 0).then_some((v, &b[n..]))
}

/// An `event` line in the form the recorder writes (single spaces, plain digits), read by a
/// byte cursor from the start of `b` (the line and everything after it): nearly every line of
/// a trace that is not a decision. Returns the event and the length of its line with its `\n`
/// (the whole of `b` if it is the last line and has none). `None` for anything else, also for
/// lines that are valid but unusual (tabs, `+1`, `\r\n`): [`parse_event`] then reads the line
/// as before and names what is wrong with it, so this path accepts only lines that one accepts,
/// with the same result. Pairs it pushed before giving up are the caller's to drop.
fn fast_event(b: &[u8], afters: &mut Vec<(u32, u64)>) -> Option<(Event, usize)> {
    let rest = b.strip_prefix(b"event ")?;
    let (t, rest) = digits(rest, 7)?;
    let (n, rest) = digits(rest.strip_prefix(b" ")?, 19)?;
    if t >= u64::from(MAX_THREADS) || n == 0 {
        return None;
    }
    let mut rest = rest.strip_prefix(b" after ")?;
    let start = u32::try_from(afters.len()).ok()?;
    // Pairs: digits, a dot, digits, a space; then the kind.
    while rest.first().is_some_and(u8::is_ascii_digit) {
        let (u, r) = digits(rest, 7)?;
        let (m, r) = digits(r.strip_prefix(b".")?, 19)?;
        if u >= u64::from(MAX_THREADS) || m == 0 || u == t {
            return None;
        }
        afters.push((u as u32, m));
        rest = r.strip_prefix(b" ")?;
    }
    let end = u32::try_from(afters.len()).ok()?;
    if end == start {
        return None;
    }
    // The kind ends at a space, the line's end or the text's.
    let k = rest
        .iter()
        .position(|&c| c == b' ' || c == b'\n')
        .unwrap_or(rest.len());
    if !matches!(
        &rest[..k],
        b"read" | b"write" | b"lock" | b"create" | b"join" | b"cas"
    ) {
        return None;
    }
    let mut rest = &rest[k..];
    if rest.first() == Some(&b' ') {
        // " at SITE": one word, so no byte up to the line's end is a space or a control
        // character (every ASCII whitespace is one of those).
        let site = rest.strip_prefix(b" at ")?;
        let w = memchr::memchr(b'\n', site).unwrap_or(site.len());
        // Without an early exit, so that the check is vectorised (sites are most of a trace's
        // bytes).
        if w == 0 || site[..w].iter().fold(false, |any, &c| any | (c <= b' ')) {
            return None;
        }
        rest = &site[w..];
    }
    let len = match rest.first() {
        None => b.len(),
        Some(b'\n') => b.len() - rest.len() + 1,
        Some(_) => return None,
    };
    Some((
        Event {
            thread: t as u32,
            seq: n,
            after: start..end,
        },
        len,
    ))
}

/// A decision line in the recorder's form at the start of `b`: one to nine digits (they fit an
/// i32) and `\n` or the text's end. The handle and the line's length with its `\n`.
#[inline(always)]
fn fast_decision(b: &[u8]) -> Option<(i32, usize)> {
    let mut v = 0i32;
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        if c.is_ascii_digit() && i < 9 {
            v = v * 10 + i32::from(c - b'0');
            i += 1;
        } else if c == b'\n' && i > 0 {
            return Some((v, i + 1));
        } else {
            return None;
        }
    }
    (i > 0).then_some((v, i))
}

/// The decision lines in the recorder's form ([`fast_decision`]'s) at the start of `b`, in one
/// pass: their length in bytes and their number.
fn decision_run(b: &[u8]) -> (usize, usize) {
    let (mut pos, mut lines) = (0, 0);
    loop {
        let digits = b[pos..]
            .iter()
            .take(10)
            .take_while(|c| c.is_ascii_digit())
            .count();
        if digits == 0 || digits > 9 {
            return (pos, lines);
        }
        match b.get(pos + digits) {
            Some(b'\n') => {
                pos += digits + 1;
                lines += 1;
            }
            None => return (b.len(), lines + 1),
            Some(_) => return (pos, lines),
        }
    }
}

/// The line at the start of `b` as `str::lines` gives it (without `\n` or `\r\n`) and its
/// length with its `\n`.
fn line_at(b: &[u8]) -> (&[u8], usize) {
    match memchr::memchr(b'\n', b) {
        Some(i) => (b[..i].strip_suffix(b"\r").unwrap_or(&b[..i]), i + 1),
        None => (b, b.len()),
    }
}

/// The lines of `text` as `str::lines` gives them.
#[cfg(test)]
fn lines_of(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text.as_bytes();
    core::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let (line, len) = line_at(rest);
        rest = &rest[len..];
        // A line of a `str` split at `\n` bytes is a `str`.
        core::str::from_utf8(line).ok()
    })
}

/// Checks an `event` line of thread `thread` against the thread's earlier lines (`last`: each
/// thread's last event number; `ended`: whether its `end` line came).
fn check_order(
    thread: u32,
    seq: u64,
    last: &mut Vec<u64>,
    ended: &mut Vec<bool>,
) -> Result<(), String> {
    let i = thread as usize;
    if last.len() <= i {
        last.resize(i + 1, 0);
        ended.resize(i + 1, false);
    }
    if last[i] >= seq {
        return Err(format!(
            "event {seq} of thread {thread} after a later or equal one of the same thread"
        ));
    }
    if ended[i] {
        return Err(format!("thread {thread} ended above"));
    }
    last[i] = seq;
    Ok(())
}

/// Parses a trace; an error names the line (1-based) and what is wrong with it.
pub fn parse(text: &str) -> Result<Trace, (usize, String)> {
    let mut t = Trace::default();
    t.header = parse_into(text, &mut t)?;
    Ok(t)
}

/// Parses a trace, its decisions and events into `sink` as they come; an error names the line
/// (1-based) and what is wrong with it.
pub fn parse_into(text: &str, sink: &mut impl Sink) -> Result<Header, (usize, String)> {
    let bytes = text.as_bytes();
    let (head, mut pos) = line_at(bytes);
    let mut t = Header::default();
    // The pairs of the event line being read.
    let mut pairs: Vec<(u32, u64)> = Vec::new();
    let w: Vec<&str> = core::str::from_utf8(head)
        .unwrap_or("")
        .split_whitespace()
        .collect();
    match w.as_slice() {
        [m, v, p] if *m == MAGIC && (*v == "1" || *v == "2") => {
            t.version = if *v == "1" { 1 } else { 2 };
            t.policy = p.to_string();
        }
        [m, ..] if *m == MAGIC => {
            return Err((1, "expected: stackrt-sched-trace 1|2 POLICY".into()))
        }
        _ => return Err((1, "not a stackrt schedule trace".into())),
    }
    // The last event number of each thread seen so far (0: none), for the ordering check, and
    // the threads that ended; by thread number (below MAX_THREADS).
    let mut last: Vec<u64> = Vec::new();
    let mut ended: Vec<bool> = Vec::new();
    // A trace holds millions of lines (every decision of a run): lines in the recorder's form
    // are read by a byte cursor that finds their end as it goes; any other line is split into
    // words, which go into this array, not a vector of their own.
    let mut buf: [&str; 24] = [""; 24];
    let mut spill: Vec<&str> = Vec::new();
    let mut no = 1;
    while pos < bytes.len() {
        no += 1;
        let err = |m: String| (no, m);
        let b = &bytes[pos..];
        if !sink.keeps_decisions() {
            let (len, lines) = decision_run(b);
            if lines > 0 {
                no += lines - 1;
                pos += len;
                continue;
            }
        }
        if let Some((h, len)) = fast_decision(b) {
            sink.decision(h);
            pos += len;
            continue;
        }
        if t.version == 2 && b.first() == Some(&b'e') {
            pairs.clear();
            if let Some((e, len)) = fast_event(b, &mut pairs) {
                check_order(e.thread, e.seq, &mut last, &mut ended).map_err(err)?;
                sink.event(e.thread, e.seq, &pairs);
                pos += len;
                continue;
            }
        }
        let (line, len) = line_at(b);
        pos += len;
        // Lines end at `\n` bytes, so a line of the text is a `str`.
        let line = core::str::from_utf8(line).unwrap_or("");
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
            sink.decision(h);
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
                pairs.clear();
                let e = parse_event(words, &mut pairs).map_err(err)?;
                check_order(e.thread, e.seq, &mut last, &mut ended).map_err(err)?;
                sink.event(e.thread, e.seq, &pairs);
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
        assert_eq!(t.header.version, 2);
        assert_eq!(t.header.policy, "pct:3:2:40");
        assert_eq!(t.header.program, Some((12, 987654321)));
        assert_eq!(t.decisions, [0, 1, 2]);
        let events: Vec<_> = t
            .events
            .iter()
            .map(|e| (e.thread, e.seq, t.after_of(e).to_vec()))
            .collect();
        assert_eq!(events, [(2, 5, vec![(1, 4), (3, 9)]), (2, 7, vec![(0, 2)])]);
        assert_eq!(t.header.ends, [(2, 9)]);
        let v1 = parse("stackrt-sched-trace 1 random:1\n2\n0\n").unwrap();
        assert_eq!((v1.header.version, v1.decisions), (1, vec![2, 0]));
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

    /// Every line made by changing, adding or dropping one byte of `seeds` (from `alphabet`).
    fn mutations(seeds: &[&str], alphabet: &[u8]) -> Vec<Vec<u8>> {
        let mut lines: Vec<Vec<u8>> = Vec::new();
        for s in seeds {
            let b = s.as_bytes();
            lines.push(b.to_vec());
            for i in 0..=b.len() {
                for &c in alphabet {
                    let mut changed = b.to_vec();
                    if i < b.len() {
                        changed[i] = c;
                        lines.push(changed.clone());
                        changed = b.to_vec();
                        changed.remove(i);
                        lines.push(changed);
                    }
                    let mut added = b.to_vec();
                    added.insert(i, c);
                    lines.push(added);
                }
            }
        }
        lines
    }

    /// The words of the first line of `b`, as the general path splits them.
    fn first_line_words(b: &[u8]) -> (String, usize) {
        let (line, len) = line_at(b);
        (String::from_utf8(line.to_vec()).unwrap(), len)
    }

    /// `fast_event` accepts only lines `parse_event` accepts, with the same event and pairs and
    /// the same line end: the recorder's lines and every line made by changing, adding or
    /// dropping one byte of them, as the last line of a text and followed by another.
    #[test]
    fn the_fast_event_path_agrees_with_the_word_parser() {
        let seeds = [
            "event 3 4 after 2.6 write at lost_update.cm:16:9",
            "event 2 11 after 1.17 3.9 lock",
            "event 12 1 after 0.1 cas",
            "event 1 99999999999 after 1048575.5 read at a",
        ];
        let mut accepted = 0;
        for line in mutations(&seeds, b" .0129aet\t+-:x\r\n\x0c") {
            for text in [
                line.clone(),
                [&line[..], b"\nevent 1 2 after 0.1 read"].concat(),
            ] {
                let (first, len) = first_line_words(&text);
                let words: Vec<&str> = first.split_ascii_whitespace().collect();
                let mut general = Vec::new();
                let slow = parse_event(&words, &mut general);
                let mut fast_pairs = Vec::new();
                if let Some((e, fast_len)) = fast_event(&text, &mut fast_pairs) {
                    accepted += 1;
                    assert_eq!(slow.as_ref(), Ok(&e), "{text:?}");
                    assert_eq!(fast_pairs, general, "{text:?}");
                    assert_eq!(fast_len, len, "{text:?}");
                }
            }
        }
        assert!(accepted > 200, "only {accepted} lines took the fast path");
    }

    /// `fast_decision` accepts only what the general path reads as a decision, with the same
    /// handle and line end.
    #[test]
    fn the_fast_decision_path_agrees_with_the_word_parser() {
        let mut accepted = 0;
        for line in mutations(&["0", "7", "42", "123456789"], b" 09x-+\t\r\n") {
            for text in [line.clone(), [&line[..], b"\n3"].concat()] {
                let (first, len) = first_line_words(&text);
                let words: Vec<&str> = first.split_ascii_whitespace().collect();
                let general = match words.as_slice() {
                    [w] => w.parse::<i32>().ok().filter(|h| *h >= 0),
                    _ => None,
                };
                if let Some((h, fast_len)) = fast_decision(&text) {
                    accepted += 1;
                    assert_eq!(general, Some(h), "{text:?}");
                    assert_eq!(fast_len, len, "{text:?}");
                }
            }
        }
        assert!(accepted > 50, "only {accepted} lines took the fast path");
    }

    /// A sink that drops decisions, as relaxed replay's does.
    #[derive(Default)]
    struct EventsOnly(Trace);

    impl Sink for EventsOnly {
        fn decision(&mut self, _: i32) {}
        fn event(&mut self, thread: u32, seq: u64, after: &[(u32, u64)]) {
            self.0.push_event(thread, seq, after);
        }
        fn keeps_decisions(&self) -> bool {
            false
        }
    }

    #[test]
    fn runs_of_decisions_skipped_unread_give_the_same_events_and_errors() {
        let h = "stackrt-sched-trace 2 random:1\n";
        let mut checked = 0;
        // Runs of decision lines with one byte changed, added or dropped, around events and
        // before the text's end.
        for run in mutations(&["0\n12\n123456789\n7"], b"09x \n\r") {
            let run = String::from_utf8(run).unwrap();
            for text in [
                format!("{h}{run}"),
                format!("{h}{run}\nevent 1 2 after 0.1 read\n3\n"),
                format!("{h}5\n{run}\nend 1 4\n"),
            ] {
                let mut skipped = EventsOnly::default();
                let got = parse_into(&text, &mut skipped).map(|h| (h, skipped.0.events));
                let want = parse(&text).map(|t| (t.header, t.events));
                assert_eq!(got, want, "{text:?}");
                checked += usize::from(want.is_ok());
            }
        }
        assert!(checked > 100, "only {checked} texts parsed");
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
