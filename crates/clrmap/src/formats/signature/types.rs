//! The owned, structural form of a type signature (ECMA-335 II.23.2.12).
//!
//! [`Type`] is what the tree provider builds, what the encoder writes and what the CLI prints as
//! JSON. It keeps metadata tokens as full 32-bit tokens (0x02 TypeDef, 0x01 TypeRef, 0x1B
//! TypeSpec) rather than coded indexes.

/// Element types without operands (ECMA-335 II.23.1.16).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum Primitive {
    /// ELEMENT_TYPE_VOID 0x01.
    Void,
    /// ELEMENT_TYPE_BOOLEAN 0x02.
    Boolean,
    /// ELEMENT_TYPE_CHAR 0x03.
    Char,
    /// ELEMENT_TYPE_I1 0x04.
    I1,
    /// ELEMENT_TYPE_U1 0x05.
    U1,
    /// ELEMENT_TYPE_I2 0x06.
    I2,
    /// ELEMENT_TYPE_U2 0x07.
    U2,
    /// ELEMENT_TYPE_I4 0x08.
    I4,
    /// ELEMENT_TYPE_U4 0x09.
    U4,
    /// ELEMENT_TYPE_I8 0x0A.
    I8,
    /// ELEMENT_TYPE_U8 0x0B.
    U8,
    /// ELEMENT_TYPE_R4 0x0C.
    R4,
    /// ELEMENT_TYPE_R8 0x0D.
    R8,
    /// ELEMENT_TYPE_STRING 0x0E.
    String,
    /// ELEMENT_TYPE_TYPEDBYREF 0x16.
    TypedByRef,
    /// ELEMENT_TYPE_I 0x18.
    I,
    /// ELEMENT_TYPE_U 0x19.
    U,
    /// ELEMENT_TYPE_OBJECT 0x1C.
    Object,
}

impl Primitive {
    /// The element type byte.
    pub const fn code(self) -> u8 {
        match self {
            Primitive::Void => 0x01,
            Primitive::Boolean => 0x02,
            Primitive::Char => 0x03,
            Primitive::I1 => 0x04,
            Primitive::U1 => 0x05,
            Primitive::I2 => 0x06,
            Primitive::U2 => 0x07,
            Primitive::I4 => 0x08,
            Primitive::U4 => 0x09,
            Primitive::I8 => 0x0A,
            Primitive::U8 => 0x0B,
            Primitive::R4 => 0x0C,
            Primitive::R8 => 0x0D,
            Primitive::String => 0x0E,
            Primitive::TypedByRef => 0x16,
            Primitive::I => 0x18,
            Primitive::U => 0x19,
            Primitive::Object => 0x1C,
        }
    }

    /// The primitive with this element type byte, if it is one.
    pub const fn from_code(code: u8) -> Option<Self> {
        Some(match code {
            0x01 => Primitive::Void,
            0x02 => Primitive::Boolean,
            0x03 => Primitive::Char,
            0x04 => Primitive::I1,
            0x05 => Primitive::U1,
            0x06 => Primitive::I2,
            0x07 => Primitive::U2,
            0x08 => Primitive::I4,
            0x09 => Primitive::U4,
            0x0A => Primitive::I8,
            0x0B => Primitive::U8,
            0x0C => Primitive::R4,
            0x0D => Primitive::R8,
            0x0E => Primitive::String,
            0x16 => Primitive::TypedByRef,
            0x18 => Primitive::I,
            0x19 => Primitive::U,
            0x1C => Primitive::Object,
            _ => return None,
        })
    }

    /// The ILAsm keyword (docs/output.md#type-signatures).
    pub const fn keyword(self) -> &'static str {
        match self {
            Primitive::Void => "void",
            Primitive::Boolean => "bool",
            Primitive::Char => "char",
            Primitive::I1 => "int8",
            Primitive::U1 => "uint8",
            Primitive::I2 => "int16",
            Primitive::U2 => "uint16",
            Primitive::I4 => "int32",
            Primitive::U4 => "uint32",
            Primitive::I8 => "int64",
            Primitive::U8 => "uint64",
            Primitive::R4 => "float32",
            Primitive::R8 => "float64",
            Primitive::String => "string",
            Primitive::TypedByRef => "typedref",
            Primitive::I => "native int",
            Primitive::U => "native uint",
            Primitive::Object => "object",
        }
    }
}

/// An ARRAY shape (II.23.2.13): rank, the sizes of the first dimensions, the lower bounds of the
/// first dimensions. Both lists may be shorter than the rank, never longer.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct ArrayShape {
    /// Number of dimensions (≥ 1).
    pub rank: u32,
    /// Sizes of the first `sizes.len()` dimensions.
    pub sizes: Vec<u32>,
    /// Lower bounds of the first `lower_bounds.len()` dimensions (signed).
    pub lower_bounds: Vec<i32>,
}

/// A method signature's calling-convention byte (II.23.2.1-3), kept whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct CallingConvention(pub u8);

impl CallingConvention {
    /// Flag: the signature has a generic parameter count.
    pub const GENERIC: u8 = 0x10;
    /// Flag: the method has a `this` pointer.
    pub const HAS_THIS: u8 = 0x20;
    /// Flag: `this` is an explicit first parameter.
    pub const EXPLICIT_THIS: u8 = 0x40;

    /// The kind, the low nibble: DEFAULT 0, C 1, STDCALL 2, THISCALL 3, FASTCALL 4, VARARG 5,
    /// UNMANAGED 9.
    pub const fn kind(self) -> u8 {
        self.0 & 0x0F
    }
    /// GENERIC flag.
    pub const fn is_generic(self) -> bool {
        self.0 & Self::GENERIC != 0
    }
    /// HASTHIS flag.
    pub const fn has_this(self) -> bool {
        self.0 & Self::HAS_THIS != 0
    }
    /// EXPLICITTHIS flag.
    pub const fn explicit_this(self) -> bool {
        self.0 & Self::EXPLICIT_THIS != 0
    }
    /// True for a method calling convention clrmap accepts in an FNPTR: kinds 0-5 and 9, and no
    /// reserved bit 0x80 (docs/output.md#strictness).
    pub const fn is_valid_method(self) -> bool {
        self.0 & 0x80 == 0 && matches!(self.kind(), 0..=5 | 9)
    }
}

/// A method signature, as found after FNPTR (II.23.2.1-3), generic over the type representation.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct MethodSignature<T> {
    /// The calling-convention byte.
    pub calling_convention: CallingConvention,
    /// The generic parameter count (0 unless GENERIC is set).
    pub generic_parameter_count: u32,
    /// The return type.
    pub return_type: T,
    /// The parameters, varargs included.
    pub parameters: Vec<T>,
    /// How many parameters come before the SENTINEL, if there is one. `None` when no SENTINEL.
    pub sentinel: Option<usize>,
}

/// A type signature, owned and structural.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(tag = "kind", rename_all = "snake_case"))]
pub enum Type {
    /// A primitive type (including `void`, `string`, `object`, `typedref`).
    Primitive {
        /// Which.
        #[cfg_attr(feature = "serde", serde(rename = "type"))]
        primitive: Primitive,
    },
    /// CLASS or VALUETYPE with a TypeDef/TypeRef token.
    Named {
        /// VALUETYPE (true) or CLASS (false).
        value_type: bool,
        /// The TypeDef or TypeRef token.
        #[cfg_attr(feature = "serde", serde(serialize_with = "ser_token"))]
        token: u32,
    },
    /// GENERICINST.
    GenericInst {
        /// VALUETYPE (true) or CLASS (false).
        value_type: bool,
        /// The generic type's TypeDef or TypeRef token.
        #[cfg_attr(feature = "serde", serde(serialize_with = "ser_token"))]
        token: u32,
        /// The type arguments (at least one).
        args: Vec<Type>,
    },
    /// SZARRAY: a single-dimension, zero-based array.
    SzArray {
        /// Element type.
        element: Box<Type>,
    },
    /// ARRAY with a shape.
    Array {
        /// Element type.
        element: Box<Type>,
        /// The shape.
        shape: ArrayShape,
    },
    /// PTR.
    Ptr {
        /// Pointee.
        element: Box<Type>,
    },
    /// BYREF.
    ByRef {
        /// Referent.
        element: Box<Type>,
    },
    /// PINNED (local signatures only; a strict type decoder rejects it).
    Pinned {
        /// The pinned type.
        element: Box<Type>,
    },
    /// CMOD_REQD or CMOD_OPT before a type.
    Modified {
        /// CMOD_REQD (true) or CMOD_OPT (false).
        required: bool,
        /// The modifier's TypeDef, TypeRef or TypeSpec token.
        #[cfg_attr(feature = "serde", serde(serialize_with = "ser_token"))]
        modifier: u32,
        /// The modified type.
        element: Box<Type>,
    },
    /// VAR: a type's generic parameter.
    Var {
        /// Index.
        index: u32,
    },
    /// MVAR: a method's generic parameter.
    MVar {
        /// Index.
        index: u32,
    },
    /// FNPTR with a full method signature.
    FnPtr {
        /// The signature.
        signature: Box<MethodSignature<Type>>,
    },
}

impl Type {
    /// A primitive.
    pub const fn primitive(primitive: Primitive) -> Type {
        Type::Primitive { primitive }
    }
}

#[cfg(feature = "serde")]
fn ser_token<S: serde::Serializer>(token: &u32, s: S) -> core::result::Result<S::Ok, S::Error> {
    s.serialize_str(&format!("0x{token:08X}"))
}
