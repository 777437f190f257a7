//! `Rig` owns what the daemon knows and sequences work on devices.
//!
//! Today it answers inspection requests (`pci`); taking devices, DMA and queues plug in
//! here, each behind the per-device lock this type will own. Blocking sysfs work runs
//! on the caller's thread: `service` moves it off the async executor.

use std::path::Path;

use crate::{
    config::Config,
    pci::{self, Bdf, BdfError, Device, PciError, SysfsRoot, ids::PciIds},
};

/// What a request to `Rig` can fail with.
#[derive(Debug, thiserror::Error)]
pub enum RigError {
    #[error(transparent)]
    BadAddress(#[from] BdfError),
    #[error(transparent)]
    Pci(#[from] PciError),
}

/// The daemon's state.
#[derive(Debug)]
pub struct Rig {
    sysfs: SysfsRoot,
    ids: PciIds,
}

/// A listing: the functions that could be read, and one line per function that could not.
#[derive(Debug, Default)]
pub struct Listing {
    pub devices: Vec<Device>,
    pub problems: Vec<String>,
}

impl Rig {
    /// Builds the state from the configuration. A missing pci.ids is not fatal: names
    /// are then absent, and the returned warning says why.
    pub fn new(config: &Config) -> (Self, Option<String>) {
        let (ids, warning) = load_ids(&config.paths.pci_ids);
        let rig = Self {
            sysfs: SysfsRoot::new(&config.paths.sysfs),
            ids,
        };
        (rig, warning)
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
            match pci::inspect(&self.sysfs, &self.ids, bdf) {
                Ok(d) if gpus_only && !d.is_gpu() => {}
                Ok(d) => listing.devices.push(d),
                Err(e) => listing.problems.push(error_line(&e)),
            }
        }
        listing.devices.sort_by_key(|d| (!d.is_gpu(), d.bdf));
        Ok(listing)
    }

    /// One function, fully decoded.
    ///
    /// # Errors
    /// A malformed address, a missing function, or unreadable sysfs files.
    pub fn device(&self, bdf: &str) -> Result<Device, RigError> {
        let bdf: Bdf = bdf.parse()?;
        Ok(pci::inspect(&self.sysfs, &self.ids, bdf)?)
    }
}

fn load_ids(path: &Path) -> (PciIds, Option<String>) {
    match PciIds::load(path) {
        Ok(ids) => (ids, None),
        Err(e) => (
            PciIds::empty(),
            Some(format!(
                "{}; device names will be missing (install Debian's pci.ids)",
                error_line(&e)
            )),
        ),
    }
}

/// An error and its causes on one line, joined by ": ".
pub fn error_line(e: &dyn std::error::Error) -> String {
    let mut line = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        line.push_str(": ");
        line.push_str(&c.to_string());
        cause = c.source();
    }
    line
}
