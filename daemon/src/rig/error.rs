//! What `Rig` fails with: [`RigError`], the stages' errors passed through and its own
//! refusals (busy, leased, not allowed), and [`RequestError`], what was bad in a
//! request it cannot do as asked. Both stay typed up to `service`; `RigError` says what
//! it is to programs itself (its `Classify`, delegating to the stage's error).

use std::sync::Arc;

use crate::{
    channels::ChannelError,
    dma::DmaError,
    error::{Class, Classify, Reason},
    pci::{Bdf, BdfError, PciError},
    take::TakeError,
};

/// What a request to `Rig` can fail with.
#[derive(Debug, thiserror::Error)]
pub enum RigError {
    #[error(transparent)]
    BadAddress(#[from] BdfError),
    #[error(transparent)]
    Pci(#[from] PciError),
    #[error(transparent)]
    Take(#[from] TakeError),
    #[error(transparent)]
    Dma(#[from] DmaError),
    #[error(transparent)]
    Channel(#[from] ChannelError),
    #[error(transparent)]
    GpuMemory(#[from] crate::gpumem::GpuMemError),
    #[error(transparent)]
    Event(#[from] crate::events::EventError),
    #[error("Another operation on {bdf} is under way; try again when it ends")]
    Busy { bdf: Bdf },
    #[error(transparent)]
    Nvme(#[from] crate::nvme::NvmeError),
    #[error(transparent)]
    Queue(#[from] crate::queue::QueueError),
    #[error(transparent)]
    BadRequest(#[from] RequestError),
    #[error("Failed to enable MSI-X of {bdf} for lent queues")]
    EnableMsix {
        bdf: Bdf,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("{bdf} is leased whole to uid {uid} (pid {pid}, session {session}){}; rigd refuses other requests on it until the lease ends", if .failed.is_some() { ", and taking it back failed" } else { "" })]
    Leased {
        bdf: Bdf,
        uid: u32,
        pid: i32,
        session: u64,
        #[source]
        failed: Option<Arc<RigError>>,
    },
    #[error(
        "uid {uid} may not lease {bdf} whole: that needs the admin role ({}) or a [lease] rule naming the device and the caller", admins_phrase(.admins)
    )]
    LeaseNotAllowed {
        bdf: Bdf,
        uid: u32,
        /// The groups that grant the admin role.
        admins: Vec<String>,
    },
    #[error("{bdf} cannot be leased whole now: {why}")]
    LeaseInUse { bdf: Bdf, why: String },
    #[error("{bdf} is not leased whole by this session")]
    NotLeased { bdf: Bdf },
    #[error(
        "Failed to take {bdf} back from its lease; it stays out of use until an admin gives it back"
    )]
    Reclaim {
        bdf: Bdf,
        #[source]
        source: Arc<RigError>,
    },
}

/// What was bad in a request `Rig` cannot do as asked: a field this rigd does not know
/// (a newer client's), or what it asks of a device or a lease.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error("{field} = {value} is a value this rigd does not know ({knows})")]
    UnknownValue {
        field: &'static str,
        value: i32,
        knows: &'static str,
    },
    #[error("{field} holds no size this rigd knows (keep, max, bytes)")]
    NoSize { field: &'static str },
    #[error("a resize needs a size: max or e.g. 32G")]
    ResizeWithoutSize,
    #[error("a register access is 8, 16, 32 or 64 bits, not {bits}")]
    Width { bits: u32 },
    #[error("BAR {bar} does not exist")]
    NoSuchBar { bar: u32 },
    #[error("pool {pool} is no device's")]
    PoolOfNoDevice { pool: String },
    #[error("lent queues need a device held in vfio mode (IOVA leases)")]
    QueueWithoutIova,
    #[error(
        "a queue of depth {depth} needs {need:#x} page-aligned bytes at offset {offset:#x} of a {bytes:#x}-byte lease"
    )]
    QueueOutsideLease {
        depth: u32,
        need: u64,
        offset: u64,
        bytes: u64,
    },
    #[error("{bdf} is held in sysfs mode; lent queues need vfio mode")]
    QueueInSysfsMode { bdf: Bdf },
    #[error(
        "queue {qid} shares its shadow page with another of this session's queues; ask with the same lease and offset layout"
    )]
    ShadowPageShared { qid: u16 },
    #[error("{bdf} is not an NVMe controller (class {}); only NVMe queues are lent yet", .class.as_deref().unwrap_or("unknown"))]
    NotNvme { bdf: Bdf, class: Option<String> },
    #[error(
        "this session is on {pool}'s pool; a session leases the device it was opened on, not {bdf}"
    )]
    NotTheSessionsDevice { pool: String, bdf: Bdf },
}

impl Classify for RigError {
    /// A stage's error classifies itself; `Rig`'s own refusals name their device.
    fn class(&self) -> Class {
        match self {
            Self::BadAddress(e) => e.class(),
            Self::Pci(e) => e.class(),
            Self::Take(e) => e.class(),
            Self::Dma(e) => e.class(),
            Self::Channel(e) => e.class(),
            Self::GpuMemory(e) => e.class(),
            Self::Event(e) => e.class(),
            Self::Nvme(e) => e.class(),
            Self::Queue(e) => e.class(),
            // A device's failure to enable MSI-X has always said BAD_REQUEST: the
            // contract keeps the reason.
            Self::BadRequest(_) | Self::EnableMsix { .. } => Reason::BadRequest.into(),
            Self::Busy { bdf } => Class::new(Reason::Busy).on(bdf),
            Self::Leased { bdf, .. } => Class::new(Reason::Leased).on(bdf),
            Self::LeaseNotAllowed { bdf, .. } => Class::new(Reason::LeaseNotAllowed).on(bdf),
            Self::LeaseInUse { bdf, .. } => Class::new(Reason::LeaseInUse).on(bdf),
            Self::NotLeased { bdf } => Class::new(Reason::NotLeased).on(bdf),
            Self::Reclaim { bdf, .. } => Class::new(Reason::LeaseReclaimFailed).on(bdf),
        }
    }
}

fn admins_phrase(admins: &[String]) -> String {
    if admins.is_empty() {
        return "root".to_owned();
    }
    let named: Vec<_> = admins.iter().map(|g| format!("`{g}`")).collect();
    format!("root and members of {}", named.join(", "))
}
