//! Writing PCI sysfs: the files that change which driver holds a function, its BAR
//! sizes, and its reset. Kernel ABI: Documentation/ABI/testing/sysfs-bus-pci.
//!
//! [`PciSysfs`] is the seam between `take` and the kernel: [`RealSysfs`] writes the
//! files; `FakeKernel` (in `fake`, built for tests and the `fakes` feature only, never
//! into the shipped rigd) answers over a `testing::FakeSysfs` tree the way the kernel
//! does (unbind removes the `driver` link, a probe honours `driver_override`, a resize
//! moves the other BARs), records each call as a typed `SysfsCall` and returns scripted
//! errno values, so the whole state machine runs in unit tests. No `unsafe` here:
//! sysfs is files.

use std::{
    fs::OpenOptions,
    io::{self, Write},
    os::unix::fs::FileExt,
    path::Path,
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

#[cfg(any(test, feature = "fakes"))]
mod fake;
#[cfg(any(test, feature = "fakes"))]
pub use fake::{FakeKernel, FakeScript, SysfsCall};
