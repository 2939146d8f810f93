//! C-- types and their target-dependent sizes and struct layouts.

use crate::target::TargetInfo;

/// Index into [`crate::typed::Program::structs`].
pub type StructId = u32;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Type {
    Void,
    /// 8-bit signed.
    Char,
    /// 32-bit signed, two's complement, wrapping.
    Int,
    /// IEEE 754 binary64.
    Double,
    Pointer(Box<Type>),
    /// Fixed-size array (`int a[10];`); decays to a pointer in expressions.
    Array(Box<Type>, u32),
    Struct(StructId),
}

impl Type {
    pub fn ptr(to: Type) -> Type {
        Type::Pointer(Box::new(to))
    }
    pub fn is_integer(&self) -> bool {
        matches!(self, Type::Char | Type::Int)
    }
    pub fn is_arithmetic(&self) -> bool {
        matches!(self, Type::Char | Type::Int | Type::Double)
    }
    pub fn is_pointer(&self) -> bool {
        matches!(self, Type::Pointer(_))
    }
    /// Types usable as a condition or operand of `!`, `&&`, `||`.
    pub fn is_scalar(&self) -> bool {
        self.is_arithmetic() || self.is_pointer()
    }
    pub fn pointee(&self) -> Option<&Type> {
        match self {
            Type::Pointer(t) => Some(t),
            _ => None,
        }
    }
}

/// A struct definition with its layout for the target the program was checked for.
#[derive(Clone, Debug, PartialEq)]
pub struct StructDef {
    pub name: String,
    pub fields: Vec<Field>,
    pub size: u32,
    pub align: u32,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Field {
    pub name: String,
    pub ty: Type,
    /// Byte offset from the start of the struct.
    pub offset: u32,
}

/// Size in bytes of a complete type; `void` is reported as 1 (as gcc does for `void *` arithmetic).
pub fn size_of(ty: &Type, structs: &[StructDef], target: TargetInfo) -> u32 {
    match ty {
        Type::Void | Type::Char => 1,
        Type::Int => 4,
        Type::Double => 8,
        Type::Pointer(_) => target.pointer_size,
        Type::Array(elem, n) => size_of(elem, structs, target).saturating_mul(*n),
        Type::Struct(id) => structs.get(*id as usize).map_or(1, |s| s.size),
    }
}

/// Alignment of a type when it is a struct member (the C ABI rule of the target).
pub fn align_in_struct(ty: &Type, structs: &[StructDef], target: TargetInfo) -> u32 {
    match ty {
        Type::Void | Type::Char => 1,
        Type::Int => 4,
        Type::Double => target.double_align_in_struct,
        Type::Pointer(_) => target.pointer_size,
        Type::Array(elem, _) => align_in_struct(elem, structs, target),
        Type::Struct(id) => structs.get(*id as usize).map_or(1, |s| s.align),
    }
}

/// Alignment of a variable of this type (locals and globals); doubles get 8 on every target.
pub fn align_of_object(ty: &Type, structs: &[StructDef], target: TargetInfo) -> u32 {
    match ty {
        Type::Double => 8,
        Type::Array(elem, _) => align_of_object(elem, structs, target),
        _ => align_in_struct(ty, structs, target).max(1),
    }
}
