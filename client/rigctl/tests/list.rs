//! `rigctl list` as lspci's users read it, over the fake 8-GPU host
//! (`rigd::testing::hosts`) with one GPU held in vfio mode and one served through a
//! fake RM: one line per function as `lspci -D -nn` prints it, then `driver=` and
//! `rig=`; `-s` and `-d` select as lspci's do, in the lines and in `--json`; a
//! malformed selection is a usage error in lspci's words; and every subcommand whose
//! reader has left ends as lspci ends, by SIGPIPE and silently. Where lspci is
//! installed, the same fake tree is read by lspci too and the lines and selections
//! are compared with its own (skipped without it, except under CI).

use std::{
    os::unix::process::ExitStatusExt,
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
    sync::Arc,
    time::Duration,
};

use rigd::{
    channels::{ChannelHost, Limits, Served},
    config::Config,
    dma::{Backing, PoolMode, PoolSpec},
    nvrm::Gpu,
    rig::Rig,
    sys::sysfs::FakeKernel,
    take::{DetachOptions, Mode},
    testing::{
        Serving,
        hosts::{eight_gpus_behind_switches, eight_gpus_rm},
    },
    vfio::FakeVfio,
};
use serde_json::Value;

/// Held in vfio mode by the test's rigd.
const HELD: &str = "0000:18:00.0";
/// Served through the fake RM.
const SERVED: &str = "0000:19:00.0";
/// Neither: bound to nvidia, rig leaves it alone.
const ALONE: &str = "0000:48:00.0";

/// Names for the host's ids, in pci.ids' format, so that the lines carry names.
const PCI_IDS: &str = "\
1000  Broadcom / LSI
\tc030  PEX89000 PCIe Gen 5 Switch
10de  NVIDIA Corporation
\t2335  GH100 [H200 SXM 141GB]
15b3  Mellanox Technologies
8086  Intel Corporation
C 02  Network controller
\t00  Ethernet controller
\t07  Infiniband controller
C 03  Display controller
\t00  VGA compatible controller
\t02  3D controller
C 06  Bridge
\t04  PCI bridge
\t\t00  Normal decode
";

struct Host {
    dir: tempfile::TempDir,
    socket: PathBuf,
    pci_ids: PathBuf,
    sysfs: PathBuf,
    serving: Serving,
}

async fn start() -> Host {
    let dir = tempfile::tempdir().expect("tempdir");
    let fake = eight_gpus_behind_switches(&dir.path().join("sys")).expect("host");
    let mut config = Config::default();
    config.paths.sysfs = fake.root().to_owned();
    config.paths.pci_ids = dir.path().join("pci.ids");
    std::fs::write(&config.paths.pci_ids, PCI_IDS).expect("pci.ids");
    config.paths.state_dir = dir.path().join("state");
    config.paths.proc = dir.path().join("proc");
    config.paths.dev = dir.path().join("dev");
    let kernel = FakeKernel::new(
        fake.root(),
        &["nvidia", "pcieport", "mlx5_core", "vfio-pci"],
    );
    let vfio = FakeVfio::new(&kernel);
    let (rig, _) = Rig::with_kernel(&config, Arc::new(kernel), Arc::new(vfio));
    let opts = DetachOptions {
        mode: Mode::Vfio,
        ..DetachOptions::default()
    };
    rig.detach(HELD, opts, &mut |_| {}).expect("detach");
    let gpu = Gpu::open(eight_gpus_rm(false), Some(SERVED)).expect("the fake RM's GPU");
    let pool = rig
        .serve_gpu_with(
            Arc::new(Served::new(gpu, Limits::default())) as Arc<dyn ChannelHost>,
            PoolSpec {
                mode: PoolMode::Host,
                blocks: 1,
                backing: Backing::Shmem,
                pin_threads: 1,
            },
        )
        .expect("serve");
    assert!(pool.wait_pinned(Duration::from_secs(20)));
    let socket = dir.path().join("rigd.sock");
    let serving = Serving::start(Arc::new(rig), &socket, None);
    Host {
        socket,
        pci_ids: config.paths.pci_ids,
        sysfs: fake.root().to_owned(),
        dir,
        serving,
    }
}

impl Host {
    fn rigctl(&self, args: &[&str]) -> Output {
        tokio::task::block_in_place(|| {
            Command::new(env!("CARGO_BIN_EXE_rigctl"))
                .arg("--socket")
                .arg(&self.socket)
                .args(args)
                .output()
                .expect("rigctl runs")
        })
    }

    /// `rigctl ARGS`, wanting success and nothing on stderr: its stdout's lines.
    fn lines(&self, args: &[&str]) -> Vec<String> {
        let out = self.rigctl(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{args:?}: {stderr}");
        assert!(stderr.is_empty(), "{args:?}: {stderr}");
        String::from_utf8(out.stdout)
            .expect("utf-8")
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// The addresses `rigctl list ARGS` prints, in its order.
    fn picked(&self, args: &[&str]) -> Vec<String> {
        let mut a = vec!["list"];
        a.extend_from_slice(args);
        self.lines(&a)
            .iter()
            .map(|l| l.split(' ').next().expect("an address").to_owned())
            .collect()
    }

    /// lspci's lines for the same fake tree and pci.ids, or `None` where lspci is not
    /// installed (a failure under CI, where it is).
    fn lspci(&self, args: &[&str]) -> Option<Vec<String>> {
        let run = Command::new("lspci")
            .args(["-A", "linux-sysfs", "-O"])
            // lspci's sysfs.path is the bus directory, not sysfs's root.
            .arg(format!(
                "sysfs.path={}",
                self.sysfs.join("bus/pci").display()
            ))
            .arg("-i")
            .arg(&self.pci_ids)
            .args(["-D", "-nn"])
            .args(args)
            .output();
        let Ok(out) = run else {
            let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty());
            assert!(!ci, "lspci is part of CI's tools (pciutils)");
            eprintln!("skipped: no lspci to compare with");
            return None;
        };
        assert!(
            out.status.success(),
            "lspci {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut lines: Vec<String> = String::from_utf8(out.stdout)
            .expect("utf-8")
            .lines()
            .map(str::to_owned)
            .collect();
        lines.sort();
        Some(lines)
    }

    async fn stop(self) {
        let _ = self.serving.stop(Duration::from_secs(10)).await;
        drop(self.dir);
    }
}

/// A line without rig's two fields: what lspci prints.
fn lspci_part(line: &str) -> String {
    let mut fields: Vec<&str> = line.split(' ').collect();
    let rig = fields.pop().expect("rig=");
    let driver = fields.pop().expect("driver=");
    assert!(
        rig.starts_with("rig=") && driver.starts_with("driver="),
        "{line}"
    );
    fields.join(" ")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_prints_one_lspci_line_per_function_then_driver_and_rig_state() {
    let h = start().await;
    let lines = h.lines(&["list"]);
    assert_eq!(lines.len(), 32, "{lines:#?}");
    let line = |bdf: &str| {
        lines
            .iter()
            .find(|l| l.starts_with(&format!("{bdf} ")))
            .unwrap_or_else(|| panic!("no line for {bdf}: {lines:#?}"))
            .clone()
    };
    assert_eq!(
        line(HELD),
        "0000:18:00.0 3D controller [0302]: NVIDIA Corporation GH100 [H200 SXM 141GB] \
         [10de:2335] (rev a1) driver=vfio-pci rig=held:vfio"
    );
    assert_eq!(
        line(SERVED),
        "0000:19:00.0 3D controller [0302]: NVIDIA Corporation GH100 [H200 SXM 141GB] \
         [10de:2335] (rev a1) driver=nvidia rig=served"
    );
    assert!(
        line(ALONE).ends_with(" driver=nvidia rig=-"),
        "{}",
        line(ALONE)
    );
    assert_eq!(
        line("0000:1a:00.0"),
        "0000:1a:00.0 Infiniband controller [0207]: Mellanox Technologies Device \
         [15b3:1021] (rev a1) driver=mlx5_core rig=-"
    );
    assert_eq!(
        line("0000:15:01.0"),
        "0000:15:01.0 PCI bridge [0604]: Intel Corporation Device [8086:352a] (rev a1) \
         driver=pcieport rig=-"
    );
    // GPUs first, as rigd lists them; then grep and awk read it as they read lspci.
    assert!(
        lines[..8].iter().all(|l| l.contains("[0302]")),
        "{lines:#?}"
    );
    let held: Vec<&String> = lines.iter().filter(|l| l.contains(" rig=held")).collect();
    assert_eq!(held.len(), 1, "{held:?}");
    for l in &lines {
        let f: Vec<&str> = l.split_whitespace().collect();
        assert!(f[0].len() == 12 && f[0].chars().nth(4) == Some(':'), "{l}");
        assert!(f[f.len() - 2].starts_with("driver="), "{l}");
        assert!(f[f.len() - 1].starts_with("rig="), "{l}");
    }
    // Less rig's two fields, the lines are lspci's for the same tree.
    if let Some(want) = h.lspci(&[]) {
        let mut ours: Vec<String> = lines.iter().map(|l| lspci_part(l)).collect();
        ours.sort();
        assert_eq!(ours, want);
    }
    // The table of before is a flag away.
    let table = h.lines(&["list", "--table"]).join("\n");
    assert!(table.contains("│ BDF"), "{table}");
    assert!(table.contains("vfio-pci"), "{table}");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slot_selects_as_lspci_s_with_empty_and_star_parts_matching_any() {
    let h = start().await;
    let all = h.picked(&[]);
    let cases: [(&str, Vec<&str>); 7] = [
        ("18:00.0", vec![HELD]),
        ("0000:19:00.0", vec![SERVED]),
        ("45:", vec!["0000:45:01.0"]),
        (
            "*:c7:*.*",
            vec!["0000:c7:00.0", "0000:c7:01.0", "0000:c7:02.0"],
        ),
        ("1.0", {
            let mut v: Vec<&str> = all
                .iter()
                .filter(|b| b.ends_with(":01.0"))
                .map(String::as_str)
                .collect();
            v.sort_unstable();
            v
        }),
        // No such function: nothing, and still success, as lspci.
        ("0001:18:00.0", vec![]),
        ("1:", vec![]),
    ];
    for (slot, want) in cases {
        let mut got = h.picked(&["-s", slot]);
        got.sort();
        assert_eq!(got, want, "-s {slot}");
        if let Some(lspci) = h.lspci(&["-s", slot]) {
            let ours: Vec<&str> = lspci.iter().filter_map(|l| l.split(' ').next()).collect();
            assert_eq!(ours, want, "lspci -s {slot}");
        }
    }
    assert_eq!(h.picked(&["-s", ".0"]), all, "every function is function 0");
    assert_eq!(h.picked(&["-s", ""]), all);
    assert_eq!(h.picked(&["--slot", "*"]), all);
    assert_eq!(h.picked(&["-s", "1.0"]).len(), 8, "root ports and dsp 1");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn id_selects_as_lspci_d_by_vendor_device_class_with_x_digits_and_prog_if() {
    let h = start().await;
    let count = |d: &str| h.picked(&["-d", d]).len();
    assert_eq!(count("10de:"), 8);
    assert_eq!(count("10de:2335"), 8);
    assert_eq!(count(":1021"), 4);
    assert_eq!(
        count("*:c030"),
        16,
        "4 upstream and 12 downstream switch ports"
    );
    assert_eq!(count("::0604"), 20);
    assert_eq!(count("::06xx"), 20);
    assert_eq!(count("::xx02"), 8);
    assert_eq!(count("::0207:00"), 4);
    assert_eq!(count("::0207:01"), 0);
    assert_eq!(count("::03"), 0, "class 0x0003, as lspci reads it");
    assert_eq!(count("8086:c030"), 0);
    // -s and -d together: both must hold; --gpus as before.
    assert_eq!(h.picked(&["-d", "15b3:", "-s", "c"]), Vec::<String>::new());
    assert_eq!(h.picked(&["-d", "15b3:", "-s", "ca:"]), ["0000:ca:00.0"]);
    assert_eq!(h.picked(&["--gpus", "--id", "::03xx"]).len(), 8);
    for d in ["10de:", "::06xx", "::xx02", "::0207:00", "*:c030", "::03"] {
        if let Some(lspci) = h.lspci(&["-d", d]) {
            let mut ours = h.picked(&["-d", d]);
            ours.sort();
            let theirs: Vec<&str> = lspci.iter().filter_map(|l| l.split(' ').next()).collect();
            assert_eq!(ours, theirs, "lspci -d {d}");
        }
    }
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_selection_is_a_usage_error_in_lspcis_words() {
    let h = start().await;
    let cases = [
        (["-s", "0:0:0:0"], "Too many fields"),
        (["-s", "100:"], "Invalid bus number"),
        (["-s", "20"], "Invalid slot number"),
        (["-s", "1.8"], "Invalid function number"),
        (["-s", "1.2.3"], "Invalid slot/function number"),
        (["-d", "10de"], "At least two fields must be given"),
        (["-d", "1000g:"], "Invalid vendor ID"),
        (["-d", "::0g"], "Invalid class code"),
    ];
    for (args, words) in cases {
        for json in [false, true] {
            let mut a = vec!["list", args[0], args[1]];
            if json {
                a.push("--json");
            }
            let out = h.rigctl(&a);
            let stderr = String::from_utf8_lossy(&out.stderr);
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert_eq!(out.status.code(), Some(2), "{a:?}: {stderr}");
            if json {
                // Under --json the usage error is the error object on stdout.
                let v: serde_json::Value = serde_json::from_str(&stdout)
                    .unwrap_or_else(|e| panic!("{a:?}: not JSON ({e}): {stdout}"));
                assert_eq!(v["error"]["kind"], "usage", "{a:?}: {v}");
                assert!(
                    v["error"]["message"]
                        .as_str()
                        .is_some_and(|m| m.contains(words)),
                    "{a:?}: {v}"
                );
                assert!(stderr.is_empty(), "{a:?}: {stderr}");
            } else {
                assert!(stderr.contains(words), "{a:?}: {stderr}");
                assert!(
                    stdout.is_empty(),
                    "{a:?}: clap's usage error is text on stderr"
                );
            }
        }
    }
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_keeps_only_the_selected_functions_and_its_shape() {
    let h = start().await;
    let list = |args: &[&str]| -> Value {
        let mut a = vec!["list", "--json"];
        a.extend_from_slice(args);
        serde_json::from_str(&h.lines(&a).join("\n")).expect("one JSON document")
    };
    let bdfs = |v: &Value| -> Vec<String> {
        v["devices"]
            .as_array()
            .expect("devices")
            .iter()
            .map(|d| d["bdf"].as_str().expect("bdf").to_owned())
            .collect()
    };
    assert_eq!(bdfs(&list(&[])).len(), 32);
    let v = list(&["-d", "10de:", "-s", "19:"]);
    assert_eq!(bdfs(&v), [SERVED]);
    assert_eq!(v["devices"][0]["device_id"], 0x2335, "{v}");
    assert_eq!(v["problems"], Value::Array(Vec::new()));
    let v = list(&["-s", "0001:"]);
    assert_eq!(v["devices"], Value::Array(Vec::new()), "no match: {v}");
    assert_eq!(bdfs(&list(&["-d", "::02xx"])).len(), 4);
    h.stop().await;
}

/// Runs rigctl (or `program`) with stdout, or stderr when `on_stderr`, a pipe whose
/// reader has already gone: what `| head` leaves a writer.
fn into_closed_pipe(program: &Path, args: &[&str], on_stderr: bool) -> Output {
    let (read, write) = nix::unistd::pipe().expect("pipe");
    drop(read);
    let mut cmd = Command::new(program);
    cmd.args(args).stdin(Stdio::null());
    if on_stderr {
        cmd.stderr(Stdio::from(write)).stdout(Stdio::piped());
    } else {
        cmd.stdout(Stdio::from(write)).stderr(Stdio::piped());
    }
    tokio::task::block_in_place(|| cmd.output().expect("runs"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_subcommand_ends_by_sigpipe_and_silently_when_its_reader_left_as_lspci() {
    let h = start().await;
    let rigctl = Path::new(env!("CARGO_BIN_EXE_rigctl"));
    let socket = h.socket.to_str().expect("utf-8");
    let fw = h.dir.path().join("firmware");
    std::fs::create_dir_all(&fw).expect("firmware dir");
    let docs = h.dir.path().join("docs");
    let (fw, docs) = (fw.to_str().expect("utf-8"), docs.to_str().expect("utf-8"));
    let runs: Vec<Vec<&str>> = vec![
        vec!["list"],
        vec!["list", "--table"],
        vec!["list", "--json"],
        vec!["list", "-d", "10de:"],
        vec!["show", ALONE],
        vec!["show", ALONE, "-x", "--json"],
        vec!["version"],
        vec!["status"],
        vec!["dma", "--json"],
        vec!["channels"],
        vec!["queues"],
        vec!["topo"],
        vec!["firmware", "plan", "--chip", "GH100", "--firmware-dir", fw],
        vec!["generate-docs", docs, "--json"],
    ];
    for args in runs {
        let mut a = vec!["--socket", socket];
        a.extend_from_slice(&args);
        let out = into_closed_pipe(rigctl, &a, false);
        assert_eq!(
            out.status.signal(),
            Some(nix::libc::SIGPIPE),
            "{args:?}: {:?}, stderr {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.stderr.is_empty(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // An error meant for a closed stderr ends the same way (eprintln! would panic).
    let out = into_closed_pipe(rigctl, &["--socket", socket, "show", "0000:09:00.0"], true);
    assert_eq!(
        out.status.signal(),
        Some(nix::libc::SIGPIPE),
        "{:?}",
        out.status
    );
    assert!(out.stdout.is_empty());
    // lspci, for the record: the same end.
    let lspci = Path::new("/usr/bin/lspci");
    if lspci.exists() {
        let sysfs = format!("sysfs.path={}", h.sysfs.join("bus/pci").display());
        let out = into_closed_pipe(lspci, &["-A", "linux-sysfs", "-O", &sysfs], false);
        assert_eq!(
            out.status.signal(),
            Some(nix::libc::SIGPIPE),
            "{:?}",
            out.status
        );
        assert!(
            out.stderr.is_empty(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    h.stop().await;
}
