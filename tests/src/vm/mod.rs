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
/// returns false, so a plain `cargo test` stays fast.
///
/// # Panics
/// Under CI (env `CI` set and not empty) without `RIG_VM=1`: a CI run must not pass by
/// silently skipping the tier.
#[must_use]
pub fn gate() -> bool {
    let enabled = std::env::var("RIG_VM").is_ok_and(|v| v == "1");
    if enabled {
        return true;
    }
    let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty());
    assert!(
        !ci,
        "CI is set but RIG_VM is not 1: run the VM tier through tests/vm/run-tier.sh"
    );
    println!("skipped: set RIG_VM=1");
    false
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
