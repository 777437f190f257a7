//! A kernel stand-in over a fake sysfs tree (tests and the `fakes` feature only): writes
//! have the effects the kernel's store functions have (drivers/pci/pci-sysfs.c,
//! drivers/pci/pci-driver.c), every call is recorded as a [`SysfsCall`], and
//! [`FakeScript`] makes steps fail or hang. `vfio::FakeVfio` shares its set of open
//! VFIO devices: vfio-pci cannot be unbound from one (the real remove waits forever).
//! An unbind holds the function's device lock for as long as it runs, and a reset
//! waits for it, as the kernel's do (`device_release_driver` and `pci_reset_function`
//! both take `device_lock`).
//!
//! What survives the process: the tree is on disk, so bindings (`driver` links),
//! `driver_override`, config space (the command register, Resizable BAR controls) and
//! `resource` outlive whoever wrote them, as the kernel's do. What a real kernel also
//! keeps but this fake holds in memory (which driver matches a function, the enable
//! counts) survives only in a fake made with [`FakeKernel::persistent`], which keeps
//! it under `<root>/fake-kernel/`; the call log, the script and the device locks of
//! unbinds under way die with the process. Each store is one step on disk (a rename,
//! or one write in place), and a resize, which changes `config` and `resource`, is
//! written ahead: a process killed in the middle of one leaves it to be finished by
//! the next `persistent` open, as a real sysfs write finishes although its writer was
//! killed (SIGKILL waits for the write to return).

use std::{
    collections::{BTreeMap, HashMap, HashSet},
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
    /// Each unbind, probe and resize takes this long, half before its effect on the
    /// tree and half after: a process killed during the first half never made the
    /// store, one killed during the second had it done.
    pub step_delay: Option<Duration>,
    /// Drivers other than vfio-pci turn bus mastering on when they bind and off when
    /// they unbind, as `pci_set_master` in a probe and `pci_disable_device` in a
    /// remove do (off by default: tests that read the command register after a
    /// give-back expect rig's write, not a driver's).
    pub drivers_master: bool,
}

/// What the kernel keeps of a function beyond the tree, in a
/// [`FakeKernel::persistent`] fake's `fake-kernel/kept.json`.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct Kept {
    /// The driver a probe without an override binds, by address.
    native: BTreeMap<String, String>,
    enable_count: BTreeMap<String, u32>,
}

/// A resize written ahead (`fake-kernel/resize.json`): the new control register and
/// `resource`, applied whole by the next open if its writer died halfway.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct PendingResize {
    bdf: String,
    ctrl_at: u64,
    ctrl: u32,
    resource: String,
}

/// `fake-kernel/`'s files.
const KEPT: &str = "kept.json";
const PENDING_RESIZE: &str = "resize.json";

/// Replaces `path` in one rename, so a reader (or a process killed meanwhile) sees
/// the old contents or the new, never a truncated file.
fn write_whole(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::other("no file name"))?
        .to_string_lossy();
    let tmp = path.with_file_name(format!(".{name}.tmp"));
    fs::write(&tmp, bytes)?;
    fs::rename(&tmp, path)
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
    /// Where a persistent fake keeps what the kernel keeps (`None`: in memory only).
    kept: Option<PathBuf>,
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
            kept: None,
        }
    }

    /// A fake whose kernel outlives the process, for tests that kill it (the resize
    /// campaign): what a real kernel keeps beyond the tree goes to
    /// `<root>/fake-kernel/`. The first open over a tree learns each function's
    /// driver from its binding, as [`FakeKernel::new`] does; a later one reads what
    /// the first kept (a function left driverless by a killed take still matches its
    /// driver), finishes a resize its writer died in, and writes the `enable` files
    /// from the counts again.
    ///
    /// # Errors
    /// Reading or writing `fake-kernel/`, or a kept file that does not parse.
    pub fn persistent(root: &Path, drivers: &[&str]) -> io::Result<Self> {
        let mut k = Self::new(root, drivers);
        let dir = root.join("fake-kernel");
        fs::create_dir_all(&dir)?;
        match fs::read(dir.join(KEPT)) {
            Ok(bytes) => {
                let kept: Kept = serde_json::from_slice(&bytes).map_err(io::Error::other)?;
                let parse = |s: &str| s.parse::<Bdf>().map_err(io::Error::other);
                let mut native = HashMap::new();
                for (b, d) in kept.native {
                    native.insert(parse(&b)?, d);
                }
                let mut counts = HashMap::new();
                for (b, n) in kept.enable_count {
                    counts.insert(parse(&b)?, n);
                }
                k.script.lock().expect("fake script").native = native;
                *k.enable_count.lock().expect("fake enable counts") = counts;
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        k.kept = Some(dir);
        k.finish_resize()?;
        k.save()?;
        let counts = k.enable_count.lock().expect("fake enable counts").clone();
        for (bdf, n) in counts {
            write_whole(
                &k.dir(bdf).join("enable"),
                if n > 0 { b"1\n" } else { b"0\n" },
            )?;
        }
        Ok(k)
    }

    /// Writes what a persistent fake keeps (nothing for an in-memory one).
    fn save(&self) -> io::Result<()> {
        let Some(dir) = &self.kept else {
            return Ok(());
        };
        let kept = Kept {
            native: self
                .script()
                .native
                .iter()
                .map(|(b, d)| (b.to_string(), d.clone()))
                .collect(),
            enable_count: self
                .enable_count
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .iter()
                .map(|(b, n)| (b.to_string(), *n))
                .collect(),
        };
        let bytes = serde_json::to_vec(&kept).map_err(io::Error::other)?;
        write_whole(&dir.join(KEPT), &bytes)
    }

    /// Applies a resize: written ahead first when persistent, then the control
    /// register (one write in place: rig holds an flock on `config`, which a rename
    /// would leave on the old file) and `resource` (one rename).
    fn apply_resize(&self, p: &PendingResize) -> io::Result<()> {
        if let Some(dir) = &self.kept {
            let bytes = serde_json::to_vec(p).map_err(io::Error::other)?;
            write_whole(&dir.join(PENDING_RESIZE), &bytes)?;
        }
        self.finish_resize_of(p)?;
        if let Some(dir) = &self.kept {
            fs::remove_file(dir.join(PENDING_RESIZE))?;
        }
        Ok(())
    }

    fn finish_resize_of(&self, p: &PendingResize) -> io::Result<()> {
        let bdf: Bdf = p.bdf.parse().map_err(io::Error::other)?;
        let f = OpenOptions::new()
            .write(true)
            .open(self.dir(bdf).join("config"))?;
        f.write_all_at(&p.ctrl.to_le_bytes(), p.ctrl_at)?;
        write_whole(&self.dir(bdf).join("resource"), p.resource.as_bytes())
    }

    /// Finishes a resize written ahead by a process that died before it was done.
    fn finish_resize(&self) -> io::Result<()> {
        let Some(dir) = &self.kept else {
            return Ok(());
        };
        let path = dir.join(PENDING_RESIZE);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        let p: PendingResize = serde_json::from_slice(&bytes).map_err(io::Error::other)?;
        self.finish_resize_of(&p)?;
        fs::remove_file(path)
    }

    /// Runs a store's effect halfway through the scripted step delay.
    fn in_time<T>(&self, effect: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
        let delay = self.script().step_delay;
        if let Some(d) = delay {
            std::thread::sleep(d / 2);
        }
        let r = effect();
        if let Some(d) = delay {
            std::thread::sleep(d - d / 2);
        }
        r
    }

    /// A driver's own write of the bus-master bit (`drivers_master`).
    fn driver_sets_master(&self, bdf: Bdf, driver: &str, on: bool) -> io::Result<()> {
        if driver == "vfio-pci" || !self.script().drivers_master {
            return Ok(());
        }
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .open(self.dir(bdf).join("config"))?;
        let mut reg = [0u8; 2];
        f.read_exact_at(&mut reg, 4)?;
        let cmd = u16::from_le_bytes(reg);
        // PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER (pci_regs.h): a probe enables the
        // device and its mastering; a remove's pci_disable_device clears mastering.
        let new = if on { cmd | 0x6 } else { cmd & !0x4 };
        f.write_all_at(&new.to_le_bytes(), 4)
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
        self.in_time(|| match self.root.link_name(bdf, "driver") {
            Some(d) if d == driver => {
                self.driver_sets_master(bdf, driver, false)?;
                fs::remove_file(link)
            }
            _ => Err(errno(libc::ENODEV)),
        })
    }

    fn set_driver_override(&self, bdf: Bdf, driver: Option<&str>) -> io::Result<()> {
        self.log(SysfsCall::DriverOverride {
            bdf,
            driver: driver.map(ToOwned::to_owned),
        });
        write_whole(
            &self.dir(bdf).join("driver_override"),
            format!("{}\n", driver.unwrap_or("(null)")).as_bytes(),
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
        self.in_time(|| match want {
            Some(d) if script.drivers.contains(&d) => {
                self.bind_to(bdf, &d)?;
                self.driver_sets_master(bdf, &d, true)
            }
            // The kernel accepts the write and binds nothing.
            _ => Ok(()),
        })
    }

    fn resize(&self, bdf: Bdf, bar: u8, code: u32) -> io::Result<()> {
        self.log(SysfsCall::Resize { bdf, bar, code });
        if self.root.link_name(bdf, "driver").is_some() {
            return Err(errno(libc::EBUSY));
        }
        if let Some(e) = self.script().resize_errno.get(&code) {
            return Err(errno(*e));
        }
        let cfg = fs::read(self.dir(bdf).join("config"))?;
        let ctrl_at = Self::rebar_entry(&cfg, bar).ok_or_else(|| errno(libc::EINVAL))?;
        let v = u32::from_le_bytes(
            cfg[ctrl_at..ctrl_at + 4]
                .try_into()
                .map_err(io::Error::other)?,
        );
        let ctrl = (v & !0x3f00) | (code << 8);
        // The resource file: this BAR takes the new size; the kernel moves the other
        // BARs of the device (docs/hardware/pci-takeover.md, "Resizable BAR": the
        // R9700's doorbell BAR moved), modelled by shifting every other assigned
        // region up by 256 MiB.
        let res = self.root.read_resources(bdf).map_err(io::Error::other)?;
        let resource: String = res
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
        let pending = PendingResize {
            bdf: bdf.to_string(),
            ctrl_at: u64::try_from(ctrl_at).map_err(io::Error::other)?,
            ctrl,
            resource,
        };
        self.in_time(|| self.apply_resize(&pending))
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
        let on = *n > 0;
        drop(counts);
        // The count first: a process killed between the two leaves the file to be
        // written from it by the next persistent open.
        self.save()?;
        write_whole(
            &self.dir(bdf).join("enable"),
            if on { b"1\n" } else { b"0\n" },
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
