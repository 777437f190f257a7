//! DMA pools as rigd reports them: each pool's blocks and what each session uses,
//! host memory and GPU memory, and each served GPU's GPU memory in all (`Dma.Status`,
//! [`crate::Client::dma_status`]; `rigctl dma` prints it). The types are `rig_model::dma`'s,
//! part of the `--json` schema: snake_case, sizes in bytes, absent values `null`.
//!
//! Flow: a report, read over the main socket like the device listing; nothing here
//! leases. Not here: the memory itself, which a session leases and maps
//! (`session`: its ledger and the buffers carved from it), and the other reports of
//! what rigd lends (`channel`, `queue`).

/// The report's types are the shared vocabulary's: rigd counts into the same ones, and
/// `rig-proto` converts the reply.
pub use rig_model::dma::{ClientUse, DmaStatus, GpuMemoryStatus, PoolStatus};
