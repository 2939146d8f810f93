//! The C-- lexer: a `logos` tokenizer that never fails (bad input becomes error tokens).
//!
//! Like `rustc_lexer`, lexing only classifies: unknown bytes, unterminated strings, character
//! literals and comments become [`TokenKind::Error`] tokens with a span, and the parser reports
//! them. Literal *values* are decoded by [`int_value`], [`double_value`] and [`unescape`], which
//! return errors the parser turns into diagnostics. The lexer knows every C operator and keyword,
//! including those C-- omits, so the parser can name the omitted feature in its error.

use crate::diag::Span;
use logos::{FilterResult, Logos};

/// Why a stretch of input is not a token.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LexError {
    /// A character that starts no token.
    #[default]
    UnknownChar,
    UnterminatedString,
    UnterminatedChar,
    UnterminatedComment,
}

impl LexError {
    pub fn message(self, text: &str) -> String {
        match self {
            LexError::UnknownChar if text.bytes().all(|b| b.is_ascii_graphic()) => {
                format!("stray `{text}` in program")
            }
            LexError::UnknownChar => format!("stray {text:?} in program"),
            LexError::UnterminatedString => "missing terminating `\"` character".to_string(),
            LexError::UnterminatedChar => "missing terminating `'` character".to_string(),
            LexError::UnterminatedComment => "unterminated comment".to_string(),
        }
    }
}

#[derive(Logos, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[logos(error = LexError)]
#[logos(skip r"[ \t\r\n\f\x0B]+")]
#[logos(skip(r"//[^\n]*", allow_greedy = true))]
pub enum TokenKind {
    // Keywords of C--.
    #[token("int")]
    Int,
    #[token("char")]
    Char,
    #[token("double")]
    Double,
    #[token("void")]
    Void,
    #[token("struct")]
    Struct,
    #[token("extern")]
    Extern,
    #[token("if")]
    If,
    #[token("else")]
    Else,
    #[token("while")]
    While,
    #[token("do")]
    Do,
    #[token("for")]
    For,
    #[token("break")]
    Break,
    #[token("continue")]
    Continue,
    #[token("return")]
    Return,
    #[token("sizeof")]
    Sizeof,
    #[token("stacksizeof")]
    StackSizeof,
    #[token("NULL")]
    Null,

    /// A C keyword that is not part of C-- (the parser names it in its error).
    #[token("auto")]
    #[token("const")]
    #[token("enum")]
    #[token("goto")]
    #[token("long")]
    #[token("register")]
    #[token("signed")]
    #[token("static")]
    #[token("switch")]
    #[token("case")]
    #[token("default")]
    #[token("typedef")]
    #[token("union")]
    #[token("unsigned")]
    #[token("volatile")]
    #[token("short")]
    #[token("float")]
    #[token("inline")]
    #[token("restrict")]
    OmittedKeyword,

    #[regex(r"[A-Za-z_][A-Za-z0-9_]*")]
    Ident,
    /// Integer literal, possibly malformed (`09`, `0x`, `12abc`): checked by [`int_value`].
    #[regex(r"[0-9][0-9A-Za-z_]*")]
    IntLit,
    #[regex(r"[0-9]+\.[0-9]*([eE][+-]?[0-9]+)?", priority = 10)]
    #[regex(r"\.[0-9]+([eE][+-]?[0-9]+)?", priority = 10)]
    #[regex(r"[0-9]+[eE][+-]?[0-9]+", priority = 10)]
    DoubleLit,
    #[token("'", char_literal)]
    CharLit,
    #[token("\"", string_literal)]
    StrLit,
    /// `L"..."` / `L'...'`: wide literals are not part of C--.
    #[token("L\"", string_literal)]
    #[token("L'", char_literal)]
    WideLit,
    /// A preprocessor line (`#include ...`): C-- has no preprocessor.
    #[regex(r"#[^\n]*", allow_greedy = true)]
    Directive,

    #[token("/*", block_comment)]
    BlockComment,

    // Punctuation.
    #[token("(")]
    LParen,
    #[token(")")]
    RParen,
    #[token("{")]
    LBrace,
    #[token("}")]
    RBrace,
    #[token("[")]
    LBracket,
    #[token("]")]
    RBracket,
    #[token(";")]
    Semi,
    #[token(",")]
    Comma,
    #[token(".")]
    Dot,
    #[token("->")]
    Arrow,
    #[token("...")]
    Ellipsis,

    // Operators of C--.
    #[token("=")]
    Assign,
    #[token("+")]
    Plus,
    #[token("-")]
    Minus,
    #[token("*")]
    Star,
    #[token("/")]
    Slash,
    #[token("%")]
    Percent,
    #[token("&")]
    Amp,
    #[token("|")]
    Pipe,
    #[token("^")]
    Caret,
    #[token("~")]
    Tilde,
    #[token("!")]
    Bang,
    #[token("<<")]
    Shl,
    #[token(">>")]
    Shr,
    #[token("&&")]
    AndAnd,
    #[token("||")]
    OrOr,
    #[token("==")]
    EqEq,
    #[token("!=")]
    NotEq,
    #[token("<")]
    Lt,
    #[token("<=")]
    Le,
    #[token(">")]
    Gt,
    #[token(">=")]
    Ge,

    // C operators that C-- omits.
    #[token("++")]
    PlusPlus,
    #[token("--")]
    MinusMinus,
    #[token("+=")]
    #[token("-=")]
    #[token("*=")]
    #[token("/=")]
    #[token("%=")]
    #[token("&=")]
    #[token("|=")]
    #[token("^=")]
    #[token("<<=")]
    #[token(">>=")]
    CompoundAssign,
    #[token("?")]
    Question,
    #[token(":")]
    Colon,

    /// Input that is not a token; see [`Token::error`].
    Error,
    /// End of input (always the last token).
    Eof,
}

fn block_comment(lex: &mut logos::Lexer<TokenKind>) -> FilterResult<(), LexError> {
    match lex.remainder().find("*/") {
        Some(i) => {
            lex.bump(i + 2);
            FilterResult::Skip
        }
        None => {
            lex.bump(lex.remainder().len());
            FilterResult::Error(LexError::UnterminatedComment)
        }
    }
}

/// Scans a quoted literal body up to `quote`; stops with an error at a newline or the end.
fn quoted(lex: &mut logos::Lexer<TokenKind>, quote: u8, err: LexError) -> Result<(), LexError> {
    let rest = lex.remainder().as_bytes();
    let mut i = 0;
    while i < rest.len() {
        match rest[i] {
            b'\\' if i + 1 < rest.len() && rest[i + 1] != b'\n' => i += 2,
            b'\n' => break,
            c if c == quote => {
                lex.bump(i + 1);
                return Ok(());
            }
            _ => i += 1,
        }
    }
    // Keep the span on char boundaries (a backslash may precede a multi-byte char).
    let mut end = i.min(rest.len());
    while !lex.remainder().is_char_boundary(end) {
        end += 1;
    }
    lex.bump(end);
    Err(err)
}

fn string_literal(lex: &mut logos::Lexer<TokenKind>) -> Result<(), LexError> {
    quoted(lex, b'"', LexError::UnterminatedString)
}

fn char_literal(lex: &mut logos::Lexer<TokenKind>) -> Result<(), LexError> {
    quoted(lex, b'\'', LexError::UnterminatedChar)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Token {
    pub kind: TokenKind,
    pub span: Span,
    /// For [`TokenKind::Error`]: what is wrong.
    pub error: Option<LexError>,
}

impl Token {
    pub fn text(self, src: &str) -> &str {
        src.get(self.span.start as usize..self.span.end as usize)
            .unwrap_or("")
    }
}

/// Splits `src` into tokens, ending with one [`TokenKind::Eof`]. Never fails.
pub fn lex(src: &str) -> Vec<Token> {
    let mut out = Vec::new();
    let mut lexer = TokenKind::lexer(src);
    while let Some(res) = lexer.next() {
        let span = Span::new(lexer.span().start, lexer.span().end);
        match res {
            Ok(kind) => out.push(Token {
                kind,
                span,
                error: None,
            }),
            Err(e) => {
                // Merge runs of unknown characters into one error token.
                if let Some(last) = out.last_mut() {
                    if e == LexError::UnknownChar
                        && last.error == Some(LexError::UnknownChar)
                        && last.span.end == span.start
                    {
                        last.span.end = span.end;
                        continue;
                    }
                }
                out.push(Token {
                    kind: TokenKind::Error,
                    span,
                    error: Some(e),
                })
            }
        }
    }
    let end = src.len();
    out.push(Token {
        kind: TokenKind::Eof,
        span: Span::new(end, end),
        error: None,
    });
    out
}

/// The value of an integer literal: decimal literals must fit `int` (up to 2147483647), hex and
/// octal literals 32 bits (their bit pattern is taken, so `0xFFFFFFFF` is -1).
pub fn int_value(text: &str) -> Result<i32, String> {
    let (digits, radix) = if let Some(h) = text.strip_prefix("0x").or(text.strip_prefix("0X")) {
        (h, 16)
    } else if text.len() > 1 && text.starts_with('0') {
        (&text[1..], 8)
    } else {
        (text, 10)
    };
    if digits.is_empty() {
        return Err(format!("invalid integer literal `{text}`: no digits"));
    }
    if let Some(bad) = digits.chars().find(|c| !c.is_digit(radix)) {
        if radix == 10 || radix == 16 || !bad.is_ascii_digit() {
            let first_non_digit =
                text.find(|c: char| !c.is_ascii_hexdigit() || (radix != 16 && c.is_alphabetic()));
            let suffix = &text[first_non_digit
                .unwrap_or(0)
                .max(if radix == 16 { 2 } else { 0 })..];
            if suffix.chars().all(|c| matches!(c, 'u' | 'U' | 'l' | 'L')) && !suffix.is_empty() {
                return Err(format!(
                    "integer suffix `{suffix}` is not part of C-- (there are no `unsigned` or \
                     `long` types)"
                ));
            }
            return Err(format!("invalid integer literal `{text}`"));
        }
        return Err(format!("invalid digit `{bad}` in octal literal `{text}`"));
    }
    let mut value: u64 = 0;
    for c in digits.chars() {
        value = value * radix as u64 + c.to_digit(radix).unwrap_or(0) as u64;
        if value > u32::MAX as u64 {
            break;
        }
    }
    let limit = if radix == 10 {
        i32::MAX as u64
    } else {
        u32::MAX as u64
    };
    if value > limit {
        return Err(format!(
            "integer literal `{text}` does not fit in 32-bit `int`"
        ));
    }
    Ok(value as u32 as i32)
}

/// The value of a floating literal.
pub fn double_value(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(format!(
            "floating literal `{text}` is out of range for `double`"
        )),
    }
}

/// An error found while decoding the escapes of a literal, at a byte range of the literal text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EscapeError {
    pub start: usize,
    pub end: usize,
    pub message: String,
}

/// Decodes the body of a string or character literal (without the quotes). Supported escapes:
/// `\n \t \r \0 \\ \' \" \a \b \f \v \?`, `\xHH` (one or two hex digits) and octal `\ooo`.
pub fn unescape(body: &str) -> (Vec<u8>, Vec<EscapeError>) {
    let b = body.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut errs = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            out.push(b[i]);
            i += 1;
            continue;
        }
        let start = i;
        i += 1;
        let Some(&c) = b.get(i) else {
            errs.push(EscapeError {
                start,
                end: i,
                message: "incomplete escape sequence".into(),
            });
            break;
        };
        i += 1;
        match c {
            b'n' => out.push(b'\n'),
            b't' => out.push(b'\t'),
            b'r' => out.push(b'\r'),
            b'a' => out.push(7),
            b'b' => out.push(8),
            b'f' => out.push(12),
            b'v' => out.push(11),
            b'\\' | b'\'' | b'"' | b'?' => out.push(c),
            b'0'..=b'7' => {
                let mut v = (c - b'0') as u32;
                let mut n = 1;
                while n < 3 && i < b.len() && (b'0'..=b'7').contains(&b[i]) {
                    v = v * 8 + (b[i] - b'0') as u32;
                    i += 1;
                    n += 1;
                }
                if v > 255 {
                    errs.push(EscapeError {
                        start,
                        end: i,
                        message: "octal escape sequence out of range".into(),
                    });
                }
                out.push(v as u8);
            }
            b'x' => {
                let mut v = 0u32;
                let mut n = 0;
                while i < b.len() && b[i].is_ascii_hexdigit() {
                    v = v * 16 + (b[i] as char).to_digit(16).unwrap_or(0);
                    i += 1;
                    n += 1;
                    if v > 255 {
                        break;
                    }
                }
                if n == 0 {
                    errs.push(EscapeError {
                        start,
                        end: i,
                        message: "`\\x` used with no following hex digits".into(),
                    });
                } else if v > 255 {
                    while i < b.len() && b[i].is_ascii_hexdigit() {
                        i += 1;
                    }
                    errs.push(EscapeError {
                        start,
                        end: i,
                        message: "hex escape sequence out of range".into(),
                    });
                }
                out.push(v as u8);
            }
            _ => {
                // Include a whole UTF-8 character in the span.
                let mut end = i;
                while end < b.len() && !body.is_char_boundary(end) {
                    end += 1;
                }
                let seq = &body[start..end];
                errs.push(EscapeError {
                    start,
                    end,
                    message: format!("unknown escape sequence `{seq}`"),
                });
                // Like gcc, the character stands for itself (so `'\z'` is still one char).
                out.extend_from_slice(&b[start + 1..end]);
                i = end;
            }
        }
    }
    (out, errs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(src: &str) -> Vec<TokenKind> {
        lex(src).into_iter().map(|t| t.kind).collect()
    }

    #[test]
    fn keywords_identifiers_and_operators() {
        use TokenKind::*;
        assert_eq!(
            kinds("int intx struct_ s->a ... <<= >>= ? : ++ -- += stacksizeof NULL"),
            vec![
                Int,
                Ident,
                Ident,
                Ident,
                Arrow,
                Ident,
                Ellipsis,
                CompoundAssign,
                CompoundAssign,
                Question,
                Colon,
                PlusPlus,
                MinusMinus,
                CompoundAssign,
                StackSizeof,
                Null,
                Eof
            ]
        );
        assert_eq!(
            kinds("switch unsigned"),
            vec![OmittedKeyword, OmittedKeyword, Eof]
        );
        assert_eq!(kinds("a<=b>=c==d!=e&&f||g"), {
            vec![
                Ident, Le, Ident, Ge, Ident, EqEq, Ident, NotEq, Ident, AndAnd, Ident, OrOr, Ident,
                Eof,
            ]
        });
    }

    #[test]
    fn numbers() {
        use TokenKind::*;
        assert_eq!(
            kinds("1 0x1F 017 1.5 1e3 .5 1. 1.5e-3 09"),
            vec![
                IntLit, IntLit, IntLit, DoubleLit, DoubleLit, DoubleLit, DoubleLit, DoubleLit,
                IntLit, Eof
            ]
        );
        assert_eq!(int_value("2147483647"), Ok(i32::MAX));
        assert!(int_value("2147483648").is_err());
        assert_eq!(int_value("0x1F"), Ok(31));
        assert_eq!(int_value("017"), Ok(15));
        assert_eq!(int_value("0"), Ok(0));
        assert_eq!(int_value("0xFFFFFFFF"), Ok(-1));
        assert!(int_value("0x100000000").is_err());
        assert!(int_value("09").unwrap_err().contains("octal"));
        assert!(int_value("0x").is_err());
        assert!(int_value("10L").unwrap_err().contains("suffix"));
        assert!(int_value("99999999999999999999999").is_err());
        assert_eq!(double_value(".5"), Ok(0.5));
        assert_eq!(double_value("1."), Ok(1.0));
        assert_eq!(double_value("1e3"), Ok(1000.0));
        assert!(double_value("1e999").is_err());
    }

    #[test]
    fn comments_and_strings() {
        use TokenKind::*;
        assert_eq!(
            kinds("a /* x \n y */ b // c\n d"),
            vec![Ident, Ident, Ident, Eof]
        );
        assert_eq!(
            kinds(r#""a\"b" 'c' '\''"#),
            vec![StrLit, CharLit, CharLit, Eof]
        );
        let t = lex("x /* never closed");
        assert_eq!(t[1].kind, Error);
        assert_eq!(t[1].error, Some(LexError::UnterminatedComment));
        assert_eq!(t[1].span, Span::new(2, 17));
        let t = lex("\"abc\nint");
        assert_eq!(t[0].error, Some(LexError::UnterminatedString));
        assert_eq!(t[0].span, Span::new(0, 4));
        assert_eq!(t[1].kind, Int);
        let t = lex("'a");
        assert_eq!(t[0].error, Some(LexError::UnterminatedChar));
    }

    #[test]
    fn unknown_characters_become_one_error_token() {
        let t = lex("a @@ b é");
        assert_eq!(t[1].kind, TokenKind::Error);
        assert_eq!(t[1].span, Span::new(2, 4));
        assert_eq!(t[3].kind, TokenKind::Error);
        assert_eq!(t[3].span, Span::new(7, 9));
        assert_eq!(t.last().map(|t| t.kind), Some(TokenKind::Eof));
    }

    #[test]
    fn escapes() {
        let (v, e) = unescape(r"a\n\t\r\0\\\'\x41\101\a\b\f\v\x7");
        assert!(e.is_empty());
        assert_eq!(v, b"a\n\t\r\0\\'AA\x07\x08\x0c\x0b\x07");
        let (_, e) = unescape(r"\q");
        assert_eq!(e.len(), 1);
        assert!(e[0].message.contains("\\q"));
        let (_, e) = unescape(r"\x");
        assert_eq!(e.len(), 1);
        let (_, e) = unescape(r"\777");
        assert_eq!(e.len(), 1);
        let (_, e) = unescape(r"\x123");
        assert_eq!(e.len(), 1);
    }

    #[test]
    fn never_fails_on_odd_input() {
        for src in [
            "\"", "'", "/*", "\\", "\"\\", "'\\", "\"\\é", "0x", "#", "\u{0}", "L\"x\"",
        ] {
            let toks = lex(src);
            assert_eq!(toks.last().map(|t| t.kind), Some(TokenKind::Eof));
            for t in &toks {
                assert!(src.is_char_boundary(t.span.start as usize));
                assert!(src.is_char_boundary(t.span.end as usize));
            }
        }
    }
}
