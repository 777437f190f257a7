//! The only module with `unsafe`: one file per kernel interface, each call a small safe
//! wrapper whose `// SAFETY:` says why it holds. The interfaces rigd shares with
//! rig-client (memfds, mappings, SCM_RIGHTS, peer credentials) are the `rig-sys`
//! crate's (common/sys); this module keeps what only rigd needs.
//!
//! Lowest layer: `sys` imports nothing from `take`, `vfio`, `dma`, `rig`, `service` or
//! any other stage that calls it (it names functions by `pci`'s address types, `Bdf`
//! and `SysfsRoot`); the traits over it (`vfio::Vfio`, `dma::IommuMap`) live with
//! their stages. Fakes of kernel interfaces (`sysfs::FakeKernel`) exist only in tests
//! and the `fakes` feature.

pub mod caps;
pub mod journal;
pub mod kcmp;
pub mod memfd;
pub mod mmio;
pub mod nvrm;
pub mod nvstatus;
pub mod pagemap;
pub mod peergroups;
pub mod pidfd;
pub mod sched;
pub mod scratch;
pub mod sysfs;
pub mod systemd;
pub mod vfio;
