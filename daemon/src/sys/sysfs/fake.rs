//! A kernel stand-in over a fake sysfs tree (tests and the `fakes` feature only): writes
//! have the effects the kernel's store functions have (drivers/pci/pci-sysfs.c,
//! drivers/pci/pci-driver.c), every call is recorded as a [`SysfsCall`], and
//! [`FakeScript`] makes steps fail or hang. `vfio::FakeVfio` shares its set of open
//! VFIO devices: vfio-pci cannot be unbound from one (the real remove waits forever).
//! An unbind holds the function's device lock for as long as it runs, and a reset
//! waits for it, as the kernel's do (`device_release_driver` and `pci_reset_function`
//! both take `device_lock`).

use std::{
    collections::{HashMap, HashSet},
    fs::{self, OpenOptions},
    io,
    os::unix::fs::{FileExt, symlink},
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
    time::Duration,
};

use super::PciSysfs;
use crate::pci::{Bdf, SysfsRoot};

/// One call the fake kernel received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SysfsCall {
    Unbind {
        bdf: Bdf,
        driver: String,
    },
    DriverOverride {
        bdf: Bdf,
        driver: Option<String>,
    },
    Probe {
        bdf: Bdf,
    },
    Resize {
        bdf: Bdf,
        bar: u8,
        code: u32,
    },
    Reset {
        bdf: Bdf,
        method: Option<String>,
    },
    ResetMethods {
        bdf: Bdf,
        methods: String,
    },
    Enable {
        bdf: Bdf,
        on: bool,
    },
    WriteConfig {
        bdf: Bdf,
        offset: u64,
        bytes: Vec<u8>,
    },
    Modprobe {
        module: String,
        reload: bool,
    },
}

impl SysfsCall {
    /// The function the call wrote, if any (modprobe has none).
    pub fn bdf(&self) -> Option<Bdf> {
        match self {
            Self::Unbind { bdf, .. }
            | Self::DriverOverride { bdf, .. }
            | Self::Probe { bdf }
            | Self::Resize { bdf, .. }
            | Self::Reset { bdf, .. }
            | Self::ResetMethods { bdf, .. }
            | Self::Enable { bdf, .. }
            | Self::WriteConfig { bdf, .. } => Some(*bdf),
            Self::Modprobe { .. } => None,
        }
    }
}

/// What a [`FakeKernel`] answers differently from success.
#[derive(Debug, Clone, Default)]
pub struct FakeScript {
    /// Unbinding from this driver blocks for the duration (a holder keeps it busy).
    pub unbind_hangs: Option<(String, Duration)>,
    /// Probing leaves the function driverless and fails with this errno.
    pub probe_fails: Option<i32>,
    /// Errno for a resize to each size code (absent: the resize succeeds).
    pub resize_errno: HashMap<u32, i32>,
    /// Errno for every reset.
    pub reset_errno: Option<i32>,
    /// Drivers the fake "kernel" knows (a probe of another override binds nothing).
    pub drivers: Vec<String>,
    /// The driver a probe without an override binds, per function: the drivers bound
    /// when the fake was made.
    pub native: HashMap<Bdf, String>,
}

/// A kernel stand-in over a fake sysfs tree: writes have the effects the kernel's
/// store functions have. Every call is recorded in order.
#[derive(Debug, Clone)]
pub struct FakeKernel {
    root: SysfsRoot,
    pub script: Arc<Mutex<FakeScript>>,
    pub calls: Arc<Mutex<Vec<SysfsCall>>>,
    /// Functions with an open VFIO device fd (kept by `vfio::FakeVfio`).
    pub vfio_open: Arc<Mutex<HashSet<Bdf>>>,
    /// The kernel's enable count per function, as `enable` writes move it.
    pub enable_count: Arc<Mutex<std::collections::HashMap<Bdf, u32>>>,
    /// Functions whose device lock an unbind holds now.
    locked: Arc<Mutex<HashSet<Bdf>>>,
}

impl FakeKernel {
    /// A fake over the tree at `root`, knowing `drivers`; each function's current
    /// driver becomes the one a plain probe binds again.
    pub fn new(root: &Path, drivers: &[&str]) -> Self {
        let root = SysfsRoot::new(root);
        let native = root
            .list()
            .unwrap_or_default()
            .into_iter()
            .filter_map(|b| Some((b, root.link_name(b, "driver")?)))
            .collect();
        let script = FakeScript {
            drivers: drivers.iter().map(|d| (*d).to_owned()).collect(),
            native,
            ..FakeScript::default()
        };
        Self {
            root,
            script: Arc::new(Mutex::new(script)),
            calls: Arc::new(Mutex::new(Vec::new())),
            vfio_open: Arc::new(Mutex::new(HashSet::new())),
            enable_count: Arc::new(Mutex::new(std::collections::HashMap::new())),
            locked: Arc::new(Mutex::new(HashSet::new())),
        }
    }

    fn log(&self, call: SysfsCall) {
        self.calls.lock().expect("fake call log").push(call);
    }

    /// Writes config bytes as a device or another program would, without logging a
    /// call: for tests that set up state behind rig's back.
    pub fn write_config_raw(&self, bdf: Bdf, offset: u64, bytes: &[u8]) {
        let f = OpenOptions::new()
            .write(true)
            .open(self.dir(bdf).join("config"))
            .expect("fake config exists");
        f.write_all_at(bytes, offset)
            .expect("fake config is writable");
    }

    fn script(&self) -> FakeScript {
        self.script.lock().expect("fake script").clone()
    }

    fn dir(&self, bdf: Bdf) -> PathBuf {
        self.root.device_dir(bdf)
    }

    fn bind_to(&self, bdf: Bdf, driver: &str) -> io::Result<()> {
        let ddir = self.root.path().join("bus/pci/drivers").join(driver);
        fs::create_dir_all(&ddir)?;
        symlink(&ddir, self.dir(bdf).join("driver"))
    }

    fn rebar_entry(cfg: &[u8], bar: u8) -> Option<usize> {
        // Finds the Resizable BAR control register for `bar` in the extended list.
        let mut at = 0x100usize;
        for _ in 0..64 {
            let h = u32::from_le_bytes(cfg.get(at..at + 4)?.try_into().ok()?);
            if h == 0 {
                return None;
            }
            if h & 0xffff == 0x15 {
                let ctrl0 = u32::from_le_bytes(cfg.get(at + 8..at + 12)?.try_into().ok()?);
                let n = ((ctrl0 >> 5) & 7) as usize;
                return (0..n.max(1))
                    .map(|i| at + 8 + 8 * i)
                    .find(|&c| cfg.get(c).map(|b| b & 7) == Some(bar));
            }
            at = (h >> 20) as usize & 0xffc;
            if at == 0 {
                return None;
            }
        }
        None
    }
}

fn errno(e: i32) -> io::Error {
    io::Error::from_raw_os_error(e)
}

impl PciSysfs for FakeKernel {
    fn root(&self) -> &SysfsRoot {
        &self.root
    }

    fn unbind(&self, bdf: Bdf, driver: &str) -> io::Result<()> {
        self.log(SysfsCall::Unbind {
            bdf,
            driver: driver.to_owned(),
        });
        if driver == "vfio-pci" && self.vfio_open.lock().expect("fake vfio set").contains(&bdf) {
            // vfio_pci_remove waits for the last device fd: the kernel's write never
            // returns. The fake refuses instead, so a wrong order fails the test.
            return Err(errno(libc::EBUSY));
        }
        if let Some((d, how_long)) = self.script().unbind_hangs
            && d == driver
        {
            self.locked.lock().expect("fake device locks").insert(bdf);
            std::thread::sleep(how_long);
            self.locked.lock().expect("fake device locks").remove(&bdf);
        }
        let link = self.dir(bdf).join("driver");
        match self.root.link_name(bdf, "driver") {
            Some(d) if d == driver => fs::remove_file(link),
            _ => Err(errno(libc::ENODEV)),
        }
    }

    fn set_driver_override(&self, bdf: Bdf, driver: Option<&str>) -> io::Result<()> {
        self.log(SysfsCall::DriverOverride {
            bdf,
            driver: driver.map(ToOwned::to_owned),
        });
        fs::write(
            self.dir(bdf).join("driver_override"),
            format!("{}\n", driver.unwrap_or("(null)")),
        )
    }

    fn probe(&self, bdf: Bdf) -> io::Result<()> {
        self.log(SysfsCall::Probe { bdf });
        if self.root.link_name(bdf, "driver").is_some() {
            return Ok(());
        }
        let script = self.script();
        if let Some(e) = script.probe_fails {
            return Err(errno(e));
        }
        let over = self.root.read_attr(bdf, "driver_override").ok().flatten();
        let want = match over.as_deref() {
            Some("(null)" | "") | None => script.native.get(&bdf).cloned(),
            Some(o) => Some(o.to_owned()),
        };
        match want {
            Some(d) if script.drivers.contains(&d) => self.bind_to(bdf, &d),
            // The kernel accepts the write and binds nothing.
            _ => Ok(()),
        }
    }

    fn resize(&self, bdf: Bdf, bar: u8, code: u32) -> io::Result<()> {
        self.log(SysfsCall::Resize { bdf, bar, code });
        if self.root.link_name(bdf, "driver").is_some() {
            return Err(errno(libc::EBUSY));
        }
        if let Some(e) = self.script().resize_errno.get(&code) {
            return Err(errno(*e));
        }
        let cfg_path = self.dir(bdf).join("config");
        let mut cfg = fs::read(&cfg_path)?;
        let ctrl = Self::rebar_entry(&cfg, bar).ok_or_else(|| errno(libc::EINVAL))?;
        let mut v = u32::from_le_bytes(cfg[ctrl..ctrl + 4].try_into().map_err(io::Error::other)?);
        v = (v & !0x3f00) | (code << 8);
        cfg[ctrl..ctrl + 4].copy_from_slice(&v.to_le_bytes());
        fs::write(&cfg_path, &cfg)?;
        // The resource file: this BAR takes the new size; the kernel moves the other
        // BARs of the device (seed: the doorbell BAR moved on the R9700), modelled by
        // shifting every other assigned region up by 256 MiB.
        let res = self.root.read_resources(bdf).map_err(io::Error::other)?;
        let text: String = res
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let (s, e) = if i == usize::from(bar) && r.start != 0 {
                    (r.start, r.start + (1u64 << (code + 20)) - 1)
                } else if r.start != 0 && i < 6 {
                    (r.start + (256 << 20), r.end + (256 << 20))
                } else {
                    (r.start, r.end)
                };
                format!("0x{s:016x} 0x{e:016x} 0x{:016x}\n", r.flags)
            })
            .collect();
        fs::write(self.dir(bdf).join("resource"), text)
    }

    fn reset(&self, bdf: Bdf, method: Option<&str>) -> io::Result<()> {
        self.log(SysfsCall::Reset {
            bdf,
            method: method.map(ToOwned::to_owned),
        });
        // The device lock, held by an unbind still in the driver's remove.
        while self
            .locked
            .lock()
            .expect("fake device locks")
            .contains(&bdf)
        {
            std::thread::sleep(Duration::from_millis(5));
        }
        if let Some(e) = self.script().reset_errno {
            return Err(errno(e));
        }
        if let Some(m) = method {
            let methods = self
                .root
                .read_attr(bdf, "reset_method")
                .ok()
                .flatten()
                .unwrap_or_default();
            if !methods.split_whitespace().any(|x| x == m) {
                return Err(errno(libc::EINVAL));
            }
        }
        Ok(())
    }

    fn set_reset_methods(&self, bdf: Bdf, methods: &str) -> io::Result<()> {
        self.log(SysfsCall::ResetMethods {
            bdf,
            methods: methods.to_owned(),
        });
        fs::write(self.dir(bdf).join("reset_method"), format!("{methods}\n"))
    }

    fn enable(&self, bdf: Bdf, on: bool) -> io::Result<()> {
        self.log(SysfsCall::Enable { bdf, on });
        // As `enable_store` (drivers/pci/pci-sysfs.c): 1 is pci_enable_device, which
        // counts up; 0 is pci_disable_device if enabled, else EIO.
        let mut counts = self
            .enable_count
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let n = counts.entry(bdf).or_insert(0);
        if on {
            *n += 1;
        } else if *n == 0 {
            return Err(io::Error::from_raw_os_error(libc::EIO));
        } else {
            *n -= 1;
        }
        fs::write(
            self.dir(bdf).join("enable"),
            if *n > 0 { "1\n" } else { "0\n" },
        )
    }

    fn write_config(&self, bdf: Bdf, offset: u64, bytes: &[u8]) -> io::Result<()> {
        self.log(SysfsCall::WriteConfig {
            bdf,
            offset,
            bytes: bytes.to_vec(),
        });
        let f = OpenOptions::new()
            .write(true)
            .open(self.dir(bdf).join("config"))?;
        f.write_all_at(bytes, offset)
    }

    fn modprobe(&self, module: &str, reload: bool) -> io::Result<()> {
        self.log(SysfsCall::Modprobe {
            module: module.to_owned(),
            reload,
        });
        Ok(())
    }
}
