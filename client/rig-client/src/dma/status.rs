//! `rigctl dma`'s data: pools and per-client use, as `Dma.Status` reports them.
//! Part of the `--json` schema: snake_case, sizes in bytes, absent values `null`.

use rig_proto::v1 as pb;
use serde::{Deserialize, Serialize};

/// How a pool's device reaches its memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Addressing {
    /// Host mode: no device; buffers have no device address.
    None,
    /// Sysfs mode: physical addresses (no IOMMU).
    Physical,
    /// Vfio mode: IOVA through the IOMMU.
    Iova,
    /// Gpu mode (an RM-served GPU): GPU VA in the session's own GPU address space.
    GpuVa,
}

impl Addressing {
    pub(crate) fn from_wire(v: i32) -> Self {
        match pb::DmaAddressing::try_from(v) {
            Ok(pb::DmaAddressing::Physical) => Self::Physical,
            Ok(pb::DmaAddressing::Iova) => Self::Iova,
            Ok(pb::DmaAddressing::GpuVa) => Self::GpuVa,
            _ => Self::None,
        }
    }
}

/// One channel lent on an RM-served GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelInfo {
    pub channel: u64,
    pub gpu: String,
    pub session: u64,
    pub uid: u32,
    pub pid: i32,
    /// "copy" or "compute"; `null` for an engine this rigctl does not know.
    pub engine: Option<crate::channel::Engine>,
    pub entries: u32,
    /// Where ring, USERD and pushbuffer live: "host" or "gpu"; `null` for a place
    /// this rigctl does not know.
    #[serde(default)]
    pub rings: Option<crate::channel::Rings>,
    pub gp_get: u32,
    pub gp_put: u32,
    /// The error the RM posted, if any.
    pub fault: Option<ChannelFaultInfo>,
    /// When it was opened, ms since the Unix epoch.
    pub opened_unix_ms: u64,
}

/// What the RM wrote into a channel's error notifier.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelFaultInfo {
    /// ROBUST_CHANNEL_* (`nverror.h`): 31 MMU fault, 32 PBDMA error.
    pub info32: u32,
    pub info16: u32,
    pub status: u32,
    pub time_ns: u64,
    pub reason: String,
}

impl ChannelInfo {
    pub(crate) fn from_wire(c: pb::DmaChannel) -> Self {
        Self {
            channel: c.channel,
            gpu: c.gpu,
            session: c.session,
            uid: c.uid,
            pid: c.pid,
            engine: crate::channel::Engine::from_wire(c.engine),
            entries: c.entries,
            rings: crate::channel::Rings::from_wire(c.rings),
            gp_get: c.gp_get,
            gp_put: c.gp_put,
            fault: c.fault.map(|f| ChannelFaultInfo {
                info32: f.info32,
                info16: f.info16,
                status: f.status,
                time_ns: f.time_ns,
                reason: f.reason,
            }),
            opened_unix_ms: c.opened_unix_ms,
        }
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
                })
                .collect(),
            quota_per_uid_bytes: r.quota_per_uid_bytes,
            quota_per_device_bytes: r.quota_per_device_bytes,
        }
    }
}
