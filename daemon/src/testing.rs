//! Fake sysfs trees for tests: the files and links `pci` reads, laid out as the kernel
//! lays them out (`devices/pci0000:00/<bridge>/<bdf>`, `bus/pci/devices/<bdf>` links,
//! `driver` and `iommu_group` links), in a directory of the test's own.
//!
//! Only tests use this; it writes nowhere but under the root it is given. [`Serving`]
//! (in `serve`) runs rigd's service for a test on a socket of its own; `hosts` builds
//! whole machines (an 8-GPU host behind PCIe switches); [`FakeWorld`] (in `world`) is
//! a tree, config, fake kernel and VFIO in a directory of the test's own;
//! [`FakeJournal`] (in `journal`) collects what rigd sends the journal.

use std::{
    fs, io,
    os::unix::fs::symlink,
    path::{Path, PathBuf},
};

use crate::pci::Bdf;

pub mod hosts;
mod journal;
mod serve;
mod world;
pub use journal::{FakeJournal, JournalEntry};
pub use serve::Serving;
pub use world::FakeWorld;

/// A fake `/sys`.
#[derive(Debug)]
pub struct FakeSysfs {
    root: PathBuf,
}

/// One function to put into a fake tree. Build with [`FakeDevice::new`] and the
/// `with_*` methods; `config` is the raw config space (256 or 4096 bytes).
#[derive(Debug, Clone)]
pub struct FakeDevice {
    pub bdf: Bdf,
    pub parent: Option<Bdf>,
    pub config: Vec<u8>,
    /// `resource` lines: start, end, flags.
    pub resources: Vec<(u64, u64, u64)>,
    pub driver: Option<String>,
    pub iommu_group: Option<u32>,
    /// Plain attributes: name, contents.
    pub attrs: Vec<(String, String)>,
    /// N of each `resourceN_resize` file.
    pub resize_files: Vec<u8>,
    /// An SR-IOV virtual function's PF: `physfn` links to it, and it gets `virtfnN`.
    pub physfn: Option<(Bdf, u32)>,
}

impl FakeDevice {
    /// A function with a 4 KiB config space holding the given ids and class, status
    /// "capability list" set, and no capabilities yet.
    pub fn new(bdf: &str, vendor: u16, device: u16, class: u32) -> Self {
        let mut config = vec![0u8; 4096];
        config[0..2].copy_from_slice(&vendor.to_le_bytes());
        config[2..4].copy_from_slice(&device.to_le_bytes());
        config[0x06] = 0x10;
        config[0x08..0x0c].copy_from_slice(&(class << 8 | 0xa1).to_le_bytes());
        Self {
            bdf: bdf.parse().expect("test BDFs are valid"),
            parent: None,
            config,
            resources: vec![(0, 0, 0); 7],
            driver: None,
            iommu_group: None,
            attrs: vec![
                ("enable".into(), "1".into()),
                ("numa_node".into(), "-1".into()),
                ("local_cpulist".into(), "0-15".into()),
                ("power_state".into(), "D0".into()),
                ("driver_override".into(), "(null)".into()),
            ],
            resize_files: Vec::new(),
            physfn: None,
        }
    }

    /// Writes `bytes` into config space at `at`.
    pub fn with_bytes(mut self, at: usize, bytes: &[u8]) -> Self {
        self.config[at..at + bytes.len()].copy_from_slice(bytes);
        self
    }

    /// Makes this a type 1 header (a bridge or port).
    pub fn bridge(self) -> Self {
        self.with_bytes(0x0e, &[1])
    }

    /// A 64-bit memory BAR at `index` (and `index + 1`), assigned at `addr`.
    pub fn with_bar64(mut self, index: usize, addr: u64, size: u64, prefetch: bool) -> Self {
        let [l0, l1, l2, l3, h0, h1, h2, h3] = addr.to_le_bytes();
        let lo =
            (u32::from_le_bytes([l0, l1, l2, l3]) & !0xf) | 0x4 | if prefetch { 0x8 } else { 0 };
        let at = 0x10 + 4 * index;
        self.config[at..at + 4].copy_from_slice(&lo.to_le_bytes());
        self.config[at + 4..at + 8].copy_from_slice(&[h0, h1, h2, h3]);
        self.resources[index] = (addr, addr + size - 1, 0x0014_220c);
        self
    }

    /// A PCI Express v2 capability at `at` chained to `next`, with the given port type,
    /// LnkCap and LnkSta speed code and width.
    pub fn with_express(
        self,
        at: u8,
        next: u8,
        port_type: u8,
        cap: (u8, u8),
        sta: (u8, u8),
    ) -> Self {
        let flags: u16 = 2 | (u16::from(port_type) << 4);
        let lnkcap = u32::from(cap.0) | (u32::from(cap.1) << 4) | (0b11 << 10);
        let lnksta = u16::from(sta.0) | (u16::from(sta.1) << 4);
        let a = usize::from(at);
        self.with_bytes(a, &[0x10, next])
            .with_bytes(a + 2, &flags.to_le_bytes())
            .with_bytes(a + 4, &0x1000_8022u32.to_le_bytes())
            .with_bytes(a + 0x0c, &lnkcap.to_le_bytes())
            .with_bytes(a + 0x12, &lnksta.to_le_bytes())
            .with_bytes(a + 0x2c, &0x3eu32.to_le_bytes())
    }

    /// Points the header's capability pointer at `at`.
    pub fn with_cap_pointer(self, at: u8) -> Self {
        self.with_bytes(0x34, &[at])
    }

    /// Sits below the bridge `parent` (which must be added first).
    pub fn under(mut self, parent: &str) -> Self {
        self.parent = Some(parent.parse().expect("test BDFs are valid"));
        self
    }

    /// Bound to `driver`.
    pub fn with_driver(mut self, driver: &str) -> Self {
        self.driver = Some(driver.to_owned());
        self
    }

    /// Virtual function `n` (from 0) of `pf`, which must be added first.
    pub fn virtfn_of(mut self, pf: &str, n: u32) -> Self {
        self.physfn = Some((pf.parse().expect("test BDFs are valid"), n));
        self
    }

    /// In IOMMU group `n`.
    pub fn in_group(mut self, n: u32) -> Self {
        self.iommu_group = Some(n);
        self
    }

    /// Sets (or replaces) a plain attribute.
    pub fn with_attr(mut self, name: &str, value: &str) -> Self {
        self.attrs.retain(|(n, _)| n != name);
        self.attrs.push((name.to_owned(), value.to_owned()));
        self
    }

    /// QEMU's edu (1234:11e8, class 00ff00; hw/misc/edu.c) as the fake-kernel tests
    /// take and lease it: a 1 MiB 64-bit BAR0, IOMMU group `group`, reset by a bus
    /// reset.
    pub fn edu(bdf: &str, group: u32) -> Self {
        Self::new(bdf, 0x1234, 0x11e8, 0x00ff00)
            .with_bar64(0, 0xfe00_0000, 1 << 20, false)
            .in_group(group)
            .with_attr("reset_method", "bus")
    }
}

/// A `Rig` over a fake kernel of `sysfs` (with `drivers` registered) and fake VFIO,
/// both returned beside it for the test's asserts.
pub fn fake_rig(
    config: &crate::config::Config,
    sysfs: &FakeSysfs,
    drivers: &[&str],
) -> (
    std::sync::Arc<crate::rig::Rig>,
    std::sync::Arc<crate::sys::sysfs::FakeKernel>,
    std::sync::Arc<crate::vfio::FakeVfio>,
) {
    use std::sync::Arc;
    let kernel = Arc::new(crate::sys::sysfs::FakeKernel::new(sysfs.root(), drivers));
    let vfio = Arc::new(crate::vfio::FakeVfio::new(&kernel));
    let (rig, _) = crate::rig::Rig::with_kernel(config, kernel.clone(), vfio.clone());
    (Arc::new(rig), kernel, vfio)
}

/// Takes `bdf` in vfio mode.
///
/// # Panics
/// When the take fails: the test cannot go on.
pub fn take_vfio(rig: &crate::rig::Rig, bdf: &str) {
    let opts = crate::take::DetachOptions {
        mode: crate::take::Mode::Vfio,
        ..crate::take::DetachOptions::default()
    };
    rig.detach(bdf, opts, &mut |_| {}).expect("detach");
}

/// A `[lease]` rule letting this process's uid lease `bdf` whole.
pub fn lease_rule_for_own_uid(bdf: &str) -> crate::config::LeaseRule {
    crate::config::LeaseRule {
        devices: vec![bdf.into()],
        uids: vec![nix::unistd::getuid().as_raw()],
        groups: Vec::new(),
    }
}

/// A pool of `blocks` shmem blocks for held device `bdf`, pinned by one thread;
/// returns once it is (within 10 s).
///
/// # Panics
/// When the pool cannot be made or is not pinned in time: the test cannot go on.
pub fn pinned_pool(
    rig: &crate::rig::Rig,
    bdf: &str,
    mode: crate::dma::PoolMode,
    blocks: u32,
) -> std::sync::Arc<crate::dma::Pool> {
    let spec = crate::dma::PoolSpec {
        mode,
        blocks,
        backing: crate::dma::Backing::Shmem,
        pin_threads: 1,
    };
    let pool = rig.dma().create(bdf, spec).expect("pool");
    assert!(
        pool.wait_pinned(std::time::Duration::from_secs(10)),
        "{bdf}'s pool pinned within 10 s"
    );
    pool
}

/// A default config whose every path lies in a test's own `dir`, with `sysfs` (a
/// [`FakeSysfs`]) for /sys.
pub fn config_in(dir: &Path, sysfs: &FakeSysfs) -> crate::config::Config {
    config_at(dir, sysfs.root())
}

/// As [`config_in`], /sys at `sysfs`.
fn config_at(dir: &Path, sysfs: &Path) -> crate::config::Config {
    let mut config = crate::config::Config::default();
    config.paths.sysfs = sysfs.to_owned();
    config.paths.pci_ids = dir.join("pci.ids");
    config.paths.state_dir = dir.join("state");
    config.paths.proc = dir.join("proc");
    config.paths.dev = dir.join("dev");
    config
}

impl FakeSysfs {
    /// An empty tree at `root` (created if needed).
    ///
    /// # Errors
    /// I/O errors creating the directories.
    pub fn new(root: &Path) -> io::Result<Self> {
        fs::create_dir_all(root.join("bus/pci/devices"))?;
        fs::create_dir_all(root.join("bus/pci/drivers"))?;
        fs::create_dir_all(root.join("devices/pci0000:00"))?;
        fs::create_dir_all(root.join("kernel/iommu_groups"))?;
        Ok(Self {
            root: root.to_owned(),
        })
    }

    /// The tree's root, to hand to `SysfsRoot` or the config's `paths.sysfs`.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The real directory of a function already added.
    pub fn device_dir(&self, bdf: Bdf) -> PathBuf {
        fs::canonicalize(self.root.join("bus/pci/devices").join(bdf.to_string()))
            .expect("device was added")
    }

    /// Adds a function; returns its real directory.
    ///
    /// # Errors
    /// I/O errors writing the tree.
    pub fn add(&self, d: &FakeDevice) -> io::Result<PathBuf> {
        let parent_dir = match d.parent {
            Some(p) => self.device_dir(p),
            None => self.root.join(format!(
                "devices/pci{:04x}:{:02x}",
                d.bdf.domain(),
                d.bdf.bus()
            )),
        };
        let dir = parent_dir.join(d.bdf.to_string());
        fs::create_dir_all(&dir)?;
        fs::write(dir.join("config"), &d.config)?;
        let text: String = d
            .resources
            .iter()
            .map(|(s, e, f)| format!("0x{s:016x} 0x{e:016x} 0x{f:016x}\n"))
            .collect();
        fs::write(dir.join("resource"), text)?;
        // resourceN of each memory region (IORESOURCE_MEM), sparse, as big as the BAR.
        for (i, (s, e, f)) in d.resources.iter().enumerate().take(6) {
            if f & 0x200 != 0 && e > s {
                fs::File::create(dir.join(format!("resource{i}")))?.set_len(e - s + 1)?;
            }
        }
        let ids = [("vendor", 0usize, 2usize), ("device", 2, 2)];
        for (name, at, len) in ids {
            let v = d.config[at..at + len]
                .iter()
                .rev()
                .fold(0u32, |a, b| a << 8 | u32::from(*b));
            fs::write(dir.join(name), format!("0x{v:04x}\n"))?;
        }
        // class and irq as the kernel writes them: lspci's sysfs back end requires both,
        // so rigctl's tests can read the same tree with it.
        let class = d.config[9..12]
            .iter()
            .rev()
            .fold(0u32, |a, b| a << 8 | u32::from(*b));
        fs::write(dir.join("class"), format!("0x{class:06x}\n"))?;
        fs::write(dir.join("irq"), "0\n")?;
        for (name, value) in &d.attrs {
            fs::write(dir.join(name), format!("{value}\n"))?;
        }
        for n in &d.resize_files {
            fs::write(
                dir.join(format!("resource{n}_resize")),
                "0000000000000000\n",
            )?;
        }
        if let Some(driver) = &d.driver {
            let ddir = self.root.join("bus/pci/drivers").join(driver);
            fs::create_dir_all(&ddir)?;
            symlink(&ddir, dir.join("driver"))?;
        }
        if let Some(g) = d.iommu_group {
            let gdir = self.root.join(format!("kernel/iommu_groups/{g}"));
            fs::create_dir_all(gdir.join("devices"))?;
            symlink(&gdir, dir.join("iommu_group"))?;
            symlink(&dir, gdir.join("devices").join(d.bdf.to_string()))?;
        }
        if let Some((pf, n)) = d.physfn {
            let pdir = self.device_dir(pf);
            symlink(&pdir, dir.join("physfn"))?;
            symlink(&dir, pdir.join(format!("virtfn{n}")))?;
        }
        symlink(
            &dir,
            self.root.join("bus/pci/devices").join(d.bdf.to_string()),
        )?;
        Ok(dir)
    }
}
