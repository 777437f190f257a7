//! rigd as systemd runs it with `WatchdogSec=`: the rigd binary, with a datagram
//! socket of ours as NOTIFY_SOCKET, over this machine's sysfs (read only, as
//! tests/parity_host.rs does). It must say READY=1 and what it serves (STATUS=), ping
//! WATCHDOG=1 at a quarter of WATCHDOG_USEC while it runs, fall silent while stopped
//! (SIGSTOP), ping again once continued, and never ping for another WATCHDOG_PID.

use std::{
    os::unix::net::UnixDatagram,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use nix::{sys::signal, unistd::Pid};

struct Rigd {
    child: Child,
    notify: UnixDatagram,
    _dir: tempfile::TempDir,
}

impl Rigd {
    /// rigd with a watchdog of `usec`, and WATCHDOG_PID set to `pid` if given.
    fn start(usec: u64, pid: Option<u32>) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let sock = dir.path().join("notify");
        let notify = UnixDatagram::bind(&sock).expect("notify socket");
        notify
            .set_read_timeout(Some(Duration::from_millis(50)))
            .expect("timeout");
        let config = dir.path().join("rigd.toml");
        std::fs::write(
            &config,
            format!(
                "[paths]\nstate_dir = \"{}\"\npci_ids = \"{}\"\n",
                dir.path().join("state").display(),
                dir.path().join("pci.ids").display()
            ),
        )
        .expect("config");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_rigd"));
        cmd.arg("--config")
            .arg(&config)
            .arg("--socket")
            .arg(dir.path().join("rigd.sock"))
            .env("NOTIFY_SOCKET", &sock)
            .env("WATCHDOG_USEC", usec.to_string())
            .env_remove("WATCHDOG_PID")
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some(p) = pid {
            cmd.env("WATCHDOG_PID", p.to_string());
        }
        let child = cmd.spawn().expect("start rigd");
        Self {
            child,
            notify,
            _dir: dir,
        }
    }

    /// Every notify line received within `d`.
    fn lines_for(&self, d: Duration) -> Vec<String> {
        self.lines_until(d, |_| false)
    }

    /// Notify lines until `done` holds for those received, or `d` has passed.
    fn lines_until(&self, d: Duration, done: impl Fn(&[String]) -> bool) -> Vec<String> {
        let end = Instant::now() + d;
        let mut lines = Vec::new();
        let mut buf = [0u8; 4096];
        while Instant::now() < end && !done(&lines) {
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

    fn signal(&self, s: signal::Signal) {
        let pid = i32::try_from(self.child.id()).expect("a pid");
        signal::kill(Pid::from_raw(pid), s).expect("signal rigd");
    }
}

impl Drop for Rigd {
    fn drop(&mut self) {
        self.signal(signal::Signal::SIGCONT);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn pings(lines: &[String]) -> usize {
    lines.iter().filter(|l| *l == "WATCHDOG=1").count()
}

#[test]
fn rigd_pings_the_watchdog_while_it_runs_and_not_while_stopped() {
    // 400 ms: a ping every 100 ms, a beat every 50 ms.
    let rigd = Rigd::start(400_000, None);
    // TIMEOUT: rigd reads this machine's sysfs and binds in well under 5 s.
    let status = |l: &String| l.starts_with("STATUS=Serving: 0 devices held");
    let start = rigd.lines_until(Duration::from_secs(5), |ls| {
        ls.iter().any(|l| l == "READY=1") && ls.iter().any(status)
    });
    assert!(start.iter().any(|l| l == "READY=1"), "{start:?}");
    assert!(start.iter().any(status), "{start:?}");
    let running = rigd.lines_for(Duration::from_secs(1));
    assert!(pings(&running) >= 5, "{running:?}");

    rigd.signal(signal::Signal::SIGSTOP);
    // A ping already in the socket may still arrive.
    let _ = rigd.lines_for(Duration::from_millis(100));
    let stopped = rigd.lines_for(Duration::from_secs(1));
    assert_eq!(pings(&stopped), 0, "{stopped:?}");

    rigd.signal(signal::Signal::SIGCONT);
    let again = rigd.lines_for(Duration::from_secs(2));
    assert!(pings(&again) >= 5, "{again:?}");
}

#[test]
fn rigd_does_not_ping_a_watchdog_meant_for_another_process() {
    let rigd = Rigd::start(400_000, Some(1));
    let mut lines = rigd.lines_until(Duration::from_secs(5), |ls| {
        ls.iter().any(|l| l == "READY=1")
    });
    // Five of its intervals: a rigd that took this watchdog for its own pings 20 times.
    lines.extend(rigd.lines_for(Duration::from_secs(2)));
    assert!(lines.iter().any(|l| l == "READY=1"), "{lines:?}");
    assert_eq!(pings(&lines), 0, "{lines:?}");
}
