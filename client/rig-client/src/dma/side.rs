//! The side socket's client end: one request, one reply (with the lease's block
//! descriptors), at a time.

use std::{
    ffi::OsString,
    os::fd::OwnedFd,
    path::{Path, PathBuf},
};

use prost::Message;
use rig_proto::v1 as pb;
use rig_sys::scm;
use tokio::io::{Interest, unix::AsyncFd};

use super::DmaError;

/// Replies are a few dozen bytes.
const MAX_REPLY: usize = 512;

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
    /// [`DmaError::Side`].
    pub fn connect(path: PathBuf) -> Result<Self, DmaError> {
        match scm::connect(&path).and_then(scm::register) {
            Ok(fd) => Ok(Self { fd, path }),
            Err(source) => Err(DmaError::Side { path, source }),
        }
    }

    /// Sends `body` and waits for the reply and its descriptors.
    ///
    /// # Errors
    /// [`DmaError::Side`] on socket errors, [`DmaError::Ended`] when rigd closed the
    /// connection, [`DmaError::Protocol`] for a reply that does not decode.
    pub async fn call(
        &self,
        body: pb::dma_side_request::Body,
    ) -> Result<(pb::dma_side_reply::Body, Vec<OwnedFd>), DmaError> {
        let bytes = pb::DmaSideRequest { body: Some(body) }.encode_to_vec();
        let io = |source| DmaError::Side {
            path: self.path.clone(),
            source,
        };
        self.fd
            .async_io(Interest::WRITABLE, |s| scm::send(s, &bytes, &[]))
            .await
            .map_err(|e| match e.raw_os_error() {
                Some(nix::libc::EPIPE | nix::libc::ECONNRESET) => DmaError::Ended,
                _ => io(e),
            })?;
        let mut buf = [0u8; MAX_REPLY];
        let scm::Packet {
            len,
            truncated,
            fds,
        } = self
            .fd
            .async_io(Interest::READABLE, |s| scm::recv(s, &mut buf))
            .await
            .map_err(io)?;
        if len == 0 {
            return Err(DmaError::Ended);
        }
        if truncated {
            return Err(DmaError::Protocol("reply too long"));
        }
        let reply = buf
            .get(..len)
            .and_then(|b| pb::DmaSideReply::decode(b).ok())
            .ok_or(DmaError::Protocol("malformed reply"))?;
        let body = reply.body.ok_or(DmaError::Protocol("empty reply"))?;
        Ok((body, fds))
    }
}
