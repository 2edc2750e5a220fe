//! (ilmap: not yet implemented.)
