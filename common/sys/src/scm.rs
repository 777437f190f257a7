//! Unix `SOCK_SEQPACKET` sockets that carry file descriptors (unix(7) `SCM_RIGHTS`)
//! and report their peer (`SO_PEERCRED`), and the one type for a peer's credentials.
//!
//! Flow: rigd [`listen`]s on the DMA side socket and [`accept`]s; a client
//! [`connect`]s; both [`register`] the socket with tokio and exchange packets with
//! [`send`] and [`recv`]. A lease's reply carries its blocks' descriptors.
//!
//! Invariants: sockets are non-blocking and close-on-exec; callers wait for readiness
//! with tokio's `AsyncFd`. A packet is one message: its bytes and its descriptors arrive
//! together, and every descriptor received is owned (closed on drop) from the moment it
//! is installed. [`PeerCred`] is what the kernel recorded at connect time, never what
//! a peer says.
//!
//! Not here: what the packets mean (`rig-proto`'s `Session*` messages, encoded by
//! `rigd::service::dma::side` and `rig_client::session`); credentials of gRPC connections,
//! which tonic reads and `rigd::service` turns into a [`PeerCred`].

use std::{
    io::{self, IoSlice, IoSliceMut},
    os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd},
    path::Path,
};

use tokio::io::unix::AsyncFd;

use nix::sys::socket::{
    self, AddressFamily, Backlog, ControlMessage, ControlMessageOwned, MsgFlags, SockFlag,
    SockType, UnixAddr, sockopt,
};

/// The most descriptors one packet may carry (`SCM_MAX_FD` in include/net/scm.h).
pub const MAX_FDS: usize = 253;

/// Who is at the other end of a Unix socket, as the kernel recorded it at connect
/// time (`struct ucred`, unix(7) `SO_PEERCRED`): what rigd authorises by (admin
/// requests, DMA quotas) and what ties a side-socket connection to its DMA session.
///
/// `pid` is as the kernel reports it to this process: 0 when the peer's process is
/// outside this process's pid namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerCred {
    /// The peer's effective uid.
    pub uid: u32,
    /// The peer's effective gid (its supplementary groups are not in `ucred`).
    pub gid: u32,
    pub pid: i32,
}

/// One received packet.
#[derive(Debug)]
pub struct Packet {
    /// Bytes received; 0 means the peer closed the connection.
    pub len: usize,
    /// The packet was longer than the buffer and was cut (`MSG_TRUNC`).
    pub truncated: bool,
    /// Descriptors that came with it, now owned by this process.
    pub fds: Vec<OwnedFd>,
}

/// Binds and listens on a `SOCK_SEQPACKET` socket at `path` (which must not exist).
///
/// # Errors
/// socket(2), bind(2) or listen(2) failures.
pub fn listen(path: &Path) -> io::Result<OwnedFd> {
    let fd = seqpacket()?;
    let addr = UnixAddr::new(path)?;
    socket::bind(fd.as_raw_fd(), &addr)?;
    socket::listen(&fd, Backlog::new(1024)?)?;
    Ok(fd)
}

/// Connects to a `SOCK_SEQPACKET` listener at `path` (non-blocking once connected).
///
/// # Errors
/// socket(2) or connect(2) failures: `ENOENT`, `ECONNREFUSED`, `EACCES`.
pub fn connect(path: &Path) -> io::Result<OwnedFd> {
    let fd = seqpacket()?;
    let addr = UnixAddr::new(path)?;
    socket::connect(fd.as_raw_fd(), &addr)?;
    Ok(fd)
}

fn seqpacket() -> io::Result<OwnedFd> {
    Ok(socket::socket(
        AddressFamily::Unix,
        SockType::SeqPacket,
        SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
        None,
    )?)
}

/// Accepts one connection, non-blocking and close-on-exec.
///
/// # Errors
/// `EAGAIN` when none is pending, or accept4(2)'s other errors.
pub fn accept(listener: impl AsFd) -> io::Result<OwnedFd> {
    Ok(socket::accept4(
        listener,
        SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
    )?)
}

/// The connected peer's uid, gid and pid (`SO_PEERCRED`).
///
/// # Errors
/// getsockopt(2) failures.
pub fn peer(fd: impl AsFd) -> io::Result<PeerCred> {
    let c = socket::getsockopt(&fd, sockopt::PeerCredentials)?;
    Ok(PeerCred {
        uid: c.uid(),
        gid: c.gid(),
        pid: c.pid(),
    })
}

/// Sends one packet of `data` with `fds` attached (`MSG_NOSIGNAL`: a closed peer is
/// `EPIPE`, not a signal).
///
/// # Errors
/// `EAGAIN` when the socket's buffer is full, `EPIPE` when the peer is gone,
/// `EINVAL` for more than [`MAX_FDS`] descriptors.
pub fn send(fd: impl AsFd, data: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
    if fds.len() > MAX_FDS {
        return Err(io::ErrorKind::InvalidInput.into());
    }
    let raw: Vec<RawFd> = fds.iter().map(AsRawFd::as_raw_fd).collect();
    let rights = [ControlMessage::ScmRights(&raw)];
    let cmsgs: &[ControlMessage<'_>] = if raw.is_empty() { &[] } else { &rights };
    let sent = socket::sendmsg::<()>(
        fd.as_fd().as_raw_fd(),
        &[IoSlice::new(data)],
        cmsgs,
        MsgFlags::MSG_NOSIGNAL,
        None,
    )?;
    if sent == data.len() {
        Ok(())
    } else {
        Err(io::ErrorKind::WriteZero.into())
    }
}

/// Receives one packet into `buf`, taking ownership of any descriptors it carried.
///
/// # Errors
/// `EAGAIN` when no packet is waiting; recvmsg(2)'s other errors.
pub fn recv(fd: impl AsFd, buf: &mut [u8]) -> io::Result<Packet> {
    let mut space = nix::cmsg_space!([RawFd; MAX_FDS]);
    let mut iov = [IoSliceMut::new(buf)];
    let msg = socket::recvmsg::<()>(
        fd.as_fd().as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )?;
    let mut fds = Vec::new();
    for cmsg in msg.cmsgs()? {
        if let ControlMessageOwned::ScmRights(raw) = cmsg {
            fds.extend(raw.into_iter().map(own));
        }
    }
    Ok(Packet {
        len: msg.bytes,
        truncated: msg.flags.contains(MsgFlags::MSG_TRUNC),
        fds,
    })
}

/// Registers a socket with tokio's reactor (it must be non-blocking, as every socket
/// made here is).
///
/// # Errors
/// epoll registration failures.
///
/// # Panics
/// Outside a tokio runtime.
pub fn register(fd: OwnedFd) -> io::Result<AsyncFd<OwnedFd>> {
    // SAFETY: an `OwnedFd` is a valid open descriptor that nothing else closes; the
    // `AsyncFd` takes ownership of it, and `OwnedFd::as_raw_fd` always returns that
    // same descriptor until the `AsyncFd` drops it.
    Ok(unsafe { AsyncFd::register(fd) }?)
}

fn own(fd: RawFd) -> OwnedFd {
    // SAFETY: the kernel has just installed `fd` in this process's table for this
    // SCM_RIGHTS message (close-on-exec); nothing else knows it, so this is its one
    // owner, and it is closed when dropped.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        memfd::{Backing, Memfd, SealedMemfd, sealed_for_test as sealed},
        mman::{Fill, Mapping},
    };

    /// A listener, and both ends of one connection to it.
    fn pair(dir: &tempfile::TempDir) -> (OwnedFd, OwnedFd, OwnedFd) {
        let path = dir.path().join("s.fd");
        let listener = listen(&path).expect("listen");
        let client = connect(&path).expect("connect");
        let server = accept(&listener).expect("accept");
        (listener, client, server)
    }

    #[test]
    fn packets_carry_bytes_and_descriptors_and_report_the_peer() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (_l, client, server) = pair(&dir);
        let me = peer(&server).expect("peer");
        assert_eq!(me.uid, nix::unistd::geteuid().as_raw());
        assert_eq!(me.pid, std::process::id().cast_signed());

        let file = Memfd::create(c"rig-test", Backing::Shmem).expect("memfd");
        file.set_len(4096).expect("size");
        send(&server, b"lease", &[file.as_fd()]).expect("send");
        let mut buf = [0u8; 16];
        let p = recv(&client, &mut buf).expect("recv");
        assert_eq!(&buf[..p.len], b"lease");
        assert!(!p.truncated);
        assert_eq!(p.fds.len(), 1);
        let size = nix::sys::stat::fstat(&p.fds[0]).expect("fstat").st_size;
        assert_eq!(size, 4096);
    }

    #[test]
    fn a_closed_peer_reads_as_zero_bytes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (_l, client, server) = pair(&dir);
        drop(client);
        let p = recv(&server, &mut [0u8; 8]).expect("eof");
        assert_eq!(p.len, 0);
    }

    #[test]
    fn sealed_blocks_cross_in_order_and_share_their_pages() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (_l, client, server) = pair(&dir);
        let blocks = [sealed(4096), sealed(8192), sealed(12288)];
        let fds: Vec<_> = blocks.iter().map(AsFd::as_fd).collect();
        send(&server, b"leased", &fds).expect("send");
        let mut buf = [0u8; 16];
        let p = recv(&client, &mut buf).expect("recv");
        assert_eq!(&buf[..p.len], b"leased");
        let got: Vec<SealedMemfd> = p
            .fds
            .into_iter()
            .map(|fd| SealedMemfd::check(fd).expect("still sealed"))
            .collect();
        let lens: Vec<u64> = got.iter().map(SealedMemfd::len).collect();
        assert_eq!(lens, [4096, 8192, 12288]);
        let theirs = Mapping::shared(&blocks[1], Fill::Lazy).expect("sender's map");
        let ours = Mapping::shared(&got[1], Fill::Lazy).expect("receiver's map");
        theirs.write(8000, b"dma").expect("write");
        let mut seen = [0u8; 3];
        ours.read(8000, &mut seen).expect("read");
        assert_eq!(&seen, b"dma");
    }

    #[test]
    fn received_descriptors_are_close_on_exec() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (_l, client, server) = pair(&dir);
        let file = sealed(4096);
        send(&server, b"x", &[file.as_fd()]).expect("send");
        let p = recv(&client, &mut [0u8; 4]).expect("recv");
        let flags = nix::fcntl::fcntl(&p.fds[0], nix::fcntl::FcntlArg::F_GETFD).expect("getfd");
        let flags = nix::fcntl::FdFlag::from_bits_truncate(flags);
        assert!(flags.contains(nix::fcntl::FdFlag::FD_CLOEXEC));
    }

    #[test]
    fn more_descriptors_than_the_kernel_carries_are_refused_before_sending() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (_l, client, server) = pair(&dir);
        let file = sealed(4096);
        let too_many = vec![file.as_fd(); MAX_FDS + 1];
        let e = send(&server, b"x", &too_many).expect_err("254 descriptors");
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        let nothing = recv(&client, &mut [0u8; 4]).expect_err("nothing was sent");
        assert_eq!(nothing.raw_os_error(), Some(nix::libc::EAGAIN));
        send(&server, b"x", &too_many[..MAX_FDS]).expect("253 descriptors");
        let p = recv(&client, &mut [0u8; 4]).expect("recv");
        assert_eq!(p.fds.len(), MAX_FDS);
    }

    #[test]
    fn a_packet_longer_than_the_buffer_is_cut_and_says_so() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (_l, client, server) = pair(&dir);
        send(&server, b"0123456789", &[]).expect("send");
        let mut buf = [0u8; 4];
        let p = recv(&client, &mut buf).expect("recv");
        assert!(p.truncated);
        assert_eq!(&buf, b"0123");
        assert!(p.fds.is_empty());
    }

    #[tokio::test]
    async fn registered_sockets_round_trip_a_descriptor_through_tokio() {
        use tokio::io::Interest;
        let dir = tempfile::tempdir().expect("tempdir");
        let (_l, client, server) = pair(&dir);
        let (client, server) = (
            register(client).expect("register client"),
            register(server).expect("register server"),
        );
        let file = sealed(4096);
        server
            .async_io(Interest::WRITABLE, |s| send(s, b"ok", &[file.as_fd()]))
            .await
            .expect("send");
        let mut buf = [0u8; 8];
        let p = client
            .async_io(Interest::READABLE, |s| recv(s, &mut buf))
            .await
            .expect("recv");
        assert_eq!(&buf[..p.len], b"ok");
        let got = SealedMemfd::check(p.fds.into_iter().next().expect("one fd")).expect("sealed");
        assert_eq!(got.len(), 4096);
    }
}
