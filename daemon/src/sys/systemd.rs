//! Sockets handed over by systemd (sd_listen_fds(3)): fds 3.. when LISTEN_PID is ours.

use std::{
    io,
    os::{
        fd::{FromRawFd, OwnedFd, RawFd},
        unix::net::UnixListener,
    },
};

/// The first listening socket systemd passed, if any. Clears the LISTEN_* variables
/// (through sd-notify) so children do not inherit them.
///
/// # Errors
/// When LISTEN_FDS is malformed, or the passed fd is not a Unix stream listener.
pub fn take_listener() -> io::Result<Option<UnixListener>> {
    let mut fds = sd_notify::listen_fds()?;
    let Some(fd) = fds.next() else {
        return Ok(None);
    };
    let owned = own(fd);
    let listener = UnixListener::from(owned);
    // A socket that is not AF_UNIX/SOCK_STREAM fails here rather than at accept().
    listener.local_addr()?;
    Ok(Some(listener))
}

fn own(fd: RawFd) -> OwnedFd {
    // SAFETY: sd_notify::listen_fds() yields fds in 3..3+LISTEN_FDS only when LISTEN_PID
    // names this process; systemd opened them for us and nothing else in rigd owns them,
    // and the iterator yields each once, so this is the sole owner. A fd that is not a
    // socket is caught by the caller's local_addr() check.
    unsafe { OwnedFd::from_raw_fd(fd) }
}
