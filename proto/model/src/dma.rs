//! The DMA vocabulary: a session's and a lease's handles ([`SessionId`], [`LeaseId`]),
//! how a pool's device reaches its memory ([`Addressing`]), and rigd's report of its
//! pools and sessions ([`DmaStatus`]).
//!
//! Flow: rigd's `dma` counts its pools and sessions into a [`DmaStatus`] → `rig-proto`
//! (`convert::dma`, once each way) → `rig-client` (`Client::dma_status`) → `rigctl dma
//! --json`, which prints it with serde: these are the documented JSON schema
//! (docs/rigctl-json.md, "DMA and queues"). Handles are numbers on the wire and in
//! JSON (`#[serde(transparent)]`), typed everywhere else so that a session cannot be
//! passed where a lease is meant.
//!
//! One module because these are the words both sides of a DMA session use: rigd had
//! its own `DmaStatus`, `PoolStatus`, `ClientUse`, `SessionId` and `LeaseId`, and
//! rig-client another of each (and `Addressing`). Not here: the addresses themselves
//! (`addr`: [`Addressing`] says which kind a session's [`DeviceAddr`](crate::addr::DeviceAddr)s are),
//! pools and leases (rigd's `dma`), the ledger of what a client maps (rig-client's
//! `session`).

use std::fmt;

use serde::{Deserialize, Serialize};

/// A DMA session's number (not a secret: its one-time token is).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct SessionId(pub u64);

/// A lease's handle, valid in the session that made it.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct LeaseId(pub u64);

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl fmt::Display for LeaseId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// How a pool's device reaches its memory: which kind of address a lease's device
/// address is ([`crate::addr::DeviceAddr`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
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

/// Pools and sessions at one moment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DmaStatus {
    pub pools: Vec<PoolStatus>,
    /// Every session for root; the caller's own otherwise.
    pub clients: Vec<ClientUse>,
    pub quota_per_uid_bytes: u64,
    pub quota_per_device_bytes: u64,
    /// Each served GPU's lent GPU memory (docs/compute.md, "GPU memory").
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
    /// Spare pages rigd made ahead for leases, lent to no one.
    #[serde(default)]
    pub spare_bytes: u64,
    /// The quotas in force: one uid's sessions together, and all of them.
    pub per_uid_bytes: u64,
    pub per_gpu_bytes: u64,
}

/// One device's pool, counted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PoolStatus {
    pub name: String,
    pub addressing: Addressing,
    pub block_bytes: u64,
    /// The configured size.
    pub target_blocks: u32,
    /// Pinned and ready to lease.
    pub free_blocks: u32,
    pub leased_blocks: u32,
    /// Reached by a device without an IOMMU: kept until the device is reset.
    pub quarantined_blocks: u32,
    /// Still to be pinned, or being pinned now (start-up or refill).
    pub pinning_blocks: u32,
    /// The initial fill's rate, once done (never zero).
    pub pin_gib_per_s: Option<f64>,
    /// The last pinning failure, its causes joined by ": " (never empty).
    pub problem: Option<String>,
}

/// One session's use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientUse {
    pub session: SessionId,
    pub uid: u32,
    pub pid: i32,
    /// The pool's name: a device address, or a host pool's name.
    pub device: String,
    pub leases: u32,
    pub bytes: u64,
    /// Its side socket is attached.
    pub claimed: bool,
    /// GPU memory it holds on a served GPU: allocations and bytes.
    pub gpu_memory_allocations: u32,
    pub gpu_memory_bytes: u64,
    /// Events shared between sessions it holds on a served GPU: exported, imported.
    pub events_exported: u32,
    pub events_imported: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_print_and_serialise_as_plain_numbers() {
        assert_eq!(SessionId(7).to_string(), "7");
        assert_eq!(LeaseId(9).to_string(), "9");
        assert_eq!(serde_json::to_string(&SessionId(7)).expect("json"), "7");
        assert_eq!(
            serde_json::to_string(&Addressing::GpuVa).expect("json"),
            "\"gpu_va\""
        );
    }
}
