//! The type provider: how a decoder hands back what it read, in the style of
//! System.Reflection.Metadata's `ISignatureTypeProvider`.
//!
//! The decoder validates and walks the bytes; the provider decides what a type *is* to the
//! caller: an owned tree ([`TreeProvider`]), rendered text (`print::SpanRenderer`), or nothing at
//! all (`()`: validation and skipping, with no allocation).

use super::types::{ArrayShape, CallingConvention, MethodSignature, Primitive, Type};

/// Builds the caller's representation of each production of II.23.2.12, bottom-up.
pub trait TypeProvider {
    /// The caller's representation of a type.
    type Type;

    /// A primitive (VOID, BOOLEAN ... OBJECT, TYPEDBYREF).
    fn primitive(&mut self, primitive: Primitive) -> Self::Type;
    /// CLASS / VALUETYPE token.
    fn named(&mut self, value_type: bool, token: u32) -> Self::Type;
    /// GENERICINST (CLASS|VALUETYPE) token args.
    fn generic_inst(&mut self, value_type: bool, token: u32, args: Vec<Self::Type>) -> Self::Type;
    /// SZARRAY element.
    fn sz_array(&mut self, element: Self::Type) -> Self::Type;
    /// ARRAY element shape.
    fn array(&mut self, element: Self::Type, shape: ArrayShape) -> Self::Type;
    /// PTR element.
    fn ptr(&mut self, element: Self::Type) -> Self::Type;
    /// BYREF element.
    fn by_ref(&mut self, element: Self::Type) -> Self::Type;
    /// PINNED element (local signatures only).
    fn pinned(&mut self, element: Self::Type) -> Self::Type;
    /// CMOD_REQD / CMOD_OPT modifier element.
    fn modified(&mut self, required: bool, modifier: u32, element: Self::Type) -> Self::Type;
    /// VAR index.
    fn var(&mut self, index: u32) -> Self::Type;
    /// MVAR index.
    fn mvar(&mut self, index: u32) -> Self::Type;
    /// FNPTR method signature.
    fn fn_ptr(&mut self, signature: MethodSignature<Self::Type>) -> Self::Type;

    // Hooks called *before* the parts of a production, for providers that print as they go
    // (`print::StreamRenderer`). Every production's text is its parts' texts in decoding order,
    // except for these prefixes and separators. The defaults do nothing.

    /// GENERICINST read its kind, token and argument count; the arguments follow.
    #[inline]
    fn begin_generic_inst(&mut self, _value_type: bool, _token: u32) {}
    /// Generic argument `index` follows.
    #[inline]
    fn begin_generic_arg(&mut self, _index: u32) {}
    /// FNPTR read its calling convention; the return type follows.
    #[inline]
    fn begin_fn_ptr(&mut self, _calling_convention: CallingConvention) {}
    /// FNPTR parameter `index` follows; `sentinel` when a SENTINEL stands before it.
    #[inline]
    fn begin_fn_ptr_param(&mut self, _index: u32, _sentinel: bool) {}
}

/// The unit provider: decoding with it only validates and skips.
impl TypeProvider for () {
    type Type = ();
    fn primitive(&mut self, _: Primitive) {}
    fn named(&mut self, _: bool, _: u32) {}
    fn generic_inst(&mut self, _: bool, _: u32, _: Vec<()>) {}
    fn sz_array(&mut self, _: ()) {}
    fn array(&mut self, _: (), _: ArrayShape) {}
    fn ptr(&mut self, _: ()) {}
    fn by_ref(&mut self, _: ()) {}
    fn pinned(&mut self, _: ()) {}
    fn modified(&mut self, _: bool, _: u32, _: ()) {}
    fn var(&mut self, _: u32) {}
    fn mvar(&mut self, _: u32) {}
    fn fn_ptr(&mut self, _: MethodSignature<()>) {}
}

/// Builds owned [`Type`] trees.
#[derive(Clone, Copy, Debug, Default)]
pub struct TreeProvider;

impl TypeProvider for TreeProvider {
    type Type = Type;
    fn primitive(&mut self, primitive: Primitive) -> Type {
        Type::Primitive { primitive }
    }
    fn named(&mut self, value_type: bool, token: u32) -> Type {
        Type::Named { value_type, token }
    }
    fn generic_inst(&mut self, value_type: bool, token: u32, args: Vec<Type>) -> Type {
        Type::GenericInst { value_type, token, args }
    }
    fn sz_array(&mut self, element: Type) -> Type {
        Type::SzArray { element: Box::new(element) }
    }
    fn array(&mut self, element: Type, shape: ArrayShape) -> Type {
        Type::Array { element: Box::new(element), shape }
    }
    fn ptr(&mut self, element: Type) -> Type {
        Type::Ptr { element: Box::new(element) }
    }
    fn by_ref(&mut self, element: Type) -> Type {
        Type::ByRef { element: Box::new(element) }
    }
    fn pinned(&mut self, element: Type) -> Type {
        Type::Pinned { element: Box::new(element) }
    }
    fn modified(&mut self, required: bool, modifier: u32, element: Type) -> Type {
        Type::Modified { required, modifier, element: Box::new(element) }
    }
    fn var(&mut self, index: u32) -> Type {
        Type::Var { index }
    }
    fn mvar(&mut self, index: u32) -> Type {
        Type::MVar { index }
    }
    fn fn_ptr(&mut self, signature: MethodSignature<Type>) -> Type {
        Type::FnPtr { signature: Box::new(signature) }
    }
}
