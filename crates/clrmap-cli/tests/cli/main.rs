//! CLI tests: the real `clrmap` binary, its stdout, stderr and exit codes. One module per command group.

mod support;
