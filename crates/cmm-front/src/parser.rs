//! Handwritten recursive-descent parser for C-- with C precedence and error recovery.
//!
//! The parser reports every error of a file: after an error it synchronises at `;`, at the end
//! of a `{}` block, or at the next top-level declaration. Omitted C features (`++`, `+=`, `?:`,
//! `switch`, `typedef`, initializers, ...) are parsed far enough to name them in the error and
//! to continue. Recursion is bounded ([`MAX_DEPTH`] nested statements/unary expressions and
//! [`MAX_HEIGHT`] expression tree height): deeper input ends with one "nesting too deep" error
//! instead of a stack overflow, so later passes can recurse over the tree safely.

use crate::ast::*;
use crate::diag::{Diagnostic, Span};
use crate::lexer::{self, LexError, Token, TokenKind as T};

/// Maximum nesting of statements, parentheses (each counts twice) and prefix operators.
pub const MAX_DEPTH: u32 = 256;
/// Maximum height of an expression tree (bounds long operator chains such as `a+a+...+a`).
pub const MAX_HEIGHT: u32 = 256;
/// Maximum number of `*` in one declarator and of array dimensions.
pub const MAX_DECLARATOR_PARTS: u32 = 32;

/// The error has been reported; the caller must synchronise.
#[derive(Debug)]
struct Fail;
type PResult<T> = Result<T, Fail>;

/// Parses a whole file. Returns the syntax tree and every lexical and syntax error found (sorted
/// by position); the tree is only meaningful for semantic analysis when there are no errors.
pub fn parse(src: &str) -> (TranslationUnit, Vec<Diagnostic>) {
    let mut p = Parser::new(src);
    let unit = p.translation_unit();
    let mut diags = p.diags;
    diags.sort_by_key(|d| d.span.start);
    (unit, diags)
}

struct Parser<'a> {
    src: &'a str,
    toks: Vec<Token>,
    pos: usize,
    diags: Vec<Diagnostic>,
    depth: u32,
    /// Set after a fatal error (nesting too deep): everything else is skipped silently.
    aborted: bool,
}

fn omitted_keyword_message(kw: &str) -> String {
    match kw {
        "switch" => "`switch` statements are not part of C--".into(),
        "case" | "default" => format!("`{kw}` labels are not part of C-- (there is no `switch`)"),
        "goto" => "`goto` is not part of C--".into(),
        "typedef" => "`typedef` is not part of C--".into(),
        "enum" => "`enum` types are not part of C--".into(),
        "union" => "`union` types are not part of C--".into(),
        "auto" | "register" | "static" => format!("storage class `{kw}` is not part of C--"),
        "const" | "volatile" | "restrict" => format!("type qualifier `{kw}` is not part of C--"),
        "unsigned" | "signed" => format!("`{kw}` types are not part of C--"),
        "long" | "short" => format!("`{kw}` types are not part of C-- (use `int`)"),
        "float" => "`float` is not part of C-- (use `double`)".into(),
        _ => format!("`{kw}` is not part of C--"),
    }
}

impl<'a> Parser<'a> {
    fn new(src: &'a str) -> Parser<'a> {
        let mut diags = Vec::new();
        let mut toks = Vec::new();
        for mut t in lexer::lex(src) {
            match t.error {
                None => toks.push(t),
                Some(e) => {
                    diags.push(Diagnostic::error(t.span, e.message(t.text(src))));
                    // Unterminated literals still stand for a literal, so parsing continues
                    // sensibly; unknown characters and comments are dropped.
                    match e {
                        LexError::UnterminatedString => {
                            t.kind = T::StrLit;
                            toks.push(t)
                        }
                        LexError::UnterminatedChar => {
                            t.kind = T::CharLit;
                            toks.push(t)
                        }
                        LexError::UnknownChar | LexError::UnterminatedComment => {}
                    }
                }
            }
        }
        Parser {
            src,
            toks,
            pos: 0,
            diags,
            depth: 0,
            aborted: false,
        }
    }

    // ----- token helpers -----

    fn tok(&self) -> Token {
        self.toks[self.pos.min(self.toks.len() - 1)]
    }
    fn kind(&self) -> T {
        self.tok().kind
    }
    fn peek_kind(&self, n: usize) -> T {
        self.toks[(self.pos + n).min(self.toks.len() - 1)].kind
    }
    fn at(&self, k: T) -> bool {
        self.kind() == k
    }
    fn text(&self, t: Token) -> &'a str {
        t.text(self.src)
    }
    fn bump(&mut self) -> Token {
        let t = self.tok();
        if self.pos < self.toks.len() - 1 {
            self.pos += 1;
        }
        t
    }
    fn eat(&mut self, k: T) -> bool {
        if self.at(k) {
            self.bump();
            true
        } else {
            false
        }
    }
    fn prev_span(&self) -> Span {
        if self.pos == 0 {
            return Span::new(0, 0);
        }
        self.toks[self.pos - 1].span
    }
    fn describe(&self, t: Token) -> String {
        match t.kind {
            T::Eof => "end of file".into(),
            T::StrLit => "string literal".into(),
            _ => format!("`{}`", self.text(t)),
        }
    }

    fn error(&mut self, span: Span, msg: impl Into<String>) {
        if !self.aborted {
            self.diags.push(Diagnostic::error(span, msg));
        }
    }
    fn fail<X>(&mut self, span: Span, msg: impl Into<String>) -> PResult<X> {
        self.error(span, msg);
        Err(Fail)
    }
    fn expected<X>(&mut self, what: &str) -> PResult<X> {
        let t = self.tok();
        let msg = format!("expected {what}, found {}", self.describe(t));
        self.fail(t.span, msg)
    }
    fn expect(&mut self, k: T, what: &str) -> PResult<Token> {
        if self.at(k) {
            Ok(self.bump())
        } else {
            self.expected(what)
        }
    }
    /// `;` is reported just after the previous token, where it is missing.
    fn expect_semi(&mut self, after: &str) -> PResult<()> {
        if self.eat(T::Semi) {
            return Ok(());
        }
        let end = self.prev_span().end as usize;
        let msg = format!(
            "expected `;` after {after}, found {}",
            self.describe(self.tok())
        );
        self.fail(Span::new(end, end), msg)
    }
    fn ident(&mut self, what: &str) -> PResult<Ident> {
        let t = self.expect(T::Ident, what)?;
        Ok(Ident {
            name: self.text(t).to_string(),
            span: t.span,
        })
    }

    /// Stops everything after input nested too deeply (the only fatal error).
    fn too_deep<X>(&mut self, span: Span) -> PResult<X> {
        self.error(
            span,
            format!(
                "nesting too deep: C-- allows at most {MAX_DEPTH} nested statements or \
                 operators and expressions of height {MAX_HEIGHT}"
            ),
        );
        self.aborted = true;
        self.pos = self.toks.len() - 1;
        Err(Fail)
    }
    fn enter(&mut self) -> PResult<()> {
        if self.aborted {
            return Err(Fail);
        }
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            let span = self.tok().span;
            return self.too_deep(span);
        }
        Ok(())
    }
    fn leave(&mut self) {
        self.depth -= 1;
    }
    fn mk(&mut self, kind: ExprKind, span: Span) -> PResult<Expr> {
        let e = Expr::new(kind, span);
        if e.height > MAX_HEIGHT {
            return self.too_deep(span);
        }
        Ok(e)
    }

    /// Skips to the end of the current statement or declaration: past a `;` or a complete `{}`
    /// block, or up to (not past) a `}` closing the enclosing block. Always makes progress
    /// unless at `}` or the end.
    fn sync(&mut self) {
        let mut braces = 0u32;
        loop {
            match self.kind() {
                T::Eof => return,
                T::Semi if braces == 0 => {
                    self.bump();
                    return;
                }
                T::LBrace => braces += 1,
                T::RBrace => {
                    if braces == 0 {
                        return;
                    }
                    braces -= 1;
                    if braces == 0 {
                        self.bump();
                        self.eat(T::Semi);
                        return;
                    }
                }
                _ => {}
            }
            self.bump();
        }
    }

    /// Skips a balanced `{...}` starting at the current `{`.
    fn skip_braces(&mut self) {
        let mut braces = 0u32;
        loop {
            match self.kind() {
                T::Eof => return,
                T::LBrace => braces += 1,
                T::RBrace => {
                    braces = braces.saturating_sub(1);
                    if braces == 0 {
                        self.bump();
                        return;
                    }
                }
                _ => {}
            }
            self.bump();
        }
    }

    // ----- top level -----

    fn translation_unit(&mut self) -> TranslationUnit {
        let mut items = Vec::new();
        while !self.at(T::Eof) {
            let start = self.pos;
            if self.item(&mut items).is_err() {
                self.sync();
                if self.at(T::RBrace) {
                    self.bump();
                }
            }
            if self.pos == start && !self.at(T::Eof) {
                self.bump();
            }
        }
        TranslationUnit { items }
    }

    fn item(&mut self, items: &mut Vec<Item>) -> PResult<()> {
        let t = self.tok();
        match t.kind {
            T::Semi => {
                self.bump();
                Ok(())
            }
            T::Directive => {
                self.bump();
                self.error(
                    t.span,
                    "preprocessor directives are not part of C-- (it has no preprocessor)",
                );
                Ok(())
            }
            T::RBrace => {
                self.bump();
                self.error(t.span, "unexpected `}` at top level");
                Ok(())
            }
            T::Extern => {
                self.bump();
                let base = self.base_type()?;
                let (name, ty) = self.declarator(base)?;
                if self.at(T::LParen) {
                    let sig = self.func_sig(name, ty)?;
                    self.expect_semi("extern declaration")?;
                    items.push(Item::FuncDecl {
                        sig,
                        is_extern: true,
                    });
                    Ok(())
                } else {
                    self.fail(
                        name.span,
                        "extern variables are not supported by C--; only functions can be \
                         declared `extern`",
                    )
                }
            }
            T::Struct if self.peek_kind(1) == T::LBrace => {
                let span = self.tok().span;
                self.bump();
                self.skip_braces();
                self.fail(
                    span,
                    "anonymous structs are not supported by C--; give the struct a name",
                )
            }
            T::Struct if self.peek_kind(2) == T::LBrace => {
                let def = self.struct_def()?;
                let span = def.span;
                let base = (BaseType::Struct(def.name.clone()), def.name.span);
                items.push(Item::Struct(def));
                if self.eat(T::Semi) {
                    return Ok(());
                }
                if self.at(T::Ident) || self.at(T::Star) {
                    let (name, ty) = self.declarator(base.clone())?;
                    return self.global_rest(items, base, name, ty, span);
                }
                // Report, then carry on as if the `;` were there.
                let end = self.prev_span().end as usize;
                let msg = format!(
                    "expected `;` after struct definition, found {}",
                    self.describe(self.tok())
                );
                self.error(Span::new(end, end), msg);
                Ok(())
            }
            T::Struct if self.peek_kind(2) == T::Semi => {
                // `struct S;`: a forward declaration, never needed in C-- but harmless.
                self.bump();
                self.bump();
                self.bump();
                Ok(())
            }
            _ => {
                let start = self.tok().span;
                let base = self.base_type()?;
                let (name, ty) = self.declarator(base.clone())?;
                if self.at(T::LParen) {
                    let sig = self.func_sig(name, ty)?;
                    if self.at(T::LBrace) {
                        let body = self.block()?;
                        let span = start.to(body.span);
                        items.push(Item::Function(FuncDef { sig, body, span }));
                    } else {
                        self.expect_semi("function declaration")?;
                        items.push(Item::FuncDecl {
                            sig,
                            is_extern: false,
                        });
                    }
                    Ok(())
                } else {
                    self.global_rest(items, base, name, ty, start)
                }
            }
        }
    }

    /// The rest of a global declaration after its first declarator.
    fn global_rest(
        &mut self,
        items: &mut Vec<Item>,
        base: (BaseType, Span),
        name: Ident,
        ty: TypeExpr,
        start: Span,
    ) -> PResult<()> {
        let mut decls = vec![(name, ty)];
        self.skip_initializer(false)?;
        while self.eat(T::Comma) {
            decls.push(self.declarator(base.clone())?);
            self.skip_initializer(false)?;
        }
        self.expect_semi("declaration")?;
        for (name, ty) in decls {
            let span = start.to(name.span);
            items.push(Item::Global(VarDecl { name, ty, span }));
        }
        Ok(())
    }

    fn struct_def(&mut self) -> PResult<StructDef> {
        let start = self.bump().span; // struct
        let name = self.ident("struct name")?;
        self.expect(T::LBrace, "`{`")?;
        let mut fields = Vec::new();
        while !self.at(T::RBrace) && !self.at(T::Eof) {
            let before = self.pos;
            if self.field_decl(&mut fields).is_err() {
                // Recover inside the struct body.
                while !matches!(self.kind(), T::Semi | T::RBrace | T::Eof) {
                    self.bump();
                }
                self.eat(T::Semi);
            }
            if self.pos == before {
                self.bump();
            }
        }
        let end = self.expect(T::RBrace, "`}`")?.span;
        Ok(StructDef {
            name,
            fields,
            span: start.to(end),
        })
    }

    fn field_decl(&mut self, fields: &mut Vec<VarDecl>) -> PResult<()> {
        if self.at(T::Struct) && self.peek_kind(2) == T::LBrace {
            let span = self.tok().span;
            return self.fail(
                span,
                "nested struct definitions are not supported by C--; define the struct at the top level",
            );
        }
        let base = self.base_type()?;
        loop {
            let (name, ty) = self.declarator(base.clone())?;
            if self.at(T::LParen) {
                let span = self.tok().span;
                return self.fail(span, "struct members cannot be functions");
            }
            if self.at(T::Colon) {
                let span = self.tok().span;
                return self.fail(span, "bit-fields are not part of C--");
            }
            fields.push(VarDecl {
                span: ty.span.to(name.span),
                name,
                ty,
            });
            if !self.eat(T::Comma) {
                break;
            }
        }
        self.expect_semi("struct member")
    }

    /// `int`, `char`, `double`, `void`, `struct S`; omitted type keywords are reported and
    /// skipped (`unsigned int` parses as `int`).
    fn base_type(&mut self) -> PResult<(BaseType, Span)> {
        let mut reported = false;
        loop {
            let t = self.tok();
            let base = match t.kind {
                T::Int => BaseType::Int,
                T::Char => BaseType::Char,
                T::Double => BaseType::Double,
                T::Void => BaseType::Void,
                T::Struct => {
                    self.bump();
                    let name = self.ident("struct name")?;
                    return Ok((BaseType::Struct(name.clone()), t.span.to(name.span)));
                }
                T::OmittedKeyword => {
                    let kw = self.text(t);
                    match kw {
                        "typedef" | "enum" | "union" => {
                            self.bump();
                            return self.fail(t.span, omitted_keyword_message(kw));
                        }
                        _ => {}
                    }
                    if !reported {
                        self.error(t.span, omitted_keyword_message(kw));
                        reported = true;
                    }
                    self.bump();
                    let next = self.kind();
                    let continues = matches!(
                        next,
                        T::Int | T::Char | T::Double | T::Void | T::Struct | T::OmittedKeyword
                    );
                    if !continues {
                        // `unsigned x;`, `long x;`: treat as int (or double for float).
                        let b = if kw == "float" {
                            BaseType::Double
                        } else {
                            BaseType::Int
                        };
                        return Ok((b, t.span));
                    }
                    continue;
                }
                _ => return self.expected("a type"),
            };
            self.bump();
            return Ok((base, t.span));
        }
    }

    /// `*`... name `[n]`... Function-pointer declarators are rejected.
    fn declarator(&mut self, (base, base_span): (BaseType, Span)) -> PResult<(Ident, TypeExpr)> {
        let pointers = self.stars()?;
        if self.at(T::LParen) && self.peek_kind(1) == T::Star {
            let span = self.tok().span;
            return self.fail(span, "function pointers are not part of C--");
        }
        let name = self.ident("a name")?;
        let dims = self.dims()?;
        let span = base_span.to(self.prev_span());
        Ok((
            name,
            TypeExpr {
                base,
                pointers,
                dims,
                span,
            },
        ))
    }

    fn stars(&mut self) -> PResult<u32> {
        let mut n = 0;
        loop {
            if self.at(T::Star) {
                n += 1;
                let t = self.bump();
                if n > MAX_DECLARATOR_PARTS {
                    return self.fail(t.span, "too many levels of pointer indirection");
                }
            } else if self.at(T::OmittedKeyword)
                && matches!(self.text(self.tok()), "const" | "volatile" | "restrict")
            {
                let t = self.bump();
                let msg = omitted_keyword_message(self.text(t));
                self.error(t.span, msg);
            } else {
                return Ok(n);
            }
        }
    }

    fn dims(&mut self) -> PResult<Vec<Option<Expr>>> {
        let mut dims = Vec::new();
        while self.at(T::LBracket) {
            let t = self.bump();
            if dims.len() as u32 >= MAX_DECLARATOR_PARTS {
                return self.fail(t.span, "too many array dimensions");
            }
            if self.eat(T::RBracket) {
                dims.push(None);
            } else {
                let e = self.expr()?;
                self.expect(T::RBracket, "`]`")?;
                dims.push(Some(e));
            }
        }
        Ok(dims)
    }

    /// Reports and skips `= initializer` after a declarator.
    fn skip_initializer(&mut self, quiet: bool) -> PResult<()> {
        if !self.at(T::Assign) {
            return Ok(());
        }
        let eq = self.bump();
        if self.at(T::LBrace) {
            let span = self.tok().span;
            self.skip_braces();
            if !quiet {
                self.error(
                    span,
                    "brace initializers `{...}` are not part of C--; assign the members or \
                     elements in separate statements",
                );
            }
            return Ok(());
        }
        if !quiet {
            self.error(
                eq.span,
                "initializers in declarations are not part of C--; assign in a separate statement",
            );
        }
        self.assign_expr().map(|_| ())
    }

    fn func_sig(&mut self, name: Ident, ret: TypeExpr) -> PResult<FuncSig> {
        let open = self.expect(T::LParen, "`(`")?;
        let mut params = Vec::new();
        let mut variadic = false;
        if self.at(T::Void) && self.peek_kind(1) == T::RParen {
            self.bump();
        } else if !self.at(T::RParen) {
            loop {
                if self.at(T::Ellipsis) {
                    self.bump();
                    variadic = true;
                    break;
                }
                let base = self.base_type()?;
                let start = base.1;
                let pointers = self.stars()?;
                if self.at(T::LParen) && self.peek_kind(1) == T::Star {
                    let span = self.tok().span;
                    return self.fail(span, "function pointers are not part of C--");
                }
                let pname = if self.at(T::Ident) {
                    Some(self.ident("a name")?)
                } else {
                    None
                };
                let dims = self.dims()?;
                let span = start.to(self.prev_span());
                let ty = TypeExpr {
                    base: base.0,
                    pointers,
                    dims,
                    span,
                };
                params.push(Param {
                    name: pname,
                    ty,
                    span,
                });
                if !self.eat(T::Comma) {
                    break;
                }
            }
        }
        let close = self.expect(T::RParen, "`)` or `,` in the parameter list")?;
        let _ = open;
        Ok(FuncSig {
            span: ret.span.to(close.span),
            name,
            ret,
            params,
            variadic,
        })
    }

    // ----- statements -----

    fn block(&mut self) -> PResult<Block> {
        let open = self.expect(T::LBrace, "`{`")?;
        let mut stmts = Vec::new();
        while !self.at(T::RBrace) && !self.at(T::Eof) {
            let before = self.pos;
            match self.stmt() {
                Ok(s) => stmts.push(s),
                Err(Fail) => {
                    if self.aborted {
                        return Err(Fail);
                    }
                    self.sync()
                }
            }
            if self.pos == before && !self.at(T::RBrace) {
                self.bump();
            }
        }
        if self.aborted {
            return Err(Fail);
        }
        let close = self.expect(T::RBrace, "`}`")?;
        Ok(Block {
            stmts,
            span: open.span.to(close.span),
        })
    }

    fn is_type_start(&self, n: usize) -> bool {
        let t = self.toks[(self.pos + n).min(self.toks.len() - 1)];
        match t.kind {
            T::Int | T::Char | T::Double | T::Void | T::Struct => true,
            T::OmittedKeyword => matches!(
                self.text(t),
                "auto"
                    | "const"
                    | "enum"
                    | "long"
                    | "register"
                    | "signed"
                    | "static"
                    | "typedef"
                    | "union"
                    | "unsigned"
                    | "volatile"
                    | "short"
                    | "float"
                    | "inline"
                    | "restrict"
            ),
            _ => false,
        }
    }

    fn stmt(&mut self) -> PResult<Stmt> {
        self.enter()?;
        let r = self.stmt_inner();
        self.leave();
        r
    }

    // The statement and expression functions on recursive paths keep their stack frames small
    // (non-recursive work lives in separate functions) so that MAX_DEPTH levels fit in a 2 MiB
    // thread stack even in unoptimised builds.

    fn stmt_inner(&mut self) -> PResult<Stmt> {
        match self.kind() {
            T::LBrace => self.block_stmt(),
            T::If => self.if_stmt(),
            T::While => self.while_stmt(),
            T::Do => self.do_stmt(),
            T::For => self.for_stmt(),
            _ => self.simple_stmt(),
        }
    }

    fn finish(&self, kind: StmtKind, start: Span) -> PResult<Stmt> {
        Ok(Stmt {
            kind,
            span: start.to(self.prev_span()),
        })
    }

    fn block_stmt(&mut self) -> PResult<Stmt> {
        let b = self.block()?;
        let span = b.span;
        Ok(Stmt {
            kind: StmtKind::Block(b),
            span,
        })
    }

    fn paren_cond(&mut self, after: &str) -> PResult<Expr> {
        self.bump();
        let what = format!("`(` after `{after}`");
        self.expect(T::LParen, &what)?;
        let cond = self.expr()?;
        self.expect(T::RParen, "`)`")?;
        Ok(cond)
    }

    fn if_stmt(&mut self) -> PResult<Stmt> {
        let start = self.tok().span;
        let cond = self.paren_cond("if")?;
        let then = Box::new(self.stmt()?);
        let els = if self.eat(T::Else) {
            Some(Box::new(self.stmt()?))
        } else {
            None
        };
        self.finish(StmtKind::If { cond, then, els }, start)
    }

    fn while_stmt(&mut self) -> PResult<Stmt> {
        let start = self.tok().span;
        let cond = self.paren_cond("while")?;
        let body = Box::new(self.stmt()?);
        self.finish(StmtKind::While { cond, body }, start)
    }

    fn do_stmt(&mut self) -> PResult<Stmt> {
        let start = self.bump().span;
        let body = Box::new(self.stmt()?);
        if !self.at(T::While) {
            return self.expected("`while` after the body of `do`");
        }
        let cond = self.paren_cond("while")?;
        self.expect_semi("`do`-`while` statement")?;
        self.finish(StmtKind::DoWhile { body, cond }, start)
    }

    /// Statements that do not contain statements.
    #[inline(never)]
    fn simple_stmt(&mut self) -> PResult<Stmt> {
        let t = self.tok();
        let kind = match t.kind {
            T::Semi => {
                self.bump();
                StmtKind::Empty
            }
            T::Break | T::Continue => {
                self.bump();
                self.expect_semi(if t.kind == T::Break {
                    "`break`"
                } else {
                    "`continue`"
                })?;
                if t.kind == T::Break {
                    StmtKind::Break
                } else {
                    StmtKind::Continue
                }
            }
            T::Return => {
                self.bump();
                let value = if self.at(T::Semi) {
                    None
                } else {
                    Some(self.expr()?)
                };
                self.expect_semi("return statement")?;
                StmtKind::Return(value)
            }
            T::Else => {
                self.bump();
                return self.fail(t.span, "`else` without a previous `if`");
            }
            T::Directive => {
                self.bump();
                self.error(
                    t.span,
                    "preprocessor directives are not part of C-- (it has no preprocessor)",
                );
                StmtKind::Empty
            }
            T::OmittedKeyword if !self.is_type_start(0) => {
                // switch, case, default, goto
                self.bump();
                let kw = self.text(t);
                self.error(t.span, omitted_keyword_message(kw));
                if kw == "switch" {
                    // Skip `switch (...) { ... }` as a whole.
                    while !matches!(self.kind(), T::LBrace | T::Semi | T::RBrace | T::Eof) {
                        self.bump();
                    }
                    if self.at(T::LBrace) {
                        self.skip_braces();
                    } else {
                        self.eat(T::Semi);
                    }
                    StmtKind::Empty
                } else if kw == "goto" {
                    self.sync();
                    StmtKind::Empty
                } else {
                    // case X: / default:
                    while !matches!(self.kind(), T::Colon | T::Semi | T::RBrace | T::Eof) {
                        self.bump();
                    }
                    self.eat(T::Colon);
                    StmtKind::Empty
                }
            }
            T::Ident if self.peek_kind(1) == T::Colon => {
                self.bump();
                self.bump();
                self.error(t.span, "labels are not part of C-- (there is no `goto`)");
                StmtKind::Empty
            }
            T::Struct if self.peek_kind(2) == T::LBrace || self.peek_kind(1) == T::LBrace => {
                self.bump();
                while !self.at(T::LBrace) {
                    self.bump();
                }
                self.skip_braces();
                return self.fail(
                    t.span,
                    "struct definitions inside functions are not supported by C--; define the \
                     struct at the top level",
                );
            }
            _ if self.is_type_start(0) => StmtKind::Decl(self.local_decl(false)?),
            T::Extern => {
                self.bump();
                return self.fail(
                    t.span,
                    "`extern` declarations inside functions are not supported by C--; declare \
                     them at the top level",
                );
            }
            _ => {
                let e = self.expr()?;
                self.expect_semi("expression")?;
                StmtKind::Expr(e)
            }
        };
        self.finish(kind, t.span)
    }

    /// A local declaration `T a, *b[3];` (the `;` included).
    fn local_decl(&mut self, quiet_init: bool) -> PResult<Vec<VarDecl>> {
        let base = self.base_type()?;
        let mut decls = Vec::new();
        loop {
            let (name, ty) = self.declarator(base.clone())?;
            if self.at(T::LParen) {
                let span = self.tok().span;
                return self.fail(
                    span,
                    "function declarations inside functions are not supported by C--; declare \
                     functions at the top level",
                );
            }
            decls.push(VarDecl {
                span: ty.span.to(name.span),
                name,
                ty,
            });
            self.skip_initializer(quiet_init)?;
            if !self.eat(T::Comma) {
                break;
            }
        }
        self.expect_semi("declaration")?;
        Ok(decls)
    }

    fn for_stmt(&mut self) -> PResult<Stmt> {
        let start = self.tok().span;
        let (init, cond, step) = self.for_header()?;
        let body = Box::new(self.stmt()?);
        self.finish(
            StmtKind::For {
                init,
                cond,
                step,
                body,
            },
            start,
        )
    }

    #[allow(clippy::type_complexity)]
    #[inline(never)]
    fn for_header(&mut self) -> PResult<(Option<Box<Expr>>, Option<Box<Expr>>, Option<Box<Expr>>)> {
        self.bump();
        self.expect(T::LParen, "`(` after `for`")?;
        let init = if self.is_type_start(0) {
            let span = self.tok().span;
            self.error(
                span,
                "declarations in `for` loops are not part of C--; declare the variable before \
                 the loop",
            );
            self.local_decl(true)?;
            None
        } else if self.eat(T::Semi) {
            None
        } else {
            let e = self.expr()?;
            self.expect_semi("`for` initialization")?;
            Some(Box::new(e))
        };
        let cond = if self.at(T::Semi) {
            None
        } else {
            Some(Box::new(self.expr()?))
        };
        self.expect_semi("`for` condition")?;
        let step = if self.at(T::RParen) {
            None
        } else {
            Some(Box::new(self.expr()?))
        };
        self.expect(T::RParen, "`)`")?;
        Ok((init, cond, step))
    }

    // ----- expressions -----

    fn expr(&mut self) -> PResult<Expr> {
        let mut e = self.assign_expr()?;
        while self.eat(T::Comma) {
            e = self.comma_rest(e)?;
        }
        Ok(e)
    }

    fn comma_rest(&mut self, e: Expr) -> PResult<Expr> {
        let r = self.assign_expr()?;
        let span = e.span.to(r.span);
        self.mk(ExprKind::Comma(Box::new(e), Box::new(r)), span)
    }

    /// Right-associative `=` chains, built iteratively.
    fn assign_expr(&mut self) -> PResult<Expr> {
        let first = self.conditional()?;
        if !matches!(self.kind(), T::Assign | T::CompoundAssign) {
            return Ok(first);
        }
        self.assign_rest(first)
    }

    fn assign_rest(&mut self, first: Expr) -> PResult<Expr> {
        let mut lhs = vec![first];
        loop {
            match self.kind() {
                T::Assign => {
                    self.bump();
                }
                T::CompoundAssign => {
                    let t = self.bump();
                    let op = self.text(t);
                    let base = &op[..op.len() - 1];
                    let msg = format!(
                        "compound assignment `{op}` is not part of C--; write `x = x {base} y`"
                    );
                    self.error(t.span, msg);
                }
                _ => break,
            }
            lhs.push(self.conditional()?);
        }
        let mut rhs = lhs.pop().ok_or(Fail)?;
        while let Some(l) = lhs.pop() {
            let span = l.span.to(rhs.span);
            rhs = self.mk(ExprKind::Assign(Box::new(l), Box::new(rhs)), span)?;
        }
        Ok(rhs)
    }

    fn conditional(&mut self) -> PResult<Expr> {
        let cond = self.binary(0)?;
        if !self.at(T::Question) {
            return Ok(cond);
        }
        self.conditional_rest(cond.span)
    }

    fn conditional_rest(&mut self, start: Span) -> PResult<Expr> {
        let q = self.bump();
        self.error(
            q.span,
            "the conditional operator `?:` is not part of C--; use `if`",
        );
        self.enter()?;
        let r = self.conditional_branches();
        self.leave();
        let span = start.to(r?);
        self.mk(ExprKind::Error, span)
    }

    fn conditional_branches(&mut self) -> PResult<Span> {
        let a = self.expr()?;
        self.expect(T::Colon, "`:`")?;
        let b = self.conditional()?;
        Ok(a.span.to(b.span))
    }

    fn binop(k: T) -> Option<(BinOp, u8)> {
        Some(match k {
            T::OrOr => (BinOp::LogOr, 1),
            T::AndAnd => (BinOp::LogAnd, 2),
            T::Pipe => (BinOp::BitOr, 3),
            T::Caret => (BinOp::BitXor, 4),
            T::Amp => (BinOp::BitAnd, 5),
            T::EqEq => (BinOp::Eq, 6),
            T::NotEq => (BinOp::Ne, 6),
            T::Lt => (BinOp::Lt, 7),
            T::Le => (BinOp::Le, 7),
            T::Gt => (BinOp::Gt, 7),
            T::Ge => (BinOp::Ge, 7),
            T::Shl => (BinOp::Shl, 8),
            T::Shr => (BinOp::Shr, 8),
            T::Plus => (BinOp::Add, 9),
            T::Minus => (BinOp::Sub, 9),
            T::Star => (BinOp::Mul, 10),
            T::Slash => (BinOp::Div, 10),
            T::Percent => (BinOp::Rem, 10),
            _ => return None,
        })
    }

    /// Precedence climbing; left-associative chains are built in a loop and recursion is
    /// bounded by the number of precedence levels.
    fn binary(&mut self, min_prec: u8) -> PResult<Expr> {
        let mut lhs = self.unary()?;
        while let Some((op, prec)) = Self::binop(self.kind()) {
            if prec < min_prec {
                break;
            }
            lhs = self.binary_rest(lhs, op, prec)?;
        }
        Ok(lhs)
    }

    fn binary_rest(&mut self, lhs: Expr, op: BinOp, prec: u8) -> PResult<Expr> {
        self.bump();
        let rhs = self.binary(prec + 1)?;
        let span = lhs.span.to(rhs.span);
        self.mk(ExprKind::Binary(op, Box::new(lhs), Box::new(rhs)), span)
    }

    fn unary(&mut self) -> PResult<Expr> {
        self.enter()?;
        let r = self.unary_inner();
        self.leave();
        r
    }

    fn unary_inner(&mut self) -> PResult<Expr> {
        let op = match self.kind() {
            T::Minus => UnOp::Neg,
            T::Plus => UnOp::Plus,
            T::Bang => UnOp::Not,
            T::Tilde => UnOp::BitNot,
            T::Star => UnOp::Deref,
            T::Amp => UnOp::AddrOf,
            T::AndAnd => return self.label_address(),
            T::PlusPlus | T::MinusMinus => return self.prefix_incdec(),
            T::LParen if self.is_type_start(1) => return self.cast(),
            _ => return self.postfix(),
        };
        self.prefix(op)
    }

    fn prefix(&mut self, op: UnOp) -> PResult<Expr> {
        let start = self.bump().span;
        let e = self.unary()?;
        let span = start.to(e.span);
        self.mk(ExprKind::Unary(op, Box::new(e)), span)
    }

    #[inline(never)]
    fn label_address(&mut self) -> PResult<Expr> {
        let t = self.bump();
        self.fail(
            t.span,
            "taking the address of a label (`&&`) is not part of C--",
        )
    }

    #[inline(never)]
    fn incdec_error(&mut self, t: Token) {
        let msg = format!(
            "the {} operator `{}` is not part of C--; write `x = x {} 1`",
            if t.kind == T::PlusPlus {
                "increment"
            } else {
                "decrement"
            },
            self.text(t),
            if t.kind == T::PlusPlus { "+" } else { "-" },
        );
        self.error(t.span, msg);
    }

    fn prefix_incdec(&mut self) -> PResult<Expr> {
        let t = self.bump();
        self.incdec_error(t);
        let e = self.unary()?;
        self.mk(ExprKind::Error, t.span.to(e.span))
    }

    fn cast(&mut self) -> PResult<Expr> {
        let open = self.bump().span;
        let ty = Box::new(self.type_name()?);
        self.expect(T::RParen, "`)` after the type of a cast")?;
        if self.at(T::LBrace) {
            let span = self.tok().span;
            return self.fail(span, "compound literals `(type){...}` are not part of C--");
        }
        let e = self.unary()?;
        let span = open.to(e.span);
        self.mk(ExprKind::Cast(ty, Box::new(e)), span)
    }

    /// A type in a cast or `sizeof`: base type, `*`s, optional array dimensions.
    fn type_name(&mut self) -> PResult<TypeExpr> {
        let base = self.base_type()?;
        let pointers = self.stars()?;
        if self.at(T::LParen) {
            let span = self.tok().span;
            return self.fail(span, "function pointers are not part of C--");
        }
        let dims = self.dims()?;
        Ok(TypeExpr {
            base: base.0,
            pointers,
            dims,
            span: base.1.to(self.prev_span()),
        })
    }

    fn postfix(&mut self) -> PResult<Expr> {
        let mut e = match self.kind() {
            T::LParen => self.paren()?,
            T::Sizeof => self.sizeof_expr()?,
            _ => self.leaf()?,
        };
        loop {
            e = match self.kind() {
                T::LBracket => self.index_suffix(e)?,
                T::LParen => self.call_suffix(e)?,
                T::Dot | T::Arrow => self.member_suffix(e)?,
                T::PlusPlus | T::MinusMinus => {
                    let t = self.bump();
                    self.incdec_error(t);
                    self.mk(ExprKind::Error, e.span.to(t.span))?
                }
                _ => return Ok(e),
            };
        }
    }

    fn index_suffix(&mut self, e: Expr) -> PResult<Expr> {
        self.bump();
        let i = self.expr()?;
        let close = self.expect(T::RBracket, "`]`")?;
        let span = e.span.to(close.span);
        self.mk(ExprKind::Index(Box::new(e), Box::new(i)), span)
    }

    fn call_suffix(&mut self, e: Expr) -> PResult<Expr> {
        self.bump();
        let mut args = Vec::new();
        if !self.at(T::RParen) {
            loop {
                args.push(self.assign_expr()?);
                if !self.eat(T::Comma) {
                    break;
                }
            }
        }
        let close = self.expect(T::RParen, "`)` or `,` in the argument list")?;
        let span = e.span.to(close.span);
        self.mk(ExprKind::Call(Box::new(e), args), span)
    }

    #[inline(never)]
    fn member_suffix(&mut self, e: Expr) -> PResult<Expr> {
        let t = self.bump();
        let f = self.ident("a member name")?;
        let span = e.span.to(f.span);
        let kind = if t.kind == T::Dot {
            ExprKind::Member(Box::new(e), f)
        } else {
            ExprKind::Arrow(Box::new(e), f)
        };
        self.mk(kind, span)
    }

    /// `( expr )`; counts as two nesting levels (its recursion path has more frames).
    fn paren(&mut self) -> PResult<Expr> {
        self.enter()?;
        let r = self.paren_inner();
        self.leave();
        r
    }

    fn paren_inner(&mut self) -> PResult<Expr> {
        let open = self.bump().span;
        let e = self.expr()?;
        let close = self.expect(T::RParen, "`)`")?;
        Ok(Expr {
            span: open.to(close.span),
            ..e
        })
    }

    fn sizeof_expr(&mut self) -> PResult<Expr> {
        let t = self.bump();
        if self.at(T::LParen) && self.is_type_start(1) {
            self.bump();
            let ty = Box::new(self.type_name()?);
            let close = self.expect(T::RParen, "`)`")?;
            return self.mk(ExprKind::SizeofType(ty), t.span.to(close.span));
        }
        self.error(
            t.span,
            "`sizeof` of an expression is not part of C--; write `sizeof(type)`",
        );
        let e = self.unary()?;
        self.mk(ExprKind::Error, t.span.to(e.span))
    }

    /// Expressions without subexpressions: literals, names, `stacksizeof(f)`.
    #[inline(never)]
    fn leaf(&mut self) -> PResult<Expr> {
        let t = self.tok();
        match t.kind {
            T::IntLit => {
                self.bump();
                let v = match lexer::int_value(self.text(t)) {
                    Ok(v) => v,
                    Err(msg) => {
                        self.error(t.span, msg);
                        0
                    }
                };
                self.mk(ExprKind::IntLit(v), t.span)
            }
            T::DoubleLit => {
                self.bump();
                let v = match lexer::double_value(self.text(t)) {
                    Ok(v) => v,
                    Err(msg) => {
                        self.error(t.span, msg);
                        0.0
                    }
                };
                self.mk(ExprKind::DoubleLit(v), t.span)
            }
            T::CharLit => {
                self.bump();
                let bytes = self.literal_bytes(t);
                let v = match bytes.len() {
                    1 => bytes[0] as i8 as i32,
                    0 => {
                        if t.error.is_none() {
                            self.error(t.span, "empty character constant");
                        }
                        0
                    }
                    _ => {
                        self.error(
                            t.span,
                            "multi-character character constants are not part of C--",
                        );
                        0
                    }
                };
                self.mk(ExprKind::CharLit(v), t.span)
            }
            T::StrLit => {
                let mut bytes = Vec::new();
                let mut span = t.span;
                while self.at(T::StrLit) {
                    let s = self.bump();
                    bytes.extend(self.literal_bytes(s));
                    span = span.to(s.span);
                }
                self.mk(ExprKind::StrLit(bytes), span)
            }
            T::WideLit => {
                self.bump();
                self.error(
                    t.span,
                    "wide character and string literals are not part of C--",
                );
                self.mk(ExprKind::Error, t.span)
            }
            T::Null => {
                self.bump();
                self.mk(ExprKind::Null, t.span)
            }
            T::Ident => {
                self.bump();
                let name = Ident {
                    name: self.text(t).to_string(),
                    span: t.span,
                };
                self.mk(ExprKind::Name(name), t.span)
            }
            T::StackSizeof => {
                self.bump();
                self.expect(T::LParen, "`(` after `stacksizeof`")?;
                let name = self.ident("the name of a function")?;
                let close = self.expect(T::RParen, "`)`")?;
                self.mk(ExprKind::StackSizeof(name), t.span.to(close.span))
            }
            T::LBrace => self.fail(
                t.span,
                "brace initializers `{...}` are not part of C--; assign the members or elements \
                 in separate statements",
            ),
            _ => self.expected("an expression"),
        }
    }

    /// The decoded bytes of a string or char literal token, reporting bad escapes.
    fn literal_bytes(&mut self, t: Token) -> Vec<u8> {
        let text = self.text(t);
        let quote = if t.kind == T::StrLit { '"' } else { '\'' };
        let body = &text[1..];
        let body = if t.error.is_none() {
            body.strip_suffix(quote).unwrap_or(body)
        } else {
            body
        };
        let (bytes, errs) = lexer::unescape(body);
        for e in errs {
            let base = t.span.start as usize + 1;
            self.error(Span::new(base + e.start, base + e.end), e.message);
        }
        bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(src: &str) -> TranslationUnit {
        let (unit, diags) = parse(src);
        assert!(diags.is_empty(), "unexpected errors for {src:?}: {diags:?}");
        unit
    }

    fn errs(src: &str) -> Vec<String> {
        parse(src).1.into_iter().map(|d| d.message).collect()
    }

    fn body_expr(src: &str) -> Expr {
        let unit = ok(&format!("int main() {{ {src}; }}"));
        let Item::Function(f) = &unit.items[0] else {
            panic!("not a function")
        };
        let StmtKind::Expr(e) = &f.body.stmts[0].kind else {
            panic!("not an expression")
        };
        e.clone()
    }

    /// Renders an expression fully parenthesised, to check precedence.
    fn show(e: &Expr) -> String {
        match &e.kind {
            ExprKind::IntLit(v) => v.to_string(),
            ExprKind::Name(n) => n.name.clone(),
            ExprKind::Binary(op, a, b) => format!("({} {} {})", show(a), op.symbol(), show(b)),
            ExprKind::Assign(a, b) => format!("({} = {})", show(a), show(b)),
            ExprKind::Comma(a, b) => format!("({}, {})", show(a), show(b)),
            ExprKind::Unary(op, a) => format!("({op:?} {})", show(a)),
            ExprKind::Cast(_, a) => format!("(cast {})", show(a)),
            ExprKind::Index(a, b) => format!("{}[{}]", show(a), show(b)),
            ExprKind::Arrow(a, f) => format!("{}->{}", show(a), f.name),
            ExprKind::Member(a, f) => format!("{}.{}", show(a), f.name),
            ExprKind::Call(f, args) => {
                format!(
                    "{}({})",
                    show(f),
                    args.iter().map(show).collect::<Vec<_>>().join(", ")
                )
            }
            other => format!("{other:?}"),
        }
    }

    #[test]
    fn precedence_and_associativity() {
        assert_eq!(
            show(&body_expr("a = b = c + d * e - f")),
            "(a = (b = ((c + (d * e)) - f)))"
        );
        assert_eq!(
            show(&body_expr("a || b && c | d ^ e & f")),
            "(a || (b && (c | (d ^ (e & f)))))"
        );
        assert_eq!(show(&body_expr("a == b < c << d")), "(a == (b < (c << d)))");
        assert_eq!(show(&body_expr("a - b - c")), "((a - b) - c)");
        assert_eq!(show(&body_expr("a, b = c")), "(a, (b = c))");
        assert_eq!(show(&body_expr("-*p->q[1]")), "(Neg (Deref p->q[1]))");
        assert_eq!(show(&body_expr("(int)a + b")), "((cast a) + b)");
        assert_eq!(show(&body_expr("f(a, b)(c)")), "f(a, b)(c)");
        assert_eq!(show(&body_expr("!a.b % 3")), "((Not a.b) % 3)");
    }

    #[test]
    fn declarations() {
        let unit = ok(
            "struct S { int a; char *b, c[4]; struct S *next; double d[2][3]; };
                       int x; int *p, q; struct S s;
                       extern int printf(char *, ...);
                       extern void *malloc(int size);
                       int f(void) { int a, *b; a = 1; { char c; } return a; }
                       int main(int argc, char **argv) { return 0; }",
        );
        assert_eq!(unit.items.len(), 9);
        let Item::Struct(s) = &unit.items[0] else {
            panic!()
        };
        assert_eq!(s.fields.len(), 5);
        assert_eq!(s.fields[4].ty.dims.len(), 2);
        let Item::FuncDecl {
            sig,
            is_extern: true,
        } = &unit.items[5]
        else {
            panic!()
        };
        assert!(sig.variadic);
        assert_eq!(sig.params.len(), 1);
        assert!(sig.params[0].name.is_none());
    }

    #[test]
    fn adjacent_strings_concatenate() {
        let e = body_expr(r#""ab" "c\n" "\x41""#);
        assert_eq!(e.kind, ExprKind::StrLit(b"abc\nA".to_vec()));
        assert_eq!(body_expr("'\\n'").kind, ExprKind::CharLit(10));
        assert_eq!(body_expr("'\\xff'").kind, ExprKind::CharLit(-1));
    }

    #[test]
    fn omitted_features_are_named() {
        let cases = [
            ("int main() { int x = 3; }", "initializers in declarations"),
            ("int main() { int x; x++; }", "increment operator `++`"),
            ("int main() { int x; --x; }", "decrement operator `--`"),
            ("int main() { int x; x += 2; }", "compound assignment `+=`"),
            (
                "int main() { int x; x = x ? 1 : 2; }",
                "conditional operator",
            ),
            (
                "int main() { switch (1) { case 1: break; } }",
                "`switch` statements",
            ),
            ("int main() { goto end; }", "`goto`"),
            ("typedef int T;", "`typedef`"),
            ("enum E { A };", "`enum`"),
            ("union U { int a; };", "`union`"),
            ("static int x;", "storage class `static`"),
            ("unsigned int x;", "`unsigned` types"),
            ("long x;", "`long` types"),
            ("int (*fp)(int);", "function pointers"),
            (
                "struct S { int a; }; struct S s = { 1 };",
                "brace initializers",
            ),
            (
                "int main() { for (int i = 0; i < 3; i = i + 1) ; }",
                "declarations in `for`",
            ),
            ("#include <stdio.h>\n", "preprocessor"),
            (
                "int main() { return sizeof 3; }",
                "`sizeof` of an expression",
            ),
            ("extern int errno;", "extern variables"),
        ];
        for (src, want) in cases {
            let e = errs(src);
            assert_eq!(e.len(), 1, "{src}: {e:?}");
            assert!(e[0].contains(want), "{src}: {e:?}");
            assert!(
                e[0].contains("not part of C--") || e[0].contains("not supported"),
                "{e:?}"
            );
        }
    }

    #[test]
    fn recovery_reports_every_error() {
        let e = errs("int main() { int x; x = ; x = 1 +; return x }\nint y\nint z;");
        assert_eq!(e.len(), 4, "{e:?}");
    }

    #[test]
    fn missing_semicolon_points_after_previous_token() {
        let (_, d) = parse("int main() {\n  return 0\n}");
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].span, Span::new(23, 23)); // just after `0`
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let deep = format!(
            "int main() {{ return {}1{}; }}",
            "(".repeat(5000),
            ")".repeat(5000)
        );
        let e = errs(&deep);
        assert_eq!(e.len(), 1);
        assert!(e[0].contains("nesting too deep"));
        let fine = format!(
            "int main() {{ return {}1{}; }}",
            "(".repeat(100),
            ")".repeat(100)
        );
        ok(&fine);
        let chain = format!("int main() {{ return 1{}; }}", "+1".repeat(5000));
        assert!(errs(&chain)[0].contains("nesting too deep"));
    }
}
