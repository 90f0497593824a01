//! Writing command output to stdout without panicking when the reader goes away
//! (`muser inspect x | head` must not print a panic).

use std::io::{ErrorKind, Write};

/// Write `s` to stdout; a closed pipe ends the output quietly, other errors are returned.
pub fn write_stdout(s: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(s.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}
