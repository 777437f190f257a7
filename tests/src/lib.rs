//! rig-tests: end-to-end tests of rig, and the disposable machine they run in.
//!
//! `vm` boots a real Linux kernel in QEMU (tests/vm/) with an emulated IOMMU and PCI
//! devices, runs scenarios inside it and returns structured results; the tests in
//! `tests/vm_*.rs` assert on them. See docs/vm.md. `kill_clients` is the clients-killed
//! campaign (docs/RELIABILITY.md), run over the fake kernel (`tests/clients_killed.rs`)
//! and in the disposable machine (`rig-kill-clients`). `probe` holds what the probe
//! binaries share.
#![deny(unsafe_code)]

pub mod kill_clients;
pub mod parity;
pub mod probe;
pub mod vm;
