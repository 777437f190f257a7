//! The side socket's client end: one request, one reply (with the descriptors it
//! carries: a lease's blocks, a channel's ring and doorbell, a device's fd), at a time.
//! The socket is `rig_sys::scm`'s; this file frames the session's messages on it.

use std::{
    ffi::OsString,
    io,
    os::fd::OwnedFd,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use prost::Message;
use rig_proto::v1 as pb;
use rig_sys::scm;
use tokio::io::{Interest, unix::AsyncFd};

use super::{Reply, Request, SessionError};

/// Replies are a few dozen bytes.
const MAX_REPLY: usize = 512;

/// How long a call looks for its reply without sleeping before it waits for the socket
/// to become readable: a lease or a release of GPU memory is answered within tens of
/// microseconds, and on a VM's idle CPUs the wake-up after a sleep costs about as much
/// again (docs/compute.md, "Spare pages"). A call answered later costs this much CPU.
pub const REPLY_SPIN: Duration = Duration::from_micros(100);

/// `<socket>.fd`: where rigd binds the side socket beside its main one.
pub fn path_beside(socket: &Path) -> PathBuf {
    let mut p = OsString::from(socket.as_os_str());
    p.push(".fd");
    PathBuf::from(p)
}

/// A connected side socket.
#[derive(Debug)]
pub struct Side {
    fd: AsyncFd<OwnedFd>,
    path: PathBuf,
}

impl Side {
    /// Connects to the side socket at `path`.
    ///
    /// # Errors
    /// [`SessionError::Side`].
    pub fn connect(path: PathBuf) -> Result<Self, SessionError> {
        match scm::connect(&path).and_then(scm::register) {
            Ok(fd) => Ok(Self { fd, path }),
            Err(source) => Err(SessionError::Side { path, source }),
        }
    }

    /// Sends `body` and waits for the reply and its descriptors.
    ///
    /// # Errors
    /// [`SessionError::Side`] on socket errors, [`SessionError::Ended`] when rigd closed the
    /// connection, [`SessionError::Protocol`] for a reply that does not decode.
    pub async fn call(&self, body: Request) -> Result<(Reply, Vec<OwnedFd>), SessionError> {
        let bytes = pb::SessionRequest { body: Some(body) }.encode_to_vec();
        let io = |source| SessionError::Side {
            path: self.path.clone(),
            source,
        };
        self.fd
            .async_io(Interest::WRITABLE, |s| scm::send(s, &bytes, &[]))
            .await
            .map_err(|e| match e.raw_os_error() {
                Some(nix::libc::EPIPE | nix::libc::ECONNRESET) => SessionError::Ended,
                _ => io(e),
            })?;
        let mut buf = [0u8; MAX_REPLY];
        let deadline = Instant::now() + REPLY_SPIN;
        let early = loop {
            match scm::recv(self.fd.get_ref(), &mut buf) {
                Ok(p) => break Some(p),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && Instant::now() < deadline => {
                    std::hint::spin_loop();
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break None,
                Err(e) => return Err(io(e)),
            }
        };
        let scm::Packet {
            len,
            truncated,
            fds,
        } = match early {
            Some(p) => p,
            None => self
                .fd
                .async_io(Interest::READABLE, |s| scm::recv(s, &mut buf))
                .await
                .map_err(io)?,
        };
        if len == 0 {
            return Err(SessionError::Ended);
        }
        if truncated {
            return Err(SessionError::Protocol("reply too long"));
        }
        let reply = buf
            .get(..len)
            .and_then(|b| pb::SessionReply::decode(b).ok())
            .ok_or(SessionError::Protocol("malformed reply"))?;
        let body = reply.body.ok_or(SessionError::Protocol("empty reply"))?;
        Ok((body, fds))
    }
}
