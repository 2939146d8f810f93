//! Tests of the trace format's parser (`trace`): the fast paths against the word parser, runs
//! of decisions, two halves against one reading, and the line numbers of malformed lines.

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
        "event 0 5 after 1.3 create",
        "event 0 6 after 2.4 join at m.cm:3:1",
    ];
    // Every kind takes the fast path (its list of kinds is KINDS).
    for k in KINDS {
        let line = format!("event 1 2 after 0.1 {k}");
        assert!(
            fast_event(line.as_bytes(), &mut Vec::new()).is_some(),
            "{k}"
        );
    }
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

/// `fast_failed` accepts only what the general path reads as a `failed` line, with the same
/// numbers and line end.
#[test]
fn the_fast_failed_path_agrees_with_the_word_parser() {
    let seeds = [
        "failed 3 4 2 1",
        "failed 1048575 99999999999 12 -2147483648",
        "failed 0 1 1 2147483647",
    ];
    let mut accepted = 0;
    for line in mutations(&seeds, b" 0129-+fx\t\r\n") {
        for text in [line.clone(), [&line[..], b"\nfailed 1 2 1 0"].concat()] {
            let (first, len) = first_line_words(&text);
            let words: Vec<&str> = first.split_ascii_whitespace().collect();
            let slow = if words.first() == Some(&"failed") {
                parse_failed(&words).ok()
            } else {
                None
            };
            if let Some((f, fast_len)) = fast_failed(&text) {
                accepted += 1;
                assert_eq!(slow, Some(f), "{text:?}");
                assert_eq!(fast_len, len, "{text:?}");
            }
        }
    }
    assert!(accepted > 100, "only {accepted} lines took the fast path");
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

/// An event as a sink is given it: thread, number, the events it comes after.
type Given = (u32, u64, Vec<(u32, u64)>);

/// Everything a sink is given, in order.
#[derive(Default, Debug, PartialEq)]
struct Collect {
    decisions: Vec<i32>,
    events: Vec<Given>,
}

impl Sink for Collect {
    fn decision(&mut self, h: i32) {
        self.decisions.push(h);
    }
    fn event(&mut self, thread: u32, seq: u64, after: &[(u32, u64)]) {
        self.events.push((thread, seq, after.to_vec()));
    }
}

#[test]
fn a_trace_read_in_two_halves_gives_what_one_reading_gives() {
    let lines = [
        "program 3 99",
        "0",
        "event 1 2 after 0.1 read",
        "1",
        "event 2 1 after 1.2 write at a.cm:1:2",
        "end 1 4",
        "event 2 5 after 0.3 cas",
        "event 3 1 after 2.5 lock",
        "end 2 5",
        "2",
    ];
    // The trace, each line dropped, doubled, or swapped with the next, and two that end a
    // thread too early; the header with each version.
    let mut bodies: Vec<Vec<&str>> = vec![lines.to_vec()];
    // Threads that end before their last event.
    for (i, short) in [(5, "end 1 1"), (8, "end 2 4")] {
        let mut v = lines.to_vec();
        v[i] = short;
        bodies.push(v);
    }
    for i in 0..lines.len() {
        let mut v = lines.to_vec();
        v.remove(i);
        bodies.push(v);
        let mut v = lines.to_vec();
        v.insert(i, lines[i]);
        bodies.push(v);
        if i + 1 < lines.len() {
            let mut v = lines.to_vec();
            v.swap(i, i + 1);
            bodies.push(v);
        }
    }
    let (mut texts, mut splits, mut failures) = (0, 0, 0);
    for body in &bodies {
        for head in [
            "stackrt-sched-trace 2 random:1",
            "stackrt-sched-trace 1 random:1",
        ] {
            let text = format!("{head}\n{}\n", body.join("\n"));
            texts += 1;
            let mut one = Collect::default();
            let want = parse_into(&text, &mut one).map(|h| (h, one));
            failures += usize::from(want.is_err());
            let (header, pos) = parse_header(text.as_bytes()).unwrap();
            // Every line's start as the split, and the text's end.
            let starts =
                (pos..=text.len()).filter(|&i| i == text.len() || text.as_bytes()[i - 1] == b'\n');
            for split in starts {
                splits += 1;
                let got = parse_halves(&text, header.clone(), pos, split, Collect::default).map(
                    |(h, mut a, b)| {
                        if let Some(b) = b {
                            a.decisions.extend(b.decisions);
                            a.events.extend(b.events);
                        }
                        (h, a)
                    },
                );
                assert_eq!(got, want, "{text:?} split at {split}");
            }
        }
    }
    assert!(texts > 50 && splits > 500, "{texts} texts, {splits} splits");
    assert!(
        failures > 10 && failures < texts - 10,
        "{failures} of {texts} fail"
    );
}

#[test]
fn malformed_lines_are_named_by_number() {
    let h = "stackrt-sched-trace 2 random:1\n";
    for (body, line) in [
        ("", 1),
        ("x\n", 1),
        ("stackrt-sched-trace 4 random:1\n", 1),
        // `failed` lines came with version 3.
        ("stackrt-sched-trace 2 random:1\n0\nfailed 1 2 3 0\n", 3),
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
        "failed 1 0 2 0",
        "failed 1 2 0 0",
        "failed 1 2 1",
        "failed 1 2 1 x",
        "failed 1 2 1 2147483648",
        "failed 1 2 1 0 0",
        "failed 1 18446744073709551615 2 0",
    ] {
        for h in [h, "stackrt-sched-trace 3 random:1\n"] {
            let text = format!("{h}0\n{bad}\n1\n");
            assert_eq!(parse(&text).map_err(|e| e.0), Err(3), "{text:?}");
        }
    }
    // A `failed` line counts as its thread's events up to its last.
    let h3 = "stackrt-sched-trace 3 random:1\n";
    for (body, ok) in [
        ("failed 1 2 3 0\nevent 1 5 after 0.1 read\nend 1 5\n", true),
        ("failed 1 2 3 -7\nfailed 1 5 1 7\nend 1 5\n", true),
        ("failed 1 2 3 0\nevent 1 4 after 0.1 read\n", false),
        ("event 1 4 after 0.1 read\nfailed 1 4 1 0\n", false),
        ("failed 1 2 3 0\nend 1 3\n", false),
        ("end 1 3\nfailed 1 2 1 0\n", false),
    ] {
        let got = parse(&format!("{h3}{body}"));
        assert_eq!(got.is_ok(), ok, "{body:?}: {got:?}");
        if !ok {
            assert_eq!(got.map_err(|e| e.0), Err(3), "{body:?}");
        }
    }
    let t = parse(&format!(
        "{h3}failed 2 1 4 -1\n0\nfailed 1 8 1 2147483647\n"
    ))
    .unwrap();
    assert_eq!(t.failed, [(2, 1, 4, -1), (1, 8, 1, 2_147_483_647)]);
    let twice = format!("{h}event 1 5 after 0.1 read\nevent 1 5 after 0.2 read\n");
    assert_eq!(parse(&twice).map_err(|e| e.0), Err(3));
    let after_end = format!("{h}end 1 5\nevent 1 6 after 0.2 read\n");
    assert_eq!(parse(&after_end).map_err(|e| e.0), Err(3));
    let early_end = format!("{h}event 1 6 after 0.2 read\nend 1 5\n");
    assert_eq!(parse(&early_end).map_err(|e| e.0), Err(3));
    let two_programs = format!("{h}program 1 2\nprogram 1 2\n");
    assert_eq!(parse(&two_programs).map_err(|e| e.0), Err(3));
}
