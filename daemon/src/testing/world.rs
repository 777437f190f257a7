//! rigd's world over the fake kernel in a directory of a test's own: the fake tree
//! (`<dir>/sys`), a config whose every path lies under the directory, the fake kernel
//! and fake VFIO over the tree, and a `Rig` made from them. The set-up each
//! end-to-end test and campaign otherwise writes out (clients_killed, lease, load,
//! the fuzz targets' common module, roles, reload, metrics); they build on it as
//! they are next touched.
//!
//! Two ways in: [`FakeWorld::new`] writes a tree and keeps the kernel in memory (most
//! tests); [`FakeWorld::persistent`] opens a tree already on disk with a kernel that
//! outlives its process (`FakeKernel::persistent`), for a rigd that is killed and
//! started again over the same tree and state dir (the resize campaign).

use std::{io, path::Path, sync::Arc};

use super::{FakeDevice, FakeSysfs};
use crate::{
    config::Config,
    rig::{Rig, StartWarning},
    sys::sysfs::FakeKernel,
    vfio::FakeVfio,
};

/// The fake machine a test's rigd runs over; change `config` before [`FakeWorld::rig`].
#[derive(Debug)]
pub struct FakeWorld {
    pub config: Config,
    pub kernel: Arc<FakeKernel>,
    pub vfio: Arc<FakeVfio>,
}

impl FakeWorld {
    /// Writes `devices` into a new tree under `dir` (added in order: a bridge before
    /// what sits below it); the kernel knows `drivers` and keeps its state in memory.
    ///
    /// # Errors
    /// Writing the tree.
    pub fn new(dir: &Path, devices: &[FakeDevice], drivers: &[&str]) -> io::Result<Self> {
        let tree = FakeSysfs::new(&dir.join("sys"))?;
        for d in devices {
            tree.add(d)?;
        }
        let kernel = Arc::new(FakeKernel::new(tree.root(), drivers));
        Ok(Self::over(dir, kernel))
    }

    /// Opens the tree already under `dir` with a kernel whose state outlives this
    /// process (`FakeKernel::persistent`): what a rigd started again after a kill
    /// finds.
    ///
    /// # Errors
    /// Reading or writing the kernel's kept state.
    pub fn persistent(dir: &Path, drivers: &[&str]) -> io::Result<Self> {
        let kernel = Arc::new(FakeKernel::persistent(&dir.join("sys"), drivers)?);
        Ok(Self::over(dir, kernel))
    }

    fn over(dir: &Path, kernel: Arc<FakeKernel>) -> Self {
        let vfio = Arc::new(FakeVfio::new(&kernel));
        Self {
            config: super::config_at(dir, &dir.join("sys")),
            kernel,
            vfio,
        }
    }

    /// rigd's state over this world (`Rig::with_kernel`), recovery not yet run.
    pub fn rig(&self) -> (Rig, Vec<StartWarning>) {
        Rig::with_kernel(&self.config, self.kernel.clone(), self.vfio.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::sysfs::PciSysfs;

    #[test]
    fn a_persistent_world_over_a_tree_finds_its_devices_and_the_drivers_they_match() {
        let dir = tempfile::tempdir().expect("tempdir");
        let gpu = FakeDevice::new("0000:03:00.0", 0x10de, 0x2335, 0x030200).with_driver("nvidia");
        let w = FakeWorld::new(dir.path(), &[gpu], &["nvidia"]).expect("world");
        assert_eq!(w.config.paths.state_dir, dir.path().join("state"));
        let (rig, _) = w.rig();
        assert_eq!(rig.list(false).expect("list").devices.len(), 1);
        drop((rig, w));

        let first = FakeWorld::persistent(dir.path(), &["nvidia"]).expect("first open");
        let bdf = "0000:03:00.0".parse().expect("address");
        // Left driverless, as by a take killed after its unbind.
        std::fs::remove_file(first.kernel.root().device_dir(bdf).join("driver")).expect("unbind");
        drop(first);
        let again = FakeWorld::persistent(dir.path(), &["nvidia"]).expect("second open");
        again.kernel.probe(bdf).expect("probe");
        assert_eq!(
            again.kernel.root().link_name(bdf, "driver").as_deref(),
            Some("nvidia"),
            "the second open still knows the GPU's driver"
        );
    }
}
