//! (nettrace: not yet implemented.)
