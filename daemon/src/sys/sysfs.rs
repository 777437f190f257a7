//! Writing PCI sysfs: the files that change which driver holds a function, its BAR
//! sizes, and its reset. Kernel ABI: Documentation/ABI/testing/sysfs-bus-pci.
//!
//! [`PciSysfs`] is the seam between `take` and the kernel: [`RealSysfs`] writes the
//! files; [`FakeKernel`] answers over a `testing::FakeSysfs` tree the way the kernel
//! does (unbind removes the `driver` link, a probe honours `driver_override`, a resize
//! moves the other BARs) and returns scripted errno values, so the whole state machine
//! runs in unit tests. No `unsafe` here: sysfs is files.

use std::{
    collections::HashMap,
    fs::{self, OpenOptions},
    io::{self, Write},
    os::unix::fs::{FileExt, symlink},
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
    time::Duration,
};

use crate::pci::{Bdf, SysfsRoot};

/// The sysfs writes `take` makes. Each is one write of one file.
pub trait PciSysfs: Send + Sync + std::fmt::Debug {
    /// The tree reads go to (the same files the writes change).
    fn root(&self) -> &SysfsRoot;
    /// `drivers/<driver>/unbind` ← bdf. May block for as long as the driver waits.
    fn unbind(&self, bdf: Bdf, driver: &str) -> io::Result<()>;
    /// `driver_override` ← name, or cleared with `None`.
    fn set_driver_override(&self, bdf: Bdf, driver: Option<&str>) -> io::Result<()>;
    /// `bus/pci/drivers_probe` ← bdf: binds the override, or the best match.
    fn probe(&self, bdf: Bdf) -> io::Result<()>;
    /// `resource<bar>_resize` ← the ReBAR size code (2^code MiB).
    fn resize(&self, bdf: Bdf, bar: u8, code: u32) -> io::Result<()>;
    /// `reset_method` ← method (when given), then `reset` ← 1.
    fn reset(&self, bdf: Bdf, method: Option<&str>) -> io::Result<()>;
    /// `reset_method` ← a space-separated list (restores what a reset narrowed).
    fn set_reset_methods(&self, bdf: Bdf, methods: &str) -> io::Result<()>;
    /// `enable` ← 1 or 0.
    fn enable(&self, bdf: Bdf, on: bool) -> io::Result<()>;
    /// Writes config space at `offset` (root only on a real system).
    fn write_config(&self, bdf: Bdf, offset: u64, bytes: &[u8]) -> io::Result<()>;
    /// Loads a kernel module (modprobe), or reloads it (`-r` first) when asked.
    fn modprobe(&self, module: &str, reload: bool) -> io::Result<()>;
}

/// The kernel's sysfs.
#[derive(Debug, Clone)]
pub struct RealSysfs {
    root: SysfsRoot,
}

impl RealSysfs {
    /// Writes under `root` (`/sys` in production).
    pub fn new(root: SysfsRoot) -> Self {
        Self { root }
    }

    fn write(&self, path: &Path, text: &str) -> io::Result<()> {
        let mut f = OpenOptions::new().write(true).open(path)?;
        // One write(2): sysfs store functions see the whole value at once.
        f.write_all(text.as_bytes())
    }
}

impl PciSysfs for RealSysfs {
    fn root(&self) -> &SysfsRoot {
        &self.root
    }

    fn unbind(&self, bdf: Bdf, driver: &str) -> io::Result<()> {
        let p = self
            .root
            .path()
            .join("bus/pci/drivers")
            .join(driver)
            .join("unbind");
        self.write(&p, &bdf.to_string())
    }

    fn set_driver_override(&self, bdf: Bdf, driver: Option<&str>) -> io::Result<()> {
        // An empty write ("\n") clears the override (drivers/pci/pci-sysfs.c).
        let p = self.root.device_dir(bdf).join("driver_override");
        self.write(&p, driver.unwrap_or("\n"))
    }

    fn probe(&self, bdf: Bdf) -> io::Result<()> {
        let p = self.root.path().join("bus/pci/drivers_probe");
        self.write(&p, &bdf.to_string())
    }

    fn resize(&self, bdf: Bdf, bar: u8, code: u32) -> io::Result<()> {
        let p = self
            .root
            .device_dir(bdf)
            .join(format!("resource{bar}_resize"));
        self.write(&p, &code.to_string())
    }

    fn reset(&self, bdf: Bdf, method: Option<&str>) -> io::Result<()> {
        let dir = self.root.device_dir(bdf);
        if let Some(m) = method {
            self.write(&dir.join("reset_method"), m)?;
        }
        self.write(&dir.join("reset"), "1")
    }

    fn set_reset_methods(&self, bdf: Bdf, methods: &str) -> io::Result<()> {
        self.write(&self.root.device_dir(bdf).join("reset_method"), methods)
    }

    fn enable(&self, bdf: Bdf, on: bool) -> io::Result<()> {
        self.write(
            &self.root.device_dir(bdf).join("enable"),
            if on { "1" } else { "0" },
        )
    }

    fn write_config(&self, bdf: Bdf, offset: u64, bytes: &[u8]) -> io::Result<()> {
        let f = OpenOptions::new()
            .write(true)
            .open(self.root.device_dir(bdf).join("config"))?;
        f.write_all_at(bytes, offset)
    }

    fn modprobe(&self, module: &str, reload: bool) -> io::Result<()> {
        // A loaded module has /sys/module/<name> (dashes as underscores): spare the
        // ~13 ms of a modprobe that would load nothing (measured in the QEMU guest).
        let loaded = self
            .root
            .path()
            .join("module")
            .join(module.replace('-', "_"))
            .exists();
        if loaded && !reload {
            return Ok(());
        }
        let run = |args: &[&str]| -> io::Result<()> {
            let out = std::process::Command::new("modprobe").args(args).output()?;
            if out.status.success() {
                Ok(())
            } else {
                Err(io::Error::other(format!(
                    "modprobe {} failed: {}",
                    args.join(" "),
                    String::from_utf8_lossy(&out.stderr).trim()
                )))
            }
        };
        if reload {
            run(&["-r", module])?;
        }
        run(&[module])
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
    pub calls: Arc<Mutex<Vec<String>>>,
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
        }
    }

    fn log(&self, call: String) {
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
        self.log(format!("unbind {bdf} {driver}"));
        if let Some((d, how_long)) = self.script().unbind_hangs
            && d == driver
        {
            std::thread::sleep(how_long);
        }
        let link = self.dir(bdf).join("driver");
        match self.root.link_name(bdf, "driver") {
            Some(d) if d == driver => fs::remove_file(link),
            _ => Err(errno(libc::ENODEV)),
        }
    }

    fn set_driver_override(&self, bdf: Bdf, driver: Option<&str>) -> io::Result<()> {
        self.log(format!("driver_override {bdf} {}", driver.unwrap_or("")));
        fs::write(
            self.dir(bdf).join("driver_override"),
            format!("{}\n", driver.unwrap_or("(null)")),
        )
    }

    fn probe(&self, bdf: Bdf) -> io::Result<()> {
        self.log(format!("probe {bdf}"));
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
        self.log(format!("resize {bdf} bar{bar} {code}"));
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
        self.log(format!("reset {bdf} {}", method.unwrap_or("default")));
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
        self.log(format!("reset_method {bdf} {methods}"));
        fs::write(self.dir(bdf).join("reset_method"), format!("{methods}\n"))
    }

    fn enable(&self, bdf: Bdf, on: bool) -> io::Result<()> {
        self.log(format!("enable {bdf} {on}"));
        fs::write(self.dir(bdf).join("enable"), if on { "1\n" } else { "0\n" })
    }

    fn write_config(&self, bdf: Bdf, offset: u64, bytes: &[u8]) -> io::Result<()> {
        self.log(format!("config {bdf} +{offset:#x} {bytes:02x?}"));
        let f = OpenOptions::new()
            .write(true)
            .open(self.dir(bdf).join("config"))?;
        f.write_all_at(bytes, offset)
    }

    fn modprobe(&self, module: &str, reload: bool) -> io::Result<()> {
        self.log(format!(
            "modprobe {module}{}",
            if reload { " (reload)" } else { "" }
        ));
        Ok(())
    }
}
