//! C-- front end: source text to a typed program, reporting every error it can and never panicking.
//!
//! Pipeline: [`lexer`] (logos, never fails: bad input becomes error tokens) → [`parser`]
//! (handwritten recursive descent, AST with spans) → [`sema`] (name resolution, typing,
//! implicit conversions made explicit) → [`typed::Program`], the contract with `cmm-codegen`.

pub mod diag;
pub mod target;
pub mod typed;
pub mod types;

pub use diag::{Diagnostic, Span};
pub use target::TargetInfo;
