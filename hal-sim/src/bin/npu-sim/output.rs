//! The commands' standard output.
//!
//! `println!` panics when stdout is closed early (`npu-sim bench memory | head -1`: Rust
//! ignores SIGPIPE, so the write fails with a broken pipe). The reader asked for no more, so
//! here that ends the program quietly with status 0; any other write error is reported and
//! ends it with status 1. Commands print through [`outln!`](crate::outln) and
//! [`out!`](crate::out).

use std::io::{ErrorKind, Write};

/// Writes `args` to stdout; exits as the module docs say when that fails.
pub fn write(args: std::fmt::Arguments<'_>) {
    if let Err(e) = std::io::stdout().lock().write_fmt(args) {
        if e.kind() == ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("npu-sim: error: writing to stdout: {e}");
        std::process::exit(1);
    }
}
