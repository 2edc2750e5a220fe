//! (gdmap: not yet implemented.)
