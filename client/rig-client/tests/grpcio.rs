//! A stock gRPC client: Python's `grpcio`, with default channel options, against rigd's
//! service on a temp socket over a fake sysfs tree. It finds every service and method
//! by reflection alone (no generated stubs), calls each read-only one, lists services
//! and methods as `grpcurl list`/`describe` would, and reads the typed error details of
//! refusals. The Python side is `grpcio/client.py`; what it checks is written there.
//!
//! Needs a Python with pinned `grpcio`, `grpcio-reflection` and `grpcio-status`:
//! `scripts/grpcio-test.sh` makes one (a venv under the cache) and runs this test with
//! `RIG_GRPCIO_PYTHON` set. Ignored in a plain `cargo test`; asked for without that
//! Python, it fails rather than skips.

use std::{path::Path, process::Command, sync::Arc, time::Duration};

use rigd::{
    config::Config,
    dma::{Backing, PoolMode, PoolSpec},
    rig::Rig,
    sys::sysfs::FakeKernel,
    testing::{FakeDevice, FakeSysfs, Serving},
};

const PCI_IDS: &str = "\
10de  NVIDIA Corporation
\t2335  GH100 [H200 SXM 141GB]
1022  Advanced Micro Devices, Inc. [AMD]
\t1483  Starship/Matisse GPP Bridge
C 03  Display controller
\t02  3D controller
C 06  Bridge
\t04  PCI bridge
";

/// A root port and an H200-like GPU below it, bound to nvidia.
fn tree(root: &Path) -> FakeSysfs {
    let fake = FakeSysfs::new(root).expect("fake sysfs");
    fake.add(
        &FakeDevice::new("0000:00:01.1", 0x1022, 0x1483, 0x060400)
            .bridge()
            .with_cap_pointer(0x40)
            .with_express(0x40, 0, 4, (5, 16), (5, 16))
            .with_driver("pcieport"),
    )
    .expect("root port");
    fake.add(
        &FakeDevice::new("0000:01:00.0", 0x10de, 0x2335, 0x030200)
            .under("0000:00:01.1")
            .with_bar64(0, 0x1040_0200_0000, 16 << 20, true)
            .with_bar64(2, 0x1000_0000_0000, 256 << 30, true)
            .with_cap_pointer(0x60)
            .with_express(0x60, 0, 0, (5, 16), (5, 16))
            .with_driver("nvidia")
            .in_group(7),
    )
    .expect("gpu");
    fake
}

fn python() -> String {
    std::env::var("RIG_GRPCIO_PYTHON").unwrap_or_else(|_| {
        panic!(
            "RIG_GRPCIO_PYTHON is not set: run scripts/grpcio-test.sh, which makes a Python \
             with grpcio and runs this test"
        )
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Python grpcio: scripts/grpcio-test.sh runs it"]
async fn python_grpcio_with_default_options_calls_every_read_only_rpc_and_reads_error_details() {
    let python = python();
    let dir = tempfile::tempdir().expect("tempdir");
    let fake = tree(&dir.path().join("sys"));
    let ids = dir.path().join("pci.ids");
    std::fs::write(&ids, PCI_IDS).expect("pci.ids");
    let mut config = Config::default();
    config.paths.sysfs = fake.root().to_owned();
    config.paths.pci_ids = ids;
    config.paths.state_dir = dir.path().join("state");
    config.paths.proc = dir.path().join("proc");
    config.paths.dev = dir.path().join("dev");
    let socket = dir.path().join("rigd.sock");
    let kernel = FakeKernel::new(fake.root(), &["nvidia", "pcieport", "vfio-pci"]);
    let (rig, warnings) = Rig::with_sysfs(&config, Arc::new(kernel));
    assert!(warnings.is_empty(), "{warnings:?}");
    let rig = Arc::new(rig);
    // A host pool, so Dma.Status has a pool to describe.
    let pool = rig
        .dma()
        .create(
            "host",
            PoolSpec {
                mode: PoolMode::Host,
                blocks: 2,
                backing: Backing::Shmem,
                pin_threads: 1,
            },
        )
        .expect("pool");
    assert!(pool.wait_pinned(Duration::from_secs(20)), "pool pinned");
    let serving = Serving::start(Arc::clone(&rig), &socket, None);

    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/grpcio/client.py");
    let target = format!("unix://{}", socket.display());
    let run = tokio::task::spawn_blocking(move || {
        Command::new(python)
            .arg(script)
            .arg(target)
            .output()
            .expect("start the Python client")
    });
    // TIMEOUT: the client makes about 20 calls on a local socket; it starts in ~0.5 s
    // (grpcio's import) and finishes well inside 60 s on a loaded 2-core machine.
    let out = tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("the Python client finishes within 60 s")
        .expect("client task");
    let stdout = String::from_utf8_lossy(&out.stdout);
    print!("{stdout}");
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success(),
        "the Python client failed: {}",
        out.status
    );
    // It says what it checked; a run that checked nothing is a failure too.
    let summary = stdout
        .lines()
        .find_map(|l| l.strip_prefix("grpcio: "))
        .expect("a summary line");
    assert!(summary.ends_with(" passed, 0 failed"), "{summary}");

    serving
        .stop(Duration::from_secs(10))
        .await
        .expect("server stops within 10 s")
        .expect("server task");
}
