//! The only module with `unsafe`: one file per kernel interface, each call a small safe
//! wrapper whose `// SAFETY:` says why it holds. The interfaces rigd shares with
//! rig-client (memfds, mappings, SCM_RIGHTS, peer credentials) are the `rig-sys` crate's
//! (daemon/sys); this module keeps what only rigd needs.

pub mod iommu;
pub mod memfd;
pub mod mmio;
pub mod pagemap;
pub mod sched;
pub mod sysfs;
pub mod systemd;
pub mod vfio;
