//! The schedule trace file (`STACKRT_SCHED_TRACE`, read back by `STACKRT_SCHED=replay:FILE`
//! and `relaxed:FILE`): its text format, one line per entry, and its parser.
//!
//! ```text
//! stackrt-sched-trace 3 POLICY          header (version 1: decisions only, no --race events;
//!                                       2: no `failed` lines)
//! program SITES HASH                    the --race program: its site count and site-table hash
//! 3                                     a decision: thread 3 (its handle) runs next
//! event T N after U.M [V.K ...] KIND [at SITE]
//!                                       thread T's N-th event comes after U's M-th (and V's K-th)
//! failed T N K V                        thread T's events N to N+K-1 are compare-and-swaps
//!                                       that failed, each finding the value V
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
//! conflicts as a write of its 4 bytes, one that wrote the value it found as a read), less
//! those the thread already comes after through earlier lines, creation, joins and mutexes.
//! KIND is `read`, `write`, `lock`, `create`, `join` or `cas`, and SITE an access's
//! `file:line:col`; both are there for people, not for replay.
//!
//! A compare-and-swap that failed changed nothing: it is in no order, and a `failed` line gives
//! the value it found instead (relaxed replay returns that value without reading the word). A
//! version 2 trace has no `failed` lines: its failed swaps are ordered as reads.
//!
//! Lines of one thread's events are in increasing N (a `failed` line counts as its last event).

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
    /// The `failed` lines: (thread, first event, count, value).
    pub failed: Vec<(u32, u64, u64, i32)>,
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
    /// A `failed` line: thread `thread`'s events `first` to `first + count - 1` are failed
    /// compare-and-swaps that found `value` (only relaxed replay needs them).
    fn failed(&mut self, _thread: u32, _first: u64, _count: u64, _value: i32) {}
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

    fn failed(&mut self, thread: u32, first: u64, count: u64, value: i32) {
        self.failed.push((thread, first, count, value));
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

/// Parses a `failed` line's words: (thread, first event, count, value).
fn parse_failed(words: &[&str]) -> Result<(u32, u64, u64, i32), String> {
    let [_, t, n, k, v] = words else {
        return Err("expected: failed T N K V".into());
    };
    let (t, n) = (thread(t)?, seq(n)?);
    let k = match k.parse::<u64>() {
        Ok(k) if k >= 1 && n.checked_add(k).is_some() => k,
        _ => return Err(format!("{k:?} is not a count of events (1 or more)")),
    };
    let v = v
        .parse::<i32>()
        .map_err(|_| format!("{v:?} is not an int value"))?;
    Ok((t, n, k, v))
}

/// A `failed` line in the recorder's form (single spaces, plain digits, `-` only before a
/// value) at the start of `b`: (thread, first event, count, value) and the line's length with
/// its `\n`. `None` for anything else, which [`parse_failed`] reads then.
fn fast_failed(b: &[u8]) -> Option<((u32, u64, u64, i32), usize)> {
    if !b.starts_with(b"failed ") {
        return None;
    }
    let mut i = 7;
    let t = field(b, &mut i, 7)?;
    let n = field(b, &mut i, 19)?;
    let k = field(b, &mut i, 19)?;
    let neg = byte(b, &mut i, b'-');
    let v = number(b, &mut i, 10)?;
    let v = i32::try_from(if neg { -(v as i64) } else { v as i64 }).ok()?;
    if t >= u64::from(MAX_THREADS) || n == 0 || k == 0 || n.checked_add(k).is_none() {
        return None;
    }
    let len = match b.get(i) {
        None => b.len(),
        Some(b'\n') => i + 1,
        Some(_) => return None,
    };
    Some(((t as u32, n, k, v), len))
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

/// The digits of `b` from `*i` as a number, `*i` moved past them: at least one and at most
/// `max` (no sign). Digits past 19 wrap, but then there are more than `max`.
#[inline(always)]
fn number(b: &[u8], i: &mut usize, max: usize) -> Option<u64> {
    let start = *i;
    let mut v = 0u64;
    while let Some(&c) = b.get(*i) {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        v = v.wrapping_mul(10).wrapping_add(u64::from(d));
        *i += 1;
    }
    let n = *i - start;
    (n > 0 && n <= max).then_some(v)
}

/// A [`number`] and the space after it.
#[inline(always)]
fn field(b: &[u8], i: &mut usize, max: usize) -> Option<u64> {
    let v = number(b, i, max)?;
    byte(b, i, b' ').then_some(v)
}

/// Whether `b[*i]` is `c`; if so, `*i` moves past it.
#[inline(always)]
fn byte(b: &[u8], i: &mut usize, c: u8) -> bool {
    let hit = b.get(*i) == Some(&c);
    *i += usize::from(hit);
    hit
}

/// An `event` line in the form the recorder writes (single spaces, plain digits), read by a
/// byte cursor from the start of `b` (the line and everything after it): nearly every line of
/// a trace that is not a decision. Returns the event and the length of its line with its `\n`
/// (the whole of `b` if it is the last line and has none). `None` for anything else, also for
/// lines that are valid but unusual (tabs, `+1`, `\r\n`): [`parse_event`] then reads the line
/// as before and names what is wrong with it, so this path accepts only lines that one accepts,
/// with the same result. Pairs it pushed before giving up are the caller's to drop.
fn fast_event(b: &[u8], afters: &mut Vec<(u32, u64)>) -> Option<(Event, usize)> {
    if !b.starts_with(b"event ") {
        return None;
    }
    let mut i = 6;
    let t = field(b, &mut i, 7)?;
    let n = number(b, &mut i, 19)?;
    if t >= u64::from(MAX_THREADS) || n == 0 || !b[i..].starts_with(b" after ") {
        return None;
    }
    i += 7;
    let start = u32::try_from(afters.len()).ok()?;
    // Pairs: digits, a dot, digits, a space; then the kind.
    while b.get(i).is_some_and(u8::is_ascii_digit) {
        let u = number(b, &mut i, 7)?;
        if !byte(b, &mut i, b'.') {
            return None;
        }
        let m = number(b, &mut i, 19)?;
        if u >= u64::from(MAX_THREADS) || m == 0 || u == t || !byte(b, &mut i, b' ') {
            return None;
        }
        afters.push((u as u32, m));
    }
    let end = u32::try_from(afters.len()).ok()?;
    if end == start {
        return None;
    }
    // The kind (one of KINDS, told apart by its first two bytes), then a space, the line's end
    // or the text's.
    // (Each compared with a literal: no call to memcmp.)
    let k = &b[i..];
    i += match k.get(..2)? {
        b"re" if k.starts_with(b"read") => 4,
        b"wr" if k.starts_with(b"write") => 5,
        b"lo" if k.starts_with(b"lock") => 4,
        b"cr" if k.starts_with(b"create") => 6,
        b"jo" if k.starts_with(b"join") => 4,
        b"ca" if k.starts_with(b"cas") => 3,
        _ => return None,
    };
    if b.get(i) == Some(&b' ') {
        // " at SITE": one word, so no byte up to the line's end is a space or a control
        // character (every ASCII whitespace is one of those).
        if !b[i..].starts_with(b" at ") {
            return None;
        }
        i += 4;
        let site = &b[i..];
        let w = memchr::memchr(b'\n', site).unwrap_or(site.len());
        // Without an early exit, so that the check is vectorised (sites are most of a trace's
        // bytes).
        if w == 0 || site[..w].iter().fold(false, |any, &c| any | (c <= b' ')) {
            return None;
        }
        i += w;
    }
    let len = match b.get(i) {
        None => b.len(),
        Some(b'\n') => i + 1,
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

/// Parses a trace; an error names the line (1-based) and what is wrong with it.
pub fn parse(text: &str) -> Result<Trace, (usize, String)> {
    let mut t = Trace::default();
    t.header = parse_into(text, &mut t)?;
    Ok(t)
}

/// Parses a trace, its decisions and events into `sink` as they come; an error names the line
/// (1-based) and what is wrong with it.
pub fn parse_into(text: &str, sink: &mut impl Sink) -> Result<Header, (usize, String)> {
    let (header, pos) = parse_header(text.as_bytes())?;
    let mut part = Part::new(header, 1);
    part.lines(&text.as_bytes()[pos..], sink)?;
    Ok(part.header)
}

/// Below this many bytes a trace is read by one thread: a second costs more to start than it
/// saves.
const SPLIT_BYTES: usize = 256 * 1024;

/// [`parse_into`] on two threads when the text is long and a second CPU is there to take its
/// second half (relaxed replay reads the trace before the program starts, while the other CPUs
/// wait): each half goes into its own sink, made by `make`, in order (the second is `None` if
/// the text was read by one thread). The result, errors included, is `parse_into`'s: the lines
/// of one thread that meet at the split are checked against each other after both halves are
/// read, and where a half fails or they do not fit, the whole text is read again by one thread
/// for the error and its line.
pub fn parse_split<S: Sink + Send>(
    text: &str,
    cpus: usize,
    make: impl Fn() -> S,
) -> Result<(Header, S, Option<S>), (usize, String)> {
    let bytes = text.as_bytes();
    let (header, pos) = parse_header(bytes)?;
    let half = pos + (bytes.len() - pos) / 2;
    let split = match memchr::memchr(b'\n', &bytes[half..]) {
        Some(i) if cpus >= 2 && bytes.len() - pos >= SPLIT_BYTES => half + i + 1,
        _ => bytes.len(),
    };
    parse_halves(text, header, pos, split, make)
}

/// [`parse_split`] with the second half from byte `split` (a line's start, or the text's end:
/// one half).
fn parse_halves<S: Sink + Send>(
    text: &str,
    header: Header,
    pos: usize,
    split: usize,
    make: impl Fn() -> S,
) -> Result<(Header, S, Option<S>), (usize, String)> {
    let bytes = text.as_bytes();
    let (mut s1, mut s2) = (make(), make());
    let mut p1 = Part::new(header.clone(), 1);
    let mut p2 = Part::new(header, 0);
    let (r1, r2) = std::thread::scope(|scope| {
        let second = if split < bytes.len() {
            let (p2, s2) = (&mut p2, &mut s2);
            // A thread the system cannot start leaves the whole text to this one.
            std::thread::Builder::new()
                .name("stackrt-trace".into())
                .spawn_scoped(scope, move || p2.lines(&bytes[split..], s2))
                .ok()
        } else {
            None
        };
        let end = if second.is_some() { split } else { bytes.len() };
        let r1 = p1.lines(&bytes[pos..end], &mut s1);
        let r2 = second.map(|h| h.join().unwrap_or(Err((0, String::new()))));
        (r1, r2)
    });
    r1?;
    let Some(r2) = r2 else {
        return Ok((p1.header, s1, None));
    };
    if r2.is_ok() && p1.meets(&p2) {
        p1.header.ends.extend_from_slice(&p2.header.ends);
        p1.header.program = p1.header.program.or(p2.header.program);
        return Ok((p1.header, s1, Some(s2)));
    }
    drop((s1, s2));
    let mut whole = make();
    let header = parse_into(text, &mut whole)?;
    Ok((header, whole, None))
}

/// The first line of a trace, read, and where the next begins.
fn parse_header(bytes: &[u8]) -> Result<(Header, usize), (usize, String)> {
    let (head, pos) = line_at(bytes);
    let mut t = Header::default();
    let w: Vec<&str> = core::str::from_utf8(head)
        .unwrap_or("")
        .split_whitespace()
        .collect();
    match w.as_slice() {
        [m, v, p] if *m == MAGIC && matches!(*v, "1" | "2" | "3") => {
            t.version = v.parse().unwrap_or(1);
            t.policy = p.to_string();
        }
        [m, ..] if *m == MAGIC => {
            return Err((1, "expected: stackrt-sched-trace 1|2|3 POLICY".into()))
        }
        _ => return Err((1, "not a stackrt schedule trace".into())),
    }
    Ok((t, pos))
}

/// Lines read after the header, in a row: what the checks between them need.
struct Part {
    header: Header,
    /// The number of the line before the first one.
    no: usize,
    /// The last event number of each thread seen so far (0: none), for the ordering check,
    /// and the threads that ended; by thread number (below MAX_THREADS).
    last: Vec<u64>,
    ended: Vec<bool>,
    /// Each thread's first line in this part, for [`Part::meets`]: its event number, or for an
    /// `end` line its count with [`FIRST_END`] set (0: none).
    first: Vec<u64>,
}

/// In [`Part::first`]: the thread's first line is its `end` line.
const FIRST_END: u64 = 1 << 63;

impl Part {
    fn new(header: Header, no: usize) -> Part {
        Part {
            header,
            no,
            last: Vec::new(),
            ended: Vec::new(),
            first: Vec::new(),
        }
    }

    /// Makes room for thread `i` in the tables.
    fn grow(&mut self, i: usize) {
        if self.last.len() <= i {
            self.last.resize(i + 1, 0);
            self.ended.resize(i + 1, false);
            self.first.resize(i + 1, 0);
        }
    }

    /// Whether `next`, the lines right after these, could follow them in one text: its first
    /// line of each thread fits this part's last one, and it names no program if this did.
    fn meets(&self, next: &Part) -> bool {
        if self.header.program.is_some() && next.header.program.is_some() {
            return false;
        }
        next.first.iter().enumerate().all(|(i, &f)| {
            let (last, ended) = (
                self.last.get(i).copied().unwrap_or(0),
                self.ended.get(i).copied().unwrap_or(false),
            );
            f == 0
                || (!ended
                    && if f & FIRST_END != 0 {
                        last <= f & !FIRST_END
                    } else {
                        f > last
                    })
        })
    }

    /// Reads `bytes`, whole lines after the header, into `sink`.
    fn lines(&mut self, bytes: &[u8], sink: &mut impl Sink) -> Result<(), (usize, String)> {
        let mut pairs: Vec<(u32, u64)> = Vec::new();
        let mut pos = 0;
        // A trace holds millions of lines (every decision of a run): lines in the recorder's form
        // are read by a byte cursor that finds their end as it goes; any other line is split into
        // words, which go into this array, not a vector of their own.
        let mut buf: [&str; 24] = [""; 24];
        let mut spill: Vec<&str> = Vec::new();
        let mut no = self.no;
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
            if self.header.version >= 2 && b.first() == Some(&b'e') {
                pairs.clear();
                if let Some((e, len)) = fast_event(b, &mut pairs) {
                    self.check_order(e.thread, e.seq).map_err(err)?;
                    sink.event(e.thread, e.seq, &pairs);
                    pos += len;
                    continue;
                }
            }
            if self.header.version >= 3 && b.first() == Some(&b'f') {
                if let Some(((t, n, k, v), len)) = fast_failed(b) {
                    self.check_order(t, n).map_err(err)?;
                    self.last[t as usize] = n + k - 1;
                    sink.failed(t, n, k, v);
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
            if self.header.version == 1 {
                return Err(err("a version 1 trace has decision lines only".into()));
            }
            match *first {
                "program" => {
                    let nums: Option<Vec<u64>> =
                        words[1..].iter().map(|w| w.parse().ok()).collect();
                    match nums.as_deref() {
                        Some([sites, hash]) if self.header.program.is_none() => {
                            self.header.program = Some((*sites, *hash));
                        }
                        _ => return Err(err("expected one line: program SITES HASH".into())),
                    }
                }
                "event" => {
                    pairs.clear();
                    let e = parse_event(words, &mut pairs).map_err(err)?;
                    self.check_order(e.thread, e.seq).map_err(err)?;
                    sink.event(e.thread, e.seq, &pairs);
                }
                "failed" if self.header.version >= 3 => {
                    let (t, n, k, v) = parse_failed(words).map_err(err)?;
                    self.check_order(t, n).map_err(err)?;
                    self.last[t as usize] = n + k - 1;
                    sink.failed(t, n, k, v);
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
                    self.grow(i);
                    if self.last[i] > n || self.ended[i] {
                        return Err((no, format!("thread {th} cannot end here")));
                    }
                    self.ended[i] = true;
                    if self.first[i] == 0 {
                        self.first[i] = n | FIRST_END;
                    }
                    self.header.ends.push((th, n));
                }
                other => return Err(err(format!("{other:?} starts no known line"))),
            }
        }
        Ok(())
    }

    /// Checks an `event` line of thread `thread` against the thread's earlier lines.
    fn check_order(&mut self, thread: u32, seq: u64) -> Result<(), String> {
        let i = thread as usize;
        self.grow(i);
        if self.last[i] >= seq {
            return Err(format!(
                "event {seq} of thread {thread} after a later or equal one of the same thread"
            ));
        }
        if self.ended[i] {
            return Err(format!("thread {thread} ended above"));
        }
        if self.first[i] == 0 {
            self.first[i] = seq;
        }
        self.last[i] = seq;
        Ok(())
    }
}

/// The header line of a trace recorded under `policy`.
pub fn header(version: u32, policy: &str) -> String {
    format!("{MAGIC} {version} {policy}\n")
}

/// The `event` line of thread `t`'s event `n` after `after`, of kind `kind` (at `site`).
/// A `failed` line: thread `t`'s events `first` to `first + count - 1` were failed swaps that
/// found `value`.
pub fn failed_line(t: u32, first: u64, count: u64, value: i32) -> String {
    format!("failed {t} {first} {count} {value}\n")
}

/// An `event` line.
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
#[path = "trace_tests.rs"]
mod tests;
