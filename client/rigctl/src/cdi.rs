//! `rigctl cdi`: CDI specs for hosts without Kubernetes (`generate`, the same files
//! rig-device-plugin writes, from rig-cdi), and the OCI hooks those specs run
//! (`hook create-runtime`, `hook poststop`; docs/k8s.md says what each is for). The
//! clap definition is whole here; main.rs only dispatches to [`run`].

use std::{
    io::{Read, Write},
    path::PathBuf,
    time::{Duration, Instant},
};

use clap::Subcommand;
use rig_cdi::{self as cdi, Rule};
use rig_client::{Client, HeldState};

use crate::{
    BoxError,
    exit::{CliError, Exit},
};

#[derive(Debug, Subcommand)]
pub enum CdiCmd {
    /// Write a CDI spec for every device rigd holds (podman, containerd, Docker with
    /// CDI then take `--device rig.dev/gpu=0000:01:00.0`).
    Generate {
        /// Where the specs go.
        #[arg(long, default_value = cdi::DEFAULT_CDI_DIR)]
        dir: PathBuf,
        /// A kind and the held devices it names: NAME=gpu, NAME=class:0xCCSS or
        /// NAME=id:VVVV:DDDD; repeatable, first match wins.
        #[arg(long = "resource", default_value = "rig.dev/gpu=gpu")]
        resources: Vec<Rule>,
        /// The rigctl the specs' hooks run; `none` for no hooks.
        #[arg(long, default_value = "/usr/bin/rigctl")]
        rigctl: String,
        /// The host's /dev, as the specs' host paths name it.
        #[arg(long, default_value = "/dev")]
        dev_dir: PathBuf,
        /// The host's sysfs, as the specs' host paths name it.
        #[arg(long, default_value = "/sys")]
        sysfs_dir: PathBuf,
        /// Also remove rig's specs of devices rigd no longer holds.
        #[arg(long)]
        prune: bool,
        /// Print the specs as JSON lines instead of writing them.
        #[arg(long)]
        stdout: bool,
    },
    /// The OCI hooks a rig CDI spec names (run by the container engine, container
    /// state on stdin).
    #[command(subcommand)]
    Hook(HookCmd),
}

#[derive(Debug, Subcommand)]
pub enum HookCmd {
    /// Before the container is made: refuse a device rig does not hold, or that is
    /// leased whole to someone.
    CreateRuntime { bdf: String },
    /// After the container is gone: wait for rigd to have reclaimed and reset the
    /// device (its lease ends with the container's processes).
    Poststop {
        bdf: String,
        /// Seconds to wait for the device to be held and free again.
        #[arg(long, default_value_t = 25)]
        timeout_s: u64,
    },
}

/// The container's id from the OCI state on stdin, for the messages; `None` when the
/// hook was run by hand (a terminal) or the state has none.
fn container_id() -> Option<String> {
    use std::io::IsTerminal;
    if std::io::stdin().is_terminal() {
        return None;
    }
    let mut text = String::new();
    std::io::stdin()
        .take(1 << 20)
        .read_to_string(&mut text)
        .ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v.get("id")?.as_str().map(str::to_owned)
}

/// Whether process `pid` (as this pid namespace sees it: the host's, where the engine
/// runs hooks) still runs; a zombie has exited, its descriptors closed.
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|st| {
        st.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X")
    })
}

/// systemd-journald's native socket (systemd.journal-fields(7), "Native protocol").
const JOURNAL_SOCKET: &str = "/run/systemd/journal/socket";

/// Also puts a hook's outcome in the system journal (`journalctl -t rigctl`), best
/// effort: crun 1.8 (Debian 12's, under podman 4.3) drops a hook's stderr and reports
/// only "error executing hook `PATH` (exit code: 1)", so the reason would be lost.
fn to_journal(priority: u8, message: &str) {
    let Ok(sock) = std::os::unix::net::UnixDatagram::unbound() else {
        return;
    };
    let one_line = message.replace('\n', " ");
    let entry = format!("SYSLOG_IDENTIFIER=rigctl\nPRIORITY={priority}\nMESSAGE={one_line}\n");
    let _ = sock.send_to(entry.as_bytes(), JOURNAL_SOCKET);
}

pub async fn run(
    client: &mut Client,
    socket: &std::path::Path,
    cmd: CdiCmd,
    json: bool,
) -> Result<(), BoxError> {
    let hook = matches!(cmd, CdiCmd::Hook(_));
    let r = run_inner(client, socket, cmd, json).await;
    if hook && let Err(e) = &r {
        // LOG_ERR
        to_journal(3, &format!("cdi hook: {e}"));
    }
    r
}

async fn run_inner(
    client: &mut Client,
    socket: &std::path::Path,
    cmd: CdiCmd,
    json: bool,
) -> Result<(), BoxError> {
    match cmd {
        CdiCmd::Generate {
            dir,
            resources,
            rigctl,
            dev_dir,
            sysfs_dir,
            prune,
            stdout,
        } => {
            let host = cdi::Host {
                socket: socket.to_owned(),
                rigctl: (rigctl != "none").then(|| PathBuf::from(rigctl)),
                dev: dev_dir,
                sysfs: sysfs_dir,
            };
            let specs = cdi::held_specs(client, &resources, &host).await?;
            let mut out = crate::out::stdout();
            if stdout && json {
                // One document: the specs as an array.
                serde_json::to_writer_pretty(&mut out, &specs)?;
                writeln!(out)?;
                return Ok(());
            }
            if stdout {
                for s in &specs {
                    serde_json::to_writer(&mut out, s)?;
                    writeln!(out)?;
                }
                return Ok(());
            }
            let mut keep = Vec::new();
            let mut written = Vec::new();
            for s in &specs {
                let p = cdi::write_spec(&dir, s)?;
                keep.push(cdi::file_name(&s.kind, &s.devices[0].name));
                if !json {
                    writeln!(out, "{}={}: {}", s.kind, s.devices[0].name, p.display())?;
                }
                written.push(serde_json::json!({
                    "kind": s.kind, "device": s.devices[0].name, "path": p,
                }));
            }
            let mut removed = Vec::new();
            if prune {
                for p in cdi::remove_stale(&dir, &keep)? {
                    if !json {
                        writeln!(out, "removed {}", p.display())?;
                    }
                    removed.push(p);
                }
            }
            if json {
                let v = serde_json::json!({ "written": written, "removed": removed });
                serde_json::to_writer_pretty(&mut out, &v)?;
                writeln!(out)?;
                return Ok(());
            }
            if specs.is_empty() {
                crate::out::errln!("rigctl: rigd holds no device a rule names: no spec written");
            }
            Ok(())
        }
        CdiCmd::Hook(HookCmd::CreateRuntime { bdf }) => {
            let who = container_id().map_or_else(String::new, |id| format!(" for container {id}"));
            let status = client.status().await?;
            let Some(h) = status.devices.iter().find(|d| d.bdf == bdf) else {
                let m = format!("{bdf}: rig does not hold it: refusing to start{who}");
                return Err(CliError::new(Exit::NotFound, &bdf, m).into());
            };
            if let Some(l) = &h.lease {
                let m = format!(
                    "{bdf} is leased whole to uid {} (pid {}, session {}): refusing to start{who}",
                    l.uid, l.pid, l.session
                );
                return Err(CliError::new(Exit::Busy, &bdf, m).into());
            }
            if json {
                writeln!(
                    crate::out::stdout(),
                    "{}",
                    serde_json::json!({ "bdf": bdf, "held": true, "leased": false })
                )?;
            }
            Ok(())
        }
        CdiCmd::Hook(HookCmd::Poststop { bdf, timeout_s }) => {
            let who = container_id().map_or_else(String::new, |id| format!(" (container {id})"));
            let t0 = Instant::now();
            let deadline = Duration::from_secs(timeout_s);
            loop {
                let status = client.status().await?;
                let waited_s = t0.elapsed().as_secs_f64();
                let Some(h) = status.devices.iter().find(|d| d.bdf == bdf) else {
                    crate::out::errln!("rigctl: {bdf}: rig no longer holds it{who}");
                    if json {
                        let v =
                            serde_json::json!({ "bdf": bdf, "held": false, "waited_s": waited_s });
                        writeln!(crate::out::stdout(), "{v}")?;
                    }
                    return Ok(());
                };
                if h.state == HeldState::Held && h.lease.is_none() {
                    let line = format!("{bdf}: held and free again{who} ({waited_s:.2} s)");
                    crate::out::errln!("rigctl: {line}");
                    // LOG_INFO
                    to_journal(6, &format!("cdi hook: {line}"));
                    if json {
                        let v =
                            serde_json::json!({ "bdf": bdf, "held": true, "waited_s": waited_s });
                        writeln!(crate::out::stdout(), "{v}")?;
                    }
                    return Ok(());
                }
                // The container's processes are all gone by poststop: a holder that
                // still runs is not this container's lease ending, so waiting for it
                // would only hold the engine up (a container refused at createRuntime
                // gets a poststop too).
                if let Some(l) = h.lease.as_ref().filter(|l| alive(l.pid)) {
                    let m = format!(
                        "{bdf}: leased whole to pid {} (session {}), which still runs: not this container's lease{who}",
                        l.pid, l.session
                    );
                    return Err(CliError::new(Exit::Busy, &bdf, m).into());
                }
                if t0.elapsed() >= deadline {
                    let what = h.lease.as_ref().map_or_else(
                        || "an operation on it is still under way".to_owned(),
                        |l| {
                            format!(
                                "still leased whole to pid {} (session {})",
                                l.pid, l.session
                            )
                        },
                    );
                    let m = format!("{bdf}: {what} after {timeout_s} s{who}");
                    return Err(CliError::new(Exit::TimedOut, &bdf, m).into());
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::alive;

    #[test]
    fn alive_is_true_for_a_running_process_and_false_once_it_exited() {
        let me = i32::try_from(std::process::id()).expect("pid");
        assert!(alive(me));
        let mut child = std::process::Command::new("true").spawn().expect("spawn");
        let pid = i32::try_from(child.id()).expect("pid");
        child.wait().expect("wait");
        assert!(!alive(pid), "a reaped child is not alive");
    }

    #[test]
    fn a_zombie_is_not_alive() {
        let child = std::process::Command::new("true").spawn().expect("spawn");
        let pid = i32::try_from(child.id()).expect("pid");
        // Not reaped yet: a zombie once it exits.
        let t0 = std::time::Instant::now();
        while alive(pid) && t0.elapsed() < std::time::Duration::from_secs(5) {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(!alive(pid), "an exited, unreaped child reads as not alive");
        drop(child);
    }
}
