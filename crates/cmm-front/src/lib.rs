//! C-- front end: source text to a typed program, reporting every error it can and never panicking.
//!
//! Pipeline: [`lexer`] (logos, never fails: bad input becomes error tokens) → [`parser`]
//! (handwritten recursive descent, AST with spans) → [`sema`] (name resolution, typing,
//! implicit conversions made explicit) → [`typed::Program`], the contract with `cmm-codegen`.
//!
//! Entry points: [`parse`] (syntax only), [`check`] (the whole front end) and
//! [`check_rendered`] (the same, with errors rendered gcc-style).

pub mod ast;
pub mod diag;
pub mod lexer;
pub mod parser;
pub mod sema;
pub mod target;
pub mod typed;
pub mod types;

pub use diag::{Diagnostic, Span};
pub use target::TargetInfo;

/// Parses `src`; on failure returns every lexical and syntax error, sorted by position.
pub fn parse(src: &str) -> Result<ast::TranslationUnit, Vec<Diagnostic>> {
    let (unit, diags) = parser::parse(src);
    if diags.is_empty() {
        Ok(unit)
    } else {
        Err(diags)
    }
}

/// Runs the whole front end on one C-- source file for `target`.
///
/// On failure returns every diagnostic, sorted by position: all lexical and syntax errors if
/// there are any (semantic analysis then does not run), otherwise all semantic errors.
/// `file_name` is not read; it names the file for [`check_rendered`]-style callers and keeps
/// the signature stable should diagnostics ever carry it.
pub fn check(
    file_name: &str,
    src: &str,
    target: TargetInfo,
) -> Result<typed::Program, Vec<Diagnostic>> {
    let _ = file_name;
    let unit = parse(src)?;
    sema::check(&unit, target)
}

/// [`check`], with the errors rendered as gcc-style text (`file:line:col: error: ...`).
pub fn check_rendered(
    file_name: &str,
    src: &str,
    target: TargetInfo,
) -> Result<typed::Program, String> {
    check(file_name, src, target).map_err(|d| diag::render(file_name, src, &d))
}
