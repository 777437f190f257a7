//! Moves a PCI function from its host driver to rig (vfio-pci, or driverless "sysfs"
//! mode), resizes its BARs, resets it, and gives it back.
//!
//! Flow: `pci` (read-only) → `take` → `vfio` (vfio mode) / `sys::sysfs`.
//! [`Taker::detach`] returns a [`Taken`]; [`Taker::attach`] consumes it: the only way
//! home. A `Taken` holds either a [`VfioHold`] (the VFIO container, group and device,
//! and the BARs mapped through its regions) or a [`SysfsHold`] (the BARs mapped through
//! `resourceN`): one [`Hold`], from which the journal's [`Mode`] is derived.
//!
//! State and locks: a `Taken` holds an flock on the function's sysfs `config` for as
//! long as rig holds it (kernfs has one inode per node, so every process sees the lock:
//! docs/hardware/pci-takeover.md, "Locking a function"). `rig.rs` holds a per-device
//! mutex around every call here. Every step is written to the [`journal`] before it
//! runs; [`recover`] reads it at start.
//!
//! Invariants: only this module writes `driver/unbind`, `driver_override`,
//! `drivers_probe`, `resource<N>_resize`, `reset` and the command register. Bus
//! mastering is off whenever rig gives a device back (it outlives the process that
//! turned it on: docs/hardware/pci-takeover.md, "Bus mastering").
//!
//! Kernel ABI: Documentation/ABI/testing/sysfs-bus-pci; ReBAR: PCIe Base 6.0 §7.8.6;
//! VFIO: include/uapi/linux/vfio.h. Not here: decoding (`pci`), VFIO objects and their
//! ioctls (`vfio`, `sys::vfio`), DMA pools (`dma`, made by `rig.rs` from the hold).

pub mod bars;
mod error;
pub mod holders;
pub mod journal;
mod lease;
pub mod preflight;
mod recover;
mod reset;
pub mod resize;
mod unbind;

use std::{
    fs::File,
    io,
    sync::Arc,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use nix::fcntl::{Flock, FlockArg};

pub use error::{AttachWarning, TakeError};
pub use holders::Holder;
pub use journal::{
    AttachStep, DetachStep, Journal, Mode, Phase, ReclaimStep, Record, ResizeStep, SavedConfig,
};
pub use lease::{ReclaimReport, ReclaimWarning};
pub use recover::{RecoverError, Recovered, recover};
pub use reset::{ResetError, ResetMethod, ResetReport};
pub use resize::{BarSize, ResizeError, ResizeOutcome};
pub use unbind::Stuck as StuckUnbind;

use crate::{
    pci::{Bdf, SysfsRoot},
    sys::sysfs::PciSysfs,
    vfio::{self, Vfio, VfioError},
};
use preflight::Places;

/// PCI_COMMAND bit 2 (pci_regs.h `PCI_COMMAND_MASTER`).
const PCI_COMMAND_MASTER: u16 = 0x4;
/// What `driver_override` says while rig holds a function in sysfs mode: no driver has
/// this name, so nothing binds it on a rescan.
pub const SYSFS_MODE_OVERRIDE: &str = "rig-none";

/// Options of a detach.
#[derive(Debug, Clone)]
pub struct DetachOptions {
    pub mode: Mode,
    pub bar_size: BarSize,
    pub entire_group: bool,
    pub force: bool,
    /// How long an unbind may take before rig gives up waiting.
    pub timeout: Duration,
}

impl Default for DetachOptions {
    fn default() -> Self {
        Self {
            mode: Mode::Vfio,
            bar_size: BarSize::Keep,
            entire_group: false,
            force: false,
            // TIMEOUT: a healthy unbind takes < 1 s (0.02–0.16 s measured in QEMU,
            // docs/hardware/qemu-tier.md, "Emulated devices"); amdgpu and nvidia tear
            // down firmware and may take several seconds. 10 s separates those from a
            // holder that never lets go.
            timeout: Duration::from_secs(10),
        }
    }
}

/// A device held in vfio mode: its BARs mapped through the VFIO regions, and the VFIO
/// objects. Fields drop in order: the maps go before the device fd closes, and closing
/// it makes vfio-pci clear bus mastering and reset the function.
#[derive(Debug)]
pub struct VfioHold {
    pub bars: Vec<bars::MappedBar>,
    pub vfio: vfio::Handles,
}

/// A device held driverless: its BARs mapped through `resourceN`.
#[derive(Debug)]
pub struct SysfsHold {
    pub bars: Vec<bars::MappedBar>,
}

/// What rig has open on a device it holds.
#[derive(Debug)]
pub enum Hold {
    Vfio(VfioHold),
    Sysfs(SysfsHold),
    /// Nothing open, in the given mode: from the journal before the device is opened
    /// again, during a resize or give-back, or after a reopen failed (the device is
    /// still rig's and can be given back).
    Released(Mode),
}

impl Hold {
    /// The mode the journal records.
    pub fn mode(&self) -> Mode {
        match self {
            Self::Vfio(_) => Mode::Vfio,
            Self::Sysfs(_) => Mode::Sysfs,
            Self::Released(m) => *m,
        }
    }

    /// The mapped BARs (none when released).
    pub fn bars(&self) -> &[bars::MappedBar] {
        match self {
            Self::Vfio(v) => &v.bars,
            Self::Sysfs(s) => &s.bars,
            Self::Released(_) => &[],
        }
    }

    /// The VFIO objects, in vfio mode while open.
    pub fn vfio(&self) -> Option<&vfio::Handles> {
        match self {
            Self::Vfio(v) => Some(&v.vfio),
            Self::Sysfs(_) | Self::Released(_) => None,
        }
    }

    /// Closes what is open (maps first, then the VFIO device, group and container),
    /// keeping the mode.
    pub fn release(&mut self) {
        *self = Self::Released(self.mode());
    }
}

/// A device rig holds. Only [`Taker::detach`] and [`recover`] make one.
#[derive(Debug)]
pub struct Taken {
    pub bdf: Bdf,
    pub original_driver: Option<String>,
    pub since: SystemTime,
    pub saved_config: SavedConfig,
    /// Other group members taken with it, with their drivers.
    pub group_members: Vec<(Bdf, Option<String>)>,
    /// What `--force` overrode.
    pub overrode: Vec<String>,
    pub resize: Option<ResizeOutcome>,
    /// What is open on the device (dropped before the lock: fields drop in order).
    pub hold: Hold,
    _lock: Flock<File>,
}

impl Taken {
    /// The mode rig holds the device in.
    pub fn mode(&self) -> Mode {
        self.hold.mode()
    }
}

/// Progress of a long operation, one line per step.
pub type Progress<'a> = &'a mut dyn FnMut(&str);

/// What a give-back did.
#[derive(Debug, Default)]
pub struct AttachReport {
    pub driver: Option<String>,
    pub reset: Option<String>,
    pub warnings: Vec<AttachWarning>,
}

/// Does take-overs against one sysfs (real or fake).
#[derive(Debug, Clone)]
pub struct Taker {
    pub sysfs: Arc<dyn PciSysfs>,
    pub journal: Journal,
    pub places: Places,
    /// VFIO: `vfio::RealVfio` on the configured `/dev/vfio`, `vfio::FakeVfio` in tests.
    pub vfio: Arc<dyn Vfio>,
    pub allow_sysfs_mode: bool,
    /// How long the unbinds of give-backs and resizes may take (`take.unbind_timeout_s`);
    /// a detach's comes with its options.
    pub unbind_timeout: Duration,
}

impl Taker {
    fn root(&self) -> &SysfsRoot {
        self.sysfs.root()
    }

    fn step(&self, bdf: Bdf, step: &'static str) -> impl FnOnce(io::Error) -> TakeError {
        move |source| TakeError::Step { bdf, step, source }
    }

    fn record(&self, t: &Record) -> Result<(), TakeError> {
        self.journal
            .write(t)
            .map_err(|source| TakeError::Journal { bdf: t.bdf, source })?;
        #[cfg(feature = "crash-points")]
        crash_point(t.phase);
        Ok(())
    }

    fn driver(&self, bdf: Bdf) -> Option<String> {
        self.root().link_name(bdf, "driver")
    }

    /// Clears the command register's bus-master bit.
    ///
    /// # Errors
    /// The config read or write failing.
    pub fn stop_bus_master(&self, bdf: Bdf) -> Result<(), TakeError> {
        self.set_bus_master(bdf, false).map(|_| ())
    }

    /// Sets or clears the command register's bus-master bit; returns whether it was set.
    /// Writes only when the bit changes.
    ///
    /// # Errors
    /// The config read or write failing.
    pub fn set_bus_master(&self, bdf: Bdf, on: bool) -> Result<bool, TakeError> {
        // Two bytes, not the whole space: each config dword read is a config access
        // (an exit to the hypervisor in a VM), and this runs several times per attach.
        let mut reg = [0u8; 2];
        let n = self
            .root()
            .read_config_at(bdf, 4, &mut reg)
            .map_err(|source| TakeError::Read { bdf, source })?;
        if n < 2 {
            return Err(TakeError::Read {
                bdf,
                source: crate::pci::PciError::ShortConfig { bdf, len: 4 + n },
            });
        }
        let cmd = u16::from_le_bytes(reg);
        let was_on = cmd & PCI_COMMAND_MASTER != 0;
        if was_on != on {
            let new = if on {
                cmd | PCI_COMMAND_MASTER
            } else {
                cmd & !PCI_COMMAND_MASTER
            };
            self.sysfs
                .write_config(bdf, 4, &new.to_le_bytes())
                .map_err(self.step(
                    bdf,
                    if on {
                        "set bus mastering"
                    } else {
                        "clear bus mastering"
                    },
                ))?;
        }
        Ok(was_on)
    }

    /// Unbinds on a worker thread ([`unbind`]), so a driver that never returns (a holder
    /// keeps the GPU) cannot wedge rigd; the thread is left behind in the kernel then.
    fn unbind(&self, bdf: Bdf, driver: &str, timeout: Duration) -> Result<(), TakeError> {
        match unbind::run(&self.sysfs, bdf, driver, timeout) {
            Ok(r) => r.map_err(self.step(bdf, "unbind the driver")),
            Err(unbind::Unbind::Spawn(e)) => Err(self.step(bdf, "start the unbind worker")(e)),
            Err(unbind::Unbind::TimedOut) => Err(TakeError::UnbindTimeout {
                bdf,
                driver: driver.to_owned(),
                timeout,
            }),
            Err(unbind::Unbind::Stuck(s)) => Err(TakeError::UnbindStuck {
                bdf,
                driver: s.driver,
                for_s: s.since.elapsed().as_secs(),
            }),
        }
    }

    /// Unbinds that timed out and are still in the kernel, one worker each.
    pub fn stuck_unbinds(&self) -> Vec<StuckUnbind> {
        unbind::stuck(self.root().path())
    }

    /// Refuses work on a device whose unbind is still in the kernel: that worker holds
    /// the device's lock there (`device_release_driver`), so a reset (sysfs `reset`,
    /// `pci_reset_function`) or a bind would wait on it as long as the holder that keeps
    /// the driver's remove waiting lives, with the request and the device's mutex held.
    fn refuse_if_stuck(&self, bdf: Bdf) -> Result<(), TakeError> {
        match self.stuck_unbinds().into_iter().find(|s| s.bdf == bdf) {
            Some(s) => Err(TakeError::UnbindStuck {
                bdf,
                driver: s.driver,
                for_s: s.since.elapsed().as_secs(),
            }),
            None => Ok(()),
        }
    }

    /// Takes `bdf` from its driver.
    ///
    /// # Errors
    /// A refused preflight, a held lock, or the step that failed; after a failure past
    /// the unbind, the device is given back to its driver before returning.
    pub fn detach(
        &self,
        bdf: Bdf,
        opts: &DetachOptions,
        progress: Progress<'_>,
    ) -> Result<Taken, TakeError> {
        if opts.mode == Mode::Sysfs && !self.allow_sysfs_mode {
            return Err(TakeError::SysfsModeNotAllowed);
        }
        if !self.root().exists(bdf) {
            return Err(TakeError::Read {
                bdf,
                source: crate::pci::PciError::NoDevice { bdf },
            });
        }
        let lock = self.lock(bdf)?;
        let driver = self.driver(bdf);
        if driver.as_deref() == Some("vfio-pci") {
            return Err(TakeError::ForeignVfio { bdf });
        }
        let group = self.root().link_name(bdf, "iommu_group");
        if opts.mode == Mode::Vfio && group.is_none() {
            return Err(TakeError::NoIommuGroup { bdf });
        }
        progress("preflight: holders, mounts, console, IOMMU group");
        let concerns = preflight::check(
            self.root(),
            &self.places,
            bdf,
            driver.as_deref(),
            opts.entire_group,
        );
        let (forced, blocking): (Vec<_>, Vec<_>) = concerns
            .into_iter()
            .partition(|c| opts.force && c.forceable());
        if !blocking.is_empty() {
            return Err(TakeError::Refused {
                bdf,
                concerns: blocking,
            });
        }
        let overrode: Vec<String> = forced.iter().map(|c| format!("--force: {c}")).collect();
        for o in &overrode {
            progress(o);
        }
        let (saved_config, _) = self
            .root()
            .read_config(bdf)
            .map_err(|source| TakeError::Read { bdf, source })?;
        let len = saved_config.len();
        let saved_config = SavedConfig::new(saved_config).map_err(|_| TakeError::Read {
            bdf,
            source: crate::pci::PciError::ShortConfig { bdf, len },
        })?;
        let group_members: Vec<(Bdf, Option<String>)> = if opts.entire_group {
            preflight::group_members_bound(self.root(), bdf)
                .into_iter()
                .map(|(b, d)| (b, Some(d)))
                .collect()
        } else {
            Vec::new()
        };
        let mut rec = Record {
            bdf,
            mode: opts.mode,
            original_driver: driver.clone(),
            phase: Phase::Detaching(DetachStep::Unbind),
            since: now(),
            saved_config: saved_config.clone(),
            group_members: group_members.clone(),
        };
        self.record(&rec)?;
        if let Some(d) = &driver {
            progress(&format!("unbind {bdf} from {d}"));
            self.unbind(bdf, d, opts.timeout)?;
        }
        let mut taken = Taken {
            bdf,
            original_driver: driver,
            since: SystemTime::now(),
            saved_config,
            group_members,
            overrode,
            resize: None,
            hold: Hold::Released(opts.mode),
            _lock: lock,
        };
        match self.finish_detach(&mut taken, &mut rec, opts, group, progress) {
            Ok(()) => Ok(taken),
            Err(e) => {
                progress(&format!("failed ({e}); giving {bdf} back"));
                // Best effort: the original error is what the user needs to see.
                let _ = self.give_back(&mut taken, &mut rec, &mut |_| {});
                Err(e)
            }
        }
    }

    fn finish_detach(
        &self,
        t: &mut Taken,
        rec: &mut Record,
        opts: &DetachOptions,
        group: Option<String>,
        progress: Progress<'_>,
    ) -> Result<(), TakeError> {
        let bdf = t.bdf;
        for (m, d) in &t.group_members {
            if let Some(d) = d {
                progress(&format!("unbind group member {m} from {d}"));
                self.unbind(*m, d, opts.timeout)?;
            }
        }
        let over = match opts.mode {
            Mode::Vfio => "vfio-pci",
            Mode::Sysfs => SYSFS_MODE_OVERRIDE,
        };
        rec.phase = Phase::Detaching(DetachStep::DriverOverride);
        self.record(rec)?;
        self.sysfs
            .set_driver_override(bdf, Some(over))
            .map_err(self.step(bdf, "set driver_override"))?;
        if opts.bar_size != BarSize::Keep {
            rec.phase = Phase::Resizing(ResizeStep::Detach);
            self.record(rec)?;
            t.resize = Some(resize::resize(self, bdf, None, opts.bar_size, progress)?);
        }
        match opts.mode {
            Mode::Vfio => {
                rec.phase = Phase::Detaching(DetachStep::BindVfio);
                self.record(rec)?;
                progress("load vfio-pci, bind it");
                // vfio_iommu_type1 is not a dependency of vfio-pci: without it a
                // container offers no IOMMU type (docs/hardware/qemu-tier.md, "vIOMMU
                // and VFIO").
                for module in ["vfio-pci", "vfio_iommu_type1"] {
                    self.sysfs
                        .modprobe(module, false)
                        .map_err(self.step(bdf, "load the VFIO modules"))?;
                }
                for (m, _) in &t.group_members {
                    self.sysfs
                        .set_driver_override(*m, Some("vfio-pci"))
                        .map_err(self.step(*m, "set driver_override"))?;
                    self.bind_expect(*m, "vfio-pci")?;
                }
                self.bind_expect(bdf, "vfio-pci")?;
                let group = group.ok_or(TakeError::NoIommuGroup { bdf })?;
                progress(&format!("open VFIO group {group}"));
                t.hold = Hold::Vfio(self.open_vfio(bdf, &group, progress)?);
            }
            Mode::Sysfs => {
                rec.phase = Phase::Detaching(DetachStep::Enable);
                self.record(rec)?;
                progress("enable the function (driverless)");
                self.sysfs
                    .enable(bdf, true)
                    .map_err(self.step(bdf, "enable the function"))?;
                progress("map BARs through resourceN");
                t.hold = Hold::Sysfs(SysfsHold {
                    bars: bars::map_sysfs(bdf, self.root())?,
                });
            }
        }
        rec.phase = Phase::Held;
        self.record(rec)?;
        progress("held");
        Ok(())
    }

    /// Makes sure the driver `d` can probe `bdf`: nothing to do when it is registered;
    /// otherwise load the module the function's modalias names (a driver's name, such
    /// as bochs-drm, is not its module's, bochs). Failure shows as the probe's.
    fn load_driver(&self, bdf: Bdf, d: &str) {
        if self.root().path().join("bus/pci/drivers").join(d).exists() {
            return;
        }
        if let Ok(Some(alias)) = self.root().read_attr(bdf, "modalias") {
            let _ = self.sysfs.modprobe(&alias, false);
        }
    }

    fn bind_expect(&self, bdf: Bdf, want: &str) -> Result<(), TakeError> {
        self.sysfs
            .probe(bdf)
            .map_err(self.step(bdf, "probe drivers"))?;
        let got = self.driver(bdf);
        if got.as_deref() != Some(want) {
            return Err(TakeError::WrongDriver {
                bdf,
                want: want.to_owned(),
                got,
            });
        }
        Ok(())
    }

    /// Opens the VFIO container, group and device (refusing a non-viable group) and
    /// maps the BARs through the device's regions.
    pub(crate) fn open_vfio(
        &self,
        bdf: Bdf,
        group: &str,
        progress: Progress<'_>,
    ) -> Result<VfioHold, TakeError> {
        let v = vfio::open(self.vfio.as_ref(), bdf, group).map_err(|e| match e {
            VfioError::NotViable { group } => TakeError::NotViable { bdf, group },
            source => TakeError::Vfio { bdf, source },
        })?;
        progress("map BARs through VFIO regions");
        let bars = bars::map_vfio(bdf, &v)?;
        Ok(VfioHold { bars, vfio: v })
    }

    fn lock(&self, bdf: Bdf) -> Result<Flock<File>, TakeError> {
        let f = File::open(self.root().device_dir(bdf).join("config"))
            .map_err(self.step(bdf, "open config for locking"))?;
        Flock::lock(f, FlockArg::LockExclusiveNonblock).map_err(|(_, e)| match e {
            nix::errno::Errno::EWOULDBLOCK => TakeError::Locked { bdf },
            e => TakeError::Step {
                bdf,
                step: "lock config",
                source: e.into(),
            },
        })
    }

    /// Gives a held device back to its original driver.
    ///
    /// # Errors
    /// The step that failed; the journal keeps the device's record then, and the next
    /// start of rigd finishes the job.
    pub fn attach(
        &self,
        mut taken: Taken,
        progress: Progress<'_>,
    ) -> Result<AttachReport, TakeError> {
        self.refuse_if_stuck(taken.bdf)?;
        let mut rec = self.record_of(&taken, Phase::Attaching(AttachStep::Stop));
        self.record(&rec)?;
        let report = self.give_back(&mut taken, &mut rec, progress)?;
        drop(taken);
        Ok(report)
    }

    /// Resizes a BAR of a held device. In vfio mode vfio-pci lets go for the resize
    /// (a BAR resizes only with no driver bound) and takes the device again after it.
    ///
    /// # Errors
    /// The resize's error, or the step that failed around it.
    pub fn resize_held(
        &self,
        t: &mut Taken,
        bar: Option<u8>,
        size: BarSize,
        progress: Progress<'_>,
    ) -> Result<ResizeOutcome, TakeError> {
        let bdf = t.bdf;
        self.refuse_if_stuck(bdf)?;
        let mut rec = self.record_of(t, Phase::Resizing(ResizeStep::Bar(bar)));
        self.record(&rec)?;
        // The kernel moves BARs as it resizes: drop the maps, make them again after.
        let mode = t.mode();
        t.hold.release();
        if mode == Mode::Vfio {
            progress("release vfio-pci for the resize");
            self.unbind(bdf, "vfio-pci", self.unbind_timeout)?;
        }
        let result = resize::resize(self, bdf, bar, size, progress);
        t.hold = match mode {
            Mode::Vfio => {
                self.bind_expect(bdf, "vfio-pci")?;
                let group = self
                    .root()
                    .link_name(bdf, "iommu_group")
                    .ok_or(TakeError::NoIommuGroup { bdf })?;
                Hold::Vfio(self.open_vfio(bdf, &group, &mut |_| {})?)
            }
            Mode::Sysfs => Hold::Sysfs(SysfsHold {
                bars: bars::map_sysfs(bdf, self.root())?,
            }),
        };
        rec.phase = Phase::Held;
        self.record(&rec)?;
        let report = result?;
        t.resize = Some(report.clone());
        Ok(report)
    }

    /// Resets a held device (bus mastering off, config saved and verified).
    ///
    /// # Errors
    /// The reset's error, or the journal's.
    pub fn reset_held(
        &self,
        t: &Taken,
        method: ResetMethod,
        progress: Progress<'_>,
    ) -> Result<ResetReport, TakeError> {
        self.refuse_if_stuck(t.bdf)?;
        let mut rec = self.record_of(t, Phase::Resetting(method));
        self.record(&rec)?;
        let result = reset::reset(self, t, method, progress);
        rec.phase = Phase::Held;
        self.record(&rec)?;
        Ok(result?)
    }

    /// Gives back a device the journal holds but this process does not (an attach
    /// that failed earlier, or a record left by a crash).
    ///
    /// # Errors
    /// As [`Taker::attach`].
    pub fn attach_journaled(
        &self,
        bdf: Bdf,
        progress: Progress<'_>,
    ) -> Result<AttachReport, TakeError> {
        self.refuse_if_stuck(bdf)?;
        let (records, _) = self.journal.load();
        let r = records
            .into_iter()
            .find(|r| r.bdf == bdf)
            .ok_or(TakeError::NotHeld { bdf })?;
        let mut t = recover::taken_from(self, bdf, &r)?;
        let mut rec = self.record_of(&t, Phase::Attaching(AttachStep::Stop));
        self.record(&rec)?;
        self.give_back(&mut t, &mut rec, progress)
    }

    pub(crate) fn record_of(&self, t: &Taken, phase: Phase) -> Record {
        Record {
            bdf: t.bdf,
            mode: t.mode(),
            original_driver: t.original_driver.clone(),
            phase,
            since: t
                .since
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            saved_config: t.saved_config.clone(),
            group_members: t.group_members.clone(),
        }
    }

    /// The give-back sequence, shared by attach, a failed detach and recovery.
    fn give_back(
        &self,
        t: &mut Taken,
        rec: &mut Record,
        progress: Progress<'_>,
    ) -> Result<AttachReport, TakeError> {
        let bdf = t.bdf;
        let mut report = AttachReport::default();
        progress("stop bus mastering");
        self.stop_bus_master(bdf)?;
        rec.phase = Phase::Attaching(AttachStep::Reset);
        self.record(rec)?;
        match reset::reset(self, t, ResetMethod::Auto, &mut *progress) {
            Ok(r) => report.reset = Some(r.method),
            // No method at all (no FLR, PM, or bus reset) is common on root-bus
            // devices; the driver re-initialises the function at probe.
            Err(reset::ResetError::NoMethod { .. }) => {
                report.warnings.push(AttachWarning::NoReset { bdf });
            }
            // A device its driver can still take is better off with it than with no
            // one: say what failed and go on.
            Err(e) => report.warnings.push(AttachWarning::Reset(e)),
        }
        // Close the VFIO device before unbinding vfio-pci: its remove waits for every
        // open device fd, so unbinding while rig holds one never returns (seen in the
        // disposable machine). Closing also makes vfio-pci restore and reset the device.
        t.hold.release();
        // Sysfs mode enabled the function (`enable` ← 1 counts the kernel's enable
        // count up); count it down again, or every take and give-back cycle leaves it
        // one higher and a device that started disabled ends enabled. Only while no
        // driver holds it (a detach that failed before the unbind leaves the driver's
        // count alone); EIO says it was not enabled (a crash before rigd's write).
        if t.mode() == Mode::Sysfs && self.driver(bdf).is_none() {
            progress("disable the function");
            match self.sysfs.enable(bdf, false) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::EIO) => {}
                Err(source) => report.warnings.push(AttachWarning::Disable { bdf, source }),
            }
        }
        let mut members: Vec<(Bdf, Option<String>)> = t.group_members.clone();
        members.push((bdf, t.original_driver.clone()));
        for (m, original) in members {
            rec.phase = Phase::Attaching(AttachStep::Unbind(m));
            self.record(rec)?;
            if let Some(cur) = self.driver(m) {
                if Some(&cur) == original.as_ref() {
                    continue;
                }
                progress(&format!("unbind {m} from {cur}"));
                self.unbind(m, &cur, self.unbind_timeout)?;
            }
            self.sysfs
                .set_driver_override(m, None)
                .map_err(self.step(m, "clear driver_override"))?;
            if let Some(d) = &original {
                rec.phase = Phase::Attaching(AttachStep::Probe(m));
                self.record(rec)?;
                progress(&format!("bind {m} to {d}"));
                self.load_driver(m, d);
                self.bind_expect(m, d)?;
                if d == "amdgpu" {
                    self.kfd_check(&mut report);
                }
            }
        }
        report.driver = t.original_driver.clone();
        self.journal
            .remove(rec.bdf)
            .map_err(|source| TakeError::Journal { bdf, source })?;
        progress("given back");
        Ok(report)
    }

    /// After amdgpu is unbound and bound again, every open of /dev/kfd fails with
    /// EINVAL until the module reloads (kfd_locked never drops:
    /// docs/hardware/pci-takeover.md, "amdgpu and KFD after a rebind"). Reload when no
    /// other device uses amdgpu; otherwise say so.
    fn kfd_check(&self, report: &mut AttachReport) {
        let kfd = self.places.dev_root.join("kfd");
        let broken = matches!(File::open(&kfd), Err(e) if e.raw_os_error() == Some(libc::EINVAL));
        if !broken {
            return;
        }
        let users = std::fs::read_dir(self.root().path().join("bus/pci/drivers/amdgpu"))
            .map(|d| {
                d.flatten()
                    .filter(|e| e.file_name().to_string_lossy().contains(':'))
                    .count()
            })
            .unwrap_or(0);
        if users <= 1 {
            report
                .warnings
                .push(match self.sysfs.modprobe("amdgpu", true) {
                    Ok(()) => AttachWarning::KfdReloaded,
                    Err(e) => AttachWarning::KfdReloadFailed(e),
                });
        } else {
            report.warnings.push(AttachWarning::KfdInUse { users });
        }
    }
}

/// Fault injection for the crash tests (tests/vm, scenario take-crash), compiled only
/// into test builds (feature `crash-points`, which tests/vm/build-guest.sh turns on;
/// never the shipped rigd): when the environment variable `RIG_CRASH_AT` is a prefix of
/// the phase just journaled ("detaching:unbind", "held", "attaching:probe", …), rigd
/// sends itself SIGKILL: the record is on disk and the step not done, exactly as a
/// `kill -9` at that point leaves it.
#[cfg(feature = "crash-points")]
fn crash_point(phase: Phase) {
    let Some(at) = std::env::var_os("RIG_CRASH_AT") else {
        return;
    };
    if at
        .to_str()
        .is_some_and(|at| !at.is_empty() && phase.to_string().starts_with(at))
    {
        let _ = nix::sys::signal::kill(nix::unistd::getpid(), nix::sys::signal::Signal::SIGKILL);
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod lease_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod vfio_tests;
