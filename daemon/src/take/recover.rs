//! What rigd does at start with the devices its journal says it held.
//!
//! First, within the first second: bus mastering off on every journaled device that is
//! not back with its driver (seed: a GPU without an IOMMU keeps writing after its
//! process dies). Then each device is re-adopted when it is cleanly held (same mode,
//! flock re-taken, VFIO reopened through `taker.vfio` and its BARs mapped again), or
//! rolled back to its original driver.

use std::time::SystemTime;

use super::{Mode, Phase, Record, TakeError, Taken, Taker, unhex};
use crate::{pci::Bdf, rig::error_line};

/// What happened to one journaled device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recovered {
    /// Held again, as before the restart.
    Readopted { bdf: String, mode: Mode },
    /// Given back to its driver (or left driverless if it had none).
    RolledBack {
        bdf: String,
        driver: Option<String>,
        from: String,
    },
    /// Could not be handled; the record stays for the next start.
    Failed { bdf: String, reason: String },
}

/// Reads the journal and settles every device in it.
pub fn recover(taker: &Taker) -> (Vec<Taken>, Vec<Recovered>) {
    let (records, errors) = taker.journal.load();
    let mut outcomes: Vec<Recovered> = errors
        .iter()
        .map(|e| Recovered::Failed {
            bdf: "?".into(),
            reason: error_line(e),
        })
        .collect();
    let mut held = Vec::new();
    // Pass 1: stop every device from mastering the bus, before anything slow.
    for r in &records {
        if let Ok(bdf) = r.address()
            && taker.sysfs.root().exists(bdf)
            && taker.sysfs.root().link_name(bdf, "driver") != r.original_driver
        {
            let _ = taker.stop_bus_master(bdf);
        }
    }
    // Pass 2: re-adopt or roll back.
    for r in records {
        let Ok(bdf) = r.address() else {
            outcomes.push(Recovered::Failed {
                bdf: r.bdf.clone(),
                reason: "not a PCI address".into(),
            });
            continue;
        };
        if !taker.sysfs.root().exists(bdf) {
            outcomes.push(Recovered::Failed {
                bdf: r.bdf.clone(),
                reason: "the device is gone from sysfs; record kept".into(),
            });
            continue;
        }
        let readopted = (r.phase == Phase::Held).then(|| readopt(taker, bdf, &r));
        match readopted {
            Some(Ok(t)) => {
                outcomes.push(Recovered::Readopted {
                    bdf: r.bdf.clone(),
                    mode: r.mode,
                });
                held.push(t);
            }
            Some(Err(_)) | None => outcomes.push(rollback(taker, bdf, &r)),
        }
    }
    (held, outcomes)
}

pub(super) fn taken_from(taker: &Taker, bdf: Bdf, r: &Record) -> Result<Taken, TakeError> {
    let lock = taker.lock(bdf)?;
    Ok(Taken {
        bdf,
        original_driver: r.original_driver.clone(),
        since: SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(r.since),
        saved_config: unhex(&r.saved_config),
        group_members: r
            .group_members
            .iter()
            .filter_map(|(b, d)| Some((b.parse().ok()?, d.clone())))
            .collect(),
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

fn rollback(taker: &Taker, bdf: Bdf, r: &Record) -> Recovered {
    let from = match &r.phase {
        Phase::Detaching(s) | Phase::Attaching(s) | Phase::Resizing(s) | Phase::Resetting(s) => {
            s.clone()
        }
        Phase::Held => "held (could not re-adopt)".into(),
    };
    let result = taken_from(taker, bdf, r).and_then(|mut t| {
        let mut rec = taker.record_of(&t, Phase::Attaching("recover".into()));
        taker.give_back(&mut t, &mut rec, &mut |_| {})
    });
    match result {
        Ok(report) => Recovered::RolledBack {
            bdf: r.bdf.clone(),
            driver: report.driver,
            from,
        },
        Err(e) => Recovered::Failed {
            bdf: r.bdf.clone(),
            reason: error_line(&e),
        },
    }
}
