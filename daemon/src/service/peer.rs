//! Who is on the other end of a gRPC connection, read once at accept time: SO_PEERCRED
//! (uid, gid, pid, as tokio reads it) and SO_PEERGROUPS (`sys::peergroups`), the
//! supplementary groups the kernel captured at connect(2). `policy` decides roles from
//! those groups, so a pid reused by another process, or a setgroups after connecting,
//! changes nothing for a connection; only a kernel without SO_PEERGROUPS (before 4.13)
//! leaves `groups` empty and `policy` reads /proc instead.
//!
//! [`Incoming`] wraps the listener's stream for tonic; each request's extensions then
//! hold a [`Peer`] (instead of tonic's `UdsConnectInfo`), which `gate` and the handlers
//! read through [`Peer::of`].

use std::{
    io,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use rig_sys::scm::PeerCred;
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::{UnixListener, UnixStream},
};
use tokio_stream::{Stream, wrappers::UnixListenerStream};
use tonic::transport::server::{Connected, UdsConnectInfo};

/// A connection's peer, as every request on it carries it.
#[derive(Debug, Clone)]
pub struct Peer {
    /// `None` when the kernel gave no credentials (tokio reads SO_PEERCRED on Linux,
    /// which always has them).
    pub cred: Option<PeerCred>,
    /// The supplementary groups of SO_PEERGROUPS; `None` where the kernel lacks it.
    pub groups: Option<Arc<[u32]>>,
}

impl Peer {
    fn of_stream(s: &UnixStream) -> Self {
        let info: UdsConnectInfo = s.connect_info();
        let cred = info.peer_cred.and_then(|c| {
            Some(PeerCred {
                uid: c.uid(),
                gid: c.gid(),
                pid: c.pid()?,
            })
        });
        let groups = match crate::sys::peergroups::peer_groups(s) {
            Ok(g) => Some(Arc::from(g)),
            Err(e) => {
                tracing::debug!("SO_PEERGROUPS: {e}; the caller's groups come from /proc");
                None
            }
        };
        Self { cred, groups }
    }

    /// The peer of the connection `extensions` came on (a request's or an http one's).
    pub fn of(extensions: &http::Extensions) -> Option<&Self> {
        extensions.get::<Self>()
    }
}

/// A Unix connection that tells tonic its [`Peer`].
#[derive(Debug)]
pub struct Conn {
    stream: UnixStream,
    peer: Peer,
}

impl Connected for Conn {
    type ConnectInfo = Peer;

    fn connect_info(&self) -> Peer {
        self.peer.clone()
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

/// The listener's connections, each with its [`Peer`] read at accept.
#[derive(Debug)]
pub struct Incoming(UnixListenerStream);

impl Incoming {
    pub fn new(listener: UnixListener) -> Self {
        Self(UnixListenerStream::new(listener))
    }
}

impl Stream for Incoming {
    type Item = io::Result<Conn>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        Pin::new(&mut self.0).poll_next(cx).map(|next| {
            next.map(|accepted| {
                accepted.map(|stream| Conn {
                    peer: Peer::of_stream(&stream),
                    stream,
                })
            })
        })
    }
}
