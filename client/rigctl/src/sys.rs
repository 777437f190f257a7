//! The one kernel interface rigctl calls itself: the end a closed pipe gives a
//! program that never touched SIGPIPE, which is how lspci ends under `| head`.
//!
//! Flow: `out` calls [`die_of_sigpipe`] when a write to stdout or stderr fails with
//! EPIPE; nothing else does. It owns no state.
//!
//! Reference: signal(7) ("SIGPIPE … Term"), pipe(7) ("If all file descriptors
//! referring to the read end of a pipe have been closed, then a write(2) will cause a
//! SIGPIPE signal to be generated for the calling process. If the calling process is
//! ignoring this signal, then write(2) fails with the error EPIPE"). Rust's runtime sets
//! SIGPIPE to ignored before `main`, which is why rigctl sees EPIPE at all.
//!
//! Not here: when to end (`out` decides: only for its own writes, so a write to rigd's
//! socket after rigd died is still an error rigctl reports).

use nix::sys::signal::{self, SigHandler, SigSet, Signal};

/// Ends the process by SIGPIPE with the signal's default action, as a process that
/// wrote to a pipe with no reader ends when it has not set SIGPIPE aside: no message,
/// and the status a shell reads as 141 (128 + 13). Exits with 141 if the signal
/// somehow does not end it.
pub fn die_of_sigpipe() -> ! {
    // SAFETY: SIG_DFL installs no handler, so no code of ours can run in signal
    // context; the call only changes the disposition of SIGPIPE, which nothing in
    // rigctl or its libraries relies on once it is ending (std set it to SIG_IGN and
    // never reads it back), and the previous handler it returns is not used.
    let _ = unsafe { signal::signal(Signal::SIGPIPE, SigHandler::SigDfl) };
    // A mask inherited from the parent could hold the signal pending forever.
    let mut pipe = SigSet::empty();
    pipe.add(Signal::SIGPIPE);
    let _ = pipe.thread_unblock();
    let _ = signal::raise(Signal::SIGPIPE);
    std::process::exit(128 + Signal::SIGPIPE as i32)
}
