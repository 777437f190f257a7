//! A session with rigd: the floor every lent resource stands on.
//!
//! ```no_run
//! # async fn demo() -> Result<(), rig_client::session::SessionError> {
//! use rig_client::session::Session;
//! let session = Session::open(rig_client::DEFAULT_SOCKET, "0000:03:00.0").await?;
//! let buf = session.alloc(64 << 10, 4096).await?;
//! buf.write(0, b"hello device")?;
//! println!("device address {:?}, {} bytes", buf.device_address(), buf.len());
//! session.free(buf).await?; // or just drop it
//! # Ok(()) }
//! ```
//!
//! Flow: gRPC `Dma.OpenSession` names the device and returns the session's id and a
//! one-time token → the side socket (`<socket>.fd`) claims it → every later request
//! ([`Session::call`]) goes over that one connection, one request and one reply (with
//! its descriptors) at a time. rigd reclaims everything the session holds when the
//! side connection closes, including when the process dies. DMA memory, channels
//! (`channel`), queues (`queue`) and whole-device leases (`lease`) are peers above
//! this module: each takes a `&Session` and speaks its own request and reply bodies
//! through [`Session::call`], so a new kind of lent resource is a module of its own
//! that edits none of the others.
//!
//! State: the credentials rigd gave at open (id, the device as named, how the device
//! addresses memory, block size, quota), the side socket behind an async mutex (one
//! exchange at a time: replies carry no request id), and the ledger of what the session
//! leases (`ledger`: leases mapped here, and the buffers carved from them) behind a
//! plain mutex, never held across an await. Every peer takes its memory from the
//! ledger ([`Session::alloc`]): pushbuffers and semaphores, queue rings, a runtime's
//! staging buffers.
//!
//! Wire: proto/proto/rig/v1/dma.proto (the session's messages), docs/dma.md. Not here:
//! the kernel interfaces, which are `rig_sys`'s and shared with rigd — the side socket
//! and its descriptors (`rig_sys::scm`), the seal check of every block received
//! (`rig_sys::memfd::SealedMemfd`: an unsealed block is refused, not mapped) and the
//! mappings (`rig_sys::mman`); rigd's reports of pools (`dma`), channels and queues;
//! connecting for unary calls (`Client`, which reconnects: a session never does).

pub mod arena;
mod gpu;
mod ledger;
mod side;

use std::{
    any::{Any, TypeId},
    collections::HashMap,
    io,
    os::fd::OwnedFd,
    path::{Path, PathBuf},
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use hyper_util::rt::TokioIo;
use rig_proto::v1::{self as pb, dma_client::DmaClient};
use tonic::{Code, transport::Channel};

pub use gpu::SessionGpu;
pub use ledger::{Buffer, LeaseInfo};
/// A session's number and a lease's handle: the shared vocabulary's.
pub use rig_model::dma::{LeaseId, SessionId};
/// The body of rigd's reply on the side socket.
pub use rig_proto::v1::session_reply::Body as Reply;
/// The body of a request on the side socket: one variant per kind of request, each
/// owned by the module that makes it.
pub use rig_proto::v1::session_request::Body as Request;
pub use rig_sys::memfd::MemfdError;

use crate::ClientError;

/// How the session's device reaches its memory, which kind of address its buffers'
/// device addresses are ([`DeviceAddr`]): the shared vocabulary's.
pub use rig_model::{addr::DeviceAddr, dma::Addressing};

/// Why rigd (or this library, before asking) refused a request of the session: the
/// side socket's own refusal, which every kind of request may get. Queues and device
/// leases add refusals of their own (`queue::QueueErrorKind`, `lease::LeaseErrorKind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionErrorKind {
    ZeroSize,
    /// Not a multiple of the block size, or an alignment that is not a power of two
    /// up to the block size.
    Misaligned,
    /// More than one lease, or the pool, can ever hold.
    Oversized,
    /// Over a quota: the uid's, per uid or per device (host memory), per uid or per
    /// GPU (GPU memory).
    Quota,
    /// No free blocks now.
    Exhausted,
    /// Sysfs mode: no physically contiguous run that long.
    NotContiguous,
    /// Not a lease of this session.
    UnknownLease,
    /// Unknown session, wrong token or peer.
    BadSession,
    Protocol,
    Internal,
    /// A channel's ring size: not a power of two 2..2^31, or over rigd's limit.
    BadRing,
    /// The session has the most channels it may have.
    ChannelLimit,
    /// Not an open channel of this session.
    UnknownChannel,
    /// The session's device serves no channels (not an RM-served GPU).
    NotServed,
    /// The GPU's driver refused a step; the message names it.
    Rm,
    /// The pool's device is leased whole to another session.
    Leased,
    /// Rings in GPU memory: rigd lends them to root and `[channels] gpu_rings_group`
    /// only.
    GpuRingsRefused,
    /// The caller lacks the role the request needs (docs/roles.md; rigd's reason
    /// `NOT_CLIENT` or `NOT_ADMIN`).
    RoleRequired,
    /// Not GPU memory of this session (another session's id included).
    UnknownGpuMemory,
    /// A CPU view of GPU memory: rigd lends them to root and `[channels]
    /// gpu_rings_group` only.
    CpuViewRefused,
    /// A channel of this session faulted: rigd freed the session's channels and opens
    /// no more for it; the message names the fault. A new session may open channels.
    ChannelFaulted,
    /// The GPU needs a reset (or is gone): rigd lends nothing on it until it is back.
    GpuLost,
    /// A kernel of this uid held the GPU past the driver's context switch timeout (a
    /// block that ran on for seconds beside another session's work): the uid opens no
    /// channel for a while; the message says how long.
    GpuTime,
    /// No such shared event: a handle not this session's, or a token never given
    /// (or its exporter closed it).
    UnknownEvent,
    /// A shared event of another uid: only the exporter's uid may import it.
    EventRefused,
    /// The shared event's exporter ended or closed it: it imports no more.
    EventGone,
    /// The session holds the most shared events it may.
    EventLimit,
}

impl SessionErrorKind {
    fn from_wire(code: i32) -> Self {
        use pb::SessionErrorCode as C;
        match C::try_from(code) {
            Ok(C::ZeroSize) => Self::ZeroSize,
            Ok(C::Misaligned) => Self::Misaligned,
            Ok(C::Oversized) => Self::Oversized,
            Ok(C::Quota) => Self::Quota,
            Ok(C::Exhausted) => Self::Exhausted,
            Ok(C::NotContiguous) => Self::NotContiguous,
            Ok(C::UnknownLease) => Self::UnknownLease,
            Ok(C::BadSession) => Self::BadSession,
            Ok(C::Protocol) => Self::Protocol,
            Ok(C::BadRing) => Self::BadRing,
            Ok(C::ChannelLimit) => Self::ChannelLimit,
            Ok(C::UnknownChannel) => Self::UnknownChannel,
            Ok(C::NotServed) => Self::NotServed,
            Ok(C::Rm) => Self::Rm,
            Ok(C::Leased) => Self::Leased,
            Ok(C::GpuRingsRefused) => Self::GpuRingsRefused,
            Ok(C::NotClient | C::NotAdmin) => Self::RoleRequired,
            Ok(C::UnknownGpuMemory) => Self::UnknownGpuMemory,
            Ok(C::CpuViewRefused) => Self::CpuViewRefused,
            Ok(C::ChannelFaulted) => Self::ChannelFaulted,
            Ok(C::GpuLost) => Self::GpuLost,
            Ok(C::GpuTime) => Self::GpuTime,
            Ok(C::UnknownEvent) => Self::UnknownEvent,
            Ok(C::EventRefused) => Self::EventRefused,
            Ok(C::EventGone) => Self::EventGone,
            Ok(C::EventLimit) => Self::EventLimit,
            _ => Self::Internal,
        }
    }
}

/// What a session's calls can fail with.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error(transparent)]
    Client(#[from] ClientError),
    /// A typed refusal; `message` is one line for a person.
    #[error("{message}")]
    Refused {
        kind: SessionErrorKind,
        message: String,
    },
    #[error("Failed to use rigd's side socket {path}")]
    Side {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("rigd ended the session")]
    Ended,
    #[error("Failed to map a lease's blocks")]
    Map(#[source] io::Error),
    /// A block rigd sent is not a memfd sealed against shrinking and growing, so
    /// mapping it could fault (SIGBUS) if it shrank; it is not mapped.
    #[error("A lease's block is not a sealed memfd")]
    Unsealed(#[source] MemfdError),
    #[error("Bytes {offset}..+{len} are outside the buffer")]
    OutOfRange { offset: u64, len: u64 },
    #[error("rigd's reply does not follow the session protocol: {0}")]
    Protocol(&'static str),
}

impl SessionError {
    /// The refusal's kind, when this is one.
    pub fn kind(&self) -> Option<SessionErrorKind> {
        match self {
            Self::Refused { kind, .. } => Some(*kind),
            _ => None,
        }
    }

    pub(crate) fn refused(kind: SessionErrorKind, message: impl Into<String>) -> Self {
        Self::Refused {
            kind,
            message: message.into(),
        }
    }
}

#[derive(Debug)]
struct Inner {
    id: SessionId,
    /// The function whose pool this session leases from, as the caller named it.
    device: String,
    block: u64,
    max_lease_blocks: u32,
    addressing: Addressing,
    quota: u64,
    side: tokio::sync::Mutex<side::Side>,
    ledger: Mutex<ledger::Ledger>,
    /// On an RM-served GPU, what rigd said of it at the claim.
    gpu: Option<SessionGpu>,
    /// State peers keep beside the session ([`Session::local`]), by type.
    locals: Mutex<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>,
}

impl Inner {
    fn ledger(&self) -> MutexGuard<'_, ledger::Ledger> {
        self.ledger.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A session with rigd on one device: its credentials, its side socket and the ledger
/// of the memory it leases.
#[derive(Debug)]
pub struct Session {
    inner: Arc<Inner>,
}

impl Session {
    /// Opens a session on `device`'s pool through rigd at `socket`.
    ///
    /// # Errors
    /// [`SessionError::Client`] (no daemon, permission, no such pool: `NotFound`),
    /// [`SessionError::Side`], [`SessionError::Refused`] when the claim is refused.
    pub async fn open(socket: impl AsRef<Path>, device: &str) -> Result<Self, SessionError> {
        let socket = socket.as_ref();
        let mut grpc = DmaClient::new(connect_once(socket).await?);
        let o = grpc
            .open_session(pb::DmaOpenRequest {
                device: device.to_owned(),
            })
            .await
            .map_err(rpc)?
            .into_inner();
        // The session lives on the side connection; the gRPC one closes when `grpc`
        // drops at the end of this function.
        let side = side::Side::connect(side::path_beside(socket))?;
        let claim = pb::SessionClaim {
            session: o.session,
            token: o.token,
        };
        let gpu = match side.call(Request::Claim(claim)).await? {
            (Reply::Claimed(c), _) => c.gpu.map(SessionGpu::from),
            (Reply::Error(e), _) => return Err(refusal(&e)),
            _ => {
                return Err(SessionError::Protocol("a claim must be answered `claimed`"));
            }
        };
        Ok(Self {
            inner: Arc::new(Inner {
                id: SessionId(o.session),
                device: device.to_owned(),
                block: o.block_bytes,
                max_lease_blocks: o.max_lease_blocks,
                addressing: rig_proto::convert::dma::addressing(o.addressing),
                quota: o.quota_bytes,
                side: tokio::sync::Mutex::new(side),
                ledger: Mutex::new(ledger::Ledger::new()),
                gpu,
                locals: Mutex::new(HashMap::new()),
            }),
        })
    }

    /// The session's number (as `rigctl dma` shows it).
    pub fn id(&self) -> SessionId {
        self.inner.id
    }

    /// The function whose pool the session leases from, as it was named at open.
    pub fn device(&self) -> &str {
        &self.inner.device
    }

    /// How the device reaches this session's memory.
    pub fn addressing(&self) -> Addressing {
        self.inner.addressing
    }

    /// The block size rigd leases in (2 MiB).
    pub fn block_bytes(&self) -> u64 {
        self.inner.block
    }

    /// What this uid could still lease from the pool when the session opened.
    pub fn quota_bytes(&self) -> u64 {
        self.inner.quota
    }

    /// On an RM-served GPU: its geometry and the layout of this session's address
    /// space there, as rigd said at the claim. `None` on any other device.
    pub fn gpu(&self) -> Option<&SessionGpu> {
        self.inner.gpu.as_ref()
    }

    /// The value of type `T` that a peer module keeps beside this session (a cache of
    /// what the session holds: `gpumem`'s pages), made with `T::default()` on first use
    /// and dropped with the session. One value per type: a peer keeps its state in a
    /// type of its own, so peers never see each other's.
    pub fn local<T: Any + Default + Send + Sync>(&self) -> Arc<T> {
        let mut locals = self
            .inner
            .locals
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let any = Arc::clone(
            locals
                .entry(TypeId::of::<T>())
                .or_insert_with(|| Arc::new(T::default())),
        );
        drop(locals);
        any.downcast::<T>()
            .expect("the value under T's TypeId is a T: only this function inserts")
    }

    /// One request on the session's side socket, and rigd's reply with the
    /// descriptors it carries: the plumbing every peer of this module (and a crate
    /// built on this one) speaks its own requests through. Requests are served one at
    /// a time, in order. rigd's generic refusal (`Reply::Error`) comes back as
    /// [`SessionError::Refused`]; any other reply is the caller's to read, and one it
    /// did not expect is [`SessionError::Protocol`].
    ///
    /// # Errors
    /// [`SessionError::Refused`], [`SessionError::Side`] on socket errors,
    /// [`SessionError::Ended`] when rigd closed the session,
    /// [`SessionError::Protocol`] for a reply that does not decode.
    pub async fn call(&self, body: Request) -> Result<(Reply, Vec<OwnedFd>), SessionError> {
        let answer = self.inner.side.lock().await.call(body).await?;
        match answer {
            (Reply::Error(e), _) => Err(refusal(&e)),
            other => Ok(other),
        }
    }
}

/// rigd's generic refusal as this crate's error.
fn refusal(e: &pb::SessionError) -> SessionError {
    SessionError::refused(SessionErrorKind::from_wire(e.code), e.message.clone())
}

fn rpc(s: tonic::Status) -> SessionError {
    match s.code() {
        Code::Unimplemented => SessionError::Client(ClientError::DaemonTooOld {
            path: PathBuf::new(),
            daemon: 0,
            needed: rig_proto::API_VERSION,
        }),
        _ => SessionError::Client(ClientError::rpc(s)),
    }
}

/// A gRPC channel on one connection to `path`; it does not reconnect, because a
/// session lives and dies with its connection.
async fn connect_once(path: &Path) -> Result<Channel, ClientError> {
    let stream = tokio::net::UnixStream::connect(path)
        .await
        .map_err(|e| crate::client::diagnose(path, e))?;
    let first = Arc::new(Mutex::new(Some(stream)));
    tonic::transport::Endpoint::from_static("http://rigd")
        .connect_with_connector(tower::service_fn(move |_| {
            let taken = first.lock().unwrap_or_else(PoisonError::into_inner).take();
            async move {
                let s = taken.ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::NotConnected,
                        "the session's connection closed",
                    )
                })?;
                Ok::<_, io::Error>(TokioIo::new(s))
            }
        }))
        .await
        .map_err(|source| ClientError::Channel {
            path: path.to_owned(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_side_socket_sits_beside_the_main_one() {
        assert_eq!(
            side::path_beside(Path::new("/run/rig/rigd.sock")),
            Path::new("/run/rig/rigd.sock.fd")
        );
    }

    #[test]
    fn wire_codes_map_to_kinds_and_unknown_ones_to_internal() {
        assert_eq!(
            SessionErrorKind::from_wire(pb::SessionErrorCode::UnknownLease.into()),
            SessionErrorKind::UnknownLease
        );
        assert_eq!(SessionErrorKind::from_wire(999), SessionErrorKind::Internal);
    }
}
