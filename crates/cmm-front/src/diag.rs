//! Source spans and gcc-style diagnostics (`file:line:col: error: message` plus a snippet).

use std::fmt::Write as _;

/// A half-open byte range `[start, end)` into the source text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Span {
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn new(start: usize, end: usize) -> Span {
        Span {
            start: start as u32,
            end: end as u32,
        }
    }
    /// The smallest span covering both.
    pub fn to(self, other: Span) -> Span {
        Span {
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    Error,
    Warning,
    Note,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Diagnostic {
    pub severity: Severity,
    pub span: Span,
    pub message: String,
    /// Secondary messages, each printed as `file:line:col: note: ...`.
    pub notes: Vec<(Span, String)>,
}

impl Diagnostic {
    pub fn error(span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Error,
            span,
            message: message.into(),
            notes: Vec::new(),
        }
    }
    pub fn with_note(mut self, span: Span, note: impl Into<String>) -> Diagnostic {
        self.notes.push((span, note.into()));
        self
    }
}

/// Maps byte offsets to 1-based line and column numbers (columns count bytes, as gcc does).
pub struct LineIndex {
    line_starts: Vec<usize>,
}

impl LineIndex {
    pub fn new(src: &str) -> LineIndex {
        let mut line_starts = vec![0];
        line_starts.extend(
            src.bytes()
                .enumerate()
                .filter(|&(_, b)| b == b'\n')
                .map(|(i, _)| i + 1),
        );
        LineIndex { line_starts }
    }
    /// 1-based (line, column) of a byte offset; offsets past the end map to the last position.
    pub fn line_col(&self, offset: u32) -> (usize, usize) {
        let offset = offset as usize;
        let line = match self.line_starts.binary_search(&offset) {
            Ok(i) => i,
            Err(i) => i - 1,
        };
        (line + 1, offset - self.line_starts[line] + 1)
    }
    pub fn line_text<'a>(&self, src: &'a str, line: usize) -> &'a str {
        let start = self.line_starts[line - 1].min(src.len());
        let end = self
            .line_starts
            .get(line)
            .map_or(src.len(), |&e| e.saturating_sub(1))
            .max(start);
        src.get(start..end).unwrap_or("").trim_end_matches('\r')
    }
}

/// Renders diagnostics the way gcc does, with a snippet and a caret line under the span.
pub fn render(file: &str, src: &str, diags: &[Diagnostic]) -> String {
    let index = LineIndex::new(src);
    let mut out = String::new();
    for d in diags {
        let label = match d.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Note => "note",
        };
        render_one(&mut out, file, src, &index, d.span, label, &d.message);
        for (span, note) in &d.notes {
            render_one(&mut out, file, src, &index, *span, "note", note);
        }
    }
    out
}

fn render_one(
    out: &mut String,
    file: &str,
    src: &str,
    index: &LineIndex,
    span: Span,
    label: &str,
    msg: &str,
) {
    let (line, col) = index.line_col(span.start);
    let _ = writeln!(out, "{file}:{line}:{col}: {label}: {msg}");
    let text = index.line_text(src, line);
    let _ = writeln!(out, "{line:5} | {text}");
    let (end_line, end_col) = index.line_col(span.end.max(span.start + 1) - 1);
    let width = if end_line == line {
        (end_col + 1).saturating_sub(col).max(1)
    } else {
        1
    };
    let pad: String = text
        .chars()
        .take(col - 1)
        .map(|c| if c == '\t' { '\t' } else { ' ' })
        .collect();
    let _ = writeln!(
        out,
        "      | {pad}^{}",
        "~".repeat(width.saturating_sub(1).min(200))
    );
}
