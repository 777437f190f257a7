//! What rigd does at start with the devices its journal says it held.
//!
//! First, within the first second: bus mastering off on every journaled device that is
//! not back with its driver (seed: a GPU without an IOMMU keeps writing after its
//! process dies). Then each device is re-adopted when it is cleanly held (same mode,
//! flock re-taken, VFIO reopened through `taker.vfio` and its BARs mapped again), or
//! rolled back to its original driver. A device the journal shows leased whole, or in
//! the middle of being taken back from a lease, is reclaimed again from the start
//! (every step is safe to repeat) and held; its holder's lease ended with rigd.
//! A device whose resize or reset was under way was held before it and is held
//! again (vfio-pci bound again if a resize had let it go), not given back. A device
//! found on its original driver (the take's unbind never ran, or the
//! give-back's probe had bound it) is that driver's: its record goes, and nothing
//! stops its bus mastering, resets it or binds it again under the driver.

use std::time::SystemTime;

use super::{
    AttachReport, AttachStep, Mode, Phase, ReclaimReport, Record, ResizeStep, TakeError, Taken,
    Taker, journal,
};
use crate::pci::Bdf;

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
    // memory its DMA was aimed at died with the rigd that set it up (seed: "bus
    // mastering outlives the process"). Every device but one already back on its
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
        let bdf = r.bdf;
        if !taker.sysfs.root().exists(bdf) {
            outcomes.push(Recovered::Failed(RecoverError::Gone { bdf }));
            continue;
        }
        if matches!(r.phase, Phase::Leased | Phase::Reclaiming(_)) {
            match reclaim(taker, bdf, &r) {
                Ok((t, report)) => {
                    outcomes.push(Recovered::Reclaimed {
                        bdf,
                        mode: r.mode,
                        from: r.phase,
                        report,
                    });
                    held.push(t);
                }
                // Not rolled back: a holder that outlived rigd keeps vfio-pci's remove
                // waiting forever, and the group busy; the next start tries again.
                Err(source) => outcomes.push(Recovered::Failed(RecoverError::Reclaim {
                    bdf,
                    from: r.phase,
                    source,
                })),
            }
            continue;
        }
        let readopt = if held_before(r.phase) {
            match resume(taker, bdf, &r) {
                Ok(t) => {
                    outcomes.push(Recovered::Readopted { bdf, mode: r.mode });
                    held.push(t);
                    continue;
                }
                Err(e) => Some(e),
            }
        } else {
            None
        };
        outcomes.push(rollback(taker, &r, readopt));
    }
    (held, outcomes)
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
