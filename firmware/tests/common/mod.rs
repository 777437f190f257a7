//! Shared helpers of the real-file tests.
#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::cast_possible_truncation,
    reason = "shared by several test files, each using part of it: an expectation would go unfulfilled in some"
)]

use std::path::{Path, PathBuf};

/// The unpacked Debian firmware (`RIG_FIRMWARE_ROOT`, i.e. DEST/lib/firmware of
/// `scripts/fetch-debian-firmware.sh DEST`). `None` (and a message) when unset outside CI; a
/// failure when `CI` is set, so CI cannot pass by skipping.
pub fn firmware_root(test: &str) -> Option<PathBuf> {
    match std::env::var_os("RIG_FIRMWARE_ROOT") {
        Some(root) => {
            let root = PathBuf::from(root);
            assert!(
                root.join("nvidia").is_dir() && root.join("amdgpu").is_dir(),
                "RIG_FIRMWARE_ROOT={} has no nvidia/ and amdgpu/ directories",
                root.display()
            );
            Some(root)
        }
        None if std::env::var_os("CI").is_some() => {
            panic!(
                "{test}: RIG_FIRMWARE_ROOT unset and CI set: run firmware/scripts/fetch-debian-firmware.sh first"
            )
        }
        None => {
            // Straight to fd 2: the test harness captures eprintln! of passing tests, and a
            // skip must be seen.
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "{test}: skipped: RIG_FIRMWARE_ROOT unset"
            );
            None
        }
    }
}

/// Regular files (symlinks followed) directly in `dir`, sorted.
pub fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    out.sort();
    out
}

/// Subdirectories (symlinks followed) of `dir`, sorted.
pub fn dirs_in(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    out.sort();
    out
}

/// The NVIDIA files that must parse: everything under nvidia/*/gsp/ and nvidia/<version>/.
pub fn nvidia_files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for d in dirs_in(&root.join("nvidia")) {
        let name = d.file_name().unwrap().to_string_lossy().into_owned();
        if name.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
            out.extend(files_in(&d));
        } else {
            out.extend(files_in(&d.join("gsp")));
        }
    }
    out
}

/// The error and its causes, joined by ": ".
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

/// Prints a line straight to stderr, past the test harness's capture, so the counts of the
/// real-file tests show in a plain `cargo test`.
pub fn say(line: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{line}");
}
