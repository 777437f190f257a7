//! Booting the disposable machine: a thin wrapper over `tests/vm/boot.sh`.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::outcome::{Outcome, OutcomeError};
use super::scenario::{Scenario, ScenarioError};

/// Which guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavour {
    /// A busybox initramfs: boots in seconds.
    Fast,
    /// A cached debootstrap'd Debian root with systemd (snapshot mode).
    Full,
}

/// The IOMMU the machine has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// intel-iommu, `intel_iommu=on`: DMA is translated.
    Translated,
    /// intel-iommu, `intel_iommu=on iommu=pt`: host DMA passes through, VFIO still maps.
    Passthrough,
    /// No IOMMU: no groups, so no VFIO (Debian has no no-IOMMU mode).
    NoIommu,
}

impl Flavour {
    fn arg(self) -> &'static str {
        match self {
            Flavour::Fast => "fast",
            Flavour::Full => "full",
        }
    }
}

impl Profile {
    fn arg(self) -> &'static str {
        match self {
            Profile::Translated => "translated",
            Profile::Passthrough => "passthrough",
            Profile::NoIommu => "none",
        }
    }
}

/// Why a boot could not even be judged.
#[derive(Debug, thiserror::Error)]
pub enum VmError {
    #[error("Invalid scenario")]
    Scenario(#[from] ScenarioError),
    #[error("Failed to run {script}")]
    Spawn {
        script: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("boot.sh could not set the machine up (exit {code:?}); see its output above")]
    Setup { code: Option<i32> },
    #[error("Failed to read the results of the boot")]
    Outcome(#[from] OutcomeError),
}

/// One boot to be made: a flavour, a profile and the scenarios to run, in order.
#[derive(Debug, Clone)]
pub struct Machine {
    flavour: Flavour,
    profile: Profile,
    scenarios: Vec<String>,
    timeout: Option<Duration>,
}

impl Machine {
    #[must_use]
    pub fn new(flavour: Flavour, profile: Profile) -> Machine {
        Machine {
            flavour,
            profile,
            scenarios: Vec::new(),
            timeout: None,
        }
    }

    /// Bounds the whole boot (default: boot.sh's, from the scenarios' own timeouts).
    #[must_use]
    pub fn timeout(mut self, limit: Duration) -> Machine {
        self.timeout = Some(limit);
        self
    }

    /// Adds scenarios (names of files in `tests/vm/guest/scenarios/`).
    #[must_use]
    pub fn scenarios(mut self, names: &[&str]) -> Machine {
        self.scenarios.extend(names.iter().map(|n| (*n).to_owned()));
        self
    }

    /// Boots, runs the scenarios in the guest, powers off, and reads what came back.
    /// The run folder stays under `$RIG_VM_CACHE/runs/`.
    ///
    /// # Errors
    /// [`VmError`] when a scenario file is invalid, or the machine could not be set up
    /// (tools missing: run `tests/vm/setup.sh`). A boot that hangs or crashes is not an
    /// error: it is an [`Outcome`] with that verdict.
    pub fn boot(&self) -> Result<Outcome, VmError> {
        let scenario_dir = super::vm_dir().join("guest/scenarios");
        for name in &self.scenarios {
            Scenario::load(&scenario_dir, name)?;
        }
        // Tests of one process boot from several threads: the counter keeps folders apart.
        static BOOTS: AtomicU32 = AtomicU32::new(0);
        let stamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let out = super::cache_dir().join("runs").join(format!(
            "{stamp}-{}.{}-{}-{}",
            std::process::id(),
            BOOTS.fetch_add(1, Ordering::Relaxed),
            self.flavour.arg(),
            self.profile.arg()
        ));
        let script = super::vm_dir().join("boot.sh");
        let mut command = Command::new(&script);
        command
            .args(["--flavour", self.flavour.arg()])
            .args(["--profile", self.profile.arg()])
            .arg("--out")
            .arg(&out);
        if let Some(limit) = self.timeout {
            command
                .arg("--timeout")
                .arg(limit.as_secs().max(1).to_string());
        }
        // boot.sh's stderr goes straight to the terminal: its progress and timings.
        let status = command
            .args(&self.scenarios)
            .stdout(std::process::Stdio::null())
            .status()
            .map_err(|source| VmError::Spawn {
                script: script.clone(),
                source,
            })?;
        // 0..=4 are verdicts (pass, fail, timeout, no verdict, QEMU abort); 5 is setup.
        match status.code() {
            Some(0..=4) => Ok(Outcome::load(&out)?),
            code => Err(VmError::Setup { code }),
        }
    }
}

/// One boot shared by every test of a group, made on first use: a test filter that picks
/// one test still boots once, and a full run boots once per group.
#[derive(Debug)]
pub struct SharedBoot {
    flavour: Flavour,
    profile: Profile,
    scenarios: &'static [&'static str],
    outcome: OnceLock<Result<Outcome, String>>,
}

impl SharedBoot {
    #[must_use]
    pub const fn new(
        flavour: Flavour,
        profile: Profile,
        scenarios: &'static [&'static str],
    ) -> SharedBoot {
        SharedBoot {
            flavour,
            profile,
            scenarios,
            outcome: OnceLock::new(),
        }
    }

    /// The outcome, booting on first use; `None` when VM tests are not enabled
    /// ([`super::gate`]).
    ///
    /// # Panics
    /// When the machine could not be booted at all (each test of the group reports it).
    #[must_use]
    pub fn outcome(&self) -> Option<&Outcome> {
        if !super::gate() {
            return None;
        }
        let result = self.outcome.get_or_init(|| {
            Machine::new(self.flavour, self.profile)
                .scenarios(self.scenarios)
                .boot()
                .map_err(|e| error_chain(&e))
        });
        match result {
            Ok(outcome) => Some(outcome),
            Err(e) => panic!("the disposable machine did not boot: {e}"),
        }
    }
}

fn error_chain(err: &dyn std::error::Error) -> String {
    let mut s = err.to_string();
    let mut cause = err.source();
    while let Some(e) = cause {
        s.push_str(": ");
        s.push_str(&e.to_string());
        cause = e.source();
    }
    s
}
