//! A held device lent whole, and taken back: the journaled steps of a whole-device
//! lease (issue 12). `rig` decides who may lease and hands out the descriptors; this
//! module only moves the device between `held` and `leased` and back, each step
//! written to the journal before it runs, so a crash of rigd anywhere in a reclaim is
//! finished by [`super::recover`] at the next start.
//!
//! Reclaim order (seed, "Bus mastering outlives the process"): bus mastering off
//! first, so nothing the holder programmed reaches memory once its process is gone;
//! then its interrupts; then the reset (config saved and restored, `take::reset`);
//! then, in vfio mode, rigd's device fd is closed and opened again, which makes
//! vfio-pci run its own teardown (`vfio_pci_core_close_device`: ioeventfds the holder
//! registered, which rigd cannot name, and vfio-pci's own reset) once no other fd of
//! the device is open. Before that, every process's descriptors are compared with
//! rigd's device file (kcmp(2), `sys::kcmp`), and the holder's mappings are read: a
//! process that kept the device past its lease (a dup, a fork, a descriptor passed
//! on) stops the reclaim there with [`TakeError::LeaseKept`] naming it, and the device
//! stays out of use. A process other than the holder that kept only a mapping (a
//! forked child that closed its descriptors) is not found; the give-back's unbind of
//! vfio-pci then waits for it in the kernel (tests/vm's unbind-stuck). In sysfs mode
//! the same scan looks for the device's `resourceN` files, by path. The pool step is
//! `rig`'s (`dma`); it is journaled here.
//!
//! Not here: the policy, the holder's identity and the refusals (`rig::lease`), the
//! descriptors (`service`).

use std::{
    fs, io,
    os::fd::{AsFd, AsRawFd},
    path::Path,
};

use super::{
    Hold, Mode, Phase, Progress, ReclaimStep, TakeError, Taken, Taker, VfioHold, bars,
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
            Some(v) => holders(&self.places.proc_root, v.device.file(), holder),
            None => resource_holders(&self.places.proc_root, &self.root().device_dir(bdf)),
        };
        match kept {
            Ok(pids) if !pids.is_empty() => return Err(TakeError::LeaseKept { bdf, pids }),
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
        let crate::vfio::Hold {
            device,
            group,
            container,
        } = vfio;
        drop(device);
        let device = group
            .open_device(bdf)
            .map_err(|source| TakeError::Vfio { bdf, source })?;
        let v = crate::vfio::Hold {
            device,
            group,
            container,
        };
        let bars = bars::map_vfio(bdf, &v)?;
        t.hold = Hold::Vfio(VfioHold { bars, vfio: v });
        Ok(())
    }
}

/// What `/proc/<pid>/maps` and the descriptor links call a VFIO device file.
const VFIO_DEVICE_LINK: &str = "anon_inode:[vfio-device]";

/// Processes other than rigd that hold `file` open under `proc_root`: a descriptor of
/// the same open file (kcmp), or, for `holder`, any mapping of a VFIO device (a
/// mapping holds the file but has no descriptor to compare). Empty when `proc_root`
/// has no `self` (tests on a fake tree).
///
/// # Errors
/// `proc_root` unreadable; kcmp(2) unavailable (`ENOSYS`: a kernel without
/// CONFIG_KCMP) or refused.
fn holders(proc_root: &Path, file: &fs::File, holder: Option<i32>) -> io::Result<Vec<i32>> {
    let me = std::process::id().cast_signed();
    let Ok(ours) = fs::read_link(proc_root.join(format!("self/fd/{}", file.as_raw_fd()))) else {
        return Ok(Vec::new());
    };
    let mut found = Vec::new();
    for entry in fs::read_dir(proc_root)?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        // A process may exit or close descriptors while it is read: skip what went.
        let Ok(fds) = fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        let mut holds = false;
        for fd in fds.flatten() {
            let Some(n) = fd.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
                continue;
            };
            if fs::read_link(fd.path()).is_ok_and(|l| l == ours) {
                match crate::sys::kcmp::same_file(file.as_fd(), pid, n) {
                    Ok(true) => {
                        holds = true;
                        break;
                    }
                    Ok(false) => {}
                    Err(e) if matches!(e.raw_os_error(), Some(libc::ESRCH | libc::EBADF)) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        if !holds && holder == Some(pid) && ours.as_os_str() == VFIO_DEVICE_LINK {
            holds = fs::read_to_string(entry.path().join("maps"))
                .is_ok_and(|m| m.lines().any(|l| l.ends_with(VFIO_DEVICE_LINK)));
        }
        if holds {
            found.push(pid);
        }
    }
    found.sort_unstable();
    Ok(found)
}

/// Processes other than rigd with a descriptor or a mapping of one of the device's
/// `resourceN` files (sysfs mode: rigd opened them for the holder and kept none).
///
/// # Errors
/// `proc_root` unreadable.
fn resource_holders(proc_root: &Path, device_dir: &Path) -> io::Result<Vec<i32>> {
    let me = std::process::id().cast_signed();
    // A fake tree (tests) has no processes to look at.
    if !proc_root.join("self").exists() {
        return Ok(Vec::new());
    }
    let Ok(dir) = fs::canonicalize(device_dir) else {
        return Ok(Vec::new());
    };
    let resource = |p: &Path| {
        p.parent() == Some(dir.as_path())
            && p.file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_prefix("resource"))
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    let mut found = Vec::new();
    for entry in fs::read_dir(proc_root)?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let by_fd = fs::read_dir(entry.path().join("fd")).is_ok_and(|fds| {
            fds.flatten()
                .any(|fd| fs::read_link(fd.path()).is_ok_and(|l| resource(&l)))
        });
        let by_map = || {
            fs::read_to_string(entry.path().join("maps")).is_ok_and(|m| {
                m.lines()
                    .filter_map(|l| l.split_whitespace().nth(5))
                    .any(|p| resource(Path::new(p)))
            })
        };
        if by_fd || by_map() {
            found.push(pid);
        }
    }
    found.sort_unstable();
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_holding_a_copy_of_the_file_is_found_and_one_without_it_is_not() {
        let f = tempfile::tempfile().expect("file");
        let proc_root = Path::new("/proc");
        // rigd itself is left out: here the test process plays rigd, so a child that
        // inherits a copy plays the holder.
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .stdin(f.try_clone().expect("dup"))
            .spawn()
            .expect("sleep");
        let pid = i32::try_from(child.id()).expect("pid");

        let found = holders(proc_root, &f, None);
        child.kill().expect("kill");
        child.wait().expect("wait");
        let after = holders(proc_root, &f, None).expect("scan");

        assert_eq!(found.expect("scan"), [pid]);
        assert!(after.is_empty(), "{after:?}");
    }

    #[test]
    fn a_process_holding_a_resource_file_of_the_device_is_found() {
        let dir = tempfile::tempdir().expect("dir");
        let dev = dir.path().join("0000:00:06.0");
        fs::create_dir(&dev).expect("device dir");
        fs::write(dev.join("resource0"), b"").expect("resource0");
        fs::write(dev.join("config"), b"").expect("config");
        let bar = fs::File::open(dev.join("resource0")).expect("open");
        let config = fs::File::open(dev.join("config")).expect("open");
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .stdin(bar)
            .spawn()
            .expect("sleep");
        let mut other = std::process::Command::new("sleep")
            .arg("30")
            .stdin(config)
            .spawn()
            .expect("sleep");
        let pid = i32::try_from(child.id()).expect("pid");

        let found = resource_holders(Path::new("/proc"), &dev);
        for c in [&mut child, &mut other] {
            c.kill().expect("kill");
            c.wait().expect("wait");
        }

        assert_eq!(found.expect("scan"), [pid], "config is not a BAR");
    }

    #[test]
    fn a_fake_proc_tree_has_no_holders() {
        let dir = tempfile::tempdir().expect("dir");
        let f = tempfile::tempfile().expect("file");
        assert!(holders(dir.path(), &f, Some(1)).expect("scan").is_empty());
    }
}
