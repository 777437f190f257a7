//! What `take` fails with ([`TakeError`], one variant per failed step, naming the
//! device and the step) and what a give-back that still succeeded warns of
//! ([`AttachWarning`]). Both stay typed up to `service::status`, which makes the line;
//! a `TakeError` says what it is to programs itself (its `Classify`: reason, device,
//! step), delegating to `ResizeError`'s and `ResetError`'s beside them.

use std::{io, time::Duration};

use super::{
    Mode,
    holders::{self, Holder},
    journal,
    preflight::Concern,
    reset, resize,
};
use crate::{
    error::{Class, Classify, Reason},
    pci::Bdf,
    sys::mmio::MmioError,
    vfio::VfioError,
};

/// A step that failed, naming the device and the step.
#[derive(Debug, thiserror::Error)]
pub enum TakeError {
    #[error("{bdf} is already held by rig ({mode} mode)")]
    AlreadyHeld { bdf: Bdf, mode: Mode },
    #[error("{bdf} is not held by rig")]
    NotHeld { bdf: Bdf },
    #[error(
        "Another process holds the lock on {bdf}'s config (another rigd, or a tool that honours it)"
    )]
    Locked { bdf: Bdf },
    #[error("Refusing to detach {bdf}: {}", list(.concerns))]
    Refused { bdf: Bdf, concerns: Vec<Concern> },
    #[error(
        "Sysfs mode is not allowed by the configuration (take.allow_sysfs_mode): DMA would be unconfined"
    )]
    SysfsModeNotAllowed,
    #[error("{bdf} is already bound to vfio-pci by someone else")]
    ForeignVfio { bdf: Bdf },
    #[error("Failed to {step} for {bdf}")]
    Step {
        bdf: Bdf,
        step: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("Unbinding {bdf} from {driver} did not return within {} s: a process may still hold the device; rig keeps serving, the device stays in the journal", .timeout.as_secs())]
    UnbindTimeout {
        bdf: Bdf,
        driver: String,
        timeout: Duration,
    },
    #[error(
        "Unbinding {bdf} from {driver} has not returned for {for_s} s since an earlier request timed out: its worker is still in the kernel, so no second one is started"
    )]
    UnbindStuck {
        bdf: Bdf,
        driver: String,
        for_s: u64,
    },
    #[error("{bdf} did not bind to {want} (driver is now {})", .got.as_deref().unwrap_or("none"))]
    WrongDriver {
        bdf: Bdf,
        want: String,
        got: Option<String>,
    },
    #[error(
        "IOMMU group {group} of {bdf} is not viable: every member must be bound to vfio-pci or to nothing"
    )]
    NotViable { bdf: Bdf, group: String },
    #[error(
        "{bdf} has no IOMMU group: vfio mode needs an IOMMU (try --mode sysfs where the config allows it)"
    )]
    NoIommuGroup { bdf: Bdf },
    #[error("Failed to {} for {bdf}", .source.step())]
    Vfio {
        bdf: Bdf,
        #[source]
        source: VfioError,
    },
    #[error(transparent)]
    Resize(#[from] resize::ResizeError),
    #[error(transparent)]
    Reset(#[from] reset::ResetError),
    #[error("Failed to write the journal before a step on {bdf}")]
    Journal {
        bdf: Bdf,
        #[source]
        source: journal::JournalError,
    },
    #[error(
        "{bdf} is still held by {} after its lease ended (a descriptor or a mapping of it): rigd keeps it out of use; end {}, then give it back (rigctl attach)",
        holders::list(.holders), if .holders.len() == 1 { "it" } else { "them" }
    )]
    LeaseKept { bdf: Bdf, holders: Vec<Holder> },
    #[error(
        "{bdf} is still held by {} from its lease before rigd restarted: rigd keeps its bus mastering off and takes it back by itself once {} exit{}",
        if .holders.is_empty() { "a process rigd could not name".to_owned() } else { holders::list(.holders) },
        if .holders.len() == 1 { "that process" } else { "they" },
        if .holders.len() == 1 { "s" } else { "" }
    )]
    HeldAcrossRestart { bdf: Bdf, holders: Vec<Holder> },
    #[error("{bdf} has no memory BAR {bar} mapped by rig (mapped: {})", bar_list(.mapped))]
    NoBar { bdf: Bdf, bar: u32, mapped: Vec<u8> },
    #[error("Refused a register access to BAR{bar} of {bdf}")]
    Mmio {
        bdf: Bdf,
        bar: u8,
        #[source]
        source: MmioError,
    },
    #[error("Failed to read {bdf}")]
    Read {
        bdf: Bdf,
        #[source]
        source: crate::pci::PciError,
    },
}

impl Classify for TakeError {
    fn class(&self) -> Class {
        use Reason as R;
        let (reason, bdf, step) = match self {
            Self::Resize(r) => return r.class(),
            Self::Reset(r) => return r.class(),
            // A function that could not be read says why as `pci` does, at step `read`.
            Self::Read { bdf, source } => return source.class().on(bdf).at("read"),
            Self::SysfsModeNotAllowed => return R::SysfsModeNotAllowed.into(),
            Self::UnbindTimeout { bdf, .. } => (R::UnbindTimeout, bdf, Some("unbind")),
            Self::UnbindStuck { bdf, .. } => (R::UnbindStuck, bdf, Some("unbind")),
            Self::Mmio { bdf, .. } => (R::MmioRefused, bdf, Some("mmio")),
            Self::AlreadyHeld { bdf, .. } => (R::AlreadyHeld, bdf, None),
            Self::NotHeld { bdf } => (R::NotHeld, bdf, None),
            Self::Refused { bdf, .. } => (R::Refused, bdf, Some("preflight")),
            Self::ForeignVfio { bdf } => (R::ForeignVfio, bdf, None),
            Self::NotViable { bdf, .. } => (R::GroupNotViable, bdf, None),
            Self::NoIommuGroup { bdf } => (R::NoIommuGroup, bdf, None),
            Self::NoBar { bdf, .. } => (R::NoBar, bdf, None),
            Self::Locked { bdf } => (R::Locked, bdf, None),
            Self::LeaseKept { bdf, .. } => (R::LeaseKept, bdf, Some("reclaim")),
            Self::HeldAcrossRestart { bdf, .. } => (R::HeldAcrossRestart, bdf, Some("recover")),
            Self::Step { bdf, step, .. } => (R::StepFailed, bdf, Some(*step)),
            Self::Vfio { bdf, source } => (R::Vfio, bdf, Some(source.step())),
            Self::WrongDriver { bdf, .. } => (R::WrongDriver, bdf, Some("bind")),
            Self::Journal { bdf, .. } => (R::Journal, bdf, Some("journal")),
        };
        let class = Class::new(reason).on(bdf);
        match step {
            Some(s) => class.at(s),
            None => class,
        }
    }
}

fn bar_list(bars: &[u8]) -> String {
    if bars.is_empty() {
        return "none".into();
    }
    bars.iter()
        .map(|b| format!("BAR{b}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn list(c: &[Concern]) -> String {
    c.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// What went wrong in a give-back that still gave the device back.
#[derive(Debug, thiserror::Error)]
pub enum AttachWarning {
    #[error("{bdf} has no reset method; given back without a reset")]
    NoReset { bdf: Bdf },
    /// A device its driver can still take is better off with it than with no one.
    #[error(transparent)]
    Reset(reset::ResetError),
    #[error("Failed to disable {bdf} (its `enable` file) after its sysfs-mode hold")]
    Disable {
        bdf: Bdf,
        #[source]
        source: io::Error,
    },
    #[error("KFD refused processes after the rebind; amdgpu was reloaded")]
    KfdReloaded,
    #[error("KFD refuses processes after the rebind and reloading amdgpu failed")]
    KfdReloadFailed(#[source] io::Error),
    #[error(
        "KFD refuses processes after the rebind; {users} devices use amdgpu, so it was not reloaded: run `modprobe -r amdgpu && modprobe amdgpu` when they are idle"
    )]
    KfdInUse { users: usize },
}
