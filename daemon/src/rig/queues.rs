//! `Rig`'s sequencing of queue lending: a held NVMe controller is started by rigd the
//! first time a client asks for a queue on it (`nvme`), its shadow doorbell window is
//! set up in its pool (`dma`), and each queue is lent and taken back through `queue`,
//! with the kick as a VFIO ioeventfd (`vfio`).
//!
//! Memory: the controller's admin queues, its page 0 of shadow doorbells (the admin
//! queue and ids 1–511) and every queue's event index live in one block rigd leases
//! from the device's own pool. Client k's shadow page (ids 512k…) is a page of its own
//! lease, aliased at `dbs + 4096k`, so its doorbell values stay in its memory and no
//! other client's are in that page.
//!
//! A controller with fewer than 512 I/O queue ids (an SR-IOV virtual function, whose
//! few queues its primary assigned) has no page to give each client: it lends to one
//! session at a time (`Queues::one_client`), and that session's shadow page is aliased
//! as page 0 in place of rigd's while it holds queues. Page 0 also has the admin
//! queue's slot; QEMU's controller only writes it (`nvme_process_db` mirrors the
//! admin doorbell there, and `nvme_process_sq` reads shadow tails for I/O queues only),
//! so the client's scribbles there do not reach the admin queue. Isolation between
//! clients comes from each function being its own IOMMU group, container and pool
//! (docs/queues.md "Isolation"). Lock order: the device's slot, then the ledger's `queue_hosts`.

use std::collections::BTreeMap;

use super::{Kind, RequestError, Rig, RigError, lock};
use crate::{
    dma::{ALIAS_PAGE, BLOCK_SIZE, DeviceAddr, Iova, LeaseId, SessionId},
    nvme::{self, Controller, NvmeError, Options},
    pci::Bdf,
    queue::{
        EventFd, Owner, QueueError, QueueStatus, Queues, Rings,
        nvme::{PoolMem, VfioKicks},
    },
    take::TakeError,
};

/// PCI class of an NVMe controller (mass storage, NVM, NVM Express).
const NVME_CLASS: &str = "0x010802";
/// Where the event indexes live in rigd's block: 8 bytes per id up to 65535, 512 KiB.
const EVENTIDX_AT: u64 = 1 << 20;
/// rigd's page 0 of the shadow window, in its block (after the admin memory).
const SHADOW0_AT: u64 = nvme::ADMIN_MEMORY;
/// MSI-X vectors rigd enables: vector 0 (the admin queue, polled) and up to 64 lent.
const MAX_VECTORS: u32 = 65;
/// The namespace lent queues' commands name (QEMU's controller, and each of its
/// SR-IOV functions, has namespace 1 attached).
const NSID: u32 = 1;

/// The namespace a lent queue's commands name, as Identify Namespace gave it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Namespace {
    pub nsid: u32,
    /// log2 of its logical block size.
    pub lba_shift: u32,
    /// Its size in logical blocks.
    pub blocks: u64,
}

/// A held NVMe controller rigd drives to lend its queues.
#[derive(Debug)]
pub(super) struct QueueHost {
    ctrl: Controller,
    queues: Queues,
    /// The lease each lent queue's rings are in.
    leases: BTreeMap<u16, (SessionId, LeaseId)>,
    window: Iova,
    /// rigd's eventfd of each enabled MSI-X vector; lent vectors point elsewhere.
    parked: Vec<EventFd>,
    /// Client shadow pages aliased into the window: page → (session, lease, offset).
    pages: BTreeMap<u16, (SessionId, LeaseId, u64)>,
    /// rigd's own block: the admin memory, its page 0 of shadow slots, event indexes.
    own: LeaseId,
    namespace: Namespace,
}

/// What a client is sent for a lent queue: where it lies in the client's lease, its
/// kick and interrupt.
#[derive(Debug)]
pub struct QueueGrant {
    pub qid: u16,
    pub entries: u32,
    /// Byte offsets in the lease: the SQ, the CQ, the shadow doorbell page.
    pub sq_offset: u64,
    pub cq_offset: u64,
    pub shadow_offset: u64,
    /// Where in the shadow page this queue's SQ tail is (its CQ head is 4 further).
    pub shadow_slot: u64,
    pub kick: EventFd,
    /// The completion interrupt, when the controller had a vector free.
    pub irq: Option<EventFd>,
    pub namespace: Namespace,
}

/// One lent queue as `rigctl queues` shows it.
#[derive(Debug, Clone)]
pub struct QueueView {
    pub status: QueueStatus,
    /// (SQ tail, CQ head) from the shadow page, when it could be read.
    pub shadow: Option<(u32, u32)>,
}

/// Bytes a queue of `entries` takes in a lease: SQ, CQ and the shadow page, each
/// page-aligned.
pub fn queue_bytes(entries: u32) -> (u64, u64, u64) {
    let sq = (u64::from(entries) * 64).next_multiple_of(ALIAS_PAGE);
    let cq = (u64::from(entries) * 16).next_multiple_of(ALIAS_PAGE);
    (sq, cq, ALIAS_PAGE)
}

impl Rig {
    /// Lends session `session` a queue of `depth` commands on the device its DMA
    /// session is on, with rings in its lease `lease` from `offset`.
    ///
    /// # Errors
    /// The session's or lease's [`crate::dma::DmaError`]; [`TakeError::NotHeld`];
    /// [`RigError::BadRequest`] for a device not held in vfio mode, not an NVMe
    /// controller, or rings that do not fit the lease; [`NvmeError`] starting the
    /// controller; [`QueueError`] for the limits and the device's refusal.
    pub fn open_queue(
        &self,
        session: SessionId,
        owner: Owner,
        depth: u32,
        lease: LeaseId,
        offset: u64,
    ) -> Result<QueueGrant, RigError> {
        let (pool, addr, bytes) = self.dma.session_lease(session, lease)?;
        let bdf: Bdf = pool
            .name()
            .parse()
            .map_err(|_| RequestError::PoolOfNoDevice {
                pool: pool.name().to_owned(),
            })?;
        let Some(DeviceAddr::Iova(base)) = addr else {
            return Err(RequestError::QueueWithoutIova.into());
        };
        let entries = depth.saturating_add(1);
        let (sq, cq, shadow) = queue_bytes(entries);
        let fits = offset.is_multiple_of(ALIAS_PAGE)
            && offset
                .checked_add(sq + cq + shadow)
                .is_some_and(|end| end <= bytes);
        if depth != 0 && !fits {
            return Err(RequestError::QueueOutsideLease {
                depth,
                need: sq + cq + shadow,
                offset,
                bytes,
            }
            .into());
        }
        self.refuse_leased(bdf)?;
        // Read before the slot and the table are locked: a reload holds the config
        // while it takes the table's lock.
        let limits = self.queue_limits();
        self.with_slot_wait(bdf, |slot| {
            let t = slot.as_ref().ok_or(TakeError::NotHeld { bdf })?;
            let v = t
                .hold
                .vfio()
                .ok_or(RequestError::QueueInSysfsMode { bdf })?;
            let mut hosts = lock(&self.ledger.queue_hosts);
            let s = match hosts.entry(bdf) {
                std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::btree_map::Entry::Vacant(e) => {
                    e.insert(self.start_queue_host(bdf, v, limits)?)
                }
            };
            let kicks = VfioKicks::with_vectors(v.device.as_ref(), &s.parked)
                .map_err(|source| TakeError::Vfio { bdf, source })?;
            let rings = Rings {
                sq: base.0 + offset,
                cq: base.0 + offset + sq,
            };
            let shadow_offset = offset + sq + cq;
            // A fresh CQ: no entry carries phase 1.
            let zero = vec![0u8; usize::try_from(cq).expect("small")];
            pool.write(lease, offset + sq, &zero)?;
            let lent = s.queues.open(&mut s.ctrl, &kicks, owner, depth, rings)?;
            // No stale shadow tail or head: the controller trusts them unchecked
            // (docs/hardware/queues.md, "QEMU's NVMe controller"). Only this queue's
            // slot: others may share the page.
            let slot = 8 * u64::from(lent.qid % 512);
            pool.write(lease, shadow_offset + slot, &[0; 8])?;
            s.leases.insert(lent.qid, (session, lease));
            let page = lent.qid / 512;
            let mapped = match s.pages.get(&page) {
                Some((sess, l, o)) if *sess == session && *l == lease && *o == shadow_offset => Ok(()),
                Some(_) => Err(RequestError::ShadowPageShared { qid: lent.qid }.into()),
                None => {
                    let at = Iova(s.window.0 + u64::from(page) * ALIAS_PAGE);
                    // Page 0 is rigd's until a one-client function's client takes it; no
                    // admin command runs between the swap's two halves (the slot lock).
                    let swapped = if page == 0 { pool.unalias(at) } else { Ok(()) };
                    swapped
                        .and_then(|()| pool.alias(lease, shadow_offset, at))
                        .map(|()| {
                            s.pages.insert(page, (session, lease, shadow_offset));
                        })
                        .map_err(|e| {
                            if page == 0
                                && let Err(back) = pool.alias(s.own, SHADOW0_AT, at)
                            {
                                tracing::error!(%bdf, error = &back as &dyn std::error::Error, "rigd's shadow page 0 is not mapped back");
                            }
                            RigError::from(e)
                        })
                }
            };
            if let Err(e) = mapped {
                s.leases.remove(&lent.qid);
                let r = s.queues.close(&mut s.ctrl, &kicks, session, lent.qid);
                if let Err(undo) = r {
                    tracing::warn!(%bdf, qid = lent.qid, error = &undo as &dyn std::error::Error, "a queue whose shadow page failed could not be taken back");
                }
                return Err(e);
            }
            self.ledger.note(session, Kind::Queues);
            tracing::debug!(%bdf, qid = lent.qid, session = session.0, depth, "queue lent");
            Ok(QueueGrant {
                qid: lent.qid,
                entries: lent.entries,
                sq_offset: offset,
                cq_offset: offset + sq,
                shadow_offset,
                shadow_slot: slot,
                kick: lent.kick,
                irq: lent.irq,
                namespace: s.namespace,
            })
        })
    }

    /// Starts driving `bdf`'s NVMe controller: rigd's block, the controller's reset,
    /// enable and Identify, the shadow window and Doorbell Buffer Config.
    fn start_queue_host(
        &self,
        bdf: Bdf,
        v: &crate::vfio::Handles,
        limits: crate::queue::Limits,
    ) -> Result<QueueHost, RigError> {
        let class = self.sysfs.read_attr(bdf, "class")?;
        if class.as_deref() != Some(NVME_CLASS) {
            return Err(RequestError::NotNvme { bdf, class }.into());
        }
        let pool = self.dma.pool(&bdf.to_string())?;
        // The controller fetches its queues by DMA: bus mastering on (give-back, and
        // vfio-pci when rigd's fd closes, turn it off again).
        if !self.taker.set_bus_master(bdf, true)? {
            tracing::info!(%bdf, "bus mastering on for lent queues");
        }
        let own = PoolMem::lease(std::sync::Arc::clone(&pool), 0)?;
        let (own_id, own_addr) = (own.lease_id(), nvme::DmaMem::addr(&own));
        let regs = nvme::map_bar0(bdf, v.device.as_ref())?;
        let mut ctrl = Controller::new(bdf, Box::new(regs), Box::new(own), Options::default())?;
        ctrl.start()?;
        // From here a failure leaves nothing behind: the controller disabled (before its
        // memory goes with `ctrl`), MSI-X off, the window unaliased and given back.
        let mut window = None;
        let set_up = (|| {
            if !ctrl.has_dbbuf() {
                return Err(RigError::Nvme(NvmeError::Unsupported {
                    bdf,
                    why: "it lacks Doorbell Buffer Config, which lent kicks need".into(),
                }));
            }
            let ns = ctrl.identify_namespace(NSID)?;
            if ns.metadata != 0 {
                return Err(RigError::Nvme(NvmeError::Unsupported {
                    bdf,
                    why: format!(
                        "namespace {NSID}'s format carries {} metadata bytes per block; rig lends namespaces without",
                        ns.metadata
                    ),
                }));
            }
            if ctrl.max_qid() == 0 {
                return Err(RigError::Nvme(NvmeError::Unsupported {
                    bdf,
                    why: "it allocated no I/O queue (Number of Queues answered 0); an SR-IOV VF needs queue resources assigned and must be online".into(),
                }));
            }
            // MSI-X vectors for lent completion rings (QEMU's controller has 65).
            let parked = crate::queue::nvme::enable_vectors(v.device.as_ref(), MAX_VECTORS)
                .map_err(|source| RigError::EnableMsix { bdf, source })?;
            let w = *window.insert(pool.reserve_window(BLOCK_SIZE)?);
            pool.alias(own_id, SHADOW0_AT, w)?;
            ctrl.config_dbbuf(w.0, own_addr + EVENTIDX_AT)?;
            let namespace = Namespace {
                nsid: NSID,
                lba_shift: ns.lba_shift,
                blocks: ns.blocks,
            };
            Ok((parked, w, namespace))
        })();
        let (parked, window, namespace) = match set_up {
            Ok(done) => done,
            Err(e) => {
                if let Err(d) = ctrl.disable() {
                    tracing::warn!(%bdf, error = &d as &dyn std::error::Error, "the NVMe controller was not disabled");
                }
                let _ = v.device.disable_irq(crate::vfio::IrqIndex::Msix);
                if let Some(w) = window {
                    let _ = pool.unalias(w);
                    let _ = pool.free_window(w, BLOCK_SIZE);
                }
                return Err(e);
            }
        };
        // Fewer ids than a shadow page per client (ids 512k… for client k): one client
        // at a time, which then has every page of the function.
        let one_client = ctrl.max_qid() < 512;
        let queues = if one_client {
            tracing::info!(%bdf, max_qid = ctrl.max_qid(), blocks = namespace.blocks, lba_shift = namespace.lba_shift, "NVMe controller started for lent queues, one client at a time (fewer than 512 queue ids)");
            Queues::one_client(bdf, limits)
        } else {
            tracing::info!(%bdf, max_qid = ctrl.max_qid(), blocks = namespace.blocks, lba_shift = namespace.lba_shift, "NVMe controller started for lent queues");
            Queues::new(bdf, limits)
        };
        Ok(QueueHost {
            ctrl,
            queues,
            leases: BTreeMap::new(),
            window,
            parked,
            pages: BTreeMap::new(),
            own: own_id,
            namespace,
        })
    }

    /// Takes back queue `qid` of `session`.
    ///
    /// # Errors
    /// [`QueueError::NotYours`], the deletion's error.
    pub fn close_queue(&self, session: SessionId, qid: u16) -> Result<(), RigError> {
        let pool = self.dma.session_pool(session)?;
        let bdf: Bdf = pool
            .name()
            .parse()
            .map_err(|_| RequestError::PoolOfNoDevice {
                pool: pool.name().to_owned(),
            })?;
        self.with_slot_wait(bdf, |slot| {
            let t = slot.as_ref().ok_or(TakeError::NotHeld { bdf })?;
            let v = t.hold.vfio().ok_or(TakeError::NotHeld { bdf })?;
            let mut hosts = lock(&self.ledger.queue_hosts);
            let s = hosts
                .get_mut(&bdf)
                .ok_or(QueueError::NotYours { bdf, qid })?;
            let kicks = VfioKicks::with_vectors(v.device.as_ref(), &s.parked)
                .map_err(|source| TakeError::Vfio { bdf, source })?;
            s.queues.close(&mut s.ctrl, &kicks, session, qid)?;
            s.leases.remove(&qid);
            self.drop_pages(s, session);
            Ok(())
        })
    }

    /// Takes back every queue `session` holds, before its leases go: called when its
    /// connection ends (`end_session`). Leases behind a queue the device did not delete
    /// are withheld. Returns how many queues it deleted.
    pub(super) fn end_queues(&self, session: SessionId) -> usize {
        let Ok(pool) = self.dma.session_pool(session) else {
            return 0;
        };
        let Ok(bdf) = pool.name().parse::<Bdf>() else {
            return 0;
        };
        if !lock(&self.ledger.queue_hosts).contains_key(&bdf) {
            return 0;
        }
        let r = self.with_slot_wait(bdf, |slot| {
            let Some(v) = slot.as_ref().and_then(|t| t.hold.vfio()) else {
                return Ok(0);
            };
            let mut hosts = lock(&self.ledger.queue_hosts);
            let Some(s) = hosts.get_mut(&bdf) else {
                return Ok(0);
            };
            let kicks = VfioKicks::with_vectors(v.device.as_ref(), &s.parked)
                .map_err(|source| TakeError::Vfio { bdf, source })?;
            let r = s.queues.reclaim(&mut s.ctrl, &kicks, session);
            for w in &r.warnings {
                tracing::warn!(%bdf, error = w as &dyn std::error::Error, "reclaim");
            }
            for qid in &r.freed {
                s.leases.remove(qid);
            }
            for (qid, e) in &r.stuck {
                tracing::error!(%bdf, qid, error = e as &dyn std::error::Error, "a lent queue was not deleted: its memory stays with rigd");
                if let Some((sess, lease)) = s.leases.get(qid) {
                    self.dma.withhold(*sess, *lease);
                }
            }
            if r.memory_free() {
                self.drop_pages(s, session);
            }
            tracing::debug!(%bdf, session = session.0, freed = r.freed.len(), "queues reclaimed");
            Ok(r.freed.len())
        });
        r.unwrap_or_else(|e| {
            tracing::error!(%bdf, session = session.0, error = &e as &dyn std::error::Error, "queues not reclaimed");
            0
        })
    }

    /// Unaliases `session`'s shadow pages once it holds no queue on the device.
    fn drop_pages(&self, s: &mut QueueHost, session: SessionId) {
        if s.queues.status().iter().any(|q| q.owner.session == session) {
            return;
        }
        let Ok(pool) = self.dma.pool(&s.ctrl.bdf().to_string()) else {
            return;
        };
        let pages: Vec<u16> = s
            .pages
            .iter()
            .filter(|(_, p)| p.0 == session)
            .map(|(k, _)| *k)
            .collect();
        for page in pages {
            let at = Iova(s.window.0 + u64::from(page) * ALIAS_PAGE);
            match pool.unalias(at) {
                Ok(()) => {
                    s.pages.remove(&page);
                    // rigd's page 0 back under the admin queue's slot.
                    if page == 0
                        && let Err(e) = pool.alias(s.own, SHADOW0_AT, at)
                    {
                        tracing::error!(bdf = %s.ctrl.bdf(), error = &e as &dyn std::error::Error, "rigd's shadow page 0 is not mapped back");
                    }
                }
                Err(e) => {
                    tracing::error!(bdf = %s.ctrl.bdf(), page, error = &e as &dyn std::error::Error, "a shadow page stays aliased");
                }
            }
        }
    }

    /// Stops lending on `bdf` before it is given back, reset or resized: every lent
    /// queue is deleted, the controller disabled, rigd's block released. Called under
    /// the device's slot lock.
    pub(super) fn stop_queue_host(&self, bdf: Bdf, device: Option<&dyn crate::vfio::Device>) {
        let Some(mut s) = lock(&self.ledger.queue_hosts).remove(&bdf) else {
            return;
        };
        if let Some(d) = device
            && let Ok(kicks) = VfioKicks::with_vectors(d, &s.parked)
        {
            let sessions: Vec<SessionId> =
                s.queues.status().iter().map(|q| q.owner.session).collect();
            for session in sessions {
                s.queues.reclaim(&mut s.ctrl, &kicks, session);
            }
        }
        if let Err(e) = s.ctrl.disable() {
            tracing::warn!(%bdf, error = &e as &dyn std::error::Error, "the NVMe controller was not disabled");
        }
        if let Some(d) = device
            && let Err(e) = d.disable_irq(crate::vfio::IrqIndex::Msix)
        {
            tracing::warn!(%bdf, error = &e as &dyn std::error::Error, "MSI-X left enabled");
        }
        tracing::info!(%bdf, "NVMe controller no longer lends queues");
    }

    /// The configured limits of lent queues (a reload may have changed them).
    fn queue_limits(&self) -> crate::queue::Limits {
        (&lock(&self.running).queue).into()
    }

    /// Puts `limits` in force for new queues on the controllers that lend already (a
    /// reload, which holds the config; controllers started later read it).
    pub(super) fn set_queue_limits(&self, limits: crate::queue::Limits) {
        for host in lock(&self.ledger.queue_hosts).values_mut() {
            host.queues.set_limits(limits);
        }
    }

    /// Every lent queue on every device, with the SQ tail and CQ head its client last
    /// published in its shadow page.
    pub fn queue_status(&self) -> Vec<QueueView> {
        let hosts = lock(&self.ledger.queue_hosts);
        let mut out = Vec::new();
        for s in hosts.values() {
            let pool = self.dma.pool(&s.ctrl.bdf().to_string()).ok();
            for q in s.queues.status() {
                let shadow = s.pages.get(&(q.qid / 512)).zip(pool.as_ref()).and_then(
                    |((_, lease, offset), pool)| {
                        let mut b = [0u8; 8];
                        let at = offset + 8 * u64::from(q.qid % 512);
                        pool.read(*lease, at, &mut b).ok()?;
                        Some((
                            u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
                            u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
                        ))
                    },
                );
                out.push(QueueView { status: q, shadow });
            }
        }
        out
    }
}
