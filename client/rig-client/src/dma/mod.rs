//! DMA pools as rigd reports them: each pool's blocks and what each session uses,
//! host memory and GPU memory, and each served GPU's GPU memory in all (`Dma.Status`,
//! [`Client::dma_status`]; `rigctl dma` prints it). Part of the `--json`
//! schema: snake_case, sizes in bytes, absent values `null`.
//!
//! Flow: a report, read over the main socket like the device listing; nothing here
//! leases. Not here: the memory itself, which a session leases and maps
//! (`session`: its ledger and the buffers carved from it), and the other reports of
//! what rigd lends (`channel`, `queue`).

use rig_proto::v1::{self as pb, dma_client::DmaClient};
use serde::{Deserialize, Serialize};

use crate::{Client, ClientError, session::Addressing};

impl Client {
    /// DMA pools and per-client use (every session for root, the caller's own
    /// otherwise).
    ///
    /// # Errors
    /// [`ClientError::Rpc`] with the daemon's reason, or [`ClientError::DaemonTooOld`].
    pub async fn dma_status(&mut self) -> Result<DmaStatus, ClientError> {
        let r = DmaClient::new(self.channel())
            .status(pb::DmaStatusRequest {})
            .await;
        Ok(self.reply(r).await?.into())
    }
}

/// Pools and sessions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DmaStatus {
    pub pools: Vec<PoolStatus>,
    /// Every session for root; the caller's own otherwise.
    pub clients: Vec<ClientUse>,
    pub quota_per_uid_bytes: u64,
    pub quota_per_device_bytes: u64,
    /// Each served GPU's lent GPU memory (`gpumem`).
    pub gpu_memory: Vec<GpuMemoryStatus>,
}

/// One served GPU's GPU memory in all.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuMemoryStatus {
    pub gpu: String,
    /// In sessions' allocations now.
    pub lent_bytes: u64,
    /// Memory lent with a CPU view, kept for its uid and idle now.
    pub kept_bytes: u64,
    /// The quotas in force: one uid's sessions together, and all of them.
    pub per_uid_bytes: u64,
    pub per_gpu_bytes: u64,
}

/// One device's pool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PoolStatus {
    pub name: String,
    pub addressing: Addressing,
    pub block_bytes: u64,
    pub target_blocks: u32,
    pub free_blocks: u32,
    pub leased_blocks: u32,
    /// Reached by a device without an IOMMU: kept until the device is reset.
    pub quarantined_blocks: u32,
    /// Still being pinned (start-up or refill).
    pub pinning_blocks: u32,
    /// The initial fill's rate, once done.
    pub pin_gib_per_s: Option<f64>,
    /// The last pinning failure.
    pub problem: Option<String>,
}

/// One session's use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientUse {
    pub session: u64,
    pub uid: u32,
    pub pid: i32,
    pub device: String,
    pub leases: u32,
    pub bytes: u64,
    /// Its side socket is attached.
    pub claimed: bool,
    /// GPU memory it holds on a served GPU: allocations and bytes.
    pub gpu_memory_allocations: u32,
    pub gpu_memory_bytes: u64,
}

impl From<pb::DmaStatusReply> for DmaStatus {
    fn from(r: pb::DmaStatusReply) -> Self {
        Self {
            pools: r
                .pools
                .into_iter()
                .map(|p| PoolStatus {
                    addressing: Addressing::from_wire(p.addressing),
                    name: p.name,
                    block_bytes: p.block_bytes,
                    target_blocks: p.target_blocks,
                    free_blocks: p.free_blocks,
                    leased_blocks: p.leased_blocks,
                    quarantined_blocks: p.quarantined_blocks,
                    pinning_blocks: p.pinning_blocks,
                    pin_gib_per_s: (p.pin_gib_per_s > 0.0).then_some(p.pin_gib_per_s),
                    problem: (!p.problem.is_empty()).then_some(p.problem),
                })
                .collect(),
            clients: r
                .clients
                .into_iter()
                .map(|c| ClientUse {
                    session: c.session,
                    uid: c.uid,
                    pid: c.pid,
                    device: c.device,
                    leases: c.leases,
                    bytes: c.bytes,
                    claimed: c.claimed,
                    gpu_memory_allocations: c.gpu_memory_allocations,
                    gpu_memory_bytes: c.gpu_memory_bytes,
                })
                .collect(),
            quota_per_uid_bytes: r.quota_per_uid_bytes,
            quota_per_device_bytes: r.quota_per_device_bytes,
            gpu_memory: r
                .gpu_memory
                .into_iter()
                .map(|g| GpuMemoryStatus {
                    gpu: g.gpu,
                    lent_bytes: g.lent_bytes,
                    kept_bytes: g.kept_bytes,
                    per_uid_bytes: g.per_uid_bytes,
                    per_gpu_bytes: g.per_gpu_bytes,
                })
                .collect(),
        }
    }
}
