//! The disposable test machine: a real kernel in QEMU where take-over, VFIO, DMA, reset
//! and systemd run for real, on emulated devices, never on the host's.
//!
//! Flow: a test builds a [`Machine`] (flavour, profile, scenario names) → [`Machine::boot`]
//! runs `tests/vm/boot.sh`, which boots QEMU and runs the scenarios inside the guest →
//! the guest's results come back as files → [`Outcome`] parses them for assertions.
//! [`SharedBoot`] lets several tests share one boot, so CI boots once per group.
//!
//! State: everything lives under `$RIG_VM_CACHE` (default `/var/cache/rig/vm`): the kernel,
//! the images and one folder per run. Boots are serialised by a lock file in `boot.sh`.
//!
//! Safety: scenarios marked `kind=takeover` or `kind=reset` run only where [`guard`] proves
//! the process is inside the guest; the host side here only ever starts QEMU.
//!
//! Not here: the guest-side runner and scenarios (`tests/vm/guest/`), the image recipes
//! (`tests/vm/*.sh`), and the lspci ↔ rigctl comparator (its own module, fed by
//! [`parity::inputs`]).

pub mod guard;
mod machine;
mod outcome;
pub mod parity;
mod scenario;

pub use machine::{Flavour, Machine, Profile, SharedBoot, VmError};
pub use outcome::{Check, GuestDevice, Outcome, OutcomeError, ScenarioResult, Verdict};
pub use scenario::{Kind, Scenario, ScenarioError};

use std::path::PathBuf;

/// Whether VM tests should run: `RIG_VM=1`. Otherwise prints "skipped: set RIG_VM=1" and
/// returns false, so a plain `cargo test` stays fast. `RIG_VM=later` skips them under CI
/// too: the test command sets it for its unit-test step, whose one build serves its VM
/// tier, which runs them next with `RIG_VM=1`.
///
/// # Panics
/// Under CI (env `CI` set and not empty) without `RIG_VM=1` or `later`: a CI run must not
/// pass by silently skipping the tier.
#[must_use]
pub fn gate() -> bool {
    let rig_vm = std::env::var("RIG_VM").ok();
    let ci = std::env::var("CI").ok();
    match decide(rig_vm.as_deref(), ci.as_deref()) {
        Gate::Run => true,
        Gate::Skip => {
            println!("skipped: set RIG_VM=1");
            false
        }
        Gate::Later => {
            println!("skipped: the test command's VM tier runs this next");
            false
        }
        Gate::Refuse => {
            panic!("CI is set but RIG_VM is not 1: run the VM tier through tests/vm/run-tier.sh")
        }
    }
}

/// What [`gate`] does with these values of `RIG_VM` and `CI`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gate {
    Run,
    Skip,
    /// `RIG_VM=later`: the test command runs the tier after its unit tests.
    Later,
    Refuse,
}

fn decide(rig_vm: Option<&str>, ci: Option<&str>) -> Gate {
    if rig_vm == Some("1") {
        Gate::Run
    } else if rig_vm == Some("later") {
        Gate::Later
    } else if ci.is_some_and(|v| !v.is_empty()) {
        Gate::Refuse
    } else {
        Gate::Skip
    }
}

/// `tests/vm/` in this checkout: the scripts and guest files.
#[must_use]
pub fn vm_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("vm")
}

/// The cache folder: `$RIG_VM_CACHE` or `/var/cache/rig/vm`.
#[must_use]
pub fn cache_dir() -> PathBuf {
    std::env::var_os("RIG_VM_CACHE")
        .map_or_else(|| PathBuf::from("/var/cache/rig/vm"), PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rig_vm_1_runs_the_tier_with_or_without_ci() {
        assert_eq!(decide(Some("1"), None), Gate::Run);
        assert_eq!(decide(Some("1"), Some("true")), Gate::Run);
    }

    #[test]
    fn without_rig_vm_a_developer_run_skips() {
        assert_eq!(decide(None, None), Gate::Skip);
        assert_eq!(decide(Some("0"), None), Gate::Skip);
        assert_eq!(decide(None, Some("")), Gate::Skip);
    }

    #[test]
    fn rig_vm_later_skips_even_under_ci() {
        assert_eq!(decide(Some("later"), Some("true")), Gate::Later);
        assert_eq!(decide(Some("later"), None), Gate::Later);
    }

    #[test]
    fn without_rig_vm_a_ci_run_fails_instead_of_skipping() {
        assert_eq!(decide(None, Some("true")), Gate::Refuse);
        assert_eq!(decide(Some("yes"), Some("1")), Gate::Refuse);
    }
}
