//! Proof that this process runs inside the disposable machine, required before any
//! take-over or reset scenario: those unbind drivers and reset devices, which must never
//! happen to the host's own PCI devices.
//!
//! Three facts must all hold, read under a root folder (`/` for real, a tempdir in tests):
//! 1. `sys/class/dmi/id/sys_vendor` is `QEMU`;
//! 2. `proc/cmdline` carries `rig.guest=NONCE` (boot.sh draws a fresh NONCE per boot);
//! 3. `run/rig-vm/guest`, written by the guest's /init, holds the same NONCE.
//!
//! A host has no `rig.guest=` on its kernel command line, so a stray marker file is not
//! enough, and a QEMU machine that tests/vm did not boot has no marker.
//!
//! Callers: the guest runner through the `rig-vm-guard` binary, and any Rust test program
//! that takes devices, through [`ensure_inside_guest`] before its first write.

use std::io;
use std::path::{Path, PathBuf};

/// DMI vendor QEMU reports (SMBIOS type 1 manufacturer).
pub const QEMU_SYS_VENDOR: &str = "QEMU";
/// The kernel command-line key that boot.sh sets to the boot's nonce.
pub const NONCE_KEY: &str = "rig.guest=";
/// The marker the guest's /init writes, relative to the root.
pub const MARKER: &str = "run/rig-vm/guest";
const SYS_VENDOR: &str = "sys/class/dmi/id/sys_vendor";
const CMDLINE: &str = "proc/cmdline";

/// Shortest nonce accepted; boot.sh draws 16 hex digits.
const NONCE_MIN_LEN: usize = 8;

/// What [`check_inside_guest`] found: the boot's nonce.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestProof {
    nonce: String,
}

impl GuestProof {
    /// The nonce of this boot (also in the run's `verdict` file on the host).
    #[must_use]
    pub fn nonce(&self) -> &str {
        &self.nonce
    }
}

/// Why the guard refused.
#[derive(Debug, thiserror::Error)]
pub enum GuardError {
    #[error("Failed to read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("Not a QEMU machine: DMI sys_vendor is {vendor:?}")]
    NotQemu { vendor: String },
    #[error("No {NONCE_KEY}NONCE on the kernel command line: tests/vm/boot.sh did not boot this")]
    NoNonce,
    #[error("The marker {path} does not hold this boot's nonce")]
    MarkerMismatch { path: PathBuf },
}

/// Checks the three facts under `root`.
///
/// # Errors
/// [`GuardError`] names the first fact that does not hold; a file that cannot be read is
/// a refusal too.
pub fn check_inside_guest(root: &Path) -> Result<GuestProof, GuardError> {
    let vendor = read_trimmed(&root.join(SYS_VENDOR))?;
    if vendor != QEMU_SYS_VENDOR {
        return Err(GuardError::NotQemu { vendor });
    }
    let cmdline = read_trimmed(&root.join(CMDLINE))?;
    let nonce = parse_nonce(&cmdline).ok_or(GuardError::NoNonce)?;
    let marker = root.join(MARKER);
    if read_trimmed(&marker)? != nonce {
        return Err(GuardError::MarkerMismatch { path: marker });
    }
    Ok(GuestProof {
        nonce: nonce.to_owned(),
    })
}

/// [`check_inside_guest`] on the real root, `/`.
///
/// # Errors
/// As [`check_inside_guest`]: on any host, at least [`GuardError::NoNonce`].
pub fn ensure_inside_guest() -> Result<GuestProof, GuardError> {
    check_inside_guest(Path::new("/"))
}

/// The value of `rig.guest=` in a kernel command line, if it is a plausible nonce
/// (at least 8 hex digits). The last occurrence wins, as for the kernel's own parameters.
#[must_use]
pub fn parse_nonce(cmdline: &str) -> Option<&str> {
    cmdline
        .split_ascii_whitespace()
        .filter_map(|word| word.strip_prefix(NONCE_KEY))
        .next_back()
        .filter(|n| n.len() >= NONCE_MIN_LEN && n.bytes().all(|b| b.is_ascii_hexdigit()))
}

fn read_trimmed(path: &Path) -> Result<String, GuardError> {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_owned())
        .map_err(|source| GuardError::Read {
            path: path.to_owned(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    const NONCE: &str = "0123456789abcdef";

    /// A root tree with the three files; `None` leaves a file out.
    fn tree(
        vendor: Option<&str>,
        cmdline: Option<&str>,
        marker: Option<&str>,
    ) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        for (rel, content) in [(SYS_VENDOR, vendor), (CMDLINE, cmdline), (MARKER, marker)] {
            if let Some(content) = content {
                let path = dir.path().join(rel);
                std::fs::create_dir_all(path.parent().expect("has a parent")).expect("mkdir");
                std::fs::write(path, format!("{content}\n")).expect("write");
            }
        }
        dir
    }

    fn guest_cmdline() -> String {
        format!("console=ttyS0 panic=-1 intel_iommu=on rig.flavour=fast {NONCE_KEY}{NONCE}")
    }

    #[test]
    fn qemu_with_nonce_and_matching_marker_is_accepted() {
        let root = tree(Some("QEMU"), Some(&guest_cmdline()), Some(NONCE));

        let proof = check_inside_guest(root.path()).expect("inside the guest");

        assert_eq!(proof.nonce(), NONCE);
    }

    #[test]
    fn a_vendor_other_than_qemu_is_refused() {
        let root = tree(Some("Dell Inc."), Some(&guest_cmdline()), Some(NONCE));

        let err = check_inside_guest(root.path()).expect_err("not QEMU");

        assert!(matches!(err, GuardError::NotQemu { vendor } if vendor == "Dell Inc."));
    }

    #[test]
    fn qemu_without_nonce_on_the_cmdline_is_refused() {
        let root = tree(
            Some("QEMU"),
            Some("console=ttyS0 root=/dev/vda"),
            Some(NONCE),
        );

        let err = check_inside_guest(root.path()).expect_err("no nonce");

        assert!(matches!(err, GuardError::NoNonce));
    }

    #[test]
    fn a_missing_marker_is_refused() {
        let root = tree(Some("QEMU"), Some(&guest_cmdline()), None);

        let err = check_inside_guest(root.path()).expect_err("no marker");

        assert!(matches!(err, GuardError::Read { path, .. } if path.ends_with(MARKER)));
    }

    #[test]
    fn a_marker_from_another_boot_is_refused() {
        let root = tree(
            Some("QEMU"),
            Some(&guest_cmdline()),
            Some("fedcba9876543210"),
        );

        let err = check_inside_guest(root.path()).expect_err("stale marker");

        assert!(matches!(err, GuardError::MarkerMismatch { .. }));
    }

    #[test]
    fn a_missing_dmi_vendor_is_refused() {
        let root = tree(None, Some(&guest_cmdline()), Some(NONCE));

        let err = check_inside_guest(root.path()).expect_err("no DMI");

        assert!(matches!(err, GuardError::Read { .. }));
    }

    #[test]
    fn the_host_running_this_test_is_refused() {
        // cargo test runs on the host, never in the disposable machine: the guard must say no.
        let err = ensure_inside_guest().expect_err("the host is not the guest");

        assert!(!matches!(err, GuardError::MarkerMismatch { .. }), "{err}");
    }

    #[test]
    fn parse_nonce_takes_the_last_plausible_value() {
        assert_eq!(
            parse_nonce("rig.guest=aaaaaaaa rig.guest=bbbbbbbb"),
            Some("bbbbbbbb")
        );
        assert_eq!(parse_nonce("a rig.guest=0123456789abcdef b"), Some(NONCE));
    }

    #[test]
    fn parse_nonce_rejects_empty_short_and_non_hex_values() {
        assert_eq!(parse_nonce("rig.guest="), None);
        assert_eq!(parse_nonce("rig.guest=1234567"), None);
        assert_eq!(parse_nonce("rig.guest=12345678"), Some("12345678"));
        assert_eq!(parse_nonce("rig.guest=zzzzzzzz"), None);
        assert_eq!(parse_nonce("xrig.guest=12345678"), None);
    }
}
