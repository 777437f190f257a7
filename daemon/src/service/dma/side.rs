//! The side socket: `SOCK_SEQPACKET` at `<rigd socket>.fd`, one `SessionRequest` or
//! `SessionReply` per packet, a lease's block descriptors attached to its reply.
//!
//! A connection first claims a session (token from `OpenSession`, same uid and pid);
//! then it leases and releases, opens channels, allocates GPU memory…, one request and
//! one reply at a time. Its EOF ends the
//! session. Errors a client causes go back in the reply and are logged at debug.

use std::{
    ffi::OsString,
    fs, io,
    os::{
        fd::{AsFd, OwnedFd},
        unix::fs::{FileTypeExt, MetadataExt, PermissionsExt},
    },
    path::{Path, PathBuf},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering as AtomicOrdering},
    },
    time::Duration,
};

use prost::Message;
use rig_proto::v1::{self as pb, session_reply::Body as Reply, session_request::Body as Request};
use rig_sys::scm::{self, PeerCred};
use tokio::{
    io::{Interest, unix::AsyncFd},
    sync::watch,
    task::JoinSet,
    time::Instant,
};

use super::{end_session, reply, until_true};
use crate::{
    audit::Actor,
    dma::{self, DmaError, Grant, LeaseId, PoolMode, SessionId},
    error::{Classify, Reason},
    policy,
    rig::Rig,
    service::{
        ServiceError, metrics,
        status::{self, error_line},
        watchdog::{HEALTH, Health, SIDE_LIMIT, off_runtime},
    },
};

/// How long a lease waits for blocks that are being pinned before it reports the pool
/// exhausted.
// TIMEOUT: a refill pins one 2 MiB block in well under a millisecond; 2 s covers a
// pool still in its initial fill on a busy machine.
const LEASE_WAIT: Duration = Duration::from_secs(2);

/// Requests are a few dozen bytes; anything longer is malformed.
const MAX_REQUEST: usize = 256;

/// The side socket's file; removed on drop if it is still the one bound here.
#[derive(Debug)]
pub struct SocketFile {
    path: PathBuf,
    ino: u64,
}

impl SocketFile {
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for SocketFile {
    fn drop(&mut self) {
        if fs::symlink_metadata(&self.path).is_ok_and(|m| m.ino() == self.ino) {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// `<main>.fd`.
pub fn path_beside(main: &Path) -> PathBuf {
    let mut p = OsString::from(main.as_os_str());
    p.push(".fd");
    PathBuf::from(p)
}

/// Binds the side socket beside `main`, replacing a stale one, with `main`'s owner,
/// group and mode (so the group that may use rigd may use DMA).
///
/// # Errors
/// [`ServiceError::SideSocket`].
pub fn bind_beside(main: &Path) -> Result<(SocketFile, AsyncFd<OwnedFd>), ServiceError> {
    let path = path_beside(main);
    let err = |source| ServiceError::SideSocket {
        path: path.clone(),
        source,
    };
    if let Ok(m) = fs::symlink_metadata(&path) {
        // rigd's main socket is bound (no other rigd serves it), so this one is stale.
        if !m.file_type().is_socket() {
            return Err(err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                "exists and is not a socket; refusing to replace it",
            )));
        }
        fs::remove_file(&path).map_err(err)?;
    }
    let fd = scm::listen(&path).map_err(err)?;
    let meta = fs::metadata(main).map_err(err)?;
    std::os::unix::fs::chown(&path, Some(meta.uid()), Some(meta.gid())).map_err(err)?;
    fs::set_permissions(&path, fs::Permissions::from_mode(meta.mode() & 0o777)).map_err(err)?;
    let ino = fs::symlink_metadata(&path).map_err(err)?.ino();
    let listener = scm::register(fd).map_err(err)?;
    Ok((SocketFile { path, ino }, listener))
}

/// Accepts side connections until `stopping`; each runs in its own task, aborted when
/// this one is.
pub async fn serve(
    listener: AsyncFd<OwnedFd>,
    rig: Arc<Rig>,
    mut stopping: watch::Receiver<bool>,
    health: Health,
) {
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.async_io(Interest::READABLE, |l| scm::accept(l)) => match accepted {
                Ok(fd) => match scm::register(fd) {
                    Ok(conn) => {
                        // The connection's blocking work counts for the watchdog.
                        conns.spawn(HEALTH.scope(
                            health.clone(),
                            connection(conn, Arc::clone(&rig), stopping.clone()),
                        ));
                    }
                    Err(e) => tracing::warn!("side socket: {e}"),
                },
                Err(e) => {
                    // EMFILE and the like: back off rather than spin.
                    tracing::warn!("side socket accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            () = until_true(&mut stopping) => break,
        }
    }
}

/// One client's side connection.
async fn connection(fd: AsyncFd<OwnedFd>, rig: Arc<Rig>, mut stopping: watch::Receiver<bool>) {
    let Ok(peer) = scm::peer(fd.get_ref()) else {
        return;
    };
    // The groups the kernel captured at connect(2) (`service::peer` says why); /proc
    // only where the kernel lacks SO_PEERGROUPS.
    let groups = crate::sys::peergroups::peer_groups(fd.get_ref()).ok();
    let groups = groups.as_deref();
    let span = tracing::debug_span!("dma-side", uid = peer.uid, pid = peer.pid);
    let mut buf = vec![0u8; MAX_REQUEST];
    let Some(first) = recv(&fd, &mut buf).await else {
        return;
    };
    let (id, mut ended) = match claim(&rig, first, peer, groups) {
        Ok(c) => c,
        Err(reply) => {
            let _ = send(&fd, &reply, Vec::new()).await;
            return;
        }
    };
    // On a served GPU the session gets its own GPU address space before its first
    // lease (two RM calls: off the async threads).
    let attach = {
        let rig = Arc::clone(&rig);
        off_runtime("side.attach_session", SIDE_LIMIT, move || {
            rig.attach_session(id)
        })
        .await
    };
    if let Ok(Err(e)) = attach {
        let reply = failure(e.class().reason, error_line(&e));
        let _ = send(&fd, &reply, Vec::new()).await;
        end_session(rig, id).await;
        return;
    }
    // On a served GPU the claim's reply says what the session's runtime needs of it:
    // the layout of its address space, its GPU memory quota, the GPU's geometry.
    let gpu = rig.session_gpu(id).map(crate::service::gpumem::session_gpu);
    let claimed = reply(Reply::Claimed(pb::SessionClaimed { gpu }));
    if send(&fd, &claimed, Vec::new()).await.is_err() {
        end_session(rig, id).await;
        return;
    }
    span.in_scope(|| tracing::debug!(session = id.0, "side socket claimed the session"));
    // A session keeps the pool it was opened on: whether its leases map through an
    // IOMMU or the GPU's driver (ioctls that can sleep) is known once, not looked up
    // per request.
    let iommu = rig
        .dma()
        .session_pool(id)
        .is_ok_and(|p| matches!(p.mode(), PoolMode::Vfio(_) | PoolMode::Gpu(_)));
    // A request that came while the last reply's worker looked for it.
    let mut early = None;
    loop {
        let req = match early.take() {
            Some(req) => req,
            None => tokio::select! {
                got = recv(&fd, &mut buf) => match got {
                    Some(req) => req,
                    None => break,
                },
                () = until_true(&mut ended) => break,
                () = until_true(&mut stopping) => break,
            },
        };
        let (answer, fds) = handle(&rig, id, (peer, groups), iommu, req).await;
        if let Some(pb::session_reply::Body::Error(e)) = &answer.body {
            span.in_scope(|| tracing::debug!(session = id.0, code = e.code, "{}", e.message));
        }
        if send(&fd, &answer, fds).await.is_err() {
            break;
        }
        match look_for_next(&fd, &mut buf, &LOOKING) {
            Look::Request(req) => early = Some(req),
            Look::Closed => break,
            Look::Nothing => {}
        }
    }
    end_session(rig, id).await;
}

/// How long a connection that just replied looks for its next request before it
/// leaves its worker to epoll: a client that leases and releases back to back sends
/// the next request within microseconds, and on the H200's VM a worker woken from
/// epoll took about as long as the request itself (docs/compute.md, "Spare pages").
const REQUEST_LOOK: Duration = Duration::from_micros(30);

/// Whether some connection is looking now: one at a time, so the other worker always
/// serves everyone else.
static LOOKING: AtomicBool = AtomicBool::new(false);

/// What [`look_for_next`] found.
enum Look {
    Request(Parsed),
    Closed,
    Nothing,
}

/// Reads the connection's next request if it comes within [`REQUEST_LOOK`], unless
/// another connection is `looking` already.
fn look_for_next(fd: &AsyncFd<OwnedFd>, buf: &mut [u8], looking: &AtomicBool) -> Look {
    if looking.swap(true, AtomicOrdering::Acquire) {
        return Look::Nothing;
    }
    let deadline = std::time::Instant::now() + REQUEST_LOOK;
    let found = loop {
        match scm::recv(fd.get_ref(), buf) {
            Ok(packet) => break parse(packet, buf).map_or(Look::Closed, Look::Request),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if std::time::Instant::now() >= deadline {
                    break Look::Nothing;
                }
                std::hint::spin_loop();
            }
            Err(_) => break Look::Closed,
        }
    };
    looking.store(false, AtomicOrdering::Release);
    found
}

type Parsed = Result<pb::SessionRequest, &'static str>;

/// The next request, or `None` at EOF or on a socket error.
async fn recv(fd: &AsyncFd<OwnedFd>, buf: &mut [u8]) -> Option<Parsed> {
    let packet = fd
        .async_io(Interest::READABLE, |s| scm::recv(s, buf))
        .await
        .ok()?;
    parse(packet, buf)
}

/// A received packet as a request, or `None` at EOF.
fn parse(packet: scm::Packet, buf: &[u8]) -> Option<Parsed> {
    if packet.len == 0 {
        return None;
    }
    // Descriptors a client sends are dropped (closed) here.
    if !packet.fds.is_empty() {
        return Some(Err("requests carry no file descriptors"));
    }
    if packet.truncated {
        return Some(Err("request too long"));
    }
    Some(pb::SessionRequest::decode(&buf[..packet.len]).map_err(|_| "malformed request"))
}

async fn send(
    fd: &AsyncFd<OwnedFd>,
    reply: &pb::SessionReply,
    fds: Vec<OwnedFd>,
) -> io::Result<()> {
    let bytes = reply.encode_to_vec();
    let borrowed: Vec<_> = fds.iter().map(AsFd::as_fd).collect();
    fd.async_io(Interest::WRITABLE, |s| scm::send(s, &bytes, &borrowed))
        .await
}

/// An error reply: the side socket's code of `reason`, and `message`; counted by
/// reason (`metrics`).
fn failure(reason: Reason, message: String) -> pb::SessionReply {
    metrics::global().error(reason.as_str());
    reply(Reply::Error(pb::SessionError {
        code: status::dma_code(reason).into(),
        message,
    }))
}

fn refused(e: &dyn Classify) -> pb::SessionReply {
    failure(e.class().reason, error_line(e))
}

fn claim(
    rig: &Rig,
    first: Parsed,
    peer: PeerCred,
    groups: Option<&[u32]>,
) -> Result<(SessionId, watch::Receiver<bool>), pb::SessionReply> {
    let protocol = |m: &str| failure(Reason::Protocol, m.to_owned());
    let req = first.map_err(protocol)?;
    let Some(Request::Claim(c)) = req.body else {
        return Err(protocol("the first request must claim a session"));
    };
    authorize(rig, (peer, groups), "claim")?;
    let id = SessionId(c.session);
    let ended = rig
        .dma()
        .claim(id, &c.token, peer)
        .map_err(|e| refused(&e))?;
    Ok((id, ended))
}

async fn handle(
    rig: &Arc<Rig>,
    id: SessionId,
    (peer, groups): (PeerCred, Option<&[u32]>),
    iommu: bool,
    req: Parsed,
) -> (pb::SessionReply, Vec<OwnedFd>) {
    let protocol = |m: &str| (failure(Reason::Protocol, m.to_owned()), Vec::new());
    let body = match req {
        Ok(r) => r.body,
        Err(m) => return protocol(m),
    };
    let name = body.as_ref().map_or("empty", request_name);
    if body.is_some()
        && let Err(refusal) = authorize(rig, (peer, groups), name)
    {
        metrics::global().side(name, false);
        return (refusal, Vec::new());
    }
    let answer = route(rig, id, peer, iommu, body).await;
    let ok = !matches!(
        answer.0.body,
        Some(Reply::Error(_) | Reply::DeviceLeaseRefused(_))
    );
    metrics::global().side(name, ok);
    answer
}

/// The oneof field name of a side request (the key of `policy::SIDE`).
fn request_name(r: &Request) -> &'static str {
    match r {
        Request::Claim(_) => "claim",
        Request::Lease(_) => "lease",
        Request::Release(_) => "release",
        Request::ChannelOpen(_) => "channel_open",
        Request::ChannelClose(_) => "channel_close",
        Request::OpenQueue(_) => "open_queue",
        Request::CloseQueue(_) => "close_queue",
        Request::LeaseDevice(_) => "lease_device",
        Request::GiveBackDevice(_) => "give_back_device",
        Request::GpuMemAlloc(_) => "gpu_mem_alloc",
        Request::GpuMemFree(_) => "gpu_mem_free",
        Request::EventExport(_) => "event_export",
        Request::EventImport(_) => "event_import",
        Request::EventClose(_) => "event_close",
    }
}

/// The policy's check of one side request: the role its table entry needs now (a
/// reload may have taken it away since the session opened), decided on the
/// connection's SO_PEERGROUPS where the kernel gave them. A refusal is audited.
fn authorize(
    rig: &Rig,
    (peer, groups): (PeerCred, Option<&[u32]>),
    name: &str,
) -> Result<(), pb::SessionReply> {
    let need = policy::side_need(name);
    let action = format!("side.{name}");
    let refusal = match rig
        .policy()
        .require_with(need.gate(), peer, groups, &action)
    {
        Ok(_) => return Ok(()),
        Err(r) => r,
    };
    let reason = refusal.class().reason;
    let message = refusal.to_string();
    let actor = Actor {
        cred: peer,
        role: refusal.has.map(policy::Role::as_str),
    };
    rig.audit()
        .denied(&action, actor, reason.as_str(), &message);
    Err(failure(reason, message))
}

async fn route(
    rig: &Arc<Rig>,
    id: SessionId,
    peer: PeerCred,
    iommu: bool,
    body: Option<Request>,
) -> (pb::SessionReply, Vec<OwnedFd>) {
    let protocol = |m: &str| (failure(Reason::Protocol, m.to_owned()), Vec::new());
    match body {
        Some(Request::Lease(l)) => match leased_whole(rig, id) {
            Err(reply) => (reply, Vec::new()),
            Ok(()) => match lease(rig, id, iommu, l.bytes).await {
                Ok(g) => {
                    let leased = pb::DmaLeased {
                        lease: g.lease.0,
                        bytes: g.bytes,
                        device_address: g.addr.map(dma::DeviceAddr::get),
                        blocks: u32::try_from(g.fds.len()).unwrap_or(u32::MAX),
                    };
                    // Checked again after: a whole-device lease taken meanwhile saw this
                    // session's memory, or this sees it (`Rig::lease_device`).
                    match leased_whole(rig, id) {
                        Ok(()) => (reply(Reply::Leased(leased)), g.fds),
                        Err(refusal) => {
                            let _ = rig.dma().release(id, g.lease);
                            (refusal, Vec::new())
                        }
                    }
                }
                Err(e) => (refused(&e), Vec::new()),
            },
        },
        Some(Request::Release(r)) => {
            match off_workers(rig, iommu, move |rig| {
                rig.dma().release(id, LeaseId(r.lease))
            })
            .await
            {
                Ok(()) => (
                    reply(Reply::Released(pb::DmaReleased { lease: r.lease })),
                    Vec::new(),
                ),
                Err(e) => (refused(&e), Vec::new()),
            }
        }
        Some(Request::ChannelOpen(o)) => super::super::channels::open(rig, id, o).await,
        Some(Request::ChannelClose(c)) => super::super::channels::close(rig, id, c).await,
        Some(Request::OpenQueue(q)) => super::queue::open(rig, id, peer, q).await,
        Some(Request::CloseQueue(q)) => super::queue::close(rig, id, q).await,
        Some(Request::LeaseDevice(d)) => super::lease::lease(rig, id, peer, d).await,
        Some(Request::GiveBackDevice(d)) => super::lease::give_back(rig, id, peer, d).await,
        Some(Request::GpuMemAlloc(m)) => super::super::gpumem::alloc(rig, id, m).await,
        Some(Request::GpuMemFree(m)) => super::super::gpumem::free(rig, id, &m),
        Some(Request::EventExport(_)) => super::super::events::export(rig, id).await,
        Some(Request::EventImport(m)) => super::super::events::import(rig, id, m).await,
        Some(Request::EventClose(m)) => super::super::events::close(rig, id, m).await,
        Some(Request::Claim(_)) => protocol("this connection has already claimed its session"),
        None => protocol("empty request"),
    }
}

/// Refuses memory to a session whose pool's device is leased whole to another.
fn leased_whole(rig: &Rig, id: SessionId) -> Result<(), pb::SessionReply> {
    rig.check_memory_lease(id).map_err(|e| refused(&e))
}

/// Runs a lease or release on a blocking thread when the session's pool maps through
/// an IOMMU (`iommu`): each is a VFIO ioctl per lease, which can sleep in the kernel
/// (IOMMU page-table work, a TLB flush) for far longer than an async worker may be
/// held. Host and sysfs pools make no ioctl and run inline, where they cost a lock.
async fn off_workers<T: Send + 'static>(
    rig: &Arc<Rig>,
    iommu: bool,
    f: impl FnOnce(&Rig) -> Result<T, DmaError> + Send + 'static,
) -> Result<T, DmaError> {
    if !iommu {
        return f(rig);
    }
    let rig = Arc::clone(rig);
    off_runtime("side.dma_map", SIDE_LIMIT, move || f(&rig))
        .await
        .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
}

/// Leases, waiting up to [`LEASE_WAIT`] for blocks the pool is pinning right now, and
/// pinning missing ones itself meanwhile.
async fn lease(rig: &Arc<Rig>, id: SessionId, iommu: bool, bytes: u64) -> Result<Grant, DmaError> {
    let try_lease = || off_workers(rig, iommu, move |rig| rig.dma().lease(id, bytes));
    match try_lease().await {
        Err(DmaError::Exhausted { pending, .. }) if pending > 0 => {}
        done => return done,
    }
    let pool = rig.dma().session_pool(id)?;
    let deadline = Instant::now() + LEASE_WAIT;
    loop {
        // Register for the wake-up before trying, so a block added in between counts.
        let added = pool.added().notified();
        tokio::pin!(added);
        added.as_mut().enable();
        match try_lease().await {
            Err(DmaError::Exhausted { pending, .. }) if pending > 0 => {
                // Pin a missing block here, at rigd's own priority, rather than wait
                // for the background pinner alone (`Pool::pin_one`).
                let p = Arc::clone(&pool);
                let pinned = tokio::task::spawn_blocking(move || p.pin_one())
                    .await
                    .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
                if pinned {
                    if Instant::now() >= deadline {
                        return try_lease().await;
                    }
                    continue;
                }
                if tokio::time::timeout_at(deadline, added).await.is_err() {
                    return try_lease().await;
                }
            }
            done => return done,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// rigd's end of a side connection and the client's.
    fn connected(dir: &tempfile::TempDir) -> (AsyncFd<OwnedFd>, OwnedFd) {
        let path = dir.path().join("s.fd");
        let listener = scm::listen(&path).expect("listen");
        let client = scm::connect(&path).expect("connect");
        let server = scm::register(scm::accept(&listener).expect("accept")).expect("register");
        (server, client)
    }

    fn release_request() -> Vec<u8> {
        pb::SessionRequest {
            body: Some(Request::Release(pb::DmaRelease { lease: 7 })),
        }
        .encode_to_vec()
    }

    #[tokio::test]
    async fn a_request_already_sent_is_read_by_the_look() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (server, client) = connected(&dir);
        scm::send(&client, &release_request(), &[]).expect("send");
        let mut buf = vec![0u8; MAX_REQUEST];
        let looking = AtomicBool::new(false);
        match look_for_next(&server, &mut buf, &looking) {
            Look::Request(Ok(r)) => assert!(matches!(r.body, Some(Request::Release(_)))),
            _ => panic!("the request was there to read"),
        }
        assert!(!looking.load(AtomicOrdering::Acquire), "the look ended");
    }

    #[tokio::test]
    async fn a_quiet_client_or_a_look_elsewhere_leaves_the_connection_to_epoll() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (server, client) = connected(&dir);
        let mut buf = vec![0u8; MAX_REQUEST];
        let looking = AtomicBool::new(false);
        let t = std::time::Instant::now();
        assert!(matches!(
            look_for_next(&server, &mut buf, &looking),
            Look::Nothing
        ));
        assert!(
            t.elapsed() >= REQUEST_LOOK,
            "it looked for the whole window"
        );
        // Another connection is looking: this one does not, even with a request there.
        scm::send(&client, &release_request(), &[]).expect("send");
        looking.store(true, AtomicOrdering::Release);
        assert!(matches!(
            look_for_next(&server, &mut buf, &looking),
            Look::Nothing
        ));
        looking.store(false, AtomicOrdering::Release);
        // The request is still there for the next read.
        assert!(matches!(
            look_for_next(&server, &mut buf, &looking),
            Look::Request(Ok(_))
        ));
    }

    #[tokio::test]
    async fn a_client_gone_during_the_look_ends_the_connection() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (server, client) = connected(&dir);
        drop(client);
        let mut buf = vec![0u8; MAX_REQUEST];
        assert!(matches!(
            look_for_next(&server, &mut buf, &AtomicBool::new(false)),
            Look::Closed
        ));
    }
}
