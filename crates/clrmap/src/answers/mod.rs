//! Answers: a native address to its method, IL offset, source line and inlined frames
//! ([`symbolizer`]), and printed stack traces to the lines the runtime would print ([`stacktrace`]).
pub mod stacktrace;
pub mod symbolizer;
