//! The syntax tree produced by the parser: C-- declarations, statements and expressions with spans.
//!
//! Names are unresolved and types are as written; [`crate::sema`] checks both. Every expression
//! records its `height` (1 + the tallest child), which the parser bounds so later recursive
//! passes cannot overflow the stack.

use crate::diag::Span;

#[derive(Clone, Debug, PartialEq)]
pub struct Ident {
    pub name: String,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq, Default)]
pub struct TranslationUnit {
    pub items: Vec<Item>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Item {
    /// `struct S { ... };`
    Struct(StructDef),
    /// One declarator of a global declaration (`int *p, q;` gives two).
    Global(VarDecl),
    /// `extern T f(params);` (`is_extern`) or a prototype `T f(params);` of a C-- function.
    FuncDecl {
        sig: FuncSig,
        is_extern: bool,
    },
    Function(FuncDef),
}

#[derive(Clone, Debug, PartialEq)]
pub struct StructDef {
    pub name: Ident,
    pub fields: Vec<VarDecl>,
    pub span: Span,
}

/// The base of a type as written before any `*`.
#[derive(Clone, Debug, PartialEq)]
pub enum BaseType {
    Int,
    Char,
    Double,
    Void,
    Struct(Ident),
}

/// A written type: base, pointer levels, then array dimensions (outermost first).
#[derive(Clone, Debug, PartialEq)]
pub struct TypeExpr {
    pub base: BaseType,
    pub pointers: u32,
    /// Array dimensions; `None` for `[]` (allowed only on parameters).
    pub dims: Vec<Option<Expr>>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct VarDecl {
    pub name: Ident,
    pub ty: TypeExpr,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    pub name: Option<Ident>,
    pub ty: TypeExpr,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct FuncSig {
    pub name: Ident,
    pub ret: TypeExpr,
    pub params: Vec<Param>,
    pub variadic: bool,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct FuncDef {
    pub sig: FuncSig,
    pub body: Block,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    pub stmts: Vec<Stmt>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Stmt {
    pub kind: StmtKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum StmtKind {
    /// A local declaration; one entry per declarator.
    Decl(Vec<VarDecl>),
    Expr(Expr),
    If {
        cond: Expr,
        then: Box<Stmt>,
        els: Option<Box<Stmt>>,
    },
    While {
        cond: Expr,
        body: Box<Stmt>,
    },
    DoWhile {
        body: Box<Stmt>,
        cond: Expr,
    },
    For {
        init: Option<Box<Expr>>,
        cond: Option<Box<Expr>>,
        step: Option<Box<Expr>>,
        body: Box<Stmt>,
    },
    Break,
    Continue,
    Return(Option<Expr>),
    Block(Block),
    Empty,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
    /// 1 + the height of the tallest child expression.
    pub height: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnOp {
    Neg,
    Plus,
    Not,
    BitNot,
    Deref,
    AddrOf,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Shl,
    Shr,
    BitAnd,
    BitOr,
    BitXor,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    LogAnd,
    LogOr,
}

impl BinOp {
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Rem => "%",
            BinOp::Shl => "<<",
            BinOp::Shr => ">>",
            BinOp::BitAnd => "&",
            BinOp::BitOr => "|",
            BinOp::BitXor => "^",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::LogAnd => "&&",
            BinOp::LogOr => "||",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    IntLit(i32),
    DoubleLit(f64),
    /// A character literal: type `int`, value of the (signed) char.
    CharLit(i32),
    /// Adjacent string literals, already concatenated and unescaped.
    StrLit(Vec<u8>),
    Null,
    Name(Ident),
    Unary(UnOp, Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    Assign(Box<Expr>, Box<Expr>),
    Comma(Box<Expr>, Box<Expr>),
    Cast(Box<TypeExpr>, Box<Expr>),
    SizeofType(Box<TypeExpr>),
    StackSizeof(Ident),
    Index(Box<Expr>, Box<Expr>),
    /// `e.f`
    Member(Box<Expr>, Ident),
    /// `e->f`
    Arrow(Box<Expr>, Ident),
    Call(Box<Expr>, Vec<Expr>),
    /// Placeholder after a syntax error (only present when parsing reported an error).
    Error,
}

impl Expr {
    /// Builds an expression, computing its height from its children.
    pub fn new(kind: ExprKind, span: Span) -> Expr {
        let h = |e: &Expr| e.height;
        let child = match &kind {
            ExprKind::Unary(_, e)
            | ExprKind::Cast(_, e)
            | ExprKind::Member(e, _)
            | ExprKind::Arrow(e, _) => h(e),
            ExprKind::Binary(_, a, b)
            | ExprKind::Assign(a, b)
            | ExprKind::Comma(a, b)
            | ExprKind::Index(a, b) => h(a).max(h(b)),
            ExprKind::Call(f, args) => args.iter().map(h).max().unwrap_or(0).max(h(f)),
            _ => 0,
        };
        Expr {
            kind,
            span,
            height: child + 1,
        }
    }
}
