//! rig-device-plugin against a kubelet stand-in written in Python with grpcio
//! (`k8s/kubelet.py`: stubs generated at test time from the vendored api.proto, so the
//! two sides share no generated code), with rigd's service in this process over a fake
//! kernel and fake VFIO. This test starts the plugin first (no kubelet yet: it must say
//! so and wait), then the stand-in, and performs the state changes the stand-in asks
//! for on rigd: a lease outside Kubernetes and its end, a device given back and taken
//! again, rigd stopped and started. Afterwards: the plugin's log has a clear line for
//! each problem, `rigctl cdi generate` writes the same spec files the plugin wrote, and
//! the CDI project's own Go library (Debian's, `k8s/cdi-validate.go`) validates them.
//!
//! Needs `RIG_K8S_PYTHON` (a Python with pinned grpcio and grpcio-tools),
//! `RIG_CDI_VALIDATE` (the built validator) and a built rigctl (`RIGCTL_BIN`, or the
//! workspace's): `scripts/k8s-test.sh` makes all three and runs this test. Ignored in a
//! plain `cargo test`; asked for without them, it fails.

use std::{
    collections::HashMap,
    io::{BufRead, BufReader, Write},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::Arc,
    time::{Duration, Instant},
};

use rig_client::{lease::DeviceLease, session::Session};
use rigd::{
    config::{Config, LeaseRule},
    dma::{Backing, PoolMode, PoolSpec},
    rig::Rig,
    sys::sysfs::FakeKernel,
    take::{DetachOptions, Mode},
    testing::{FakeDevice, FakeSysfs, Serving},
    vfio::FakeVfio,
};

const GPUS: [&str; 3] = ["0000:03:00.0", "0000:04:00.0", "0000:05:00.0"];
const EDU: &str = "0000:06:00.0";
const OUTSIDER: &str = "0000:05:00.0";
const RESOURCES: [&str; 2] = ["rig.dev/gpu=gpu", "rig.dev/edu=id:1234:11e8"];

/// The rigctl whose hooks the specs name and whose `cdi generate` is compared: rigctl is
/// a crate of its own, so cargo gives this test no path to it. `RIGCTL_BIN`, else the
/// one built beside this test binary (target/PROFILE/rigctl: scripts/k8s-test.sh runs
/// `cargo build -p rigctl` first).
fn rigctl_bin() -> PathBuf {
    let path = std::env::var_os("RIGCTL_BIN").map_or_else(
        || {
            let exe = std::env::current_exe().expect("this test's path");
            // target/PROFILE/deps/k8s-HASH → target/PROFILE/rigctl
            exe.parent()
                .and_then(Path::parent)
                .expect("a target directory")
                .join("rigctl")
        },
        PathBuf::from,
    );
    assert!(
        path.is_file(),
        "no rigctl at {}: run scripts/k8s-test.sh, which builds it (cargo build -p rigctl)",
        path.display()
    );
    path
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set: run scripts/k8s-test.sh, which makes it and runs this test")
    })
}

/// Two GPUs under one switch (NUMA 0), one under another root port (NUMA 1), an edu.
fn tree(root: &Path) -> FakeSysfs {
    let fake = FakeSysfs::new(root).expect("fake sysfs");
    let bridge = |bdf: &str| {
        FakeDevice::new(bdf, 0x1022, 0x1483, 0x060400)
            .bridge()
            .with_driver("pcieport")
    };
    fake.add(&bridge("0000:00:01.0")).expect("root port A");
    fake.add(&bridge("0000:01:00.0").under("0000:00:01.0"))
        .expect("switch up");
    fake.add(&bridge("0000:02:00.0").under("0000:01:00.0"))
        .expect("switch down 0");
    fake.add(&bridge("0000:02:01.0").under("0000:01:00.0"))
        .expect("switch down 1");
    fake.add(&bridge("0000:00:02.0")).expect("root port B");
    let gpu = |bdf: &str, parent: &str, numa: &str, group: u32| {
        FakeDevice::new(bdf, 0x10de, 0x2335, 0x030200)
            .under(parent)
            .with_bar64(
                0,
                0xfe00_0000 + u64::from(group) * 0x0100_0000,
                16 << 20,
                false,
            )
            .with_driver("nvidia")
            .with_attr("numa_node", numa)
            .with_attr("reset_method", "flr")
            .in_group(group)
    };
    fake.add(&gpu(GPUS[0], "0000:02:00.0", "0", 10))
        .expect("gpu 3");
    fake.add(&gpu(GPUS[1], "0000:02:01.0", "0", 11))
        .expect("gpu 4");
    fake.add(&gpu(GPUS[2], "0000:00:02.0", "1", 12))
        .expect("gpu 5");
    fake.add(
        &FakeDevice::new(EDU, 0x1234, 0x11e8, 0x00ff00)
            .with_bar64(0, 0xfd00_0000, 1 << 20, false)
            .in_group(13)
            .with_attr("reset_method", "bus"),
    )
    .expect("edu");
    fake
}

/// rigd's service on `socket`, until [`stop`].
fn serve(rig: &Arc<Rig>, socket: &Path) -> Serving {
    Serving::start(Arc::clone(rig), socket, None)
}

/// Stops rigd's service, which must end within 10 s.
async fn stop(s: Serving) {
    s.stop(Duration::from_secs(10))
        .await
        .expect("rigd's service stops within 10 s")
        .expect("service task");
}

fn vfio() -> DetachOptions {
    DetachOptions {
        mode: Mode::Vfio,
        ..DetachOptions::default()
    }
}

fn plugin_args(socket: &Path, kubelet: &Path, cdi: &Path, dev: &Path, sys: &Path) -> Vec<String> {
    let mut a = vec![
        "--socket".into(),
        socket.display().to_string(),
        "--kubelet-dir".into(),
        kubelet.display().to_string(),
        "--cdi-dir".into(),
        cdi.display().to_string(),
        "--rigctl".into(),
        rigctl_bin().display().to_string(),
        "--dev-dir".into(),
        dev.display().to_string(),
        "--sysfs-dir".into(),
        sys.display().to_string(),
    ];
    for r in RESOURCES {
        a.push("--resource".into());
        a.push(r.into());
    }
    a
}

/// Waits up to `secs` for `file` to contain `text`.
/// Whether rigd on `socket` says `bdf` is held and free again (a dropped lease's
/// reclaim done, which rigd does after the session's connection closes) within 2 s,
/// asked every millisecond.
async fn held_and_free(socket: &Path, bdf: &str) -> bool {
    let mut c = rig_client::Client::connect(socket).await.expect("client");
    for _ in 0..2000 {
        let st = c.status().await.expect("status");
        if st
            .devices
            .iter()
            .any(|d| d.bdf == bdf && d.state == rig_client::HeldState::Held && d.lease.is_none())
        {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    false
}

fn wait_for_line(file: &Path, text: &str, secs: u64) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(secs) {
        if std::fs::read_to_string(file).is_ok_and(|s| s.contains(text)) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// The spec files of a directory, by name.
fn specs(dir: &Path) -> HashMap<String, String> {
    std::fs::read_dir(dir)
        .expect("cdi dir")
        .map(|e| e.expect("entry"))
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read_to_string(e.path()).expect("spec"),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Python grpcio-tools and Debian's CDI library: scripts/k8s-test.sh runs it"]
async fn the_device_plugin_serves_a_python_kubelet_through_restarts_and_its_specs_validate() {
    let python = env("RIG_K8S_PYTHON");
    let validator = env("RIG_CDI_VALIDATE");
    let dir = tempfile::tempdir().expect("tempdir");
    let fake = tree(&dir.path().join("sys"));
    let mut config = Config::default();
    config.paths.sysfs = fake.root().to_owned();
    config.paths.pci_ids = dir.path().join("pci.ids");
    config.paths.state_dir = dir.path().join("state");
    config.paths.proc = dir.path().join("proc");
    config.paths.dev = dir.path().join("dev");
    config.take.allow_sysfs_mode = true;
    config.lease.allow = vec![LeaseRule {
        devices: vec![OUTSIDER.into()],
        uids: vec![nix::unistd::getuid().as_raw()],
        groups: Vec::new(),
    }];
    let kernel = FakeKernel::new(fake.root(), &["nvidia", "pcieport", "vfio-pci"]);
    let vfio_fake = FakeVfio::new(&kernel);
    let (rig, _) = Rig::with_kernel(&config, Arc::new(kernel), Arc::new(vfio_fake));
    let rig = Arc::new(rig);
    for g in GPUS {
        rig.detach(g, vfio(), &mut |_| {}).expect("detach a GPU");
    }
    let sysfs = DetachOptions {
        mode: Mode::Sysfs,
        ..DetachOptions::default()
    };
    rig.detach(EDU, sysfs, &mut |_| {})
        .expect("detach edu in sysfs mode");
    let spec = PoolSpec {
        mode: PoolMode::Host,
        blocks: 2,
        backing: Backing::Shmem,
        pin_threads: 1,
    };
    let pool = rig.dma().create(OUTSIDER, spec).expect("pool");
    assert!(pool.wait_pinned(Duration::from_secs(10)), "pool pinned");
    let socket = dir.path().join("run/rigd.sock");
    std::fs::create_dir_all(socket.parent().expect("run dir")).expect("run dir");

    let kubelet_dir = dir.path().join("device-plugins");
    std::fs::create_dir_all(&kubelet_dir).expect("kubelet dir");
    let cdi_dir = dir.path().join("cdi");
    let log = dir.path().join("plugin.log");
    let args = plugin_args(
        &socket,
        &kubelet_dir,
        &cdi_dir,
        &config.paths.dev,
        fake.root(),
    );
    let mut plugin = Command::new(env!("CARGO_BIN_EXE_rig-device-plugin"))
        .args(&args)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log"))
        .spawn()
        .expect("start rig-device-plugin");
    let log_now = || std::fs::read_to_string(&log).unwrap_or_default();
    // Bad input first: no kubelet and no rigd yet. It says both and waits; it must not
    // exit (a DaemonSet would restart it in a loop).
    assert!(
        wait_for_line(&log, "kubelet socket", 10) && wait_for_line(&log, "missing", 1),
        "the plugin says the kubelet's socket is missing: {}",
        log_now()
    );
    assert!(
        wait_for_line(&log, "rigd gone at", 10),
        "the plugin says rigd is not there: {}",
        log_now()
    );
    std::thread::sleep(Duration::from_millis(700));
    assert!(
        plugin.try_wait().expect("plugin state").is_none(),
        "the plugin waits for rigd and the kubelet instead of exiting: {}",
        log_now()
    );
    let mut serving = Some(serve(&rig, &socket));
    assert!(
        wait_for_line(&log, "rigd is back at", 10),
        "the plugin finds rigd once it starts: {}",
        log_now()
    );
    // A stale kubelet.sock, as a crashed kubelet leaves it: a socket file nobody
    // listens on. Registration fails, is logged and retried; the plugin stays up, and
    // the stand-in's socket (a new file) is found at once.
    let stale = std::os::unix::net::UnixListener::bind(kubelet_dir.join("kubelet.sock"))
        .expect("a stale kubelet.sock");
    drop(stale);
    assert!(
        wait_for_line(&log, "registration at", 10) && wait_for_line(&log, "failed", 1),
        "the plugin says registration on a dead kubelet.sock failed: {}",
        log_now()
    );
    assert!(
        plugin.try_wait().expect("plugin state").is_none(),
        "the plugin survives a dead kubelet.sock: {}",
        log_now()
    );

    let stubs = dir.path().join("stubs");
    std::fs::create_dir_all(&stubs).expect("stubs dir");
    let proto_root = Path::new(env!("CARGO_MANIFEST_DIR")).join("proto/k8s");
    let gen_out = Command::new(&python)
        .args(["-m", "grpc_tools.protoc"])
        .arg(format!("-I{}", proto_root.display()))
        .arg(format!("--python_out={}", stubs.display()))
        .arg(format!("--grpc_python_out={}", stubs.display()))
        .arg(proto_root.join("deviceplugin/v1beta1/api.proto"))
        .output()
        .expect("run grpcio-tools");
    assert!(
        gen_out.status.success(),
        "stubs from api.proto: {}",
        String::from_utf8_lossy(&gen_out.stderr)
    );

    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/k8s/kubelet.py");
    let mut kubelet = Command::new(&python)
        .arg(script)
        .arg("--dir")
        .arg(&kubelet_dir)
        .arg("--cdi-dir")
        .arg(&cdi_dir)
        .arg("--stubs")
        .arg(&stubs)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the kubelet stand-in");
    let mut to_py = kubelet.stdin.take().expect("stdin");
    let from_py = kubelet.stdout.take().expect("stdout");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(from_py).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });

    let mut leases: HashMap<String, (Session, DeviceLease)> = HashMap::new();
    let mut out = Vec::new();
    // TIMEOUT: the stand-in's whole run is ~10 s here (20 lease cycles, 300 Allocates,
    // a rigd and a kubelet restart); 240 s leaves room for a loaded 2-core machine.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(240);
    loop {
        let line = match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(l)) => l,
            Ok(None) => break,
            Err(_) => panic!(
                "the kubelet stand-in did not finish in 240 s:\n{}",
                out.join("\n")
            ),
        };
        println!("{line}");
        let Some(ask) = line.strip_prefix("ASK ") else {
            out.push(line);
            continue;
        };
        let mut words = ask.split_whitespace();
        let action = words.next().unwrap_or_default().to_owned();
        let bdf = words.next().unwrap_or_default().to_owned();
        let t0 = Instant::now();
        let reply = match action.as_str() {
            "lease" => {
                let s = Session::open(&socket, &bdf).await.expect("session");
                let l = DeviceLease::open(&s, &bdf).await.expect("outsider's lease");
                leases.insert(bdf, (s, l));
                Ok(())
            }
            "unlease" => {
                drop(leases.remove(&bdf));
                if held_and_free(&socket, &bdf).await {
                    Ok(())
                } else {
                    Err("the lease did not end in 2 s".to_owned())
                }
            }
            "giveback" => rig
                .attach(&bdf, &mut |_| {})
                .map(drop)
                .map_err(|e| e.to_string()),
            "take" => rig
                .detach(&bdf, vfio(), &mut |_| {})
                .map(drop)
                .map_err(|e| e.to_string()),
            "rigd-stop" => {
                if let Some(s) = serving.take() {
                    stop(s).await;
                }
                Ok(())
            }
            "rigd-start" => {
                // Down for a while, as a restarting daemon is.
                tokio::time::sleep(Duration::from_millis(500)).await;
                serving = Some(serve(&rig, &socket));
                Ok(())
            }
            other => Err(format!("no action {other}")),
        };
        let took = t0.elapsed().as_nanos();
        let text = match reply {
            Ok(()) => format!("DONE {took}\n"),
            Err(e) => format!("ERR {e}\n"),
        };
        to_py
            .write_all(text.as_bytes())
            .expect("answer the stand-in");
        to_py.flush().expect("flush");
    }
    let status = kubelet.wait().expect("stand-in exit");

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(plugin.id()).expect("pid")),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("SIGTERM the plugin");
    let plugin_status = plugin.wait().expect("plugin exit");
    let log_text = std::fs::read_to_string(&log).expect("plugin log");
    println!("--- rig-device-plugin's log ---\n{log_text}---");
    assert!(status.success(), "the kubelet stand-in failed: {status}");
    let summary = out
        .iter()
        .find_map(|l| l.strip_prefix("kubelet: "))
        .expect("a summary line");
    assert!(summary.ends_with(" passed, 0 failed"), "{summary}");
    assert!(
        plugin_status.success(),
        "the plugin stops cleanly on SIGTERM: {plugin_status}"
    );
    for line in [
        "kubelet socket",
        "registered with the kubelet",
        "rigd gone at",
        "rigd is back at",
        "taken away while allocated to a container",
        "leased whole outside Kubernetes",
        "re-registering",
    ] {
        assert!(log_text.contains(line), "the plugin's log says `{line}`");
    }
    assert!(!log_text.contains("panicked"), "no panic in the plugin");
    // Only the device given back was taken away; a device merely busy for an instant
    // (rigd's Status while another holds its lock) is neither that nor spec-less.
    for l in log_text.lines() {
        if l.contains("taken away while allocated") || l.contains("plugin: removed ") {
            assert!(
                l.contains("0000:03:00.0") || l.contains("0000-03-00.0"),
                "{l}"
            );
        }
    }

    // rigctl cdi generate writes the same files as the plugin.
    let gen_dir = dir.path().join("cdi-generated");
    let rigctl_path = rigctl_bin();
    let mut rigctl = Command::new(&rigctl_path);
    rigctl
        .arg("--socket")
        .arg(&socket)
        .args(["cdi", "generate", "--dir"])
        .arg(&gen_dir)
        .arg("--rigctl")
        .arg(&rigctl_path)
        .arg("--dev-dir")
        .arg(&config.paths.dev)
        .arg("--sysfs-dir")
        .arg(fake.root());
    for r in RESOURCES {
        rigctl.args(["--resource", r]);
    }
    let generated = rigctl.output().expect("rigctl cdi generate");
    assert!(
        generated.status.success(),
        "rigctl cdi generate: {}",
        String::from_utf8_lossy(&generated.stderr)
    );
    let (ours, theirs) = (specs(&cdi_dir), specs(&gen_dir));
    assert_eq!(ours.len(), 4, "a spec per held device: {:?}", ours.keys());
    assert_eq!(
        ours, theirs,
        "rigctl cdi generate writes what the plugin wrote"
    );

    // The CDI project's own library validates every spec.
    let mut v = Command::new(validator);
    v.args(["-expect", "4"]);
    for d in GPUS {
        v.args(["-device", &format!("rig.dev/gpu={d}")]);
    }
    v.args(["-device", &format!("rig.dev/edu={EDU}")]);
    let checked = v.arg(&cdi_dir).output().expect("run cdi-validate");
    print!("{}", String::from_utf8_lossy(&checked.stdout));
    assert!(
        checked.status.success(),
        "Debian's CDI library refuses a spec: {}",
        String::from_utf8_lossy(&checked.stderr)
    );

    // The hooks the specs name, as an engine runs them (container state on stdin).
    let hook = |step: &str, bdf: &str, extra: &[&str]| {
        let mut c = Command::new(&rigctl_path);
        c.arg("--socket")
            .arg(&socket)
            .args(["cdi", "hook", step, bdf])
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c.spawn().expect("rigctl cdi hook");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(br#"{"ociVersion":"1.0.2","id":"ctr-42","status":"creating","pid":1}"#)
            .expect("state on stdin");
        let o = child.wait_with_output().expect("hook output");
        (
            o.status.success(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (ok, err) = hook("create-runtime", GPUS[0], &[]);
    assert!(ok, "create-runtime on a held, free device: {err}");
    let (ok, err) = hook("poststop", GPUS[0], &[]);
    assert!(
        ok && err.contains("held and free again (container ctr-42)"),
        "poststop: {err}"
    );
    let (ok, err) = hook("create-runtime", "0000:09:00.0", &[]);
    assert!(
        !ok && err.contains("rig does not hold it: refusing to start for container ctr-42"),
        "{err}"
    );
    let s = Session::open(&socket, OUTSIDER).await.expect("session");
    let l = DeviceLease::open(&s, OUTSIDER).await.expect("lease");
    let (ok, err) = hook("create-runtime", OUTSIDER, &[]);
    assert!(
        !ok && err.contains("is leased whole to uid"),
        "create-runtime on a leased device: {err}"
    );
    // The holder (this process) still runs, so it is not the container's lease ending:
    // poststop says so at once instead of waiting out its 25 s.
    let t0 = Instant::now();
    let (ok, err) = hook("poststop", OUTSIDER, &[]);
    assert!(
        !ok && err.contains(&format!(
            "leased whole to pid {} (session",
            std::process::id()
        )) && err.contains("which still runs: not this container's lease (container ctr-42)"),
        "poststop while a live process keeps the lease: {err}"
    );
    assert!(
        t0.elapsed() < Duration::from_secs(10),
        "poststop with a live holder answers at once, not after its 25 s: {:?}",
        t0.elapsed()
    );
    drop(l);
    drop(s);
    // rigd ends the session when it sees the connection close: the hook asks after.
    assert!(
        held_and_free(&socket, OUTSIDER).await,
        "the dropped lease ended"
    );
    let (ok, err) = hook("poststop", OUTSIDER, &[]);
    assert!(
        ok && err.contains("held and free again"),
        "poststop once the lease ended: {err}"
    );

    if let Some(s) = serving.take() {
        stop(s).await;
    }
    let _: PathBuf = socket;
}
