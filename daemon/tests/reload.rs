//! rigd's SIGHUP reload as systemd's `ExecReload=kill -HUP $MAINPID` drives it: the
//! rigd binary with our NOTIFY_SOCKET over this machine's sysfs (read only). A good new
//! config is put in force between RELOADING=1 (with MONOTONIC_USEC) and READY=1, its
//! log level included; a bad one is refused with one line and rigd serves on with the
//! old one. (That sessions survive and new quotas apply:
//! client/rig-client/tests/reload.rs.)

use std::{
    io::{BufRead, BufReader},
    os::unix::net::{UnixDatagram, UnixStream},
    path::{Path, PathBuf},
    process::{Child, ChildStderr, Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use nix::{sys::signal, unistd::Pid};

struct Rigd {
    child: Child,
    notify: UnixDatagram,
    stderr: mpsc::Receiver<String>,
    config: PathBuf,
    socket: PathBuf,
    dir: tempfile::TempDir,
}

fn config_text(dir: &Path, extra: &str) -> String {
    format!(
        "[paths]\nstate_dir = \"{}\"\npci_ids = \"{}\"\n[audit]\njournal_socket = \"{}\"\n{extra}",
        dir.join("state").display(),
        dir.join("pci.ids").display(),
        dir.join("no-journal").display(),
    )
}

impl Rigd {
    fn start() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let sock = dir.path().join("notify");
        let notify = UnixDatagram::bind(&sock).expect("notify socket");
        notify
            .set_read_timeout(Some(Duration::from_millis(50)))
            .expect("timeout");
        let config = dir.path().join("rigd.toml");
        std::fs::write(&config, config_text(dir.path(), "")).expect("config");
        let socket = dir.path().join("rigd.sock");
        let mut child = Command::new(env!("CARGO_BIN_EXE_rigd"))
            .arg("--config")
            .arg(&config)
            .arg("--socket")
            .arg(&socket)
            .env("NOTIFY_SOCKET", &sock)
            .env_remove("RUST_LOG")
            .env_remove("WATCHDOG_USEC")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start rigd");
        let stderr: ChildStderr = child.stderr.take().expect("stderr");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        Self {
            child,
            notify,
            stderr: rx,
            config,
            socket,
            dir,
        }
    }

    fn notes_until(&self, d: Duration, want: &str) -> Vec<String> {
        let end = Instant::now() + d;
        let mut lines = Vec::new();
        let mut buf = [0u8; 4096];
        while Instant::now() < end && !lines.iter().any(|l| l == want) {
            if let Ok(n) = self.notify.recv(&mut buf) {
                lines.extend(
                    String::from_utf8_lossy(&buf[..n])
                        .lines()
                        .map(ToOwned::to_owned),
                );
            }
        }
        lines
    }

    fn log_until(&self, d: Duration, want: impl Fn(&str) -> bool) -> Option<String> {
        let end = Instant::now() + d;
        while let Some(left) = end.checked_duration_since(Instant::now()) {
            match self.stderr.recv_timeout(left) {
                Ok(l) if want(&l) => return Some(l),
                Ok(_) => {}
                Err(_) => return None,
            }
        }
        None
    }

    fn hup(&self) {
        let pid = i32::try_from(self.child.id()).expect("a pid");
        signal::kill(Pid::from_raw(pid), signal::Signal::SIGHUP).expect("signal rigd");
    }
}

impl Drop for Rigd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn sighup_puts_a_good_config_in_force_and_refuses_a_bad_one_keeping_the_old() {
    let rigd = Rigd::start();
    // TIMEOUT: rigd reads this machine's sysfs and binds in well under 10 s.
    let start = rigd.notes_until(Duration::from_secs(10), "READY=1");
    let log: Vec<String> = rigd.stderr.try_iter().collect();
    assert!(start.iter().any(|l| l == "READY=1"), "{start:?} {log:?}");
    // A connection open across the reloads.
    let held = UnixStream::connect(&rigd.socket).expect("connect");

    std::fs::write(
        &rigd.config,
        config_text(
            rigd.dir.path(),
            "[log]\nlevel = \"debug\"\n[dma.quota]\nper_uid_bytes = 4194304\n",
        ),
    )
    .expect("new config");
    rigd.hup();
    let notes = rigd.notes_until(Duration::from_secs(10), "READY=1");
    let reloading = notes.iter().position(|l| l == "RELOADING=1");
    let ready = notes.iter().position(|l| l == "READY=1");
    assert!(reloading.is_some() && ready > reloading, "{notes:?}");
    assert!(
        notes.iter().any(|l| l.starts_with("MONOTONIC_USEC=")),
        "{notes:?}"
    );
    let line = rigd
        .log_until(Duration::from_secs(5), |l| l.contains("reloaded"))
        .expect("a reloaded line");
    assert!(line.contains("rigd.toml"), "{line}");

    // Not TOML: refused, in one line naming the file, line and column.
    std::fs::write(&rigd.config, "[log\nlevel = 1\n").expect("bad config");
    rigd.hup();
    let refused = rigd
        .log_until(Duration::from_secs(5), |l| l.contains("refused"))
        .expect("a refusal line");
    assert!(
        refused.contains("the running configuration stays") && refused.contains("rigd.toml:1:"),
        "{refused}"
    );
    let notes = rigd.notes_until(Duration::from_secs(10), "READY=1");
    assert!(notes.iter().any(|l| l == "READY=1"), "{notes:?}");

    // A group that does not exist: refused whole.
    std::fs::write(
        &rigd.config,
        config_text(
            rigd.dir.path(),
            "[roles]\nadmins = [\"no-such-group-rig\"]\n",
        ),
    )
    .expect("config");
    rigd.hup();
    let refused = rigd
        .log_until(Duration::from_secs(5), |l| l.contains("refused"))
        .expect("a refusal line");
    assert!(refused.contains("`no-such-group-rig`"), "{refused}");

    // Still serving, and the first reload's debug level stayed: the connection held
    // since before it ends without a word of HTTP/2, which the server logs at debug.
    drop(held);
    UnixStream::connect(&rigd.socket).expect("still serving");
    assert!(
        rigd.log_until(Duration::from_secs(5), |l| l.contains("DEBUG"))
            .is_some(),
        "the debug level of the good reload is in force"
    );
}
