//! C-- front end: source text to a typed program, reporting every error it can and never panicking.
//!
//! Pipeline: [`lexer`] (logos, never fails: bad input becomes error tokens) → [`parser`]
//! (handwritten recursive descent, AST with spans) → [`sema`] (name resolution, typing,
//! implicit conversions made explicit) → [`typed::Program`], the contract with `cmm-codegen`.
//!
//! Entry points: [`parse`] (syntax only) and [`check`] (the whole front end).

pub mod ast;
pub mod diag;
pub mod lexer;
pub mod parser;
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
