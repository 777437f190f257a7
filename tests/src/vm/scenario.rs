//! Scenarios: shell files in `tests/vm/guest/scenarios/NAME.sh` that run inside the guest.
//!
//! Each starts with a header line the guest runner and this module both read:
//! `# rig-vm: kind=takeover timeout=90`. `kind` is `inspect` (reads only), `takeover`
//! (moves a device between drivers) or `reset`; the last two run only where
//! [`super::guard`] proves we are in the guest. `timeout` is in seconds (default 120).

use std::path::{Path, PathBuf};
use std::time::Duration;

/// What a scenario does to devices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Reads only: sysfs, lspci, rigd's answers.
    Inspect,
    /// Unbinds drivers, binds vfio-pci, drives DMA.
    Takeover,
    /// Resets functions or buses.
    Reset,
}

impl Kind {
    /// Whether the guest runner asks the guard before running it.
    #[must_use]
    pub fn needs_guest(self) -> bool {
        matches!(self, Kind::Takeover | Kind::Reset)
    }
}

/// One scenario file, with its header parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scenario {
    pub name: String,
    pub kind: Kind,
    pub timeout: Duration,
}

/// Why a scenario cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("Failed to read scenario {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("Scenario {name} has no '# rig-vm: kind=...' header")]
    NoHeader { name: String },
    #[error("Scenario {name} has an unknown kind {kind:?}")]
    Kind { name: String, kind: String },
    #[error("Scenario {name} has a bad timeout {timeout:?}")]
    Timeout { name: String, timeout: String },
}

const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

impl Scenario {
    /// Reads `NAME.sh` from `dir` (normally `tests/vm/guest/scenarios`).
    ///
    /// # Errors
    /// [`ScenarioError`] if the file is missing or its header is malformed.
    pub fn load(dir: &Path, name: &str) -> Result<Scenario, ScenarioError> {
        let path = dir.join(format!("{name}.sh"));
        let text = std::fs::read_to_string(&path)
            .map_err(|source| ScenarioError::Read { path, source })?;
        Scenario::parse(name, &text)
    }

    /// Parses the `# rig-vm:` header of a scenario's text.
    ///
    /// # Errors
    /// [`ScenarioError`] for a missing header, an unknown kind or a bad timeout.
    pub fn parse(name: &str, text: &str) -> Result<Scenario, ScenarioError> {
        let header = text
            .lines()
            .find_map(|l| l.strip_prefix("# rig-vm:"))
            .ok_or_else(|| ScenarioError::NoHeader { name: name.into() })?;
        let mut kind = None;
        let mut timeout = DEFAULT_TIMEOUT;
        for field in header.split_ascii_whitespace() {
            match field.split_once('=') {
                Some(("kind", k)) => kind = Some(parse_kind(name, k)?),
                Some(("timeout", t)) => {
                    let secs = t.parse::<u64>().map_err(|_| ScenarioError::Timeout {
                        name: name.into(),
                        timeout: t.into(),
                    })?;
                    timeout = Duration::from_secs(secs);
                }
                _ => {}
            }
        }
        let kind = kind.ok_or_else(|| ScenarioError::NoHeader { name: name.into() })?;
        Ok(Scenario {
            name: name.into(),
            kind,
            timeout,
        })
    }
}

fn parse_kind(name: &str, kind: &str) -> Result<Kind, ScenarioError> {
    match kind {
        "inspect" => Ok(Kind::Inspect),
        "takeover" => Ok(Kind::Takeover),
        "reset" => Ok(Kind::Reset),
        other => Err(ScenarioError::Kind {
            name: name.into(),
            kind: other.into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_gives_kind_and_timeout() {
        let s = Scenario::parse("x", "# rig-vm: kind=takeover timeout=90\necho hi\n")
            .expect("valid header");

        assert_eq!(s.kind, Kind::Takeover);
        assert_eq!(s.timeout, Duration::from_secs(90));
        assert!(s.kind.needs_guest());
    }

    #[test]
    fn timeout_defaults_to_two_minutes() {
        let s = Scenario::parse("x", "# rig-vm: kind=inspect\n").expect("valid header");

        assert_eq!(s.timeout, DEFAULT_TIMEOUT);
        assert!(!s.kind.needs_guest());
    }

    #[test]
    fn a_scenario_without_kind_is_rejected() {
        let err = Scenario::parse("x", "# rig-vm: timeout=5\n").expect_err("no kind");

        assert!(matches!(err, ScenarioError::NoHeader { .. }));
    }

    #[test]
    fn an_unknown_kind_is_rejected() {
        let err = Scenario::parse("x", "# rig-vm: kind=wipe\n").expect_err("bad kind");

        assert!(matches!(err, ScenarioError::Kind { kind, .. } if kind == "wipe"));
    }

    /// Words that mean a scenario moves or resets a device.
    const TAKEOVER_WORDS: [&str; 5] = ["to_vfio", "/unbind", "/reset", "edu-vfio", "drivers_probe"];

    #[test]
    fn a_scenario_that_touches_drivers_or_resets_is_marked_for_the_guard() {
        let dir = crate::vm::vm_dir().join("guest/scenarios");
        for entry in std::fs::read_dir(&dir).expect("scenario folder") {
            let path = entry.expect("entry").path();
            let name = path
                .file_stem()
                .and_then(|s| s.to_str())
                .expect("utf-8 name");
            let text = std::fs::read_to_string(&path).expect("readable");
            let scenario = Scenario::parse(name, &text).expect("valid header");
            // Lines that only read (e.g. `cat .../reset_method`) do not count.
            let touches = text
                .lines()
                .filter(|l| !l.trim_start().starts_with('#'))
                .any(|l| {
                    TAKEOVER_WORDS
                        .iter()
                        .any(|w| l.contains(w) && !l.contains("reset_method"))
                });
            assert!(
                !touches || scenario.kind.needs_guest(),
                "{name} moves or resets devices but is marked {:?}",
                scenario.kind
            );
        }
    }

    #[test]
    fn every_scenario_in_the_tree_has_a_valid_header() {
        let dir = crate::vm::vm_dir().join("guest/scenarios");
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .expect("scenario folder")
            .filter_map(|e| {
                let name = e.expect("entry").file_name().into_string().expect("utf-8");
                name.strip_suffix(".sh").map(str::to_owned)
            })
            .collect();
        names.sort();

        for name in &names {
            Scenario::load(&dir, name).expect("valid scenario");
        }
        assert!(names.len() >= 4, "{names:?}");
    }
}
