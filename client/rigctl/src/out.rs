//! Where rigctl's output meets its reader: stdout and stderr as every subcommand writes
//! them. A reader that leaves early (`rigctl list | head -1`) ends rigctl as it ends
//! lspci: at the write that finds the pipe closed, by SIGPIPE, with nothing printed
//! (a shell's `$?` reads 141; with `set -o pipefail` the pipeline fails as lspci's
//! does). Output that fits in the pipe before the reader leaves ends in 0, for both.
//!
//! Flow: `main` and each subcommand take their writers from [`stdout`] and [`stderr`]
//! (lines to stderr through [`errln!`]); [`Out`] hands a write's EPIPE to
//! `sys::die_of_sigpipe` and returns every other result as it came. Rust ignores
//! SIGPIPE before `main`, and rigctl leaves it so while it talks to rigd: a write to
//! rigd's socket after rigd died stays an error with its exit code (3), not a silent
//! death; only rigctl's own output ends it.
//!
//! Not here: `--json`'s error document (`main::print_json_error`) writes stdout
//! itself and falls back to stderr, so that an error does not vanish with the pipe.

use std::io::{self, Write};

/// A writer whose EPIPE ends the process as SIGPIPE would (module header).
#[derive(Debug)]
pub struct Out<W>(W);

/// rigctl's stdout, locked (line-buffered as std's is).
pub fn stdout() -> Out<io::StdoutLock<'static>> {
    Out(io::stdout().lock())
}

/// rigctl's stderr, locked.
pub fn stderr() -> Out<io::StderrLock<'static>> {
    Out(io::stderr().lock())
}

impl<W: Write> Write for Out<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        ended_by_closed_pipe(self.0.write(buf))
    }

    fn flush(&mut self) -> io::Result<()> {
        ended_by_closed_pipe(self.0.flush())
    }
}

fn ended_by_closed_pipe<T>(r: io::Result<T>) -> io::Result<T> {
    match r {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => crate::sys::die_of_sigpipe(),
        r => r,
    }
}

/// `eprintln!` through [`stderr`]: a closed stderr ends rigctl as a closed stdout does
/// (`eprintln!` would panic), and another failure to write there is dropped, as there
/// is nowhere left to report it.
macro_rules! errln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!($crate::out::stderr(), $($arg)*);
    }};
}
pub(crate) use errln;
