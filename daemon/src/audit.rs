//! Audit lines: one journal entry per privileged action (the admin role's RPCs,
//! whole-device leases) and per refusal of any action, with structured fields.
//!
//! Flow: `service::gate` opens a [`Pending`] for a privileged RPC before its handler
//! runs and puts it in the request; the handler sets the device and the outcome; the
//! line is written when the last copy of the `Pending` drops, so an RPC whose handler
//! forgets it still leaves a line (outcome `unknown`). Refusals are written at once
//! ([`Audit::denied`]). The side socket's whole-device leases open theirs there.
//!
//! Sink: the journal's native socket (`sys::journal`, `[audit] journal_socket`), with
//! `MESSAGE_ID` [`MESSAGE_ID`] (`journalctl MESSAGE_ID=…` lists them all) and
//! `OBJECT_PID` (journald adds the caller's `OBJECT_UID`, `OBJECT_COMM`, `OBJECT_EXE`…
//! for a privileged sender); where the socket is missing or refuses, a tracing line at
//! info with the same fields (target `rigd::audit`). A client can cause refusals at
//! will: journald's own rate limit (`RateLimitBurst=`) bounds them.
//!
//! Fields: `RIG_ACTION` (`Rig.Detach`, `side.lease_device`), `RIG_DEVICE`, `RIG_UID`,
//! `RIG_GID`, `RIG_PID`, `RIG_COMM` (from /proc/<pid>/comm), `RIG_ROLE` (the caller's),
//! `RIG_OUTCOME` (`ok`, `denied`, `failed`, `unknown`), `RIG_REASON` (the ErrorInfo
//! reason of a refusal or failure), `RIG_ERROR` (its line), `RIG_DURATION_US`.

use std::{
    path::{Path, PathBuf},
    sync::{Arc, Mutex, PoisonError},
    time::Instant,
};

use rig_sys::scm::PeerCred;

use crate::sys::journal::Journal;

/// The `MESSAGE_ID` of every audit entry (a random 128-bit id, fixed forever).
pub const MESSAGE_ID: &str = "cdda6158205a434090b81f7f96ce785b";

/// How an action ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    /// Refused by the policy (or another permission check), before any work.
    Denied {
        reason: String,
        message: String,
    },
    Failed {
        reason: String,
        message: String,
    },
}

impl Outcome {
    pub fn word(&self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Denied { .. } => "denied",
            Self::Failed { .. } => "failed",
        }
    }
}

/// Where audit lines go.
#[derive(Debug)]
pub struct Audit {
    journal: Option<Journal>,
    proc_root: PathBuf,
}

/// Who asked for what.
#[derive(Debug, Clone)]
pub struct Actor {
    pub cred: PeerCred,
    /// The caller's role, if it has one.
    pub role: Option<&'static str>,
}

impl Audit {
    /// Lines to the journal at `journal_socket` (or the log where it is missing);
    /// callers' names read from `proc_root`.
    pub fn new(journal_socket: &Path, proc_root: &Path) -> Self {
        Self {
            journal: Journal::new(journal_socket).ok(),
            proc_root: proc_root.to_owned(),
        }
    }

    /// Opens the line of a privileged action; it is written when the last copy drops.
    pub fn begin(self: &Arc<Self>, action: &str, actor: Actor) -> Pending {
        Pending(Arc::new(Record {
            audit: Arc::clone(self),
            action: action.to_owned(),
            actor,
            start: Instant::now(),
            end: Mutex::new(End::default()),
        }))
    }

    /// Writes the line of a refused action at once.
    pub fn denied(self: &Arc<Self>, action: &str, actor: Actor, reason: &str, message: &str) {
        let p = self.begin(action, actor);
        p.finish(Outcome::Denied {
            reason: reason.to_owned(),
            message: message.to_owned(),
        });
    }

    fn comm(&self, pid: i32) -> String {
        if pid <= 0 {
            return String::new();
        }
        std::fs::read_to_string(self.proc_root.join(format!("{pid}/comm")))
            .map(|s| s.trim_end().to_owned())
            .unwrap_or_default()
    }

    fn write(&self, r: &Record, end: &End) {
        let c = r.actor.cred;
        let comm = self.comm(c.pid);
        let device = end.device.clone().unwrap_or_default();
        let outcome = end.outcome.as_ref();
        let word = outcome.map_or("unknown", Outcome::word);
        let (reason, error) = match outcome {
            Some(Outcome::Denied { reason, message } | Outcome::Failed { reason, message }) => {
                (reason.as_str(), message.as_str())
            }
            _ => ("", ""),
        };
        let micros = r.start.elapsed().as_micros();
        let mut message = format!("audit: {}", r.action);
        if !device.is_empty() {
            message.push_str(&format!(" {device}"));
        }
        message.push_str(&format!(
            " by uid {} (pid {}{}): {word} in {:.3} ms",
            c.uid,
            c.pid,
            if comm.is_empty() {
                String::new()
            } else {
                format!(" {comm}")
            },
            micros as f64 / 1000.0
        ));
        if !error.is_empty() {
            message.push_str(&format!(": {error}"));
        }
        let (uid, gid, pid, us) = (
            c.uid.to_string(),
            c.gid.to_string(),
            c.pid.to_string(),
            micros.to_string(),
        );
        let priority = if matches!(outcome, Some(Outcome::Ok)) {
            "6"
        } else {
            "5"
        };
        let mut fields = vec![
            ("MESSAGE", message.as_str()),
            ("MESSAGE_ID", MESSAGE_ID),
            ("PRIORITY", priority),
            ("SYSLOG_IDENTIFIER", "rigd"),
            ("RIG_ACTION", r.action.as_str()),
            ("RIG_DEVICE", device.as_str()),
            ("RIG_UID", uid.as_str()),
            ("RIG_GID", gid.as_str()),
            ("RIG_PID", pid.as_str()),
            ("RIG_COMM", comm.as_str()),
            ("RIG_ROLE", r.actor.role.unwrap_or("none")),
            ("RIG_OUTCOME", word),
            ("RIG_REASON", reason),
            ("RIG_ERROR", error),
            ("RIG_DURATION_US", us.as_str()),
        ];
        if c.pid > 0 {
            fields.push(("OBJECT_PID", pid.as_str()));
        }
        let sent = self.journal.as_ref().map(|j| j.send(&fields));
        if !matches!(sent, Some(Ok(()))) {
            tracing::info!(
                target: "rigd::audit",
                action = %r.action,
                device,
                uid = c.uid,
                gid = c.gid,
                pid = c.pid,
                comm,
                role = r.actor.role.unwrap_or("none"),
                outcome = word,
                reason,
                error,
                duration_us = %us,
                "{message}"
            );
        }
    }
}

#[derive(Debug, Default)]
struct End {
    device: Option<String>,
    outcome: Option<Outcome>,
}

#[derive(Debug)]
struct Record {
    audit: Arc<Audit>,
    action: String,
    actor: Actor,
    start: Instant,
    end: Mutex<End>,
}

impl Drop for Record {
    fn drop(&mut self) {
        let end = std::mem::take(self.end.get_mut().unwrap_or_else(PoisonError::into_inner));
        self.audit.write(self, &end);
    }
}

/// A privileged action's line, open until its last copy drops.
#[derive(Debug, Clone)]
pub struct Pending(Arc<Record>);

impl Pending {
    fn end(&self) -> std::sync::MutexGuard<'_, End> {
        self.0.end.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Names the device the action is on.
    pub fn device(&self, device: impl ToString) {
        self.end().device = Some(device.to_string());
    }

    /// Sets the outcome (the last one set is written).
    pub fn outcome(&self, outcome: Outcome) {
        self.end().outcome = Some(outcome);
    }

    /// Sets the outcome and lets this copy go.
    pub fn finish(self, outcome: Outcome) {
        self.outcome(outcome);
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::net::UnixDatagram;

    use super::*;
    use crate::sys::journal::decode;

    fn fields(sock: &UnixDatagram) -> std::collections::BTreeMap<String, String> {
        let mut buf = vec![0u8; 4096];
        let n = sock.recv(&mut buf).expect("an entry");
        decode(&buf[..n]).expect("decodes").into_iter().collect()
    }

    #[test]
    fn one_line_with_every_field_is_written_when_the_last_copy_drops() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("journal");
        let sock = UnixDatagram::bind(&path).expect("bind");
        sock.set_nonblocking(true).expect("nonblocking");
        let proc = dir.path().join("proc/42");
        std::fs::create_dir_all(&proc).expect("proc");
        std::fs::write(proc.join("comm"), "rigctl\n").expect("comm");
        let audit = Arc::new(Audit::new(&path, &dir.path().join("proc")));
        let actor = Actor {
            cred: PeerCred {
                uid: 1000,
                gid: 100,
                pid: 42,
            },
            role: Some("admin"),
        };
        let p = audit.begin("Rig.Reset", actor);
        let copy = p.clone();
        copy.device("0000:03:00.0");
        drop(copy);
        assert!(sock.recv(&mut [0u8; 16]).is_err(), "not yet: one copy left");
        p.finish(Outcome::Failed {
            reason: "NO_RESET_METHOD".into(),
            message: "no reset".into(),
        });
        let f = fields(&sock);
        assert_eq!(f["RIG_ACTION"], "Rig.Reset");
        assert_eq!(f["RIG_DEVICE"], "0000:03:00.0");
        assert_eq!(f["RIG_UID"], "1000");
        assert_eq!(f["RIG_PID"], "42");
        assert_eq!(f["RIG_COMM"], "rigctl");
        assert_eq!(f["RIG_OUTCOME"], "failed");
        assert_eq!(f["RIG_REASON"], "NO_RESET_METHOD");
        assert_eq!(f["MESSAGE_ID"], MESSAGE_ID);
        f["RIG_DURATION_US"].parse::<u64>().expect("microseconds");
        assert!(
            f["MESSAGE"].starts_with(
                "audit: Rig.Reset 0000:03:00.0 by uid 1000 (pid 42 rigctl): failed in "
            ),
            "{}",
            f["MESSAGE"]
        );
        assert!(sock.recv(&mut [0u8; 16]).is_err(), "exactly one line");
    }

    #[test]
    fn a_forgotten_outcome_is_written_as_unknown_and_a_missing_journal_is_not_fatal() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("journal");
        let sock = UnixDatagram::bind(&path).expect("bind");
        let audit = Arc::new(Audit::new(&path, dir.path()));
        let actor = Actor {
            cred: PeerCred {
                uid: 0,
                gid: 0,
                pid: 0,
            },
            role: Some("admin"),
        };
        drop(audit.begin("Rig.Attach", actor.clone()));
        assert_eq!(fields(&sock)["RIG_OUTCOME"], "unknown");
        let nowhere = Arc::new(Audit::new(&dir.path().join("none"), dir.path()));
        nowhere.denied("Rig.Detach", actor, "NOT_ADMIN", "no");
    }
}
