//! Queues rigd lends a session: [`LentQueue::open`] carves the rings' memory from the
//! session's ledger, asks rigd for a queue pair on them, and returns the typed NVMe
//! queue over it with its doorbell: the shadow tail and head in the client's own page,
//! then a write to the kick eventfd rigd lent (a VFIO ioeventfd: the kernel writes the
//! device's doorbell register; the client never maps a register).
//!
//! The queue lives as long as the session's side connection: when the process ends,
//! rigd deletes it on the device before the memory goes.
//!
//! [`LentQueue::open_isolated`] is the isolated mode: a queue on an SR-IOV virtual
//! function of a named PF that no other client uses, so the client's commands reach
//! only that function's IOMMU domain (docs/queues.md "The isolated mode").
//!
//! Not here: the ring itself (`Queue`, this module's parent), NVMe's commands
//! (`nvme`), the request's transport (`crate::session`), rigd's list of every lent
//! queue (`status`).

use std::{os::fd::OwnedFd, path::Path, sync::Arc};

use rig_proto::v1 as pb;

use super::{
    Doorbell, Queue, QueueError,
    nvme::{Namespace, NvmeQueue, layout},
};
use crate::session::{Buffer, Reply, Request, Session, SessionError};

/// Why rigd refused a queue request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueErrorKind {
    DepthZero,
    /// Over `queue.max_depth` or the device's largest ring.
    DepthOverLimit,
    /// Over `queue.per_client`, or no queue id left.
    TooMany,
    /// The device is not held by rig in vfio mode.
    NotHeld,
    /// Not a device whose queues rig lends.
    Unsupported,
    /// Rings outside the lease, an unknown lease.
    BadRequest,
    NotYours,
    /// The device refused or failed.
    Device,
    /// The device is leased whole to someone; the message names the holder.
    Leased,
    /// A function that serves one client at a time (an SR-IOV virtual function)
    /// serves another; the message names it. Try another function.
    Busy,
}

impl QueueErrorKind {
    fn from_wire(code: i32) -> Self {
        use pb::QueueErrorCode as C;
        match C::try_from(code) {
            Ok(C::DepthZero) => Self::DepthZero,
            Ok(C::DepthOverLimit) => Self::DepthOverLimit,
            Ok(C::TooMany) => Self::TooMany,
            Ok(C::NotHeld) => Self::NotHeld,
            Ok(C::Unsupported) => Self::Unsupported,
            Ok(C::BadRequest) => Self::BadRequest,
            Ok(C::NotYours) => Self::NotYours,
            Ok(C::Leased) => Self::Leased,
            Ok(C::Busy) => Self::Busy,
            _ => Self::Device,
        }
    }
}

/// The doorbell of a lent NVMe queue: shadow values in the client's page, then the
/// kick.
#[derive(Debug)]
pub struct ShadowBell {
    mem: Arc<Buffer>,
    /// Offset in `mem` of the SQ tail slot; the CQ head is 4 bytes on.
    slot: u64,
    kick: OwnedFd,
}

impl Doorbell for ShadowBell {
    fn sq_tail(&mut self, tail: u32) -> std::io::Result<()> {
        self.mem
            .write_u32(self.slot, tail)
            .map_err(std::io::Error::other)?;
        // The tail is in memory before the controller is told to look.
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        nix::unistd::write(&self.kick, &1u64.to_ne_bytes())?;
        Ok(())
    }

    fn cq_head(&mut self, head: u32) -> std::io::Result<()> {
        // The controller reads the head from the shadow page before it posts; the
        // queue never holds more than entries − 1 completions, so no kick is needed.
        self.mem
            .write_u32(self.slot + 4, head)
            .map_err(std::io::Error::other)
    }
}

/// A queue pair rigd lent this session. `T` tags commands.
#[derive(Debug)]
pub struct LentQueue<T> {
    pub qid: u16,
    pub entries: u32,
    pub nsid: u32,
    /// The namespace's geometry, as rigd identified it.
    pub namespace: Namespace,
    pub nvme: NvmeQueue<Arc<Buffer>, ShadowBell, T>,
    /// The eventfd the queue's MSI-X vector signals, when rigd lent one.
    irq: Option<OwnedFd>,
}

impl<T> LentQueue<T> {
    /// Whether completions also signal an interrupt eventfd ([`LentQueue::wait`]).
    pub fn has_interrupt(&self) -> bool {
        self.irq.is_some()
    }

    /// Sleeps until the queue's interrupt fires or `timeout_ms` pass (then reap: an
    /// interrupt may cover several completions, so reap until empty). Returns whether
    /// it fired.
    ///
    /// # Errors
    /// `Unsupported` for a polled queue; poll(2) and read(2) errors.
    pub fn wait(&self, timeout_ms: u16) -> std::io::Result<bool> {
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
        use std::os::fd::AsFd;
        let fd = self
            .irq
            .as_ref()
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::Unsupported))?;
        let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLIN)];
        if poll(&mut fds, PollTimeout::from(timeout_ms))? == 0 {
            return Ok(false);
        }
        let mut count = [0u8; 8];
        nix::unistd::read(fd, &mut count)?;
        Ok(true)
    }
}

/// The bytes a queue of `entries` takes: SQ, CQ, shadow page, each page-aligned
/// (queue.proto's layout).
pub fn queue_bytes(entries: u32) -> u64 {
    let page = |b: u64| b.next_multiple_of(4096);
    page(u64::from(entries) * 64) + page(u64::from(entries) * 16) + 4096
}

impl<T> LentQueue<T> {
    /// Asks rigd for an NVMe queue pair of `depth` commands on `session`'s device,
    /// with its rings in a buffer of that session. Its commands name the namespace
    /// rigd identified (its block size and size in [`LentQueue::namespace`]).
    ///
    /// # Errors
    /// [`QueueError::Refused`] with its kind (depth 0 or over the limit, too many
    /// queues, a device not held or not NVMe…); the buffer's allocation errors.
    pub async fn open(session: &Session, depth: u32) -> Result<Self, QueueError> {
        let entries = depth.saturating_add(1).max(2);
        let buf = Arc::new(session.alloc(queue_bytes(entries), 4096).await?);
        let (lease, offset) = buf.lease();
        let (reply, mut fds) = session
            .call(Request::OpenQueue(pb::QueueOpen {
                depth,
                lease: lease.0,
                offset,
            }))
            .await?;
        let q = match reply {
            Reply::QueueOpened(q) => q,
            Reply::QueueRefused(r) => return Err(refused(r)),
            _ => {
                return Err(protocol("a queue request must be answered `queue_opened`"));
            }
        };
        let want = if q.interrupts { 2 } else { 1 };
        if fds.len() != want {
            return Err(protocol(
                "a lent queue's reply carries its kick, and its interrupt when it has one",
            ));
        }
        let irq = q.interrupts.then(|| fds.pop()).flatten();
        let kick = fds.pop().ok_or(protocol("no kick"))?;
        let rel = |o: u64| {
            o.checked_sub(offset)
                .ok_or(protocol("rings before the buffer"))
        };
        let (sq, cq, shadow) = (rel(q.sq_offset)?, rel(q.cq_offset)?, rel(q.shadow_offset)?);
        let qid = u16::try_from(q.qid).map_err(|_| protocol("queue id"))?;
        let bell = ShadowBell {
            mem: Arc::clone(&buf),
            slot: shadow + q.shadow_slot,
            kick,
        };
        let queue = Queue::new(Arc::clone(&buf), bell, layout(q.entries, sq, cq))
            .map_err(|_| protocol("rigd's ring layout"))?;
        if !(9..=16).contains(&q.lba_shift) || q.blocks == 0 {
            return Err(protocol(
                "rigd's namespace geometry (block size 512 B to 64 KiB, at least one block)",
            ));
        }
        let ns = Namespace {
            nsid: q.nsid,
            lba_shift: q.lba_shift,
            blocks: q.blocks,
        };
        Ok(Self {
            qid,
            entries: q.entries,
            nsid: q.nsid,
            namespace: ns,
            nvme: NvmeQueue::new(queue, ns, None),
            irq,
        })
    }

    /// Gives the queue back to rigd (which deletes it on the device first);
    /// `session` is the one it was opened in.
    ///
    /// # Errors
    /// [`QueueError::Refused`] (`NotYours`, `Device`), side socket errors.
    pub async fn close(self, session: &Session) -> Result<(), QueueError> {
        let (reply, _) = session
            .call(Request::CloseQueue(pb::QueueClose {
                qid: self.qid.into(),
            }))
            .await?;
        match reply {
            Reply::QueueClosed(_) => Ok(()),
            Reply::QueueRefused(r) => Err(refused(r)),
            _ => Err(protocol("a queue close must be answered `queue_closed`")),
        }
    }

    /// A queue of `depth` on a function of its own: the first SR-IOV virtual
    /// function of `pf` that rigd holds in vfio mode and that serves no other client
    /// (rigd lends a VF's queues to one client at a time). Returns the session on that
    /// VF, which owns the queue's memory, and the queue.
    ///
    /// # Errors
    /// [`QueueError::NoFreeFunction`] when rigd holds no VF of `pf` or every one
    /// refused (serving another client, or not able to lend); the listing's RPC errors.
    pub async fn open_isolated(
        socket: impl AsRef<Path>,
        pf: &str,
        depth: u32,
    ) -> Result<(Session, Self), QueueError> {
        let socket = socket.as_ref();
        let listing = crate::Client::connect(socket)
            .await
            .map_err(SessionError::from)?
            .list_devices(false)
            .await
            .map_err(SessionError::from)?;
        let vfs = listing.devices.iter().filter(|d| {
            d.sysfs.physfn.as_deref() == Some(pf) && d.sysfs.driver.as_deref() == Some("vfio-pci")
        });
        let mut tried = Vec::new();
        for vf in vfs {
            tried.push(vf.bdf.clone());
            let Ok(session) = Session::open(socket, &vf.bdf).await else {
                continue;
            };
            match Self::open(&session, depth).await {
                Ok(q) => return Ok((session, q)),
                // This function cannot serve now; another may.
                Err(QueueError::Refused {
                    kind:
                        QueueErrorKind::Busy
                        | QueueErrorKind::TooMany
                        | QueueErrorKind::Leased
                        | QueueErrorKind::NotHeld
                        | QueueErrorKind::Unsupported
                        | QueueErrorKind::Device,
                    ..
                }) => {}
                // The request itself is wrong (a depth no function takes): say so now.
                Err(e) => return Err(e),
            }
        }
        Err(QueueError::NoFreeFunction {
            pf: pf.to_owned(),
            tried,
        })
    }
}

fn refused(r: pb::QueueRefused) -> QueueError {
    QueueError::Refused {
        kind: QueueErrorKind::from_wire(r.code),
        message: r.message,
    }
}

fn protocol(what: &'static str) -> QueueError {
    SessionError::Protocol(what).into()
}
