//! `rigctl topo` over the fake 8-GPU host (`rigd::testing::hosts`): rigd joins the
//! fake RM's NVLink status and P2P caps with the sysfs paths, and the built rigctl
//! draws the matrix as `nvidia-smi topo -m` would: NV18 between every pair when the
//! GPUs hang off four NVSwitches, PIX / NODE / SYS when P2P runs over PCIe only.

use std::{path::Path, process::Command, sync::Arc};

use rig_client::{
    Client,
    topo::{P2pCap, P2pStatus, PciePath, Topology},
};
use rigd::{
    config::Config,
    rig::Rig,
    sys::sysfs::FakeKernel,
    testing::{
        Serving,
        hosts::{eight_gpus, eight_gpus_behind_switches, eight_gpus_rm},
    },
};

struct Host {
    _dir: tempfile::TempDir,
    socket: std::path::PathBuf,
    _serving: Serving,
}

async fn start(nvlink: bool) -> Host {
    let dir = tempfile::tempdir().expect("tempdir");
    let fake = eight_gpus_behind_switches(&dir.path().join("sys")).expect("host");
    let mut config = Config::default();
    config.paths.sysfs = fake.root().to_owned();
    config.paths.pci_ids = dir.path().join("pci.ids");
    std::fs::write(&config.paths.pci_ids, "").expect("pci.ids");
    config.paths.state_dir = dir.path().join("state");
    config.paths.proc = dir.path().join("proc");
    config.paths.dev = dir.path().join("dev");
    let kernel = FakeKernel::new(fake.root(), &["nvidia", "pcieport", "mlx5_core"]);
    let (rig, _) = Rig::with_sysfs(&config, Arc::new(kernel));
    rig.set_peer_source(Arc::new(eight_gpus_rm(nvlink)));
    let socket = dir.path().join("rigd.sock");
    let serving = Serving::start(Arc::new(rig), &socket, None);
    Host {
        _dir: dir,
        socket,
        _serving: serving,
    }
}

async fn topology(h: &Host) -> Topology {
    let mut c = Client::connect(&h.socket).await.expect("connect");
    c.topology().await.expect("topology")
}

fn rigctl(socket: &Path, args: &[&str]) -> String {
    let out = tokio::task::block_in_place(|| {
        Command::new(env!("CARGO_BIN_EXE_rigctl"))
            .arg("--socket")
            .arg(socket)
            .args(args)
            .output()
            .expect("rigctl runs")
    });
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// The matrix rows of `rigctl topo`'s text: the cells after each "GPUk".
fn matrix_rows(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .take_while(|l| !l.is_empty())
        .skip(1)
        .map(|l| {
            l.split_whitespace()
                .skip(1)
                .take(8)
                .map(str::to_owned)
                .collect()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn gpus_on_nvswitches_reach_each_other_by_nvlink_18() {
    let h = start(true).await;
    let t = topology(&h).await;
    assert_eq!(t.driver.as_deref(), Some("580"));
    assert!(t.problems.is_empty(), "{:?}", t.problems);
    let gpus = eight_gpus();
    assert_eq!(
        t.gpus.iter().map(|g| g.bdf.clone()).collect::<Vec<_>>(),
        gpus
    );
    assert_eq!(t.pairs.len(), 64);
    for g in &t.gpus {
        let links = g.nvlink.as_ref().expect("read");
        assert_eq!(links.len(), 18, "{}", g.bdf);
        assert!(links.iter().all(|l| l.is_active()));
        assert_eq!(links[0].version.as_deref(), Some("4.0"));
    }
    let p = t.pair(&gpus[0], &gpus[7]).expect("pair");
    assert_eq!(
        (p.pcie, p.nvlinks, p.cell()),
        (PciePath::Sys, 18, "NV18".into())
    );
    let c = p.p2p.as_ref().expect("caps");
    assert!(c.read && c.write && c.nvlink && c.atomics && !c.pci);
    let me = t.pair(&gpus[3], &gpus[3]).expect("itself");
    assert_eq!(me.cell(), "X");
    assert!(me.p2p.as_ref().expect("loopback").loopback);

    let text = rigctl(&h.socket, &["topo"]);
    let rows = matrix_rows(&text);
    assert_eq!(rows.len(), 8, "{text}");
    for (i, r) in rows.iter().enumerate() {
        for (j, cell) in r.iter().enumerate() {
            assert_eq!(
                cell,
                if i == j { "X" } else { "NV18" },
                "GPU{i} GPU{j}:\n{text}"
            );
        }
    }
    assert!(
        text.contains("GPU0: 18 of 18 enabled links active NVLink 4.0"),
        "{text}"
    );
    assert!(text.contains("5 to NVSwitch 0000:05:00.0"), "{text}");
    // The first switch's two GPUs share its uplink and the root port.
    assert!(text.contains("GPU0: 0000:16:00.0 with GPU1"), "{text}");

    let json: serde_json::Value =
        serde_json::from_str(&rigctl(&h.socket, &["topo", "--json"])).expect("one document");
    // serde_json's default float parsing need not round-trip the last digit: the
    // floats (shared hops' bandwidths) are compared apart, the rest exactly.
    let mut ours = serde_json::to_value(&t).expect("serialise");
    let mut theirs = json.clone();
    for v in [&mut ours, &mut theirs] {
        for g in v["gpus"].as_array_mut().expect("gpus") {
            let g = g.as_object_mut().expect("a gpu");
            g.remove("shared");
            g.remove("contended_gbytes_per_s");
        }
    }
    assert_eq!(theirs, ours, "--json is the topology");
    let each = json["gpus"][0]["shared"][0]["gbytes_per_s_each"]
        .as_f64()
        .expect("a number");
    assert!((each - 31.5077).abs() < 1e-3, "{each}");
}

#[tokio::test(flavor = "multi_thread")]
async fn without_nvlink_p2p_runs_over_pcie_within_a_switch_only() {
    let h = start(false).await;
    let t = topology(&h).await;
    assert!(t.problems.is_empty(), "{:?}", t.problems);
    let gpus = eight_gpus();
    assert!(
        t.gpus
            .iter()
            .all(|g| g.nvlink.as_ref().is_some_and(Vec::is_empty))
    );
    let cell = |a: usize, b: usize| t.pair(&gpus[a], &gpus[b]).expect("pair").cell();
    assert_eq!(cell(0, 1), "PIX", "one switch");
    assert_eq!(cell(0, 2), "NODE", "one socket, two switches");
    assert_eq!(cell(0, 4), "SYS", "two sockets");
    let across = t
        .pair(&gpus[0], &gpus[4])
        .expect("pair")
        .p2p
        .as_ref()
        .expect("caps");
    assert!(!across.read && !across.write);
    assert_eq!(
        across.status_of(P2pCap::Read),
        Some(P2pStatus::IohTopologyNotSupported)
    );
    let within = t
        .pair(&gpus[0], &gpus[1])
        .expect("pair")
        .p2p
        .as_ref()
        .expect("caps");
    assert!(within.read && within.write && within.pci && !within.nvlink);

    let text = rigctl(&h.socket, &["topo"]);
    let rows = matrix_rows(&text);
    assert_eq!(
        rows[0],
        ["X", "PIX", "NODE", "NODE", "SYS", "SYS", "SYS", "SYS"],
        "{text}"
    );
    assert_eq!(
        rows[5],
        ["SYS", "SYS", "SYS", "SYS", "PIX", "X", "NODE", "NODE"],
        "{text}"
    );
    assert!(text.contains("GPU0: no links enabled"), "{text}");
    assert!(text.contains("read tns, write tns"), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_driver_the_pcie_matrix_remains_and_the_problem_is_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fake = eight_gpus_behind_switches(&dir.path().join("sys")).expect("host");
    let mut config = Config::default();
    config.paths.sysfs = fake.root().to_owned();
    config.paths.pci_ids = dir.path().join("none");
    config.paths.dev = dir.path().join("dev");
    config.paths.state_dir = dir.path().join("state");
    let kernel = FakeKernel::new(fake.root(), &["nvidia", "pcieport"]);
    let (rig, _) = Rig::with_sysfs(&config, Arc::new(kernel));
    let t = rig
        .topology()
        .expect("topology")
        .into_topology(rigd::service::status::error_line);
    assert_eq!(t.pairs.len(), 64);
    assert!(t.pairs.iter().all(|p| p.p2p.is_none()));
    assert!(
        t.problems.iter().any(|p| p
            .starts_with("the NVIDIA RM could not be asked: failed to open")
            && p.contains("nvidiactl")),
        "{:?}",
        t.problems
    );
    assert_eq!(
        t.pair(&eight_gpus()[2], &eight_gpus()[3])
            .expect("pair")
            .cell(),
        "PIX"
    );
}
