//! Semantic analysis: resolves names, lays out structs, types every expression and makes all C
//! conversions explicit, producing the [`typed::Program`] documented in `typed.rs`.
//!
//! C-- is multi-pass: structs, functions and globals may be used before they appear. Errors are
//! collected per statement (a failing expression is abandoned, the next statement is checked),
//! and a declaration whose type is wrong still declares its name so later uses do not cascade.
//! The recursive checkers keep their frames small (work is split into non-recursive helpers)
//! because the parser allows expression trees up to [`crate::parser::MAX_HEIGHT`] deep.

use std::collections::{HashMap, HashSet};

use crate::ast::{self, BaseType, BinOp, ExprKind as AK, StmtKind, UnOp};
use crate::diag::{Diagnostic, Span};
use crate::target::TargetInfo;
use crate::typed::{
    BinaryOp, Callee, Expr, ExprKind, Extern, FuncId, Function, Global, Local, LocalId, Place,
    PlaceKind, Program, Stmt, StringId, UnaryOp,
};
use crate::types::{align_in_struct, align_of_object, size_of, Field, StructDef, StructId, Type};

/// The largest object C-- allows (sizes are 32-bit `int`s).
const MAX_OBJECT_SIZE: u64 = i32::MAX as u64;

/// The error has been reported.
#[derive(Clone, Copy, Debug)]
pub struct Reported;
type R<T> = Result<T, Reported>;

/// Checks a parsed program for `target`. Returns every semantic error on failure.
pub fn check(unit: &ast::TranslationUnit, target: TargetInfo) -> Result<Program, Vec<Diagnostic>> {
    let mut s = Sema::new(target);
    let program = s.program(unit);
    if s.diags.is_empty() {
        Ok(program)
    } else {
        let mut d = s.diags;
        d.sort_by_key(|d| d.span.start);
        Err(d)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Name {
    Global(u32),
    Func(FuncId),
    Extern(u32),
}

struct FnSig {
    name: String,
    params: Vec<Type>,
    ret: Type,
    span: Span,
    /// The signature had an error; calls are not checked (no cascading errors).
    bad: bool,
}

/// An expression's result: a place (lvalue) or a value.
enum Val {
    Place(Place),
    Value(Expr),
}

struct Sema {
    target: TargetInfo,
    diags: Vec<Diagnostic>,
    structs: Vec<StructDef>,
    struct_ids: HashMap<String, StructId>,
    globals: Vec<Global>,
    bad_globals: HashSet<u32>,
    funcs: Vec<FnSig>,
    externs: Vec<Extern>,
    names: HashMap<String, (Name, Span)>,
    strings: Vec<Vec<u8>>,
    string_ids: HashMap<Vec<u8>, StringId>,
    // Per function.
    locals: Vec<Local>,
    bad_locals: HashSet<LocalId>,
    scopes: Vec<HashMap<String, LocalId>>,
    ret: Type,
    fn_name: String,
    loops: u32,
}

fn int() -> Type {
    Type::Int
}

impl Sema {
    fn new(target: TargetInfo) -> Sema {
        Sema {
            target,
            diags: Vec::new(),
            structs: Vec::new(),
            struct_ids: HashMap::new(),
            globals: Vec::new(),
            bad_globals: HashSet::new(),
            funcs: Vec::new(),
            externs: Vec::new(),
            names: HashMap::new(),
            strings: Vec::new(),
            string_ids: HashMap::new(),
            locals: Vec::new(),
            bad_locals: HashSet::new(),
            scopes: Vec::new(),
            ret: Type::Void,
            fn_name: String::new(),
            loops: 0,
        }
    }

    fn error(&mut self, span: Span, msg: impl Into<String>) {
        self.diags.push(Diagnostic::error(span, msg));
    }
    fn fail<T>(&mut self, span: Span, msg: impl Into<String>) -> R<T> {
        self.error(span, msg);
        Err(Reported)
    }

    fn size(&self, t: &Type) -> u32 {
        size_of(t, &self.structs, self.target)
    }

    /// The C spelling of a type, for messages.
    fn ty_name(&self, t: &Type) -> String {
        match t {
            Type::Void => "void".into(),
            Type::Char => "char".into(),
            Type::Int => "int".into(),
            Type::Double => "double".into(),
            Type::Pointer(p) => {
                let inner = self.ty_name(p);
                if inner.ends_with('*') {
                    format!("{inner}*")
                } else {
                    format!("{inner} *")
                }
            }
            Type::Array(e, n) => format!("{} [{n}]", self.ty_name(e)),
            Type::Struct(id) => {
                format!(
                    "struct {}",
                    self.structs.get(*id as usize).map_or("?", |s| &s.name)
                )
            }
        }
    }

    // ----- program -----

    fn program(&mut self, unit: &ast::TranslationUnit) -> Program {
        self.declare_structs(unit);
        self.declare_names(unit);
        self.check_prototypes(unit);
        self.check_main(unit);
        let mut functions = Vec::new();
        for item in &unit.items {
            if let ast::Item::Function(f) = item {
                let id = functions.len() as FuncId;
                functions.push(self.function(f, id));
            }
        }
        Program {
            target: self.target,
            structs: std::mem::take(&mut self.structs),
            globals: std::mem::take(&mut self.globals),
            strings: std::mem::take(&mut self.strings),
            functions,
            externs: std::mem::take(&mut self.externs),
        }
    }

    // ----- structs -----

    fn declare_structs(&mut self, unit: &ast::TranslationUnit) {
        let defs: Vec<&ast::StructDef> = unit
            .items
            .iter()
            .filter_map(|i| {
                if let ast::Item::Struct(s) = i {
                    Some(s)
                } else {
                    None
                }
            })
            .collect();
        // Names first, so fields can refer to any struct.
        let mut kept = Vec::new();
        for d in &defs {
            if self.struct_ids.contains_key(&d.name.name) {
                self.error(
                    d.name.span,
                    format!("redefinition of `struct {}`", d.name.name),
                );
                continue;
            }
            let id = self.structs.len() as StructId;
            self.struct_ids.insert(d.name.name.clone(), id);
            self.structs.push(StructDef {
                name: d.name.name.clone(),
                fields: Vec::new(),
                size: 1,
                align: 1,
            });
            kept.push(*d);
        }
        // Field types.
        let mut field_types: Vec<Vec<Option<Type>>> = Vec::new();
        for d in &kept {
            let mut tys = Vec::new();
            let mut seen = HashSet::new();
            if d.fields.is_empty() {
                self.error(
                    d.name.span,
                    format!("`struct {}` has no members", d.name.name),
                );
            }
            for f in &d.fields {
                if !seen.insert(f.name.name.clone()) {
                    self.error(f.name.span, format!("duplicate member `{}`", f.name.name));
                }
                let t = self.resolve_type(&f.ty, false).ok();
                let t = match t {
                    Some(Type::Void) => {
                        self.error(
                            f.name.span,
                            format!("member `{}` declared void", f.name.name),
                        );
                        None
                    }
                    t => t,
                };
                tys.push(t);
            }
            field_types.push(tys);
        }
        // Layout in dependency order (structs contained by value first), with an explicit stack.
        #[derive(Clone, Copy, PartialEq)]
        enum St {
            New,
            Busy,
            Done,
        }
        let n = kept.len();
        let mut state = vec![St::New; n];
        for root in 0..n {
            if state[root] != St::New {
                continue;
            }
            let mut stack = vec![(root, 0usize)];
            state[root] = St::Busy;
            while let Some(&mut (sid, ref mut next)) = stack.last_mut() {
                // Find the next by-value struct dependency not yet laid out.
                let mut pushed = false;
                while *next < field_types[sid].len() {
                    let fi = *next;
                    *next += 1;
                    let Some(dep) = field_types[sid][fi].as_ref().and_then(by_value_struct) else {
                        continue;
                    };
                    let dep = dep as usize;
                    match state[dep] {
                        St::Done => {}
                        St::Busy => {
                            let f = &kept[sid].fields[fi];
                            let msg = if dep == sid {
                                format!(
                                    "`struct {}` contains itself by value (member `{}`); use a \
                                     pointer",
                                    kept[sid].name.name, f.name.name
                                )
                            } else {
                                format!(
                                    "member `{}` makes `struct {}` contain itself by value \
                                     (through `struct {}`); use a pointer",
                                    f.name.name, kept[sid].name.name, kept[dep].name.name
                                )
                            };
                            self.error(f.name.span, msg);
                            field_types[sid][fi] = None;
                        }
                        St::New => {
                            state[dep] = St::Busy;
                            stack.push((dep, 0));
                            pushed = true;
                            break;
                        }
                    }
                }
                if !pushed {
                    stack.pop();
                    self.layout(kept[sid], sid as StructId, &field_types[sid]);
                    state[sid] = St::Done;
                }
            }
        }
    }

    fn layout(&mut self, def: &ast::StructDef, id: StructId, tys: &[Option<Type>]) {
        let mut offset: u64 = 0;
        let mut align: u32 = 1;
        let mut fields = Vec::new();
        for (f, t) in def.fields.iter().zip(tys) {
            let Some(t) = t else { continue };
            let a = align_in_struct(t, &self.structs, self.target).max(1);
            let sz = self.size(t) as u64;
            offset = offset.div_ceil(a as u64) * a as u64;
            fields.push(Field {
                name: f.name.name.clone(),
                ty: t.clone(),
                offset: offset as u32,
            });
            offset += sz;
            align = align.max(a);
            if offset > MAX_OBJECT_SIZE {
                self.error(
                    def.name.span,
                    format!("`struct {}` is too large", def.name.name),
                );
                offset = 1;
                break;
            }
        }
        let size = offset.div_ceil(align as u64) * align as u64;
        let s = &mut self.structs[id as usize];
        s.fields = fields;
        s.size = (size as u32).max(1);
        s.align = align;
    }

    // ----- types -----

    /// Resolves a written type. `param`: an outermost `[]`/`[n]` becomes a pointer.
    fn resolve_type(&mut self, te: &ast::TypeExpr, param: bool) -> R<Type> {
        let mut t = match &te.base {
            BaseType::Int => Type::Int,
            BaseType::Char => Type::Char,
            BaseType::Double => Type::Double,
            BaseType::Void => Type::Void,
            BaseType::Struct(name) => match self.struct_ids.get(&name.name) {
                Some(&id) => Type::Struct(id),
                None => return self.fail(name.span, format!("unknown struct `{}`", name.name)),
            },
        };
        for _ in 0..te.pointers {
            t = Type::ptr(t);
        }
        // `int a[2][3]` is an array of 2 arrays of 3 ints: apply dimensions innermost first.
        for (i, dim) in te.dims.iter().enumerate().rev() {
            if t == Type::Void {
                return self.fail(te.span, "arrays of `void` are not allowed");
            }
            if i == 0 && param {
                return Ok(Type::ptr(t));
            }
            let Some(dim) = dim else {
                return self.fail(te.span, "array size missing (only parameters may use `[]`)");
            };
            let n = self.const_int(dim)?;
            if n <= 0 {
                return self.fail(dim.span, "array size must be positive");
            }
            let total = n as u64 * self.size(&t) as u64;
            if n > i32::MAX as i64 || total > MAX_OBJECT_SIZE {
                return self.fail(dim.span, "array is too large");
            }
            t = Type::Array(Box::new(t), n as u32);
        }
        Ok(t)
    }

    /// Evaluates an array size: integer literals, `sizeof(type)` and arithmetic on them.
    fn const_int(&mut self, e: &ast::Expr) -> R<i64> {
        let vla = "variable-length arrays are not part of C--; the array size must be a constant";
        let v = match &e.kind {
            AK::IntLit(v) | AK::CharLit(v) => *v as i64,
            AK::SizeofType(te) => {
                let t = self.resolve_type(te, false)?;
                self.sizeof_type(&t, e.span)? as i64
            }
            AK::Unary(UnOp::Neg, a) => -self.const_int(a)?,
            AK::Unary(UnOp::Plus, a) => self.const_int(a)?,
            AK::Binary(op, a, b) => {
                let (a, b) = (self.const_int(a)?, self.const_int(b)?);
                let r = match op {
                    BinOp::Add => a.checked_add(b),
                    BinOp::Sub => a.checked_sub(b),
                    BinOp::Mul => a.checked_mul(b),
                    BinOp::Div => a.checked_div(b),
                    BinOp::Rem => a.checked_rem(b),
                    _ => return self.fail(e.span, vla),
                };
                match r {
                    Some(v) if v.abs() <= u32::MAX as i64 => v,
                    _ => return self.fail(e.span, "invalid constant in array size"),
                }
            }
            _ => return self.fail(e.span, vla),
        };
        Ok(v)
    }

    fn sizeof_type(&mut self, t: &Type, span: Span) -> R<u32> {
        if *t == Type::Void {
            return self.fail(span, "invalid application of `sizeof` to `void`");
        }
        Ok(self.size(t))
    }

    /// A variable's type: not void.
    fn var_type(&mut self, d: &ast::VarDecl) -> R<Type> {
        let t = self.resolve_type(&d.ty, false)?;
        if t == Type::Void {
            return self.fail(
                d.name.span,
                format!("variable `{}` declared void", d.name.name),
            );
        }
        Ok(t)
    }

    fn signature(&mut self, sig: &ast::FuncSig, is_extern: bool) -> (Vec<Type>, Type, bool) {
        let mut bad = false;
        let ret = match self.resolve_type(&sig.ret, false) {
            Ok(t @ Type::Struct(_)) => {
                self.error(
                    sig.name.span,
                    "returning structs by value is not supported by C--",
                );
                bad = true;
                t
            }
            Ok(t) => t,
            Err(Reported) => {
                bad = true;
                Type::Int
            }
        };
        let mut params = Vec::new();
        let mut seen = HashSet::new();
        for p in &sig.params {
            if let Some(n) = &p.name {
                if !seen.insert(n.name.clone()) {
                    self.error(n.span, format!("redefinition of parameter `{}`", n.name));
                    bad = true;
                }
            } else if !is_extern {
                self.error(p.span, "parameter name omitted in a function definition");
                bad = true;
            }
            match self.resolve_type(&p.ty, true) {
                Ok(Type::Void) => {
                    self.error(p.span, "parameter declared `void`");
                    bad = true;
                    params.push(Type::Int);
                }
                Ok(Type::Struct(_)) => {
                    self.error(p.span, "passing structs by value is not supported by C--");
                    bad = true;
                    params.push(Type::Int);
                }
                Ok(t) => params.push(t),
                Err(Reported) => {
                    bad = true;
                    params.push(Type::Int);
                }
            }
        }
        if sig.variadic && !is_extern {
            self.error(
                sig.name.span,
                "variadic functions (`...`) can only be declared `extern` in C--",
            );
            bad = true;
        }
        (params, ret, bad)
    }

    // ----- top-level names -----

    fn bind(&mut self, name: &ast::Ident, what: Name) -> bool {
        if let Some(&(_, prev)) = self.names.get(&name.name) {
            let d = Diagnostic::error(name.span, format!("redefinition of `{}`", name.name))
                .with_note(prev, "previous definition is here");
            self.diags.push(d);
            return false;
        }
        self.names.insert(name.name.clone(), (what, name.span));
        true
    }

    fn declare_names(&mut self, unit: &ast::TranslationUnit) {
        // C-- functions get ids in definition order, matching `Program::functions`.
        for item in &unit.items {
            if let ast::Item::Function(f) = item {
                let (params, ret, bad) = self.signature(&f.sig, false);
                let id = self.funcs.len() as FuncId;
                self.funcs.push(FnSig {
                    name: f.sig.name.name.clone(),
                    params,
                    ret,
                    span: f.sig.span,
                    bad,
                });
                if !self.bind(&f.sig.name, Name::Func(id)) {
                    self.funcs[id as usize].bad = true;
                }
            }
        }
        for item in &unit.items {
            match item {
                ast::Item::FuncDecl {
                    sig,
                    is_extern: true,
                } => {
                    let (params, ret, _) = self.signature(sig, true);
                    let ext = Extern {
                        name: sig.name.name.clone(),
                        params,
                        variadic: sig.variadic,
                        ret,
                        span: sig.span,
                    };
                    if let Some(&(Name::Extern(prev), _)) = self.names.get(&sig.name.name) {
                        let p = &self.externs[prev as usize];
                        if p.params != ext.params || p.ret != ext.ret || p.variadic != ext.variadic
                        {
                            self.error(
                                sig.name.span,
                                format!("conflicting types for `{}`", sig.name.name),
                            );
                        }
                        continue;
                    }
                    let id = self.externs.len() as u32;
                    if self.bind(&sig.name, Name::Extern(id)) {
                        self.externs.push(ext);
                    }
                }
                ast::Item::Global(d) => {
                    let ty = self.var_type(d);
                    let id = self.globals.len() as u32;
                    if !self.bind(&d.name, Name::Global(id)) {
                        continue;
                    }
                    if ty.is_err() {
                        self.bad_globals.insert(id);
                    }
                    let ty = ty.unwrap_or(Type::Int);
                    let size = self.size(&ty);
                    let align = align_of_object(&ty, &self.structs, self.target);
                    self.globals.push(Global {
                        name: d.name.name.clone(),
                        ty,
                        size,
                        align,
                        span: d.span,
                    });
                }
                _ => {}
            }
        }
    }

    /// `T f(params);` without `extern` must match a C-- function defined in the file.
    fn check_prototypes(&mut self, unit: &ast::TranslationUnit) {
        for item in &unit.items {
            let ast::Item::FuncDecl {
                sig,
                is_extern: false,
            } = item
            else {
                continue;
            };
            let (params, ret, bad) = self.signature(sig, false);
            match self.names.get(&sig.name.name) {
                Some(&(Name::Func(id), _)) => {
                    let f = &self.funcs[id as usize];
                    if !bad && !f.bad && (f.params != params || f.ret != ret) {
                        let prev = f.span;
                        let d = Diagnostic::error(
                            sig.name.span,
                            format!("conflicting types for `{}`", sig.name.name),
                        )
                        .with_note(prev, "the definition is here");
                        self.diags.push(d);
                    }
                }
                Some(_) => {
                    self.error(
                        sig.name.span,
                        format!("redefinition of `{}`", sig.name.name),
                    );
                }
                None => self.error(
                    sig.name.span,
                    format!(
                        "function `{}` is declared but never defined; declare C functions with \
                         `extern`",
                        sig.name.name
                    ),
                ),
            }
        }
    }

    fn check_main(&mut self, unit: &ast::TranslationUnit) {
        match self.names.get("main") {
            Some(&(Name::Func(id), _)) => {
                let f = &self.funcs[id as usize];
                let argv = Type::ptr(Type::ptr(Type::Char));
                let ok = f.ret == Type::Int
                    && (f.params.is_empty() || f.params == [Type::Int, argv.clone()]);
                if !ok && !f.bad {
                    let span = f.span;
                    self.error(
                        span,
                        "`main` must be `int main()` or `int main(int argc, char **argv)`",
                    );
                }
            }
            Some(&(_, span)) => self.error(span, "`main` must be a function defined in C--"),
            None => {
                let end = unit.items.last().map_or(Span::new(0, 0), |i| match i {
                    ast::Item::Function(f) => f.span,
                    ast::Item::Struct(s) => s.span,
                    ast::Item::Global(g) => g.span,
                    ast::Item::FuncDecl { sig, .. } => sig.span,
                });
                self.error(
                    Span::new(end.end as usize, end.end as usize),
                    "no `main` function",
                );
            }
        }
    }

    // ----- functions and statements -----

    fn function(&mut self, f: &ast::FuncDef, id: FuncId) -> Function {
        self.locals.clear();
        self.bad_locals.clear();
        self.scopes = vec![HashMap::new()];
        self.loops = 0;
        let sig = &self.funcs[id as usize];
        self.ret = sig.ret.clone();
        self.fn_name = sig.name.clone();
        let param_types = sig.params.clone();
        let bad_sig = sig.bad;
        for (p, ty) in f.sig.params.iter().zip(param_types) {
            let name = p.name.clone().unwrap_or(ast::Ident {
                name: String::new(),
                span: p.span,
            });
            let lid = self.add_local(&name, ty, p.span);
            if bad_sig {
                self.bad_locals.insert(lid);
            }
        }
        let param_count = self.locals.len() as u32;
        let body = self.stmts(&f.body.stmts);
        Function {
            name: f.sig.name.name.clone(),
            param_count,
            ret: self.ret.clone(),
            locals: std::mem::take(&mut self.locals),
            body,
            span: f.span,
        }
    }

    fn add_local(&mut self, name: &ast::Ident, ty: Type, span: Span) -> LocalId {
        let id = self.locals.len() as LocalId;
        let scope = self.scopes.last_mut().expect("a scope is open");
        if !name.name.is_empty() {
            if let Some(&prev) = scope.get(&name.name) {
                let prev_span = self.locals[prev as usize].span;
                let d = Diagnostic::error(name.span, format!("redefinition of `{}`", name.name))
                    .with_note(prev_span, "previous definition is here");
                self.diags.push(d);
            }
            scope.insert(name.name.clone(), id);
        }
        let size = self.size(&ty);
        let align = align_of_object(&ty, &self.structs, self.target);
        let needs_memory = matches!(ty, Type::Array(..) | Type::Struct(_));
        self.locals.push(Local {
            name: name.name.clone(),
            ty,
            size,
            align,
            needs_memory,
            span,
        });
        id
    }

    // Statements are returned boxed: it keeps the frames of this mutually recursive group small
    // (`typed::Stmt` is large), so deeply nested statements fit in a 2 MiB stack.

    fn stmt(&mut self, s: &ast::Stmt) -> R<Box<Stmt>> {
        match &s.kind {
            StmtKind::Decl(decls) => self.decl_stmt(decls),
            StmtKind::Expr(e) => self.expr_stmt(e),
            StmtKind::If { cond, then, els } => self.if_stmt(cond, then, els.as_deref()),
            StmtKind::While { cond, body } => self.while_stmt(cond, body),
            StmtKind::DoWhile { body, cond } => self.do_stmt(body, cond),
            StmtKind::For {
                init,
                cond,
                step,
                body,
            } => self.for_stmt(init, cond, step, body),
            StmtKind::Break | StmtKind::Continue => self.jump(s),
            StmtKind::Return(v) => self.return_stmt(v.as_ref(), s.span),
            StmtKind::Block(b) => self.block(b),
            StmtKind::Empty => Ok(Box::new(Stmt::Empty)),
        }
    }

    /// Checks a statement list; empty statements (and declarations) are dropped.
    fn stmts(&mut self, list: &[ast::Stmt]) -> Vec<Stmt> {
        let mut out = Vec::new();
        for s in list {
            if let Ok(s) = self.stmt(s) {
                if *s != Stmt::Empty {
                    out.push(*s);
                }
            }
        }
        out
    }

    fn block(&mut self, b: &ast::Block) -> R<Box<Stmt>> {
        self.scopes.push(HashMap::new());
        let out = self.stmts(&b.stmts);
        self.scopes.pop();
        Ok(Box::new(Stmt::Block(out)))
    }

    fn if_stmt(
        &mut self,
        cond: &ast::Expr,
        then: &ast::Stmt,
        els: Option<&ast::Stmt>,
    ) -> R<Box<Stmt>> {
        let c = self.cond(cond).map(Box::new);
        let t = self.stmt(then);
        let e = els.map(|e| self.stmt(e)).transpose();
        Ok(Box::new(Stmt::If {
            cond: *c?,
            then: t?,
            els: e?,
        }))
    }

    fn while_stmt(&mut self, cond: &ast::Expr, body: &ast::Stmt) -> R<Box<Stmt>> {
        let c = self.cond(cond).map(Box::new);
        let body = self.loop_body(body);
        Ok(Box::new(Stmt::While {
            cond: *c?,
            body: body?,
        }))
    }

    fn do_stmt(&mut self, body: &ast::Stmt, cond: &ast::Expr) -> R<Box<Stmt>> {
        let body = self.loop_body(body);
        let c = self.cond(cond).map(Box::new);
        Ok(Box::new(Stmt::DoWhile {
            body: body?,
            cond: *c?,
        }))
    }

    fn loop_body(&mut self, body: &ast::Stmt) -> R<Box<Stmt>> {
        self.loops += 1;
        let r = self.stmt(body);
        self.loops -= 1;
        r
    }

    fn for_stmt(
        &mut self,
        init: &Option<Box<ast::Expr>>,
        cond: &Option<Box<ast::Expr>>,
        step: &Option<Box<ast::Expr>>,
        body: &ast::Stmt,
    ) -> R<Box<Stmt>> {
        let header = self.for_header(init, cond, step).map(Box::new);
        let body = self.loop_body(body);
        let (init, cond, step) = *header?;
        Ok(Box::new(Stmt::For {
            init,
            cond,
            step,
            body: body?,
        }))
    }

    #[allow(clippy::type_complexity)]
    #[inline(never)]
    fn for_header(
        &mut self,
        init: &Option<Box<ast::Expr>>,
        cond: &Option<Box<ast::Expr>>,
        step: &Option<Box<ast::Expr>>,
    ) -> R<(Option<Expr>, Option<Expr>, Option<Expr>)> {
        let init = init.as_ref().map(|e| self.any_value(e)).transpose();
        let cond = cond.as_ref().map(|e| self.cond(e)).transpose();
        let step = step.as_ref().map(|e| self.any_value(e)).transpose();
        Ok((init?, cond?, step?))
    }

    #[inline(never)]
    fn jump(&mut self, s: &ast::Stmt) -> R<Box<Stmt>> {
        let brk = matches!(s.kind, StmtKind::Break);
        if self.loops == 0 {
            let kw = if brk { "break" } else { "continue" };
            return self.fail(s.span, format!("`{kw}` statement not within a loop"));
        }
        Ok(Box::new(if brk { Stmt::Break } else { Stmt::Continue }))
    }

    #[inline(never)]
    fn decl_stmt(&mut self, decls: &[ast::VarDecl]) -> R<Box<Stmt>> {
        for d in decls {
            let ty = self.var_type(d);
            let id = self.add_local(&d.name, ty.clone().unwrap_or(Type::Int), d.span);
            if ty.is_err() {
                self.bad_locals.insert(id);
            }
        }
        Ok(Box::new(Stmt::Empty))
    }

    fn expr_stmt(&mut self, e: &ast::Expr) -> R<Box<Stmt>> {
        Ok(Box::new(Stmt::Expr(self.any_value(e)?)))
    }

    #[inline(never)]
    fn return_stmt(&mut self, v: Option<&ast::Expr>, span: Span) -> R<Box<Stmt>> {
        let ret = self.ret.clone();
        if let Type::Struct(_) = ret {
            // The signature was already reported as returning a struct by value.
            return Err(Reported);
        }
        match v {
            None if ret != Type::Void => {
                let msg = format!(
                    "`return` with no value in function `{}` returning `{}`",
                    self.fn_name,
                    self.ty_name(&ret)
                );
                self.fail(span, msg)
            }
            None => Ok(Box::new(Stmt::Return(None))),
            Some(e) if ret == Type::Void => {
                let msg = format!(
                    "`return` with a value in function `{}` returning void",
                    self.fn_name
                );
                self.fail(e.span, msg)
            }
            Some(e) => {
                let v = self.rvalue(e)?;
                let what = format!("returning from function `{}`", self.fn_name);
                let v = self.assign_conv(v, &ret, e.span, &what)?;
                Ok(Box::new(Stmt::Return(Some(v))))
            }
        }
    }

    /// A condition: a scalar value.
    fn cond(&mut self, e: &ast::Expr) -> R<Expr> {
        let v = self.rvalue(e)?;
        self.require_scalar(v, "a condition")
    }

    #[inline(never)]
    fn require_scalar(&mut self, v: Expr, what: &str) -> R<Expr> {
        if v.ty.is_scalar() {
            return Ok(v);
        }
        let msg = if v.ty == Type::Void {
            "void value not ignored as it ought to be".to_string()
        } else {
            format!("{what} needs a scalar value, not `{}`", self.ty_name(&v.ty))
        };
        self.fail(v.span, msg)
    }

    // ----- expressions -----

    /// Any expression evaluated for its effect (statement, `for` clauses, left of a comma).
    fn any_value(&mut self, e: &ast::Expr) -> R<Expr> {
        let v = self.expr(e)?;
        match v {
            Val::Value(v) => Ok(v),
            Val::Place(p) if matches!(p.ty, Type::Struct(_)) => Ok(self.addr_of(p)),
            Val::Place(p) => Ok(self.place_rvalue(p)),
        }
    }

    /// An rvalue: arrays decay to pointers, scalars are loaded; structs are errors.
    fn rvalue(&mut self, e: &ast::Expr) -> R<Expr> {
        let v = self.expr(e)?;
        self.val_rvalue(v)
    }

    fn val_rvalue(&mut self, v: Val) -> R<Expr> {
        match v {
            Val::Value(v) => Ok(v),
            Val::Place(p) if matches!(p.ty, Type::Struct(_)) => {
                let msg = format!(
                    "a `{}` cannot be used as a value here (structs can only be assigned whole \
                     or accessed by member)",
                    self.ty_name(&p.ty)
                );
                self.fail(p.span, msg)
            }
            Val::Place(p) => Ok(self.place_rvalue(p)),
        }
    }

    fn place_rvalue(&mut self, p: Place) -> Expr {
        let span = p.span;
        match &p.ty {
            Type::Array(elem, _) => {
                let ty = Type::ptr((**elem).clone());
                self.mark_address_taken(&p);
                Expr {
                    kind: ExprKind::AddrOf(Box::new(p)),
                    ty,
                    span,
                }
            }
            t => {
                let ty = t.clone();
                Expr {
                    kind: ExprKind::Load(Box::new(p)),
                    ty,
                    span,
                }
            }
        }
    }

    fn addr_of(&mut self, p: Place) -> Expr {
        self.mark_address_taken(&p);
        let span = p.span;
        let ty = Type::ptr(p.ty.clone());
        Expr {
            kind: ExprKind::AddrOf(Box::new(p)),
            ty,
            span,
        }
    }

    fn mark_address_taken(&mut self, p: &Place) {
        let mut p = p;
        loop {
            match &p.kind {
                PlaceKind::Local(id) => {
                    if let Some(l) = self.locals.get_mut(*id as usize) {
                        l.needs_memory = true;
                    }
                    return;
                }
                PlaceKind::Member(inner, _) => p = inner,
                PlaceKind::Global(_) | PlaceKind::Deref(_) => return,
            }
        }
    }

    fn expr(&mut self, e: &ast::Expr) -> R<Val> {
        let span = e.span;
        match &e.kind {
            AK::Name(id) => self.name(id),
            AK::Unary(op, a) => self.unary(*op, a, span),
            AK::Binary(op, a, b) => self.binary(*op, a, b, span),
            AK::Assign(a, b) => self.assign(a, b, span),
            AK::Comma(a, b) => self.comma(a, b, span),
            AK::Cast(te, a) => self.cast(te, a, span),
            AK::Index(a, b) => self.index(a, b, span),
            AK::Member(a, f) => self.member(a, f, span),
            AK::Arrow(a, f) => self.arrow(a, f, span),
            AK::Call(f, args) => self.call(f, args, span),
            _ => self.leaf(e),
        }
    }

    /// Expressions without subexpressions.
    #[inline(never)]
    fn leaf(&mut self, e: &ast::Expr) -> R<Val> {
        let span = e.span;
        let (kind, ty) = match &e.kind {
            AK::IntLit(v) | AK::CharLit(v) => (ExprKind::IntConst(*v), Type::Int),
            AK::DoubleLit(v) => (ExprKind::DoubleConst(*v), Type::Double),
            AK::StrLit(bytes) => {
                let id = match self.string_ids.get(bytes) {
                    Some(&id) => id,
                    None => {
                        let id = self.strings.len() as StringId;
                        self.strings.push(bytes.clone());
                        self.string_ids.insert(bytes.clone(), id);
                        id
                    }
                };
                (ExprKind::StringLit(id), Type::ptr(Type::Char))
            }
            AK::Null => (ExprKind::Null, Type::ptr(Type::Void)),
            AK::SizeofType(te) => {
                let t = self.resolve_type(te, false)?;
                let n = self.sizeof_type(&t, span)?;
                (ExprKind::IntConst(n as i32), Type::Int)
            }
            AK::StackSizeof(name) => match self.lookup(&name.name) {
                Some(Lookup::Global(Name::Func(id))) => (ExprKind::StackSizeOf(id), Type::Int),
                _ => {
                    return self.fail(
                        name.span,
                        format!(
                            "`stacksizeof` needs the name of a C-- function; `{}` is not one",
                            name.name
                        ),
                    )
                }
            },
            // Only present when the parser reported an error; sema does not run then.
            _ => return Err(Reported),
        };
        Ok(Val::Value(Expr { kind, ty, span }))
    }

    fn lookup(&self, name: &str) -> Option<Lookup> {
        for scope in self.scopes.iter().rev() {
            if let Some(&id) = scope.get(name) {
                return Some(Lookup::Local(id));
            }
        }
        self.names.get(name).map(|&(n, _)| Lookup::Global(n))
    }

    #[inline(never)]
    fn name(&mut self, id: &ast::Ident) -> R<Val> {
        let span = id.span;
        match self.lookup(&id.name) {
            Some(Lookup::Local(l)) => {
                if self.bad_locals.contains(&l) {
                    return Err(Reported);
                }
                let ty = self.locals[l as usize].ty.clone();
                Ok(Val::Place(Place {
                    kind: PlaceKind::Local(l),
                    ty,
                    span,
                }))
            }
            Some(Lookup::Global(Name::Global(g))) => {
                if self.bad_globals.contains(&g) {
                    return Err(Reported);
                }
                let ty = self.globals[g as usize].ty.clone();
                Ok(Val::Place(Place {
                    kind: PlaceKind::Global(g),
                    ty,
                    span,
                }))
            }
            Some(Lookup::Global(Name::Func(f))) => Ok(Val::Value(Expr {
                kind: ExprKind::FuncAddr(f),
                ty: int(),
                span,
            })),
            Some(Lookup::Global(Name::Extern(_))) => self.fail(
                span,
                format!(
                    "extern function `{}` cannot be used as a value; only the names of C-- \
                     functions are values (of type `int`)",
                    id.name
                ),
            ),
            None => self.fail(span, format!("undeclared identifier `{}`", id.name)),
        }
    }

    fn unary(&mut self, op: UnOp, a: &ast::Expr, span: Span) -> R<Val> {
        match op {
            UnOp::AddrOf => {
                let v = self.expr(a)?;
                self.addr_of_val(v, a, span)
            }
            UnOp::Deref => {
                let v = self.rvalue(a)?;
                self.deref(v, span)
            }
            _ => {
                let v = self.rvalue(a)?;
                self.unary_value(op, v, span)
            }
        }
    }

    #[inline(never)]
    fn addr_of_val(&mut self, v: Val, a: &ast::Expr, span: Span) -> R<Val> {
        match v {
            Val::Place(p) => {
                let mut e = self.addr_of(p);
                e.span = span;
                Ok(Val::Value(e))
            }
            Val::Value(_) => {
                let msg = if let AK::Name(n) = &a.kind {
                    format!(
                        "cannot take the address of function `{}`; in C-- its name alone is its \
                         address (an `int`)",
                        n.name
                    )
                } else {
                    "lvalue required as unary `&` operand".to_string()
                };
                self.fail(a.span, msg)
            }
        }
    }

    #[inline(never)]
    fn deref(&mut self, v: Expr, span: Span) -> R<Val> {
        match &v.ty {
            Type::Pointer(t) if **t == Type::Void => self.fail(
                span,
                "dereferencing a `void *` pointer; cast it to a typed pointer",
            ),
            Type::Pointer(t) => {
                let ty = (**t).clone();
                Ok(Val::Place(Place {
                    kind: PlaceKind::Deref(Box::new(v)),
                    ty,
                    span,
                }))
            }
            t => {
                let msg = format!(
                    "invalid type argument of unary `*` (have `{}`)",
                    self.ty_name(t)
                );
                self.fail(span, msg)
            }
        }
    }

    #[inline(never)]
    fn unary_value(&mut self, op: UnOp, v: Expr, span: Span) -> R<Val> {
        let (sym, ok) = match op {
            UnOp::Neg | UnOp::Plus => ("-", v.ty.is_arithmetic()),
            UnOp::BitNot => ("~", v.ty.is_integer()),
            _ => ("!", v.ty.is_scalar()),
        };
        if !ok {
            let sym = if op == UnOp::Plus { "+" } else { sym };
            let msg = format!(
                "invalid operand to unary `{sym}` (have `{}`)",
                self.ty_name(&v.ty)
            );
            return self.fail(span, msg);
        }
        let e = match op {
            UnOp::Not => Expr {
                kind: ExprKind::Unary(UnaryOp::LogNot, Box::new(v)),
                ty: int(),
                span,
            },
            UnOp::Plus => {
                let mut e = self.promote(v);
                e.span = span;
                e
            }
            _ => {
                let v = self.promote(v);
                let ty = v.ty.clone();
                let uop = if op == UnOp::Neg {
                    UnaryOp::Neg
                } else {
                    UnaryOp::BitNot
                };
                Expr {
                    kind: ExprKind::Unary(uop, Box::new(v)),
                    ty,
                    span,
                }
            }
        };
        Ok(Val::Value(e))
    }

    /// Integer promotion: `char` to `int`.
    fn promote(&mut self, v: Expr) -> Expr {
        if v.ty == Type::Char {
            self.convert(v, Type::Int)
        } else {
            v
        }
    }

    /// An explicit conversion node (none if the type is already right).
    fn convert(&mut self, v: Expr, to: Type) -> Expr {
        if v.ty == to {
            return v;
        }
        let span = v.span;
        if matches!(v.kind, ExprKind::Null) && to.is_pointer() {
            return Expr {
                kind: ExprKind::Null,
                ty: to,
                span,
            };
        }
        Expr {
            kind: ExprKind::Convert(Box::new(v)),
            ty: to,
            span,
        }
    }

    fn binary(&mut self, op: BinOp, a: &ast::Expr, b: &ast::Expr, span: Span) -> R<Val> {
        let l = self.rvalue(a);
        let r = self.rvalue(b);
        let (l, r) = (l?, r?);
        self.binary_typed(op, l, r, span).map(Val::Value)
    }

    #[inline(never)]
    fn binary_typed(&mut self, op: BinOp, l: Expr, r: Expr, span: Span) -> R<Expr> {
        use BinOp as B;
        let mk = |kind, ty| Expr { kind, ty, span };
        match op {
            B::LogAnd | B::LogOr => {
                if !l.ty.is_scalar() || !r.ty.is_scalar() {
                    return self.bad_operands(op, &l.ty, &r.ty, span);
                }
                let kind = if op == B::LogAnd {
                    ExprKind::LogicalAnd(Box::new(l), Box::new(r))
                } else {
                    ExprKind::LogicalOr(Box::new(l), Box::new(r))
                };
                Ok(mk(kind, int()))
            }
            B::Add | B::Sub if l.ty.is_pointer() || r.ty.is_pointer() => {
                self.pointer_arith(op, l, r, span)
            }
            B::Add | B::Sub | B::Mul | B::Div => {
                if !l.ty.is_arithmetic() || !r.ty.is_arithmetic() {
                    return self.bad_operands(op, &l.ty, &r.ty, span);
                }
                let (l, r, ty) = self.usual_conversions(l, r);
                let bop = match op {
                    B::Add => BinaryOp::Add,
                    B::Sub => BinaryOp::Sub,
                    B::Mul => BinaryOp::Mul,
                    _ => BinaryOp::Div,
                };
                Ok(mk(ExprKind::Binary(bop, Box::new(l), Box::new(r)), ty))
            }
            B::Rem | B::Shl | B::Shr | B::BitAnd | B::BitOr | B::BitXor => {
                if !l.ty.is_integer() || !r.ty.is_integer() {
                    return self.bad_operands(op, &l.ty, &r.ty, span);
                }
                let (l, r) = (self.promote(l), self.promote(r));
                let bop = match op {
                    B::Rem => BinaryOp::Rem,
                    B::Shl => BinaryOp::Shl,
                    B::Shr => BinaryOp::Shr,
                    B::BitAnd => BinaryOp::BitAnd,
                    B::BitOr => BinaryOp::BitOr,
                    _ => BinaryOp::BitXor,
                };
                Ok(mk(ExprKind::Binary(bop, Box::new(l), Box::new(r)), int()))
            }
            B::Eq | B::Ne | B::Lt | B::Le | B::Gt | B::Ge => self.comparison(op, l, r, span),
        }
    }

    fn bad_operands<T>(&mut self, op: BinOp, l: &Type, r: &Type, span: Span) -> R<T> {
        let msg = if *l == Type::Void || *r == Type::Void {
            "void value not ignored as it ought to be".to_string()
        } else {
            format!(
                "invalid operands to binary `{}` (have `{}` and `{}`)",
                op.symbol(),
                self.ty_name(l),
                self.ty_name(r)
            )
        };
        self.fail(span, msg)
    }

    /// Converts both operands to their common arithmetic type (`int` or `double`).
    fn usual_conversions(&mut self, l: Expr, r: Expr) -> (Expr, Expr, Type) {
        let ty = if l.ty == Type::Double || r.ty == Type::Double {
            Type::Double
        } else {
            int()
        };
        (self.convert(l, ty.clone()), self.convert(r, ty.clone()), ty)
    }

    fn elem_size(&mut self, ptr: &Type, span: Span) -> R<u32> {
        match ptr.pointee() {
            Some(t) => Ok(self.size(t)),
            None => self.fail(span, "pointer arithmetic needs a pointer"),
        }
    }

    fn pointer_arith(&mut self, op: BinOp, l: Expr, r: Expr, span: Span) -> R<Expr> {
        if op == BinOp::Sub && l.ty.is_pointer() && r.ty.is_pointer() {
            if l.ty != r.ty {
                return self.bad_operands(op, &l.ty, &r.ty, span);
            }
            let elem_size = self.elem_size(&l.ty, span)?;
            let kind = ExprKind::PtrDiff {
                lhs: Box::new(l),
                rhs: Box::new(r),
                elem_size,
            };
            return Ok(Expr {
                kind,
                ty: int(),
                span,
            });
        }
        let swapped = !l.ty.is_pointer();
        if !(if swapped { &l.ty } else { &r.ty }).is_integer() || (swapped && op == BinOp::Sub) {
            // `p + q`, `p + 1.5`, `i - p`
            return self.bad_operands(op, &l.ty, &r.ty, span);
        }
        let (ptr, index) = if swapped { (r, l) } else { (l, r) };
        let index = self.promote(index);
        let elem_size = self.elem_size(&ptr.ty, span)?;
        let ty = ptr.ty.clone();
        let kind = ExprKind::PtrOffset {
            ptr: Box::new(ptr),
            index: Box::new(index),
            elem_size,
            subtract: op == BinOp::Sub,
        };
        Ok(Expr { kind, ty, span })
    }

    fn comparison(&mut self, op: BinOp, l: Expr, r: Expr, span: Span) -> R<Expr> {
        let bop = match op {
            BinOp::Eq => BinaryOp::Eq,
            BinOp::Ne => BinaryOp::Ne,
            BinOp::Lt => BinaryOp::Lt,
            BinOp::Le => BinaryOp::Le,
            BinOp::Gt => BinaryOp::Gt,
            _ => BinaryOp::Ge,
        };
        let (l, r) = if l.ty.is_arithmetic() && r.ty.is_arithmetic() {
            let (l, r, _) = self.usual_conversions(l, r);
            (l, r)
        } else if l.ty.is_pointer() && r.ty.is_pointer() {
            let (lp, rp) = (l.ty.pointee().cloned(), r.ty.pointee().cloned());
            if l.ty == r.ty {
                (l, r)
            } else if rp == Some(Type::Void) || matches!(r.kind, ExprKind::Null) {
                let t = l.ty.clone();
                (l, self.convert(r, t))
            } else if lp == Some(Type::Void) {
                let t = r.ty.clone();
                (self.convert(l, t), r)
            } else {
                let msg = format!(
                    "comparison of distinct pointer types (`{}` and `{}`) needs a cast",
                    self.ty_name(&l.ty),
                    self.ty_name(&r.ty)
                );
                return self.fail(span, msg);
            }
        } else if l.ty.is_pointer() && is_null_constant(&r) {
            let t = l.ty.clone();
            let r = Expr {
                kind: ExprKind::Null,
                ty: t,
                span: r.span,
            };
            (l, r)
        } else if r.ty.is_pointer() && is_null_constant(&l) {
            let t = r.ty.clone();
            let l = Expr {
                kind: ExprKind::Null,
                ty: t,
                span: l.span,
            };
            (l, r)
        } else if (l.ty.is_pointer() && r.ty.is_integer())
            || (r.ty.is_pointer() && l.ty.is_integer())
        {
            return self.fail(
                span,
                format!(
                    "comparison between pointer and integer (`{}` and `{}`) needs a cast",
                    self.ty_name(&l.ty),
                    self.ty_name(&r.ty)
                ),
            );
        } else {
            return self.bad_operands(op, &l.ty, &r.ty, span);
        };
        Ok(Expr {
            kind: ExprKind::Binary(bop, Box::new(l), Box::new(r)),
            ty: int(),
            span,
        })
    }

    /// Converts a value for storing into a place of type `to` (assignment, argument, return).
    #[inline(never)]
    fn assign_conv(&mut self, v: Expr, to: &Type, span: Span, what: &str) -> R<Expr> {
        let from = v.ty.clone();
        if from == *to {
            return Ok(v);
        }
        if from == Type::Void {
            return self.fail(span, "void value not ignored as it ought to be");
        }
        if from.is_arithmetic() && to.is_arithmetic() {
            return Ok(self.convert(v, to.clone()));
        }
        if to.is_pointer() && is_null_constant(&v) {
            return Ok(Expr {
                kind: ExprKind::Null,
                ty: to.clone(),
                span: v.span,
            });
        }
        if let (Some(f), Some(t)) = (from.pointee(), to.pointee()) {
            if *f == Type::Void || *t == Type::Void {
                return Ok(self.convert(v, to.clone()));
            }
            let msg = format!(
                "incompatible pointer types ({what}): `{}` from `{}` (add a cast)",
                self.ty_name(to),
                self.ty_name(&from)
            );
            return self.fail(span, msg);
        }
        let msg = if to.is_pointer() && from.is_integer() {
            format!("{what} makes a pointer from an integer without a cast")
        } else if from.is_pointer() && to.is_integer() {
            format!("{what} makes an integer from a pointer without a cast")
        } else {
            format!(
                "incompatible types ({what}): `{}` from `{}`",
                self.ty_name(to),
                self.ty_name(&from)
            )
        };
        self.fail(span, msg)
    }

    fn assign(&mut self, a: &ast::Expr, b: &ast::Expr, span: Span) -> R<Val> {
        let place = self.expr(a);
        let value = self.expr(b);
        let (place, value) = (place?, value?);
        self.assign_typed(place, value, a.span, b.span, span)
            .map(Val::Value)
    }

    #[inline(never)]
    fn assign_typed(
        &mut self,
        place: Val,
        value: Val,
        lspan: Span,
        rspan: Span,
        span: Span,
    ) -> R<Expr> {
        let Val::Place(place) = place else {
            return self.fail(lspan, "lvalue required as left operand of assignment");
        };
        if let Type::Array(..) = place.ty {
            let msg = format!("assignment to an array (`{}`)", self.ty_name(&place.ty));
            return self.fail(lspan, msg);
        }
        if let Type::Struct(_) = place.ty {
            return match value {
                Val::Place(src) if src.ty == place.ty => {
                    let src = self.addr_of(src);
                    let kind = ExprKind::Assign(Box::new(place), Box::new(src));
                    Ok(Expr {
                        kind,
                        ty: Type::Void,
                        span,
                    })
                }
                v => {
                    let vt = match &v {
                        Val::Place(p) => p.ty.clone(),
                        Val::Value(e) => e.ty.clone(),
                    };
                    let msg = format!(
                        "incompatible types when assigning to `{}` from `{}`",
                        self.ty_name(&place.ty),
                        self.ty_name(&vt)
                    );
                    self.fail(rspan, msg)
                }
            };
        }
        let v = self.val_rvalue(value)?;
        let to = place.ty.clone();
        let v = self.assign_conv(v, &to, rspan, "assignment")?;
        Ok(Expr {
            kind: ExprKind::Assign(Box::new(place), Box::new(v)),
            ty: to,
            span,
        })
    }

    fn comma(&mut self, a: &ast::Expr, b: &ast::Expr, span: Span) -> R<Val> {
        let l = self.any_value(a);
        let r = self.rvalue(b);
        let (l, r) = (l?, r?);
        let ty = r.ty.clone();
        Ok(Val::Value(Expr {
            kind: ExprKind::Comma(Box::new(l), Box::new(r)),
            ty,
            span,
        }))
    }

    fn cast(&mut self, te: &ast::TypeExpr, a: &ast::Expr, span: Span) -> R<Val> {
        let to = self.resolve_type(te, false);
        let v = self.rvalue(a);
        let (to, v) = (to?, v?);
        self.cast_typed(to, v, span).map(Val::Value)
    }

    #[inline(never)]
    fn cast_typed(&mut self, to: Type, v: Expr, span: Span) -> R<Expr> {
        let from = v.ty.clone();
        let ok = match (&to, &from) {
            (Type::Void, _) => true,
            (_, Type::Void) => {
                return self.fail(v.span, "void value not ignored as it ought to be");
            }
            (t, f) if t.is_arithmetic() && f.is_arithmetic() => true,
            (t, f) if t.is_pointer() && (f.is_pointer() || f.is_integer()) => true,
            (t, f) if t.is_integer() && f.is_pointer() => true,
            _ => false,
        };
        if !ok {
            let msg = format!(
                "cannot cast `{}` to `{}`",
                self.ty_name(&from),
                self.ty_name(&to)
            );
            return self.fail(span, msg);
        }
        let mut e = if to.is_pointer() && is_null_constant(&v) {
            Expr {
                kind: ExprKind::Null,
                ty: to,
                span,
            }
        } else if from == to {
            v
        } else {
            Expr {
                kind: ExprKind::Convert(Box::new(v)),
                ty: to,
                span,
            }
        };
        e.span = span;
        Ok(e)
    }

    fn index(&mut self, a: &ast::Expr, b: &ast::Expr, span: Span) -> R<Val> {
        let l = self.rvalue(a);
        let r = self.rvalue(b);
        let (l, r) = (l?, r?);
        self.index_typed(l, r, span)
    }

    #[inline(never)]
    fn index_typed(&mut self, l: Expr, r: Expr, span: Span) -> R<Val> {
        let (ptr, idx) = if l.ty.is_pointer() { (l, r) } else { (r, l) };
        if !ptr.ty.is_pointer() || !idx.ty.is_integer() {
            let msg = format!(
                "subscripted value is not an array or pointer, or the index is not an integer \
                 (have `{}` and `{}`)",
                self.ty_name(&ptr.ty),
                self.ty_name(&idx.ty)
            );
            return self.fail(span, msg);
        }
        let elem = ptr.ty.pointee().cloned().unwrap_or(Type::Void);
        if elem == Type::Void {
            return self.fail(
                span,
                "subscripting a `void *` pointer; cast it to a typed pointer",
            );
        }
        let idx = self.promote(idx);
        let elem_size = self.size(&elem);
        let pty = ptr.ty.clone();
        let sum = Expr {
            kind: ExprKind::PtrOffset {
                ptr: Box::new(ptr),
                index: Box::new(idx),
                elem_size,
                subtract: false,
            },
            ty: pty,
            span,
        };
        Ok(Val::Place(Place {
            kind: PlaceKind::Deref(Box::new(sum)),
            ty: elem,
            span,
        }))
    }

    fn member(&mut self, a: &ast::Expr, f: &ast::Ident, span: Span) -> R<Val> {
        let v = self.expr(a)?;
        self.member_typed(v, f, span)
    }

    #[inline(never)]
    fn member_typed(&mut self, v: Val, f: &ast::Ident, span: Span) -> R<Val> {
        match v {
            Val::Place(p) if matches!(p.ty, Type::Struct(_)) => self.field(p, f, span),
            Val::Place(Place { ty, .. }) | Val::Value(Expr { ty, .. }) => {
                let hint = if ty.pointee().is_some_and(|t| matches!(t, Type::Struct(_))) {
                    " (it is a pointer; did you mean `->`?)"
                } else {
                    ""
                };
                let msg = format!(
                    "request for member `{}` in something that is not a struct (`{}`){hint}",
                    f.name,
                    self.ty_name(&ty)
                );
                self.fail(f.span, msg)
            }
        }
    }

    fn field(&mut self, p: Place, f: &ast::Ident, span: Span) -> R<Val> {
        let Type::Struct(id) = p.ty else {
            return Err(Reported);
        };
        let def = &self.structs[id as usize];
        match def.fields.iter().find(|x| x.name == f.name) {
            Some(field) => {
                let (ty, off) = (field.ty.clone(), field.offset);
                Ok(Val::Place(Place {
                    kind: PlaceKind::Member(Box::new(p), off),
                    ty,
                    span,
                }))
            }
            None => {
                let msg = format!("`struct {}` has no member named `{}`", def.name, f.name);
                self.fail(f.span, msg)
            }
        }
    }

    fn arrow(&mut self, a: &ast::Expr, f: &ast::Ident, span: Span) -> R<Val> {
        let v = self.rvalue(a)?;
        self.arrow_typed(v, f, span)
    }

    #[inline(never)]
    fn arrow_typed(&mut self, v: Expr, f: &ast::Ident, span: Span) -> R<Val> {
        match v.ty.pointee() {
            Some(t @ Type::Struct(_)) => {
                let ty = t.clone();
                let pspan = v.span;
                let p = Place {
                    kind: PlaceKind::Deref(Box::new(v)),
                    ty,
                    span: pspan,
                };
                self.field(p, f, span)
            }
            _ => {
                let msg = format!(
                    "invalid type argument of `->` (have `{}`; it needs a pointer to a struct)",
                    self.ty_name(&v.ty)
                );
                self.fail(f.span, msg)
            }
        }
    }

    fn call(&mut self, f: &ast::Expr, args: &[ast::Expr], span: Span) -> R<Val> {
        let (callee, name) = self.callee(f)?;
        let mut vals = Vec::with_capacity(args.len());
        let mut failed = false;
        for a in args {
            match self.rvalue(a) {
                Ok(v) => vals.push(v),
                Err(Reported) => failed = true,
            }
        }
        if failed {
            return Err(Reported);
        }
        self.call_typed(callee, name, vals, args, span)
    }

    #[inline(never)]
    fn callee(&mut self, f: &ast::Expr) -> R<(Callee, String)> {
        let AK::Name(id) = &f.kind else {
            return self.fail(
                f.span,
                "calls through function pointers are not part of C--; only named functions can \
                 be called",
            );
        };
        match self.lookup(&id.name) {
            Some(Lookup::Global(Name::Func(fid))) => Ok((Callee::Function(fid), id.name.clone())),
            Some(Lookup::Global(Name::Extern(e))) => Ok((Callee::Extern(e), id.name.clone())),
            Some(_) => self.fail(
                id.span,
                format!(
                    "called object `{}` is not a function (calls through function pointers are \
                     not part of C--)",
                    id.name
                ),
            ),
            None => self.fail(
                id.span,
                format!(
                    "call to undeclared function `{}`; declare it with `extern`",
                    id.name
                ),
            ),
        }
    }

    #[inline(never)]
    fn call_typed(
        &mut self,
        callee: Callee,
        name: String,
        vals: Vec<Expr>,
        args: &[ast::Expr],
        span: Span,
    ) -> R<Val> {
        let (params, ret, variadic, bad) = match callee {
            Callee::Function(id) => {
                let f = &self.funcs[id as usize];
                (f.params.clone(), f.ret.clone(), false, f.bad)
            }
            Callee::Extern(id) => {
                let e = &self.externs[id as usize];
                (e.params.clone(), e.ret.clone(), e.variadic, false)
            }
        };
        if bad {
            return Err(Reported);
        }
        if vals.len() < params.len() || (!variadic && vals.len() > params.len()) {
            let few = vals.len() < params.len();
            let msg = format!(
                "too {} arguments to function `{name}` (expected {}{}, have {})",
                if few { "few" } else { "many" },
                if variadic { "at least " } else { "" },
                params.len(),
                vals.len()
            );
            return self.fail(span, msg);
        }
        let mut out = Vec::with_capacity(vals.len());
        let mut failed = false;
        for (i, v) in vals.into_iter().enumerate() {
            let aspan = args.get(i).map_or(span, |a| a.span);
            let r = match params.get(i) {
                Some(p) => {
                    let what = format!("passing argument {} of `{name}`", i + 1);
                    self.assign_conv(v, p, aspan, &what)
                }
                None => self.vararg(v, aspan),
            };
            match r {
                Ok(v) => out.push(v),
                Err(Reported) => failed = true,
            }
        }
        if failed {
            return Err(Reported);
        }
        Ok(Val::Value(Expr {
            kind: ExprKind::Call { callee, args: out },
            ty: ret,
            span,
        }))
    }

    /// A variadic argument: `char` is promoted to `int`; doubles and pointers pass unchanged.
    fn vararg(&mut self, v: Expr, span: Span) -> R<Expr> {
        match v.ty {
            Type::Void => self.fail(span, "void value not ignored as it ought to be"),
            Type::Char => Ok(self.convert(v, Type::Int)),
            _ => Ok(v),
        }
    }
}

enum Lookup {
    Local(LocalId),
    Global(Name),
}

/// `0` (an integer literal or a cast of one) or `NULL`: convertible to any pointer.
fn is_null_constant(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Null => true,
        ExprKind::IntConst(0) => e.ty.is_integer(),
        _ => false,
    }
}

/// The struct a field contains by value (directly or as array elements).
fn by_value_struct(t: &Type) -> Option<StructId> {
    match t {
        Type::Struct(id) => Some(*id),
        Type::Array(e, _) => by_value_struct(e),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::typed::{Callee, ExprKind as E, PlaceKind as P, Program, Stmt};

    fn program(src: &str, target: TargetInfo) -> Program {
        let unit = crate::parse(src).unwrap_or_else(|d| panic!("parse errors: {d:?}"));
        check(&unit, target).unwrap_or_else(|d| panic!("sema errors: {d:?}"))
    }

    /// The expression of the `n`th expression statement of `main`.
    fn main_expr(p: &Program, n: usize) -> Expr {
        let main = p.functions.iter().find(|f| f.name == "main").expect("main");
        let exprs: Vec<&Expr> = main
            .body
            .iter()
            .filter_map(|s| if let Stmt::Expr(e) = s { Some(e) } else { None })
            .collect();
        exprs[n].clone()
    }

    fn assigned(e: Expr) -> Expr {
        match e.kind {
            E::Assign(_, v) => *v,
            k => panic!("not an assignment: {k:?}"),
        }
    }

    const LAYOUT: &str = "struct P { char c; double d; char *p; int i; };
        struct Q { char c; struct P inner; char tail[3]; };
        int main() { return 0; }";

    #[test]
    fn struct_layout_follows_the_target_abi() {
        // Hand-computed from the i386 and x86-64 System V rules.
        let p = program(LAYOUT, TargetInfo::I686);
        let offs: Vec<u32> = p.structs[0].fields.iter().map(|f| f.offset).collect();
        assert_eq!(offs, [0, 4, 12, 16]);
        assert_eq!((p.structs[0].size, p.structs[0].align), (20, 4));
        let offs: Vec<u32> = p.structs[1].fields.iter().map(|f| f.offset).collect();
        assert_eq!(offs, [0, 4, 24]);
        assert_eq!((p.structs[1].size, p.structs[1].align), (28, 4));

        let p = program(LAYOUT, TargetInfo::X86_64);
        let offs: Vec<u32> = p.structs[0].fields.iter().map(|f| f.offset).collect();
        assert_eq!(offs, [0, 8, 16, 24]);
        assert_eq!((p.structs[0].size, p.structs[0].align), (32, 8));
        let offs: Vec<u32> = p.structs[1].fields.iter().map(|f| f.offset).collect();
        assert_eq!(offs, [0, 8, 40]);
        assert_eq!((p.structs[1].size, p.structs[1].align), (48, 8));
    }

    #[test]
    fn structs_can_be_used_before_their_definition() {
        let p = program(
            "struct A *g; struct A { struct B b; }; struct B { int x[2]; }; int main() { return 0; }",
            TargetInfo::I686,
        );
        assert_eq!(p.structs[0].size, 8);
        assert_eq!(p.globals[0].ty, Type::ptr(Type::Struct(0)));
    }

    #[test]
    fn pointer_arithmetic_is_scaled() {
        let src = "struct P { char c; double d; char *p; int i; };
            int main() { int *p; double *q; struct P *s; int i; int n;
              p = p + 2; q = q - 1; n = p - p; s = 1 + s; p = &p[i]; return 0; }";
        for (target, struct_size) in [(TargetInfo::I686, 20), (TargetInfo::X86_64, 32)] {
            let p = program(src, target);
            let off = |e: &Expr| match &e.kind {
                E::PtrOffset {
                    elem_size,
                    subtract,
                    ..
                } => (*elem_size, *subtract),
                k => panic!("not a pointer offset: {k:?}"),
            };
            assert_eq!(off(&assigned(main_expr(&p, 0))), (4, false));
            assert_eq!(off(&assigned(main_expr(&p, 1))), (8, true));
            match &assigned(main_expr(&p, 2)).kind {
                E::PtrDiff { elem_size: 4, .. } => {}
                k => panic!("not a pointer difference: {k:?}"),
            }
            let s = assigned(main_expr(&p, 3));
            assert_eq!(off(&s), (struct_size, false));
            let E::PtrOffset { ptr, .. } = &s.kind else {
                unreachable!()
            };
            assert!(ptr.ty.is_pointer(), "the pointer operand comes first");
            // &p[i] is the address of *(p + i).
            match &assigned(main_expr(&p, 4)).kind {
                E::AddrOf(place) => match &place.kind {
                    P::Deref(sum) => assert_eq!(off(sum), (4, false)),
                    k => panic!("{k:?}"),
                },
                k => panic!("{k:?}"),
            }
        }
    }

    #[test]
    fn arrays_decay_and_index() {
        let p = program(
            "int a[10]; int main() { a[3] = 7; return 0; }",
            TargetInfo::X86_64,
        );
        let E::Assign(place, v) = &main_expr(&p, 0).kind else {
            panic!()
        };
        assert_eq!(v.kind, E::IntConst(7));
        let P::Deref(sum) = &place.kind else {
            panic!("{:?}", place.kind)
        };
        let E::PtrOffset {
            ptr,
            index,
            elem_size: 4,
            subtract: false,
        } = &sum.kind
        else {
            panic!("{:?}", sum.kind)
        };
        assert_eq!(index.kind, E::IntConst(3));
        assert_eq!(ptr.ty, Type::ptr(Type::Int));
        let E::AddrOf(arr) = &ptr.kind else {
            panic!("{:?}", ptr.kind)
        };
        assert_eq!(arr.kind, P::Global(0));
        assert_eq!(arr.ty, Type::Array(Box::new(Type::Int), 10));
    }

    #[test]
    fn arithmetic_conversions_are_explicit() {
        let p = program(
            "int main() { char c; double d; int i; d = c + 1.5; i = c * c; c = i; return 0; }",
            TargetInfo::I686,
        );
        let sum = assigned(main_expr(&p, 0));
        assert_eq!(sum.ty, Type::Double);
        let E::Binary(BinaryOp::Add, l, r) = &sum.kind else {
            panic!("{:?}", sum.kind)
        };
        assert_eq!((l.ty.clone(), r.ty.clone()), (Type::Double, Type::Double));
        let E::Convert(inner) = &l.kind else {
            panic!("{:?}", l.kind)
        };
        assert_eq!(inner.ty, Type::Char);
        let prod = assigned(main_expr(&p, 1));
        let E::Binary(BinaryOp::Mul, l, _) = &prod.kind else {
            panic!()
        };
        assert_eq!(l.ty, Type::Int, "char operands are promoted to int");
        let narrowed = assigned(main_expr(&p, 2));
        assert_eq!(narrowed.ty, Type::Char);
        assert!(matches!(narrowed.kind, E::Convert(_)));
    }

    #[test]
    fn null_pointer_constants_take_the_pointer_type() {
        let p = program(
            "int main() { int *p; p = 0; p = NULL; return p == NULL; }",
            TargetInfo::X86_64,
        );
        for n in 0..2 {
            let v = assigned(main_expr(&p, n));
            assert_eq!((&v.kind, &v.ty), (&E::Null, &Type::ptr(Type::Int)));
        }
        let main = &p.functions[0];
        let Some(Stmt::Return(Some(cmp))) = main.body.last() else {
            panic!()
        };
        let E::Binary(BinaryOp::Eq, l, r) = &cmp.kind else {
            panic!("{:?}", cmp.kind)
        };
        assert_eq!(l.ty, r.ty);
        assert_eq!(r.kind, E::Null);
    }

    #[test]
    fn calls_convert_arguments() {
        let p = program(
            "extern int printf(char *fmt, ...);
             int f(double x, char c) { return c; }
             int main() { char c; c = 'x'; printf(\"%c %f\", c, 2.0); f(1, 65); return f; }",
            TargetInfo::X86_64,
        );
        let call = main_expr(&p, 1);
        let E::Call {
            callee: Callee::Extern(0),
            args,
        } = &call.kind
        else {
            panic!()
        };
        let tys: Vec<Type> = args.iter().map(|a| a.ty.clone()).collect();
        assert_eq!(tys, [Type::ptr(Type::Char), Type::Int, Type::Double]);
        let call = main_expr(&p, 2);
        let E::Call {
            callee: Callee::Function(0),
            args,
        } = &call.kind
        else {
            panic!()
        };
        assert_eq!(args[0].ty, Type::Double);
        assert_eq!(args[1].ty, Type::Char);
        let Some(Stmt::Return(Some(r))) = p.functions[1].body.last() else {
            panic!()
        };
        assert_eq!((&r.kind, &r.ty), (&E::FuncAddr(0), &Type::Int));
        assert_eq!(p.strings, vec![b"%c %f".to_vec()]);
    }

    #[test]
    fn sizeof_and_stacksizeof() {
        let src = "struct P { char c; double d; char *p; int i; };
            int main() { int n; n = sizeof(struct P); n = sizeof(char *); n = sizeof(int[3]);
              n = stacksizeof(main); return 0; }";
        for (t, sp, pp) in [(TargetInfo::I686, 20, 4), (TargetInfo::X86_64, 32, 8)] {
            let p = program(src, t);
            assert_eq!(assigned(main_expr(&p, 0)).kind, E::IntConst(sp));
            assert_eq!(assigned(main_expr(&p, 1)).kind, E::IntConst(pp));
            assert_eq!(assigned(main_expr(&p, 2)).kind, E::IntConst(12));
            assert_eq!(assigned(main_expr(&p, 3)).kind, E::StackSizeOf(0));
        }
    }

    #[test]
    fn locals_are_block_scoped_and_marked_when_address_taken() {
        let p = program(
            "int main(int argc, char **argv) { int x; int *p; p = &x;
               { int t; t = 1; } { double t; t = 2.0; } return argc; }",
            TargetInfo::I686,
        );
        let f = &p.functions[0];
        assert_eq!(f.param_count, 2);
        let names: Vec<(&str, bool)> = f
            .locals
            .iter()
            .map(|l| (l.name.as_str(), l.needs_memory))
            .collect();
        assert_eq!(
            names,
            [
                ("argc", false),
                ("argv", false),
                ("x", true),
                ("p", false),
                ("t", false),
                ("t", false)
            ]
        );
        assert_eq!(f.locals[5].ty, Type::Double);
        assert_eq!((f.locals[5].size, f.locals[5].align), (8, 8));
    }

    #[test]
    fn struct_assignment_copies_through_addresses() {
        let p = program(
            "struct S { int a; char b[5]; }; struct S g;
             int main() { struct S s; struct S *q; s = g; q = &s; *q = s; q->a = s.b[1]; return 0; }",
            TargetInfo::I686,
        );
        let e = main_expr(&p, 0);
        assert_eq!(e.ty, Type::Void);
        let E::Assign(dst, src) = &e.kind else {
            panic!()
        };
        assert_eq!(dst.kind, P::Local(0));
        let E::AddrOf(g) = &src.kind else {
            panic!("{:?}", src.kind)
        };
        assert_eq!(g.kind, P::Global(0));
        let member = main_expr(&p, 3);
        let E::Assign(dst, _) = &member.kind else {
            panic!()
        };
        let P::Member(base, 0) = &dst.kind else {
            panic!("{:?}", dst.kind)
        };
        assert!(matches!(base.kind, P::Deref(_)));
    }

    #[test]
    fn main_signatures() {
        for ok in [
            "int main() { return 0; }",
            "int main(void) { return 0; }",
            "int main(int c, char **v) { return 0; }",
            "int main(int c, char *v[]) { return 0; }",
        ] {
            program(ok, TargetInfo::I686);
        }
        for bad in [
            "void main() { }",
            "int main(int c) { return 0; }",
            "int main;",
        ] {
            let unit = crate::parse(bad).expect("parses");
            assert!(check(&unit, TargetInfo::I686).is_err(), "{bad}");
        }
    }

    #[test]
    fn missing_return_value_at_the_end_is_allowed() {
        // Appendix A.8's `thread_entry` falls off the end of an `int` function.
        program(
            "int f(void *a) { int x; x = (int)a; } int main() { return f(NULL); }",
            TargetInfo::I686,
        );
    }
}
