//! A Unix socket peer's supplementary groups: `getsockopt(SO_PEERGROUPS)` (Linux 4.13,
//! `net/core/sock.c`, `sk_get_peer_cred` → `groupinfo`), the groups of the credentials
//! the kernel captured when the peer connected. Unlike `/proc/<pid>/status` they cannot
//! belong to another process that reused the pid, nor change with a later setgroups:
//! they are the ones that were checked against the socket file's mode. Ids come
//! translated into this process's user namespace (`from_kgid_munged`). Callers: the
//! gRPC and side-socket accept paths (`service::peer`); `policy` keeps `/proc` only for
//! kernels without the option.

use std::{
    io,
    os::fd::{AsFd, AsRawFd},
};

/// Groups a peer may have before the kernel's answer is read again at its size
/// (`NGROUPS_MAX` is 65536; most processes have a handful).
const FIRST_TRY: usize = 64;

/// The supplementary groups of the peer of the connected Unix socket `fd`.
///
/// # Errors
/// `ENOPROTOOPT` on kernels before 4.13 (or a socket that is not AF_UNIX); `ENODATA`
/// when the peer has no credentials (a socket that is not connected); any other
/// getsockopt(2) failure.
pub fn peer_groups(fd: impl AsFd) -> io::Result<Vec<u32>> {
    let fd = fd.as_fd();
    let mut groups: Vec<libc::gid_t> = vec![0; FIRST_TRY];
    loop {
        let bytes = groups.len() * std::mem::size_of::<libc::gid_t>();
        let mut len = libc::socklen_t::try_from(bytes)
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: `fd` is a live descriptor borrowed for the call; `groups` is an owned
        // buffer of exactly `len` bytes that outlives the call, and the kernel writes at
        // most `len` bytes into it (it answers ERANGE with the needed size instead of
        // writing past it); `len` is a valid socklen_t it may update. The result is
        // checked below.
        let r = unsafe {
            libc::getsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_PEERGROUPS,
                groups.as_mut_ptr().cast(),
                &raw mut len,
            )
        };
        let needed =
            usize::try_from(len).unwrap_or(usize::MAX) / std::mem::size_of::<libc::gid_t>();
        if r == 0 {
            groups.truncate(needed.min(groups.len()));
            return Ok(groups);
        }
        let e = io::Error::last_os_error();
        // ERANGE: the buffer was short; `len` now says how long it must be.
        if e.raw_os_error() == Some(libc::ERANGE) && needed > groups.len() {
            groups.resize(needed, 0);
            continue;
        }
        return Err(e);
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::net::UnixStream;

    use super::*;

    /// This process's supplementary groups, as getgroups(2) reports them.
    fn own_groups() -> Vec<u32> {
        let mut g: Vec<u32> = nix::unistd::getgroups()
            .expect("getgroups")
            .into_iter()
            .map(nix::unistd::Gid::as_raw)
            .collect();
        g.sort_unstable();
        g
    }

    #[test]
    fn a_socketpair_peer_has_this_process_groups() {
        let (a, b) = UnixStream::pair().expect("socketpair");
        let mut got = peer_groups(&a).expect("SO_PEERGROUPS on a socketpair");
        got.sort_unstable();
        assert_eq!(got, own_groups());
        let mut other = peer_groups(&b).expect("the other end");
        other.sort_unstable();
        assert_eq!(other, got);
    }

    #[test]
    fn more_groups_than_the_first_buffer_are_read_whole() {
        // Only root may set groups (CI and the disposable machine run tests as root).
        if !nix::unistd::geteuid().is_root() {
            eprintln!("skipped: needs root for setgroups");
            return;
        }
        let n = u32::try_from(3 * FIRST_TRY).expect("small");
        let many: Vec<nix::unistd::Gid> = (70_000..70_000 + n)
            .map(nix::unistd::Gid::from_raw)
            .collect();
        // The groups a peer shows are those of the process that connected: a child with
        // the many groups connects to a listener here.
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("s");
        let listener = std::os::unix::net::UnixListener::bind(&path).expect("bind");
        let child = std::thread::spawn(move || {
            // setgroups is per thread at the kernel level (glibc broadcasts it; the
            // raw syscall does not), so this thread alone takes the groups.
            let gids: Vec<libc::gid_t> = many.iter().map(|g| g.as_raw()).collect();
            // SAFETY: `gids` is alive and holds exactly `gids.len()` ids for the call;
            // the raw syscall changes only this thread's credentials. Checked below.
            let r = unsafe { libc::syscall(libc::SYS_setgroups, gids.len(), gids.as_ptr()) };
            assert_eq!(r, 0, "setgroups: {}", io::Error::last_os_error());
            UnixStream::connect(&path).expect("connect")
        });
        let (server, _) = listener.accept().expect("accept");
        let _client = child.join().expect("child");
        let mut got = peer_groups(&server).expect("SO_PEERGROUPS");
        got.sort_unstable();
        let want: Vec<u32> = (70_000..70_000 + n).collect();
        assert_eq!(got, want);
    }
}
