//! (metadata: not yet implemented.)
