//! End to end: rigd's service on a temp socket over a fake sysfs tree, driven through
//! the client library, as rigctl drives it. What rigctl prints over the same fixture
//! (`service_support`) is checked in rigctl's tests/service.rs.

mod service_support;

use std::{path::Path, time::Duration};

use rig_client::{ArgError, CapDetail, Client, ClientError, Mode};
use rig_proto::v1 as pb;
use rigd::{service, testing::FakeDevice};
use service_support::{Server, tree};
use tonic::Code;

#[tokio::test]
async fn list_puts_gpus_first_with_names_identity_and_bottleneck() {
    let server = Server::start(tree).await;
    let mut client = Client::connect(&server.socket).await.expect("connect");
    assert_eq!(client.version().await.expect("version").api, 1);
    let listing = client.list_devices(false).await.expect("list");
    let bdfs: Vec<_> = listing.devices.iter().map(|d| d.bdf.as_str()).collect();
    assert_eq!(
        bdfs,
        [
            "0000:03:00.0",
            "0000:00:01.1",
            "0000:00:02.0",
            "0000:01:00.0",
            "0000:02:00.0"
        ]
    );
    let gpu = &listing.devices[0];
    assert_eq!(gpu.names.vendor.as_deref(), Some("NVIDIA Corporation"));
    assert_eq!(gpu.names.device.as_deref(), Some("GH100 [H200 SXM 141GB]"));
    assert_eq!(gpu.names.subsystem.as_deref(), Some("H200 SXM 141GB"));
    assert_eq!(gpu.names.class.as_deref(), Some("3D controller"));
    let id = gpu.gpu.as_ref().expect("a GPU");
    assert_eq!((id.chip.as_str(), id.family.as_str()), ("GH100", "Hopper"));
    // 32 GT/s x16 below, PCIe 3.0 x16 above: host copies stop at 15.75 GB/s.
    let limit = gpu.link.limited_by.as_deref().expect("bottleneck upstream");
    assert!(limit.contains("8GT/s x16 = 15.75 GB/s"), "{limit}");
    let g = gpu.link.bottleneck_gbytes_per_s.expect("bottleneck");
    assert!((g - 15.754).abs() < 0.01, "{g}");
    assert_eq!(listing.devices.len(), 5);
    let only_gpus = client.list_devices(true).await.expect("gpus");
    assert_eq!(only_gpus.devices.len(), 1);
    server.stop().await;
}

#[tokio::test]
async fn show_decodes_bars_msix_rebar_and_sysfs_facts() {
    let server = Server::start(tree).await;
    let mut client = Client::connect(&server.socket).await.expect("connect");
    let d = client.device("03:00.0").await.expect("show");
    assert_eq!(d.bdf, "0000:03:00.0");
    let sizes: Vec<_> = d
        .bars
        .iter()
        .map(|b| (b.index, b.size, b.is_64bit, b.prefetchable))
        .collect();
    assert_eq!(
        sizes,
        [(0, 16 << 20, true, true), (2, 256 << 30, true, true)]
    );
    let bar2 = &d.bars[1];
    assert_eq!(bar2.address, 0x1000_0000_0000);
    assert_eq!(bar2.resizable_sizes.first(), Some(&(1 << 30)));
    assert_eq!(bar2.resizable_sizes.last(), Some(&(256 << 30)));
    assert_eq!(bar2.resizable_current, Some(256 << 30));
    assert!(bar2.resize_file);
    let msix = d
        .capabilities
        .iter()
        .find_map(|c| match &c.detail {
            Some(CapDetail::MsiX {
                table_size,
                table_bar,
                table_offset,
                ..
            }) => Some((*table_size, *table_bar, *table_offset)),
            _ => None,
        })
        .expect("MSI-X");
    assert_eq!(msix, (9, 0, 0xb9_0000));
    let e = d.express().expect("PCIe");
    assert_eq!(e.port_type, "Endpoint");
    assert_eq!(
        e.link_status.as_ref().map(|l| (l.speed.as_str(), l.width)),
        Some(("32GT/s", 16))
    );
    assert_eq!(d.sysfs.driver.as_deref(), Some("nvidia"));
    assert_eq!(d.sysfs.iommu_group.as_deref(), Some("7"));
    assert_eq!(d.sysfs.iommu_group_members, ["0000:03:00.0"]);
    assert_eq!(d.sysfs.reset_methods, ["flr", "bus"]);
    assert_eq!(
        d.sysfs.upstream,
        ["0000:02:00.0", "0000:01:00.0", "0000:00:01.1"]
    );
    assert_eq!(d.sysfs.driver_override, None);
    assert_eq!(d.config.len(), 4096);
    server.stop().await;
}

#[tokio::test]
async fn bad_requests_get_one_line_each_and_the_daemon_keeps_serving() {
    let server = Server::start(|root| {
        let fake = tree(root);
        // A config file cut short, and a function with no attributes but config.
        let short = fake
            .add(&FakeDevice::new("0000:00:1f.0", 0x8086, 0x1234, 0x060100))
            .expect("add");
        std::fs::write(short.join("config"), [0u8; 10]).expect("truncate");
        let bare = fake
            .add(&FakeDevice::new("0000:00:1e.0", 0x8086, 0x2448, 0x060401))
            .expect("add");
        for f in [
            "resource",
            "enable",
            "numa_node",
            "local_cpulist",
            "power_state",
            "driver_override",
        ] {
            std::fs::remove_file(bare.join(f)).expect("remove");
        }
        fake
    })
    .await;
    let mut client = Client::connect(&server.socket).await.expect("connect");
    // Each with its typed details too: the reason, and the device where it is one.
    let cases = [
        (
            "zz:00.0",
            Code::InvalidArgument,
            "is not a PCI address",
            ("BAD_ADDRESS", None),
        ),
        (
            "0000:00:20.0",
            Code::InvalidArgument,
            "device number above 1f",
            ("BAD_ADDRESS", None),
        ),
        (
            "0000:42:00.0",
            Code::NotFound,
            "No PCI function 0000:42:00.0",
            ("NO_DEVICE", Some("0000:42:00.0")),
        ),
        (
            "00:1f.0",
            Code::DataLoss,
            "truncated: 10 bytes",
            ("SHORT_CONFIG", Some("0000:00:1f.0")),
        ),
    ];
    for (bdf, want_code, want_text, (reason, device)) in cases {
        let err = client.device(bdf).await.expect_err(bdf);
        let ClientError::Rpc { code, message, .. } = &err else {
            panic!("{bdf}: {err:?}")
        };
        assert_eq!(*code, want_code, "{bdf}: {message}");
        assert!(message.contains(want_text), "{bdf}: {message}");
        assert!(!message.contains('\n'), "{bdf}: {message}");
        let info = err.error_info().expect("rig's error details");
        assert_eq!(info.reason, reason, "{bdf}: {message}");
        assert_eq!(info.device.as_deref(), device, "{bdf}: {message}");
    }
    // A function with missing sysfs files still decodes, and says what was missing.
    let bare = client.device("00:1e.0").await.expect("bare function");
    assert!(
        bare.sysfs.missing.contains(&"numa_node".to_owned()),
        "{:?}",
        bare.sysfs.missing
    );
    assert!(bare.bars.is_empty());
    // A looping chain is reported, not followed.
    let looped = client.device("00:02.0").await.expect("looping chain");
    assert_eq!(looped.capabilities.len(), 2);
    assert!(
        looped.chain_problems[0].contains("loops back to 0x40"),
        "{:?}",
        looped.chain_problems
    );
    // The listing names the truncated function as a problem and lists the rest.
    let listing = client.list_devices(false).await.expect("list after errors");
    assert_eq!(listing.devices.len(), 6);
    assert_eq!(listing.problems.len(), 1);
    assert!(
        listing.problems[0].contains("0000:00:1f.0"),
        "{:?}",
        listing.problems
    );
    server.stop().await;
}

#[tokio::test]
async fn connect_errors_say_what_to_do() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("nothing.sock");
    let e = Client::connect(&missing).await.expect_err("no daemon");
    assert!(matches!(e, ClientError::NoDaemon { .. }), "{e:?}");
    assert!(e.to_string().contains("systemctl start rigd"), "{e}");

    let stale = dir.path().join("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).expect("bind"));
    let e = Client::connect(&stale).await.expect_err("stale");
    assert!(matches!(e, ClientError::NotListening { .. }), "{e:?}");
    assert!(e.to_string().contains("stale socket"), "{e}");
}

#[tokio::test]
async fn a_second_daemon_refuses_a_live_socket() {
    let server = Server::start(tree).await;
    let e = service::socket::bind(&server.socket, None).expect_err("live");
    assert!(
        e.to_string().contains("Another rigd is already serving"),
        "{e}"
    );
    let mut client = Client::connect(&server.socket)
        .await
        .expect("still serving");
    client.list_devices(true).await.expect("list");
    server.stop().await;
}

#[tokio::test]
async fn detach_streams_steps_status_shows_the_device_and_attach_gives_it_back() {
    let server = Server::start(tree).await;
    let mut client = Client::connect(&server.socket).await.expect("connect");
    let req = rig_client::DetachRequest {
        bdf: "03:00.0".into(),
        mode: Some(Mode::Sysfs),
        ..Default::default()
    };
    let mut seen = Vec::new();
    let out = client
        .detach(&req, &mut |s| seen.push(s.text.clone()))
        .await
        .expect("detach");
    assert!(
        seen.iter().any(|s| s == "unbind 0000:03:00.0 from nvidia"),
        "{seen:?}"
    );
    assert_eq!(out.summary, "0000:03:00.0 held in sysfs mode (was nvidia)");
    assert_eq!(out.steps.len(), seen.len());
    let held = out.device.expect("held device");
    assert_eq!(held.bars.len(), 2);

    let status = client.status().await.expect("status");
    assert_eq!(status.devices.len(), 1);
    assert_eq!(status.devices[0].original_driver.as_deref(), Some("nvidia"));
    let d = client.device("03:00.0").await.expect("show");
    assert_eq!(d.sysfs.driver, None);

    // Taking it twice gets one clear line and changes nothing; an unknown mode is
    // refused by the client with one clear line before anything is sent (a number
    // rigd does not know is refused by rigd: see `unknown_enum_numbers_...`).
    let e = client.detach(&req, &mut |_| {}).await.expect_err("twice");
    assert!(
        e.to_string().contains("already held by rig (sysfs mode)"),
        "{e}"
    );
    let info = e.error_info().expect("details on a streamed error");
    assert_eq!(info.reason, "ALREADY_HELD");
    assert_eq!(info.device.as_deref(), Some("0000:03:00.0"));
    let e = ClientError::from("magic".parse::<Mode>().expect_err("bad mode"));
    assert!(
        matches!(&e, ClientError::Argument(ArgError::Mode(m)) if m == "magic"),
        "{e:?}"
    );
    assert_eq!(e.to_string(), "unknown mode `magic` (vfio or sysfs)");
    let status = client.status().await.expect("status");
    assert_eq!(status.devices.len(), 1);
    assert_eq!(status.devices[0].mode, Some(Mode::Sysfs));

    let out = client
        .attach("0000:03:00.0", &mut |_| {})
        .await
        .expect("attach");
    assert_eq!(out.driver.as_deref(), Some("nvidia"));
    assert!(client.status().await.expect("status").devices.is_empty());
    let d = client.device("03:00.0").await.expect("show");
    assert_eq!(d.sysfs.driver.as_deref(), Some("nvidia"));
    let e = client
        .attach("0000:03:00.0", &mut |_| {})
        .await
        .expect_err("not held");
    assert!(e.to_string().contains("not held by rig"), "{e}");
    server.stop().await;
}

/// A raw `rig.v1` client on the server's socket: what a newer client looks like.
async fn raw_client(socket: &Path) -> pb::rig_client::RigClient<tonic::transport::Channel> {
    let socket = socket.to_owned();
    let channel = tonic::transport::Endpoint::from_static("http://rigd")
        .connect_with_connector(tower::service_fn(move |_| {
            let socket = socket.clone();
            async move {
                let s = tokio::net::UnixStream::connect(socket).await?;
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(s))
            }
        }))
        .await
        .expect("channel");
    pb::rig_client::RigClient::new(channel)
}

/// Asserts that a take-over's call, or the first message of its stream, is an
/// InvalidArgument refusal whose line contains `says`.
async fn assert_invalid(
    r: Result<tonic::Response<tonic::Streaming<pb::Progress>>, tonic::Status>,
    says: &str,
) {
    let s = match r {
        Err(s) => s,
        Ok(stream) => stream
            .into_inner()
            .message()
            .await
            .expect_err("refused, not a step or an outcome"),
    };
    assert_eq!(s.code(), Code::InvalidArgument, "{s:?}");
    assert!(s.message().contains(says), "{says}: {s:?}");
}

#[tokio::test]
async fn unknown_enum_numbers_from_a_newer_client_are_invalid_arguments_naming_field_and_number() {
    let server = Server::start(tree).await;
    let mut raw = raw_client(&server.socket).await;
    let gpu = "0000:03:00.0";
    let bdf = gpu.to_owned();

    let mode = pb::DetachRequest {
        bdf: bdf.clone(),
        mode: 99,
        ..Default::default()
    };
    assert_invalid(raw.detach(mode).await, "DetachRequest.mode = 99").await;
    let method = pb::ResetRequest {
        bdf: bdf.clone(),
        method: 42,
    };
    assert_invalid(raw.reset(method).await, "ResetRequest.method = 42").await;
    // A size whose choice rigd does not know arrives with none set.
    let no_choice = pb::DetachRequest {
        bdf: bdf.clone(),
        bar_size: Some(pb::BarSize { size: None }),
        ..Default::default()
    };
    assert_invalid(raw.detach(no_choice).await, "DetachRequest.bar_size").await;
    let keep = Some(pb::bar_size::Size::Keep(pb::bar_size::Keep {}));
    let resize = pb::ResizeRequest {
        bdf,
        bar: 2,
        size: Some(pb::BarSize { size: keep }),
    };
    assert_invalid(raw.resize(resize).await, "a resize needs a size").await;

    // Nothing was taken.
    let mut client = Client::connect(&server.socket).await.expect("connect");
    assert!(client.status().await.expect("status").devices.is_empty());
    let d = client.device(gpu).await.expect("show");
    assert_eq!(d.sysfs.driver.as_deref(), Some("nvidia"));
    server.stop().await;
}

#[tokio::test]
async fn registers_of_a_held_device_are_read_and_written_and_bad_accesses_refused() {
    let server = Server::start(tree).await;
    let mut client = Client::connect(&server.socket).await.expect("connect");
    let gpu = "0000:03:00.0";
    let at = |bar, offset| rig_client::RegAddr { bar, offset };
    let code = |e: &ClientError| match e {
        ClientError::Rpc { code, .. } => *code,
        other => panic!("not an RPC error: {other:?}"),
    };

    // Not held: a driver owns its registers.
    let e = client
        .read_bar(gpu, at(0, 0), 32, 1)
        .await
        .expect_err("not held");
    assert_eq!(code(&e), Code::FailedPrecondition, "{e}");
    let e = client
        .set_bus_master(gpu, true)
        .await
        .expect_err("not held");
    assert!(e.to_string().contains("not held by rig"), "{e}");

    let req = rig_client::DetachRequest {
        bdf: gpu.into(),
        mode: Some(Mode::Sysfs),
        ..Default::default()
    };
    client.detach(&req, &mut |_| {}).await.expect("detach");

    client
        .write_bar(gpu, at(0, 0x80), 64, 0x1122_3344_5566_7788)
        .await
        .expect("write 64");
    client
        .write_bar(gpu, at(2, 0x3f_ffff_fff8), 8, 0xa5)
        .await
        .expect("write the last byte-aligned register of the 256 GiB BAR2");
    let v = client
        .read_bar(gpu, at(0, 0x80), 32, 2)
        .await
        .expect("read");
    assert_eq!(v, [0x5566_7788, 0x1122_3344]);
    assert_eq!(
        client
            .read_bar(gpu, at(2, 0x3f_ffff_fff8), 8, 1)
            .await
            .expect("read"),
        [0xa5]
    );
    // The bytes reached the BAR (the fake's resource0 file), little-endian.
    let bar0 = std::fs::read(server.device_file(gpu, "resource0")).expect("resource0");
    assert_eq!(bar0[0x80..0x88], 0x1122_3344_5566_7788u64.to_le_bytes());

    for (what, call, want) in [
        (
            "misaligned",
            client.read_bar(gpu, at(0, 0x82), 32, 1).await,
            Code::InvalidArgument,
        ),
        (
            "past the end",
            client.read_bar(gpu, at(0, 16 << 20), 8, 1).await,
            Code::InvalidArgument,
        ),
        (
            "run past the end",
            client.read_bar(gpu, at(0, (16 << 20) - 8), 32, 3).await,
            Code::InvalidArgument,
        ),
        (
            "too many",
            client.read_bar(gpu, at(0, 0), 32, 4097).await,
            Code::InvalidArgument,
        ),
        (
            "24 bits",
            client.read_bar(gpu, at(0, 0), 24, 1).await,
            Code::InvalidArgument,
        ),
        (
            "an unmapped BAR",
            client.read_bar(gpu, at(1, 0), 32, 1).await,
            Code::FailedPrecondition,
        ),
    ] {
        let e = call.expect_err(what);
        assert_eq!(code(&e), want, "{what}: {e}");
    }
    let e = client
        .read_bar(gpu, at(4, 0), 32, 1)
        .await
        .expect_err("BAR4");
    assert!(e.to_string().contains("(mapped: BAR0, BAR2)"), "{e}");
    let e = client
        .write_bar(gpu, at(0, 0x90), 16, 0x1_0000)
        .await
        .expect_err("too wide");
    assert!(
        e.to_string().contains("does not fit a 16-bit access"),
        "{e}"
    );
    // Nothing refused was written.
    let after = std::fs::read(server.device_file(gpu, "resource0")).expect("resource0");
    assert_eq!(bar0, after);

    // Bus mastering: on through rigd, off again at give-back.
    let command = || {
        let c = std::fs::read(server.device_file(gpu, "config")).expect("config");
        u16::from_le_bytes([c[4], c[5]])
    };
    assert!(!client.set_bus_master(gpu, true).await.expect("on"));
    assert_eq!(command() & 0x4, 0x4);
    assert!(client.set_bus_master(gpu, true).await.expect("again"));
    client.attach(gpu, &mut |_| {}).await.expect("attach");
    assert_eq!(command() & 0x4, 0, "give-back clears bus mastering");
    server.stop().await;
}

#[tokio::test]
async fn a_client_that_never_hangs_up_does_not_keep_rigd_from_stopping() {
    let server = Server::start(tree).await;
    // A connection that never says anything and never closes.
    let _silent = std::os::unix::net::UnixStream::connect(&server.socket).expect("connect");
    let mut client = Client::connect(&server.socket).await.expect("connect");
    client.list_devices(true).await.expect("list");
    let start = std::time::Instant::now();
    server.stop().await;
    assert!(
        start.elapsed() < Duration::from_secs(8),
        "stopped after {:?}",
        start.elapsed()
    );
}
