//! `Rig`'s whole-device leases (docs/lease.md): a DMA session's client gets the entire
//! held device — its VFIO device fd, or its `resourceN` files in sysfs mode — for as
//! long as its side connection lives, and rigd takes it back when that ends.
//!
//! Policy (`crate::policy`): an admin, or a caller a `[lease]` rule names with the device. While a device
//! is leased rigd refuses every other request on it — give-back, reset, resize,
//! register access, bus mastering, queues, another lease, and memory leases of other
//! sessions on its pool (the holder programs the device: it reaches every IOVA of the
//! pool's container) — with [`RigError::Leased`] naming the holder. A lease is refused
//! while the device lends queues or other sessions hold memory on its pool.
//!
//! The end (the holder's connection closed, kill -9 included, or it gave the device
//! back): `take`'s journaled reclaim (bus mastering off first, interrupts, reset,
//! reopen), then the pool kept or made afresh (`[lease] pool`), then the device is
//! held and available again. Lock order: the device's slot, then `leases`.
//!
//! What cannot be enforced (Linux 6.12; docs/hardware/queues.md, "Lending part of a
//! device"): a VFIO device fd cannot be revoked, and a holder that keeps a copy past
//! its connection (a dup, a fork, a descriptor passed on) keeps the device. rig-client
//! closes it with the session; the reclaim's reopen makes vfio-pci's teardown run only
//! once no copy is left.

use std::{
    fs::File,
    os::fd::OwnedFd,
    sync::Arc,
    time::{SystemTime, UNIX_EPOCH},
};

use rig_sys::scm::PeerCred;

use super::{Kind, RequestError, Rig, RigError, lock};
use crate::{
    config::LeasePool,
    dma::SessionId,
    pci::Bdf,
    take::{Mode, ReclaimReport, TakeError},
};

/// Who holds a device whole: the shared vocabulary's.
pub use rig_model::take::LeaseHolder;

/// A lease in rigd's table: its holder, and why its reclaim failed if it did (the
/// device is then kept out of use until an admin gives it back).
#[derive(Debug, Clone)]
pub(super) struct DeviceLease {
    pub(super) holder: LeaseHolder,
    pub(super) failed: Option<Arc<RigError>>,
}

/// One region the holder may use through the descriptors it was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LentRegion {
    /// The VFIO region index: BARs 0–5, ROM 6, config 7.
    pub index: u32,
    pub size: u64,
    /// Where the region starts in its descriptor (VFIO's region offset; 0 for a
    /// `resourceN` file).
    pub offset: u64,
    /// `VFIO_REGION_INFO_FLAG_*` (READ 1, WRITE 2, MMAP 4).
    pub flags: u32,
    /// Which of the sent descriptors it is in.
    pub fd: u32,
}

/// What a holder is sent.
#[derive(Debug)]
pub struct LentDevice {
    pub bdf: Bdf,
    pub mode: Mode,
    pub regions: Vec<LentRegion>,
    /// Vfio mode: one, the VFIO device fd (a copy of rigd's). Sysfs mode: one
    /// `resourceN` file per memory BAR, in the regions' order.
    pub fds: Vec<OwnedFd>,
}

/// `VFIO_REGION_INFO_FLAG_READ | _WRITE | _MMAP`, what a `resourceN` file allows.
const RESOURCE_FLAGS: u32 = 0x7;

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Rig {
    /// The holder of `bdf`, when it is leased whole.
    pub fn lease_holder(&self, bdf: Bdf) -> Option<LeaseHolder> {
        lock(&self.ledger.leases).get(&bdf).map(|l| l.holder)
    }

    /// Refuses a request on `bdf` while it is leased to someone (`Leased`).
    pub(super) fn refuse_leased(&self, bdf: Bdf) -> Result<(), RigError> {
        match lock(&self.ledger.leases).get(&bdf) {
            Some(l) => Err(leased(bdf, l)),
            None => Ok(()),
        }
    }

    /// Refuses a memory lease of `session` while its pool's device is leased whole to
    /// another session.
    ///
    /// # Errors
    /// [`RigError::Leased`]; the session's own lookup error.
    pub fn check_memory_lease(&self, session: SessionId) -> Result<(), RigError> {
        let pool = self.dma.session_pool(session)?;
        let Ok(bdf) = pool.name().parse::<Bdf>() else {
            return Ok(());
        };
        match lock(&self.ledger.leases).get(&bdf) {
            Some(l) if l.holder.session != session => Err(leased(bdf, l)),
            _ => Ok(()),
        }
    }

    /// Lends the device of `session`'s pool whole to its client `peer`.
    ///
    /// # Errors
    /// [`RigError::BadAddress`]; [`RigError::BadRequest`] for a device that is not the
    /// session's; [`RigError::LeaseNotAllowed`]; [`TakeError::NotHeld`];
    /// [`RigError::Leased`] (already leased); [`RigError::LeaseInUse`] (queues lent,
    /// or other sessions' memory on its pool); the descriptors' or journal's errors.
    pub fn lease_device(
        &self,
        session: SessionId,
        peer: PeerCred,
        bdf: &str,
    ) -> Result<LentDevice, RigError> {
        let bdf: Bdf = bdf.parse()?;
        let pool = self.dma.session_pool(session)?;
        if pool.name() != bdf.to_string() {
            return Err(RequestError::NotTheSessionsDevice {
                pool: pool.name().to_owned(),
                bdf,
            }
            .into());
        }
        let policy = self.policy();
        if !policy.may_lease(peer, bdf) {
            return Err(RigError::LeaseNotAllowed {
                bdf,
                uid: peer.uid,
                admins: policy.admin_groups(),
            });
        }
        self.with_slot_wait(bdf, |slot| {
            let t = slot.as_ref().ok_or(TakeError::NotHeld { bdf })?;
            let holder = LeaseHolder {
                session,
                uid: peer.uid,
                pid: peer.pid,
                since_unix: now(),
            };
            {
                let mut leases = lock(&self.ledger.leases);
                if let Some(l) = leases.get(&bdf) {
                    return Err(leased(bdf, l));
                }
                if lock(&self.ledger.queue_hosts).contains_key(&bdf) {
                    return Err(RigError::LeaseInUse {
                        bdf,
                        why: "it lends queues".into(),
                    });
                }
                // Taken before the check below, so that a memory lease that checks after
                // this sees it (`check_memory_lease`): one of the two is refused.
                leases.insert(
                    bdf,
                    DeviceLease {
                        holder,
                        failed: None,
                    },
                );
            }
            let others = self
                .dma
                .status(None)
                .clients
                .into_iter()
                .filter(|c| c.device == pool.name() && c.session != session && c.bytes > 0)
                .count();
            let lent = if others > 0 {
                Err(RigError::LeaseInUse {
                    bdf,
                    why: format!("{others} other sessions hold memory on its pool"),
                })
            } else {
                lend(&self.sysfs, bdf, t).and_then(|l| {
                    self.taker.lend(t)?;
                    Ok(l)
                })
            };
            if lent.is_err() {
                lock(&self.ledger.leases).remove(&bdf);
            } else {
                self.ledger.note(session, Kind::Device);
                tracing::info!(%bdf, uid = peer.uid, pid = peer.pid, session = session.0, mode = %t.mode(), "leased whole");
            }
            lent
        })
    }

    /// Takes back the device `session` leases whole, if any: its connection ended.
    /// Called before its memory goes (`end_session`). Returns how many it took back (0
    /// or 1), and the device when it was held in sysfs mode and reset: the session's
    /// blocks, released after this, are quarantined by the pool, and that reset already
    /// stopped the device reaching them ([`Rig::lease_memory_released`]).
    pub(super) fn end_device_lease(&self, session: SessionId) -> (usize, Option<Bdf>) {
        let found = lock(&self.ledger.leases)
            .iter()
            .find(|(_, l)| l.holder.session == session && l.failed.is_none())
            .map(|(b, _)| *b);
        let Some(found) = found else {
            return (0, None);
        };
        match self.reclaim_lease(found) {
            Ok(r) => {
                let reset = r.reset.is_some() && !r.reopened && self.held_in_sysfs(found);
                (1, reset.then_some(found))
            }
            Err(e) => {
                tracing::error!(bdf = %found, session = session.0, error = &e as &dyn std::error::Error, "a leased device was not taken back; it stays out of use");
                (0, None)
            }
        }
    }

    /// After a sysfs-mode holder's session released its memory: the device was reset
    /// after it stopped mastering the bus and before the release, so the blocks the
    /// pool quarantined at the release are safe to lend again.
    pub(super) fn lease_memory_released(&self, bdf: Bdf) {
        if let Err(e) = self.dma.device_reset(&bdf.to_string())
            && !matches!(e, crate::dma::DmaError::NoPool { .. })
        {
            tracing::warn!(%bdf, error = &e as &dyn std::error::Error, "a lease's quarantined blocks were not released");
        }
    }

    fn held_in_sysfs(&self, bdf: Bdf) -> bool {
        let slot = lock(&self.devices).get(&bdf).cloned();
        slot.is_some_and(|s| lock(&s).as_ref().is_some_and(|t| t.mode() == Mode::Sysfs))
    }

    /// The holder gives `bdf` back before its connection ends.
    ///
    /// # Errors
    /// [`RigError::NotLeased`] when `session` does not lease it; the reclaim's error.
    pub fn give_back_device(
        &self,
        session: SessionId,
        bdf: &str,
    ) -> Result<ReclaimReport, RigError> {
        let bdf: Bdf = bdf.parse()?;
        match lock(&self.ledger.leases).get(&bdf) {
            Some(l) if l.holder.session == session && l.failed.is_none() => {}
            _ => return Err(RigError::NotLeased { bdf }),
        }
        self.reclaim_lease(bdf)
    }

    /// Reclaims `bdf` from its holder: `take`'s steps, then the pool per the policy,
    /// then held again. A failure keeps the lease in the table, marked failed, so
    /// every request but an admin's give-back is still refused.
    fn reclaim_lease(&self, bdf: Bdf) -> Result<ReclaimReport, RigError> {
        let holder = self.lease_holder(bdf).ok_or(RigError::NotLeased { bdf })?;
        let pool = lock(&self.running).lease.pool;
        let r = self.with_slot_wait(bdf, |slot| {
            let t = slot.as_mut().ok_or(TakeError::NotHeld { bdf })?;
            let report = self.taker.reclaim(t, Some(holder.pid), &mut |_| {})?;
            match pool {
                LeasePool::Keep => {
                    // Sysfs mode: the blocks it reached stay quarantined until a reset;
                    // only a reset that ran releases them.
                    if t.mode() == Mode::Sysfs && report.reset.is_some() {
                        let _ = self.dma.device_reset(&bdf.to_string());
                    }
                }
                LeasePool::Clear => {
                    self.drop_pool(bdf);
                    self.create_pool(t)?;
                }
            }
            self.taker.settle(t)?;
            Ok(report)
        });
        let mut leases = lock(&self.ledger.leases);
        match r {
            Ok(report) => {
                leases.remove(&bdf);
                tracing::info!(
                    %bdf,
                    uid = holder.uid,
                    pid = holder.pid,
                    reset = report.reset.as_deref().unwrap_or("none"),
                    irqs = ?report.irqs,
                    reopened = report.reopened,
                    ?pool,
                    "lease ended: bus mastering off, device available again"
                );
                for w in &report.warnings {
                    tracing::warn!(%bdf, error = w as &dyn std::error::Error, "lease reclaim");
                }
                Ok(report)
            }
            Err(e) => {
                let e = Arc::new(e);
                if let Some(l) = leases.get_mut(&bdf) {
                    l.failed = Some(Arc::clone(&e));
                }
                Err(RigError::Reclaim { bdf, source: e })
            }
        }
    }
}

pub(super) fn leased(bdf: Bdf, l: &DeviceLease) -> RigError {
    RigError::Leased {
        bdf,
        uid: l.holder.uid,
        pid: l.holder.pid,
        session: l.holder.session.0,
        failed: l.failed.clone(),
    }
}

/// The descriptors and regions of `t` for a holder.
fn lend(
    root: &crate::pci::SysfsRoot,
    bdf: Bdf,
    t: &crate::take::Taken,
) -> Result<LentDevice, RigError> {
    let step = |step| move |source| TakeError::Step { bdf, step, source };
    match t.hold.vfio() {
        Some(v) => {
            let mut regions = Vec::new();
            for index in 0..8u32 {
                let r = v
                    .device
                    .region(index)
                    .map_err(|source| TakeError::Vfio { bdf, source })?;
                if r.size > 0 {
                    regions.push(LentRegion {
                        index,
                        size: r.size,
                        offset: r.offset,
                        flags: r.flags,
                        fd: 0,
                    });
                }
            }
            let fd = v
                .device
                .file()
                .try_clone()
                .map_err(step("copy the VFIO device fd"))?;
            Ok(LentDevice {
                bdf,
                mode: Mode::Vfio,
                regions,
                fds: vec![OwnedFd::from(fd)],
            })
        }
        None => {
            let mut regions = Vec::new();
            let mut fds = Vec::new();
            for b in t.hold.bars() {
                let path = root.device_dir(bdf).join(format!("resource{}", b.index));
                let f = File::options()
                    .read(true)
                    .write(true)
                    .open(&path)
                    .map_err(step("open a resourceN file"))?;
                regions.push(LentRegion {
                    index: b.index.into(),
                    size: b.size,
                    offset: 0,
                    flags: RESOURCE_FLAGS,
                    fd: u32::try_from(fds.len()).expect("at most six BARs"),
                });
                fds.push(OwnedFd::from(f));
            }
            Ok(LentDevice {
                bdf,
                mode: Mode::Sysfs,
                regions,
                fds,
            })
        }
    }
}
