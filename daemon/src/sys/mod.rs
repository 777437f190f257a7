//! The only module with `unsafe`: one file per kernel interface, each call a small safe
//! wrapper whose `// SAFETY:` says why it holds.

pub mod iommu;
pub mod memfd;
pub mod mman;
pub mod mmio;
pub mod nvrm;
pub mod nvstatus;
pub mod pagemap;
pub mod sched;
pub mod scm;
pub mod scratch;
pub mod sysfs;
pub mod systemd;
pub mod uvm;
pub mod vfio;
