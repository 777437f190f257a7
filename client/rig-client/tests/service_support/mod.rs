//! What the service end-to-end tests share (rig-client's `tests/service.rs`, and
//! rigctl's `tests/service.rs`, which includes this file by path): rigd's service on a
//! temp socket over a fake sysfs tree, with a pci.ids of its own.

#![allow(dead_code, reason = "each test file uses part of this")]

use std::{path::Path, sync::Arc, time::Duration};

use rigd::{
    config::Config,
    rig::Rig,
    sys::sysfs::FakeKernel,
    testing::{FakeDevice, FakeSysfs, Serving},
};

const PCI_IDS: &str = "\
10de  NVIDIA Corporation
\t2335  GH100 [H200 SXM 141GB]
\t\t10de 18bf  H200 SXM 141GB
1022  Advanced Micro Devices, Inc. [AMD]
\t1483  Starship/Matisse GPP Bridge
C 03  Display controller
\t02  3D controller
C 06  Bridge
\t04  PCI bridge
\t\t00  Normal decode
";

/// Root port (8 GT/s x16) → switch upstream port (8 GT/s x16) → downstream port
/// (32 GT/s x16) → an H200-like GPU at 32 GT/s x16: the R9700's topology, a fast link
/// behind a PCIe 3.0 root port (docs/hardware/pci-takeover.md, "Links").
pub fn tree(root: &Path) -> FakeSysfs {
    let fake = FakeSysfs::new(root).expect("fake sysfs");
    let port = |bdf: &str, ptype, cap, sta| {
        FakeDevice::new(bdf, 0x1022, 0x1483, 0x060400)
            .bridge()
            .with_cap_pointer(0x40)
            .with_express(0x40, 0, ptype, cap, sta)
            .with_driver("pcieport")
    };
    fake.add(&port("0000:00:01.1", 4, (3, 16), (3, 16)))
        .expect("root port");
    fake.add(&port("0000:01:00.0", 5, (5, 16), (3, 16)).under("0000:00:01.1"))
        .expect("upstream port");
    fake.add(&port("0000:02:00.0", 6, (5, 16), (5, 16)).under("0000:01:00.0"))
        .expect("downstream port");
    let gpu = FakeDevice::new("0000:03:00.0", 0x10de, 0x2335, 0x030200)
        .under("0000:02:00.0")
        .with_bytes(0x2c, &[0xde, 0x10, 0xbf, 0x18])
        .with_bar64(0, 0x1040_0200_0000, 16 << 20, true)
        .with_bar64(2, 0x1000_0000_0000, 256 << 30, true)
        .with_cap_pointer(0x60)
        .with_express(0x60, 0xb0, 0, (5, 16), (5, 16))
        .with_bytes(0xb0, &[0x11, 0x00, 0x08, 0x80])
        .with_bytes(0xb4, &0x00b9_0000u32.to_le_bytes())
        .with_bytes(0xb8, &0x00ba_0000u32.to_le_bytes())
        // Resizable BAR at 0x100: BAR2 supports 1 GiB..256 GiB, current 256 GiB.
        .with_bytes(0x100, &0x0001_0015u32.to_le_bytes())
        .with_bytes(
            0x104,
            &((10..=18).map(|n| 1u32 << (n + 4)).sum::<u32>()).to_le_bytes(),
        )
        .with_bytes(0x108, &(2u32 | (1 << 5) | (18 << 8)).to_le_bytes())
        .with_driver("nvidia")
        .in_group(7)
        .with_attr("reset_method", "flr bus")
        .with_attr("current_link_speed", "32.0 GT/s PCIe")
        .with_attr("current_link_width", "16");
    let mut gpu = gpu;
    gpu.resize_files = vec![2];
    fake.add(&gpu).expect("gpu");
    // A function whose capability chain loops.
    fake.add(
        &FakeDevice::new("0000:00:02.0", 0x1022, 0x1483, 0x060400)
            .with_cap_pointer(0x40)
            .with_bytes(0x40, &[0x01, 0x50])
            .with_bytes(0x50, &[0x05, 0x40]),
    )
    .expect("looping function");
    fake
}

/// rigd's service on a socket in a temp dir, over a fake kernel and sysfs tree.
pub struct Server {
    _dir: tempfile::TempDir,
    pub socket: std::path::PathBuf,
    serving: Serving,
}

impl Server {
    pub async fn start(build: impl FnOnce(&Path) -> FakeSysfs) -> Self {
        Self::start_scripted(build, |_| {}).await
    }

    /// As `start`, with the fake kernel's script set by `script` first.
    pub async fn start_scripted(
        build: impl FnOnce(&Path) -> FakeSysfs,
        script: impl FnOnce(&mut rigd::sys::sysfs::FakeScript),
    ) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let fake = build(&dir.path().join("sys"));
        let ids = dir.path().join("pci.ids");
        std::fs::write(&ids, PCI_IDS).expect("pci.ids");
        let mut config = Config::default();
        config.paths.sysfs = fake.root().to_owned();
        config.paths.pci_ids = ids;
        config.paths.state_dir = dir.path().join("state");
        config.paths.proc = dir.path().join("proc");
        config.paths.dev = dir.path().join("dev");
        config.take.allow_sysfs_mode = true;
        let socket = dir.path().join("rigd.sock");
        let kernel = FakeKernel::new(fake.root(), &["nvidia", "pcieport", "vfio-pci"]);
        script(&mut kernel.script.lock().expect("script"));
        let (rig, warnings) = Rig::with_sysfs(&config, Arc::new(kernel));
        assert!(warnings.is_empty(), "{warnings:?}");
        let serving = Serving::start(Arc::new(rig), &socket, None);
        Self {
            _dir: dir,
            socket,
            serving,
        }
    }

    /// A file of a fake function's sysfs directory.
    pub fn device_file(&self, bdf: &str, name: &str) -> std::path::PathBuf {
        self._dir
            .path()
            .join("sys/bus/pci/devices")
            .join(bdf)
            .join(name)
    }

    pub async fn stop(self) {
        // rigd gives open connections 5 s after the signal (service::GRACE).
        self.serving
            .stop(Duration::from_secs(10))
            .await
            .expect("server stops within 10 s")
            .expect("server task");
        assert!(!self.socket.exists(), "socket removed at shutdown");
    }
}
