//! What an error of rigd's says about itself to programs: a stable [`Reason`] (the
//! `reason` of docs/errors.md's `google.rpc.ErrorInfo`), the device and the step it
//! concerns. Each stage's error classifies itself once ([`Classify`], beside the
//! error's enum); `service::status` only consumes that, turning a reason into the
//! wire's codes (the gRPC code, each side-socket reply's code) and the error into its
//! one line.
//!
//! Flow: `pci`, `take`, `dma`, `queue`, `nvme`, `channels`, `gpumem`, `policy` → `rig` (whose
//! error delegates to the stage's) → `service::status`. This module imports nothing of
//! the crate, so every stage may use it.
//!
//! Also here: [`chain`], the one walk over an error's causes (the edge flattens it into
//! a line; `dma` compares two errors cause by cause).
//!
//! Not here: the codes of the wire (`service::status`), the words of each failure (the
//! errors' own `Display`).

use std::{error::Error, fmt::Display};

macro_rules! reasons {
    ($( $(#[$doc:meta])* $name:ident = $text:literal, )*) => {
        /// A stable reason: the UPPER_SNAKE word a program reads in an error status's
        /// ErrorInfo, the same on gRPC and on the side socket. One is never renamed; a
        /// new one may be added (docs/errors.md lists them all).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Reason {
            $( $(#[$doc])* $name, )*
        }

        impl Reason {
            /// Every reason, in docs/errors.md's order.
            pub const ALL: &[Reason] = &[$(Reason::$name,)*];

            /// The word on the wire.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Reason::$name => $text,)*
                }
            }
        }
    };
}

reasons! {
    /// Not a PCI address.
    BadAddress = "BAD_ADDRESS",
    /// Something the request asks that rigd cannot do as asked: a field it does not
    /// know, rings outside their lease, a device that is not the session's.
    BadRequest = "BAD_REQUEST",
    /// No such PCI function in sysfs.
    NoDevice = "NO_DEVICE",
    /// Config space shorter than its header.
    ShortConfig = "SHORT_CONFIG",
    /// A malformed sysfs `resource` file.
    BadResourceFile = "BAD_RESOURCE_FILE",
    /// Sysfs refused rigd a read.
    SysfsPermissionDenied = "SYSFS_PERMISSION_DENIED",
    /// Any other failed sysfs read.
    SysfsUnreadable = "SYSFS_UNREADABLE",
    /// The call needs the admin role.
    NotAdmin = "NOT_ADMIN",
    /// The call needs the client role.
    NotClient = "NOT_CLIENT",
    /// `take.allow_sysfs_mode` is off.
    SysfsModeNotAllowed = "SYSFS_MODE_NOT_ALLOWED",
    /// The connection has no SO_PEERCRED.
    NoPeerCredentials = "NO_PEER_CREDENTIALS",
    /// Another operation on the device is under way.
    Busy = "BUSY",
    /// Another process holds the device's config lock.
    Locked = "LOCKED",
    /// Taken twice.
    AlreadyHeld = "ALREADY_HELD",
    /// Not held by rig.
    NotHeld = "NOT_HELD",
    /// The preflight's concerns.
    Refused = "REFUSED",
    /// Someone else bound it to vfio-pci.
    ForeignVfio = "FOREIGN_VFIO",
    /// The IOMMU group is not viable.
    GroupNotViable = "GROUP_NOT_VIABLE",
    /// No IOMMU group.
    NoIommuGroup = "NO_IOMMU_GROUP",
    /// No such memory BAR mapped.
    NoBar = "NO_BAR",
    /// A register access outside what is allowed.
    MmioRefused = "MMIO_REFUSED",
    /// The host driver did not let go in time.
    UnbindTimeout = "UNBIND_TIMEOUT",
    /// An earlier unbind that timed out is still in the kernel.
    UnbindStuck = "UNBIND_STUCK",
    /// Bound to another driver than asked.
    WrongDriver = "WRONG_DRIVER",
    /// A sysfs write of the take-over failed.
    StepFailed = "STEP_FAILED",
    /// A VFIO step failed.
    Vfio = "VFIO",
    /// The journal could not be written.
    Journal = "JOURNAL",
    /// A BAR size the capability does not list.
    BarSizeUnsupported = "BAR_SIZE_UNSUPPORTED",
    /// A BAR the capability does not list.
    BarNotResizable = "BAR_NOT_RESIZABLE",
    /// No Resizable BAR capability.
    NotResizable = "NOT_RESIZABLE",
    /// No `resourceN_resize` file.
    NoResizeFile = "NO_RESIZE_FILE",
    /// A driver is bound, so the BAR cannot be resized.
    DriverBound = "DRIVER_BOUND",
    /// Any other resize failure.
    ResizeFailed = "RESIZE_FAILED",
    /// No reset method.
    NoResetMethod = "NO_RESET_METHOD",
    /// A reset method the device does not support.
    ResetMethodUnsupported = "RESET_METHOD_UNSUPPORTED",
    /// Config space did not come back after a reset.
    ResetRestore = "RESET_RESTORE",
    /// Any other reset failure.
    ResetFailed = "RESET_FAILED",
    /// A lent queue of depth 0.
    QueueDepthZero = "QUEUE_DEPTH_ZERO",
    /// A lent queue deeper than allowed.
    QueueDepthOverLimit = "QUEUE_DEPTH_OVER_LIMIT",
    /// Queues per client.
    QueueLimit = "QUEUE_LIMIT",
    /// No free queue id.
    NoQueueId = "NO_QUEUE_ID",
    /// Not one of the session's queues.
    UnknownQueue = "UNKNOWN_QUEUE",
    /// A function that lends to one client at a time serves another.
    FunctionBusy = "FUNCTION_BUSY",
    /// The controller refused a queue step.
    QueueDevice = "QUEUE_DEVICE",
    /// A controller rigd cannot drive.
    NvmeUnsupported = "NVME_UNSUPPORTED",
    /// Any other NVMe admin failure.
    NvmeAdminFailed = "NVME_ADMIN_FAILED",
    /// No `[lease]` rule lets this uid lease the device whole.
    LeaseNotAllowed = "LEASE_NOT_ALLOWED",
    /// Leased whole to another session.
    Leased = "LEASED",
    /// Others hold memory or queues on the device.
    LeaseInUse = "LEASE_IN_USE",
    /// The session does not lease the device.
    NotLeased = "NOT_LEASED",
    /// A process kept the leased device.
    LeaseKept = "LEASE_KEPT",
    /// A holder from before rigd restarted still has the device.
    HeldAcrossRestart = "HELD_ACROSS_RESTART",
    /// Taking a leased device back failed.
    LeaseReclaimFailed = "LEASE_RECLAIM_FAILED",
    /// No DMA pool for that device.
    NoPool = "NO_POOL",
    /// Too many sessions opened and not claimed.
    TooManyPending = "TOO_MANY_PENDING",
    /// rigd's socket has no path, so no side socket.
    DmaOff = "DMA_OFF",
    /// rigd itself failed.
    Internal = "INTERNAL",
    /// A lease of zero bytes.
    ZeroSize = "ZERO_SIZE",
    /// Not a multiple of the block size.
    Misaligned = "MISALIGNED",
    /// More than a lease or the pool can ever hold.
    Oversized = "OVERSIZED",
    /// A malformed side-socket packet.
    Protocol = "PROTOCOL",
    /// A ring, pushbuffer or channel window of a size not allowed.
    BadRing = "BAD_RING",
    /// Over the uid's quota.
    Quota = "QUOTA",
    /// No free blocks (or channel windows) now.
    Exhausted = "EXHAUSTED",
    /// The session has the most channels it may have.
    ChannelLimit = "CHANNEL_LIMIT",
    /// Sysfs mode: no physically contiguous run that long.
    NotContiguous = "NOT_CONTIGUOUS",
    /// The session's device serves no channels.
    NotServed = "NOT_SERVED",
    /// Not a lease of this session.
    UnknownLease = "UNKNOWN_LEASE",
    /// Not one of this session's channels.
    UnknownChannel = "UNKNOWN_CHANNEL",
    /// Unknown session, wrong token or peer, not claimed.
    BadSession = "BAD_SESSION",
    /// Rings in GPU memory: not for this uid.
    GpuRingsRefused = "GPU_RINGS_REFUSED",
    /// The GPU's driver refused a step.
    Rm = "RM",
    /// Not GPU memory of this session.
    UnknownGpuMemory = "UNKNOWN_GPU_MEMORY",
    /// A CPU view of GPU memory: not for this uid.
    CpuViewRefused = "CPU_VIEW_REFUSED",
    /// A channel of the session faulted: rigd freed its channels and opens no more
    /// for it (a new session may).
    ChannelFaulted = "CHANNEL_FAULTED",
    /// The GPU needs a reset (or is gone): rigd lends nothing on it until it is back.
    GpuLost = "GPU_LOST",
    /// The uid's kernel held the GPU past the RM's context switch timeout: it opens no
    /// channel until `[channels] switch_timeout_penalty_s` has passed.
    GpuTime = "GPU_TIME",
    /// No such shared event: a handle not the session's, or a token never given.
    UnknownEvent = "UNKNOWN_EVENT",
    /// A shared event of another uid.
    EventRefused = "EVENT_REFUSED",
    /// The shared event's exporter ended or closed it.
    EventGone = "EVENT_GONE",
    /// The session holds the most shared events it may.
    EventLimit = "EVENT_LIMIT",
}

/// What an error says to programs beside its line: its reason, and the device and the
/// step it concerns where it names them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Class {
    pub reason: Reason,
    /// A PCI address (normalised), or a DMA pool's or served GPU's name.
    pub device: Option<String>,
    /// The step that failed, in the error's words (`unbind`, `reset`, a sysfs write).
    pub step: Option<&'static str>,
}

impl Class {
    /// A class with no device or step.
    pub fn new(reason: Reason) -> Self {
        Self {
            reason,
            device: None,
            step: None,
        }
    }

    /// This class, on `device`.
    #[must_use]
    pub fn on(mut self, device: impl Display) -> Self {
        self.device = Some(device.to_string());
        self
    }

    /// This class, at `step`.
    #[must_use]
    pub fn at(mut self, step: &'static str) -> Self {
        self.step = Some(step);
        self
    }
}

impl From<Reason> for Class {
    fn from(reason: Reason) -> Self {
        Self::new(reason)
    }
}

/// An error that knows what it says to programs.
pub trait Classify: Error {
    /// Its reason, device and step.
    fn class(&self) -> Class;
}

/// `e` and its causes, outermost first: the one walk over an error chain.
pub fn chain<'a>(e: &'a (dyn Error + 'a)) -> impl Iterator<Item = &'a (dyn Error + 'a)> {
    std::iter::successors(Some(e), |&e| e.source().map(|c| c as &(dyn Error + 'a)))
}

/// `e` and its causes on one line, joined by ": ": what a status reply or a report
/// (a pool's last problem) shows of an error.
pub fn line(e: &dyn Error) -> String {
    let words: Vec<String> = chain(e).map(ToString::to_string).collect();
    words.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] Middle);

    #[derive(Debug, thiserror::Error)]
    #[error("middle")]
    struct Middle(#[source] std::io::Error);

    #[test]
    fn the_chain_walks_every_cause_outermost_first() {
        let e = Outer(Middle(std::io::Error::other("inner")));
        let words: Vec<String> = chain(&e).map(ToString::to_string).collect();
        assert_eq!(words, ["outer", "middle", "inner"]);
    }

    #[test]
    fn every_reason_is_upper_snake_and_its_own() {
        let mut seen = std::collections::BTreeSet::new();
        for r in Reason::ALL {
            let s = r.as_str();
            assert!(
                s.starts_with(|c: char| c.is_ascii_uppercase())
                    && s.chars()
                        .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'),
                "{r:?}: {s}"
            );
            assert!(seen.insert(s), "{s} twice");
        }
    }

    #[test]
    fn docs_errors_md_names_every_reason() {
        let doc = include_str!("../../docs/errors.md");
        let missing: Vec<&str> = Reason::ALL
            .iter()
            .map(|r| r.as_str())
            .filter(|s| !doc.contains(&format!("`{s}`")))
            .collect();
        assert!(missing.is_empty(), "docs/errors.md lacks {missing:?}");
    }
}
