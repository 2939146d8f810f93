//! The typed program: the front end's output and the contract with `cmm-codegen`.
//!
//! Invariants established by `sema` (lowering may rely on them without checking):
//! - every expression carries its C type; arrays never appear as rvalues (they are decayed
//!   with [`ExprKind::AddrOf`] of the array place, typed as a pointer to the element);
//! - all implicit conversions are explicit [`ExprKind::Convert`] nodes: binary arithmetic
//!   operands already have the common type, call arguments have the parameter type (varargs
//!   are promoted: `char` to `int`), assigned values have the place's type, returned values
//!   the function's return type;
//! - pointer arithmetic is explicit ([`ExprKind::PtrOffset`], [`ExprKind::PtrDiff`]) with the
//!   element size already computed for the target;
//! - struct-typed values appear only as places (member access, assignment copies whole structs);
//!   structs are never passed to or returned from functions by value;
//! - a function's locals are all in [`Function::locals`], parameters first, each declared once
//!   (block scoping is resolved: two locals with the same name are two entries).

use crate::diag::Span;
use crate::target::TargetInfo;
use crate::types::{StructDef, Type};

pub type LocalId = u32;
pub type GlobalId = u32;
pub type FuncId = u32;
pub type ExternId = u32;
pub type StringId = u32;

#[derive(Clone, Debug, PartialEq)]
pub struct Program {
    pub target: TargetInfo,
    pub structs: Vec<StructDef>,
    pub globals: Vec<Global>,
    /// String literal contents without the terminating NUL (lowering adds it).
    pub strings: Vec<Vec<u8>>,
    pub functions: Vec<Function>,
    pub externs: Vec<Extern>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Global {
    pub name: String,
    pub ty: Type,
    pub size: u32,
    pub align: u32,
    pub span: Span,
}

/// An `extern` function declaration: a C function called with the C ABI of the target.
#[derive(Clone, Debug, PartialEq)]
pub struct Extern {
    pub name: String,
    pub params: Vec<Type>,
    pub variadic: bool,
    pub ret: Type,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Function {
    pub name: String,
    /// Number of leading entries of `locals` that are the parameters, in order.
    pub param_count: u32,
    pub ret: Type,
    pub locals: Vec<Local>,
    pub body: Vec<Stmt>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Local {
    pub name: String,
    pub ty: Type,
    pub size: u32,
    pub align: u32,
    /// True if `&` is applied to it, or it is an array or struct: it must live in memory.
    pub needs_memory: bool,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Stmt {
    Expr(Expr),
    /// `cond` is scalar (int, char, double or pointer): true when not zero/NULL.
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
        init: Option<Expr>,
        cond: Option<Expr>,
        step: Option<Expr>,
        body: Box<Stmt>,
    },
    Break,
    Continue,
    Return(Option<Expr>),
    Block(Vec<Stmt>),
    Empty,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub ty: Type,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    /// Integer constant of type `ty` (`Int` or `Char`); the value fits the type.
    IntConst(i32),
    DoubleConst(f64),
    /// Address of a string literal; type `char *`.
    StringLit(StringId),
    /// The null pointer; type `void *` (or the pointer type it was converted to).
    Null,
    /// A function's address used as a value; type `int` (C-- rule).
    FuncAddr(FuncId),
    /// `stacksizeof(f)`: the frame size of `f` under the chosen back end and mechanism; `int`.
    StackSizeOf(FuncId),
    /// Read of a place (lvalue-to-rvalue conversion). Never of array or struct type.
    Load(Box<Place>),
    /// Address of a place; type pointer to the place's type (or to the element for array decay).
    AddrOf(Box<Place>),
    /// Store `value` (already of the place's type) into the place; the result is the stored value.
    /// For struct-typed places `value` is a [`ExprKind::AddrOf`] of the source struct and the
    /// store copies `size_of(struct)` bytes; the expression's type is then `void`.
    Assign(Box<Place>, Box<Expr>),
    Unary(UnaryOp, Box<Expr>),
    /// Operands have the same type. Arithmetic ops: `Int` or `Double` operands, result that type
    /// (`Rem`, shifts and bitwise ops: `Int` only). Comparisons: `Int`, `Double` or pointer
    /// operands, result `Int` 0/1.
    Binary(BinaryOp, Box<Expr>, Box<Expr>),
    /// `ptr + index * elem_size` (or minus, if `subtract`); `index` is `Int`; result type = ptr type.
    PtrOffset {
        ptr: Box<Expr>,
        index: Box<Expr>,
        elem_size: u32,
        subtract: bool,
    },
    /// `(lhs - rhs) / elem_size`, both pointers to the same type; result `Int`.
    PtrDiff {
        lhs: Box<Expr>,
        rhs: Box<Expr>,
        elem_size: u32,
    },
    /// Short-circuit `&&`; operands scalar; result `Int` 0/1.
    LogicalAnd(Box<Expr>, Box<Expr>),
    /// Short-circuit `||`; operands scalar; result `Int` 0/1.
    LogicalOr(Box<Expr>, Box<Expr>),
    /// Conversion of the operand to `ty`: between char, int and double (C rules, double to int
    /// truncates toward zero), pointer to pointer, pointer to/from int (sign-extending or
    /// truncating to pointer width), and anything to `void` (value discarded).
    Convert(Box<Expr>),
    Call {
        callee: Callee,
        args: Vec<Expr>,
    },
    /// `a, b`: evaluate `a`, discard it, result `b`.
    Comma(Box<Expr>, Box<Expr>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Callee {
    Function(FuncId),
    Extern(ExternId),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnaryOp {
    /// Arithmetic negation; operand and result `Int` or `Double`.
    Neg,
    /// Bitwise complement; `Int`.
    BitNot,
    /// Logical not; operand scalar, result `Int` 0/1.
    LogNot,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Shl,
    /// Arithmetic (sign-propagating) right shift.
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
}

#[derive(Clone, Debug, PartialEq)]
pub struct Place {
    pub kind: PlaceKind,
    pub ty: Type,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum PlaceKind {
    Local(LocalId),
    Global(GlobalId),
    /// `*ptr`; `ptr` has pointer type.
    Deref(Box<Expr>),
    /// A field of a struct place, at byte `offset` from its start.
    Member(Box<Place>, u32),
}
