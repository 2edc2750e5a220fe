//! A borrowed, validated type signature: zero-copy until the caller decodes it.

use super::decode::{decode_type, skip_type};
use super::names::TypeNames;
use super::print::SpanRenderer;
use super::provider::{TreeProvider, TypeProvider};
use super::types::Type;
use crate::base::read::{Reader, Result};

/// One type signature's bytes, already checked by the strict decoder, with their absolute offset.
/// Decoding it again through any provider cannot fail on its bytes; it costs one walk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TypeSig<'a> {
    bytes: &'a [u8],
    offset: u64,
}

impl<'a> TypeSig<'a> {
    /// Validate the one type at the front of `r` and borrow its bytes, leaving `r` after it.
    pub fn read(r: &mut Reader<'a>) -> Result<Self> {
        let offset = r.offset();
        let start = r.as_slice();
        skip_type(r)?;
        let used = start.len().saturating_sub(r.len());
        Ok(TypeSig { bytes: start.get(..used).unwrap_or(&[]), offset })
    }

    /// The signature's bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Absolute offset of its first byte.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Decode through a provider.
    pub fn decode<P: TypeProvider>(&self, provider: &mut P) -> Result<P::Type> {
        decode_type(&mut Reader::new(self.bytes, self.offset), provider)
    }

    /// An owned tree.
    pub fn to_type(&self) -> Result<Type> {
        self.decode(&mut TreeProvider)
    }

    /// ILAsm text.
    pub fn render(&self, names: &dyn TypeNames) -> Result<String> {
        let mut printer = SpanRenderer::new(names);
        let span = self.decode(&mut printer)?;
        Ok(printer.text(span).to_owned())
    }
}
