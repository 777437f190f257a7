//! What rigd does at start with the devices its journal says it held.
//!
//! First, within the first second: bus mastering off on every journaled device that is
//! not back with its driver (a GPU without an IOMMU keeps writing after its process
//! dies: docs/hardware/pci-takeover.md, "Bus mastering"). Then each device is
//! re-adopted when it is cleanly held (same mode, flock re-taken, VFIO reopened through
//! `taker.vfio` and its BARs mapped again), or rolled back to its original driver. A device the journal shows leased whole, or in
//! the middle of being taken back from a lease, is reclaimed again from the start
//! (every step is safe to repeat) and held; its holder's lease ended with rigd.
//! A device whose resize or reset was under way was held before it and is held
//! again (vfio-pci bound again if a resize had let it go), not given back. A device
//! found on its original driver (the take's unbind never ran, or the
//! give-back's probe had bound it) is that driver's: its record goes, and nothing
//! stops its bus mastering, resets it or binds it again under the driver.
//!
//! A holder can outlive rigd: a process with the lent VFIO device fd (or a mapping of
//! it) keeps the device file, and the file keeps the group open, so the new rigd's
//! open of `/dev/vfio/N` fails with EBUSY (drivers/vfio/group.c,
//! `vfio_group_fops_open`: one open file a group), and an unbind of vfio-pci would
//! wait for it in the kernel. Such a device is [`Recovered::Waiting`]: bus mastering
//! off (pass 1), its record kept at its phase, its holders named
//! (`take::holders`); nothing else is tried on it. `rig` watches the holders and
//! calls [`Taker::recover_again`] when they exit, which does what the record says
//! (re-adopt, reclaim and hold, or give back). A sysfs-mode lease whose holder
//! outlived rigd (its `resourceN` files open) waits the same way. rigd cannot revoke
//! the holder's fd: in vfio mode the holder can set bus mastering again through its
//! config region, which `rig`'s watch clears again; its DMA stays confined by the
//! IOMMU to the old container's mappings, whose pages stay pinned until the container
//! goes, so no one else's memory. In sysfs mode the holder cannot write the command
//! register (sysfs `config` is root's).

use std::time::SystemTime;

use super::{
    AttachReport, AttachStep, Mode, Phase, ReclaimReport, Record, ResizeStep, TakeError, Taken,
    Taker,
    holders::{self, Holder},
    journal,
};
use crate::{pci::Bdf, vfio::VfioError};

/// What happened to one journaled device.
#[derive(Debug)]
pub enum Recovered {
    /// Held again, as before the restart.
    Readopted { bdf: Bdf, mode: Mode },
    /// Given back to its driver (or left driverless if it had none).
    RolledBack {
        bdf: Bdf,
        /// The phase the record was in.
        from: Phase,
        report: AttachReport,
        /// Why a device journaled as held could not be held again (`None`: it was
        /// not held, so rollback was the plan).
        readopt: Option<TakeError>,
    },
    /// Was leased whole (or being taken back from a lease): reclaimed, held again.
    Reclaimed {
        bdf: Bdf,
        mode: Mode,
        /// The phase the record was in.
        from: Phase,
        report: ReclaimReport,
    },
    /// Still held by processes from before the restart (an earlier rigd's lease):
    /// bus mastering off, the record kept; [`Taker::recover_again`] once they exit.
    Waiting {
        bdf: Bdf,
        mode: Mode,
        /// The phase the record is in.
        from: Phase,
        /// Who holds it (empty: a holder rigd could not name).
        holders: Vec<Holder>,
    },
    /// Could not be handled; the record stays for the next start.
    Failed(RecoverError),
}

/// Why recovery left a device as it is.
#[derive(Debug, thiserror::Error)]
pub enum RecoverError {
    #[error(transparent)]
    Journal(#[from] journal::JournalError),
    #[error("{bdf} is gone from sysfs; its record is kept")]
    Gone { bdf: Bdf },
    #[error("Failed to give {bdf} back after the restart (it was at: {from})")]
    RollBack {
        bdf: Bdf,
        from: Phase,
        /// Why it could not be held again, when it was journaled as held.
        readopt: Option<Box<TakeError>>,
        #[source]
        source: TakeError,
    },
    #[error(
        "Failed to take {bdf} back from its lease after the restart (it was at: {from}); its record is kept"
    )]
    Reclaim {
        bdf: Bdf,
        from: Phase,
        #[source]
        source: TakeError,
    },
}

/// Reads the journal and settles every device in it.
pub fn recover(taker: &Taker) -> (Vec<Taken>, Vec<Recovered>) {
    let (records, errors) = taker.journal.load();
    let mut outcomes: Vec<Recovered> = errors
        .into_iter()
        .map(|e| Recovered::Failed(e.into()))
        .collect();
    let mut held = Vec::new();
    // Pass 1: stop every device from mastering the bus, before anything slow: the
    // memory its DMA was aimed at died with the rigd that set it up (bus mastering
    // outlives the process: docs/hardware/pci-takeover.md, "Bus mastering"). Every device but one already back on its
    // original driver, which owns it again — a driverless device held in sysfs mode
    // (no driver before, none now) included.
    for r in &records {
        let now = taker.sysfs.root().link_name(r.bdf, "driver");
        if taker.sysfs.root().exists(r.bdf) && (now.is_none() || now != r.original_driver) {
            let _ = taker.stop_bus_master(r.bdf);
        }
    }
    // Pass 2: re-adopt or roll back.
    for r in records {
        let (t, outcome) = settle(taker, &r);
        outcomes.push(outcome);
        held.extend(t);
    }
    (held, outcomes)
}

impl Taker {
    /// Settles `bdf` again from its record, as a start does: for a device that was
    /// [`Recovered::Waiting`] once its holders exit. Bus mastering off first.
    pub fn recover_again(&self, bdf: Bdf) -> (Option<Taken>, Recovered) {
        let (records, _) = self.journal.load();
        let Some(r) = records.into_iter().find(|r| r.bdf == bdf) else {
            return (
                None,
                Recovered::Failed(RecoverError::RollBack {
                    bdf,
                    from: Phase::Held,
                    readopt: None,
                    source: TakeError::NotHeld { bdf },
                }),
            );
        };
        if self.driver(bdf).is_none() || self.driver(bdf) != r.original_driver {
            let _ = self.stop_bus_master(bdf);
        }
        settle(self, &r)
    }

    /// Who holds `bdf`, which rigd has no file of (after a restart).
    ///
    /// # Errors
    /// `/proc` unreadable.
    pub fn holders_after_restart(&self, bdf: Bdf, mode: Mode) -> std::io::Result<Vec<Holder>> {
        if mode == Mode::Sysfs {
            return holders::resource_holders(
                &self.places.proc_root,
                &self.sysfs.root().device_dir(bdf),
            );
        }
        let layout = self.vfio.layout(self.sysfs.root(), bdf).unwrap_or_default();
        let config = self
            .sysfs
            .root()
            .read_config(bdf)
            .ok()
            .map(|(c, _)| c.into_iter().take(64).collect::<Vec<u8>>());
        holders::vfio_holders(
            &self.places.proc_root,
            &holders::VfioTarget {
                syspath: self.syspath(bdf),
                ours: None,
                layout: &layout,
                link: self.vfio.device_link(),
                config: config.as_deref(),
                lessee: None,
                config_through: &|f| self.vfio.config_through(f),
            },
        )
    }

    /// Whether a holder keeps `bdf`'s VFIO group open (EBUSY): only a device bound to
    /// vfio-pci in vfio mode has one to ask.
    fn group_busy(&self, bdf: Bdf, r: &Record) -> bool {
        if r.mode != Mode::Vfio || self.driver(bdf).as_deref() != Some("vfio-pci") {
            return false;
        }
        let Some(group) = self.sysfs.root().link_name(bdf, "iommu_group") else {
            return false;
        };
        self.vfio.open_group(&group).is_err_and(|e| busy(&e))
    }
}

/// EBUSY opening a VFIO group: another open file of it, which a holder's device file
/// keeps (drivers/vfio/group.c: device fds hold a group file reference).
fn busy(e: &VfioError) -> bool {
    matches!(e, VfioError::OpenGroup { source, .. } if source.raw_os_error() == Some(libc::EBUSY))
}

/// Whether `e` says a process still holds the device.
fn held_by_other(e: &TakeError) -> bool {
    match e {
        TakeError::Vfio { source, .. } => busy(source),
        TakeError::LeaseKept { .. } => true,
        _ => false,
    }
}

fn waiting(taker: &Taker, r: &Record, e: Option<&TakeError>) -> Recovered {
    let holders = match e {
        Some(TakeError::LeaseKept { holders, .. }) => holders.clone(),
        _ => taker
            .holders_after_restart(r.bdf, r.mode)
            .unwrap_or_default(),
    };
    Recovered::Waiting {
        bdf: r.bdf,
        mode: r.mode,
        from: r.phase,
        holders,
    }
}

/// One journaled device: re-adopted, reclaimed, rolled back, or left waiting.
fn settle(taker: &Taker, r: &Record) -> (Option<Taken>, Recovered) {
    let bdf = r.bdf;
    if !taker.sysfs.root().exists(bdf) {
        return (None, Recovered::Failed(RecoverError::Gone { bdf }));
    }
    if matches!(r.phase, Phase::Leased | Phase::Reclaiming(_)) {
        return match reclaim(taker, bdf, r) {
            Ok((t, report)) => (
                Some(t),
                Recovered::Reclaimed {
                    bdf,
                    mode: r.mode,
                    from: r.phase,
                    report,
                },
            ),
            // Not rolled back: a holder that outlived rigd keeps vfio-pci's remove
            // waiting forever, and the group busy.
            Err(e) if held_by_other(&e) => (None, waiting(taker, r, Some(&e))),
            Err(source) => (
                None,
                Recovered::Failed(RecoverError::Reclaim {
                    bdf,
                    from: r.phase,
                    source,
                }),
            ),
        };
    }
    let readopt = if held_before(r.phase) {
        match resume(taker, bdf, r) {
            Ok(t) => return (Some(t), Recovered::Readopted { bdf, mode: r.mode }),
            Err(e) if held_by_other(&e) => return (None, waiting(taker, r, Some(&e))),
            Err(e) => Some(e),
        }
    } else {
        None
    };
    // A give-back unbinds vfio-pci, whose remove would wait for the holder in the
    // kernel: wait for it here instead.
    if taker.group_busy(bdf, r) {
        return (None, waiting(taker, r, None));
    }
    (None, rollback(taker, r, readopt))
}

pub(super) fn taken_from(taker: &Taker, bdf: Bdf, r: &Record) -> Result<Taken, TakeError> {
    let lock = taker.lock(bdf)?;
    Ok(Taken {
        bdf,
        original_driver: r.original_driver.clone(),
        since: SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(r.since),
        saved_config: r.saved_config.clone(),
        group_members: r.group_members.clone(),
        overrode: Vec::new(),
        resize: None,
        hold: super::Hold::Released(r.mode),
        _lock: lock,
    })
}

fn readopt(taker: &Taker, bdf: Bdf, r: &Record) -> Result<Taken, TakeError> {
    let mut t = taken_from(taker, bdf, r)?;
    let driver = taker.sysfs.root().link_name(bdf, "driver");
    match r.mode {
        Mode::Vfio if driver.as_deref() == Some("vfio-pci") => {
            let group = taker
                .sysfs
                .root()
                .link_name(bdf, "iommu_group")
                .ok_or(TakeError::NoIommuGroup { bdf })?;
            t.hold = super::Hold::Vfio(taker.open_vfio(bdf, &group, &mut |_| {})?);
        }
        Mode::Sysfs if driver.is_none() => {
            t.hold = super::Hold::Sysfs(super::SysfsHold {
                bars: super::bars::map_sysfs(bdf, taker.sysfs.root())?,
            });
        }
        _ => {
            return Err(TakeError::WrongDriver {
                bdf,
                want: r.mode.to_string(),
                got: driver,
            });
        }
    }
    Ok(t)
}

/// Whether the record says the device was held when rigd died: held, or a resize or
/// reset of a held device under way (a detach's resize is part of the take, and
/// rolls back with it).
fn held_before(phase: Phase) -> bool {
    matches!(
        phase,
        Phase::Held | Phase::Resizing(ResizeStep::Bar(_)) | Phase::Resetting(_)
    )
}

/// Holds a device again that was held before rigd died, and journals it held. A
/// resize in vfio mode had unbound vfio-pci (a BAR resizes only with no driver); its
/// `driver_override` still names vfio-pci, so a probe binds it again.
fn resume(taker: &Taker, bdf: Bdf, r: &Record) -> Result<Taken, TakeError> {
    if r.mode == Mode::Vfio && taker.driver(bdf).is_none() {
        taker.bind_expect(bdf, "vfio-pci")?;
    }
    let t = readopt(taker, bdf, r)?;
    if r.phase != Phase::Held {
        taker.settle(&t)?;
    }
    Ok(t)
}

/// Opens a device left leased (or mid-reclaim) as a held one, reclaims it from the
/// first step, and journals it held.
fn reclaim(taker: &Taker, bdf: Bdf, r: &Record) -> Result<(Taken, ReclaimReport), TakeError> {
    let mut t = readopt(taker, bdf, r)?;
    let report = taker.reclaim(&mut t, None, &mut |_| {})?;
    taker.settle(&t)?;
    Ok((t, report))
}

fn rollback(taker: &Taker, r: &Record, readopt: Option<TakeError>) -> Recovered {
    let bdf = r.bdf;
    let result = if with_its_driver(taker, r) {
        leave_with_its_driver(taker, r)
    } else {
        taken_from(taker, bdf, r).and_then(|mut t| {
            let mut rec = taker.record_of(&t, Phase::Attaching(AttachStep::Recover));
            taker.give_back(&mut t, &mut rec, &mut |_| {})
        })
    };
    match result {
        Ok(report) => Recovered::RolledBack {
            bdf,
            from: r.phase,
            report,
            readopt,
        },
        Err(source) => Recovered::Failed(RecoverError::RollBack {
            bdf,
            from: r.phase,
            readopt: readopt.map(Box::new),
            source,
        }),
    }
}

/// Whether the device is bound to the driver it had before rig took it, and each
/// group member to its own: a take killed before its unbind ran, or a give-back
/// killed after its probe. (Not a device that had no driver: "driverless" is also
/// how sysfs mode holds it, and its give-back has work left.)
fn with_its_driver(taker: &Taker, r: &Record) -> bool {
    let root = taker.sysfs.root();
    r.original_driver.is_some()
        && root.link_name(r.bdf, "driver") == r.original_driver
        && r.group_members
            .iter()
            .all(|(m, d)| root.link_name(*m, "driver") == *d)
}

/// Settles a device its driver has again: the record goes, and an override rig left
/// is cleared (it would bind another driver at the next probe). Stopping its bus
/// mastering or resetting it, as a give-back does, would pull the device from under
/// the driver that is using it.
fn leave_with_its_driver(taker: &Taker, r: &Record) -> Result<AttachReport, TakeError> {
    let _lock = taker.lock(r.bdf)?;
    let root = taker.sysfs.root();
    for b in std::iter::once(r.bdf).chain(r.group_members.iter().map(|(m, _)| *m)) {
        let over = root
            .read_attr(b, "driver_override")
            .map_err(|source| TakeError::Read { bdf: b, source })?;
        if over.is_some_and(|o| !o.is_empty() && o != "(null)") {
            taker
                .sysfs
                .set_driver_override(b, None)
                .map_err(taker.step(b, "clear driver_override"))?;
        }
    }
    taker
        .journal
        .remove(r.bdf)
        .map_err(|source| TakeError::Journal { bdf: r.bdf, source })?;
    Ok(AttachReport {
        driver: r.original_driver.clone(),
        ..AttachReport::default()
    })
}

#[cfg(test)]
mod tests {
    use super::super::{
        DetachOptions, DetachStep, PCI_COMMAND_MASTER, ResetMethod, SavedConfig,
        tests::{GPU, bdf, calls, driver, gpu, world},
    };
    use super::*;
    use crate::sys::sysfs::{PciSysfs, SysfsCall};

    #[test]
    fn a_device_on_its_driver_after_a_kill_keeps_its_bus_mastering_and_gets_no_reset() {
        // rigd killed after journaling the take's unbind but before it ran, and after
        // the give-back's probe had bound nvidia but before the record went.
        let probe = Phase::Attaching(AttachStep::Probe(bdf(GPU)));
        for phase in [Phase::Detaching(DetachStep::Unbind), probe] {
            let w = world(&[gpu()]);
            w.taker
                .journal
                .write(&Record {
                    bdf: bdf(GPU),
                    mode: Mode::Vfio,
                    original_driver: Some("nvidia".into()),
                    phase,
                    since: 1,
                    saved_config: SavedConfig::new(vec![0; 64]).expect("64 bytes"),
                    group_members: Vec::new(),
                })
                .expect("journal");

            let (held, outcomes) = recover(&w.taker);

            assert!(held.is_empty());
            assert!(
                matches!(&outcomes[..], [Recovered::RolledBack { report, .. }]
                    if report.driver.as_deref() == Some("nvidia")),
                "{phase}: {outcomes:?}"
            );
            assert_eq!(driver(&w, GPU).as_deref(), Some("nvidia"), "{phase}");
            let (cfg, _) = w.taker.sysfs.root().read_config(bdf(GPU)).expect("config");
            assert_ne!(
                u16::from_le_bytes([cfg[4], cfg[5]]) & PCI_COMMAND_MASTER,
                0,
                "{phase}: nvidia's bus mastering left on"
            );
            let touched: Vec<_> = calls(&w)
                .into_iter()
                .filter(|c| !matches!(c, SysfsCall::Modprobe { .. }))
                .collect();
            assert!(touched.is_empty(), "{phase}: {touched:?}");
            assert!(w.taker.journal.load().0.is_empty(), "{phase}: record gone");
        }
    }

    #[test]
    fn a_device_killed_in_the_middle_of_its_resize_or_reset_is_held_again() {
        // rigd killed after a resize of a held device had unbound vfio-pci (vfio
        // mode), and in the middle of a reset (sysfs mode).
        let cases = [
            (Mode::Vfio, Phase::Resizing(ResizeStep::Bar(Some(2))), true),
            (Mode::Sysfs, Phase::Resetting(ResetMethod::Auto), false),
        ];
        for (mode, phase, unbound) in cases {
            let w = world(&[gpu()]);
            let opts = DetachOptions {
                mode,
                ..DetachOptions::default()
            };
            let t = w
                .taker
                .detach(bdf(GPU), &opts, &mut |_| {})
                .expect("detach");
            w.taker
                .record(&w.taker.record_of(&t, phase))
                .expect("journal");
            // The process dies: its files close (VFIO fds, the flock).
            drop(t);
            if unbound {
                w.kernel
                    .unbind(bdf(GPU), "vfio-pci")
                    .expect("the resize's unbind");
            }

            let (held, outcomes) = recover(&w.taker);

            assert!(
                matches!(&outcomes[..], [Recovered::Readopted { mode: m, .. }] if *m == mode),
                "{phase}: {outcomes:?}"
            );
            assert_eq!(held.len(), 1, "{phase}");
            assert_eq!(held[0].mode(), mode);
            let want = (mode == Mode::Vfio).then_some("vfio-pci");
            assert_eq!(driver(&w, GPU).as_deref(), want, "{phase}");
            assert_eq!(w.taker.journal.load().0[0].phase, Phase::Held, "{phase}");
        }
    }
}
