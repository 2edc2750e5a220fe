//! How the address of a frame is read: the frame rule that every front end (the CLI's
//! `--return-address` and `--clr31`, the C ABI's `CLRMAP_FRAME_*` kinds, the service's
//! `return_address`) takes from here, so that a rule of the runtime is written once.

/// How the address of a frame is to be read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FrameKind {
    /// The leaf frame (or an exact instruction address): looked up as is.
    #[default]
    Leaf,
    /// A return address (every frame below the leaf): the call is at address − 1, and so are its
    /// method and IL offset, as .NET 5 and later compute them for stack traces.
    ReturnAddress,
    /// A return address, read as CoreCLR 3.1's `StackFrame.GetILOffset()` reads it: the method is
    /// the one holding the call (address − 1), but the IL offset is looked up at the return
    /// address itself, the instruction after the call.
    ReturnAddressAsIs,
}

impl FrameKind {
    /// The frame kind of an address, from whether it is a return address and from the runtime
    /// the source recorded ([`crate::answers::symbolizer::Symbolizer::runtime_major`]): a leaf is read as
    /// is, a return address by the rule of that runtime ([`FrameKind::for_runtime`]).
    pub fn from_return_address(return_address: bool, runtime_major: Option<u16>) -> FrameKind {
        if return_address {
            FrameKind::ReturnAddress.for_runtime(runtime_major)
        } else {
            FrameKind::Leaf
        }
    }

    /// CoreCLR 3.1's rule when `clr31` asks for it, whatever runtime the source recorded: a
    /// return address is read as 3.1 reads it ([`FrameKind::ReturnAddressAsIs`]); a leaf stays a
    /// leaf. For recordings that do not say which runtime ran them.
    pub fn with_clr31(self, clr31: bool) -> FrameKind {
        match self {
            FrameKind::ReturnAddress if clr31 => FrameKind::ReturnAddressAsIs,
            kind => kind,
        }
    }

    /// The rule the runtime that ran the bodies uses for this kind of frame: a return address of
    /// a runtime before .NET 5 (CoreCLR 3.1, major 3) is read as it reads it
    /// ([`FrameKind::ReturnAddressAsIs`]); anything else is unchanged. `runtime_major` is what the
    /// source recorded; `None` (an image, an old capture) keeps .NET 5's rule.
    pub fn for_runtime(self, runtime_major: Option<u16>) -> FrameKind {
        match self {
            FrameKind::ReturnAddress if runtime_major.is_some_and(|m| m < 5) => FrameKind::ReturnAddressAsIs,
            kind => kind,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::FrameKind;

    #[test]
    fn a_return_address_follows_the_recorded_runtime() {
        // CoreCLR 3.1 reports major 3 (its RuntimeInformation event, or the capture's path).
        assert_eq!(FrameKind::ReturnAddress.for_runtime(Some(3)), FrameKind::ReturnAddressAsIs);
        assert_eq!(FrameKind::ReturnAddress.for_runtime(Some(5)), FrameKind::ReturnAddress);
        assert_eq!(FrameKind::ReturnAddress.for_runtime(Some(8)), FrameKind::ReturnAddress);
        assert_eq!(FrameKind::ReturnAddress.for_runtime(None), FrameKind::ReturnAddress);
        assert_eq!(FrameKind::Leaf.for_runtime(Some(3)), FrameKind::Leaf);
        assert_eq!(FrameKind::ReturnAddressAsIs.for_runtime(Some(8)), FrameKind::ReturnAddressAsIs);
    }

    #[test]
    fn the_flags_give_the_frame_kind() {
        assert_eq!(FrameKind::from_return_address(false, Some(3)), FrameKind::Leaf);
        assert_eq!(FrameKind::from_return_address(false, None), FrameKind::Leaf);
        assert_eq!(FrameKind::from_return_address(true, None), FrameKind::ReturnAddress);
        assert_eq!(FrameKind::from_return_address(true, Some(8)), FrameKind::ReturnAddress);
        assert_eq!(FrameKind::from_return_address(true, Some(3)), FrameKind::ReturnAddressAsIs);
        // `--clr31` (or CLRMAP_FRAME_RETURN_ADDRESS_CLR31) forces 3.1's rule on a return address only.
        assert_eq!(FrameKind::from_return_address(true, Some(8)).with_clr31(true), FrameKind::ReturnAddressAsIs);
        assert_eq!(FrameKind::from_return_address(true, Some(8)).with_clr31(false), FrameKind::ReturnAddress);
        assert_eq!(FrameKind::from_return_address(false, Some(8)).with_clr31(true), FrameKind::Leaf);
    }
}
