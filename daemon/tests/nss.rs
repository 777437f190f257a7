//! Groups from the system's name service, not only /etc/group: a group that only NSS
//! knows (served by nss_wrapper, Debian's libnss-wrapper, preloaded into rigd) owns the
//! socket when `[server] group` names it and no `[paths] group_file` is set. The rigd
//! binary over this machine's sysfs (read only, as tests/watchdog.rs), as root: the
//! socket's group is set with chown.

use std::{
    fs::File,
    os::unix::fs::{MetadataExt, PermissionsExt},
    path::Path,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use nix::{sys::signal, unistd::Pid};

/// Debian's libnss-wrapper (scripts/test installs it).
const NSS_WRAPPER: &str = "/usr/lib/x86_64-linux-gnu/libnss_wrapper.so";
/// A group no /etc/group has.
const GROUP: &str = "rig-nss-only";
const GID: u32 = 4_242_424;

#[test]
fn a_group_only_nss_knows_owns_the_socket() {
    assert!(
        Path::new(NSS_WRAPPER).exists(),
        "{NSS_WRAPPER} is missing: apt install libnss-wrapper"
    );
    let etc = std::fs::read_to_string("/etc/group").unwrap_or_default();
    assert!(
        !etc.lines().any(|l| l.starts_with(&format!("{GROUP}:"))),
        "/etc/group must not have {GROUP} for this test to mean anything"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    std::fs::write(d.join("passwd"), "root:x:0:0:root:/root:/bin/sh\n").expect("passwd");
    std::fs::write(d.join("group"), format!("root:x:0:\n{GROUP}:x:{GID}:\n")).expect("group");
    let config = d.join("rigd.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\ngroup = \"{GROUP}\"\n[paths]\nstate_dir = \"{}\"\npci_ids = \"{}\"\n",
            d.join("state").display(),
            d.join("pci.ids").display()
        ),
    )
    .expect("config");
    let log = d.join("rigd.log");
    let out = File::create(&log).expect("log file");
    let socket = d.join("rigd.sock");
    let mut child = Command::new(env!("CARGO_BIN_EXE_rigd"))
        .arg("--config")
        .arg(&config)
        .arg("--socket")
        .arg(&socket)
        .env("LD_PRELOAD", NSS_WRAPPER)
        .env("NSS_WRAPPER_PASSWD", d.join("passwd"))
        .env("NSS_WRAPPER_GROUP", d.join("group"))
        .env_remove("NOTIFY_SOCKET")
        .stdin(Stdio::null())
        .stdout(out.try_clone().expect("dup"))
        .stderr(out)
        .spawn()
        .expect("start rigd");
    // TIMEOUT: rigd reads this machine's sysfs before it serves; a debug build on a
    // loaded 2-core machine takes a few seconds.
    let end = Instant::now() + Duration::from_secs(60);
    let mut meta = None;
    while Instant::now() < end {
        if std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("serving")
        {
            meta = std::fs::metadata(&socket).ok();
            break;
        }
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let pid = Pid::from_raw(i32::try_from(child.id()).expect("pid fits"));
    let _ = signal::kill(pid, signal::Signal::SIGTERM);
    let _ = child.wait();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let meta = meta.unwrap_or_else(|| panic!("rigd did not serve:\n{text}"));
    assert_eq!(meta.gid(), GID, "the socket's group\n{text}");
    assert_eq!(meta.permissions().mode() & 0o777, 0o660, "{text}");
}

#[test]
fn a_group_nss_does_not_know_is_refused_naming_the_database() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let config = d.join("rigd.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\ngroup = \"rig-no-such-group-anywhere\"\n[paths]\nstate_dir = \"{}\"\n",
            d.join("state").display()
        ),
    )
    .expect("config");
    let out = Command::new(env!("CARGO_BIN_EXE_rigd"))
        .arg("--config")
        .arg(&config)
        .arg("--socket")
        .arg(d.join("rigd.sock"))
        .env_remove("NOTIFY_SOCKET")
        .stdin(Stdio::null())
        .output()
        .expect("run rigd");
    let text =
        String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("rig-no-such-group-anywhere")
            && text.contains("the system's group database (NSS)"),
        "{text}"
    );
}
