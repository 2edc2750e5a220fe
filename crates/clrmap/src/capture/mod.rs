//! (capture: not yet implemented.)
