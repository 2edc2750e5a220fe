//! (r2r: not yet implemented.)
