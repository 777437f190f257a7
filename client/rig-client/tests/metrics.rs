//! rigd's Prometheus metrics, scraped over their own Unix socket and parsed by Python's
//! `prometheus_client` text parser (`grpcio/metrics.py`), after some RPCs: counts are
//! checked, not just parsed. Alone in this test binary: the registry is process-wide.
//!
//! Needs the pinned venv of `scripts/grpcio-test.sh` (`RIG_GRPCIO_PYTHON`); ignored in
//! a plain `cargo test`, and asked for without that Python it fails.

use std::{path::Path, process::Command, sync::Arc, time::Duration};

use rig_client::{Client, Mode};
use rigd::{
    config::{Config, MetricsListen},
    rig::Rig,
    service,
    sys::sysfs::FakeKernel,
    testing::{FakeDevice, FakeSysfs, Serving},
};

const GPU: &str = "0000:01:00.0";

fn tree(root: &Path) -> FakeSysfs {
    let fake = FakeSysfs::new(root).expect("fake sysfs");
    fake.add(
        &FakeDevice::new(GPU, 0x10de, 0x2335, 0x030200)
            .with_bar64(0, 0x1040_0200_0000, 16 << 20, true)
            .with_driver("nvidia")
            .in_group(7),
    )
    .expect("gpu");
    fake
}

type Sample = (String, serde_json::Map<String, serde_json::Value>, f64);

fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    samples
        .iter()
        .find(|(n, l, _)| {
            n == name
                && labels
                    .iter()
                    .all(|(k, v)| l.get(*k).and_then(|x| x.as_str()) == Some(*v))
        })
        .map(|s| s.2)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Python prometheus_client: scripts/grpcio-test.sh runs it"]
async fn prometheus_client_parses_the_exposition_and_the_counts_match_the_calls_made() {
    let python = std::env::var("RIG_GRPCIO_PYTHON")
        .expect("RIG_GRPCIO_PYTHON: run scripts/grpcio-test.sh, which makes the venv");
    let dir = tempfile::tempdir().expect("tempdir");
    let fake = tree(&dir.path().join("sys"));
    let mut config = Config::default();
    config.paths.sysfs = fake.root().to_owned();
    config.paths.pci_ids = dir.path().join("pci.ids");
    config.paths.state_dir = dir.path().join("state");
    config.paths.proc = dir.path().join("proc");
    config.paths.dev = dir.path().join("dev");
    config.take.allow_sysfs_mode = true;
    config.audit.journal_socket = dir.path().join("no-journal");
    let socket = dir.path().join("rigd.sock");
    let metrics = dir.path().join("metrics.sock");
    let kernel = FakeKernel::new(fake.root(), &["nvidia", "vfio-pci"]);
    let (rig, _) = Rig::with_sysfs(&config, Arc::new(kernel));
    let rig = Arc::new(rig);
    let scraper =
        service::metrics::serve(Arc::clone(&rig), MetricsListen::Unix(metrics.clone()), None)
            .await
            .expect("metrics listener");
    let serving = Serving::start(Arc::clone(&rig), &socket, None);

    let mut client = Client::connect(&socket).await.expect("connect");
    for _ in 0..3 {
        client.version().await.expect("version");
    }
    client.list_devices(false).await.expect("list");
    client
        .device("not-an-address")
        .await
        .expect_err("bad address");
    let req = rig_client::DetachRequest {
        bdf: GPU.into(),
        mode: Some(Mode::Sysfs),
        ..Default::default()
    };
    client.detach(&req, &mut |_| {}).await.expect("detach");

    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/grpcio/metrics.py");
    let out = tokio::task::spawn_blocking(move || {
        Command::new(python)
            .arg(script)
            .arg(&metrics)
            .output()
            .expect("start Python")
    });
    // TIMEOUT: one scrape on a local socket; Python starts in well under 10 s.
    let out = tokio::time::timeout(Duration::from_secs(60), out)
        .await
        .expect("Python finishes within 60 s")
        .expect("task");
    assert!(
        out.status.success(),
        "the parser refused the exposition: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let parsed: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(
        parsed["content_type"],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    let samples: Vec<Sample> = parsed["samples"]
        .as_array()
        .expect("samples")
        .iter()
        .map(|s| {
            (
                s[0].as_str().expect("name").to_owned(),
                s[1].as_object().expect("labels").clone(),
                s[2].as_f64().expect("value"),
            )
        })
        .collect();
    let v = |name: &str, labels: &[(&str, &str)]| value(&samples, name, labels);
    // prometheus_client names a counter's samples with `_total`.
    assert_eq!(
        v(
            "rig_rpc_requests_total",
            &[("method", "Rig.Version"), ("code", "OK")]
        ),
        Some(3.0)
    );
    assert_eq!(
        v(
            "rig_rpc_requests_total",
            &[("method", "Rig.ListDevices"), ("code", "OK")]
        ),
        Some(1.0)
    );
    assert_eq!(
        v(
            "rig_rpc_requests_total",
            &[("method", "Rig.GetDevice"), ("code", "INVALID_ARGUMENT")]
        ),
        Some(1.0)
    );
    assert_eq!(
        v(
            "rig_rpc_duration_seconds_count",
            &[("method", "Rig.Version")]
        ),
        Some(3.0)
    );
    assert_eq!(
        v(
            "rig_rpc_duration_seconds_bucket",
            &[("method", "Rig.Version"), ("le", "+Inf")]
        ),
        Some(3.0)
    );
    assert_eq!(
        v("rig_errors_total", &[("reason", "BAD_ADDRESS")]),
        Some(1.0)
    );
    assert_eq!(
        v("rig_device_held", &[("device", GPU), ("mode", "sysfs")]),
        Some(1.0)
    );
    assert_eq!(v("rig_device_leased_whole", &[("device", GPU)]), Some(0.0));
    assert_eq!(v("rig_queues_lent", &[("device", GPU)]), Some(0.0));
    assert_eq!(v("rig_up", &[]), Some(1.0));
    let steps: f64 = samples
        .iter()
        .filter(|(n, l, _)| {
            n == "rig_takeover_step_seconds_count"
                && l.get("method").and_then(|m| m.as_str()) == Some("Rig.Detach")
        })
        .map(|s| s.2)
        .sum();
    assert!(steps >= 3.0, "the detach's steps are timed: {steps}");

    scraper.abort();
    let _ = serving.stop(Duration::from_secs(10)).await;
}
