//! `Rig` owns what the daemon knows and sequences work on devices.
//!
//! It answers inspection requests (`pci`) and owns the devices rig holds (`take`),
//! each behind its own mutex: one operation per device at a time, any number of
//! devices at once. The map of devices has its own short-lived lock. Blocking sysfs
//! work runs on the caller's thread: `service` moves it off the async executor. It
//! also owns the GPUs it serves through their own driver (`channels`, each with a DMA
//! pool of its name) and joins a DMA session to its GPU address space there (`served`).
//!
//! What it lends a session — a device whole (`lease`), queues (`queues`), channels
//! (`served`), GPU memory (`gpumem`), beside the session's memory (`dma`) — is kept in
//! one ledger, with the
//! order a session's end takes it back in (`ledger`). Settings read after the start come
//! from the running config, which a reload updates (`reload`). Its errors say what
//! they are to programs themselves ([`RigError`]'s `Classify`, delegating to the
//! stages'); `service` makes codes and lines of them.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock},
    time::Duration,
};

use crate::{
    config::Config,
    dma,
    pci::{
        self, Bdf, Device, PciError, SysfsRoot,
        ids::{IdsError, PciIds},
    },
    policy::Policy,
    sys::{
        mmio::Width,
        sysfs::{PciSysfs, RealSysfs},
    },
    take::{
        self, AttachReport, BarSize, DetachOptions, Journal, ResetMethod, ResetReport,
        ResizeOutcome, TakeError, Taken, Taker, preflight::Places,
    },
    vfio::{RealVfio, Vfio},
};

mod error;
mod events;
mod gpumem;
mod lease;
pub mod ledger;
mod outlived;
mod reload;
mod served;
pub mod topo;

pub use error::{RequestError, RigError};
pub use gpumem::SessionGpu;
pub use ledger::Ended;
use ledger::{Kind, Ledger};
pub use outlived::Outlived;

pub use reload::{ReloadError, Reloaded};
pub use served::ServedGpu;

pub use lease::{LeaseHolder, LentDevice, LentRegion};

/// One device rig holds (or is working on), behind its own lock.
type Slot = Arc<Mutex<Option<Taken>>>;

/// The daemon's state.
#[derive(Debug)]
pub struct Rig {
    sysfs: SysfsRoot,
    ids: PciIds,
    taker: Taker,
    devices: Mutex<BTreeMap<Bdf, Slot>>,
    /// Who may do what (`policy`); a reload swaps it.
    policy: RwLock<Arc<Policy>>,
    /// Where privileged actions' audit lines go.
    audit: Arc<crate::audit::Audit>,
    recovered: Mutex<Arc<[take::Recovered]>>,
    /// DMA pools by device name, and the sessions that lease from them.
    dma: dma::Pools,
    /// What each session holds, and what is lent by kind (`rig::ledger`).
    ledger: Ledger,
    /// The config in force: what a reload compares with, and where the settings
    /// read after start come from (sections that need a restart keep their values).
    running: Mutex<Config>,
    /// Devices an earlier rigd's lease holders still had at the start (`rig::outlived`).
    outlived: Mutex<BTreeMap<Bdf, outlived::Outlived>>,
    /// Where `topology` asks about peers instead of the real RM (`rig::topo`).
    #[cfg(any(test, feature = "fakes"))]
    peer_source: RwLock<Option<Arc<dyn topo::PeerSource>>>,
}

mod queues;
pub use queues::{QueueGrant, QueueView, queue_bytes};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding a device lock leaves the device's state as the journal
    // says; the data itself stays usable.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The lock of a device's slot for a look, waiting out holders that only look
/// (another status snapshot, a queue listing: microseconds); `None` when an operation
/// still holds it after 5 ms (a take, give-back, reset or queue command: "busy").
fn try_lock_briefly<T>(m: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    // TIMEOUT: a snapshot holds the lock for microseconds; the steps that make a
    // device busy take milliseconds to seconds.
    let until = std::time::Instant::now() + std::time::Duration::from_millis(5);
    loop {
        match m.try_lock() {
            Ok(g) => return Some(g),
            Err(std::sync::TryLockError::Poisoned(p)) => return Some(p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) if std::time::Instant::now() < until => {
                std::thread::sleep(std::time::Duration::from_micros(100));
            }
            Err(std::sync::TryLockError::WouldBlock) => return None,
        }
    }
}

/// A listing: the functions that could be read, and why each other one could not.
#[derive(Debug, Default)]
pub struct Listing {
    pub devices: Vec<Device>,
    pub problems: Vec<PciError>,
}

/// What rigd starts without, and goes on.
#[derive(Debug, thiserror::Error)]
pub enum StartWarning {
    #[error("Device names will be missing (install Debian's pci.ids)")]
    NoNames(#[source] IdsError),
    #[error(transparent)]
    Policy(#[from] crate::policy::PolicyError),
    #[error("GPU {gpu} is not served: no channels on it")]
    NotServed {
        gpu: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl Rig {
    /// Builds the state from the configuration. A missing pci.ids or admin group is not
    /// fatal: names are then absent, or only root is an admin, and the returned
    /// warnings say why.
    pub fn new(config: &Config) -> (Self, Vec<StartWarning>) {
        let sysfs = RealSysfs::new(SysfsRoot::new(&config.paths.sysfs));
        Self::with_sysfs(config, Arc::new(sysfs))
    }

    /// As [`Rig::new`], writing sysfs through `sysfs` (tests pass a `FakeKernel`).
    pub fn with_sysfs(config: &Config, sysfs: Arc<dyn PciSysfs>) -> (Self, Vec<StartWarning>) {
        let vfio = RealVfio::new(config.paths.dev.join("vfio"));
        Self::with_kernel(config, sysfs, Arc::new(vfio))
    }

    /// As [`Rig::with_sysfs`], opening VFIO through `vfio` (tests pass a `FakeVfio`).
    pub fn with_kernel(
        config: &Config,
        sysfs: Arc<dyn PciSysfs>,
        vfio: Arc<dyn Vfio>,
    ) -> (Self, Vec<StartWarning>) {
        let mut warnings = Vec::new();
        let ids = PciIds::load(&config.paths.pci_ids).unwrap_or_else(|e| {
            warnings.push(StartWarning::NoNames(e));
            PciIds::empty()
        });
        let (policy, problems) = Policy::new(config);
        warnings.extend(problems.into_iter().map(StartWarning::Policy));
        let taker = Taker {
            sysfs,
            journal: Journal::new(&config.paths.state_dir),
            places: Places {
                proc_root: config.paths.proc.clone(),
                dev_root: config.paths.dev.clone(),
            },
            vfio,
            allow_sysfs_mode: config.take.allow_sysfs_mode,
            unbind_timeout: Duration::from_secs(config.take.unbind_timeout_s),
        };
        let rig = Self {
            sysfs: SysfsRoot::new(&config.paths.sysfs),
            ids,
            taker,
            devices: Mutex::new(BTreeMap::new()),
            policy: RwLock::new(Arc::new(policy)),
            audit: Arc::new(crate::audit::Audit::new(
                &config.audit.journal_socket,
                &config.paths.proc,
            )),
            recovered: Mutex::new(Arc::new([])),
            dma: dma::Pools::new(&config.dma, &config.paths.sysfs),
            ledger: Ledger::default(),
            running: Mutex::new(config.clone()),
            outlived: Mutex::new(BTreeMap::new()),
            #[cfg(any(test, feature = "fakes"))]
            peer_source: RwLock::new(None),
        };
        (rig, warnings)
    }

    /// Settles what the journal says rig held before this start: stops bus mastering,
    /// re-adopts or rolls back. Returns what happened to each device; `status` shows
    /// the same.
    pub fn recover(&self) -> Arc<[take::Recovered]> {
        let (held, outcomes) = take::recover(&self.taker);
        let mut devices = lock(&self.devices);
        for t in held {
            if let Err(e) = self.create_pool(&t) {
                tracing::warn!(bdf = %t.bdf, error = &e as &dyn std::error::Error, "no DMA pool for a re-adopted device");
            }
            devices.insert(t.bdf, Arc::new(Mutex::new(Some(t))));
        }
        self.note_outlived(&outcomes);
        let outcomes: Arc<[take::Recovered]> = outcomes.into();
        *lock(&self.recovered) = Arc::clone(&outcomes);
        outcomes
    }

    /// Who may do what, now.
    pub fn policy(&self) -> Arc<Policy> {
        Arc::clone(&self.policy.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Where audit lines go.
    pub fn audit(&self) -> &Arc<crate::audit::Audit> {
        &self.audit
    }

    /// Puts `policy` in force for the requests that come after.
    pub fn set_policy(&self, policy: Policy) {
        *self.policy.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(policy);
    }

    /// Runs `f` on the slot of `bdf` under its lock; `Busy` if another operation holds
    /// it. A slot left empty is forgotten.
    fn with_slot<R>(
        &self,
        bdf: Bdf,
        f: impl FnOnce(&mut Option<Taken>) -> Result<R, RigError>,
    ) -> Result<R, RigError> {
        let slot = Arc::clone(lock(&self.devices).entry(bdf).or_default());
        let mut guard = match slot.try_lock() {
            Ok(g) => g,
            // As `lock`: the journal, not the mutex, says what state a device is in.
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return Err(RigError::Busy { bdf }),
        };
        let result = f(&mut guard);
        let empty = guard.is_none();
        drop(guard);
        if empty {
            let mut devices = lock(&self.devices);
            if devices.get(&bdf).is_some_and(|s| Arc::strong_count(s) <= 2) {
                devices.remove(&bdf);
            }
        }
        result
    }

    /// As `with_slot`, but waits for the device's lock (reclaim must not be refused as
    /// busy).
    fn with_slot_wait<R>(
        &self,
        bdf: Bdf,
        f: impl FnOnce(&mut Option<Taken>) -> Result<R, RigError>,
    ) -> Result<R, RigError> {
        let slot = Arc::clone(
            lock(&self.devices)
                .get(&bdf)
                .ok_or(TakeError::NotHeld { bdf })?,
        );
        let mut guard = lock(&slot);
        f(&mut guard)
    }

    /// Takes a device from its driver.
    ///
    /// # Errors
    /// A malformed address, a device already held or busy, or the take's error.
    pub fn detach(
        &self,
        bdf: &str,
        mut opts: DetachOptions,
        progress: take::Progress<'_>,
    ) -> Result<HeldView, RigError> {
        let bdf: Bdf = bdf.parse()?;
        if opts.timeout.is_zero() {
            opts.timeout = self.taker.unbind_timeout;
        }
        self.with_slot(bdf, |slot| {
            if let Some(t) = slot.as_ref() {
                return Err(TakeError::AlreadyHeld {
                    bdf,
                    mode: t.mode(),
                }
                .into());
            }
            self.refuse_outlived(bdf)?;
            let t = self.taker.detach(bdf, &opts, progress)?;
            let mut view = self.view(&t);
            // Taking a device does not need DMA memory; the view says why there is none.
            view.no_pool = self.create_pool(&t).err().map(Arc::new);
            *slot = Some(t);
            Ok(view)
        })
    }

    /// Gives a device back to its driver (also one the journal holds from before).
    ///
    /// # Errors
    /// A malformed address, a busy device, one rig does not hold, or the step that failed.
    pub fn attach(
        &self,
        bdf: &str,
        progress: take::Progress<'_>,
    ) -> Result<AttachReport, RigError> {
        let bdf: Bdf = bdf.parse()?;
        // A lease whose reclaim failed may be given back by an admin: its holder is gone.
        if let Some(l) = lock(&self.ledger.leases).get(&bdf)
            && l.failed.is_none()
        {
            return Err(lease::leased(bdf, l));
        }
        self.with_slot(bdf, |slot| match slot.take() {
            Some(t) => {
                // After a failed reclaim: a process that kept the device would keep
                // vfio-pci's remove waiting in the kernel; refuse, naming it.
                let lessee = lock(&self.ledger.leases).get(&bdf).map(|l| l.holder.pid);
                if let Some(pid) = lessee
                    && let Ok(holders) = self.taker.holders_of(&t, Some(pid))
                    && !holders.is_empty()
                {
                    *slot = Some(t);
                    return Err(TakeError::LeaseKept { bdf, holders }.into());
                }
                lock(&self.ledger.leases).remove(&bdf);
                // Lent queues go first: deleted through the admin queue while the
                // device still masters the bus to complete the deletions.
                self.stop_queue_host(bdf, t.hold.vfio().map(|v| v.device.as_ref()));
                // The device stops mastering the bus before its pool's memory is
                // unmapped and freed (a device keeps writing what it was given:
                // docs/hardware/pci-takeover.md, "Bus mastering").
                self.taker.stop_bus_master(bdf)?;
                self.drop_pool(bdf);
                Ok(self.taker.attach(t, progress)?)
            }
            None => {
                self.refuse_outlived(bdf)?;
                Ok(self.taker.attach_journaled(bdf, progress)?)
            }
        })
    }

    /// Makes the DMA pool of a device rig now holds: IOVA through its VFIO container,
    /// or physical addresses in sysfs mode.
    fn create_pool(&self, t: &Taken) -> Result<(), RigError> {
        let mode = match t.hold.vfio() {
            Some(v) => {
                let iommu = v
                    .iommu()
                    .map_err(|source| TakeError::Vfio { bdf: t.bdf, source })?;
                dma::PoolMode::Vfio(Arc::new(iommu))
            }
            None => dma::PoolMode::Sysfs,
        };
        self.dma.create_configured(&t.bdf.to_string(), mode)?;
        Ok(())
    }

    fn drop_pool(&self, bdf: Bdf) {
        match self.dma.remove(&bdf.to_string()) {
            Ok(()) | Err(dma::DmaError::NoPool { .. }) => {}
            Err(e) => {
                tracing::warn!(%bdf, error = &e as &dyn std::error::Error, "DMA pool not removed")
            }
        }
    }

    /// Resets a held device.
    ///
    /// # Errors
    /// A device rig does not hold, or the reset's error.
    pub fn reset(
        &self,
        bdf: &str,
        method: ResetMethod,
        progress: take::Progress<'_>,
    ) -> Result<ResetReport, RigError> {
        let bdf: Bdf = bdf.parse()?;
        self.refuse_leased(bdf)?;
        self.with_slot(bdf, |slot| {
            let t = slot.as_ref().ok_or(TakeError::NotHeld { bdf })?;
            self.stop_queue_host(bdf, t.hold.vfio().map(|v| v.device.as_ref()));
            let report = self.taker.reset_held(t, method, progress)?;
            // Memory a device without an IOMMU reached stays reserved until the device
            // is reset; now it has been, so its pool may reuse those blocks
            // (docs/hardware/pci-takeover.md, "Memory a device without an IOMMU can
            // reach").
            if let Err(e) = self.dma.device_reset(&bdf.to_string())
                && !matches!(e, dma::DmaError::NoPool { .. })
            {
                tracing::warn!(%bdf, error = &e as &dyn std::error::Error, "DMA pool not told of the reset");
            }
            Ok(report)
        })
    }

    /// Resizes a BAR of a held device.
    ///
    /// # Errors
    /// A device rig does not hold, or the resize's error.
    pub fn resize(
        &self,
        bdf: &str,
        bar: u8,
        size: BarSize,
        progress: take::Progress<'_>,
    ) -> Result<(ResizeOutcome, HeldView), RigError> {
        let bdf: Bdf = bdf.parse()?;
        self.refuse_leased(bdf)?;
        self.with_slot(bdf, |slot| {
            let t = slot.as_mut().ok_or(TakeError::NotHeld { bdf })?;
            self.stop_queue_host(bdf, t.hold.vfio().map(|v| v.device.as_ref()));
            let r = self.taker.resize_held(t, Some(bar), size, progress)?;
            Ok((r, self.view(t)))
        })
    }

    /// Reads `count` consecutive registers of a held device's BAR.
    ///
    /// # Errors
    /// A malformed address, a busy device, one rig does not hold, or a refused access.
    pub fn read_bar(
        &self,
        bdf: &str,
        bar: u32,
        offset: u64,
        width: Width,
        count: u32,
    ) -> Result<Vec<u64>, RigError> {
        let bdf: Bdf = bdf.parse()?;
        self.refuse_leased(bdf)?;
        self.with_slot(bdf, |slot| {
            let t = slot.as_ref().ok_or(TakeError::NotHeld { bdf })?;
            let values = t.read_bar(bar, offset, width, count)?;
            tracing::trace!(%bdf, bar, offset, ?values, "BAR read");
            Ok(values)
        })
    }

    /// Writes one register of a held device's BAR.
    ///
    /// # Errors
    /// As [`Rig::read_bar`].
    pub fn write_bar(
        &self,
        bdf: &str,
        bar: u32,
        offset: u64,
        width: Width,
        value: u64,
    ) -> Result<(), RigError> {
        let bdf: Bdf = bdf.parse()?;
        self.refuse_leased(bdf)?;
        self.with_slot(bdf, |slot| {
            let t = slot.as_ref().ok_or(TakeError::NotHeld { bdf })?;
            t.write_bar(bar, offset, width, value)?;
            tracing::trace!(%bdf, bar, offset, value, "BAR write");
            Ok(())
        })
    }

    /// Turns a held device's bus mastering on or off; returns whether it was on. Only
    /// held devices: a driver owns the command register of the others. Give-back,
    /// shutdown and the next start's recovery clear it again (bus mastering outlives
    /// the process that turned it on: docs/hardware/pci-takeover.md, "Bus mastering").
    ///
    /// # Errors
    /// A malformed address, a busy device, one rig does not hold, or the config write.
    pub fn set_bus_master(&self, bdf: &str, on: bool) -> Result<bool, RigError> {
        let bdf: Bdf = bdf.parse()?;
        self.refuse_leased(bdf)?;
        self.with_slot(bdf, |slot| {
            let t = slot.as_ref().ok_or(TakeError::NotHeld { bdf })?;
            let was_on = self.taker.set_bus_master(bdf, on)?;
            if was_on != on {
                tracing::info!(%bdf, mode = %t.mode(), "bus mastering {}", if on { "on" } else { "off" });
            }
            Ok(was_on)
        })
    }

    /// Ends a DMA session: takes back what it holds, kind by kind in the ledger's
    /// order (`rig::ledger`): a device it leases whole, its lent queues (deleted on the
    /// controller), its channels (descheduled, drained, freed), its GPU memory
    /// (unmapped, freed), then its leases, which leave the IOMMU or its GPU address
    /// space, and the space with the last.
    pub fn end_session(&self, session: dma::SessionId) -> Ended {
        // A device leased whole in sysfs mode and reset at its reclaim: the session's
        // blocks, which the pool quarantines at their release, are safe to lend again
        // once released.
        let mut reset_in_sysfs = None;
        self.ledger.end(session, |kind| match kind {
            Kind::Device => {
                let (n, reset) = self.end_device_lease(session);
                reset_in_sysfs = reset;
                n
            }
            Kind::Queues => self.end_queues(session),
            Kind::Channels => self.end_channels(session),
            Kind::Events => self.end_events(session),
            Kind::GpuMemory => self.end_gpu_memory(session),
            Kind::Memory => {
                let n = self.dma.close_session(session);
                if let Some(bdf) = reset_in_sysfs.take() {
                    self.lease_memory_released(bdf);
                }
                n
            }
        })
    }

    /// At a clean exit: stops bus mastering on every held device, which keeps its
    /// record and is re-adopted at the next start (bus mastering outlives the process:
    /// docs/hardware/pci-takeover.md, "Bus mastering"). VFIO-held devices get the same
    /// from vfio-pci when their fd closes.
    pub fn shutdown(&self) {
        let slots: Vec<Slot> = lock(&self.devices).values().cloned().collect();
        for slot in slots {
            if let Some(t) = lock(&slot).as_ref()
                && let Err(e) = self.taker.stop_bus_master(t.bdf)
            {
                tracing::warn!(bdf = %t.bdf, error = &e as &dyn std::error::Error, "bus mastering left on at shutdown");
            }
        }
    }

    /// Unbinds that timed out and are still in the kernel (one stranded worker each;
    /// their devices refuse another unbind until they return).
    pub fn stuck_unbinds(&self) -> Vec<take::StuckUnbind> {
        self.taker.stuck_unbinds()
    }

    /// What rig holds now, and what the last start recovered.
    pub fn status(&self) -> (Vec<HeldView>, Arc<[take::Recovered]>) {
        let slots: Vec<(Bdf, Slot)> = lock(&self.devices)
            .iter()
            .map(|(b, s)| (*b, Arc::clone(s)))
            .collect();
        let mut views = Vec::new();
        for (bdf, slot) in slots {
            match try_lock_briefly(&slot) {
                // The snapshot is taken under the lock; the BARs are read after it is
                // released, so one status call does not make another see "busy".
                Some(g) => {
                    let snap = g.as_ref().map(|t| self.view_without_bars(t));
                    drop(g);
                    views.extend(snap.map(|mut v| {
                        v.bars = pci::device::read_bars(&self.sysfs, bdf).unwrap_or_default();
                        v
                    }));
                }
                None => views.push(HeldView {
                    bdf,
                    mode: None,
                    original_driver: None,
                    state: "busy".into(),
                    since: 0,
                    bars: Vec::new(),
                    group_members: Vec::new(),
                    overrode: Vec::new(),
                    resize: None,
                    no_pool: None,
                    lease: self.lease_holder(bdf),
                }),
            }
        }
        (views, Arc::clone(&lock(&self.recovered)))
    }

    fn view(&self, t: &Taken) -> HeldView {
        HeldView {
            // Only the BARs are shown: read them alone (a sparse config read, `resource`),
            // not the attributes, names and upstream walk of a full summary.
            bars: pci::device::read_bars(&self.sysfs, t.bdf).unwrap_or_default(),
            ..self.view_without_bars(t)
        }
    }

    fn view_without_bars(&self, t: &Taken) -> HeldView {
        HeldView {
            bdf: t.bdf,
            mode: Some(t.mode()),
            original_driver: t.original_driver.clone(),
            state: "held".into(),
            since: t
                .since
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            bars: Vec::new(),
            group_members: t.group_members.iter().map(|(b, _)| *b).collect(),
            overrode: t.overrode.clone(),
            resize: t.resize.clone(),
            no_pool: None,
            lease: self.lease_holder(t.bdf),
        }
    }

    /// DMA pools and sessions (`dma`): take creates a device's pool once it holds
    /// the device, and removes it before giving the device back.
    pub fn dma(&self) -> &dma::Pools {
        &self.dma
    }

    /// The sysfs root this daemon reads.
    pub fn sysfs(&self) -> &SysfsRoot {
        &self.sysfs
    }

    /// Every PCI function, GPUs and accelerators first, then by address.
    ///
    /// # Errors
    /// Only when sysfs cannot be listed at all; a function that fails to read becomes a
    /// line in `Listing::problems`.
    pub fn list(&self, gpus_only: bool) -> Result<Listing, RigError> {
        let mut listing = Listing::default();
        for bdf in self.sysfs.list()? {
            match pci::device::inspect_summary(&self.sysfs, &self.ids, bdf) {
                Ok(d) if gpus_only && !d.is_gpu() => {}
                Ok(d) => listing.devices.push(d),
                Err(e) => listing.problems.push(e),
            }
        }
        // By address as a `Bdf` (not as text: a domain past ffff prints wider).
        listing
            .devices
            .sort_by_cached_key(|d| (!d.is_gpu(), d.bdf.parse::<Bdf>().ok()));
        pci::share::fill_all(&mut listing.devices);
        Ok(listing)
    }

    /// One function, fully decoded.
    ///
    /// # Errors
    /// A malformed address, a missing function, or unreadable sysfs files.
    pub fn device(&self, bdf: &str) -> Result<Device, RigError> {
        let bdf: Bdf = bdf.parse()?;
        let mut d = pci::inspect(&self.sysfs, &self.ids, bdf)?;
        if d.is_gpu() {
            let gpus = pci::share::gpu_paths(&self.sysfs);
            pci::share::fill(&mut d.link, &d.bdf, &gpus);
        }
        Ok(d)
    }
}

/// A held device as `status` shows it.
#[derive(Debug, Clone)]
pub struct HeldView {
    pub bdf: Bdf,
    pub mode: Option<take::Mode>,
    pub original_driver: Option<String>,
    pub state: String,
    pub since: u64,
    /// The BARs as they read now (sizes after a resize); empty if unreadable.
    pub bars: Vec<pci::device::Bar>,
    pub group_members: Vec<Bdf>,
    pub overrode: Vec<String>,
    /// The resize made while taking it, if any.
    pub resize: Option<ResizeOutcome>,
    /// Why the device has no DMA pool, when the detach that made this view could not
    /// make one (the device is held all the same).
    pub no_pool: Option<Arc<RigError>>,
    /// Who leases it whole, if anyone.
    pub lease: Option<LeaseHolder>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_look_waits_out_another_look_but_not_a_long_operation() {
        let m = Arc::new(Mutex::new(0u32));
        // Another look: held for a millisecond, then let go.
        let held = Arc::clone(&m);
        let (tx, rx) = std::sync::mpsc::channel();
        let t = std::thread::spawn(move || {
            let g = lock(&held);
            tx.send(()).expect("send");
            std::thread::sleep(std::time::Duration::from_millis(1));
            drop(g);
        });
        rx.recv().expect("the other look holds the lock");
        assert!(
            try_lock_briefly(&m).is_some(),
            "a brief holder is waited out"
        );
        t.join().expect("join");
        // An operation: held for longer than a look waits.
        let held = Arc::clone(&m);
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            let g = lock(&held);
            tx.send(()).expect("send");
            let _ = done_rx.recv();
            drop(g);
        });
        rx.recv().expect("the operation holds the lock");
        let start = std::time::Instant::now();
        assert!(
            try_lock_briefly(&m).is_none(),
            "a long holder reads as busy"
        );
        assert!(start.elapsed() < std::time::Duration::from_millis(500));
        done_tx.send(()).expect("send");
        t.join().expect("join");
    }
}

#[cfg(test)]
#[path = "rig/lease_tests.rs"]
mod lease_tests;
