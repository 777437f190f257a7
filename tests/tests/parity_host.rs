//! Parity with pciutils on the machine the test runs on: every device that
//! `rigctl list` shows, decoded by rigd, against `lspci -vvv -nn -D` and `lspci -xxxx -D`.
//! Also the saved outputs of the real H200 (docs/h200/), which need neither the GPU nor
//! lspci.
//!
//! Builds nothing: it runs `RIGD_BIN`/`RIGCTL_BIN`, or `target/debug/{rigd,rigctl}` of the
//! workspace (`cargo build -p rigd -p rigctl` first). Without lspci or those binaries
//! it prints why and passes, except under CI (env `CI` set), where it fails. Run as root
//! to compare everything: config space past 64 bytes needs root, for lspci and rigd alike.

use std::{
    env, fs,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    thread,
    time::{Duration, Instant},
};

use rig_client::{Device, Listing};
use rig_tests::parity::{self, Mismatch, Source};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn bin(var: &str, name: &str) -> PathBuf {
    env::var_os(var).map_or_else(
        || workspace().join("target/debug").join(name),
        PathBuf::from,
    )
}

/// Passes with a printed reason, or fails under CI, where skipping would hide the tier.
fn skip(why: &str) {
    let ci = env::var("CI").is_ok_and(|v| !v.is_empty());
    assert!(!ci, "parity_host cannot run under CI: {why}");
    eprintln!("skipped: {why}");
}

/// rigd on a socket in a temp dir, with pci.ids from Debian's package; killed on drop.
struct Daemon {
    child: Child,
    socket: PathBuf,
    _dir: tempfile::TempDir,
}

impl Daemon {
    fn start(rigd: &Path, rigctl: &Path) -> Self {
        let dir = tempfile::tempdir().expect("a temp dir");
        let config = dir.path().join("rigd.toml");
        fs::write(&config, "[paths]\npci_ids = \"/usr/share/misc/pci.ids\"\n")
            .expect("write rigd.toml");
        let socket = dir.path().join("rigd.sock");
        let child = Command::new(rigd)
            .arg("--config")
            .arg(&config)
            .arg("--socket")
            .arg(&socket)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", rigd.display()));
        let daemon = Self {
            child,
            socket,
            _dir: dir,
        };
        // TIMEOUT: rigd loads pci.ids and binds in well under a second; 10 s covers a
        // loaded 2-core machine.
        let deadline = Instant::now() + Duration::from_secs(10);
        while !daemon.rigctl_ok(rigctl, &["version"]) {
            assert!(Instant::now() < deadline, "rigd did not answer within 10 s");
            thread::sleep(Duration::from_millis(50));
        }
        daemon
    }

    fn rigctl_ok(&self, rigctl: &Path, args: &[&str]) -> bool {
        Command::new(rigctl)
            .arg("--socket")
            .arg(&self.socket)
            .args(args)
            .output()
            .is_ok_and(|o| o.status.success())
    }

    fn rigctl(&self, rigctl: &Path, args: &[&str]) -> String {
        let out = Command::new(rigctl)
            .arg("--socket")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("run rigctl");
        assert!(
            out.status.success(),
            "rigctl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("rigctl prints UTF-8")
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        // Only the rigd this test started, by its own handle.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn lspci(args: &[&str]) -> Option<String> {
    let out = Command::new("lspci").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// One `rigctl show --json -x` answer: the decode and its config bytes.
fn show(daemon: &Daemon, rigctl: &Path, bdf: &str) -> (Device, String) {
    let text = daemon.rigctl(rigctl, &["show", bdf, "--json", "-x"]);
    let value: serde_json::Value = serde_json::from_str(&text).expect("show --json is JSON");
    let hex = value["config_hex"].as_str().unwrap_or_default().to_owned();
    let device = serde_json::from_value(value).expect("show --json is a Device");
    (device, hex)
}

fn report(what: &str, mismatches: &[Mismatch]) -> String {
    let lines: Vec<String> = mismatches.iter().map(ToString::to_string).collect();
    format!(
        "{what}: {} mismatches with lspci\n  {}",
        lines.len(),
        lines.join("\n  ")
    )
}

#[test]
fn every_host_device_matches_lspci() {
    if lspci(&["--version"]).is_none() {
        return skip("lspci is not installed (apt-get install pciutils pci.ids)");
    }
    let (rigd, rigctl) = (bin("RIGD_BIN", "rigd"), bin("RIGCTL_BIN", "rigctl"));
    if !rigd.exists() || !rigctl.exists() {
        return skip("rigd/rigctl not built: cargo build -p rigd -p rig-client");
    }
    let daemon = Daemon::start(&rigd, &rigctl);
    let listing: Listing =
        serde_json::from_str(&daemon.rigctl(&rigctl, &["list", "--json"])).expect("list JSON");
    let shown: Vec<(Device, String)> = listing
        .devices
        .iter()
        .map(|d| show(&daemon, &rigctl, &d.bdf))
        .collect();
    let devices: Vec<Device> = shown.iter().map(|(d, _)| d.clone()).collect();

    let text = lspci(&["-vvv", "-nn", "-D"]).expect("lspci -vvv runs");
    let mut mismatches = parity::compare_all(&parity::parse_lspci(&text), &devices, Source::Live);
    let dumps = parity::parse_hex_dumps(&lspci(&["-xxxx", "-D"]).expect("lspci -xxxx runs"));
    for (device, hex) in &shown {
        match dumps.iter().find(|(bdf, _)| *bdf == device.bdf) {
            Some((_, bytes)) => {
                mismatches.extend(parity::compare_config(&device.bdf, bytes, hex));
            }
            None => mismatches.push(Mismatch {
                bdf: device.bdf.clone(),
                field: "config_hex".to_owned(),
                lspci: "no dump".to_owned(),
                rig: format!("{} bytes", hex.len() / 2),
            }),
        }
    }

    assert!(
        mismatches.is_empty(),
        "{}",
        report(&format!("{} host devices", devices.len()), &mismatches)
    );
    eprintln!("{} host devices match lspci", devices.len());
}

/// The real H200's outputs (docs/h200.md says how they were made): every device's
/// `rigctl show --json -x` against the carried lspci that ran beside it, and the GPU
/// against `lspci -F` of its config dump. `RIG_SAVED_DIR` names another capture of the
/// same files (tests/h200/multi.sh's `inspect`, on a multi-GPU machine), where the
/// `lspci -F` step is left out when it has no `lspci-F-vvv.txt`.
#[test]
fn saved_h200_outputs_match_lspci() {
    let other = env::var_os("RIG_SAVED_DIR").map(PathBuf::from);
    let dir = other
        .clone()
        .unwrap_or_else(|| workspace().join("docs/h200"));
    let read = |name: &str| fs::read_to_string(dir.join(name)).ok();
    let Some(shown) = read("rigctl-show-all.json") else {
        return skip(&format!(
            "{}/rigctl-show-all.json is missing",
            dir.display()
        ));
    };
    let shown: Vec<serde_json::Value> = serde_json::from_str(&shown).expect("saved JSON");
    let hex: Vec<String> = shown
        .iter()
        .map(|v| v["config_hex"].as_str().unwrap_or_default().to_owned())
        .collect();
    let devices: Vec<Device> = shown
        .into_iter()
        .map(|v| serde_json::from_value(v).expect("saved JSON is a Device"))
        .collect();

    let lspci_vvv = read("lspci-vvv.txt").expect("docs/h200/lspci-vvv.txt");
    let mut mismatches =
        parity::compare_all(&parity::parse_lspci(&lspci_vvv), &devices, Source::Live);
    let dumps = parity::parse_hex_dumps(&read("lspci-xxxx.txt").expect("lspci-xxxx.txt"));
    for (device, hex) in devices.iter().zip(&hex) {
        let bytes = dumps.iter().find(|(b, _)| *b == device.bdf).map(|(_, b)| b);
        mismatches.extend(parity::compare_config(
            &device.bdf,
            bytes.map_or(&[][..], Vec::as_slice),
            hex,
        ));
    }
    // lspci -F saw only the GPU's dump.
    let dump_vvv = match (read("lspci-F-vvv.txt"), &other) {
        (Some(text), _) => text,
        (None, Some(_)) => {
            assert!(mismatches.is_empty(), "{}", report("saved", &mismatches));
            eprintln!("{} saved functions match lspci", devices.len());
            return;
        }
        (None, None) => panic!("docs/h200/lspci-F-vvv.txt is missing"),
    };
    let from_dump = parity::parse_lspci(&dump_vvv);
    for l in &from_dump {
        let rig = devices
            .iter()
            .find(|d| d.bdf == l.bdf)
            .expect("dumped device");
        mismatches.extend(parity::compare(l, rig, Source::Dump));
    }
    assert!(!from_dump.is_empty(), "lspci -F output holds a device");
    assert!(mismatches.is_empty(), "{}", report("H200", &mismatches));
}
