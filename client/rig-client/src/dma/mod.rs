//! DMA memory from rigd: buffers a device can reach, mapped in this process.
//!
//! ```no_run
//! # async fn demo() -> Result<(), rig_client::dma::DmaError> {
//! use rig_client::dma::Session;
//! let session = Session::open(rig_client::DEFAULT_SOCKET, "0000:03:00.0").await?;
//! let buf = session.alloc(64 << 10, 4096).await?;
//! buf.write(0, b"hello device")?;
//! println!("device address {:?}, {} bytes", buf.device_address(), buf.len());
//! session.free(buf).await?; // or just drop it
//! # Ok(()) }
//! ```
//!
//! A [`Session`] is opened with gRPC (`Dma.OpenSession`) and lives on one side-socket
//! connection (`<socket>.fd`); rigd reclaims everything the session holds when that
//! connection closes, including when the process dies. rigd lends whole 2 MiB blocks ([`Session::lease`]);
//! [`Session::alloc`] carves buffers out of them here, with no round trip, and leases
//! more blocks only when none has room. Handles ([`LeaseId`]) are valid in their own
//! session only.
//!
//! Buffers are device-visible memory: the device (and rigd) may write them at any
//! time, so this API gives volatile copies ([`Buffer::read`], [`Buffer::write`]) and a
//! raw pointer, never a `&[u8]`.
//!
//! Not here: the kernel interfaces, which are `rig_sys`'s and shared with rigd —
//! the side socket and its descriptors (`rig_sys::scm`), the seal check of every block
//! received (`rig_sys::memfd::SealedMemfd`: an unsealed block is refused, not mapped)
//! and the mappings (`rig_sys::mman`). This crate has no `unsafe`.

mod alloc;
mod lease;
mod queue;
mod side;
mod status;

use std::{
    io,
    os::fd::OwnedFd,
    path::{Path, PathBuf},
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use hyper_util::rt::TokioIo;
use rig_proto::v1::{
    self as pb, dma_client::DmaClient, dma_side_reply::Body as Reply,
    dma_side_request::Body as Request,
};
use rig_sys::{
    memfd::SealedMemfd,
    mman::{Fill, Mapping},
};
use tonic::{Code, transport::Channel};

pub use lease::{Bar, DeviceLease, GivenBack, LeaseErrorKind, LeaseMode, Region};
pub use queue::{
    LentQueue, QueueErrorKind, QueueInfo, ShadowBell, open_isolated_queue, queue_bytes,
    queue_status,
};
pub use rig_sys::memfd::MemfdError;
pub use status::{Addressing, ChannelFaultInfo, ChannelInfo, ClientUse, DmaStatus, PoolStatus};

use crate::ClientError;

/// A lease's handle, valid in the session that made it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct LeaseId(pub u64);

/// Why rigd (or this library, before asking) refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DmaErrorKind {
    ZeroSize,
    /// Not a multiple of the block size, or an alignment that is not a power of two
    /// up to the block size.
    Misaligned,
    /// More than one lease, or the pool, can ever hold.
    Oversized,
    /// Over the uid's quota, per uid or per device.
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
    /// The caller lacks the role the request needs (docs/roles.md; rigd's reason
    /// `NOT_CLIENT` or `NOT_ADMIN`).
    RoleRequired,
}

impl DmaErrorKind {
    fn from_wire(code: i32) -> Self {
        use pb::DmaErrorCode as C;
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
            Ok(C::NotClient | C::NotAdmin) => Self::RoleRequired,
            _ => Self::Internal,
        }
    }
}

/// What a DMA call can fail with.
#[derive(Debug, thiserror::Error)]
pub enum DmaError {
    #[error(transparent)]
    Client(#[from] ClientError),
    /// A typed refusal; `message` is one line for a person.
    #[error("{message}")]
    Refused { kind: DmaErrorKind, message: String },
    #[error("Failed to use rigd's DMA side socket {path}")]
    Side {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("rigd ended the DMA session")]
    Ended,
    #[error("Failed to map a lease's blocks")]
    Map(#[source] io::Error),
    /// A block rigd sent is not a memfd sealed against shrinking and growing, so
    /// mapping it could fault (SIGBUS) if it shrank; it is not mapped.
    #[error("A lease's block is not a sealed memfd")]
    Unsealed(#[source] MemfdError),
    #[error("Bytes {offset}..+{len} are outside the buffer")]
    OutOfRange { offset: u64, len: u64 },
    #[error("rigd's reply does not follow the DMA protocol: {0}")]
    Protocol(&'static str),
    /// A typed refusal of a queue request; `message` is one line for a person.
    #[error("{message}")]
    QueueRefused {
        kind: QueueErrorKind,
        message: String,
    },
    /// A typed refusal of a whole-device lease request; `message` is one line.
    #[error("{message}")]
    LeaseRefused {
        kind: LeaseErrorKind,
        message: String,
    },
    /// No SR-IOV virtual function of `pf` that rigd holds is free for a queue.
    #[error(
        "No virtual function of {pf} is free for an isolated queue: {}",
        if tried.is_empty() { "rigd holds none of its VFs in vfio mode".to_owned() } else { format!("{} serve other clients or refused", tried.join(", ")) }
    )]
    NoFreeFunction { pf: String, tried: Vec<String> },
}

impl DmaError {
    /// The refusal's kind, when this is one.
    pub fn kind(&self) -> Option<DmaErrorKind> {
        match self {
            Self::Refused { kind, .. } => Some(*kind),
            _ => None,
        }
    }

    pub(crate) fn refused(kind: DmaErrorKind, message: impl Into<String>) -> Self {
        Self::Refused {
            kind,
            message: message.into(),
        }
    }
}

/// A lease as this process sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct LeaseInfo {
    pub id: LeaseId,
    pub bytes: u64,
    /// Where the device reaches its first byte; `None` in host mode.
    pub device_address: Option<u64>,
    /// Where it is mapped here.
    pub host_address: usize,
}

#[derive(Debug)]
struct LocalLease {
    info: LeaseInfo,
    region: Arc<Mapping>,
    fds: Vec<SealedMemfd>,
    /// `Some` for leases `alloc` carves buffers from; `None` for raw leases.
    arena: Option<alloc::Arena>,
}

#[derive(Debug)]
struct Local {
    leases: Vec<LocalLease>,
    keep_empty: usize,
}

#[derive(Debug)]
struct Inner {
    id: u64,
    /// The function whose pool this session leases from, as the caller named it.
    device: String,
    block: u64,
    max_lease_blocks: u32,
    addressing: Addressing,
    quota: u64,
    side: tokio::sync::Mutex<side::Side>,
    local: Mutex<Local>,
}

impl Inner {
    fn local(&self) -> MutexGuard<'_, Local> {
        self.local.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Gives a buffer's space back; true when its lease is now empty.
    fn put_back(&self, lease: LeaseId, offset: u64, size: u64) -> bool {
        let mut local = self.local();
        let Some(l) = local.leases.iter_mut().find(|l| l.info.id == lease) else {
            return false;
        };
        l.arena.as_mut().is_some_and(|a| {
            a.free(offset, size);
            a.is_empty()
        })
    }
}

/// A DMA session on one device's pool.
#[derive(Debug)]
pub struct Session {
    inner: Arc<Inner>,
}

/// A buffer inside a leased block: CPU address, device address, size. Dropping it
/// returns its space to the session (no round trip).
#[derive(Debug)]
pub struct Buffer {
    inner: Arc<Inner>,
    region: Arc<Mapping>,
    lease: LeaseId,
    offset: u64,
    size: u64,
    device: Option<u64>,
    returned: bool,
}

impl Buffer {
    /// Its first byte in this process. Device-visible memory: access it with volatile
    /// or atomic operations, never through a reference.
    pub fn as_ptr(&self) -> *mut u8 {
        (self.region.addr() + usize::try_from(self.offset).unwrap_or(usize::MAX)) as *mut u8
    }

    /// Its first byte for the device; `None` in host mode.
    pub fn device_address(&self) -> Option<u64> {
        self.device.map(|d| d + self.offset)
    }

    /// Bytes asked for.
    pub fn len(&self) -> u64 {
        self.size
    }

    /// Always false: buffers are never empty.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The lease it lives in, and its offset there.
    pub fn lease(&self) -> (LeaseId, u64) {
        (self.lease, self.offset)
    }

    fn at(&self, offset: u64, len: usize) -> Result<usize, DmaError> {
        let out = || DmaError::OutOfRange {
            offset,
            len: len as u64,
        };
        let end = offset.checked_add(len as u64).ok_or_else(out)?;
        if end > self.size {
            return Err(out());
        }
        usize::try_from(self.offset + offset).map_err(|_| out())
    }

    /// Copies bytes out of the buffer (volatile reads).
    ///
    /// # Errors
    /// [`DmaError::OutOfRange`].
    pub fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        let at = self.at(offset, buf.len())?;
        self.region.read(at, buf).map_err(DmaError::Map)
    }

    /// Copies bytes into the buffer (volatile writes).
    ///
    /// # Errors
    /// [`DmaError::OutOfRange`].
    pub fn write(&self, offset: u64, data: &[u8]) -> Result<(), DmaError> {
        let at = self.at(offset, data.len())?;
        self.region.write(at, data).map_err(DmaError::Map)
    }

    /// Writes the aligned `u32` at `offset` in one volatile store, so the device never
    /// reads it torn (a pushbuffer word, a shadow doorbell).
    ///
    /// # Errors
    /// [`DmaError::OutOfRange`], also for an offset not 4-byte aligned.
    pub fn write_u32(&self, offset: u64, value: u32) -> Result<(), DmaError> {
        let at = self.at(offset, 4)?;
        self.region
            .write_u32(at, value)
            .map_err(|_| DmaError::OutOfRange { offset, len: 4 })
    }

    /// Reads the aligned `u32` at `offset` in one volatile load.
    ///
    /// # Errors
    /// As [`Buffer::write_u32`].
    pub fn read_u32(&self, offset: u64) -> Result<u32, DmaError> {
        let at = self.at(offset, 4)?;
        self.region
            .read_u32(at)
            .map_err(|_| DmaError::OutOfRange { offset, len: 4 })
    }

    /// Reads the aligned `u64` at `offset` in one volatile load (a 64-bit semaphore).
    ///
    /// # Errors
    /// [`DmaError::OutOfRange`], also for an offset not 8-byte aligned.
    pub fn read_u64(&self, offset: u64) -> Result<u64, DmaError> {
        let at = self.at(offset, 8)?;
        self.region
            .read_u64(at)
            .map_err(|_| DmaError::OutOfRange { offset, len: 8 })
    }

    /// Writes the aligned `u64` at `offset` in one volatile store.
    ///
    /// # Errors
    /// [`DmaError::OutOfRange`], also for an offset not 8-byte aligned.
    pub fn write_u64(&self, offset: u64, value: u64) -> Result<(), DmaError> {
        let at = self.at(offset, 8)?;
        self.region
            .write_u64(at, value)
            .map_err(|_| DmaError::OutOfRange { offset, len: 8 })
    }
}

impl Buffer {
    /// Keeps the buffer's space out of the session's use after it drops (until the
    /// session ends): for memory a device may still write, such as a dropped
    /// channel's semaphore with work in flight.
    pub(crate) fn keep_out(&mut self) {
        self.returned = true;
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        if !self.returned {
            self.inner.put_back(self.lease, self.offset, self.size);
        }
    }
}

fn rpc(s: tonic::Status) -> DmaError {
    match s.code() {
        Code::Unimplemented => DmaError::Client(ClientError::DaemonTooOld {
            path: PathBuf::new(),
            daemon: 0,
            needed: rig_proto::API_VERSION,
        }),
        _ => DmaError::Client(ClientError::rpc(s)),
    }
}

/// A gRPC channel on one connection to `path`; it does not reconnect, because a DMA
/// session lives and dies with its connection.
async fn channel(path: &Path) -> Result<Channel, ClientError> {
    let stream = tokio::net::UnixStream::connect(path)
        .await
        .map_err(|e| crate::diagnose(path, e))?;
    let first = Arc::new(Mutex::new(Some(stream)));
    tonic::transport::Endpoint::from_static("http://rigd")
        .connect_with_connector(tower::service_fn(move |_| {
            let taken = first.lock().unwrap_or_else(PoisonError::into_inner).take();
            async move {
                let s = taken.ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::NotConnected,
                        "the DMA session's connection closed",
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

/// Pools and per-client use (all sessions for root, the caller's own otherwise).
///
/// # Errors
/// [`DmaError::Client`]: connecting, or the daemon's refusal.
pub async fn status(socket: impl AsRef<Path>) -> Result<DmaStatus, DmaError> {
    Monitor::connect(socket).await?.status().await
}

/// Every channel lent on rigd's RM-served GPUs (all for root, the caller's own
/// otherwise), as `rigctl channels` shows them.
///
/// # Errors
/// [`DmaError::Client`]: connecting, or the daemon's refusal.
pub async fn channels(socket: impl AsRef<Path>) -> Result<Vec<ChannelInfo>, DmaError> {
    let mut grpc = DmaClient::new(channel(socket.as_ref()).await?);
    let reply = grpc
        .channels(pb::DmaChannelsRequest {})
        .await
        .map_err(rpc)?
        .into_inner();
    Ok(reply
        .channels
        .into_iter()
        .map(ChannelInfo::from_wire)
        .collect())
}

/// A connection for repeated `Dma.Status` and `Queues.Status` calls (a watcher, a
/// benchmark, a campaign polling for a killed client's reclaim).
#[derive(Debug, Clone)]
pub struct Monitor {
    grpc: DmaClient<Channel>,
    queues: pb::queues_client::QueuesClient<Channel>,
}

impl Monitor {
    /// Connects to rigd at `socket`.
    ///
    /// # Errors
    /// [`DmaError::Client`].
    pub async fn connect(socket: impl AsRef<Path>) -> Result<Self, DmaError> {
        let channel = channel(socket.as_ref()).await?;
        Ok(Self {
            grpc: DmaClient::new(channel.clone()),
            queues: pb::queues_client::QueuesClient::new(channel),
        })
    }

    /// Every queue rigd lends now (root sees all, others their own), as
    /// [`queue_status`] reads them.
    ///
    /// # Errors
    /// [`DmaError::Client`] with the daemon's refusal.
    pub async fn queues(&mut self) -> Result<Vec<QueueInfo>, DmaError> {
        let request = pb::QueueStatusRequest {};
        let queues = self.queues.status(request).await.map_err(rpc)?;
        Ok(queues
            .into_inner()
            .queues
            .into_iter()
            .map(Into::into)
            .collect())
    }

    /// Pools and per-client use now.
    ///
    /// # Errors
    /// [`DmaError::Client`] with the daemon's refusal.
    pub async fn status(&mut self) -> Result<DmaStatus, DmaError> {
        let reply = self
            .grpc
            .status(pb::DmaStatusRequest {})
            .await
            .map_err(rpc)?
            .into_inner();
        Ok(reply.into())
    }
}

impl Session {
    /// Opens a session on `device`'s pool through rigd at `socket`.
    ///
    /// # Errors
    /// [`DmaError::Client`] (no daemon, permission, no such pool: `NotFound`),
    /// [`DmaError::Side`], [`DmaError::Refused`] when the claim is refused.
    pub async fn open(socket: impl AsRef<Path>, device: &str) -> Result<Self, DmaError> {
        let socket = socket.as_ref();
        let mut grpc = DmaClient::new(channel(socket).await?);
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
        let claim = pb::DmaClaim {
            session: o.session,
            token: o.token,
        };
        match side.call(Request::Claim(claim)).await? {
            (Reply::Claimed(_), _) => {}
            (Reply::Error(e), _) => return Err(refusal(&e)),
            _ => return Err(DmaError::Protocol("a claim must be answered `claimed`")),
        }
        Ok(Self {
            inner: Arc::new(Inner {
                id: o.session,
                device: device.to_owned(),
                block: o.block_bytes,
                max_lease_blocks: o.max_lease_blocks,
                addressing: Addressing::from_wire(o.addressing),
                quota: o.quota_bytes,
                side: tokio::sync::Mutex::new(side),
                local: Mutex::new(Local {
                    leases: Vec::new(),
                    keep_empty: 1,
                }),
            }),
        })
    }

    /// The session's number (as `rigctl dma` shows it).
    pub fn id(&self) -> u64 {
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

    /// How many empty single-block leases to keep for the fast path (default 1);
    /// more are given back to rigd on the next `free`, `alloc` lease or `trim`.
    pub fn set_keep_empty(&self, n: usize) {
        self.inner.local().keep_empty = n;
    }

    fn check(&self, size: u64, align: u64) -> Result<(), DmaError> {
        use DmaErrorKind as K;
        if size == 0 {
            return Err(DmaError::refused(
                K::ZeroSize,
                "A buffer of zero bytes was asked for",
            ));
        }
        if !align.is_power_of_two() || align > self.inner.block {
            return Err(DmaError::refused(
                K::Misaligned,
                format!(
                    "Alignment {align} is not a power of two up to {}",
                    self.inner.block
                ),
            ));
        }
        let max = u64::from(self.inner.max_lease_blocks) * self.inner.block;
        if size > max {
            return Err(DmaError::refused(
                K::Oversized,
                format!("{size} bytes is more than {max}, the most one lease may hold"),
            ));
        }
        Ok(())
    }

    /// A buffer from blocks already leased: the fast path, no round trip. `None`
    /// when none has room.
    ///
    /// # Errors
    /// [`DmaError::Refused`] for a zero size, a bad alignment or an oversized request.
    pub fn try_alloc(&self, size: u64, align: u64) -> Result<Option<Buffer>, DmaError> {
        self.check(size, align)?;
        Ok(self.carve(size, align, None))
    }

    fn carve(&self, size: u64, align: u64, only: Option<LeaseId>) -> Option<Buffer> {
        let mut local = self.inner.local();
        local.leases.iter_mut().find_map(|l| {
            if only.is_some_and(|id| id != l.info.id) {
                return None;
            }
            let offset = l.arena.as_mut()?.alloc(size, align)?;
            Some(Buffer {
                inner: Arc::clone(&self.inner),
                region: Arc::clone(&l.region),
                lease: l.info.id,
                offset,
                size,
                device: l.info.device_address,
                returned: false,
            })
        })
    }

    /// A buffer of `size` bytes at a multiple of `align` (a power of two, up to 2 MiB):
    /// from blocks already leased when one has room, else from a fresh lease.
    ///
    /// # Errors
    /// [`DmaError::Refused`] (size, alignment, quota, exhausted pool, no contiguous
    /// run), [`DmaError::Side`], [`DmaError::Ended`], [`DmaError::Map`].
    pub async fn alloc(&self, size: u64, align: u64) -> Result<Buffer, DmaError> {
        if let Some(b) = self.try_alloc(size, align)? {
            return Ok(b);
        }
        self.release_spare().await?;
        let bytes = size.div_ceil(self.inner.block).max(1) * self.inner.block;
        let info = self.lease_inner(bytes, true).await?;
        self.carve(size, align, Some(info.id))
            .ok_or(DmaError::Protocol(
                "a fresh lease has no room for its buffer",
            ))
    }

    /// Frees a buffer now; when its lease becomes empty and is not kept for the fast
    /// path, gives the lease back to rigd.
    ///
    /// # Errors
    /// As [`Session::release`].
    pub async fn free(&self, mut buf: Buffer) -> Result<(), DmaError> {
        buf.returned = true;
        if self.inner.put_back(buf.lease, buf.offset, buf.size) {
            self.release_spare().await?;
        }
        Ok(())
    }

    /// Gives back every empty lease beyond those kept for the fast path; returns how
    /// many.
    ///
    /// # Errors
    /// As [`Session::release`].
    pub async fn trim(&self) -> Result<usize, DmaError> {
        self.release_spare().await
    }

    async fn release_spare(&self) -> Result<usize, DmaError> {
        let spare: Vec<LeaseId> = {
            let local = self.inner.local();
            let block = self.inner.block;
            let mut kept = 0;
            local
                .leases
                .iter()
                .filter(|l| l.arena.as_ref().is_some_and(alloc::Arena::is_empty))
                .filter(|l| {
                    let keep = l.info.bytes == block && kept < local.keep_empty;
                    kept += usize::from(keep);
                    !keep
                })
                .map(|l| l.info.id)
                .collect()
        };
        for id in &spare {
            self.release(*id).await?;
        }
        Ok(spare.len())
    }

    /// Leases `bytes` (a multiple of the block size, which rigd checks) as one lease,
    /// mapped here and not used by `alloc`. Kept until [`Session::release`].
    ///
    /// # Errors
    /// [`DmaError::Refused`] with rigd's reason, [`DmaError::Side`],
    /// [`DmaError::Ended`], [`DmaError::Map`].
    pub async fn lease(&self, bytes: u64) -> Result<LeaseInfo, DmaError> {
        self.lease_inner(bytes, false).await
    }

    async fn lease_inner(&self, bytes: u64, carve: bool) -> Result<LeaseInfo, DmaError> {
        let (reply, fds) = {
            let side = self.inner.side.lock().await;
            side.call(Request::Lease(pb::DmaLease { bytes })).await?
        };
        let l = match reply {
            Reply::Leased(l) => l,
            Reply::Error(e) => return Err(refusal(&e)),
            _ => return Err(DmaError::Protocol("a lease must be answered `leased`")),
        };
        if fds.len() != usize::try_from(l.blocks).unwrap_or(usize::MAX) || fds.is_empty() {
            return Err(DmaError::Protocol(
                "a lease's reply must carry one descriptor per block",
            ));
        }
        let block =
            usize::try_from(self.inner.block).map_err(|_| DmaError::Protocol("block size"))?;
        let fds = fds
            .into_iter()
            .map(SealedMemfd::check)
            .collect::<Result<Vec<_>, _>>()
            .map_err(DmaError::Unsealed)?;
        if fds.iter().any(|f| f.len() != self.inner.block) {
            return Err(DmaError::Protocol(
                "a lease's blocks must be one block long each",
            ));
        }
        let region = map_blocks(&fds, block).map_err(DmaError::Map)?;
        let info = LeaseInfo {
            id: LeaseId(l.lease),
            bytes: l.bytes,
            device_address: l.device_address,
            host_address: region.addr(),
        };
        self.inner.local().leases.push(LocalLease {
            info,
            region: Arc::new(region),
            fds,
            arena: carve.then(|| alloc::Arena::new(l.bytes)),
        });
        Ok(info)
    }

    /// Gives a lease back to rigd. Its mapping here goes first; buffers still in it
    /// keep their address but read zeros from then on. A handle that is not this
    /// session's is sent anyway and refused by rigd ([`DmaErrorKind::UnknownLease`]).
    ///
    /// # Errors
    /// [`DmaError::Refused`], [`DmaError::Side`], [`DmaError::Ended`].
    pub async fn release(&self, id: LeaseId) -> Result<(), DmaError> {
        drop(self.take_local(id));
        let side = self.inner.side.lock().await;
        match side
            .call(Request::Release(pb::DmaRelease { lease: id.0 }))
            .await?
        {
            (Reply::Released(_), _) => Ok(()),
            (Reply::Error(e), _) => Err(refusal(&e)),
            _ => Err(DmaError::Protocol("a release must be answered `released`")),
        }
    }

    /// One side-socket request and its reply, for the channel calls.
    pub(crate) async fn side_call(&self, body: Request) -> Result<(Reply, Vec<OwnedFd>), DmaError> {
        self.inner.side.lock().await.call(body).await
    }

    fn take_local(&self, id: LeaseId) -> Option<LocalLease> {
        let mut local = self.inner.local();
        let i = local.leases.iter().position(|l| l.info.id == id)?;
        Some(local.leases.swap_remove(i))
    }

    /// The leases this session holds.
    pub fn leases(&self) -> Vec<LeaseInfo> {
        self.inner.local().leases.iter().map(|l| l.info).collect()
    }

    /// Second descriptors of a lease's blocks (sealed hugetlb memfds, one per block),
    /// e.g. to hand to another API. `None` for a lease this session does not hold.
    ///
    /// # Errors
    /// dup(2) failures.
    pub fn lease_fds(&self, id: LeaseId) -> io::Result<Option<Vec<OwnedFd>>> {
        let local = self.inner.local();
        let Some(l) = local.leases.iter().find(|l| l.info.id == id) else {
            return Ok(None);
        };
        l.fds
            .iter()
            .map(|f| f.try_clone().map(OwnedFd::from))
            .collect::<io::Result<_>>()
            .map(Some)
    }

    /// Volatile read of a lease's bytes.
    ///
    /// # Errors
    /// [`DmaError::Refused`] (`UnknownLease`), [`DmaError::OutOfRange`].
    pub fn read_lease(&self, id: LeaseId, offset: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        self.with_region(id, offset, buf.len(), |r, at| r.read(at, buf))
    }

    /// Volatile write into a lease.
    ///
    /// # Errors
    /// [`DmaError::Refused`] (`UnknownLease`), [`DmaError::OutOfRange`].
    pub fn write_lease(&self, id: LeaseId, offset: u64, data: &[u8]) -> Result<(), DmaError> {
        self.with_region(id, offset, data.len(), |r, at| r.write(at, data))
    }

    fn with_region(
        &self,
        id: LeaseId,
        offset: u64,
        len: usize,
        f: impl FnOnce(&Mapping, usize) -> io::Result<()>,
    ) -> Result<(), DmaError> {
        let region = {
            let local = self.inner.local();
            let l = local
                .leases
                .iter()
                .find(|l| l.info.id == id)
                .ok_or_else(|| {
                    DmaError::refused(
                        DmaErrorKind::UnknownLease,
                        format!("Lease {} is not held here", id.0),
                    )
                })?;
            let out = DmaError::OutOfRange {
                offset,
                len: len as u64,
            };
            if offset
                .checked_add(len as u64)
                .is_none_or(|e| e > l.info.bytes)
            {
                return Err(out);
            }
            Arc::clone(&l.region)
        };
        let at = usize::try_from(offset).map_err(|_| DmaError::OutOfRange {
            offset,
            len: len as u64,
        })?;
        f(&region, at).map_err(DmaError::Map)
    }
}

/// Maps a lease's blocks one after another at one `block`-aligned address, with page
/// tables filled in (`MAP_POPULATE`).
fn map_blocks(files: &[SealedMemfd], block: usize) -> io::Result<Mapping> {
    match files {
        // One block: the kernel aligns a hugetlb mapping to its page size (the block
        // size) itself, in one mmap(2) rather than a reservation and a fixed map.
        [one] => Mapping::shared(one, Fill::Populate),
        _ => Mapping::shared_run(files, block, Fill::Populate),
    }
}

pub(crate) fn refusal(e: &pb::DmaSideError) -> DmaError {
    DmaError::refused(DmaErrorKind::from_wire(e.code), e.message.clone())
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
            DmaErrorKind::from_wire(pb::DmaErrorCode::UnknownLease.into()),
            DmaErrorKind::UnknownLease
        );
        assert_eq!(DmaErrorKind::from_wire(999), DmaErrorKind::Internal);
    }
}
