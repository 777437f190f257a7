//! DMA memory: per device, a pool of pinned 2 MiB hugepage blocks with device
//! addresses, leased in whole blocks to clients and reclaimed when they go.
//!
//! Flow: `service::dma` (gRPC session + side socket) → [`Pools`] (sessions, quotas,
//! handles) → [`Pool`] (blocks, device addresses) → `block` (one sealed hugetlb memfd,
//! mapped, faulted and locked) → `rig_sys::{memfd, mman}` (shared with rig-client) and
//! `sys::{memfd, pagemap}` (rigd's own: fallocate, physical addresses). Device addresses come
//! from the pool's [`PoolMode`]: none on the host, physical addresses from pagemap in
//! sysfs mode, IOVA from [`IovaAllocator`] mapped through [`IommuMap`] in vfio mode.
//!
//! State: [`Pools`] owns the pools by device name and every session's leases behind
//! one mutex; each [`Pool`] has its own mutex over its free, leased and quarantined
//! blocks, and a pinner thread that fills it at start and refills it after each
//! release. Lock order: sessions, then a pool. IOMMU map calls run under the pool's
//! lock, never under the sessions lock, and never on an async worker: the side socket
//! calls leases and releases of a vfio pool from a blocking thread.
//!
//! Invariants: a block whose descriptor left rigd is never lent again — its file is
//! punched and closed, and a fresh file takes its place — so a client that kept a
//! mapping or a descriptor cannot reach the next client's memory. A freed block leaves
//! the IOMMU before its pages leave the file. In sysfs mode (no IOMMU) a leased block's
//! pages stay with rigd until the device is reset ([`Pools::device_reset`]), because
//! the device may still write them. A block whose IOMMU unmap failed is never freed:
//! its pool keeps it out of use, and when the pool goes it stays pinned and mapped
//! until rigd exits.
//!
//! References: memfd_create(2), fcntl(2) file seals, Documentation/admin-guide/mm/
//! {hugetlbpage,pagemap}.rst, include/uapi/linux/vfio.h (`VFIO_IOMMU_MAP_DMA`,
//! `VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE`). Not here: the VFIO container (`vfio`, whose
//! `vfio::Iommu` implements [`IommuMap`]); the wire protocol (`service::dma`).

mod block;
#[cfg(any(test, feature = "fakes"))]
mod fake;
pub mod hugepages;
mod iova;
mod pool;
mod pools;
mod session;

use std::{fmt, io, ops::RangeInclusive, path::PathBuf};

use crate::error::{Class, Classify, Reason};

pub use block::BlockStep;
pub use hugepages::HugepageError;
pub use iova::{IovaAllocator, IovaError};
pub use pool::{ALIAS_PAGE, LeasedBlocks, Pool, PoolSpec};
pub use pools::{Grant, Pools, SessionTicket};
pub use session::{LeaseId, SessionId, Token, new_token, same_token};

#[cfg(any(test, feature = "fakes"))]
pub use fake::{FakeIommu, IommuCall};
pub use rig_sys::memfd::Backing;

/// The size of a block: one 2 MiB hugepage.
pub const BLOCK_SIZE: u64 = 2 << 20;
/// The most blocks one lease may hold: one packet carries at most 253 descriptors
/// (`SCM_MAX_FD`), one per block.
pub const MAX_LEASE_BLOCKS: u32 = 250;

/// The address-space newtypes, and the address a device uses for a lease's first
/// byte ([`DeviceAddr`]: an IOVA, a physical address or a GPU VA, as the pool's mode
/// gives), are the shared vocabulary's (`rig_model::addr`); so are the pool report's
/// types (`rig_model::dma`).
pub use rig_model::{
    addr::{DeviceAddr, GpuVa, HostVa, Iova, PhysAddr},
    dma::{Addressing, ClientUse, DmaStatus, PoolStatus},
};

/// Maps host memory for a device: implemented by `vfio::Iommu` (a VFIO container),
/// and by `FakeIommu` in tests.
#[expect(
    unsafe_code,
    reason = "map's caller owes the mapping's lifetime; the one call is in dma::pool"
)]
pub trait IommuMap: Send + Sync + fmt::Debug {
    /// IOVA ranges the IOMMU accepts (VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE).
    fn iova_ranges(&self) -> Vec<RangeInclusive<u64>>;
    /// The IOMMU's page-size bitmap (`iova_pgsizes`).
    fn page_sizes(&self) -> u64;
    /// Maps `len` bytes at `host` so the device reaches them at `iova`.
    ///
    /// # Safety
    /// `host` must stay mapped (and not be freed) until `unmap` of the same range
    /// returns.
    ///
    /// # Errors
    /// [`DmaError::Map`] with the ioctl's error.
    unsafe fn map(&self, iova: Iova, host: HostVa, len: u64) -> Result<(), DmaError>;
    /// Removes a mapping `map` made; the device faults on it afterwards.
    ///
    /// # Errors
    /// [`DmaError::Unmap`] with the ioctl's error.
    fn unmap(&self, iova: Iova, len: u64) -> Result<(), DmaError>;
}

/// Maps lease blocks into one session's own device address space: implemented by
/// `nvrm::AddressSpace` (a client's GPU VA space on an RM-served GPU). Unlike
/// [`IommuMap`], one per session, not per pool, and handed each block's mapping, so
/// no raw address crosses it.
pub trait DeviceMap: Send + Sync + fmt::Debug {
    /// The addresses a pool may pick in this space.
    fn va_range(&self) -> RangeInclusive<u64>;
    /// Maps all of `block` at `va`.
    ///
    /// # Errors
    /// [`DmaError::DeviceMap`].
    fn map_block(&self, va: u64, block: &rig_sys::mman::Mapping) -> Result<(), DmaError>;
    /// Unmaps every block mapped in `va..va + len`; the device faults on them after.
    ///
    /// # Errors
    /// [`DmaError::DeviceUnmap`]: some block may still be reachable.
    fn unmap(&self, va: u64, len: u64) -> Result<(), DmaError>;
}

/// How a pool's device reaches its blocks.
#[derive(Debug, Clone)]
pub enum PoolMode {
    /// No device (yet): blocks have no device address.
    Host,
    /// A device without an IOMMU: physical addresses, hugepages only.
    Sysfs,
    /// A device behind an IOMMU: IOVA mapped at lease time, unmapped at release.
    Vfio(std::sync::Arc<dyn IommuMap>),
    /// An RM-served GPU: each session maps its leases into its own GPU address space
    /// (its [`DeviceMap`]); addresses come from this range.
    Gpu(RangeInclusive<u64>),
}

impl PoolMode {
    /// "host", "sysfs", "vfio" or "gpu".
    pub fn name(&self) -> &'static str {
        Self::name_of(self.addressing())
    }

    /// How the pool's device reaches its blocks: what its leases' addresses are.
    pub fn addressing(&self) -> Addressing {
        match self {
            Self::Host => Addressing::None,
            Self::Sysfs => Addressing::Physical,
            Self::Vfio(_) => Addressing::Iova,
            Self::Gpu(_) => Addressing::GpuVa,
        }
    }

    /// The name of the mode that gives `addressing` (the metrics' `mode` label).
    pub fn name_of(addressing: Addressing) -> &'static str {
        match addressing {
            Addressing::None => "host",
            Addressing::Physical => "sysfs",
            Addressing::Iova => "vfio",
            Addressing::GpuVa => "gpu",
        }
    }
}

/// What a DMA request can fail with.
#[derive(Debug, thiserror::Error)]
pub enum DmaError {
    #[error("A lease of zero bytes was asked for")]
    ZeroSize,
    #[error("{bytes} bytes is not a multiple of the {block}-byte block")]
    Misaligned { bytes: u64, block: u64 },
    #[error("{bytes} bytes is more than {limit} bytes, the most {what}")]
    Oversized {
        bytes: u64,
        limit: u64,
        what: &'static str,
    },
    #[error("uid {uid} holds {held} bytes {scope}; {bytes} more would pass its quota of {limit}")]
    Quota {
        uid: u32,
        scope: String,
        held: u64,
        bytes: u64,
        limit: u64,
    },
    #[error(
        "Pool {pool} has {free} free blocks now, {wanted} were asked for ({pending} being pinned)"
    )]
    Exhausted {
        pool: String,
        wanted: u32,
        free: u32,
        pending: u32,
    },
    #[error(
        "Pool {pool} has no physically contiguous run of {blocks} blocks (longest free run: {longest}); without an IOMMU a lease larger than a block must be contiguous"
    )]
    NotContiguous {
        pool: String,
        blocks: u32,
        longest: u32,
    },
    #[error("Lease {lease} is not one of this session's")]
    UnknownLease { lease: LeaseId },
    #[error("Bytes {offset:#x}..+{len:#x} are outside lease {lease}")]
    OutOfLease {
        lease: LeaseId,
        offset: u64,
        len: u64,
    },
    #[error("Block at {va} moved from physical {was} to {now}")]
    Moved {
        va: HostVa,
        was: PhysAddr,
        now: PhysAddr,
    },
    #[error("No DMA pool for device `{name}`")]
    NoPool { name: String },
    #[error("A DMA pool for device `{name}` already exists")]
    PoolExists { name: String },
    #[error(
        "uid {uid} has {limit} DMA sessions opened and not yet claimed; claim or close them first"
    )]
    TooManyPending { uid: u32, limit: usize },
    #[error("Session {session}: {why}")]
    BadSession {
        session: SessionId,
        why: &'static str,
    },
    #[error(transparent)]
    Hugepages(#[from] HugepageError),
    #[error("Failed to {step} a DMA block")]
    Block {
        step: BlockStep,
        #[source]
        source: io::Error,
    },
    #[error("The kernel hides physical addresses in pagemap: sysfs mode needs CAP_SYS_ADMIN")]
    NoPhysicalAddress,
    #[error("Block at {va} is not one physically contiguous 2 MiB page")]
    NotHuge { va: HostVa },
    #[error(transparent)]
    Iova(#[from] IovaError),
    #[error("Failed to map IOVA {iova} (+{len:#x} bytes)")]
    Map {
        iova: Iova,
        len: u64,
        #[source]
        source: io::Error,
    },
    #[error("Failed to map a block at GPU VA {va:#x}")]
    DeviceMap {
        va: u64,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("Failed to unmap the block at GPU VA {va:#x}")]
    DeviceUnmap {
        va: u64,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("Session {session} has no GPU address space yet: open it on the side socket first")]
    NoDeviceMap { session: SessionId },
    #[error("Failed to unmap IOVA {iova} (+{len:#x} bytes)")]
    Unmap {
        iova: Iova,
        len: u64,
        #[source]
        source: io::Error,
    },
    #[error("dma.{key}: {why}")]
    Config { key: &'static str, why: String },
    #[error("Cannot alias a page at IOVA {iova}: {why}")]
    BadAlias { iova: Iova, why: &'static str },
    #[error("Failed to read {path} for a session token")]
    Token {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl Classify for DmaError {
    /// A client's mistakes and the pool's limits have reasons of their own, the same
    /// words as the side socket's codes; rigd's own failures are `INTERNAL`.
    fn class(&self) -> Class {
        match self {
            Self::NoPool { name } => Class::new(Reason::NoPool).on(name),
            Self::TooManyPending { .. } => Reason::TooManyPending.into(),
            Self::ZeroSize => Reason::ZeroSize.into(),
            Self::Misaligned { .. } => Reason::Misaligned.into(),
            Self::Oversized { .. } => Reason::Oversized.into(),
            Self::Quota { .. } => Reason::Quota.into(),
            Self::Exhausted { pool, .. } => Class::new(Reason::Exhausted).on(pool),
            Self::NotContiguous { pool, .. } => Class::new(Reason::NotContiguous).on(pool),
            Self::UnknownLease { .. } => Reason::UnknownLease.into(),
            Self::BadSession { .. } => Reason::BadSession.into(),
            Self::OutOfLease { .. }
            | Self::Moved { .. }
            | Self::PoolExists { .. }
            | Self::Hugepages(_)
            | Self::Block { .. }
            | Self::NoPhysicalAddress
            | Self::NotHuge { .. }
            | Self::Iova(_)
            | Self::Map { .. }
            | Self::DeviceMap { .. }
            | Self::DeviceUnmap { .. }
            | Self::NoDeviceMap { .. }
            | Self::Unmap { .. }
            | Self::Config { .. }
            | Self::BadAlias { .. }
            | Self::Token { .. } => Reason::Internal.into(),
        }
    }
}
