//! rigctl over rigd's service on a temp socket and a fake sysfs tree (rig-client's
//! `service_support` fixture, included by path): what the library returns and what
//! rigctl prints for the same state agree.

#[path = "../../rig-client/tests/service_support/mod.rs"]
mod service_support;

use std::{path::Path, time::Duration};

use rig_client::{Client, Mode};
use service_support::{Server, tree};

/// rigctl against the test's socket, from a blocking task: (exit status, stdout).
async fn rigctl(socket: &Path, args: &[&str]) -> (std::process::ExitStatus, String) {
    let socket = socket.to_owned();
    let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_rigctl"))
            .arg("--socket")
            .arg(&socket)
            .args(&args)
            .output()
            .expect("run rigctl")
    })
    .await
    .expect("join");
    (
        out.status,
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[tokio::test]
async fn an_unbind_that_never_returns_fails_once_is_shown_stuck_and_gets_no_second_worker() {
    let server = Server::start_scripted(tree, |s| {
        s.unbind_hangs = Some(("nvidia".into(), Duration::from_secs(4)));
    })
    .await;
    let mut client = Client::connect(&server.socket).await.expect("connect");
    let req = rig_client::DetachRequest {
        bdf: "03:00.0".into(),
        mode: Some(Mode::Sysfs),
        timeout_s: Some(1),
        ..Default::default()
    };

    let first = client
        .detach(&req, &mut |_| {})
        .await
        .expect_err("times out");
    let start = std::time::Instant::now();
    let second = client.detach(&req, &mut |_| {}).await.expect_err("stuck");
    let refused_in = start.elapsed();
    let others = client.list_devices(false).await.expect("still serving");
    let status = client.status().await.expect("status");
    let socket = server.socket.clone();
    let shown = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_rigctl"))
            .arg("--socket")
            .arg(&socket)
            .arg("status")
            .output()
            .expect("run rigctl")
    })
    .await
    .expect("join");

    assert_eq!(
        first.error_info().map(|i| i.reason.as_str()),
        Some("UNBIND_TIMEOUT"),
        "{first}"
    );
    assert!(
        first.to_string().contains(
            "Unbinding 0000:03:00.0 from nvidia did not return within 1 s: a process may still hold the device"
        ),
        "{first}"
    );
    let info = second.error_info().expect("details");
    assert_eq!(
        (info.reason.as_str(), info.device.as_deref()),
        ("UNBIND_STUCK", Some("0000:03:00.0"))
    );
    assert!(refused_in < Duration::from_millis(500), "{refused_in:?}");
    assert!(!others.devices.is_empty());
    assert_eq!(status.stuck_unbinds.len(), 1, "{status:?}");
    assert_eq!(
        (
            status.stuck_unbinds[0].bdf.as_str(),
            status.stuck_unbinds[0].driver.as_str()
        ),
        ("0000:03:00.0", "nvidia")
    );
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(
        text.contains("0000:03:00.0  unbind from nvidia stuck in the kernel for"),
        "{text}"
    );
    server.stop().await;
}

#[tokio::test]
async fn eight_gpus_behind_switches_are_listed_with_numa_placement_and_shared_uplinks() {
    use rigd::testing::hosts::{NODE_CPUS, SWITCH_BUSES, eight_gpus, eight_gpus_behind_switches};
    let server = Server::start(|root| eight_gpus_behind_switches(root).expect("host")).await;
    let mut client = Client::connect(&server.socket).await.expect("connect");
    let listing = client.list_devices(false).await.expect("list");
    assert!(listing.problems.is_empty(), "{:?}", listing.problems);
    // 4 × (root port, upstream port, 3 downstream ports, 2 GPUs, a NIC).
    assert_eq!(listing.devices.len(), 32);
    let gpus: Vec<_> = listing.devices.iter().take_while(|d| d.is_gpu()).collect();
    let bdfs: Vec<_> = gpus.iter().map(|d| d.bdf.clone()).collect();
    assert_eq!(bdfs, eight_gpus(), "the 8 GPUs come first, by address");
    for (i, g) in gpus.iter().enumerate() {
        let (switch, node) = (i / 2, i / 4);
        let bus = SWITCH_BUSES[switch];
        let partner = &bdfs[i ^ 1];
        assert_eq!(g.sysfs.numa_node, Some(i32::try_from(node).expect("node")));
        assert_eq!(g.sysfs.local_cpulist.as_deref(), Some(NODE_CPUS[node]));
        assert_eq!(
            g.sysfs.upstream,
            [
                format!("0000:{:02x}:{:02x}.0", bus + 2, i % 2),
                format!("0000:{:02x}:00.0", bus + 1),
                format!("0000:{bus:02x}:01.0"),
            ]
        );
        // The switch's upstream port and the root port are shared with the partner
        // GPU only: the NIC below the same switch is not a GPU.
        let shared: Vec<_> = g
            .link
            .shared
            .iter()
            .map(|s| (s.hop, s.bdf.clone(), s.with.clone()))
            .collect();
        assert_eq!(
            shared,
            [
                (2, g.sysfs.upstream[1].clone(), vec![partner.clone()]),
                (3, g.sysfs.upstream[2].clone(), vec![partner.clone()]),
            ],
            "{}",
            g.bdf
        );
        // 32 GT/s x16 = 63.02 GB/s; 16 GT/s x16 = 31.51 GB/s (128b/130b).
        let (alone, contended) = if switch == 3 {
            (31.508, 15.754)
        } else {
            (63.015, 31.508)
        };
        let b = g.link.bottleneck_gbytes_per_s.expect("bottleneck");
        assert!((b - alone).abs() < 0.01, "{}: {b}", g.bdf);
        let c = g.link.contended_gbytes_per_s.expect("contended");
        assert!((c - contended).abs() < 0.01, "{}: {c}", g.bdf);
        assert_eq!(g.link.limited_by.is_some(), switch == 3, "{}", g.bdf);
    }
    // A NIC shares the switch too, but only GPUs are given shared hops.
    let nic = listing
        .devices
        .iter()
        .find(|d| d.vendor_id == 0x15b3)
        .expect("a NIC");
    assert!(nic.link.shared.is_empty() && nic.link.contended_gbytes_per_s.is_none());
    // `show` reads the other GPUs' paths itself, and agrees with the listing.
    for g in &gpus {
        let shown = client.device(&g.bdf).await.expect("show");
        assert_eq!(shown.link.shared, g.link.shared, "{}", g.bdf);
        assert_eq!(
            shown.link.contended_gbytes_per_s,
            g.link.contended_gbytes_per_s
        );
    }
    // rigctl says it in words, in the table.
    let (status, text) = rigctl(&server.socket, &["list", "--gpus", "--table"]).await;
    assert!(status.success());
    assert!(
        text.contains("shares 0000:16:00.0 with 0000:19:00.0: 31.51 GB/s when all copy"),
        "{text}"
    );
    let (status, text) = rigctl(&server.socket, &["show", "0000:c9:00.0"]).await;
    assert!(status.success());
    assert!(
        text.contains("↑ 0000:c6:00.0 with 0000:c8:00.0 (15.75 GB/s each when all copy)"),
        "{text}"
    );
    assert!(
        text.contains("15.75 GB/s when every GPU sharing these hops copies"),
        "{text}"
    );
    server.stop().await;
}
