//! Hardware queues lent to clients: which queue ids a device's clients hold, whose
//! memory their rings are in, the kick each was lent, and taking them back in an order
//! that never lets the device write freed memory. Device-agnostic: a device kind
//! plugs in through [`QueueDevice`] (NVMe's is `queue::nvme`, on `nvme::Controller`),
//! and the kicks through [`Kicks`] (VFIO ioeventfds, `queue::nvme::VfioKicks`).
//!
//! Flow: a client session asks for a queue on a held device (`service`) → `rig.rs`
//! finds the device's [`Queues`], its [`QueueDevice`] and [`Kicks`] → [`Queues::open`]
//! checks the limits, picks a queue id, has the device create the pair on rings in the
//! client's lease, and registers the kick → the client gets the kick's eventfd. At the
//! session's end (connection closed, kill -9 included) [`Queues::reclaim`] deletes each
//! of its queues (SQ, then CQ, each completed by the device: its commands are done or
//! aborted), then unregisters the kick, and only then says the memory may go.
//!
//! State: one [`Queues`] per held device, under that device's lock in `rig.rs`; it
//! owns the table of lent queues and nothing of the hardware. Who writes the rings:
//! the client its SQ entries and doorbell values, the device its CQ entries; rigd
//! neither, once the queue exists. Invariant: a queue whose deletion failed stays in
//! the table as stuck, and its memory is never reported releasable: the device may
//! still write it, so only a device reset frees it.
//!
//! Queue ids: with doorbells 4 bytes apart, one 4 KiB page holds the doorbells of 512
//! queue ids, page 0 those of the admin queue and ids 1–511 (NVMe 1.4 §3.1;
//! docs/hardware/queues.md, "QEMU's NVMe controller"). When the device offers ids past
//! 511, client k (in arrival order) gets ids in page k only, so no page holds two
//! clients' doorbells (or shadow slots); otherwise ids are dense and the status says
//! the doorbells are not page-isolated. A device made
//! [`Queues::one_client`] (a function with fewer ids than a page per client, such as
//! an SR-IOV virtual function) lends to one session at a time: every page is that
//! session's, and a second session is refused with [`QueueError::Busy`].
//!
//! Not here: the device's commands (`nvme`), the ioctls (`vfio`), the leases (`dma`),
//! the wire (`service`), the client's ring arithmetic (`rig_client::queue`).

pub mod nvme;

use std::{collections::BTreeMap, fmt, time::SystemTime};

use crate::{
    dma::SessionId,
    error::{Class, Classify, Reason},
    pci::Bdf,
};

pub use vmm_sys_util::eventfd::EventFd;

/// What a queue request fails with.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    #[error("A queue of depth 0 was asked for on {bdf}: a queue takes at least one command")]
    DepthZero { bdf: Bdf },
    #[error("A queue of depth {depth} was asked for on {bdf}; the most is {limit} ({why})")]
    DepthOverLimit {
        bdf: Bdf,
        depth: u32,
        limit: u32,
        why: &'static str,
    },
    #[error(
        "Session {session} holds {held} queues on {bdf}, the most one client may (queue.per_client)"
    )]
    TooMany {
        bdf: Bdf,
        session: SessionId,
        held: u32,
    },
    #[error("{bdf} has no free queue id for this client (ids 1 to {max_qid})")]
    NoQueueId { bdf: Bdf, max_qid: u16 },
    #[error("Queue {qid} on {bdf} is not one of this session's")]
    NotYours { bdf: Bdf, qid: u16 },
    #[error(
        "{bdf} lends its queues to one client at a time and uid {uid} (pid {pid}) holds them; ask for a queue on another function"
    )]
    Busy { bdf: Bdf, uid: u32, pid: i32 },
    #[error("Failed to {step} for queue {qid} on {bdf}")]
    Device {
        bdf: Bdf,
        qid: u16,
        step: &'static str,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl Classify for QueueError {
    fn class(&self) -> Class {
        let (reason, bdf) = match self {
            Self::DepthZero { bdf } => (Reason::QueueDepthZero, bdf),
            Self::DepthOverLimit { bdf, .. } => (Reason::QueueDepthOverLimit, bdf),
            Self::TooMany { bdf, .. } => (Reason::QueueLimit, bdf),
            Self::NoQueueId { bdf, .. } => (Reason::NoQueueId, bdf),
            Self::NotYours { bdf, .. } => (Reason::UnknownQueue, bdf),
            Self::Busy { bdf, .. } => (Reason::FunctionBusy, bdf),
            Self::Device { bdf, step, .. } => {
                return Class::new(Reason::QueueDevice).on(bdf).at(step);
            }
        };
        Class::new(reason).on(bdf)
    }
}

/// Limits from the configuration (`[queue]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Queues one session may hold on one device.
    pub per_client: u32,
    /// The most commands one queue may have in flight.
    pub max_depth: u32,
}

impl From<&crate::config::Queue> for Limits {
    fn from(c: &crate::config::Queue) -> Self {
        Self {
            per_client: c.per_client,
            max_depth: c.max_depth,
        }
    }
}

/// Who holds a queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    pub session: SessionId,
    pub uid: u32,
    pub pid: i32,
}

/// A queue pair's rings, by device address (in the owner's lease).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rings {
    pub sq: u64,
    pub cq: u64,
}

/// Where a queue's doorbells are in BAR0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Doorbells {
    pub sq_tail: u64,
    pub cq_head: u64,
}

/// The device side of lending: what a device kind must do for a queue.
pub trait QueueDevice: fmt::Debug {
    /// The highest queue id the device accepts.
    fn max_qid(&self) -> u16;
    /// Queue ids whose doorbells share one 4 KiB page.
    fn ids_per_page(&self) -> u16;
    /// The most entries a ring may have.
    fn max_entries(&self) -> u32;
    /// Creates the pair `qid` of `entries` entries on `rings`: completion ring first,
    /// then the submission ring; if the second fails the first is deleted again.
    ///
    /// # Errors
    /// The device's error, boxed.
    /// The completion ring interrupts on MSI-X `vector`, or is polled (`None`).
    fn create(
        &mut self,
        qid: u16,
        entries: u32,
        rings: &Rings,
        vector: Option<u16>,
    ) -> Result<Doorbells, Box<dyn std::error::Error + Send + Sync>>;
    /// Deletes the submission ring, then the completion ring, each completed by the
    /// device before this returns (no command of the queue writes memory afterwards).
    ///
    /// # Errors
    /// The device's error, boxed: the queue may still be live.
    fn delete(&mut self, qid: u16) -> Result<(), Box<dyn std::error::Error + Send + Sync>>;
}

/// Kicks: a fixed write to a BAR0 offset, made by the kernel when an eventfd is
/// signalled (VFIO_DEVICE_IOEVENTFD), so a client rings one doorbell and no other; and
/// interrupts: one MSI-X vector's eventfd lent to the queue's owner.
pub trait Kicks: fmt::Debug {
    /// MSI-X vectors 1..=n that queues may interrupt on (0: queues are polled).
    fn vectors(&self) -> u16;
    /// Points `vector` at a fresh eventfd and returns it.
    ///
    /// # Errors
    /// The kernel's error, boxed.
    fn lend_vector(&self, vector: u16)
    -> Result<EventFd, Box<dyn std::error::Error + Send + Sync>>;
    /// Points `vector` back at rigd's own eventfd: the lent one is signalled no more.
    ///
    /// # Errors
    /// The kernel's error, boxed.
    fn take_vector(&self, vector: u16) -> Result<(), Box<dyn std::error::Error + Send + Sync>>;
    /// Registers a kick writing `data` at `offset` and returns its eventfd.
    ///
    /// # Errors
    /// The kernel's error, boxed.
    fn register(
        &self,
        offset: u64,
        data: u64,
    ) -> Result<EventFd, Box<dyn std::error::Error + Send + Sync>>;
    /// Unregisters it: signalling the eventfd does nothing from then on.
    ///
    /// # Errors
    /// The kernel's error, boxed.
    fn unregister(
        &self,
        offset: u64,
        data: u64,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>>;
}

/// A queue lent to a client: its id, doorbells, kick and interrupt (`rig` adds where
/// its rings lie in the client's lease: `rig::QueueGrant`).
#[derive(Debug)]
pub struct LentQueue {
    pub qid: u16,
    /// Ring entries: depth + 1 (one slot stays empty).
    pub entries: u32,
    pub doorbells: Doorbells,
    /// Signalling it writes the SQ tail doorbell with the kick's fixed value.
    pub kick: EventFd,
    /// The value the kick writes.
    pub kick_data: u64,
    /// The completion interrupt's eventfd, when the queue has a vector.
    pub irq: Option<EventFd>,
}

/// How a lent queue stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    Live,
    /// Its deletion failed: the device may still write its rings.
    Stuck,
}

/// One lent queue, as `rigctl queues` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueStatus {
    pub bdf: Bdf,
    pub qid: u16,
    pub owner: Owner,
    pub depth: u32,
    pub entries: u32,
    pub rings: Rings,
    pub doorbells: Doorbells,
    pub kick_data: u64,
    /// The MSI-X vector its completions signal (`None`: polled).
    pub vector: Option<u16>,
    /// No other client's doorbell shares this queue's doorbell page.
    pub page_isolated: bool,
    pub since: SystemTime,
    pub state: State,
}

/// What reclaiming a session's queues did.
#[derive(Debug, Default)]
pub struct Reclaimed {
    /// Queues deleted and unregistered: their memory may be released.
    pub freed: Vec<u16>,
    /// Queues the device did not delete: their memory must stay with rigd.
    pub stuck: Vec<(u16, QueueError)>,
    /// Kicks that could not be unregistered (the queue is gone; a signal is a write
    /// to a doorbell of no queue, which the device ignores).
    pub warnings: Vec<QueueError>,
}

impl Reclaimed {
    /// Whether every queue's memory may be released.
    pub fn memory_free(&self) -> bool {
        self.stuck.is_empty()
    }
}

/// The queues lent on one device.
#[derive(Debug)]
pub struct Queues {
    bdf: Bdf,
    limits: Limits,
    lent: BTreeMap<u16, QueueStatus>,
    /// Doorbell page of each session, while it holds queues.
    pages: BTreeMap<SessionId, u16>,
    /// Queues go to one session at a time.
    one_client: bool,
}

impl Queues {
    pub fn new(bdf: Bdf, limits: Limits) -> Self {
        Self {
            bdf,
            limits,
            lent: BTreeMap::new(),
            pages: BTreeMap::new(),
            one_client: false,
        }
    }

    /// Queues that go to one session at a time: for a device whose doorbells (or
    /// shadow slots) cannot be split by page between clients.
    pub fn one_client(bdf: Bdf, limits: Limits) -> Self {
        Self {
            one_client: true,
            ..Self::new(bdf, limits)
        }
    }

    /// Whether this device lends to one session at a time.
    pub fn is_one_client(&self) -> bool {
        self.one_client
    }

    /// New limits for the requests after (a reload); lent queues stay as they are.
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    /// Every lent queue.
    pub fn status(&self) -> Vec<QueueStatus> {
        self.lent.values().cloned().collect()
    }

    /// Lends a queue of `depth` commands on `rings` to `owner`.
    ///
    /// # Errors
    /// [`QueueError::DepthZero`], [`QueueError::DepthOverLimit`] (the config's or the
    /// device's), [`QueueError::TooMany`], [`QueueError::NoQueueId`], and
    /// [`QueueError::Device`] for the create or the kick (a created pair is deleted
    /// again when its kick cannot be registered); [`QueueError::Busy`] on a
    /// one-client device another session holds queues on.
    pub fn open(
        &mut self,
        dev: &mut dyn QueueDevice,
        kicks: &dyn Kicks,
        owner: Owner,
        depth: u32,
        rings: Rings,
    ) -> Result<LentQueue, QueueError> {
        let bdf = self.bdf;
        self.check_depth(dev, depth)?;
        if self.one_client
            && let Some(other) = self
                .lent
                .values()
                .find(|q| q.owner.session != owner.session)
        {
            return Err(QueueError::Busy {
                bdf,
                uid: other.owner.uid,
                pid: other.owner.pid,
            });
        }
        let held = self.held_by(owner.session);
        if held >= self.limits.per_client {
            return Err(QueueError::TooMany {
                bdf,
                session: owner.session,
                held,
            });
        }
        let (qid, page_isolated) = self.pick_qid(dev, owner.session)?;
        // One client: no other session's doorbell is on any page of the device.
        let page_isolated = page_isolated || self.one_client;
        let entries = depth + 1;
        let device = |qid, step| {
            move |source| QueueError::Device {
                bdf,
                qid,
                step,
                source,
            }
        };
        let vector = self.pick_vector(kicks);
        let irq = match vector.map(|v| kicks.lend_vector(v)).transpose() {
            Ok(irq) => irq,
            Err(source) => return Err(device(qid, "lend the interrupt")(source)),
        };
        let give_back = |why: &str| {
            if let Some(v) = vector
                && let Err(e) = kicks.take_vector(v)
            {
                tracing::warn!(%bdf, qid, vector = v, error = &*e as &dyn std::error::Error, "{why}");
            }
        };
        let doorbells = match dev.create(qid, entries, &rings, vector) {
            Ok(d) => d,
            Err(source) => {
                give_back("the interrupt of a queue that was not created stays lent");
                return Err(device(qid, "create the queue pair")(source));
            }
        };
        // The kick writes 0: with shadow doorbells the device takes the tail from
        // memory and the write only says "look" (docs/hardware/queues.md, "QEMU's NVMe
        // controller"; a value past the ring would be ignored, and 0 never is).
        let kick_data = 0;
        let kick = match kicks.register(doorbells.sq_tail, kick_data) {
            Ok(k) => k,
            Err(source) => {
                if let Err(e) = dev.delete(qid) {
                    tracing::warn!(%bdf, qid, error = &*e as &dyn std::error::Error, "a queue whose kick failed could not be deleted");
                } else {
                    give_back("the interrupt of a deleted queue stays lent");
                }
                return Err(device(qid, "register the kick")(source));
            }
        };
        self.pages
            .entry(owner.session)
            .or_insert(qid / dev.ids_per_page().max(1));
        self.lent.insert(
            qid,
            QueueStatus {
                bdf,
                qid,
                owner,
                depth,
                entries,
                rings,
                doorbells,
                kick_data,
                vector,
                page_isolated,
                since: SystemTime::now(),
                state: State::Live,
            },
        );
        Ok(LentQueue {
            qid,
            entries,
            doorbells,
            kick,
            kick_data,
            irq,
        })
    }

    /// The lowest vector no lent queue uses, if the device lends any.
    fn pick_vector(&self, kicks: &dyn Kicks) -> Option<u16> {
        (1..=kicks.vectors()).find(|v| self.lent.values().all(|q| q.vector != Some(*v)))
    }

    fn check_depth(&self, dev: &dyn QueueDevice, depth: u32) -> Result<(), QueueError> {
        let bdf = self.bdf;
        if depth == 0 {
            return Err(QueueError::DepthZero { bdf });
        }
        let over = |limit, why| {
            Err(QueueError::DepthOverLimit {
                bdf,
                depth,
                limit,
                why,
            })
        };
        if depth > self.limits.max_depth {
            return over(self.limits.max_depth, "queue.max_depth");
        }
        let device_limit = dev.max_entries().saturating_sub(1);
        if depth > device_limit {
            return over(device_limit, "the device's largest ring, less one slot");
        }
        Ok(())
    }

    fn held_by(&self, session: SessionId) -> u32 {
        let n = self
            .lent
            .values()
            .filter(|q| q.owner.session == session)
            .count();
        u32::try_from(n).unwrap_or(u32::MAX)
    }

    /// The session's next queue id: in its own doorbell page when the device has
    /// pages to spare, else the lowest free id.
    fn pick_qid(
        &self,
        dev: &dyn QueueDevice,
        session: SessionId,
    ) -> Result<(u16, bool), QueueError> {
        let per_page = dev.ids_per_page().max(1);
        let pages_taken: Vec<u16> = self
            .pages
            .iter()
            .filter(|(s, _)| **s != session)
            .map(|(_, p)| *p)
            .collect();
        let own = self.pages.get(&session).copied();
        match pick_qid(dev.max_qid(), per_page, own, &pages_taken, |q| {
            self.lent.contains_key(&q)
        }) {
            Some(choice) => Ok(choice),
            None => Err(QueueError::NoQueueId {
                bdf: self.bdf,
                max_qid: dev.max_qid(),
            }),
        }
    }

    /// Takes back queue `qid` of `session` (the client asked): see [`Queues::reclaim`].
    ///
    /// # Errors
    /// [`QueueError::NotYours`]; the deletion's error (the queue stays, stuck).
    pub fn close(
        &mut self,
        dev: &mut dyn QueueDevice,
        kicks: &dyn Kicks,
        session: SessionId,
        qid: u16,
    ) -> Result<Reclaimed, QueueError> {
        if self
            .lent
            .get(&qid)
            .is_none_or(|q| q.owner.session != session)
        {
            return Err(QueueError::NotYours { bdf: self.bdf, qid });
        }
        let mut out = Reclaimed::default();
        self.take_back(dev, kicks, qid, &mut out);
        self.forget_page(session);
        match out.stuck.pop() {
            Some((_, e)) => Err(e),
            None => Ok(out),
        }
    }

    /// Takes back every queue `session` holds, in order: delete the SQ, then the CQ,
    /// each completed by the device; then unregister the kick and take the interrupt
    /// back; only then is the queue
    /// listed in [`Reclaimed::freed`]. A queue the device did not delete is listed as
    /// stuck and stays in the table.
    pub fn reclaim(
        &mut self,
        dev: &mut dyn QueueDevice,
        kicks: &dyn Kicks,
        session: SessionId,
    ) -> Reclaimed {
        let mut out = Reclaimed::default();
        let mine: Vec<u16> = self
            .lent
            .values()
            .filter(|q| q.owner.session == session && q.state == State::Live)
            .map(|q| q.qid)
            .collect();
        for qid in mine {
            self.take_back(dev, kicks, qid, &mut out);
        }
        self.forget_page(session);
        out
    }

    fn take_back(
        &mut self,
        dev: &mut dyn QueueDevice,
        kicks: &dyn Kicks,
        qid: u16,
        out: &mut Reclaimed,
    ) {
        let bdf = self.bdf;
        let Some(q) = self.lent.get_mut(&qid) else {
            return;
        };
        if let Err(source) = dev.delete(qid) {
            let e = QueueError::Device {
                bdf,
                qid,
                step: "delete the queue pair",
                source,
            };
            q.state = State::Stuck;
            out.stuck.push((qid, e));
            return;
        }
        if let Err(source) = kicks.unregister(q.doorbells.sq_tail, q.kick_data) {
            out.warnings.push(QueueError::Device {
                bdf,
                qid,
                step: "unregister the kick",
                source,
            });
        }
        if let Some(v) = q.vector
            && let Err(source) = kicks.take_vector(v)
        {
            out.warnings.push(QueueError::Device {
                bdf,
                qid,
                step: "take the interrupt back",
                source,
            });
        }
        self.lent.remove(&qid);
        out.freed.push(qid);
    }

    fn forget_page(&mut self, session: SessionId) {
        if self.held_by(session) == 0 {
            self.pages.remove(&session);
        }
    }
}

/// Picks a queue id in 1..=`max_qid`: in page `own` if the session has one and it has
/// a free id; else in the lowest page ≥ 1 no other session uses; when the device has
/// no such page, the lowest free id anywhere (not page-isolated). `used` says whether
/// an id is taken. Returns the id and whether it is page-isolated.
pub fn pick_qid(
    max_qid: u16,
    per_page: u16,
    own: Option<u16>,
    others: &[u16],
    used: impl Fn(u16) -> bool,
) -> Option<(u16, bool)> {
    let per_page = per_page.max(1);
    let last_page = max_qid / per_page;
    let free_in = |page: u16| {
        let first = (page.checked_mul(per_page)?).max(1);
        let last = page
            .checked_mul(per_page)
            .and_then(|p| p.checked_add(per_page - 1))
            .unwrap_or(u16::MAX)
            .min(max_qid);
        (first..=last).find(|q| !used(*q))
    };
    if last_page >= 1 {
        if let Some(p) = own.filter(|p| *p >= 1)
            && let Some(q) = free_in(p)
        {
            return Some((q, true));
        }
        if let Some(q) = (1..=last_page)
            .filter(|p| !others.contains(p) && Some(*p) != own)
            .find_map(free_in)
        {
            return Some((q, true));
        }
    }
    (1..=max_qid).find(|q| !used(*q)).map(|q| (q, false))
}

#[cfg(test)]
mod tests;
