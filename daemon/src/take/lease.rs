//! A held device lent whole, and taken back: the journaled steps of a whole-device
//! lease (docs/lease.md). `rig` decides who may lease and hands out the descriptors;
//! this module only moves the device between `held` and `leased` and back, each step
//! written to the journal before it runs, so a crash of rigd anywhere in a reclaim is
//! finished by [`super::recover`] at the next start.
//!
//! Reclaim order (docs/hardware/pci-takeover.md, "Bus mastering"): bus mastering off
//! first, so nothing the holder programmed reaches memory once its process is gone;
//! then its interrupts; then the reset (config saved and restored, `take::reset`);
//! then, in vfio mode, rigd's device fd is closed and opened again, which makes
//! vfio-pci run its own teardown (`vfio_pci_core_close_device`: ioeventfds the holder
//! registered, which rigd cannot name, and vfio-pci's own reset) once no other fd of
//! the device is open. Before that, `take::holders` looks for processes that kept the
//! device past its lease: a descriptor of rigd's device file in any process (kcmp(2):
//! a dup, a fork, a descriptor passed on), and a mapping of one of its BARs with no
//! descriptor left (a forked child that mapped BAR0 and closed its fds), matched as
//! tightly as Linux 6.12 allows (the region's offset and size; the lessee, or a
//! process holding no VFIO descriptor: see `take::holders` for the false positives).
//! Any of them stops the reclaim with [`TakeError::LeaseKept`] naming pid, comm and
//! uid, and the device stays out of use, rather than reaching the give-back's unbind
//! of vfio-pci, whose remove would wait for that process in the kernel (tests/vm's
//! unbind-stuck). In sysfs mode the same scan looks for the device's `resourceN`
//! files, by path. The pool step is `rig`'s (`dma`); it is journaled here.
//!
//! Not here: the policy, the holder's identity and the refusals (`rig::lease`), the
//! descriptors (`service`).

use std::{fs, io};

use super::{
    Hold, Mode, Phase, Progress, ReclaimStep, TakeError, Taken, Taker, VfioHold, bars, holders,
    reset::{self, ResetMethod},
};
use crate::vfio::{IrqIndex, VfioError};

/// What a reclaim did, and what it went on past.
#[derive(Debug, Default)]
pub struct ReclaimReport {
    /// The reset's method ("vfio", "flr", "bus", …), when one ran.
    pub reset: Option<String>,
    /// IRQ indices that were torn down.
    pub irqs: Vec<IrqIndex>,
    /// Whether rigd's VFIO device fd was closed and opened again.
    pub reopened: bool,
    pub warnings: Vec<ReclaimWarning>,
}

/// A reclaim step that failed without stopping the reclaim: the device no longer
/// masters the bus, so what is left is its state, which the next holder's driver
/// initialises anyway.
#[derive(Debug, thiserror::Error)]
pub enum ReclaimWarning {
    #[error("{bdf} has no reset method; it was not reset")]
    NoReset { bdf: crate::pci::Bdf },
    #[error(transparent)]
    Reset(reset::ResetError),
    #[error("Could not check which processes still hold {bdf} after its lease")]
    Unchecked {
        bdf: crate::pci::Bdf,
        #[source]
        source: io::Error,
    },
    #[error("Failed to tear down {index:?} interrupts of {bdf}")]
    Irqs {
        bdf: crate::pci::Bdf,
        index: IrqIndex,
        #[source]
        source: VfioError,
    },
}

impl Taker {
    /// Journals that `t` is lent whole. In sysfs mode the holder cannot write the
    /// command register (sysfs `config` is root's), so bus mastering goes on here; in
    /// vfio mode the holder sets it through the device fd's config region.
    ///
    /// # Errors
    /// The journal's, or the config write's.
    pub fn lend(&self, t: &Taken) -> Result<(), TakeError> {
        let rec = self.record_of(t, Phase::Leased);
        self.record(&rec)?;
        if t.mode() == Mode::Sysfs {
            self.set_bus_master(t.bdf, true)?;
        }
        Ok(())
    }

    /// Takes `t` back from its lease, in the order the module head gives; the journal
    /// is left at `reclaiming:pool` for `rig` to finish with [`Taker::settle`].
    ///
    /// # Errors
    /// Clearing bus mastering or reopening the device (the device is then left out of
    /// use, its record at that step); the journal's. A failed reset or IRQ teardown is
    /// a warning in the report.
    pub fn reclaim(
        &self,
        t: &mut Taken,
        holder: Option<i32>,
        progress: Progress<'_>,
    ) -> Result<ReclaimReport, TakeError> {
        let bdf = t.bdf;
        let mut report = ReclaimReport::default();
        let mut rec = self.record_of(t, Phase::Reclaiming(ReclaimStep::Stop));
        self.record(&rec)?;
        progress("stop bus mastering");
        self.stop_bus_master(bdf)?;
        rec.phase = Phase::Reclaiming(ReclaimStep::Irqs);
        self.record(&rec)?;
        if let Some(v) = t.hold.vfio() {
            progress("tear down interrupts");
            for index in IrqIndex::ALL {
                // An index with no vectors has nothing to tear down.
                if !v.device.irq(index).is_ok_and(|i| i.count > 0) {
                    continue;
                }
                match v.device.disable_irq(index) {
                    Ok(()) => report.irqs.push(index),
                    // vfio-pci answers EINVAL for an index that is not enabled.
                    Err(VfioError::SetIrqs { source, .. })
                        if source.raw_os_error() == Some(libc::EINVAL) => {}
                    Err(source) => {
                        report
                            .warnings
                            .push(ReclaimWarning::Irqs { bdf, index, source })
                    }
                }
            }
        }
        rec.phase = Phase::Reclaiming(ReclaimStep::Reset);
        self.record(&rec)?;
        match reset::reset(self, t, ResetMethod::Auto, &mut *progress) {
            Ok(r) => report.reset = Some(r.method),
            Err(reset::ResetError::NoMethod { .. }) => {
                report.warnings.push(ReclaimWarning::NoReset { bdf });
            }
            Err(e) => report.warnings.push(ReclaimWarning::Reset(e)),
        }
        rec.phase = Phase::Reclaiming(ReclaimStep::Reopen);
        self.record(&rec)?;
        progress("look for processes that kept the device");
        let kept = match t.hold.vfio() {
            Some(v) => self.holders_of_file(bdf, v.device.as_ref(), holder),
            None => holders::resource_holders(&self.places.proc_root, &self.root().device_dir(bdf)),
        };
        match kept {
            Ok(holders) if !holders.is_empty() => {
                return Err(TakeError::LeaseKept { bdf, holders });
            }
            Ok(_) => {}
            Err(source) => report
                .warnings
                .push(ReclaimWarning::Unchecked { bdf, source }),
        }
        if t.mode() == Mode::Vfio {
            progress("close and reopen the VFIO device");
            self.reopen_device(t)?;
            report.reopened = true;
        }
        rec.phase = Phase::Reclaiming(ReclaimStep::Pool);
        self.record(&rec)?;
        Ok(report)
    }

    /// Processes other than rigd that hold `t` (a descriptor or a mapping, as a
    /// reclaim looks for them): what a give-back after a failed reclaim checks first,
    /// since vfio-pci's remove would wait for them in the kernel.
    ///
    /// # Errors
    /// `/proc` unreadable, kcmp(2) refused.
    pub fn holders_of(&self, t: &Taken, lessee: Option<i32>) -> io::Result<Vec<holders::Holder>> {
        match t.hold.vfio() {
            Some(v) => self.holders_of_file(t.bdf, v.device.as_ref(), lessee),
            None if t.mode() == Mode::Vfio => self.holders_after_restart(t.bdf, Mode::Vfio),
            None => {
                holders::resource_holders(&self.places.proc_root, &self.root().device_dir(t.bdf))
            }
        }
    }

    /// Processes other than rigd that hold the VFIO device rigd has open as `device`:
    /// a descriptor of the same file (kcmp), or a mapping of it (`holders`).
    fn holders_of_file(
        &self,
        bdf: crate::pci::Bdf,
        device: &dyn crate::vfio::Device,
        lessee: Option<i32>,
    ) -> io::Result<Vec<holders::Holder>> {
        let layout: Vec<_> = (0..6).filter_map(|i| device.region(i).ok()).collect();
        let link = self.vfio.device_link().to_owned();
        // On a real /proc the link of rigd's own file says what /proc calls one.
        let link = holders::own_link(&self.places.proc_root, device.file())
            .and_then(|l| l.to_str().map(ToOwned::to_owned))
            .unwrap_or(link);
        holders::vfio_holders(
            &self.places.proc_root,
            &holders::VfioTarget {
                syspath: self.syspath(bdf),
                ours: Some(device.file()),
                layout: &layout,
                link: &link,
                config: None,
                lessee,
                config_through: &|f| self.vfio.config_through(f),
            },
        )
    }

    /// The device's directory under /sys/devices, as fdinfo names it.
    pub(super) fn syspath(&self, bdf: crate::pci::Bdf) -> std::path::PathBuf {
        let dir = self.root().device_dir(bdf);
        fs::canonicalize(&dir).unwrap_or(dir)
    }

    /// Journals `t` as held again: the end of a reclaim.
    ///
    /// # Errors
    /// The journal's.
    pub fn settle(&self, t: &Taken) -> Result<(), TakeError> {
        self.record(&self.record_of(t, Phase::Held))
    }

    /// Closes rigd's VFIO device fd (its BAR maps first) and opens the device again
    /// from the same group, keeping the container (and so the DMA pool's mappings).
    fn reopen_device(&self, t: &mut Taken) -> Result<(), TakeError> {
        let bdf = t.bdf;
        let Hold::Vfio(VfioHold { bars, vfio }) =
            std::mem::replace(&mut t.hold, Hold::Released(Mode::Vfio))
        else {
            return Ok(());
        };
        drop(bars);
        let crate::vfio::Handles {
            device,
            group,
            container,
        } = vfio;
        drop(device);
        let device = group
            .open_device(bdf)
            .map_err(|source| TakeError::Vfio { bdf, source })?;
        let v = crate::vfio::Handles {
            device,
            group,
            container,
        };
        let bars = bars::map_vfio(bdf, &v)?;
        t.hold = Hold::Vfio(VfioHold { bars, vfio: v });
        Ok(())
    }
}
