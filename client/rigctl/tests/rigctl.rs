//! The built `rigctl` against rigd's service over the fake kernel (a temp socket, a
//! fake sysfs GPU bound to `nvidia`, a fake journal socket for the audit lines): every
//! subcommand's `--json` is one JSON document (read back with serde_json::Value), an
//! error under `--json` is `{"error": …}` with rigd's reason, device and step, each
//! exit code of the table (client/rigctl/src/exit.rs) comes from the failure it names,
//! the outcome rigctl prints is the audit line's, and steps are plain lines with rigd's
//! times when stderr is not a terminal.

use std::{
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
    process::{Command, Output},
    sync::Arc,
    time::Duration,
};

use rigd::{
    config::Config,
    rig::Rig,
    sys::sysfs::FakeKernel,
    testing::{FakeDevice, FakeJournal, FakeSysfs, JournalEntry, Serving},
};
use serde_json::Value;

const GPU: &str = "0000:03:00.0";
const SOCK_GID: u32 = 4962;
const CLIENT_GID: u32 = 4961;
const ADMIN_GID: u32 = 4960;

type Entry = JournalEntry;

struct World {
    dir: tempfile::TempDir,
    socket: PathBuf,
    rig: Arc<Rig>,
    kernel: FakeKernel,
    journal: FakeJournal,
    serving: Serving,
}

fn tree(root: &Path) -> FakeSysfs {
    let fake = FakeSysfs::new(root).expect("fake sysfs");
    let mut gpu = FakeDevice::new(GPU, 0x10de, 0x2335, 0x030200)
        .with_bar64(0, 0x1040_0200_0000, 16 << 20, true)
        .with_bar64(2, 0x1000_0000_0000, 256 << 30, true)
        .with_cap_pointer(0x60)
        .with_express(0x60, 0xb0, 0, (5, 16), (5, 16))
        .with_driver("nvidia")
        .in_group(7)
        .with_attr("reset_method", "flr bus");
    gpu.resize_files = vec![2];
    fake.add(&gpu).expect("gpu");
    fake
}

async fn start() -> World {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let fake = tree(&dir.path().join("sys"));
    let groups = dir.path().join("group");
    std::fs::write(
        &groups,
        format!("root:x:0:\nrigadm:x:{ADMIN_GID}:\nrig:x:{CLIENT_GID}:\nrigsock:x:{SOCK_GID}:\n"),
    )
    .expect("group file");
    let journal_path = dir.path().join("journal.socket");
    let journal = FakeJournal::bind(&journal_path).expect("fake journal");
    let mut config = Config::default();
    config.paths.sysfs = fake.root().to_owned();
    config.paths.pci_ids = dir.path().join("pci.ids");
    config.paths.state_dir = dir.path().join("state");
    config.paths.dev = dir.path().join("dev");
    config.paths.group_file = Some(groups);
    config.take.allow_sysfs_mode = true;
    config.roles.admins = vec!["rigadm".into()];
    config.roles.clients = vec!["rig".into()];
    config.audit.journal_socket = journal_path;
    let socket = dir.path().join("rigd.sock");
    let kernel = FakeKernel::new(fake.root(), &["nvidia", "vfio-pci"]);
    let (rig, _) = Rig::with_sysfs(&config, Arc::new(kernel.clone()));
    let rig = Arc::new(rig);
    let serving = Serving::start(Arc::clone(&rig), &socket, Some(SOCK_GID));
    World {
        dir,
        socket,
        rig,
        kernel,
        journal,
        serving,
    }
}

impl World {
    /// `rigctl --socket <ours> ARGS`, as this process (root in CI: an admin).
    fn rigctl(&self, args: &[&str]) -> Output {
        self.rigctl_as(None, args)
    }

    /// As [`World::rigctl`], as uid 4002 with the client role when `client`.
    fn rigctl_as(&self, client: Option<()>, args: &[&str]) -> Output {
        let mut cmd = match client {
            Some(()) => {
                let mut c = Command::new("setpriv");
                c.args([
                    "--reuid=4002",
                    &format!("--regid={CLIENT_GID}"),
                    &format!("--groups={SOCK_GID}"),
                ])
                .arg(env!("CARGO_BIN_EXE_rigctl"));
                c
            }
            None => Command::new(env!("CARGO_BIN_EXE_rigctl")),
        };
        cmd.arg("--socket").arg(&self.socket).args(args);
        tokio::task::block_in_place(|| cmd.output().expect("rigctl runs"))
    }

    /// The audit entries received since the last call.
    fn audit_lines(&self) -> Vec<Entry> {
        std::thread::sleep(Duration::from_millis(100));
        self.journal.take()
    }

    async fn stop(self) {
        let _ = self.serving.stop(Duration::from_secs(10)).await;
        drop(self.dir);
    }
}

/// stdout as one JSON document, and the exit code; panics with stderr otherwise.
fn json(out: &Output) -> (Value, i32) {
    let text = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| {
        panic!(
            "not one JSON document ({e}): {text}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (v, out.status.code().expect("exited"))
}

/// Runs `args --json`, wanting success: the document.
fn ok(w: &World, args: &[&str]) -> Value {
    let mut a = args.to_vec();
    a.push("--json");
    let out = w.rigctl(&a);
    let (v, code) = json(&out);
    assert_eq!(code, 0, "{args:?}: {v}");
    v
}

/// Runs `args --json`, wanting a failure: the error object and the exit code.
fn err(w: &World, args: &[&str]) -> (Value, i32) {
    let mut a = args.to_vec();
    a.push("--json");
    let out = w.rigctl(&a);
    let (v, code) = json(&out);
    let e = v
        .get("error")
        .unwrap_or_else(|| panic!("{args:?}: {v}"))
        .clone();
    assert_eq!(e["exit"].as_i64(), Some(i64::from(code)), "{e}");
    (e, code)
}

/// The steps of a take-over outcome: each has a duration, and they add up to the
/// outcome's time from the first step on.
fn check_steps(v: &Value) {
    let steps = v["steps"].as_array().expect("steps");
    assert!(!steps.is_empty(), "{v}");
    let first = steps[0]["elapsed_s"].as_f64().expect("elapsed_s");
    let total: f64 = steps
        .iter()
        .map(|s| {
            s["duration_s"]
                .as_f64()
                .expect("every step has its duration")
        })
        .inspect(|d| assert!(*d >= 0.0))
        .sum();
    let elapsed = v["elapsed_s"].as_f64().expect("elapsed_s");
    assert!((first + total - elapsed).abs() < 1e-6, "{v}");
}

fn root() -> bool {
    let yes = nix::unistd::geteuid().is_root();
    if !yes {
        eprintln!("skipped: rigd's admin role is root here (CI runs tests as root)");
    }
    yes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_subcommand_prints_one_json_document_with_the_audit_lines_outcome() {
    if !root() {
        return;
    }
    let w = start().await;
    let v = ok(&w, &["version"]);
    assert_eq!(v["api"], 1, "{v}");
    let v = ok(&w, &["list"]);
    assert_eq!(v["devices"][0]["bdf"], GPU, "{v}");
    assert_eq!(ok(&w, &["show", GPU])["bdf"], GPU);
    assert_eq!(ok(&w, &["status"])["devices"], Value::Array(vec![]));
    assert!(ok(&w, &["dma"]).is_object());
    assert!(ok(&w, &["channels"]).is_array());
    assert!(ok(&w, &["queues"]).is_array());
    let t = ok(&w, &["topo"]);
    assert_eq!(t["gpus"][0]["bdf"], GPU, "{t}");
    assert_eq!(t["pairs"][0]["pcie"], "X", "{t}");
    w.audit_lines();

    let v = ok(&w, &["detach", GPU, "--mode", "sysfs"]);
    assert_eq!(
        (&v["action"], &v["outcome"]),
        (&"detach".into(), &"ok".into())
    );
    assert_eq!(v["device"]["bdf"], GPU, "{v}");
    check_steps(&v);
    let audit = w.audit_lines();
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert_eq!(audit[0]["RIG_ACTION"], "Rig.Detach");
    assert_eq!(
        audit[0]["RIG_OUTCOME"],
        v["outcome"].as_str().expect("word")
    );

    let v = ok(&w, &["mmio", "read", GPU, "bar0:0x0", "--count", "2"]);
    assert_eq!(v["values"].as_array().map(Vec::len), Some(2), "{v}");
    let v = ok(&w, &["mmio", "write", GPU, "bar0:0x40", "7"]);
    assert_eq!(
        (v["offset"].as_u64(), v["value"].as_u64()),
        (Some(0x40), Some(7))
    );
    let v = ok(&w, &["master", GPU, "off"]);
    assert_eq!(v["on"], false, "{v}");
    let v = ok(&w, &["reset", GPU]);
    assert_eq!(v["outcome"], "ok", "{v}");
    check_steps(&v);
    assert_eq!(ok(&w, &["status"])["devices"][0]["bdf"], GPU);

    let cdi = w.dir.path().join("cdi");
    let cdi_dir = cdi.to_str().expect("utf-8");
    let v = ok(
        &w,
        &["cdi", "generate", "--dir", cdi_dir, "--rigctl", "none"],
    );
    assert_eq!(v["written"][0]["device"], GPU, "{v}");
    let v = ok(&w, &["cdi", "generate", "--stdout", "--rigctl", "none"]);
    assert_eq!(v.as_array().map(Vec::len), Some(1), "{v}");
    let v = ok(&w, &["cdi", "hook", "create-runtime", GPU]);
    assert_eq!(v["held"], true, "{v}");
    w.audit_lines();

    let v = ok(&w, &["attach", GPU]);
    assert_eq!(
        (&v["action"], &v["driver"]),
        (&"attach".into(), &"nvidia".into())
    );
    check_steps(&v);
    let audit = w.audit_lines();
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert_eq!(audit[0]["RIG_OUTCOME"], "ok");
    let v = ok(&w, &["cdi", "hook", "poststop", GPU, "--timeout-s", "1"]);
    assert_eq!(v["held"], false, "{v}");

    // Local work: no daemon involved, JSON all the same.
    let docs = w.dir.path().join("docs");
    let v = ok(&w, &["generate-docs", docs.to_str().expect("utf-8")]);
    let written = v["written"].as_array().expect("written");
    assert!(
        written
            .iter()
            .any(|p| p.as_str().is_some_and(|p| p.ends_with("man/rigctl.1"))),
        "{v}"
    );
    let man = std::fs::read_to_string(docs.join("man/rigctl.1")).expect("rigctl.1");
    assert!(
        man.contains("rigd unreachable"),
        "the exit table is in the man page"
    );
    let junk = w.dir.path().join("junk.bin");
    std::fs::write(&junk, b"not firmware").expect("junk");
    let out = w.rigctl(&[
        "firmware",
        "inspect",
        junk.to_str().expect("utf-8"),
        "--json",
    ]);
    let (v, code) = json(&out);
    assert_eq!(code, 1, "an unreadable file fails inspect: {v}");
    assert!(v[0]["error"].is_string(), "{v}");

    // One scrape of rigd's metrics socket: the calls above are counted (the counts are
    // the process's, and this binary's other tests call too: at least).
    let metrics = w.dir.path().join("metrics.sock");
    let _served = rigd::service::metrics::serve(
        Arc::clone(&w.rig),
        rigd::config::MetricsListen::Unix(metrics.clone()),
        None,
    )
    .await
    .expect("metrics socket");
    let from = format!("unix:{}", metrics.display());
    let v = ok(&w, &["metrics", "--from", &from]);
    let samples = v["samples"].as_array().expect("samples");
    let value = |name: &str, label: (&str, &str)| {
        samples
            .iter()
            .filter(|s| s["name"] == name && s["labels"][label.0] == label.1)
            .map(|s| s["value"].as_f64().expect("a number"))
            .sum::<f64>()
    };
    assert!(
        samples
            .iter()
            .any(|s| s["name"] == "rig_up" && s["value"] == 1.0),
        "{v}"
    );
    assert!(value("rig_rpc_requests_total", ("method", "Rig.Detach")) >= 1.0);
    assert!(value("rig_rpc_requests_total", ("method", "Rig.Attach")) >= 1.0);
    assert!(value("rig_rpc_requests_total", ("method", "Rig.Status")) >= 3.0);
    let out = w.rigctl(&["metrics", "--from", &from]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("# TYPE rig_rpc_requests counter"),
        "the text as rigd serves it"
    );
    w.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_exit_code_comes_from_the_failure_it_names() {
    if !root() {
        return;
    }
    let w = start().await;
    // 2: clap's usage error (text on stderr, --json or not), and an address rigd
    // refuses as malformed.
    let out = w.rigctl(&["detach", "--json"]);
    assert_eq!(out.status.code(), Some(2));
    let (e, code) = err(&w, &["show", "not-an-address"]);
    assert_eq!((code, &e["reason"]), (2, &"BAD_ADDRESS".into()), "{e}");
    // 3: nobody at the socket.
    let gone = w.dir.path().join("nobody.sock");
    let out = Command::new(env!("CARGO_BIN_EXE_rigctl"))
        .arg("--socket")
        .arg(&gone)
        .args(["list", "--json"])
        .output()
        .expect("rigctl");
    let (v, code) = json(&out);
    assert_eq!(
        (code, &v["error"]["kind"]),
        (3, &"unreachable".into()),
        "{v}"
    );
    assert_eq!(v["error"]["reason"], Value::Null);
    // 5: no such device; none rig holds.
    let (e, code) = err(&w, &["show", "0000:09:00.0"]);
    assert_eq!((code, &e["reason"]), (5, &"NO_DEVICE".into()), "{e}");
    let (e, code) = err(&w, &["attach", GPU]);
    assert_eq!(
        (code, &e["reason"], &e["device"]),
        (5, &"NOT_HELD".into(), &GPU.into())
    );
    // 6: held already.
    ok(&w, &["detach", GPU, "--mode", "sysfs"]);
    let (e, code) = err(&w, &["detach", GPU, "--mode", "sysfs"]);
    assert_eq!((code, &e["reason"]), (6, &"ALREADY_HELD".into()), "{e}");
    // 8: a hardware step failed, and the step is named; the outcome is the audit's.
    w.audit_lines();
    w.kernel.script.lock().expect("script").reset_errno = Some(nix::errno::Errno::EIO as i32);
    let (e, code) = err(&w, &["reset", GPU, "--method", "flr"]);
    assert_eq!(
        (code, &e["reason"], &e["step"]),
        (8, &"RESET_FAILED".into(), &"reset".into())
    );
    assert_eq!(e["outcome"], "failed", "{e}");
    let audit = w.audit_lines();
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert_eq!(audit[0]["RIG_OUTCOME"], "failed");
    assert_eq!(audit[0]["RIG_REASON"], "RESET_FAILED");
    w.kernel.script.lock().expect("script").reset_errno = None;
    // 4: a client asking for an admin's action; the refusal is audited as denied.
    let out = w.rigctl_as(Some(()), &["master", GPU, "off", "--json"]);
    let (v, code) = json(&out);
    assert_eq!(
        (code, &v["error"]["reason"]),
        (4, &"NOT_ADMIN".into()),
        "{v}"
    );
    assert_eq!(v["error"]["outcome"], "denied");
    let audit = w.audit_lines();
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert_eq!(audit[0]["RIG_OUTCOME"], "denied");
    ok(&w, &["attach", GPU]);
    // 7: an unbind that outlasts its timeout (the fake's nvidia holds on for 3 s).
    w.kernel.script.lock().expect("script").unbind_hangs =
        Some(("nvidia".into(), Duration::from_secs(3)));
    let (e, code) = err(&w, &["detach", GPU, "--mode", "sysfs", "--timeout", "1"]);
    assert_eq!(
        (code, &e["reason"], &e["step"]),
        (7, &"UNBIND_TIMEOUT".into(), &"unbind".into())
    );
    // A cdi hook's device that rig does not hold is 5 as well, named. (1, anything
    // else: firmware inspect of an unreadable file, in the test above.)
    let (e, code) = err(&w, &["cdi", "hook", "create-runtime", "0000:09:00.0"]);
    assert_eq!((code, &e["device"]), (5, &"0000:09:00.0".into()), "{e}");
    w.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steps_are_plain_lines_with_rigds_times_when_stderr_is_not_a_terminal() {
    if !root() {
        return;
    }
    let w = start().await;
    // A 1.5 s unbind: its step's line comes as it starts, and its duration in the
    // outcome is the wait's.
    w.kernel.script.lock().expect("script").unbind_hangs =
        Some(("nvidia".into(), Duration::from_millis(1500)));
    let out = w.rigctl(&["detach", GPU, "--mode", "sysfs"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stderr}");
    assert!(
        !stderr.contains('\r') && !stderr.contains('\x1b'),
        "no redraws: {stderr:?}"
    );
    let lines: Vec<&str> = stderr.lines().collect();
    assert!(lines.len() >= 3, "{stderr}");
    for l in &lines {
        let (time, _) = l
            .trim_start()
            .strip_prefix('[')
            .and_then(|l| l.split_once("s] "))
            .unwrap_or_else(|| panic!("not a step line: {l:?}"));
        time.trim().parse::<f64>().expect("rigd's seconds");
    }
    assert!(
        lines
            .iter()
            .any(|l| l.ends_with(&format!("unbind {GPU} from nvidia"))),
        "{stderr}"
    );
    assert!(!stdout.trim().is_empty(), "the outcome on stdout");
    w.kernel.script.lock().expect("script").unbind_hangs = None;
    let v = ok(&w, &["attach", GPU]);
    check_steps(&v);
    // The same detach under --json: no lines, the wait in the unbind step's duration.
    w.kernel.script.lock().expect("script").unbind_hangs =
        Some(("nvidia".into(), Duration::from_millis(1500)));
    let out = w.rigctl(&["detach", GPU, "--mode", "sysfs", "--json"]);
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (v, _) = json(&out);
    let unbind = v["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .find(|s| s["text"].as_str().is_some_and(|t| t.starts_with("unbind")))
        .expect("the unbind step")
        .clone();
    let d = unbind["duration_s"].as_f64().expect("duration");
    assert!((1.4..10.0).contains(&d), "{unbind}");
    w.stop().await;
}

/// rigctl with no rigd and no colour: for what it answers before it connects.
fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rigctl"))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("rigctl runs")
}

#[test]
fn a_usage_error_under_json_is_the_error_object_and_plain_text_without() {
    for args in [
        &["list", "--bogus", "--json"][..],
        &["--json", "take"],
        &["--json", "nosuch"],
    ] {
        let (v, code) = json(&run(args));
        assert_eq!(code, 2, "{args:?}: {v}");
        let e = &v["error"];
        assert_eq!(e["kind"], "usage", "{args:?}: {v}");
        assert_eq!(e["exit"], 2);
        assert!(!e["message"].as_str().unwrap_or("").is_empty(), "{v}");
        assert!(e["causes"].as_array().is_some_and(|c| !c.is_empty()), "{v}");
    }
    let out = run(&["list", "--bogus"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty(), "text goes to stderr");
    assert!(String::from_utf8_lossy(&out.stderr).contains("unexpected argument"));
    // After `--` a "--json" is an argument, not the flag.
    let out = run(&["nosuch", "--", "--json"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let help = run(&["--json", "--help"]);
    assert_eq!(help.status.code(), Some(0), "help stays text");
    assert!(String::from_utf8_lossy(&help.stdout).contains("Usage"));
}

#[test]
fn flags_that_take_one_of_a_set_list_it_and_refuse_others() {
    for (cmd, words) in [
        ("detach", "[possible values: vfio, sysfs]"),
        ("reset", "[possible values: auto, flr, pm, bus]"),
    ] {
        let help = String::from_utf8_lossy(&run(&[cmd, "--help"]).stdout).into_owned();
        assert!(help.contains(words), "{cmd} --help: {help}");
    }
    let out = run(&["reset", "0000:00:00.0", "--method", "warm"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("possible values: auto, flr, pm, bus"));
}
