//! The `rig.v1.Dma` gRPC service and its side socket, which together make a DMA
//! session.
//!
//! Flow: `OpenSession` (gRPC) → `dma::Pools::open_session` gives an id and a one-time
//! token → the client connects the side socket `<socket>.fd` (`side`), claims the
//! session with the token from the same uid and pid, then leases and releases there;
//! each lease's reply carries its blocks' descriptors (SCM_RIGHTS). gRPC cannot carry
//! descriptors, and a side-socket round trip costs a fraction of a gRPC call, so
//! leases go there too (docs/dma.md has the numbers).
//!
//! Session anchor: the side connection. Its EOF (the client closed it, exited, or was
//! killed) ends the session and reclaims every lease in it. The gRPC connection is
//! needed only to open: an idle HTTP/2 connection costs rigd ~34 KiB, a side
//! connection a few hundred bytes, and 1,000 idle clients must fit in 15 MiB. A
//! session not claimed within [`CLAIM_WAIT`] is dropped, and at once when its opener
//! exits first (a pidfd, `sys::pidfd`): only the opener's pid may claim it.

mod lease;
mod queue;
mod side;

use std::{future::Future, path::PathBuf, sync::Arc, time::Duration};

use rig_proto::v1::{self as pb, dma_server::DmaServer};
use rig_sys::scm::PeerCred;
use tokio::{net::UnixListener, sync::watch, task::JoinHandle};
use tonic::{Request, Response, Status};

use super::{ServiceError, peer_cred, request_span, status, until_true};
use crate::{dma, error::Reason, rig::Rig};

/// How long an opened session waits for its claim on the side socket.
// TIMEOUT: the client library claims right after OpenSession returns (a millisecond);
// 10 s leaves room for a loaded machine and bounds what an unclaimed session holds.
pub const CLAIM_WAIT: Duration = Duration::from_secs(10);

/// The DMA half of the service: its gRPC handlers and the side socket's task.
#[derive(Debug)]
pub struct Dma {
    api: Api,
    task: Option<JoinHandle<()>>,
    /// Reads the served GPUs' channel error notifiers.
    watch: JoinHandle<()>,
    _side: Option<side::SocketFile>,
}

impl Dma {
    /// Starts the configured host pools and binds the side socket beside the main
    /// one, with the same owner, group and mode.
    ///
    /// # Errors
    /// [`ServiceError::DmaPools`] (config, hugepages), [`ServiceError::SideSocket`].
    pub fn start(
        rig: &Arc<Rig>,
        listener: &UnixListener,
        health: &super::watchdog::Health,
    ) -> Result<Self, ServiceError> {
        rig.dma().start().map_err(ServiceError::DmaPools)?;
        let (stop, stopping) = watch::channel(false);
        let watch = tokio::spawn(super::channels::watch(Arc::clone(rig), stopping.clone()));
        let main = listener
            .local_addr()
            .ok()
            .and_then(|a| a.as_pathname().map(ToOwned::to_owned));
        let Some(main) = main else {
            tracing::warn!("rigd's socket has no path: DMA sessions are off");
            let api = Api {
                rig: Arc::clone(rig),
                health: health.clone(),
                stop,
                stopping,
                side: None,
            };
            return Ok(Self {
                api,
                task: None,
                watch,
                _side: None,
            });
        };
        let (file, listener) = side::bind_beside(&main)?;
        let path = file.path().to_owned();
        let task = tokio::spawn(side::serve(
            listener,
            Arc::clone(rig),
            stopping.clone(),
            health.clone(),
        ));
        let api = Api {
            rig: Arc::clone(rig),
            health: health.clone(),
            stop,
            stopping,
            side: Some(path),
        };
        Ok(Self {
            api,
            task: Some(task),
            watch,
            _side: Some(file),
        })
    }

    /// The gRPC service to add to the router.
    pub fn service(&self) -> DmaServer<Api> {
        DmaServer::new(self.api.clone())
    }

    /// Completes when `shutdown` does, after telling every side connection to end.
    pub fn until(
        &self,
        shutdown: impl Future<Output = ()> + Send,
    ) -> impl Future<Output = ()> + Send {
        let stop = self.api.stop.clone();
        async move {
            shutdown.await;
            stop.send_replace(true);
        }
    }
}

impl Drop for Dma {
    fn drop(&mut self) {
        self.api.stop.send_replace(true);
        if let Some(t) = self.task.take() {
            t.abort();
        }
        self.watch.abort();
    }
}

/// Drops session `id` if it is still unclaimed after [`CLAIM_WAIT`], or as soon as its
/// opener `pid` exits: only the opener's pid may claim it. Ends as soon as the session
/// is claimed or gone (`settled`): until then it holds a pidfd and a task, and under
/// lease churn (the load bench) every session opened in the last 10 s kept both after
/// its claim, 137 fds of rigd's 186 at the end of a 4 s round.
fn expire_unclaimed_later(
    rig: Arc<Rig>,
    id: dma::SessionId,
    pid: i32,
    mut settled: watch::Receiver<bool>,
    mut stopping: watch::Receiver<bool>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        tokio::select! {
            () = until_true(&mut settled) => {}
            () = tokio::time::sleep(CLAIM_WAIT) => {
                if rig.dma().expire_unclaimed(id) {
                    tracing::debug!(session = id.0, "DMA session never claimed; dropped");
                }
            }
            () = exited(pid) => {
                if rig.dma().expire_unclaimed(id) {
                    tracing::debug!(session = id.0, pid, "DMA session's opener exited before claiming; dropped");
                }
            }
            () = until_true(&mut stopping) => {}
        }
    })
}

/// Completes once process `pid` has exited (at once if it is gone already); never
/// where that cannot be known (pid 0: the peer is outside rigd's pid namespace; a
/// kernel without pidfds), leaving [`CLAIM_WAIT`] to expire the session.
async fn exited(pid: i32) {
    if pid <= 0 {
        return std::future::pending().await;
    }
    let fd = match crate::sys::pidfd::open(pid) {
        Ok(fd) => fd,
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return,
        Err(e) => {
            tracing::debug!(pid, "no pidfd for a session's opener: {e}");
            return std::future::pending().await;
        }
    };
    match rig_sys::scm::register(fd) {
        // A pidfd is readable once, for good, when its process has terminated.
        Ok(fd) => {
            let _ = fd.readable().await;
        }
        Err(e) => {
            tracing::debug!(pid, "cannot wait on a pidfd: {e}");
            std::future::pending::<()>().await;
        }
    }
}

/// The gRPC handlers.
#[derive(Debug, Clone)]
pub struct Api {
    rig: Arc<Rig>,
    /// What the watchdog knows of this service's blocking work.
    health: super::watchdog::Health,
    stop: watch::Sender<bool>,
    stopping: watch::Receiver<bool>,
    side: Option<PathBuf>,
}

#[tonic::async_trait]
impl pb::dma_server::Dma for Api {
    async fn open_session(
        &self,
        req: Request<pb::DmaOpenRequest>,
    ) -> Result<Response<pb::DmaOpened>, Status> {
        let span = request_span("Dma.OpenSession", &req);
        let _entered = span.enter();
        if self.side.is_none() {
            return Err(status::plain(
                Reason::DmaOff,
                "DMA sessions are off: rigd's socket has no path for a side socket",
            ));
        }
        let peer = dma_peer(&req)?;
        let device = &req.get_ref().device;
        let ticket = self
            .rig
            .dma()
            .open_session(device, peer)
            .map_err(|e| status::from_error(&e))?;
        tracing::debug!(session = ticket.id.0, device, "DMA session opened");
        expire_unclaimed_later(
            Arc::clone(&self.rig),
            ticket.id,
            peer.pid,
            ticket.settled.clone(),
            self.stopping.clone(),
        );
        Ok(Response::new(pb::DmaOpened {
            session: ticket.id.0,
            token: ticket.token.to_vec(),
            block_bytes: dma::BLOCK_SIZE,
            addressing: pb::DmaAddressing::from(ticket.mode.addressing()).into(),
            quota_bytes: ticket.quota_left,
            max_lease_blocks: dma::MAX_LEASE_BLOCKS,
        }))
    }

    async fn status(
        &self,
        req: Request<pb::DmaStatusRequest>,
    ) -> Result<Response<pb::DmaStatusReply>, Status> {
        let span = request_span("Dma.Status", &req);
        let _entered = span.enter();
        let uid = peer_cred(&req)
            .map(|p| p.uid)
            .ok_or_else(super::no_peer_credentials)?;
        let viewer = (uid != 0).then_some(uid);
        let mut status = self.rig.dma().status(viewer);
        let (uses, totals) = self.rig.gpu_memory_status(viewer);
        let events = self.rig.events_held();
        for c in &mut status.clients {
            for u in uses.iter().filter(|u| u.session == c.session) {
                c.gpu_memory_allocations += u.allocations;
                c.gpu_memory_bytes += u.bytes;
            }
            for e in events.iter().filter(|e| e.session == c.session) {
                c.events_exported += e.exported;
                c.events_imported += e.imported;
            }
        }
        status.gpu_memory = totals.into_iter().map(super::gpumem::totals).collect();
        Ok(Response::new(pb::DmaStatusReply::from(&status)))
    }

    async fn channels(
        &self,
        req: Request<pb::DmaChannelsRequest>,
    ) -> Result<Response<pb::DmaChannelsReply>, Status> {
        let span = request_span("Dma.Channels", &req);
        let _entered = span.enter();
        let uid = peer_cred(&req)
            .map(|p| p.uid)
            .ok_or_else(super::no_peer_credentials)?;
        let viewer = (uid != 0).then_some(uid);
        // USERD reads under each GPU's lock, which an open holds for tens of ms.
        let rig = Arc::clone(&self.rig);
        let working = self
            .health
            .begin("Dma.Channels", super::watchdog::READ_LIMIT);
        let views = tokio::task::spawn_blocking(move || {
            let _working = working;
            rig.channel_status(viewer)
        })
        .await
        .map_err(|e| super::internal(format!("listing channels: {e}")))?;
        Ok(Response::new(super::channels::status_reply(views)))
    }
}

/// Reclaims a session off the async threads, kind by kind in the ledger's order
/// (`Rig::end_session`): a device it leases whole, its queues, its channels
/// (deschedule, drain, free), then its leases (an IOMMU or GPU unmap per lease).
async fn end_session(rig: Arc<Rig>, id: dma::SessionId) {
    let reclaimed = super::watchdog::off_runtime(
        "side.end_session",
        super::watchdog::RECLAIM_LIMIT,
        move || rig.end_session(id),
    )
    .await;
    match reclaimed {
        Ok(ended) => {
            tracing::debug!(session = id.0, reclaimed = ?ended.steps, "DMA session ended");
        }
        Err(e) => tracing::error!(session = id.0, "reclaiming a session failed: {e}"),
    }
}

/// A side-socket reply with `body`.
fn reply(body: pb::session_reply::Body) -> pb::SessionReply {
    pb::SessionReply { body: Some(body) }
}

fn dma_peer<T>(req: &Request<T>) -> Result<PeerCred, Status> {
    peer_cred(req).ok_or_else(super::no_peer_credentials)
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::{
        config::Config,
        dma::{Backing, PoolMode, PoolSpec},
    };

    /// A rig over `dir` with a one-block shmem pool `host`, pinned.
    fn rig_with_a_host_pool(dir: &std::path::Path) -> Arc<Rig> {
        let mut config = Config::default();
        config.paths.state_dir = dir.join("state");
        config.paths.pci_ids = dir.join("pci.ids");
        let rig = Arc::new(Rig::new(&config).0);
        let spec = PoolSpec {
            mode: PoolMode::Host,
            blocks: 1,
            backing: Backing::Shmem,
            pin_threads: 1,
        };
        let pool = rig.dma().create("host", spec).expect("pool");
        assert!(pool.wait_pinned(Duration::from_secs(10)));
        rig
    }

    #[tokio::test]
    async fn a_session_whose_opener_exits_before_claiming_is_dropped_at_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let rig = rig_with_a_host_pool(dir.path());
        let mut opener = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep");
        let peer = PeerCred {
            uid: nix::unistd::getuid().as_raw(),
            gid: nix::unistd::getgid().as_raw(),
            pid: i32::try_from(opener.id()).expect("pid"),
        };
        let ticket = rig.dma().open_session("host", peer).expect("open");
        let (_stop, stopping) = watch::channel(false);
        let _watch = expire_unclaimed_later(
            Arc::clone(&rig),
            ticket.id,
            peer.pid,
            ticket.settled.clone(),
            stopping,
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(
            rig.dma().status(None).clients.len(),
            1,
            "kept while the opener lives"
        );

        opener.kill().expect("kill the opener");
        let killed = Instant::now();
        opener.wait().expect("reap");
        while !rig.dma().status(None).clients.is_empty() && killed.elapsed() < CLAIM_WAIT {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }

        assert!(rig.dma().status(None).clients.is_empty(), "dropped");
        assert!(
            killed.elapsed() < Duration::from_millis(100),
            "dropped {:?} after the kill, not after the claim timeout",
            killed.elapsed()
        );
    }

    #[tokio::test]
    async fn a_claimed_sessions_watch_ends_at_once_and_lets_go_of_its_pidfd() {
        // The load bench: every session opened kept its watch (a task and a pidfd of
        // the opener) for the whole claim wait after its claim.
        let dir = tempfile::tempdir().expect("tempdir");
        let rig = rig_with_a_host_pool(dir.path());
        let peer = PeerCred {
            uid: nix::unistd::getuid().as_raw(),
            gid: nix::unistd::getgid().as_raw(),
            pid: i32::try_from(std::process::id()).expect("pid"),
        };
        let ticket = rig.dma().open_session("host", peer).expect("open");
        let (_stop, stopping) = watch::channel(false);
        let watch = expire_unclaimed_later(
            Arc::clone(&rig),
            ticket.id,
            peer.pid,
            ticket.settled.clone(),
            stopping,
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!watch.is_finished(), "watching while unclaimed");
        rig.dma()
            .claim(ticket.id, &ticket.token, peer)
            .expect("claim");
        tokio::time::timeout(Duration::from_secs(1), watch)
            .await
            .expect("the watch ends with the claim, not after CLAIM_WAIT")
            .expect("watch task");
        // Its pidfd lived in the task's future, gone with it (the process's fd count
        // is not asserted: tests beside this one open and close their own).
        assert_eq!(
            rig.dma().status(None).clients.len(),
            1,
            "the claimed session stays"
        );
    }
}
