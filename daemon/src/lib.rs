//! rigd: takes PCI GPUs from their kernel drivers and lends them to unprivileged
//! programs over gRPC on a Unix socket.
//!
//! A request comes in at `service` (gRPC and the DMA side socket: authorisation from
//! peer credentials, proto ↔ internal types, errors to text and codes, the only place
//! that makes strings of them) and goes to `rig` (owns the devices rig holds, one lock
//! each, and the DMA pools; the only code that sequences the stages). The stages, in
//! the order a device's data flows through them:
//! - `pci`: read-only discovery and decoding (addresses, sysfs, config space);
//! - `take`: host driver → vfio-pci or driverless, BAR resize, reset, give-back, with
//!   the journal that recovery reads at start;
//! - `vfio`: the container, group and device a vfio-mode device is held through;
//! - `dma`: pinned hugepage pools, leases and device addresses (IOVA through
//!   `vfio`'s IOMMU, physical in sysfs mode);
//! - `nvme`: rigd's own driver of a held NVMe controller's admin queue;
//! - `queue`: hardware queues lent to clients, and taking them back.
//!
//! A GPU that keeps its kernel driver is served, not taken: `nvrm`, beside `take`,
//! speaks NVIDIA's RM in the layouts of the release it finds (a GPU's device, each
//! client's own GPU address space, host memory, scheduled channels), and `channels`
//! lends them: per DMA session its address space, groups and channels, their
//! descriptors for the client, the error-notifier watch, and reclaim; `gpumem` lends
//! GPU memory in each session's address space, within quotas per uid and per GPU;
//! `events` shares a semaphore page between sessions of one uid (CUDA's IPC events),
//! mapped in each one's address space, and writes the exporter's end into it.
//!
//! Every stage's error classifies itself once with `error` (the stable reason of
//! docs/errors.md, the device and the step it names), which imports nothing of the
//! crate; `service` turns that into gRPC and side-socket codes. What a DMA session holds,
//! and the order its end takes it back in, is `rig::ledger`'s.
//!
//! No stage imports `rig` or `service`, and no module imports, directly or through
//! others, a module that imports it; a module and its own submodules count as one room.
//! `scripts/modcycles.py daemon/src` checks that over whole paths (`service::dma::side`),
//! and `scripts/modcycles.py daemon/src --depth 1 --skip 'tests$|^testing|fake'` over
//! the top-level modules, the test-only ones left out (`testing` builds a whole `Rig`
//! for tests, which import it in turn). `sys` imports only `pci`'s address types;
//! `vfio` implements `dma`'s IOMMU trait and `nvrm` its per-session `DeviceMap`, and
//! `dma` knows nothing of VFIO or the RM. `config` is read once at start. `sys` is the
//! only module with `unsafe`, one file per kernel interface; what rigd shares with
//! rig-client (memfds, mappings, SCM_RIGHTS) is the `rig-sys` crate. `testing`, the
//! `Fake*` kernels and the test hooks on `Rig` (`set_peer_source`) exist only in tests
//! and with feature `fakes`; the crash self-kill only with `crash-points`.

#![deny(unsafe_code)]

pub mod audit;
pub mod channels;
pub mod config;
pub mod dma;
pub mod error;
pub mod events;
pub mod gpumem;
pub mod journal_log;
pub mod nvme;
pub mod nvrm;
pub mod pci;
pub mod policy;
pub mod queue;
pub mod rig;
pub mod service;
#[expect(
    unsafe_code,
    reason = "sys is the one module whose kernel interfaces need it"
)]
pub mod sys;
pub mod take;
#[cfg(any(test, feature = "fakes"))]
pub mod testing;
pub mod vfio;
